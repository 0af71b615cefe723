//! Lookups that wait for their index to show an object the API server has,
//! woken only by events for that object.
//!
//! A miss the API server answered with an object (by name, or by a field
//! selector whose answer names the objects) waits until the watch applies
//! it. The watch of the kind tells [`KeyWaiters::wake`] the key of every
//! object it applies or deletes; only the lookups waiting for that key
//! wake, so an event costs one map probe (none while nobody waits, read
//! from an atomic count) and a busy kind does not wake every waiter. A
//! re-list may change any object: it wakes every waiter of the kind.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
};

use parking_lot::Mutex;
use tokio::sync::Notify;

use crate::ObjectKey;

/// The waiters of one kind, by the key each waits for.
#[derive(Debug, Default)]
pub struct KeyWaiters {
    /// How many keys have waiters: the watch skips the lock while it is 0.
    waiting: AtomicUsize,
    /// One [`Notify`] per key, shared by every lookup waiting for it;
    /// removed when its last waiter goes ([`Waiting`]'s drop).
    keys: Mutex<HashMap<ObjectKey, Arc<Notify>>>,
    /// Woken by a re-list, which may have changed any key.
    all: Notify,
}

impl KeyWaiters {
    /// Called by the watch after it applied or deleted `key`.
    pub fn wake(&self, key: &ObjectKey) {
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        if let Some(notify) = self.keys.lock().get(key) {
            notify.notify_waiters();
        }
    }

    /// Called by the watch after a re-list replaced the index's contents.
    pub fn wake_all(&self) {
        self.all.notify_waiters();
    }

    /// Registers interest in `keys` until the returned guard drops.
    pub fn wait_for(self: &Arc<Self>, keys: Vec<ObjectKey>) -> Waiting {
        let mut map = self.keys.lock();
        let notifies = keys
            .iter()
            .map(|key| {
                map.entry(key.clone())
                    .or_insert_with(|| {
                        self.waiting.fetch_add(1, Ordering::AcqRel);
                        Arc::new(Notify::new())
                    })
                    .clone()
            })
            .collect();
        Waiting {
            waiters: self.clone(),
            keys,
            notifies,
        }
    }

    /// How many keys are waited for (for tests and `/ready` details).
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

/// One lookup's interest in some keys; dropping it unregisters them.
pub struct Waiting {
    waiters: Arc<KeyWaiters>,
    keys: Vec<ObjectKey>,
    notifies: Vec<Arc<Notify>>,
}

impl Waiting {
    /// Waits until `in_index()` is true (re-checked after every wake-up of
    /// one of the keys, or of a re-list), or for ever if it never is: the
    /// caller bounds the wait.
    pub async fn until(&self, in_index: &impl Fn() -> bool) {
        loop {
            // Enabled before looking, so an event applied between the look
            // and the await still wakes this loop.
            let mut woken: Vec<_> = self
                .notifies
                .iter()
                .map(|notify| Box::pin(notify.notified()))
                .collect();
            let mut relisted = Box::pin(self.waiters.all.notified());
            for notified in &mut woken {
                notified.as_mut().enable();
            }
            relisted.as_mut().enable();
            if in_index() {
                return;
            }
            let any_key = futures::future::select_all(woken);
            futures::future::select(any_key, relisted).await;
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut map = self.waiters.keys.lock();
        // Our own clones first, so the map's is the last one left when no
        // other lookup waits for the key.
        self.notifies.clear();
        for key in &self.keys {
            if map
                .get(key)
                .is_some_and(|notify| Arc::strong_count(notify) == 1)
            {
                map.remove(key);
                self.waiters.waiting.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::{
        sync::atomic::{AtomicBool, AtomicU32},
        time::Duration,
    };

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new(Some("ns"), name)
    }

    #[tokio::test]
    async fn only_events_for_the_awaited_key_wake_the_lookup() {
        let waiters = Arc::new(KeyWaiters::default());
        let present = Arc::new(AtomicBool::new(false));
        let looks = Arc::new(AtomicU32::new(0));
        let waiting = waiters.wait_for(vec![key("a")]);
        assert_eq!(waiters.waiting(), 1);
        let task = {
            let (present, looks) = (present.clone(), looks.clone());
            tokio::spawn(async move {
                waiting
                    .until(&|| {
                        looks.fetch_add(1, Ordering::SeqCst);
                        present.load(Ordering::SeqCst)
                    })
                    .await;
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(looks.load(Ordering::SeqCst), 1);
        // Events for other objects do not make it look again.
        for other in 0..100 {
            waiters.wake(&key(&format!("b{other}")));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(looks.load(Ordering::SeqCst), 1);
        present.store(true, Ordering::SeqCst);
        waiters.wake(&key("a"));
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("woken by its key")
            .expect("task");
        assert_eq!(looks.load(Ordering::SeqCst), 2);
        assert_eq!(waiters.waiting(), 0, "the key is unregistered");
    }

    #[tokio::test]
    async fn a_relist_wakes_every_waiter() {
        let waiters = Arc::new(KeyWaiters::default());
        let present = Arc::new(AtomicBool::new(false));
        let waiting = waiters.wait_for(vec![key("a")]);
        let task = {
            let present = present.clone();
            tokio::spawn(async move { waiting.until(&|| present.load(Ordering::SeqCst)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        present.store(true, Ordering::SeqCst);
        waiters.wake_all();
        tokio::time::timeout(Duration::from_secs(5), task)
            .await
            .expect("woken by the re-list")
            .expect("task");
    }

    #[test]
    fn keys_are_shared_and_freed_with_their_last_waiter() {
        let waiters = Arc::new(KeyWaiters::default());
        let first = waiters.wait_for(vec![key("a"), key("b")]);
        let second = waiters.wait_for(vec![key("a")]);
        assert_eq!(waiters.waiting(), 2);
        drop(first);
        assert_eq!(waiters.waiting(), 1);
        drop(second);
        assert_eq!(waiters.waiting(), 0);
        assert!(waiters.keys.lock().is_empty());
    }
}
