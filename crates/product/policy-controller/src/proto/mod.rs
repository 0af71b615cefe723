//! Core values → proxy-API messages: an [`InboundServer`](crate::core::InboundServer)
//! becomes the `inbound` API's `Server` ([`inbound`], with its rate limit in
//! [`ratelimit`]), and an outbound or egress policy the `outbound` API's
//! `OutboundPolicy` ([`outbound`]). Pure functions; the gRPC layer sends
//! what they build.

pub mod inbound;
pub mod outbound;
pub mod ratelimit;
