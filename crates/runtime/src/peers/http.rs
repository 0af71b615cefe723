//! One HTTP connection of the admin server or a webhook, served with the
//! deadlines that close bad peers (the gRPC servers are configured in
//! `grpc_stream::server`).
//!
//! - HTTP/1: a request head must arrive within [`HEADER_READ_TIMEOUT`]
//!   (hyper enforces it only when given a timer, which `axum::serve` does
//!   not give it: an idle or half-open connection was held forever).
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

/// How long an HTTP/1 client has to send a request head, on a new
/// connection or between requests on a kept-alive one.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// HTTP/2 keepalive: a ping after this much silence …
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// … must be answered within this, or the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// The HTTP version a connection speaks (from TLS ALPN, or fixed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// Serves `router` on one connection until it ends; when `stop` resolves
/// (shutdown, a certificate rotation) the connection is closed gracefully
/// and awaited. (The caller counts the connection open from its accept:
/// [`Listener::open`].)
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
        .header_read_timeout(HEADER_READ_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEPALIVE_INTERVAL)
        .keep_alive_timeout(KEEPALIVE_TIMEOUT);
    tokio::pin!(stop);
    // Runs a connection, closing it gracefully once `stop` resolves.
    macro_rules! drive {
        ($connection:expr) => {{
            let connection = $connection;
            tokio::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => result,
                () = &mut stop => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
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
