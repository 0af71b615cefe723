//! Structured logging flags (`--log-level`, `--log-format plain|json`) and
//! their installation as the global `tracing` subscriber.
//!
//! `--log-level` takes `tracing` filter directives. The Linkerd chart
//! writes them for the original's crates (the policy controller's
//! `linkerd=info,warn`, `linkerd=debug`): a directive for `linkerd` or a
//! `linkerd_…` target applies to Meridian's own crates
//! ([`MERIDIAN_TARGETS`]), so `linkerd=info,warn` is Meridian at `info`
//! and every library at `warn`, as it is for the original. (The Go
//! controllers' plain levels are translated by
//! [`crate::goflags::go_log_level`].)
//!
//! Each binary writes its lines where, and as, the original it stands in
//! for does ([`LogDialect`]): the destination and the sp-validator as
//! Linkerd's Go controllers (stderr; `--log-format json` with logrus's
//! keys `time`, `level`, `msg`, the event's fields beside them: [`json`]),
//! the policy controller as Linkerd's Rust one (kubert: stdout; JSON as
//! `tracing-subscriber` writes it, `timestamp`, `level`, `fields.message`,
//! `target`, `spans`). A log pipeline parsing a container's lines reads
//! the same keys after the swap.

pub mod json;

use clap::{Args, ValueEnum};

use crate::span_export::SpanExport;
use tracing::Subscriber;
use tracing_subscriber::{
    EnvFilter, Layer, fmt, fmt::MakeWriter, fmt::format::JsonFields, prelude::*,
    registry::LookupSpan,
};

/// The `tracing` targets of Meridian's own crates: what a directive for
/// the original's `linkerd` crates means here.
pub const MERIDIAN_TARGETS: &[&str] = &[
    "destination",
    "sp_validator",
    "policy_controller",
    "meridian_runtime",
    "admission",
    "k8s_index",
    "k8s_api",
    "grpc_stream",
];

/// Rewrites the directives for `linkerd` or `linkerd_…` targets (the
/// original's crates) into the same directive for each of
/// [`MERIDIAN_TARGETS`]; other directives are kept as they are.
pub fn linkerd_directives(filter: &str) -> String {
    filter
        .split(',')
        .map(|directive| {
            let target_end = directive.find(['[', '=']).unwrap_or(directive.len());
            let target = &directive[..target_end];
            let is_linkerd = directive.contains('=')
                && (target == "linkerd"
                    || target.starts_with("linkerd_")
                    || target.starts_with("linkerd::"));
            if !is_linkerd {
                return directive.to_string();
            }
            let rest = &directive[target_end..];
            MERIDIAN_TARGETS
                .iter()
                .map(|t| format!("{t}{rest}"))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// How log lines are rendered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line, for log pipelines, with the keys of the
    /// original the binary stands in for ([`LogDialect`]).
    Json,
}

/// Which original's log lines a binary writes: where they go and, with
/// `--log-format json`, their keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogDialect {
    /// Linkerd's Go `/controller` (logrus): stderr; JSON keys `time`,
    /// `level` (logrus's names: `info`, `warning`), `msg`, the event's
    /// fields beside them.
    Go,
    /// Linkerd's Rust policy controller (kubert's `LogFormat`): stdout;
    /// JSON as `tracing-subscriber` writes it: `timestamp`, `level`
    /// (`INFO`), `fields` (with `message`), `target`, and the open spans
    /// under `spans`.
    Kubert,
}

/// Logging flags shared by every binary.
#[derive(Clone, Debug, Args)]
pub struct LogArgs {
    /// Log filter: a level (`info`) or `tracing` directives (`info,kube=warn`);
    /// `linkerd` (the original's crates, as Linkerd's chart writes
    /// `linkerd=info,warn`) stands for Meridian's own crates.
    #[arg(long, env = "MERIDIAN_LOG", default_value = "info")]
    pub log_level: String,

    /// Log line format.
    #[arg(long, env = "MERIDIAN_LOG_FORMAT", value_enum, default_value_t = LogFormat::Plain)]
    pub log_format: LogFormat,
}

/// Errors from installing the subscriber.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    #[error("invalid --log-level {value:?}: {source}")]
    Filter {
        value: String,
        source: tracing_subscriber::filter::ParseError,
    },
    #[error("a global tracing subscriber is already installed")]
    AlreadyInstalled,
}

impl LogArgs {
    /// Installs the global subscriber writing `dialect`'s lines. Call
    /// once, early in `main`.
    pub fn init(&self, dialect: LogDialect) -> Result<(), LogError> {
        self.init_with_spans(dialect, None)
    }

    /// Installs the global subscriber writing `dialect`'s lines, with
    /// `spans`' exporting layer if given (`-trace-collector`). Without it
    /// the log filter is global, as it always was; with it, the log filter
    /// is the log layer's own and the exporter sees only
    /// [`crate::span_export::TARGET`]'s spans.
    pub fn init_with_spans(
        &self,
        dialect: LogDialect,
        spans: Option<&SpanExport>,
    ) -> Result<(), LogError> {
        let filter = EnvFilter::try_new(self.directives()).map_err(|source| LogError::Filter {
            value: self.log_level.clone(),
            source,
        })?;
        let installed = match spans {
            None => tracing_subscriber::registry()
                .with(filter)
                .with(self.layer(dialect))
                .try_init(),
            Some(spans) => tracing_subscriber::registry()
                .with(self.layer(dialect).with_filter(filter))
                .with(spans.layer())
                .try_init(),
        };
        installed.map_err(|_| LogError::AlreadyInstalled)
    }

    /// The layer writing this format's lines in `dialect` to the stream
    /// its original writes to, coloured (plain only) on a terminal.
    fn layer<S>(&self, dialect: LogDialect) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        use std::io::IsTerminal as _;
        match dialect {
            LogDialect::Go => {
                let ansi = std::io::stderr().is_terminal();
                fmt_layer(self.log_format, dialect, std::io::stderr, ansi)
            }
            LogDialect::Kubert => {
                let ansi = std::io::stdout().is_terminal();
                fmt_layer(self.log_format, dialect, std::io::stdout, ansi)
            }
        }
    }

    /// The filter: `--log-level`, then, unless it names them, two of
    /// kube's modules quieter. Each logs every failed request again (with
    /// every retry of a watch, several lines a second while the API server
    /// is unreachable or denies a list), where our watches log a failure
    /// once, when it starts or changes, and every other caller reports the
    /// error it gets back:
    /// - `kube_runtime::watcher` warns with the whole API status on each
    ///   denied (403) list or watch: at `error`;
    /// - `kube_client::client::builder` logs each transport failure at
    ///   `error`: off.
    fn directives(&self) -> String {
        let mut directives = linkerd_directives(&self.log_level);
        if !self.log_level.contains("kube_runtime") {
            directives.push_str(",kube_runtime::watcher=error");
        }
        if !self.log_level.contains("kube_client") {
            directives.push_str(",kube_client::client::builder=off");
        }
        // The exported spans' target: never in the log, never built
        // without an exporter.
        directives.push(',');
        directives.push_str(crate::span_export::TARGET);
        directives.push_str("=off");
        directives
    }
}

/// The layer writing `format`'s lines in `dialect` to `writer`, with
/// colours when `ansi` (plain only).
pub fn fmt_layer<S, W>(
    format: LogFormat,
    dialect: LogDialect,
    writer: W,
    ansi: bool,
) -> Box<dyn Layer<S> + Send + Sync>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    match (format, dialect) {
        (LogFormat::Plain, _) => fmt::layer()
            .with_target(true)
            .with_ansi(ansi)
            .with_writer(writer)
            .boxed(),
        (LogFormat::Json, LogDialect::Go) => fmt::layer()
            .event_format(json::GoJson)
            .fmt_fields(JsonFields::new())
            .with_writer(writer)
            .boxed(),
        // kubert's JSON: the span list, not the current span apart.
        (LogFormat::Json, LogDialect::Kubert) => fmt::layer()
            .event_format(
                fmt::format()
                    .json()
                    .with_span_list(true)
                    .with_current_span(false),
            )
            .fmt_fields(JsonFields::new())
            .with_writer(writer)
            .boxed(),
    }
}

/// What `format` writes in `dialect` for the events `emit` logs (at any
/// level).
#[cfg(test)]
pub(crate) fn capture(format: LogFormat, dialect: LogDialect, emit: impl FnOnce()) -> String {
    let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
    let writer = {
        let buf = buf.clone();
        move || Sink(buf.clone())
    };
    let subscriber = tracing_subscriber::registry()
        .with(EnvFilter::new("trace"))
        .with(fmt_layer(format, dialect, writer, false));
    tracing::subscriber::with_default(subscriber, emit);
    let bytes = buf.lock().map(|b| b.clone()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

#[cfg(test)]
/// A log writer into a shared buffer.
struct Sink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

#[cfg(test)]
impl std::io::Write for Sink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?
            .extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(level: &str) -> LogArgs {
        LogArgs {
            log_level: level.into(),
            log_format: LogFormat::Plain,
        }
    }

    /// The chart's values mean to Meridian what they mean to the original.
    #[test]
    fn the_charts_levels_name_meridians_crates() {
        let ours = |level: &str| {
            MERIDIAN_TARGETS
                .iter()
                .map(|t| format!("{t}={level}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        assert_eq!(
            linkerd_directives("linkerd=info,warn"),
            format!("{},warn", ours("info"))
        );
        assert_eq!(linkerd_directives("linkerd=debug"), ours("debug"));
        assert_eq!(
            linkerd_directives("warn,linkerd_policy_controller=trace,kube=info"),
            format!("warn,{},kube=info", ours("trace"))
        );
        // Directives for other targets, and bare levels, are kept.
        assert_eq!(linkerd_directives("info"), "info");
        assert_eq!(linkerd_directives("linkerdish=debug"), "linkerdish=debug");
        for level in [
            "linkerd=info,warn",
            "linkerd=debug",
            "linkerd[span]=debug,info",
        ] {
            let filter = args(level).directives();
            EnvFilter::try_new(&filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
        }
        // What each filter lets through, as the subscriber decides it.
        let logged = |level: &str| {
            let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::<u8>::new()));
            let writer = {
                let buf = buf.clone();
                move || Sink(buf.clone())
            };
            let subscriber = tracing_subscriber::registry()
                .with(EnvFilter::try_new(args(level).directives()).expect("filter"))
                .with(fmt::layer().with_writer(writer).with_ansi(false));
            tracing::subscriber::with_default(subscriber, || {
                tracing::info!(target: "policy_controller::index", "ours-info");
                tracing::debug!(target: "destination::grpc", "ours-debug");
                tracing::info!(target: "h2::proto", "h2-info");
                tracing::warn!(target: "h2::proto", "h2-warn");
            });
            let text = String::from_utf8(buf.lock().expect("lock").clone()).expect("utf8");
            ["ours-info", "ours-debug", "h2-info", "h2-warn"]
                .into_iter()
                .filter(|m| text.contains(m))
                .collect::<Vec<_>>()
        };
        assert_eq!(logged("linkerd=info,warn"), ["ours-info", "h2-warn"]);
        assert_eq!(logged("linkerd=debug"), ["ours-info", "ours-debug"]);
        let go_debug = crate::goflags::go_log_level("debug");
        assert_eq!(
            logged(&go_debug),
            ["ours-info", "ours-debug", "h2-info", "h2-warn"]
        );
        assert_eq!(logged("info"), ["ours-info", "h2-info", "h2-warn"]);
    }

    /// The lines `format` writes in `dialect` for three events, one inside
    /// a span.
    fn captured(format: LogFormat, dialect: LogDialect) -> String {
        capture(format, dialect, || {
            tracing::info!(target: "policy_controller::status", lease = "status", leader = true, "leadership changed");
            tracing::warn!(target: "destination::args", flag = "-enable-ipv6", msg = 3, "ignored");
            let span = tracing::info_span!("watch", kind = "Pod");
            let _entered = span.enter();
            tracing::error!(target: "k8s_index", error = %"gone", "watch failed");
        })
    }

    /// JSON lines carry logrus's keys and level names, the event's fields
    /// beside `msg`, and a clashing field under `fields.<name>`.
    #[test]
    fn json_lines_have_the_go_controllers_keys() {
        let text = captured(LogFormat::Json, LogDialect::Go);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        for line in &lines {
            let time = line["time"].as_str().expect("time");
            assert!(
                time.len() >= 20 && time.as_bytes()[10] == b'T' && time.ends_with('Z'),
                "RFC 3339: {time}"
            );
            assert!(line.get("timestamp").is_none() && line.get("message").is_none());
            assert!(
                line.get("fields").is_none(),
                "fields sit beside msg: {line}"
            );
        }
        assert_eq!(lines[0]["level"], "info");
        assert_eq!(lines[0]["msg"], "leadership changed");
        assert_eq!(lines[0]["lease"], "status");
        assert_eq!(lines[0]["leader"], true);
        assert_eq!(lines[0]["target"], "policy_controller::status");
        assert_eq!(lines[1]["level"], "warning");
        assert_eq!(lines[1]["msg"], "ignored");
        assert_eq!(lines[1]["flag"], "-enable-ipv6");
        assert_eq!(lines[1]["fields.msg"], 3);
        assert_eq!(lines[2]["level"], "error");
        assert_eq!(lines[2]["error"], "gone");
        assert_eq!(
            lines[2]["spans"],
            serde_json::json!([{"name": "watch", "kind": "Pod"}])
        );
    }

    /// The policy container's JSON lines are kubert's, as the original
    /// policy controller writes them: `tracing-subscriber`'s keys, the
    /// message and fields under `fields`, the open spans as a list.
    #[test]
    fn kubert_json_lines_have_the_policy_controllers_keys() {
        let text = captured(LogFormat::Json, LogDialect::Kubert);
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
            .collect();
        assert_eq!(lines.len(), 3, "{text}");
        for line in &lines {
            let time = line["timestamp"].as_str().expect("timestamp");
            assert!(
                time.len() >= 20 && time.as_bytes()[10] == b'T' && time.ends_with('Z'),
                "RFC 3339: {time}"
            );
            assert!(line.get("time").is_none() && line.get("msg").is_none());
            assert!(line.get("span").is_none(), "no current span apart: {line}");
        }
        assert_eq!(lines[0]["level"], "INFO");
        assert_eq!(lines[0]["fields"]["message"], "leadership changed");
        assert_eq!(lines[0]["fields"]["lease"], "status");
        assert_eq!(lines[0]["fields"]["leader"], true);
        assert_eq!(lines[0]["target"], "policy_controller::status");
        assert_eq!(lines[1]["level"], "WARN");
        assert_eq!(lines[1]["fields"]["flag"], "-enable-ipv6");
        assert_eq!(lines[2]["level"], "ERROR");
        assert_eq!(lines[2]["fields"]["error"], "gone");
        assert_eq!(
            lines[2]["spans"],
            serde_json::json!([{"name": "watch", "kind": "Pod"}])
        );
    }

    /// Plain lines stay readable: level, target, message, fields; the
    /// same in both dialects.
    #[test]
    fn plain_lines_stay_readable() {
        for dialect in [LogDialect::Go, LogDialect::Kubert] {
            let text = captured(LogFormat::Plain, dialect);
            let lines: Vec<&str> = text.lines().collect();
            assert_eq!(lines.len(), 3, "{text}");
            assert!(!text.contains("\"msg\""), "not JSON: {text}");
            assert!(
                lines[0].contains(
                    " INFO policy_controller::status: leadership changed lease=\"status\" leader=true"
                ),
                "{text}"
            );
            assert!(
                lines[1].contains(" WARN destination::args: ignored"),
                "{text}"
            );
            assert!(
                lines[2].contains("ERROR watch{kind=\"Pod\"}: k8s_index: watch failed error=gone"),
                "{text}"
            );
        }
    }

    #[test]
    fn kube_retry_logs_are_quiet_unless_asked_for() {
        assert_eq!(
            args("info").directives(),
            "info,kube_runtime::watcher=error,kube_client::client::builder=off,meridian_otel=off"
        );
        assert_eq!(
            args("kube_runtime=debug,kube_client=debug").directives(),
            "kube_runtime=debug,kube_client=debug,meridian_otel=off"
        );
        for level in ["info", "debug,kube=warn", "warn"] {
            EnvFilter::try_new(args(level).directives()).expect("a valid filter");
        }
    }
}
