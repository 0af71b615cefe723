//! Probe routes and HTTPRoutes: attached only once accepted by our
//! controller; invalid routes are ignored.

use super::*;
use crate::k8s::routes::http_route;

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
