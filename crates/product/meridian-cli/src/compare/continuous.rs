//! `compare --every SECONDS`: compare as a service, for a shadow left
//! running beside the serving control plane (`deploy/shadow-compare`).
//! Each round resolves and connects both sides afresh, asks every question,
//! prints its report and sets the gauges that `/metrics` serves (with
//! `/live` and `/ready`) on `--metrics-addr`:
//!
//! - `meridian_compare_questions{api, verdict}`: the last round's count
//!   per API (`Destination.Get`, …) and verdict (`equal`, `different`,
//!   `known`, `failed_one_side`, `not_asked`): a fixed set of series, never
//!   one per target (targets are the cluster's to choose);
//! - `meridian_compare_rounds_total{exit}`: rounds ended per exit status
//!   (0 equal, 1 different, 2 a side could not be asked);
//! - `meridian_compare_last_round_timestamp_seconds` and
//!   `meridian_compare_last_round_duration_seconds`.
//!
//! `/ready` turns ready once a round has ended, whatever it found: the
//! gauges say what. SIGTERM ends the current wait, never a round halfway
//! through its report.

use std::{
    net::SocketAddr,
    sync::{Arc, atomic::AtomicU64},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use anyhow::Context;
use meridian_runtime::{AdminServer, Readiness, Shutdown, peers::ConnectionMetrics};
use prometheus_client::{
    encoding::EncodeLabelSet,
    metrics::{counter::Counter, family::Family, gauge::Gauge},
    registry::Registry,
};

use super::{
    CompareArgs,
    question::Api,
    report::{self, Counts},
};

/// `meridian_compare_questions`'s labels.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QuestionLabels {
    api: &'static str,
    verdict: &'static str,
}

/// `meridian_compare_rounds_total`'s label.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RoundLabels {
    exit: &'static str,
}

/// The series a round sets.
#[derive(Clone, Default)]
pub struct Metrics {
    questions: Family<QuestionLabels, Gauge>,
    rounds: Family<RoundLabels, Counter>,
    last_round: Gauge<f64, AtomicU64>,
    last_duration: Gauge<f64, AtomicU64>,
}

impl Metrics {
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self::default();
        registry.register(
            "meridian_compare_questions",
            "Questions of the last compare round, per API and verdict",
            metrics.questions.clone(),
        );
        registry.register(
            "meridian_compare_rounds",
            "Compare rounds ended, per exit status (0 equal, 1 different, 2 a side could not be asked)",
            metrics.rounds.clone(),
        );
        registry.register(
            "meridian_compare_last_round_timestamp_seconds",
            "When the last compare round ended (Unix time)",
            metrics.last_round.clone(),
        );
        registry.register(
            "meridian_compare_last_round_duration_seconds",
            "How long the last compare round took",
            metrics.last_duration.clone(),
        );
        metrics
    }

    /// Records one round: its counts per API (every API and verdict set,
    /// so a verdict that disappears reads 0), its exit status and its time.
    pub fn record(&self, by_api: &[(Api, Counts)], exit: i32, took: Duration, ended: SystemTime) {
        for (api, counts) in by_api {
            for (verdict, count) in [
                ("equal", counts.equal),
                ("different", counts.different),
                ("known", counts.known),
                ("failed_one_side", counts.failed_one_side),
                ("not_asked", counts.not_asked),
            ] {
                self.questions
                    .get_or_create(&QuestionLabels {
                        api: api.method(),
                        verdict,
                    })
                    .set(i64::try_from(count).unwrap_or(i64::MAX));
            }
        }
        let exit = match exit {
            0 => "0",
            1 => "1",
            _ => "2",
        };
        self.rounds.get_or_create(&RoundLabels { exit }).inc();
        self.last_duration.set(took.as_secs_f64());
        self.last_round.set(
            ended
                .duration_since(UNIX_EPOCH)
                .map(|since| since.as_secs_f64())
                .unwrap_or(0.0),
        );
    }
}

/// Rounds every `every` until SIGTERM or Ctrl-C, serving `/metrics` on
/// `metrics_addr`; exits 0.
pub async fn run(
    args: &CompareArgs,
    every: Duration,
    metrics_addr: SocketAddr,
) -> anyhow::Result<i32> {
    let mut registry = Registry::default();
    let metrics = Metrics::register(&mut registry);
    let peers = ConnectionMetrics::register(&mut registry);
    let readiness = Readiness::default();
    let first_round = readiness.register("first compare round");
    let shutdown = Shutdown::on_signals().context("installing the signal handlers")?;
    let admin = AdminServer::bind(metrics_addr, readiness, Arc::new(registry), &peers)
        .await
        .with_context(|| format!("binding --metrics-addr {metrics_addr}"))?;
    let server = tokio::spawn(admin.serve(shutdown.clone()));
    eprintln!(
        "compare: a round every {} s, metrics on {metrics_addr}",
        every.as_secs()
    );
    loop {
        let started = Instant::now();
        let (by_api, exit) = match super::round(args).await {
            Ok(round) => {
                super::print_report(args, &round)?;
                let (by_api, _) = report::counts(&round.results);
                (by_api.into_iter().collect::<Vec<_>>(), round.exit)
            }
            Err(error) => {
                eprintln!("compare: round failed: {error:#}");
                (Vec::new(), 2)
            }
        };
        metrics.record(&by_api, exit, started.elapsed(), SystemTime::now());
        first_round.set(true);
        let wait = tokio::time::sleep(every);
        tokio::select! {
            () = wait => {}
            () = shutdown.clone().requested() => break,
        }
    }
    let _ = server.await;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(equal: usize, different: usize) -> Counts {
        Counts {
            asked: equal + different,
            equal,
            different,
            ..Counts::default()
        }
    }

    fn scrape(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).expect("encode");
        out
    }

    /// `deploy/shadow-compare`'s Deployment runs flags this binary takes.
    #[test]
    fn the_shipped_deployment_runs_flags_compare_takes() {
        use clap::Parser;
        #[derive(Parser)]
        struct Compare {
            #[command(flatten)]
            args: CompareArgs,
        }
        let manifest = include_str!("../../../../../deploy/shadow-compare/deployment.yaml");
        let args: Vec<&str> = manifest
            .lines()
            .skip_while(|line| line.trim() != "args:")
            .skip(1)
            .map_while(|line| line.trim().strip_prefix("- "))
            .collect();
        assert_eq!(args.first(), Some(&"compare"), "{args:?}");
        let parsed = Compare::try_parse_from(args).expect("the manifest's flags parse");
        assert_eq!(parsed.args.every, Some(300));
        assert_eq!(parsed.args.metrics_addr.port(), 9995);
        assert!(manifest.contains("containerPort: 9995"));
        assert!(
            parsed
                .args
                .b
                .contains("meridian-shadow.meridian-shadow.svc")
        );
    }

    #[test]
    fn a_round_sets_every_verdict_of_every_api_and_counts_the_round() {
        let mut registry = Registry::default();
        let metrics = Metrics::register(&mut registry);
        let ended = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        metrics.record(
            &[(Api::Get, counts(3, 1)), (Api::Inbound, counts(2, 0))],
            1,
            Duration::from_millis(2500),
            ended,
        );
        let text = scrape(&registry);
        for line in [
            "meridian_compare_questions{api=\"Destination.Get\",verdict=\"equal\"} 3",
            "meridian_compare_questions{api=\"Destination.Get\",verdict=\"different\"} 1",
            "meridian_compare_questions{api=\"InboundServerPolicies.WatchPort\",verdict=\"known\"} 0",
            "meridian_compare_rounds_total{exit=\"1\"} 1",
            "meridian_compare_last_round_timestamp_seconds 1800000000.0",
            "meridian_compare_last_round_duration_seconds 2.5",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        // The next round differs no more: the gauge follows, the counter adds.
        metrics.record(
            &[(Api::Get, counts(4, 0))],
            0,
            Duration::from_secs(1),
            ended,
        );
        let text = scrape(&registry);
        assert!(text.contains(
            "meridian_compare_questions{api=\"Destination.Get\",verdict=\"different\"} 0"
        ));
        assert!(text.contains("meridian_compare_rounds_total{exit=\"0\"} 1"));
        assert!(text.contains("meridian_compare_rounds_total{exit=\"1\"} 1"));
    }
}
