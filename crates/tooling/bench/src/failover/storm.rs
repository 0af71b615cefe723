//! The failover sequence against two replicas of one server, and its
//! figures: clients opened and correct; replica 1 SIGKILLed while changes
//! are written; every client served again by the survivor (replica 0),
//! and correct; the survivor's memory sampled through it all; replica 1
//! back and its clients sent home; the survivor's memory after.

use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use anyhow::Context;

use super::{fleet::Fleet, held::Truth};
use crate::{
    common::CpuMark,
    soak::server::Server,
    stats::{Rss, ms, percentile, rss},
};

/// Writes the `k`-th change through the API and applies it to the truth.
pub trait Changer {
    async fn change(&mut self, k: usize) -> anyhow::Result<()>;
}

/// The survivor's RSS sampled every 50 ms: the peak (of the total and of
/// the anonymous part, each) while it runs.
struct Sampler {
    peak: Arc<Mutex<Rss>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Sampler {
    fn start(pid: u32) -> Self {
        let peak = Arc::new(Mutex::new(Rss::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (peak.clone(), stop.clone());
        let task = tokio::spawn(async move {
            while !s.load(Ordering::Relaxed) {
                if let Some(now) = rss(pid) {
                    let mut peak = p.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                    peak.total = peak.total.max(now.total);
                    peak.anon = peak.anon.max(now.anon);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
        Self { peak, stop, task }
    }

    async fn finish(self) -> Rss {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        *self
            .peak
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

fn mib(r: Rss) -> String {
    format!(
        "{:.1} MiB ({:.1})",
        r.total as f64 / 1048576.0,
        r.anon as f64 / 1048576.0
    )
}

/// Waits until every stream of `proxies` was served after `since` (and
/// every other stream is served); returns when the last one was.
async fn wait_served_since(
    fleet: &Fleet,
    proxies: &[usize],
    since: Instant,
    deadline: Instant,
) -> Option<Instant> {
    loop {
        let times = fleet.served_times(proxies);
        let all = times.iter().all(|t| t.is_some_and(|t| t > since));
        if all && fleet.served().0 == fleet.streams() {
            return times.into_iter().flatten().max();
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs the sequence; returns a one-line summary.
pub async fn run<C: Changer>(
    name: &str,
    servers: &mut [Server; 2],
    fleet: Fleet,
    truth: &Mutex<Truth>,
    changer: &mut C,
    (changes, timeout): (usize, Duration),
) -> anyhow::Result<String> {
    let pid = |s: &Server| s.pid().context("the server is not running");
    let (p0, p1) = (pid(&servers[0])?, pid(&servers[1])?);
    crate::ends::phase(&format!("{name}: opening"), false);
    let opening = (CpuMark::now(p0), CpuMark::now(p1));
    let start = Instant::now();
    let total = fleet.streams();
    let opened = fleet.wait_served(timeout).await;
    let (cpu0, cpu1) = (opening.0.since(), opening.1.since());
    match opened {
        Some(at) => println!(
            "  {} proxies, {total} streams served after {:.2} s (replica CPU {:.2} s + {:.2} s, client {:.2} s); per replica {:?}",
            fleet.per_replica().iter().sum::<usize>(),
            at.saturating_duration_since(start).as_secs_f64(),
            cpu0.0,
            cpu1.0,
            cpu0.1,
            fleet.per_replica()
        ),
        None => anyhow::bail!(
            "only {} of {total} streams served after {}s",
            fleet.served().0,
            timeout.as_secs()
        ),
    }
    match fleet.wait_correct(truth, timeout).await {
        Ok(d) => println!("  every stream correct {} later", ms(d)),
        Err(wrong) => println!("  {wrong} streams NOT correct before the kill"),
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = rss(p0).context("RSS")?;
    let victim_before = rss(p1).context("RSS")?;
    let moved = fleet.on(1);
    let moved_streams = fleet.served_times(&moved).len();
    println!(
        "  before the kill: survivor RSS (anon) {}, the other {}",
        mib(before),
        mib(victim_before)
    );

    // The storm.
    crate::ends::phase(&format!("{name}: replica 1 SIGKILLed"), true);
    let sampler = Sampler::start(p0);
    let cpu = CpuMark::now(p0);
    let killed = Instant::now();
    servers[1].kill();
    let deadline = killed + timeout;
    let mut storm_cpu = None;
    let mut served_at = None;
    let mut k = 0;
    while storm_cpu.is_none() || k < changes {
        if k < changes {
            changer.change(k).await?;
            k += 1;
        }
        if storm_cpu.is_none() {
            let times = fleet.served_times(&moved);
            if times.iter().all(|t| t.is_some_and(|t| t > killed)) && fleet.served().0 == total {
                served_at = times.into_iter().flatten().max();
                storm_cpu = Some(cpu.since());
            }
        }
        if Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(if k < changes { 100 } else { 20 })).await;
    }
    let storm_cpu = storm_cpu.unwrap_or_else(|| cpu.since());
    let times: Vec<Duration> = fleet
        .served_times(&moved)
        .into_iter()
        .flatten()
        .map(|t| t.saturating_duration_since(killed))
        .collect();
    match served_at {
        Some(at) => println!(
            "  SIGKILL replica 1 ({} proxies, {moved_streams} streams): every client served again by the survivor {:.2} s after the kill (its streams: p50 {}, p99 {}); survivor CPU {:.2} s over those {:.2} s; {k} changes written meanwhile",
            moved.len(),
            at.saturating_duration_since(killed).as_secs_f64(),
            ms(percentile(&times, 50.0)),
            ms(percentile(&times, 99.0)),
            storm_cpu.0,
            storm_cpu.2
        ),
        None => println!(
            "  SIGKILL replica 1: NOT every client served again within {} s ({} of {moved_streams} moved streams served)",
            timeout.as_secs(),
            times.len()
        ),
    }
    let missed_storm = match fleet.wait_correct(truth, timeout).await {
        Ok(d) => {
            println!(
                "  every stream holds the current state {} after the last change (missed updates: 0)",
                ms(d)
            );
            0
        }
        Err(wrong) => {
            println!(
                "  MISSED UPDATES: {wrong} streams still wrong {} s after the last change",
                timeout.as_secs()
            );
            wrong
        }
    };
    tokio::time::sleep(Duration::from_secs(5)).await;
    let peak = sampler.finish().await;
    let settled = rss(p0).context("RSS")?;
    let ratio = peak.total as f64 / settled.total.max(1) as f64;
    println!(
        "  survivor RSS (anon): {} before, {} at the peak of the storm, {} settled with every client; peak/settled {ratio:.2} (anon {:.2}; target ≤ 1.2)",
        mib(before),
        mib(peak),
        mib(settled),
        peak.anon as f64 / settled.anon.max(1) as f64
    );

    // Replica 1 back, its clients home again.
    crate::ends::phase(&format!("{name}: replica 1 back, clients rebalance"), false);
    servers[1].restart().await?;
    let sent = Instant::now();
    fleet.send_home(&moved, 1);
    let back = wait_served_since(&fleet, &moved, sent, sent + timeout).await;
    let missed_back = match fleet.wait_correct(truth, timeout).await {
        Ok(_) => 0,
        Err(wrong) => wrong,
    };
    println!(
        "  replica 1 back: {} proxies moved home, served {}; per replica {:?}; streams wrong after: {missed_back}",
        moved.len(),
        back.map_or_else(
            || "NOT within the timeout".to_string(),
            |at| format!(
                "after {:.2} s",
                at.saturating_duration_since(sent).as_secs_f64()
            )
        ),
        fleet.per_replica()
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after5 = rss(p0).context("RSS")?;
    tokio::time::sleep(Duration::from_secs(15)).await;
    let after20 = rss(p0).context("RSS")?;
    let grown = settled.total.saturating_sub(before.total);
    let given = settled.total.saturating_sub(after20.total);
    println!(
        "  survivor RSS (anon) once its guests left: {} after 5 s, {} after 20 s; gave back {:.1} MiB; the storm had added {:.1} MiB",
        mib(after5),
        mib(after20),
        given as f64 / 1048576.0,
        grown as f64 / 1048576.0,
    );
    println!(
        "  client: {} connections made, {} connect attempts failed; decode errors {}",
        fleet.connects.load(Ordering::Relaxed),
        fleet.connect_failures.load(Ordering::Relaxed),
        fleet.decode_errors()
    );

    crate::ends::phase(&format!("{name}: teardown"), true);
    drop(fleet);
    for server in servers.iter_mut() {
        server.stop(Duration::from_secs(5)).await;
    }
    Ok(format!(
        "{name}: served again {}, peak/settled {ratio:.2}, missed updates {}",
        served_at.map_or_else(
            || "NEVER".to_string(),
            |at| format!(
                "{:.2} s",
                at.saturating_duration_since(killed).as_secs_f64()
            )
        ),
        missed_storm + missed_back
    ))
}
