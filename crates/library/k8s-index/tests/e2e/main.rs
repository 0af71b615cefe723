//! The index against the real local control plane, shared by the tests of
//! this binary (each in a namespace of its own):
//!
//! - `endpoint_slices`: EndpointSlices made by kube-controller-manager
//!   reach the index and follow readiness flips and deletions;
//! - `confirm`: `MissConfirmer`, one outcome at a time, and what a flood
//!   of misses costs.
//!
//! (`tests/apiserver_restart.rs` stops its API server: it is a binary of
//! its own, with a private control plane.)

mod confirm;
mod endpoint_slices;
