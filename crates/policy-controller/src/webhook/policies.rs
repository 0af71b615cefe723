//! Admission of HTTPLocalRateLimitPolicies and EgressNetworks, and of
//! routes' EgressNetwork parents, with the conversions the indexes apply ([`crate::index::ratelimit`],
//! [`crate::index::outbound::egress`]).

use k8s_api::policy::{EgressNetwork, HTTPLocalRateLimitPolicy, http_route::ParentRef};

use super::{Rejection, parse};
use crate::index::{
    ClusterInfo, InvalidResource,
    outbound::egress::{self, egress_network_networks, is_egress_network_ref},
    ratelimit,
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

/// A route's EgressNetwork parents must name a port (the egress address's
/// port selects the routes).
pub fn check_egress_parents(parents: Option<&[ParentRef]>) -> Result<(), Rejection> {
    let portless = parents.into_iter().flatten().any(|p| {
        is_egress_network_ref(p.group.as_deref(), p.kind.as_deref())
            && p.port.is_none_or(|p| p == 0)
    });
    if portless {
        return Err(InvalidResource::Route(
            "cannot target an EgressNetwork without specifying a port".to_string(),
        )
        .into());
    }
    Ok(())
}
