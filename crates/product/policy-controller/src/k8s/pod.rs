//! Reading a meshed pod into a [`WorkloadInfo`]: its labels, annotation
//! settings, named TCP container ports (init containers too) and HTTP
//! probe paths, decoded straight from the API's JSON ([`PodObject`], a
//! typed partial object): no `k8s-openapi` `Pod` is built on the watch
//! path, and an unmeshed pod keeps nothing.

use std::{
    collections::{BTreeMap, BTreeSet},
    num::NonZeroU16,
    sync::Arc,
};

use k8s_index::partial::{Kept, read_keys};
use k8s_openapi::{api::core::v1::Pod, apimachinery::pkg::util::intstr::IntOrString};
use serde::{Deserialize, Deserializer};

use super::workload::{
    DEFAULT_POLICY_ANNOTATION, OPAQUE_PORTS_ANNOTATION, REQUIRE_IDENTITY_ANNOTATION, Settings,
    WorkloadInfo, is_tcp, shared,
};
use crate::core::{PortSet, WorkloadKind};

/// The label of meshed pods (the only pods indexed).
pub const CONTROL_PLANE_NS_LABEL: &str = k8s_index::resources::CONTROL_PLANE_NS_LABEL;

k8s_index::partial_object! {
    /// A pod as the policy controller watches it: `metadata` reduced to name,
    /// namespace and resourceVersion, and what the index keeps (`None` for a
    /// pod that is not meshed).
    #[derive(Clone, Debug)]
    pub struct PodObject {
        /// The meshed pod's definition, the process's shared copy of it.
        pub info: Option<Arc<WorkloadInfo>>,
    }
    kind = "Pod", group = "", version = "v1", plural = "pods";
    decoded from PodJson by shared_info;
}

impl WorkloadInfo {
    /// A `k8s-openapi` pod's definition (tests, and callers holding full
    /// objects), through the same decoding as the watch's; `None` for an
    /// unmeshed pod.
    pub fn from_pod(pod: &Pod) -> Option<Arc<Self>> {
        serde_json::to_value(pod)
            .and_then(serde_json::from_value::<PodObject>)
            .ok()
            .and_then(|p| p.info)
    }
}

// ---- the JSON fields read, and only those ----

#[derive(Default, Deserialize)]
struct PodJson {
    #[serde(default)]
    metadata: MetaJson,
    #[serde(default)]
    spec: SpecJson,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct MetaJson {
    name: Option<String>,
    namespace: Option<String>,
    resource_version: Option<String>,
    /// Every label: Servers select pods by any of them.
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
    #[serde(default, deserialize_with = "read_annotations")]
    annotations: Kept,
}

/// Annotation keys read, in the order [`Settings::from_annotations`] takes them.
const ANNOTATIONS: [&str; 3] = [
    DEFAULT_POLICY_ANNOTATION,
    OPAQUE_PORTS_ANNOTATION,
    REQUIRE_IDENTITY_ANNOTATION,
];

fn read_annotations<'de, D: Deserializer<'de>>(d: D) -> Result<Kept, D::Error> {
    read_keys(d, &ANNOTATIONS)
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecJson {
    #[serde(default)]
    containers: Vec<ContainerJson>,
    #[serde(default)]
    init_containers: Vec<ContainerJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContainerJson {
    #[serde(default)]
    ports: Vec<PortJson>,
    liveness_probe: Option<ProbeJson>,
    readiness_probe: Option<ProbeJson>,
    startup_probe: Option<ProbeJson>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PortJson {
    name: Option<String>,
    container_port: i32,
    protocol: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ProbeJson {
    http_get: Option<HttpGetJson>,
}

#[derive(Deserialize)]
struct HttpGetJson {
    port: IntOrString,
    path: Option<String>,
}

impl PodJson {
    /// The meshed pod's definition, shared ([`shared`]); `None` if it is
    /// not meshed.
    fn shared_info(self) -> Option<Arc<WorkloadInfo>> {
        self.info().map(shared)
    }

    /// The meshed pod's definition; `None` if it is not meshed.
    fn info(self) -> Option<WorkloadInfo> {
        let labels = self.metadata.labels.unwrap_or_default();
        if !labels.contains_key(CONTROL_PLANE_NS_LABEL) {
            return None;
        }
        let containers: Vec<&ContainerJson> = self
            .spec
            .containers
            .iter()
            .chain(&self.spec.init_containers)
            .collect();
        let mut port_names: BTreeMap<String, PortSet> = BTreeMap::new();
        for (port, name) in containers
            .iter()
            .flat_map(|c| &c.ports)
            .filter_map(named_tcp_port)
        {
            port_names.entry(name.to_string()).or_default().insert(port);
        }
        let mut probes: BTreeMap<NonZeroU16, BTreeSet<String>> = BTreeMap::new();
        for (port, path) in containers.iter().flat_map(|c| probe_paths(c)) {
            probes.entry(port).or_default().insert(path);
        }
        let annotations: BTreeMap<String, String> = ANNOTATIONS
            .iter()
            .enumerate()
            .filter_map(|(i, key)| {
                Some((
                    key.to_string(),
                    self.metadata.annotations.get(i)?.to_string(),
                ))
            })
            .collect();
        Some(WorkloadInfo {
            kind: WorkloadKind::Pod,
            labels,
            settings: Settings::from_annotations(Some(&annotations)),
            port_names,
            probes,
        })
    }
}

fn tcp_port(port: &PortJson) -> Option<NonZeroU16> {
    if !is_tcp(port.protocol.as_deref()) {
        return None;
    }
    u16::try_from(port.container_port)
        .ok()
        .and_then(NonZeroU16::new)
}

fn named_tcp_port(port: &PortJson) -> Option<(NonZeroU16, &str)> {
    Some((tcp_port(port)?, port.name.as_deref()?))
}

/// The (port, path) of each httpGet liveness, readiness and startup probe;
/// named ports resolve among the container's own TCP ports; the query is
/// dropped and a missing path is `/`.
fn probe_paths(c: &ContainerJson) -> impl Iterator<Item = (NonZeroU16, String)> + '_ {
    [&c.liveness_probe, &c.readiness_probe, &c.startup_probe]
        .into_iter()
        .flatten()
        .filter_map(|probe| {
            let get = probe.http_get.as_ref()?;
            let port = match &get.port {
                IntOrString::Int(n) => u16::try_from(*n).ok().and_then(NonZeroU16::new)?,
                IntOrString::String(name) => {
                    c.ports
                        .iter()
                        .filter_map(named_tcp_port)
                        .find(|(_, n)| n.eq_ignore_ascii_case(name))?
                        .0
                }
            };
            let raw = get.path.as_deref().unwrap_or("/");
            match raw.parse::<http::Uri>() {
                Ok(uri) => Some((port, uri.path().to_string())),
                Err(error) => {
                    tracing::warn!(%error, path = raw, "invalid probe path");
                    None
                }
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::workload::{
        DEFAULT_POLICY_ANNOTATION, OPAQUE_PORTS_ANNOTATION, REQUIRE_IDENTITY_ANNOTATION,
    };

    #[test]
    fn pod_info_reads_ports_probes_and_annotations() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns",
                "labels": {"app": "web", "linkerd.io/control-plane-ns": "linkerd"},
                "annotations": {
                    DEFAULT_POLICY_ANNOTATION: "bogus",
                    OPAQUE_PORTS_ANNOTATION: "3306,4000-4001",
                    REQUIRE_IDENTITY_ANNOTATION: "not-a-list"
                }
            },
            "spec": {
                "containers": [{
                    "name": "app",
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "admin", "containerPort": 9990},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                        {"containerPort": 7000}
                    ],
                    "livenessProbe": {"httpGet": {"port": "admin", "path": "/live?verbose=1"}},
                    "readinessProbe": {"httpGet": {"port": 9990, "path": "/ready"}},
                    "startupProbe": {"tcpSocket": {"port": 8080}}
                }, {
                    "name": "other",
                    "ports": [{"name": "http", "containerPort": 8081}],
                    "livenessProbe": {"httpGet": {"port": "admin"}}
                }],
                "initContainers": [{
                    "name": "init",
                    "ports": [{"name": "http", "containerPort": 8082}],
                    "readinessProbe": {"httpGet": {"port": 8082}}
                }]
            }
        }))
        .expect("pod");
        let info = WorkloadInfo::from_pod(&pod).expect("a meshed pod");
        assert_eq!(info.kind, WorkloadKind::Pod);
        let p = |n| NonZeroU16::new(n).expect("nonzero");
        assert_eq!(
            info.port_names["http"],
            [p(8080), p(8081), p(8082)].into_iter().collect()
        );
        assert!(!info.port_names.contains_key("dns"));
        assert_eq!(info.port_names.len(), 2);
        // "admin" does not resolve in the "other" container.
        assert_eq!(
            info.probes,
            [
                (p(8082), ["/".to_string()].into_iter().collect()),
                (
                    p(9990),
                    ["/live".to_string(), "/ready".to_string()]
                        .into_iter()
                        .collect()
                ),
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(info.settings.default_policy, None);
        assert_eq!(
            info.settings.opaque_ports,
            [p(3306), p(4000), p(4001)].into_iter().collect()
        );
        assert!(info.settings.require_identity_ports.is_empty());
    }

    #[test]
    fn pods_of_one_template_share_one_definition_from_decoding() {
        // Two pods of one ReplicaSet differ in name only; a third in labels.
        let pod = |name: &str, app: &str| -> PodObject {
            serde_json::from_value(serde_json::json!({
                "metadata": {
                    "name": name, "namespace": "shared-decoding",
                    "labels": {"app": app, "linkerd.io/control-plane-ns": "linkerd"}
                },
                "spec": {"containers": [{"name": "app", "ports": [{"containerPort": 8080}]}]}
            }))
            .expect("pod")
        };
        let (a, b, c) = (pod("a", "web"), pod("b", "web"), pod("c", "db"));
        let info = |p: &PodObject| p.info.clone().expect("a meshed pod");
        assert!(Arc::ptr_eq(&info(&a), &info(&b)));
        assert!(!Arc::ptr_eq(&info(&a), &info(&c)));
    }
}
