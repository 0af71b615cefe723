//! `sp-validator`: the ServiceProfile validating admission webhook. Serves
//! HTTPS on `--addr` with the certificate from `--tls-cert`/`--tls-key`
//! (reloaded when the files change) and the admin endpoints on
//! `--admin-addr`. Flags: [`sp_validator::args`].

use std::sync::Arc;

use anyhow::Context as _;
use meridian_runtime::{AdminServer, ConnectionMetrics, Readiness, Shutdown};
use prometheus_client::registry::Registry;
use sp_validator::{
    ServiceProfileValidator,
    args::{Args, GO_FLAGS},
};

// jemalloc: cheaper allocation for the many short-lived JSON values of reviews.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
// jemalloc's heap profiler, inactive unless `-enable-pprof` (docs/profiling.md).
meridian_runtime::jemalloc_malloc_conf!();

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (args, normalised) = GO_FLAGS.parse::<Args>();
    args.log.init(meridian_runtime::LogDialect::Go)?;
    normalised.log_ignored();
    meridian_runtime::build_info::log_start("sp-validator");
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;

    let readiness = Readiness::default();
    let tls_ready = readiness.register("webhook TLS");
    let mut registry = Registry::default();
    meridian_runtime::process_metrics::register(&mut registry);
    meridian_runtime::build_info::register(&mut registry);
    // The Health dashboard's memory panel: jemalloc's statistics where the
    // original had Go's.
    meridian_runtime::jemalloc::register_metrics(&mut registry);
    let metrics = admission::Metrics::register(registry.sub_registry_with_prefix("sp_validator"));
    let peers = ConnectionMetrics::register(&mut registry);
    let mut admin = AdminServer::bind(args.admin_addr, readiness, Arc::new(registry), &peers)
        .await
        .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;
    if args.enable_pprof {
        admin = admin.with_routes(meridian_runtime::profiling::routes(
            meridian_runtime::profiling::jemalloc_heap_profiler(),
        ));
    }
    let admin = tokio::spawn(admin.serve(shutdown.clone()));

    let paths = admission::TlsPaths {
        cert: args.tls_cert,
        key: args.tls_key,
    };
    // The Secret may be mounted after we start: wait for it, live but not ready.
    let Some(certs) =
        admission::CertStore::load_when_available(paths, shutdown.clone().requested()).await
    else {
        return Ok(());
    };
    tokio::spawn(certs.clone().watch(shutdown.clone().requested()));

    let server = admission::HttpsServer::bind(args.addr, &certs, peers.listener("webhook")).await?;
    tracing::info!(addr = %server.local_addr()?, "serving ServiceProfile admission reviews");
    tls_ready.set(true);
    server
        .serve(
            admission::router(ServiceProfileValidator, metrics),
            shutdown,
        )
        .await;
    admin.await.context("admin server task")??;
    Ok(())
}
