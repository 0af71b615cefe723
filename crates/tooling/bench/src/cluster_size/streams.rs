//! The proxy-shaped stream figures at the cluster's size: 2,500 proxy
//! connections × 4 `Get` streams, each with its `GetProfile`, against the
//! destination watching the benchmark's cluster. Half the `Get` streams
//! are on two hot Services, one of each on every connection (2,500
//! streams each), the rest spread over the other Services. Prints bytes
//! per connection and stream, the CPU to open them, the CPU per endpoint
//! change on a hot Service and the write → first / last stream latency,
//! with every stream that failed to open or ended early.
//!
//! The client is the destination bench's ([`crate::proxy_client`], its
//! targets and [`crate::common`]'s figures); every stream and connection
//! end is recorded by reason ([`crate::ends`]) and reported.

use std::{
    path::Path,
    sync::{Arc, atomic::AtomicUsize},
    time::{Duration, Instant},
};

use anyhow::Context;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;
use tokio::sync::mpsc;

use super::fixtures::{self, Fixtures};
use crate::{
    common::{ConnectionMemory, CpuMark, FanOut, PerfRecord, observe_versions, wait_count},
    destination::{NS, open_target},
    proxy_client,
    stats::{Rss, rss},
};

/// Hot Services: every connection holds one `Get` stream of each.
const HOT: usize = 2;
/// Warm streams per connection.
const WARM_PER_CONNECTION: usize = 50;
/// How `--perf-dir` records the destination during the endpoint changes:
/// `cpu-clock` samples (this VM has no hardware counters) with DWARF call
/// graphs (release builds keep line tables but no frame pointers, so `-g`
/// alone would cut the stacks short).
const PERF_HOW: &[&str] = &[
    "-e",
    "cpu-clock",
    "-F",
    "999",
    "--call-graph",
    "dwarf,16384",
];

/// What the stream phase measured.
pub struct StreamFigures {
    pub memory: ConnectionMemory,
    pub connections: usize,
    pub streams: usize,
    pub open: (f64, f64, f64),
    pub connect: (f64, f64, f64),
    pub per_change_ms: (f64, f64),
    pub fan_out: FanOut,
    pub changes: usize,
    /// Streams that failed to open or ended while the benchmark ran, and
    /// connections that ended meanwhile ([`crate::ends`] says why).
    pub unexpected_streams: usize,
    pub unexpected_connections: usize,
    pub connections_closed: usize,
    pub change_errors: usize,
}

/// The Service of `Get` stream `j` (0..4) of connection `c`.
fn service_of(c: usize, j: usize, services: usize) -> usize {
    if j < HOT || services <= HOT {
        j % services
    } else {
        HOT + (c * 2 + j - HOT) % (services - HOT)
    }
}

fn read_rss(pid: u32) -> anyhow::Result<Rss> {
    rss(pid).context("reading RSS")
}

/// Runs the stream phase against the destination at `addr` (pid `pid`).
pub async fn run(
    client: &kube::Client,
    fixtures: &mut Fixtures,
    addr: std::net::SocketAddr,
    pid: u32,
    connections: usize,
    changes: usize,
    perf: Option<(&Path, &str)>,
) -> anyhow::Result<StreamFigures> {
    let services = fixtures.layout.services;
    let per_connection = 4;
    let (events, mut events_rx) = mpsc::unbounded_channel::<(usize, Instant)>();
    let ready = Arc::new(AtomicUsize::new(0));
    // The streams of a build measured before this one ended at its
    // teardown, under the same keys (a change would wait for none).
    crate::ends::forget_keyed();
    crate::ends::phase("run", false);
    let unexpected_before = crate::ends::unexpected();

    // One warm target per Service, so that every Service's state exists.
    let warm_conns =
        proxy_client::connect(addr, (services * 2).div_ceil(WARM_PER_CONNECTION)).await?;
    for s in 0..services {
        open_target(
            &warm_conns[s * 2 / WARM_PER_CONNECTION],
            s,
            true,
            &events,
            &ready,
        );
    }
    let mut per_service = vec![1usize; services];
    wait_count(&ready, services * 2).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let warm = read_rss(pid)?;

    let mark = CpuMark::now(pid);
    let conns = proxy_client::connect(addr, connections).await?;
    let connect = mark.since();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let connected = read_rss(pid)?;

    let mark = CpuMark::now(pid);
    for (c, conn) in conns.iter().enumerate() {
        for j in 0..per_connection {
            let s = service_of(c, j, services);
            open_target(conn, s, true, &events, &ready);
            per_service[s] += 1;
        }
    }
    let streams = connections * per_connection;
    wait_count(&ready, (services + streams) * 2).await?;
    let open_cpu = mark.since();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let after = read_rss(pid)?;
    while events_rx.try_recv().is_ok() {}

    // Endpoint changes on the hot Services' first slices: one endpoint
    // not Ready, then Ready again.
    let slices_api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let (observer, mut seen_rx) = observe_versions(slices_api.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    while seen_rx.try_recv().is_ok() {}
    let idle = CpuMark::now(pid);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let idle = idle.since();
    let hot_slices: Vec<usize> = (0..HOT.min(services))
        .filter_map(|s| fixtures.slices.iter().position(|sl| sl.service == s))
        .collect();
    let mut fan_out = FanOut::default();
    let mut change_errors = 0;
    let recorder = perf.map(|(dir, label)| PerfRecord::start_with(Some(dir), label, pid, PERF_HOW));
    let during = CpuMark::now(pid);
    for k in 0..changes {
        let i = hot_slices[k % hot_slices.len()];
        let slice = &mut fixtures.slices[i];
        let p = (k / hot_slices.len()) / 2 % slice.members.len().max(1);
        slice.ready[p] = !slice.ready[p];
        let patch = json!({"endpoints": fixtures::slice_endpoints(slice, &fixtures.pods)});
        let t0 = Instant::now();
        let patched = match slices_api
            .patch(&slice.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(patched) => patched,
            Err(_) => {
                change_errors += 1;
                continue;
            }
        };
        let rv = patched.metadata.resource_version.unwrap_or_default();
        let s = slice.service;
        fan_out
            .record(k, t0, &rv, s, per_service[s], &mut events_rx, &mut seen_rx)
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let during = during.since();
    if let Some(recorder) = recorder {
        recorder.stop();
    }
    observer.abort();
    let connections_closed = warm_conns
        .iter()
        .chain(&conns)
        .filter(|c| c.is_closed())
        .count();
    let (streams_now, connections_now) = crate::ends::unexpected();
    let (unexpected_streams, unexpected_connections) = (
        streams_now - unexpected_before.0,
        connections_now - unexpected_before.1,
    );
    crate::ends::phase("teardown of the stream phase", true);
    drop((warm_conns, conns));
    let n = changes.max(1) as f64;
    let idle_rate = idle.0 / idle.2.max(1e-9);
    Ok(StreamFigures {
        memory: ConnectionMemory {
            warm,
            connected,
            after,
        },
        connections,
        streams,
        open: open_cpu,
        connect,
        per_change_ms: (
            during.0 * 1000.0 / n,
            (during.0 - idle_rate * during.2).max(0.0) * 1000.0 / n,
        ),
        fan_out,
        changes,
        unexpected_streams,
        unexpected_connections,
        connections_closed,
        change_errors,
    })
}

impl StreamFigures {
    pub fn print(&self) {
        self.memory.print(
            "destination",
            self.connections,
            self.streams,
            "Get stream (with its GetProfile)",
        );
        let cpu = |label: String, (server, client, wall): (f64, f64, f64)| {
            println!(
                "  {label}: server CPU {server:.2} s, client CPU {client:.2} s, {wall:.2} s wall"
            );
        };
        cpu(
            format!("opening {} connections", self.connections),
            self.connect,
        );
        cpu(
            format!("opening {} Get streams + GetProfiles", self.streams),
            self.open,
        );
        println!(
            "  per endpoint change ({} of {} changes timed, {HOT} hot Services × {} streams on {} connections): server CPU {:.1} ms ({:.1} ms less its idle rate)",
            self.fan_out.len(),
            self.changes,
            self.connections,
            self.connections,
            self.per_change_ms.0,
            self.per_change_ms.1,
        );
        self.fan_out.print("EndpointSlice");
        println!(
            "  streams that failed to open or ended early: {}; connections that ended: {}; connections closed: {}; change writes that failed: {}",
            self.unexpected_streams,
            self.unexpected_connections,
            self.connections_closed,
            self.change_errors
        );
        crate::ends::report();
    }
}
