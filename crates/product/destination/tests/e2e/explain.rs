//! `meridian-cli explain` end to end: the destination and the policy
//! controller run as processes against the real local control plane, the
//! test plays the client pod's proxy (its `Get` and `GetProfile` streams
//! with the pod's context token), and each scenario breaks one axis and
//! asserts the verdict line and the exit status.

use std::{net::SocketAddr, path::PathBuf, process::Command, time::Duration};

use linkerd2_proxy_api::destination::{GetDestination, destination_client::DestinationClient};
use test_support::{LocalCa, NODE_NAME, ServerProcess, TestEnv, eventually, free_addr};
use tonic::transport::Channel;

use crate::common::{Destination, authority, client, http_service, start_destination};

const TIMEOUT: Duration = Duration::from_secs(40);

fn policy_controller_bin() -> PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_destination")).with_file_name("policy-controller")
}

struct Plane {
    dst: Destination,
    _policy: ServerProcess,
    policy_grpc: SocketAddr,
}

async fn start(env: &TestEnv) -> Plane {
    let dst = start_destination(env, free_addr()).await;
    let policy_grpc = free_addr();
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--grpc-addr={policy_grpc}"),
        format!("--admin-addr={admin}"),
        "--admission-controller-disabled".to_string(),
        format!("--control-plane-namespace={}", env.ns),
    ];
    let policy = ServerProcess::start(&policy_controller_bin(), &args, admin).await;
    Plane {
        dst,
        _policy: policy,
        policy_grpc,
    }
}

/// Runs `meridian-cli explain client web.<ns>:80`: (exit status, stdout).
fn explain(env: &TestEnv, plane: &Plane) -> (i32, String) {
    let target = format!("web.{}:80", env.ns);
    let output = Command::new(test_support::cli::meridian_cli())
        .env("KUBECONFIG", env.cluster().kubeconfig())
        .args([
            &format!("--addr=http://{}", plane.dst.addr),
            "explain",
            "client",
            &target,
            "-n",
            &env.ns,
            &format!(
                "--destination-introspection-addr=http://{}",
                plane
                    .dst
                    .process
                    .introspection_addr
                    .expect("the destination's introspection listener")
            ),
            &format!("--policy-addr=http://{}", plane.policy_grpc),
        ])
        .output()
        .expect("run meridian-cli");
    let stdout = String::from_utf8_lossy(&output.stdout).to_string();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.trim().is_empty() || output.status.code().is_some(),
        "{stderr}"
    );
    (output.status.code().unwrap_or(-1), stdout)
}

/// Waits until `explain` prints `verdict` (its last line) with `code`.
async fn wait_verdict(env: &TestEnv, plane: &Plane, verdict: &str, code: i32) -> String {
    eventually(verdict, TIMEOUT, || async {
        let (status, out) = explain(env, plane);
        let last = out.lines().last().unwrap_or_default().to_string();
        if last == verdict && status == code {
            eprintln!("{out}");
            Ok(out)
        } else {
            Err(format!("exit {status}:\n{out}"))
        }
    })
    .await
}

/// The client pod's proxy: a `Get` and a `GetProfile` of the target.
async fn proxy_streams(
    grpc: &mut DestinationClient<Channel>,
    env: &TestEnv,
) -> (
    tonic::Streaming<linkerd2_proxy_api::destination::Update>,
    tonic::Streaming<linkerd2_proxy_api::destination::DestinationProfile>,
) {
    let token = format!(
        r#"{{"ns":"{}","nodeName":"{NODE_NAME}","pod":"client"}}"#,
        env.ns
    );
    let request = GetDestination {
        scheme: "k8s".into(),
        path: authority(env, "web", 80),
        context_token: token,
    };
    let mut get = grpc.get(request.clone()).await.expect("Get").into_inner();
    let _ = get.message().await.expect("a first update");
    let mut profile = grpc
        .get_profile(request)
        .await
        .expect("GetProfile")
        .into_inner();
    let _ = profile.message().await.expect("a first profile");
    (get, profile)
}

fn kubectl_apply(env: &TestEnv, yaml: &str) {
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(yaml));
    assert!(ok, "kubectl apply failed: {out}\n{yaml}");
}

fn kubectl(env: &TestEnv, args: &[&str]) {
    let mut all = vec!["-n", env.ns.as_str()];
    all.extend_from_slice(args);
    let (ok, out) = env.cluster().kubectl(&all, None);
    assert!(ok, "kubectl {args:?} failed: {out}");
}

#[tokio::test]
async fn explain_names_the_broken_axis() {
    // Built (if needed) before any stream is open: the build blocks this
    // runtime, and a stream whose connection is not polled for that long
    // is closed by its server's keepalive.
    test_support::cli::meridian_cli();
    let env = TestEnv::new("dst-explain").await;
    kubectl(&env, &["create", "serviceaccount", "client"]);
    kubectl(&env, &["create", "serviceaccount", "other"]);
    let plane = start(&env).await;
    http_service(&env, "web").await;
    let web = env
        .pod("web-0")
        .label("app", "web")
        .port(Some("http"), 8080)
        .meshed("linkerd");
    let (_, web_ip) = env.create_ready_pod(&web).await;
    let client_pod = env
        .pod("client")
        .service_account("client")
        .meshed("linkerd");
    env.create_ready_pod(&client_pod).await;
    let mut grpc = client(plane.dst.addr).await;

    // All good: the client's proxy follows the target, policy lets it in.
    let streams = proxy_streams(&mut grpc, &env).await;
    let out = wait_verdict(
        &env,
        &plane,
        "verdict: ok: endpoints, discovery, policy and profiles all pass",
        0,
    )
    .await;
    assert!(out.contains("1 of 1 endpoints ready"), "{out}");
    assert!(out.contains("is up to date"), "{out}");
    assert!(out.contains("lets the client in"), "{out}");
    assert!(out.contains("no ServiceProfile"), "{out}");

    // Discovery: the client's proxy goes away (its streams are cut).
    drop(streams);
    let out = wait_verdict(
        &env,
        &plane,
        &format!(
            "verdict: discovery broken: no Get stream from Pod {ns}/client for web.{ns}.svc:80 (its proxy is not connected or never asked)",
            ns = env.ns
        ),
        1,
    )
    .await;
    assert!(out.contains("the client is sent 1 endpoint(s)"), "{out}");
    let streams = proxy_streams(&mut grpc, &env).await;

    // Policy: a Server whose only authorization allows another ServiceAccount.
    let other = format!(
        "other.{}.serviceaccount.identity.linkerd.cluster.local",
        env.ns
    );
    kubectl_apply(
        &env,
        &format!(
            "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
spec:
  podSelector:
    matchLabels:
      app: web
  port: http
  proxyProtocol: HTTP/1
  accessPolicy: deny
---
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata:
  name: others
spec:
  identities: [\"{other}\"]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: allow-other
spec:
  targetRef:
    group: policy.linkerd.io
    kind: Server
    name: web-http
  requiredAuthenticationRefs:
    - group: policy.linkerd.io
      kind: MeshTLSAuthentication
      name: others
"
        ),
    );
    wait_verdict(
        &env,
        &plane,
        &format!(
            "verdict: policy broken: Server web-http denies the client (identity client.{}.serviceaccount.identity.linkerd.cluster.local): none of authorizationpolicy allow-other allows it",
            env.ns
        ),
        1,
    )
    .await;
    kubectl(
        &env,
        &[
            "delete",
            "authorizationpolicy/allow-other",
            "server/web-http",
        ],
    );

    // Profiles: one that our rules refuse (written without the webhook), then one accepted.
    let sp = |budget_ttl: &str| {
        format!(
            "apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata:
  name: web.{ns}.svc.cluster.local
spec:
  routes:
  - name: GET /
    condition:
      method: GET
      pathRegex: /
  retryBudget:
    retryRatio: 0.2
    minRetriesPerSecond: 10
    ttl: {budget_ttl}
",
            ns = env.ns
        )
    };
    kubectl_apply(&env, &sp("forever"));
    let out = wait_verdict(
        &env,
        &plane,
        "verdict: profiles broken: it exists but does not validate: invalid retry budget ttl \"forever\": time: invalid duration \"forever\"",
        1,
    )
    .await;
    assert!(
        out.contains(&format!(
            "[ServiceProfile {ns}/web.{ns}.svc.cluster.local]",
            ns = env.ns
        )),
        "{out}"
    );
    kubectl(
        &env,
        &[
            "delete",
            "serviceprofile",
            &format!("web.{}.svc.cluster.local", env.ns),
        ],
    );

    // The webhook refuses one (kubectl says why); explain then sees none.
    let certs = tempfile::tempdir().expect("tempdir");
    let ca = LocalCa::new("explain-sp-validator-ca").expect("CA");
    let cert = ca
        .issue_serving_cert(&["linkerd-sp-validator.linkerd.svc"])
        .expect("serving cert");
    std::fs::write(certs.path().join("tls.crt"), &cert.cert_pem).expect("write cert");
    std::fs::write(certs.path().join("tls.key"), &cert.key_pem).expect("write key");
    let (webhook_addr, webhook_admin) = (free_addr(), free_addr());
    let _validator = ServerProcess::start(
        &policy_controller_bin().with_file_name("sp-validator"),
        &[
            format!("--addr={webhook_addr}"),
            format!("--admin-addr={webhook_admin}"),
            format!("--tls-cert={}", certs.path().join("tls.crt").display()),
            format!("--tls-key={}", certs.path().join("tls.key").display()),
        ],
        webhook_admin,
    )
    .await;
    let _registered = env.register_webhook(
        "sp-validator-webhook.yaml",
        &format!("https://127.0.0.1:{}/", webhook_addr.port()),
        ca.cert_pem(),
    );
    let unnamed = sp("10s").replace("  - name: GET /\n", "  - name: \"\"\n");
    let refusal = eventually("the webhook to refuse the profile", TIMEOUT, || async {
        let (ok, out) = env
            .cluster()
            .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(&unnamed));
        if !ok && out.contains("denied the request") {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .await;
    eprintln!("kubectl apply (refused):\n{refusal}");
    assert!(refusal.contains("has a route with no name"), "{refusal}");
    let out = wait_verdict(
        &env,
        &plane,
        "verdict: ok: endpoints, discovery, policy and profiles all pass",
        0,
    )
    .await;
    assert!(out.contains("no ServiceProfile"), "{out}");

    // Accepted by the webhook: it validates and the client's stream is sent it.
    kubectl_apply(&env, &sp("10s"));
    let out = wait_verdict(
        &env,
        &plane,
        "verdict: ok: endpoints, discovery, policy and profiles all pass",
        0,
    )
    .await;
    assert!(
        out.contains("it exists and validates (1 route(s))"),
        "{out}"
    );
    assert!(out.contains("GetProfile stream"), "{out}");

    // Endpoints: the target's only pod is not ready.
    env.set_pod_ready("web-0", web_ip, false).await;
    let out = wait_verdict(
        &env,
        &plane,
        "verdict: endpoints broken: 0 of 1 endpoints ready",
        1,
    )
    .await;
    assert!(out.contains("web-0"), "{out}");
    assert!(out.contains("is not ready: Ready=False"), "{out}");
    drop(streams);
}
