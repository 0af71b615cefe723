//! The outbound index's egress side: which EgressNetwork an egress address
//! resolves to for a client, the policy it gets (the routes whose parent
//! is that EgressNetwork, its annotations, its `trafficPolicy`), and the
//! watches of egress addresses, recomputed whenever an EgressNetwork or
//! such a route changes ([`crate::k8s::outbound::egress`] reads the
//! EgressNetworks).

use std::{
    collections::BTreeSet,
    net::{IpAddr, SocketAddr},
    num::NonZeroU16,
    sync::Arc,
};

use k8s_api::policy::EgressNetwork;
use tokio::sync::watch;

use super::{AnyRoute, OutboundIndex, OutboundIndexed, ServiceKey};
use crate::{
    core::{
        egress::{EgressNetworkInfo, EgressPolicy, resolve_egress_network},
        outbound::{Backend, OutboundPolicy},
    },
    k8s::outbound::egress::EgressEntry,
};

impl OutboundIndex {
    /// The EgressNetwork `addr` belongs to for clients of `source_ns`.
    pub(super) fn egress_network_for(
        &self,
        addr: IpAddr,
        source_ns: &str,
    ) -> Option<&EgressNetworkInfo> {
        resolve_egress_network(
            addr,
            source_ns,
            &self.cluster.global_egress_network_namespace,
            self.egress_networks.values().map(|e| &e.info),
        )
    }

    /// The policy of an egress address for clients of `source_ns`.
    pub fn egress_policy(&self, addr: SocketAddr, source_ns: &str) -> EgressPolicy {
        let Some(info) = self.egress_network_for(addr.ip(), source_ns) else {
            return EgressPolicy::Fallback;
        };
        let key = (info.namespace.clone(), info.name.clone());
        let Some(entry) = self.egress_networks.get(&key) else {
            return EgressPolicy::Fallback;
        };
        let (namespace, name) = &key;
        let Some(port) = NonZeroU16::new(addr.port()) else {
            return EgressPolicy::Fallback;
        };
        let mut policy = OutboundPolicy {
            namespace: namespace.clone(),
            name: name.clone(),
            port,
            authority: String::new(),
            app_protocol: None,
            accrual: entry.settings.accrual,
            load_biaser: None,
            honor_retry_after: entry.settings.honor_retry_after,
            http_retry: entry.settings.http_retry.clone(),
            grpc_retry: entry.settings.grpc_retry.clone(),
            timeouts: entry.settings.timeouts.clone(),
            http_routes: Default::default(),
            grpc_routes: Default::default(),
            tls_routes: Default::default(),
            tcp_routes: Default::default(),
        };
        for id in &self.egress_routes {
            let Some(binding) = self.routes.get(id) else {
                continue;
            };
            // Producer routes (the EgressNetwork's namespace) apply to every
            // client; consumer routes only to clients of their namespace.
            if id.namespace != *namespace && id.namespace != source_ns {
                continue;
            }
            let attached = binding.egress_parents.iter().any(|p| {
                p.namespace == *namespace && p.name == *name && p.port.is_none_or(|p| p == port)
            });
            if !attached {
                continue;
            }
            let resolve = |backends: &mut Vec<Backend>| {
                for backend in backends.iter_mut() {
                    self.resolve_egress_backend(backend, &key, addr);
                }
            };
            match &binding.route {
                AnyRoute::Http(route) => {
                    let mut route = route.clone();
                    route
                        .rules
                        .iter_mut()
                        .for_each(|r| resolve(&mut r.backends));
                    policy.http_routes.insert(id.clone(), route);
                }
                AnyRoute::Grpc(route) => {
                    let mut route = route.clone();
                    route
                        .rules
                        .iter_mut()
                        .for_each(|r| resolve(&mut r.backends));
                    policy.grpc_routes.insert(id.clone(), route);
                }
                AnyRoute::Tls(route) => {
                    let mut route = route.clone();
                    route
                        .rules
                        .iter_mut()
                        .for_each(|r| resolve(&mut r.backends));
                    policy.tls_routes.insert(id.clone(), route);
                }
                AnyRoute::Tcp(route) => {
                    let mut route = route.clone();
                    route
                        .rules
                        .iter_mut()
                        .for_each(|r| resolve(&mut r.backends));
                    policy.tcp_routes.insert(id.clone(), route);
                }
            }
        }
        EgressPolicy::Network {
            traffic_policy: entry.info.traffic_policy,
            policy: Box::new(policy),
        }
    }

    /// A backend of a route attached to EgressNetwork `parent`, for a
    /// connection to `addr`: a Service as usual; the parent itself forwards
    /// to `addr`; another EgressNetwork fails.
    fn resolve_egress_backend(
        &self,
        backend: &mut Backend,
        parent: &(String, String),
        addr: SocketAddr,
    ) {
        match backend {
            Backend::Service(svc) => {
                svc.exists = self
                    .services
                    .contains_key(&(svc.namespace.clone(), svc.name.clone()));
            }
            Backend::EgressNetwork(net) => {
                let key = (net.namespace.clone(), net.name.clone());
                if !self.egress_networks.contains_key(&key) {
                    *backend = Backend::Invalid {
                        weight: net.weight,
                        message: format!("EgressNetwork not found {}", net.name),
                    };
                } else if key != *parent {
                    *backend = Backend::Invalid {
                        weight: net.weight,
                        message: "Route with EgressNetwork backend needs to have the same EgressNetwork as a parent".to_string(),
                    };
                } else {
                    net.forward = Some(addr);
                }
            }
            Backend::Invalid { .. } => {}
        }
    }

    /// A receiver of the policy of an egress address for clients of
    /// `source_ns` (created now if nobody watches it yet).
    pub fn egress_rx(
        &mut self,
        addr: SocketAddr,
        source_ns: &str,
    ) -> watch::Receiver<Arc<EgressPolicy>> {
        let key = (addr, source_ns.to_string());
        if let Some(tx) = self.egress_watches.get(&key) {
            return tx.subscribe();
        }
        // Addresses are unbounded: drop the watches nobody holds any more
        // whenever the map doubles (amortized O(1) per new watch), besides
        // at every EgressNetwork change.
        if self.egress_watches.len().is_power_of_two() {
            self.egress_watches.retain(|_, tx| tx.receiver_count() > 0);
        }
        let tx = watch::Sender::new(Arc::new(self.egress_policy(addr, source_ns)));
        let rx = tx.subscribe();
        self.egress_watches.insert(key, tx);
        rx
    }

    /// Recomputes every egress watch, notifying those whose policy
    /// changed, and drops those nobody holds.
    pub(super) fn publish_egress(&mut self) {
        self.egress_watches.retain(|_, tx| tx.receiver_count() > 0);
        for ((addr, source_ns), tx) in &self.egress_watches {
            let policy = self.egress_policy(*addr, source_ns);
            tx.send_if_modified(|current| {
                let changed = **current != policy;
                if changed {
                    *current = Arc::new(policy);
                }
                changed
            });
        }
    }
}

impl OutboundIndexed for EgressNetwork {
    fn upsert(index: &mut OutboundIndex, net: Self) -> BTreeSet<ServiceKey> {
        let (Some(ns), Some(name)) = (net.metadata.namespace.clone(), net.metadata.name.clone())
        else {
            return BTreeSet::new();
        };
        let entry = EgressEntry::from_resource(&net, &index.cluster.networks)
            .map_err(|error| tracing::warn!(%ns, %name, %error, "ignoring invalid EgressNetwork"))
            .ok();
        let key = (ns, name);
        let changed = match entry {
            Some(e) if index.egress_networks.get(&key) != Some(&e) => {
                index.egress_networks.insert(key, e);
                true
            }
            Some(_) => false,
            None => index.egress_networks.remove(&key).is_some(),
        };
        index.egress_changed |= changed;
        BTreeSet::new()
    }

    fn remove(index: &mut OutboundIndex, ns: String, name: String) -> BTreeSet<ServiceKey> {
        index.egress_changed |= index.egress_networks.remove(&(ns, name)).is_some();
        BTreeSet::new()
    }
}
