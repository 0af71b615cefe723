//! The generated CRDs of `deploy/crds/`, installed on a real kube-apiserver
//! with no webhook: what their schemas alone refuse (as a real Linkerd
//! install's CRDs do) and what they default, as `kubectl apply` prints it.

use test_support::TestEnv;

/// `kubectl apply` of `manifest` in the test's namespace: (ok, output).
fn apply(env: &TestEnv, manifest: &str) -> (bool, String) {
    env.cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(manifest))
}

fn applies(env: &TestEnv, manifest: &str, want: &str) {
    let (ok, out) = apply(env, manifest);
    assert!(
        ok && out.contains(want),
        "want {want:?}, got: {out}\n{manifest}"
    );
}

fn refused(env: &TestEnv, manifest: &str, want: &str) {
    let (ok, out) = apply(env, manifest);
    assert!(!ok, "must be refused: {out}\n{manifest}");
    assert!(out.contains(want), "want: {want}\ngot:  {out}\n{manifest}");
}

fn get(env: &TestEnv, what: &str, jsonpath: &str) -> String {
    let (ok, out) = env.cluster().kubectl(
        &[
            "get",
            "-n",
            &env.ns,
            what,
            "-o",
            &format!("jsonpath={jsonpath}"),
        ],
        None,
    );
    assert!(ok, "kubectl get {what}: {out}");
    out
}

fn external_workload(api: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: workload.linkerd.io/{api}\nkind: ExternalWorkload\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[tokio::test]
async fn external_workloads_are_served_at_both_versions_and_checked() {
    let env = TestEnv::new("crd-ew").await;
    env.cluster().ensure_crds();

    let valid = "  meshTLS:\n    identity: vm.ns.serviceaccount.identity.linkerd.cluster.local\n    serverName: vm.ns.cluster.local\n  ports: [{name: http, port: 8080}]\n  workloadIPs: [{ip: 192.0.2.10}, {ip: \"2001:db8::10\"}]\n";
    applies(
        &env,
        &external_workload("v1beta1", "vm", valid),
        "externalworkload.workload.linkerd.io/vm created",
    );
    assert_eq!(
        get(&env, "externalworkload/vm", "{.spec.ports[0].protocol}"),
        "TCP",
        "the port protocol defaults to TCP"
    );
    // v1alpha1 spells the TLS settings `meshTls` and allows one address.
    applies(
        &env,
        &external_workload(
            "v1alpha1",
            "old",
            "  meshTls: {identity: old.ns, serverName: old.ns}\n  workloadIPs: [{ip: 192.0.2.11}]\n",
        ),
        "externalworkload.workload.linkerd.io/old created",
    );
    refused(
        &env,
        &external_workload(
            "v1alpha1",
            "old-two-ips",
            "  meshTls: {identity: old.ns, serverName: old.ns}\n  workloadIPs: [{ip: 192.0.2.11}, {ip: \"2001:db8::11\"}]\n",
        ),
        "spec.workloadIPs: Too many: 2: must have at most 1 item",
    );

    let cases = [
        ("  ports: [{port: 80}]\n", "spec.meshTLS: Required value"),
        (
            "  meshTLS: {identity: \"\", serverName: vm}\n",
            "spec.meshTLS.identity: Invalid value: \"\": spec.meshTLS.identity in body should be at least 1 chars long",
        ),
        (
            "  meshTLS: {identity: vm}\n",
            "spec.meshTLS.serverName: Required value",
        ),
        (
            "  meshTLS: {identity: vm, serverName: vm}\n  ports: [{port: 0}]\n",
            "spec.ports[0].port: Invalid value: 0: spec.ports[0].port in body should be greater than or equal to 1",
        ),
        (
            "  meshTLS: {identity: vm, serverName: vm}\n  ports: [{port: 70000}]\n",
            "spec.ports[0].port: Invalid value: 70000: spec.ports[0].port in body should be less than or equal to 65535",
        ),
        (
            "  meshTLS: {identity: vm, serverName: vm}\n  workloadIPs: [{ip: 192.0.2.1}, {ip: 192.0.2.2}, {ip: 192.0.2.3}]\n",
            "spec.workloadIPs: Too many: 3: must have at most 2 items",
        ),
    ];
    for (spec, want) in cases {
        refused(&env, &external_workload("v1beta1", "bad", spec), want);
    }
}

fn policy(api: &str, kind: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: policy.linkerd.io/{api}\nkind: {kind}\nmetadata:\n  name: {name}\nspec:\n{spec}"
    )
}

#[tokio::test]
async fn policy_schemas_refuse_what_the_charts_refuse_and_default_what_they_default() {
    let env = TestEnv::new("crd-policy").await;
    env.cluster().ensure_crds();

    applies(
        &env,
        &policy(
            "v1beta3",
            "Server",
            "web",
            "  podSelector: {matchLabels: {app: web}}\n  port: 8080\n",
        ),
        "server.policy.linkerd.io/web created",
    );
    assert_eq!(
        get(
            &env,
            "server.policy.linkerd.io/web",
            "{.spec.accessPolicy} {.spec.proxyProtocol}"
        ),
        "deny unknown",
        "accessPolicy defaults to deny, proxyProtocol to unknown"
    );
    applies(
        &env,
        &policy(
            "v1beta3",
            "Server",
            "vm",
            "  externalWorkloadSelector: {}\n  port: 8080\n  accessPolicy: audit\n",
        ),
        "server.policy.linkerd.io/vm created",
    );
    applies(
        &env,
        &policy(
            "v1alpha1",
            "MeshTLSAuthentication",
            "ids",
            "  identityRefs: [{kind: Namespace, name: a}]\n",
        ),
        "meshtlsauthentication.policy.linkerd.io/ids created",
    );

    let cases = [
        (
            policy("v1beta3", "Server", "none", "  port: 80\n"),
            "\"spec\" must validate one and only one schema (oneOf). Found none valid",
        ),
        (
            policy(
                "v1beta3",
                "Server",
                "both",
                "  podSelector: {}\n  externalWorkloadSelector: {}\n  port: 80\n",
            ),
            "\"spec\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
        ),
        (
            policy(
                "v1beta3",
                "Server",
                "op",
                "  podSelector: {matchExpressions: [{key: a, operator: Near}]}\n  port: 80\n",
            ),
            "spec.podSelector.matchExpressions[0].operator: Unsupported value: \"Near\": supported values: \"In\", \"NotIn\", \"Exists\", \"DoesNotExist\"",
        ),
        (
            policy("v1alpha1", "MeshTLSAuthentication", "neither", "  {}\n"),
            "\"spec\" must validate one and only one schema (oneOf). Found none valid",
        ),
        (
            policy(
                "v1alpha1",
                "MeshTLSAuthentication",
                "both",
                "  identities: [\"*\"]\n  identityRefs: [{kind: ServiceAccount, name: a}]\n",
            ),
            "\"spec\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
        ),
        (
            policy(
                "v1alpha1",
                "MeshTLSAuthentication",
                "empty",
                "  identities: []\n",
            ),
            "spec.identities: Invalid value: 0: spec.identities in body should have at least 1 items",
        ),
        (
            policy(
                "v1alpha1",
                "AuthorizationPolicy",
                "unnamed",
                "  targetRef: {group: policy.linkerd.io, kind: Server, name: web}\n  requiredAuthenticationRefs: [{group: policy.linkerd.io, kind: MeshTLSAuthentication}]\n",
            ),
            "spec.requiredAuthenticationRefs[0].name: Required value",
        ),
        (
            policy(
                "v1alpha1",
                "AuthorizationPolicy",
                "kind",
                "  targetRef: {group: policy.linkerd.io, kind: \"not a kind\", name: web}\n  requiredAuthenticationRefs: []\n",
            ),
            "spec.targetRef.kind: Invalid value: \"not a kind\": spec.targetRef.kind in body should match",
        ),
        (
            policy(
                "v1beta1",
                "ServerAuthorization",
                "both",
                "  server: {name: web, selector: {}}\n  client: {unauthenticated: true}\n",
            ),
            "\"spec.server\" must validate one and only one schema (oneOf). Found 2 valid alternatives",
        ),
        (
            policy(
                "v1beta1",
                "ServerAuthorization",
                "id",
                "  server: {name: web}\n  client: {meshTLS: {identities: [\"Web.NS\"]}}\n",
            ),
            "spec.client.meshTLS.identities[0]: Invalid value: \"Web.NS\": spec.client.meshTLS.identities[0] in body should match",
        ),
        (
            policy(
                "v1beta1",
                "ServerAuthorization",
                "sa",
                "  server: {name: web}\n  client: {meshTLS: {serviceAccounts: [{name: Web}]}}\n",
            ),
            "spec.client.meshTLS.serviceAccounts[0].name: Invalid value: \"Web\": spec.client.meshTLS.serviceAccounts[0].name in body should match",
        ),
    ];
    for (manifest, want) in cases {
        refused(&env, &manifest, want);
    }
}
