//! The discovery interfaces the gRPC layer is written against: a watch of
//! the [`InboundServer`] of one workload port (a pod's or an external
//! workload's), and the outbound policy of a
//! Service port or an egress address.

use std::{
    net::{IpAddr, SocketAddr},
    num::NonZeroU16,
    sync::Arc,
};

use tokio::sync::watch;

use super::{
    InboundServer,
    egress::EgressPolicy,
    outbound::{OutboundPolicy, OutboundTarget, ServiceTarget},
};

/// The kind of workload a proxy runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkloadKind {
    /// A meshed pod.
    Pod,
    /// An `ExternalWorkload` (a VM, say, enrolled in the mesh).
    External,
}

/// A port of a workload.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkloadPort {
    pub namespace: String,
    pub kind: WorkloadKind,
    /// The pod's or the external workload's name.
    pub name: String,
    pub port: NonZeroU16,
}

/// Why a lookup found nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The namespace or workload is unknown (or the pod is not meshed).
    #[error("unknown server")]
    UnknownServer,
}

/// Finds the inbound server of a workload port.
pub trait DiscoverInboundServer: Send + Sync + 'static {
    /// A receiver whose current value is the port's server and that changes
    /// with it. It closes when the workload goes away.
    fn watch_inbound_server(
        &self,
        target: &WorkloadPort,
    ) -> Result<watch::Receiver<std::sync::Arc<InboundServer>>, LookupError>;
}

/// Finds the outbound policy of targets.
pub trait DiscoverOutboundPolicy: Send + Sync + 'static {
    /// What `addr:port` is, for a client in `source_namespace`: a Service
    /// port, an undeclared port of a Service, an egress address, or
    /// nothing (`None`: an unknown in-cluster address).
    fn lookup_ip(
        &self,
        addr: IpAddr,
        port: NonZeroU16,
        source_namespace: &str,
    ) -> Option<OutboundTarget>;

    /// A receiver whose current value is the target's policy and that
    /// changes with it. A Service that does not exist (yet) has its default
    /// policy, which follows the Service into existence, as the original's.
    fn watch_outbound_policy(&self, target: &ServiceTarget)
    -> watch::Receiver<Arc<OutboundPolicy>>;

    /// Whether the Service `namespace/name` is known (a lookup of one that
    /// is not is checked with the API server first).
    fn knows_service(&self, namespace: &str, name: &str) -> bool;

    /// A receiver of the policy of an egress address for clients of
    /// `source_namespace`, following EgressNetworks and their routes.
    /// `None`: this discovery knows no EgressNetworks (always the
    /// egress fallback).
    fn watch_egress(
        &self,
        _addr: SocketAddr,
        _source_namespace: &str,
    ) -> Option<watch::Receiver<Arc<EgressPolicy>>> {
        None
    }
}
