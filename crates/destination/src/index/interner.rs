//! One shared copy of each string that repeats across stored objects
//! (namespaces, ServiceAccounts, node names, control-plane namespaces,
//! zones): a pod's or slice's facts point at the index's copy instead of
//! holding their own. Entries are never removed: these sets are bounded by
//! the cluster's namespaces, nodes, zones and ServiceAccounts, not by its
//! pods.

use std::{collections::HashSet, sync::Arc};

use crate::core::{pod::PodFacts, slice::SliceFacts};

/// The index's string set.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
}

impl Interner {
    /// The shared copy of `s` (stored now if it is new).
    pub fn intern(&mut self, s: &Arc<str>) -> Arc<str> {
        if let Some(shared) = self.strings.get(s) {
            return shared.clone();
        }
        self.strings.insert(s.clone());
        s.clone()
    }

    /// `facts` with its repeating strings replaced by the shared copies.
    pub fn pod(&mut self, mut facts: PodFacts) -> PodFacts {
        facts.namespace = self.intern(&facts.namespace);
        facts.service_account = self.intern(&facts.service_account);
        facts.node_name = facts.node_name.as_ref().map(|n| self.intern(n));
        facts.control_plane_ns = facts.control_plane_ns.as_ref().map(|n| self.intern(n));
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
