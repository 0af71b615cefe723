//! What one abuse probe costs, read from outside the servers: the API
//! server's requests by verb and resource (its own
//! `apiserver_request_total`, so nothing a controller says about itself),
//! each binary's anonymous RSS and `/metrics` line count, and the answers
//! the probe's client saw by gRPC code with their latencies.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    time::{Duration, Instant},
};

use crate::stats::{ms, percentile, rss};

/// A server under test, as the probes read it.
pub struct Target {
    pub name: &'static str,
    pub pid: u32,
    pub admin: SocketAddr,
}

/// One reading of every server and of the API server.
pub struct Reading {
    /// `apiserver_request_total` summed by (verb, resource).
    api: BTreeMap<(String, String), f64>,
    /// Anonymous RSS and `/metrics` lines, per server.
    servers: Vec<(u64, usize)>,
}

/// Reads the API server's request counters and each server's memory and
/// metrics.
pub async fn read(client: &kube::Client, servers: &[Target]) -> Reading {
    let mut per_server = Vec::with_capacity(servers.len());
    for server in servers {
        let anon = rss(server.pid).map_or(0, |r| r.anon);
        let lines = match local_cluster::probe::http_get(server.admin, "/metrics").await {
            Ok((_, text)) => text.lines().filter(|l| !l.starts_with('#')).count(),
            Err(_) => 0,
        };
        per_server.push((anon, lines));
    }
    Reading {
        api: api_requests(client).await,
        servers: per_server,
    }
}

/// `apiserver_request_total` by (verb, resource), from the API server's
/// `/metrics` (empty if it cannot be read).
async fn api_requests(client: &kube::Client) -> BTreeMap<(String, String), f64> {
    let mut counts = BTreeMap::new();
    let Ok(request) = http::Request::get("/metrics").body(Vec::new()) else {
        return counts;
    };
    let Ok(text) = client.request_text(request).await else {
        return counts;
    };
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("apiserver_request_total{") else {
            continue;
        };
        let Some((labels, value)) = rest.rsplit_once("} ") else {
            continue;
        };
        let label = |name: &str| {
            labels
                .split(',')
                .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                .map(|v| v.trim_end_matches('"').to_string())
                .unwrap_or_default()
        };
        if let Ok(value) = value.trim().parse::<f64>() {
            *counts
                .entry((label("verb"), label("resource")))
                .or_insert(0.0) += value;
        }
    }
    counts
}

/// The API requests made between two readings, as `VERB resource ×n`, the
/// most first; leases and events (the controllers' elections,
/// kube-controller-manager) and non-resource paths (this benchmark's own
/// reads of `/metrics`) are left out.
pub fn api_delta(before: &Reading, after: &Reading) -> String {
    let mut parts: Vec<(f64, String)> = after
        .api
        .iter()
        .filter(|((_, resource), _)| !matches!(resource.as_str(), "leases" | "events" | ""))
        .filter_map(|(key, n)| {
            let d = n - before.api.get(key).copied().unwrap_or(0.0);
            (d >= 1.0).then(|| (d, format!("{} {} ×{d:.0}", key.0, key.1)))
        })
        .collect();
    parts.sort_by(|a, b| b.0.total_cmp(&a.0));
    if parts.is_empty() {
        "none".into()
    } else {
        parts
            .into_iter()
            .map(|(_, s)| s)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The requests of one (verb, resource) between two readings.
pub fn api_count(before: &Reading, after: &Reading, verb: &str, resource: &str) -> f64 {
    let key = (verb.to_string(), resource.to_string());
    after.api.get(&key).copied().unwrap_or(0.0) - before.api.get(&key).copied().unwrap_or(0.0)
}

/// Each server's anonymous RSS before, during and after, and `/metrics`
/// lines before and during.
pub fn servers_line(
    servers: &[Target],
    before: &Reading,
    during: &Reading,
    after: &Reading,
) -> String {
    servers
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let mb = |r: &Reading| r.servers[i].0 as f64 / 1e6;
            format!(
                "{} anon RSS {:.1}/{:.1}/{:.1} MB (before/during/10 s after), /metrics {}→{} lines",
                s.name,
                mb(before),
                mb(during),
                mb(after),
                before.servers[i].1,
                during.servers[i].1
            )
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The answers of a probe: how many of each gRPC code, and latencies.
#[derive(Default)]
pub struct Answers {
    codes: BTreeMap<String, usize>,
    latencies: Vec<Duration>,
}

impl Answers {
    /// Records one answer (`Ok`, or the status code's name).
    pub fn record(&mut self, code: &str, latency: Duration) {
        *self.codes.entry(code.to_string()).or_default() += 1;
        self.latencies.push(latency);
    }

    /// Whether no answer was recorded (a probe that holds streams).
    pub fn is_empty(&self) -> bool {
        self.latencies.is_empty()
    }

    /// `OK ×n, Unavailable ×m; p50/p99/max`.
    pub fn line(&self) -> String {
        let codes = self
            .codes
            .iter()
            .map(|(code, n)| format!("{code} ×{n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let max = self.latencies.iter().max().copied().unwrap_or_default();
        format!(
            "answers {codes}; p50 {} p99 {} max {}",
            ms(percentile(&self.latencies, 50.0)),
            ms(percentile(&self.latencies, 99.0)),
            ms(max)
        )
    }
}

/// The code name of a gRPC result.
pub fn code_of<T>(result: &Result<T, tonic::Status>) -> String {
    match result {
        Ok(_) => "OK".into(),
        Err(status) => format!("{:?}", status.code()),
    }
}

/// Runs `n` calls of `call`, `concurrency` at a time, recording each
/// answer's code and latency.
pub async fn calls<F, Fut>(n: usize, concurrency: usize, call: F) -> Answers
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = String>,
{
    use futures::StreamExt;
    let results: Vec<(String, Duration)> = futures::stream::iter(0..n)
        .map(|i| {
            let fut = call(i);
            async move {
                let t0 = Instant::now();
                let code = fut.await;
                (code, t0.elapsed())
            }
        })
        .buffer_unordered(concurrency)
        .collect()
        .await;
    let mut answers = Answers::default();
    for (code, latency) in results {
        answers.record(&code, latency);
    }
    answers
}
