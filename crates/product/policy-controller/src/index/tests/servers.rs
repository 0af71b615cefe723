//! Servers: which pod ports they select (labels, expressions, names),
//! the oldest winning a contested port, protocols, access policies.

use super::*;

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
