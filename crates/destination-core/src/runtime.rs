//! `destination` flags and wiring: watches into the index, the gRPC server,
//! the admin server, and graceful shutdown.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::{Context, bail};
use clap::{ArgAction, Parser};
use k8s_index::{IndexMetrics, resources};
use meridian_runtime::{AdminServer, KubeClientArgs, LogArgs, Readiness, Shutdown};
use parking_lot::RwLock;
use prometheus_client::registry::Registry;

use crate::{
    config::{TranslatorConfig, TranslatorFlags},
    endpoints_index::EndpointsIndex,
    metrics::DestinationMetrics,
    server::{DestinationRouter, DestinationService},
};

/// Flags of `destination`. Names and defaults follow the original controller.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "destination",
    version,
    about = "Serves io.linkerd.proxy.destination.Destination: where meshed proxies send traffic"
)]
pub struct Args {
    #[command(flatten)]
    pub log: LogArgs,

    #[command(flatten)]
    pub kube: KubeClientArgs,

    /// gRPC address (plaintext h2c, as proxies and `linkerd diagnostics` expect).
    #[arg(long, env = "DESTINATION_ADDR", default_value = "0.0.0.0:8086")]
    pub addr: SocketAddr,

    /// Admin server address (/live, /ready, /metrics).
    #[arg(
        long,
        alias = "metrics-addr",
        env = "DESTINATION_ADMIN_ADDR",
        default_value = "0.0.0.0:9996"
    )]
    pub admin_addr: SocketAddr,

    /// Namespace of the control plane (meshed pods carry it in `linkerd.io/control-plane-ns`).
    #[arg(long, default_value = "linkerd")]
    pub controller_namespace: String,

    /// `transparent`, or `transport-header` to force opaque transport to meshed endpoints.
    #[arg(long, default_value = "transparent")]
    pub outbound_transport_mode: String,

    /// Hint H2 to meshed endpoints so proxies upgrade HTTP/1 between them.
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    pub enable_h2_upgrade: bool,

    /// Read EndpointSlices (the only supported source; `false` is refused).
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    pub enable_endpoint_slices: bool,

    /// Serve IPv6 endpoints (preferred over IPv4 for dual-stack pods).
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    pub enable_ipv6: bool,

    /// Trust domain of mesh identities (empty: cluster.local).
    #[arg(long, default_value = "")]
    pub identity_trust_domain: String,

    /// The cluster's DNS domain (empty: cluster.local).
    #[arg(long, default_value = "")]
    pub cluster_domain: String,

    /// Ports treated as opaque unless a pod annotation says otherwise (e.g. `25,587,3306-3310`).
    #[arg(long, default_value = "")]
    pub default_opaque_ports: String,

    /// Accepted for compatibility. Meridian never queues per stream: a slow
    /// stream is sent one diff to the newest state when it can write again.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..))]
    pub stream_queue_capacity: u32,

    /// Weight endpoints in the client's zone ×10.
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    pub ext_endpoint_zone_weights: bool,

    /// HTTP/2 client parameters for meshed endpoints, as JSON (snake_case keys, durations as {"seconds":N}).
    #[arg(long, default_value = "")]
    pub meshed_http2_client_params: String,

    /// The policy controller's gRPC address.
    #[arg(
        long,
        env = "DESTINATION_POLICY_ADDR",
        default_value = "http://localhost:8090"
    )]
    pub policy_addr: String,
}

impl Args {
    /// The translator configuration the flags describe.
    pub fn translator_config(&self) -> anyhow::Result<TranslatorConfig> {
        let flags = TranslatorFlags {
            controller_namespace: &self.controller_namespace,
            identity_trust_domain: &self.identity_trust_domain,
            cluster_domain: &self.cluster_domain,
            enable_h2_upgrade: self.enable_h2_upgrade,
            outbound_transport_mode: &self.outbound_transport_mode,
            default_opaque_ports: &self.default_opaque_ports,
            meshed_http2_client_params: &self.meshed_http2_client_params,
            enable_ipv6: self.enable_ipv6,
            ext_endpoint_zone_weights: self.ext_endpoint_zone_weights,
        };
        Ok(TranslatorConfig::from_flags(&flags)?)
    }
}

/// How long shutdown waits for open streams to send their OK trailers
/// before the server's own graceful shutdown starts.
const STREAM_DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Runs the destination until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    if !args.enable_endpoint_slices {
        bail!(
            "--enable-endpoint-slices=false is not supported: Meridian reads EndpointSlices only"
        );
    }
    let config = Arc::new(args.translator_config().context("invalid flags")?);
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;
    let client = args
        .kube
        .client()
        .await
        .context("connecting to Kubernetes")?;

    let mut registry = Registry::default();
    let index_metrics = IndexMetrics::register(&mut registry);
    let metrics = DestinationMetrics::register(&mut registry);
    let link_metrics = crate::policy_link::LinkMetrics::register(&mut registry);
    let readiness = Readiness::default();

    let index = Arc::new(RwLock::new(EndpointsIndex::new(
        config.clone(),
        metrics.clone(),
    )));
    let watches = [
        resources::services(client.clone(), index.clone(), &index_metrics),
        resources::endpoint_slices(client.clone(), index.clone(), &index_metrics),
        resources::pods(client.clone(), None, index.clone(), &index_metrics),
        resources::nodes(client.clone(), index.clone(), &index_metrics),
        resources::replica_sets(client.clone(), index.clone(), &index_metrics),
        resources::jobs(client.clone(), index.clone(), &index_metrics),
        resources::service_profiles(client.clone(), index.clone(), &index_metrics),
    ];
    let mut caches = Vec::with_capacity(watches.len());
    for watch in watches {
        let name = format!("{} cache", watch.kind);
        let synced = watch.spawn();
        caches.push(synced.clone());
        readiness.register_watch(name, synced);
    }
    let synced = meridian_runtime::readiness::initial_sync(caches);

    let admin = AdminServer::bind(args.admin_addr, readiness.clone(), Arc::new(registry))
        .await
        .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding the gRPC server on {}", args.addr))?;
    tracing::info!(addr = %args.addr, "Destination gRPC server listening");

    let link = crate::policy_link::run(
        args.policy_addr.clone(),
        index.clone(),
        link_metrics,
        readiness.register_degraded("policy link"),
        shutdown.clone(),
    );
    tokio::spawn(link);

    let service = DestinationService::new(index, metrics, shutdown.receiver(), synced);
    let grpc = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(Duration::from_secs(10)))
        .http2_keepalive_timeout(Some(Duration::from_secs(3)))
        .add_service(DestinationRouter::new(service))
        .serve_with_incoming_shutdown(
            // Without TCP_NODELAY, small updates wait on the client's
            // delayed ACK (Nagle), adding ~40 ms to a fan-out.
            tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true)),
            // Open streams end with OK first; GOAWAY only after them.
            grpc_stream::after_streams_end(shutdown.clone().requested(), STREAM_DRAIN_GRACE),
        );
    let (grpc, admin) = tokio::join!(grpc, admin.serve(shutdown));
    grpc.context("gRPC server")?;
    admin.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
}
