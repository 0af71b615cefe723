//! [`ClusterState`]: every object the destination stores, and the reverse
//! indexes that answer "what does this change touch?".
//!
//! Storage only: it publishes nothing and knows no publisher. Every store
//! method returns a [`Touched`] naming the Services and addresses whose
//! published views may have changed; the index hands it to both kinds of
//! publishers ([`super::endpoints`], [`super::profiles`]).

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use k8s_api::{service_profile::ServiceProfile, workload::ExternalWorkload};
use k8s_openapi::api::core::v1::Service;

use crate::{
    config::TranslatorConfig,
    core::{
        OpaquePortsUpdate, ServiceId,
        authority::parse_service_name,
        endpoint::{OwnerRef, ParentKind, WorkloadRef},
        pod::PodFacts,
        slice::SliceFacts,
    },
    k8s::{
        endpoints::slice_workloads,
        external_workloads::{workload_addrs, workload_ips},
        lookups::ClusterLookups,
        services::cluster_ips,
    },
};

/// `(namespace, name)` of a namespaced object.
pub type ObjectName = (String, String);

/// What a stored change may affect: the index recomputes exactly these
/// publishers (and a publisher whose view did not change publishes nothing).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Touched {
    /// Services whose endpoint publishers are recomputed.
    pub services: HashSet<ServiceId>,
    /// Namespaces whose every endpoint publisher is recomputed (an owner changed).
    pub namespaces: HashSet<String>,
    /// Every endpoint publisher is recomputed (a node zone changed, a relist).
    pub all_services: bool,
    /// Services whose `GetProfile` publishers are recomputed.
    pub profile_services: HashSet<ServiceId>,
    /// IPs whose endpoint profiles are recomputed.
    pub profile_ips: HashSet<IpAddr>,
}

impl Touched {
    /// Whether nothing is touched.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Everything the destination knows about the cluster.
pub struct ClusterState {
    /// What the flags decide; shared with the gRPC layer, hence an `Arc`.
    pub(super) config: Arc<TranslatorConfig>,
    /// Services by id. `Arc` because a recomputation borrows them while the
    /// publishers are mutated.
    services: HashMap<ServiceId, Arc<Service>>,
    /// Slices by Service, then by slice name: a Service's slices are read
    /// together and in a stable order (name), so a BTreeMap inside. Their
    /// facts only (`core::slice`), not the objects.
    slices: HashMap<ServiceId, BTreeMap<String, SliceFacts>>,
    /// The Service each slice was filed under, by (namespace, slice name):
    /// a slice event must find (and leave) its previous Service even when
    /// its `kubernetes.io/service-name` label changed or it was deleted.
    slice_service: HashMap<ObjectName, ServiceId>,
    /// Pods by (namespace, name), as the slices' targetRefs name them: the
    /// facts the destination reads, not the objects (`core::pod`). `Arc`
    /// because endpoints share them.
    pods: HashMap<ObjectName, Arc<PodFacts>>,
    /// The one copy of the strings pods repeat (namespaces, nodes, …).
    strings: super::interner::Interner,
    /// ExternalWorkloads by (namespace, name), as the slices' targetRefs
    /// name them.
    external_workloads: HashMap<ObjectName, Arc<ExternalWorkload>>,
    /// The Services whose slices reference a pod or workload, with
    /// reference counts (one can appear in several slices of one Service,
    /// one per family), so that its event recomputes only those Services.
    /// A list, not a map: a pod is in one or a few Services, and a map's
    /// smallest table is four times the size of one entry.
    workload_services: HashMap<WorkloadRef, Vec<(ServiceId, u32)>>,
    /// Zone of each node that has one (`topology.kubernetes.io/zone`); the
    /// only node fact read, so nodes are stored as this map.
    node_zones: HashMap<String, String>,
    /// How many stored pods name each node (`spec.nodeName`): with
    /// `node_zones`, the node names whose answers differ from an unknown
    /// node's (a zone, or pods for `internalTrafficPolicy: Local`). Keyed
    /// by the pods' interned names, so it holds no string of its own.
    pod_nodes: HashMap<Arc<str>, u32>,
    /// Incremented whenever a node name becomes known (its first zone or
    /// its first pod), so that streams of the unknown-node group can look
    /// for their own group again.
    node_epoch: u64,
    /// The sole owner of each ReplicaSet and Job (by kind, namespace, name):
    /// all a pod's owner label needs, from metadata-only watches.
    owners: HashMap<(ParentKind, String, String), OwnerRef>,
    /// ServiceProfiles by (namespace, name); the name is the Service's FQDN,
    /// looked up in the client's namespace first, then the Service's.
    service_profiles: HashMap<ObjectName, Arc<ServiceProfile>>,
    /// Pods by pod and host IP (several: a host IP is shared by every pod
    /// of the node), for `GetProfile` by address. A list, not a set: a pod
    /// IP has one pod (a set's smallest table is four entries), a host IP
    /// at most a node's pods (110 by default).
    pods_by_ip: HashMap<IpAddr, Vec<ObjectName>>,
    /// ExternalWorkloads by each `ip:port` they declare (a set: an address
    /// claimed twice is reported as ambiguous), for `GetProfile` by address.
    external_workloads_by_addr: HashMap<SocketAddr, HashSet<ObjectName>>,
    /// Services by ClusterIP (a set: an IP claimed twice is reported as
    /// ambiguous rather than silently picking one).
    cluster_ips: HashMap<IpAddr, HashSet<ServiceId>>,
    /// Ports that Server resources make opaque, by pod or workload (from
    /// the policy controller); only non-empty sets are stored.
    server_opaque: HashMap<WorkloadRef, BTreeSet<u16>>,
}

impl ClusterState {
    /// An empty cluster.
    pub fn new(config: Arc<TranslatorConfig>) -> Self {
        Self {
            config,
            services: HashMap::new(),
            slices: HashMap::new(),
            slice_service: HashMap::new(),
            pods: HashMap::new(),
            strings: super::interner::Interner::default(),
            external_workloads: HashMap::new(),
            workload_services: HashMap::new(),
            node_zones: HashMap::new(),
            pod_nodes: HashMap::new(),
            node_epoch: 0,
            owners: HashMap::new(),
            service_profiles: HashMap::new(),
            pods_by_ip: HashMap::new(),
            external_workloads_by_addr: HashMap::new(),
            cluster_ips: HashMap::new(),
            server_opaque: HashMap::new(),
        }
    }

    // ---- reads ----

    /// The translator configuration.
    pub fn config(&self) -> &TranslatorConfig {
        &self.config
    }

    /// The Service, if stored.
    pub fn service(&self, id: &ServiceId) -> Option<&Arc<Service>> {
        self.services.get(id)
    }

    /// The slices of a Service, by name.
    pub fn slices_of(&self, service: &ServiceId) -> Option<&BTreeMap<String, SliceFacts>> {
        self.slices.get(service)
    }

    /// The slices of a Service.
    pub fn service_slices(&self, service: &ServiceId) -> impl Iterator<Item = &SliceFacts> {
        self.slices
            .get(service)
            .into_iter()
            .flat_map(|slices| slices.values())
    }

    /// A pod's facts, if stored.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Arc<PodFacts>> {
        self.pods.get(&(namespace.to_string(), name.to_string()))
    }

    /// The zone of a node, if known.
    pub fn node_zone(&self, node: &str) -> Option<&str> {
        self.node_zones.get(node).map(String::as_str)
    }

    /// Whether answers for clients on `node` can differ from those for a
    /// node the index does not know: the node has a zone, or a stored pod
    /// runs on it.
    pub fn knows_node(&self, node: &str) -> bool {
        self.node_zones.contains_key(node) || self.pod_nodes.contains_key(node)
    }

    /// Changes whenever a node name becomes known (see [`Self::knows_node`]).
    pub fn node_epoch(&self) -> u64 {
        self.node_epoch
    }

    /// The sole owner of a ReplicaSet or Job.
    pub fn owner_of(&self, kind: ParentKind, ns: &str, name: &str) -> Option<OwnerRef> {
        self.owners
            .get(&(kind, ns.to_string(), name.to_string()))
            .cloned()
    }

    /// An ExternalWorkload, if stored.
    pub fn external_workload(&self, namespace: &str, name: &str) -> Option<&Arc<ExternalWorkload>> {
        self.external_workloads
            .get(&(namespace.to_string(), name.to_string()))
    }

    /// The ExternalWorkloads declaring `addr` (an IP with a port of theirs).
    pub fn external_workloads_at(&self, addr: SocketAddr) -> Vec<Arc<ExternalWorkload>> {
        self.external_workloads_by_addr
            .get(&addr)
            .into_iter()
            .flatten()
            .filter_map(|(ns, name)| self.external_workload(ns, name).cloned())
            .collect()
    }

    /// Whether a Server makes `port` of this pod or workload opaque.
    pub fn server_opaque(&self, workload: &WorkloadRef, port: u16) -> bool {
        self.server_opaque
            .get(workload)
            .is_some_and(|ports| ports.contains(&port))
    }

    /// The ServiceProfile `name` in `namespace`.
    pub fn service_profile_in(&self, namespace: &str, name: &str) -> Option<Arc<ServiceProfile>> {
        self.service_profiles
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// Services whose ClusterIPs include `ip`, sorted.
    pub fn services_by_cluster_ip(&self, ip: IpAddr) -> Vec<ServiceId> {
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

    /// Pods on the pod network with this IP that are not finished or terminating.
    pub fn pods_at(&self, ip: IpAddr) -> Vec<Arc<PodFacts>> {
        self.pods_by_ip
            .get(&ip)
            .into_iter()
            .flatten()
            .filter_map(|(ns, name)| self.pod(ns, name).cloned())
            .filter(|pod| pod.serves_pod_ip())
            .collect()
    }

    /// A pod exposing `addr` as a host port (the first by namespace and
    /// name, should two claim it). Only the pods of that host IP are read.
    pub fn pod_by_host_port(&self, addr: SocketAddr) -> Option<Arc<PodFacts>> {
        let mut keys: Vec<&ObjectName> = self.pods_by_ip.get(&addr.ip())?.iter().collect();
        keys.sort();
        keys.into_iter()
            .filter_map(|(ns, name)| self.pod(ns, name))
            .find(|pod| pod.exposes_host_port(addr))
            .cloned()
    }

    /// Whether a stored pod has `ip` as its pod or host IP (finished and
    /// host-network pods included).
    pub fn has_pod_with_ip(&self, ip: IpAddr) -> bool {
        self.pods_by_ip.contains_key(&ip)
    }

    // ---- writes; each returns what it touched ----

    /// Replaces the translator configuration (a linked cluster's trust
    /// domain changed): every endpoint publisher is recomputed.
    pub fn set_config(&mut self, config: Arc<TranslatorConfig>) -> Touched {
        self.config = config;
        Touched {
            all_services: true,
            ..Touched::default()
        }
    }

    /// Stores (or replaces) a Service.
    pub fn apply_service(&mut self, id: ServiceId, svc: Service) -> Touched {
        let old = self.services.remove(&id);
        self.index_cluster_ips(&id, old.as_deref(), false);
        self.index_cluster_ips(&id, Some(&svc), true);
        self.services.insert(id.clone(), Arc::new(svc));
        Self::service_touched(id)
    }

    /// Forgets a Service.
    pub fn delete_service(&mut self, id: ServiceId) -> Touched {
        let old = self.services.remove(&id);
        self.index_cluster_ips(&id, old.as_deref(), false);
        Self::service_touched(id)
    }

    fn service_touched(id: ServiceId) -> Touched {
        Touched {
            services: HashSet::from([id.clone()]),
            profile_services: HashSet::from([id]),
            ..Touched::default()
        }
    }

    /// Stores (or replaces) a slice named `(ns, name)`. The same facts
    /// again (a slice rewritten with nothing the index reads changed) touch
    /// nothing.
    pub fn apply_slice(&mut self, ns: String, name: String, slice: SliceFacts) -> Touched {
        let service = slice.service.as_deref().map(|svc| ServiceId {
            namespace: ns.clone(),
            name: svc.to_string(),
        });
        let key = (ns, name);
        let unchanged = service.as_ref().is_some_and(|service| {
            self.slice_service.get(&key) == Some(service)
                && self
                    .slices
                    .get(service)
                    .and_then(|slices| slices.get(&key.1))
                    == Some(&slice)
        });
        if unchanged {
            return Touched::default();
        }
        let (ns, name) = key;
        let mut touched = Touched::default();
        touched.services.extend(self.remove_slice(&ns, &name));
        if let Some(service) = service {
            let slice = self.strings.slice(slice);
            self.track_slice_workloads(&service, &slice, true);
            self.slice_service
                .insert((ns, name.clone()), service.clone());
            self.slices
                .entry(service.clone())
                .or_default()
                .insert(name, slice);
            touched.services.insert(service);
        }
        touched
    }

    /// Forgets a slice.
    pub fn delete_slice(&mut self, ns: &str, name: &str) -> Touched {
        Touched {
            services: self.remove_slice(ns, name).into_iter().collect(),
            ..Touched::default()
        }
    }

    /// Stores (`Some`) or forgets (`None`) a pod's facts. Facts equal to
    /// the stored ones (an update of a field no answer reads, such as a
    /// container's readiness: the slice says that) touch nothing.
    pub fn apply_pod(&mut self, key: ObjectName, pod: Option<PodFacts>) -> Touched {
        let unchanged = match (&pod, self.pods.get(&key)) {
            (None, None) => true,
            (Some(new), Some(old)) => **old == *new,
            _ => false,
        };
        if unchanged {
            return Touched::default();
        }
        let profile_ips = self.store_pod(key.clone(), pod);
        Touched {
            services: self.services_of(&WorkloadRef::Pod(key.0, key.1)),
            profile_ips,
            ..Touched::default()
        }
    }

    /// Applies a relist of the pods: the whole list at once, then every
    /// publisher is recomputed once.
    pub fn reset_pods(
        &mut self,
        pods: Vec<(ObjectName, PodFacts)>,
        removed: Vec<ObjectName>,
    ) -> Touched {
        let mut profile_ips = HashSet::new();
        for key in removed {
            profile_ips.extend(self.store_pod(key, None));
        }
        for (key, pod) in pods {
            profile_ips.extend(self.store_pod(key, Some(pod)));
        }
        Touched {
            all_services: true,
            profile_ips,
            ..Touched::default()
        }
    }

    /// Stores (`Some`) or forgets (`None`) an ExternalWorkload.
    pub fn apply_external_workload(
        &mut self,
        key: ObjectName,
        workload: Option<ExternalWorkload>,
    ) -> Touched {
        if workload.is_none() && !self.external_workloads.contains_key(&key) {
            return Touched::default();
        }
        let profile_ips = self.store_external_workload(key.clone(), workload);
        Touched {
            services: self.services_of(&WorkloadRef::External(key.0, key.1)),
            profile_ips,
            ..Touched::default()
        }
    }

    /// Applies a relist of the ExternalWorkloads, then every publisher is
    /// recomputed once.
    pub fn reset_external_workloads(
        &mut self,
        workloads: Vec<(ObjectName, ExternalWorkload)>,
        removed: Vec<ObjectName>,
    ) -> Touched {
        let mut profile_ips = HashSet::new();
        for key in removed {
            profile_ips.extend(self.store_external_workload(key, None));
        }
        for (key, workload) in workloads {
            profile_ips.extend(self.store_external_workload(key, Some(workload)));
        }
        Touched {
            all_services: true,
            profile_ips,
            ..Touched::default()
        }
    }

    /// Stores a ServiceProfile.
    pub fn apply_service_profile(&mut self, key: ObjectName, profile: ServiceProfile) -> Touched {
        let name = key.1.clone();
        self.service_profiles.insert(key, Arc::new(profile));
        self.profiles_named(&name)
    }

    /// Forgets a ServiceProfile.
    pub fn delete_service_profile(&mut self, key: ObjectName) -> Touched {
        let name = key.1.clone();
        if self.service_profiles.remove(&key).is_some() {
            self.profiles_named(&name)
        } else {
            Touched::default()
        }
    }

    /// The profiles a ServiceProfile named `name` (a Service FQDN) can affect.
    fn profiles_named(&self, name: &str) -> Touched {
        let mut touched = Touched::default();
        if let Ok((service, None)) = parse_service_name(name, &self.config.cluster_domain) {
            touched.profile_services.insert(service);
        }
        touched
    }

    /// Sets (`Some`) or clears (`None`) a node's zone.
    pub fn apply_node_zone(&mut self, node: String, zone: Option<String>) -> Touched {
        if zone.is_some() && !self.knows_node(&node) {
            self.node_epoch += 1;
        }
        let changed = match zone {
            Some(zone) => self.node_zones.insert(node, zone.clone()) != Some(zone),
            None => self.node_zones.remove(&node).is_some(),
        };
        Touched {
            all_services: changed,
            ..Touched::default()
        }
    }

    /// Sets (`Some`) or clears (`None`) the sole owner of a ReplicaSet or Job.
    pub fn apply_owner(
        &mut self,
        kind: ParentKind,
        (ns, name): ObjectName,
        owner: Option<OwnerRef>,
    ) -> Touched {
        let key = (kind, ns.clone(), name);
        let changed = match owner {
            Some(owner) => self.owners.insert(key, owner.clone()) != Some(owner),
            None => self.owners.remove(&key).is_some(),
        };
        let mut touched = Touched::default();
        if changed {
            // Only pods in the parent's namespace can be owned by it.
            touched.namespaces.insert(ns);
        }
        touched
    }

    /// Forgets a ReplicaSet or Job. Its pods keep their labels until they
    /// change, so nothing is touched.
    pub fn delete_owner(&mut self, kind: ParentKind, (ns, name): ObjectName) -> Touched {
        self.owners.remove(&(kind, ns, name));
        Touched::default()
    }

    /// Applies the policy controller's opaque ports: a snapshot (`reset`,
    /// replacing everything known) or changed pods and workloads. Every
    /// endpoint of an affected pod or workload is re-sent.
    pub fn apply_server_opaque(&mut self, update: OpaquePortsUpdate) -> Touched {
        let mut affected: HashSet<WorkloadRef> = HashSet::new();
        if update.reset {
            let mut next: HashMap<WorkloadRef, BTreeSet<u16>> = HashMap::new();
            for (key, ports) in update.workloads {
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
            for (key, ports) in update.workloads {
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
        let mut touched = Touched::default();
        for key in affected {
            touched.services.extend(self.services_of(&key));
            match &key {
                WorkloadRef::Pod(ns, name) => {
                    if let Some(pod) = self.pod(ns, name) {
                        touched.profile_ips.extend(pod.ips());
                    }
                }
                WorkloadRef::External(ns, name) => {
                    if let Some(ew) = self.external_workload(ns, name) {
                        touched.profile_ips.extend(workload_ips(ew));
                    }
                }
            }
        }
        touched
    }

    // ---- reverse indexes ----

    fn services_of(&self, key: &WorkloadRef) -> HashSet<ServiceId> {
        self.workload_services
            .get(key)
            .map(|s| s.iter().map(|(id, _)| id.clone()).collect())
            .unwrap_or_default()
    }

    fn index_pod_ips(
        &mut self,
        key: &ObjectName,
        pod: Option<&PodFacts>,
        add: bool,
    ) -> HashSet<IpAddr> {
        let ips: HashSet<IpAddr> = pod.map(|p| p.ips().collect()).unwrap_or_default();
        for ip in &ips {
            if add {
                let keys = self
                    .pods_by_ip
                    .entry(*ip)
                    .or_insert_with(|| Vec::with_capacity(1));
                if !keys.contains(key) {
                    keys.push(key.clone());
                }
            } else if let Some(keys) = self.pods_by_ip.get_mut(ip) {
                if let Some(i) = keys.iter().position(|k| k == key) {
                    keys.swap_remove(i);
                }
                if keys.is_empty() {
                    self.pods_by_ip.remove(ip);
                }
            }
        }
        ips
    }

    /// Stores a pod; returns the IPs whose endpoint profiles may change.
    fn store_pod(&mut self, key: ObjectName, pod: Option<PodFacts>) -> HashSet<IpAddr> {
        let old = self.pods.remove(&key);
        let mut ips = self.index_pod_ips(&key, old.as_deref(), false);
        let old_node = old.as_ref().and_then(|p| p.node_name.clone());
        let mut new_node = None;
        if let Some(pod) = pod {
            let pod = self.strings.pod(pod);
            ips.extend(self.index_pod_ips(&key, Some(&pod), true));
            new_node = pod.node_name.clone();
            self.pods.insert(key, Arc::new(pod));
        }
        if old_node != new_node {
            self.count_pod_node(old_node, new_node);
        }
        ips
    }

    /// Moves one pod's count from node `old` to node `new`.
    fn count_pod_node(&mut self, old: Option<Arc<str>>, new: Option<Arc<str>>) {
        if let Some(node) = old
            && let Some(count) = self.pod_nodes.get_mut(&node)
        {
            *count -= 1;
            if *count == 0 {
                self.pod_nodes.remove(&node);
            }
        }
        if let Some(node) = new {
            if !self.knows_node(&node) {
                self.node_epoch += 1;
            }
            *self.pod_nodes.entry(node).or_default() += 1;
        }
    }

    /// Stores a workload; returns the IPs whose endpoint profiles may
    /// change (every IP of the old and new versions: an IP matching no
    /// declared port still has a bare endpoint profile).
    fn store_external_workload(
        &mut self,
        key: ObjectName,
        workload: Option<ExternalWorkload>,
    ) -> HashSet<IpAddr> {
        let old = self.external_workloads.remove(&key);
        let mut ips: HashSet<IpAddr> = old
            .as_deref()
            .map(workload_ips)
            .unwrap_or_default()
            .into_iter()
            .collect();
        for addr in old.as_deref().map(workload_addrs).unwrap_or_default() {
            if let Some(keys) = self.external_workloads_by_addr.get_mut(&addr) {
                keys.remove(&key);
                if keys.is_empty() {
                    self.external_workloads_by_addr.remove(&addr);
                }
            }
        }
        if let Some(workload) = workload {
            ips.extend(workload_ips(&workload));
            for addr in workload_addrs(&workload) {
                self.external_workloads_by_addr
                    .entry(addr)
                    .or_default()
                    .insert(key.clone());
            }
            self.external_workloads.insert(key, Arc::new(workload));
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

    fn track_slice_workloads(&mut self, service: &ServiceId, slice: &SliceFacts, add: bool) {
        for workload in slice_workloads(slice) {
            if add {
                let services = self
                    .workload_services
                    .entry(workload)
                    .or_insert_with(|| Vec::with_capacity(1));
                match services.iter_mut().find(|(id, _)| id == service) {
                    Some((_, count)) => *count += 1,
                    None => services.push((service.clone(), 1)),
                }
            } else if let Some(services) = self.workload_services.get_mut(&workload) {
                if let Some(i) = services.iter().position(|(id, _)| id == service) {
                    services[i].1 = services[i].1.saturating_sub(1);
                    if services[i].1 == 0 {
                        services.swap_remove(i);
                    }
                }
                if services.is_empty() {
                    self.workload_services.remove(&workload);
                }
            }
        }
    }

    /// Removes a slice; returns the Service it was filed under.
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
            self.track_slice_workloads(&service, &slice, false);
        }
        Some(service)
    }
}

impl ClusterLookups for ClusterState {
    fn pod(&self, namespace: &str, name: &str) -> Option<Arc<PodFacts>> {
        ClusterState::pod(self, namespace, name).cloned()
    }

    fn owner(&self, kind: ParentKind, namespace: &str, name: &str) -> Option<OwnerRef> {
        self.owner_of(kind, namespace, name)
    }

    fn external_workload(&self, namespace: &str, name: &str) -> Option<Arc<ExternalWorkload>> {
        ClusterState::external_workload(self, namespace, name).cloned()
    }

    fn server_opaque(&self, workload: &WorkloadRef, port: u16) -> bool {
        ClusterState::server_opaque(self, workload, port)
    }

    fn node_zone(&self, node: &str) -> Option<&str> {
        ClusterState::node_zone(self, node)
    }
}
