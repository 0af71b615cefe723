//! No gRPC answer from an index that has not synced: a tower layer for a
//! tonic server that holds each request until the process's watch caches
//! have synced once (see `meridian_runtime::readiness::initial_sync`), and
//! answers `Unavailable` (which proxies retry with a backoff) if that takes
//! longer than the wait it is given. Without it, a restarted server could
//! answer `NotFound` or `NoEndpoints` for objects it has not listed yet.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::sync::watch;
use tonic::Status;

/// The layer: `synced` turns true once, after the first sync.
#[derive(Clone, Debug)]
pub struct SyncGateLayer {
    synced: watch::Receiver<bool>,
    wait: Duration,
    what: &'static str,
}

impl SyncGateLayer {
    /// Requests wait up to `wait` for `synced`; `what` names the server in
    /// the `Unavailable` message ("the destination", "the policy controller").
    pub fn new(synced: watch::Receiver<bool>, wait: Duration, what: &'static str) -> Self {
        Self { synced, wait, what }
    }
}

impl<S> tower::Layer<S> for SyncGateLayer {
    type Service = SyncGate<S>;

    fn layer(&self, inner: S) -> SyncGate<S> {
        SyncGate {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`SyncGateLayer`] wraps around a server's routes.
#[derive(Clone, Debug)]
pub struct SyncGate<S> {
    inner: S,
    layer: SyncGateLayer,
}

impl<S, B> tower::Service<http::Request<B>> for SyncGate<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>
        + Clone
        + Send
        + 'static,
    S::Future: Send + 'static,
    B: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        // The service polled ready is the one that serves the request.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        if *self.layer.synced.borrow() {
            return Box::pin(inner.call(request));
        }
        let SyncGateLayer {
            mut synced,
            wait,
            what,
        } = self.layer.clone();
        Box::pin(async move {
            // (The watch guard is dropped at once: the future stays `Send`.)
            let in_time = matches!(
                tokio::time::timeout(wait, synced.wait_for(|synced| *synced))
                    .await
                    .map(|result| result.is_ok()),
                Ok(true)
            );
            if in_time {
                inner.call(request).await
            } else {
                Ok(crate::error_response(&Status::unavailable(format!(
                    "{what} has not synced with the Kubernetes API yet"
                ))))
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer as _, Service as _};

    #[derive(Clone)]
    struct Ok200;

    impl tower::Service<http::Request<()>> for Ok200 {
        type Response = http::Response<tonic::body::Body>;
        type Error = std::convert::Infallible;
        type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok(http::Response::new(tonic::body::Body::empty())))
        }
    }

    fn status(response: &http::Response<tonic::body::Body>) -> Option<&str> {
        response
            .headers()
            .get("grpc-status")
            .and_then(|v| v.to_str().ok())
    }

    #[tokio::test(start_paused = true)]
    async fn requests_wait_for_the_first_sync() {
        let (tx, rx) = watch::channel(false);
        let mut gate = SyncGateLayer::new(rx, Duration::from_secs(10), "the server").layer(Ok200);
        let response = gate.call(http::Request::new(())).await.expect("infallible");
        assert_eq!(status(&response), Some("14"), "Unavailable after the wait");

        let waiting = tokio::spawn(gate.call(http::Request::new(())));
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiting.is_finished(), "held until the sync");
        tx.send_replace(true);
        let response = waiting.await.expect("no panic").expect("infallible");
        assert_eq!(status(&response), None, "served by the inner service");
        let response = gate.call(http::Request::new(())).await.expect("infallible");
        assert_eq!(status(&response), None, "no wait once synced");
    }
}
