//! Per-kind index metrics: objects cached, events applied, watch restarts;
//! and the process-wide signal that an event was applied, which lookups that
//! missed wait on ([`crate::confirm`]).

use tokio::sync::watch;

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
#[derive(Clone, Debug)]
pub struct IndexMetrics {
    cache_size: Family<KindLabels, Gauge>,
    events: Family<EventLabels, Counter>,
    restarts: Family<KindLabels, Counter>,
    synced: Family<KindLabels, Gauge>,
    /// Events applied by every watch of the process, as a `watch` channel
    /// (the count itself is `index_events_total`): a lookup that the API
    /// server says should have found something waits on it for the index
    /// to catch up ([`crate::confirm::MissConfirmer`]). Shared by clones.
    applied: watch::Sender<u64>,
}

impl Default for IndexMetrics {
    fn default() -> Self {
        Self {
            cache_size: Family::default(),
            events: Family::default(),
            restarts: Family::default(),
            synced: Family::default(),
            applied: watch::Sender::new(0),
        }
    }
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
    /// The process-wide applied-events signal ([`IndexMetrics::applied_events`]).
    pub(crate) applied_signal: watch::Sender<u64>,
}

impl KindMetrics {
    /// Wakes whoever waits for the index to change (after an event was
    /// applied, under no lock).
    pub(crate) fn signal_applied(&self) {
        self.applied_signal.send_modify(|n| *n = n.wrapping_add(1));
    }
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
            applied_signal: self.applied.clone(),
        }
    }

    /// A receiver that changes whenever any watch of the process applied an
    /// event (an apply, a delete or a re-list) to its index.
    pub fn applied_events(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }
}
