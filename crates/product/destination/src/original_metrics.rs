//! The Go destination's series that Meridian's own names do not already
//! carry, under Linkerd 2.20's names, types and labels (docs/metrics.md):
//!
//! - `profile_subscribers` / `profile_updates{namespace,profile}`,
//!   `service_subscribers{namespace,name}` and `workload_subscribers` /
//!   `workload_updates`: read from the index's `GetProfile` publishers
//!   when scraped. Label values come from the index: a publisher of a
//!   Service the index does not hold has no series (what clients ask for
//!   adds none), one of an address counts as a workload.
//! - the update queues' `*_updates_queue_overflow`: declared, never
//!   incremented: Meridian has no per-stream update queue to overflow (a
//!   stream that falls behind skips to the newest state,
//!   `endpoints_coalesced_updates_total`).
//! - `<kind>_cache_size{cluster}` and `<kind>_informer_lag_seconds` of the
//!   watches ([`k8s_index::original_names`]).
//!
//! The original's counters without `_total` are declared `unknown`: an
//! OpenMetrics counter's samples end in `_total`, and the name must stay
//! the one dashboards query.

use std::{collections::BTreeMap, sync::Arc};

use k8s_index::{
    IndexMetrics,
    original_names::{Original, OriginalIndexSeries, Source},
};
use parking_lot::RwLock;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
    registry::Registry,
};

use crate::index::{EndpointsIndex, ProfileKey};

const NO_ENDPOINTS: &str = "Meridian reads EndpointSlices only; it keeps no Endpoints cache";
const NO_SERVERS: &str = "the destination keeps no Server cache: the policy controller reads Servers and sends the ports they make opaque over meridian.policy.v1.WorkloadPorts";

/// The watches of the destination under the original's informer names.
const CACHES: &[Original] = &[
    Original {
        name: "endpoints",
        source: Source::Absent(NO_ENDPOINTS),
    },
    Original {
        name: "endpointslices",
        source: Source::Kind("endpointslices"),
    },
    Original {
        name: "externalworkload",
        source: Source::Kind("externalworkloads"),
    },
    Original {
        name: "job",
        source: Source::Kind("jobs"),
    },
    Original {
        name: "pod",
        source: Source::Kind("pods"),
    },
    Original {
        name: "serviceprofile",
        source: Source::Kind("serviceprofiles"),
    },
    Original {
        name: "server",
        source: Source::Absent(NO_SERVERS),
    },
    Original {
        name: "service",
        source: Source::Kind("services"),
    },
    Original {
        name: "node",
        source: Source::Kind("nodes"),
    },
    Original {
        name: "replicaset",
        source: Source::Kind("replicasets"),
    },
];

/// The informer-lag histograms of the destination.
const LAGS: &[Original] = &[
    Original {
        name: "endpoints",
        source: Source::Absent(NO_ENDPOINTS),
    },
    Original {
        name: "endpointslices",
        source: Source::Kind("endpointslices"),
    },
    Original {
        name: "services",
        source: Source::Kind("services"),
    },
    Original {
        name: "servers",
        source: Source::Absent(NO_SERVERS),
    },
    Original {
        name: "pods",
        source: Source::Kind("pods"),
    },
    Original {
        name: "externalworkload",
        source: Source::Kind("externalworkloads"),
    },
    Original {
        name: "serviceprofiles",
        source: Source::Kind("serviceprofiles"),
    },
];

/// Registers the original's names at the top of `registry`.
pub fn register(
    registry: &mut Registry,
    index: Arc<RwLock<EndpointsIndex>>,
    index_metrics: &IndexMetrics,
) {
    registry.register_collector(Box::new(
        OriginalIndexSeries::new(index_metrics, "local")
            .caches(CACHES)
            .lags(LAGS),
    ));
    registry.register_collector(Box::new(ProfileCollector { index }));
}

/// Reads the `GetProfile` publishers when scraped.
struct ProfileCollector {
    index: Arc<RwLock<EndpointsIndex>>,
}

impl std::fmt::Debug for ProfileCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProfileCollector").finish_non_exhaustive()
    }
}

/// Streams and published changes summed over some publishers.
#[derive(Clone, Copy, Debug, Default)]
struct Sums {
    subscribers: usize,
    updates: u64,
}

impl Sums {
    fn add(&mut self, subscribers: usize, updates: u64) {
        self.subscribers += subscribers;
        self.updates += updates;
    }
}

/// The publishers' sums by profile (namespace, fully qualified name), by
/// Service (namespace, name), and over the workloads.
type Grouped = (
    BTreeMap<(String, String), Sums>,
    BTreeMap<(String, String), Sums>,
    Sums,
);

fn grouped(index: &RwLock<EndpointsIndex>) -> Grouped {
    let stats = index.read().profile_stats();
    let (mut profiles, mut services, mut workloads) =
        (BTreeMap::new(), BTreeMap::<_, Sums>::new(), Sums::default());
    for (stat, known) in stats {
        match &stat.key {
            ProfileKey::Service { target, .. } if known => {
                let ns = target.service.namespace.clone();
                profiles
                    .entry((ns.clone(), target.fqn.clone()))
                    .or_insert_with(Sums::default)
                    .add(stat.subscribers, stat.version);
                services
                    .entry((ns, target.service.name.clone()))
                    .or_default()
                    .add(stat.subscribers, stat.version);
            }
            ProfileKey::Service { .. } => {}
            ProfileKey::Endpoint(_) => workloads.add(stat.subscribers, stat.version),
        }
    }
    (profiles, services, workloads)
}

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Declares a family of the original's that Meridian never increments.
fn zero_family(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
) -> Result<(), std::fmt::Error> {
    encoder.encode_descriptor(name, help, None, MetricType::Unknown)?;
    Ok(())
}

impl Collector for ProfileCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let (profiles, services, workloads) = grouped(&self.index);
        let mut family = encoder.encode_descriptor(
            "profile_subscribers",
            "Open GetProfile streams following a Service port's profile (Services the index holds)",
            None,
            MetricType::Gauge,
        )?;
        for ((namespace, profile), sums) in &profiles {
            let labels = [
                ("namespace", namespace.as_str()),
                ("profile", profile.as_str()),
            ];
            ConstGauge::new(gauge(sums.subscribers)).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "profile_updates",
            "Profile changes published to those streams (a count; untyped so the name keeps no _total)",
            None,
            MetricType::Unknown,
        )?;
        for ((namespace, profile), sums) in &profiles {
            let labels = [
                ("namespace", namespace.as_str()),
                ("profile", profile.as_str()),
            ];
            ConstGauge::new(sums.updates).encode(family.encode_family(&labels)?)?;
        }
        let mut family = encoder.encode_descriptor(
            "service_subscribers",
            "Open GetProfile streams following one of the Service's ports",
            None,
            MetricType::Gauge,
        )?;
        for ((namespace, name), sums) in &services {
            let labels = [("namespace", namespace.as_str()), ("name", name.as_str())];
            ConstGauge::new(gauge(sums.subscribers)).encode(family.encode_family(&labels)?)?;
        }
        ConstGauge::new(gauge(workloads.subscribers)).encode(encoder.encode_descriptor(
            "workload_subscribers",
            "Open GetProfile streams following a single address (pod, ExternalWorkload or unknown IP)",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(workloads.updates).encode(encoder.encode_descriptor(
            "workload_updates",
            "Profile changes published to streams of single addresses (a count; untyped so the name keeps no _total)",
            None,
            MetricType::Unknown,
        )?)?;
        zero_family(
            &mut encoder,
            "endpoint_updates_queue_overflow",
            "Always 0: a Get stream has no update queue to overflow; one that falls behind skips to the newest state (endpoints_coalesced_updates_total)",
        )?;
        zero_family(
            &mut encoder,
            "profile_updates_queue_overflow",
            "Always 0: a GetProfile stream has no update queue to overflow; it is sent the newest profile",
        )?;
        ConstGauge::new(0).encode(encoder.encode_descriptor(
            "endpoint_profile_updates_queue_overflow",
            "Always 0: a GetProfile stream has no update queue to overflow; it is sent the newest profile",
            None,
            MetricType::Unknown,
        )?)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use k8s_index::Index as _;

    use super::*;
    use crate::index::tests::{index, service, svc_id};

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encoded");
        text
    }

    #[test]
    fn profile_series_name_only_what_the_index_holds() {
        let mut idx = index();
        idx.apply(service("web", "10.96.0.1"));
        let index = Arc::new(RwLock::new(idx));
        let mut registry = Registry::default();
        register(&mut registry, index.clone(), &IndexMetrics::default());
        let subscribe = |name: &str| {
            let mut index = index.write();
            let key = index
                .resolve_profile_name(&svc_id(name), None, 80, None)
                .expect("resolved");
            index.subscribe_profile(key)
        };
        // A Service the index holds, one it does not (a name a client made
        // up), and an address.
        let _web = subscribe("web");
        let _ghost = subscribe("made-up");
        let addr = "10.1.2.3:8080".parse().expect("addr");
        let key = index
            .read()
            .resolve_profile_addr(addr, None)
            .expect("resolved");
        let _ip = index.write().subscribe_profile(key);

        let text = scrape(&registry);
        for line in [
            "profile_subscribers{namespace=\"ns\",profile=\"web.ns.svc.cluster.local\"} 1\n",
            "profile_updates{namespace=\"ns\",profile=\"web.ns.svc.cluster.local\"} 0\n",
            "service_subscribers{namespace=\"ns\",name=\"web\"} 1\n",
            "workload_subscribers 1\n",
            "# TYPE endpoint_updates_queue_overflow unknown\n",
            "endpoint_profile_updates_queue_overflow 0\n",
            "# HELP endpoints_cache_size Always 0: Meridian reads EndpointSlices only",
            "pod_cache_size{cluster=\"local\"} 0\n",
            "# TYPE serviceprofiles_informer_lag_seconds histogram\n",
        ] {
            assert!(text.contains(line), "{line:?} not in\n{text}");
        }
        assert!(!text.contains("made-up"), "{text}");
    }
}
