//! Kubernetes objects → core values: the only floor that reads the fields
//! of Kubernetes resources. One file per kind: what the indexes keep of
//! it, and the conversion (public, so that admission and the status writer
//! apply the same rules and say why the indexes ignore an object).

pub mod authz;
pub mod external_workload;
pub mod grpc_route;
pub mod outbound;
pub mod pod;
pub mod ratelimit;
pub mod routes;
pub mod selector;
pub mod server;
pub mod workload;

use ipnet::IpNet;

/// Why a resource was ignored.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvalidResource {
    #[error("port {0} is not in 1-65535")]
    Port(i32),
    #[error("unsupported label selector operator {0:?}")]
    SelectorOperator(String),
    #[error(transparent)]
    Network(#[from] crate::core::InvalidNetwork),
    #[error("authorizes no clients")]
    NoClients,
    #[error("unsupported target {group}/{kind}")]
    UnsupportedTarget { group: String, kind: String },
    #[error("unsupported authentication {group}/{kind}")]
    UnsupportedAuthentication { group: String, kind: String },
    #[error("unsupported identity reference kind {0}")]
    UnsupportedIdentityRef(String),
    #[error("a {0} reference needs a name")]
    MissingName(String),
    #[error("{kind} {namespace}/{name} not found")]
    MissingAuthentication {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error("more than one {0} authentication")]
    MultipleAuthentications(&'static str),
    #[error("a Server parent may not name {0}")]
    ParentRef(&'static str),
    #[error("{0}")]
    Route(String),
    #[error(transparent)]
    Identity(#[from] crate::core::InvalidIdentity),
    #[error("except {except} is not inside cidr {cidr}")]
    ExceptOutsideCidr { cidr: IpNet, except: IpNet },
    #[error("except {except} covers all of cidr {cidr}")]
    ExceptCoversCidr { cidr: IpNet, except: IpNet },
    #[error("networks must not be empty")]
    NoNetworks,
    #[error("meshTLS and unauthenticated may not both be set")]
    MeshTlsAndUnauthenticated,
    #[error(
        "meshTLS.unauthenticatedTLS may not be set together with identities or serviceAccounts"
    )]
    UnauthenticatedTlsWithIdentities,
    #[error(
        "a Namespace target must name the policy's own namespace {namespace:?}, not {target:?}"
    )]
    ForeignNamespaceTarget { namespace: String, target: String },
    #[error("{0}")]
    ConflictingAuthentications(&'static str),
    #[error("a Namespace identity reference may not set a namespace (its name is the namespace)")]
    NamespaceRefWithNamespace,
    #[error(transparent)]
    RateLimit(ratelimit::InvalidRateLimit),
    #[error("one of podSelector or externalWorkloadSelector must be set")]
    NoServerSelector,
    #[error("podSelector and externalWorkloadSelector may not both be set")]
    BothServerSelectors,
}
