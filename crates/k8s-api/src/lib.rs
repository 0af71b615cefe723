//! Kubernetes types of the custom resources Meridian reads, in one place.
//!
//! - [`service_profile`]: `ServiceProfile` (`linkerd.io/v1alpha2`).
//! - [`go_duration`]: Go `time.ParseDuration` semantics for the duration
//!   strings of ServiceProfiles (timeouts, TTLs).
//! - [`labels`]: Linkerd's label names.
//! - [`policy`]: the `policy.linkerd.io` kinds (Server, ServerAuthorization,
//!   AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication,
//!   HTTPRoute).
//!
//! The CRD manifests in `deploy/crds/` are checked against these types by
//! this crate's tests (`tests/crds.rs`).

pub mod go_duration;
pub mod labels;
pub mod policy;
pub mod service_profile;

pub mod crds;
