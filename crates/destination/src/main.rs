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
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let (args, normalised) = GO_FLAGS.parse::<Args>();
    args.log.init()?;
    normalised.log_ignored();
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    purge_in_background();
    destination::runtime::run(args).await
}

/// Starts jemalloc's background thread, which returns freed pages to the
/// system after its decay time (`dirty_decay_ms`, 10 s, on the thread's
/// own schedule: measured resident 10 s after Ready, returned by 30 s),
/// also while the process is idle. Without it jemalloc purges only when the process
/// allocates again, so the memory of the initial lists (the API's pages,
/// decoded, then dropped) stayed resident in a quiet controller: most of
/// its memory per pod of the cluster (issue 21; `cargo xtask bench
/// cluster-size`, docs/performance.md).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
fn purge_in_background() {
    if let Err(error) = tikv_jemalloc_ctl::background_thread::write(true) {
        tracing::warn!(%error, "jemalloc's background purging is off: freed memory returns to the system only as the process allocates");
    }
}
