//! The outbound part of `meridian-bench policy`: many concurrent
//! `OutboundPolicies.Watch` streams over many Services, against the same
//! `policy-controller` process.
//!
//! The first `--routed-services` Services get a ClusterIP (the local
//! control plane's service range is a /24) and are split into groups, each
//! the parent of one Gateway API HTTPRoute (accepted by the controller's
//! own status writer before any stream opens); the others are headless
//! (looked up by name, as proxies do, without routes). Prints the controller's RSS before and after opening the
//! streams, the marginal bytes per stream, and the p50/p99 time from a
//! route edit until every stream of that route's Services has received the
//! new policy, measured from the write and from when our own watch of
//! routes saw it.

use std::{
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::{
    Api,
    api::{DynamicObject, ListParams, Patch, PatchParams, PostParams},
    discovery::ApiResource,
};
use linkerd2_proxy_api::outbound::{TrafficSpec, traffic_spec};
use serde_json::json;
use tokio::sync::mpsc;

use crate::{
    common::{CpuMark, FanOut, observe_versions, wait_count},
    proxy_client::{self, Conn},
    stats::rss_bytes,
};

const NS: &str = "bench-out";
/// At most 32 parents per route (the Gateway API limit).
const MAX_PARENTS: usize = 32;

#[derive(clap::Args)]
pub struct OutboundArgs {
    /// Concurrent outbound Watch streams.
    #[arg(long, default_value_t = 10_000)]
    outbound_streams: usize,
    /// Services (streams are spread evenly over them).
    #[arg(long, default_value_t = 1_000)]
    services: usize,
    /// Services with a ClusterIP, the parents of the routes (at most ~250:
    /// the local service range is a /24).
    #[arg(long, default_value_t = 200)]
    routed_services: usize,
    /// HTTPRoutes, each the parent route of an equal share of the routed
    /// Services.
    #[arg(long, default_value_t = 10)]
    routes: usize,
    /// Route edits to time.
    #[arg(long, default_value_t = 40)]
    route_changes: usize,
}

/// Gateway API `HTTPRoute`s (`v1`) of namespace `ns`.
pub fn routes_api(client: &kube::Client, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "gateway.networking.k8s.io".into(),
        version: "v1".into(),
        api_version: "gateway.networking.k8s.io/v1".into(),
        kind: "HTTPRoute".into(),
        plural: "httproutes".into(),
    };
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn service_name(s: usize) -> String {
    format!("svc-{s}")
}

fn route_object(
    g: usize,
    groups: usize,
    services: usize,
    version: usize,
) -> anyhow::Result<DynamicObject> {
    let parents: Vec<_> = (g..services)
        .step_by(groups)
        .map(|s| json!({"group": "core", "kind": "Service", "name": service_name(s), "port": 80}))
        .collect();
    Ok(serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": format!("route-{g}")},
        "spec": {
            "parentRefs": parents,
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": format!("/v{version}")}}]}],
        },
    }))?)
}

/// Runs the outbound part against the controller at `grpc_addr` (pid
/// `pid`); returns the updates its open streams missed.
pub async fn run(
    args: &OutboundArgs,
    client: &kube::Client,
    channels: &[Conn],
    pid: u32,
) -> anyhow::Result<usize> {
    let connections = channels.len();
    let services = args.services.max(1);
    let routed = args.routed_services.clamp(1, services);
    let groups = args.routes.clamp(1, routed);
    if routed.div_ceil(groups) > MAX_PARENTS {
        bail!("{routed} Services over {groups} routes exceeds {MAX_PARENTS} parents per route");
    }
    println!(
        "outbound: {} Watch streams over {connections} connections; {services} Services ({routed} with a ClusterIP), {groups} HTTPRoutes ({} Services each)",
        args.outbound_streams,
        routed / groups
    );
    let setup = Instant::now();
    populate(client, services, routed, groups).await?;
    println!(
        "  Services and accepted routes in {:.1}s",
        setup.elapsed().as_secs_f64()
    );

    let (events_tx, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(AtomicUsize::new(0));
    // Streams of unrouted Services carry a key no change waits for.
    let group_of = |s: usize| if s < routed { s % groups } else { usize::MAX };
    let mut per_group = vec![0usize; groups];
    let count = |per_group: &mut Vec<usize>, s: usize| {
        if s < routed {
            per_group[s % groups] += 1;
        }
    };
    // One warm stream per Service first (it creates the Service port's
    // watch): what follows is the marginal cost of a stream.
    for s in 0..services {
        open_watch(
            &channels[s % channels.len()],
            s,
            group_of(s),
            &events_tx,
            &ready,
        );
        count(&mut per_group, s);
    }
    wait_count(&ready, services).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let before = rss_bytes(pid).context("reading RSS")?;

    let opened = Instant::now();
    let open_cpu = CpuMark::now(pid);
    for i in 0..args.outbound_streams {
        let s = i % services;
        open_watch(
            &channels[i % channels.len()],
            s,
            group_of(s),
            &events_tx,
            &ready,
        );
        count(&mut per_group, s);
    }
    wait_count(&ready, services + args.outbound_streams).await?;
    let open_time = opened.elapsed();
    let open_cpu = open_cpu.since();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = rss_bytes(pid).context("reading RSS")?;
    while events_rx.try_recv().is_ok() {}

    let routes = routes_api(client, NS);
    let (observer, mut seen_rx) = observe_versions(routes.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    while seen_rx.try_recv().is_ok() {}

    let mut fan_out = FanOut::default();
    let changes = CpuMark::now(pid);
    for k in 0..args.route_changes {
        let g = k % groups;
        let patch = json!({"spec": {"rules": [{"matches": [{"path": {"type": "PathPrefix", "value": format!("/v{}", k + 1)}}]}]}});
        let t0 = Instant::now();
        let patched = routes
            .patch(
                &format!("route-{g}"),
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

    crate::common::print_memory(
        "policy-controller (outbound)",
        open_time,
        services,
        before,
        args.outbound_streams,
        after,
    );
    println!(
        "  opening the Watch streams: server CPU {:.2} s, client CPU {:.2} s",
        open_cpu.0, open_cpu.1
    );
    let n = args.route_changes.max(1) as f64;
    println!(
        "  per HTTPRoute change: server CPU {:.1} ms, client CPU {:.1} ms",
        changes.0 * 1000.0 / n,
        changes.1 * 1000.0 / n
    );
    println!(
        "  HTTPRoute change → every affected stream ({} changes, {} streams per route):",
        fan_out.len(),
        per_group.first().copied().unwrap_or_default()
    );
    fan_out.print("HTTPRoute");
    Ok(fan_out.missed())
}

/// Creates the namespace, the Services and the routes, and waits until the
/// controller accepted every route for all its parents.
async fn populate(
    client: &kube::Client,
    services: usize,
    routed: usize,
    groups: usize,
) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let api: Api<Service> = Api::namespaced(client.clone(), NS);
    let results: Vec<kube::Result<Service>> = stream::iter(0..services)
        .map(|s| {
            let api = api.clone();
            async move {
                let mut spec =
                    json!({"selector": {"app": service_name(s)}, "ports": [{"port": 80}]});
                if s >= routed {
                    spec["clusterIP"] = json!("None");
                }
                let svc: Service = serde_json::from_value(json!({
                    "metadata": {"name": service_name(s)},
                    "spec": spec,
                }))
                .map_err(kube::Error::SerdeError)?;
                api.create(&PostParams::default(), &svc).await
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    for result in results {
        result?;
    }
    let routes = routes_api(client, NS);
    for g in 0..groups {
        routes
            .create(&PostParams::default(), &route_object(g, groups, routed, 0)?)
            .await?;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let list = routes.list(&ListParams::default()).await?;
        let accepted = list
            .items
            .iter()
            .filter(|r| {
                let want = r.data["spec"]["parentRefs"].as_array().map_or(0, Vec::len);
                let got = r.data["status"]["parents"].as_array().map_or(0, |ps| {
                    ps.iter()
                        .filter(|p| {
                            p["conditions"].as_array().is_some_and(|cs| {
                                cs.iter()
                                    .any(|c| c["type"] == "Accepted" && c["status"] == "True")
                            })
                        })
                        .count()
                });
                want > 0 && got == want
            })
            .count();
        if accepted == groups {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("only {accepted}/{groups} routes accepted after 120s");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn open_watch(
    channel: &Conn,
    service: usize,
    group: usize,
    events: &mpsc::UnboundedSender<(usize, Instant)>,
    ready: &Arc<AtomicUsize>,
) {
    let request = TrafficSpec {
        source_workload: format!("{NS}:client"),
        target: Some(traffic_spec::Target::Authority(format!(
            "{}.{NS}.svc.cluster.local:80",
            service_name(service)
        ))),
    };
    let path = "/io.linkerd.proxy.outbound.OutboundPolicies/Watch";
    proxy_client::open(
        channel,
        path,
        proxy_client::frame(&request),
        Some(group),
        events,
        ready,
    );
}
