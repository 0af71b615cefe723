//! Immutable snapshots of a filter group's endpoints (with their translated
//! `WeightedAddr`s, built once per group), diffs between snapshots, and the
//! `Update` messages a stream sends: the initial message of a new stream and
//! the single coalesced step from the snapshot a stream last sent to the newest.
//!
//! Meridian sends `NoEndpoints{exists: true}` when the Service exists with no
//! endpoints and `NoEndpoints{exists: false}` when it is missing; both reset
//! the proxy's set, so no `Remove` precedes them.

use crate::config::TranslatorConfig;
use crate::core::endpoint::{AddressId, Endpoint, EndpointMap};
use crate::proto::weighted_addr::weighted_addr;
use linkerd2_proxy_api::destination::{
    AddrSet, NoEndpoints, Update, WeightedAddr, WeightedAddrSet, update,
};
use linkerd2_proxy_api::net::TcpAddress;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::Arc;

/// One endpoint of a snapshot with the address the group's clients receive.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotEntry {
    /// The filtered endpoint.
    pub endpoint: Arc<Endpoint>,
    /// Its translation for this group's client zone.
    pub addr: WeightedAddr,
}

/// An immutable view of one filter group (share it as `Arc<Snapshot>`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Snapshot {
    exists: bool,
    client_zone: Option<String>,
    labels: HashMap<String, String>,
    entries: BTreeMap<AddressId, Arc<SnapshotEntry>>,
}

impl Snapshot {
    /// The Service does not exist (or was deleted).
    pub fn missing() -> Self {
        Self::default()
    }

    /// Translates a filtered set for a client in `client_zone`. Endpoints that
    /// cannot be translated are left out with an error log. When `previous` was
    /// built for the same zone, unchanged entries are reused instead of rebuilt.
    pub fn build(
        labels: HashMap<String, String>,
        filtered: &EndpointMap,
        cfg: &TranslatorConfig,
        client_zone: Option<&str>,
        previous: Option<&Snapshot>,
    ) -> Self {
        let client_zone = client_zone.filter(|z| !z.is_empty()).map(str::to_string);
        let reusable = previous.filter(|p| p.client_zone == client_zone);
        let mut entries = BTreeMap::new();
        for (id, ep) in filtered {
            if let Some(old) = reusable.and_then(|p| p.entries.get(id))
                && (Arc::ptr_eq(&old.endpoint, ep) || old.endpoint == *ep)
            {
                entries.insert(id.clone(), Arc::clone(old));
                continue;
            }
            match weighted_addr(ep, cfg, client_zone.as_deref()) {
                Ok(addr) => {
                    entries.insert(
                        id.clone(),
                        Arc::new(SnapshotEntry {
                            endpoint: Arc::clone(ep),
                            addr,
                        }),
                    );
                }
                Err(error) => {
                    tracing::error!(%error, "dropping endpoint that cannot be translated")
                }
            }
        }
        Self {
            exists: true,
            client_zone,
            labels,
            entries,
        }
    }

    /// Whether the Service exists.
    pub fn exists(&self) -> bool {
        self.exists
    }

    /// Whether there is no endpoint to send.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Number of endpoints.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// `WeightedAddrSet.metric_labels`.
    pub fn labels(&self) -> &HashMap<String, String> {
        &self.labels
    }

    /// The entries, ordered by address ID.
    pub fn entries(&self) -> impl Iterator<Item = &Arc<SnapshotEntry>> {
        self.entries.values()
    }

    /// The entry of an address ID.
    pub fn get(&self, id: &AddressId) -> Option<&Arc<SnapshotEntry>> {
        self.entries.get(id)
    }

    fn socket_addrs(&self) -> BTreeSet<SocketAddr> {
        self.entries.values().map(|e| e.endpoint.addr).collect()
    }
}

/// The change from one snapshot to another.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Diff {
    /// New IDs and IDs whose endpoint or translation changed, by ID.
    pub added_or_changed: Vec<Arc<SnapshotEntry>>,
    /// Socket addresses the client had that the new snapshot no longer has
    /// (including the old address of an ID whose address changed).
    pub removed: Vec<SocketAddr>,
}

impl Diff {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added_or_changed.is_empty() && self.removed.is_empty()
    }
}

/// Compares two snapshots' endpoints. Removals are by socket address, since
/// that is what a proxy keys its endpoints by: an address still offered by
/// another ID is never removed.
pub fn diff(old: &Snapshot, new: &Snapshot) -> Diff {
    let added_or_changed = new
        .entries
        .iter()
        .filter(|(id, entry)| match old.entries.get(*id) {
            None => true,
            Some(prev) => {
                !Arc::ptr_eq(prev, entry)
                    && (prev.endpoint != entry.endpoint || prev.addr != entry.addr)
            }
        })
        .map(|(_, entry)| Arc::clone(entry))
        .collect();
    let still_offered = new.socket_addrs();
    let removed = old
        .socket_addrs()
        .into_iter()
        .filter(|a| !still_offered.contains(a))
        .collect();
    Diff {
        added_or_changed,
        removed,
    }
}

/// `Add` of the given entries with the set labels.
pub fn add_update<'e>(
    labels: &HashMap<String, String>,
    entries: impl IntoIterator<Item = &'e Arc<SnapshotEntry>>,
) -> Update {
    Update {
        update: Some(update::Update::Add(WeightedAddrSet {
            addrs: entries.into_iter().map(|e| e.addr.clone()).collect(),
            metric_labels: labels.clone(),
        })),
    }
}

/// `Remove` of the given socket addresses.
pub fn remove_update(addrs: impl IntoIterator<Item = SocketAddr>) -> Update {
    Update {
        update: Some(update::Update::Remove(AddrSet {
            addrs: addrs.into_iter().map(TcpAddress::from).collect(),
        })),
    }
}

/// `NoEndpoints{exists}`.
pub fn no_endpoints_update(exists: bool) -> Update {
    Update {
        update: Some(update::Update::NoEndpoints(NoEndpoints { exists })),
    }
}

/// The first message of a new stream: `NoEndpoints{false}` for a missing
/// Service, `NoEndpoints{true}` for one without endpoints, else one `Add` of
/// everything.
pub fn initial_updates(snapshot: &Snapshot) -> Vec<Update> {
    if !snapshot.exists {
        vec![no_endpoints_update(false)]
    } else if snapshot.is_empty() {
        vec![no_endpoints_update(true)]
    } else {
        vec![add_update(&snapshot.labels, snapshot.entries.values())]
    }
}

/// The messages that take a client from `old` (the last snapshot it was sent)
/// straight to `new`: nothing if equivalent, `NoEndpoints` when the new state
/// is missing/empty, a full `Add` after a `NoEndpoints`, otherwise
/// `Add(added or changed)` then `Remove(gone)`, each only if non-empty.
pub fn updates_between(old: &Snapshot, new: &Snapshot) -> Vec<Update> {
    if !new.exists {
        return if old.exists {
            vec![no_endpoints_update(false)]
        } else {
            Vec::new()
        };
    }
    if new.is_empty() {
        return if old.exists && old.is_empty() {
            Vec::new()
        } else {
            vec![no_endpoints_update(true)]
        };
    }
    if !old.exists || old.is_empty() {
        return vec![add_update(&new.labels, new.entries.values())];
    }
    let d = diff(old, new);
    let mut updates = Vec::with_capacity(2);
    if !d.added_or_changed.is_empty() {
        updates.push(add_update(&new.labels, &d.added_or_changed));
    }
    if !d.removed.is_empty() {
        updates.push(remove_update(d.removed));
    }
    updates
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::k8s::endpoints::*;
    use crate::k8s::fixtures::*;
    use k8s_api::labels;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    fn cfg() -> TranslatorConfig {
        TranslatorConfig::default()
    }

    fn snapshot(pods: Vec<Pod>, eps: serde_json::Value) -> Snapshot {
        let cache = Cache::new(pods);
        let s = slice("IPv4", json!([{"port": 80}]), eps);
        let set = cache.translate(None, 80, std::slice::from_ref(&s));
        let s = crate::k8s::slices::slice_facts(&s);
        Snapshot::build(set_labels(&svc_id(), [&s]), &set, &cfg(), Some("z1"), None)
    }

    fn two() -> Snapshot {
        snapshot(
            vec![meshed_pod("p1", "n1"), meshed_pod("p2", "n1")],
            json!([
                pod_ep("10.0.0.1", "p1", "z1"),
                pod_ep("10.0.0.2", "p2", "z2")
            ]),
        )
    }

    fn sa(ip: &str) -> SocketAddr {
        SocketAddr::new(ip.parse().expect("ip"), 80)
    }

    fn added(u: &Update) -> Vec<SocketAddr> {
        match &u.update {
            Some(update::Update::Add(set)) => set
                .addrs
                .iter()
                .filter_map(|a| a.addr.and_then(|t| SocketAddr::try_from(t).ok()))
                .collect(),
            other => panic!("expected Add, got {other:?}"),
        }
    }

    fn removed(u: &Update) -> Vec<SocketAddr> {
        match &u.update {
            Some(update::Update::Remove(set)) => set
                .addrs
                .iter()
                .filter_map(|t| SocketAddr::try_from(*t).ok())
                .collect(),
            other => panic!("expected Remove, got {other:?}"),
        }
    }

    #[test]
    fn initial_messages() {
        assert_eq!(
            initial_updates(&Snapshot::missing()),
            [no_endpoints_update(false)]
        );
        let empty = snapshot(vec![], json!([]));
        assert!(empty.exists() && empty.is_empty());
        assert_eq!(initial_updates(&empty), [no_endpoints_update(true)]);
        let full = two();
        let updates = initial_updates(&full);
        assert_eq!(updates.len(), 1);
        assert_eq!(added(&updates[0]), [sa("10.0.0.1"), sa("10.0.0.2")]);
        match &updates[0].update {
            Some(update::Update::Add(set)) => {
                assert_eq!(
                    set.metric_labels.get("service").map(String::as_str),
                    Some("web")
                );
                assert_eq!(
                    set.metric_labels.get("namespace").map(String::as_str),
                    Some("ns")
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn identical_snapshots_send_nothing() {
        assert!(updates_between(&two(), &two()).is_empty());
        assert!(diff(&two(), &two()).is_empty());
        let empty = snapshot(vec![], json!([]));
        assert!(updates_between(&empty, &empty).is_empty());
        assert!(updates_between(&Snapshot::missing(), &Snapshot::missing()).is_empty());
    }

    #[test]
    fn add_and_remove() {
        let old = two();
        let new = snapshot(
            vec![meshed_pod("p2", "n1"), meshed_pod("p3", "n1")],
            json!([
                pod_ep("10.0.0.2", "p2", "z2"),
                pod_ep("10.0.0.3", "p3", "z1")
            ]),
        );
        let updates = updates_between(&old, &new);
        assert_eq!(updates.len(), 2);
        assert_eq!(added(&updates[0]), [sa("10.0.0.3")]);
        assert_eq!(removed(&updates[1]), [sa("10.0.0.1")]);

        // Only removals → only a Remove.
        let fewer = snapshot(
            vec![meshed_pod("p1", "n1")],
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        );
        let updates = updates_between(&old, &fewer);
        assert_eq!(updates.len(), 1);
        assert_eq!(removed(&updates[0]), [sa("10.0.0.2")]);
    }

    #[test]
    fn changed_endpoint_is_re_added() {
        let old = two();
        let mut p1 = meshed_pod("p1", "n1");
        set_annotation(&mut p1, labels::OPAQUE_PORTS, "80");
        let new = snapshot(
            vec![p1, meshed_pod("p2", "n1")],
            json!([
                pod_ep("10.0.0.1", "p1", "z1"),
                pod_ep("10.0.0.2", "p2", "z2")
            ]),
        );
        let d = diff(&old, &new);
        assert_eq!(d.added_or_changed.len(), 1);
        assert!(d.removed.is_empty());
        let updates = updates_between(&old, &new);
        assert_eq!(updates.len(), 1);
        assert_eq!(added(&updates[0]), [sa("10.0.0.1")]);

        // Zone hints changing re-adds too, although nothing on the wire differs.
        let mut hinted = pod_ep("10.0.0.2", "p2", "z2");
        hinted["hints"] = json!({"forZones": [{"name": "z2"}]});
        let new = snapshot(
            vec![meshed_pod("p1", "n1"), meshed_pod("p2", "n1")],
            json!([pod_ep("10.0.0.1", "p1", "z1"), hinted]),
        );
        assert_eq!(added(&updates_between(&old, &new)[0]), [sa("10.0.0.2")]);
    }

    #[test]
    fn moved_address_removes_old_and_keeps_reused_ip() {
        let old = two();
        // p1 moves to a new IP; p3 takes over p2's IP while p2 goes away.
        let new = snapshot(
            vec![meshed_pod("p1", "n1"), meshed_pod("p3", "n1")],
            json!([
                pod_ep("10.0.0.9", "p1", "z1"),
                pod_ep("10.0.0.2", "p3", "z2")
            ]),
        );
        let updates = updates_between(&old, &new);
        assert_eq!(updates.len(), 2);
        assert_eq!(added(&updates[0]), [sa("10.0.0.9"), sa("10.0.0.2")]);
        assert_eq!(
            removed(&updates[1]),
            [sa("10.0.0.1")],
            "10.0.0.2 is still offered"
        );
    }

    #[test]
    fn no_endpoints_transitions() {
        let full = two();
        let empty = snapshot(vec![], json!([]));
        let missing = Snapshot::missing();
        assert_eq!(updates_between(&full, &empty), [no_endpoints_update(true)]);
        assert_eq!(
            updates_between(&full, &missing),
            [no_endpoints_update(false)]
        );
        assert_eq!(
            updates_between(&empty, &missing),
            [no_endpoints_update(false)]
        );
        assert_eq!(
            updates_between(&missing, &empty),
            [no_endpoints_update(true)]
        );
        // Coming back after NoEndpoints: everything is added again.
        for from in [&empty, &missing] {
            let updates = updates_between(from, &full);
            assert_eq!(updates.len(), 1);
            assert_eq!(added(&updates[0]), [sa("10.0.0.1"), sa("10.0.0.2")]);
        }
    }

    #[test]
    fn coalescing_skips_intermediate_states() {
        let a = two();
        let b = snapshot(
            vec![meshed_pod("p1", "n1")],
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        );
        let c = snapshot(
            vec![meshed_pod("p1", "n1"), meshed_pod("p2", "n1")],
            json!([
                pod_ep("10.0.0.1", "p1", "z1"),
                pod_ep("10.0.0.2", "p2", "z2")
            ]),
        );
        assert!(!updates_between(&a, &b).is_empty());
        assert!(
            updates_between(&a, &c).is_empty(),
            "a → c directly is a no-op"
        );
    }

    #[test]
    fn untranslatable_endpoints_are_left_out() {
        let mut broken = meshed_pod("p2", "n1");
        if let Some(spec) = broken.spec.as_mut() {
            for c in &mut spec.containers {
                if let Some(env) = c.env.as_mut() {
                    env.retain(|e| e.name != labels::ENV_PROXY_ADMIN_LISTEN_ADDR);
                }
            }
        }
        let snap = snapshot(
            vec![meshed_pod("p1", "n1"), broken],
            json!([
                pod_ep("10.0.0.1", "p1", "z1"),
                pod_ep("10.0.0.2", "p2", "z2")
            ]),
        );
        assert_eq!(snap.len(), 1);
        assert_eq!(added(&initial_updates(&snap)[0]), [sa("10.0.0.1")]);
    }

    #[test]
    fn rebuild_reuses_unchanged_entries_for_same_zone() {
        let cache = Cache::new([meshed_pod("p1", "n1")]);
        let s = slice(
            "IPv4",
            json!([{"port": 80}]),
            json!([pod_ep("10.0.0.1", "p1", "z1")]),
        );
        let set = cache.translate(None, 80, std::slice::from_ref(&s));
        let labels = set_labels(&svc_id(), [&crate::k8s::slices::slice_facts(&s)]);
        let first = Snapshot::build(labels.clone(), &set, &cfg(), Some("z1"), None);
        let again = cache.translate(None, 80, std::slice::from_ref(&s));
        let second = Snapshot::build(labels.clone(), &again, &cfg(), Some("z1"), Some(&first));
        let (a, b) = (
            first.entries().next().expect("a"),
            second.entries().next().expect("b"),
        );
        assert!(Arc::ptr_eq(a, b));
        // Another zone must not reuse the translation (zone_locality differs).
        let other = Snapshot::build(labels, &again, &cfg(), Some("z2"), Some(&first));
        let c = other.entries().next().expect("c");
        assert!(!Arc::ptr_eq(a, c));
        assert_eq!(
            c.addr
                .metric_labels
                .get("zone_locality")
                .map(String::as_str),
            Some("remote")
        );
        assert_eq!(
            updates_between(&first, &other).len(),
            1,
            "locality change is re-sent"
        );
    }
}
