//! Gateway API HTTPRoutes and GRPCRoutes on Servers, driven with plain
//! objects: they attach once accepted, take route-targeted
//! AuthorizationPolicies, coexist with a policy HTTPRoute of the same name,
//! and leave when deleted.

use k8s_api::gateway;
use k8s_api::policy::{AuthorizationPolicy, HTTPRoute, Server, http_route::POLICY_CONTROLLER_NAME};
use std::sync::Arc;

use k8s_index::{Index as _, ObjectKey};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::*;
use crate::core::{
    AuthorizationRef, ClientAuthorization, InboundServer, ProxyProtocol,
    outbound::{GrpcMethodMatch, GrpcRouteMatch},
};

const NS: &str = "ns";

fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("valid object")
}

fn accepted() -> Value {
    json!({"parents": [{
        "parentRef": {"group": "policy.linkerd.io", "kind": "Server", "name": "srv"},
        "controllerName": POLICY_CONTROLLER_NAME,
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                        "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    }]})
}

fn route_json(
    group_version: &str,
    kind: &str,
    name: &str,
    rules: Value,
    status: Option<Value>,
) -> Value {
    let mut r = json!({
        "apiVersion": group_version, "kind": kind,
        "metadata": {"namespace": NS, "name": name, "creationTimestamp": "2024-01-01T00:00:01Z"},
        "spec": {
            "parentRefs": [{"group": "policy.linkerd.io", "kind": "Server", "name": "srv"}],
            "rules": rules
        }
    });
    if let Some(status) = status {
        r["status"] = status;
    }
    r
}

fn setup(protocol: &str) -> (Index, watch::Receiver<Arc<InboundServer>>) {
    let mut index = Index::new(ClusterInfo::default());
    index.apply(obj::<Pod>(json!({
        "metadata": {"namespace": NS, "name": "web", "labels": {"linkerd.io/control-plane-ns": "linkerd"}},
        "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 80}]}]}
    })));
    let port = std::num::NonZeroU16::new(80).expect("port");
    let rx = index.pod_server_rx(NS, "web", port).expect("pod");
    index.apply(obj::<Server>(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
        "metadata": {"namespace": NS, "name": "srv", "creationTimestamp": "2024-01-01T00:00:00Z"},
        "spec": {"podSelector": {}, "port": 80, "proxyProtocol": protocol}
    })));
    (index, rx)
}

fn gkn(group: &str, kind: &str, name: &str) -> RouteRef {
    RouteRef::Resource(GroupKindName {
        group: group.into(),
        kind: kind.into(),
        name: name.into(),
    })
}

fn route_policy(kind: &str) -> AuthorizationPolicy {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "AuthorizationPolicy",
        "metadata": {"namespace": NS, "name": "route-ap"},
        "spec": {"targetRef": {"group": "gateway.networking.k8s.io", "kind": kind, "name": "api"},
                 "requiredAuthenticationRefs": []}
    }))
}

#[test]
fn gateway_http_routes_attach_beside_policy_routes_of_the_same_name() {
    let (mut index, rx) = setup("HTTP/1");
    let rules = json!([{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}]}]);
    let gateway = |status| {
        obj::<gateway::HTTPRoute>(route_json(
            "gateway.networking.k8s.io/v1",
            "HTTPRoute",
            "api",
            rules.clone(),
            status,
        ))
    };
    index.apply(gateway(None));
    assert!(
        rx.borrow()
            .http_routes
            .contains_key(&RouteRef::Default("default")),
        "not attached before it is accepted"
    );
    index.apply(gateway(Some(accepted())));
    index.apply(obj::<HTTPRoute>(route_json(
        "policy.linkerd.io/v1beta3",
        "HTTPRoute",
        "api",
        rules.clone(),
        Some(accepted()),
    )));
    index.apply(route_policy("HTTPRoute"));
    let server = rx.borrow().as_ref().clone();
    let keys: Vec<_> = server.http_routes.keys().cloned().collect();
    assert_eq!(
        keys,
        [
            gkn("gateway.networking.k8s.io", "HTTPRoute", "api"),
            gkn("policy.linkerd.io", "HTTPRoute", "api"),
        ]
    );
    let allow = [(
        AuthorizationRef::AuthorizationPolicy("route-ap".into()),
        ClientAuthorization::allow_all(),
    )]
    .into();
    assert_eq!(
        server.http_routes[&gkn("gateway.networking.k8s.io", "HTTPRoute", "api")].authorizations,
        allow,
        "the policy targets the gateway route"
    );
    assert!(
        server.http_routes[&gkn("policy.linkerd.io", "HTTPRoute", "api")]
            .authorizations
            .is_empty()
    );

    k8s_index::Index::<gateway::HTTPRoute>::delete(&mut index, ObjectKey::new(Some(NS), "api"));
    let keys: Vec<_> = rx.borrow().http_routes.keys().cloned().collect();
    assert_eq!(keys, [gkn("policy.linkerd.io", "HTTPRoute", "api")]);
}

#[test]
fn grpc_routes_attach_to_grpc_servers_with_their_authorizations() {
    let (mut index, mut rx) = setup("gRPC");
    rx.mark_unchanged();
    let rules = json!([{
        "matches": [{"method": {"service": "a.B", "method": "C"}}],
        "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "x", "value": "1"}]}}]
    }]);
    index.apply(obj::<gateway::GRPCRoute>(route_json(
        "gateway.networking.k8s.io/v1",
        "GRPCRoute",
        "api",
        rules,
        Some(accepted()),
    )));
    assert!(rx.has_changed().expect("open"));
    index.apply(route_policy("GRPCRoute"));
    let server = rx.borrow_and_update().as_ref().clone();
    assert_eq!(server.protocol, ProxyProtocol::Grpc);
    let route = &server.grpc_routes[&gkn("gateway.networking.k8s.io", "GRPCRoute", "api")];
    assert_eq!(
        route.rules[0].matches,
        [GrpcRouteMatch {
            method: Some(GrpcMethodMatch {
                service: Some("a.B".into()),
                method: Some("C".into()),
            }),
            headers: Vec::new(),
        }]
    );
    assert_eq!(route.rules[0].filters.len(), 1);
    assert_eq!(route.authorizations.len(), 1);

    // An invalid update (a regex method match) drops the route.
    let bad = json!([{"matches": [{"method": {"type": "RegularExpression", "service": "a.*"}}]}]);
    index.apply(obj::<gateway::GRPCRoute>(route_json(
        "gateway.networking.k8s.io/v1",
        "GRPCRoute",
        "api",
        bad,
        Some(accepted()),
    )));
    assert!(rx.borrow_and_update().grpc_routes.is_empty());
}
