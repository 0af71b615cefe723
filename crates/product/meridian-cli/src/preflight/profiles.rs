//! ServiceProfiles Meridian's sp-validator webhook would refuse: each
//! object, as the API server stores it, goes through the webhook's own
//! validation (`sp_validator::validate::validate`); Linkerd admitted
//! them, so a refusal is a rule Meridian adds (README: "Stricter
//! ServiceProfile admission"), met at the next `kubectl apply`.

use serde_json::Value;

use super::Finding;

/// One finding per ServiceProfile (JSON objects) the webhook refuses.
pub fn findings(profiles: &[Value]) -> Vec<Finding> {
    let mut out: Vec<Finding> = profiles
        .iter()
        .filter_map(|profile| {
            let refusal = sp_validator::validate::validate(profile).err()?;
            let meta = &profile["metadata"];
            let name = format!(
                "{}/{}",
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default()
            );
            Some(Finding {
                kind: "ServiceProfile".into(),
                name,
                what: "refused by the sp-validator webhook at its next apply".into(),
                why: refusal.to_string(),
            })
        })
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(name: &str, path_regex: &str) -> Value {
        serde_json::json!({
            "apiVersion": "linkerd.io/v1alpha2",
            "kind": "ServiceProfile",
            "metadata": {"name": name, "namespace": "shop"},
            "spec": {"routes": [{
                "name": "GET /",
                "condition": {"method": "GET", "pathRegex": path_regex}
            }]}
        })
    }

    #[test]
    fn only_the_profile_whose_regex_does_not_compile_is_found() {
        let found = findings(&[
            profile("web.shop.svc.cluster.local", "/api/.*"),
            profile("db.shop.svc.cluster.local", "/api/(unclosed"),
        ]);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].name, "shop/db.shop.svc.cluster.local");
        assert!(found[0].why.contains("pathRegex"), "{found:?}");
    }
}
