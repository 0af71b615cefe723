//! The manifests of `deploy/`, for tests that check that the binaries
//! accept what the manifests start them with.

use std::path::{Path, PathBuf};

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy")
}

/// `command` followed by `args` of a container of the linkerd-destination
/// Deployment in `deploy/base/pod/destination.yaml`, as the kubelet passes
/// them to the image (an empty command: `args[0]` is the program).
pub fn destination_pod_command(container: &str) -> Vec<String> {
    let path = deploy_dir().join("base/pod/destination.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let deployment: serde_json::Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    container_command(&deployment, container, &path.display().to_string())
}

/// `command` followed by `args` of `container` in a Deployment.
fn container_command(deployment: &serde_json::Value, container: &str, from: &str) -> Vec<String> {
    let found = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == container)
        .unwrap_or_else(|| panic!("no container {container} in {from}"));
    ["command", "args"]
        .iter()
        .flat_map(|field| found[*field].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}

impl crate::SharedCluster {
    /// Applies the namespace and RBAC of `deploy/base/` for real (the
    /// ServiceAccount `linkerd-destination` in `linkerd` with its roles).
    pub fn install_deploy_rbac(&self) {
        self.apply_once("base", &["namespace.yaml", "rbac.yaml"]);
    }

    /// Applies `files` of `deploy/<dir>/` once per test process. Tests run
    /// in parallel: two `kubectl apply`s of an object that does not exist
    /// yet both try to create it, and one fails with AlreadyExists.
    fn apply_once(&self, dir: &str, files: &[&str]) {
        static APPLIED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        let mut applied = APPLIED.lock().unwrap_or_else(|p| p.into_inner());
        if applied.iter().any(|d| d == dir) {
            return;
        }
        for file in files {
            let path = deploy_dir().join(dir).join(file);
            let (ok, out) = self.kubectl(&["apply", "-f", &path.display().to_string()], None);
            assert!(ok, "applying {}: {out}", path.display());
        }
        applied.push(dir.to_string());
    }

    /// `command` followed by `args` of a container of the shadow's
    /// Deployment, as `kubectl kustomize deploy/shadow` renders it.
    pub fn shadow_pod_command(&self, container: &str) -> Vec<String> {
        let out = std::process::Command::new(self.kubectl_path())
            .arg("kustomize")
            .arg(deploy_dir().join("shadow"))
            .output()
            .expect("running kubectl kustomize deploy/shadow");
        assert!(
            out.status.success(),
            "kubectl kustomize deploy/shadow: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let yaml = String::from_utf8_lossy(&out.stdout);
        let deployment = serde_yaml::Deserializer::from_str(&yaml)
            .map(|doc| {
                <serde_json::Value as serde::Deserialize>::deserialize(doc).expect("rendered YAML")
            })
            .find(|o| o["kind"] == "Deployment")
            .expect("the shadow's Deployment");
        container_command(&deployment, container, "deploy/shadow")
    }

    /// Applies the namespace and read-only RBAC of `deploy/shadow/` for
    /// real (the ServiceAccount `meridian-shadow` in `meridian-shadow`),
    /// after `deploy/base/`'s (its Role lives in `linkerd`).
    pub fn install_shadow_rbac(&self) {
        self.install_deploy_rbac();
        self.apply_once("shadow", &["namespace.yaml", "rbac.yaml"]);
    }

    /// A kubeconfig for this cluster that authenticates as the
    /// ServiceAccount `namespace/name` (a fresh bound token), so a binary
    /// started with it has exactly that account's RBAC.
    pub fn service_account_kubeconfig(&self, namespace: &str, name: &str) -> PathBuf {
        let (ok, token) = self.kubectl(
            &["create", "token", name, "-n", namespace, "--duration=2h"],
            None,
        );
        assert!(ok, "token for {namespace}/{name}: {token}");
        let text = std::fs::read_to_string(self.kubeconfig()).expect("reading the kubeconfig");
        let mut config: serde_yaml::Value = serde_yaml::from_str(&text).expect("kubeconfig YAML");
        for user in config["users"].as_sequence_mut().into_iter().flatten() {
            let mut auth = serde_yaml::Mapping::new();
            auth.insert("token".into(), token.trim().into());
            user["user"] = auth.into();
        }
        let path = self
            .work_dir()
            .join(format!("kubeconfig-sa-{namespace}-{name}"));
        let text = serde_yaml::to_string(&config).expect("kubeconfig YAML");
        std::fs::write(&path, text).expect("writing the kubeconfig");
        path
    }

    /// A kubeconfig for this cluster whose server is a loopback address
    /// where nothing listens yet (an unreachable API server), and that
    /// address; [`crate::process::forward`] it to [`Self::apiserver_addr`]
    /// to make the API server appear there.
    pub fn unreachable_kubeconfig(&self, name: &str) -> (PathBuf, std::net::SocketAddr) {
        let real = self.apiserver_addr().to_string();
        let closed = crate::free_addr();
        let text = std::fs::read_to_string(self.kubeconfig()).expect("reading the kubeconfig");
        assert!(text.contains(&real), "{real} in the kubeconfig");
        let path = self
            .work_dir()
            .join(format!("kubeconfig-unreachable-{name}"));
        std::fs::write(&path, text.replace(&real, &closed.to_string()))
            .expect("writing the kubeconfig");
        (path, closed)
    }

    /// The API server's loopback address.
    pub fn apiserver_addr(&self) -> std::net::SocketAddr {
        self.config()
            .cluster_url
            .authority()
            .and_then(|a| a.as_str().parse().ok())
            .expect("the API server URL is a loopback address")
    }
}
