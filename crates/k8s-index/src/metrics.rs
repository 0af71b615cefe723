//! Per-kind index metrics: objects cached, events applied, watch restarts;
//! and each kind's waiters, the lookups that missed and wait for its watch
//! to apply an object the API server has ([`crate::confirm`]).

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;

use crate::confirm::KeyWaiters;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    kind: String,
    event: &'static str,
}

/// Metrics of all indexes of a process (register once, share by clone).
#[derive(Clone, Debug, Default)]
pub struct IndexMetrics {
    cache_size: Family<KindLabels, Gauge>,
    events: Family<EventLabels, Counter>,
    restarts: Family<KindLabels, Counter>,
    synced: Family<KindLabels, Gauge>,
    /// Per kind, the lookups waiting for its watch to apply an object the
    /// API server has ([`crate::confirm::MissConfirmer`]), woken by that
    /// object's events only. Shared by clones.
    waiters: Arc<Mutex<HashMap<String, Arc<KeyWaiters>>>>,
}

/// The metrics of one kind.
#[derive(Clone, Debug)]
pub struct KindMetrics {
    pub(crate) cache_size: Gauge,
    pub(crate) applied: Counter,
    pub(crate) deleted: Counter,
    pub(crate) resets: Counter,
    pub(crate) invalid: Counter,
    pub(crate) restarts: Counter,
    pub(crate) synced: Gauge,
    /// The lookups waiting for this kind's watch ([`IndexMetrics::waiters`]).
    pub(crate) waiters: Arc<KeyWaiters>,
}

impl IndexMetrics {
    /// Registers the families under `registry` (names prefixed `index_`).
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let sub = registry.sub_registry_with_prefix("index");
        sub.register(
            "cache_size",
            "Objects currently held by the index, per kind",
            metrics.cache_size.clone(),
        );
        sub.register(
            "events",
            "Watch events applied to the index, per kind and event (apply, delete, reset, invalid)",
            metrics.events.clone(),
        );
        sub.register(
            "watch_restarts",
            "Watch failures after which the watch was restarted (with backoff and a re-list)",
            metrics.restarts.clone(),
        );
        sub.register(
            "synced",
            "1 once the kind's initial list has been applied",
            metrics.synced.clone(),
        );
        metrics
    }

    /// The metrics of `kind` (e.g. `pods`).
    pub fn kind(&self, kind: &str) -> KindMetrics {
        let k = KindLabels {
            kind: kind.to_string(),
        };
        let event = |event| {
            self.events
                .get_or_create(&EventLabels {
                    kind: kind.to_string(),
                    event,
                })
                .clone()
        };
        KindMetrics {
            cache_size: self.cache_size.get_or_create(&k).clone(),
            applied: event("apply"),
            deleted: event("delete"),
            resets: event("reset"),
            invalid: event("invalid"),
            restarts: self.restarts.get_or_create(&k).clone(),
            synced: self.synced.get_or_create(&k).clone(),
            waiters: self.waiters(kind),
        }
    }

    /// The lookups waiting for the watch of `kind` to apply some object:
    /// the watch wakes them ([`KeyWaiters::wake`]), the confirmer registers
    /// them.
    pub fn waiters(&self, kind: &str) -> Arc<KeyWaiters> {
        self.waiters
            .lock()
            .entry(kind.to_string())
            .or_default()
            .clone()
    }
}
