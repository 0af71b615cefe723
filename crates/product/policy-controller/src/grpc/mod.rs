//! The thin tonic layer: `io.linkerd.proxy.inbound.InboundServerPolicies`
//! (`GetPort`, `WatchPort`) over any [`DiscoverInboundServer`] and
//! `io.linkerd.proxy.outbound.OutboundPolicies` ([`outbound`]), served as
//! plaintext h2c. [`InboundPolicyRouter`] answers `WatchPort` with
//! exactly-sized frames and no per-stream encode buffer (the `grpc-stream`
//! crate); `GetPort` goes to the generated server.

mod confirm;
pub mod outbound;
pub mod streams;
mod workload;
pub mod workload_ports;

use std::{net::SocketAddr, num::NonZeroU16, pin::Pin, sync::Arc};

use grpc_stream::{FrameStream, encode_frame};

use futures::{Stream, StreamExt};
use ipnet::IpNet;
use linkerd2_proxy_api::inbound::{
    self as proto,
    inbound_server_policies_server::{InboundServerPolicies, InboundServerPoliciesServer},
};
use meridian_runtime::Shutdown;
use tokio_stream::wrappers::WatchStream;

pub use self::workload::{InvalidWorkload, Workload};
use crate::{
    core::{DiscoverInboundServer, LookupError, WorkloadKind, WorkloadPort},
    metrics::GrpcMetrics,
    proto::inbound::to_server,
};

/// The inbound policy service.
pub struct InboundPolicyServer<D> {
    discover: D,
    cluster_networks: Arc<[IpNet]>,
    shutdown: Shutdown,
    metrics: GrpcMetrics,
    /// Open `WatchPort` streams, for the admin server.
    streams: Arc<streams::PolicyStreams>,
    /// Checks lookups that missed the index with the API server (none in
    /// unit tests: the index answers as it is).
    confirm: Option<k8s_index::MissConfirmer>,
}

const GET_PORT: &str = "GetPort";
const WATCH_PORT: &str = "WatchPort";

type ServerStream = Pin<Box<dyn Stream<Item = Result<proto::Server, tonic::Status>> + Send>>;

impl<D: DiscoverInboundServer> InboundPolicyServer<D> {
    /// Streams end when `shutdown` is requested, so a graceful shutdown
    /// does not wait for proxies to disconnect.
    pub fn new(
        discover: D,
        cluster_networks: Vec<IpNet>,
        shutdown: Shutdown,
        metrics: GrpcMetrics,
    ) -> Self {
        Self {
            discover,
            cluster_networks: cluster_networks.into(),
            shutdown,
            metrics,
            streams: streams::PolicyStreams::new(),
            confirm: None,
        }
    }

    /// Checks lookups that miss the index with `confirm` (the process's API
    /// client) before answering.
    pub fn with_confirmer(mut self, confirm: k8s_index::MissConfirmer) -> Self {
        self.confirm = Some(confirm);
        self
    }

    /// Lists this server's streams in `streams` (shared with the outbound
    /// server and the admin server).
    pub fn with_streams(mut self, streams: Arc<streams::PolicyStreams>) -> Self {
        self.streams = streams;
        self
    }

    /// The tonic service.
    pub fn svc(self) -> InboundServerPoliciesServer<Self> {
        InboundServerPoliciesServer::new(self)
    }

    /// The index's receiver for `spec`, a workload it does not hold checked
    /// with the API server first; counted as a request.
    async fn lookup(
        &self,
        method: &'static str,
        spec: proto::PortSpec,
    ) -> Result<tokio::sync::watch::Receiver<Arc<crate::core::InboundServer>>, tonic::Status> {
        let result = match target(spec) {
            Ok(target) => match self.confirm_workload(&target).await {
                Ok(()) => self.receiver(&target),
                Err(status) => Err(status),
            },
            Err(status) => Err(status),
        };
        let code = result
            .as_ref()
            .map_or_else(|s| s.code(), |_| tonic::Code::Ok);
        self.metrics.request(method, code);
        result
    }
}

impl<D: DiscoverInboundServer> InboundPolicyServer<D> {
    /// The index's receiver for `spec` (not counted as a request).
    fn watch_now(
        &self,
        spec: proto::PortSpec,
    ) -> Result<tokio::sync::watch::Receiver<Arc<crate::core::InboundServer>>, tonic::Status> {
        target(spec).and_then(|target| self.receiver(&target))
    }

    /// The index's receiver for a workload port (`NotFound` "unknown
    /// server" for a workload it does not hold, as the original).
    fn receiver(
        &self,
        target: &WorkloadPort,
    ) -> Result<tokio::sync::watch::Receiver<Arc<crate::core::InboundServer>>, tonic::Status> {
        self.discover
            .watch_inbound_server(target)
            .map_err(|LookupError::UnknownServer| tonic::Status::not_found("unknown server"))
    }

    /// The `Server` the index gives `spec` now, as `GetPort` answers it
    /// (not counted; the admin server's audit calls it).
    pub fn server_now(&self, spec: proto::PortSpec) -> Result<proto::Server, tonic::Status> {
        let rx = self.watch_now(spec)?;
        let server = to_server(&rx.borrow(), &self.cluster_networks);
        Ok(server)
    }
}

/// Validates a request: the workload (a pod or an external workload) must
/// parse and the port must be in 1-65535.
pub fn target(spec: proto::PortSpec) -> Result<WorkloadPort, tonic::Status> {
    let workload: Workload = spec
        .workload
        .parse()
        .map_err(|e: InvalidWorkload| tonic::Status::invalid_argument(e.to_string()))?;
    let port = u16::try_from(spec.port)
        .ok()
        .and_then(NonZeroU16::new)
        .ok_or_else(|| tonic::Status::invalid_argument(format!("invalid port: {}", spec.port)))?;
    let (kind, namespace, name) = match workload {
        Workload::Pod { namespace, name } => (WorkloadKind::Pod, namespace, name),
        Workload::External { namespace, name } => (WorkloadKind::External, namespace, name),
    };
    Ok(WorkloadPort {
        namespace,
        kind,
        name,
        port,
    })
}

#[tonic::async_trait]
impl<D: DiscoverInboundServer> InboundServerPolicies for InboundPolicyServer<D> {
    async fn get_port(
        &self,
        req: tonic::Request<proto::PortSpec>,
    ) -> Result<tonic::Response<proto::Server>, tonic::Status> {
        let rx = self.lookup(GET_PORT, req.into_inner()).await?;
        let server = to_server(&rx.borrow(), &self.cluster_networks);
        self.metrics.message_sent(GET_PORT);
        Ok(tonic::Response::new(server))
    }

    type WatchPortStream = ServerStream;

    async fn watch_port(
        &self,
        req: tonic::Request<proto::PortSpec>,
    ) -> Result<tonic::Response<ServerStream>, tonic::Status> {
        let stream = self.watch(req.into_inner()).await?.map(Ok);
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}

impl<D: DiscoverInboundServer> InboundPolicyServer<D> {
    /// The messages of one `WatchPort` stream (ends on shutdown).
    async fn watch(
        &self,
        spec: proto::PortSpec,
    ) -> Result<impl Stream<Item = proto::Server> + Send + use<D>, tonic::Status> {
        let rx = self.lookup(WATCH_PORT, spec).await?;
        let networks = self.cluster_networks.clone();
        let metrics = self.metrics.clone();
        let guard = metrics.stream_opened(WATCH_PORT);
        Ok(WatchStream::new(rx)
            .map(move |server| {
                // Keep the guard alive as long as the stream.
                let _ = &guard;
                metrics.message_sent(WATCH_PORT);
                to_server(&server, &networks)
            })
            .take_until(self.shutdown.clone().requested()))
    }

    /// `WatchPort` as a stream of exactly-sized encoded frames.
    async fn watch_frames(&self, spec: proto::PortSpec) -> Result<FrameStream, tonic::Status> {
        let stream = self
            .watch(spec)
            .await?
            .map(|server| Ok(encode_frame(&server)));
        Ok(Box::pin(stream))
    }
}

const WATCH_PORT_PATH: &str = "/io.linkerd.proxy.inbound.InboundServerPolicies/WatchPort";

/// The gRPC service registered with the server: `WatchPort` is answered
/// with [`grpc_stream::FramedStream`] bodies (an idle stream holds no encode
/// buffer); `GetPort` goes to the generated server.
pub type InboundPolicyRouter<D> = grpc_stream::FramedRouter<
    InboundPolicyServer<D>,
    InboundServerPoliciesServer<InboundPolicyServer<D>>,
>;

impl<D: DiscoverInboundServer> InboundPolicyServer<D> {
    /// The service to register with the server.
    pub fn router(self: Arc<Self>) -> InboundPolicyRouter<D> {
        let server = self;
        grpc_stream::FramedRouter::new(
            server.clone(),
            InboundServerPoliciesServer::from_arc(server)
                .max_decoding_message_size(grpc_stream::MAX_REQUEST_BYTES),
        )
    }
}

impl<D: DiscoverInboundServer> grpc_stream::FramedMethods for InboundPolicyServer<D> {
    type Request = proto::PortSpec;

    fn is_framed(path: &str) -> bool {
        path == WATCH_PORT_PATH
    }

    async fn open(
        &self,
        _path: &str,
        spec: proto::PortSpec,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<FrameStream, tonic::Status> {
        let request = streams::PolicyRequest::Inbound(spec.clone());
        let frames = self.watch_frames(spec).await?;
        Ok(streams::listed(&self.streams, request, peer, frames))
    }
}

/// How long a request waits for the first sync before `Unavailable`.
const SYNC_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The methods of the policy APIs, for the original's `grpc_server_*`
/// metrics (Meridian's own `WorkloadPorts` feed is not among them).
pub const GRPC_METHODS: &[grpc_stream::metrics::Method] = {
    use grpc_stream::metrics::RpcType::{ServerStream, Unary};
    &[
        (
            "io.linkerd.proxy.inbound.InboundServerPolicies",
            "GetPort",
            Unary,
        ),
        (
            "io.linkerd.proxy.inbound.InboundServerPolicies",
            "WatchPort",
            ServerStream,
        ),
        ("io.linkerd.proxy.outbound.OutboundPolicies", "Get", Unary),
        (
            "io.linkerd.proxy.outbound.OutboundPolicies",
            "Watch",
            ServerStream,
        ),
    ]
};

/// How long shutdown waits for open streams to send their OK trailers
/// before HTTP/2's graceful shutdown (GOAWAY) starts.
const STREAM_DRAIN_GRACE: std::time::Duration = std::time::Duration::from_secs(5);

/// Serves the inbound and outbound policy APIs on `listener` (plaintext
/// HTTP/2) until `shutdown`. Requests wait until `synced` (every watch cache
/// synced once): nothing is answered from an index that has not seen the
/// cluster yet. The destination's workload-ports feed is not served here
/// (UNIMPLEMENTED): see [`serve_workload_ports`].
#[allow(clippy::too_many_arguments)]
pub async fn serve<D: DiscoverInboundServer, O: crate::core::DiscoverOutboundPolicy>(
    listener: tokio::net::TcpListener,
    limits: &grpc_stream::server::ServerLimits,
    peers: meridian_runtime::peers::Listener,
    server: Arc<InboundPolicyServer<D>>,
    outbound: Arc<outbound::OutboundPolicyServer<O>>,
    stream_cap: grpc_stream::cap::StreamCap,
    synced: tokio::sync::watch::Receiver<bool>,
    metrics: &grpc_stream::metrics::GrpcServerMetrics,
    shutdown: Shutdown,
) {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    tracing::info!(?addr, "policy gRPC server listening");
    // The proxy-facing streams share the process's cap (the destination's
    // feed, served apart, is not counted against it).
    let routes = tonic::service::Routes::new(server.router().with_cap(stream_cap.clone()))
        .add_service(outbound.router().with_cap(stream_cap));
    serve_routes(listener, limits, peers, routes, synced, metrics, shutdown).await
}

/// Serves the destination's workload-ports feed alone on `listener` (the
/// `--workload-ports-addr`, localhost by default: the destination runs in
/// the same pod), with the same limits, sync gate and drain as [`serve`].
pub async fn serve_workload_ports(
    listener: tokio::net::TcpListener,
    limits: &grpc_stream::server::ServerLimits,
    peers: meridian_runtime::peers::Listener,
    workload_ports: workload_ports::WorkloadPortsService,
    synced: tokio::sync::watch::Receiver<bool>,
    metrics: &grpc_stream::metrics::GrpcServerMetrics,
    shutdown: Shutdown,
) {
    let addr: Option<SocketAddr> = listener.local_addr().ok();
    tracing::info!(?addr, "workload-ports gRPC server listening");
    let routes = tonic::service::Routes::new(workload_ports.svc());
    serve_routes(listener, limits, peers, routes, synced, metrics, shutdown).await
}

/// Serves `routes` under the original's `grpc_server_*` metrics (refusals
/// included) and the sync gate. Streams per connection, request sizes and
/// keepalive are [`grpc_stream::server`]'s, one place for all servers; open
/// streams end with OK before GOAWAY.
async fn serve_routes(
    listener: tokio::net::TcpListener,
    limits: &grpc_stream::server::ServerLimits,
    peers: meridian_runtime::peers::Listener,
    routes: tonic::service::Routes,
    synced: tokio::sync::watch::Receiver<bool>,
    metrics: &grpc_stream::metrics::GrpcServerMetrics,
    shutdown: Shutdown,
) {
    let service = tower::ServiceBuilder::new()
        .layer(metrics.layer())
        .layer(grpc_stream::SyncGateLayer::new(
            synced,
            SYNC_WAIT,
            "the policy controller",
        ))
        .service(routes.prepare());
    let drained = grpc_stream::after_streams_end(shutdown.requested(), STREAM_DRAIN_GRACE);
    grpc_stream::serve(listener, peers, limits, service, drained).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::{DETECT_TIMEOUT, InboundServer, ProxyProtocol, ServerRef};
    use tokio::sync::watch;

    struct Fixed(watch::Receiver<Arc<InboundServer>>);

    impl DiscoverInboundServer for Fixed {
        fn watch_inbound_server(
            &self,
            target: &WorkloadPort,
        ) -> Result<watch::Receiver<Arc<InboundServer>>, LookupError> {
            let known = match target.kind {
                WorkloadKind::Pod => "known",
                WorkloadKind::External => "vm",
            };
            if target.name == known {
                Ok(self.0.clone())
            } else {
                Err(LookupError::UnknownServer)
            }
        }
    }

    fn server(name: &str) -> InboundServer {
        InboundServer {
            reference: ServerRef::Server(name.into()),
            protocol: ProxyProtocol::Detect {
                timeout: DETECT_TIMEOUT,
            },
            authorizations: Default::default(),
            http_routes: Default::default(),
            grpc_routes: Default::default(),
            ratelimit: None,
        }
    }

    fn spec(workload: &str, port: u32) -> tonic::Request<proto::PortSpec> {
        tonic::Request::new(proto::PortSpec {
            workload: workload.into(),
            port,
        })
    }

    #[tokio::test]
    async fn status_codes_and_watch_updates() {
        let (tx, rx) = watch::channel(Arc::new(server("a")));
        let (_trigger, shutdown) = Shutdown::new();
        let svc = InboundPolicyServer::new(Fixed(rx), vec![], shutdown, GrpcMetrics::default());
        for (workload, port) in [("bad", 80), ("ns:known", 0), ("ns:known", 65536)] {
            let err = svc
                .get_port(spec(workload, port))
                .await
                .expect_err("invalid");
            assert_eq!(
                err.code(),
                tonic::Code::InvalidArgument,
                "{workload} {port}"
            );
        }
        let err = svc
            .get_port(spec("ns:other", 80))
            .await
            .expect_err("unknown");
        assert_eq!(
            (err.code(), err.message()),
            (tonic::Code::NotFound, "unknown server")
        );
        // The kind is passed on: a pod's name is not an external workload's.
        let err = svc
            .get_port(spec(r#"{"ns":"ns","external_workload":"known"}"#, 80))
            .await
            .expect_err("unknown external workload");
        assert_eq!(
            (err.code(), err.message()),
            (tonic::Code::NotFound, "unknown server")
        );
        let got = svc
            .get_port(spec(r#"{"ns":"ns","external_workload":"vm"}"#, 80))
            .await
            .expect("known external workload");
        assert_eq!(got.get_ref().labels["name"], "a");

        let got = svc
            .get_port(spec(r#"{"ns":"ns","pod":"known"}"#, 80))
            .await
            .expect("ok");
        assert_eq!(got.get_ref().labels["name"], "a");

        let mut stream = svc
            .watch_port(spec("ns:known", 80))
            .await
            .expect("ok")
            .into_inner();
        let first = stream.next().await.expect("first").expect("ok");
        assert_eq!(first.labels["name"], "a");
        tx.send_replace(Arc::new(server("b")));
        let second = stream.next().await.expect("second").expect("ok");
        assert_eq!(second.labels["name"], "b");
        drop(tx);
        assert!(stream.next().await.is_none(), "ends when the pod goes away");
    }

    #[tokio::test]
    async fn watches_end_on_shutdown() {
        let (_tx, rx) = watch::channel(Arc::new(server("a")));
        let (trigger, shutdown) = Shutdown::new();
        let svc = InboundPolicyServer::new(Fixed(rx), vec![], shutdown, GrpcMetrics::default());
        let mut stream = svc
            .watch_port(spec("ns:known", 80))
            .await
            .expect("ok")
            .into_inner();
        assert!(stream.next().await.is_some());
        trigger.trigger();
        assert!(stream.next().await.is_none());
    }
}
