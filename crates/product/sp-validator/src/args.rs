//! Command-line flags of `sp-validator`: Meridian's GNU-style ones and the
//! original's Go-style ones ([`GO_FLAGS`]), so the Linkerd 2.20 chart's
//! `sp-validator -log-level=info -log-format=plain -enable-pprof=false`
//! starts it unchanged. Defaults are the original's: webhook on `:8443`,
//! admin on `:9997`, certificate and key at `/var/run/linkerd/tls/tls.{crt,key}`.

use std::{net::SocketAddr, path::PathBuf};

use clap::Parser;
use meridian_runtime::{
    GoFlag, GoFlagKind, GoFlagMeaning, GoFlagSet, LogArgs, goflags::LOG_FLAGS, parse_listen_addr,
};

/// Flags of `sp-validator`.
#[derive(Clone, Debug, Parser)]
#[command(
    name = "sp-validator",
    version,
    about = "Validates linkerd.io ServiceProfiles on admission"
)]
pub struct Args {
    /// Address of the HTTPS webhook server: `:PORT`, `HOST:PORT` or `[IPV6]:PORT`.
    #[arg(long, default_value = ":8443", value_parser = parse_listen_addr)]
    pub addr: SocketAddr,

    /// Address of the admin server (/live, /ready, /ping, /metrics); the original's `-metrics-addr`.
    #[arg(long, alias = "metrics-addr", default_value = ":9997", value_parser = parse_listen_addr)]
    pub admin_addr: SocketAddr,

    /// PEM certificate chain served by the webhook.
    #[arg(long, default_value = "/var/run/linkerd/tls/tls.crt")]
    pub tls_cert: PathBuf,

    /// PEM private key of the certificate.
    #[arg(long, default_value = "/var/run/linkerd/tls/tls.key")]
    pub tls_key: PathBuf,

    /// Serve CPU and heap profiles on the admin server (`/debug/pprof/`,
    /// pprof format; the chart's `enablePprof`; docs/profiling.md).
    #[arg(long, action = clap::ArgAction::Set, default_value_t = false)]
    pub enable_pprof: bool,

    #[command(flatten)]
    pub log: LogArgs,
}

/// The original sp-validator's flags (`controller/cmd/sp-validator` and
/// `pkg/flags` of Linkerd 2.20).
pub const GO_FLAGS: GoFlagSet = GoFlagSet {
    program: "sp-validator",
    flags: &[
        GoFlag::same("addr", GoFlagKind::Value),
        GoFlag {
            name: "metrics-addr",
            kind: GoFlagKind::Value,
            meaning: GoFlagMeaning::Rename("admin-addr"),
        },
        GoFlag::ignored(
            "kubeconfig",
            GoFlagKind::Value,
            "Meridian's sp-validator never calls the Kubernetes API",
        ),
        GoFlag::same("enable-pprof", GoFlagKind::Bool),
        GoFlag {
            name: "version",
            kind: GoFlagKind::Bool,
            meaning: GoFlagMeaning::Switch("version"),
        },
        LOG_FLAGS[0],
        LOG_FLAGS[1],
    ],
};

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> (Args, meridian_runtime::goflags::Normalised) {
        GO_FLAGS
            .try_parse::<Args, _, _>(args.iter().copied())
            .unwrap_or_else(|e| panic!("{args:?}: {e}"))
    }

    /// The container args of the chart's `sp-validator` container (Linkerd 2.20).
    #[test]
    fn chart_args_parse_with_the_original_defaults() {
        for line in [
            &[
                "sp-validator",
                "sp-validator",
                "-log-level=info",
                "-log-format=plain",
                "-enable-pprof=false",
            ][..],
            &[
                "/controller",
                "sp-validator",
                "-log-level=info",
                "-log-format=plain",
                "-enable-pprof=false",
            ],
            &[
                "sp-validator",
                "-log-level=debug",
                "-log-format=json",
                "-enable-pprof=true",
            ],
        ] {
            let (args, normalised) = parse(line);
            assert_eq!(args.addr.port(), 8443);
            assert!(args.addr.ip().is_unspecified());
            assert_eq!(args.admin_addr.port(), 9997);
            assert!(args.admin_addr.ip().is_unspecified());
            assert_eq!(args.tls_cert, PathBuf::from("/var/run/linkerd/tls/tls.crt"));
            assert_eq!(args.tls_key, PathBuf::from("/var/run/linkerd/tls/tls.key"));
            assert!(normalised.ignored.is_empty(), "{line:?}");
            assert_eq!(args.enable_pprof, line.contains(&"-enable-pprof=true"));
        }
    }

    #[test]
    fn deploy_args_parse() {
        let line = test_support::deploy::destination_pod_command("sp-validator");
        assert_eq!(
            line,
            [
                "sp-validator",
                "-log-level=info",
                "-log-format=plain",
                "-enable-pprof=false"
            ]
        );
        let (args, _) = GO_FLAGS
            .try_parse::<Args, _, _>(line.iter().cloned())
            .unwrap_or_else(|e| panic!("{line:?}: {e}"));
        assert_eq!((args.addr.port(), args.admin_addr.port()), (8443, 9997));
    }

    #[test]
    fn every_flag_of_the_original_and_meridian_s_own() {
        let (args, normalised) = parse(&[
            "sp-validator",
            "-addr=127.0.0.1:18443",
            "-metrics-addr",
            ":19997",
            "-kubeconfig=",
            "--tls-cert=/tmp/c.pem",
            "-tls-key=/tmp/k.pem",
            "-version=false",
        ]);
        assert_eq!(args.addr, "127.0.0.1:18443".parse().expect("addr"));
        assert_eq!(args.admin_addr.port(), 19997);
        assert_eq!(args.tls_cert, PathBuf::from("/tmp/c.pem"));
        assert_eq!(args.tls_key, PathBuf::from("/tmp/k.pem"));
        assert_eq!(normalised.ignored[0].name, "kubeconfig");
        let (args, _) = parse(&[
            "sp-validator",
            "--addr",
            "[::1]:8443",
            "--admin-addr=[::]:9997",
        ]);
        assert_eq!(args.addr, "[::1]:8443".parse().expect("addr"));
        assert_eq!(args.admin_addr, "[::]:9997".parse().expect("addr"));
        let err = GO_FLAGS
            .try_parse::<Args, _, _>(["sp-validator", "-cluster-domain=x"])
            .expect_err("a destination flag");
        assert!(
            err.to_string()
                .contains("flag provided but not defined: -cluster-domain"),
            "{err}"
        );
    }
}
