//! What the tests share: running `meridian-cli` against the test cluster
//! and applying YAML in a test's namespace.

use test_support::TestEnv;

/// Linkerd 2.20's controller image, as the chart renders it.
pub const LINKERD_IMAGE: &str = "cr.l5d.io/linkerd/controller:version-2.20";
/// A registry-qualified Meridian image (docs/swap.md).
pub const MERIDIAN_IMAGE: &str = "registry.example.com/meridian/controller:v0.1.0";

/// Runs `meridian-cli <args>` with the test cluster's kubeconfig:
/// (exit status, stdout). Stderr is printed for the test's log.
pub async fn cli(env: &TestEnv, args: &[&str]) -> (i32, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_meridian-cli"))
        .env("KUBECONFIG", env.cluster().kubeconfig())
        .args(args)
        .output()
        .await
        .expect("running meridian-cli");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!(
        "meridian-cli {}\n{}{stdout}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), stdout)
}

/// `kubectl <args>` in the test's namespace, `stdin` piped; panics on failure.
pub fn kubectl(env: &TestEnv, args: &[&str], stdin: Option<&str>) -> String {
    let mut all = vec!["-n", env.ns.as_str()];
    all.extend_from_slice(args);
    let (ok, out) = env.cluster().kubectl(&all, stdin);
    assert!(ok, "kubectl {all:?}: {out}");
    out
}

/// Applies YAML in the test's namespace.
pub fn apply(env: &TestEnv, yaml: &str) {
    kubectl(env, &["apply", "-f", "-"], Some(yaml));
}

/// Merge-patches an object's `status` subresource.
pub fn patch_status(env: &TestEnv, object: &str, status: &serde_json::Value) {
    let patch = serde_json::json!({ "status": status }).to_string();
    kubectl(
        env,
        &[
            "patch",
            object,
            "--subresource=status",
            "--type=merge",
            "-p",
            &patch,
        ],
        None,
    );
}

/// The destination Deployment as the 2.20 chart labels it, with `replicas`
/// and, per controller container, its image and arguments.
pub fn destination_deployment(replicas: u32, containers: &[(&str, &str, &[&str])]) -> String {
    let containers: Vec<serde_json::Value> = containers
        .iter()
        .map(|(name, image, args)| {
            let admin = match *name {
                "destination" => ("dest-admin", 9996),
                "sp-validator" => ("spval-admin", 9997),
                _ => ("policy-admin", 9990),
            };
            serde_json::json!({
                "name": name, "image": image, "args": args,
                "ports": [{"name": admin.0, "containerPort": admin.1}],
            })
        })
        .collect();
    serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "linkerd-destination",
            "labels": {k8s_api::labels::CONTROL_PLANE_COMPONENT: "destination"},
        },
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {k8s_api::labels::CONTROL_PLANE_COMPONENT: "destination"}},
            "template": {
                "metadata": {"labels": {k8s_api::labels::CONTROL_PLANE_COMPONENT: "destination"}},
                "spec": {"containers": containers},
            },
        },
    })
    .to_string()
}
