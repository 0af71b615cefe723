//! `ExternalWorkload` (`workload.linkerd.io/v1beta1`, `v1alpha1` still
//! served): a workload outside the cluster (a VM, say) enrolled in the
//! mesh, with its mesh TLS identity, its ports and its addresses. The
//! bounds the apiserver enforces (lengths, port range, at most two
//! addresses, condition shapes) are written on the fields; the `v1alpha1`
//! schema, which spells `meshTls` and allows one address, is derived from
//! this one in [`crate::crds`].

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of ExternalWorkloads.
pub const GROUP: &str = "workload.linkerd.io";

/// The pattern of a condition type (`CamelCase` or
/// `example.com/CamelCase`), as for Kubernetes conditions.
const CONDITION_TYPE_PATTERN: &str = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$";
/// The pattern of a condition reason (one CamelCase word).
const CONDITION_REASON_PATTERN: &str = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$";

/// A workload outside the cluster, enrolled in the mesh.
#[derive(Clone, Debug, PartialEq, Eq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "workload.linkerd.io",
    version = "v1beta1",
    kind = "ExternalWorkload",
    namespaced,
    status = "ExternalWorkloadStatus",
    category = "external",
    printcolumn = r#"{"name": "Identity", "type": "string", "jsonPath": ".spec.meshTLS.identity"}"#,
    printcolumn = r#"{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ExternalWorkloadSpec {
    /// The workload's mesh TLS settings.
    #[serde(rename = "meshTLS")]
    pub mesh_tls: MeshTls,
    /// The ports the workload exposes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<PortSpec>>,
    /// Where to send the workload traffic: one address, or one IPv4 and one
    /// IPv6 address.
    #[serde(
        default,
        rename = "workloadIPs",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(max = 2))]
    pub workload_ips: Option<Vec<WorkloadIp>>,
}

/// The identity peers verify, and the name the workload terminates TLS as.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeshTls {
    /// The identity in the workload's certificate.
    #[schemars(length(min = 1, max = 253))]
    pub identity: String,
    /// The workload's DNS name, matched against the SNI.
    #[schemars(length(min = 1, max = 253))]
    pub server_name: String,
}

/// One port of the workload.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortSpec {
    /// An IANA service name, unique among the workload's ports; Services
    /// may refer to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The port number.
    #[schemars(range(min = 1, max = 65535))]
    pub port: u16,
    /// `TCP` (the default) or `UDP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "TCP"))]
    pub protocol: Option<String>,
}

/// One address of the workload.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct WorkloadIp {
    pub ip: String,
}

/// What is known of the workload's health.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub struct ExternalWorkloadStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<WorkloadCondition>,
}

/// One condition of the workload (`Ready`, for instance).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadCondition {
    /// The condition's type.
    #[serde(rename = "type")]
    #[schemars(length(max = 316), regex(pattern = CONDITION_TYPE_PATTERN))]
    pub type_: String,
    pub status: ConditionStatus,
    /// When the status last changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
    /// When the workload's health was last probed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// Why the status last changed, in one CamelCase word.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = CONDITION_REASON_PATTERN))]
    pub reason: Option<String>,
    /// Details for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32768))]
    pub message: Option<String>,
}

/// A condition's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_chart_documents() {
        let wl: ExternalWorkload = serde_json::from_value(serde_json::json!({
            "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
            "metadata": {"name": "vm", "namespace": "ns"},
            "spec": {
                "meshTLS": {"identity": "vm.ns.serviceaccount.identity.linkerd.cluster.local", "serverName": "vm.ns.cluster.local"},
                "ports": [{"name": "http", "port": 8080}],
                "workloadIPs": [{"ip": "192.0.2.10"}]
            },
            "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "Probed"}]}
        }))
        .expect("external workload");
        assert_eq!(wl.spec.mesh_tls.server_name, "vm.ns.cluster.local");
        assert_eq!(wl.spec.ports.as_deref().map(<[_]>::len), Some(1));
        let status = wl.status.expect("status");
        assert_eq!(status.conditions[0].status, ConditionStatus::True);
    }
}
