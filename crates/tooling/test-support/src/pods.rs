//! Pods without a kubelet, in the test's namespace (see
//! [`local_cluster::workload`] for how readiness is faked).

use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::Pod;
use local_cluster::workload;

pub use local_cluster::workload::PodSpecBuilder;

use crate::{NODE_NAME, TestEnv};

impl TestEnv {
    /// A pod description bound to the fake Node.
    pub fn pod(&self, name: &str) -> PodSpecBuilder {
        PodSpecBuilder::new(name, NODE_NAME)
    }

    /// Creates the pod and makes it Running and Ready with a fresh IP.
    pub async fn create_ready_pod(&self, spec: &PodSpecBuilder) -> (Pod, Ipv4Addr) {
        workload::create_ready_pod(&self.api::<Pod>(), spec)
            .await
            .unwrap_or_else(|e| panic!("creating ready pod {}: {e}", spec.name))
    }

    /// Sets the pod's Ready condition (keeping its IP).
    pub async fn set_pod_ready(&self, name: &str, ip: Ipv4Addr, ready: bool) -> Pod {
        workload::set_status(&self.api::<Pod>(), name, ip, ready)
            .await
            .unwrap_or_else(|e| panic!("patching status of pod {name}: {e}"))
    }

    /// Deletes the pod with grace period 0.
    pub async fn delete_pod_now(&self, name: &str) {
        workload::delete_now(&self.api::<Pod>(), name)
            .await
            .unwrap_or_else(|e| panic!("deleting pod {name}: {e}"))
    }
}
