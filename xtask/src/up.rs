//! `cargo xtask up`: the whole control plane on the local real API server.
//!
//! Starts etcd, kube-apiserver and kube-controller-manager, installs the
//! CRDs, runs `destination`, `sp-validator` and `policy-controller` against
//! it (logs to this terminal), registers the admission webhooks, creates the
//! sample workloads of `deploy/samples/demo.yaml` with Ready pods, and waits
//! for Ctrl-C, which stops everything.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use anyhow::{Context, bail};
use clap::Args;
use k8s_openapi::api::core::v1::Pod;
use local_cluster::{
    Cluster, ClusterOptions, Lifetime, LocalCa, ManagedProcess,
    workload::{self, PodSpecBuilder},
};

use crate::paths::workspace_root;

#[derive(Args)]
pub struct UpArgs {
    /// Build and run the binaries with the release profile.
    #[arg(long)]
    pub release: bool,
    /// Do not create the sample workloads.
    #[arg(long)]
    pub no_samples: bool,
    /// Run Meridian as a real pod (deploy/, its images) on a local real
    /// node (containerd, kubelet, kube-proxy), with the samples as real
    /// Deployments: needs root and `.ci/install-node-deps`.
    #[arg(long)]
    pub real_node: bool,
}

/// The demo's pod name, as a pod's containers see it in `HOSTNAME`: the
/// destination's EndpointSlice writer and the policy controller's status
/// writer name their replica with it in their Leases.
const POD_NAME: &str = "linkerd-destination-local";

/// The demo cluster's domain (the API server's default), which is also the
/// trust domain the chart passes by default.
const CLUSTER_DOMAIN: &str = "cluster.local";

/// One of Meridian's containers, run as a local process.
struct Component {
    name: &'static str,
    admin: &'static str,
    args: Vec<String>,
}

pub fn run(args: UpArgs) -> anyhow::Result<()> {
    if args.real_node {
        return crate::e2e::up_real_node(if args.release { "release" } else { "dev" });
    }
    let kube_bins = crate::cluster::build()?;
    let profile_dir = build_binaries(args.release)?;
    let dir = workspace_root().join(".meridian/up");
    if dir.exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let started = Instant::now();
        let cluster =
            Cluster::start_with(ClusterOptions::new(&dir, Lifetime::Tied), kube_bins).await?;
        let client = cluster.client()?;
        local_cluster::node::ensure_node(&client, "node-1", Some("zone-a")).await?;
        let kubectl = Kubectl {
            path: cluster.binaries().kubectl(),
            kubeconfig: cluster.kubeconfig_path().to_path_buf(),
        };
        // Established and listed by discovery before anything is applied
        // (a ServiceProfile applied at once would otherwise fail with "no
        // matches for kind").
        local_cluster::kubectl::install_crds(
            &kubectl.path,
            &kubectl.kubeconfig,
            &workspace_root().join("deploy/crds"),
        )?;
        kubectl.run(&["create", "namespace", "linkerd"], None)?;

        let tls = dir.join("tls");
        std::fs::create_dir_all(&tls)?;
        let ca = LocalCa::new("meridian-webhook-ca")?;
        let cert = ca.issue_serving_cert(&[
            "linkerd-sp-validator.linkerd.svc",
            "linkerd-policy-validator.linkerd.svc",
        ])?;
        std::fs::write(tls.join("tls.crt"), &cert.cert_pem)?;
        std::fs::write(tls.join("tls.key"), &cert.key_pem)?;

        let kubeconfig = path_str(cluster.kubeconfig_path());
        let crt = path_str(&tls.join("tls.crt"));
        let key = path_str(&tls.join("tls.key"));
        let components = [
            Component {
                name: "policy-controller",
                admin: "127.0.0.1:9990",
                args: vec![
                    format!("--kubeconfig={kubeconfig}"),
                    "--admin-addr=127.0.0.1:9990".into(),
                    "--grpc-addr=127.0.0.1:8090".into(),
                    "--workload-ports-addr=127.0.0.1:8091".into(),
                    "--introspection-addr=127.0.0.1:9980".into(),
                    "--server-addr=127.0.0.1:9443".into(),
                    format!("--server-tls-certs={crt}"),
                    format!("--server-tls-key={key}"),
                ],
            },
            Component {
                name: "destination",
                admin: "127.0.0.1:9996",
                args: vec![
                    format!("--kubeconfig={kubeconfig}"),
                    "--addr=127.0.0.1:8086".into(),
                    "--admin-addr=127.0.0.1:9996".into(),
                    "--introspection-addr=127.0.0.1:9986".into(),
                    "--policy-addr=http://127.0.0.1:8091".into(),
                    format!("--identity-trust-domain={CLUSTER_DOMAIN}"),
                    format!("--cluster-domain={CLUSTER_DOMAIN}"),
                ],
            },
            Component {
                name: "sp-validator",
                admin: "127.0.0.1:9997",
                args: vec![
                    "--addr=127.0.0.1:8443".into(),
                    "--admin-addr=127.0.0.1:9997".into(),
                    format!("--tls-cert={crt}"),
                    format!("--tls-key={key}"),
                ],
            },
        ];
        let mut processes = Vec::new();
        for component in &components {
            let program = profile_dir.join(component.name);
            let process = ManagedProcess::spawn_inheriting_output_with_env(
                component.name,
                &program,
                &component.args,
                &[("HOSTNAME", POD_NAME)],
                Lifetime::Tied,
            )
            .with_context(|| format!("starting {}", program.display()))?;
            processes.push(process);
            // One at a time: the destination starts once the policy
            // controller it follows serves (else its first link attempt
            // fails and warns).
            wait_ready(component.name, component.admin).await?;
        }
        kubectl.run(
            &["apply", "-f", "-"],
            Some(&local_webhook_configs(ca.cert_pem())?),
        )?;
        if !args.no_samples {
            create_samples(&kubectl, &client).await?;
        }
        print_summary(&cluster, started.elapsed());
        tokio::signal::ctrl_c().await?;
        eprintln!("\nstopping…");
        for mut process in processes.into_iter().rev() {
            process.stop(Duration::from_secs(10));
        }
        drop(cluster);
        anyhow::Ok(())
    })
}

fn build_binaries(release: bool) -> anyhow::Result<PathBuf> {
    let mut cargo = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cargo
        .args(["build", "--bins"])
        .args([
            "-p",
            "destination",
            "-p",
            "sp-validator",
            "-p",
            "policy-controller",
        ])
        .current_dir(workspace_root());
    if release {
        cargo.arg("--release");
    }
    let status = cargo.status().context("running cargo build")?;
    if !status.success() {
        bail!("cargo build failed with {status}");
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"));
    Ok(target.join(if release { "release" } else { "debug" }))
}

struct Kubectl {
    path: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> anyhow::Result<String> {
        let (ok, out) = local_cluster::kubectl::run(&self.path, &self.kubeconfig, args, stdin)
            .context("running kubectl")?;
        if !ok {
            bail!("kubectl {} failed: {out}", args.join(" "));
        }
        Ok(out)
    }
}

async fn wait_ready(name: &str, admin: &str) -> anyhow::Result<()> {
    let admin: std::net::SocketAddr = admin.parse()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    while Instant::now() < deadline {
        match local_cluster::probe::http_get(admin, "/ready").await {
            Ok((200, _)) => return Ok(()),
            Ok((_, body)) => last = body,
            Err(e) => last = e.to_string(),
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("{name} was not ready after 60s: {last}")
}

/// The webhook configurations of `deploy/base/`, pointed at the local processes
/// (see `local_cluster::webhooks`).
fn local_webhook_configs(ca_pem: &str) -> anyhow::Result<String> {
    let mut docs = Vec::new();
    for (file, port) in [
        ("sp-validator-webhook.yaml", 8443),
        ("policy-validator-webhook.yaml", 9443),
    ] {
        let path = workspace_root().join("deploy/base").join(file);
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("reading {}", path.display()))?;
        let url = format!("https://127.0.0.1:{port}/");
        docs.extend(local_cluster::webhooks::localize(&text, &url, ca_pem)?);
    }
    Ok(serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs}).to_string())
}

async fn create_samples(kubectl: &Kubectl, client: &kube::Client) -> anyhow::Result<()> {
    kubectl.run(
        &[
            "apply",
            "-f",
            &path_str(&workspace_root().join("deploy/samples/demo.yaml")),
        ],
        None,
    )?;
    let pods: kube::Api<Pod> = kube::Api::namespaced(client.clone(), "demo");
    for i in 0..3 {
        let spec = PodSpecBuilder::new(&format!("web-{i}"), "node-1")
            .label("app", "web")
            .port(Some("http"), 8080)
            .service_account("web")
            .meshed("linkerd");
        workload::create_ready_pod(&pods, &spec).await?;
    }
    let db = PodSpecBuilder::new("db-0", "node-1")
        .label("app", "db")
        .port(Some("postgres"), 5432);
    workload::create_ready_pod(&pods, &db).await?;
    Ok(())
}

fn print_summary(cluster: &Cluster, elapsed: Duration) {
    println!(
        "\nMeridian is up on a local Kubernetes {} control plane ({:.1}s).\n\
         \n  export KUBECONFIG={}\n\
         \n  destination        gRPC 127.0.0.1:8086   admin http://127.0.0.1:9996/ready   introspection http://127.0.0.1:9986/streams\
         \n  policy-controller  gRPC 127.0.0.1:8090   admin http://127.0.0.1:9990/ready   introspection http://127.0.0.1:9980/streams  webhook https://127.0.0.1:9443\
         \n  sp-validator       webhook https://127.0.0.1:8443   admin http://127.0.0.1:9997/ready\n\
         \nSample workloads in namespace demo (web: 3 meshed pods, db: 1 unmeshed pod). Try:\
         \n  cargo run -q -p meridian-cli -- get web.demo.svc.cluster.local:80\
         \n  kubectl get endpointslices -n demo\n\
         \nCtrl-C stops everything.",
        cluster.kubernetes_version(),
        elapsed.as_secs_f64(),
        cluster.kubeconfig_path().display(),
    );
}

fn path_str(path: &Path) -> String {
    path.display().to_string()
}
