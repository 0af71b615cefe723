//! The admin HTTP server every binary runs: `/live`, `/ready`, `/ping` and
//! `/metrics` (Prometheus text format from a `prometheus-client` registry),
//! plus any read-only routes a binary adds ([`AdminServer::with_routes`]).
//! The same server also serves a binary's routes alone on a listener of
//! their own ([`AdminServer::bind_routes`]: the introspection listener,
//! bound to localhost). HTTP/1.1 (what probes and scrapers speak), each
//! connection served by [`crate::peers::http`]: the first request must
//! arrive within 10 s, bad peers are closed and reported (listener `admin`,
//! or the name given).

use std::{net::SocketAddr, sync::Arc};

use axum::{
    Router,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::get,
};
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;

use crate::{
    Readiness, Shutdown,
    peers::{
        self,
        http::{Protocol, serve_connection},
    },
};

/// Serves the admin endpoints (or a binary's routes alone) until shutdown.
pub struct AdminServer {
    listener: TcpListener,
    /// The common routes (unless bound with [`Self::bind_routes`]) and the
    /// binary's own.
    router: Router,
    peers: peers::Listener,
}

#[derive(Clone)]
struct AdminState {
    readiness: Readiness,
    registry: Arc<Registry>,
}

impl AdminServer {
    /// Binds the admin address. Binding early surfaces port clashes at
    /// start-up. Bad peers are reported to `peers` (listener `admin`).
    pub async fn bind(
        addr: SocketAddr,
        readiness: Readiness,
        registry: Arc<Registry>,
        peers: &peers::ConnectionMetrics,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self {
            listener,
            router: router(AdminState {
                readiness,
                registry,
            }),
            peers: peers.listener("admin"),
        })
    }

    /// Binds a server of `routes` alone, without `/live`, `/ready` and
    /// `/metrics` (every other path is 404). Bad peers are reported to
    /// `peers` as listener `name`.
    pub async fn bind_routes(
        addr: SocketAddr,
        name: &'static str,
        routes: Router,
        peers: &peers::ConnectionMetrics,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        Ok(Self {
            listener,
            router: routes,
            peers: peers.listener(name),
        })
    }

    /// Adds routes of the binary's own to the admin server.
    pub fn with_routes(mut self, routes: Router) -> Self {
        self.router = self.router.merge(routes);
        self
    }

    /// The bound address (useful when binding port 0).
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` resolves, then lets open requests finish.
    pub async fn serve(self, shutdown: Shutdown) -> std::io::Result<()> {
        tracing::info!(
            listener = self.peers.name(),
            addr = %self.listener.local_addr()?,
            "admin server listening"
        );
        let router = self.router;
        let peers = self.peers.clone();
        peers::accept_until(self.listener, &self.peers, shutdown.clone(), |tcp, peer| {
            let router = router.clone();
            let peers = peers.clone();
            let stop = shutdown.clone().requested();
            async move {
                serve_connection(tcp, Protocol::Http1, router, &peers, Some(peer), stop).await;
            }
        })
        .await;
        Ok(())
    }
}

fn router(state: AdminState) -> Router {
    Router::new()
        .route("/live", get(|| async { "live\n" }))
        .route("/ping", get(|| async { "pong\n" }))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics))
        .with_state(state)
}

async fn ready(State(state): State<AdminState>) -> impl IntoResponse {
    let not_ready = state.readiness.not_ready();
    let (status, mut body) = if not_ready.is_empty() {
        let mut body = "ready\n".to_string();
        for note in state.readiness.degraded() {
            body.push_str(&format!("degraded: {note}\n"));
        }
        (StatusCode::OK, body)
    } else {
        let mut body = format!("not ready: {}\n", not_ready.join(", "));
        for reason in state.readiness.not_ready_reasons() {
            body.push_str(&reason);
            body.push('\n');
        }
        (StatusCode::SERVICE_UNAVAILABLE, body)
    };
    for info in state.readiness.infos() {
        body.push_str(&format!("{info}\n"));
    }
    (status, body)
}

async fn metrics(State(state): State<AdminState>) -> impl IntoResponse {
    let mut body = String::new();
    match prometheus_client::encoding::text::encode(&mut body, &state.registry) {
        Ok(()) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            body,
        )
            .into_response(),
        Err(error) => {
            tracing::error!(%error, "failed to encode metrics");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                "metrics encoding failed\n",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    async fn get_text(router: Router, path: &str) -> (StatusCode, String) {
        let request = http::Request::get(path)
            .body(axum::body::Body::empty())
            .expect("request");
        let response = router.oneshot(request).await.expect("response");
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn ready_reports_what_is_not_synced() {
        let readiness = Readiness::default();
        let pods = readiness.register("pods cache");
        let state = AdminState {
            readiness,
            registry: Arc::new(Registry::default()),
        };
        let (status, body) = get_text(router(state.clone()), "/ready").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: pods cache\n");
        pods.set(true);
        let (status, _) = get_text(router(state.clone()), "/ready").await;
        assert_eq!(status, StatusCode::OK);
        let (status, body) = get_text(router(state.clone()), "/live").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "live\n"));
        // The original's liveness path and body (`pkg/admin`).
        let (status, body) = get_text(router(state), "/ping").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "pong\n"));
    }

    #[tokio::test]
    async fn ready_says_why_a_cache_is_not_synced() {
        let readiness = Readiness::default();
        let (synced, synced_rx) = tokio::sync::watch::channel(false);
        let (failing, failing_rx) = tokio::sync::watch::channel(None);
        readiness.register_cache("endpointslices cache", synced_rx, failing_rx);
        let state = AdminState {
            readiness,
            registry: Arc::new(Registry::default()),
        };
        failing.send_replace(Some("list: 403 Forbidden: no".into()));
        let (status, body) = get_text(router(state.clone()), "/ready").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(
            body,
            "not ready: endpointslices cache\nlist: 403 Forbidden: no\n"
        );
        synced.send_replace(true);
        let (status, body) = get_text(router(state), "/ready").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(
            body,
            "ready\ndegraded: endpointslices cache: list: 403 Forbidden: no\n"
        );
    }

    #[tokio::test]
    async fn ready_states_informational_facts_either_way() {
        let readiness = Readiness::default();
        let cache = readiness.register("pods cache");
        let info = readiness.register_info("gateway API", "none");
        let state = AdminState {
            readiness,
            registry: Arc::new(Registry::default()),
        };
        let (status, body) = get_text(router(state.clone()), "/ready").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "not ready: pods cache\ngateway API: none\n");
        cache.set(true);
        info.set("httproutes v1");
        let (status, body) = get_text(router(state), "/ready").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(body, "ready\ngateway API: httproutes v1\n");
    }

    #[tokio::test]
    async fn metrics_are_encoded() {
        let mut registry = Registry::default();
        let counter = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("test_events", "Events seen", counter.clone());
        counter.inc();
        let state = AdminState {
            readiness: Readiness::default(),
            registry: Arc::new(registry),
        };
        let (status, body) = get_text(router(state), "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("test_events_total 1"), "{body}");
    }
}
