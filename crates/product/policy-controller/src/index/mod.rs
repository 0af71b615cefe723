//! The inbound policy index: a synchronous (`&mut self`) view of meshed
//! pods, external workloads and policy resources that publishes each
//! workload port's [`InboundServer`] on a `tokio::sync::watch` channel.
//!
//! One [`Index`] implements [`k8s_index::Index`] for every watched kind, so
//! a single `Arc<RwLock<Index>>` serves all watches. Every mutation reports
//! what it touched (nothing, a workload, a namespace, everything); only
//! touched workloads are recomputed, and a port's watch is only notified
//! when its server really changed. A re-list (`reset`) recomputes each
//! touched namespace once.

pub mod authentications;
pub mod gateway_routes;
pub mod opaque_feed;
pub mod outbound;
mod port_servers;
pub mod ratelimit;
pub mod reindex;
mod sizes;
#[cfg(test)]
mod tests;
mod workload;

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    sync::Arc,
};

use k8s_api::policy::{
    AuthorizationPolicy, HTTPRoute, MeshTLSAuthentication, NetworkAuthentication, Server,
    ServerAuthorization,
};
use k8s_api::workload::ExternalWorkload;
use k8s_index::{ObjectKey, SharedIndex, shared::Shared};
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

pub use self::authentications::Authentications;
pub use self::sizes::NamespaceSizes;
use self::workload::WorkloadState;
pub use crate::core::ClusterInfo;
use crate::core::{
    AuthorizationRef, Authorizations, DiscoverInboundServer, GroupKindName, HttpRoute,
    InboundServer, LookupError, NetworkMatch, RouteRef, ServerRef, WorkloadKind, WorkloadPort,
    routes::default_http_routes,
};
pub use crate::k8s::{InvalidResource, pod::CONTROL_PLANE_NS_LABEL, pod::PodObject};
use crate::k8s::{
    authz::{
        PolicySpec, PolicyTarget, ServerAuthz, authorization_policy, mesh_tls_authentication,
        network_authentication, server_authorization,
    },
    grpc_route::{GATEWAY_GROUP, GrpcRouteBinding},
    ratelimit::RateLimitSpec,
    routes::RouteBinding,
    server::ServerSpec,
    workload::WorkloadInfo,
};

/// The policy resources of one namespace.
#[derive(Debug, Default)]
pub(crate) struct PolicyNs {
    namespace: String,
    servers: BTreeMap<String, ServerSpec>,
    server_authorizations: BTreeMap<String, ServerAuthz>,
    authorization_policies: BTreeMap<String, PolicySpec>,
    http_routes: BTreeMap<String, RouteBinding>,
    /// Gateway API HTTPRoutes (their names may repeat policy ones).
    gateway_http_routes: BTreeMap<String, RouteBinding>,
    grpc_routes: BTreeMap<String, GrpcRouteBinding>,
    ratelimits: BTreeMap<String, RateLimitSpec>,
}

#[derive(Debug, Default)]
struct Namespace {
    pods: HashMap<String, WorkloadState>,
    external_workloads: HashMap<String, WorkloadState>,
    policy: PolicyNs,
}

/// The inbound policy index.
#[derive(Debug)]
pub struct Index {
    cluster: ClusterInfo,
    namespaces: HashMap<String, Namespace>,
    authentications: Authentications,
    opaque: opaque_feed::OpaqueFeed,
    /// One copy of each distinct published server (every port a Server
    /// selects publishes the same one).
    servers: Shared<InboundServer>,
}

/// Counts of the inbound index, read by the metrics when scraped, and by tests.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IndexStats {
    pub namespaces: usize,
    pub pods: usize,
    pub external_workloads: usize,
    pub servers: usize,
    pub port_servers: usize,
}

/// What a mutation requires recomputing.
enum Touched {
    Nothing,
    /// One workload: namespace, kind, name.
    Workload(String, WorkloadKind, String),
    Namespace(String),
    All,
}

#[derive(Default)]
struct Pending {
    all: bool,
    namespaces: BTreeSet<String>,
    workloads: BTreeSet<(String, WorkloadKind, String)>,
}

impl Pending {
    fn add(&mut self, touched: Touched) {
        match touched {
            Touched::Nothing => {}
            Touched::Workload(ns, kind, name) => {
                self.workloads.insert((ns, kind, name));
            }
            Touched::Namespace(ns) => {
                self.namespaces.insert(ns);
            }
            Touched::All => self.all = true,
        }
    }
}

// === impl Index ===

impl Index {
    pub fn new(cluster: ClusterInfo) -> Self {
        Self {
            cluster,
            namespaces: HashMap::new(),
            authentications: Authentications::default(),
            opaque: opaque_feed::OpaqueFeed::default(),
            servers: Shared::default(),
        }
    }

    /// The Server-derived opaque ports of every meshed pod and
    /// ExternalWorkload, and the feed of
    /// their changes (for the destination controller).
    pub fn follow_opaque_ports(
        &self,
    ) -> (
        Vec<opaque_feed::WorkloadOpaquePorts>,
        tokio::sync::broadcast::Receiver<std::sync::Arc<opaque_feed::WorkloadOpaquePorts>>,
    ) {
        self.opaque.follow()
    }

    /// A new index behind the lock all watches and lookups share.
    pub fn shared(cluster: ClusterInfo) -> SharedIndex<Self> {
        SharedIndex::new(parking_lot::RwLock::new(Self::new(cluster)))
    }

    pub fn cluster(&self) -> &ClusterInfo {
        &self.cluster
    }

    pub fn stats(&self) -> IndexStats {
        let mut stats = IndexStats {
            namespaces: self.namespaces.len(),
            ..Default::default()
        };
        for ns in self.namespaces.values() {
            stats.pods += ns.pods.len();
            stats.external_workloads += ns.external_workloads.len();
            stats.servers += ns.policy.servers.len();
            stats.port_servers += ns
                .pods
                .values()
                .chain(ns.external_workloads.values())
                .map(|w| w.port_servers.len())
                .sum::<usize>();
        }
        stats
    }

    /// A receiver of the server of a workload port. An unknown port of a
    /// known workload gets its default server (created now and kept).
    pub fn workload_server_rx(
        &mut self,
        target: &WorkloadPort,
    ) -> Result<watch::Receiver<Arc<InboundServer>>, LookupError> {
        let workload = self
            .namespaces
            .get_mut(&target.namespace)
            .and_then(|ns| ns.workloads_mut(target.kind).get_mut(&target.name))
            .ok_or(LookupError::UnknownServer)?;
        let rx = workload.subscribe(target.port, &self.cluster, &mut self.servers);
        Ok(rx)
    }

    /// [`Self::workload_server_rx`] of a pod port.
    pub fn pod_server_rx(
        &mut self,
        namespace: &str,
        pod: &str,
        port: std::num::NonZeroU16,
    ) -> Result<watch::Receiver<Arc<InboundServer>>, LookupError> {
        self.workload_server_rx(&WorkloadPort {
            namespace: namespace.to_string(),
            kind: WorkloadKind::Pod,
            name: pod.to_string(),
            port,
        })
    }

    fn ns_mut(&mut self, ns: &str) -> &mut Namespace {
        self.namespaces
            .entry(ns.to_string())
            .or_insert_with(|| Namespace {
                pods: HashMap::new(),
                external_workloads: HashMap::new(),
                policy: PolicyNs {
                    namespace: ns.to_string(),
                    ..Default::default()
                },
            })
    }

    /// Sets (or with `None`, removes) one policy object of a namespace.
    fn set_policy<T: PartialEq>(
        &mut self,
        ns: &str,
        name: String,
        value: Option<T>,
        map: impl FnOnce(&mut PolicyNs) -> &mut BTreeMap<String, T>,
    ) -> Touched {
        let changed = match value {
            Some(value) => {
                let objects = map(&mut self.ns_mut(ns).policy);
                objects.get(&name) != Some(&value) && {
                    objects.insert(name, value);
                    true
                }
            }
            None => match self.namespaces.get_mut(ns) {
                Some(n) => map(&mut n.policy).remove(&name).is_some(),
                None => false,
            },
        };
        if changed {
            Touched::Namespace(ns.to_string())
        } else {
            Touched::Nothing
        }
    }
}

impl Namespace {
    fn is_empty(&self) -> bool {
        self.pods.is_empty() && self.external_workloads.is_empty() && self.policy.is_empty()
    }

    fn workloads_mut(&mut self, kind: WorkloadKind) -> &mut HashMap<String, WorkloadState> {
        workloads_of(&mut self.pods, &mut self.external_workloads, kind)
    }
}

/// A namespace's workloads of `kind`, from its pods and external
/// workloads (borrowed apart, so that its policy can be borrowed beside).
fn workloads_of<'a>(
    pods: &'a mut HashMap<String, WorkloadState>,
    external_workloads: &'a mut HashMap<String, WorkloadState>,
    kind: WorkloadKind,
) -> &'a mut HashMap<String, WorkloadState> {
    match kind {
        WorkloadKind::Pod => pods,
        WorkloadKind::External => external_workloads,
    }
}

// === impl PolicyNs ===

impl PolicyNs {
    fn is_empty(&self) -> bool {
        self.servers.is_empty()
            && self.server_authorizations.is_empty()
            && self.authorization_policies.is_empty()
            && self.http_routes.is_empty()
            && self.gateway_http_routes.is_empty()
            && self.grpc_routes.is_empty()
            && self.ratelimits.is_empty()
    }

    /// Servers by creation time, then name.
    fn servers_by_age(&self) -> Vec<(&str, &ServerSpec)> {
        let mut servers: Vec<_> = self.servers.iter().map(|(n, s)| (n.as_str(), s)).collect();
        servers
            .sort_by(|(an, a), (bn, b)| a.created_at.cmp(&b.created_at).then_with(|| an.cmp(bn)));
        servers
    }

    fn inbound_server<'p>(
        &self,
        name: &str,
        srv: &ServerSpec,
        authns: &Authentications,
        cluster: &ClusterInfo,
        probe_paths: impl Iterator<Item = &'p str>,
    ) -> InboundServer {
        InboundServer {
            reference: ServerRef::Server(name.to_string()),
            protocol: srv.protocol.clone(),
            authorizations: self.server_authorizations(name, srv, authns, cluster),
            http_routes: self.http_routes(name, authns, cluster, probe_paths),
            grpc_routes: self.grpc_routes(name, authns, cluster),
            ratelimit: self.server_ratelimit(name, cluster),
        }
    }

    /// ServerAuthorizations, then AuthorizationPolicies for the Server or
    /// its namespace, then the Server's `accessPolicy` defaults.
    fn server_authorizations(
        &self,
        name: &str,
        srv: &ServerSpec,
        authns: &Authentications,
        cluster: &ClusterInfo,
    ) -> Authorizations {
        let mut authzs = Authorizations::new();
        for (saz_name, saz) in &self.server_authorizations {
            if saz.servers.selects(name, &srv.labels) {
                authzs.insert(
                    AuthorizationRef::ServerAuthorization(saz_name.clone()),
                    saz.authz.clone(),
                );
            }
        }
        let targeted = self
            .authorization_policies
            .iter()
            .filter(|(_, p)| match &p.target {
                PolicyTarget::Server(target) => target == name,
                PolicyTarget::Namespace => true,
                PolicyTarget::Route(_) => false,
            });
        self.insert_policies(&mut authzs, targeted, authns, cluster);
        if let Some(policy) = srv.access_policy {
            authzs.extend(policy.authorizations(&cluster.networks));
        }
        authzs
    }

    fn insert_policies<'a>(
        &self,
        authzs: &mut Authorizations,
        policies: impl Iterator<Item = (&'a String, &'a PolicySpec)>,
        authns: &Authentications,
        cluster: &ClusterInfo,
    ) {
        for (policy_name, policy) in policies {
            match authns.resolve(policy, &self.namespace, cluster) {
                Ok(authz) => {
                    authzs.insert(
                        AuthorizationRef::AuthorizationPolicy(policy_name.clone()),
                        authz,
                    );
                }
                Err(error) => tracing::info!(
                    ns = %self.namespace,
                    authorizationpolicy = %policy_name,
                    %error,
                    "Illegal AuthorizationPolicy; ignoring"
                ),
            }
        }
    }

    /// The routes attached to Server `name`, or the default routes.
    fn http_routes<'p>(
        &self,
        name: &str,
        authns: &Authentications,
        cluster: &ClusterInfo,
        probe_paths: impl Iterator<Item = &'p str>,
    ) -> BTreeMap<RouteRef, HttpRoute> {
        let policy = self
            .http_routes
            .iter()
            .map(|(n, b)| (k8s_api::policy::GROUP, n, b));
        let gateway = self
            .gateway_http_routes
            .iter()
            .map(|(n, b)| (GATEWAY_GROUP, n, b));
        let routes: BTreeMap<_, _> = policy
            .chain(gateway)
            .filter(|(_, _, binding)| binding.attached_to(name))
            .map(|(group, route_name, binding)| {
                let gkn = GroupKindName {
                    group: group.to_string(),
                    kind: "HTTPRoute".to_string(),
                    name: route_name.clone(),
                };
                let mut route = binding.route.clone();
                route
                    .authorizations
                    .extend(self.route_authorizations(&gkn, authns, cluster));
                (RouteRef::Resource(gkn), route)
            })
            .collect();
        if routes.is_empty() {
            default_http_routes(probe_paths, &cluster.probe_networks)
        } else {
            routes
        }
    }
}

// === impl k8s_index::Index ===

/// A kind the index reacts to.
trait Indexed: kube::Resource + Sized {
    /// Applies the object without publishing.
    fn upsert(index: &mut Index, ns: &str, name: String, obj: Self) -> Touched;
    /// Removes the object without publishing.
    fn remove(index: &mut Index, ns: &str, name: String) -> Touched;
}

impl<K: Indexed> k8s_index::Index<K> for Index {
    fn apply(&mut self, obj: K) {
        let Some(ObjectKey {
            namespace: Some(ns),
            name,
        }) = ObjectKey::of(&obj)
        else {
            return;
        };
        let _span = tracing::info_span!("apply", %ns, %name).entered();
        let mut pending = Pending::default();
        pending.add(K::upsert(self, &ns, name, obj));
        self.flush(pending);
    }

    fn delete(&mut self, key: ObjectKey) {
        let Some(ns) = key.namespace else {
            return;
        };
        let _span = tracing::info_span!("delete", %ns, name = %key.name).entered();
        let mut pending = Pending::default();
        pending.add(K::remove(self, &ns, key.name));
        self.flush(pending);
    }

    fn reset(&mut self, objects: Vec<K>, removed: Vec<ObjectKey>) {
        let mut pending = Pending::default();
        for key in removed {
            if let Some(ns) = key.namespace {
                pending.add(K::remove(self, &ns, key.name));
            }
        }
        for obj in objects {
            if let Some(ObjectKey {
                namespace: Some(ns),
                name,
            }) = ObjectKey::of(&obj)
            {
                pending.add(K::upsert(self, &ns, name, obj));
            }
        }
        self.flush(pending);
    }
}

fn warn_invalid(kind: &str, ns: &str, name: &str, error: &InvalidResource) {
    tracing::warn!(%kind, %ns, %name, %error, "ignoring invalid resource");
}

impl Indexed for PodObject {
    fn upsert(index: &mut Index, ns: &str, name: String, pod: Self) -> Touched {
        match pod.info {
            Some(info) => index.set_workload(ns, name, info),
            // Not meshed (any more): not indexed.
            None => Self::remove(index, ns, name),
        }
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.opaque.set(WorkloadKind::Pod, ns, &name, Vec::new());
        index.remove_workload(ns, WorkloadKind::Pod, &name)
    }
}

/// A `k8s-openapi` `Pod` is decoded as the watch decodes one (tests, and
/// callers holding full objects).
impl Indexed for Pod {
    fn upsert(index: &mut Index, ns: &str, name: String, pod: Self) -> Touched {
        match WorkloadInfo::from_pod(&pod) {
            Some(info) => index.set_workload(ns, name, info),
            None => PodObject::remove(index, ns, name),
        }
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        PodObject::remove(index, ns, name)
    }
}

impl Indexed for ExternalWorkload {
    fn upsert(index: &mut Index, ns: &str, name: String, ew: Self) -> Touched {
        let info = crate::k8s::workload::shared(WorkloadInfo::from_external_workload(&ew));
        index.set_workload(ns, name, info)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index
            .opaque
            .set(WorkloadKind::External, ns, &name, Vec::new());
        index.remove_workload(ns, WorkloadKind::External, &name)
    }
}

impl Index {
    /// Adds or updates a workload, keeping the process's shared copy of its
    /// definition ([`crate::k8s::workload::shared`]); only a changed one
    /// needs recomputing.
    fn set_workload(&mut self, ns: &str, name: String, info: Arc<WorkloadInfo>) -> Touched {
        let kind = info.kind;
        let workloads = self.ns_mut(ns).workloads_mut(kind);
        match workloads.get_mut(&name) {
            Some(existing) if existing.info == info => return Touched::Nothing,
            Some(existing) => {
                if kind == WorkloadKind::Pod && existing.info.port_names != info.port_names {
                    tracing::warn!("pod port names changed (they are immutable in Kubernetes)");
                }
                existing.info = info;
            }
            None => {
                workloads.insert(name.clone(), WorkloadState::new(info));
            }
        }
        Touched::Workload(ns.to_string(), kind, name)
    }

    /// Removes a workload. Dropping it drops its senders, which ends its
    /// watches; nothing else depends on it.
    fn remove_workload(&mut self, ns: &str, kind: WorkloadKind, name: &str) -> Touched {
        if let Some(n) = self.namespaces.get_mut(ns) {
            n.workloads_mut(kind).remove(name);
        }
        Touched::Nothing
    }
}

impl Indexed for Server {
    fn upsert(index: &mut Index, ns: &str, name: String, srv: Self) -> Touched {
        let spec = ServerSpec::from_resource(&srv, &index.cluster)
            .map_err(|e| warn_invalid("Server", ns, &name, &e))
            .ok();
        index.set_policy(ns, name, spec, |p| &mut p.servers)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<ServerSpec>, |p| &mut p.servers)
    }
}

impl Indexed for ServerAuthorization {
    fn upsert(index: &mut Index, ns: &str, name: String, saz: Self) -> Touched {
        let spec = server_authorization(&saz.spec, ns, &index.cluster)
            .map_err(|e| warn_invalid("ServerAuthorization", ns, &name, &e))
            .ok();
        index.set_policy(ns, name, spec, |p| &mut p.server_authorizations)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<ServerAuthz>, |p| {
            &mut p.server_authorizations
        })
    }
}

impl Indexed for AuthorizationPolicy {
    fn upsert(index: &mut Index, ns: &str, name: String, ap: Self) -> Touched {
        let spec = authorization_policy(&ap.spec, ns)
            .map_err(|e| warn_invalid("AuthorizationPolicy", ns, &name, &e))
            .ok();
        index.set_policy(ns, name, spec, |p| &mut p.authorization_policies)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<PolicySpec>, |p| {
            &mut p.authorization_policies
        })
    }
}

impl Indexed for HTTPRoute {
    fn upsert(index: &mut Index, ns: &str, name: String, route: Self) -> Touched {
        let binding = RouteBinding::from_resource(&route, ns)
            .map_err(|e| warn_invalid("HTTPRoute", ns, &name, &e))
            .ok();
        index.set_policy(ns, name, binding, |p| &mut p.http_routes)
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        index.set_policy(ns, name, None::<RouteBinding>, |p| &mut p.http_routes)
    }
}

impl Indexed for MeshTLSAuthentication {
    fn upsert(index: &mut Index, ns: &str, name: String, authn: Self) -> Touched {
        let ids = mesh_tls_authentication(&authn.spec, ns, &index.cluster)
            .map_err(|e| warn_invalid("MeshTLSAuthentication", ns, &name, &e))
            .ok();
        touched_all(index.authentications.set_mesh_tls(ns, &name, ids))
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        touched_all(index.authentications.set_mesh_tls(ns, &name, None))
    }
}

impl Indexed for NetworkAuthentication {
    fn upsert(index: &mut Index, ns: &str, name: String, authn: Self) -> Touched {
        let nets: Option<Vec<NetworkMatch>> = network_authentication(&authn.spec)
            .map_err(|e| warn_invalid("NetworkAuthentication", ns, &name, &e))
            .ok();
        touched_all(index.authentications.set_network(ns, &name, nets))
    }

    fn remove(index: &mut Index, ns: &str, name: String) -> Touched {
        touched_all(index.authentications.set_network(ns, &name, None))
    }
}

fn touched_all(changed: bool) -> Touched {
    if changed {
        Touched::All
    } else {
        Touched::Nothing
    }
}

// === impl DiscoverInboundServer ===

impl DiscoverInboundServer for SharedIndex<Index> {
    fn watch_inbound_server(
        &self,
        target: &WorkloadPort,
    ) -> Result<watch::Receiver<Arc<InboundServer>>, LookupError> {
        // The write lock: a lookup may create a default port server.
        self.write().workload_server_rx(target)
    }
}
