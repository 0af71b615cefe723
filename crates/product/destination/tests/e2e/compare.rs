//! `meridian-cli compare` end to end on the local control plane: two
//! Meridian deployments of the same cluster (the serving pod's arguments
//! under its ServiceAccount, and `deploy/shadow`'s under the shadow's
//! read-only account) asked about a fixture of Services, meshed pods, a
//! ServiceProfile, a Server with an AuthorizationPolicy and authentications,
//! a policy HTTPRoute on the Server and a Gateway API HTTPRoute on a
//! Service: equal (exit 0), also when followed while a pod turns unready;
//! a third started with other default opaque ports differs at exactly the
//! fields that carry them (exit 1); a side that is down is named (exit 2).
//!
//! The serving plane writes the routes' status (Accepted), which both
//! read: a route is served once accepted, as in the original.

use std::{process::Output, time::Duration};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use test_support::{TestEnv, eventually, free_addr};

use crate::{
    common::{LINKERD_LEASES, WEB_SERVER_AND_ROUTE},
    planes::{Manifest, Plane, PlaneSpec, start_plane},
};

const FIXTURE: &str = "apiVersion: v1
kind: Service
metadata:
  name: web
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
---
apiVersion: v1
kind: Service
metadata:
  name: db
spec:
  selector: {app: db}
  ports: [{name: mysql, port: 3306, targetPort: 3306}]
---
apiVersion: v1
kind: Service
metadata:
  name: empty
spec:
  selector: {app: nothing}
  ports: [{name: http, port: 80, targetPort: 8080}]
---
apiVersion: linkerd.io/v1alpha2
kind: ServiceProfile
metadata:
  name: web.NS.svc.cluster.local
spec:
  routes:
    - name: GET /api
      condition: {method: GET, pathRegex: /api/.*}
      isRetryable: true
      timeout: 2s
  retryBudget: {retryRatio: 0.2, minRetriesPerSecond: 10, ttl: 10s}
---
apiVersion: policy.linkerd.io/v1alpha1
kind: MeshTLSAuthentication
metadata:
  name: clients
spec:
  identities: [\"client.NS.serviceaccount.identity.linkerd.cluster.local\", \"*.other.serviceaccount.identity.linkerd.cluster.local\"]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata:
  name: pods
spec:
  networks: [{cidr: 10.0.0.0/8, except: [10.9.0.0/16]}, {cidr: 192.168.0.0/16}]
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: web-clients
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
    - {group: policy.linkerd.io, kind: MeshTLSAuthentication, name: clients}
---
apiVersion: policy.linkerd.io/v1alpha1
kind: AuthorizationPolicy
metadata:
  name: web-pods
spec:
  targetRef: {group: policy.linkerd.io, kind: Server, name: web-http}
  requiredAuthenticationRefs:
    - {group: policy.linkerd.io, kind: NetworkAuthentication, name: pods}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: web-split
spec:
  parentRefs: [{group: core, kind: Service, name: web, port: 80}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /v2}}]
      backendRefs: [{name: web, port: 80, weight: 90}, {name: db, port: 3306, weight: 10}]
      timeouts: {request: 5s}
    - backendRefs: [{name: web, port: 80}]
";

/// The fixture's objects (with the Server and route of
/// [`WEB_SERVER_AND_ROUTE`]) and pods, and their EndpointSlices filled in.
async fn fixture(env: &TestEnv) {
    let yaml = format!("{WEB_SERVER_AND_ROUTE}---\n{FIXTURE}").replace("NS", &env.ns);
    let (ok, out) = env
        .cluster()
        .kubectl(&["apply", "-n", &env.ns, "-f", "-"], Some(&yaml));
    assert!(ok, "kubectl apply: {out}");
    for (name, app, port) in [
        ("web-0", "web", ("http", 8080)),
        ("web-1", "web", ("http", 8080)),
        ("db-0", "db", ("mysql", 3306)),
        ("client", "client", ("admin", 9000)),
    ] {
        let pod = env
            .pod(name)
            .label("app", app)
            .port(Some(port.0), port.1)
            .meshed("linkerd");
        env.create_ready_pod(&pod).await;
    }
    let slices = env.api::<EndpointSlice>();
    eventually(
        "the EndpointSlices of web and db",
        Duration::from_secs(30),
        || async {
            let ready = |svc: &str| {
                let slices = slices.clone();
                let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={svc}"));
                async move {
                    slices
                        .list(&lp)
                        .await
                        .map(|l| {
                            l.items
                                .iter()
                                .flat_map(|s| s.endpoints.iter().flatten())
                                .filter(|e| {
                                    e.conditions.as_ref().and_then(|c| c.ready) == Some(true)
                                })
                                .count()
                        })
                        .unwrap_or(0)
                }
            };
            match (ready("web").await, ready("db").await) {
                (2, 1) => Ok(()),
                other => Err(format!("ready (web, db): {other:?}")),
            }
        },
    )
    .await;
}

/// `meridian-cli compare --a … --b … -n <ns> <extra>`: (exit status, stdout, stderr).
fn compare(env: &TestEnv, a: &str, b: &str, extra: &[&str]) -> (i32, String, String) {
    let out: Output = std::process::Command::new(test_support::cli::meridian_cli())
        .env("KUBECONFIG", env.cluster().kubeconfig())
        .args(["compare", "--a", a, "--b", b, "-n", &env.ns])
        .args(extra)
        .output()
        .expect("running meridian-cli compare");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    eprintln!(
        "--- compare {extra:?}: exit {:?}\n{stderr}{stdout}",
        out.status.code()
    );
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// The serving pod's arguments under its own ServiceAccount (its status
/// writer's Lease in `linkerd`).
async fn serving(env: &TestEnv) -> Plane {
    let kubeconfig = env
        .cluster()
        .service_account_kubeconfig("linkerd", "linkerd-destination");
    start_plane(env, PlaneSpec::new(Manifest::Deploy, kubeconfig)).await
}

/// Waits until `plane` serves both routes (once the serving plane has
/// accepted them): the policy route on web-0's port, the Gateway API
/// route on web's ClusterIP.
async fn wait_routes(env: &TestEnv, plane: &Plane) {
    use linkerd2_proxy_api::{inbound, outbound};
    let addr = format!("http://{}", plane.policy_addr);
    let web_ip: std::net::IpAddr = cluster_ip(env, "web").await.parse().expect("an IP");
    eventually("both routes served", Duration::from_secs(30), || async {
        let mut inbound_client =
            inbound::inbound_server_policies_client::InboundServerPoliciesClient::connect(
                addr.clone(),
            )
            .await
            .map_err(|e| e.to_string())?;
        let spec = inbound::PortSpec {
            workload: format!("{{\"ns\":\"{}\", \"pod\":\"web-0\"}}\n", env.ns),
            port: 8080,
        };
        let server = inbound_client
            .get_port(spec)
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        let mut outbound_client =
            outbound::outbound_policies_client::OutboundPoliciesClient::connect(addr.clone())
                .await
                .map_err(|e| e.to_string())?;
        let spec = outbound::TrafficSpec {
            source_workload: format!("{{\"ns\":\"{}\", \"pod\":\"client\"}}\n", env.ns),
            target: Some(outbound::traffic_spec::Target::Addr(
                std::net::SocketAddr::new(web_ip, 80).into(),
            )),
        };
        let policy = outbound_client
            .get(spec)
            .await
            .map_err(|e| e.to_string())?
            .into_inner();
        let (inbound_text, outbound_text) = (format!("{server:?}"), format!("{policy:?}"));
        if inbound_text.contains("name: \"web-api\"")
            && outbound_text.contains("name: \"web-split\"")
        {
            Ok(())
        } else {
            Err("a route is not served yet".to_string())
        }
    })
    .await;
}

/// The shadow's arguments under its read-only ServiceAccount, `flags`
/// given to both of its containers.
async fn shadow(env: &TestEnv, flags: &[&str]) -> Plane {
    let kubeconfig = env
        .cluster()
        .service_account_kubeconfig("meridian-shadow", "meridian-shadow");
    let mut spec = PlaneSpec::new(Manifest::Shadow, kubeconfig);
    spec.hostname = Some(format!("meridian-shadow-{}", env.ns));
    for flag in flags {
        spec.destination_flags.push((*flag).to_string());
        spec.policy_flags.push((*flag).to_string());
    }
    start_plane(env, spec).await
}

/// The `total` row of the summary: (asked, equal, different, known, not asked, failed on one side).
fn total(stdout: &str) -> Vec<String> {
    let row = stdout
        .lines()
        .find(|l| l.starts_with("total "))
        .unwrap_or_else(|| panic!("no total row:\n{stdout}"));
    row.split_whitespace().skip(1).map(str::to_string).collect()
}

#[tokio::test]
async fn two_deployments_compare_equal_and_a_different_one_is_reported() {
    // Built (if needed) before any stream is open: the build blocks this
    // runtime, and a stream whose connection is not polled for that long
    // is closed by its server's keepalive.
    test_support::cli::meridian_cli();
    let env = TestEnv::new("compare").await;
    let _leases = LINKERD_LEASES.lock().await;
    env.cluster().ensure_crds();
    env.cluster().install_shadow_rbac();
    fixture(&env).await;
    let a = serving(&env).await;
    let b = shadow(&env, &[]).await;
    wait_routes(&env, &a).await;
    wait_routes(&env, &b).await;

    // 3 Services × 4 questions; 4 meshed pods × (GetProfile of podIP:port,
    // and the inbound policy of that port and of 4191).
    let (code, stdout, stderr) = compare(&env, &a.side(), &b.side(), &["--concurrency=3"]);
    assert_eq!(code, 0, "{stderr}{stdout}");
    assert_eq!(total(&stdout), ["24", "24", "0", "0", "0", "0"], "{stdout}");
    assert!(
        stderr.contains("compare: asking 24 question(s) of a (destination http://"),
        "{stderr}"
    );
    for api in [
        "Destination.Get ",
        "Destination.GetProfile ",
        "OutboundPolicies.Watch ",
        "InboundServerPolicies.WatchPort ",
    ] {
        assert!(
            stdout.lines().any(|l| l.starts_with(api)),
            "{api}: {stdout}"
        );
    }

    // Followed for a while as a client pod, while web-1 turns unready:
    // both sides follow it within the grace period.
    let cli = tokio::process::Command::new(test_support::cli::meridian_cli())
        .env("KUBECONFIG", env.cluster().kubeconfig())
        .args(["compare", "--a", &a.side(), "--b", &b.side(), "-n", &env.ns])
        .args([
            "--as", "client", "--follow", "8", "--grace", "3", "-o", "json",
        ])
        .output();
    let flip = async {
        tokio::time::sleep(Duration::from_secs(4)).await;
        let pod = env
            .api::<k8s_openapi::api::core::v1::Pod>()
            .get("web-1")
            .await
            .expect("web-1");
        let ip = pod.status.and_then(|s| s.pod_ip).expect("web-1's IP");
        env.set_pod_ready("web-1", ip.parse().expect("IPv4"), false)
            .await;
    };
    let (out, ()) = tokio::join!(cli, flip);
    let out = out.expect("running meridian-cli compare --follow");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        )
    });
    assert_eq!(out.status.code(), Some(0), "{report:#}");
    assert_eq!(report["exit"], 0);
    assert_eq!(report["summary"]["total"]["asked"], 24, "{report:#}");
    assert_eq!(report["summary"]["total"]["equal"], 24, "{report:#}");
    assert!(
        report["results"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|r| r["client"] == format!("{}/client", env.ns)),
        "{report:#}"
    );

    // Another default set of opaque ports (3306 no longer in it).
    drop(b);
    let c = shadow(
        &env,
        &["--default-opaque-ports=25,587,4444,5432,6379,9300,11211"],
    )
    .await;
    wait_routes(&env, &c).await;
    let (code, stdout, _) = compare(&env, &a.side(), &c.side(), &[]);
    assert_eq!(code, 1, "{stdout}");
    assert_eq!(total(&stdout), ["24", "19", "5", "0", "0", "0"], "{stdout}");
    let blocks = stdout
        .split("\n== differences (5)\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no differences heading:\n{stdout}"));
    // Each target once, with exactly the fields that differ (the inbound
    // side takes its opaque ports from pod annotations only, as the
    // original's).
    let ns = &env.ns;
    let db_ip = cluster_ip(&env, "db").await;
    let pod_ip = env
        .api::<k8s_openapi::api::core::v1::Pod>()
        .get("db-0")
        .await
        .expect("db-0")
        .status
        .and_then(|s| s.pod_ip)
        .expect("db-0's IP");
    let as_client = format!("(as {ns}/meridian-compare)");
    let want = format!(
        "
Destination.Get db.{ns}.svc.cluster.local:3306  {as_client}
  addrs[{pod_ip}:3306].protocol_hint.h2
    a: (absent)
    b: {{}}
  addrs[{pod_ip}:3306].protocol_hint.opaque
    a: {{}}
    b: (absent)

Destination.GetProfile db.{ns}.svc.cluster.local:3306  {as_client}
  opaque_protocol
    a: true
    b: false

Destination.GetProfile {db_ip}:3306  {as_client}
  opaque_protocol
    a: true
    b: false

OutboundPolicies.Watch {db_ip}:3306  {as_client}
  protocol.detect
    a: (absent)
    b: {{http1: {{routes: [{{hosts: [], metadata: {{default: \"http\"}}, rules: "
    );
    assert!(blocks.starts_with(&want), "want:{want}\nin:\n{blocks}");
    let outbound = blocks
        .split_once("  protocol.detect\n")
        .map(|(_, rest)| rest.split("\n\n").next().unwrap_or_default())
        .unwrap_or_default();
    let paths: Vec<&str> = outbound
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("    "))
        .collect();
    assert_eq!(paths, ["  protocol.opaque"], "{blocks}");

    // The same as JSON: every difference with its full values.
    let (code, stdout, _) = compare(
        &env,
        &a.side(),
        &c.side(),
        &["-o", "json", "-l", "app!=web"],
    );
    assert_eq!(code, 1);
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    let different: Vec<(String, Vec<String>)> = report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|r| r["verdict"] == "different")
        .map(|r| {
            let paths = r["differences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["path"].as_str().map(str::to_string))
                .collect();
            (
                format!(
                    "{} {}",
                    r["api"].as_str().unwrap_or_default(),
                    r["target"].as_str().unwrap_or_default()
                ),
                paths,
            )
        })
        .collect();
    let get_paths = vec![
        format!("addrs[{pod_ip}:3306].protocol_hint.h2"),
        format!("addrs[{pod_ip}:3306].protocol_hint.opaque"),
    ];
    assert_eq!(
        different,
        [
            (
                format!("Destination.Get db.{ns}.svc.cluster.local:3306"),
                get_paths
            ),
            (
                format!("Destination.GetProfile db.{ns}.svc.cluster.local:3306"),
                vec!["opaque_protocol".to_string()]
            ),
            (
                format!("Destination.GetProfile {db_ip}:3306"),
                vec!["opaque_protocol".to_string()]
            ),
            (
                format!("OutboundPolicies.Watch {db_ip}:3306"),
                vec!["protocol.detect".to_string(), "protocol.opaque".to_string()]
            ),
            (
                format!("Destination.GetProfile {pod_ip}:3306"),
                vec![
                    "endpoint.protocol_hint.h2".to_string(),
                    "endpoint.protocol_hint.opaque".to_string(),
                    "opaque_protocol".to_string()
                ]
            ),
        ],
        "{report:#}"
    );
    let opaque = &report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|r| r["api"] == "OutboundPolicies.Watch" && r["verdict"] == "different")
        .expect("the outbound difference")["differences"][1];
    assert_eq!(opaque["path"], "protocol.opaque");
    assert!(opaque["b"].is_null(), "{opaque}");
    assert_eq!(
        opaque["a"]["routes"][0]["metadata"]["default"], "opaq",
        "{opaque}"
    );

    // A side that is down is named, and nothing is compared.
    let down = free_addr();
    let (code, stdout, stderr) =
        compare(&env, &a.side(), &format!("{down},{}", c.policy_addr), &[]);
    assert_eq!(code, 2, "{stderr}{stdout}");
    assert!(
        stderr.contains(&format!(
            "compare: side b: cannot reach the destination at http://{down}: "
        )),
        "{stderr}"
    );
    assert!(stdout.is_empty(), "{stdout}");
}

async fn cluster_ip(env: &TestEnv, name: &str) -> String {
    env.api::<k8s_openapi::api::core::v1::Service>()
        .get(name)
        .await
        .expect("service")
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP")
}
