//! A workload in the index, a meshed pod or an external workload: its
//! definition ([`WorkloadInfo`], read by [`crate::k8s::pod`] and
//! [`crate::k8s::external_workload`]), its default server, and the
//! published server of each of its known ports. Both kinds share this
//! state; [`super::reindex`] matches it with Servers.

use std::{num::NonZeroU16, sync::Arc};

use k8s_index::shared::Shared;
use tokio::sync::watch;

use super::{ClusterInfo, port_servers::PortServers};
use crate::{
    core::{InboundServer, ProxyProtocol, ServerRef, routes::default_http_routes},
    k8s::workload::WorkloadInfo,
};

impl WorkloadInfo {
    /// The default server of `port` for this workload.
    pub fn default_server(&self, port: NonZeroU16, cluster: &ClusterInfo) -> InboundServer {
        let settings = &self.settings;
        let protocol = if settings.opaque_ports.contains(&port) {
            ProxyProtocol::Opaque
        } else {
            ProxyProtocol::Detect {
                timeout: cluster.detect_timeout,
            }
        };
        let mut policy = settings.default_policy.unwrap_or(cluster.default_policy);
        if settings.require_identity_ports.contains(&port) {
            policy = policy.require_identity();
        }
        InboundServer {
            reference: ServerRef::Default(policy.as_str()),
            protocol,
            authorizations: policy.authorizations(&cluster.networks),
            http_routes: default_http_routes(self.probe_paths(port), &cluster.probe_networks),
            grpc_routes: Default::default(),
            ratelimit: None,
        }
    }
}

/// A workload in the index.
#[derive(Debug)]
pub(super) struct WorkloadState {
    /// Shared with the workload's siblings (same definition).
    pub info: Arc<WorkloadInfo>,
    /// The ports Servers select and the ports looked up; a port's server
    /// is shared with every workload port that has the same one (all the
    /// ports a Server selects, most often).
    pub port_servers: PortServers,
}

impl WorkloadState {
    pub fn new(info: Arc<WorkloadInfo>) -> Self {
        Self {
            info,
            port_servers: PortServers::default(),
        }
    }

    /// The ports a Server (not a default) makes opaque, sorted.
    pub fn server_opaque_ports(&self) -> Vec<u16> {
        self.port_servers
            .iter()
            .filter(|(_, ps)| {
                let server = ps.current();
                matches!(server.reference, ServerRef::Server(_))
                    && matches!(server.protocol, ProxyProtocol::Opaque)
            })
            .map(|(port, _)| port.get())
            .collect()
    }

    /// A receiver of `port`'s server, creating the default server of an
    /// unknown port.
    pub fn subscribe(
        &mut self,
        port: NonZeroU16,
        cluster: &ClusterInfo,
        servers: &mut Shared<InboundServer>,
    ) -> watch::Receiver<Arc<InboundServer>> {
        let default = || servers.get(self.info.default_server(port, cluster));
        self.port_servers.subscribe(port, default)
    }
}
