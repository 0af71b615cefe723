//! Outbound index rules, driven with plain Kubernetes objects: apply,
//! subscribe, assert the watch changed and the full policy.

use std::{collections::BTreeMap, net::SocketAddr, time::Duration, time::SystemTime};

use k8s_index::{Index as _, ObjectKey};
use serde_json::{Value, json};

use super::*;
use crate::core::{
    outbound::{
        AppProtocol, Backoff, FailureAccrual, HttpRetryCondition, HttpRoute, OutboundRoute,
        OutboundRule, RouteRetry, RouteTimeouts, WeightedService,
    },
    routes::{HttpRouteMatch, PathMatch},
};

const NS: &str = "ns";

fn port(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).expect("nonzero")
}

fn index() -> OutboundIndex {
    OutboundIndex::new(OutboundCluster {
        networks: vec!["10.0.0.0/8".parse().expect("net")],
        cluster_domain: "cluster.local".into(),
        default_opaque_ports: [port(3306)].into(),
        global_egress_network_namespace: "linkerd-egress".into(),
    })
}

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("valid object")
}

fn timestamp(secs: u64) -> String {
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs);
    k8s_openapi::jiff::Timestamp::try_from(t)
        .expect("timestamp")
        .to_string()
}

fn at(secs: u64) -> Option<SystemTime> {
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + secs))
}

fn service(name: &str, ip: &str, annotations: Value, ports: Value) -> Service {
    obj(json!({
        "metadata": {"namespace": NS, "name": name, "annotations": annotations},
        "spec": {"clusterIP": ip, "clusterIPs": [ip], "ports": ports}
    }))
}

fn web() -> Service {
    service(
        "web",
        "10.1.0.1",
        json!({}),
        json!([{"port": 80}, {"port": 8080, "appProtocol": "kubernetes.io/h2c"}, {"port": 3306}]),
    )
}

fn target(name: &str, p: u16, source_ns: &str) -> ServiceTarget {
    ServiceTarget {
        namespace: NS.into(),
        name: name.into(),
        port: port(p),
        source_namespace: source_ns.into(),
    }
}

/// A Gateway HTTPRoute in `ns` on Service `web`, accepted (or not) by us.
fn gateway_route(
    ns: &str,
    name: &str,
    created: u64,
    accepted: bool,
    rules: Value,
) -> gateway::HTTPRoute {
    let parent = json!({"group": "core", "kind": "Service", "name": "web", "namespace": NS});
    let status = if accepted {
        json!({"parents": [{
            "parentRef": parent,
            "controllerName": "linkerd.io/policy-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": timestamp(0)}]
        }]})
    } else {
        json!({"parents": []})
    };
    obj(json!({
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": timestamp(created)},
        "spec": {"parentRefs": [parent], "rules": rules},
        "status": status
    }))
}

fn id(ns: &str, name: &str) -> RouteId {
    RouteId {
        group: gateway::GROUP.into(),
        kind: "HTTPRoute".into(),
        namespace: ns.into(),
        name: name.into(),
    }
}

fn expected(p: u16, app_protocol: Option<AppProtocol>) -> OutboundPolicy {
    OutboundPolicy {
        namespace: NS.into(),
        name: "web".into(),
        port: port(p),
        authority: format!("web.ns.svc.cluster.local:{p}"),
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

fn prefix_route(created: u64, backends: Vec<Backend>) -> HttpRoute {
    OutboundRoute {
        hostnames: vec![],
        rules: vec![OutboundRule {
            matches: vec![HttpRouteMatch {
                path: Some(PathMatch::Prefix("/api".into())),
                ..Default::default()
            }],
            backends,
            retry: None,
            timeouts: RouteTimeouts::default(),
            filters: vec![],
        }],
        created_at: at(created),
    }
}

fn api_rules(backend: &str) -> Value {
    json!([{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}], "backendRefs": [{"name": backend, "port": 80}]}])
}

fn weighted(name: &str, exists: bool) -> Backend {
    Backend::Service(WeightedService {
        weight: 1,
        namespace: NS.into(),
        name: name.into(),
        port: port(80),
        authority: format!("{name}.ns.svc.cluster.local:80"),
        filters: vec![],
        exists,
    })
}

#[test]
fn service_without_routes_gets_its_default_policy() {
    let mut idx = index();
    idx.apply(web());
    let rx = idx.policy_rx(&target("web", 80, "client"));
    assert_eq!(**rx.borrow(), expected(80, None));
    let h2 = idx.policy_rx(&target("web", 8080, NS));
    assert_eq!(**h2.borrow(), expected(8080, Some(AppProtocol::Http2)));
    // --default-opaque-ports applies without the annotation.
    let opaque = idx.policy_rx(&target("web", 3306, NS));
    assert_eq!(**opaque.borrow(), expected(3306, Some(AppProtocol::Opaque)));
}

#[test]
fn lookups_by_address() {
    let mut idx = index();
    let mut svc = web();
    if let Some(spec) = svc.spec.as_mut() {
        spec.cluster_ips = Some(vec!["10.1.0.1".into(), "fd00::1".into()]);
    }
    idx.apply(svc);
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    assert_eq!(
        idx.lookup_ip(ip("fd00::1"), port(80), "client"),
        Some(OutboundTarget::Service(target("web", 80, "client")))
    );
    assert_eq!(
        idx.lookup_ip(ip("10.1.0.1"), port(81), "client"),
        Some(OutboundTarget::UndefinedPort {
            namespace: NS.into(),
            name: "web".into(),
            port: port(81)
        })
    );
    assert_eq!(idx.lookup_ip(ip("10.9.9.9"), port(80), "client"), None);
    assert_eq!(
        idx.lookup_ip(ip("192.0.2.1"), port(443), "client"),
        Some(OutboundTarget::Egress(SocketAddr::from((
            [192, 0, 2, 1],
            443
        ))))
    );
    k8s_index::Index::<Service>::delete(&mut idx, ObjectKey::new(Some(NS), "web"));
    assert_eq!(idx.lookup_ip(ip("10.1.0.1"), port(80), "client"), None);
}

#[test]
fn opaque_annotation_and_app_protocol() {
    let mut idx = index();
    idx.apply(web());
    let mut rx = idx.policy_rx(&target("web", 80, NS));
    let mut mysql = idx.policy_rx(&target("web", 3306, NS));
    rx.mark_unchanged();
    idx.apply(service(
        "web",
        "10.1.0.1",
        json!({"config.linkerd.io/opaque-ports": "80"}),
        json!([{"port": 80}, {"port": 8080, "appProtocol": "kubernetes.io/h2c"}, {"port": 3306}]),
    ));
    assert!(rx.has_changed().expect("open"));
    assert_eq!(
        **rx.borrow_and_update(),
        expected(80, Some(AppProtocol::Opaque))
    );
    // The annotation replaces the default opaque ports.
    assert!(mysql.has_changed().expect("open"));
    assert_eq!(**mysql.borrow_and_update(), expected(3306, None));
    // appProtocol wins over the annotation.
    idx.apply(service(
        "web",
        "10.1.0.1",
        json!({"config.linkerd.io/opaque-ports": "80"}),
        json!([{"port": 80, "appProtocol": "http"}]),
    ));
    assert_eq!(
        **rx.borrow_and_update(),
        expected(80, Some(AppProtocol::Http1))
    );
    // Applying the same object again publishes nothing.
    idx.apply(service(
        "web",
        "10.1.0.1",
        json!({"config.linkerd.io/opaque-ports": "80"}),
        json!([{"port": 80, "appProtocol": "http"}]),
    ));
    assert!(!rx.has_changed().expect("open"));
}

#[test]
fn service_annotations_give_accrual_timeouts_and_retries() {
    let mut idx = index();
    idx.apply(service(
        "web",
        "10.1.0.1",
        json!({
            "balancer.linkerd.io/failure-accrual": "consecutive",
            "balancer.linkerd.io/failure-accrual-consecutive-max-failures": "4",
            "timeout.linkerd.io/response": "2s",
            "retry.linkerd.io/http": "5xx",
            "retry.linkerd.io/limit": "2",
        }),
        json!([{"port": 80}]),
    ));
    let rx = idx.policy_rx(&target("web", 80, NS));
    let mut want = expected(80, None);
    want.accrual = Some(FailureAccrual::Consecutive {
        max_failures: 4,
        backoff: Backoff {
            min_penalty: Duration::from_secs(1),
            max_penalty: Duration::from_secs(60),
            jitter: 0.5,
        },
    });
    want.timeouts.response = Some(Duration::from_secs(2));
    want.http_retry = Some(RouteRetry {
        limit: 2,
        timeout: None,
        conditions: Some(vec![HttpRetryCondition {
            status_min: 500,
            status_max: 599,
        }]),
    });
    // The limit is shared: gRPC retries too, with the proxy's conditions.
    want.grpc_retry = Some(RouteRetry {
        limit: 2,
        timeout: None,
        conditions: None,
    });
    assert_eq!(**rx.borrow(), want);
}

#[test]
fn routes_attach_once_accepted_and_track_backends() {
    let mut idx = index();
    idx.apply(web());
    let mut rx = idx.policy_rx(&target("web", 80, "client"));
    rx.mark_unchanged();
    // Not accepted by our status writer yet: not attached.
    idx.apply(gateway_route(NS, "api", 1, false, api_rules("api")));
    assert!(!rx.has_changed().expect("open"));
    idx.apply(gateway_route(NS, "api", 1, true, api_rules("api")));
    assert!(rx.has_changed().expect("open"));
    let mut want = expected(80, None);
    want.http_routes
        .insert(id(NS, "api"), prefix_route(1, vec![weighted("api", false)]));
    assert_eq!(**rx.borrow_and_update(), want);
    // The backend Service appears.
    idx.apply(service("api", "10.1.0.2", json!({}), json!([{"port": 80}])));
    assert!(rx.has_changed().expect("open"));
    want.http_routes
        .insert(id(NS, "api"), prefix_route(1, vec![weighted("api", true)]));
    assert_eq!(**rx.borrow_and_update(), want);
    // Deleted: back to no routes.
    k8s_index::Index::<gateway::HTTPRoute>::delete(&mut idx, ObjectKey::new(Some(NS), "api"));
    assert!(rx.has_changed().expect("open"));
    assert_eq!(**rx.borrow_and_update(), expected(80, None));
}

#[test]
fn producer_routes_for_all_consumer_routes_for_their_namespace() {
    let mut idx = index();
    idx.apply(web());
    let producer = gateway_route(NS, "producer", 5, true, api_rules("web"));
    let consumer = gateway_route("client", "consumer", 1, true, api_rules("web"));
    idx.apply(producer);
    idx.apply(consumer);
    let client = idx.policy_rx(&target("web", 80, "client"));
    let other = idx.policy_rx(&target("web", 80, "other"));
    let producer_ns = idx.policy_rx(&target("web", 80, NS));
    let names = |rx: &watch::Receiver<Arc<OutboundPolicy>>| {
        rx.borrow()
            .http_routes
            .keys()
            .map(|id| format!("{}/{}", id.namespace, id.name))
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&client), ["client/consumer", "ns/producer"]);
    assert_eq!(names(&other), ["ns/producer"]);
    assert_eq!(names(&producer_ns), ["ns/producer"]);
    // The consumer route names its backend in its own namespace's view.
    let consumer_backend =
        &client.borrow().http_routes[&id("client", "consumer")].rules[0].backends[0];
    assert!(matches!(consumer_backend, Backend::Service(s) if s.namespace == "client"));
}

#[test]
fn parent_ports_limit_routes_and_policy_routes_attach_too() {
    let mut idx = index();
    idx.apply(web());
    let parent = json!({"group": "core", "kind": "Service", "name": "web", "port": 8080});
    let route: policy::HTTPRoute = obj(json!({
        "metadata": {"namespace": NS, "name": "grpc-port", "creationTimestamp": timestamp(3),
                     "annotations": {"timeout.linkerd.io/request": "1s", "retry.linkerd.io/limit": "3"}},
        "spec": {"parentRefs": [parent], "rules": [{"timeouts": {"request": "5s"}}]},
        "status": {"parents": [{"parentRef": parent, "controllerName": "linkerd.io/policy-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": timestamp(0)}]}]}
    }));
    idx.apply(route);
    let p80 = idx.policy_rx(&target("web", 80, NS));
    let p8080 = idx.policy_rx(&target("web", 8080, NS));
    assert!(p80.borrow().http_routes.is_empty());
    let policy = p8080.borrow();
    let rule = &policy.http_routes.values().next().expect("route").rules[0];
    // The annotation's request timeout wins over the rule's.
    assert_eq!(rule.timeouts.request, Some(Duration::from_secs(1)));
    assert_eq!(rule.retry.as_ref().map(|r| r.limit), Some(3));
    assert!(rule.backends.is_empty());
}

#[test]
fn invalid_routes_and_backends() {
    let mut idx = index();
    idx.apply(web());
    let rx = idx.policy_rx(&target("web", 80, NS));
    // An unsupported filter makes the whole route ignored.
    idx.apply(gateway_route(
        NS,
        "mirror",
        1,
        true,
        json!([{"filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "x", "port": 80}}}]}]),
    ));
    assert!(rx.borrow().http_routes.is_empty());
    // A bad backend only fails its own requests.
    idx.apply(gateway_route(
        NS,
        "bad-backend",
        2,
        true,
        json!([{"backendRefs": [{"name": "x"}, {"group": "example.com", "kind": "Thing", "name": "y", "port": 1}]}]),
    ));
    let policy = rx.borrow();
    let backends = &policy.http_routes[&id(NS, "bad-backend")].rules[0].backends;
    assert_eq!(
        backends,
        &vec![
            Backend::Invalid {
                weight: 1,
                message: "missing port for backend Service x".into()
            },
            Backend::Invalid {
                weight: 1,
                message: "unsupported backend type example.com Thing".into()
            },
        ]
    );
}

#[test]
fn grpc_routes_and_unheld_watches_are_dropped() {
    let mut idx = index();
    idx.apply(web());
    let parent = json!({"kind": "Service", "name": "web"});
    let route: gateway::GRPCRoute = obj(json!({
        "metadata": {"namespace": NS, "name": "rpc", "creationTimestamp": timestamp(1)},
        "spec": {"parentRefs": [parent], "rules": [{"matches": [{"method": {"service": "a.B", "method": "C"}}]}]},
        "status": {"parents": [{"parentRef": parent, "controllerName": "linkerd.io/policy-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": timestamp(0)}]}]}
    }));
    let rx = idx.policy_rx(&target("web", 8080, NS));
    let dropped = idx.policy_rx(&target("web", 80, NS));
    drop(dropped);
    assert_eq!(idx.stats().watches, 2);
    idx.apply(route);
    assert_eq!(idx.stats().watches, 1, "the unheld watch is gone");
    let policy = rx.borrow();
    let route = policy.grpc_routes.values().next().expect("grpc route");
    assert_eq!(
        route.rules[0].matches[0].method,
        Some(crate::core::outbound::GrpcMethodMatch {
            service: Some("a.B".into()),
            method: Some("C".into())
        })
    );
}

#[test]
fn tls_and_tcp_routes() {
    let mut idx = index();
    idx.apply(web());
    let parent = json!({"kind": "Service", "name": "web", "port": 3306});
    let status = json!({"parents": [{"parentRef": parent, "controllerName": "linkerd.io/policy-controller",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "", "lastTransitionTime": timestamp(0)}]}]});
    let tcp: gateway::TCPRoute = obj(json!({
        "metadata": {"namespace": NS, "name": "db", "creationTimestamp": timestamp(1)},
        "spec": {"parentRefs": [parent], "rules": [{"backendRefs": [{"name": "web", "port": 3306}]}]},
        "status": status
    }));
    let two_rules: gateway::TLSRoute = obj(json!({
        "metadata": {"namespace": NS, "name": "two", "creationTimestamp": timestamp(1)},
        "spec": {"parentRefs": [parent], "rules": [{}, {}]},
        "status": status
    }));
    let rx = idx.policy_rx(&target("web", 3306, NS));
    idx.apply(tcp);
    idx.apply(two_rules);
    let policy = rx.borrow();
    assert_eq!(policy.tcp_routes.len(), 1);
    assert!(
        policy.tls_routes.is_empty(),
        "a TLSRoute needs exactly one rule"
    );
    let backends = &policy.tcp_routes.values().next().expect("tcp").rules[0].backends;
    assert!(matches!(&backends[..], [Backend::Service(s)] if s.exists && s.port.get() == 3306));
}

mod egress;
mod sweep;
