//! Index rules, driven with plain Kubernetes objects: apply, subscribe,
//! assert the watch changed and the full server.

use std::{num::NonZeroU16, time::SystemTime};

use k8s_index::{Index as _, ObjectKey};
use serde_json::{Value, json};
use tokio::sync::watch;

use super::*;
use crate::core::{ClientAuthentication, ClientAuthorization, ProxyProtocol, routes};

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

// === Pods and default servers ===

#[test]
fn unknown_and_unmeshed_pods_are_not_found() {
    let mut index = Index::new(cluster());
    assert_eq!(
        index.pod_server_rx(NS, "web", port(80)).err(),
        Some(LookupError::UnknownServer)
    );
    let mut unmeshed: Pod = pod("plain", json!({}), &[]);
    unmeshed.metadata.labels = None;
    index.apply(unmeshed);
    assert!(index.pod_server_rx(NS, "plain", port(80)).is_err());
    assert_eq!(index.stats().pods, 0);
}

#[test]
fn unknown_port_of_a_known_pod_gets_the_default_server_lazily() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[("http", 8080)]));
    assert_eq!(index.stats().port_servers, 0);
    let rx = rx(&mut index, "web", 9999);
    assert_eq!(
        **rx.borrow(),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
    assert_eq!(index.stats().port_servers, 1, "kept for later lookups");
}

#[test]
fn cluster_default_policy_flag_applies() {
    for policy in DefaultPolicy::ALL {
        let cluster = ClusterInfo {
            default_policy: policy,
            ..cluster()
        };
        let mut index = Index::new(cluster.clone());
        index.apply(pod("web", json!({}), &[]));
        assert_eq!(
            **rx(&mut index, "web", 80).borrow(),
            default_server(&cluster, policy)
        );
    }
}

#[test]
fn pod_annotations_set_policy_opaque_ports_and_required_identity() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    let mut p = pod("web", json!({}), &[]);
    p.metadata.annotations = Some(
        [
            (DEFAULT_POLICY_ANNOTATION, "cluster-unauthenticated"),
            (OPAQUE_PORTS_ANNOTATION, "3306,5000-5001"),
            (REQUIRE_IDENTITY_ANNOTATION, "5001,7000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    index.apply(p.clone());

    let plain = rx(&mut index, "web", 80).borrow().as_ref().clone();
    assert_eq!(
        plain,
        default_server(&cluster, DefaultPolicy::ClusterUnauthenticated)
    );

    let opaque = rx(&mut index, "web", 3306).borrow().as_ref().clone();
    assert_eq!(opaque.protocol, ProxyProtocol::Opaque);
    assert_eq!(
        opaque.reference,
        ServerRef::Default("cluster-unauthenticated")
    );

    let both = rx(&mut index, "web", 5001).borrow().as_ref().clone();
    assert_eq!(
        both,
        InboundServer {
            protocol: ProxyProtocol::Opaque,
            ..default_server(&cluster, DefaultPolicy::ClusterAuthenticated)
        }
    );

    // An invalid policy annotation falls back to the flag.
    let mut annotations = p.metadata.annotations.clone().unwrap_or_default();
    annotations.insert(DEFAULT_POLICY_ANNOTATION.into(), "everyone".into());
    p.metadata.annotations = Some(annotations);
    let mut rx80 = rx(&mut index, "web", 80);
    index.apply(p);
    assert_eq!(
        changed(&mut rx80),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
}

#[test]
fn deleting_a_pod_closes_its_watches() {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({}), &[]));
    let rx = rx(&mut index, "web", 80);
    k8s_index::Index::<Pod>::delete(&mut index, key("web"));
    assert!(rx.has_changed().is_err(), "sender dropped");
    assert_eq!(
        index.stats(),
        IndexStats::default(),
        "empty namespaces are dropped"
    );
}

// === Servers ===

#[test]
fn server_selects_port_and_deletion_reverts_to_default() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({"app": "web"}), &[("http", 8080)]));
    let mut rx = rx(&mut index, "web", 8080);

    index.apply(server(
        "web-http",
        0,
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "port": "http", "proxyProtocol": "HTTP/1"}),
    ));
    assert_eq!(
        changed(&mut rx),
        named_server("web-http", ProxyProtocol::Http1, Authorizations::new())
    );

    // Re-applying the same Server publishes nothing.
    index.apply(server(
        "web-http",
        0,
        json!({"podSelector": {"matchLabels": {"app": "web"}}, "port": "http", "proxyProtocol": "HTTP/1"}),
    ));
    unchanged(&rx);

    k8s_index::Index::<Server>::delete(&mut index, key("web-http"));
    assert_eq!(
        changed(&mut rx),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
}

#[test]
fn selectors_match_labels_and_expressions_and_follow_pod_label_changes() {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({"app": "web", "tier": "back"}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server(
        "front",
        0,
        json!({"podSelector": {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front"]},
                {"key": "env", "operator": "NotIn", "values": ["prod"]},
                {"key": "app", "operator": "Exists"},
                {"key": "legacy", "operator": "DoesNotExist"}
            ]}, "port": 80}),
    ));
    unchanged(&rx);
    index.apply(pod("web", json!({"app": "web", "tier": "front"}), &[]));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("front".into())
    );
    index.apply(pod(
        "web",
        json!({"app": "web", "tier": "front", "env": "prod"}),
        &[],
    ));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Default("all-unauthenticated")
    );
}

#[test]
fn empty_selector_selects_all_pods_and_external_only_servers_select_none() {
    let mut index = Index::new(cluster());
    index.apply(pod("a", json!({}), &[]));
    index.apply(pod("b", json!({"x": "y"}), &[]));
    index.apply(server(
        "vm-only",
        0,
        json!({"externalWorkloadSelector": {}, "port": 80}),
    ));
    assert_eq!(
        rx(&mut index, "a", 80).borrow().reference,
        ServerRef::Default("all-unauthenticated")
    );
    index.apply(server("all", 1, json!({"podSelector": {}, "port": 80})));
    for p in ["a", "b"] {
        assert_eq!(
            rx(&mut index, p, 80).borrow().reference,
            ServerRef::Server("all".into())
        );
    }
}

#[test]
fn named_ports_select_every_container_port_with_the_name() {
    let mut index = Index::new(cluster());
    let p: Pod = obj(json!({
        "metadata": {"namespace": NS, "name": "web", "labels": {CONTROL_PLANE_NS_LABEL: "linkerd"}},
        "spec": {
            "containers": [
                {"name": "a", "ports": [{"name": "http", "containerPort": 8080}, {"name": "admin", "containerPort": 9000}]},
                {"name": "b", "ports": [{"name": "http", "containerPort": 8081}]}
            ]
        }
    }));
    index.apply(p);
    let mut rx8080 = rx(&mut index, "web", 8080);
    let mut rx8081 = rx(&mut index, "web", 8081);
    let rx9000 = rx(&mut index, "web", 9000);
    index.apply(server(
        "http",
        0,
        json!({"podSelector": {}, "port": "http"}),
    ));
    assert_eq!(
        changed(&mut rx8080).reference,
        ServerRef::Server("http".into())
    );
    assert_eq!(
        changed(&mut rx8081).reference,
        ServerRef::Server("http".into())
    );
    unchanged(&rx9000);
}

#[test]
fn oldest_server_wins_a_contested_port_and_the_next_takes_over() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    // "z-old" is older; "a-new" sorts first by name but is newer.
    index.apply(server("z-old", 0, json!({"podSelector": {}, "port": 80})));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("z-old".into())
    );
    index.apply(server(
        "a-new",
        5,
        json!({"podSelector": {}, "port": 80, "proxyProtocol": "opaque"}),
    ));
    unchanged(&rx);
    k8s_index::Index::<Server>::delete(&mut index, key("z-old"));
    assert_eq!(
        changed(&mut rx),
        named_server("a-new", ProxyProtocol::Opaque, Authorizations::new())
    );
    // Same age: the first name wins.
    index.apply(server("b-same", 5, json!({"podSelector": {}, "port": 80})));
    unchanged(&rx);
}

#[test]
fn server_protocols_map_directly() {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    let cases = [
        (json!(null), detect()),
        (json!("unknown"), detect()),
        (json!("HTTP/1"), ProxyProtocol::Http1),
        (json!("HTTP/2"), ProxyProtocol::Http2),
        (json!("gRPC"), ProxyProtocol::Grpc),
        (json!("opaque"), ProxyProtocol::Opaque),
        (json!("TLS"), ProxyProtocol::Tls),
    ];
    for (i, (proto, expected)) in cases.into_iter().enumerate() {
        let mut spec = json!({"podSelector": {}, "port": 80});
        if !proto.is_null() {
            spec["proxyProtocol"] = proto;
        }
        index.apply(server("srv", 0, spec));
        if i > 0 && expected == detect() {
            unchanged(&rx);
        } else {
            assert_eq!(changed(&mut rx).protocol, expected);
        }
    }
}

#[test]
fn access_policy_adds_its_default_authorizations() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server(
        "srv",
        0,
        json!({"podSelector": {}, "port": 80, "accessPolicy": "audit"}),
    ));
    assert_eq!(
        changed(&mut rx).authorizations,
        DefaultPolicy::Audit.authorizations(&cluster.networks)
    );
    index.apply(server(
        "srv",
        0,
        json!({"podSelector": {}, "port": 80, "accessPolicy": "cluster-authenticated"}),
    ));
    assert_eq!(
        changed(&mut rx).authorizations,
        DefaultPolicy::ClusterAuthenticated.authorizations(&cluster.networks)
    );
    index.apply(server(
        "srv",
        0,
        json!({"podSelector": {}, "port": 80, "accessPolicy": "deny"}),
    ));
    assert!(changed(&mut rx).authorizations.is_empty());
}

// === ServerAuthorizations ===

fn saz(name: &str, spec: Value) -> ServerAuthorization {
    obj(json!({
        "apiVersion": "policy.linkerd.io/v1beta1", "kind": "ServerAuthorization",
        "metadata": {"namespace": NS, "name": name},
        "spec": spec
    }))
}

#[test]
fn server_authorizations_by_name_and_by_server_labels() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server_with_labels(
        "srv",
        0,
        json!({"tier": "front"}),
        json!({"podSelector": {}, "port": 80}),
    ));
    changed(&mut rx);

    index.apply(saz(
        "by-name",
        json!({"server": {"name": "srv"}, "client": {"unauthenticated": true}}),
    ));
    index.apply(saz(
        "by-labels",
        json!({"server": {"selector": {"matchLabels": {"tier": "front"}}},
               "client": {"networks": [{"cidr": "192.168.0.0/16", "except": ["192.168.1.0/24"]}],
                          "meshTLS": {"identities": ["*.other.serviceaccount.identity.linkerd.cluster.local"],
                                      "serviceAccounts": [{"name": "api"}, {"name": "ui", "namespace": "front"}]}}}),
    ));
    index.apply(saz(
        "tls",
        json!({"server": {"name": "srv"}, "client": {"meshTLS": {"unauthenticatedTLS": true}}}),
    ));
    index.apply(saz(
        "other-server",
        json!({"server": {"name": "nope"}, "client": {"unauthenticated": true}}),
    ));
    index.apply(saz(
        "no-clients",
        json!({"server": {"name": "srv"}, "client": {"meshTLS": {}}}),
    ));

    let expected: Authorizations = [
        (
            AuthorizationRef::ServerAuthorization("by-name".into()),
            ClientAuthorization {
                networks: vec![],
                authentication: ClientAuthentication::Unauthenticated,
            },
        ),
        (
            AuthorizationRef::ServerAuthorization("by-labels".into()),
            ClientAuthorization {
                networks: vec![
                    NetworkMatch::parse("192.168.0.0/16", ["192.168.1.0/24"]).expect("net"),
                ],
                authentication: ClientAuthentication::TlsAuthenticated(vec![
                    IdentityMatch::from("*.other.serviceaccount.identity.linkerd.cluster.local"),
                    IdentityMatch::from("api.ns.serviceaccount.identity.linkerd.cluster.local"),
                    IdentityMatch::from("ui.front.serviceaccount.identity.linkerd.cluster.local"),
                ]),
            },
        ),
        (
            AuthorizationRef::ServerAuthorization("tls".into()),
            ClientAuthorization {
                networks: vec![],
                authentication: ClientAuthentication::TlsUnauthenticated,
            },
        ),
    ]
    .into();
    let got = rx.borrow_and_update().as_ref().clone();
    assert_eq!(got, named_server("srv", detect(), expected));
}

// === AuthorizationPolicies and authentications ===

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

fn ap_authz(rx: &watch::Receiver<Arc<InboundServer>>, name: &str) -> Option<ClientAuthorization> {
    rx.borrow()
        .authorizations
        .get(&AuthorizationRef::AuthorizationPolicy(name.into()))
        .cloned()
}

#[test]
fn policy_with_mesh_tls_waits_for_its_authentication() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "ap",
        server_target("srv"),
        json!([mtls_ref("ids", None)]),
    ));
    unchanged(&rx);
    assert_eq!(ap_authz(&rx, "ap"), None, "missing referent: ignored");

    index.apply(mesh_tls(
        NS,
        "ids",
        json!({
            "identities": ["web.ns.serviceaccount.identity.linkerd.cluster.local", "*"],
            "identityRefs": [
                {"kind": "ServiceAccount", "name": "api"},
                {"kind": "ServiceAccount", "name": "ui", "namespace": "front"},
                {"kind": "Namespace", "name": "trusted"}
            ]
        }),
    ));
    let got = changed(&mut rx);
    assert_eq!(
        got,
        named_server(
            "srv",
            detect(),
            [(
                AuthorizationRef::AuthorizationPolicy("ap".into()),
                ClientAuthorization {
                    networks: NetworkMatch::all(),
                    authentication: ClientAuthentication::TlsAuthenticated(vec![
                        IdentityMatch::from("web.ns.serviceaccount.identity.linkerd.cluster.local"),
                        IdentityMatch::Suffix(vec![]),
                        IdentityMatch::from("api.ns.serviceaccount.identity.linkerd.cluster.local"),
                        IdentityMatch::from(
                            "ui.front.serviceaccount.identity.linkerd.cluster.local"
                        ),
                        IdentityMatch::from(
                            "*.trusted.serviceaccount.identity.linkerd.cluster.local"
                        ),
                    ]),
                },
            )]
            .into()
        )
    );

    k8s_index::Index::<MeshTLSAuthentication>::delete(&mut index, key("ids"));
    assert!(changed(&mut rx).authorizations.is_empty());
}

#[test]
fn authentications_may_live_in_other_namespaces() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "ap",
        server_target("srv"),
        json!([mtls_ref("ids", Some("shared")),
               {"group": "policy.linkerd.io", "kind": "NetworkAuthentication", "name": "nets", "namespace": "shared"}]),
    ));
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["a.b"]})));
    unchanged(&rx);
    index.apply(network(
        "shared",
        "nets",
        json!({"networks": [{"cidr": "10.1.0.0/16", "except": ["10.1.1.1"]}]}),
    ));
    changed(&mut rx);
    assert_eq!(
        ap_authz(&rx, "ap"),
        Some(ClientAuthorization {
            networks: vec![NetworkMatch::parse("10.1.0.0/16", ["10.1.1.1/32"]).expect("net")],
            authentication: ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::from(
                "a.b"
            )]),
        })
    );
}

#[test]
fn service_account_refs_namespace_targets_and_empty_refs() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "sa",
        server_target("srv"),
        json!([{"kind": "ServiceAccount", "name": "client"}]),
    ));
    index.apply(policy(
        "everyone",
        json!({"kind": "Namespace", "name": NS}),
        json!([]),
    ));
    index.apply(policy("other", server_target("not-srv"), json!([])));
    changed(&mut rx);
    assert_eq!(
        ap_authz(&rx, "sa"),
        Some(ClientAuthorization {
            networks: NetworkMatch::all(),
            authentication: ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::from(
                "client.ns.serviceaccount.identity.linkerd.cluster.local"
            )]),
        })
    );
    assert_eq!(
        ap_authz(&rx, "everyone"),
        Some(ClientAuthorization::allow_all())
    );
    assert_eq!(ap_authz(&rx, "other"), None);
}

#[test]
fn policies_with_two_identity_or_network_sources_are_ignored() {
    let (mut index, mut rx) = with_server();
    index.apply(mesh_tls(NS, "a", json!({"identities": ["a"]})));
    index.apply(mesh_tls(NS, "b", json!({"identities": ["b"]})));
    index.apply(network(
        NS,
        "n1",
        json!({"networks": [{"cidr": "10.0.0.0/8"}]}),
    ));
    index.apply(network(
        NS,
        "n2",
        json!({"networks": [{"cidr": "10.0.0.0/8"}]}),
    ));
    let net_ref =
        |n: &str| json!({"group": "policy.linkerd.io", "kind": "NetworkAuthentication", "name": n});
    index.apply(policy(
        "two-mtls",
        server_target("srv"),
        json!([mtls_ref("a", None), mtls_ref("b", None)]),
    ));
    index.apply(policy(
        "mtls-and-sa",
        server_target("srv"),
        json!([mtls_ref("a", None), {"kind": "ServiceAccount", "name": "x"}]),
    ));
    index.apply(policy(
        "two-nets",
        server_target("srv"),
        json!([net_ref("n1"), net_ref("n2")]),
    ));
    index.apply(policy(
        "bad-target",
        json!({"kind": "Pod", "name": "x"}),
        json!([]),
    ));
    index.apply(policy(
        "ok",
        server_target("srv"),
        json!([mtls_ref("a", None), net_ref("n1")]),
    ));
    let got = changed(&mut rx);
    assert_eq!(
        got.authorizations.keys().cloned().collect::<Vec<_>>(),
        [AuthorizationRef::AuthorizationPolicy("ok".into())]
    );
}

#[test]
fn authentication_changes_reach_every_namespace_and_unchanged_ones_do_not_publish() {
    let (mut index, mut rx) = with_server();
    index.apply(policy(
        "ap",
        server_target("srv"),
        json!([mtls_ref("ids", Some("shared"))]),
    ));
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["a"]})));
    changed(&mut rx);
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["a"]})));
    unchanged(&rx);
    index.apply(mesh_tls("shared", "ids", json!({"identities": ["b"]})));
    assert_eq!(
        changed(&mut rx).authorizations[&AuthorizationRef::AuthorizationPolicy("ap".into())]
            .authentication,
        ClientAuthentication::TlsAuthenticated(vec![IdentityMatch::from("b")])
    );
    // An invalid authentication counts as missing.
    index.apply(mesh_tls("shared", "ids", json!({})));
    assert!(changed(&mut rx).authorizations.is_empty());
}

// === Probes and routes ===

pub(super) fn probed_pod(name: &str) -> Pod {
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

#[test]
fn probe_routes_need_probe_networks() {
    let mut index = Index::new(cluster());
    index.apply(probed_pod("web"));
    let routes = rx(&mut index, "web", 8080).borrow().http_routes.clone();
    assert_eq!(routes, routes::default_http_routes([], &[]));

    let probe_networks = vec![net("0.0.0.0/0"), net("::/0")];
    let cluster = ClusterInfo {
        probe_networks: probe_networks.clone(),
        ..cluster()
    };
    let mut index = Index::new(cluster.clone());
    index.apply(probed_pod("web"));
    let expected = InboundServer {
        http_routes: routes::default_http_routes(["/live", "/ready"], &probe_networks),
        grpc_routes: Default::default(),
        ratelimit: None,
        ..default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    };
    assert_eq!(**rx(&mut index, "web", 8080).borrow(), expected);
    assert_eq!(
        rx(&mut index, "web", 9090).borrow().http_routes.len(),
        1,
        "no probes on this port"
    );
    // Servers without routes keep the probe route.
    let mut rx = rx(&mut index, "web", 8080);
    index.apply(server("srv", 0, json!({"podSelector": {}, "port": "http"})));
    assert_eq!(
        changed(&mut rx).http_routes,
        routes::default_http_routes(["/live", "/ready"], &probe_networks)
    );
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

#[test]
fn routes_attach_only_when_accepted_by_our_controller() {
    let probe_networks = vec![net("0.0.0.0/0")];
    let mut index = Index::new(ClusterInfo {
        probe_networks: probe_networks.clone(),
        ..cluster()
    });
    index.apply(probed_pod("web"));
    let mut rx = rx(&mut index, "web", 8080);
    index.apply(server("srv", 0, json!({"podSelector": {}, "port": 8080})));
    changed(&mut rx);

    index.apply(route("api", 1, None));
    unchanged(&rx);
    index.apply(route("api", 1, Some(accepted("example.com/other", "True"))));
    unchanged(&rx);
    index.apply(route(
        "api",
        1,
        Some(accepted(POLICY_CONTROLLER_NAME_FOR_TESTS, "False")),
    ));
    unchanged(&rx);
    index.apply(route(
        "api",
        1,
        Some(accepted(POLICY_CONTROLLER_NAME_FOR_TESTS, "True")),
    ));

    let got = changed(&mut rx);
    let gkn = GroupKindName {
        group: "policy.linkerd.io".into(),
        kind: "HTTPRoute".into(),
        name: "api".into(),
    };
    let expected_route = {
        let r = route("api", 1, None);
        http_route(
            &r.spec,
            r.metadata
                .creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0)),
        )
        .expect("valid")
    };
    assert_eq!(
        got.http_routes,
        [(RouteRef::Resource(gkn.clone()), expected_route.clone())].into(),
        "no default or probe routes once a route is attached"
    );

    // A policy targeting the route adds to the route's authorizations.
    index.apply(policy(
        "route-ap",
        json!({"group": "policy.linkerd.io", "kind": "HTTPRoute", "name": "api"}),
        json!([]),
    ));
    let got = changed(&mut rx);
    assert!(got.authorizations.is_empty(), "not a server authorization");
    assert_eq!(
        got.http_routes[&RouteRef::Resource(gkn)].authorizations,
        [(
            AuthorizationRef::AuthorizationPolicy("route-ap".into()),
            ClientAuthorization::allow_all()
        )]
        .into()
    );

    k8s_index::Index::<HTTPRoute>::delete(&mut index, key("api"));
    assert_eq!(
        changed(&mut rx).http_routes,
        routes::default_http_routes(["/live", "/ready"], &probe_networks)
    );
}

const POLICY_CONTROLLER_NAME_FOR_TESTS: &str = k8s_api::policy::http_route::POLICY_CONTROLLER_NAME;

#[test]
fn invalid_routes_are_ignored() {
    let (mut index, rx) = with_server();
    let mut r = route(
        "api",
        1,
        Some(accepted(POLICY_CONTROLLER_NAME_FOR_TESTS, "True")),
    );
    if let Some(parents) = r.spec.parent_refs.as_mut() {
        parents[0].port = Some(80);
    }
    index.apply(r);
    unchanged(&rx);
}

// === Re-lists ===

#[test]
fn reset_removes_deleted_objects_and_publishes_once() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(pod("web", json!({}), &[]));
    let mut rx = rx(&mut index, "web", 80);
    index.apply(server("old", 0, json!({"podSelector": {}, "port": 80})));
    changed(&mut rx);

    index.reset(
        vec![
            server(
                "new",
                1,
                json!({"podSelector": {}, "port": 80, "proxyProtocol": "HTTP/2"}),
            ),
            server("newer", 2, json!({"podSelector": {}, "port": 80})),
        ],
        vec![key("old")],
    );
    assert_eq!(
        changed(&mut rx),
        named_server("new", ProxyProtocol::Http2, Authorizations::new())
    );
    k8s_index::Index::<Server>::reset(&mut index, vec![], vec![key("new"), key("newer")]);
    assert_eq!(
        changed(&mut rx),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
    assert_eq!(index.stats().servers, 0);
}

#[test]
fn namespaces_are_independent() {
    let mut index = Index::new(cluster());
    index.apply(pod_in("other", "web", json!({}), &[]));
    let rx = index
        .pod_server_rx("other", "web", port(80))
        .expect("known pod");
    index.apply(server("srv", 0, json!({"podSelector": {}, "port": 80})));
    unchanged(&rx);
    assert_eq!(
        rx.borrow().reference,
        ServerRef::Default("all-unauthenticated")
    );
}

#[test]
fn opaque_servers_feed_the_destination_without_a_port_lookup() {
    let mut index = Index::new(cluster());
    index.apply(pod(
        "db",
        json!({"app": "db"}),
        &[("pg", 5432), ("admin", 9000)],
    ));
    let (snapshot, mut feed) = index.follow_opaque_ports();
    assert!(snapshot.is_empty());

    // No proxy has asked about port 5432: the Server alone creates it.
    index.apply(server(
        "db-pg",
        0,
        json!({"podSelector": {"matchLabels": {"app": "db"}}, "port": "pg", "proxyProtocol": "opaque"}),
    ));
    let change = feed.try_recv().expect("a change");
    assert_eq!(
        (change.name.as_str(), change.ports.as_slice()),
        ("db", &[5432][..])
    );
    // A non-opaque Server on another port changes nothing in the feed.
    index.apply(server(
        "db-admin",
        1,
        json!({"podSelector": {"matchLabels": {"app": "db"}}, "port": 9000, "proxyProtocol": "HTTP/1"}),
    ));
    assert!(feed.try_recv().is_err());
    assert_eq!(index.follow_opaque_ports().0.len(), 1);

    k8s_index::Index::<Server>::delete(&mut index, key("db-pg"));
    assert!(feed.try_recv().expect("removal").ports.is_empty());
    index.apply(server(
        "db-pg",
        0,
        json!({"podSelector": {"matchLabels": {"app": "db"}}, "port": "pg", "proxyProtocol": "opaque"}),
    ));
    assert_eq!(feed.try_recv().expect("back").ports, [5432]);
    k8s_index::Index::<Pod>::delete(&mut index, key("db"));
    assert!(feed.try_recv().expect("pod gone").ports.is_empty());
    assert!(index.follow_opaque_ports().0.is_empty());
}

mod ratelimit;

mod reindex;

mod external_workload;
