//! The standard Prometheus process metrics, under their usual names
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`,
//! `process_virtual_memory_bytes`, `process_virtual_memory_max_bytes`,
//! `process_open_fds`, `process_max_fds`, `process_start_time_seconds`,
//! `process_threads`, and Go's `go_threads`, the one Go runtime series
//! with an honest equivalent), read from `/proc/self` when scraped. Linkerd's
//! original controllers export them (Go's client library, kubert's process
//! collector) and its Grafana dashboards read them from every container of
//! the destination pod.
//!
//! CPU times in `/proc` are in the kernel's user-visible clock ticks,
//! `USER_HZ`, which Linux fixes at 100 for user space (as Prometheus' own
//! `procfs` library assumes); memory comes from `/proc/self/status` in kB,
//! which needs no page size.

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeMetric},
    metrics::{MetricType, counter::ConstCounter, gauge::ConstGauge},
    registry::{Registry, Unit},
};

/// `USER_HZ`: clock ticks per second in `/proc/<pid>/stat`.
const USER_HZ: f64 = 100.0;

/// What one read of `/proc` gives.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: f64,
    pub resident_bytes: f64,
    pub virtual_bytes: f64,
    /// `None`: unlimited.
    pub virtual_max_bytes: Option<f64>,
    pub open_fds: f64,
    /// `None`: unlimited.
    pub max_fds: Option<f64>,
    pub start_time_seconds: f64,
    pub threads: f64,
}

/// Why `/proc` could not be read (the scrape then has no process metrics).
#[derive(Debug, thiserror::Error)]
pub enum ProcError {
    #[error("reading {path}: {source}")]
    Read {
        path: &'static str,
        source: std::io::Error,
    },
    #[error("unexpected contents of {0}")]
    Format(&'static str),
}

fn read(path: &'static str) -> Result<String, ProcError> {
    std::fs::read_to_string(path).map_err(|source| ProcError::Read { path, source })
}

/// Parses `/proc/self/stat`: (utime + stime in ticks, starttime in ticks
/// since boot). The command name may hold spaces and parentheses, so the
/// fields are counted from its last `)`.
pub fn parse_stat(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state): utime is field 14, stime 15, starttime 22.
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some((field(14)? + field(15)?, field(22)?))
}

/// A `Key:   value kB` line of `/proc/self/status`, in bytes (or the bare
/// number for keys without a unit).
pub fn status_value(status: &str, key: &str) -> Option<f64> {
    let line = status.lines().find(|l| {
        l.strip_prefix(key)
            .is_some_and(|rest| rest.starts_with(':'))
    })?;
    let mut words = line[key.len() + 1..].split_whitespace();
    let n: f64 = words.next()?.parse().ok()?;
    Some(match words.next() {
        Some("kB") => n * 1024.0,
        _ => n,
    })
}

/// The soft limit of a `/proc/self/limits` row (`None` when unlimited).
pub fn limit(limits: &str, name: &str) -> Result<Option<f64>, ProcError> {
    let line = limits
        .lines()
        .find(|l| l.starts_with(name))
        .ok_or(ProcError::Format("/proc/self/limits"))?;
    match line[name.len()..].split_whitespace().next() {
        Some("unlimited") => Ok(None),
        Some(n) => n
            .parse()
            .map(Some)
            .map_err(|_| ProcError::Format("/proc/self/limits")),
        None => Err(ProcError::Format("/proc/self/limits")),
    }
}

/// Reads this process's statistics.
pub fn read_stats() -> Result<ProcessStats, ProcError> {
    let (ticks, start_ticks) =
        parse_stat(&read("/proc/self/stat")?).ok_or(ProcError::Format("/proc/self/stat"))?;
    let status = read("/proc/self/status")?;
    let status_field =
        |key| status_value(&status, key).ok_or(ProcError::Format("/proc/self/status"));
    let boot_time = read("/proc/stat")?
        .lines()
        .find_map(|l| l.strip_prefix("btime ")?.trim().parse::<f64>().ok())
        .ok_or(ProcError::Format("/proc/stat"))?;
    let limits = read("/proc/self/limits")?;
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .map_err(|source| ProcError::Read {
            path: "/proc/self/fd",
            source,
        })?
        .count();
    Ok(ProcessStats {
        cpu_seconds: ticks as f64 / USER_HZ,
        resident_bytes: status_field("VmRSS")?,
        virtual_bytes: status_field("VmSize")?,
        virtual_max_bytes: limit(&limits, "Max address space")?,
        open_fds: open_fds as f64,
        max_fds: limit(&limits, "Max open files")?,
        start_time_seconds: boot_time + start_ticks as f64 / USER_HZ,
        threads: status_field("Threads")?,
    })
}

/// The collector of the process metrics.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// Registers the process metrics at the top of `registry` (no prefix).
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let stats = match read_stats() {
            Ok(stats) => stats,
            Err(error) => {
                tracing::debug!(%error, "no process metrics in this scrape");
                return Ok(());
            }
        };
        ConstCounter::new(stats.cpu_seconds).encode(encoder.encode_descriptor(
            "process_cpu",
            "Total user and system CPU time spent in seconds",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?)?;
        // Unlimited limits are reported as the largest u64, as Go's
        // client library does.
        let unlimited = u64::MAX as f64;
        let gauges: [(&str, &str, Option<Unit>, f64); 8] = [
            (
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(Unit::Bytes),
                stats.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes",
                Some(Unit::Bytes),
                stats.virtual_bytes,
            ),
            (
                "process_virtual_memory_max",
                "Maximum amount of virtual memory available in bytes",
                Some(Unit::Bytes),
                stats.virtual_max_bytes.unwrap_or(unlimited),
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                None,
                stats.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                None,
                stats.max_fds.unwrap_or(unlimited),
            ),
            (
                "process_start_time",
                "Start time of the process since unix epoch in seconds",
                Some(Unit::Seconds),
                stats.start_time_seconds,
            ),
            (
                "process_threads",
                "Number of OS threads in the process",
                None,
                stats.threads,
            ),
            (
                "go_threads",
                "Number of OS threads created (Linkerd's Go name for it; the same value as process_threads)",
                None,
                stats.threads,
            ),
        ];
        for (name, help, unit, value) in gauges {
            ConstGauge::new(value).encode(encoder.encode_descriptor(
                name,
                help,
                unit.as_ref(),
                MetricType::Gauge,
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_files() {
        let stat = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 7 0 12345 1000000 300 18446744073709551615";
        assert_eq!(parse_stat(stat), Some((300, 12345)));
        assert_eq!(parse_stat("garbage"), None);
        let status = "Name:\tdestination\nVmSize:\t  20480 kB\nVmRSS:\t    1024 kB\nThreads:\t5\n";
        assert_eq!(status_value(status, "VmRSS"), Some(1024.0 * 1024.0));
        assert_eq!(status_value(status, "Threads"), Some(5.0));
        assert_eq!(status_value(status, "Vm"), None);
        let limits = "Limit                     Soft Limit           Hard Limit           Units\n\
                      Max open files            1024                 524288               files\n\
                      Max address space         unlimited            unlimited            bytes\n";
        assert_eq!(limit(limits, "Max open files").ok(), Some(Some(1024.0)));
        assert_eq!(limit(limits, "Max address space").ok(), Some(None));
    }

    /// The live values are plausible: this test process has used CPU,
    /// holds memory and descriptors, and started after boot and before now.
    #[test]
    fn reads_this_process() {
        let stats = read_stats().expect("/proc");
        assert!(stats.resident_bytes > 1e6, "{stats:?}");
        assert!(stats.virtual_bytes >= stats.resident_bytes, "{stats:?}");
        assert!(stats.open_fds >= 3.0, "{stats:?}");
        assert!(stats.threads >= 1.0, "{stats:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_secs_f64();
        assert!(
            stats.start_time_seconds <= now + 1.0
                && stats.start_time_seconds > now - 86_400.0 * 365.0,
            "{stats:?}"
        );
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for name in [
            "\nprocess_cpu_seconds_total ",
            "\nprocess_resident_memory_bytes ",
            "\nprocess_virtual_memory_bytes ",
            "\nprocess_virtual_memory_max_bytes ",
            "\nprocess_open_fds ",
            "\nprocess_max_fds ",
            "\nprocess_start_time_seconds ",
            "\nprocess_threads ",
        ] {
            assert!(text.contains(name), "{name:?} not in\n{text}");
        }
    }
}
