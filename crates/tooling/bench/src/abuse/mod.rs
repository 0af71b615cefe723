//! `meridian-bench abuse`: what lookups a client chooses freely cost the
//! API server and the servers' memory and metrics. Against the
//! `destination` and `policy-controller` processes on the real local
//! control plane (one 500-endpoint Service and a small one, 504 meshed
//! pods), each probe prints one line of figures and never asserts:
//!
//! - outbound policy `Get` for pod IPs, and for private IPs that are no
//!   pod's and no Service's;
//! - destination `GetProfile` and `Get` for private IPs outside the cluster;
//! - outbound policy `Watch` for absent Service names, each closed after its
//!   first answer;
//! - `Get` streams on the 500-endpoint Service, each with its own unknown
//!   node name, then one endpoint change ([`nodes`]), beside the same with
//!   one node name;
//! - `Get` opens on 10,000 streams beside loops calling the destination's
//!   `/audit`, and without them ([`audit`]);
//! - slow 3 MiB AdmissionReview bodies to the sp-validator's webhook beside
//!   real reviews ([`webhook`]).
//!
//! Each line: the API server's requests by verb and resource during the
//! probe (read from its own `apiserver_request_total`; leases and events
//! left out), the answers by gRPC code with p50/p99/max latency, and each
//! binary's anonymous RSS before, during and 10 s after, with its
//! `/metrics` line count.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::PathBuf,
    time::Duration,
};

use linkerd2_proxy_api::{
    destination::{GetDestination, destination_client::DestinationClient},
    net::TcpAddress,
    outbound::{TrafficSpec, outbound_policies_client::OutboundPoliciesClient, traffic_spec},
};
use tonic::transport::Channel;

use anyhow::Context;
use local_cluster::{Lifetime, LocalCa, ManagedProcess};

use crate::{
    common::{free_addr, wait_ready},
    destination::{NS, Plan, populate},
    overload::bad_peers::tls_connector,
};

mod audit;
mod measure;
mod nodes;
mod webhook;

use measure::{Reading, Target, api_count, api_delta, calls, code_of, read, servers_line};

#[derive(clap::Args)]
pub struct Args {
    /// Lookups of each lookup probe.
    #[arg(long, default_value_t = 10_000)]
    lookups: usize,
    /// Lookups in flight at once.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// `Get` streams of the node-name probe, each with its own node name.
    #[arg(long, default_value_t = 2_000)]
    node_streams: usize,
    /// The `destination` binary.
    #[arg(long)]
    destination_bin: PathBuf,
    /// The `policy-controller` binary.
    #[arg(long)]
    policy_bin: PathBuf,
    /// The `sp-validator` binary.
    #[arg(long)]
    sp_validator_bin: PathBuf,
    /// `Get` streams opened beside the `/audit` loops.
    #[arg(long, default_value_t = 10_000)]
    audit_streams: usize,
    /// Concurrent `/audit` loops.
    #[arg(long, default_value_t = 8)]
    audit_loops: usize,
    /// Slow webhook bodies held beside the real reviews.
    #[arg(long, default_value_t = 200)]
    slow_bodies: usize,
}

/// How long after a probe the "after" reading is taken.
pub const SETTLE: Duration = Duration::from_secs(10);

pub async fn run(args: Args) -> anyhow::Result<()> {
    println!(
        "abuse bench: {} lookups per probe, {} at a time; {} Get streams with distinct node names",
        args.lookups, args.concurrency, args.node_streams
    );
    let work_dir =
        std::env::temp_dir().join(format!("meridian-bench-abuse-{}", std::process::id()));
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let plan = Plan {
        sizes: vec![500, 4],
    };
    populate(&client, &plan).await?;
    let introspection = free_addr()?;
    let destination = crate::common::start_server_at(
        &cluster,
        &args.destination_bin,
        "addr",
        &[format!("--introspection-addr={introspection}")],
    )
    .await?;
    let policy = crate::common::start_server_at(
        &cluster,
        &args.policy_bin,
        "grpc-addr",
        &["--admission-controller-disabled".to_string()],
    )
    .await?;
    let servers = [
        Target {
            name: "destination",
            pid: destination.pid,
            admin: destination.admin,
        },
        Target {
            name: "policy-controller",
            pid: policy.pid,
            admin: policy.admin,
        },
    ];
    let dst = channel(destination.grpc).await?;
    let pol = channel(policy.grpc).await?;
    let n = args.lookups;

    let probe = Probe {
        client: &client,
        servers: &servers,
    };
    probe
        .run("outbound Get, pod IPs", || {
            calls(n, args.concurrency, |i| {
                let mut pol = OutboundPoliciesClient::new(pol.clone());
                // The 504 pods' IPs, each at many ports: distinct lookups.
                let ip = crate::destination::pod_ip(i % 2, i % 500);
                let addr = SocketAddr::new(
                    ip.parse().unwrap_or(IpAddr::from([10, 100, 0, 0])),
                    1024 + (i / 500) as u16,
                );
                async move { code_of(&pol.get(addr_spec(addr)).await) }
            })
        })
        .await;
    probe
        .run("outbound Get, private IPs of nothing", || {
            calls(n, args.concurrency, |i| {
                let mut pol = OutboundPoliciesClient::new(pol.clone());
                let addr = SocketAddr::new(private_ip(i), 5432);
                async move { code_of(&pol.get(addr_spec(addr)).await) }
            })
        })
        .await;
    probe
        .run("destination GetProfile, private IPs outside", || {
            calls(n, args.concurrency, |i| {
                let mut dst = DestinationClient::new(dst.clone());
                let path = format!("{}:5432", private_ip(i));
                async move { first_answer(dst.get_profile(get(path)).await).await }
            })
        })
        .await;
    probe
        .run("destination Get, private IPs outside", || {
            calls(n, args.concurrency, |i| {
                let mut dst = DestinationClient::new(dst.clone());
                let path = format!("{}:5432", private_ip(i));
                async move { first_answer(dst.get(get(path)).await).await }
            })
        })
        .await;
    probe
        .run(
            "outbound Watch, absent Service names, closed after the first answer",
            || {
                calls(n, args.concurrency, |i| {
                    let mut pol = OutboundPoliciesClient::new(pol.clone());
                    let spec = TrafficSpec {
                        source_workload: format!("{NS}:client"),
                        target: Some(traffic_spec::Target::Authority(format!(
                            "absent-{i}.{NS}.svc.cluster.local:80"
                        ))),
                    };
                    async move { first_answer(pol.watch(spec).await).await }
                })
            },
        )
        .await;

    nodes::run(
        &probe,
        &client,
        destination.grpc,
        destination.pid,
        args.node_streams,
    )
    .await?;

    for loops in [0, args.audit_loops] {
        let mut line = String::new();
        probe
            .run(
                &format!(
                    "{} Get opens beside {loops} /audit loops",
                    args.audit_streams
                ),
                || async {
                    match audit::opens_beside_audits(
                        destination.grpc,
                        introspection,
                        args.audit_streams,
                        loops,
                    )
                    .await
                    {
                        Ok((answers, said)) => {
                            line = said;
                            answers
                        }
                        Err(error) => {
                            line = format!("failed: {error:#}");
                            measure::Answers::default()
                        }
                    }
                },
            )
            .await;
        println!("    {line}");
    }

    // The sp-validator's webhook, over TLS with a local CA.
    let ca = LocalCa::new("bench-ca")?;
    let cert = ca.issue_serving_cert(&["localhost"])?;
    let (crt, key) = (work_dir.join("tls.crt"), work_dir.join("tls.key"));
    std::fs::write(&crt, &cert.cert_pem)?;
    std::fs::write(&key, &cert.key_pem)?;
    let (spv_addr, spv_admin) = (free_addr()?, free_addr()?);
    let mut sp_validator = ManagedProcess::spawn(
        "sp-validator",
        &args.sp_validator_bin,
        &[
            format!("--addr={spv_addr}"),
            format!("--admin-addr={spv_admin}"),
            format!("--tls-cert={}", crt.display()),
            format!("--tls-key={}", key.display()),
            "--log-level=warn".into(),
        ],
        &work_dir.join("sp-validator.log"),
        Lifetime::Tied,
    )?;
    wait_ready("sp-validator", spv_admin).await?;
    let spv = [Target {
        name: "sp-validator",
        pid: sp_validator.pid().context("sp-validator pid")?,
        admin: spv_admin,
    }];
    let tls = tls_connector(&ca)?;
    let webhook_probe = Probe {
        client: &client,
        servers: &spv,
    };
    let mut slow_line = String::new();
    webhook_probe
        .run(
            &format!(
                "{} slow 3 MiB AdmissionReview bodies beside real reviews",
                args.slow_bodies
            ),
            || async {
                let (answers, line) = webhook::slow_bodies(spv_addr, &tls, args.slow_bodies).await;
                slow_line = line;
                answers
            },
        )
        .await;
    println!("    {slow_line}");
    sp_validator.stop(Duration::from_secs(5));

    let mut policy_process = policy.process;
    policy_process.stop(Duration::from_secs(5));
    let mut destination_process = destination.process;
    destination_process.stop(Duration::from_secs(5));
    drop(cluster);
    let _ = std::fs::remove_dir_all(&work_dir);
    Ok(())
}

/// What every probe reads.
pub struct Probe<'a> {
    client: &'a kube::Client,
    servers: &'a [Target],
}

impl Probe<'_> {
    /// Runs `body`, reading before, right after it and [`SETTLE`] later,
    /// and prints the probe's line.
    async fn run<F, Fut>(&self, name: &str, body: F)
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = measure::Answers>,
    {
        let before = self.read().await;
        let started = std::time::Instant::now();
        let answers = body().await;
        let took = started.elapsed();
        let during = self.read().await;
        tokio::time::sleep(SETTLE).await;
        let after = self.read().await;
        self.print(name, took, &answers, &before, &during, &after);
    }

    /// One reading of the API server and every server.
    async fn read(&self) -> Reading {
        read(self.client, self.servers).await
    }

    fn print(
        &self,
        name: &str,
        took: Duration,
        answers: &measure::Answers,
        before: &Reading,
        during: &Reading,
        after: &Reading,
    ) {
        let secs = took.as_secs_f64().max(1e-3);
        let lists = ["services", "pods"]
            .iter()
            .map(|r| {
                let n = api_count(before, during, "LIST", r) + api_count(before, during, "GET", r);
                format!("{r} {:.1}/s", n / secs)
            })
            .collect::<Vec<_>>()
            .join(", ");
        println!("  {name} ({:.1} s):", took.as_secs_f64());
        println!(
            "    API requests: {} (GET+LIST per second: {lists})",
            api_delta(before, during)
        );
        if !answers.is_empty() {
            println!("    {}", answers.line());
        }
        println!("    {}", servers_line(self.servers, before, during, after));
    }
}

async fn channel(addr: SocketAddr) -> anyhow::Result<Channel> {
    Ok(Channel::from_shared(format!("http://{addr}"))?
        .connect()
        .await?)
}

/// A private address no pod or Service of the fixture has (10.200/16,
/// 10.0.0/24's neighbours and 192.168/16), spread so that lookups differ.
fn private_ip(i: usize) -> IpAddr {
    let i = i as u32;
    match i % 3 {
        0 => IpAddr::V4(Ipv4Addr::new(10, 200, (i >> 8) as u8, i as u8)),
        1 => IpAddr::V4(Ipv4Addr::new(10, 0, 1 + ((i >> 8) % 200) as u8, i as u8)),
        _ => IpAddr::V4(Ipv4Addr::new(192, 168, (i >> 8) as u8, i as u8)),
    }
}

fn addr_spec(addr: SocketAddr) -> TrafficSpec {
    TrafficSpec {
        source_workload: format!("{NS}:client"),
        target: Some(traffic_spec::Target::Addr(TcpAddress::from(addr))),
    }
}

fn get(path: String) -> GetDestination {
    GetDestination {
        scheme: "k8s".into(),
        path,
        context_token: format!(r#"{{"ns":"{NS}","nodeName":"node-1"}}"#),
    }
}

/// The code of a streaming call's first answer (its first message, or the
/// status it ended with); the stream is then dropped.
async fn first_answer<M>(
    response: Result<tonic::Response<tonic::Streaming<M>>, tonic::Status>,
) -> String {
    match response {
        Err(status) => format!("{:?}", status.code()),
        Ok(response) => {
            let mut stream = response.into_inner();
            match tokio::time::timeout(Duration::from_secs(30), stream.message()).await {
                Ok(Ok(Some(_))) => "OK".into(),
                Ok(Ok(None)) => "ended without a message".into(),
                Ok(Err(status)) => format!("{:?}", status.code()),
                Err(_) => "no answer within 30 s".into(),
            }
        }
    }
}
