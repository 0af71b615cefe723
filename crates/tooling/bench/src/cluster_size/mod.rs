//! `meridian-bench cluster-size`: what the destination and the policy
//! controller cost per pod of the cluster they watch, before and with
//! proxies' streams.
//!
//! For each N of `--pods`, a fresh local control plane gets N injected-
//! looking pods in N / 50 Services ([`fixtures`]). Then each binary
//! (every `--destination-bin` and `--policy-bin`, so that builds can be
//! compared on the same fixtures) is started after the fixtures exist and
//! measured ([`measure`]): CPU at Ready (the initial list), RSS and
//! anonymous RSS once settled, bytes per pod against the same binary at 0
//! pods, and the CPU of a burst of readiness flips each way. At the largest
//! N, each destination also gets the proxy-shaped streams ([`streams`]).
//! The destination runs beside a policy controller (the pod's shape: it
//! follows it over its link); only the destination is measured then.

mod fixtures;
pub mod linkerd;
mod measure;
mod streams;

use std::{path::PathBuf, time::Duration};

use measure::{Binary, Burst, Flavor, Idle, Kind};

#[derive(clap::Args)]
pub struct Args {
    /// Cluster sizes (pods), comma-separated; one fresh cluster each
    /// (besides the empty one). Default: 2000,10000 (compare-linkerd:
    /// 10000).
    #[arg(long, value_delimiter = ',')]
    pods: Vec<usize>,
    /// Pods per Service (until --max-services, then Services grow).
    #[arg(long, default_value_t = 50)]
    pods_per_service: usize,
    /// Most Services per cluster (the local API server's Service range
    /// holds about 250).
    #[arg(long, default_value_t = 200)]
    max_services: usize,
    /// Readiness flips per burst (one burst to not Ready, one back).
    #[arg(long, default_value_t = 1_000)]
    flips: usize,
    /// Seconds between Ready and the RSS reading.
    #[arg(long, default_value_t = 10)]
    settle_secs: u64,
    /// Proxy connections of the stream phase (4 Get + 4 GetProfile each).
    #[arg(long, default_value_t = 2_500)]
    connections: usize,
    /// Endpoint changes timed in the stream phase.
    #[arg(long, default_value_t = 40)]
    changes: usize,
    /// Skip the stream phase.
    #[arg(long)]
    no_streams: bool,
    /// Skip the readiness-flip bursts.
    #[arg(long)]
    no_flips: bool,
    /// Do not pin the server and the client to different CPUs.
    #[arg(long)]
    no_pin: bool,
    /// Record each destination with `perf record -e cpu-clock` during the
    /// endpoint changes, into this directory.
    #[arg(long)]
    perf_dir: Option<PathBuf>,
    /// A `destination` binary to measure: `LABEL=PATH` or `PATH` (labelled
    /// by its directory). Repeat to compare builds on the same fixtures.
    #[arg(long, required = true)]
    destination_bin: Vec<Binary>,
    /// A `policy-controller` binary, likewise. The destination with the
    /// same position (else the first) runs beside it.
    #[arg(long, required = true)]
    policy_bin: Vec<Binary>,
}

/// One binary's figures at one size.
struct Row {
    kind: Kind,
    label: String,
    flavor: Flavor,
    pods: usize,
    idle: Idle,
    bursts: Vec<Burst>,
    /// The destination's stream phase, at the largest size.
    streams: Option<streams::StreamFigures>,
}

/// The CPUs this process was allowed at start (to undo the client's
/// pinning before a new control plane starts: its processes inherit it).
fn allowed_cpus() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|l| l.trim().to_string())
}

fn unpin(cpus: &Option<String>) {
    if let Some(cpus) = cpus {
        let _ = std::process::Command::new("taskset")
            .args(["-a", "-p", "-c", cpus])
            .arg(std::process::id().to_string())
            .stdout(std::process::Stdio::null())
            .status();
    }
}

pub async fn run(mut args: Args) -> anyhow::Result<()> {
    if args.pods.is_empty() {
        args.pods = vec![2_000, 10_000];
    }
    let rows = measure_all(args).await?;
    print_summary(&rows);
    Ok(())
}

/// Every binary at every size (and at 0 pods), each row printed as it is
/// measured.
async fn measure_all(args: Args) -> anyhow::Result<Vec<Row>> {
    let cpus = allowed_cpus();
    let largest = args.pods.iter().copied().max().unwrap_or(0);
    println!(
        "cluster-size bench: pods {:?} ({} per Service, at most {} Services); destination {:?}; policy-controller {:?}",
        args.pods,
        args.pods_per_service,
        args.max_services,
        args.destination_bin
            .iter()
            .map(|b| &b.label)
            .collect::<Vec<_>>(),
        args.policy_bin.iter().map(|b| &b.label).collect::<Vec<_>>(),
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut sizes = vec![0usize];
    sizes.extend(args.pods.iter().copied().filter(|n| *n > 0));
    for (round, &n) in sizes.iter().enumerate() {
        let work_dir =
            std::env::temp_dir().join(format!("meridian-bench-{}-{round}", std::process::id()));
        unpin(&cpus);
        let (cluster, client) = crate::common::start_cluster(&work_dir).await?;
        let mut fx = if n == 0 {
            None
        } else {
            let layout = fixtures::Layout::new(n, args.pods_per_service, args.max_services);
            println!(
                "\n{n} pods: {} Services (about {} pods each), {} Nodes, {} Servers",
                layout.services,
                n.div_ceil(layout.services),
                layout.nodes,
                (0..layout.services)
                    .filter(|s| fixtures::Layout::has_server(*s))
                    .count()
            );
            let started = std::time::Instant::now();
            let fx = fixtures::create(&client, &layout).await?;
            println!(
                "  fixtures: {} API writes in {:.1}s",
                fx.writes,
                started.elapsed().as_secs_f64()
            );
            Some(fx)
        };
        if n == 0 {
            println!("\n0 pods (the empty cluster):");
        }
        let mut bins = args.destination_bin.iter().chain(&args.policy_bin);
        if bins.any(|b| b.flavor == Flavor::Linkerd) {
            linkerd::control_plane(&client).await?;
        }
        crate::common::pin(!args.no_pin);
        for bin in &args.policy_bin {
            let (mut server, wall) = start(&cluster, Kind::Policy, bin, None).await?;
            let row = measure_row(
                &args,
                &client,
                fx.as_mut(),
                (Kind::Policy, bin),
                &server,
                wall,
            )
            .await?;
            server.process.stop(Duration::from_secs(5));
            print_row(&row, &rows);
            rows.push(row);
        }
        for (i, bin) in args.destination_bin.iter().enumerate() {
            // Meridian's destination follows a policy controller (the
            // pod's shape); Linkerd's reads Servers itself.
            let mut companion = None;
            if bin.flavor == Flavor::Meridian {
                let companion_bin = args
                    .policy_bin
                    .iter()
                    .filter(|b| b.flavor == Flavor::Meridian)
                    .nth(i)
                    .or(args.policy_bin.first())
                    .ok_or_else(|| anyhow::anyhow!("no --policy-bin"))?;
                let (server, _) = start(&cluster, Kind::Policy, companion_bin, None).await?;
                companion = Some(server);
            }
            // (A build from before the feed had its own listener served it on
            // the gRPC port.)
            let feed = companion
                .as_ref()
                .map(|c| c.workload_ports.unwrap_or(c.grpc));
            let (mut server, wall) = start(&cluster, Kind::Destination, bin, feed).await?;
            let mut row = measure_row(
                &args,
                &client,
                fx.as_mut(),
                (Kind::Destination, bin),
                &server,
                wall,
            )
            .await?;
            print_row(&row, &rows);
            if let Some(fx) = fx.as_mut()
                && n == largest
                && !args.no_streams
            {
                println!(
                    "  destination [{}] streams at {n} pods ({} connections × 4 Get + 4 GetProfile):",
                    bin.label, args.connections
                );
                let perf = args
                    .perf_dir
                    .as_deref()
                    .map(|dir| (dir, format!("destination-{}-{n}-changes", bin.label)));
                let figures = streams::run(
                    &client,
                    fx,
                    server.grpc,
                    server.pid,
                    args.connections,
                    args.changes,
                    perf.as_ref().map(|(d, l)| (*d, l.as_str())),
                )
                .await?;
                figures.print();
                row.streams = Some(figures);
            }
            rows.push(row);
            server.process.stop(Duration::from_secs(5));
            if let Some(mut companion) = companion {
                companion.process.stop(Duration::from_secs(5));
            }
        }
        drop(cluster);
        let _ = std::fs::remove_dir_all(&work_dir);
    }
    Ok(rows)
}

/// Starts `bin` as `kind`, as its flavor is started (Linkerd's
/// destination reads Servers itself and takes no `policy` link).
async fn start(
    cluster: &local_cluster::Cluster,
    kind: Kind,
    bin: &Binary,
    policy: Option<std::net::SocketAddr>,
) -> anyhow::Result<(crate::common::Server, Duration)> {
    match bin.flavor {
        Flavor::Meridian => measure::start(cluster, kind, bin, policy).await,
        Flavor::Linkerd => linkerd::start(cluster, kind, bin).await,
    }
}

/// A started binary's figures: Ready and settled, then (with fixtures)
/// a burst of readiness flips each way.
async fn measure_row(
    args: &Args,
    client: &kube::Client,
    fx: Option<&mut fixtures::Fixtures>,
    (kind, bin): (Kind, &Binary),
    server: &crate::common::Server,
    wall: Duration,
) -> anyhow::Result<Row> {
    let idle = measure::idle(server, wall, Duration::from_secs(args.settle_secs)).await?;
    let pods = fx.as_ref().map_or(0, |fx| fx.pods.len());
    let bursts = match fx {
        Some(fx) if !args.no_flips => flip_both_ways(client, fx, args.flips, server.pid).await,
        _ => Vec::new(),
    };
    Ok(Row {
        kind,
        label: bin.label.clone(),
        flavor: bin.flavor,
        pods,
        idle,
        bursts,
        streams: None,
    })
}

async fn flip_both_ways(
    client: &kube::Client,
    fx: &mut fixtures::Fixtures,
    flips: usize,
    pid: u32,
) -> Vec<Burst> {
    let mut out = Vec::new();
    for ready in [false, true] {
        out.push(measure::burst(client, fx, flips, ready, pid).await);
    }
    out
}

fn mb(b: u64) -> f64 {
    b as f64 / 1e6
}

/// Bytes per pod against the same binary's row at 0 pods: (total, anon).
fn per_pod(row: &Row, rows: &[Row]) -> Option<(i64, i64)> {
    let zero = rows
        .iter()
        .find(|r| r.kind == row.kind && r.label == row.label && r.pods == 0)?;
    let n = row.pods.max(1) as i64;
    Some((
        (row.idle.rss.total as i64 - zero.idle.rss.total as i64) / n,
        (row.idle.rss.anon as i64 - zero.idle.rss.anon as i64) / n,
    ))
}

fn print_row(row: &Row, rows: &[Row]) {
    println!(
        "  {} [{}] at {} pods: Ready after {:.2} s wall, CPU at Ready (initial list) {:.2} s, when first quiet {}; {} s later RSS {:.1} MB, anonymous {:.1} MB; peak RSS until then {:.1} MB",
        row.kind.name(),
        row.label,
        row.pods,
        row.idle.ready_wall.as_secs_f64(),
        row.idle.ready_cpu,
        row.idle
            .listed_cpu
            .map_or("NOT QUIET within 120 s".to_string(), |c| format!(
                "{c:.2} s"
            )),
        row.idle.settle.as_secs(),
        mb(row.idle.rss.total),
        mb(row.idle.rss.anon),
        mb(row.idle.peak_rss),
    );
    if let Some(pods) = row.idle.indexed_pods {
        println!("    meshed pods in its index: {pods}");
    }
    if let Some((total, anon)) = per_pod(row, rows).filter(|_| row.pods > 0) {
        println!("    per pod against 0 pods: {total} bytes RSS, {anon} bytes anonymous");
    }
    for burst in &row.bursts {
        burst.print("    ");
    }
}

fn print_summary(rows: &[Row]) {
    println!(
        "\nsummary (RSS and anonymous RSS settled after Ready; per pod against the same binary at 0 pods; peak: the most RSS from start until then):"
    );
    println!(
        "| binary | build | pods | CPU at Ready (s) | CPU when first quiet (s) | RSS (MB) | anon (MB) | RSS/pod (B) | anon/pod (B) | peak RSS (MB) | CPU/flip → not Ready (ms) | CPU/flip → Ready (ms) | flip write errors |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        let (total, anon) = per_pod(row, rows)
            .filter(|_| row.pods > 0)
            .map_or(("–".into(), "–".into()), |(t, a)| {
                (t.to_string(), a.to_string())
            });
        let flip = |i: usize| {
            row.bursts.get(i).map_or("–".to_string(), |b| {
                let (raw, net) = b.per_flip_ms();
                format!(
                    "{raw:.2} ({net:.2}){}",
                    if b.quiet { "" } else { " not quiet" }
                )
            })
        };
        let errors: usize = row.bursts.iter().map(|b| b.errors).sum();
        println!(
            "| {} | {} | {} | {:.2} | {} | {:.1} | {:.1} | {total} | {anon} | {:.1} | {} | {} | {errors} |",
            row.kind.name(),
            row.label,
            row.pods,
            row.idle.ready_cpu,
            row.idle
                .listed_cpu
                .map_or("not quiet".to_string(), |c| format!("{c:.2}")),
            mb(row.idle.rss.total),
            mb(row.idle.rss.anon),
            mb(row.idle.peak_rss),
            flip(0),
            flip(1),
        );
    }
}
