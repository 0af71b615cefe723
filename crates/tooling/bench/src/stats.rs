//! Small helpers for benchmark figures: percentiles and process memory.

use std::time::Duration;

/// The `p`-th percentile (0–100) of `samples` (nearest rank).
pub fn percentile(samples: &[Duration], p: f64) -> Duration {
    if samples.is_empty() {
        return Duration::ZERO;
    }
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// A process's `/proc/<pid>/status`.
fn status(pid: u32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/status")).ok()
}

/// A memory field of a status (`VmRSS:` …, given in kB), in bytes.
fn field_bytes(status: &str, name: &str) -> Option<u64> {
    let kb: u64 = status
        .lines()
        .find(|l| l.starts_with(name))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb * 1024)
}

/// Resident memory of a process in bytes, from /proc.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    field_bytes(&status(pid)?, "VmRSS:")
}

/// The most resident memory a process has had (`VmHWM`: its high-water
/// mark, e.g. while it decoded its initial lists), in bytes.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    field_bytes(&status(pid)?, "VmHWM:")
}

/// A process's resident memory: all of it, and its anonymous part (heap,
/// stacks: what the process allocated, without mapped files).
#[derive(Clone, Copy, Debug, Default)]
pub struct Rss {
    pub total: u64,
    pub anon: u64,
}

/// Resident memory of a process, from /proc.
pub fn rss(pid: u32) -> Option<Rss> {
    let status = status(pid)?;
    Some(Rss {
        total: field_bytes(&status, "VmRSS:")?,
        anon: field_bytes(&status, "RssAnon:")?,
    })
}

/// CPU time (user + system) a process has used so far, in seconds, from
/// /proc (clock ticks: 10 ms resolution).
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    #[allow(unsafe_code)]
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    Some((utime + stime) as f64 / ticks.max(1) as f64)
}

/// CPU time of this process, in seconds.
pub fn own_cpu_seconds() -> f64 {
    cpu_seconds(std::process::id()).unwrap_or_default()
}

/// Milliseconds with two decimals.
pub fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let samples: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&samples, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&samples, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&samples, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&[], 50.0), Duration::ZERO);
    }

    #[test]
    fn own_figures_are_readable() {
        let me = std::process::id();
        let rss = rss(me).expect("rss");
        assert!(rss.total >= rss.anon && rss.anon > 0);
        // The high-water mark is never below what is resident now (read
        // after it, so that it includes the current figure).
        let peak = peak_rss_bytes(me).expect("peak");
        assert!(peak >= rss.total, "{peak} < {}", rss.total);
        assert!(cpu_seconds(me).expect("cpu") >= 0.0);
    }
}
