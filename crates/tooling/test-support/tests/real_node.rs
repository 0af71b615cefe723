//! The real local node runs real containers: a Deployment of the tiny HTTP
//! image becomes Ready by the kubelet's probes, its ClusterIP Service routes
//! from the host, readiness fails and recovers (flipped with `kubectl exec`),
//! `kubectl logs` and `kubectl port-forward` work, a pod reaches the API
//! through the `kubernetes` Service with its ServiceAccount token and
//! another pod through a ClusterIP, and stopping the cluster leaves nothing
//! on the host.

use std::{
    io::{BufRead as _, BufReader},
    net::SocketAddr,
    path::Path,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::{Api, api::ListParams};
use test_support::{RealNodeCluster, eventually, process::http_get};

fn deployment(image: &str) -> String {
    format!(
        r#"apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 2
  selector:
    matchLabels: {{app: web}}
  template:
    metadata:
      labels: {{app: web}}
    spec:
      containers:
      - name: web
        image: {image}
        imagePullPolicy: Never
        ports:
        - {{name: http, containerPort: 8080}}
        readinessProbe:
          httpGet: {{path: /ready, port: 8080}}
          periodSeconds: 1
          failureThreshold: 1
        livenessProbe:
          httpGet: {{path: /live, port: 8080}}
---
apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {{app: web}}
  ports:
  - {{port: 80, targetPort: 8080}}
"#
    )
}

fn ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn pods_ready(pods: &Api<Pod>) -> Result<Vec<Pod>, String> {
    let list = pods
        .list(&ListParams::default().labels("app=web"))
        .await
        .map_err(|e| e.to_string())?;
    let summary: Vec<String> = list
        .items
        .iter()
        .map(|p| {
            format!(
                "{}: phase {:?} ready {}",
                p.metadata.name.clone().unwrap_or_default(),
                p.status.as_ref().and_then(|s| s.phase.clone()),
                ready(p)
            )
        })
        .collect();
    if list.items.len() == 2 && list.items.iter().all(ready) {
        Ok(list.items)
    } else {
        Err(summary.join("; "))
    }
}

#[tokio::test]
async fn a_deployment_runs_on_the_real_node_and_is_reachable_through_its_service() {
    let started = Instant::now();
    let cluster = RealNodeCluster::start().await;
    eprintln!(
        "real-node cluster up in {:.1}s",
        started.elapsed().as_secs_f64()
    );
    let ns = cluster.namespace("real-node").await;
    let client = cluster.client();
    let (ok, out) = cluster.kubectl(
        &["apply", "-n", &ns, "-f", "-"],
        Some(&deployment(cluster.http_test_image())),
    );
    assert!(ok, "kubectl apply: {out}");

    // Ready by the kubelet's real readiness probes.
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let running = eventually("both web pods Ready", Duration::from_secs(120), || {
        pods_ready(&pods)
    })
    .await;
    let pod_name = running[0].metadata.name.clone().expect("pod name");

    // The ClusterIP Service routes from the host (kube-proxy's rules).
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let cluster_ip = services
        .get("web")
        .await
        .expect("service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("cluster IP");
    let service: SocketAddr = format!("{cluster_ip}:80").parse().expect("address");
    let body = eventually(
        "GET / through the ClusterIP",
        Duration::from_secs(30),
        || async {
            match http_get(service, "/").await {
                Ok((200, body)) => Ok(body),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;
    assert!(body.starts_with("hello from web-"), "{body}");

    // Readiness fails and recovers: the kubelet's probes see it.
    let (ok, out) = cluster.kubectl(
        &[
            "exec",
            "-n",
            &ns,
            &pod_name,
            "--",
            "/http-test",
            "ready",
            "fail",
        ],
        None,
    );
    assert!(ok, "kubectl exec: {out}");
    eventually(
        "the pod to turn NotReady",
        Duration::from_secs(30),
        || async {
            let pod = pods.get(&pod_name).await.map_err(|e| e.to_string())?;
            if ready(&pod) {
                Err("still Ready".to_string())
            } else {
                Ok(())
            }
        },
    )
    .await;
    let (ok, out) = cluster.kubectl(
        &[
            "exec",
            "-n",
            &ns,
            &pod_name,
            "--",
            "/http-test",
            "ready",
            "ok",
        ],
        None,
    );
    assert!(ok, "kubectl exec: {out}");
    eventually("both pods Ready again", Duration::from_secs(30), || {
        pods_ready(&pods)
    })
    .await;

    // kubectl logs: the server logs each request, probes included.
    let (ok, logs) = cluster.kubectl(&["logs", "-n", &ns, &pod_name], None);
    assert!(ok, "kubectl logs: {logs}");
    assert!(logs.contains("http-test listening on :8080"), "{logs}");
    assert!(logs.contains("GET /ready 503"), "{logs}");
    assert!(logs.contains("GET /ready 200"), "{logs}");

    // kubectl port-forward to the pod.
    let body = port_forward_get(&cluster, &ns, &pod_name).await;
    assert!(
        body.starts_with(&format!("hello from {pod_name}")),
        "{body}"
    );

    // A pod's ServiceAccount token reaches the API through the `kubernetes`
    // Service (apiserver advertised on the node's bridge).
    let (ok, out) = cluster.kubectl(
        &[
            "create",
            "rolebinding",
            "default-view",
            "-n",
            &ns,
            "--clusterrole=view",
            &format!("--serviceaccount={ns}:default"),
        ],
        None,
    );
    assert!(ok, "kubectl create rolebinding: {out}");
    let (ok, out) = cluster.kubectl(
        &[
            "run",
            "in-cluster",
            "-n",
            &ns,
            "--restart=Never",
            "--image-pull-policy=Never",
            &format!("--image={}", cluster.kubectl_image()),
            "--",
            "get",
            "service",
            "web",
            "-o",
            "name",
        ],
        None,
    );
    assert!(ok, "kubectl run: {out}");
    eventually(
        "the in-cluster kubectl to succeed",
        Duration::from_secs(60),
        || async {
            let pod = pods.get("in-cluster").await.map_err(|e| e.to_string())?;
            match pod.status.and_then(|s| s.phase).as_deref() {
                Some("Succeeded") => Ok(()),
                Some("Failed") => panic!(
                    "the in-cluster kubectl failed: {}",
                    cluster.kubectl(&["logs", "-n", &ns, "in-cluster"], None).1
                ),
                phase => Err(format!("phase {phase:?}")),
            }
        },
    )
    .await;
    let (_, out) = cluster.kubectl(&["logs", "-n", &ns, "in-cluster"], None);
    assert_eq!(out.trim(), "service/web");

    // Pod to ClusterIP to pod, across the bridge.
    let (ok, out) = cluster.kubectl(
        &[
            "run",
            "pod-to-service",
            "-n",
            &ns,
            "--restart=Never",
            "--image-pull-policy=Never",
            &format!("--image={}", cluster.kubectl_image()),
            "--",
            &format!("--server=http://{cluster_ip}:80"),
            "get",
            "--raw",
            "/",
        ],
        None,
    );
    assert!(ok, "kubectl run: {out}");
    eventually(
        "the pod's GET through the ClusterIP",
        Duration::from_secs(60),
        || async {
            let pod = pods
                .get("pod-to-service")
                .await
                .map_err(|e| e.to_string())?;
            match pod.status.and_then(|s| s.phase).as_deref() {
                Some("Succeeded") => Ok(()),
                Some("Failed") => panic!(
                    "GET from a pod failed: {}",
                    cluster
                        .kubectl(&["logs", "-n", &ns, "pod-to-service"], None)
                        .1
                ),
                phase => Err(format!("phase {phase:?}")),
            }
        },
    )
    .await;
    let (_, out) = cluster.kubectl(&["logs", "-n", &ns, "pod-to-service"], None);
    assert!(out.starts_with("hello from web-"), "{out}");

    // Stopping the cluster undoes everything on the host.
    let work_dir = cluster.work_dir().to_path_buf();
    drop(cluster);
    let bridge = Command::new("ip")
        .args(["link", "show", local_cluster::real_node::BRIDGE])
        .output()
        .expect("ip link");
    assert!(!bridge.status.success(), "the bridge is still there");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let work = work_dir.display().to_string();
    assert!(
        !mounts.lines().any(|l| l.contains(&work)),
        "mounts left under {work}"
    );
    let rules = Command::new("iptables-save")
        .output()
        .expect("iptables-save");
    let rules = String::from_utf8_lossy(&rules.stdout);
    assert!(
        !rules
            .lines()
            .any(|l| l.contains("KUBE-") || l.contains("CNI-") || l.contains("MERIDIAN-")),
        "iptables rules left:\n{rules}"
    );
    assert!(!Path::new("/run/meridian/real-node.json").exists());
    assert!(!work_dir.exists(), "the work dir is still there");
}

/// `kubectl port-forward pod :8080`, then GET / on the local port it prints.
async fn port_forward_get(cluster: &RealNodeCluster, ns: &str, pod: &str) -> String {
    let mut child = Command::new(cluster.kubectl_path())
        .args(["port-forward", "-n", ns, &format!("pod/{pod}"), ":8080"])
        .env("KUBECONFIG", cluster.kubeconfig())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("kubectl port-forward");
    let stdout = child.stdout.take().expect("stdout");
    // Keep reading its output: kubectl dies of SIGPIPE if nobody does.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let line = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(30)))
        .await
        .expect("join")
        .expect("kubectl port-forward printed nothing");
    // "Forwarding from 127.0.0.1:41234 -> 8080"
    let port: u16 = line
        .split("127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|port| port.parse().ok())
        .unwrap_or_else(|| panic!("unexpected port-forward output: {line:?}"));
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    let mut last = String::new();
    let mut body = None;
    for _ in 0..10 {
        match get_complete(addr).await {
            Ok(found) => {
                body = Some(found);
                break;
            }
            Err(error) => last = error,
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    body.unwrap_or_else(|| panic!("GET / through port-forward: {last}"))
}

/// GET / over HTTP/1.1; returns the body once `Content-Length` bytes have
/// arrived, even if the connection is then reset (kubectl port-forward may
/// reset the local side when the pod closes first).
async fn get_complete(addr: SocketAddr) -> Result<String, String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: web\r\nConnection: close\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(body) = complete_body(&response) {
            return Ok(body);
        }
        match stream.read(&mut chunk).await {
            Ok(0) => {
                return Err(format!(
                    "EOF after {:?}",
                    String::from_utf8_lossy(&response)
                ));
            }
            Ok(n) => response.extend_from_slice(&chunk[..n]),
            Err(e) => {
                return Err(format!(
                    "{e} after {:?}",
                    String::from_utf8_lossy(&response)
                ));
            }
        }
    }
}

fn complete_body(response: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(response);
    let (head, body) = text.split_once("\r\n\r\n")?;
    if !head.starts_with("HTTP/1.1 200") {
        return None;
    }
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))?
        .trim()
        .parse()
        .ok()?;
    (body.len() >= length).then(|| body[..length].to_string())
}
