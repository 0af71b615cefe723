//! The accept loop and the per-connection task of both gRPC servers, on h2
//! directly: one task per connection that reads and writes the connection
//! and also polls every stream of it ([`exchange`]), where hyper's server
//! spawned a task per stream and tonic's server a larger task per
//! connection around hyper's.
//!
//! **Why.** Every endpoint change wakes each stream that follows the
//! changed state. With a task per stream, each wake scheduled and polled
//! that task, which handed its frame to h2 and woke the connection's task
//! in turn: two task polls per stream per change, and a task's allocation
//! per stream for as long as it is open. Here the stream's wake is the
//! connection task's wake: one poll writes the frames of every stream of
//! the connection that has one, and a stream is a slot of the connection's
//! set (the lab notes in docs/performance.md have the figures).
//!
//! **What tonic's and hyper's servers did, done the same way here:**
//! - a request's `grpc-timeout` bounds the wait for the response's headers
//!   (tonic's `GrpcTimeout`). Past it, the call is answered `CANCELLED`
//!   "Timeout expired". A stream that has started is not cut.
//! - a service error that is a [`Status`] becomes a gRPC answer with that
//!   status (tonic's `RecoverError`). Any other error resets the stream.
//! - the request carries the connection's [`TcpConnectInfo`] in its
//!   extensions.
//! - a response body is written only as fast as the client's window allows;
//!   a client's `RST_STREAM` drops the stream's answer and body at once.
//! - keepalive PINGs ([`keepalive`]), and h2's settings of
//!   [`crate::server`]'s limits.
//! - on shutdown, accepting stops at once (the listening socket is closed),
//!   every connection is sent GOAWAY, and [`serve`] returns when the last
//!   one has closed.
//!
//! Each request's future is boxed, as tonic's was: a stream's slot is
//! sized for the largest state it passes through, so that state must stay
//! a pointer.

use std::{
    future::Future,
    pin::{Pin, pin},
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use futures::{StreamExt, stream::FuturesUnordered};
use http::{HeaderMap, Request, Response};
use meridian_runtime::peers::Listener;
use tokio::{net::TcpListener, sync::watch};
use tonic::{Status, transport::server::TcpConnectInfo};
use tower::{ServiceExt, util::BoxCloneSyncService};

use crate::server::{
    Connection, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT, MAX_FRAME_SIZE, MAX_HEADER_LIST_SIZE,
    MAX_LOCAL_ERROR_RESET_STREAMS, MAX_PENDING_ACCEPT_RESET_STREAMS, MAX_SEND_BUFFER,
    REQUEST_CONNECTION_WINDOW, REQUEST_STREAM_WINDOW, ServerLimits, accept,
};

mod exchange;
mod keepalive;

use exchange::{Answer, Exchange, RecvBody};
use keepalive::{KeepAlive, Pulse};

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
    let builder = h2_builder(limits);
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
            h2: H2::Handshaking(builder.handshake(connection)),
            streams: FuturesUnordered::new(),
            service,
            keepalive: None,
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

/// h2's server settings of [`crate::server`]'s limits. (Each generated
/// service also caps its request messages at [`crate::MAX_REQUEST_BYTES`]:
/// `max_decoding_message_size` is per service.)
fn h2_builder(limits: &ServerLimits) -> h2::server::Builder {
    // (Not with the release h2: `cargo xtask bench h2-ab`'s second set.)
    #[cfg(not(feature = "pristine-h2"))]
    h2::server::set_release_idle_buffers_default(true);
    let mut builder = h2::server::Builder::new();
    builder
        .max_header_list_size(MAX_HEADER_LIST_SIZE)
        .initial_window_size(REQUEST_STREAM_WINDOW)
        .initial_connection_window_size(REQUEST_CONNECTION_WINDOW)
        .max_frame_size(MAX_FRAME_SIZE)
        .max_send_buffer_size(MAX_SEND_BUFFER)
        .max_pending_accept_reset_streams(MAX_PENDING_ACCEPT_RESET_STREAMS)
        .max_local_error_reset_streams(Some(MAX_LOCAL_ERROR_RESET_STREAMS))
        .max_concurrent_streams(limits.max_concurrent_streams);
    builder
}

/// The server's layers and routes, shared by every connection (each request
/// calls a clone, as tower asks).
type Stack = BoxCloneSyncService<Request<tonic::body::Body>, Response<tonic::body::Body>, BoxError>;

/// A client's HTTP/2 connection, before and after the preface and SETTINGS.
enum H2 {
    Handshaking(h2::server::Handshake<Connection, Bytes>),
    Serving(h2::server::Connection<Connection, Bytes>),
}

/// One connection's task: the connection, its streams, its keepalive, told
/// to go away once the server stops. A struct rather than an `async` block,
/// which would keep a second copy of what it moves into the connection.
struct Serving {
    h2: H2,
    /// The connection's open streams. A stream's wake (its state changed,
    /// or the client's window opened) wakes this task, which polls only the
    /// streams that woke.
    streams: FuturesUnordered<Exchange>,
    service: PerConnection,
    /// Set once the handshake is done.
    keepalive: Option<KeepAlive>,
    /// Resolves when the server stops; `None` once GOAWAY has been asked for.
    stopping: Option<Pin<Box<dyn Future<Output = ()> + Send>>>,
    /// Held until the connection ends (see [`serve`]).
    _open: watch::Receiver<()>,
}

impl Future for Serving {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        let stop = this
            .stopping
            .as_mut()
            .is_some_and(|stopping| stopping.as_mut().poll(cx).is_ready());
        let connection = match &mut this.h2 {
            H2::Handshaking(handshake) => {
                if stop {
                    // Nothing was asked on it yet: close it.
                    return Poll::Ready(());
                }
                match Pin::new(handshake).poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(Err(error)) => {
                        tracing::debug!(%error, "gRPC connection failed its HTTP/2 handshake");
                        return Poll::Ready(());
                    }
                    Poll::Ready(Ok(mut connection)) => {
                        this.keepalive = connection
                            .ping_pong()
                            .map(|p| KeepAlive::new(p, KEEPALIVE_INTERVAL, KEEPALIVE_TIMEOUT));
                        this.h2 = H2::Serving(connection);
                        let H2::Serving(connection) = &mut this.h2 else {
                            unreachable!("just set")
                        };
                        connection
                    }
                }
            }
            H2::Serving(connection) => connection,
        };
        if stop {
            this.stopping = None;
            connection.graceful_shutdown();
        }
        if let Some(keepalive) = this.keepalive.as_mut()
            && keepalive.poll(cx) == Pulse::TimedOut
        {
            tracing::debug!("gRPC client did not answer a keepalive PING; closing");
            connection.abrupt_shutdown(h2::Reason::NO_ERROR);
            this.keepalive = None;
        }
        loop {
            // The streams first, so that what they hand h2 is written by
            // the connection's poll below, in this same wake.
            while let Poll::Ready(Some(())) = this.streams.poll_next_unpin(cx) {}
            match connection.poll_accept(cx) {
                Poll::Ready(Some(Ok((request, respond)))) => {
                    if let Some(keepalive) = this.keepalive.as_mut() {
                        keepalive.record_request();
                    }
                    let answer = this.service.call(request);
                    this.streams.push(Exchange::new(answer, respond));
                }
                Poll::Ready(Some(Err(error))) => {
                    tracing::debug!(%error, "gRPC connection ended with an error");
                    return Poll::Ready(());
                }
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// What one connection calls for each request: the server's shared stack
/// and the connection's addresses.
struct PerConnection {
    service: Arc<Stack>,
    info: TcpConnectInfo,
}

impl PerConnection {
    fn call(&self, request: Request<h2::RecvStream>) -> Answer {
        let (mut parts, body) = request.into_parts();
        parts.extensions.insert(self.info.clone());
        let limit = grpc_timeout(&parts.headers);
        let request = Request::from_parts(parts, tonic::body::Body::new(RecvBody(body)));
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
