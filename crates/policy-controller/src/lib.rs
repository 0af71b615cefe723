//! Meridian's policy controller: evaluates Server, ServerAuthorization,
//! AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication and
//! HTTPRoute resources and serves the proxies' policy API.
//!
//! - [`args`]: command-line flags (names and defaults follow the original).
//! - [`runtime`]: wires the flags to the watches, the admin server and
//!   shutdown.

pub mod args;
pub mod runtime;
