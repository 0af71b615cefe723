//! The CRD manifests Meridian generates from its Rust types, and how they
//! are rendered into `deploy/crds/`. `cargo xtask gen-crds` writes them; a
//! test fails when a file differs from what the types generate.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::policy;

/// (file name under `deploy/crds/`, CRD) for every generated CRD.
pub fn generated() -> Vec<(String, CustomResourceDefinition)> {
    [
        policy::Server::crd(),
        policy::ServerAuthorization::crd(),
        policy::AuthorizationPolicy::crd(),
        policy::MeshTLSAuthentication::crd(),
        policy::NetworkAuthentication::crd(),
        policy::HTTPRoute::crd(),
    ]
    .into_iter()
    .map(|crd| {
        let file = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
        (file, crd)
    })
    .collect()
}

/// Errors rendering a CRD.
pub type RenderError = serde_yaml::Error;

/// The YAML text of a CRD as written to `deploy/crds/`.
pub fn render(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    let yaml = serde_yaml::to_string(crd)?;
    Ok(format!(
        "# Generated from the Rust types in crates/k8s-api by `cargo xtask gen-crds`; do not edit.\n{yaml}"
    ))
}
