//! Turns a Service, its EndpointSlices and the pods they reference into the
//! unfiltered endpoint set of one requested port, and an endpoint into the
//! `WeightedAddr` a proxy receives (labels, protocol hint, identity, …).
//!
//! Endpoints are small immutable values compared with `PartialEq`: any change
//! to something that feeds a response (pod labels, annotations, proxy ports,
//! hints, Server opacity) makes the endpoint unequal, so diffs re-`Add` it.

use crate::authority::ServiceId;
use crate::config::{PortSet, TranslatorConfig, parse_port_list};
use k8s_openapi::api::core::v1::{Container, Pod, Service};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use linkerd2_proxy_api::destination::{
    AuthorityOverride, ProtocolHint, TlsIdentity, WeightedAddr, protocol_hint, tls_identity,
};
use linkerd2_proxy_api::net::TcpAddress;
use std::collections::{BTreeMap, HashMap};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// Pod label naming the control plane that injected the pod's proxy.
pub const LABEL_CONTROL_PLANE_NS: &str = k8s_api::labels::CONTROL_PLANE_NS;
/// Pod label set by the Deployment controller.
pub const LABEL_POD_TEMPLATE_HASH: &str = "pod-template-hash";
/// Pod annotation listing opaque ports (numbers, ranges, named container ports).
pub const ANNOTATION_OPAQUE_PORTS: &str = "config.linkerd.io/opaque-ports";
/// Pod annotation listing inbound ports the proxy does not handle.
pub const ANNOTATION_SKIP_INBOUND_PORTS: &str = "config.linkerd.io/skip-inbound-ports";
/// EndpointSlice label naming its Service.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// EndpointSlice label set on mirrored (multicluster) slices.
pub const LABEL_REMOTE_CLUSTER_NAME: &str = "mirror.linkerd.io/cluster-name";
/// EndpointSlice annotation with the remote Service's FQDN.
pub const ANNOTATION_REMOTE_SVC_FQ_NAME: &str = "mirror.linkerd.io/remote-svc-fq-name";
/// EndpointSlice annotation with the remote gateway's TLS identity.
pub const ANNOTATION_REMOTE_GATEWAY_IDENTITY: &str = "mirror.linkerd.io/remote-gateway-identity";
/// Node label with the node's zone.
pub const LABEL_TOPOLOGY_ZONE: &str = "topology.kubernetes.io/zone";
/// Name of the injected proxy container.
pub const PROXY_CONTAINER_NAME: &str = "linkerd-proxy";
/// Proxy env var with the inbound listen address.
pub const ENV_INBOUND_LISTEN_ADDR: &str = "LINKERD2_PROXY_INBOUND_LISTEN_ADDR";
/// Proxy env var with the admin listen address.
pub const ENV_ADMIN_LISTEN_ADDR: &str = "LINKERD2_PROXY_ADMIN_LISTEN_ADDR";
/// Proxy env var with the control listen address.
pub const ENV_CONTROL_LISTEN_ADDR: &str = "LINKERD2_PROXY_CONTROL_LISTEN_ADDR";
/// Weight of every endpoint (×10 with zone weights in the client's zone).
pub const DEFAULT_WEIGHT: u32 = 10_000;

/// Address family of an endpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressFamily {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl AddressFamily {
    /// The family of an IP address.
    pub fn of(ip: IpAddr) -> Self {
        match ip {
            IpAddr::V4(_) => Self::V4,
            IpAddr::V6(_) => Self::V6,
        }
    }
}

/// Identity of an address within a Service port (spec §3).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AddressId {
    /// A pod-backed address: one per pod and family.
    Pod {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        name: String,
        /// Family of the slice the address came from.
        family: AddressFamily,
    },
    /// An address without a targetRef: `<svc>-<ip>-<port>[-<hostname>]`.
    Service {
        /// Slice namespace.
        namespace: String,
        /// Synthesised name.
        name: String,
    },
}

/// The target port of a requested Service port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetPort {
    /// The Service declares the port: match slice ports by this ServicePort name (maybe `""`).
    Name(String),
    /// The Service lacks the port (or does not exist): use the number as-is.
    Number(u16),
}

/// Resolves the requested port through the Service's ports (first one with that port number).
pub fn target_port(service: Option<&Service>, requested_port: u16) -> TargetPort {
    service
        .and_then(|svc| svc.spec.as_ref())
        .and_then(|spec| spec.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.port == i32::from(requested_port)))
        .map_or(TargetPort::Number(requested_port), |p| {
            TargetPort::Name(p.name.clone().unwrap_or_default())
        })
}

/// Whether the Service has `internalTrafficPolicy: Local`.
pub fn internal_traffic_policy_local(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.internal_traffic_policy.as_deref())
        == Some("Local")
}

/// The `topology.kubernetes.io/zone` label of a node (metadata only), if set.
pub fn node_topology_zone(node: &ObjectMeta) -> Option<&str> {
    node.labels
        .as_ref()
        .and_then(|l| l.get(LABEL_TOPOLOGY_ZONE))
        .map(String::as_str)
}

/// The port number a slice offers for the target, if any. A slice without a
/// `ports` list contributes nothing.
fn resolve_slice_port(ports: Option<&[EndpointPort]>, target: &TargetPort) -> Option<u16> {
    let ports = ports?;
    match target {
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => ports
            .iter()
            .find(|p| p.name.as_deref().unwrap_or("") == name && p.port.is_some())
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok()),
    }
}

/// Kinds of pod owner whose own owner decides the metrics label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParentKind {
    /// `apps/v1 ReplicaSet`.
    ReplicaSet,
    /// `batch/v1 Job`.
    Job,
}

/// An owner reference reduced to what the labels need.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// Kind as written in the reference (e.g. `Deployment`).
    pub kind: String,
    /// Name of the owner.
    pub name: String,
}

/// The only owner of an object, if it has exactly one. Use it to answer the
/// owner lookup from metadata-only ReplicaSet/Job caches.
pub fn sole_owner(meta: &ObjectMeta) -> Option<OwnerRef> {
    match meta.owner_references.as_deref() {
        Some([only]) => Some(OwnerRef {
            kind: only.kind.clone(),
            name: only.name.clone(),
        }),
        _ => None,
    }
}

/// The single owner metrics label of a pod: `<key>: <name>`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerLabel {
    /// Label key: lowercased kind, `pod`, or `k8s_job` for Jobs.
    pub key: String,
    /// Owner name.
    pub name: String,
}

impl OwnerLabel {
    fn new(kind: &str, name: &str) -> Self {
        let kind = kind.to_ascii_lowercase();
        let key = if kind == "job" {
            "k8s_job".to_string()
        } else {
            kind
        };
        Self {
            key,
            name: name.to_string(),
        }
    }
}

/// Looks up the sole owner of a pod's ReplicaSet or Job parent
/// (`kind, namespace, name`); `None` if the parent is unknown or has not
/// exactly one owner.
pub type OwnerLookup<'a> = &'a dyn Fn(ParentKind, &str, &str) -> Option<OwnerRef>;

/// Computes the owner label of a pod:
/// no or several owners → `pod`; a ReplicaSet owned by a deployment,
/// statefulset, daemonset or job → that kind, else `replicaset`; a Job → its
/// single owner's kind, else `k8s_job`; any other kind → lowercased.
pub fn owner_label(pod: &Pod, lookup: OwnerLookup<'_>) -> OwnerLabel {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let parent = match pod.metadata.owner_references.as_deref() {
        Some([only]) => only,
        _ => return OwnerLabel::new("pod", pod_name),
    };
    match parent.kind.as_str() {
        "ReplicaSet" => match lookup(ParentKind::ReplicaSet, ns, &parent.name) {
            Some(grand)
                if matches!(
                    grand.kind.to_ascii_lowercase().as_str(),
                    "deployment" | "statefulset" | "daemonset" | "job"
                ) =>
            {
                OwnerLabel::new(&grand.kind, &grand.name)
            }
            _ => OwnerLabel::new(&parent.kind, &parent.name),
        },
        "Job" => match lookup(ParentKind::Job, ns, &parent.name) {
            Some(grand) => OwnerLabel::new(&grand.kind, &grand.name),
            None => OwnerLabel::new(&parent.kind, &parent.name),
        },
        kind => OwnerLabel::new(kind, &parent.name),
    }
}

/// Why a proxy port could not be read from the pod spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ProxyPortError {
    /// No `linkerd-proxy` container (or init container).
    #[error("no linkerd-proxy container in the pod spec")]
    NoProxyContainer,
    /// The env var is absent from the proxy container.
    #[error("{env} is not set on the linkerd-proxy container")]
    Missing {
        /// Env var name.
        env: &'static str,
    },
    /// The env var is not `ip:port` with a non-zero port.
    #[error("{env}={value:?} on the linkerd-proxy container is not an ip:port")]
    Unparsable {
        /// Env var name.
        env: &'static str,
        /// Its value.
        value: String,
    },
}

/// The proxy's listen ports, read from the `linkerd-proxy` container env.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProxyPorts {
    /// `LINKERD2_PROXY_INBOUND_LISTEN_ADDR`.
    pub inbound: Result<u16, ProxyPortError>,
    /// `LINKERD2_PROXY_ADMIN_LISTEN_ADDR`.
    pub admin: Result<u16, ProxyPortError>,
    /// `LINKERD2_PROXY_CONTROL_LISTEN_ADDR`.
    pub control: Result<u16, ProxyPortError>,
}

impl ProxyPorts {
    /// Reads the ports from the first `linkerd-proxy` container among the init
    /// containers (native sidecars) and then the containers.
    pub fn from_pod(pod: &Pod) -> Self {
        let proxy = pod.spec.as_ref().and_then(|spec| {
            spec.init_containers
                .iter()
                .flatten()
                .chain(spec.containers.iter())
                .find(|c| c.name == PROXY_CONTAINER_NAME)
        });
        let Some(proxy) = proxy else {
            return Self {
                inbound: Err(ProxyPortError::NoProxyContainer),
                admin: Err(ProxyPortError::NoProxyContainer),
                control: Err(ProxyPortError::NoProxyContainer),
            };
        };
        Self {
            inbound: env_port(proxy, ENV_INBOUND_LISTEN_ADDR),
            admin: env_port(proxy, ENV_ADMIN_LISTEN_ADDR),
            control: env_port(proxy, ENV_CONTROL_LISTEN_ADDR),
        }
    }
}

fn env_port(container: &Container, env: &'static str) -> Result<u16, ProxyPortError> {
    let mut result = Err(ProxyPortError::Missing { env });
    for var in container.env.iter().flatten().filter(|v| v.name == env) {
        let value = var.value.as_deref().unwrap_or_default();
        match value.parse::<SocketAddr>() {
            Ok(addr) if addr.port() != 0 => result = Ok(addr.port()),
            _ => {
                return Err(ProxyPortError::Unparsable {
                    env,
                    value: value.to_string(),
                });
            }
        }
    }
    result
}

/// Everything about a pod that feeds its `WeightedAddr` or filtering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInfo {
    /// Pod name.
    pub name: String,
    /// Pod namespace (`default` if unset).
    pub namespace: String,
    /// Service account (`default` if unset).
    pub service_account: String,
    /// `spec.nodeName`, used by `internalTrafficPolicy: Local`.
    pub node_name: Option<String>,
    /// Non-empty `linkerd.io/control-plane-ns` label.
    pub control_plane_ns: Option<String>,
    /// Non-empty `pod-template-hash` label.
    pub pod_template_hash: Option<String>,
    /// The owner metrics label.
    pub owner: OwnerLabel,
    /// `config.linkerd.io/opaque-ports` if annotated (named ports resolved);
    /// `None` means the default opaque ports apply.
    pub opaque_ports: Option<PortSet>,
    /// `config.linkerd.io/skip-inbound-ports`.
    pub skip_inbound_ports: PortSet,
    /// Proxy listen ports.
    pub proxy_ports: ProxyPorts,
}

impl PodInfo {
    /// Extracts the pod facts; the owner label needs the ReplicaSet/Job lookup.
    pub fn from_pod(pod: &Pod, owners: OwnerLookup<'_>) -> Self {
        let meta = &pod.metadata;
        let label = |key: &str| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
        let spec = pod.spec.as_ref();
        let opaque_ports = annotation(ANNOTATION_OPAQUE_PORTS).map(|list| {
            let named = |name: &str| named_container_port(pod, name);
            parse_port_list(list, &named)
        });
        Self {
            name: meta.name.clone().unwrap_or_default(),
            namespace: non_empty_or_default(meta.namespace.as_deref()),
            service_account: non_empty_or_default(
                spec.and_then(|s| s.service_account_name.as_deref()),
            ),
            node_name: spec.and_then(|s| s.node_name.clone()),
            control_plane_ns: label(LABEL_CONTROL_PLANE_NS),
            pod_template_hash: label(LABEL_POD_TEMPLATE_HASH),
            owner: owner_label(pod, owners),
            opaque_ports,
            skip_inbound_ports: annotation(ANNOTATION_SKIP_INBOUND_PORTS)
                .map(|list| PortSet::parse(list))
                .unwrap_or_default(),
            proxy_ports: ProxyPorts::from_pod(pod),
        }
    }
}

impl PodInfo {
    /// Whether `port` is opaque by the pod's annotation, or by the default
    /// opaque ports when the pod has no annotation.
    pub fn is_opaque(&self, port: u16, cfg: &TranslatorConfig) -> bool {
        self.opaque_ports
            .as_ref()
            .unwrap_or(&cfg.default_opaque_ports)
            .contains(port)
    }
}

fn non_empty_or_default(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "default".to_string(),
    }
}

/// The containerPort of a named port among init containers and containers
/// (a later container wins on duplicate names).
pub fn named_container_port(pod: &Pod, name: &str) -> Option<u16> {
    let spec = pod.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.name.as_deref() == Some(name))
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .next_back()
}

/// Facts about an address with no targetRef (a multicluster gateway).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GatewayInfo {
    /// `<remote-svc-fq-name>:<requested port>` when the slice is annotated.
    pub authority_override: Option<String>,
    /// Non-empty `mirror.linkerd.io/remote-gateway-identity`.
    pub identity: Option<String>,
}

/// What backs an endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Workload {
    /// A pod from the pod cache (shared by its IPv4 and IPv6 endpoints).
    Pod(Arc<PodInfo>),
    /// No targetRef.
    Gateway(GatewayInfo),
}

/// One ready address of the requested Service port, before filtering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Address identity (diff key).
    pub id: AddressId,
    /// IP and resolved target port.
    pub addr: SocketAddr,
    /// Slice `hostname` (instance filtering).
    pub hostname: Option<String>,
    /// Slice `zone` (pod endpoints only, as in the original).
    pub zone: Option<String>,
    /// Sorted `hints.forZones`; `None` when there are no zone hints.
    pub for_zones: Option<Vec<String>>,
    /// The port is made opaque by a `Server` (supplied by the policy side).
    pub opaque_by_server: bool,
    /// The backing workload.
    pub workload: Workload,
}

impl Endpoint {
    /// Address family of the address.
    pub fn family(&self) -> AddressFamily {
        AddressFamily::of(self.addr.ip())
    }

    /// The pod facts, for pod-backed endpoints.
    pub fn pod(&self) -> Option<&PodInfo> {
        match &self.workload {
            Workload::Pod(pod) => Some(pod),
            Workload::Gateway(_) => None,
        }
    }
}

/// Unfiltered or filtered endpoints of one Service port, by address ID.
pub type EndpointMap = BTreeMap<AddressId, Arc<Endpoint>>;

/// Looks up a pod by `(namespace, name)` in the pod cache.
pub type PodLookup<'a> = &'a dyn Fn(&str, &str) -> Option<Arc<Pod>>;

/// Whether a `Server` makes `port` of this pod opaque (from the policy controller).
pub type ServerOpaqueLookup<'a> = &'a dyn Fn(&Pod, u16) -> bool;

/// Lookups into the caller's caches used while translating slices.
pub struct Lookups<'a> {
    /// Pod by `(namespace, name)`.
    pub pod: PodLookup<'a>,
    /// Sole owner of a ReplicaSet/Job by `(kind, namespace, name)`.
    pub owner: OwnerLookup<'a>,
    /// Per-endpoint Server opacity override; `None` = no Server information.
    pub server_opaque: Option<ServerOpaqueLookup<'a>>,
}

/// Translates the ready addresses of one EndpointSlice of `service` for the
/// given target port. `requested_port` is the port the client asked for
/// (used for gateway authority overrides).
pub fn endpoints_from_slice(
    service: &ServiceId,
    slice: &EndpointSlice,
    target: &TargetPort,
    requested_port: u16,
    lookups: &Lookups<'_>,
) -> Vec<Endpoint> {
    let Some(port) = resolve_slice_port(slice.ports.as_deref(), target) else {
        return Vec::new();
    };
    let slice_ns = slice
        .metadata
        .namespace
        .as_deref()
        .unwrap_or(&service.namespace);
    let annotations = slice.metadata.annotations.as_ref();
    let mut out = Vec::new();
    for ep in slice.endpoints.iter().flatten() {
        if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
            continue;
        }
        let hostname = ep.hostname.clone().filter(|h| !h.is_empty());
        let for_zones = ep
            .hints
            .as_ref()
            .and_then(|h| h.for_zones.as_ref())
            .filter(|z| !z.is_empty())
            .map(|zones| {
                let mut names: Vec<String> = zones.iter().map(|z| z.name.clone()).collect();
                names.sort_unstable();
                names.dedup();
                names
            });
        let ips = ep
            .addresses
            .iter()
            .filter_map(|a| match a.parse::<IpAddr>() {
                Ok(ip) => Some(ip),
                Err(_) => {
                    tracing::debug!(address = %a, "skipping non-IP endpoint address");
                    None
                }
            });

        match &ep.target_ref {
            None => {
                let gateway = GatewayInfo {
                    authority_override: annotations
                        .and_then(|a| a.get(ANNOTATION_REMOTE_SVC_FQ_NAME))
                        .map(|fq| format!("{fq}:{requested_port}")),
                    identity: annotations
                        .and_then(|a| a.get(ANNOTATION_REMOTE_GATEWAY_IDENTITY))
                        .filter(|id| !id.is_empty())
                        .cloned(),
                };
                for ip in ips {
                    let mut name = format!("{}-{}-{}", service.name, ip, port);
                    if let Some(h) = &hostname {
                        name.push('-');
                        name.push_str(h);
                    }
                    out.push(Endpoint {
                        id: AddressId::Service {
                            namespace: slice_ns.to_string(),
                            name,
                        },
                        addr: SocketAddr::new(ip, port),
                        hostname: hostname.clone(),
                        zone: None,
                        for_zones: for_zones.clone(),
                        opaque_by_server: false,
                        workload: Workload::Gateway(gateway.clone()),
                    });
                }
            }
            Some(r) if r.kind.as_deref() == Some("Pod") => {
                let pod_ns = r
                    .namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(slice_ns);
                let pod_name = r.name.as_deref().unwrap_or_default();
                let Some(pod) = (lookups.pod)(pod_ns, pod_name) else {
                    tracing::debug!(
                        namespace = pod_ns,
                        pod = pod_name,
                        "skipping endpoint: pod not in cache"
                    );
                    continue;
                };
                let info = Arc::new(PodInfo::from_pod(&pod, lookups.owner));
                let opaque_by_server = lookups.server_opaque.is_some_and(|f| f(&pod, port));
                for ip in ips {
                    out.push(Endpoint {
                        id: AddressId::Pod {
                            namespace: pod_ns.to_string(),
                            name: pod_name.to_string(),
                            family: AddressFamily::of(ip),
                        },
                        addr: SocketAddr::new(ip, port),
                        hostname: hostname.clone(),
                        zone: ep.zone.clone(),
                        for_zones: for_zones.clone(),
                        opaque_by_server,
                        workload: Workload::Pod(Arc::clone(&info)),
                    });
                }
            }
            Some(r) => {
                tracing::debug!(kind = ?r.kind, name = ?r.name, "skipping endpoint with unsupported targetRef kind");
            }
        }
    }
    out
}

/// The unfiltered endpoint set of `service:requested_port` from all its slices.
/// `svc` is the Service object if it exists (it decides the target port).
pub fn translate_endpoints<'s>(
    service: &ServiceId,
    svc: Option<&Service>,
    requested_port: u16,
    slices: impl IntoIterator<Item = &'s EndpointSlice>,
    lookups: &Lookups<'_>,
) -> EndpointMap {
    let target = target_port(svc, requested_port);
    let mut set = EndpointMap::new();
    // Dual-stack pods appear in one slice per family: share their facts.
    let mut pods: HashMap<(String, String), Arc<PodInfo>> = HashMap::new();
    for slice in slices {
        for mut ep in endpoints_from_slice(service, slice, &target, requested_port, lookups) {
            if let Workload::Pod(info) = &mut ep.workload {
                let key = (info.namespace.clone(), info.name.clone());
                match pods.get(&key) {
                    Some(shared) if shared == info => *info = Arc::clone(shared),
                    _ => {
                        pods.insert(key, Arc::clone(info));
                    }
                }
            }
            set.insert(ep.id.clone(), Arc::new(ep));
        }
    }
    set
}

/// `WeightedAddrSet.metric_labels`: `service`, `namespace` and, for mirrored
/// slices, `target_cluster` / `target_service` / `target_service_namespace`.
pub fn set_labels<'s>(
    service: &ServiceId,
    slices: impl IntoIterator<Item = &'s EndpointSlice>,
) -> HashMap<String, String> {
    let mut labels = HashMap::from([
        ("service".to_string(), service.name.clone()),
        ("namespace".to_string(), service.namespace.clone()),
    ]);
    let mirrored = slices.into_iter().find_map(|s| {
        let cluster = s.metadata.labels.as_ref()?.get(LABEL_REMOTE_CLUSTER_NAME)?;
        let fq = s
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_REMOTE_SVC_FQ_NAME));
        Some((cluster, fq))
    });
    if let Some((cluster, fq)) = mirrored {
        labels.insert("target_cluster".into(), cluster.clone());
        if let Some(fq) = fq {
            let mut parts = fq.split('.');
            if let (Some(svc), Some(ns)) = (parts.next(), parts.next()) {
                labels.insert("target_service".into(), svc.to_string());
                labels.insert("target_service_namespace".into(), ns.to_string());
            }
        }
    }
    labels
}

/// Why an endpoint cannot be sent (it is dropped, with a log line).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TranslateError {
    /// A meshed pod's proxy ports could not be read.
    #[error("pod {namespace}/{pod}: {source}")]
    ProxyPort {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// What was wrong.
        #[source]
        source: ProxyPortError,
    },
}

/// Builds the `WeightedAddr` for an endpoint as seen by a client in
/// `client_zone` (the client node's zone, if known).
pub fn weighted_addr(
    ep: &Endpoint,
    cfg: &TranslatorConfig,
    client_zone: Option<&str>,
) -> Result<WeightedAddr, TranslateError> {
    let mut wa = WeightedAddr {
        addr: Some(TcpAddress::from(ep.addr)),
        weight: DEFAULT_WEIGHT,
        ..WeightedAddr::default()
    };
    match &ep.workload {
        Workload::Pod(pod) => fill_pod(&mut wa, ep, pod, cfg)?,
        Workload::Gateway(gw) => {
            wa.authority_override = gw.authority_override.as_ref().map(|a| AuthorityOverride {
                authority_override: a.clone(),
            });
            if let Some(id) = &gw.identity {
                wa.tls_identity = Some(TlsIdentity {
                    strategy: Some(tls_identity::Strategy::DnsLikeIdentity(
                        tls_identity::DnsLikeIdentity { name: id.clone() },
                    )),
                    server_name: None,
                });
                if cfg.enable_h2_upgrade {
                    wa.protocol_hint = Some(ProtocolHint {
                        protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
                        opaque_transport: None,
                    });
                }
                wa.http2 = cfg.meshed_http2_client_params;
            }
        }
    }

    let client_zone = client_zone.filter(|z| !z.is_empty());
    let locality = match (client_zone, ep.zone.as_deref()) {
        (Some(client), Some(zone)) if client == zone => {
            if cfg.ext_endpoint_zone_weights {
                wa.weight *= 10;
            }
            "local"
        }
        (Some(_), Some(_)) => "remote",
        _ => "unknown",
    };
    wa.metric_labels
        .insert("zone_locality".into(), locality.into());
    Ok(wa)
}

fn fill_pod(
    wa: &mut WeightedAddr,
    ep: &Endpoint,
    pod: &PodInfo,
    cfg: &TranslatorConfig,
) -> Result<(), TranslateError> {
    let port = ep.addr.port();
    let labels = &mut wa.metric_labels;
    labels.insert("pod".into(), pod.name.clone());
    labels.insert(pod.owner.key.clone(), pod.owner.name.clone());
    labels.insert("serviceaccount".into(), pod.service_account.clone());
    if let Some(cp) = &pod.control_plane_ns {
        labels.insert("control_plane_ns".into(), cp.clone());
    }
    if let Some(hash) = &pod.pod_template_hash {
        labels.insert("pod_template_hash".into(), hash.clone());
    }
    labels.insert("zone".into(), ep.zone.clone().unwrap_or_default());

    let proxy_err = |source: &ProxyPortError| TranslateError::ProxyPort {
        namespace: pod.namespace.clone(),
        pod: pod.name.clone(),
        source: source.clone(),
    };
    let skipped = pod.skip_inbound_ports.contains(port);
    if pod.control_plane_ns.is_some() && !skipped {
        wa.http2 = cfg.meshed_http2_client_params;
        let admin = pod.proxy_ports.admin.as_ref().map_err(proxy_err)?;
        let control = pod.proxy_ports.control.as_ref().map_err(proxy_err)?;
        let opaque = pod.is_opaque(port, cfg) || ep.opaque_by_server;
        let is_meta_port = port == *admin || port == *control;
        let mut hint = ProtocolHint::default();
        if !is_meta_port && (cfg.force_opaque_transport() || opaque) {
            let inbound = pod.proxy_ports.inbound.as_ref().map_err(proxy_err)?;
            hint.opaque_transport = Some(protocol_hint::OpaqueTransport {
                inbound_port: u32::from(*inbound),
            });
        }
        if opaque {
            hint.protocol = Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {}));
        } else if cfg.enable_h2_upgrade {
            hint.protocol = Some(protocol_hint::Protocol::H2(protocol_hint::H2 {}));
        }
        wa.protocol_hint = Some(hint);
    }

    if let Some(cp) = &pod.control_plane_ns
        && !cfg.identity_trust_domain.is_empty()
        && *cp == cfg.controller_namespace
        && !skipped
    {
        let id = tls_identity::DnsLikeIdentity {
            name: format!(
                "{}.{}.serviceaccount.identity.{}.{}",
                pod.service_account, pod.namespace, cp, cfg.identity_trust_domain
            ),
        };
        wa.tls_identity = Some(TlsIdentity {
            strategy: Some(tls_identity::Strategy::DnsLikeIdentity(id.clone())),
            server_name: Some(id),
        });
    }
    Ok(())
}

/// Builders of Kubernetes objects shared by the tests of this crate.
#[cfg(test)]
pub(crate) mod fixtures {
    use super::*;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use serde_json::{Value, json};

    pub(crate) fn from_json<T: serde::de::DeserializeOwned>(v: Value) -> T {
        serde_json::from_value(v).expect("valid Kubernetes object")
    }

    pub(crate) fn svc_id() -> ServiceId {
        ServiceId {
            namespace: "ns".into(),
            name: "web".into(),
        }
    }

    /// Service `ns/web` with the given `(port, name, targetPort)` entries.
    pub(crate) fn service(ports: &[(u16, &str, Value)]) -> Service {
        let ports: Vec<Value> = ports
            .iter()
            .map(|(port, name, target)| json!({"port": port, "name": name, "targetPort": target}))
            .collect();
        from_json(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"ports": ports},
        }))
    }

    /// A meshed pod on `node` with a `linkerd-proxy` container (inbound 4143,
    /// admin 4191, control 4190) and a `web` container port named `http` (8080).
    pub(crate) fn meshed_pod(name: &str, node: &str) -> Pod {
        from_json(json!({
            "metadata": {
                "name": name, "namespace": "ns", "resourceVersion": "1",
                "labels": {"linkerd.io/control-plane-ns": "linkerd", "pod-template-hash": "abc"},
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-abc", "uid": "u1"}],
            },
            "spec": {
                "nodeName": node,
                "serviceAccountName": "web-sa",
                "containers": [
                    {"name": "web", "ports": [{"name": "http", "containerPort": 8080}]},
                    {"name": "linkerd-proxy", "env": [
                        {"name": "LINKERD2_PROXY_INBOUND_LISTEN_ADDR", "value": "0.0.0.0:4143"},
                        {"name": "LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "value": "0.0.0.0:4191"},
                        {"name": "LINKERD2_PROXY_CONTROL_LISTEN_ADDR", "value": "0.0.0.0:4190"},
                    ]},
                ],
            },
        }))
    }

    /// A pod without a proxy and without owners.
    pub(crate) fn plain_pod(name: &str, node: &str) -> Pod {
        from_json(json!({
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"nodeName": node, "containers": [{"name": "app"}]},
        }))
    }

    pub(crate) fn set_annotation(pod: &mut Pod, key: &str, value: &str) {
        pod.metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    pub(crate) fn set_label(pod: &mut Pod, key: &str, value: &str) {
        pod.metadata
            .labels
            .get_or_insert_with(Default::default)
            .insert(key.into(), value.into());
    }

    /// A slice of `ns/web` with the given address type, ports and endpoints.
    pub(crate) fn slice(address_type: &str, ports: Value, endpoints: Value) -> EndpointSlice {
        from_json(json!({
            "metadata": {"name": "web-xyz", "namespace": "ns", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": address_type,
            "ports": ports,
            "endpoints": endpoints,
        }))
    }

    /// A pod endpoint JSON value.
    pub(crate) fn pod_ep(ip: &str, pod: &str, zone: &str) -> Value {
        json!({
            "addresses": [ip],
            "conditions": {"ready": true},
            "zone": zone,
            "targetRef": {"kind": "Pod", "name": pod, "namespace": "ns"},
        })
    }

    /// Lookup answering from a fixed list of pods, with owner chains
    /// `ReplicaSet web-abc → Deployment web` and `Job batch-1 → CronJob batch`.
    pub(crate) struct Cache {
        pub(crate) pods: Vec<Arc<Pod>>,
        pub(crate) opaque_by_server: Option<u16>,
    }

    impl Cache {
        pub(crate) fn new(pods: impl IntoIterator<Item = Pod>) -> Self {
            Self {
                pods: pods.into_iter().map(Arc::new).collect(),
                opaque_by_server: None,
            }
        }

        pub(crate) fn pod(&self, ns: &str, name: &str) -> Option<Arc<Pod>> {
            self.pods
                .iter()
                .find(|p| {
                    p.metadata.namespace.as_deref() == Some(ns)
                        && p.metadata.name.as_deref() == Some(name)
                })
                .cloned()
        }

        pub(crate) fn owner(kind: ParentKind, _ns: &str, name: &str) -> Option<OwnerRef> {
            let owner = |kind: &str, name: &str| {
                Some(OwnerRef {
                    kind: kind.into(),
                    name: name.into(),
                })
            };
            match (kind, name) {
                (ParentKind::ReplicaSet, "web-abc") => owner("Deployment", "web"),
                (ParentKind::ReplicaSet, "odd-rs") => owner("Widget", "w"),
                (ParentKind::ReplicaSet, "job-rs") => owner("Job", "j"),
                (ParentKind::Job, "batch-1") => owner("CronJob", "batch"),
                _ => None,
            }
        }

        /// Translates `slices` for `ns/web` (Service `svc`) and port `port`.
        pub(crate) fn translate(
            &self,
            svc: Option<&Service>,
            port: u16,
            slices: &[EndpointSlice],
        ) -> EndpointMap {
            let pod = |ns: &str, name: &str| self.pod(ns, name);
            let server = |_: &Pod, p: u16| Some(p) == self.opaque_by_server;
            let lookups = Lookups {
                pod: &pod,
                owner: &Self::owner,
                server_opaque: Some(&server),
            };
            translate_endpoints(&svc_id(), svc, port, slices, &lookups)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use serde_json::json;

    fn only(set: &EndpointMap) -> &Arc<Endpoint> {
        assert_eq!(set.len(), 1, "{set:#?}");
        set.values().next().expect("one endpoint")
    }

    fn addr(ip: &str, port: u16) -> SocketAddr {
        SocketAddr::new(ip.parse().expect("ip"), port)
    }

    fn hint(wa: &WeightedAddr) -> ProtocolHint {
        wa.protocol_hint.expect("protocol hint")
    }

    fn cfg() -> TranslatorConfig {
        TranslatorConfig::default()
    }

    fn translate_one(pod: Pod, port: u16) -> Arc<Endpoint> {
        let cache = Cache::new([pod]);
        let set = cache.translate(
            None,
            port,
            &[slice(
                "IPv4",
                json!([{"port": port}]),
                json!([pod_ep("10.0.0.1", "p1", "z1")]),
            )],
        );
        Arc::clone(only(&set))
    }

    #[test]
    fn named_target_port_resolves_through_service_port_name() {
        let svc = service(&[(80, "http", json!("web")), (9000, "metrics", json!(9090))]);
        let cache = Cache::new([meshed_pod("p1", "n1"), meshed_pod("p2", "n1")]);
        let slices = [
            slice(
                "IPv4",
                json!([{"name": "http", "port": 8080}, {"name": "metrics", "port": 9090}]),
                json!([pod_ep("10.0.0.1", "p1", "z1")]),
            ),
            // A slice without the named port contributes nothing.
            slice(
                "IPv4",
                json!([{"name": "other", "port": 7000}]),
                json!([pod_ep("10.0.0.2", "p2", "z1")]),
            ),
        ];
        let set = cache.translate(Some(&svc), 80, &slices);
        assert_eq!(only(&set).addr, addr("10.0.0.1", 8080));
        let set = cache.translate(Some(&svc), 9000, &slices);
        assert_eq!(only(&set).addr, addr("10.0.0.1", 9090));
    }

    #[test]
    fn unnamed_service_port_matches_unnamed_slice_port() {
        let svc: Service = from_json(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}]},
        }));
        assert_eq!(target_port(Some(&svc), 80), TargetPort::Name(String::new()));
        let cache = Cache::new([meshed_pod("p1", "n1")]);
        let set = cache.translate(
            Some(&svc),
            80,
            &[slice(
                "IPv4",
                json!([{"port": 8080}]),
                json!([pod_ep("10.0.0.1", "p1", "z1")]),
            )],
        );
        assert_eq!(only(&set).addr, addr("10.0.0.1", 8080));
    }

    #[test]
    fn undeclared_port_or_missing_service_uses_requested_number() {
        let svc = service(&[(80, "http", json!(8080))]);
        assert_eq!(target_port(Some(&svc), 5555), TargetPort::Number(5555));
        assert_eq!(target_port(None, 80), TargetPort::Number(80));
        let cache = Cache::new([meshed_pod("p1", "n1")]);
        let eps = json!([pod_ep("10.0.0.1", "p1", "z1")]);
        let set = cache.translate(
            Some(&svc),
            5555,
            &[slice(
                "IPv4",
                json!([{"name": "http", "port": 8080}]),
                eps.clone(),
            )],
        );
        assert_eq!(only(&set).addr, addr("10.0.0.1", 5555));
        let set = cache.translate(None, 80, &[slice("IPv4", json!([]), eps.clone())]);
        assert_eq!(only(&set).addr, addr("10.0.0.1", 80));
        // A slice without a ports list contributes nothing.
        let set = cache.translate(None, 80, &[slice("IPv4", json!(null), eps)]);
        assert!(set.is_empty());
    }

    #[test]
    fn readiness_and_missing_pods() {
        let cache = Cache::new([
            meshed_pod("p1", "n1"),
            meshed_pod("p2", "n1"),
            meshed_pod("p3", "n1"),
        ]);
        let eps = json!([
            {"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "p1", "namespace": "ns"}},
            {"addresses": ["10.0.0.2"], "conditions": {"ready": false, "serving": true},
             "targetRef": {"kind": "Pod", "name": "p2", "namespace": "ns"}},
            {"addresses": ["10.0.0.3"], "conditions": {"ready": true, "terminating": true},
             "targetRef": {"kind": "Pod", "name": "p3", "namespace": "ns"}},
            {"addresses": ["10.0.0.4"], "targetRef": {"kind": "Pod", "name": "gone", "namespace": "ns"}},
            {"addresses": ["10.0.0.5"], "targetRef": {"kind": "ExternalWorkload", "name": "ew", "namespace": "ns"}},
        ]);
        let set = cache.translate(None, 80, &[slice("IPv4", json!([{"port": 80}]), eps)]);
        let names: Vec<_> = set
            .values()
            .filter_map(|e| e.pod())
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["p1", "p3"]);
        assert!(set.contains_key(&AddressId::Pod {
            namespace: "ns".into(),
            name: "p1".into(),
            family: AddressFamily::V4
        }));
    }

    #[test]
    fn headless_hostnames_and_targetless_ids() {
        let cache = Cache::new([meshed_pod("db-0", "n1")]);
        let eps = json!([
            {"addresses": ["10.0.0.1"], "hostname": "db-0", "targetRef": {"kind": "Pod", "name": "db-0", "namespace": "ns"}},
            {"addresses": ["10.0.0.9"], "hostname": "gw"},
            {"addresses": ["10.0.0.8"]},
        ]);
        let set = cache.translate(None, 5432, &[slice("IPv4", json!([{"port": 5432}]), eps)]);
        assert_eq!(set.len(), 3);
        let pod = set
            .get(&AddressId::Pod {
                namespace: "ns".into(),
                name: "db-0".into(),
                family: AddressFamily::V4,
            })
            .expect("pod endpoint");
        assert_eq!(pod.hostname.as_deref(), Some("db-0"));
        for (name, host) in [
            ("web-10.0.0.9-5432-gw", Some("gw")),
            ("web-10.0.0.8-5432", None),
        ] {
            let ep = set
                .get(&AddressId::Service {
                    namespace: "ns".into(),
                    name: name.into(),
                })
                .expect(name);
            assert_eq!(ep.hostname.as_deref(), host);
            assert!(matches!(ep.workload, Workload::Gateway(_)));
        }
    }

    #[test]
    fn owner_label_rules() {
        let with_owners = |owners: serde_json::Value| -> Pod {
            from_json(
                json!({"metadata": {"name": "p", "namespace": "ns", "ownerReferences": owners}}),
            )
        };
        let rf = |kind: &str, name: &str| json!({"apiVersion": "v1", "kind": kind, "name": name, "uid": "u"});
        let label = |pod: &Pod| {
            let l = owner_label(pod, &Cache::owner);
            (l.key, l.name)
        };
        let pair = |k: &str, n: &str| (k.to_string(), n.to_string());
        assert_eq!(label(&plain_pod("p", "n")), pair("pod", "p"));
        assert_eq!(
            label(&with_owners(json!([
                rf("ReplicaSet", "a"),
                rf("ReplicaSet", "b")
            ]))),
            pair("pod", "p")
        );
        assert_eq!(
            label(&with_owners(json!([rf("ReplicaSet", "web-abc")]))),
            pair("deployment", "web")
        );
        assert_eq!(
            label(&with_owners(json!([rf("ReplicaSet", "odd-rs")]))),
            pair("replicaset", "odd-rs")
        );
        assert_eq!(
            label(&with_owners(json!([rf("ReplicaSet", "unknown")]))),
            pair("replicaset", "unknown")
        );
        assert_eq!(
            label(&with_owners(json!([rf("ReplicaSet", "job-rs")]))),
            pair("k8s_job", "j")
        );
        assert_eq!(
            label(&with_owners(json!([rf("Job", "batch-1")]))),
            pair("cronjob", "batch")
        );
        assert_eq!(
            label(&with_owners(json!([rf("Job", "lonely")]))),
            pair("k8s_job", "lonely")
        );
        assert_eq!(
            label(&with_owners(json!([rf("StatefulSet", "db")]))),
            pair("statefulset", "db")
        );
        assert_eq!(
            label(&with_owners(json!([rf("DaemonSet", "ds")]))),
            pair("daemonset", "ds")
        );
        assert_eq!(
            label(&with_owners(json!([rf("ReplicationController", "rc")]))),
            pair("replicationcontroller", "rc")
        );

        let meta: ObjectMeta = from_json(json!({"ownerReferences": [rf("Deployment", "web")]}));
        assert_eq!(
            sole_owner(&meta),
            Some(OwnerRef {
                kind: "Deployment".into(),
                name: "web".into()
            })
        );
        assert_eq!(sole_owner(&ObjectMeta::default()), None);
    }

    #[test]
    fn meshed_pod_weighted_addr() {
        let ep = translate_one(meshed_pod("p1", "n1"), 8080);
        let mut cfg = cfg();
        cfg.meshed_http2_client_params = crate::config::parse_http2_client_params(
            r#"{"keep_alive":{"interval":{"seconds":10},"timeout":{"seconds":3},"while_idle":true}}"#,
        )
        .expect("params");
        let wa = weighted_addr(&ep, &cfg, Some("z1")).expect("translated");
        assert_eq!(wa.addr, Some(TcpAddress::from(addr("10.0.0.1", 8080))));
        assert_eq!(wa.weight, 10_000);
        let labels: BTreeMap<_, _> = wa
            .metric_labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            BTreeMap::from([
                ("pod", "p1"),
                ("deployment", "web"),
                ("serviceaccount", "web-sa"),
                ("control_plane_ns", "linkerd"),
                ("pod_template_hash", "abc"),
                ("zone", "z1"),
                ("zone_locality", "local"),
            ])
        );
        assert_eq!(
            hint(&wa),
            ProtocolHint {
                protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
                opaque_transport: None
            }
        );
        let id = tls_identity::DnsLikeIdentity {
            name: "web-sa.ns.serviceaccount.identity.linkerd.cluster.local".into(),
        };
        assert_eq!(
            wa.tls_identity,
            Some(TlsIdentity {
                strategy: Some(tls_identity::Strategy::DnsLikeIdentity(id.clone())),
                server_name: Some(id)
            })
        );
        assert_eq!(wa.http2, cfg.meshed_http2_client_params);
        assert!(wa.http2.is_some());
        assert_eq!(wa.authority_override, None);
        assert_eq!(wa.resource_ref, None);

        // Without H2 upgrade the hint is still present, but empty.
        cfg.enable_h2_upgrade = false;
        let wa = weighted_addr(&ep, &cfg, Some("z1")).expect("translated");
        assert_eq!(hint(&wa), ProtocolHint::default());
    }

    #[test]
    fn unmeshed_pod_gets_only_addr_weight_labels() {
        let ep = translate_one(plain_pod("p1", "n1"), 80);
        let wa = weighted_addr(&ep, &cfg(), None).expect("translated");
        assert_eq!(wa.protocol_hint, None);
        assert_eq!(wa.tls_identity, None);
        assert_eq!(wa.http2, None);
        assert_eq!(
            wa.metric_labels.get("serviceaccount").map(String::as_str),
            Some("default")
        );
        assert_eq!(wa.metric_labels.get("pod").map(String::as_str), Some("p1"));
        assert_eq!(
            wa.metric_labels.get("zone_locality").map(String::as_str),
            Some("unknown")
        );
        assert!(!wa.metric_labels.contains_key("control_plane_ns"));
    }

    #[test]
    fn opaque_ports_from_annotation_default_and_server() {
        let opaque_hint = ProtocolHint {
            protocol: Some(protocol_hint::Protocol::Opaque(protocol_hint::Opaque {})),
            opaque_transport: Some(protocol_hint::OpaqueTransport { inbound_port: 4143 }),
        };
        let mut cfg = cfg();
        cfg.default_opaque_ports = crate::config::PortSet::parse("3306");

        // Default set applies without annotation.
        let ep = translate_one(meshed_pod("p1", "n1"), 3306);
        assert_eq!(
            hint(&weighted_addr(&ep, &cfg, None).expect("ok")),
            opaque_hint
        );

        // The annotation replaces the default, named ports resolve.
        let mut pod = meshed_pod("p1", "n1");
        set_annotation(&mut pod, ANNOTATION_OPAQUE_PORTS, "http, 9000-9001");
        for (port, opaque) in [(8080, true), (9001, true), (3306, false)] {
            let ep = translate_one(pod.clone(), port);
            let h = hint(&weighted_addr(&ep, &cfg, None).expect("ok"));
            assert_eq!(h == opaque_hint, opaque, "port {port}: {h:?}");
        }

        // An empty annotation means no opaque ports at all.
        let mut pod = meshed_pod("p1", "n1");
        set_annotation(&mut pod, ANNOTATION_OPAQUE_PORTS, "");
        let ep = translate_one(pod, 3306);
        assert_ne!(
            hint(&weighted_addr(&ep, &cfg, None).expect("ok")),
            opaque_hint
        );

        // A Server can make the port opaque.
        let mut cache = Cache::new([meshed_pod("p1", "n1")]);
        cache.opaque_by_server = Some(7000);
        let set = cache.translate(
            None,
            7000,
            &[slice(
                "IPv4",
                json!([{"port": 7000}]),
                json!([pod_ep("10.0.0.1", "p1", "z1")]),
            )],
        );
        let ep = only(&set);
        assert!(ep.opaque_by_server);
        assert_eq!(
            hint(&weighted_addr(ep, &cfg, None).expect("ok")),
            opaque_hint
        );
    }

    #[test]
    fn transport_header_mode_and_meta_ports() {
        let mut cfg = cfg();
        cfg.outbound_transport_mode = crate::config::OutboundTransportMode::TransportHeader;
        let ep = translate_one(meshed_pod("p1", "n1"), 8080);
        let h = hint(&weighted_addr(&ep, &cfg, None).expect("ok"));
        assert_eq!(
            h.opaque_transport,
            Some(protocol_hint::OpaqueTransport { inbound_port: 4143 })
        );
        assert_eq!(
            h.protocol,
            Some(protocol_hint::Protocol::H2(protocol_hint::H2 {}))
        );

        // The admin and control ports never get opaque transport.
        for port in [4191, 4190] {
            let ep = translate_one(meshed_pod("p1", "n1"), port);
            let h = hint(&weighted_addr(&ep, &cfg, None).expect("ok"));
            assert_eq!(h.opaque_transport, None, "port {port}");
        }
    }

    #[test]
    fn skip_inbound_ports_disable_mesh_features() {
        let mut pod = meshed_pod("p1", "n1");
        set_annotation(&mut pod, ANNOTATION_SKIP_INBOUND_PORTS, "8080,9000-9100");
        let ep = translate_one(pod.clone(), 8080);
        let wa = weighted_addr(&ep, &cfg(), None).expect("ok");
        assert_eq!(wa.protocol_hint, None);
        assert_eq!(wa.tls_identity, None);
        assert_eq!(wa.http2, None);
        assert_eq!(
            wa.metric_labels.get("control_plane_ns").map(String::as_str),
            Some("linkerd")
        );
        let ep = translate_one(pod, 8081);
        let wa = weighted_addr(&ep, &cfg(), None).expect("ok");
        assert!(wa.protocol_hint.is_some() && wa.tls_identity.is_some());
    }

    #[test]
    fn identity_needs_same_control_plane_and_trust_domain() {
        let mut pod = meshed_pod("p1", "n1");
        set_label(&mut pod, LABEL_CONTROL_PLANE_NS, "other-linkerd");
        let ep = translate_one(pod, 8080);
        let wa = weighted_addr(&ep, &cfg(), None).expect("ok");
        assert!(
            wa.protocol_hint.is_some(),
            "meshed by another control plane"
        );
        assert_eq!(wa.tls_identity, None);

        let ep = translate_one(meshed_pod("p1", "n1"), 8080);
        let mut cfg = cfg();
        cfg.identity_trust_domain.clear();
        assert_eq!(
            weighted_addr(&ep, &cfg, None).expect("ok").tls_identity,
            None
        );
        cfg.identity_trust_domain = "example.org".into();
        let wa = weighted_addr(&ep, &cfg, None).expect("ok");
        let name = wa
            .tls_identity
            .and_then(|t| t.server_name)
            .map(|s| s.name)
            .expect("server name");
        assert_eq!(
            name,
            "web-sa.ns.serviceaccount.identity.linkerd.example.org"
        );
    }

    #[test]
    fn proxy_env_problems_drop_meshed_addresses() {
        let strip_env = |name: &str| {
            let mut pod = meshed_pod("p1", "n1");
            let spec = pod.spec.as_mut().expect("spec");
            for c in &mut spec.containers {
                if let Some(env) = c.env.as_mut() {
                    env.retain(|e| e.name != name);
                }
            }
            pod
        };
        let mut cfg = cfg();
        cfg.default_opaque_ports = crate::config::PortSet::parse("3306");

        // Admin port missing → dropped even for a non-opaque port.
        let ep = translate_one(strip_env(ENV_ADMIN_LISTEN_ADDR), 8080);
        let err = weighted_addr(&ep, &cfg, None).expect_err("dropped");
        assert!(err.to_string().contains(ENV_ADMIN_LISTEN_ADDR), "{err}");

        // Inbound port is only needed for opaque transport.
        let ep = translate_one(strip_env(ENV_INBOUND_LISTEN_ADDR), 8080);
        assert!(weighted_addr(&ep, &cfg, None).is_ok());
        let ep = translate_one(strip_env(ENV_INBOUND_LISTEN_ADDR), 3306);
        assert!(weighted_addr(&ep, &cfg, None).is_err());

        // Unparsable value.
        let mut pod = meshed_pod("p1", "n1");
        let spec = pod.spec.as_mut().expect("spec");
        for c in &mut spec.containers {
            for e in c.env.iter_mut().flatten() {
                if e.name == ENV_CONTROL_LISTEN_ADDR {
                    e.value = Some("localhost:4190".into());
                }
            }
        }
        let ep = translate_one(pod, 8080);
        assert!(matches!(
            weighted_addr(&ep, &cfg, None),
            Err(TranslateError::ProxyPort {
                source: ProxyPortError::Unparsable { .. },
                ..
            })
        ));

        // Unmeshed pods never need proxy ports.
        let ep = translate_one(plain_pod("p1", "n1"), 3306);
        assert!(weighted_addr(&ep, &cfg, None).is_ok());
    }

    #[test]
    fn native_sidecar_proxy_in_init_containers() {
        let mut pod = meshed_pod("p1", "n1");
        let spec = pod.spec.as_mut().expect("spec");
        let proxy_idx = spec
            .containers
            .iter()
            .position(|c| c.name == PROXY_CONTAINER_NAME)
            .expect("proxy");
        let mut proxy = spec.containers.remove(proxy_idx);
        for e in proxy.env.iter_mut().flatten() {
            if e.name == ENV_INBOUND_LISTEN_ADDR {
                e.value = Some("[::]:5143".into());
            }
        }
        spec.init_containers = Some(vec![proxy]);
        let ports = ProxyPorts::from_pod(&pod);
        assert_eq!(ports.inbound, Ok(5143));
        assert_eq!(ports.admin, Ok(4191));
        assert_eq!(
            ProxyPorts::from_pod(&plain_pod("p", "n")).admin,
            Err(ProxyPortError::NoProxyContainer)
        );
    }

    #[test]
    fn zone_locality_and_zone_weights() {
        let ep = translate_one(meshed_pod("p1", "n1"), 8080);
        let mut cfg = cfg();
        let loc = |wa: &WeightedAddr| {
            wa.metric_labels
                .get("zone_locality")
                .cloned()
                .unwrap_or_default()
        };
        let wa = weighted_addr(&ep, &cfg, Some("z1")).expect("ok");
        assert_eq!((loc(&wa).as_str(), wa.weight), ("local", 10_000));
        let wa = weighted_addr(&ep, &cfg, Some("z2")).expect("ok");
        assert_eq!((loc(&wa).as_str(), wa.weight), ("remote", 10_000));
        for zone in [None, Some("")] {
            let wa = weighted_addr(&ep, &cfg, zone).expect("ok");
            assert_eq!(loc(&wa), "unknown");
        }
        cfg.ext_endpoint_zone_weights = true;
        assert_eq!(
            weighted_addr(&ep, &cfg, Some("z1")).expect("ok").weight,
            100_000
        );
        assert_eq!(
            weighted_addr(&ep, &cfg, Some("z2")).expect("ok").weight,
            10_000
        );

        // An endpoint without a zone is "unknown" with an empty zone label.
        let cache = Cache::new([meshed_pod("p1", "n1")]);
        let set = cache.translate(
            None,
            80,
            &[slice(
                "IPv4",
                json!([{"port": 80}]),
                json!([{"addresses": ["10.0.0.1"], "targetRef": {"kind": "Pod", "name": "p1", "namespace": "ns"}}]),
            )],
        );
        let wa = weighted_addr(only(&set), &cfg, Some("z1")).expect("ok");
        assert_eq!(loc(&wa), "unknown");
        assert_eq!(wa.metric_labels.get("zone").map(String::as_str), Some(""));
    }

    #[test]
    fn gateway_endpoints() {
        let mut s = slice(
            "IPv4",
            json!([{"port": 4143}]),
            json!([{"addresses": ["172.16.0.1"], "zone": "z1"}]),
        );
        let labels = s.metadata.labels.get_or_insert_with(Default::default);
        labels.insert(LABEL_REMOTE_CLUSTER_NAME.into(), "east".into());
        s.metadata.annotations = Some(BTreeMap::from([
            (
                ANNOTATION_REMOTE_SVC_FQ_NAME.to_string(),
                "web.prod.svc.cluster.local".to_string(),
            ),
            (
                ANNOTATION_REMOTE_GATEWAY_IDENTITY.to_string(),
                "gw.linkerd-multicluster.serviceaccount.identity.linkerd.cluster.local".to_string(),
            ),
        ]));
        let cache = Cache::new([]);
        let set = cache.translate(None, 80, std::slice::from_ref(&s));
        let wa = weighted_addr(only(&set), &cfg(), Some("z1")).expect("ok");
        // No Service: the requested port is the target port.
        assert_eq!(wa.addr, Some(TcpAddress::from(addr("172.16.0.1", 80))));
        assert_eq!(
            wa.authority_override,
            Some(AuthorityOverride {
                authority_override: "web.prod.svc.cluster.local:80".into()
            })
        );
        let tls = wa.tls_identity.clone().expect("identity");
        assert!(tls.server_name.is_none());
        assert!(matches!(
            tls.strategy,
            Some(tls_identity::Strategy::DnsLikeIdentity(_))
        ));
        assert_eq!(
            hint(&wa),
            ProtocolHint {
                protocol: Some(protocol_hint::Protocol::H2(protocol_hint::H2 {})),
                opaque_transport: None
            }
        );
        // Only zone_locality, and "unknown" because targetless endpoints carry no zone.
        assert_eq!(
            wa.metric_labels,
            HashMap::from([("zone_locality".to_string(), "unknown".to_string())])
        );

        let set_labels = set_labels(&svc_id(), [&s]);
        assert_eq!(set_labels.get("service").map(String::as_str), Some("web"));
        assert_eq!(set_labels.get("namespace").map(String::as_str), Some("ns"));
        assert_eq!(
            set_labels.get("target_cluster").map(String::as_str),
            Some("east")
        );
        assert_eq!(
            set_labels.get("target_service").map(String::as_str),
            Some("web")
        );
        assert_eq!(
            set_labels
                .get("target_service_namespace")
                .map(String::as_str),
            Some("prod")
        );

        // Without an identity: plain address.
        s.metadata.annotations = None;
        let set = cache.translate(None, 80, &[s]);
        let wa = weighted_addr(only(&set), &cfg(), None).expect("ok");
        assert_eq!(
            (
                wa.tls_identity,
                wa.protocol_hint,
                wa.authority_override,
                wa.http2
            ),
            (None, None, None, None)
        );
    }

    #[test]
    fn plain_set_labels() {
        let s = slice("IPv4", json!([]), json!([]));
        assert_eq!(
            set_labels(&svc_id(), [&s]),
            HashMap::from([
                ("service".to_string(), "web".to_string()),
                ("namespace".to_string(), "ns".to_string())
            ])
        );
    }

    #[test]
    fn dual_stack_ids_and_hints() {
        let cache = Cache::new([meshed_pod("p1", "n1")]);
        let v4 = slice(
            "IPv4",
            json!([{"port": 80}]),
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        );
        let mut v6 = slice(
            "IPv6",
            json!([{"port": 80}]),
            json!([pod_ep("fd00::1", "p1", "z1")]),
        );
        v6.metadata.name = Some("web-v6".into());
        if let Some(ep) = v6.endpoints.iter_mut().flatten().next() {
            ep.hints = Some(from_json(
                json!({"forZones": [{"name": "z2"}, {"name": "z1"}, {"name": "z1"}]}),
            ));
        }
        let set = cache.translate(None, 80, &[v4, v6]);
        let families: Vec<_> = set.values().map(|e| e.family()).collect();
        assert_eq!(families, [AddressFamily::V4, AddressFamily::V6]);
        let v6 = set.values().nth(1).expect("v6");
        assert_eq!(v6.for_zones, Some(vec!["z1".to_string(), "z2".to_string()]));
        assert_eq!(v6.addr, addr("fd00::1", 80));
        // Both entries share the pod facts.
        match (&set.values().next().expect("v4").workload, &v6.workload) {
            (Workload::Pod(a), Workload::Pod(b)) => assert!(Arc::ptr_eq(a, b)),
            other => panic!("unexpected workloads {other:?}"),
        }
    }

    #[test]
    fn pod_edits_change_the_endpoint() {
        let base = translate_one(meshed_pod("p1", "n1"), 8080);
        assert_eq!(base, translate_one(meshed_pod("p1", "n1"), 8080));
        let mut pod = meshed_pod("p1", "n1");
        set_label(&mut pod, "pod-template-hash", "def");
        assert_ne!(base, translate_one(pod, 8080));
        let mut pod = meshed_pod("p1", "n1");
        set_annotation(&mut pod, ANNOTATION_OPAQUE_PORTS, "8080");
        assert_ne!(base, translate_one(pod, 8080));
    }

    #[test]
    fn helpers() {
        let node: ObjectMeta = from_json(json!({"labels": {"topology.kubernetes.io/zone": "z9"}}));
        assert_eq!(node_topology_zone(&node), Some("z9"));
        assert_eq!(node_topology_zone(&ObjectMeta::default()), None);
        let mut svc = service(&[]);
        assert!(!internal_traffic_policy_local(&svc));
        if let Some(spec) = svc.spec.as_mut() {
            spec.internal_traffic_policy = Some("Local".into());
        }
        assert!(internal_traffic_policy_local(&svc));
        assert_eq!(
            named_container_port(&meshed_pod("p", "n"), "http"),
            Some(8080)
        );
        assert_eq!(named_container_port(&meshed_pod("p", "n"), "nope"), None);
    }
}
