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
    streams::{Followed, StreamEntry, StreamKind},
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
        // A Service created a moment ago is followed as it is, not as missing.
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
            .transpose()
            .map_err(|error| RequestError::Discovery {
                path: request.path.clone(),
                error,
            })?
            .unwrap_or(Discovery::Local);
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
    /// `None`) or a linked cluster's. The group's key is kept once, in the
    /// stream's registry entry, where the release reads it back.
    fn follow_group(
        &self,
        index: Arc<RwLock<EndpointsIndex>>,
        cluster: Option<String>,
        (service, port, key): (ServiceId, u16, FilterKey),
        path: String,
        peer: Option<SocketAddr>,
        token: ContextToken,
    ) -> Result<FrameStream, RequestError> {
        let rx = index
            .write()
            .subscribe(&service, port, key.clone())
            .map_err(|error| RequestError::Subscribe {
                path: path.clone(),
                error,
            })?;
        let followed = match cluster {
            None => Followed::Group { service, port, key },
            Some(cluster) => Followed::RemoteGroup {
                cluster,
                service,
                port,
                key,
            },
        };
        tracing::debug!(%path, node = %token.node_name, "Get stream opened");
        self.metrics.stream_opened();
        let registered = self.streams.register(StreamEntry::new(
            StreamKind::Get,
            path,
            peer,
            token,
            followed,
        ));
        let entry = registered.listed();

        let metrics = self.metrics.clone();
        let release = move || {
            let listed = registered.listed();
            drop(registered);
            if let Some((service, port, key)) = listed.followed.group() {
                index.write().release(service, port, key);
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
            self.shutdown.clone(),
            frames_for,
        ))
    }
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
mod tests {
    use linkerd2_proxy_api::destination::{Update, update};

    use super::*;
    use crate::core::FilterKey;
    use crate::index::tests::{get::web_slice, index, pod, service, subscribe};
    use k8s_index::Index as _;

    #[test]
    fn a_stream_that_fell_behind_gets_one_diff_to_the_newest_state() {
        let mut idx = index();
        idx.apply(service("web", "10.96.0.1"));
        idx.apply(pod("web-0", "10.0.0.1"));
        idx.apply(pod("web-1", "10.0.0.2"));
        idx.apply(web_slice(&[("web-0", "10.0.0.1", true)]));
        let mut rx = subscribe(&mut idx, "web", FilterKey::default());
        let mut cursor = StreamCursor::new();
        let decode = |frames: crate::proto::frames::Frames| -> Vec<Update> {
            frames
                .iter()
                .map(|f| grpc_stream::decode_request(f).expect("a valid frame"))
                .collect()
        };
        let (first, _) = cursor.advance(rx.borrow_and_update().clone());
        let first = decode(first);
        assert!(matches!(
            first[..],
            [Update {
                update: Some(update::Update::Add(_))
            }]
        ));

        // Three changes while the stream is not reading…
        idx.apply(web_slice(&[
            ("web-0", "10.0.0.1", true),
            ("web-1", "10.0.0.2", true),
        ]));
        idx.apply(web_slice(&[("web-1", "10.0.0.2", true)]));
        idx.apply(web_slice(&[("web-1", "10.0.0.2", false)]));
        idx.apply(web_slice(&[("web-1", "10.0.0.2", true)]));
        // …then it catches up in one step: web-0 removed, web-1 added.
        let (updates, coalesced) = cursor.advance(rx.borrow_and_update().clone());
        let updates = decode(updates);
        assert!(coalesced);
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| match &u.update {
                Some(update::Update::Add(set)) => {
                    assert_eq!(set.addrs.len(), 1);
                    "add"
                }
                Some(update::Update::Remove(set)) => {
                    assert_eq!(set.addrs.len(), 1);
                    "remove"
                }
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["add", "remove"]);
        // A stream that keeps up reuses the group's precomputed step.
        idx.apply(web_slice(&[]));
        let (updates, coalesced) = cursor.advance(rx.borrow_and_update().clone());
        let updates = decode(updates);
        assert!(!coalesced);
        assert_eq!(updates.len(), 1);
        assert!(matches!(
            updates[0].update,
            Some(update::Update::NoEndpoints(ref n)) if n.exists
        ));
    }
}
