//! Watches whose API client is handed to them and may change while they
//! run: a linked cluster's kubeconfig rotated, or the link removed.
//!
//! [`follow_client`] restarts the watch on every new client; its first
//! list then resets the index to exactly what the new client lists, so
//! nothing deleted during the switch lingers. When the client is taken
//! away (`None`) it emits an empty list, which empties the index: a removed
//! link leaves no endpoints behind. [`switching_watch`] is the
//! [`WatchTask`] of one kind over it.

use std::collections::VecDeque;

use futures::{Stream, StreamExt, stream::BoxStream};
use kube::{Api, Client, runtime::watcher};
use tokio::sync::watch;

use crate::{Index, IndexMetrics, SharedIndex, WatchTask, resources, watch::Checked, with_backoff};

type Item<K> = Result<watcher::Event<K>, watcher::Error>;

struct State<K, F> {
    clients: watch::Receiver<Option<Client>>,
    start: F,
    current: Option<BoxStream<'static, Item<K>>>,
    queued: VecDeque<Item<K>>,
    started: bool,
}

impl<K, S, F> State<K, F>
where
    F: Fn(Client) -> S,
    S: Stream<Item = Item<K>> + Send + 'static,
{
    fn switch(&mut self) {
        match self.clients.borrow_and_update().clone() {
            Some(client) => self.current = Some((self.start)(client).boxed()),
            None => {
                self.current = None;
                self.queued.push_back(Ok(watcher::Event::Init));
                self.queued.push_back(Ok(watcher::Event::InitDone));
            }
        }
    }
}

/// The events of `start(client)` for the newest client of `clients`: a new
/// client restarts the watch (which begins with a full list); `None` yields
/// an empty list and then waits. Ends when the sender is dropped.
pub fn follow_client<K, S, F>(
    clients: watch::Receiver<Option<Client>>,
    start: F,
) -> impl Stream<Item = Item<K>> + Send + 'static
where
    K: Send + 'static,
    F: Fn(Client) -> S + Send + 'static,
    S: Stream<Item = Item<K>> + Send + 'static,
{
    let state = State {
        clients,
        start,
        current: None,
        queued: VecDeque::new(),
        started: false,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            if let Some(item) = state.queued.pop_front() {
                return Some((item, state));
            }
            if !state.started {
                state.started = true;
                state.switch();
                continue;
            }
            let State {
                clients, current, ..
            } = &mut state;
            match current {
                Some(events) => {
                    tokio::select! {
                        changed = clients.changed() => {
                            changed.ok()?;
                            state.switch();
                        }
                        item = events.next() => match item {
                            Some(item) => return Some((item, state)),
                            None => state.current = None,
                        },
                    }
                }
                None => {
                    clients.changed().await.ok()?;
                    state.switch();
                }
            }
        }
    })
}

/// A watch of every `W` through whichever client `clients` holds, into
/// `index`.
pub fn switching_watch<W, I>(
    kind: &str,
    clients: watch::Receiver<Option<Client>>,
    index: SharedIndex<I>,
    metrics: &IndexMetrics,
) -> WatchTask
where
    W: Checked,
    W::DynamicType: Default,
    I: Index<W::Object> + Send + Sync + 'static,
{
    let stream = follow_client(clients, |client| {
        let api = Api::<W>::all(client);
        with_backoff(crate::streamed_or_paged(
            resources::watch_config(),
            move |config| watcher(api.clone(), config),
        ))
    });
    WatchTask::from_stream(kind, stream, index, metrics)
}
