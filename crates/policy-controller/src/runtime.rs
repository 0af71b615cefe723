//! Wires the flags to tasks: Kubernetes watches into the indexes, the admin
//! server, and graceful shutdown.

use std::sync::Arc;

use anyhow::Context;
use k8s_index::{IndexMetrics, ObjectCache, SharedIndex, resources};
use meridian_runtime::{AdminServer, Readiness, Shutdown};
use prometheus_client::registry::Registry;

use crate::args::Args;

/// Runs the controller until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;
    let client = args
        .kube
        .client()
        .await
        .context("connecting to Kubernetes")?;

    let mut registry = Registry::with_prefix("policy");
    let index_metrics = IndexMetrics::register(&mut registry);
    let readiness = Readiness::default();

    // Only meshed pods matter to inbound policy.
    let selector = resources::CONTROL_PLANE_NS_LABEL;
    let pods: SharedIndex<ObjectCache<_>> = Arc::default();
    let servers: SharedIndex<ObjectCache<_>> = Arc::default();
    let server_authorizations: SharedIndex<ObjectCache<_>> = Arc::default();
    let authorization_policies: SharedIndex<ObjectCache<_>> = Arc::default();
    let mesh_tls: SharedIndex<ObjectCache<_>> = Arc::default();
    let networks: SharedIndex<ObjectCache<_>> = Arc::default();
    let http_routes: SharedIndex<ObjectCache<_>> = Arc::default();
    let watches = [
        resources::pods(client.clone(), Some(selector), pods, &index_metrics),
        resources::servers(client.clone(), servers, &index_metrics),
        resources::server_authorizations(client.clone(), server_authorizations, &index_metrics),
        resources::authorization_policies(client.clone(), authorization_policies, &index_metrics),
        resources::mesh_tls_authentications(client.clone(), mesh_tls, &index_metrics),
        resources::network_authentications(client.clone(), networks, &index_metrics),
        resources::http_routes(client.clone(), http_routes, &index_metrics),
    ];
    for watch in watches {
        let name = format!("{} cache", watch.kind);
        readiness.register_watch(name, watch.spawn());
    }

    let admin = AdminServer::bind(args.admin_addr, readiness.clone(), Arc::new(registry))
        .await
        .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;
    tracing::info!(
        grpc_addr = %args.grpc_addr,
        "the inbound policy gRPC API is not implemented yet; serving watches and admin only"
    );
    admin.serve(shutdown).await.context("admin server")?;
    tracing::info!("stopped");
    Ok(())
}
