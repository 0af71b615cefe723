//! `cargo xtask e2e`: the Meridian pod for real. Builds the images, brings
//! up a cluster (the local real node by default, `--kind`, or any
//! `--kubeconfig` with a `--registry`), installs `deploy/` with its webhook
//! certificates, waits until every container of the pod is Ready by its
//! real probes, runs the suites of `crates/tooling/meridian-e2e` (`pod`: the Meridian pod;
//! `dns`: pods resolving Services through the cluster DNS; `ha`: three
//! replicas through a lost pod and a rolling restart), and tears the
//! local cluster down.
//!
//! `install` is shared with `cargo xtask up --real-node`.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Instant,
};

use anyhow::{Context, bail};
use clap::Args;
use local_cluster::{
    Cluster, ClusterOptions, Lifetime,
    images::{CONTROLLER_REPO, DEV_TAG, Docker},
};

use crate::{
    images::{BuiltImages, ImagesArgs},
    paths::{cluster_dir, workspace_root},
};

/// Where Meridian is installed (the chart's namespace).
pub const NAMESPACE: &str = "linkerd";
/// The Meridian Deployment.
pub const DEPLOYMENT: &str = "linkerd-destination";

#[derive(Args, Clone)]
#[command(args_conflicts_with_subcommands = true)]
pub struct E2eArgs {
    /// `linkerd`: Meridian swapped into a real Linkerd 2.20 install (needs Linkerd's images, charts and CLI).
    #[command(subcommand)]
    pub command: Option<E2eCommand>,
    /// Use a kind cluster (created if missing, reused otherwise) and load the images with `kind load docker-image`.
    #[arg(long, conflicts_with = "kubeconfig")]
    pub kind: bool,
    /// Name of the kind cluster.
    #[arg(long, default_value = "meridian")]
    pub kind_name: String,
    /// Any cluster: a kubeconfig (needs --registry to push the images to).
    #[arg(long, requires = "registry")]
    pub kubeconfig: Option<PathBuf>,
    /// Registry prefix the images are pushed to (e.g. `registry.example:5000/me`).
    #[arg(long)]
    pub registry: Option<String>,
    /// Cargo profile of the controller image's binaries.
    #[arg(long, default_value = "release")]
    pub profile: String,
    /// Keep the local cluster running after the suite (prints its KUBECONFIG; Ctrl-C stops).
    #[arg(long)]
    pub keep: bool,
    /// Extra arguments for the suite's test binary (e.g. a test name filter).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub test_args: Vec<String>,
}

#[derive(clap::Subcommand, Clone)]
pub enum E2eCommand {
    /// Meridian inside a real Linkerd 2.20 install on the local real node: Helm install, meshed traffic, compare, the swap and the rollbacks under traffic (SKIP without Linkerd's images, charts and CLI).
    Linkerd(crate::e2e_linkerd::LinkerdArgs),
}

/// Prints a step of a long command.
fn step(started: Instant, what: &str) {
    eprintln!("[e2e {:>6.1}s] {what}", started.elapsed().as_secs_f64());
}

pub fn run(args: E2eArgs) -> anyhow::Result<()> {
    if let Some(E2eCommand::Linkerd(linkerd)) = args.command {
        return crate::e2e_linkerd::run(linkerd);
    }
    let started = Instant::now();
    step(started, "building the Kubernetes binaries (cached)");
    let bins = crate::cluster::build()?;
    step(started, "building the images");
    let built = crate::images::build(&ImagesArgs {
        profile: args.profile.clone(),
        no_controller: false,
    })?;
    step(started, "building the e2e suites");
    let suites = build_suites()?;
    let kubectl = bins.kubectl();

    if args.kind {
        let kubeconfig = kind_cluster(&args.kind_name, &built)?;
        install(&kubectl, &kubeconfig, None, started)?;
        return run_suites(
            &suites,
            &kubectl,
            &kubeconfig,
            &images(None, &built),
            &args.test_args,
        );
    }
    if let Some(kubeconfig) = &args.kubeconfig {
        let registry = args.registry.as_deref();
        push_images(registry.unwrap_or_default(), &built)?;
        install(&kubectl, kubeconfig, registry, started)?;
        return run_suites(
            &suites,
            &kubectl,
            kubeconfig,
            &images(registry, &built),
            &args.test_args,
        );
    }

    // The local real node.
    let dir = cluster_dir().with_file_name("e2e-cluster");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cluster = start_real_node(&runtime, &dir, bins, &built, &[], started)?;
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let result = install(&kubectl, &kubeconfig, None, started).and_then(|()| {
        step(started, "running the suites");
        run_suites(
            &suites,
            &kubectl,
            &kubeconfig,
            &images(None, &built),
            &args.test_args,
        )
    });
    if result.is_err() {
        dump_diagnostics(&kubectl, &kubeconfig);
    }
    if args.keep && result.is_ok() {
        println!("export KUBECONFIG={}", kubeconfig.display());
        println!("the cluster stays up; Ctrl-C stops it and cleans up");
        runtime.block_on(async {
            let _ = tokio::signal::ctrl_c().await;
        });
    }
    step(started, "stopping the cluster and cleaning up the host");
    cluster.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    step(started, "done");
    result
}

/// Starts a fresh local control plane in `dir` with a real node that has
/// the controller and HTTP test images loaded, and `extra_images` from the
/// local Docker daemon (tied to this process).
pub(crate) fn start_real_node(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    bins: local_cluster::KubeBinaries,
    built: &BuiltImages,
    extra_images: &[String],
    started: Instant,
) -> anyhow::Result<Cluster> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let mut options = ClusterOptions::new(dir, Lifetime::Tied);
    options.real_node = true;
    options.node_images = node_images(built)?;
    options.node_images.extend(extra_images.iter().cloned());
    step(
        started,
        "starting the local control plane and a real node (containerd, kubelet, kube-proxy, kube-scheduler)",
    );
    Ok(runtime.block_on(Cluster::start_with(options, bins))?)
}

/// The images the suite's workloads run.
struct SuiteImages {
    http_test: String,
    dnsutils: String,
}

/// The suite's workloads run the images this run built by their key tags:
/// `:dev` is shared by every checkout using the host's Docker and may point
/// elsewhere by the time the node loads it (the release build takes long).
/// The controller keeps `:dev`, the tag `deploy/` names; it is built just
/// before the node starts.
fn images(registry: Option<&str>, built: &BuiltImages) -> SuiteImages {
    let prefix = registry.map(|r| format!("{r}/")).unwrap_or_default();
    SuiteImages {
        http_test: format!("{prefix}{}", built.http_test.reference),
        dnsutils: format!("{prefix}{}", built.dnsutils.reference),
    }
}

/// The controller image `deploy/` runs, under `registry` when pushed there.
fn controller_image(registry: Option<&str>) -> String {
    let prefix = registry.map(|r| format!("{r}/")).unwrap_or_default();
    format!("{prefix}{CONTROLLER_REPO}:{DEV_TAG}")
}

/// The images the real node loads into containerd (besides its pause and
/// CoreDNS images), as [`images`] names them.
fn node_images(built: &BuiltImages) -> anyhow::Result<Vec<String>> {
    let controller = built
        .controller
        .as_ref()
        .context("the controller image was not built")?;
    Ok(vec![
        controller.dev.clone(),
        built.http_test.reference.clone(),
        built.dnsutils.reference.clone(),
    ])
}

/// Builds `meridian-cli` (the suite runs `explain` against the real pod);
/// returns its path.
pub(crate) fn build_cli() -> anyhow::Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(&cargo)
        .args([
            "build",
            "-p",
            "meridian-cli",
            "--bin",
            "meridian-cli",
            "--message-format=json",
        ])
        .current_dir(workspace_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo build --bin meridian-cli")?;
    if !output.status.success() {
        bail!("building meridian-cli failed");
    }
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| {
            msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "meridian-cli"
        })
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .context("cargo did not report meridian-cli's executable")
}

/// The suites (test targets of `crates/tooling/meridian-e2e`), in the order they run.
const SUITES: &[&str] = &["pod", "dns", "ha"];
/// The `ha` suite prints its client's, admissions' and Leases' record.
/// The `dns` suite prints what `getent`/`nslookup` answered in the pods:
/// shown for passing tests too.
const SHOWN_OUTPUT: &[&str] = &["dns", "ha"];

/// Builds the suites' test binaries; returns their paths in [`SUITES`] order.
fn build_suites() -> anyhow::Result<Vec<PathBuf>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut args = vec!["test", "-p", "meridian-e2e"];
    for suite in SUITES {
        args.extend(["--test", suite]);
    }
    args.extend(["--no-run", "--message-format=json"]);
    let output = Command::new(&cargo)
        .args(&args)
        .current_dir(workspace_root())
        .stderr(std::process::Stdio::inherit())
        .output()
        .context("running cargo test --no-run")?;
    if !output.status.success() {
        bail!("building the e2e suites failed");
    }
    let messages: Vec<serde_json::Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    SUITES
        .iter()
        .map(|suite| {
            messages
                .iter()
                .filter(|msg| {
                    msg["reason"] == "compiler-artifact" && msg["target"]["name"] == *suite
                })
                .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
                .with_context(|| format!("cargo did not report the e2e suite {suite}'s executable"))
        })
        .collect()
}

/// Installs `deploy/` (CRDs and the pod without the sidecar), the webhook
/// certificates, and waits until the pod's containers are all Ready.
pub fn install(
    kubectl: &Path,
    kubeconfig: &Path,
    registry: Option<&str>,
    started: Instant,
) -> anyhow::Result<()> {
    // `deploy/` as it is, or (images in a registry) a kustomization beside
    // it that retargets the image: kustomize takes relative paths only.
    let target = match registry {
        None => workspace_root().join("deploy"),
        Some(_) => {
            let dir = workspace_root().join("target").join("e2e-kustomization");
            std::fs::create_dir_all(&dir)?;
            let image = controller_image(registry);
            let (name, tag) = image.rsplit_once(':').unwrap_or((&image, DEV_TAG));
            std::fs::write(
                dir.join("kustomization.yaml"),
                format!(
                    "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../deploy\nimages:\n  - name: {CONTROLLER_REPO}\n    newName: {name}\n    newTag: {tag}\n"
                ),
            )?;
            dir
        }
    };
    step(started, "kubectl apply -k deploy/ (server-side)");
    kubectl_ok(
        kubectl,
        kubeconfig,
        &[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            &target.display().to_string(),
        ],
    )?;
    step(started, "webhook certificates (cargo xtask certs)");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let config = kube::Config::from_custom_kubeconfig(
            kube::config::Kubeconfig::read_from(kubeconfig)?,
            &Default::default(),
        )
        .await?;
        let client = kube::Client::try_from(config)?;
        for (secret, outcome) in crate::certs::apply(&client, NAMESPACE, 365, false).await? {
            eprintln!("  {NAMESPACE}/{secret}: {outcome:?}");
        }
        anyhow::Ok(())
    })?;
    step(
        started,
        "waiting for the Meridian pod's containers to be Ready (real probes)",
    );
    let rollout = kubectl_ok(
        kubectl,
        kubeconfig,
        &[
            "rollout",
            "status",
            "-n",
            NAMESPACE,
            &format!("deploy/{DEPLOYMENT}"),
            "--timeout=300s",
        ],
    );
    if let Err(error) = rollout {
        dump_diagnostics(kubectl, kubeconfig);
        return Err(error);
    }
    let pods = kubectl_ok(
        kubectl,
        kubeconfig,
        &["get", "pods", "-n", NAMESPACE, "-o", "wide"],
    )?;
    println!("{pods}");
    Ok(())
}

/// Runs every suite (each to its end, so that one failing suite does not
/// hide the other's results).
fn run_suites(
    suites: &[PathBuf],
    kubectl: &Path,
    kubeconfig: &Path,
    images: &SuiteImages,
    test_args: &[String],
) -> anyhow::Result<()> {
    let cli = build_cli()?;
    let mut failed = Vec::new();
    for (suite, name) in suites.iter().zip(SUITES) {
        eprintln!("[e2e] suite {name}");
        let mut command = Command::new(suite);
        command.args(["--ignored", "--test-threads=1"]);
        if SHOWN_OUTPUT.contains(name) {
            command.arg("--nocapture");
        }
        let status = command
            .args(test_args)
            .env("MERIDIAN_E2E_CLI", &cli)
            .env("MERIDIAN_E2E_KUBECONFIG", kubeconfig)
            .env("MERIDIAN_E2E_KUBECTL", kubectl)
            .env("MERIDIAN_E2E_CONTROL_PLANE_NS", NAMESPACE)
            .env("MERIDIAN_E2E_HTTP_IMAGE", &images.http_test)
            .env("MERIDIAN_E2E_DNSUTILS_IMAGE", &images.dnsutils)
            .current_dir(workspace_root())
            .status()
            .with_context(|| format!("running the e2e suite {name}"))?;
        if !status.success() {
            failed.push(format!("{name} ({status})"));
        }
    }
    if !failed.is_empty() {
        bail!("e2e suites failed: {}", failed.join(", "));
    }
    Ok(())
}

/// Creates (or reuses) a kind cluster, loads the images into it and
/// returns a kubeconfig for it.
fn kind_cluster(name: &str, built: &BuiltImages) -> anyhow::Result<PathBuf> {
    let clusters = Command::new("kind")
        .args(["get", "clusters"])
        .output()
        .context("running kind (install it: `go install sigs.k8s.io/kind@latest`)")?;
    let exists = String::from_utf8_lossy(&clusters.stdout)
        .lines()
        .any(|line| line.trim() == name);
    if !exists {
        run_ok(Command::new("kind").args(["create", "cluster", "--name", name]))?;
    }
    let kubeconfig = workspace_root()
        .join("target")
        .join(format!("kind-{name}.kubeconfig"));
    run_ok(Command::new("kind").args([
        "export",
        "kubeconfig",
        "--name",
        name,
        "--kubeconfig",
        &kubeconfig.display().to_string(),
    ]))?;
    for image in node_images(built)? {
        run_ok(Command::new("kind").args(["load", "docker-image", "--name", name, &image]))?;
    }
    Ok(kubeconfig)
}

/// Tags the images under `registry` and pushes them.
fn push_images(registry: &str, built: &BuiltImages) -> anyhow::Result<()> {
    let docker = Docker::locate();
    for image in node_images(built)? {
        let target = format!("{registry}/{image}");
        docker.tag(&image, &target)?;
        let status = docker.command().args(["push", &target]).status()?;
        if !status.success() {
            bail!("docker push {target} failed with {status}");
        }
    }
    Ok(())
}

fn run_ok(command: &mut Command) -> anyhow::Result<()> {
    let status = command
        .status()
        .with_context(|| format!("running {command:?}"))?;
    if !status.success() {
        bail!("{command:?} failed with {status}");
    }
    Ok(())
}

fn kubectl_ok(kubectl: &Path, kubeconfig: &Path, args: &[&str]) -> anyhow::Result<String> {
    let (ok, out) = local_cluster::kubectl::run(kubectl, kubeconfig, args, None)?;
    if !ok {
        bail!("kubectl {} failed:\n{out}", args.join(" "));
    }
    Ok(out)
}

/// What a failing run leaves to read: the pod, its events and logs.
fn dump_diagnostics(kubectl: &Path, kubeconfig: &Path) {
    for args in [
        vec!["get", "pods", "-A", "-o", "wide"],
        vec!["describe", "pods", "-n", NAMESPACE],
        vec![
            "logs",
            "-n",
            NAMESPACE,
            "deploy/linkerd-destination",
            "--all-containers",
            "--tail=50",
        ],
        vec!["get", "events", "-A", "--sort-by=.lastTimestamp"],
    ] {
        if let Ok((_, out)) = local_cluster::kubectl::run(kubectl, kubeconfig, &args, None) {
            eprintln!("--- kubectl {}\n{out}", args.join(" "));
        }
    }
}

/// `cargo xtask up --real-node`: the Meridian pod for real on a local node,
/// with the sample workloads as real Deployments; Ctrl-C stops everything
/// and cleans up the host.
pub fn up_real_node(profile: &str) -> anyhow::Result<()> {
    let started = Instant::now();
    let bins = crate::cluster::build()?;
    let built = crate::images::build(&ImagesArgs {
        profile: profile.to_string(),
        no_controller: false,
    })?;
    let kubectl = bins.kubectl();
    let dir = cluster_dir().with_file_name("up-real-node");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let cluster = start_real_node(&runtime, &dir, bins, &built, &[], started)?;
    let kubeconfig = cluster.kubeconfig_path().to_path_buf();
    let result = install(&kubectl, &kubeconfig, None, started).and_then(|()| {
        let samples = workspace_root().join("deploy/samples");
        for file in ["demo.yaml", "demo-workloads.yaml"] {
            let path = samples.join(file).display().to_string();
            kubectl_ok(&kubectl, &kubeconfig, &["apply", "-f", &path])?;
        }
        kubectl_ok(
            &kubectl,
            &kubeconfig,
            &[
                "rollout",
                "status",
                "-n",
                "demo",
                "deploy/web",
                "--timeout=180s",
            ],
        )?;
        Ok(())
    });
    match &result {
        Ok(()) => {
            println!(
                "\nMeridian runs as a real pod ({:.1}s).\n\n  export KUBECONFIG={}\n  kubectl get pods -A -o wide\n  kubectl -n {NAMESPACE} port-forward deploy/{DEPLOYMENT} 8086 8090 &\n  cargo run -q -p meridian-cli -- get web.demo.svc.cluster.local:80\n\nCtrl-C stops everything and cleans up the host.",
                started.elapsed().as_secs_f64(),
                kubeconfig.display()
            );
            runtime.block_on(async {
                let _ = tokio::signal::ctrl_c().await;
            });
        }
        Err(_) => dump_diagnostics(&kubectl, &kubeconfig),
    }
    println!("stopping and cleaning up…");
    cluster.shutdown();
    let _ = std::fs::remove_dir_all(&dir);
    result
}
