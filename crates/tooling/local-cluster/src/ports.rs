//! Free loopback ports for the processes a run starts (etcd, the API
//! server, a kubelet, the binaries under test).
//!
//! A port is picked by binding it and letting it go, and the process that
//! is handed it binds it a moment later. The kernel's own pick (`bind` to
//! port 0) comes from the ephemeral range, the same range every outgoing
//! connection takes its source port from, so in that moment a client of
//! another test (a kube client, etcd's own connections) could take the
//! port and the process would fail with "address already in use". Ports
//! here come from below the ephemeral range and below Kubernetes' NodePort
//! range, where no connection's source port lands; a port handed out once
//! in this process is not handed out again, so two parallel tests never
//! get the same one.

use std::{
    collections::HashSet,
    hash::{BuildHasher, RandomState},
    io,
    net::{Ipv4Addr, TcpListener},
    ops::Range,
    sync::{Mutex, OnceLock},
};

/// Where picks start: above the well-known and most registered services'
/// ports.
const LOWEST: u16 = 10_000;
/// Kubernetes' default NodePort range starts here (a real node's kube-proxy
/// may hold those ports), and the kernel's ephemeral range starts above it
/// unless configured lower.
const NODE_PORTS: u16 = 30_000;
/// Where the kernel's ephemeral range starts when it cannot be read.
const EPHEMERAL_DEFAULT: u16 = 32_768;

/// A port free on 127.0.0.1 now, outside the ephemeral range, not handed out
/// before by this process. Falls back to the kernel's pick only if every
/// port of the range is taken.
pub fn free_port() -> io::Result<u16> {
    let end = NODE_PORTS.min(ephemeral_start());
    let mut handed = handed_out().lock().unwrap_or_else(|e| e.into_inner());
    let start = RandomState::new().hash_one(std::process::id());
    let free = |port| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok();
    let port = match pick(LOWEST..end, start, &handed, free) {
        Some(port) => port,
        None => TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
            .local_addr()?
            .port(),
    };
    handed.insert(port);
    Ok(port)
}

/// The first port of `range`, walking from `start` (modulo its length) and
/// wrapping, that was not handed out and is `free`.
fn pick(
    range: Range<u16>,
    start: u64,
    handed: &HashSet<u16>,
    free: impl Fn(u16) -> bool,
) -> Option<u16> {
    let span = u64::from(range.end.saturating_sub(range.start));
    (0..span)
        .map(|step| range.start + ((start + step) % span) as u16)
        .find(|port| !handed.contains(port) && free(*port))
}

fn handed_out() -> &'static Mutex<HashSet<u16>> {
    static HANDED: OnceLock<Mutex<HashSet<u16>>> = OnceLock::new();
    HANDED.get_or_init(Default::default)
}

/// The first port of the kernel's ephemeral range (Linux:
/// `net.ipv4.ip_local_port_range`).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| parse_range_start(&range))
        .unwrap_or(EPHEMERAL_DEFAULT)
}

fn parse_range_start(range: &str) -> Option<u16> {
    range.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_are_below_the_ephemeral_range_and_never_repeat() {
        let low = ephemeral_start().min(NODE_PORTS);
        let picks: Vec<u16> = (0..200)
            .map(|_| free_port().expect("a free port"))
            .collect();
        let distinct: HashSet<u16> = picks.iter().copied().collect();
        assert_eq!(distinct.len(), picks.len(), "a port handed out twice");
        assert!(
            picks.iter().all(|&p| (LOWEST..low).contains(&p)),
            "{picks:?}"
        );
    }

    #[test]
    fn the_walk_skips_ports_handed_out_or_in_use_and_wraps() {
        let handed = HashSet::from([103]);
        let free = |port| port != 104 && port != 100;
        assert_eq!(pick(100..105, 3, &handed, free), Some(101));
        assert_eq!(pick(100..105, 8, &handed, |_| true), Some(104));
        assert_eq!(pick(100..105, 0, &handed, |_| false), None);
        assert_eq!(pick(100..100, 0, &handed, |_| true), None);
    }

    #[test]
    fn the_ephemeral_range_is_read_as_the_kernel_writes_it() {
        assert_eq!(parse_range_start("32768\t60999\n"), Some(32768));
        assert_eq!(parse_range_start("1024 65535"), Some(1024));
        assert_eq!(parse_range_start(""), None);
    }
}
