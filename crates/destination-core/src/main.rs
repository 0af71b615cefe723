//! `destination`: parses flags and runs [`destination_core::runtime`].

use clap::Parser;
use destination_core::runtime::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init()?;
    destination_core::runtime::run(args).await
}
