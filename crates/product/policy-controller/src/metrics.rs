//! Prometheus metrics of the inbound index (`inbound_index_*`), the
//! outbound index (`outbound_index_*`), both read from the indexes when
//! scraped (dependencies run metrics → index), the gRPC API
//! (`grpc_server_*`) and the status writer (`resource_status_*`).
//!
//! Names the original policy controller exports keep its names, at the top
//! of the registry: the status writer's `resource_status_*` here, and the
//! gRPC servers' `grpc_server_*` (`grpc_stream::metrics`). Meridian's own
//! (the index sizes, the per-method stream gauges) are registered under
//! `policy_` by the runtime.

use k8s_index::SharedIndex;
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{
        MetricType, counter::Counter, family::Family, gauge::ConstGauge, gauge::Gauge,
        histogram::Histogram,
    },
    registry::Registry,
};

use crate::index::{Index, IndexStats, outbound::OutboundIndex, outbound::OutboundStats};

/// One size of an index: its name (under the index's prefix), help and value.
type SizeGauge<S> = (&'static str, &'static str, fn(&S) -> usize);

/// Encodes `stats` as the gauges `sizes`.
fn encode_sizes<S>(
    encoder: &mut DescriptorEncoder<'_>,
    stats: &S,
    sizes: &[SizeGauge<S>],
) -> Result<(), std::fmt::Error> {
    for (name, help, value) in sizes {
        let gauge = ConstGauge::new(i64::try_from(value(stats)).unwrap_or(i64::MAX));
        gauge.encode(encoder.encode_descriptor(name, help, None, MetricType::Gauge)?)?;
    }
    Ok(())
}

/// Sizes of the inbound index (`inbound_index_*`), read when scraped: the
/// index holds no metric handle.
pub struct InboundIndexCollector(SharedIndex<Index>);

impl InboundIndexCollector {
    /// Registers under `inbound_index_`.
    pub fn register(registry: &mut Registry, index: SharedIndex<Index>) {
        registry
            .sub_registry_with_prefix("inbound_index")
            .register_collector(Box::new(Self(index)));
    }
}

impl std::fmt::Debug for InboundIndexCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InboundIndexCollector")
            .finish_non_exhaustive()
    }
}

impl Collector for InboundIndexCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stats = self.0.read().stats();
        encode_sizes(
            &mut encoder,
            &stats,
            &[
                (
                    "namespaces",
                    "Namespaces with meshed pods, external workloads or policy resources",
                    |s: &IndexStats| s.namespaces,
                ),
                ("pods", "Meshed pods indexed", |s| s.pods),
                ("external_workloads", "ExternalWorkloads indexed", |s| {
                    s.external_workloads
                }),
                ("servers", "Server resources indexed", |s| s.servers),
                (
                    "port_servers",
                    "Pod and external workload ports with a published server (selected by a Server or looked up)",
                    |s| s.port_servers,
                ),
            ],
        )
    }
}

/// Sizes of the outbound index (`outbound_index_*`), read when scraped.
pub struct OutboundIndexCollector(SharedIndex<OutboundIndex>);

impl OutboundIndexCollector {
    /// Registers under `outbound_index_`.
    pub fn register(registry: &mut Registry, index: SharedIndex<OutboundIndex>) {
        registry
            .sub_registry_with_prefix("outbound_index")
            .register_collector(Box::new(Self(index)));
    }
}

impl std::fmt::Debug for OutboundIndexCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutboundIndexCollector")
            .finish_non_exhaustive()
    }
}

impl Collector for OutboundIndexCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stats = self.0.read().stats();
        encode_sizes(
            &mut encoder,
            &stats,
            &[
                ("services", "Services indexed", |s: &OutboundStats| {
                    s.services
                }),
                (
                    "routes",
                    "Route resources attached to at least one Service",
                    |s| s.routes,
                ),
                (
                    "watches",
                    "Published policies (Service port and client namespace)",
                    |s| s.watches,
                ),
            ],
        )
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RpcLabels {
    method: &'static str,
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MethodLabels {
    method: &'static str,
}

/// Metrics of the gRPC API.
#[derive(Clone, Debug, Default)]
pub struct GrpcMetrics {
    requests: Family<RpcLabels, Counter>,
    active_streams: Family<MethodLabels, Gauge>,
    messages: Family<MethodLabels, Counter>,
}

impl GrpcMetrics {
    /// Registers under `grpc_server_`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let sub = registry.sub_registry_with_prefix("grpc_server");
        sub.register(
            "requests",
            "Requests handled, by method and initial status code",
            m.requests.clone(),
        );
        sub.register(
            "active_streams",
            "Open streams (WatchPort, Watch), by method",
            m.active_streams.clone(),
        );
        sub.register(
            "messages_sent",
            "Responses sent, by method",
            m.messages.clone(),
        );
        m
    }

    pub(crate) fn request(&self, method: &'static str, code: tonic::Code) {
        self.requests
            .get_or_create(&RpcLabels {
                method,
                code: format!("{code:?}"),
            })
            .inc();
    }

    pub(crate) fn message_sent(&self, method: &'static str) {
        self.messages.get_or_create(&MethodLabels { method }).inc();
    }

    /// Counts an open stream until the guard is dropped.
    pub(crate) fn stream_opened(&self, method: &'static str) -> StreamGuard {
        let gauge = self
            .active_streams
            .get_or_create(&MethodLabels { method })
            .clone();
        gauge.inc();
        StreamGuard(gauge)
    }
}

/// Decrements the open-stream gauge when dropped.
pub(crate) struct StreamGuard(Gauge);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Metrics of the status writer: the original's `resource_status_*`
/// (patches applied, failed with an API error, timed out, and how long
/// they took), and Meridian's `policy_resource_status_leader` and
/// `policy_status_patch_conflicts_total` (patches refused because the
/// object changed since their status was computed; not API errors, which
/// the original's series count: the status is computed again from the new
/// version).
#[derive(Clone, Debug)]
pub struct StatusMetrics {
    patches: Counter,
    api_errors: Counter,
    timeouts: Counter,
    conflicts: Counter,
    duration: Histogram,
    leader: Gauge,
    /// Patches sent (the original's enqueues and dequeues).
    sent: Counter,
}

/// How one status patch ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PatchOutcome {
    Applied,
    /// Refused with 409: the object changed since.
    Conflict,
    ApiError,
    Timeout,
}

/// The buckets of `resource_status_patch_duration_seconds` (the original's).
const PATCH_BUCKETS: [f64; 9] = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0];

impl StatusMetrics {
    /// Registers `resource_status_*` and `policy_resource_status_leader`
    /// at the top of `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self {
            patches: Counter::default(),
            api_errors: Counter::default(),
            timeouts: Counter::default(),
            conflicts: Counter::default(),
            duration: Histogram::new(PATCH_BUCKETS),
            leader: Gauge::default(),
            sent: Counter::default(),
        };
        registry.register(
            "policy_resource_status_leader",
            "1 while this replica holds the status-writer Lease",
            m.leader.clone(),
        );
        registry.register(
            "policy_status_patch_conflicts",
            "Count of status patches refused because the object changed since its status was computed",
            m.conflicts.clone(),
        );
        let sub = registry.sub_registry_with_prefix("resource_status");
        sub.register(
            "patches",
            "Count of successful patch operations",
            m.patches.clone(),
        );
        sub.register(
            "patch_api_errors",
            "Count of patch operations that failed with an API error",
            m.api_errors.clone(),
        );
        sub.register(
            "patch_timeouts",
            "Count of patch operations that did not complete within the timeout",
            m.timeouts.clone(),
        );
        // Meridian's writer computes each patch where it sends it: nothing
        // waits in a channel, so every patch is dequeued as it is
        // enqueued, none overflows a channel, and none is computed while
        // not leading (to be dropped).
        sub.register(
            "patch_enqueues",
            "Count of patches to send (Meridian has no channel: the same count as patch_dequeues)",
            m.sent.clone(),
        );
        sub.register(
            "patch_dequeues",
            "Count of patches taken to be sent",
            m.sent.clone(),
        );
        sub.register(
            "patch_drops",
            "Always 0: Meridian computes patches only while it holds the Lease, so none is dropped for not leading",
            Counter::<u64>::default(),
        );
        sub.register(
            "patch_enqueue_overflows",
            "Always 0: Meridian has no patch channel to overflow",
            Counter::<u64>::default(),
        );
        sub.register_with_unit(
            "patch_duration",
            "Histogram of time taken to apply patch operations",
            prometheus_client::registry::Unit::Seconds,
            m.duration.clone(),
        );
        m
    }

    /// One patch sent to the API server, answered (or not) after `elapsed`.
    pub(crate) fn patched(&self, outcome: PatchOutcome, elapsed: std::time::Duration) {
        self.sent.inc();
        match outcome {
            PatchOutcome::Applied => self.patches.inc(),
            PatchOutcome::Conflict => self.conflicts.inc(),
            PatchOutcome::ApiError => self.api_errors.inc(),
            PatchOutcome::Timeout => self.timeouts.inc(),
        };
        if outcome != PatchOutcome::Timeout {
            self.duration.observe(elapsed.as_secs_f64());
        }
    }

    pub(crate) fn set_leader(&self, leads: bool) {
        self.leader.set(i64::from(leads));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::outbound::OutboundCluster;

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    }

    #[test]
    fn index_sizes_are_read_when_scraped() {
        let mut registry = Registry::with_prefix("policy");
        let outbound = OutboundIndex::shared(OutboundCluster {
            networks: vec!["10.0.0.0/8".parse().expect("net")],
            cluster_domain: "cluster.local".into(),
            default_opaque_ports: Default::default(),
            global_egress_network_namespace: "linkerd-egress".into(),
        });
        OutboundIndexCollector::register(&mut registry, outbound.clone());
        assert!(
            scrape(&registry).contains("\npolicy_outbound_index_services 0\n"),
            "{}",
            scrape(&registry)
        );

        let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 80}]},
        }))
        .expect("service");
        k8s_index::Index::apply(&mut *outbound.write(), svc);
        let text = scrape(&registry);
        assert!(
            text.contains("# TYPE policy_outbound_index_services gauge"),
            "{text}"
        );
        assert!(
            text.contains("\npolicy_outbound_index_services 1\n"),
            "{text}"
        );
    }
}
