//! Structured logging flags (`--log-level`, `--log-format plain|json`) and
//! their installation as the global `tracing` subscriber.

use clap::{Args, ValueEnum};
use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// How log lines are rendered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    #[default]
    Plain,
    /// One JSON object per line, for log pipelines.
    Json,
}

/// Logging flags shared by every binary.
#[derive(Clone, Debug, Args)]
pub struct LogArgs {
    /// Log filter: a level (`info`) or `tracing` directives (`info,kube=warn`).
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
    /// Installs the global subscriber. Call once, early in `main`.
    pub fn init(&self) -> Result<(), LogError> {
        let filter = EnvFilter::try_new(self.directives()).map_err(|source| LogError::Filter {
            value: self.log_level.clone(),
            source,
        })?;
        let registry = tracing_subscriber::registry().with(filter);
        let installed = match self.log_format {
            LogFormat::Plain => registry
                .with(
                    fmt::layer()
                        .with_target(true)
                        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout())),
                )
                .try_init(),
            LogFormat::Json => registry
                .with(
                    fmt::layer()
                        .json()
                        .flatten_event(true)
                        .with_current_span(false),
                )
                .try_init(),
        };
        installed.map_err(|_| LogError::AlreadyInstalled)
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
        let mut directives = self.log_level.clone();
        if !self.log_level.contains("kube_runtime") {
            directives.push_str(",kube_runtime::watcher=error");
        }
        if !self.log_level.contains("kube_client") {
            directives.push_str(",kube_client::client::builder=off");
        }
        directives
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

    #[test]
    fn kube_retry_logs_are_quiet_unless_asked_for() {
        assert_eq!(
            args("info").directives(),
            "info,kube_runtime::watcher=error,kube_client::client::builder=off"
        );
        assert_eq!(
            args("kube_runtime=debug,kube_client=debug").directives(),
            "kube_runtime=debug,kube_client=debug"
        );
        for level in ["info", "debug,kube=warn", "warn"] {
            EnvFilter::try_new(args(level).directives()).expect("a valid filter");
        }
    }
}
