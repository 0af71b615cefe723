//! Domain types of policy, free of Kubernetes and gRPC: what a proxy is
//! told about one of its workload's ports (protocol, authorized clients,
//! HTTP and gRPC routes, rate limit), the default policies, and the discovery trait the gRPC
//! layer is written against; [`outbound`] holds the same for the Services
//! a proxy connects to, and [`egress`] the egress networks.

mod cluster;
mod defaults;
mod discover;
pub mod egress;
pub mod grpc_routes;
mod identity;
mod network;
pub mod outbound;
mod ratelimit;
pub mod routes;

use std::{collections::BTreeMap, time::Duration};

pub use cluster::ClusterInfo;
pub use defaults::{DefaultPolicy, InvalidDefaultPolicy};
pub use discover::{
    DiscoverInboundServer, DiscoverOutboundPolicy, LookupError, WorkloadKind, WorkloadPort,
};
pub use identity::{IdentityMatch, InvalidIdentity, check_identity};
pub use network::{InvalidNetwork, NetworkMatch};
// Port lists: the strict parser, beside the destination's lenient one.
pub use k8s_api::ports::{PortSet, parse_port_set};
pub use ratelimit::{RateLimit, RateLimitOverride};
pub use routes::{GroupKindName, HttpRoute, RouteRef};

/// How long a proxy waits for a client to speak first before treating a
/// connection as opaque, for `Detect` servers.
pub const DETECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Which resource (or default policy) produced an [`InboundServer`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServerRef {
    /// A default server, named by its policy (e.g. `all-unauthenticated`).
    Default(&'static str),
    /// A `Server` resource, by name.
    Server(String),
}

/// Which resource (or default) produced a [`ClientAuthorization`].
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AuthorizationRef {
    /// A default authorization (`all-unauthenticated`, `audit`, `probe`, …).
    Default(&'static str),
    /// A `ServerAuthorization` resource, by name.
    ServerAuthorization(String),
    /// An `AuthorizationPolicy` resource, by name.
    AuthorizationPolicy(String),
}

/// How the proxy handles connections on the port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProxyProtocol {
    /// Detect HTTP; fall back to opaque after `timeout`.
    Detect {
        timeout: Duration,
    },
    Http1,
    Http2,
    Grpc,
    /// Forward bytes without inspecting them.
    Opaque,
    /// Application-terminated TLS.
    Tls,
}

/// A class of authorized clients.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientAuthorization {
    /// Source networks the authorization applies to. Empty means the
    /// cluster networks (filled in when published).
    pub networks: Vec<NetworkMatch>,
    /// What the client must prove.
    pub authentication: ClientAuthentication,
}

/// A client's authentication requirement.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ClientAuthentication {
    /// No requirement.
    Unauthenticated,
    /// Mesh TLS, with or without a client identity.
    TlsUnauthenticated,
    /// Mesh TLS with an identity matching one of these.
    TlsAuthenticated(Vec<IdentityMatch>),
}

/// The authorizations of a server or a route, by reference.
pub type Authorizations = BTreeMap<AuthorizationRef, ClientAuthorization>;

/// Everything a proxy is told about one inbound port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InboundServer {
    pub reference: ServerRef,
    pub protocol: ProxyProtocol,
    pub authorizations: Authorizations,
    pub http_routes: BTreeMap<RouteRef, HttpRoute>,
    /// gRPC routes of `Grpc` servers; empty means the default route.
    pub grpc_routes: BTreeMap<RouteRef, grpc_routes::GrpcRoute>,
    /// Sent with the HTTP and Detect protocols only.
    pub ratelimit: Option<RateLimit>,
}

impl ClientAuthorization {
    /// Any client from anywhere.
    pub fn allow_all() -> Self {
        Self {
            networks: NetworkMatch::all(),
            authentication: ClientAuthentication::Unauthenticated,
        }
    }
}
