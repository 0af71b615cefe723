//! Graceful shutdown: a signal (SIGTERM or SIGINT) is turned into one shared
//! notification that servers and watch tasks wait on.

use tokio::sync::watch;

/// A cloneable handle that resolves once shutdown has been requested.
#[derive(Clone, Debug)]
pub struct Shutdown {
    rx: watch::Receiver<bool>,
}

/// The side that requests shutdown.
#[derive(Debug)]
pub struct ShutdownTrigger {
    tx: watch::Sender<bool>,
}

impl Shutdown {
    /// A new shutdown pair.
    pub fn new() -> (ShutdownTrigger, Shutdown) {
        let (tx, rx) = watch::channel(false);
        (ShutdownTrigger { tx }, Shutdown { rx })
    }

    /// A pair whose trigger fires on the first SIGTERM or SIGINT.
    pub fn on_signals() -> std::io::Result<Shutdown> {
        let (trigger, shutdown) = Shutdown::new();
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
        let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())?;
        tokio::spawn(async move {
            let name = tokio::select! {
                _ = term.recv() => "SIGTERM",
                _ = int.recv() => "SIGINT",
            };
            tracing::info!(signal = name, "shutdown requested");
            trigger.trigger();
        });
        Ok(shutdown)
    }

    /// Resolves when shutdown has been requested (or the trigger dropped).
    pub async fn requested(mut self) {
        // An error means the trigger is gone, which also means "stop".
        let _ = self.rx.wait_for(|stop| *stop).await;
    }

    /// A receiver that turns `true` when shutdown is requested.
    pub fn receiver(&self) -> watch::Receiver<bool> {
        self.rx.clone()
    }

    /// Whether shutdown has been requested already.
    pub fn is_requested(&self) -> bool {
        *self.rx.borrow()
    }
}

impl ShutdownTrigger {
    /// Requests shutdown.
    pub fn trigger(&self) {
        self.tx.send_replace(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn requested_resolves_after_trigger() {
        let (trigger, shutdown) = Shutdown::new();
        assert!(!shutdown.is_requested());
        let waiter = tokio::spawn(shutdown.clone().requested());
        trigger.trigger();
        waiter.await.expect("waiter completes");
        assert!(shutdown.is_requested());
    }
}
