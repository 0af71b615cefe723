//! A meshed pod in the index: its labels, annotation settings, named ports
//! and probe paths, and the published server of each of its known ports.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    num::NonZeroU16,
};

use k8s_openapi::{
    api::core::v1::{Container, ContainerPort, Pod},
    apimachinery::pkg::util::intstr::IntOrString,
};
use tokio::sync::watch;

use super::{ClusterInfo, PolicyNs, authz::Authentications, selector::Labels, server::PortRef};
use crate::core::{
    DefaultPolicy, InboundServer, PortSet, ProxyProtocol, ServerRef, parse_port_set,
    routes::default_http_routes,
};

/// Annotation naming the pod's default policy.
pub const DEFAULT_POLICY_ANNOTATION: &str = k8s_api::labels::DEFAULT_INBOUND_POLICY;
/// Annotation listing the pod's opaque ports.
pub const OPAQUE_PORTS_ANNOTATION: &str = k8s_api::labels::OPAQUE_PORTS;
/// Annotation listing ports whose default policy requires identity.
pub const REQUIRE_IDENTITY_ANNOTATION: &str = k8s_api::labels::REQUIRE_IDENTITY_INBOUND_PORTS;

/// What the index keeps of a pod's definition.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodInfo {
    pub labels: Labels,
    pub settings: Settings,
    /// Port name → TCP container ports with that name (init containers too).
    pub port_names: HashMap<String, PortSet>,
    /// Port → HTTP probe paths.
    pub probes: BTreeMap<NonZeroU16, BTreeSet<String>>,
}

/// Per-pod settings from annotations.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `None`: use the cluster default (also when the annotation is invalid).
    pub default_policy: Option<DefaultPolicy>,
    pub opaque_ports: PortSet,
    pub require_identity_ports: PortSet,
}

impl PodInfo {
    pub fn from_pod(pod: &Pod) -> Self {
        let containers: Vec<&Container> = pod
            .spec
            .iter()
            .flat_map(|s| {
                s.containers
                    .iter()
                    .chain(s.init_containers.iter().flatten())
            })
            .collect();
        let mut port_names: HashMap<String, PortSet> = HashMap::new();
        for (port, name) in containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .filter_map(named_tcp_port)
        {
            port_names.entry(name.to_string()).or_default().insert(port);
        }
        let mut probes: BTreeMap<NonZeroU16, BTreeSet<String>> = BTreeMap::new();
        for (port, path) in containers.iter().flat_map(|c| probe_paths(c)) {
            probes.entry(port).or_default().insert(path);
        }
        Self {
            labels: pod.metadata.labels.clone().unwrap_or_default(),
            settings: Settings::from_annotations(pod.metadata.annotations.as_ref()),
            port_names,
            probes,
        }
    }
}

impl Settings {
    pub fn from_annotations(annotations: Option<&BTreeMap<String, String>>) -> Self {
        let Some(anns) = annotations else {
            return Self::default();
        };
        let default_policy = anns.get(DEFAULT_POLICY_ANNOTATION).and_then(|v| {
            v.parse()
                .map_err(|error| {
                    tracing::warn!(%error, "invalid {DEFAULT_POLICY_ANNOTATION} annotation; using the cluster default")
                })
                .ok()
        });
        let ports = |key: &str| {
            anns.get(key)
                .map(|v| {
                    parse_port_set(v).unwrap_or_else(|| {
                        tracing::warn!(value = %v, "invalid {key} annotation; treating it as empty");
                        PortSet::new()
                    })
                })
                .unwrap_or_default()
        };
        Self {
            default_policy,
            opaque_ports: ports(OPAQUE_PORTS_ANNOTATION),
            require_identity_ports: ports(REQUIRE_IDENTITY_ANNOTATION),
        }
    }
}

fn tcp_port(port: &ContainerPort) -> Option<NonZeroU16> {
    if port
        .protocol
        .as_deref()
        .is_some_and(|p| !p.eq_ignore_ascii_case("TCP"))
    {
        return None;
    }
    u16::try_from(port.container_port)
        .ok()
        .and_then(NonZeroU16::new)
}

fn named_tcp_port(port: &ContainerPort) -> Option<(NonZeroU16, &str)> {
    Some((tcp_port(port)?, port.name.as_deref()?))
}

/// The (port, path) of each httpGet liveness, readiness and startup probe;
/// named ports resolve among the container's own TCP ports; the query is
/// dropped and a missing path is `/`.
fn probe_paths(c: &Container) -> impl Iterator<Item = (NonZeroU16, String)> + '_ {
    [&c.liveness_probe, &c.readiness_probe, &c.startup_probe]
        .into_iter()
        .flatten()
        .filter_map(|probe| {
            let get = probe.http_get.as_ref()?;
            let port = match &get.port {
                IntOrString::Int(n) => u16::try_from(*n).ok().and_then(NonZeroU16::new)?,
                IntOrString::String(name) => {
                    c.ports
                        .iter()
                        .flatten()
                        .filter_map(named_tcp_port)
                        .find(|(_, n)| n.eq_ignore_ascii_case(name))?
                        .0
                }
            };
            let raw = get.path.as_deref().unwrap_or("/");
            match raw.parse::<http::Uri>() {
                Ok(uri) => Some((port, uri.path().to_string())),
                Err(error) => {
                    tracing::warn!(%error, path = raw, "invalid probe path");
                    None
                }
            }
        })
}

/// A pod in the index.
#[derive(Debug)]
pub(super) struct PodState {
    pub info: PodInfo,
    pub port_servers: BTreeMap<NonZeroU16, PortServer>,
}

/// The published server of one port.
#[derive(Debug)]
pub(super) struct PortServer {
    /// The Server resource, or `None` for the default server.
    pub server: Option<String>,
    pub tx: watch::Sender<InboundServer>,
}

impl PodState {
    pub fn new(info: PodInfo) -> Self {
        Self {
            info,
            port_servers: BTreeMap::new(),
        }
    }

    fn probe_paths(&self, port: NonZeroU16) -> impl Iterator<Item = &str> {
        self.info
            .probes
            .get(&port)
            .into_iter()
            .flatten()
            .map(String::as_str)
    }

    fn select_ports(&self, port: &PortRef) -> Vec<NonZeroU16> {
        match port {
            PortRef::Number(p) => vec![*p],
            PortRef::Name(name) => self
                .info
                .port_names
                .get(name)
                .into_iter()
                .flatten()
                .copied()
                .collect(),
        }
    }

    /// The default server of `port` for this pod.
    pub fn default_server(&self, port: NonZeroU16, cluster: &ClusterInfo) -> InboundServer {
        let settings = &self.info.settings;
        let protocol = if settings.opaque_ports.contains(&port) {
            ProxyProtocol::Opaque
        } else {
            ProxyProtocol::Detect {
                timeout: cluster.detect_timeout,
            }
        };
        let mut policy = settings.default_policy.unwrap_or(cluster.default_policy);
        if settings.require_identity_ports.contains(&port) {
            policy = policy.require_identity();
        }
        InboundServer {
            reference: ServerRef::Default(policy.as_str()),
            protocol,
            authorizations: policy.authorizations(&cluster.networks),
            http_routes: default_http_routes(self.probe_paths(port), &cluster.probe_networks),
            grpc_routes: Default::default(),
            ratelimit: None,
        }
    }

    /// Recomputes the server of every port Servers select and of every
    /// known port, publishing only real changes. The oldest Server (then
    /// the first by name) wins a contested port.
    pub fn reindex(&mut self, policy: &PolicyNs, authns: &Authentications, cluster: &ClusterInfo) {
        let mut unmatched: BTreeSet<NonZeroU16> = self.port_servers.keys().copied().collect();
        let mut matched: BTreeMap<NonZeroU16, &str> = BTreeMap::new();
        for (name, srv) in policy.servers_by_age() {
            let Some(selector) = &srv.pod_selector else {
                continue;
            };
            if !selector.matches(&self.info.labels) {
                continue;
            }
            for port in self.select_ports(&srv.port) {
                if let Some(winner) = matched.get(&port) {
                    tracing::warn!(%port, server = %winner, conflict = %name, "Port already matched by another server; skipping");
                    continue;
                }
                let server =
                    policy.inbound_server(name, srv, authns, cluster, self.probe_paths(port));
                self.publish(port, Some(name), server);
                matched.insert(port, name);
                unmatched.remove(&port);
            }
        }
        for port in unmatched {
            let server = self.default_server(port, cluster);
            self.publish(port, None, server);
        }
    }

    fn publish(&mut self, port: NonZeroU16, name: Option<&str>, server: InboundServer) {
        match self.port_servers.get_mut(&port) {
            None => {
                let (tx, _) = watch::channel(server);
                self.port_servers.insert(
                    port,
                    PortServer {
                        server: name.map(str::to_string),
                        tx,
                    },
                );
            }
            Some(ps) => {
                if ps.server.as_deref() != name {
                    ps.server = name.map(str::to_string);
                }
                ps.tx.send_if_modified(|current| {
                    if *current == server {
                        return false;
                    }
                    *current = server;
                    true
                });
            }
        }
    }

    /// The ports a Server (not a default) makes opaque, sorted.
    pub fn server_opaque_ports(&self) -> Vec<u16> {
        self.port_servers
            .iter()
            .filter(|(_, ps)| {
                ps.server.is_some() && matches!(ps.tx.borrow().protocol, ProxyProtocol::Opaque)
            })
            .map(|(port, _)| port.get())
            .collect()
    }

    /// A receiver of `port`'s server, creating the default server of an
    /// unknown port.
    pub fn subscribe(
        &mut self,
        port: NonZeroU16,
        cluster: &ClusterInfo,
    ) -> watch::Receiver<InboundServer> {
        if let Some(ps) = self.port_servers.get(&port) {
            return ps.tx.subscribe();
        }
        let (tx, rx) = watch::channel(self.default_server(port, cluster));
        self.port_servers
            .insert(port, PortServer { server: None, tx });
        rx
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_info_reads_ports_probes_and_annotations() {
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "p", "namespace": "ns",
                "labels": {"app": "web"},
                "annotations": {
                    DEFAULT_POLICY_ANNOTATION: "bogus",
                    OPAQUE_PORTS_ANNOTATION: "3306,4000-4001",
                    REQUIRE_IDENTITY_ANNOTATION: "not-a-list"
                }
            },
            "spec": {
                "containers": [{
                    "name": "app",
                    "ports": [
                        {"name": "http", "containerPort": 8080},
                        {"name": "admin", "containerPort": 9990},
                        {"name": "dns", "containerPort": 53, "protocol": "UDP"},
                        {"containerPort": 7000}
                    ],
                    "livenessProbe": {"httpGet": {"port": "admin", "path": "/live?verbose=1"}},
                    "readinessProbe": {"httpGet": {"port": 9990, "path": "/ready"}},
                    "startupProbe": {"tcpSocket": {"port": 8080}}
                }, {
                    "name": "other",
                    "ports": [{"name": "http", "containerPort": 8081}],
                    "livenessProbe": {"httpGet": {"port": "admin"}}
                }],
                "initContainers": [{
                    "name": "init",
                    "ports": [{"name": "http", "containerPort": 8082}],
                    "readinessProbe": {"httpGet": {"port": 8082}}
                }]
            }
        }))
        .expect("pod");
        let info = PodInfo::from_pod(&pod);
        let p = |n| NonZeroU16::new(n).expect("nonzero");
        assert_eq!(
            info.port_names["http"],
            [p(8080), p(8081), p(8082)].into_iter().collect()
        );
        assert!(!info.port_names.contains_key("dns"));
        assert_eq!(info.port_names.len(), 2);
        // "admin" does not resolve in the "other" container.
        assert_eq!(
            info.probes,
            [
                (p(8082), ["/".to_string()].into_iter().collect()),
                (
                    p(9990),
                    ["/live".to_string(), "/ready".to_string()]
                        .into_iter()
                        .collect()
                ),
            ]
            .into_iter()
            .collect()
        );
        assert_eq!(info.settings.default_policy, None);
        assert_eq!(
            info.settings.opaque_ports,
            [p(3306), p(4000), p(4001)].into_iter().collect()
        );
        assert!(info.settings.require_identity_ports.is_empty());
    }
}
