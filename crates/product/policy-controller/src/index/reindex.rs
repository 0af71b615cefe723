//! Recomputing the servers of a namespace's workloads after a change
//! (`Index::flush` of what the change touched): the Servers selecting
//! each port, the winner of a contested port, and the published server of
//! every known port.
//!
//! A pass over many workloads (`Pass`) computes what the pods of one
//! ReplicaSet share only once: their definition is one shared
//! [`WorkloadInfo`], and the servers Servers give its ports, and the
//! default server of a port, depend on nothing else. At the initial list
//! of a large namespace this is the difference between building and
//! hashing a server per pod port and per ReplicaSet port.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    num::NonZeroU16,
    sync::Arc,
};

use k8s_index::shared::Shared;

use super::{
    ClusterInfo, Index, Namespace, Pending, PolicyNs, authentications::Authentications,
    workload::WorkloadState, workloads_of,
};
use crate::{
    core::{InboundServer, WorkloadKind},
    k8s::{
        server::{PortRef, ServerSpec},
        workload::WorkloadInfo,
    },
};

/// A workload definition in a pass: the address of its shared copy, which
/// every workload holding it keeps alive for the pass.
type InfoId = *const WorkloadInfo;

/// The ports Servers select on one definition, sorted, with their servers.
type Selected = Arc<[(NonZeroU16, Arc<InboundServer>)]>;

impl Index {
    /// Recomputes what `pending` touched: whole namespaces, or single
    /// workloads, one [`Pass`] per namespace.
    pub(super) fn flush(&mut self, pending: Pending) {
        let Self {
            cluster,
            namespaces,
            authentications,
            opaque,
            servers,
            ..
        } = self;
        // Recomputes one workload; its Server-made opaque ports feed the
        // destination.
        let mut reindex =
            |pass: &mut Pass<'_>, ns_name: &str, name: &str, w: &mut WorkloadState| {
                pass.reindex(w);
                opaque.set(w.info.kind, ns_name, name, w.server_opaque_ports());
            };
        let touched: BTreeSet<String> = if pending.all {
            namespaces.keys().cloned().collect()
        } else {
            let workload_ns = pending.workloads.iter().map(|(ns, _, _)| ns);
            pending
                .namespaces
                .iter()
                .chain(workload_ns)
                .cloned()
                .collect()
        };
        for ns_name in &touched {
            let Some(ns) = namespaces.get_mut(ns_name) else {
                continue;
            };
            let Namespace {
                pods,
                external_workloads,
                policy,
            } = ns;
            let mut pass = Pass::new(policy, authentications, cluster, servers);
            if pending.all || pending.namespaces.contains(ns_name) {
                for (name, w) in pods.iter_mut().chain(external_workloads.iter_mut()) {
                    reindex(&mut pass, ns_name, name, w);
                }
                continue;
            }
            let touched = pending
                .workloads
                .range((ns_name.clone(), WorkloadKind::Pod, String::new())..)
                .take_while(|(ns, _, _)| ns == ns_name);
            for (_, kind, name) in touched {
                let workloads = workloads_of(pods, external_workloads, *kind);
                if let Some(w) = workloads.get_mut(name) {
                    reindex(&mut pass, ns_name, name, w);
                }
            }
        }
        namespaces.retain(|_, ns| !ns.is_empty());
    }
}

/// One recomputation pass over workloads of one namespace.
pub(super) struct Pass<'a> {
    policy: &'a PolicyNs,
    authns: &'a Authentications,
    cluster: &'a ClusterInfo,
    servers: &'a mut Shared<InboundServer>,
    /// The namespace's Servers, oldest first (the first wins a port).
    by_age: Vec<(&'a str, &'a ServerSpec)>,
    /// Per definition: the ports Servers select, with their servers.
    selected: HashMap<InfoId, Selected>,
    /// Per definition and port: the default server.
    defaults: HashMap<(InfoId, NonZeroU16), Arc<InboundServer>>,
}

impl<'a> Pass<'a> {
    pub fn new(
        policy: &'a PolicyNs,
        authns: &'a Authentications,
        cluster: &'a ClusterInfo,
        servers: &'a mut Shared<InboundServer>,
    ) -> Self {
        Self {
            by_age: policy.servers_by_age(),
            policy,
            authns,
            cluster,
            servers,
            selected: HashMap::new(),
            defaults: HashMap::new(),
        }
    }

    /// Recomputes the server of every port Servers select and of every
    /// known port of `w`, publishing only real changes.
    pub fn reindex(&mut self, w: &mut WorkloadState) {
        let selected = self.selected(&w.info);
        let unselected: Vec<NonZeroU16> = w
            .port_servers
            .ports()
            .filter(|port| selected.binary_search_by_key(port, |(p, _)| *p).is_err())
            .collect();
        for (port, server) in selected.iter() {
            w.port_servers.publish(*port, server.clone());
        }
        for port in unselected {
            let server = self.default_server(&w.info, port);
            w.port_servers.publish(port, server);
        }
    }

    /// The default server of `port` of a workload defined by `info`.
    pub fn default_server(
        &mut self,
        info: &Arc<WorkloadInfo>,
        port: NonZeroU16,
    ) -> Arc<InboundServer> {
        let Self {
            cluster,
            servers,
            defaults,
            ..
        } = self;
        defaults
            .entry((Arc::as_ptr(info), port))
            .or_insert_with(|| servers.get(info.default_server(port, cluster)))
            .clone()
    }

    /// The ports Servers select on workloads defined by `info`, sorted,
    /// with their servers. Only Servers selecting the workload's kind
    /// apply; the oldest Server (then the first by name) wins a contested
    /// port.
    fn selected(&mut self, info: &Arc<WorkloadInfo>) -> Selected {
        if let Some(selected) = self.selected.get(&Arc::as_ptr(info)) {
            return selected.clone();
        }
        let Self {
            policy,
            authns,
            cluster,
            servers,
            by_age,
            ..
        } = self;
        let mut winners: BTreeMap<NonZeroU16, (&str, Arc<InboundServer>)> = BTreeMap::new();
        for &(name, srv) in by_age.iter() {
            if !srv.selector.selects(info.kind, &info.labels) {
                continue;
            }
            for port in select_ports(info, &srv.port) {
                if let Some((winner, _)) = winners.get(&port) {
                    tracing::warn!(%port, server = %winner, conflict = %name, "Port already matched by another server; skipping");
                    continue;
                }
                let server =
                    policy.inbound_server(name, srv, authns, cluster, info.probe_paths(port));
                winners.insert(port, (name, servers.get(server)));
            }
        }
        let selected: Selected = winners
            .into_iter()
            .map(|(port, (_, server))| (port, server))
            .collect();
        self.selected.insert(Arc::as_ptr(info), selected.clone());
        selected
    }
}

/// The ports of a workload a Server's port reference names.
fn select_ports(info: &WorkloadInfo, port: &PortRef) -> Vec<NonZeroU16> {
    match port {
        PortRef::Number(p) => vec![*p],
        PortRef::Name(name) => info
            .port_names
            .get(name)
            .into_iter()
            .flatten()
            .copied()
            .collect(),
    }
}
