//! The policy controller's end-to-end tests: the `policy-controller`
//! binary runs as a process (the status writer's conflict test runs the
//! writer in-process) against one real local control plane shared by every
//! test of this binary; objects are applied with kubectl and generated
//! tonic clients read the inbound and outbound APIs over real sockets.
//! Each test works in a namespace of its own. (The Gateway API CRDs'
//! comings and goings need a control plane without them:
//! `tests/gateway_crds.rs` is a binary of its own.)
//!
//! - `inbound`: `WatchPort` follows Servers and authorizations (`routes`,
//!   `external_workloads`), bad requests' codes, the route status writer,
//!   `kubectl apply` of invalid policy objects (`admission`), `/streams`
//!   and `/audit` (`introspection`), one file each;
//! - `outbound`: `Watch` follows Services and routes (HTTP, gRPC, TCP,
//!   TLS); addresses and status codes; the webhook's decisions; SIGTERM;
//! - `egress_ratelimit`: HTTPLocalRateLimitPolicies and EgressNetworks;
//! - `gateway_webhook`: what `kubectl apply` prints for the Gateway API kinds;
//! - `lag`: answers right after a create never depend on watch lag;
//! - `bounds`: state a client can grow is bounded;
//! - `overload`: stream limits and an unreachable API server;
//! - `status_conflict`: a stale status patch keeps another controller's entry;
//! - `workload_ports`: the destination's feed on its own listener;
//! - `deploy`: started with `deploy/`'s exact arguments and RBAC.

mod bounds;
mod deploy;
mod egress_ratelimit;
mod gateway_webhook;
mod inbound;
mod lag;
mod outbound;
mod overload;
mod status_conflict;
mod support;
mod workload_ports;
