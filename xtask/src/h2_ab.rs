//! `cargo xtask bench h2-ab`: the destination benchmark N times with the
//! patched h2 of vendor/ and N times with the crates.io release, each run
//! beside a CPU hog on both cores, printing per run the missed updates and
//! the unexpected stream and connection ends.
//!
//! The two binary sets: the release build of `cargo xtask bench` (patched,
//! `target/release`), and the same packages built into
//! `target/h2-pristine` with `[patch.crates-io] h2` pointed by `--config`
//! at the release's own source (fetched from crates.io by a scratch package
//! under `target/h2-pristine/fetch`) and `grpc-stream/pristine-h2` (the
//! release has no `release_idle_buffers` default to set). The runs
//! alternate patched, pristine, patched, … so that drift in the machine
//! hits both alike. Each run's full output is kept in `target/h2-ab/`.

use std::{
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

use anyhow::{Context, bail};

use crate::{
    h2_patch::{H2_VERSION, release_source},
    paths::workspace_root,
};

/// The options of `cargo xtask bench h2-ab`.
#[derive(Debug)]
pub struct AbArgs {
    /// Runs with each binary set.
    pub runs: usize,
    /// Arguments for `meridian-bench destination` (after the defaults).
    pub bench_args: Vec<String>,
    /// Skip the CPU hog.
    pub no_hog: bool,
}

impl AbArgs {
    /// `--runs N` and `--no-hog` from `args`; the rest goes to the
    /// destination benchmark.
    pub fn parse(args: &[String]) -> anyhow::Result<Self> {
        let mut out = AbArgs {
            runs: 10,
            bench_args: Vec::new(),
            no_hog: false,
        };
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            if let Some(n) = arg.strip_prefix("--runs=") {
                out.runs = n.parse().context("--runs")?;
            } else if arg == "--runs" {
                out.runs = it.next().context("--runs needs a value")?.parse()?;
            } else if arg == "--no-hog" {
                out.no_hog = true;
            } else {
                out.bench_args.push(arg.clone());
            }
        }
        if out.runs == 0 {
            bail!("--runs must be at least 1");
        }
        Ok(out)
    }
}

/// One run's outcome, as its summary line printed it.
struct Outcome {
    set: &'static str,
    run: usize,
    /// Missed updates, unexpected stream ends, unexpected connection ends.
    summary: Option<(usize, usize, usize)>,
    /// The benchmark's line of bytes per connection with its streams, as
    /// printed ("per connection with its 4 streams: … bytes").
    per_connection: Option<String>,
    status: String,
    log: PathBuf,
}

pub fn run(args: AbArgs, patched_target: &Path, cargo: &str) -> anyhow::Result<()> {
    let root = workspace_root();
    let pristine_target = root.join("target/h2-pristine");
    let source = release_source(cargo, &pristine_target)?;
    println!(
        "h2-ab: the release h2 {H2_VERSION} from {}",
        source.display()
    );
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "bench", "-p", "destination"])
        .args(["--features", "grpc-stream/pristine-h2", "--config"])
        .arg(format!(
            "patch.crates-io.h2.path={}",
            toml_string(&source.display().to_string())
        ))
        .env("CARGO_TARGET_DIR", &pristine_target)
        .current_dir(&root)
        .status()
        .context("building the pristine set")?;
    if !status.success() {
        bail!("building the binaries with the release h2 failed ({status})");
    }
    let sets = [
        ("patched", patched_target.join("release")),
        ("pristine", pristine_target.join("release")),
    ];
    let logs = root.join("target/h2-ab");
    std::fs::create_dir_all(&logs)?;
    let mut outcomes = Vec::new();
    for run in 1..=args.runs {
        for (set, bin) in &sets {
            let log = logs.join(format!("{run:02}-{set}.log"));
            println!(
                "h2-ab: run {run}/{} with the {set} h2 (log {})",
                args.runs,
                log.display()
            );
            let hog = (!args.no_hog).then(Hog::start);
            let outcome = one_run(set, run, bin, &args.bench_args, &log);
            drop(hog);
            let outcome = outcome?;
            print_outcome(&outcome);
            outcomes.push(outcome);
        }
    }
    println!(
        "h2-ab: {} runs with each h2, each beside a CPU hog on both cores{}:",
        args.runs,
        if args.no_hog {
            " (no hog: --no-hog)"
        } else {
            ""
        }
    );
    for outcome in &outcomes {
        print_outcome(outcome);
    }
    for (set, _) in &sets {
        let mine: Vec<&Outcome> = outcomes.iter().filter(|o| o.set == *set).collect();
        let sum = |f: fn(&(usize, usize, usize)) -> usize| -> usize {
            mine.iter().filter_map(|o| o.summary.as_ref()).map(f).sum()
        };
        let failed = mine.iter().filter(|o| o.summary.is_none()).count();
        println!(
            "  {set}: missed updates {}, unexpected stream ends {}, unexpected connection ends {}, runs without a summary {failed}",
            sum(|s| s.0),
            sum(|s| s.1),
            sum(|s| s.2),
        );
    }
    Ok(())
}

fn print_outcome(o: &Outcome) {
    let summary = match o.summary {
        Some((missed, streams, conns)) => format!(
            "missed updates {missed}, unexpected stream ends {streams}, unexpected connection ends {conns}"
        ),
        None => format!("NO SUMMARY ({}; see {})", o.status, o.log.display()),
    };
    println!(
        "    run {:>2} {:<8}: {summary}; {}",
        o.run,
        o.set,
        o.per_connection
            .as_deref()
            .unwrap_or("per connection: not printed")
    );
}

/// Runs `meridian-bench destination` of `bin`, teeing its output to `log`.
fn one_run(
    set: &'static str,
    run: usize,
    bin: &Path,
    bench_args: &[String],
    log: &Path,
) -> anyhow::Result<Outcome> {
    let mut child = Command::new(bin.join("meridian-bench"))
        .arg("destination")
        .arg(format!(
            "--destination-bin={}",
            bin.join("destination").display()
        ))
        .arg("--no-baseline")
        .args(bench_args)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting meridian-bench")?;
    let mut file = std::fs::File::create(log)?;
    let mut summary = None;
    let mut per_connection = None;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            writeln!(file, "{line}")?;
            if line.contains("MISSED") || line.contains("UNEXPECTED") {
                println!("    [{set} {run}] {}", line.trim());
            }
            if let Some(rest) = line.trim().strip_prefix("summary: ") {
                summary = parse_summary(rest);
            }
            if per_connection.is_none() && line.contains("per connection") {
                per_connection = Some(line.trim().to_string());
            }
        }
    }
    let status = child.wait()?;
    Ok(Outcome {
        set,
        run,
        summary: if status.success() { summary } else { None },
        per_connection,
        status: status.to_string(),
        log: log.to_path_buf(),
    })
}

/// `missed updates A, unexpected stream ends B, unexpected connection ends C`.
fn parse_summary(text: &str) -> Option<(usize, usize, usize)> {
    let numbers: Vec<usize> = text
        .split(',')
        .filter_map(|part| part.split_whitespace().last()?.parse().ok())
        .collect();
    match numbers[..] {
        [a, b, c] => Some((a, b, c)),
        _ => None,
    }
}

/// A TOML basic string.
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Busy threads, one per CPU, until dropped.
struct Hog {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Hog {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cpus = std::thread::available_parallelism().map_or(2, usize::from);
        let threads = (0..cpus)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        for _ in 0..100_000 {
                            x = std::hint::black_box(x.wrapping_mul(6_364_136_223_846_793_005) + 1);
                        }
                    }
                })
            })
            .collect();
        Hog { stop, threads }
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_lines_and_arguments_parse() {
        assert_eq!(
            parse_summary(
                "missed updates 3, unexpected stream ends 0, unexpected connection ends 12"
            ),
            Some((3, 0, 12))
        );
        assert_eq!(parse_summary("missed updates 3"), None);
        let args =
            AbArgs::parse(&["--runs=2".into(), "--changes".into(), "20".into()]).expect("parses");
        assert_eq!(args.runs, 2);
        assert_eq!(args.bench_args, ["--changes", "20"]);
        assert_eq!(AbArgs::parse(&[]).expect("parses").runs, 10);
    }
}
