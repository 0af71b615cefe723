//! The end-to-end suite's view of a cluster where the Meridian pod runs for
//! real (`cargo xtask e2e`: the local real node, kind, or any kubeconfig).
//!
//! Tests reach the pod only the way users and proxies do: through its
//! Services and `kubectl port-forward` (as `linkerd diagnostics` does), with
//! the generated gRPC clients, and `kubectl apply` for the webhooks. Nothing
//! here starts a control plane: the cluster is given by the environment
//! `cargo xtask e2e` sets up:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `MERIDIAN_E2E_KUBECONFIG` | the cluster | required |
//! | `MERIDIAN_E2E_KUBECTL` | the kubectl to run | `kubectl` |
//! | `MERIDIAN_E2E_CONTROL_PLANE_NS` | where Meridian is installed | `linkerd` |
//! | `MERIDIAN_E2E_HTTP_IMAGE` | the small HTTP server image workloads run | `meridian/http-test:dev` |
//! | `MERIDIAN_E2E_DNSUTILS_IMAGE` | the image with `getent` and `nslookup` | `meridian/dnsutils:dev` |
//!
//! Helpers panic with a clear message on failure: that is how a test fails.
#![allow(clippy::unwrap_used)]

pub mod dns;
pub mod pods;
pub mod stream;

use std::{
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    path::PathBuf,
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicU32, Ordering},
    time::Duration,
};

use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace};
use kube::{
    Api,
    api::{DeleteParams, PostParams},
    config::{KubeConfigOptions, Kubeconfig},
};

/// How long a scenario waits for the cluster (real containers start slowly).
pub const TIMEOUT: Duration = Duration::from_secs(120);

/// The Meridian Deployment, as the chart names it.
pub const DESTINATION_DEPLOYMENT: &str = "linkerd-destination";
/// The ServiceAccount the pod runs as.
pub const DESTINATION_SERVICE_ACCOUNT: &str = "linkerd-destination";

/// The cluster under test.
pub struct Cluster {
    pub client: kube::Client,
    pub kubeconfig: PathBuf,
    pub kubectl: PathBuf,
    /// The namespace Meridian is installed in.
    pub control_plane_ns: String,
    /// The HTTP server image test workloads run.
    pub http_image: String,
    /// The DNS debugging image (`getent`, `nslookup`).
    pub dnsutils_image: String,
}

static NS_COUNTER: AtomicU32 = AtomicU32::new(0);

impl Cluster {
    /// The cluster named by the environment (see the crate docs).
    pub async fn from_env() -> Self {
        let kubeconfig: PathBuf = std::env::var_os("MERIDIAN_E2E_KUBECONFIG")
            .expect("MERIDIAN_E2E_KUBECONFIG is not set: run this suite with `cargo xtask e2e`")
            .into();
        let parsed = Kubeconfig::read_from(&kubeconfig)
            .unwrap_or_else(|e| panic!("reading {}: {e}", kubeconfig.display()));
        let config = kube::Config::from_custom_kubeconfig(parsed, &KubeConfigOptions::default())
            .await
            .unwrap_or_else(|e| panic!("loading {}: {e}", kubeconfig.display()));
        let client = kube::Client::try_from(config).expect("building a client");
        Self {
            client,
            kubeconfig,
            kubectl: std::env::var_os("MERIDIAN_E2E_KUBECTL")
                .map(PathBuf::from)
                .unwrap_or_else(|| "kubectl".into()),
            control_plane_ns: std::env::var("MERIDIAN_E2E_CONTROL_PLANE_NS")
                .unwrap_or_else(|_| "linkerd".into()),
            http_image: std::env::var("MERIDIAN_E2E_HTTP_IMAGE")
                .unwrap_or_else(|_| "meridian/http-test:dev".into()),
            dnsutils_image: std::env::var("MERIDIAN_E2E_DNSUTILS_IMAGE")
                .unwrap_or_else(|_| "meridian/dnsutils:dev".into()),
        }
    }

    /// Runs kubectl; returns (success, stdout followed by stderr).
    pub fn kubectl(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        use std::io::Write as _;
        let mut child = Command::new(&self.kubectl)
            .args(args)
            .env("KUBECONFIG", &self.kubeconfig)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("running {}: {e}", self.kubectl.display()));
        if let Some(mut pipe) = child.stdin.take() {
            pipe.write_all(stdin.unwrap_or_default().as_bytes())
                .expect("writing kubectl's stdin");
        }
        let out = child.wait_with_output().expect("waiting for kubectl");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.success(), text)
    }

    /// Runs kubectl and panics if it fails; returns its output.
    pub fn kubectl_ok(&self, args: &[&str], stdin: Option<&str>) -> String {
        let (ok, out) = self.kubectl(args, stdin);
        assert!(ok, "kubectl {} failed: {out}", args.join(" "));
        out
    }

    /// The label that makes a pod count as meshed by this control plane
    /// (what the proxy injector sets), for [`http_workload`].
    pub fn meshed_label(&self) -> [(&str, &str); 1] {
        [(
            "linkerd.io/control-plane-ns",
            self.control_plane_ns.as_str(),
        )]
    }

    /// A fresh namespace for one test, deleted when the value drops.
    pub async fn namespace(&self, prefix: &str) -> TestNamespace {
        let n = NS_COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{n}", std::process::id());
        let api: Api<Namespace> = Api::all(self.client.clone());
        let mut ns = Namespace::default();
        ns.metadata.name = Some(name.clone());
        api.create(&PostParams::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {name}: {e}"));
        TestNamespace {
            name,
            client: self.client.clone(),
        }
    }

    /// `kubectl port-forward -n ns target :port`, ready to use.
    pub fn port_forward(&self, ns: &str, target: &str, port: u16) -> PortForward {
        PortForward::start(self, ns, target, port)
    }

    /// [`Self::port_forward`], or why it did not start (the pod it picked
    /// went away, say) instead of a panic.
    pub fn try_port_forward(
        &self,
        ns: &str,
        target: &str,
        port: u16,
    ) -> Result<PortForward, String> {
        PortForward::try_start(self, ns, target, port)
    }

    /// A port-forward to one of Meridian's ports through its Deployment
    /// (kubectl picks a running pod, as `linkerd diagnostics` does).
    pub fn forward_to_meridian(&self, port: u16) -> PortForward {
        self.port_forward(
            &self.control_plane_ns,
            &format!("deploy/{DESTINATION_DEPLOYMENT}"),
            port,
        )
    }

    /// Applies [`http_workload`] `name` in `ns` and waits until its
    /// Deployment is ready.
    pub async fn run_http_workload(
        &self,
        ns: &str,
        name: &str,
        replicas: i32,
        labels: &[(&str, &str)],
    ) {
        self.kubectl_ok(
            &["apply", "-f", "-"],
            Some(&http_workload(self, ns, name, replicas, labels)),
        );
        self.wait_deployment_ready(ns, name).await;
    }

    /// Waits until the Deployment has all its replicas updated and ready.
    pub async fn wait_deployment_ready(&self, ns: &str, name: &str) {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), ns);
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        let mut last = String::new();
        while tokio::time::Instant::now() < deadline {
            match api.get(name).await {
                Ok(d) => {
                    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    let status = d.status.unwrap_or_default();
                    let ready = status.ready_replicas.unwrap_or(0);
                    let updated = status.updated_replicas.unwrap_or(0);
                    let total = status.replicas.unwrap_or(0);
                    if ready == want && updated == want && total == want {
                        return;
                    }
                    last = format!("want {want}, ready {ready}, updated {updated}, total {total}");
                }
                Err(e) => last = e.to_string(),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let pods = self
            .kubectl(&["get", "pods", "-n", ns, "-o", "wide"], None)
            .1;
        panic!("deployment {ns}/{name} not ready after {TIMEOUT:?}: {last}\n{pods}");
    }
}

/// A namespace deleted (in the background) when dropped.
pub struct TestNamespace {
    pub name: String,
    client: kube::Client,
}

impl Drop for TestNamespace {
    fn drop(&mut self) {
        let api: Api<Namespace> = Api::all(self.client.clone());
        let name = self.name.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                let _ = api.delete(&name, &DeleteParams::background()).await;
            });
        }
    }
}

/// A running `kubectl port-forward`, stopped when dropped.
pub struct PortForward {
    child: Child,
    /// The local end (on loopback).
    pub local: SocketAddr,
}

impl PortForward {
    fn start(cluster: &Cluster, ns: &str, target: &str, port: u16) -> Self {
        Self::try_start(cluster, ns, target, port).unwrap_or_else(|e| panic!("{e}"))
    }

    fn try_start(cluster: &Cluster, ns: &str, target: &str, port: u16) -> Result<Self, String> {
        let mut child = Command::new(&cluster.kubectl)
            .args([
                "port-forward",
                "-n",
                ns,
                "--address=127.0.0.1",
                target,
                &format!(":{port}"),
            ])
            .env("KUBECONFIG", &cluster.kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("running kubectl port-forward: {e}"))?;
        let stdout = child.stdout.take().ok_or("no piped stdout")?;
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            // "Forwarding from 127.0.0.1:41234 -> 8086"; keep reading after
            // it so kubectl never blocks on a full pipe.
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = forwarded_addr(&line) {
                    let _ = tx.send(addr);
                }
            }
        });
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(local) => Ok(Self { child, local }),
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(format!(
                    "kubectl port-forward -n {ns} {target} :{port} did not start"
                ))
            }
        }
    }

    /// `http://127.0.0.1:PORT` of the local end.
    pub fn url(&self) -> String {
        format!("http://{}", self.local)
    }
}

impl Drop for PortForward {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The local address in a `kubectl port-forward` "Forwarding from" line.
fn forwarded_addr(line: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix("Forwarding from ")?;
    let addr = rest.split(" -> ").next()?;
    addr.parse().ok()
}

/// A Deployment of `replicas` pods running the test HTTP server (port 8080,
/// readiness probe `GET /ready`), and a ClusterIP Service `name` on port 80.
/// `labels` are added to the pod template (e.g. to mark pods meshed).
pub fn http_workload(
    cluster: &Cluster,
    ns: &str,
    name: &str,
    replicas: i32,
    labels: &[(&str, &str)],
) -> String {
    let mut pod_labels = serde_json::json!({"app": name});
    for (k, v) in labels {
        pod_labels[*k] = serde_json::Value::String((*v).to_string());
    }
    let deployment = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": pod_labels},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [http_container(cluster)],
                },
            },
        },
    });
    let service = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
        },
    });
    format!(
        "{}\n---\n{}",
        serde_yaml::to_string(&deployment).expect("yaml"),
        serde_yaml::to_string(&service).expect("yaml")
    )
}

/// The test HTTP server's container: port `http` (8080), readiness probe
/// `GET /ready` every second.
pub fn http_container(cluster: &Cluster) -> serde_json::Value {
    serde_json::json!({
        "name": "http",
        "image": cluster.http_image,
        "imagePullPolicy": "IfNotPresent",
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {
            "httpGet": {"path": "/ready", "port": 8080},
            "periodSeconds": 1,
            // One slow probe on a loaded 2-core node is not the app turning
            // unready (a test's /ready/fail still shows within 3 s).
            "failureThreshold": 3,
            "successThreshold": 1,
        },
    })
}

/// `<svc>.<ns>.svc.cluster.local:<port>`.
pub fn authority(ns: &str, svc: &str, port: u16) -> String {
    format!("{svc}.{ns}.svc.cluster.local:{port}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_forward_lines_are_parsed() {
        assert_eq!(
            forwarded_addr("Forwarding from 127.0.0.1:41234 -> 8086"),
            Some("127.0.0.1:41234".parse().unwrap())
        );
        assert_eq!(forwarded_addr("Handling connection for 41234"), None);
        assert_eq!(
            forwarded_addr("Forwarding from [::1]:41234 -> 8086"),
            Some("[::1]:41234".parse().unwrap())
        );
    }
}
