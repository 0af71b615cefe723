//! `cargo xtask …`: developer and CI entry points.
//!
//! - `cluster build|up|down|env|pin`: the local real Kubernetes control plane.
//! - `bench <name>`: benchmarks (release builds) that print figures; `bench h2-ab`: the destination benchmark with and without the h2 patch.
//! - `certs`: webhook TLS Secrets and caBundles for a `deploy/` install.
//! - `e2e`: the Meridian pod on a real kubelet (or kind, or any cluster) and the e2e suite; `e2e linkerd`: Meridian swapped into a real Linkerd 2.20 install.
//! - `gen-crds`: writes `deploy/crds/` from the Rust types.
//! - `images`: the container images, built locally (no registry needed).
//! - `h2-patch [--write]`: checks (or writes) `vendor/h2.patch`, the h2 release + patch = `vendor/h2`.
//! - `imports`: checks that no crate has an import circle between its modules.
//! - `soak`: churn and faults against the destination and the policy controller, every stream audited.
//! - `up`: the whole control plane locally, with sample workloads.
//! - `test`: every test of the workspace (builds the control plane first).

mod bench;
mod certs;
mod cluster;
mod e2e;
mod e2e_linkerd;
mod gen_crds;
mod h2_ab;
mod h2_patch;
mod images;
mod imports;
mod paths;
mod pin;
mod soak;
mod test;
mod up;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "cargo xtask", about = "Meridian developer tasks")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The local Kubernetes control plane (etcd, kube-apiserver, kube-controller-manager).
    #[command(subcommand)]
    Cluster(cluster::ClusterCommand),
    /// Runs a benchmark in release mode and prints its figures (e.g. `bench destination`).
    Bench(bench::BenchArgs),
    /// Creates the webhook TLS Secrets of a deploy/ install and sets the webhooks' caBundle.
    Certs(certs::CertsArgs),
    /// The Meridian pod for real: images, a cluster (a local real node, --kind, or --kubeconfig), deploy/, the e2e suite.
    E2e(e2e::E2eArgs),
    /// Writes deploy/crds/ from the Rust CRD types.
    GenCrds,
    /// Checks that the h2 release plus vendor/h2.patch is vendor/h2 (--write regenerates the patch).
    H2Patch {
        /// Write vendor/h2.patch from vendor/h2 instead of checking it.
        #[arg(long)]
        write: bool,
    },
    /// Checks that no crate of the workspace has an import circle between its modules.
    Imports,
    /// Builds the container images (base from Debian packages, pause, HTTP test, Meridian controller) with the local Docker daemon.
    Images(images::ImagesArgs),
    /// Runs the whole control plane on the local real API server, with sample workloads (Ctrl-C stops).
    Up(up::UpArgs),
    /// Churn and faults against the destination and the policy controller, auditing every stream (release build).
    Soak(soak::SoakArgs),
    /// Runs every test of the workspace against a freshly built local control plane.
    Test(test::TestArgs),
}

fn main() -> anyhow::Result<()> {
    match Cli::parse().command {
        Command::Cluster(command) => cluster::run(command),
        Command::Bench(args) => bench::run(args),
        Command::Certs(args) => certs::run(args),
        Command::E2e(args) => e2e::run(args),
        Command::GenCrds => gen_crds::run(),
        Command::H2Patch { write } => h2_patch::run(write),
        Command::Imports => imports::run(),
        Command::Images(args) => images::run(args),
        Command::Soak(args) => soak::run(args),
        Command::Test(args) => test::run(args),
        Command::Up(args) => up::run(args),
    }
}
