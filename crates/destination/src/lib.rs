//! The destination controller: `Destination.Get` (and later `GetProfile`).
//!
//! Pure domain logic (no I/O, no async):
//! - [`authority`], [`context_token`]: parsing requests;
//! - [`config`]: what the flags decide;
//! - [`endpoint_translator`]: Kubernetes objects → endpoints → `WeightedAddr`s;
//! - [`profile`]: ServiceProfiles → `DestinationProfile`;
//! - [`filter`]: per-group filtering; [`snapshot`]: snapshots, diffs, `Update`s.
//!
//! State and serving:
//! - [`endpoints_index`]: the watch-fed index and the publishers of subscribed targets;
//! - [`profile_publishers`]: `GetProfile` resolution and shared profile publishers;
//! - [`publisher`]: shared per-(service, port) and per-filter-group state;
//! - [`server`]: the tonic service; streaming bodies come from the `grpc-stream` crate; [`metrics`]: Prometheus metrics;
//! - [`policy_link`]: the link to the policy controller (Server-derived opaque ports);
//! - [`runtime`]: flags → watches, servers and shutdown.

pub mod authority;
pub mod config;
pub mod context_token;
pub mod endpoint_translator;
pub mod endpoints_index;
pub mod filter;
pub mod metrics;
pub mod policy_link;
pub mod profile;
pub mod profile_publishers;
pub mod publisher;
pub mod runtime;
pub mod server;
pub mod snapshot;
