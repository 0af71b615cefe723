//! Process plumbing shared by Meridian's binaries.
//!
//! Each binary (`destination`, `sp-validator`, `policy-controller`) parses its
//! own flags, then uses these pieces so that every process behaves the same
//! way for an operator: the same log flags and formats, the same admin
//! endpoints (`/live`, `/ready`, `/metrics`, plus `/ping` for the original's
//! probes), the same readiness semantics and the same graceful shutdown.
//! Replicas that write elect one leader through a Lease ([`lease`]).
//! Address flags all read the same forms ([`addr`]), and binaries that the
//! original's Helm chart starts read its Go-style flags ([`goflags`]).
//! Every binary exports the standard process metrics ([`process_metrics`])
//! and says which build it is ([`build_info`]).
//! With the `jemalloc` feature, `jemalloc` returns the memory jemalloc
//! holds freed to the system.

pub mod addr;
pub mod admin;
pub mod build_info;
pub mod coalesce;
pub mod goflags;
pub mod http_client_metrics;
#[cfg(feature = "jemalloc")]
pub mod jemalloc;
pub mod kube_client;
pub mod lease;
pub mod logging;
pub mod peers;
pub mod periodic;
pub mod process_metrics;
pub mod profiling;
pub mod readiness;
pub mod shutdown;
pub mod span_export;

pub use addr::parse_listen_addr;
pub use admin::AdminServer;
pub use goflags::{GoFlag, GoFlagSet, Kind as GoFlagKind, Meaning as GoFlagMeaning};
pub use kube_client::KubeClientArgs;
pub use logging::{LogArgs, LogDialect, LogFormat};
pub use peers::ConnectionMetrics;
pub use readiness::{DegradedHandle, InfoHandle, Readiness, ReadyHandle};
pub use shutdown::Shutdown;
