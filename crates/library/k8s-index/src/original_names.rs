//! The index metrics under the names Linkerd 2.20 exports them, read from
//! [`IndexMetrics`] when scraped (so they never disagree with Meridian's
//! own `index_*`):
//!
//! - the Go controller's `<kind>_cache_size{cluster}` (its informers'
//!   object counts) and `<kind>_informer_lag_seconds` (from an object's
//!   last write to the informer seeing it);
//! - kubert's `kube_watch_{applies,deletes,restarts,errors}_total{kind,
//!   group,version}` of the policy controller.
//!
//! A binary lists which of its watches stands for which original series;
//! a series whose resource Meridian does not watch is still declared, with
//! the value that is true of it (0: an empty cache, no lag observed) and a
//! HELP text saying why.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge, histogram::Histogram},
};

use crate::metrics::{IndexMetrics, LAG_BUCKETS};

/// Where an original series' value comes from.
#[derive(Clone, Copy, Debug)]
pub enum Source {
    /// The Meridian watch of this kind (`index_*{kind}`).
    Kind(&'static str),
    /// Meridian has no such watch; the text says why (ends the HELP text).
    Absent(&'static str),
}

/// One original series family.
#[derive(Clone, Copy, Debug)]
pub struct Original {
    /// The original's name without its suffix (`pod`, `endpointslices`).
    pub name: &'static str,
    pub source: Source,
}

/// One watched resource as kubert labels it.
#[derive(Clone, Copy, Debug)]
pub struct KubertWatch {
    /// The Meridian watch.
    pub kind: &'static str,
    /// kubert's `kind`, `group` (empty for the core group) and `version`.
    pub labels: [&'static str; 3],
}

/// One of kubert's per-watch counters: name, help, and how to read it.
type KubertCounter = (&'static str, &'static str, fn(&IndexMetrics, &str) -> u64);

/// The collector of the original names (register it at the top of the
/// registry: the names are unprefixed).
#[derive(Clone, Debug)]
pub struct OriginalIndexSeries {
    metrics: IndexMetrics,
    /// The `cluster` label of the `_cache_size` series.
    cluster: &'static str,
    caches: Vec<Original>,
    lags: Vec<Original>,
    kubert: Vec<KubertWatch>,
}

impl OriginalIndexSeries {
    /// The original series of `metrics`'s watches: none until added.
    pub fn new(metrics: &IndexMetrics, cluster: &'static str) -> Self {
        Self {
            metrics: metrics.clone(),
            cluster,
            caches: Vec::new(),
            lags: Vec::new(),
            kubert: Vec::new(),
        }
    }

    /// Adds the Go controller's `<name>_cache_size` series.
    pub fn caches(mut self, caches: &[Original]) -> Self {
        self.caches.extend_from_slice(caches);
        self
    }

    /// Adds the Go controller's `<name>_informer_lag_seconds` series.
    pub fn lags(mut self, lags: &[Original]) -> Self {
        self.lags.extend_from_slice(lags);
        self
    }

    /// Adds kubert's `kube_watch_*` series of these watches.
    pub fn kubert(mut self, watches: &[KubertWatch]) -> Self {
        self.kubert.extend_from_slice(watches);
        self
    }

    fn encode_caches(&self, encoder: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let labels = [("cluster", self.cluster)];
        for cache in &self.caches {
            let name = format!("{}_cache_size", cache.name);
            let (help, value) = match cache.source {
                Source::Kind(kind) => (
                    format!(
                        "Objects the {kind} watch holds (Meridian: index_cache_size{{kind=\"{kind}\"}})"
                    ),
                    self.metrics.cache_size(kind),
                ),
                Source::Absent(why) => (format!("Always 0: {why}"), 0),
            };
            let mut family = encoder.encode_descriptor(&name, &help, None, MetricType::Gauge)?;
            ConstGauge::new(value).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    fn encode_lags(&self, encoder: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        for lag in &self.lags {
            let name = format!("{}_informer_lag_seconds", lag.name);
            let (help, histogram) = match lag.source {
                Source::Kind(kind) => (
                    format!(
                        "Seconds from a {kind} object's newest managedFields time to the watch delivering the change (Meridian: index_informer_lag_seconds{{kind=\"{kind}\"}})"
                    ),
                    self.metrics.lag(kind),
                ),
                Source::Absent(why) => (
                    format!("Never observed: {why}"),
                    Histogram::new(LAG_BUCKETS),
                ),
            };
            histogram.encode(encoder.encode_descriptor(
                &name,
                &help,
                None,
                MetricType::Histogram,
            )?)?;
        }
        Ok(())
    }

    fn encode_kubert(&self, encoder: &mut DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        if self.kubert.is_empty() {
            return Ok(());
        }
        let counters: [KubertCounter; 3] = [
            (
                "kube_watch_applies",
                "Objects created or changed, as the watch delivered them (Meridian: index_events_total{event=\"apply\"})",
                |m, k| m.events(k, "apply"),
            ),
            (
                "kube_watch_deletes",
                "Objects deleted, as the watch delivered them (Meridian: index_events_total{event=\"delete\"})",
                |m, k| m.events(k, "delete"),
            ),
            (
                "kube_watch_restarts",
                "Completed (re)lists of the watch (Meridian: index_events_total{event=\"reset\"})",
                |m, k| m.events(k, "reset"),
            ),
        ];
        for (name, help, value) in counters {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
            for watch in &self.kubert {
                let [kind, group, version] = watch.labels;
                let labels = [("kind", kind), ("group", group), ("version", version)];
                ConstCounter::new(value(&self.metrics, watch.kind))
                    .encode(family.encode_family(&labels)?)?;
            }
        }
        let mut family = encoder.encode_descriptor(
            "kube_watch_errors",
            "Watch failures by kind of failure (Meridian: index_watch_restarts_total)",
            None,
            MetricType::Counter,
        )?;
        for watch in &self.kubert {
            let [kind, group, version] = watch.labels;
            for (error, n) in self.metrics.errors(watch.kind) {
                let labels = [
                    ("kind", kind),
                    ("group", group),
                    ("version", version),
                    ("error", error),
                ];
                ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}

impl Collector for OriginalIndexSeries {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        self.encode_caches(&mut encoder)?;
        self.encode_lags(&mut encoder)?;
        self.encode_kubert(&mut encoder)
    }
}

#[cfg(test)]
mod tests {
    use prometheus_client::registry::Registry;

    use super::*;

    #[test]
    fn original_names_read_meridians_watches() {
        let mut registry = Registry::default();
        let metrics = IndexMetrics::register(&mut registry);
        let pods = metrics.kind("pods");
        pods.cache_size.set(3);
        pods.lag.observe(0.7);
        pods.applied.inc();
        pods.error("WatchFailed");
        registry.register_collector(Box::new(
            OriginalIndexSeries::new(&metrics, "local")
                .caches(&[
                    Original {
                        name: "pod",
                        source: Source::Kind("pods"),
                    },
                    Original {
                        name: "endpoints",
                        source: Source::Absent("Endpoints are not watched"),
                    },
                ])
                .lags(&[Original {
                    name: "pods",
                    source: Source::Kind("pods"),
                }])
                .kubert(&[KubertWatch {
                    kind: "pods",
                    labels: ["Pod", "", "v1"],
                }]),
        ));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
        for line in [
            "pod_cache_size{cluster=\"local\"} 3\n",
            "# HELP endpoints_cache_size Always 0: Endpoints are not watched\n",
            "endpoints_cache_size{cluster=\"local\"} 0\n",
            "pods_informer_lag_seconds_bucket{le=\"1.0\"} 1\n",
            "pods_informer_lag_seconds_count 1\n",
            "kube_watch_applies_total{kind=\"Pod\",group=\"\",version=\"v1\"} 1\n",
            "kube_watch_errors_total{kind=\"Pod\",group=\"\",version=\"v1\",error=\"WatchFailed\"} 1\n",
            "index_informer_lag_seconds_count{kind=\"pods\"} 1\n",
        ] {
            assert!(text.contains(line), "{line:?} not in\n{text}");
        }
    }
}
