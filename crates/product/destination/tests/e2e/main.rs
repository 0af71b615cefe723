//! The destination's end-to-end tests: the `destination` binary (and, for
//! the policy link, the `policy-controller`) run as processes against one
//! real local control plane shared by every test of this binary, and
//! generated tonic clients read their streams over real sockets.
//!
//! - `get`: `Destination.Get` (EndpointSlices made by
//!   kube-controller-manager);
//! - `profile`: `Destination.GetProfile`;
//! - `lag`: answers right after a create, and before it, never depend on
//!   whether a watch has caught up;
//! - `policy_link`: Server-derived opaque ports from the policy controller;
//! - `external_workloads`: ExternalWorkload endpoints and profiles;
//! - `deploy`: started with `deploy/`'s exact arguments and RBAC;
//! - `explain`: `meridian-cli explain`, one broken axis at a time;
//! - `compare`: `meridian-cli compare` between two deployments (`planes`:
//!   started with `deploy/`'s or `deploy/shadow`'s arguments);
//! - `shadow`: `deploy/shadow` takes no Lease and writes nothing;
//! - `introspect`: the admin port's streams, targets and audit;
//! - `multicluster`: remote discovery and federated Services over a second
//!   control plane;
//! - `overload`: stream limits, bad peers, denied and unreachable API servers;
//! - `external_workload_slices`: the leader-elected EndpointSlice writer for
//!   Services selecting ExternalWorkloads;
//! - `trace_export`: `-trace-collector`'s spans at a local OTLP receiver.

mod common;
mod compare;
mod deploy;
mod explain;
mod external_workload_slices;
mod external_workloads;
mod get;
mod introspect;
mod lag;
mod multicluster;
mod overload;
mod planes;
mod policy_link;
mod profile;
mod shadow;
mod trace_export;
