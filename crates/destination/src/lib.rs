//! The destination controller: `Destination.Get` and `GetProfile`.
//!
//! The crate has the policy controller's floors, each importing only the
//! ones above it:
//! - [`config`]: what the flags decide;
//! - [`core`]: values and pure rules (no Kubernetes, gRPC or proxy-API types);
//! - [`k8s`]: Kubernetes objects → core values (the only reader of Kubernetes fields);
//! - [`index`]: the watch-fed state and the publishers of subscribed targets;
//! - [`proto`]: core values → proxy-API messages and encoded frames;
//! - [`grpc`]: the thin gRPC layer (requests in, shared frames out);
//! - [`policy_link`]: the link to the policy controller (Server-derived opaque ports);
//! - [`metrics`]: Prometheus metrics; [`runtime`]: flags → watches, servers and shutdown.

pub mod config;
pub mod core;
pub mod grpc;
pub mod index;
pub mod k8s;
pub mod metrics;
pub mod policy_link;
pub mod proto;
pub mod runtime;
