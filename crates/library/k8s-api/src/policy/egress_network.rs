//! `EgressNetwork` (`policy.linkerd.io/v1alpha1`): a set of addresses
//! outside the cluster that outbound policy applies to, and whether
//! traffic no route describes is allowed there.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::network::Network;

/// Egress destinations, by network.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1alpha1",
    kind = "EgressNetwork",
    namespaced,
    status = "EgressNetworkStatus",
    category = "policy"
)]
#[serde(rename_all = "camelCase")]
pub struct EgressNetworkSpec {
    /// The networks captured; unset means everything outside the cluster
    /// networks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<Network>>,
    /// What happens to traffic that no attached route describes.
    pub traffic_policy: TrafficPolicy,
}

/// The fate of traffic no route describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
pub enum TrafficPolicy {
    /// Forwarded to its original destination.
    Allow,
    /// Refused.
    Deny,
}

/// What the policy controller says of an EgressNetwork (`Accepted`).
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
pub struct EgressNetworkStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
}
