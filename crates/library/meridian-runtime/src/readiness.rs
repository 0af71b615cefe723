//! Readiness: a process is ready only when every registered component
//! (typically one per watch cache) says so. `/ready` reports which ones are
//! not ready yet.

use std::sync::Arc;

use tokio::sync::watch;

/// A named component, its readiness and, for a watch cache, why its watch
/// is failing (`None` while it works).
struct Component {
    name: String,
    ready: watch::Receiver<bool>,
    failing: Option<watch::Receiver<Option<String>>>,
}

impl std::fmt::Debug for Component {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Component")
            .field("name", &self.name)
            .field("ready", &*self.ready.borrow())
            .finish_non_exhaustive()
    }
}

impl Component {
    fn failing(&self) -> Option<String> {
        self.failing.as_ref().and_then(|rx| rx.borrow().clone())
    }
}

/// A named condition that does not stop the process from serving, but that
/// `/ready` reports (e.g. a dependency that is down while a fallback serves).
type Note = (String, watch::Receiver<Option<String>>);

/// A named fact `/ready` states without it affecting readiness (e.g. which
/// optional kinds are being watched).
type Info = (String, watch::Receiver<String>);

/// The set of components whose readiness gates `/ready`.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    components: Arc<std::sync::Mutex<Vec<Component>>>,
    notes: Arc<std::sync::Mutex<Vec<Note>>>,
    infos: Arc<std::sync::Mutex<Vec<Info>>>,
}

/// A component's handle to state an informational fact in `/ready`.
#[derive(Clone, Debug)]
pub struct InfoHandle {
    tx: Arc<watch::Sender<String>>,
}

impl InfoHandle {
    /// Replaces the stated fact.
    pub fn set(&self, value: impl Into<String>) {
        self.tx.send_replace(value.into());
    }
}

/// A component's handle to report that it is degraded (and why).
#[derive(Clone, Debug)]
pub struct DegradedHandle {
    tx: Arc<watch::Sender<Option<String>>>,
}

impl DegradedHandle {
    /// Reports the component degraded with a reason, or healthy with `None`.
    pub fn set(&self, reason: Option<String>) {
        self.tx.send_replace(reason);
    }
}

/// A component's handle to report its own readiness.
#[derive(Clone, Debug)]
pub struct ReadyHandle {
    tx: Arc<watch::Sender<bool>>,
}

impl Readiness {
    /// Registers a component, not ready until its handle says so.
    pub fn register(&self, name: impl Into<String>) -> ReadyHandle {
        let (tx, rx) = watch::channel(false);
        self.push(name.into(), rx, None);
        ReadyHandle { tx: Arc::new(tx) }
    }

    /// Registers a component whose readiness is an existing boolean watch.
    pub fn register_watch(&self, name: impl Into<String>, rx: watch::Receiver<bool>) {
        self.push(name.into(), rx, None);
    }

    /// Registers a watch cache: not ready until `synced`. While its watch
    /// fails, `failing` says why (e.g. `list: 403 Forbidden: …`, `API
    /// server unreachable: …`), and so does `/ready`: as the reason it is
    /// not ready before the first sync, as a degraded condition after it
    /// (the cache still serves what it has).
    pub fn register_cache(
        &self,
        name: impl Into<String>,
        synced: watch::Receiver<bool>,
        failing: watch::Receiver<Option<String>>,
    ) {
        self.push(name.into(), synced, Some(failing));
    }

    fn push(
        &self,
        name: String,
        ready: watch::Receiver<bool>,
        failing: Option<watch::Receiver<Option<String>>>,
    ) {
        self.lock().push(Component {
            name,
            ready,
            failing,
        });
    }

    /// Registers a condition that `/ready` reports without failing.
    pub fn register_degraded(&self, name: impl Into<String>) -> DegradedHandle {
        let (tx, rx) = watch::channel(None);
        self.notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((name.into(), rx));
        DegradedHandle { tx: Arc::new(tx) }
    }

    /// Registers a fact `/ready` states (`<name>: <value>`) whether or not
    /// the process is ready; it never affects readiness.
    pub fn register_info(&self, name: impl Into<String>, value: impl Into<String>) -> InfoHandle {
        let (tx, rx) = watch::channel(value.into());
        self.infos
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((name.into(), rx));
        InfoHandle { tx: Arc::new(tx) }
    }

    /// `"<name>: <value>"` of every registered fact, in registration order.
    pub fn infos(&self) -> Vec<String> {
        self.infos
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .map(|(name, rx)| format!("{name}: {}", *rx.borrow()))
            .collect()
    }

    /// `"<name>: <reason>"` of every degraded condition, then of every
    /// synced cache whose watch is failing.
    pub fn degraded(&self) -> Vec<String> {
        let mut degraded: Vec<String> = self
            .notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter_map(|(name, rx)| rx.borrow().as_ref().map(|why| format!("{name}: {why}")))
            .collect();
        degraded.extend(self.lock().iter().filter_map(|c| {
            if !*c.ready.borrow() {
                return None;
            }
            c.failing().map(|why| format!("{}: {why}", c.name))
        }));
        degraded
    }

    /// Names of the components that are not ready, in registration order.
    pub fn not_ready(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|c| !*c.ready.borrow())
            .map(|c| c.name.clone())
            .collect()
    }

    /// Why the components that are not ready are not: one line per
    /// distinct reason, `"<names>: <reason>"`, or just the reason when it
    /// holds for every component that is not ready (the API server is
    /// unreachable). Components without a known reason (still listing)
    /// are only named by [`Self::not_ready`].
    pub fn not_ready_reasons(&self) -> Vec<String> {
        let components = self.lock();
        let waiting: Vec<&Component> = components.iter().filter(|c| !*c.ready.borrow()).collect();
        let mut groups: Vec<(String, Vec<&str>)> = Vec::new();
        for component in &waiting {
            let Some(why) = component.failing() else {
                continue;
            };
            match groups.iter_mut().find(|(reason, _)| *reason == why) {
                Some((_, names)) => names.push(&component.name),
                None => groups.push((why, vec![&component.name])),
            }
        }
        groups
            .into_iter()
            .map(|(why, names)| {
                if names.len() == waiting.len() {
                    why
                } else {
                    format!("{}: {why}", names.join(", "))
                }
            })
            .collect()
    }

    /// Whether every registered component is ready.
    pub fn is_ready(&self) -> bool {
        self.not_ready().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Component>> {
        // A poisoned lock only means a panic elsewhere; the data is a list of
        // receivers and stays consistent.
        self.components
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl ReadyHandle {
    /// Marks the component ready (or not).
    pub fn set(&self, ready: bool) {
        self.tx.send_replace(ready);
    }

    /// A receiver of this component's readiness.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }
}

/// A latch that turns true once every one of `receivers` has been true
/// (each watch cache's first sync) and then stays true: a server answers
/// nothing from an index that has never held the cluster's state, but a
/// later re-list (which keeps the last state until it completes) does not
/// stop it from serving.
pub fn initial_sync(receivers: Vec<watch::Receiver<bool>>) -> watch::Receiver<bool> {
    let (tx, rx) = watch::channel(receivers.is_empty());
    if !receivers.is_empty() {
        tokio::spawn(async move {
            for mut receiver in receivers {
                if receiver.wait_for(|synced| *synced).await.is_err() {
                    // The watch task is gone (shutdown): never latch.
                    return;
                }
            }
            tx.send_replace(true);
        });
    }
    rx
}

/// States `failing`'s reason (a watch that is not required for readiness)
/// as a degraded note until the process ends.
pub fn report_failing(degraded: DegradedHandle, mut failing: watch::Receiver<Option<String>>) {
    tokio::spawn(async move {
        loop {
            degraded.set(failing.borrow_and_update().clone());
            if failing.changed().await.is_err() {
                return;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn initial_sync_latches_once_every_cache_synced() {
        let (pods, pods_rx) = watch::channel(false);
        let (svcs, svcs_rx) = watch::channel(false);
        let mut synced = initial_sync(vec![pods_rx, svcs_rx]);
        assert!(!*synced.borrow());
        svcs.send_replace(true);
        tokio::task::yield_now().await;
        assert!(!*synced.borrow_and_update(), "pods have not synced");
        pods.send_replace(true);
        tokio::time::timeout(std::time::Duration::from_secs(5), synced.changed())
            .await
            .expect("latches")
            .expect("sender alive");
        assert!(*synced.borrow());
        pods.send_replace(false);
        tokio::task::yield_now().await;
        assert!(*synced.borrow(), "a later re-list does not unlatch");
        assert!(*initial_sync(vec![]).borrow(), "nothing to wait for");
    }

    #[test]
    fn ready_only_when_all_components_are() {
        let readiness = Readiness::default();
        assert!(readiness.is_ready(), "nothing registered is ready");
        let pods = readiness.register("pods");
        let svcs = readiness.register("services");
        assert_eq!(readiness.not_ready(), vec!["pods", "services"]);
        pods.set(true);
        assert_eq!(readiness.not_ready(), vec!["services"]);
        svcs.set(true);
        assert!(readiness.is_ready());
        pods.set(false);
        assert_eq!(readiness.not_ready(), vec!["pods"]);
    }

    #[test]
    fn degraded_conditions_are_reported_without_failing() {
        let readiness = Readiness::default();
        let link = readiness.register_degraded("policy link");
        assert!(readiness.degraded().is_empty());
        link.set(Some("unreachable".into()));
        assert!(readiness.is_ready());
        assert_eq!(readiness.degraded(), vec!["policy link: unreachable"]);
        link.set(None);
        assert!(readiness.degraded().is_empty());
    }

    #[test]
    fn failing_caches_say_why_before_and_after_their_sync() {
        let readiness = Readiness::default();
        let (pods, pods_rx) = watch::channel(false);
        let (pods_failing, pods_failing_rx) = watch::channel(None);
        let (svcs, svcs_rx) = watch::channel(false);
        let (svcs_failing, svcs_failing_rx) = watch::channel(None);
        readiness.register_cache("pods cache", pods_rx, pods_failing_rx);
        readiness.register_cache("services cache", svcs_rx, svcs_failing_rx);
        assert!(readiness.not_ready_reasons().is_empty(), "still listing");

        let unreachable = "API server unreachable: connection refused".to_string();
        pods_failing.send_replace(Some(unreachable.clone()));
        svcs_failing.send_replace(Some(unreachable.clone()));
        assert_eq!(readiness.not_ready_reasons(), vec![unreachable.clone()]);

        svcs_failing.send_replace(Some("list: 403 Forbidden: no".into()));
        assert_eq!(
            readiness.not_ready_reasons(),
            vec![
                format!("pods cache: {unreachable}"),
                "services cache: list: 403 Forbidden: no".to_string()
            ]
        );

        pods.send_replace(true);
        pods_failing.send_replace(None);
        assert_eq!(
            readiness.not_ready_reasons(),
            vec!["list: 403 Forbidden: no"]
        );
        svcs.send_replace(true);
        assert!(readiness.is_ready());
        assert_eq!(
            readiness.degraded(),
            vec!["services cache: list: 403 Forbidden: no"],
            "a synced cache whose watch fails is degraded, not unready"
        );
        svcs_failing.send_replace(None);
        assert!(readiness.degraded().is_empty());
    }
}
