//! The status writer's Lease: its name, timings, labels and owner. The
//! election itself (`decide`, `run`) is [`meridian_runtime::lease`],
//! shared with the destination's EndpointSlice writer.
//!
//! As the original does, the Lease is created owned by the policy
//! controller's Deployment (`--policy-deployment-name`, `linkerd-destination`
//! by default), read at start with the `apps/deployments` `get` right the
//! chart grants; without it (no such Deployment, or no right to read it)
//! the Lease is created without an owner, and the election goes on. A
//! Lease that already exists is left as it is.

use std::{collections::BTreeMap, time::Duration};

use k8s_openapi::{api::apps::v1::Deployment, apimachinery::pkg::apis::meta::v1::OwnerReference};
use kube::{Api, Resource};

pub use meridian_runtime::lease::{
    Decision, InvalidLeaseParams, LeaseError, LeaseParams, Observed, decide, round, run,
};

/// The Lease's name (as in the original).
pub const LEASE_NAME: &str = "policy-controller-write";
/// How long a lease lasts without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(30);
/// How often the leader renews.
pub const RENEW_INTERVAL: Duration = Duration::from_secs(10);
/// The leader's term ends this long after the sending of its last
/// successful renewal: the lease duration less one renewal interval.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(20);
/// How often a follower checks whether the lease expired.
pub const RETRY_INTERVAL: Duration = Duration::from_secs(5);
/// The field manager of our writes.
pub const FIELD_MANAGER: &str = "linkerd.io/policy-controller";

/// The status writer's lease in `namespace`, claimed as `claimant`, its
/// API calls bounded by `timeout`; refused if its timings could let two
/// terms overlap.
pub fn params(
    namespace: &str,
    claimant: &str,
    timeout: Duration,
) -> Result<LeaseParams, InvalidLeaseParams> {
    let labels = BTreeMap::from([
        (
            k8s_api::labels::CONTROL_PLANE_COMPONENT.to_string(),
            "destination".to_string(),
        ),
        (
            k8s_api::labels::CONTROL_PLANE_NS.to_string(),
            namespace.to_string(),
        ),
    ]);
    let params = LeaseParams {
        namespace: namespace.to_string(),
        name: LEASE_NAME.to_string(),
        claimant: claimant.to_string(),
        duration: LEASE_DURATION,
        renew_interval: RENEW_INTERVAL,
        renew_deadline: RENEW_DEADLINE,
        retry_interval: RETRY_INTERVAL,
        timeout,
        field_manager: FIELD_MANAGER.to_string(),
        component: "status writer",
        owner: None,
        labels,
    };
    params.validate()?;
    Ok(params)
}

/// The owner reference of the Lease: the Deployment `name` of
/// `namespace`, as its controller. `None` (logged) if it cannot be read
/// within `timeout`.
pub async fn deployment_owner(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Option<OwnerReference> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let found = match tokio::time::timeout(timeout, api.get(name)).await {
        Ok(Ok(deployment)) => owner_of(&deployment),
        Ok(Err(error)) => {
            tracing::info!(%error, deployment = name, "the status Lease is created without an owner: reading its Deployment failed");
            return None;
        }
        Err(_) => {
            tracing::info!(
                deployment = name,
                "the status Lease is created without an owner: reading its Deployment timed out"
            );
            return None;
        }
    };
    if found.is_none() {
        tracing::info!(
            deployment = name,
            "the status Lease is created without an owner: its Deployment has no uid"
        );
    }
    found
}

/// `deployment` as the controlling owner of another object.
fn owner_of(deployment: &Deployment) -> Option<OwnerReference> {
    deployment.controller_owner_ref(&())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_status_writers_lease() {
        let p = params("linkerd", "pod-0", Duration::from_secs(5)).expect("valid");
        assert_eq!(p.name, "policy-controller-write");
        assert_eq!(p.namespace, "linkerd");
        assert_eq!(p.claimant, "pod-0");
        assert_eq!(p.duration, Duration::from_secs(30));
        assert_eq!(p.renew_interval, Duration::from_secs(10));
        assert_eq!(p.renew_deadline, Duration::from_secs(20));
        assert_eq!(p.retry_interval, Duration::from_secs(5));
        assert_eq!(p.field_manager, "linkerd.io/policy-controller");
        assert_eq!(
            p.labels
                .get("linkerd.io/control-plane-ns")
                .map(String::as_str),
            Some("linkerd")
        );
        assert_eq!(
            p.labels
                .get("linkerd.io/control-plane-component")
                .map(String::as_str),
            Some("destination")
        );
    }

    #[test]
    fn the_deployment_owns_the_lease() {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "linkerd-destination", "namespace": "linkerd", "uid": "u-1"},
        }))
        .expect("deployment");
        let owner = owner_of(&deployment).expect("owner");
        assert_eq!(owner.api_version, "apps/v1");
        assert_eq!(owner.kind, "Deployment");
        assert_eq!(owner.name, "linkerd-destination");
        assert_eq!(owner.uid, "u-1");
        assert_eq!(owner.controller, Some(true));
        let mut no_uid = deployment;
        no_uid.metadata.uid = None;
        assert_eq!(owner_of(&no_uid), None);
    }
}
