//! The discovery interface the gRPC layer is written against: a watch of
//! the [`InboundServer`] of one pod port.

use std::num::NonZeroU16;

use tokio::sync::watch;

use super::InboundServer;

/// A port of a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct PodPort {
    pub namespace: String,
    pub pod: String,
    pub port: NonZeroU16,
}

/// Why a lookup found nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// The namespace or pod is unknown (or the pod is not meshed).
    #[error("unknown server")]
    UnknownServer,
}

/// Finds the inbound server of a pod port.
pub trait DiscoverInboundServer: Send + Sync + 'static {
    /// A receiver whose current value is the port's server and that changes
    /// with it. It closes when the pod goes away.
    fn watch_inbound_server(
        &self,
        target: &PodPort,
    ) -> Result<watch::Receiver<InboundServer>, LookupError>;
}
