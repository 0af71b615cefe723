//! `-trace-collector=<host:port>`: OpenTelemetry spans exported over
//! OTLP/gRPC, as an extra layer of the `tracing` subscriber
//! ([`crate::LogArgs::init_with_spans`]).
//!
//! Only spans of the target [`TARGET`] are exported: one per gRPC request
//! (`grpc_stream::trace`) and one per index update (`k8s_index`'s
//! watches). Without the flag that target is filtered off
//! (`meridian_otel=off` in every binary's log filter), so those spans are
//! never built; with it, the log lines do not show them either (the log's
//! filter is then its own layer's).
//!
//! The original (Linkerd 2.20's `pkg/trace`) exports OpenCensus spans to
//! an OpenCensus agent; OpenCensus is retired and its collectors now take
//! OTLP (the chart's own example endpoint, `…:4317`, is OTLP/gRPC's port),
//! so Meridian speaks OTLP (docs/profiling.md).

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::WithExportConfig as _;
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use tracing::Subscriber;
use tracing_subscriber::{Layer, filter::Targets, registry::LookupSpan};

/// The `tracing` target of the spans exported (and of no log line).
pub const TARGET: &str = "meridian_otel";

/// How long one export to the collector may take.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why spans cannot be exported.
#[derive(Debug, thiserror::Error)]
pub enum SpanExportError {
    #[error("invalid -trace-collector {collector:?}: {source}")]
    Exporter {
        collector: String,
        source: opentelemetry_otlp::ExporterBuildError,
    },
}

/// The exporting pipeline: a batch of spans is sent every 5 s (and what is
/// left when this is dropped, at shutdown).
#[derive(Debug)]
pub struct SpanExport {
    provider: SdkTracerProvider,
    collector: String,
}

impl SpanExport {
    /// Exports to `collector` (`host:port`, or a URL) as service `service`
    /// (the original's: `linkerd-destination`). Call within a tokio runtime:
    /// the gRPC channel connects lazily on it.
    pub fn start(collector: &str, service: &'static str) -> Result<Self, SpanExportError> {
        let endpoint = if collector.contains("://") {
            collector.to_string()
        } else {
            format!("http://{collector}")
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|source| SpanExportError::Exporter {
                collector: collector.to_string(),
                source,
            })?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build();
        Ok(Self {
            provider,
            collector: collector.to_string(),
        })
    }

    /// The collector spans go to, as given.
    pub fn collector(&self) -> &str {
        &self.collector
    }

    /// The subscriber layer that turns [`TARGET`]'s spans into
    /// OpenTelemetry spans (and sees nothing else).
    pub fn layer<S>(&self) -> impl Layer<S> + Send + Sync + 'static
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        let tracer = self.provider.tracer("meridian");
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(Targets::new().with_target(TARGET, tracing::Level::TRACE))
    }

    /// Sends the spans ended so far now.
    pub fn flush(&self) {
        if let Err(error) = self.provider.force_flush() {
            tracing::warn!(%error, collector = %self.collector, "exporting spans failed");
        }
    }
}

impl Drop for SpanExport {
    fn drop(&mut self) {
        if let Err(error) = self.provider.shutdown() {
            tracing::warn!(%error, collector = %self.collector, "exporting the last spans failed");
        }
    }
}
