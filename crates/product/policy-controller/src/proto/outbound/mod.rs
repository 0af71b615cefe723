//! Conversion of an [`OutboundPolicy`] (and of the egress-fallback and
//! undefined-port answers, and of EgressNetworks in [`egress`]) into the proxy API's `OutboundPolicy`, field for
//! field as the original encodes them: the protocol chosen from the port's
//! `appProtocol` and the attached route kinds, the default backend
//! balancing over `Destination.Get`, routes in creation-then-name order,
//! Service-wide timeouts and retries for rules without their own, and a
//! failure-injecting (or, for TLS and TCP routes, `Invalid`) backend for a
//! backend that cannot be used.

use std::{net::SocketAddr, time::Duration};

use linkerd2_proxy_api::{
    destination, grpc_route as grpc_proto, http_route as route_proto,
    meta::{Metadata, Resource, metadata},
    opaque_route,
    outbound::{self as proto, backend, proxy_protocol},
};

use super::inbound::{
    grpc_match, host_match, redirect, request_header_modifier, response_header_modifier,
    route_match,
};
use crate::core::{
    outbound::{
        AppProtocol, Backend, Backoff, FailureAccrual, GrpcRetryCondition, GrpcRoute,
        HttpRetryCondition, HttpRoute, LoadBiaser, OutboundPolicy, RouteId, RouteRetry,
        RouteTimeouts, WeightedEgressNetwork, WeightedService, ordered,
    },
    routes::Filter,
};

/// The protocol detection timeout sent with `Detect`.
const DETECT_TIMEOUT: Duration = Duration::from_secs(10);
/// PeakEWMA defaults.
const DEFAULT_RTT: Duration = Duration::from_millis(30);
const RTT_DECAY: Duration = Duration::from_secs(10);
/// Backend queue.
const QUEUE_CAPACITY: u32 = 100;
const QUEUE_FAILFAST: Duration = Duration::from_secs(3);
/// Retry settings the original always sends.
const RETRY_MAX_REQUEST_BYTES: u32 = 64 * 1024;
const RETRY_MIN_BACKOFF: Duration = Duration::from_millis(25);
const RETRY_MAX_BACKOFF: Duration = Duration::from_millis(250);

fn duration(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

fn default_meta(name: &str) -> Option<Metadata> {
    Some(Metadata {
        kind: Some(metadata::Kind::Default(name.to_string())),
    })
}

fn service_meta(namespace: &str, name: &str, port: u16) -> Metadata {
    Metadata {
        kind: Some(metadata::Kind::Resource(Resource {
            group: "core".to_string(),
            kind: "Service".to_string(),
            name: name.to_string(),
            namespace: namespace.to_string(),
            section: String::new(),
            port: u32::from(port),
        })),
    }
}

fn queue() -> proto::Queue {
    proto::Queue {
        capacity: QUEUE_CAPACITY,
        failfast_timeout: duration(QUEUE_FAILFAST),
    }
}

fn peak_ewma() -> backend::balance_p2c::Load {
    backend::balance_p2c::Load::PeakEwma(backend::balance_p2c::PeakEwma {
        default_rtt: duration(DEFAULT_RTT),
        decay: duration(RTT_DECAY),
    })
}

fn balancer(meta: Metadata, path: &str, load: backend::balance_p2c::Load) -> proto::Backend {
    proto::Backend {
        metadata: Some(meta),
        queue: Some(queue()),
        kind: Some(backend::Kind::Balancer(backend::BalanceP2c {
            discovery: Some(backend::EndpointDiscovery {
                kind: Some(backend::endpoint_discovery::Kind::Dst(
                    backend::endpoint_discovery::DestinationGet {
                        path: path.to_string(),
                    },
                )),
            }),
            load: Some(load),
        })),
    }
}

/// The proxy API view of `policy`.
pub fn to_outbound_policy(
    policy: &OutboundPolicy,
    allow_l5d_request_headers: bool,
) -> proto::OutboundPolicy {
    let load = service_load(policy.load_biaser.as_ref());
    // The penalty applies to HTTP and gRPC only: an opaque Service's own
    // backend keeps the plain estimator.
    let default_load = match policy.app_protocol {
        Some(AppProtocol::Opaque | AppProtocol::Unknown(_)) => peak_ewma(),
        _ => load,
    };
    let default_backend = balancer(
        service_meta(&policy.namespace, &policy.name, policy.port.get()),
        &policy.authority,
        default_load,
    );
    let accrual = policy
        .accrual
        .map(|a| failure_accrual(a, policy.honor_retry_after));
    let http = |routes: &std::collections::BTreeMap<RouteId, HttpRoute>| {
        let mut list: Vec<_> = ordered(routes)
            .into_iter()
            .map(|(id, r)| http_route(id, r, policy, &default_backend, allow_l5d_request_headers))
            .collect();
        if list.is_empty() {
            list.push(catch_all_http_route(
                default_meta("http"),
                Vec::new(),
                policy,
                &default_backend,
            ));
        }
        list
    };
    let grpc = || {
        proxy_protocol::Kind::Grpc(proxy_protocol::Grpc {
            routes: ordered(&policy.grpc_routes)
                .into_iter()
                .map(|(id, r)| {
                    grpc_route(id, r, policy, &default_backend, allow_l5d_request_headers)
                })
                .collect(),
            failure_accrual: accrual,
        })
    };
    let kind = match &policy.app_protocol {
        Some(AppProtocol::Http1) => proxy_protocol::Kind::Http1(proxy_protocol::Http1 {
            routes: http(&policy.http_routes),
            failure_accrual: accrual,
        }),
        Some(AppProtocol::Http2) if !policy.grpc_routes.is_empty() => grpc(),
        Some(AppProtocol::Http2) => proxy_protocol::Kind::Http2(proxy_protocol::Http2 {
            routes: http(&policy.http_routes),
            failure_accrual: accrual,
        }),
        Some(AppProtocol::Opaque | AppProtocol::Unknown(_)) if !policy.tcp_routes.is_empty() => {
            l4::tcp(policy, &default_backend)
        }
        Some(AppProtocol::Opaque | AppProtocol::Unknown(_)) => {
            proxy_protocol::Kind::Opaque(proxy_protocol::Opaque {
                routes: vec![opaque_route(default_backend.clone())],
            })
        }
        None if !policy.grpc_routes.is_empty() => grpc(),
        None if policy.http_routes.is_empty() && !policy.tls_routes.is_empty() => {
            proxy_protocol::Kind::Tls(proxy_protocol::Tls {
                routes: ordered(&policy.tls_routes)
                    .into_iter()
                    .map(|(id, r)| l4::tls_route(id, r, &default_backend))
                    .collect(),
            })
        }
        None if policy.http_routes.is_empty() && !policy.tcp_routes.is_empty() => {
            l4::tcp(policy, &default_backend)
        }
        None => detect(
            proxy_protocol::Opaque {
                routes: vec![opaque_route(default_backend.clone())],
            },
            http(&policy.http_routes),
            accrual,
        ),
    };
    proto::OutboundPolicy {
        metadata: Some(service_meta(
            &policy.namespace,
            &policy.name,
            policy.port.get(),
        )),
        protocol: Some(proto::ProxyProtocol { kind: Some(kind) }),
    }
}

fn backoff(b: &Backoff, respect_retry_after_hint: bool) -> proto::ExponentialBackoff {
    proto::ExponentialBackoff {
        min_backoff: duration(b.min_penalty),
        max_backoff: duration(b.max_penalty),
        jitter_ratio: b.jitter,
        respect_retry_after_hint,
    }
}

/// Consecutive accrual never acts on `Retry-After`; unified accrual does
/// when the Service asks.
/// `Detect`: HTTP/1 and HTTP/2 get `routes` (and the failure accrual),
/// what is not HTTP after the detect timeout goes to `opaque`.
fn detect(
    opaque: proxy_protocol::Opaque,
    routes: Vec<proto::HttpRoute>,
    accrual: Option<proto::FailureAccrual>,
) -> proxy_protocol::Kind {
    proxy_protocol::Kind::Detect(proxy_protocol::Detect {
        timeout: duration(DETECT_TIMEOUT),
        opaque: Some(opaque),
        http1: Some(proxy_protocol::Http1 {
            routes: routes.clone(),
            failure_accrual: accrual,
        }),
        http2: Some(proxy_protocol::Http2 {
            routes,
            failure_accrual: accrual,
        }),
    })
}

fn failure_accrual(accrual: FailureAccrual, honor_retry_after: bool) -> proto::FailureAccrual {
    let kind = match accrual {
        FailureAccrual::Consecutive {
            max_failures,
            backoff: b,
        } => proto::failure_accrual::Kind::ConsecutiveFailures(
            proto::failure_accrual::ConsecutiveFailures {
                max_failures,
                backoff: Some(backoff(&b, false)),
            },
        ),
        FailureAccrual::Unified {
            max_failures,
            backoff: b,
            success_rate,
        } => proto::failure_accrual::Kind::Unified(proto::failure_accrual::Unified {
            success_rate_threshold: success_rate.threshold,
            // The field named `decay` holds the window length.
            decay: duration(success_rate.window),
            min_requests: success_rate.min_requests,
            max_consecutive_failures: max_failures,
            backoff: Some(backoff(&b, honor_retry_after)),
        }),
    };
    proto::FailureAccrual {
        kind: Some(kind),
        ejection: None,
    }
}

/// The Service's load estimator: PeakEWMA, or its penalized form when the
/// Service turns the load biaser on.
fn service_load(biaser: Option<&LoadBiaser>) -> backend::balance_p2c::Load {
    match biaser {
        None => peak_ewma(),
        Some(b) => {
            backend::balance_p2c::Load::PenaltyPeakEwma(backend::balance_p2c::PenaltyPeakEwma {
                default_rtt: duration(DEFAULT_RTT),
                decay: duration(RTT_DECAY),
                penalty: duration(b.penalty),
                max_retry_after: duration(b.max_retry_after),
                penalty_decay: duration(RTT_DECAY),
            })
        }
    }
}

/// `Default("opaq")`: everything to the default backend.
fn opaque_route(backend: proto::Backend) -> proto::OpaqueRoute {
    catch_all_opaque_route(default_meta("opaq"), Vec::new(), backend)
}

/// Every connection to `backend`: a Service's opaque route (no filters),
/// the egress fallback's, and an EgressNetwork's ([`egress`], its
/// verdict's filters).
fn catch_all_opaque_route(
    metadata: Option<Metadata>,
    filters: Vec<proto::opaque_route::Filter>,
    backend: proto::Backend,
) -> proto::OpaqueRoute {
    proto::OpaqueRoute {
        metadata,
        rules: vec![proto::opaque_route::Rule {
            backends: Some(proto::opaque_route::Distribution {
                kind: Some(proto::opaque_route::distribution::Kind::FirstAvailable(
                    proto::opaque_route::distribution::FirstAvailable {
                        backends: vec![proto::opaque_route::RouteBackend {
                            backend: Some(backend),
                            filters: Vec::new(),
                        }],
                    },
                )),
            }),
            filters,
        }],
    }
}

/// The route that takes every request to `backend` with the policy's
/// timeouts and retry, in the types of the proxy API's `http_route` or
/// `grpc_route` (one shape in two sets).
macro_rules! catch_all_route {
    (
        $m:ident::$out:ident,
        matches: $matches:expr,
        retry: $retry_field:ident($retry_fn:path),
        $metadata:expr, $filters:expr, $policy:expr, $backend:expr $(,)?
    ) => {{
        let policy: &OutboundPolicy = $policy;
        proto::$out {
            metadata: $metadata,
            hosts: Vec::new(),
            rules: vec![proto::$m::Rule {
                matches: $matches,
                filters: $filters,
                backends: Some(proto::$m::Distribution {
                    kind: Some(proto::$m::distribution::Kind::FirstAvailable(
                        proto::$m::distribution::FirstAvailable {
                            backends: vec![proto::$m::RouteBackend {
                                backend: Some($backend.clone()),
                                ..Default::default()
                            }],
                        },
                    )),
                }),
                request_timeout: policy.timeouts.request.and_then(duration),
                timeouts: Some(timeouts(&policy.timeouts)),
                retry: policy.$retry_field.as_ref().map($retry_fn),
                allow_l5d_request_headers: false,
            }],
        }
    }};
}

/// Every request (prefix `/`) to `backend`: a Service's default HTTP route
/// (no filters), and an EgressNetwork's ([`egress`], its verdict's filters).
#[allow(deprecated)] // `request_timeout` is still sent, for older proxies.
fn catch_all_http_route(
    metadata: Option<Metadata>,
    filters: Vec<proto::http_route::Filter>,
    policy: &OutboundPolicy,
    backend: &proto::Backend,
) -> proto::HttpRoute {
    catch_all_route!(
        http_route::HttpRoute,
        matches: vec![route_proto::HttpRouteMatch {
            path: Some(route_proto::PathMatch {
                kind: Some(route_proto::path_match::Kind::Prefix("/".to_string())),
            }),
            ..Default::default()
        }],
        retry: http_retry(http_retry),
        metadata,
        filters,
        policy,
        backend,
    )
}

/// Every gRPC request (no matches) to `backend`: an EgressNetwork's gRPC
/// route ([`egress`], its verdict's filters).
#[allow(deprecated)] // `request_timeout` is still sent, for older proxies.
fn catch_all_grpc_route(
    metadata: Option<Metadata>,
    filters: Vec<proto::grpc_route::Filter>,
    policy: &OutboundPolicy,
    backend: &proto::Backend,
) -> proto::GrpcRoute {
    catch_all_route!(
        grpc_route::GrpcRoute,
        matches: Vec::new(),
        retry: grpc_retry(grpc_retry),
        metadata,
        filters,
        policy,
        backend,
    )
}

fn route_meta(id: &RouteId) -> Option<Metadata> {
    Some(Metadata {
        kind: Some(metadata::Kind::Resource(Resource {
            group: id.group.clone(),
            kind: id.kind.clone(),
            namespace: id.namespace.clone(),
            name: id.name.clone(),
            ..Default::default()
        })),
    })
}

fn timeouts(t: &RouteTimeouts) -> route_proto::Timeouts {
    route_proto::Timeouts {
        request: t.request.and_then(duration),
        idle: t.idle.and_then(duration),
        response: t.response.and_then(duration),
    }
}

fn retry_backoff() -> Option<proto::ExponentialBackoff> {
    Some(proto::ExponentialBackoff {
        min_backoff: duration(RETRY_MIN_BACKOFF),
        max_backoff: duration(RETRY_MAX_BACKOFF),
        jitter_ratio: 1.0,
        respect_retry_after_hint: false,
    })
}

fn http_retry(r: &RouteRetry<HttpRetryCondition>) -> proto::http_route::Retry {
    proto::http_route::Retry {
        max_retries: u32::from(r.limit),
        max_request_bytes: RETRY_MAX_REQUEST_BYTES,
        conditions: Some(proto::http_route::retry::Conditions {
            status_ranges: r
                .conditions
                .iter()
                .flatten()
                .map(|c| proto::http_route::retry::conditions::StatusRange {
                    start: c.status_min,
                    end: c.status_max,
                })
                .collect(),
        }),
        timeout: r.timeout.and_then(duration),
        backoff: retry_backoff(),
    }
}

fn grpc_retry(r: &RouteRetry<GrpcRetryCondition>) -> proto::grpc_route::Retry {
    let mut conditions = proto::grpc_route::retry::Conditions::default();
    for c in r.conditions.iter().flatten() {
        match c {
            GrpcRetryCondition::Cancelled => conditions.cancelled = true,
            GrpcRetryCondition::DeadlineExceeded => conditions.deadine_exceeded = true,
            GrpcRetryCondition::ResourceExhausted => conditions.resource_exhausted = true,
            GrpcRetryCondition::Internal => conditions.internal = true,
            GrpcRetryCondition::Unavailable => conditions.unavailable = true,
        }
    }
    proto::grpc_route::Retry {
        max_retries: u32::from(r.limit),
        max_request_bytes: RETRY_MAX_REQUEST_BYTES,
        conditions: Some(conditions),
        timeout: r.timeout.and_then(duration),
        backoff: retry_backoff(),
    }
}

fn http_filter(f: &Filter) -> proto::http_route::Filter {
    use proto::http_route::filter::Kind;
    proto::http_route::Filter {
        kind: Some(match f {
            Filter::RequestHeaderModifier(m) => {
                Kind::RequestHeaderModifier(request_header_modifier(m))
            }
            Filter::ResponseHeaderModifier(m) => {
                Kind::ResponseHeaderModifier(response_header_modifier(m))
            }
            Filter::RequestRedirect(r) => Kind::Redirect(redirect(r)),
        }),
    }
}

/// gRPC routes carry request header modifiers only (others are dropped).
fn grpc_filter(f: &Filter) -> Option<proto::grpc_route::Filter> {
    match f {
        Filter::RequestHeaderModifier(m) => Some(proto::grpc_route::Filter {
            kind: Some(proto::grpc_route::filter::Kind::RequestHeaderModifier(
                request_header_modifier(m),
            )),
        }),
        Filter::ResponseHeaderModifier(_) | Filter::RequestRedirect(_) => None,
    }
}

/// A backend that exists, or the metadata and failure message of one that
/// cannot be used.
enum Resolved<'a> {
    Usable(&'a WeightedService),
    /// An EgressNetwork backend: the original destination.
    Forward(&'a WeightedEgressNetwork, SocketAddr),
    Failing {
        meta: Metadata,
        message: String,
    },
}

fn resolve(b: &Backend) -> (u32, Resolved<'_>) {
    match b {
        Backend::Service(svc) if svc.exists => (svc.weight, Resolved::Usable(svc)),
        Backend::Service(svc) => (
            svc.weight,
            Resolved::Failing {
                meta: service_meta(&svc.namespace, &svc.name, svc.port.get()),
                message: format!("Service not found {}", svc.name),
            },
        ),
        Backend::EgressNetwork(net) => {
            let port = net.port.map(|p| p.get());
            match net.forward {
                Some(addr) => (net.weight, Resolved::Forward(net, addr)),
                None => (
                    net.weight,
                    Resolved::Failing {
                        meta: egress_meta(&net.namespace, &net.name, port.unwrap_or_default()),
                        message: "EgressNetwork can be resolved from an ip:port combo only"
                            .to_string(),
                    },
                ),
            }
        }
        Backend::Invalid { weight, message } => (
            *weight,
            Resolved::Failing {
                meta: Metadata {
                    kind: Some(metadata::Kind::Default("invalid".to_string())),
                },
                message: message.clone(),
            },
        ),
    }
}

/// The `EgressNetwork` resource metadata of a backend or policy.
pub(super) fn egress_meta(namespace: &str, name: &str, port: u16) -> Metadata {
    Metadata {
        kind: Some(metadata::Kind::Resource(Resource {
            group: k8s_api::policy::GROUP.to_string(),
            kind: "EgressNetwork".to_string(),
            name: name.to_string(),
            namespace: namespace.to_string(),
            section: String::new(),
            port: u32::from(port),
        })),
    }
}

/// The backend of an EgressNetwork backend reference: the original
/// destination.
fn egress_backend(net: &WeightedEgressNetwork, addr: SocketAddr) -> proto::Backend {
    let port = net.port.map_or(addr.port(), |p| p.get());
    forward_backend(
        egress_meta(&net.namespace, &net.name, port),
        addr,
        net.weight,
    )
}

/// A backend forwarding to `addr` (no discovery, no balancer).
pub(super) fn forward_backend(meta: Metadata, addr: SocketAddr, weight: u32) -> proto::Backend {
    proto::Backend {
        metadata: Some(meta),
        queue: Some(queue()),
        kind: Some(backend::Kind::Forward(destination::WeightedAddr {
            addr: Some(addr.into()),
            weight,
            ..Default::default()
        })),
    }
}

fn failing_backend(meta: Metadata) -> proto::Backend {
    proto::Backend {
        metadata: Some(meta),
        queue: Some(queue()),
        kind: None,
    }
}

/// A route backend balances with the parent Service's estimator.
fn usable_backend(svc: &WeightedService, policy: &OutboundPolicy) -> proto::Backend {
    balancer(
        service_meta(&svc.namespace, &svc.name, svc.port.get()),
        &svc.authority,
        service_load(policy.load_biaser.as_ref()),
    )
}

/// An HTTP or gRPC route (`http_route` and `grpc_route` of the proxy API
/// have one shape in two sets of types): each rule's backends with their
/// filters (a backend that cannot be used fails with `$failure`), the
/// default backend when a rule has none, and the rule's timeouts and retry,
/// else the policy's.
macro_rules! rules_route {
    (
        $(#[$doc:meta])*
        fn $name:ident(&$route:ty) -> $out:ident in $m:ident {
            filters: $each:ident($filter:path),
            failure: |$message:ident| $failure:expr,
            matches: $match_fn:path,
            retry: $retry_field:ident, $retry_fn:path $(,)?
        }
    ) => {
        $(#[$doc])*
        #[allow(deprecated)] // `request_timeout` is still sent, for older proxies.
        fn $name(
            id: &RouteId,
            route: &$route,
            policy: &OutboundPolicy,
            default_backend: &proto::Backend,
            allow_l5d_request_headers: bool,
        ) -> proto::$out {
            use proto::$m::{Distribution, RouteBackend, WeightedRouteBackend, distribution};
            let rules = route
                .rules
                .iter()
                .map(|rule| {
                    let backends: Vec<_> = rule
                        .backends
                        .iter()
                        .map(|b| {
                            let (weight, resolved) = resolve(b);
                            let backend = match resolved {
                                Resolved::Usable(svc) => RouteBackend {
                                    backend: Some(usable_backend(svc, policy)),
                                    filters: svc.filters.iter().$each($filter).collect(),
                                    ..Default::default()
                                },
                                Resolved::Forward(net, addr) => RouteBackend {
                                    backend: Some(egress_backend(net, addr)),
                                    filters: net.filters.iter().$each($filter).collect(),
                                    ..Default::default()
                                },
                                Resolved::Failing { meta, message: $message } => RouteBackend {
                                    backend: Some(failing_backend(meta)),
                                    filters: vec![proto::$m::Filter {
                                        kind: Some($failure),
                                    }],
                                    ..Default::default()
                                },
                            };
                            WeightedRouteBackend {
                                backend: Some(backend),
                                weight,
                            }
                        })
                        .collect();
                    let distribution = if backends.is_empty() {
                        distribution::Kind::FirstAvailable(distribution::FirstAvailable {
                            backends: vec![RouteBackend {
                                backend: Some(default_backend.clone()),
                                ..Default::default()
                            }],
                        })
                    } else {
                        distribution::Kind::RandomAvailable(distribution::RandomAvailable {
                            backends,
                        })
                    };
                    let rule_timeouts = if rule.timeouts == RouteTimeouts::default() {
                        &policy.timeouts
                    } else {
                        &rule.timeouts
                    };
                    let retry = rule.retry.as_ref().or(policy.$retry_field.as_ref());
                    proto::$m::Rule {
                        matches: rule.matches.iter().map($match_fn).collect(),
                        filters: rule.filters.iter().$each($filter).collect(),
                        backends: Some(Distribution {
                            kind: Some(distribution),
                        }),
                        request_timeout: rule_timeouts.request.and_then(duration),
                        timeouts: Some(timeouts(rule_timeouts)),
                        retry: retry.map($retry_fn),
                        allow_l5d_request_headers,
                    }
                })
                .collect();
            proto::$out {
                metadata: route_meta(id),
                hosts: route.hostnames.iter().map(host_match).collect(),
                rules,
            }
        }
    };
}

rules_route! {
    /// An HTTPRoute (policy or Gateway API); a backend that cannot be used
    /// fails with a 500.
    fn http_route(&HttpRoute) -> HttpRoute in http_route {
        filters: map(http_filter),
        failure: |message| proto::http_route::filter::Kind::FailureInjector(
            route_proto::HttpFailureInjector {
                status: 500,
                message,
                ratio: None,
            },
        ),
        matches: route_match,
        retry: http_retry, http_retry,
    }
}

rules_route! {
    /// A GRPCRoute (filters the proxy API cannot carry are left out); a
    /// backend that cannot be used fails with code 500, as the original's.
    fn grpc_route(&GrpcRoute) -> GrpcRoute in grpc_route {
        filters: filter_map(grpc_filter),
        failure: |message| proto::grpc_route::filter::Kind::FailureInjector(
            grpc_proto::GrpcFailureInjector {
                code: 500,
                message,
                ratio: None,
            },
        ),
        matches: grpc_match,
        retry: grpc_retry, grpc_retry,
    }
}

/// `egress-fallback`: an address outside the cluster, forwarded as is
/// (Detect; opaque, HTTP/1 and HTTP/2 all go to the original address).
pub fn egress_fallback(original_dst: SocketAddr) -> proto::OutboundPolicy {
    let meta = default_meta("egress-fallback");
    let backend = proto::Backend {
        metadata: meta.clone(),
        queue: Some(queue()),
        kind: Some(backend::Kind::Forward(destination::WeightedAddr {
            addr: Some(original_dst.into()),
            weight: 1,
            ..Default::default()
        })),
    };
    let opaque = proxy_protocol::Opaque {
        routes: vec![catch_all_opaque_route(
            meta.clone(),
            Vec::new(),
            backend.clone(),
        )],
    };
    let http_routes = vec![proto::HttpRoute {
        metadata: meta.clone(),
        hosts: Vec::new(),
        rules: vec![proto::http_route::Rule {
            matches: vec![route_proto::HttpRouteMatch::default()],
            backends: Some(proto::http_route::Distribution {
                kind: Some(proto::http_route::distribution::Kind::FirstAvailable(
                    proto::http_route::distribution::FirstAvailable {
                        backends: vec![proto::http_route::RouteBackend {
                            backend: Some(backend),
                            ..Default::default()
                        }],
                    },
                )),
            }),
            ..Default::default()
        }],
    }];
    proto::OutboundPolicy {
        metadata: meta,
        protocol: Some(proto::ProxyProtocol {
            kind: Some(detect(opaque, http_routes, None)),
        }),
    }
}

/// `undefined-port`: a ClusterIP on a port the Service does not declare
/// (opaque, no backends, forbidden).
pub fn undefined_port(namespace: &str, name: &str, port: u16) -> proto::OutboundPolicy {
    proto::OutboundPolicy {
        metadata: Some(service_meta(namespace, name, port)),
        protocol: Some(proto::ProxyProtocol {
            kind: Some(proxy_protocol::Kind::Opaque(proxy_protocol::Opaque {
                routes: vec![proto::OpaqueRoute {
                    metadata: default_meta("undefined-port"),
                    rules: vec![proto::opaque_route::Rule {
                        backends: Some(proto::opaque_route::Distribution {
                            kind: Some(proto::opaque_route::distribution::Kind::Empty(
                                proto::opaque_route::distribution::Empty {},
                            )),
                        }),
                        filters: vec![proto::opaque_route::Filter {
                            kind: Some(proto::opaque_route::filter::Kind::Forbidden(
                                opaque_route::Forbidden {},
                            )),
                        }],
                    }],
                }],
            })),
        }),
    }
}

mod l4;

pub mod egress;
pub use egress::to_egress_policy;

#[cfg(test)]
mod tests;
