//! Workloads without a kubelet, as kwok does it: pods are created bound to
//! the fake Node, then given a Running/Ready status with a pod IP through
//! the `pods/status` subresource. Used by tests and by `cargo xtask up`'s
//! sample workloads.

use std::{
    collections::BTreeMap,
    net::Ipv4Addr,
    sync::atomic::{AtomicU32, Ordering},
};

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Pod, PodSpec};
use kube::{
    Api,
    api::{DeleteParams, Patch, PatchParams, PostParams},
};

/// The proxy's inbound port, as the injector configures it.
pub const PROXY_INBOUND_PORT: u16 = 4143;

static NEXT_IP: AtomicU32 = AtomicU32::new(1);

/// A unique pod IP in 10.244.0.0/16 (unique within this process).
pub fn next_pod_ip() -> Ipv4Addr {
    let n = NEXT_IP.fetch_add(1, Ordering::Relaxed);
    let [_, _, hi, lo] = n.to_be_bytes();
    Ipv4Addr::new(10, 244, hi, lo)
}

/// A pod description.
#[derive(Clone, Debug, Default)]
pub struct PodSpecBuilder {
    pub name: String,
    pub node_name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    /// (port name, container port) of the app container.
    pub ports: Vec<(Option<String>, i32)>,
    pub service_account: Option<String>,
    /// Add a `linkerd-proxy` container and the control-plane label, as the
    /// proxy injector would.
    pub meshed_by: Option<String>,
    pub hostname: Option<String>,
    pub subdomain: Option<String>,
}

impl PodSpecBuilder {
    pub fn new(name: &str, node_name: &str) -> Self {
        Self {
            name: name.to_string(),
            node_name: node_name.to_string(),
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

    pub fn service_account(mut self, name: &str) -> Self {
        self.service_account = Some(name.to_string());
        self
    }

    /// Meshed by the control plane in `control_plane_ns`.
    pub fn meshed(mut self, control_plane_ns: &str) -> Self {
        self.meshed_by = Some(control_plane_ns.to_string());
        self
    }

    /// `spec.hostname` and `spec.subdomain` (StatefulSet-style DNS names).
    pub fn hostname(mut self, hostname: &str, subdomain: &str) -> Self {
        self.hostname = Some(hostname.to_string());
        self.subdomain = Some(subdomain.to_string());
        self
    }

    /// The Pod object.
    pub fn build(&self) -> Pod {
        let mut labels = self.labels.clone();
        let mut containers = vec![Container {
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
        }];
        if let Some(cp_ns) = &self.meshed_by {
            labels.insert("linkerd.io/control-plane-ns".to_string(), cp_ns.clone());
            let env = |name: &str, value: String| EnvVar {
                name: name.to_string(),
                value: Some(value),
                ..Default::default()
            };
            containers.push(Container {
                name: "linkerd-proxy".to_string(),
                image: Some("example.invalid/proxy:test".to_string()),
                env: Some(vec![
                    env(
                        "LINKERD2_PROXY_INBOUND_LISTEN_ADDR",
                        format!("0.0.0.0:{PROXY_INBOUND_PORT}"),
                    ),
                    env("LINKERD2_PROXY_ADMIN_LISTEN_ADDR", "0.0.0.0:4191".into()),
                    env("LINKERD2_PROXY_CONTROL_LISTEN_ADDR", "0.0.0.0:4190".into()),
                ]),
                ..Default::default()
            });
        }
        let mut pod = Pod::default();
        pod.metadata.name = Some(self.name.clone());
        pod.metadata.labels = Some(labels);
        pod.metadata.annotations = Some(self.annotations.clone());
        pod.spec = Some(PodSpec {
            node_name: Some(self.node_name.clone()),
            service_account_name: self.service_account.clone(),
            hostname: self.hostname.clone(),
            subdomain: self.subdomain.clone(),
            containers,
            ..Default::default()
        });
        pod
    }
}

/// The status a kubelet would write for a running pod.
pub fn running_status(ip: Ipv4Addr, ready: bool) -> serde_json::Value {
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

/// Creates the pod in `pods`' namespace and makes it Running and Ready.
pub async fn create_ready_pod(
    pods: &Api<Pod>,
    spec: &PodSpecBuilder,
) -> Result<(Pod, Ipv4Addr), kube::Error> {
    pods.create(&PostParams::default(), &spec.build()).await?;
    let ip = next_pod_ip();
    let pod = set_status(pods, &spec.name, ip, true).await?;
    Ok((pod, ip))
}

/// Writes a Running status with the given readiness.
pub async fn set_status(
    pods: &Api<Pod>,
    name: &str,
    ip: Ipv4Addr,
    ready: bool,
) -> Result<Pod, kube::Error> {
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(running_status(ip, ready)),
    )
    .await
}

/// Deletes a pod with grace period 0 (no kubelet would finish a graceful delete).
pub async fn delete_now(pods: &Api<Pod>, name: &str) -> Result<(), kube::Error> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..Default::default()
    };
    pods.delete(name, &params).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meshed_pods_carry_the_proxy_container_and_label() {
        let pod = PodSpecBuilder::new("web-0", "node-1")
            .label("app", "web")
            .port(Some("http"), 8080)
            .meshed("linkerd")
            .build();
        let spec = pod.spec.expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("node-1"));
        assert_eq!(spec.containers.len(), 2);
        assert_eq!(
            pod.metadata
                .labels
                .expect("labels")
                .get("linkerd.io/control-plane-ns")
                .map(String::as_str),
            Some("linkerd")
        );
    }

    #[test]
    fn pod_ips_are_unique() {
        let a = next_pod_ip();
        let b = next_pod_ip();
        assert_ne!(a, b);
        assert_eq!(a.octets()[..2], [10, 244]);
    }
}
