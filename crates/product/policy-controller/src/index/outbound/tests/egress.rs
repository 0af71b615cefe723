//! EgressNetworks in the outbound index: lookup order (client namespace,
//! then the global namespace, then the fallback), except ranges,
//! Allow/Deny, routes whose parent is an EgressNetwork, and backends that
//! forward to the original destination.

use super::*;
use crate::core::egress::{EgressPolicy, TrafficPolicy};
use crate::core::outbound::WeightedEgressNetwork;
use k8s_api::policy::EgressNetwork;

const GLOBAL: &str = "linkerd-egress";

fn egress(ns: &str, name: &str, networks: Value, traffic_policy: &str) -> EgressNetwork {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "EgressNetwork",
        "metadata": {"namespace": ns, "name": name, "creationTimestamp": timestamp(0)},
        "spec": {"networks": networks, "trafficPolicy": traffic_policy},
    }))
}

fn addr(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

/// (namespace, name, traffic policy) of the EgressNetwork an address gets.
fn network_of(p: &EgressPolicy) -> Option<(String, String, TrafficPolicy)> {
    match p {
        EgressPolicy::Fallback => None,
        EgressPolicy::Network {
            traffic_policy,
            policy,
        } => Some((
            policy.namespace.clone(),
            policy.name.clone(),
            *traffic_policy,
        )),
    }
}

fn named(ns: &str, name: &str, tp: TrafficPolicy) -> Option<(String, String, TrafficPolicy)> {
    Some((ns.into(), name.into(), tp))
}

#[test]
fn lookup_prefers_the_clients_namespace_then_the_global_one() {
    let mut idx = index();
    let ext = addr("192.0.2.10:443");
    let mut rx = idx.egress_rx(ext, "app");
    assert_eq!(*rx.borrow_and_update().as_ref(), EgressPolicy::Fallback);

    idx.apply(egress(GLOBAL, "global", json!(null), "Allow"));
    assert!(rx.has_changed().expect("open"));
    assert_eq!(
        network_of(&rx.borrow_and_update()),
        named(GLOBAL, "global", TrafficPolicy::Allow)
    );

    idx.apply(egress(
        "app",
        "own",
        json!([{"cidr": "192.0.2.0/24"}]),
        "Deny",
    ));
    assert_eq!(
        network_of(&rx.borrow_and_update()),
        named("app", "own", TrafficPolicy::Deny)
    );
    // Clients of another namespace still get the global one.
    assert_eq!(
        network_of(&idx.egress_policy(ext, "other")),
        named(GLOBAL, "global", TrafficPolicy::Allow)
    );
    // An in-cluster address no EgressNetwork captures is not egress; one an
    // EgressNetwork captures is.
    let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
    assert_eq!(idx.lookup_ip(ip("10.9.9.9"), port(80), "other"), None);
    idx.apply(egress(
        "app",
        "inside",
        json!([{"cidr": "10.9.0.0/16"}]),
        "Allow",
    ));
    assert_eq!(
        idx.lookup_ip(ip("10.9.9.9"), port(80), "app"),
        Some(OutboundTarget::Egress(addr("10.9.9.9:80")))
    );

    // Deleting the namespace's networks falls back to the global one, then
    // to egress-fallback.
    k8s_index::Index::<EgressNetwork>::delete(&mut idx, ObjectKey::new(Some("app"), "own"));
    k8s_index::Index::<EgressNetwork>::delete(&mut idx, ObjectKey::new(Some("app"), "inside"));
    assert_eq!(
        network_of(&rx.borrow_and_update()),
        named(GLOBAL, "global", TrafficPolicy::Allow)
    );
    k8s_index::Index::<EgressNetwork>::delete(&mut idx, ObjectKey::new(Some(GLOBAL), "global"));
    assert_eq!(*rx.borrow_and_update().as_ref(), EgressPolicy::Fallback);
}

#[test]
fn except_ranges_and_traffic_policy_changes() {
    let mut idx = index();
    idx.apply(egress(
        GLOBAL,
        "most",
        json!([{"cidr": "198.51.100.0/24", "except": ["198.51.100.7"]}]),
        "Deny",
    ));
    let excepted = addr("198.51.100.7:80");
    let inside = addr("198.51.100.8:80");
    assert_eq!(idx.egress_policy(excepted, "app"), EgressPolicy::Fallback);
    let mut rx = idx.egress_rx(inside, "app");
    assert_eq!(
        network_of(&rx.borrow_and_update()),
        named(GLOBAL, "most", TrafficPolicy::Deny)
    );
    idx.apply(egress(
        GLOBAL,
        "most",
        json!([{"cidr": "198.51.100.0/24", "except": ["198.51.100.7"]}]),
        "Allow",
    ));
    assert!(rx.has_changed().expect("open"), "Deny → Allow is published");
    assert_eq!(
        network_of(&rx.borrow_and_update()),
        named(GLOBAL, "most", TrafficPolicy::Allow)
    );
    // Re-applying the same object publishes nothing.
    idx.apply(egress(
        GLOBAL,
        "most",
        json!([{"cidr": "198.51.100.0/24", "except": ["198.51.100.7"]}]),
        "Allow",
    ));
    assert!(!rx.has_changed().expect("open"));
}

/// A route on EgressNetwork `ext` (port 443), accepted (or not) by us.
fn egress_route(kind: &str, name: &str, accepted: bool, rules: Value) -> Value {
    let parent = json!({"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "ext",
        "namespace": GLOBAL, "port": 443});
    let status = if accepted {
        json!({"parents": [{
            "parentRef": parent,
            "controllerName": "linkerd.io/policy-controller",
            "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted",
                "message": "", "lastTransitionTime": timestamp(0)}]
        }]})
    } else {
        json!({"parents": []})
    };
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
        "metadata": {"namespace": GLOBAL, "name": name, "creationTimestamp": timestamp(1)},
        "spec": {"parentRefs": [parent], "rules": rules},
        "status": status,
    })
}

fn policy_of(p: &EgressPolicy) -> &OutboundPolicy {
    match p {
        EgressPolicy::Network { policy, .. } => policy,
        EgressPolicy::Fallback => panic!("expected an EgressNetwork policy"),
    }
}

#[test]
fn routes_with_an_egress_network_parent_attach_once_accepted() {
    let mut idx = index();
    idx.apply(web());
    idx.apply(egress(
        GLOBAL,
        "ext",
        json!([{"cidr": "203.0.113.0/24"}]),
        "Deny",
    ));
    let dst = addr("203.0.113.5:443");
    let mut rx = idx.egress_rx(dst, "app");
    assert!(policy_of(&rx.borrow_and_update()).http_routes.is_empty());

    let rules = json!([{"backendRefs": [
        {"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "ext"},
        {"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "other"},
        {"kind": "Service", "name": "web", "namespace": NS, "port": 80},
    ]}]);
    let unaccepted: gateway::HTTPRoute = obj(egress_route("HTTPRoute", "r", false, rules.clone()));
    idx.apply(unaccepted);
    assert!(!rx.has_changed().expect("open"), "not accepted yet");

    let route: gateway::HTTPRoute = obj(egress_route("HTTPRoute", "r", true, rules));
    idx.apply(route);
    let policy = rx.borrow_and_update().clone();
    let policy = policy_of(&policy);
    let route = policy
        .http_routes
        .get(&RouteId {
            group: gateway::GROUP.into(),
            kind: "HTTPRoute".into(),
            namespace: GLOBAL.into(),
            name: "r".into(),
        })
        .expect("attached route");
    let [itself, other, svc] = route.rules[0].backends.as_slice() else {
        panic!("three backends");
    };
    assert_eq!(
        itself,
        &Backend::EgressNetwork(WeightedEgressNetwork {
            weight: 1,
            namespace: GLOBAL.into(),
            name: "ext".into(),
            port: None,
            filters: vec![],
            forward: Some(dst),
        })
    );
    assert_eq!(
        other,
        &Backend::Invalid {
            weight: 1,
            message: "EgressNetwork not found other".into()
        }
    );
    assert!(matches!(svc, Backend::Service(s) if s.exists));

    // Another port of the same network does not get the route.
    assert!(
        policy_of(&idx.egress_policy(addr("203.0.113.5:80"), "app"))
            .http_routes
            .is_empty()
    );

    // TLS and TCP routes attach the same way.
    let tls: gateway::TLSRoute = obj(egress_route(
        "TLSRoute",
        "t",
        true,
        json!([{"backendRefs": []}]),
    ));
    idx.apply(tls);
    let tcp: gateway::TCPRoute = obj(egress_route(
        "TCPRoute",
        "c",
        true,
        json!([{"backendRefs": []}]),
    ));
    idx.apply(tcp);
    let policy = rx.borrow_and_update().clone();
    assert_eq!(policy_of(&policy).tls_routes.len(), 1);
    assert_eq!(policy_of(&policy).tcp_routes.len(), 1);

    k8s_index::Index::<gateway::HTTPRoute>::delete(&mut idx, ObjectKey::new(Some(GLOBAL), "r"));
    assert!(policy_of(&rx.borrow_and_update()).http_routes.is_empty());
}

#[test]
fn an_egress_network_backend_on_a_service_route_fails() {
    let mut idx = index();
    idx.apply(web());
    let mut route = gateway_route(
        NS,
        "r",
        0,
        true,
        json!([{"backendRefs": [{"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "ext"}]}]),
    );
    route.metadata.name = Some("r".into());
    idx.apply(route);
    let rx = idx.policy_rx(&target("web", 80, NS));
    let policy = rx.borrow().clone();
    let route = policy.http_routes.values().next().expect("route");
    assert_eq!(
        route.rules[0].backends,
        [Backend::Invalid {
            weight: 1,
            message: "EgressNetwork backends attach to EgressNetwork parents only".into()
        }]
    );
}

#[test]
fn egress_watches_nobody_holds_are_dropped() {
    let mut idx = index();
    let held = idx.egress_rx(addr("192.0.2.1:80"), "app");
    drop(idx.egress_rx(addr("192.0.2.2:80"), "app"));
    assert_eq!(idx.stats().watches, 2);
    idx.apply(egress(GLOBAL, "any", json!(null), "Allow"));
    assert_eq!(idx.stats().watches, 1, "the dropped watch is gone");
    assert!(held.has_changed().expect("open"));
}

#[test]
fn the_index_tolerates_what_admission_refuses() {
    let mut idx = index();
    // An empty list captures nothing, but still makes the namespace's
    // clients ignore the global networks (as the original).
    idx.apply(egress("app", "none", json!([]), "Deny"));
    idx.apply(egress(GLOBAL, "all", json!(null), "Allow"));
    assert_eq!(
        idx.egress_policy(addr("192.0.2.1:80"), "app"),
        EgressPolicy::Fallback
    );
    // An exception outside its network is kept (it excludes nothing).
    idx.apply(egress(
        "app",
        "odd",
        json!([{"cidr": "192.0.2.0/24", "except": ["198.51.100.0/24"]}]),
        "Deny",
    ));
    assert_eq!(
        network_of(&idx.egress_policy(addr("192.0.2.1:80"), "app")),
        named("app", "odd", TrafficPolicy::Deny)
    );
}
