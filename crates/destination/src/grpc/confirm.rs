//! The destination's lookups that missed its index, checked with the API
//! server before a stream opens (`k8s_index::confirm`), so that what a
//! stream first says never depends on whether a watch has caught up:
//! - a Service name the index does not hold (`Get`, `GetProfile`): the
//!   Service by name;
//! - an address inside the cluster networks that nothing is known at
//!   (`GetProfile` by IP): a Service with that ClusterIP and a pod with
//!   that IP, by field selector. Addresses outside (egress) never are.
//!
//! Without a confirmer (unit tests) a miss is answered from the index as is.

use std::net::SocketAddr;

use ipnet::IpNet;
use k8s_index::{MissConfirmer, Query};
use k8s_openapi::api::core::v1::{Pod, Service};

use super::{DestinationService, request::ProfileTarget};
use crate::core::ServiceId;

impl DestinationService {
    /// Checks the Service `id` with the API server if the index does not
    /// hold it, and waits (bounded) until the index does if it exists.
    pub(super) async fn confirm_service(&self, id: &ServiceId) {
        let Some((confirm, _)) = &self.confirm else {
            return;
        };
        if self.index.read().service(id).is_some() {
            return;
        }
        let query = Query::Named {
            namespace: id.namespace.clone(),
            name: id.name.clone(),
        };
        confirm
            .confirm::<Service>("services", query, || {
                self.index.read().service(id).is_some()
            })
            .await;
    }

    /// Checks what a `GetProfile` request reads that the index may not
    /// show yet: its Service (by name) or its address.
    pub(super) async fn confirm_profile_target(&self, target: &ProfileTarget) {
        match target {
            ProfileTarget::Name { service, .. } => self.confirm_service(service).await,
            ProfileTarget::Addr(addr) => self.confirm_addr(*addr).await,
        }
    }

    /// Checks an address the index knows nothing at: is it a ClusterIP, or
    /// a pod's IP, that the index has not seen yet?
    async fn confirm_addr(&self, addr: SocketAddr) {
        let Some((confirm, networks)) = &self.confirm else {
            return;
        };
        let ip = addr.ip();
        if !networks.iter().any(|net| net.contains(&ip))
            || self.index.read().knows_profile_addr(addr)
        {
            return;
        }
        let services = confirm.confirm::<Service>(
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
        );
        let pods = confirm.confirm::<Pod>(
            "pods",
            Query::Selected {
                namespace: None,
                fields: format!("status.podIP={ip}"),
                labels: None,
            },
            || self.index.read().cluster().has_pod_with_ip(ip),
        );
        futures::future::join(services, pods).await;
    }

    /// Checks misses with `confirm` (the process's API client), addresses
    /// only inside `cluster_networks`.
    pub fn with_confirmer(mut self, confirm: MissConfirmer, cluster_networks: Vec<IpNet>) -> Self {
        self.confirm = Some((confirm, cluster_networks.into()));
        self
    }
}
