//! The desired-status computation and the status index, without a server.

use k8s_index::{Index as _, ObjectKey};
use serde_json::{Value, json};

use super::*;
use k8s_api::gateway;

fn time(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).expect("time"))
}

fn parent(json: Value) -> ParentRef {
    serde_json::from_value(json).expect("parent")
}

fn server_parent(name: &str) -> ParentRef {
    parent(json!({"group": "policy.linkerd.io", "kind": "Server", "name": name}))
}

/// Servers of namespace `ns`.
fn servers(names: &[&str]) -> HashMap<String, BTreeSet<String>> {
    HashMap::from([(
        "ns".to_string(),
        names.iter().map(|n| n.to_string()).collect(),
    )])
}

/// The status of a policy HTTPRoute with only Server parents.
fn server_route_status(
    parents: &[ParentRef],
    current: Option<&HttpRouteStatus>,
    servers: &HashMap<String, BTreeSet<String>>,
    now: &Time,
) -> HttpRouteStatus {
    let view = RouteView {
        ns: "ns",
        kind: RouteKind::PolicyHttp,
        parent_refs: parents,
        backends: &[],
        generation: Some(1),
        current,
        unserved: &Unserved::default(),
    };
    let cluster = ClusterView {
        servers,
        server_ranks: &HashMap::new(),
        services: &HashMap::new(),
        parent_ranks: &HashMap::new(),
        egress_networks: &HashMap::new(),
        egress_parent_ranks: &HashMap::new(),
    };
    route_status(&view, &cluster, now)
}

/// Our entry for Server `ns/name`, its parentRef as the original writes it.
fn ours(name: &str, status: &str, reason: &str, at: &Time) -> RouteParentStatus {
    ours_in("ns", name, status, reason, at)
}

fn ours_in(ns: &str, name: &str, status: &str, reason: &str, at: &Time) -> RouteParentStatus {
    let message = if reason == NO_MATCHING_PARENT {
        format!("Server {ns}/{name} not found")
    } else {
        String::new()
    };
    RouteParentStatus {
        parent_ref: ParentRef {
            group: Some("policy.linkerd.io".into()),
            kind: Some("Server".into()),
            namespace: Some(ns.into()),
            name: name.into(),
            section_name: None,
            port: None,
        },
        controller_name: POLICY_CONTROLLER_NAME.into(),
        conditions: vec![Condition {
            type_: ACCEPTED.into(),
            status: status.into(),
            reason: reason.into(),
            message,
            observed_generation: Some(1),
            last_transition_time: at.clone(),
        }],
    }
}

#[test]
fn accepted_if_the_server_exists_else_no_matching_parent() {
    let now = time(0);
    let parents = [
        server_parent("web"),
        server_parent("gone"),
        server_parent("web"),
        parent(json!({"name": "gateway"})),
        parent(
            json!({"group": "policy.linkerd.io", "kind": "Server", "name": "x", "namespace": "other"}),
        ),
    ];
    let status = server_route_status(&parents, None, &servers(&["web"]), &now);
    assert_eq!(
        status.parents,
        vec![
            ours("web", "True", ACCEPTED, &now),
            ours("gone", "False", NO_MATCHING_PARENT, &now),
            ours_in("other", "x", "False", NO_MATCHING_PARENT, &now),
        ],
        "one entry per distinct Server parent, with its namespace; other kinds skipped"
    );
    let json = serde_json::to_value(&status.parents[0].parent_ref).expect("json");
    assert_eq!(
        json,
        json!({"group": "policy.linkerd.io", "kind": "Server", "namespace": "ns", "name": "web"}),
        "the parentRef the original writes: no port, no sectionName"
    );
}

#[test]
fn keeps_other_controllers_and_unchanged_transition_times() {
    let before = time(0);
    let now = time(60);
    let theirs = RouteParentStatus {
        parent_ref: parent(json!({"name": "gw"})),
        controller_name: "example.com/gateway".into(),
        conditions: vec![],
    };
    let current = HttpRouteStatus {
        parents: vec![
            ours("web", "True", ACCEPTED, &before),
            theirs.clone(),
            ours("other", "True", ACCEPTED, &before),
        ],
    };
    let parents = [server_parent("web"), server_parent("other")];
    // Nothing changed: the same status, so nothing to write.
    let same = server_route_status(&parents, Some(&current), &servers(&["web", "other"]), &now);
    assert_eq!(
        same.parents,
        vec![
            theirs.clone(),
            ours("web", "True", ACCEPTED, &before),
            ours("other", "True", ACCEPTED, &before),
        ]
    );
    // "other" disappears: only its condition gets a new transition time.
    let changed = server_route_status(&parents, Some(&current), &servers(&["web"]), &now);
    assert_eq!(
        changed.parents,
        vec![
            theirs,
            ours("web", "True", ACCEPTED, &before),
            ours("other", "False", NO_MATCHING_PARENT, &now),
        ]
    );
}

fn route(name: &str, parents: Value, status: Option<HttpRouteStatus>) -> HTTPRoute {
    let mut route: HTTPRoute = serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
        "metadata": {"namespace": "ns", "name": name, "generation": 1, "resourceVersion": "1"},
        "spec": {"parentRefs": parents},
    }))
    .expect("route");
    route.status = status;
    route
}

fn server(name: &str) -> Server {
    serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
        "metadata": {"namespace": "ns", "name": name},
        "spec": {"podSelector": {}, "port": 80},
    }))
    .expect("server")
}

#[test]
fn index_patches_only_routes_whose_status_differs() {
    let now = time(0);
    let mut index = StatusIndex::default();
    let mut changes = index.subscribe();
    let web = json!([{"group": "policy.linkerd.io", "kind": "Server", "name": "web"}]);
    index.apply(route("api", web.clone(), None));
    index.apply(route("no-parents", json!([]), None));
    assert!(changes.has_changed().expect("open"));
    changes.mark_unchanged();

    let patches = index.patches(&now);
    assert_eq!(
        patches,
        vec![StatusPatch {
            kind: RouteKind::PolicyHttp,
            namespace: "ns".into(),
            name: "api".into(),
            status: HttpRouteStatus {
                parents: vec![ours("web", "False", NO_MATCHING_PARENT, &now)],
            },
            resource_version: Some("1".into()),
        }],
        "a route without Server parents and without status needs nothing"
    );

    index.apply(server("web"));
    assert!(changes.has_changed().expect("open"));
    let accepted = HttpRouteStatus {
        parents: vec![ours("web", "True", ACCEPTED, &now)],
    };
    assert_eq!(index.patches(&now)[0].status, accepted);

    // The watch brings our write back: nothing left to do (no write loop).
    index.apply(route("api", web, Some(accepted)));
    assert_eq!(index.patches(&time(5)), vec![]);

    // Re-applying the same Server is not a change.
    changes.mark_unchanged();
    index.apply(server("web"));
    assert!(!changes.has_changed().expect("open"));

    k8s_index::Index::<Server>::delete(&mut index, ObjectKey::new(Some("ns"), "web"));
    assert!(changes.has_changed().expect("open"));
    let later = time(10);
    assert_eq!(
        index.patches(&later)[0].status.parents,
        vec![ours("web", "False", NO_MATCHING_PARENT, &later)]
    );
}

#[test]
fn a_patch_carries_the_version_its_status_was_computed_from() {
    let now = time(0);
    let mut index = StatusIndex::default();
    let web = json!([{"group": "policy.linkerd.io", "kind": "Server", "name": "web"}]);
    index.apply(route("api", web.clone(), None));
    assert_eq!(
        index.patches(&now)[0].resource_version.as_deref(),
        Some("1")
    );
    // Another controller wrote its entry: a new version, a new status to
    // start from, which the patch now names.
    let theirs = RouteParentStatus {
        parent_ref: parent(json!({"kind": "Gateway", "name": "gw"})),
        controller_name: "example.com/other".into(),
        conditions: vec![],
    };
    let mut changed = route(
        "api",
        web.clone(),
        Some(HttpRouteStatus {
            parents: vec![theirs.clone()],
        }),
    );
    changed.metadata.resource_version = Some("7".into());
    let mut changes = index.subscribe();
    index.apply(changed.clone());
    assert!(changes.has_changed().expect("open"));
    let patch = &index.patches(&now)[0];
    assert_eq!(patch.resource_version.as_deref(), Some("7"));
    assert_eq!(patch.status.parents[0], theirs, "their entry is kept");
    // Only the version changed (a label, say): still a change to follow,
    // or every later patch would be refused.
    changes.mark_unchanged();
    changed.metadata.resource_version = Some("8".into());
    index.apply(changed);
    assert!(changes.has_changed().expect("open"));
    assert_eq!(
        index.patches(&now)[0].resource_version.as_deref(),
        Some("8")
    );
}

fn service(name: &str, cluster_ip: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"namespace": "ns", "name": name},
        "spec": {"clusterIP": cluster_ip, "ports": [{"port": 80}]},
    }))
    .expect("service")
}

/// The parents of the status patch of `kind`.
fn parents_of(patches: &[StatusPatch], kind: RouteKind) -> Vec<RouteParentStatus> {
    patches
        .iter()
        .find(|p| p.kind == kind)
        .map(|p| p.status.parents.clone())
        .expect("a patch")
}

fn gateway_route(kind: &str, name: &str, parents: Value, backends: Value, status: Value) -> Value {
    json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": kind,
        "metadata": {"namespace": "ns", "name": name, "generation": 1},
        "spec": {"parentRefs": parents, "rules": [{"backendRefs": backends}]},
        "status": status,
    })
}

fn service_status(
    name: &str,
    port: Option<u16>,
    accepted: (&str, &str),
    resolved: (&str, &str),
    at: &Time,
) -> RouteParentStatus {
    let cond = |type_: &str, (status, reason): (&str, &str), message: &str| Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(1),
        last_transition_time: at.clone(),
    };
    let message = if accepted.1 == NO_MATCHING_PARENT && name == "headless" {
        "parent service must have a ClusterIP"
    } else {
        ""
    };
    RouteParentStatus {
        parent_ref: ParentRef {
            group: Some("core".into()),
            kind: Some("Service".into()),
            namespace: Some("ns".into()),
            name: name.into(),
            section_name: None,
            port,
        },
        controller_name: POLICY_CONTROLLER_NAME.into(),
        conditions: vec![
            cond(ACCEPTED, accepted, message),
            cond(RESOLVED_REFS, resolved, ""),
        ],
    }
}

#[test]
fn service_parents_accepted_resolved_and_conflicts() {
    let now = time(0);
    let mut index = StatusIndex::default();
    index.apply(service("web", "10.0.0.1"));
    index.apply(service("headless", "None"));
    let theirs = json!({"parentRef": {"name": "gw"}, "controllerName": "example.com/gateway", "conditions": []});
    let route: gateway::HTTPRoute = serde_json::from_value(gateway_route(
        "HTTPRoute",
        "h",
        json!([{"kind": "Service", "name": "web", "port": 80}, {"kind": "Service", "name": "headless"}, {"kind": "Service", "name": "gone"}]),
        json!([{"name": "web", "port": 80}, {"name": "missing", "port": 80}]),
        json!({"parents": [theirs]}),
    ))
    .expect("route");
    index.apply(route);
    let patches = index.patches(&now);
    assert_eq!(patches.len(), 1);
    assert_eq!(patches[0].kind, RouteKind::GatewayHttp);
    let parents = &patches[0].status.parents;
    assert_eq!(
        parents[0].controller_name, "example.com/gateway",
        "other controllers' entries stay"
    );
    let not_found = ("False", BACKEND_NOT_FOUND);
    assert_eq!(
        parents[1..],
        [
            service_status("web", Some(80), ("True", ACCEPTED), not_found, &now),
            service_status(
                "headless",
                None,
                ("False", NO_MATCHING_PARENT),
                not_found,
                &now
            ),
            service_status("gone", None, ("False", NO_MATCHING_PARENT), not_found, &now),
        ]
    );
    // A GRPCRoute on the same parent conflicts the HTTPRoute; its own
    // backends all exist.
    let grpc: gateway::GRPCRoute = serde_json::from_value(gateway_route(
        "GRPCRoute",
        "g",
        json!([{"kind": "Service", "name": "web", "port": 80}]),
        json!([{"name": "web", "port": 80}]),
        json!({"parents": []}),
    ))
    .expect("grpc route");
    index.apply(grpc);
    let patches = index.patches(&now);
    let grpc = patches
        .iter()
        .find(|p| p.kind == RouteKind::Grpc)
        .expect("grpc patch");
    assert_eq!(
        grpc.status.parents,
        [service_status(
            "web",
            Some(80),
            ("True", ACCEPTED),
            ("True", RESOLVED_REFS),
            &now
        )]
    );
    let http = patches
        .iter()
        .find(|p| p.kind == RouteKind::GatewayHttp)
        .expect("http patch");
    assert_eq!(
        http.status.parents[1],
        service_status(
            "web",
            Some(80),
            ("False", ROUTE_CONFLICTED),
            not_found,
            &now
        )
    );
}

#[test]
fn our_service_parent_entries_are_kept_when_unchanged() {
    let before = time(0);
    let mut index = StatusIndex::default();
    index.apply(service("web", "10.0.0.1"));
    let written = service_status(
        "web",
        None,
        ("True", ACCEPTED),
        ("True", RESOLVED_REFS),
        &before,
    );
    let route: HTTPRoute = serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
        "metadata": {"namespace": "ns", "name": "r", "generation": 1},
        "spec": {"parentRefs": [{"kind": "Service", "group": "core", "name": "web"}]},
        "status": {"parents": [written]},
    }))
    .expect("route");
    index.apply(route);
    assert_eq!(
        index.patches(&time(60)),
        vec![],
        "nothing erased, nothing rewritten"
    );
}

#[test]
fn a_grpc_route_on_the_same_server_conflicts_http_routes() {
    let now = time(0);
    let mut index = StatusIndex::default();
    index.apply(server("web"));
    let web = json!([{"group": "policy.linkerd.io", "kind": "Server", "name": "web"}]);
    index.apply(route("api", web.clone(), None));
    let grpc: gateway::GRPCRoute = serde_json::from_value(json!({
        "apiVersion": "gateway.networking.k8s.io/v1", "kind": "GRPCRoute",
        "metadata": {"namespace": "ns", "name": "rpc", "generation": 1},
        "spec": {"parentRefs": web},
    }))
    .expect("grpc route");
    index.apply(grpc);
    let patches = index.patches(&now);
    let status = |kind| parents_of(&patches, kind);
    assert_eq!(
        status(RouteKind::Grpc),
        vec![ours("web", "True", ACCEPTED, &now)]
    );
    assert_eq!(
        status(RouteKind::PolicyHttp),
        vec![ours("web", "False", ROUTE_CONFLICTED, &now)]
    );
}

/// What the indexes cannot serve, admitted as the original admits it, is
/// `Accepted=False` with `UnsupportedValue` and the conversion's reason,
/// on the parents of the side that cannot serve it.
#[test]
fn routes_the_indexes_cannot_serve_say_why() {
    let now = time(0);
    let mut index = StatusIndex::default();
    index.apply(service("web", "10.0.0.1"));
    index.apply(server("srv"));
    let mut mirror = gateway_route(
        "HTTPRoute",
        "mirror",
        json!([{"kind": "Service", "name": "web", "port": 80}]),
        json!([{"name": "web", "port": 80}]),
        json!({"parents": []}),
    );
    mirror["spec"]["rules"][0]["filters"] = json!([{"type": "RequestMirror",
        "requestMirror": {"backendRef": {"name": "web", "port": 80}}}]);
    let mirror: gateway::HTTPRoute = serde_json::from_value(mirror).expect("route");
    index.apply(mirror);
    let on_server_port: HTTPRoute = serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
        "metadata": {"namespace": "ns", "name": "port", "generation": 1},
        "spec": {"parentRefs": [{"group": "policy.linkerd.io", "kind": "Server", "name": "srv", "port": 80}]},
    }))
    .expect("route");
    index.apply(on_server_port);
    let patches = index.patches(&now);
    let status = |kind| parents_of(&patches, kind);
    let accepted = |parents: &[RouteParentStatus]| {
        let c = &parents[0].conditions[0];
        (
            c.type_.clone(),
            c.status.clone(),
            c.reason.clone(),
            c.message.clone(),
        )
    };
    assert_eq!(
        accepted(&status(RouteKind::GatewayHttp)),
        (
            ACCEPTED.to_string(),
            "False".to_string(),
            UNSUPPORTED_VALUE.to_string(),
            "unsupported filter \"RequestMirror\"".to_string()
        )
    );
    assert_eq!(
        accepted(&status(RouteKind::PolicyHttp)),
        (
            ACCEPTED.to_string(),
            "False".to_string(),
            UNSUPPORTED_VALUE.to_string(),
            "a Server parent may not name a port".to_string()
        )
    );
    // Once the route is one the index serves, it is accepted.
    let plain: gateway::HTTPRoute = serde_json::from_value(gateway_route(
        "HTTPRoute",
        "mirror",
        json!([{"kind": "Service", "name": "web", "port": 80}]),
        json!([{"name": "web", "port": 80}]),
        json!({"parents": []}),
    ))
    .expect("route");
    index.apply(plain);
    let parents = parents_of(&index.patches(&now), RouteKind::GatewayHttp);
    assert_eq!(parents[0].conditions[0].reason, ACCEPTED);
}

mod policies;
