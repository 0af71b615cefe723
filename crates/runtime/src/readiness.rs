//! Readiness: a process is ready only when every registered component
//! (typically one per watch cache) says so. `/ready` reports which ones are
//! not ready yet.

use std::sync::Arc;

use tokio::sync::watch;

/// A named component and its readiness.
type Component = (String, watch::Receiver<bool>);

/// The set of components whose readiness gates `/ready`.
#[derive(Clone, Debug, Default)]
pub struct Readiness {
    components: Arc<std::sync::Mutex<Vec<Component>>>,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
