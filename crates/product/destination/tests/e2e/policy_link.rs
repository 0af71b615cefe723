//! The destination ↔ policy link end to end: both binaries run as processes
//! against the real local control plane. An opaque Server flips the
//! protocol hint on an open Get stream; killing the policy controller leaves
//! the destination serving (with annotation-derived hints, reported in
//! `/ready`), and restarting it restores the hints. A Server selecting an
//! ExternalWorkload makes its endpoint opaque the same way.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use crate::common::{authority, create_service};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use linkerd2_proxy_api::destination::{
    GetDestination, WeightedAddr, protocol_hint::Protocol, update,
};
use test_support::{ServerProcess, TestEnv, free_addr};

const TIMEOUT: Duration = Duration::from_secs(30);

/// The policy-controller binary, built next to ours by `cargo test --workspace`.
fn policy_controller_bin() -> PathBuf {
    let path =
        std::path::Path::new(env!("CARGO_BIN_EXE_destination")).with_file_name("policy-controller");
    assert!(
        path.exists(),
        "{} is missing: run the tests through `cargo xtask test` (or `cargo build -p policy-controller` first)",
        path.display()
    );
    path
}

/// A policy controller serving the workload-ports feed on `feed` (the
/// destination's `--policy-addr`).
async fn start_policy(env: &TestEnv, feed: SocketAddr) -> ServerProcess {
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--grpc-addr={}", free_addr()),
        format!("--workload-ports-addr={feed}"),
        format!("--admin-addr={admin}"),
        "--admission-controller-disabled".to_string(),
    ];
    ServerProcess::start(&policy_controller_bin(), &args, admin).await
}

fn hint(addr: &WeightedAddr) -> (&'static str, Option<u32>) {
    let hint = addr.protocol_hint.as_ref();
    let protocol = match hint.and_then(|h| h.protocol.as_ref()) {
        Some(Protocol::H2(_)) => "h2",
        Some(Protocol::Opaque(_)) => "opaque",
        None => "none",
    };
    let transport = hint
        .and_then(|h| h.opaque_transport.as_ref())
        .map(|t| t.inbound_port);
    (protocol, transport)
}

/// Reads the stream until the (single) endpoint has the wanted hint.
async fn wait_hint(
    stream: &mut tonic::Streaming<linkerd2_proxy_api::destination::Update>,
    want: (&'static str, Option<u32>),
) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let update = tokio::time::timeout(left, stream.message())
            .await
            .unwrap_or_else(|_| panic!("no update with hint {want:?} in time"))
            .expect("stream healthy")
            .expect("stream open");
        if let Some(update::Update::Add(set)) = update.update
            && set.addrs.iter().any(|a| hint(a) == want)
        {
            return;
        }
    }
}

#[tokio::test]
async fn server_opacity_flows_from_the_policy_controller_and_survives_its_outage() {
    let env = TestEnv::new("link").await;
    env.cluster().ensure_crds();
    let policy_addr = free_addr();
    let mut policy = start_policy(&env, policy_addr).await;

    let admin = free_addr();
    let grpc = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--addr={grpc}"),
        format!("--admin-addr={admin}"),
        format!("--policy-addr=http://{policy_addr}"),
    ];
    let dst = ServerProcess::start(env!("CARGO_BIN_EXE_destination").as_ref(), &args, admin).await;

    create_service(&env, "db", vec![(7000, IntOrString::Int(7000))], false).await;
    let spec = env
        .pod("db-0")
        .label("app", "db")
        .port(Some("db"), 7000)
        .meshed("linkerd");
    env.create_ready_pod(&spec).await;

    let mut client = crate::common::client(grpc).await;
    let request = GetDestination {
        scheme: "k8s".into(),
        path: authority(&env, "db", 7000),
        context_token: String::new(),
    };
    let mut stream = client.get(request).await.expect("open").into_inner();
    wait_hint(&mut stream, ("h2", None)).await;

    let server = format!(
        "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata:\n  name: db\n  namespace: {}\nspec:\n  podSelector:\n    matchLabels:\n      app: db\n  port: db\n  proxyProtocol: opaque\n",
        env.ns
    );
    let (ok, out) = env.cluster().kubectl(&["apply", "-f", "-"], Some(&server));
    assert!(ok, "{out}");
    wait_hint(&mut stream, ("opaque", Some(4143))).await;

    // The policy controller goes away: annotation-derived hints, still serving.
    policy.kill();
    wait_hint(&mut stream, ("h2", None)).await;
    let (status, body) = dst.admin_get("/ready").await;
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("degraded: policy link"), "{body}");
    let (_, metrics) = dst.admin_get("/metrics").await;
    assert!(metrics.contains("policy_link_connected 0"), "{metrics}");

    // It comes back: the hints are corrected.
    let _policy = start_policy(&env, policy_addr).await;
    wait_hint(&mut stream, ("opaque", Some(4143))).await;
    let (status, body) = dst.admin_get("/ready").await;
    assert_eq!((status, body.as_str()), (200, "ready\n"));
}

#[tokio::test]
async fn server_opacity_reaches_external_workload_endpoints() {
    let env = TestEnv::new("link-ew").await;
    env.cluster().ensure_crds();
    let policy_addr = free_addr();
    let _policy = start_policy(&env, policy_addr).await;
    let (admin, grpc) = (free_addr(), free_addr());
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--addr={grpc}"),
        format!("--admin-addr={admin}"),
        format!("--policy-addr=http://{policy_addr}"),
    ];
    let _dst = ServerProcess::start(env!("CARGO_BIN_EXE_destination").as_ref(), &args, admin).await;

    // A Service selecting nothing, and a slice naming the workload (written
    // here, so the test needs no slice writer).
    let objects = format!(
        r#"apiVersion: v1
kind: Service
metadata: {{name: vms, namespace: {ns}}}
spec:
  ports: [{{name: db, port: 7000, targetPort: db}}]
---
apiVersion: workload.linkerd.io/v1beta1
kind: ExternalWorkload
metadata: {{name: vm-1, namespace: {ns}, labels: {{app: vm}}}}
spec:
  meshTLS: {{identity: "spiffe://root.linkerd.cluster.local/vm-1", serverName: vm-1.cluster.local}}
  ports: [{{name: db, port: 7000}}]
  workloadIPs: [{{ip: 192.0.2.41}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: vms-test
  namespace: {ns}
  labels: {{kubernetes.io/service-name: vms, endpointslice.kubernetes.io/managed-by: e2e.meridian.test}}
addressType: IPv4
ports: [{{name: db, port: 7000, protocol: TCP}}]
endpoints:
  - addresses: ["192.0.2.41"]
    conditions: {{ready: true}}
    targetRef: {{kind: ExternalWorkload, name: vm-1}}
"#,
        ns = env.ns
    );
    let (ok, out) = env.cluster().kubectl(&["apply", "-f", "-"], Some(&objects));
    assert!(ok, "{out}");

    let mut client = crate::common::client(grpc).await;
    let request = GetDestination {
        scheme: "k8s".into(),
        path: authority(&env, "vms", 7000),
        context_token: String::new(),
    };
    let mut stream = client.get(request).await.expect("open").into_inner();
    // Workloads are always meshed: H2, no opaque transport by default.
    wait_hint(&mut stream, ("h2", None)).await;

    let server = format!(
        "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata:\n  name: vm-db\n  namespace: {}\nspec:\n  externalWorkloadSelector:\n    matchLabels:\n      app: vm\n  port: db\n  proxyProtocol: opaque\n",
        env.ns
    );
    let (ok, out) = env.cluster().kubectl(&["apply", "-f", "-"], Some(&server));
    assert!(ok, "{out}");
    // Opaque, with opaque transport to the workload's proxy (4143 by default).
    wait_hint(&mut stream, ("opaque", Some(4143))).await;
}
