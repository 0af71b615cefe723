//! Where a Service's endpoints come from: the Service itself, a linked
//! cluster (a remote-discovery mirror), or several of both (a federated
//! Service). Values only; [`crate::k8s::multicluster`] reads them off a
//! Service.

/// One source of a federated Service's endpoints.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Member {
    /// A Service of the local cluster, in the federated Service's namespace
    /// (filtered for the client as local targets are).
    Local(String),
    /// A Service of a linked cluster, in the same namespace there
    /// (unfiltered, as for remote discovery).
    Remote { service: String, cluster: String },
}

/// Where a `Get` of a Service looks for endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Discovery {
    /// The Service's own EndpointSlices.
    Local,
    /// `service` in linked cluster `cluster` (same namespace).
    Remote { cluster: String, service: String },
    /// The union of these members (possibly none).
    Federated(Vec<Member>),
}

/// Why a Service's discovery labels cannot be followed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DiscoveryError {
    /// A remote-discovery mirror without the remote Service's name.
    #[error("Remote discovery service missing remote service name")]
    MissingRemoteService,
}
