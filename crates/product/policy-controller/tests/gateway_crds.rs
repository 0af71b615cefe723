//! The Gateway API decoupled from the controller's life, end to end on the
//! local control plane. This test binary has its own apiserver, started
//! without the Gateway API CRDs: the controller starts Ready; the CRDs are
//! installed while it runs and Gateway API routes attached to Servers reach
//! an open `WatchPort` stream (HTTPRoute on an HTTP/1 Server, GRPCRoute on
//! a gRPC Server), and one attached to a Service reaches an open outbound
//! `Watch`; the HTTPRoute CRD stops serving `v1` (the controller switches
//! to `v1beta1`) and is then deleted, its routes leaving the same open
//! streams, which keep receiving updates. The process never restarts.

use std::{path::PathBuf, time::Duration};

use linkerd2_proxy_api::{
    inbound::{
        PortSpec, Server, inbound_server_policies_client::InboundServerPoliciesClient,
        proxy_protocol,
    },
    meta::metadata,
    outbound::{
        self, OutboundPolicy, TrafficSpec, outbound_policies_client::OutboundPoliciesClient,
        traffic_spec,
    },
};
use test_support::{ServerProcess, TestEnv, eventually, free_addr};
use tonic::Streaming;

const TIMEOUT: Duration = Duration::from_secs(60);
const GATEWAY: &str = "gateway.networking.k8s.io";

fn crds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../deploy/crds")
}

fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out) = env.cluster().kubectl(args, stdin);
    assert!(ok, "kubectl {args:?} failed: {out}");
    out
}

/// Installs (server-side) and waits for the CRD files whose names start
/// with `prefix`.
fn install_crds(env: &TestEnv, prefix: &str) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(crds_dir())
        .expect("deploy/crds")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(prefix))
        })
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no CRDs named {prefix}*");
    for file in files {
        let file = file.display().to_string();
        kubectl(
            env,
            &["apply", "--server-side", "--force-conflicts", "-f", &file],
            None,
        );
        kubectl(
            env,
            &[
                "wait",
                "--for=condition=Established",
                "--timeout=60s",
                "-f",
                &file,
            ],
            None,
        );
    }
}

fn route_names(server: &Server) -> Vec<(String, String, String)> {
    let resource =
        |m: Option<&linkerd2_proxy_api::meta::Metadata>| match m.and_then(|m| m.kind.as_ref()) {
            Some(metadata::Kind::Resource(r)) => (r.group.clone(), r.kind.clone(), r.name.clone()),
            Some(metadata::Kind::Default(name)) => (String::new(), "default".into(), name.clone()),
            None => Default::default(),
        };
    match server.protocol.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(proxy_protocol::Kind::Http1(h)) => h
            .routes
            .iter()
            .map(|r| resource(r.metadata.as_ref()))
            .collect(),
        Some(proxy_protocol::Kind::Grpc(g)) => g
            .routes
            .iter()
            .map(|r| resource(r.metadata.as_ref()))
            .collect(),
        Some(proxy_protocol::Kind::Detect(d)) => d
            .http_routes
            .iter()
            .map(|r| resource(r.metadata.as_ref()))
            .collect(),
        _ => Vec::new(),
    }
}

fn gateway_route(kind: &str, name: &str) -> (String, String, String) {
    (GATEWAY.into(), kind.into(), name.into())
}

async fn next_matching(
    stream: &mut Streaming<Server>,
    what: &str,
    done: impl Fn(&Server) -> bool,
) -> Server {
    test_support::next_matching(stream, what, TIMEOUT, done).await
}

async fn ready_body(process: &ServerProcess, what: &str, want: &str) {
    eventually(what, TIMEOUT, || async {
        let (status, body) = process.admin_get("/ready").await;
        if status == 200 && body.contains(want) {
            Ok(())
        } else {
            Err(format!("{status}: {body}"))
        }
    })
    .await;
}

async fn metrics_contain(process: &ServerProcess, what: &str, line: &str) {
    eventually(what, TIMEOUT, || async {
        let (_, body) = process.admin_get("/metrics").await;
        if body.contains(line) {
            Ok(())
        } else {
            Err(body)
        }
    })
    .await;
}

fn server_yaml(name: &str, port: &str, protocol: &str) -> String {
    format!(
        "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: {name}
spec:
  podSelector:
    matchLabels:
      app: web
  port: {port}
  proxyProtocol: {protocol}
"
    )
}

const HTTP_ROUTE: &str = "apiVersion: gateway.networking.k8s.io/v1
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

const GRPC_ROUTE: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: rpc
spec:
  parentRefs:
    - group: policy.linkerd.io
      kind: Server
      name: web-grpc
  rules:
    - matches:
        - method:
            service: demo.Echo
            method: Say
";

const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports:
    - {name: http, port: 80, targetPort: 8080}
";

const SERVICE_ROUTE: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: to-web
spec:
  parentRefs:
    - {group: core, kind: Service, name: web, port: 80}
  rules:
    - matches:
        - path: {type: PathPrefix, value: /v2}
";

/// The names of an outbound policy's HTTP routes (`Resource` metadata).
fn outbound_route_names(policy: &OutboundPolicy) -> Vec<String> {
    use outbound::proxy_protocol::Kind;
    let routes = match policy.protocol.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(Kind::Detect(d)) => d.http1.as_ref().map(|h| h.routes.clone()),
        Some(Kind::Http1(h)) => Some(h.routes.clone()),
        _ => None,
    };
    routes
        .unwrap_or_default()
        .iter()
        .filter_map(
            |r| match r.metadata.as_ref().and_then(|m| m.kind.as_ref()) {
                Some(metadata::Kind::Resource(r)) => Some(r.name.clone()),
                _ => None,
            },
        )
        .collect()
}

async fn next_outbound(
    stream: &mut Streaming<OutboundPolicy>,
    what: &str,
    done: impl Fn(&OutboundPolicy) -> bool,
) {
    test_support::next_matching(stream, what, TIMEOUT, done).await;
}

#[tokio::test]
async fn gateway_kinds_follow_their_crds_on_open_streams() {
    let env = TestEnv::new("gateway-crds").await;
    // Linkerd's own CRDs are required (the policy kinds and ExternalWorkloads).
    install_crds(&env, "policy.linkerd.io_");
    install_crds(&env, "workload.linkerd.io_");
    let pod = env
        .pod("web")
        .meshed("linkerd")
        .label("app", "web")
        .port(Some("http"), 8080)
        .port(Some("grpc"), 9090);
    env.create_ready_pod(&pod).await;
    let apply = |yaml: &str| kubectl(&env, &["apply", "-n", &env.ns, "-f", "-"], Some(yaml));
    apply(&server_yaml("web-http", "http", "HTTP/1"));
    apply(&server_yaml("web-grpc", "grpc", "gRPC"));
    apply(SERVICE);

    // No Gateway API CRDs: the controller is Ready and says none is active.
    let grpc = free_addr();
    let admin = free_addr();
    let mut args = env.policy_controller_args(grpc, admin);
    args.push("--admission-controller-disabled".to_string());
    let process = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;
    let (status, body) = process.admin_get("/ready").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("gateway API routes: none"), "{body}");

    let mut client = InboundServerPoliciesClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect");
    let spec = |port| PortSpec {
        workload: format!(r#"{{"ns":"{}","pod":"web"}}"#, env.ns),
        port,
    };
    let mut http = client
        .watch_port(spec(8080))
        .await
        .expect("WatchPort")
        .into_inner();
    let mut grpc_stream = client
        .watch_port(spec(9090))
        .await
        .expect("WatchPort")
        .into_inner();
    next_matching(&mut http, "the HTTP Server", |s| {
        s.labels.get("name").map(String::as_str) == Some("web-http")
    })
    .await;
    next_matching(&mut grpc_stream, "the gRPC Server", |s| {
        s.labels.get("name").map(String::as_str) == Some("web-grpc")
    })
    .await;
    let mut outbound_client = OutboundPoliciesClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect");
    let mut to_web = outbound_client
        .watch(TrafficSpec {
            source_workload: format!(r#"{{"ns":"{}","pod":"client"}}"#, env.ns),
            target: Some(traffic_spec::Target::Authority(format!(
                "web.{}.svc.cluster.local:80",
                env.ns
            ))),
        })
        .await
        .expect("outbound Watch")
        .into_inner();
    next_outbound(&mut to_web, "the Service's policy, no route", |p| {
        outbound_route_names(p).is_empty()
    })
    .await;

    // Install the Gateway API CRDs while it runs; routes reach the streams.
    install_crds(&env, "gateway.networking.k8s.io_");
    ready_body(
        &process,
        "all four kinds active",
        "gateway API routes: grpcroutes v1, httproutes v1, tcproutes v1alpha2, tlsroutes v1alpha2",
    )
    .await;
    metrics_contain(
        &process,
        "the active-kind gauge",
        r#"policy_gateway_api_route_kind_active{kind="httproutes",version="v1"} 1"#,
    )
    .await;
    apply(HTTP_ROUTE);
    apply(GRPC_ROUTE);
    apply(SERVICE_ROUTE);
    next_outbound(&mut to_web, "the Service's Gateway HTTPRoute", |p| {
        outbound_route_names(p) == ["to-web"]
    })
    .await;
    let with_route = next_matching(
        &mut http,
        "the Gateway HTTPRoute (accepted by our status writer)",
        |s| route_names(s) == [gateway_route("HTTPRoute", "api")],
    )
    .await;
    assert!(matches!(
        with_route.protocol.and_then(|p| p.kind),
        Some(proxy_protocol::Kind::Http1(_))
    ));
    let with_grpc = next_matching(&mut grpc_stream, "the GRPCRoute", |s| {
        route_names(s) == [gateway_route("GRPCRoute", "rpc")]
    })
    .await;
    let Some(proxy_protocol::Kind::Grpc(g)) = with_grpc.protocol.and_then(|p| p.kind) else {
        panic!("a gRPC server");
    };
    let rpc = g.routes[0].rules[0].matches[0]
        .rpc
        .clone()
        .expect("rpc match");
    assert_eq!(
        (rpc.service.as_str(), rpc.method.as_str()),
        ("demo.Echo", "Say")
    );

    // The HTTPRoute CRD stops serving v1: the kind is read at v1beta1 and
    // the route comes back on the same stream.
    kubectl(
        &env,
        &[
            "patch",
            "crd",
            "httproutes.gateway.networking.k8s.io",
            "--type=json",
            "-p",
            r#"[{"op":"test","path":"/spec/versions/0/name","value":"v1"},{"op":"replace","path":"/spec/versions/0/served","value":false}]"#,
        ],
        None,
    );
    ready_body(&process, "httproutes read at v1beta1", "httproutes v1beta1").await;
    metrics_contain(
        &process,
        "the v1 gauge cleared",
        r#"policy_gateway_api_route_kind_active{kind="httproutes",version="v1"} 0"#,
    )
    .await;
    next_matching(&mut http, "the route read at v1beta1", |s| {
        route_names(s) == [gateway_route("HTTPRoute", "api")]
    })
    .await;

    // Delete the HTTPRoute CRD: the route leaves the open stream.
    kubectl(
        &env,
        &[
            "delete",
            "crd",
            "httproutes.gateway.networking.k8s.io",
            "--wait=true",
        ],
        None,
    );
    next_matching(&mut http, "the default routes again", |s| {
        route_names(s) == [(String::new(), "default".into(), "default".into())]
    })
    .await;
    next_outbound(&mut to_web, "the Service's route gone", |p| {
        outbound_route_names(p).is_empty()
    })
    .await;
    ready_body(
        &process,
        "httproutes inactive",
        "gateway API routes: grpcroutes v1, tcproutes v1alpha2, tlsroutes v1alpha2",
    )
    .await;

    // Both streams are still open and follow further changes.
    apply(&server_yaml("web-http", "http", "HTTP/2"));
    next_matching(&mut http, "the Server's new protocol", |s| {
        matches!(
            s.protocol.as_ref().and_then(|p| p.kind.as_ref()),
            Some(proxy_protocol::Kind::Http2(_))
        )
    })
    .await;
    kubectl(&env, &["delete", "-n", &env.ns, "grpcroute", "rpc"], None);
    next_matching(&mut grpc_stream, "the default gRPC route", |s| {
        route_names(s) == [(String::new(), "default".into(), "default".into())]
    })
    .await;
    let (status, body) = process.admin_get("/ready").await;
    assert_eq!(status, 200, "{body}");
}
