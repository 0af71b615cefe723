//! `meridian-bench destination`: many concurrent `Destination.Get` streams
//! against a `destination` process watching the real local control plane.
//!
//! Services, pods and EndpointSlices are written through the real
//! kube-apiserver; the destination sees them through its watches (real index
//! events). Slices are written directly (selector-less Services) so the
//! figures measure Meridian, not kube-controller-manager's batching.
//!
//! The default shape is a mesh's (`--shape proxy`): every proxy is one
//! HTTP/2 connection with linkerd2-proxy's settings (see
//! [`crate::proxy_client`]) holding a few `Get` streams, each paired with a
//! `GetProfile` for the same target; 2,500 connections × 4, two hot
//! Services of 500 endpoints (each with one stream on every connection)
//! and many small ones. `--shape legacy` is the first benchmark's shape:
//! 10,000 `Get` streams over 50 connections, no `GetProfile`.
//!
//! Prints the destination's RSS and anonymous RSS with warm streams, with
//! the connections open and with their streams (bytes per connection and
//! per stream), the server's and the client's CPU to open the streams and
//! per endpoint change, and the time from an EndpointSlice write until the
//! first and the last stream of that Service received the update. Then the
//! same client against a trivial server ([`crate::trivial`]): the client's
//! own share, printed beside; and the machine's floor for one fan-out
//! ([`crate::floor`]): one `write(2)` per connection, no runtime, no HTTP/2.

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::Context;
use bytes::Bytes;
use futures::{StreamExt, stream};
use k8s_openapi::api::{
    core::v1::{Namespace, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use linkerd2_proxy_api::destination::GetDestination;
use serde_json::json;
use tokio::sync::mpsc;

use crate::{
    common::{ConnectionMemory, CpuMark, FanOut, observe_versions, wait_count},
    proxy_client::{self, Conn},
    shape::{Shape, ShapeArgs},
    stats::rss,
};

pub(crate) const NS: &str = "bench";

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    shape: ShapeArgs,
    /// Services in total.
    #[arg(long)]
    services: Option<usize>,
    /// Hot services (half of the streams subscribe to them).
    #[arg(long)]
    hot_services: Option<usize>,
    /// Endpoints of each hot service.
    #[arg(long)]
    hot_endpoints: Option<usize>,
    /// Endpoints of each other service.
    #[arg(long)]
    endpoints: Option<usize>,
    /// Pair every `Get` with a `GetProfile` for the same target.
    #[arg(long, action = clap::ArgAction::Set)]
    profiles: Option<bool>,
    /// Endpoint changes to time.
    #[arg(long, default_value_t = 40)]
    changes: usize,
    /// Skip the client-alone baseline against the trivial server.
    #[arg(long)]
    no_baseline: bool,
    /// Do not pin the server and the client to different CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Record the server with `perf record` while it opens the streams and
    /// during the endpoint changes, into this directory.
    #[arg(long)]
    perf_dir: Option<PathBuf>,
    /// The `destination` binary to benchmark.
    #[arg(long)]
    destination_bin: PathBuf,
}

/// The resolved shape.
struct Config {
    connections: usize,
    per_connection: usize,
    services: usize,
    hot_services: usize,
    hot_endpoints: usize,
    endpoints: usize,
    profiles: bool,
}

impl Config {
    fn new(args: &Args) -> Self {
        let (services, hot, hot_endpoints, profiles) = match args.shape.shape {
            Shape::Proxy => (202, 2, 500, true),
            Shape::Legacy => (100, 3, 200, false),
        };
        let (connections, per_connection) = args.shape.connections();
        Self {
            connections,
            per_connection,
            services: args.services.unwrap_or(services).max(1),
            hot_services: args.hot_services.unwrap_or(hot),
            hot_endpoints: args.hot_endpoints.unwrap_or(hot_endpoints),
            endpoints: args.endpoints.unwrap_or(4),
            profiles: args.profiles.unwrap_or(profiles),
        }
    }

    fn streams(&self) -> usize {
        self.connections * self.per_connection
    }
}

pub(crate) struct Plan {
    /// Endpoint count per service.
    pub(crate) sizes: Vec<usize>,
}

impl Plan {
    fn new(config: &Config) -> Self {
        let sizes = (0..config.services)
            .map(|i| {
                if i < config.hot_services {
                    config.hot_endpoints
                } else {
                    config.endpoints
                }
            })
            .collect();
        Self { sizes }
    }

    /// The service of stream `i`: half the streams on hot services. With
    /// streams numbered connection by connection, 4 per connection and two
    /// hot services, every connection holds one stream of each.
    pub(crate) fn service_of(&self, i: usize, hot: usize) -> usize {
        let n = self.sizes.len();
        if hot > 0 && i.is_multiple_of(2) {
            (i / 2) % hot
        } else if n > hot {
            hot + (i / 2) % (n - hot)
        } else {
            i % n
        }
    }
}

/// Warm streams per connection.
const WARM_PER_CONNECTION: usize = 50;

pub(crate) const GET_PATH: &str = "/io.linkerd.proxy.destination.Destination/Get";
const PROFILE_PATH: &str = "/io.linkerd.proxy.destination.Destination/GetProfile";

/// The request frame of every stream of `service`.
pub(crate) fn request_frame(service: usize) -> Bytes {
    proxy_client::frame(&GetDestination {
        scheme: "k8s".into(),
        path: format!("{}.{NS}.svc.cluster.local:80", svc_name(service)),
        context_token: format!(r#"{{"ns":"{NS}", "nodeName":"node-1"}}"#),
    })
}

/// The streams a proxy opens for one target: its `Get` (whose updates are
/// tagged with `service`) and, if `profiles`, its `GetProfile`.
pub(crate) fn open_target(
    conn: &Conn,
    service: usize,
    profiles: bool,
    events: &mpsc::UnboundedSender<(usize, Instant)>,
    ready: &Arc<AtomicUsize>,
) {
    let frame = request_frame(service);
    if profiles {
        proxy_client::open(conn, PROFILE_PATH, frame.clone(), None, events, ready);
    }
    proxy_client::open(conn, GET_PATH, frame, Some(service), events, ready);
}

/// What opening the streams cost.
struct Opened {
    memory: ConnectionMemory,
    /// Server CPU, client CPU and wall seconds to connect, then to open.
    connect: (f64, f64, f64),
    open: (f64, f64, f64),
    per_service: Vec<usize>,
}

/// Opens one warm stream per service (so that every publisher exists), then
/// the connections, then their streams, measuring each step.
async fn open_all(
    addr: std::net::SocketAddr,
    pid: u32,
    config: &Config,
    plan: &Plan,
    events: &mpsc::UnboundedSender<(usize, Instant)>,
    perf_dir: Option<&std::path::Path>,
) -> anyhow::Result<(Opened, Vec<Conn>)> {
    let ready = Arc::new(AtomicUsize::new(0));
    let per_target = if config.profiles { 2 } else { 1 };
    let mut per_service = vec![0usize; config.services];
    // At most WARM_PER_CONNECTION warm streams per connection, under any
    // concurrent-stream limit of the server.
    let warm_conns = (config.services * per_target).div_ceil(WARM_PER_CONNECTION);
    let mut conns = proxy_client::connect(addr, warm_conns).await?;
    for (s, count) in per_service.iter_mut().enumerate() {
        let conn = &conns[s * per_target / WARM_PER_CONNECTION];
        open_target(conn, s, config.profiles, events, &ready);
        *count += 1;
    }
    wait_count(&ready, config.services * per_target).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warm = rss(pid).context("reading RSS")?;

    let mark = CpuMark::now(pid);
    let proxies = proxy_client::connect(addr, config.connections).await?;
    let connect = mark.since();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let connected = rss(pid).context("reading RSS")?;

    let perf = crate::common::PerfRecord::start(perf_dir, "open", pid);
    let mark = CpuMark::now(pid);
    for i in 0..config.streams() {
        let s = plan.service_of(i, config.hot_services);
        let conn = &proxies[i / config.per_connection.max(1)];
        open_target(conn, s, config.profiles, events, &ready);
        per_service[s] += 1;
    }
    wait_count(&ready, (config.services + config.streams()) * per_target).await?;
    let open = mark.since();
    perf.stop();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss(pid).context("reading RSS")?;
    conns.extend(proxies);
    Ok((
        Opened {
            memory: ConnectionMemory {
                warm,
                connected,
                after,
            },
            connect,
            open,
            per_service,
        },
        conns,
    ))
}

fn print_cpu(label: &str, (server, client, wall): (f64, f64, f64)) {
    println!("  {label}: server CPU {server:.2} s, client CPU {client:.2} s, {wall:.2} s wall");
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let config = Config::new(&args);
    let plan = Plan::new(&config);
    let total_pods: usize = plan.sizes.iter().sum();
    println!(
        "destination bench ({:?} shape): {} connections × {} Get streams{}; {} services ({} hot × {} endpoints, others × {}), {} pods",
        args.shape.shape,
        config.connections,
        config.per_connection,
        if config.profiles {
            ", each with a GetProfile"
        } else {
            ""
        },
        config.services,
        config.hot_services,
        config.hot_endpoints,
        config.endpoints,
        total_pods
    );
    let work_dir = std::env::temp_dir().join(format!("meridian-bench-{}", std::process::id()));
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let setup = Instant::now();
    populate(&client, &plan).await?;
    println!(
        "  cluster populated in {:.1}s",
        setup.elapsed().as_secs_f64()
    );
    crate::common::pin(!args.no_pin);
    let (mut destination, pid, grpc_addr) =
        crate::common::start_server(&cluster, &args.destination_bin, "addr", &[]).await?;

    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let (opened, conns) = open_all(
        grpc_addr,
        pid,
        &config,
        &plan,
        &events_tx,
        args.perf_dir.as_deref(),
    )
    .await?;
    while events_rx.try_recv().is_ok() {}

    // Fan-out latency of one endpoint change on a hot service. Our own watch
    // of the slices tells when the change became visible to watchers, so the
    // apiserver's share of the latency can be told apart from Meridian's.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let (observer, mut seen_rx) = observe_versions(slices.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    while seen_rx.try_recv().is_ok() {}
    let idle = CpuMark::now(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = idle.since();
    let mut fan_out = FanOut::default();
    let hot = config.hot_services.max(1);
    let mut not_ready: HashMap<usize, Option<usize>> = HashMap::new();
    let perf = crate::common::PerfRecord::start(args.perf_dir.as_deref(), "changes", pid);
    let changes = CpuMark::now(pid);
    for k in 0..args.changes {
        let s = k % hot;
        let size = plan.sizes[s];
        let flip = not_ready
            .get(&s)
            .copied()
            .flatten()
            .map_or(Some(k % size.max(1)), |_| None);
        not_ready.insert(s, flip);
        let patch = json!({ "endpoints": slice_endpoints(s, size, flip) });
        let t0 = Instant::now();
        let patched = slices
            .patch(&svc_name(s), &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        let rv = patched.metadata.resource_version.unwrap_or_default();
        fan_out
            .record(
                k,
                t0,
                &rv,
                s,
                opened.per_service[s],
                &mut events_rx,
                &mut seen_rx,
            )
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let changes = changes.since();
    perf.stop();
    observer.abort();
    crate::ends::phase("teardown of the destination's part", true);
    drop(conns);
    destination.stop(Duration::from_secs(5));

    let per_target = if config.profiles {
        "Get stream (with its GetProfile)"
    } else {
        "Get stream"
    };
    opened.memory.print(
        "destination",
        config.connections,
        config.streams(),
        per_target,
    );
    print_cpu(
        &format!("opening {} connections", config.connections),
        opened.connect,
    );
    print_cpu(
        &format!(
            "opening {} Get streams{}",
            config.streams(),
            if config.profiles {
                " + GetProfiles"
            } else {
                ""
            }
        ),
        opened.open,
    );
    println!("    (target: ≤ 1 s of server CPU for 10,000 streams)");
    print_per_change(args.changes, idle, changes);
    let streams_per_hot: Vec<usize> = (0..hot).map(|s| opened.per_service[s]).collect();
    println!(
        "  endpoint change → every subscribed stream ({} changes, {:?} streams per hot service):",
        fan_out.len(),
        streams_per_hot
    );
    fan_out.print("EndpointSlice");

    let mut missed = fan_out.missed();
    if !args.no_baseline {
        crate::ends::phase("baseline (trivial server)", false);
        missed += baseline(&work_dir, &config, &plan, args.changes).await?;
    }
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    let (streams, connections) = crate::ends::report();
    // One line for `cargo xtask bench h2-ab` (and anyone) to read.
    println!(
        "  summary: missed updates {missed}, unexpected stream ends {streams}, unexpected connection ends {connections}"
    );
    Ok(())
}

/// Prints the CPU of one change: the changes' CPU over `changes` writes,
/// and the same less the idle rate (keepalive PINGs, watch bookmarks).
fn print_per_change(changes: usize, idle: (f64, f64, f64), during: (f64, f64, f64)) {
    let n = changes.max(1) as f64;
    let idle_rate = idle.0 / idle.2.max(1e-9);
    println!(
        "  per endpoint change: server CPU {:.1} ms ({:.1} ms less its idle {:.1} ms/s), client CPU {:.1} ms (target ≤ 15 ms of server CPU)",
        during.0 * 1000.0 / n,
        (during.0 - idle_rate * during.2).max(0.0) * 1000.0 / n,
        idle_rate * 1000.0,
        during.1 * 1000.0 / n,
    );
}

/// The same client against the trivial server: what the client costs and
/// how fast it sees a fan-out when the server does nothing else.
async fn baseline(
    work_dir: &std::path::Path,
    config: &Config,
    plan: &Plan,
    changes: usize,
) -> anyhow::Result<usize> {
    let (mut server, pid, addr) = crate::trivial::start(work_dir).await?;
    // The destination's streams, torn down before, were tagged with the same
    // keys: counted as this phase's ended streams, they left it no stream to
    // wait for, and the baseline recorded no latency at all.
    crate::ends::forget_keyed();
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let (opened, conns) = open_all(addr, pid, config, plan, &events_tx, None).await?;
    while events_rx.try_recv().is_ok() {}
    let mut fan_out = FanOut::default();
    let hot = config.hot_services.max(1);
    let mark = CpuMark::now(pid);
    for k in 0..changes {
        let s = k % hot;
        let t0 = Instant::now();
        crate::trivial::fire(&conns[0], GET_PATH, request_frame(s)).await?;
        let (arrived, missed) =
            crate::common::arrivals(k, t0, s, opened.per_service[s], &mut events_rx).await;
        fan_out.record_outcome(t0, arrived, missed);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let during = mark.since();
    crate::ends::phase("teardown of the baseline", true);
    drop(conns);
    server.stop(Duration::from_secs(2));
    println!(
        "  baseline, the same client against a trivial server (one shared frame per group, no index):"
    );
    opened.memory.print(
        "trivial server",
        config.connections,
        config.streams(),
        "Get stream",
    );
    print_cpu(
        &format!("  opening {} connections", config.connections),
        opened.connect,
    );
    print_cpu(
        &format!("  opening {} Get streams", config.streams()),
        opened.open,
    );
    let n = changes.max(1) as f64;
    println!(
        "    per fire: trivial server CPU {:.1} ms, client CPU {:.1} ms",
        during.0 * 1000.0 / n,
        during.1 * 1000.0 / n
    );
    fan_out.print("fire");
    crate::floor::print(config.connections, changes).await?;
    Ok(fan_out.missed())
}

pub(crate) fn svc_name(i: usize) -> String {
    format!("svc-{i}")
}

pub(crate) fn pod_ip(service: usize, endpoint: usize) -> String {
    let n = service * 1000 + endpoint;
    format!("10.{}.{}.{}", 100 + n / 65536, (n / 256) % 256, n % 256)
}

pub(crate) fn slice_endpoints(
    service: usize,
    size: usize,
    not_ready: Option<usize>,
) -> serde_json::Value {
    let endpoints: Vec<_> = (0..size)
        .map(|e| {
            json!({
                "addresses": [pod_ip(service, e)],
                "conditions": {"ready": Some(e) != not_ready},
                "targetRef": {"kind": "Pod", "namespace": NS, "name": format!("{}-{e}", svc_name(service))},
            })
        })
        .collect();
    serde_json::Value::Array(endpoints)
}

pub(crate) async fn populate(client: &kube::Client, plan: &Plan) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    // The node the pods run on and the streams' context tokens name: a
    // proxy's node exists in its cluster.
    local_cluster::node::ensure_node(client, "node-1", None).await?;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pod_specs: Vec<(usize, usize)> = plan
        .sizes
        .iter()
        .enumerate()
        .flat_map(|(s, n)| (0..*n).map(move |e| (s, e)))
        .collect();
    let results: Vec<kube::Result<Pod>> = stream::iter(pod_specs)
        .map(|(s, e)| {
            let pods = pods.clone();
            async move {
                let pod = local_cluster::workload::PodSpecBuilder::new(
                    &format!("{}-{e}", svc_name(s)),
                    "node-1",
                )
                .label("app", &svc_name(s))
                .port(Some("http"), 8080)
                .meshed("linkerd")
                .build();
                pods.create(&PostParams::default(), &pod).await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result?;
    }
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    for (s, size) in plan.sizes.iter().enumerate() {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": svc_name(s)},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
        }))?;
        services.create(&PostParams::default(), &svc).await?;
        let slice: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": svc_name(s), "labels": {
                "kubernetes.io/service-name": svc_name(s),
                "endpointslice.kubernetes.io/managed-by": "meridian-bench"
            }},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
            "endpoints": slice_endpoints(s, *size, None),
        }))?;
        slices.create(&PostParams::default(), &slice).await?;
    }
    Ok(())
}
