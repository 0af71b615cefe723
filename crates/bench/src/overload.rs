//! `meridian-bench overload`: overload and bad peers (issue 13), against
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
    common::{ArrivalCodec, FanOut, connect, free_addr, observe_versions, wait_count, wait_ready},
    destination::{NS, Plan, open_get, populate, slice_endpoints, svc_name},
    stats::{ms, percentile, rss_bytes},
};

const GET: &str = "/io.linkerd.proxy.destination.Destination/Get";
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

    stalled_rounds(&args, &client, &plan, destination.grpc).await?;

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

    sp_validator.stop(Duration::from_secs(5));
    let mut policy_process = policy.process;
    policy_process.stop(Duration::from_secs(5));
    let mut destination_process = destination.process;
    destination_process.stop(Duration::from_secs(5));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    Ok(())
}

// ---------------------------------------------------------------------------
// Part 1: stalled clients.

async fn stalled_rounds(
    args: &Args,
    client: &kube::Client,
    plan: &Plan,
    grpc: SocketAddr,
) -> anyhow::Result<()> {
    let channels = connect(grpc, args.connections).await?;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(AtomicUsize::new(0));
    for i in 0..args.streams {
        open_get(&channels[i % channels.len()], HOT, &events_tx, &ready);
    }
    wait_count(&ready, args.streams).await?;
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let (observer, mut seen_rx) = observe_versions(slices.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;

    let mut stalled = Vec::new();
    let mut rounds = Vec::new();
    let mut not_ready: Option<usize> = None;
    let mut k = 0usize;
    for want in [0, 1, args.many_stalled.max(2)] {
        while stalled.len() < want {
            stalled.push(stalled_client(grpc).await?);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        while events_rx.try_recv().is_ok() {}
        while seen_rx.try_recv().is_ok() {}
        let mut fan_out = FanOut::default();
        for _ in 0..args.changes {
            let size = plan.sizes[HOT];
            not_ready = match not_ready {
                Some(_) => None,
                None => Some(k % size.max(1)),
            };
            let patch = json!({ "endpoints": slice_endpoints(HOT, size, not_ready) });
            let t0 = Instant::now();
            let patched = slices
                .patch(
                    &svc_name(HOT),
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await?;
            let rv = patched.metadata.resource_version.unwrap_or_default();
            fan_out
                .record(k, t0, &rv, HOT, args.streams, &mut events_rx, &mut seen_rx)
                .await?;
            k += 1;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        rounds.push((want, fan_out));
    }
    observer.abort();
    println!(
        "  fan-out of an endpoint change to {} Get streams of one Service ({} endpoints), {} changes per round;",
        args.streams, args.hot_endpoints, args.changes
    );
    println!(
        "  stalled clients: own connection, a Get on the same Service, 1 KiB stream window, never read:"
    );
    println!(
        "    {:>8}  {:>33}  {:>33}",
        "stalled", "from the write: p50 / p90 / p99", "from watchers: p50 / p90 / p99"
    );
    let three = |d: &[Duration]| {
        format!(
            "{} / {} / {}",
            ms(percentile(d, 50.0)),
            ms(percentile(d, 90.0)),
            ms(percentile(d, 99.0))
        )
    };
    for (stalled, fan_out) in &rounds {
        println!(
            "    {:>8}  {:>33}  {:>33}",
            stalled,
            three(fan_out.since_write()),
            three(fan_out.since_watch()),
        );
    }
    println!(
        "    (from watchers: from our own watch seeing the write, Meridian's share; the stalled clients' connections stay open through the later rounds)"
    );
    drop(stalled);
    Ok(())
}

/// A client whose one `Get` on the hot Service is never read: 1 KiB
/// stream window, the protocol's 64 KiB connection window, so both fill
/// with the first snapshot. Dropping it closes its connection.
async fn stalled_client(grpc: SocketAddr) -> anyhow::Result<tonic::Streaming<usize>> {
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{grpc}"))?
        .initial_stream_window_size(1024)
        .initial_connection_window_size(65_535)
        .connect()
        .await?;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await?;
    let response = client
        .server_streaming(
            tonic::Request::new(get_request(HOT)),
            http::uri::PathAndQuery::from_static(GET),
            ArrivalCodec::<GetDestination>::default(),
        )
        .await?;
    Ok(response.into_inner())
}

// ---------------------------------------------------------------------------
// Part 2: stream floods.

/// Connect, call, and read the first message: a fresh client's wait.
async fn fresh_first_message<Req: Message + Send + 'static>(
    addr: SocketAddr,
    path: &'static str,
    request: Req,
) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let channel = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
        .connect()
        .await?;
    let mut client = tonic::client::Grpc::new(channel);
    client.ready().await?;
    let response = client
        .server_streaming(
            tonic::Request::new(request),
            http::uri::PathAndQuery::from_static(path),
            ArrivalCodec::<Req>::default(),
        )
        .await?;
    let mut stream = response.into_inner();
    tokio::time::timeout(Duration::from_secs(30), stream.message())
        .await
        .context("no first message within 30 s")??
        .context("the stream ended at once")?;
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

fn reason_name(code: u32) -> &'static str {
    match code {
        0x0 => "NO_ERROR",
        0x1 => "PROTOCOL_ERROR",
        0x2 => "INTERNAL_ERROR",
        0x3 => "FLOW_CONTROL_ERROR",
        0x7 => "REFUSED_STREAM",
        0x8 => "CANCEL",
        0xb => "ENHANCE_YOUR_CALM",
        _ => "other",
    }
}

async fn flood<F, Fut>(
    args: &Args,
    server: &Proc,
    grpc: SocketAddr,
    path: &str,
    body: &[u8],
    fresh: F,
) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Duration>>,
{
    let fresh_before = fresh_median(20, &fresh).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (tasks_before, _) = metrics_of(server).await;
    let rss_before = rss_bytes(server.pid).context("RSS")?;

    let (mut abuser, mut events) = RawH2::connect(grpc).await?;
    let mut advertised = None;
    while advertised.is_none() {
        match tokio::time::timeout(Duration::from_secs(5), events.recv()).await {
            Ok(Some(Event::Settings(settings))) => {
                advertised = Some(raw_h2::setting(
                    &settings,
                    raw_h2::SETTINGS_MAX_CONCURRENT_STREAMS,
                ));
            }
            Ok(Some(_)) => {}
            _ => bail!("{}: no SETTINGS from the server", server.name),
        }
    }
    let advertised = advertised.flatten();
    // Up to 10 past the advertised limit (refused streams count toward
    // h2's limit on the resets a server sends, see below).
    let target = advertised
        .map_or(args.flood_max, |limit| limit as usize + 10)
        .min(args.flood_max);
    let (mut answered, mut refused) = (BTreeSet::new(), BTreeSet::<u32>::new());
    // Streams answered with an error at once (trailers-only): not held.
    let mut ended = 0usize;
    let mut first_refusal = None;
    let mut goaway = None;
    let mut opened = 0usize;
    let started = Instant::now();
    let authority = grpc.to_string();
    'flood: while refused.is_empty() && goaway.is_none() && opened < target {
        for _ in 0..500.min(target - opened) {
            abuser.open_grpc(&authority, path, body).await?;
            opened += 1;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while answered.len() + refused.len() < opened {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, events.recv()).await {
                Ok(Some(Event::Headers { stream, end_stream })) => {
                    if answered.insert(stream) && end_stream {
                        ended += 1;
                    }
                }
                Ok(Some(Event::Reset { stream, code })) => {
                    // The request DATA sent on a refused stream gets STREAM_CLOSED.
                    if code == raw_h2::REFUSED_STREAM || !answered.contains(&stream) {
                        first_refusal.get_or_insert((stream, code));
                        refused.insert(stream);
                    }
                }
                Ok(Some(Event::GoAway { last_stream, code })) => {
                    goaway = Some((last_stream, code));
                    break 'flood;
                }
                Ok(Some(Event::Closed(why))) => {
                    bail!("{}: the flood's connection closed: {why}", server.name)
                }
                Ok(Some(Event::Data { .. } | Event::Settings(_))) => {}
                Ok(None) | Err(_) => bail!(
                    "{}: {} of {opened} streams answered or refused after 60 s",
                    server.name,
                    answered.len() + refused.len()
                ),
            }
        }
    }
    let open_time = started.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_held = rss_bytes(server.pid).context("RSS")?;
    let (tasks_held, _) = metrics_of(server).await;
    let fresh_held = fresh_median(20, &fresh).await?;
    // The flood's connection is still served: one more stream is refused.
    let still_up = if refused.is_empty() {
        "n/a".to_string()
    } else {
        let extra = abuser.open_grpc(&authority, path, body).await?;
        let mut verdict = "no answer in 10 s".to_string();
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(Some(event)) = tokio::time::timeout(
            deadline.saturating_duration_since(Instant::now()),
            events.recv(),
        )
        .await
        {
            if let Event::Reset { stream, code } = event
                && stream == extra
            {
                verdict = format!("a further stream is refused too ({})", reason_name(code));
                break;
            }
        }
        verdict
    };
    // A client that keeps opening streams after they are refused.
    let mut more = 0usize;
    let mut closed_by = None;
    if goaway.is_none() && !refused.is_empty() {
        'more: while more < 5_000 {
            for _ in 0..100 {
                if abuser.open_grpc(&authority, path, body).await.is_err() {
                    break 'more;
                }
                more += 1;
            }
            let deadline = Instant::now() + Duration::from_millis(500);
            while let Ok(Some(event)) = tokio::time::timeout(
                deadline.saturating_duration_since(Instant::now()),
                events.recv(),
            )
            .await
            {
                match event {
                    Event::GoAway { code, .. } => {
                        closed_by = Some(format!("GOAWAY {} (0x{code:x})", reason_name(code)));
                        break 'more;
                    }
                    Event::Closed(why) => {
                        closed_by = Some(format!("connection closed ({why})"));
                        break 'more;
                    }
                    _ => {}
                }
            }
        }
    }
    drop(abuser);
    drop(events);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let rss_after = rss_bytes(server.pid).context("RSS")?;
    let (tasks_after, _) = metrics_of(server).await;

    if ended > 0 {
        bail!(
            "{}: {ended} streams were answered with an error instead of held",
            server.name
        );
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let accepted = answered.len();
    println!(
        "    {}: advertised SETTINGS_MAX_CONCURRENT_STREAMS {}; {accepted} streams accepted in {:.2}s",
        server.name,
        advertised.map_or("none".to_string(), |n| n.to_string()),
        open_time.as_secs_f64()
    );
    match (first_refusal, goaway) {
        (Some((stream, code)), _) => println!(
            "      refusal: stream {} (number {} on the connection) got RST_STREAM {} (0x{code:x}); {} refused; the connection stayed open: {still_up}",
            stream,
            stream.div_ceil(2),
            reason_name(code),
            refused.len()
        ),
        (None, Some((last, code))) => println!(
            "      refusal: GOAWAY {} (0x{code:x}) after stream {last}",
            reason_name(code)
        ),
        (None, None) => println!("      never refused ({opened} streams opened)"),
    }
    println!(
        "      RSS {:.1} MiB → {:.1} MiB with the streams ({} bytes per accepted stream) → {:.1} MiB after the connection closed (the allocator keeps freed pages)",
        mib(rss_before),
        mib(rss_held),
        rss_held.saturating_sub(rss_before) / accepted.max(1) as u64,
        mib(rss_after)
    );
    if let Some(closed_by) = closed_by {
        println!(
            "      a client that keeps opening streams once refused: {closed_by} after {more} more refused streams (h2 counts the resets it sends; its 10,000 accepted streams end with it)"
        );
    } else if !refused.is_empty() {
        println!(
            "      {more} more streams opened after the refusal, all refused; the connection stayed open"
        );
    }
    println!(
        "      tasks alive {} → {} → {} (before, with the streams, after); a fresh client's first answer: {} before, {} while the flood holds its streams (median of 20)",
        fmt_opt(tasks_before),
        fmt_opt(tasks_held),
        fmt_opt(tasks_after),
        ms(fresh_before),
        ms(fresh_held)
    );
    Ok(())
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

#[derive(Clone, Copy)]
enum GoodCall {
    Get,
    WatchPort,
}

/// What a well-behaved client does on a port, timed.
#[derive(Clone)]
enum Good {
    Grpc(SocketAddr, GoodCall),
    Http(SocketAddr),
    Review(SocketAddr, tokio_rustls::TlsConnector),
}

impl Good {
    async fn time(&self) -> anyhow::Result<Duration> {
        match self {
            Good::Grpc(addr, GoodCall::Get) => {
                fresh_first_message(*addr, GET, get_request(1)).await
            }
            Good::Grpc(addr, GoodCall::WatchPort) => {
                fresh_first_message(*addr, WATCH_PORT, watch_port_request()).await
            }
            Good::Http(addr) => {
                let t0 = Instant::now();
                let (status, _) = local_cluster::probe::http_get(*addr, "/live").await?;
                if status != 200 {
                    bail!("/live answered {status}");
                }
                Ok(t0.elapsed())
            }
            Good::Review(addr, tls) => review(*addr, tls).await,
        }
    }

    fn what(&self) -> &'static str {
        match self {
            Good::Grpc(_, GoodCall::Get) => "fresh Get",
            Good::Grpc(_, GoodCall::WatchPort) => "fresh WatchPort",
            Good::Http(_) => "GET /live",
            Good::Review(..) => "TLS + AdmissionReview",
        }
    }
}

/// A kind of bad peer: what it sends, then it holds the connection.
struct Bad {
    what: &'static str,
    sends: &'static [u8],
}

const CLIENT_HELLO: &[u8] = b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\x8f\x01\x02\x03\x04";
const RANDOM: &[u8] = b"\x00\xff\x13\x37\xde\xad\xbe\xef\x99\x12 garbage \x7f\x80\r\n\r\n";

const BAD_GRPC: &[Bad] = &[
    Bad {
        what: "nothing (half-open)",
        sends: b"",
    },
    Bad {
        what: "half a preface",
        sends: b"PRI * HTTP/2.0\r\n",
    },
    Bad {
        what: "random bytes",
        sends: RANDOM,
    },
    Bad {
        what: "a TLS ClientHello",
        sends: CLIENT_HELLO,
    },
    Bad {
        what: "an HTTP/1 request",
        sends: b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    },
];

const BAD_HTTP: &[Bad] = &[
    Bad {
        what: "nothing (half-open)",
        sends: b"",
    },
    Bad {
        what: "half a request head",
        sends: b"GET /ready HTTP/1.1\r\nHo",
    },
    Bad {
        what: "random bytes",
        sends: RANDOM,
    },
    Bad {
        what: "a TLS ClientHello",
        sends: CLIENT_HELLO,
    },
    Bad {
        what: "an HTTP/2 preface",
        sends: b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    },
];

const BAD_TLS: &[Bad] = &[
    Bad {
        what: "nothing (half-open)",
        sends: b"",
    },
    Bad {
        what: "half a ClientHello",
        sends: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    },
    Bad {
        what: "random bytes",
        sends: RANDOM,
    },
    Bad {
        what: "a garbage ClientHello",
        sends:
            b"\x16\x03\x01\x00\x10\x01\x00\x00\x0c\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",
    },
    Bad {
        what: "plaintext HTTP",
        sends: b"POST / HTTP/1.1\r\nHost: x\r\n\r\n",
    },
];

struct Port {
    name: &'static str,
    addr: SocketAddr,
    listener: &'static str,
    kinds: &'static [Bad],
    good: Good,
}

impl Port {
    fn grpc(name: &'static str, addr: SocketAddr, good: Good) -> Self {
        Self {
            name,
            addr,
            listener: "grpc",
            kinds: BAD_GRPC,
            good,
        }
    }
    fn admin(name: &'static str, addr: SocketAddr) -> Self {
        Self {
            name,
            addr,
            listener: "admin",
            kinds: BAD_HTTP,
            good: Good::Http(addr),
        }
    }
    fn tls(name: &'static str, addr: SocketAddr, tls: &tokio_rustls::TlsConnector) -> Self {
        Self {
            name,
            addr,
            listener: "webhook",
            kinds: BAD_TLS,
            good: Good::Review(addr, tls.clone()),
        }
    }
}

/// One held bad connection: when the server closed it, since it was
/// connected and had sent its bytes (a burst of connects can wait on the
/// listen backlog: that is not the server's reaction time).
async fn hold(addr: SocketAddr, sends: &'static [u8], limit: Duration) -> Option<Duration> {
    let mut tcp = TcpStream::connect(addr).await.ok()?;
    if !sends.is_empty() {
        tcp.write_all(sends).await.ok()?;
    }
    let t0 = Instant::now();
    let mut sink = Vec::new();
    match tokio::time::timeout(limit, tcp.read_to_end(&mut sink)).await {
        Ok(_) => Some(t0.elapsed()),
        Err(_) => None,
    }
}

fn count_bad_lines(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(" WARN ") && l.contains("closed a bad peer's connection"))
        .count()
}

async fn bad_peers(args: &Args, server: &Proc, ports: &[Port]) -> anyhow::Result<()> {
    let (tasks_before, metrics_before) = metrics_of(server).await;
    let rss_before = rss_bytes(server.pid).context("RSS")?;
    let lines_before = count_bad_lines(&server.log);
    let open_name = format!("{}server_connections_open", server.prefix);
    let bad_name = format!("{}server_bad_connections_total", server.prefix);
    let limit = Duration::from_secs(30);

    let mut held = Vec::new();
    for port in ports {
        for (k, bad) in port.kinds.iter().enumerate() {
            for _ in 0..args.bad_per_kind {
                let addr = port.addr;
                let sends = bad.sends;
                held.push((port.name, k, tokio::spawn(hold(addr, sends, limit))));
            }
        }
    }
    // Let them connect, then measure the server while they are held.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (tasks_held, metrics_held) = metrics_of(server).await;
    let rss_held = rss_bytes(server.pid).context("RSS")?;
    let mut goods = Vec::new();
    for port in ports {
        let mut samples = Vec::new();
        for _ in 0..10 {
            samples.push(port.good.time().await?);
        }
        goods.push(format!(
            "{} {}",
            port.good.what(),
            ms(percentile(&samples, 50.0))
        ));
    }

    let mut closed: HashMap<(&str, usize), Vec<Duration>> = HashMap::new();
    let mut still_open: HashMap<(&str, usize), usize> = HashMap::new();
    for (port, kind, task) in held {
        match task.await.ok().flatten() {
            Some(after) => closed.entry((port, kind)).or_default().push(after),
            None => *still_open.entry((port, kind)).or_default() += 1,
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (tasks_after, metrics_after) = metrics_of(server).await;
    let rss_after = rss_bytes(server.pid).context("RSS")?;
    let lines = count_bad_lines(&server.log) - lines_before;

    println!("    {}:", server.name);
    println!(
        "      {:<14} {:<22} {:>9}  {:>24}",
        "port", "bad peer sends", "closed", "closed after p50 / max"
    );
    for port in ports {
        for (k, bad) in port.kinds.iter().enumerate() {
            let times = closed.get(&(port.name, k)).cloned().unwrap_or_default();
            let open = still_open.get(&(port.name, k)).copied().unwrap_or(0);
            println!(
                "      {:<14} {:<22} {:>9}  {:>24}",
                port.name,
                bad.what,
                format!("{}/{}", times.len(), times.len() + open),
                format!(
                    "{} / {}",
                    secs(percentile(&times, 50.0)),
                    secs(percentile(&times, 100.0))
                ),
            );
        }
    }
    let opens = |metrics: &str| {
        ports
            .iter()
            .map(|p| {
                let v = sample(
                    metrics,
                    &format!("{open_name}{{listener=\"{}\"}}", p.listener),
                );
                format!("{} {}", p.listener, fmt_opt(v))
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let counted = ports
        .iter()
        .map(|p| {
            let label = format!("listener=\"{}\"", p.listener);
            let n = sum_of(&metrics_after, &bad_name, &label)
                - sum_of(&metrics_before, &bad_name, &label);
            format!("{} {n:.0}", p.listener)
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("      while held: {}", goods.join(", "));
    println!(
        "      tasks alive {} → {} (held) → {} (after); RSS {:.1} → {:.1} → {:.1} MiB",
        fmt_opt(tasks_before),
        fmt_opt(tasks_held),
        fmt_opt(tasks_after),
        mib(rss_before),
        mib(rss_held),
        mib(rss_after)
    );
    println!(
        "      open connections: before {}; held {}; after {}",
        opens(&metrics_before),
        opens(&metrics_held),
        opens(&metrics_after)
    );
    println!("      counted in {bad_name}: {counted}; warning lines logged about them: {lines}");
    Ok(())
}

fn secs(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        ms(d)
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}

// ---------------------------------------------------------------------------
// Webhook clients.

fn tls_connector(ca: &LocalCa) -> anyhow::Result<tokio_rustls::TlsConnector> {
    let mut roots = rustls::RootCertStore::empty();
    for der in rustls_pemfile::certs(&mut ca.cert_pem().as_bytes()) {
        roots.add(der?)?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(tokio_rustls::TlsConnector::from(Arc::new(config)))
}

/// A fresh TLS connection and one AdmissionReview (a ConfigMap, which any
/// webhook answers).
async fn review(addr: SocketAddr, tls: &tokio_rustls::TlsConnector) -> anyhow::Result<Duration> {
    let t0 = Instant::now();
    let tcp = TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let stream = tls.connect(name, tcp).await?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let body = json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "bench",
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "namespace": "default",
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        }
    });
    let request = http::Request::post("/")
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    let response = sender.send_request(request).await?;
    let status = response.status();
    response.into_body().collect().await?;
    if status != http::StatusCode::OK {
        bail!("review answered {status}");
    }
    Ok(t0.elapsed())
}
