//! The transport limits of both gRPC servers (the destination's `:8086` and
//! the policy controller's `:8090`), in one place: [`crate::serve`] serves
//! with them, `accept` accepts their connections.
//!
//! | limit | value | why |
//! |---|---|---|
//! | streams per connection (`SETTINGS_MAX_CONCURRENT_STREAMS`) | [`DEFAULT_MAX_CONCURRENT_STREAMS`], `--grpc-max-concurrent-streams` | see below |
//! | streams per process (proxy-facing streaming methods) | [`crate::cap::DEFAULT_MAX_OPEN_STREAMS`], `--grpc-max-open-streams` | see below |
//! | request message | [`crate::MAX_REQUEST_BYTES`] (64 KiB) | requests are a few hundred bytes; tonic's default is 4 MiB |
//! | request headers (`SETTINGS_MAX_HEADER_LIST_SIZE`) | [`MAX_HEADER_LIST_SIZE`] (16 KiB) | a proxy sends well under 1 KiB |
//! | HTTP/2 preface | within [`PREFACE_TIMEOUT`] | else the connection is closed and the peer reported |
//! | keepalive | a ping after [`KEEPALIVE_INTERVAL`] without a request or a pong, answered within [`KEEPALIVE_TIMEOUT`] | dead peers free their streams |
//! | resets | [`MAX_PENDING_ACCEPT_RESET_STREAMS`], [`MAX_LOCAL_ERROR_RESET_STREAMS`] | the rapid-reset and "made you reset" mitigations |
//! | receive window per stream | [`REQUEST_STREAM_WINDOW`] (64 KiB) | one request of [`crate::MAX_REQUEST_BYTES`]; hyper's default is 1 MiB |
//! | receive window per connection | [`REQUEST_CONNECTION_WINDOW`] (256 KiB) | a few requests in flight; hyper's default is 1 MiB |
//! | adaptive window (BDP) | off | the windows above stay fixed |
//! | largest frame accepted (`SETTINGS_MAX_FRAME_SIZE`) | [`MAX_FRAME_SIZE`] (16 KiB) | the protocol's smallest maximum |
//! | response bytes buffered per stream | [`MAX_SEND_BUFFER`] (400 KiB) | hyper's default; a stream writes only into the client's window |
//!
//! **Streams per connection.** A proxy holds one `Get` and one `GetProfile`
//! stream per Service port it talks to, and one policy `Watch` per target
//! and one `WatchPort` per inbound port, all on one connection to each
//! control-plane replica. A sidecar needs a handful; an ingress or gateway
//! proxy in front of a thousand Services needs a couple of thousand. The
//! original destination (grpc-go's default) and tonic's default set no
//! limit at all, so one client could hold unbounded memory with one
//! connection. 10,000 is five times the largest legitimate use we know of
//! and bounds a connection to about 16 MiB of stream state (1.3 to
//! 1.8 KiB per `Get` or `WatchPort` stream across runs of `cargo xtask
//! bench overload`). A client
//! that opens more than the advertised limit gets `RST_STREAM` with
//! `REFUSED_STREAM` for each extra stream (which gRPC clients report as
//! `Unavailable` and may retry); a client that honours the setting (tonic,
//! the proxy) waits for a stream to end instead. Its other streams, and
//! every other connection, keep being served. A client that keeps opening
//! streams once refused is sent `GOAWAY(ENHANCE_YOUR_CALM)` when the resets
//! the server sent it reach [`MAX_LOCAL_ERROR_RESET_STREAMS`] (a refused
//! gRPC call costs two: the refusal, and `STREAM_CLOSED` for the request
//! body sent after it), which ends the connection and its streams.
//!
//! **Streams per process.** Many connections get past the per-connection
//! limit, so the proxy-facing streaming methods (`Get`, `GetProfile`,
//! `WatchPort`, outbound `Watch`) also share one process-wide
//! [`crate::cap::StreamCap`]: a stream beyond it is answered
//! `RESOURCE_EXHAUSTED` at once and counted in
//! `grpc_open_streams_refused_total` (the policy controller's under
//! `policy_`). The largest legitimate load we know of is the cluster-size
//! benchmark's 20,000 streams on one process (2,500 connections of 4 `Get`
//! and 4 `GetProfile`); 200,000 is ten times that, and bounds stream state
//! to about 350 MiB at the per-stream cost above. The destination's
//! internal feed from the policy controller is not counted.
//!
//! **Idle connections hold no I/O buffers.** The patched h2 (vendor/h2)
//! frees a connection's read and write buffers while they are empty when
//! its server builder's `release_idle_buffers` is on. [`crate::serve`]
//! turns on the fork's process-wide default, so that every HTTP/2 server
//! connection the process accepts afterwards has it, the admin and webhook
//! servers' too (hyper builds their h2 builders and cannot set it).
//! It saves about 24 KiB per idle proxy connection (vendor/h2/README.md).
//!
//! **Windows.** What a proxy sends the control plane is tiny: requests of
//! a few hundred bytes, PINGs and WINDOW_UPDATEs; what it receives is
//! shared, pre-encoded frames. The receive windows therefore bound what one
//! client can make the server buffer (hyper's 1 MiB defaults would allow
//! 1 MiB per stream), and no adaptive window grows them.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll},
    time::{Duration, Instant},
};

use meridian_runtime::peers::{Listener, OpenConnection, PrefaceGuard};
use tokio::{
    io::{AsyncRead, AsyncWrite, ReadBuf},
    net::{TcpListener, TcpStream},
};
use tonic::transport::server::{Connected, TcpConnectInfo};

pub use meridian_runtime::peers::PREFACE_TIMEOUT;

/// Default of `--grpc-max-concurrent-streams` (see the module docs).
pub const DEFAULT_MAX_CONCURRENT_STREAMS: u32 = 10_000;

/// Largest request header block accepted (hyper's default, stated here).
pub const MAX_HEADER_LIST_SIZE: u32 = 16 * 1024;

/// The HTTP/2 receive window a client gets per request stream: one request
/// of [`crate::MAX_REQUEST_BYTES`].
pub const REQUEST_STREAM_WINDOW: u32 = crate::MAX_REQUEST_BYTES as u32;

/// The HTTP/2 receive window a client gets per connection: a few requests
/// in flight at once.
pub const REQUEST_CONNECTION_WINDOW: u32 = 4 * REQUEST_STREAM_WINDOW;

/// Largest HTTP/2 frame accepted (the protocol's smallest maximum).
pub const MAX_FRAME_SIZE: u32 = 16 * 1024;

/// A keepalive ping after this long without a request or a pong from the
/// client …
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(10);

/// … must be answered within this, or the connection is closed.
pub const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(3);

/// Response bytes h2 buffers for one stream beyond what the client's window
/// lets it send (hyper's default, which the servers had before they drove
/// h2 themselves).
pub const MAX_SEND_BUFFER: usize = 400 * 1024;

/// Streams reset by the client before the server accepted them, at once
/// (h2's default; CVE-2023-44487 "rapid reset").
pub const MAX_PENDING_ACCEPT_RESET_STREAMS: usize = 20;

/// Streams the server may reset because of client errors before it closes
/// the connection (hyper's default, which tonic turns off unless given;
/// CVE-2025-8671 "made you reset").
pub const MAX_LOCAL_ERROR_RESET_STREAMS: usize = 1024;

/// The flags of the gRPC transport limits.
#[derive(Clone, Debug, clap::Args)]
pub struct ServerLimits {
    /// HTTP/2 streams one client connection may hold open
    /// (SETTINGS_MAX_CONCURRENT_STREAMS). Extra streams are refused with
    /// RST_STREAM(REFUSED_STREAM); the connection's other streams and other
    /// clients keep being served. A proxy holds about two streams per
    /// Service it talks to.
    #[arg(
        long = "grpc-max-concurrent-streams",
        value_name = "N",
        env = "MERIDIAN_GRPC_MAX_CONCURRENT_STREAMS",
        default_value_t = DEFAULT_MAX_CONCURRENT_STREAMS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_concurrent_streams: u32,
    /// Streams the whole process may hold open (Get, GetProfile,
    /// WatchPort, outbound Watch, over all connections). A stream beyond
    /// it is answered RESOURCE_EXHAUSTED and counted in
    /// grpc_open_streams_refused_total; open streams are unaffected.
    #[arg(
        long = "grpc-max-open-streams",
        value_name = "N",
        env = "MERIDIAN_GRPC_MAX_OPEN_STREAMS",
        default_value_t = crate::cap::DEFAULT_MAX_OPEN_STREAMS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub max_open_streams: u32,
}

impl Default for ServerLimits {
    fn default() -> Self {
        Self {
            max_concurrent_streams: DEFAULT_MAX_CONCURRENT_STREAMS,
            max_open_streams: crate::cap::DEFAULT_MAX_OPEN_STREAMS,
        }
    }
}

impl ServerLimits {
    /// The process-wide stream cap of these limits (one per process).
    pub fn stream_cap(&self) -> crate::cap::StreamCap {
        crate::cap::StreamCap::new(self.max_open_streams)
    }
}

/// The next connection of `listener` for [`crate::serve`]: `TCP_NODELAY`
/// (without it, small updates wait on the client's delayed ACK, ~40 ms per
/// fan-out), guarded by a [`PrefaceGuard`] that closes and reports (to
/// `peers`) a peer sending anything but the HTTP/2 preface within
/// [`PREFACE_TIMEOUT`]. Accept errors (out of file descriptors) are retried
/// after 100 ms instead of in a busy loop, and logged once a minute
/// (`warned` holds when they last were).
pub(crate) async fn accept(
    listener: &TcpListener,
    peers: &Listener,
    warned: &mut Option<Instant>,
) -> Connection {
    loop {
        match listener.accept().await {
            Ok((tcp, peer)) => {
                let _ = tcp.set_nodelay(true);
                let open = peers.open();
                let guarded = PrefaceGuard::new(tcp, Some(peer), peers.clone(), PREFACE_TIMEOUT);
                return Connection {
                    io: guarded,
                    _open: open,
                };
            }
            Err(error) => {
                if warned.is_none_or(|at| at.elapsed() >= Duration::from_secs(60)) {
                    tracing::warn!(%error, "gRPC accept failed; retrying every 100 ms");
                    *warned = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// One accepted gRPC connection (counted open until it drops).
#[derive(Debug)]
pub(crate) struct Connection {
    io: PrefaceGuard<TcpStream>,
    _open: OpenConnection,
}

impl Connection {
    /// The addresses a request of this connection carries in its
    /// extensions, as tonic's server gave them.
    pub(crate) fn connect_info(&self) -> TcpConnectInfo {
        self.io.get_ref().connect_info()
    }
}

impl AsyncRead for Connection {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Connection {
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
        self.io.get_ref().is_write_vectored()
    }
}
