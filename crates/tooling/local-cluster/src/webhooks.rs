//! The admission webhook configurations of `deploy/`, pointed at servers
//! running on this machine: `clientConfig.service` becomes
//! `url: https://127.0.0.1:<port>/` with the local CA as `caBundle`, and
//! failures are not ignored. Local runs and tests thus exercise the same
//! rules, scopes and opt-out selectors as a cluster install.

/// The ValidatingWebhookConfigurations of a multi-document `manifest`,
/// localized.
pub fn localize(
    manifest: &str,
    url: &str,
    ca_pem: &str,
) -> Result<Vec<serde_json::Value>, serde_yaml::Error> {
    use base64::Engine as _;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let mut configs = Vec::new();
    for doc in serde_yaml::Deserializer::from_str(manifest) {
        let mut value: serde_json::Value = serde::Deserialize::deserialize(doc)?;
        if value["kind"] != "ValidatingWebhookConfiguration" {
            continue;
        }
        for hook in value["webhooks"].as_array_mut().into_iter().flatten() {
            hook["clientConfig"] = serde_json::json!({ "url": url, "caBundle": ca });
            hook["failurePolicy"] = "Fail".into();
        }
        configs.push(value);
    }
    Ok(configs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_webhook_configurations_are_kept_and_pointed_at_the_url() {
        let manifest = "apiVersion: v1\nkind: Service\nmetadata: {name: s}\n---\napiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: w}\nwebhooks:\n- name: a.example\n  clientConfig: {service: {name: s, namespace: n}}\n  failurePolicy: Ignore\n";
        let configs = localize(manifest, "https://127.0.0.1:1/", "PEM").expect("yaml");
        assert_eq!(configs.len(), 1);
        let hook = &configs[0]["webhooks"][0];
        assert_eq!(hook["clientConfig"]["url"], "https://127.0.0.1:1/");
        assert_eq!(hook["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(hook["failurePolicy"], "Fail");
        assert!(hook["clientConfig"].get("service").is_none());
    }
}
