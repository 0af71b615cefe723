//! What the destination keeps of a pod: only the facts an answer is
//! computed from, decoded once at the watch edge ([`crate::k8s::pods`]),
//! never the Kubernetes object. What the pod's template decides
//! ([`PodSpecFacts`]) is one shared copy per distinct template, and strings
//! that repeat across pods (namespace, node, ServiceAccount, control-plane
//! namespace) are shared `Arc<str>`s, both interned by the index.

use std::{
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use k8s_api::ports::PortRanges;

/// `status.phase`, as far as the destination tells phases apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PodPhase {
    /// `Running`: the only phase with an endpoint profile.
    Running,
    /// `Succeeded` or `Failed`: the pod no longer answers on its IP.
    Finished,
    /// Anything else (`Pending`, `Unknown`, unset).
    Other,
}

/// The facts of one pod (see the module doc). Compared whole: a pod event
/// whose facts are unchanged (a status update of a condition no answer
/// reads, say) touches nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// Pod name.
    pub name: Box<str>,
    /// Pod namespace (`default` if unset).
    pub namespace: Arc<str>,
    /// `spec.nodeName`: `internalTrafficPolicy: Local` and zones.
    pub node_name: Option<Arc<str>>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `metadata.deletionTimestamp` is set.
    pub terminating: bool,
    /// `spec.hostNetwork`.
    pub host_network: bool,
    /// `status.podIP` first, then the other `status.podIPs`.
    pub pod_ips: Box<[IpAddr]>,
    /// `status.hostIP`.
    pub host_ip: Option<IpAddr>,
    /// What the pod's template decides: the same for every pod of a
    /// ReplicaSet, so the index keeps one copy of each.
    pub spec: Arc<PodSpecFacts>,
}

/// The facts of a pod that its template decides (its spec, labels,
/// annotations and owner), shared by the pods of a ReplicaSet.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodSpecFacts {
    /// `spec.serviceAccountName` (`default` if unset): the mesh identity.
    pub service_account: Arc<str>,
    /// Non-empty `linkerd.io/control-plane-ns` label: the pod is meshed.
    pub control_plane_ns: Option<Arc<str>>,
    /// Non-empty `pod-template-hash` label.
    pub pod_template_hash: Option<Box<str>>,
    /// The sole owner reference, as written (several or none: `None`);
    /// the owner metrics label resolves it through the ReplicaSet or Job.
    pub owner: Option<OwnerRef>,
    /// `config.linkerd.io/opaque-ports` if annotated (named ports resolved
    /// against the pod's container ports); `None`: the defaults apply.
    pub opaque_ports: Option<PortRanges>,
    /// `config.linkerd.io/skip-inbound-ports`.
    pub skip_inbound_ports: PortRanges,
    /// The proxy's listen ports, from the `linkerd-proxy` container's env.
    pub proxy_ports: ProxyPorts,
    /// The host ports its containers expose.
    pub host_ports: Box<[u16]>,
}

impl PodFacts {
    /// The primary pod IP (`status.podIP`).
    pub fn pod_ip(&self) -> Option<IpAddr> {
        self.pod_ips.first().copied()
    }

    /// The IPs the pod is known by for `GetProfile` by address: its pod IPs
    /// and its host IP.
    pub fn ips(&self) -> impl Iterator<Item = IpAddr> + '_ {
        self.pod_ips.iter().copied().chain(self.host_ip)
    }

    /// Whether the pod is in phase `Running`.
    pub fn is_running(&self) -> bool {
        self.phase == PodPhase::Running
    }

    /// Whether the pod answers on its pod IP: on the pod network, not
    /// finished and not terminating.
    pub fn serves_pod_ip(&self) -> bool {
        !self.host_network && self.phase != PodPhase::Finished && !self.terminating
    }

    /// Whether the pod's host IP is `addr`'s IP and one of its containers
    /// exposes `addr`'s port as a host port.
    pub fn exposes_host_port(&self, addr: SocketAddr) -> bool {
        self.host_ip == Some(addr.ip()) && self.spec.host_ports.contains(&addr.port())
    }
}

/// An owner reference reduced to what the labels need.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OwnerRef {
    /// Kind as written in the reference (e.g. `Deployment`).
    pub kind: String,
    /// Name of the owner.
    pub name: String,
}

/// Why a proxy port could not be read from the pod spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash, thiserror::Error)]
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
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProxyPorts {
    /// `LINKERD2_PROXY_INBOUND_LISTEN_ADDR`.
    pub inbound: Result<u16, ProxyPortError>,
    /// `LINKERD2_PROXY_ADMIN_LISTEN_ADDR`.
    pub admin: Result<u16, ProxyPortError>,
    /// `LINKERD2_PROXY_CONTROL_LISTEN_ADDR`.
    pub control: Result<u16, ProxyPortError>,
}
