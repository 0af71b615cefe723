//! `meridian-bench failover`: proxy-shaped clients spread over two
//! replicas of a server; one replica is SIGKILLed and its clients reconnect
//! to the survivor (a reconnect storm); then it comes back and the clients
//! that left it return.
//!
//! Run for the destination (each proxy: `Get` + `GetProfile` for 4
//! targets, over the destination benchmark's Services) and for the policy
//! controller (each proxy: 4 `WatchPort` + 4 outbound `Watch`). Changes
//! are written through the API while the clients move, and every stream's
//! state, decoded from what it was sent ([`held`]), is compared with what
//! was written: a stream still wrong at the deadline missed an update.
//!
//! Prints the time from the kill until every client was served again, the
//! survivor's RSS and anonymous RSS before, at its peak during the storm
//! and once settled with every client (and their ratio, target ≤ 1.2), its
//! CPU for the storm, and its RSS after the returned replica took its
//! clients back (the memory it gave back). Every stream and connection end
//! is counted ([`crate::ends`]); nothing is asserted on time.

mod fleet;
mod held;
mod parts;
mod storm;

use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    Destination,
    Policy,
    Both,
}

#[derive(clap::Args)]
pub struct Args {
    /// Proxies (one HTTP/2 connection each), spread over the 2 replicas.
    #[arg(long, default_value_t = 2_500)]
    connections: usize,
    /// Targets per proxy: each a `Get` and a `GetProfile` (destination), or
    /// a `WatchPort` and an outbound `Watch` (policy controller).
    #[arg(long, default_value_t = 4)]
    targets: usize,
    /// Which server to fail over.
    #[arg(long, value_enum, default_value = "both")]
    part: Part,
    /// Changes written while the clients move (each one checked on every
    /// stream it concerns).
    #[arg(long, default_value_t = 20)]
    changes: usize,
    /// How long to wait for every stream to be served, or correct.
    #[arg(long, default_value_t = 180)]
    timeout_secs: u64,
    /// The `destination` binary.
    #[arg(long)]
    destination_bin: PathBuf,
    /// The `policy-controller` binary.
    #[arg(long)]
    policy_bin: PathBuf,
}

pub async fn run(args: Args) -> anyhow::Result<()> {
    let mut summaries = Vec::new();
    if matches!(args.part, Part::Destination | Part::Both) {
        summaries.push(parts::destination(&args).await?);
    }
    if matches!(args.part, Part::Policy | Part::Both) {
        summaries.push(parts::policy(&args).await?);
    }
    crate::ends::phase("report", false);
    let (streams, connections) = crate::ends::report();
    for s in &summaries {
        println!("  summary: {s}");
    }
    println!(
        "  summary: unexpected stream ends {streams}, unexpected connection ends {connections}"
    );
    Ok(())
}
