//! `meridian-bench destination`: many concurrent `Destination.Get` streams
//! against a `destination` process watching the real local control plane.
//!
//! Services, pods and EndpointSlices are written through the real
//! kube-apiserver; the destination sees them through its watches (real index
//! events). Slices are written directly (selector-less Services) so the
//! figures measure Meridian, not kube-controller-manager's batching.
//!
//! Prints the destination's RSS before and after opening the streams, the
//! marginal bytes per stream, and the p50/p99 time from an EndpointSlice
//! write to the moment every stream of that Service has received the update
//! (apiserver write + watch delivery + fan-out).

use std::{
    collections::HashMap,
    path::PathBuf,
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::Context;
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
    common::{FanOut, connect, observe_versions, open_stream, wait_count},
    stats::rss_bytes,
};

pub(crate) const NS: &str = "bench";

#[derive(clap::Args)]
pub struct Args {
    /// Concurrent Get streams.
    #[arg(long, default_value_t = 10_000)]
    streams: usize,
    /// Services in total.
    #[arg(long, default_value_t = 100)]
    services: usize,
    /// Hot services (half of the streams subscribe to them).
    #[arg(long, default_value_t = 3)]
    hot_services: usize,
    /// Endpoints of each hot service.
    #[arg(long, default_value_t = 200)]
    hot_endpoints: usize,
    /// Endpoints of each other service.
    #[arg(long, default_value_t = 4)]
    endpoints: usize,
    /// Endpoint changes to time.
    #[arg(long, default_value_t = 40)]
    changes: usize,
    /// HTTP/2 connections the streams are spread over.
    #[arg(long, default_value_t = 50)]
    connections: usize,
    /// The `destination` binary to benchmark.
    #[arg(long)]
    destination_bin: PathBuf,
}

pub(crate) struct Plan {
    /// Endpoint count per service.
    pub(crate) sizes: Vec<usize>,
}

impl Plan {
    fn new(args: &Args) -> Self {
        let sizes = (0..args.services)
            .map(|i| {
                if i < args.hot_services {
                    args.hot_endpoints
                } else {
                    args.endpoints
                }
            })
            .collect();
        Self { sizes }
    }

    /// The service of stream `i`: half the streams on hot services.
    fn service_of(&self, i: usize, hot: usize) -> usize {
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

pub(crate) fn svc_name(i: usize) -> String {
    format!("svc-{i}")
}

fn pod_ip(service: usize, endpoint: usize) -> String {
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

pub async fn run(args: Args) -> anyhow::Result<()> {
    let plan = Plan::new(&args);
    let total_pods: usize = plan.sizes.iter().sum();
    println!(
        "destination bench: {} streams over {} connections; {} services ({} hot × {} endpoints, others × {}), {} pods",
        args.streams,
        args.connections,
        args.services,
        args.hot_services,
        args.hot_endpoints,
        args.endpoints,
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
    let (mut destination, pid, grpc_addr) =
        crate::common::start_server(&cluster, &args.destination_bin, "addr", &[]).await?;

    let channels = connect(grpc_addr, args.connections).await?;
    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(AtomicUsize::new(0));
    // One warm stream per service first, so every publisher and group
    // exists: what follows is the marginal cost of a stream.
    let mut per_service = vec![0usize; args.services];
    for s in 0..args.services {
        open_get(&channels[s % channels.len()], s, &events_tx, &ready);
        per_service[s] += 1;
    }
    wait_count(&ready, args.services).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_bytes(pid).context("reading RSS")?;

    let opened = Instant::now();
    for i in 0..args.streams {
        let s = plan.service_of(i, args.hot_services);
        open_get(&channels[i % channels.len()], s, &events_tx, &ready);
        per_service[s] += 1;
    }
    wait_count(&ready, args.services + args.streams).await?;
    let open_time = opened.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_bytes(pid).context("reading RSS")?;
    while events_rx.try_recv().is_ok() {}

    // Fan-out latency of one endpoint change on a hot service. Our own watch
    // of the slices tells when the change became visible to watchers, so the
    // apiserver's share of the latency can be told apart from Meridian's.
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let (observer, mut seen_rx) = observe_versions(slices.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    while seen_rx.try_recv().is_ok() {}
    let mut fan_out = FanOut::default();
    let hot = args.hot_services.max(1);
    let mut not_ready: HashMap<usize, Option<usize>> = HashMap::new();
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
            .record(k, t0, &rv, s, per_service[s], &mut events_rx, &mut seen_rx)
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    observer.abort();

    crate::common::print_memory(
        "destination",
        open_time,
        args.services,
        before,
        args.streams,
        after,
    );
    let streams_per_hot: Vec<usize> = (0..hot).map(|s| per_service[s]).collect();
    println!(
        "  endpoint change → every subscribed stream ({} changes, {:?} streams per hot service):",
        fan_out.len(),
        streams_per_hot
    );
    fan_out.print("EndpointSlice");
    destination.stop(Duration::from_secs(5));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    Ok(())
}

pub(crate) async fn populate(client: &kube::Client, plan: &Plan) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
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

pub(crate) fn open_get(
    channel: &tonic::transport::Channel,
    service: usize,
    events: &mpsc::UnboundedSender<(usize, Instant)>,
    ready: &Arc<AtomicUsize>,
) {
    let request = GetDestination {
        scheme: "k8s".into(),
        path: format!("{}.{NS}.svc.cluster.local:80", svc_name(service)),
        context_token: String::new(),
    };
    let path = "/io.linkerd.proxy.destination.Destination/Get";
    open_stream(channel, path, request, service, events, ready);
}
