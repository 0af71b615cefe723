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
