//! The fake Node that pods are bound to. No kubelet runs, but the
//! EndpointSlice controller skips pods whose `spec.nodeName` has no Node.

use k8s_openapi::api::core::v1::Node;
use kube::{Api, api::PostParams};

/// Label for a Node's zone, read for topology-aware routing.
pub const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

/// Creates Node `name` (with a zone label when given) unless it exists.
pub async fn ensure_node(
    client: &kube::Client,
    name: &str,
    zone: Option<&str>,
) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let mut node = Node::default();
    node.metadata.name = Some(name.to_string());
    if let Some(zone) = zone {
        node.metadata.labels = Some([(ZONE_LABEL.to_string(), zone.to_string())].into());
    }
    match nodes.create(&PostParams::default(), &node).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(error) => Err(error),
    }
}
