//! Domain types of outbound policy, free of Kubernetes and gRPC: what a
//! proxy is told about a Service port it connects to (protocol hint, routes
//! with their backends, timeouts and retries, failure accrual), the targets
//! a lookup can resolve to, and the discovery trait the gRPC layer is
//! written against.

use std::{
    cmp::Ordering, collections::BTreeMap, net::SocketAddr, num::NonZeroU16, time::Duration,
    time::SystemTime,
};

use super::routes::{Filter, HeaderMatch, HostMatch, HttpRouteMatch};

/// A Service port's `appProtocol` (or the opaque-ports hint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppProtocol {
    /// `http`.
    Http1,
    /// `kubernetes.io/h2c`.
    Http2,
    /// `linkerd.io/opaque`, `linkerd.io/tcp`, or an opaque port.
    Opaque,
    /// Anything else (treated as opaque).
    Unknown(String),
}

impl AppProtocol {
    /// Parses an `appProtocol` value (case-insensitively, as the original).
    pub fn parse(value: &str) -> Self {
        match value.to_ascii_lowercase().as_str() {
            "http" => Self::Http1,
            "kubernetes.io/h2c" => Self::Http2,
            "linkerd.io/opaque" | "linkerd.io/tcp" => Self::Opaque,
            other => Self::Unknown(other.to_string()),
        }
    }
}

/// A Service port asked about, and the namespace of the client asking.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ServiceTarget {
    pub namespace: String,
    pub name: String,
    pub port: NonZeroU16,
    /// The client's namespace: consumer routes of this namespace apply.
    pub source_namespace: String,
}

/// What an address lookup resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OutboundTarget {
    /// A port the Service declares.
    Service(ServiceTarget),
    /// A ClusterIP of the Service, on a port it does not declare.
    UndefinedPort {
        namespace: String,
        name: String,
        port: NonZeroU16,
    },
    /// An address an EgressNetwork captures, or outside the cluster
    /// networks: its policy is [`crate::core::egress::EgressPolicy`].
    Egress(SocketAddr),
}

/// Names a route resource.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RouteId {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

/// Route timeouts (`None`: no timeout).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteTimeouts {
    pub response: Option<Duration>,
    pub request: Option<Duration>,
    pub idle: Option<Duration>,
}

/// Retries of a route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouteRetry<C> {
    /// Maximum retries per request.
    pub limit: u16,
    /// Timeout of each attempt.
    pub timeout: Option<Duration>,
    /// Statuses that are retried (`None`: the proxy's default).
    pub conditions: Option<Vec<C>>,
}

/// An inclusive range of HTTP statuses to retry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRetryCondition {
    pub status_min: u32,
    pub status_max: u32,
}

/// A gRPC status to retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrpcRetryCondition {
    Cancelled,
    DeadlineExceeded,
    ResourceExhausted,
    Internal,
    Unavailable,
}

/// A gRPC request match: every given part must match.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GrpcRouteMatch {
    pub method: Option<GrpcMethodMatch>,
    pub headers: Vec<HeaderMatch>,
}

/// An exact gRPC service and/or method.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct GrpcMethodMatch {
    pub service: Option<String>,
    pub method: Option<String>,
}

/// Where a rule sends requests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    Service(WeightedService),
    /// An EgressNetwork: the original destination of the connection, when
    /// the route's parent is that EgressNetwork.
    EgressNetwork(WeightedEgressNetwork),
    /// A backend that cannot be used (unsupported kind or filter, missing
    /// port): requests to it fail with `message`.
    Invalid {
        weight: u32,
        message: String,
    },
}

/// A Service port backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedService {
    pub weight: u32,
    pub namespace: String,
    pub name: String,
    pub port: NonZeroU16,
    /// The `Destination.Get` path of the backend.
    pub authority: String,
    pub filters: Vec<Filter>,
    /// Whether the Service exists (a missing one fails its requests).
    pub exists: bool,
}

/// An EgressNetwork backend.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightedEgressNetwork {
    pub weight: u32,
    pub namespace: String,
    pub name: String,
    pub port: Option<NonZeroU16>,
    pub filters: Vec<Filter>,
    /// Set by the index when the lookup resolved to this EgressNetwork:
    /// where the connection goes.
    pub forward: Option<SocketAddr>,
}

/// One rule of an outbound route.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundRule<M, C> {
    pub matches: Vec<M>,
    /// Empty: the parent Service's default backend.
    pub backends: Vec<Backend>,
    pub retry: Option<RouteRetry<C>>,
    pub timeouts: RouteTimeouts,
    pub filters: Vec<Filter>,
}

/// An outbound route (HTTP or gRPC, by its match and retry types).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundRoute<M, C> {
    pub hostnames: Vec<HostMatch>,
    pub rules: Vec<OutboundRule<M, C>>,
    /// Orders routes (oldest first).
    pub created_at: Option<SystemTime>,
}

/// An outbound HTTP route.
pub type HttpRoute = OutboundRoute<HttpRouteMatch, HttpRetryCondition>;
/// An outbound gRPC route.
pub type GrpcRoute = OutboundRoute<GrpcRouteMatch, GrpcRetryCondition>;
/// A TLS (by SNI, in `hostnames`) or TCP route: one rule of backends only.
pub type L4Route = OutboundRoute<(), ()>;

/// The ejection backoff of failure accrual.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Backoff {
    pub min_penalty: Duration,
    pub max_penalty: Duration,
    pub jitter: f32,
}

/// How the proxy's balancer ejects failing endpoints.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum FailureAccrual {
    /// Eject after `max_failures` consecutive failures.
    Consecutive { max_failures: u32, backoff: Backoff },
    /// Consecutive failures or a low success rate, whichever trips first.
    Unified {
        max_failures: u32,
        backoff: Backoff,
        success_rate: SuccessRate,
    },
}

/// The success-rate dimension of unified failure accrual.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SuccessRate {
    /// 0-1; 0 turns the dimension off.
    pub threshold: f64,
    /// The trailing window the rate is measured over.
    pub window: Duration,
    /// Requests in the window before it can trip.
    pub min_requests: u32,
}

/// The balancer's failure penalty (`penalize-failures`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadBiaser {
    /// Added to a failing endpoint's load estimate.
    pub penalty: Duration,
    /// Ceiling of a `Retry-After` hint.
    pub max_retry_after: Duration,
}

/// Everything a proxy is told about one Service port, for clients of one
/// namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct OutboundPolicy {
    pub namespace: String,
    pub name: String,
    pub port: NonZeroU16,
    /// The `Destination.Get` path of the default backend (empty for an
    /// EgressNetwork, whose default backend is the original destination).
    pub authority: String,
    pub app_protocol: Option<AppProtocol>,
    pub accrual: Option<FailureAccrual>,
    /// The balancer's failure penalty, if turned on.
    pub load_biaser: Option<LoadBiaser>,
    /// Whether the accrual backoff honors `Retry-After` (unified only).
    pub honor_retry_after: bool,
    /// Service-wide HTTP retries (rules without their own use these).
    pub http_retry: Option<RouteRetry<HttpRetryCondition>>,
    /// Service-wide gRPC retries.
    pub grpc_retry: Option<RouteRetry<GrpcRetryCondition>>,
    /// Service-wide timeouts (rules without their own use these).
    pub timeouts: RouteTimeouts,
    pub http_routes: BTreeMap<RouteId, HttpRoute>,
    pub grpc_routes: BTreeMap<RouteId, GrpcRoute>,
    pub tls_routes: BTreeMap<RouteId, L4Route>,
    pub tcp_routes: BTreeMap<RouteId, L4Route>,
}

/// Routes in publishing order: by creation time (routes without one
/// last), then by name.
pub fn ordered<M, C>(
    routes: &BTreeMap<RouteId, OutboundRoute<M, C>>,
) -> Vec<(&RouteId, &OutboundRoute<M, C>)> {
    let mut list: Vec<_> = routes.iter().collect();
    list.sort_by(|(a_id, a), (b_id, b)| {
        let by_time = match (a.created_at, b.created_at) {
            (Some(a), Some(b)) => a.cmp(&b),
            (Some(_), None) => return Ordering::Less,
            (None, Some(_)) => return Ordering::Greater,
            (None, None) => Ordering::Equal,
        };
        by_time.then_with(|| a_id.name.cmp(&b_id.name))
    });
    list
}

/// The `Destination.Get` path of a Service port.
pub fn service_authority(
    name: &str,
    namespace: &str,
    cluster_domain: &str,
    port: NonZeroU16,
) -> String {
    format!("{name}.{namespace}.svc.{cluster_domain}:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(secs: Option<u64>) -> HttpRoute {
        OutboundRoute {
            hostnames: vec![],
            rules: vec![],
            created_at: secs.map(|s| SystemTime::UNIX_EPOCH + Duration::from_secs(s)),
        }
    }

    fn id(ns: &str, name: &str) -> RouteId {
        RouteId {
            group: "gateway.networking.k8s.io".into(),
            kind: "HTTPRoute".into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    #[test]
    fn routes_order_by_creation_then_name() {
        let routes: BTreeMap<_, _> = [
            (id("a", "z-old"), route(Some(10))),
            (id("b", "b-new"), route(Some(20))),
            (id("a", "a-new"), route(Some(20))),
            (id("a", "untimed"), route(None)),
        ]
        .into();
        let names: Vec<_> = ordered(&routes)
            .into_iter()
            .map(|(id, _)| id.name.as_str())
            .collect();
        assert_eq!(names, ["z-old", "a-new", "b-new", "untimed"]);
    }

    #[test]
    fn app_protocols_parse_as_the_original() {
        assert_eq!(AppProtocol::parse("HTTP"), AppProtocol::Http1);
        assert_eq!(AppProtocol::parse("kubernetes.io/h2c"), AppProtocol::Http2);
        assert_eq!(AppProtocol::parse("linkerd.io/tcp"), AppProtocol::Opaque);
        assert_eq!(AppProtocol::parse("linkerd.io/opaque"), AppProtocol::Opaque);
        assert_eq!(
            AppProtocol::parse("kubernetes.io/ws"),
            AppProtocol::Unknown("kubernetes.io/ws".into())
        );
    }
}
