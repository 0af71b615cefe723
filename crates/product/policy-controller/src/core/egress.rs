//! Egress networks, free of Kubernetes: which EgressNetwork an address
//! outside the cluster belongs to for a client (its own namespace's
//! networks first, else the global egress namespace's; the most specific
//! match, then the oldest, then by namespace and name), and whether a
//! network overlaps the cluster networks (which keeps it from being
//! accepted); and the policy an egress address gets.

use std::{cmp::Ordering, net::IpAddr, time::SystemTime};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};

use super::{NetworkMatch, outbound::OutboundPolicy};

/// The policy of an egress address for one client namespace.
#[derive(Clone, Debug, PartialEq)]
pub enum EgressPolicy {
    /// No EgressNetwork captures it: `egress-fallback`.
    Fallback,
    /// The EgressNetwork `policy` names (its namespace and name; `port` is
    /// the destination port), with the routes attached to it.
    Network {
        traffic_policy: TrafficPolicy,
        policy: Box<OutboundPolicy>,
    },
}

/// What happens to egress traffic no route describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrafficPolicy {
    Allow,
    Deny,
}

/// An EgressNetwork as lookups use it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EgressNetworkInfo {
    pub namespace: String,
    pub name: String,
    pub networks: Vec<NetworkMatch>,
    pub traffic_policy: TrafficPolicy,
    pub created_at: Option<SystemTime>,
}

/// The networks of an EgressNetwork that lists none: everything outside
/// the cluster networks.
pub fn default_egress_networks(cluster_networks: &[IpNet]) -> Vec<NetworkMatch> {
    let (v4, v6): (Vec<IpNet>, Vec<IpNet>) = cluster_networks
        .iter()
        .partition(|n| matches!(n, IpNet::V4(_)));
    vec![
        NetworkMatch {
            net: IpNet::V4(Ipv4Net::default()),
            except: v4,
        },
        NetworkMatch {
            net: IpNet::V6(Ipv6Net::default()),
            except: v6,
        },
    ]
}

/// The number of addresses of a network minus its exceptions (saturating;
/// only compared, to prefer the most specific match).
fn size(m: &NetworkMatch) -> u128 {
    let count = |n: &IpNet| {
        let bits = u32::from(n.max_prefix_len() - n.prefix_len());
        1u128.checked_shl(bits).unwrap_or(u128::MAX)
    };
    m.except
        .iter()
        .fold(count(&m.net), |size, e| size.saturating_sub(count(e)))
}

/// Whether `addr` is in `m` (inside its net, outside its exceptions).
pub fn network_contains(m: &NetworkMatch, addr: IpAddr) -> bool {
    m.net.contains(&addr) && !m.except.iter().any(|e| e.contains(&addr))
}

/// The size of the smallest of `networks` that contains `addr`.
fn smallest_match(networks: &[NetworkMatch], addr: IpAddr) -> Option<u128> {
    networks
        .iter()
        .filter(|m| network_contains(m, addr))
        .map(size)
        .min()
}

/// The EgressNetwork `addr` belongs to for a client of `source_ns`: only
/// the networks of `source_ns` are considered if it has any, else only
/// those of `global_ns`.
pub fn resolve_egress_network<'a>(
    addr: IpAddr,
    source_ns: &str,
    global_ns: &str,
    networks: impl IntoIterator<Item = &'a EgressNetworkInfo>,
) -> Option<&'a EgressNetworkInfo> {
    let (own, global): (Vec<_>, Vec<_>) = networks
        .into_iter()
        .filter(|n| n.namespace == source_ns || n.namespace == global_ns)
        .partition(|n| n.namespace == source_ns);
    let candidates = if own.is_empty() { global } else { own };
    candidates
        .into_iter()
        .filter_map(|n| Some((smallest_match(&n.networks, addr)?, n)))
        .min_by(|(a_size, a), (b_size, b)| {
            a_size
                .cmp(b_size)
                .then_with(|| by_age(a.created_at, b.created_at))
                .then_with(|| a.namespace.cmp(&b.namespace))
                .then_with(|| a.name.cmp(&b.name))
        })
        .map(|(_, n)| n)
}

/// Objects with a creation time come before those without.
fn by_age(a: Option<SystemTime>, b: Option<SystemTime>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Whether any of `networks` overlaps a cluster network (one network
/// inside the other, unless an exception covers the cluster network).
pub fn overlaps_cluster_networks(networks: &[NetworkMatch], cluster_networks: &[IpNet]) -> bool {
    networks.iter().any(|m| {
        cluster_networks.iter().any(|c| {
            let intersects = m.net.contains(c) || c.contains(&m.net);
            intersects && !m.except.iter().any(|e| e.contains(c))
        })
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const GLOBAL: &str = "linkerd-egress";

    fn net(ns: &str, name: &str, cidr: &str, except: &[&str]) -> EgressNetworkInfo {
        EgressNetworkInfo {
            namespace: ns.into(),
            name: name.into(),
            networks: vec![NetworkMatch::parse(cidr, except.iter().copied()).expect("network")],
            traffic_policy: TrafficPolicy::Allow,
            created_at: None,
        }
    }

    fn pick<'a>(nets: &'a [EgressNetworkInfo], ip: &str, source: &str) -> Option<&'a str> {
        let ip = ip.parse().expect("ip");
        resolve_egress_network(ip, source, GLOBAL, nets).map(|n| n.name.as_str())
    }

    #[test]
    fn the_clients_namespace_comes_before_the_global_one() {
        let nets = [
            net(GLOBAL, "global", "1.2.0.0/16", &[]),
            net("app", "own", "1.0.0.0/8", &[]),
        ];
        assert_eq!(pick(&nets, "1.2.3.4", "app"), Some("own"));
        assert_eq!(pick(&nets, "1.2.3.4", "other"), Some("global"));
        // A namespace with networks never falls back to the global ones,
        // even when none of its own matches (as the original).
        assert_eq!(pick(&nets, "9.9.9.9", "app"), None);
        let unrelated = [net("elsewhere", "x", "1.0.0.0/8", &[])];
        assert_eq!(pick(&unrelated, "1.2.3.4", "app"), None);
    }

    #[test]
    fn the_most_specific_then_oldest_then_name_wins() {
        let mut nets = vec![
            net(GLOBAL, "wide", "1.0.0.0/8", &[]),
            net(GLOBAL, "narrow", "1.2.3.0/24", &[]),
        ];
        assert_eq!(pick(&nets, "1.2.3.4", "app"), Some("narrow"));
        assert_eq!(pick(&nets, "1.9.9.9", "app"), Some("wide"));
        let mut b = net(GLOBAL, "b", "1.2.3.0/24", &[]);
        b.created_at = Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1));
        nets.push(b);
        assert_eq!(
            pick(&nets, "1.2.3.4", "app"),
            Some("b"),
            "older than narrow"
        );
        let nets = [
            net(GLOBAL, "b", "1.2.3.0/24", &[]),
            net(GLOBAL, "a", "1.2.3.0/24", &[]),
        ];
        assert_eq!(pick(&nets, "1.2.3.4", "app"), Some("a"));
    }

    #[test]
    fn exceptions_are_not_matched() {
        let nets = [
            net(GLOBAL, "b", "1.2.0.0/16", &["1.2.3.4"]),
            net(GLOBAL, "d", "1.2.0.0/16", &[]),
        ];
        assert_eq!(pick(&nets, "1.2.3.4", "app"), Some("d"));
        // Elsewhere "b" is the more specific (its exception shrinks it).
        assert_eq!(pick(&nets, "1.2.3.5", "app"), Some("b"));
    }

    #[test]
    fn default_networks_exclude_the_cluster() {
        let cluster: Vec<IpNet> = vec!["10.0.0.0/8".parse().expect("net")];
        let nets = default_egress_networks(&cluster);
        assert!(
            nets.iter()
                .any(|m| network_contains(m, "8.8.8.8".parse().expect("ip")))
        );
        assert!(
            nets.iter()
                .any(|m| network_contains(m, "2001::1".parse().expect("ip")))
        );
        assert!(
            !nets
                .iter()
                .any(|m| network_contains(m, "10.1.2.3".parse().expect("ip")))
        );
        assert!(!overlaps_cluster_networks(&nets, &cluster));
        let inside = [NetworkMatch::parse("10.1.0.0/16", []).expect("net")];
        assert!(overlaps_cluster_networks(&inside, &cluster));
        let around = [NetworkMatch::parse("0.0.0.0/0", []).expect("net")];
        assert!(overlaps_cluster_networks(&around, &cluster));
        let outside = [NetworkMatch::parse("1.0.0.0/8", []).expect("net")];
        assert!(!overlaps_cluster_networks(&outside, &cluster));
    }
}
