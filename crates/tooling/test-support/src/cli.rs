//! `meridian-cli` for the tests of other packages: the binary belongs to
//! the `meridian-cli` package, so `CARGO_BIN_EXE_meridian-cli` exists only
//! in that package's own tests. [`meridian_cli`] builds it (once per test
//! binary, with the cargo that runs the tests; an up-to-date binary costs
//! one no-op build) and returns the executable cargo reports.

use std::{path::PathBuf, process::Command, sync::OnceLock};

/// The path of a freshly built `meridian-cli` (built on first call).
pub fn meridian_cli() -> PathBuf {
    static CLI: OnceLock<PathBuf> = OnceLock::new();
    CLI.get_or_init(build).clone()
}

fn build() -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..");
    let output = Command::new(&cargo)
        .args(["build", "-p", "meridian-cli", "--bin", "meridian-cli"])
        .arg("--message-format=json")
        .current_dir(&root)
        .stderr(std::process::Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("running {cargo} build -p meridian-cli: {e}"));
    assert!(
        output.status.success(),
        "cargo build -p meridian-cli failed"
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| {
            msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "meridian-cli"
        })
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reported no meridian-cli executable")
}
