//! Registering a webhook of `deploy/base/` with the shared cluster for one test:
//! pointed at the server under test, trusted through the test's CA, and
//! scoped to the test's namespace so parallel tests do not see it.

use std::path::Path;

use crate::TestEnv;

/// A registered webhook configuration; deleted when dropped.
pub struct RegisteredWebhook<'a> {
    env: &'a TestEnv,
    manifest: String,
    url: String,
    name: String,
}

impl TestEnv {
    /// Registers the ValidatingWebhookConfiguration of `deploy/base/<manifest>`
    /// for this test's namespace, calling `url` and trusting `ca_pem`.
    pub fn register_webhook(
        &self,
        manifest: &str,
        url: &str,
        ca_pem: &str,
    ) -> RegisteredWebhook<'_> {
        let mut webhook = RegisteredWebhook {
            env: self,
            manifest: manifest.to_string(),
            url: url.to_string(),
            name: String::new(),
        };
        webhook.name = webhook.apply(ca_pem);
        webhook
    }
}

impl RegisteredWebhook<'_> {
    /// Trusts another CA (e.g. after the server's certificate rotated).
    pub fn set_ca(&self, ca_pem: &str) {
        self.apply(ca_pem);
    }

    /// The configuration's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn apply(&self, ca_pem: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../deploy/base")
            .join(&self.manifest);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let mut configs = local_cluster::webhooks::localize(&text, &self.url, ca_pem)
            .unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        assert_eq!(
            configs.len(),
            1,
            "{} holds one webhook configuration",
            path.display()
        );
        let mut config = configs.remove(0);
        let ns = &self.env.ns;
        let name = format!(
            "{}-{ns}",
            config["metadata"]["name"].as_str().unwrap_or("webhook")
        );
        config["metadata"] = serde_json::json!({ "name": name });
        for hook in config["webhooks"].as_array_mut().into_iter().flatten() {
            hook["namespaceSelector"] =
                serde_json::json!({ "matchLabels": { "kubernetes.io/metadata.name": ns } });
            hook["timeoutSeconds"] = 5.into();
        }
        let (ok, out) = self
            .env
            .cluster()
            .kubectl(&["apply", "-f", "-"], Some(&config.to_string()));
        assert!(ok, "registering webhook {name}: {out}");
        name
    }
}

impl Drop for RegisteredWebhook<'_> {
    fn drop(&mut self) {
        let _ = self.env.cluster().kubectl(
            &[
                "delete",
                "validatingwebhookconfiguration",
                &self.name,
                "--ignore-not-found",
            ],
            None,
        );
    }
}
