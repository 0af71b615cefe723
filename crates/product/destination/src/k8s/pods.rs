//! Pods → core values: a pod decoded straight from the API's JSON into the
//! [`PodFacts`] the destination keeps ([`PodObject`]: no `k8s-openapi`
//! `Pod` is built on the watch path), owners and the owner label, node
//! zones, and the keys the index files pods under.

use std::{net::IpAddr, sync::Arc};

use k8s_api::labels;
use k8s_api::ports::{PortRanges, parse_port_list};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::{Deserialize, Deserializer, de::IgnoredAny};

use k8s_index::partial::{Kept, read_keys};

use super::lookups::ClusterLookups;
use crate::core::{
    endpoint::{OwnerLabel, OwnerRef, ParentKind, PodInfo, ProxyPortError, ProxyPorts},
    pod::{PodFacts, PodPhase, PodSpecFacts},
};

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
pub fn owner_label(pod: &PodFacts, lookups: &dyn ClusterLookups) -> OwnerLabel {
    let Some(parent) = &pod.spec.owner else {
        return OwnerLabel::new("pod", &pod.name);
    };
    let ns = &pod.namespace;
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

impl PodInfo {
    /// A pod's facts with its owner label (which needs the ReplicaSet/Job
    /// lookup).
    pub fn new(facts: Arc<PodFacts>, lookups: &dyn ClusterLookups) -> Self {
        let owner = owner_label(&facts, lookups);
        Self { facts, owner }
    }
}

k8s_index::partial_object! {
    /// A pod as the destination watches it: its `metadata` reduced to what a
    /// watch needs (name, namespace, resourceVersion) and its [`PodFacts`],
    /// decoded straight from the API's JSON. Everything else (the rest of the
    /// spec and status, managed fields, other labels and annotations) is
    /// skipped by the decoder and never allocated.
    #[derive(Clone, Debug)]
    pub struct PodObject {
        /// What the index keeps.
        pub facts: PodFacts,
    }
    kind = "Pod", group = "", version = "v1", plural = "pods";
    decoded from PodJson by facts;
    from Pod;
}

// ---- the JSON fields read, and only those ----

#[derive(Default, Deserialize)]
struct PodJson {
    #[serde(default)]
    metadata: MetaJson,
    #[serde(default)]
    spec: Option<SpecJson>,
    #[serde(default)]
    status: Option<StatusJson>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaJson {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    #[serde(default, deserialize_with = "read_labels")]
    labels: Kept,
    #[serde(default, deserialize_with = "read_annotations")]
    annotations: Kept,
    #[serde(default)]
    owner_references: Option<Vec<OwnerJson>>,
    #[serde(default)]
    deletion_timestamp: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct OwnerJson {
    kind: String,
    name: String,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecJson {
    #[serde(default)]
    containers: Vec<ContainerJson>,
    #[serde(default)]
    init_containers: Vec<ContainerJson>,
    service_account_name: Option<String>,
    node_name: Option<String>,
    host_network: Option<bool>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerJson {
    name: String,
    #[serde(default)]
    ports: Vec<PortJson>,
    #[serde(default)]
    env: Vec<EnvJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PortJson {
    name: Option<String>,
    container_port: i32,
    host_port: Option<i32>,
}

#[derive(Deserialize)]
struct EnvJson {
    name: String,
    value: Option<String>,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct StatusJson {
    phase: Option<String>,
    #[serde(rename = "podIP")]
    pod_ip: Option<String>,
    #[serde(default, rename = "podIPs")]
    pod_ips: Vec<PodIpJson>,
    #[serde(rename = "hostIP")]
    host_ip: Option<String>,
}

#[derive(Deserialize)]
struct PodIpJson {
    ip: String,
}

/// Label keys read: `linkerd.io/control-plane-ns`, `pod-template-hash`.
const LABELS: [&str; 2] = [labels::CONTROL_PLANE_NS, labels::POD_TEMPLATE_HASH];
/// Annotation keys read: opaque ports, skip-inbound ports.
const ANNOTATIONS: [&str; 2] = [labels::OPAQUE_PORTS, labels::SKIP_INBOUND_PORTS];

fn read_labels<'de, D: Deserializer<'de>>(d: D) -> Result<Kept, D::Error> {
    read_keys(d, &LABELS)
}

fn read_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Kept, D::Error> {
    read_keys(d, &ANNOTATIONS)
}

impl PodJson {
    /// The facts of the decoded fields (the index interns the shared strings).
    fn facts(self) -> PodFacts {
        let meta = self.metadata;
        let spec = self.spec.unwrap_or_default();
        let status = self.status.unwrap_or_default();
        let non_empty = |v: Option<&str>| v.filter(|v| !v.is_empty()).map(Arc::<str>::from);
        let or_default = |v: Option<&str>| non_empty(v).unwrap_or_else(|| Arc::from("default"));
        // Init containers (native sidecars) first, as the proxy is looked up.
        let containers = || spec.init_containers.iter().chain(&spec.containers);
        let opaque_ports = meta.annotations.get(0).map(|list| {
            // A later container wins on duplicate port names.
            let named = |name: &str| {
                containers()
                    .flat_map(|c| &c.ports)
                    .filter(|p| p.name.as_deref() == Some(name))
                    .filter_map(|p| u16::try_from(p.container_port).ok())
                    .next_back()
            };
            parse_port_list(list, &named)
        });
        let proxy = containers().find(|c| c.name == labels::PROXY_CONTAINER);
        let proxy_ports = match proxy {
            None => ProxyPorts {
                inbound: Err(ProxyPortError::NoProxyContainer),
                admin: Err(ProxyPortError::NoProxyContainer),
                control: Err(ProxyPortError::NoProxyContainer),
            },
            Some(proxy) => ProxyPorts {
                inbound: env_port(proxy, labels::ENV_PROXY_INBOUND_LISTEN_ADDR),
                admin: env_port(proxy, labels::ENV_PROXY_ADMIN_LISTEN_ADDR),
                control: env_port(proxy, labels::ENV_PROXY_CONTROL_LISTEN_ADDR),
            },
        };
        let mut host_ports: Vec<u16> = spec
            .containers
            .iter()
            .flat_map(|c| &c.ports)
            .filter_map(|p| p.host_port.and_then(|h| u16::try_from(h).ok()))
            .collect();
        host_ports.sort_unstable();
        host_ports.dedup();
        let mut pod_ips: Vec<IpAddr> = Vec::new();
        for ip in status
            .pod_ip
            .iter()
            .chain(status.pod_ips.iter().map(|p| &p.ip))
        {
            if let Ok(ip) = ip.parse()
                && !pod_ips.contains(&ip)
            {
                pod_ips.push(ip);
            }
        }
        let owner = match meta.owner_references.as_deref() {
            Some([only]) => Some(OwnerRef {
                kind: only.kind.clone(),
                name: only.name.clone(),
            }),
            _ => None,
        };
        let spec_facts = PodSpecFacts {
            service_account: or_default(spec.service_account_name.as_deref()),
            control_plane_ns: non_empty(meta.labels.get(0)),
            pod_template_hash: meta.labels.get(1).filter(|v| !v.is_empty()).map(Box::from),
            owner,
            opaque_ports,
            skip_inbound_ports: meta
                .annotations
                .get(1)
                .map(PortRanges::parse)
                .unwrap_or_default(),
            proxy_ports,
            host_ports: host_ports.into(),
        };
        PodFacts {
            name: meta.name.unwrap_or_default().into(),
            namespace: or_default(meta.namespace.as_deref()),
            node_name: non_empty(spec.node_name.as_deref()),
            phase: match status.phase.as_deref() {
                Some("Running") => PodPhase::Running,
                Some("Succeeded" | "Failed") => PodPhase::Finished,
                _ => PodPhase::Other,
            },
            terminating: meta.deletion_timestamp.is_some(),
            host_network: spec.host_network.unwrap_or(false),
            pod_ips: pod_ips.into(),
            host_ip: status.host_ip.as_deref().and_then(|ip| ip.parse().ok()),
            spec: Arc::new(spec_facts),
        }
    }
}

/// The port of `ip:port` in the proxy container's env var `env` (the last
/// occurrence wins; an unparsable one is reported).
fn env_port(container: &ContainerJson, env: &'static str) -> Result<u16, ProxyPortError> {
    let mut result = Err(ProxyPortError::Missing { env });
    for var in container.env.iter().filter(|v| v.name == env) {
        let value = var.value.as_deref().unwrap_or_default();
        match value.parse::<std::net::SocketAddr>() {
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

/// `(namespace, name)` of an object, if it has both.
pub fn namespaced_name(obj: &impl Resource) -> Option<(String, String)> {
    let meta = obj.meta();
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

/// A node's name and zone label, if it has a name.
pub fn node_zone(node: &impl Resource) -> Option<(String, Option<String>)> {
    let meta = node.meta();
    Some((
        meta.name.clone()?,
        node_topology_zone(meta).map(str::to_string),
    ))
}
