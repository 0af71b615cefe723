//! One shared copy of each string that repeats across stored objects
//! (namespaces, ServiceAccounts, node names, control-plane namespaces,
//! zones), and of each pod template's facts: a pod's or slice's facts point
//! at the index's copy instead of holding their own. Strings are never
//! removed: that set is bounded by the cluster's namespaces, nodes, zones
//! and ServiceAccounts, not by its pods; template facts no pod points at
//! are (a rollout makes new ones).

use std::{collections::HashSet, sync::Arc};

use k8s_index::shared::Shared;

use crate::core::{
    pod::{PodFacts, PodSpecFacts},
    slice::SliceFacts,
};

/// The index's shared values.
#[derive(Debug, Default)]
pub struct Interner {
    strings: HashSet<Arc<str>>,
    /// The pods of a ReplicaSet have the same template facts.
    pod_specs: Shared<PodSpecFacts>,
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
