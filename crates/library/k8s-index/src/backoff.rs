//! [`WatchBackoff`]: how soon a failed watch is retried. kube-runtime's
//! default (as client-go's) starts at 0.8 s and doubles up to 30 s, so after
//! a 15 s API server outage a watch may wait another ~13 s before it lists
//! again, serving what it had meanwhile. Meridian retries quickly and never
//! waits more than [`WatchBackoff::MAX`]: a few cheap requests per watch
//! during an outage, against endpoints stale for seconds after it ends.

use std::time::Duration;

use futures::{Stream, StreamExt, TryStream};
use kube::runtime::{WatchStreamExt, utils::Backoff, watcher};

/// Retry delays of a watch: [`Self::MIN`] doubling to [`Self::MAX`], with up
/// to ±20% jitter so replicas do not retry in step; back to the start once
/// the watch yields events again.
#[derive(Clone, Debug)]
pub struct WatchBackoff {
    next: Duration,
    /// Jitter source (a small xorshift, seeded per watch).
    state: u64,
}

impl WatchBackoff {
    /// The first delay.
    pub const MIN: Duration = Duration::from_millis(200);
    /// The longest delay.
    pub const MAX: Duration = Duration::from_secs(2);

    pub fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0x9e37_79b9, |d| d.subsec_nanos().into());
        Self {
            next: Self::MIN,
            state: seed | 1,
        }
    }

    /// A factor in [0.8, 1.2).
    fn jitter(&mut self) -> f64 {
        self.state ^= self.state << 13;
        self.state ^= self.state >> 7;
        self.state ^= self.state << 17;
        0.8 + (self.state % 1000) as f64 / 2500.0
    }
}

impl Default for WatchBackoff {
    fn default() -> Self {
        Self::new()
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let delay = self.next.mul_f64(self.jitter());
        self.next = (self.next * 2).min(Self::MAX);
        Some(delay)
    }
}

impl Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::MIN;
    }
}

/// `stream` (a kube-runtime watcher) retried with [`WatchBackoff`] after
/// each failure.
///
/// kube-runtime's watcher emits `Init` *before* each list request, and its
/// backoff resets on every successful item: a list that fails at once (the
/// API server unreachable, a 403) was retried at the first delay, 200 ms,
/// forever. Here `Init` is held back until the list's first answer (an
/// error drops it: nothing was listed), so the delays grow to
/// [`WatchBackoff::MAX`] while the failure lasts and reset once the API
/// answers.
pub fn with_backoff<S, K>(stream: S) -> impl Stream<Item = S::Item> + Send + 'static
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send + 'static,
{
    defer_init(stream).backoff(WatchBackoff::new())
}

/// Holds each `Init` until the next item: dropped before an error, emitted
/// before anything else.
fn defer_init<S, K>(
    stream: S,
) -> impl TryStream<Ok = watcher::Event<K>, Error = watcher::Error, Item = S::Item> + Send + 'static
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    K: Send + 'static,
{
    let state = (Box::pin(stream), false);
    futures::stream::unfold(state, |(mut stream, mut held)| async move {
        loop {
            let item = stream.next().await?;
            let out = match item {
                Ok(watcher::Event::Init) => {
                    held = true;
                    continue;
                }
                Err(error) => vec![Err(error)],
                Ok(event) if held => vec![Ok(watcher::Event::Init), Ok(event)],
                Ok(event) => vec![Ok(event)],
            };
            return Some((futures::stream::iter(out), (stream, false)));
        }
    })
    .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_is_held_until_the_list_answers() {
        use watcher::Event::*;
        let failure = || Err(watcher::Error::NoResourceVersion);
        let events: Vec<Result<watcher::Event<()>, watcher::Error>> = vec![
            Ok(Init),
            failure(),
            Ok(Init),
            failure(),
            Ok(Init),
            Ok(InitApply(())),
            Ok(InitDone),
            Ok(Apply(())),
        ];
        let out: Vec<_> =
            futures::executor::block_on(defer_init(futures::stream::iter(events)).collect());
        let shape: Vec<String> = out
            .iter()
            .map(|item| match item {
                Ok(Init) => "init",
                Ok(InitApply(())) => "init-apply",
                Ok(InitDone) => "init-done",
                Ok(Apply(())) => "apply",
                Ok(Delete(())) => "delete",
                Err(_) => "error",
            })
            .map(String::from)
            .collect();
        assert_eq!(
            shape,
            ["error", "error", "init", "init-apply", "init-done", "apply"],
            "no success between the failures: the backoff is not reset"
        );
    }

    #[test]
    fn delays_double_to_the_cap_and_reset() {
        let mut backoff = WatchBackoff::new();
        let delays: Vec<Duration> = (&mut backoff).take(6).collect();
        let bounds = [200, 400, 800, 1600, 2000, 2000];
        for (delay, base) in delays.iter().zip(bounds) {
            let base = Duration::from_millis(base);
            assert!(
                *delay >= base.mul_f64(0.8) && *delay < base.mul_f64(1.2),
                "{delay:?} not within 20% of {base:?}"
            );
        }
        backoff.reset();
        let first = backoff.next().expect("a delay");
        assert!(first < Duration::from_millis(240), "{first:?}");
    }
}
