//! The CRD manifests Meridian generates from its Rust types, and how they
//! are rendered into `deploy/crds/`. `cargo xtask gen-crds` writes them; a
//! test fails when a file differs from what the types generate.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion, JSON, JSONSchemaProps,
    JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::{policy, workload};

/// (file name under `deploy/crds/`, CRD) for every generated CRD.
pub fn generated() -> Vec<(String, CustomResourceDefinition)> {
    [
        policy::Server::crd(),
        policy::ServerAuthorization::crd(),
        policy::AuthorizationPolicy::crd(),
        policy::MeshTLSAuthentication::crd(),
        policy::NetworkAuthentication::crd(),
        policy::HTTPRoute::crd(),
        policy::HTTPLocalRateLimitPolicy::crd(),
        policy::EgressNetwork::crd(),
        workload::ExternalWorkload::crd(),
    ]
    .into_iter()
    .map(|mut crd| {
        add_older_versions(&mut crd);
        for version in &mut crd.spec.versions {
            if let Some(schema) = version
                .schema
                .as_mut()
                .and_then(|s| s.open_api_v3_schema.as_mut())
            {
                for_each_schema(schema, &mut |s| {
                    drop_unsigned_formats(s);
                    enumerate_selector_operators(s);
                });
            }
        }
        let file = format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural);
        (file, crd)
    })
    .collect()
}

/// Versions the original also serves, besides the storage version our
/// types describe, and whether each is deprecated. They share the storage
/// version's schema (no conversion webhook: the apiserver only rewrites
/// `apiVersion`), so manifests written against them keep applying.
fn older_versions(plural: &str) -> &'static [(&'static str, bool)] {
    match plural {
        "servers" => &[("v1alpha1", true), ("v1beta1", true), ("v1beta2", false)],
        "serverauthorizations" => &[("v1alpha1", true)],
        "httproutes" => &[("v1alpha1", false), ("v1beta1", false), ("v1beta2", false)],
        "externalworkloads" => &[("v1alpha1", false)],
        _ => &[],
    }
}

/// Where an older version's schema differs from the storage version's:
/// ExternalWorkload `v1alpha1` spells `meshTls`, allows one workload
/// address and has no status subresource, as the original's chart says.
fn adapt_older_version(plural: &str, version: &mut CustomResourceDefinitionVersion) {
    if (plural, version.name.as_str()) != ("externalworkloads", "v1alpha1") {
        return;
    }
    version.subresources = None;
    let Some(spec) = version
        .schema
        .as_mut()
        .and_then(|s| s.open_api_v3_schema.as_mut())
        .and_then(|s| s.properties.as_mut())
        .and_then(|p| p.get_mut("spec"))
    else {
        return;
    };
    if let Some(props) = spec.properties.as_mut() {
        if let Some(mesh_tls) = props.remove("meshTLS") {
            props.insert("meshTls".to_string(), mesh_tls);
        }
        if let Some(ips) = props.get_mut("workloadIPs") {
            ips.max_items = Some(1);
        }
    }
    for field in spec.required.iter_mut().flatten() {
        if field == "meshTLS" {
            *field = "meshTls".to_string();
        }
    }
    if let Some(columns) = version.additional_printer_columns.as_mut() {
        for column in columns {
            if column.json_path == ".spec.meshTLS.identity" {
                column.json_path = ".spec.meshTls.identity".to_string();
            }
        }
    }
}

fn add_older_versions(crd: &mut CustomResourceDefinition) {
    let Some(storage) = crd.spec.versions.iter().find(|v| v.storage).cloned() else {
        return;
    };
    let mut versions: Vec<_> = older_versions(&crd.spec.names.plural)
        .iter()
        .map(|(name, deprecated)| {
            let mut version = storage.clone();
            version.name = (*name).to_string();
            version.storage = false;
            if *deprecated {
                version.deprecated = Some(true);
                version.deprecation_warning = Some(format!(
                    "{}/{name} {} is deprecated; use {}/{}",
                    crd.spec.group, crd.spec.names.kind, crd.spec.group, storage.name
                ));
            }
            adapt_older_version(&crd.spec.names.plural, &mut version);
            version
        })
        .collect();
    versions.append(&mut crd.spec.versions);
    crd.spec.versions = versions;
}

/// Removes `format: uint16` and the like, which schemars emits for unsigned
/// integers but Kubernetes does not know (it warns on apply). Bounds stay
/// enforced by deserialization.
fn drop_unsigned_formats(schema: &mut JSONSchemaProps) {
    if schema
        .format
        .as_deref()
        .is_some_and(|f| f.starts_with("uint"))
    {
        schema.format = None;
    }
}

/// The operators a label selector's `matchExpressions` may use: the
/// selector type comes from k8s-openapi, so its schema says only "string".
fn enumerate_selector_operators(schema: &mut JSONSchemaProps) {
    let operator = schema
        .properties
        .as_mut()
        .and_then(|p| p.get_mut("matchExpressions"))
        .and_then(|m| match m.items.as_mut() {
            Some(JSONSchemaPropsOrArray::Schema(items)) => items.properties.as_mut(),
            _ => None,
        })
        .and_then(|p| p.get_mut("operator"));
    if let Some(operator) = operator {
        operator.enum_ = Some(
            ["In", "NotIn", "Exists", "DoesNotExist"]
                .into_iter()
                .map(|op| JSON(serde_json::Value::from(op)))
                .collect(),
        );
    }
}

/// Applies `f` to `schema` and every schema under it.
fn for_each_schema(schema: &mut JSONSchemaProps, f: &mut impl FnMut(&mut JSONSchemaProps)) {
    f(schema);
    let children = schema
        .properties
        .iter_mut()
        .flat_map(|p| p.values_mut())
        .chain(schema.items.iter_mut().filter_map(|items| match items {
            JSONSchemaPropsOrArray::Schema(s) => Some(s.as_mut()),
            JSONSchemaPropsOrArray::Schemas(_) => None,
        }))
        .chain(
            schema
                .additional_properties
                .iter_mut()
                .filter_map(|a| match a {
                    JSONSchemaPropsOrBool::Schema(s) => Some(s.as_mut()),
                    JSONSchemaPropsOrBool::Bool(_) => None,
                }),
        );
    for child in children {
        for_each_schema(child, f);
    }
}

/// Errors rendering a CRD.
pub type RenderError = serde_yaml::Error;

/// The YAML text of a CRD as written to `deploy/crds/`.
pub fn render(crd: &CustomResourceDefinition) -> Result<String, RenderError> {
    let yaml = serde_yaml::to_string(crd)?;
    Ok(format!(
        "# Generated from the Rust types in crates/library/k8s-api by `cargo xtask gen-crds`; do not edit.\n{yaml}"
    ))
}
