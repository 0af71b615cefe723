//! `destination`: parses flags (Meridian's, and the original's Go-style
//! ones as the Linkerd chart passes them) and runs [`destination::runtime`].

use destination::runtime::{Args, GO_FLAGS};
use meridian_runtime::span_export::SpanExport;

// jemalloc by default: less fragmentation than glibc's allocator under
// many small, long-lived per-stream allocations, and faster multi-threaded
// allocation. The `mimalloc` feature selects mimalloc instead; with neither
// feature (`--no-default-features`) it is the system allocator (see
// Cargo.toml).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
// jemalloc's heap profiler, inactive unless `-enable-pprof` (docs/profiling.md).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
meridian_runtime::jemalloc_malloc_conf!();
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (args, normalised) = GO_FLAGS.parse::<Args>();
    // `-trace-collector`: spans as the original's, of service
    // `linkerd-destination`; a collector that cannot be used is warned of
    // and the controller runs on, as the original does.
    let spans = (!args.trace_collector.is_empty())
        .then(|| SpanExport::start(&args.trace_collector, "linkerd-destination"));
    let (spans, spans_error) = match spans {
        Some(Ok(spans)) => (Some(spans), None),
        Some(Err(error)) => (None, Some(error)),
        None => (None, None),
    };
    args.log
        .init_with_spans(meridian_runtime::LogDialect::Go, spans.as_ref())?;
    normalised.log_ignored();
    meridian_runtime::build_info::log_start("destination");
    if let Some(spans) = &spans {
        tracing::info!(
            collector = spans.collector(),
            "exporting spans over OTLP/gRPC"
        );
    }
    if let Some(error) = spans_error {
        tracing::warn!(%error, "failed to initialize tracing");
    }
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::purge_in_background();
    let result = destination::runtime::run(args).await;
    // The last spans leave before the process does.
    drop(spans);
    result
}
