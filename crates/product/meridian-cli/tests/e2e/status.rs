//! `meridian-cli status`: the destination Deployment's pod template and
//! pods, each pod's admin `/metrics` read through the API server's
//! pods/proxy subresource. No kubelet runs: a pod is created bound to the
//! fake Node and its status (Running, an IP) written as a kubelet would;
//! its IP is this host's address, where the test serves each container's
//! admin port (the scrape a Meridian container, or Linkerd's, answers).

use std::net::{IpAddr, SocketAddr, UdpSocket};

use test_support::{NODE_NAME, TestEnv, free_addr};
use tokio::{io::AsyncReadExt, io::AsyncWriteExt, net::TcpListener};

use crate::common::{
    LINKERD_IMAGE, MERIDIAN_IMAGE, apply, cli, destination_deployment, patch_status,
};

const CONTAINERS: [&str; 3] = ["destination", "sp-validator", "policy"];

/// A scrape of a Meridian container (the line `meridian_build_info`'s
/// registration writes) and of Linkerd's (none).
const MERIDIAN_SCRAPE: &str = "# TYPE meridian_build_info gauge\n\
    meridian_build_info{version=\"0.1.0\",commit=\"e2e1234\",profile=\"debug\"} 1\n# EOF\n";
const LINKERD_SCRAPE: &str = "# TYPE go_threads gauge\ngo_threads 12\n";

/// This host's non-loopback address, which the API server can dial.
fn host_ip() -> IpAddr {
    ["192.0.2.1:9", "10.255.255.1:9", "8.8.8.8:53"]
        .iter()
        .filter_map(|to| {
            let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
            socket.connect(to).ok()?;
            Some(socket.local_addr().ok()?.ip())
        })
        .find(|ip| !ip.is_loopback() && !ip.is_unspecified())
        .expect("this host has no non-loopback IPv4 address for a pod IP")
}

/// Serves `body` as `/metrics` (any path) on a free port of every address.
async fn serve(body: &'static str) -> u16 {
    let port = free_addr().port();
    let listener = TcpListener::bind(SocketAddr::from(([0, 0, 0, 0], port)))
        .await
        .expect("bind the admin port");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf).await;
                let response = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

/// A pod of the Deployment running `image` in the three containers, their
/// admin ports `ports`, Running at this host's IP.
async fn running_pod(env: &TestEnv, name: &str, image: &str, ports: [u16; 3]) {
    let containers: Vec<serde_json::Value> = CONTAINERS
        .iter()
        .zip(ports)
        .map(|(c, port)| {
            let admin = match *c {
                "destination" => "dest-admin",
                "sp-validator" => "spval-admin",
                _ => "policy-admin",
            };
            serde_json::json!({"name": c, "image": image,
                "ports": [{"name": admin, "containerPort": port}]})
        })
        .collect();
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name,
            "labels": {k8s_api::labels::CONTROL_PLANE_COMPONENT: "destination"}},
        "spec": {"nodeName": NODE_NAME, "containers": containers},
    });
    apply(env, &pod.to_string());
    let ip = host_ip().to_string();
    patch_status(
        env,
        &format!("pod/{name}"),
        &serde_json::json!({"phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}]}),
    );
}

fn template(image: &str) -> String {
    destination_deployment(
        0,
        &[
            ("destination", image, &["destination"]),
            ("sp-validator", image, &["sp-validator"]),
            ("policy", image, &[]),
        ],
    )
}

/// Every pod runs Meridian (each container's `/metrics` has its build
/// info), the template too: exit 0; the version is printed per container.
#[tokio::test]
async fn every_pod_on_meridian_is_0() {
    let env = TestEnv::new("status-ok").await;
    apply(&env, &template(MERIDIAN_IMAGE));
    let ports = [
        serve(MERIDIAN_SCRAPE).await,
        serve(MERIDIAN_SCRAPE).await,
        serve(MERIDIAN_SCRAPE).await,
    ];
    running_pod(&env, "linkerd-destination-a", MERIDIAN_IMAGE, ports).await;

    let (code, out) = cli(&env, &["status", "-n", &env.ns]).await;
    assert_eq!(code, 0, "{out}");
    for c in CONTAINERS {
        let line = format!("  {c:<13} {MERIDIAN_IMAGE}  Meridian 0.1.0 (e2e1234, debug build)");
        assert!(out.contains(&line), "want {line:?} in\n{out}");
    }
    assert!(
        out.contains(&format!(
            "ok: every pod of {}/linkerd-destination runs Meridian",
            env.ns
        )),
        "{out}"
    );
}

/// A chart render put Linkerd's image back in the template while the pod
/// still runs Meridian, one of whose containers answers as Linkerd's
/// (no build info): exit 1, reverted, rollout in progress, original.
#[tokio::test]
async fn a_reverted_template_and_an_original_container_are_1() {
    let env = TestEnv::new("status-reverted").await;
    apply(&env, &template(LINKERD_IMAGE));
    let ports = [
        serve(MERIDIAN_SCRAPE).await,
        serve(LINKERD_SCRAPE).await,
        serve(MERIDIAN_SCRAPE).await,
    ];
    running_pod(&env, "linkerd-destination-a", MERIDIAN_IMAGE, ports).await;

    let (code, out) = cli(&env, &["status", "-n", &env.ns]).await;
    assert_eq!(code, 1, "{out}");
    let ns = &env.ns;
    for want in [
        format!("  destination   {LINKERD_IMAGE}  Linkerd's image"),
        format!(
            "reverted: the pod template of {ns}/linkerd-destination runs Linkerd's own image in destination, sp-validator, policy"
        ),
        format!(
            "rollout in progress: pod linkerd-destination-a runs {MERIDIAN_IMAGE} in destination where the template has {LINKERD_IMAGE}"
        ),
        format!(
            "  sp-validator  {MERIDIAN_IMAGE}  Linkerd's original ({MERIDIAN_IMAGE}): /metrics has no meridian_build_info"
        ),
        "original: pod linkerd-destination-a runs Linkerd's sp-validator container".to_string(),
        format!("  policy        {MERIDIAN_IMAGE}  Meridian 0.1.0 (e2e1234, debug build)"),
    ] {
        assert!(out.contains(&want), "want {want:?} in\n{out}");
    }
}

/// A pod that is not running (Pending: no kubelet starts it) with Linkerd's
/// image is known as the original by its image, exit 1; a Meridian pod whose
/// admin port answers nothing cannot be told: exit 2.
#[tokio::test]
async fn pending_originals_are_1_and_an_unreachable_meridian_pod_is_2() {
    let env = TestEnv::new("status-pending").await;
    apply(&env, &template(LINKERD_IMAGE));
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "linkerd-destination-b",
            "labels": {k8s_api::labels::CONTROL_PLANE_COMPONENT: "destination"}},
        "spec": {"nodeName": NODE_NAME,
            "containers": [{"name": "destination", "image": LINKERD_IMAGE}]},
    });
    apply(&env, &pod.to_string());
    let out = cli(&env, &["status", "-n", &env.ns]).await;
    assert_eq!(out.0, 1, "{}", out.1);
    assert!(out.1.contains("(Pending)"), "{}", out.1);
    assert!(
        out.1.contains("/metrics not read: the pod is Pending"),
        "{}",
        out.1
    );

    let env = TestEnv::new("status-unreachable").await;
    apply(&env, &template(MERIDIAN_IMAGE));
    // Free ports where nothing listens.
    let ports = [free_addr().port(), free_addr().port(), free_addr().port()];
    running_pod(&env, "linkerd-destination-a", MERIDIAN_IMAGE, ports).await;
    let (code, out) = cli(&env, &["status", "-n", &env.ns]).await;
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains("unknown: pod linkerd-destination-a container destination: /metrics not read"),
        "{out}"
    );
}

/// No destination Deployment in the namespace: could not ask, exit 2.
#[tokio::test]
async fn no_deployment_is_2() {
    let env = TestEnv::new("status-none").await;
    let (code, out) = cli(&env, &["status", "-n", &env.ns]).await;
    assert_eq!(code, 2, "{out}");
}
