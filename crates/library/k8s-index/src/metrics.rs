//! Per-kind index metrics: objects cached, events applied, watch restarts;
//! and each kind's waiters, the lookups that missed and wait for its watch
//! to apply an object the API server has ([`crate::confirm`]).

use std::{collections::HashMap, sync::Arc};

use parking_lot::Mutex;

use crate::confirm::KeyWaiters;

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::Registry,
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
    error: &'static str,
}

fn label(kind: &str) -> KindLabels {
    KindLabels {
        kind: kind.to_string(),
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct EventLabels {
    kind: String,
    event: &'static str,
}

/// Metrics of all indexes of a process (register once, share by clone).
#[derive(Clone, Debug)]
pub struct IndexMetrics {
    cache_size: Family<KindLabels, Gauge>,
    events: Family<EventLabels, Counter>,
    restarts: Family<KindLabels, Counter>,
    synced: Family<KindLabels, Gauge>,
    lag: Family<KindLabels, Histogram, fn() -> Histogram>,
    /// Watch failures per kind and variant (read under kubert's name only).
    errors: Family<ErrorLabels, Counter>,
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
    /// Seconds from an object's last write (`managedFields`) to the watch
    /// seeing it.
    pub(crate) lag: Histogram,
    kind: String,
    errors: Family<ErrorLabels, Counter>,
    /// The lookups waiting for this kind's watch ([`IndexMetrics::waiters`]).
    pub(crate) waiters: Arc<KeyWaiters>,
}

/// The variants of a watch failure (kube's `watcher::Error`).
pub const WATCH_ERRORS: [&str; 5] = [
    "InitialListFailed",
    "WatchStartFailed",
    "WatchError",
    "WatchFailed",
    "NoResourceVersion",
];

impl KindMetrics {
    /// Counts a watch failure of this kind (`error`: its variant).
    pub(crate) fn error(&self, error: &'static str) {
        self.errors
            .get_or_create(&ErrorLabels {
                kind: self.kind.clone(),
                error,
            })
            .inc();
    }
}

/// The original's informer-lag buckets (0.5 s to 1000 s).
pub const LAG_BUCKETS: [f64; 10] = [0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1000.0];

fn lag_histogram() -> Histogram {
    Histogram::new(LAG_BUCKETS)
}

impl Default for IndexMetrics {
    fn default() -> Self {
        Self {
            cache_size: Family::default(),
            events: Family::default(),
            restarts: Family::default(),
            synced: Family::default(),
            lag: Family::new_with_constructor(lag_histogram),
            errors: Family::default(),
            waiters: Arc::default(),
        }
    }
}

impl IndexMetrics {
    /// Objects held by the index of `kind` now.
    pub fn cache_size(&self, kind: &str) -> i64 {
        self.cache_size.get_or_create(&label(kind)).get()
    }

    /// Watch events of `kind` applied so far (`event`: apply, delete,
    /// reset, invalid).
    pub fn events(&self, kind: &str, event: &'static str) -> u64 {
        self.events
            .get_or_create(&EventLabels {
                kind: kind.to_string(),
                event,
            })
            .get()
    }

    /// Watch failures of `kind` so far.
    pub fn restarts(&self, kind: &str) -> u64 {
        self.restarts.get_or_create(&label(kind)).get()
    }

    /// Watch failures of `kind` so far, per variant (`WatchFailed`, …).
    pub fn errors(&self, kind: &str) -> Vec<(&'static str, u64)> {
        let mut out = Vec::new();
        for error in WATCH_ERRORS {
            let n = self
                .errors
                .get(&ErrorLabels {
                    kind: kind.to_string(),
                    error,
                })
                .map(|c| c.get());
            if let Some(n) = n {
                out.push((error, n));
            }
        }
        out
    }

    /// The informer-lag histogram of `kind`.
    pub fn lag(&self, kind: &str) -> Histogram {
        self.lag.get_or_create(&label(kind)).clone()
    }

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
            "informer_lag_seconds",
            "Seconds from an object's last write (its newest managedFields time) to the watch seeing the change, per kind; the initial list is not counted",
            metrics.lag.clone(),
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
            lag: self.lag.get_or_create(&k).clone(),
            kind: kind.to_string(),
            errors: self.errors.clone(),
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
