//! Immutable snapshots of a filter group's endpoints (with their translated
//! `WeightedAddr`s, built once per group), diffs between snapshots, and the
//! `Update` messages a stream sends: the initial message of a new stream and
//! the single coalesced step from the snapshot a stream last sent to the newest.
//!
//! Meridian sends `NoEndpoints{exists: true}` when the Service exists with no
//! endpoints and `NoEndpoints{exists: false}` when it is missing; both reset
//! the proxy's set, so no `Remove` precedes them.

use crate::config::TranslatorConfig;
use crate::endpoint_translator::{AddressId, Endpoint, EndpointMap, weighted_addr};
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
