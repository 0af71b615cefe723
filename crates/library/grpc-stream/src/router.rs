//! One router for every server whose streaming methods are answered with
//! shared frames: requests for those methods go to [`FramedMethods::open`]
//! (through [`serve_streaming`]), every other method to the
//! tonic-generated service. The destination (`Get`, `GetProfile`) and the
//! policy controller (`WatchPort`, outbound `Watch`) each implement
//! [`FramedMethods`] instead of writing the routing themselves.

use std::{convert::Infallible, future::Future, net::SocketAddr, pin::Pin, sync::Arc, task::Poll};

use tonic::{Status, server::NamedService};

use crate::{FrameStream, cap::StreamCap, serve_streaming_in};

/// A service's server-streaming methods answered with frames.
pub trait FramedMethods: Send + Sync + 'static {
    /// The request message of these methods.
    type Request: prost::Message + Default;

    /// Whether `path` (`/package.Service/Method`) is one of them.
    fn is_framed(path: &str) -> bool;

    /// Opens the stream of method `path` for `request` from `peer` (the
    /// client's address, when the server runs over TCP). It may wait
    /// (bounded) before answering, e.g. to confirm a lookup that missed its
    /// index with the API server.
    fn open(
        &self,
        path: &str,
        request: Self::Request,
        peer: Option<SocketAddr>,
    ) -> impl Future<Output = Result<FrameStream, Status>> + Send;
}

/// Routes framed methods to `server` and the rest to `generated`.
pub struct FramedRouter<S, G> {
    server: Arc<S>,
    generated: G,
    /// The process's bound on open streams, shared by its proxy-facing
    /// routers (`None`: unbounded, for internal services and tests).
    cap: Option<StreamCap>,
}

impl<S, G: Clone> Clone for FramedRouter<S, G> {
    fn clone(&self) -> Self {
        Self {
            server: self.server.clone(),
            generated: self.generated.clone(),
            cap: self.cap.clone(),
        }
    }
}

impl<S, G> FramedRouter<S, G> {
    /// `generated` is the tonic server of the same service, for the other methods.
    pub fn new(server: Arc<S>, generated: G) -> Self {
        Self {
            server,
            generated,
            cap: None,
        }
    }

    /// Counts this router's streams against `cap`: one beyond it is
    /// answered `RESOURCE_EXHAUSTED` before its request is read.
    pub fn with_cap(mut self, cap: StreamCap) -> Self {
        self.cap = Some(cap);
        self
    }
}

impl<S, G: NamedService> NamedService for FramedRouter<S, G> {
    const NAME: &'static str = G::NAME;
}

impl<S, G> tower::Service<http::Request<tonic::body::Body>> for FramedRouter<S, G>
where
    S: FramedMethods,
    G: tower::Service<
            http::Request<tonic::body::Body>,
            Response = http::Response<tonic::body::Body>,
            Error = Infallible,
        > + Clone
        + Send
        + 'static,
    G::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut std::task::Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let path = request.uri().path().to_string();
        if !S::is_framed(&path) {
            let mut generated = self.generated.clone();
            return Box::pin(async move { generated.call(request).await });
        }
        let slot = match self.cap.as_ref().map(StreamCap::acquire).transpose() {
            Ok(slot) => slot,
            Err(status) => {
                return Box::pin(std::future::ready(Ok(crate::error_response(&status))));
            }
        };
        let server = self.server.clone();
        let peer = request
            .extensions()
            .get::<tonic::transport::server::TcpConnectInfo>()
            .and_then(|info| info.remote_addr());
        Box::pin(async move {
            let open = |message: S::Request| server.open(&path, message, peer);
            // The slot is given back when the response body is dropped.
            Ok(serve_streaming_in(request, slot, open).await)
        })
    }
}
