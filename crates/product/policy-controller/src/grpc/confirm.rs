//! The policy controller's lookups that missed its index, checked with the
//! API server before answering (`k8s_index::confirm`), so that no answer
//! depends on whether a watch has caught up:
//! - inbound: a workload the index does not hold (a meshed pod, by name
//!   and the meshed label the pod watch selects; an ExternalWorkload);
//! - outbound: a Service name the index does not hold (its default policy
//!   would otherwise lack the Service's settings), and an in-cluster
//!   address no Service has (it would otherwise be `NotFound`, which a
//!   proxy does not ask again).
//!
//! An address outside every ServiceCIDR (every pod's IP) is settled as no
//! Service's without a request. Each kind's checks share the process's
//! request budget: a miss over it is answered `UNAVAILABLE`, never from a
//! lagging index. Without a confirmer (unit tests) a miss is answered from
//! the index as is.

use k8s_api::workload::ExternalWorkload;
use k8s_index::{Confirmation, Query};
use k8s_openapi::api::core::v1::{Pod, Service};

use super::{
    InboundPolicyServer,
    outbound::{Asked, OutboundPolicyServer},
};
use crate::{
    core::{DiscoverInboundServer, DiscoverOutboundPolicy, WorkloadKind, WorkloadPort},
    index::CONTROL_PLANE_NS_LABEL,
};

/// The status of a lookup whose miss could not be checked: the request
/// budget of misses is spent (a proxy retries `UNAVAILABLE`).
fn answerable(outcome: Confirmation) -> Result<(), tonic::Status> {
    if outcome.answerable() {
        Ok(())
    } else {
        Err(tonic::Status::unavailable(
            "too many lookups missed the index; retry later",
        ))
    }
}

impl<D: DiscoverInboundServer> InboundPolicyServer<D> {
    /// Checks a workload the index does not hold with the API server, and
    /// waits (bounded) until the index holds it if it exists.
    pub(super) async fn confirm_workload(
        &self,
        target: &WorkloadPort,
    ) -> Result<(), tonic::Status> {
        let Some(confirm) = &self.confirm else {
            return Ok(());
        };
        let known = || self.discover.watch_inbound_server(target).is_ok();
        if known() {
            return Ok(());
        }
        let outcome = match target.kind {
            WorkloadKind::Pod => {
                // Only meshed pods are indexed: an unmeshed pod is a miss.
                let query = Query::Selected {
                    namespace: Some(target.namespace.clone()),
                    fields: format!("metadata.name={}", target.name),
                    labels: Some(CONTROL_PLANE_NS_LABEL.to_string()),
                };
                confirm.confirm::<Pod>("pods", query, known).await
            }
            WorkloadKind::External => {
                let query = Query::Named {
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                };
                confirm
                    .confirm::<ExternalWorkload>("externalworkloads", query, known)
                    .await
            }
        };
        answerable(outcome)
    }
}

impl<D: DiscoverOutboundPolicy> OutboundPolicyServer<D> {
    /// Checks a request the index would answer as missing: a Service name
    /// it does not hold, an in-cluster address no Service has (yet).
    pub(super) async fn confirm_miss(
        &self,
        asked: &Asked,
        source_namespace: &str,
    ) -> Result<(), tonic::Status> {
        let Some(confirm) = &self.confirm else {
            return Ok(());
        };
        let outcome = match asked {
            Asked::Service(target) => {
                if self.discover.knows_service(&target.namespace, &target.name) {
                    return Ok(());
                }
                let query = Query::Named {
                    namespace: target.namespace.clone(),
                    name: target.name.clone(),
                };
                confirm
                    .confirm::<Service>("services", query, || {
                        self.discover.knows_service(&target.namespace, &target.name)
                    })
                    .await
            }
            Asked::Addr(ip, port) => {
                let known = || {
                    self.discover
                        .lookup_ip(*ip, *port, source_namespace)
                        .is_some()
                };
                if known() || confirm.settled_not_cluster_ip(*ip) {
                    return Ok(());
                }
                let query = Query::Selected {
                    namespace: None,
                    fields: format!("spec.clusterIP={ip}"),
                    labels: None,
                };
                confirm.confirm::<Service>("services", query, known).await
            }
        };
        answerable(outcome)
    }
}
