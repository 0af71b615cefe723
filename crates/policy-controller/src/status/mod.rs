//! The HTTPRoute status writer: the policy controller accepts the inbound
//! routes whose parent Server exists (and says `NoMatchingParent` for the
//! others) by writing `status.parents[]`, which is what attaches a route in
//! the index.
//!
//! - [`route_status`]: the pure computation (a route and the Servers of
//!   its namespace → its desired status);
//! - [`StatusIndex`]: the Servers and routes the writer needs, fed by the
//!   same watches as the policy index;
//! - [`lease`]: leader election through a `coordination.k8s.io/v1` Lease,
//!   so only one replica writes;
//! - [`writer`]: the thin async loop that patches the `status` subresource
//!   while this replica leads.

pub mod lease;
pub mod writer;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_api::policy::{
    HTTPRoute, HttpRouteStatus, Server,
    http_route::{POLICY_CONTROLLER_NAME, ParentRef, RouteParentStatus},
};
use k8s_index::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use tokio::sync::watch;

pub use self::{lease::LeaseParams, writer::StatusWriter};
use crate::index::is_server_parent;

/// The condition type the index reads.
pub const ACCEPTED: &str = "Accepted";
/// The reason of `Accepted=False` when the parent Server does not exist.
pub const NO_MATCHING_PARENT: &str = "NoMatchingParent";

/// The status a route should have: the entries of other controllers are
/// kept as they are; ours are one per distinct Server parent in the route's
/// namespace (`ns`), `Accepted=True` if `servers` has it, else
/// `Accepted=False` with reason `NoMatchingParent`. A condition whose
/// status did not change keeps its `lastTransitionTime`; new ones get
/// `now`.
pub fn route_status(
    ns: &str,
    parent_refs: &[ParentRef],
    generation: Option<i64>,
    current: Option<&HttpRouteStatus>,
    servers: &BTreeSet<String>,
    now: &Time,
) -> HttpRouteStatus {
    let current_parents = current.map(|s| s.parents.as_slice()).unwrap_or_default();
    let mut parents: Vec<RouteParentStatus> = current_parents
        .iter()
        .filter(|p| p.controller_name != POLICY_CONTROLLER_NAME)
        .cloned()
        .collect();
    let mut seen = BTreeSet::new();
    for parent in parent_refs {
        let local = parent.namespace.as_deref().is_none_or(|n| n == ns);
        if !is_server_parent(parent) || !local || !seen.insert(parent.name.as_str()) {
            continue;
        }
        let (status, reason, message) = if servers.contains(&parent.name) {
            ("True", ACCEPTED, String::new())
        } else {
            (
                "False",
                NO_MATCHING_PARENT,
                format!("Server {ns}/{} not found", parent.name),
            )
        };
        let previous = current_parents
            .iter()
            .filter(|p| p.controller_name == POLICY_CONTROLLER_NAME && &p.parent_ref == parent)
            .flat_map(|p| &p.conditions)
            .find(|c| c.type_ == ACCEPTED && c.status == status);
        parents.push(RouteParentStatus {
            parent_ref: parent.clone(),
            controller_name: POLICY_CONTROLLER_NAME.to_string(),
            conditions: vec![Condition {
                type_: ACCEPTED.to_string(),
                status: status.to_string(),
                reason: reason.to_string(),
                message,
                observed_generation: generation,
                last_transition_time: previous
                    .map_or_else(|| now.clone(), |c| c.last_transition_time.clone()),
            }],
        });
    }
    HttpRouteStatus { parents }
}

/// A route as the writer sees it.
#[derive(Clone, Debug, PartialEq)]
struct RouteState {
    parents: Vec<ParentRef>,
    generation: Option<i64>,
    status: Option<HttpRouteStatus>,
}

/// A status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct StatusPatch {
    pub namespace: String,
    pub name: String,
    pub status: HttpRouteStatus,
}

/// Server names by namespace and the policy HTTPRoutes. Every change bumps
/// a counter the writer waits on.
#[derive(Debug)]
pub struct StatusIndex {
    servers: HashMap<String, BTreeSet<String>>,
    routes: BTreeMap<(String, String), RouteState>,
    changes: watch::Sender<u64>,
}

impl Default for StatusIndex {
    fn default() -> Self {
        Self {
            servers: HashMap::new(),
            routes: BTreeMap::new(),
            changes: watch::Sender::new(0),
        }
    }
}

impl StatusIndex {
    /// A new index behind the lock the watches share.
    pub fn shared() -> k8s_index::SharedIndex<Self> {
        k8s_index::SharedIndex::new(parking_lot::RwLock::new(Self::default()))
    }

    /// Changes whenever a Server or a route changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// The routes whose current status differs from the desired one, with
    /// the status to write.
    pub fn patches(&self, now: &Time) -> Vec<StatusPatch> {
        let no_servers = BTreeSet::new();
        self.routes
            .iter()
            .filter_map(|((ns, name), route)| {
                let servers = self.servers.get(ns).unwrap_or(&no_servers);
                let desired = route_status(
                    ns,
                    &route.parents,
                    route.generation,
                    route.status.as_ref(),
                    servers,
                    now,
                );
                let current = route.status.clone().unwrap_or_default();
                (desired != current).then(|| StatusPatch {
                    namespace: ns.clone(),
                    name: name.clone(),
                    status: desired,
                })
            })
            .collect()
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

impl k8s_index::Index<HTTPRoute> for StatusIndex {
    fn apply(&mut self, route: HTTPRoute) {
        let Some(key) = ObjectKey::of(&route).and_then(ns_name) else {
            return;
        };
        let state = RouteState {
            parents: route.spec.parent_refs.unwrap_or_default(),
            generation: route.metadata.generation,
            status: route.status,
        };
        if self.routes.get(&key) != Some(&state) {
            self.routes.insert(key, state);
            self.changed();
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        if let Some(key) = ns_name(key)
            && self.routes.remove(&key).is_some()
        {
            self.changed();
        }
    }
}

#[cfg(test)]
mod tests;
