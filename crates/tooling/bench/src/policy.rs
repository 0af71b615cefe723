//! `meridian-bench policy`: many concurrent `InboundServerPolicies.WatchPort`
//! streams against a `policy-controller` process watching the real local
//! control plane.
//!
//! Meshed pods (kwok-style, through the API) are split into groups, each
//! selected by one Server. The streams are a mesh's (`--shape proxy`, the
//! default): 2,500 proxy connections with linkerd2-proxy's HTTP/2 settings
//! ([`crate::proxy_client`]), 4 `WatchPort` streams each, and the outbound
//! `Watch` streams on the same connections; `--shape legacy` is the
//! first benchmark's shape (10,000 streams over 50 connections).
//!
//! Prints the controller's RSS and anonymous RSS with warm streams, with
//! the connections open and with their streams (bytes per connection and
//! per stream), the server's and the client's CPU to open the streams and
//! per Server change, and the time from a Server write (flipping its
//! proxyProtocol) until the first and the last stream of that Server's pods
//! received the new policy — measured from the write, and from when our
//! own watch of Servers saw the change (so the apiserver's share can be
//! told apart from the controller's).
//!
//! Then the outbound part ([`crate::policy_outbound`]) runs against the
//! same controller: `OutboundPolicies.Watch` streams over Services and
//! HTTPRoute-change fan-out.

use std::{
    path::PathBuf,
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::Context;
use bytes::Bytes;
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams, PostParams},
    discovery::ApiResource,
};
use linkerd2_proxy_api::inbound::PortSpec;
use serde_json::json;
use tokio::sync::mpsc;

use crate::{
    common::{ConnectionMemory, CpuMark, FanOut, observe_versions, wait_count},
    proxy_client::{self, Conn},
    shape::ShapeArgs,
    stats::rss,
};

pub(crate) const NS: &str = "bench";
pub(crate) const PORT: u32 = 8080;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    shape: ShapeArgs,
    /// Do not pin the server and the client to different CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Meshed pods (streams are spread evenly over them).
    #[arg(long, default_value_t = 1_000)]
    pods: usize,
    /// Servers, each selecting an equal share of the pods.
    #[arg(long, default_value_t = 20)]
    servers: usize,
    /// Server changes to time.
    #[arg(long, default_value_t = 40)]
    changes: usize,
    /// The `policy-controller` binary to benchmark.
    #[arg(long)]
    policy_bin: PathBuf,
    #[command(flatten)]
    outbound: crate::policy_outbound::OutboundArgs,
}

pub(crate) fn server_name(g: usize) -> String {
    format!("srv-{g}")
}

pub(crate) fn pod_name(p: usize) -> String {
    format!("pod-{p}")
}

pub(crate) fn servers_api(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "policy.linkerd.io".into(),
        version: "v1beta3".into(),
        api_version: "policy.linkerd.io/v1beta3".into(),
        kind: "Server".into(),
        plural: "servers".into(),
    };
    Api::namespaced_with(client.clone(), NS, &resource)
}

fn server_object(g: usize, protocol: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1beta3",
        "kind": "Server",
        "metadata": {"name": server_name(g)},
        "spec": {
            "podSelector": {"matchLabels": {"group": g.to_string()}},
            "port": "http",
            "proxyProtocol": protocol,
            "accessPolicy": "all-unauthenticated",
        },
    }))?)
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let groups = args.servers.max(1);
    let (connections, per_connection) = args.shape.connections();
    let streams = connections * per_connection;
    println!(
        "policy bench ({:?} shape): {connections} connections × {per_connection} WatchPort streams; {} meshed pods, {} Servers ({} pods each)",
        args.shape.shape,
        args.pods,
        groups,
        args.pods / groups
    );
    let work_dir = std::env::temp_dir().join(format!("meridian-bench-{}", std::process::id()));
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let setup = Instant::now();
    populate(&client, args.pods, groups).await?;
    println!(
        "  cluster populated in {:.1}s",
        setup.elapsed().as_secs_f64()
    );
    crate::common::pin(!args.no_pin);
    let extra = [
        format!("--control-plane-namespace={NS}"),
        "--admission-controller-disabled".to_string(),
    ];
    let (mut controller, pid, grpc_addr) =
        crate::common::start_server(&cluster, &args.policy_bin, "grpc-addr", &extra).await?;

    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(AtomicUsize::new(0));
    let group_of = |pod: usize| pod % groups;
    // One warm stream per pod first, so every pod port's server exists:
    // what follows is the marginal cost of a stream.
    let mut per_group = vec![0usize; groups];
    // (50 per connection, under any concurrent-stream limit of the server.)
    let warm_conns = proxy_client::connect(grpc_addr, args.pods.div_ceil(50)).await?;
    for p in 0..args.pods {
        open_watch(&warm_conns[p / 50], p, group_of(p), &events_tx, &ready);
        per_group[group_of(p)] += 1;
    }
    wait_count(&ready, args.pods).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warm = rss(pid).context("reading RSS")?;

    let mark = CpuMark::now(pid);
    let conns = proxy_client::connect(grpc_addr, connections).await?;
    let connect = mark.since();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let connected = rss(pid).context("reading RSS")?;

    let mark = CpuMark::now(pid);
    for i in 0..streams {
        let p = i % args.pods.max(1);
        open_watch(
            &conns[i / per_connection.max(1)],
            p,
            group_of(p),
            &events_tx,
            &ready,
        );
        per_group[group_of(p)] += 1;
    }
    wait_count(&ready, args.pods + streams).await?;
    let open = mark.since();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss(pid).context("reading RSS")?;
    while events_rx.try_recv().is_ok() {}

    // Our own watch of Servers: when a change became visible to watchers.
    let servers = servers_api(&client);
    let (observer, mut seen_rx) = observe_versions(servers.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    while seen_rx.try_recv().is_ok() {}

    let mut fan_out = FanOut::default();
    let mut http2 = vec![false; groups];
    let changes = CpuMark::now(pid);
    for k in 0..args.changes {
        let g = k % groups;
        http2[g] = !http2[g];
        let protocol = if http2[g] { "HTTP/2" } else { "HTTP/1" };
        let patch = json!({"spec": {"proxyProtocol": protocol}});
        let t0 = Instant::now();
        let patched = servers
            .patch(
                &server_name(g),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        let rv = patched.metadata.resource_version.unwrap_or_default();
        fan_out
            .record(k, t0, &rv, g, per_group[g], &mut events_rx, &mut seen_rx)
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let changes = changes.since();
    observer.abort();

    ConnectionMemory {
        warm,
        connected,
        after,
    }
    .print(
        "policy-controller",
        connections,
        streams,
        "WatchPort stream",
    );
    let cpu = |label: String, (server, client, wall): (f64, f64, f64)| {
        println!("  {label}: server CPU {server:.2} s, client CPU {client:.2} s, {wall:.2} s wall");
    };
    cpu(format!("opening {connections} connections"), connect);
    cpu(format!("opening {streams} WatchPort streams"), open);
    let n = args.changes.max(1) as f64;
    println!(
        "  per Server change: server CPU {:.1} ms, client CPU {:.1} ms",
        changes.0 * 1000.0 / n,
        changes.1 * 1000.0 / n
    );
    println!(
        "  Server change → every affected stream ({} changes, {} streams per Server):",
        fan_out.len(),
        per_group.first().copied().unwrap_or_default()
    );
    fan_out.print("Server");
    let missed = fan_out.missed()
        + crate::policy_outbound::run(&args.outbound, &client, &conns, pid).await?;
    crate::ends::phase("teardown", true);
    drop(conns);
    controller.stop(Duration::from_secs(5));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    let (streams, connections) = crate::ends::report();
    println!(
        "  summary: missed updates {missed}, unexpected stream ends {streams}, unexpected connection ends {connections}"
    );
    Ok(())
}

pub(crate) async fn populate(
    client: &kube::Client,
    pods: usize,
    groups: usize,
) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let results: Vec<kube::Result<Pod>> = stream::iter(0..pods)
        .map(|p| {
            let api = api.clone();
            async move {
                let pod = local_cluster::workload::PodSpecBuilder::new(&pod_name(p), "node-1")
                    .label("group", &(p % groups).to_string())
                    .port(Some("http"), PORT as i32)
                    .meshed("linkerd")
                    .build();
                api.create(&PostParams::default(), &pod).await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result?;
    }
    let servers = servers_api(client);
    for g in 0..groups {
        servers
            .create(&PostParams::default(), &server_object(g, "HTTP/1")?)
            .await?;
    }
    Ok(())
}

fn open_watch(
    conn: &Conn,
    pod: usize,
    group: usize,
    events: &mpsc::UnboundedSender<(usize, Instant)>,
    ready: &Arc<AtomicUsize>,
) {
    let request = PortSpec {
        workload: format!(r#"{{"ns":"{NS}","pod":"{}"}}"#, pod_name(pod)),
        port: PORT,
    };
    let path = "/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort";
    let frame: Bytes = proxy_client::frame(&request);
    proxy_client::open(conn, path, frame, Some(group), events, ready);
}
