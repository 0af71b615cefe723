//! Go `flag`-style command lines, rewritten for clap before parsing.
//!
//! Linkerd's Helm chart starts its Go controllers with single-dash flags
//! (`-addr=:8086`, `-enable-h2-upgrade=true`, `-enable-pprof`), which clap
//! would read as bundles of short options. A binary that must start from
//! those manifests unchanged describes the Go flags it accepts in a
//! [`GoFlagSet`]; [`GoFlagSet::normalise`] turns the command line into the
//! GNU form of the binary's own clap flags:
//!
//! - `-name=value`, `-name value`, `--name=value` and `--name value`, as Go's
//!   `flag` package reads them;
//! - booleans as `-flag` (true) or `-flag=VALUE` with Go's `strconv.ParseBool`
//!   spellings (`1 t T TRUE true True 0 f F FALSE false False`); a boolean
//!   never takes the next argument;
//! - a Go flag with a Meridian meaning is renamed (and its value translated
//!   if needed); a Go flag Meridian has no use for is accepted and reported
//!   in [`Normalised::ignored`], to be warned of once at start-up;
//! - Meridian's own clap flags keep working, with one or two dashes;
//! - a flag in neither set is an error naming it, as Go's
//!   `flag provided but not defined: -name`;
//! - a first argument equal to the program name is dropped, so both
//!   `destination -addr=:8086` (the chart's subcommand form, for an image
//!   whose entrypoint is a multiplexer) and `-addr=:8086` work.

use std::ffi::OsString;

use std::collections::HashMap;

/// Whether a Go flag takes a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A string, number or list: `-name=value` or `-name value`.
    Value,
    /// A boolean: `-name` or `-name=true|false`.
    Bool,
}

/// What a Go flag means to Meridian.
#[derive(Clone, Copy, Debug)]
pub enum Meaning {
    /// The clap flag of the same long name.
    Same,
    /// The clap flag with this long name.
    Rename(&'static str),
    /// The clap flag with this long name, the value translated.
    Map(&'static str, fn(&str) -> String),
    /// A clap switch (no value) given when the Go boolean is true.
    Switch(&'static str),
    /// Accepted and logged once; the text says why it has no effect.
    Ignored(&'static str),
}

/// One flag of the original Go program.
#[derive(Clone, Copy, Debug)]
pub struct GoFlag {
    /// Its name, without dashes.
    pub name: &'static str,
    /// Whether it takes a value.
    pub kind: Kind,
    /// What it becomes.
    pub meaning: Meaning,
}

impl GoFlag {
    /// A flag with the same name and meaning in Meridian.
    pub const fn same(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            kind,
            meaning: Meaning::Same,
        }
    }

    /// A flag Meridian has no use for.
    pub const fn ignored(name: &'static str, kind: Kind, why: &'static str) -> Self {
        Self {
            name,
            kind,
            meaning: Meaning::Ignored(why),
        }
    }
}

/// The Go flags a binary accepts besides its clap flags.
#[derive(Clone, Copy, Debug)]
pub struct GoFlagSet {
    /// The program (and subcommand) name, e.g. `destination`.
    pub program: &'static str,
    /// The flags.
    pub flags: &'static [GoFlag],
}

/// A Go flag that was accepted without effect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoredFlag {
    /// The flag's name.
    pub name: &'static str,
    /// Its value as given (`true` for a bare boolean).
    pub value: String,
    /// Why it has no effect.
    pub why: &'static str,
}

/// A command line in clap's form.
#[derive(Clone, Debug, Default)]
pub struct Normalised {
    /// Program name first, then GNU-style arguments.
    pub args: Vec<OsString>,
    /// Go flags accepted without effect, in command-line order.
    pub ignored: Vec<IgnoredFlag>,
}

impl Normalised {
    /// Warns of each ignored flag once, naming it (with its last value,
    /// the one Go's `flag` keeps). Call after the subscriber is installed.
    pub fn log_ignored(&self) {
        let mut seen = std::collections::HashSet::new();
        for first in &self.ignored {
            if !seen.insert(first.name) {
                continue;
            }
            let flag = self
                .ignored
                .iter()
                .rfind(|f| f.name == first.name)
                .unwrap_or(first);
            tracing::warn!(
                flag = %format!("-{}={}", flag.name, flag.value),
                "-{} is accepted for compatibility and has no effect: {}",
                flag.name,
                flag.why
            );
        }
    }
}

/// A command line that cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GoFlagError {
    /// Neither a Go flag of the original nor a flag of this binary.
    #[error("flag provided but not defined: -{0}")]
    Unknown(String),
    /// A value flag at the end of the command line.
    #[error("flag needs an argument: -{0}")]
    MissingValue(String),
    /// A boolean value Go's `strconv.ParseBool` refuses.
    #[error("invalid boolean value {value:?} for -{name}: use true or false")]
    Bool {
        /// The flag.
        name: String,
        /// The value given.
        value: String,
    },
    /// An argument that is not UTF-8.
    #[error("argument {0:?} is not valid UTF-8")]
    NotUnicode(OsString),
}

/// Go's `strconv.ParseBool`.
pub fn parse_go_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// `-log-level` of the Go controllers (a logrus level, as the chart's
/// `controllerLogLevel` passes it) as the `tracing` filter meaning the
/// same to an operator: `panic` and `fatal` are `error`, `warning` is
/// `warn`; `debug` is Meridian's own logs at `debug` and the Kubernetes
/// client's too (the Go controllers then turn client-go's request logging
/// on, klog `-v=6`), other libraries (HTTP/2, TLS) staying at `info`;
/// `trace` is everything. Anything else (Meridian's filter directives
/// included) is kept.
pub fn go_log_level(value: &str) -> String {
    match value.to_ascii_lowercase().as_str() {
        "panic" | "fatal" => "error".to_string(),
        "warning" => "warn".to_string(),
        "debug" => {
            let ours = crate::logging::MERIDIAN_TARGETS
                .iter()
                .map(|t| format!(",{t}=debug"))
                .collect::<String>();
            format!("info{ours},kube_client=debug,kube_runtime=debug")
        }
        "error" | "warn" | "info" | "trace" => value.to_ascii_lowercase(),
        _ => value.to_string(),
    }
}

/// `-log-format` of the Go controllers: `json`, and plain for anything else.
pub fn go_log_format(value: &str) -> String {
    if value == "json" { "json" } else { "plain" }.to_string()
}

/// The flags [`crate::LogArgs`] gives every Go-style binary: `-log-level`
/// and `-log-format` with the Go values translated.
pub const LOG_FLAGS: [GoFlag; 2] = [
    GoFlag {
        name: "log-level",
        kind: Kind::Value,
        meaning: Meaning::Map("log-level", go_log_level),
    },
    GoFlag {
        name: "log-format",
        kind: Kind::Value,
        meaning: Meaning::Map("log-format", go_log_format),
    },
];

impl GoFlagSet {
    fn find(&self, name: &str) -> Option<&GoFlag> {
        self.flags.iter().find(|f| f.name == name)
    }

    /// Rewrites `args` (program name first) for `command`.
    pub fn normalise<I, T>(
        &self,
        command: &clap::Command,
        args: I,
    ) -> Result<Normalised, GoFlagError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let mut command = command.clone();
        command.build();
        // Long names and aliases of the binary's own flags.
        let clap_longs: Vec<String> = command
            .get_arguments()
            .flat_map(|a| {
                a.get_long()
                    .into_iter()
                    .chain(a.get_all_aliases().unwrap_or_default())
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            })
            .collect();

        let mut args = args.into_iter().map(Into::into);
        let mut out = Normalised::default();
        out.args
            .push(args.next().unwrap_or_else(|| self.program.into()));
        let mut args = args.peekable();
        // As in Go, the last occurrence of a flag wins: where each clap
        // flag a Go flag became was put.
        let mut placed: HashMap<&'static str, usize> = HashMap::new();
        let mut place =
            |out: &mut Normalised, long: &'static str, arg: String| match placed.get(long) {
                Some(&at) => out.args[at] = arg.into(),
                None => {
                    placed.insert(long, out.args.len());
                    out.args.push(arg.into());
                }
            };
        if args.peek().is_some_and(|a| a == self.program) {
            args.next();
        }

        while let Some(arg) = args.next() {
            let text = arg
                .to_str()
                .ok_or_else(|| GoFlagError::NotUnicode(arg.clone()))?
                .to_string();
            if text == "--" {
                out.args.push(arg);
                out.args.extend(args);
                break;
            }
            let body = match text.strip_prefix("--").or_else(|| text.strip_prefix('-')) {
                Some(body) if !body.is_empty() => body,
                // Positionals and a lone `-` are clap's to judge.
                _ => {
                    out.args.push(arg);
                    continue;
                }
            };
            let double = text.starts_with("--");
            let (name, inline) = match body.split_once('=') {
                Some((name, value)) => (name, Some(value.to_string())),
                None => (body, None),
            };

            if let Some(flag) = self.find(name) {
                let value = match flag.kind {
                    Kind::Bool => {
                        let raw = inline.unwrap_or_else(|| "true".to_string());
                        let value = parse_go_bool(&raw).ok_or_else(|| GoFlagError::Bool {
                            name: name.to_string(),
                            value: raw,
                        })?;
                        value.to_string()
                    }
                    Kind::Value => match inline {
                        Some(value) => value,
                        None => {
                            let next = args
                                .next()
                                .ok_or_else(|| GoFlagError::MissingValue(name.to_string()))?;
                            next.to_str()
                                .ok_or_else(|| GoFlagError::NotUnicode(next.clone()))?
                                .to_string()
                        }
                    },
                };
                match flag.meaning {
                    Meaning::Same => place(&mut out, flag.name, format!("--{name}={value}")),
                    Meaning::Rename(long) => place(&mut out, long, format!("--{long}={value}")),
                    Meaning::Map(long, map) => {
                        place(&mut out, long, format!("--{long}={}", map(&value)))
                    }
                    Meaning::Switch(long) => {
                        if value == "true" {
                            place(&mut out, long, format!("--{long}"));
                        }
                    }
                    Meaning::Ignored(why) => out.ignored.push(IgnoredFlag {
                        name: flag.name,
                        value,
                        why,
                    }),
                }
                continue;
            }

            // Single-letter options (`-h`, `-V`) and double-dash flags go
            // to clap as given; clap's errors name unknown ones.
            if double || name.chars().count() == 1 {
                out.args.push(arg);
                continue;
            }
            if clap_longs.iter().any(|n| n == name) {
                out.args.push(format!("-{text}").into());
                continue;
            }
            return Err(GoFlagError::Unknown(name.to_string()));
        }
        Ok(out)
    }

    /// Normalises and parses `args` into `P`; errors are clap errors (with
    /// usage), ready for [`clap::Error::exit`].
    pub fn try_parse<P, I, T>(&self, args: I) -> Result<(P, Normalised), clap::Error>
    where
        P: clap::Parser,
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let mut command = P::command();
        let normalised = self
            .normalise(&command, args)
            .map_err(|e| command.error(clap::error::ErrorKind::UnknownArgument, e))?;
        let mut matches = command.try_get_matches_from_mut(normalised.args.clone())?;
        let parsed = P::from_arg_matches_mut(&mut matches).map_err(|e| e.format(&mut command))?;
        Ok((parsed, normalised))
    }

    /// [`Self::try_parse`] of the process's arguments; prints the error
    /// (or `--help`) and exits as clap does.
    pub fn parse<P: clap::Parser>(&self) -> (P, Normalised) {
        self.try_parse(std::env::args_os())
            .unwrap_or_else(|error| error.exit())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    #[command(name = "demo", version)]
    struct Demo {
        #[arg(long, default_value = ":1")]
        addr: String,
        #[arg(long, alias = "metrics-addr", default_value = ":2")]
        admin_addr: String,
        #[arg(long, action = clap::ArgAction::Set, default_value_t = true)]
        enable_thing: bool,
        #[arg(long, default_value = "info")]
        log_level: String,
        #[arg(long, default_value = "plain")]
        log_format: String,
        #[arg(long)]
        meridian_only: Option<String>,
        #[arg(long)]
        quiet: bool,
        #[arg(long, default_value_t = 100)]
        capacity: u32,
    }

    const FLAGS: GoFlagSet = GoFlagSet {
        program: "demo",
        flags: &[
            GoFlag::same("addr", Kind::Value),
            GoFlag {
                name: "metrics-addr",
                kind: Kind::Value,
                meaning: Meaning::Rename("admin-addr"),
            },
            GoFlag::same("enable-thing", Kind::Bool),
            GoFlag {
                name: "old-thing",
                kind: Kind::Bool,
                meaning: Meaning::Rename("enable-thing"),
            },
            GoFlag::same("capacity", Kind::Value),
            GoFlag::ignored("enable-legacy", Kind::Bool, "no legacy"),
            GoFlag::ignored("legacy-collector", Kind::Value, "no collector"),
            GoFlag {
                name: "version",
                kind: Kind::Bool,
                meaning: Meaning::Switch("version"),
            },
            LOG_FLAGS[0],
            LOG_FLAGS[1],
        ],
    };

    fn parse(args: &[&str]) -> Result<(Demo, Normalised), clap::Error> {
        FLAGS.try_parse(std::iter::once("demo").chain(args.iter().copied()))
    }

    fn ok(args: &[&str]) -> (Demo, Normalised) {
        parse(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    #[test]
    fn go_forms_of_value_flags() {
        for args in [
            &["-addr=:8086"][..],
            &["-addr", ":8086"],
            &["--addr=:8086"],
            &["--addr", ":8086"],
            &["demo", "-addr=:8086"],
        ] {
            assert_eq!(ok(args).0.addr, ":8086", "{args:?}");
        }
        // A value may start with a dash.
        assert_eq!(ok(&["-addr", "-x"]).0.addr, "-x");
        assert_eq!(ok(&["-metrics-addr=:9996"]).0.admin_addr, ":9996");
        assert_eq!(ok(&["--metrics-addr", ":9996"]).0.admin_addr, ":9996");
        assert_eq!(ok(&["-capacity=7"]).0.capacity, 7);
    }

    #[test]
    fn the_last_occurrence_wins() {
        assert_eq!(ok(&["-addr=:1", "--addr", ":2", "-addr=:3"]).0.addr, ":3");
        assert_eq!(
            ok(&["-metrics-addr=:1", "-metrics-addr=:4"]).0.admin_addr,
            ":4"
        );
    }

    #[test]
    fn go_booleans() {
        assert!(ok(&[]).0.enable_thing);
        for (args, want) in [
            (&["-enable-thing=false"][..], false),
            (&["-enable-thing=true"], true),
            (&["-enable-thing"], true),
            (&["--enable-thing=0"], false),
            (&["-enable-thing=F"], false),
            (&["-enable-thing=T"], true),
            (&["-old-thing=False"], false),
            (&["-enable-thing=false", "-enable-thing"], true),
        ] {
            assert_eq!(ok(args).0.enable_thing, want, "{args:?}");
        }
        let err = parse(&["-enable-thing=yes"]).expect_err("yes is not a Go bool");
        assert!(
            err.to_string().contains("invalid boolean value \"yes\""),
            "{err}"
        );
        // A boolean never takes the next argument.
        let err = parse(&["-enable-thing", "false"]).expect_err("positional");
        assert!(err.to_string().contains("false"), "{err}");
    }

    #[test]
    fn ignored_flags_are_reported_not_refused() {
        let (_, n) = ok(&[
            "-enable-legacy=false",
            "-legacy-collector",
            "oc:55678",
            "-enable-legacy",
        ]);
        assert_eq!(
            n.ignored,
            vec![
                IgnoredFlag {
                    name: "enable-legacy",
                    value: "false".into(),
                    why: "no legacy"
                },
                IgnoredFlag {
                    name: "legacy-collector",
                    value: "oc:55678".into(),
                    why: "no collector"
                },
                IgnoredFlag {
                    name: "enable-legacy",
                    value: "true".into(),
                    why: "no legacy"
                },
            ]
        );
        assert_eq!(n.args, vec![OsString::from("demo")]);
    }

    /// Each ignored flag is one WARN line naming it, however often given.
    #[test]
    fn ignored_flags_are_warned_of_once() {
        let (_, n) = ok(&[
            "-enable-legacy=false",
            "-legacy-collector=oc:1",
            "-enable-legacy",
        ]);
        let text = crate::logging::capture(
            crate::logging::LogFormat::Plain,
            crate::logging::LogDialect::Go,
            || n.log_ignored(),
        );
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines.iter().all(|l| l.contains(" WARN ")), "{text}");
        assert!(
            lines[1].contains("-legacy-collector is accepted for compatibility")
                && lines[1].contains("flag=-legacy-collector=oc:1"),
            "{text}"
        );
        assert!(
            lines[0].contains("-enable-legacy is accepted")
                && lines[0].contains("flag=-enable-legacy=true"),
            "{text}"
        );
    }

    #[test]
    fn log_values_are_translated() {
        let (d, _) = ok(&["-log-level=fatal", "-log-format=text"]);
        assert_eq!(
            (d.log_level.as_str(), d.log_format.as_str()),
            ("error", "plain")
        );
        let (d, _) = ok(&["-log-level", "warning", "--log-format=json"]);
        assert_eq!(
            (d.log_level.as_str(), d.log_format.as_str()),
            ("warn", "json")
        );
        assert_eq!(
            ok(&["--log-level=info,kube=warn"]).0.log_level,
            "info,kube=warn"
        );
    }

    #[test]
    fn meridian_flags_keep_working_with_either_dash() {
        let (d, _) = ok(&["--meridian-only=x", "--quiet"]);
        assert_eq!(d.meridian_only.as_deref(), Some("x"));
        assert!(d.quiet);
        let (d, _) = ok(&["-meridian-only", "y", "-quiet"]);
        assert_eq!(d.meridian_only.as_deref(), Some("y"));
        assert!(d.quiet);
        assert_eq!(ok(&["-admin-addr=:5"]).0.admin_addr, ":5");
    }

    #[test]
    fn unknown_flags_are_named() {
        let err = parse(&["-no-such-flag=1"]).expect_err("unknown");
        assert!(
            err.to_string()
                .contains("flag provided but not defined: -no-such-flag"),
            "{err}"
        );
        let err = parse(&["--no-such-flag"]).expect_err("unknown");
        assert!(err.to_string().contains("--no-such-flag"), "{err}");
        let err = parse(&["-addr"]).expect_err("missing value");
        assert!(
            err.to_string().contains("flag needs an argument: -addr"),
            "{err}"
        );
    }

    #[test]
    fn help_and_version() {
        let err = parse(&["-help"]).expect_err("help exits");
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
        let err = parse(&["-h"]).expect_err("help exits");
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayHelp);
        let err = parse(&["-version"]).expect_err("version exits");
        assert_eq!(err.kind(), clap::error::ErrorKind::DisplayVersion);
        ok(&["-version=false"]);
    }

    #[test]
    fn after_double_dash_everything_is_clap_s() {
        let err = parse(&["--", "-addr=:1"]).expect_err("positional");
        assert!(err.to_string().contains("-addr=:1"), "{err}");
    }
}
