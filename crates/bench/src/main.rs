//! `meridian-bench`: benchmarks that print figures (never timed assertions).
//! Run through `cargo xtask bench <name>`, which builds everything in release
//! mode first.

mod destination;
mod stats;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "meridian-bench", about = "Meridian benchmarks")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Get streams: memory per stream and update fan-out latency.
    Destination(destination::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.bench {
        Bench::Destination(args) => runtime.block_on(destination::run(args)),
    }
}
