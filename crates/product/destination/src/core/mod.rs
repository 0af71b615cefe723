//! Values and pure rules of the destination, with no Kubernetes, gRPC or
//! proxy-API types: what a request names ([`authority`], [`context_token`]),
//! what an endpoint is ([`endpoint`]) and what is kept of a pod
//! ([`pod`]) and of an EndpointSlice ([`slice`](mod@slice)), where a Service's endpoints come
//! from ([`discovery`]), how a stream's view of a Service
//! port is filtered ([`filter`]) and what a ServiceProfile says ([`profile`]).

pub mod authority;
pub mod context_token;
pub mod discovery;
pub mod endpoint;
pub mod filter;
pub mod pod;
pub mod profile;
pub mod slice;

pub use authority::{ServiceId, Target};
pub use filter::FilterKey;

/// What a service profile is computed for: a Service port and its FQDN.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceTarget {
    /// The Service.
    pub service: ServiceId,
    /// The requested port.
    pub port: u16,
    /// `fully_qualified_name`: `<svc>.<ns>.svc.<cluster-domain>`.
    pub fqn: String,
}

/// Opaque ports of one pod or ExternalWorkload.
pub type WorkloadPorts = (endpoint::WorkloadRef, std::collections::BTreeSet<u16>);

/// An update of the ports that Server resources make opaque, as the policy
/// link emits it: a snapshot (`reset`, replacing everything known) or the
/// pods and workloads that changed (an empty set clears one).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpaquePortsUpdate {
    /// Whether `workloads` replaces everything known.
    pub reset: bool,
    /// The pods and ExternalWorkloads and their Server-opaque ports.
    pub workloads: Vec<WorkloadPorts>,
}

/// The mesh identity of a workload's proxy: its ServiceAccount in its
/// namespace, under the control plane's namespace and trust domain.
pub fn mesh_identity(
    service_account: &str,
    namespace: &str,
    control_plane_ns: &str,
    trust_domain: &str,
) -> String {
    format!(
        "{service_account}.{namespace}.serviceaccount.identity.{control_plane_ns}.{trust_domain}"
    )
}
