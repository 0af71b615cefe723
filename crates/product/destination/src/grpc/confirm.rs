//! The destination's lookups that missed its index, checked with the API
//! server before a stream opens (`k8s_index::confirm`), so that what a
//! stream first says never depends on whether a watch has caught up:
//! - a Service name the index does not hold (`Get`, `GetProfile`): the
//!   Service by name;
//! - an address inside the cluster networks that nothing is known at
//!   (`GetProfile` by IP): a Service with that ClusterIP (unless the
//!   address is outside every ServiceCIDR, which settles it) and a pod with
//!   that IP, by field selector. Addresses outside the cluster networks
//!   (egress) never are.
//!
//! Each kind's checks share the process's request budget: a miss over it is
//! answered `UNAVAILABLE` ([`MissBudgetSpent`]), never from a lagging index.
//! Without a confirmer (unit tests) a miss is answered from the index as is.

use std::net::SocketAddr;

use ipnet::IpNet;
use k8s_index::{Confirmation, MissConfirmer, Query};
use k8s_openapi::api::core::v1::{Pod, Service};

use super::{DestinationService, request::ProfileTarget};
use crate::core::ServiceId;

/// A miss could not be checked: the request budget of misses is spent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MissBudgetSpent;

fn answerable(outcome: Confirmation) -> Result<(), MissBudgetSpent> {
    if outcome.answerable() {
        Ok(())
    } else {
        Err(MissBudgetSpent)
    }
}

impl DestinationService {
    /// Checks the Service `id` with the API server if the index does not
    /// hold it, and waits (bounded) until the index does if it exists.
    pub(super) async fn confirm_service(&self, id: &ServiceId) -> Result<(), MissBudgetSpent> {
        let Some((confirm, _)) = &self.confirm else {
            return Ok(());
        };
        if self.index.read().service(id).is_some() {
            return Ok(());
        }
        let query = Query::Named {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        };
        answerable(
            confirm
                .confirm::<Service>("services", query, || {
                    self.index.read().service(id).is_some()
                })
                .await,
        )
    }

    /// Checks what a `GetProfile` request reads that the index may not
    /// show yet: its Service (by name) or its address.
    pub(super) async fn confirm_profile_target(
        &self,
        target: &ProfileTarget,
    ) -> Result<(), MissBudgetSpent> {
        match target {
            ProfileTarget::Name { service, .. } => self.confirm_service(service).await,
            ProfileTarget::Addr(addr) => self.confirm_addr(*addr).await,
        }
    }

    /// Checks an address the index knows nothing at: is it a ClusterIP, or
    /// a pod's IP, that the index has not seen yet?
    async fn confirm_addr(&self, addr: SocketAddr) -> Result<(), MissBudgetSpent> {
        let Some((confirm, networks)) = &self.confirm else {
            return Ok(());
        };
        let ip = addr.ip();
        if !networks.iter().any(|net| net.contains(&ip))
            || self.index.read().knows_profile_addr(addr)
        {
            return Ok(());
        }
        let services = async {
            if confirm.settled_not_cluster_ip(ip) {
                return Confirmation::Settled;
            }
            confirm
                .confirm::<Service>(
                    "services",
                    Query::Selected {
                        namespace: None,
                        fields: format!("spec.clusterIP={ip}"),
                        labels: None,
                    },
                    || {
                        !self
                            .index
                            .read()
                            .cluster()
                            .services_by_cluster_ip(ip)
                            .is_empty()
                    },
                )
                .await
        };
        let pods = confirm.confirm::<Pod>(
            "pods",
            Query::Selected {
                namespace: None,
                fields: format!("status.podIP={ip}"),
                labels: None,
            },
            || self.index.read().cluster().has_pod_with_ip(ip),
        );
        let (services, pods) = futures::future::join(services, pods).await;
        answerable(services)?;
        answerable(pods)
    }

    /// Checks misses with `confirm` (the process's API client), addresses
    /// only inside `cluster_networks`.
    pub fn with_confirmer(mut self, confirm: MissConfirmer, cluster_networks: Vec<IpNet>) -> Self {
        self.confirm = Some((confirm, cluster_networks.into()));
        self
    }
}
