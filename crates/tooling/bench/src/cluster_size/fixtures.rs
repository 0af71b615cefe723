//! The cluster-size benchmark's fixtures: N meshed pods shaped like the
//! proxy injector's output (Linkerd 2.20's chart, `_proxy.tpl` and
//! `_proxy-init.tpl`, read for field names only; every value here is our
//! own), owned by ReplicaSets owned by Deployments, in selector-less
//! Services whose EndpointSlices this benchmark writes itself (as the
//! destination bench does), spread over Nodes in three zones, and Servers
//! selecting every other Service's pods.
//!
//! Pods are made Running and Ready by writing their status, as kwok does
//! (see `local_cluster::workload`), with the status a kubelet would write
//! for an injected pod (init container, both containers, conditions).

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::{
    apps::v1::{Deployment, ReplicaSet},
    core::v1::{Namespace, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api,
    api::{DynamicObject, PostParams},
};
use serde_json::{Value, json};

use crate::destination::{NS, svc_name};

/// The control plane's namespace (pods carry it in
/// `linkerd.io/control-plane-ns`; the servers' leases live there).
pub const CONTROL_PLANE_NS: &str = "linkerd";
/// Endpoints per EndpointSlice, as kube-controller-manager's default.
const SLICE_MAX: usize = 100;
/// Pods per Node (the kubelet's default limit is 110).
const PODS_PER_NODE: usize = 100;
/// API writes in flight while creating fixtures.
const CONCURRENCY: usize = 32;
/// A fixed time for the fixtures' timestamps.
const T0: &str = "2026-01-01T00:00:00Z";
/// The app container's port.
pub const APP_PORT: i32 = 8080;

/// How N pods are laid out.
#[derive(Clone, Debug)]
pub struct Layout {
    pub pods: usize,
    pub services: usize,
    pub nodes: usize,
}

impl Layout {
    /// N pods in N / `per_service` Services, at most `max_services` (the
    /// local API server's Service range is small): past that, Services
    /// grow instead.
    pub fn new(pods: usize, per_service: usize, max_services: usize) -> Self {
        let services = pods
            .div_ceil(per_service.max(1))
            .clamp(1, max_services.max(1));
        Self {
            pods,
            services,
            nodes: pods.div_ceil(PODS_PER_NODE).max(1),
        }
    }

    /// The Service of pod `k` (pods are dealt to Services in turn).
    pub fn service_of(&self, k: usize) -> usize {
        k % self.services
    }

    /// The Node of pod `k`.
    fn node_of(&self, k: usize) -> usize {
        (k / self.services) % self.nodes
    }

    /// Whether Service `s` has a Server selecting its pods.
    pub fn has_server(s: usize) -> bool {
        s.is_multiple_of(2)
    }
}

/// One pod as created.
#[derive(Clone, Debug)]
pub struct PodFixture {
    pub name: String,
    pub uid: String,
    pub ip: String,
    pub node: usize,
}

/// One EndpointSlice as written: its pods (indexes into
/// [`Fixtures::pods`]) and each one's readiness as last written.
#[derive(Clone, Debug)]
pub struct SliceFixture {
    pub name: String,
    pub service: usize,
    pub members: Vec<usize>,
    pub ready: Vec<bool>,
}

/// Everything created, kept to write status flips and slice changes.
pub struct Fixtures {
    pub layout: Layout,
    pub pods: Vec<PodFixture>,
    pub slices: Vec<SliceFixture>,
    /// API writes made to create them.
    pub writes: usize,
}

fn node_name(n: usize) -> String {
    format!("node-{n}")
}

fn zone_of(n: usize) -> String {
    format!("zone-{}", ["a", "b", "c"][n % 3])
}

fn node_ip(n: usize) -> String {
    format!("10.1.{}.{}", n / 250, n % 250 + 1)
}

fn pod_ip(k: usize) -> String {
    format!("10.{}.{}.{}", 64 + k / 65_536, (k / 256) % 256, k % 256)
}

/// A deterministic scramble of `n` (splitmix64), for names and ids.
fn mix(mut n: u64) -> u64 {
    n = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    n = (n ^ (n >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    n = (n ^ (n >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    n ^ (n >> 31)
}

/// `len` characters of the alphabet Kubernetes uses for generated names;
/// distinct seeds below 27^5 give distinct 5-character suffixes.
fn suffix(seed: u64, len: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    const BASE: u64 = ALPHABET.len() as u64;
    // A bijection of 0..27^5 (the multiplier is prime to 27), so that
    // consecutive pods do not get look-alike names.
    let mut n = (seed.wrapping_mul(7_368_787).wrapping_add(12_345)) % BASE.pow(5)
        + (mix(seed) % BASE.pow(5)) * BASE.pow(5);
    (0..len)
        .map(|i| {
            if i == 10 {
                n = mix(n);
            }
            let c = ALPHABET[(n % BASE) as usize];
            n /= BASE;
            c as char
        })
        .collect()
}

/// `len` hex digits (container ids, image digests).
fn hex(seed: u64, len: usize) -> String {
    let mut out = String::with_capacity(len + 16);
    let mut n = seed;
    while out.len() < len {
        n = mix(n);
        out.push_str(&format!("{n:016x}"));
    }
    out.truncate(len);
    out
}

fn template_hash(s: usize) -> String {
    suffix(s as u64 ^ 0x5eed, 10)
}

fn replica_set_name(s: usize) -> String {
    format!("{}-{}", svc_name(s), template_hash(s))
}

/// Progress of one fixture step on stderr, every two seconds.
struct Progress {
    done: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
    what: &'static str,
    total: usize,
    start: Instant,
}

impl Progress {
    fn start(what: &'static str, total: usize) -> Self {
        let done = Arc::new(AtomicUsize::new(0));
        let counter = done.clone();
        let start = Instant::now();
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let n = counter.load(Ordering::Relaxed);
                eprintln!(
                    "    {what}: {n}/{total} ({:.0}/s)",
                    n as f64 / start.elapsed().as_secs_f64()
                );
            }
        });
        Self {
            done,
            task,
            what,
            total,
            start,
        }
    }

    fn tick(&self) {
        self.done.fetch_add(1, Ordering::Relaxed);
    }

    fn finish(self) {
        self.task.abort();
        eprintln!(
            "    {}: {} in {:.1}s",
            self.what,
            self.total,
            self.start.elapsed().as_secs_f64()
        );
    }
}

/// Runs `make(i)` for `i` in `0..n`, `CONCURRENCY` at a time, with progress;
/// the first error fails the step (fixtures are not measured, so none is
/// skipped).
async fn each<T, F, Fut>(what: &'static str, n: usize, make: F) -> anyhow::Result<Vec<T>>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<T>>,
{
    let progress = Progress::start(what, n);
    let out: Vec<T> = stream::iter(0..n)
        .map(|i| {
            let fut = make(i);
            let progress = &progress;
            async move {
                let value = fut.await?;
                progress.tick();
                Ok::<_, anyhow::Error>(value)
            }
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    progress.finish();
    Ok(out)
}

/// Creates every fixture of `layout`, printing progress on stderr.
pub async fn create(client: &kube::Client, layout: &Layout) -> anyhow::Result<Fixtures> {
    let mut writes = 0usize;
    for ns in [NS, CONTROL_PLANE_NS] {
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(ns.into());
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {ns}"))?;
        writes += 1;
    }
    each("nodes", layout.nodes, |n| async move {
        local_cluster::node::ensure_node(client, &node_name(n), Some(&zone_of(n))).await?;
        Ok::<_, anyhow::Error>(())
    })
    .await?;
    writes += layout.nodes;

    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NS);
    let per_service = layout.pods.div_ceil(layout.services);
    let rs_uids = each("deployments and replica sets", layout.services, |s| {
        let (deployments, replica_sets) = (deployments.clone(), replica_sets.clone());
        async move {
            let deployment: Deployment = serde_json::from_value(deployment(s, per_service))?;
            let created = deployments
                .create(&PostParams::default(), &deployment)
                .await?;
            let uid = created.metadata.uid.unwrap_or_default();
            let rs: ReplicaSet = serde_json::from_value(replica_set(s, per_service, &uid))?;
            let created = replica_sets.create(&PostParams::default(), &rs).await?;
            Ok::<_, anyhow::Error>(created.metadata.uid.unwrap_or_default())
        }
    })
    .await?;
    writes += 2 * layout.services;

    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let svc_uids = each("services", layout.services, |s| {
        let services = services.clone();
        async move {
            let svc: Service = serde_json::from_value(json!({
                "metadata": {"name": svc_name(s), "labels": {"app": svc_name(s)}},
                "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"}]},
            }))?;
            let created = services.create(&PostParams::default(), &svc).await?;
            Ok::<_, anyhow::Error>(created.metadata.uid.unwrap_or_default())
        }
    })
    .await?;
    writes += layout.services;

    let trust_root = local_cluster::certs::LocalCa::new("root.linkerd.cluster.local")?
        .cert_pem()
        .to_string();
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let pods = each(
        "pods (create, then Running/Ready status)",
        layout.pods,
        |k| {
            let (pods_api, rs_uids, trust_root) = (pods_api.clone(), &rs_uids, &trust_root);
            async move {
                let s = layout.service_of(k);
                let node = layout.node_of(k);
                let name = format!("{}-{}", replica_set_name(s), suffix(k as u64, 5));
                let pod: Pod = serde_json::from_value(pod(
                    &name,
                    s,
                    &rs_uids[s],
                    &node_name(node),
                    trust_root,
                ))?;
                let created = pods_api.create(&PostParams::default(), &pod).await?;
                let ip = pod_ip(k);
                pods_api
                    .patch_status(
                        &name,
                        &kube::api::PatchParams::default(),
                        &kube::api::Patch::Merge(pod_status(k, &ip, &node_ip(node), true)),
                    )
                    .await?;
                Ok::<_, anyhow::Error>(PodFixture {
                    name,
                    uid: created.metadata.uid.unwrap_or_default(),
                    ip,
                    node,
                })
            }
        },
    )
    .await?;
    writes += 2 * layout.pods;

    let mut slices = Vec::new();
    for s in 0..layout.services {
        let members: Vec<usize> = (s..layout.pods).step_by(layout.services).collect();
        for (c, chunk) in members.chunks(SLICE_MAX).enumerate() {
            slices.push(SliceFixture {
                name: format!("{}-{}", svc_name(s), suffix((s * 1000 + c) as u64, 5)),
                service: s,
                members: chunk.to_vec(),
                ready: vec![true; chunk.len()],
            });
        }
    }
    let slices_api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    each("endpoint slices", slices.len(), |i| {
        let (slices_api, slice, pods, svc_uids) = (slices_api.clone(), &slices[i], &pods, &svc_uids);
        async move {
            let object: EndpointSlice = serde_json::from_value(json!({
                "metadata": {
                    "name": slice.name,
                    "labels": {
                        "kubernetes.io/service-name": svc_name(slice.service),
                        "endpointslice.kubernetes.io/managed-by": "meridian-bench",
                    },
                    "ownerReferences": [{
                        "apiVersion": "v1", "kind": "Service", "name": svc_name(slice.service),
                        "uid": svc_uids[slice.service], "controller": true, "blockOwnerDeletion": true,
                    }],
                },
                "addressType": "IPv4",
                "ports": [{"name": "http", "port": APP_PORT, "protocol": "TCP"}],
                "endpoints": slice_endpoints(slice, pods),
            }))?;
            slices_api.create(&PostParams::default(), &object).await?;
            Ok::<_, anyhow::Error>(())
        }
    })
    .await?;
    writes += slices.len();

    let servers = crate::policy::servers_api(client);
    let with_server: Vec<usize> = (0..layout.services)
        .filter(|s| Layout::has_server(*s))
        .collect();
    each("servers", with_server.len(), |i| {
        let servers = servers.clone();
        let s = with_server[i];
        async move {
            let protocol = if s.is_multiple_of(4) {
                "HTTP/1"
            } else {
                "opaque"
            };
            let server: DynamicObject = serde_json::from_value(json!({
                "apiVersion": "policy.linkerd.io/v1beta3",
                "kind": "Server",
                "metadata": {"name": svc_name(s)},
                "spec": {
                    "podSelector": {"matchLabels": {"app": svc_name(s)}},
                    "port": "http",
                    "proxyProtocol": protocol,
                    "accessPolicy": "all-authenticated",
                },
            }))?;
            servers.create(&PostParams::default(), &server).await?;
            Ok::<_, anyhow::Error>(())
        }
    })
    .await?;
    writes += with_server.len();

    Ok(Fixtures {
        layout: layout.clone(),
        pods,
        slices,
        writes,
    })
}

/// The endpoints of `slice`, with each member's readiness as recorded.
pub fn slice_endpoints(slice: &SliceFixture, pods: &[PodFixture]) -> Value {
    let endpoints: Vec<Value> = slice
        .members
        .iter()
        .zip(&slice.ready)
        .map(|(&k, &ready)| {
            let pod = &pods[k];
            json!({
                "addresses": [pod.ip],
                "conditions": {"ready": ready, "serving": ready, "terminating": false},
                "nodeName": node_name(pod.node),
                "zone": zone_of(pod.node),
                "targetRef": {"kind": "Pod", "namespace": NS, "name": pod.name, "uid": pod.uid},
            })
        })
        .collect();
    Value::Array(endpoints)
}

fn app_labels(s: usize) -> Value {
    json!({"app": svc_name(s), "pod-template-hash": template_hash(s)})
}

fn app_container() -> Value {
    json!({
        "name": "app",
        "image": "registry.example.invalid/bench/app:1.4.2",
        "ports": [{"name": "http", "containerPort": APP_PORT, "protocol": "TCP"}],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
    })
}

fn deployment(s: usize, replicas: usize) -> Value {
    json!({
        "metadata": {"name": svc_name(s), "labels": {"app": svc_name(s)}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": svc_name(s)}},
            "template": {
                "metadata": {"labels": {"app": svc_name(s)}, "annotations": {"linkerd.io/inject": "enabled"}},
                "spec": {"containers": [app_container()]},
            },
        },
    })
}

fn replica_set(s: usize, replicas: usize, deployment_uid: &str) -> Value {
    json!({
        "metadata": {
            "name": replica_set_name(s),
            "labels": app_labels(s),
            "annotations": {
                "deployment.kubernetes.io/desired-replicas": replicas.to_string(),
                "deployment.kubernetes.io/max-replicas": (replicas + replicas / 4).to_string(),
                "deployment.kubernetes.io/revision": "1",
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "Deployment", "name": svc_name(s),
                "uid": deployment_uid, "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": app_labels(s)},
            "template": {
                "metadata": {"labels": app_labels(s), "annotations": {"linkerd.io/inject": "enabled"}},
                "spec": {"containers": [app_container()]},
            },
        },
    })
}

/// The env of an injected `linkerd-proxy` container (the names of a 2.20
/// injection with the chart's defaults; values of our own).
fn proxy_env(trust_root: &str) -> Value {
    let field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}});
    let value = |name: &str, value: &str| json!({"name": name, "value": value});
    let networks = "10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8";
    let identity = "linkerd-identity.linkerd.serviceaccount.identity.linkerd.cluster.local";
    let destination = "linkerd-destination.linkerd.serviceaccount.identity.linkerd.cluster.local";
    Value::Array(vec![
        field("_pod_name", "metadata.name"),
        field("_pod_ns", "metadata.namespace"),
        field("_pod_uid", "metadata.uid"),
        field("_pod_ip", "status.podIP"),
        field("_pod_nodeName", "spec.nodeName"),
        value("_pod_containerName", "linkerd-proxy"),
        value("LINKERD2_PROXY_CORES", "1"),
        value("LINKERD2_PROXY_CORES_MIN", "1"),
        value("LINKERD2_PROXY_SHUTDOWN_ENDPOINT_ENABLED", "false"),
        value(
            "LINKERD2_PROXY_LOG",
            "warn,linkerd=info,hickory=error,linkerd_proxy_http::client[{headers}]=off",
        ),
        value("LINKERD2_PROXY_LOG_FORMAT", "plain"),
        value(
            "LINKERD2_PROXY_DESTINATION_SVC_ADDR",
            "linkerd-dst-headless.linkerd.svc.cluster.local.:8086",
        ),
        value("LINKERD2_PROXY_DESTINATION_PROFILE_NETWORKS", networks),
        value(
            "LINKERD2_PROXY_POLICY_SVC_ADDR",
            "linkerd-policy.linkerd.svc.cluster.local.:8090",
        ),
        value(
            "LINKERD2_PROXY_POLICY_WORKLOAD",
            "{\"ns\":\"$(_pod_ns)\", \"pod\":\"$(_pod_name)\"}\n",
        ),
        value(
            "LINKERD2_PROXY_INBOUND_DEFAULT_POLICY",
            "all-unauthenticated",
        ),
        value("LINKERD2_PROXY_POLICY_CLUSTER_NETWORKS", networks),
        value("LINKERD2_PROXY_CONTROL_STREAM_INITIAL_TIMEOUT", "3s"),
        value("LINKERD2_PROXY_CONTROL_STREAM_IDLE_TIMEOUT", "5m"),
        value("LINKERD2_PROXY_CONTROL_STREAM_LIFETIME", "1h"),
        value("LINKERD2_PROXY_INBOUND_CONNECT_TIMEOUT", "100ms"),
        value("LINKERD2_PROXY_OUTBOUND_CONNECT_TIMEOUT", "1000ms"),
        value("LINKERD2_PROXY_OUTBOUND_DISCOVERY_IDLE_TIMEOUT", "5s"),
        value("LINKERD2_PROXY_INBOUND_DISCOVERY_IDLE_TIMEOUT", "90s"),
        value("LINKERD2_PROXY_CONTROL_LISTEN_ADDR", "0.0.0.0:4190"),
        value("LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "0.0.0.0:4191"),
        value("LINKERD2_PROXY_OUTBOUND_LISTEN_ADDR", "127.0.0.1:4140"),
        value("LINKERD2_PROXY_OUTBOUND_LISTEN_ADDRS", "127.0.0.1:4140"),
        value("LINKERD2_PROXY_INBOUND_LISTEN_ADDR", "0.0.0.0:4143"),
        field("LINKERD2_PROXY_INBOUND_IPS", "status.podIPs"),
        value("LINKERD2_PROXY_INBOUND_PORTS", &APP_PORT.to_string()),
        value(
            "LINKERD2_PROXY_DESTINATION_PROFILE_SUFFIXES",
            "svc.cluster.local.",
        ),
        value("LINKERD2_PROXY_INBOUND_ACCEPT_KEEPALIVE", "10000ms"),
        value("LINKERD2_PROXY_OUTBOUND_CONNECT_KEEPALIVE", "10000ms"),
        value("LINKERD2_PROXY_INBOUND_ACCEPT_USER_TIMEOUT", "30s"),
        value("LINKERD2_PROXY_OUTBOUND_CONNECT_USER_TIMEOUT", "30s"),
        value("LINKERD2_PROXY_OUTBOUND_METRICS_HOSTNAME_LABELS", "false"),
        value(
            "LINKERD2_PROXY_INBOUND_SERVER_HTTP2_KEEP_ALIVE_INTERVAL",
            "10s",
        ),
        value(
            "LINKERD2_PROXY_INBOUND_SERVER_HTTP2_KEEP_ALIVE_TIMEOUT",
            "3s",
        ),
        value(
            "LINKERD2_PROXY_OUTBOUND_SERVER_HTTP2_KEEP_ALIVE_INTERVAL",
            "10s",
        ),
        value(
            "LINKERD2_PROXY_OUTBOUND_SERVER_HTTP2_KEEP_ALIVE_TIMEOUT",
            "3s",
        ),
        value(
            "LINKERD2_PROXY_DESTINATION_CONTEXT",
            "{\"ns\":\"$(_pod_ns)\", \"nodeName\":\"$(_pod_nodeName)\", \"pod\":\"$(_pod_name)\"}\n",
        ),
        field("_pod_sa", "spec.serviceAccountName"),
        value("_l5d_ns", CONTROL_PLANE_NS),
        value("_l5d_trustdomain", "cluster.local"),
        value(
            "LINKERD2_PROXY_IDENTITY_DIR",
            "/var/run/linkerd/identity/end-entity",
        ),
        value("LINKERD2_PROXY_IDENTITY_TRUST_ANCHORS", trust_root),
        value(
            "LINKERD2_PROXY_IDENTITY_TOKEN_FILE",
            "/var/run/secrets/tokens/linkerd-identity-token",
        ),
        value(
            "LINKERD2_PROXY_IDENTITY_SVC_ADDR",
            "linkerd-identity-headless.linkerd.svc.cluster.local.:8080",
        ),
        value(
            "LINKERD2_PROXY_IDENTITY_LOCAL_NAME",
            "$(_pod_sa).$(_pod_ns).serviceaccount.identity.linkerd.cluster.local",
        ),
        value("LINKERD2_PROXY_IDENTITY_SVC_NAME", identity),
        value("LINKERD2_PROXY_DESTINATION_SVC_NAME", destination),
        value("LINKERD2_PROXY_POLICY_SVC_NAME", destination),
    ])
}

fn proxy_container(trust_root: &str) -> Value {
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": 4191, "scheme": "HTTP"}, "initialDelaySeconds": 10, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
    json!({
        "name": "linkerd-proxy",
        "image": "registry.example.invalid/linkerd/proxy:stable-2.20.0",
        "env": proxy_env(trust_root),
        "ports": [
            {"name": "linkerd-proxy", "containerPort": 4143, "protocol": "TCP"},
            {"name": "linkerd-admin", "containerPort": 4191, "protocol": "TCP"},
        ],
        "livenessProbe": probe("/live"),
        "readinessProbe": probe("/ready"),
        "lifecycle": {"postStart": {"exec": {"command": ["/usr/lib/linkerd/linkerd-await", "--timeout=2m", "--port=4191"]}}},
        "resources": {"requests": {"cpu": "100m", "memory": "20Mi"}, "limits": {"memory": "250Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "runAsNonRoot": true,
            "runAsUser": 2102, "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"mountPath": "/var/run/linkerd/identity/end-entity", "name": "linkerd-identity-end-entity"},
            {"mountPath": "/var/run/secrets/tokens", "name": "linkerd-identity-token"},
        ],
    })
}

fn proxy_init_container() -> Value {
    json!({
        "name": "linkerd-init",
        "image": "registry.example.invalid/linkerd/proxy:stable-2.20.0",
        "command": ["/usr/lib/linkerd/linkerd2-proxy-init"],
        "args": [
            "--incoming-proxy-port", "4143", "--outgoing-proxy-port", "4140",
            "--proxy-uid", "2102", "--inbound-ports-to-ignore", "4190,4191,4567,4568",
            "--outbound-ports-to-ignore", "4567,4568",
        ],
        "resources": {"requests": {"cpu": "100m", "memory": "20Mi"}, "limits": {"memory": "250Mi"}},
        "securityContext": {
            "allowPrivilegeEscalation": false, "privileged": false, "readOnlyRootFilesystem": true,
            "runAsNonRoot": true, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"},
            "capabilities": {"add": ["NET_ADMIN", "NET_RAW"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"mountPath": "/run", "name": "linkerd-proxy-init-xtables-lock"}],
    })
}

/// An injected pod of Service `s`, owned by its ReplicaSet.
fn pod(name: &str, s: usize, rs_uid: &str, node: &str, trust_root: &str) -> Value {
    let mut labels = app_labels(s);
    if let Value::Object(map) = &mut labels {
        map.insert(
            "linkerd.io/control-plane-ns".into(),
            CONTROL_PLANE_NS.into(),
        );
        map.insert("linkerd.io/proxy-deployment".into(), svc_name(s).into());
        map.insert("linkerd.io/workload-ns".into(), NS.into());
    }
    json!({
        "metadata": {
            "name": name,
            "generateName": format!("{}-", replica_set_name(s)),
            "labels": labels,
            "annotations": {
                "kubectl.kubernetes.io/default-container": "app",
                "linkerd.io/created-by": "linkerd/proxy-injector stable-2.20.0",
                "linkerd.io/inject": "enabled",
                "linkerd.io/proxy-version": "stable-2.20.0",
                "linkerd.io/trust-root-sha256": hex(0x7275_7374, 64),
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": replica_set_name(s),
                "uid": rs_uid, "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": {
            "nodeName": node,
            "serviceAccountName": svc_name(s),
            "initContainers": [proxy_init_container()],
            "containers": [proxy_container(trust_root), app_container()],
            "volumes": [
                {"name": "linkerd-proxy-init-xtables-lock", "emptyDir": {}},
                {"name": "linkerd-identity-end-entity", "emptyDir": {"medium": "Memory"}},
                {"name": "linkerd-identity-token", "projected": {"sources": [{"serviceAccountToken": {
                    "audience": "identity.l5d.io", "expirationSeconds": 86400, "path": "linkerd-identity-token",
                }}]}},
            ],
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
                {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            ],
        },
    })
}

/// The status a kubelet writes for injected pod `k`: Running, its IP, the
/// init container done, both containers running, Ready as given.
pub fn pod_status(k: usize, ip: &str, host_ip: &str, ready: bool) -> Value {
    let flag = if ready { "True" } else { "False" };
    let id = |salt: u64| format!("containerd://{}", hex((k as u64) << 8 | salt, 64));
    let image_id = |salt: u64| format!("registry.example.invalid/img@sha256:{}", hex(salt, 64));
    let condition = |kind: &str, status: &str| json!({"type": kind, "status": status, "lastProbeTime": null, "lastTransitionTime": T0});
    json!({
        "status": {
            "phase": "Running",
            "hostIP": host_ip,
            "hostIPs": [{"ip": host_ip}],
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "startTime": T0,
            "qosClass": "Burstable",
            "conditions": [
                condition("PodReadyToStartContainers", "True"),
                condition("Initialized", "True"),
                condition("Ready", flag),
                condition("ContainersReady", flag),
                condition("PodScheduled", "True"),
            ],
            "initContainerStatuses": [{
                "name": "linkerd-init", "ready": true, "restartCount": 0, "started": false,
                "image": "registry.example.invalid/linkerd/proxy:stable-2.20.0", "imageID": image_id(1),
                "containerID": id(1),
                "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": T0, "finishedAt": T0, "containerID": id(1)}},
            }],
            "containerStatuses": [
                {
                    "name": "app", "ready": ready, "restartCount": 0, "started": true,
                    "image": "registry.example.invalid/bench/app:1.4.2", "imageID": image_id(2),
                    "containerID": id(2), "state": {"running": {"startedAt": T0}},
                },
                {
                    "name": "linkerd-proxy", "ready": true, "restartCount": 0, "started": true,
                    "image": "registry.example.invalid/linkerd/proxy:stable-2.20.0", "imageID": image_id(1),
                    "containerID": id(3), "state": {"running": {"startedAt": T0}},
                },
            ],
        }
    })
}

/// The host IP of pod `pod`'s node.
pub fn host_ip(pod: &PodFixture) -> String {
    node_ip(pod.node)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_names_and_ips_are_unique_at_50000_pods() {
        let layout = Layout::new(50_000, 50, 200);
        assert_eq!((layout.services, layout.nodes), (200, 500));
        let names: std::collections::HashSet<String> = (0..layout.pods)
            .map(|k| {
                let s = layout.service_of(k);
                format!("{}-{}", replica_set_name(s), suffix(k as u64, 5))
            })
            .collect();
        assert_eq!(names.len(), 50_000);
        let ips: std::collections::HashSet<String> = (0..layout.pods).map(pod_ip).collect();
        assert_eq!(ips.len(), 50_000);
    }

    #[test]
    fn services_hold_50_pods_until_the_cap() {
        let layout = Layout::new(2_000, 50, 200);
        assert_eq!(layout.services, 40);
        assert_eq!(
            (0..2_000).filter(|k| layout.service_of(*k) == 7).count(),
            50
        );
        assert_eq!(Layout::new(10_000, 50, 200).services, 200);
    }

    #[test]
    fn injected_pods_carry_the_proxy_and_its_env() {
        let pod: Pod =
            serde_json::from_value(pod("p", 3, "uid", "node-0", "PEM")).expect("a valid Pod");
        let spec = pod.spec.expect("spec");
        let proxy = &spec.containers[0];
        assert_eq!(proxy.name, "linkerd-proxy");
        let env = proxy.env.as_ref().expect("env");
        assert!(env.len() >= 30, "{} env vars", env.len());
        for name in [
            "LINKERD2_PROXY_INBOUND_LISTEN_ADDR",
            "LINKERD2_PROXY_ADMIN_LISTEN_ADDR",
            "LINKERD2_PROXY_CONTROL_LISTEN_ADDR",
        ] {
            assert!(env.iter().any(|e| e.name == name), "{name}");
        }
        assert_eq!(spec.init_containers.expect("init")[0].name, "linkerd-init");
        let owner = &pod.metadata.owner_references.expect("owners")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("ReplicaSet", replica_set_name(3).as_str())
        );
    }
}
