//! `cargo xtask bench <name>`: builds the servers and the benchmark client in
//! release mode, then runs `meridian-bench <name>`, which prints figures.
//! `cargo xtask bench h2-ab [--runs N] [--no-hog] [destination flags]`: the
//! destination benchmark with and without the h2 patch ([`crate::h2_ab`]).

use std::process::Command;

use anyhow::{Context, bail};
use clap::Args;

use crate::paths::workspace_root;

#[derive(Args)]
pub struct BenchArgs {
    /// Which benchmark: destination, policy, cluster-size, compare-linkerd
    /// (cluster-size beside Linkerd 2.20's own binaries, `--linkerd-bin
    /// <dir>`), sp-validator, overload, failover, abuse, or h2-ab (the
    /// destination benchmark with and without the h2 patch, `--runs N` times
    /// each, default 10).
    pub name: String,
    /// Arguments for the benchmark (see `meridian-bench <name> --help`).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

pub fn run(args: BenchArgs) -> anyhow::Result<()> {
    crate::cluster::build()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "-p",
            "bench",
            "-p",
            "destination",
            "-p",
            "policy-controller",
            "-p",
            "sp-validator",
        ])
        .current_dir(workspace_root())
        .status()
        .context("running cargo build --release")?;
    if !status.success() {
        bail!("cargo build --release failed with {status}");
    }
    let target_dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    if args.name == "h2-ab" {
        return crate::h2_ab::run(
            crate::h2_ab::AbArgs::parse(&args.args)?,
            &target_dir,
            &cargo,
        );
    }
    let target = target_dir.join("release");
    let mut bench = Command::new(target.join("meridian-bench"));
    bench.arg(&args.name);
    match args.name.as_str() {
        "destination" => {
            bench.arg(format!(
                "--destination-bin={}",
                target.join("destination").display()
            ));
        }
        "policy" => {
            bench.arg(format!(
                "--policy-bin={}",
                target.join("policy-controller").display()
            ));
        }
        "cluster-size" | "compare-linkerd" => {
            // This build's binaries, unless others are named (to compare
            // builds kept elsewhere on the same fixtures).
            for (flag, bin) in [
                ("destination-bin", "destination"),
                ("policy-bin", "policy-controller"),
            ] {
                let named = args
                    .args
                    .iter()
                    .any(|a| a.strip_prefix("--").is_some_and(|a| a.starts_with(flag)));
                if !named {
                    bench.arg(format!("--{flag}={}", target.join(bin).display()));
                }
            }
        }
        "sp-validator" => {
            bench.arg(format!(
                "--sp-validator-bin={}",
                target.join("sp-validator").display()
            ));
        }
        "failover" => {
            for (flag, bin) in [
                ("destination-bin", "destination"),
                ("policy-bin", "policy-controller"),
            ] {
                bench.arg(format!("--{flag}={}", target.join(bin).display()));
            }
        }
        "overload" | "abuse" => {
            for (flag, bin) in [
                ("destination-bin", "destination"),
                ("policy-bin", "policy-controller"),
                ("sp-validator-bin", "sp-validator"),
            ] {
                bench.arg(format!("--{flag}={}", target.join(bin).display()));
            }
        }
        other => {
            bail!(
                "unknown benchmark {other:?}: destination, policy, cluster-size, compare-linkerd, sp-validator, overload, failover, abuse or h2-ab"
            )
        }
    }
    let status = bench
        .args(&args.args)
        .status()
        .context("running meridian-bench")?;
    if !status.success() {
        bail!("benchmark failed with {status}");
    }
    Ok(())
}
