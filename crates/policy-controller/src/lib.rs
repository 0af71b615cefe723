//! Meridian's policy controller: evaluates Server, ServerAuthorization,
//! AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication and
//! HTTPRoute resources and serves the proxies' inbound policy API.
//!
//! - [`core`]: domain types (no Kubernetes, no gRPC) and the discovery trait.
//! - [`index`]: the synchronous index of meshed pods, external workloads
//!   and policy resources, publishing each workload port's server on a
//!   watch channel.
//! - [`grpc`]: the `InboundServerPolicies` tonic service.
//! - [`gateway`]: the Gateway API route watches, started and stopped as
//!   their CRDs come and go.
//! - [`webhook`]: the admission rules of the policy kinds (same conversions
//!   as the index), served with the shared `admission` plumbing.
//! - [`status`]: the leader-elected HTTPRoute status writer.
//! - [`metrics`]: index, gRPC and status-writer metrics.
//! - [`admin`]: introspection on a localhost listener (open streams, the
//!   consistency audit of what they were sent).
//! - [`args`]: command-line flags (names and defaults follow the original).
//! - [`runtime`]: wires the flags to the watches, the gRPC, workload-ports,
//!   admin and introspection servers, and shutdown.

pub mod admin;
pub mod args;
pub mod core;
pub mod gateway;
pub mod grpc;
pub mod index;
pub mod metrics;
pub mod original_metrics;
pub mod proto;
pub mod runtime;
pub mod status;
pub mod webhook;
