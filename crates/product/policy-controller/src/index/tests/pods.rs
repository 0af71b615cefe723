//! Pods and their default servers: lookups, the cluster default policy,
//! the policy, opaque-port and required-identity annotations, deletion.

use super::*;

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
