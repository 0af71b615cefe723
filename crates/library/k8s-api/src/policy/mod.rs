//! The `policy.linkerd.io` kinds: who may talk to which workload port, how
//! inbound HTTP routes are matched and rate limited, and which egress
//! networks outbound policy covers.

pub mod authorization_policy;
pub mod egress_network;
pub mod http_route;
pub mod network;
pub mod ratelimit_policy;
pub mod server;
pub mod server_authorization;
pub mod target_ref;

pub use authorization_policy::{AuthorizationPolicy, AuthorizationPolicySpec};
pub use egress_network::{EgressNetwork, EgressNetworkSpec, EgressNetworkStatus, TrafficPolicy};
pub use http_route::{HTTPRoute, HttpRoute, HttpRouteSpec, HttpRouteStatus};
pub use network::{
    MeshTLSAuthentication, MeshTlsAuthentication, MeshTlsAuthenticationSpec, Network,
    NetworkAuthentication, NetworkAuthenticationSpec,
};
pub use ratelimit_policy::{
    HTTPLocalRateLimitPolicy, HttpLocalRateLimitPolicy, HttpLocalRateLimitPolicySpec,
    HttpLocalRateLimitPolicyStatus,
};
pub use server::{ProxyProtocol, Server, ServerSpec};
pub use server_authorization::{ServerAuthorization, ServerAuthorizationSpec};
pub use target_ref::{LocalTargetRef, NamespacedTargetRef};

/// The API group of the policy kinds.
pub const GROUP: &str = "policy.linkerd.io";
