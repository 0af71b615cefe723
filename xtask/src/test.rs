//! `cargo xtask test`: every test of the workspace. Builds the control-plane
//! binaries first (cached), so that the integration tests only start them.

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
    Ok(())
}
