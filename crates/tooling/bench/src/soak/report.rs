//! The soak's printed figures: per audit (and per replica), per fault,
//! and the totals (operations, streams, stale streams, convergence times,
//! RSS, restarts, the writers' Leases, the seed).

use std::{collections::BTreeMap, time::Duration};

use super::audit::Wrong;
use crate::stats::{ms, percentile};

/// How many stale streams an audit prints in full.
const PRINTED_STALE: usize = 10;

/// One audit's outcome.
pub struct AuditRecord {
    /// What preceded it (`start`, a fault, `final`).
    pub label: String,
    /// It followed a fault (counts in the convergence figures).
    pub after_fault: bool,
    pub audited: usize,
    /// Streams wrong when the audit began.
    pub wrong_at_first: usize,
    pub stale: Vec<Wrong>,
    /// From the fault's start (or the audit's start) to every stream correct.
    pub from_fault: Option<Duration>,
    /// From the fault's end (the component back) to every stream correct.
    pub from_recovery: Option<Duration>,
    /// Streams audited and stale per replica (by index; `None`: on none).
    pub per_replica: BTreeMap<Option<usize>, (usize, usize)>,
    /// The writers: `None` when not checked; else what was still wrong at
    /// the deadline (empty: correct), and when they were found correct.
    pub writers: Option<(Vec<String>, Option<Duration>)>,
}

impl AuditRecord {
    /// Prints one line, and the stale streams.
    pub fn print(&self) {
        let timing = match (self.from_fault, self.from_recovery) {
            (Some(f), Some(r)) => format!(
                "all correct {:.2}s after the fault ({:.2}s after recovery)",
                f.as_secs_f64(),
                r.as_secs_f64()
            ),
            (Some(f), None) => format!("all correct after {:.2}s", f.as_secs_f64()),
            _ => "NOT all correct by the deadline".to_string(),
        };
        println!(
            "  audit [{}]: {} streams ({} wrong at first), {} stale or wrong; {timing}",
            self.label,
            self.audited,
            self.wrong_at_first,
            self.stale.len()
        );
        if self.per_replica.len() > 1 || self.per_replica.keys().any(|r| r.is_some_and(|r| r > 0)) {
            let parts: Vec<String> = self
                .per_replica
                .iter()
                .map(|(r, (audited, stale))| {
                    let name = r.map_or_else(|| "on none".to_string(), |r| format!("replica {r}"));
                    format!("{name}: {audited} ({stale} stale)")
                })
                .collect();
            println!("    per replica: {}", parts.join(", "));
        }
        match &self.writers {
            None => {}
            Some((wrong, at)) if wrong.is_empty() => println!(
                "    writers: EndpointSlices and route statuses correct{}",
                at.map(|d| format!(" after {:.2}s", d.as_secs_f64()))
                    .unwrap_or_default()
            ),
            Some((wrong, _)) => {
                println!("    WRITERS WRONG at the deadline:");
                for w in wrong {
                    println!("      {w}");
                }
            }
        }
        for wrong in self.stale.iter().take(PRINTED_STALE) {
            println!(
                "    STALE {}{}{}\n      holds: {}\n      truth: {}{}",
                wrong.target,
                wrong
                    .replica
                    .map(|r| format!(" on replica {r}"))
                    .unwrap_or_default(),
                if wrong.connected {
                    ""
                } else {
                    " (not connected)"
                },
                wrong.held,
                wrong.expected,
                wrong
                    .last_error
                    .as_ref()
                    .map(|e| format!("\n      last stream error: {e}"))
                    .unwrap_or_default()
            );
        }
        if self.stale.len() > PRINTED_STALE {
            println!("    … and {} more", self.stale.len() - PRINTED_STALE);
        }
    }
}

/// Convergence times of the audits that followed a fault.
pub fn print_convergence(records: &[AuditRecord]) {
    let records: Vec<&AuditRecord> = records.iter().filter(|r| r.after_fault).collect();
    let from_fault: Vec<Duration> = records.iter().filter_map(|r| r.from_fault).collect();
    let from_recovery: Vec<Duration> = records.iter().filter_map(|r| r.from_recovery).collect();
    println!(
        "  fault → all streams correct ({} audits after faults): p50 {}, p99 {}, max {}",
        from_fault.len(),
        ms(percentile(&from_fault, 50.0)),
        ms(percentile(&from_fault, 99.0)),
        ms(percentile(&from_fault, 100.0)),
    );
    println!(
        "  recovery → all streams correct:          p50 {}, p99 {}, max {}",
        ms(percentile(&from_recovery, 50.0)),
        ms(percentile(&from_recovery, 99.0)),
        ms(percentile(&from_recovery, 100.0)),
    );
}

/// MiB with one decimal, or `-`.
pub fn mib(bytes: Option<u64>) -> String {
    bytes.map_or_else(
        || "-".to_string(),
        |b| format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    )
}
