//! Routes whose status Meridian's policy controller would write otherwise
//! than the running Linkerd did: the objects are fed to the policy
//! controller's own status index (`policy_controller::status`, the code
//! the status writer runs), and each route's desired conditions of
//! `linkerd.io/policy-controller` are compared with those in its current
//! status by parent, type, status and reason (messages and times are
//! not compared: the two controllers word them differently).

use std::collections::HashMap;

use k8s_api::{
    gateway,
    policy::{
        EgressNetwork, HTTPRoute, HttpRouteStatus, Server,
        http_route::{POLICY_CONTROLLER_NAME, ParentRef},
    },
};
use k8s_index::Index;
use k8s_openapi::{
    api::core::v1::Service,
    apimachinery::pkg::apis::meta::v1::{Condition, Time},
    jiff::Timestamp,
};
use policy_controller::status::{RouteKind, StatusIndex};

use super::Finding;

/// The cluster's objects the route statuses depend on.
#[derive(Clone, Debug, Default)]
pub struct RouteObjects {
    pub servers: Vec<Server>,
    pub services: Vec<Service>,
    pub egress_networks: Vec<EgressNetwork>,
    pub policy_http: Vec<HTTPRoute>,
    pub gateway_http: Vec<gateway::HTTPRoute>,
    pub grpc: Vec<gateway::GRPCRoute>,
    pub tls: Vec<gateway::TLSRoute>,
    pub tcp: Vec<gateway::TCPRoute>,
}

/// The kind of a route as printed (the policy HTTPRoute with its group).
pub fn kind_name(kind: RouteKind) -> &'static str {
    match kind {
        RouteKind::PolicyHttp => "HTTPRoute.policy.linkerd.io",
        RouteKind::GatewayHttp => "HTTPRoute.gateway.networking.k8s.io",
        RouteKind::Grpc => "GRPCRoute",
        RouteKind::Tls => "TLSRoute",
        RouteKind::Tcp => "TCPRoute",
    }
}

type Key = (RouteKind, String, String);

fn key(kind: RouteKind, meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Key {
    (
        kind,
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// One finding per route parent condition Meridian would write otherwise.
pub fn findings(objects: RouteObjects) -> Vec<Finding> {
    let mut index = StatusIndex::default();
    let mut current: HashMap<Key, Option<HttpRouteStatus>> = HashMap::new();
    for o in objects.servers {
        index.apply(o);
    }
    for o in objects.services {
        index.apply(o);
    }
    for o in objects.egress_networks {
        index.apply(o);
    }
    macro_rules! routes {
        ($list:expr, $kind:expr) => {
            for route in $list {
                current.insert(key($kind, &route.metadata), route.status.clone());
                index.apply(route);
            }
        };
    }
    routes!(objects.policy_http, RouteKind::PolicyHttp);
    routes!(objects.gateway_http, RouteKind::GatewayHttp);
    routes!(objects.grpc, RouteKind::Grpc);
    routes!(objects.tls, RouteKind::Tls);
    routes!(objects.tcp, RouteKind::Tcp);

    let mut out = Vec::new();
    for patch in index.patches(&Time(Timestamp::now())) {
        let k = (patch.kind, patch.namespace.clone(), patch.name.clone());
        let before = current.get(&k).cloned().flatten().unwrap_or_default();
        for (what, why) in changes(&before, &patch.status) {
            out.push(Finding {
                kind: kind_name(patch.kind).to_string(),
                name: format!("{}/{}", patch.namespace, patch.name),
                what,
                why,
            });
        }
    }
    out.sort();
    out
}

fn parent_name(p: &ParentRef) -> String {
    let kind = p.kind.as_deref().unwrap_or("Service");
    let ns = p
        .namespace
        .as_deref()
        .map(|n| format!("{n}/"))
        .unwrap_or_default();
    let port = p.port.map(|p| format!(":{p}")).unwrap_or_default();
    format!("{kind} {ns}{}{port}", p.name)
}

fn show(c: Option<&Condition>) -> String {
    match c {
        Some(c) => format!("{} ({})", c.status, c.reason),
        None => "none".to_string(),
    }
}

/// Why a condition is what Meridian would write.
fn why(c: &Condition) -> String {
    if !c.message.is_empty() {
        return c.message.clone();
    }
    match c.reason.as_str() {
        "Accepted" | "ResolvedRefs" => "Meridian's policy controller accepts it".into(),
        "NoMatchingParent" => "the parent does not exist or cannot be a parent".into(),
        "RouteConflicted" => "a route of a more specific kind names the same parent".into(),
        "BackendNotFound" => "a backend does not exist".into(),
        "InvalidKind" => "a backend is of a kind that cannot be served".into(),
        other => other.to_string(),
    }
}

/// What changes between the status Linkerd wrote (`before`) and the one
/// Meridian would write (`after`), as (what, why) per condition of the
/// policy controller's parent entries.
pub fn changes(before: &HttpRouteStatus, after: &HttpRouteStatus) -> Vec<(String, String)> {
    let ours = |s: &HttpRouteStatus| {
        s.parents
            .iter()
            .filter(|p| p.controller_name == POLICY_CONTROLLER_NAME)
            .cloned()
            .collect::<Vec<_>>()
    };
    let (before, after) = (ours(before), ours(after));
    let mut out = Vec::new();
    for parent in &after {
        let old = before.iter().find(|p| p.parent_ref == parent.parent_ref);
        for c in &parent.conditions {
            let was = old.and_then(|p| p.conditions.iter().find(|o| o.type_ == c.type_));
            if was.is_some_and(|w| w.status == c.status && w.reason == c.reason) {
                continue;
            }
            out.push((
                format!(
                    "{} on {}: {} -> {}",
                    c.type_,
                    parent_name(&parent.parent_ref),
                    show(was),
                    show(Some(c))
                ),
                why(c),
            ));
        }
    }
    for parent in &before {
        if !after.iter().any(|p| p.parent_ref == parent.parent_ref) {
            out.push((
                format!("status of {} removed", parent_name(&parent.parent_ref)),
                "Meridian does not count it as a parent of the route".into(),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_api::policy::http_route::RouteParentStatus;

    fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: Some(1),
        }
    }

    fn status(conditions: Vec<Condition>) -> HttpRouteStatus {
        HttpRouteStatus {
            parents: vec![RouteParentStatus {
                parent_ref: ParentRef {
                    group: Some("policy.linkerd.io".into()),
                    kind: Some("Server".into()),
                    namespace: Some("shop".into()),
                    name: "web".into(),
                    section_name: None,
                    port: None,
                },
                controller_name: POLICY_CONTROLLER_NAME.into(),
                conditions,
            }],
        }
    }

    #[test]
    fn equal_conditions_are_no_change_whatever_the_message() {
        let before = status(vec![condition("Accepted", "True", "Accepted", "")]);
        let after = status(vec![condition(
            "Accepted",
            "True",
            "Accepted",
            "other words",
        )]);
        assert!(changes(&before, &after).is_empty());
    }

    #[test]
    fn a_flip_names_the_parent_both_states_and_the_reason() {
        let before = status(vec![condition("Accepted", "True", "Accepted", "")]);
        let after = status(vec![condition(
            "Accepted",
            "False",
            "UnsupportedValue",
            "RequestMirror filter is not supported",
        )]);
        assert_eq!(
            changes(&before, &after),
            vec![(
                "Accepted on Server shop/web: True (Accepted) -> False (UnsupportedValue)"
                    .to_string(),
                "RequestMirror filter is not supported".to_string()
            )]
        );
        let missing = changes(&HttpRouteStatus::default(), &before);
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].0.contains("none -> True (Accepted)"),
            "{missing:?}"
        );
        let removed = changes(&before, &HttpRouteStatus::default());
        assert!(
            removed[0]
                .0
                .starts_with("status of Server shop/web removed")
        );
    }
}
