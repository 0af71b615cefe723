//! `destination`: parses flags and runs [`destination_core::runtime`].

use clap::Parser;
use destination_core::runtime::Args;

// jemalloc: less fragmentation than glibc's allocator under many small,
// long-lived per-stream allocations, and faster multi-threaded allocation.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init()?;
    destination_core::runtime::run(args).await
}
