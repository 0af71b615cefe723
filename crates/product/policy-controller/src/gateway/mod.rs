//! The Gateway API route kinds, decoupled from the control plane's life:
//! each kind is watched only while its CRD is installed and serves a
//! version Meridian reads, started, switched and stopped as the CRDs
//! change, without a restart.
//!
//! - [`versions`]: which version to watch, from a CRD (pure).
//! - [`supervisor`]: the per-kind task that follows the CRD and runs the
//!   route watch.
//! - [`typed_watch`]: a route watch at a version chosen at run time.
//! - [`tracker`]: removes a kind's objects from the indexes when it stops.
//! - [`active`]: which kinds are active, for the status writer, `/ready`
//!   and metrics.

pub mod active;
pub mod supervisor;
pub mod tracker;
pub mod typed_watch;
pub mod versions;

pub use self::{active::ActiveKinds, supervisor::KindWatch};
