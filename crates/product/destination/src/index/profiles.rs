//! `GetProfile` state in the index: which profile a request resolves to
//! (a Service port with its ServiceProfile, or a single endpoint), one
//! shared publisher per resolved key, and recomputation when a Service,
//! ServiceProfile or Pod that feeds it changes. A new message is published
//! only when the profile a proxy sees actually changes.

use std::{
    collections::{HashMap, HashSet},
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use tokio::sync::watch;

use super::cluster::{ClusterState, Touched};
use crate::{
    core::{
        ServiceId, ServiceTarget,
        endpoint::{Endpoint, PodInfo, Workload},
    },
    k8s::{
        endpoints::instance_target,
        external_workloads::external_workload_info,
        profiles::profile_rules,
        services::{is_external_name, service_opaque_ports},
    },
    proto::profile::{self as proto_profile, Profile, ProfileState},
};

/// What a `GetProfile` stream follows.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ProfileKey {
    /// A Service port, seen from a client namespace (whose ServiceProfile
    /// wins over the Service namespace's).
    Service {
        target: ServiceTarget,
        client_ns: Option<String>,
    },
    /// A single address (pod IP, host port, ExternalWorkload address,
    /// unknown IP).
    Endpoint(SocketAddr),
}

/// One `GetProfile` publisher, as the metrics read it.
#[derive(Clone, Debug)]
pub struct ProfileStats {
    pub key: ProfileKey,
    /// Streams following it.
    pub subscribers: usize,
    /// Changes it published (its version).
    pub version: u64,
}

/// Why a `GetProfile` request cannot be served. A Service that does not
/// exist (yet) is not one: its name resolves to its default profile, which
/// follows it into existence.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileLookupError {
    #[error("{0} is an ExternalName service")]
    ExternalName(ServiceId),
    /// The original's words (`NotFound`: a proxy retries it, and gets the
    /// instance once its endpoint appears).
    #[error(
        "no pod found in EndpointSlices of Service {}/{} for hostname {hostname}",
        service.namespace,
        service.name
    )]
    NoSuchInstance {
        service: ServiceId,
        hostname: String,
    },
    #[error("endpoint {hostname:?} of {service} has no running pod with an IP")]
    InstanceWithoutPod {
        service: ServiceId,
        hostname: String,
    },
    #[error("{0} matches several services or pods")]
    Ambiguous(IpAddr),
    #[error("found {count} externalworkloads with a conflicting ip {addr}")]
    AmbiguousExternalWorkload { addr: SocketAddr, count: usize },
}

/// The `GetProfile` publishers: one per resolved key. They read the
/// [`ClusterState`] and know nothing of the `Get` publishers.
#[derive(Default)]
pub struct ProfilePublishers {
    publishers: HashMap<ProfileKey, watch::Sender<Arc<ProfileState>>>,
    /// The keys of each Service's publishers, and of each IP's: a change
    /// recomputes those it touched without reading every publisher.
    by_service: HashMap<ServiceId, HashSet<ProfileKey>>,
    by_ip: HashMap<IpAddr, HashSet<ProfileKey>>,
}

impl ProfileKey {
    /// The Service or the IP whose changes this key's profile follows.
    fn follows(&self) -> Followed<'_> {
        match self {
            Self::Service { target, .. } => Followed::Service(&target.service),
            Self::Endpoint(addr) => Followed::Ip(addr.ip()),
        }
    }
}

/// What a profile key follows ([`ProfileKey::follows`]).
enum Followed<'a> {
    Service(&'a ServiceId),
    Ip(IpAddr),
}

impl ProfilePublishers {
    /// Subscribes to the publisher of `key`, creating it if needed.
    pub fn subscribe(
        &mut self,
        cluster: &ClusterState,
        key: ProfileKey,
    ) -> watch::Receiver<Arc<ProfileState>> {
        if let Some(tx) = self.publishers.get(&key) {
            return tx.subscribe();
        }
        let state = match compute_profile(cluster, &key) {
            Some(profile) => ProfileState::new(0, profile),
            None => ProfileState::nothing_yet(),
        };
        let (tx, rx) = watch::channel(state);
        match key.follows() {
            Followed::Service(service) => self
                .by_service
                .entry(service.clone())
                .or_default()
                .insert(key.clone()),
            Followed::Ip(ip) => self.by_ip.entry(ip).or_default().insert(key.clone()),
        };
        self.publishers.insert(key, tx);
        rx
    }

    /// Drops the publisher of `key` once no stream follows it.
    pub fn release(&mut self, key: &ProfileKey) {
        if self
            .publishers
            .get(key)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            self.publishers.remove(key);
            match key.follows() {
                Followed::Service(service) => remove_key(&mut self.by_service, service, key),
                Followed::Ip(ip) => remove_key(&mut self.by_ip, &ip, key),
            }
        }
    }

    /// The newest state of the publisher of `key`, if it has streams.
    pub fn state(&self, key: &ProfileKey) -> Option<Arc<ProfileState>> {
        Some(self.publishers.get(key)?.borrow().clone())
    }

    /// The publishers of `service`'s ports (by name or ClusterIP).
    pub fn service_states(&self, service: &ServiceId) -> Vec<(ProfileKey, Arc<ProfileState>)> {
        self.by_service
            .get(service)
            .into_iter()
            .flatten()
            .filter_map(|key| Some((key.clone(), self.publishers.get(key)?.borrow().clone())))
            .collect()
    }

    /// Calls `f` with every publisher's state and whether it is what the
    /// stored objects give now (the same rule as [`Self::refresh`]).
    pub fn for_each_profile(
        &self,
        cluster: &ClusterState,
        mut f: impl FnMut(&ProfileKey, &Arc<ProfileState>, bool),
    ) {
        for (key, tx) in &self.publishers {
            let published = tx.borrow().clone();
            // An unusable ServiceProfile keeps the previous profile by design.
            let consistent =
                compute_profile(cluster, key).is_none_or(|truth| published.publishes(&truth));
            f(key, &published, consistent);
        }
    }

    /// Every publisher's key, streams and published version (read by the
    /// metrics when scraped).
    pub fn stats(&self) -> Vec<ProfileStats> {
        self.publishers
            .iter()
            .map(|(key, tx)| ProfileStats {
                key: key.clone(),
                subscribers: tx.receiver_count(),
                version: tx.borrow().version,
            })
            .collect()
    }

    /// Number of publishers.
    pub fn len(&self) -> usize {
        self.publishers.len()
    }

    /// Whether there is no publisher.
    pub fn is_empty(&self) -> bool {
        self.publishers.is_empty()
    }

    /// Recomputes the publishers the change touched and publishes real changes.
    pub fn refresh(&mut self, cluster: &ClusterState, touched: &Touched) {
        if touched.profile_services.is_empty() && touched.profile_ips.is_empty() {
            return;
        }
        // Only the publishers of the Services and IPs touched.
        let keys = touched
            .profile_services
            .iter()
            .filter_map(|service| self.by_service.get(service))
            .chain(
                touched
                    .profile_ips
                    .iter()
                    .filter_map(|ip| self.by_ip.get(ip)),
            )
            .flatten();
        for key in keys {
            let Some(tx) = self.publishers.get(key) else {
                continue;
            };
            let Some(profile) = compute_profile(cluster, key) else {
                continue;
            };
            tx.send_if_modified(|current| {
                if current.publishes(&profile) {
                    return false;
                }
                *current = ProfileState::new(current.version + 1, profile);
                true
            });
        }
    }
}

/// Removes `key` from the set filed under `at`, and the set once empty.
fn remove_key<K: std::hash::Hash + Eq>(
    sets: &mut HashMap<K, HashSet<ProfileKey>>,
    at: &K,
    key: &ProfileKey,
) {
    if let Some(keys) = sets.get_mut(at) {
        keys.remove(key);
        if keys.is_empty() {
            sets.remove(at);
        }
    }
}

/// Resolves a service name (`[instance.]svc.ns.svc.<domain>`) request.
///
/// As the original, the Service is not looked up: a name resolves to its
/// Service port's profile whether or not the Service exists (yet) or
/// declares the port, and the profile follows the Service, its
/// opaque-ports annotation and its ServiceProfile as they come and go. Only
/// an ExternalName Service the index holds is refused; an instance name
/// needs its endpoint.
pub fn resolve_name(
    cluster: &ClusterState,
    service: &ServiceId,
    instance: Option<&str>,
    port: u16,
    client_ns: Option<&str>,
) -> Result<ProfileKey, ProfileLookupError> {
    if let Some(hostname) = instance {
        return resolve_instance(cluster, service, hostname, port);
    }
    if cluster
        .service(service)
        .is_some_and(|svc| is_external_name(svc))
    {
        return Err(ProfileLookupError::ExternalName(service.clone()));
    }
    Ok(ProfileKey::Service {
        target: service_target(cluster, service, port),
        client_ns: client_ns.filter(|ns| !ns.is_empty()).map(str::to_string),
    })
}

/// Resolves an `ip:port` request: a Service ClusterIP, else a pod or host
/// port, else the bare address.
pub fn resolve_addr(
    cluster: &ClusterState,
    addr: SocketAddr,
    client_ns: Option<&str>,
) -> Result<ProfileKey, ProfileLookupError> {
    let services = cluster.services_by_cluster_ip(addr.ip());
    match services.as_slice() {
        [] => {}
        [service] => {
            return resolve_name(cluster, service, None, addr.port(), client_ns);
        }
        _ => return Err(ProfileLookupError::Ambiguous(addr.ip())),
    }
    let pods = cluster.pods_at(addr.ip());
    if pods.len() > 1 {
        return Err(ProfileLookupError::Ambiguous(addr.ip()));
    }
    if pods.is_empty() && cluster.pod_by_host_port(addr).is_none() {
        let count = cluster.external_workloads_at(addr).len();
        if count > 1 {
            return Err(ProfileLookupError::AmbiguousExternalWorkload { addr, count });
        }
    }
    Ok(ProfileKey::Endpoint(addr))
}

/// Whether the index knows anything at `ip` that `GetProfile` by address
/// reads: a Service's ClusterIP, a pod (of any network, finished or not),
/// a host port's pod or an ExternalWorkload. A request for an address
/// nothing is known at is checked with the API server first.
pub fn knows_addr(cluster: &ClusterState, addr: SocketAddr) -> bool {
    !cluster.services_by_cluster_ip(addr.ip()).is_empty()
        || cluster.has_pod_with_ip(addr.ip())
        || cluster.pod_by_host_port(addr).is_some()
        || !cluster.external_workloads_at(addr).is_empty()
}

fn resolve_instance(
    cluster: &ClusterState,
    service: &ServiceId,
    hostname: &str,
    port: u16,
) -> Result<ProfileKey, ProfileLookupError> {
    let target = instance_target(
        cluster.service_slices(service),
        hostname,
        &service.namespace,
    )
    .ok_or_else(|| ProfileLookupError::NoSuchInstance {
        service: service.clone(),
        hostname: hostname.to_string(),
    })?;
    let ip = target
        .and_then(|(ns, name)| cluster.pod(&ns, &name).cloned())
        .and_then(|pod| pod.pod_ip())
        .ok_or_else(|| ProfileLookupError::InstanceWithoutPod {
            service: service.clone(),
            hostname: hostname.to_string(),
        })?;
    Ok(ProfileKey::Endpoint(SocketAddr::new(ip, port)))
}

fn service_target(cluster: &ClusterState, service: &ServiceId, port: u16) -> ServiceTarget {
    ServiceTarget {
        service: service.clone(),
        port,
        fqn: format!(
            "{}.{}.svc.{}",
            service.name,
            service.namespace,
            cluster.config().cluster_domain
        ),
    }
}

/// `None` keeps the previous profile (an unusable ServiceProfile is logged).
fn compute_profile(cluster: &ClusterState, key: &ProfileKey) -> Option<Profile> {
    match key {
        ProfileKey::Service { target, client_ns } => {
            // A Service the index does not hold has no opaque ports, as in
            // the original (its `GetProfile` and its outbound policy API).
            let opaque = cluster.service(&target.service).is_some_and(|svc| {
                service_opaque_ports(Some(svc), &cluster.config().default_opaque_ports)
                    .contains(target.port)
            });
            let sp = client_ns
                .as_deref()
                .and_then(|ns| cluster.service_profile_in(ns, &target.fqn))
                .or_else(|| cluster.service_profile_in(&target.service.namespace, &target.fqn));
            match sp.map(|sp| profile_rules(&sp, target.port)).transpose() {
                Ok(rules) => Some(proto_profile::service(target, rules.as_ref(), opaque)),
                Err(error) => {
                    tracing::warn!(fqn = %target.fqn, %error, "ignoring an unusable ServiceProfile");
                    None
                }
            }
        }
        ProfileKey::Endpoint(addr) => endpoint_profile_at(cluster, *addr),
    }
}

/// The endpoint profile of an address: the Running pod with that IP
/// (with its `WeightedAddr` and a `namespace` label), a pod exposing that
/// host port, the one ExternalWorkload declaring that address, or the bare
/// address (`None`: the pod's cannot be made, see
/// [`proto_profile::workload_endpoint`]).
fn endpoint_profile_at(cluster: &ClusterState, addr: SocketAddr) -> Option<Profile> {
    let by_pod_ip = cluster.pods_at(addr.ip());
    let pod = match by_pod_ip.as_slice() {
        [pod] => Some(pod.clone()),
        _ => cluster.pod_by_host_port(addr),
    };
    let Some(pod) = pod else {
        return external_profile_at(cluster, addr);
    };
    if !pod.is_running() {
        return Some(proto_profile::bare_endpoint(addr, false));
    }
    workload_profile(
        cluster,
        addr,
        Workload::Pod(Arc::new(PodInfo::new(pod, cluster))),
    )
}

/// The endpoint profile of the ExternalWorkload declaring `addr`, or of the
/// bare address when none (or several) do.
fn external_profile_at(cluster: &ClusterState, addr: SocketAddr) -> Option<Profile> {
    let workloads = cluster.external_workloads_at(addr);
    let [ew] = workloads.as_slice() else {
        return Some(proto_profile::bare_endpoint(addr, false));
    };
    workload_profile(
        cluster,
        addr,
        Workload::External(Arc::new(external_workload_info(ew))),
    )
}

/// The endpoint profile of a pod's or workload's address: opaque by its
/// annotation (or the defaults) or by a Server.
fn workload_profile(
    cluster: &ClusterState,
    addr: SocketAddr,
    workload: Workload,
) -> Option<Profile> {
    let cfg = cluster.config();
    let opaque_by_server = workload
        .workload_ref()
        .is_some_and(|w| cluster.server_opaque(&w, addr.port()));
    let opaque = workload.is_opaque(addr.port(), cfg) || opaque_by_server;
    match Endpoint::of_workload(workload, addr, None, None, None, opaque_by_server) {
        Some(endpoint) => proto_profile::workload_endpoint(&endpoint, cfg, opaque),
        None => Some(proto_profile::bare_endpoint(addr, false)),
    }
}
