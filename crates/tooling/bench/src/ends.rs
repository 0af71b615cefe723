//! Why every benchmark stream and connection ended, counted by reason
//! (server GOAWAY and its code, RST_STREAM and its code, keepalive timeout,
//! transport error, the server ending the stream with a gRPC status, ...),
//! so that a stream that errored and reconnected is never mistaken for one
//! that kept up.
//!
//! One process-wide record: the benchmark clients report each end
//! ([`stream_ended`], [`connection_ended`]); a benchmark declares which of
//! its phases expect ends ([`phase`]: teardown, a fault the soak injects);
//! [`report`] prints the counts and says plainly when any end was
//! unexpected.

use std::{
    collections::BTreeMap,
    error::Error as StdError,
    sync::{Mutex, MutexGuard},
};

/// A phase of a run: whether streams and connections may end in it.
#[derive(Clone, Debug)]
pub struct Phase {
    pub name: String,
    /// Ends in this phase are part of the plan (teardown, injected faults).
    pub expects_ends: bool,
}

#[derive(Default)]
struct Record {
    phase: Option<Phase>,
    /// (stream or connection, phase, expected, reason) → count.
    counts: BTreeMap<(Kind, String, bool, String), usize>,
    /// Ended streams by the key their updates are tagged with.
    keyed: BTreeMap<usize, usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Stream,
    Connection,
}

static RECORD: Mutex<Record> = Mutex::new(Record {
    phase: None,
    counts: BTreeMap::new(),
    keyed: BTreeMap::new(),
});

fn record() -> MutexGuard<'static, Record> {
    RECORD
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Enters a phase: ends from now on are counted under `name`, as expected
/// or not. Before the first call, the run is in phase `run` (no end
/// expected).
pub fn phase(name: &str, expects_ends: bool) {
    record().phase = Some(Phase {
        name: name.to_string(),
        expects_ends,
    });
}

fn count(kind: Kind, reason: String, expected_anyway: bool) {
    let mut r = record();
    let (name, expects) = r.phase.as_ref().map_or(("run".to_string(), false), |p| {
        (p.name.clone(), p.expects_ends)
    });
    *r.counts
        .entry((kind, name, expects || expected_anyway, reason))
        .or_default() += 1;
}

/// A stream ended for `reason` (see [`describe`]); `key`: the key its
/// updates were tagged with, if any.
pub fn stream_ended(reason: String, key: Option<usize>) {
    if let Some(key) = key {
        *record().keyed.entry(key).or_default() += 1;
    }
    count(Kind::Stream, reason, false);
}

/// A stream was refused with an answer the benchmark expects in any phase
/// (e.g. `NotFound` for a `Get` of a Service it deleted); counted, never
/// discarded.
pub fn stream_refused_as_expected(reason: String) {
    count(Kind::Stream, reason, true);
}

/// Starts counting keyed stream ends afresh: a benchmark that measures
/// several servers one after another calls it before each one's streams,
/// so that the last one's torn-down streams do not count as this one's
/// ended streams. (The counts by reason are kept for the report.)
pub fn forget_keyed() {
    record().keyed.clear();
}

/// Streams whose updates were tagged `key` that ended.
pub fn keyed_stream_ends(key: usize) -> usize {
    record().keyed.get(&key).copied().unwrap_or(0)
}

/// A connection ended for `reason`. `let_go`: the client itself let the
/// connection go (a disposable connection), an expected end in any phase.
pub fn connection_ended(reason: String, let_go: bool) {
    count(Kind::Connection, reason, let_go);
}

/// Unexpected stream and connection ends so far.
pub fn unexpected() -> (usize, usize) {
    let r = record();
    let sum = |kind: Kind| {
        r.counts
            .iter()
            .filter(|((k, _, expected, _), _)| *k == kind && !expected)
            .map(|(_, n)| n)
            .sum()
    };
    (sum(Kind::Stream), sum(Kind::Connection))
}

/// Prints every end by phase and reason, then a verdict line:
/// `stream and connection ends: none unexpected` or `UNEXPECTED ENDS: …`.
/// Returns the unexpected stream and connection ends.
pub fn report() -> (usize, usize) {
    let lines: Vec<String> = record()
        .counts
        .iter()
        .map(|((kind, phase, expected, reason), n)| {
            format!(
                "    {:<10} {n:>6} × {reason} [{phase}{}]",
                match kind {
                    Kind::Stream => "stream",
                    Kind::Connection => "connection",
                },
                if *expected { ", expected" } else { "" }
            )
        })
        .collect();
    let (streams, connections) = unexpected();
    println!("  why streams and connections ended (counted by the client):");
    if lines.is_empty() {
        println!("    none ended");
    }
    for line in lines {
        println!("{line}");
    }
    if streams + connections == 0 {
        println!("  stream and connection ends: none unexpected");
    } else {
        println!(
            "  UNEXPECTED ENDS: {streams} streams and {connections} connections ended outside a phase that expects it (listed above)"
        );
    }
    (streams, connections)
}

/// A reason naming what ended a stream or connection, found in `error`'s
/// source chain: the h2 error (GOAWAY or RST_STREAM and its code, from the
/// server or this client), hyper's (keepalive timeout, closed connection)
/// or the transport's.
pub fn describe(error: &(dyn StdError + 'static)) -> String {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    let mut hyper_reason = None;
    while let Some(e) = current {
        if let Some(h2) = e.downcast_ref::<h2::Error>() {
            return describe_h2(h2);
        }
        if let Some(hyper) = e.downcast_ref::<hyper::Error>() {
            hyper_reason.get_or_insert_with(|| describe_hyper(hyper));
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            return format!("transport error ({:?})", io.kind());
        }
        current = e.source();
    }
    hyper_reason.unwrap_or_else(|| format!("other error ({error})"))
}

fn describe_h2(e: &h2::Error) -> String {
    let by = if e.is_remote() {
        "from the server"
    } else {
        "by this client"
    };
    if let Some(io) = e.get_io() {
        return format!("transport error ({:?})", io.kind());
    }
    match e.reason() {
        Some(reason) if e.is_go_away() => format!("GOAWAY {reason:?} {by}"),
        Some(reason) if e.is_reset() => format!("RST_STREAM {reason:?} {by}"),
        Some(reason) => format!("h2 error {reason:?}"),
        None => format!("h2 error ({e})"),
    }
}

fn describe_hyper(e: &hyper::Error) -> String {
    if e.is_timeout() {
        "keepalive timeout".into()
    } else if e.is_incomplete_message() {
        "connection closed mid-message".into()
    } else if e.is_closed() {
        "connection closed".into()
    } else if e.is_canceled() {
        "request canceled".into()
    } else {
        format!("hyper error ({e})")
    }
}

/// A gRPC status that ended a stream: its code, and what below it ended
/// the stream when there was an error (tonic keeps it as the source).
pub fn describe_status(status: &tonic::Status) -> String {
    match StdError::source(status) {
        Some(source) => format!("status {:?}: {}", status.code(), describe(source)),
        None => format!("status {:?} ({})", status.code(), status.message()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_come_from_the_deepest_known_error() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset");
        assert_eq!(describe(&io), "transport error (ConnectionReset)");
        let h2: h2::Error = h2::Reason::ENHANCE_YOUR_CALM.into();
        assert_eq!(describe(&h2), "h2 error ENHANCE_YOUR_CALM");
        let status = tonic::Status::unavailable("gone");
        assert_eq!(describe_status(&status), "status Unavailable (gone)");
    }
}
