//! `MeshTLSAuthentication` and `NetworkAuthentication`
//! (`policy.linkerd.io/v1alpha1`): reusable client authentications that
//! AuthorizationPolicies require.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::target_ref::NamespacedTargetRef;

/// Clients authenticated by mesh TLS identities.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1alpha1",
    kind = "MeshTLSAuthentication",
    namespaced,
    shortname = "meshtlsauthn"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{"required": ["identities"]}, {"required": ["identityRefs"]}]))]
pub struct MeshTlsAuthenticationSpec {
    /// Identity strings; `*` and `*.suffix` match many. Exactly one of
    /// `identities` and `identityRefs` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub identities: Option<Vec<String>>,
    /// ServiceAccount or Namespace references.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub identity_refs: Option<Vec<NamespacedTargetRef>>,
}

/// Clients authenticated by their source network.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1alpha1",
    kind = "NetworkAuthentication",
    namespaced,
    shortname = "netauthn"
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkAuthenticationSpec {
    pub networks: Vec<Network>,
}

/// A CIDR with optional exclusions.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Network {
    pub cidr: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub except: Option<Vec<String>>,
}

/// Kubernetes type aliases with the names the CRDs use.
pub type MeshTlsAuthentication = MeshTLSAuthentication;
