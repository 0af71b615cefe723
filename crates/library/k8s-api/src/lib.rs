//! Kubernetes types of the custom resources Meridian reads, in one place.
//!
//! - [`service_profile`]: `ServiceProfile` (`linkerd.io/v1alpha2`).
//! - [`go_duration`]: Go `time.ParseDuration` semantics for the duration
//!   strings of ServiceProfiles (timeouts, TTLs).
//! - [`policy`]: the `policy.linkerd.io` kinds (Server, ServerAuthorization,
//!   AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication,
//!   HTTPRoute, HTTPLocalRateLimitPolicy, EgressNetwork).
//! - [`gateway`]: the Gateway API route kinds the outbound policy reads
//!   (`gateway.networking.k8s.io` HTTPRoute, GRPCRoute, TLSRoute and
//!   TCPRoute; their CRDs are the upstream manifests in `deploy/crds/`).
//! - [`workload`]: `ExternalWorkload` (`workload.linkerd.io`), workloads
//!   outside the cluster, read by the destination (endpoints and the
//!   EndpointSlice writer) and the policy controller (inbound policy).
//! - [`labels`]: Linkerd's label and annotation names; [`conditions`]: the
//!   status condition types and reasons the policy controller writes.
//! - [`ports`]: port lists as annotations and flags write them (the
//!   destination's lenient and the policy controller's strict parser).
//!
//! - [`crds`]: the CustomResourceDefinitions generated from these types
//!   (`cargo xtask gen-crds`).
//!
//! The CRD manifests in `deploy/crds/` are checked against these types by
//! this crate's tests (`tests/crds.rs`).

pub mod gateway;
pub mod go_duration;
pub mod labels;
pub mod policy;
pub mod ports;
pub mod service_profile;
pub mod workload;

pub mod conditions;
pub mod crds;
