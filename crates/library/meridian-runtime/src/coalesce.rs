//! One run at a time of an expensive read-only computation (the audits
//! behind `/audit`), its result shared with every caller that asks while it
//! runs or shortly after: a burst of callers costs one run, not one each.

use std::{future::Future, sync::Arc, time::Duration};

use tokio::{sync::Mutex, time::Instant};

/// The last result of a computation and when it was finished.
pub struct Coalesced<T> {
    last: Mutex<Option<(Instant, Arc<T>)>>,
    fresh_for: Duration,
}

impl<T> Coalesced<T> {
    /// Results are reused for `fresh_for` after they were computed.
    pub fn new(fresh_for: Duration) -> Self {
        Self {
            last: Mutex::new(None),
            fresh_for,
        }
    }

    /// The last result if it is fresh, else `run`'s, computed while every
    /// other caller waits for it (one run at a time).
    pub async fn get<F, Fut>(&self, run: F) -> Arc<T>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = T>,
    {
        let mut last = self.last.lock().await;
        if let Some((at, result)) = last.as_ref()
            && at.elapsed() < self.fresh_for
        {
            return result.clone();
        }
        let result = Arc::new(run().await);
        *last = Some((Instant::now(), result.clone()));
        result
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn concurrent_callers_share_one_run_until_it_is_stale() {
        let coalesced = Arc::new(Coalesced::new(Duration::from_secs(1)));
        let runs = Arc::new(AtomicUsize::new(0));
        let call = || {
            let coalesced = coalesced.clone();
            let runs = runs.clone();
            tokio::spawn(async move {
                *coalesced
                    .get(|| async {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        runs.fetch_add(1, Ordering::SeqCst) + 1
                    })
                    .await
            })
        };
        let callers: Vec<_> = (0..10).map(|_| call()).collect();
        for caller in callers {
            assert_eq!(caller.await.expect("task"), 1);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        tokio::time::advance(Duration::from_millis(1_001)).await;
        assert_eq!(
            call().await.expect("task"),
            2,
            "a stale result is recomputed"
        );
    }
}
