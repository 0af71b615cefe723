//! The inbound policy API end to end: the `policy-controller` binary runs
//! as a process against the real local control plane, resources are
//! applied with kubectl, and a generated tonic client reads the API over a
//! real socket.

use std::{net::SocketAddr, sync::OnceLock, time::Duration};

use linkerd2_proxy_api::{
    inbound::{
        PortSpec, Server, authn, inbound_server_policies_client::InboundServerPoliciesClient,
        proxy_protocol,
    },
    meta::metadata,
};
use test_support::{ServerProcess, TestEnv, eventually, free_addr};
use tonic::{Code, Streaming, transport::Channel};

const TIMEOUT: Duration = Duration::from_secs(30);

/// Applies (once per test binary) the CRDs and waits until they serve.
fn install_crds(env: &TestEnv) {
    static CRDS: OnceLock<()> = OnceLock::new();
    CRDS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/crds/");
        let (ok, out) = env.cluster().kubectl(&["apply", "-f", dir], None);
        assert!(ok || out.contains("already exists"), "applying CRDs: {out}");
        let (ok, out) = env.cluster().kubectl(
            &[
                "wait",
                "--for=condition=established",
                "--timeout=60s",
                "-f",
                dir,
            ],
            None,
        );
        assert!(ok, "waiting for CRDs: {out}");
    });
}

struct Controller {
    process: ServerProcess,
    client: InboundServerPoliciesClient<Channel>,
}

async fn start_controller(env: &TestEnv) -> Controller {
    install_crds(env);
    let grpc = free_addr();
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--grpc-addr={grpc}"),
        format!("--admin-addr={admin}"),
        "--admission-controller-disabled".to_string(),
    ];
    let process = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;
    let client = connect(grpc).await;
    Controller { process, client }
}

async fn connect(addr: SocketAddr) -> InboundServerPoliciesClient<Channel> {
    InboundServerPoliciesClient::connect(format!("http://{addr}"))
        .await
        .expect("connect to the policy controller")
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

/// Reads messages until one satisfies `done`; returns it.
async fn next_matching(
    stream: &mut Streaming<Server>,
    what: &str,
    done: impl Fn(&Server) -> bool,
) -> Server {
    let read = async {
        loop {
            let msg = stream
                .message()
                .await
                .expect("stream healthy")
                .expect("stream open");
            if done(&msg) {
                return msg;
            }
        }
    };
    tokio::time::timeout(TIMEOUT, read)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
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
    let mut controller = start_controller(&env).await;

    let mut stream = controller
        .client
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
    kubectl_apply(
        &env,
        &format!(
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
    name: web-http
  requiredAuthenticationRefs:
    - group: policy.linkerd.io
      kind: MeshTLSAuthentication
      name: clients
"
        ),
    );
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
    let mut controller = start_controller(&env).await;
    let client = &mut controller.client;

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
    let client = controller.client.clone();
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
        .client
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

#[tokio::test]
async fn routes_attach_once_their_status_accepts_them() {
    let env = TestEnv::new("policy").await;
    create_web_pod(&env).await;
    let mut controller = start_controller(&env).await;
    kubectl_apply(&env, &server_yaml("web-http", "  proxyProtocol: HTTP/1\n"));
    kubectl_apply(
        &env,
        "apiVersion: policy.linkerd.io/v1beta3
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
",
    );
    let mut stream = controller
        .client
        .watch_port(spec(&env, "web", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    let route_names = |s: &Server| -> Vec<Option<metadata::Kind>> {
        match s.protocol.clone().and_then(|p| p.kind) {
            Some(proxy_protocol::Kind::Http1(h)) => h
                .routes
                .into_iter()
                .map(|r| r.metadata.and_then(|m| m.kind))
                .collect(),
            _ => Vec::new(),
        }
    };
    let srv = next_matching(&mut stream, "the Server", |s| name_of(s).1 == "web-http").await;
    assert_eq!(
        route_names(&srv),
        [Some(metadata::Kind::Default("default".into()))],
        "not attached without an Accepted status"
    );

    // Stand in for the status writer.
    let status = r#"{"status":{"parents":[{
        "parentRef":{"group":"policy.linkerd.io","kind":"Server","name":"web-http"},
        "controllerName":"linkerd.io/policy-controller",
        "conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"",
                       "lastTransitionTime":"2025-01-01T00:00:00Z"}]}]}}"#;
    let (ok, out) = env.cluster().kubectl(
        &[
            "patch",
            "-n",
            &env.ns,
            "httproute.policy.linkerd.io/api",
            "--subresource=status",
            "--type=merge",
            "-p",
            status,
        ],
        None,
    );
    assert!(ok, "patching the route status: {out}");
    let attached = next_matching(&mut stream, "the attached route", |s| {
        matches!(route_names(s).first(), Some(Some(metadata::Kind::Resource(r))) if r.name == "api")
    })
    .await;
    assert_eq!(
        route_names(&attached).len(),
        1,
        "the default route is replaced"
    );
}
