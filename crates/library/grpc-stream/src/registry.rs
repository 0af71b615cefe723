//! The open streams of a server, for its admin port: each server keeps its
//! own entry type (what the stream asked for, how far it has got) and this
//! keeps the entries listed while their streams live. Entries are written
//! by their streams (with atomics of their own); the map's lock is taken
//! only to open, close or copy out a page, so listing never stops streams.

use std::{
    collections::BTreeMap,
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicU64, Ordering},
    },
    time::{SystemTime, UNIX_EPOCH},
};

/// Every open stream of one server, by id (ids grow, so id order is age order).
#[derive(Debug)]
pub struct StreamRegistry<E> {
    next_id: AtomicU64,
    streams: Mutex<BTreeMap<u64, Arc<Listed<E>>>>,
}

/// One listed stream: its id, when it opened, and the server's entry.
#[derive(Debug)]
pub struct Listed<E> {
    pub id: u64,
    /// Milliseconds since the Unix epoch.
    pub opened_at_ms: u64,
    pub entry: E,
}

impl<E> std::ops::Deref for Listed<E> {
    type Target = E;
    fn deref(&self) -> &E {
        &self.entry
    }
}

/// Keeps a stream listed until it is dropped.
#[derive(Debug)]
pub struct Registered<E> {
    registry: Arc<StreamRegistry<E>>,
    listed: Arc<Listed<E>>,
}

impl<E> Registered<E> {
    /// The listed entry (for the part of the stream that writes progress).
    pub fn listed(&self) -> Arc<Listed<E>> {
        self.listed.clone()
    }
}

impl<E> Drop for Registered<E> {
    fn drop(&mut self) {
        self.registry.lock().remove(&self.listed.id);
    }
}

impl<E> Default for StreamRegistry<E> {
    fn default() -> Self {
        Self {
            next_id: AtomicU64::new(0),
            streams: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<E> StreamRegistry<E> {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<u64, Arc<Listed<E>>>> {
        // The map holds no invariant a panicking holder could break.
        self.streams.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Lists a new stream until the returned guard is dropped.
    pub fn register(self: &Arc<Self>, entry: E) -> Registered<E> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let listed = Arc::new(Listed {
            id,
            opened_at_ms: now_ms(),
            entry,
        });
        self.lock().insert(id, listed.clone());
        Registered {
            registry: self.clone(),
            listed,
        }
    }

    /// The open streams `keep` selects, by id, after id `after`, at most `limit`.
    pub fn list(
        &self,
        after: u64,
        limit: usize,
        mut keep: impl FnMut(&Listed<E>) -> bool,
    ) -> Vec<Arc<Listed<E>>> {
        self.lock()
            .range(after.saturating_add(1)..)
            .map(|(_, listed)| listed)
            .filter(|listed| keep(listed))
            .take(limit)
            .cloned()
            .collect()
    }

    /// Every open stream.
    pub fn all(&self) -> Vec<Arc<Listed<E>>> {
        self.lock().values().cloned().collect()
    }

    /// Number of open streams.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before it).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What every stream records of its writes: how many, when the last one
/// was, and how many skipped states because the stream had fallen behind.
#[derive(Debug, Default)]
pub struct WriteCounts {
    last_write_ms: AtomicU64,
    updates: AtomicU64,
    coalesced: AtomicU64,
}

/// A copy of [`WriteCounts`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteCountsView {
    pub last_write_ms: Option<u64>,
    pub updates: u64,
    pub coalesced: u64,
}

impl WriteCounts {
    /// The stream handed one update to the transport.
    pub fn wrote(&self, coalesced: bool) {
        self.last_write_ms.store(now_ms(), Ordering::Relaxed);
        self.updates.fetch_add(1, Ordering::Relaxed);
        if coalesced {
            self.coalesced.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn view(&self) -> WriteCountsView {
        let last = self.last_write_ms.load(Ordering::Relaxed);
        WriteCountsView {
            last_write_ms: (last != 0).then_some(last),
            updates: self.updates.load(Ordering::Relaxed),
            coalesced: self.coalesced.load(Ordering::Relaxed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_listed_while_open_and_paged_by_id() {
        let registry = StreamRegistry::new();
        let a = registry.register("a");
        let b = registry.register("b");
        let c = registry.register("a");
        assert_eq!(registry.len(), 3);

        let ids = |page: Vec<Arc<Listed<&str>>>| page.iter().map(|l| l.id).collect::<Vec<_>>();
        assert_eq!(ids(registry.list(0, 2, |_| true)), [1, 2]);
        assert_eq!(ids(registry.list(2, 2, |_| true)), [3]);
        assert_eq!(ids(registry.list(0, 10, |l| l.entry == "a")), [1, 3]);

        drop(b);
        assert_eq!(ids(registry.all()), [1, 3]);
        drop((a, c));
        assert!(registry.is_empty());
    }

    #[test]
    fn writes_are_counted() {
        let counts = WriteCounts::default();
        assert_eq!(counts.view(), WriteCountsView::default());
        counts.wrote(false);
        counts.wrote(true);
        let view = counts.view();
        assert_eq!((view.updates, view.coalesced), (2, 1));
        assert!(view.last_write_ms.is_some());
    }
}
