//! The manifests in `deploy/` are accepted by a real kube-apiserver.

use std::path::Path;

use test_support::TestEnv;

#[tokio::test]
async fn deploy_manifests_apply_cleanly() {
    let env = TestEnv::new("deploy").await;
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let path = |p: &str| deploy.join(p).display().to_string();
    let cluster = env.cluster();

    // Server-side: the Gateway API CRDs are too large for the
    // last-applied annotation of a client-side apply.
    let (ok, out) = cluster.kubectl(
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &path("crds"),
        ],
        None,
    );
    assert!(ok, "CRDs: {out}");
    let (ok, out) = cluster.kubectl(
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "-f",
            &path("crds"),
        ],
        None,
    );
    assert!(ok, "CRDs established: {out}");

    // A dry run persists nothing, so the objects in `linkerd` need the
    // namespace to exist for real.
    let (ok, out) = cluster.kubectl(&["create", "namespace", "linkerd"], None);
    assert!(ok || out.contains("AlreadyExists"), "namespace: {out}");

    // Server-side dry run: validated and admitted by the apiserver, not persisted.
    for manifest in [
        "destination.yaml",
        "sp-validator-webhook.yaml",
        "policy-validator-webhook.yaml",
    ] {
        let (ok, out) =
            cluster.kubectl(&["apply", "--dry-run=server", "-f", &path(manifest)], None);
        assert!(ok, "{manifest}: {out}");
    }

    // Older API versions the original serves still apply.
    let older = format!(
        "apiVersion: policy.linkerd.io/v1beta1\nkind: Server\nmetadata:\n  name: old\n  namespace: {ns}\nspec:\n  podSelector: {{matchLabels: {{app: web}}}}\n  port: 8080\n---\napiVersion: policy.linkerd.io/v1alpha1\nkind: HTTPRoute\nmetadata:\n  name: old\n  namespace: {ns}\nspec:\n  parentRefs: [{{group: policy.linkerd.io, kind: Server, name: old}}]\n",
        ns = env.ns
    );
    let (ok, out) = cluster.kubectl(&["apply", "-f", "-"], Some(&older));
    assert!(ok, "older versions: {out}");
    let (ok, out) = cluster.kubectl(
        &[
            "get",
            "servers.v1beta3.policy.linkerd.io",
            "old",
            "-n",
            &env.ns,
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok && out.contains("server.policy.linkerd.io/old"), "{out}");
}
