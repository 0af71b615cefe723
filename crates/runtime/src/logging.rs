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
        let filter = EnvFilter::try_new(&self.log_level).map_err(|source| LogError::Filter {
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
}
