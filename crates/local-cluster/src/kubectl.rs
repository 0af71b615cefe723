//! Running the kubectl built with the control plane against a cluster.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
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
/// do not conflict) and waits until they are established.
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
    Ok(())
}
