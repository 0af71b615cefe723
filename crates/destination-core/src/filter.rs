//! Per-group endpoint filtering (spec §2 "Filtering per group"), in order:
//! hostname (always), then — when filtering is on — `internalTrafficPolicy:
//! Local` by node or else topology hints by the client's zone, and finally the
//! address-family selection.

use crate::authority::Target;
use crate::context_token::ContextToken;
use crate::endpoint_translator::{AddressFamily, AddressId, Endpoint, EndpointMap};
use std::collections::HashSet;
use std::sync::Arc;

/// Streams with equal keys share one filtered snapshot.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FilterKey {
    /// Node/zone filtering on (off for remote discovery).
    pub enable_filtering: bool,
    /// The client's node (from the context token), `""` if unknown.
    pub node_name: String,
    /// Requested instance hostname, `""` for the whole Service.
    pub hostname: String,
}

impl FilterKey {
    /// The key of a `Get` request.
    pub fn new(target: &Target, token: &ContextToken, enable_filtering: bool) -> Self {
        Self {
            enable_filtering,
            node_name: token.node_name.clone(),
            hostname: target.instance.clone().unwrap_or_default(),
        }
    }
}

/// Inputs of filtering that are not part of the key.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilterContext<'a> {
    /// The Service has `internalTrafficPolicy: Local`.
    pub local_traffic_policy: bool,
    /// Zone of the key's node, if known.
    pub node_zone: Option<&'a str>,
    /// `--enable-ipv6`.
    pub enable_ipv6: bool,
}

/// Applies the filtering pipeline to the unfiltered set of a Service port.
pub fn filter_endpoints(
    all: &EndpointMap,
    key: &FilterKey,
    ctx: &FilterContext<'_>,
) -> EndpointMap {
    let candidates: Vec<(&AddressId, &Arc<Endpoint>)> = all
        .iter()
        .filter(|(_, ep)| {
            key.hostname.is_empty() || ep.hostname.as_deref() == Some(key.hostname.as_str())
        })
        .collect();

    let selected = if !key.enable_filtering {
        candidates
    } else if ctx.local_traffic_policy {
        candidates
            .into_iter()
            .filter(|(_, ep)| {
                ep.pod()
                    .is_some_and(|pod| pod.node_name.as_deref().unwrap_or("") == key.node_name)
            })
            .collect()
    } else {
        by_zone_hints(candidates, ctx.node_zone)
    };

    select_family(selected, ctx.enable_ipv6)
}

/// Topology hints: only when every candidate is hinted; keep those hinted for
/// the zone, or all of them when none is.
fn by_zone_hints<'m>(
    candidates: Vec<(&'m AddressId, &'m Arc<Endpoint>)>,
    zone: Option<&str>,
) -> Vec<(&'m AddressId, &'m Arc<Endpoint>)> {
    if candidates.iter().any(|(_, ep)| ep.for_zones.is_none()) {
        return candidates;
    }
    let zone = zone.unwrap_or("");
    let hinted: Vec<_> = candidates
        .iter()
        .copied()
        .filter(|(_, ep)| {
            ep.for_zones
                .as_ref()
                .is_some_and(|zones| zones.iter().any(|z| z == zone))
        })
        .collect();
    if hinted.is_empty() {
        candidates
    } else {
        hinted
    }
}

/// IPv6 off → drop IPv6 addresses; IPv6 on → drop a pod's IPv4 address when the
/// same pod also has an IPv6 one.
fn select_family(selected: Vec<(&AddressId, &Arc<Endpoint>)>, enable_ipv6: bool) -> EndpointMap {
    let v6_pods: HashSet<(&str, &str)> = selected
        .iter()
        .filter_map(|(id, _)| match id {
            AddressId::Pod {
                namespace,
                name,
                family: AddressFamily::V6,
            } => Some((namespace.as_str(), name.as_str())),
            _ => None,
        })
        .collect();
    let has_v6_twin = |id: &AddressId| match id {
        AddressId::Pod {
            namespace,
            name,
            family: AddressFamily::V4,
        } => v6_pods.contains(&(namespace.as_str(), name.as_str())),
        _ => false,
    };
    selected
        .iter()
        .filter(|(id, ep)| {
            if enable_ipv6 {
                !has_v6_twin(id)
            } else {
                ep.family() == AddressFamily::V4
            }
        })
        .map(|(id, ep)| ((*id).clone(), Arc::clone(ep)))
        .collect()
}
