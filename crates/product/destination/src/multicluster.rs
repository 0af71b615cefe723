//! Linked clusters: the [`ClusterStore`] follows the kubeconfig Secrets in
//! the controller's namespace (type `mirror.linkerd.io/remote-kubeconfig`,
//! labelled with the cluster's name) and keeps, per linked cluster, an
//! [`EndpointsIndex`] fed by watches of that cluster's Services,
//! EndpointSlices, Pods and ReplicaSets.
//!
//! Remote-discovery and federated `Get` streams follow groups of these
//! indexes exactly as local streams follow the local index: one publisher
//! per remote target, shared by every stream of it.
//!
//! A cluster's index lives as long as the process, whatever happens to its
//! Secret, so open streams never need to re-resolve:
//! - a Secret added or rotated hands its watches a new client; they re-list
//!   through it, and what the new list lacks is removed;
//! - a deleted Secret takes the client away; the watches empty the index,
//!   so its streams see their endpoints go, and come back if it returns;
//! - a broken Secret (bad kubeconfig, missing annotation) is reported in
//!   `/ready` (degraded, never unready) and `remote_cluster_*` metrics, and
//!   a previously working client keeps serving;
//! - a linked API server that fails is reported the same way; local
//!   discovery never waits for a linked cluster;
//! - the local nodes' zones are given to every linked cluster's index: the
//!   client is local, so `zone_locality` compares its zone with the remote
//!   endpoint's, as the original does.

use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicU64, Ordering},
    },
};

use k8s_index::{Index, IndexMetrics, ObjectKey, switch::switching_watch};
use k8s_openapi::api::{
    apps::v1::ReplicaSet,
    core::v1::{Node, Secret, Service},
};
use kube::{
    config::{KubeConfigOptions, Kubeconfig},
    core::PartialObjectMeta,
};
use meridian_runtime::{DegradedHandle, Readiness};
use parking_lot::RwLock;
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{family::Family, gauge::Gauge},
    registry::Registry,
};
use tokio::sync::watch;

use crate::{
    config::TranslatorConfig,
    index::EndpointsIndex,
    k8s::multicluster::{LinkedCluster, linked_cluster, linked_cluster_name},
};

/// `{cluster}` of the per-cluster metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClusterLabel {
    cluster: String,
}

/// The store's metrics.
#[derive(Clone, Debug, Default)]
pub struct ClusterStoreMetrics {
    size: Gauge,
    /// 1 while the cluster's last Secret was usable and its watches work.
    healthy: Family<ClusterLabel, Gauge>,
}

impl ClusterStoreMetrics {
    pub fn register(registry: &mut Registry) -> Self {
        let m = Self::default();
        registry.register(
            "cluster_store_size",
            "The number of linked clusters in the remote discovery cluster store",
            m.size.clone(),
        );
        registry.register(
            "remote_cluster_healthy",
            "1 while a linked cluster's Secret is usable and its watches answer",
            m.healthy.clone(),
        );
        m
    }
}

/// One linked cluster.
pub struct RemoteCluster {
    /// The endpoints of the linked cluster, published as the local ones.
    pub index: Arc<RwLock<EndpointsIndex>>,
    /// The client its watches use; `None` while the cluster is not linked.
    client: watch::Sender<Option<kube::Client>>,
    /// What its last usable Secret said (its index translates with its
    /// trust and cluster domains).
    linked: parking_lot::Mutex<Option<LinkedCluster>>,
    /// Why its Secret cannot be used, if it cannot.
    secret_error: watch::Sender<Option<String>>,
    /// Bumped by every link and unlink, so a client built for a Secret
    /// that has since changed or gone is never installed.
    generation: AtomicU64,
}

impl RemoteCluster {
    /// Whether the cluster is linked (a usable Secret exists).
    pub fn is_linked(&self) -> bool {
        self.client.borrow().is_some()
    }
}

/// The linked clusters, by name.
pub struct ClusterStore {
    clusters: HashMap<String, Arc<RemoteCluster>>,
    /// The cluster each Secret named, so a deletion (which carries only the
    /// Secret's key) finds its cluster.
    secrets: HashMap<ObjectKey, String>,
    /// The local translator configuration; a linked cluster's differs in
    /// its trust and cluster domains only.
    local: Arc<TranslatorConfig>,
    readiness: Readiness,
    index_metrics: IndexMetrics,
    metrics: ClusterStoreMetrics,
    /// Bumped when a cluster gets its entry, so federated streams waiting
    /// for a member's cluster subscribe to it.
    entries: watch::Sender<u64>,
    /// The local cluster's nodes (metadata), by name: a client's node is
    /// local, so every linked cluster's index takes its zone from here to
    /// say whether an endpoint is in the client's zone.
    local_nodes: HashMap<String, PartialObjectMeta<Node>>,
}

/// The store as the gRPC layer and its Secret watch share it.
pub type SharedClusterStore = Arc<RwLock<ClusterStore>>;

impl ClusterStore {
    pub fn new(
        local: Arc<TranslatorConfig>,
        readiness: Readiness,
        index_metrics: IndexMetrics,
        metrics: ClusterStoreMetrics,
    ) -> Self {
        Self {
            clusters: HashMap::new(),
            secrets: HashMap::new(),
            local,
            readiness,
            index_metrics,
            metrics,
            entries: watch::channel(0).0,
            local_nodes: HashMap::new(),
        }
    }

    /// The cluster `name`'s entry, linked or not now (its index is empty
    /// while it is not linked).
    pub fn cluster(&self, name: &str) -> Option<Arc<RemoteCluster>> {
        self.clusters.get(name).cloned()
    }

    /// Wakes when a cluster gets its entry.
    pub fn entries(&self) -> watch::Receiver<u64> {
        self.entries.subscribe()
    }

    /// The linked cluster `name`, if it is linked now.
    pub fn linked(&self, name: &str) -> Option<Arc<RemoteCluster>> {
        self.clusters.get(name).filter(|c| c.is_linked()).cloned()
    }

    /// Every cluster ever linked, linked or not now.
    pub fn clusters(&self) -> impl Iterator<Item = (&String, &Arc<RemoteCluster>)> {
        self.clusters.iter()
    }

    /// `cluster_store_size`: the clusters with a Secret (as the original
    /// counts its store's entries).
    fn update_size(&self) {
        let named: std::collections::HashSet<&String> = self.secrets.values().collect();
        self.metrics.size.set(named.len() as i64);
    }

    /// The entry of `name`, created (with its watches) on first use.
    fn entry(&mut self, name: &str) -> Arc<RemoteCluster> {
        if let Some(cluster) = self.clusters.get(name) {
            return cluster.clone();
        }
        let index = Arc::new(RwLock::new(EndpointsIndex::new(self.local.clone())));
        {
            let mut index = index.write();
            for node in self.local_nodes.values() {
                Index::<PartialObjectMeta<Node>>::apply(&mut *index, node.clone());
            }
        }
        let (client, clients) = watch::channel(None);
        let (secret_error, secret_errors) = watch::channel(None);
        let cluster = Arc::new(RemoteCluster {
            index: index.clone(),
            client,
            linked: parking_lot::Mutex::new(None),
            secret_error,
            generation: AtomicU64::new(0),
        });
        let m = &self.index_metrics;
        let kind = |k: &str| format!("{name}/{k}");
        let watches = [
            switching_watch::<Service, _>(&kind("services"), clients.clone(), index.clone(), m),
            switching_watch::<crate::k8s::slices::SliceObject, _>(
                &kind("endpointslices"),
                clients.clone(),
                index.clone(),
                m,
            ),
            switching_watch::<crate::k8s::pods::PodObject, _>(
                &kind("pods"),
                clients.clone(),
                index.clone(),
                m,
            ),
            switching_watch::<PartialObjectMeta<ReplicaSet>, _>(
                &kind("replicasets"),
                clients.clone(),
                index,
                m,
            ),
        ];
        let mut failing = Vec::with_capacity(watches.len());
        for watch in watches {
            failing.push((watch.kind.clone(), watch.failing.clone()));
            // Linked clusters never gate readiness: their sync is not awaited.
            drop(watch.spawn());
        }
        let degraded = self
            .readiness
            .register_degraded(format!("remote cluster {name}"));
        let healthy = self.metrics.healthy.get_or_create(&ClusterLabel {
            cluster: name.to_string(),
        });
        tokio::spawn(report_health(
            clients,
            secret_errors,
            failing,
            degraded,
            healthy.clone(),
        ));
        self.clusters.insert(name.to_string(), cluster.clone());
        self.entries.send_modify(|n| *n += 1);
        cluster
    }

    fn link(&mut self, name: &str, linked: LinkedCluster) {
        let cluster = self.entry(name);
        if cluster.is_linked() && cluster.linked.lock().as_ref() == Some(&linked) {
            // The same Secret again (a re-list, an unrelated edit): the
            // watches keep their client rather than re-listing everything.
            cluster.secret_error.send_replace(None);
            return;
        }
        let config = Arc::new(TranslatorConfig {
            identity_trust_domain: linked.trust_domain.clone(),
            cluster_domain: linked.cluster_domain.clone(),
            ..(*self.local).clone()
        });
        let changed_domains = cluster.linked.lock().as_ref().is_none_or(|old| {
            old.trust_domain != linked.trust_domain || old.cluster_domain != linked.cluster_domain
        });
        if changed_domains {
            cluster.index.write().set_config(config);
        }
        *cluster.linked.lock() = Some(linked.clone());
        let generation = cluster.generation.fetch_add(1, Ordering::SeqCst) + 1;
        let name = name.to_string();
        tokio::spawn(async move {
            match client_for(&linked.kubeconfig).await {
                Ok(_) if cluster.generation.load(Ordering::SeqCst) != generation => {
                    tracing::debug!(cluster = %name, "dropping a client for a Secret that changed since");
                }
                Ok(client) => {
                    tracing::info!(cluster = %name, "linked cluster (re)connected");
                    cluster.secret_error.send_replace(None);
                    cluster.client.send_replace(Some(client));
                }
                Err(error) => {
                    tracing::warn!(cluster = %name, %error, "unusable kubeconfig for a linked cluster");
                    cluster
                        .secret_error
                        .send_replace(Some(format!("invalid kubeconfig: {error}")));
                }
            }
        });
    }
}

/// A client for a linked cluster's kubeconfig.
async fn client_for(kubeconfig: &str) -> Result<kube::Client, String> {
    let kubeconfig = Kubeconfig::from_yaml(kubeconfig).map_err(|e| e.to_string())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| e.to_string())?;
    kube::Client::try_from(config).map_err(|e| e.to_string())
}

/// States a cluster's health in `/ready` (degraded, with the reason) and
/// its gauge, until the process ends.
async fn report_health(
    mut clients: watch::Receiver<Option<kube::Client>>,
    mut secret_error: watch::Receiver<Option<String>>,
    mut failing: Vec<(String, watch::Receiver<Option<String>>)>,
    degraded: DegradedHandle,
    healthy: Gauge,
) {
    loop {
        let linked = clients.borrow_and_update().is_some();
        let secret = secret_error.borrow_and_update().clone();
        let watches: Vec<String> = failing
            .iter_mut()
            .filter_map(|(kind, rx)| {
                rx.borrow_and_update()
                    .clone()
                    .map(|why| format!("{kind}: {why}"))
            })
            .collect();
        let reason = match (secret, linked) {
            (Some(secret), _) => Some(secret),
            (None, false) => None,
            (None, true) if watches.is_empty() => None,
            (None, true) => Some(watches.join("; ")),
        };
        healthy.set(i64::from(linked && reason.is_none()));
        degraded.set(reason);
        let changes = failing
            .iter_mut()
            .map(|(_, rx)| Box::pin(rx.changed()))
            .collect::<Vec<_>>();
        tokio::select! {
            changed = clients.changed() => if changed.is_err() { return },
            changed = secret_error.changed() => if changed.is_err() { return },
            _ = futures::future::select_all(changes) => {}
        }
    }
}

impl Index<Secret> for ClusterStore {
    fn apply(&mut self, secret: Secret) {
        let Some(key) = ObjectKey::of(&secret) else {
            return;
        };
        let Some(name) = linked_cluster_name(&secret).map(str::to_string) else {
            // Not (or no longer) a linked cluster's Secret.
            Index::<Secret>::delete(self, key);
            return;
        };
        if let Some(previous) = self.secrets.insert(key.clone(), name.clone())
            && previous != name
        {
            self.unlink(&previous);
        }
        match linked_cluster(&name, &secret) {
            Ok(linked) => self.link(&name, linked),
            Err(error) => {
                tracing::warn!(cluster = %name, secret = %key.name, %error, "unusable linked-cluster Secret");
                self.entry(&name)
                    .secret_error
                    .send_replace(Some(format!("Secret {}: {error}", key.name)));
            }
        }
        self.update_size();
    }

    fn delete(&mut self, key: ObjectKey) {
        if let Some(name) = self.secrets.remove(&key) {
            self.unlink(&name);
        }
        self.update_size();
    }
}

/// The local nodes, forwarded to every linked cluster's index (whose own
/// watches never list nodes).
impl Index<PartialObjectMeta<Node>> for ClusterStore {
    fn apply(&mut self, node: PartialObjectMeta<Node>) {
        let Some(name) = node.metadata.name.clone() else {
            return;
        };
        for cluster in self.clusters.values() {
            Index::<PartialObjectMeta<Node>>::apply(&mut *cluster.index.write(), node.clone());
        }
        self.local_nodes.insert(name, node);
    }

    fn delete(&mut self, key: ObjectKey) {
        for cluster in self.clusters.values() {
            Index::<PartialObjectMeta<Node>>::delete(&mut *cluster.index.write(), key.clone());
        }
        self.local_nodes.remove(&key.name);
    }
}

impl ClusterStore {
    fn unlink(&mut self, name: &str) {
        if let Some(cluster) = self.clusters.get(name) {
            tracing::info!(cluster = %name, "linked cluster removed");
            cluster.generation.fetch_add(1, Ordering::SeqCst);
            cluster.secret_error.send_replace(None);
            cluster.client.send_replace(None);
        }
    }
}
