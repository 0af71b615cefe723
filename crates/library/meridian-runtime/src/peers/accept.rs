//! The accept loop of every HTTP listener (admin, introspection, webhooks):
//! accept until shutdown, each connection served on a task of its own and
//! counted open on its [`Listener`]; an accept error (too many open files)
//! backs off instead of spinning; finished tasks are reaped as the loop
//! goes. After shutdown the listener closes and open connections get
//! [`DRAIN_TIMEOUT`] to finish before they are aborted.

use std::{future::Future, net::SocketAddr, time::Duration};

use tokio::{
    net::{TcpListener, TcpStream},
    task::JoinSet,
};

use super::Listener;
use crate::Shutdown;

/// How long open connections get to finish after shutdown is requested.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// How long the loop waits after a failed accept.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// Accepts connections on `listener` until `shutdown`, serving each with
/// `serve` on a task of its own, then drains them (see the module doc).
pub async fn accept_until<F, Fut>(
    listener: TcpListener,
    peers: &Listener,
    shutdown: Shutdown,
    mut serve: F,
) where
    F: FnMut(TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut connections = JoinSet::new();
    let stop = shutdown.requested();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
            // Reap finished connection tasks as we go.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let (tcp, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(listener = peers.name(), %error, "accept failed");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        let open = peers.open();
        let connection = serve(tcp, peer);
        connections.spawn(async move {
            let _open = open;
            connection.await;
        });
    }
    drop(listener);
    let drained = tokio::time::timeout(DRAIN_TIMEOUT, async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            listener = peers.name(),
            remaining = connections.len(),
            "closing connections that did not drain"
        );
        connections.abort_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn serves_each_connection_then_stops_and_drains() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (trigger, shutdown) = Shutdown::new();
        let peers = Listener::unregistered("test");
        let server = tokio::spawn(async move {
            accept_until(listener, &peers, shutdown, |mut tcp, _| async move {
                let _ = tcp.write_all(b"hello").await;
            })
            .await;
        });
        for _ in 0..3 {
            let mut client = TcpStream::connect(addr).await.expect("connect");
            let mut got = Vec::new();
            client.read_to_end(&mut got).await.expect("read");
            assert_eq!(got, b"hello");
        }
        trigger.trigger();
        server.await.expect("the loop ends after shutdown");
        assert!(
            TcpStream::connect(addr).await.is_err(),
            "the listener is closed once the loop ends"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_that_does_not_drain_is_aborted() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let (trigger, shutdown) = Shutdown::new();
        let peers = Listener::unregistered("test");
        let server = tokio::spawn(async move {
            accept_until(listener, &peers, shutdown, |_tcp, _| {
                std::future::pending::<()>()
            })
            .await;
        });
        let _client = TcpStream::connect(addr).await.expect("connect");
        tokio::task::yield_now().await;
        trigger.trigger();
        // Paused time jumps over the drain timeout; the stuck task is aborted.
        server
            .await
            .expect("the loop ends despite the stuck connection");
    }
}
