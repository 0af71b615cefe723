//! Overload on the `policy-controller` process: its gRPC server
//! shares the destination's transport limits (`grpc_stream::server`), so
//! a `WatchPort` past `--grpc-max-concurrent-streams` is refused while the
//! connection's other streams and other clients are served; and an API
//! server unreachable at start is named in `/ready`, nothing is answered
//! from the unsynced index (`Unavailable`, not `NotFound`), and the process
//! becomes ready by itself once the API server appears.

use std::{collections::BTreeSet, time::Duration};

use linkerd2_proxy_api::inbound::{
    PortSpec, inbound_server_policies_client::InboundServerPoliciesClient,
};
use prost::Message;
use test_support::{
    ServerProcess, TestEnv, free_addr,
    raw_h2::{self, Event, RawH2},
};

const PROGRAM: &str = env!("CARGO_BIN_EXE_policy-controller");
const WATCH_PORT: &str = "/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort";
const TIMEOUT: Duration = Duration::from_secs(30);

fn spec(env: &TestEnv, pod: &str) -> PortSpec {
    PortSpec {
        workload: format!(r#"{{"ns":"{}","pod":"{pod}"}}"#, env.ns),
        port: 8080,
    }
}

#[tokio::test]
async fn watch_ports_past_the_limit_are_refused_and_others_served() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("overload-policy").await;
    env.cluster().ensure_crds();
    let pod = env
        .pod("web")
        .meshed("linkerd")
        .label("app", "web")
        .port(Some("http"), 8080);
    env.create_ready_pod(&pod).await;
    let (grpc, admin) = (free_addr(), free_addr());
    let mut args = env.policy_controller_args(grpc, admin);
    args.push("--admission-controller-disabled".to_string());
    args.push("--grpc-max-concurrent-streams=4".to_string());
    let _policy = ServerProcess::start(PROGRAM.as_ref(), &args, admin).await;

    let (mut abuser, mut events) = RawH2::connect(grpc).await.expect("connect");
    let body = raw_h2::grpc_message(&spec(&env, "web").encode_to_vec());
    let mut opened = Vec::new();
    for _ in 0..6 {
        opened.push(
            abuser
                .open_grpc(&grpc.to_string(), WATCH_PORT, &body)
                .await
                .expect("write"),
        );
    }
    let (mut answered, mut refused) = (BTreeSet::new(), BTreeSet::new());
    let mut settings = Vec::new();
    while answered.len() + refused.len() < opened.len() {
        let event = tokio::time::timeout(TIMEOUT, events.recv())
            .await
            .expect("the server answered in time")
            .expect("reader alive");
        match event {
            Event::Settings(s) => settings.extend(s),
            Event::Headers { stream, end_stream } => {
                assert!(!end_stream, "stream {stream} ended instead of watching");
                answered.insert(stream);
            }
            Event::Reset { stream, code } if code == raw_h2::REFUSED_STREAM => {
                refused.insert(stream);
            }
            Event::Reset { code, .. } => assert_eq!(code, raw_h2::STREAM_CLOSED),
            Event::Data { .. } => {}
            other => panic!("the connection should stay up: {other:?}"),
        }
    }
    assert_eq!(
        raw_h2::setting(&settings, raw_h2::SETTINGS_MAX_CONCURRENT_STREAMS),
        Some(4)
    );
    assert_eq!(answered, opened[..4].iter().copied().collect());
    assert_eq!(refused, opened[4..].iter().copied().collect());

    // Another client is served meanwhile.
    let mut client = InboundServerPoliciesClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect");
    let mut stream = client
        .watch_port(spec(&env, "web"))
        .await
        .expect("WatchPort accepted")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("in time")
        .expect("healthy");
    assert!(first.is_some(), "a first policy");
}

#[tokio::test]
async fn an_unreachable_api_server_is_named_in_ready_until_it_answers() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("overload-policy-unreachable").await;
    let cluster = env.cluster();
    cluster.ensure_crds();
    let (kubeconfig, closed) = cluster.unreachable_kubeconfig(&env.ns);
    let (grpc, admin) = (free_addr(), free_addr());
    let args = vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--grpc-addr={grpc}"),
        format!("--admin-addr={admin}"),
        format!("--control-plane-namespace={}", env.ns),
        "--admission-controller-disabled".to_string(),
    ];
    let mut policy = ServerProcess::spawn(PROGRAM.as_ref(), &args, admin);
    let body = test_support::process::wait_api_server_unreachable(admin, TIMEOUT).await;
    assert!(
        body.starts_with("not ready: pods cache, externalworkloads cache, servers cache"),
        "{body}"
    );
    assert!(policy.is_running());

    // Nothing is answered from the unsynced index: Unavailable, which
    // proxies retry, never NotFound.
    let mut client = InboundServerPoliciesClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect");
    let status = client
        .get_port(spec(&env, "web"))
        .await
        .expect_err("not synced");
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");

    let forwarder = test_support::process::forward(closed, cluster.apiserver_addr()).await;
    policy.wait_ready().await;
    let (status, body) = policy.admin_get("/ready").await;
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("API server unreachable"), "{body}");
    drop(policy);
    forwarder.abort();
}
