//! The destination's workload-ports feed (`meridian.policy.v1.WorkloadPorts`)
//! end to end: the `policy-controller` binary runs as a process against the
//! real local control plane and serves the feed on its own listener, not on
//! the public gRPC port.

use std::time::Duration;

use meridian_api::policy::v1::{WatchRequest, workload_ports_client::WorkloadPortsClient};
use test_support::{ServerProcess, TestEnv, free_addr};
use tonic::Code;

const TIMEOUT: Duration = Duration::from_secs(30);

/// The destination's workload-ports feed is served on its own (localhost)
/// listener only: the public gRPC port, which every proxy reaches, answers
/// UNIMPLEMENTED for it.
#[tokio::test]
async fn workload_ports_are_served_apart_from_the_public_port() {
    // Its controller writes route statuses too (see `support`).
    let _turn = crate::support::turn().await;
    let env = TestEnv::new("policy-feed").await;
    env.cluster().ensure_crds();
    let grpc = free_addr();
    let admin = free_addr();
    let mut args = env.policy_controller_args(grpc, admin);
    args.push("--admission-controller-disabled".into());
    let process = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;

    let mut public = WorkloadPortsClient::connect(format!("http://{grpc}"))
        .await
        .expect("connect to the public port");
    let status = public
        .watch(WatchRequest {})
        .await
        .expect_err("no feed on the public port");
    assert_eq!(status.code(), Code::Unimplemented, "{status:?}");

    let feed = process.workload_ports_addr.expect("the feed's address");
    let mut stream = WorkloadPortsClient::connect(format!("http://{feed}"))
        .await
        .expect("connect to the feed")
        .watch(WatchRequest {})
        .await
        .expect("the feed is served")
        .into_inner();
    let first = tokio::time::timeout(TIMEOUT, stream.message())
        .await
        .expect("a snapshot within the timeout")
        .expect("a message")
        .expect("the stream is open");
    assert!(first.reset, "the first message is a snapshot");
}
