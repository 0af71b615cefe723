//! The outbound policy API end to end: the `policy-controller` binary runs
//! as a process against the real local control plane, Services and routes
//! are applied with kubectl, and the generated `OutboundPoliciesClient`
//! reads the API over a real socket.

use std::{net::IpAddr, time::Duration};

use k8s_openapi::api::core::v1::Service;
use linkerd2_proxy_api::{
    meta::metadata,
    net::TcpAddress,
    outbound::{
        HttpRoute, OutboundPolicy, TrafficSpec, http_route::distribution,
        outbound_policies_client::OutboundPoliciesClient, proxy_protocol, traffic_spec,
    },
};
use test_support::{LocalCa, ServerProcess, TestEnv, eventually, free_addr};
use tonic::{Code, Streaming};

use crate::support::{start_controller, start_controller_with_webhook};

const TIMEOUT: Duration = Duration::from_secs(30);
const WEBHOOK: &str = "linkerd-policy-validator.linkerd.io";

fn kubectl(env: &TestEnv, ns: &str, args: &[&str], stdin: Option<&str>) -> String {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    let (ok, out) = env.cluster().kubectl(&all, stdin);
    assert!(ok, "kubectl {args:?} failed: {out}\n{stdin:?}");
    out
}

fn apply(env: &TestEnv, ns: &str, yaml: &str) {
    kubectl(env, ns, &["apply", "-f", "-"], Some(yaml));
}

fn service_yaml(name: &str, annotations: &str) -> String {
    format!(
        "apiVersion: v1
kind: Service
metadata:
  name: {name}
  annotations: {{{annotations}}}
spec:
  selector: {{app: {name}}}
  ports:
    - {{name: http, port: 80, targetPort: 8080}}
"
    )
}

fn route_yaml(name: &str, parent_ns: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: {name}
spec:
  parentRefs:
    - {{group: core, kind: Service, name: web, namespace: {parent_ns}, port: 80}}
  rules:
{rules}"
    )
}

fn by_authority(source_ns: &str, authority: &str) -> TrafficSpec {
    TrafficSpec {
        source_workload: format!(r#"{{"ns":"{source_ns}","pod":"client"}}"#),
        target: Some(traffic_spec::Target::Authority(authority.to_string())),
    }
}

fn by_addr(source_ns: &str, ip: IpAddr, port: u32) -> TrafficSpec {
    TrafficSpec {
        source_workload: format!("{source_ns}:client"),
        target: Some(traffic_spec::Target::Addr(TcpAddress {
            ip: Some(ip.into()),
            port,
        })),
    }
}

fn kind_of(p: &OutboundPolicy) -> &'static str {
    match p.protocol.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(proxy_protocol::Kind::Detect(_)) => "detect",
        Some(proxy_protocol::Kind::Opaque(_)) => "opaque",
        Some(proxy_protocol::Kind::Http1(_)) => "http1",
        Some(proxy_protocol::Kind::Http2(_)) => "http2",
        Some(proxy_protocol::Kind::Grpc(_)) => "grpc",
        Some(proxy_protocol::Kind::Tls(_)) => "tls",
        None => "none",
    }
}

fn http_routes(p: &OutboundPolicy) -> Vec<HttpRoute> {
    match p.protocol.as_ref().and_then(|p| p.kind.as_ref()) {
        Some(proxy_protocol::Kind::Detect(d)) => d
            .http1
            .as_ref()
            .map(|h| h.routes.clone())
            .unwrap_or_default(),
        Some(proxy_protocol::Kind::Http1(h)) => h.routes.clone(),
        _ => Vec::new(),
    }
}

fn meta_name(meta: Option<&linkerd2_proxy_api::meta::Metadata>) -> String {
    match meta.and_then(|m| m.kind.as_ref()) {
        Some(metadata::Kind::Default(name)) => name.clone(),
        Some(metadata::Kind::Resource(r)) => format!("{}/{}", r.namespace, r.name),
        None => String::new(),
    }
}

fn route_names(p: &OutboundPolicy) -> Vec<String> {
    http_routes(p)
        .iter()
        .map(|r| meta_name(r.metadata.as_ref()))
        .collect()
}

/// `(weight, Destination.Get path)` of the first rule's backends.
fn backends(p: &OutboundPolicy) -> Vec<(u32, String)> {
    use linkerd2_proxy_api::outbound::backend;
    let routes = http_routes(p);
    let Some(dist) = routes
        .first()
        .and_then(|r| r.rules.first())
        .and_then(|r| r.backends.as_ref())
        .and_then(|d| d.kind.as_ref())
    else {
        return Vec::new();
    };
    let path =
        |b: Option<&linkerd2_proxy_api::outbound::Backend>| match b.and_then(|b| b.kind.as_ref()) {
            Some(backend::Kind::Balancer(p2c)) => {
                match p2c.discovery.as_ref().and_then(|d| d.kind.as_ref()) {
                    Some(backend::endpoint_discovery::Kind::Dst(dst)) => dst.path.clone(),
                    None => String::new(),
                }
            }
            _ => "<failing>".to_string(),
        };
    match dist {
        distribution::Kind::FirstAvailable(f) => f
            .backends
            .iter()
            .map(|b| (1, path(b.backend.as_ref())))
            .collect(),
        distribution::Kind::RandomAvailable(r) => r
            .backends
            .iter()
            .map(|b| {
                (
                    b.weight,
                    path(b.backend.as_ref().and_then(|b| b.backend.as_ref())),
                )
            })
            .collect(),
        distribution::Kind::Empty(_) => Vec::new(),
    }
}

async fn next_matching(
    stream: &mut Streaming<OutboundPolicy>,
    what: &str,
    done: impl Fn(&OutboundPolicy) -> bool,
) -> OutboundPolicy {
    test_support::next_matching(stream, what, TIMEOUT, done).await
}

/// `(status, reason)` of our condition `type_` for the Service parent.
fn condition(env: &TestEnv, route: &str, type_: &str) -> Option<(String, String)> {
    condition_with_message(env, route, type_).map(|(s, r, _)| (s, r))
}

/// `(status, reason, message)` of our condition `type_` for the Service
/// parent.
fn condition_with_message(
    env: &TestEnv,
    route: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let (ok, out) = env.cluster().kubectl(
        &[
            "get",
            "-n",
            &env.ns,
            &format!("httproute.gateway.networking.k8s.io/{route}"),
            "-o",
            "json",
        ],
        None,
    );
    if !ok {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(&out).ok()?;
    let entry = json
        .pointer("/status/parents")?
        .as_array()?
        .iter()
        .find(|p| {
            p["controllerName"] == "linkerd.io/policy-controller"
                && p["parentRef"]["kind"] == "Service"
        })?
        .clone();
    let cond = entry["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)?
        .clone();
    Some((
        cond["status"].as_str()?.to_string(),
        cond["reason"].as_str()?.to_string(),
        cond["message"].as_str().unwrap_or_default().to_string(),
    ))
}

async fn service_ip(env: &TestEnv, name: &str) -> IpAddr {
    let svc: Service = env.api::<Service>().get(name).await.expect("service");
    svc.spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("cluster IP")
}

const API_RULE: &str = "    - matches: [{path: {type: PathPrefix, value: /api}}]
      backendRefs: [{name: web, port: 80}]
";

/// The issue's sequence on one open stream: default → route created and
/// accepted by our status writer → edited → a second backend → deleted;
/// and a consumer route seen only from its own namespace.
#[tokio::test]
async fn watch_follows_a_route_from_creation_to_deletion() {
    let env = TestEnv::new("outbound").await;
    let consumer = TestEnv::new("consumer").await;
    apply(&env, &env.ns, &service_yaml("web", ""));
    let mut controller = start_controller(&env, &[]).await;
    let authority = format!("web.{}.svc.cluster.local:80", env.ns);

    let mut stream = controller
        .outbound
        .watch(by_authority(&env.ns, &authority))
        .await
        .expect("Watch")
        .into_inner();
    let first = next_matching(&mut stream, "the first message", |_| true).await;
    assert_eq!(kind_of(&first), "detect");
    assert_eq!(route_names(&first), ["http"]);
    assert_eq!(backends(&first), [(1, authority.clone())]);

    apply(&env, &env.ns, &route_yaml("api", &env.ns, API_RULE));
    let routed = next_matching(&mut stream, "the accepted route", |p| {
        route_names(p) == [format!("{}/api", env.ns)]
    })
    .await;
    assert_eq!(backends(&routed), [(1, authority.clone())]);
    assert_eq!(
        condition(&env, "api", "Accepted"),
        Some(("True".into(), "Accepted".into()))
    );
    assert_eq!(
        condition(&env, "api", "ResolvedRefs"),
        Some(("True".into(), "ResolvedRefs".into()))
    );

    // Edited: a second match.
    apply(
        &env,
        &env.ns,
        &route_yaml(
            "api",
            &env.ns,
            "    - matches: [{path: {type: PathPrefix, value: /api}}, {path: {type: Exact, value: /v2}}]
      backendRefs: [{name: web, port: 80}]
",
        ),
    );
    next_matching(&mut stream, "the edited route", |p| {
        http_routes(p)
            .first()
            .is_some_and(|r| r.rules.first().is_some_and(|rule| rule.matches.len() == 2))
    })
    .await;

    // A second backend, weighted.
    apply(&env, &env.ns, &service_yaml("api", ""));
    apply(
        &env,
        &env.ns,
        &route_yaml(
            "api",
            &env.ns,
            "    - matches: [{path: {type: PathPrefix, value: /api}}, {path: {type: Exact, value: /v2}}]
      backendRefs: [{name: web, port: 80, weight: 1}, {name: api, port: 80, weight: 3}]
",
        ),
    );
    let two = next_matching(&mut stream, "two backends", |p| backends(p).len() == 2).await;
    assert_eq!(
        backends(&two),
        [
            (1, authority.clone()),
            (3, format!("api.{}.svc.cluster.local:80", env.ns))
        ]
    );

    // A consumer route: only clients of its namespace see it.
    apply(&env, &consumer.ns, &route_yaml("mine", &env.ns, API_RULE));
    let mut consumer_stream = controller
        .outbound
        .watch(by_authority(&consumer.ns, &authority))
        .await
        .expect("Watch")
        .into_inner();
    next_matching(&mut consumer_stream, "the consumer route", |p| {
        route_names(p).contains(&format!("{}/mine", consumer.ns))
    })
    .await;
    let producer_view = controller
        .outbound
        .get(by_authority(&env.ns, &authority))
        .await
        .expect("Get")
        .into_inner();
    assert_eq!(route_names(&producer_view), [format!("{}/api", env.ns)]);

    kubectl(
        &env,
        &env.ns,
        &["delete", "httproute.gateway.networking.k8s.io/api"],
        None,
    );
    next_matching(&mut stream, "the default route again", |p| {
        route_names(p) == ["http"]
    })
    .await;

    let (_, metrics) = controller.process.admin_get("/metrics").await;
    assert!(
        metrics.contains("policy_outbound_index_services"),
        "{metrics}"
    );
    assert!(
        metrics.contains("policy_grpc_server_active_streams{method=\"Watch\"} 2"),
        "{metrics}"
    );
    controller.process.kill();
}

/// The opaque-ports annotation flips the protocol on an open stream;
/// lookups by address; and bad requests get proper codes without hurting
/// the server.
#[tokio::test]
async fn annotations_addresses_and_status_codes() {
    let env = TestEnv::new("outbound").await;
    apply(&env, &env.ns, &service_yaml("web", ""));
    let ip = service_ip(&env, "web").await;
    let mut controller = start_controller(&env, &[]).await;
    let client = &mut controller.outbound;

    let mut stream = eventually("the Service to be indexed", TIMEOUT, || {
        let mut client = client.clone();
        let spec = by_addr(&env.ns, ip, 80);
        async move { client.watch(spec).await.map_err(|s| s.to_string()) }
    })
    .await
    .into_inner();
    let first = next_matching(&mut stream, "the first message", |_| true).await;
    assert_eq!(kind_of(&first), "detect");
    assert_eq!(
        meta_name(first.metadata.as_ref()),
        format!("{}/web", env.ns)
    );

    apply(
        &env,
        &env.ns,
        &service_yaml("web", "config.linkerd.io/opaque-ports: \"80\""),
    );
    next_matching(&mut stream, "opaque", |p| kind_of(p) == "opaque").await;

    let get = |spec: TrafficSpec| {
        let mut client = client.clone();
        async move { client.get(spec).await.map(|r| r.into_inner()) }
    };
    let undefined = get(by_addr(&env.ns, ip, 81)).await.expect("undefined port");
    assert_eq!(kind_of(&undefined), "opaque");
    let opaque_route = match undefined.protocol.and_then(|p| p.kind) {
        Some(proxy_protocol::Kind::Opaque(o)) => o.routes[0].metadata.clone(),
        _ => None,
    };
    assert_eq!(meta_name(opaque_route.as_ref()), "undefined-port");
    let egress = get(by_addr(&env.ns, "192.0.2.1".parse().expect("ip"), 443))
        .await
        .expect("egress");
    assert_eq!(meta_name(egress.metadata.as_ref()), "egress-fallback");

    // `linkerd diagnostics policy` leaves out the cluster domain.
    let short = get(by_authority(&env.ns, &format!("web.{}.svc:80", env.ns)))
        .await
        .expect("short authority");
    assert_eq!(kind_of(&short), "opaque");

    // A Service that does not exist (yet): its default policy, as the
    // original's (`NotFound` would be cached by a proxy; see `lag`).
    let unknown = get(by_authority(
        &env.ns,
        &format!("nope.{}.svc.cluster.local:80", env.ns),
    ))
    .await
    .expect("the default policy of a missing Service");
    assert_eq!(kind_of(&unknown), "detect", "{unknown:?}");
    let in_cluster = get(by_addr(&env.ns, "10.255.255.254".parse().expect("ip"), 80))
        .await
        .expect_err("no such service");
    assert_eq!(
        (in_cluster.code(), in_cluster.message()),
        (Code::NotFound, "No such service")
    );
    for (spec, message) in [
        (
            TrafficSpec {
                source_workload: format!("{}:client", env.ns),
                target: None,
            },
            "target is required",
        ),
        (by_addr(&env.ns, ip, 0), "port cannot be zero"),
        (by_addr(&env.ns, ip, 70_000), "port outside valid range"),
        (
            TrafficSpec {
                source_workload: "nope".into(),
                ..by_addr(&env.ns, ip, 80)
            },
            "invalid source_workload",
        ),
    ] {
        let err = get(spec).await.expect_err("invalid");
        assert_eq!(err.code(), Code::InvalidArgument, "{err:?}");
        assert!(err.message().contains(message), "{err:?}");
    }
    // Still serving.
    let again = get(by_addr(&env.ns, ip, 80)).await.expect("still serving");
    assert_eq!(kind_of(&again), "opaque");
}

/// `kubectl apply` through our webhook decides as the original's: what it
/// validates (a Service backend without a port, retry annotations, one
/// rule per TLS/TCP route) is refused with the message; a filter the
/// Gateway API allows but Meridian does not apply (`RequestMirror`) is
/// admitted, and the status writer says why the route is not served.
#[tokio::test]
async fn kubectl_apply_through_the_webhook_decides_as_the_original() {
    let env = TestEnv::new("outbound").await;
    apply(&env, &env.ns, &service_yaml("web", ""));
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = LocalCa::new("policy-validator-test-ca").expect("CA");
    let cert = ca
        .issue_serving_cert(&["linkerd-policy-validator.linkerd.svc"])
        .expect("serving cert");
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem).expect("write cert");
    std::fs::write(&key, &cert.key_pem).expect("write key");
    let https = free_addr();
    let _controller = start_controller_with_webhook(
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

    let ns = &env.ns;
    let mirror = route_yaml(
        "mirror",
        ns,
        "    - filters: [{type: RequestMirror, requestMirror: {backendRef: {name: web, port: 80}}}]
",
    );
    // (With an empty group the CRD's own rule refuses a portless Service
    // backend first; `core` names the same Service for the original.)
    let portless = route_yaml(
        "portless",
        ns,
        "    - backendRefs: [{group: core, kind: Service, name: web}]
",
    );
    let want = format!(
        "admission webhook \"{WEBHOOK}\" denied the request: HTTPRoute \"{ns}/portless\" is invalid: invalid backendRef: cannot reference a Service without a port"
    );
    eventually("the webhook to be called", TIMEOUT, || async {
        let (ok, out) = env
            .cluster()
            .kubectl(&["apply", "-n", ns, "-f", "-"], Some(&portless));
        if !ok && out.contains(&want) {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;

    // Admitted as the original admits it (no warning either) ...
    let out = kubectl(&env, ns, &["apply", "-f", "-"], Some(&mirror));
    assert_eq!(
        out.trim(),
        "httproute.gateway.networking.k8s.io/mirror created",
        "{out}"
    );
    // ... and reported: our status writer does not accept it on the Service.
    eventually("the mirror route's status", TIMEOUT, || async {
        match condition_with_message(&env, "mirror", "Accepted") {
            Some((s, r, m))
                if s == "False"
                    && r == "UnsupportedValue"
                    && m == "unsupported filter \"RequestMirror\"" =>
            {
                Ok(())
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;

    let bad_retry = "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: rpc
  annotations: {retry.linkerd.io/grpc: sometimes}
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
";
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", ns, "-f", "-"], Some(bad_retry));
    assert!(!ok, "must be refused: {out}");
    let want = format!(
        "GRPCRoute \"{ns}/rpc\" is invalid: retry.linkerd.io/grpc: invalid retry condition \"sometimes\""
    );
    assert!(out.contains(&want), "want: {want}\ngot:  {out}");

    // TLSRoute and TCPRoute: one rule each, as the proxy takes one.
    for kind in ["TLSRoute", "TCPRoute"] {
        let hostnames = if kind == "TLSRoute" {
            "  hostnames: [web.example.com]\n"
        } else {
            ""
        };
        let two_rules = format!(
            "apiVersion: gateway.networking.k8s.io/v1alpha2
kind: {kind}
metadata:
  name: two-rules
spec:
  parentRefs: [{{group: core, kind: Service, name: web, port: 80}}]
{hostnames}  rules:
    - backendRefs: [{{name: web, port: 80}}]
    - backendRefs: [{{name: web, port: 80}}]
"
        );
        let (ok, out) = env
            .cluster()
            .kubectl(&["apply", "-n", ns, "-f", "-"], Some(&two_rules));
        assert!(!ok, "must be refused: {out}");
        let want = format!(
            "admission webhook \"{WEBHOOK}\" denied the request: {kind} \"{ns}/two-rules\" is invalid: a {kind} needs exactly one rule"
        );
        assert!(out.contains(&want), "want: {want}\ngot:  {out}");
    }

    // A valid route is admitted.
    apply(&env, ns, &route_yaml("ok", ns, API_RULE));
}

/// `meridian-cli policy svc/<name> <port>` prints the outbound policy, as
/// `linkerd diagnostics policy` does. The CLI belongs to another package,
/// built for the test by `test_support::cli`.
#[tokio::test]
async fn meridian_cli_prints_the_outbound_policy() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let cli = test_support::cli::meridian_cli();
    let env = TestEnv::new("outbound").await;
    apply(&env, &env.ns, &service_yaml("web", ""));
    let grpc = free_addr();
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--grpc-addr={grpc}"),
        format!("--admin-addr={admin}"),
        format!("--control-plane-namespace={}", env.ns),
        "--admission-controller-disabled".to_string(),
    ];
    env.cluster().ensure_crds();
    let _process = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;
    let run = |args: Vec<String>| {
        let out = std::process::Command::new(&cli)
            .args(&args)
            .output()
            .expect("run meridian-cli");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string()
                + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let addr = format!("http://{grpc}");
    let out = eventually("the Service policy", TIMEOUT, || {
        let (ok, out) = run(vec![
            "policy".into(),
            "svc/web".into(),
            "80".into(),
            "-n".into(),
            env.ns.clone(),
            format!("--policy-addr={addr}"),
        ]);
        async move { if ok { Ok(out) } else { Err(out) } }
    })
    .await;
    assert!(out.contains("Detect"), "{out}");
    assert!(
        out.contains(&format!("web.{}.svc.cluster.local:80", env.ns)),
        "{out}"
    );
    // A Service that does not exist: its default policy, as the original.
    let (ok, out) = run(vec![
        "policy".into(),
        "svc/nope".into(),
        "80".into(),
        "-n".into(),
        env.ns.clone(),
        format!("--policy-addr={addr}"),
    ]);
    assert!(ok && out.contains("Detect"), "{out}");
    assert!(
        out.contains(&format!("nope.{}.svc.cluster.local:80", env.ns)),
        "{out}"
    );
}

/// On SIGTERM, open streams end with `OK` (as the original's), not
/// `CANCELLED`, and the process exits.
#[tokio::test]
async fn sigterm_ends_open_streams_with_ok() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("outbound").await;
    apply(&env, &env.ns, &service_yaml("web", ""));
    env.cluster().ensure_crds();
    let grpc = free_addr();
    let admin = free_addr();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_policy-controller"))
        .args([
            format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
            format!("--grpc-addr={grpc}"),
            format!("--admin-addr={admin}"),
            format!("--control-plane-namespace={}", env.ns),
            "--admission-controller-disabled".to_string(),
            // Its localhost listeners on free ports too: the defaults may
            // be held by another process on this machine.
            format!("--introspection-addr={}", free_addr()),
            format!("--workload-ports-addr={}", free_addr()),
        ])
        .stdin(std::process::Stdio::null())
        .spawn()
        .expect("start the controller");
    let authority = format!("web.{}.svc.cluster.local:80", env.ns);
    let mut stream = eventually("a Watch", TIMEOUT, || {
        let spec = by_authority(&env.ns, &authority);
        async move {
            let mut client = OutboundPoliciesClient::connect(format!("http://{grpc}"))
                .await
                .map_err(|e| e.to_string())?;
            client.watch(spec).await.map_err(|s| s.to_string())
        }
    })
    .await
    .into_inner();
    next_matching(&mut stream, "the first message", |_| true).await;
    let signalled = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(signalled, "kill -TERM {}", child.id());
    let end = tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("the stream ends");
    assert!(matches!(end, Ok(None)), "the stream ends with OK: {end:?}");
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .expect("join")
        .expect("wait");
    assert!(status.success(), "{status}");
}

/// A GRPCRoute makes an h2c port gRPC, and a TCPRoute (v1alpha2) routes an
/// opaque port, both once our status writer accepted them.
#[tokio::test]
async fn grpc_and_tcp_routes_attach() {
    let env = TestEnv::new("outbound").await;
    apply(
        &env,
        &env.ns,
        "apiVersion: v1
kind: Service
metadata:
  name: rpc
spec:
  selector: {app: rpc}
  ports:
    - {name: grpc, port: 8080, appProtocol: kubernetes.io/h2c}
    - {name: db, port: 5432}
",
    );
    let mut controller = start_controller(&env, &[]).await;
    let spec =
        |port: u16| by_authority(&env.ns, &format!("rpc.{}.svc.cluster.local:{port}", env.ns));
    let mut grpc = controller
        .outbound
        .watch(spec(8080))
        .await
        .expect("Watch")
        .into_inner();
    let mut db = controller
        .outbound
        .watch(spec(5432))
        .await
        .expect("Watch")
        .into_inner();
    assert_eq!(
        kind_of(&next_matching(&mut grpc, "first", |_| true).await),
        "http2"
    );
    assert_eq!(
        kind_of(&next_matching(&mut db, "first", |_| true).await),
        "opaque"
    );
    apply(
        &env,
        &env.ns,
        "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: rpc
spec:
  # The Gateway API defaults a parent's group to its own: a Service
  # parent names the core group.
  parentRefs: [{group: core, kind: Service, name: rpc, port: 8080}]
  rules: [{matches: [{method: {service: demo.Echo}}], backendRefs: [{name: rpc, port: 8080}]}]
---
apiVersion: gateway.networking.k8s.io/v1alpha2
kind: TCPRoute
metadata:
  name: db
spec:
  parentRefs: [{group: core, kind: Service, name: rpc, port: 5432}]
  rules: [{backendRefs: [{name: rpc, port: 5432}]}]
",
    );
    next_matching(&mut grpc, "the GRPCRoute", |p| kind_of(p) == "grpc").await;
    let tcp = next_matching(&mut db, "the TCPRoute", |p| {
        matches!(
            p.protocol.as_ref().and_then(|p| p.kind.as_ref()),
            Some(proxy_protocol::Kind::Opaque(o)) if o.routes.first().is_some_and(|r| meta_name(r.metadata.as_ref()).ends_with("/db"))
        )
    })
    .await;
    assert_eq!(meta_name(tcp.metadata.as_ref()), format!("{}/rpc", env.ns));
}
