//! Background work on a fixed interval that stops with the process (the
//! consistency audits of the destination and the policy controller).

use std::{future::Future, time::Duration};

use crate::Shutdown;

/// Spawns `work` every `interval_secs` seconds (the first run one interval
/// from now) until shutdown; 0 spawns nothing. A run that overruns delays
/// the next one instead of stacking up.
pub fn spawn_every<F, Fut>(interval_secs: u64, shutdown: Shutdown, mut work: F)
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    if interval_secs == 0 {
        return;
    }
    let interval = Duration::from_secs(interval_secs);
    tokio::spawn(async move {
        let stop = shutdown.requested();
        tokio::pin!(stop);
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = ticks.tick() => work().await,
                () = &mut stop => return,
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn runs_each_interval_until_shutdown() {
        let (trigger, shutdown) = Shutdown::new();
        let runs = Arc::new(AtomicUsize::new(0));
        let counted = runs.clone();
        spawn_every(10, shutdown, move || {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        });
        tokio::time::sleep(Duration::from_secs(35)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        trigger.trigger();
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert_eq!(runs.load(Ordering::SeqCst), 3);
    }
}
