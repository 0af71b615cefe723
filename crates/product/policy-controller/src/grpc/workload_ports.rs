//! `meridian.policy.v1.WorkloadPorts`: streams the Server-derived opaque
//! ports of every meshed pod and ExternalWorkload to the destination
//! controller: one snapshot,
//! then batches of changes. A follower that falls too far behind is sent a
//! fresh snapshot rather than being disconnected.

use std::{pin::Pin, sync::Arc};

use futures::Stream;
use meridian_api::policy::v1::{
    self as api,
    workload_ports_server::{WorkloadPorts, WorkloadPortsServer},
};
use meridian_runtime::Shutdown;
use parking_lot::RwLock;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::{
    core::WorkloadKind,
    index::{Index, opaque_feed::WorkloadOpaquePorts},
};

/// Serves the feed from the shared index.
#[derive(Clone)]
pub struct WorkloadPortsService {
    index: Arc<RwLock<Index>>,
    shutdown: Shutdown,
}

impl WorkloadPortsService {
    pub fn new(index: Arc<RwLock<Index>>, shutdown: Shutdown) -> Self {
        Self { index, shutdown }
    }

    /// The tonic service.
    pub fn svc(self) -> WorkloadPortsServer<Self> {
        WorkloadPortsServer::new(self).max_decoding_message_size(grpc_stream::MAX_REQUEST_BYTES)
    }
}

type UpdateStream = Pin<Box<dyn Stream<Item = Result<api::WatchUpdate, tonic::Status>> + Send>>;

/// One update carrying `changes`, pods and workloads each in their list.
fn update_of<'a>(
    reset: bool,
    changes: impl IntoIterator<Item = &'a WorkloadOpaquePorts>,
) -> api::WatchUpdate {
    let mut update = api::WatchUpdate {
        reset,
        pods: Vec::new(),
        external_workloads: Vec::new(),
    };
    for change in changes {
        let ports = change.ports.iter().map(|p| u32::from(*p)).collect();
        match change.kind {
            WorkloadKind::Pod => update.pods.push(api::PodOpaquePorts {
                pod: Some(api::PodRef {
                    namespace: change.namespace.clone(),
                    name: change.name.clone(),
                }),
                ports,
            }),
            WorkloadKind::External => {
                update
                    .external_workloads
                    .push(api::ExternalWorkloadOpaquePorts {
                        external_workload: Some(api::ExternalWorkloadRef {
                            namespace: change.namespace.clone(),
                            name: change.name.clone(),
                        }),
                        ports,
                    })
            }
        }
    }
    update
}

fn snapshot(
    index: &RwLock<Index>,
) -> (
    api::WatchUpdate,
    broadcast::Receiver<Arc<WorkloadOpaquePorts>>,
) {
    let (workloads, rx) = index.read().follow_opaque_ports();
    (update_of(true, &workloads), rx)
}

#[tonic::async_trait]
impl WorkloadPorts for WorkloadPortsService {
    type WatchStream = UpdateStream;

    async fn watch(
        &self,
        _request: tonic::Request<api::WatchRequest>,
    ) -> Result<tonic::Response<UpdateStream>, tonic::Status> {
        let (first, rx) = snapshot(&self.index);
        tracing::info!(
            pods = first.pods.len(),
            external_workloads = first.external_workloads.len(),
            "destination controller following opaque ports"
        );
        let index = self.index.clone();
        let state = (Some(first), rx, index);
        let stream = futures::stream::unfold(state, |(first, mut rx, index)| async move {
            if let Some(first) = first {
                return Some((Ok(first), (None, rx, index)));
            }
            let update = match rx.recv().await {
                Ok(change) => {
                    // Batch whatever else is already queued.
                    let mut changes = vec![change];
                    while let Ok(more) = rx.try_recv() {
                        changes.push(more);
                    }
                    update_of(false, changes.iter().map(Arc::as_ref))
                }
                Err(RecvError::Lagged(skipped)) => {
                    tracing::warn!(skipped, "opaque-ports follower lagged; sending a snapshot");
                    let (update, fresh) = snapshot(&index);
                    rx = fresh;
                    update
                }
                Err(RecvError::Closed) => return None,
            };
            Some((Ok(update), (None, rx, index)))
        });
        let stream = futures::StreamExt::take_until(stream, self.shutdown.clone().requested());
        Ok(tonic::Response::new(Box::pin(stream)))
    }
}
