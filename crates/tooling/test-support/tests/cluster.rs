//! The shared control plane is the pinned Kubernetes, answers kubectl, and
//! has the fake Node that test pods are bound to.

use test_support::{NODE_NAME, TestEnv};

#[tokio::test]
async fn apiserver_reports_the_pinned_version_and_kubectl_works() {
    let env = TestEnv::new("cluster").await;
    let pins =
        local_cluster::Pins::from_gotools(&local_cluster::binaries::gotools_dir()).expect("pins");
    let version = env.client.apiserver_version().await.expect("/version");
    assert_eq!(version.git_version, pins.kubernetes);
    assert_eq!(env.cluster().kubernetes_version(), pins.kubernetes);

    let (ok, out) = env.cluster().kubectl(&["get", "nodes", "-o", "name"], None);
    assert!(ok, "kubectl get nodes failed: {out}");
    assert_eq!(out.trim(), format!("node/{NODE_NAME}"));
}
