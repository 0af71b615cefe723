//! The two servers the failover benchmark runs against: what each part
//! populates, which streams its proxies open, and which changes it writes
//! while they move.

use std::{
    collections::HashSet,
    net::{Ipv4Addr, SocketAddr},
    sync::Mutex,
    time::{Duration, Instant},
};

use k8s_api::labels::OPAQUE_PORTS;
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams, PostParams},
};
use linkerd2_proxy_api::{
    inbound::PortSpec,
    outbound::{TrafficSpec, traffic_spec},
};
use serde_json::json;

use super::{
    Args,
    fleet::{Fleet, StreamSpec},
    held::{Check, Truth, addr_key},
    storm::{self, Changer},
};
use crate::{
    destination::{self as dst, Plan},
    policy as pol, proxy_client,
    soak::server::Server,
};

const GET: &str = "/io.linkerd.proxy.destination.Destination/Get";
const GET_PROFILE: &str = "/io.linkerd.proxy.destination.Destination/GetProfile";
const WATCH_PORT: &str = "/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort";
const WATCH: &str = "/io.linkerd.proxy.outbound.OutboundPolicies/Watch";

/// The destination benchmark's proxy shape: 2 hot Services of 500
/// endpoints, 200 of 4.
const HOT: usize = 2;
const HOT_ENDPOINTS: usize = 500;
const SMALL: usize = 200;
const SMALL_ENDPOINTS: usize = 4;

/// The policy part: meshed pods, Servers over them, outbound Services.
const PODS: usize = 1_000;
const SERVERS: usize = 20;
const OUTBOUND_SERVICES: usize = 100;

fn work_dir(part: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "meridian-bench-failover-{part}-{}",
        std::process::id()
    ))
}

/// Two replicas of `bin`, started.
async fn replicas(
    cluster: &local_cluster::Cluster,
    bin: &std::path::Path,
    name: &str,
    grpc_flag: &str,
    extra: &[String],
) -> anyhow::Result<[Server; 2]> {
    let server = |i: usize| {
        Server::new(
            cluster,
            bin,
            (
                &format!("{name}-{i}"),
                &format!("meridian-{i}"),
                std::net::Ipv4Addr::new(127, 0, 1, u8::try_from(i + 1).unwrap_or(1)),
            ),
            grpc_flag,
            "warn",
            extra,
        )
    };
    let mut servers = [server(0)?, server(1)?];
    for s in &mut servers {
        s.start().await?;
    }
    Ok(servers)
}

fn ready_addrs(service: usize, size: usize, not_ready: Option<usize>) -> HashSet<u64> {
    (0..size)
        .filter(|e| Some(*e) != not_ready)
        .filter_map(|e| {
            let ip: Ipv4Addr = dst::pod_ip(service, e).parse().ok()?;
            addr_key(SocketAddr::from((ip, 8080)))
        })
        .collect()
}

/// Flips one endpoint's readiness in a Service's slice per change.
struct SliceChanges<'a> {
    slices: Api<EndpointSlice>,
    sizes: Vec<usize>,
    not_ready: Vec<Option<usize>>,
    truth: &'a Mutex<Truth>,
}

impl Changer for SliceChanges<'_> {
    async fn change(&mut self, k: usize) -> anyhow::Result<()> {
        // Every other change on a hot Service, the others spread.
        let s = if k.is_multiple_of(2) {
            (k / 2) % HOT
        } else {
            HOT + (k * 37) % SMALL
        };
        let size = self.sizes[s];
        let flip = match self.not_ready[s] {
            Some(_) => None,
            None => Some(k % size.max(1)),
        };
        let patch = json!({ "endpoints": dst::slice_endpoints(s, size, flip) });
        self.slices
            .patch(
                &dst::svc_name(s),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await?;
        self.not_ready[s] = flip;
        lock(self.truth).addrs[s] = ready_addrs(s, size, flip);
        Ok(())
    }
}

fn lock(m: &Mutex<Truth>) -> std::sync::MutexGuard<'_, Truth> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The destination part.
pub async fn destination(args: &Args) -> anyhow::Result<String> {
    let sizes: Vec<usize> = (0..HOT + SMALL)
        .map(|s| {
            if s < HOT {
                HOT_ENDPOINTS
            } else {
                SMALL_ENDPOINTS
            }
        })
        .collect();
    println!(
        "failover (destination): {} proxies × {} Get + {} GetProfile over 2 replicas; {} Services ({HOT} × {HOT_ENDPOINTS} endpoints, {SMALL} × {SMALL_ENDPOINTS})",
        args.connections,
        args.targets,
        args.targets,
        sizes.len()
    );
    let work_dir = work_dir("destination");
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let setup = Instant::now();
    let plan = Plan {
        sizes: sizes.clone(),
    };
    dst::populate(&client, &plan).await?;
    println!(
        "  cluster populated in {:.1}s",
        setup.elapsed().as_secs_f64()
    );
    let truth = Mutex::new(Truth {
        addrs: sizes
            .iter()
            .enumerate()
            .map(|(s, n)| ready_addrs(s, *n, None))
            .collect(),
        ..Default::default()
    });
    let mut servers = replicas(&cluster, &args.destination_bin, "destination", "addr", &[]).await?;
    let specs = (0..args.connections)
        .map(|i| {
            (0..args.targets)
                .flat_map(|k| {
                    let s = plan.service_of(i * args.targets + k, HOT);
                    let frame = dst::request_frame(s);
                    [
                        StreamSpec {
                            path: GET,
                            frame: frame.clone(),
                            check: Check::Addrs(s),
                        },
                        StreamSpec {
                            path: GET_PROFILE,
                            frame,
                            check: Check::Served,
                        },
                    ]
                })
                .collect()
        })
        .collect();
    let fleet = Fleet::start(vec![servers[0].grpc, servers[1].grpc], specs);
    let mut changer = SliceChanges {
        slices: Api::namespaced(client.clone(), dst::NS),
        not_ready: vec![None; sizes.len()],
        sizes,
        truth: &truth,
    };
    let summary = storm::run(
        "destination",
        &mut servers,
        fleet,
        &truth,
        &mut changer,
        (args.changes, Duration::from_secs(args.timeout_secs)),
    )
    .await?;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    Ok(summary)
}

/// Flips a Server's `proxyProtocol` (even changes) or an outbound
/// Service's opaque-ports annotation (odd ones).
struct PolicyChanges<'a> {
    servers: Api<DynamicObject>,
    services: Api<Service>,
    truth: &'a Mutex<Truth>,
}

impl Changer for PolicyChanges<'_> {
    async fn change(&mut self, k: usize) -> anyhow::Result<()> {
        let pp = PatchParams::default();
        if k.is_multiple_of(2) {
            let g = (k / 2) % SERVERS;
            let http2 = !lock(self.truth).http2[g];
            let protocol = if http2 { "HTTP/2" } else { "HTTP/1" };
            let patch = json!({"spec": {"proxyProtocol": protocol}});
            self.servers
                .patch(&pol::server_name(g), &pp, &Patch::Merge(&patch))
                .await?;
            lock(self.truth).http2[g] = http2;
        } else {
            let s = (k / 2 * 7) % OUTBOUND_SERVICES;
            let opaque = !lock(self.truth).opaque[s];
            let value = opaque.then_some("80");
            let patch = json!({"metadata": {"annotations": {OPAQUE_PORTS: value}}});
            self.services
                .patch(&outbound_service(s), &pp, &Patch::Merge(&patch))
                .await?;
            lock(self.truth).opaque[s] = opaque;
        }
        Ok(())
    }
}

fn outbound_service(s: usize) -> String {
    format!("out-{s}")
}

/// The policy controller part.
pub async fn policy(args: &Args) -> anyhow::Result<String> {
    println!(
        "failover (policy controller): {} proxies × {} WatchPort + {} outbound Watch over 2 replicas; {PODS} meshed pods, {SERVERS} Servers, {OUTBOUND_SERVICES} Services",
        args.connections, args.targets, args.targets,
    );
    let work_dir = work_dir("policy");
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let setup = Instant::now();
    pol::populate(&client, PODS, SERVERS).await?;
    let services: Api<Service> = Api::namespaced(client.clone(), pol::NS);
    for s in 0..OUTBOUND_SERVICES {
        let svc: Service = serde_json::from_value(json!({
            "metadata": {"name": outbound_service(s)},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
        }))?;
        services.create(&PostParams::default(), &svc).await?;
    }
    println!(
        "  cluster populated in {:.1}s",
        setup.elapsed().as_secs_f64()
    );
    let truth = Mutex::new(Truth {
        http2: vec![false; SERVERS],
        opaque: vec![false; OUTBOUND_SERVICES],
        ..Default::default()
    });
    let extra = [
        format!("--control-plane-namespace={}", pol::NS),
        "--admission-controller-disabled".to_string(),
    ];
    let mut servers = replicas(
        &cluster,
        &args.policy_bin,
        "policy-controller",
        "grpc-addr",
        &extra,
    )
    .await?;
    let specs = (0..args.connections)
        .map(|i| {
            (0..args.targets)
                .flat_map(|k| {
                    let j = i * args.targets + k;
                    let pod = j % PODS;
                    let svc = j % OUTBOUND_SERVICES;
                    let inbound = PortSpec {
                        workload: format!(
                            r#"{{"ns":"{}","pod":"{}"}}"#,
                            pol::NS,
                            pol::pod_name(pod)
                        ),
                        port: pol::PORT,
                    };
                    let outbound = TrafficSpec {
                        source_workload: format!("{}:client", pol::NS),
                        target: Some(traffic_spec::Target::Authority(format!(
                            "{}.{}.svc.cluster.local:80",
                            outbound_service(svc),
                            pol::NS
                        ))),
                    };
                    [
                        StreamSpec {
                            path: WATCH_PORT,
                            frame: proxy_client::frame(&inbound),
                            check: Check::Inbound(pod % SERVERS),
                        },
                        StreamSpec {
                            path: WATCH,
                            frame: proxy_client::frame(&outbound),
                            check: Check::Outbound(svc),
                        },
                    ]
                })
                .collect()
        })
        .collect();
    let fleet = Fleet::start(vec![servers[0].grpc, servers[1].grpc], specs);
    let mut changer = PolicyChanges {
        servers: pol::servers_api(&client),
        services,
        truth: &truth,
    };
    let summary = storm::run(
        "policy controller",
        &mut servers,
        fleet,
        &truth,
        &mut changer,
        (args.changes, Duration::from_secs(args.timeout_secs)),
    )
    .await?;
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    Ok(summary)
}
