//! Wires the flags to tasks: Kubernetes watches into the inbound index and
//! the status index, the inbound policy gRPC server, the admission webhook
//! (`--server-addr`), the leader-elected HTTPRoute status writer, the admin
//! server, and graceful shutdown.

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use k8s_index::{IndexMetrics as WatchMetrics, Tee, resources};
use meridian_runtime::{AdminServer, Readiness, ReadyHandle, Shutdown};
use prometheus_client::registry::Registry;

use crate::{
    args::Args,
    grpc::{self, InboundPolicyServer, outbound::OutboundPolicyServer},
    index::{CONTROL_PLANE_NS_LABEL, Index, outbound::OutboundIndex},
    metrics::{GrpcMetrics, IndexMetrics, OutboundIndexMetrics, StatusMetrics},
    status::{LeaseParams, StatusIndex, StatusWriter, lease},
    webhook::PolicyValidator,
};

/// The watches the status writer waits for before writing anything.
const STATUS_KINDS: [&str; 9] = [
    "servers",
    "httplocalratelimitpolicies",
    "egressnetworks",
    "services",
    "httproutes",
    "httproutes.gateway.networking.k8s.io",
    "grpcroutes",
    "tlsroutes",
    "tcproutes",
];

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
    let outbound_metrics = OutboundIndexMetrics::register(&mut registry);
    let grpc_metrics = GrpcMetrics::register(&mut registry);
    let status_metrics = StatusMetrics::register(&mut registry);
    let admission_metrics = admission::Metrics::register(&mut registry);
    let readiness = Readiness::default();
    let tls_ready =
        (!args.admission_controller_disabled).then(|| readiness.register("webhook TLS"));

    let index = Index::shared(args.cluster_info());
    index.write().set_metrics(index_metrics);
    let outbound = OutboundIndex::shared(outbound_cluster(&args)?);
    outbound.write().set_metrics(outbound_metrics);
    let gateway_kinds = gateway_kinds(&client).await;
    // Servers and routes also feed the status writer, through the same watches.
    let status_index = StatusIndex::shared();
    status_index
        .write()
        .set_cluster_networks(args.cluster_info().networks);

    // One index serves every watch; only meshed pods matter.
    let watches = [
        resources::pods(
            client.clone(),
            Some(CONTROL_PLANE_NS_LABEL),
            index.clone(),
            &watch_metrics,
        ),
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
    let mut watches = Vec::from(watches);
    // The Gateway API kinds are optional, as in the original: watched only
    // when the cluster serves them.
    if gateway_kinds.contains("httproutes") {
        watches.push(resources::gateway_http_routes(
            client.clone(),
            Tee::shared(outbound.clone(), status_index.clone()),
            &watch_metrics,
        ));
    }
    if gateway_kinds.contains("grpcroutes") {
        watches.push(resources::grpc_routes(
            client.clone(),
            Tee::shared(outbound.clone(), status_index.clone()),
            &watch_metrics,
        ));
    }
    if gateway_kinds.contains("tlsroutes") {
        watches.push(resources::tls_routes(
            client.clone(),
            Tee::shared(outbound.clone(), status_index.clone()),
            &watch_metrics,
        ));
    }
    if gateway_kinds.contains("tcproutes") {
        watches.push(resources::tcp_routes(
            client.clone(),
            Tee::shared(outbound.clone(), status_index.clone()),
            &watch_metrics,
        ));
    }
    let mut status_synced = Vec::new();
    let mut caches = Vec::new();
    for watch in watches {
        let name = format!("{} cache", watch.kind);
        let kind = watch.kind.clone();
        let synced = watch.spawn();
        if STATUS_KINDS.contains(&kind.as_str()) {
            status_synced.push(synced.clone());
        }
        caches.push(synced.clone());
        readiness.register_watch(name, synced);
    }
    // The gRPC APIs answer nothing before every cache has synced once.
    let synced = meridian_runtime::readiness::initial_sync(caches);

    // The status writer: only the Lease holder writes.
    let claimant = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(generated_claimant);
    let patch_timeout = Duration::from_millis(args.patch_timeout_ms);
    let (leader_tx, leader_rx) = tokio::sync::watch::channel(false);
    let lease_params = LeaseParams::new(&args.control_plane_namespace, &claimant, patch_timeout);
    tokio::spawn(lease::run(
        client.clone(),
        lease_params,
        leader_tx,
        shutdown.clone(),
    ));
    let writer = StatusWriter {
        client: client.clone(),
        index: status_index,
        leader: leader_rx,
        synced: status_synced,
        patch_timeout,
        metrics: status_metrics,
    };
    tokio::spawn(writer.run(shutdown.clone()));

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
        grpc_metrics.clone(),
    );
    // Either server failing stops the process; on shutdown both drain.
    let grpc = async {
        let workload_ports =
            grpc::workload_ports::WorkloadPortsService::new(index.clone(), shutdown.clone());
        let outbound = OutboundPolicyServer::new(
            outbound.clone(),
            &args.cluster_domain,
            args.allow_l5d_request_headers,
            shutdown.clone(),
            grpc_metrics.clone(),
        );
        grpc::serve(
            grpc_listener,
            policy,
            outbound,
            workload_ports,
            synced,
            shutdown.clone(),
        )
        .await
        .context("gRPC server")
    };
    let admin = async { admin.serve(shutdown.clone()).await.context("admin server") };
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
            tls_ready,
            shutdown.clone(),
        )
        .await
    };
    tokio::try_join!(grpc, admin, webhook)?;
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
    let server = admission::HttpsServer::bind(args.server_addr, &certs)
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

/// The Gateway API route kinds the cluster serves and we may list
/// (`httproutes` and `grpcroutes` of `v1`, `tlsroutes` and `tcproutes` of
/// `v1alpha2`; none when the Gateway API is not installed). A kind is
/// probed with a one-item list rather than through discovery, which can lag
/// behind a CRD that just became established; a kind we may not list is
/// skipped, or `/ready` would never turn true.
async fn gateway_kinds(client: &kube::Client) -> std::collections::BTreeSet<String> {
    let mut kinds = std::collections::BTreeSet::new();
    for (version, kind, plural) in [
        ("v1", "HTTPRoute", "httproutes"),
        ("v1", "GRPCRoute", "grpcroutes"),
        ("v1alpha2", "TLSRoute", "tlsroutes"),
        ("v1alpha2", "TCPRoute", "tcproutes"),
    ] {
        let group = k8s_api::gateway::GROUP;
        let resource = kube::discovery::ApiResource {
            group: group.to_string(),
            version: version.to_string(),
            api_version: format!("{group}/{version}"),
            kind: kind.to_string(),
            plural: plural.to_string(),
        };
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(client.clone(), &resource);
        match api
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await
        {
            Ok(_) => {
                kinds.insert(plural.to_string());
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {
                tracing::info!(%plural, "not served; these routes are not watched");
            }
            Err(error) => tracing::warn!(
                %error,
                %plural,
                "cannot list this Gateway API kind (RBAC?); these routes are not watched"
            ),
        }
    }
    kinds
}

/// A Lease claimant when `HOSTNAME` is unset: unique per process.
fn generated_claimant() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    format!("policy-controller-{}-{nanos:08x}", std::process::id())
}
