//! [`ObjectCache`]: the simplest index, a map from name to the latest object.

use std::{collections::BTreeMap, sync::Arc};

use kube::Resource;

use crate::{Index, ObjectKey};

/// The latest version of every object of a kind, by key.
#[derive(Debug)]
pub struct ObjectCache<K> {
    objects: BTreeMap<ObjectKey, Arc<K>>,
}

impl<K> Default for ObjectCache<K> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
        }
    }
}

impl<K> ObjectCache<K> {
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<K>> {
        self.objects.get(key).cloned()
    }

    pub fn get_namespaced(&self, namespace: &str, name: &str) -> Option<Arc<K>> {
        self.get(&ObjectKey::new(Some(namespace), name))
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&ObjectKey, &Arc<K>)> {
        self.objects.iter()
    }
}

impl<K: Resource> Index<K> for ObjectCache<K> {
    fn apply(&mut self, obj: K) {
        if let Some(key) = ObjectKey::of(&obj) {
            self.objects.insert(key, Arc::new(obj));
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        self.objects.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;

    fn svc(ns: &str, name: &str, port: i32) -> Service {
        let mut svc = Service::default();
        svc.metadata.namespace = Some(ns.into());
        svc.metadata.name = Some(name.into());
        svc.spec = Some(k8s_openapi::api::core::v1::ServiceSpec {
            ports: Some(vec![k8s_openapi::api::core::v1::ServicePort {
                port,
                ..Default::default()
            }]),
            ..Default::default()
        });
        svc
    }

    fn port(cache: &ObjectCache<Service>, ns: &str, name: &str) -> Option<i32> {
        let svc = cache.get_namespaced(ns, name)?;
        Some(svc.spec.as_ref()?.ports.as_ref()?.first()?.port)
    }

    #[test]
    fn apply_replaces_and_delete_removes() {
        let mut cache = ObjectCache::default();
        cache.apply(svc("ns", "a", 80));
        cache.apply(svc("ns", "a", 81));
        cache.apply(svc("other", "a", 90));
        assert_eq!(cache.len(), 2);
        assert_eq!(port(&cache, "ns", "a"), Some(81));
        cache.delete(ObjectKey::new(Some("ns"), "a"));
        assert_eq!(port(&cache, "ns", "a"), None);
        assert_eq!(port(&cache, "other", "a"), Some(90));
    }

    #[test]
    fn reset_drops_removed_and_applies_the_new_set() {
        let mut cache = ObjectCache::default();
        cache.apply(svc("ns", "gone", 80));
        cache.apply(svc("ns", "kept", 80));
        cache.reset(
            vec![svc("ns", "kept", 82), svc("ns", "new", 83)],
            vec![ObjectKey::new(Some("ns"), "gone")],
        );
        assert_eq!(cache.len(), 2);
        assert_eq!(port(&cache, "ns", "gone"), None);
        assert_eq!(port(&cache, "ns", "kept"), Some(82));
        assert_eq!(port(&cache, "ns", "new"), Some(83));
    }
}
