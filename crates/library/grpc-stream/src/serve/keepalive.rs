//! A connection's keepalive: a PING after
//! [`crate::server::KEEPALIVE_INTERVAL`] without a new request or a PONG
//! from the client, and the connection closed if the PONG does not come
//! within [`crate::server::KEEPALIVE_TIMEOUT`]. A proxy whose host vanished
//! without closing its sockets frees its streams this way. (hyper's server
//! also counted a request body's DATA as a sign of life; a proxy sends none
//! after its requests, so the PINGs come as often.)

use std::{
    pin::Pin,
    task::{Context, Poll},
    time::Duration,
};

use h2::{Ping, PingPong};
use tokio::time::{Instant, Sleep};

/// One connection's keepalive: when the next PING is due, or, once sent,
/// when its PONG is overdue.
pub(super) struct KeepAlive {
    ping_pong: PingPong,
    /// Boxed: a timer entry is larger than the rest of the connection's
    /// bookkeeping here, and a `Sleep` must stay pinned.
    timer: Pin<Box<Sleep>>,
    /// A PING is out, and `timer` is its deadline.
    ping_sent: bool,
    interval: Duration,
    timeout: Duration,
}

/// What the keepalive saw.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Pulse {
    /// The peer is alive, or not yet due to answer.
    Alive,
    /// The PONG did not come in time: close the connection.
    TimedOut,
}

impl KeepAlive {
    pub(super) fn new(ping_pong: PingPong, interval: Duration, timeout: Duration) -> Self {
        Self {
            ping_pong,
            timer: Box::pin(tokio::time::sleep(interval)),
            ping_sent: false,
            interval,
            timeout,
        }
    }

    /// The client sent a request: the next PING waits a full interval from
    /// now (unless one is out already).
    pub(super) fn record_request(&mut self) {
        if !self.ping_sent {
            self.timer.as_mut().reset(Instant::now() + self.interval);
        }
    }

    /// Sends the PING that is due, takes the PONG that came, and says
    /// whether the peer let its PONG time out.
    pub(super) fn poll(&mut self, cx: &mut Context<'_>) -> Pulse {
        loop {
            if self.ping_sent {
                match self.ping_pong.poll_pong(cx) {
                    Poll::Ready(Ok(_)) => {
                        self.ping_sent = false;
                        self.timer.as_mut().reset(Instant::now() + self.interval);
                    }
                    // The connection is closing: nothing to keep alive.
                    Poll::Ready(Err(_)) => return Pulse::Alive,
                    Poll::Pending => {}
                }
            }
            if self.timer.as_mut().poll(cx).is_pending() {
                return Pulse::Alive;
            }
            if self.ping_sent {
                return Pulse::TimedOut;
            }
            if self.ping_pong.send_ping(Ping::opaque()).is_err() {
                return Pulse::Alive;
            }
            self.ping_sent = true;
            self.timer.as_mut().reset(Instant::now() + self.timeout);
        }
    }
}
