//! `cargo xtask soak`: builds the destination, the policy controller and the
//! benchmark client (release by default), then runs `meridian-bench soak`,
//! which churns and faults the local control plane and audits every stream
//! (see `crates/tooling/bench/src/soak/`). [`short`] is the fixed-seed run
//! `cargo xtask test` includes.

use std::{path::PathBuf, process::Command};

use anyhow::{Context, bail};
use clap::Args;

use crate::paths::workspace_root;

#[derive(Args)]
pub struct SoakArgs {
    /// Cargo profile of the binaries (`dev` builds faster).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Arguments for the soak (see `meridian-bench soak --help`), e.g.
    /// `--seed 7 --ops 5000`.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// The short soak of `cargo xtask test`: a fixed seed, two replicas,
/// every fault kind once (seven with two replicas), a few minutes on two
/// cores.
pub const SHORT: &[&str] = &[
    "--seed=1",
    "--replicas=2",
    "--ops=300",
    "--streams=300",
    "--profile-streams=40",
    "--inbound-streams=60",
    "--policy-pods=20",
    "--connections=30",
    "--services=12",
    "--faults=7",
];

pub fn run(args: SoakArgs) -> anyhow::Result<()> {
    crate::cluster::build()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args(["build", "--profile", &args.profile])
        .args([
            "-p",
            "bench",
            "-p",
            "destination",
            "-p",
            "policy-controller",
        ])
        .current_dir(workspace_root())
        .status()
        .context("running cargo build")?;
    if !status.success() {
        bail!(
            "cargo build --profile {} failed with {status}",
            args.profile
        );
    }
    soak(&args.profile, &args.args)
}

/// The short soak with already-built binaries of `profile`.
pub fn short(profile: &str) -> anyhow::Result<()> {
    let args: Vec<String> = SHORT.iter().map(|a| a.to_string()).collect();
    soak(profile, &args)
}

fn soak(profile: &str, args: &[String]) -> anyhow::Result<()> {
    let dir = match profile {
        "dev" | "test" => "debug",
        other => other,
    };
    let target: PathBuf = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
        .join(dir);
    let status = Command::new(target.join("meridian-bench"))
        .arg("soak")
        .arg(format!(
            "--destination-bin={}",
            target.join("destination").display()
        ))
        .arg(format!(
            "--policy-bin={}",
            target.join("policy-controller").display()
        ))
        .args(args)
        .status()
        .context("running meridian-bench soak")?;
    if !status.success() {
        bail!("the soak failed ({status}): stale streams, or a server or the cluster failed");
    }
    Ok(())
}
