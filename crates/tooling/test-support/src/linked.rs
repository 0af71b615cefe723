//! A second control plane for multicluster tests: another etcd,
//! kube-apiserver and kube-controller-manager on loopback, started by the
//! test on its own thread (so its processes die with the test), with the
//! fake Node and a namespace of the same name as the test's.

use std::{net::Ipv4Addr, path::PathBuf};

use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::{Api, api::PostParams};
use local_cluster::{Cluster, ClusterOptions, Lifetime, workload};

use crate::{NODE_NAME, PodSpecBuilder, TestEnv};

/// A linked cluster of a test.
pub struct LinkedCluster {
    cluster: Cluster,
    pub client: kube::Client,
    /// The namespace named as the test's.
    pub ns: String,
    _work_dir: tempfile::TempDir,
}

impl LinkedCluster {
    /// Starts the second control plane for `env`'s test.
    pub async fn start(env: &TestEnv) -> Self {
        let work_dir = tempfile::Builder::new()
            .prefix("meridian-linked-")
            .tempdir()
            .expect("a work directory for the linked cluster");
        let options = ClusterOptions::new(work_dir.path(), Lifetime::Tied);
        let cluster = Cluster::start(options)
            .await
            .unwrap_or_else(|e| panic!("starting the linked cluster: {e}"));
        let client = cluster.client().expect("a client for the linked cluster");
        local_cluster::node::ensure_node(&client, NODE_NAME, Some("zone-b"))
            .await
            .expect("the linked cluster's node");
        let mut namespace = Namespace::default();
        namespace.metadata.name = Some(env.ns.clone());
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .expect("the linked cluster's namespace");
        Self {
            cluster,
            client,
            ns: env.ns.clone(),
            _work_dir: work_dir,
        }
    }

    /// Its kubeconfig (admin credentials, loopback address), as a Secret of
    /// the local cluster carries it.
    pub fn kubeconfig(&self) -> String {
        std::fs::read_to_string(self.kubeconfig_path()).expect("the linked cluster's kubeconfig")
    }

    /// Its kubeconfig file.
    pub fn kubeconfig_path(&self) -> PathBuf {
        self.cluster.kubeconfig_path().to_path_buf()
    }

    /// A typed API in the test's namespace there.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// A pod description bound to its fake Node.
    pub fn pod(&self, name: &str) -> PodSpecBuilder {
        PodSpecBuilder::new(name, NODE_NAME)
    }

    /// Creates the pod there, Running and Ready with a fresh IP.
    pub async fn create_ready_pod(&self, spec: &PodSpecBuilder) -> Ipv4Addr {
        workload::create_ready_pod(&self.api::<Pod>(), spec)
            .await
            .unwrap_or_else(|e| panic!("creating ready pod {} there: {e}", spec.name))
            .1
    }

    /// Deletes the pod there with grace period 0.
    pub async fn delete_pod_now(&self, name: &str) {
        workload::delete_now(&self.api::<Pod>(), name)
            .await
            .unwrap_or_else(|e| panic!("deleting pod {name} there: {e}"))
    }

    /// Stops its kube-apiserver (etcd and the controller manager stay).
    pub fn stop_apiserver(&mut self) {
        self.cluster.stop_apiserver();
    }

    /// Starts its kube-apiserver again on the same port.
    pub async fn start_apiserver(&mut self) {
        self.cluster
            .start_apiserver()
            .await
            .unwrap_or_else(|e| panic!("restarting the linked cluster's apiserver: {e}"));
    }
}
