//! Which version of a Gateway API route kind to watch, from its
//! CustomResourceDefinition: the first of the kind's readable versions
//! ([`k8s_api::gateway::GatewayRoute::VERSIONS`]) that the CRD serves, once
//! the CRD is established. Pure, so every case is a unit test.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

/// What the controller should do about one route kind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selection {
    /// No CRD, or one not established yet: the kind is not watched.
    Absent,
    /// Watch the kind at this version.
    Serve(String),
    /// The CRD serves only versions Meridian cannot read (listed): the
    /// kind is not watched.
    Unsupported(Vec<String>),
}

/// The versions `crd` serves, in its declared order.
pub fn served_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.spec
        .versions
        .iter()
        .filter(|v| v.served)
        .map(|v| v.name.clone())
        .collect()
}

/// Whether the API server reports the CRD `Established=True` (its
/// resources can be listed and watched).
pub fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Established" && c.status == "True")
}

/// The version to watch given the kind's CRD (if any) and the versions
/// Meridian reads, most preferred first.
pub fn select(crd: Option<&CustomResourceDefinition>, supported: &[&str]) -> Selection {
    let Some(crd) = crd.filter(|crd| is_established(crd)) else {
        return Selection::Absent;
    };
    let served = served_versions(crd);
    match supported
        .iter()
        .find(|version| served.iter().any(|s| s == *version))
    {
        Some(version) => Selection::Serve(version.to_string()),
        None => Selection::Unsupported(served),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(versions: &[(&str, bool)], established: bool) -> CustomResourceDefinition {
        let versions: Vec<_> = versions
            .iter()
            .map(|(name, served)| serde_json::json!({"name": name, "served": served, "storage": false}))
            .collect();
        let status = if established { "True" } else { "False" };
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "httproutes.gateway.networking.k8s.io"},
            "spec": {
                "group": "gateway.networking.k8s.io",
                "names": {"kind": "HTTPRoute", "plural": "httproutes"},
                "scope": "Namespaced",
                "versions": versions,
            },
            "status": {"conditions": [{"type": "Established", "status": status}]}
        }))
        .expect("a CRD")
    }

    const HTTP: &[&str] = &["v1", "v1beta1"];

    #[test]
    fn the_most_preferred_served_version_wins() {
        let both = crd(&[("v1beta1", true), ("v1", true)], true);
        assert_eq!(select(Some(&both), HTTP), Selection::Serve("v1".into()));
        let old = crd(&[("v1beta1", true), ("v1", false)], true);
        assert_eq!(select(Some(&old), HTTP), Selection::Serve("v1beta1".into()));
    }

    #[test]
    fn missing_or_unestablished_crds_are_absent() {
        assert_eq!(select(None, HTTP), Selection::Absent);
        let pending = crd(&[("v1", true)], false);
        assert_eq!(select(Some(&pending), HTTP), Selection::Absent);
    }

    #[test]
    fn only_unreadable_versions_are_unsupported() {
        let future = crd(&[("v2", true), ("v1", false)], true);
        assert_eq!(
            select(Some(&future), HTTP),
            Selection::Unsupported(vec!["v2".into()])
        );
    }
}
