//! `meridian-bench`: benchmarks that print figures (never timed assertions).
//! Run through `cargo xtask bench <name>`, which builds everything in release
//! mode first.

mod abuse;
mod cluster_size;
mod common;
mod destination;
mod ends;
mod failover;
mod floor;
mod overload;
mod policy;
mod policy_outbound;
mod proxy_client;
mod shape;
mod soak;
mod sp_validator;
mod stats;
mod trivial;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "meridian-bench", about = "Meridian benchmarks")]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

#[derive(Subcommand)]
enum Bench {
    /// Get streams: memory per connection and stream, CPU, and endpoint
    /// change fan-out latency.
    ///
    /// `--shape proxy` (default): 2,500 connections × 4 `Get` streams, each
    /// with a `GetProfile`; two hot Services × 500 endpoints, 200 small
    /// ones. `--shape legacy`: 10,000 `Get` streams over 50 connections, no
    /// `GetProfile`; three hot Services × 200 endpoints, 97 small ones.
    Destination(destination::Args),
    /// WatchPort and outbound Watch streams: memory per connection and
    /// stream, CPU, and Server / HTTPRoute-change fan-out latency.
    ///
    /// `--shape proxy` (default): 2,500 connections × 4 `WatchPort` streams;
    /// `--shape legacy`: 10,000 over 50 connections. The outbound `Watch`
    /// streams use the same connections.
    Policy(policy::Args),
    /// Memory and CPU per pod of the cluster: N injected pods in N/50
    /// Services, each binary started after them, then the
    /// proxy-shaped streams at the largest N.
    ClusterSize(cluster_size::Args),
    /// The cluster-size benchmark with Linkerd 2.20's own `controller` and
    /// `policy-controller` beside Meridian's on the same fixtures, and a
    /// table of ratios (SKIP without `--linkerd-bin`).
    CompareLinkerd(cluster_size::linkerd::CompareArgs),
    /// What lookups a client chooses freely cost: API server requests,
    /// answers and latency, memory and metric series (misses, absent
    /// names, unknown node names).
    Abuse(abuse::Args),
    /// AdmissionReviews over TLS: reviews per second and latency.
    SpValidator(sp_validator::Args),
    /// Stalled clients, stream floods and bad peers on every port.
    Overload(overload::Args),
    /// Two replicas under proxy-shaped clients; one SIGKILLed: time until
    /// every client is served again by the survivor, its memory and CPU
    /// through the reconnect storm, missed updates, memory given back once
    /// the replica returns.
    Failover(failover::Args),
    /// Churn and faults against the destination and the policy controller,
    /// auditing every stream against the API's truth.
    Soak(soak::Args),
    /// The trivial streaming server the benchmarks measure their client
    /// against (started by them, not by hand).
    #[command(hide = true)]
    TrivialServer(trivial::Args),
    /// The trivial HTTPS server the sp-validator benchmark measures its
    /// client against.
    #[command(hide = true)]
    TrivialHttps(trivial::HttpsArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.bench {
        Bench::Destination(args) => runtime.block_on(destination::run(args)),
        Bench::Policy(args) => runtime.block_on(policy::run(args)),
        Bench::Abuse(args) => runtime.block_on(abuse::run(args)),
        Bench::ClusterSize(args) => runtime.block_on(cluster_size::run(args)),
        Bench::CompareLinkerd(args) => runtime.block_on(cluster_size::linkerd::run(args)),
        Bench::SpValidator(args) => runtime.block_on(sp_validator::run(args)),
        Bench::Overload(args) => runtime.block_on(overload::run(args)),
        Bench::Failover(args) => runtime.block_on(failover::run(args)),
        Bench::Soak(args) => runtime.block_on(soak::run(args)),
        Bench::TrivialServer(args) => runtime.block_on(trivial::serve(args)),
        Bench::TrivialHttps(args) => runtime.block_on(trivial::serve_https(args)),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_subcommands_flags_are_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
