//! `meridian-bench overload`: overload and bad peers, against
//! the `destination`, `policy-controller` and `sp-validator` processes on
//! the real local control plane. Three parts, each printing figures:
//!
//! 1. **Stalled clients.** Fan-out latency of endpoint changes on one hot
//!    Service to N `Get` streams, side by side with no stalled client, one,
//!    and many. A stalled client opens a `Get` on the same Service on its
//!    own connection with a 1 KiB stream window and never reads, so its
//!    window is full from the first snapshot on.
//! 2. **Stream floods.** One connection opens streams (`Get` on the
//!    destination, `WatchPort` on the policy controller) ignoring the
//!    advertised `SETTINGS_MAX_CONCURRENT_STREAMS`, until refused: how many
//!    were accepted, what the refusal was, the server's RSS before and
//!    after (bytes per accepted stream), and how long a fresh client waits
//!    for its first answer while the flood holds its streams.
//! 3. **Bad peers.** Connections that send nothing, half a preface or
//!    request head, random bytes, a TLS ClientHello to a plaintext port or
//!    plaintext to a TLS port, held open, on every listening port (gRPC,
//!    admin, webhooks): how many the server closed and how soon, what a
//!    good request costs meanwhile, and each server's tasks, open
//!    connections and RSS before, while held and after, with the
//!    bad-peer counters and log lines.

use std::{
    collections::{BTreeSet, HashMap},
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use linkerd2_proxy_api::{destination::GetDestination, inbound::PortSpec};
use local_cluster::{Lifetime, LocalCa, ManagedProcess};
use prost::Message;
use serde_json::json;
use test_support::raw_h2::{self, Event, RawH2};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    sync::mpsc,
};

use crate::{
    common::{FanOut, free_addr, observe_versions, wait_count, wait_ready},
    destination::{GET_PATH as GET, NS, Plan, populate, request_frame, slice_endpoints, svc_name},
    proxy_client,
    stats::{ms, percentile, rss_bytes},
};

pub(crate) mod bad_peers;
mod flood;
mod stalled;

use bad_peers::{Good, GoodCall, Port, bad_peers, tls_connector};
use flood::flood;
use stalled::stalled_rounds;

const WATCH_PORT: &str = "/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort";

#[derive(clap::Args)]
pub struct Args {
    /// Get streams on the hot Service (part 1).
    #[arg(long, default_value_t = 1_000)]
    streams: usize,
    /// HTTP/2 connections those streams are spread over.
    #[arg(long, default_value_t = 10)]
    connections: usize,
    /// Endpoints of the hot Service.
    #[arg(long, default_value_t = 200)]
    hot_endpoints: usize,
    /// Endpoint changes timed per round.
    #[arg(long, default_value_t = 100)]
    changes: usize,
    /// Stalled clients of the last round (the first rounds have 0 and 1).
    #[arg(long, default_value_t = 100)]
    many_stalled: usize,
    /// Most streams a flood opens on its connection.
    #[arg(long, default_value_t = 20_000)]
    flood_max: usize,
    /// Bad connections of each kind on each port (part 3).
    #[arg(long, default_value_t = 50)]
    bad_per_kind: usize,
    /// The `destination` binary.
    #[arg(long)]
    destination_bin: PathBuf,
    /// The `policy-controller` binary.
    #[arg(long)]
    policy_bin: PathBuf,
    /// The `sp-validator` binary.
    #[arg(long)]
    sp_validator_bin: PathBuf,
}

/// The hot Service is service 0; service 1 is a small one for fresh Gets.
const HOT: usize = 0;

fn get_request(service: usize) -> GetDestination {
    GetDestination {
        scheme: "k8s".into(),
        path: format!("{}.{NS}.svc.cluster.local:80", svc_name(service)),
        context_token: String::new(),
    }
}

fn watch_port_request() -> PortSpec {
    PortSpec {
        workload: format!("{NS}:{}-0", svc_name(1)),
        port: 8080,
    }
}

/// A process under test: its pid, admin address, log and metric prefix.
struct Proc {
    name: &'static str,
    pid: u32,
    admin: SocketAddr,
    log: PathBuf,
    /// `policy_` for the policy controller's registry, else empty.
    prefix: &'static str,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "overload bench: {} Get streams over {} connections on a Service of {} endpoints; floods up to {} streams; {} bad connections of each kind per port",
        args.streams, args.connections, args.hot_endpoints, args.flood_max, args.bad_per_kind
    );
    let work_dir =
        std::env::temp_dir().join(format!("meridian-bench-overload-{}", std::process::id()));
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let plan = Plan {
        sizes: vec![args.hot_endpoints, 4],
    };
    populate(&client, &plan).await?;

    // Webhook certificates for the policy controller and sp-validator.
    let ca = LocalCa::new("bench-ca")?;
    let cert = ca.issue_serving_cert(&["localhost"])?;
    let (crt, key) = (work_dir.join("tls.crt"), work_dir.join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem)?;
    std::fs::write(&key, &cert.key_pem)?;

    let destination =
        crate::common::start_server_at(&cluster, &args.destination_bin, "addr", &[]).await?;
    let policy_webhook = free_addr()?;
    let policy = crate::common::start_server_at(
        &cluster,
        &args.policy_bin,
        "grpc-addr",
        &[
            format!("--server-addr={policy_webhook}"),
            format!("--server-tls-certs={}", crt.display()),
            format!("--server-tls-key={}", key.display()),
        ],
    )
    .await?;
    let (spv_addr, spv_admin) = (free_addr()?, free_addr()?);
    let spv_log = work_dir.join("sp-validator.log");
    let mut sp_validator = ManagedProcess::spawn(
        "sp-validator",
        &args.sp_validator_bin,
        &[
            format!("--addr={spv_addr}"),
            format!("--admin-addr={spv_admin}"),
            format!("--tls-cert={}", crt.display()),
            format!("--tls-key={}", key.display()),
            "--log-level=warn".into(),
        ],
        &spv_log,
        Lifetime::Tied,
    )?;
    wait_ready("sp-validator", spv_admin).await?;
    let spv_pid = sp_validator.pid().context("sp-validator pid")?;
    let tls = tls_connector(&ca)?;

    let missed = stalled_rounds(&args, &client, &plan, destination.grpc).await?;
    // The floods (raw HTTP/2, not counted here) are refused and the bad
    // peers closed on purpose; the Get streams of part 1 stay open
    // meanwhile and must not end.
    crate::ends::phase("floods and bad peers", false);

    let dst = Proc {
        name: "destination",
        pid: destination.pid,
        admin: destination.admin,
        log: destination.log.clone(),
        prefix: "",
    };
    let pol = Proc {
        name: "policy-controller",
        pid: policy.pid,
        admin: policy.admin,
        log: policy.log.clone(),
        prefix: "policy_",
    };
    let spv = Proc {
        name: "sp-validator",
        pid: spv_pid,
        admin: spv_admin,
        log: spv_log,
        prefix: "",
    };
    println!(
        "  stream floods (one connection ignoring SETTINGS_MAX_CONCURRENT_STREAMS, until refused):"
    );
    let get_body = raw_h2::grpc_message(&get_request(HOT).encode_to_vec());
    flood(&args, &dst, destination.grpc, GET, &get_body, || {
        fresh_first_message(destination.grpc, GET, get_request(1))
    })
    .await?;
    let watch_body = raw_h2::grpc_message(&watch_port_request().encode_to_vec());
    flood(&args, &pol, policy.grpc, WATCH_PORT, &watch_body, || {
        fresh_first_message(policy.grpc, WATCH_PORT, watch_port_request())
    })
    .await?;

    println!(
        "  bad peers ({} connections of each kind per port, held open by the client):",
        args.bad_per_kind
    );
    bad_peers(
        &args,
        &dst,
        &[
            Port::grpc(
                "gRPC",
                destination.grpc,
                Good::Grpc(destination.grpc, GoodCall::Get),
            ),
            Port::admin("admin", destination.admin),
        ],
    )
    .await?;
    bad_peers(
        &args,
        &pol,
        &[
            Port::grpc(
                "gRPC",
                policy.grpc,
                Good::Grpc(policy.grpc, GoodCall::WatchPort),
            ),
            Port::admin("admin", policy.admin),
            Port::tls("webhook", policy_webhook, &tls),
        ],
    )
    .await?;
    bad_peers(
        &args,
        &spv,
        &[
            Port::admin("admin", spv_admin),
            Port::tls("webhook", spv_addr, &tls),
        ],
    )
    .await?;

    crate::ends::phase("teardown", true);
    sp_validator.stop(Duration::from_secs(5));
    let mut policy_process = policy.process;
    policy_process.stop(Duration::from_secs(5));
    let mut destination_process = destination.process;
    destination_process.stop(Duration::from_secs(5));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    let (streams, connections) = crate::ends::report();
    println!(
        "  summary: missed updates {missed}, unexpected stream ends {streams}, unexpected connection ends {connections}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------
// Part 1: stalled clients.

/// Connect, call, and read the first message: a fresh client's wait.
async fn fresh_first_message<Req: Message + Send + 'static>(
    addr: SocketAddr,
    path: &'static str,
    request: Req,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let conn = proxy_client::connect_with_windows(
        addr,
        proxy_client::STREAM_WINDOW,
        proxy_client::CONNECTION_WINDOW,
    )
    .await?;
    let mut body = proxy_client::call(&conn, path, proxy_client::frame(&request)).await?;
    tokio::time::timeout(
        Duration::from_secs(30),
        proxy_client::first_message(&mut body),
    )
    .await
    .context("no first message within 30 s")??;
    Ok(t0.elapsed())
}

/// The median of `n` fresh clients' waits.
async fn fresh_median<F, Fut>(n: usize, fresh: &F) -> anyhow::Result<Duration>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Duration>>,
{
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(fresh().await?);
    }
    Ok(percentile(&samples, 50.0))
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or("?".to_string(), |v| format!("{v:.0}"))
}

/// `runtime_tasks_alive` and the whole text of a process's `/metrics`.
async fn metrics_of(server: &Proc) -> (Option<f64>, String) {
    let text = match local_cluster::probe::http_get(server.admin, "/metrics").await {
        Ok((_, text)) => text,
        Err(_) => String::new(),
    };
    let tasks = sample(&text, &format!("{}runtime_tasks_alive", server.prefix));
    (tasks, text)
}

/// The value of the series `series` (name and labels) in a Prometheus text.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.split_whitespace().next()?.parse().ok()
    })
}

/// The sum of every series of `name` whose labels contain `label`.
fn sum_of(metrics: &str, name: &str, label: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

// ---------------------------------------------------------------------------
// Part 3: bad peers.
