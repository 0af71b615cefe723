//! `policy-controller` started as `deploy/` starts it: the container's
//! exact command and arguments (the Linkerd chart's), authenticated as the
//! pod's own ServiceAccount with only the RBAC of `deploy/base/rbac.yaml`.
//! It must become ready (every watch synced and the webhook serving),
//! export what Linkerd's dashboards read, under the original's names, and
//! create its status Lease owned by the `linkerd-destination` Deployment.

use std::time::Duration;

use test_support::{
    LocalCa, ServerProcess, TestEnv, deploy::destination_pod_command, eventually, free_addr,
    process,
};

/// Logs as Linkerd's policy controller (kubert) does: with the chart's
/// `--log-format=json`, `tracing-subscriber`'s JSON lines on stdout (a
/// kubeconfig that does not exist ends the process after its start line,
/// its error on stderr).
#[test]
fn logs_on_stdout_with_kuberts_keys() {
    let (stdout, stderr) = process::run_until_exit(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &[
            "--log-format=json".into(),
            "--log-level=linkerd=info,warn".into(),
            format!("--admin-addr={}", free_addr()),
            format!("--grpc-addr={}", free_addr()),
            format!("--server-addr={}", free_addr()),
            format!("--introspection-addr={}", free_addr()),
            format!("--workload-ports-addr={}", free_addr()),
            "--kubeconfig=/nonexistent/kubeconfig".into(),
        ],
    );
    let first: serde_json::Value = stdout
        .lines()
        .next()
        .and_then(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("a JSON first line on stdout:\n{stdout}\nstderr:\n{stderr}"));
    assert_eq!(first["level"], "INFO", "{first}");
    assert!(first["timestamp"].is_string(), "{first}");
    let message = first["fields"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Meridian policy-controller ") && message.ends_with(" starting"),
        "{first}"
    );
    assert!(
        !stderr.lines().any(|l| l.starts_with('{')),
        "no log line on stderr: {stderr}"
    );
}

#[tokio::test]
async fn starts_from_the_deploy_args_with_its_service_account() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("deploy-policy").await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    cluster.install_deploy_rbac();
    let kubeconfig = cluster.service_account_kubeconfig("linkerd", "linkerd-destination");
    // The Deployment the status Lease is created owned by (no pods).
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(env.client.clone(), "linkerd");
    let deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "linkerd-destination", "namespace": "linkerd"},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "deploy-e2e"}},
            "template": {
                "metadata": {"labels": {"app": "deploy-e2e"}},
                "spec": {"containers": [{"name": "c", "image": "none"}]},
            },
        },
    }))
    .expect("deployment");
    let deployment = deployments
        .create(&Default::default(), &deployment)
        .await
        .expect("create the Deployment");

    let dir = tempfile::tempdir().expect("tempdir");
    let ca = LocalCa::new("deploy-e2e-ca").expect("CA");
    let cert = ca
        .issue_serving_cert(&["linkerd-policy-validator.linkerd.svc"])
        .expect("serving cert");
    let (crt, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem).expect("cert");
    std::fs::write(&key, &cert.key_pem).expect("key");

    // The container's command line, with this test's loopback addresses
    // and certificate files in place of the pod's (clap refuses a flag
    // given twice), and the kubeconfig that stands for the mounted token.
    let line = destination_pod_command("policy");
    assert_eq!(line[0], "/linkerd-policy-controller");
    let replaced = [
        "--admin-addr=",
        "--grpc-addr=",
        "--server-addr=",
        "--server-tls-key=",
        "--server-tls-certs=",
    ];
    let admin = free_addr();
    let grpc = free_addr();
    let mut args: Vec<String> = line[1..]
        .iter()
        .filter(|a| !replaced.iter().any(|r| a.starts_with(r)))
        .cloned()
        .collect();
    assert_eq!(args.len(), line.len() - 1 - replaced.len(), "{line:?}");
    args.extend([
        format!("--admin-addr={admin}"),
        format!("--grpc-addr={grpc}"),
        format!("--server-addr={}", free_addr()),
        format!("--server-tls-key={}", key.display()),
        format!("--server-tls-certs={}", crt.display()),
        format!("--kubeconfig={}", kubeconfig.display()),
    ]);
    let policy = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;
    let (status, body) = policy.admin_get("/live").await;
    assert_eq!(status, 200, "{body}");
    // With the deploy RBAC the Gateway API kinds follow their CRDs (which
    // `ensure_crds` installed): all four are active.
    let (status, body) = policy.admin_get("/ready").await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains(
            "gateway API routes: grpcroutes v1, httproutes v1, tcproutes v1alpha2, tlsroutes v1alpha2"
        ),
        "{body}"
    );

    // One call of the outbound API (for a Service that does not exist):
    // the original's gRPC series appear with its labels and code spelling.
    let mut client =
        linkerd2_proxy_api::outbound::outbound_policies_client::OutboundPoliciesClient::connect(
            format!("http://{grpc}"),
        )
        .await
        .expect("connect");
    let spec = linkerd2_proxy_api::outbound::TrafficSpec {
        source_workload: "linkerd:client".into(),
        target: Some(
            linkerd2_proxy_api::outbound::traffic_spec::Target::Authority(
                "nowhere.linkerd.svc.cluster.local:80".into(),
            ),
        ),
    };
    let code = match client.get(spec).await {
        Ok(_) => tonic::Code::Ok,
        Err(status) => status.code(),
    };
    let code = grpc_stream::metrics::CodeNames::Rust.name(code);
    let (_, metrics) = policy.admin_get("/metrics").await;
    let wanted = [
        test_support::dashboards::PROCESS,
        test_support::dashboards::GRPC_SERVER,
    ]
    .concat();
    let missing = test_support::dashboards::missing(&metrics, &wanted);
    assert!(missing.is_empty(), "missing {missing:?} in\n{metrics}");
    // Every series of Linkerd 2.20's policy container that Meridian
    // exports (tests/data/linkerd-2.20-series.tsv of test-support).
    let missing = test_support::original_series::missing(&metrics, "policy");
    assert!(missing.is_empty(), "missing {missing:#?} in\n{metrics}");
    assert!(
        test_support::dashboards::build_info(&metrics).is_some(),
        "no meridian_build_info in\n{metrics}"
    );
    let handled = format!(
        "grpc_server_handled_total{{grpc_service=\"io.linkerd.proxy.outbound.OutboundPolicies\",grpc_method=\"Get\",grpc_type=\"unary\",grpc_code=\"{code}\"}} 1"
    );
    assert!(metrics.contains(&handled), "{handled}\n{metrics}");
    assert!(
        !metrics.lines().any(
            |l| l.starts_with("policy_grpc_server_handled") || l.starts_with("policy_process_")
        ),
        "the original's names carry no policy_ prefix\n{metrics}"
    );

    // The status writer's Lease, claimed with the account's lease rights.
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(env.client.clone(), "linkerd");
    let name = policy_controller::status::lease::LEASE_NAME;
    let lease = eventually("the status Lease", Duration::from_secs(30), || async {
        match leases.get_opt(name).await {
            Ok(Some(lease))
                if lease
                    .spec
                    .as_ref()
                    .is_some_and(|s| s.holder_identity.is_some()) =>
            {
                Ok(lease)
            }
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    // Created owned by the Deployment, with the original's labels.
    let owners = lease.metadata.owner_references.unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0].kind, "Deployment");
    assert_eq!(owners[0].name, "linkerd-destination");
    assert_eq!(Some(&owners[0].uid), deployment.metadata.uid.as_ref());
    assert_eq!(owners[0].controller, Some(true));
    let labels = lease.metadata.labels.unwrap_or_default();
    assert_eq!(
        labels
            .get("linkerd.io/control-plane-component")
            .map(String::as_str),
        Some("destination")
    );
}
