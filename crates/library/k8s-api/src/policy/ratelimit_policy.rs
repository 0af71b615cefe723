//! `HTTPLocalRateLimitPolicy` (`policy.linkerd.io/v1alpha1`): request rate
//! limits a Server's proxies enforce locally, overall, per client identity,
//! and for named clients.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::target_ref::{LocalTargetRef, NamespacedTargetRef};

/// Rate limits of the inbound HTTP traffic of one Server.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1alpha1",
    kind = "HTTPLocalRateLimitPolicy",
    namespaced,
    status = "HttpLocalRateLimitPolicyStatus",
    printcolumn = r#"{"name":"Target_kind","type":"string","description":"The kind of the resource the limit applies to","jsonPath":".spec.targetRef.kind"}"#,
    printcolumn = r#"{"name":"Target_name","type":"string","description":"The name of the resource the limit applies to","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"Total_RPS","type":"integer","format":"int32","description":"The overall limit","jsonPath":".spec.total.requestsPerSecond"}"#,
    printcolumn = r#"{"name":"Identity_RPS","type":"integer","format":"int32","description":"The limit per client identity","jsonPath":".spec.identity.requestsPerSecond"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct HttpLocalRateLimitPolicySpec {
    /// The resource limited; only a Server is supported.
    pub target_ref: LocalTargetRef,
    /// The limit of all requests together (none when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<Limit>,
    /// The limit of each client identity (at most `total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<Limit>,
    /// Limits for the requests of specific clients (each at most `total`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<Vec<Override>>,
}

/// A rate.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Limit {
    pub requests_per_second: u32,
}

/// A limit for the clients of the given references (ServiceAccounts).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Override {
    pub requests_per_second: u32,
    pub client_refs: Vec<NamespacedTargetRef>,
}

/// What the policy controller says of a policy: `Accepted`, and the
/// target it was evaluated against.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HttpLocalRateLimitPolicyStatus {
    #[serde(default)]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_ref: Option<LocalTargetRef>,
}

/// The type alias with the Rust-style name.
pub type HttpLocalRateLimitPolicy = HTTPLocalRateLimitPolicy;
