//! A webhook HTTPS server on a loopback port for the integration tests, and
//! TLS clients for it.

#![allow(dead_code)]

use std::{net::SocketAddr, sync::Arc};

use admission::{AdmissionRequest, CertStore, HttpsServer, Limits, Metrics, TlsPaths, Validate};
use meridian_runtime::{ConnectionMetrics, Shutdown, peers::Listener};
use prometheus_client::registry::Registry;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

pub struct AllowAll;

impl Validate for AllowAll {
    fn validate(&self, _: &AdmissionRequest) -> Result<(), String> {
        Ok(())
    }
}

pub struct Webhook {
    pub addr: SocketAddr,
    pub roots: Arc<rustls::RootCertStore>,
    pub listener: Listener,
    pub registry: Registry,
    pub metrics: Metrics,
    _dir: tempfile::TempDir,
}

/// A webhook that allows everything, with the default limits.
pub async fn start() -> Webhook {
    start_with(Limits::default()).await
}

/// A webhook that allows everything, with `limits`.
pub async fn start_with(limits: Limits) -> Webhook {
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
    let metrics = Metrics::register(&mut registry);
    let addr = "127.0.0.1:0".parse().expect("addr");
    let server = HttpsServer::bind(addr, &certs, listener.clone())
        .await
        .expect("bind");
    let addr = server.local_addr().expect("addr");
    let (trigger, shutdown) = Shutdown::new();
    let router = admission::router_with(AllowAll, metrics.clone(), limits);
    tokio::spawn(async move {
        server.serve(router, shutdown).await;
        drop(trigger);
    });
    Webhook {
        addr,
        roots: Arc::new(roots),
        listener,
        registry,
        metrics,
        _dir: dir,
    }
}

/// A small, valid AdmissionReview.
pub fn review_body(uid: &str) -> String {
    serde_json::json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {"uid": uid, "name": "x", "operation": "CREATE", "object": {}},
    })
    .to_string()
}

impl Webhook {
    pub async fn tls(&self, alpn: &[u8]) -> tokio_rustls::client::TlsStream<TcpStream> {
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
    pub async fn keep_alive(&self) -> hyper::client::conn::http1::SendRequest<axum::body::Body> {
        let tls = self.tls(b"http/1.1").await;
        let (sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .expect("HTTP/1.1 handshake");
        tokio::spawn(connection);
        sender
    }

    /// A review over a fresh HTTP/1.1 connection: the whole response.
    pub async fn review_response(&self) -> String {
        let mut tls = self.tls(b"http/1.1").await;
        let body = review_body("u-1");
        let request = format!(
            "POST / HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        tls.write_all(request.as_bytes()).await.expect("write");
        let mut response = Vec::new();
        let _ = tls.read_to_end(&mut response).await;
        String::from_utf8_lossy(&response).into_owned()
    }

    /// A review over a fresh HTTP/1.1 connection: the status line.
    pub async fn review(&self) -> String {
        self.review_response()
            .await
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }

    pub fn metrics(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry).expect("encode");
        text
    }
}
