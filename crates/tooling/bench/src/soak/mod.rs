//! `meridian-bench soak`: churn and faults against replicas of the
//! destination and the policy controller (as processes, each destination
//! following its own replica's policy controller's link, as in the pod)
//! on the local control plane, auditing every open stream against the
//! truth listed from the API.
//!
//! A seeded random sequence of operations ([`ops`], and every tenth one
//! for the leader-elected writers, [`writers`]) runs in segments; after
//! each segment but the last a fault ([`faults`], injected by [`inject`])
//! is injected; after each fault and at the end the soak waits for quiet
//! and audits every stream ([`audit`]), per replica, and what the writers
//! wrote. Clients spread over the replicas and move when theirs goes, as
//! proxies over the headless Service's addresses do
//! ([`replicas::Directory`]). At the end the servers' logs are read to
//! check that no two replicas ever held a writer's Lease at once and that
//! only the holder wrote ([`leases`]). Prints figures ([`report`]); times
//! are never asserted, but the run fails if any stream is still stale when
//! an audit's deadline passes, if the writers are still wrong then, or if
//! the Lease check fails.

mod audit;
mod client;
mod faults;
mod inject;
mod leases;
mod ops;
mod replicas;
mod report;
mod rng;
pub(crate) mod server;
mod truth;
mod writers;

use std::{
    path::PathBuf,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::bail;
use tokio::sync::watch;

use self::{
    client::{Reader, Stream, Target},
    faults::Fault,
    leases::LeaseWatch,
    ops::Workload,
    replicas::{Binaries, Directory, Replica},
    report::{AuditRecord, mib},
    rng::Rng,
    writers::Writers,
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
    /// Faults, each kind in turn (7 kinds with 2 replicas or more, 4 with
    /// one: 7 injects each once).
    #[arg(long, default_value_t = 14)]
    faults: usize,
    /// Replicas of the pod (a destination and a policy controller each).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=9))]
    replicas: u8,
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
    writers: Writers,
    replicas: Vec<Replica>,
    directory: Arc<Directory>,
    leases: LeaseWatch,
    streams: Vec<Stream>,
    stall: watch::Sender<bool>,
    deadline: Duration,
    audits: Vec<AuditRecord>,
    verbose: bool,
    /// Faults injected, by kind.
    faults: Vec<Fault>,
    /// Lease takeovers after their holder was killed (Lease, time).
    takeovers: Vec<(&'static str, Duration)>,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let profiled = (args.services / 5).max(2).min(args.services);
    let n_replicas = usize::from(args.replicas);
    println!(
        "soak: seed {seed}; {} replicas; {} ops, {} faults, {} Get + {} GetProfile streams over {} connections per replica, {} WatchPort streams; {} Services ({profiled} with ServiceProfiles), {} policy pods",
        n_replicas,
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
    let mut writers = Writers::new(client.clone(), Rng::new(rng.next_u64()));
    let setup = Instant::now();
    workload.populate().await?;
    writers.populate().await?;
    println!(
        "  cluster populated in {:.1}s",
        setup.elapsed().as_secs_f64()
    );

    let bins = Binaries {
        destination: &args.destination_bin,
        policy: &args.policy_bin,
        enable_ipv6: ENABLE_IPV6,
    };
    let mut replicas = (0..n_replicas)
        .map(|i| Replica::new(&cluster, i, &bins))
        .collect::<anyhow::Result<Vec<_>>>()?;
    for replica in &mut replicas {
        replica.start().await?;
    }
    let leases = LeaseWatch::start(client.clone());

    let (stall, stall_rx) = watch::channel(false);
    let directory = Arc::new(Directory::new(&replicas, args.connections)?);
    let streams = open_streams(&args, &workload, &directory, &stall_rx, &mut rng);
    let mut soak = Soak {
        cluster,
        client,
        workload,
        writers,
        replicas,
        directory,
        leases,
        streams,
        stall,
        deadline: Duration::from_secs(args.quiet_timeout_secs),
        audits: Vec::new(),
        verbose: args.verbose,
        faults: Vec::new(),
        takeovers: Vec::new(),
    };
    let started = Instant::now();
    soak.audit("start", started, None).await?;
    for replica in &mut soak.replicas {
        for server in replica.servers_mut() {
            server.rss_start = server.rss();
        }
    }

    let kinds = faults::kinds(n_replicas);
    let segments = args.faults + 1;
    for segment in 0..segments {
        let ops = args.ops / segments + usize::from(segment < args.ops % segments);
        // Every other segment runs with the stallable streams not reading.
        let stalled = segment % 2 == 1;
        soak.stall.send_replace(stalled);
        crate::ends::phase("operations", false);
        for _ in 0..ops {
            soak.step().await;
        }
        soak.stall.send_replace(false);
        if segment + 1 < segments {
            let fault = kinds[segment % kinds.len()];
            soak.inject(fault, segment + 1).await?;
        }
    }
    crate::ends::phase("final audit", false);
    soak.audit("final", Instant::now(), None).await?;
    let lease_failures = soak.check_leases();
    soak.report(seed, started.elapsed());
    crate::ends::report();
    crate::ends::phase("teardown", true);

    let stale: usize = soak.audits.iter().map(|a| a.stale.len()).sum();
    let final_stale = soak.audits.last().map_or(0, |a| a.stale.len());
    let writers_wrong = soak
        .audits
        .iter()
        .filter(|a| a.writers.as_ref().is_some_and(|(w, _)| !w.is_empty()))
        .count();
    for replica in &mut soak.replicas {
        replica.stop().await;
    }
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
    if writers_wrong > 0 {
        bail!(
            "the writers were still wrong at the deadline of {writers_wrong} audits; replay with --seed {seed}"
        );
    }
    if lease_failures > 0 {
        bail!(
            "the Lease check failed {lease_failures} times (two holders at once, or a write outside a term); replay with --seed {seed}"
        );
    }
    Ok(())
}

/// Opens the `Get`, `GetProfile` and `WatchPort` streams, spread over the
/// targets, the replicas and their connections; one in ten reads slowly,
/// one in ten can be stalled.
fn open_streams(
    args: &Args,
    workload: &Workload,
    directory: &Arc<Directory>,
    stall: &watch::Receiver<bool>,
    rng: &mut Rng,
) -> Vec<Stream> {
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
        streams.push(client::spawn(
            directory.clone(),
            i,
            target,
            reader,
            stall.clone(),
            rng.next_u64(),
        ));
    }
    streams
}

impl Soak {
    /// One operation; every tenth is also one of the writers'.
    async fn step(&mut self) {
        self.workload.step().await;
        if self.workload.total().is_multiple_of(10) {
            self.writers.step().await;
        }
    }

    /// Waits for quiet and audits every stream, and the writers.
    async fn audit(
        &mut self,
        label: &str,
        fault_at: Instant,
        recovered_at: Option<Instant>,
    ) -> anyhow::Result<()> {
        self.audit_skipping(label, fault_at, recovered_at, &|_| false, true)
            .await
    }

    /// Waits for quiet and audits every stream but those `skip` names, and
    /// the writers if `writers`.
    async fn audit_skipping(
        &mut self,
        label: &str,
        fault_at: Instant,
        recovered_at: Option<Instant>,
        skip: &dyn Fn(&Target) -> bool,
        writers: bool,
    ) -> anyhow::Result<()> {
        for replica in &mut self.replicas {
            for server in replica.servers_mut() {
                if let Some(exit) = server.exited() {
                    bail!("{exit}");
                }
            }
        }
        let started = Instant::now();
        let result = audit::wait_for_quiet(
            &self.client,
            &self.streams,
            ENABLE_IPV6,
            self.deadline,
            skip,
        )
        .await?;
        let writers = if writers {
            Some(self.wait_writers(fault_at, started + self.deadline).await?)
        } else {
            None
        };
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
            per_replica: result.per_replica,
            writers,
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

    /// Waits until what the writers wrote is correct (or `deadline`);
    /// returns what is still wrong and when it was found correct (from
    /// `since`). Also checks that exactly one running replica leads each
    /// writer by its metrics once correct.
    async fn wait_writers(
        &self,
        since: Instant,
        deadline: Instant,
    ) -> anyhow::Result<(Vec<String>, Option<Duration>)> {
        loop {
            let mut wrong = self.writers.check().await?;
            if wrong.is_empty() {
                let at = since.elapsed();
                for (family, what) in [
                    ("policy_resource_status_leader", "the status writer"),
                    ("endpointslice_writer_leader", "the EndpointSlice writer"),
                ] {
                    let mut leaders = 0.0;
                    for replica in self.replicas.iter().filter(|r| r.up()) {
                        for server in replica.servers() {
                            leaders += server.metric_sum(family).await;
                        }
                    }
                    // 0 leaders is a takeover in progress (a Lease not yet
                    // expired); 2 would be two writers.
                    if leaders > 1.0 {
                        wrong.push(format!("{leaders} replicas lead {what} ({family})"));
                    }
                }
                if wrong.is_empty() {
                    return Ok((wrong, Some(at)));
                }
            }
            if Instant::now() >= deadline {
                return Ok((wrong, None));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// Reads every server's log and checks both Leases (printed); returns
    /// the failures (overlapping terms, writes outside a term).
    fn check_leases(&self) -> usize {
        let logs: Vec<leases::LeaseLog> = self
            .replicas
            .iter()
            .flat_map(|r| {
                [
                    (leases::SLICES_LEASE, &r.destination),
                    (leases::STATUS_LEASE, &r.policy),
                ]
                .map(|(lease, server)| leases::LeaseLog {
                    lease,
                    replica: r.name.clone(),
                    path: server.log.clone(),
                    killed_at: server.killed_at.clone(),
                })
            })
            .collect();
        let reports = leases::check_logs(&logs);
        let changes = self.leases.changes();
        let mut failures = 0;
        for (lease, report) in &reports {
            let holders: Vec<String> = changes
                .iter()
                .filter(|c| c.lease == *lease)
                .map(|c| {
                    format!(
                        "{} (transitions {})",
                        c.holder.as_deref().unwrap_or("released"),
                        c.transitions
                    )
                })
                .collect();
            let writes: Vec<String> = report
                .writes
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            let takeovers: Vec<String> = self
                .takeovers
                .iter()
                .filter(|(l, _)| l == lease)
                .map(|(_, d)| format!("{:.1}s", d.as_secs_f64()))
                .collect();
            println!(
                "  Lease {lease}: {} terms in the logs, {} overlapping (goal 0); writes {} ({} outside a term, goal 0); holders as polled: {}; takeovers after the holder was killed: [{}]",
                report.terms.len(),
                report.overlaps.len(),
                writes.join(", "),
                report.stray_writes.len(),
                holders.join(" → "),
                takeovers.join(", ")
            );
            for problem in report.overlaps.iter().chain(&report.stray_writes).take(10) {
                println!("    LEASE CHECK: {problem}");
            }
            failures += report.overlaps.len() + report.stray_writes.len();
        }
        failures
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
        let writer_counts: Vec<String> = self
            .writers
            .counts
            .iter()
            .map(|(op, n)| format!("{op:?} {n}"))
            .collect();
        println!(
            "  writer operations: {} ({}); API errors {}",
            self.writers.total(),
            writer_counts.join(", "),
            self.writers.errors
        );
        let mut kinds: Vec<String> = faults::FAULTS
            .iter()
            .map(|f| format!("{f}: {}", self.faults.iter().filter(|x| *x == f).count()))
            .collect();
        kinds.retain(|k| !k.ends_with(": 0"));
        println!("  faults: {} ({})", self.faults.len(), kinds.join("; "));
        println!(
            "  streams: {} ({gets} Get, {profiles} GetProfile, {} WatchPort; {slow} slow readers, {stallable} stalled every other segment); {messages} messages, {reconnects} reconnects, {anomalies} anomalies (Remove of an address not held); now open per replica {:?}",
            self.streams.len(),
            self.streams.len() - gets - profiles,
            self.directory.attached(),
        );
        println!(
            "  audits: {}; stale or wrong streams: {stale} (goal 0)",
            self.audits.len()
        );
        report::print_convergence(&self.audits);
        for replica in &self.replicas {
            for server in replica.servers() {
                println!(
                    "  {} RSS: {} at start, {} at end; restarts {}",
                    server.name,
                    mib(server.rss_start),
                    mib(server.rss()),
                    server.restarts
                );
            }
        }
        println!("  seed: {seed} (replay with --seed {seed})");
    }
}
