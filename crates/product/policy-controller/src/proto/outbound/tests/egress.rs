//! The proxy API view of EgressNetwork policies: metadata, the forwarding
//! default backend, and the Allow/Deny default routes of each protocol.

use std::{collections::BTreeMap, num::NonZeroU16};

use linkerd2_proxy_api::{
    meta::{Metadata, metadata},
    outbound::{backend, proxy_protocol},
};

use super::*;
use crate::core::egress::{EgressPolicy, TrafficPolicy};
use crate::core::outbound::{
    L4Route, OutboundRoute, OutboundRule, RouteId, RouteTimeouts, WeightedEgressNetwork,
};

fn egress_policy(traffic_policy: TrafficPolicy) -> EgressPolicy {
    EgressPolicy::Network {
        traffic_policy,
        policy: Box::new(OutboundPolicy {
            namespace: "linkerd-egress".into(),
            name: "ext".into(),
            port: NonZeroU16::new(443).expect("port"),
            authority: String::new(),
            app_protocol: None,
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
        }),
    }
}

fn dst() -> SocketAddr {
    "203.0.113.5:443".parse().expect("addr")
}

fn default_name(m: &Option<Metadata>) -> Option<&str> {
    match m.as_ref()?.kind.as_ref()? {
        metadata::Kind::Default(n) => Some(n),
        metadata::Kind::Resource(_) => None,
    }
}

fn detect(p: &proto::OutboundPolicy) -> proxy_protocol::Detect {
    match p.protocol.clone().and_then(|p| p.kind) {
        Some(proxy_protocol::Kind::Detect(d)) => d,
        other => panic!("expected detect, got {other:?}"),
    }
}

#[test]
fn allow_forwards_everything_to_the_original_destination() {
    let out = to_egress_policy(&egress_policy(TrafficPolicy::Allow), dst(), false);
    let Some(metadata::Kind::Resource(res)) = out.metadata.clone().and_then(|m| m.kind) else {
        panic!("resource metadata");
    };
    assert_eq!(
        (
            res.group.as_str(),
            res.kind.as_str(),
            res.namespace.as_str(),
            res.name.as_str(),
            res.port
        ),
        (
            "policy.linkerd.io",
            "EgressNetwork",
            "linkerd-egress",
            "ext",
            443
        )
    );
    let d = detect(&out);
    let opaque = d.opaque.expect("opaque");
    assert_eq!(
        default_name(&opaque.routes[0].metadata),
        Some("tcp-egress-allow")
    );
    assert!(opaque.routes[0].rules[0].filters.is_empty());
    let http1 = d.http1.expect("http1");
    assert_eq!(http1.routes.len(), 1);
    assert_eq!(
        default_name(&http1.routes[0].metadata),
        Some("http-egress-allow")
    );
    let rule = &http1.routes[0].rules[0];
    assert!(rule.filters.is_empty());
    let Some(proto::http_route::distribution::Kind::FirstAvailable(first)) =
        rule.backends.clone().and_then(|b| b.kind)
    else {
        panic!("first available");
    };
    let backend = first.backends[0].backend.clone().expect("backend");
    let Some(backend::Kind::Forward(addr)) = backend.kind else {
        panic!("forward backend");
    };
    assert_eq!(addr.addr, Some(dst().into()));
    assert_eq!(d.http2.expect("http2").routes, http1.routes);
}

#[test]
fn deny_refuses_what_no_route_matches() {
    let out = to_egress_policy(&egress_policy(TrafficPolicy::Deny), dst(), false);
    let d = detect(&out);
    let opaque = &d.opaque.expect("opaque").routes[0];
    assert_eq!(default_name(&opaque.metadata), Some("tcp-egress-deny"));
    assert!(matches!(
        opaque.rules[0].filters[0].kind,
        Some(proto::opaque_route::filter::Kind::Forbidden(_))
    ));
    let http = &d.http1.expect("http1").routes[0];
    assert_eq!(default_name(&http.metadata), Some("http-egress-deny"));
    let Some(proto::http_route::filter::Kind::FailureInjector(f)) = &http.rules[0].filters[0].kind
    else {
        panic!("failure injector");
    };
    assert_eq!((f.status, f.message.as_str()), (403, "traffic not allowed"));
}

fn l4_route() -> L4Route {
    OutboundRoute {
        hostnames: vec![],
        rules: vec![OutboundRule {
            matches: vec![],
            backends: vec![crate::core::outbound::Backend::EgressNetwork(
                WeightedEgressNetwork {
                    weight: 1,
                    namespace: "linkerd-egress".into(),
                    name: "ext".into(),
                    port: None,
                    filters: vec![],
                    forward: Some(dst()),
                },
            )],
            retry: None,
            timeouts: RouteTimeouts::default(),
            filters: vec![],
        }],
        created_at: None,
    }
}

fn route_id(kind: &str) -> RouteId {
    RouteId {
        group: "gateway.networking.k8s.io".into(),
        kind: kind.into(),
        namespace: "linkerd-egress".into(),
        name: "r".into(),
    }
}

#[test]
fn tls_routes_get_the_deny_route_after_them_and_tcp_routes_do_not() {
    let mut policy = egress_policy(TrafficPolicy::Deny);
    let EgressPolicy::Network { policy: p, .. } = &mut policy else {
        unreachable!()
    };
    p.tls_routes.insert(route_id("TLSRoute"), l4_route());
    let out = to_egress_policy(&policy, dst(), false);
    let Some(proxy_protocol::Kind::Tls(tls)) = out.protocol.and_then(|p| p.kind) else {
        panic!("tls");
    };
    assert_eq!(tls.routes.len(), 2);
    assert_eq!(
        default_name(&tls.routes[1].metadata),
        Some("tls-egress-deny")
    );
    // The route's own backend forwards to the original destination.
    let Some(proto::tls_route::distribution::Kind::RandomAvailable(random)) =
        tls.routes[0].rules[0].backends.clone().and_then(|b| b.kind)
    else {
        panic!("random available");
    };
    let backend = random.backends[0]
        .backend
        .clone()
        .and_then(|b| b.backend)
        .expect("backend");
    assert!(matches!(backend.kind, Some(backend::Kind::Forward(_))));

    let EgressPolicy::Network { policy: p, .. } = &mut policy else {
        unreachable!()
    };
    p.tls_routes.clear();
    p.tcp_routes.insert(route_id("TCPRoute"), l4_route());
    let out = to_egress_policy(&policy, dst(), false);
    let Some(proxy_protocol::Kind::Opaque(opaque)) = out.protocol.and_then(|p| p.kind) else {
        panic!("opaque");
    };
    assert_eq!(opaque.routes.len(), 1, "no default route after a TCP route");
}

#[test]
fn no_egress_network_is_the_fallback() {
    assert_eq!(
        to_egress_policy(&EgressPolicy::Fallback, dst(), false),
        egress_fallback(dst())
    );
}
