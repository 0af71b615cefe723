//! `kubectl apply` of invalid policy objects through the policy webhook:
//! each is refused with the original's message (or the schema's, where the
//! API server refuses first).

use super::*;

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
