//! The destination controller: `Destination.Get` and `GetProfile`.
//!
//! # One EndpointSlice event, one file per step
//!
//! 1. [`index::cluster`]: `ClusterState::apply_slice` files the slice under
//!    its Service and returns what it [`index::Touched`] (the Service it
//!    left, the Service it joined). The watch (`k8s-index`) reaches it
//!    through the `Index` impl in [`index`], a dispatcher.
//! 2. [`k8s::endpoints`]: `translate_endpoints` turns the Service's slices
//!    and the pods they name into the unfiltered endpoint set of a port.
//! 3. [`index::endpoints`]: each port publisher of that Service takes the
//!    new set; each filter group filters it ([`core::filter`]) and publishes
//!    a new `GroupState` only if what its streams see changed.
//! 4. [`proto::snapshot`]: the group's endpoints become `WeightedAddr`s
//!    ([`proto::weighted_addr`]); the diff to the previous snapshot becomes
//!    the group's shared, pre-encoded step ([`proto::frames`]).
//! 5. [`grpc`]: every stream of the group wakes; its cursor picks the shared
//!    step (or one coalesced diff if it fell behind) and the stream writes
//!    those frames.
//!
//! Each step calls forward only (the helpers in parentheses return to the
//! step that called them); no file is entered twice. `GetProfile` takes the
//! same first step, then [`index::profiles`] → [`proto::profile`] → [`grpc`].
//!
//! # Floors
//!
//! The crate has the policy controller's floors, each importing only the
//! ones above it:
//! - [`config`]: what the flags decide;
//! - [`core`]: values and pure rules (no Kubernetes, gRPC or proxy-API types);
//! - [`k8s`]: Kubernetes objects → core values (the only reader of Kubernetes fields);
//! - [`index`]: `ClusterState` plus the `Get` and `GetProfile` publishers;
//! - [`proto`]: core values → proxy-API messages and encoded frames;
//! - [`grpc`]: the thin gRPC layer (requests in, shared frames out);
//! - [`policy_link`]: the link to the policy controller (Server-derived
//!   opaque ports), emitting typed updates;
//! - [`metrics`]: Prometheus metrics (index series read at scrape time);
//!   [`runtime`]: flags → watches, servers and shutdown.

pub mod config;
pub mod core;
pub mod grpc;
pub mod index;
pub mod k8s;
pub mod metrics;
pub mod policy_link;
pub mod proto;
pub mod runtime;
