//! `cargo xtask test`: every test of the workspace. Builds the control-plane
//! binaries first (cached), so that the integration tests only start them,
//! then checks the documentation's intra-doc links (`cargo doc --no-deps`,
//! broken links as errors: cheap next to the tests, and catches stale
//! references after a move).

use std::process::Command;

use anyhow::bail;
use clap::Args;

use crate::paths::workspace_root;

#[derive(Args)]
pub struct TestArgs {
    /// Extra arguments passed to `cargo test` (after `--workspace`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub cargo_args: Vec<String>,
}

pub fn run(args: TestArgs) -> anyhow::Result<()> {
    crate::cluster::build()?;
    // Some end-to-end tests run another package's binary (the destination
    // and the policy controller together): build every binary first.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--workspace", "--bins"])
        .current_dir(workspace_root())
        .status()?;
    if !status.success() {
        bail!("cargo build failed with {status}");
    }
    let status = Command::new(&cargo)
        .args(["test", "--workspace"])
        .args(&args.cargo_args)
        .current_dir(workspace_root())
        .status()?;
    if !status.success() {
        bail!("cargo test failed with {status}");
    }
    doc_links(&cargo)
}

/// `cargo doc --workspace --no-deps` with broken intra-doc links as errors.
pub fn doc_links(cargo: &str) -> anyhow::Result<()> {
    let status = Command::new(cargo)
        .args(["doc", "--workspace", "--no-deps", "--quiet"])
        .env("RUSTDOCFLAGS", "-D rustdoc::broken_intra_doc_links")
        .current_dir(workspace_root())
        .status()?;
    if !status.success() {
        bail!("cargo doc found broken intra-doc links ({status})");
    }
    Ok(())
}
