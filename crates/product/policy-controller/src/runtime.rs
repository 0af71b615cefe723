//! Wires the flags to tasks: Kubernetes watches into the inbound index and
//! the status index (the Gateway API kinds through [`crate::gateway`],
//! following their CRDs), the inbound policy gRPC server, the admission webhook
//! (`--server-addr`), the leader-elected HTTPRoute status writer, the admin
//! server, and graceful shutdown.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use k8s_api::gateway::GatewayRoute;
use k8s_index::{IndexMetrics as WatchMetrics, SharedIndex, Tee, resources};
use meridian_runtime::{AdminServer, ConnectionMetrics, Readiness, ReadyHandle, Shutdown};
use prometheus_client::registry::Registry;

use crate::{
    admin::{AuditMetrics, Introspection},
    args::Args,
    gateway::{self, ActiveKinds, KindWatch},
    grpc::{self, InboundPolicyServer, outbound::OutboundPolicyServer},
    index::{CONTROL_PLANE_NS_LABEL, Index, outbound::OutboundIndex},
    metrics::{GrpcMetrics, InboundIndexCollector, OutboundIndexCollector, StatusMetrics},
    status::{StatusIndex, StatusWriter, lease},
    webhook::PolicyValidator,
};

/// How long shutdown waits for the status writer to finish its current
/// patch and release its Lease (each API call of the release is bounded by
/// `--patch-timeout-ms`).
const WRITER_STOP_GRACE: Duration = Duration::from_secs(10);

/// The watches the status writer waits for before writing anything (and
/// the Gateway API kinds' first determination, see [`gateway_watches`]).
const STATUS_KINDS: [&str; 5] = [
    "servers",
    "httplocalratelimitpolicies",
    "egressnetworks",
    "services",
    "httproutes",
];

/// Runs the controller until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;
    let client = args
        .kube
        .client()
        .await
        .context("connecting to Kubernetes")?;

    // The original's names at the top (process, `grpc_server_*`,
    // `resource_status_*`); Meridian's own under `policy_`.
    let mut root = Registry::default();
    meridian_runtime::process_metrics::register(&mut root);
    // The memory panels of Linkerd's Health dashboard, from jemalloc.
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::register_metrics(&mut root);
    meridian_runtime::build_info::register(&mut root);
    let grpc_server_metrics = grpc_stream::metrics::GrpcServerMetrics::register(
        &mut root,
        grpc_stream::metrics::CodeNames::Rust,
        grpc::GRPC_METHODS,
    );
    let status_metrics = StatusMetrics::register(&mut root);
    let registry = root.sub_registry_with_prefix("policy");
    let watch_metrics = WatchMetrics::register(registry);
    let grpc_metrics = GrpcMetrics::register(registry);
    let stream_cap = args.grpc_limits.stream_cap();
    stream_cap.register(registry);
    let admission_metrics = admission::Metrics::register(registry);
    let audit_metrics = AuditMetrics::register(registry);
    let peers = ConnectionMetrics::register(registry);
    // Lookups that miss the indexes are settled by the cluster's Service
    // ranges or checked with the API server, within a request budget.
    let service_cidrs = k8s_index::ServiceCidrs::default();
    tokio::spawn(service_cidrs.follow(client.clone(), &watch_metrics));
    let confirmer = k8s_index::MissConfirmer::new(client.clone(), &watch_metrics, registry)
        .with_service_cidrs(service_cidrs);
    let readiness = Readiness::default();
    let tls_ready =
        (!args.admission_controller_disabled).then(|| readiness.register("webhook TLS"));

    let index = Index::shared(args.cluster_info());
    InboundIndexCollector::register(registry, index.clone());
    let outbound = OutboundIndex::shared(outbound_cluster(&args)?);
    OutboundIndexCollector::register(registry, outbound.clone());
    let outbound_index = outbound.clone();
    // Servers and routes also feed the status writer, through the same watches.
    let status_index = StatusIndex::shared();
    status_index
        .write()
        .set_cluster_networks(args.cluster_info().networks);

    // One index serves every watch; only meshed pods matter (and every
    // external workload).
    let watches = [
        // Meshed pods, decoded straight into what the index keeps.
        k8s_index::WatchTask::new(
            "pods",
            kube::Api::<crate::index::PodObject>::all(client.clone()),
            resources::watch_config().labels(CONTROL_PLANE_NS_LABEL),
            index.clone(),
            &watch_metrics,
        ),
        resources::external_workloads(client.clone(), index.clone(), &watch_metrics),
        resources::servers(
            client.clone(),
            Tee::shared(index.clone(), status_index.clone()),
            &watch_metrics,
        ),
        resources::server_authorizations(client.clone(), index.clone(), &watch_metrics),
        resources::authorization_policies(client.clone(), index.clone(), &watch_metrics),
        resources::mesh_tls_authentications(client.clone(), index.clone(), &watch_metrics),
        resources::network_authentications(client.clone(), index.clone(), &watch_metrics),
        resources::http_local_ratelimit_policies(
            client.clone(),
            Tee::shared(index.clone(), status_index.clone()),
            &watch_metrics,
        ),
        resources::http_routes(
            client.clone(),
            Tee::shared(
                index.clone(),
                Tee::shared(outbound.clone(), status_index.clone()),
            ),
            &watch_metrics,
        ),
        resources::services(
            client.clone(),
            Tee::shared(outbound.clone(), status_index.clone()),
            &watch_metrics,
        ),
        resources::egress_networks(
            client.clone(),
            Tee::shared(outbound.clone(), status_index.clone()),
            &watch_metrics,
        ),
    ];
    let watches = Vec::from(watches);
    let mut status_synced = Vec::new();
    let mut caches = Vec::new();
    for watch in watches {
        let name = format!("{} cache", watch.kind);
        let kind = watch.kind.clone();
        let failing = watch.failing.clone();
        let synced = watch.spawn();
        if STATUS_KINDS.contains(&kind.as_str()) {
            status_synced.push(synced.clone());
        }
        caches.push(synced.clone());
        readiness.register_cache(name, synced, failing);
    }
    // The Gateway API kinds are optional: each is watched while its CRD
    // serves a version we read (no restart when the CRDs change).
    let active = ActiveKinds::register(
        registry,
        readiness.register_info("gateway API routes", "none"),
    );
    for (name, (synced, failing)) in gateway_watches(
        &client,
        &GatewayTargets {
            index: index.clone(),
            outbound: outbound.clone(),
            status: status_index.clone(),
        },
        &watch_metrics,
        &active,
    )
    .await
    {
        status_synced.push(synced.clone());
        caches.push(synced.clone());
        readiness.register_cache(format!("{name} cache"), synced, failing);
    }
    // The gRPC APIs answer nothing before every cache has synced once.
    let synced = meridian_runtime::readiness::initial_sync(caches);
    // What the initial lists allocated and dropped goes back to the system
    // once they are indexed.
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::purge_after(synced.clone());

    // The status writer: only the Lease holder writes (and none with
    // --status-writer-disabled, a shadow's flag).
    let writer_task = if args.status_writer_disabled {
        tracing::info!(
            "--status-writer-disabled: writing no status and taking no {} Lease",
            lease::LEASE_NAME
        );
        None
    } else {
        let claimant = std::env::var("HOSTNAME")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(generated_claimant);
        let patch_timeout = Duration::from_millis(args.patch_timeout_ms);
        let (leader_tx, leader_rx) = tokio::sync::watch::channel(false);
        let lease_params = lease::params(&args.control_plane_namespace, &claimant, patch_timeout)
            .context("the status writer's Lease")?;
        // The election stops (and releases the Lease) only once the writer
        // stopped: no patch of ours is in flight when another replica
        // takes over. The Lease is created owned by our Deployment.
        let (stop_lease, lease_shutdown) = Shutdown::new();
        let lease_client = client.clone();
        let deployment = args.policy_deployment_name.clone();
        let elector = tokio::spawn(async move {
            let owner = lease::deployment_owner(
                &lease_client,
                &lease_params.namespace,
                &deployment,
                lease_params.timeout,
            )
            .await;
            let params = lease::LeaseParams {
                owner,
                ..lease_params
            };
            lease::run(lease_client, params, leader_tx, lease_shutdown).await;
        });
        let writer = StatusWriter {
            client: client.clone(),
            index: status_index,
            leader: leader_rx,
            synced: status_synced,
            gateway: active,
            patch_timeout,
            metrics: status_metrics,
        };
        let writer_shutdown = shutdown.clone();
        Some(tokio::spawn(async move {
            writer.run(writer_shutdown).await;
            stop_lease.trigger();
            let _ = elector.await;
        }))
    };

    let grpc_listener = tokio::net::TcpListener::bind(args.grpc_addr)
        .await
        .with_context(|| format!("binding the gRPC server on {}", args.grpc_addr))?;
    let workload_ports_listener = tokio::net::TcpListener::bind(args.workload_ports_addr)
        .await
        .with_context(|| {
            format!(
                "binding the workload-ports server on {}",
                args.workload_ports_addr
            )
        })?;
    let streams = grpc::streams::PolicyStreams::new();
    let policy = Arc::new(
        InboundPolicyServer::new(
            index.clone(),
            args.cluster_networks.clone(),
            shutdown.clone(),
            grpc_metrics.clone(),
        )
        .with_streams(streams.clone())
        .with_confirmer(confirmer.clone()),
    );
    // Watches for names, ports and client namespaces requests made up go
    // within seconds of their last stream ending.
    let swept = outbound.clone();
    meridian_runtime::periodic::spawn_every(
        crate::index::outbound::sweep::SWEEP_INTERVAL_SECS,
        shutdown.clone(),
        move || {
            let dropped = crate::index::outbound::sweep::sweep_shared(&swept);
            if dropped > 0 {
                tracing::debug!(dropped, "dropped unheld outbound watches");
            }
            std::future::ready(())
        },
    );
    let outbound = Arc::new(
        OutboundPolicyServer::new(
            outbound.clone(),
            &args.cluster_domain,
            args.allow_l5d_request_headers,
            shutdown.clone(),
            grpc_metrics.clone(),
        )
        .with_streams(streams.clone())
        .with_confirmer(confirmer),
    );
    let introspection =
        Introspection::new(policy.clone(), outbound.clone(), streams, audit_metrics);
    let audit = introspection.clone();
    meridian_runtime::periodic::spawn_every(
        args.audit_interval_secs,
        shutdown.clone(),
        move || {
            let audit = audit.clone();
            async move {
                // One at a time with `/audit`'s.
                let _ = audit.shared_audit().await;
            }
        },
    );
    crate::original_metrics::register(&mut root, index.clone(), outbound_index, &watch_metrics);
    let admin = AdminServer::bind(args.admin_addr, readiness.clone(), Arc::new(root), &peers)
        .await
        .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;
    let introspection = AdminServer::bind_routes(
        args.introspection_addr,
        "introspection",
        introspection.routes(),
        &peers,
    )
    .await
    .with_context(|| {
        format!(
            "binding the introspection server on {}",
            args.introspection_addr
        )
    })?;

    // Any server failing stops the process; on shutdown all drain.
    let feed_synced = synced.clone();
    let grpc = async {
        grpc::serve(
            grpc_listener,
            &args.grpc_limits,
            peers.listener("grpc"),
            policy,
            outbound,
            stream_cap,
            synced,
            &grpc_server_metrics,
            shutdown.clone(),
        )
        .await;
        anyhow::Ok(())
    };
    let workload_ports = async {
        let service =
            grpc::workload_ports::WorkloadPortsService::new(index.clone(), shutdown.clone());
        grpc::serve_workload_ports(
            workload_ports_listener,
            &args.grpc_limits,
            peers.listener("workload-ports"),
            service,
            feed_synced,
            &grpc_server_metrics,
            shutdown.clone(),
        )
        .await;
        anyhow::Ok(())
    };
    let admin = async { admin.serve(shutdown.clone()).await.context("admin server") };
    let introspection = async {
        introspection
            .serve(shutdown.clone())
            .await
            .context("introspection server")
    };
    let webhook = async {
        let Some(tls_ready) = tls_ready else {
            tracing::info!("admission webhook disabled");
            return Ok(());
        };
        let validator = PolicyValidator::new(args.cluster_info());
        serve_webhook(
            &args,
            validator,
            admission_metrics,
            peers.listener("webhook"),
            tls_ready,
            shutdown.clone(),
        )
        .await
    };
    tokio::try_join!(grpc, workload_ports, admin, introspection, webhook)?;
    // The writer finishes its current patch, then the Lease is released so
    // another replica takes over at once.
    if let Some(task) = writer_task
        && tokio::time::timeout(WRITER_STOP_GRACE, task).await.is_err()
    {
        tracing::warn!("the status writer did not stop in time");
    }
    tracing::info!("stopped");
    Ok(())
}

/// Serves the admission webhook on `--server-addr` with the certificate
/// from `--server-tls-certs`/`--server-tls-key` (waiting for the files,
/// reloading them when they change) until `shutdown`.
async fn serve_webhook(
    args: &Args,
    validator: PolicyValidator,
    metrics: admission::Metrics,
    peers: meridian_runtime::peers::Listener,
    ready: ReadyHandle,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let paths = admission::TlsPaths {
        cert: args.server_tls_certs.clone(),
        key: args.server_tls_key.clone(),
    };
    let Some(certs) =
        admission::CertStore::load_when_available(paths, shutdown.clone().requested()).await
    else {
        return Ok(());
    };
    tokio::spawn(certs.clone().watch(shutdown.clone().requested()));
    let server = admission::HttpsServer::bind(args.server_addr, &certs, peers)
        .await
        .context("binding the admission webhook")?;
    tracing::info!(addr = %server.local_addr()?, "serving policy admission reviews");
    ready.set(true);
    server
        .serve(admission::router(validator, metrics), shutdown)
        .await;
    Ok(())
}

/// The cluster-wide settings of the outbound index, from the flags.
pub fn outbound_cluster(args: &Args) -> anyhow::Result<crate::index::outbound::OutboundCluster> {
    let default_opaque_ports = crate::core::parse_port_set(&args.default_opaque_ports)
        .with_context(|| {
            format!(
                "invalid --default-opaque-ports {:?}",
                args.default_opaque_ports
            )
        })?;
    Ok(crate::index::outbound::OutboundCluster {
        networks: args.cluster_networks.clone(),
        cluster_domain: args.cluster_domain.clone(),
        default_opaque_ports,
        global_egress_network_namespace: args.global_egress_network_namespace.clone(),
    })
}

/// The indexes the Gateway API routes feed.
struct GatewayTargets {
    index: SharedIndex<Index>,
    outbound: SharedIndex<OutboundIndex>,
    status: SharedIndex<StatusIndex>,
}

/// Starts following the four Gateway API route kinds; returns each one's
/// name, first-sync signal and failure. HTTPRoutes and GRPCRoutes feed the inbound
/// index (Server parents), the outbound index (Service parents) and the
/// status writer; TLSRoutes and TCPRoutes the last two. Kinds follow their
/// CRDs, or, when we may not read CRDs (the original chart's RBAC), are
/// probed once now as the original does.
async fn gateway_watches(
    client: &kube::Client,
    targets: &GatewayTargets,
    metrics: &WatchMetrics,
    active: &ActiveKinds,
) -> Vec<(String, gateway::supervisor::KindSignals)> {
    let follow = match gateway::supervisor::may_read_crds(client).await {
        Ok(may) => may,
        Err(error) => {
            // Transient: the CRD watches retry with backoff.
            tracing::warn!(%error, "listing CRDs failed; following them anyway");
            true
        }
    };
    if !follow {
        tracing::warn!(
            "may not read CustomResourceDefinitions: the Gateway API kinds are probed once and not followed"
        );
    }
    let all = Tee::shared(
        targets.index.clone(),
        Tee::shared(targets.outbound.clone(), targets.status.clone()),
    );
    let l4 = Tee::shared(targets.outbound.clone(), targets.status.clone());
    fn one<K, I>(watch: KindWatch<I>, follow: bool) -> (String, gateway::supervisor::KindSignals)
    where
        K: GatewayRoute,
        I: k8s_index::Index<K> + Send + Sync + 'static,
    {
        let signals = if follow {
            watch.spawn::<K>()
        } else {
            watch.spawn_probed::<K>()
        };
        (gateway::supervisor::watch_name::<K>(), signals)
    }
    let watch = |target| KindWatch {
        client: client.clone(),
        target,
        metrics: metrics.clone(),
        active: active.clone(),
    };
    let l4_watch = |target| KindWatch {
        client: client.clone(),
        target,
        metrics: metrics.clone(),
        active: active.clone(),
    };
    vec![
        one::<k8s_api::gateway::HTTPRoute, _>(watch(all.clone()), follow),
        one::<k8s_api::gateway::GRPCRoute, _>(watch(all), follow),
        one::<k8s_api::gateway::TLSRoute, _>(l4_watch(l4.clone()), follow),
        one::<k8s_api::gateway::TCPRoute, _>(l4_watch(l4), follow),
    ]
}

/// A Lease claimant when `HOSTNAME` is unset: unique per process.
fn generated_claimant() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("policy-controller-{}-{nanos:08x}", std::process::id())
}
