//! The manifests of `deploy/`, for tests that check that the binaries
//! accept what the manifests start them with.

use std::path::{Path, PathBuf};

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// `command` followed by `args` of a container of the linkerd-destination
/// Deployment in `deploy/base/destination.yaml`, as the kubelet passes
/// them to the image (an empty command: `args[0]` is the program).
pub fn destination_pod_command(container: &str) -> Vec<String> {
    let path = deploy_dir().join("base/destination.yaml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let deployment: serde_json::Value =
        serde_yaml::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
    let found = deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == container)
        .unwrap_or_else(|| panic!("no container {container} in {}", path.display()));
    ["command", "args"]
        .iter()
        .flat_map(|field| found[*field].as_array().cloned().unwrap_or_default())
        .filter_map(|v| v.as_str().map(str::to_string))
        .collect()
}
