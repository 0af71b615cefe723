//! The webhook probe: connections that each announce a 3 MiB
//! AdmissionReview and send it a few bytes at a time, beside real reviews
//! sent one after another on fresh connections: how the real ones fare
//! (answers, p50/p99/max), how many slow connections the server cut off,
//! and the server's memory.

use std::{
    net::SocketAddr,
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use tokio::{io::AsyncWriteExt, net::TcpStream};

use super::measure::Answers;
use crate::overload::bad_peers::review;

/// The size each slow body announces: the API server's own request limit.
const ANNOUNCED: usize = 3 * 1024 * 1024;

/// How long the slow bodies are held while real reviews are sent.
const HOLD: Duration = Duration::from_secs(20);

/// Holds `slow` trickling connections to the webhook at `addr` for
/// [`HOLD`], sending real reviews meanwhile; returns the real reviews'
/// answers and how many slow connections the server closed.
pub async fn slow_bodies(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
    slow: usize,
) -> (Answers, String) {
    let closed = Arc::new(AtomicUsize::new(0));
    let opened = Arc::new(AtomicUsize::new(0));
    let until = Instant::now() + HOLD;
    let mut tasks = Vec::with_capacity(slow);
    for _ in 0..slow {
        let (tls, closed, opened) = (tls.clone(), closed.clone(), opened.clone());
        tasks.push(tokio::spawn(async move {
            if trickle(addr, &tls, until, &opened).await.is_err() {
                closed.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    // Let the slow connections get in first.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut answers = Answers::default();
    while Instant::now() < until {
        let t0 = Instant::now();
        let code = match tokio::time::timeout(Duration::from_secs(15), review(addr, tls)).await {
            Ok(Ok(_)) => "OK".to_string(),
            Ok(Err(error)) => format!("error: {error}"),
            Err(_) => "no answer within 15 s".to_string(),
        };
        answers.record(&code, t0.elapsed());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for task in tasks {
        let _ = task.await;
    }
    let line = format!(
        "slow bodies: {} connected of {slow}, {} cut off by the server before the client gave up",
        opened.load(Ordering::Relaxed),
        closed.load(Ordering::Relaxed)
    );
    (answers, line)
}

/// One slow client: TLS, a request head announcing [`ANNOUNCED`] bytes,
/// then 64 bytes every 100 ms until `until`. An error is the server
/// closing the connection (or refusing it).
async fn trickle(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
    until: Instant,
    opened: &AtomicUsize,
) -> anyhow::Result<()> {
    let tcp = TcpStream::connect(addr).await?;
    let name = rustls::pki_types::ServerName::try_from("localhost")?;
    let mut stream = tls.connect(name, tcp).await?;
    opened.fetch_add(1, Ordering::Relaxed);
    let head = format!(
        "POST / HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {ANNOUNCED}\r\n\r\n{{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{{\"uid\":\""
    );
    stream.write_all(head.as_bytes()).await?;
    stream.flush().await?;
    let chunk = [b'a'; 64];
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(100)).await;
        stream.write_all(&chunk).await?;
        stream.flush().await?;
    }
    Ok(())
}
