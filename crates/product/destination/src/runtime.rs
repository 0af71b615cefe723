//! `destination` flags and wiring: watches into the index, the gRPC server,
//! the admin and introspection servers, the ExternalWorkload EndpointSlice
//! writer, and graceful shutdown.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use clap::{ArgAction, Parser};
use k8s_index::{IndexMetrics, MissConfirmer, Tee, resources};
use meridian_runtime::{
    AdminServer, ConnectionMetrics, GoFlag, GoFlagKind, GoFlagMeaning, GoFlagSet, KubeClientArgs,
    LogArgs, Readiness, Shutdown, goflags::LOG_FLAGS, parse_listen_addr,
};
use parking_lot::RwLock;
use prometheus_client::registry::Registry;

use crate::{
    admin::{AuditMetrics, Introspection},
    config::{TranslatorConfig, TranslatorFlags},
    external_workloads::{self, SliceWriter},
    grpc::{DestinationService, streams::StreamRegistry},
    index::EndpointsIndex,
    metrics::{DestinationMetrics, IndexCollector},
    multicluster::{ClusterStore, ClusterStoreMetrics},
};

/// Flags of `destination`. Names and defaults follow the original controller;
/// its Go-style spellings (`-addr=:8086`, `-enable-ipv6=false`, …) are read
/// through [`GO_FLAGS`].
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

    #[command(flatten)]
    pub grpc_limits: grpc_stream::server::ServerLimits,

    /// gRPC address (plaintext h2c, as proxies and `linkerd diagnostics`
    /// expect): `:PORT` (every interface), `HOST:PORT` or `[IPV6]:PORT`.
    #[arg(long, env = "DESTINATION_ADDR", default_value = ":8086", value_parser = parse_listen_addr)]
    pub addr: SocketAddr,

    /// Admin server address (/live, /ready, /ping, /metrics); the original's `-metrics-addr`.
    #[arg(
        long,
        alias = "metrics-addr",
        env = "DESTINATION_ADMIN_ADDR",
        default_value = ":9996",
        value_parser = parse_listen_addr
    )]
    pub admin_addr: SocketAddr,

    /// Introspection address (/streams, /targets, /audit): read-only JSON
    /// about every open stream, kept off the admin port that Prometheus and
    /// proxies reach. Localhost by default: reach it with `kubectl
    /// port-forward` (as `meridian-cli explain --port-forward` does).
    #[arg(
        long,
        env = "DESTINATION_INTROSPECTION_ADDR",
        default_value = "127.0.0.1:9986",
        value_parser = parse_listen_addr
    )]
    pub introspection_addr: SocketAddr,

    /// Namespace of the control plane (meshed pods carry it in `linkerd.io/control-plane-ns`).
    #[arg(long, default_value = "linkerd")]
    pub controller_namespace: String,

    /// `transparent`, or `transport-header` to force opaque transport to meshed endpoints.
    #[arg(long, default_value = "transparent")]
    pub outbound_transport_mode: String,

    /// Hint H2 to meshed endpoints so proxies upgrade HTTP/1 between them.
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    pub enable_h2_upgrade: bool,

    /// Serve CPU and heap profiles on the admin server (`/debug/pprof/`,
    /// pprof format; the chart's `enablePprof`; docs/profiling.md).
    #[arg(long, action = ArgAction::Set, default_value_t = false)]
    pub enable_pprof: bool,

    /// Export OpenTelemetry spans (gRPC calls, index updates) over OTLP/gRPC
    /// to this `host:port` (the chart's `controller.tracing`; empty: none).
    #[arg(long, default_value = "")]
    pub trace_collector: String,

    /// The chart's `enableEndpointSlices`. Meridian serves from
    /// EndpointSlices only (and runs the leader-elected writer of
    /// EndpointSlices for Services selecting ExternalWorkloads, as the
    /// original does with slices enabled): with `false` the process stays
    /// up, not ready, and says why ([`crate::unsupported`]).
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    pub enable_endpoint_slices: bool,

    /// Do not run the EndpointSlice writer for Services selecting
    /// ExternalWorkloads, nor take its Lease: this destination writes
    /// nothing to the cluster. A Meridian flag, for a shadow deployment
    /// that answers beside the serving control plane without acting on the
    /// cluster (`deploy/shadow`); the serving replicas keep writing.
    #[arg(long)]
    pub endpoint_slice_writer_disabled: bool,

    /// Export the EndpointSlice writer's `workqueue_*` metrics.
    #[arg(long, action = ArgAction::Set, default_value_t = true)]
    pub export_queue_metrics: bool,

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

    /// Networks of the cluster's pods, nodes and Services (comma-separated
    /// CIDRs; Linkerd's `clusterNetworks` default). A `GetProfile` for an
    /// address inside them that the index knows nothing at is checked with
    /// the API server (a Service or pod created a moment ago); addresses
    /// outside never are. A Meridian flag: the chart passes it to the
    /// policy controller only (set it through
    /// `destinationController.additionalArgs` if yours differ).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8"
    )]
    pub cluster_networks: Vec<ipnet::IpNet>,

    /// Where the policy controller serves the workload-ports feed
    /// (`meridian.policy.v1.WorkloadPorts`): its `--workload-ports-addr`,
    /// on localhost since both containers share the pod.
    #[arg(
        long,
        env = "DESTINATION_POLICY_ADDR",
        default_value = "http://127.0.0.1:8091"
    )]
    pub policy_addr: String,

    /// How often the consistency audit compares every group, profile and
    /// stream with the index (seconds; 0 turns the background audit off,
    /// `/audit` on the introspection listener still runs it on demand).
    #[arg(long, default_value_t = 60)]
    pub audit_interval_secs: u64,
}

/// The original destination's flags (`controller/cmd/destination` and
/// `pkg/flags` of Linkerd 2.20), as its Helm chart passes them.
pub const GO_FLAGS: GoFlagSet = GoFlagSet {
    program: "destination",
    flags: &[
        GoFlag::same("addr", GoFlagKind::Value),
        GoFlag {
            name: "metrics-addr",
            kind: GoFlagKind::Value,
            meaning: GoFlagMeaning::Rename("admin-addr"),
        },
        GoFlag::same("kubeconfig", GoFlagKind::Value),
        GoFlag::same("controller-namespace", GoFlagKind::Value),
        GoFlag::same("outbound-transport-mode", GoFlagKind::Value),
        GoFlag::same("enable-h2-upgrade", GoFlagKind::Bool),
        GoFlag::same("enable-endpoint-slices", GoFlagKind::Bool),
        GoFlag::same("enable-ipv6", GoFlagKind::Bool),
        GoFlag::same("identity-trust-domain", GoFlagKind::Value),
        GoFlag::same("cluster-domain", GoFlagKind::Value),
        GoFlag::same("default-opaque-ports", GoFlagKind::Value),
        GoFlag::same("stream-queue-capacity", GoFlagKind::Value),
        GoFlag::same("ext-endpoint-zone-weights", GoFlagKind::Bool),
        // The name of the zone-weights flag before Linkerd 2.15.
        GoFlag {
            name: "experimental-endpoint-zone-weights",
            kind: GoFlagKind::Bool,
            meaning: GoFlagMeaning::Rename("ext-endpoint-zone-weights"),
        },
        GoFlag::same("meshed-http2-client-params", GoFlagKind::Value),
        GoFlag::same("enable-pprof", GoFlagKind::Bool),
        GoFlag::same("export-queue-metrics", GoFlagKind::Bool),
        GoFlag::same("trace-collector", GoFlagKind::Value),
        GoFlag {
            name: "version",
            kind: GoFlagKind::Bool,
            meaning: GoFlagMeaning::Switch("version"),
        },
        LOG_FLAGS[0],
        LOG_FLAGS[1],
    ],
};

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

/// Where `/debug/pprof/heap` comes from in this build (`-enable-pprof`).
fn heap_profiler() -> meridian_runtime::profiling::HeapProfiler {
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    return meridian_runtime::profiling::jemalloc_heap_profiler();
    #[cfg(feature = "mimalloc")]
    return meridian_runtime::profiling::HeapProfiler::Unavailable(
        "this build's allocator is mimalloc, which has no heap profiler (the CPU profile works)",
    );
    #[cfg(not(any(feature = "jemalloc", feature = "mimalloc")))]
    return meridian_runtime::profiling::HeapProfiler::Unavailable(
        "this build's allocator is the system's, which has no heap profiler (the CPU profile works)",
    );
}

/// The methods of the gRPC server, for its `grpc_server_*` metrics.
const GRPC_METHODS: &[grpc_stream::metrics::Method] = &[
    (
        "io.linkerd.proxy.destination.Destination",
        "Get",
        grpc_stream::metrics::RpcType::ServerStream,
    ),
    (
        "io.linkerd.proxy.destination.Destination",
        "GetProfile",
        grpc_stream::metrics::RpcType::ServerStream,
    ),
];

/// How long a request waits for the first sync before `Unavailable` (which
/// proxies retry with a backoff).
const SYNC_WAIT: Duration = Duration::from_secs(10);

/// How long shutdown waits for the EndpointSlice writer to release its
/// Lease (each API call of the release is bounded by the writer's own
/// timeout).
const WRITER_STOP_GRACE: Duration = Duration::from_secs(10);

/// How long shutdown waits for open streams to send their OK trailers
/// before the server's own graceful shutdown starts.
const STREAM_DRAIN_GRACE: Duration = Duration::from_secs(5);

/// The EndpointSlice writer and its Lease claimant (`HOSTNAME`, the pod
/// name), if `HOSTNAME` is set and the writer is not disabled.
fn slice_writer(args: &Args, registry: &mut Registry) -> Option<(SliceWriter, String)> {
    if args.endpoint_slice_writer_disabled {
        tracing::info!(
            "--endpoint-slice-writer-disabled: not running the ExternalWorkload EndpointSlice \
             writer nor taking the {} Lease",
            external_workloads::LEASE_NAME
        );
        return None;
    }
    let Some(claimant) = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()) else {
        tracing::error!(
            "HOSTNAME is not set: not running the ExternalWorkload EndpointSlice writer \
             (it names this replica in the {} Lease); serving continues",
            external_workloads::LEASE_NAME
        );
        return None;
    };
    Some((
        SliceWriter::new(registry, args.export_queue_metrics),
        claimant,
    ))
}

/// Runs the destination until SIGTERM/SIGINT.
pub async fn run(args: Args) -> anyhow::Result<()> {
    if !args.enable_endpoint_slices {
        return crate::unsupported::wait(crate::unsupported::Waiting {
            admin_addr: args.admin_addr,
            kube: args.kube.clone(),
            controller_namespace: args.controller_namespace.clone(),
        })
        .await;
    }
    let config = Arc::new(args.translator_config().context("invalid flags")?);
    let shutdown = Shutdown::on_signals().context("installing signal handlers")?;
    let mut registry = Registry::default();
    meridian_runtime::process_metrics::register(&mut registry);
    // The memory panels of Linkerd's Health dashboard, from jemalloc.
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::register_metrics(&mut registry);
    meridian_runtime::build_info::register(&mut registry);
    // The Kubernetes client's requests, as the original's `client="k8s"`.
    let client_metrics =
        meridian_runtime::http_client_metrics::HttpClientMetrics::register(&mut registry, "k8s");
    let client = args
        .kube
        .instrumented_client(Some(&client_metrics))
        .await
        .context("connecting to Kubernetes")?;
    let grpc_metrics = grpc_stream::metrics::GrpcServerMetrics::register(
        &mut registry,
        grpc_stream::metrics::CodeNames::Go,
        GRPC_METHODS,
    );
    let stream_cap = args.grpc_limits.stream_cap();
    stream_cap.register(&mut registry);
    let index_metrics = IndexMetrics::register(&mut registry);
    let metrics = DestinationMetrics::register(&mut registry);
    let link_metrics = crate::policy_link::LinkMetrics::register(&mut registry);
    let cluster_store_metrics = ClusterStoreMetrics::register(&mut registry);
    let audit_metrics = AuditMetrics::register(&mut registry);
    let peers = ConnectionMetrics::register(&mut registry);
    let readiness = Readiness::default();

    // Lookups that miss the index are settled by the cluster's Service
    // ranges or checked with the API server, within a request budget.
    let service_cidrs = k8s_index::ServiceCidrs::default();
    tokio::spawn(service_cidrs.follow(client.clone(), &index_metrics));
    let confirmer = MissConfirmer::new(client.clone(), &index_metrics, &mut registry)
        .with_service_cidrs(service_cidrs);
    let index = Arc::new(RwLock::new(EndpointsIndex::new(config.clone())));
    registry.register_collector(Box::new(IndexCollector::new(index.clone())));
    crate::original_metrics::register(&mut registry, index.clone(), &index_metrics);
    // Linked clusters: their kubeconfig Secrets in the controller's
    // namespace. Never a readiness gate: a denied or failing Secret watch
    // is reported as degraded while local discovery serves.
    let clusters = Arc::new(RwLock::new(ClusterStore::new(
        config.clone(),
        readiness.clone(),
        index_metrics.clone(),
        cluster_store_metrics,
    )));
    // The ExternalWorkload EndpointSlice writer reads the same Service and
    // EndpointSlice watches as the index (teed), plus its own of workloads.
    let slice_writer = slice_writer(&args, &mut registry);
    let (services, external_workloads) = match &slice_writer {
        Some((writer, _)) => (
            resources::services(
                client.clone(),
                Tee::shared(index.clone(), writer.state()),
                &index_metrics,
            ),
            resources::external_workloads(
                client.clone(),
                Tee::shared(index.clone(), writer.state()),
                &index_metrics,
            ),
        ),
        None => (
            resources::services(client.clone(), index.clone(), &index_metrics),
            resources::external_workloads(client.clone(), index.clone(), &index_metrics),
        ),
    };
    let watches = [
        services,
        // Slices and pods are decoded straight into the facts the index keeps.
        k8s_index::WatchTask::new(
            "endpointslices",
            kube::Api::<crate::k8s::slices::SliceObject>::all(client.clone()),
            resources::watch_config(),
            index.clone(),
            &index_metrics,
        ),
        k8s_index::WatchTask::new(
            "pods",
            kube::Api::<crate::k8s::pods::PodObject>::all(client.clone()),
            resources::watch_config(),
            index.clone(),
            &index_metrics,
        ),
        // Node zones also go to the linked clusters' indexes.
        resources::nodes(
            client.clone(),
            Tee::shared(index.clone(), clusters.clone()),
            &index_metrics,
        ),
        resources::replica_sets(client.clone(), index.clone(), &index_metrics),
        resources::jobs(client.clone(), index.clone(), &index_metrics),
        resources::service_profiles(client.clone(), index.clone(), &index_metrics),
        external_workloads,
    ];
    let mut caches = Vec::with_capacity(watches.len() + 1);
    let register = |watch: k8s_index::WatchTask| {
        let name = format!("{} cache", watch.kind);
        let failing = watch.failing.clone();
        let synced = watch.spawn();
        readiness.register_cache(name, synced.clone(), failing);
        synced
    };
    for watch in watches {
        caches.push(register(watch));
    }
    let mut writer_task = None;
    if let Some((writer, claimant)) = slice_writer {
        // The writer reads the slices it manages through a watch of its own
        // (selected by their label: a few objects, not every slice of the
        // cluster twice); the Services and ExternalWorkloads are teed.
        let written = register(resources::endpoint_slices_labelled(
            client.clone(),
            "endpointslices (written)",
            &format!(
                "{}={}",
                k8s_api::labels::ENDPOINT_SLICE_MANAGED_BY,
                k8s_api::labels::EXTERNAL_WORKLOADS_CONTROLLER
            ),
            writer.state(),
            &index_metrics,
        ));
        // `caches` starts with the Service watch; the ExternalWorkload
        // watch is the last.
        let writer_synced = meridian_runtime::readiness::initial_sync(vec![
            caches[0].clone(),
            written.clone(),
            caches[caches.len() - 1].clone(),
        ]);
        caches.push(written);
        let params = external_workloads::lease_params(&args.controller_namespace, &claimant)
            .context("the EndpointSlice writer's Lease")?;
        writer_task = Some(tokio::spawn(writer.run(
            client.clone(),
            params,
            writer_synced,
            shutdown.clone(),
        )));
    }
    let synced = meridian_runtime::readiness::initial_sync(caches);
    // What the initial lists allocated and dropped goes back to the system
    // once they are indexed.
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::purge_after(synced.clone());

    let secrets = kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(
        client.clone(),
        &args.controller_namespace,
    );
    let secrets = k8s_index::WatchTask::new(
        "secrets",
        secrets,
        resources::watch_config().labels(k8s_api::labels::MULTICLUSTER_CLUSTER_NAME),
        clusters.clone(),
        &index_metrics,
    );
    meridian_runtime::readiness::report_failing(
        readiness.register_degraded("linked clusters"),
        secrets.failing.clone(),
    );
    drop(secrets.spawn());

    let streams = StreamRegistry::new();
    let introspection = Introspection::new(index.clone(), streams.clone(), audit_metrics);
    let audit = introspection.clone();
    meridian_runtime::periodic::spawn_every(
        args.audit_interval_secs,
        shutdown.clone(),
        move || {
            let audit = audit.clone();
            async move {
                // One at a time with `/audit`'s, off the async threads.
                let _ = audit.shared_audit().await;
            }
        },
    );
    let mut admin = AdminServer::bind(
        args.admin_addr,
        readiness.clone(),
        Arc::new(registry),
        &peers,
    )
    .await
    .with_context(|| format!("binding the admin server on {}", args.admin_addr))?;
    if args.enable_pprof {
        admin = admin.with_routes(meridian_runtime::profiling::routes(heap_profiler()));
    }
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
    let listener = tokio::net::TcpListener::bind(args.addr)
        .await
        .with_context(|| format!("binding the gRPC server on {}", args.addr))?;
    tracing::info!(addr = %args.addr, "Destination gRPC server listening");

    let link_index = index.clone();
    let link = crate::policy_link::run(
        args.policy_addr.clone(),
        move |update| link_index.write().apply_server_opaque(update),
        link_metrics,
        readiness.register_degraded("policy link"),
        shutdown.clone(),
    );
    tokio::spawn(link);

    let service = DestinationService::new(index, metrics, streams, shutdown.receiver())
        .with_clusters(clusters)
        .with_confirmer(confirmer, args.cluster_networks.clone());
    let grpc = tower::ServiceBuilder::new()
        // `-trace-collector`: a span per request, as the original's.
        .layer(grpc_stream::spans::GrpcSpanLayer::new(
            !args.trace_collector.is_empty(),
        ))
        // The original's `grpc_server_*` metrics, refusals included.
        .layer(grpc_metrics.layer())
        // Nothing is answered from an index that has not synced once.
        .layer(grpc_stream::SyncGateLayer::new(
            synced,
            SYNC_WAIT,
            "the destination",
        ))
        .service(tonic::service::Routes::new(service.router().with_cap(stream_cap)).prepare());
    // Streams per connection, request sizes, keepalive: one place for both servers.
    let grpc = grpc_stream::serve(
        listener,
        // TCP_NODELAY; garbage and half-open peers closed and reported.
        peers.listener("grpc"),
        &args.grpc_limits,
        grpc,
        // Open streams end with OK first; GOAWAY only after them.
        grpc_stream::after_streams_end(shutdown.clone().requested(), STREAM_DRAIN_GRACE),
    );
    let ((), admin, introspection) = tokio::join!(
        grpc,
        admin.serve(shutdown.clone()),
        introspection.serve(shutdown)
    );
    if let Some(task) = writer_task {
        // It finishes its current Service, then releases the Lease so
        // another replica takes over at once.
        if tokio::time::timeout(WRITER_STOP_GRACE, task).await.is_err() {
            tracing::warn!("the EndpointSlice writer did not stop in time");
        }
    }
    admin.context("admin server")?;
    introspection.context("introspection server")?;
    tracing::info!("stopped");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Args {
        let (args, _) = GO_FLAGS
            .try_parse::<Args, _, _>(args.iter().copied())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        args
    }

    /// The container args of `charts/linkerd-control-plane/templates/destination.yaml`
    /// (Linkerd 2.20) with the chart's default values, and the optional ones.
    const CHART_ARGS: &[&str] = &[
        "destination",
        "-addr=:8086",
        "-controller-namespace=linkerd",
        "-outbound-transport-mode=transport-header",
        "-enable-h2-upgrade=true",
        "-log-level=info",
        "-log-format=plain",
        "-enable-endpoint-slices=true",
        "-cluster-domain=cluster.local",
        "-identity-trust-domain=cluster.local",
        "-default-opaque-ports=25,587,3306,4444,5432,6379,9300,11211",
        "-enable-ipv6=false",
        "-enable-pprof=false",
        r#"--meshed-http2-client-params={"keep_alive":{"interval":{"seconds":10},"timeout":{"seconds":3},"while_idle":true}}"#,
        "-stream-queue-capacity=250",
    ];

    #[test]
    fn chart_args_parse() {
        // As the image's entrypoint sees them (program name, then args) and
        // with the chart's `destination` subcommand word in front.
        for prefix in [&["destination"][..], &["/controller"]] {
            let line: Vec<&str> = prefix.iter().chain(CHART_ARGS).copied().collect();
            let (args, normalised) = GO_FLAGS
                .try_parse::<Args, _, _>(line.iter().copied())
                .unwrap_or_else(|e| panic!("{line:?}: {e}"));
            assert_eq!(args.addr.port(), 8086);
            assert!(args.addr.ip().is_unspecified());
            assert_eq!(args.admin_addr.port(), 9996, "default admin address");
            assert!(args.admin_addr.ip().is_unspecified());
            assert_eq!(
                args.introspection_addr,
                "127.0.0.1:9986".parse().expect("addr"),
                "introspection on localhost by default"
            );
            assert_eq!(args.policy_addr, "http://127.0.0.1:8091");
            assert_eq!(args.log.log_level, "info");
            assert_eq!(args.stream_queue_capacity, 250);
            let config = args.translator_config().expect("config");
            assert_eq!(config.controller_namespace, "linkerd");
            assert!(config.force_opaque_transport());
            assert!(config.enable_h2_upgrade && !config.enable_ipv6);
            assert!(config.default_opaque_ports.contains(11211));
            assert!(config.meshed_http2_client_params.is_some());
            assert!(!args.enable_pprof && args.trace_collector.is_empty());
            assert!(normalised.ignored.is_empty(), "{:?}", normalised.ignored);
        }
    }

    #[test]
    fn deploy_args_parse() {
        let line = test_support::deploy::destination_pod_command("destination");
        let (args, normalised) = GO_FLAGS
            .try_parse::<Args, _, _>(line.iter().cloned())
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!(args.addr.port(), 8086);
        assert_eq!(args.admin_addr.port(), 9996);
        assert_eq!(
            args.translator_config()
                .expect("config")
                .controller_namespace,
            "linkerd"
        );
        assert!(normalised.ignored.is_empty());
        // The chart's list, as unit-tested above, is what deploy/ runs.
        assert_eq!(line, CHART_ARGS[..CHART_ARGS.len() - 1]);
    }

    /// The shadow's flag (`deploy/shadow`), after the chart's Go-style ones.
    #[test]
    fn the_shadow_disables_the_slice_writer() {
        let line: Vec<&str> = CHART_ARGS
            .iter()
            .copied()
            .chain(["--endpoint-slice-writer-disabled"])
            .collect();
        assert!(parse(&line).endpoint_slice_writer_disabled);
        assert!(!parse(CHART_ARGS).endpoint_slice_writer_disabled);
    }

    #[test]
    fn every_flag_of_the_original_is_accepted() {
        let args = parse(&[
            "destination",
            "-metrics-addr=127.0.0.1:9000",
            "-kubeconfig=/tmp/kubeconfig",
            "-ext-endpoint-zone-weights",
            "-experimental-endpoint-zone-weights=true",
            "-export-queue-metrics=false",
            "-trace-collector",
            "collector.linkerd-jaeger:55678",
            "-enable-pprof",
            "-log-format=json",
            "-log-level=debug",
            "-version=false",
        ]);
        assert_eq!(args.admin_addr, "127.0.0.1:9000".parse().expect("addr"));
        assert_eq!(
            args.kube.kubeconfig.as_deref(),
            Some(std::path::Path::new("/tmp/kubeconfig"))
        );
        assert!(args.ext_endpoint_zone_weights);
        assert!(args.enable_pprof, "-enable-pprof alone is true");
        assert_eq!(args.trace_collector, "collector.linkerd-jaeger:55678");
        assert_eq!(args.log.log_format, meridian_runtime::LogFormat::Json);
        let err = GO_FLAGS
            .try_parse::<Args, _, _>(["destination", "-enable-turbo=true"])
            .expect_err("not a flag");
        assert!(
            err.to_string()
                .contains("flag provided but not defined: -enable-turbo"),
            "{err}"
        );
    }

    #[test]
    fn meridian_flags_still_parse() {
        let args = parse(&[
            "destination",
            "--addr=[::1]:8086",
            "--admin-addr",
            "0.0.0.0:9996",
            "--policy-addr=http://localhost:8090",
            "--enable-ipv6=false",
            "--kube-context=kind",
        ]);
        assert_eq!(args.addr, "[::1]:8086".parse().expect("addr"));
        assert_eq!(args.admin_addr, "0.0.0.0:9996".parse().expect("addr"));
        assert_eq!(args.kube.context.as_deref(), Some("kind"));
        assert!(!args.enable_ipv6);
        let err = GO_FLAGS
            .try_parse::<Args, _, _>(["destination", "--addr=8086"])
            .expect_err("no port");
        assert!(err.to_string().contains("expected :PORT"), "{err}");
    }
}
