//! The series Linkerd's Grafana dashboards (`grafana/dashboards/` of
//! linkerd2 at version-2.20: the "Health" dashboard's control-plane panels,
//! `job="linkerd-controller"`) and the usual alerts read from the
//! destination pod's containers, under the original's names and labels;
//! and [`missing`], which says which of them a scrape lacks.
//!
//! What the dashboards also read but Meridian does not export, and why (see
//! docs/metrics.md): the Go runtime's `go_goroutines`, `go_memstats_*` and
//! `go_gc_duration_seconds` (Meridian has no Go runtime; `go_threads` is
//! the process's thread count, `process_resident_memory_bytes` says what
//! it holds); `http_server_*` (the original's destination pod
//! exports none either); and `http_client_*` from the sp-validator, which
//! makes no Kubernetes request.

/// Every container: the panels "Process Memory", "Open FDs", the CPU and
/// start-time queries.
pub const PROCESS: &[&str] = &[
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

/// The destination and policy containers: "gRPC Message Volume"
/// (`msg_sent`, `msg_received`) and the go-grpc-prometheus series the
/// usual alerts on control-plane errors read. Each carries `grpc_service`,
/// `grpc_method` and `grpc_type`; `handled` also `grpc_code`.
pub const GRPC_SERVER: &[&str] = &[
    "grpc_server_started_total",
    "grpc_server_msg_received_total",
    "grpc_server_msg_sent_total",
    "grpc_server_handled_total",
    "grpc_server_handling_seconds_bucket",
    "grpc_server_handling_seconds_count",
];

/// The destination container: its Kubernetes client's requests ("Client
/// Request Rate", "HTTP Client Latency", "Client In-Flight Requests").
pub const HTTP_CLIENT: &[&str] = &[
    "http_client_requests_total",
    "http_client_request_latency_seconds_bucket",
    "http_client_in_flight_requests",
];

/// The labels of each `grpc_server_*` series.
const GRPC_LABELS: &[&str] = &["grpc_service", "grpc_method", "grpc_type"];

/// The names of `wanted` that no sample of the Prometheus text `scrape`
/// has (with the gRPC labels, for `grpc_server_*`).
pub fn missing(scrape: &str, wanted: &[&str]) -> Vec<String> {
    wanted
        .iter()
        .filter(|name| {
            !scrape
                .lines()
                .filter(|l| !l.starts_with('#'))
                .any(|line| has_series(line, name))
        })
        .map(|name| name.to_string())
        .collect()
}

/// The `meridian_build_info{version,commit,profile} 1` line every binary
/// exports (which build runs; Linkerd's controllers have no such series),
/// if the scrape has it.
pub fn build_info(scrape: &str) -> Option<&str> {
    scrape.lines().find(|line| {
        line.starts_with("meridian_build_info{version=\"")
            && line.contains("\",commit=\"")
            && line.contains("\",profile=\"")
            && line.ends_with("\"} 1")
    })
}

fn has_series(line: &str, name: &str) -> bool {
    let Some(rest) = line.strip_prefix(name) else {
        return false;
    };
    if rest.starts_with(' ') {
        return !name.starts_with("grpc_server_");
    }
    let Some(labels) = rest.strip_prefix('{').and_then(|r| r.split_once('}')) else {
        return false;
    };
    let keys: Vec<&str> = labels
        .0
        .split(',')
        .filter_map(|kv| kv.split_once('=').map(|(k, _)| k))
        .collect();
    let mut needed = GRPC_LABELS.to_vec();
    if name == "grpc_server_handled_total" {
        needed.push("grpc_code");
    }
    !name.starts_with("grpc_server_") || needed.iter().all(|k| keys.contains(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_series_by_name_and_labels() {
        let scrape = "# HELP process_open_fds x\nprocess_open_fds 12\n\
            grpc_server_handled_total{grpc_service=\"a\",grpc_method=\"b\",grpc_type=\"unary\",grpc_code=\"OK\"} 1\n\
            grpc_server_started_total{grpc_method=\"b\"} 1\n";
        assert_eq!(
            missing(
                scrape,
                &[
                    "process_open_fds",
                    "grpc_server_handled_total",
                    "grpc_server_started_total",
                    "process_max_fds"
                ]
            ),
            ["grpc_server_started_total", "process_max_fds"]
        );
        assert_eq!(
            missing("process_open_fds_x 1\n", &["process_open_fds"]),
            ["process_open_fds"]
        );
    }
}
