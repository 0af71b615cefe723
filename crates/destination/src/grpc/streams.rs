//! The open streams, as the admin server shows them: who asked for what,
//! when, and how far each stream has got. Streams write their progress into
//! atomics of their own entry; readers copy entries out under a short lock
//! on the map (taken only to open, close or list), so listing 10,000
//! streams never stops them.

use std::{
    collections::BTreeMap,
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

use parking_lot::Mutex;

use crate::{
    core::{FilterKey, ServiceId, context_token::ContextToken},
    index::profiles::ProfileKey,
};

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
    /// A `GetProfile` publisher.
    Profile(ProfileKey),
    /// A `GetProfile` answered with the empty profile (no publisher).
    EmptyProfile,
}

/// Facts of one stream fixed when it opens.
#[derive(Debug)]
pub struct StreamEntry {
    pub id: u64,
    pub kind: StreamKind,
    /// The request's `path` as the client sent it.
    pub path: String,
    /// The client's address, when known.
    pub peer: Option<SocketAddr>,
    /// The client's context token (namespace, pod, node).
    pub token: ContextToken,
    pub followed: Followed,
    /// Milliseconds since the Unix epoch.
    pub opened_at_ms: u64,
    pub progress: Progress,
}

/// How far a stream has got; written by the stream, read by the admin server.
#[derive(Debug, Default)]
pub struct Progress {
    /// Version of the shared state last handed to the transport, plus one
    /// (0: nothing sent yet).
    sent_version: AtomicU64,
    /// When frames were last handed to the transport (ms since the epoch; 0: never).
    last_write_ms: AtomicU64,
    /// Times the stream sent something (the first state included).
    updates: AtomicU64,
    /// Times it skipped versions because it had fallen behind.
    coalesced: AtomicU64,
}

/// A copy of a stream's progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgressView {
    /// The version of the state last sent, if any was.
    pub sent_version: Option<u64>,
    pub last_write_ms: Option<u64>,
    pub updates: u64,
    pub coalesced: u64,
}

impl Progress {
    /// The stream handed the frames of `version` to the transport.
    pub fn sent(&self, version: u64, coalesced: bool) {
        self.sent_version.store(version + 1, Ordering::Relaxed);
        self.last_write_ms.store(now_ms(), Ordering::Relaxed);
        self.updates.fetch_add(1, Ordering::Relaxed);
        if coalesced {
            self.coalesced.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn view(&self) -> ProgressView {
        let sent = self.sent_version.load(Ordering::Relaxed);
        let last = self.last_write_ms.load(Ordering::Relaxed);
        ProgressView {
            sent_version: sent.checked_sub(1),
            last_write_ms: (last != 0).then_some(last),
            updates: self.updates.load(Ordering::Relaxed),
            coalesced: self.coalesced.load(Ordering::Relaxed),
        }
    }
}

/// Every open stream of the process.
#[derive(Debug, Default)]
pub struct StreamRegistry {
    next_id: AtomicU64,
    streams: Mutex<BTreeMap<u64, Arc<StreamEntry>>>,
}

/// What a stream opens with; the registry adds the id and the time.
pub struct NewStream {
    pub kind: StreamKind,
    pub path: String,
    pub peer: Option<SocketAddr>,
    pub token: ContextToken,
    pub followed: Followed,
}

/// Keeps a stream listed until it is dropped.
pub struct Registered {
    registry: Arc<StreamRegistry>,
    entry: Arc<StreamEntry>,
}

impl Registered {
    pub fn progress(&self) -> &Progress {
        &self.entry.progress
    }

    /// The stream's entry (for the part of the stream that writes progress).
    pub fn entry(&self) -> Arc<StreamEntry> {
        self.entry.clone()
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.registry.streams.lock().remove(&self.entry.id);
    }
}

impl StreamRegistry {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Lists a new stream until the returned guard is dropped.
    pub fn register(self: &Arc<Self>, stream: NewStream) -> Registered {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let entry = Arc::new(StreamEntry {
            id,
            kind: stream.kind,
            path: stream.path,
            peer: stream.peer,
            token: stream.token,
            followed: stream.followed,
            opened_at_ms: now_ms(),
            progress: Progress::default(),
        });
        self.streams.lock().insert(id, entry.clone());
        Registered {
            registry: self.clone(),
            entry,
        }
    }

    /// The open streams that `keep` selects, by id, from `after` on, at most `limit`.
    pub fn list(
        &self,
        after: u64,
        limit: usize,
        mut keep: impl FnMut(&StreamEntry) -> bool,
    ) -> Vec<Arc<StreamEntry>> {
        let streams = self.streams.lock();
        streams
            .range(after.saturating_add(1)..)
            .map(|(_, entry)| entry)
            .filter(|entry| keep(entry))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Every open stream (for the audit).
    pub fn all(&self) -> Vec<Arc<StreamEntry>> {
        self.streams.lock().values().cloned().collect()
    }

    /// Number of open streams.
    pub fn len(&self) -> usize {
        self.streams.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new_stream(pod: &str) -> NewStream {
        NewStream {
            kind: StreamKind::Get,
            path: "web.demo.svc.cluster.local:80".into(),
            peer: None,
            token: ContextToken {
                ns: "demo".into(),
                pod: pod.into(),
                node_name: "node-1".into(),
            },
            followed: Followed::EmptyProfile,
        }
    }

    #[test]
    fn streams_are_listed_while_open_and_paged_by_id() {
        let registry = StreamRegistry::new();
        let a = registry.register(new_stream("a"));
        let b = registry.register(new_stream("b"));
        let c = registry.register(new_stream("a"));
        assert_eq!(registry.len(), 3);

        let page = registry.list(0, 2, |_| true);
        assert_eq!(page.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 2]);
        let next = registry.list(2, 2, |_| true);
        assert_eq!(next.iter().map(|e| e.id).collect::<Vec<_>>(), [3]);
        let of_a = registry.list(0, 10, |e| e.token.pod == "a");
        assert_eq!(of_a.iter().map(|e| e.id).collect::<Vec<_>>(), [1, 3]);

        drop(b);
        assert_eq!(
            registry.all().iter().map(|e| e.id).collect::<Vec<_>>(),
            [1, 3]
        );
        drop((a, c));
        assert!(registry.is_empty());
    }

    #[test]
    fn progress_counts_sends_and_coalescing() {
        let registry = StreamRegistry::new();
        let stream = registry.register(new_stream("a"));
        assert_eq!(stream.progress().view(), ProgressView::default());
        stream.progress().sent(0, false);
        stream.progress().sent(3, true);
        let view = stream.progress().view();
        assert_eq!(view.sent_version, Some(3));
        assert_eq!(view.updates, 2);
        assert_eq!(view.coalesced, 1);
        assert!(view.last_write_ms.is_some());
    }
}
