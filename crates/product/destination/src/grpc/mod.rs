//! The `io.linkerd.proxy.destination.Destination` gRPC service, a thin
//! layer over the index:
//! - [`request`]: request parsing (authority, context token, filter key);
//! - [`get`] and [`get_profile`]: the two streams, both following shared
//!   state through [`subscription`] (one guard, one loop); [`federated`]:
//!   a federated Service's `Get`, following all its members;
//! - [`status`]: every refusal, and its gRPC status, in one place;
//! - [`confirm`]: a lookup that missed the index, checked with the API
//!   server before the stream opens.

use std::sync::Arc;

use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, Update,
    destination_server::{Destination, DestinationServer},
};
use parking_lot::RwLock;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

pub mod confirm;
pub mod federated;
pub mod get;
pub mod get_profile;
pub mod request;
pub mod status;
pub mod streams;
pub mod subscription;

pub use get::StreamCursor;
pub use grpc_stream::FrameStream;
pub use status::REASON_HEADER;

use crate::{index::EndpointsIndex, metrics::DestinationMetrics, multicluster::SharedClusterStore};
use status::RequestError;
use streams::{StreamRegistry, Tokens};

/// A stream of gRPC messages (the generated server's stream type; the
/// framed router answers both RPCs before it is used).
pub type UpdateStream<T> =
    std::pin::Pin<Box<dyn futures::Stream<Item = Result<T, Status>> + Send + 'static>>;

/// The Destination service.
#[derive(Clone)]
pub struct DestinationService {
    index: Arc<RwLock<EndpointsIndex>>,
    cluster_domain: String,
    metrics: DestinationMetrics,
    /// The open streams, for the admin server.
    streams: Arc<StreamRegistry>,
    shutdown: watch::Receiver<bool>,
    /// Linked clusters (none: remote discovery answers NotFound).
    clusters: Option<SharedClusterStore>,
    /// Checks lookups that missed the index with the API server, and the
    /// cluster networks (addresses outside are never checked); none in unit
    /// tests: the index answers as it is.
    confirm: Option<(k8s_index::MissConfirmer, std::sync::Arc<[ipnet::IpNet]>)>,
    /// One copy of each context token the open streams were opened with.
    tokens: Tokens,
}

impl DestinationService {
    /// `shutdown` turning true ends every open stream (OK, end of stream).
    /// (The server holds requests until the first sync: the runtime puts a
    /// `grpc_stream::SyncGateLayer` in front of the service.)
    pub fn new(
        index: Arc<RwLock<EndpointsIndex>>,
        metrics: DestinationMetrics,
        streams: Arc<StreamRegistry>,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let cluster_domain = index.read().config().cluster_domain.clone();
        Self {
            index,
            cluster_domain,
            metrics,
            streams,
            shutdown,
            clusters: None,
            confirm: None,
            tokens: Tokens::default(),
        }
    }

    /// Serves remote-discovery and federated Services from these linked
    /// clusters.
    pub fn with_clusters(mut self, clusters: SharedClusterStore) -> Self {
        self.clusters = Some(clusters);
        self
    }

    /// The service to register with the server.
    pub fn router(self) -> DestinationRouter {
        let service = Arc::new(self);
        let generated = DestinationServer::from_arc(service.clone())
            .max_decoding_message_size(grpc_stream::MAX_REQUEST_BYTES);
        grpc_stream::FramedRouter::new(service, generated)
    }

    /// A refused request: counted if it was invalid, then its status.
    fn refuse(&self, error: RequestError) -> Status {
        if error.is_invalid_request() {
            self.metrics.invalid_request();
        }
        error.into_status()
    }
}

const GET_PATH: &str = "/io.linkerd.proxy.destination.Destination/Get";
const GET_PROFILE_PATH: &str = "/io.linkerd.proxy.destination.Destination/GetProfile";

/// The gRPC service registered with the server: `Get` and `GetProfile` are
/// answered with [`grpc_stream::FramedStream`] bodies (no per-stream encode
/// buffer); every other method goes to the generated server.
pub type DestinationRouter =
    grpc_stream::FramedRouter<DestinationService, DestinationServer<DestinationService>>;

impl grpc_stream::FramedMethods for DestinationService {
    type Request = GetDestination;

    fn is_framed(path: &str) -> bool {
        path == GET_PATH || path == GET_PROFILE_PATH
    }

    async fn open(
        &self,
        path: &str,
        request: GetDestination,
        peer: Option<std::net::SocketAddr>,
    ) -> Result<FrameStream, Status> {
        if path == GET_PROFILE_PATH {
            self.open_profile(request, peer).await
        } else {
            self.open_get(request, peer).await
        }
        .map_err(|error| self.refuse(error))
    }
}

#[tonic::async_trait]
impl Destination for DestinationService {
    type GetStream = UpdateStream<Update>;
    type GetProfileStream = UpdateStream<DestinationProfile>;

    async fn get(
        &self,
        _request: Request<GetDestination>,
    ) -> Result<Response<Self::GetStream>, Status> {
        // Never reached: `DestinationRouter` answers Get with shared,
        // pre-encoded frames (see `get.rs`).
        Err(Status::internal("Get is served by DestinationRouter"))
    }

    async fn get_profile(
        &self,
        _request: Request<GetDestination>,
    ) -> Result<Response<Self::GetProfileStream>, Status> {
        // Never reached: `DestinationRouter` answers GetProfile (see `get_profile.rs`).
        Err(Status::internal(
            "GetProfile is served by DestinationRouter",
        ))
    }
}
