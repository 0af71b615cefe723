//! The destination controller: `Destination.Get` and `GetProfile`.
//!
//! # One EndpointSlice event, one file per step
//!
//! 1. [`index`]: the watch (`k8s-index`) decodes the slice straight into
//!    the facts the index keeps ([`k8s::slices`]: a typed partial object,
//!    no `k8s-openapi` `EndpointSlice`) and calls the `Index<SliceObject>`
//!    impl, which stores them ([`index::cluster`]'s `apply_slice` files
//!    them under their Service and says what it [`index::Touched`]: the
//!    Service the slice left and the one it joined, nothing if its facts
//!    did not change) and hands that to the publishers.
//! 2. [`index::endpoints`]: each port publisher of a touched Service
//!    rebuilds its inputs (`translate_endpoints` in [`k8s::endpoints`]: the
//!    slices and the pods they name → the unfiltered endpoints of the port);
//!    each filter group filters them ([`core::filter`]) and builds its
//!    snapshot.
//! 3. [`proto::snapshot`]: the snapshot is the group's endpoints as
//!    `WeightedAddr`s ([`proto::weighted_addr`]); back in step 2, a group
//!    whose snapshot changed publishes it with the diff from the previous
//!    one, encoded once ([`proto::frames`]).
//! 4. [`grpc::get`]: every stream of the group wakes (the loop in
//!    `grpc::subscription`); its cursor picks the shared step (or one
//!    coalesced diff if it fell behind) and the stream writes those frames.
//!
//! The four files of the walk call forward only; the helpers in
//! parentheses are pure (or storage) calls that return to the step that
//! made them, and none of them calls back into the walk. `GetProfile` takes
//! the same first step, then [`index::profiles`] (with
//! [`k8s::profiles`]) → [`proto::profile`] → [`grpc::get_profile`].
//!
//! # Floors
//!
//! The crate has the same kind of floors as the policy controller, each
//! importing only the ones above it (`cargo xtask imports` checks):
//! - [`config`]: what the flags decide;
//! - [`core`]: values and pure rules (no Kubernetes, gRPC or proxy-API types);
//! - [`k8s`]: Kubernetes objects → core values (the only reader of Kubernetes fields);
//! - [`proto`]: core values → proxy-API messages and encoded frames (pure;
//!   the publishers below encode each change once, here);
//! - [`index`]: `ClusterState` plus the `Get` and `GetProfile` publishers;
//! - [`multicluster`]: one index per linked cluster, following the
//!   clusters' kubeconfig Secrets;
//! - [`metrics`]: Prometheus metrics (index series read at scrape time);
//! - [`grpc`]: the thin gRPC layer (requests in, shared frames out);
//! - [`policy_link`]: the link to the policy controller (Server-derived
//!   opaque ports), emitting typed updates;
//! - [`external_workloads`]: the leader-elected EndpointSlice writer for
//!   Services selecting ExternalWorkloads (reads Kubernetes objects, writes
//!   slices; the index reads those like any other slice);
//! - [`admin`]: introspection on a localhost listener (open streams, targets'
//!   shared state, the consistency audit);
//! - [`runtime`]: flags → watches, servers and shutdown.

pub mod admin;
pub mod config;
pub mod core;
pub mod external_workloads;
pub mod grpc;
pub mod index;
pub mod k8s;
pub mod metrics;
pub mod multicluster;
pub mod original_metrics;
pub mod policy_link;
pub mod proto;
pub mod runtime;
pub mod unsupported;
