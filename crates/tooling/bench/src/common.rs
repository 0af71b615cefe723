//! What every benchmark needs: waiting for the server under test, CPU
//! pinning, fan-out latencies, memory and CPU figures. (The streaming
//! client is [`crate::proxy_client`].)

use std::{
    net::SocketAddr,
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use anyhow::bail;

/// Waits until `counter` reaches `want` (streams that received their
/// snapshot); after 300 s prints why streams and connections ended so far
/// and fails.
pub async fn wait_count(counter: &AtomicUsize, want: usize) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(300);
    while counter.load(Ordering::Relaxed) < want {
        if Instant::now() > deadline {
            // Why the others ended, if they did, before giving up: a stream
            // that never got its snapshot is not hidden behind the error.
            crate::ends::report();
            bail!(
                "only {}/{want} streams received their snapshot",
                counter.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

pub async fn wait_ready(what: &str, admin: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        if let Ok((200, _)) = local_cluster::probe::http_get(admin, "/ready").await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    bail!("{what} not ready after 120s")
}

/// A free port for a server under test, on [`SERVERS_IP`]: between picking
/// it and the server binding it, an outgoing connection of the benchmark,
/// the API server or etcd could take the same port on 127.0.0.1 (where
/// their source ports are), and the server would not start.
pub fn free_addr() -> anyhow::Result<SocketAddr> {
    free_addr_on(SERVERS_IP)
}

/// The loopback address the servers under test listen on. Connections to it
/// leave from 127.0.0.1 (the kernel's source for all of 127.0.0.0/8), so no
/// outgoing connection takes a port here. The soak's and the failover
/// bench's replicas have addresses of their own in 127.0.1.0/24.
pub const SERVERS_IP: std::net::Ipv4Addr = std::net::Ipv4Addr::new(127, 0, 0, 2);

/// A port free on loopback address `ip` (any of 127.0.0.0/8). A server
/// that listens on an address of its own, as a pod does on its IP, cannot
/// lose its port to another process's outgoing connection (those take
/// ephemeral ports on 127.0.0.1) while it is down for a restart.
pub fn free_addr_on(ip: std::net::Ipv4Addr) -> anyhow::Result<SocketAddr> {
    Ok(std::net::TcpListener::bind((ip, 0))?.local_addr()?)
}

/// Watches `api` and reports when each resourceVersion became visible to
/// watchers (to tell the apiserver's share of a latency from ours).
pub fn observe_versions<K>(
    api: kube::Api<K>,
) -> (
    tokio::task::JoinHandle<()>,
    tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>,
)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let (seen_tx, seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()).applied_objects());
        while let Some(Ok(obj)) = events.next().await {
            let rv = obj.meta().resource_version.clone().unwrap_or_default();
            if seen_tx.send((rv, Instant::now())).is_err() {
                return;
            }
        }
    });
    (task, seen_rx)
}

/// Fan-out latencies of a series of writes: until the first and until
/// every subscribed stream got the update, from the write and from when
/// watchers saw it.
#[derive(Default)]
pub struct FanOut {
    from_write: Vec<Duration>,
    first_from_write: Vec<Duration>,
    first_to_last: Vec<Duration>,
    from_watch: Vec<Duration>,
    first_from_watch: Vec<Duration>,
    /// Updates an open stream should have had and did not get within 30 s.
    missed: usize,
}

/// Waits for `expected` arrivals tagged `key` (after write `k`, made at
/// `t0`), less the streams of `key` that ended meanwhile (counted in
/// [`crate::ends`]); returns the first and the last arrival, or `None` if
/// none came, and how many open streams missed the update (no arrival
/// within 30 s; printed).
pub async fn arrivals(
    k: usize,
    t0: Instant,
    key: usize,
    expected: usize,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<(usize, Instant)>,
) -> (Option<(Instant, Instant)>, usize) {
    let mut count = 0usize;
    let mut last = t0;
    let mut first: Option<Instant> = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let open = || expected.saturating_sub(crate::ends::keyed_stream_ends(key));
    while count < open() {
        let wait = deadline.min(tokio::time::Instant::now() + Duration::from_millis(200));
        match tokio::time::timeout_at(wait, events.recv()).await {
            Ok(Some((got, at))) if got == key => {
                count += 1;
                last = last.max(at);
                first = Some(first.map_or(at, |f| f.min(at)));
            }
            Ok(Some(_)) => {}
            Ok(None) => break,
            Err(_) if tokio::time::Instant::now() >= deadline => break,
            Err(_) => {}
        }
    }
    let missed = open().saturating_sub(count);
    if missed > 0 {
        println!(
            "  MISSED: change {k}: {missed} of {} open streams got no update within 30 s",
            open()
        );
    }
    (first.map(|first| (first, last)), missed)
}

impl FanOut {
    /// After write `k` (made at `t0`, producing resourceVersion `rv`),
    /// waits for `expected` arrivals tagged `key` and for our own watch to
    /// see `rv`, then records the latencies.
    #[allow(clippy::too_many_arguments)]
    pub async fn record(
        &mut self,
        k: usize,
        t0: Instant,
        rv: &str,
        key: usize,
        expected: usize,
        events: &mut tokio::sync::mpsc::UnboundedReceiver<(usize, Instant)>,
        seen: &mut tokio::sync::mpsc::UnboundedReceiver<(String, Instant)>,
    ) -> anyhow::Result<()> {
        let (arrived, missed) = arrivals(k, t0, key, expected, events).await;
        self.missed += missed;
        let Some((first, last)) = arrived else {
            return Ok(());
        };
        let visible = loop {
            match tokio::time::timeout(Duration::from_secs(30), seen.recv()).await {
                Ok(Some((seen_rv, at))) if seen_rv == rv => break at,
                Ok(Some(_)) => {}
                _ => bail!("change {k}: our own watch never saw resourceVersion {rv}"),
            }
        };
        self.record_arrivals(t0, first, last);
        self.from_watch
            .push(last.saturating_duration_since(visible));
        self.first_from_watch
            .push(first.saturating_duration_since(visible));
        Ok(())
    }

    /// Records a write at `t0` whose first and last arrivals are given
    /// (without a watch: the trivial server's baseline).
    pub fn record_arrivals(&mut self, t0: Instant, first: Instant, last: Instant) {
        self.from_write.push(last - t0);
        self.first_from_write
            .push(first.saturating_duration_since(t0));
        self.first_to_last
            .push(last.saturating_duration_since(first));
    }

    /// Records a write whose arrivals are `arrived` (first and last, if
    /// any) and `missed` (without a watch: the trivial server's baseline).
    pub fn record_outcome(
        &mut self,
        t0: Instant,
        arrived: Option<(Instant, Instant)>,
        missed: usize,
    ) {
        self.missed += missed;
        if let Some((first, last)) = arrived {
            self.record_arrivals(t0, first, last);
        }
    }

    /// The `q`-th percentile of write → last stream.
    pub fn last_from_write(&self, q: f64) -> Duration {
        crate::stats::percentile(&self.from_write, q)
    }

    /// Updates that open streams missed (no arrival within 30 s).
    pub fn missed(&self) -> usize {
        self.missed
    }

    /// Prints the figures; `write` names what was written.
    pub fn print(&self, write: &str) {
        use crate::stats::{ms, percentile};
        let p = |v: &[Duration], q: f64| ms(percentile(v, q));
        println!(
            "    missed updates (an open stream without the update within 30 s): {}{}",
            self.missed,
            if self.missed > 0 {
                " — UPDATES MISSED"
            } else {
                ""
            }
        );
        let label = format!("from the {write} write:");
        println!(
            "    {label:<34} first stream p50 {}, p99 {}; last stream p50 {}, p99 {}, max {} (target p99 ≤ 50 ms)",
            p(&self.first_from_write, 50.0),
            p(&self.first_from_write, 99.0),
            p(&self.from_write, 50.0),
            p(&self.from_write, 99.0),
            p(&self.from_write, 100.0)
        );
        println!(
            "    first → last stream:               p50 {}, p99 {}, max {} (target ≤ 25 ms)",
            p(&self.first_to_last, 50.0),
            p(&self.first_to_last, 99.0),
            p(&self.first_to_last, 100.0)
        );
        if self.from_watch.is_empty() {
            return;
        }
        println!(
            "    from the change reaching watchers: last stream p50 {}, p90 {}, p99 {}, max {}",
            p(&self.from_watch, 50.0),
            p(&self.from_watch, 90.0),
            p(&self.from_watch, 99.0),
            p(&self.from_watch, 100.0)
        );
        println!(
            "    first stream, from watchers:       p50 {}, p99 {}",
            p(&self.first_from_watch, 50.0),
            p(&self.first_from_watch, 99.0),
        );
    }

    /// How many writes were measured.
    pub fn len(&self) -> usize {
        self.from_write.len()
    }

    /// Each write's time until every stream had it.
    pub fn since_write(&self) -> &[Duration] {
        &self.from_write
    }

    /// Each write's time from the change reaching watchers until every
    /// stream had it (Meridian's share).
    pub fn since_watch(&self) -> &[Duration] {
        &self.from_watch
    }
}

/// Installs the CRDs of `deploy/crds/` into the benchmark's cluster.
pub fn install_crds(cluster: &local_cluster::Cluster) -> anyhow::Result<()> {
    let crds = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy/crds");
    local_cluster::kubectl::install_crds(
        &cluster.binaries().kubectl(),
        cluster.kubeconfig_path(),
        &crds,
    )?;
    Ok(())
}

/// A fresh local control plane for a benchmark, with the CRDs installed.
pub async fn start_cluster(
    work_dir: &std::path::Path,
) -> anyhow::Result<(local_cluster::Cluster, kube::Client)> {
    use local_cluster::{Cluster, ClusterOptions, Lifetime};
    let cluster = Cluster::start(ClusterOptions::new(work_dir, Lifetime::Tied)).await?;
    let client = cluster.client()?;
    install_crds(&cluster)?;
    Ok((cluster, client))
}

/// Which CPUs the server under test and this benchmark client run on,
/// when the machine has at least two: the server on the first allowed CPU,
/// the client on the last (set once by [`pin`]).
static PINNING: std::sync::OnceLock<Option<(usize, usize)>> = std::sync::OnceLock::new();

/// The CPUs this process may run on (`taskset -p`'s list, expanded).
fn allowed_cpus() -> Vec<usize> {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return Vec::new();
    };
    let Some(list) = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
    else {
        return Vec::new();
    };
    let mut cpus = Vec::new();
    for part in list.trim().split(',') {
        let mut ends = part
            .split('-')
            .filter_map(|n| n.trim().parse::<usize>().ok());
        if let Some(first) = ends.next() {
            let last = ends.next().unwrap_or(first);
            cpus.extend(first..=last);
        }
    }
    cpus
}

/// Pins this process's threads (the benchmark client) to one CPU and
/// remembers another for the server under test, if `enabled` and the
/// machine allows (two CPUs or more); prints which. Call it after the
/// local control plane started (its processes stay unpinned) and before
/// [`start_server`]. Threads created later inherit the client's CPU.
pub fn pin(enabled: bool) {
    let cpus = allowed_cpus();
    let choice = match (enabled, cpus.first(), cpus.last()) {
        (true, Some(&server), Some(&client)) if server != client => {
            let pinned = std::process::Command::new("taskset")
                .args(["-a", "-p", "-c", &client.to_string()])
                .arg(std::process::id().to_string())
                .stdout(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            pinned.then_some((server, client))
        }
        _ => None,
    };
    let _ = PINNING.set(choice);
    match choice {
        Some((server, client)) => println!(
            "  pinned (taskset): server under test on CPU {server}, benchmark client on CPU {client}; kube-apiserver and etcd unpinned (CPUs {cpus:?})"
        ),
        None => println!("  not pinned (CPUs allowed: {cpus:?})"),
    }
}

/// The (server, client) CPUs chosen by [`pin`], if it pinned.
pub fn pinned_cpus() -> Option<(usize, usize)> {
    PINNING.get().copied().flatten()
}

/// The program and arguments that run `bin` with `args` on the server's
/// CPU (through `taskset`), or as they are when not pinned.
pub fn server_command(
    bin: &std::path::Path,
    args: Vec<String>,
) -> (std::path::PathBuf, Vec<String>) {
    match pinned_cpus() {
        Some((server, _)) => {
            let mut wrapped = vec!["-c".to_string(), server.to_string()];
            wrapped.push(bin.display().to_string());
            wrapped.extend(args);
            ("taskset".into(), wrapped)
        }
        None => (bin.to_path_buf(), args),
    }
}

/// The server under test: `bin` with a kubeconfig for `cluster`, its gRPC
/// and admin addresses (`--<grpc_flag>`, `--admin-addr`), quiet logs and
/// `extra` flags; returned once `/ready`, with its pid and gRPC address.
pub async fn start_server(
    cluster: &local_cluster::Cluster,
    bin: &std::path::Path,
    grpc_flag: &str,
    extra: &[String],
) -> anyhow::Result<(local_cluster::ManagedProcess, u32, SocketAddr)> {
    let server = start_server_at(cluster, bin, grpc_flag, extra).await?;
    Ok((server.process, server.pid, server.grpc))
}

/// A server under test, as [`start_server_at`] started it.
pub struct Server {
    pub process: local_cluster::ManagedProcess,
    pub pid: u32,
    pub grpc: SocketAddr,
    pub admin: SocketAddr,
    /// The policy controller's workload-ports feed (the destination's
    /// `--policy-addr`).
    pub workload_ports: Option<SocketAddr>,
    /// Its log file (warnings and errors).
    pub log: std::path::PathBuf,
}

/// [`start_server`], returning the admin address and log file too.
pub async fn start_server_at(
    cluster: &local_cluster::Cluster,
    bin: &std::path::Path,
    grpc_flag: &str,
    extra: &[String],
) -> anyhow::Result<Server> {
    let name = bin
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "server".into());
    let grpc_addr = free_addr()?;
    let admin_addr = free_addr()?;
    let mut args = vec![
        format!("--kubeconfig={}", cluster.kubeconfig_path().display()),
        format!("--{grpc_flag}={grpc_addr}"),
        format!("--admin-addr={admin_addr}"),
        "--log-level=warn".to_string(),
    ];
    args.extend(extra.iter().cloned());
    // Localhost listeners on free ports, not the fixed defaults: servers
    // of other runs on this machine may hold those. (Builds from before
    // these flags, compared by some benchmarks, do not take them.)
    let help = supported_flags(bin);
    let wanted = |flag: &str| {
        help.contains(&format!("--{flag}"))
            && !extra.iter().any(|a| a.starts_with(&format!("--{flag}")))
    };
    if wanted("introspection-addr") {
        args.push(format!("--introspection-addr={}", free_addr()?));
    }
    let mut workload_ports = None;
    if wanted("workload-ports-addr") {
        let addr = free_addr()?;
        args.push(format!("--workload-ports-addr={addr}"));
        workload_ports = Some(addr);
    }
    let mut server = spawn_server(cluster, &name, bin, args, &[], (grpc_addr, admin_addr)).await?;
    server.workload_ports = workload_ports;
    Ok(server)
}

/// Spawns `bin` with exactly `args` and `env` added (on the server's CPU
/// when pinned), its output into the cluster's work dir, and returns it
/// once `/ready` on its admin address answers 200. For servers whose flags
/// [`start_server_at`] does not know, such as Linkerd's own binaries.
pub async fn spawn_server(
    cluster: &local_cluster::Cluster,
    name: &str,
    bin: &std::path::Path,
    args: Vec<String>,
    env: &[(String, String)],
    (grpc, admin): (SocketAddr, SocketAddr),
) -> anyhow::Result<Server> {
    let log = cluster.work_dir().join(format!("{name}.log"));
    let (program, args) = server_command(bin, args);
    let process = local_cluster::ManagedProcess::spawn_with_env(
        name,
        &program,
        &args,
        env,
        &log,
        local_cluster::Lifetime::Tied,
    )?;
    wait_ready(name, admin).await?;
    let pid = process
        .pid()
        .ok_or_else(|| anyhow::anyhow!("{name} has no pid"))?;
    Ok(Server {
        process,
        pid,
        grpc,
        admin,
        workload_ports: None,
        log,
    })
}

/// The long flags `bin --help` declares (none if it cannot be run): only
/// the options' own lines count, not flags named in another's description.
pub fn supported_flags(bin: &std::path::Path) -> std::collections::BTreeSet<String> {
    let help = std::process::Command::new(bin)
        .arg("--help")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).into_owned())
        .unwrap_or_default();
    declared_flags(&help)
}

/// The long flags declared in a clap `--help` text: each option's line
/// starts (after indentation and an optional `-x, `) with `--flag`.
fn declared_flags(help: &str) -> std::collections::BTreeSet<String> {
    help.lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = match line.as_bytes() {
                [b'-', short, b',', b' ', ..] if *short != b'-' => &line[4..],
                _ => line,
            };
            let flag = line.strip_prefix("--")?;
            let end = flag
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .unwrap_or(flag.len());
            (end > 0).then(|| format!("--{}", &flag[..end]))
        })
        .collect()
}

/// Prints the memory figures of a streaming benchmark: the server's RSS
/// with the warm streams, with `streams` more, and the marginal bytes per
/// stream against the 4 KiB target.
pub fn print_memory(
    server: &str,
    open_time: Duration,
    warm: usize,
    before: u64,
    streams: usize,
    after: u64,
) {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    println!("  streams opened in {:.2}s", open_time.as_secs_f64());
    println!(
        "  {server} RSS with {warm} warm streams: {:.1} MiB",
        mib(before)
    );
    println!(
        "  {server} RSS with {streams} more streams: {:.1} MiB",
        mib(after)
    );
    println!(
        "  marginal memory per stream: {} bytes (target ≤ 4096)",
        after.saturating_sub(before) / streams.max(1) as u64
    );
}

/// Memory of a proxy-shaped streaming benchmark: the server's RSS (and its
/// anonymous part) with the warm streams, after the connections opened
/// (no streams yet), and after every connection opened its streams.
pub struct ConnectionMemory {
    pub warm: crate::stats::Rss,
    pub connected: crate::stats::Rss,
    pub after: crate::stats::Rss,
}

impl ConnectionMemory {
    /// Prints the totals, the bytes per idle connection, per stream and per
    /// connection with its streams (`per_connection` streams of `what`,
    /// e.g. "Get stream (with its GetProfile)").
    pub fn print(&self, server: &str, connections: usize, streams: usize, what: &str) {
        let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
        let per = |a: u64, b: u64, n: usize| a.saturating_sub(b) / n.max(1) as u64;
        println!(
            "  {server} RSS (anonymous): {:.1} MiB ({:.1}) warm; {:.1} MiB ({:.1}) with {connections} idle connections; {:.1} MiB ({:.1}) with their {streams} streams",
            mib(self.warm.total),
            mib(self.warm.anon),
            mib(self.connected.total),
            mib(self.connected.anon),
            mib(self.after.total),
            mib(self.after.anon),
        );
        println!(
            "    per idle connection: {} bytes ({} anonymous)",
            per(self.connected.total, self.warm.total, connections),
            per(self.connected.anon, self.warm.anon, connections),
        );
        println!(
            "    per {what}: {} bytes ({} anonymous) (target ≤ 3072)",
            per(self.after.total, self.connected.total, streams),
            per(self.after.anon, self.connected.anon, streams),
        );
        println!(
            "    per connection with its {} streams: {} bytes ({} anonymous) (target ≤ 12288)",
            streams / connections.max(1),
            per(self.after.total, self.warm.total, connections),
            per(self.after.anon, self.warm.anon, connections),
        );
    }

    /// RSS bytes per stream, with its connection already open (each
    /// stream with whatever it is paired with, e.g. its `GetProfile`).
    pub fn per_stream(&self, streams: usize) -> u64 {
        self.after.total.saturating_sub(self.connected.total) / streams.max(1) as u64
    }

    /// RSS bytes per idle connection.
    pub fn per_connection(&self, connections: usize) -> u64 {
        self.connected.total.saturating_sub(self.warm.total) / connections.max(1) as u64
    }
}

/// CPU seconds used by a process and by this benchmark client since
/// [`CpuMark::now`].
pub struct CpuMark {
    pid: u32,
    server: f64,
    client: f64,
    at: Instant,
}

impl CpuMark {
    pub fn now(pid: u32) -> Self {
        Self {
            pid,
            server: crate::stats::cpu_seconds(pid).unwrap_or_default(),
            client: crate::stats::own_cpu_seconds(),
            at: Instant::now(),
        }
    }

    /// (server CPU s, client CPU s, wall s) since the mark.
    pub fn since(&self) -> (f64, f64, f64) {
        (
            crate::stats::cpu_seconds(self.pid).unwrap_or_default() - self.server,
            crate::stats::own_cpu_seconds() - self.client,
            self.at.elapsed().as_secs_f64(),
        )
    }
}

/// A `perf record` of a process during one phase of a benchmark (when the
/// benchmark was given a directory for profiles); stopped by [`Self::stop`].
pub struct PerfRecord(Option<std::process::Child>);

impl PerfRecord {
    /// Starts `perf record -g -p pid -o dir/name.data` if `dir` is given.
    pub fn start(dir: Option<&std::path::Path>, name: &str, pid: u32) -> Self {
        Self::start_with(dir, name, pid, &["-F", "1999", "-g"])
    }

    /// Starts `perf record <how> -p pid -o dir/name.data` if `dir` is
    /// given (`how`: the event, frequency and call-graph flags).
    pub fn start_with(dir: Option<&std::path::Path>, name: &str, pid: u32, how: &[&str]) -> Self {
        let Some(dir) = dir else {
            return Self(None);
        };
        let _ = std::fs::create_dir_all(dir);
        let out = dir.join(format!("{name}.data"));
        let child = std::process::Command::new("perf")
            .arg("record")
            .args(how)
            .args(["-p", &pid.to_string(), "-o"])
            .arg(&out)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match child {
            Ok(child) => {
                println!("  perf record of {name} → {}", out.display());
                // perf needs a moment to attach.
                std::thread::sleep(Duration::from_millis(300));
                Self(Some(child))
            }
            Err(error) => {
                println!("  perf record of {name} not started: {error}");
                Self(None)
            }
        }
    }

    /// Stops the recording (SIGINT, so that perf writes its file).
    pub fn stop(mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = std::process::Command::new("kill")
                .args(["-INT", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_declared_flags_count() {
        let help = "Usage: destination [OPTIONS]\n\nOptions:\n      --policy-addr <POLICY_ADDR>\n          The policy controller's feed (its --workload-ports-addr)\n  -h, --help\n          Print help\n      --introspection-addr <ADDR>\n";
        let flags = super::declared_flags(help);
        assert!(flags.contains("--policy-addr"));
        assert!(flags.contains("--introspection-addr"));
        assert!(flags.contains("--help"));
        assert!(!flags.contains("--workload-ports-addr"), "{flags:?}");
    }
}
