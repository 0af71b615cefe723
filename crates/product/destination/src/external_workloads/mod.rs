//! The ExternalWorkload EndpointSlice writer: kube-controller-manager
//! writes EndpointSlices for the pods a Service selects; this writes them
//! for the ExternalWorkloads it selects, as the original destination's
//! external-workload endpoints controller does. Only the replica holding
//! the Lease [`LEASE_NAME`] writes.
//!
//! - [`reconcile`]: the pure rule (a Service, its namespace's workloads and
//!   our slices → creates, updates, deletes);
//! - [`state`]: the watched Services, workloads and our slices, queueing
//!   the Services each event may change while we lead;
//! - [`queue`]: the work queue of Service keys, retries with backoff, and
//!   its `workqueue_*` metrics;
//! - [`tracker`]: our writes the slice watch has not shown yet;
//! - [`writer`]: the API calls;
//! - [`metrics`]: whether this replica leads, and the writes it made;
//! - this file: the loop that follows the Lease and works the queue.

pub mod metrics;
pub mod queue;
pub mod reconcile;
pub mod state;
pub mod tracker;
pub mod writer;

use std::{
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

use k8s_api::workload::ExternalWorkload;
use k8s_index::SharedIndex;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Api;
use meridian_runtime::{Shutdown, lease};
use parking_lot::RwLock;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use self::{
    metrics::WriterMetrics,
    queue::{QueueCollector, QueueMetrics, WorkQueue},
    state::WriterState,
    tracker::Tracker,
    writer::WriteError,
};

/// The Lease only the writing replica holds (as the original).
pub const LEASE_NAME: &str = "linkerd-destination-endpoint-write";
/// How long the Lease lasts without renewal.
pub const LEASE_DURATION: Duration = Duration::from_secs(30);
/// The leader's term ends this long after the sending of its last
/// successful renewal (it stops writing until a renewal succeeds again).
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often the leader renews and a follower retries.
pub const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The `endpointslice.kubernetes.io/managed-by` value of our slices.
pub const MANAGED_BY: &str = k8s_api::labels::EXTERNAL_WORKLOADS_CONTROLLER;
/// Most endpoints in one slice (the original's `maxEndpointsQuota`).
pub const MAX_ENDPOINTS: usize = 100;
/// Retries of a failing Service before it is dropped from the queue.
pub const MAX_RETRIES: u32 = 15;
/// The queue's `name` label in the `workqueue_*` metrics.
pub const QUEUE_NAME: &str = "endpoints_controller_workqueue";
/// The field manager of our writes (slices and Lease).
pub const FIELD_MANAGER: &str = "linkerd.io/destination";
/// Bound on each API call.
pub const API_TIMEOUT: Duration = Duration::from_secs(5);

/// Why one Service's reconciliation failed (it is retried).
#[derive(Debug, thiserror::Error)]
pub enum SyncError {
    #[error("the EndpointSlice cache does not show our last writes yet")]
    StaleCache,
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The writer: its caches (fed by watches), its queue and the flag saying
/// whether this replica leads.
pub struct SliceWriter {
    state: SharedIndex<WriterState>,
    queue: Arc<WorkQueue>,
    leading: Arc<AtomicBool>,
    metrics: WriterMetrics,
}

/// The Lease of the writer in `namespace`, claimed as `claimant` (the pod
/// name); refused if its timings could let two terms overlap.
pub fn lease_params(
    namespace: &str,
    claimant: &str,
) -> Result<lease::LeaseParams, lease::InvalidLeaseParams> {
    let params = lease::LeaseParams {
        namespace: namespace.to_string(),
        name: LEASE_NAME.to_string(),
        claimant: claimant.to_string(),
        duration: LEASE_DURATION,
        renew_interval: RETRY_PERIOD,
        renew_deadline: RENEW_DEADLINE,
        retry_interval: RETRY_PERIOD,
        timeout: API_TIMEOUT,
        field_manager: FIELD_MANAGER.to_string(),
        component: "EndpointSlice writer",
        owner: None,
        labels: Default::default(),
    };
    params.validate()?;
    Ok(params)
}

impl SliceWriter {
    /// A writer whose metrics go to `registry`, its queue's too if
    /// `export_queue_metrics` (the original's `-export-queue-metrics`).
    pub fn new(registry: &mut Registry, export_queue_metrics: bool) -> Self {
        let queue_metrics = if export_queue_metrics {
            QueueMetrics::register(registry, QUEUE_NAME)
        } else {
            QueueMetrics::default()
        };
        let queue = WorkQueue::new(queue_metrics);
        if export_queue_metrics {
            registry.register_collector(Box::new(QueueCollector::new(queue.clone(), QUEUE_NAME)));
        }
        let metrics = WriterMetrics::register(registry);
        let leading = Arc::new(AtomicBool::new(false));
        let state = Arc::new(RwLock::new(WriterState::new(
            queue.clone(),
            leading.clone(),
        )));
        Self {
            state,
            queue,
            leading,
            metrics,
        }
    }

    /// The caches, to feed the Service and EndpointSlice watches into
    /// (with `k8s_index::Tee` when another index reads them too).
    pub fn state(&self) -> SharedIndex<WriterState> {
        self.state.clone()
    }

    /// Waits for `synced` (every cache listed once), then elects and, while
    /// leading, works the queue, until `shutdown`; then releases the Lease.
    pub async fn run(
        self,
        client: kube::Client,
        params: lease::LeaseParams,
        mut synced: watch::Receiver<bool>,
        shutdown: Shutdown,
    ) {
        tokio::select! {
            result = synced.wait_for(|s| *s) => if result.is_err() { return },
            () = shutdown.clone().requested() => return,
        }
        let claimant = params.claimant.clone();
        let (stop_lease, lease_shutdown) = Shutdown::new();
        let (leader_tx, mut leader) = watch::channel(false);
        // The flag follows the Lease at once, even mid-write.
        let mut mirror = leader_tx.subscribe();
        let flag = self.leading.clone();
        let gauge = self.metrics.clone();
        tokio::spawn(async move {
            while mirror.changed().await.is_ok() {
                let leads = *mirror.borrow_and_update();
                flag.store(leads, Ordering::Release);
                gauge.set_leader(leads);
            }
        });
        let elector = tokio::spawn(lease::run(
            client.clone(),
            params,
            leader_tx,
            lease_shutdown,
        ));

        let mut tracker = Tracker::default();
        let stop = shutdown.requested();
        tokio::pin!(stop);
        loop {
            tokio::select! {
                biased;
                () = &mut stop => break,
                changed = leader.changed() => {
                    if changed.is_err() {
                        break;
                    }
                    let leads = *leader.borrow_and_update();
                    self.leading.store(leads, Ordering::Release);
                    if leads {
                        tracing::info!(%claimant, lease = LEASE_NAME, "acquired the lease: writing EndpointSlices for ExternalWorkloads");
                        // A new term: what we wrote before may have been
                        // changed by another leader meanwhile.
                        tracker.clear();
                        self.state.read().enqueue_all();
                    } else {
                        tracing::info!(%claimant, lease = LEASE_NAME, "not holding the lease: not writing EndpointSlices");
                        self.queue.clear();
                    }
                }
                key = self.queue.next() => {
                    if self.leading.load(Ordering::Acquire) {
                        let result = self.sync(&client, &key, &mut tracker).await;
                        self.settle(&key, result);
                    }
                    self.queue.done(&key);
                }
            }
        }
        self.leading.store(false, Ordering::Release);
        self.metrics.set_leader(false);
        stop_lease.trigger();
        let _ = elector.await;
        tracing::debug!("EndpointSlice writer stopped");
    }

    /// Reconciles one Service from the caches and writes the difference.
    async fn sync(
        &self,
        client: &kube::Client,
        key: &str,
        tracker: &mut Tracker,
    ) -> Result<(), SyncError> {
        let inputs = self.state.read().inputs(key);
        let Some(service) = inputs.service else {
            // Deleted: its slices go with it (owner references).
            tracker.forget(key);
            return Ok(());
        };
        if tracker.stale(key, &inputs.slices) {
            return Err(SyncError::StaleCache);
        }
        let workloads: Vec<&ExternalWorkload> = inputs.workloads.iter().collect();
        let slices: Vec<&EndpointSlice> = inputs.slices.iter().collect();
        let actions = reconcile::reconcile(&service, &workloads, &slices, MAX_ENDPOINTS);
        // Leadership may have gone while the Service was reconciled: a
        // write is neither logged nor started after the loss was.
        if actions.is_empty() || !self.leading.load(Ordering::Acquire) {
            return Ok(());
        }
        tracing::debug!(
            service = key,
            create = actions.create.len(),
            update = actions.update.len(),
            delete = actions.delete.len(),
            "writing EndpointSlices"
        );
        let namespace = service.metadata.namespace.as_deref().unwrap_or_default();
        let api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
        // The versions the deletes were decided from.
        let versions: std::collections::BTreeMap<String, String> = inputs
            .slices
            .iter()
            .filter_map(|s| {
                Some((
                    s.metadata.name.clone()?,
                    s.metadata.resource_version.clone()?,
                ))
            })
            .collect();
        let (written, result) = writer::apply(
            &api,
            actions,
            &versions,
            FIELD_MANAGER,
            API_TIMEOUT,
            &self.leading,
            &self.metrics,
        )
        .await;
        for slice in &written.stored {
            tracker.stored(key, slice);
        }
        for name in &written.deleted {
            tracker.deleted(key, name);
        }
        Ok(result?)
    }

    /// Forgets a Service's retries after success; retries it with backoff
    /// after a failure, or drops it once its budget is spent.
    fn settle(&self, key: &str, result: Result<(), SyncError>) {
        match result {
            Ok(()) => self.queue.forget(key),
            Err(SyncError::StaleCache) => {
                tracing::debug!(
                    service = key,
                    "EndpointSlice cache behind our writes; retrying"
                );
                self.retry(key, &SyncError::StaleCache);
            }
            Err(error) => {
                let code = match &error {
                    SyncError::Write(w) => w.code(),
                    SyncError::StaleCache => None,
                };
                tracing::warn!(service = key, %error, code, "writing EndpointSlices failed");
                self.retry(key, &error);
            }
        }
    }

    fn retry(&self, key: &str, error: &SyncError) {
        if !self.queue.retry(key, MAX_RETRIES) {
            tracing::error!(service = key, %error, "dropped the Service from the EndpointSlice writer's queue after {MAX_RETRIES} retries");
        }
    }
}

#[cfg(test)]
mod lease_tests {
    use super::*;

    #[test]
    fn the_writers_lease() {
        let p = lease_params("linkerd", "pod-0").expect("valid timings");
        assert_eq!(p.name, "linkerd-destination-endpoint-write");
        assert_eq!(p.claimant, "pod-0");
        assert!(p.renew_interval < p.renew_deadline && p.renew_deadline < p.duration);
        assert_eq!(p.owner, None);
    }
}
