//! Rate limit and EgressNetwork statuses, without a server.

use k8s_api::policy::{EgressNetwork, HTTPLocalRateLimitPolicy};

use super::*;
use crate::status::policies::{
    EGRESS_NETWORK_OVERLAP, NO_MATCHING_TARGET, RATELIMIT_ALREADY_EXISTS,
};

fn ratelimit(name: &str, created: i64, server: &str) -> HTTPLocalRateLimitPolicy {
    serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "HTTPLocalRateLimitPolicy",
        "metadata": {"namespace": "ns", "name": name, "creationTimestamp": time(created), "resourceVersion": "3"},
        "spec": {"targetRef": {"group": "policy.linkerd.io", "kind": "Server", "name": server},
            "total": {"requestsPerSecond": 10}},
    }))
    .expect("ratelimit")
}

fn egress(name: &str, networks: Value) -> EgressNetwork {
    serde_json::from_value(json!({
        "apiVersion": "policy.linkerd.io/v1alpha1", "kind": "EgressNetwork",
        "metadata": {"namespace": "ns", "name": name, "resourceVersion": "4"},
        "spec": {"networks": networks, "trafficPolicy": "Allow"},
    }))
    .expect("egress network")
}

/// (name, status, reason) of each patch's Accepted condition.
fn accepted(patches: &[crate::status::policies::PolicyPatch]) -> Vec<(String, String, String)> {
    patches
        .iter()
        .map(|p| {
            let c = p.status["conditions"]
                .as_array()
                .and_then(|cs| cs.iter().find(|c| c["type"] == "Accepted"))
                .expect("accepted condition");
            (
                p.name.clone(),
                c["status"].as_str().unwrap_or_default().to_string(),
                c["reason"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

fn row(name: &str, status: &str, reason: &str) -> (String, String, String) {
    (name.into(), status.into(), reason.into())
}

#[test]
fn the_oldest_ratelimit_of_an_existing_server_is_accepted() {
    let now = time(100);
    let mut index = StatusIndex::default();
    index.apply(ratelimit("newer", 20, "web"));
    index.apply(ratelimit("older", 10, "web"));
    assert_eq!(
        accepted(&index.policy_patches(&now)),
        [
            row("newer", "False", NO_MATCHING_TARGET),
            row("older", "False", NO_MATCHING_TARGET)
        ]
    );
    index.apply(server("web"));
    let patches = index.policy_patches(&now);
    assert_eq!(
        accepted(&patches),
        [
            row("newer", "False", RATELIMIT_ALREADY_EXISTS),
            row("older", "True", ACCEPTED)
        ]
    );
    assert_eq!(
        patches[1].status["targetRef"],
        json!({"group": "policy.linkerd.io", "kind": "Server", "name": "web"})
    );

    // Once written, nothing more is patched.
    let mut written = ratelimit("older", 10, "web");
    written.status = serde_json::from_value(patches[1].status.clone()).expect("status");
    index.apply(written);
    assert_eq!(
        accepted(&index.policy_patches(&time(200))),
        [row("newer", "False", RATELIMIT_ALREADY_EXISTS)]
    );
}

#[test]
fn egress_networks_overlapping_the_cluster_are_not_accepted() {
    let now = time(0);
    let mut index = StatusIndex::default();
    index.set_cluster_networks(vec!["10.0.0.0/8".parse().expect("net")]);
    index.apply(egress("outside", json!([{"cidr": "1.0.0.0/8"}])));
    index.apply(egress("inside", json!([{"cidr": "10.1.0.0/16"}])));
    index.apply(egress("everything", json!(null)));
    index.apply(egress(
        "excepted",
        json!([{"cidr": "0.0.0.0/0", "except": ["10.0.0.0/8"]}]),
    ));
    let patches = index.policy_patches(&now);
    assert_eq!(
        accepted(&patches),
        [
            row("everything", "True", ACCEPTED),
            row("excepted", "True", ACCEPTED),
            row("inside", "False", EGRESS_NETWORK_OVERLAP),
            row("outside", "True", ACCEPTED),
        ]
    );
    assert_eq!(
        patches[2].status["conditions"][0]["message"],
        "networks overlap with clusterNetworks"
    );
}

/// `(status, reason, message)` of our Accepted condition for the
/// EgressNetwork parent of the route patch of `kind`.
fn egress_parent_condition(
    index: &StatusIndex,
    kind: RouteKind,
    now: &Time,
) -> Option<(String, String, String)> {
    let patch = index.patches(now).into_iter().find(|p| p.kind == kind)?;
    let parent = patch
        .status
        .parents
        .iter()
        .find(|p| p.parent_ref.kind.as_deref() == Some("EgressNetwork"))?;
    assert_eq!(parent.parent_ref.namespace.as_deref(), Some("ns"));
    assert_eq!(parent.parent_ref.port, Some(443));
    let c = parent.conditions.iter().find(|c| c.type_ == ACCEPTED)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

#[test]
fn routes_with_an_egress_network_parent_follow_its_acceptance() {
    let now = time(0);
    let mut index = StatusIndex::default();
    let parent = json!([{"group": "policy.linkerd.io", "kind": "EgressNetwork", "name": "ext", "port": 443}]);
    let tls: gateway::TLSRoute = serde_json::from_value(gateway_route(
        "TLSRoute",
        "t",
        parent,
        json!([]),
        json!({"parents": []}),
    ))
    .expect("tls route");
    index.apply(tls);
    assert_eq!(
        egress_parent_condition(&index, RouteKind::Tls, &now),
        Some(("False".into(), NO_MATCHING_PARENT.into(), String::new()))
    );
    index.apply(egress("ext", json!([{"cidr": "1.0.0.0/8"}])));
    assert_eq!(
        egress_parent_condition(&index, RouteKind::Tls, &now),
        Some((
            "False".into(),
            NO_MATCHING_PARENT.into(),
            "EgressNetwork parent has not been accepted".into()
        ))
    );
    let mut accepted = egress("ext", json!([{"cidr": "1.0.0.0/8"}]));
    accepted.status = Some(k8s_api::policy::EgressNetworkStatus {
        conditions: vec![Condition {
            last_transition_time: now.clone(),
            message: String::new(),
            observed_generation: None,
            reason: ACCEPTED.into(),
            status: "True".into(),
            type_: ACCEPTED.into(),
        }],
    });
    index.apply(accepted);
    assert_eq!(
        egress_parent_condition(&index, RouteKind::Tls, &now),
        Some(("True".into(), ACCEPTED.into(), String::new()))
    );
}

#[test]
fn policy_patches_carry_the_version_they_were_computed_from() {
    let now = time(100);
    let mut index = StatusIndex::default();
    index.apply(ratelimit("rl", 10, "web"));
    index.apply(egress("net", json!([{"cidr": "192.0.2.0/24"}])));
    let versions: Vec<_> = index
        .policy_patches(&now)
        .into_iter()
        .map(|p| (p.name, p.resource_version))
        .collect();
    assert_eq!(
        versions,
        [
            ("rl".to_string(), Some("3".to_string())),
            ("net".to_string(), Some("4".to_string()))
        ]
    );
}
