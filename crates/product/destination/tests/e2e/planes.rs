//! Meridian "deployments" on the local control plane: a policy controller
//! and a destination following it, started with the exact container
//! arguments of `deploy/` (the chart's) or of `deploy/shadow`, loopback
//! addresses in place of the pod's ports.

use std::{net::SocketAddr, path::PathBuf, time::Duration};

use test_support::{
    ServerProcess, TestEnv, deploy::destination_pod_command, eventually, free_addr,
};

/// Whose container arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Manifest {
    /// `deploy/base/pod` (the serving pod).
    Deploy,
    /// `deploy/shadow`.
    Shadow,
}

/// How to start one.
pub struct PlaneSpec {
    pub manifest: Manifest,
    /// Whose credentials (the admin's, or a ServiceAccount's).
    pub kubeconfig: PathBuf,
    /// Flags given after the manifest's (they win; the policy controller's
    /// same-named manifest flags are dropped, as clap refuses repeats).
    pub destination_flags: Vec<String>,
    pub policy_flags: Vec<String>,
    /// `HOSTNAME`, as a pod's containers have it (unset otherwise).
    pub hostname: Option<String>,
}

impl PlaneSpec {
    pub fn new(manifest: Manifest, kubeconfig: PathBuf) -> Self {
        Self {
            manifest,
            kubeconfig,
            destination_flags: Vec::new(),
            policy_flags: Vec::new(),
            hostname: None,
        }
    }
}

/// A running pair.
pub struct Plane {
    /// Kept running (killed when the plane drops).
    pub _destination: ServerProcess,
    pub policy: ServerProcess,
    pub destination_addr: SocketAddr,
    pub policy_addr: SocketAddr,
}

impl Plane {
    /// `meridian-cli compare`'s form of this side: `DESTINATION,POLICY`.
    pub fn side(&self) -> String {
        format!("{},{}", self.destination_addr, self.policy_addr)
    }
}

/// The flags of the policy container the test replaces with its own.
const POLICY_REPLACED: [&str; 5] = [
    "--admin-addr",
    "--grpc-addr",
    "--server-addr",
    "--server-tls-key",
    "--server-tls-certs",
];

fn flag_name(arg: &str) -> &str {
    arg.split_once('=').map_or(arg, |(name, _)| name)
}

async fn start(
    program: PathBuf,
    args: Vec<String>,
    admin: SocketAddr,
    hostname: Option<&str>,
) -> ServerProcess {
    match hostname {
        Some(h) => ServerProcess::start_with_env(&program, &args, admin, &[("HOSTNAME", h)]).await,
        None => ServerProcess::start(&program, &args, admin).await,
    }
}

/// Starts the policy controller, then the destination following it, and
/// waits until the destination's link to it is up.
pub async fn start_plane(env: &TestEnv, spec: PlaneSpec) -> Plane {
    let cluster = env.cluster();
    cluster.ensure_crds();
    let command = |container: &str| match spec.manifest {
        Manifest::Deploy => destination_pod_command(container),
        Manifest::Shadow => cluster.shadow_pod_command(container),
    };

    let policy_line = command("policy");
    let (policy_addr, policy_admin) = (free_addr(), free_addr());
    let overridden: Vec<&str> = spec.policy_flags.iter().map(|f| flag_name(f)).collect();
    let mut args: Vec<String> = policy_line[1..]
        .iter()
        .filter(|a| !POLICY_REPLACED.contains(&flag_name(a)) && !overridden.contains(&flag_name(a)))
        .cloned()
        .collect();
    if !args.iter().any(|a| a == "--admission-controller-disabled") {
        // No certificate here; the webhook is tested elsewhere.
        args.push("--admission-controller-disabled".into());
    }
    args.extend([
        format!("--admin-addr={policy_admin}"),
        format!("--grpc-addr={policy_addr}"),
        format!("--kubeconfig={}", spec.kubeconfig.display()),
    ]);
    args.extend(spec.policy_flags.iter().cloned());
    let policy_bin =
        PathBuf::from(env!("CARGO_BIN_EXE_destination")).with_file_name("policy-controller");
    let policy = start(policy_bin, args, policy_admin, spec.hostname.as_deref()).await;

    // The destination reads Go-style flags: the last occurrence wins.
    let mut line = command("destination");
    let (destination_addr, admin) = (free_addr(), free_addr());
    line.extend([
        format!("-addr={destination_addr}"),
        format!("-metrics-addr={admin}"),
        format!("-kubeconfig={}", spec.kubeconfig.display()),
        format!(
            "--policy-addr=http://{}",
            policy
                .workload_ports_addr
                .expect("the policy controller's workload-ports feed")
        ),
    ]);
    line.extend(spec.destination_flags.iter().cloned());
    let destination = start(
        env!("CARGO_BIN_EXE_destination").into(),
        line,
        admin,
        spec.hostname.as_deref(),
    )
    .await;
    eventually(
        "the destination's policy link",
        Duration::from_secs(30),
        || async {
            let (_, metrics) = destination.admin_get("/metrics").await;
            if metrics.lines().any(|l| l == "policy_link_connected 1") {
                Ok(())
            } else {
                Err("policy_link_connected is not 1".to_string())
            }
        },
    )
    .await;
    Plane {
        _destination: destination,
        policy,
        destination_addr,
        policy_addr,
    }
}
