//! What the EndpointSlice writer knows of the cluster: Services,
//! ExternalWorkloads, and the slices we manage, fed by watches (the
//! [`Index`] impls). Each event queues the Services it may change, but
//! only while this replica leads: a follower keeps its caches warm and
//! queues nothing, and a new leader queues every Service once.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use k8s_api::{labels::SERVICE_NAME, workload::ExternalWorkload};
use k8s_index::{Index, ObjectKey};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};

use super::{
    queue::WorkQueue,
    reconcile::{self, managed_by_us},
};

/// The namespace whose Services the writer leaves alone (as the original).
const SKIPPED_NAMESPACE: &str = "kube-system";

/// The inputs of one Service's reconciliation, cloned out of the state.
#[derive(Clone, Debug)]
pub struct Inputs {
    pub service: Option<Service>,
    pub workloads: Vec<ExternalWorkload>,
    pub slices: Vec<EndpointSlice>,
}

/// The writer's caches.
#[derive(Debug)]
pub struct WriterState {
    services: BTreeMap<String, Service>,
    /// By namespace, then name.
    workloads: BTreeMap<String, BTreeMap<String, ExternalWorkload>>,
    /// Our slices by Service key, then slice name.
    slices: BTreeMap<String, BTreeMap<String, EndpointSlice>>,
    /// The Service key each of our slices (by `namespace/name`) is filed under.
    slice_owner: BTreeMap<String, String>,
    queue: Arc<WorkQueue>,
    leading: Arc<AtomicBool>,
}

fn key(namespace: Option<&str>, name: &str) -> String {
    format!("{}/{name}", namespace.unwrap_or_default())
}

fn object_key(k: &ObjectKey) -> String {
    key(k.namespace.as_deref(), &k.name)
}

fn svc_key_of_slice(slice: &EndpointSlice) -> Option<String> {
    let svc = slice.metadata.labels.as_ref()?.get(SERVICE_NAME)?;
    Some(key(slice.metadata.namespace.as_deref(), svc))
}

impl WriterState {
    pub fn new(queue: Arc<WorkQueue>, leading: Arc<AtomicBool>) -> Self {
        Self {
            services: BTreeMap::new(),
            workloads: BTreeMap::new(),
            slices: BTreeMap::new(),
            slice_owner: BTreeMap::new(),
            queue,
            leading,
        }
    }

    fn enqueue(&self, svc_key: &str) {
        if !self.leading.load(Ordering::Acquire) {
            return;
        }
        if svc_key.split('/').next() == Some(SKIPPED_NAMESPACE) {
            return;
        }
        self.queue.add(svc_key);
    }

    /// Queues every known Service (on becoming leader).
    pub fn enqueue_all(&self) {
        for k in self.services.keys() {
            self.enqueue(k);
        }
    }

    /// The inputs for reconciling `svc_key`.
    pub fn inputs(&self, svc_key: &str) -> Inputs {
        let namespace = svc_key.split('/').next().unwrap_or_default();
        Inputs {
            service: self.services.get(svc_key).cloned(),
            workloads: self
                .workloads
                .get(namespace)
                .map(|ws| ws.values().cloned().collect())
                .unwrap_or_default(),
            slices: self
                .slices
                .get(svc_key)
                .map(|s| s.values().cloned().collect())
                .unwrap_or_default(),
        }
    }

    /// Services of `namespace` selecting a workload with `labels`.
    fn selecting(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
    ) -> BTreeSet<String> {
        reconcile::selecting(self.services.values(), namespace, labels)
    }

    fn remove_slice(&mut self, slice_key: &str) -> Option<String> {
        let owner = self.slice_owner.remove(slice_key)?;
        let name = slice_key.split_once('/').map_or(slice_key, |(_, n)| n);
        if let Some(slices) = self.slices.get_mut(&owner) {
            slices.remove(name);
            if slices.is_empty() {
                self.slices.remove(&owner);
            }
        }
        Some(owner)
    }
}

/// Whether a change of a workload can change its endpoints or the
/// Services selecting it (else it is not worth a reconciliation).
fn relevant_change(old: &ExternalWorkload, new: &ExternalWorkload) -> bool {
    old.metadata.labels != new.metadata.labels
        || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
        || reconcile::is_ready(old) != reconcile::is_ready(new)
        || old.spec.workload_ips != new.spec.workload_ips
        || old.spec.ports != new.spec.ports
        || old.metadata.uid != new.metadata.uid
}

impl Index<Service> for WriterState {
    fn apply(&mut self, svc: Service) {
        let Some(name) = svc.metadata.name.as_deref() else {
            return;
        };
        let k = key(svc.metadata.namespace.as_deref(), name);
        self.services.insert(k.clone(), svc);
        self.enqueue(&k);
    }

    fn delete(&mut self, obj: ObjectKey) {
        let k = object_key(&obj);
        self.services.remove(&k);
        self.enqueue(&k);
    }
}

impl Index<ExternalWorkload> for WriterState {
    fn apply(&mut self, ew: ExternalWorkload) {
        let (Some(ns), Some(name)) = (ew.metadata.namespace.clone(), ew.metadata.name.clone())
        else {
            return;
        };
        let old = self
            .workloads
            .get(&ns)
            .and_then(|ws| ws.get(&name))
            .cloned();
        let mut touched = self.selecting(&ns, ew.metadata.labels.as_ref());
        match &old {
            Some(old) if !relevant_change(old, &ew) => touched.clear(),
            Some(old) => touched.extend(self.selecting(&ns, old.metadata.labels.as_ref())),
            None => {}
        }
        self.workloads.entry(ns).or_default().insert(name, ew);
        for k in touched {
            self.enqueue(&k);
        }
    }

    fn delete(&mut self, obj: ObjectKey) {
        let Some(ns) = obj.namespace.as_deref() else {
            return;
        };
        let old = self
            .workloads
            .get_mut(ns)
            .and_then(|ws| ws.remove(&obj.name));
        if self.workloads.get(ns).is_some_and(BTreeMap::is_empty) {
            self.workloads.remove(ns);
        }
        if let Some(old) = old {
            for k in self.selecting(ns, old.metadata.labels.as_ref()) {
                self.enqueue(&k);
            }
        }
    }
}

impl Index<EndpointSlice> for WriterState {
    fn apply(&mut self, slice: EndpointSlice) {
        let Some(name) = slice.metadata.name.clone() else {
            return;
        };
        let slice_key = key(slice.metadata.namespace.as_deref(), &name);
        let previous = self.remove_slice(&slice_key);
        let current = managed_by_us(&slice)
            .then(|| svc_key_of_slice(&slice))
            .flatten();
        if let Some(owner) = &current {
            self.slice_owner.insert(slice_key, owner.clone());
            self.slices
                .entry(owner.clone())
                .or_default()
                .insert(name, slice);
        }
        // Ours, or ours until now (relabelled or handed to another manager).
        for k in previous.iter().chain(&current).collect::<BTreeSet<_>>() {
            self.enqueue(k);
        }
    }

    fn delete(&mut self, obj: ObjectKey) {
        if let Some(owner) = self.remove_slice(&object_key(&obj)) {
            self.enqueue(&owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_api::labels::ENDPOINT_SLICE_MANAGED_BY;
    use serde_json::json;

    use super::*;
    use crate::external_workloads::{MANAGED_BY, queue::QueueMetrics};

    fn state(leading: bool) -> (WriterState, Arc<WorkQueue>) {
        let queue = WorkQueue::new(QueueMetrics::default());
        let state = WriterState::new(queue.clone(), Arc::new(AtomicBool::new(leading)));
        (state, queue)
    }

    fn svc(name: &str, app: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
            "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}
        }))
        .expect("service")
    }

    fn ew(name: &str, app: &str, ip: &str) -> ExternalWorkload {
        serde_json::from_value(json!({
            "apiVersion": "workload.linkerd.io/v1beta1", "kind": "ExternalWorkload",
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}},
            "spec": {"meshTLS": {"identity": "id", "serverName": "sn"}, "workloadIPs": [{"ip": ip}]}
        }))
        .expect("workload")
    }

    fn drain(queue: &WorkQueue) -> Vec<String> {
        let mut keys = Vec::new();
        while let Some(k) = queue.try_next() {
            queue.done(&k);
            keys.push(k);
        }
        keys
    }

    #[test]
    fn a_follower_queues_nothing() {
        let (mut state, queue) = state(false);
        state.apply(svc("web", "web"));
        state.apply(ew("vm", "web", "192.0.2.1"));
        assert!(queue.is_empty());
        assert_eq!(state.inputs("ns/web").workloads.len(), 1);
    }

    #[test]
    fn workload_events_queue_the_services_selecting_it() {
        let (mut state, queue) = state(true);
        state.apply(svc("web", "web"));
        state.apply(svc("api", "api"));
        drain(&queue);
        state.apply(ew("vm", "web", "192.0.2.1"));
        assert_eq!(drain(&queue), ["ns/web"]);
        // Unchanged as far as endpoints go: nothing.
        let mut same = ew("vm", "web", "192.0.2.1");
        same.metadata.resource_version = Some("2".into());
        state.apply(same);
        assert!(drain(&queue).is_empty());
        // Relabelled: the Service it left and the one it joined.
        state.apply(ew("vm", "api", "192.0.2.1"));
        let mut keys = drain(&queue);
        keys.sort();
        assert_eq!(keys, ["ns/api", "ns/web"]);
        Index::<ExternalWorkload>::delete(&mut state, ObjectKey::new(Some("ns"), "vm"));
        assert_eq!(drain(&queue), ["ns/api"]);
    }

    #[test]
    fn only_our_slices_are_kept_and_queue_their_service() {
        let (mut state, queue) = state(true);
        let slice = |name: &str, manager: &str| -> EndpointSlice {
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "labels": {
                    SERVICE_NAME: "web", ENDPOINT_SLICE_MANAGED_BY: manager}},
                "addressType": "IPv4", "endpoints": []
            }))
            .expect("slice")
        };
        state.apply(slice("kube", "endpointslice-controller.k8s.io"));
        assert!(queue.is_empty());
        assert!(state.inputs("ns/web").slices.is_empty());
        state.apply(slice("ours", MANAGED_BY));
        assert_eq!(drain(&queue), ["ns/web"]);
        assert_eq!(state.inputs("ns/web").slices.len(), 1);
        // Handed to another manager: forgotten, and the Service re-checked.
        state.apply(slice("ours", "someone-else"));
        assert_eq!(drain(&queue), ["ns/web"]);
        assert!(state.inputs("ns/web").slices.is_empty());
    }

    #[test]
    fn kube_system_is_left_alone() {
        let (mut state, queue) = state(true);
        let mut dns = svc("kube-dns", "dns");
        dns.metadata.namespace = Some("kube-system".into());
        state.apply(dns);
        assert!(queue.is_empty());
    }
}
