//! `meridian-cli`: a diagnostics client for the destination API.
//!
//! `meridian-cli get <authority>` opens a `Destination.Get` stream and prints
//! every Add / Remove / NoEndpoints as it arrives, followed by the current
//! endpoint set as a table. `meridian-cli profile <authority>` prints each
//! `GetProfile` update. `meridian-cli policy svc/<name> <port>` (or
//! `po/<pod> <port>`) prints what a proxy gets from the policy controller,
//! as `linkerd diagnostics policy` does. `meridian-cli explain <client-pod>
//! <target>` checks endpoints, discovery, policy and profiles for one client
//! and target and names the first broken one. `meridian-cli status` says
//! which implementation runs in the destination pods; `meridian-cli
//! preflight` lists what Meridian would treat differently from Linkerd.

use std::{collections::BTreeMap, net::SocketAddr, time::Duration};

mod compare;
mod explain;
mod forward;
mod preflight;
mod status;
#[cfg(test)]
mod test_messages;

use anyhow::Context;
use clap::{Parser, Subcommand};
use destination::proto::view::socket_addr;
use linkerd2_proxy_api::destination::{
    GetDestination, WeightedAddr, destination_client::DestinationClient, update,
};

#[derive(Parser)]
#[command(
    name = "meridian-cli",
    version,
    about = "Diagnostics client for Meridian's destination API"
)]
struct Cli {
    /// The destination gRPC address.
    #[arg(
        long,
        global = true,
        env = "MERIDIAN_DESTINATION_ADDR",
        default_value = "http://127.0.0.1:8086"
    )]
    addr: String,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Streams the endpoints of an authority (e.g. web.demo.svc.cluster.local:80).
    Get {
        authority: String,
        /// Context token, e.g. {"ns":"demo","nodeName":"node-1"}.
        #[arg(long, default_value = "")]
        token: String,
        /// Stop after this many seconds (default: run until Ctrl-C).
        #[arg(long)]
        seconds: Option<u64>,
    },
    /// Streams the profile of an authority (a service name or ip:port), printing each update.
    Profile {
        authority: String,
        /// Context token, e.g. {"ns":"demo"} (whose ServiceProfile wins).
        #[arg(long, default_value = "")]
        token: String,
        /// Stop after this many seconds (default: run until Ctrl-C).
        #[arg(long)]
        seconds: Option<u64>,
    },
    /// Checks, for one client pod and one target, the endpoints, the
    /// client's discovery stream, the policy between them and the
    /// ServiceProfile, and names the first that is broken (exit status 1;
    /// 0 when all pass).
    Explain(explain::ExplainArgs),
    /// Asks two control planes (e.g. Linkerd 2.20's and Meridian's shadow)
    /// the questions their proxies ask about the cluster's Services, pods,
    /// ExternalWorkloads and EgressNetworks, and shows every difference
    /// (exit status 0 when all are equal, 1 when one differs, 2 when it
    /// could not ask).
    Compare(Box<compare::CompareArgs>),
    /// Says, through the Kubernetes API, which images and versions run in
    /// each controller container of the destination Deployment's pods and
    /// whether a chart render reverted the swap (exit status 0 when every
    /// pod runs Meridian, 1 when one runs Linkerd's original or the swap
    /// was reverted, 2 when it could not ask).
    Status(status::StatusArgs),
    /// Before switching: lists every route, ServiceProfile and chart value
    /// of the cluster Meridian would treat differently from the running
    /// Linkerd, one line each (exit status 0 when nothing would change, 1
    /// when something would, 2 when it could not ask).
    Preflight(preflight::PreflightArgs),
    /// Prints the outbound policy of a Service port (svc/NAME) or the
    /// inbound policy of a pod port (po/POD), from the policy controller.
    Policy {
        /// `svc/<name>` or `po/<name>`.
        resource: String,
        port: u16,
        /// Namespace of the resource.
        #[arg(short = 'n', long, default_value = "default")]
        namespace: String,
        /// Source workload of outbound lookups (`<ns>:<pod>` or JSON).
        #[arg(long, default_value = "default:diagnostics")]
        token: String,
        /// The policy controller's gRPC address.
        #[arg(
            long,
            env = "MERIDIAN_POLICY_ADDR",
            default_value = "http://127.0.0.1:8090"
        )]
        policy_addr: String,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let command = match cli.command {
        Command::Explain(args) => {
            let code = explain::run(&cli.addr, args).await?;
            std::process::exit(code);
        }
        Command::Compare(args) => {
            let code = match compare::run(*args).await {
                Ok(code) => code,
                Err(error) => {
                    eprintln!("compare: {error:#}");
                    2
                }
            };
            std::process::exit(code);
        }
        Command::Status(args) => {
            let code = status::run(args).await.unwrap_or_else(|error| {
                eprintln!("status: {error:#}");
                2
            });
            std::process::exit(code);
        }
        Command::Preflight(args) => {
            let code = preflight::run(args).await.unwrap_or_else(|error| {
                eprintln!("preflight: {error:#}");
                2
            });
            std::process::exit(code);
        }
        other => other,
    };
    let (watch, seconds): (
        std::pin::Pin<Box<dyn Future<Output = anyhow::Result<()>>>>,
        _,
    ) = match command {
        Command::Get {
            authority,
            token,
            seconds,
        } => (Box::pin(get(&cli.addr, authority, token)), seconds),
        Command::Profile {
            authority,
            token,
            seconds,
        } => (Box::pin(profile(&cli.addr, authority, token)), seconds),
        Command::Policy {
            resource,
            port,
            namespace,
            token,
            policy_addr,
        } => {
            let lookup = policy(policy_addr, resource, port, namespace, token);
            (Box::pin(lookup), None)
        }
        Command::Explain(_) | Command::Compare(_) | Command::Status(_) | Command::Preflight(_) => {
            unreachable!("answered above")
        }
    };
    match seconds {
        // Running out of time is the normal end of a timed watch.
        Some(s) => tokio::time::timeout(Duration::from_secs(s), watch)
            .await
            .unwrap_or(Ok(())),
        None => watch.await,
    }
}

async fn profile(addr: &str, path: String, token: String) -> anyhow::Result<()> {
    let mut client = DestinationClient::connect(compare::url(addr))
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let request = GetDestination {
        scheme: "k8s".into(),
        path,
        context_token: token,
    };
    let api_error =
        |status: tonic::Status| anyhow::anyhow!("Destination API error: {}", status.message());
    let mut stream = client
        .get_profile(request)
        .await
        .map_err(api_error)?
        .into_inner();
    while let Some(profile) = stream.message().await.map_err(api_error)? {
        println!("{profile:#?}");
    }
    println!("stream ended");
    Ok(())
}

async fn get(addr: &str, path: String, token: String) -> anyhow::Result<()> {
    let mut client = DestinationClient::connect(compare::url(addr))
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let request = GetDestination {
        scheme: "k8s".into(),
        path: path.clone(),
        context_token: token,
    };
    let mut stream = client.get(request).await.map_err(api_error)?.into_inner();
    let mut current: BTreeMap<SocketAddr, WeightedAddr> = BTreeMap::new();
    while let Some(message) = stream.message().await.map_err(api_error)? {
        match message.update {
            Some(update::Update::Add(set)) => {
                for addr in set.addrs {
                    if let Some(sa) = addr.addr.as_ref().and_then(socket_addr) {
                        println!("ADD       {sa}");
                        current.insert(sa, addr);
                    }
                }
            }
            Some(update::Update::Remove(set)) => {
                for addr in set.addrs {
                    if let Some(sa) = socket_addr(&addr) {
                        println!("REMOVE    {sa}");
                        current.remove(&sa);
                    }
                }
            }
            Some(update::Update::NoEndpoints(none)) => {
                println!("NO_ENDPOINTS exists={}", none.exists);
                current.clear();
            }
            None => continue,
        }
        print_table(&path, &current);
    }
    println!("stream ended");
    Ok(())
}

/// One policy lookup: `svc/<name>` asks `OutboundPolicies.Get` for
/// `<name>.<ns>.svc:<port>`, `po/<name>` asks `GetPort` for `<ns>:<name>`.
async fn policy(
    addr: String,
    resource: String,
    port: u16,
    namespace: String,
    token: String,
) -> anyhow::Result<()> {
    use linkerd2_proxy_api::{inbound, outbound};
    let channel = tonic::transport::Endpoint::from_shared(compare::url(&addr))
        .with_context(|| format!("invalid address {addr}"))?
        .connect()
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    let policy_error = |status: tonic::Status| {
        anyhow::anyhow!(
            "policy API error: {:?}: {}",
            status.code(),
            status.message()
        )
    };
    match resource.split_once('/') {
        Some(("svc" | "service" | "services", name)) => {
            let mut client =
                outbound::outbound_policies_client::OutboundPoliciesClient::new(channel);
            let spec = outbound::TrafficSpec {
                source_workload: token,
                target: Some(outbound::traffic_spec::Target::Authority(format!(
                    "{name}.{namespace}.svc:{port}"
                ))),
            };
            let policy = client.get(spec).await.map_err(policy_error)?.into_inner();
            println!("{policy:#?}");
        }
        Some(("po" | "pod" | "pods", name)) => {
            let mut client =
                inbound::inbound_server_policies_client::InboundServerPoliciesClient::new(channel);
            let spec = inbound::PortSpec {
                workload: format!("{namespace}:{name}"),
                port: u32::from(port),
            };
            let server = client
                .get_port(spec)
                .await
                .map_err(policy_error)?
                .into_inner();
            println!("{server:#?}");
        }
        _ => anyhow::bail!("resource must be svc/<name> or po/<name>, not {resource:?}"),
    }
    Ok(())
}

/// A Kubernetes client from the kubeconfig's `context`, else the inferred
/// configuration (`$KUBECONFIG`, `~/.kube/config`, in-cluster).
async fn kube_client(context: Option<&str>) -> anyhow::Result<kube::Client> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match context {
        Some(_) => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    kube::Client::try_from(config).context("building the Kubernetes client")
}

/// The control plane's destination Deployment in `ns` (labelled as
/// Linkerd's chart labels it) and its `ns/name`.
async fn destination_deployment(
    kube: &kube::Client,
    ns: &str,
) -> anyhow::Result<(String, k8s_openapi::api::apps::v1::Deployment)> {
    use k8s_api::labels::{CONTROL_PLANE_COMPONENT, DESTINATION_COMPONENT};
    let selector = format!("{CONTROL_PLANE_COMPONENT}={DESTINATION_COMPONENT}");
    let deployment =
        kube::Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(kube.clone(), ns)
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .with_context(|| format!("listing the Deployments labelled {selector} in {ns}"))?
            .items
            .into_iter()
            .next()
            .with_context(|| format!("no Deployment labelled {selector} in {ns}"))?;
    let name = format!(
        "{ns}/{}",
        deployment.metadata.name.as_deref().unwrap_or_default()
    );
    Ok((name, deployment))
}

/// The error a stream failed with, and Meridian's precise reason if given.
fn api_error(status: tonic::Status) -> anyhow::Error {
    let reason = status
        .metadata()
        .get("meridian-reason")
        .and_then(|v| v.to_str().ok())
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    anyhow::anyhow!("Destination API error: {}{reason}", status.message())
}

fn print_table(path: &str, current: &BTreeMap<SocketAddr, WeightedAddr>) {
    println!("── {path}: {} endpoint(s)", current.len());
    if current.is_empty() {
        return;
    }
    println!(
        "   {:<22} {:<24} {:<7} {:<8} {:<10} IDENTITY",
        "ADDRESS", "POD", "WEIGHT", "PROTO", "ZONE"
    );
    for (sa, addr) in current {
        let label = |k: &str| addr.metric_labels.get(k).cloned().unwrap_or_default();
        let proto = addr
            .protocol_hint
            .as_ref()
            .and_then(|h| h.protocol.as_ref())
            .map(|p| match p {
                linkerd2_proxy_api::destination::protocol_hint::Protocol::H2(_) => "h2",
                linkerd2_proxy_api::destination::protocol_hint::Protocol::Opaque(_) => "opaque",
            })
            .unwrap_or("-");
        let identity = addr
            .tls_identity
            .as_ref()
            .and_then(|t| t.strategy.as_ref())
            .map(|s| match s {
                linkerd2_proxy_api::destination::tls_identity::Strategy::DnsLikeIdentity(d) => {
                    d.name.clone()
                }
                linkerd2_proxy_api::destination::tls_identity::Strategy::UriLikeIdentity(u) => {
                    u.uri.clone()
                }
            })
            .unwrap_or_else(|| "-".into());
        println!(
            "   {:<22} {:<24} {:<7} {:<8} {:<10} {}",
            sa.to_string(),
            label("pod"),
            addr.weight,
            proto,
            label("zone_locality"),
            identity
        );
    }
}
