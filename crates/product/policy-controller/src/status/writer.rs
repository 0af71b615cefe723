//! The thin async side of the status writer: while this replica leads, it
//! merge-patches the `status` subresource of every route whose desired
//! status ([`super::route_status`]) differs from its current one, and of
//! every rate limit policy and EgressNetwork ([`super::policies`]). It runs
//! after each Server or route change, when leadership is gained, and every
//! [`RESYNC_INTERVAL`] (to retry failed patches). Nothing is written before
//! the watches have synced, so a parent that is merely not listed yet is
//! never reported missing.
//!
//! A merge patch replaces `status.parents` (and `status.conditions`)
//! whole, so each patch carries the `resourceVersion` its status was
//! computed from: if the object changed since (another controller added
//! its own parent entry, say, which our copy does not show yet), the API
//! server refuses it with a conflict, nothing is overwritten, and the
//! status is computed again from the version the watch delivers next
//! (which wakes the writer). Conflicts are counted in
//! `policy_status_patch_conflicts_total`. A patch computed from a version
//! already patched from (applied, the watch not showing it yet; or
//! refused) is not sent again.

use std::{collections::HashMap, time::Duration};

use k8s_api::{
    gateway::{self, GatewayRoute},
    policy::{EgressNetwork, HTTPLocalRateLimitPolicy, HTTPRoute},
};
use k8s_index::SharedIndex;
use k8s_openapi::{apimachinery::pkg::apis::meta::v1::Time, jiff::Timestamp};
use kube::{
    Api,
    api::{DynamicObject, Patch, PatchParams},
};
use meridian_runtime::Shutdown;
use serde_json::json;
use tokio::sync::watch;

use super::{RouteKind, StatusIndex, StatusPatch, lease::FIELD_MANAGER, policies::PolicyKind};
use crate::{
    gateway::ActiveKinds,
    metrics::{PatchOutcome, StatusMetrics},
};

/// How often the leader re-checks every route even without changes.
pub const RESYNC_INTERVAL: Duration = Duration::from_secs(10);

/// Writes route statuses while `leader` is true.
pub struct StatusWriter {
    pub client: kube::Client,
    pub index: SharedIndex<StatusIndex>,
    pub leader: watch::Receiver<bool>,
    /// Signals that become `true` when the Server, Service and route
    /// watches synced.
    pub synced: Vec<watch::Receiver<bool>>,
    /// The versions the Gateway API kinds are served at (statuses are
    /// patched at the version the routes are watched at).
    pub gateway: ActiveKinds,
    /// `--patch-timeout-ms`.
    pub patch_timeout: Duration,
    pub metrics: StatusMetrics,
}

impl StatusWriter {
    /// Runs until `shutdown`; a patch in flight then completes, and no
    /// other is sent.
    pub async fn run(mut self, shutdown: Shutdown) {
        let stop = shutdown.clone().requested();
        tokio::pin!(stop);
        for synced in &mut self.synced {
            tokio::select! {
                () = &mut stop => return,
                result = synced.wait_for(|s| *s) => if result.is_err() { return },
            }
        }
        let mut changes = self.index.read().subscribe();
        let mut sent = Sent::default();
        loop {
            let leads = *self.leader.borrow_and_update();
            self.metrics.set_leader(leads);
            if leads {
                changes.mark_unchanged();
                self.write_all(&shutdown, &mut sent).await;
            }
            tokio::select! {
                () = &mut stop => return,
                result = changes.changed() => if result.is_err() { return },
                result = self.leader.changed() => if result.is_err() { return },
                () = tokio::time::sleep(RESYNC_INTERVAL) => {}
            }
        }
    }

    /// Whether to go on writing: we lead and are not shutting down.
    fn writing(&self, shutdown: &Shutdown) -> bool {
        *self.leader.borrow() && !shutdown.is_requested()
    }

    async fn write_all(&self, shutdown: &Shutdown, sent: &mut Sent) {
        let now = Time(Timestamp::now());
        let (patches, policy_patches) = {
            let index = self.index.read();
            (index.patches(&now), index.policy_patches(&now))
        };
        let pending: Vec<Target> = policy_patches
            .iter()
            .map(|p| Target::Policy(p.kind, p.namespace.clone(), p.name.clone()))
            .chain(
                patches
                    .iter()
                    .map(|p| Target::Route(p.kind, p.namespace.clone(), p.name.clone())),
            )
            .collect();
        // What no longer needs a patch is forgotten.
        sent.retain(|target, _| pending.contains(target));
        for patch in policy_patches {
            if !self.writing(shutdown) {
                return;
            }
            let target = Target::Policy(patch.kind, patch.namespace.clone(), patch.name.clone());
            if sent.already(&target, patch.resource_version.as_deref()) {
                continue;
            }
            let version = patch.resource_version.as_deref();
            let result = match patch.kind {
                PolicyKind::RateLimit => {
                    self.patch_status::<HTTPLocalRateLimitPolicy>(
                        &patch.namespace,
                        &patch.name,
                        &patch.status,
                        version,
                    )
                    .await
                }
                PolicyKind::EgressNetwork => {
                    self.patch_status::<EgressNetwork>(
                        &patch.namespace,
                        &patch.name,
                        &patch.status,
                        version,
                    )
                    .await
                }
            };
            sent.record(target, patch.resource_version.clone(), &result);
            match result {
                Ok(()) => {
                    tracing::debug!(ns = %patch.namespace, name = %patch.name, kind = ?patch.kind, "status written")
                }
                Err(PatchError::Conflict) => {
                    tracing::debug!(ns = %patch.namespace, name = %patch.name, kind = ?patch.kind, version, "status patch refused: the object changed since; computing it again from the new version")
                }
                Err(error) => {
                    tracing::warn!(ns = %patch.namespace, name = %patch.name, kind = ?patch.kind, %error, "writing the status failed")
                }
            }
        }
        for patch in patches {
            // Leadership may be lost mid-way: stop writing at once.
            if !self.writing(shutdown) {
                return;
            }
            let target = Target::Route(patch.kind, patch.namespace.clone(), patch.name.clone());
            if sent.already(&target, patch.resource_version.as_deref()) {
                continue;
            }
            let result = self.write(&patch).await;
            sent.record(target, patch.resource_version.clone(), &result);
            match result {
                Ok(()) => {
                    tracing::debug!(ns = %patch.namespace, route = %patch.name, "route status written");
                }
                Err(PatchError::Conflict) => {
                    tracing::debug!(ns = %patch.namespace, route = %patch.name, version = patch.resource_version.as_deref(), "route status patch refused: the route changed since; computing it again from the new version");
                }
                Err(error) => {
                    tracing::warn!(ns = %patch.namespace, route = %patch.name, %error, "writing the route status failed");
                }
            }
        }
    }

    async fn write(&self, patch: &StatusPatch) -> Result<(), PatchError> {
        match patch.kind {
            RouteKind::PolicyHttp => self.write_kind::<HTTPRoute>(patch).await,
            RouteKind::GatewayHttp => self.write_gateway::<gateway::HTTPRoute>(patch).await,
            RouteKind::Grpc => self.write_gateway::<gateway::GRPCRoute>(patch).await,
            RouteKind::Tls => self.write_gateway::<gateway::TLSRoute>(patch).await,
            RouteKind::Tcp => self.write_gateway::<gateway::TCPRoute>(patch).await,
        }
    }

    /// Patches a Gateway API route at the version its kind is watched at.
    async fn write_gateway<K: GatewayRoute>(&self, patch: &StatusPatch) -> Result<(), PatchError> {
        let version = self
            .gateway
            .version(K::PLURAL)
            .ok_or(PatchError::Inactive(K::PLURAL))?;
        let resource = crate::gateway::typed_watch::api_resource::<K>(&version);
        let api: Api<DynamicObject> =
            Api::namespaced_with(self.client.clone(), &patch.namespace, &resource);
        let status = serde_json::to_value(&patch.status).map_err(PatchError::Encode)?;
        self.send(api, &patch.name, &status, patch.resource_version.as_deref())
            .await
    }

    async fn write_kind<K>(&self, patch: &StatusPatch) -> Result<(), PatchError>
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let status = serde_json::to_value(&patch.status).map_err(PatchError::Encode)?;
        self.patch_status::<K>(
            &patch.namespace,
            &patch.name,
            &status,
            patch.resource_version.as_deref(),
        )
        .await
    }

    /// Patches the status of a typed, namespaced object, computed from its
    /// `version`.
    async fn patch_status<K>(
        &self,
        namespace: &str,
        name: &str,
        status: &serde_json::Value,
        version: Option<&str>,
    ) -> Result<(), PatchError>
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        self.send(
            Api::<K>::namespaced(self.client.clone(), namespace),
            name,
            status,
            version,
        )
        .await
    }

    /// Merge-patches `status`, refused by the API server if the object is
    /// no longer at `version`.
    async fn send<K>(
        &self,
        api: Api<K>,
        name: &str,
        status: &serde_json::Value,
        version: Option<&str>,
    ) -> Result<(), PatchError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let body = patch_body(status, version);
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_string()),
            ..Default::default()
        };
        let start = std::time::Instant::now();
        let result = tokio::time::timeout(
            self.patch_timeout,
            api.patch_status(name, &params, &Patch::Merge(&body)),
        )
        .await;
        let outcome = match &result {
            Ok(Ok(_)) => PatchOutcome::Applied,
            Ok(Err(error)) if is_conflict(error) => PatchOutcome::Conflict,
            Ok(Err(_)) => PatchOutcome::ApiError,
            Err(_) => PatchOutcome::Timeout,
        };
        self.metrics.patched(outcome, start.elapsed());
        match result {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) if outcome == PatchOutcome::Conflict => Err(PatchError::Conflict),
            Ok(Err(error)) => Err(PatchError::Api(error)),
            Err(_) => Err(PatchError::Timeout(self.patch_timeout)),
        }
    }
}

/// The body of a status patch computed from `version` of the object (the
/// API server refuses it with 409 if the object changed since).
pub fn patch_body(status: &serde_json::Value, version: Option<&str>) -> serde_json::Value {
    match version {
        Some(version) => json!({
            "metadata": {"resourceVersion": version},
            "status": status,
        }),
        None => json!({ "status": status }),
    }
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// An object the writer patches.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Target {
    Route(RouteKind, String, String),
    Policy(PolicyKind, String, String),
}

/// The version each object was last patched from, applied or refused with
/// a conflict: a patch from the same version is not sent again (applied,
/// the watch has not shown our write yet; refused, it would be refused
/// again). A new version of the object computes and sends it afresh.
#[derive(Debug, Default)]
struct Sent(HashMap<Target, String>);

impl Sent {
    fn already(&self, target: &Target, version: Option<&str>) -> bool {
        version.is_some() && self.0.get(target).map(String::as_str) == version
    }

    fn record(&mut self, target: Target, version: Option<String>, result: &Result<(), PatchError>) {
        match (version, result) {
            (Some(version), Ok(()) | Err(PatchError::Conflict)) => {
                self.0.insert(target, version);
            }
            _ => {
                self.0.remove(&target);
            }
        }
    }

    fn retain(&mut self, keep: impl Fn(&Target, &String) -> bool) {
        self.0.retain(|t, v| keep(t, v));
    }
}

/// Why a status patch failed.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("the object changed since its status was computed")]
    Conflict,
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("{0} are no longer watched")]
    Inactive(&'static str),
    #[error("encoding the status: {0}")]
    Encode(serde_json::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_patch_names_the_version_it_was_computed_from() {
        let status = json!({"parents": []});
        assert_eq!(
            patch_body(&status, Some("42")),
            json!({"metadata": {"resourceVersion": "42"}, "status": {"parents": []}})
        );
        assert_eq!(
            patch_body(&status, None),
            json!({"status": {"parents": []}})
        );
    }

    #[test]
    fn a_version_patched_from_is_not_sent_again() {
        let route = |name: &str| Target::Route(RouteKind::PolicyHttp, "ns".into(), name.into());
        let mut sent = Sent::default();
        sent.record(route("applied"), Some("1".into()), &Ok(()));
        sent.record(
            route("refused"),
            Some("1".into()),
            &Err(PatchError::Conflict),
        );
        sent.record(
            route("timed-out"),
            Some("1".into()),
            &Err(PatchError::Timeout(Duration::from_secs(5))),
        );
        sent.record(route("unversioned"), None, &Ok(()));
        assert!(sent.already(&route("applied"), Some("1")));
        assert!(sent.already(&route("refused"), Some("1")));
        // A new version is computed and sent afresh.
        assert!(!sent.already(&route("applied"), Some("2")));
        assert!(!sent.already(&route("refused"), Some("2")));
        // Unknown outcomes and unversioned patches are sent again.
        assert!(!sent.already(&route("timed-out"), Some("1")));
        assert!(!sent.already(&route("unversioned"), None));
        sent.retain(|t, _| *t == route("refused"));
        assert!(!sent.already(&route("applied"), Some("1")));
        assert!(sent.already(&route("refused"), Some("1")));
    }
}
