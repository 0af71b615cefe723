//! The webhook's HTTPS server against bad peers, over real loopback
//! sockets: before TLS (not TLS at all, plaintext HTTP, half a ClientHello,
//! nothing) and inside it (HTTP/2 by ALPN then nothing or garbage, HTTP/1
//! then half a request head or garbage). Each is closed (at once, or after
//! its 10 s deadline), counted by reason, and a good review is answered
//! all along.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use admission::{AdmissionRequest, CertStore, HttpsServer, Metrics, TlsPaths, Validate};
use meridian_runtime::{
    ConnectionMetrics, Shutdown,
    peers::{Listener, Reason},
};
use prometheus_client::registry::Registry;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::{
    io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt},
    net::TcpStream,
};

struct AllowAll;

impl Validate for AllowAll {
    fn validate(&self, _: &AdmissionRequest) -> Result<(), String> {
        Ok(())
    }
}

struct Webhook {
    addr: SocketAddr,
    roots: Arc<rustls::RootCertStore>,
    listener: Listener,
    registry: Registry,
    _dir: tempfile::TempDir,
}

async fn start() -> Webhook {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let dir = tempfile::tempdir().expect("tempdir");
    let paths = TlsPaths {
        cert: dir.path().join("tls.crt"),
        key: dir.path().join("tls.key"),
    };
    std::fs::write(&paths.cert, cert.cert.pem()).expect("write");
    std::fs::write(&paths.key, cert.signing_key.serialize_pem()).expect("write");
    let certs = CertStore::load(paths).expect("certs");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(cert.cert.der().to_vec()))
        .expect("root");
    let mut registry = Registry::default();
    let listener = ConnectionMetrics::register(&mut registry).listener("webhook");
    let addr = "127.0.0.1:0".parse().expect("addr");
    let server = HttpsServer::bind(addr, &certs, listener.clone())
        .await
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    let (trigger, shutdown) = Shutdown::new();
    tokio::spawn(async move {
        server
            .serve(admission::router(AllowAll, Metrics::default()), shutdown)
            .await;
        drop(trigger);
    });
    Webhook {
        addr,
        roots: Arc::new(roots),
        listener,
        registry,
        _dir: dir,
    }
}

impl Webhook {
    async fn tls(&self, alpn: &[u8]) -> tokio_rustls::client::TlsStream<TcpStream> {
        let mut config = rustls::ClientConfig::builder_with_provider(admission::tls::provider())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("TLS 1.3")
            .with_root_certificates(self.roots.clone())
            .with_no_client_auth();
        config.alpn_protocols = vec![alpn.to_vec()];
        let tcp = TcpStream::connect(self.addr).await.expect("connect");
        tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("TLS handshake")
    }

    /// A kept-alive HTTP/1.1 client.
    async fn keep_alive(&self) -> hyper::client::conn::http1::SendRequest<axum::body::Body> {
        let tls = self.tls(b"http/1.1").await;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("HTTP/1.1 handshake");
        tokio::spawn(connection);
        sender
    }

    /// A review over a fresh HTTP/1.1 connection: the status line.
    async fn review(&self) -> String {
        let mut tls = self.tls(b"http/1.1").await;
        let body = serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u-1", "name": "x", "operation": "CREATE", "object": {}},
        })
        .to_string();
        let request = format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(request.as_bytes()).await.expect("write");
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("encode");
        text
    }
}

async fn keep_alive_review(
    sender: &mut hyper::client::conn::http1::SendRequest<axum::body::Body>,
) -> u16 {
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": "u-2", "name": "y", "operation": "CREATE", "object": {}},
    })
    .to_string();
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
