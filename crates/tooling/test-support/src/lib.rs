//! Fixtures for tests that need Kubernetes, in the manner of envtest + kwok.
//!
//! The first call to [`TestEnv::new`] in a test binary starts one real
//! control plane (etcd, kube-apiserver, kube-controller-manager) shared by
//! every test in that binary; each test gets its own namespace. The cluster
//! processes die with the test binary, even when a test panics.
//!
//! No kubelet runs, so [`TestEnv::create_ready_pod`] creates a pod bound to
//! the fake Node and writes a Running/Ready status with a pod IP through the
//! `pods/status` subresource, as kwok does. EndpointSlices are then made by
//! kube-controller-manager itself.
//!
//! [`LinkedCluster`] is a second control plane a multicluster test starts
//! for itself. [`RealNodeCluster`] is the other kind: a real node (containerd, kubelet,
//! kube-proxy) where pods run real containers and probes.
//!
//! Test helpers panic with a clear message on failure: that is how a test fails.
#![allow(clippy::unwrap_used)]

pub mod cli;
pub mod dashboards;
pub mod deploy;
mod linked;
pub mod original_series;
pub mod otlp;
mod pods;
pub mod process;
pub mod raw_h2;
mod real_node;
mod shared;
mod wait;
pub mod webhooks;

use std::sync::atomic::{AtomicU32, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::{Api, api::PostParams};

pub use linked::LinkedCluster;
pub use local_cluster::{LocalCa, ServingCert};
pub use pods::PodSpecBuilder;
pub use process::{ServerProcess, free_addr};
pub use real_node::RealNodeCluster;
pub use shared::SharedCluster;
pub use wait::{eventually, next_matching};

/// The name of the fake Node that test pods are bound to.
pub const NODE_NAME: &str = "node-1";

/// A test's view of the shared cluster: a client and a fresh namespace.
pub struct TestEnv {
    pub client: kube::Client,
    pub ns: String,
    cluster: &'static SharedCluster,
}

static NS_COUNTER: AtomicU32 = AtomicU32::new(0);

impl TestEnv {
    /// Starts (once per test binary) the shared cluster, then creates a
    /// namespace `<prefix>-<pid>-<n>` for this test.
    pub async fn new(prefix: &str) -> Self {
        init_tracing();
        let cluster = SharedCluster::get();
        let client = cluster.client();
        let n = NS_COUNTER.fetch_add(1, Ordering::Relaxed);
        let ns = format!("{prefix}-{}-{n}", std::process::id());
        let namespaces: Api<Namespace> = Api::all(client.clone());
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(ns.clone());
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {ns}: {e}"));
        Self {
            client,
            ns,
            cluster,
        }
    }

    /// The shared cluster (kubeconfig path, version, CA).
    pub fn cluster(&self) -> &'static SharedCluster {
        self.cluster
    }

    /// The arguments every policy controller a test starts takes: this
    /// cluster, the two addresses, and this test's namespace as the control
    /// plane's (so its status-writer Lease is the test's own, and a
    /// controller another test killed holds no Lease this one waits on).
    pub fn policy_controller_args(
        &self,
        grpc: std::net::SocketAddr,
        admin: std::net::SocketAddr,
    ) -> Vec<String> {
        vec![
            format!("--kubeconfig={}", self.cluster.kubeconfig().display()),
            format!("--grpc-addr={grpc}"),
            format!("--admin-addr={admin}"),
            format!("--control-plane-namespace={}", self.ns),
        ]
    }

    /// A typed API in this test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_test_writer()
        .try_init();
}
