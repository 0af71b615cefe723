//! What the policy controller's end-to-end tests share: a controller
//! process started against the test's cluster, with clients of its inbound
//! and outbound APIs.

use linkerd2_proxy_api::{
    inbound::inbound_server_policies_client::InboundServerPoliciesClient,
    outbound::outbound_policies_client::OutboundPoliciesClient,
};
use test_support::{ServerProcess, TestEnv, free_addr};
use tonic::transport::Channel;

/// A running controller and its clients (the process dies with it).
pub struct Controller {
    pub process: ServerProcess,
    pub inbound: InboundServerPoliciesClient<Channel>,
    pub outbound: OutboundPoliciesClient<Channel>,
}

/// Starts a controller without its webhook, with `extra` flags.
pub async fn start_controller(env: &TestEnv, extra: &[String]) -> Controller {
    let mut args = vec!["--admission-controller-disabled".to_string()];
    args.extend_from_slice(extra);
    start_controller_with_webhook(env, &args).await
}

/// Starts a controller (its webhook too, unless `extra` disables it) whose
/// status-writer Lease lives in the test's namespace (so a controller
/// killed by another test holds no Lease we wait on), with `extra` flags.
pub async fn start_controller_with_webhook(env: &TestEnv, extra: &[String]) -> Controller {
    env.cluster().ensure_crds();
    let grpc = free_addr();
    let admin = free_addr();
    let mut args = env.policy_controller_args(grpc, admin);
    args.extend_from_slice(extra);
    let process = ServerProcess::start(
        env!("CARGO_BIN_EXE_policy-controller").as_ref(),
        &args,
        admin,
    )
    .await;
    let url = format!("http://{grpc}");
    Controller {
        process,
        inbound: InboundServerPoliciesClient::connect(url.clone())
            .await
            .expect("connect (inbound)"),
        outbound: OutboundPoliciesClient::connect(url)
            .await
            .expect("connect (outbound)"),
    }
}
