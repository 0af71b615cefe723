//! The `io.linkerd.proxy.destination.Destination` gRPC service: a thin layer
//! that parses requests, subscribes to the index's shared groups and turns
//! group states into a stream of `Update`s.

use std::{pin::Pin, sync::Arc};

use futures::{Stream, StreamExt};
use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, Update,
    destination_server::{Destination, DestinationServer},
};
use parking_lot::RwLock;
use std::net::{IpAddr, SocketAddr};
use tokio::sync::watch;
use tonic::{Request, Response, Status};

mod cursor;

pub use cursor::StreamCursor;

use crate::{
    core::{
        FilterKey, ServiceId,
        authority::{AuthorityError, parse_service_name, parse_target, split_host_port},
        context_token::ContextToken,
    },
    index::{
        EndpointsIndex, SubscribeError,
        endpoints::GroupState,
        profiles::{ProfileKey, ProfileLookupError, Resolution},
    },
    metrics::DestinationMetrics,
    proto::{frames::Frames, profile::ProfileState},
};

/// A stream of gRPC messages.
pub type UpdateStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

pub use grpc_stream::FrameStream;

/// The Destination service.
#[derive(Clone)]
pub struct DestinationService {
    index: Arc<RwLock<EndpointsIndex>>,
    cluster_domain: String,
    metrics: DestinationMetrics,
    shutdown: watch::Receiver<bool>,
}

impl DestinationService {
    /// `shutdown` turning true ends every open stream (OK, end of stream).
    /// (The server holds requests until the first sync: the runtime puts a
    /// `grpc_stream::SyncGateLayer` in front of the service.)
    pub fn new(
        index: Arc<RwLock<EndpointsIndex>>,
        metrics: DestinationMetrics,
        shutdown: watch::Receiver<bool>,
    ) -> Self {
        let cluster_domain = index.read().config().cluster_domain.clone();
        Self {
            index,
            cluster_domain,
            metrics,
            shutdown,
        }
    }
}

/// Trailer carrying why an authority was refused.
pub const REASON_HEADER: &str = "meridian-reason";

/// `InvalidArgument` for a malformed request path. The message is the
/// original's (`Invalid authority: <path>`, or its IP-query message), which
/// clients such as `linkerd diagnostics endpoints` print and match; the
/// precise reason travels in the `meridian-reason` trailer and the log.
fn invalid_authority(path: &str, error: &AuthorityError) -> Status {
    tracing::debug!(%path, %error, "refusing an invalid authority");
    let message = match error {
        AuthorityError::IpQuery { .. } => error.to_string(),
        _ => format!("Invalid authority: {path}"),
    };
    let mut status = Status::invalid_argument(message);
    if let Ok(reason) = error.to_string().parse() {
        status.metadata_mut().insert(REASON_HEADER, reason);
    }
    status
}

/// Releases a stream's group when the stream is dropped.
struct Subscription {
    index: Arc<RwLock<EndpointsIndex>>,
    service: ServiceId,
    port: u16,
    key: FilterKey,
    rx: Option<watch::Receiver<Arc<GroupState>>>,
    metrics: DestinationMetrics,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        // Drop the receiver first so the group sees one receiver fewer.
        self.rx.take();
        self.index
            .write()
            .release(&self.service, self.port, &self.key);
        self.metrics.stream_closed();
    }
}

struct StreamState {
    sub: Subscription,
    cursor: StreamCursor,
    /// Frames being written, and the next one to write.
    frames: Frames,
    next: usize,
    started: bool,
    shutdown: watch::Receiver<bool>,
}

impl DestinationService {
    /// Opens a `Get` stream of encoded frames: first the current snapshot of
    /// the target's group, then one step per change (coalesced when the
    /// client is slow). Frames are shared with the group's other streams.
    pub fn open_get(&self, request: GetDestination) -> Result<FrameStream, Status> {
        let target = parse_target(&request.path, &self.cluster_domain).map_err(|error| {
            self.metrics.invalid_request();
            invalid_authority(&request.path, &error)
        })?;
        let token = ContextToken::parse(&request.context_token);
        let key = FilterKey::new(&target, &token, true);
        let rx = self
            .index
            .write()
            .subscribe(&target.service, target.port, key.clone())
            .map_err(|error| match error {
                SubscribeError::ExternalName(_) => {
                    self.metrics.invalid_request();
                    Status::invalid_argument(error.to_string())
                }
            })?;
        tracing::debug!(path = %request.path, node = %token.node_name, "Get stream opened");
        self.metrics.stream_opened();
        let state = StreamState {
            sub: Subscription {
                index: self.index.clone(),
                service: target.service,
                port: target.port,
                key,
                rx: Some(rx),
                metrics: self.metrics.clone(),
            },
            cursor: StreamCursor::new(),
            frames: Arc::from(Vec::new()),
            next: 0,
            started: false,
            shutdown: self.shutdown.clone(),
        };
        let stream = futures::stream::unfold(state, |mut state| async move {
            loop {
                if let Some(frame) = state.frames.get(state.next) {
                    state.next += 1;
                    return Some((Ok(frame.clone()), state));
                }
                let rx = state.sub.rx.as_mut()?;
                if state.started {
                    tokio::select! {
                        changed = rx.changed() => changed.ok()?,
                        _ = state.shutdown.wait_for(|stop| *stop) => return None,
                    }
                }
                state.started = true;
                let newest = rx.borrow_and_update().clone();
                let (frames, coalesced) = state.cursor.advance(newest);
                if coalesced {
                    state.sub.metrics.coalesced();
                }
                state.frames = frames;
                state.next = 0;
            }
        });
        Ok(Box::pin(stream))
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
        // pre-encoded frames (see `open_get`).
        Err(Status::internal("Get is served by DestinationRouter"))
    }

    async fn get_profile(
        &self,
        _request: Request<GetDestination>,
    ) -> Result<Response<Self::GetProfileStream>, Status> {
        // Never reached: `DestinationRouter` answers GetProfile (see `open_profile`).
        Err(Status::internal(
            "GetProfile is served by DestinationRouter",
        ))
    }
}

/// Releases a profile publisher when its stream is dropped.
struct ProfileSubscription {
    index: Arc<RwLock<EndpointsIndex>>,
    key: ProfileKey,
    rx: Option<watch::Receiver<Arc<ProfileState>>>,
}

impl Drop for ProfileSubscription {
    fn drop(&mut self) {
        self.rx.take();
        self.index.write().release_profile(&self.key);
    }
}

impl DestinationService {
    /// Opens a `GetProfile` stream: the current profile first, then a new
    /// one whenever what the proxy sees changes (a slow client only ever
    /// gets the newest).
    pub fn open_profile(&self, request: GetDestination) -> Result<FrameStream, Status> {
        let token = ContextToken::parse(&request.context_token);
        let client_ns = Some(token.ns.as_str()).filter(|ns| !ns.is_empty());
        let invalid = |error: &AuthorityError| {
            self.metrics.invalid_request();
            invalid_authority(&request.path, error)
        };
        let (host, port) = split_host_port(&request.path).map_err(|e| invalid(&e))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let resolution = {
            let index = self.index.read();
            match host.parse::<IpAddr>() {
                Ok(ip) => index.resolve_profile_addr(SocketAddr::new(ip, port), client_ns),
                Err(_) => {
                    let (service, instance) =
                        parse_service_name(host, &self.cluster_domain).map_err(|e| invalid(&e))?;
                    index.resolve_profile_name(&service, instance.as_deref(), port, client_ns)
                }
            }
        }
        .map_err(|error| match error {
            // A target that does not exist is `InvalidArgument`, not
            // `NotFound`: linkerd2-proxy's profile client retries every code
            // but `InvalidArgument` and `FailedPrecondition` forever, so a
            // `NotFound` would leave a proxy (ingress mode) waiting on a name
            // that cannot resolve. With this answer it goes on without a
            // profile at once, and the outbound policy API's `NotFound` for
            // the same name (which the proxy does not retry either) then
            // fails the request fast.
            ProfileLookupError::ServiceNotFound(_)
            | ProfileLookupError::NoSuchInstance { .. }
            | ProfileLookupError::InstanceWithoutPod { .. }
            | ProfileLookupError::ExternalName(_) => Status::invalid_argument(error.to_string()),
            ProfileLookupError::Ambiguous(_) => Status::failed_precondition(error.to_string()),
        })?;
        let key = match resolution {
            Resolution::Empty => {
                // The port is not the Service's: one empty profile, then
                // the stream stays open (the proxy falls back to policy).
                let frame = grpc_stream::encode_frame(&DestinationProfile::default());
                let mut shutdown = self.shutdown.clone();
                let stream = futures::stream::once(futures::future::ready(Ok(frame)))
                    .chain(futures::stream::pending())
                    .take_until(async move {
                        let _ = shutdown.wait_for(|stop| *stop).await;
                    });
                return Ok(Box::pin(stream));
            }
            Resolution::Key(key) => key,
        };
        let rx = self.index.write().subscribe_profile(key.clone());
        let sub = ProfileSubscription {
            index: self.index.clone(),
            key,
            rx: Some(rx),
        };
        let state = (sub, false, self.shutdown.clone());
        let stream =
            futures::stream::unfold(state, |(mut sub, started, mut shutdown)| async move {
                let rx = sub.rx.as_mut()?;
                if started {
                    tokio::select! {
                        changed = rx.changed() => changed.ok()?,
                        _ = shutdown.wait_for(|stop| *stop) => return None,
                    }
                }
                let frame = rx.borrow_and_update().frame.clone();
                Some((Ok(frame), (sub, true, shutdown)))
            });
        Ok(Box::pin(stream))
    }
}

const GET_PATH: &str = "/io.linkerd.proxy.destination.Destination/Get";
const GET_PROFILE_PATH: &str = "/io.linkerd.proxy.destination.Destination/GetProfile";

/// The gRPC service registered with the server: `Get` and `GetProfile` are
/// answered with [`grpc_stream::FramedStream`] bodies (no per-stream encode
/// buffer); every other method goes to the generated server.
pub type DestinationRouter =
    grpc_stream::FramedRouter<DestinationService, DestinationServer<DestinationService>>;

impl DestinationService {
    /// The service to register with the server.
    pub fn router(self) -> DestinationRouter {
        let service = Arc::new(self);
        grpc_stream::FramedRouter::new(service.clone(), DestinationServer::from_arc(service))
    }
}

impl grpc_stream::FramedMethods for DestinationService {
    type Request = GetDestination;

    fn is_framed(path: &str) -> bool {
        path == GET_PATH || path == GET_PROFILE_PATH
    }

    fn open(&self, path: &str, request: GetDestination) -> Result<FrameStream, Status> {
        if path == GET_PROFILE_PATH {
            self.open_profile(request)
        } else {
            self.open_get(request)
        }
    }
}
