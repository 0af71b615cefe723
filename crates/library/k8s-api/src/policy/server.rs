//! `Server` (`policy.linkerd.io/v1beta3`): selects a port on a set of pods
//! and says which protocol it speaks and which default access applies.

use k8s_openapi::apimachinery::pkg::{apis::meta::v1::LabelSelector, util::intstr::IntOrString};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A port on the pods a selector picks.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1beta3",
    kind = "Server",
    namespaced,
    shortname = "srv",
    printcolumn = r#"{"name": "Port", "type": "string", "jsonPath": ".spec.port"}"#,
    printcolumn = r#"{"name": "Protocol", "type": "string", "jsonPath": ".spec.proxyProtocol"}"#,
    printcolumn = r#"{"name": "Access Policy", "type": "string", "jsonPath": ".spec.accessPolicy"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{"required": ["podSelector"]}, {"required": ["externalWorkloadSelector"]}]))]
pub struct ServerSpec {
    /// Pods this Server applies to (an empty selector selects all pods).
    /// Exactly one of `podSelector` and `externalWorkloadSelector` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_selector: Option<LabelSelector>,
    /// External workloads this Server applies to (instead of pods).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_workload_selector: Option<LabelSelector>,
    /// A port number, or a container port name.
    pub port: IntOrString,
    /// The protocol clients speak on the port (default: `unknown`, detect).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "unknown"))]
    pub proxy_protocol: Option<ProxyProtocol>,
    /// Default policy for clients no authorization matches (default: deny).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "deny"))]
    pub access_policy: Option<String>,
}

/// The protocol a Server declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum ProxyProtocol {
    #[serde(rename = "unknown")]
    Unknown,
    #[serde(rename = "HTTP/1")]
    Http1,
    #[serde(rename = "HTTP/2")]
    Http2,
    #[serde(rename = "gRPC")]
    Grpc,
    #[serde(rename = "opaque")]
    Opaque,
    #[serde(rename = "TLS")]
    Tls,
}
