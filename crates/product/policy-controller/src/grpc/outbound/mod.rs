//! The thin tonic layer of `io.linkerd.proxy.outbound.OutboundPolicies`
//! (`Get`, `Watch`) over any [`DiscoverOutboundPolicy`]: validates the
//! request, resolves the target (a Service by ClusterIP or by
//! `<svc>.<ns>.svc[.<cluster-domain>][:port]`, an undeclared port, an
//! egress address followed through its EgressNetwork), and answers with [`crate::proto::outbound`].
//! [`OutboundPolicyRouter`] answers `Watch` with exactly-sized frames (the
//! `grpc-stream` crate), as `WatchPort` is.

use std::{net::IpAddr, num::NonZeroU16, pin::Pin, sync::Arc};

use futures::{Stream, StreamExt};
use grpc_stream::{FrameStream, encode_frame};
use linkerd2_proxy_api::outbound::{
    self as proto,
    outbound_policies_server::{OutboundPolicies, OutboundPoliciesServer},
    traffic_spec,
};
use meridian_runtime::Shutdown;
use tokio_stream::wrappers::WatchStream;

use super::Workload;
use crate::{
    core::{
        DiscoverOutboundPolicy,
        outbound::{OutboundTarget, ServiceTarget},
    },
    metrics::GrpcMetrics,
    proto::outbound::{egress_fallback, to_egress_policy, to_outbound_policy, undefined_port},
};

const GET: &str = "Get";
const WATCH: &str = "Watch";
const WATCH_PATH: &str = "/io.linkerd.proxy.outbound.OutboundPolicies/Watch";

/// The outbound policy service.
pub struct OutboundPolicyServer<D> {
    pub(super) discover: D,
    /// `--cluster-domain`, for authorities.
    cluster_domain: Arc<str>,
    /// `--allow-l5d-request-headers`.
    allow_l5d_request_headers: bool,
    shutdown: Shutdown,
    metrics: GrpcMetrics,
    /// Open `Watch` streams, for the admin server.
    streams: Arc<super::streams::PolicyStreams>,
    /// Checks lookups that missed the index with the API server (none in
    /// unit tests: the index answers as it is).
    pub(super) confirm: Option<k8s_index::MissConfirmer>,
}

type PolicyStream =
    Pin<Box<dyn Stream<Item = Result<proto::OutboundPolicy, tonic::Status>> + Send>>;

impl<D: DiscoverOutboundPolicy> OutboundPolicyServer<D> {
    /// Streams end (with `OK`) when `shutdown` is requested.
    pub fn new(
        discover: D,
        cluster_domain: &str,
        allow_l5d_request_headers: bool,
        shutdown: Shutdown,
        metrics: GrpcMetrics,
    ) -> Self {
        Self {
            discover,
            cluster_domain: cluster_domain.into(),
            allow_l5d_request_headers,
            shutdown,
            metrics,
            streams: super::streams::PolicyStreams::new(),
            confirm: None,
        }
    }

    /// Checks lookups that miss the index with `confirm` (the process's API
    /// client) before answering.
    pub fn with_confirmer(mut self, confirm: k8s_index::MissConfirmer) -> Self {
        self.confirm = Some(confirm);
        self
    }

    /// Lists this server's streams in `streams` (shared with the inbound
    /// server and the admin server).
    pub fn with_streams(mut self, streams: Arc<super::streams::PolicyStreams>) -> Self {
        self.streams = streams;
        self
    }

    /// The tonic service.
    pub fn svc(self) -> OutboundPoliciesServer<Self> {
        OutboundPoliciesServer::new(self)
    }

    /// Resolves a request to a target, and the client's namespace, from the
    /// index as it is (public for the fuzz targets).
    pub fn target(
        &self,
        spec: proto::TrafficSpec,
    ) -> Result<(OutboundTarget, String), tonic::Status> {
        let (asked, source_namespace) = self.parse(spec)?;
        Ok((self.lookup(asked, &source_namespace)?, source_namespace))
    }

    /// [`Self::target`], with a miss checked with the API server first: a
    /// Service (by name or ClusterIP) created a moment ago is answered as
    /// it is, not as missing, whether or not the watch has seen it yet.
    async fn confirmed_target(
        &self,
        spec: proto::TrafficSpec,
    ) -> Result<(OutboundTarget, String), tonic::Status> {
        let (asked, source_namespace) = self.parse(spec)?;
        self.confirm_miss(&asked, &source_namespace).await?;
        Ok((self.lookup(asked, &source_namespace)?, source_namespace))
    }

    /// Validates a request: what it asks about, and the client's namespace.
    fn parse(&self, spec: proto::TrafficSpec) -> Result<(Asked, String), tonic::Status> {
        let target = spec
            .target
            .ok_or_else(|| tonic::Status::invalid_argument("target is required"))?;
        let source_namespace = match spec.source_workload.parse::<Workload>() {
            Ok(Workload::Pod { namespace, .. } | Workload::External { namespace, .. }) => namespace,
            Err(e) => {
                return Err(tonic::Status::invalid_argument(format!(
                    "invalid source_workload: {e}"
                )));
            }
        };
        let asked = match target {
            traffic_spec::Target::Authority(authority) => {
                let (namespace, name, port) = parse_authority(&authority, &self.cluster_domain)?;
                Asked::Service(ServiceTarget {
                    namespace,
                    name,
                    port,
                    source_namespace: source_namespace.clone(),
                })
            }
            traffic_spec::Target::Addr(addr) => {
                let port = u16::try_from(addr.port)
                    .map_err(|_| tonic::Status::invalid_argument("port outside valid range"))?;
                let port = NonZeroU16::new(port)
                    .ok_or_else(|| tonic::Status::invalid_argument("port cannot be zero"))?;
                let ip: IpAddr = addr
                    .ip
                    .ok_or_else(|| {
                        tonic::Status::invalid_argument("traffic target must have an IP")
                    })?
                    .try_into()
                    .map_err(|e| {
                        tonic::Status::invalid_argument(format!("failed to parse target addr: {e}"))
                    })?;
                Asked::Addr(ip, port)
            }
        };
        Ok((asked, source_namespace))
    }

    /// What the index says a request asks about. A Service name always
    /// resolves (a missing Service has its default policy); an address no
    /// Service, EgressNetwork or outside network claims is `NotFound`.
    fn lookup(
        &self,
        asked: Asked,
        source_namespace: &str,
    ) -> Result<OutboundTarget, tonic::Status> {
        match asked {
            Asked::Service(target) => Ok(OutboundTarget::Service(target)),
            Asked::Addr(ip, port) => self
                .discover
                .lookup_ip(ip, port, source_namespace)
                .ok_or_else(|| tonic::Status::not_found("No such service")),
        }
    }

    fn watch_service(
        &self,
        target: &ServiceTarget,
    ) -> tokio::sync::watch::Receiver<Arc<crate::core::outbound::OutboundPolicy>> {
        self.discover.watch_outbound_policy(target)
    }

    fn record<T>(&self, method: &'static str, result: &Result<T, tonic::Status>) {
        let code = result
            .as_ref()
            .map_or_else(|s| s.code(), |_| tonic::Code::Ok);
        self.metrics.request(method, code);
    }

    async fn get_policy(
        &self,
        spec: proto::TrafficSpec,
    ) -> Result<proto::OutboundPolicy, tonic::Status> {
        let result = match self.confirmed_target(spec).await {
            Ok((target, source_ns)) => Ok(self.policy_of(target, &source_ns)),
            Err(status) => Err(status),
        };
        self.record(GET, &result);
        result
    }

    /// The policy the index gives `spec` now (what `Get` answers; not counted
    /// as a request, so the admin server's audit can call it).
    pub fn policy_now(
        &self,
        spec: proto::TrafficSpec,
    ) -> Result<proto::OutboundPolicy, tonic::Status> {
        let (target, source_ns) = self.target(spec)?;
        Ok(self.policy_of(target, &source_ns))
    }

    /// The policy the index gives a resolved target now.
    fn policy_of(&self, target: OutboundTarget, source_ns: &str) -> proto::OutboundPolicy {
        match target {
            OutboundTarget::Service(target) => {
                let rx = self.watch_service(&target);
                let policy = rx.borrow().clone();
                to_outbound_policy(&policy, self.allow_l5d_request_headers)
            }
            OutboundTarget::UndefinedPort {
                namespace,
                name,
                port,
            } => undefined_port(&namespace, &name, port.get()),
            OutboundTarget::Egress(addr) => match self.discover.watch_egress(addr, source_ns) {
                Some(rx) => to_egress_policy(&rx.borrow(), addr, self.allow_l5d_request_headers),
                None => egress_fallback(addr),
            },
        }
    }

    /// The messages of one `Watch` stream: the current policy, then one per
    /// change; it ends on shutdown.
    async fn watch(
        &self,
        spec: proto::TrafficSpec,
    ) -> Result<impl Stream<Item = proto::OutboundPolicy> + Send + use<D>, tonic::Status> {
        let target = self.confirmed_target(spec).await;
        let result = target.map(|(target, source_ns)| {
            match target {
                OutboundTarget::Service(target) => {
                    let allow = self.allow_l5d_request_headers;
                    let rx = self.watch_service(&target);
                    WatchStream::new(rx)
                        .map(move |policy| to_outbound_policy(&policy, allow))
                        .boxed()
                }
                // Fixed answers: sent once, the stream then stays open.
                OutboundTarget::UndefinedPort {
                    namespace,
                    name,
                    port,
                } => futures::stream::once(futures::future::ready(undefined_port(
                    &namespace,
                    &name,
                    port.get(),
                )))
                .chain(futures::stream::pending())
                .boxed(),
                OutboundTarget::Egress(addr) => {
                    match self.discover.watch_egress(addr, &source_ns) {
                        Some(rx) => {
                            let allow = self.allow_l5d_request_headers;
                            WatchStream::new(rx)
                                .map(move |policy| to_egress_policy(&policy, addr, allow))
                                .boxed()
                        }
                        None => {
                            futures::stream::once(futures::future::ready(egress_fallback(addr)))
                                .chain(futures::stream::pending())
                                .boxed()
                        }
                    }
                }
            }
        });
        self.record(WATCH, &result);
        let stream = result?;
        let metrics = self.metrics.clone();
        let guard = metrics.stream_opened(WATCH);
        Ok(stream
            .map(move |policy| {
                // Keep the guard alive as long as the stream.
                let _ = &guard;
                metrics.message_sent(WATCH);
                policy
            })
            .take_until(self.shutdown.clone().requested()))
    }

    async fn watch_frames(&self, spec: proto::TrafficSpec) -> Result<FrameStream, tonic::Status> {
        let stream = self
            .watch(spec)
            .await?
            .map(|policy| Ok(encode_frame(&policy)));
        Ok(Box::pin(stream))
    }
}

/// What an outbound request asks about.
#[derive(Debug)]
pub(super) enum Asked {
    /// A Service port by name.
    Service(ServiceTarget),
    /// An address.
    Addr(IpAddr, NonZeroU16),
}

/// Parses `<svc>.<ns>.svc[.<cluster-domain>][.][:port]` (port 80 when
/// absent). An unparsable authority is `InvalidArgument`; a name of
/// another form is `NotFound`, as in the original (proxies then fall back).
pub fn parse_authority(
    authority: &str,
    cluster_domain: &str,
) -> Result<(String, String, NonZeroU16), tonic::Status> {
    let auth: http::uri::Authority = authority.parse().map_err(|e| {
        tonic::Status::invalid_argument(format!("invalid authority {authority:?}: {e}"))
    })?;
    let host = auth.host().trim_end_matches('.');
    if host.is_empty() {
        return Err(tonic::Status::invalid_argument(
            "authority must have a host",
        ));
    }
    let not_found = || {
        tonic::Status::not_found(format!(
            "authority must be of the form <name>.<namespace>.svc.{cluster_domain}"
        ))
    };
    let mut parts = host.splitn(4, '.');
    let (Some(name), Some(namespace), Some("svc")) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(not_found());
    };
    if name.is_empty() || namespace.is_empty() {
        return Err(not_found());
    }
    if let Some(domain) = parts.next()
        && !domain.eq_ignore_ascii_case(cluster_domain.trim_end_matches('.'))
    {
        return Err(not_found());
    }
    let port = match auth.port_u16() {
        None => NonZeroU16::new(80).ok_or_else(|| tonic::Status::internal("port 80"))?,
        Some(p) => NonZeroU16::new(p)
            .ok_or_else(|| tonic::Status::invalid_argument("port cannot be zero"))?,
    };
    Ok((namespace.to_string(), name.to_string(), port))
}

#[tonic::async_trait]
impl<D: DiscoverOutboundPolicy> OutboundPolicies for OutboundPolicyServer<D> {
    async fn get(
        &self,
        req: tonic::Request<proto::TrafficSpec>,
    ) -> Result<tonic::Response<proto::OutboundPolicy>, tonic::Status> {
        let policy = self.get_policy(req.into_inner()).await?;
        self.metrics.message_sent(GET);
        Ok(tonic::Response::new(policy))
    }

    type WatchStream = PolicyStream;

    async fn watch(
        &self,
        req: tonic::Request<proto::TrafficSpec>,
    ) -> Result<tonic::Response<PolicyStream>, tonic::Status> {
        let stream = OutboundPolicyServer::watch(self, req.into_inner())
            .await?
            .map(Ok);
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}

/// The gRPC service registered with the server: `Watch` is answered with
/// framed bodies (an idle stream holds no encode buffer); `Get` goes to
/// the generated server.
pub type OutboundPolicyRouter<D> = grpc_stream::FramedRouter<
    OutboundPolicyServer<D>,
    OutboundPoliciesServer<OutboundPolicyServer<D>>,
>;

impl<D: DiscoverOutboundPolicy> OutboundPolicyServer<D> {
    /// The service to register with the server.
    pub fn router(self: Arc<Self>) -> OutboundPolicyRouter<D> {
        let server = self;
        let generated = OutboundPoliciesServer::from_arc(server.clone())
            .max_decoding_message_size(grpc_stream::MAX_REQUEST_BYTES);
        grpc_stream::FramedRouter::new(server, generated)
    }
}

impl<D: DiscoverOutboundPolicy> grpc_stream::FramedMethods for OutboundPolicyServer<D> {
    type Request = proto::TrafficSpec;

    fn is_framed(path: &str) -> bool {
        path == WATCH_PATH
    }

    async fn open(
        &self,
        _path: &str,
        spec: proto::TrafficSpec,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<FrameStream, tonic::Status> {
        let request = super::streams::PolicyRequest::Outbound(spec.clone());
        let frames = self.watch_frames(spec).await?;
        Ok(super::streams::listed(&self.streams, request, peer, frames))
    }
}

#[cfg(test)]
mod tests;
