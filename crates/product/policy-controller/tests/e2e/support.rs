//! What the policy controller's end-to-end tests share: a controller
//! process started against the test's cluster, with clients of its inbound
//! and outbound APIs, and the turns its route-status writer takes.
//!
//! Every controller of this binary leads the status Lease of its own
//! namespace, so each writes the status of every route in the cluster. The
//! writers agree, but a test that counts what its own writer did (the
//! first to see a change patches it, the others find nothing to do) runs
//! alone: [`alone`] waits until no other controller runs and keeps new
//! ones from starting; every other controller holds a [`turn`] while it runs.

use linkerd2_proxy_api::{
    inbound::inbound_server_policies_client::InboundServerPoliciesClient,
    outbound::outbound_policies_client::OutboundPoliciesClient,
};
use test_support::{ServerProcess, TestEnv, free_addr};
use tokio::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use tonic::transport::Channel;

static WRITERS: RwLock<()> = RwLock::const_new(());

/// A turn among the controllers that share the cluster (see the module doc).
pub type Turn = RwLockReadGuard<'static, ()>;

/// Held by a test whose controller must be the only one running.
pub type Alone = RwLockWriteGuard<'static, ()>;

/// Waits for a turn: hold it while a controller of the test runs.
pub async fn turn() -> Turn {
    WRITERS.read().await
}

/// Waits until no other test's controller runs, and keeps them from
/// starting until dropped.
pub async fn alone() -> Alone {
    WRITERS.write().await
}

/// A running controller and its clients (the process dies with it).
pub struct Controller {
    /// This controller's [`turn`], unless its test runs [`alone`].
    _turn: Option<Turn>,
    pub process: ServerProcess,
    pub inbound: InboundServerPoliciesClient<Channel>,
    pub outbound: OutboundPoliciesClient<Channel>,
}

/// Starts a controller without its webhook, with `extra` flags.
pub async fn start_controller(env: &TestEnv, extra: &[String]) -> Controller {
    let turn = turn().await;
    start(env, &without_webhook(extra), Some(turn)).await
}

/// [`start_controller`] for a test that holds [`alone`].
pub async fn start_controller_alone(env: &TestEnv, _alone: &Alone) -> Controller {
    start(env, &without_webhook(&[]), None).await
}

fn without_webhook(extra: &[String]) -> Vec<String> {
    let mut args = vec!["--admission-controller-disabled".to_string()];
    args.extend_from_slice(extra);
    args
}

/// Starts a controller (its webhook too, unless `extra` disables it) whose
/// status-writer Lease lives in the test's namespace (so a controller
/// killed by another test holds no Lease we wait on), with `extra` flags.
pub async fn start_controller_with_webhook(env: &TestEnv, extra: &[String]) -> Controller {
    let turn = turn().await;
    start(env, extra, Some(turn)).await
}

async fn start(env: &TestEnv, extra: &[String], turn: Option<Turn>) -> Controller {
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
        _turn: turn,
        process,
        inbound: InboundServerPoliciesClient::connect(url.clone())
            .await
            .expect("connect (inbound)"),
        outbound: OutboundPoliciesClient::connect(url)
            .await
            .expect("connect (outbound)"),
    }
}
