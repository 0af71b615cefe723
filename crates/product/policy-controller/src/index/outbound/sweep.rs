//! Dropping the outbound index's watches nobody holds any more.
//!
//! A `Watch` or `Get` creates a watch for whatever it names: a Service that
//! may not exist, any port, any client namespace. Recomputing a Service
//! drops its unheld watches, but a name that never becomes a Service is
//! never recomputed, so without a sweep each made-up name would be kept
//! (about 1.4 KB) for the life of the process. The sweep drops every
//! Service and egress watch without a receiver; it runs whenever the count
//! of watches doubles (from `policy_rx`, `egress_rx`) and on the runtime's
//! cadence ([`SWEEP_INTERVAL_SECS`]), so state a client made goes within
//! seconds of its last stream ending. A watch with a receiver is never
//! dropped (the check and the subscription of a new receiver both hold the
//! index's write lock), and a stream opened after a sweep gets a new watch
//! computed from the index as it is, which follows a Service into
//! existence like any other.

use std::collections::HashMap;

use super::OutboundIndex;

/// The cadence of the runtime's sweep, in seconds.
pub const SWEEP_INTERVAL_SECS: u64 = 2;

impl OutboundIndex {
    /// Whether any watch has no receiver (cheap enough for a read lock, so
    /// the periodic sweep takes the write lock only when it will drop
    /// something).
    pub fn has_unwatched(&self) -> bool {
        self.watches
            .values()
            .flat_map(HashMap::values)
            .any(|tx| tx.receiver_count() == 0)
            || self
                .egress_watches
                .values()
                .any(|tx| tx.receiver_count() == 0)
    }

    /// Drops every Service and egress watch without a receiver; returns
    /// how many it dropped.
    pub fn sweep_unwatched(&mut self) -> usize {
        let before = self.watch_count + self.egress_watches.len();
        let mut count = 0;
        self.watches.retain(|_, watches| {
            watches.retain(|_, tx| tx.receiver_count() > 0);
            count += watches.len();
            !watches.is_empty()
        });
        self.watch_count = count;
        self.egress_watches.retain(|_, tx| tx.receiver_count() > 0);
        before - (self.watch_count + self.egress_watches.len())
    }
}

/// Sweeps `index` if it has unheld watches (the runtime's periodic task).
pub fn sweep_shared(index: &k8s_index::SharedIndex<OutboundIndex>) -> usize {
    if !index.read().has_unwatched() {
        return 0;
    }
    index.write().sweep_unwatched()
}
