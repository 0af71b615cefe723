//! [`PrefaceGuard`]: the connection of an HTTP/2-only server must open with
//! the 24-byte HTTP/2 client preface, whole, within [`PREFACE_TIMEOUT`].
//!
//! An HTTP/2 server (h2's, hyper's) waits for the preface without a
//! deadline (keepalive pings only start after the handshake), so a peer that
//! connects and sends nothing, or half a preface, holds a task and a file
//! descriptor forever; one that sends garbage is closed but not logged
//! where an operator sees it. The guard reads the first bytes as they pass,
//! closes the connection (an I/O error to the server) on the first byte that
//! differs from the preface or when the deadline passes, and reports the
//! peer to its [`Listener`]. Once the preface has passed it is a plain
//! pass-through.

use std::{
    future::Future,
    io,
    net::SocketAddr,
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::{Listener, Reason, escape_prefix};

/// How long a peer has to send the whole HTTP/2 preface. Proxies send it
/// with their first packet; 10 s leaves room for a loaded client.
pub const PREFACE_TIMEOUT: Duration = Duration::from_secs(10);

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// An I/O stream whose first bytes must be the HTTP/2 preface.
#[derive(Debug)]
pub struct PrefaceGuard<IO> {
    io: IO,
    /// Preface bytes seen so far (24: passed, the guard is disarmed).
    matched: usize,
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
    timeout: Duration,
    peer: Option<SocketAddr>,
    listener: Listener,
    /// Whether this connection was reported already.
    reported: bool,
}

impl<IO> PrefaceGuard<IO> {
    /// Guards `io` (from `peer`), reporting to `listener`; the preface must
    /// arrive within `timeout`.
    pub fn new(io: IO, peer: Option<SocketAddr>, listener: Listener, timeout: Duration) -> Self {
        Self {
            io,
            matched: 0,
            deadline: Some(Box::pin(tokio::time::sleep(timeout))),
            timeout,
            peer,
            listener,
            reported: false,
        }
    }

    /// The wrapped stream.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// Whether the whole preface has passed.
    pub fn passed(&self) -> bool {
        self.matched == PREFACE.len()
    }

    fn report(&mut self, reason: Reason, detail: &str) {
        if !self.reported {
            self.reported = true;
            self.listener.bad(self.peer, reason, detail);
        }
    }

    /// Checks bytes just read against the rest of the preface.
    fn check(&mut self, new: &[u8]) -> io::Result<()> {
        let want = &PREFACE[self.matched..];
        let n = new.len().min(want.len());
        if new[..n] == want[..n] {
            self.matched += n;
            if self.passed() {
                self.deadline = None;
            }
            return Ok(());
        }
        // Show what was sent from its start (what matched, then the rest).
        let mut sent = PREFACE[..self.matched].to_vec();
        sent.extend_from_slice(&new[..new.len().min(16)]);
        let (reason, what) = classify(&sent);
        let detail = format!("{what}; first bytes \"{}\"", escape_prefix(&sent));
        self.report(reason, &detail);
        Err(io::Error::new(io::ErrorKind::InvalidData, detail))
    }
}

/// What a peer that did not send the preface sent instead.
fn classify(sent: &[u8]) -> (Reason, &'static str) {
    match sent {
        // A TLS record: handshake (22), then version 3.x.
        [0x16, 0x03, ..] => (
            Reason::TlsOnPlaintext,
            "a TLS ClientHello on a plaintext HTTP/2 port",
        ),
        [first, ..] if first.is_ascii_alphabetic() && looks_like_http1(sent) => (
            Reason::Http1OnHttp2,
            "an HTTP/1 request on an HTTP/2-only (gRPC) port",
        ),
        _ => (Reason::Garbage, "not an HTTP/2 preface"),
    }
}

/// `METHOD SP …`: a token of letters then a space.
fn looks_like_http1(sent: &[u8]) -> bool {
    let method_len = sent.iter().take_while(|b| b.is_ascii_alphabetic()).count();
    (1..=10).contains(&method_len) && sent.get(method_len) == Some(&b' ')
}

impl<IO: AsyncRead + Unpin> AsyncRead for PrefaceGuard<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.passed() {
            return Pin::new(&mut this.io).poll_read(cx, buf);
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.io).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let new = buf.filled()[before..].to_vec();
                if new.is_empty() {
                    // EOF before the whole preface. Connect-then-close (a
                    // TCP probe, a port scan) is not worth a warning.
                    if this.matched > 0 {
                        let detail =
                            format!("closed after {} of the 24 preface bytes", this.matched);
                        this.report(Reason::Truncated, &detail);
                    }
                    return Poll::Ready(Ok(()));
                }
                Poll::Ready(this.check(&new))
            }
            Poll::Ready(Err(error)) => Poll::Ready(Err(error)),
            Poll::Pending => {
                if let Some(deadline) = this.deadline.as_mut()
                    && deadline.as_mut().poll(cx).is_ready()
                {
                    let detail = format!(
                        "no HTTP/2 preface within {:?} ({} of 24 bytes received)",
                        this.timeout, this.matched
                    );
                    this.report(Reason::Silent, &detail);
                    return Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, detail)));
                }
                Poll::Pending
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for PrefaceGuard<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn guard(
        io: tokio::io::DuplexStream,
        listener: &Listener,
        timeout: Duration,
    ) -> PrefaceGuard<tokio::io::DuplexStream> {
        PrefaceGuard::new(io, None, listener.clone(), timeout)
    }

    #[tokio::test]
    async fn the_preface_passes_then_everything_does() {
        let listener = Listener::unregistered("grpc");
        let (mut client, server) = tokio::io::duplex(1024);
        let mut server = guard(server, &listener, Duration::from_secs(10));
        // Split across writes, then frames after it.
        client.write_all(&PREFACE[..5]).await.expect("write");
        client.write_all(&PREFACE[5..]).await.expect("write");
        client.write_all(b"\x00\x00\x00\x04").await.expect("write");
        let mut read = vec![0u8; 28];
        server.read_exact(&mut read).await.expect("read");
        assert_eq!(&read[..24], PREFACE);
        assert!(server.passed());
        for reason in [Reason::Garbage, Reason::Silent, Reason::Truncated] {
            assert_eq!(listener.bad_count(reason), 0);
        }
    }

    #[tokio::test]
    async fn garbage_is_classified_reported_once_and_closed() {
        for (sent, reason) in [
            (&b"\x16\x03\x01\x02\x00\x01"[..], Reason::TlsOnPlaintext),
            (b"GET / HTTP/1.1\r\n", Reason::Http1OnHttp2),
            (b"PRI*HTTP/2.0\r\n", Reason::Garbage),
            (b"\x00\xff\x13garbage", Reason::Garbage),
        ] {
            let listener = Listener::unregistered("grpc");
            let (mut client, server) = tokio::io::duplex(1024);
            let mut server = guard(server, &listener, Duration::from_secs(10));
            client.write_all(sent).await.expect("write");
            let mut read = [0u8; 64];
            let error = server.read(&mut read).await.expect_err("refused");
            assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{sent:?}");
            assert_eq!(listener.bad_count(reason), 1, "{sent:?}: {error}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn silence_and_half_a_preface_time_out() {
        let listener = Listener::unregistered("grpc");
        let (mut client, server) = tokio::io::duplex(1024);
        let mut server = guard(server, &listener, Duration::from_secs(10));
        client.write_all(&PREFACE[..12]).await.expect("write");
        let mut read = [0u8; 64];
        assert_eq!(server.read(&mut read).await.expect("12 bytes"), 12);
        let error = server.read(&mut read).await.expect_err("times out");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut);
        assert_eq!(listener.bad_count(Reason::Silent), 1);
    }

    #[tokio::test]
    async fn closing_mid_preface_is_reported_but_an_empty_connection_is_not() {
        let listener = Listener::unregistered("grpc");
        let (mut client, server) = tokio::io::duplex(1024);
        let mut server = guard(server, &listener, Duration::from_secs(10));
        client.write_all(&PREFACE[..7]).await.expect("write");
        drop(client);
        let mut read = Vec::new();
        server.read_to_end(&mut read).await.expect("EOF");
        assert_eq!(listener.bad_count(Reason::Truncated), 1);

        let (client, server) = tokio::io::duplex(1024);
        let mut server = guard(server, &listener, Duration::from_secs(10));
        drop(client);
        server.read_to_end(&mut read).await.expect("EOF");
        assert_eq!(
            listener.bad_count(Reason::Truncated),
            1,
            "not counted again"
        );
    }
}
