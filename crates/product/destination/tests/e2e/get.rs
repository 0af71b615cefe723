//! `Destination.Get` end to end: the `destination` binary runs as a process
//! against the real local control plane (EndpointSlices made by
//! kube-controller-manager), and generated tonic clients read its streams
//! over real sockets.

use std::{
    collections::BTreeMap,
    net::{Ipv4Addr, SocketAddr},
    time::Duration,
};

use crate::common::{
    EndpointStream, TIMEOUT, at, authority, client, create_service, http_service, ready_pod,
    start_destination,
};
use k8s_openapi::{api::core::v1::Service, apimachinery::pkg::util::intstr::IntOrString};
use kube::api::DeleteParams;
use linkerd2_proxy_api::destination::GetDestination;
use test_support::{TestEnv, free_addr};
use tonic::Code;

#[tokio::test]
async fn endpoints_follow_scaling_readiness_and_deletion() {
    let env = TestEnv::new("dst-scale").await;
    let dst = start_destination(&env, free_addr()).await;
    http_service(&env, "web").await;
    let mut client = client(dst.addr).await;
    let token = format!(
        r#"{{"ns":"{}","nodeName":"node-1","pod":"client"}}"#,
        env.ns
    ) + "\n";
    let mut stream = EndpointStream::open(&mut client, &authority(&env, "web", 80), &token)
        .await
        .expect("open");
    // Fail fast: the Service exists but has no endpoints yet.
    stream.next().await;
    assert_eq!(stream.no_endpoints, Some(true));

    let a = ready_pod(&env, "web", "web-a").await;
    let b = ready_pod(&env, "web", "web-b").await;
    stream
        .wait_addrs("two endpoints on the named target port", &at(&[a, b], 8080))
        .await;
    assert_eq!(
        stream.labels.get("service").map(String::as_str),
        Some("web")
    );
    assert_eq!(stream.labels.get("namespace"), Some(&env.ns));
    let first = &stream.current[&SocketAddr::new(a.into(), 8080)];
    assert_eq!(first.weight, 10000);
    assert_eq!(
        first.metric_labels.get("pod").map(String::as_str),
        Some("web-a")
    );
    assert!(first.tls_identity.is_some(), "meshed pods get an identity");

    let c = ready_pod(&env, "web", "web-c").await;
    stream
        .wait_addrs("scaled up to three", &at(&[a, b, c], 8080))
        .await;

    env.set_pod_ready("web-b", b, false).await;
    stream
        .wait_addrs("not-ready pod removed", &at(&[a, c], 8080))
        .await;
    env.set_pod_ready("web-b", b, true).await;
    stream
        .wait_addrs("ready again", &at(&[a, b, c], 8080))
        .await;

    env.delete_pod_now("web-a").await;
    stream
        .wait_addrs("deleted pod removed", &at(&[b, c], 8080))
        .await;
    env.delete_pod_now("web-b").await;
    env.delete_pod_now("web-c").await;
    stream
        .wait_for(
            "NoEndpoints{exists:true} when the last endpoint goes",
            |s| s.no_endpoints == Some(true),
        )
        .await;
    drop(dst);
}

#[tokio::test]
async fn service_deletion_and_recreation_on_one_open_stream() {
    let env = TestEnv::new("dst-svc").await;
    let dst = start_destination(&env, free_addr()).await;
    let mut client = client(dst.addr).await;
    // A Service that does not exist is NotFound, as the original answers.
    let missing = EndpointStream::open(&mut client, &authority(&env, "api", 8080), "")
        .await
        .err()
        .expect("a missing service is refused");
    assert_eq!(missing.code(), tonic::Code::NotFound, "{missing:?}");

    let ip = ready_pod(&env, "api", "api-0").await;
    create_service(&env, "api", vec![(8080, IntOrString::Int(8080))], false).await;
    let mut stream = EndpointStream::open(&mut client, &authority(&env, "api", 8080), "")
        .await
        .expect("the created service opens");
    stream
        .wait_addrs("the created service's endpoint", &at(&[ip], 8080))
        .await;

    env.api::<Service>()
        .delete("api", &DeleteParams::default())
        .await
        .expect("delete service");
    stream
        .wait_for("NoEndpoints{exists:false} after deletion", |s| {
            s.no_endpoints == Some(false)
        })
        .await;

    create_service(&env, "api", vec![(8080, IntOrString::Int(8080))], false).await;
    stream
        .wait_addrs("endpoints again after re-creation", &at(&[ip], 8080))
        .await;
}

#[tokio::test]
async fn headless_instance_names_select_one_pod() {
    let env = TestEnv::new("dst-headless").await;
    let dst = start_destination(&env, free_addr()).await;
    create_service(&env, "db", vec![(5432, IntOrString::Int(5432))], true).await;
    let mut ips = Vec::new();
    for i in 0..2 {
        let spec = env
            .pod(&format!("db-{i}"))
            .label("app", "db")
            .port(Some("pg"), 5432)
            .hostname(&format!("db-{i}"), "db");
        ips.push(env.create_ready_pod(&spec).await.1);
    }
    let mut client = client(dst.addr).await;
    let path = format!("db-1.db.{}.svc.cluster.local:5432", env.ns);
    let mut stream = EndpointStream::open(&mut client, &path, "")
        .await
        .expect("open");
    stream
        .wait_addrs("only the named instance", &at(&ips[1..], 5432))
        .await;
    let mut all = EndpointStream::open(&mut client, &authority(&env, "db", 5432), "")
        .await
        .expect("open");
    all.wait_addrs("every instance", &at(&ips, 5432)).await;
}

#[tokio::test]
async fn subscribers_share_a_group_and_other_targets_are_isolated() {
    let env = TestEnv::new("dst-share").await;
    let dst = start_destination(&env, free_addr()).await;
    http_service(&env, "hot").await;
    http_service(&env, "cold").await;
    let cold_ip = ready_pod(&env, "cold", "cold-0").await;
    let hot_ip = ready_pod(&env, "hot", "hot-0").await;

    let mut client = client(dst.addr).await;
    let mut hot = Vec::new();
    for _ in 0..3 {
        let mut s = EndpointStream::open(&mut client, &authority(&env, "hot", 80), "")
            .await
            .expect("open");
        s.wait_addrs("hot endpoint", &at(&[hot_ip], 8080)).await;
        hot.push(s);
    }
    let mut cold = EndpointStream::open(&mut client, &authority(&env, "cold", 80), "")
        .await
        .expect("open");
    cold.wait_addrs("cold endpoint", &at(&[cold_ip], 8080))
        .await;

    // One group serves the three hot streams.
    let (_, metrics) = dst.process.admin_get("/metrics").await;
    let hot_series: Vec<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("endpoints_subscribers{") && l.contains("service=\"hot\""))
        .collect();
    assert_eq!(hot_series.len(), 1, "{metrics}");
    assert!(hot_series[0].ends_with(" 3"), "{hot_series:?}");

    let hot_ip2 = ready_pod(&env, "hot", "hot-1").await;
    for s in &mut hot {
        s.wait_addrs("hot scaled", &at(&[hot_ip, hot_ip2], 8080))
            .await;
    }
    // The cold stream saw nothing of that: its next message is its own change.
    let cold_ip2 = ready_pod(&env, "cold", "cold-1").await;
    let update = cold.next().await;
    assert_eq!(cold.messages, 2, "only cold's own updates: {update:?}");
    assert_eq!(cold.addrs(), at(&[cold_ip, cold_ip2], 8080));
}

#[tokio::test]
async fn a_client_that_stops_reading_ends_with_the_truth() {
    let env = TestEnv::new("dst-slow").await;
    let dst = start_destination(&env, free_addr()).await;
    http_service(&env, "busy").await;
    let mut pods = BTreeMap::new();
    pods.insert(
        "busy-0".to_string(),
        ready_pod(&env, "busy", "busy-0").await,
    );
    let mut client = client(dst.addr).await;
    let mut stream = EndpointStream::open(&mut client, &authority(&env, "busy", 80), "")
        .await
        .expect("open");
    stream
        .wait_addrs("first endpoint", &at(&[pods["busy-0"]], 8080))
        .await;

    // Stop reading while the service churns through many states.
    for i in 1..8 {
        let name = format!("busy-{i}");
        let ip = ready_pod(&env, "busy", &name).await;
        pods.insert(name, ip);
    }
    for name in ["busy-0", "busy-2", "busy-4"] {
        env.delete_pod_now(name).await;
        pods.remove(name);
    }
    env.set_pod_ready("busy-5", pods["busy-5"], false).await;
    pods.remove("busy-5");
    tokio::time::sleep(Duration::from_secs(3)).await;

    let truth: Vec<Ipv4Addr> = pods.values().copied().collect();
    stream
        .wait_addrs(
            "exactly the Kubernetes truth after resuming",
            &at(&truth, 8080),
        )
        .await;
}

#[tokio::test]
async fn a_restarted_destination_serves_a_correct_snapshot() {
    let env = TestEnv::new("dst-restart").await;
    let addr = free_addr();
    let dst = start_destination(&env, addr).await;
    http_service(&env, "web").await;
    let a = ready_pod(&env, "web", "web-0").await;
    let mut c = client(addr).await;
    let mut stream = EndpointStream::open(&mut c, &authority(&env, "web", 80), "")
        .await
        .expect("open");
    stream.wait_addrs("endpoint", &at(&[a], 8080)).await;

    drop(dst);
    let ended = tokio::time::timeout(TIMEOUT, stream.stream.message()).await;
    assert!(
        !matches!(ended, Ok(Ok(Some(_)))),
        "the stream ends with the process"
    );
    // Changes while no destination runs.
    let b = ready_pod(&env, "web", "web-1").await;
    env.delete_pod_now("web-0").await;

    let _dst = start_destination(&env, addr).await;
    let mut c = client(addr).await;
    let mut stream = EndpointStream::open(&mut c, &authority(&env, "web", 80), "")
        .await
        .expect("open");
    stream
        .wait_addrs("a fresh, correct snapshot", &at(&[b], 8080))
        .await;
}

#[tokio::test]
async fn bad_input_is_invalid_argument_and_the_server_keeps_serving() {
    let env = TestEnv::new("dst-bad").await;
    let dst = start_destination(&env, free_addr()).await;
    let mut client = client(dst.addr).await;
    let cases = [
        ("foo", "foo"),
        ("10.1.2.3:80", "IP queries not supported"),
        ("web.ns.svc.cluster.local:99999", "99999"),
        ("web.ns.svc.cluster.local:http", "http"),
        ("web.ns.svc.other.domain:80", "cluster domain"),
        ("a.b.c.web.ns.svc.cluster.local:80", "web"),
        ("web.ns.svc.cluster.local.:80", "web.ns.svc.cluster.local."),
    ];
    for (path, needle) in cases {
        let status = EndpointStream::open(&mut client, path, "")
            .await
            .err()
            .unwrap_or_else(|| panic!("{path} should be refused"));
        assert_eq!(status.code(), Code::InvalidArgument, "{path}: {status:?}");
        // The message is the original's; the reason is in a trailer.
        if needle.starts_with("IP queries") {
            assert!(status.message().starts_with(needle), "{path}: {status:?}");
        } else {
            assert_eq!(status.message(), format!("Invalid authority: {path}"));
        }
        let reason = status
            .metadata()
            .get("meridian-reason")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(
            reason.contains(needle),
            "{path}: reason {reason:?} should mention {needle:?}"
        );
    }
    // A garbage context token is not an error.
    http_service(&env, "ok").await;
    let ip = ready_pod(&env, "ok", "ok-0").await;
    let mut stream = EndpointStream::open(&mut client, &authority(&env, "ok", 80), "{not json")
        .await
        .expect("a bad token is ignored");
    stream.wait_addrs("still serving", &at(&[ip], 8080)).await;
}

#[tokio::test]
async fn sigterm_ends_open_streams_with_ok() {
    let env = TestEnv::new("dst-sigterm").await;
    let mut dst = start_destination(&env, free_addr()).await;
    http_service(&env, "web").await;
    let a = ready_pod(&env, "web", "web-0").await;
    let mut c = client(dst.addr).await;
    let mut stream = EndpointStream::open(&mut c, &authority(&env, "web", 80), "")
        .await
        .expect("open");
    stream.wait_addrs("endpoint", &at(&[a], 8080)).await;

    // A GetProfile stream on the same connection, as a proxy holds.
    let mut profile = c
        .get_profile(GetDestination {
            scheme: "k8s".into(),
            path: authority(&env, "web", 80),
            context_token: String::new(),
        })
        .await
        .expect("open GetProfile")
        .into_inner();
    tokio::time::timeout(TIMEOUT, profile.message())
        .await
        .expect("a profile")
        .expect("profile stream healthy")
        .expect("a first profile");

    let exited = tokio::task::spawn_blocking(move || dst.process.terminate(TIMEOUT))
        .await
        .expect("terminating");
    assert!(exited, "the destination exits cleanly on SIGTERM");
    // Updates already on their way (a re-announced endpoint) may come
    // first; then each stream must end, with OK.
    let ended = end_of(&mut stream.stream).await;
    assert!(
        matches!(ended, Ok(None)),
        "an open stream ends with grpc-status OK on SIGTERM, as the original's: {ended:?}"
    );
    let ended = end_of(&mut profile).await;
    assert!(
        matches!(ended, Ok(None)),
        "an open GetProfile stream ends with OK on SIGTERM: {ended:?}"
    );
}

/// How `stream` ends (`Ok(None)`: grpc-status OK), reading past the
/// messages still on their way; within [`TIMEOUT`].
async fn end_of<T>(stream: &mut tonic::Streaming<T>) -> Result<Option<T>, tonic::Status> {
    tokio::time::timeout(TIMEOUT, async {
        loop {
            match stream.message().await {
                Ok(Some(_)) => continue,
                end => break end,
            }
        }
    })
    .await
    .expect("the stream ends")
}
