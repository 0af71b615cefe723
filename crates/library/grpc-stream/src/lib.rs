//! Server-streaming gRPC responses with no per-stream encode buffer.
//!
//! tonic's generated servers encode every stream's messages through a
//! buffer that starts at 8 KiB and keeps the size of the largest message
//! sent (a full snapshot of a large Service), for the life of the stream.
//! With tens of thousands of long-lived `Get` streams that dominates memory.
//! Here each message is encoded into its own exactly-sized frame, which is
//! freed as soon as HTTP/2 has written it, so an idle stream holds no
//! encoded bytes at all; a message sent to many streams is encoded once and
//! the same frame is written to each.
//!
//! Servers route their streaming method to [`serve_streaming`] and every
//! other method to the tonic-generated service.
//!
//! On shutdown, servers end their open streams first (each with
//! `grpc-status: 0`) and only then start HTTP/2's graceful shutdown
//! ([`after_streams_end`]): a client that sees GOAWAY before its stream's
//! trailers may cancel the stream itself, which a proxy then reports as
//! `CANCELLED` where the original control plane ends streams with `OK`.

use std::{
    future::Future,
    pin::Pin,
    sync::atomic::{AtomicUsize, Ordering},
    task::{Context, Poll},
    time::Duration,
};

pub mod cap;
pub mod metrics;
pub mod registry;
mod router;
mod serve;
pub mod server;
pub mod spans;
mod sync_gate;

pub use router::{FramedMethods, FramedRouter};
pub use serve::serve;
pub use sync_gate::{SyncGate, SyncGateLayer};

use bytes::{BufMut, Bytes, BytesMut};
use futures::Stream;
use http::{HeaderMap, HeaderValue};
use http_body::Frame;
use prost::Message;
use tonic::Status;

/// Largest request message accepted (a `GetDestination` is a few hundred
/// bytes): by [`serve_streaming`], and by the generated services through
/// their `max_decoding_message_size` (see [`server`]).
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

const GRPC_CONTENT_TYPE: &str = "application/grpc";

/// Decodes a unary request body (one uncompressed length-prefixed message).
pub fn decode_request<M: Message + Default>(body: &[u8]) -> Result<M, Status> {
    let [compressed, a, b, c, d, rest @ ..] = body else {
        return Err(Status::invalid_argument(
            "request body is not a gRPC message",
        ));
    };
    if *compressed != 0 {
        return Err(Status::unimplemented(
            "compressed requests are not supported",
        ));
    }
    let len = u32::from_be_bytes([*a, *b, *c, *d]) as usize;
    if rest.len() != len {
        return Err(Status::invalid_argument(format!(
            "gRPC message length {len} does not match the {} bytes received",
            rest.len()
        )));
    }
    M::decode(rest).map_err(|e| Status::invalid_argument(format!("malformed request: {e}")))
}

/// One length-prefixed gRPC frame holding `message`, exactly sized.
pub fn encode_frame<M: Message>(message: &M) -> Bytes {
    let len = message.encoded_len();
    let mut buf = BytesMut::with_capacity(5 + len);
    buf.put_u8(0);
    buf.put_u32(u32::try_from(len).unwrap_or(u32::MAX));
    // Encoding into a buffer with enough capacity cannot fail.
    let _ = message.encode(&mut buf);
    buf.freeze()
}

/// The headers of a gRPC response.
pub fn response_headers() -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static(GRPC_CONTENT_TYPE),
    );
    headers
}

/// The trailers carrying a status.
pub fn status_trailers(status: &Status) -> HeaderMap {
    let mut trailers = HeaderMap::new();
    // `Status::add_header` percent-encodes the message as gRPC requires.
    if status.add_header(&mut trailers).is_err() {
        trailers.insert("grpc-status", HeaderValue::from(status.code() as i32));
    }
    trailers
}

/// A "trailers-only" error response: headers carry the status, no body.
pub fn error_response(status: &Status) -> http::Response<tonic::body::Body> {
    let mut response = http::Response::new(tonic::body::Body::empty());
    *response.headers_mut() = response_headers();
    response.headers_mut().extend(status_trailers(status));
    response
}

/// A stream of encoded gRPC frames (see [`encode_frame`]).
pub type FrameStream = Pin<Box<dyn Stream<Item = Result<Bytes, Status>> + Send + 'static>>;

/// Answers a server-streaming call: reads and decodes the request message
/// (bounded by [`MAX_REQUEST_BYTES`]), calls `open`, and responds with its
/// frames, or with a trailers-only error.
pub async fn serve_streaming<M, F, O>(
    request: http::Request<tonic::body::Body>,
    open: F,
) -> http::Response<tonic::body::Body>
where
    M: Message + Default,
    F: FnOnce(M) -> O,
    O: Future<Output = Result<FrameStream, Status>>,
{
    serve_streaming_in(request, None, open).await
}

/// [`serve_streaming`] holding `slot` of the process's [`cap::StreamCap`]
/// until the response body is dropped (or at once, if the call fails).
pub async fn serve_streaming_in<M, F, O>(
    request: http::Request<tonic::body::Body>,
    slot: Option<cap::StreamSlot>,
    open: F,
) -> http::Response<tonic::body::Body>
where
    M: Message + Default,
    F: FnOnce(M) -> O,
    O: Future<Output = Result<FrameStream, Status>>,
{
    use http_body_util::BodyExt;
    let limited = http_body_util::Limited::new(request.into_body(), MAX_REQUEST_BYTES);
    let body = match limited.collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(error) => {
            let status = Status::invalid_argument(format!("reading the request: {error}"));
            return error_response(&status);
        }
    };
    let opened = match decode_request::<M>(&body) {
        Ok(message) => open(message).await,
        Err(status) => Err(status),
    };
    match opened {
        Ok(stream) => {
            let body = FramedStream {
                _slot: slot,
                ..FramedStream::new(stream)
            };
            let mut response = http::Response::new(tonic::body::Body::new(body));
            *response.headers_mut() = response_headers();
            response
        }
        Err(status) => error_response(&status),
    }
}

/// How many [`FramedStream`] bodies of this process are open.
static OPEN_STREAMS: AtomicUsize = AtomicUsize::new(0);

/// Counts one open [`FramedStream`] for as long as it lives.
struct OpenStream;

impl OpenStream {
    fn new() -> Self {
        OPEN_STREAMS.fetch_add(1, Ordering::Relaxed);
        Self
    }
}

impl Drop for OpenStream {
    fn drop(&mut self) {
        OPEN_STREAMS.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The number of open streaming response bodies in this process.
pub fn open_streams() -> usize {
    OPEN_STREAMS.load(Ordering::Relaxed)
}

/// Resolves after `requested` once every open stream body has ended (their
/// own shutdown ends them), or after `grace` at most: the future to give
/// [`serve`] as its shutdown, so that GOAWAY follows the streams' OK
/// trailers instead of racing them.
pub async fn after_streams_end(requested: impl Future<Output = ()>, grace: Duration) {
    requested.await;
    let deadline = tokio::time::Instant::now() + grace;
    while open_streams() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A response body that writes a stream of already-encoded frames (see
/// [`encode_frame`]), then ends with `grpc-status` trailers (OK when the
/// stream ends, the error otherwise).
pub struct FramedStream<S> {
    /// Held as it is (a [`FrameStream`] is boxed already: no second box).
    stream: S,
    done: bool,
    /// Counted in [`open_streams`] until the body is dropped (hyper drops it
    /// once the trailers are handed to HTTP/2).
    _open: OpenStream,
    /// The stream's slot of the process's cap, if it took one: given back
    /// when the body is dropped.
    _slot: Option<cap::StreamSlot>,
}

impl<S> FramedStream<S> {
    pub fn new(stream: S) -> Self {
        Self {
            stream,
            done: false,
            _open: OpenStream::new(),
            _slot: None,
        }
    }
}

impl<S> http_body::Body for FramedStream<S>
where
    S: Stream<Item = Result<Bytes, Status>> + Unpin,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        match Pin::new(&mut self.stream).poll_next(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(Some(Ok(frame))) => Poll::Ready(Some(Ok(Frame::data(frame)))),
            Poll::Ready(Some(Err(status))) => {
                self.done = true;
                Poll::Ready(Some(Ok(Frame::trailers(status_trailers(&status)))))
            }
            Poll::Ready(None) => {
                self.done = true;
                Poll::Ready(Some(Ok(Frame::trailers(status_trailers(&Status::ok(""))))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linkerd2_proxy_api::destination::GetDestination;

    #[test]
    fn frames_round_trip() {
        let request = GetDestination {
            scheme: "k8s".into(),
            path: "web.ns.svc.cluster.local:80".into(),
            context_token: String::new(),
        };
        let frame = encode_frame(&request);
        assert_eq!(frame.len(), 5 + request.encoded_len());
        let decoded: GetDestination = decode_request(&frame).expect("decode");
        assert_eq!(decoded, request);
    }

    #[tokio::test]
    async fn shutdown_waits_for_open_streams_to_end() {
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let body = FramedStream::new(futures::stream::pending::<Result<Bytes, Status>>());
        assert!(open_streams() >= 1);
        let waiter = tokio::spawn(after_streams_end(
            async {
                let _ = rx.await;
            },
            Duration::from_secs(30),
        ));
        let _ = tx.send(());
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "a stream is still open");
        drop(body);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("resolves once the stream ended")
            .expect("no panic");
    }

    #[tokio::test]
    async fn shutdown_gives_up_after_the_grace_period() {
        let _body = FramedStream::new(futures::stream::pending::<Result<Bytes, Status>>());
        tokio::time::timeout(
            Duration::from_secs(5),
            after_streams_end(async {}, Duration::from_millis(50)),
        )
        .await
        .expect("the grace period bounds the wait");
    }

    #[test]
    fn malformed_requests_are_invalid_argument() {
        for body in [
            &b""[..],
            &b"\x00\x00\x00"[..],
            &b"\x00\x00\x00\x00\x09abc"[..],
        ] {
            let status = decode_request::<GetDestination>(body).expect_err("malformed");
            assert_eq!(status.code(), tonic::Code::InvalidArgument, "{body:?}");
        }
        let status =
            decode_request::<GetDestination>(b"\x01\x00\x00\x00\x00").expect_err("compressed");
        assert_eq!(status.code(), tonic::Code::Unimplemented);
    }
}
