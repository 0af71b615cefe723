//! The inbound index's sizes per namespace, as Linkerd 2.20's
//! `inbound_index_*_index_size{namespace}` read them (read by the metrics
//! when scraped). Every namespace named here is one the index holds.

use std::collections::BTreeMap;

use super::Index;

/// One namespace's objects in the inbound index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NamespaceSizes {
    pub meshtls_authentications: usize,
    pub network_authentications: usize,
    pub pods: usize,
    pub external_workloads: usize,
    pub servers: usize,
    pub server_authorizations: usize,
    pub authorization_policies: usize,
    /// HTTPRoutes of `policy.linkerd.io` and of the Gateway API.
    pub http_routes: usize,
}

impl Index {
    /// The sizes of every namespace the index holds objects of.
    pub fn namespace_sizes(&self) -> BTreeMap<String, NamespaceSizes> {
        let mut out = BTreeMap::<String, NamespaceSizes>::new();
        for (name, ns) in &self.namespaces {
            let s = out.entry(name.clone()).or_default();
            s.pods = ns.pods.len();
            s.external_workloads = ns.external_workloads.len();
            s.servers = ns.policy.servers.len();
            s.server_authorizations = ns.policy.server_authorizations.len();
            s.authorization_policies = ns.policy.authorization_policies.len();
            s.http_routes = ns.policy.http_routes.len() + ns.policy.gateway_http_routes.len();
        }
        for (name, mesh_tls, network) in self.authentications.counts() {
            let s = out.entry(name.to_string()).or_default();
            s.meshtls_authentications = mesh_tls;
            s.network_authentications = network;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use k8s_index::Index as _;
    use serde_json::json;

    use crate::index::{
        Index,
        tests::{NS, cluster, pod, server},
    };

    #[test]
    fn sizes_are_per_indexed_namespace() {
        let mut index = Index::new(cluster());
        assert!(index.namespace_sizes().is_empty());
        index.apply(pod("web", json!({"app": "web"}), &[("http", 8080)]));
        index.apply(pod("db", json!({}), &[]));
        index.apply(server(
            "web-http",
            1,
            json!({"podSelector": {"matchLabels": {"app": "web"}}, "port": "http"}),
        ));
        let sizes = index.namespace_sizes();
        assert_eq!(sizes.keys().collect::<Vec<_>>(), [NS]);
        let ns = sizes[NS];
        assert_eq!((ns.pods, ns.servers, ns.external_workloads), (2, 1, 0));
    }
}
