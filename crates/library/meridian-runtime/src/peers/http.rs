//! One HTTP connection of the admin server or a webhook, served with the
//! deadlines that close bad peers (the gRPC servers are configured in
//! `grpc_stream::server`).
//!
//! - The first request must arrive within [`FIRST_REQUEST_TIMEOUT`], else
//!   the connection is closed and the peer reported (`axum::serve`, used
//!   before, had no deadline at all: a half-open connection was held
//!   forever).
//! - HTTP/1: later request heads within [`IDLE_TIMEOUT`] (hyper's header
//!   read timeout, which it enforces only when given a timer). Longer than
//!   the 90 s after which Go clients (the API server's webhook client,
//!   Prometheus) drop idle connections, so the client closes first and
//!   never sends a POST on a connection we are closing.
//! - HTTP/2: the preface within [`super::PREFACE_TIMEOUT`]
//!   ([`super::PrefaceGuard`]), then keepalive pings every
//!   [`KEEPALIVE_INTERVAL`], answered within [`KEEPALIVE_TIMEOUT`].
//!
//! Connection errors that mean a bad peer (a request that does not parse,
//! no request head in time on a fresh connection, a request cut short) are
//! reported to the listener ([`super::Listener::bad`]); the rest (a client
//! going away) are debug lines.

use std::{
    future::Future,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use hyper::body::Incoming;
use hyper_util::{
    rt::{TokioExecutor, TokioIo, TokioTimer},
    server::conn::auto,
};
use tokio::io::{AsyncRead, AsyncWrite};
use tower::Service as _;

use super::{Listener, PrefaceGuard, Reason};

/// How long a new connection has to deliver its first request.
pub const FIRST_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a kept-alive HTTP/1 connection may wait for its next request
/// (and any later request head may take).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// HTTP/2 keepalive: a ping after this much silence …
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// … must be answered within this, or the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// HTTP/2 streams open at once on one connection, unless a server says
/// otherwise (hyper's own default).
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 200;

/// What a server sets per connection beyond the deadlines above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// HTTP/1: how long the server waits for a request head, idle time
    /// between requests included (hyper starts the clock when it starts
    /// waiting for a head, not at its first byte).
    pub header_read_timeout: Duration,
    /// HTTP/2: how many streams a client may have open at once.
    pub max_concurrent_streams: u32,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            header_read_timeout: IDLE_TIMEOUT,
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
        }
    }
}

/// The HTTP version a connection speaks (from TLS ALPN, or fixed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// Serves `router` on one connection until it ends; when `stop` resolves
/// (shutdown, a certificate rotation) the connection is closed gracefully
/// and awaited. (The caller counts the connection open from its accept:
/// [`Listener::open`].) Uses the default [`Settings`].
pub async fn serve_connection<IO>(
    io: IO,
    protocol: Protocol,
    router: axum::Router,
    listener: &Listener,
    peer: Option<SocketAddr>,
    stop: impl Future<Output = ()>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    serve_connection_with(
        io,
        protocol,
        router,
        listener,
        peer,
        stop,
        Settings::default(),
    )
    .await;
}

/// [`serve_connection`] with the server's own [`Settings`].
pub async fn serve_connection_with<IO>(
    io: IO,
    protocol: Protocol,
    router: axum::Router,
    listener: &Listener,
    peer: Option<SocketAddr>,
    stop: impl Future<Output = ()>,
    settings: Settings,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let served = Arc::new(AtomicUsize::new(0));
    let counted = served.clone();
    let service = hyper::service::service_fn(move |request: http::Request<Incoming>| {
        counted.fetch_add(1, Ordering::Relaxed);
        // An axum Router is always ready.
        let mut router = router.clone();
        async move { router.call(request).await }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(settings.header_read_timeout);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(settings.max_concurrent_streams)
        .keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT);
    tokio::pin!(stop);
    let first_request = tokio::time::sleep(FIRST_REQUEST_TIMEOUT);
    tokio::pin!(first_request);
    let waiting = served.clone();
    let mut armed = true;
    // Runs a connection, closing it gracefully once `stop` resolves, and
    // dropping it if no request came in time.
    macro_rules! drive {
        ($connection:expr) => {{
            let connection = $connection;
            tokio::pin!(connection);
            loop {
                tokio::select! {
                    result = connection.as_mut() => break result,
                    () = &mut stop => {
                        connection.as_mut().graceful_shutdown();
                        break connection.await;
                    }
                    () = &mut first_request, if armed => {
                        armed = false;
                        if waiting.load(Ordering::Relaxed) == 0 {
                            let detail = format!("no request within {FIRST_REQUEST_TIMEOUT:?}");
                            listener.bad(peer, Reason::Silent, &detail);
                            return;
                        }
                    }
                }
            }
        }};
    }
    let result = match protocol {
        Protocol::Http1 => {
            let builder = builder.http1_only();
            drive!(builder.serve_connection(TokioIo::new(io), service))
        }
        Protocol::Http2 => {
            let guarded = PrefaceGuard::new(io, peer, listener.clone(), super::PREFACE_TIMEOUT);
            let builder = builder.http2_only();
            drive!(builder.serve_connection(TokioIo::new(guarded), service))
        }
    };
    if let Err(error) = result {
        report(listener, peer, &*error, served.load(Ordering::Relaxed));
    }
}

/// Reports a connection error: a bad peer to the listener, else a debug line.
fn report(
    listener: &Listener,
    peer: Option<SocketAddr>,
    error: &(dyn std::error::Error + 'static),
    served: usize,
) {
    let Some(hyper) = error.downcast_ref::<hyper::Error>() else {
        tracing::debug!(listener = listener.name(), ?peer, %error, "connection error");
        return;
    };
    let reason = if hyper.is_parse() {
        Some(Reason::Garbage)
    } else if hyper.is_timeout() && served == 0 {
        // Between requests this is only an idle kept-alive connection.
        Some(Reason::Silent)
    } else if hyper.is_incomplete_message() {
        Some(Reason::Truncated)
    } else {
        None
    };
    match reason {
        // (The preface guard reported its own refusals already.)
        Some(reason) => listener.bad(peer, reason, &error_chain(error)),
        None => tracing::debug!(listener = listener.name(), ?peer, %error, "connection error"),
    }
}

/// `error: its source: …`, each level once.
pub fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        let line = inner.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = inner.source();
    }
    text
}
