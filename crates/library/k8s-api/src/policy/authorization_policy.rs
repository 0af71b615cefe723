//! `AuthorizationPolicy` (`policy.linkerd.io/v1alpha1`): authorizes clients
//! that satisfy all required authentications to a Server, a Namespace's
//! Servers, or an HTTPRoute.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::target_ref::{LocalTargetRef, NamespacedTargetRef, names_required};

/// Authorizes clients to a target.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1alpha1",
    kind = "AuthorizationPolicy",
    namespaced,
    shortname = "authzpolicy"
)]
#[serde(rename_all = "camelCase")]
pub struct AuthorizationPolicySpec {
    pub target_ref: LocalTargetRef,
    /// Required: an empty list authorizes every client. Each entry names
    /// its referent.
    #[schemars(transform = names_required)]
    pub required_authentication_refs: Vec<NamespacedTargetRef>,
}
