//! One shared copy of each string that repeats across stored objects
//! (namespaces, ServiceAccounts, node names, control-plane namespaces,
//! zones), and of each pod template's facts: a pod's or slice's facts point
//! at the index's copy instead of holding their own.
//!
//! Neither set keeps what nothing points at: whenever a set has doubled
//! since its last sweep, the values whose only holder is the set itself
//! are dropped (amortized O(1) per insert; the pattern of
//! [`k8s_index::shared`]). So the strings kept are bounded by those the
//! stored objects use now, not by every namespace, node or zone ever seen:
//! a deleted namespace's or node's name goes with the last object that
//! named it.

use std::{collections::HashSet, sync::Arc};

use k8s_index::shared::Shared;

use crate::core::{
    pod::{PodFacts, PodSpecFacts},
    slice::SliceFacts,
};

/// The index's shared values.
#[derive(Debug)]
pub struct Interner {
    /// A set, not a map: the `Arc` is both the key and the shared copy.
    strings: HashSet<Arc<str>>,
    /// The size of `strings` that triggers its next sweep (twice its size
    /// after the last one, so sweeping costs O(1) per insert).
    sweep_at: usize,
    /// The pods of a ReplicaSet have the same template facts.
    pod_specs: Shared<PodSpecFacts>,
}

/// The smallest size of `strings` that triggers a sweep.
const MIN_SWEEP: usize = 64;

impl Default for Interner {
    fn default() -> Self {
        Self {
            strings: HashSet::new(),
            sweep_at: MIN_SWEEP,
            pod_specs: Shared::default(),
        }
    }
}

impl Interner {
    /// The shared copy of `s` (stored now if it is new).
    pub fn intern(&mut self, s: &Arc<str>) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        self.strings.insert(s.clone());
        if self.strings.len() >= self.sweep_at {
            self.sweep();
        }
        s.clone()
    }

    /// Drops the strings only the set holds.
    fn sweep(&mut self) {
        self.strings.retain(|s| Arc::strong_count(s) > 1);
        self.sweep_at = (self.strings.len() * 2).max(MIN_SWEEP);
    }

    /// How many strings are stored.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.strings.len()
    }

    /// `facts` with its repeating strings replaced by the shared copies.
    pub fn pod(&mut self, mut facts: PodFacts) -> PodFacts {
        facts.namespace = self.intern(&facts.namespace);
        facts.node_name = facts.node_name.as_ref().map(|n| self.intern(n));
        let mut spec = Arc::unwrap_or_clone(facts.spec);
        spec.service_account = self.intern(&spec.service_account);
        spec.control_plane_ns = spec.control_plane_ns.as_ref().map(|n| self.intern(n));
        facts.spec = self.pod_specs.get(spec);
        facts
    }

    /// `slice` with its namespace, zones and pod namespaces shared.
    pub fn slice(&mut self, mut slice: SliceFacts) -> SliceFacts {
        slice.namespace = self.intern(&slice.namespace);
        for ep in slice.endpoints.iter_mut() {
            ep.zone = ep.zone.as_ref().map(|z| self.intern(z));
            if let Some(zones) = ep.for_zones.as_mut() {
                for z in zones.iter_mut() {
                    *z = self.intern(z);
                }
            }
            if let Some(crate::core::slice::SliceTarget::Pod {
                namespace: Some(ns),
                ..
            }) = ep.target.as_mut()
            {
                *ns = self.intern(ns);
            }
        }
        slice
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_nothing_holds_are_swept_as_the_set_grows() {
        let mut interner = Interner::default();
        let kept: Arc<str> = Arc::from("kept");
        let kept = interner.intern(&kept);
        // Made-up names held only while interned, then dropped.
        for i in 0..10_000 {
            let name: Arc<str> = Arc::from(format!("node-{i}"));
            drop(interner.intern(&name));
        }
        assert!(
            interner.len() <= 2 * MIN_SWEEP,
            "{} strings kept for one in use",
            interner.len()
        );
        let again: Arc<str> = Arc::from("kept");
        assert!(
            Arc::ptr_eq(&interner.intern(&again), &kept),
            "a string in use is never dropped"
        );
    }

    #[test]
    fn strings_in_use_stay_shared() {
        let mut interner = Interner::default();
        let held: Vec<Arc<str>> = (0..1_000)
            .map(|i| interner.intern(&Arc::from(format!("ns-{i}"))))
            .collect();
        assert_eq!(interner.len(), 1_000);
        for (i, s) in held.iter().enumerate() {
            let copy = interner.intern(&Arc::from(format!("ns-{i}")));
            assert!(Arc::ptr_eq(s, &copy));
        }
    }
}
