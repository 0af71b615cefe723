//! A control-plane client shaped like linkerd2-proxy's: one HTTP/2
//! connection per proxy holding a handful of streams, with the proxy's
//! HTTP/2 settings (read from linkerd2-proxy's source for behaviour:
//! `linkerd/app/src/env.rs` gives every control-plane client fixed flow
//! control, a 65,535-byte stream window (the protocol default) and a 1 MiB
//! connection window; `linkerd/proxy/http/src/h2.rs` builds hyper's h2
//! client with them, hyper's default frame size (16 KiB) and header table,
//! and no PING keepalive for control connections; the TCP connection sets
//! `TCP_NODELAY`).
//!
//! Written against hyper directly (not tonic's `Channel`, whose per-channel
//! buffer task and decoding would cost the client more than the server
//! under test on the same two cores): a stream sends its request as one
//! frame and counts the length-prefixed messages it receives, without
//! decoding them.
//!
//! Every stream and connection end is counted with its reason
//! ([`crate::ends`]): nothing the server or the transport does to a stream
//! goes unseen.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Instant,
};

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::sync::mpsc::UnboundedSender;

use crate::ends;

/// linkerd2-proxy's default HTTP/2 stream window (the protocol default).
pub const STREAM_WINDOW: u32 = 65_535;
/// linkerd2-proxy's default HTTP/2 connection window (1 MiB).
pub const CONNECTION_WINDOW: u32 = 1_048_576;

/// One proxy's connection to a control-plane server.
pub type Conn = hyper::client::conn::http2::SendRequest<Full<Bytes>>;

/// Opens `n` connections to `addr` (a few handshakes at a time).
pub async fn connect(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<Conn>> {
    stream::iter(0..n)
        .map(|_| connect_one(addr))
        .buffered(32)
        .try_collect()
        .await
}

/// One of the connections a benchmark holds for its whole run: any end
/// before its teardown phase is unexpected.
async fn connect_one(addr: SocketAddr) -> anyhow::Result<Conn> {
    connect_inner(addr, STREAM_WINDOW, CONNECTION_WINDOW, false).await
}

/// One connection to `addr` with these receive windows instead of the
/// proxy's (the overload bench's stalled clients use tiny ones), which the
/// caller lets go when done: its clean close is expected.
pub async fn connect_with_windows(
    addr: SocketAddr,
    stream_window: u32,
    connection_window: u32,
) -> anyhow::Result<Conn> {
    connect_inner(addr, stream_window, connection_window, true).await
}

async fn connect_inner(
    addr: SocketAddr,
    stream_window: u32,
    connection_window: u32,
    disposable: bool,
) -> anyhow::Result<Conn> {
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    tcp.set_nodelay(true)?;
    let (tx, conn) = hyper::client::conn::http2::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .initial_stream_window_size(stream_window)
        .initial_connection_window_size(connection_window)
        .handshake(TokioIo::new(tcp))
        .await?;
    tokio::spawn(async move {
        match conn.await {
            // hyper does not tell a GOAWAY(NO_ERROR) from the server from
            // this client dropping the connection: both are a clean close.
            Ok(()) => ends::connection_ended(
                "closed cleanly (the client let go, or GOAWAY NO_ERROR from the server)".into(),
                disposable,
            ),
            Err(error) => ends::connection_ended(ends::describe(&error), false),
        }
    });
    Ok(tx)
}

/// The request of a server-streaming call: `path` and one encoded frame.
pub fn request(path: &str, frame: Bytes) -> http::Request<Full<Bytes>> {
    let mut request = http::Request::new(Full::new(frame));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = http::Uri::builder()
        .scheme("http")
        .authority("linkerd-dst-headless.linkerd.svc.cluster.local:8086")
        .path_and_query(path)
        .build()
        .unwrap_or_default();
    let headers = request.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/grpc"),
    );
    headers.insert("te", http::HeaderValue::from_static("trailers"));
    request
}

/// One length-prefixed gRPC frame holding `message`.
pub fn frame<M: prost::Message>(message: &M) -> Bytes {
    let body = message.encode_to_vec();
    let mut out = Vec::with_capacity(5 + body.len());
    out.push(0);
    out.extend_from_slice(&u32::try_from(body.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(&body);
    Bytes::from(out)
}

/// Makes one server-streaming call of `path` with `frame` on `conn`; the
/// response body is the stream of its messages (see [`Messages`]).
pub async fn call(conn: &Conn, path: &str, frame: Bytes) -> anyhow::Result<hyper::body::Incoming> {
    let mut conn = conn.clone();
    conn.ready().await?;
    let response = conn.send_request(request(path, frame)).await?;
    Ok(response.into_body())
}

/// Why a call of [`call`] failed, for [`ends`].
pub fn call_failure(error: &anyhow::Error) -> String {
    match error.downcast_ref::<hyper::Error>() {
        Some(hyper) => format!("failed to open: {}", ends::describe(hyper)),
        None => format!("failed to open: {error}"),
    }
}

/// The `grpc-status` of trailers (or of a trailers-only response).
fn grpc_status(headers: &http::HeaderMap) -> String {
    headers
        .get("grpc-status")
        .and_then(|v| v.to_str().ok())
        .map_or_else(|| "none".to_string(), str::to_string)
}

/// Reads a call's response until its stream ends, handing each DATA frame
/// to `on_data`, and returns why it ended, for [`ends`]. `on_data` returns
/// `false` when the benchmark no longer reads (its run is over).
pub async fn read_to_end(
    body: &mut hyper::body::Incoming,
    mut on_data: impl FnMut(&Bytes) -> bool,
) -> String {
    let mut status = None;
    loop {
        let frame = match body.frame().await {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return ends::describe(&error),
            None => {
                return format!(
                    "ended by the server (grpc-status {})",
                    status.as_deref().unwrap_or("none")
                );
            }
        };
        if let Some(trailers) = frame.trailers_ref() {
            status = Some(grpc_status(trailers));
        }
        if let Some(data) = frame.data_ref()
            && !on_data(data)
        {
            return "the benchmark stopped reading".to_string();
        }
    }
}

/// Reads `body` until its first complete message.
pub async fn first_message(body: &mut hyper::body::Incoming) -> anyhow::Result<()> {
    let mut messages = Messages::default();
    while let Some(frame) = body.frame().await {
        if let Some(data) = frame?.data_ref()
            && messages.feed(data) > 0
        {
            return Ok(());
        }
    }
    anyhow::bail!("the stream ended before its first message")
}

/// Opens one server-streaming call of `path` with `frame` on `conn`, in its
/// own task: counts `ready` once the first message arrived, then, if `key`
/// is given, sends `(key, arrival time)` on `events` for every later one.
pub fn open(
    conn: &Conn,
    path: &'static str,
    frame: Bytes,
    key: Option<usize>,
    events: &UnboundedSender<(usize, Instant)>,
    ready: &Arc<AtomicUsize>,
) {
    let conn = conn.clone();
    let events = events.clone();
    let ready = ready.clone();
    tokio::spawn(async move {
        let mut body = match call(&conn, path, frame).await {
            Ok(body) => body,
            Err(error) => {
                ends::stream_ended(call_failure(&error), key);
                return;
            }
        };
        let (mut messages, mut started) = (Messages::default(), false);
        let end = read_to_end(&mut body, |data| {
            let mut n = messages.feed(data);
            if n == 0 {
                return true;
            }
            let at = Instant::now();
            if !started {
                started = true;
                ready.fetch_add(1, Ordering::Relaxed);
                n -= 1;
            }
            // Stops when the benchmark no longer listens.
            key.is_none_or(|key| (0..n).all(|_| events.send((key, at)).is_ok()))
        })
        .await;
        ends::stream_ended(end, key);
    });
}

/// Counts complete length-prefixed gRPC messages in a byte stream.
#[derive(Default)]
pub struct Messages {
    header: [u8; 5],
    have: usize,
    remaining: usize,
}

impl Messages {
    /// Feeds `data`; returns how many messages it completed.
    pub fn feed(&mut self, mut data: &[u8]) -> usize {
        let mut done = 0;
        while !data.is_empty() {
            if self.have < 5 {
                let take = (5 - self.have).min(data.len());
                self.header[self.have..self.have + take].copy_from_slice(&data[..take]);
                self.have += take;
                data = &data[take..];
                if self.have == 5 {
                    let [_, a, b, c, d] = self.header;
                    self.remaining = u32::from_be_bytes([a, b, c, d]) as usize;
                    if self.remaining == 0 {
                        done += 1;
                        self.have = 0;
                    }
                }
                continue;
            }
            let take = self.remaining.min(data.len());
            self.remaining -= take;
            data = &data[take..];
            if self.remaining == 0 {
                done += 1;
                self.have = 0;
            }
        }
        done
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_counted_across_and_within_frames() {
        let msg = |len: usize| {
            let mut v = vec![0u8];
            v.extend_from_slice(&(len as u32).to_be_bytes());
            v.extend(std::iter::repeat_n(7u8, len));
            v
        };
        let mut all = msg(3);
        all.extend(msg(0));
        all.extend(msg(20));
        let mut counter = Messages::default();
        assert_eq!(counter.feed(&all), 3);
        // Split at every byte.
        let mut counter = Messages::default();
        let total: usize = all
            .iter()
            .map(|b| counter.feed(std::slice::from_ref(b)))
            .sum();
        assert_eq!(total, 3);
        // Split mid-header and mid-body.
        let mut counter = Messages::default();
        assert_eq!(counter.feed(&all[..2]), 0);
        assert_eq!(counter.feed(&all[2..13]), 2);
        assert_eq!(counter.feed(&all[13..]), 1);
    }
}
