//! The proxy API encoding of outbound policies, field by field.

use std::{collections::BTreeMap, num::NonZeroU16};

use linkerd2_proxy_api::net;

use super::*;
use crate::core::{
    outbound::{GrpcRouteMatch, OutboundRoute, OutboundRule},
    routes::HeaderModifierFilter,
};

fn port(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).expect("nonzero")
}

fn policy(app_protocol: Option<AppProtocol>) -> OutboundPolicy {
    OutboundPolicy {
        namespace: "ns".into(),
        name: "web".into(),
        port: port(80),
        authority: "web.ns.svc.cluster.local:80".into(),
        app_protocol,
        accrual: None,
        load_biaser: None,
        honor_retry_after: false,
        http_retry: None,
        grpc_retry: None,
        timeouts: RouteTimeouts::default(),
        http_routes: BTreeMap::new(),
        grpc_routes: BTreeMap::new(),
        tls_routes: BTreeMap::new(),
        tcp_routes: BTreeMap::new(),
    }
}

fn kind(p: &proto::OutboundPolicy) -> proxy_protocol::Kind {
    p.protocol.clone().and_then(|p| p.kind).expect("protocol")
}

fn expected_backend() -> proto::Backend {
    proto::Backend {
        metadata: Some(service_meta("ns", "web", 80)),
        queue: Some(proto::Queue {
            capacity: 100,
            failfast_timeout: Some(prost_types::Duration {
                seconds: 3,
                nanos: 0,
            }),
        }),
        kind: Some(backend::Kind::Balancer(backend::BalanceP2c {
            discovery: Some(backend::EndpointDiscovery {
                kind: Some(backend::endpoint_discovery::Kind::Dst(
                    backend::endpoint_discovery::DestinationGet {
                        path: "web.ns.svc.cluster.local:80".into(),
                    },
                )),
            }),
            load: Some(backend::balance_p2c::Load::PeakEwma(
                backend::balance_p2c::PeakEwma {
                    default_rtt: Some(prost_types::Duration {
                        seconds: 0,
                        nanos: 30_000_000,
                    }),
                    decay: Some(prost_types::Duration {
                        seconds: 10,
                        nanos: 0,
                    }),
                },
            )),
        })),
    }
}

#[test]
fn default_service_policy_detects_with_default_routes() {
    let out = to_outbound_policy(&policy(None), false);
    assert_eq!(out.metadata, Some(service_meta("ns", "web", 80)));
    let proxy_protocol::Kind::Detect(detect) = kind(&out) else {
        panic!("expected detect");
    };
    assert_eq!(detect.timeout, duration(Duration::from_secs(10)));
    let opaque = detect.opaque.expect("opaque");
    assert_eq!(opaque.routes, vec![opaque_route(expected_backend())]);
    assert_eq!(opaque.routes[0].metadata, default_meta("opaq"));
    let http1 = detect.http1.expect("http1");
    assert_eq!(
        Some(http1.clone()),
        detect.http2.map(|h| proxy_protocol::Http1 {
            routes: h.routes,
            failure_accrual: h.failure_accrual,
        })
    );
    assert_eq!(http1.routes.len(), 1);
    let route = &http1.routes[0];
    assert_eq!(route.metadata, default_meta("http"));
    let rule = &route.rules[0];
    assert_eq!(
        rule.matches[0].path,
        Some(route_proto::PathMatch {
            kind: Some(route_proto::path_match::Kind::Prefix("/".into()))
        })
    );
    assert_eq!(
        rule.backends,
        Some(proto::http_route::Distribution {
            kind: Some(proto::http_route::distribution::Kind::FirstAvailable(
                proto::http_route::distribution::FirstAvailable {
                    backends: vec![proto::http_route::RouteBackend {
                        backend: Some(expected_backend()),
                        ..Default::default()
                    }]
                }
            ))
        })
    );
    assert_eq!(rule.timeouts, Some(route_proto::Timeouts::default()));
    assert!(rule.retry.is_none());
}

#[test]
fn app_protocols_choose_the_protocol() {
    assert!(matches!(
        kind(&to_outbound_policy(&policy(Some(AppProtocol::Http1)), false)),
        proxy_protocol::Kind::Http1(h) if h.routes.len() == 1
    ));
    assert!(matches!(
        kind(&to_outbound_policy(&policy(Some(AppProtocol::Http2)), false)),
        proxy_protocol::Kind::Http2(h) if h.routes.len() == 1
    ));
    for p in [AppProtocol::Opaque, AppProtocol::Unknown("x".into())] {
        let proxy_protocol::Kind::Opaque(opaque) =
            kind(&to_outbound_policy(&policy(Some(p)), false))
        else {
            panic!("expected opaque");
        };
        assert_eq!(opaque.routes, vec![opaque_route(expected_backend())]);
    }
    let mut grpc = policy(Some(AppProtocol::Http2));
    grpc.grpc_routes.insert(
        RouteId {
            group: "gateway.networking.k8s.io".into(),
            kind: "GRPCRoute".into(),
            namespace: "ns".into(),
            name: "rpc".into(),
        },
        OutboundRoute {
            hostnames: vec![],
            rules: vec![OutboundRule {
                matches: vec![GrpcRouteMatch::default()],
                backends: vec![],
                retry: None,
                timeouts: RouteTimeouts::default(),
                filters: vec![],
            }],
            created_at: None,
        },
    );
    assert!(matches!(
        kind(&to_outbound_policy(&grpc, false)),
        proxy_protocol::Kind::Grpc(g) if g.routes.len() == 1
    ));
    // Without appProtocol, gRPC routes make it gRPC too.
    grpc.app_protocol = None;
    assert!(matches!(
        kind(&to_outbound_policy(&grpc, false)),
        proxy_protocol::Kind::Grpc(_)
    ));
}

#[test]
fn routes_backends_timeouts_retries_and_accrual() {
    let mut p = policy(Some(AppProtocol::Http1));
    p.accrual = Some(FailureAccrual::Consecutive {
        max_failures: 7,
        backoff: crate::core::outbound::Backoff {
            min_penalty: Duration::from_secs(1),
            max_penalty: Duration::from_secs(60),
            jitter: 0.5,
        },
    });
    p.timeouts.request = Some(Duration::from_secs(9));
    p.http_retry = Some(RouteRetry {
        limit: 2,
        timeout: None,
        conditions: Some(vec![HttpRetryCondition {
            status_min: 500,
            status_max: 599,
        }]),
    });
    let id = RouteId {
        group: "gateway.networking.k8s.io".into(),
        kind: "HTTPRoute".into(),
        namespace: "ns".into(),
        name: "r".into(),
    };
    let other = WeightedService {
        weight: 3,
        namespace: "ns".into(),
        name: "other".into(),
        port: port(8080),
        authority: "other.ns.svc.cluster.local:8080".into(),
        filters: vec![Filter::RequestHeaderModifier(HeaderModifierFilter {
            set: vec![("x".into(), "y".into())],
            ..Default::default()
        })],
        exists: true,
    };
    let missing = WeightedService {
        weight: 1,
        name: "gone".into(),
        exists: false,
        filters: vec![],
        ..other.clone()
    };
    p.http_routes.insert(
        id.clone(),
        OutboundRoute {
            hostnames: vec![],
            rules: vec![OutboundRule {
                matches: vec![],
                backends: vec![
                    Backend::Service(other),
                    Backend::Service(missing),
                    Backend::Invalid {
                        weight: 1,
                        message: "bad".into(),
                    },
                ],
                retry: None,
                timeouts: RouteTimeouts {
                    response: Some(Duration::from_secs(1)),
                    ..Default::default()
                },
                filters: vec![],
            }],
            created_at: None,
        },
    );
    let proxy_protocol::Kind::Http1(http1) = kind(&to_outbound_policy(&p, true)) else {
        panic!("expected http1");
    };
    assert!(matches!(
        http1.failure_accrual.and_then(|a| a.kind),
        Some(proto::failure_accrual::Kind::ConsecutiveFailures(c)) if c.max_failures == 7
            && c.backoff.as_ref().is_some_and(|b| b.jitter_ratio == 0.5 && b.max_backoff == duration(Duration::from_secs(60)))
    ));
    assert_eq!(http1.routes.len(), 1, "no default route beside a resource");
    let route = &http1.routes[0];
    assert_eq!(route.metadata, route_meta(&id));
    let rule = &route.rules[0];
    assert!(rule.allow_l5d_request_headers);
    // The rule's own timeouts; the Service's retry.
    assert_eq!(
        rule.timeouts.as_ref().and_then(|t| t.response),
        duration(Duration::from_secs(1))
    );
    assert_eq!(rule.timeouts.as_ref().and_then(|t| t.request), None);
    let retry = rule.retry.as_ref().expect("service retry");
    assert_eq!((retry.max_retries, retry.max_request_bytes), (2, 65536));
    let Some(proto::http_route::distribution::Kind::RandomAvailable(random)) =
        rule.backends.as_ref().and_then(|d| d.kind.clone())
    else {
        panic!("expected random available");
    };
    let weights: Vec<_> = random.backends.iter().map(|b| b.weight).collect();
    assert_eq!(weights, [3, 1, 1]);
    let usable = random.backends[0].backend.as_ref().expect("backend");
    assert!(matches!(
        &usable.filters[..],
        [proto::http_route::Filter {
            kind: Some(proto::http_route::filter::Kind::RequestHeaderModifier(_))
        }]
    ));
    let failing = |i: usize| {
        let b = random.backends[i].backend.as_ref().expect("backend");
        let Some(proto::http_route::filter::Kind::FailureInjector(f)) = b.filters[0].kind.clone()
        else {
            panic!("expected failure injector");
        };
        (
            b.backend.as_ref().and_then(|b| b.kind.clone()).is_none(),
            f.status,
            f.message,
        )
    };
    assert_eq!(
        failing(1),
        (true, 500, "Service not found gone".to_string())
    );
    assert_eq!(failing(2), (true, 500, "bad".to_string()));
}

#[test]
fn fixed_answers() {
    let addr: std::net::SocketAddr = "192.0.2.1:443".parse().expect("addr");
    let out = egress_fallback(addr);
    assert_eq!(out.metadata, default_meta("egress-fallback"));
    let proxy_protocol::Kind::Detect(detect) = kind(&out) else {
        panic!("expected detect");
    };
    let http = &detect.http1.expect("http1").routes[0];
    let Some(proto::http_route::distribution::Kind::FirstAvailable(first)) =
        http.rules[0].backends.as_ref().and_then(|d| d.kind.clone())
    else {
        panic!("first available");
    };
    assert_eq!(
        first.backends[0]
            .backend
            .as_ref()
            .and_then(|b| b.kind.clone()),
        Some(backend::Kind::Forward(destination::WeightedAddr {
            addr: Some(net::TcpAddress::from(addr)),
            weight: 1,
            ..Default::default()
        }))
    );
    assert!(detect.opaque.is_some() && detect.http2.is_some());

    let out = undefined_port("ns", "web", 81);
    assert_eq!(out.metadata, Some(service_meta("ns", "web", 81)));
    let proxy_protocol::Kind::Opaque(opaque) = kind(&out) else {
        panic!("expected opaque");
    };
    let route = &opaque.routes[0];
    assert_eq!(route.metadata, default_meta("undefined-port"));
    assert!(matches!(
        route.rules[0]
            .backends
            .as_ref()
            .and_then(|d| d.kind.clone()),
        Some(proto::opaque_route::distribution::Kind::Empty(_))
    ));
    assert!(matches!(
        route.rules[0].filters[0].kind,
        Some(proto::opaque_route::filter::Kind::Forbidden(_))
    ));
}

#[test]
fn unified_accrual_and_load_biaser() {
    let mut p = policy(None);
    p.accrual = Some(FailureAccrual::Unified {
        max_failures: 7,
        backoff: crate::core::outbound::Backoff {
            min_penalty: Duration::from_secs(1),
            max_penalty: Duration::from_secs(60),
            jitter: 0.5,
        },
        success_rate: crate::core::outbound::SuccessRate {
            threshold: 0.8,
            window: Duration::from_secs(10),
            min_requests: 5,
        },
    });
    p.honor_retry_after = true;
    p.load_biaser = Some(LoadBiaser {
        penalty: Duration::from_secs(5),
        max_retry_after: Duration::from_secs(300),
    });
    let proxy_protocol::Kind::Detect(detect) = kind(&to_outbound_policy(&p, false)) else {
        panic!("expected detect");
    };
    let http1 = detect.http1.expect("http1");
    let Some(proto::failure_accrual::Kind::Unified(unified)) =
        http1.failure_accrual.and_then(|a| a.kind)
    else {
        panic!("expected unified");
    };
    assert_eq!(unified.success_rate_threshold, 0.8);
    assert_eq!(unified.decay, duration(Duration::from_secs(10)));
    assert_eq!(
        (unified.min_requests, unified.max_consecutive_failures),
        (5, 7)
    );
    assert!(unified.backoff.is_some_and(|b| b.respect_retry_after_hint));
    let backend = match http1.routes[0].rules[0]
        .backends
        .as_ref()
        .and_then(|d| d.kind.clone())
    {
        Some(proto::http_route::distribution::Kind::FirstAvailable(f)) => {
            f.backends[0].backend.clone()
        }
        _ => None,
    };
    let Some(backend::Kind::Balancer(p2c)) = backend.and_then(|b| b.kind) else {
        panic!("balancer");
    };
    assert!(matches!(
        p2c.load,
        Some(backend::balance_p2c::Load::PenaltyPeakEwma(l)) if l.penalty == duration(Duration::from_secs(5))
            && l.max_retry_after == duration(Duration::from_secs(300))
            && l.penalty_decay == duration(Duration::from_secs(10))
    ));
    // An opaque Service's backend keeps the plain estimator.
    p.app_protocol = Some(AppProtocol::Opaque);
    let proxy_protocol::Kind::Opaque(opaque) = kind(&to_outbound_policy(&p, false)) else {
        panic!("expected opaque");
    };
    assert_eq!(opaque.routes, vec![opaque_route(expected_backend())]);
}

#[test]
fn tls_and_tcp_routes_choose_their_protocols() {
    let l4 = |name: &str, kind: &str, secs: u64| {
        (
            RouteId {
                group: "gateway.networking.k8s.io".into(),
                kind: kind.into(),
                namespace: "ns".into(),
                name: name.into(),
            },
            OutboundRoute {
                hostnames: vec![crate::core::routes::host_match("*.example.com")],
                rules: vec![OutboundRule {
                    matches: vec![],
                    backends: vec![Backend::Invalid {
                        weight: 1,
                        message: "bad".into(),
                    }],
                    retry: None,
                    timeouts: RouteTimeouts::default(),
                    filters: vec![],
                }],
                created_at: Some(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(secs)),
            },
        )
    };
    let mut p = policy(None);
    p.tls_routes = [l4("tls", "TLSRoute", 1)].into();
    let proxy_protocol::Kind::Tls(tls) = kind(&to_outbound_policy(&p, false)) else {
        panic!("expected tls");
    };
    assert_eq!(tls.routes.len(), 1);
    assert!(matches!(
        tls.routes[0].snis[0].r#match,
        Some(linkerd2_proxy_api::tls_route::sni_match::Match::Suffix(_))
    ));
    // TCP routes on an opaque port: only the oldest is sent.
    let mut p = policy(Some(AppProtocol::Opaque));
    p.tcp_routes = [l4("new", "TCPRoute", 2), l4("old", "TCPRoute", 1)].into();
    let proxy_protocol::Kind::Opaque(opaque) = kind(&to_outbound_policy(&p, false)) else {
        panic!("expected opaque");
    };
    assert_eq!(opaque.routes.len(), 1);
    assert_eq!(
        opaque.routes[0].metadata,
        route_meta(&l4("old", "TCPRoute", 1).0)
    );
    let Some(proto::opaque_route::distribution::Kind::RandomAvailable(random)) = opaque.routes[0]
        .rules[0]
        .backends
        .as_ref()
        .and_then(|d| d.kind.clone())
    else {
        panic!("random available");
    };
    let filter = random.backends[0]
        .backend
        .as_ref()
        .map(|b| b.filters.clone());
    assert!(matches!(
        filter.as_deref(),
        Some([proto::opaque_route::Filter { kind: Some(proto::opaque_route::filter::Kind::Invalid(i)) }]) if i.message == "bad"
    ));
}

mod egress;
