//! Readiness: a process is ready only when every registered component
//! (typically one per watch cache) says so. `/ready` reports which ones are
//! not ready yet.

use std::sync::Arc;

use tokio::sync::watch;

/// A named component and its readiness.
type Component = (String, watch::Receiver<bool>);

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
        self.lock().push((name.into(), rx));
        ReadyHandle { tx: Arc::new(tx) }
    }

    /// Registers a component whose readiness is an existing boolean watch.
    pub fn register_watch(&self, name: impl Into<String>, rx: watch::Receiver<bool>) {
        self.lock().push((name.into(), rx));
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

    /// `"<name>: <reason>"` of every degraded condition.
    pub fn degraded(&self) -> Vec<String> {
        self.notes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .iter()
            .filter_map(|(name, rx)| rx.borrow().as_ref().map(|why| format!("{name}: {why}")))
            .collect()
    }

    /// Names of the components that are not ready, in registration order.
    pub fn not_ready(&self) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|(_, rx)| !*rx.borrow())
            .map(|(name, _)| name.clone())
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
}
