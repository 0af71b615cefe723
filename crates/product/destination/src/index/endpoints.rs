//! Shared per-target state: one [`PortPublisher`] per (Service, requested
//! port) holding the unfiltered endpoint set, and one [`Group`] per
//! [`FilterKey`] holding the filtered, translated snapshot that all of the
//! group's streams share. Streams whose node the index does not know share
//! one unknown-node key ([`FilterKey::grouped`]), so the groups are bounded
//! by what the cluster holds, not by what clients name.
//!
//! A group publishes [`GroupState`]s on a `tokio::sync::watch` channel: the
//! newest snapshot, its version, and the precomputed step (the `Update`s)
//! from the previous version. A stream that kept up sends the shared step;
//! a stream that fell behind skips the intermediate versions and diffs its
//! last snapshot against the newest one (coalescing). Nothing is queued per
//! stream, so a slow client costs no memory and never goes backwards.

use std::{
    collections::HashMap,
    sync::{Arc, OnceLock},
};

use tokio::sync::watch;

use super::cluster::{ClusterState, Touched};
use crate::{
    config::TranslatorConfig,
    core::ServiceId,
    core::endpoint::EndpointMap,
    core::filter::{FilterContext, FilterKey, filter_endpoints},
    k8s::{
        endpoints::{internal_traffic_policy_local, set_labels, translate_endpoints},
        lookups::ClusterLookups,
        services::{declares_port, is_external_name},
    },
    proto::{
        frames::{self, Frames},
        snapshot::Snapshot,
    },
};

/// What a group publishes. Messages are encoded once per group, not once
/// per stream: every stream of the group writes the same frames.
#[derive(Debug)]
pub struct GroupState {
    /// Which group published this state (unique in the process): a stream
    /// that moves to another group (its node became known) diffs its last
    /// snapshot against the new group's instead of comparing versions.
    pub group: u64,
    /// Incremented on every published change.
    pub version: u64,
    /// The group's current snapshot.
    pub snapshot: Arc<Snapshot>,
    /// The updates from version `version - 1` to this one, encoded.
    pub step: Frames,
    /// When this version was published (ms since the Unix epoch), so the
    /// audit can tell a stream that is behind from one caught mid-update.
    pub published_ms: u64,
    /// The first message(s) of a new stream, encoded on first use.
    initial: OnceLock<Frames>,
}

/// The source of [`GroupState::group`].
static NEXT_GROUP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

impl GroupState {
    fn new(group: u64, version: u64, snapshot: Snapshot, step: Frames) -> Self {
        Self {
            group,
            version,
            snapshot: Arc::new(snapshot),
            step,
            published_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            initial: OnceLock::new(),
        }
    }

    /// The frames that start a new stream at this state.
    pub fn initial_frames(&self) -> Frames {
        self.initial
            .get_or_init(|| frames::initial(&self.snapshot))
            .clone()
    }
}

/// The Service-level inputs of a port publisher, recomputed on every change.
#[derive(Debug, Default)]
pub struct PortInputs {
    /// `None` when the Service does not exist.
    pub endpoints: Option<EndpointMap>,
    /// `WeightedAddrSet.metric_labels`.
    pub labels: HashMap<String, String>,
    /// `internalTrafficPolicy: Local`.
    pub local_traffic_policy: bool,
}

/// Why a subscription is refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SubscribeError {
    #[error("{0} is an ExternalName service; it has no endpoints to discover")]
    ExternalName(ServiceId),
}

/// The `Get` publishers: one [`PortPublisher`] per subscribed Service port.
/// They read the [`ClusterState`] and know nothing of profiles.
#[derive(Default)]
pub struct EndpointPublishers {
    publishers: HashMap<ServiceId, HashMap<u16, PortPublisher>>,
}

impl EndpointPublishers {
    /// Subscribes to the group of `key` on `service:port`.
    pub fn subscribe(
        &mut self,
        cluster: &ClusterState,
        service: &ServiceId,
        port: u16,
        key: FilterKey,
    ) -> Result<watch::Receiver<Arc<GroupState>>, SubscribeError> {
        if cluster
            .service(service)
            .is_some_and(|svc| is_external_name(svc))
        {
            return Err(SubscribeError::ExternalName(service.clone()));
        }
        let is_new = !self
            .publishers
            .get(service)
            .is_some_and(|ports| ports.contains_key(&port));
        let inputs = is_new.then(|| port_inputs(cluster, service, port));
        let cx = GroupContext {
            config: cluster.config(),
            lookups: cluster,
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
        Ok(publisher.subscribe(key, &cx))
    }

    /// Called after a stream dropped its receiver: drops empty groups and publishers.
    pub fn release(&mut self, service: &ServiceId, port: u16, key: &FilterKey) {
        let Some(ports) = self.publishers.get_mut(service) else {
            return;
        };
        if let Some(publisher) = ports.get_mut(&port)
            && publisher.release(key)
        {
            ports.remove(&port);
        }
        if ports.is_empty() {
            self.publishers.remove(service);
        }
    }

    /// Recomputes the publishers of every touched Service.
    pub fn refresh(&mut self, cluster: &ClusterState, touched: &Touched) {
        // A change to some Services (one pod's or slice's) looks up only
        // those; only a namespace- or cluster-wide change reads every
        // publisher.
        let services: Vec<ServiceId> = if touched.all_services || !touched.namespaces.is_empty() {
            self.publishers
                .keys()
                .filter(|s| {
                    touched.all_services
                        || touched.services.contains(s)
                        || touched.namespaces.contains(&s.namespace)
                })
                .cloned()
                .collect()
        } else {
            touched
                .services
                .iter()
                .filter(|s| self.publishers.contains_key(*s))
                .cloned()
                .collect()
        };
        for service in services {
            self.refresh_service(cluster, &service);
        }
    }

    /// Recomputes every publisher of `service`.
    fn refresh_service(&mut self, cluster: &ClusterState, service: &ServiceId) {
        let Some(ports) = self.publishers.get_mut(service) else {
            return;
        };
        let cx = GroupContext {
            config: cluster.config(),
            lookups: cluster,
        };
        for (port, publisher) in ports.iter_mut() {
            publisher.update(port_inputs(cluster, service, *port), &cx);
        }
    }

    /// What each group looks like now (read by the metrics when scraped),
    /// with what the index knows of the names in its key.
    pub fn groups(&self, cluster: &ClusterState) -> Vec<GroupStats> {
        let mut stats = Vec::new();
        for (service, ports) in &self.publishers {
            let svc = cluster.service(service);
            for (port, publisher) in ports {
                for (key, group) in &publisher.groups {
                    let state = group.tx.borrow();
                    let hostname_known = !key.hostname.is_empty()
                        && publisher.inputs.endpoints.as_ref().is_some_and(|eps| {
                            eps.values()
                                .any(|ep| ep.hostname.as_deref() == Some(key.hostname.as_str()))
                        });
                    stats.push(GroupStats {
                        service: service.clone(),
                        port: *port,
                        key: key.clone(),
                        subscribers: group.tx.receiver_count(),
                        updates: state.version,
                        exists: state.snapshot.exists(),
                        endpoints: state.snapshot.len(),
                        known: KnownNames {
                            service: svc.is_some(),
                            port: svc.is_some_and(|s| declares_port(s, *port)),
                            hostname: hostname_known,
                            node: !key.is_unknown_node()
                                && !key.node_name.is_empty()
                                && cluster.knows_node(&key.node_name),
                        },
                    });
                }
            }
        }
        stats
    }

    /// The newest state of the group of `key` on `service:port`, if it has streams.
    pub fn group_state(
        &self,
        service: &ServiceId,
        port: u16,
        key: &FilterKey,
    ) -> Option<Arc<GroupState>> {
        let group = self.publishers.get(service)?.get(&port)?.groups.get(key)?;
        Some(group.tx.borrow().clone())
    }

    /// Every group of `service`: port, key, newest state and subscribers.
    pub fn group_states(
        &self,
        service: &ServiceId,
    ) -> Vec<(u16, FilterKey, Arc<GroupState>, usize)> {
        let Some(ports) = self.publishers.get(service) else {
            return Vec::new();
        };
        let mut groups: Vec<_> = ports
            .iter()
            .flat_map(|(port, publisher)| {
                publisher.groups.iter().map(|(key, group)| {
                    let state = group.tx.borrow().clone();
                    (*port, key.clone(), state, group.tx.receiver_count())
                })
            })
            .collect();
        groups.sort_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        groups
    }

    /// Calls `f` with every group's published state and its snapshot
    /// recomputed from the stored objects (nothing reused).
    pub fn for_each_group(
        &self,
        cluster: &ClusterState,
        mut f: impl FnMut(&ServiceId, u16, &FilterKey, &Arc<GroupState>, Snapshot),
        cx: &GroupContext<'_>,
    ) {
        for (service, ports) in &self.publishers {
            for (port, publisher) in ports {
                let inputs = port_inputs(cluster, service, *port);
                for (key, group) in &publisher.groups {
                    let published = group.tx.borrow().clone();
                    let truth = build_snapshot(&inputs, key, cx, None);
                    f(service, *port, key, &published, truth);
                }
            }
        }
    }

    /// Number of (service, port) publishers.
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
}

/// The Service-level inputs of `service:port`, from the stored objects.
fn port_inputs(cluster: &ClusterState, service: &ServiceId, port: u16) -> PortInputs {
    let Some(svc) = cluster.service(service) else {
        return PortInputs::default();
    };
    let no_slices = std::collections::BTreeMap::new();
    let slices = cluster.slices_of(service).unwrap_or(&no_slices);
    let endpoints = translate_endpoints(service, Some(svc), port, slices.values(), cluster);
    PortInputs {
        endpoints: Some(endpoints),
        labels: set_labels(service, slices.values()),
        local_traffic_policy: internal_traffic_policy_local(svc),
    }
}

/// Streams of one filter key on one Service port.
#[derive(Debug)]
pub struct Group {
    tx: watch::Sender<Arc<GroupState>>,
}

/// One group as the metrics see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupStats {
    /// The Service.
    pub service: ServiceId,
    /// The requested port.
    pub port: u16,
    /// The group's filter key.
    pub key: FilterKey,
    /// Streams following the group.
    pub subscribers: usize,
    /// Changes published (the group's version).
    pub updates: u64,
    /// Whether the Service exists.
    pub exists: bool,
    /// Endpoints in the group's snapshot.
    pub endpoints: usize,
    /// Which names of the group's key the index holds (the rest came from
    /// requests only, and never name a metric series).
    pub known: KnownNames,
}

/// Which names of a group's key the index holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KnownNames {
    /// The Service exists.
    pub service: bool,
    /// The Service declares the requested port.
    pub port: bool,
    /// An endpoint of the Service port has the requested hostname.
    pub hostname: bool,
    /// The client's node has a zone or pods (see
    /// [`crate::core::FilterKey::grouped`]).
    pub node: bool,
}

/// All groups of one (Service, port).
#[derive(Debug, Default)]
pub struct PortPublisher {
    inputs: PortInputs,
    groups: HashMap<FilterKey, Group>,
}

/// Everything a group needs from outside to rebuild its snapshot.
pub struct GroupContext<'a> {
    pub config: &'a TranslatorConfig,
    /// Node zones (for zone hints).
    pub lookups: &'a dyn ClusterLookups,
}

impl PortPublisher {
    /// Replaces the inputs and republishes every group whose snapshot changed.
    pub fn update(&mut self, inputs: PortInputs, cx: &GroupContext<'_>) {
        self.inputs = inputs;
        for (key, group) in &mut self.groups {
            let snapshot = build_snapshot(&self.inputs, key, cx, Some(&group.tx.borrow().snapshot));
            group.publish(snapshot);
        }
    }

    /// A receiver of the group for `key`, creating the group if needed.
    pub fn subscribe(
        &mut self,
        key: FilterKey,
        cx: &GroupContext<'_>,
    ) -> watch::Receiver<Arc<GroupState>> {
        if let Some(group) = self.groups.get(&key) {
            return group.tx.subscribe();
        }
        let snapshot = build_snapshot(&self.inputs, &key, cx, None);
        let group = NEXT_GROUP.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let state = GroupState::new(group, 0, snapshot, Arc::from(Vec::new()));
        let (tx, rx) = watch::channel(Arc::new(state));
        self.groups.insert(key, Group { tx });
        rx
    }

    /// Drops the group of `key` if it has no receivers left. Returns whether
    /// this publisher has no groups left.
    pub fn release(&mut self, key: &FilterKey) -> bool {
        if self
            .groups
            .get(key)
            .is_some_and(|group| group.tx.receiver_count() == 0)
        {
            self.groups.remove(key);
        }
        self.groups.is_empty()
    }

    /// Number of groups.
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }
}

impl Group {
    fn publish(&self, snapshot: Snapshot) {
        let current = self.tx.borrow().clone();
        if *current.snapshot == snapshot {
            return;
        }
        let step = frames::step(&current.snapshot, &snapshot);
        let state = GroupState::new(current.group, current.version + 1, snapshot, step);
        self.tx.send_replace(Arc::new(state));
    }
}

fn build_snapshot(
    inputs: &PortInputs,
    key: &FilterKey,
    cx: &GroupContext<'_>,
    previous: Option<&Snapshot>,
) -> Snapshot {
    let Some(endpoints) = &inputs.endpoints else {
        return Snapshot::missing();
    };
    let zone = (!key.node_name.is_empty())
        .then(|| cx.lookups.node_zone(&key.node_name))
        .flatten();
    let filter_cx = FilterContext {
        local_traffic_policy: inputs.local_traffic_policy,
        node_zone: zone,
        enable_ipv6: cx.config.enable_ipv6,
    };
    let filtered = filter_endpoints(endpoints, key, &filter_cx);
    Snapshot::build(inputs.labels.clone(), &filtered, cx.config, zone, previous)
}
