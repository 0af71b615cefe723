//! Admission of HTTPLocalRateLimitPolicies and EgressNetworks, with the
//! conversions the indexes apply ([`crate::index::ratelimit`],
//! [`crate::index::outbound::egress`]).

use k8s_api::policy::{EgressNetwork, HTTPLocalRateLimitPolicy};

use super::{Rejection, parse};
use crate::{
    core::ClusterInfo,
    k8s::{
        InvalidResource,
        outbound::egress::{self, egress_network_networks},
        ratelimit,
    },
};

/// A rate limit policy: a Server target, positive limits, no identity or
/// override limit above the total, ServiceAccount clients.
pub fn check_ratelimit(object: &serde_json::Value) -> Result<(), Rejection> {
    let policy: HTTPLocalRateLimitPolicy = parse(object)?;
    ratelimit::ratelimit_policy(&policy.spec).map_err(InvalidResource::from)?;
    ratelimit::check_limits(&policy.spec).map_err(InvalidResource::from)?;
    Ok(())
}

/// An EgressNetwork: a given network list is not empty, and each `except`
/// lies inside its `cidr` without covering it.
pub fn check_egress_network(
    object: &serde_json::Value,
    cluster: &ClusterInfo,
) -> Result<(), Rejection> {
    let net: EgressNetwork = parse(object)?;
    egress_network_networks(&net.spec, &cluster.networks)?;
    egress::check_egress_network(&net.spec)?;
    Ok(())
}
