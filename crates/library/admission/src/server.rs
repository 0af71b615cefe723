//! The webhook's HTTP handling (an axum router that accepts reviews on any
//! path) and its HTTPS server: rustls with the certificate from a
//! [`CertStore`], HTTP/1.1 and HTTP/2 (by ALPN), graceful shutdown. Bad
//! peers (not TLS, a failed or silent handshake, then garbage or silence
//! inside TLS) are closed and reported to the listener
//! ([`meridian_runtime::peers`]), logged at most once a minute.
//!
//! What a client can make a server hold is bounded ([`crate::limits`]): a
//! body is at most [`BODY_LIMIT`] and must arrive within
//! [`crate::limits::READ_DEADLINE`] of its head; bodies are read in a
//! bounded number of slots, the longest reader shed when a newer request
//! needs one; an HTTP/2 connection has at most
//! [`crate::limits::MAX_CONCURRENT_STREAMS`] streams. Each refusal is
//! answered with a plain-text error and counted in
//! `admission_reviews_total{result}`.

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    body::{Body, Bytes},
    extract::{Request, State},
    http::{HeaderValue, Method, StatusCode, Version, header},
    response::{IntoResponse, Response},
};
use http_body_util::BodyExt;
use meridian_runtime::{
    Shutdown,
    peers::{
        Listener, Reason, accept_until,
        http::{IDLE_TIMEOUT, Protocol, Settings, error_chain, serve_connection_with},
    },
};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

pub use crate::limits::BODY_LIMIT;
use crate::{
    AdmissionReview, Validate,
    limits::{Limits, MAX_CONCURRENT_STREAMS, ReadSlots},
    metrics::{Metrics, Outcome},
    tls::{CertStore, TlsError},
};

/// How long a TLS handshake may take.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Each connection's settings. HTTP/1 heads: a fresh connection's first
/// head must be in within 10 s (`peers::http`); later heads share the idle
/// allowance of a kept-alive connection, which is longer than Go clients
/// keep one idle so that the API server closes first (hyper's clock runs
/// from the end of the previous response). A head being read holds no read
/// slot, and at most hyper's header buffer.
const CONNECTION: Settings = Settings {
    header_read_timeout: IDLE_TIMEOUT,
    max_concurrent_streams: MAX_CONCURRENT_STREAMS,
};

struct Handler<V> {
    validator: V,
    metrics: Metrics,
    limits: Limits,
    slots: Arc<ReadSlots>,
}

/// The webhook's routes: every path takes a `POST`ed AdmissionReview.
/// Bounded by the default [`Limits`].
pub fn router<V: Validate>(validator: V, metrics: Metrics) -> Router {
    router_with(validator, metrics, Limits::default())
}

/// [`router`] with other [`Limits`] (tests use short deadlines).
pub fn router_with<V: Validate>(validator: V, metrics: Metrics, limits: Limits) -> Router {
    let handler = Arc::new(Handler {
        validator,
        metrics,
        slots: ReadSlots::new(&limits),
        limits,
    });
    Router::new().fallback(review::<V>).with_state(handler)
}

fn plain(status: StatusCode, message: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        format!("{message}\n"),
    )
        .into_response()
}

/// Why a body was not read.
enum Refusal {
    TooLarge,
    Unreadable(String),
    Timeout,
    Shed,
}

impl<V: Validate> Handler<V> {
    /// Reads the body within the deadline, holding a read slot meanwhile.
    async fn read_body(&self, mut body: Body) -> Result<Bytes, Refusal> {
        let deadline = tokio::time::Instant::now() + self.limits.read_deadline;
        let read = async {
            let mut slot = self.slots.acquire().await;
            let _reading = self.metrics.reading();
            let mut bytes = Vec::new();
            loop {
                let frame = tokio::select! {
                    frame = body.frame() => frame,
                    _ = &mut slot.shed => return Err(Refusal::Shed),
                };
                let Some(frame) = frame else { break };
                let frame = frame.map_err(|error| Refusal::Unreadable(error_chain(&error)))?;
                if let Ok(data) = frame.into_data() {
                    if bytes.len() + data.len() > self.limits.body_limit {
                        return Err(Refusal::TooLarge);
                    }
                    bytes.extend_from_slice(&data);
                }
            }
            Ok(Bytes::from(bytes))
        };
        tokio::time::timeout_at(deadline, read)
            .await
            .unwrap_or(Err(Refusal::Timeout))
    }

    fn refuse(&self, refusal: Refusal, version: Version) -> Response {
        let (outcome, status, message) = match refusal {
            Refusal::TooLarge => (
                Outcome::Invalid,
                StatusCode::PAYLOAD_TOO_LARGE,
                format!("request body larger than {} bytes", self.limits.body_limit),
            ),
            Refusal::Unreadable(error) => (
                Outcome::Invalid,
                StatusCode::BAD_REQUEST,
                format!("failed to read the request body: {error}"),
            ),
            Refusal::Timeout => (
                Outcome::Timeout,
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "request body not received within {:?}",
                    self.limits.read_deadline
                ),
            ),
            Refusal::Shed => (
                Outcome::Shed,
                StatusCode::SERVICE_UNAVAILABLE,
                "request body still arriving when newer requests needed its read slot".to_string(),
            ),
        };
        self.metrics.record(outcome);
        tracing::debug!(%status, %message, "rejected request");
        let mut response = plain(status, message);
        // The rest of the body is not read: an HTTP/1 connection cannot be
        // reused (HTTP/2 resets the stream alone).
        if version < Version::HTTP_2 {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

async fn review<V: Validate>(State(handler): State<Arc<Handler<V>>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    if parts.method != Method::POST {
        let method = parts.method;
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("method {method} not allowed: POST an AdmissionReview"),
        );
    }
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.parse::<u64>().ok());
    let too_large = declared.is_some_and(|length| {
        usize::try_from(length).map_or(true, |length| length > handler.limits.body_limit)
    });
    let body = if too_large {
        Err(Refusal::TooLarge)
    } else {
        handler.read_body(body).await
    };
    let body = match body {
        Ok(body) => body,
        Err(refusal) => return handler.refuse(refusal, parts.version),
    };
    let review = match AdmissionReview::parse(&body) {
        Ok(review) => review,
        Err(error) => {
            handler.metrics.record(Outcome::Invalid);
            tracing::debug!(%error, "rejected request");
            return plain(StatusCode::BAD_REQUEST, error.to_string());
        }
    };
    let verdict = handler.validator.review(&review.request);
    let request = &review.request;
    match &verdict.result {
        Ok(()) => {
            handler.metrics.record(Outcome::Allowed);
            tracing::debug!(uid = %request.uid, name = ?request.name, namespace = ?request.namespace, "allowed");
        }
        Err(message) => {
            handler.metrics.record(Outcome::Denied);
            tracing::info!(uid = %request.uid, name = ?request.name, namespace = ?request.namespace, %message, "denied");
        }
    }
    let body = review.respond_with(verdict).to_review_body(review.version);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        body,
    )
        .into_response()
}

/// Errors starting the HTTPS server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("failed to bind {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(transparent)]
    Tls(#[from] TlsError),
}

/// An HTTPS server bound to its address, ready to serve a router.
pub struct HttpsServer {
    listener: TcpListener,
    acceptor: TlsAcceptor,
    certs: Arc<CertStore>,
    peers: Listener,
}

impl HttpsServer {
    /// Binds `addr`, serving the certificate of `certs` (TLS 1.3 only);
    /// bad peers are reported to `peers`.
    pub async fn bind(
        addr: SocketAddr,
        certs: &Arc<CertStore>,
        peers: Listener,
    ) -> Result<Self, ServerError> {
        let config = certs.server_config()?;
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })?;
        Ok(Self {
            listener,
            acceptor: TlsAcceptor::from(config),
            certs: certs.clone(),
            peers,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves `router` until `shutdown`, then lets in-flight requests finish
    /// for up to [`meridian_runtime::peers::DRAIN_TIMEOUT`]. When the certificate changes, open
    /// connections are closed gracefully so clients handshake again.
    pub async fn serve(self, router: Router, shutdown: Shutdown) {
        let addr = self.listener.local_addr().ok();
        tracing::info!(?addr, "webhook server listening");
        let Self {
            listener,
            acceptor,
            certs,
            peers,
        } = self;
        accept_until(listener, &peers, shutdown.clone(), |tcp, peer| {
            let acceptor = acceptor.clone();
            let router = router.clone();
            let shutdown = shutdown.clone();
            let mut rotated = certs.subscribe();
            let peers = peers.clone();
            async move {
                let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await
                {
                    Ok(Ok(tls)) => tls,
                    // Connect-then-close (a TCP probe) is not a bad peer.
                    Ok(Err(error)) if error.kind() == std::io::ErrorKind::UnexpectedEof => {
                        tracing::debug!(%peer, %error, "closed before the TLS handshake");
                        return;
                    }
                    Ok(Err(error)) => {
                        peers.bad(Some(peer), Reason::TlsHandshake, &error_chain(&error));
                        return;
                    }
                    Err(_) => {
                        let detail = format!("no TLS handshake within {HANDSHAKE_TIMEOUT:?}");
                        peers.bad(Some(peer), Reason::Silent, &detail);
                        return;
                    }
                };
                let protocol = match tls.get_ref().1.alpn_protocol() {
                    Some(b"h2") => Protocol::Http2,
                    _ => Protocol::Http1,
                };
                let stop = async move {
                    tokio::select! {
                        () = shutdown.requested() => {}
                        Ok(()) = rotated.changed() => {
                            tracing::debug!(%peer, "closing a connection made with the previous certificate");
                        }
                    }
                };
                serve_connection_with(tls, protocol, router, &peers, Some(peer), stop, CONNECTION)
                    .await;
            }
        })
        .await;
        tracing::info!("webhook server stopped");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AdmissionRequest;
    use axum::body::Body;
    use tower::ServiceExt;

    struct DenyNamed;

    impl Validate for DenyNamed {
        fn validate(&self, request: &AdmissionRequest) -> Result<(), String> {
            match request.name.as_deref() {
                Some("bad") => Err("bad is bad".into()),
                _ => Ok(()),
            }
        }
    }

    async fn call(
        router: Router,
        method: Method,
        path: &str,
        body: Vec<u8>,
    ) -> (StatusCode, String) {
        let request = http::Request::builder()
            .method(method)
            .uri(path)
            .body(Body::from(body))
            .expect("request");
        let response = router.oneshot(request).await.expect("response");
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .expect("body");
        (status, String::from_utf8_lossy(&bytes).into_owned())
    }

    fn body(name: &str) -> Vec<u8> {
        serde_json::json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": {"uid": "u-1", "name": name, "operation": "CREATE", "object": {}},
        })
        .to_string()
        .into_bytes()
    }

    #[tokio::test]
    async fn answers_reviews_on_any_path() {
        let metrics = Metrics::default();
        let router = router(DenyNamed, metrics.clone());
        let (status, text) = call(router.clone(), Method::POST, "/", body("good")).await;
        assert_eq!(status, StatusCode::OK);
        let json: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            json["response"],
            serde_json::json!({"uid": "u-1", "allowed": true})
        );

        let (status, text) = call(router, Method::POST, "/any/path", body("bad")).await;
        assert_eq!(status, StatusCode::OK);
        let json: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(json["response"]["status"]["message"], "bad is bad");
        assert_eq!(json["response"]["status"]["code"], 400);
        assert_eq!(metrics.count(Outcome::Allowed), 1);
        assert_eq!(metrics.count(Outcome::Denied), 1);
    }

    struct WarnAll;

    impl Validate for WarnAll {
        fn validate(&self, _: &AdmissionRequest) -> Result<(), String> {
            Ok(())
        }
        fn review(&self, _: &AdmissionRequest) -> crate::Verdict {
            crate::Verdict {
                result: Ok(()),
                warnings: vec!["not checked".into()],
            }
        }
    }

    #[tokio::test]
    async fn warnings_reach_the_response() {
        let (status, text) = call(
            router(WarnAll, Metrics::default()),
            Method::POST,
            "/",
            body("x"),
        )
        .await;
        assert_eq!(status, StatusCode::OK);
        let json: serde_json::Value = serde_json::from_str(&text).expect("json");
        assert_eq!(
            json["response"],
            serde_json::json!({"uid": "u-1", "allowed": true, "warnings": ["not checked"]})
        );
    }

    #[tokio::test]
    async fn rejects_bad_bodies_with_4xx_text() {
        let metrics = Metrics::default();
        let router = router(DenyNamed, metrics.clone());
        let (status, text) = call(router.clone(), Method::POST, "/", Vec::new()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.starts_with("empty request body"), "{text}");

        let (status, text) = call(router.clone(), Method::POST, "/", b"{not json".to_vec()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.starts_with("malformed AdmissionReview"), "{text}");

        let (status, text) = call(
            router.clone(),
            Method::POST,
            "/",
            vec![b' '; BODY_LIMIT + 1],
        )
        .await;
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        assert!(text.contains("larger than"), "{text}");

        let (status, _) = call(router.clone(), Method::GET, "/", Vec::new()).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

        // Still serving after all that.
        let (status, _) = call(router, Method::POST, "/", body("good")).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(metrics.count(Outcome::Invalid), 3);
    }
}
