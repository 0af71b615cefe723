//! Runs a kube-runtime watch into an [`Index`].
//!
//! Events are applied synchronously under the index's write lock. After
//! every (re)list the index is reset to exactly the listed set, so objects
//! deleted while the watch was down (an apiserver outage, a network split)
//! disappear. Objects that fail to deserialize are logged, counted and
//! treated as absent; they never stop the watch. Watch failures are
//! retried soon ([`WatchBackoff`](crate::WatchBackoff): at most 2 s apart). `managedFields`, large and
//! read by no index, are dropped once on the stream ([`Checked::trim`]).

use std::{fmt::Debug, sync::Arc};

use futures::{Stream, StreamExt, future::BoxFuture};
use k8s_openapi::api::{
    apps::v1::ReplicaSet,
    batch::v1::Job,
    core::v1::{Node, Pod, Secret, Service},
    discovery::v1::EndpointSlice,
    networking::v1::ServiceCIDR,
};
use kube::{
    Api, Resource,
    core::{DeserializeGuard, PartialObjectMeta, error_boundary::InvalidObject},
    runtime::watcher,
};
use parking_lot::RwLock;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::{Index, IndexMetrics, ObjectKey, known::KnownKeys, metrics::KindMetrics};

/// The target of the spans exported with `-trace-collector`
/// (`meridian_runtime::span_export::TARGET`): one per index update (an
/// applied or deleted object, a re-list applied as a whole).
const SPAN_TARGET: &str = "meridian_otel";

/// An index shared between its watch and its readers.
pub type SharedIndex<I> = Arc<RwLock<I>>;

/// What a watch yields: either an always-valid built-in object, or a
/// [`DeserializeGuard`] around a custom resource that may be invalid.
pub trait Checked: Resource + Clone + DeserializeOwned + Debug + Send + 'static {
    type Object: Resource + Send;
    fn checked(self) -> Result<Self::Object, Box<InvalidObject>>;
    /// Drops what no index reads (`metadata.managedFields`) before the
    /// object is stored.
    fn trim(&mut self);
}

impl<K> Checked for DeserializeGuard<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    K::DynamicType: Default,
{
    type Object = K;
    fn checked(self) -> Result<K, Box<InvalidObject>> {
        self.0.map_err(Box::new)
    }
    fn trim(&mut self) {
        if let Ok(obj) = &mut self.0 {
            obj.meta_mut().managed_fields = None;
        }
    }
}

macro_rules! always_valid {
    ($($ty:ty),* $(,)?) => {$(
        impl Checked for $ty {
            type Object = $ty;
            fn checked(self) -> Result<$ty, Box<InvalidObject>> {
                Ok(self)
            }
            fn trim(&mut self) {
                self.meta_mut().managed_fields = None;
            }
        }
    )*};
}

always_valid!(
    Pod,
    Secret,
    Service,
    EndpointSlice,
    Node,
    ServiceCIDR,
    PartialObjectMeta<Node>,
    PartialObjectMeta<ReplicaSet>,
    PartialObjectMeta<Job>,
);

/// A watch ready to be spawned, with its sync signal.
pub struct WatchTask {
    /// The kind's name in logs, metrics and `/ready` (e.g. `pods`).
    pub kind: String,
    /// Becomes `true` once the initial list has been applied.
    pub synced: watch::Receiver<bool>,
    /// Why the watch is failing ([`describe`]), `None` while it works:
    /// set by each failure, cleared by the next event from the API.
    pub failing: watch::Receiver<Option<String>>,
    /// Runs the watch forever.
    pub future: BoxFuture<'static, ()>,
}

impl WatchTask {
    /// A watch of `api` (with `config`) into `index`.
    pub fn new<W, I>(
        kind: &str,
        api: Api<W>,
        config: watcher::Config,
        index: SharedIndex<I>,
        metrics: &IndexMetrics,
    ) -> Self
    where
        W: Checked,
        W::DynamicType: Default,
        I: Index<W::Object> + Send + Sync + 'static,
    {
        let stream =
            crate::backoff::with_backoff(crate::streamed_or_paged(config, move |config| {
                watcher(api.clone(), config)
            }));
        Self::from_stream(kind, stream, index, metrics)
    }

    /// Spawns the watch on the current tokio runtime and returns its sync
    /// signal (register it with the process's readiness).
    pub fn spawn(self) -> watch::Receiver<bool> {
        let kind = self.kind;
        tokio::spawn(tracing::Instrument::instrument(
            self.future,
            tracing::info_span!("watch", %kind),
        ));
        self.synced
    }

    /// A watch over an existing event stream (e.g. a metadata watcher).
    pub fn from_stream<W, I, S>(
        kind: &str,
        stream: S,
        index: SharedIndex<I>,
        metrics: &IndexMetrics,
    ) -> Self
    where
        W: Checked,
        I: Index<W::Object> + Send + Sync + 'static,
        S: Stream<Item = Result<watcher::Event<W>, watcher::Error>> + Send + 'static,
    {
        let (tx, synced) = watch::channel(false);
        let (failing_tx, failing) = watch::channel(None);
        let kind_metrics = metrics.kind(kind);
        let name = kind.to_string();
        let status = WatchStatus {
            synced: tx,
            failing: failing_tx,
        };
        let future = Box::pin(watch_into(
            name.clone(),
            stream,
            index,
            kind_metrics,
            status,
        ));
        Self {
            kind: name,
            synced,
            failing,
            future,
        }
    }
}

/// What a running watch reports: its first sync, and why it is failing.
#[derive(Debug)]
pub struct WatchStatus {
    /// Set to `true` once the initial list has been applied.
    pub synced: watch::Sender<bool>,
    /// The failure ([`describe`]) until the API answers again.
    pub failing: watch::Sender<Option<String>>,
}

/// Applies `stream`'s events to `index` until the stream ends, each object
/// trimmed once ([`Checked::trim`]) before any index sees it.
///
/// A failure is logged at `warn` when it starts or changes (a denied list
/// or an unreachable API server repeats every retry: one line, not one
/// every 2 s), and its end at `info`; every failure is counted in
/// `index_watch_restarts_total`.
pub async fn watch_into<W, I, S>(
    kind: String,
    stream: S,
    index: SharedIndex<I>,
    metrics: KindMetrics,
    status: WatchStatus,
) where
    W: Checked,
    I: Index<W::Object>,
    S: Stream<Item = Result<watcher::Event<W>, watcher::Error>>,
{
    let mut state = WatchState::<W::Object>::default();
    let lag = metrics.lag.clone();
    let mut stream = std::pin::pin!(stream.map(move |mut event| {
        if let Ok(watcher::Event::Apply(obj)) = &mut event {
            // A change the watch saw (not the initial list): how long after
            // its last write, as the original's informer lag.
            if let Some(seconds) = last_write_lag(obj.meta()) {
                lag.observe(seconds);
            }
            obj.trim();
        } else if let Ok(watcher::Event::InitApply(obj) | watcher::Event::Delete(obj)) = &mut event
        {
            obj.trim();
        }
        event
    }));
    while let Some(event) = stream.next().await {
        match event {
            Ok(event) => {
                // `Init` is emitted before the list request is made: only
                // what follows shows that the API answered.
                if !matches!(event, watcher::Event::Init) && status.failing.borrow().is_some() {
                    tracing::info!(%kind, "watch recovered");
                    status.failing.send_replace(None);
                }
                if state.handle(&kind, event, &index, &metrics) {
                    status.synced.send_replace(true);
                    metrics.synced.set(1);
                }
                metrics.cache_size.set(state.known.len() as i64);
            }
            Err(error) => {
                metrics.restarts.inc();
                metrics.error(error_kind(&error));
                let why = describe(&error);
                if status.failing.borrow().as_deref() == Some(why.as_str()) {
                    tracing::debug!(%kind, error = %why, "watch still failing; retrying with backoff");
                } else {
                    tracing::warn!(%kind, error = %why, "watch failing; retrying with backoff (logged again if the error changes)");
                    status.failing.send_replace(Some(why));
                }
            }
        }
    }
    tracing::debug!(%kind, "watch stream ended");
}

/// The variant of a watch failure, as kubert's `kube_watch_errors_total`
/// names it.
fn error_kind(error: &watcher::Error) -> &'static str {
    match error {
        watcher::Error::InitialListFailed(_) => "InitialListFailed",
        watcher::Error::WatchStartFailed(_) => "WatchStartFailed",
        watcher::Error::WatchError(_) => "WatchError",
        watcher::Error::WatchFailed(_) => "WatchFailed",
        watcher::Error::NoResourceVersion => "NoResourceVersion",
    }
}

/// Seconds since the newest write recorded in `meta.managedFields`, if
/// any (negative clock skew counts as 0).
fn last_write_lag(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<f64> {
    let newest = meta
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.time.as_ref())
        .map(|t| t.0)
        .max()?;
    let lag = k8s_openapi::jiff::Timestamp::now().duration_since(newest);
    Some(lag.as_secs_f64().max(0.0))
}

/// A watch failure as `/ready` states it: the API's refusal (`list: 403
/// Forbidden: <message>`), or `API server unreachable: <cause>`.
pub fn describe(error: &watcher::Error) -> String {
    let (operation, error) = match error {
        watcher::Error::InitialListFailed(error) => ("list", error),
        watcher::Error::WatchStartFailed(error) | watcher::Error::WatchFailed(error) => {
            ("watch", error)
        }
        watcher::Error::WatchError(status) => {
            return format!(
                "watch: {} {}: {}",
                status.code, status.reason, status.message
            );
        }
        watcher::Error::NoResourceVersion => return error.to_string(),
    };
    match error {
        kube::Error::Api(status) => format!(
            "{operation}: {} {}: {}",
            status.code, status.reason, status.message
        ),
        kube::Error::HyperError(_) | kube::Error::Service(_) => {
            format!("API server unreachable: {}", causes(error))
        }
        other => format!("{operation}: {}", causes(other)),
    }
}

/// The sources of `error` (or its own text without any), each level once.
fn causes(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut next = error.source();
    while let Some(inner) = next {
        let line = inner.to_string();
        if !parts.last().is_some_and(|last| last.contains(&line)) {
            parts.push(line);
        }
        next = inner.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}

/// Keys the index holds, and the objects of a list in progress.
struct WatchState<K> {
    known: KnownKeys,
    listing: Option<Vec<K>>,
}

impl<K> Default for WatchState<K> {
    fn default() -> Self {
        Self {
            known: KnownKeys::default(),
            listing: None,
        }
    }
}

impl<K: Resource> WatchState<K> {
    /// Applies one event; returns true when a list completed.
    fn handle<W, I>(
        &mut self,
        kind: &str,
        event: watcher::Event<W>,
        index: &RwLock<I>,
        metrics: &KindMetrics,
    ) -> bool
    where
        W: Checked<Object = K>,
        I: Index<K>,
    {
        match event {
            watcher::Event::Init => {
                self.listing = Some(Vec::new());
            }
            watcher::Event::InitApply(obj) => match obj.checked() {
                Ok(obj) => self.listing.get_or_insert_with(Vec::new).push(obj),
                Err(invalid) => skip_invalid(kind, &invalid, metrics),
            },
            watcher::Event::InitDone => {
                let objects = self.listing.take().unwrap_or_default();
                let _span = tracing::info_span!(
                    target: SPAN_TARGET,
                    "index.reset",
                    kind,
                    objects = objects.len()
                )
                .entered();
                let mut listed = KnownKeys::default();
                for meta in objects.iter().map(Resource::meta) {
                    if let Some(name) = &meta.name {
                        listed.insert_parts(meta.namespace.as_deref(), name);
                    }
                }
                let removed = self.known.replace(listed);
                if !removed.is_empty() {
                    tracing::info!(%kind, removed = removed.len(), "re-list removed objects deleted while the watch was down");
                }
                index.write().reset(objects, removed);
                metrics.resets.inc();
                metrics.waiters.wake_all();
                return true;
            }
            watcher::Event::Apply(obj) => match obj.checked() {
                Ok(obj) => {
                    let _span =
                        tracing::info_span!(target: SPAN_TARGET, "index.apply", kind).entered();
                    if let Some(key) = ObjectKey::of(&obj) {
                        self.known.insert(&key);
                        index.write().apply(obj);
                        metrics.applied.inc();
                        metrics.waiters.wake(&key);
                    }
                }
                Err(invalid) => {
                    skip_invalid(kind, &invalid, metrics);
                    let key = key_of_invalid(&invalid);
                    if self.known.remove(&key) {
                        metrics.waiters.wake(&key);
                        index.write().delete(key);
                        metrics.deleted.inc();
                    }
                }
            },
            watcher::Event::Delete(obj) => {
                let _span =
                    tracing::info_span!(target: SPAN_TARGET, "index.delete", kind).entered();
                let key = match obj.checked() {
                    Ok(obj) => ObjectKey::of(&obj),
                    Err(invalid) => Some(key_of_invalid(&invalid)),
                };
                if let Some(key) = key
                    && self.known.remove(&key)
                {
                    index.write().delete(key.clone());
                    metrics.deleted.inc();
                    metrics.waiters.wake(&key);
                }
            }
        }
        false
    }
}

fn key_of_invalid(invalid: &InvalidObject) -> ObjectKey {
    ObjectKey {
        namespace: invalid.metadata.namespace.clone(),
        name: invalid.metadata.name.clone().unwrap_or_default(),
    }
}

fn skip_invalid(kind: &str, invalid: &InvalidObject, metrics: &KindMetrics) {
    metrics.invalid.inc();
    tracing::warn!(
        %kind,
        object = %key_of_invalid(invalid),
        error = %invalid.error,
        "skipping an object that does not deserialize"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ObjectCache;
    use futures::stream;
    use k8s_api::policy::Server;

    fn svc(name: &str) -> Service {
        let mut svc = Service::default();
        svc.metadata.namespace = Some("ns".into());
        svc.metadata.name = Some(name.into());
        svc
    }

    fn run_events(
        index: &SharedIndex<ObjectCache<Service>>,
        events: Vec<watcher::Event<Service>>,
    ) -> bool {
        let metrics = IndexMetrics::default();
        let (status, rx, _) = new_status();
        let stream = stream::iter(events.into_iter().map(Ok));
        futures::executor::block_on(watch_into(
            "services".into(),
            stream,
            index.clone(),
            metrics.kind("services"),
            status,
        ));
        *rx.borrow()
    }

    fn new_status() -> (
        WatchStatus,
        watch::Receiver<bool>,
        watch::Receiver<Option<String>>,
    ) {
        let (synced, synced_rx) = watch::channel(false);
        let (failing, failing_rx) = watch::channel(None);
        (WatchStatus { synced, failing }, synced_rx, failing_rx)
    }

    fn forbidden() -> watcher::Error {
        watcher::Error::InitialListFailed(kube::Error::Api(Box::new(kube::core::Status {
            code: 403,
            reason: "Forbidden".into(),
            message: "services is forbidden: User \"u\" cannot list resource \"services\"".into(),
            ..Default::default()
        })))
    }

    #[test]
    fn failures_are_described_until_the_api_answers() {
        assert_eq!(
            describe(&forbidden()),
            "list: 403 Forbidden: services is forbidden: User \"u\" cannot list resource \"services\""
        );
        let index: SharedIndex<ObjectCache<Service>> = SharedIndex::default();
        let (status, synced, failing) = new_status();
        let (tx, rx) =
            futures::channel::mpsc::unbounded::<Result<watcher::Event<Service>, watcher::Error>>();
        use watcher::Event::*;
        let task = watch_into(
            "services".into(),
            rx,
            index.clone(),
            IndexMetrics::default().kind("services"),
            status,
        );
        tx.unbounded_send(Ok(Init)).expect("send");
        tx.unbounded_send(Err(forbidden())).expect("send");
        tx.unbounded_send(Ok(Init)).expect("send");
        tx.unbounded_send(Err(forbidden())).expect("send");
        // Retried: `Init` alone does not clear the failure.
        tx.unbounded_send(Ok(Init)).expect("send");
        drop(tx);
        futures::executor::block_on(task);
        assert!(!*synced.borrow());
        assert_eq!(
            failing
                .borrow()
                .as_deref()
                .map(|f| f.starts_with("list: 403 Forbidden")),
            Some(true)
        );

        let (status, synced, failing) = new_status();
        let events = vec![
            Err(forbidden()),
            Ok(Init),
            Ok(InitApply(svc("a"))),
            Ok(InitDone),
        ];
        futures::executor::block_on(watch_into(
            "services".into(),
            stream::iter(events),
            index.clone(),
            IndexMetrics::default().kind("services"),
            status,
        ));
        assert!(*synced.borrow());
        assert_eq!(*failing.borrow(), None, "the list answered");
    }

    fn names(index: &SharedIndex<ObjectCache<Service>>) -> Vec<String> {
        index.read().iter().map(|(k, _)| k.name.clone()).collect()
    }

    #[test]
    fn managed_fields_are_trimmed_on_the_stream() {
        let index = SharedIndex::default();
        use watcher::Event::*;
        let mut fat = svc("a");
        fat.metadata.managed_fields = Some(vec![Default::default()]);
        run_events(
            &index,
            vec![Init, InitApply(fat.clone()), InitDone, Apply(fat)],
        );
        let stored = index.read().get_namespaced("ns", "a").expect("stored");
        assert_eq!(stored.metadata.managed_fields, None);
    }

    #[test]
    fn relist_removes_objects_deleted_during_an_outage() {
        let index = SharedIndex::default();
        use watcher::Event::*;
        let synced = run_events(
            &index,
            vec![
                Init,
                InitApply(svc("a")),
                InitApply(svc("b")),
                InitDone,
                Apply(svc("c")),
                // The watch restarts; "b" was deleted while it was down.
                Init,
                InitApply(svc("a")),
                InitApply(svc("c")),
                InitDone,
            ],
        );
        assert!(synced);
        assert_eq!(names(&index), ["a", "c"]);
    }

    #[test]
    fn apply_and_delete_update_the_index_and_sync_waits_for_the_list() {
        let index = SharedIndex::default();
        use watcher::Event::*;
        let synced = run_events(&index, vec![Init, InitApply(svc("a"))]);
        assert!(!synced, "not synced before InitDone");
        assert!(names(&index).is_empty(), "a partial list is not applied");
        run_events(
            &index,
            vec![Init, InitDone, Apply(svc("x")), Delete(svc("x"))],
        );
        assert!(names(&index).is_empty());
    }

    /// Records the spans of the exported target (`-trace-collector`).
    struct SpanNames(std::sync::Arc<std::sync::Mutex<Vec<String>>>);

    impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for SpanNames {
        fn on_new_span(
            &self,
            attrs: &tracing::span::Attributes<'_>,
            _: &tracing::span::Id,
            _: tracing_subscriber::layer::Context<'_, S>,
        ) {
            if attrs.metadata().target() == SPAN_TARGET
                && let Ok(mut names) = self.0.lock()
            {
                names.push(attrs.metadata().name().to_string());
            }
        }
    }

    #[test]
    fn each_index_update_is_a_span_of_the_exported_target() {
        use tracing_subscriber::layer::SubscriberExt as _;
        use watcher::Event::*;
        let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let subscriber = tracing_subscriber::registry().with(SpanNames(names.clone()));
        let index = SharedIndex::default();
        let events = || {
            vec![
                Init,
                InitApply(svc("a")),
                InitApply(svc("b")),
                InitDone,
                Apply(svc("c")),
                Delete(svc("a")),
            ]
        };
        tracing::subscriber::with_default(subscriber, || {
            // With one scoped subscriber in the process, tracing registers
            // a callsite with the interest of the thread that first reaches
            // it: another test's thread, without a subscriber, may register
            // these as never wanted. Once every callsite is registered (the
            // first run), asking them again here settles it.
            run_events(&index, events());
            tracing::callsite::rebuild_interest_cache();
            names.lock().expect("names").clear();
            *index.write() = ObjectCache::default();
            run_events(&index, events())
        });
        let names = names.lock().expect("names").clone();
        // The initial list is one update, applied as a whole.
        assert_eq!(names, ["index.reset", "index.apply", "index.delete"]);
    }

    #[test]
    fn invalid_custom_resources_are_skipped_not_fatal() {
        let index: SharedIndex<ObjectCache<Server>> = SharedIndex::default();
        let good: DeserializeGuard<Server> = serde_json::from_value(serde_json::json!({
            "apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
            "metadata": {"namespace": "ns", "name": "good"},
            "spec": {"port": 8080, "podSelector": {}}
        }))
        .expect("guard never fails on a valid envelope");
        let bad: DeserializeGuard<Server> = serde_json::from_value(serde_json::json!({
            "apiVersion": "policy.linkerd.io/v1beta3", "kind": "Server",
            "metadata": {"namespace": "ns", "name": "bad"},
            "spec": {"port": {"not": "a port"}}
        }))
        .expect("guard never fails on a valid envelope");
        assert!(bad.0.is_err());
        let metrics = IndexMetrics::default();
        let kind_metrics = metrics.kind("servers");
        let (tx, rx, _) = new_status();
        use watcher::Event::*;
        let events = vec![
            Init,
            InitApply(good.clone()),
            InitApply(bad.clone()),
            InitDone,
            Apply(bad),
        ];
        futures::executor::block_on(watch_into(
            "servers".into(),
            stream::iter(events.into_iter().map(Ok)),
            index.clone(),
            kind_metrics.clone(),
            tx,
        ));
        assert!(*rx.borrow());
        let keys: Vec<_> = index.read().iter().map(|(k, _)| k.name.clone()).collect();
        assert_eq!(keys, ["good"]);
        assert_eq!(kind_metrics.invalid.get(), 2);
    }
}
