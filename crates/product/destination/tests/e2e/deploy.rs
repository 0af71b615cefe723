//! `destination` started as `deploy/` starts it: the container's exact
//! arguments (the Linkerd chart's Go-style flags), authenticated as the
//! pod's own ServiceAccount with only the RBAC of `deploy/base/rbac.yaml`.
//! It must become ready (every watch synced) and export what Linkerd's
//! dashboards read; under an account without those roles it must not
//! become ready.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use test_support::{ServerProcess, TestEnv, deploy::destination_pod_command, free_addr, process};

/// Logs as Linkerd's Go destination does: with the chart's
/// `-log-format=json`, lines with logrus's keys on stderr and nothing on
/// stdout (a kubeconfig that does not exist ends the process after its
/// start line).
#[test]
fn logs_on_stderr_with_logruss_keys() {
    let (stdout, stderr) = process::run_until_exit(
        env!("CARGO_BIN_EXE_destination").as_ref(),
        &[
            "-log-format=json".into(),
            "-log-level=info".into(),
            format!("-addr={}", free_addr()),
            format!("-metrics-addr={}", free_addr()),
            format!("--introspection-addr={}", free_addr()),
            "-kubeconfig=/nonexistent/kubeconfig".into(),
        ],
    );
    assert!(stdout.is_empty(), "stdout: {stdout}");
    let first: serde_json::Value = stderr
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("a JSON first line on stderr:\n{stderr}"));
    assert_eq!(first["level"], "info", "{first}");
    assert!(first["time"].is_string(), "{first}");
    let msg = first["msg"].as_str().unwrap_or_default();
    assert!(
        msg.starts_with("Meridian destination ") && msg.ends_with(" starting"),
        "{first}"
    );
}

#[tokio::test]
async fn starts_from_the_deploy_args_with_its_service_account() {
    let env = TestEnv::new("deploy-dst").await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    cluster.install_deploy_rbac();
    let kubeconfig = cluster.service_account_kubeconfig("linkerd", "linkerd-destination");

    // The container's command line; then loopback addresses for this test
    // (the last occurrence of a flag wins, as in Go) and the kubeconfig
    // that stands for the pod's mounted token.
    let mut line = destination_pod_command("destination");
    assert_eq!(line[0], "destination");
    let (addr, admin) = (free_addr(), free_addr());
    line.extend([
        format!("-addr={addr}"),
        format!("-metrics-addr={admin}"),
        format!("-kubeconfig={}", kubeconfig.display()),
    ]);
    let program = env!("CARGO_BIN_EXE_destination");
    // HOSTNAME as in a pod: it runs the ExternalWorkload EndpointSlice
    // writer, whose queue the original's `workqueue_*` series describe.
    let dst = ServerProcess::start_with_env(
        program.as_ref(),
        &line,
        admin,
        &[("HOSTNAME", "linkerd-destination-0")],
    )
    .await;
    let (status, body) = dst.admin_get("/ping").await;
    assert_eq!((status, body.as_str()), (200, "pong\n"));
    // What Linkerd's dashboards read, under the original's names: the
    // process series, and the gRPC server's (created for each method at
    // start, as go-grpc-prometheus does).
    let (_, metrics) = dst.admin_get("/metrics").await;
    let wanted = [
        test_support::dashboards::PROCESS,
        test_support::dashboards::GRPC_SERVER,
        test_support::dashboards::HTTP_CLIENT,
    ]
    .concat();
    let missing = test_support::dashboards::missing(&metrics, &wanted);
    assert!(missing.is_empty(), "missing {missing:?} in\n{metrics}");
    // Every series of Linkerd 2.20's destination container that Meridian
    // exports (tests/data/linkerd-2.20-series.tsv of test-support).
    let missing = test_support::original_series::missing(&metrics, "destination");
    assert!(missing.is_empty(), "missing {missing:#?} in\n{metrics}");
    assert!(
        test_support::dashboards::build_info(&metrics).is_some(),
        "no meridian_build_info in\n{metrics}"
    );
    assert!(
        metrics.contains(
            "grpc_server_handled_total{grpc_service=\"io.linkerd.proxy.destination.Destination\",grpc_method=\"GetProfile\",grpc_type=\"server_stream\",grpc_code=\"Canceled\"} 0"
        ),
        "{metrics}"
    );
    assert!(
        metrics.contains("http_client_requests_total{client=\"k8s\",code=\"200\",method=\"get\"}"),
        "{metrics}"
    );
    drop(dst);

    // An account without those roles.
    let (ok, out) = cluster.kubectl(&["create", "serviceaccount", "nobody", "-n", &env.ns], None);
    assert!(ok, "{out}");
    let unprivileged = cluster.service_account_kubeconfig(&env.ns, "nobody");
    let admin = free_addr();
    let mut child = Command::new(program)
        .args([
            format!("--addr={}", free_addr()),
            format!("--admin-addr={admin}"),
            // Not the default port, which a destination running on the
            // same machine may hold.
            format!("--introspection-addr={}", free_addr()),
            format!("--kubeconfig={}", unprivileged.display()),
        ])
        .env("MERIDIAN_LOG", "error")
        .stdin(Stdio::null())
        .spawn()
        .expect("starting destination");
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = None;
    while Instant::now() < deadline {
        if let Ok(answer) = process::http_get(admin, "/ready").await {
            assert_ne!(answer.0, 200, "ready without RBAC: {}", answer.1);
            last = Some(answer);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let (status, body) = last.expect("the admin server answered");
    assert_eq!(status, 503);
    assert!(body.contains("cache"), "{body}");
}

/// The chart's `enableEndpointSlices: false` renders
/// `-enable-endpoint-slices=false` (and no EndpointSlice RBAC): the
/// destination stays up and not ready, naming the chart value in `/ready`
/// and in a Warning Event on its pod, instead of a crash loop or waiting
/// silently for a watch it cannot run; SIGTERM stops it cleanly.
#[tokio::test]
async fn stays_unready_naming_the_charts_enable_endpoint_slices_false() {
    let env = TestEnv::new("deploy-noslices").await;
    let mut line = destination_pod_command("destination");
    line.retain(|a| !a.starts_with("-enable-endpoint-slices"));
    line.push("-enable-endpoint-slices=false".into());
    let admin = free_addr();
    line.extend([
        format!("-addr={}", free_addr()),
        format!("-metrics-addr={admin}"),
        format!("-kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("-controller-namespace={}", env.ns),
    ]);
    let pod = "linkerd-destination-noslices";
    let mut dst = ServerProcess::spawn_with_env(
        env!("CARGO_BIN_EXE_destination").as_ref(),
        &line,
        admin,
        &[("HOSTNAME", pod)],
    );
    dst.wait_live().await;
    let (status, body) = dst.admin_get("/ready").await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body.contains("`enableEndpointSlices: false`) is not supported")
            && body.contains("Set `enableEndpointSlices: true`"),
        "{body}"
    );
    assert_eq!(dst.admin_get("/live").await.0, 200);
    let events =
        kube::Api::<k8s_openapi::api::core::v1::Event>::namespaced(env.client.clone(), &env.ns);
    let deadline = Instant::now() + Duration::from_secs(20);
    let event = loop {
        let listed = events.list(&Default::default()).await.expect("list Events");
        if let Some(event) = listed
            .items
            .into_iter()
            .find(|e| e.involved_object.name.as_deref() == Some(pod))
        {
            break event;
        }
        assert!(Instant::now() < deadline, "no Event on {pod}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(event.reason.as_deref(), Some("UnsupportedValue"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        event
            .message
            .as_deref()
            .is_some_and(|m| m.contains("enableEndpointSlices: false")),
        "{event:?}"
    );
    assert!(dst.is_running(), "it stays up");
    assert!(
        dst.terminate(Duration::from_secs(10)),
        "SIGTERM ends it cleanly"
    );
}
