//! The chart values Meridian handles differently, read from the
//! destination Deployment's container arguments: each controller
//! container's arguments are parsed as the Meridian binary parses them
//! (the Go flag tables `destination::runtime::GO_FLAGS` and
//! `sp_validator::args::GO_FLAGS`, the policy controller's clap flags), so
//! a flag accepted without effect, one that is refused (the container
//! would not start) and `-enable-endpoint-slices=false` (served by no
//! Meridian destination: it stays unready) are found exactly where the
//! binaries would find them.

use clap::Parser;
use meridian_runtime::{GoFlagKind, GoFlagSet, goflags::Normalised};

use super::Finding;

/// One controller container of the Deployment's pod template.
#[derive(Clone, Debug)]
pub struct ContainerArgs {
    pub container: String,
    pub args: Vec<String>,
}

/// Findings for the containers of Deployment `deployment` (`ns/name`).
pub fn findings(deployment: &str, containers: &[ContainerArgs]) -> Vec<Finding> {
    let mut out = Vec::new();
    let finding = |what: String, why: String| Finding {
        kind: "Deployment".into(),
        name: deployment.to_string(),
        what,
        why,
    };
    for c in containers {
        let parsed = match c.container.as_str() {
            "destination" => {
                go_flags::<destination::runtime::Args>(&destination::runtime::GO_FLAGS, &c.args)
            }
            "sp-validator" => {
                go_flags::<sp_validator::args::Args>(&sp_validator::args::GO_FLAGS, &c.args)
            }
            "policy" => policy_args(&c.args),
            _ => continue,
        };
        match parsed {
            Err(error) => out.push(finding(
                format!("{}: the container's arguments are refused", c.container),
                format!("Meridian's {} would not start: {error}", c.container),
            )),
            Ok(None) => {}
            Ok(Some((set, normalised))) => {
                for flag in &normalised.ignored {
                    if is_default(set, flag.name, &flag.value) {
                        continue;
                    }
                    out.push(finding(
                        format!(
                            "{}: -{}={} has no effect",
                            c.container, flag.name, flag.value
                        ),
                        flag.why.to_string(),
                    ));
                }
                // The last occurrence wins, as in Go.
                if normalised
                    .args
                    .iter()
                    .rev()
                    .filter_map(|a| a.to_str())
                    .find(|a| a.starts_with("--enable-endpoint-slices"))
                    .is_some_and(|a| a == "--enable-endpoint-slices=false")
                {
                    out.push(finding(
                        format!(
                            "{}: -enable-endpoint-slices=false is not served",
                            c.container
                        ),
                        "Meridian reads EndpointSlices only (chart value enableEndpointSlices: false); \
                         the destination stays unready, its /ready naming the value"
                            .into(),
                    ));
                }
            }
        }
    }
    out.sort();
    out
}

/// Parses `args` as the Meridian binary of `set` does: the flag set and
/// what normalising found, or the error the binary would exit with.
fn go_flags<P: Parser>(
    set: &'static GoFlagSet,
    args: &[String],
) -> Result<Option<(&'static GoFlagSet, Normalised)>, String> {
    let argv = std::iter::once(set.program.to_string()).chain(args.iter().cloned());
    set.try_parse::<P, _, _>(argv)
        .map(|(_, normalised)| Some((set, normalised)))
        .map_err(|e| first_line(&e.to_string()))
}

/// Parses `args` as Meridian's policy controller does (clap flags named
/// as the original's): `None`, as it ignores no flag, or its error.
fn policy_args(args: &[String]) -> Result<Option<(&'static GoFlagSet, Normalised)>, String> {
    let argv = std::iter::once("policy-controller").chain(args.iter().map(String::as_str));
    policy_controller::args::Args::try_parse_from(argv)
        .map(|_| None)
        .map_err(|e| first_line(&e.to_string()))
}

/// An ignored flag at its Go default (`false`, empty) changes nothing.
fn is_default(set: &GoFlagSet, name: &str, value: &str) -> bool {
    let kind = set.flags.iter().find(|f| f.name == name).map(|f| f.kind);
    match kind {
        Some(GoFlagKind::Bool) => value == "false",
        _ => value.is_empty(),
    }
}

fn first_line(text: &str) -> String {
    text.lines().next().unwrap_or_default().trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn container(name: &str, args: &[&str]) -> ContainerArgs {
        ContainerArgs {
            container: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn the_charts_defaults_change_nothing() {
        let found = findings(
            "linkerd/linkerd-destination",
            &[
                container(
                    "destination",
                    &[
                        "destination",
                        "-addr=:8086",
                        "-enable-pprof=false",
                        "-enable-endpoint-slices=true",
                    ],
                ),
                container(
                    "sp-validator",
                    &["sp-validator", "-log-level=info", "-enable-pprof=false"],
                ),
                container(
                    "policy",
                    &[
                        "--admin-addr=0.0.0.0:9990",
                        "--cluster-domain=cluster.local",
                    ],
                ),
            ],
        );
        assert!(found.is_empty(), "{found:?}");
    }

    #[test]
    fn ignored_refused_and_endpoint_slices_off_are_found() {
        let found = findings(
            "linkerd/linkerd-destination",
            &[
                container(
                    "destination",
                    &[
                        "destination",
                        "-enable-pprof",
                        "-trace-collector=otel:4317",
                        "-enable-endpoint-slices=false",
                    ],
                ),
                container(
                    "sp-validator",
                    &["sp-validator", "-kubeconfig=/etc/kubeconfig"],
                ),
                container("policy", &["--no-such-flag=1"]),
            ],
        );
        let whats: Vec<&str> = found.iter().map(|f| f.what.as_str()).collect();
        // Profiling and tracing are served: only what is not is found.
        assert_eq!(
            whats,
            [
                "destination: -enable-endpoint-slices=false is not served",
                "policy: the container's arguments are refused",
                "sp-validator: -kubeconfig=/etc/kubeconfig has no effect",
            ],
            "{found:?}"
        );
        assert!(found[1].why.contains("no-such-flag"), "{found:?}");
    }
}
