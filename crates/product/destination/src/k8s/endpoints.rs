//! EndpointSlices + Service → the unfiltered endpoint set of one requested
//! port ([`EndpointMap`]), and the Service-level `metric_labels`.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;

use super::external_workloads::external_workload_info;
use super::lookups::ClusterLookups;
use crate::core::authority::ServiceId;
use crate::core::endpoint::{
    AddressId, Endpoint, EndpointMap, GatewayInfo, PodInfo, TargetPort, Workload, WorkloadRef,
};
use crate::core::slice::{SliceFacts, SlicePort, SliceTarget};

/// Resolves the requested port through the Service's ports (first one with that port number).
pub fn target_port(service: Option<&Service>, requested_port: u16) -> TargetPort {
    service
        .and_then(|svc| svc.spec.as_ref())
        .and_then(|spec| spec.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.port == i32::from(requested_port)))
        .map_or(TargetPort::Number(requested_port), |p| {
            TargetPort::Name(p.name.clone().unwrap_or_default())
        })
}

/// Whether the Service has `internalTrafficPolicy: Local`.
pub fn internal_traffic_policy_local(service: &Service) -> bool {
    service
        .spec
        .as_ref()
        .and_then(|s| s.internal_traffic_policy.as_deref())
        == Some("Local")
}

/// The port number a slice offers for the target, if any. A slice without a
/// `ports` list contributes nothing.
fn resolve_slice_port(ports: Option<&[SlicePort]>, target: &TargetPort) -> Option<u16> {
    let ports = ports?;
    match target {
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => ports
            .iter()
            .find(|p| *p.name == **name && p.port.is_some())
            .and_then(|p| p.port),
    }
}

/// Translates the ready addresses of one EndpointSlice of `service` for the
/// given target port. `requested_port` is the port the client asked for
/// (used for gateway authority overrides).
pub fn endpoints_from_slice(
    service: &ServiceId,
    slice: &SliceFacts,
    target: &TargetPort,
    requested_port: u16,
    lookups: &dyn ClusterLookups,
) -> Vec<Endpoint> {
    let Some(port) = resolve_slice_port(slice.ports.as_deref(), target) else {
        return Vec::new();
    };
    let slice_ns: &str = if slice.namespace.is_empty() {
        &service.namespace
    } else {
        &slice.namespace
    };
    let mut out = Vec::new();
    for ep in &slice.endpoints {
        if ep.ready == Some(false) {
            continue;
        }
        let hostname = ep.hostname.as_deref().map(str::to_string);
        let zone = ep.zone.as_deref().map(str::to_string);
        let for_zones = ep
            .for_zones
            .as_ref()
            .map(|zones| zones.iter().map(|z| z.to_string()).collect::<Vec<_>>());
        let ips = ep.addresses.iter().copied();
        match &ep.target {
            None => {
                let mirror = slice.mirror.as_deref();
                let gateway = GatewayInfo {
                    authority_override: mirror
                        .and_then(|m| m.remote_svc_fq_name.as_deref())
                        .map(|fq| format!("{fq}:{requested_port}")),
                    identity: mirror
                        .and_then(|m| m.gateway_identity.as_deref())
                        .map(str::to_string),
                };
                for ip in ips {
                    let mut name = format!("{}-{}-{}", service.name, ip, port);
                    if let Some(h) = &hostname {
                        name.push('-');
                        name.push_str(h);
                    }
                    out.push(Endpoint {
                        id: AddressId::Service {
                            namespace: slice_ns.to_string(),
                            name,
                        },
                        addr: SocketAddr::new(ip, port),
                        hostname: hostname.clone(),
                        zone: None,
                        for_zones: for_zones.clone(),
                        opaque_by_server: false,
                        workload: Workload::Gateway(gateway.clone()),
                    });
                }
            }
            Some(target @ SliceTarget::Pod { .. }) => {
                let Some((pod_ns, pod_name)) = target.pod(slice_ns) else {
                    continue;
                };
                let Some(pod) = lookups.pod(pod_ns, pod_name) else {
                    tracing::debug!(
                        namespace = pod_ns,
                        pod = pod_name,
                        "skipping endpoint: pod not in cache"
                    );
                    continue;
                };
                let info = Arc::new(PodInfo::new(pod, lookups));
                let workload = WorkloadRef::Pod(pod_ns.into(), pod_name.into());
                let opaque_by_server = lookups.server_opaque(&workload, port);
                out.extend(ips.filter_map(|ip| {
                    Endpoint::of_workload(
                        Workload::Pod(Arc::clone(&info)),
                        SocketAddr::new(ip, port),
                        hostname.clone(),
                        zone.clone(),
                        for_zones.clone(),
                        opaque_by_server,
                    )
                }));
            }
            Some(SliceTarget::ExternalWorkload { name }) => {
                // The workload is looked up in the slice's namespace, as the
                // original does (a slice only selects its own namespace).
                let Some(ew) = lookups.external_workload(slice_ns, name) else {
                    tracing::debug!(
                        namespace = slice_ns,
                        external_workload = &**name,
                        "skipping endpoint: external workload not in cache"
                    );
                    continue;
                };
                let info = Arc::new(external_workload_info(&ew));
                let workload = WorkloadRef::External(slice_ns.into(), name.to_string());
                let opaque_by_server = lookups.server_opaque(&workload, port);
                out.extend(ips.filter_map(|ip| {
                    Endpoint::of_workload(
                        Workload::External(Arc::clone(&info)),
                        SocketAddr::new(ip, port),
                        hostname.clone(),
                        zone.clone(),
                        for_zones.clone(),
                        opaque_by_server,
                    )
                }));
            }
            Some(SliceTarget::Other { kind, name }) => {
                tracing::debug!(
                    kind = &**kind,
                    name = &**name,
                    "skipping endpoint with unsupported targetRef kind"
                );
            }
        }
    }
    out
}

/// The unfiltered endpoint set of `service:requested_port` from all its slices.
/// `svc` is the Service object if it exists (it decides the target port).
pub fn translate_endpoints<'s>(
    service: &ServiceId,
    svc: Option<&Service>,
    requested_port: u16,
    slices: impl IntoIterator<Item = &'s SliceFacts>,
    lookups: &dyn ClusterLookups,
) -> EndpointMap {
    let target = target_port(svc, requested_port);
    let mut set = EndpointMap::new();
    // Dual-stack pods appear in one slice per family: share their facts.
    let mut pods: HashMap<(String, String), Arc<PodInfo>> = HashMap::new();
    let mut externals: HashMap<(String, String), Arc<_>> = HashMap::new();
    for slice in slices {
        for mut ep in endpoints_from_slice(service, slice, &target, requested_port, lookups) {
            match &mut ep.workload {
                Workload::Pod(info) => {
                    let key = (info.namespace.to_string(), info.name.to_string());
                    share(&mut pods, key, info);
                }
                Workload::External(info) => {
                    let key = (info.namespace.clone(), info.name.clone());
                    share(&mut externals, key, info);
                }
                Workload::Gateway(_) => {}
            }
            set.insert(ep.id.clone(), Arc::new(ep));
        }
    }
    set
}

/// Makes `info` the one already seen under `key` when they are equal, so
/// the two families of one workload share their facts.
fn share<T: PartialEq>(
    seen: &mut HashMap<(String, String), Arc<T>>,
    key: (String, String),
    info: &mut Arc<T>,
) {
    match seen.get(&key) {
        Some(shared) if shared == info => *info = Arc::clone(shared),
        _ => {
            seen.insert(key, Arc::clone(info));
        }
    }
}

/// `WeightedAddrSet.metric_labels`: `service`, `namespace` and, for mirrored
/// slices, `target_cluster` / `target_service` / `target_service_namespace`.
pub fn set_labels<'s>(
    service: &ServiceId,
    slices: impl IntoIterator<Item = &'s SliceFacts>,
) -> HashMap<String, String> {
    let mut labels = HashMap::from([
        ("service".to_string(), service.name.clone()),
        ("namespace".to_string(), service.namespace.clone()),
    ]);
    let mirrored = slices.into_iter().find_map(|s| {
        let mirror = s.mirror.as_deref()?;
        Some((
            mirror.cluster.as_deref()?,
            mirror.remote_svc_fq_name.as_deref(),
        ))
    });
    if let Some((cluster, fq)) = mirrored {
        labels.insert("target_cluster".into(), cluster.to_string());
        if let Some(fq) = fq {
            let mut parts = fq.split('.');
            if let (Some(svc), Some(ns)) = (parts.next(), parts.next()) {
                labels.insert("target_service".into(), svc.to_string());
                labels.insert("target_service_namespace".into(), ns.to_string());
            }
        }
    }
    labels
}

/// Every pod and ExternalWorkload the targetRefs of a slice name (in the
/// namespaces [`endpoints_from_slice`] looks them up in).
pub fn slice_workloads(slice: &SliceFacts) -> HashSet<WorkloadRef> {
    slice
        .endpoints
        .iter()
        .filter_map(|ep| ep.target.as_ref())
        .filter_map(|target| match target {
            SliceTarget::Pod { .. } => {
                let (ns, name) = target.pod(&slice.namespace)?;
                Some(WorkloadRef::Pod(ns.to_string(), name.to_string()))
            }
            SliceTarget::ExternalWorkload { name } => Some(WorkloadRef::External(
                slice.namespace.to_string(),
                name.to_string(),
            )),
            SliceTarget::Other { .. } => None,
        })
        .collect()
}

/// The endpoint of `slices` with this `hostname`: `None` if there is none,
/// else the `(namespace, name)` of its pod targetRef, if it has one.
pub fn instance_target<'s>(
    slices: impl IntoIterator<Item = &'s SliceFacts>,
    hostname: &str,
    service_ns: &str,
) -> Option<Option<(String, String)>> {
    let endpoint = slices
        .into_iter()
        .flat_map(|slice| slice.endpoints.iter())
        .find(|ep| ep.hostname.as_deref() == Some(hostname))?;
    Some(
        endpoint
            .target
            .as_ref()
            .and_then(|t| t.pod(service_ns))
            .map(|(ns, name)| (ns.to_string(), name.to_string())),
    )
}
