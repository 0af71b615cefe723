//! State a client can grow is bounded, on the `policy-controller` process:
//! outbound `Watch` streams for Services that do not exist leave no watch
//! behind once they end (read from `policy_outbound_index_watches`), and
//! streams past `--grpc-max-open-streams`, over any number of connections,
//! are refused with `RESOURCE_EXHAUSTED` and counted.

use std::time::Duration;

use linkerd2_proxy_api::outbound::{
    TrafficSpec, outbound_policies_client::OutboundPoliciesClient, traffic_spec,
};
use test_support::{ServerProcess, TestEnv, eventually, free_addr};

const PROGRAM: &str = env!("CARGO_BIN_EXE_policy-controller");
const TIMEOUT: Duration = Duration::from_secs(30);

fn absent(env: &TestEnv, i: usize) -> TrafficSpec {
    TrafficSpec {
        source_workload: format!(r#"{{"ns":"{}","pod":"client"}}"#, env.ns),
        target: Some(traffic_spec::Target::Authority(format!(
            "absent-{i}.{}.svc.cluster.local:80",
            env.ns
        ))),
    }
}

/// The value of an unlabelled gauge in a scrape.
fn gauge(scrape: &str, name: &str) -> Option<u64> {
    scrape
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

async fn metric(process: &ServerProcess, name: &str) -> u64 {
    let (code, body) = process.admin_get("/metrics").await;
    assert_eq!(code, 200);
    gauge(&body, name).unwrap_or_else(|| panic!("{name} in\n{body}"))
}

async fn watches(process: &ServerProcess) -> u64 {
    metric(process, "policy_outbound_index_watches").await
}

async fn start(env: &TestEnv, extra: &[&str]) -> (ServerProcess, std::net::SocketAddr) {
    env.cluster().ensure_crds();
    let (grpc, admin) = (free_addr(), free_addr());
    let mut args = env.policy_controller_args(grpc, admin);
    args.push("--admission-controller-disabled".to_string());
    args.extend(extra.iter().map(|s| s.to_string()));
    (
        ServerProcess::start(PROGRAM.as_ref(), &args, admin).await,
        grpc,
    )
}

#[tokio::test]
async fn watches_of_absent_services_go_when_their_streams_end() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("bounds-outbound").await;
    let (process, grpc) = start(&env, &[]).await;
    let mut client = OutboundPoliciesClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect");
    let baseline = watches(&process).await;

    const N: usize = 300;
    let mut streams = Vec::with_capacity(N);
    for i in 0..N {
        let mut stream = client
            .watch(absent(&env, i))
            .await
            .expect("Watch accepted")
            .into_inner();
        let first = tokio::time::timeout(TIMEOUT, stream.message())
            .await
            .expect("in time")
            .expect("healthy");
        assert!(first.is_some(), "a default policy for an absent Service");
        streams.push(stream);
    }
    assert_eq!(watches(&process).await, baseline + N as u64);
    drop(streams);
    eventually(
        "the absent Services' watches to go",
        Duration::from_secs(10),
        || async {
            let now = watches(&process).await;
            (now == baseline)
                .then_some(())
                .ok_or(format!("{now} watches"))
        },
    )
    .await;
}

#[tokio::test]
async fn streams_past_the_process_cap_are_refused_over_any_connection() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("bounds-cap").await;
    let (process, grpc) = start(&env, &["--grpc-max-open-streams=3"]).await;
    // One connection per stream: the per-connection limit is not what
    // refuses them.
    let mut clients = Vec::new();
    for _ in 0..5 {
        clients.push(
            OutboundPoliciesClient::connect(format!("http://{grpc}"))
                .await
                .expect("connect"),
        );
    }
    let mut open = Vec::new();
    for client in &mut clients[..3] {
        let mut stream = client
            .watch(absent(&env, 0))
            .await
            .expect("under the cap")
            .into_inner();
        let first = tokio::time::timeout(TIMEOUT, stream.message()).await;
        assert!(matches!(first, Ok(Ok(Some(_)))), "{first:?}");
        open.push(stream);
    }
    let refused = clients[3]
        .watch(absent(&env, 0))
        .await
        .expect_err("past the cap");
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(
        refused.message().contains("--grpc-max-open-streams"),
        "{refused:?}"
    );
    assert_eq!(metric(&process, "policy_grpc_open_streams").await, 3);
    assert_eq!(
        metric(&process, "policy_grpc_open_streams_refused_total").await,
        1
    );
    // Unary calls are not streams.
    clients[4]
        .get(absent(&env, 1))
        .await
        .expect("a Get is answered at the cap");
    // The streams already open keep being served, and a slot given back
    // is taken by the next stream.
    drop(open.pop());
    eventually("a slot to be given back", TIMEOUT, || async {
        let now = metric(&process, "policy_grpc_open_streams").await;
        (now == 2).then_some(()).ok_or(format!("{now} open"))
    })
    .await;
    let mut stream = clients[4]
        .watch(absent(&env, 2))
        .await
        .expect("a slot is free again")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, stream.message()).await;
    assert!(matches!(first, Ok(Ok(Some(_)))), "{first:?}");
}
