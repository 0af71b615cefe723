//! The gRPC server metrics of Linkerd's controllers, as a tower layer for
//! both gRPC servers: `grpc_server_started_total`,
//! `grpc_server_msg_received_total`, `grpc_server_msg_sent_total`,
//! `grpc_server_handled_total` (with `grpc_code`) and the
//! `grpc_server_handling_seconds` histogram (buckets 0.1, 1, 300 and
//! 3600 s, for long-lived streams), labelled `grpc_service`,
//! `grpc_method` and `grpc_type` (`unary`, `server_stream`). These are
//! the names and labels of go-grpc-prometheus, which the original Go
//! destination uses, and of the original policy controller's own
//! implementation; Linkerd's Grafana dashboards read them.
//!
//! Both originals create each method's `started`, `msg_received`,
//! `msg_sent` and `handling` series at zero when they start. They differ
//! in two ways, kept here ([`CodeNames`]): the Go destination spells codes
//! as grpc-go does (`OK`, `Canceled`, `InvalidArgument`, …) and also
//! creates `handled` for every code at start; the Rust policy controller
//! spells them as the protocol does (`OK`, `CANCELLED`,
//! `INVALID_ARGUMENT`, …) and creates a code's `handled` series when it is
//! first used (`OK` when a call starts).
//!
//! A request counts one message received when it starts (every method is
//! unary or server-streaming); each length-prefixed message of the
//! response body counts one sent as it is written; the call is handled
//! with the `grpc-status` of its trailers (or of a trailers-only
//! response, whose empty body the server may drop without reading), or
//! `Canceled` when the client went away first. Calls to
//! paths the server does not serve are not counted (grpc-go runs no
//! interceptor for them).

use std::{
    collections::HashMap,
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Instant,
};

use bytes::Buf;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, histogram::Histogram},
    registry::{Registry, Unit},
};
use tonic::Code;

/// The kind of a method, as the `grpc_type` label spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RpcType {
    Unary,
    ServerStream,
}

impl RpcType {
    fn as_str(self) -> &'static str {
        match self {
            Self::Unary => "unary",
            Self::ServerStream => "server_stream",
        }
    }
}

/// One method a server serves: (`grpc_service`, `grpc_method`, type).
pub type Method = (&'static str, &'static str, RpcType);

/// How `grpc_code` is spelled, and whether series exist before the first
/// call (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CodeNames {
    /// grpc-go's `Code.String()`; every series created at start.
    Go,
    /// The protocol's names; series created on the first call.
    Rust,
}

const ALL_CODES: [Code; 17] = [
    Code::Ok,
    Code::Cancelled,
    Code::Unknown,
    Code::InvalidArgument,
    Code::DeadlineExceeded,
    Code::NotFound,
    Code::AlreadyExists,
    Code::PermissionDenied,
    Code::ResourceExhausted,
    Code::FailedPrecondition,
    Code::Aborted,
    Code::OutOfRange,
    Code::Unimplemented,
    Code::Internal,
    Code::Unavailable,
    Code::DataLoss,
    Code::Unauthenticated,
];

impl CodeNames {
    /// The `grpc_code` value of `code`.
    pub fn name(self, code: Code) -> &'static str {
        let (go, rust) = match code {
            Code::Ok => ("OK", "OK"),
            Code::Cancelled => ("Canceled", "CANCELLED"),
            Code::Unknown => ("Unknown", "UNKNOWN"),
            Code::InvalidArgument => ("InvalidArgument", "INVALID_ARGUMENT"),
            Code::DeadlineExceeded => ("DeadlineExceeded", "DEADLINE_EXCEEDED"),
            Code::NotFound => ("NotFound", "NOT_FOUND"),
            Code::AlreadyExists => ("AlreadyExists", "ALREADY_EXISTS"),
            Code::PermissionDenied => ("PermissionDenied", "PERMISSION_DENIED"),
            Code::ResourceExhausted => ("ResourceExhausted", "RESOURCE_EXHAUSTED"),
            Code::FailedPrecondition => ("FailedPrecondition", "FAILED_PRECONDITION"),
            Code::Aborted => ("Aborted", "ABORTED"),
            Code::OutOfRange => ("OutOfRange", "OUT_OF_RANGE"),
            Code::Unimplemented => ("Unimplemented", "UNIMPLEMENTED"),
            Code::Internal => ("Internal", "INTERNAL"),
            Code::Unavailable => ("Unavailable", "UNAVAILABLE"),
            Code::DataLoss => ("DataLoss", "DATA_LOSS"),
            Code::Unauthenticated => ("Unauthenticated", "UNAUTHENTICATED"),
        };
        match self {
            Self::Go => go,
            Self::Rust => rust,
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Labels {
    grpc_service: &'static str,
    grpc_method: &'static str,
    grpc_type: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabels {
    grpc_service: &'static str,
    grpc_method: &'static str,
    grpc_type: &'static str,
    grpc_code: &'static str,
}

/// The buckets of `grpc_server_handling_seconds`: the originals' (a
/// proxy's streams live minutes to an hour).
const HANDLING_BUCKETS: [f64; 4] = [0.1, 1.0, 300.0, 3600.0];

#[derive(Clone, Debug)]
struct Families {
    started: Family<Labels, Counter>,
    received: Family<Labels, Counter>,
    sent: Family<Labels, Counter>,
    handled: Family<CodeLabels, Counter>,
    handling: Family<Labels, Histogram, fn() -> Histogram>,
}

/// One method's series.
#[derive(Debug)]
struct MethodMetrics {
    labels: Labels,
    codes: CodeNames,
    families: Families,
}

impl MethodMetrics {
    fn started(&self) {
        self.families.started.get_or_create(&self.labels).inc();
        self.families.received.get_or_create(&self.labels).inc();
        if self.codes == CodeNames::Rust {
            // The original creates the OK series when a call starts.
            let _ = self
                .families
                .handled
                .get_or_create(&self.code_labels(Code::Ok));
        }
    }

    fn sent(&self, messages: u64) {
        self.families
            .sent
            .get_or_create(&self.labels)
            .inc_by(messages);
    }

    fn handled(&self, code: Code, since: Instant) {
        self.families
            .handled
            .get_or_create(&self.code_labels(code))
            .inc();
        self.families
            .handling
            .get_or_create(&self.labels)
            .observe(since.elapsed().as_secs_f64());
    }

    fn code_labels(&self, code: Code) -> CodeLabels {
        CodeLabels {
            grpc_service: self.labels.grpc_service,
            grpc_method: self.labels.grpc_method,
            grpc_type: self.labels.grpc_type,
            grpc_code: self.codes.name(code),
        }
    }
}

/// The metrics of one gRPC server; [`GrpcServerMetrics::layer`] counts
/// its calls.
#[derive(Clone, Debug)]
pub struct GrpcServerMetrics {
    by_path: Arc<HashMap<String, Arc<MethodMetrics>>>,
}

impl GrpcServerMetrics {
    /// Registers the `grpc_server_*` families at the top of `registry`
    /// for a server serving `methods`.
    pub fn register(registry: &mut Registry, codes: CodeNames, methods: &[Method]) -> Self {
        let families = Families {
            started: Family::default(),
            received: Family::default(),
            sent: Family::default(),
            handled: Family::default(),
            handling: Family::new_with_constructor(|| Histogram::new(HANDLING_BUCKETS)),
        };
        let sub = registry.sub_registry_with_prefix("grpc_server");
        sub.register(
            "started",
            "Total number of RPCs started on the server",
            families.started.clone(),
        );
        sub.register(
            "msg_received",
            "Total number of RPC stream messages received on the server",
            families.received.clone(),
        );
        sub.register(
            "msg_sent",
            "Total number of gRPC stream messages sent by the server",
            families.sent.clone(),
        );
        sub.register(
            "handled",
            "Total number of RPCs completed on the server, regardless of success or failure",
            families.handled.clone(),
        );
        sub.register_with_unit(
            "handling",
            "Histogram of response latency (seconds) of gRPC that had been application-level handled by the server",
            Unit::Seconds,
            families.handling.clone(),
        );
        let by_path = methods
            .iter()
            .map(|&(service, method, kind)| {
                let m = MethodMetrics {
                    labels: Labels {
                        grpc_service: service,
                        grpc_method: method,
                        grpc_type: kind.as_str(),
                    },
                    codes,
                    families: families.clone(),
                };
                let _ = m.families.started.get_or_create(&m.labels);
                let _ = m.families.received.get_or_create(&m.labels);
                let _ = m.families.sent.get_or_create(&m.labels);
                let _ = m.families.handling.get_or_create(&m.labels);
                if codes == CodeNames::Go {
                    for code in ALL_CODES {
                        let _ = m.families.handled.get_or_create(&m.code_labels(code));
                    }
                }
                (format!("/{service}/{method}"), Arc::new(m))
            })
            .collect();
        Self {
            by_path: Arc::new(by_path),
        }
    }

    /// The layer counting the calls of a server.
    pub fn layer(&self) -> GrpcMetricsLayer {
        GrpcMetricsLayer(self.clone())
    }
}

/// See [`GrpcServerMetrics::layer`].
#[derive(Clone, Debug)]
pub struct GrpcMetricsLayer(GrpcServerMetrics);

impl<S> tower::Layer<S> for GrpcMetricsLayer {
    type Service = GrpcMetricsService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        GrpcMetricsService {
            inner,
            metrics: self.0.clone(),
        }
    }
}

/// The service of [`GrpcMetricsLayer`].
#[derive(Clone, Debug)]
pub struct GrpcMetricsService<S> {
    inner: S,
    metrics: GrpcServerMetrics,
}

impl<S, B> tower::Service<http::Request<B>> for GrpcMetricsService<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<tonic::body::Body>>,
    S::Future: Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = self.metrics.by_path.get(request.uri().path()).cloned();
        let response = self.inner.call(request);
        let Some(method) = method else {
            return Box::pin(response);
        };
        method.started();
        let since = Instant::now();
        Box::pin(async move {
            let response = response.await?;
            let trailers_only = grpc_status(response.headers());
            Ok(response.map(|body| {
                tonic::body::Body::new(CountingBody {
                    inner: body,
                    method: Some(method),
                    since,
                    trailers_only,
                    frames: FrameCounter::default(),
                })
            }))
        })
    }
}

fn grpc_status(headers: &http::HeaderMap) -> Option<Code> {
    let value = headers.get("grpc-status")?.to_str().ok()?;
    value.parse::<i32>().ok().map(Code::from_i32)
}

/// Counts the length-prefixed messages in a stream of bytes: a 5-byte
/// prefix (compression flag, big-endian length), then the message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct FrameCounter {
    /// Prefix bytes read of the current message (0..5).
    prefix_read: u8,
    /// The length bytes read so far.
    length: u32,
    /// Message bytes still to skip.
    remaining: u64,
}

impl FrameCounter {
    /// Reads `bytes`; returns how many messages started in them.
    fn feed(&mut self, mut bytes: &[u8]) -> u64 {
        let mut started = 0;
        while !bytes.is_empty() {
            if self.remaining > 0 {
                let skip = usize::try_from(self.remaining)
                    .unwrap_or(usize::MAX)
                    .min(bytes.len());
                bytes = &bytes[skip..];
                self.remaining -= skip as u64;
                continue;
            }
            let byte = bytes[0];
            bytes = &bytes[1..];
            if self.prefix_read == 0 {
                started += 1;
                self.length = 0;
            } else {
                self.length = (self.length << 8) | u32::from(byte);
            }
            self.prefix_read += 1;
            if self.prefix_read == 5 {
                self.prefix_read = 0;
                self.remaining = u64::from(self.length);
            }
        }
        started
    }
}

/// A response body that counts its messages and reports the call handled
/// when it ends (or is dropped unfinished: `Canceled`).
struct CountingBody {
    inner: tonic::body::Body,
    /// `None` once the call was reported.
    method: Option<Arc<MethodMetrics>>,
    since: Instant,
    trailers_only: Option<Code>,
    frames: FrameCounter,
}

impl CountingBody {
    fn finish(&mut self, code: Code) {
        if let Some(method) = self.method.take() {
            method.handled(code, self.since);
        }
    }
}

impl Body for CountingBody {
    type Data = bytes::Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    let messages = this.frames.feed(data.chunk());
                    if messages > 0
                        && let Some(method) = &this.method
                    {
                        method.sent(messages);
                    }
                } else if let Some(trailers) = frame.trailers_ref() {
                    let code = grpc_status(trailers).unwrap_or(Code::Unknown);
                    this.finish(code);
                }
            }
            Poll::Ready(Some(Err(_))) => this.finish(Code::Internal),
            Poll::Ready(None) => {
                let code = this.trailers_only.unwrap_or(Code::Unknown);
                this.finish(code);
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for CountingBody {
    fn drop(&mut self) {
        // A trailers-only answer (an empty body the server need not read)
        // ends with its status. Otherwise, dropped before its end: the
        // client went away (or the connection did), which grpc-go reports
        // as Canceled.
        let code = match self.trailers_only {
            Some(code) => code,
            None if self.inner.is_end_stream() => Code::Unknown,
            None => Code::Cancelled,
        };
        self.finish(code);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt as _;
    use tower::{Layer as _, Service as _, ServiceExt as _};

    const METHODS: &[Method] = &[
        ("demo.Svc", "Watch", RpcType::ServerStream),
        ("demo.Svc", "Get", RpcType::Unary),
    ];

    fn scrape(registry: &Registry) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, registry).expect("encode");
        text
    }

    #[test]
    fn counts_messages_across_chunks() {
        let mut c = FrameCounter::default();
        // Two messages of 3 and 0 bytes, then one of 2 split mid-prefix.
        assert_eq!(c.feed(&[0, 0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0]), 3);
        assert_eq!(c.feed(&[0, 0, 2, 9]), 0);
        assert_eq!(c.feed(&[9, 0, 0, 0, 0]), 1);
        assert_eq!(
            c,
            FrameCounter {
                prefix_read: 4,
                length: 0,
                remaining: 0
            }
        );
    }

    /// A server answering `/demo.Svc/Watch` with two messages and OK
    /// trailers, anything else with trailers-only `InvalidArgument`.
    fn server(
        request: http::Request<()>,
    ) -> std::future::Ready<Result<http::Response<tonic::body::Body>, std::convert::Infallible>>
    {
        if request.uri().path() == "/demo.Svc/Watch" {
            let frames = futures::stream::iter([
                Ok::<_, tonic::Status>(Frame::data(bytes::Bytes::from_static(&[
                    0, 0, 0, 0, 1, 7, 0, 0, 0, 0, 1,
                ]))),
                Ok(Frame::data(bytes::Bytes::from_static(&[8]))),
                Ok(Frame::trailers(crate::status_trailers(&tonic::Status::ok(
                    "",
                )))),
            ]);
            let body = tonic::body::Body::new(http_body_util::StreamBody::new(frames));
            std::future::ready(Ok(http::Response::new(body)))
        } else {
            std::future::ready(Ok(crate::error_response(&tonic::Status::invalid_argument(
                "no",
            ))))
        }
    }

    type TestService = GrpcMetricsService<
        tower::util::ServiceFn<
            fn(
                http::Request<()>,
            ) -> std::future::Ready<
                Result<http::Response<tonic::body::Body>, std::convert::Infallible>,
            >,
        >,
    >;

    /// Calls `path` on `svc`.
    async fn respond(svc: &mut TestService, path: &str) -> http::Response<tonic::body::Body> {
        let request = http::Request::builder()
            .uri(path)
            .body(())
            .expect("request");
        svc.ready()
            .await
            .expect("ready")
            .call(request)
            .await
            .expect("infallible")
    }

    #[tokio::test]
    async fn go_style_counts_calls_and_creates_every_series() {
        let mut registry = Registry::default();
        let metrics = GrpcServerMetrics::register(&mut registry, CodeNames::Go, METHODS);
        let text = scrape(&registry);
        assert!(
            text.contains(
                "grpc_server_handled_total{grpc_service=\"demo.Svc\",grpc_method=\"Get\",grpc_type=\"unary\",grpc_code=\"Unauthenticated\"} 0"
            ),
            "{text}"
        );
        let mut svc = metrics
            .layer()
            .layer(tower::service_fn(server as fn(_) -> _));
        // A stream read to its end: two messages, OK.
        respond(&mut svc, "/demo.Svc/Watch")
            .await
            .into_body()
            .collect()
            .await
            .expect("body");
        // A unary call refused at once.
        respond(&mut svc, "/demo.Svc/Get")
            .await
            .into_body()
            .collect()
            .await
            .expect("body");
        // A stream the client drops before its end.
        drop(respond(&mut svc, "/demo.Svc/Watch").await);
        // Not a method of this server: not counted.
        drop(respond(&mut svc, "/other.Svc/X").await);
        let text = scrape(&registry);
        let watch = "grpc_service=\"demo.Svc\",grpc_method=\"Watch\",grpc_type=\"server_stream\"";
        let get = "grpc_service=\"demo.Svc\",grpc_method=\"Get\",grpc_type=\"unary\"";
        for line in [
            format!("grpc_server_started_total{{{watch}}} 2"),
            format!("grpc_server_msg_received_total{{{watch}}} 2"),
            format!("grpc_server_msg_sent_total{{{watch}}} 2"),
            format!("grpc_server_handled_total{{{watch},grpc_code=\"OK\"}} 1"),
            format!("grpc_server_handled_total{{{watch},grpc_code=\"Canceled\"}} 1"),
            format!("grpc_server_handled_total{{{get},grpc_code=\"InvalidArgument\"}} 1"),
            format!("grpc_server_handling_seconds_count{{{watch}}} 2"),
            format!("grpc_server_msg_sent_total{{{get}}} 0"),
        ] {
            assert!(text.contains(&line), "{line}\n{text}");
        }
        assert!(!text.contains("other.Svc"), "{text}");
    }

    #[tokio::test]
    async fn rust_style_spells_codes_as_the_protocol_and_creates_series_on_use() {
        let mut registry = Registry::default();
        let metrics = GrpcServerMetrics::register(&mut registry, CodeNames::Rust, METHODS);
        let text = scrape(&registry);
        assert!(!text.contains("grpc_code"), "{text}");
        assert!(
            text.contains("grpc_server_msg_sent_total{grpc_service=\"demo.Svc\",grpc_method=\"Watch\",grpc_type=\"server_stream\"} 0"),
            "{text}"
        );
        let mut svc = metrics
            .layer()
            .layer(tower::service_fn(server as fn(_) -> _));
        // A trailers-only answer whose empty body is never read.
        drop(respond(&mut svc, "/demo.Svc/Get").await);
        let text = scrape(&registry);
        let get = "grpc_service=\"demo.Svc\",grpc_method=\"Get\",grpc_type=\"unary\"";
        for line in [
            format!("grpc_server_handled_total{{{get},grpc_code=\"INVALID_ARGUMENT\"}} 1"),
            format!("grpc_server_handled_total{{{get},grpc_code=\"OK\"}} 0"),
        ] {
            assert!(text.contains(&line), "{line}\n{text}");
        }
        assert!(
            !text.contains("Watch\",grpc_type=\"server_stream\",grpc_code"),
            "{text}"
        );
    }
}
