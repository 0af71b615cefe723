//! The inbound policy API end to end: the `policy-controller` binary runs
//! as a process against the real local control plane, resources are
//! applied with kubectl, and a generated tonic client reads the API over a
//! real socket.

use std::time::Duration;

use linkerd2_proxy_api::{
    inbound::{PortSpec, Server, authn, proxy_protocol},
    meta::metadata,
};
use test_support::{LocalCa, TestEnv, eventually, free_addr};
use tonic::{Code, Streaming};

use crate::support::{start_controller, start_controller_with_webhook};

const TIMEOUT: Duration = Duration::from_secs(30);

/// A MeshTLSAuthentication of `client_id` and an AuthorizationPolicy
/// allowing it on Server `server`.
fn allow_clients(server: &str, client_id: &str) -> String {
    format!(
        "apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata:
  name: clients
spec:
  identities: [\"{client_id}\"]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: allow-clients
spec:
  targetRef:
    group: policy.linkerd.io
    kind: Server
    name: {server}
  requiredAuthenticationRefs:
    - group: policy.linkerd.io
      kind: MeshTLSAuthentication
      name: clients
"
    )
}

fn kubectl_apply(env: &TestEnv, yaml: &str) {
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(yaml));
    assert!(ok, "kubectl apply failed: {out}\n{yaml}");
}

fn kubectl_delete(env: &TestEnv, what: &str) {
    let (ok, out) = env
        .cluster()
        .kubectl(&["delete", "-n", &env.ns, what], None);
    assert!(ok, "kubectl delete {what} failed: {out}");
}

fn server_yaml(name: &str, extra: &str) -> String {
    format!(
        "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: {name}
spec:
  podSelector:
    matchLabels:
      app: web
  port: http
{extra}"
    )
}

fn spec(env: &TestEnv, pod: &str, port: u32) -> PortSpec {
    PortSpec {
        workload: format!(r#"{{"ns":"{}","pod":"{pod}"}}"#, env.ns),
        port,
    }
}

fn name_of(server: &Server) -> (String, String) {
    (
        server.labels.get("kind").cloned().unwrap_or_default(),
        server.labels.get("name").cloned().unwrap_or_default(),
    )
}

async fn next_matching(
    stream: &mut Streaming<Server>,
    what: &str,
    done: impl Fn(&Server) -> bool,
) -> Server {
    test_support::next_matching(stream, what, TIMEOUT, done).await
}

async fn create_web_pod(env: &TestEnv) {
    let pod = env
        .pod("web")
        .meshed("linkerd")
        .label("app", "web")
        .port(Some("http"), 8080);
    env.create_ready_pod(&pod).await;
}

#[tokio::test]
async fn watch_follows_servers_and_authorizations() {
    let env = TestEnv::new("policy").await;
    create_web_pod(&env).await;
    let mut controller = start_controller(&env, &[]).await;

    let mut stream = controller
        .inbound
        .watch_port(spec(&env, "web", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    let first = next_matching(&mut stream, "the first message", |_| true).await;
    assert_eq!(
        name_of(&first),
        ("default".into(), "all-unauthenticated".into())
    );
    assert!(matches!(
        first.protocol.and_then(|p| p.kind),
        Some(proxy_protocol::Kind::Detect(_))
    ));

    kubectl_apply(
        &env,
        &server_yaml(
            "web-http",
            "  proxyProtocol: HTTP/1\n  accessPolicy: deny\n",
        ),
    );
    let srv = next_matching(&mut stream, "the Server", |s| {
        name_of(s) == ("server".into(), "web-http".into())
    })
    .await;
    assert!(matches!(
        srv.protocol.and_then(|p| p.kind),
        Some(proxy_protocol::Kind::Http1(_))
    ));
    assert!(srv.authorizations.is_empty(), "accessPolicy deny");

    let client_id = format!(
        "client.{}.serviceaccount.identity.linkerd.cluster.local",
        env.ns
    );
    kubectl_apply(&env, &allow_clients("web-http", &client_id));
    let authorized = next_matching(&mut stream, "the authorization", |s| {
        !s.authorizations.is_empty()
    })
    .await;
    let authz = &authorized.authorizations[0];
    assert_eq!(
        authz.labels.get("kind").map(String::as_str),
        Some("authorizationpolicy")
    );
    assert!(matches!(
        authz.metadata.clone().and_then(|m| m.kind),
        Some(metadata::Kind::Resource(r)) if r.name == "allow-clients"
    ));
    let Some(authn::Permit::MeshTls(authn::PermitMeshTls {
        clients: Some(authn::permit_mesh_tls::Clients::Identities(ids)),
    })) = authz.authentication.clone().and_then(|a| a.permit)
    else {
        panic!("expected mesh TLS identities: {authz:?}");
    };
    assert_eq!(ids.identities.len(), 1);
    assert_eq!(ids.identities[0].name, client_id);

    kubectl_delete(&env, "server/web-http");
    next_matching(&mut stream, "the default server again", |s| {
        name_of(s) == ("default".into(), "all-unauthenticated".into())
    })
    .await;

    let (status, metrics) = controller.process.admin_get("/metrics").await;
    assert_eq!(status, 200);
    assert!(
        metrics.contains("policy_grpc_server_active_streams{method=\"WatchPort\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn oldest_server_wins_and_bad_requests_get_proper_codes() {
    let env = TestEnv::new("policy").await;
    create_web_pod(&env).await;
    env.create_ready_pod(&env.pod("plain").port(Some("http"), 8080))
        .await;
    let mut controller = start_controller(&env, &[]).await;
    let client = &mut controller.inbound;

    for (workload, port) in [
        ("bad".to_string(), 8080),
        (format!("{}:web", env.ns), 0),
        (format!("{}:web", env.ns), 70000),
    ] {
        let err = client
            .get_port(PortSpec { workload, port })
            .await
            .expect_err("invalid request");
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
    }
    for pod in ["missing", "plain"] {
        let err = client
            .get_port(spec(&env, pod, 8080))
            .await
            .expect_err("unknown pod");
        assert_eq!(err.code(), Code::NotFound, "{pod}: {err:?}");
        assert_eq!(err.message(), "unknown server");
    }
    // An unknown port of a known pod has the default server.
    let other = client
        .get_port(spec(&env, "web", 9999))
        .await
        .expect("GetPort")
        .into_inner();
    assert_eq!(
        name_of(&other),
        ("default".into(), "all-unauthenticated".into())
    );

    let mut stream = client
        .watch_port(spec(&env, "web", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    next_matching(&mut stream, "the default server", |_| true).await;

    kubectl_apply(&env, &server_yaml("z-old", ""));
    next_matching(&mut stream, "z-old", |s| name_of(s).1 == "z-old").await;
    // creationTimestamp has second granularity: make "a-new" newer, though
    // it sorts first by name.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    kubectl_apply(&env, &server_yaml("a-new", "  proxyProtocol: opaque\n"));
    // Servers arrive in order on one watch: once a later "marker" Server
    // (on another port) is visible, "a-new" has been indexed too.
    kubectl_apply(
        &env,
        "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: marker
spec:
  podSelector: {}
  port: 9999
",
    );
    let client = controller.inbound.clone();
    let env_ref = &env;
    eventually("the marker Server", TIMEOUT, || {
        let mut client = client.clone();
        async move {
            let srv = client
                .get_port(spec(env_ref, "web", 9999))
                .await
                .map_err(|e| e.to_string())?
                .into_inner();
            match name_of(&srv).1.as_str() {
                "marker" => Ok(()),
                other => Err(other.to_string()),
            }
        }
    })
    .await;
    let current = controller
        .inbound
        .get_port(spec(&env, "web", 8080))
        .await
        .expect("GetPort")
        .into_inner();
    assert_eq!(
        name_of(&current).1,
        "z-old",
        "the older Server keeps the port"
    );

    kubectl_delete(&env, "server/z-old");
    let taken = next_matching(&mut stream, "a-new taking over", |s| {
        name_of(s).1 == "a-new"
    })
    .await;
    assert!(matches!(
        taken.protocol.and_then(|p| p.kind),
        Some(proxy_protocol::Kind::Opaque(_))
    ));
}

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

const ROUTE_API: &str = "apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata:
  name: api
spec:
  parentRefs:
    - group: policy.linkerd.io
      kind: Server
      name: web-http
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /api
";

/// The issue's sequence on one open stream: default → Server → authorized →
/// route attached (Accepted written by our status writer) → deleted →
/// default again; and a route without its Server says NoMatchingParent.
#[tokio::test]
async fn status_writer_accepts_routes_and_the_stream_follows_in_order() {
    let env = TestEnv::new("policy").await;
    create_web_pod(&env).await;
    let mut controller = start_controller(&env, &[]).await;
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

/// The webhook's name in `deploy/base/policy-validator-webhook.yaml`.
const WEBHOOK: &str = "linkerd-policy-validator.linkerd.io";

/// Marks an expected message as the apiserver's (schema validation), not
/// the webhook's.
const SCHEMA: &str = "schema: ";

/// (manifest, what kubectl prints after "denied the request: ", or, when
/// it starts with [`SCHEMA`], what the apiserver prints instead).
fn invalid_objects(ns: &str) -> Vec<(String, String)> {
    let obj = |api: &str, kind: &str, name: &str, spec: &str| {
        format!(
            "apiVersion: policy.linkerd.io/{api}\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"
        )
    };
    vec![
        (
            obj(
                "v1beta3",
                "Server",
                "bad-srv",
                "  podSelector: {}\n  port: 80\n  accessPolicy: allow-everyone\n",
            ),
            format!(
                "Server \"{ns}/bad-srv\" is invalid: invalid 'accessPolicy' field: invalid default policy \"allow-everyone\""
            ),
        ),
        (
            obj("v1beta3", "Server", "no-selector", "  port: 80\n"),
            // The schema's oneOf refuses it before the webhook (whose own
            // message is "one of podSelector or externalWorkloadSelector
            // must be set").
            SCHEMA.to_string()
                + "The Server \"no-selector\" is invalid: \n* <nil>: Invalid value: \"\": \"spec\" must validate one and only one schema (oneOf). Found none valid",
        ),
        (
            obj(
                "v1alpha1",
                "AuthorizationPolicy",
                "no-refs",
                "  targetRef: {group: policy.linkerd.io, kind: Server, name: web}\n",
            ),
            // Refused by the CRD's schema before the webhook sees it (the
            // webhook's own message: "could not be parsed: missing field
            // `requiredAuthenticationRefs`").
            SCHEMA.to_string()
                + "The AuthorizationPolicy \"no-refs\" is invalid: spec.requiredAuthenticationRefs: Required value",
        ),
        (
            obj(
                "v1beta1",
                "ServerAuthorization",
                "bad-saz",
                "  server: {name: web}\n  client:\n    unauthenticated: true\n    meshTLS: {identities: [\"*\"]}\n",
            ),
            format!(
                "ServerAuthorization \"{ns}/bad-saz\" is invalid: meshTLS and unauthenticated may not both be set"
            ),
        ),
        (
            obj(
                "v1beta1",
                "ServerAuthorization",
                "bad-except",
                "  server: {name: web}\n  client:\n    unauthenticated: true\n    networks: [{cidr: 10.0.0.0/16, except: [10.1.0.0/24]}]\n",
            ),
            format!(
                "ServerAuthorization \"{ns}/bad-except\" is invalid: except 10.1.0.0/24 is not inside cidr 10.0.0.0/16"
            ),
        ),
        (
            obj(
                "v1alpha1",
                "AuthorizationPolicy",
                "bad-ap",
                "  targetRef: {kind: Namespace, name: elsewhere}\n  requiredAuthenticationRefs: []\n",
            ),
            format!(
                "AuthorizationPolicy \"{ns}/bad-ap\" is invalid: a Namespace target must name the policy's own namespace \"{ns}\", not \"elsewhere\""
            ),
        ),
        (
            obj(
                "v1alpha1",
                "AuthorizationPolicy",
                "two-sas",
                "  targetRef: {group: policy.linkerd.io, kind: Server, name: web}\n  requiredAuthenticationRefs: [{kind: ServiceAccount, name: a}, {kind: ServiceAccount, name: b}]\n",
            ),
            format!(
                "AuthorizationPolicy \"{ns}/two-sas\" is invalid: at most one ServiceAccount may be required"
            ),
        ),
        (
            obj(
                "v1alpha1",
                "MeshTLSAuthentication",
                "bad-ids",
                "  identities: [\"Not_A.Name\"]\n",
            ),
            format!(
                "MeshTLSAuthentication \"{ns}/bad-ids\" is invalid: invalid identity \"Not_A.Name\""
            ),
        ),
        (
            obj(
                "v1alpha1",
                "NetworkAuthentication",
                "no-nets",
                "  networks: []\n",
            ),
            format!(
                "NetworkAuthentication \"{ns}/no-nets\" is invalid: networks must not be empty"
            ),
        ),
        (
            obj(
                "v1beta3",
                "HTTPRoute",
                "bad-route",
                "  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]\n  rules:\n    - matches: [{path: {type: PathPrefix, value: api}}]\n",
            ),
            format!("HTTPRoute \"{ns}/bad-route\" is invalid: path \"api\" is not absolute"),
        ),
        (
            obj(
                "v1beta3",
                "HTTPRoute",
                "portless-egress",
                "  parentRefs: [{group: policy.linkerd.io, kind: EgressNetwork, name: ext}]\n",
            ),
            format!(
                "HTTPRoute \"{ns}/portless-egress\" is invalid: cannot target an EgressNetwork without specifying a port"
            ),
        ),
        (
            obj(
                "v1beta3",
                "HTTPRoute",
                "relative-redirect",
                "  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]\n  rules:\n    - filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplaceFullPath, replaceFullPath: login}}}]\n",
            ),
            format!(
                "HTTPRoute \"{ns}/relative-redirect\" is invalid: requestRedirect.path.replaceFullPath \"login\" is not an absolute path"
            ),
        ),
        (
            obj(
                "v1alpha1",
                "EgressNetwork",
                "bad-egress",
                "  trafficPolicy: Allow\n  networks: [{cidr: 1.0.0.0/8, except: [2.0.0.0/8]}]\n",
            ),
            format!(
                "EgressNetwork \"{ns}/bad-egress\" is invalid: except 2.0.0.0/8 is not inside cidr 1.0.0.0/8"
            ),
        ),
        (
            obj(
                "v1alpha1",
                "HTTPLocalRateLimitPolicy",
                "bad-limit",
                "  targetRef: {group: policy.linkerd.io, kind: Server, name: web}\n  total: {requestsPerSecond: 10}\n  identity: {requestsPerSecond: 20}\n",
            ),
            format!(
                "HTTPLocalRateLimitPolicy \"{ns}/bad-limit\" is invalid: identity.requestsPerSecond must be less than or equal to total.requestsPerSecond"
            ),
        ),
        (
            obj(
                "v1beta3",
                "HTTPRoute",
                "long-backend",
                "  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web}]\n  rules:\n    - timeouts: {request: 1s, backendRequest: 10s}\n",
            ),
            format!(
                "HTTPRoute \"{ns}/long-backend\" is invalid: backendRequest timeout (10s) must not be greater than request timeout (1s)"
            ),
        ),
    ]
}

#[tokio::test]
async fn kubectl_apply_of_invalid_policy_objects_is_refused() {
    let env = TestEnv::new("policy").await;
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = LocalCa::new("policy-validator-test-ca").expect("CA");
    let cert = ca
        .issue_serving_cert(&["linkerd-policy-validator.linkerd.svc"])
        .expect("serving cert");
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem).expect("write cert");
    std::fs::write(&key, &cert.key_pem).expect("write key");
    let https = free_addr();
    let controller = start_controller_with_webhook(
        &env,
        &[
            format!("--server-addr={https}"),
            format!("--server-tls-certs={}", crt.display()),
            format!("--server-tls-key={}", key.display()),
        ],
    )
    .await;

    let url = format!("https://127.0.0.1:{}/", https.port());
    let _webhook = env.register_webhook("policy-validator-webhook.yaml", &url, ca.cert_pem());

    // The apiserver picks the configuration up asynchronously.
    let cases = invalid_objects(&env.ns);
    let (probe, probe_message) = &cases[0];
    eventually("the webhook to be called", TIMEOUT, || async {
        let (ok, out) = env.cluster().kubectl(
            &["apply", "--dry-run=server", "-n", &env.ns, "-f", "-"],
            Some(probe),
        );
        if !ok && out.contains(probe_message.as_str()) {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;

    for (manifest, message) in &cases {
        let (ok, out) = env
            .cluster()
            .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(manifest));
        assert!(!ok, "must be refused: {out}\n{manifest}");
        let want = match message.strip_prefix(SCHEMA) {
            Some(schema) => schema.to_string(),
            None => format!("admission webhook \"{WEBHOOK}\" denied the request: {message}"),
        };
        assert!(out.contains(&want), "want: {want}\ngot:  {out}");
    }

    // Valid objects of every kind are admitted, and an invalid UPDATE is refused.
    kubectl_apply(&env, &server_yaml("web-http", "  accessPolicy: audit\n"));
    kubectl_apply(
        &env,
        "apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata:
  name: ids
spec:
  identities: [\"*.ns.serviceaccount.identity.linkerd.cluster.local\", \"spiffe://example.org/web\"]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: ok
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs: [{group: policy.linkerd.io, kind: MeshTLSAuthentication, name: ids}]
",
    );
    kubectl_apply(&env, ROUTE_API);
    let (ok, out) = env.cluster().kubectl(
        &["apply", "-n", &env.ns, "-f", "-"],
        Some(&server_yaml("web-http", "  accessPolicy: nope\n")),
    );
    assert!(!ok, "an invalid update must be refused: {out}");
    assert!(
        out.contains("is invalid: invalid 'accessPolicy' field: invalid default policy \"nope\""),
        "{out}"
    );

    let (_, metrics) = controller.process.admin_get("/metrics").await;
    assert!(
        metrics.contains("policy_admission_reviews_total{result=\"denied\"}"),
        "{metrics}"
    );
}

/// `/streams` (on the introspection listener, not the admin port) lists a
/// real client's `WatchPort`, and `/audit` finds what it was sent equal to
/// what the index gives, before and after a Server lands.
#[tokio::test]
async fn open_watches_are_listed_and_audited() {
    let env = TestEnv::new("policy-introspect").await;
    create_web_pod(&env).await;
    let mut controller = start_controller(&env, &[]).await;
    let mut stream = controller
        .inbound
        .watch_port(spec(&env, "web", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    next_matching(&mut stream, "the first message", |_| true).await;

    let json = |body: &str| -> serde_json::Value {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    };
    for path in ["/streams", "/audit"] {
        let (status, _) = controller.process.admin_get(path).await;
        assert_eq!(status, 404, "{path} on the admin port");
    }
    let (status, body) = controller
        .process
        .introspection_get("/streams?kind=WatchPort&workload=web")
        .await;
    assert_eq!(status, 200, "{body}");
    let page = json(&body);
    assert_eq!(page["streams"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(page["streams"][0]["target"], "port 8080");
    assert_eq!(page["streams"][0]["updates"], 1);
    assert!(
        page["streams"][0]["workload"]
            .as_str()
            .is_some_and(|w| w.contains(&env.ns)),
        "{body}"
    );
    let (_, body) = controller.process.introspection_get("/audit").await;
    assert_eq!(json(&body)["consistent"], true, "{body}");

    kubectl_apply(&env, &server_yaml("web-http", "  proxyProtocol: HTTP/1\n"));
    next_matching(&mut stream, "the Server", |s| {
        name_of(s) == ("server".into(), "web-http".into())
    })
    .await;
    let (_, body) = controller.process.introspection_get("/audit").await;
    let audit = json(&body);
    assert_eq!(audit["consistent"], true, "{body}");
    assert_eq!(audit["streams"], 1, "{body}");
    let (_, metrics) = controller.process.admin_get("/metrics").await;
    assert!(metrics.contains("policy_audit_runs_total"), "{metrics}");

    drop(stream);
    eventually("the closed stream leaves the list", TIMEOUT, || async {
        let (_, body) = controller.process.introspection_get("/streams").await;
        if json(&body)["open"] == 0 {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}

fn external_workload_yaml(env: &TestEnv, app: &str) -> String {
    format!(
        "apiVersion: workload.linkerd.io/v1beta1
kind: ExternalWorkload
metadata:
  name: vm
  labels:
    app: {app}
spec:
  meshTLS:
    identity: vm.{ns}.serviceaccount.identity.linkerd.cluster.local
    serverName: vm.{ns}.cluster.local
  ports:
    - name: http
      port: 8080
  workloadIPs:
    - ip: 192.0.2.10
",
        ns = env.ns
    )
}

fn external_spec(env: &TestEnv, name: &str, port: u32) -> PortSpec {
    PortSpec {
        workload: format!(r#"{{"ns":"{}","external_workload":"{name}"}}"#, env.ns),
        port,
    }
}

/// An ExternalWorkload selected by an `externalWorkloadSelector` Server (by
/// port name) gets that Server's policy with its AuthorizationPolicy; the
/// watch is listed in `/streams`, falls back to the default when the
/// workload is relabelled away from the selector, and ends when the
/// workload is deleted. Unknown external workloads are NotFound.
#[tokio::test]
async fn external_workloads_get_their_servers_policy_and_follow_relabelling() {
    let env = TestEnv::new("policy-ew").await;
    env.cluster().ensure_crds();
    let client_id = format!(
        "client.{}.serviceaccount.identity.linkerd.cluster.local",
        env.ns
    );
    kubectl_apply(&env, &external_workload_yaml(&env, "legacy"));
    kubectl_apply(
        &env,
        &(String::from(
            "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: vm-http
spec:
  externalWorkloadSelector:
    matchLabels:
      app: legacy
    matchExpressions:
      - {key: tier, operator: DoesNotExist}
  port: http
  proxyProtocol: HTTP/1
---
",
        ) + &allow_clients("vm-http", &client_id)),
    );
    let mut controller = start_controller(&env, &[]).await;

    let err = controller
        .inbound
        .get_port(external_spec(&env, "missing", 8080))
        .await
        .expect_err("unknown external workload");
    assert_eq!(
        (err.code(), err.message()),
        (Code::NotFound, "unknown server")
    );
    // The same name as a pod is not an external workload.
    let err = controller
        .inbound
        .get_port(spec(&env, "vm", 8080))
        .await
        .expect_err("no such pod");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    let mut stream = controller
        .inbound
        .watch_port(external_spec(&env, "vm", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    let srv = next_matching(&mut stream, "the Server with its authorization", |s| {
        name_of(s) == ("server".into(), "vm-http".into()) && !s.authorizations.is_empty()
    })
    .await;
    assert!(matches!(
        srv.protocol.and_then(|p| p.kind),
        Some(proxy_protocol::Kind::Http1(_))
    ));
    let [authz] = &srv.authorizations[..] else {
        panic!("one authorization expected: {:?}", srv.authorizations);
    };
    assert!(matches!(
        authz.metadata.clone().and_then(|m| m.kind),
        Some(metadata::Kind::Resource(r)) if r.name == "allow-clients"
    ));
    let Some(authn::Permit::MeshTls(authn::PermitMeshTls {
        clients: Some(authn::permit_mesh_tls::Clients::Identities(ids)),
    })) = authz.authentication.clone().and_then(|a| a.permit)
    else {
        panic!("expected mesh TLS identities: {authz:?}");
    };
    assert_eq!(
        ids.identities.iter().map(|i| &i.name).collect::<Vec<_>>(),
        [&client_id]
    );

    // Another port of the workload has the default server.
    let other = controller
        .inbound
        .get_port(external_spec(&env, "vm", 9999))
        .await
        .expect("GetPort")
        .into_inner();
    assert_eq!(
        name_of(&other),
        ("default".into(), "all-unauthenticated".into())
    );

    let (status, body) = controller
        .process
        .introspection_get(&format!("/streams?kind=WatchPort&workload={}", env.ns))
        .await;
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(page["streams"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(
        page["streams"][0]["workload"],
        external_spec(&env, "vm", 8080).workload
    );
    let (_, body) = controller.process.introspection_get("/audit").await;
    let audit: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(audit["consistent"], true, "{body}");
    let (_, metrics) = controller.process.admin_get("/metrics").await;
    let ews = metrics
        .lines()
        .find_map(|l| l.strip_prefix("policy_inbound_index_external_workloads "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(ews.is_some_and(|n| n >= 1), "{metrics}");

    kubectl_apply(&env, &external_workload_yaml(&env, "other"));
    next_matching(&mut stream, "the default server after relabelling", |s| {
        name_of(s) == ("default".into(), "all-unauthenticated".into())
    })
    .await;
    kubectl_apply(&env, &external_workload_yaml(&env, "legacy"));
    next_matching(&mut stream, "the Server again", |s| {
        name_of(s).1 == "vm-http"
    })
    .await;

    kubectl_delete(&env, "externalworkload/vm");
    let end = tokio::time::timeout(TIMEOUT, async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("the watch ends when the external workload is deleted");
    assert!(matches!(end, Ok(None)), "{end:?}");
}
