//! The webhook's HTTPS server against bad peers, over real loopback
//! sockets: before TLS (not TLS at all, plaintext HTTP, half a ClientHello,
//! nothing) and inside it (HTTP/2 by ALPN then nothing or garbage, HTTP/1
//! then half a request head or garbage). Each is closed (at once, or after
//! its 10 s deadline), counted by reason, and a good review is answered
//! all along.

mod support;

use std::{net::SocketAddr, time::Duration};

use meridian_runtime::peers::Reason;
use support::start;
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

async fn keep_alive_review(
    sender: &mut hyper::client::conn::http1::SendRequest<axum::body::Body>,
) -> u16 {
    let body = support::review_body("u-2");
    let request = http::Request::post("/")
        .header(http::header::HOST, "localhost")
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from(body))
        .expect("request");
    let response = sender
        .send_request(request)
        .await
        .expect("kept-alive review");
    let status = response.status().as_u16();
    let _ = axum::body::to_bytes(axum::body::Body::new(response.into_body()), usize::MAX).await;
    status
}

/// Reads until the server closes the connection (EOF or an error).
async fn closed<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S, within: Duration, what: &str) {
    let mut sink = Vec::new();
    tokio::time::timeout(within, stream.read_to_end(&mut sink))
        .await
        .unwrap_or_else(|_| panic!("{what}: still open after {within:?}"))
        .map(|_| ())
        .unwrap_or(());
}

async fn raw(addr: SocketAddr, sends: &[u8]) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.expect("connect");
    tcp.write_all(sends).await.expect("write");
    tcp
}

#[tokio::test]
async fn bad_peers_are_closed_and_counted_and_reviews_still_answered() {
    let webhook = start().await;
    let at_once = Duration::from_secs(5);
    let deadline = Duration::from_secs(20);

    // Before TLS.
    let random = raw(webhook.addr, b"\x00\xff\x13\x37garbage\r\n\r\n").await;
    let plaintext = raw(webhook.addr, b"POST / HTTP/1.1\r\nHost: x\r\n\r\n").await;
    let half_hello = raw(
        webhook.addr,
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    )
    .await;
    let silent = raw(webhook.addr, b"").await;
    drop(raw(webhook.addr, b"").await); // connect-then-close: not a bad peer
    // Inside TLS.
    let h2_silent = webhook.tls(b"h2").await;
    let mut h2_garbage = webhook.tls(b"h2").await;
    h2_garbage
        .write_all(b"GET / HTTP/1.1\r\n\r\n")
        .await
        .expect("write");
    let mut h1_half = webhook.tls(b"http/1.1").await;
    h1_half
        .write_all(b"POST / HTTP/1.1\r\nHo")
        .await
        .expect("write");
    let mut h1_garbage = webhook.tls(b"http/1.1").await;
    h1_garbage
        .write_all(b"\x00\x01\x02 \r\n\r\n")
        .await
        .expect("write");

    // While they are held, reviews are answered, on fresh connections and
    // on a kept-alive one.
    assert_eq!(webhook.review().await, "HTTP/1.1 200 OK");
    let mut kept = webhook.keep_alive().await;
    assert_eq!(keep_alive_review(&mut kept).await, 200);

    closed(random, at_once, "random bytes").await;
    closed(plaintext, at_once, "plaintext HTTP").await;
    closed(h2_garbage, at_once, "HTTP/2 garbage").await;
    closed(h1_garbage, at_once, "HTTP/1 garbage").await;
    closed(half_hello, deadline, "half a ClientHello").await;
    closed(silent, deadline, "silence").await;
    closed(h2_silent, deadline, "no HTTP/2 preface").await;
    closed(h1_half, deadline, "half a request head").await;

    let count = |reason| webhook.listener.bad_count(reason);
    assert_eq!(count(Reason::TlsHandshake), 2, "random bytes, plaintext");
    assert_eq!(
        count(Reason::Silent),
        4,
        "half a ClientHello, silence, no preface, half a head"
    );
    assert_eq!(count(Reason::Http1OnHttp2), 1, "HTTP/1 inside h2");
    assert_eq!(count(Reason::Garbage), 1, "HTTP/1 garbage");
    assert_eq!(webhook.review().await, "HTTP/1.1 200 OK");
    // Past the first-request deadline, a connection that served a request
    // is still open: only idle for longer than Go clients keep one.
    assert_eq!(keep_alive_review(&mut kept).await, 200);
    drop(kept);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let metrics = webhook.metrics();
    assert!(
        metrics.contains("server_connections_open{listener=\"webhook\"} 0"),
        "{metrics}"
    );
}
