//! The one control plane shared by all tests of a test binary.
//!
//! It is started on a dedicated thread that lives as long as the process:
//! the children are tied to that thread with `PR_SET_PDEATHSIG`, so they are
//! killed when the test binary exits, however it exits.

use std::{
    path::{Path, PathBuf},
    sync::OnceLock,
};

use local_cluster::{Cluster, ClusterOptions, Lifetime};

/// What tests need to know about the shared cluster.
pub struct SharedCluster {
    config: kube::Config,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    work_dir: PathBuf,
    version: String,
}

static SHARED: OnceLock<SharedCluster> = OnceLock::new();

impl SharedCluster {
    /// The shared cluster, started on first use.
    pub fn get() -> &'static SharedCluster {
        SHARED.get_or_init(start)
    }

    /// A new client (create one per tokio runtime, i.e. per test).
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone()).expect("building a client for the test cluster")
    }

    /// The client configuration with admin credentials.
    pub fn config(&self) -> &kube::Config {
        &self.config
    }

    /// A kubeconfig file for `kubectl` and for Meridian binaries under test.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// A kubectl of the cluster's version.
    pub fn kubectl_path(&self) -> &Path {
        &self.kubectl
    }

    /// Runs kubectl against the cluster; returns (success, stdout + stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        local_cluster::kubectl::run(&self.kubectl, &self.kubeconfig, args, stdin)
            .expect("running kubectl")
    }

    /// Installs the CRDs of `deploy/crds/` (once per test binary) and waits
    /// until they are established.
    pub fn ensure_crds(&self) {
        static INSTALLED: std::sync::Mutex<bool> = std::sync::Mutex::new(false);
        let mut installed = INSTALLED.lock().unwrap_or_else(|p| p.into_inner());
        if *installed {
            return;
        }
        let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy/crds");
        local_cluster::kubectl::install_crds(&self.kubectl, &self.kubeconfig, &crds)
            .unwrap_or_else(|e| panic!("installing CRDs: {e}"));
        *installed = true;
    }

    /// Where the control plane keeps its logs and data.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The pinned Kubernetes version, e.g. `v1.36.3`.
    pub fn kubernetes_version(&self) -> &str {
        &self.version
    }
}

fn start() -> SharedCluster {
    let base = std::env::temp_dir();
    remove_stale_work_dirs(&base);
    let work_dir = base.join(format!("meridian-test-{}", std::process::id()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("meridian-test-cluster".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = tx.send(Err(format!("tokio runtime: {error}")));
                    return;
                }
            };
            let options = ClusterOptions::new(&work_dir, Lifetime::Tied);
            let started = runtime.block_on(async {
                let cluster = Cluster::start(options).await?;
                let client = cluster.client()?;
                local_cluster::node::ensure_node(&client, crate::NODE_NAME, Some("zone-a")).await?;
                Ok::<_, local_cluster::ClusterError>(cluster)
            });
            match started {
                Ok(cluster) => {
                    let shared = cluster.kube_config().map(|config| SharedCluster {
                        config,
                        kubeconfig: cluster.kubeconfig_path().to_path_buf(),
                        kubectl: cluster.binaries().kubectl(),
                        work_dir: cluster.work_dir().to_path_buf(),
                        version: cluster.kubernetes_version().to_string(),
                    });
                    let _ = tx.send(shared.map_err(|e| e.to_string()));
                    // Keep the cluster (and this thread, the children's
                    // parent) alive until the process exits.
                    let _keep = cluster;
                    loop {
                        std::thread::park();
                    }
                }
                Err(error) => {
                    let _ = tx.send(Err(error.to_string()));
                }
            }
        })
        .expect("spawning the test cluster thread");
    match rx.recv() {
        Ok(Ok(shared)) => shared,
        Ok(Err(error)) => panic!("the local control plane did not start: {error}"),
        Err(_) => panic!("the local control plane thread died while starting"),
    }
}

/// Deletes work directories left by test binaries that are no longer running.
fn remove_stale_work_dirs(base: &Path) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("meridian-test-"))
            .and_then(|pid| pid.parse::<i32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
