//! `policy-controller`: parses flags and runs [`policy_controller::runtime`].

use clap::Parser;
use policy_controller::args::Args;

// jemalloc by default, as in the original: less fragmentation than glibc's
// allocator under many small, long-lived per-stream allocations. The
// `mimalloc` feature selects mimalloc instead; with neither feature
// (`--no-default-features`) it is the system allocator (see Cargo.toml).
#[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init(meridian_runtime::LogDialect::Kubert)?;
    meridian_runtime::build_info::log_start("policy-controller");
    #[cfg(all(feature = "jemalloc", not(feature = "mimalloc")))]
    meridian_runtime::jemalloc::purge_in_background();
    policy_controller::runtime::run(args).await
}
