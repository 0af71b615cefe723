//! Reading an `ExternalWorkload` into a [`WorkloadInfo`]: its labels, the
//! same annotation settings as a pod's, and its named TCP ports (names are
//! unique on an external workload). External workloads have no probes.

use std::{collections::BTreeMap, num::NonZeroU16};

use k8s_api::workload::ExternalWorkload;

use super::workload::{Settings, WorkloadInfo, is_tcp};
use crate::core::{PortSet, WorkloadKind};

impl WorkloadInfo {
    pub fn from_external_workload(ew: &ExternalWorkload) -> Self {
        let port_names: BTreeMap<String, PortSet> = ew
            .spec
            .ports
            .iter()
            .flatten()
            .filter(|p| is_tcp(p.protocol.as_deref()))
            .filter_map(|p| Some((p.name.clone()?, NonZeroU16::new(p.port)?)))
            .map(|(name, port)| (name, PortSet::from([port])))
            .collect();
        Self {
            kind: WorkloadKind::External,
            labels: ew.metadata.labels.clone().unwrap_or_default(),
            settings: Settings::from_annotations(ew.metadata.annotations.as_ref()),
            port_names,
            probes: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::workload::{OPAQUE_PORTS_ANNOTATION, REQUIRE_IDENTITY_ANNOTATION};

    #[test]
    fn reads_named_tcp_ports_labels_and_annotations() {
        let ew: ExternalWorkload = serde_json::from_value(serde_json::json!({
            "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
            "metadata": {
                "name": "vm", "namespace": "ns",
                "labels": {"app": "legacy"},
                "annotations": {
                    OPAQUE_PORTS_ANNOTATION: "3306",
                    REQUIRE_IDENTITY_ANNOTATION: "8443",
                    crate::k8s::workload::DEFAULT_POLICY_ANNOTATION: "deny"
                }
            },
            "spec": {
                "meshTLS": {"identity": "vm.ns.serviceaccount.identity.linkerd.cluster.local", "serverName": "vm.ns.cluster.local"},
                "ports": [
                    {"name": "http", "port": 8080},
                    {"name": "mysql", "port": 3306, "protocol": "tcp"},
                    {"name": "dns", "port": 53, "protocol": "UDP"},
                    {"port": 9000}
                ]
            }
        }))
        .expect("external workload");
        let info = WorkloadInfo::from_external_workload(&ew);
        let p = |n| NonZeroU16::new(n).expect("nonzero");
        assert_eq!(info.kind, WorkloadKind::External);
        assert_eq!(info.labels["app"], "legacy");
        assert_eq!(
            info.port_names,
            [
                ("http".to_string(), PortSet::from([p(8080)])),
                ("mysql".to_string(), PortSet::from([p(3306)])),
            ]
            .into_iter()
            .collect()
        );
        assert!(info.probes.is_empty());
        assert_eq!(
            info.settings,
            Settings {
                default_policy: Some(crate::core::DefaultPolicy::Deny),
                opaque_ports: PortSet::from([p(3306)]),
                require_identity_ports: PortSet::from([p(8443)]),
            }
        );
    }
}
