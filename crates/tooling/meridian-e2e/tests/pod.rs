//! The Meridian pod for real: each scenario talks to the installed pod the
//! way users and proxies do (its Services, `kubectl port-forward`, the
//! generated gRPC clients, `kubectl apply` through the webhooks), against
//! workloads of real containers whose readiness the kubelet probes.
//!
//! The tests are `#[ignore]`d in `cargo test --workspace` (they need a
//! cluster running the pod); `cargo xtask e2e` sets one up and runs them with
//! `--ignored`.

#![allow(clippy::unwrap_used)]

use std::{collections::BTreeSet, net::SocketAddr, time::Duration};

use linkerd2_proxy_api::{
    destination::{GetDestination, destination_client::DestinationClient},
    inbound::{PortSpec, inbound_server_policies_client::InboundServerPoliciesClient},
};
use meridian_e2e::{
    Cluster, DESTINATION_SERVICE_ACCOUNT, TIMEOUT, authority, http_workload,
    stream::{EndpointStream, connect},
};
use tonic::transport::Channel;

/// The ready pods of `app` as `ip:8080`, from the API (the truth).
async fn ready_endpoints(cluster: &Cluster, ns: &str, app: &str) -> BTreeSet<SocketAddr> {
    cluster
        .ready_pod_ips(ns, &format!("app={app}"))
        .await
        .into_iter()
        .map(|ip| SocketAddr::new(ip, 8080))
        .collect()
}

/// Waits until the API says `app` has `n` ready pods; returns them.
async fn wait_ready_count(
    cluster: &Cluster,
    ns: &str,
    app: &str,
    n: usize,
) -> BTreeSet<SocketAddr> {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let ready = ready_endpoints(cluster, ns, app).await;
        if ready.len() == n {
            return ready;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{ns}/{app}: want {n} ready pods, have {ready:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Turns a test-HTTP pod's readiness answer on or off through its own
/// port-forward (the image's `/ready` control endpoint).
async fn set_serving_ready(cluster: &Cluster, ns: &str, pod: &str, ready: bool) {
    let forward = cluster.port_forward(ns, &format!("pod/{pod}"), 8080);
    let path = if ready { "/ready/ok" } else { "/ready/fail" };
    let status = http_post(forward.local, path).await;
    assert_eq!(status, 200, "POST {path} on {pod}");
}

/// A minimal HTTP/1.1 POST over loopback; returns the status code.
async fn http_post(addr: SocketAddr, path: &str) -> u16 {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut conn = tokio::net::TcpStream::connect(addr)
        .await
        .unwrap_or_else(|e| panic!("connecting to {addr}: {e}"));
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    );
    conn.write_all(request.as_bytes()).await.expect("writing");
    let mut response = Vec::new();
    conn.read_to_end(&mut response).await.expect("reading");
    let text = String::from_utf8_lossy(&response);
    text.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"))
}

async fn destination_client(
    cluster: &Cluster,
) -> (meridian_e2e::PortForward, DestinationClient<Channel>) {
    let forward = cluster.forward_to_meridian(8086);
    let client = connect(forward.local)
        .await
        .expect("connecting to the destination");
    (forward, client)
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn get_follows_real_containers_scaling_and_failing_probes() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-get").await;
    cluster.run_http_workload(&ns.name, "web", 1, &[]).await;
    let (_forward, mut client) = destination_client(&cluster).await;
    let mut stream = EndpointStream::open(&mut client, &authority(&ns.name, "web", 80))
        .await
        .expect("opening Get");
    let one = wait_ready_count(&cluster, &ns.name, "web", 1).await;
    stream.wait_for("one pod", &one, TIMEOUT).await.unwrap();

    cluster.kubectl_ok(
        &["scale", "-n", &ns.name, "deploy/web", "--replicas=3"],
        None,
    );
    cluster.wait_deployment_ready(&ns.name, "web").await;
    let three = wait_ready_count(&cluster, &ns.name, "web", 3).await;
    stream
        .wait_for("scaled to three", &three, TIMEOUT)
        .await
        .unwrap();

    // The kubelet's readiness probe fails on one pod: it leaves the stream.
    let names = cluster.pod_names(&ns.name, "web").await;
    let victim = &names[0];
    set_serving_ready(&cluster, &ns.name, victim, false).await;
    let two = wait_ready_count(&cluster, &ns.name, "web", 2).await;
    stream
        .wait_for("a probe failing", &two, TIMEOUT)
        .await
        .unwrap();
    // ... and recovers.
    set_serving_ready(&cluster, &ns.name, victim, true).await;
    let three = wait_ready_count(&cluster, &ns.name, "web", 3).await;
    stream
        .wait_for("the probe recovering", &three, TIMEOUT)
        .await
        .unwrap();

    // Scaled to zero: NoEndpoints{exists: true}, the stream stays open.
    cluster.kubectl_ok(
        &["scale", "-n", &ns.name, "deploy/web", "--replicas=0"],
        None,
    );
    stream
        .wait_for("scaled to zero", &BTreeSet::new(), TIMEOUT)
        .await
        .unwrap();
    while stream.no_endpoints.is_none() {
        stream.next(TIMEOUT).await.expect("a NoEndpoints");
    }
    assert_eq!(stream.no_endpoints, Some(true), "the Service still exists");
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn get_profile_follows_a_service_profile() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-profile").await;
    cluster.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&http_workload(&cluster, &ns.name, "books", 1, &[])),
    );
    let (_forward, mut client) = destination_client(&cluster).await;
    let target = authority(&ns.name, "books", 80);
    let mut profiles = client
        .get_profile(GetDestination {
            scheme: "k8s".into(),
            path: target.clone(),
            context_token: String::new(),
        })
        .await
        .expect("opening GetProfile")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, profiles.message())
        .await
        .expect("a first profile")
        .expect("stream healthy")
        .expect("stream open");
    assert!(first.routes.is_empty(), "no ServiceProfile yet: {first:?}");

    let fqdn = format!("books.{}.svc.cluster.local", ns.name);
    let profile = format!(
        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n  name: {fqdn}\n  namespace: {ns}\nspec:\n  routes:\n    - name: GET /books\n      condition: {{method: GET, pathRegex: /books}}\n      isRetryable: true\n",
        ns = ns.name
    );
    let out = cluster.kubectl_ok(&["apply", "-f", "-"], Some(&profile));
    assert!(out.contains("created"), "{out}");
    let with_route = tokio::time::timeout(TIMEOUT, profiles.message())
        .await
        .expect("the profile's route arrives")
        .expect("stream healthy")
        .expect("stream open");
    assert_eq!(with_route.routes.len(), 1, "{with_route:?}");
    assert!(with_route.routes[0].is_retryable);
    assert_eq!(with_route.fully_qualified_name, fqdn);

    cluster.kubectl_ok(&["delete", "serviceprofile", "-n", &ns.name, &fqdn], None);
    let without = tokio::time::timeout(TIMEOUT, profiles.message())
        .await
        .expect("the deletion arrives")
        .expect("stream healthy")
        .expect("stream open");
    assert!(without.routes.is_empty(), "{without:?}");
}

/// Waits until a server-side dry run of `invalid` is denied by a webhook
/// (dry runs reach validating webhooks and persist nothing).
async fn wait_for_webhook(cluster: &Cluster, invalid: &str) {
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let (ok, out) = cluster.kubectl(&["apply", "--dry-run=server", "-f", "-"], Some(invalid));
        if !ok && out.contains("denied the request") {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no webhook answered within {TIMEOUT:?}: {out}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn webhooks_refuse_invalid_objects_through_their_services() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-webhooks").await;
    let sp = format!(
        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n  name: bad.{ns}.svc.cluster.local\n  namespace: {ns}\nspec:\n  routes:\n    - name: r\n      condition: {{}}\n",
        ns = ns.name
    );
    // The webhooks fail open (`failurePolicy: Ignore`, as the chart's), so
    // until the apiserver reaches the pod through the webhook Services (just
    // after the pod was recreated, kube-proxy may not route to it yet) an
    // invalid object would be admitted: wait, with server-side dry runs
    // that persist nothing, until both webhooks answer.
    let server = format!(
        "apiVersion: policy.linkerd.io/v1beta3\nkind: Server\nmetadata:\n  name: bad-srv\n  namespace: {}\nspec:\n  podSelector: {{}}\n  port: 80\n  accessPolicy: allow-everyone\n",
        ns.name
    );
    wait_for_webhook(&cluster, &sp).await;
    wait_for_webhook(&cluster, &server).await;

    let (ok, out) = cluster.kubectl(&["apply", "-f", "-"], Some(&sp));
    assert!(!ok, "an invalid ServiceProfile must be refused: {out}");
    let want = format!(
        "admission webhook \"linkerd-sp-validator.linkerd.io\" denied the request: ServiceProfile \"bad.{}.svc.cluster.local\" has a route with an invalid condition: A request match must have a field set",
        ns.name
    );
    assert!(out.contains(&want), "want: {want}\ngot:  {out}");

    let (ok, out) = cluster.kubectl(&["apply", "-f", "-"], Some(&server));
    assert!(!ok, "an invalid Server must be refused: {out}");
    let want = "admission webhook \"linkerd-policy-validator.linkerd.io\" denied the request:";
    assert!(out.contains(want), "want: {want}\ngot:  {out}");
    assert!(out.contains("allow-everyone"), "names the bad value: {out}");

    // Valid objects pass the same webhooks.
    let good = format!(
        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n  name: good.{ns}.svc.cluster.local\n  namespace: {ns}\nspec:\n  routes:\n    - name: r\n      condition: {{method: GET}}\n",
        ns = ns.name
    );
    let out = cluster.kubectl_ok(&["apply", "-f", "-"], Some(&good));
    assert!(out.contains("created"), "{out}");
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn inbound_policy_for_a_real_pod() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-inbound").await;
    let meshed = cluster.meshed_label();
    cluster.run_http_workload(&ns.name, "api", 1, &meshed).await;
    let pod = cluster.pod_names(&ns.name, "api").await.remove(0);

    let forward = cluster.forward_to_meridian(8090);
    let channel = Channel::from_shared(forward.url())
        .expect("url")
        .connect()
        .await
        .expect("connecting to the policy controller");
    let mut client = InboundServerPoliciesClient::new(channel);
    let spec = PortSpec {
        workload: format!("{}:{pod}", ns.name),
        port: 8080,
    };
    let server = client
        .get_port(spec.clone())
        .await
        .expect("GetPort for a real pod")
        .into_inner();
    assert_eq!(
        server.labels.get("kind").map(String::as_str),
        Some("default"),
        "{server:?}"
    );
    assert_eq!(
        server.labels.get("name").map(String::as_str),
        Some("all-unauthenticated"),
        "{server:?}"
    );
    // The kubelet probes /ready on this port: a probe route is authorized.
    let mut watch = client
        .watch_port(spec)
        .await
        .expect("WatchPort")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, watch.message())
        .await
        .expect("a first policy")
        .expect("healthy")
        .expect("open");
    assert_eq!(first, server, "WatchPort starts with what GetPort answered");
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn streams_converge_after_the_meridian_pod_is_recreated() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-restart").await;
    cluster.run_http_workload(&ns.name, "web", 1, &[]).await;
    let path = authority(&ns.name, "web", 80);
    let (forward, mut client) = destination_client(&cluster).await;
    let mut stream = EndpointStream::open(&mut client, &path)
        .await
        .expect("open");
    let one = wait_ready_count(&cluster, &ns.name, "web", 1).await;
    stream.wait_for("one pod", &one, TIMEOUT).await.unwrap();

    // The pod goes away (its Deployment makes a new one) while the
    // workload changes.
    let cp = cluster.control_plane_ns.clone();
    cluster.kubectl_ok(
        &[
            "delete",
            "pod",
            "-n",
            &cp,
            "-l",
            "linkerd.io/control-plane-component=destination",
            "--wait=false",
        ],
        None,
    );
    cluster.kubectl_ok(
        &["scale", "-n", &ns.name, "deploy/web", "--replicas=2"],
        None,
    );
    // The old pod's streams end (it is terminated gracefully); updates
    // that arrive before that are applied as usual.
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        assert!(!left.is_zero(), "the old pod's stream never ended");
        if stream.next(left).await.is_err() {
            break;
        }
    }
    drop(forward);

    // A client reconnects as a proxy does, until it holds the truth.
    cluster
        .wait_deployment_ready(&cp, meridian_e2e::DESTINATION_DEPLOYMENT)
        .await;
    let deadline = tokio::time::Instant::now() + TIMEOUT;
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        let truth = wait_ready_count(&cluster, &ns.name, "web", 2).await;
        let (_forward, mut client) = destination_client(&cluster).await;
        match EndpointStream::open(&mut client, &path).await {
            Ok(mut stream) => match stream.wait_for("after the restart", &truth, TIMEOUT).await {
                Ok(()) => return,
                Err(e) => last = e,
            },
            Err(status) => last = format!("{status:?}"),
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("no converged stream after the restart: {last}");
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn the_pods_service_account_holds_no_wildcard_rights() {
    let cluster = Cluster::from_env().await;
    let user = format!(
        "system:serviceaccount:{}:{DESTINATION_SERVICE_ACCOUNT}",
        cluster.control_plane_ns
    );
    let out = cluster.kubectl_ok(&["auth", "can-i", "--list", &format!("--as={user}")], None);
    for line in out.lines().skip(1) {
        let resource = line.split_whitespace().next().unwrap_or_default();
        // Non-resource URLs (discovery's `/api/*`) are Kubernetes' own defaults.
        if resource.starts_with('[') || resource.starts_with('/') {
            continue;
        }
        assert!(
            !resource.contains('*') && !line.contains("[*]"),
            "{user} has a wildcard right: {line}\n{out}"
        );
    }
    for (verb, resource, subresource) in [
        ("watch", "endpointslices.discovery.k8s.io", ""),
        ("watch", "pods", ""),
        ("watch", "serviceprofiles.linkerd.io", ""),
        ("watch", "externalworkloads.workload.linkerd.io", ""),
        ("watch", "servers.policy.linkerd.io", ""),
        ("patch", "httproutes.policy.linkerd.io", "status"),
        ("patch", "httproutes.gateway.networking.k8s.io", "status"),
    ] {
        let mut args = vec!["auth", "can-i", verb, resource, "-A"];
        if !subresource.is_empty() {
            args.push("--subresource");
            args.push(subresource);
        }
        let as_user = format!("--as={user}");
        args.push(&as_user);
        let (ok, answer) = cluster.kubectl(&args, None);
        assert!(
            ok && answer.trim() == "yes",
            "{user} can {verb} {resource} {subresource}: {answer}"
        );
    }
    let (_, answer) = cluster.kubectl(
        &[
            "auth",
            "can-i",
            "delete",
            "pods",
            "-A",
            &format!("--as={user}"),
        ],
        None,
    );
    assert_eq!(answer.trim(), "no", "{user} must not delete pods");
    // The pod talks to the API server as that ServiceAccount: no kubeconfig
    // is mounted, and its token is the projected one.
    let spec = cluster.kubectl_ok(
        &[
            "get",
            "deploy",
            "-n",
            &cluster.control_plane_ns,
            meridian_e2e::DESTINATION_DEPLOYMENT,
            "-o",
            "jsonpath={.spec.template.spec.serviceAccountName} {.spec.template.spec.automountServiceAccountToken}",
        ],
        None,
    );
    assert_eq!(spec.trim(), format!("{DESTINATION_SERVICE_ACCOUNT} false"));
}

/// `meridian-cli explain --port-forward` finds the Meridian pod and reaches
/// its destination, admin and policy ports through the API server: for an
/// unmeshed client (no proxy, so no stream) it names discovery as broken,
/// with endpoints read through the forwarded ports.
#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn explain_reaches_the_pod_through_port_forwards() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-explain").await;
    for app in ["web", "client"] {
        cluster.kubectl_ok(
            &["apply", "-f", "-"],
            Some(&http_workload(&cluster, &ns.name, app, 1, &[])),
        );
    }
    cluster.wait_deployment_ready(&ns.name, "web").await;
    cluster.wait_deployment_ready(&ns.name, "client").await;
    wait_ready_count(&cluster, &ns.name, "web", 1).await;
    cluster.wait_slices_ready(&ns.name, "web", 1).await;
    let client = cluster.pod_names(&ns.name, "client").await.remove(0);

    let cli = std::env::var_os("MERIDIAN_E2E_CLI")
        .expect("MERIDIAN_E2E_CLI is not set: run this suite with `cargo xtask e2e`");
    let target = format!("web.{}:80", ns.name);
    let output = tokio::process::Command::new(cli)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .args(["explain", &client, &target, "-n", &ns.name])
        .arg(format!("--port-forward={}", cluster.control_plane_ns))
        .output()
        .await
        .expect("running meridian-cli");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}{stdout}");
    assert!(stderr.contains("port-forwarding to Pod"), "{stderr}");
    assert!(stdout.contains("1 of 1 endpoints ready"), "{stdout}");
    assert!(
        stdout.contains("the client is sent 1 endpoint(s)"),
        "{stdout}"
    );
    assert!(stdout.contains("outbound policy:"), "{stdout}");
    assert_eq!(
        stdout.lines().last(),
        Some(
            format!(
                "verdict: discovery broken: no Get stream from Pod {ns}/{client} for web.{ns}.svc:80 (its proxy is not connected or never asked)",
                ns = ns.name
            )
            .as_str()
        ),
        "{stdout}"
    );
    assert_eq!(output.status.code(), Some(1), "{stdout}");
}

/// Server, authorization and route of the shadow test's workload (served
/// once the serving pod has accepted the route, by both).
const SHADOW_POLICY: &str = "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
spec:
  podSelector:
    matchLabels: {app: web}
  port: http
  proxyProtocol: HTTP/1
---
apiVersion: policy.linkerd.io/v1alpha1
kind: NetworkAuthentication
metadata:
  name: pods
spec:
  networks: [{cidr: 10.244.0.0/16}]
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
apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata:
  name: web-api
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /api}}]
";

/// `deploy/shadow` beside the Meridian pod: its pod becomes Ready by its
/// real probes, and `meridian-cli compare --port-forward` between the two
/// Deployments (each reached through the API server) finds every answer
/// equal over real workloads (meshed-labelled Deployments, a
/// ServiceProfile, a Server with an authorization and a route). The shadow
/// is removed afterwards.
#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn the_shadow_beside_the_pod_compares_clean() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-shadow").await;
    let meshed = cluster.meshed_label();
    for (app, replicas) in [("web", 2), ("client", 1)] {
        cluster.kubectl_ok(
            &["apply", "-f", "-"],
            Some(&http_workload(&cluster, &ns.name, app, replicas, &meshed)),
        );
    }
    cluster.kubectl_ok(&["apply", "-n", &ns.name, "-f", "-"], Some(SHADOW_POLICY));
    let profile = format!(
        "apiVersion: linkerd.io/v1alpha2\nkind: ServiceProfile\nmetadata:\n  name: web.{ns}.svc.cluster.local\n  namespace: {ns}\nspec:\n  routes:\n    - name: GET /books\n      condition: {{method: GET, pathRegex: /books}}\n      isRetryable: true\n",
        ns = ns.name
    );
    cluster.kubectl_ok(&["apply", "-f", "-"], Some(&profile));
    cluster.wait_deployment_ready(&ns.name, "web").await;
    cluster.wait_deployment_ready(&ns.name, "client").await;
    wait_ready_count(&cluster, &ns.name, "web", 2).await;

    // The shadow, with the image the Meridian pod runs (a registry's, on
    // a remote cluster).
    let rendered = cluster.kubectl_ok(&["kustomize", "deploy/shadow"], None);
    let image = cluster.kubectl_ok(
        &[
            "get",
            "deploy",
            "-n",
            &cluster.control_plane_ns,
            meridian_e2e::DESTINATION_DEPLOYMENT,
            "-o",
            "jsonpath={.spec.template.spec.containers[0].image}",
        ],
        None,
    );
    let shadow = rendered.replace(
        "image: meridian/controller:dev",
        &format!("image: {}", image.trim()),
    );
    cluster.kubectl_ok(&["apply", "--server-side", "-f", "-"], Some(&shadow));
    cluster
        .wait_deployment_ready("meridian-shadow", "meridian-shadow")
        .await;
    println!(
        "{}",
        cluster.kubectl_ok(
            &["get", "pods", "-n", "meridian-shadow", "-o", "wide"],
            None
        )
    );

    let cli = std::env::var_os("MERIDIAN_E2E_CLI")
        .expect("MERIDIAN_E2E_CLI is not set: run this suite with `cargo xtask e2e`");
    let serving = format!(
        "{}/{}",
        cluster.control_plane_ns,
        meridian_e2e::DESTINATION_DEPLOYMENT
    );
    let output = tokio::process::Command::new(&cli)
        .env("KUBECONFIG", &cluster.kubeconfig)
        .args(["compare", "--port-forward", "--a", &serving])
        .args(["--b", "meridian-shadow/meridian-shadow", "-n", &ns.name])
        .output()
        .await
        .expect("running meridian-cli compare");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stderr}{stdout}");
    let deleted = cluster.kubectl(&["delete", "--wait=false", "-f", "-"], Some(&shadow));
    assert!(deleted.0, "deleting the shadow: {}", deleted.1);
    assert!(
        stdout.contains("(port-forwarded to pod meridian-shadow/meridian-shadow-"),
        "{stdout}"
    );
    // 3 pods × (GetProfile of podIP:8080, inbound 8080 and 4191), 2
    // Services × 4 questions.
    let total = stdout
        .lines()
        .find(|l| l.starts_with("total "))
        .map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>());
    assert_eq!(
        total,
        Some(vec!["17", "17", "0", "0", "0", "0"]),
        "{stdout}"
    );
    assert_eq!(output.status.code(), Some(0), "{stderr}{stdout}");
}
