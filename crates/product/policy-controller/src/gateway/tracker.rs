//! [`KeyTracker`]: an [`Index`] adapter that remembers which objects it
//! passed on, so that when a kind stops being watched (its CRD went away)
//! every object of it can be removed from the indexes behind, exactly as
//! if each had been deleted.

use std::collections::BTreeSet;

use k8s_index::{Index, ObjectKey, SharedIndex};
use kube::Resource;

/// Passes events to `inner`, keeping the keys it holds.
#[derive(Debug)]
pub struct KeyTracker<I> {
    inner: SharedIndex<I>,
    keys: BTreeSet<ObjectKey>,
}

impl<I> KeyTracker<I> {
    /// A tracker in front of `inner`, behind the lock a watch expects.
    pub fn shared(inner: SharedIndex<I>) -> SharedIndex<Self> {
        SharedIndex::new(parking_lot::RwLock::new(Self {
            inner,
            keys: BTreeSet::new(),
        }))
    }

    /// How many objects the indexes behind hold.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the indexes behind hold no object of this kind.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Removes every object passed on so far from `inner` (one reset with
    /// nothing listed, so the inner index publishes once).
    pub fn clear<K>(&mut self)
    where
        I: Index<K>,
    {
        let removed: Vec<ObjectKey> = std::mem::take(&mut self.keys).into_iter().collect();
        if !removed.is_empty() {
            self.inner.write().reset(Vec::new(), removed);
        }
    }
}

impl<K: Resource, I: Index<K>> Index<K> for KeyTracker<I> {
    fn apply(&mut self, obj: K) {
        if let Some(key) = ObjectKey::of(&obj) {
            self.keys.insert(key);
        }
        self.inner.write().apply(obj);
    }

    fn delete(&mut self, key: ObjectKey) {
        self.keys.remove(&key);
        self.inner.write().delete(key);
    }

    fn reset(&mut self, objects: Vec<K>, removed: Vec<ObjectKey>) {
        for key in &removed {
            self.keys.remove(key);
        }
        self.keys.extend(objects.iter().filter_map(ObjectKey::of));
        self.inner.write().reset(objects, removed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_index::ObjectCache;
    use k8s_openapi::api::core::v1::Service;

    fn svc(name: &str) -> Service {
        let mut svc = Service::default();
        svc.metadata.namespace = Some("ns".into());
        svc.metadata.name = Some(name.into());
        svc
    }

    #[test]
    fn clear_removes_everything_passed_on_and_nothing_else() {
        let cache: SharedIndex<ObjectCache<Service>> = SharedIndex::default();
        cache.write().apply(svc("kept"));
        let tracker = KeyTracker::shared(cache.clone());
        tracker.write().reset(vec![svc("a"), svc("b")], Vec::new());
        tracker.write().apply(svc("c"));
        tracker.write().delete(ObjectKey::new(Some("ns"), "a"));
        assert_eq!(tracker.read().len(), 2);
        tracker.write().clear::<Service>();
        let names: Vec<_> = cache.read().iter().map(|(k, _)| k.name.clone()).collect();
        assert_eq!(names, ["kept"]);
        assert!(tracker.read().is_empty());
    }
}
