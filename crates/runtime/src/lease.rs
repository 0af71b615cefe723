//! Leader election with a `coordination.k8s.io/v1` Lease: the replica
//! named in `holderIdentity` leads while it renews `renewTime` within
//! `leaseDurationSeconds`; another replica takes over once that has
//! expired. Updates carry the `resourceVersion` they were computed from,
//! so two replicas can never both win a round.
//!
//! [`decide`] is the pure rule; [`run`] applies it in a loop and publishes
//! whether this replica leads. Each user (the policy controller's status
//! writer, the destination's EndpointSlice writer) names its own Lease and
//! timings in a [`LeaseParams`].

use std::time::{Duration, Instant};

use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
    jiff::{SignedDuration, Timestamp},
};
use kube::{
    Api,
    api::{Patch, PatchParams, PostParams},
};
use serde_json::json;
use tokio::sync::watch;

use crate::Shutdown;

/// Where the lease lives, who we are, and the election's timings.
#[derive(Clone, Debug)]
pub struct LeaseParams {
    pub namespace: String,
    pub name: String,
    /// `holderIdentity` when we lead (the pod name).
    pub claimant: String,
    /// How long a lease lasts without renewal (`leaseDurationSeconds`).
    pub duration: Duration,
    /// How often the leader renews.
    pub renew_interval: Duration,
    /// After failed rounds, the leader keeps leading only while its last
    /// successful renewal is younger than this (then it stops writing).
    pub renew_deadline: Duration,
    /// How often a follower checks whether the lease expired.
    pub retry_interval: Duration,
    /// Bound on each API call.
    pub timeout: Duration,
    /// The field manager of our lease writes.
    pub field_manager: String,
    /// Names the user in leadership logs (e.g. `status writer`).
    pub component: &'static str,
}

/// What to do with the lease as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// No lease exists: create it, held by us.
    Create,
    /// We hold it: renew.
    Renew,
    /// It is free or expired: take it.
    TakeOver,
    /// Someone else holds a live lease.
    Follow { holder: String },
}

/// Decides from the lease's spec (`None`: no Lease object) at `now`; a
/// lease without `leaseDurationSeconds` lasts `default_duration`.
pub fn decide(
    spec: Option<&LeaseSpec>,
    claimant: &str,
    default_duration: Duration,
    now: Timestamp,
) -> Decision {
    let Some(spec) = spec else {
        return Decision::Create;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder == claimant {
        return Decision::Renew;
    }
    if holder.is_empty() {
        return Decision::TakeOver;
    }
    let secs = spec.lease_duration_seconds.map_or_else(
        || i64::try_from(default_duration.as_secs()).unwrap_or(i64::MAX),
        i64::from,
    );
    let duration = SignedDuration::from_secs(secs);
    let expired = match spec.renew_time.as_ref().or(spec.acquire_time.as_ref()) {
        Some(MicroTime(renewed)) => renewed
            .saturating_add(duration)
            .is_ok_and(|expiry| expiry < now),
        None => true,
    };
    if expired {
        Decision::TakeOver
    } else {
        Decision::Follow {
            holder: holder.to_string(),
        }
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

/// One round: returns whether we lead afterwards.
pub async fn round(api: &Api<Lease>, params: &LeaseParams) -> Result<bool, LeaseError> {
    let call = async {
        let lease = api.get_opt(&params.name).await?;
        let now = Timestamp::now();
        let duration_secs = i32::try_from(params.duration.as_secs()).unwrap_or(i32::MAX);
        let decision = decide(
            lease.as_ref().and_then(|l| l.spec.as_ref()),
            &params.claimant,
            params.duration,
            now,
        );
        let version = lease
            .as_ref()
            .and_then(|l| l.metadata.resource_version.clone());
        let transitions = lease
            .as_ref()
            .and_then(|l| l.spec.as_ref())
            .and_then(|s| s.lease_transitions)
            .unwrap_or(0);
        let result = match decision {
            Decision::Follow { .. } => return Ok(false),
            Decision::Create => {
                let lease = Lease {
                    metadata: kube::api::ObjectMeta {
                        name: Some(params.name.clone()),
                        namespace: Some(params.namespace.clone()),
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
            Ok(()) => Ok(true),
            // Another replica won this round (a 409 on create is AlreadyExists).
            Err(error) if is_conflict(&error) => Ok(false),
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

/// Runs the election until `shutdown`, publishing on `leader` whether we
/// lead. After a failed round we keep leading only while our last renewal
/// is younger than `renew_deadline`. On shutdown a held lease is released
/// so another replica takes over at once.
pub async fn run(
    client: kube::Client,
    params: LeaseParams,
    leader: watch::Sender<bool>,
    shutdown: Shutdown,
) {
    let api: Api<Lease> = Api::namespaced(client, &params.namespace);
    let mut renewed: Option<Instant> = None;
    let stop = shutdown.requested();
    tokio::pin!(stop);
    loop {
        let leads = match round(&api, &params).await {
            Ok(true) => {
                renewed = Some(Instant::now());
                true
            }
            Ok(false) => {
                renewed = None;
                false
            }
            Err(error) => {
                tracing::warn!(%error, lease = %params.name, "lease round failed");
                renewed.is_some_and(|at| at.elapsed() < params.renew_deadline)
            }
        };
        publish(&leader, leads, || log_change(&params, leads, ""));
        let wait = if leads {
            params.renew_interval
        } else {
            params.retry_interval
        };
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(wait) => {}
        }
    }
    if *leader.borrow() {
        // Followers of `leader` stop writing before the Lease is free.
        publish(&leader, false, || {
            log_change(&params, false, " (shutting down)");
        });
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
                patch_lease(&api, &params, &patch).await?;
            }
            Ok::<_, kube::Error>(())
        };
        match tokio::time::timeout(params.timeout, release).await {
            Ok(Ok(())) => tracing::info!(lease = %params.name, "lease released"),
            Ok(Err(error)) => tracing::debug!(%error, "releasing the lease failed"),
            Err(_) => tracing::debug!("releasing the lease timed out"),
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    const THIRTY: Duration = Duration::from_secs(30);

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("timestamp")
    }

    fn held(holder: Option<&str>, renewed: i64, duration: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: duration,
            renew_time: Some(MicroTime(at(renewed))),
            ..Default::default()
        }
    }

    #[test]
    fn a_term_is_said_before_it_is_published_and_a_loss_after() {
        let (leader, seen) = watch::channel(false);
        let mut said = Vec::new();
        publish(&leader, true, || said.push(("gain", *seen.borrow())));
        assert!(*seen.borrow());
        publish(&leader, true, || said.push(("again", *seen.borrow())));
        publish(&leader, false, || said.push(("loss", *seen.borrow())));
        assert!(!*seen.borrow());
        publish(&leader, false, || said.push(("again", *seen.borrow())));
        // When each line was said, followers still saw no term (gain) and
        // already saw none (loss); an unchanged state is not said at all.
        assert_eq!(said, vec![("gain", false), ("loss", false)]);
    }

    #[test]
    fn create_renew_follow_and_take_over() {
        assert_eq!(decide(None, "me", THIRTY, at(0)), Decision::Create);
        assert_eq!(
            decide(Some(&held(Some("me"), 0, Some(30))), "me", THIRTY, at(100)),
            Decision::Renew
        );
        assert_eq!(
            decide(
                Some(&held(Some("other"), 0, Some(30))),
                "me",
                THIRTY,
                at(29)
            ),
            Decision::Follow {
                holder: "other".into()
            }
        );
        assert_eq!(
            decide(
                Some(&held(Some("other"), 0, Some(30))),
                "me",
                THIRTY,
                at(31)
            ),
            Decision::TakeOver,
            "expired"
        );
        assert_eq!(
            decide(Some(&held(None, 0, Some(30))), "me", THIRTY, at(1)),
            Decision::TakeOver,
            "released"
        );
        let never_renewed = LeaseSpec {
            holder_identity: Some("other".into()),
            ..Default::default()
        };
        assert_eq!(
            decide(Some(&never_renewed), "me", THIRTY, at(0)),
            Decision::TakeOver
        );
    }

    #[test]
    fn the_lease_says_how_long_it_lasts() {
        let short = held(Some("other"), 0, Some(5));
        assert_eq!(
            decide(Some(&short), "me", THIRTY, at(6)),
            Decision::TakeOver
        );
        // Without the field, the caller's duration applies.
        let unset = held(Some("other"), 0, None);
        assert_eq!(
            decide(Some(&unset), "me", THIRTY, at(29)),
            Decision::Follow {
                holder: "other".into()
            }
        );
        assert_eq!(
            decide(Some(&unset), "me", Duration::from_secs(10), at(11)),
            Decision::TakeOver
        );
    }
}
