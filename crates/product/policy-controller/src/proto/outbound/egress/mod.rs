//! The proxy API view of an egress address: `egress-fallback` when no
//! EgressNetwork captures it, else the EgressNetwork's policy as the
//! original encodes it — the original destination as the default backend,
//! the attached routes (oldest first), and after HTTP, gRPC and TLS routes
//! (and alone when there are none) a default route that forwards
//! (`*-egress-allow`) or refuses (`*-egress-deny`: HTTP 403, gRPC
//! `PERMISSION_DENIED`, `Forbidden` for TLS and opaque traffic) what no
//! route matched. Only the oldest TCP route is sent, without a default.

use std::net::SocketAddr;

use linkerd2_proxy_api::{
    grpc_route as grpc_proto, http_route as route_proto, opaque_route,
    outbound::{self as proto, proxy_protocol},
    tls_route,
};

use super::{
    DETECT_TIMEOUT, default_meta, duration, egress_fallback, egress_meta, failure_accrual,
    forward_backend, grpc_retry, grpc_route, http_retry, http_route, l4, timeouts,
};
use crate::core::{
    egress::{EgressPolicy, TrafficPolicy},
    outbound::{OutboundPolicy, ordered},
};

/// The gRPC status the deny route fails requests with.
const PERMISSION_DENIED: u32 = 7;
const DENIED_MESSAGE: &str = "traffic not allowed";

/// The proxy API view of `policy` for a connection to `original_dst`.
pub fn to_egress_policy(
    policy: &EgressPolicy,
    original_dst: SocketAddr,
    allow_l5d_request_headers: bool,
) -> proto::OutboundPolicy {
    let (traffic_policy, policy) = match policy {
        EgressPolicy::Fallback => return egress_fallback(original_dst),
        EgressPolicy::Network {
            traffic_policy,
            policy,
        } => (*traffic_policy, policy),
    };
    let meta = egress_meta(&policy.namespace, &policy.name, policy.port.get());
    let default_backend = forward_backend(meta.clone(), original_dst, 1);
    let accrual = policy
        .accrual
        .map(|a| failure_accrual(a, policy.honor_retry_after));
    let http_routes = || {
        let mut routes: Vec<_> = ordered(&policy.http_routes)
            .into_iter()
            .map(|(id, r)| http_route(id, r, policy, &default_backend, allow_l5d_request_headers))
            .collect();
        routes.push(http_egress_route(traffic_policy, policy, &default_backend));
        routes
    };
    let detect = |routes: Vec<proto::HttpRoute>| {
        proxy_protocol::Kind::Detect(proxy_protocol::Detect {
            timeout: duration(DETECT_TIMEOUT),
            opaque: Some(proxy_protocol::Opaque {
                routes: vec![opaque_egress_route(traffic_policy, &default_backend)],
            }),
            http1: Some(proxy_protocol::Http1 {
                routes: routes.clone(),
                failure_accrual: accrual,
            }),
            http2: Some(proxy_protocol::Http2 {
                routes,
                failure_accrual: accrual,
            }),
        })
    };
    let kind = if !policy.grpc_routes.is_empty() {
        let mut routes: Vec<_> = ordered(&policy.grpc_routes)
            .into_iter()
            .map(|(id, r)| grpc_route(id, r, policy, &default_backend, allow_l5d_request_headers))
            .collect();
        routes.push(grpc_egress_route(traffic_policy, policy, &default_backend));
        proxy_protocol::Kind::Grpc(proxy_protocol::Grpc {
            routes,
            failure_accrual: accrual,
        })
    } else if !policy.http_routes.is_empty() {
        detect(http_routes())
    } else if !policy.tls_routes.is_empty() {
        let mut routes: Vec<_> = ordered(&policy.tls_routes)
            .into_iter()
            .map(|(id, r)| l4::tls_route(id, r, &default_backend))
            .collect();
        routes.push(tls_egress_route(traffic_policy, &default_backend));
        proxy_protocol::Kind::Tls(proxy_protocol::Tls { routes })
    } else if !policy.tcp_routes.is_empty() {
        l4::tcp(policy, &default_backend)
    } else {
        detect(http_routes())
    };
    proto::OutboundPolicy {
        metadata: Some(meta),
        protocol: Some(proto::ProxyProtocol { kind: Some(kind) }),
    }
}

fn route_name(
    protocol: &str,
    traffic_policy: TrafficPolicy,
) -> Option<linkerd2_proxy_api::meta::Metadata> {
    let verdict = match traffic_policy {
        TrafficPolicy::Allow => "allow",
        TrafficPolicy::Deny => "deny",
    };
    default_meta(&format!("{protocol}-egress-{verdict}"))
}

#[allow(deprecated)] // `request_timeout` is still sent, for older proxies.
fn http_egress_route(
    traffic_policy: TrafficPolicy,
    policy: &OutboundPolicy,
    backend: &proto::Backend,
) -> proto::HttpRoute {
    let filters = match traffic_policy {
        TrafficPolicy::Allow => Vec::new(),
        TrafficPolicy::Deny => vec![proto::http_route::Filter {
            kind: Some(proto::http_route::filter::Kind::FailureInjector(
                route_proto::HttpFailureInjector {
                    status: 403,
                    message: DENIED_MESSAGE.to_string(),
                    ratio: None,
                },
            )),
        }],
    };
    proto::HttpRoute {
        metadata: route_name("http", traffic_policy),
        hosts: Vec::new(),
        rules: vec![proto::http_route::Rule {
            matches: vec![route_proto::HttpRouteMatch {
                path: Some(route_proto::PathMatch {
                    kind: Some(route_proto::path_match::Kind::Prefix("/".to_string())),
                }),
                ..Default::default()
            }],
            filters,
            backends: Some(proto::http_route::Distribution {
                kind: Some(proto::http_route::distribution::Kind::FirstAvailable(
                    proto::http_route::distribution::FirstAvailable {
                        backends: vec![proto::http_route::RouteBackend {
                            backend: Some(backend.clone()),
                            ..Default::default()
                        }],
                    },
                )),
            }),
            request_timeout: policy.timeouts.request.and_then(duration),
            timeouts: Some(timeouts(&policy.timeouts)),
            retry: policy.http_retry.as_ref().map(http_retry),
            allow_l5d_request_headers: false,
        }],
    }
}

#[allow(deprecated)] // `request_timeout` is still sent, for older proxies.
fn grpc_egress_route(
    traffic_policy: TrafficPolicy,
    policy: &OutboundPolicy,
    backend: &proto::Backend,
) -> proto::GrpcRoute {
    let filters = match traffic_policy {
        TrafficPolicy::Allow => Vec::new(),
        TrafficPolicy::Deny => vec![proto::grpc_route::Filter {
            kind: Some(proto::grpc_route::filter::Kind::FailureInjector(
                grpc_proto::GrpcFailureInjector {
                    code: PERMISSION_DENIED,
                    message: DENIED_MESSAGE.to_string(),
                    ratio: None,
                },
            )),
        }],
    };
    proto::GrpcRoute {
        metadata: route_name("grpc", traffic_policy),
        hosts: Vec::new(),
        rules: vec![proto::grpc_route::Rule {
            matches: Vec::new(),
            filters,
            backends: Some(proto::grpc_route::Distribution {
                kind: Some(proto::grpc_route::distribution::Kind::FirstAvailable(
                    proto::grpc_route::distribution::FirstAvailable {
                        backends: vec![proto::grpc_route::RouteBackend {
                            backend: Some(backend.clone()),
                            ..Default::default()
                        }],
                    },
                )),
            }),
            request_timeout: policy.timeouts.request.and_then(duration),
            timeouts: Some(timeouts(&policy.timeouts)),
            retry: policy.grpc_retry.as_ref().map(grpc_retry),
            allow_l5d_request_headers: false,
        }],
    }
}

fn opaque_egress_route(
    traffic_policy: TrafficPolicy,
    backend: &proto::Backend,
) -> proto::OpaqueRoute {
    let filters = match traffic_policy {
        TrafficPolicy::Allow => Vec::new(),
        TrafficPolicy::Deny => vec![proto::opaque_route::Filter {
            kind: Some(proto::opaque_route::filter::Kind::Forbidden(
                opaque_route::Forbidden {},
            )),
        }],
    };
    proto::OpaqueRoute {
        metadata: route_name("tcp", traffic_policy),
        rules: vec![proto::opaque_route::Rule {
            backends: Some(proto::opaque_route::Distribution {
                kind: Some(proto::opaque_route::distribution::Kind::FirstAvailable(
                    proto::opaque_route::distribution::FirstAvailable {
                        backends: vec![proto::opaque_route::RouteBackend {
                            backend: Some(backend.clone()),
                            filters: Vec::new(),
                        }],
                    },
                )),
            }),
            filters,
        }],
    }
}

fn tls_egress_route(traffic_policy: TrafficPolicy, backend: &proto::Backend) -> proto::TlsRoute {
    let filters = match traffic_policy {
        TrafficPolicy::Allow => Vec::new(),
        TrafficPolicy::Deny => vec![proto::tls_route::Filter {
            kind: Some(proto::tls_route::filter::Kind::Forbidden(
                opaque_route::Forbidden {},
            )),
        }],
    };
    proto::TlsRoute {
        metadata: route_name("tls", traffic_policy),
        snis: Vec::<tls_route::SniMatch>::new(),
        rules: vec![proto::tls_route::Rule {
            backends: Some(proto::tls_route::Distribution {
                kind: Some(proto::tls_route::distribution::Kind::FirstAvailable(
                    proto::tls_route::distribution::FirstAvailable {
                        backends: vec![proto::tls_route::RouteBackend {
                            backend: Some(backend.clone()),
                            filters: Vec::new(),
                        }],
                    },
                )),
            }),
            filters,
        }],
    }
}

#[cfg(test)]
mod tests;
