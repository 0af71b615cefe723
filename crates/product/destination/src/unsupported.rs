//! A chart value Meridian cannot serve: `enableEndpointSlices: false`.
//!
//! The Linkerd 2.20 chart renders `-enable-endpoint-slices=false` for it and
//! then grants the destination no access to EndpointSlices at all (its
//! ClusterRole lists `discovery.k8s.io/endpointslices` only when the value
//! is true): the original reads v1 Endpoints instead. Meridian reads
//! EndpointSlices only (v1 Endpoints are deprecated since Kubernetes 1.33
//! and carry no topology, dual-stack or terminating state).
//!
//! Exiting would put the pod in a crash loop whose reason scrolls away.
//! Instead the process stays up and serves only its admin port: `/live`
//! answers, `/ready` does not and names the value (so the rollout stops
//! with the old replicas serving), the reason is logged at ERROR at start
//! and every [`REPEAT`], and an Event on the pod says it where `kubectl
//! describe pod` shows it (best effort: the chart grants the destination
//! no Events, `deploy/` does). SIGTERM ends it as usual.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use k8s_openapi::{
    api::core::v1::{Event, EventSource, ObjectReference},
    apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time},
    jiff::Timestamp,
};
use meridian_runtime::{AdminServer, ConnectionMetrics, KubeClientArgs, Readiness, Shutdown};
use prometheus_client::registry::Registry;
use tokio::sync::watch;

/// What `/ready`, the log and the Event say.
pub const ENDPOINTS_UNSUPPORTED: &str = "-enable-endpoint-slices=false (the Linkerd chart's \
    `enableEndpointSlices: false`) is not supported: Meridian serves from \
    discovery.k8s.io/v1 EndpointSlices only and does not read v1 Endpoints, and with \
    this value the chart grants the linkerd-destination ServiceAccount no access to \
    EndpointSlices. Set `enableEndpointSlices: true` (the chart's default) to run Meridian";

/// The Event's reason.
pub const EVENT_REASON: &str = "UnsupportedValue";

/// How often the ERROR line is repeated while the process waits.
pub const REPEAT: Duration = Duration::from_secs(300);

/// What the waiting process needs of its flags.
#[derive(Clone, Debug)]
pub struct Waiting {
    pub admin_addr: SocketAddr,
    pub kube: KubeClientArgs,
    /// The pod's namespace where no service account says it.
    pub controller_namespace: String,
}

/// Serves `/live`, a `/ready` that never passes, and `/metrics` until
/// SIGTERM, saying why.
pub async fn wait(args: Waiting) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;
    tracing::error!("{ENDPOINTS_UNSUPPORTED}; serving nothing but the admin port");
    let mut registry = Registry::default();
    meridian_runtime::process_metrics::register(&mut registry);
    meridian_runtime::build_info::register(&mut registry);
    let peers = ConnectionMetrics::register(&mut registry);
    let readiness = Readiness::default();
    let (_never, synced) = watch::channel(false);
    let (_reason, failing) = watch::channel(Some(ENDPOINTS_UNSUPPORTED.to_string()));
    readiness.register_cache("endpointslices cache", synced, failing);
    let admin = AdminServer::bind(args.admin_addr, readiness, Arc::new(registry), &peers)
        .await
        .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;
    tokio::spawn(record_event(args.clone()));
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let mut every = tokio::time::interval(REPEAT);
        every.tick().await;
        let requested = stop.requested();
        tokio::pin!(requested);
        loop {
            tokio::select! {
                () = &mut requested => break,
                _ = every.tick() => tracing::error!("{ENDPOINTS_UNSUPPORTED}"),
            }
        }
    });
    admin.serve(shutdown).await.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
}

/// Creates a Warning Event on this pod (`HOSTNAME` in the namespace of the
/// service account, else `-controller-namespace`). Failures are logged,
/// never fatal.
async fn record_event(args: Waiting) {
    let Some(pod) = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()) else {
        tracing::warn!("HOSTNAME is not set: no Event names the unsupported value");
        return;
    };
    let namespace = std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE)
        .map(|ns| ns.trim().to_string())
        .ok()
        .filter(|ns| !ns.is_empty())
        .unwrap_or_else(|| args.controller_namespace.clone());
    let client = match args.kube.client().await {
        Ok(client) => client,
        Err(error) => {
            tracing::warn!(%error, "no Event names the unsupported value");
            return;
        }
    };
    let api = kube::Api::<Event>::namespaced(client, &namespace);
    match api
        .create(&Default::default(), &event(&namespace, &pod))
        .await
    {
        Ok(_) => tracing::info!(%pod, %namespace, reason = EVENT_REASON, "recorded an Event"),
        Err(error) => {
            tracing::warn!(%error, "could not record an Event naming the unsupported value")
        }
    }
}

/// Where a pod's namespace is mounted.
const SERVICE_ACCOUNT_NAMESPACE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// The Warning Event naming the value, on `pod`.
pub fn event(namespace: &str, pod: &str) -> Event {
    let now = Timestamp::now();
    Event {
        metadata: ObjectMeta {
            generate_name: Some(format!("{pod}.")),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        involved_object: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Pod".into()),
            name: Some(pod.to_string()),
            namespace: Some(namespace.to_string()),
            ..Default::default()
        },
        type_: Some("Warning".into()),
        reason: Some(EVENT_REASON.into()),
        message: Some(ENDPOINTS_UNSUPPORTED.into()),
        source: Some(EventSource {
            component: Some("linkerd-destination".into()),
            ..Default::default()
        }),
        first_timestamp: Some(Time(now)),
        last_timestamp: Some(Time(now)),
        event_time: Some(MicroTime(now)),
        reporting_component: Some("linkerd-destination".into()),
        reporting_instance: Some(pod.to_string()),
        action: Some("Start".into()),
        count: Some(1),
        ..Default::default()
    }
}
