//! The route status writer: the policy controller accepts the routes whose
//! parent Server, Service or (accepted) EgressNetwork exists (and says `NoMatchingParent` for the
//! others) by writing `status.parents[]`, which is what attaches a route in
//! the indexes. A route the index cannot serve on a parent (a filter
//! Meridian does not apply, a Server parent naming a port, …: what the
//! index's conversion refuses, which admission lets through as the
//! original does) is `Accepted=False` with `UnsupportedValue` and the
//! reason as its message. Policy HTTPRoutes and Gateway HTTPRoutes, GRPCRoutes,
//! TLSRoutes and TCPRoutes are handled; status entries of other controllers are left alone.
//!
//! - [`route_status`]: the pure computation (a route, the Servers of its
//!   namespace and the Services → its desired status);
//! - [`StatusIndex`]: the Servers, Services and routes the writer needs,
//!   fed by the same watches as the policy indexes;
//! - [`lease`]: the status writer's Lease (name, timings) for the shared
//!   election of `meridian_runtime::lease`,
//!   so only one replica writes;
//! - [`policies`]: the same for HTTPLocalRateLimitPolicies and
//!   EgressNetworks;
//! - [`writer`]: the thin async loop that patches the `status` subresource
//!   while this replica leads.

pub mod lease;
pub mod policies;
pub mod writer;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_api::{
    gateway,
    policy::{
        HTTPRoute, HttpRouteStatus, Server,
        http_route::{HttpBackendRef, POLICY_CONTROLLER_NAME, ParentRef, RouteParentStatus},
    },
};
use k8s_index::ObjectKey;
use k8s_openapi::{
    api::core::v1::Service,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
};
use tokio::sync::watch;

pub use self::writer::StatusWriter;
use crate::k8s::{
    outbound::{
        ServiceParent,
        routes::{OutboundSpec, RouteObject, is_service_ref},
    },
    routes::is_server_parent,
};

// Condition types and reasons are the Gateway API's and Linkerd's
// vocabulary, defined once in `k8s_api::conditions` (the index reads
// `ACCEPTED` too).
pub use k8s_api::conditions::{
    ACCEPTED, BACKEND_NOT_FOUND, INVALID_KIND, NO_MATCHING_PARENT, RESOLVED_REFS, ROUTE_CONFLICTED,
    UNSUPPORTED_VALUE,
};

/// The route kinds the writer handles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RouteKind {
    /// `policy.linkerd.io` HTTPRoute.
    PolicyHttp,
    /// `gateway.networking.k8s.io` HTTPRoute.
    GatewayHttp,
    /// `gateway.networking.k8s.io` GRPCRoute.
    Grpc,
    /// `gateway.networking.k8s.io` TLSRoute.
    Tls,
    /// `gateway.networking.k8s.io` TCPRoute.
    Tcp,
}

impl RouteKind {
    /// GEP-1426 precedence: a route is conflicted on a parent that a route
    /// of a more specific kind (GRPC > HTTP > TLS > TCP) also names.
    fn rank(self) -> u8 {
        match self {
            Self::Grpc => 0,
            Self::PolicyHttp | Self::GatewayHttp => 1,
            Self::Tls => 2,
            Self::Tcp => 3,
        }
    }
}

/// A backend as the writer checks it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendTarget {
    /// A Service, by namespace and name.
    Service(String, String),
    /// An EgressNetwork, by namespace and name.
    EgressNetwork(String, String),
    /// A backend of a kind we do not support.
    Unknown,
}

/// Why the indexes cannot serve a route: what their conversion of it
/// refused, on each side (`None`: served, or no parent of that side).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Unserved {
    /// The inbound index's (Server parents).
    pub inbound: Option<String>,
    /// The outbound index's (Service and EgressNetwork parents).
    pub outbound: Option<String>,
}

/// A route as the status computation sees it.
#[derive(Clone, Copy, Debug)]
pub struct RouteView<'a> {
    /// The route's namespace.
    pub ns: &'a str,
    pub kind: RouteKind,
    pub parent_refs: &'a [ParentRef],
    pub backends: &'a [BackendTarget],
    pub generation: Option<i64>,
    pub current: Option<&'a HttpRouteStatus>,
    pub unserved: &'a Unserved,
}

/// What the status computation knows of the cluster.
#[derive(Clone, Copy, Debug)]
pub struct ClusterView<'a> {
    /// Server names by namespace.
    pub servers: &'a HashMap<String, BTreeSet<String>>,
    /// Server parents, by (namespace, name), by the most specific route
    /// kind naming them, as for Services.
    pub server_ranks: &'a HashMap<(String, String), u8>,
    /// Services by (namespace, name): whether each can be a parent (it
    /// has a ClusterIP and is not an ExternalName).
    pub services: &'a HashMap<(String, String), bool>,
    /// Service parents by the most specific route kind naming them
    /// ([`RouteKind::rank`]); a route of a less specific kind on one is
    /// conflicted.
    pub parent_ranks: &'a HashMap<ServiceParent, u8>,
    /// EgressNetworks by (namespace, name): whether our status accepted
    /// each.
    pub egress_networks: &'a HashMap<(String, String), bool>,
    /// EgressNetwork parents by the most specific route kind naming them.
    pub egress_parent_ranks: &'a HashMap<ServiceParent, u8>,
}

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
) -> (String, String, String, String) {
    let status = if status { "True" } else { "False" };
    (
        type_.to_string(),
        status.to_string(),
        reason.to_string(),
        message,
    )
}

/// The status a route should have: the entries of other controllers are
/// kept as they are; ours are one per distinct Server parent (`Accepted`,
/// `UnsupportedValue` when the inbound index cannot serve the route,
/// `NoMatchingParent` when the Server is missing, or `RouteConflicted`
/// when a route of a more specific kind names the same Server; its
/// `parentRef` written as group, kind, namespace and name, as the
/// original writes it) and one per distinct Service parent (`Accepted`, unless the
/// Service is missing or headless, `NoMatchingParent`, or a GRPCRoute has
/// the same parent, `RouteConflicted`; plus `ResolvedRefs`, or
/// `BackendNotFound` / `InvalidKind`). A condition whose status did not
/// change keeps its `lastTransitionTime`; new ones get `now`.
pub fn route_status(
    route: &RouteView<'_>,
    cluster: &ClusterView<'_>,
    now: &Time,
) -> HttpRouteStatus {
    let ns = route.ns;
    let current_parents = route
        .current
        .map(|s| s.parents.as_slice())
        .unwrap_or_default();
    let mut parents: Vec<RouteParentStatus> = current_parents
        .iter()
        .filter(|p| p.controller_name != POLICY_CONTROLLER_NAME)
        .cloned()
        .collect();
    let ours = |parent_ref: ParentRef, conditions: Vec<(String, String, String, String)>| {
        let conditions = conditions
            .into_iter()
            .map(|(type_, status, reason, message)| {
                let previous = current_parents
                    .iter()
                    .filter(|p| {
                        p.controller_name == POLICY_CONTROLLER_NAME && p.parent_ref == parent_ref
                    })
                    .flat_map(|p| &p.conditions)
                    .find(|c| c.type_ == type_ && c.status == status && c.reason == reason);
                Condition {
                    last_transition_time: previous
                        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone()),
                    type_,
                    status,
                    reason,
                    message,
                    observed_generation: route.generation,
                }
            })
            .collect();
        RouteParentStatus {
            parent_ref,
            controller_name: POLICY_CONTROLLER_NAME.to_string(),
            conditions,
        }
    };
    let mut seen = BTreeSet::new();
    for (server_ns, name) in server_parents(route.parent_refs, ns) {
        if !seen.insert((server_ns, name)) {
            continue;
        }
        let exists = cluster
            .servers
            .get(server_ns)
            .is_some_and(|names| names.contains(name));
        let conflicted = || {
            cluster
                .server_ranks
                .get(&(server_ns.to_string(), name.to_string()))
                .is_some_and(|best| *best < route.kind.rank())
        };
        let accepted = if let Some(why) = &route.unserved.inbound {
            condition(ACCEPTED, false, UNSUPPORTED_VALUE, why.clone())
        } else if !exists {
            condition(
                ACCEPTED,
                false,
                NO_MATCHING_PARENT,
                format!("Server {server_ns}/{name} not found"),
            )
        } else if conflicted() {
            condition(ACCEPTED, false, ROUTE_CONFLICTED, String::new())
        } else {
            condition(ACCEPTED, true, ACCEPTED, String::new())
        };
        let parent_ref = ParentRef {
            group: Some(k8s_api::policy::GROUP.to_string()),
            kind: Some("Server".to_string()),
            namespace: Some(server_ns.to_string()),
            name: name.to_string(),
            section_name: None,
            port: None,
        };
        parents.push(ours(parent_ref, vec![accepted]));
    }
    let resolved = resolved_refs(route.backends, cluster, None);
    let service_parents = route
        .parent_refs
        .iter()
        .filter(|p| is_service_ref(p.group.as_deref(), p.kind.as_deref()));
    let mut seen = BTreeSet::new();
    for parent in service_parents {
        let sp = ServiceParent {
            namespace: parent.namespace.clone().unwrap_or_else(|| ns.to_string()),
            name: parent.name.clone(),
            port: parent.port.and_then(std::num::NonZeroU16::new),
        };
        if !seen.insert(sp.clone()) {
            continue;
        }
        let accepted = match cluster
            .services
            .get(&(sp.namespace.clone(), sp.name.clone()))
        {
            _ if route.unserved.outbound.is_some() => unsupported(&route.unserved.outbound),
            None => condition(ACCEPTED, false, NO_MATCHING_PARENT, String::new()),
            Some(false) => condition(
                ACCEPTED,
                false,
                NO_MATCHING_PARENT,
                "parent service must have a ClusterIP".to_string(),
            ),
            Some(true)
                if cluster
                    .parent_ranks
                    .get(&sp)
                    .is_some_and(|best| *best < route.kind.rank()) =>
            {
                condition(ACCEPTED, false, ROUTE_CONFLICTED, String::new())
            }
            Some(true) => condition(ACCEPTED, true, ACCEPTED, String::new()),
        };
        let parent_ref = ParentRef {
            group: Some("core".to_string()),
            kind: Some("Service".to_string()),
            namespace: Some(sp.namespace.clone()),
            name: sp.name.clone(),
            section_name: None,
            port: sp.port.map(|p| p.get()),
        };
        parents.push(ours(parent_ref, vec![accepted, resolved.clone()]));
    }
    let mut seen = BTreeSet::new();
    for ep in crate::k8s::outbound::routes::egress_parents(route.parent_refs, ns) {
        if !seen.insert(ep.clone()) {
            continue;
        }
        let accepted = match cluster
            .egress_networks
            .get(&(ep.namespace.clone(), ep.name.clone()))
        {
            _ if route.unserved.outbound.is_some() => unsupported(&route.unserved.outbound),
            None => condition(ACCEPTED, false, NO_MATCHING_PARENT, String::new()),
            Some(false) => {
                let (reason, message) = policies::egress_not_accepted();
                condition(ACCEPTED, false, reason, message.to_string())
            }
            Some(true)
                if cluster
                    .egress_parent_ranks
                    .get(&ep)
                    .is_some_and(|best| *best < route.kind.rank()) =>
            {
                condition(ACCEPTED, false, ROUTE_CONFLICTED, String::new())
            }
            Some(true) => condition(ACCEPTED, true, ACCEPTED, String::new()),
        };
        let resolved = resolved_refs(
            route.backends,
            cluster,
            Some((ep.namespace.as_str(), ep.name.as_str())),
        );
        let parent_ref = ParentRef {
            group: Some(k8s_api::policy::GROUP.to_string()),
            kind: Some("EgressNetwork".to_string()),
            namespace: Some(ep.namespace.clone()),
            name: ep.name.clone(),
            section_name: None,
            port: ep.port.map(|p| p.get()),
        };
        parents.push(ours(parent_ref, vec![accepted, resolved]));
    }
    HttpRouteStatus { parents }
}

/// `Accepted=False` with `UnsupportedValue` and why.
fn unsupported(why: &Option<String>) -> (String, String, String, String) {
    condition(
        ACCEPTED,
        false,
        UNSUPPORTED_VALUE,
        why.clone().unwrap_or_default(),
    )
}

/// The (namespace, name) of every Server parent, the namespace defaulting
/// to the route's.
fn server_parents<'a>(
    parents: &'a [ParentRef],
    ns: &'a str,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    parents
        .iter()
        .filter(|p| is_server_parent(p))
        .map(move |p| (p.namespace.as_deref().unwrap_or(ns), p.name.as_str()))
}

/// `ResolvedRefs` of a route's backends, for a Service parent (`None`) or
/// an EgressNetwork parent: an EgressNetwork backend must be that parent.
fn resolved_refs(
    backends: &[BackendTarget],
    cluster: &ClusterView<'_>,
    egress_parent: Option<(&str, &str)>,
) -> (String, String, String, String) {
    for backend in backends {
        match backend {
            BackendTarget::EgressNetwork(ns, name) => {
                if !cluster
                    .egress_networks
                    .contains_key(&(ns.clone(), name.clone()))
                {
                    return condition(RESOLVED_REFS, false, BACKEND_NOT_FOUND, String::new());
                }
                if egress_parent != Some((ns.as_str(), name.as_str())) {
                    return condition(
                        RESOLVED_REFS,
                        false,
                        INVALID_KIND,
                        "EgressNetwork backend needs to be on a route that has an EgressNetwork parent"
                            .to_string(),
                    );
                }
            }
            BackendTarget::Unknown => {
                return condition(RESOLVED_REFS, false, INVALID_KIND, String::new());
            }
            BackendTarget::Service(ns, name) => {
                if !cluster.services.contains_key(&(ns.clone(), name.clone())) {
                    return condition(RESOLVED_REFS, false, BACKEND_NOT_FOUND, String::new());
                }
            }
        }
    }
    condition(RESOLVED_REFS, true, RESOLVED_REFS, String::new())
}

/// A route as the writer keeps it.
#[derive(Clone, Debug, PartialEq)]
struct RouteState {
    parents: Vec<ParentRef>,
    backends: Vec<BackendTarget>,
    generation: Option<i64>,
    status: Option<HttpRouteStatus>,
    unserved: Unserved,
    /// The `resourceVersion` of the object this state was read from.
    resource_version: Option<String>,
}

/// A status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusPatch {
    pub kind: RouteKind,
    pub namespace: String,
    pub name: String,
    pub status: HttpRouteStatus,
    /// The `resourceVersion` of the object the status was computed from:
    /// the patch carries it, so the API server refuses it (409) if the
    /// object changed since (another controller's entry in
    /// `status.parents`, which a merge patch would replace, is never
    /// dropped).
    pub resource_version: Option<String>,
}

/// Server names by namespace, Services, and the routes. Every change bumps
/// a counter the writer waits on.
#[derive(Debug)]
pub struct StatusIndex {
    /// Server names by namespace.
    servers: HashMap<String, BTreeSet<String>>,
    /// Services: whether each can be a route parent.
    services: HashMap<(String, String), bool>,
    /// Routes by kind, namespace and name.
    routes: BTreeMap<(RouteKind, String, String), RouteState>,
    /// Rate limit policies and EgressNetworks.
    policies: policies::PolicyStates,
    /// Bumped on every change.
    changes: watch::Sender<u64>,
}

impl Default for StatusIndex {
    fn default() -> Self {
        Self {
            servers: HashMap::new(),
            services: HashMap::new(),
            routes: BTreeMap::new(),
            policies: Default::default(),
            changes: watch::Sender::new(0),
        }
    }
}

impl StatusIndex {
    /// A new index behind the lock the watches share.
    pub fn shared() -> k8s_index::SharedIndex<Self> {
        k8s_index::SharedIndex::new(parking_lot::RwLock::new(Self::default()))
    }

    /// Changes whenever a Server, a Service or a route changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The routes whose current status differs from the desired one, with
    /// the status to write.
    pub fn patches(&self, now: &Time) -> Vec<StatusPatch> {
        let mut parent_ranks: HashMap<ServiceParent, u8> = HashMap::new();
        let mut egress_parent_ranks: HashMap<ServiceParent, u8> = HashMap::new();
        let mut server_ranks: HashMap<(String, String), u8> = HashMap::new();
        for ((kind, ns, _), r) in &self.routes {
            for parent in crate::k8s::outbound::routes::service_parents(&r.parents, ns) {
                let rank = parent_ranks.entry(parent).or_insert(u8::MAX);
                *rank = (*rank).min(kind.rank());
            }
            for parent in crate::k8s::outbound::routes::egress_parents(&r.parents, ns) {
                let rank = egress_parent_ranks.entry(parent).or_insert(u8::MAX);
                *rank = (*rank).min(kind.rank());
            }
            for (server_ns, name) in server_parents(&r.parents, ns) {
                let key = (server_ns.to_string(), name.to_string());
                let rank = server_ranks.entry(key).or_insert(u8::MAX);
                *rank = (*rank).min(kind.rank());
            }
        }
        let egress_networks = self.policies.egress_acceptance();
        self.routes
            .iter()
            .filter_map(|((kind, ns, name), route)| {
                let view = RouteView {
                    ns,
                    kind: *kind,
                    parent_refs: &route.parents,
                    backends: &route.backends,
                    generation: route.generation,
                    current: route.status.as_ref(),
                    unserved: &route.unserved,
                };
                let cluster = ClusterView {
                    servers: &self.servers,
                    server_ranks: &server_ranks,
                    services: &self.services,
                    parent_ranks: &parent_ranks,
                    egress_networks: &egress_networks,
                    egress_parent_ranks: &egress_parent_ranks,
                };
                let desired = route_status(&view, &cluster, now);
                let current = route.status.clone().unwrap_or_default();
                (desired != current).then(|| StatusPatch {
                    kind: *kind,
                    namespace: ns.clone(),
                    name: name.clone(),
                    status: desired,
                    resource_version: route.resource_version.clone(),
                })
            })
            .collect()
    }

    fn set_route(&mut self, key: Option<(RouteKind, String, String)>, state: Option<RouteState>) {
        let Some(key) = key else {
            return;
        };
        let changed = match state {
            Some(state) if self.routes.get(&key) != Some(&state) => {
                self.routes.insert(key, state);
                true
            }
            Some(_) => false,
            None => self.routes.remove(&key).is_some(),
        };
        if changed {
            self.changed();
        }
    }
}

fn ns_name(key: ObjectKey) -> Option<(String, String)> {
    Some((key.namespace?, key.name))
}

impl k8s_index::Index<Server> for StatusIndex {
    fn apply(&mut self, srv: Server) {
        let Some((ns, name)) = ObjectKey::of(&srv).and_then(ns_name) else {
            return;
        };
        if self.servers.entry(ns).or_default().insert(name) {
            self.changed();
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        let Some((ns, name)) = ns_name(key) else {
            return;
        };
        if let Some(names) = self.servers.get_mut(&ns)
            && names.remove(&name)
        {
            if names.is_empty() {
                self.servers.remove(&ns);
            }
            self.changed();
        }
    }
}

impl k8s_index::Index<Service> for StatusIndex {
    fn apply(&mut self, svc: Service) {
        let Some(key) = ObjectKey::of(&svc).and_then(ns_name) else {
            return;
        };
        let spec = svc.spec.as_ref();
        let has_cluster_ip = spec
            .and_then(|s| s.cluster_ip.as_deref())
            .is_some_and(|ip| !ip.is_empty() && !ip.eq_ignore_ascii_case("none"));
        let external_name = spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName");
        let valid = has_cluster_ip && !external_name;
        if self.services.insert(key, valid) != Some(valid) {
            self.changed();
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        if let Some(key) = ns_name(key)
            && self.services.remove(&key).is_some()
        {
            self.changed();
        }
    }
}

fn backends<'a>(refs: impl Iterator<Item = &'a HttpBackendRef>, ns: &str) -> Vec<BackendTarget> {
    refs.map(|b| {
        if crate::k8s::outbound::egress::is_egress_network_ref(
            b.group.as_deref(),
            b.kind.as_deref(),
        ) {
            BackendTarget::EgressNetwork(
                b.namespace.clone().unwrap_or_else(|| ns.to_string()),
                b.name.clone(),
            )
        } else if is_service_ref(
            b.group.as_deref(),
            Some(b.kind.as_deref().unwrap_or("Service")),
        ) {
            BackendTarget::Service(
                b.namespace.clone().unwrap_or_else(|| ns.to_string()),
                b.name.clone(),
            )
        } else {
            BackendTarget::Unknown
        }
    })
    .collect()
}

/// The cluster domain given to the outbound conversion, which only uses it
/// to name backends: whether it fails does not depend on it.
const CLUSTER_DOMAIN: &str = "cluster.local";

/// What the indexes' conversions refuse in a route, for the sides it has
/// parents on.
fn unserved<R: Conversions>(route: &R, parents: &[ParentRef], ns: &str) -> Unserved {
    let has_server = parents.iter().any(is_server_parent);
    let has_outbound = parents.iter().any(|p| {
        is_service_ref(p.group.as_deref(), p.kind.as_deref())
            || crate::k8s::outbound::egress::is_egress_network_ref(
                p.group.as_deref(),
                p.kind.as_deref(),
            )
    });
    Unserved {
        inbound: if has_server { route.inbound(ns) } else { None },
        outbound: if has_outbound { route.outbound() } else { None },
    }
}

fn err_text<T>(r: Result<T, crate::k8s::InvalidResource>) -> Option<String> {
    r.err().map(|e| e.to_string())
}

/// How each route kind is converted by the indexes (TLS and TCP routes
/// have no inbound side).
trait Conversions: RouteObject<Spec: OutboundSpec> + Sized {
    fn inbound(&self, _ns: &str) -> Option<String> {
        None
    }
    fn outbound(&self) -> Option<String> {
        err_text(crate::k8s::outbound::routes::binding(self, CLUSTER_DOMAIN))
    }
}

impl Conversions for HTTPRoute {
    fn inbound(&self, ns: &str) -> Option<String> {
        err_text(crate::k8s::routes::RouteBinding::from_resource(self, ns))
    }
}

impl Conversions for gateway::HTTPRoute {
    fn inbound(&self, ns: &str) -> Option<String> {
        err_text(crate::k8s::routes::RouteBinding::from_gateway(self, ns))
    }
}

impl Conversions for gateway::GRPCRoute {
    fn inbound(&self, ns: &str) -> Option<String> {
        err_text(crate::k8s::grpc_route::GrpcRouteBinding::from_resource(
            self, ns,
        ))
    }
}

impl Conversions for gateway::TLSRoute {}

impl Conversions for gateway::TCPRoute {}

macro_rules! status_route {
    ($ty:ty, $kind:expr) => {
        impl k8s_index::Index<$ty> for StatusIndex {
            fn apply(&mut self, route: $ty) {
                let key = ObjectKey::of(&route)
                    .and_then(ns_name)
                    .map(|(ns, name)| ($kind, ns, name));
                let ns = route.metadata.namespace.clone().unwrap_or_default();
                let unserved = unserved(
                    &route,
                    route.spec.parent_refs.as_deref().unwrap_or_default(),
                    &ns,
                );
                let backend_refs = route
                    .spec
                    .rules
                    .iter()
                    .flatten()
                    .flat_map(|r| r.backend_refs.iter().flatten());
                let state = RouteState {
                    backends: backends(backend_refs, &ns),
                    parents: route.spec.parent_refs.unwrap_or_default(),
                    generation: route.metadata.generation,
                    status: route.status,
                    unserved,
                    resource_version: route.metadata.resource_version,
                };
                self.set_route(key, Some(state));
            }

            fn delete(&mut self, key: ObjectKey) {
                let key = ns_name(key).map(|(ns, name)| ($kind, ns, name));
                self.set_route(key, None);
            }
        }
    };
}

status_route!(HTTPRoute, RouteKind::PolicyHttp);
status_route!(gateway::HTTPRoute, RouteKind::GatewayHttp);
status_route!(gateway::GRPCRoute, RouteKind::Grpc);
status_route!(gateway::TLSRoute, RouteKind::Tls);
status_route!(gateway::TCPRoute, RouteKind::Tcp);

#[cfg(test)]
mod tests;
