//! `EgressNetwork` resources as the outbound index and the status writer
//! use them: the networks they capture, their `trafficPolicy`, and the
//! settings their annotations give the egress policy ([`EgressEntry`]).
//! Admission runs the same conversion plus [`check_egress_network`].

use std::time::SystemTime;

use ipnet::IpNet;
use k8s_api::policy::{self, EgressNetwork};

use super::annotations::{Annotations, OutboundSettings};
use crate::{
    core::{
        NetworkMatch,
        egress::{EgressNetworkInfo, TrafficPolicy, default_egress_networks},
    },
    k8s::{InvalidResource, authz::networks},
};

/// The networks an EgressNetwork spec captures (everything outside
/// `cluster_networks` when it lists none). Only unparsable networks are an
/// error here; [`check_egress_network`] adds admission's rules.
pub fn egress_network_networks(
    spec: &policy::EgressNetworkSpec,
    cluster_networks: &[IpNet],
) -> Result<Vec<NetworkMatch>, InvalidResource> {
    match &spec.networks {
        None => Ok(default_egress_networks(cluster_networks)),
        Some(list) => list
            .iter()
            .map(|n| {
                NetworkMatch::parse(&n.cidr, n.except.iter().flatten().map(String::as_str))
                    .map_err(InvalidResource::from)
            })
            .collect(),
    }
}

/// Admission's rules for an EgressNetwork: a network list, when given, is
/// not empty, and each `except` lies inside its `cidr` without covering it.
pub fn check_egress_network(spec: &policy::EgressNetworkSpec) -> Result<(), InvalidResource> {
    match &spec.networks {
        None => Ok(()),
        Some(list) if list.is_empty() => Err(InvalidResource::NoNetworks),
        Some(list) => networks(list.iter()).map(|_| ()),
    }
}

/// Converts an EgressNetwork resource.
pub fn egress_network(
    net: &EgressNetwork,
    cluster_networks: &[IpNet],
) -> Result<EgressNetworkInfo, InvalidResource> {
    Ok(EgressNetworkInfo {
        namespace: net.metadata.namespace.clone().unwrap_or_default(),
        name: net.metadata.name.clone().unwrap_or_default(),
        networks: egress_network_networks(&net.spec, cluster_networks)?,
        traffic_policy: match net.spec.traffic_policy {
            policy::TrafficPolicy::Allow => TrafficPolicy::Allow,
            policy::TrafficPolicy::Deny => TrafficPolicy::Deny,
        },
        created_at: net
            .metadata
            .creation_timestamp
            .as_ref()
            .map(|t| SystemTime::from(t.0)),
    })
}

/// Whether a parent (or backend) reference names an EgressNetwork.
pub fn is_egress_network_ref(group: Option<&str>, kind: Option<&str>) -> bool {
    group.is_some_and(|g| g.eq_ignore_ascii_case(policy::GROUP))
        && kind.is_some_and(|k| k.eq_ignore_ascii_case("EgressNetwork"))
}

/// An EgressNetwork as the outbound index keeps it: what lookups match,
/// and the settings its annotations give its policy.
#[derive(Clone, Debug, PartialEq)]
pub struct EgressEntry {
    pub info: EgressNetworkInfo,
    /// Failure accrual, timeouts and retries.
    pub settings: OutboundSettings,
}

impl EgressEntry {
    /// Reads an EgressNetwork; bad annotations are logged and ignored, as
    /// for Services. (The penalty of `penalize-failures` has no balancer to
    /// act on here: egress traffic is forwarded.)
    pub fn from_resource(
        net: &EgressNetwork,
        cluster_networks: &[IpNet],
    ) -> Result<Self, InvalidResource> {
        let info = egress_network(net, cluster_networks)?;
        let annotations: Annotations = net.metadata.annotations.clone().unwrap_or_default();
        let warn = |what: &str, error: &dyn std::fmt::Display| {
            tracing::warn!(ns = %info.namespace, egressnetwork = %info.name, %error, "ignoring invalid {what}");
        };
        let settings = OutboundSettings::parse(&annotations, warn);
        Ok(Self { info, settings })
    }
}
