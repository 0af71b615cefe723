//! `cargo xtask cluster build|up|down|env|load|pin`.
//!
//! `cluster up` starts the kubelet-less control plane in the background;
//! `cluster up --real-node` runs it with a real node (containerd, kubelet,
//! kube-proxy, kube-scheduler, the cluster DNS) in the foreground until
//! Ctrl-C or `cluster down`, then undoes every change to the host.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use local_cluster::{
    Cluster, ClusterOptions, ClusterState, KubeBinaries, Lifetime,
    images::Docker,
    real_node::{self, dns},
};

use crate::paths::cluster_dir;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Builds kube-apiserver, kube-controller-manager and etcd from the pinned Go modules (cached).
    Build,
    /// Starts the control plane in the background and writes a kubeconfig;
    /// with --real-node, also a real node, in the foreground (Ctrl-C stops).
    Up {
        /// Run a real node: containerd, kubelet, kube-proxy, kube-scheduler (needs root and `.ci/install-node-deps`).
        #[arg(long)]
        real_node: bool,
        /// Docker images to load into the real node (the pause, CoreDNS, HTTP test and dnsutils images always are).
        #[arg(long = "image")]
        images: Vec<String>,
    },
    /// Loads Docker images into the running real node's containerd (`docker save | ctr images import`).
    Load {
        /// Image references, e.g. meridian/controller:dev.
        #[arg(required = true)]
        images: Vec<String>,
    },
    /// Stops the background control plane and removes its files.
    Down,
    /// Prints `export KUBECONFIG=…` for the background control plane.
    Env,
    /// Re-pins the Kubernetes version: regenerates the staging-module replaces of xtask/gotools/kubebin.
    Pin {
        /// A k8s.io/kubernetes version, e.g. v1.36.3.
        version: String,
    },
}

pub fn run(command: ClusterCommand) -> anyhow::Result<()> {
    match command {
        ClusterCommand::Build => {
            let started = Instant::now();
            let bins = build()?;
            println!(
                "control-plane binaries ready in {} ({:.1}s)",
                bins.dir.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(())
        }
        ClusterCommand::Up {
            real_node: false, ..
        } => up(),
        ClusterCommand::Up {
            real_node: true,
            images,
        } => up_real_node(images),
        ClusterCommand::Load { images } => load(&images),
        ClusterCommand::Down => down(),
        ClusterCommand::Env => {
            let state = ClusterState::load(&cluster_dir())?
                .context("no local cluster is running; start one with `cargo xtask cluster up`")?;
            println!("export KUBECONFIG={}", state.kubeconfig.display());
            Ok(())
        }
        ClusterCommand::Pin { version } => crate::pin::pin(&version),
    }
}

/// Builds (or finds in the cache) the control-plane binaries.
pub fn build() -> anyhow::Result<KubeBinaries> {
    Ok(KubeBinaries::ensure(&|line| eprintln!("{line}"))?)
}

fn up() -> anyhow::Result<()> {
    let dir = cluster_dir();
    if let Some(state) = ClusterState::load(&dir)? {
        if state.pids.iter().all(|(_, pid)| is_running(*pid)) {
            println!(
                "a local cluster is already running at {}\nexport KUBECONFIG={}",
                state.apiserver_url,
                state.kubeconfig.display()
            );
            return Ok(());
        }
        state.stop_all();
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let bins = build()?;
    let started = Instant::now();
    let runtime = tokio::runtime::Runtime::new()?;
    let state = runtime.block_on(async {
        let cluster =
            Cluster::start_with(ClusterOptions::new(&dir, Lifetime::Detached), bins).await?;
        let client = cluster.client()?;
        local_cluster::node::ensure_node(&client, "node-1", Some("zone-a")).await?;
        anyhow::Ok(cluster.detach())
    })?;
    println!(
        "local control plane {} ready at {} in {:.1}s (logs in {})",
        state.kubernetes_version,
        state.apiserver_url,
        started.elapsed().as_secs_f64(),
        state.work_dir.join("logs").display()
    );
    for (name, pid) in &state.pids {
        println!("  {name}: pid {pid}, RSS {}", rss(*pid));
    }
    println!("export KUBECONFIG={}", state.kubeconfig.display());
    Ok(())
}

/// `cluster up --real-node`: everything tied to this process, which waits
/// for Ctrl-C (or `cluster down`'s SIGTERM) and then cleans up.
fn up_real_node(extra_images: Vec<String>) -> anyhow::Result<()> {
    let dir = cluster_dir();
    if let Some(state) = ClusterState::load(&dir)?
        && state.pids.iter().any(|(_, pid)| is_running(*pid))
    {
        bail!(
            "a local cluster is already running at {}; stop it first with `cargo xtask cluster down`",
            state.apiserver_url
        );
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let bins = build()?;
    let docker = Docker::locate();
    docker.check_daemon()?;
    let progress = |l: &str| eprintln!("[images] {l}");
    let http_test = local_cluster::images::ensure_http_test(&docker, &progress)?;
    let base = local_cluster::images::ensure_base(&docker, &progress)?;
    let dnsutils = local_cluster::images::ensure_dnsutils(&docker, &base, &progress)?;
    let mut images = vec![
        http_test.reference.clone(),
        http_test.dev.clone(),
        dnsutils.reference.clone(),
        dnsutils.dev.clone(),
    ];
    images.extend(extra_images);
    let started = Instant::now();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut options = ClusterOptions::new(&dir, Lifetime::Tied);
        options.real_node = true;
        options.node_images = images;
        println!(
            "starting etcd, kube-apiserver ({}), kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy and CoreDNS (logs in {})",
            real_node::BRIDGE_IP,
            dir.join("logs").display()
        );
        let mut cluster = Cluster::start_with(options, bins).await?;
        let mut state = cluster.state();
        state.owner_pid = Some(std::process::id());
        state.save()?;
        println!(
            "local cluster {} with node {} Ready, cluster DNS answering, at {} in {:.1}s",
            state.kubernetes_version,
            real_node::NODE_NAME,
            state.apiserver_url,
            started.elapsed().as_secs_f64(),
        );
        for (name, pid) in &state.pids {
            println!("  {name}: pid {pid}, RSS {}", rss(*pid));
        }
        println!(
            "  pods: {} on bridge {}; Services: {}",
            real_node::POD_CIDR,
            real_node::BRIDGE,
            real_node::SERVICE_CIDR
        );
        println!(
            "  DNS: {}/{} at {} for {} (CoreDNS; nothing forwarded); try: kubectl run -it --rm dns --image={} --image-pull-policy=Never -- nslookup kubernetes.default.svc.{}",
            dns::DNS_NAMESPACE,
            dns::DNS_SERVICE,
            dns::CLUSTER_DNS_IP,
            dns::CLUSTER_DOMAIN,
            dnsutils.dev,
            dns::CLUSTER_DOMAIN,
        );
        println!("export KUBECONFIG={}", state.kubeconfig.display());
        println!("Ctrl-C (or `cargo xtask cluster down`) stops everything and cleans up.");
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                () = tokio::time::sleep(Duration::from_secs(2)) => {
                    if let Err(error) = cluster.check_health() {
                        eprintln!("a component died: {error}");
                        break;
                    }
                }
            }
        }
        println!("stopping and cleaning up…");
        cluster.shutdown();
        anyhow::Ok(())
    })?;
    let _ = std::fs::remove_dir_all(&dir);
    println!("local cluster stopped; host cleaned up");
    Ok(())
}

fn load(images: &[String]) -> anyhow::Result<()> {
    let dir = cluster_dir();
    let state = ClusterState::load(&dir)?.context(
        "no local cluster is running; start one with `cargo xtask cluster up --real-node`",
    )?;
    if !state.real_node {
        bail!(
            "the local cluster has no real node; start it with `cargo xtask cluster up --real-node`"
        );
    }
    let address = real_node::containerd_address(&state.work_dir);
    let refs: Vec<&str> = images.iter().map(String::as_str).collect();
    let started = Instant::now();
    local_cluster::images::import_into_containerd(
        &Docker::locate(),
        std::path::Path::new("ctr"),
        &address,
        &refs,
        &state.work_dir,
    )?;
    println!(
        "loaded {} into the node's containerd in {:.1}s",
        images.join(", "),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

fn down() -> anyhow::Result<()> {
    let dir = cluster_dir();
    let Some(state) = ClusterState::load(&dir)? else {
        if real_node::cleanup_host(true)? {
            println!("cleaned up what a real node left on this host");
        } else {
            println!("no local cluster is running");
        }
        return Ok(());
    };
    if let Some(owner) = state.owner_pid.filter(|pid| is_running(*pid)) {
        // `cluster up --real-node` cleans up itself on SIGTERM.
        local_cluster::process::terminate(owner, Duration::from_secs(90));
    }
    state.stop_all();
    if state.real_node {
        real_node::cleanup_host(true)?;
    }
    let deadline = Instant::now() + Duration::from_secs(15);
    while state.pids.iter().any(|(_, pid)| is_running(*pid)) {
        if Instant::now() > deadline {
            bail!(
                "some control-plane processes did not stop: {:?}",
                state.pids
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // A `cluster up --real-node` owner removes the directory itself.
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    if state.real_node {
        println!("local cluster stopped; real node cleaned up");
    } else {
        println!("local control plane stopped");
    }
    Ok(())
}

fn is_running(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(local_cluster::process::is_alive)
}

/// A process's resident memory as printed by /proc (e.g. "312 MiB").
pub fn rss(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
        .map(|kb| format!("{} MiB", kb / 1024))
        .unwrap_or_else(|| "unknown".into())
}
