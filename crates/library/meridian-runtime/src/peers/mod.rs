//! Bad peers on every listening port (gRPC, webhooks, admin): connections
//! that send garbage, half an HTTP/2 preface, a TLS ClientHello to a
//! plaintext port, or nothing at all. Each is closed by its server (see
//! [`PrefaceGuard`] and [`http`]), counted in
//! `server_bad_connections_total{listener,reason}` and logged at `warn` in
//! a rate-limited way: the first one of a listener at once, then at most
//! one line per [`LOG_INTERVAL`] summarising how many were not logged. A
//! scanner hitting a port a thousand times a second costs a line a minute.
//!
//! `server_connections_open{listener}` counts each listener's open
//! connections, and `runtime_tasks_alive` the process's tokio tasks, so a
//! benchmark (or an operator) can see that the connections of bad peers
//! are gone and left no task behind.

mod accept;
pub mod http;
mod preface;

use std::{
    collections::HashMap,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric},
    metrics::{MetricType, counter::Counter, family::Family, gauge::ConstGauge, gauge::Gauge},
    registry::Registry,
};

pub use accept::{DRAIN_TIMEOUT, accept_until};
pub use preface::{PREFACE_TIMEOUT, PrefaceGuard};

/// At most one bad-peer log line per listener per interval (after the first).
pub const LOG_INTERVAL: Duration = Duration::from_secs(60);

/// What was wrong with a peer's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// Bytes that are not the protocol the port speaks.
    Garbage,
    /// A TLS record sent to a plaintext port.
    TlsOnPlaintext,
    /// An HTTP/1 request sent to an HTTP/2-only port.
    Http1OnHttp2,
    /// Nothing (or not enough to start) within the port's deadline: a
    /// half-open connection, or a client that stopped mid-request.
    Silent,
    /// The connection closed in the middle of a preface or request.
    Truncated,
    /// The TLS handshake failed (not TLS, or an unacceptable ClientHello).
    TlsHandshake,
}

impl Reason {
    /// The metric label and log field.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Garbage => "garbage",
            Reason::TlsOnPlaintext => "tls_on_plaintext",
            Reason::Http1OnHttp2 => "http1_on_http2",
            Reason::Silent => "silent",
            Reason::Truncated => "truncated",
            Reason::TlsHandshake => "tls_handshake",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BadLabels {
    listener: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListenerLabels {
    listener: &'static str,
}

/// The connection metrics of a process and the log limiter of each
/// listener (register once, then one [`Listener`] handle per port).
#[derive(Clone, Debug, Default)]
pub struct ConnectionMetrics {
    bad: Family<BadLabels, Counter>,
    open: Family<ListenerLabels, Gauge>,
    limiters: Arc<Mutex<HashMap<&'static str, LogLimiter>>>,
}

impl ConnectionMetrics {
    /// Registers `server_bad_connections_total`, `server_connections_open`
    /// and `runtime_tasks_alive` under `registry`.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        let server = registry.sub_registry_with_prefix("server");
        server.register(
            "bad_connections",
            "Connections closed because the peer sent garbage, half a preface or nothing, per listener and reason",
            metrics.bad.clone(),
        );
        server.register(
            "connections_open",
            "Open connections, per listener",
            metrics.open.clone(),
        );
        registry.register_collector(Box::new(TasksCollector));
        metrics
    }

    /// The handle of the listener `name` (`grpc`, `admin`, `webhook`).
    pub fn listener(&self, name: &'static str) -> Listener {
        // Its open-connection count is exported (as 0) from now on.
        let _ = self.open.get_or_create(&ListenerLabels { listener: name });
        Listener {
            name,
            metrics: self.clone(),
        }
    }
}

/// One listening port's bad-peer reporting and open-connection count.
#[derive(Clone, Debug)]
pub struct Listener {
    name: &'static str,
    metrics: ConnectionMetrics,
}

impl Listener {
    /// A handle that reports nowhere (tests, servers without metrics).
    pub fn unregistered(name: &'static str) -> Self {
        ConnectionMetrics::default().listener(name)
    }

    /// The listener's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Counts one open connection until the returned guard drops.
    pub fn open(&self) -> OpenConnection {
        let gauge = self
            .metrics
            .open
            .get_or_create(&ListenerLabels {
                listener: self.name,
            })
            .clone();
        gauge.inc();
        OpenConnection(gauge)
    }

    /// How many bad connections with `reason` this listener has seen.
    pub fn bad_count(&self, reason: Reason) -> u64 {
        self.metrics
            .bad
            .get_or_create(&BadLabels {
                listener: self.name,
                reason: reason.as_str(),
            })
            .get()
    }

    /// Reports a bad peer: counted always, logged within the rate limit.
    pub fn bad(&self, peer: Option<SocketAddr>, reason: Reason, detail: &str) {
        self.metrics
            .bad
            .get_or_create(&BadLabels {
                listener: self.name,
                reason: reason.as_str(),
            })
            .inc();
        let admitted = {
            let mut limiters = self
                .metrics
                .limiters
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            limiters
                .entry(self.name)
                .or_default()
                .admit(Instant::now(), LOG_INTERVAL)
        };
        let peer = peer.map_or_else(|| "unknown".to_string(), |p| p.to_string());
        match admitted {
            Some(0) => tracing::warn!(
                listener = self.name,
                %peer,
                reason = reason.as_str(),
                detail,
                "closed a bad peer's connection (further ones on this listener: at most one line a minute; all in server_bad_connections_total)"
            ),
            Some(suppressed) => tracing::warn!(
                listener = self.name,
                %peer,
                reason = reason.as_str(),
                detail,
                suppressed,
                "closed a bad peer's connection ({suppressed} more since the last line)"
            ),
            None => tracing::debug!(
                listener = self.name,
                %peer,
                reason = reason.as_str(),
                detail,
                "closed a bad peer's connection"
            ),
        }
    }
}

/// Decrements its listener's open-connection gauge when dropped.
#[derive(Debug)]
pub struct OpenConnection(Gauge);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Lets one line through, then at most one per interval; counts the rest.
#[derive(Debug, Default)]
struct LogLimiter {
    last: Option<Instant>,
    suppressed: u64,
}

impl LogLimiter {
    /// `Some(n)` if a line may be logged now (`n` events were suppressed
    /// since the last one), `None` if this event is suppressed.
    fn admit(&mut self, now: Instant, interval: Duration) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

/// `runtime_tasks_alive`: the tokio tasks of the process, read when scraped.
#[derive(Debug)]
struct TasksCollector;

impl Collector for TasksCollector {
    fn encode(&self, mut encoder: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        let Ok(handle) = tokio::runtime::Handle::try_current() else {
            return Ok(());
        };
        let alive = handle.metrics().num_alive_tasks();
        let gauge = ConstGauge::new(i64::try_from(alive).unwrap_or(i64::MAX));
        gauge.encode(encoder.encode_descriptor(
            "runtime_tasks_alive",
            "Tokio tasks alive in the process (connections, streams, watches)",
            None,
            MetricType::Gauge,
        )?)
    }
}

/// Up to 16 bytes of `bytes`, escaped for a log line.
pub fn escape_prefix(bytes: &[u8]) -> String {
    let shown = &bytes[..bytes.len().min(16)];
    let mut text: String = shown.escape_ascii().to_string();
    if bytes.len() > shown.len() {
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limiter_logs_the_first_then_one_per_interval() {
        let mut limiter = LogLimiter::default();
        let t0 = Instant::now();
        let minute = Duration::from_secs(60);
        assert_eq!(limiter.admit(t0, minute), Some(0), "the first is logged");
        for s in 1..=30 {
            assert_eq!(limiter.admit(t0 + Duration::from_secs(s), minute), None);
        }
        assert_eq!(
            limiter.admit(t0 + Duration::from_secs(61), minute),
            Some(30),
            "the next line says how many were not logged"
        );
        assert_eq!(limiter.admit(t0 + Duration::from_secs(62), minute), None);
        assert_eq!(
            limiter.admit(t0 + Duration::from_secs(200), minute),
            Some(1)
        );
    }

    #[test]
    fn bad_peers_are_counted_per_listener_and_reason() {
        let mut registry = Registry::default();
        let metrics = ConnectionMetrics::register(&mut registry);
        let grpc = metrics.listener("grpc");
        let admin = metrics.listener("admin");
        for _ in 0..3 {
            grpc.bad(None, Reason::Garbage, "xyz");
        }
        admin.bad(None, Reason::Silent, "");
        assert_eq!(grpc.bad_count(Reason::Garbage), 3);
        assert_eq!(grpc.bad_count(Reason::Silent), 0);
        assert_eq!(admin.bad_count(Reason::Silent), 1);
        let open = admin.open();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains(r#"server_bad_connections_total{listener="grpc",reason="garbage"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"server_connections_open{listener="admin"} 1"#),
            "{text}"
        );
        drop(open);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        assert!(
            text.contains(r#"server_connections_open{listener="admin"} 0"#),
            "{text}"
        );
    }

    #[test]
    fn prefixes_are_escaped_and_cut() {
        assert_eq!(escape_prefix(b"\x16\x03\x01\x00"), r"\x16\x03\x01\x00");
        assert_eq!(escape_prefix(&[b'a'; 20]), format!("{}…", "a".repeat(16)));
    }
}
