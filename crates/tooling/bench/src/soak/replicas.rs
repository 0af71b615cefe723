//! The replicas under test, each a pod's worth of processes: a destination
//! following its own policy controller's link (as in the pod, over
//! localhost), both named by the replica's pod name (`HOSTNAME`, the Lease
//! claimant); and the [`Directory`] the clients pick replicas from, the
//! soak's model of the headless Services' DNS answers
//! (`linkerd-dst-headless`, `linkerd-policy`): a replica is listed while
//! both its processes run and are ready, as a pod's endpoint is.

use std::{
    net::{Ipv4Addr, SocketAddr},
    path::Path,
    sync::atomic::{AtomicBool, AtomicUsize, Ordering},
    time::Duration,
};

use local_cluster::Cluster;

use super::{NS, rng::Rng, server::Server};

/// How long a graceful stop may take before SIGKILL (the chart's
/// `terminationGracePeriodSeconds` is 30 s; ours drain within ~10 s).
pub const STOP_GRACE: Duration = Duration::from_secs(20);

/// The log filter of the servers: warnings, the Lease decisions, and the
/// writers' writes (the Lease check reads them).
const LOG_LEVEL: &str = "warn,meridian_runtime::lease=info,policy_controller::status=debug,destination::external_workloads=debug";

/// One replica: its pod name, destination and policy controller.
pub struct Replica {
    /// The pod name (`HOSTNAME`, the Lease claimant).
    pub name: String,
    pub destination: Server,
    pub policy: Server,
}

/// The binaries and the flags every replica runs with.
pub struct Binaries<'a> {
    pub destination: &'a Path,
    pub policy: &'a Path,
    pub enable_ipv6: bool,
}

impl Replica {
    /// The replica's processes (not started).
    pub fn new(cluster: &Cluster, index: usize, bins: &Binaries<'_>) -> anyhow::Result<Self> {
        let name = format!("meridian-{index}");
        // The replica's own loopback address, as a pod has its own IP.
        let ip = Ipv4Addr::new(127, 0, 1, u8::try_from(index + 1)?);
        // The destination follows its own replica's policy controller, as
        // the two containers of a pod do over localhost.
        let feed = crate::common::free_addr_on(ip)?;
        let policy = Server::new(
            cluster,
            bins.policy,
            (&format!("policy-controller-{index}"), &name, ip),
            "grpc-addr",
            LOG_LEVEL,
            &[
                format!("--control-plane-namespace={NS}"),
                "--admission-controller-disabled".to_string(),
                format!("--workload-ports-addr={feed}"),
            ],
        )?;
        let destination = Server::new(
            cluster,
            bins.destination,
            (&format!("destination-{index}"), &name, ip),
            "addr",
            LOG_LEVEL,
            &[
                format!("--policy-addr=http://{feed}"),
                format!("--enable-ipv6={}", bins.enable_ipv6),
                format!("--controller-namespace={NS}"),
            ],
        )?;
        Ok(Self {
            name,
            destination,
            policy,
        })
    }

    /// Starts the policy controller, then the destination (which follows it).
    pub async fn start(&mut self) -> anyhow::Result<()> {
        if !self.policy.running() {
            self.policy.start().await?;
        }
        if !self.destination.running() {
            self.destination.start().await?;
        }
        Ok(())
    }

    /// Starts whichever of its processes is down (counted as restarts).
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        if !self.policy.running() {
            self.policy.restart().await?;
        }
        if !self.destination.running() {
            self.destination.restart().await?;
        }
        Ok(())
    }

    /// SIGKILLs both processes (the pod crashes, or its node goes).
    pub fn kill(&mut self) {
        self.destination.kill();
        self.policy.kill();
    }

    /// Stops both gracefully, at once (the kubelet terminating the pod).
    pub async fn stop(&mut self) {
        tokio::join!(
            self.destination.stop(STOP_GRACE),
            self.policy.stop(STOP_GRACE)
        );
    }

    /// Whether both processes run.
    pub fn up(&self) -> bool {
        self.destination.running() && self.policy.running()
    }

    /// The servers, destination first.
    pub fn servers(&self) -> [&Server; 2] {
        [&self.destination, &self.policy]
    }

    pub fn servers_mut(&mut self) -> [&mut Server; 2] {
        [&mut self.destination, &mut self.policy]
    }
}

/// Lazily connected channels (they reconnect by themselves after a server
/// restart on the same address).
fn channels(addr: SocketAddr, n: usize) -> anyhow::Result<Vec<tonic::transport::Channel>> {
    (0..n.max(1))
        .map(|_| {
            Ok(
                tonic::transport::Endpoint::from_shared(format!("http://{addr}"))?
                    .connect_timeout(Duration::from_secs(2))
                    .http2_keep_alive_interval(Duration::from_secs(10))
                    .keep_alive_timeout(Duration::from_secs(5))
                    .connect_lazy(),
            )
        })
        .collect()
}

/// Which server of a replica a stream talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// `Destination.Get` / `GetProfile` (`linkerd-dst-headless:8086`).
    Destination,
    /// `InboundServerPolicies` (`linkerd-policy:8090`).
    Policy,
}

/// One replica as clients see it: its connections and whether DNS lists it.
struct Listing {
    destination: Vec<tonic::transport::Channel>,
    policy: Vec<tonic::transport::Channel>,
    listed: AtomicBool,
    /// Streams open on it now (the balancer's load).
    attached: AtomicUsize,
}

/// The replicas as the clients see them.
pub struct Directory {
    replicas: Vec<Listing>,
}

impl Directory {
    /// `connections` lazily connected channels to each replica's
    /// destination, a quarter as many to its policy controller; every
    /// replica listed.
    pub fn new(replicas: &[Replica], connections: usize) -> anyhow::Result<Self> {
        let replicas = replicas
            .iter()
            .map(|r| {
                Ok(Listing {
                    destination: channels(r.destination.grpc, connections)?,
                    policy: channels(r.policy.grpc, (connections / 4).max(1))?,
                    listed: AtomicBool::new(true),
                    attached: AtomicUsize::new(0),
                })
            })
            .collect::<anyhow::Result<_>>()?;
        Ok(Self { replicas })
    }

    /// Lists or unlists replica `r` (its pod turns ready, or goes).
    pub fn set_listed(&self, r: usize, listed: bool) {
        if let Some(l) = self.replicas.get(r) {
            l.listed.store(listed, Ordering::Release);
        }
    }

    fn listed(&self, r: usize) -> bool {
        self.replicas
            .get(r)
            .is_some_and(|l| l.listed.load(Ordering::Acquire))
    }

    /// The replica a (re)opened stream goes to, as a proxy's balancer
    /// picks: the one it is on while DNS lists it (or, when DNS lists
    /// none, while it still answers: a balancer keeps an endpoint that
    /// answers and leaves one that refuses connections), else the less
    /// loaded of two listed replicas picked at random (any replica but one
    /// that just refused a connection when none is listed: DNS may lag).
    pub fn pick(&self, current: Option<usize>, answered: bool, rng: &mut Rng) -> usize {
        let none_listed = !(0..self.replicas.len()).any(|r| self.listed(r));
        if let Some(r) = current.filter(|r| self.listed(*r) || (none_listed && answered)) {
            return r;
        }
        let pool: Vec<usize> = if none_listed {
            let refused = current.filter(|_| !answered);
            let others: Vec<usize> = (0..self.replicas.len())
                .filter(|r| Some(*r) != refused)
                .collect();
            if others.is_empty() {
                (0..self.replicas.len()).collect()
            } else {
                others
            }
        } else {
            (0..self.replicas.len())
                .filter(|r| self.listed(*r))
                .collect()
        };
        let a = pool[rng.below(pool.len())];
        let b = pool[rng.below(pool.len())];
        let load = |r: usize| self.replicas[r].attached.load(Ordering::Relaxed);
        if load(b) < load(a) { b } else { a }
    }

    /// The `i`-th connection of replica `r` to `api`.
    pub fn channel(&self, r: usize, api: Api, i: usize) -> tonic::transport::Channel {
        let l = &self.replicas[r];
        let list = match api {
            Api::Destination => &l.destination,
            Api::Policy => &l.policy,
        };
        list[i % list.len()].clone()
    }

    /// A stream opened on (`true`) or left (`false`) replica `r`.
    pub fn attach(&self, r: usize, open: bool) {
        if let Some(l) = self.replicas.get(r) {
            if open {
                l.attached.fetch_add(1, Ordering::Relaxed);
            } else {
                l.attached.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Streams open on each replica now.
    pub fn attached(&self) -> Vec<usize> {
        self.replicas
            .iter()
            .map(|l| l.attached.load(Ordering::Relaxed))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory(replicas: usize) -> Directory {
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, 9));
        Directory {
            replicas: (0..replicas)
                .map(|_| Listing {
                    destination: channels(addr, 1).expect("channel"),
                    policy: channels(addr, 1).expect("channel"),
                    listed: AtomicBool::new(true),
                    attached: AtomicUsize::new(0),
                })
                .collect(),
        }
    }

    #[tokio::test]
    async fn a_stream_leaves_a_replica_that_refused_it_when_none_is_listed() {
        let directory = directory(2);
        directory.set_listed(0, false);
        directory.set_listed(1, false);
        let mut rng = Rng::new(7);
        for _ in 0..50 {
            // Replica 0 looks idle (its streams failed), yet refused.
            directory.attach(1, true);
            assert_eq!(directory.pick(Some(0), false, &mut rng), 1);
            assert_eq!(
                directory.pick(Some(1), true, &mut rng),
                1,
                "it stays where it is answered"
            );
        }
    }

    #[tokio::test]
    async fn a_listed_replica_is_kept_and_an_unlisted_one_left() {
        let directory = directory(3);
        let mut rng = Rng::new(7);
        assert_eq!(directory.pick(Some(2), false, &mut rng), 2);
        directory.set_listed(2, false);
        for _ in 0..50 {
            assert_ne!(directory.pick(Some(2), true, &mut rng), 2);
        }
    }
}
