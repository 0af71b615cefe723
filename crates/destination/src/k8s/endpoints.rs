//! EndpointSlices + Service → the unfiltered endpoint set of one requested
//! port ([`EndpointMap`]), and the Service-level `metric_labels`.

use k8s_api::labels;
use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};

use super::external_workloads::external_workload_info;
use super::lookups::ClusterLookups;
use crate::core::authority::ServiceId;
use crate::core::endpoint::{
    AddressId, Endpoint, EndpointMap, GatewayInfo, PodInfo, TargetPort, Workload, WorkloadRef,
};

/// `targetRef.kind` of a pod-backed endpoint.
const POD_KIND: &str = "Pod";
/// `targetRef.kind` of an ExternalWorkload-backed endpoint.
const EXTERNAL_WORKLOAD_KIND: &str = "ExternalWorkload";

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
fn resolve_slice_port(ports: Option<&[EndpointPort]>, target: &TargetPort) -> Option<u16> {
    let ports = ports?;
    match target {
        TargetPort::Number(n) => Some(*n),
        TargetPort::Name(name) => ports
            .iter()
            .find(|p| p.name.as_deref().unwrap_or("") == name && p.port.is_some())
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok()),
    }
}

/// Translates the ready addresses of one EndpointSlice of `service` for the
/// given target port. `requested_port` is the port the client asked for
/// (used for gateway authority overrides).
pub fn endpoints_from_slice(
    service: &ServiceId,
    slice: &EndpointSlice,
    target: &TargetPort,
    requested_port: u16,
    lookups: &dyn ClusterLookups,
) -> Vec<Endpoint> {
    let Some(port) = resolve_slice_port(slice.ports.as_deref(), target) else {
        return Vec::new();
    };
    let slice_ns = slice
        .metadata
        .namespace
        .as_deref()
        .unwrap_or(&service.namespace);
    let annotations = slice.metadata.annotations.as_ref();
    let mut out = Vec::new();
    for ep in slice.endpoints.iter().flatten() {
        if ep.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
            continue;
        }
        let hostname = ep.hostname.clone().filter(|h| !h.is_empty());
        let for_zones = ep
            .hints
            .as_ref()
            .and_then(|h| h.for_zones.as_ref())
            .filter(|z| !z.is_empty())
            .map(|zones| {
                let mut names: Vec<String> = zones.iter().map(|z| z.name.clone()).collect();
                names.sort_unstable();
                names.dedup();
                names
            });
        let ips = ep
            .addresses
            .iter()
            .filter_map(|a| match a.parse::<IpAddr>() {
                Ok(ip) => Some(ip),
                Err(_) => {
                    tracing::debug!(address = %a, "skipping non-IP endpoint address");
                    None
                }
            });

        match &ep.target_ref {
            None => {
                let gateway = GatewayInfo {
                    authority_override: annotations
                        .and_then(|a| a.get(labels::REMOTE_SVC_FQ_NAME))
                        .map(|fq| format!("{fq}:{requested_port}")),
                    identity: annotations
                        .and_then(|a| a.get(labels::REMOTE_GATEWAY_IDENTITY))
                        .filter(|id| !id.is_empty())
                        .cloned(),
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
            Some(r) if r.kind.as_deref() == Some(POD_KIND) => {
                let pod_ns = r
                    .namespace
                    .as_deref()
                    .filter(|ns| !ns.is_empty())
                    .unwrap_or(slice_ns);
                let pod_name = r.name.as_deref().unwrap_or_default();
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
                        ep.zone.clone(),
                        for_zones.clone(),
                        opaque_by_server,
                    )
                }));
            }
            Some(r) if r.kind.as_deref() == Some(EXTERNAL_WORKLOAD_KIND) => {
                // The workload is looked up in the slice's namespace, as the
                // original does (a slice only selects its own namespace).
                let name = r.name.as_deref().unwrap_or_default();
                let Some(ew) = lookups.external_workload(slice_ns, name) else {
                    tracing::debug!(
                        namespace = slice_ns,
                        external_workload = name,
                        "skipping endpoint: external workload not in cache"
                    );
                    continue;
                };
                let info = Arc::new(external_workload_info(&ew));
                let workload = WorkloadRef::External(slice_ns.into(), name.into());
                let opaque_by_server = lookups.server_opaque(&workload, port);
                out.extend(ips.filter_map(|ip| {
                    Endpoint::of_workload(
                        Workload::External(Arc::clone(&info)),
                        SocketAddr::new(ip, port),
                        hostname.clone(),
                        ep.zone.clone(),
                        for_zones.clone(),
                        opaque_by_server,
                    )
                }));
            }
            Some(r) => {
                tracing::debug!(kind = ?r.kind, name = ?r.name, "skipping endpoint with unsupported targetRef kind");
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
    slices: impl IntoIterator<Item = &'s EndpointSlice>,
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
    slices: impl IntoIterator<Item = &'s EndpointSlice>,
) -> HashMap<String, String> {
    let mut labels = HashMap::from([
        ("service".to_string(), service.name.clone()),
        ("namespace".to_string(), service.namespace.clone()),
    ]);
    let mirrored = slices.into_iter().find_map(|s| {
        let cluster = s
            .metadata
            .labels
            .as_ref()?
            .get(labels::REMOTE_CLUSTER_NAME)?;
        let fq = s
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(labels::REMOTE_SVC_FQ_NAME));
        Some((cluster, fq))
    });
    if let Some((cluster, fq)) = mirrored {
        labels.insert("target_cluster".into(), cluster.clone());
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

/// The Service a slice belongs to (its `kubernetes.io/service-name` label).
pub fn slice_service_name(slice: &EndpointSlice) -> Option<&str> {
    slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::SERVICE_NAME))
        .map(String::as_str)
}

/// Every pod and ExternalWorkload the targetRefs of a slice name (in the
/// namespaces [`endpoints_from_slice`] looks them up in).
pub fn slice_workloads(slice: &EndpointSlice) -> HashSet<WorkloadRef> {
    let slice_ns = slice.metadata.namespace.as_deref().unwrap_or_default();
    slice
        .endpoints
        .iter()
        .flatten()
        .filter_map(|ep| ep.target_ref.as_ref())
        .filter_map(|r| {
            let name = r.name.clone()?;
            match r.kind.as_deref()? {
                POD_KIND => {
                    let ns = r
                        .namespace
                        .as_deref()
                        .filter(|ns| !ns.is_empty())
                        .unwrap_or(slice_ns);
                    Some(WorkloadRef::Pod(ns.to_string(), name))
                }
                EXTERNAL_WORKLOAD_KIND => Some(WorkloadRef::External(slice_ns.to_string(), name)),
                _ => None,
            }
        })
        .collect()
}

/// The endpoint of `slices` with this `hostname`: `None` if there is none,
/// else the `(namespace, name)` of its pod targetRef, if it has one.
pub fn instance_target<'s>(
    slices: impl IntoIterator<Item = &'s EndpointSlice>,
    hostname: &str,
    service_ns: &str,
) -> Option<Option<(String, String)>> {
    let endpoint = slices
        .into_iter()
        .flat_map(|slice| slice.endpoints.iter().flatten())
        .find(|ep| ep.hostname.as_deref() == Some(hostname))?;
    Some(
        endpoint
            .target_ref
            .as_ref()
            .filter(|r| r.kind.as_deref() == Some(POD_KIND))
            .and_then(|r| {
                let ns = r.namespace.as_deref().unwrap_or(service_ns);
                Some((ns.to_string(), r.name.clone()?))
            }),
    )
}
