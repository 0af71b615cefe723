//! `cargo xtask cluster build|up|down|env|pin`.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Subcommand;
use local_cluster::{Cluster, ClusterOptions, ClusterState, KubeBinaries, Lifetime};

use crate::paths::cluster_dir;

#[derive(Subcommand)]
pub enum ClusterCommand {
    /// Builds kube-apiserver, kube-controller-manager and etcd from the pinned Go modules (cached).
    Build,
    /// Starts the control plane in the background and writes a kubeconfig.
    Up,
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
        ClusterCommand::Up => up(),
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

fn down() -> anyhow::Result<()> {
    let dir = cluster_dir();
    let Some(state) = ClusterState::load(&dir)? else {
        println!("no local cluster is running");
        return Ok(());
    };
    state.stop_all();
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
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    println!("local control plane stopped");
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
