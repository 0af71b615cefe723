//! The `Update`s of a federated Service's stream: its members (local and
//! linked clusters' Services) are followed as separate snapshots, and the
//! stream is sent what brings the proxy from the members it last saw to the
//! newest ones.
//!
//! Each member's additions go in an `Add` with that member's own set
//! labels (its Service's name, as the original's one translator per member
//! does); removals are by socket address and never remove an address
//! another member still offers. With no endpoint in any member the stream
//! is sent `NoEndpoints{exists: true}` (the federated Service exists), as
//! for local targets: the proxy fails fast.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::SocketAddr,
    sync::Arc,
};

use linkerd2_proxy_api::destination::Update;

use super::snapshot::{Snapshot, add_update, diff, no_endpoints_update, remove_update};
use crate::core::discovery::Member;

/// The newest snapshot of each member a stream follows now.
pub type Members = BTreeMap<Member, Arc<Snapshot>>;

/// What a federated stream last sent.
#[derive(Debug, Default)]
pub struct FederatedCursor {
    /// The members as last sent; empty after a `NoEndpoints`.
    sent: Members,
    /// Whether anything was sent yet.
    started: bool,
    /// Whether the last message was `NoEndpoints` (the proxy's set is empty).
    emptied: bool,
}

impl FederatedCursor {
    pub fn new() -> Self {
        Self::default()
    }

    /// The updates that bring the stream to `newest` (nothing if it already
    /// shows it).
    pub fn advance(&mut self, newest: &Members) -> Vec<Update> {
        let any = newest.values().any(|s| !s.is_empty());
        let mut updates = Vec::new();
        if !any {
            if !self.started || !self.emptied {
                updates.push(no_endpoints_update(true));
            }
            self.started = true;
            self.emptied = true;
            self.sent.clear();
            return updates;
        }
        let offered: BTreeSet<SocketAddr> = newest
            .values()
            .flat_map(|s| s.entries().map(|e| e.endpoint.addr))
            .collect();
        let mut removed: BTreeSet<SocketAddr> = BTreeSet::new();
        for (member, new) in newest {
            match self.sent.get(member) {
                Some(old) if Arc::ptr_eq(old, new) => {}
                Some(old) => {
                    let d = diff(old, new);
                    if !d.added_or_changed.is_empty() {
                        updates.push(add_update(new.labels(), &d.added_or_changed));
                    }
                    removed.extend(d.removed);
                }
                None if new.is_empty() => {}
                None => updates.push(add_update(new.labels(), new.entries())),
            }
        }
        // Members that left: everything they offered goes.
        for (member, old) in &self.sent {
            if !newest.contains_key(member) {
                removed.extend(old.entries().map(|e| e.endpoint.addr));
            }
        }
        let removed: Vec<SocketAddr> = removed.difference(&offered).copied().collect();
        if !removed.is_empty() {
            updates.push(remove_update(removed));
        }
        self.started = true;
        self.emptied = false;
        self.sent = newest.clone();
        updates
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TranslatorConfig;
    use crate::core::authority::ServiceId;
    use crate::k8s::endpoints::{set_labels, translate_endpoints};
    use crate::k8s::fixtures::*;
    use linkerd2_proxy_api::destination::update;
    use serde_json::json;

    fn snapshot(service: &str, pods: &[(&str, &str)]) -> Arc<Snapshot> {
        let cache = Cache::new(pods.iter().map(|(name, _)| meshed_pod(name, "n1")));
        let eps: Vec<_> = pods.iter().map(|(name, ip)| pod_ep(ip, name, "")).collect();
        let s = slice("IPv4", json!([{"port": 80}]), json!(eps));
        let id = ServiceId {
            namespace: "ns".into(),
            name: service.into(),
        };
        let s = crate::k8s::slices::slice_facts(&s);
        let set = translate_endpoints(&id, None, 80, std::slice::from_ref(&s), &cache);
        Arc::new(Snapshot::build(
            set_labels(&id, [&s]),
            &set,
            &TranslatorConfig::default(),
            None,
            None,
        ))
    }

    fn east() -> Member {
        Member::Remote {
            service: "web".into(),
            cluster: "east".into(),
        }
    }

    fn local() -> Member {
        Member::Local("web-local".into())
    }

    /// Each update as ("add <service>", addrs) or ("remove", addrs) or ("none", []).
    fn shape(updates: &[Update]) -> Vec<(String, Vec<String>)> {
        updates
            .iter()
            .map(|u| match &u.update {
                Some(update::Update::Add(set)) => (
                    format!("add {}", set.metric_labels["service"]),
                    set.addrs
                        .iter()
                        .map(|a| {
                            SocketAddr::try_from(a.addr.expect("addr"))
                                .expect("valid")
                                .to_string()
                        })
                        .collect(),
                ),
                Some(update::Update::Remove(set)) => (
                    "remove".into(),
                    set.addrs
                        .iter()
                        .map(|a| SocketAddr::try_from(*a).expect("valid").to_string())
                        .collect(),
                ),
                Some(update::Update::NoEndpoints(n)) => (format!("none {}", n.exists), vec![]),
                None => ("?".into(), vec![]),
            })
            .collect()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn members_join_change_and_leave() {
        let mut cursor = FederatedCursor::new();
        // No member has endpoints: fail fast, once.
        let nothing = Members::from([(east(), snapshot("web", &[]))]);
        assert_eq!(
            shape(&cursor.advance(&nothing)),
            [("none true".into(), vec![])]
        );
        assert!(cursor.advance(&nothing).is_empty());

        // Two members: one Add each, with its own labels.
        let both = Members::from([
            (east(), snapshot("web", &[("e1", "10.1.0.1")])),
            (local(), snapshot("web-local", &[("l1", "10.0.0.1")])),
        ]);
        assert_eq!(
            shape(&cursor.advance(&both)),
            [
                ("add web-local".into(), s(&["10.0.0.1:80"])),
                ("add web".into(), s(&["10.1.0.1:80"])),
            ]
        );
        assert!(cursor.advance(&both).is_empty(), "same snapshots, nothing");

        // The remote member scales: only its diff.
        let scaled = Members::from([
            (east(), snapshot("web", &[("e2", "10.1.0.2")])),
            (local(), both[&local()].clone()),
        ]);
        assert_eq!(
            shape(&cursor.advance(&scaled)),
            [
                ("add web".into(), s(&["10.1.0.2:80"])),
                ("remove".into(), s(&["10.1.0.1:80"])),
            ]
        );

        // The remote member leaves (its cluster unlinked): its addresses go.
        let local_only = Members::from([(local(), both[&local()].clone())]);
        assert_eq!(
            shape(&cursor.advance(&local_only)),
            [("remove".into(), s(&["10.1.0.2:80"]))]
        );

        // Everything gone: NoEndpoints, then a full Add when one returns.
        let empty = Members::from([(local(), snapshot("web-local", &[]))]);
        assert_eq!(
            shape(&cursor.advance(&empty)),
            [("none true".into(), vec![])]
        );
        assert_eq!(
            shape(&cursor.advance(&local_only)),
            [("add web-local".into(), s(&["10.0.0.1:80"]))]
        );
    }

    #[test]
    fn an_address_two_members_offer_stays_until_both_drop_it() {
        let mut cursor = FederatedCursor::new();
        let shared = Members::from([
            (east(), snapshot("web", &[("p", "10.9.0.1")])),
            (local(), snapshot("web-local", &[("p", "10.9.0.1")])),
        ]);
        cursor.advance(&shared);
        let one = Members::from([
            (east(), snapshot("web", &[])),
            (local(), shared[&local()].clone()),
        ]);
        assert!(
            shape(&cursor.advance(&one))
                .iter()
                .all(|(k, _)| k != "remove"),
            "still offered by the local member"
        );
    }
}
