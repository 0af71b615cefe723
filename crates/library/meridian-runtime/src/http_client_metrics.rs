//! The Kubernetes client's request metrics under the names of Linkerd's Go
//! controllers (`pkg/prometheus` of linkerd2, which wraps client-go's
//! transport): `http_client_requests_total{client,code,method}`,
//! `http_client_request_latency_seconds{client,code,method}` (until the
//! response headers), `http_client_in_flight_requests{client}` and
//! `http_client_errors_total{client,method}` (no response at all). `code`
//! is the HTTP status (`200`), `method` the lower-case verb (`get`), as
//! Prometheus' Go instrumentation writes them. Linkerd's "Health"
//! dashboard reads them ("Client Request Rate", "HTTP Client Latency",
//! "Client In-Flight Requests").

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
    time::Instant,
};

use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge, histogram::Histogram},
    registry::{Registry, Unit},
};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    client: &'static str,
    code: String,
    method: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClientLabels {
    client: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    client: &'static str,
    method: String,
}

/// The original's latency buckets: 10-50 ms, 100-500 ms, 1-5 s, 10-50 s.
const LATENCY_BUCKETS: [f64; 20] = [
    0.01, 0.02, 0.03, 0.04, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 20.0,
    30.0, 40.0, 50.0,
];

/// The metrics of one named client (`client="k8s"`); [`Self::layer`]
/// instruments a `tower` HTTP client stack.
#[derive(Clone, Debug)]
pub struct HttpClientMetrics {
    client: &'static str,
    requests: Family<RequestLabels, Counter>,
    latency: Family<RequestLabels, Histogram, fn() -> Histogram>,
    in_flight: Gauge,
    errors: Family<ErrorLabels, Counter>,
}

impl HttpClientMetrics {
    /// Registers the `http_client_*` families at the top of `registry` for
    /// the client named `client`.
    pub fn register(registry: &mut Registry, client: &'static str) -> Self {
        let requests = Family::default();
        let latency: Family<RequestLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(|| Histogram::new(LATENCY_BUCKETS));
        let in_flight_family = Family::<ClientLabels, Gauge>::default();
        let in_flight = in_flight_family
            .get_or_create(&ClientLabels { client })
            .clone();
        let errors = Family::<ErrorLabels, Counter>::default();
        // A family without series is not printed at all: start with the
        // verbs the controllers use at 0, so the family is always declared.
        for method in ["get", "post", "put", "patch", "delete"] {
            drop(errors.get_or_create(&ErrorLabels {
                client,
                method: method.to_string(),
            }));
        }
        let sub = registry.sub_registry_with_prefix("http_client");
        sub.register(
            "requests",
            "A counter for requests from the wrapped client",
            requests.clone(),
        );
        sub.register_with_unit(
            "request_latency",
            "A histogram of request latencies",
            Unit::Seconds,
            latency.clone(),
        );
        sub.register(
            "in_flight_requests",
            "A gauge of in-flight requests for the wrapped client",
            in_flight_family,
        );
        sub.register(
            "errors",
            "A counter for errors from the wrapped client",
            errors.clone(),
        );
        Self {
            client,
            requests,
            latency,
            in_flight,
            errors,
        }
    }

    /// The layer that counts a client's requests.
    pub fn layer(&self) -> HttpClientMetricsLayer {
        HttpClientMetricsLayer(self.clone())
    }
}

/// See [`HttpClientMetrics::layer`].
#[derive(Clone, Debug)]
pub struct HttpClientMetricsLayer(HttpClientMetrics);

impl<S> tower::Layer<S> for HttpClientMetricsLayer {
    type Service = HttpClientMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        HttpClientMetricsService {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// The service of [`HttpClientMetricsLayer`].
#[derive(Clone, Debug)]
pub struct HttpClientMetricsService<S> {
    inner: S,
    metrics: HttpClientMetrics,
}

impl<S, B, R> tower::Service<http::Request<B>> for HttpClientMetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<R>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_ascii_lowercase();
        let metrics = self.metrics.clone();
        metrics.in_flight.inc();
        let start = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            metrics.in_flight.dec();
            match &result {
                Ok(response) => {
                    let labels = RequestLabels {
                        client: metrics.client,
                        code: response.status().as_u16().to_string(),
                        method,
                    };
                    metrics.requests.get_or_create(&labels).inc();
                    metrics
                        .latency
                        .get_or_create(&labels)
                        .observe(start.elapsed().as_secs_f64());
                }
                Err(_) => {
                    metrics
                        .errors
                        .get_or_create(&ErrorLabels {
                            client: metrics.client,
                            method,
                        })
                        .inc();
                }
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer as _, ServiceExt as _};

    #[tokio::test]
    async fn counts_requests_by_code_and_method() {
        let mut registry = Registry::default();
        let metrics = HttpClientMetrics::register(&mut registry, "k8s");
        let svc = metrics
            .layer()
            .layer(tower::service_fn(|r: http::Request<()>| async move {
                if r.uri().path() == "/fail" {
                    return Err("connection refused");
                }
                Ok(http::Response::builder()
                    .status(if r.uri().path() == "/missing" {
                        404
                    } else {
                        200
                    })
                    .body(())
                    .expect("response"))
            }));
        for (method, path) in [
            ("GET", "/a"),
            ("GET", "/b"),
            ("PATCH", "/missing"),
            ("GET", "/fail"),
        ] {
            let request = http::Request::builder()
                .method(method)
                .uri(path)
                .body(())
                .expect("request");
            let _ = svc.clone().oneshot(request).await;
        }
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encode");
        for line in [
            "http_client_requests_total{client=\"k8s\",code=\"200\",method=\"get\"} 2",
            "http_client_requests_total{client=\"k8s\",code=\"404\",method=\"patch\"} 1",
            "http_client_request_latency_seconds_count{client=\"k8s\",code=\"200\",method=\"get\"} 2",
            "http_client_in_flight_requests{client=\"k8s\"} 0",
            "http_client_errors_total{client=\"k8s\",method=\"get\"} 1",
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
    }
}
