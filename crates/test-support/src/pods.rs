//! Pods without a kubelet: create them bound to the fake Node, then write a
//! Running/Ready status with a pod IP, flip readiness, delete them at once.

use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    sync::atomic::{AtomicU32, Ordering},
};

use k8s_openapi::api::core::v1::{Container, ContainerPort, Pod, PodSpec};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};

use crate::{NODE_NAME, TestEnv};

static NEXT_IP: AtomicU32 = AtomicU32::new(1);

/// A unique pod IP in 10.244.0.0/16 (unique within this test binary).
pub fn next_pod_ip() -> Ipv4Addr {
    let n = NEXT_IP.fetch_add(1, Ordering::Relaxed);
    Ipv4Addr::new(10, 244, ((n >> 8) & 0xff) as u8, (n & 0xff) as u8)
}

/// A pod description for [`TestEnv::create_ready_pod`].
#[derive(Clone, Debug, Default)]
pub struct PodSpecBuilder {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// (port name, container port)
    pub ports: Vec<(Option<String>, i32)>,
}

impl PodSpecBuilder {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            ..Default::default()
        }
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_string(), value.to_string());
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.annotations.insert(key.to_string(), value.to_string());
        self
    }

    pub fn port(mut self, name: Option<&str>, port: i32) -> Self {
        self.ports.push((name.map(str::to_string), port));
        self
    }

    /// The Pod object (bound to the fake Node).
    pub fn build(&self) -> Pod {
        let mut pod = Pod::default();
        pod.metadata.name = Some(self.name.clone());
        pod.metadata.labels = Some(self.labels.clone());
        pod.metadata.annotations = Some(self.annotations.clone());
        pod.spec = Some(PodSpec {
            node_name: Some(NODE_NAME.to_string()),
            containers: vec![Container {
                name: "app".to_string(),
                image: Some("example.invalid/app:test".to_string()),
                ports: Some(
                    self.ports
                        .iter()
                        .map(|(name, port)| ContainerPort {
                            name: name.clone(),
                            container_port: *port,
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }],
            ..Default::default()
        });
        pod
    }
}

fn status_patch(ip: Ipv4Addr, ready: bool) -> serde_json::Value {
    let flag = if ready { "True" } else { "False" };
    serde_json::json!({
        "status": {
            "phase": "Running",
            "hostIP": "10.0.1.1",
            "podIP": ip.to_string(),
            "podIPs": [{ "ip": ip.to_string() }],
            "conditions": [
                { "type": "Initialized", "status": "True" },
                { "type": "Ready", "status": flag },
                { "type": "ContainersReady", "status": flag },
            ],
            "containerStatuses": [{
                "name": "app",
                "ready": ready,
                "restartCount": 0,
                "image": "example.invalid/app:test",
                "imageID": "",
                "state": { "running": {} },
            }],
        }
    })
}

impl TestEnv {
    /// Creates the pod and makes it Running and Ready with a fresh IP.
    pub async fn create_ready_pod(&self, spec: &PodSpecBuilder) -> (Pod, Ipv4Addr) {
        let pods = self.api::<Pod>();
        pods.create(&PostParams::default(), &spec.build())
            .await
            .unwrap_or_else(|e| panic!("creating pod {}: {e}", spec.name));
        let ip = next_pod_ip();
        let pod = self.patch_pod_status(&spec.name, ip, true).await;
        (pod, ip)
    }

    /// Sets the pod's Ready condition (keeping its IP).
    pub async fn set_pod_ready(&self, name: &str, ip: Ipv4Addr, ready: bool) -> Pod {
        self.patch_pod_status(name, ip, ready).await
    }

    async fn patch_pod_status(&self, name: &str, ip: Ipv4Addr, ready: bool) -> Pod {
        self.api::<Pod>()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(status_patch(ip, ready)),
            )
            .await
            .unwrap_or_else(|e| panic!("patching status of pod {name}: {e}"))
    }

    /// Deletes the pod with grace period 0 (no kubelet will finish a graceful delete).
    pub async fn delete_pod_now(&self, name: &str) {
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        };
        self.api::<Pod>()
            .delete(name, &params)
            .await
            .unwrap_or_else(|e| panic!("deleting pod {name}: {e}"));
    }
}
