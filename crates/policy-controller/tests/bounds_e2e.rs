//! State a client can grow is bounded, on the `policy-controller` process:
//! outbound `Watch` streams for Services that do not exist leave no watch
//! behind once they end (read from `policy_outbound_index_watches`).

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

async fn watches(process: &ServerProcess) -> u64 {
    let (code, body) = process.admin_get("/metrics").await;
    assert_eq!(code, 200);
    gauge(&body, "policy_outbound_index_watches").expect("the watches gauge")
}

#[tokio::test]
async fn watches_of_absent_services_go_when_their_streams_end() {
    let env = TestEnv::new("bounds-outbound").await;
    env.cluster().ensure_crds();
    let (grpc, admin) = (free_addr(), free_addr());
    let mut args = env.policy_controller_args(grpc, admin);
    args.push("--admission-controller-disabled".to_string());
    let process = ServerProcess::start(PROGRAM.as_ref(), &args, admin).await;
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
