//! HTTPLocalRateLimitPolicies and EgressNetworks end to end: the
//! `policy-controller` binary runs as a process against the real local
//! control plane, objects are applied with kubectl, and the generated
//! tonic clients read the inbound and outbound APIs over a real socket.

use std::{net::SocketAddr, time::Duration};

use linkerd2_proxy_api::{
    inbound::{self, PortSpec, proxy_protocol},
    meta::metadata,
    net::TcpAddress,
    outbound::{OutboundPolicy, TrafficSpec, proxy_protocol as proxy_protocol_out, traffic_spec},
};
use test_support::{TestEnv, eventually};
use tonic::Streaming;

use crate::support::start_controller;

const TIMEOUT: Duration = Duration::from_secs(30);

fn kubectl(env: &TestEnv, ns: &str, args: &[&str], stdin: Option<&str>) -> String {
    let mut all = vec!["-n", ns];
    all.extend_from_slice(args);
    let (ok, out) = env.cluster().kubectl(&all, stdin);
    assert!(ok, "kubectl {args:?} failed: {out}\n{stdin:?}");
    out
}

fn apply(env: &TestEnv, ns: &str, yaml: &str) {
    kubectl(env, ns, &["apply", "-f", "-"], Some(yaml));
}

/// `(status, reason)` of the Accepted condition in `.status.conditions` of
/// `what` (e.g. `egressnetwork/x`).
fn accepted(env: &TestEnv, ns: &str, what: &str) -> Option<(String, String)> {
    let (ok, out) = env
        .cluster()
        .kubectl(&["get", "-n", ns, what, "-o", "json"], None);
    if !ok {
        return None;
    }
    let json: serde_json::Value = serde_json::from_str(&out).ok()?;
    let cond = json
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "Accepted")?;
    Some((
        cond["status"].as_str()?.to_string(),
        cond["reason"].as_str()?.to_string(),
    ))
}

async fn wait_accepted(env: &TestEnv, ns: &str, what: &str, want: (&str, &str)) {
    eventually(&format!("{what} {want:?}"), TIMEOUT, || async {
        match accepted(env, ns, what) {
            Some((s, r)) if s == want.0 && r == want.1 => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
}

/// Reads messages until one satisfies `done`; returns it.
async fn next_matching<T>(stream: &mut Streaming<T>, what: &str, done: impl Fn(&T) -> bool) -> T {
    let read = async {
        loop {
            let msg = stream
                .message()
                .await
                .expect("stream healthy")
                .expect("stream open");
            if done(&msg) {
                return msg;
            }
        }
    };
    tokio::time::timeout(TIMEOUT, read)
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

// === HTTPLocalRateLimitPolicy ===

fn ratelimit_of(s: &inbound::Server) -> Option<inbound::HttpLocalRateLimit> {
    match s.protocol.as_ref()?.kind.as_ref()? {
        proxy_protocol::Kind::Http1(h) => h.local_rate_limit.clone(),
        proxy_protocol::Kind::Http2(h) => h.local_rate_limit.clone(),
        proxy_protocol::Kind::Detect(d) => d.http_local_rate_limit.clone(),
        _ => None,
    }
}

fn ratelimit_name(s: &inbound::Server) -> Option<String> {
    match ratelimit_of(s)?.metadata?.kind? {
        metadata::Kind::Resource(r) => Some(r.name),
        metadata::Kind::Default(_) => None,
    }
}

const RATELIMIT: &str = "apiVersion: policy.linkerd.io/v1alpha1
kind: HTTPLocalRateLimitPolicy
metadata:
  name: limit
spec:
  targetRef:
    group: policy.linkerd.io
    kind: Server
    name: web-http
  total:
    requestsPerSecond: 100
  identity:
    requestsPerSecond: 20
  overrides:
    - requestsPerSecond: 50
      clientRefs:
        - kind: ServiceAccount
          name: api
";

/// A rate limit on an open WatchPort stream: it appears once our status
/// writer accepted it; a second policy for the same Server is refused
/// (`RateLimitReasonAlreadyExists`) and takes over when the first goes.
#[tokio::test]
async fn a_rate_limit_reaches_an_open_inbound_stream() {
    let env = TestEnv::new("ratelimit").await;
    let pod = env
        .pod("web")
        .meshed("linkerd")
        .label("app", "web")
        .port(Some("http"), 8080);
    env.create_ready_pod(&pod).await;
    let mut controller = start_controller(&env, &[]).await;
    apply(
        &env,
        &env.ns,
        "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
spec:
  podSelector:
    matchLabels:
      app: web
  port: http
  proxyProtocol: HTTP/1
",
    );
    let mut stream = controller
        .inbound
        .watch_port(PortSpec {
            workload: format!(r#"{{"ns":"{}","pod":"web"}}"#, env.ns),
            port: 8080,
        })
        .await
        .expect("WatchPort")
        .into_inner();
    let srv = next_matching(&mut stream, "the Server", |s| {
        s.labels.get("name").map(String::as_str) == Some("web-http")
    })
    .await;
    assert_eq!(ratelimit_of(&srv), None);

    apply(&env, &env.ns, RATELIMIT);
    let limited = next_matching(&mut stream, "the rate limit", |s| ratelimit_of(s).is_some()).await;
    let rl = ratelimit_of(&limited).expect("rate limit");
    let Some(metadata::Kind::Resource(res)) = rl.metadata.and_then(|m| m.kind) else {
        panic!("expected resource metadata");
    };
    assert_eq!(
        (res.group.as_str(), res.kind.as_str(), res.name.as_str()),
        ("policy.linkerd.io", "HTTPLocalRateLimitPolicy", "limit")
    );
    assert_eq!(rl.total.map(|l| l.requests_per_second), Some(100));
    assert_eq!(rl.identity.map(|l| l.requests_per_second), Some(20));
    let ids: Vec<_> = rl
        .overrides
        .iter()
        .flat_map(|o| o.clients.iter().flat_map(|c| &c.identities))
        .map(|i| i.name.clone())
        .collect();
    assert_eq!(
        ids,
        [format!(
            "api.{ns}.serviceaccount.identity.{ns}.cluster.local",
            ns = env.ns
        )]
    );
    wait_accepted(
        &env,
        &env.ns,
        "httplocalratelimitpolicy/limit",
        ("True", "Accepted"),
    )
    .await;

    // A second policy for the same Server is refused, then takes over.
    apply(
        &env,
        &env.ns,
        &RATELIMIT.replace("name: limit", "name: second"),
    );
    wait_accepted(
        &env,
        &env.ns,
        "httplocalratelimitpolicy/second",
        ("False", "RateLimitReasonAlreadyExists"),
    )
    .await;
    kubectl(
        &env,
        &env.ns,
        &["delete", "httplocalratelimitpolicy/limit"],
        None,
    );
    next_matching(&mut stream, "the second policy", |s| {
        ratelimit_name(s).as_deref() == Some("second")
    })
    .await;

    // A policy for a missing Server says so.
    apply(
        &env,
        &env.ns,
        &RATELIMIT
            .replace("name: limit", "name: orphan")
            .replace("name: web-http", "name: nope"),
    );
    wait_accepted(
        &env,
        &env.ns,
        "httplocalratelimitpolicy/orphan",
        ("False", "NoMatchingTarget"),
    )
    .await;
}

// === EgressNetwork ===

fn by_addr(source_ns: &str, addr: &str) -> TrafficSpec {
    let addr: SocketAddr = addr.parse().expect("address");
    TrafficSpec {
        source_workload: format!("{source_ns}:client"),
        target: Some(traffic_spec::Target::Addr(TcpAddress {
            ip: Some(addr.ip().into()),
            port: u32::from(addr.port()),
        })),
    }
}

/// `(kind, namespace/name)` of the policy's parent, e.g.
/// `("EgressNetwork", "ns/ext")`, or `("default", name)`.
fn parent_of(p: &OutboundPolicy) -> (String, String) {
    match p.metadata.as_ref().and_then(|m| m.kind.as_ref()) {
        Some(metadata::Kind::Resource(r)) => {
            (r.kind.clone(), format!("{}/{}", r.namespace, r.name))
        }
        Some(metadata::Kind::Default(name)) => ("default".into(), name.clone()),
        None => (String::new(), String::new()),
    }
}

/// The names of the HTTP/1 routes of a Detect policy.
fn http1_route_names(p: &OutboundPolicy) -> Vec<String> {
    let Some(proxy_protocol_out::Kind::Detect(d)) =
        p.protocol.as_ref().and_then(|p| p.kind.as_ref())
    else {
        return Vec::new();
    };
    d.http1
        .iter()
        .flat_map(|h| &h.routes)
        .map(
            |r| match r.metadata.as_ref().and_then(|m| m.kind.as_ref()) {
                Some(metadata::Kind::Resource(r)) => r.name.clone(),
                Some(metadata::Kind::Default(n)) => n.clone(),
                None => String::new(),
            },
        )
        .collect()
}

fn egress_network(name: &str, networks: &str, traffic_policy: &str) -> String {
    format!(
        "apiVersion: policy.linkerd.io/v1alpha1
kind: EgressNetwork
metadata:
  name: {name}
spec:
  trafficPolicy: {traffic_policy}
{networks}"
    )
}

/// An open outbound Watch for an external address follows EgressNetworks:
/// egress-fallback, then the global namespace's (Deny), then the client
/// namespace's own (Allow), then a route attached to it; statuses are
/// written for the networks and the route.
#[tokio::test]
async fn an_outbound_watch_for_an_external_ip_follows_egress_networks() {
    let env = TestEnv::new("egress").await;
    let global = TestEnv::new("egress-global").await;
    let mut controller = start_controller(
        &env,
        &[format!("--global-egress-network-namespace={}", global.ns)],
    )
    .await;
    let dst = "203.0.113.5:443";
    let mut stream = controller
        .outbound
        .watch(by_addr(&env.ns, dst))
        .await
        .expect("Watch")
        .into_inner();
    let first = next_matching(&mut stream, "the fallback", |_| true).await;
    assert_eq!(
        parent_of(&first),
        ("default".into(), "egress-fallback".into())
    );

    apply(&env, &global.ns, &egress_network("shared", "", "Deny"));
    let denied = next_matching(&mut stream, "the global EgressNetwork", |p| {
        parent_of(p).0 == "EgressNetwork"
    })
    .await;
    assert_eq!(
        parent_of(&denied),
        ("EgressNetwork".into(), format!("{}/shared", global.ns))
    );
    assert_eq!(http1_route_names(&denied), ["http-egress-deny"]);
    wait_accepted(
        &env,
        &global.ns,
        "egressnetwork/shared",
        ("True", "Accepted"),
    )
    .await;

    apply(
        &env,
        &env.ns,
        &egress_network("own", "  networks:\n    - cidr: 203.0.113.0/24\n", "Allow"),
    );
    let own = next_matching(&mut stream, "the namespace's EgressNetwork", |p| {
        parent_of(p).1 == format!("{}/own", env.ns)
    })
    .await;
    assert_eq!(http1_route_names(&own), ["http-egress-allow"]);
    // Another namespace's clients still get the global one.
    let other = controller
        .outbound
        .get(by_addr("elsewhere", dst))
        .await
        .expect("Get")
        .into_inner();
    assert_eq!(parent_of(&other).1, format!("{}/shared", global.ns));

    // A route whose parent is the EgressNetwork, accepted by our writer.
    apply(
        &env,
        &env.ns,
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: api
spec:
  parentRefs:
    - group: policy.linkerd.io
      kind: EgressNetwork
      name: own
      port: 443
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /api
",
    );
    let routed = next_matching(&mut stream, "the attached route", |p| {
        http1_route_names(p).first().map(String::as_str) == Some("api")
    })
    .await;
    assert_eq!(http1_route_names(&routed), ["api", "http-egress-allow"]);

    // An EgressNetwork inside the cluster networks is not accepted.
    apply(
        &env,
        &env.ns,
        &egress_network("inside", "  networks:\n    - cidr: 10.0.0.0/8\n", "Allow"),
    );
    wait_accepted(
        &env,
        &env.ns,
        "egressnetwork/inside",
        ("False", "EgressReasonNetworkOverlap"),
    )
    .await;
}
