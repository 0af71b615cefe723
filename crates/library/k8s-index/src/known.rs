//! The keys of the objects a watch has given its index: deletes of objects
//! the index never had are not passed on, and after a re-list the keys
//! that were not listed again are removed.
//!
//! Every pod of the cluster has one, so the set is kept small:
//! names grouped under their namespace (one copy of each namespace, not
//! one per object) and held as boxed strings (16 bytes, not an
//! [`ObjectKey`]'s 48 plus its namespace's own allocation).

use std::collections::{HashMap, HashSet};

use crate::ObjectKey;

/// The namespace under which cluster-scoped keys are grouped: never a
/// namespaced object's, whose namespace is never empty.
const CLUSTER_SCOPED: &str = "";

/// A set of [`ObjectKey`]s.
#[derive(Debug, Default)]
pub(crate) struct KnownKeys {
    by_namespace: HashMap<Box<str>, HashSet<Box<str>>>,
    len: usize,
}

fn namespace_of(key: &ObjectKey) -> &str {
    key.namespace.as_deref().unwrap_or(CLUSTER_SCOPED)
}

impl KnownKeys {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn contains(&self, key: &ObjectKey) -> bool {
        self.by_namespace
            .get(namespace_of(key))
            .is_some_and(|names| names.contains(key.name.as_str()))
    }

    /// Adds `key`; false if it was already there.
    pub fn insert(&mut self, key: &ObjectKey) -> bool {
        self.insert_parts(key.namespace.as_deref(), &key.name)
    }

    /// [`Self::insert`] of the key with this namespace and name.
    pub fn insert_parts(&mut self, namespace: Option<&str>, name: &str) -> bool {
        let namespace = namespace.unwrap_or(CLUSTER_SCOPED);
        let names = match self.by_namespace.get_mut(namespace) {
            Some(names) => names,
            None => self.by_namespace.entry(namespace.into()).or_default(),
        };
        let added = !names.contains(name) && names.insert(name.into());
        self.len += usize::from(added);
        added
    }

    /// Removes `key`; false if it was not there.
    pub fn remove(&mut self, key: &ObjectKey) -> bool {
        let namespace = namespace_of(key);
        let Some(names) = self.by_namespace.get_mut(namespace) else {
            return false;
        };
        let removed = names.remove(key.name.as_str());
        if names.is_empty() {
            self.by_namespace.remove(namespace);
        }
        self.len -= usize::from(removed);
        removed
    }

    /// Becomes `listed`, returning the keys that were known and are not
    /// in it.
    pub fn replace(&mut self, listed: KnownKeys) -> Vec<ObjectKey> {
        let old = std::mem::replace(self, listed);
        let mut gone = Vec::new();
        for (namespace, names) in &old.by_namespace {
            for name in names {
                let key = ObjectKey {
                    namespace: (&**namespace != CLUSTER_SCOPED).then(|| namespace.to_string()),
                    name: name.to_string(),
                };
                if !self.contains(&key) {
                    gone.push(key);
                }
            }
        }
        gone.sort();
        gone
    }
}

impl<'a> FromIterator<&'a ObjectKey> for KnownKeys {
    fn from_iter<T: IntoIterator<Item = &'a ObjectKey>>(keys: T) -> Self {
        let mut known = Self::default();
        for key in keys {
            known.insert(key);
        }
        known
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(namespace: Option<&str>, name: &str) -> ObjectKey {
        ObjectKey::new(namespace, name)
    }

    #[test]
    fn keys_are_told_apart_by_namespace_and_scope() {
        let mut known = KnownKeys::default();
        assert!(known.insert(&key(Some("a"), "x")));
        assert!(!known.insert(&key(Some("a"), "x")), "already known");
        assert!(known.insert(&key(Some("b"), "x")));
        assert!(known.insert(&key(None, "x")));
        assert_eq!(known.len(), 3);
        assert!(known.contains(&key(None, "x")));
        assert!(!known.contains(&key(Some("c"), "x")));
        assert!(known.remove(&key(Some("a"), "x")));
        assert!(!known.remove(&key(Some("a"), "x")), "already removed");
        assert!(!known.remove(&key(Some("c"), "y")), "never known");
        assert_eq!(known.len(), 2);
        assert!(!known.contains(&key(Some("a"), "x")));
        assert!(known.contains(&key(Some("b"), "x")));
    }

    #[test]
    fn a_relist_reports_exactly_the_keys_not_listed_again() {
        let mut known: KnownKeys = [
            key(Some("a"), "kept"),
            key(Some("a"), "gone"),
            key(Some("b"), "gone"),
            key(None, "node-gone"),
            key(None, "node-kept"),
        ]
        .iter()
        .collect();
        let listed: KnownKeys = [
            key(Some("a"), "kept"),
            key(Some("c"), "new"),
            key(None, "node-kept"),
        ]
        .iter()
        .collect();
        let gone = known.replace(listed);
        assert_eq!(
            gone,
            [
                key(None, "node-gone"),
                key(Some("a"), "gone"),
                key(Some("b"), "gone"),
            ]
        );
        assert_eq!(known.len(), 3);
        assert!(known.contains(&key(Some("c"), "new")));
        assert!(!known.contains(&key(Some("b"), "gone")));
    }
}
