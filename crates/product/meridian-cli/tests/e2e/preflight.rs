//! `meridian-cli preflight` on a fixture with one finding of each kind (a
//! route whose status Linkerd wrote `Accepted` and Meridian would not, a
//! ServiceProfile the sp-validator webhook now refuses, a chart flag
//! Meridian ignores) and on a clean one, each in its own namespace
//! (`--scan-namespace`), as the Linkerd 2.20 chart would have them.

use test_support::TestEnv;

use crate::common::{LINKERD_IMAGE, apply, cli, destination_deployment, patch_status};

/// The chart's arguments of the three containers (2.20 defaults,
/// `deploy/swap/testdata/linkerd-2.20.yaml`), with `extra` destination flags.
fn chart_deployment(extra: &[&str]) -> String {
    let mut destination = vec![
        "destination",
        "-addr=:8086",
        "-controller-namespace=linkerd",
        "-outbound-transport-mode=transport-header",
        "-enable-h2-upgrade=true",
        "-log-level=info",
        "-log-format=plain",
        "-enable-endpoint-slices=true",
        "-cluster-domain=cluster.local",
        "-identity-trust-domain=cluster.local",
        "-default-opaque-ports=25,587,3306,4444,5432,6379,9300,11211",
        "-enable-ipv6=false",
        "-enable-pprof=false",
    ];
    destination.extend_from_slice(extra);
    destination_deployment(
        0,
        &[
            ("destination", LINKERD_IMAGE, &destination),
            (
                "sp-validator",
                LINKERD_IMAGE,
                &[
                    "sp-validator",
                    "-log-level=info",
                    "-log-format=plain",
                    "-enable-pprof=false",
                ],
            ),
            (
                "policy",
                LINKERD_IMAGE,
                &[
                    "--admin-addr=0.0.0.0:9990",
                    "--control-plane-namespace=linkerd",
                    "--grpc-addr=0.0.0.0:8090",
                    "--server-addr=0.0.0.0:9443",
                    "--cluster-networks=10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8",
                    "--identity-domain=cluster.local",
                    "--cluster-domain=cluster.local",
                    "--default-policy=all-unauthenticated",
                    "--log-level=info",
                    "--log-format=plain",
                    "--global-egress-network-namespace=linkerd-egress",
                    "--probe-networks=0.0.0.0/0,::/0",
                ],
            ),
        ],
    )
}

/// A Server `web`, and the policy HTTPRoute `name` on it (its parentRef
/// naming `port` if given) with the status Linkerd's policy controller
/// wrote: `Accepted` on the Server.
fn server_and_route(env: &TestEnv, name: &str, port: Option<u16>) {
    apply(
        env,
        r#"{"apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
            "metadata": {"name": "web"},
            "spec": {"podSelector": {"matchLabels": {"app": "web"}}, "port": 8080,
                     "proxyProtocol": "HTTP/1"}}"#,
    );
    let mut parent =
        serde_json::json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web"});
    if let Some(port) = port {
        parent["port"] = port.into();
    }
    let route = serde_json::json!({
        "apiVersion": "policy.linkerd.io/v1beta3", "kind": "HTTPRoute",
        "metadata": {"name": name},
        "spec": {"parentRefs": [parent],
                 "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": "/"}}]}]},
    });
    apply(env, &route.to_string());
    let status = serde_json::json!({"parents": [{
        "parentRef": {"group": "policy.linkerd.io", "kind": "Server", "namespace": env.ns, "name": "web"},
        "controllerName": "linkerd.io/policy-controller",
        "conditions": [{"type": "Accepted", "status": "True", "reason": "Accepted", "message": "",
                        "lastTransitionTime": "2026-01-01T00:00:00Z"}],
    }]});
    patch_status(
        env,
        &format!("httproutes.policy.linkerd.io/{name}"),
        &status,
    );
}

fn service_profile(env: &TestEnv, service: &str, path_regex: &str) {
    let profile = serde_json::json!({
        "apiVersion": "linkerd.io/v1alpha2", "kind": "ServiceProfile",
        "metadata": {"name": format!("{service}.{}.svc.cluster.local", env.ns)},
        "spec": {"routes": [{"name": "GET /api", "condition": {"method": "GET", "pathRegex": path_regex}}]},
    });
    apply(env, &profile.to_string());
}

async fn preflight(env: &TestEnv) -> (i32, String) {
    cli(
        env,
        &["preflight", "-n", &env.ns, "--scan-namespace", &env.ns],
    )
    .await
}

/// The chart's defaults, an accepted route Meridian accepts too and a
/// ServiceProfile both webhooks admit: nothing found, exit 0.
#[tokio::test]
async fn a_clean_cluster_is_0() {
    let env = TestEnv::new("preflight-clean").await;
    env.cluster().ensure_crds();
    apply(&env, &chart_deployment(&[]));
    server_and_route(&env, "served", None);
    service_profile(&env, "web", "/api/.*");

    let (code, out) = preflight(&env).await;
    assert_eq!(code, 0, "{out}");
    assert_eq!(out, "nothing found that Meridian would treat differently\n");
}

/// One finding of each kind, one line each, exit 1.
#[tokio::test]
async fn one_finding_of_each_kind_is_1() {
    let env = TestEnv::new("preflight-findings").await;
    env.cluster().ensure_crds();
    apply(&env, &chart_deployment(&["-enable-endpoint-slices=false"]));
    server_and_route(&env, "served", None);
    server_and_route(&env, "by-port", Some(8080));
    service_profile(&env, "web", "/api/.*");
    service_profile(&env, "db", "/api/(unclosed");

    let (code, out) = preflight(&env).await;
    assert_eq!(code, 1, "{out}");
    let ns = &env.ns;
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 4, "{out}");
    assert_eq!(
        lines[0],
        format!(
            "Deployment {ns}/linkerd-destination: destination: -enable-endpoint-slices=false is not served; \
             why: Meridian reads EndpointSlices only (chart value enableEndpointSlices: false); \
             the destination stays unready, its /ready naming the value"
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "HTTPRoute.policy.linkerd.io {ns}/by-port: Accepted on Server {ns}/web: \
             True (Accepted) -> False (UnsupportedValue); why: "
        )),
        "{out}"
    );
    assert!(lines[1].contains("port"), "{out}");
    assert!(
        lines[2].starts_with(&format!(
            "ServiceProfile {ns}/db.{ns}.svc.cluster.local: refused by the sp-validator webhook at its next apply; why: "
        )),
        "{out}"
    );
    assert!(lines[2].contains("invalid pathRegex"), "{out}");
    assert_eq!(
        lines[3],
        "3 finding(s): Meridian would treat these differently"
    );
}

/// No destination Deployment in `-n`: the chart values cannot be read,
/// exit 2.
#[tokio::test]
async fn no_deployment_is_2() {
    let env = TestEnv::new("preflight-none").await;
    let (code, _) = preflight(&env).await;
    assert_eq!(code, 2);
}
