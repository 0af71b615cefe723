//! The destination's index: [`ClusterState`] (storage) plus the publishers
//! of `Get` ([`EndpointPublishers`]) and of `GetProfile`
//! ([`ProfilePublishers`]), which never see each other.
//!
//! Watch events are applied synchronously (`k8s_index::Index`): the event
//! is stored, the store says what it [`Touched`], and both kinds of
//! publishers recompute only that: a Service or slice event its Service; a
//! Pod or ExternalWorkload event the Services whose slices reference it
//! and the profiles of its IPs; a Node or owner change every (or every namespace's)
//! publisher. Nothing is computed for targets without subscribers.

pub mod audit;
pub mod cluster;
pub mod endpoints;
mod interner;
pub mod profiles;

use std::{collections::HashMap, net::SocketAddr, sync::Arc};

use k8s_api::{service_profile::ServiceProfile, workload::ExternalWorkload};
use k8s_index::{Index, ObjectKey};
use k8s_openapi::api::{
    apps::v1::ReplicaSet, batch::v1::Job, core::v1::Node, core::v1::Pod, core::v1::Service,
    discovery::v1::EndpointSlice,
};
use kube::core::PartialObjectMeta;
use tokio::sync::watch;

pub use cluster::{ClusterState, Touched};
pub use endpoints::{EndpointPublishers, GroupStats, KnownNames, SubscribeError};
pub use profiles::{ProfileKey, ProfileLookupError, ProfilePublishers, ProfileStats};

use crate::{
    config::TranslatorConfig,
    core::{FilterKey, OpaquePortsUpdate, ServiceId, endpoint::ParentKind},
    k8s::{
        pods::{PodObject, namespaced_name, node_zone, sole_owner},
        services::service_key,
        slices::SliceObject,
    },
    proto::profile::ProfileState,
};
use endpoints::GroupState;

/// The destination's index.
pub struct EndpointsIndex {
    /// What is known about the cluster.
    cluster: ClusterState,
    /// `Get` publishers, per subscribed Service port.
    endpoints: EndpointPublishers,
    /// `GetProfile` publishers, per resolved key.
    profiles: ProfilePublishers,
    /// Followers of a Service object itself (federated streams re-read
    /// their members when it changes), by Service.
    service_watchers: HashMap<ServiceId, watch::Sender<Option<Arc<Service>>>>,
    /// The cluster's node epoch, published after each change: streams of
    /// an unknown-node group wake on it and look for their node's own
    /// group (see [`FilterKey::grouped`]).
    node_epoch: watch::Sender<u64>,
}

impl EndpointsIndex {
    pub fn new(config: Arc<TranslatorConfig>) -> Self {
        Self {
            cluster: ClusterState::new(config),
            endpoints: EndpointPublishers::default(),
            profiles: ProfilePublishers::default(),
            service_watchers: HashMap::new(),
            node_epoch: watch::Sender::new(0),
        }
    }

    /// Recomputes what a stored change touched, then tells the streams of
    /// unknown-node groups if a node name became known.
    fn refresh(&mut self, touched: Touched) {
        self.refresh_publishers(touched);
        let epoch = self.cluster.node_epoch();
        self.node_epoch.send_if_modified(|current| {
            let changed = *current != epoch;
            *current = epoch;
            changed
        });
    }

    /// Recomputes the publishers a stored change touched.
    fn refresh_publishers(&mut self, touched: Touched) {
        if touched.is_empty() {
            return;
        }
        self.endpoints.refresh(&self.cluster, &touched);
        self.profiles.refresh(&self.cluster, &touched);
        if !self.service_watchers.is_empty() {
            self.service_watchers
                .retain(|_, tx| tx.receiver_count() > 0);
            for (id, tx) in &self.service_watchers {
                if touched.all_services
                    || touched.services.contains(id)
                    || touched.namespaces.contains(&id.namespace)
                {
                    let now = self.cluster.service(id).cloned();
                    tx.send_if_modified(|current| {
                        let same = match (current.as_ref(), now.as_ref()) {
                            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                            (None, None) => true,
                            _ => false,
                        };
                        if !same {
                            *current = now;
                        }
                        !same
                    });
                }
            }
        }
    }

    /// Follows a Service object: the receiver holds it (`None` while it
    /// does not exist) and wakes when it is replaced or deleted.
    pub fn watch_service(&mut self, id: &ServiceId) -> watch::Receiver<Option<Arc<Service>>> {
        if let Some(tx) = self.service_watchers.get(id) {
            return tx.subscribe();
        }
        let (tx, rx) = watch::channel(self.cluster.service(id).cloned());
        self.service_watchers.insert(id.clone(), tx);
        rx
    }

    /// Applies the policy controller's opaque ports (see
    /// [`ClusterState::apply_server_opaque`]).
    pub fn apply_server_opaque(&mut self, update: OpaquePortsUpdate) {
        let touched = self.cluster.apply_server_opaque(update);
        self.refresh(touched);
    }

    /// Replaces the translator configuration and republishes what changes.
    pub fn set_config(&mut self, config: Arc<TranslatorConfig>) {
        let touched = self.cluster.set_config(config);
        self.refresh(touched);
    }

    /// The stored state.
    pub fn cluster(&self) -> &ClusterState {
        &self.cluster
    }

    /// The `Get` publishers.
    pub fn endpoint_publishers(&self) -> &EndpointPublishers {
        &self.endpoints
    }

    /// What each `Get` group looks like now, and which names of its key the
    /// index holds (read by the metrics when scraped).
    pub fn group_stats(&self) -> Vec<GroupStats> {
        self.endpoints.groups(&self.cluster)
    }

    /// Every `GetProfile` publisher's streams and version, each with
    /// whether its Service is cached (read by the metrics when scraped).
    pub fn profile_stats(&self) -> Vec<(ProfileStats, bool)> {
        self.profiles
            .stats()
            .into_iter()
            .map(|stats| {
                let known = match &stats.key {
                    ProfileKey::Service { target, .. } => {
                        self.cluster.service(&target.service).is_some()
                    }
                    ProfileKey::Endpoint(_) => false,
                };
                (stats, known)
            })
            .collect()
    }

    /// The translator configuration.
    pub fn config(&self) -> &TranslatorConfig {
        self.cluster.config()
    }

    /// The Service, if cached.
    pub fn service(&self, id: &ServiceId) -> Option<&Arc<Service>> {
        self.cluster.service(id)
    }

    /// A pod's facts, if cached.
    pub fn pod(&self, namespace: &str, name: &str) -> Option<&Arc<crate::core::pod::PodFacts>> {
        self.cluster.pod(namespace, name)
    }

    /// The zone of a node, if known.
    pub fn node_zone(&self, node: &str) -> Option<&str> {
        self.cluster.node_zone(node)
    }

    /// Subscribes to the group of `key` on `service:port`.
    pub fn subscribe(
        &mut self,
        service: &ServiceId,
        port: u16,
        key: FilterKey,
    ) -> Result<watch::Receiver<Arc<GroupState>>, SubscribeError> {
        self.endpoints.subscribe(&self.cluster, service, port, key)
    }

    /// The group key a stream asking with `key` follows now (its node's
    /// own, or the shared unknown-node key; see [`FilterKey::grouped`]).
    pub fn group_key(&self, key: &FilterKey) -> FilterKey {
        key.grouped(|node| self.cluster.knows_node(node))
    }

    /// Subscribes a stream asking with `key` to the group it follows now;
    /// returns that group's key with the receiver.
    pub fn subscribe_grouped(
        &mut self,
        service: &ServiceId,
        port: u16,
        key: &FilterKey,
    ) -> Result<(FilterKey, watch::Receiver<Arc<GroupState>>), SubscribeError> {
        let grouped = self.group_key(key);
        let rx = self.subscribe(service, port, grouped.clone())?;
        Ok((grouped, rx))
    }

    /// Wakes whenever a node name becomes known: the streams of an
    /// unknown-node group then check [`Self::group_key`] again.
    pub fn node_epoch(&self) -> watch::Receiver<u64> {
        self.node_epoch.subscribe()
    }

    /// Called after a stream dropped its receiver: drops empty groups and publishers.
    pub fn release(&mut self, service: &ServiceId, port: u16, key: &FilterKey) {
        self.endpoints.release(service, port, key);
    }

    /// Number of (service, port) publishers (for tests and metrics).
    pub fn publisher_count(&self) -> usize {
        self.endpoints.publisher_count()
    }

    /// Number of filter groups across all publishers.
    pub fn group_count(&self) -> usize {
        self.endpoints.group_count()
    }

    /// Resolves a service name (`[instance.]svc.ns.svc.<domain>`) request.
    pub fn resolve_profile_name(
        &self,
        service: &ServiceId,
        instance: Option<&str>,
        port: u16,
        client_ns: Option<&str>,
    ) -> Result<ProfileKey, ProfileLookupError> {
        profiles::resolve_name(&self.cluster, service, instance, port, client_ns)
    }

    /// Resolves an `ip:port` request: a Service ClusterIP, else a pod or host
    /// port, else the bare address.
    pub fn resolve_profile_addr(
        &self,
        addr: SocketAddr,
        client_ns: Option<&str>,
    ) -> Result<ProfileKey, ProfileLookupError> {
        profiles::resolve_addr(&self.cluster, addr, client_ns)
    }

    /// Whether anything `GetProfile` by address reads is known at `addr`
    /// (see [`profiles::knows_addr`]).
    pub fn knows_profile_addr(&self, addr: SocketAddr) -> bool {
        profiles::knows_addr(&self.cluster, addr)
    }

    /// Subscribes to the profile publisher of `key`, creating it if needed.
    pub fn subscribe_profile(&mut self, key: ProfileKey) -> watch::Receiver<Arc<ProfileState>> {
        self.profiles.subscribe(&self.cluster, key)
    }

    /// The storage, writable without publishing (tests simulate a lost
    /// publish with it).
    #[cfg(test)]
    pub(crate) fn cluster_for_tests(&mut self) -> &mut ClusterState {
        &mut self.cluster
    }

    /// The newest state of a `Get` group, if it has streams.
    pub fn group_state(
        &self,
        service: &ServiceId,
        port: u16,
        key: &FilterKey,
    ) -> Option<Arc<GroupState>> {
        // A stream records the key it asked with: its node's group if there
        // is one, else the unknown-node group it follows.
        self.endpoints.group_state(service, port, key).or_else(|| {
            self.endpoints
                .group_state(service, port, &self.group_key(key))
        })
    }

    /// The newest state of a profile publisher, if it has streams.
    pub fn profile_state(&self, key: &ProfileKey) -> Option<Arc<ProfileState>> {
        self.profiles.state(key)
    }

    /// The profile publishers of `service`'s ports.
    pub fn profile_states(&self, service: &ServiceId) -> Vec<(ProfileKey, Arc<ProfileState>)> {
        self.profiles.service_states(service)
    }

    /// Drops the publisher of `key` once no stream follows it.
    pub fn release_profile(&mut self, key: &ProfileKey) {
        self.profiles.release(key);
    }
}

impl Index<Service> for EndpointsIndex {
    fn apply(&mut self, svc: Service) {
        let Some(id) = service_key(&svc) else {
            return;
        };
        let touched = self.cluster.apply_service(id, svc);
        self.refresh(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        let id = ServiceId {
            namespace: key.namespace.unwrap_or_default(),
            name: key.name,
        };
        let touched = self.cluster.delete_service(id);
        self.refresh(touched);
    }
}

impl Index<SliceObject> for EndpointsIndex {
    fn apply(&mut self, slice: SliceObject) {
        let Some((ns, name)) = namespaced_name(&slice) else {
            return;
        };
        let touched = self.cluster.apply_slice(ns, name, slice.facts);
        self.refresh(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        let ns = key.namespace.unwrap_or_default();
        let touched = self.cluster.delete_slice(&ns, &key.name);
        self.refresh(touched);
    }
}

/// A `k8s-openapi` `EndpointSlice` is decoded as the watch decodes one
/// (tests, and callers holding full objects).
impl Index<EndpointSlice> for EndpointsIndex {
    fn apply(&mut self, slice: EndpointSlice) {
        Index::<SliceObject>::apply(self, SliceObject::from(&slice));
    }

    fn delete(&mut self, key: ObjectKey) {
        Index::<SliceObject>::delete(self, key);
    }
}

impl Index<PodObject> for EndpointsIndex {
    fn apply(&mut self, pod: PodObject) {
        let Some(key) = namespaced_name(&pod) else {
            return;
        };
        let touched = self.cluster.apply_pod(key, Some(pod.facts));
        self.refresh(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        let key = (key.namespace.unwrap_or_default(), key.name);
        let touched = self.cluster.apply_pod(key, None);
        self.refresh(touched);
    }

    fn reset(&mut self, pods: Vec<PodObject>, removed: Vec<ObjectKey>) {
        let removed = removed
            .into_iter()
            .map(|key| (key.namespace.unwrap_or_default(), key.name))
            .collect();
        let pods = pods
            .into_iter()
            .filter_map(|pod| Some((namespaced_name(&pod)?, pod.facts)))
            .collect();
        let touched = self.cluster.reset_pods(pods, removed);
        self.refresh(touched);
    }
}

/// A `k8s-openapi` `Pod` is decoded as the watch decodes one (tests, and
/// callers holding full objects).
impl Index<Pod> for EndpointsIndex {
    fn apply(&mut self, pod: Pod) {
        Index::<PodObject>::apply(self, PodObject::from(&pod));
    }

    fn delete(&mut self, key: ObjectKey) {
        Index::<PodObject>::delete(self, key);
    }

    fn reset(&mut self, pods: Vec<Pod>, removed: Vec<ObjectKey>) {
        let pods = pods.iter().map(PodObject::from).collect();
        Index::<PodObject>::reset(self, pods, removed);
    }
}

impl Index<ExternalWorkload> for EndpointsIndex {
    fn apply(&mut self, workload: ExternalWorkload) {
        let Some(key) = namespaced_name(&workload) else {
            return;
        };
        let touched = self.cluster.apply_external_workload(key, Some(workload));
        self.refresh(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        let key = (key.namespace.unwrap_or_default(), key.name);
        let touched = self.cluster.apply_external_workload(key, None);
        self.refresh(touched);
    }

    fn reset(&mut self, workloads: Vec<ExternalWorkload>, removed: Vec<ObjectKey>) {
        let removed = removed
            .into_iter()
            .map(|key| (key.namespace.unwrap_or_default(), key.name))
            .collect();
        let workloads = workloads
            .into_iter()
            .filter_map(|ew| Some((namespaced_name(&ew)?, ew)))
            .collect();
        let touched = self.cluster.reset_external_workloads(workloads, removed);
        self.refresh(touched);
    }
}

impl Index<ServiceProfile> for EndpointsIndex {
    fn apply(&mut self, profile: ServiceProfile) {
        let Some(key) = namespaced_name(&profile) else {
            return;
        };
        let touched = self.cluster.apply_service_profile(key, profile);
        self.refresh(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        let key = (key.namespace.unwrap_or_default(), key.name);
        let touched = self.cluster.delete_service_profile(key);
        self.refresh(touched);
    }
}

impl Index<PartialObjectMeta<Node>> for EndpointsIndex {
    fn apply(&mut self, node: PartialObjectMeta<Node>) {
        let Some((name, zone)) = node_zone(&node) else {
            return;
        };
        let touched = self.cluster.apply_node_zone(name, zone);
        self.refresh(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        let touched = self.cluster.apply_node_zone(key.name, None);
        self.refresh(touched);
    }
}

fn apply_owner<K>(index: &mut EndpointsIndex, kind: ParentKind, obj: &PartialObjectMeta<K>)
where
    PartialObjectMeta<K>: kube::Resource,
{
    let Some(name) = namespaced_name(obj) else {
        return;
    };
    let touched = index.cluster.apply_owner(kind, name, sole_owner(obj));
    index.refresh(touched);
}

fn delete_owner(index: &mut EndpointsIndex, kind: ParentKind, key: ObjectKey) {
    let touched = index
        .cluster
        .delete_owner(kind, (key.namespace.unwrap_or_default(), key.name));
    index.refresh(touched);
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
pub(crate) mod tests;
