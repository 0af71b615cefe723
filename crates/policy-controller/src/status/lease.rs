//! Leader election with a `coordination.k8s.io/v1` Lease: the replica
//! named in `holderIdentity` leads while it renews `renewTime` within
//! `leaseDurationSeconds`; another replica takes over once that has
//! expired. Updates carry the `resourceVersion` they were computed from,
//! so two replicas can never both win a round.
//!
//! [`decide`] is the pure rule; [`run`] applies it in a loop and publishes
//! whether this replica leads.

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
use meridian_runtime::Shutdown;
use serde_json::json;
use tokio::sync::watch;

/// The Lease's name (as in the original).
pub const LEASE_NAME: &str = "policy-controller-write";
/// How long a lease lasts without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(30);
/// How often the leader renews.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// How often a follower checks whether the lease expired.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);
/// The field manager of our writes.
pub const FIELD_MANAGER: &str = "linkerd.io/policy-controller";

/// Where the lease lives and who we are.
#[derive(Clone, Debug)]
pub struct LeaseParams {
    pub namespace: String,
    pub name: String,
    /// `holderIdentity` when we lead (the pod name).
    pub claimant: String,
    pub duration: Duration,
    /// Bound on each API call.
    pub timeout: Duration,
}

impl LeaseParams {
    /// The standard lease in `namespace`, claimed as `claimant`.
    pub fn new(namespace: &str, claimant: &str, timeout: Duration) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: LEASE_NAME.to_string(),
            claimant: claimant.to_string(),
            duration: LEASE_DURATION,
            timeout,
        }
    }
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

/// Decides from the lease's spec (`None`: no Lease object) at `now`.
pub fn decide(spec: Option<&LeaseSpec>, claimant: &str, now: Timestamp) -> Decision {
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
    let duration = SignedDuration::from_secs(i64::from(
        spec.lease_duration_seconds
            .unwrap_or(LEASE_DURATION.as_secs() as i32),
    ));
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
                api.create(&PostParams::default(), &lease).await.map(drop)
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
            // Another replica won this round.
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
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    };
    api.patch(&params.name, &pp, &Patch::Merge(patch))
        .await
        .map(drop)
}

/// Runs the election until `shutdown`, publishing on `leader` whether we
/// lead. After a failed round we keep leading only while our last renewal
/// is surely still valid. On shutdown a held lease is released so another
/// replica takes over at once.
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
                let margin = params.duration.saturating_sub(RENEW_INTERVAL);
                renewed.is_some_and(|at| at.elapsed() < margin)
            }
        };
        let changed = leader.send_if_modified(|l| std::mem::replace(l, leads) != leads);
        if changed {
            tracing::info!(leader = leads, claimant = %params.claimant, "status writer leadership changed");
        }
        let wait = if leads {
            RENEW_INTERVAL
        } else {
            RETRY_INTERVAL
        };
        tokio::select! {
            () = &mut stop => break,
            () = tokio::time::sleep(wait) => {}
        }
    }
    if *leader.borrow() {
        leader.send_replace(false);
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
            Ok(Ok(())) => tracing::debug!("lease released"),
            Ok(Err(error)) => tracing::debug!(%error, "releasing the lease failed"),
            Err(_) => tracing::debug!("releasing the lease timed out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("timestamp")
    }

    fn held(holder: Option<&str>, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(30),
            renew_time: Some(MicroTime(at(renewed))),
            ..Default::default()
        }
    }

    #[test]
    fn create_renew_follow_and_take_over() {
        assert_eq!(decide(None, "me", at(0)), Decision::Create);
        assert_eq!(
            decide(Some(&held(Some("me"), 0)), "me", at(100)),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&held(Some("other"), 0)), "me", at(29)),
            Decision::Follow {
                holder: "other".into()
            }
        );
        assert_eq!(
            decide(Some(&held(Some("other"), 0)), "me", at(31)),
            Decision::TakeOver,
            "expired"
        );
        assert_eq!(
            decide(Some(&held(None, 0)), "me", at(1)),
            Decision::TakeOver,
            "released"
        );
        let never_renewed = LeaseSpec {
            holder_identity: Some("other".into()),
            ..Default::default()
        };
        assert_eq!(
            decide(Some(&never_renewed), "me", at(0)),
            Decision::TakeOver
        );
    }
}
