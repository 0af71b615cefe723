//! The status writer's Lease: its name and timings. The election itself
//! (`decide`, `run`) is [`meridian_runtime::lease`], shared with the
//! destination's EndpointSlice writer.

use std::time::Duration;

pub use meridian_runtime::lease::{Decision, LeaseError, LeaseParams, decide, round, run};

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

/// The status writer's lease in `namespace`, claimed as `claimant`. After
/// failed rounds the leader keeps leading while its last renewal is
/// younger than the lease duration less one renewal interval.
pub fn params(namespace: &str, claimant: &str, timeout: Duration) -> LeaseParams {
    LeaseParams {
        namespace: namespace.to_string(),
        name: LEASE_NAME.to_string(),
        claimant: claimant.to_string(),
        duration: LEASE_DURATION,
        renew_interval: RENEW_INTERVAL,
        renew_deadline: LEASE_DURATION.saturating_sub(RENEW_INTERVAL),
        retry_interval: RETRY_INTERVAL,
        timeout,
        field_manager: FIELD_MANAGER.to_string(),
        component: "status writer",
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::{
        api::coordination::v1::LeaseSpec, apimachinery::pkg::apis::meta::v1::MicroTime,
        jiff::Timestamp,
    };

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
    fn the_status_writers_lease() {
        let p = params("linkerd", "pod-0", Duration::from_secs(5));
        assert_eq!(p.name, "policy-controller-write");
        assert_eq!(p.namespace, "linkerd");
        assert_eq!(p.claimant, "pod-0");
        assert_eq!(p.duration, Duration::from_secs(30));
        assert_eq!(p.renew_interval, Duration::from_secs(10));
        assert_eq!(p.renew_deadline, Duration::from_secs(20));
        assert_eq!(p.retry_interval, Duration::from_secs(5));
        assert_eq!(p.field_manager, "linkerd.io/policy-controller");
    }

    #[test]
    fn create_renew_follow_and_take_over() {
        let d = LEASE_DURATION;
        assert_eq!(decide(None, "me", d, at(0)), Decision::Create);
        assert_eq!(
            decide(Some(&held(Some("me"), 0)), "me", d, at(100)),
            Decision::Renew
        );
        assert_eq!(
            decide(Some(&held(Some("other"), 0)), "me", d, at(29)),
            Decision::Follow {
                holder: "other".into()
            }
        );
        assert_eq!(
            decide(Some(&held(Some("other"), 0)), "me", d, at(31)),
            Decision::TakeOver,
            "expired"
        );
        assert_eq!(
            decide(Some(&held(None, 0)), "me", d, at(1)),
            Decision::TakeOver,
            "released"
        );
    }
}
