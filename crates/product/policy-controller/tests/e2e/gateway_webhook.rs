//! What `kubectl apply` prints through the policy webhook for the kinds
//! around the Gateway API, against the local control plane: a kind the
//! webhook does not handle is refused with the original's `unsupported
//! resource type: <group>.<version>.<kind>`; a Gateway API route is refused
//! for what the original checks (a `RegularExpression` gRPC method match)
//! and admitted otherwise, a filter Meridian does not apply included.

use std::time::Duration;

use test_support::{ServerProcess, TestEnv, eventually, free_addr};

const TIMEOUT: Duration = Duration::from_secs(60);
const GATEWAY: &str = "gateway.networking.k8s.io";

fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> String {
    let (ok, out) = env.cluster().kubectl(args, stdin);
    assert!(ok, "kubectl {args:?} failed: {out}");
    out
}

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

const WIDGET_CRD: &str = "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget}
  scope: Namespaced
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          x-kubernetes-preserve-unknown-fields: true
";

/// What `kubectl apply` prints through the policy webhook: a kind it does
/// not handle is refused with the original's message, a GRPCRoute with a
/// method match the original refuses is refused, and one with a filter the
/// Gateway API allows is admitted.
#[tokio::test]
async fn kubectl_apply_through_the_webhook_refuses_as_the_original() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("gateway-webhook").await;
    env.cluster().ensure_crds();
    kubectl(
        &env,
        &["apply", "--server-side", "-f", "-"],
        Some(WIDGET_CRD),
    );
    kubectl(
        &env,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/widgets.example.com",
        ],
        None,
    );

    let dir = tempfile::tempdir().expect("tempdir");
    let ca = test_support::LocalCa::new("gateway-webhook-ca").expect("CA");
    let cert = ca
        .issue_serving_cert(&["linkerd-policy-validator.linkerd.svc"])
        .expect("serving cert");
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem).expect("cert");
    std::fs::write(&key, &cert.key_pem).expect("key");
    let https = free_addr();
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--grpc-addr={}", free_addr()),
        format!("--admin-addr={admin}"),
        format!("--control-plane-namespace={}", env.ns),
        format!("--server-addr={https}"),
        format!("--server-tls-certs={}", crt.display()),
        format!("--server-tls-key={}", key.display()),
    ];
    let _process = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;

    // A webhook configuration like deploy's, also sent Widgets.
    let name = format!("gateway-webhook-{}", env.ns);
    let config = serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "linkerd-policy-validator.linkerd.io",
            "clientConfig": {
                "url": format!("https://127.0.0.1:{}/", https.port()),
                "caBundle": k8s_openapi::ByteString(ca.cert_pem().as_bytes().to_vec()),
            },
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": env.ns}},
            "rules": [
                {"operations": ["CREATE", "UPDATE"], "apiGroups": ["example.com"], "apiVersions": ["*"], "resources": ["widgets"]},
                {"operations": ["CREATE", "UPDATE"], "apiGroups": [GATEWAY], "apiVersions": ["*"], "resources": ["grpcroutes"]}
            ]
        }]
    });
    kubectl(&env, &["apply", "-f", "-"], Some(&config.to_string()));

    let widget = "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w\nspec: {}\n";
    let denied = "admission webhook \"linkerd-policy-validator.linkerd.io\" denied the request: unsupported resource type: example.com.v1.Widget";
    // The apiserver picks the configuration up asynchronously.
    eventually("the webhook's refusal", TIMEOUT, || async {
        let (ok, out) = env.cluster().kubectl(
            &["apply", "--dry-run=server", "-n", &env.ns, "-f", "-"],
            Some(widget),
        );
        if !ok && out.contains(denied) {
            Ok(())
        } else {
            Err(out)
        }
    })
    .await;
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(widget));
    assert!(!ok && out.contains(denied), "{out}");

    let bad = GRPC_ROUTE.replace(
        "service: demo.Echo",
        "type: RegularExpression\n            service: demo.*",
    );
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(&bad));
    assert!(!ok, "must be refused: {out}");
    let want = format!(
        "admission webhook \"linkerd-policy-validator.linkerd.io\" denied the request: GRPCRoute \"{}/rpc\" is invalid: unsupported GRPCRoute method match type \"RegularExpression\"",
        env.ns
    );
    assert!(out.contains(&want), "want: {want}\ngot:  {out}");
    let out = kubectl(&env, &["apply", "-n", &env.ns, "-f", "-"], Some(GRPC_ROUTE));
    assert!(
        out.contains("grpcroute.gateway.networking.k8s.io/rpc created"),
        "{out}"
    );
    // A Server parent naming a port, and a filter Meridian does not apply:
    // the original checks neither, so both are admitted, without a warning.
    let other = GRPC_ROUTE
        .replace("name: rpc", "name: rpc-port")
        .replace("name: web-grpc", "name: web-grpc\n      port: 8080")
        + "      filters:\n        - type: ExtensionRef\n          extensionRef: {group: example.com, kind: Widget, name: w}\n";
    let out = kubectl(&env, &["apply", "-n", &env.ns, "-f", "-"], Some(&other));
    assert_eq!(
        out.trim(),
        "grpcroute.gateway.networking.k8s.io/rpc-port created",
        "{other}\n{out}"
    );
    kubectl(
        &env,
        &["delete", "validatingwebhookconfiguration", &name],
        None,
    );
}
