//! `cargo xtask images`: builds the container images with the local Docker
//! daemon and no registry: the runtime base and the DNS debugging image
//! (`meridian/dnsutils`) from Debian packages, the pause and HTTP test images
//! from C sources, and the Meridian controller image from binaries cargo
//! builds on the host. Prints `docker images` at the end. (The real node's
//! CoreDNS image is made when a real node first starts.)

use std::{process::Command, time::Instant};

use anyhow::{Context, bail};
use clap::Args;
use local_cluster::images::{self, Docker, Image};

use crate::paths::workspace_root;

#[derive(Args)]
pub struct ImagesArgs {
    /// Cargo profile of the controller image's binaries (`release` or `dev`).
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Only the base, pause, HTTP test and dnsutils images (no cargo build).
    #[arg(long)]
    pub no_controller: bool,
}

/// Every image `cargo xtask images` builds.
pub struct BuiltImages {
    pub base: Image,
    pub pause: Image,
    pub http_test: Image,
    pub dnsutils: Image,
    pub controller: Option<Image>,
}

pub fn run(args: ImagesArgs) -> anyhow::Result<()> {
    let built = build(&args)?;
    let docker = Docker::locate();
    let mut all = vec![&built.base, &built.pause, &built.http_test, &built.dnsutils];
    all.extend(built.controller.as_ref());
    println!("{:<48} {:>10} {:>9}", "IMAGE", "SIZE", "BUILD");
    for image in all {
        let size = docker.image_size(&image.reference)?;
        let how = if image.built {
            format!("{:.1}s", image.secs)
        } else {
            "cached".to_string()
        };
        println!(
            "{:<48} {:>10} {:>9}",
            image.reference,
            images::human_size(size),
            how
        );
    }
    let status = docker
        .command()
        .args(["images", "--filter", "reference=meridian/*"])
        .status()?;
    if !status.success() {
        bail!("docker images failed with {status}");
    }
    Ok(())
}

/// Builds (or finds) every image; the controller's binaries with cargo first.
pub fn build(args: &ImagesArgs) -> anyhow::Result<BuiltImages> {
    let docker = Docker::locate();
    docker.check_daemon()?;
    let progress = |line: &str| eprintln!("[images] {line}");
    let base = images::ensure_base(&docker, &progress)?;
    let pause = images::ensure_pause(&docker, &progress)?;
    let http_test = images::ensure_http_test(&docker, &progress)?;
    let dnsutils = images::ensure_dnsutils(&docker, &base, &progress)?;
    let controller = if args.no_controller {
        None
    } else {
        let started = Instant::now();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut command = Command::new(&cargo);
        command
            .args(["build", "--profile", &args.profile])
            .current_dir(workspace_root());
        for (_, bin) in images::CONTROLLER_BINARIES {
            command.args(["--bin", bin]);
        }
        eprintln!(
            "[images] cargo build --profile {} of {}",
            args.profile,
            images::CONTROLLER_BINARIES
                .iter()
                .map(|(_, bin)| *bin)
                .collect::<Vec<_>>()
                .join(", ")
        );
        let status = command.status().context("running cargo build")?;
        if !status.success() {
            bail!("cargo build failed with {status}");
        }
        eprintln!(
            "[images] binaries built in {:.1}s",
            started.elapsed().as_secs_f64()
        );
        let dir = if args.profile == "dev" {
            "debug"
        } else {
            &args.profile
        };
        let out = workspace_root().join("target").join(dir);
        Some(images::build_controller(&docker, &base, &out, &progress)?)
    };
    Ok(BuiltImages {
        base,
        pause,
        http_test,
        dnsutils,
        controller,
    })
}
