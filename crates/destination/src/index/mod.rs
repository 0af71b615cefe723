//! The destination's view of the cluster for `Get`: Services, their
//! EndpointSlices, Pods, Node zones and ReplicaSet/Job owners, plus the
//! publishers of the targets that have subscribers.
//!
//! Watch events are applied synchronously (`k8s_index::Index`). Each event
//! recomputes only the publishers it affects: a Service or slice event its
//! Service; a Pod event the Services whose slices reference the pod; a Node
//! or owner change every publisher (rare). Nothing is computed for Services
//! without subscribers.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    net::IpAddr,
    sync::Arc,
};

use k8s_api::service_profile::ServiceProfile;

use k8s_index::{Index, ObjectKey};
use k8s_openapi::api::{
    apps::v1::ReplicaSet, batch::v1::Job, core::v1::Node, core::v1::Pod, core::v1::Service,
    discovery::v1::EndpointSlice,
};
use kube::core::PartialObjectMeta;
use tokio::sync::watch;

pub mod endpoints;
pub mod profiles;

use crate::{
    config::TranslatorConfig,
    core::{
        FilterKey, ServiceId,
        endpoint::{OwnerRef, ParentKind},
    },
    k8s::{
        endpoints::{
            Lookups, internal_traffic_policy_local, set_labels, slice_pods, slice_service_name,
            translate_endpoints,
        },
        pods::{namespaced_name, node_topology_zone, pod_ips, pod_key, sole_owner},
        services::{cluster_ips, is_external_name, service_key},
    },
    metrics::{DestinationMetrics, GroupLabels},
    proto::profile::ProfileState,
};
use endpoints::{GroupContext, GroupState, PortInputs, PortPublisher};
use profiles::ProfileKey;

/// (namespace, name) of a pod.
pub(crate) type PodKey = (String, String);

/// Why a subscription is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubscribeError {
    #[error("{0} is an ExternalName service; it has no endpoints to discover")]
    ExternalName(ServiceId),
}

/// The destination's index.
pub struct EndpointsIndex {
    config: Arc<TranslatorConfig>,
    metrics: DestinationMetrics,
    cluster: String,
    services: HashMap<ServiceId, Arc<Service>>,
    /// Slices by Service, then by slice name.
    slices: HashMap<ServiceId, BTreeMap<String, Arc<EndpointSlice>>>,
    /// The Service each slice belongs to, by (namespace, slice name).
    slice_service: HashMap<PodKey, ServiceId>,
    pods: HashMap<PodKey, Arc<Pod>>,
    /// Services whose slices reference a pod, with reference counts.
    pod_services: HashMap<PodKey, HashMap<ServiceId, u32>>,
    node_zones: HashMap<String, String>,
    owners: HashMap<(ParentKind, String, String), OwnerRef>,
    publishers: HashMap<ServiceId, HashMap<u16, PortPublisher>>,
    /// ServiceProfiles by (namespace, name).
    pub(crate) service_profiles: HashMap<PodKey, Arc<ServiceProfile>>,
    pub(crate) profile_publishers: HashMap<ProfileKey, watch::Sender<Arc<ProfileState>>>,
    pods_by_ip: HashMap<IpAddr, HashSet<PodKey>>,
    cluster_ips: HashMap<IpAddr, HashSet<ServiceId>>,
    /// Ports that Server resources make opaque, by pod (from the policy controller).
    server_opaque: HashMap<PodKey, BTreeSet<u16>>,
}

impl EndpointsIndex {
    pub fn new(config: Arc<TranslatorConfig>, metrics: DestinationMetrics) -> Self {
        Self {
            config,
            metrics,
            cluster: "local".to_string(),
            services: HashMap::new(),
            slices: HashMap::new(),
            slice_service: HashMap::new(),
            pods: HashMap::new(),
            pod_services: HashMap::new(),
            node_zones: HashMap::new(),
            owners: HashMap::new(),
            publishers: HashMap::new(),
            service_profiles: HashMap::new(),
            profile_publishers: HashMap::new(),
            pods_by_ip: HashMap::new(),
            cluster_ips: HashMap::new(),
            server_opaque: HashMap::new(),
        }
    }

    /// Applies the policy controller's opaque ports: a snapshot (`reset`,
    /// replacing everything known) or changed pods. Every endpoint of an
    /// affected pod is re-sent.
    pub fn apply_server_opaque(&mut self, reset: bool, pods: Vec<crate::policy_link::PodPorts>) {
        let mut affected: HashSet<PodKey> = HashSet::new();
        if reset {
            let mut next: HashMap<PodKey, BTreeSet<u16>> = HashMap::new();
            for (key, ports) in pods {
                if !ports.is_empty() {
                    next.insert(key, ports);
                }
            }
            for (key, ports) in &self.server_opaque {
                if next.get(key) != Some(ports) {
                    affected.insert(key.clone());
                }
            }
            for (key, ports) in &next {
                if self.server_opaque.get(key) != Some(ports) {
                    affected.insert(key.clone());
                }
            }
            self.server_opaque = next;
        } else {
            for (key, ports) in pods {
                let changed = if ports.is_empty() {
                    self.server_opaque.remove(&key).is_some()
                } else {
                    self.server_opaque.insert(key.clone(), ports.clone()) != Some(ports)
                };
                if changed {
                    affected.insert(key);
                }
            }
        }
        for key in affected {
            self.refresh_pod(&key);
            let ips = self
                .pods
                .get(&key)
                .map(|pod| pod_ips(pod))
                .unwrap_or_default();
            self.refresh_endpoint_profiles(&ips);
        }
    }

    /// Whether a Server makes `port` of this pod opaque.
    pub(crate) fn server_opaque(&self, pod: &Pod, port: u16) -> bool {
        pod_key(pod)
            .and_then(|key| self.server_opaque.get(&key))
            .is_some_and(|ports| ports.contains(&port))
    }

    /// The slices of a Service.
    pub(crate) fn service_slices(
        &self,
        service: &ServiceId,
    ) -> impl Iterator<Item = &EndpointSlice> {
        self.slices
            .get(service)
            .into_iter()
            .flat_map(|slices| slices.values().map(Arc::as_ref))
    }

    /// Services whose ClusterIPs include `ip`.
    pub(crate) fn services_by_cluster_ip(&self, ip: IpAddr) -> Vec<ServiceId> {
        let mut services: Vec<ServiceId> = self
            .cluster_ips
            .get(&ip)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        services.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        services
    }

    /// Keys of the pods whose pod or host IP is `ip`.
    pub(crate) fn pod_keys_at(&self, ip: IpAddr) -> impl Iterator<Item = (&str, &str)> {
        self.pods_by_ip
            .get(&ip)
            .into_iter()
            .flatten()
            .map(|(ns, name)| (ns.as_str(), name.as_str()))
    }

    /// Every cached pod.
    pub(crate) fn pods_iter(&self) -> impl Iterator<Item = &Arc<Pod>> {
        self.pods.values()
    }

    /// The sole owner of a ReplicaSet or Job.
    pub(crate) fn owner_of(&self, kind: ParentKind, ns: &str, name: &str) -> Option<OwnerRef> {
        self.owners
            .get(&(kind, ns.to_string(), name.to_string()))
            .cloned()
    }

    fn index_pod_ips(&mut self, key: &PodKey, pod: Option<&Pod>, add: bool) -> HashSet<IpAddr> {
        let ips = pod.map(pod_ips).unwrap_or_default();
        for ip in &ips {
            if add {
                self.pods_by_ip.entry(*ip).or_default().insert(key.clone());
            } else if let Some(keys) = self.pods_by_ip.get_mut(ip) {
                keys.remove(key);
                if keys.is_empty() {
                    self.pods_by_ip.remove(ip);
                }
            }
        }
        ips
    }

    /// Stores a pod; returns the IPs whose endpoint profiles may change.
    fn store_pod(&mut self, key: PodKey, pod: Option<Pod>) -> HashSet<IpAddr> {
        let old = self.pods.remove(&key);
        let mut ips = self.index_pod_ips(&key, old.as_deref(), false);
        if let Some(pod) = pod {
            ips.extend(self.index_pod_ips(&key, Some(&pod), true));
            self.pods.insert(key, Arc::new(pod));
        }
        ips
    }

    fn index_cluster_ips(&mut self, id: &ServiceId, svc: Option<&Service>, add: bool) {
        let ips = svc.map(cluster_ips).unwrap_or_default();
        for ip in ips {
            if add {
                self.cluster_ips.entry(ip).or_default().insert(id.clone());
            } else if let Some(ids) = self.cluster_ips.get_mut(&ip) {
                ids.remove(id);
                if ids.is_empty() {
                    self.cluster_ips.remove(&ip);
                }
            }
        }
    }

    /// The translator configuration.
    pub fn config(&self) -> &TranslatorConfig {
        &self.config
    }

    /// The Service, if cached.
    pub fn service(&self, id: &ServiceId) -> Option<&Arc<Service>> {
        self.services.get(id)
    }

    /// A pod, if cached.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Arc<Pod>> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    /// The zone of a node, if known.
    pub fn node_zone(&self, node: &str) -> Option<&str> {
        self.node_zones.get(node).map(String::as_str)
    }

    /// Subscribes to the group of `key` on `service:port`.
    pub fn subscribe(
        &mut self,
        service: &ServiceId,
        port: u16,
        key: FilterKey,
    ) -> Result<watch::Receiver<Arc<GroupState>>, SubscribeError> {
        if self
            .services
            .get(service)
            .is_some_and(|svc| is_external_name(svc))
        {
            return Err(SubscribeError::ExternalName(service.clone()));
        }
        let labels = GroupLabels {
            cluster: self.cluster.clone(),
            namespace: service.namespace.clone(),
            service: service.name.clone(),
            port: port.to_string(),
            hostname: key.hostname.clone(),
            nodename: key.node_name.clone(),
        };
        let is_new = !self
            .publishers
            .get(service)
            .is_some_and(|ports| ports.contains_key(&port));
        let inputs = is_new.then(|| self.port_inputs(service, port));
        let cx_config = self.config.clone();
        let zones = &self.node_zones;
        let node_zone = |node: &str| zones.get(node).cloned();
        let cx = GroupContext {
            config: &cx_config,
            node_zone: &node_zone,
            metrics: &self.metrics,
        };
        let publisher = self
            .publishers
            .entry(service.clone())
            .or_default()
            .entry(port)
            .or_default();
        if let Some(inputs) = inputs {
            publisher.update(inputs, &cx);
        }
        Ok(publisher.subscribe(key, labels, &cx))
    }

    /// Called after a stream dropped its receiver: drops empty groups and publishers.
    pub fn release(&mut self, service: &ServiceId, port: u16, key: &FilterKey) {
        let Some(ports) = self.publishers.get_mut(service) else {
            return;
        };
        if let Some(publisher) = ports.get_mut(&port)
            && publisher.release(key, &self.metrics)
        {
            ports.remove(&port);
        }
        if ports.is_empty() {
            self.publishers.remove(service);
        }
    }

    /// Number of (service, port) publishers (for tests and metrics).
    pub fn publisher_count(&self) -> usize {
        self.publishers.values().map(HashMap::len).sum()
    }

    /// Number of filter groups across all publishers.
    pub fn group_count(&self) -> usize {
        self.publishers
            .values()
            .flat_map(HashMap::values)
            .map(PortPublisher::group_count)
            .sum()
    }

    fn port_inputs(&self, service: &ServiceId, port: u16) -> PortInputs {
        let Some(svc) = self.services.get(service) else {
            return PortInputs::default();
        };
        let no_slices = BTreeMap::new();
        let slices = self.slices.get(service).unwrap_or(&no_slices);
        let pod =
            |ns: &str, name: &str| self.pods.get(&(ns.to_string(), name.to_string())).cloned();
        let owner = |kind: ParentKind, ns: &str, name: &str| {
            self.owners
                .get(&(kind, ns.to_string(), name.to_string()))
                .cloned()
        };
        let server_opaque = |pod: &Pod, port: u16| self.server_opaque(pod, port);
        let lookups = Lookups {
            pod: &pod,
            owner: &owner,
            server_opaque: Some(&server_opaque),
        };
        let endpoints = translate_endpoints(
            service,
            Some(svc),
            port,
            slices.values().map(Arc::as_ref),
            &lookups,
        );
        PortInputs {
            endpoints: Some(endpoints),
            labels: set_labels(service, slices.values().map(Arc::as_ref)),
            local_traffic_policy: internal_traffic_policy_local(svc),
        }
    }

    /// Recomputes every publisher of `service`.
    fn refresh(&mut self, service: &ServiceId) {
        let Some(ports) = self.publishers.get(service) else {
            return;
        };
        let updates: Vec<(u16, PortInputs)> = ports
            .keys()
            .map(|port| (*port, self.port_inputs(service, *port)))
            .collect();
        let config = self.config.clone();
        let zones = &self.node_zones;
        let node_zone = |node: &str| zones.get(node).cloned();
        let cx = GroupContext {
            config: &config,
            node_zone: &node_zone,
            metrics: &self.metrics,
        };
        if let Some(ports) = self.publishers.get_mut(service) {
            for (port, inputs) in updates {
                if let Some(publisher) = ports.get_mut(&port) {
                    publisher.update(inputs, &cx);
                }
            }
        }
    }

    fn refresh_all(&mut self) {
        let services: Vec<ServiceId> = self.publishers.keys().cloned().collect();
        for service in services {
            self.refresh(&service);
        }
    }

    fn refresh_pod(&mut self, key: &PodKey) {
        let services: Vec<ServiceId> = self
            .pod_services
            .get(key)
            .map(|s| s.keys().cloned().collect())
            .unwrap_or_default();
        for service in services {
            self.refresh(&service);
        }
    }

    fn track_slice_pods(&mut self, service: &ServiceId, slice: &EndpointSlice, add: bool) {
        for pod in slice_pods(slice) {
            let entry = self.pod_services.entry(pod.clone()).or_default();
            let count = entry.entry(service.clone()).or_insert(0);
            if add {
                *count += 1;
            } else {
                *count = count.saturating_sub(1);
                if *count == 0 {
                    entry.remove(service);
                }
                if entry.is_empty() {
                    self.pod_services.remove(&pod);
                }
            }
        }
    }

    /// Removes a slice from the index; returns its Service.
    fn remove_slice(&mut self, ns: &str, name: &str) -> Option<ServiceId> {
        let service = self
            .slice_service
            .remove(&(ns.to_string(), name.to_string()))?;
        let removed = self
            .slices
            .get_mut(&service)
            .and_then(|slices| slices.remove(name));
        if self.slices.get(&service).is_some_and(BTreeMap::is_empty) {
            self.slices.remove(&service);
        }
        if let Some(slice) = removed {
            self.track_slice_pods(&service, &slice, false);
        }
        Some(service)
    }
}

fn strip<K: kube::Resource>(obj: &mut K) {
    // managedFields are large and never read.
    obj.meta_mut().managed_fields = None;
}

fn service_id(namespace: Option<&str>, name: &str) -> ServiceId {
    ServiceId {
        namespace: namespace.unwrap_or_default().to_string(),
        name: name.to_string(),
    }
}

impl Index<Service> for EndpointsIndex {
    fn apply(&mut self, mut svc: Service) {
        strip(&mut svc);
        let Some(id) = service_key(&svc) else {
            return;
        };
        let old = self.services.remove(&id);
        self.index_cluster_ips(&id, old.as_deref(), false);
        self.index_cluster_ips(&id, Some(&svc), true);
        self.services.insert(id.clone(), Arc::new(svc));
        self.refresh(&id);
        self.refresh_service_profiles(&id);
    }

    fn delete(&mut self, key: ObjectKey) {
        let id = service_id(key.namespace.as_deref(), &key.name);
        let old = self.services.remove(&id);
        self.index_cluster_ips(&id, old.as_deref(), false);
        self.refresh(&id);
        self.refresh_service_profiles(&id);
    }
}

impl Index<EndpointSlice> for EndpointsIndex {
    fn apply(&mut self, mut slice: EndpointSlice) {
        strip(&mut slice);
        let Some((ns, name)) = namespaced_name(&slice.metadata) else {
            return;
        };
        let previous = self.remove_slice(&ns, &name);
        let service = slice_service_name(&slice).map(|svc| service_id(Some(&ns), svc));
        if let Some(service) = &service {
            self.track_slice_pods(service, &slice, true);
            self.slice_service
                .insert((ns.clone(), name.clone()), service.clone());
            self.slices
                .entry(service.clone())
                .or_default()
                .insert(name, Arc::new(slice));
            self.refresh(service);
        }
        if let Some(previous) = previous.filter(|p| Some(p) != service.as_ref()) {
            self.refresh(&previous);
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        let ns = key.namespace.unwrap_or_default();
        if let Some(service) = self.remove_slice(&ns, &key.name) {
            self.refresh(&service);
        }
    }
}

impl Index<Pod> for EndpointsIndex {
    fn apply(&mut self, mut pod: Pod) {
        strip(&mut pod);
        let Some(key) = pod_key(&pod) else {
            return;
        };
        let ips = self.store_pod(key.clone(), Some(pod));
        self.refresh_pod(&key);
        self.refresh_endpoint_profiles(&ips);
    }

    fn delete(&mut self, key: ObjectKey) {
        let key = (key.namespace.unwrap_or_default(), key.name);
        if self.pods.contains_key(&key) {
            let ips = self.store_pod(key.clone(), None);
            self.refresh_pod(&key);
            self.refresh_endpoint_profiles(&ips);
        }
    }

    fn reset(&mut self, pods: Vec<Pod>, removed: Vec<ObjectKey>) {
        // Apply the whole list, then recompute each publisher once.
        let mut ips = HashSet::new();
        for key in removed {
            ips.extend(self.store_pod((key.namespace.unwrap_or_default(), key.name), None));
        }
        for mut pod in pods {
            strip(&mut pod);
            if let Some(key) = pod_key(&pod) {
                ips.extend(self.store_pod(key, Some(pod)));
            }
        }
        self.refresh_endpoint_profiles(&ips);
        self.refresh_all();
    }
}

impl Index<ServiceProfile> for EndpointsIndex {
    fn apply(&mut self, mut profile: ServiceProfile) {
        strip(&mut profile);
        let Some((ns, name)) = namespaced_name(&profile.metadata) else {
            return;
        };
        self.service_profiles
            .insert((ns, name.clone()), Arc::new(profile));
        self.refresh_profiles_named(&name);
    }

    fn delete(&mut self, key: ObjectKey) {
        let ns = key.namespace.unwrap_or_default();
        if self
            .service_profiles
            .remove(&(ns, key.name.clone()))
            .is_some()
        {
            self.refresh_profiles_named(&key.name);
        }
    }
}

impl Index<PartialObjectMeta<Node>> for EndpointsIndex {
    fn apply(&mut self, node: PartialObjectMeta<Node>) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        let zone = node_topology_zone(&node.metadata).map(str::to_string);
        let changed = match zone {
            Some(zone) => self.node_zones.insert(name, zone.clone()) != Some(zone),
            None => self.node_zones.remove(&name).is_some(),
        };
        if changed {
            self.refresh_all();
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        if self.node_zones.remove(&key.name).is_some() {
            self.refresh_all();
        }
    }
}

fn apply_owner<K>(index: &mut EndpointsIndex, kind: ParentKind, obj: &PartialObjectMeta<K>) {
    let Some((ns, name)) = namespaced_name(&obj.metadata) else {
        return;
    };
    let key_ns = ns.clone();
    let key = (kind, ns, name);
    let changed = match sole_owner(&obj.metadata) {
        Some(owner) => index.owners.insert(key, owner.clone()) != Some(owner),
        None => index.owners.remove(&key).is_some(),
    };
    if changed {
        // Only pods in the parent's namespace can be owned by it.
        let services: Vec<ServiceId> = index
            .publishers
            .keys()
            .filter(|s| s.namespace == key_ns)
            .cloned()
            .collect();
        for service in services {
            index.refresh(&service);
        }
    }
}

fn delete_owner(index: &mut EndpointsIndex, kind: ParentKind, key: ObjectKey) {
    let key = (kind, key.namespace.unwrap_or_default(), key.name);
    // A deleted parent keeps its pods' labels until the pods change; no refresh.
    index.owners.remove(&key);
}

impl Index<PartialObjectMeta<ReplicaSet>> for EndpointsIndex {
    fn apply(&mut self, rs: PartialObjectMeta<ReplicaSet>) {
        apply_owner(self, ParentKind::ReplicaSet, &rs);
    }

    fn delete(&mut self, key: ObjectKey) {
        delete_owner(self, ParentKind::ReplicaSet, key);
    }
}

impl Index<PartialObjectMeta<Job>> for EndpointsIndex {
    fn apply(&mut self, job: PartialObjectMeta<Job>) {
        apply_owner(self, ParentKind::Job, &job);
    }

    fn delete(&mut self, key: ObjectKey) {
        delete_owner(self, ParentKind::Job, key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::LABEL_SERVICE_NAME as SERVICE_NAME_LABEL;
    use endpoints::StreamCursor;
    use linkerd2_proxy_api::destination::{Update, update};
    use serde_json::json;

    fn index() -> EndpointsIndex {
        EndpointsIndex::new(
            Arc::new(TranslatorConfig::default()),
            DestinationMetrics::default(),
        )
    }

    fn svc_id() -> ServiceId {
        ServiceId {
            namespace: "ns".into(),
            name: "web".into(),
        }
    }

    fn service() -> Service {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web"},
            "spec": {"ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
        }))
        .expect("service")
    }

    fn pod(name: &str, ip: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": name, "labels": {"app": "web"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "app"}]},
            "status": {"phase": "Running", "podIP": ip}
        }))
        .expect("pod")
    }

    fn slice(pods: &[(&str, &str, bool)]) -> EndpointSlice {
        let endpoints: Vec<_> = pods
            .iter()
            .map(|(name, ip, ready)| {
                json!({
                    "addresses": [ip],
                    "conditions": {"ready": ready},
                    "targetRef": {"kind": "Pod", "namespace": "ns", "name": name}
                })
            })
            .collect();
        serde_json::from_value(json!({
            "metadata": {"namespace": "ns", "name": "web-abc",
                         "labels": {SERVICE_NAME_LABEL: "web"}},
            "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": endpoints
        }))
        .expect("slice")
    }

    fn addrs(state: &GroupState) -> Vec<String> {
        state
            .snapshot
            .entries()
            .map(|e| e.endpoint.addr.to_string())
            .collect()
    }

    #[test]
    fn publishes_changes_to_subscribed_targets_only() {
        let mut idx = index();
        let mut rx = idx
            .subscribe(&svc_id(), 80, FilterKey::default())
            .expect("subscribe");
        assert!(!rx.borrow_and_update().snapshot.exists());

        idx.apply(service());
        assert!(rx.has_changed().expect("open"));
        assert!(rx.borrow_and_update().snapshot.exists());

        idx.apply(pod("web-0", "10.0.0.1"));
        idx.apply(pod("web-1", "10.0.0.2"));
        assert!(!rx.has_changed().expect("open"), "pods not yet in a slice");
        idx.apply(slice(&[
            ("web-0", "10.0.0.1", true),
            ("web-1", "10.0.0.2", false),
        ]));
        assert_eq!(addrs(&rx.borrow_and_update()), ["10.0.0.1:8080"]);

        // An unrelated pod publishes nothing; a referenced pod's edit does.
        idx.apply(pod("other", "10.0.0.9"));
        assert!(!rx.has_changed().expect("open"));
        let mut relabeled = pod("web-0", "10.0.0.1");
        relabeled.metadata.labels = Some(
            [
                ("app".to_string(), "web".to_string()),
                ("pod-template-hash".to_string(), "abc".to_string()),
            ]
            .into(),
        );
        idx.apply(relabeled);
        assert!(
            rx.has_changed().expect("open"),
            "a label that feeds a response"
        );
        let state = rx.borrow_and_update().clone();
        assert_eq!(state.step.len(), 1, "one re-Add: {:?}", state.step);

        Index::<Service>::delete(&mut idx, ObjectKey::new(Some("ns"), "web"));
        assert!(!rx.borrow_and_update().snapshot.exists());
    }

    #[test]
    fn groups_are_shared_and_dropped_with_their_last_subscriber() {
        let mut idx = index();
        idx.apply(service());
        let key = FilterKey::default();
        let a = idx.subscribe(&svc_id(), 80, key.clone()).expect("a");
        let b = idx.subscribe(&svc_id(), 80, key.clone()).expect("b");
        let other = FilterKey {
            node_name: "node-1".into(),
            ..FilterKey::default()
        };
        let c = idx.subscribe(&svc_id(), 80, other.clone()).expect("c");
        assert_eq!((idx.publisher_count(), idx.group_count()), (1, 2));
        drop(a);
        idx.release(&svc_id(), 80, &key);
        assert_eq!(idx.group_count(), 2, "b still uses the group");
        drop(b);
        idx.release(&svc_id(), 80, &key);
        assert_eq!(idx.group_count(), 1);
        drop(c);
        idx.release(&svc_id(), 80, &other);
        assert_eq!((idx.publisher_count(), idx.group_count()), (0, 0));
    }

    #[test]
    fn external_name_services_are_refused() {
        let mut idx = index();
        let mut svc = service();
        if let Some(spec) = svc.spec.as_mut() {
            spec.type_ = Some("ExternalName".into());
        }
        idx.apply(svc);
        assert_eq!(
            idx.subscribe(&svc_id(), 80, FilterKey::default()).err(),
            Some(SubscribeError::ExternalName(svc_id()))
        );
    }

    #[test]
    fn a_stream_that_fell_behind_gets_one_diff_to_the_newest_state() {
        let mut idx = index();
        idx.apply(service());
        idx.apply(pod("web-0", "10.0.0.1"));
        idx.apply(pod("web-1", "10.0.0.2"));
        idx.apply(slice(&[("web-0", "10.0.0.1", true)]));
        let mut rx = idx
            .subscribe(&svc_id(), 80, FilterKey::default())
            .expect("rx");
        let mut cursor = StreamCursor::new();
        let decode = |frames: crate::proto::frames::Frames| -> Vec<Update> {
            frames
                .iter()
                .map(|f| grpc_stream::decode_request(f).expect("a valid frame"))
                .collect()
        };
        let (first, _) = cursor.advance(rx.borrow_and_update().clone());
        let first = decode(first);
        assert!(matches!(
            first[..],
            [Update {
                update: Some(update::Update::Add(_))
            }]
        ));

        // Three changes while the stream is not reading…
        idx.apply(slice(&[
            ("web-0", "10.0.0.1", true),
            ("web-1", "10.0.0.2", true),
        ]));
        idx.apply(slice(&[("web-1", "10.0.0.2", true)]));
        idx.apply(slice(&[("web-1", "10.0.0.2", false)]));
        idx.apply(slice(&[("web-1", "10.0.0.2", true)]));
        // …then it catches up in one step: web-0 removed, web-1 added.
        let (updates, coalesced) = cursor.advance(rx.borrow_and_update().clone());
        let updates = decode(updates);
        assert!(coalesced);
        let kinds: Vec<&str> = updates
            .iter()
            .map(|u| match &u.update {
                Some(update::Update::Add(set)) => {
                    assert_eq!(set.addrs.len(), 1);
                    "add"
                }
                Some(update::Update::Remove(set)) => {
                    assert_eq!(set.addrs.len(), 1);
                    "remove"
                }
                _ => "other",
            })
            .collect();
        assert_eq!(kinds, ["add", "remove"]);
        // A stream that keeps up reuses the group's precomputed step.
        idx.apply(slice(&[]));
        let (updates, coalesced) = cursor.advance(rx.borrow_and_update().clone());
        let updates = decode(updates);
        assert!(!coalesced);
        assert_eq!(updates.len(), 1);
        assert!(matches!(
            updates[0].update,
            Some(update::Update::NoEndpoints(ref n)) if n.exists
        ));
    }
}
