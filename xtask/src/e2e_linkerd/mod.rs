//! `cargo xtask e2e linkerd`: Meridian inside a real Linkerd 2.20 install,
//! on the project's real node. It installs Linkerd with Helm from the
//! charts and images it is handed (never shipped here), meshes workloads
//! with Linkerd's own injector and identity, checks what their clients see,
//! compares Linkerd's destination with Meridian's shadow, swaps Meridian in
//! as the README says (Helm post-renderer) under traffic, checks again, and
//! shows what a plain `helm upgrade`, `linkerd upgrade` and the rollbacks
//! do, counting failed requests at each step (see [`steps`]). Without its
//! inputs it prints `SKIP` and succeeds.

mod inputs;
mod steps;
mod traffic;

use std::{
    path::PathBuf,
    time::{Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context;
use clap::Args;
use local_cluster::{
    binaries::{HELM, ToolBinary},
    images::Docker,
};

use crate::{
    images::ImagesArgs,
    paths::{cluster_dir, workspace_root},
};
pub use inputs::Given;

#[derive(Args, Clone, Debug)]
pub struct LinkerdArgs {
    /// A directory of image tarballs (`docker save`) holding Linkerd 2.20's controller and proxy images, tagged as the chart names them (`cr.l5d.io/linkerd/controller:<linkerdVersion>`, `cr.l5d.io/linkerd/proxy:<linkerdVersion>`; proxy-init runs from the proxy image).
    #[arg(long, env = "MERIDIAN_LINKERD_IMAGES")]
    pub linkerd_images: Option<PathBuf>,
    /// A directory holding Linkerd 2.20's charts `linkerd-crds`, `linkerd-control-plane` and `partials`.
    #[arg(long, env = "MERIDIAN_LINKERD_CHARTS")]
    pub linkerd_charts: Option<PathBuf>,
    /// Linkerd's CLI of the same release (`linkerd check`, `linkerd diagnostics`, `linkerd upgrade`).
    #[arg(long, env = "MERIDIAN_LINKERD_CLI")]
    pub linkerd_cli: Option<PathBuf>,
    /// The release's version (the chart's `linkerdVersion`, the images' tag); read from the chart when it names one.
    #[arg(long)]
    pub linkerd_version: Option<String>,
    /// More Helm values for linkerd-control-plane (e.g. your registry's image names, HA values); repeatable.
    #[arg(long = "values", short = 'f')]
    pub values: Vec<PathBuf>,
    /// Cargo profile of Meridian's controller image.
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Keep the cluster running after the last step (prints its KUBECONFIG; Ctrl-C stops).
    #[arg(long)]
    pub keep: bool,
}

impl LinkerdArgs {
    /// The inputs from the environment alone (what `cargo xtask test` runs).
    pub fn from_env() -> Self {
        let path = |name: &str| std::env::var_os(name).map(PathBuf::from);
        Self {
            linkerd_images: path("MERIDIAN_LINKERD_IMAGES"),
            linkerd_charts: path("MERIDIAN_LINKERD_CHARTS"),
            linkerd_cli: path("MERIDIAN_LINKERD_CLI"),
            linkerd_version: None,
            values: Vec::new(),
            profile: "release".into(),
            keep: false,
        }
    }
}

/// Seconds since the epoch (the clients' log lines carry the same clock).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or(0)
}

pub fn run(args: LinkerdArgs) -> anyhow::Result<()> {
    let started = Instant::now();
    let given = Given {
        images: args.linkerd_images.clone(),
        charts: args.linkerd_charts.clone(),
        cli: args.linkerd_cli.clone(),
    };
    let inputs = match given.check()? {
        Ok(inputs) => inputs,
        Err(inputs::Skip(reason)) => {
            println!("SKIP e2e linkerd: {reason}");
            return Ok(());
        }
    };
    let version = match &args.linkerd_version {
        Some(version) => version.clone(),
        None => {
            let values = inputs.charts.join("linkerd-control-plane/values.yaml");
            let text = std::fs::read_to_string(&values)
                .with_context(|| format!("reading {}", values.display()))?;
            inputs::chart_version(&text).with_context(|| {
                format!(
                    "{} names no release (linkerdVersion is the source tree's placeholder): pass --linkerd-version, the images' tag",
                    values.display()
                )
            })?
        }
    };
    let say = steps::Say::new(started);
    say.step("loading Linkerd's images into Docker");
    let docker = Docker::locate();
    docker.check_daemon()?;
    let linkerd_images = inputs::load_images(&docker, &inputs)?;
    for image in &linkerd_images {
        say.detail(&format!("loaded {image}"));
    }
    for wanted in ["controller", "proxy"] {
        let reference = format!("cr.l5d.io/linkerd/{wanted}:{version}");
        if !linkerd_images.contains(&reference) && args.values.is_empty() {
            say.detail(&format!(
                "note: the chart names {reference}, which no tarball holds; pods will not start unless --values names your images"
            ));
        }
    }
    say.step("building the Kubernetes binaries and Helm (cached)");
    let bins = crate::cluster::build()?;
    let helm = ToolBinary::ensure(&HELM, &|line| say.detail(line))?;
    say.step("building Meridian's images and meridian-cli");
    let built = crate::images::build(&ImagesArgs {
        profile: args.profile.clone(),
        no_controller: false,
    })?;
    let meridian_cli = crate::e2e::build_cli()?;
    let kubectl = bins.kubectl();
    let dir = cluster_dir().with_file_name("e2e-linkerd-cluster");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cluster =
        crate::e2e::start_real_node(&runtime, &dir, bins, &built, &linkerd_images, started)?;
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let mut run = steps::Run {
        say,
        kubectl: kubectl.clone(),
        kubeconfig: kubeconfig.clone(),
        helm: inputs::Helm {
            binary: helm.path,
            home: dir.join("helm"),
            kubeconfig: kubeconfig.clone(),
        },
        linkerd_cli: inputs.cli.clone(),
        meridian_cli,
        meridian_image: built
            .controller
            .as_ref()
            .map(|image| image.dev.clone())
            .context("the controller image was not built")?,
        version,
        values: args.values.clone(),
        workdir: dir.join("work"),
        workloads: steps::workloads_yaml(&built.http_test.reference, &built.dnsutils.reference),
        repo: workspace_root(),
        charts: PathBuf::new(),
        failures: Vec::new(),
    };
    let result = run.charts_from(&inputs).and_then(|()| run.all_steps());
    if result.is_err() || !run.failures.is_empty() {
        run.dump_diagnostics();
    }
    if args.keep {
        println!("export KUBECONFIG={}", kubeconfig.display());
        println!("the cluster stays up; Ctrl-C stops it and cleans up");
        runtime.block_on(async {
            let _ = tokio::signal::ctrl_c().await;
        });
    }
    run.say
        .step("stopping the cluster and cleaning up the host");
    cluster.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    result?;
    run.verdict()
}
