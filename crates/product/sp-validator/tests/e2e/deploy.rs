//! `sp-validator` started as `deploy/` starts it: the container's exact
//! arguments (the Linkerd chart's Go-style flags), with this test's
//! loopback addresses and certificate files in place of the pod's. It must
//! become ready, answer the original's liveness probe, `/ping`, and export
//! the process series Linkerd's dashboards read.

use test_support::{LocalCa, ServerProcess, deploy::destination_pod_command, free_addr};

#[tokio::test]
async fn starts_from_the_deploy_args() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = LocalCa::new("deploy-e2e-ca").expect("CA");
    let cert = ca
        .issue_serving_cert(&["linkerd-sp-validator.linkerd.svc"])
        .expect("serving cert");
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem).expect("cert");
    std::fs::write(&key, &cert.key_pem).expect("key");

    let mut line = destination_pod_command("sp-validator");
    assert_eq!(line[0], "sp-validator");
    let admin = free_addr();
    line.extend([
        format!("-addr={}", free_addr()),
        format!("-metrics-addr={admin}"),
        format!("--tls-cert={}", crt.display()),
        format!("--tls-key={}", key.display()),
    ]);
    let program = env!("CARGO_BIN_EXE_sp-validator");
    let sp = ServerProcess::start(program.as_ref(), &line, admin).await;
    let (status, body) = sp.admin_get("/ping").await;
    assert_eq!((status, body.as_str()), (200, "pong\n"));
    let (status, metrics) = sp.admin_get("/metrics").await;
    assert_eq!(status, 200);
    let missing = test_support::dashboards::missing(&metrics, test_support::dashboards::PROCESS);
    assert!(missing.is_empty(), "missing {missing:?} in\n{metrics}");
    // Every series of Linkerd 2.20's sp-validator container that Meridian
    // exports (tests/data/linkerd-2.20-series.tsv of test-support).
    let missing = test_support::original_series::missing(&metrics, "sp-validator");
    assert!(missing.is_empty(), "missing {missing:#?} in\n{metrics}");
    assert!(
        test_support::dashboards::build_info(&metrics).is_some(),
        "no meridian_build_info in\n{metrics}"
    );
}
