//! A real Kubernetes control plane on 127.0.0.1, for tests and local runs.
//!
//! Like controller-runtime's envtest, this builds `kube-apiserver`,
//! `kube-controller-manager` and `etcd` from their Go modules (pinned in
//! `xtask/gotools/`), caches the binaries by version outside the checkout,
//! and runs them on free loopback ports. No kubelet runs: a fake Node is
//! created and pods are made Ready by writing their status (see
//! `test-support`). kube-controller-manager runs the EndpointSlice, garbage
//! collector and namespace controllers, so the EndpointSlices tests observe
//! are made by Kubernetes itself.
//!
//! A real node is optional ([`ClusterOptions::real_node`], module
//! [`real_node`]): containerd, kubelet, kube-proxy and kube-scheduler, with
//! images built locally ([`images`]), so pods run real containers.

pub mod binaries;
pub mod certs;
pub mod cluster;
pub mod images;
pub mod kubectl;
pub mod node;
pub mod ports;
pub mod probe;
pub mod process;
pub mod real_node;
pub mod webhooks;
pub mod workload;

pub use binaries::{KubeBinaries, Pins};
pub use certs::{CertError, LocalCa, ServingCert};
pub use cluster::{Cluster, ClusterError, ClusterOptions, ClusterState};
pub use ports::free_port;
pub use process::{Lifetime, ManagedProcess};
