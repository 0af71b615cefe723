//! The pure rule of the EndpointSlice writer: a Service, the
//! ExternalWorkloads of its namespace and the slices we already wrote for
//! it → the slices to create, update and delete.
//!
//! As the original: one slice family per address type the Service
//! supports (its `ipFamilies`, both when it has none), slices grouped by
//! the set of ports their endpoints resolve to, at most
//! [`MAX_ENDPOINTS`](super::MAX_ENDPOINTS) endpoints per slice, existing
//! slices filled before new ones are made, and a create paired with a
//! delete turned into one update. Nothing unchanged is written: an
//! endpoint or a slice whose computed form equals what is stored gives no
//! action. Slices another controller manages are never in the result.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::IpAddr,
};

use k8s_api::{
    labels::{ENDPOINT_SLICE_MANAGED_BY, SERVICE_HEADLESS, SERVICE_NAME, TOPOLOGY_ZONE},
    workload::{ConditionStatus, ExternalWorkload},
};
use k8s_openapi::{
    api::{
        core::v1::{ObjectReference, Service, ServicePort},
        discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice},
    },
    apimachinery::pkg::{apis::meta::v1::OwnerReference, util::intstr::IntOrString},
};
use kube::api::ObjectMeta;

use super::MANAGED_BY;

/// The slice address types the writer uses.
pub const IPV4: &str = "IPv4";
pub const IPV6: &str = "IPv6";

/// What to write for one Service.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Actions {
    /// New slices (named by `generateName`).
    pub create: Vec<EndpointSlice>,
    /// Existing slices, in full, with the `resourceVersion` they were read at.
    pub update: Vec<EndpointSlice>,
    /// Names of slices to delete.
    pub delete: Vec<String>,
}

impl Actions {
    pub fn is_empty(&self) -> bool {
        self.create.is_empty() && self.update.is_empty() && self.delete.is_empty()
    }
}

/// Whether `ew` is ready: its `Ready` condition is `True` (`IsEwReady`).
pub fn is_ready(ew: &ExternalWorkload) -> bool {
    ew.status.as_ref().is_some_and(|status| {
        status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == ConditionStatus::True)
    })
}

/// The Service's selector, if it has a non-empty one.
pub fn selector(svc: &Service) -> Option<&BTreeMap<String, String>> {
    svc.spec
        .as_ref()
        .and_then(|s| s.selector.as_ref())
        .filter(|s| !s.is_empty())
}

/// Whether a (non-empty) selector matches `labels`.
pub fn selects(
    selector: &BTreeMap<String, String>,
    labels: Option<&BTreeMap<String, String>>,
) -> bool {
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// Whether a slice is one of ours (by its `managed-by` label).
pub fn managed_by_us(slice: &EndpointSlice) -> bool {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(ENDPOINT_SLICE_MANAGED_BY))
        .is_some_and(|v| v == MANAGED_BY)
}

/// Computes the writes that bring `svc`'s slices (`existing`, those
/// labelled with its name; others' slices among them are ignored) to what
/// `workloads` (any in the namespace; the selector picks) call for.
pub fn reconcile(
    svc: &Service,
    workloads: &[&ExternalWorkload],
    existing: &[&EndpointSlice],
    max_endpoints: usize,
) -> Actions {
    let max_endpoints = max_endpoints.max(1);
    let ours: Vec<&EndpointSlice> = existing
        .iter()
        .copied()
        .filter(|s| managed_by_us(s) && s.metadata.deletion_timestamp.is_none())
        .collect();
    let spec = svc.spec.clone().unwrap_or_default();
    let selected: Vec<&ExternalWorkload> = match selector(svc) {
        // ExternalName Services get no endpoints.
        Some(sel) if spec.type_.as_deref() != Some("ExternalName") => workloads
            .iter()
            .copied()
            .filter(|ew| {
                ew.metadata.namespace == svc.metadata.namespace
                    && ew.metadata.deletion_timestamp.is_none()
                    && selects(sel, ew.metadata.labels.as_ref())
            })
            .collect(),
        _ => Vec::new(),
    };

    let supported = address_types(svc);
    let mut actions = Actions::default();
    let mut by_type: BTreeMap<&'static str, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in ours {
        match supported.iter().find(|t| **t == slice.address_type) {
            Some(t) => by_type.entry(t).or_default().push(slice),
            None => actions.delete.push(name_of(slice)),
        }
    }
    for addr_type in supported {
        let existing = by_type.remove(addr_type).unwrap_or_default();
        let part = by_address_type(svc, &selected, &existing, addr_type, max_endpoints);
        actions.create.extend(part.create);
        actions.update.extend(part.update);
        actions.delete.extend(part.delete);
    }
    // A Service on its way out gets no new slices (its owner references
    // would be garbage-collected at once).
    if svc.metadata.deletion_timestamp.is_some() {
        actions.create.clear();
    }
    actions.delete.sort();
    actions.delete.dedup();
    actions
}

/// The address types of `svc`'s slices: its `ipFamilies`, or both.
fn address_types(svc: &Service) -> Vec<&'static str> {
    let families = svc
        .spec
        .as_ref()
        .and_then(|s| s.ip_families.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut types: Vec<&'static str> = Vec::new();
    for family in families {
        let t = match family.as_str() {
            "IPv4" => IPV4,
            "IPv6" => IPV6,
            _ => continue,
        };
        if !types.contains(&t) {
            types.push(t);
        }
    }
    if types.is_empty() {
        // Headless Services have no families: an ExternalWorkload may have
        // addresses of either.
        types = vec![IPV4, IPV6];
    }
    types
}

fn name_of(slice: &EndpointSlice) -> String {
    slice.metadata.name.clone().unwrap_or_default()
}

/// A canonical, ordered form of a slice's ports (they group endpoints).
type PortsKey = Vec<(Option<String>, Option<i32>, Option<String>)>;

fn ports_key(ports: &[EndpointPort]) -> PortsKey {
    let mut key: PortsKey = ports
        .iter()
        .map(|p| (p.name.clone(), p.port, p.protocol.clone()))
        .collect();
    key.sort();
    key
}

/// What identifies an endpoint across reconciliations (as the upstream
/// endpoint hash: addresses, hostname, and the target's namespace/name).
type EndpointKey = (Vec<String>, Option<String>, Option<String>, Option<String>);

fn endpoint_key(ep: &Endpoint) -> EndpointKey {
    let mut addresses = ep.addresses.clone();
    addresses.sort();
    let target = ep.target_ref.as_ref();
    (
        addresses,
        ep.hostname.clone(),
        target.and_then(|t| t.namespace.clone()),
        target.and_then(|t| t.name.clone()),
    )
}

fn owned_by(slice: &EndpointSlice, svc: &Service) -> bool {
    let uid = svc.metadata.uid.as_deref().unwrap_or_default();
    slice
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| !uid.is_empty() && o.uid == uid && o.kind == "Service" && o.api_version == "v1")
}

struct Desired {
    ports: Vec<EndpointPort>,
    endpoints: BTreeMap<EndpointKey, Endpoint>,
}

fn by_address_type(
    svc: &Service,
    selected: &[&ExternalWorkload],
    existing: &[&EndpointSlice],
    addr_type: &'static str,
    max: usize,
) -> Actions {
    let mut actions = Actions::default();
    let mut existing_by_ports: BTreeMap<PortsKey, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in existing {
        if owned_by(slice, svc) {
            let key = ports_key(slice.ports.as_deref().unwrap_or_default());
            existing_by_ports.entry(key).or_default().push(slice);
        } else {
            // Ours, labelled with the Service's name, but owned by another
            // (e.g. a Service of the same name that was deleted).
            actions.delete.push(name_of(slice));
        }
    }

    let mut desired: BTreeMap<PortsKey, Desired> = BTreeMap::new();
    for ew in selected {
        let has_ips = ew
            .spec
            .workload_ips
            .as_ref()
            .is_some_and(|ips| !ips.is_empty());
        if !has_ips {
            continue;
        }
        let ports = endpoint_ports(svc, ew);
        let group = desired.entry(ports_key(&ports)).or_insert_with(|| Desired {
            ports,
            endpoints: BTreeMap::new(),
        });
        let ep = to_endpoint(addr_type, ew, svc);
        if !ep.addresses.is_empty() {
            group.endpoints.insert(endpoint_key(&ep), ep);
        }
    }

    for (key, group) in &mut desired {
        let slices = existing_by_ports.get(key).cloned().unwrap_or_default();
        let part = by_ports(svc, &slices, group, addr_type, max);
        actions.create.extend(part.create);
        actions.update.extend(part.update);
        actions.delete.extend(part.delete);
    }
    for (key, slices) in &existing_by_ports {
        if !desired.contains_key(key) {
            actions.delete.extend(slices.iter().map(|s| name_of(s)));
        }
    }

    // A slice to create and one to delete make one update of the latter
    // (same address type by construction; only the Service's own).
    let existing_by_name: BTreeMap<String, &EndpointSlice> =
        existing.iter().map(|s| (name_of(s), *s)).collect();
    let mut kept_deletes = Vec::new();
    for name in std::mem::take(&mut actions.delete) {
        let reusable = existing_by_name
            .get(&name)
            .filter(|s| owned_by(s, svc) && s.address_type == addr_type);
        match (reusable, actions.create.pop()) {
            (Some(old), Some(mut new)) => {
                new.metadata = ObjectMeta {
                    generate_name: None,
                    ..old.metadata.clone()
                };
                new.metadata.labels = Some(slice_labels(svc));
                new.metadata.owner_references = Some(vec![owner_ref(svc)]);
                actions.update.push(new);
            }
            (_, popped) => {
                if let Some(new) = popped {
                    actions.create.push(new);
                }
                kept_deletes.push(name);
            }
        }
    }
    actions.delete = kept_deletes;
    actions
}

/// Fills the slices of one port group with its desired endpoints.
fn by_ports(
    svc: &Service,
    existing: &[&EndpointSlice],
    desired: &mut Desired,
    addr_type: &'static str,
    max: usize,
) -> Actions {
    let labels = slice_labels(svc);
    let mut to_update: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut unchanged: BTreeMap<String, EndpointSlice> = BTreeMap::new();
    let mut delete = Vec::new();

    let mut existing: Vec<&EndpointSlice> = existing.to_vec();
    existing.sort_by_key(|s| name_of(s));
    for slice in existing {
        let stored = slice.endpoints.as_deref().unwrap_or_default();
        let mut keep = Vec::new();
        let mut changed = false;
        for ep in stored {
            if let Some(want) = desired.endpoints.remove(&endpoint_key(ep)) {
                changed |= want != *ep;
                keep.push(want);
            }
        }
        let labels_changed = slice.metadata.labels.as_ref() != Some(&labels);
        if changed || keep.len() != stored.len() {
            if keep.is_empty() {
                delete.push(name_of(slice));
            } else {
                let mut slice = slice.clone();
                slice.metadata.labels = Some(labels.clone());
                slice.endpoints = Some(keep);
                to_update.insert(name_of(&slice), slice);
            }
        } else if labels_changed {
            let mut slice = slice.clone();
            slice.metadata.labels = Some(labels.clone());
            to_update.insert(name_of(&slice), slice);
        } else {
            unchanged.insert(name_of(slice), slice.clone());
        }
    }

    let pop = |desired: &mut Desired| desired.endpoints.pop_first().map(|(_, ep)| ep);
    // Leftovers go first into slices written anyway, fullest first.
    if !desired.endpoints.is_empty() && !to_update.is_empty() {
        let mut names: Vec<(usize, String)> = to_update
            .iter()
            .map(|(name, s)| (len(s), name.clone()))
            .collect();
        names.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, name) in names {
            if let Some(slice) = to_update.get_mut(&name) {
                while len(slice) < max {
                    let Some(ep) = pop(desired) else { break };
                    slice.endpoints.get_or_insert_with(Vec::new).push(ep);
                }
            }
        }
    }
    // Then into the unchanged slice they fill best, else into new slices.
    let mut create = Vec::new();
    while !desired.endpoints.is_empty() {
        let left = desired.endpoints.len();
        let fill = (left < max)
            .then(|| slice_to_fill(&unchanged, left, max))
            .flatten();
        let mut slice = match fill.and_then(|name| unchanged.remove(&name)) {
            Some(slice) => slice,
            None => new_slice(svc, &desired.ports, addr_type, &labels),
        };
        while len(&slice) < max {
            let Some(ep) = pop(desired) else { break };
            slice.endpoints.get_or_insert_with(Vec::new).push(ep);
        }
        if slice.metadata.name.is_some() {
            to_update.insert(name_of(&slice), slice);
        } else {
            create.push(slice);
        }
    }
    Actions {
        create,
        update: to_update.into_values().collect(),
        delete,
    }
}

fn len(slice: &EndpointSlice) -> usize {
    slice.endpoints.as_ref().map_or(0, Vec::len)
}

/// The unchanged slice closest to full once `n` endpoints are added (and
/// not over `max`).
fn slice_to_fill(slices: &BTreeMap<String, EndpointSlice>, n: usize, max: usize) -> Option<String> {
    slices
        .iter()
        .filter_map(|(name, s)| max.checked_sub(n + len(s)).map(|room| (room, name)))
        .min_by_key(|(room, _)| *room)
        .map(|(_, name)| name.clone())
}

/// The labels of `svc`'s slices: its own labels but the reserved ones,
/// the headless mark, its name and our `managed-by`.
pub fn slice_labels(svc: &Service) -> BTreeMap<String, String> {
    let reserved = [SERVICE_NAME, ENDPOINT_SLICE_MANAGED_BY, SERVICE_HEADLESS];
    let mut labels: BTreeMap<String, String> = svc
        .metadata
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| !reserved.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if is_headless(svc) {
        labels.insert(SERVICE_HEADLESS.to_string(), String::new());
    }
    labels.insert(
        SERVICE_NAME.to_string(),
        svc.metadata.name.clone().unwrap_or_default(),
    );
    labels.insert(
        ENDPOINT_SLICE_MANAGED_BY.to_string(),
        MANAGED_BY.to_string(),
    );
    labels
}

fn is_headless(svc: &Service) -> bool {
    svc.spec
        .as_ref()
        .and_then(|s| s.cluster_ip.as_deref())
        .is_some_and(|ip| ip == "None")
}

fn owner_ref(svc: &Service) -> OwnerReference {
    OwnerReference {
        api_version: "v1".to_string(),
        kind: "Service".to_string(),
        name: svc.metadata.name.clone().unwrap_or_default(),
        uid: svc.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

fn new_slice(
    svc: &Service,
    ports: &[EndpointPort],
    addr_type: &str,
    labels: &BTreeMap<String, String>,
) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            generate_name: Some(format!(
                "linkerd-external-{}-",
                svc.metadata.name.as_deref().unwrap_or_default()
            )),
            namespace: svc.metadata.namespace.clone(),
            labels: Some(labels.clone()),
            owner_references: Some(vec![owner_ref(svc)]),
            ..Default::default()
        },
        address_type: addr_type.to_string(),
        endpoints: Some(Vec::new()),
        ports: Some(ports.to_vec()),
    }
}

fn is_ipv6(ip: &str) -> bool {
    match ip.parse::<IpAddr>() {
        Ok(ip) => ip.is_ipv6(),
        Err(_) => ip.contains(':'),
    }
}

/// The endpoint of `ew` in slices of `addr_type` (no addresses when it
/// has none of that family).
fn to_endpoint(addr_type: &str, ew: &ExternalWorkload, svc: &Service) -> Endpoint {
    let ready = is_ready(ew);
    let addresses = ew
        .spec
        .workload_ips
        .iter()
        .flatten()
        .filter(|ip| is_ipv6(&ip.ip) == (addr_type == IPV6))
        .map(|ip| ip.ip.clone())
        .collect();
    let hostname = (is_headless(svc) && ew.metadata.namespace == svc.metadata.namespace)
        .then(|| ew.metadata.name.clone())
        .flatten();
    Endpoint {
        addresses,
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(ready),
            terminating: Some(false),
        }),
        hostname,
        target_ref: Some(ObjectReference {
            kind: Some("ExternalWorkload".to_string()),
            namespace: ew.metadata.namespace.clone(),
            name: ew.metadata.name.clone(),
            uid: ew.metadata.uid.clone(),
            ..Default::default()
        }),
        zone: ew
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(TOPOLOGY_ZONE))
            .cloned(),
        ..Default::default()
    }
}

/// The Service's ports as `ew` serves them. A Service port whose target
/// the workload does not document (by number or by name, with the same
/// protocol) is left out, as the original does.
fn endpoint_ports(svc: &Service, ew: &ExternalWorkload) -> Vec<EndpointPort> {
    let spec = svc.spec.as_ref();
    let svc_ports = spec.and_then(|s| s.ports.as_deref()).unwrap_or_default();
    let mut ports = Vec::new();
    for svc_port in svc_ports {
        let Some(port) = workload_port(ew, svc_port) else {
            tracing::debug!(
                service = svc.metadata.name.as_deref().unwrap_or_default(),
                workload = ew.metadata.name.as_deref().unwrap_or_default(),
                port = svc_port.port,
                "the workload documents no port for this Service port"
            );
            continue;
        };
        ports.push(EndpointPort {
            name: svc_port.name.clone().filter(|n| !n.is_empty()),
            port: Some(port),
            protocol: svc_port.protocol.clone().filter(|p| !p.is_empty()),
            app_protocol: None,
        });
    }
    ports
}

fn protocol(p: Option<&str>) -> &str {
    p.filter(|p| !p.is_empty()).unwrap_or("TCP")
}

fn workload_port(ew: &ExternalWorkload, svc_port: &ServicePort) -> Option<i32> {
    let want_protocol = protocol(svc_port.protocol.as_deref());
    let target = svc_port
        .target_port
        .clone()
        .unwrap_or(IntOrString::Int(svc_port.port));
    ew.spec.ports.iter().flatten().find_map(|p| {
        if protocol(p.protocol.as_deref()) != want_protocol {
            return None;
        }
        let matches = match &target {
            IntOrString::Int(n) => i32::from(p.port) == *n,
            IntOrString::String(name) => p.name.as_deref() == Some(name.as_str()),
        };
        matches.then_some(i32::from(p.port))
    })
}

/// The service keys (`namespace/name`) among `services` that select a
/// workload with these labels in `namespace`.
pub fn selecting<'a>(
    services: impl IntoIterator<Item = &'a Service>,
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
) -> BTreeSet<String> {
    services
        .into_iter()
        .filter(|svc| svc.metadata.namespace.as_deref() == Some(namespace))
        .filter(|svc| selector(svc).is_some_and(|sel| selects(sel, labels)))
        .filter_map(|svc| {
            let name = svc.metadata.name.as_deref()?;
            Some(format!("{namespace}/{name}"))
        })
        .collect()
}

#[cfg(test)]
mod tests;
