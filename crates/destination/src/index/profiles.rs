//! `GetProfile` state in the index: which profile a request resolves to
//! (a Service port with its ServiceProfile, or a single endpoint), one
//! shared publisher per resolved key, and recomputation when a Service,
//! ServiceProfile or Pod that feeds it changes. A new message is published
//! only when the profile a proxy sees actually changes.

use std::{
    collections::HashSet,
    net::{IpAddr, SocketAddr},
    sync::Arc,
};

use k8s_api::service_profile::ServiceProfile;
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::watch;

use super::EndpointsIndex;
use crate::{
    core::{
        ServiceId, ServiceTarget,
        authority::parse_service_name,
        endpoint::{AddressFamily, AddressId, Endpoint, PodInfo, Workload},
    },
    k8s::{
        endpoints::instance_target,
        pods::{exposes_host_port, is_running, pod_ip, serves_pod_ip},
        services::{declares_port, is_external_name, service_opaque_ports},
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
    /// A single address (pod IP, host port, unknown IP).
    Endpoint(SocketAddr),
}

/// How a `GetProfile` request resolves.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolution {
    Key(ProfileKey),
    /// The Service does not declare the port: one empty profile.
    Empty,
}

/// Why a `GetProfile` request cannot be served.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileLookupError {
    #[error("service {0} not found")]
    ServiceNotFound(ServiceId),
    #[error("{0} is an ExternalName service")]
    ExternalName(ServiceId),
    #[error("no endpoint of {service} has hostname {hostname:?}")]
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
}

impl EndpointsIndex {
    /// Resolves a service name (`[instance.]svc.ns.svc.<domain>`) request.
    pub fn resolve_profile_name(
        &self,
        service: &ServiceId,
        instance: Option<&str>,
        port: u16,
        client_ns: Option<&str>,
    ) -> Result<Resolution, ProfileLookupError> {
        let svc = self
            .service(service)
            .ok_or_else(|| ProfileLookupError::ServiceNotFound(service.clone()))?;
        if let Some(hostname) = instance {
            return self.resolve_instance(service, hostname, port);
        }
        let declared = declares_port(svc, port);
        let external = is_external_name(svc);
        if !declared {
            return Ok(Resolution::Empty);
        }
        if external {
            return Err(ProfileLookupError::ExternalName(service.clone()));
        }
        Ok(Resolution::Key(ProfileKey::Service {
            target: self.service_target(service, port),
            client_ns: client_ns.filter(|ns| !ns.is_empty()).map(str::to_string),
        }))
    }

    /// Resolves an `ip:port` request: a Service ClusterIP, else a pod or host
    /// port, else the bare address.
    pub fn resolve_profile_addr(
        &self,
        addr: SocketAddr,
        client_ns: Option<&str>,
    ) -> Result<Resolution, ProfileLookupError> {
        let services = self.services_by_cluster_ip(addr.ip());
        match services.as_slice() {
            [] => {}
            [service] => {
                return self.resolve_profile_name(service, None, addr.port(), client_ns);
            }
            _ => return Err(ProfileLookupError::Ambiguous(addr.ip())),
        }
        if self.pods_at(addr.ip()).len() > 1 {
            return Err(ProfileLookupError::Ambiguous(addr.ip()));
        }
        Ok(Resolution::Key(ProfileKey::Endpoint(addr)))
    }

    fn resolve_instance(
        &self,
        service: &ServiceId,
        hostname: &str,
        port: u16,
    ) -> Result<Resolution, ProfileLookupError> {
        let target = instance_target(self.service_slices(service), hostname, &service.namespace)
            .ok_or_else(|| ProfileLookupError::NoSuchInstance {
                service: service.clone(),
                hostname: hostname.to_string(),
            })?;
        let ip = target
            .and_then(|(ns, name)| self.pod(&ns, &name).cloned())
            .and_then(|pod| pod_ip(&pod))
            .ok_or_else(|| ProfileLookupError::InstanceWithoutPod {
                service: service.clone(),
                hostname: hostname.to_string(),
            })?;
        Ok(Resolution::Key(ProfileKey::Endpoint(SocketAddr::new(
            ip, port,
        ))))
    }

    fn service_target(&self, service: &ServiceId, port: u16) -> ServiceTarget {
        ServiceTarget {
            service: service.clone(),
            port,
            fqn: format!(
                "{}.{}.svc.{}",
                service.name,
                service.namespace,
                self.config().cluster_domain
            ),
        }
    }

    /// Subscribes to the publisher of `key`, creating it if needed.
    pub fn subscribe_profile(&mut self, key: ProfileKey) -> watch::Receiver<Arc<ProfileState>> {
        if let Some(tx) = self.profile_publishers.get(&key) {
            return tx.subscribe();
        }
        let profile = self.compute_profile(&key).unwrap_or_default();
        let (tx, rx) = watch::channel(ProfileState::new(profile));
        self.profile_publishers.insert(key, tx);
        rx
    }

    /// Drops the publisher of `key` once no stream follows it.
    pub fn release_profile(&mut self, key: &ProfileKey) {
        if self
            .profile_publishers
            .get(key)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            self.profile_publishers.remove(key);
        }
    }

    /// Recomputes the publishers matching `affected` and publishes real changes.
    pub(crate) fn refresh_profiles(&mut self, affected: impl Fn(&ProfileKey) -> bool) {
        let keys: Vec<ProfileKey> = self
            .profile_publishers
            .keys()
            .filter(|k| affected(k))
            .cloned()
            .collect();
        for key in keys {
            let Some(profile) = self.compute_profile(&key) else {
                continue;
            };
            if let Some(tx) = self.profile_publishers.get(&key) {
                tx.send_if_modified(|current| {
                    if current.publishes(&profile) {
                        return false;
                    }
                    *current = ProfileState::new(profile);
                    true
                });
            }
        }
    }

    /// Recomputes the profiles of a Service.
    pub(crate) fn refresh_service_profiles(&mut self, service: &ServiceId) {
        self.refresh_profiles(
            |key| matches!(key, ProfileKey::Service { target, .. } if target.service == *service),
        );
    }

    /// Recomputes the endpoint profiles of these IPs.
    pub(crate) fn refresh_endpoint_profiles(&mut self, ips: &HashSet<IpAddr>) {
        if ips.is_empty() {
            return;
        }
        self.refresh_profiles(
            |key| matches!(key, ProfileKey::Endpoint(addr) if ips.contains(&addr.ip())),
        );
    }

    /// Recomputes the profiles a ServiceProfile named `name` can affect.
    pub(crate) fn refresh_profiles_named(&mut self, name: &str) {
        let cluster_domain = self.config().cluster_domain.clone();
        if let Ok((service, None)) = parse_service_name(name, &cluster_domain) {
            self.refresh_service_profiles(&service);
        }
    }

    /// `None` keeps the previous profile (an unusable ServiceProfile is logged).
    fn compute_profile(&self, key: &ProfileKey) -> Option<Profile> {
        match key {
            ProfileKey::Service { target, client_ns } => {
                let svc = self.service(&target.service).map(Arc::as_ref);
                let opaque = service_opaque_ports(svc, &self.config().default_opaque_ports)
                    .contains(target.port);
                let sp = client_ns
                    .as_deref()
                    .and_then(|ns| self.service_profile_in(ns, &target.fqn))
                    .or_else(|| self.service_profile_in(&target.service.namespace, &target.fqn));
                match proto_profile::service(target, sp.as_deref(), opaque) {
                    Ok(profile) => Some(profile),
                    Err(error) => {
                        tracing::warn!(fqn = %target.fqn, %error, "ignoring an unusable ServiceProfile");
                        None
                    }
                }
            }
            ProfileKey::Endpoint(addr) => Some(self.endpoint_profile_at(*addr)),
        }
    }

    fn service_profile_in(&self, namespace: &str, name: &str) -> Option<Arc<ServiceProfile>> {
        self.service_profiles
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    /// The endpoint profile of an address: the Running pod with that IP
    /// (with its `WeightedAddr` and a `namespace` label), a pod exposing that
    /// host port, or the bare address.
    fn endpoint_profile_at(&self, addr: SocketAddr) -> Profile {
        let cfg = self.config();
        let by_pod_ip = self.pods_at(addr.ip());
        let pod = match by_pod_ip.as_slice() {
            [pod] => Some(pod.clone()),
            _ => self.pod_by_host_port(addr),
        };
        let Some(pod) = pod.filter(|p| is_running(p)) else {
            return proto_profile::bare_endpoint(addr, false);
        };
        let owner = |kind, ns: &str, name: &str| self.owner_of(kind, ns, name);
        let info = Arc::new(PodInfo::from_pod(&pod, &owner));
        let opaque = info.is_opaque(addr.port(), cfg) || self.server_opaque(&pod, addr.port());
        let endpoint = Endpoint {
            id: AddressId::Pod {
                namespace: info.namespace.clone(),
                name: info.name.clone(),
                family: AddressFamily::of(addr.ip()),
            },
            addr,
            hostname: None,
            zone: None,
            for_zones: None,
            opaque_by_server: self.server_opaque(&pod, addr.port()),
            workload: Workload::Pod(info.clone()),
        };
        proto_profile::pod_endpoint(&endpoint, &info.namespace, cfg, opaque)
    }

    /// Pods on the pod network with this IP that are not finished or terminating.
    pub(crate) fn pods_at(&self, ip: IpAddr) -> Vec<Arc<Pod>> {
        self.pod_keys_at(ip)
            .filter_map(|(ns, name)| self.pod(ns, name).cloned())
            .filter(|pod| serves_pod_ip(pod))
            .collect()
    }

    fn pod_by_host_port(&self, addr: SocketAddr) -> Option<Arc<Pod>> {
        self.pods_iter()
            .find(|pod| exposes_host_port(pod, addr))
            .cloned()
    }
}
