//! `RealNodeCluster::get()`: one real-node cluster shared by the tests of a
//! binary (cleaned up when the binary exits), with the `kubernetes` Service
//! served from the node's bridge address.

use k8s_openapi::api::{core::v1::Node, discovery::v1::EndpointSlice};
use kube::Api;
use test_support::RealNodeCluster;

#[tokio::test]
async fn the_shared_real_node_is_ready() {
    let cluster = RealNodeCluster::get();
    let nodes: Api<Node> = Api::all(cluster.client());
    let node = nodes
        .get(local_cluster::real_node::NODE_NAME)
        .await
        .expect("node");
    let ready = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    assert!(ready, "the node is not Ready");
}

#[tokio::test]
async fn the_kubernetes_service_points_at_the_bridge_address() {
    let cluster = RealNodeCluster::get();
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client(), "default");
    let slice = slices.get("kubernetes").await.expect("kubernetes slice");
    let addresses: Vec<String> = slice
        .endpoints
        .into_iter()
        .flatten()
        .flat_map(|e| e.addresses)
        .collect();
    assert_eq!(
        addresses,
        [local_cluster::real_node::BRIDGE_IP.to_string()],
        "the apiserver advertises the node's bridge address"
    );
}
