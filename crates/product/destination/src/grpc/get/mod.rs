//! `Get`: a stream of one filter group's shared frames. It sends the group's
//! current snapshot, then one step per change: its [`StreamCursor`] picks
//! the group's shared step if the stream kept up, or one coalesced diff if
//! it fell behind.

use std::{net::SocketAddr, sync::Arc};

use linkerd2_proxy_api::destination::GetDestination;
use parking_lot::RwLock;

use super::{
    DestinationService, FrameStream,
    request::get_request,
    status::RequestError,
    streams::{Followed, RemoteGroup, StreamEntry, StreamKind},
    subscription::{Moved, Rekey},
};
use crate::{
    core::{FilterKey, ServiceId, context_token::ContextToken, discovery::Discovery},
    index::{EndpointsIndex, endpoints::GroupState},
    k8s::multicluster::discovery,
    proto::frames::{self, Frames},
};

impl DestinationService {
    /// Opens a `Get` stream of encoded frames. A local or remote-discovery
    /// target follows one shared group (its frames shared with the group's
    /// other streams, released when dropped); a federated Service follows
    /// its members ([`super::federated`]).
    pub(super) async fn open_get(
        &self,
        request: GetDestination,
        peer: Option<SocketAddr>,
    ) -> Result<FrameStream, RequestError> {
        let get = get_request(&request, &self.cluster_domain).map_err(|error| {
            RequestError::Authority {
                path: request.path.clone(),
                error,
            }
        })?;
        // A Service created a moment ago is followed as it is, and one the
        // index misses is `NotFound` only once the API server agrees.
        self.confirm_service(&get.target.service)
            .await
            .map_err(|_| RequestError::MissBudget {
                path: request.path.clone(),
            })?;
        let discovery = self
            .index
            .read()
            .service(&get.target.service)
            .map(|svc| discovery(svc))
            .ok_or_else(|| RequestError::NoSuchService(get.target.service.clone()))?
            .map_err(|error| RequestError::Discovery {
                path: request.path.clone(),
                error,
            })?;
        match discovery {
            Discovery::Local => {
                let group = (get.target.service, get.target.port, get.key);
                let index = self.index.clone();
                self.follow_group(index, None, group, request.path, peer, get.token)
            }
            Discovery::Remote { cluster, service } => {
                let remote = self
                    .clusters
                    .as_ref()
                    .and_then(|store| store.read().linked(&cluster))
                    .ok_or_else(|| RequestError::UnknownCluster(cluster.clone()))?;
                let service = ServiceId {
                    namespace: get.target.service.namespace,
                    name: service,
                };
                // Linked clusters' endpoints are not filtered by the client's
                // node or zone (they are in another cluster).
                let key = FilterKey {
                    enable_filtering: false,
                    ..get.key
                };
                let group = (service, get.target.port, key);
                let index = remote.index.clone();
                self.follow_group(index, Some(cluster), group, request.path, peer, get.token)
            }
            Discovery::Federated(members) => {
                Ok(self.open_federated(get, members, request.path, peer))
            }
        }
    }

    /// Follows one group of `index`: the local index's (`cluster` is
    /// `None`) or a linked cluster's. The stream's registry entry keeps the
    /// key it asked with; the group it follows is that key's, or the
    /// unknown-node group while its node is unknown (see
    /// [`FilterKey::grouped`]), which it leaves for its node's own group
    /// when the node becomes known.
    fn follow_group(
        &self,
        index: Arc<RwLock<EndpointsIndex>>,
        cluster: Option<String>,
        (service, port, key): (ServiceId, u16, FilterKey),
        path: String,
        peer: Option<SocketAddr>,
        token: ContextToken,
    ) -> Result<FrameStream, RequestError> {
        let (grouped, rx, wake) = {
            let mut locked = index.write();
            let (grouped, rx) =
                locked
                    .subscribe_grouped(&service, port, &key)
                    .map_err(|error| RequestError::Subscribe {
                        path: path.clone(),
                        error,
                    })?;
            // Under the same lock: a node known after this wakes the stream.
            let wake = grouped.is_unknown_node().then(|| locked.node_epoch());
            (grouped, rx, wake)
        };
        // The group a stream of a known node follows never changes; an
        // unknown-node stream's is shared with its rekey check, which moves
        // it (and only such a stream pays for the sharing).
        let (rekey, moving) = match wake {
            Some(wake) => {
                let current = Arc::new(parking_lot::Mutex::new(grouped));
                let check = rekey_check(
                    index.clone(),
                    service.clone(),
                    port,
                    key.clone(),
                    current.clone(),
                );
                (Some(Rekey { wake, check }), Some(current))
            }
            None => (None, None),
        };
        let followed = match cluster {
            None => Followed::Group { service, port, key },
            Some(cluster) => Followed::RemoteGroup(Box::new(RemoteGroup {
                cluster,
                service,
                port,
                key,
            })),
        };
        tracing::debug!(%path, node = %token.node_name, "Get stream opened");
        self.metrics.stream_opened();
        let registered = self.streams.register(StreamEntry::new(
            StreamKind::Get,
            path,
            peer,
            self.tokens.share(token),
            followed,
        ));
        let entry = registered.listed();

        // The group is kept once, in the registry entry; the release reads
        // it back from there. A stream that may move releases the group it
        // follows by then (`moving`); any other follows the key it asked
        // with (`FilterKey::grouped` changes only unknown nodes' keys).
        let metrics = self.metrics.clone();
        let release = move || {
            let listed = registered.listed();
            drop(registered);
            if let Some((service, port, asked)) = listed.followed.group() {
                match &moving {
                    Some(current) => {
                        let key = current.lock().clone();
                        index.write().release(service, port, &key);
                    }
                    None => index.write().release(service, port, asked),
                }
            }
            metrics.stream_closed();
        };
        let metrics = self.metrics.clone();
        let mut cursor = StreamCursor::new();
        let frames_for = move |newest: Arc<GroupState>| {
            let version = newest.version;
            let (frames, coalesced) = cursor.advance(newest);
            if coalesced {
                metrics.coalesced();
            }
            if !frames.is_empty() {
                entry.progress.sent(version, coalesced);
            }
            frames
        };
        Ok(super::subscription::follow(
            rx,
            release,
            rekey,
            self.shutdown.clone(),
            frames_for,
        ))
    }
}

/// What an unknown-node stream does when a node becomes known: if its own
/// node is now known, subscribe to that node's group, record it as the
/// group followed (`current`, which the stream's release reads) and hand
/// back the release of the unknown-node group it leaves.
fn rekey_check(
    index: Arc<RwLock<EndpointsIndex>>,
    service: ServiceId,
    port: u16,
    asked: FilterKey,
    current: Arc<parking_lot::Mutex<FilterKey>>,
) -> Box<dyn FnMut() -> Option<Moved<Arc<GroupState>>> + Send + Sync> {
    Box::new(move || {
        let mut locked = index.write();
        let grouped = locked.group_key(&asked);
        if grouped.is_unknown_node() {
            return None;
        }
        // An ExternalName Service now: the stream stays where it is.
        let rx = locked.subscribe(&service, port, grouped.clone()).ok()?;
        drop(locked);
        let left = std::mem::replace(&mut *current.lock(), grouped);
        let index = index.clone();
        let service = service.clone();
        let release: Box<dyn FnOnce() + Send> =
            Box::new(move || index.write().release(&service, port, &left));
        Some((rx, release))
    })
}

/// A stream's position: the last state it sent.
#[derive(Debug)]
pub struct StreamCursor {
    last: Option<Arc<GroupState>>,
}

impl StreamCursor {
    pub fn new() -> Self {
        Self { last: None }
    }

    /// The frames that bring this stream to `newest`, and whether
    /// intermediate versions were skipped (coalesced). A stream that kept up
    /// shares the group's frames; only a stream that fell behind encodes its
    /// own diff.
    pub fn advance(&mut self, newest: Arc<GroupState>) -> (Frames, bool) {
        let (frames, coalesced) = match &self.last {
            None => (newest.initial_frames(), false),
            // A stream that moved to another group: from what it sent.
            Some(last) if last.group != newest.group => {
                (frames::step(&last.snapshot, &newest.snapshot), false)
            }
            Some(last) if last.version == newest.version => (Arc::from(Vec::new()), false),
            Some(last) if last.version + 1 == newest.version => (newest.step.clone(), false),
            Some(last) => (frames::step(&last.snapshot, &newest.snapshot), true),
        };
        self.last = Some(newest);
        (frames, coalesced)
    }
}

impl Default for StreamCursor {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests;
