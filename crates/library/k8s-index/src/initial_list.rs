//! How a watch reads its initial list: streamed where the API server
//! allows it, paged where it does not.
//!
//! A streamed list (`sendInitialEvents=true`, the API server's `WatchList`
//! feature) is a watch that first sends every object as an event, then a
//! bookmark marking the end of the list: objects arrive one by one and no
//! page of them is ever held whole, so the memory a start takes stays close
//! to what the indexes hold once settled (10,000 pods: the destination's
//! peak RSS 96 → 48 MB, the policy controller's 131 → 61 MB; see
//! `docs/performance.md`).
//!
//! `WatchList` is off by default in Kubernetes 1.31 and 1.33 (both
//! supported by Linkerd 2.20), and any cluster may turn it off. Such an API
//! server refuses the streamed watch (`422 Invalid`: "sendInitialEvents is
//! forbidden for watch unless the WatchList feature gate is enabled"); the
//! watch then reads its lists in pages of 500 from that moment on, as
//! client-go's informers do. The refusal is logged once and is not a watch
//! failure: it restarts nothing and counts in no failure metric.

use std::pin::Pin;

use futures::{Stream, StreamExt, stream};
use kube::runtime::watcher;

/// The events of a watch started by `start`, with `config`'s list settings:
/// first with streamed lists, then, once an API server refuses them
/// ([`refuses_streamed_lists`]), with paged lists for good.
pub fn streamed_or_paged<K, S, F>(
    config: watcher::Config,
    start: F,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send
where
    F: Fn(watcher::Config) -> S + Send,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let streamed = Box::pin(start(config.clone().streaming_lists()));
    let state = Fallback {
        events: streamed,
        paged: Some((config, start)),
    };
    stream::unfold(state, |mut state| async move {
        loop {
            let item = state.events.next().await?;
            if let Err(error) = &item
                && refuses_streamed_lists(error)
                && let Some((config, start)) = state.paged.take()
            {
                tracing::info!(
                    error = %crate::describe(error),
                    "the API server does not stream lists (its WatchList feature is off): this kind is listed in pages"
                );
                state.events = Box::pin(start(config));
                continue;
            }
            return Some((item, state));
        }
    })
}

/// A watch's events and, until it is used, how to restart it with paged
/// lists.
struct Fallback<S, F> {
    /// The running watch: streamed lists first, paged after a refusal.
    events: Pin<Box<S>>,
    /// The paged configuration and the watch's start; taken by the first
    /// refusal, so a watch falls back once and never flips back.
    paged: Option<(watcher::Config, F)>,
}

/// Whether `error` is an API server refusing a streamed list: the watch
/// could not start and the API server called the request invalid (422, as
/// Kubernetes answers with `WatchList` off) or bad (400). A paged list
/// asks nothing those servers refuse; if it fails for another reason, that
/// failure is reported as any other.
pub fn refuses_streamed_lists(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::WatchStartFailed(kube::Error::Api(status))
            if status.is_invalid() || status.code == 400
    )
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use futures::{StreamExt, stream};
    use kube::{
        core::Status,
        runtime::watcher::{self, Event, InitialListStrategy},
    };

    use super::*;

    /// What a fake watch yields: an event, or a start refused with an HTTP
    /// code and reason (`watcher::Error` is not `Clone`).
    type Fake = Result<Event<u32>, (u16, &'static str)>;

    fn refused(code: u16, reason: &'static str) -> Fake {
        Err((code, reason))
    }

    fn item(fake: Fake) -> Result<Event<u32>, watcher::Error> {
        fake.map_err(|(code, reason)| {
            let status = Status::failure("sendInitialEvents: Forbidden", reason).with_code(code);
            watcher::Error::WatchStartFailed(kube::Error::Api(Box::new(status)))
        })
    }

    /// A watch whose start yields `streamed` for a streaming configuration
    /// and `paged` otherwise; returns what it yielded and the strategy of
    /// every start.
    fn run(streamed: Vec<Fake>, paged: Vec<Fake>) -> (Vec<String>, Vec<InitialListStrategy>) {
        let starts = Arc::new(Mutex::new(Vec::new()));
        let seen = starts.clone();
        let events = streamed_or_paged(watcher::Config::default().any_semantic(), move |config| {
            let strategy = config.initial_list_strategy;
            seen.lock().expect("lock").push(strategy.clone());
            let fakes = match strategy {
                InitialListStrategy::StreamingList => streamed.clone(),
                InitialListStrategy::ListWatch => paged.clone(),
            };
            stream::iter(fakes.into_iter().map(item))
        });
        let items = futures::executor::block_on(events.collect::<Vec<_>>());
        let shown = items
            .iter()
            .map(|item| match item {
                Ok(Event::Init) => "init".to_string(),
                Ok(Event::InitApply(n)) => format!("init-apply {n}"),
                Ok(Event::InitDone) => "init-done".to_string(),
                Ok(Event::Apply(n)) => format!("apply {n}"),
                Ok(Event::Delete(n)) => format!("delete {n}"),
                Err(error) => format!("error {}", crate::describe(error)),
            })
            .collect();
        let starts = starts.lock().expect("lock").clone();
        (shown, starts)
    }

    fn listed(items: &[u32]) -> Vec<Fake> {
        let mut events = vec![Ok(Event::Init)];
        events.extend(items.iter().map(|n| Ok(Event::InitApply(*n))));
        events.push(Ok(Event::InitDone));
        events
    }

    #[test]
    fn a_server_that_streams_lists_is_never_asked_for_pages() {
        let mut streamed = listed(&[1, 2]);
        streamed.push(Ok(Event::Apply(3)));
        let (events, starts) = run(streamed, listed(&[9]));
        assert_eq!(
            events,
            [
                "init",
                "init-apply 1",
                "init-apply 2",
                "init-done",
                "apply 3"
            ]
        );
        assert_eq!(starts, [InitialListStrategy::StreamingList]);
    }

    #[test]
    fn a_refused_streamed_list_falls_back_to_pages_without_a_failure() {
        for (code, reason) in [(422, "Invalid"), (400, "BadRequest")] {
            let (events, starts) = run(vec![refused(code, reason)], listed(&[1]));
            assert_eq!(events, ["init", "init-apply 1", "init-done"], "{code}");
            assert_eq!(
                starts,
                [
                    InitialListStrategy::StreamingList,
                    InitialListStrategy::ListWatch
                ],
                "{code}"
            );
        }
    }

    #[test]
    fn after_falling_back_a_refusal_is_reported_like_any_failure() {
        let mut paged = vec![refused(422, "Invalid")];
        paged.extend(listed(&[1]));
        let (events, starts) = run(vec![refused(422, "Invalid")], paged);
        assert_eq!(events.len(), 4, "{events:?}");
        assert!(events[0].starts_with("error "), "{events:?}");
        assert_eq!(starts.len(), 2, "one fallback, never a third start");
    }

    #[test]
    fn other_failures_keep_the_streamed_list() {
        let mut streamed = vec![refused(403, "Forbidden")];
        streamed.extend(listed(&[1]));
        let (events, starts) = run(streamed, listed(&[9]));
        assert!(events[0].starts_with("error "), "{events:?}");
        assert_eq!(&events[1..], ["init", "init-apply 1", "init-done"]);
        assert_eq!(starts, [InitialListStrategy::StreamingList]);
    }
}
