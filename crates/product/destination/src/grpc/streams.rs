//! The open `Get` and `GetProfile` streams, as the admin server shows them:
//! who asked for what and how far each stream has got (listed by
//! [`grpc_stream::registry`]; progress written by the stream itself), with
//! one copy of each context token they were opened with ([`Tokens`]).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use grpc_stream::registry::{self, WriteCounts, WriteCountsView};
use k8s_index::shared::Shared;

use crate::{
    core::{FilterKey, ServiceId, context_token::ContextToken},
    index::profiles::ProfileKey,
};

/// The destination's open streams.
pub type StreamRegistry = registry::StreamRegistry<StreamEntry>;
/// One open stream, listed.
pub type ListedStream = registry::Listed<StreamEntry>;
/// Keeps a stream listed while it lives.
pub type Registered = registry::Registered<StreamEntry>;

/// Which RPC a stream answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum StreamKind {
    Get,
    GetProfile,
}

/// What a stream follows: the shared state it reads its frames from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Followed {
    /// A `Get` filter group.
    Group {
        service: ServiceId,
        port: u16,
        key: FilterKey,
    },
    /// A `Get` filter group of a linked cluster's index (boxed: rare, and
    /// the largest variant, it would widen every stream's entry).
    RemoteGroup(Box<RemoteGroup>),
    /// A federated Service: the union of its members' groups.
    Federated { service: ServiceId, port: u16 },
    /// A `GetProfile` publisher.
    Profile(ProfileKey),
}

/// A `Get` filter group of a linked cluster's index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteGroup {
    pub cluster: String,
    pub service: ServiceId,
    pub port: u16,
    pub key: FilterKey,
}

impl Followed {
    /// The group a `Get` of a local or remote group follows: its Service,
    /// port and filter key.
    pub fn group(&self) -> Option<(&ServiceId, u16, &FilterKey)> {
        match self {
            Self::Group { service, port, key } => Some((service, *port, key)),
            Self::RemoteGroup(remote) => Some((&remote.service, remote.port, &remote.key)),
            Self::Federated { .. } | Self::Profile(_) => None,
        }
    }
}

/// The context tokens of the open streams, one copy of each: a proxy opens
/// all its streams with the same token, so they share one. A token is
/// dropped with the last stream entry holding it, so what a client sent
/// is kept only while its streams are open.
#[derive(Clone, Debug, Default)]
pub struct Tokens(Arc<parking_lot::Mutex<Shared<ContextToken>>>);

impl Tokens {
    /// The shared copy of a new stream's token.
    pub fn share(&self, token: ContextToken) -> SharedToken {
        SharedToken {
            token: Some(self.0.lock().get(token)),
            tokens: self.clone(),
        }
    }
}

/// A stream's context token, shared with the other streams opened with
/// the same one; given back to its [`Tokens`] when dropped.
#[derive(Debug)]
pub struct SharedToken {
    /// Always set until dropped (taken by `drop`).
    token: Option<Arc<ContextToken>>,
    tokens: Tokens,
}

/// What a [`SharedToken`] reads as once taken (never, outside `drop`).
static NO_TOKEN: ContextToken = ContextToken {
    ns: String::new(),
    node_name: String::new(),
    pod: String::new(),
};

impl std::ops::Deref for SharedToken {
    type Target = ContextToken;

    fn deref(&self) -> &ContextToken {
        self.token.as_deref().unwrap_or(&NO_TOKEN)
    }
}

impl Drop for SharedToken {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            // Given back under the set's lock: of two streams with one
            // token closing at once, the second sees the first's copy gone.
            self.tokens.0.lock().release(token);
        }
    }
}

/// One stream: what it asked for (fixed when it opens) and its progress.
/// One is held per open stream, so its fields are as narrow as they can
/// be: the path boxed to its length, the token shared by the streams of
/// one proxy ([`Tokens`]), the rare remote group boxed. (It fits
/// jemalloc's 256-byte class, with the registry's id and the `Arc`: a test
/// below keeps it there.)
#[derive(Debug)]
pub struct StreamEntry {
    pub kind: StreamKind,
    /// The request's `path` as the client sent it.
    pub path: Box<str>,
    /// The client's address, when known.
    pub peer: Option<SocketAddr>,
    /// The client's context token (namespace, pod, node).
    pub token: SharedToken,
    pub followed: Followed,
    pub progress: Progress,
}

impl StreamEntry {
    pub fn new(
        kind: StreamKind,
        path: impl Into<Box<str>>,
        peer: Option<SocketAddr>,
        token: SharedToken,
        followed: Followed,
    ) -> Self {
        Self {
            kind,
            path: path.into(),
            peer,
            token,
            followed,
            progress: Progress::default(),
        }
    }
}

/// How far a stream has got.
#[derive(Debug, Default)]
pub struct Progress {
    /// Version of the shared state last handed to the transport, plus one
    /// (0: nothing sent yet).
    sent_version: AtomicU64,
    writes: WriteCounts,
}

/// A copy of a stream's progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressView {
    /// The version of the state last sent, if any was.
    pub sent_version: Option<u64>,
    pub writes: WriteCountsView,
}

impl Progress {
    /// The stream handed the frames of `version` to the transport.
    pub fn sent(&self, version: u64, coalesced: bool) {
        self.sent_version
            .store(version.saturating_add(1), Ordering::Relaxed);
        self.writes.wrote(coalesced);
    }

    pub fn view(&self) -> ProgressView {
        ProgressView {
            sent_version: self.sent_version.load(Ordering::Relaxed).checked_sub(1),
            writes: self.writes.view(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_entry_fits_jemallocs_256_byte_class() {
        // What the registry allocates per stream: the entry, its id and
        // open time, and the `Arc`'s two counts.
        let allocated = std::mem::size_of::<ListedStream>() + 2 * std::mem::size_of::<usize>();
        assert!(allocated <= 256, "{allocated} bytes");
    }

    #[test]
    fn a_token_is_kept_while_a_stream_holds_it() {
        let tokens = Tokens::default();
        let token = |pod: &str| ContextToken {
            ns: "ns".into(),
            node_name: "node-1".into(),
            pod: pod.into(),
        };
        let a = tokens.share(token("web-0"));
        let b = tokens.share(token("web-0"));
        let c = tokens.share(token("web-1"));
        assert_eq!(tokens.0.lock().len(), 2, "web-0's streams share one copy");
        assert_eq!(b.pod, "web-0");
        drop(a);
        assert_eq!(tokens.0.lock().len(), 2, "web-0's second stream is open");
        drop((b, c));
        assert!(tokens.0.lock().is_empty(), "no stream is open");
    }

    #[test]
    fn progress_counts_sends_and_coalescing() {
        let progress = Progress::default();
        assert_eq!(progress.view(), ProgressView::default());
        progress.sent(0, false);
        progress.sent(3, true);
        let view = progress.view();
        assert_eq!(view.sent_version, Some(3));
        assert_eq!((view.writes.updates, view.writes.coalesced), (2, 1));
        assert!(view.writes.last_write_ms.is_some());
    }
}
