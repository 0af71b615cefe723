//! The policy controller's series under Linkerd 2.20's names, at the top
//! of the registry (docs/metrics.md), read from the indexes and the watch
//! metrics when scraped:
//!
//! - `inbound_index_*_index_size{namespace}` and `outbound_index_*`: the
//!   indexes' objects, per namespace where the original has it. Every
//!   namespace comes from an indexed object, never from a request.
//! - kubert's `kube_watch_{applies,deletes,restarts,errors}_total`
//!   ([`k8s_index::original_names`]).
//!
//! Meridian's own (`policy_inbound_index_*`, `policy_outbound_index_*`,
//! `policy_index_*`) keep their names.

use k8s_index::{
    IndexMetrics, SharedIndex,
    original_names::{KubertWatch, OriginalIndexSeries},
};
use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, gauge::ConstGauge},
    registry::Registry,
};

use crate::index::{Index, NamespaceSizes, outbound::OutboundIndex};

/// Meridian's watches with kubert's labels (the original's resource types).
const KUBERT_WATCHES: &[KubertWatch] = &[
    KubertWatch {
        kind: "pods",
        labels: ["Pod", "", "v1"],
    },
    KubertWatch {
        kind: "services",
        labels: ["Service", "", "v1"],
    },
    KubertWatch {
        kind: "externalworkloads",
        labels: ["ExternalWorkload", "workload.linkerd.io", "v1beta1"],
    },
    KubertWatch {
        kind: "servers",
        labels: ["Server", "policy.linkerd.io", "v1beta3"],
    },
    KubertWatch {
        kind: "serverauthorizations",
        labels: ["ServerAuthorization", "policy.linkerd.io", "v1beta1"],
    },
    KubertWatch {
        kind: "authorizationpolicies",
        labels: ["AuthorizationPolicy", "policy.linkerd.io", "v1alpha1"],
    },
    KubertWatch {
        kind: "meshtlsauthentications",
        labels: ["MeshTLSAuthentication", "policy.linkerd.io", "v1alpha1"],
    },
    KubertWatch {
        kind: "networkauthentications",
        labels: ["NetworkAuthentication", "policy.linkerd.io", "v1alpha1"],
    },
    KubertWatch {
        kind: "httproutes",
        labels: ["HTTPRoute", "policy.linkerd.io", "v1beta3"],
    },
    KubertWatch {
        kind: "httplocalratelimitpolicies",
        labels: ["HTTPLocalRateLimitPolicy", "policy.linkerd.io", "v1alpha1"],
    },
    KubertWatch {
        kind: "egressnetworks",
        labels: ["EgressNetwork", "policy.linkerd.io", "v1alpha1"],
    },
    KubertWatch {
        kind: "httproutes.gateway.networking.k8s.io",
        labels: ["HTTPRoute", "gateway.networking.k8s.io", "v1"],
    },
    KubertWatch {
        kind: "grpcroutes",
        labels: ["GRPCRoute", "gateway.networking.k8s.io", "v1"],
    },
    KubertWatch {
        kind: "tlsroutes",
        labels: ["TLSRoute", "gateway.networking.k8s.io", "v1alpha2"],
    },
    KubertWatch {
        kind: "tcproutes",
        labels: ["TCPRoute", "gateway.networking.k8s.io", "v1alpha2"],
    },
];

/// Registers the original's names at the top of `root`.
pub fn register(
    root: &mut Registry,
    inbound: SharedIndex<Index>,
    outbound: SharedIndex<OutboundIndex>,
    watch_metrics: &IndexMetrics,
) {
    root.register_collector(Box::new(
        OriginalIndexSeries::new(watch_metrics, "local").kubert(KUBERT_WATCHES),
    ));
    root.register_collector(Box::new(IndexSizes { inbound, outbound }));
}

/// Reads both indexes' sizes when scraped.
struct IndexSizes {
    inbound: SharedIndex<Index>,
    outbound: SharedIndex<OutboundIndex>,
}

impl std::fmt::Debug for IndexSizes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexSizes").finish_non_exhaustive()
    }
}

/// An inbound size: its name, help, and how to read it.
type InboundSize = (&'static str, &'static str, fn(&NamespaceSizes) -> usize);

const INBOUND: [InboundSize; 8] = [
    (
        "inbound_index_meshtls_authentication_index_size",
        "MeshTLSAuthentications held by the inbound index, per namespace",
        |s| s.meshtls_authentications,
    ),
    (
        "inbound_index_network_authentication_index_size",
        "NetworkAuthentications held by the inbound index, per namespace",
        |s| s.network_authentications,
    ),
    (
        "inbound_index_pod_index_size",
        "Pods held by the inbound index (meshed pods only), per namespace",
        |s| s.pods,
    ),
    (
        "inbound_index_external_workload_index_size",
        "ExternalWorkloads held by the inbound index, per namespace",
        |s| s.external_workloads,
    ),
    (
        "inbound_index_server_index_size",
        "Servers held by the inbound index, per namespace",
        |s| s.servers,
    ),
    (
        "inbound_index_server_authorization_index_size",
        "ServerAuthorizations held by the inbound index, per namespace",
        |s| s.server_authorizations,
    ),
    (
        "inbound_index_authorization_policy_index_size",
        "AuthorizationPolicies held by the inbound index, per namespace",
        |s| s.authorization_policies,
    ),
    (
        "inbound_index_http_route_index_size",
        "HTTPRoutes (policy.linkerd.io and Gateway API) held by the inbound index, per namespace",
        |s| s.http_routes,
    ),
];

fn gauge(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Collector for IndexSizes {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let inbound = self.inbound.read().namespace_sizes();
        for (name, help, value) in INBOUND {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (ns, sizes) in &inbound {
                let labels = [("namespace", ns.as_str())];
                ConstGauge::new(gauge(value(sizes))).encode(family.encode_family(&labels)?)?;
            }
        }
        let outbound = self.outbound.read().original_sizes();
        ConstGauge::new(gauge(outbound.by_ip)).encode(encoder.encode_descriptor(
            "outbound_index_service_index_size",
            "ClusterIPs the outbound index maps to a Service",
            None,
            MetricType::Gauge,
        )?)?;
        ConstGauge::new(gauge(outbound.services)).encode(encoder.encode_descriptor(
            "outbound_index_service_info_index_size",
            "Services held by the outbound index",
            None,
            MetricType::Gauge,
        )?)?;
        for (name, help, by_ns) in [
            (
                "outbound_index_service_route_index_size",
                "Routes with a Service or EgressNetwork parent held by the outbound index, per route namespace",
                &outbound.routes,
            ),
            (
                "outbound_index_service_port_route_index_size",
                "Service ports with a published outbound policy, per Service namespace",
                &outbound.port_routes,
            ),
        ] {
            let mut family = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
            for (ns, n) in by_ns {
                let labels = [("namespace", ns.as_str())];
                ConstGauge::new(gauge(*n)).encode(family.encode_family(&labels)?)?;
            }
        }
        Ok(())
    }
}
