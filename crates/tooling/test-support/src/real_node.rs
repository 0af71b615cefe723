//! A cluster with a real node for tests whose pods must really run:
//! containerd, kubelet (real probes), kube-proxy (ClusterIP Services routed
//! from the host too), kube-scheduler, ServiceAccount tokens, the cluster
//! DNS (CoreDNS as `kube-system/kube-dns`; pods resolve Services by name),
//! and the locally built pause and HTTP test images already loaded.
//!
//! - [`RealNodeCluster::start`] gives a cluster owned by the test: dropping
//!   it (also when the test panics) stops everything and undoes every change
//!   to the host (bridge, iptables rules, mounts, sysctls).
//! - [`RealNodeCluster::get`] gives one cluster shared by the tests of a test
//!   binary, stopped and cleaned up when the binary exits.
//!
//! One real node runs per host: a start waits (up to 15 minutes) for one of
//! another run to go away. Needs root and `.ci/install-node-deps`.

use std::{
    path::{Path, PathBuf},
    sync::{Mutex, OnceLock},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::{Api, api::PostParams};
use local_cluster::{
    Cluster, ClusterError, ClusterOptions, Lifetime,
    images::{self, Docker, Image},
    real_node::NodeError,
};

/// A running cluster with a real node.
pub struct RealNodeCluster {
    cluster: Option<Cluster>,
    config: kube::Config,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    work_dir: PathBuf,
    http_test: Image,
    kubectl_image: Image,
}

static SHARED: OnceLock<SharedHandle> = OnceLock::new();
/// The shared cluster itself, taken and shut down at process exit.
static SHARED_CLUSTER: Mutex<Option<Cluster>> = Mutex::new(None);

struct SharedHandle(RealNodeCluster);

impl RealNodeCluster {
    /// Starts a cluster with a real node, owned by the caller. Call from the
    /// thread that keeps it (the node's processes die with that thread).
    pub async fn start() -> Self {
        crate::init_tracing();
        let work_dir = std::env::temp_dir().join(format!(
            "{WORK_DIR_PREFIX}{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let docker = Docker::locate();
        let progress = |line: &str| eprintln!("[test-support] {line}");
        docker
            .check_daemon()
            .unwrap_or_else(|e| panic!("the real node needs Docker for its images: {e}"));
        let base = images::ensure_base(&docker, &progress)
            .unwrap_or_else(|e| panic!("building the base image: {e}"));
        let http_test = images::ensure_http_test(&docker, &progress)
            .unwrap_or_else(|e| panic!("building the HTTP test image: {e}"));
        let binaries = tokio::task::spawn_blocking(|| {
            local_cluster::KubeBinaries::ensure(&|line| eprintln!("[local-cluster] {line}"))
        })
        .await
        .expect("joining the build")
        .unwrap_or_else(|e| panic!("building the Kubernetes binaries: {e}"));
        let kubectl_image =
            images::ensure_kubectl_image(&docker, &base, &binaries.kubectl(), &progress)
                .unwrap_or_else(|e| panic!("building the kubectl image: {e}"));
        let deadline = Instant::now() + Duration::from_secs(15 * 60);
        let mut last_notice = Instant::now() - Duration::from_secs(60);
        let cluster = loop {
            let mut options = ClusterOptions::new(&work_dir, Lifetime::Tied);
            options.real_node = true;
            options.node_images = vec![
                http_test.reference.clone(),
                http_test.dev.clone(),
                kubectl_image.reference.clone(),
            ];
            match Cluster::start_with(options, binaries.clone()).await {
                Ok(cluster) => break cluster,
                Err(ClusterError::Node(NodeError::AlreadyRunning { work_dir: other }))
                    if Instant::now() < deadline =>
                {
                    if last_notice.elapsed() >= Duration::from_secs(60) {
                        eprintln!(
                            "[test-support] another real node runs on this host ({}); waiting for it to stop",
                            other.display()
                        );
                        last_notice = Instant::now();
                    }
                    tokio::time::sleep(Duration::from_secs(2)).await;
                }
                Err(error) => panic!("the local cluster with a real node did not start: {error}"),
            }
        };
        // The host is clean now (a stale node was cleaned up by the start):
        // remove work dirs of test binaries that are gone.
        remove_stale_work_dirs();
        let config = cluster.kube_config().expect("client config");
        Self {
            config,
            kubeconfig: cluster.kubeconfig_path().to_path_buf(),
            kubectl: cluster.binaries().kubectl(),
            work_dir: cluster.work_dir().to_path_buf(),
            cluster: Some(cluster),
            http_test,
            kubectl_image,
        }
    }

    /// The cluster shared by this test binary's tests, started on first
    /// use; stopped and cleaned up when the test binary exits.
    pub fn get() -> &'static RealNodeCluster {
        &SHARED.get_or_init(start_shared).0
    }

    /// A new client with admin credentials (one per tokio runtime).
    pub fn client(&self) -> kube::Client {
        kube::Client::try_from(self.config.clone()).expect("building a client")
    }

    /// The admin kubeconfig file.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Runs kubectl against the cluster; returns (success, stdout + stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        local_cluster::kubectl::run(&self.kubectl, &self.kubeconfig, args, stdin)
            .expect("running kubectl")
    }

    /// The kubectl binary of the cluster's version.
    pub fn kubectl_path(&self) -> &Path {
        &self.kubectl
    }

    /// Where logs (`logs/kubelet.log`, …) and data live.
    pub fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    /// The tiny HTTP server image, loaded in the node (see
    /// `images/http-test/http-test.c`: `/`, `/ready`, `/ready/fail|ok`).
    pub fn http_test_image(&self) -> &str {
        &self.http_test.reference
    }

    /// An image whose entrypoint is kubectl, loaded in the node.
    pub fn kubectl_image(&self) -> &str {
        &self.kubectl_image.reference
    }

    /// Loads more Docker images into the node's containerd.
    pub fn load_images(&self, references: &[&str]) {
        let address = local_cluster::real_node::containerd_address(&self.work_dir);
        images::import_into_containerd(
            &Docker::locate(),
            Path::new("ctr"),
            &address,
            references,
            &self.work_dir,
        )
        .unwrap_or_else(|e| panic!("loading {references:?}: {e}"));
    }

    /// Creates namespace `<prefix>-<pid>-<n>` and waits for its `default`
    /// ServiceAccount (pods are refused before it exists).
    pub async fn namespace(&self, prefix: &str) -> String {
        let client = self.client();
        let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let ns = format!("{prefix}-{}-{n}", std::process::id());
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(ns.clone());
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {ns}: {e}"));
        let accounts: Api<ServiceAccount> = Api::namespaced(client, &ns);
        crate::eventually(
            "the namespace's default ServiceAccount",
            Duration::from_secs(30),
            || async {
                match accounts.get_opt("default").await {
                    Ok(Some(_)) => Ok(()),
                    other => Err(format!("{other:?}")),
                }
            },
        )
        .await;
        ns
    }
}

impl Drop for RealNodeCluster {
    fn drop(&mut self) {
        if let Some(cluster) = self.cluster.take() {
            cluster.shutdown();
            let _ = std::fs::remove_dir_all(&self.work_dir);
        }
    }
}

const WORK_DIR_PREFIX: &str = "meridian-real-node-test-";

/// Deletes real-node work dirs whose test binary is no longer running.
fn remove_stale_work_dirs() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(WORK_DIR_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

static COUNTER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn start_shared() -> SharedHandle {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("meridian-real-node".into())
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
            let started = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                runtime.block_on(RealNodeCluster::start())
            }));
            match started {
                Ok(mut handle) => {
                    // The cluster moves to a static so that the exit hook can
                    // shut it down; this thread (the processes' parent) parks.
                    *SHARED_CLUSTER.lock().unwrap_or_else(|p| p.into_inner()) =
                        handle.cluster.take();
                    register_exit_hook();
                    let _ = tx.send(Ok(handle));
                    loop {
                        std::thread::park();
                    }
                }
                Err(panic) => {
                    let message = panic
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "unknown panic".into());
                    let _ = tx.send(Err(message));
                }
            }
        })
        .expect("spawning the real-node thread");
    match rx.recv() {
        Ok(Ok(handle)) => SharedHandle(handle),
        Ok(Err(error)) => panic!("{error}"),
        Err(_) => panic!("the real-node thread died while starting"),
    }
}

extern "C" fn shut_down_shared() {
    let cluster = SHARED_CLUSTER
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(cluster) = cluster {
        let work_dir = cluster.work_dir().to_path_buf();
        cluster.shutdown();
        let _ = std::fs::remove_dir_all(work_dir);
    }
}

#[allow(unsafe_code)]
fn register_exit_hook() {
    // SAFETY: atexit only records the function pointer; the hook runs on
    // normal process exit (the test harness returns from main or calls
    // exit), when no other test thread uses the cluster.
    unsafe {
        libc::atexit(shut_down_shared);
    }
}
