//! `policy-controller`: parses flags and runs [`policy_controller::runtime`].

use clap::Parser;
use policy_controller::args::Args;

// jemalloc, as in the original: less fragmentation than glibc's allocator
// under many small, long-lived per-stream allocations.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init()?;
    policy_controller::runtime::run(args).await
}
