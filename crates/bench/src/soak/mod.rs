//! `meridian-bench soak`: churn and faults against the destination and the
//! policy controller (as processes, the destination following the policy
//! controller's link) on the local control plane, auditing every open
//! stream against the truth listed from the API.
//!
//! A seeded random sequence of operations ([`ops`]) runs in segments; after
//! each segment but the last a fault ([`faults`]) is injected; after each
//! fault and at the end the soak waits for quiet and audits every stream
//! ([`audit`]). Prints figures ([`report`]); times are never asserted, but
//! the run fails if any stream is still stale when an audit's deadline
//! passes.

mod audit;
mod client;
mod faults;
mod ops;
mod report;
mod rng;
mod truth;

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use anyhow::bail;
use tokio::sync::watch;

use self::{
    client::{Reader, Stream, Target},
    faults::{FAULTS, Fault, Server},
    ops::Workload,
    report::{AuditRecord, mib},
    rng::Rng,
};

/// The soak's namespace.
pub const NS: &str = "soak";

#[derive(clap::Args)]
pub struct Args {
    /// Seed of the operation sequence (printed; default: from the clock).
    #[arg(long)]
    seed: Option<u64>,
    /// Operations in total.
    #[arg(long, default_value_t = 1_000)]
    ops: usize,
    /// `Get` streams.
    #[arg(long, default_value_t = 2_000)]
    streams: usize,
    /// `GetProfile` streams.
    #[arg(long, default_value_t = 200)]
    profile_streams: usize,
    /// `WatchPort` streams (on the policy controller).
    #[arg(long, default_value_t = 200)]
    inbound_streams: usize,
    /// Pods followed by `WatchPort` (outside the endpoint churn).
    #[arg(long, default_value_t = 40)]
    policy_pods: usize,
    /// HTTP/2 connections the streams share (per server).
    #[arg(long, default_value_t = 200)]
    connections: usize,
    /// Services (a fifth of them, at least 2, followed by `GetProfile`).
    #[arg(long, default_value_t = 40)]
    services: usize,
    /// Faults, each kind in turn (4 kinds: 4 injects each once).
    #[arg(long, default_value_t = 8)]
    faults: usize,
    /// How long an audit waits for every stream to be correct.
    #[arg(long, default_value_t = 60)]
    quiet_timeout_secs: u64,
    /// Keep the work directory (the servers' and the cluster's logs).
    #[arg(long)]
    keep: bool,
    /// Print a few streams that were wrong when each audit began.
    #[arg(long)]
    verbose: bool,
    /// The `destination` binary.
    #[arg(long)]
    destination_bin: PathBuf,
    /// The `policy-controller` binary.
    #[arg(long)]
    policy_bin: PathBuf,
}

/// The destination runs as the chart runs it: IPv4 only.
const ENABLE_IPV6: bool = false;

struct Soak {
    cluster: local_cluster::Cluster,
    client: kube::Client,
    workload: Workload,
    destination: Server,
    policy: Server,
    streams: Vec<Stream>,
    stall: watch::Sender<bool>,
    deadline: Duration,
    audits: Vec<AuditRecord>,
    verbose: bool,
    /// Faults injected, by kind.
    faults: Vec<Fault>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let profiled = (args.services / 5).max(2).min(args.services);
    println!(
        "soak: seed {seed}; {} ops, {} faults, {} Get + {} GetProfile streams over {} connections, {} WatchPort streams; {} Services ({profiled} with ServiceProfiles), {} policy pods",
        args.ops,
        args.faults,
        args.streams,
        args.profile_streams,
        args.connections,
        args.inbound_streams,
        args.services,
        args.policy_pods
    );
    let work_dir = std::env::temp_dir().join(format!("meridian-soak-{}", std::process::id()));
    let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
    let mut rng = Rng::new(seed);
    let mut workload = Workload::new(
        client.clone(),
        args.services,
        profiled,
        args.policy_pods,
        Rng::new(rng.next_u64()),
    );
    let setup = Instant::now();
    workload.populate().await?;
    println!(
        "  cluster populated in {:.1}s",
        setup.elapsed().as_secs_f64()
    );

    let mut policy = Server::new(
        &cluster,
        &args.policy_bin,
        "grpc-addr",
        &[
            format!("--control-plane-namespace={NS}"),
            "--admission-controller-disabled".to_string(),
        ],
    )?;
    policy.start().await?;
    let mut destination = Server::new(
        &cluster,
        &args.destination_bin,
        "addr",
        &[
            format!("--policy-addr=http://{}", policy.grpc),
            format!("--enable-ipv6={ENABLE_IPV6}"),
        ],
    )?;
    destination.start().await?;

    let (stall, stall_rx) = watch::channel(false);
    let streams = open_streams(
        &args,
        &workload,
        (destination.grpc, policy.grpc),
        &stall_rx,
        &mut rng,
    )?;
    let mut soak = Soak {
        cluster,
        client,
        workload,
        destination,
        policy,
        streams,
        stall,
        deadline: Duration::from_secs(args.quiet_timeout_secs),
        audits: Vec::new(),
        verbose: args.verbose,
        faults: Vec::new(),
    };
    let started = Instant::now();
    soak.audit("start", started, None).await?;
    soak.destination.rss_start = soak.destination.rss();
    soak.policy.rss_start = soak.policy.rss();

    let segments = args.faults + 1;
    for segment in 0..segments {
        let ops = args.ops / segments + usize::from(segment < args.ops % segments);
        // Every other segment runs with the stallable streams not reading.
        let stalled = segment % 2 == 1;
        soak.stall.send_replace(stalled);
        crate::ends::phase("operations", false);
        for _ in 0..ops {
            soak.workload.step().await;
        }
        soak.stall.send_replace(false);
        if segment + 1 < segments {
            let fault = FAULTS[segment % FAULTS.len()];
            soak.inject(fault, segment + 1).await?;
        }
    }
    crate::ends::phase("final audit", false);
    soak.audit("final", Instant::now(), None).await?;
    soak.report(seed, started.elapsed());
    crate::ends::report();
    crate::ends::phase("teardown", true);

    let stale: usize = soak.audits.iter().map(|a| a.stale.len()).sum();
    let final_stale = soak.audits.last().map_or(0, |a| a.stale.len());
    soak.destination.stop();
    soak.policy.stop();
    drop(soak);
    if args.keep {
        println!("  logs kept in {}", work_dir.display());
    } else {
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    if stale > 0 {
        bail!(
            "{stale} stale or wrong streams over all audits ({final_stale} at the final one); replay with --seed {seed}"
        );
    }
    Ok(())
}

/// Opens the `Get` and `GetProfile` streams, spread over the targets and
/// the connections; one in ten reads slowly, one in ten can be stalled.
fn open_streams(
    args: &Args,
    workload: &Workload,
    (destination, policy): (std::net::SocketAddr, std::net::SocketAddr),
    stall: &watch::Receiver<bool>,
    rng: &mut Rng,
) -> anyhow::Result<Vec<Stream>> {
    let channels = client::channels(destination, args.connections)?;
    let policy_channels = client::channels(policy, (args.connections / 4).max(1))?;
    let mut targets = Vec::new();
    for service in workload.service_names() {
        for port in [80, 9000, 81] {
            for node in ["", "node-1"] {
                targets.push(Target::Get {
                    service: service.clone(),
                    port,
                    node: node.to_string(),
                });
            }
        }
    }
    // A seeded shuffle, so that stream i's target is not tied to i's reader.
    for i in (1..targets.len()).rev() {
        let j = rng.below(i + 1);
        targets.swap(i, j);
    }
    let profiles: Vec<Target> = workload
        .profiled_names()
        .into_iter()
        .map(|service| Target::Profile { service, port: 80 })
        .collect();
    let inbound: Vec<Target> = workload
        .policy_pod_names()
        .into_iter()
        .flat_map(|pod| {
            [8080, 9090].map(|port| Target::Inbound {
                pod: pod.clone(),
                port,
            })
        })
        .collect();
    let mut streams =
        Vec::with_capacity(args.streams + args.profile_streams + args.inbound_streams);
    let pick = |list: &[Target], i: usize| list.get(i % list.len().max(1)).cloned();
    let wanted = (0..args.streams)
        .filter_map(|i| Some((i, pick(&targets, i)?)))
        .chain((0..args.profile_streams).filter_map(|i| Some((i, pick(&profiles, i)?))))
        .chain((0..args.inbound_streams).filter_map(|i| Some((i, pick(&inbound, i)?))));
    for (i, target) in wanted {
        let reader = match i % 10 {
            0 => Reader::Slow(Duration::from_millis(50)),
            1 => Reader::Stallable,
            _ => Reader::Normal,
        };
        let channel = match target {
            Target::Inbound { .. } => policy_channels[i % policy_channels.len()].clone(),
            _ => channels[i % channels.len()].clone(),
        };
        streams.push(client::spawn(
            channel,
            target,
            reader,
            stall.clone(),
            rng.next_u64(),
        ));
    }
    Ok(streams)
}

impl Soak {
    /// Waits for quiet and audits every stream (but those `skip` names).
    async fn audit(
        &mut self,
        label: &str,
        fault_at: Instant,
        recovered_at: Option<Instant>,
    ) -> anyhow::Result<()> {
        self.audit_skipping(label, fault_at, recovered_at, &|_| false)
            .await
    }

    async fn audit_skipping(
        &mut self,
        label: &str,
        fault_at: Instant,
        recovered_at: Option<Instant>,
        skip: &dyn Fn(&Target) -> bool,
    ) -> anyhow::Result<()> {
        for server in [&mut self.destination, &mut self.policy] {
            if let Some(exit) = server.exited() {
                bail!("{exit}");
            }
        }
        let result = audit::wait_for_quiet(
            &self.client,
            &self.streams,
            ENABLE_IPV6,
            self.deadline,
            skip,
        )
        .await?;
        let record = AuditRecord {
            label: label.to_string(),
            after_fault: label.starts_with("fault"),
            audited: result.audited,
            wrong_at_first: result.wrong_at_first.len(),
            stale: result.stale,
            from_fault: result
                .correct_at
                .map(|at| at.saturating_duration_since(fault_at)),
            from_recovery: recovered_at
                .zip(result.correct_at)
                .map(|(back, at)| at.saturating_duration_since(back)),
        };
        record.print();
        if self.verbose {
            for wrong in result.wrong_at_first.iter().take(3) {
                println!(
                    "    wrong at first: {}{} holds {} / truth {}",
                    wrong.target,
                    if wrong.connected {
                        ""
                    } else {
                        " (not connected)"
                    },
                    wrong.held,
                    wrong.expected
                );
            }
        }
        self.audits.push(record);
        Ok(())
    }

    /// Injects one fault, lets it heal, then audits.
    async fn inject(&mut self, fault: Fault, n: usize) -> anyhow::Result<()> {
        println!("  fault {n}: {fault} (after {} ops)", self.workload.total());
        self.faults.push(fault);
        let label = format!("fault {n}: {fault}");
        // Streams end when a server goes away: expected until the audit
        // after the fault found every stream correct again.
        crate::ends::phase(&label, true);
        let at = Instant::now();
        match fault {
            Fault::ApiserverRestart => {
                self.cluster.stop_apiserver();
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.cluster.start_apiserver().await?;
                self.audit(&label, at, Some(Instant::now())).await
            }
            Fault::CompactionRelist => {
                let restarts = self
                    .destination
                    .metric_sum("index_watch_restarts_total")
                    .await;
                let revision = faults::compact_etcd(&self.cluster.etcd_url()).await?;
                // One more write, so every watcher's resourceVersion is
                // older than the store's oldest.
                self.bump().await?;
                self.cluster.stop_apiserver();
                self.cluster.start_apiserver().await?;
                let back = Instant::now();
                self.audit(&label, at, Some(back)).await?;
                let after = self
                    .destination
                    .metric_sum("index_watch_restarts_total")
                    .await;
                println!(
                    "    etcd compacted at revision {revision}; the destination's watch restarts: +{}",
                    after - restarts
                );
                Ok(())
            }
            Fault::DestinationKill => {
                self.destination.kill();
                // Changes while it is down must be there when it is back.
                for _ in 0..10 {
                    self.workload.step().await;
                }
                self.destination.restart().await?;
                self.audit(&label, at, Some(Instant::now())).await
            }
            Fault::PolicyControllerDown => {
                self.policy.stop();
                for _ in 0..10 {
                    self.workload.step().await;
                }
                // The destination keeps serving Get and GetProfile meanwhile
                // (WatchPort streams, served by the policy controller, wait).
                self.audit_skipping(&format!("{label} (while down)"), at, None, &|t| {
                    matches!(t, Target::Inbound { .. })
                })
                .await?;
                self.policy.restart().await?;
                self.audit(&format!("{label} (back)"), at, Some(Instant::now()))
                    .await
            }
        }
    }

    /// Writes a ConfigMap (moves etcd's revision on).
    async fn bump(&self) -> anyhow::Result<()> {
        use k8s_openapi::api::core::v1::ConfigMap;
        use kube::api::{Patch, PatchParams};
        let object = serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "soak-bump"},
            "data": {"at": format!("{:?}", Instant::now())},
        });
        kube::Api::<ConfigMap>::namespaced(self.client.clone(), NS)
            .patch(
                "soak-bump",
                &PatchParams::apply("meridian-soak").force(),
                &Patch::Apply(&object),
            )
            .await?;
        Ok(())
    }

    fn report(&self, seed: u64, elapsed: Duration) {
        let holdings: Vec<_> = self.streams.iter().map(|s| s.holding().clone()).collect();
        let reconnects: u64 = holdings.iter().map(|h| h.opened.saturating_sub(1)).sum();
        let messages: u64 = holdings.iter().map(|h| h.messages).sum();
        let anomalies: u64 = holdings.iter().map(|h| h.anomalies).sum();
        let gets = self
            .streams
            .iter()
            .filter(|s| matches!(s.target, Target::Get { .. }))
            .count();
        let profiles = self
            .streams
            .iter()
            .filter(|s| matches!(s.target, Target::Profile { .. }))
            .count();
        let slow = self
            .streams
            .iter()
            .filter(|s| matches!(s.reader, Reader::Slow(_)))
            .count();
        let stallable = self
            .streams
            .iter()
            .filter(|s| s.reader == Reader::Stallable)
            .count();
        let stale: usize = self.audits.iter().map(|a| a.stale.len()).sum();
        println!("soak results (seed {seed}, {:.0}s):", elapsed.as_secs_f64());
        let counts: Vec<String> = self
            .workload
            .counts
            .iter()
            .map(|(op, n)| format!("{op:?} {n}"))
            .collect();
        println!(
            "  operations: {} ({}); API errors {}",
            self.workload.total(),
            counts.join(", "),
            self.workload.errors
        );
        for error in &self.workload.first_errors {
            println!("    error: {error}");
        }
        let mut kinds: Vec<String> = FAULTS
            .iter()
            .map(|f| format!("{f}: {}", self.faults.iter().filter(|x| *x == f).count()))
            .collect();
        kinds.retain(|k| !k.ends_with(": 0"));
        println!("  faults: {} ({})", self.faults.len(), kinds.join("; "));
        println!(
            "  streams: {} ({gets} Get, {profiles} GetProfile, {} WatchPort; {slow} slow readers, {stallable} stalled every other segment); {messages} messages, {reconnects} reconnects, {anomalies} anomalies (Remove of an address not held)",
            self.streams.len(),
            self.streams.len() - gets - profiles,
        );
        println!(
            "  audits: {}; stale or wrong streams: {stale} (goal 0)",
            self.audits.len()
        );
        report::print_convergence(&self.audits);
        for server in [&self.destination, &self.policy] {
            println!(
                "  {} RSS: {} at start, {} at end; restarts {}",
                server.name,
                mib(server.rss_start),
                mib(server.rss()),
                server.restarts
            );
        }
        println!("  seed: {seed} (replay with --seed {seed})");
    }
}
