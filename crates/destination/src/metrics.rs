//! Prometheus metrics of the destination, named like the original's so
//! dashboards port: per filter group `endpoints_subscribers`,
//! `endpoints_updates`, `endpoints_exists` and `endpoints_pods`, plus
//! Meridian's `endpoints_coalesced_updates` (a slow stream skipped states).

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use crate::proto::snapshot::Snapshot;

/// Labels of one filter group's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct GroupLabels {
    pub cluster: String,
    pub namespace: String,
    pub service: String,
    pub port: String,
    pub hostname: String,
    pub nodename: String,
}

/// All destination metrics (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct DestinationMetrics {
    subscribers: Family<GroupLabels, Gauge>,
    updates: Family<GroupLabels, Counter>,
    exists: Family<GroupLabels, Gauge>,
    pods: Family<GroupLabels, Gauge>,
    coalesced: Counter,
    streams: Gauge,
    invalid_requests: Counter,
}

/// The series of one group.
#[derive(Clone, Debug)]
pub struct GroupMetrics {
    labels: GroupLabels,
    subscribers: Gauge,
    updates: Counter,
    exists: Gauge,
    pods: Gauge,
}

impl DestinationMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "endpoints_subscribers",
            "Streams subscribed to a filter group",
            m.subscribers.clone(),
        );
        registry.register(
            "endpoints_updates",
            "Changes published to a filter group",
            m.updates.clone(),
        );
        registry.register(
            "endpoints_exists",
            "1 if the group's Service exists",
            m.exists.clone(),
        );
        registry.register(
            "endpoints_pods",
            "Endpoints in the group's snapshot",
            m.pods.clone(),
        );
        registry.register(
            "endpoints_coalesced_updates",
            "Times a stream that could not keep up skipped intermediate states and was sent one diff to the newest",
            m.coalesced.clone(),
        );
        registry.register("get_streams", "Open Get streams", m.streams.clone());
        registry.register(
            "get_invalid_requests",
            "Get requests refused as InvalidArgument",
            m.invalid_requests.clone(),
        );
        m
    }

    pub fn group(&self, labels: GroupLabels) -> GroupMetrics {
        GroupMetrics {
            subscribers: self.subscribers.get_or_create(&labels).clone(),
            updates: self.updates.get_or_create(&labels).clone(),
            exists: self.exists.get_or_create(&labels).clone(),
            pods: self.pods.get_or_create(&labels).clone(),
            labels,
        }
    }

    /// Removes a dropped group's series.
    pub fn remove_group(&self, group: &GroupMetrics) {
        self.subscribers.remove(&group.labels);
        self.updates.remove(&group.labels);
        self.exists.remove(&group.labels);
        self.pods.remove(&group.labels);
    }

    pub fn coalesced(&self) {
        self.coalesced.inc();
    }

    pub fn stream_opened(&self) {
        self.streams.inc();
    }

    pub fn stream_closed(&self) {
        self.streams.dec();
    }

    pub fn invalid_request(&self) {
        self.invalid_requests.inc();
    }
}

impl GroupMetrics {
    pub fn set_subscribers(&self, n: usize) {
        self.subscribers.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn updated(&self) {
        self.updates.inc();
    }

    pub fn observe(&self, snapshot: &Snapshot) {
        self.exists.set(i64::from(snapshot.exists()));
        self.pods
            .set(i64::try_from(snapshot.len()).unwrap_or(i64::MAX));
    }
}
