//! `policy-controller`: parses flags and runs [`policy_controller::runtime`].

use clap::Parser;
use policy_controller::args::Args;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    args.log.init()?;
    policy_controller::runtime::run(args).await
}
