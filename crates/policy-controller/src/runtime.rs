//! Wires the flags to tasks: Kubernetes watches into the inbound index, the
//! inbound policy gRPC server, the admin server, and graceful shutdown.

use std::sync::Arc;

use anyhow::Context;
use k8s_index::{IndexMetrics as WatchMetrics, resources};
use meridian_runtime::{AdminServer, Readiness, Shutdown};
use prometheus_client::registry::Registry;

use crate::{
    args::Args,
    grpc::{self, InboundPolicyServer},
    index::{CONTROL_PLANE_NS_LABEL, Index},
    metrics::{GrpcMetrics, IndexMetrics},
};

/// Runs the controller until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;
    let client = args
        .kube
        .client()
        .await
        .context("connecting to Kubernetes")?;

    let mut registry = Registry::with_prefix("policy");
    let watch_metrics = WatchMetrics::register(&mut registry);
    let index_metrics = IndexMetrics::register(&mut registry);
    let grpc_metrics = GrpcMetrics::register(&mut registry);
    let readiness = Readiness::default();

    let index = Index::shared(args.cluster_info());
    index.write().set_metrics(index_metrics);

    // One index serves every watch; only meshed pods matter.
    let watches = [
        resources::pods(
            client.clone(),
            Some(CONTROL_PLANE_NS_LABEL),
            index.clone(),
            &watch_metrics,
        ),
        resources::servers(client.clone(), index.clone(), &watch_metrics),
        resources::server_authorizations(client.clone(), index.clone(), &watch_metrics),
        resources::authorization_policies(client.clone(), index.clone(), &watch_metrics),
        resources::mesh_tls_authentications(client.clone(), index.clone(), &watch_metrics),
        resources::network_authentications(client.clone(), index.clone(), &watch_metrics),
        resources::http_routes(client.clone(), index.clone(), &watch_metrics),
    ];
    for watch in watches {
        let name = format!("{} cache", watch.kind);
        readiness.register_watch(name, watch.spawn());
    }

    // The admission webhook (--server-addr) and the HTTPRoute status
    // writer are separate components started here when present; this
    // build serves the index and the gRPC API only.
    if !args.admission_controller_disabled {
        tracing::warn!(
            server_addr = %args.server_addr,
            "the admission webhook is not part of this build; not serving it"
        );
    }

    let grpc_listener = tokio::net::TcpListener::bind(args.grpc_addr)
        .await
        .with_context(|| format!("binding the gRPC server on {}", args.grpc_addr))?;
    let admin = AdminServer::bind(args.admin_addr, readiness.clone(), Arc::new(registry))
        .await
        .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;

    let policy = InboundPolicyServer::new(
        index.clone(),
        args.cluster_networks.clone(),
        shutdown.clone(),
        grpc_metrics,
    );
    // Either server failing stops the process; on shutdown both drain.
    let grpc = async {
        grpc::serve(grpc_listener, policy, shutdown.clone())
            .await
            .context("gRPC server")
    };
    let admin = async { admin.serve(shutdown.clone()).await.context("admin server") };
    tokio::try_join!(grpc, admin)?;
    tracing::info!("stopped");
    Ok(())
}
