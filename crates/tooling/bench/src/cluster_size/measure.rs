//! One binary on one cluster: started after the fixtures exist, its CPU
//! when `/ready` first answers 200 (the initial list), its RSS and
//! anonymous RSS a settle time later (and its peak RSS until then), and
//! the CPU of a burst of pod readiness flips (each pod's status and its
//! EndpointSlice), measured until the process is quiet again.

use std::{
    path::PathBuf,
    time::{Duration, Instant},
};

use futures::{StreamExt, stream};
use k8s_openapi::api::{core::v1::Pod, discovery::v1::EndpointSlice};
use kube::{
    Api,
    api::{Patch, PatchParams},
};
use serde_json::json;

use super::fixtures::{self, Fixtures};
use crate::{
    common::Server,
    destination::NS,
    stats::{Rss, cpu_seconds, peak_rss_bytes, rss},
};

/// Which server a binary is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Destination,
    Policy,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Destination => "destination",
            Kind::Policy => "policy-controller",
        }
    }
}

/// Whose build a binary is: it says which flags start it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Meridian's `destination` or `policy-controller`.
    Meridian,
    /// Linkerd 2.20's own: the Go `controller` (run as `controller
    /// destination`) or the Rust `policy-controller`, started with the
    /// chart's arguments.
    Linkerd,
}

/// A binary to measure: `LABEL=PATH`, or a path (labelled by its
/// directory's name).
#[derive(Clone, Debug)]
pub struct Binary {
    pub label: String,
    pub path: PathBuf,
    pub flavor: Flavor,
}

impl std::str::FromStr for Binary {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (label, path) = match s.split_once('=') {
            Some((label, path)) => (label.to_string(), PathBuf::from(path)),
            None => {
                let path = PathBuf::from(s);
                let label = path
                    .parent()
                    .and_then(|d| d.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| s.to_string());
                (label, path)
            }
        };
        Ok(Binary {
            label,
            path,
            flavor: Flavor::Meridian,
        })
    }
}

/// The proxy's opaque ports by default (the chart's `proxy.opaquePorts`).
pub const OPAQUE_PORTS: &str = "25,587,3306,4444,5432,6379,9300,11211";
/// The chart's `destinationController.meshedHttp2ClientProtobuf`, as its
/// template hands it to the destination.
pub const MESHED_HTTP2_CLIENT_PARAMS: &str =
    r#"{"keep_alive":{"interval":{"seconds":10},"timeout":{"seconds":3},"while_idle":true}}"#;

/// Starts Meridian's `bin` as `kind` on `cluster`; its destination
/// following the policy controller at `policy` (the pod's shape), else with
/// its link down. (Linkerd's binaries: [`super::linkerd::start`].)
pub async fn start(
    cluster: &local_cluster::Cluster,
    kind: Kind,
    bin: &Binary,
    policy: Option<std::net::SocketAddr>,
) -> anyhow::Result<(Server, Duration)> {
    let mut extra = vec!["--audit-interval-secs=0".to_string()];
    let grpc_flag = match kind {
        Kind::Destination => {
            extra.push(format!(
                "--controller-namespace={}",
                fixtures::CONTROL_PLANE_NS
            ));
            extra.push(format!(
                "--meshed-http2-client-params={MESHED_HTTP2_CLIENT_PARAMS}"
            ));
            // Without a companion, a port where nothing listens: the link
            // stays down (as `/ready` reports, without gating it).
            let addr = match policy {
                Some(addr) => addr,
                None => crate::common::free_addr()?,
            };
            extra.push(format!("--policy-addr=http://{addr}"));
            "addr"
        }
        Kind::Policy => {
            extra.push(format!(
                "--control-plane-namespace={}",
                fixtures::CONTROL_PLANE_NS
            ));
            extra.push("--admission-controller-disabled".to_string());
            "grpc-addr"
        }
    };
    let started = Instant::now();
    let server = crate::common::start_server_at(cluster, &bin.path, grpc_flag, &extra).await?;
    Ok((server, started.elapsed()))
}

/// What a binary cost on one cluster, before any stream.
#[derive(Clone, Debug, Default)]
pub struct Idle {
    /// Wall time from spawn until `/ready` answered 200.
    pub ready_wall: Duration,
    /// Process CPU seconds then (the initial list).
    pub ready_cpu: f64,
    /// Process CPU seconds once it first went quiet after Ready (under 2 %
    /// of a CPU for two seconds): the initial lists read and indexed, also
    /// for a server whose `/ready` does not wait for them (Linkerd's policy
    /// controller answers 200 before its indexes are filled). `None` if it
    /// did not go quiet within two minutes.
    pub listed_cpu: Option<f64>,
    /// RSS `settle` after Ready.
    pub rss: Rss,
    /// The most RSS the process had until then (`VmHWM`): what the
    /// initial lists cost at their peak, which a memory limit must allow.
    pub peak_rss: u64,
    /// The heap in use then, as its `/metrics` says
    /// (`go_memstats_heap_inuse_bytes`: Go's heap for Linkerd's
    /// destination, jemalloc's active pages for Meridian's binaries), if
    /// it exports it.
    pub heap: Option<u64>,
    /// The meshed pods its index holds then, as its `/metrics` says
    /// (`policy_inbound_index_pods`, Meridian's policy controller only): a
    /// smaller settled size is only a figure if nothing is missing.
    pub indexed_pods: Option<u64>,
    pub settle: Duration,
}

/// CPU of `server` now and its Ready figures once `settle` passed.
pub async fn idle(server: &Server, ready_wall: Duration, settle: Duration) -> anyhow::Result<Idle> {
    let pid = server.pid;
    let ready_cpu = cpu_seconds(pid).unwrap_or_default();
    let listed_cpu = wait_quiet(pid, 0.0, Duration::from_secs(120))
        .await
        .then(|| cpu_seconds(pid).unwrap_or_default());
    tokio::time::sleep(settle).await;
    let rss = rss(pid).ok_or_else(|| anyhow::anyhow!("no RSS for pid {pid}"))?;
    let peak_rss = peak_rss_bytes(pid).unwrap_or_default();
    let page = match local_cluster::probe::http_get(server.admin, "/metrics").await {
        Ok((200, body)) => body,
        _ => String::new(),
    };
    let heap = metric_value(&page, "go_memstats_heap_inuse_bytes").map(|v| v as u64);
    let indexed_pods = metric_value(&page, "policy_inbound_index_pods").map(|v| v as u64);
    Ok(Idle {
        ready_wall,
        ready_cpu,
        listed_cpu,
        rss,
        peak_rss,
        heap,
        indexed_pods,
        settle,
    })
}

/// The value of the unlabelled series `name` in a Prometheus text page.
fn metric_value(page: &str, name: &str) -> Option<f64> {
    page.lines().find_map(|line| {
        let rest = line.strip_prefix(name)?.strip_prefix(' ')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// One burst of readiness flips and what it cost the server.
#[derive(Clone, Debug, Default)]
pub struct Burst {
    pub flips: usize,
    pub ready: bool,
    /// API writes made and those that failed (counted, not retried).
    pub writes: usize,
    pub errors: usize,
    /// Server CPU seconds from the first write until quiet.
    pub cpu: f64,
    /// The server's idle CPU rate before the burst (CPU s per s).
    pub idle_rate: f64,
    /// Wall seconds from the first write until quiet; of which writing.
    pub wall: f64,
    pub writing: f64,
    /// Whether the server went quiet within the bound.
    pub quiet: bool,
}

impl Burst {
    /// Server CPU per flip, ms: as measured, and less the idle rate.
    pub fn per_flip_ms(&self) -> (f64, f64) {
        let n = self.flips.max(1) as f64;
        (
            self.cpu * 1000.0 / n,
            (self.cpu - self.idle_rate * self.wall).max(0.0) * 1000.0 / n,
        )
    }

    pub fn print(&self, indent: &str) {
        let (raw, net) = self.per_flip_ms();
        println!(
            "{indent}{} readiness flips → {}: server CPU {:.3} s = {raw:.2} ms per flip ({net:.2} ms less its idle {:.1} ms/s); {} writes in {:.1} s, quiet {} s after the first; write errors {}",
            self.flips,
            if self.ready { "Ready" } else { "not Ready" },
            self.cpu,
            self.idle_rate * 1000.0,
            self.writes,
            self.writing,
            if self.quiet {
                format!("{:.1}", self.wall)
            } else {
                format!("NOT QUIET after {:.1}", self.wall)
            },
            self.errors,
        );
    }
}

/// The pods a burst flips: `n` spread evenly over the cluster, grouped
/// by EndpointSlice (slice index, positions of the flipped members).
fn chosen(fixtures: &Fixtures, n: usize) -> Vec<(usize, Vec<usize>)> {
    let total = fixtures.pods.len();
    let n = n.min(total);
    let picked: std::collections::HashSet<usize> = (0..n).map(|i| i * total / n.max(1)).collect();
    fixtures
        .slices
        .iter()
        .enumerate()
        .filter_map(|(i, slice)| {
            let positions: Vec<usize> = slice
                .members
                .iter()
                .enumerate()
                .filter(|(_, k)| picked.contains(k))
                .map(|(p, _)| p)
                .collect();
            (!positions.is_empty()).then_some((i, positions))
        })
        .collect()
}

/// CPU rate of `pid` over `window` (CPU s per s).
async fn cpu_rate(pid: u32, window: Duration) -> f64 {
    let before = cpu_seconds(pid).unwrap_or_default();
    tokio::time::sleep(window).await;
    (cpu_seconds(pid).unwrap_or_default() - before) / window.as_secs_f64()
}

/// Waits until `pid` used under 2% of a CPU for two consecutive seconds
/// (at most `bound`); returns whether it did.
pub async fn wait_quiet(pid: u32, idle_rate: f64, bound: Duration) -> bool {
    let deadline = Instant::now() + bound;
    let threshold = (idle_rate * 1.5).max(0.02);
    let mut calm = 0;
    while Instant::now() < deadline {
        if cpu_rate(pid, Duration::from_secs(1)).await <= threshold {
            calm += 1;
            if calm == 2 {
                return true;
            }
        } else {
            calm = 0;
        }
    }
    false
}

/// Flips `flips` pods to `ready` (their status, then their slice: slices
/// in parallel, each slice's pods in turn, as the EndpointSlice controller
/// would follow them) and measures `pid` until quiet.
pub async fn burst(
    client: &kube::Client,
    fixtures: &mut Fixtures,
    flips: usize,
    ready: bool,
    pid: u32,
) -> Burst {
    let idle_rate = cpu_rate(pid, Duration::from_secs(2)).await;
    let groups = chosen(fixtures, flips);
    let pods_api: Api<Pod> = Api::namespaced(client.clone(), NS);
    let slices_api: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let cpu0 = cpu_seconds(pid).unwrap_or_default();
    let t0 = Instant::now();
    let fx: &Fixtures = fixtures;
    let results: Vec<(usize, Vec<bool>, usize, usize)> = stream::iter(groups)
        .map(|(i, positions)| {
            let (pods_api, slices_api) = (pods_api.clone(), slices_api.clone());
            async move {
                let mut slice = fx.slices[i].clone();
                let (mut writes, mut errors) = (0, 0);
                for p in positions {
                    let pod = &fx.pods[slice.members[p]];
                    let status = fixtures::pod_status(
                        slice.members[p],
                        &pod.ip,
                        &fixtures::host_ip(pod),
                        ready,
                    );
                    writes += 1;
                    if pods_api
                        .patch_status(&pod.name, &PatchParams::default(), &Patch::Merge(status))
                        .await
                        .is_err()
                    {
                        errors += 1;
                    }
                    slice.ready[p] = ready;
                    let patch = json!({"endpoints": fixtures::slice_endpoints(&slice, &fx.pods)});
                    writes += 1;
                    if slices_api
                        .patch(&slice.name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .is_err()
                    {
                        errors += 1;
                    }
                }
                (i, slice.ready, writes, errors)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let writing = t0.elapsed().as_secs_f64();
    let mut out = Burst {
        flips: 0,
        ready,
        idle_rate,
        writing,
        ..Default::default()
    };
    for (i, states, writes, errors) in results {
        out.flips += writes / 2;
        out.writes += writes;
        out.errors += errors;
        fixtures.slices[i].ready = states;
    }
    out.quiet = wait_quiet(pid, idle_rate, Duration::from_secs(120)).await;
    out.cpu = cpu_seconds(pid).unwrap_or_default() - cpu0;
    out.wall = t0.elapsed().as_secs_f64();
    out
}

#[cfg(test)]
mod tests {
    use super::metric_value;

    #[test]
    fn metric_value_reads_the_unlabelled_series_only() {
        let page = "# HELP go_memstats_heap_inuse_bytes x\n\
                    go_memstats_heap_inuse_bytes_total 7\n\
                    go_memstats_heap_inuse_bytes 1.2345e+07\n";
        assert_eq!(
            metric_value(page, "go_memstats_heap_inuse_bytes"),
            Some(12_345_000.0)
        );
        assert_eq!(metric_value(page, "go_goroutines"), None);
    }
}
