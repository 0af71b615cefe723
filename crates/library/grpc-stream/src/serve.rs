//! The accept loop and the per-connection task of both gRPC servers:
//! hyper's HTTP/2 server, driven here instead of by
//! `tonic::transport::Server`.
//!
//! **Why not tonic's server.** It spawns one task per connection that holds
//! hyper's HTTP/1-or-HTTP/2 connection, plus its own copies of the socket,
//! the builder and the service the connection already holds, a max-age
//! timer and a shutdown watch. The task takes jemalloc's 3,072-byte class,
//! and every idle proxy connection pays it. The task here holds hyper's
//! HTTP/2 connection, which holds the socket and the service once, and two
//! pointers, so it takes the 2,048-byte class (the lab note "2026-12-07
//! (night)" in docs/performance.md has the sizes).
//!
//! **What tonic's server did, done the same way here:**
//! - a request's `grpc-timeout` bounds the wait for the response's headers
//!   (tonic's `GrpcTimeout`). Past it, the call is answered `CANCELLED`
//!   "Timeout expired". A stream that has started is not cut.
//! - a service error that is a [`Status`] becomes a gRPC answer with that
//!   status (tonic's `RecoverError`). Any other error resets the stream.
//! - the request carries the connection's [`TcpConnectInfo`] in its
//!   extensions.
//! - on shutdown, accepting stops at once (the listening socket is closed),
//!   every connection is sent GOAWAY, and [`serve`] returns when the last
//!   one has closed.
//!
//! Each request's future is boxed, as tonic's was. The task hyper spawns
//! for a stream lives as long as the stream, sized for the largest state it
//! passes through, so that largest state must stay a pointer.

use std::{
    future::Future,
    pin::{Pin, pin},
    sync::Arc,
    task::{Context, Poll, ready},
    time::Duration,
};

use bytes::Bytes;
use http::{HeaderMap, Request, Response};
use hyper::{body::Incoming, server::conn::http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use meridian_runtime::peers::Listener;
use tokio::{net::TcpListener, sync::watch};
use tonic::{Status, transport::server::TcpConnectInfo};
use tower::{ServiceExt, util::BoxCloneSyncService};

use crate::server::{
    Connection, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE,
    MAX_LOCAL_ERROR_RESET_STREAMS, MAX_PENDING_ACCEPT_RESET_STREAMS, REQUEST_CONNECTION_WINDOW,
    REQUEST_STREAM_WINDOW, ServerLimits, accept,
};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Serves `service` (tonic's `Routes` under the server's layers) on
/// `listener` until `shutdown` resolves, then drains as the module docs say.
/// Connections come from `server::accept`: `TCP_NODELAY`, and a peer that sends
/// no HTTP/2 preface is closed and reported to `peers`.
pub async fn serve<S, B>(
    listener: TcpListener,
    peers: Listener,
    limits: &ServerLimits,
    service: S,
    shutdown: impl Future<Output = ()>,
) where
    S: tower::Service<Request<tonic::body::Body>, Response = Response<B>>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: http_body::Body<Data = Bytes> + Send + 'static,
    B::Error: Into<BoxError>,
{
    let builder = http2_builder(limits);
    let service: Arc<Stack> = Arc::new(BoxCloneSyncService::new(
        service
            .map_err(Into::into)
            .map_response(|response| response.map(tonic::body::Body::new)),
    ));
    // Every connection holds a receiver until it closes: the server waits
    // for the last one to drop.
    let (stopping, open) = watch::channel(());
    let mut shutdown = pin!(shutdown);
    let mut warned = None;
    loop {
        let connection = tokio::select! {
            biased;
            () = &mut shutdown => break,
            connection = accept(&listener, &peers, &mut warned) => connection,
        };
        let service = PerConnection {
            service: service.clone(),
            info: connection.connect_info(),
        };
        let mut wait = open.clone();
        tokio::spawn(Serving {
            connection: builder.serve_connection(TokioIo::new(connection), service),
            stopping: Some(Box::pin(async move {
                let _ = wait.changed().await;
            })),
            _open: open.clone(),
        });
    }
    // New clients are refused from now on.
    drop(listener);
    let _ = stopping.send(());
    drop(open);
    tracing::debug!(
        connections = stopping.receiver_count(),
        "waiting for connections to close"
    );
    stopping.closed().await;
}

/// hyper's HTTP/2 server settings of [`crate::server`]'s limits. (Each
/// generated service also caps its request messages at
/// [`crate::MAX_REQUEST_BYTES`]: `max_decoding_message_size` is per service.)
fn http2_builder(limits: &ServerLimits) -> http2::Builder<TokioExecutor> {
    // (Not with the release h2: `cargo xtask bench h2-ab`'s second set.)
    #[cfg(not(feature = "pristine-h2"))]
    h2::server::set_release_idle_buffers_default(true);
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_concurrent_streams)
        .max_header_list_size(MAX_HEADER_LIST_SIZE)
        .initial_stream_window_size(REQUEST_STREAM_WINDOW)
        .initial_connection_window_size(REQUEST_CONNECTION_WINDOW)
        .adaptive_window(false)
        .max_frame_size(MAX_FRAME_SIZE)
        .keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESET_STREAMS)
        .max_local_error_reset_streams(MAX_LOCAL_ERROR_RESET_STREAMS);
    builder
}

/// The server's layers and routes, shared by every connection (each request
/// calls a clone, as tower asks).
type Stack = BoxCloneSyncService<Request<tonic::body::Body>, Response<tonic::body::Body>, BoxError>;

/// hyper's connection of one client, as [`serve`] spawns it.
type Http2 = http2::Connection<TokioIo<Connection>, PerConnection, TokioExecutor>;

/// One connection's task: the HTTP/2 connection, told to go away once the
/// server stops. A struct rather than an `async` block, which would keep a
/// second copy of what it moves into the connection.
struct Serving {
    connection: Http2,
    /// Resolves when the server stops; `None` once GOAWAY has been asked for.
    stopping: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Held until the connection ends (see [`serve`]).
    _open: watch::Receiver<()>,
}

impl Future for Serving {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        if let Some(stopping) = this.stopping.as_mut()
            && stopping.as_mut().poll(cx).is_ready()
        {
            this.stopping = None;
            Pin::new(&mut this.connection).graceful_shutdown();
        }
        if let Err(error) = ready!(Pin::new(&mut this.connection).poll(cx)) {
            tracing::debug!(%error, "gRPC connection ended with an error");
        }
        Poll::Ready(())
    }
}

/// The service one connection calls for each request: the server's shared
/// stack and the connection's addresses.
struct PerConnection {
    service: Arc<Stack>,
    info: TcpConnectInfo,
}

impl hyper::service::Service<Request<Incoming>> for PerConnection {
    type Response = Response<tonic::body::Body>;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn call(&self, request: Request<Incoming>) -> Self::Future {
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(self.info.clone());
        let limit = grpc_timeout(&parts.headers);
        let request = Request::from_parts(parts, tonic::body::Body::new(body));
        let answer = Stack::clone(&self.service).oneshot(request);
        Box::pin(async move {
            let answer = match limit {
                None => answer.await,
                Some(limit) => match tokio::time::timeout(limit, answer).await {
                    Ok(answer) => answer,
                    Err(_) => Err(Box::new(tonic::TimeoutExpired(())) as BoxError),
                },
            };
            match answer {
                Ok(response) => Ok(response),
                Err(error) => Status::try_from_error(error).map(Status::into_http),
            }
        })
    }
}

/// A request's `grpc-timeout` (gRPC over HTTP/2: at most 8 digits and a
/// unit). A malformed value is ignored, as tonic ignores it.
fn grpc_timeout(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("grpc-timeout")?.to_str().ok()?;
    let split = value.len().checked_sub(1)?;
    let (digits, unit) = value.split_at_checked(split)?;
    if digits.len() > 8 {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout_of(value: &str) -> Option<Duration> {
        let mut headers = HeaderMap::new();
        headers.insert("grpc-timeout", value.parse().expect("a header value"));
        grpc_timeout(&headers)
    }

    #[test]
    fn grpc_timeout_units_and_malformed_values() {
        assert_eq!(timeout_of("2H"), Some(Duration::from_secs(7200)));
        assert_eq!(timeout_of("3M"), Some(Duration::from_secs(180)));
        assert_eq!(timeout_of("5S"), Some(Duration::from_secs(5)));
        assert_eq!(timeout_of("250m"), Some(Duration::from_millis(250)));
        assert_eq!(timeout_of("7u"), Some(Duration::from_micros(7)));
        assert_eq!(
            timeout_of("99999999n"),
            Some(Duration::from_nanos(99_999_999))
        );
        // As tonic (and Go's strconv) read it.
        assert_eq!(timeout_of("+1S"), Some(Duration::from_secs(1)));
        for bad in ["", "S", "123456789S", "10", "10s", "-1S", "1.5S"] {
            assert_eq!(timeout_of(bad), None, "{bad:?}");
        }
        assert_eq!(grpc_timeout(&HeaderMap::new()), None);
    }
}
