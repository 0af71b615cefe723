//! Prometheus metrics of the inbound index (`inbound_index_*`), the
//! outbound index (`outbound_index_*`), the gRPC API (`grpc_server_*`) and
//! the status writer (`resource_status_*`).

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

/// Counts of the inbound index, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    pub namespaces: usize,
    pub pods: usize,
    pub servers: usize,
    pub port_servers: usize,
}

/// Counts of the outbound index, for metrics and tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboundStats {
    pub services: usize,
    pub routes: usize,
    pub watches: usize,
}

/// Sizes of the inbound index.
#[derive(Clone, Debug, Default)]
pub struct IndexMetrics {
    namespaces: Gauge,
    pods: Gauge,
    servers: Gauge,
    port_servers: Gauge,
}

impl IndexMetrics {
    /// Registers under `inbound_index_`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let sub = registry.sub_registry_with_prefix("inbound_index");
        sub.register(
            "namespaces",
            "Namespaces with meshed pods or policy resources",
            m.namespaces.clone(),
        );
        sub.register("pods", "Meshed pods indexed", m.pods.clone());
        sub.register("servers", "Server resources indexed", m.servers.clone());
        sub.register(
            "port_servers",
            "Pod ports with a published server (selected by a Server or looked up)",
            m.port_servers.clone(),
        );
        m
    }

    pub(crate) fn report(&self, stats: IndexStats) {
        let set = |g: &Gauge, n: usize| {
            g.set(i64::try_from(n).unwrap_or(i64::MAX));
        };
        set(&self.namespaces, stats.namespaces);
        set(&self.pods, stats.pods);
        set(&self.servers, stats.servers);
        set(&self.port_servers, stats.port_servers);
    }
}

/// Sizes of the outbound index.
#[derive(Clone, Debug, Default)]
pub struct OutboundIndexMetrics {
    services: Gauge,
    routes: Gauge,
    watches: Gauge,
}

impl OutboundIndexMetrics {
    /// Registers under `outbound_index_`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let sub = registry.sub_registry_with_prefix("outbound_index");
        sub.register("services", "Services indexed", m.services.clone());
        sub.register(
            "routes",
            "Route resources attached to at least one Service",
            m.routes.clone(),
        );
        sub.register(
            "watches",
            "Published policies (Service port and client namespace)",
            m.watches.clone(),
        );
        m
    }

    pub(crate) fn report(&self, stats: OutboundStats) {
        let set = |g: &Gauge, n: usize| {
            g.set(i64::try_from(n).unwrap_or(i64::MAX));
        };
        set(&self.services, stats.services);
        set(&self.routes, stats.routes);
        set(&self.watches, stats.watches);
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

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PatchLabels {
    result: &'static str,
}

/// Metrics of the HTTPRoute status writer (`resource_status_*`).
#[derive(Clone, Debug, Default)]
pub struct StatusMetrics {
    patches: Family<PatchLabels, Counter>,
    leader: Gauge,
}

impl StatusMetrics {
    /// Registers under `resource_status_`.
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        let sub = registry.sub_registry_with_prefix("resource_status");
        sub.register(
            "patches",
            "Route status patches, by result (applied, failed)",
            m.patches.clone(),
        );
        sub.register(
            "leader",
            "1 while this replica holds the status-writer Lease",
            m.leader.clone(),
        );
        m
    }

    pub(crate) fn patched(&self, ok: bool) {
        let result = if ok { "applied" } else { "failed" };
        self.patches.get_or_create(&PatchLabels { result }).inc();
    }

    pub(crate) fn set_leader(&self, leads: bool) {
        self.leader.set(i64::from(leads));
    }
}
