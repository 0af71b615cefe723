//! Waiting for the cluster (or a server under test) to converge: polling a
//! check, or reading a stream until an item matches.

use std::{fmt::Debug, future::Future, time::Duration};

use futures::{Stream, StreamExt};

/// Polls `check` every 100 ms until it returns `Some`, or panics with
/// `what` and the last observed state after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if tokio::time::Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Reads `stream` until an item satisfies `done` and returns it. Panics on
/// an error item, at the end of the stream, or with `what` after `timeout`.
pub async fn next_matching<S, T, E>(
    stream: &mut S,
    what: &str,
    timeout: Duration,
    done: impl Fn(&T) -> bool,
) -> T
where
    S: Stream<Item = Result<T, E>> + Unpin,
    E: Debug,
{
    let read = async {
        loop {
            match stream.next().await {
                Some(Ok(item)) if done(&item) => return item,
                Some(Ok(_)) => {}
                Some(Err(error)) => panic!("stream failed while waiting for {what}: {error:?}"),
                None => panic!("stream ended while waiting for {what}"),
            }
        }
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or_else(|_| panic!("timed out after {timeout:?} waiting for {what}"))
}
