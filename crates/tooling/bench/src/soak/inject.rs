//! How each fault ([`Fault`]) is injected into the running soak, let heal,
//! and audited. A replica leaves the clients' [`super::Directory`] while
//! any of its processes is down (its pod is not ready) and is listed again
//! once both are ready; streams it served end and move to another replica.
//! Operations go on while a replica is down ("under load").

use std::time::{Duration, Instant};

use super::{
    Soak,
    client::Target,
    faults::{self, Fault},
    leases::{SLICES_LEASE, STATUS_LEASE},
};

/// Operations while a component is down.
const OPS_WHILE_DOWN: usize = 10;
/// How long a killed Lease holder's Lease may take to change hands (its
/// duration, 30 s, plus the followers' retry and some slack).
const TAKEOVER_TIMEOUT: Duration = Duration::from_secs(60);

impl Soak {
    /// Injects one fault, lets it heal, then audits.
    pub(super) async fn inject(&mut self, fault: Fault, n: usize) -> anyhow::Result<()> {
        println!("  fault {n}: {fault} (after {} ops)", self.workload.total());
        self.faults.push(fault);
        let label = format!("fault {n}: {fault}");
        // Streams end when a server goes away: expected until the audit
        // after the fault found every stream correct again.
        crate::ends::phase(&label, true);
        let at = Instant::now();
        // The replica a one-replica fault hits, in turn.
        let turn = self.faults.iter().filter(|f| **f == fault).count() - 1;
        let r = turn % self.replicas.len();
        match fault {
            Fault::ApiserverRestart => {
                self.cluster.stop_apiserver();
                tokio::time::sleep(Duration::from_secs(3)).await;
                self.cluster.start_apiserver().await?;
                self.audit(&label, at, Some(Instant::now())).await
            }
            Fault::CompactionRelist => self.compaction_relist(&label, at).await,
            Fault::DestinationKill => {
                println!("    on replica {r}");
                self.directory.set_listed(r, false);
                self.replicas[r].destination.kill();
                // Changes while it is down must be there when it is back.
                self.ops(OPS_WHILE_DOWN).await;
                self.replicas[r].destination.restart().await?;
                self.directory.set_listed(r, true);
                self.audit(&label, at, Some(Instant::now())).await
            }
            Fault::PolicyControllerDown => {
                println!("    on replica {r}");
                self.directory.set_listed(r, false);
                self.replicas[r]
                    .policy
                    .stop(super::replicas::STOP_GRACE)
                    .await;
                self.ops(OPS_WHILE_DOWN).await;
                // Its destination keeps serving Get and GetProfile
                // meanwhile; its WatchPort streams move to another replica,
                // or wait when there is none (and the status writer, too).
                let alone = self.replicas.len() == 1;
                self.audit_skipping(
                    &format!("{label} (while down)"),
                    at,
                    None,
                    &|t| alone && matches!(t, Target::Inbound { .. }),
                    !alone,
                )
                .await?;
                self.replicas[r].policy.restart().await?;
                self.directory.set_listed(r, true);
                self.audit(&format!("{label} (back)"), at, Some(Instant::now()))
                    .await
            }
            Fault::ReplicaKill => self.replica_kill(&label, at).await,
            Fault::RollingRestart => self.rolling_restart(&label, at).await,
            Fault::LeaseHoldersKill => self.lease_holders_kill(&label, at).await,
        }
    }

    /// `n` operations.
    async fn ops(&mut self, n: usize) {
        for _ in 0..n {
            self.step().await;
        }
    }

    async fn compaction_relist(&mut self, label: &str, at: Instant) -> anyhow::Result<()> {
        let restarts = self.watch_restarts().await;
        let revision = faults::compact_etcd(&self.cluster.etcd_url()).await?;
        // One more write, so every watcher's resourceVersion is older than
        // the store's oldest.
        self.bump().await?;
        self.cluster.stop_apiserver();
        self.cluster.start_apiserver().await?;
        let back = Instant::now();
        self.audit(label, at, Some(back)).await?;
        let after = self.watch_restarts().await;
        println!(
            "    etcd compacted at revision {revision}; the destinations' watch restarts: +{}",
            after - restarts
        );
        Ok(())
    }

    async fn watch_restarts(&self) -> f64 {
        let mut sum = 0.0;
        for replica in &self.replicas {
            sum += replica
                .destination
                .metric_sum("index_watch_restarts_total")
                .await;
        }
        sum
    }

    /// The replica serving the most streams is SIGKILLed while operations
    /// go on; its streams move to the others (audited while it is down),
    /// then it comes back.
    async fn replica_kill(&mut self, label: &str, at: Instant) -> anyhow::Result<()> {
        let attached = self.directory.attached();
        let r = (0..self.replicas.len())
            .max_by_key(|r| attached.get(*r).copied().unwrap_or(0))
            .unwrap_or(0);
        println!(
            "    SIGKILL replica {r} ({}), serving {} of {} streams",
            self.replicas[r].name,
            attached.get(r).copied().unwrap_or(0),
            attached.iter().sum::<usize>()
        );
        self.directory.set_listed(r, false);
        self.replicas[r].kill();
        self.ops(OPS_WHILE_DOWN).await;
        self.audit(&format!("{label} (while down)"), at, None)
            .await?;
        self.replicas[r].restart().await?;
        self.directory.set_listed(r, true);
        self.audit(&format!("{label} (back)"), at, Some(Instant::now()))
            .await
    }

    /// Every replica in turn is stopped gracefully and started again (its
    /// pod replaced), operations going on before and after each.
    async fn rolling_restart(&mut self, label: &str, at: Instant) -> anyhow::Result<()> {
        for r in 0..self.replicas.len() {
            self.directory.set_listed(r, false);
            let stopping = Instant::now();
            self.replicas[r].stop().await;
            let stopped = stopping.elapsed();
            self.ops(OPS_WHILE_DOWN / 2).await;
            self.replicas[r].restart().await?;
            self.directory.set_listed(r, true);
            println!(
                "    replica {r} stopped in {:.1}s, back after {:.1}s; streams per replica now {:?}",
                stopped.as_secs_f64(),
                stopping.elapsed().as_secs_f64(),
                self.directory.attached()
            );
            self.ops(OPS_WHILE_DOWN / 2).await;
        }
        self.audit(label, at, Some(Instant::now())).await
    }

    /// The processes holding the status writer's and the EndpointSlice
    /// writer's Leases are SIGKILLed; the writers' inputs change while
    /// another replica takes each Lease over, which must then write them.
    async fn lease_holders_kill(&mut self, label: &str, at: Instant) -> anyhow::Result<()> {
        let mut killed = Vec::new();
        for lease in [STATUS_LEASE, SLICES_LEASE] {
            let Some(holder) = self.leases.wait_held(lease, TAKEOVER_TIMEOUT).await else {
                anyhow::bail!("nobody holds the Lease {lease}");
            };
            let Some(r) = self.replicas.iter().position(|x| x.name == holder) else {
                anyhow::bail!("the Lease {lease} is held by {holder:?}, no replica of ours");
            };
            println!("    {lease} held by {holder}: SIGKILL its process");
            self.directory.set_listed(r, false);
            if lease == STATUS_LEASE {
                self.replicas[r].policy.kill();
            } else {
                self.replicas[r].destination.kill();
            }
            killed.push((lease, holder, r, Instant::now()));
        }
        // What the writers must write meanwhile.
        for _ in 0..OPS_WHILE_DOWN {
            self.writers.step().await;
            self.workload.step().await;
        }
        for (lease, old, _, killed_at) in &killed {
            match self
                .leases
                .wait_new_holder(lease, old, TAKEOVER_TIMEOUT)
                .await
            {
                Some(new) => {
                    let took = killed_at.elapsed();
                    println!(
                        "    {lease}: {old} → {new} {:.1}s after the kill",
                        took.as_secs_f64()
                    );
                    self.takeovers.push((lease, took));
                }
                None => println!(
                    "    {lease}: NOT TAKEN OVER within {}s of the kill",
                    TAKEOVER_TIMEOUT.as_secs()
                ),
            }
        }
        // Audited with the holders still down: the others write.
        self.audit(&format!("{label} (while down)"), at, None)
            .await?;
        for (_, _, r, _) in &killed {
            self.replicas[*r].restart().await?;
            self.directory.set_listed(*r, true);
        }
        self.audit(&format!("{label} (back)"), at, Some(Instant::now()))
            .await
    }
}
