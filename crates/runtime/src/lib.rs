//! Process plumbing shared by Meridian's binaries.
//!
//! Each binary (`destination`, `sp-validator`, `policy-controller`) parses its
//! own flags, then uses these pieces so that every process behaves the same
//! way for an operator: the same log flags and formats, the same admin
//! endpoints (`/live`, `/ready`, `/metrics`, plus `/ping` for the original's
//! probes), the same readiness semantics and the same graceful shutdown.

pub mod admin;
pub mod kube_client;
pub mod logging;
pub mod readiness;
pub mod shutdown;

pub use admin::AdminServer;
pub use kube_client::KubeClientArgs;
pub use logging::{LogArgs, LogFormat};
pub use readiness::{DegradedHandle, Readiness, ReadyHandle};
pub use shutdown::Shutdown;
