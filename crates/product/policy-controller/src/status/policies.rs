//! The status of HTTPLocalRateLimitPolicies and EgressNetworks, as the
//! original writes it.
//!
//! - A rate limit policy targeting a Server that exists is `Accepted` if it
//!   is the oldest (then first by name) policy targeting that Server, else
//!   `Accepted=False` with `RateLimitReasonAlreadyExists`; a missing Server
//!   gives `NoMatchingTarget`. The status also names the target.
//! - An EgressNetwork is `Accepted` unless one of its networks overlaps the
//!   cluster networks (`EgressReasonNetworkOverlap`); conditions of other
//!   types are kept.
//!
//! A condition whose type, status and reason did not change keeps its
//! `lastTransitionTime`. Each patch carries the `resourceVersion` its
//! status was computed from (an EgressNetwork's conditions of other types
//! are never dropped by a patch computed before they were added).

use std::{
    collections::{BTreeMap, BTreeSet},
    time::SystemTime,
};

use ipnet::IpNet;
use k8s_api::policy::{
    self, EgressNetwork, EgressNetworkStatus, HTTPLocalRateLimitPolicy,
    HttpLocalRateLimitPolicyStatus, LocalTargetRef,
};
use k8s_index::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::{ACCEPTED, NO_MATCHING_PARENT, StatusIndex, ns_name};
use crate::{
    core::{NetworkMatch, egress::overlaps_cluster_networks},
    k8s::{outbound::egress::egress_network_networks, ratelimit::by_age},
};

/// `Accepted=False`: the target Server does not exist.
pub const NO_MATCHING_TARGET: &str = "NoMatchingTarget";
/// `Accepted=False`: an older policy targets the same Server.
pub const RATELIMIT_ALREADY_EXISTS: &str = "RateLimitReasonAlreadyExists";
/// `Accepted=False`: the EgressNetwork overlaps the cluster networks.
pub const EGRESS_NETWORK_OVERLAP: &str = "EgressReasonNetworkOverlap";

/// A rate limit policy as the writer keeps it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct RateLimitState {
    /// The Server targeted; `None` for a target of another kind (no status
    /// is written then).
    server: Option<String>,
    created_at: Option<SystemTime>,
    generation: Option<i64>,
    conditions: Vec<Condition>,
    /// The `resourceVersion` this state was read at.
    resource_version: Option<String>,
}

/// An EgressNetwork as the writer keeps it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct EgressState {
    /// `None`: its networks do not parse (no status is written).
    networks: Option<Vec<NetworkMatch>>,
    generation: Option<i64>,
    conditions: Vec<Condition>,
    /// The `resourceVersion` this state was read at.
    resource_version: Option<String>,
}

/// The policies whose status the writer owns.
#[derive(Debug, Default)]
pub(super) struct PolicyStates {
    ratelimits: BTreeMap<(String, String), RateLimitState>,
    egress_networks: BTreeMap<(String, String), EgressState>,
    /// `--cluster-networks`.
    cluster_networks: Vec<IpNet>,
}

/// The kinds of [`PolicyPatch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PolicyKind {
    RateLimit,
    EgressNetwork,
}

/// A policy status to write.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyPatch {
    pub kind: PolicyKind,
    pub namespace: String,
    pub name: String,
    pub status: serde_json::Value,
    /// The `resourceVersion` of the object the status was computed from
    /// (the patch is refused if the object changed since).
    pub resource_version: Option<String>,
}

fn condition(
    previous: &[Condition],
    status: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" };
    let kept = previous
        .iter()
        .find(|c| c.type_ == ACCEPTED && c.status == status && c.reason == reason);
    Condition {
        last_transition_time: kept.map_or_else(|| now.clone(), |c| c.last_transition_time.clone()),
        message: message.to_string(),
        observed_generation: generation,
        reason: reason.to_string(),
        status: status.to_string(),
        type_: ACCEPTED.to_string(),
    }
}

/// Conditions equal but for their transition times.
fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(a, b)| {
            a.type_ == b.type_
                && a.status == b.status
                && a.reason == b.reason
                && a.message == b.message
                && a.observed_generation == b.observed_generation
        })
}

impl PolicyStates {
    /// Every EgressNetwork, and whether our status accepts it (what
    /// route parents are checked against).
    pub(super) fn egress_acceptance(&self) -> std::collections::HashMap<(String, String), bool> {
        self.egress_networks
            .iter()
            .map(|(key, state)| {
                let accepted = state
                    .conditions
                    .iter()
                    .any(|c| c.type_ == ACCEPTED && c.status == "True");
                (key.clone(), accepted)
            })
            .collect()
    }

    fn ratelimit_patch(
        &self,
        (ns, name): &(String, String),
        rl: &RateLimitState,
        servers: Option<&BTreeSet<String>>,
        now: &Time,
    ) -> Option<PolicyPatch> {
        let server = rl.server.as_ref()?;
        let accepted = if servers.is_some_and(|s| s.contains(server)) {
            let first = self
                .ratelimits
                .iter()
                .filter(|((other_ns, _), other)| {
                    other_ns == ns && other.server.as_ref() == Some(server)
                })
                .min_by(|((_, a_name), a), ((_, b_name), b)| {
                    by_age(a.created_at, b.created_at).then_with(|| a_name.cmp(b_name))
                })
                .map(|((_, n), _)| n);
            if first == Some(name) {
                condition(&rl.conditions, true, ACCEPTED, "", rl.generation, now)
            } else {
                condition(
                    &rl.conditions,
                    false,
                    RATELIMIT_ALREADY_EXISTS,
                    "",
                    rl.generation,
                    now,
                )
            }
        } else {
            condition(
                &rl.conditions,
                false,
                NO_MATCHING_TARGET,
                "",
                rl.generation,
                now,
            )
        };
        let conditions = vec![accepted];
        if same_conditions(&conditions, &rl.conditions) {
            return None;
        }
        let status = HttpLocalRateLimitPolicyStatus {
            conditions,
            target_ref: Some(LocalTargetRef {
                group: Some(policy::GROUP.to_string()),
                kind: "Server".to_string(),
                name: server.clone(),
            }),
        };
        Some(PolicyPatch {
            kind: PolicyKind::RateLimit,
            namespace: ns.clone(),
            name: name.clone(),
            status: serde_json::to_value(status).ok()?,
            resource_version: rl.resource_version.clone(),
        })
    }

    fn egress_patch(
        &self,
        (ns, name): &(String, String),
        net: &EgressState,
        now: &Time,
    ) -> Option<PolicyPatch> {
        let networks = net.networks.as_ref()?;
        let accepted = if overlaps_cluster_networks(networks, &self.cluster_networks) {
            condition(
                &net.conditions,
                false,
                EGRESS_NETWORK_OVERLAP,
                "networks overlap with clusterNetworks",
                net.generation,
                now,
            )
        } else {
            condition(&net.conditions, true, ACCEPTED, "", net.generation, now)
        };
        let conditions: Vec<_> = net
            .conditions
            .iter()
            .filter(|c| c.type_ != ACCEPTED)
            .cloned()
            .chain([accepted])
            .collect();
        if same_conditions(&conditions, &net.conditions) {
            return None;
        }
        let status = EgressNetworkStatus { conditions };
        Some(PolicyPatch {
            kind: PolicyKind::EgressNetwork,
            namespace: ns.clone(),
            name: name.clone(),
            status: serde_json::to_value(status).ok()?,
            resource_version: net.resource_version.clone(),
        })
    }
}

impl StatusIndex {
    /// Uses `networks` (`--cluster-networks`) for the EgressNetwork overlap
    /// check and the default egress networks.
    pub fn set_cluster_networks(&mut self, networks: Vec<IpNet>) {
        self.policies.cluster_networks = networks;
        self.changed();
    }

    /// The rate limit policies and EgressNetworks whose current status
    /// differs from the desired one, with the status to write.
    pub fn policy_patches(&self, now: &Time) -> Vec<PolicyPatch> {
        let p = &self.policies;
        let ratelimits = p
            .ratelimits
            .iter()
            .filter_map(|(key, rl)| p.ratelimit_patch(key, rl, self.servers.get(&key.0), now));
        let egress = p
            .egress_networks
            .iter()
            .filter_map(|(key, net)| p.egress_patch(key, net, now));
        ratelimits.chain(egress).collect()
    }
}

fn set<T: PartialEq>(
    map: &mut BTreeMap<(String, String), T>,
    key: (String, String),
    value: Option<T>,
) -> bool {
    match value {
        Some(v) if map.get(&key) != Some(&v) => {
            map.insert(key, v);
            true
        }
        Some(_) => false,
        None => map.remove(&key).is_some(),
    }
}

impl k8s_index::Index<HTTPLocalRateLimitPolicy> for StatusIndex {
    fn apply(&mut self, rl: HTTPLocalRateLimitPolicy) {
        let Some(key) = ObjectKey::of(&rl).and_then(ns_name) else {
            return;
        };
        let target = &rl.spec.target_ref;
        let state = RateLimitState {
            server: target
                .targets_kind(policy::GROUP, "Server")
                .then(|| target.name.clone()),
            created_at: rl
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| SystemTime::from(t.0)),
            generation: rl.metadata.generation,
            conditions: rl.status.map(|s| s.conditions).unwrap_or_default(),
            resource_version: rl.metadata.resource_version,
        };
        if set(&mut self.policies.ratelimits, key, Some(state)) {
            self.changed();
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        if let Some(key) = ns_name(key)
            && set::<RateLimitState>(&mut self.policies.ratelimits, key, None)
        {
            self.changed();
        }
    }
}

impl k8s_index::Index<EgressNetwork> for StatusIndex {
    fn apply(&mut self, net: EgressNetwork) {
        let Some(key) = ObjectKey::of(&net).and_then(ns_name) else {
            return;
        };
        let state = EgressState {
            networks: egress_network_networks(&net.spec, &self.policies.cluster_networks).ok(),
            generation: net.metadata.generation,
            conditions: net.status.map(|s| s.conditions).unwrap_or_default(),
            resource_version: net.metadata.resource_version,
        };
        if set(&mut self.policies.egress_networks, key, Some(state)) {
            self.changed();
        }
    }

    fn delete(&mut self, key: ObjectKey) {
        if let Some(key) = ns_name(key)
            && set::<EgressState>(&mut self.policies.egress_networks, key, None)
        {
            self.changed();
        }
    }
}

/// `NoMatchingParent` with the original's message, for a route whose
/// EgressNetwork parent exists but is not accepted.
pub(super) fn egress_not_accepted() -> (&'static str, &'static str) {
    (
        NO_MATCHING_PARENT,
        "EgressNetwork parent has not been accepted",
    )
}
