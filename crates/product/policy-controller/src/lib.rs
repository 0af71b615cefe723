//! Meridian's policy controller: the proxies' inbound policy API
//! (`InboundServerPolicies`: what a workload's port accepts, from Servers,
//! authorizations, routes and rate limits) and outbound policy API
//! (`OutboundPolicies`: how traffic to a Service or an egress address is
//! routed, from Services, routes and EgressNetworks), the policy kinds'
//! admission webhook and the route status writer.
//!
//! # One Server change, one file per step
//!
//! 1. [`index`]: the watch (`k8s-index`) hands the Server to the
//!    `Index<Server>` impl in `index/mod.rs`, which reads it into a
//!    `ServerSpec` (`index/server.rs`, `from_resource`: selector, port,
//!    protocol, access policy; an invalid one is logged and counted absent),
//!    files it under its namespace and says which workloads it touched.
//! 2. `index/reindex.rs`: the flush of what was touched recomputes each
//!    touched workload's servers: the Servers that select each port, the
//!    oldest one winning a contested port, its authorizations and routes
//!    (core rules: `core/defaults.rs`, `core/routes.rs`), and publishes each
//!    port's [`core::InboundServer`] on its watch channel
//!    (`index/port_servers.rs`: only when it changed).
//! 3. [`proto::inbound`]: each open stream of the port wakes and turns the
//!    new server into the proxy API's `Server` (`to_server`, with
//!    [`proto::ratelimit`]).
//! 4. [`grpc`]: the `WatchPort` stream (`InboundPolicyServer::watch`)
//!    writes it as one exactly-sized frame (`grpc-stream`).
//!
//! The steps call forward only. An outbound `Watch` takes the same road
//! through [`index::outbound`] → [`proto::outbound`] → [`grpc::outbound`].
//!
//! # Floors
//!
//! Each floor imports only the ones above it (`cargo xtask imports` checks):
//! - [`core`]: values and pure rules of policy (no Kubernetes, gRPC or
//!   proxy-API types) and the discovery traits;
//! - [`index`]: the inbound and outbound indexes, which read the policy
//!   kinds from Kubernetes objects (`from_resource` beside each kind) and
//!   publish on watch channels;
//! - [`proto`]: core values → proxy-API messages, pure;
//! - [`grpc`]: the tonic services and their streams;
//! - beside them: [`gateway`] (the Gateway API route watches, started and
//!   stopped as their CRDs come and go), [`webhook`] (the admission rules,
//!   the index's conversions served with the shared `admission` plumbing),
//!   [`status`] (the leader-elected route status writer);
//! - then [`metrics`], [`original_metrics`], [`admin`] (introspection on a
//!   localhost listener), [`args`] (flags, named as the original's) and
//!   [`runtime`] (flags → watches, servers, shutdown).

pub mod admin;
pub mod args;
pub mod core;
pub mod gateway;
pub mod grpc;
pub mod index;
pub mod metrics;
pub mod original_metrics;
pub mod proto;
pub mod runtime;
pub mod status;
pub mod webhook;
