//! Per-group endpoint filtering (spec §2 "Filtering per group"), in order:
//! hostname (always), then — when filtering is on — `internalTrafficPolicy:
//! Local` by node or else topology hints by the client's zone, and finally the
//! address-family selection.

use crate::core::authority::Target;
use crate::core::context_token::ContextToken;
use crate::core::endpoint::{AddressFamily, AddressId, Endpoint, EndpointMap};
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

/// The node name of the one group per Service port shared by every stream
/// whose node the index does not know (see [`FilterKey::grouped`]). Not a
/// valid Kubernetes name, so no Node or pod carries it: it has no zone and
/// `internalTrafficPolicy: Local` keeps none of its endpoints, which are
/// the answers of any unknown node.
pub const UNKNOWN_NODE: &str = "<unknown node>";

impl FilterKey {
    /// The key of the group a stream with this key follows: itself, or,
    /// when its node is one `knows_node` says nothing differs for (no zone,
    /// no pod on it), the shared [`UNKNOWN_NODE`] key. A client's made-up
    /// node names then cost no group (nor metric series) of their own, and
    /// get the answers they would get on their own.
    pub fn grouped(&self, knows_node: impl Fn(&str) -> bool) -> Self {
        if self.node_name.is_empty() || self.is_unknown_node() || knows_node(&self.node_name) {
            return self.clone();
        }
        Self {
            node_name: UNKNOWN_NODE.to_string(),
            ..self.clone()
        }
    }

    /// Whether this is the key of an unknown-node group.
    pub fn is_unknown_node(&self) -> bool {
        self.node_name == UNKNOWN_NODE
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

/// IPv6 off → drop IPv6 addresses; IPv6 on → drop a pod's (or
/// ExternalWorkload's) IPv4 address when it also has an IPv6 one.
fn select_family(selected: Vec<(&AddressId, &Arc<Endpoint>)>, enable_ipv6: bool) -> EndpointMap {
    let v6_workloads: HashSet<_> = selected
        .iter()
        .filter_map(|(id, _)| match id.workload_family()? {
            (workload, AddressFamily::V6) => Some(workload),
            _ => None,
        })
        .collect();
    let has_v6_twin = |id: &AddressId| matches!(id.workload_family(), Some((workload, AddressFamily::V4)) if v6_workloads.contains(&workload));
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

#[cfg(test)]
mod tests {

    #[test]
    fn only_unknown_nodes_share_the_unknown_node_key() {
        let key = |node: &str| FilterKey {
            enable_filtering: true,
            node_name: node.into(),
            hostname: "h".into(),
        };
        let knows = |node: &str| node == "n1";
        assert_eq!(key("n1").grouped(knows), key("n1"));
        assert_eq!(
            key("").grouped(knows),
            key(""),
            "no node is not an unknown node"
        );
        let unknown = key("made-up").grouped(knows);
        assert!(unknown.is_unknown_node());
        assert_eq!(key("other").grouped(knows), unknown);
        assert_eq!(unknown.grouped(knows), unknown);
        assert_eq!(unknown.hostname, "h", "only the node is replaced");
    }

    #[test]
    fn the_unknown_node_key_filters_as_any_unknown_node() {
        let all = all(false);
        for local in [false, true] {
            let cx = FilterContext {
                local_traffic_policy: local,
                ..FilterContext::default()
            };
            let made_up = FilterKey {
                enable_filtering: true,
                node_name: "made-up".into(),
                ..FilterKey::default()
            };
            let grouped = made_up.grouped(|_| false);
            assert_eq!(
                filter_endpoints(&all, &made_up, &cx),
                filter_endpoints(&all, &grouped, &cx),
                "local traffic policy {local}"
            );
        }
    }
    use super::*;
    use crate::core::authority::{ServiceId, Target};
    use crate::k8s::fixtures::*;
    use serde_json::{Value, json};

    fn ep(
        ip: &str,
        pod: &str,
        zone: &str,
        hostname: Option<&str>,
        hints: Option<&[&str]>,
    ) -> Value {
        let mut v = pod_ep(ip, pod, zone);
        if let Some(h) = hostname {
            v["hostname"] = json!(h);
        }
        if let Some(zones) = hints {
            let zones: Vec<Value> = zones.iter().map(|z| json!({"name": z})).collect();
            v["hints"] = json!({"forZones": zones});
        }
        v
    }

    /// p1 on n1/z1, p2 on n2/z2, p3 on n1/z1 (dual-stack), and a targetless address.
    fn all(hints: bool) -> EndpointMap {
        let cache = Cache::new([
            meshed_pod("p1", "n1"),
            meshed_pod("p2", "n2"),
            meshed_pod("p3", "n1"),
        ]);
        let h = |z: &'static [&'static str]| hints.then_some(z);
        let v4 = slice(
            "IPv4",
            json!([{"port": 80}]),
            json!([
                ep("10.0.0.1", "p1", "z1", Some("p1"), h(&["z1"])),
                ep("10.0.0.2", "p2", "z2", Some("p2"), h(&["z2"])),
                ep("10.0.0.3", "p3", "z1", None, h(&["z1"])),
            ]),
        );
        let v6 = slice(
            "IPv6",
            json!([{"port": 80}]),
            json!([ep("fd00::3", "p3", "z1", None, h(&["z1"]))]),
        );
        cache.translate(None, 80, &[v4, v6])
    }

    fn key(filtering: bool, node: &str, host: &str) -> FilterKey {
        FilterKey {
            enable_filtering: filtering,
            node_name: node.into(),
            hostname: host.into(),
        }
    }

    fn ctx(local: bool, zone: Option<&str>, ipv6: bool) -> FilterContext<'_> {
        FilterContext {
            local_traffic_policy: local,
            node_zone: zone,
            enable_ipv6: ipv6,
        }
    }

    fn ips(set: &EndpointMap) -> Vec<String> {
        let mut v: Vec<String> = set.values().map(|e| e.addr.ip().to_string()).collect();
        v.sort();
        v
    }

    #[test]
    fn key_from_request() {
        let target = Target {
            service: ServiceId {
                namespace: "ns".into(),
                name: "web".into(),
            },
            instance: Some("db-0".into()),
            port: 80,
        };
        let token =
            crate::core::context_token::ContextToken::parse(r#"{"ns":"a","nodeName":"n1"}"#);
        assert_eq!(
            FilterKey::new(&target, &token, true),
            key(true, "n1", "db-0")
        );
    }

    #[test]
    fn no_filtering_prefers_ipv6() {
        let set = filter_endpoints(
            &all(false),
            &key(true, "n1", ""),
            &ctx(false, Some("z1"), true),
        );
        assert_eq!(ips(&set), ["10.0.0.1", "10.0.0.2", "fd00::3"]);
    }

    #[test]
    fn ipv6_disabled_drops_ipv6() {
        let set = filter_endpoints(&all(false), &key(true, "n1", ""), &ctx(false, None, false));
        assert_eq!(ips(&set), ["10.0.0.1", "10.0.0.2", "10.0.0.3"]);
    }

    #[test]
    fn hostname_always_applies() {
        for filtering in [true, false] {
            let set = filter_endpoints(
                &all(true),
                &key(filtering, "n1", "p2"),
                &ctx(false, Some("z1"), true),
            );
            assert_eq!(ips(&set), ["10.0.0.2"], "filtering={filtering}");
        }
        let set = filter_endpoints(&all(true), &key(true, "", "nope"), &ctx(false, None, true));
        assert!(set.is_empty());
    }

    #[test]
    fn internal_traffic_policy_local() {
        let set = filter_endpoints(
            &all(false),
            &key(true, "n1", ""),
            &ctx(true, Some("z1"), true),
        );
        assert_eq!(ips(&set), ["10.0.0.1", "fd00::3"]);
        let set = filter_endpoints(&all(false), &key(true, "n3", ""), &ctx(true, None, true));
        assert!(set.is_empty(), "no fallback");
        // Filtering off ignores the policy.
        let set = filter_endpoints(&all(false), &key(false, "n3", ""), &ctx(true, None, true));
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn topology_hints() {
        let set = filter_endpoints(
            &all(true),
            &key(true, "n2", ""),
            &ctx(false, Some("z2"), true),
        );
        assert_eq!(ips(&set), ["10.0.0.2"]);
        let set = filter_endpoints(
            &all(true),
            &key(true, "n1", ""),
            &ctx(false, Some("z1"), false),
        );
        assert_eq!(ips(&set), ["10.0.0.1", "10.0.0.3"]);
        // No endpoint hinted for the zone (or zone unknown) → keep all.
        for zone in [Some("z9"), None] {
            let set = filter_endpoints(&all(true), &key(true, "n9", ""), &ctx(false, zone, true));
            assert_eq!(set.len(), 3, "{zone:?}");
        }
        // Filtering off → no zone filtering.
        let set = filter_endpoints(
            &all(true),
            &key(false, "n2", ""),
            &ctx(false, Some("z2"), true),
        );
        assert_eq!(set.len(), 3);
    }

    #[test]
    fn topology_hints_ignored_unless_every_candidate_has_them() {
        let mut set = all(true);
        let (id, first) = set
            .iter()
            .next()
            .map(|(k, v)| (k.clone(), v.clone()))
            .expect("one");
        let mut unhinted = (*first).clone();
        unhinted.for_zones = None;
        set.insert(id, Arc::new(unhinted));
        let out = filter_endpoints(&set, &key(true, "n2", ""), &ctx(false, Some("z2"), true));
        assert_eq!(out.len(), 3);
        // …but the hostname filter runs first, so only the candidates matter.
        let out = filter_endpoints(&set, &key(true, "n2", "p2"), &ctx(false, Some("z1"), true));
        assert_eq!(ips(&out), ["10.0.0.2"]);
    }
}
