//! Meridian's policy controller: evaluates Server, ServerAuthorization,
//! AuthorizationPolicy, MeshTLSAuthentication, NetworkAuthentication and
//! route resources and serves the proxies' inbound and outbound policy APIs.
//!
//! # One Server change, one file per step
//!
//! 1. [`index`]: the watch (`k8s-index`) hands the Server to the
//!    `Indexed` impl of the one [`index::Index`], which converts it
//!    ([`k8s::server`]: the port, the workload selector with
//!    [`k8s::selector`], the protocol) and stores it among its namespace's
//!    policy resources; a changed Server touches its namespace.
//! 2. [`index::reindex`]: the namespace's workloads are recomputed in one
//!    pass: the Servers selecting each port (the oldest wins a contested
//!    port), each selected port's `InboundServer` built with its
//!    authorizations (resolved with [`index::authentications`]), routes
//!    ([`index::gateway_routes`]) and rate limit ([`index::ratelimit`]),
//!    every other known port its workload's default server; each port
//!    publishes only a real change on its `watch` channel
//!    (`index::port_servers`).
//! 3. [`grpc`]: every `WatchPort` stream of the port wakes and converts
//!    the new server ([`proto::inbound`], with [`proto::ratelimit`]) into
//!    the proxy API's `Server`, written as one exactly-sized frame
//!    (`grpc-stream`).
//!
//! The three files of the walk call forward only; the helpers in
//! parentheses are pure (or storage) calls that return to the step that
//! made them. The outbound API takes the same shape: [`k8s::outbound`] →
//! [`index::outbound`] → [`proto::outbound`] → [`grpc::outbound`].
//!
//! # Floors
//!
//! Each floor imports only the ones above it (`cargo xtask imports`
//! checks it):
//! - [`core`]: values and pure rules (no Kubernetes, gRPC or proxy-API
//!   types), and the discovery traits the gRPC layer is written against;
//! - [`k8s`]: Kubernetes objects → core values (the only reader of
//!   Kubernetes fields), one file per kind;
//! - [`index`]: the inbound and outbound indexes, publishing each
//!   workload port's server and each Service port's (or egress address')
//!   policy on a watch channel;
//! - [`proto`]: core values → proxy-API messages;
//! - [`metrics`]: index, gRPC and status-writer metrics (index series read
//!   at scrape time);
//! - [`grpc`]: the thin tonic layer (`InboundServerPolicies`,
//!   `OutboundPolicies`, the destination's `WorkloadPorts` feed);
//! - [`gateway`]: the Gateway API route watches, started and stopped as
//!   their CRDs come and go;
//! - [`status`]: the leader-elected route and policy status writer;
//! - [`webhook`]: the admission rules of the policy kinds (the conversions
//!   of [`k8s`]), served with the shared `admission` plumbing;
//! - [`admin`]: introspection on a localhost listener (open streams, the
//!   consistency audit of what they were sent);
//! - [`args`]: command-line flags (names and defaults follow the original);
//! - [`runtime`]: wires the flags to the watches, the gRPC, workload-ports,
//!   admin and introspection servers, and shutdown.

pub mod admin;
pub mod args;
pub mod core;
pub mod gateway;
pub mod grpc;
pub mod index;
pub mod k8s;
pub mod metrics;
pub mod original_metrics;
pub mod proto;
pub mod runtime;
pub mod status;
pub mod webhook;
