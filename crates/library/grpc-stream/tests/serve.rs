//! `grpc_stream::serve` over a real socket, with a raw HTTP/2 client: what
//! it does in place of tonic's server (`grpc-timeout`, a `Status` error as a
//! gRPC answer, the peer's address, and the drain on shutdown).

use std::{net::SocketAddr, time::Duration};

use bytes::Bytes;
use grpc_stream::server::ServerLimits;
use http::{Request, Response};
use tonic::{Status, transport::server::TcpConnectInfo};

type Answer = Result<Response<tonic::body::Body>, Status>;

/// `/t/slow` answers after 10 s, `/t/denied` fails with a `Status`, and
/// `/t/peer` answers with the peer's address in `x-peer`.
async fn answer(request: Request<tonic::body::Body>) -> Answer {
    match request.uri().path() {
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
    let service = tower::service_fn(answer);
    let done = tokio::spawn(async move {
        grpc_stream::serve(listener, peers, &ServerLimits::default(), service, async {
            let _ = stopped.await;
        })
        .await
    });
    Served { addr, stop, done }
}

async fn client(
    addr: SocketAddr,
) -> (
    h2::client::SendRequest<Bytes>,
    SocketAddr,
    tokio::task::JoinHandle<()>,
) {
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .expect("a connection");
    let local = tcp.local_addr().expect("its address");
    let (send, connection) = h2::client::handshake(tcp)
        .await
        .expect("an HTTP/2 handshake");
    let driven = tokio::spawn(async move {
        let _ = connection.await;
    });
    (send, local, driven)
}

async fn call(
    send: &h2::client::SendRequest<Bytes>,
    path: &str,
    timeout: Option<&str>,
) -> http::HeaderMap {
    let mut request = Request::post(format!("http://meridian{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
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
