//! The open `Get` and `GetProfile` streams, as the admin server shows them:
//! who asked for what and how far each stream has got (listed by
//! [`grpc_stream::registry`]; progress written by the stream itself).

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use grpc_stream::registry::{self, WriteCounts, WriteCountsView};

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

/// One stream: what it asked for (fixed when it opens) and its progress.
/// One is held per open stream, so its fields are as narrow as they can
/// be: the path boxed to its length, the token shared by the streams of
/// one proxy (see [`super::DestinationService`]'s token set), the rare
/// remote group boxed. (It fits jemalloc's 256-byte class, with the
/// registry's id and the `Arc`: a test below keeps it there.)
#[derive(Debug)]
pub struct StreamEntry {
    pub kind: StreamKind,
    /// The request's `path` as the client sent it.
    pub path: Box<str>,
    /// The client's address, when known.
    pub peer: Option<SocketAddr>,
    /// The client's context token (namespace, pod, node).
    pub token: Arc<ContextToken>,
    pub followed: Followed,
    pub progress: Progress,
}

impl StreamEntry {
    pub fn new(
        kind: StreamKind,
        path: impl Into<Box<str>>,
        peer: Option<SocketAddr>,
        token: Arc<ContextToken>,
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
