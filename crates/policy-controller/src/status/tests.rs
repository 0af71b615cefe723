//! The desired-status computation and the status index, without a server.

use k8s_index::{Index as _, ObjectKey};
use serde_json::{Value, json};

use super::*;

fn time(secs: i64) -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000 + secs).expect("time"))
}

fn parent(json: Value) -> ParentRef {
    serde_json::from_value(json).expect("parent")
}

fn server_parent(name: &str) -> ParentRef {
    parent(json!({"group": "policy.linkerd.io", "kind": "Server", "name": name}))
}

fn servers(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|n| n.to_string()).collect()
}

fn ours(name: &str, status: &str, reason: &str, at: &Time) -> RouteParentStatus {
    let message = if status == "True" {
        String::new()
    } else {
        format!("Server ns/{name} not found")
    };
    RouteParentStatus {
        parent_ref: server_parent(name),
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
    let status = route_status("ns", &parents, Some(1), None, &servers(&["web"]), &now);
    assert_eq!(
        status.parents,
        vec![
            ours("web", "True", ACCEPTED, &now),
            ours("gone", "False", NO_MATCHING_PARENT, &now),
        ],
        "one entry per distinct local Server parent; other kinds and namespaces skipped"
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
    let same = route_status(
        "ns",
        &parents,
        Some(1),
        Some(&current),
        &servers(&["web", "other"]),
        &now,
    );
    assert_eq!(
        same.parents,
        vec![
            theirs.clone(),
            ours("web", "True", ACCEPTED, &before),
            ours("other", "True", ACCEPTED, &before),
        ]
    );
    // "other" disappears: only its condition gets a new transition time.
    let changed = route_status(
        "ns",
        &parents,
        Some(1),
        Some(&current),
        &servers(&["web"]),
        &now,
    );
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
        "metadata": {"namespace": "ns", "name": name, "generation": 1},
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
            namespace: "ns".into(),
            name: "api".into(),
            status: HttpRouteStatus {
                parents: vec![ours("web", "False", NO_MATCHING_PARENT, &now)],
            },
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
