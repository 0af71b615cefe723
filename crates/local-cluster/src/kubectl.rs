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
