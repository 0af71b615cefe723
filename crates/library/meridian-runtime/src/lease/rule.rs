//! The election's pure rule: what to do with a Lease as it was just read.
//!
//! A follower never compares the holder's `renewTime` with its own wall
//! clock (the two clocks may disagree by any amount). As client-go's
//! leaderelection does, it remembers the lease record it last saw
//! ([`Record`]) and the local monotonic instant it first saw that record
//! ([`Observed`]); the lease has expired once `leaseDurationSeconds` has
//! passed on the follower's own clock since then without the record
//! changing. A record with no holder (released on shutdown) is free at
//! once.

use std::time::Duration;

use k8s_openapi::{
    api::coordination::v1::LeaseSpec, apimachinery::pkg::apis::meta::v1::MicroTime, jiff::Timestamp,
};
use tokio::time::Instant;

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

/// The fields of a Lease that every renewal or handover changes: a
/// follower's count starts again whenever any of them does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    holder: Option<String>,
    acquire_time: Option<Timestamp>,
    renew_time: Option<Timestamp>,
    duration_secs: Option<i32>,
    transitions: Option<i32>,
}

impl Record {
    /// The record `spec` says.
    pub fn of(spec: &LeaseSpec) -> Self {
        let time = |t: &Option<MicroTime>| t.as_ref().map(|MicroTime(at)| *at);
        Self {
            holder: spec.holder_identity.clone(),
            acquire_time: time(&spec.acquire_time),
            renew_time: time(&spec.renew_time),
            duration_secs: spec.lease_duration_seconds,
            transitions: spec.lease_transitions,
        }
    }
}

/// The lease record a replica last saw, and when (its own monotonic
/// clock) it first saw that record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    pub record: Record,
    pub since: Instant,
}

impl Observed {
    /// What is known after reading `spec` at `now` (`None`: no Lease
    /// object): the record seen before keeps its first sighting; another
    /// one is counted from `now`.
    pub fn update(previous: Option<Self>, spec: Option<&LeaseSpec>, now: Instant) -> Option<Self> {
        let record = Record::of(spec?);
        match previous {
            Some(seen) if seen.record == record => Some(seen),
            _ => Some(Self { record, since: now }),
        }
    }
}

/// Decides from the lease's spec (`None`: no Lease object), what we
/// observed of it (see [`Observed::update`]; it must be of this spec's
/// record, else the lease counts as just seen) and the local instant
/// `now`. A lease without `leaseDurationSeconds` lasts `default_duration`.
pub fn decide(
    spec: Option<&LeaseSpec>,
    claimant: &str,
    default_duration: Duration,
    observed: Option<&Observed>,
    now: Instant,
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
    let duration = spec
        .lease_duration_seconds
        .map_or(default_duration, |secs| {
            Duration::from_secs(u64::try_from(secs).unwrap_or(0))
        });
    let expired = observed
        .filter(|seen| seen.record == Record::of(spec))
        .and_then(|seen| seen.since.checked_add(duration))
        .is_some_and(|expiry| expiry <= now);
    if expired {
        Decision::TakeOver
    } else {
        Decision::Follow {
            holder: holder.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const THIRTY: Duration = Duration::from_secs(30);

    fn wall(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("timestamp")
    }

    fn held(holder: Option<&str>, renewed: i64, duration: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: duration,
            renew_time: Some(MicroTime(wall(renewed))),
            ..Default::default()
        }
    }

    /// `spec` first seen at `first`, then read again at `now`: the decision.
    fn seen_at(spec: &LeaseSpec, first: Instant, now: Instant) -> Decision {
        let observed = Observed::update(None, Some(spec), first);
        let observed = Observed::update(observed, Some(spec), now);
        decide(Some(spec), "me", THIRTY, observed.as_ref(), now)
    }

    fn follow() -> Decision {
        Decision::Follow {
            holder: "other".into(),
        }
    }

    #[test]
    fn create_renew_and_a_released_lease() {
        let t0 = Instant::now();
        assert_eq!(decide(None, "me", THIRTY, None, t0), Decision::Create);
        let mine = held(Some("me"), 0, Some(30));
        assert_eq!(decide(Some(&mine), "me", THIRTY, None, t0), Decision::Renew);
        // Released on shutdown: free at once, however recently renewed.
        let released = held(None, 0, Some(30));
        assert_eq!(
            decide(Some(&released), "me", THIRTY, None, t0),
            Decision::TakeOver
        );
        let emptied = held(Some(""), 0, Some(30));
        assert_eq!(
            decide(Some(&emptied), "me", THIRTY, None, t0),
            Decision::TakeOver
        );
    }

    #[test]
    fn a_first_observation_waits_a_full_duration() {
        let t0 = Instant::now();
        let lease = held(Some("other"), 0, Some(30));
        // However old its renewTime says it is.
        assert_eq!(seen_at(&lease, t0, t0), follow());
        assert_eq!(seen_at(&lease, t0, t0 + Duration::from_secs(29)), follow());
        assert_eq!(
            seen_at(&lease, t0, t0 + THIRTY),
            Decision::TakeOver,
            "unchanged for its whole duration on our clock"
        );
        // Without an observation (or with one of another record), the
        // lease counts as just seen.
        assert_eq!(
            decide(Some(&lease), "me", THIRTY, None, t0 + THIRTY),
            follow()
        );
        let other = Observed::update(None, Some(&held(Some("other"), 5, Some(30))), t0);
        assert_eq!(
            decide(Some(&lease), "me", THIRTY, other.as_ref(), t0 + THIRTY),
            follow()
        );
    }

    #[test]
    fn skewed_renew_times_change_nothing() {
        let t0 = Instant::now();
        let later = t0 + Duration::from_secs(31);
        // renewTime a day in the future or a day in the past of our wall
        // clock: the decision is the same as for a fresh one.
        for renewed in [-86_400, 0, 86_400] {
            let lease = held(Some("other"), renewed, Some(30));
            assert_eq!(seen_at(&lease, t0, t0 + Duration::from_secs(29)), follow());
            assert_eq!(seen_at(&lease, t0, later), Decision::TakeOver);
        }
        // A lease renewed "long ago" but never seen before is not taken.
        let stale = held(Some("other"), -86_400, Some(30));
        let observed = Observed::update(None, Some(&stale), later);
        assert_eq!(
            decide(Some(&stale), "me", THIRTY, observed.as_ref(), later),
            follow()
        );
    }

    #[test]
    fn a_changed_record_restarts_the_count() {
        let t0 = Instant::now();
        let at = |secs| t0 + Duration::from_secs(secs);
        let first = held(Some("other"), 0, Some(30));
        let renewed = held(Some("other"), 10, Some(30));
        let observed = Observed::update(None, Some(&first), at(0));
        // The holder renewed; we see it 20 s after the first sighting.
        let observed = Observed::update(observed, Some(&renewed), at(20));
        assert_eq!(observed.as_ref().map(|o| o.since), Some(at(20)));
        assert_eq!(
            decide(Some(&renewed), "me", THIRTY, observed.as_ref(), at(45)),
            follow(),
            "30 s since the first record, 25 s since the renewal"
        );
        let observed = Observed::update(observed, Some(&renewed), at(50));
        assert_eq!(
            decide(Some(&renewed), "me", THIRTY, observed.as_ref(), at(50)),
            Decision::TakeOver
        );
        // Any field of the record counts: a new holder, a new duration.
        for changed in [
            held(Some("third"), 10, Some(30)),
            held(Some("other"), 10, Some(31)),
        ] {
            let again = Observed::update(observed.clone(), Some(&changed), at(50));
            assert_eq!(again.map(|o| o.since), Some(at(50)));
        }
        // No Lease object: nothing observed.
        assert_eq!(Observed::update(observed, None, at(50)), None);
    }

    #[test]
    fn the_lease_says_how_long_it_lasts() {
        let t0 = Instant::now();
        let short = held(Some("other"), 0, Some(5));
        assert_eq!(
            seen_at(&short, t0, t0 + Duration::from_secs(5)),
            Decision::TakeOver
        );
        // Without the field, the caller's duration applies.
        let unset = held(Some("other"), 0, None);
        assert_eq!(seen_at(&unset, t0, t0 + Duration::from_secs(29)), follow());
        let observed = Observed::update(None, Some(&unset), t0);
        let later = t0 + Duration::from_secs(10);
        assert_eq!(
            decide(
                Some(&unset),
                "me",
                Duration::from_secs(10),
                observed.as_ref(),
                later
            ),
            Decision::TakeOver
        );
        // Never renewed: counted like any other record.
        let never_renewed = LeaseSpec {
            holder_identity: Some("other".into()),
            ..Default::default()
        };
        assert_eq!(seen_at(&never_renewed, t0, t0), follow());
        assert_eq!(seen_at(&never_renewed, t0, t0 + THIRTY), Decision::TakeOver);
    }
}
