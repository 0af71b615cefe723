//! The Server-derived opaque ports of every meshed pod and
//! ExternalWorkload, as a snapshot plus a feed of changes, for the
//! destination controller (see `proto/meridian/policy/v1/workload_ports.proto`).

use std::{collections::HashMap, sync::Arc};

use tokio::sync::broadcast;

use crate::core::WorkloadKind;

/// How many changes a slow follower may lag behind before it is sent a
/// fresh snapshot instead.
const FEED_CAPACITY: usize = 4096;

/// The opaque ports of one workload; empty when none (or it is gone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkloadOpaquePorts {
    pub kind: WorkloadKind,
    pub namespace: String,
    pub name: String,
    pub ports: Vec<u16>,
}

/// Current opaque ports by workload, and the feed of their changes.
#[derive(Debug)]
pub struct OpaqueFeed {
    current: HashMap<(WorkloadKind, String, String), Vec<u16>>,
    tx: broadcast::Sender<Arc<WorkloadOpaquePorts>>,
}

impl Default for OpaqueFeed {
    fn default() -> Self {
        Self {
            current: HashMap::new(),
            tx: broadcast::channel(FEED_CAPACITY).0,
        }
    }
}

impl OpaqueFeed {
    /// Records a workload's opaque ports (sorted), announcing real changes only.
    pub fn set(&mut self, kind: WorkloadKind, namespace: &str, name: &str, ports: Vec<u16>) {
        let key = (kind, namespace.to_string(), name.to_string());
        let unchanged = match self.current.get(&key) {
            Some(current) => *current == ports,
            None => ports.is_empty(),
        };
        if unchanged {
            return;
        }
        if ports.is_empty() {
            self.current.remove(&key);
        } else {
            self.current.insert(key, ports.clone());
        }
        // No follower is not an error.
        let _ = self.tx.send(Arc::new(WorkloadOpaquePorts {
            kind,
            namespace: namespace.to_string(),
            name: name.to_string(),
            ports,
        }));
    }

    /// Every workload with opaque ports, and a receiver of the changes after it.
    /// Call under the index lock so the two are consistent.
    pub fn follow(
        &self,
    ) -> (
        Vec<WorkloadOpaquePorts>,
        broadcast::Receiver<Arc<WorkloadOpaquePorts>>,
    ) {
        let mut snapshot: Vec<WorkloadOpaquePorts> = self
            .current
            .iter()
            .map(|((kind, namespace, name), ports)| WorkloadOpaquePorts {
                kind: *kind,
                namespace: namespace.clone(),
                name: name.clone(),
                ports: ports.clone(),
            })
            .collect();
        snapshot
            .sort_by(|a, b| (a.kind, &a.namespace, &a.name).cmp(&(b.kind, &b.namespace, &b.name)));
        (snapshot, self.tx.subscribe())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_real_changes_are_announced() {
        let mut feed = OpaqueFeed::default();
        let (snapshot, mut rx) = feed.follow();
        assert!(snapshot.is_empty());
        feed.set(WorkloadKind::Pod, "ns", "a", vec![]);
        assert!(rx.try_recv().is_err(), "no ports before, none now");
        feed.set(WorkloadKind::Pod, "ns", "a", vec![5432]);
        feed.set(WorkloadKind::Pod, "ns", "a", vec![5432]);
        assert_eq!(rx.try_recv().expect("change").ports, [5432]);
        assert!(rx.try_recv().is_err(), "a repeat is not a change");
        let (snapshot, _) = feed.follow();
        assert_eq!(snapshot.len(), 1);
        feed.set(WorkloadKind::Pod, "ns", "a", vec![]);
        assert!(rx.try_recv().expect("removal").ports.is_empty());
        assert!(feed.follow().0.is_empty());
    }
}
