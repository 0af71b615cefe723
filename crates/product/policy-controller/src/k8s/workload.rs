//! What the indexes keep of a workload, a meshed pod or an external
//! workload: its labels, annotation settings, named ports and probe paths
//! ([`super::pod`] and [`super::external_workload`] read their resources
//! into it).

use std::{
    collections::{BTreeMap, BTreeSet},
    num::NonZeroU16,
    sync::{Arc, LazyLock},
};

use k8s_index::shared::Shared;
use parking_lot::Mutex;

use super::selector::Labels;
use crate::core::{DefaultPolicy, PortSet, WorkloadKind, parse_port_set};

/// Annotation naming the workload's default policy.
pub const DEFAULT_POLICY_ANNOTATION: &str = k8s_api::labels::DEFAULT_INBOUND_POLICY;
/// Annotation listing the workload's opaque ports.
pub const OPAQUE_PORTS_ANNOTATION: &str = k8s_api::labels::OPAQUE_PORTS;
/// Annotation listing ports whose default policy requires identity.
pub const REQUIRE_IDENTITY_ANNOTATION: &str = k8s_api::labels::REQUIRE_IDENTITY_INBOUND_PORTS;

/// What the index keeps of a workload's definition: the same for every pod
/// of a ReplicaSet, so the process keeps one shared copy of each
/// ([`shared`]).
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
}

/// The process's one copy of each workload definition in use.
///
/// Pods are decoded by kube's watcher through `Deserialize`, which takes no
/// context, so the set the decoder and the index share is the process's
/// own: a listed pod holds the shared copy from the moment it is decoded,
/// and a list of 10,000 pods waiting for its end holds one definition per
/// ReplicaSet, not one per pod. Values are immutable and compared whole,
/// so indexes that share the set (tests build several) cannot see each
/// other's workloads, only equal definitions.
static SHARED: LazyLock<Mutex<Shared<WorkloadInfo>>> = LazyLock::new(Default::default);

/// The shared copy of `info` (stored now if no equal definition is).
pub fn shared(info: WorkloadInfo) -> Arc<WorkloadInfo> {
    SHARED.lock().get(info)
}

/// Whether a port's `protocol` is TCP (the default when unset).
pub(crate) fn is_tcp(protocol: Option<&str>) -> bool {
    protocol.is_none_or(|p| p.eq_ignore_ascii_case("TCP"))
}
