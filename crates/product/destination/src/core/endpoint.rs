//! Endpoint values: what one ready address of a Service port is, before and
//! after filtering. Types only; [`crate::k8s`] builds them from Kubernetes
//! objects and [`crate::proto`] turns them into `WeightedAddr`s.
//!
//! Endpoints are small immutable values compared with `PartialEq`: any change
//! to something that feeds a response (pod labels, annotations, proxy ports,
//! hints, Server opacity) makes the endpoint unequal, so diffs re-`Add` it.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

pub use super::pod::{OwnerRef, PodFacts, ProxyPortError, ProxyPorts};
use crate::config::TranslatorConfig;
use k8s_api::ports::PortRanges;

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
    /// An ExternalWorkload-backed address: one per workload and family
    /// (the original keys them by workload only, so a dual-stack workload
    /// kept one address at random; Meridian keeps both and lets the family
    /// selection choose, as for pods).
    ExternalWorkload {
        /// Namespace of the slice (and so of the workload).
        namespace: String,
        /// Workload name.
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

/// Which kind of workload an address belongs to, with its namespace and name.
pub type WorkloadKey<'a> = (bool, &'a str, &'a str);

impl AddressId {
    /// The workload of a pod or ExternalWorkload address (`(is external,
    /// namespace, name)`, borrowed) and the address's family: what the
    /// family selection pairs a workload's IPv4 and IPv6 addresses by.
    pub fn workload_family(&self) -> Option<(WorkloadKey<'_>, AddressFamily)> {
        match self {
            Self::Pod {
                namespace,
                name,
                family,
            } => Some(((false, namespace, name), *family)),
            Self::ExternalWorkload {
                namespace,
                name,
                family,
            } => Some(((true, namespace, name), *family)),
            Self::Service { .. } => None,
        }
    }
}

/// The target port of a requested Service port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum TargetPort {
    /// The Service declares the port: match slice ports by this ServicePort name (maybe `""`).
    Name(String),
    /// The Service lacks the port (or does not exist): use the number as-is.
    Number(u16),
}

/// Kinds of pod owner whose own owner decides the metrics label.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ParentKind {
    /// `apps/v1 ReplicaSet`.
    ReplicaSet,
    /// `batch/v1 Job`.
    Job,
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
    pub fn new(kind: &str, name: &str) -> Self {
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

/// Everything about a pod that feeds its `WeightedAddr` or filtering: its
/// stored facts (shared with the index, read through `Deref`) and its owner
/// metrics label, resolved through the ReplicaSet or Job that owns it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodInfo {
    /// The pod's facts, as the index stores them.
    pub facts: Arc<PodFacts>,
    /// The owner metrics label.
    pub owner: OwnerLabel,
}

impl std::ops::Deref for PodInfo {
    type Target = PodFacts;

    fn deref(&self) -> &PodFacts {
        &self.facts
    }
}

impl PodInfo {
    /// Whether `port` is opaque by the pod's annotation, or by the default
    /// opaque ports when the pod has no annotation.
    pub fn is_opaque(&self, port: u16, cfg: &TranslatorConfig) -> bool {
        self.spec
            .opaque_ports
            .as_ref()
            .unwrap_or(&cfg.default_opaque_ports)
            .contains(port)
    }
}

/// The default inbound port of an ExternalWorkload's proxy, when it names
/// no `linkerd-proxy` port.
pub const DEFAULT_EXTERNAL_PROXY_INBOUND_PORT: u16 = 4143;

/// Everything about an ExternalWorkload that feeds its `WeightedAddr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExternalWorkloadInfo {
    /// Workload name (the `external_workload` label).
    pub name: String,
    /// Workload namespace.
    pub namespace: String,
    /// The sole owner, as written in the reference (`None` with zero or
    /// several owners: then no owner label at all, unlike pods).
    pub owner: Option<OwnerRef>,
    /// `meshTLS.identity`, sent as a URI-like (SPIFFE) identity.
    pub identity: String,
    /// `meshTLS.serverName`, the name the workload terminates TLS as.
    pub server_name: String,
    /// The port its proxy accepts opaque transport on: the `linkerd-proxy`
    /// entry of `spec.ports`, else 4143.
    pub proxy_inbound_port: u16,
    /// `config.linkerd.io/opaque-ports` if annotated (names resolved
    /// against `spec.ports`); `None` means the default opaque ports apply.
    pub opaque_ports: Option<PortRanges>,
}

impl ExternalWorkloadInfo {
    /// Whether `port` is opaque by the workload's annotation, or by the
    /// default opaque ports when it has none.
    pub fn is_opaque(&self, port: u16, cfg: &TranslatorConfig) -> bool {
        self.opaque_ports
            .as_ref()
            .unwrap_or(&cfg.default_opaque_ports)
            .contains(port)
    }
}

/// A workload an EndpointSlice entry refers to: what a pod or workload
/// event must recompute.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadRef {
    /// A pod `(namespace, name)`.
    Pod(String, String),
    /// An ExternalWorkload `(namespace, name)`.
    External(String, String),
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
    /// An ExternalWorkload (shared by its IPv4 and IPv6 endpoints).
    External(Arc<ExternalWorkloadInfo>),
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

impl Workload {
    /// The address ID of this pod's or workload's address of `family`
    /// (`None` for a gateway address, whose ID is synthesised).
    pub fn address_id(&self, family: AddressFamily) -> Option<AddressId> {
        match self {
            Self::Pod(pod) => Some(AddressId::Pod {
                namespace: pod.namespace.to_string(),
                name: pod.name.to_string(),
                family,
            }),
            Self::External(ew) => Some(AddressId::ExternalWorkload {
                namespace: ew.namespace.clone(),
                name: ew.name.clone(),
                family,
            }),
            Self::Gateway(_) => None,
        }
    }
}

impl Workload {
    /// The pod or ExternalWorkload this is (`None` for a gateway address).
    pub fn workload_ref(&self) -> Option<WorkloadRef> {
        match self {
            Self::Pod(pod) => Some(WorkloadRef::Pod(
                pod.namespace.to_string(),
                pod.name.to_string(),
            )),
            Self::External(ew) => {
                Some(WorkloadRef::External(ew.namespace.clone(), ew.name.clone()))
            }
            Self::Gateway(_) => None,
        }
    }

    /// Whether `port` is opaque by the workload's own annotation (or the
    /// default opaque ports); gateway addresses never are.
    pub fn is_opaque(&self, port: u16, cfg: &TranslatorConfig) -> bool {
        match self {
            Self::Pod(pod) => pod.is_opaque(port, cfg),
            Self::External(ew) => ew.is_opaque(port, cfg),
            Self::Gateway(_) => false,
        }
    }
}

impl Endpoint {
    /// The endpoint of a pod or ExternalWorkload at `addr`; `None` for a
    /// gateway (which has no workload ID).
    pub fn of_workload(
        workload: Workload,
        addr: SocketAddr,
        hostname: Option<String>,
        zone: Option<String>,
        for_zones: Option<Vec<String>>,
        opaque_by_server: bool,
    ) -> Option<Self> {
        Some(Self {
            id: workload.address_id(AddressFamily::of(addr.ip()))?,
            addr,
            hostname,
            zone,
            for_zones,
            opaque_by_server,
            workload,
        })
    }

    /// Address family of the address.
    pub fn family(&self) -> AddressFamily {
        AddressFamily::of(self.addr.ip())
    }

    /// The pod facts, for pod-backed endpoints.
    pub fn pod(&self) -> Option<&PodInfo> {
        match &self.workload {
            Workload::Pod(pod) => Some(pod),
            Workload::External(_) | Workload::Gateway(_) => None,
        }
    }
}

/// Unfiltered or filtered endpoints of one Service port, by address ID.
pub type EndpointMap = BTreeMap<AddressId, Arc<Endpoint>>;
