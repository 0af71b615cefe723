//! Running the kubectl built with the control plane against a cluster.

use std::{
    collections::HashSet,
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

/// Runs `kubectl args…` with `KUBECONFIG=kubeconfig`, feeding `stdin`.
/// Returns whether it succeeded, and its stdout followed by its stderr.
pub fn run(
    kubectl: &Path,
    kubeconfig: &Path,
    args: &[&str],
    stdin: Option<&str>,
) -> std::io::Result<(bool, String)> {
    let mut child = Command::new(kubectl)
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(stdin.unwrap_or_default().as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok((out.status.success(), text))
}

/// Why CRDs could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum InstallError {
    #[error("running kubectl: {0}")]
    Io(#[from] std::io::Error),
    #[error("kubectl {step} failed: {output}")]
    Kubectl { step: &'static str, output: String },
}

/// Applies the CRD manifests in `dir` (server-side, so concurrent installs
/// do not conflict) and waits until they are established and discovery
/// lists them.
pub fn install_crds(kubectl: &Path, kubeconfig: &Path, dir: &Path) -> Result<(), InstallError> {
    let dir = dir.display().to_string();
    let (ok, output) = run(
        kubectl,
        kubeconfig,
        &["apply", "--server-side", "--force-conflicts", "-f", &dir],
        None,
    )?;
    if !ok {
        return Err(InstallError::Kubectl {
            step: "apply",
            output,
        });
    }
    let (ok, output) = run(
        kubectl,
        kubeconfig,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &dir,
        ],
        None,
    )?;
    if !ok {
        return Err(InstallError::Kubectl {
            step: "wait",
            output,
        });
    }
    wait_discovered(kubectl, kubeconfig, &dir)
}

/// How long the API server's discovery may take to list a CRD once it is
/// established.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(60);

/// Waits until the API server's discovery lists every CRD in `dir`.
///
/// `Established` says the API server serves the resource, not that its
/// discovery (which kubectl reads to map a kind to its resource) lists it
/// yet: that happens a moment later, and on a busy machine a
/// `kubectl apply` of a custom resource made in between fails with "no
/// matches for kind".
fn wait_discovered(kubectl: &Path, kubeconfig: &Path, dir: &str) -> Result<(), InstallError> {
    let (ok, output) = run(kubectl, kubeconfig, &["get", "-f", dir, "-o", "name"], None)?;
    if !ok {
        return Err(InstallError::Kubectl {
            step: "get",
            output,
        });
    }
    // `customresourcedefinition.apiextensions.k8s.io/<plural>.<group>`;
    // discovery names the resource `<plural>.<group>` too.
    let names: Vec<&str> = output
        .lines()
        .filter_map(|l| l.trim().rsplit_once('/').map(|(_, name)| name))
        .collect();
    let deadline = Instant::now() + DISCOVERY_TIMEOUT;
    loop {
        // Its exit status is not trusted: an unavailable aggregated API
        // makes it fail while it still lists the others.
        let (_, listed) = run(kubectl, kubeconfig, &["api-resources", "-o", "name"], None)?;
        let listed: HashSet<&str> = listed.lines().map(str::trim).collect();
        let missing: Vec<&str> = names
            .iter()
            .copied()
            .filter(|n| !listed.contains(n))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(InstallError::Kubectl {
                step: "api-resources",
                output: format!(
                    "discovery does not list {} after {DISCOVERY_TIMEOUT:?}",
                    missing.join(", ")
                ),
            });
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}
