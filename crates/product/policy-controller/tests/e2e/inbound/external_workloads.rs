//! ExternalWorkloads selected by Servers: their `WatchPort` streams get
//! the Server's policy and follow relabelling and deletion.

use super::*;

fn external_workload_yaml(env: &TestEnv, app: &str) -> String {
    format!(
        "apiVersion: workload.linkerd.io/v1beta1
kind: ExternalWorkload
metadata:
  name: vm
  labels:
    app: {app}
spec:
  meshTLS:
    identity: vm.{ns}.serviceaccount.identity.linkerd.cluster.local
    serverName: vm.{ns}.cluster.local
  ports:
    - name: http
      port: 8080
  workloadIPs:
    - ip: 192.0.2.10
",
        ns = env.ns
    )
}

fn external_spec(env: &TestEnv, name: &str, port: u32) -> PortSpec {
    PortSpec {
        workload: format!(r#"{{"ns":"{}","external_workload":"{name}"}}"#, env.ns),
        port,
    }
}

/// An ExternalWorkload selected by an `externalWorkloadSelector` Server (by
/// port name) gets that Server's policy with its AuthorizationPolicy; the
/// watch is listed in `/streams`, falls back to the default when the
/// workload is relabelled away from the selector, and ends when the
/// workload is deleted. Unknown external workloads are NotFound.
#[tokio::test]
async fn external_workloads_get_their_servers_policy_and_follow_relabelling() {
    let env = TestEnv::new("policy-ew").await;
    env.cluster().ensure_crds();
    let client_id = format!(
        "client.{}.serviceaccount.identity.linkerd.cluster.local",
        env.ns
    );
    kubectl_apply(&env, &external_workload_yaml(&env, "legacy"));
    kubectl_apply(
        &env,
        &(String::from(
            "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: vm-http
spec:
  externalWorkloadSelector:
    matchLabels:
      app: legacy
    matchExpressions:
      - {key: tier, operator: DoesNotExist}
  port: http
  proxyProtocol: HTTP/1
---
",
        ) + &allow_clients("vm-http", &client_id)),
    );
    let mut controller = start_controller(&env, &[]).await;

    let err = controller
        .inbound
        .get_port(external_spec(&env, "missing", 8080))
        .await
        .expect_err("unknown external workload");
    assert_eq!(
        (err.code(), err.message()),
        (Code::NotFound, "unknown server")
    );
    // The same name as a pod is not an external workload.
    let err = controller
        .inbound
        .get_port(spec(&env, "vm", 8080))
        .await
        .expect_err("no such pod");
    assert_eq!(err.code(), Code::NotFound, "{err:?}");

    let mut stream = controller
        .inbound
        .watch_port(external_spec(&env, "vm", 8080))
        .await
        .expect("WatchPort")
        .into_inner();
    let srv = next_matching(&mut stream, "the Server with its authorization", |s| {
        name_of(s) == ("server".into(), "vm-http".into()) && !s.authorizations.is_empty()
    })
    .await;
    assert!(matches!(
        srv.protocol.and_then(|p| p.kind),
        Some(proxy_protocol::Kind::Http1(_))
    ));
    let [authz] = &srv.authorizations[..] else {
        panic!("one authorization expected: {:?}", srv.authorizations);
    };
    assert!(matches!(
        authz.metadata.clone().and_then(|m| m.kind),
        Some(metadata::Kind::Resource(r)) if r.name == "allow-clients"
    ));
    let Some(authn::Permit::MeshTls(authn::PermitMeshTls {
        clients: Some(authn::permit_mesh_tls::Clients::Identities(ids)),
    })) = authz.authentication.clone().and_then(|a| a.permit)
    else {
        panic!("expected mesh TLS identities: {authz:?}");
    };
    assert_eq!(
        ids.identities.iter().map(|i| &i.name).collect::<Vec<_>>(),
        [&client_id]
    );

    // Another port of the workload has the default server.
    let other = controller
        .inbound
        .get_port(external_spec(&env, "vm", 9999))
        .await
        .expect("GetPort")
        .into_inner();
    assert_eq!(
        name_of(&other),
        ("default".into(), "all-unauthenticated".into())
    );

    let (status, body) = controller
        .process
        .introspection_get(&format!("/streams?kind=WatchPort&workload={}", env.ns))
        .await;
    assert_eq!(status, 200, "{body}");
    let page: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(page["streams"].as_array().map(Vec::len), Some(1), "{body}");
    assert_eq!(
        page["streams"][0]["workload"],
        external_spec(&env, "vm", 8080).workload
    );
    let (_, body) = controller.process.introspection_get("/audit").await;
    let audit: serde_json::Value =
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    assert_eq!(audit["consistent"], true, "{body}");
    let (_, metrics) = controller.process.admin_get("/metrics").await;
    let ews = metrics
        .lines()
        .find_map(|l| l.strip_prefix("policy_inbound_index_external_workloads "))
        .and_then(|v| v.trim().parse::<u64>().ok());
    assert!(ews.is_some_and(|n| n >= 1), "{metrics}");

    kubectl_apply(&env, &external_workload_yaml(&env, "other"));
    next_matching(&mut stream, "the default server after relabelling", |s| {
        name_of(s) == ("default".into(), "all-unauthenticated".into())
    })
    .await;
    kubectl_apply(&env, &external_workload_yaml(&env, "legacy"));
    next_matching(&mut stream, "the Server again", |s| {
        name_of(s).1 == "vm-http"
    })
    .await;

    kubectl_delete(&env, "externalworkload/vm");
    let end = tokio::time::timeout(TIMEOUT, async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                other => break other,
            }
        }
    })
    .await
    .expect("the watch ends when the external workload is deleted");
    assert!(matches!(end, Ok(None)), "{end:?}");
}
