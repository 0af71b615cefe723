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
pub const LABEL_CONTROL_PLANE_NS: &str = "linkerd.io/control-plane-ns";
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
    for slice in slices {
        for ep in endpoints_from_slice(service, slice, &target, requested_port, lookups) {
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
        let opaque = pod
            .opaque_ports
            .as_ref()
            .unwrap_or(&cfg.default_opaque_ports)
            .contains(port)
            || ep.opaque_by_server;
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
