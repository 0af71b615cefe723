//! One span per gRPC request, for `-trace-collector`
//! ([`meridian_runtime::span_export`]): from the request's arrival to its
//! response headers (a stream's opening, not its life: a span is exported
//! when it ends, and a `Get` stream lives for hours). Named as the
//! original's OpenCensus gRPC spans (`ocgrpc`): the full method with dots,
//! `io.linkerd.proxy.destination.Destination.Get`, with the OpenTelemetry
//! RPC attributes (`rpc.system`, `rpc.service`, `rpc.method`, and
//! `rpc.grpc.status_code` when the answer is an immediate status).
//!
//! Built only when enabled: otherwise the layer passes requests through.

use std::{
    future::Future,
    pin::Pin,
    task::{Context, Poll},
};

use futures::future::Either;
use meridian_runtime::span_export::TARGET;
use tracing::Instrument as _;

/// Wraps each request of a server in a span when `enabled`.
#[derive(Clone, Copy, Debug)]
pub struct GrpcSpanLayer {
    enabled: bool,
}

impl GrpcSpanLayer {
    /// Spans for every request if `enabled` (`-trace-collector` given).
    pub fn new(enabled: bool) -> Self {
        Self { enabled }
    }
}

impl<S> tower::Layer<S> for GrpcSpanLayer {
    type Service = GrpcSpanService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcSpanService {
            inner,
            enabled: self.enabled,
        }
    }
}

/// The service of [`GrpcSpanLayer`].
#[derive(Clone, Debug)]
pub struct GrpcSpanService<S> {
    inner: S,
    enabled: bool,
}

type Traced<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S, B, R> tower::Service<http::Request<B>> for GrpcSpanService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    R: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Either<S::Future, Traced<S::Response, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if !self.enabled {
            return Either::Left(self.inner.call(request));
        }
        let span = request_span(request.uri().path());
        let response = self.inner.call(request).instrument(span.clone());
        Either::Right(Box::pin(async move {
            let response = response.await?;
            if let Some(code) = response
                .headers()
                .get("grpc-status")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<i64>().ok())
            {
                span.record("rpc.grpc.status_code", code);
            }
            Ok(response)
        }))
    }
}

/// The span of a request to `path` (`/package.Service/Method`).
pub fn request_span(path: &str) -> tracing::Span {
    let full = path.trim_start_matches('/');
    let (service, method) = full.rsplit_once('/').unwrap_or((full, ""));
    tracing::info_span!(
        target: TARGET,
        "grpc.request",
        otel.name = %full.replace('/', "."),
        otel.kind = "server",
        rpc.system = "grpc",
        rpc.service = service,
        rpc.method = method,
        rpc.grpc.status_code = tracing::field::Empty,
    )
}
