//! `grpc_stream::serve` over a real socket, with a raw HTTP/2 client: what
//! it does in place of tonic's and hyper's servers (`grpc-timeout`, a
//! `Status` error as a gRPC answer, the peer's address, request bodies, a
//! response body written only into the client's window and dropped when
//! the client resets its stream, and the drain on shutdown).

use std::{
    net::SocketAddr,
    pin::Pin,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    task::{Context, Poll},
    time::Duration,
};

use bytes::Bytes;
use grpc_stream::server::ServerLimits;
use http::{Request, Response};
use tonic::{Status, transport::server::TcpConnectInfo};

type Answer = Result<Response<tonic::body::Body>, Status>;

/// What the endless body of `/t/endless` has done.
#[derive(Default)]
struct Endless {
    /// Frames taken from it.
    taken: AtomicUsize,
    dropped: AtomicBool,
}

/// A body of 1 KiB frames without end.
struct EndlessBody(Arc<Endless>);

const FRAME: usize = 1024;

impl http_body::Body for EndlessBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        self.0.taken.fetch_add(1, Ordering::SeqCst);
        Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from(vec![
            0u8;
            FRAME
        ])))))
    }
}

impl Drop for EndlessBody {
    fn drop(&mut self) {
        self.0.dropped.store(true, Ordering::SeqCst);
    }
}

/// `/t/slow` answers after 10 s, `/t/denied` fails with a `Status`,
/// `/t/echo` answers with the request body's length in `x-length`,
/// `/t/endless` with [`EndlessBody`], and `/t/peer` with the peer's address
/// in `x-peer`.
async fn answer(request: Request<tonic::body::Body>, endless: Arc<Endless>) -> Answer {
    use http_body_util::BodyExt;
    match request.uri().path() {
        "/t/echo" => {
            let body = request.into_body().collect().await?.to_bytes();
            let mut response = Status::ok("").into_http::<tonic::body::Body>();
            response.headers_mut().insert(
                "x-length",
                body.len().to_string().parse().expect("a number"),
            );
            Ok(response)
        }
        "/t/endless" => {
            let mut response = Response::new(tonic::body::Body::new(EndlessBody(endless)));
            response.headers_mut().insert(
                "content-type",
                http::HeaderValue::from_static("application/grpc"),
            );
            Ok(response)
        }
        "/t/slow" => {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok(Status::ok("").into_http())
        }
        "/t/denied" => Err(Status::permission_denied("not you")),
        _ => {
            let peer = request
                .extensions()
                .get::<TcpConnectInfo>()
                .and_then(TcpConnectInfo::remote_addr)
                .map(|addr| addr.to_string())
                .unwrap_or_default();
            let mut response = Status::ok("").into_http::<tonic::body::Body>();
            response
                .headers_mut()
                .insert("x-peer", peer.parse().expect("an address"));
            Ok(response)
        }
    }
}

struct Served {
    addr: SocketAddr,
    endless: Arc<Endless>,
    stop: tokio::sync::oneshot::Sender<()>,
    done: tokio::task::JoinHandle<()>,
}

async fn start() -> Served {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let addr = listener.local_addr().expect("its address");
    let peers = meridian_runtime::peers::ConnectionMetrics::default().listener("grpc");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let endless = Arc::new(Endless::default());
    let state = endless.clone();
    let service = tower::service_fn(move |request| answer(request, state.clone()));
    let done = tokio::spawn(async move {
        grpc_stream::serve(listener, peers, &ServerLimits::default(), service, async {
            let _ = stopped.await;
        })
        .await
    });
    Served {
        addr,
        endless,
        stop,
        done,
    }
}

async fn client(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    SocketAddr,
    tokio::task::JoinHandle<()>,
) {
    client_with(addr, &h2::client::Builder::new()).await
}

async fn client_with(
    addr: SocketAddr,
    builder: &h2::client::Builder,
) -> (
    h2::client::SendRequest<Bytes>,
    SocketAddr,
    tokio::task::JoinHandle<()>,
) {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("a connection");
    let local = tcp.local_addr().expect("its address");
    let (send, connection) = builder.handshake(tcp).await.expect("an HTTP/2 handshake");
    let driven = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, local, driven)
}

fn request(path: &str) -> http::request::Builder {
    Request::post(format!("http://meridian{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
}

async fn call(
    send: &h2::client::SendRequest<Bytes>,
    path: &str,
    timeout: Option<&str>,
) -> http::HeaderMap {
    let mut request = request(path);
    if let Some(timeout) = timeout {
        request = request.header("grpc-timeout", timeout);
    }
    let request = request.body(()).expect("a request");
    let mut send = send.clone().ready().await.expect("a stream");
    let (response, _) = send.send_request(request, true).expect("sent");
    let response = response.await.expect("an answer");
    response.headers().clone()
}

/// `grpc-status` and `grpc-message` (percent-encoded, as on the wire).
fn status_of(headers: &http::HeaderMap) -> (&str, &str) {
    let get = |name| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    (get("grpc-status"), get("grpc-message"))
}

#[tokio::test]
async fn a_grpc_timeout_a_status_error_and_the_peer_address() {
    let served = start().await;
    let (send, local, _driven) = client(served.addr).await;

    let headers = call(&send, "/t/slow", Some("50m")).await;
    assert_eq!(
        status_of(&headers),
        ("1", "Timeout%20expired"),
        "{headers:?}"
    );

    let headers = call(&send, "/t/denied", None).await;
    assert_eq!(status_of(&headers), ("7", "not%20you"), "{headers:?}");

    let headers = call(&send, "/t/peer", Some("not a timeout")).await;
    assert_eq!(status_of(&headers).0, "0", "{headers:?}");
    assert_eq!(
        headers.get("x-peer").and_then(|v| v.to_str().ok()),
        Some(local.to_string().as_str())
    );

    let _ = served.stop.send(());
    served.done.await.expect("the server stops");
}

#[tokio::test]
async fn shutdown_closes_the_listener_and_waits_for_open_connections() {
    let served = start().await;
    let (send, _, driven) = client(served.addr).await;
    let _ = served.stop.send(());
    // The connection is sent GOAWAY and closes once it has no stream; the
    // server returns after it.
    tokio::time::timeout(Duration::from_secs(10), driven)
        .await
        .expect("the connection closes")
        .expect("its task");
    tokio::time::timeout(Duration::from_secs(10), served.done)
        .await
        .expect("the server returns")
        .expect("its task");
    drop(send);
    assert!(
        tokio::net::TcpStream::connect(served.addr).await.is_err(),
        "nothing listens after shutdown"
    );
}

#[tokio::test]
async fn a_request_body_is_read_whole() {
    let served = start().await;
    let (send, _, _driven) = client(served.addr).await;
    let mut send = send.ready().await.expect("a stream");
    let request = request("/t/echo").body(()).expect("a request");
    let (response, mut body) = send.send_request(request, false).expect("sent");
    body.send_data(Bytes::from(vec![7u8; 20_000]), false)
        .expect("a first chunk");
    body.send_data(Bytes::from(vec![7u8; 30_000]), true)
        .expect("the last chunk");
    let response = response.await.expect("an answer");
    assert_eq!(
        response
            .headers()
            .get("x-length")
            .and_then(|v| v.to_str().ok()),
        Some("50000")
    );
}

#[tokio::test]
async fn a_body_is_written_into_the_window_and_dropped_on_reset() {
    let served = start().await;
    // A window of four frames, given back only as the test reads.
    let mut builder = h2::client::Builder::new();
    builder.initial_window_size(4 * FRAME as u32);
    let (send, _, _driven) = client_with(served.addr, &builder).await;
    let mut send = send.ready().await.expect("a stream");
    let request = request("/t/endless").body(()).expect("a request");
    let (response, _) = send.send_request(request, true).expect("sent");
    let mut body = response.await.expect("an answer").into_body();

    // Unread, the body is held still: the window, and one frame taken
    // while waiting for room.
    let settled = wait_until_still(&served.endless.taken).await;
    assert!((4..=6).contains(&settled), "{settled} frames taken");

    // Reading frees the window: more frames are taken, still only as many
    // as were read and the window holds.
    let mut read = 0;
    while read < 8 * FRAME {
        let chunk = body.data().await.expect("a frame").expect("data");
        read += chunk.len();
        body.flow_control()
            .release_capacity(chunk.len())
            .expect("window given back");
    }
    let more = wait_until_still(&served.endless.taken).await;
    assert!(
        more > settled + 3 && more <= 8 + 6,
        "{settled} then {more} frames taken"
    );
    assert!(!served.endless.dropped.load(Ordering::SeqCst));

    // The client resets the stream: the server drops the body.
    drop(body);
    tokio::time::timeout(Duration::from_secs(10), async {
        while !served.endless.dropped.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("the body is dropped after the client's reset");
}

/// The count once it has not moved for 200 ms.
async fn wait_until_still(count: &AtomicUsize) -> usize {
    let mut last = count.load(Ordering::SeqCst);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = count.load(Ordering::SeqCst);
        if now == last {
            return now;
        }
        last = now;
    }
}
