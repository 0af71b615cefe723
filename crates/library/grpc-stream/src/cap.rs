//! The process-wide bound on open streams (`--grpc-max-open-streams`).
//!
//! The per-connection limit (`SETTINGS_MAX_CONCURRENT_STREAMS`, see
//! [`crate::server`]) bounds one connection; a client that opens many
//! connections is bounded only by this. Every proxy-facing streaming
//! method of a process takes a slot from one [`StreamCap`] when its stream
//! opens and gives it back when the response body is dropped; a stream
//! beyond the cap is answered at once with `RESOURCE_EXHAUSTED` (a status
//! proxies treat like any other refusal and retry with backoff) and
//! counted in `grpc_open_streams_refused_total`, which has no labels: a
//! client chooses nothing a series is named after. Streams already open,
//! and unary calls, are not affected.

use std::sync::Arc;

use prometheus_client::{
    metrics::{counter::Counter, gauge::Gauge},
    registry::Registry,
};
use tonic::Status;

/// Default of `--grpc-max-open-streams` (see [`crate::server`]).
pub const DEFAULT_MAX_OPEN_STREAMS: u32 = 200_000;

/// One process's bound on open streams (cheap to clone; clones share it).
#[derive(Clone, Debug)]
pub struct StreamCap {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Most streams open at once.
    max: u32,
    /// Streams open now: both the count the bound checks and the gauge
    /// `/metrics` shows (its `inc` returns the previous value atomically).
    open: Gauge,
    /// Streams refused because `open` had reached `max`.
    refused: Counter,
}

/// A slot of a [`StreamCap`], given back when dropped.
#[derive(Debug)]
pub struct StreamSlot {
    inner: Arc<Inner>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        self.inner.open.dec();
    }
}

impl StreamCap {
    /// At most `max` streams open at once.
    pub fn new(max: u32) -> Self {
        Self {
            inner: Arc::new(Inner {
                max,
                open: Gauge::default(),
                refused: Counter::default(),
            }),
        }
    }

    /// Registers `grpc_open_streams` and `grpc_open_streams_refused` in
    /// `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "grpc_open_streams",
            "Streams open on the gRPC server (counted against --grpc-max-open-streams)",
            self.inner.open.clone(),
        );
        registry.register(
            "grpc_open_streams_refused",
            "Streams refused with RESOURCE_EXHAUSTED because --grpc-max-open-streams were open",
            self.inner.refused.clone(),
        );
    }

    /// A slot for a new stream, or the status refusing it.
    pub fn acquire(&self) -> Result<StreamSlot, Status> {
        let before = self.inner.open.inc();
        if before >= i64::from(self.inner.max) {
            self.inner.open.dec();
            self.inner.refused.inc();
            return Err(Status::resource_exhausted(format!(
                "this server already has {} streams open, its limit \
                 (--grpc-max-open-streams); retry later",
                self.inner.max
            )));
        }
        Ok(StreamSlot {
            inner: self.inner.clone(),
        })
    }

    /// Streams open now.
    pub fn open(&self) -> u64 {
        u64::try_from(self.inner.open.get()).unwrap_or(0)
    }

    /// Streams refused so far.
    pub fn refused(&self) -> u64 {
        self.inner.refused.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_past_the_cap_are_refused_until_one_ends() {
        let cap = StreamCap::new(2);
        let a = cap.acquire().expect("first");
        let _b = cap.acquire().expect("second");
        let refused = cap.acquire().expect_err("third");
        assert_eq!(refused.code(), tonic::Code::ResourceExhausted);
        assert!(refused.message().contains("--grpc-max-open-streams"));
        assert_eq!((cap.open(), cap.refused()), (2, 1));
        drop(a);
        let _c = cap.acquire().expect("a slot was given back");
        assert_eq!((cap.open(), cap.refused()), (2, 1));
    }

    #[test]
    fn series_have_no_labels() {
        let cap = StreamCap::new(1);
        let mut registry = Registry::default();
        cap.register(&mut registry);
        let _slot = cap.acquire().expect("first");
        let _ = cap.acquire().expect_err("second");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encoded");
        assert!(text.contains("\ngrpc_open_streams 1\n"), "{text}");
        assert!(
            text.contains("\ngrpc_open_streams_refused_total 1\n"),
            "{text}"
        );
    }
}
