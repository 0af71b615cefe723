//! Prometheus metrics of the destination, named like the original's so
//! dashboards port.
//!
//! - Per filter group `endpoints_subscribers`, `endpoints_updates`,
//!   `endpoints_exists` and `endpoints_pods`: read from the shared index
//!   when scraped, by [`IndexCollector`]. The index holds no metric handle;
//!   dependencies run one way, metrics → index.
//! - The gRPC layer's `endpoints_coalesced_updates` (a slow stream skipped
//!   states), `get_streams` and `get_invalid_requests`: [`DestinationMetrics`].

use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::{ConstCounter, Counter},
        gauge::{ConstGauge, Gauge},
    },
    registry::Registry,
};

use crate::index::{EndpointsIndex, GroupStats};

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

impl GroupLabels {
    fn of(group: &GroupStats) -> Self {
        Self {
            cluster: "local".to_string(),
            namespace: group.service.namespace.clone(),
            service: group.service.name.clone(),
            port: group.port.to_string(),
            hostname: group.key.hostname.clone(),
            nodename: group.key.node_name.clone(),
        }
    }
}

/// The gRPC layer's metrics (cheap to clone).
#[derive(Clone, Debug, Default)]
pub struct DestinationMetrics {
    coalesced: Counter,
    streams: Gauge,
    invalid_requests: Counter,
}

impl DestinationMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
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

/// Reads the filter groups of the index on every scrape.
pub struct IndexCollector {
    index: Arc<RwLock<EndpointsIndex>>,
}

impl std::fmt::Debug for IndexCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexCollector").finish_non_exhaustive()
    }
}

impl IndexCollector {
    /// A collector over the shared index (register it with
    /// `Registry::register_collector`).
    pub fn new(index: Arc<RwLock<EndpointsIndex>>) -> Self {
        Self { index }
    }
}

/// A per-group gauge: name, help, and how to read it.
type GroupGauge = (&'static str, &'static str, fn(&GroupStats) -> i64);

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for IndexCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // Copy out under the read lock; encode without it.
        let groups: Vec<(GroupLabels, GroupStats)> = self
            .index
            .read()
            .endpoint_publishers()
            .groups()
            .into_iter()
            .map(|g| (GroupLabels::of(&g), g))
            .collect();
        let gauges: [GroupGauge; 3] = [
            (
                "endpoints_subscribers",
                "Streams subscribed to a filter group",
                |g| to_i64(g.subscribers),
            ),
            ("endpoints_exists", "1 if the group's Service exists", |g| {
                i64::from(g.exists)
            }),
            ("endpoints_pods", "Endpoints in the group's snapshot", |g| {
                to_i64(g.endpoints)
            }),
        ];
        for (name, help, value) in gauges {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (labels, group) in &groups {
                ConstGauge::new(value(group)).encode(family.encode_family(labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "endpoints_updates",
            "Changes published to a filter group",
            None,
            MetricType::Counter,
        )?;
        for (labels, group) in &groups {
            ConstCounter::new(group.updates).encode(family.encode_family(labels)?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{config::TranslatorConfig, core::FilterKey, core::ServiceId};

    #[test]
    fn group_series_are_read_from_the_index_when_scraped() {
        let index = Arc::new(RwLock::new(EndpointsIndex::new(Arc::new(
            TranslatorConfig::default(),
        ))));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(IndexCollector::new(index.clone())));
        let web = ServiceId {
            namespace: "ns".into(),
            name: "web".into(),
        };
        let rx = index
            .write()
            .subscribe(&web, 80, FilterKey::default())
            .expect("subscribed");
        let scrape = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
            text
        };
        let labels =
            r#"{cluster="local",namespace="ns",service="web",port="80",hostname="",nodename=""}"#;
        let text = scrape();
        for line in [
            format!("endpoints_subscribers{labels} 1"),
            format!("endpoints_exists{labels} 0"),
            format!("endpoints_pods{labels} 0"),
            format!("endpoints_updates_total{labels} 0"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        drop(rx);
        index.write().release(&web, 80, &FilterKey::default());
        assert!(
            !scrape().contains("service=\"web\""),
            "a dropped group has no series"
        );
    }
}
