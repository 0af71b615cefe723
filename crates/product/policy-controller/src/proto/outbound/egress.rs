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
    catch_all_grpc_route, catch_all_http_route, catch_all_opaque_route, default_meta, detect,
    egress_fallback, egress_meta, failure_accrual, forward_backend, grpc_route, http_route, l4,
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
    let detect_http = |routes: Vec<proto::HttpRoute>| {
        let opaque = proxy_protocol::Opaque {
            routes: vec![opaque_egress_route(traffic_policy, &default_backend)],
        };
        detect(opaque, routes, accrual)
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
        detect_http(http_routes())
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
        detect_http(http_routes())
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
    catch_all_http_route(route_name("http", traffic_policy), filters, policy, backend)
}

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
    catch_all_grpc_route(route_name("grpc", traffic_policy), filters, policy, backend)
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
    catch_all_opaque_route(route_name("tcp", traffic_policy), filters, backend.clone())
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
