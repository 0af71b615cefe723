//! The thin async side of the status writer: while this replica leads, it
//! merge-patches the `status` subresource of every route whose desired
//! status ([`super::route_status`]) differs from its current one, and of
//! every rate limit policy and EgressNetwork ([`super::policies`]). It runs
//! after each Server or route change, when leadership is gained, and every
//! [`RESYNC_INTERVAL`] (to retry failed patches). Nothing is written before
//! the watches have synced, so a parent that is merely not listed yet is
//! never reported missing.

use std::time::Duration;

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
use crate::{gateway::ActiveKinds, metrics::StatusMetrics};

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
        loop {
            let leads = *self.leader.borrow_and_update();
            self.metrics.set_leader(leads);
            if leads {
                changes.mark_unchanged();
                self.write_all(&shutdown).await;
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

    async fn write_all(&self, shutdown: &Shutdown) {
        let now = Time(Timestamp::now());
        let (patches, policy_patches) = {
            let index = self.index.read();
            (index.patches(&now), index.policy_patches(&now))
        };
        for patch in policy_patches {
            if !self.writing(shutdown) {
                return;
            }
            let result = match patch.kind {
                PolicyKind::RateLimit => {
                    self.patch_status::<HTTPLocalRateLimitPolicy>(
                        &patch.namespace,
                        &patch.name,
                        &patch.status,
                    )
                    .await
                }
                PolicyKind::EgressNetwork => {
                    self.patch_status::<EgressNetwork>(&patch.namespace, &patch.name, &patch.status)
                        .await
                }
            };
            match result {
                Ok(()) => {
                    tracing::debug!(ns = %patch.namespace, name = %patch.name, kind = ?patch.kind, "status written")
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
            match self.write(&patch).await {
                Ok(()) => {
                    tracing::debug!(ns = %patch.namespace, route = %patch.name, "route status written");
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
        self.send(api, &patch.name, &status).await
    }

    async fn write_kind<K>(&self, patch: &StatusPatch) -> Result<(), PatchError>
    where
        K: kube::Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let status = serde_json::to_value(&patch.status).map_err(PatchError::Encode)?;
        self.patch_status::<K>(&patch.namespace, &patch.name, &status)
            .await
    }

    /// Patches the status of a typed, namespaced object.
    async fn patch_status<K>(
        &self,
        namespace: &str,
        name: &str,
        status: &serde_json::Value,
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
        )
        .await
    }

    async fn send<K>(
        &self,
        api: Api<K>,
        name: &str,
        status: &serde_json::Value,
    ) -> Result<(), PatchError>
    where
        K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let body = json!({ "status": status });
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
        let counted = match &result {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err(false),
            Err(_) => Err(true),
        };
        self.metrics.patched(counted, start.elapsed());
        result.map_err(|_| PatchError::Timeout(self.patch_timeout))??;
        Ok(())
    }
}

/// Why a status patch failed.
#[derive(Debug, thiserror::Error)]
pub enum PatchError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("timed out after {0:?}")]
    Timeout(Duration),
    #[error("{0} are no longer watched")]
    Inactive(&'static str),
    #[error("encoding the status: {0}")]
    Encode(serde_json::Error),
}
