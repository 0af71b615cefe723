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

mod admission;
mod external_workloads;
mod introspection;
mod routes;

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

/// A policy HTTPRoute `api` on Server `web-http`.
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
