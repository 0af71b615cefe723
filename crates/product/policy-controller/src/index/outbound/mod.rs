//! The outbound policy index: a synchronous (`&mut self`) view of Services,
//! EgressNetworks and the routes attached to them that publishes, for each
//! Service port (or egress address, [`egress`]) and client namespace
//! somebody asked about, its policy on a `tokio::sync::watch` channel.
//!
//! Every mutation names the Services it touched (a Service itself, the
//! parents of a route, the parents of routes whose backend appeared or
//! went away); only their watches are recomputed, and a watch is only
//! notified when its policy really changed. Watches nobody holds any more
//! are dropped when their Service is next recomputed, and by
//! [`sweep`]: every few seconds (the runtime's sweep task) and whenever
//! the count of watches doubles, so names, ports and client namespaces a
//! client makes up keep nothing once its streams end.

pub mod egress;
pub mod sweep;
#[cfg(test)]
mod tests;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    net::{IpAddr, SocketAddr},
    num::NonZeroU16,
    sync::Arc,
};

use ipnet::IpNet;
use k8s_api::{gateway, policy};
use k8s_index::{ObjectKey, SharedIndex};
use k8s_openapi::api::core::v1::Service;
use tokio::sync::watch;

use crate::core::{
    DiscoverOutboundPolicy, PortSet,
    egress::EgressPolicy,
    outbound::{
        Backend, OutboundPolicy, OutboundTarget, RouteId, ServiceTarget, service_authority,
    },
};
use crate::k8s::outbound::{AnyRoute, OutboundBinding, ServiceInfo, egress::EgressEntry};

/// Cluster-wide settings of the outbound index, from flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboundCluster {
    /// `--cluster-networks`: addresses outside are egress.
    pub networks: Vec<IpNet>,
    /// `--cluster-domain`.
    pub cluster_domain: String,
    /// `--default-opaque-ports`.
    pub default_opaque_ports: PortSet,
    /// `--global-egress-network-namespace`: EgressNetworks here apply to
    /// clients of namespaces without their own.
    pub global_egress_network_namespace: String,
}

/// A Service by namespace and name.
type ServiceKey = (String, String);

/// The watches of one Service: by (port, client namespace).
type PortWatches = HashMap<(NonZeroU16, String), watch::Sender<Arc<OutboundPolicy>>>;

/// The outbound policy index.
#[derive(Debug)]
pub struct OutboundIndex {
    /// Flags.
    cluster: OutboundCluster,
    /// Known Services.
    services: HashMap<ServiceKey, ServiceInfo>,
    /// ClusterIP → Service.
    by_ip: HashMap<IpAddr, ServiceKey>,
    /// Every route with at least one accepted Service parent.
    routes: HashMap<RouteId, OutboundBinding>,
    /// Routes by the Services they attach to.
    routes_by_parent: HashMap<ServiceKey, BTreeSet<RouteId>>,
    /// Published policies. Keyed by what requests name (Services that may
    /// not exist, any port, any client namespace): an entry lives only as
    /// long as a receiver does, see [`sweep`].
    watches: HashMap<ServiceKey, PortWatches>,
    /// How many (port, client namespace) watches `watches` holds, kept so
    /// that creating one can sweep when the count doubles (amortized O(1)
    /// per watch) without walking the map.
    watch_count: usize,
    /// EgressNetworks by namespace and name.
    egress_networks: BTreeMap<ServiceKey, EgressEntry>,
    /// Routes with at least one accepted EgressNetwork parent.
    egress_routes: BTreeSet<RouteId>,
    /// Published egress policies, by address and client namespace.
    egress_watches: HashMap<(SocketAddr, String), watch::Sender<Arc<EgressPolicy>>>,
    /// Whether the egress watches need recomputing.
    egress_changed: bool,
}

/// Counts of the outbound index, read by the metrics when scraped, and by tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OutboundStats {
    pub services: usize,
    pub routes: usize,
    pub watches: usize,
}

/// Linkerd 2.20's outbound index sizes ([`OutboundIndex::original_sizes`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OriginalSizes {
    pub by_ip: usize,
    pub services: usize,
    pub routes: BTreeMap<String, usize>,
    pub port_routes: BTreeMap<String, usize>,
}

impl OutboundIndex {
    pub fn new(cluster: OutboundCluster) -> Self {
        Self {
            cluster,
            services: HashMap::new(),
            by_ip: HashMap::new(),
            routes: HashMap::new(),
            routes_by_parent: HashMap::new(),
            watches: HashMap::new(),
            watch_count: 0,
            egress_networks: BTreeMap::new(),
            egress_routes: BTreeSet::new(),
            egress_watches: HashMap::new(),
            egress_changed: false,
        }
    }

    /// A new index behind the lock all watches and lookups share.
    pub fn shared(cluster: OutboundCluster) -> SharedIndex<Self> {
        SharedIndex::new(parking_lot::RwLock::new(Self::new(cluster)))
    }

    pub fn stats(&self) -> OutboundStats {
        OutboundStats {
            services: self.services.len(),
            routes: self.routes.len(),
            watches: self.watch_count + self.egress_watches.len(),
        }
    }

    /// Linkerd 2.20's outbound index sizes: Services by ClusterIP,
    /// Services, and per namespace the routes and the watched Service ports
    /// (of Services the index holds: a namespace only a request names adds
    /// no series).
    pub fn original_sizes(&self) -> OriginalSizes {
        let mut routes = BTreeMap::<String, usize>::new();
        for id in self.routes.keys() {
            *routes.entry(id.namespace.clone()).or_default() += 1;
        }
        let mut port_routes = BTreeMap::<String, usize>::new();
        for (key, watches) in &self.watches {
            if !self.services.contains_key(key) {
                continue;
            }
            let ports: BTreeSet<NonZeroU16> = watches.keys().map(|(port, _)| *port).collect();
            *port_routes.entry(key.0.clone()).or_default() += ports.len();
        }
        OriginalSizes {
            by_ip: self.by_ip.len(),
            services: self.services.len(),
            routes,
            port_routes,
        }
    }

    /// What an address is (see [`DiscoverOutboundPolicy::lookup_ip`]).
    pub fn lookup_ip(
        &self,
        addr: IpAddr,
        port: NonZeroU16,
        source_namespace: &str,
    ) -> Option<OutboundTarget> {
        if let Some((namespace, name)) = self.by_ip.get(&addr) {
            let declared = self
                .services
                .get(&(namespace.clone(), name.clone()))
                .is_some_and(|s| s.ports.contains(&port));
            return Some(if declared {
                OutboundTarget::Service(ServiceTarget {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    port,
                    source_namespace: source_namespace.to_string(),
                })
            } else {
                OutboundTarget::UndefinedPort {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    port,
                }
            });
        }
        // An EgressNetwork may capture an address inside the cluster
        // networks too (its status then says it overlaps them).
        if self.egress_network_for(addr, source_namespace).is_some()
            || !self.cluster.networks.iter().any(|n| n.contains(&addr))
        {
            return Some(OutboundTarget::Egress(std::net::SocketAddr::new(
                addr,
                port.get(),
            )));
        }
        None
    }

    /// A receiver of the policy of a Service port for clients of
    /// `target.source_namespace`. A Service the index does not hold (yet)
    /// gets the default policy of its name (no annotation settings, no
    /// app protocol, the routes that already name it as a parent), which
    /// follows it into existence, as the original's.
    pub fn policy_rx(&mut self, target: &ServiceTarget) -> watch::Receiver<Arc<OutboundPolicy>> {
        let key = (target.namespace.clone(), target.name.clone());
        if let Some(tx) = self
            .watches
            .get(&key)
            .and_then(|w| w.get(&(target.port, target.source_namespace.clone())))
        {
            return tx.subscribe();
        }
        // Requests choose these keys: drop the watches nobody holds any
        // more whenever the count doubles, besides the periodic sweep.
        if self.watch_count.is_power_of_two() {
            self.sweep_unwatched();
        }
        let policy = self.policy_of(
            &key,
            self.services.get(&key),
            target.port,
            &target.source_namespace,
        );
        let tx = watch::Sender::new(Arc::new(policy));
        let rx = tx.subscribe();
        self.watches
            .entry(key)
            .or_default()
            .insert((target.port, target.source_namespace.clone()), tx);
        self.watch_count += 1;
        rx
    }

    /// Whether the index holds the Service `namespace/name`.
    pub fn knows_service(&self, namespace: &str, name: &str) -> bool {
        self.services
            .contains_key(&(namespace.to_string(), name.to_string()))
    }

    /// The policy of a Service port for clients of `source_ns` (`None`:
    /// no such Service).
    fn policy(
        &self,
        key: &ServiceKey,
        port: NonZeroU16,
        source_ns: &str,
    ) -> Option<OutboundPolicy> {
        let svc = self.services.get(key)?;
        Some(self.policy_of(key, Some(svc), port, source_ns))
    }

    /// The policy of a port of the Service `key` whose settings are `svc`
    /// (`None`: the defaults of a Service that does not exist).
    fn policy_of(
        &self,
        key: &ServiceKey,
        svc: Option<&ServiceInfo>,
        port: NonZeroU16,
        source_ns: &str,
    ) -> OutboundPolicy {
        let (namespace, name) = key;
        let mut policy = OutboundPolicy {
            namespace: namespace.clone(),
            name: name.clone(),
            port,
            authority: service_authority(name, namespace, &self.cluster.cluster_domain, port),
            app_protocol: svc.and_then(|s| s.app_protocols.get(&port).cloned()),
            accrual: svc.and_then(|s| s.settings.accrual),
            load_biaser: svc.and_then(|s| s.load_biaser),
            honor_retry_after: svc.is_some_and(|s| s.settings.honor_retry_after),
            http_retry: svc.and_then(|s| s.settings.http_retry.clone()),
            grpc_retry: svc.and_then(|s| s.settings.grpc_retry.clone()),
            timeouts: svc.map(|s| s.settings.timeouts.clone()).unwrap_or_default(),
            http_routes: Default::default(),
            grpc_routes: Default::default(),
            tls_routes: Default::default(),
            tcp_routes: Default::default(),
        };
        for id in self.routes_by_parent.get(key).into_iter().flatten() {
            let Some(binding) = self.routes.get(id) else {
                continue;
            };
            // Producer routes (the Service's namespace) apply to every
            // client; consumer routes only to clients of their namespace.
            if id.namespace != *namespace && id.namespace != source_ns {
                continue;
            }
            let attached = binding.parents.iter().any(|p| {
                p.namespace == *namespace && p.name == *name && p.port.is_none_or(|p| p == port)
            });
            if !attached {
                continue;
            }
            match &binding.route {
                AnyRoute::Http(route) => {
                    let mut route = route.clone();
                    for rule in &mut route.rules {
                        self.resolve_backends(&mut rule.backends);
                    }
                    policy.http_routes.insert(id.clone(), route);
                }
                AnyRoute::Grpc(route) => {
                    let mut route = route.clone();
                    for rule in &mut route.rules {
                        self.resolve_backends(&mut rule.backends);
                    }
                    policy.grpc_routes.insert(id.clone(), route);
                }
                AnyRoute::Tls(route) | AnyRoute::Tcp(route) => {
                    let mut route = route.clone();
                    for rule in &mut route.rules {
                        self.resolve_backends(&mut rule.backends);
                    }
                    let routes = match &binding.route {
                        AnyRoute::Tls(_) => &mut policy.tls_routes,
                        _ => &mut policy.tcp_routes,
                    };
                    routes.insert(id.clone(), route);
                }
            }
        }
        policy
    }

    fn resolve_backends(&self, backends: &mut [Backend]) {
        for backend in backends {
            match backend {
                Backend::Service(svc) => {
                    svc.exists = self
                        .services
                        .contains_key(&(svc.namespace.clone(), svc.name.clone()));
                }
                Backend::EgressNetwork(net) => {
                    *backend = Backend::Invalid {
                        weight: net.weight,
                        message: "EgressNetwork backends attach to EgressNetwork parents only"
                            .to_string(),
                    };
                }
                Backend::Invalid { .. } => {}
            }
        }
    }

    /// Recomputes the watches of `services`, notifying those whose policy
    /// changed, and drops the watches nobody holds.
    fn publish(&mut self, services: BTreeSet<ServiceKey>) {
        for key in services {
            let Some(watches) = self.watches.get(&key) else {
                continue;
            };
            let mut stale = Vec::new();
            for ((port, source_ns), tx) in watches {
                if tx.receiver_count() == 0 {
                    stale.push((*port, source_ns.clone()));
                    continue;
                }
                // A deleted Service keeps its last policy until it returns.
                let Some(policy) = self.policy(&key, *port, source_ns) else {
                    continue;
                };
                tx.send_if_modified(|current| {
                    let changed = **current != policy;
                    if changed {
                        *current = Arc::new(policy);
                    }
                    changed
                });
            }
            if let Some(watches) = self.watches.get_mut(&key) {
                for k in stale {
                    if watches.remove(&k).is_some() {
                        self.watch_count -= 1;
                    }
                }
                if watches.is_empty() {
                    self.watches.remove(&key);
                }
            }
        }
        if std::mem::take(&mut self.egress_changed) {
            self.publish_egress();
        }
    }

    /// The parents of the routes with a backend in `key`.
    fn parents_of_routes_to(&self, key: &ServiceKey) -> BTreeSet<ServiceKey> {
        let targets = |backends: &[Backend]| {
            backends.iter().any(
                |b| matches!(b, Backend::Service(s) if s.namespace == key.0 && s.name == key.1),
            )
        };
        self.routes
            .values()
            .filter(|b| match &b.route {
                AnyRoute::Http(r) => r.rules.iter().any(|rule| targets(&rule.backends)),
                AnyRoute::Grpc(r) => r.rules.iter().any(|rule| targets(&rule.backends)),
                AnyRoute::Tls(r) | AnyRoute::Tcp(r) => {
                    r.rules.iter().any(|rule| targets(&rule.backends))
                }
            })
            .flat_map(|b| &b.parents)
            .map(|p| (p.namespace.clone(), p.name.clone()))
            .collect()
    }

    fn upsert_service(&mut self, key: ServiceKey, info: ServiceInfo) -> BTreeSet<ServiceKey> {
        if self.services.get(&key) == Some(&info) {
            return BTreeSet::new();
        }
        let existed = self.services.contains_key(&key);
        self.by_ip.retain(|_, k| *k != key);
        for ip in &info.cluster_ips {
            self.by_ip.insert(*ip, key.clone());
        }
        self.services.insert(key.clone(), info);
        // A backend Service of an egress route may have appeared.
        self.egress_changed |= !existed && !self.egress_routes.is_empty();
        let mut touched = if existed {
            BTreeSet::new()
        } else {
            self.parents_of_routes_to(&key)
        };
        touched.insert(key);
        touched
    }

    fn remove_service(&mut self, key: ServiceKey) -> BTreeSet<ServiceKey> {
        if self.services.remove(&key).is_none() {
            return BTreeSet::new();
        }
        self.by_ip.retain(|_, k| *k != key);
        self.egress_changed |= !self.egress_routes.is_empty();
        self.parents_of_routes_to(&key)
    }

    fn set_route(&mut self, id: RouteId, binding: Option<OutboundBinding>) -> BTreeSet<ServiceKey> {
        // Routes no Service or EgressNetwork accepted are not kept.
        let binding = binding.filter(|b| !b.parents.is_empty() || !b.egress_parents.is_empty());
        if self.routes.get(&id) == binding.as_ref() {
            return BTreeSet::new();
        }
        let mut touched = BTreeSet::new();
        if self.egress_routes.remove(&id) {
            self.egress_changed = true;
        }
        if let Some(new) = &binding
            && !new.egress_parents.is_empty()
        {
            self.egress_routes.insert(id.clone());
            self.egress_changed = true;
        }
        if let Some(old) = self.routes.remove(&id) {
            for p in old.parents {
                let key = (p.namespace, p.name);
                if let Some(ids) = self.routes_by_parent.get_mut(&key) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        self.routes_by_parent.remove(&key);
                    }
                }
                touched.insert(key);
            }
        }
        if let Some(new) = binding {
            for p in &new.parents {
                let key = (p.namespace.clone(), p.name.clone());
                self.routes_by_parent
                    .entry(key.clone())
                    .or_default()
                    .insert(id.clone());
                touched.insert(key);
            }
            self.routes.insert(id, new);
        }
        touched
    }
}

// === impl k8s_index::Index ===

/// A kind the outbound index reacts to.
trait OutboundIndexed: kube::Resource + Sized {
    /// Applies the object without publishing; returns the touched Services.
    fn upsert(index: &mut OutboundIndex, obj: Self) -> BTreeSet<ServiceKey>;
    /// Removes the object without publishing.
    fn remove(index: &mut OutboundIndex, ns: String, name: String) -> BTreeSet<ServiceKey>;
}

impl<K: OutboundIndexed> k8s_index::Index<K> for OutboundIndex {
    fn apply(&mut self, obj: K) {
        let touched = K::upsert(self, obj);
        self.publish(touched);
    }

    fn delete(&mut self, key: ObjectKey) {
        if let Some(ns) = key.namespace {
            let touched = K::remove(self, ns, key.name);
            self.publish(touched);
        }
    }

    fn reset(&mut self, objects: Vec<K>, removed: Vec<ObjectKey>) {
        let mut touched = BTreeSet::new();
        for key in removed {
            if let Some(ns) = key.namespace {
                touched.extend(K::remove(self, ns, key.name));
            }
        }
        for obj in objects {
            touched.extend(K::upsert(self, obj));
        }
        self.publish(touched);
    }
}

impl OutboundIndexed for Service {
    fn upsert(index: &mut OutboundIndex, svc: Self) -> BTreeSet<ServiceKey> {
        let (Some(ns), Some(name)) = (svc.metadata.namespace.clone(), svc.metadata.name.clone())
        else {
            return BTreeSet::new();
        };
        let info = ServiceInfo::from_service(&svc, &index.cluster.default_opaque_ports);
        index.upsert_service((ns, name), info)
    }

    fn remove(index: &mut OutboundIndex, ns: String, name: String) -> BTreeSet<ServiceKey> {
        index.remove_service((ns, name))
    }
}

fn warn_invalid(kind: &str, id: &RouteId, error: &crate::k8s::InvalidResource) {
    tracing::warn!(%kind, ns = %id.namespace, name = %id.name, %error, "ignoring invalid route");
}

macro_rules! route_kind {
    ($ty:ty, $group:expr, $kind:expr) => {
        impl OutboundIndexed for $ty {
            fn upsert(index: &mut OutboundIndex, route: Self) -> BTreeSet<ServiceKey> {
                let id = crate::k8s::outbound::routes::route_id($group, $kind, &route.metadata);
                let binding =
                    crate::k8s::outbound::routes::binding(&route, &index.cluster.cluster_domain)
                        .map_err(|e| warn_invalid($kind, &id, &e))
                        .ok();
                index.set_route(id, binding)
            }

            fn remove(index: &mut OutboundIndex, ns: String, name: String) -> BTreeSet<ServiceKey> {
                let id = RouteId {
                    group: $group.to_string(),
                    kind: $kind.to_string(),
                    namespace: ns,
                    name,
                };
                index.set_route(id, None)
            }
        }
    };
}

route_kind!(policy::HTTPRoute, policy::GROUP, "HTTPRoute");
route_kind!(gateway::HTTPRoute, gateway::GROUP, gateway::HTTPRoute::KIND);
route_kind!(gateway::GRPCRoute, gateway::GROUP, gateway::GRPCRoute::KIND);
route_kind!(gateway::TLSRoute, gateway::GROUP, gateway::TLSRoute::KIND);
route_kind!(gateway::TCPRoute, gateway::GROUP, gateway::TCPRoute::KIND);

// === impl DiscoverOutboundPolicy ===

impl DiscoverOutboundPolicy for SharedIndex<OutboundIndex> {
    fn lookup_ip(
        &self,
        addr: IpAddr,
        port: NonZeroU16,
        source_namespace: &str,
    ) -> Option<OutboundTarget> {
        self.read().lookup_ip(addr, port, source_namespace)
    }

    fn watch_outbound_policy(
        &self,
        target: &ServiceTarget,
    ) -> watch::Receiver<Arc<OutboundPolicy>> {
        // The write lock: a lookup may create the watch.
        self.write().policy_rx(target)
    }

    fn knows_service(&self, namespace: &str, name: &str) -> bool {
        self.read().knows_service(namespace, name)
    }

    fn watch_egress(
        &self,
        addr: SocketAddr,
        source_namespace: &str,
    ) -> Option<watch::Receiver<Arc<EgressPolicy>>> {
        Some(self.write().egress_rx(addr, source_namespace))
    }
}
