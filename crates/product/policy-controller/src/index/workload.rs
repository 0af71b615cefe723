//! A workload in the index, a meshed pod or an external workload: its
//! labels, annotation settings, named ports and probe paths, and the
//! published server of each of its known ports. Both kinds share this
//! state; [`super::pod`] and [`super::external_workload`] read their
//! resources into it, and [`super::reindex`] matches it with Servers.

use std::{
    collections::{BTreeMap, BTreeSet},
    num::NonZeroU16,
    sync::Arc,
};

use k8s_index::shared::Shared;
use tokio::sync::watch;

use super::{ClusterInfo, port_servers::PortServers, selector::Labels};
use crate::core::{
    DefaultPolicy, InboundServer, PortSet, ProxyProtocol, ServerRef, WorkloadKind, parse_port_set,
    routes::default_http_routes,
};

/// Annotation naming the workload's default policy.
pub const DEFAULT_POLICY_ANNOTATION: &str = k8s_api::labels::DEFAULT_INBOUND_POLICY;
/// Annotation listing the workload's opaque ports.
pub const OPAQUE_PORTS_ANNOTATION: &str = k8s_api::labels::OPAQUE_PORTS;
/// Annotation listing ports whose default policy requires identity.
pub const REQUIRE_IDENTITY_ANNOTATION: &str = k8s_api::labels::REQUIRE_IDENTITY_INBOUND_PORTS;

/// What the index keeps of a workload's definition: the same for every pod
/// of a ReplicaSet, so the index keeps one shared copy of each
/// ([`k8s_index::shared`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct WorkloadInfo {
    /// Which Servers may select it (`podSelector` or
    /// `externalWorkloadSelector` ones).
    pub kind: WorkloadKind,
    pub labels: Labels,
    pub settings: Settings,
    /// Port name → TCP ports with that name (a pod's containers may repeat
    /// a name; an external workload's names are unique).
    pub port_names: BTreeMap<String, PortSet>,
    /// Port → HTTP probe paths (none for external workloads).
    pub probes: BTreeMap<NonZeroU16, BTreeSet<String>>,
}

/// Per-workload settings from annotations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Settings {
    /// `None`: use the cluster default (also when the annotation is invalid).
    pub default_policy: Option<DefaultPolicy>,
    pub opaque_ports: PortSet,
    pub require_identity_ports: PortSet,
}

impl Settings {
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> Self {
        let Some(anns) = annotations else {
            return Self::default();
        };
        let default_policy = anns.get(DEFAULT_POLICY_ANNOTATION).and_then(|v| {
            v.parse()
                .map_err(|error| {
                    tracing::warn!(%error, "invalid {DEFAULT_POLICY_ANNOTATION} annotation; using the cluster default")
                })
                .ok()
        });
        let ports = |key: &str| {
            anns.get(key)
                .map(|v| {
                    parse_port_set(v).unwrap_or_else(|| {
                        tracing::warn!(value = %v, "invalid {key} annotation; treating it as empty");
                        PortSet::new()
                    })
                })
                .unwrap_or_default()
        };
        Self {
            default_policy,
            opaque_ports: ports(OPAQUE_PORTS_ANNOTATION),
            require_identity_ports: ports(REQUIRE_IDENTITY_ANNOTATION),
        }
    }
}

impl WorkloadInfo {
    /// The HTTP probe paths of `port`.
    pub fn probe_paths(&self, port: NonZeroU16) -> impl Iterator<Item = &str> {
        self.probes
            .get(&port)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

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

/// Whether a port's `protocol` is TCP (the default when unset).
pub(super) fn is_tcp(protocol: Option<&str>) -> bool {
    protocol.is_none_or(|p| p.eq_ignore_ascii_case("TCP"))
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
