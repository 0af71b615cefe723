//! The destination's link to the policy controller: one
//! `meridian.policy.v1.WorkloadPorts/Watch` stream (whatever the number of
//! pods and ExternalWorkloads) carrying the ports that Server resources
//! make opaque. The
//! destination never evaluates Servers itself.
//!
//! While the policy controller is unreachable the destination keeps serving
//! with annotation-derived hints (the Server-derived facts are dropped, so
//! nothing stale is served), reports it in `/ready` and the
//! `policy_link_connected` gauge, and retries with backoff; the snapshot it
//! gets on reconnecting corrects every affected endpoint.

use std::time::Duration;

use meridian_api::policy::v1::{
    WatchRequest, WatchUpdate, workload_ports_client::WorkloadPortsClient,
};
use meridian_runtime::{DegradedHandle, Shutdown};
use prometheus_client::{metrics::gauge::Gauge, registry::Registry};

use crate::core::endpoint::WorkloadRef;
pub use crate::core::{OpaquePortsUpdate, WorkloadPorts};

/// Link metrics.
#[derive(Clone, Debug, Default)]
pub struct LinkMetrics {
    connected: Gauge,
}

impl LinkMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "policy_link_connected",
            "1 while the destination follows the policy controller's opaque ports",
            m.connected.clone(),
        );
        m
    }
}

/// Follows the policy controller at `addr` until shutdown, handing every
/// update to `apply` (the runtime applies it to the index).
pub async fn run(
    addr: String,
    apply: impl Fn(OpaquePortsUpdate) + Send + Sync,
    metrics: LinkMetrics,
    degraded: DegradedHandle,
    shutdown: Shutdown,
) {
    let mut backoff = Duration::from_millis(100);
    degraded.set(Some(format!(
        "connecting to the policy controller at {addr}; serving annotation-derived opaque hints"
    )));
    loop {
        let outcome = tokio::select! {
            outcome = follow(&addr, &apply, &metrics, &degraded, &mut backoff) => outcome,
            _ = shutdown.clone().requested() => return,
        };
        metrics.connected.set(0);
        apply(OpaquePortsUpdate {
            reset: true,
            workloads: Vec::new(),
        });
        let reason = format!(
            "policy controller at {addr} unreachable ({outcome}); serving annotation-derived opaque hints, retrying"
        );
        tracing::warn!(%addr, error = %outcome, retry_in = ?backoff, "policy controller link down");
        degraded.set(Some(reason));
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = shutdown.clone().requested() => return,
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Connects and applies updates until the stream fails; returns why.
async fn follow(
    addr: &str,
    apply: &(impl Fn(OpaquePortsUpdate) + Send + Sync),
    metrics: &LinkMetrics,
    degraded: &DegradedHandle,
    backoff: &mut Duration,
) -> String {
    let endpoint = match tonic::transport::Endpoint::from_shared(addr.to_string()) {
        Ok(endpoint) => endpoint
            .connect_timeout(Duration::from_secs(2))
            .tcp_nodelay(true)
            .http2_keep_alive_interval(Duration::from_secs(10))
            .keep_alive_timeout(Duration::from_secs(3)),
        Err(error) => return format!("invalid address: {error}"),
    };
    let channel = match endpoint.connect().await {
        Ok(channel) => channel,
        Err(error) => return error.to_string(),
    };
    let mut stream = match WorkloadPortsClient::new(channel)
        .watch(WatchRequest {})
        .await
    {
        Ok(response) => response.into_inner(),
        Err(status) => return status.to_string(),
    };
    loop {
        match stream.message().await {
            Ok(Some(update)) => {
                if update.reset {
                    tracing::info!(%addr, pods = update.pods.len(), external_workloads = update.external_workloads.len(), "following the policy controller's opaque ports");
                    metrics.connected.set(1);
                    degraded.set(None);
                    *backoff = Duration::from_millis(100);
                }
                apply(decode_update(update));
            }
            Ok(None) => return "the stream ended".to_string(),
            Err(status) => return status.to_string(),
        }
    }
}

/// One `WatchUpdate` as the index takes it: an entry without a pod or
/// workload reference is dropped, and so is a port outside `0..=65535` (the
/// proto field is a `uint32`); the rest is kept as sent.
pub fn decode_update(update: WatchUpdate) -> OpaquePortsUpdate {
    let ports = |ports: Vec<u32>| {
        ports
            .into_iter()
            .filter_map(|port| u16::try_from(port).ok())
            .collect()
    };
    let pods = update.pods.into_iter().filter_map(|p| {
        let pod = p.pod?;
        Some((WorkloadRef::Pod(pod.namespace, pod.name), ports(p.ports)))
    });
    let externals = update.external_workloads.into_iter().filter_map(|w| {
        let ew = w.external_workload?;
        Some((WorkloadRef::External(ew.namespace, ew.name), ports(w.ports)))
    });
    OpaquePortsUpdate {
        reset: update.reset,
        workloads: pods.chain(externals).collect(),
    }
}
