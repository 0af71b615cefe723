//! Index rules, driven with plain Kubernetes objects: apply, subscribe,
//! assert the watch changed and the full server. One file per concern;
//! this one has the helpers they share.

use std::{num::NonZeroU16, time::SystemTime};

use k8s_index::{Index as _, ObjectKey};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::*;
use ipnet::IpNet;

use crate::{
    core::{
        ClientAuthentication, ClientAuthorization, DETECT_TIMEOUT, DefaultPolicy, IdentityMatch,
        ProxyProtocol, routes,
    },
    k8s::workload::{
        DEFAULT_POLICY_ANNOTATION, OPAQUE_PORTS_ANNOTATION, REQUIRE_IDENTITY_ANNOTATION,
    },
};

pub(super) const NS: &str = "ns";

pub(super) fn net(s: &str) -> IpNet {
    s.parse().expect("valid net")
}

pub(super) fn port(n: u16) -> NonZeroU16 {
    NonZeroU16::new(n).expect("nonzero")
}

pub(super) fn cluster() -> ClusterInfo {
    ClusterInfo {
        networks: vec![net("10.0.0.0/8")],
        ..ClusterInfo::default()
    }
}

pub(super) fn obj<K: serde::de::DeserializeOwned>(v: Value) -> K {
    serde_json::from_value(v).expect("valid object")
}

fn time(secs: u64) -> String {
    let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000 + secs);
    k8s_openapi::jiff::Timestamp::try_from(t)
        .expect("timestamp")
        .to_string()
}

/// A meshed pod in `ns` with labels and named ports of one container.
pub(super) fn pod_in(ns: &str, name: &str, labels: Value, ports: &[(&str, u16)]) -> Pod {
    let mut labels = labels;
    labels[CONTROL_PLANE_NS_LABEL] = json!("linkerd");
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "containerPort": p}))
        .collect();
    obj(json!({
        "metadata": {"namespace": ns, "name": name, "labels": labels},
        "spec": {"containers": [{"name": "app", "ports": ports}]}
    }))
}

pub(super) fn pod(name: &str, labels: Value, ports: &[(&str, u16)]) -> Pod {
    pod_in(NS, name, labels, ports)
}

pub(super) fn server(name: &str, created: u64, spec: Value) -> Server {
    server_with_labels(name, created, json!({}), spec)
}

fn server_with_labels(name: &str, created: u64, labels: Value, spec: Value) -> Server {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
        "metadata": {"namespace": NS, "name": name, "labels": labels, "creationTimestamp": time(created)},
        "spec": spec
    }))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(Some(NS), name)
}

pub(super) fn rx(index: &mut Index, pod: &str, p: u16) -> watch::Receiver<Arc<InboundServer>> {
    index.pod_server_rx(NS, pod, port(p)).expect("known pod")
}

/// The default server with the default routes and no probes.
fn default_server(cluster: &ClusterInfo, policy: DefaultPolicy) -> InboundServer {
    InboundServer {
        reference: ServerRef::Default(policy.as_str()),
        protocol: ProxyProtocol::Detect {
            timeout: DETECT_TIMEOUT,
        },
        authorizations: policy.authorizations(&cluster.networks),
        http_routes: routes::default_http_routes([], &[]),
        grpc_routes: Default::default(),
        ratelimit: None,
    }
}

fn named_server(
    name: &str,
    protocol: ProxyProtocol,
    authorizations: Authorizations,
) -> InboundServer {
    InboundServer {
        reference: ServerRef::Server(name.to_string()),
        protocol,
        authorizations,
        http_routes: routes::default_http_routes([], &[]),
        grpc_routes: Default::default(),
        ratelimit: None,
    }
}

fn detect() -> ProxyProtocol {
    ProxyProtocol::Detect {
        timeout: DETECT_TIMEOUT,
    }
}

fn changed(rx: &mut watch::Receiver<Arc<InboundServer>>) -> InboundServer {
    assert!(
        rx.has_changed().expect("sender alive"),
        "expected an update"
    );
    InboundServer::clone(&rx.borrow_and_update())
}

fn unchanged(rx: &watch::Receiver<Arc<InboundServer>>) {
    assert!(
        !rx.has_changed().expect("sender alive"),
        "expected no update"
    );
}

const POLICY_CONTROLLER_NAME_FOR_TESTS: &str = k8s_api::policy::http_route::POLICY_CONTROLLER_NAME;

/// An index with pod "web" and Server "srv" on port 80, and a receiver that
/// has seen the Server.
fn with_server() -> (Index, watch::Receiver<Arc<InboundServer>>) {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server("srv", 0, json!({"podSelector": {}, "port": 80})));
    changed(&mut rx);
    (index, rx)
}

fn route(name: &str, created: u64, status: Option<Value>) -> HTTPRoute {
    let mut r = json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
        "metadata": {"namespace": NS, "name": name, "creationTimestamp": time(created)},
        "spec": {
            "parentRefs": [{"group": "policy.linkerd.io", "kind": "Server", "name": "srv"}],
            "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/api"}}]}]
        }
    });
    if let Some(status) = status {
        r["status"] = status;
    }
    obj(r)
}

fn accepted(controller: &str, status: &str) -> Value {
    json!({"parents": [{
        "parentRef": {"group": "policy.linkerd.io", "kind": "Server", "name": "srv"},
        "controllerName": controller,
        "conditions": [{"type": "Accepted", "status": status, "reason": "Accepted", "message": "",
                        "lastTransitionTime": "2024-01-01T00:00:00Z"}]
    }]})
}

fn saz(name: &str, spec: Value) -> ServerAuthorization {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1beta1", "kind": "ServerAuthorization",
        "metadata": {"namespace": NS, "name": name},
        "spec": spec
    }))
}

fn policy(name: &str, target: Value, refs: Value) -> AuthorizationPolicy {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "AuthorizationPolicy",
        "metadata": {"namespace": NS, "name": name},
        "spec": {"targetRef": target, "requiredAuthenticationRefs": refs}
    }))
}

fn mesh_tls(ns: &str, name: &str, spec: Value) -> MeshTLSAuthentication {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "MeshTLSAuthentication",
        "metadata": {"namespace": ns, "name": name},
        "spec": spec
    }))
}

fn network(ns: &str, name: &str, spec: Value) -> NetworkAuthentication {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "NetworkAuthentication",
        "metadata": {"namespace": ns, "name": name},
        "spec": spec
    }))
}

fn server_target(name: &str) -> Value {
    json!({"group": "policy.linkerd.io", "kind": "Server", "name": name})
}

fn mtls_ref(name: &str, ns: Option<&str>) -> Value {
    let mut r =
        json!({"group": "policy.linkerd.io", "kind": "MeshTLSAuthentication", "name": name});
    if let Some(ns) = ns {
        r["namespace"] = json!(ns);
    }
    r
}

fn probed_pod(name: &str) -> Pod {
    obj(json!({
        "metadata": {"namespace": NS, "name": name, "labels": {CONTROL_PLANE_NS_LABEL: "linkerd"}},
        "spec": {"containers": [{
            "name": "app",
            "ports": [{"name": "http", "containerPort": 8080}],
            "livenessProbe": {"httpGet": {"port": "http", "path": "/live?x=1"}},
            "readinessProbe": {"httpGet": {"port": 8080, "path": "/ready"}}
        }]}
    }))
}

mod authorizations;
mod external_workload;
mod gateway_routes;
mod http_routes;
mod pods;
mod ratelimit;
mod reindex;
mod relists;
mod servers;
