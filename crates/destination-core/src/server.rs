//! The `io.linkerd.proxy.destination.Destination` gRPC service: a thin layer
//! that parses requests, subscribes to the index's shared groups and turns
//! group states into a stream of `Update`s.

use std::{pin::Pin, sync::Arc};

use futures::Stream;
use linkerd2_proxy_api::destination::{
    DestinationProfile, GetDestination, Update, destination_server::Destination,
};
use parking_lot::RwLock;
use tokio::sync::watch;
use tonic::{Request, Response, Status};

use crate::{
    authority::{ServiceId, parse_target},
    context_token::ContextToken,
    endpoints_index::{EndpointsIndex, SubscribeError},
    filter::FilterKey,
    metrics::DestinationMetrics,
    publisher::{GroupState, StreamCursor},
};

/// A stream of gRPC messages.
pub type UpdateStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send + 'static>>;

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
    pending: std::collections::VecDeque<Update>,
    started: bool,
    shutdown: watch::Receiver<bool>,
}

#[tonic::async_trait]
impl Destination for DestinationService {
    type GetStream = UpdateStream<Update>;
    type GetProfileStream = UpdateStream<DestinationProfile>;

    async fn get(
        &self,
        request: Request<GetDestination>,
    ) -> Result<Response<Self::GetStream>, Status> {
        let request = request.into_inner();
        let target = parse_target(&request.path, &self.cluster_domain).map_err(|error| {
            self.metrics.invalid_request();
            Status::invalid_argument(format!("invalid authority {:?}: {error}", request.path))
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
            pending: Default::default(),
            started: false,
            shutdown: self.shutdown.clone(),
        };
        let metrics = self.metrics.clone();
        let stream = futures::stream::unfold(state, move |mut state| {
            let metrics = metrics.clone();
            async move {
                loop {
                    if let Some(update) = state.pending.pop_front() {
                        return Some((Ok(update), state));
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
                    let (updates, coalesced) = state.cursor.advance(newest);
                    if coalesced {
                        metrics.coalesced();
                    }
                    state.pending.extend(updates);
                }
            }
        });
        Ok(Response::new(Box::pin(stream)))
    }

    async fn get_profile(
        &self,
        _request: Request<GetDestination>,
    ) -> Result<Response<Self::GetProfileStream>, Status> {
        Err(Status::unimplemented("GetProfile is not implemented yet"))
    }
}
