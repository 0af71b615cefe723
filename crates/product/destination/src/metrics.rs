//! Prometheus metrics of the destination, named like the original's so
//! dashboards port.
//!
//! - Per filter group `endpoints_subscribers`, `endpoints_updates`,
//!   `endpoints_exists` and `endpoints_pods`: read from the shared index
//!   when scraped, by [`IndexCollector`]. The index holds no metric handle;
//!   dependencies run one way, metrics → index. Label values come from the
//!   index, never from requests alone ([`GroupLabels::of`]): a group of a
//!   Service that does not exist has no series, and a port the Service
//!   does not declare, a hostname no endpoint has or a node the index does
//!   not know is named by one placeholder, the groups sharing a label set
//!   adding up into one series. So what clients make up adds no series.
//! - The gRPC layer's `endpoints_coalesced_updates` (a slow stream skipped
//!   states), `get_streams` and `get_invalid_requests`: [`DestinationMetrics`].

use std::sync::Arc;

use parking_lot::RwLock;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType,
        counter::Counter,
        gauge::{ConstGauge, Gauge},
    },
    registry::Registry,
};

use crate::index::{EndpointsIndex, GroupStats};

/// Labels of one filter group's series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct GroupLabels {
    pub cluster: String,
    pub namespace: String,
    pub service: String,
    pub port: String,
    pub hostname: String,
    pub nodename: String,
}

/// The `port` of the groups of ports their Service does not declare.
pub const UNDECLARED_PORT: &str = "<undeclared>";
/// The `hostname` or `nodename` of the groups of hostnames or nodes the
/// index does not know.
pub const UNKNOWN: &str = "<unknown>";

impl GroupLabels {
    /// The labels of a group's series: `None` (no series) for a Service
    /// that does not exist; names the index does not hold collapse into
    /// [`UNDECLARED_PORT`] or [`UNKNOWN`].
    pub fn of(group: &GroupStats) -> Option<Self> {
        if !group.known.service {
            return None;
        }
        let known_or = |value: &str, known: bool| match value {
            "" => String::new(),
            v if known => v.to_string(),
            _ => UNKNOWN.to_string(),
        };
        Some(Self {
            cluster: "local".to_string(),
            namespace: group.service.namespace.clone(),
            service: group.service.name.clone(),
            port: if group.known.port {
                group.port.to_string()
            } else {
                UNDECLARED_PORT.to_string()
            },
            hostname: known_or(&group.key.hostname, group.known.hostname),
            nodename: known_or(&group.key.node_name, group.known.node),
        })
    }
}

/// The series of the groups sharing one label set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct GroupSeries {
    /// Summed over the groups.
    subscribers: usize,
    /// Summed over the groups.
    updates: u64,
    /// Any of the groups (they share a Service).
    exists: bool,
    /// The largest group's.
    endpoints: usize,
}

/// Every group's series, one per label set.
fn series(groups: &[GroupStats]) -> std::collections::BTreeMap<GroupLabels, GroupSeries> {
    let mut by_labels = std::collections::BTreeMap::<GroupLabels, GroupSeries>::new();
    for group in groups {
        let Some(labels) = GroupLabels::of(group) else {
            continue;
        };
        let s = by_labels.entry(labels).or_default();
        s.subscribers += group.subscribers;
        s.updates += group.updates;
        s.exists |= group.exists;
        s.endpoints = s.endpoints.max(group.endpoints);
    }
    by_labels
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
type GroupGauge = (&'static str, &'static str, fn(&GroupSeries) -> i64);

fn to_i64(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for IndexCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        // Copy out under the read lock; encode without it.
        let groups = self.index.read().group_stats();
        let series = series(&groups);
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
            for (labels, group) in &series {
                ConstGauge::new(value(group)).encode(family.encode_family(labels)?)?;
            }
        }
        // Both names are counts, declared `unknown`: OpenMetrics types a
        // counter's family by its name without `_total`, so a counter
        // family `endpoints_updates` (Meridian's `endpoints_updates_total`)
        // and the original's sample `endpoints_updates` would be two
        // families of one name (docs/metrics.md).
        for (name, help) in [
            (
                "endpoints_updates_total",
                "Changes published to a filter group (a count; the original's name is endpoints_updates)",
            ),
            (
                "endpoints_updates",
                "Changes published to a filter group, under Linkerd's name (equal to endpoints_updates_total)",
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Unknown)?;
            for (labels, group) in &series {
                ConstGauge::new(group.updates).encode(family.encode_family(labels)?)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_index::Index as _;

    use super::*;
    use crate::{
        core::FilterKey,
        index::tests::{index, pod, service, slice, svc_id},
    };

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encoded");
        text
    }

    fn with_collector(idx: EndpointsIndex) -> (Arc<RwLock<EndpointsIndex>>, Registry) {
        let index = Arc::new(RwLock::new(idx));
        let mut registry = Registry::default();
        registry.register_collector(Box::new(IndexCollector::new(index.clone())));
        (index, registry)
    }

    fn node(name: &str) -> FilterKey {
        FilterKey {
            enable_filtering: true,
            node_name: name.into(),
            ..FilterKey::default()
        }
    }

    #[test]
    fn group_series_are_read_from_the_index_when_scraped() {
        let mut idx = index();
        idx.apply(service("web", "10.96.0.1"));
        let (index, registry) = with_collector(idx);
        let web = svc_id("web");
        let rx = index
            .write()
            .subscribe(&web, 80, FilterKey::default())
            .expect("subscribed");
        let labels =
            r#"{cluster="local",namespace="ns",service="web",port="80",hostname="",nodename=""}"#;
        let text = scrape(&registry);
        for line in [
            format!("endpoints_subscribers{labels} 1"),
            format!("endpoints_exists{labels} 1"),
            format!("endpoints_pods{labels} 0"),
            format!("endpoints_updates_total{labels} 0"),
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
        }
        drop(rx);
        index.write().release(&web, 80, &FilterKey::default());
        assert!(
            !scrape(&registry).contains("service=\"web\""),
            "a dropped group has no series"
        );
    }

    #[test]
    fn names_only_requests_chose_name_no_series() {
        let mut idx = index();
        idx.apply(service("web", "10.96.0.1"));
        idx.apply(pod("web-0", "10.0.0.1"));
        idx.apply(slice("web-s", "web", &[("web-0", "10.0.0.1", true)]));
        let (index, registry) = with_collector(idx);
        let web = svc_id("web");
        let mut held = Vec::new();
        // A Service that does not exist: no series at all.
        held.push(
            index
                .write()
                .subscribe(&svc_id("absent"), 80, FilterKey::default()),
        );
        // Made-up ports, hostnames and nodes of one that does.
        for i in 0..50 {
            held.push(
                index
                    .write()
                    .subscribe(&web, 10_000 + i, FilterKey::default()),
            );
            let host = FilterKey {
                hostname: format!("host-{i}"),
                ..FilterKey::default()
            };
            held.push(index.write().subscribe(&web, 80, host));
            // Not grouped: the collector collapses even separate groups.
            held.push(
                index
                    .write()
                    .subscribe(&web, 80, node(&format!("made-up-{i}"))),
            );
        }
        // The pod's node is known.
        held.push(index.write().subscribe(&web, 80, node("node-1")));
        let text = scrape(&registry);
        assert!(!text.contains("service=\"absent\""), "{text}");
        let subscribers: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("endpoints_subscribers{"))
            .collect();
        let want = [
            (r#"port="80",hostname="",nodename="<unknown>""#, 50),
            (r#"port="80",hostname="",nodename="node-1""#, 1),
            (r#"port="80",hostname="<unknown>",nodename="""#, 50),
            (r#"port="<undeclared>",hostname="",nodename="""#, 50),
        ];
        assert_eq!(subscribers.len(), want.len(), "{subscribers:#?}");
        for (labels, n) in want {
            assert!(
                subscribers
                    .iter()
                    .any(|l| l.contains(labels) && l.ends_with(&format!(" {n}"))),
                "{labels} {n} in {subscribers:#?}"
            );
        }
        drop(held);
    }
}
