//! What one client may cost a webhook server, and the slots that bound the
//! request bodies being read at once.
//!
//! A request goes through two phases once hyper has its head: reading the
//! body, then validating it. Only reading can be made slow by a client, so
//! only reading takes a [`ReadSlots`] slot; validation is synchronous and
//! short, runs as soon as the body is in, and never waits on a slot (it is
//! bounded by the runtime's worker threads). When every slot is taken, a
//! newcomer sheds the reader that has held its slot longest, once that
//! reader has had [`Limits::shed_grace`]: the API server sends a review in
//! milliseconds, so it is never the oldest reader for long, while bodies
//! trickled by a flood are. A real review therefore gets a slot within
//! about the grace however many slow readers there are.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use tokio::{
    sync::{Notify, oneshot},
    time::Instant,
};

/// The largest request body accepted: 3.5 MiB.
///
/// An AdmissionReview carries the object and, on UPDATE, its old object.
/// Every kind these webhooks review is a custom resource, stored in etcd as
/// JSON, so each is at most etcd's default request limit of 1.5 MiB in the
/// JSON the API server sends (an object larger than that could not be
/// stored anyway). The envelope (uid, kind, resource, userInfo, options) is
/// a few KiB; 512 KiB of headroom covers it and a large userInfo. This is
/// just above the API server's own 3 MiB request body limit.
pub const BODY_LIMIT: usize = 3 * 1024 * 1024 + 512 * 1024;

/// How long a request's body may take to arrive, from its complete head.
///
/// The API server waits for a webhook's answer for the webhook's
/// `timeoutSeconds`: 10 s by default (and in Linkerd's chart), 30 s at
/// most. A body still arriving after 10 s comes from a client that is not
/// an API server waiting with the default timeout; the API server sends a
/// review in milliseconds.
pub const READ_DEADLINE: Duration = Duration::from_secs(10);

/// Request bodies read at once per server. With [`BODY_LIMIT`], the bodies
/// held while being read are at most 112 MiB however many clients connect.
pub const READING: usize = 32;

/// How long a reader keeps its slot before a newcomer may shed it.
pub const SHED_GRACE: Duration = Duration::from_millis(100);

/// HTTP/2 streams one client may have open at once on one connection.
pub const MAX_CONCURRENT_STREAMS: u32 = 32;

/// The bounds of one webhook server (see the constants for the defaults
/// and why).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest body accepted, in bytes (larger: HTTP 413).
    pub body_limit: usize,
    /// How long a body may take to arrive (later: HTTP 408).
    pub read_deadline: Duration,
    /// Bodies read at once.
    pub reading: usize,
    /// How long a reader keeps its slot before it may be shed (HTTP 503).
    pub shed_grace: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            body_limit: BODY_LIMIT,
            read_deadline: READ_DEADLINE,
            reading: READING,
            shed_grace: SHED_GRACE,
        }
    }
}

struct Reader {
    since: Instant,
    shed: oneshot::Sender<()>,
}

#[derive(Default)]
struct Readers {
    next_id: u64,
    /// By id, so by age: the first entry is the longest reading.
    by_id: BTreeMap<u64, Reader>,
}

/// The read slots of one server.
pub(crate) struct ReadSlots {
    capacity: usize,
    grace: Duration,
    readers: Mutex<Readers>,
    freed: Notify,
}

/// One request's read slot; released on drop. `shed` resolves if a
/// newcomer took the slot.
pub(crate) struct ReadSlot {
    slots: Arc<ReadSlots>,
    id: u64,
    pub(crate) shed: oneshot::Receiver<()>,
}

impl ReadSlots {
    pub(crate) fn new(limits: &Limits) -> Arc<Self> {
        Arc::new(Self {
            capacity: limits.reading.max(1),
            grace: limits.shed_grace,
            readers: Mutex::default(),
            freed: Notify::new(),
        })
    }

    /// Takes a slot: a free one, else the one of the longest reader once it
    /// has had its grace (that reader is told through its `shed`), waiting
    /// for whichever comes first.
    pub(crate) async fn acquire(self: &Arc<Self>) -> ReadSlot {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            let wait_until = {
                let mut readers = self.readers.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                let free = readers.by_id.len() < self.capacity;
                let oldest_since = readers.by_id.values().next().map(|reader| reader.since);
                match oldest_since {
                    Some(since) if !free && since + self.grace > now => since + self.grace,
                    _ => {
                        if !free && let Some((_, oldest)) = readers.by_id.pop_first() {
                            // It may have finished meanwhile; then nothing listens.
                            let _ = oldest.shed.send(());
                        }
                        return self.insert(&mut readers, now);
                    }
                }
            };
            tokio::select! {
                () = freed => {}
                () = tokio::time::sleep_until(wait_until) => {}
            }
        }
    }

    fn insert(self: &Arc<Self>, readers: &mut Readers, since: Instant) -> ReadSlot {
        let id = readers.next_id;
        readers.next_id += 1;
        let (shed, receiver) = oneshot::channel();
        readers.by_id.insert(id, Reader { since, shed });
        ReadSlot {
            slots: self.clone(),
            id,
            shed: receiver,
        }
    }
}

impl Drop for ReadSlot {
    fn drop(&mut self) {
        let removed = self
            .slots
            .readers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .by_id
            .remove(&self.id);
        if removed.is_some() {
            self.slots.freed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slots(reading: usize, grace: Duration) -> Arc<ReadSlots> {
        ReadSlots::new(&Limits {
            reading,
            shed_grace: grace,
            ..Limits::default()
        })
    }

    #[tokio::test(start_paused = true)]
    async fn a_newcomer_sheds_the_longest_reader_after_its_grace() {
        let slots = slots(2, Duration::from_millis(100));
        let mut first = slots.acquire().await;
        tokio::time::advance(Duration::from_millis(10)).await;
        let mut second = slots.acquire().await;
        let started = Instant::now();
        let third = slots.acquire().await;
        // It waited for the first reader's grace, then took its slot.
        assert_eq!(Instant::now() - started, Duration::from_millis(90));
        assert!(
            (&mut first.shed).await.is_ok(),
            "the longest reader is shed"
        );
        assert!(second.shed.try_recv().is_err(), "the other keeps its slot");
        drop(first);
        drop(third);
        // A freed slot is taken at once.
        let started = Instant::now();
        let _fourth = slots.acquire().await;
        assert_eq!(Instant::now(), started);
    }

    #[tokio::test(start_paused = true)]
    async fn a_freed_slot_wakes_a_waiter_before_the_grace() {
        let slots = slots(1, Duration::from_secs(60));
        let first = slots.acquire().await;
        let waiter = tokio::spawn({
            let slots = slots.clone();
            async move { slots.acquire().await.id }
        });
        tokio::time::advance(Duration::from_millis(5)).await;
        drop(first);
        let id = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken by the freed slot")
            .expect("task");
        assert_eq!(id, 1);
    }
}
