//! ExternalWorkloads in the inbound index: selected only by
//! `externalWorkloadSelector` Servers (by port number or by the name of one
//! of their ports), authorized exactly as pods are, with the pods'
//! annotation defaults and no probe routes; their watches follow label,
//! port and Server changes and end when they are deleted.

use super::*;

fn ew(name: &str, labels: Value, ports: &[(&str, u16)]) -> ExternalWorkload {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p)| json!({"name": n, "port": p}))
        .collect();
    obj(json!({
        "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
        "metadata": {"namespace": NS, "name": name, "labels": labels},
        "spec": {
            "meshTLS": {"identity": format!("{name}.{NS}.serviceaccount.identity.linkerd.cluster.local"),
                        "serverName": format!("{name}.{NS}.cluster.local")},
            "ports": ports,
            "workloadIPs": [{"ip": "192.0.2.10"}]
        }
    }))
}

fn ew_rx(index: &mut Index, name: &str, p: u16) -> watch::Receiver<Arc<InboundServer>> {
    index
        .workload_server_rx(&WorkloadPort {
            namespace: NS.to_string(),
            kind: WorkloadKind::External,
            name: name.to_string(),
            port: port(p),
        })
        .expect("known external workload")
}

fn ew_lookup(index: &mut Index, name: &str) -> Option<LookupError> {
    index
        .workload_server_rx(&WorkloadPort {
            namespace: NS.to_string(),
            kind: WorkloadKind::External,
            name: name.to_string(),
            port: port(80),
        })
        .err()
}

fn ew_server(name: &str, created: u64, selector: Value, port: Value) -> Server {
    server(
        name,
        created,
        json!({"externalWorkloadSelector": selector, "port": port}),
    )
}

#[test]
fn unknown_external_workloads_are_not_found_and_kinds_do_not_mix() {
    let mut index = Index::new(cluster());
    assert_eq!(
        ew_lookup(&mut index, "vm"),
        Some(LookupError::UnknownServer)
    );
    index.apply(pod("web", json!({}), &[]));
    assert_eq!(
        ew_lookup(&mut index, "web"),
        Some(LookupError::UnknownServer),
        "a pod is not an external workload"
    );
    index.apply(ew("vm", json!({}), &[]));
    assert_eq!(ew_lookup(&mut index, "vm"), None);
    assert!(
        index.pod_server_rx(NS, "vm", port(80)).is_err(),
        "an external workload is not a pod"
    );
    assert_eq!(
        (index.stats().pods, index.stats().external_workloads),
        (1, 1)
    );
}

#[test]
fn unknown_port_gets_the_default_server_without_probe_routes() {
    let probe_networks = vec![net("0.0.0.0/0")];
    let cluster = ClusterInfo {
        probe_networks,
        ..cluster()
    };
    let mut index = Index::new(cluster.clone());
    index.apply(ew("vm", json!({}), &[("http", 8080)]));
    assert_eq!(index.stats().port_servers, 0);
    let rx = ew_rx(&mut index, "vm", 8080);
    assert_eq!(
        **rx.borrow(),
        InboundServer {
            http_routes: routes::default_http_routes([], &cluster.probe_networks),
            ..default_server(&cluster, DefaultPolicy::AllUnauthenticated)
        }
    );
    assert_eq!(rx.borrow().http_routes.len(), 1, "no probe route");
    assert_eq!(index.stats().port_servers, 1, "kept for later lookups");
}

#[test]
fn annotations_set_policy_opaque_ports_and_required_identity() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    let mut vm = ew("vm", json!({}), &[]);
    vm.metadata.annotations = Some(
        [
            (DEFAULT_POLICY_ANNOTATION, "cluster-unauthenticated"),
            (OPAQUE_PORTS_ANNOTATION, "3306"),
            (REQUIRE_IDENTITY_ANNOTATION, "3306,7000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    );
    index.apply(vm.clone());
    assert_eq!(
        **ew_rx(&mut index, "vm", 80).borrow(),
        default_server(&cluster, DefaultPolicy::ClusterUnauthenticated)
    );
    assert_eq!(
        **ew_rx(&mut index, "vm", 3306).borrow(),
        InboundServer {
            protocol: ProxyProtocol::Opaque,
            ..default_server(&cluster, DefaultPolicy::ClusterAuthenticated)
        }
    );

    // Dropping the annotations brings the cluster default back.
    let mut rx = ew_rx(&mut index, "vm", 80);
    vm.metadata.annotations = None;
    index.apply(vm);
    assert_eq!(
        changed(&mut rx),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
}

#[test]
fn external_workload_servers_select_by_labels_and_port_number_or_name() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(ew(
        "vm",
        json!({"app": "legacy", "tier": "db"}),
        &[("http", 8080), ("admin", 9990)],
    ));
    // A pod with the same labels and port names, for the kinds not to mix.
    index.apply(pod(
        "web",
        json!({"app": "legacy", "tier": "db"}),
        &[("http", 8080), ("admin", 9990)],
    ));
    let mut http = ew_rx(&mut index, "vm", 8080);
    let mut admin = ew_rx(&mut index, "vm", 9990);
    let mut pod_http = rx(&mut index, "web", 8080);

    // A podSelector Server never selects an external workload.
    index.apply(server(
        "pods",
        0,
        json!({"podSelector": {}, "port": "http", "proxyProtocol": "HTTP/2"}),
    ));
    unchanged(&http);
    assert_eq!(
        changed(&mut pod_http).reference,
        ServerRef::Server("pods".into())
    );

    // By name, with matchLabels and matchExpressions.
    index.apply(server(
        "vm-http",
        1,
        json!({"externalWorkloadSelector": {
                "matchLabels": {"app": "legacy"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["db"]}]},
               "port": "http", "proxyProtocol": "HTTP/1"}),
    ));
    assert_eq!(
        changed(&mut http),
        named_server("vm-http", ProxyProtocol::Http1, Authorizations::new())
    );
    unchanged(&admin);
    unchanged(&pod_http);

    // By number.
    index.apply(ew_server("vm-admin", 2, json!({}), json!(9990)));
    assert_eq!(
        changed(&mut admin),
        named_server("vm-admin", detect(), Authorizations::new())
    );
    unchanged(&http);

    // A name the workload does not have selects nothing.
    index.apply(ew_server("vm-grpc", 3, json!({}), json!("grpc")));
    unchanged(&http);
    unchanged(&admin);
    assert_eq!(index.stats().port_servers, 3);
}

#[test]
fn watches_follow_labels_ports_and_servers() {
    let cluster = cluster();
    let mut index = Index::new(cluster.clone());
    index.apply(ew("vm", json!({"app": "legacy"}), &[("http", 8080)]));
    let mut rx = ew_rx(&mut index, "vm", 8080);
    index.apply(ew_server(
        "vm-http",
        0,
        json!({"matchLabels": {"app": "legacy"}}),
        json!("http"),
    ));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("vm-http".into())
    );

    // Re-applying the same workload publishes nothing.
    index.apply(ew("vm", json!({"app": "legacy"}), &[("http", 8080)]));
    unchanged(&rx);

    // Relabelled: no longer selected.
    index.apply(ew("vm", json!({"app": "other"}), &[("http", 8080)]));
    assert_eq!(
        changed(&mut rx),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
    index.apply(ew("vm", json!({"app": "legacy"}), &[("http", 8080)]));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("vm-http".into())
    );

    // Unlike a pod's, an external workload's ports may be renamed.
    index.apply(ew("vm", json!({"app": "legacy"}), &[("web", 8080)]));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Default("all-unauthenticated")
    );
    index.apply(ew("vm", json!({"app": "legacy"}), &[("http", 8080)]));
    changed(&mut rx);

    // The Server deleted: back to the default.
    k8s_index::Index::<Server>::delete(&mut index, key("vm-http"));
    assert_eq!(
        changed(&mut rx),
        default_server(&cluster, DefaultPolicy::AllUnauthenticated)
    );
}

#[test]
fn oldest_external_workload_server_wins_a_contested_port() {
    let mut index = Index::new(cluster());
    index.apply(ew("vm", json!({}), &[("http", 8080)]));
    let mut rx = ew_rx(&mut index, "vm", 8080);
    index.apply(ew_server("b-new", 5, json!({}), json!(8080)));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("b-new".into())
    );
    index.apply(ew_server("a-old", 1, json!({}), json!("http")));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("a-old".into())
    );
    k8s_index::Index::<Server>::delete(&mut index, key("a-old"));
    assert_eq!(
        changed(&mut rx).reference,
        ServerRef::Server("b-new".into())
    );
}

#[test]
fn authorizations_apply_as_to_a_pod_server() {
    let mut index = Index::new(cluster());
    index.apply(pod("web", json!({}), &[]));
    index.apply(ew("vm", json!({}), &[]));
    let mut pod_rx = rx(&mut index, "web", 80);
    let mut vm_rx = ew_rx(&mut index, "vm", 80);
    // The same Server twice, one per kind, both labelled for the
    // ServerAuthorization's selector.
    let labels = json!({"policy": "strict"});
    index.apply(server_with_labels(
        "pods",
        0,
        labels.clone(),
        json!({"podSelector": {}, "port": 80, "accessPolicy": "audit"}),
    ));
    index.apply(server_with_labels(
        "vms",
        0,
        labels,
        json!({"externalWorkloadSelector": {}, "port": 80, "accessPolicy": "audit"}),
    ));
    index.apply(mesh_tls(
        NS,
        "ids",
        json!({"identities": ["client.ns.serviceaccount.identity.linkerd.cluster.local"]}),
    ));
    index.apply(network(
        NS,
        "nets",
        json!({"networks": [{"cidr": "10.1.0.0/16"}]}),
    ));
    for target in ["pods", "vms"] {
        index.apply(policy(
            &format!("ap-{target}"),
            server_target(target),
            json!([mtls_ref("ids", None), {"group": "policy.linkerd.io", "kind": "NetworkAuthentication", "name": "nets"}]),
        ));
    }
    index.apply(policy(
        "ns-wide",
        json!({"kind": "Namespace", "name": NS}),
        json!([]),
    ));
    index.apply(saz(
        "strict",
        json!({"server": {"selector": {"matchLabels": {"policy": "strict"}}},
               "client": {"meshTLS": {"unauthenticatedTLS": true}}}),
    ));

    let pod_server = changed(&mut pod_rx);
    let vm_server = changed(&mut vm_rx);
    assert_eq!(vm_server.reference, ServerRef::Server("vms".into()));
    let keys = |s: &InboundServer| s.authorizations.keys().cloned().collect::<Vec<_>>();
    assert_eq!(
        keys(&vm_server),
        vec![
            AuthorizationRef::Default("audit"),
            AuthorizationRef::ServerAuthorization("strict".into()),
            AuthorizationRef::AuthorizationPolicy("ap-vms".into()),
            AuthorizationRef::AuthorizationPolicy("ns-wide".into()),
        ]
    );
    // Everything but the AuthorizationPolicy's name is the pod's.
    let rename = |r: &AuthorizationRef| match r {
        AuthorizationRef::AuthorizationPolicy(n) if n == "ap-pods" => {
            AuthorizationRef::AuthorizationPolicy("ap-vms".into())
        }
        other => other.clone(),
    };
    let pod_authzs: Authorizations = pod_server
        .authorizations
        .iter()
        .map(|(r, a)| (rename(r), a.clone()))
        .collect();
    assert_eq!(vm_server.authorizations, pod_authzs);
    let vm_authz =
        &vm_server.authorizations[&AuthorizationRef::AuthorizationPolicy("ap-vms".into())];
    assert_eq!(
        vm_authz.networks,
        vec![NetworkMatch {
            net: net("10.1.0.0/16"),
            except: vec![]
        }]
    );

    // An authentication change reaches the external workload too.
    index.apply(mesh_tls(NS, "ids", json!({"identities": ["*"]})));
    let updated = changed(&mut vm_rx);
    assert_ne!(
        updated.authorizations[&AuthorizationRef::AuthorizationPolicy("ap-vms".into())],
        *vm_authz
    );
}

#[test]
fn routes_attach_to_external_workload_servers_without_probe_routes() {
    let mut index = Index::new(ClusterInfo {
        probe_networks: vec![net("0.0.0.0/0")],
        ..cluster()
    });
    index.apply(ew("vm", json!({}), &[("http", 8080)]));
    let mut rx = ew_rx(&mut index, "vm", 8080);
    index.apply(ew_server("srv", 0, json!({}), json!("http")));
    assert_eq!(
        changed(&mut rx).http_routes,
        routes::default_http_routes([], &[net("0.0.0.0/0")]),
        "no probe paths on an external workload"
    );
    index.apply(route(
        "api",
        1,
        Some(accepted(POLICY_CONTROLLER_NAME_FOR_TESTS, "True")),
    ));
    let routed = changed(&mut rx);
    assert_eq!(
        routed.http_routes.keys().cloned().collect::<Vec<_>>(),
        vec![RouteRef::Resource(GroupKindName {
            group: "policy.linkerd.io".into(),
            kind: "HTTPRoute".into(),
            name: "api".into(),
        })]
    );
}

#[test]
fn deleting_an_external_workload_closes_its_watches() {
    let mut index = Index::new(cluster());
    index.apply(ew("vm", json!({}), &[]));
    let rx = ew_rx(&mut index, "vm", 80);
    k8s_index::Index::<ExternalWorkload>::delete(&mut index, key("vm"));
    assert!(rx.has_changed().is_err(), "sender dropped");
    assert_eq!(
        ew_lookup(&mut index, "vm"),
        Some(LookupError::UnknownServer)
    );
    assert_eq!(
        index.stats(),
        IndexStats::default(),
        "empty namespaces are dropped"
    );
}

#[test]
fn reset_removes_external_workloads_gone_from_the_list() {
    let mut index = Index::new(cluster());
    index.apply(ew("gone", json!({}), &[]));
    let gone = ew_rx(&mut index, "gone", 80);
    index.apply(ew_server(
        "srv",
        0,
        json!({"matchLabels": {"app": "vm"}}),
        json!(80),
    ));
    index.reset(
        vec![ew("kept", json!({"app": "vm"}), &[])],
        vec![key("gone")],
    );
    assert!(gone.has_changed().is_err(), "sender dropped");
    assert_eq!(
        ew_rx(&mut index, "kept", 80).borrow().reference,
        ServerRef::Server("srv".into())
    );
    assert_eq!(index.stats().external_workloads, 1);
}
