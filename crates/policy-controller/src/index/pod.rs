//! Reading a meshed pod into a [`WorkloadInfo`]: its labels, annotation
//! settings, named TCP container ports (init containers too) and HTTP
//! probe paths.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    num::NonZeroU16,
};

use k8s_openapi::{
    api::core::v1::{Container, ContainerPort, Pod},
    apimachinery::pkg::util::intstr::IntOrString,
};

use super::workload::{Settings, WorkloadInfo, is_tcp};
use crate::core::{PortSet, WorkloadKind};

impl WorkloadInfo {
    pub fn from_pod(pod: &Pod) -> Self {
        let containers: Vec<&Container> = pod
            .spec
            .iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .collect();
        let mut port_names: HashMap<String, PortSet> = HashMap::new();
        for (port, name) in containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(named_tcp_port)
        {
            port_names.entry(name.to_string()).or_default().insert(port);
        }
        let mut probes: BTreeMap<NonZeroU16, BTreeSet<String>> = BTreeMap::new();
        for (port, path) in containers.iter().flat_map(|c| probe_paths(c)) {
            probes.entry(port).or_default().insert(path);
        }
        Self {
            kind: WorkloadKind::Pod,
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            settings: Settings::from_annotations(pod.metadata.annotations.as_ref()),
            port_names,
            probes,
        }
    }
}

fn tcp_port(port: &ContainerPort) -> Option<NonZeroU16> {
    if !is_tcp(port.protocol.as_deref()) {
        return None;
    }
    u16::try_from(port.container_port)
        .ok()
        .and_then(NonZeroU16::new)
}

fn named_tcp_port(port: &ContainerPort) -> Option<(NonZeroU16, &str)> {
    Some((tcp_port(port)?, port.name.as_deref()?))
}

/// The (port, path) of each httpGet liveness, readiness and startup probe;
/// named ports resolve among the container's own TCP ports; the query is
/// dropped and a missing path is `/`.
fn probe_paths(c: &Container) -> impl Iterator<Item = (NonZeroU16, String)> + '_ {
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
                        .flatten()
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
    use crate::index::workload::{
        DEFAULT_POLICY_ANNOTATION, OPAQUE_PORTS_ANNOTATION, REQUIRE_IDENTITY_ANNOTATION,
    };

    #[test]
    fn pod_info_reads_ports_probes_and_annotations() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns",
                "labels": {"app": "web"},
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
        let info = WorkloadInfo::from_pod(&pod);
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
}
