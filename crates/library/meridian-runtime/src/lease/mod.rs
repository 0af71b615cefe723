//! Leader election with a `coordination.k8s.io/v1` Lease: the replica
//! named in `holderIdentity` leads while it renews `renewTime` within
//! `leaseDurationSeconds`; another replica takes over once that has
//! expired on its own clock. Updates carry the `resourceVersion` they were
//! computed from, so two replicas can never both win a round.
//!
//! Terms cannot overlap: a leader's term ends `renew_deadline` after the
//! instant it sent its last successful renewal (the time its `renewTime`
//! says), even while a round is still in flight or while it sleeps between
//! rounds; a follower takes over only once the lease record it saw has not
//! changed for `leaseDurationSeconds` on its own monotonic clock
//! ([`rule`]), which starts no earlier than that renewal was sent. As
//! `renew_deadline < leaseDurationSeconds` ([`LeaseParams::validate`]),
//! the leader stops before anyone may start.
//!
//! - [`rule`]: the pure rule ([`decide`]) and what a follower remembers of
//!   the lease ([`Observed`]);
//! - this file: [`round`] applies it once against the API server, [`run`]
//!   in a loop, publishing whether this replica leads. Each user (the
//!   policy controller's status writer, the destination's EndpointSlice
//!   writer) names its own Lease and timings in a [`LeaseParams`].

pub mod rule;
#[cfg(test)]
mod tests;

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::{MicroTime, OwnerReference},
    jiff::Timestamp,
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::{sync::watch, time::Instant};

pub use self::rule::{Decision, Observed, Record, decide};
use crate::Shutdown;

/// Where the lease lives, who we are, and the election's timings.
#[derive(Clone, Debug)]
pub struct LeaseParams {
    pub namespace: String,
    pub name: String,
    /// `holderIdentity` when we lead (the pod name).
    pub claimant: String,
    /// How long a lease lasts without renewal (`leaseDurationSeconds`,
    /// whole seconds).
    pub duration: Duration,
    /// How long the leader waits between rounds.
    pub renew_interval: Duration,
    /// The leader's term ends this long after it sent its last successful
    /// renewal (then it stops writing until a renewal succeeds again).
    /// Shorter than `duration`.
    pub renew_deadline: Duration,
    /// How often a follower checks whether the lease expired.
    pub retry_interval: Duration,
    /// Bound on each API call.
    pub timeout: Duration,
    /// The field manager of our lease writes.
    pub field_manager: String,
    /// Names the user in leadership logs (e.g. `status writer`).
    pub component: &'static str,
    /// The owner of the Lease when we create it (none: no owner).
    pub owner: Option<OwnerReference>,
    /// The labels of the Lease when we create it.
    pub labels: BTreeMap<String, String>,
}

/// Timings that would let two terms overlap, or a term never begin.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidLeaseParams {
    #[error("Lease {name}: the duration {duration:?} is not a positive whole number of seconds")]
    Duration { name: String, duration: Duration },
    #[error(
        "Lease {name}: the renew deadline {deadline:?} must be shorter than the lease duration \
         {duration:?} (else a follower may take the lease while its leader still writes)"
    )]
    DeadlineNotBeforeExpiry {
        name: String,
        deadline: Duration,
        duration: Duration,
    },
    #[error(
        "Lease {name}: the renew interval {interval:?} must be shorter than the renew deadline \
         {deadline:?} (else every term ends before its renewal)"
    )]
    IntervalNotBeforeDeadline {
        name: String,
        interval: Duration,
        deadline: Duration,
    },
}

impl LeaseParams {
    /// Checks the timings: `renew_interval < renew_deadline < duration`,
    /// `duration` in whole seconds (what `leaseDurationSeconds` can say).
    pub fn validate(&self) -> Result<(), InvalidLeaseParams> {
        let name = || self.name.clone();
        if self.duration.is_zero() || self.duration.subsec_nanos() != 0 {
            return Err(InvalidLeaseParams::Duration {
                name: name(),
                duration: self.duration,
            });
        }
        if self.renew_deadline >= self.duration {
            return Err(InvalidLeaseParams::DeadlineNotBeforeExpiry {
                name: name(),
                deadline: self.renew_deadline,
                duration: self.duration,
            });
        }
        if self.renew_interval >= self.renew_deadline {
            return Err(InvalidLeaseParams::IntervalNotBeforeDeadline {
                name: name(),
                interval: self.renew_interval,
                deadline: self.renew_deadline,
            });
        }
        Ok(())
    }

    fn duration_secs(&self) -> i32 {
        i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX)
    }
}

/// Errors of one election round.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    #[error("lease API call failed: {0}")]
    Api(#[from] kube::Error),
    #[error("lease API call timed out")]
    Timeout,
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// One round. `observed` is what we saw of the lease before (updated
/// here). Returns, when we lead afterwards, the instant the round started
/// (before its GET, the time our `renewTime` says): our term lasts
/// `renew_deadline` from there.
pub async fn round(
    api: &Api<Lease>,
    params: &LeaseParams,
    observed: &mut Option<Observed>,
) -> Result<Option<Instant>, LeaseError> {
    let sent = Instant::now();
    let now = Timestamp::now();
    let call = async {
        let lease = api.get_opt(&params.name).await?;
        let spec = lease.as_ref().and_then(|l| l.spec.as_ref());
        let seen_at = Instant::now();
        *observed = Observed::update(observed.take(), spec, seen_at);
        let decision = decide(
            spec,
            &params.claimant,
            params.duration,
            observed.as_ref(),
            seen_at,
        );
        let version = lease
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        let transitions = spec.and_then(|s| s.lease_transitions).unwrap_or(0);
        let duration_secs = params.duration_secs();
        let result = match decision {
            Decision::Follow { .. } => return Ok(None),
            Decision::Create => {
                let lease = Lease {
                    metadata: kube::api::ObjectMeta {
                        name: Some(params.name.clone()),
                        namespace: Some(params.namespace.clone()),
                        owner_references: params.owner.clone().map(|o| vec![o]),
                        labels: (!params.labels.is_empty()).then(|| params.labels.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(params.claimant.clone()),
                        lease_duration_seconds: Some(duration_secs),
                        acquire_time: Some(MicroTime(now)),
                        renew_time: Some(MicroTime(now)),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                let pp = PostParams {
                    field_manager: Some(params.field_manager.clone()),
                    ..Default::default()
                };
                api.create(&pp, &lease).await.map(drop)
            }
            Decision::Renew => {
                let patch = json!({
                    "metadata": {"resourceVersion": version},
                    "spec": {"renewTime": MicroTime(now), "leaseDurationSeconds": duration_secs},
                });
                patch_lease(api, params, &patch).await
            }
            Decision::TakeOver => {
                let patch = json!({
                    "metadata": {"resourceVersion": version},
                    "spec": {
                        "holderIdentity": params.claimant,
                        "leaseDurationSeconds": duration_secs,
                        "acquireTime": MicroTime(now),
                        "renewTime": MicroTime(now),
                        "leaseTransitions": transitions.saturating_add(1),
                    },
                });
                patch_lease(api, params, &patch).await
            }
        };
        match result {
            Ok(()) => Ok(Some(sent)),
            // Another replica won this round (a 409 on create is AlreadyExists).
            Err(error) if is_conflict(&error) => Ok(None),
            Err(error) => Err(LeaseError::Api(error)),
        }
    };
    tokio::time::timeout(params.timeout, call)
        .await
        .map_err(|_| LeaseError::Timeout)?
}

async fn patch_lease(
    api: &Api<Lease>,
    params: &LeaseParams,
    patch: &serde_json::Value,
) -> Result<(), kube::Error> {
    let pp = PatchParams {
        field_manager: Some(params.field_manager.clone()),
        ..Default::default()
    };
    api.patch(&params.name, &pp, &Patch::Merge(patch))
        .await
        .map(drop)
}

/// Sleeps until `end`; never returns for `None`.
async fn until(end: Option<Instant>) {
    match end {
        Some(end) => tokio::time::sleep_until(end).await,
        None => std::future::pending().await,
    }
}

/// Runs the election until `shutdown`, publishing on `leader` whether we
/// lead. A term lasts `renew_deadline` from the sending of its last
/// successful renewal: when that passes (a round failing, or hanging, or
/// the next not started yet) `false` is published at once. On shutdown a
/// held lease is released so another replica takes over at once. Invalid
/// timings ([`LeaseParams::validate`]) are logged and never lead.
pub async fn run(
    client: kube::Client,
    params: LeaseParams,
    leader: watch::Sender<bool>,
    shutdown: Shutdown,
) {
    if let Err(error) = params.validate() {
        tracing::error!(%error, "not taking part in the election");
        return;
    }
    let api: Api<Lease> = Api::namespaced(client, &params.namespace);
    let mut observed: Option<Observed> = None;
    // The end of our term (`None`: we do not lead).
    let mut term: Option<Instant> = None;
    let stop = shutdown.requested();
    tokio::pin!(stop);
    loop {
        let result = {
            let call = round(&api, &params, &mut observed);
            tokio::pin!(call);
            loop {
                tokio::select! {
                    result = &mut call => break result,
                    () = until(term) => end_term(&leader, &params, &mut term),
                }
            }
        };
        match result {
            Ok(Some(sent)) => term = Some(sent + params.renew_deadline),
            Ok(None) => term = None,
            Err(error) => tracing::warn!(%error, lease = %params.name, "lease round failed"),
        }
        // A round that succeeded after its own deadline (slower than
        // `renew_deadline`) begins no term.
        term = term.filter(|end| Instant::now() < *end);
        let leads = term.is_some();
        publish(&leader, leads, || log_change(&params, leads, ""));
        let wait = if leads {
            params.renew_interval
        } else {
            params.retry_interval
        };
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(wait) => {}
            // Not renewed in time: stop at once, and try again.
            () = until(term) => end_term(&leader, &params, &mut term),
        }
    }
    if *leader.borrow() {
        // Followers of `leader` stop writing before the Lease is free.
        publish(&leader, false, || {
            log_change(&params, false, " (shutting down)");
        });
        release(&api, &params).await;
    }
}

/// Our term is over (its renew deadline passed): followers of `leader`
/// stop at once.
fn end_term(leader: &watch::Sender<bool>, params: &LeaseParams, term: &mut Option<Instant>) {
    *term = None;
    publish(leader, false, || {
        log_change(params, false, " (renew deadline passed)");
    });
}

/// Gives the lease up if we still hold it, so another replica takes over
/// at once.
async fn release(api: &Api<Lease>, params: &LeaseParams) {
    let release = async {
        let lease = api.get_opt(&params.name).await?;
        let holds = lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.holder_identity.as_deref())
            == Some(params.claimant.as_str());
        if holds {
            let version = lease.and_then(|l| l.metadata.resource_version);
            let patch = json!({
                "metadata": {"resourceVersion": version},
                "spec": {"holderIdentity": null},
            });
            patch_lease(api, params, &patch).await?;
        }
        Ok::<_, kube::Error>(())
    };
    match tokio::time::timeout(params.timeout, release).await {
        Ok(Ok(())) => tracing::info!(lease = %params.name, "lease released"),
        Ok(Err(error)) => tracing::debug!(%error, "releasing the lease failed"),
        Err(_) => tracing::debug!("releasing the lease timed out"),
    }
}

/// Logs that we now lead or not (`why`: what follows the message).
fn log_change(params: &LeaseParams, leads: bool, why: &str) {
    tracing::info!(
        leader = leads,
        claimant = %params.claimant,
        lease = %params.name,
        "{} leadership changed{why}",
        params.component
    );
}

/// Publishes on `leader` that we now lead or not, and says so (`say`, the
/// log line) in the order that keeps the log truthful for anyone reading
/// it against the writes it records: a term is said before its followers
/// learn of it (they may write at once, and their writes must not appear
/// before the term began), and a lost term is published before it is said
/// (followers stop starting writes first). Does nothing when `leads` is no
/// change.
fn publish(leader: &watch::Sender<bool>, leads: bool, say: impl FnOnce()) {
    if *leader.borrow() == leads {
        return;
    }
    if leads {
        say();
        leader.send_replace(true);
    } else {
        leader.send_replace(false);
        say();
    }
}
