//! `destination`: parses flags (Meridian's, and the original's Go-style
//! ones as the Linkerd chart passes them) and runs [`destination::runtime`].

use destination::runtime::{Args, GO_FLAGS};

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
    args.log.init()?;
    normalised.log_ignored();
    meridian_runtime::build_info::log_start("destination");
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::purge_in_background();
    destination::runtime::run(args).await
}
