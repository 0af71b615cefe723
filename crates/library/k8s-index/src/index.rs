//! The contract between a watch and an index: objects are applied, deleted,
//! or replaced wholesale after a (re)list.

use kube::Resource;

/// Identifies an object within its kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: Option<&str>, name: &str) -> Self {
        Self {
            namespace: namespace.map(str::to_string),
            name: name.to_string(),
        }
    }

    /// The key of an object (`None` if it has no name, which the API never sends).
    pub fn of<K: Resource>(obj: &K) -> Option<Self> {
        let meta = obj.meta();
        Some(Self {
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
        })
    }
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{ns}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// An in-memory index of one kind of object, updated synchronously.
///
/// Implementations react to each call at once (e.g. by publishing to
/// subscribers) and must not block.
pub trait Index<K> {
    /// An object was created or changed.
    fn apply(&mut self, obj: K);

    /// An object was deleted.
    fn delete(&mut self, key: ObjectKey);

    /// A full (re)list completed: `objects` is now the complete set, and
    /// `removed` names objects the index had that are gone (deleted while
    /// the watch was down). The default deletes the removed ones, then
    /// applies the rest; indexes may override to publish once.
    fn reset(&mut self, objects: Vec<K>, removed: Vec<ObjectKey>) {
        for key in removed {
            self.delete(key);
        }
        for obj in objects {
            self.apply(obj);
        }
    }
}

/// Feeds one watch into two indexes (e.g. the policy index and the status
/// writer's), so a kind is watched once however many indexes need it.
/// Each event is applied to `first`, then to `second`, under their own
/// locks.
pub struct Tee<A, B> {
    pub first: crate::SharedIndex<A>,
    pub second: crate::SharedIndex<B>,
}

impl<A, B> Tee<A, B> {
    /// The pair behind the lock a watch expects.
    pub fn shared(
        first: crate::SharedIndex<A>,
        second: crate::SharedIndex<B>,
    ) -> crate::SharedIndex<Self> {
        std::sync::Arc::new(parking_lot::RwLock::new(Self { first, second }))
    }
}

impl<K: Clone, A: Index<K>, B: Index<K>> Index<K> for Tee<A, B> {
    fn apply(&mut self, obj: K) {
        self.first.write().apply(obj.clone());
        self.second.write().apply(obj);
    }

    fn delete(&mut self, key: ObjectKey) {
        self.first.write().delete(key.clone());
        self.second.write().delete(key);
    }

    fn reset(&mut self, objects: Vec<K>, removed: Vec<ObjectKey>) {
        self.first.write().reset(objects.clone(), removed.clone());
        self.second.write().reset(objects, removed);
    }
}
