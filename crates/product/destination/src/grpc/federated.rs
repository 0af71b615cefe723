//! `Get` of a federated Service: one stream over the groups of all its
//! members (local Services, filtered for the client; linked clusters'
//! Services, unfiltered), each group shared with every other stream of it.
//!
//! The stream re-reads its members when the federated Service changes and
//! when a linked cluster appears, joining and leaving members' groups as
//! they come and go; it ends (OK) when the Service is deleted or stops
//! being federated, as the original's does. What it sends is decided by
//! [`FederatedCursor`].

use std::{collections::BTreeMap, net::SocketAddr, sync::Arc};

use k8s_openapi::api::core::v1::Service;
use parking_lot::RwLock;
use tokio::sync::watch;

use super::{
    DestinationService, FrameStream,
    request::GetRequest,
    streams::{Followed, StreamEntry, StreamKind},
};
use crate::{
    core::{
        FilterKey, ServiceId,
        discovery::{Discovery, Member},
    },
    index::{EndpointsIndex, endpoints::GroupState},
    k8s::multicluster::discovery,
    multicluster::SharedClusterStore,
    proto::{
        federated::{FederatedCursor, Members},
        frames,
    },
};

/// A member's group, released when dropped.
struct MemberGroup {
    index: Arc<RwLock<EndpointsIndex>>,
    service: ServiceId,
    port: u16,
    key: FilterKey,
    rx: Option<watch::Receiver<Arc<GroupState>>>,
}

impl Drop for MemberGroup {
    fn drop(&mut self) {
        // The receiver goes first, so the publisher sees one fewer.
        self.rx.take();
        self.index
            .write()
            .release(&self.service, self.port, &self.key);
    }
}

/// What a federated stream needs to (re)subscribe its members.
struct Resolver {
    local: Arc<RwLock<EndpointsIndex>>,
    clusters: Option<SharedClusterStore>,
    namespace: String,
    port: u16,
    key: FilterKey,
}

impl Resolver {
    /// Joins the groups of members not yet followed and leaves those no
    /// longer listed. A member whose cluster has never been linked is left
    /// out until it is.
    fn resolve(&self, members: &[Member], groups: &mut BTreeMap<Member, MemberGroup>) {
        groups.retain(|member, _| members.contains(member));
        for member in members {
            if groups.contains_key(member) {
                continue;
            }
            let (index, name, key) = match member {
                Member::Local(name) => (self.local.clone(), name, self.key.clone()),
                Member::Remote { service, cluster } => {
                    let Some(remote) = self
                        .clusters
                        .as_ref()
                        .and_then(|store| store.read().cluster(cluster))
                    else {
                        tracing::debug!(%cluster, "federated member's cluster is not linked yet");
                        continue;
                    };
                    let key = FilterKey {
                        enable_filtering: false,
                        ..self.key.clone()
                    };
                    (remote.index.clone(), service, key)
                }
            };
            let service = ServiceId {
                namespace: self.namespace.clone(),
                name: name.clone(),
            };
            let subscribed = index.write().subscribe(&service, self.port, key.clone());
            match subscribed {
                Ok(rx) => {
                    groups.insert(
                        member.clone(),
                        MemberGroup {
                            index,
                            service,
                            port: self.port,
                            key,
                            rx: Some(rx),
                        },
                    );
                }
                Err(error) => {
                    tracing::debug!(?member, %error, "federated member cannot be followed");
                }
            }
        }
    }
}

/// The members of a federated Service as it is now; `None` ends the stream.
fn members_of(svc: &Option<Arc<Service>>) -> Option<Vec<Member>> {
    match discovery(svc.as_deref()?) {
        Ok(Discovery::Federated(members)) => Some(members),
        _ => None,
    }
}

struct State {
    service: watch::Receiver<Option<Arc<Service>>>,
    entries: Option<watch::Receiver<u64>>,
    resolver: Resolver,
    groups: BTreeMap<Member, MemberGroup>,
    cursor: FederatedCursor,
    frames: frames::Frames,
    next: usize,
    started: bool,
    shutdown: watch::Receiver<bool>,
    /// Runs when the stream is dropped (registry entry, metrics).
    _guard: Guard,
}

struct Guard(Option<Box<dyn FnOnce() + Send>>);

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(release) = self.0.take() {
            release();
        }
    }
}

impl DestinationService {
    /// Opens the `Get` stream of a federated Service with these members.
    pub(super) fn open_federated(
        &self,
        get: GetRequest,
        members: Vec<Member>,
        path: String,
        peer: Option<SocketAddr>,
    ) -> FrameStream {
        let service = self.index.write().watch_service(&get.target.service);
        let resolver = Resolver {
            local: self.index.clone(),
            clusters: self.clusters.clone(),
            namespace: get.target.service.namespace.clone(),
            port: get.target.port,
            key: get.key.clone(),
        };
        let mut groups = BTreeMap::new();
        resolver.resolve(&members, &mut groups);
        tracing::debug!(%path, members = members.len(), "federated Get stream opened");
        self.metrics.stream_opened();
        let registered = self.streams.register(StreamEntry::new(
            StreamKind::Get,
            path,
            peer,
            self.tokens.share(get.token),
            Followed::Federated {
                service: get.target.service.clone(),
                port: get.target.port,
            },
        ));
        let metrics = self.metrics.clone();
        let state = State {
            service,
            entries: self.clusters.as_ref().map(|c| c.read().entries()),
            resolver,
            groups,
            cursor: FederatedCursor::new(),
            frames: frames::Frames::from(Vec::new()),
            next: 0,
            started: false,
            shutdown: self.shutdown.clone(),
            _guard: Guard(Some(Box::new(move || {
                drop(registered);
                metrics.stream_closed();
            }))),
        };
        Box::pin(futures::stream::unfold(state, |mut state| async move {
            loop {
                if let Some(frame) = state.frames.get(state.next) {
                    state.next += 1;
                    return Some((Ok(frame.clone()), state));
                }
                if state.started {
                    let woke = state.wait().await?;
                    if woke.members_may_change {
                        let members = members_of(&state.service.borrow_and_update())?;
                        state.resolver.resolve(&members, &mut state.groups);
                    }
                }
                state.started = true;
                let newest: Members = state
                    .groups
                    .iter_mut()
                    .filter_map(|(member, group)| {
                        let rx = group.rx.as_mut()?;
                        let snapshot = rx.borrow_and_update().snapshot.clone();
                        Some((member.clone(), snapshot))
                    })
                    .collect();
                state.frames = frames::encode(&state.cursor.advance(&newest));
                state.next = 0;
            }
        }))
    }
}

/// Why a federated stream woke.
struct Woke {
    /// The Service or the linked clusters changed: re-read the members.
    members_may_change: bool,
}

impl State {
    /// Waits for a change; `None` ends the stream (shutdown, or the index
    /// went away).
    async fn wait(&mut self) -> Option<Woke> {
        let State {
            service,
            entries,
            groups,
            shutdown,
            ..
        } = self;
        let group_changes: Vec<_> = groups
            .values_mut()
            .filter_map(|g| g.rx.as_mut())
            .map(|rx| Box::pin(rx.changed()))
            .collect();
        let any_group = async {
            if group_changes.is_empty() {
                std::future::pending::<()>().await;
            }
            let _ = futures::future::select_all(group_changes).await;
        };
        let entries_changed = async {
            match entries {
                Some(rx) => {
                    if rx.changed().await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            changed = service.changed() => {
                changed.ok()?;
                Some(Woke { members_may_change: true })
            }
            () = entries_changed => Some(Woke { members_may_change: true }),
            () = any_group => Some(Woke { members_may_change: false }),
            _ = shutdown.wait_for(|stop| *stop) => None,
        }
    }
}
