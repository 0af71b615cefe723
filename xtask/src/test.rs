//! `cargo xtask test`: every test of the workspace. Builds the control-plane
//! binaries first (cached), so that the integration tests only start them,
//! then checks that the h2 release plus `vendor/h2.patch` is `vendor/h2`
//! ([`crate::h2_patch`]) and runs the vendored h2's own tests (its unit tests with their HPACK
//! fixtures, upstream's integration tests and Meridian's, see
//! [`vendored_h2`]), then the short soak (`cargo xtask soak`'s fixed-seed run: churn and
//! faults, every stream audited; any stale stream fails), then checks the
//! documentation's intra-doc links (`cargo doc --no-deps`, broken links as
//! errors: cheap next to the tests, and catches stale references after a
//! move) and that no crate has an import circle
//! (`cargo xtask imports`), then runs `cargo xtask e2e` (the Meridian pod
//! on a local real node) unless `--no-e2e`.

use std::process::Command;

use anyhow::bail;
use clap::Args;

use crate::paths::workspace_root;

#[derive(Args)]
pub struct TestArgs {
    /// Skip the end-to-end suite on the local real node (it needs root,
    /// Docker and the packages `.ci/install-node-deps` installs).
    #[arg(long)]
    pub no_e2e: bool,
    /// Cargo profile of the binaries in the e2e's controller image (`dev`
    /// builds faster; `cargo xtask e2e` alone defaults to `release`).
    #[arg(long, default_value = "dev")]
    pub e2e_profile: String,
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
    crate::h2_patch::check(&cargo)?;
    vendored_h2(&cargo)?;
    // The binaries `cargo build --workspace --bins` just built (dev profile).
    crate::soak::short("dev")?;
    doc_links(&cargo)?;
    crate::imports::run()?;
    if args.no_e2e {
        return Ok(());
    }
    crate::e2e::run(crate::e2e::E2eArgs {
        command: None,
        kind: false,
        kind_name: String::new(),
        kubeconfig: None,
        registry: None,
        profile: args.e2e_profile,
        keep: false,
        test_args: Vec::new(),
    })?;
    // Meridian in a real Linkerd install: runs when MERIDIAN_LINKERD_IMAGES,
    // MERIDIAN_LINKERD_CHARTS and MERIDIAN_LINKERD_CLI are set, else says SKIP.
    crate::e2e_linkerd::run(crate::e2e_linkerd::LinkerdArgs::from_env())
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

/// The tests of `vendor/h2` (outside the workspace, see vendor/README.md),
/// run as upstream's CI runs them: `cargo test -p h2` (the unit tests, with
/// their HPACK fixtures, and Meridian's) and `cargo test -p h2-tests`
/// (upstream's integration tests, which need the `unstable` feature, and
/// Meridian's), in vendor/'s own workspace, built into `target/vendor`;
/// then upstream's integration tests again with every builder's
/// `release_idle_buffers` on (the fork's test feature), but the slow
/// `hammer` (5,000 runtimes one after the other, about 3 minutes).
pub fn vendored_h2(cargo: &str) -> anyhow::Result<()> {
    let root = workspace_root();
    let runs: [&[&str]; 3] = [
        &["-p", "h2"],
        &["-p", "h2-tests"],
        &[
            "-p",
            "h2-tests",
            "--features",
            "h2/release-idle-buffers-by-default",
            "--",
            "--skip",
            "hammer",
        ],
    ];
    for args in runs {
        let status = Command::new(cargo)
            .arg("test")
            .arg("--manifest-path")
            .arg(root.join("vendor/Cargo.toml"))
            .args(args)
            .env("CARGO_TARGET_DIR", root.join("target/vendor"))
            .current_dir(root.join("vendor"))
            .status()?;
        if !status.success() {
            bail!(
                "the tests of vendor/h2 failed: cargo test {} ({status})",
                args.join(" ")
            );
        }
    }
    Ok(())
}
