//! `EgressNetwork` resources as the outbound index and the status writer
//! use them. [`egress_network`] is also what admission runs: a network
//! list, when given, must not be empty, and each `except` must lie inside
//! its `cidr` without covering it.

use std::time::SystemTime;

use ipnet::IpNet;
use k8s_api::policy::{self, EgressNetwork};

use crate::{
    core::{
        NetworkMatch,
        egress::{EgressNetworkInfo, TrafficPolicy, default_egress_networks},
    },
    index::{InvalidResource, authz::networks},
};

/// The networks an EgressNetwork spec captures (everything outside
/// `cluster_networks` when it lists none).
pub fn egress_network_networks(
    spec: &policy::EgressNetworkSpec,
    cluster_networks: &[IpNet],
) -> Result<Vec<NetworkMatch>, InvalidResource> {
    match &spec.networks {
        None => Ok(default_egress_networks(cluster_networks)),
        Some(list) if list.is_empty() => Err(InvalidResource::NoNetworks),
        Some(list) => networks(list.iter()),
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
