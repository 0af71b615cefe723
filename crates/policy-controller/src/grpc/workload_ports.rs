//! `meridian.policy.v1.WorkloadPorts`: streams the Server-derived opaque
//! ports of every meshed pod to the destination controller: one snapshot,
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

use crate::index::{Index, opaque_feed::PodOpaquePorts};

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

fn to_api(pod: &PodOpaquePorts) -> api::PodOpaquePorts {
    api::PodOpaquePorts {
        pod: Some(api::PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        }),
        ports: pod.ports.iter().map(|p| u32::from(*p)).collect(),
    }
}

fn snapshot(index: &RwLock<Index>) -> (api::WatchUpdate, broadcast::Receiver<Arc<PodOpaquePorts>>) {
    let (pods, rx) = index.read().follow_opaque_ports();
    let update = api::WatchUpdate {
        reset: true,
        pods: pods.iter().map(to_api).collect(),
        external_workloads: Vec::new(),
    };
    (update, rx)
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
                    let mut pods = vec![to_api(&change)];
                    while let Ok(more) = rx.try_recv() {
                        pods.push(to_api(&more));
                    }
                    api::WatchUpdate {
                        reset: false,
                        pods,
                        external_workloads: Vec::new(),
                    }
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
