//! `meridian-cli status` and `meridian-cli preflight` end to end, against
//! the project's real local API server (one per test binary, a namespace
//! per test, `test_support`): fixtures are applied with kubectl, statuses
//! written through the `status` subresource as Linkerd's controllers (or a
//! kubelet) would, and the tests assert on what the command prints and its
//! exit status.
//!
//! - `status`: a reverted template, a rollout, a pod whose admin `/metrics`
//!   is reached through the API server's pods/proxy subresource;
//! - `preflight`: one finding of each kind, and the clean case.
#![allow(clippy::unwrap_used)]

mod common;
mod preflight;
mod status;
