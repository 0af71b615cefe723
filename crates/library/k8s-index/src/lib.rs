//! Kubernetes state as in-memory indexes, shared by the destination and the
//! policy controller.
//!
//! - [`index`]: the [`Index`] trait an index implements (apply / delete /
//!   reset), driven synchronously so unit tests can feed it plain objects.
//! - [`cache`]: [`ObjectCache`], a ready-made index keyed by object name.
//! - [`watch`]: runs a kube-runtime watcher (no polling) into an index,
//!   re-listing after outages so objects deleted meanwhile disappear, and
//!   skipping objects that fail to deserialize; [`backoff`]: how soon a
//!   failed watch is retried.
//! - [`initial_list`]: how a watch reads its initial list: streamed where
//!   the API server allows it, so no page of objects is held whole; paged
//!   where it refuses.
//! - [`metrics`]: cache size, events applied and watch restarts per kind.
//! - [`confirm`]: a lookup that missed its index, settled by a fact or
//!   checked with the API server within a per-kind request budget, so no
//!   answer depends on whether a watch has caught up yet;
//!   [`service_cidrs`]: the cluster's Service ranges, one such fact.
//! - [`resources`]: the watched kinds and their watcher configurations.
//! - [`partial`]: kinds decoded straight into the few fields a controller
//!   reads (typed partial objects).
//! - [`shared`]: one shared copy of each equal value an index stores for
//!   many objects.
//! - [`switch`]: watches that follow a client they are handed (a linked
//!   cluster's), restarted when it changes and emptied when it goes.

pub mod backoff;
pub mod cache;
pub mod confirm;
pub mod index;
pub mod initial_list;
mod known;
pub mod metrics;
pub mod original_names;
pub mod partial;
pub mod resources;
pub mod service_cidrs;
pub mod shared;
pub mod switch;
pub mod watch;

pub use backoff::{WatchBackoff, with_backoff};
pub use cache::ObjectCache;
pub use confirm::{Confirmation, MissConfirmer, Query};
pub use index::{Index, ObjectKey, Tee};
pub use initial_list::streamed_or_paged;
pub use metrics::IndexMetrics;
pub use service_cidrs::ServiceCidrs;
pub use watch::{SharedIndex, WatchStatus, WatchTask, describe, watch_into};
