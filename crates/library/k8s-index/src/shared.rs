//! One shared copy of each equal value an index holds for many objects:
//! the pods of one ReplicaSet have the same definition (labels, ports,
//! probes, annotations, owner), and in the policy controller the ports a
//! Server selects publish the same server for every one of them. Each is
//! stored once and pointed at.
//!
//! Values no workload points at any more are dropped from the set when it
//! has doubled since the last sweep, so the set stays bounded by the values
//! in use, not by every value ever seen (a rollout makes new ones).

use std::{collections::HashSet, hash::Hash, sync::Arc};

/// The set of shared values of one type.
#[derive(Debug)]
pub struct Shared<T> {
    values: HashSet<Arc<T>>,
    /// The set's size that triggers the next sweep.
    sweep_at: usize,
}

/// The smallest size that triggers a sweep: small sets are left alone.
const MIN_SWEEP: usize = 64;

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Self {
            values: HashSet::new(),
            sweep_at: MIN_SWEEP,
        }
    }
}

impl<T: Hash + Eq> Shared<T> {
    /// The shared copy of `value` (stored now if no equal value is).
    pub fn get(&mut self, value: T) -> Arc<T> {
        if let Some(shared) = self.values.get(&value) {
            return shared.clone();
        }
        let shared = Arc::new(value);
        self.values.insert(shared.clone());
        if self.values.len() >= self.sweep_at {
            // The set's own reference is the only one left.
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.sweep_at = (self.values.len() * 2).max(MIN_SWEEP);
        }
        shared
    }

    /// Gives back a copy `get` returned: the stored copy is dropped at once
    /// if no one else holds it (instead of at the next sweep), so a value
    /// is freed as soon as its last holder lets go.
    pub fn release(&mut self, value: Arc<T>) {
        // The set's copy and `value` are the only ones left.
        if Arc::strong_count(&value) == 2 {
            self.values.remove(&*value);
        }
    }

    /// How many distinct values are stored.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no value is stored.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_values_share_one_copy() {
        let mut shared = Shared::default();
        let a = shared.get(vec!["app".to_string()]);
        let b = shared.get(vec!["app".to_string()]);
        let c = shared.get(vec!["db".to_string()]);
        assert!(Arc::ptr_eq(&a, &b));
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(shared.len(), 2);
    }

    #[test]
    fn a_value_released_by_its_last_holder_is_dropped_at_once() {
        let mut shared = Shared::default();
        let a = shared.get("a".to_string());
        let b = shared.get("a".to_string());
        shared.release(a);
        assert_eq!(shared.len(), 1, "b still holds it");
        shared.release(b);
        assert!(shared.is_empty());
    }

    #[test]
    fn values_nobody_holds_are_swept_as_the_set_grows() {
        let mut shared = Shared::default();
        let kept: Vec<Arc<u32>> = (0..10).map(|i| shared.get(i)).collect();
        // A rollout's worth of values, each dropped at once.
        for i in 100..1_000 {
            drop(shared.get(i));
        }
        assert!(shared.len() < MIN_SWEEP * 2, "{}", shared.len());
        // What is held stays shared.
        for (i, k) in kept.iter().enumerate() {
            let again = shared.get(u32::try_from(i).expect("small"));
            assert!(Arc::ptr_eq(k, &again));
        }
    }
}
