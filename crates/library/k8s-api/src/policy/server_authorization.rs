//! `ServerAuthorization` (`policy.linkerd.io/v1beta1`): the older way to
//! allow clients (by network, identity or service account) to Servers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::network::Network;

/// Authorizes clients to access the Servers it selects.
#[derive(Clone, Debug, PartialEq, CustomResource, Deserialize, Serialize, JsonSchema)]
#[kube(
    group = "policy.linkerd.io",
    version = "v1beta1",
    kind = "ServerAuthorization",
    namespaced,
    shortname = "saz"
)]
#[serde(rename_all = "camelCase")]
pub struct ServerAuthorizationSpec {
    pub server: ServerSelector,
    pub client: Client,
}

/// A DNS label: a Server or ServiceAccount name, a namespace.
const DNS_LABEL_PATTERN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// A mesh identity: DNS-like labels, the first one possibly `*`.
const IDENTITY_PATTERN: &str =
    r"^(\*|[a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Selects Servers by name or by their labels (exactly one of the two).
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("oneOf" = [{"required": ["name"]}, {"required": ["selector"]}]))]
pub struct ServerSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DNS_LABEL_PATTERN))]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
}

/// Which clients are authorized.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Client {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networks: Option<Vec<Network>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unauthenticated: Option<bool>,
    #[serde(default, rename = "meshTLS", skip_serializing_if = "Option::is_none")]
    pub mesh_tls: Option<MeshTls>,
}

/// Mesh TLS requirements of a client.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MeshTls {
    #[serde(
        default,
        rename = "unauthenticatedTLS",
        skip_serializing_if = "Option::is_none"
    )]
    pub unauthenticated_tls: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(regex(pattern = IDENTITY_PATTERN)))]
    pub identities: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_accounts: Option<Vec<ServiceAccountRef>>,
}

/// A service account, in the authorization's namespace unless given.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceAccountRef {
    #[schemars(regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DNS_LABEL_PATTERN))]
    pub namespace: Option<String>,
}
