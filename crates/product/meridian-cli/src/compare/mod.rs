//! `meridian-cli compare --a <side> --b <side>`: asks two control planes
//! (Linkerd 2.20's and Meridian's, or two Meridians) the questions their
//! proxies ask about the cluster's own objects, and shows every
//! difference. Exit status 0 when every answer is equal, 1 when one
//! differs (a known, deliberate difference only with `--strict`), 2 when a
//! question could not be asked.
//!
//! - [`sides`]: the two sides' addresses, direct or port-forwarded;
//! - [`targets`]: the questions, from the cluster's Services and pods,
//!   each asked as a [`client`] pod;
//!   [`outside`]: from its ExternalWorkloads and EgressNetworks;
//! - [`ask`]: one call's first complete answer, and `--follow`;
//! - [`tree`] and [`diff`]: answers by field name, normalised, compared;
//! - [`known`]: the README's deliberate differences, as data;
//! - [`report`]: the table, the blocks, `-o json`;
//! - [`continuous`]: `--every`, rounds and their metrics.

mod ask;
mod client;
mod continuous;
mod diff;
mod known;
mod outside;
mod question;
mod report;
mod sides;
mod targets;
mod tree;

use std::{
    sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use anyhow::Context;
use clap::{Args, ValueEnum};
use futures::StreamExt;

use ask::{Conns, Divergence, Timing};
use diff::Difference;
use known::Known;
use question::{Answer, Question};
pub(crate) use sides::url;

/// `compare`'s arguments.
#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Side a (e.g. the control plane serving now): `DESTINATION,POLICY`
    /// gRPC addresses (`127.0.0.1:8086,127.0.0.1:8090`), or with
    /// --port-forward `<namespace>/<deployment>` (`linkerd/linkerd-destination`).
    #[arg(long, value_name = "SIDE")]
    pub a: String,
    /// Side b (e.g. Meridian's shadow: `meridian-shadow/meridian-shadow`).
    #[arg(long, value_name = "SIDE")]
    pub b: String,
    /// Reach each side's Deployment through the API server (a Running,
    /// Ready pod's ports, as `kubectl port-forward deploy/…` does).
    #[arg(long)]
    pub port_forward: bool,
    /// The destination port forwarded to.
    #[arg(long, default_value_t = 8086)]
    pub destination_port: u16,
    /// The policy controller's gRPC port forwarded to.
    #[arg(long, default_value_t = 8090)]
    pub policy_port: u16,
    /// Ask about this namespace's Services and pods only (default: all namespaces).
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,
    /// Ask about the Services and pods matching this label selector only.
    #[arg(short = 'l', long)]
    pub selector: Option<String>,
    /// Ask at most this many questions (the first, by namespace and name).
    #[arg(long, default_value_t = 2000)]
    pub max_targets: usize,
    /// Questions asked at once (each opens one stream on each side).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..))]
    pub concurrency: u32,
    /// Ask as this client pod (`[<namespace>/]<pod>`; its namespace and node
    /// go in the context token), instead of a synthetic `meridian-compare`
    /// pod in each target's namespace on the first Node.
    #[arg(long = "as", value_name = "POD")]
    pub as_pod: Option<String>,
    /// After the first answers, keep every stream open for this many
    /// seconds and report targets whose sides differ for longer than --grace.
    #[arg(long, value_name = "SECONDS")]
    pub follow: Option<u64>,
    /// With --follow: how long the sides may differ (one catching up with
    /// a change) before it counts.
    #[arg(long, value_name = "SECONDS", default_value_t = 3.0)]
    pub grace: f64,
    /// How long to wait for a first message (a `Get` stream silent this
    /// long describes no endpoints).
    #[arg(long, value_name = "SECONDS", default_value_t = 5.0)]
    pub wait: f64,
    /// How long a stream must stay quiet after its last message for the
    /// answer to count as complete.
    #[arg(long, value_name = "SECONDS", default_value_t = 0.5)]
    pub settle: f64,
    /// Known, deliberate differences (README "Where Meridian differs from
    /// Linkerd") also make the exit status 1.
    #[arg(long)]
    pub strict: bool,
    /// The side that runs Linkerd's own controllers (`a` or `b`), if one
    /// does: known defects of the original (README "Where Meridian differs
    /// from Linkerd") are recognised on that side only, as the same pair of
    /// answers from two Meridians is a real difference.
    #[arg(long, value_enum, value_name = "SIDE")]
    pub original: Option<known::Side>,
    /// `text` or `json`.
    #[arg(short = 'o', long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// The cluster domain of Service names.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// Compare again every SECONDS until SIGTERM, each round's report on
    /// stdout and its counts as metrics on --metrics-addr (deploy/shadow-compare).
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
    pub every: Option<u64>,
    /// With --every: where `/metrics`, `/live` and `/ready` are served.
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "0.0.0.0:9995",
        requires = "every"
    )]
    pub metrics_addr: std::net::SocketAddr,
}

/// The report's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

/// How one question's two answers compare.
pub enum Verdict {
    Equal,
    Different(Vec<Difference>),
    /// One side answered, the other failed (or both failed differently).
    FailedOneSide(Vec<Difference>),
    /// A documented, deliberate difference.
    Known {
        known: &'static Known,
        b_is_meridian: bool,
        differences: Vec<Difference>,
    },
    /// A side could not be asked (why, per side).
    NotAsked(Vec<String>),
}

impl Verdict {
    pub fn differences(&self) -> &[Difference] {
        match self {
            Verdict::Different(d) | Verdict::FailedOneSide(d) => d,
            Verdict::Known { differences, .. } => differences,
            Verdict::Equal | Verdict::NotAsked(_) => &[],
        }
    }
}

/// One question, both answers, the verdict.
pub struct Compared {
    pub question: Question,
    pub a: Answer,
    pub b: Answer,
    pub verdict: Verdict,
    /// With --follow: the time the sides differed past the grace period.
    pub divergence: Option<Divergence>,
}

/// Runs `compare`; the exit status to end with.
pub async fn run(args: CompareArgs) -> anyhow::Result<i32> {
    if let Some(every) = args.every {
        return continuous::run(&args, Duration::from_secs(every), args.metrics_addr).await;
    }
    let round = round(&args).await?;
    print_report(&args, &round)?;
    Ok(round.exit)
}

/// One comparison: both sides, every question, the verdicts.
struct Round {
    sides: Option<(sides::Side, sides::Side)>,
    results: Vec<Compared>,
    /// Questions in scope beyond `--max-targets`.
    skipped: usize,
    exit: i32,
}

/// Resolves and connects both sides and asks every question. A side that
/// cannot be reached is exit status 2 (said on stderr), with no results.
async fn round(args: &CompareArgs) -> anyhow::Result<Round> {
    let seconds = |flag: &str, s: f64| {
        Duration::try_from_secs_f64(s).with_context(|| format!("--{flag} {s}: not a duration"))
    };
    let timing = Timing {
        wait: seconds("wait", args.wait)?,
        settle: seconds("settle", args.settle)?,
    };
    let grace = seconds("grace", args.grace)?;
    let kube = crate::kube_client(args.context.as_deref()).await?;
    let forwarding = args.port_forward.then_some((
        &kube,
        sides::Ports {
            destination: args.destination_port,
            policy: args.policy_port,
        },
    ));
    let side_a = sides::resolve("a", &args.a, forwarding).await?;
    let side_b = sides::resolve("b", &args.b, forwarding).await?;
    let (conns_a, conns_b) = match tokio::join!(sides::connect(&side_a), sides::connect(&side_b)) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            for error in [a.err(), b.err()].into_iter().flatten() {
                eprintln!("compare: {error}");
            }
            return Ok(Round {
                sides: None,
                results: Vec::new(),
                skipped: 0,
                exit: 2,
            });
        }
    };

    let scope = targets::Scope {
        namespace: args.namespace.as_deref(),
        selector: args.selector.as_deref(),
        cluster_domain: &args.cluster_domain,
        client: args.as_pod.as_deref(),
        default_namespace: args.namespace.as_deref().unwrap_or("default"),
    };
    let mut questions = targets::questions(&kube, &scope).await?;
    let skipped = questions.len().saturating_sub(args.max_targets);
    questions.truncate(args.max_targets);
    eprintln!(
        "compare: asking {} question(s) of a ({}) and b ({})",
        questions.len(),
        side_a.describe(),
        side_b.describe()
    );

    let decoder = Arc::new(tree::Decoder::new()?);
    let follow = args.follow.map(Duration::from_secs);
    let how = Asking {
        timing,
        follow: follow.map(|window| (window, grace)),
        original: args.original,
    };
    let results = ask_all(
        questions,
        (conns_a, conns_b),
        decoder,
        how,
        args.concurrency as usize,
    )
    .await;

    let (_, total) = report::counts(&results);
    let exit = if total.not_asked > 0 {
        2
    } else if total.different + total.failed_one_side > 0 || (args.strict && total.known > 0) {
        1
    } else {
        0
    };
    Ok(Round {
        sides: Some((side_a, side_b)),
        results,
        skipped,
        exit,
    })
}

/// Prints a round's report (nothing when a side could not be reached:
/// stderr already says why).
fn print_report(args: &CompareArgs, round: &Round) -> anyhow::Result<()> {
    let Some((side_a, side_b)) = &round.sides else {
        return Ok(());
    };
    match args.output {
        Output::Text => print!(
            "{}",
            report::text((side_a, side_b), &round.results, round.skipped, args.strict)
        ),
        Output::Json => println!(
            "{}",
            serde_json::to_string_pretty(&report::json(
                (side_a, side_b),
                &round.results,
                round.skipped,
                round.exit
            ))?
        ),
    }
    Ok(())
}

/// Asks every question of both sides, `concurrency` at a time (the
/// follow windows overlap freely); progress on stderr every two seconds.
/// How each question is asked and judged.
#[derive(Clone, Copy)]
struct Asking {
    timing: Timing,
    /// `--follow`'s window and `--grace`.
    follow: Option<(Duration, Duration)>,
    /// `--original`.
    original: Option<known::Side>,
}

async fn ask_all(
    questions: Vec<Question>,
    conns: (Conns, Conns),
    decoder: Arc<tree::Decoder>,
    how: Asking,
    concurrency: usize,
) -> Vec<Compared> {
    let total = questions.len();
    let counts = Arc::new(Progress::default());
    let progress = {
        let counts = counts.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(2));
            tick.tick().await;
            loop {
                tick.tick().await;
                eprintln!("compare: {}", counts.line(total));
            }
        })
    };
    let permits = Arc::new(tokio::sync::Semaphore::new(concurrency));
    let conns = Arc::new(conns);
    let mut results: Vec<(usize, Compared)> =
        futures::stream::iter(questions.into_iter().enumerate())
            .map(|(i, question)| {
                let (permits, conns, decoder) = (permits.clone(), conns.clone(), decoder.clone());
                let counts = counts.clone();
                async move {
                    let compared =
                        compare_one(question, &conns, decoder, how, &permits, &counts).await;
                    counts.done.fetch_add(1, Ordering::Relaxed);
                    if !matches!(compared.verdict, Verdict::Equal) {
                        counts.differing.fetch_add(1, Ordering::Relaxed);
                    }
                    (i, compared)
                }
            })
            // The semaphore bounds the asking; a follow window holds no permit.
            .buffer_unordered(usize::MAX)
            .collect()
            .await;
    progress.abort();
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, c)| c).collect()
}

/// Where the asking stands, for the progress line: questions with both
/// first answers, those whose follow window also ended, and those that
/// differ (counted once done).
#[derive(Default)]
struct Progress {
    answered: AtomicUsize,
    done: AtomicUsize,
    differing: AtomicUsize,
}

impl Progress {
    fn line(&self, total: usize) -> String {
        let answered = self.answered.load(Ordering::Relaxed);
        let following = answered.saturating_sub(self.done.load(Ordering::Relaxed));
        let differing = self.differing.load(Ordering::Relaxed);
        if following == 0 {
            format!("{answered}/{total} answered, {differing} differ")
        } else {
            format!("{answered}/{total} answered, {following} following, {differing} differ")
        }
    }
}

async fn compare_one(
    question: Question,
    conns: &(Conns, Conns),
    decoder: Arc<tree::Decoder>,
    how: Asking,
    permits: &tokio::sync::Semaphore,
    counts: &Progress,
) -> Compared {
    let Asking {
        timing,
        follow,
        original,
    } = how;
    let permit = permits.acquire().await;
    let ((a, stream_a), (b, stream_b)) = tokio::join!(
        ask::first_answer(&conns.0, decoder.clone(), &question, timing),
        ask::first_answer(&conns.1, decoder, &question, timing),
    );
    drop(permit);
    counts.answered.fetch_add(1, Ordering::Relaxed);
    let asked = !matches!(a, Answer::Unreachable(_)) && !matches!(b, Answer::Unreachable(_));
    let Some((window, grace)) = follow.filter(|_| asked) else {
        let verdict = judge(&question, &a, &b, original);
        return Compared {
            question,
            a,
            b,
            verdict,
            divergence: None,
        };
    };
    let divergence = ask::follow(
        (stream_a, stream_b),
        (a.clone(), b.clone()),
        window,
        grace,
        answer_differences,
    )
    .await;
    let verdict = match &divergence {
        Some(d) => judge(&question, &d.a, &d.b, original),
        None => Verdict::Equal,
    };
    let (a, b) = match &divergence {
        Some(d) => (d.a.clone(), d.b.clone()),
        None => (a, b),
    };
    Compared {
        question,
        a,
        b,
        verdict,
        divergence,
    }
}

/// The differences of two answers: field by field when both are answers,
/// else the whole answer (path `""`).
pub fn answer_differences(a: &Answer, b: &Answer) -> Vec<Difference> {
    match (a, b) {
        (Answer::Value(x), Answer::Value(y)) => diff::diff(x, y),
        _ if a == b => Vec::new(),
        _ => vec![Difference {
            path: String::new(),
            a: Some(a.to_node()),
            b: Some(b.to_node()),
        }],
    }
}

/// Equal, a known difference, one side failing, or different.
fn judge(question: &Question, a: &Answer, b: &Answer, original: Option<known::Side>) -> Verdict {
    let unreachable: Vec<String> = [("a", a), ("b", b)]
        .iter()
        .filter_map(|(side, answer)| match answer {
            Answer::Unreachable(why) => Some(format!("{side}: {why}")),
            _ => None,
        })
        .collect();
    if !unreachable.is_empty() {
        return Verdict::NotAsked(unreachable);
    }
    let differences = answer_differences(a, b);
    if differences.is_empty() {
        return Verdict::Equal;
    }
    if let Some((known, b_is_meridian)) = known::explain(question, a, b, original) {
        return Verdict::Known {
            known,
            b_is_meridian,
            differences,
        };
    }
    if a.code().is_some() || b.code().is_some() {
        return Verdict::FailedOneSide(differences);
    }
    Verdict::Different(differences)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_counts_answers_before_their_follow_window_ends() {
        let counts = Progress::default();
        assert_eq!(counts.line(75), "0/75 answered, 0 differ");
        counts.answered.fetch_add(3, Ordering::Relaxed);
        assert_eq!(counts.line(75), "3/75 answered, 3 following, 0 differ");
        counts.done.fetch_add(3, Ordering::Relaxed);
        counts.differing.fetch_add(1, Ordering::Relaxed);
        assert_eq!(counts.line(75), "3/75 answered, 1 differ");
    }
}
