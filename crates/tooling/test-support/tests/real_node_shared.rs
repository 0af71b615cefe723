//! `RealNodeCluster::get()`: one real-node cluster shared by the tests of a
//! binary (cleaned up when the binary exits), with the `kubernetes` Service
//! served from the node's bridge address and the cluster DNS answering.

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

/// The node's cluster DNS (CoreDNS behind `kube-system/kube-dns`) answers
/// cluster names from the host through its ClusterIP, refuses names
/// outside its zones (it has no upstream), and the kubelet points pods at it.
#[tokio::test]
async fn the_cluster_dns_answers_cluster_names_only() {
    use local_cluster::real_node::{
        KUBERNETES_SERVICE_IP,
        dns::{CLUSTER_DNS_IP, DNS_NAMESPACE, DNS_SERVICE},
        dns_wire::{self, NOERROR, NXDOMAIN, QueryType, REFUSED},
    };
    let cluster = RealNodeCluster::get();
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(cluster.client(), DNS_NAMESPACE);
    let service = services.get(DNS_SERVICE).await.expect("kube-dns");
    assert_eq!(
        service.spec.and_then(|s| s.cluster_ip),
        Some(CLUSTER_DNS_IP.to_string())
    );
    let server = std::net::SocketAddr::from((CLUSTER_DNS_IP, 53));
    let ask = |name: &'static str, qtype: QueryType| async move {
        dns_wire::query(server, name, qtype, std::time::Duration::from_secs(2))
            .await
            .unwrap_or_else(|e| panic!("asking {server} for {name}: {e}"))
    };
    let answer = ask("kubernetes.default.svc.cluster.local", QueryType::A).await;
    assert_eq!(answer.rcode, NOERROR, "{answer:?}");
    assert!(answer.authoritative, "{answer:?}");
    assert_eq!(answer.addresses, [KUBERNETES_SERVICE_IP]);
    let srv = ask(
        "_https._tcp.kubernetes.default.svc.cluster.local",
        QueryType::Srv,
    )
    .await;
    assert_eq!(srv.srv.len(), 1, "{srv:?}");
    assert_eq!(srv.srv[0].port, 443);
    assert_eq!(srv.srv[0].target, "kubernetes.default.svc.cluster.local.");
    let missing = ask("nothing.default.svc.cluster.local", QueryType::A).await;
    assert_eq!(missing.rcode, NXDOMAIN, "{missing:?}");
    let outside = ask("example.com", QueryType::A).await;
    assert_eq!(outside.rcode, REFUSED, "{outside:?}");
    assert!(outside.addresses.is_empty());
}
