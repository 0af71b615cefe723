//! [`KindWatch`]: follows the CustomResourceDefinition of one Gateway API
//! route kind (a kube-runtime watch of that one CRD, no polling) and runs
//! the kind's own watch only while the CRD is established and serves a
//! version Meridian reads, at the most preferred such version. When the
//! CRD goes away (or stops serving every readable version) the route watch
//! stops and its objects leave the indexes as if deleted; when the served
//! version changes the watch restarts at the new one. Open gRPC streams
//! only see the resulting index updates.
//!
//! Where the controller may not read CRDs (the original chart's RBAC has no
//! such rule), [`KindWatch::spawn_probed`] probes the versions once at
//! start instead, as the original does.

use std::collections::BTreeSet;

use futures::StreamExt;
use k8s_api::gateway::GatewayRoute;
use k8s_index::{Index, IndexMetrics, SharedIndex, WatchTask};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{
    Api, Client,
    api::{DynamicObject, ListParams},
    runtime::watcher,
};
use tokio::{sync::watch, task::JoinHandle};
use tracing::Instrument;

use super::{
    ActiveKinds,
    tracker::KeyTracker,
    typed_watch,
    versions::{Selection, select},
};

/// How to follow one route kind, and where its objects go.
pub struct KindWatch<I> {
    pub client: Client,
    /// The indexes the kind's objects feed.
    pub target: SharedIndex<I>,
    pub metrics: IndexMetrics,
    pub active: ActiveKinds,
}

/// The route watch currently running.
struct Running {
    version: String,
    synced: watch::Receiver<bool>,
    /// Why the route watch is failing, if it is.
    failing: watch::Receiver<Option<String>>,
    task: JoinHandle<()>,
}

/// A followed kind's signals for `/ready`: its first sync, and why it is
/// not syncing (its CRD watch's failure, else its route watch's).
pub type KindSignals = (watch::Receiver<bool>, watch::Receiver<Option<String>>);

/// The name of a kind in logs, metrics and `/ready`: its CRD's name.
pub fn watch_name<K: GatewayRoute>() -> String {
    K::crd_name()
}

/// Whether the controller may list CustomResourceDefinitions; `Ok(false)`
/// when the API server forbids it.
pub async fn may_read_crds(client: &Client) -> Result<bool, kube::Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    match api.list_metadata(&ListParams::default().limit(1)).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(false),
        Err(error) => Err(error),
    }
}

impl<I> KindWatch<I>
where
    I: Send + Sync + 'static,
{
    /// Follows kind `K`'s CRD until the process ends. The returned signal
    /// turns true (and stays true) once the CRD has been listed and, if the
    /// kind is served then, its routes have been listed too.
    pub fn spawn<K>(self) -> KindSignals
    where
        K: GatewayRoute,
        I: Index<K>,
    {
        let (tx, rx) = watch::channel(false);
        let (failing_tx, failing) = watch::channel(None);
        let name = watch_name::<K>();
        tokio::spawn(
            self.follow_crd::<K>(tx, failing_tx)
                .instrument(tracing::info_span!("gateway", kind = %name)),
        );
        (rx, failing)
    }

    /// Probes once which readable version of `K` the cluster serves and
    /// watches it from then on (never stops or switches).
    pub fn spawn_probed<K>(self) -> KindSignals
    where
        K: GatewayRoute,
        I: Index<K>,
    {
        let (tx, rx) = watch::channel(false);
        let (failing_tx, failing) = watch::channel(None);
        let name = watch_name::<K>();
        tokio::spawn(
            async move {
                let tracker = KeyTracker::shared(self.target.clone());
                let Some(version) = self.probe::<K>().await else {
                    tx.send_replace(true);
                    return;
                };
                let mut running = self.start::<K>(&tracker, &version);
                let mut route_failing = running.failing.clone();
                // The route watch's failures, for `/ready`.
                tokio::spawn(async move {
                    while route_failing.changed().await.is_ok() {
                        let why = route_failing.borrow_and_update().clone();
                        failing_tx.send_replace(why);
                    }
                });
                if running.synced.wait_for(|s| *s).await.is_ok() {
                    tx.send_replace(true);
                }
                // Keep the watch for the life of the process.
                let _ = running.task.await;
            }
            .instrument(tracing::info_span!("gateway", kind = %name)),
        );
        (rx, failing)
    }

    async fn probe<K: GatewayRoute>(&self) -> Option<String> {
        for version in K::VERSIONS {
            let api: Api<DynamicObject> = Api::all_with(
                self.client.clone(),
                &typed_watch::api_resource::<K>(version),
            );
            match api.list_metadata(&ListParams::default().limit(1)).await {
                Ok(_) => return Some(version.to_string()),
                Err(kube::Error::Api(e)) if e.code == 404 => continue,
                Err(error) => {
                    tracing::warn!(%version, %error, "cannot list this kind; its routes are not watched");
                    return None;
                }
            }
        }
        tracing::info!("not served at a readable version; its routes are not watched");
        None
    }

    async fn follow_crd<K>(
        self,
        synced: watch::Sender<bool>,
        failing_tx: watch::Sender<Option<String>>,
    ) where
        K: GatewayRoute,
        I: Index<K>,
    {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let config = watcher::Config::default().fields(&format!("metadata.name={}", K::crd_name()));
        let mut crds = std::pin::pin!(k8s_index::with_backoff(watcher(api, config)));
        let tracker = KeyTracker::shared(self.target.clone());
        let mut running: Option<Running> = None;
        let mut listing: Option<Option<CustomResourceDefinition>> = None;
        let mut crd: Option<CustomResourceDefinition> = None;
        let mut listed = false;
        let mut warned: BTreeSet<Vec<String>> = BTreeSet::new();
        // The CRD watch's failure, logged when it starts or changes.
        let mut failing: Option<String> = None;
        loop {
            let latched = *synced.borrow();
            // `/ready`'s reason: the CRD watch's failure, else the route watch's.
            let why = failing
                .clone()
                .or_else(|| running.as_ref().and_then(|r| r.failing.borrow().clone()));
            failing_tx.send_if_modified(|current| {
                let changed = *current != why;
                *current = why;
                changed
            });
            // (Not once its sender is gone: `changed` would return at once.)
            let mut route_failing = running
                .as_ref()
                .filter(|r| r.failing.has_changed().is_ok())
                .map(|r| {
                    let mut failing = r.failing.clone();
                    failing.mark_unchanged();
                    failing
                });
            tokio::select! {
                event = crds.next() => match event {
                    None => break,
                    Some(Err(error)) => {
                        let why = k8s_index::describe(&error);
                        if failing.as_deref() != Some(why.as_str()) {
                            tracing::warn!(error = %why, "CRD watch failing; retrying with backoff (logged again if the error changes)");
                            failing = Some(why);
                        }
                        continue;
                    }
                    Some(Ok(event)) => {
                        // The API answered (`Init` is held until the list does).
                        failing = None;
                        match event {
                            watcher::Event::Init => listing = Some(None),
                            watcher::Event::InitApply(obj) => listing = Some(Some(obj)),
                            watcher::Event::InitDone => {
                                crd = listing.take().flatten();
                                listed = true;
                            }
                            watcher::Event::Apply(obj) => crd = Some(obj),
                            watcher::Event::Delete(_) => crd = None,
                        }
                    }
                },
                // The running route watch's failure changed (shown above).
                changed = async {
                    match &mut route_failing {
                        Some(failing) => failing.changed().await,
                        None => std::future::pending().await,
                    }
                } => {
                    let _ = changed;
                    continue;
                }
                // Wakes up once the running route watch has synced.
                result = async {
                    match &mut running {
                        Some(r) => r.synced.wait_for(|s| *s).await.map(|_| ()),
                        None => std::future::pending().await,
                    }
                }, if !latched => {
                    if result.is_err() {
                        tracing::warn!("route watch ended unexpectedly");
                    }
                }
            }
            if !listed {
                continue;
            }
            let wanted = match select(crd.as_ref(), K::VERSIONS) {
                Selection::Serve(version) => Some(version),
                Selection::Absent => None,
                Selection::Unsupported(served) => {
                    if warned.insert(served.clone()) {
                        tracing::warn!(
                            served = ?served,
                            readable = ?K::VERSIONS,
                            "the CRD serves no version Meridian reads; ignoring the kind"
                        );
                    }
                    None
                }
            };
            if running.as_ref().map(|r| &r.version) != wanted.as_ref() {
                if let Some(old) = running.take() {
                    self.stop::<K>(&tracker, old).await;
                }
                if let Some(version) = &wanted {
                    running = Some(self.start::<K>(&tracker, version));
                }
            }
            if running.as_ref().is_none_or(|r| *r.synced.borrow()) {
                synced.send_replace(true);
            }
        }
        if let Some(old) = running.take() {
            self.stop::<K>(&tracker, old).await;
        }
    }

    fn start<K>(&self, tracker: &SharedIndex<KeyTracker<I>>, version: &str) -> Running
    where
        K: GatewayRoute,
        I: Index<K>,
    {
        tracing::info!(%version, "watching the kind");
        let name = watch_name::<K>();
        let events = typed_watch::events::<K>(self.client.clone(), version);
        let task = WatchTask::from_stream(&name, events, tracker.clone(), &self.metrics);
        let synced = task.synced.clone();
        let failing = task.failing.clone();
        let task = tokio::spawn(
            task.future
                .instrument(tracing::info_span!("watch", kind = %name, %version)),
        );
        self.active.set(K::PLURAL, Some(version));
        Running {
            version: version.to_string(),
            synced,
            failing,
            task,
        }
    }

    async fn stop<K>(&self, tracker: &SharedIndex<KeyTracker<I>>, running: Running)
    where
        K: GatewayRoute,
        I: Index<K>,
    {
        running.task.abort();
        // Wait until the task is gone, so nothing applies after the clear.
        let _ = running.task.await;
        let removed = tracker.read().len();
        tracker.write().clear::<K>();
        self.active.set(K::PLURAL, None);
        tracing::info!(
            version = %running.version,
            removed,
            "stopped watching the kind; its routes left the indexes"
        );
    }
}
