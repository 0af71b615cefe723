//! [`ClusterLookups`]: what the translators in this module need from the
//! caller's stored objects while they turn one object into core values (the
//! pod or ExternalWorkload an endpoint names, a ReplicaSet's owner, a node's zone, a Server's
//! opacity). The index's `ClusterState` implements it; the tests implement
//! it over a fixed list.

use std::sync::Arc;

use k8s_api::workload::ExternalWorkload;

use crate::core::{
    endpoint::{OwnerRef, ParentKind, WorkloadRef},
    pod::PodFacts,
};

/// Read access to the objects a translation may need besides the one it
/// translates.
pub trait ClusterLookups {
    /// The facts of the pod `namespace/name`, if stored.
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodFacts>>;

    /// The sole owner of a ReplicaSet or Job (`kind`, `namespace`, `name`);
    /// `None` if the parent is unknown or has not exactly one owner.
    fn owner(&self, kind: ParentKind, namespace: &str, name: &str) -> Option<OwnerRef>;

    /// The ExternalWorkload `namespace/name`, if stored.
    fn external_workload(&self, namespace: &str, name: &str) -> Option<Arc<ExternalWorkload>>;

    /// Whether a policy `Server` makes `port` of this pod or workload
    /// opaque (false when nothing is known from the policy controller).
    fn server_opaque(&self, workload: &WorkloadRef, port: u16) -> bool;

    /// The zone of a node, by name.
    fn node_zone(&self, node: &str) -> Option<&str>;
}
