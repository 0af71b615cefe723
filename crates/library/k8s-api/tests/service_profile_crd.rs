//! Checks that `deploy/crds/serviceprofiles.yaml` describes exactly the
//! fields of the Rust `ServiceProfile` types: for every served version, the
//! property paths, their types, `required` lists and the preserve-unknown /
//! int-or-string markers must equal what `ServiceProfile::crd()` generates.
//! Descriptions and number formats are free to differ.

use std::collections::BTreeMap;

use k8s_api::service_profile::ServiceProfile;
use kube::CustomResourceExt;
use serde_json::Value;

const CRD_PATH: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../deploy/crds/serviceprofiles.yaml"
);

/// One line per schema node: `path -> type [required] [markers]`.
fn flatten(schema: &Value, path: &str, out: &mut BTreeMap<String, String>) {
    let mut desc = Vec::new();
    match schema.get("type").and_then(Value::as_str) {
        Some(t) => desc.push(t.to_string()),
        None if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) => {
            desc.push("int-or-string".into())
        }
        None => desc.push("<untyped>".into()),
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        let mut names: Vec<&str> = required.iter().filter_map(Value::as_str).collect();
        names.sort_unstable();
        desc.push(format!("required={names:?}"));
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        desc.push("preserve-unknown".into());
    }
    if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
        desc.push(format!("pattern={pattern}"));
    }
    out.insert(path.to_string(), desc.join(" "));
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            flatten(sub, &format!("{path}.{name}"), out);
        }
    }
    if let Some(items) = schema.get("items") {
        flatten(items, &format!("{path}[]"), out);
    }
}

fn version_schema(crd: &Value, version: &str) -> Value {
    crd["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["name"] == version)
        .unwrap_or_else(|| panic!("version {version} missing"))
        .clone()
}

fn spec_paths(version: &Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    flatten(
        &version["schema"]["openAPIV3Schema"]["properties"]["spec"],
        "spec",
        &mut out,
    );
    out
}

fn manifest() -> Value {
    let text = std::fs::read_to_string(CRD_PATH).expect("reading the CRD manifest");
    serde_yaml::from_str(&text).expect("parsing the CRD manifest")
}

fn generated() -> Value {
    serde_json::to_value(ServiceProfile::crd()).expect("generated CRD")
}

fn assert_same(expected: &BTreeMap<String, String>, actual: &BTreeMap<String, String>) {
    let mut diffs = Vec::new();
    for (path, want) in expected {
        match actual.get(path) {
            Some(got) if got == want => {}
            Some(got) => diffs.push(format!("{path}: generated `{want}`, manifest `{got}`")),
            None => diffs.push(format!("{path}: missing from the manifest")),
        }
    }
    for path in actual.keys().filter(|p| !expected.contains_key(*p)) {
        diffs.push(format!("{path}: not in the Rust types"));
    }
    assert!(
        diffs.is_empty(),
        "CRD and types differ:\n{}",
        diffs.join("\n")
    );
}

#[test]
fn v1alpha2_matches_the_rust_types() {
    let manifest = manifest();
    let generated = generated();
    let want = spec_paths(&version_schema(&generated, "v1alpha2"));
    let got = spec_paths(&version_schema(&manifest, "v1alpha2"));
    assert_same(&want, &got);
}

#[test]
fn v1alpha1_differs_only_by_required_routes() {
    let manifest = manifest();
    let generated = generated();
    let mut want = spec_paths(&version_schema(&generated, "v1alpha2"));
    let spec = want.get_mut("spec").expect("spec node");
    assert_eq!(spec, "object", "the generated spec requires nothing");
    *spec = "object required=[\"routes\"]".into();
    let got = spec_paths(&version_schema(&manifest, "v1alpha1"));
    assert_same(&want, &got);
}

#[test]
fn names_and_versions() {
    let manifest = manifest();
    let generated = generated();
    assert_eq!(manifest["metadata"]["name"], ServiceProfile::CRD_NAME);
    assert_eq!(generated["metadata"]["name"], ServiceProfile::CRD_NAME);
    for key in ["group", "scope"] {
        assert_eq!(manifest["spec"][key], generated["spec"][key], "{key}");
    }
    for key in ["kind", "plural", "shortNames"] {
        assert_eq!(
            manifest["spec"]["names"][key], generated["spec"]["names"][key],
            "{key}"
        );
    }
    let served: Vec<(String, bool, bool)> = manifest["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .map(|v| {
            (
                v["name"].as_str().unwrap_or_default().to_string(),
                v["served"] == true,
                v["storage"] == true,
            )
        })
        .collect();
    assert_eq!(
        served,
        vec![
            ("v1alpha1".to_string(), true, false),
            ("v1alpha2".to_string(), true, true)
        ]
    );
}

#[test]
fn route_level_not_is_an_object() {
    let manifest = manifest();
    for version in ["v1alpha1", "v1alpha2"] {
        let paths = spec_paths(&version_schema(&manifest, version));
        assert_eq!(
            paths.get("spec.routes[].condition.not").map(String::as_str),
            Some("object preserve-unknown"),
            "{version}"
        );
    }
}

/// The comparison itself must be able to fail.
#[test]
fn a_drifted_manifest_is_detected() {
    let mut manifest = manifest();
    manifest["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["routes"]["items"]["properties"]["condition"]["properties"]["not"] =
        serde_json::json!({"type": "array", "items": {"type": "object"}});
    let generated = generated();
    let want = spec_paths(&version_schema(&generated, "v1alpha2"));
    let got = spec_paths(&version_schema(&manifest, "v1alpha2"));
    let result = std::panic::catch_unwind(|| assert_same(&want, &got));
    assert!(result.is_err(), "a changed manifest must not compare equal");
}

/// Sample objects in both versions deserialize into the Rust types.
#[test]
fn samples_deserialize() {
    for version in ["v1alpha1", "v1alpha2"] {
        let sample = serde_json::json!({
            "apiVersion": format!("linkerd.io/{version}"),
            "kind": "ServiceProfile",
            "metadata": {"name": "web.ns.svc.cluster.local", "namespace": "ns"},
            "spec": {
                "routes": [{
                    "name": "r",
                    "condition": {"all": [{"method": "GET"}], "not": {"pathRegex": "/x"}},
                    "responseClasses": [{"condition": {"any": [{"status": {"min": 500}}]}}],
                }],
                "dstOverrides": [{"authority": "web-v2.ns.svc.cluster.local:80", "weight": "500m"}],
            },
        });
        let profile: ServiceProfile = serde_json::from_value(sample).expect(version);
        assert_eq!(profile.spec.routes.len(), 1);
    }
}
