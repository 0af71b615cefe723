//! Policy HTTPRoutes on Servers: the route status writer accepts a route
//! and an open `WatchPort` stream follows the route's life in order.

use super::*;

fn route_names(s: &Server) -> Vec<Option<metadata::Kind>> {
    match s.protocol.clone().and_then(|p| p.kind) {
        Some(proxy_protocol::Kind::Http1(h)) => h
            .routes
            .into_iter()
            .map(|r| r.metadata.and_then(|m| m.kind))
            .collect(),
        _ => Vec::new(),
    }
}

fn has_route(s: &Server, name: &str) -> bool {
    route_names(s)
        .iter()
        .any(|k| matches!(k, Some(metadata::Kind::Resource(r)) if r.name == name))
}

/// `(status, reason)` of our Accepted condition for `parent`, as stored.
fn accepted_condition(env: &TestEnv, route: &str, parent: &str) -> Option<(String, String)> {
    let (ok, out) = env.cluster().kubectl(
        &[
            "get",
            "-n",
            &env.ns,
            &format!("httproute.policy.linkerd.io/{route}"),
            "-o",
            "json",
        ],
        None,
    );
    if !ok {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(&out).ok()?;
    let parents = json.pointer("/status/parents")?.as_array()?;
    let entry = parents.iter().find(|p| {
        p["controllerName"] == "linkerd.io/policy-controller" && p["parentRef"]["name"] == parent
    })?;
    let cond = entry["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Accepted")?;
    Some((
        cond["status"].as_str()?.to_string(),
        cond["reason"].as_str()?.to_string(),
    ))
}

async fn wait_condition(env: &TestEnv, route: &str, parent: &str, want: (&str, &str)) {
    eventually(
        &format!("{route} status {want:?} for {parent}"),
        TIMEOUT,
        || async {
            match accepted_condition(env, route, parent) {
                Some((s, r)) if s == want.0 && r == want.1 => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
}

/// The sequence on one open stream: default → Server → authorized →
/// route attached (Accepted written by our status writer) → deleted →
/// default again; and a route without its Server says NoMatchingParent.
#[tokio::test]
async fn status_writer_accepts_routes_and_the_stream_follows_in_order() {
    let env = TestEnv::new("policy").await;
    create_web_pod(&env).await;
    let alone = crate::support::alone().await;
    let mut controller = crate::support::start_controller_alone(&env, &alone).await;
    let mut stream = controller
        .inbound
        .watch_port(spec(&env, "web", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    let first = next_matching(&mut stream, "the default server", |_| true).await;
    assert_eq!(
        name_of(&first),
        ("default".into(), "all-unauthenticated".into())
    );

    // A route whose Server does not exist.
    kubectl_apply(
        &env,
        &ROUTE_API
            .replace("name: api", "name: orphan")
            .replace("name: web-http", "name: nope"),
    );
    wait_condition(&env, "orphan", "nope", ("False", "NoMatchingParent")).await;

    kubectl_apply(
        &env,
        &server_yaml(
            "web-http",
            "  proxyProtocol: HTTP/1\n  accessPolicy: deny\n",
        ),
    );
    let srv = next_matching(&mut stream, "the Server", |s| name_of(s).1 == "web-http").await;
    assert!(srv.authorizations.is_empty(), "accessPolicy deny");

    kubectl_apply(
        &env,
        "apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata:
  name: everywhere
spec:
  networks:
    - cidr: 0.0.0.0/0
    - cidr: ::/0
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: allow-all
spec:
  targetRef:
    group: policy.linkerd.io
    kind: Server
    name: web-http
  requiredAuthenticationRefs:
    - group: policy.linkerd.io
      kind: NetworkAuthentication
      name: everywhere
",
    );
    next_matching(&mut stream, "the authorization", |s| {
        !s.authorizations.is_empty()
    })
    .await;

    // The writer accepts the route, and the stream shows it.
    kubectl_apply(&env, ROUTE_API);
    let attached = next_matching(&mut stream, "the attached route", |s| has_route(s, "api")).await;
    assert_eq!(
        route_names(&attached).len(),
        1,
        "the default route is replaced"
    );
    assert!(!attached.authorizations.is_empty(), "still authorized");
    wait_condition(&env, "api", "web-http", ("True", "Accepted")).await;
    // The parentRef as the original writes it: the manifest names no
    // namespace, the status does.
    let (_, out) = env.cluster().kubectl(
        &[
            "get",
            "-n",
            &env.ns,
            "httproute.policy.linkerd.io/api",
            "-o",
            "json",
        ],
        None,
    );
    let json: serde_json::Value = serde_json::from_str(&out).expect("route json");
    assert_eq!(
        json.pointer("/status/parents/0/parentRef"),
        Some(&serde_json::json!({
            "group": "policy.linkerd.io", "kind": "Server", "namespace": env.ns, "name": "web-http"
        })),
        "{out}"
    );

    kubectl_delete(&env, "server/web-http");
    next_matching(&mut stream, "the default server again", |s| {
        name_of(s) == ("default".into(), "all-unauthenticated".into())
    })
    .await;
    wait_condition(&env, "api", "web-http", ("False", "NoMatchingParent")).await;

    let (_, metrics) = controller.process.admin_get("/metrics").await;
    assert!(
        metrics.contains("policy_resource_status_leader 1"),
        "{metrics}"
    );
    // The original's name: patches applied, no labels.
    let applied = metrics
        .lines()
        .find_map(|l| l.strip_prefix("resource_status_patches_total "))
        .and_then(|n| n.parse::<f64>().ok());
    assert!(applied.is_some_and(|n| n >= 1.0), "{metrics}");
}
