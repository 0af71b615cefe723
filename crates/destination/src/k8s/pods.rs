//! Pods → core values: owners, proxy ports, the facts of a pod that feed its
//! endpoints, node zones, and the keys and IPs the index files pods under.

use k8s_api::labels;
use std::collections::HashSet;
use std::net::{IpAddr, SocketAddr};

use k8s_openapi::api::core::v1::{Container, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;

use super::lookups::ClusterLookups;
use crate::core::endpoint::{
    OwnerLabel, OwnerRef, ParentKind, PodInfo, ProxyPortError, ProxyPorts,
};
use k8s_api::ports::{PortRanges, parse_port_list};

/// The `topology.kubernetes.io/zone` label of a node (metadata only), if set.
pub fn node_topology_zone(node: &ObjectMeta) -> Option<&str> {
    node.labels
        .as_ref()
        .and_then(|l| l.get(labels::TOPOLOGY_ZONE))
        .map(String::as_str)
}

/// The only owner of an object, if it has exactly one. Use it to answer the
/// owner lookup from metadata-only ReplicaSet/Job caches.
pub fn sole_owner(obj: &impl Resource) -> Option<OwnerRef> {
    match obj.meta().owner_references.as_deref() {
        Some([only]) => Some(OwnerRef {
            kind: only.kind.clone(),
            name: only.name.clone(),
        }),
        _ => None,
    }
}

/// Computes the owner label of a pod:
/// no or several owners → `pod`; a ReplicaSet owned by a deployment,
/// statefulset, daemonset or job → that kind, else `replicaset`; a Job → its
/// single owner's kind, else `k8s_job`; any other kind → lowercased.
pub fn owner_label(pod: &Pod, lookups: &dyn ClusterLookups) -> OwnerLabel {
    let pod_name = pod.metadata.name.as_deref().unwrap_or_default();
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let parent = match pod.metadata.owner_references.as_deref() {
        Some([only]) => only,
        _ => return OwnerLabel::new("pod", pod_name),
    };
    match parent.kind.as_str() {
        "ReplicaSet" => match lookups.owner(ParentKind::ReplicaSet, ns, &parent.name) {
            Some(grand)
                if matches!(
                    grand.kind.to_ascii_lowercase().as_str(),
                    "deployment" | "statefulset" | "daemonset" | "job"
                ) =>
            {
                OwnerLabel::new(&grand.kind, &grand.name)
            }
            _ => OwnerLabel::new(&parent.kind, &parent.name),
        },
        "Job" => match lookups.owner(ParentKind::Job, ns, &parent.name) {
            Some(grand) => OwnerLabel::new(&grand.kind, &grand.name),
            None => OwnerLabel::new(&parent.kind, &parent.name),
        },
        kind => OwnerLabel::new(kind, &parent.name),
    }
}

impl ProxyPorts {
    /// Reads the ports from the first `linkerd-proxy` container among the init
    /// containers (native sidecars) and then the containers.
    pub fn from_pod(pod: &Pod) -> Self {
        let proxy = pod.spec.as_ref().and_then(|spec| {
            spec.init_containers
                .iter()
                .flatten()
                .chain(spec.containers.iter())
                .find(|c| c.name == labels::PROXY_CONTAINER)
        });
        let Some(proxy) = proxy else {
            return Self {
                inbound: Err(ProxyPortError::NoProxyContainer),
                admin: Err(ProxyPortError::NoProxyContainer),
                control: Err(ProxyPortError::NoProxyContainer),
            };
        };
        Self {
            inbound: env_port(proxy, labels::ENV_PROXY_INBOUND_LISTEN_ADDR),
            admin: env_port(proxy, labels::ENV_PROXY_ADMIN_LISTEN_ADDR),
            control: env_port(proxy, labels::ENV_PROXY_CONTROL_LISTEN_ADDR),
        }
    }
}

fn env_port(container: &Container, env: &'static str) -> Result<u16, ProxyPortError> {
    let mut result = Err(ProxyPortError::Missing { env });
    for var in container.env.iter().flatten().filter(|v| v.name == env) {
        let value = var.value.as_deref().unwrap_or_default();
        match value.parse::<SocketAddr>() {
            Ok(addr) if addr.port() != 0 => result = Ok(addr.port()),
            _ => {
                return Err(ProxyPortError::Unparsable {
                    env,
                    value: value.to_string(),
                });
            }
        }
    }
    result
}

impl PodInfo {
    /// Extracts the pod facts; the owner label needs the ReplicaSet/Job lookup.
    pub fn from_pod(pod: &Pod, lookups: &dyn ClusterLookups) -> Self {
        let meta = &pod.metadata;
        let label = |key: &str| {
            meta.labels
                .as_ref()
                .and_then(|l| l.get(key))
                .filter(|v| !v.is_empty())
                .cloned()
        };
        let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key));
        let spec = pod.spec.as_ref();
        let opaque_ports = annotation(labels::OPAQUE_PORTS).map(|list| {
            let named = |name: &str| named_container_port(pod, name);
            parse_port_list(list, &named)
        });
        Self {
            name: meta.name.clone().unwrap_or_default(),
            namespace: non_empty_or_default(meta.namespace.as_deref()),
            service_account: non_empty_or_default(
                spec.and_then(|s| s.service_account_name.as_deref()),
            ),
            node_name: spec.and_then(|s| s.node_name.clone()),
            control_plane_ns: label(labels::CONTROL_PLANE_NS),
            pod_template_hash: label(labels::POD_TEMPLATE_HASH),
            owner: owner_label(pod, lookups),
            opaque_ports,
            skip_inbound_ports: annotation(labels::SKIP_INBOUND_PORTS)
                .map(|list| PortRanges::parse(list))
                .unwrap_or_default(),
            proxy_ports: ProxyPorts::from_pod(pod),
        }
    }
}

fn non_empty_or_default(value: Option<&str>) -> String {
    match value {
        Some(v) if !v.is_empty() => v.to_string(),
        _ => "default".to_string(),
    }
}

/// The containerPort of a named port among init containers and containers
/// (a later container wins on duplicate names).
pub fn named_container_port(pod: &Pod, name: &str) -> Option<u16> {
    let spec = pod.spec.as_ref()?;
    spec.init_containers
        .iter()
        .flatten()
        .chain(spec.containers.iter())
        .flat_map(|c| c.ports.iter().flatten())
        .filter(|p| p.name.as_deref() == Some(name))
        .filter_map(|p| u16::try_from(p.container_port).ok())
        .next_back()
}

/// The IPs a pod is known by: pod IPs and host IP (for re-resolving
/// endpoint profiles).
pub fn pod_ips(pod: &Pod) -> HashSet<IpAddr> {
    let status = pod.status.as_ref();
    status
        .and_then(|s| s.pod_ip.as_deref())
        .into_iter()
        .chain(
            status
                .into_iter()
                .flat_map(|s| s.pod_ips.iter().flatten().map(|p| p.ip.as_str())),
        )
        .chain(status.and_then(|s| s.host_ip.as_deref()))
        .filter_map(|ip| ip.parse().ok())
        .collect()
}

/// `(namespace, name)` of an object, if it has both.
pub fn namespaced_name(obj: &impl Resource) -> Option<(String, String)> {
    let meta = obj.meta();
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

/// The key of a pod: `(namespace, name)`.
pub fn pod_key(pod: &Pod) -> Option<(String, String)> {
    namespaced_name(pod)
}

/// The pod's primary IP (`status.podIP`), parsed.
pub fn pod_ip(pod: &Pod) -> Option<IpAddr> {
    pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()
}

/// Whether the pod is in phase `Running`.
pub fn is_running(pod: &Pod) -> bool {
    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Whether the pod answers on its pod IP: on the pod network, not finished
/// and not terminating.
pub fn serves_pod_ip(pod: &Pod) -> bool {
    let host_network = pod
        .spec
        .as_ref()
        .and_then(|s| s.host_network)
        .unwrap_or(false);
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    !host_network
        && !matches!(phase, Some("Succeeded" | "Failed"))
        && pod.metadata.deletion_timestamp.is_none()
}

/// Whether the pod's host IP is `addr`'s IP and one of its containers
/// exposes `addr`'s port as a host port.
pub fn exposes_host_port(pod: &Pod, addr: SocketAddr) -> bool {
    let port = i32::from(addr.port());
    let host_ip = pod.status.as_ref().and_then(|s| s.host_ip.as_deref());
    host_ip.and_then(|ip| ip.parse::<IpAddr>().ok()) == Some(addr.ip())
        && pod.spec.as_ref().is_some_and(|spec| {
            spec.containers
                .iter()
                .flat_map(|c| c.ports.iter().flatten())
                .any(|p| p.host_port == Some(port))
        })
}

/// A node's name and zone label, if it has a name.
pub fn node_zone(node: &impl Resource) -> Option<(String, Option<String>)> {
    let meta = node.meta();
    Some((
        meta.name.clone()?,
        node_topology_zone(meta).map(str::to_string),
    ))
}
