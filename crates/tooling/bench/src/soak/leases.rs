//! The two leader-elected writers' Leases, watched and checked: who holds
//! each one as the soak goes ([`LeaseWatch`], polling the Lease objects),
//! and, from the servers' own logs, that no two replicas ever held one at
//! the same time and that every write was made by a replica while it held
//! the Lease ([`check_logs`]).
//!
//! Each server logs (as JSON, in its original's dialect: the destination's
//! logrus keys, the policy controller's kubert ones) when its Lease
//! leadership changes
//! (`meridian_runtime::lease`, also on a graceful shutdown, before the
//! Lease is released) and each write it makes (the status writer's
//! `route status written` / `status written`, the EndpointSlice writer's
//! `writing EndpointSlices`). A SIGKILLed process logs nothing more: its
//! leadership ends when it was killed.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant, SystemTime},
};

use k8s_openapi::{api::coordination::v1::Lease, jiff::Timestamp};
use kube::Api;

use super::NS;

/// The policy controller's status writer's Lease.
pub const STATUS_LEASE: &str = "policy-controller-write";
/// The destination's EndpointSlice writer's Lease.
pub const SLICES_LEASE: &str = "linkerd-destination-endpoint-write";
/// Both, with the log message of each write their holder makes.
pub const LEASES: [(&str, &[&str]); 2] = [
    (STATUS_LEASE, &["route status written", "status written"]),
    (SLICES_LEASE, &["writing EndpointSlices"]),
];

/// A change of a Lease's holder, as polled.
#[derive(Clone, Debug)]
pub struct HolderChange {
    pub lease: &'static str,
    pub holder: Option<String>,
    pub transitions: i32,
}

#[derive(Default)]
struct Seen {
    current: BTreeMap<&'static str, Option<String>>,
    changes: Vec<HolderChange>,
}

/// Polls both Leases every 250 ms while it lives.
pub struct LeaseWatch {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl LeaseWatch {
    pub fn start(client: kube::Client) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        let task = tokio::spawn(async move {
            let api: Api<Lease> = Api::namespaced(client, NS);
            loop {
                for (lease, _) in LEASES {
                    let Ok(found) = api.get_opt(lease).await else {
                        continue;
                    };
                    let spec = found.and_then(|l| l.spec);
                    let holder = spec.as_ref().and_then(|s| s.holder_identity.clone());
                    let transitions = spec.and_then(|s| s.lease_transitions).unwrap_or(0);
                    let mut seen = lock(&shared);
                    if seen.current.get(lease) != Some(&holder) {
                        seen.current.insert(lease, holder.clone());
                        seen.changes.push(HolderChange {
                            lease,
                            holder,
                            transitions,
                        });
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        });
        Self { seen, task }
    }

    /// The holder of `lease` as last polled.
    pub fn holder(&self, lease: &str) -> Option<String> {
        lock(&self.seen).current.get(lease).cloned().flatten()
    }

    /// Every change seen so far.
    pub fn changes(&self) -> Vec<HolderChange> {
        lock(&self.seen).changes.clone()
    }

    /// Waits until `lease` is held by someone other than `old` (and not
    /// released); returns the new holder, or `None` after `timeout`.
    pub async fn wait_new_holder(
        &self,
        lease: &str,
        old: &str,
        timeout: Duration,
    ) -> Option<String> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(holder) = self.holder(lease).filter(|h| h != old) {
                return Some(holder);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        None
    }

    /// Waits until `lease` is held; returns the holder.
    pub async fn wait_held(&self, lease: &str, timeout: Duration) -> Option<String> {
        self.wait_new_holder(lease, "", timeout).await
    }
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One process's log of one Lease: where to read it, and when the process
/// was SIGKILLed (its leadership ends there).
pub struct LeaseLog {
    pub lease: &'static str,
    /// The replica's pod name.
    pub replica: String,
    pub path: PathBuf,
    pub killed_at: Vec<SystemTime>,
}

/// A replica's term as a Lease's holder (from its log).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    pub replica: String,
    pub start: Timestamp,
    /// `None`: still holding at the end of the log.
    pub end: Option<Timestamp>,
}

/// What the logs say about one Lease.
#[derive(Debug, Default)]
pub struct LeaseReport {
    pub terms: Vec<Term>,
    /// Two terms at once (each described).
    pub overlaps: Vec<String>,
    /// Writes per replica.
    pub writes: BTreeMap<String, usize>,
    /// Writes outside their replica's terms (each described).
    pub stray_writes: Vec<String>,
}

/// What one log line says, for the check.
#[derive(Debug, PartialEq)]
enum Event {
    Leads(bool),
    Wrote,
    Killed,
}

/// The events of one log (a JSON object per line) for `lease`, with the
/// kills, in time order.
fn events(
    text: &str,
    lease: &str,
    writes: &[&str],
    killed: &[SystemTime],
) -> Vec<(Timestamp, Event)> {
    let mut out: Vec<(Timestamp, Event)> = text
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| {
            // logrus: `time`, `msg`, the fields beside it; kubert
            // (tracing's JSON): `timestamp`, the message and the fields
            // under `fields`.
            let (at, fields) = match v.get("fields") {
                Some(fields) => (v["timestamp"].as_str()?, fields),
                None => (v["time"].as_str()?, &v),
            };
            let at: Timestamp = at.parse().ok()?;
            let message = fields["msg"].as_str().or(fields["message"].as_str())?;
            if fields["lease"] == lease && message.contains("leadership changed") {
                return Some((at, Event::Leads(fields["leader"].as_bool()?)));
            }
            writes.contains(&message).then_some((at, Event::Wrote))
        })
        .collect();
    out.extend(
        killed
            .iter()
            .filter_map(|k| Timestamp::try_from(*k).ok())
            .map(|at| (at, Event::Killed)),
    );
    out.sort_by_key(|(at, _)| *at);
    out
}

/// Terms and writes of one process log (`replica`'s).
fn terms_and_writes(events: &[(Timestamp, Event)], replica: &str) -> (Vec<Term>, Vec<Timestamp>) {
    let mut terms = Vec::new();
    let mut writes = Vec::new();
    let mut open: Option<Timestamp> = None;
    for (at, event) in events {
        match event {
            Event::Leads(true) => {
                open.get_or_insert(*at);
            }
            Event::Leads(false) | Event::Killed => {
                if let Some(start) = open.take() {
                    terms.push(Term {
                        replica: replica.to_string(),
                        start,
                        end: Some(*at),
                    });
                }
            }
            Event::Wrote => writes.push(*at),
        }
    }
    if let Some(start) = open {
        terms.push(Term {
            replica: replica.to_string(),
            start,
            end: None,
        });
    }
    (terms, writes)
}

/// Reads the logs of every process of every replica and checks each Lease:
/// no two terms at once, every write inside a term of its writer.
pub fn check_logs(logs: &[LeaseLog]) -> BTreeMap<&'static str, LeaseReport> {
    let mut reports: BTreeMap<&'static str, LeaseReport> = BTreeMap::new();
    for (lease, writes) in LEASES {
        let report = reports.entry(lease).or_default();
        for log in logs.iter().filter(|l| l.lease == lease) {
            let text = std::fs::read_to_string(&log.path).unwrap_or_default();
            let events = events(&text, lease, writes, &log.killed_at);
            let (terms, wrote) = terms_and_writes(&events, &log.replica);
            *report.writes.entry(log.replica.clone()).or_default() += wrote.len();
            for at in wrote {
                let inside = terms
                    .iter()
                    .any(|t| t.start <= at && t.end.is_none_or(|end| at <= end));
                if !inside {
                    report.stray_writes.push(format!(
                        "{} wrote at {at} outside its terms ({})",
                        log.replica,
                        around(&events, at)
                    ));
                }
            }
            report.terms.extend(terms);
        }
        report.terms.sort_by_key(|t| t.start);
        report.overlaps = overlaps(&report.terms);
    }
    reports
}

/// What a log said about its leadership just before and just after `at`
/// (a stray write's neighbours, so a failure says whether the term began
/// a moment later or had ended a moment before).
fn around(events: &[(Timestamp, Event)], at: Timestamp) -> String {
    let says = |(when, event): &(Timestamp, Event)| match event {
        Event::Leads(leads) => Some(format!("leader={leads} at {when}")),
        Event::Killed => Some(format!("killed at {when}")),
        Event::Wrote => None,
    };
    let before = events
        .iter()
        .filter(|(when, _)| *when < at)
        .rev()
        .find_map(says);
    let after = events.iter().filter(|(when, _)| *when > at).find_map(says);
    format!(
        "before it: {}; after it: {}",
        before.as_deref().unwrap_or("nothing"),
        after.as_deref().unwrap_or("nothing")
    )
}

/// Terms that began before an earlier one ended.
fn overlaps(terms: &[Term]) -> Vec<String> {
    let mut found = Vec::new();
    let mut latest: Option<&Term> = None;
    for term in terms {
        if let Some(before) = latest {
            let still = before.end.is_none_or(|end| term.start < end);
            if still {
                found.push(format!(
                    "{} took it at {} while {} held it (since {}, until {})",
                    term.replica,
                    term.start,
                    before.replica,
                    before.start,
                    before
                        .end
                        .map_or_else(|| "the end".to_string(), |e| e.to_string())
                ));
            }
        }
        let later = match latest {
            Some(before) => match (before.end, term.end) {
                (None, _) => before,
                (_, None) => term,
                (Some(a), Some(b)) if a >= b => before,
                _ => term,
            },
            None => term,
        };
        latest = Some(later);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A policy controller's line (kubert's JSON).
    fn line(at: &str, message: &str, extra: &str) -> String {
        format!(
            r#"{{"timestamp":"{at}","level":"INFO","fields":{{"message":"{message}"{extra}}},"target":"policy_controller::status"}}"#
        )
    }

    /// A destination's line (logrus's keys).
    fn go_line(at: &str, message: &str, extra: &str) -> String {
        format!(r#"{{"time":"{at}","level":"info","msg":"{message}"{extra}}}"#)
    }

    #[test]
    fn the_destinations_logrus_lines_are_read_too() {
        let text = [
            go_line(
                "2026-01-01T00:00:01Z",
                "leadership changed",
                &format!(r#","leader":true,"lease":"{SLICES_LEASE}""#),
            ),
            go_line("2026-01-01T00:00:02Z", "writing EndpointSlices", ""),
        ]
        .join("\n");
        let found = events(&text, SLICES_LEASE, LEASES[1].1, &[]);
        assert_eq!(
            found,
            vec![
                (t("2026-01-01T00:00:01Z"), Event::Leads(true)),
                (t("2026-01-01T00:00:02Z"), Event::Wrote),
            ]
        );
    }

    fn leads(at: &str, leader: bool) -> String {
        line(
            at,
            "status writer leadership changed",
            &format!(r#","leader":{leader},"lease":"{STATUS_LEASE}""#),
        )
    }

    fn t(s: &str) -> Timestamp {
        s.parse().expect("timestamp")
    }

    #[test]
    fn terms_end_at_a_logged_loss_or_a_kill() {
        let text = [
            leads("2026-01-01T00:00:01Z", true),
            line("2026-01-01T00:00:02Z", "route status written", ""),
            leads("2026-01-01T00:00:03Z", false),
            line("2026-01-01T00:00:04Z", "route status written", ""),
            leads("2026-01-01T00:00:05Z", true),
            "not json".to_string(),
        ]
        .join("\n");
        let killed = [SystemTime::from(t("2026-01-01T00:00:06Z"))];
        let found = events(&text, STATUS_LEASE, LEASES[0].1, &killed);
        let (terms, writes) = terms_and_writes(&found, "r0");
        assert_eq!(
            terms,
            vec![
                Term {
                    replica: "r0".into(),
                    start: t("2026-01-01T00:00:01Z"),
                    end: Some(t("2026-01-01T00:00:03Z")),
                },
                Term {
                    replica: "r0".into(),
                    start: t("2026-01-01T00:00:05Z"),
                    end: Some(t("2026-01-01T00:00:06Z")),
                },
            ]
        );
        assert_eq!(writes.len(), 2);
        // A stray write is told with its neighbours.
        assert_eq!(
            around(&found, t("2026-01-01T00:00:04Z")),
            "before it: leader=false at 2026-01-01T00:00:03Z; after it: leader=true at 2026-01-01T00:00:05Z"
        );
        assert_eq!(
            around(&found, t("2026-01-01T00:00:07Z")),
            "before it: killed at 2026-01-01T00:00:06Z; after it: nothing"
        );
        // Another Lease's lines are not this one's.
        let other = events(&text, SLICES_LEASE, LEASES[1].1, &[]);
        assert!(other.is_empty(), "{other:?}");
    }

    #[test]
    fn overlapping_terms_are_found() {
        let term = |r: &str, a: &str, b: Option<&str>| Term {
            replica: r.into(),
            start: t(a),
            end: b.map(t),
        };
        let clean = [
            term("a", "2026-01-01T00:00:01Z", Some("2026-01-01T00:00:03Z")),
            term("b", "2026-01-01T00:00:03Z", Some("2026-01-01T00:00:09Z")),
            term("a", "2026-01-01T00:00:10Z", None),
        ];
        assert!(overlaps(&clean).is_empty());
        let twice = [
            term("a", "2026-01-01T00:00:01Z", Some("2026-01-01T00:00:05Z")),
            term("b", "2026-01-01T00:00:04Z", Some("2026-01-01T00:00:09Z")),
        ];
        assert_eq!(overlaps(&twice).len(), 1);
        let open = [
            term("a", "2026-01-01T00:00:01Z", None),
            term("b", "2026-01-01T00:00:04Z", Some("2026-01-01T00:00:09Z")),
        ];
        assert_eq!(overlaps(&open).len(), 1);
    }
}
