//! The proxy API's view of the index's values: core values (inbound
//! servers, outbound policies, egress answers) → `linkerd2-proxy-api`
//! messages, field for field as the original encodes them. Pure functions,
//! called by the gRPC services ([`crate::grpc`]) when a watch changes; the
//! only floor besides `grpc/` that names proxy-API types.
//!
//! - [`inbound`]: an [`InboundServer`](crate::core::InboundServer) → `Server`
//!   (with [`ratelimit`]'s `HttpLocalRateLimit`);
//! - [`outbound`]: an outbound policy → `OutboundPolicy` (HTTP and gRPC
//!   routes there, TLS and TCP routes in `outbound::l4`, EgressNetworks in
//!   `outbound::egress`).

pub mod inbound;
pub mod outbound;
pub mod ratelimit;

pub use self::{
    inbound::to_server,
    outbound::{egress_fallback, to_egress_policy, to_outbound_policy, undefined_port},
};
