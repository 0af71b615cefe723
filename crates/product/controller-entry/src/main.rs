//! `/controller SUBCOMMAND ARGS…`: the entry point of the Meridian image.
//!
//! Linkerd's chart starts its controller image as `destination -addr=…` and
//! `sp-validator -log-level=…`, the first argument naming a subcommand of
//! Linkerd's Go `/controller`. Meridian ships each as its own binary; this
//! replaces itself (`execv`) with `<dir>/destination` or `<dir>/sp-validator`,
//! `<dir>` being the directory of this executable (`/` in the image), passing
//! the remaining arguments unchanged. Other subcommands of the Go controller
//! (`identity`, `proxy-injector`, `heartbeat`, `service-mirror`) are not
//! part of Meridian and are refused with a message that says why: the only
//! way they reach this image is the chart's `controllerImage` value, which
//! also sets the image of the identity, proxy-injector and heartbeat
//! workloads. Meridian replaces the destination pod's images only.

use std::{os::unix::process::CommandExt as _, path::PathBuf, process::ExitCode};

/// Subcommands this image serves, each a binary beside this one.
const SUBCOMMANDS: &[&str] = &["destination", "sp-validator"];

/// Subcommands of Linkerd's Go `/controller` that other workloads of the
/// chart run from the same `controllerImage`.
const OTHER_LINKERD_SUBCOMMANDS: &[&str] =
    &["identity", "proxy-injector", "heartbeat", "service-mirror"];

/// Why a subcommand of Linkerd's controller that Meridian does not provide
/// reached this image.
fn not_meridian(subcommand: &str) -> String {
    format!(
        "controller: `{subcommand}` is a Linkerd component that Meridian does not replace. \
         This Meridian image was started as Linkerd's controller image for another workload, \
         which happens when the Helm value `controllerImage` (or `linkerd install/upgrade \
         --set controllerImage=…`) points at it: that value also sets the image of \
         linkerd-identity, linkerd-proxy-injector and the heartbeat CronJob. Never set \
         `controllerImage` to Meridian; put it back to Linkerd's controller image and change \
         only the images of the destination, sp-validator and policy containers of \
         deploy/linkerd-destination (see deploy/swap/ in the Meridian repository)."
    )
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(subcommand) = args.next() else {
        eprintln!("usage: controller <{}> [ARGS…]", SUBCOMMANDS.join("|"));
        return ExitCode::from(2);
    };
    if let Some(other) = subcommand
        .to_str()
        .filter(|name| OTHER_LINKERD_SUBCOMMANDS.contains(name))
    {
        eprintln!("{}", not_meridian(other));
        return ExitCode::from(2);
    }
    let Some(name) = subcommand
        .to_str()
        .filter(|name| SUBCOMMANDS.contains(name))
    else {
        eprintln!(
            "controller: unknown subcommand {subcommand:?}; this image serves {} (the policy controller is /linkerd-policy-controller)",
            SUBCOMMANDS.join(", ")
        );
        return ExitCode::from(2);
    };
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from("/"));
    let program = dir.join(name);
    // `exec` only returns on failure.
    let error = std::process::Command::new(&program)
        .arg0(name)
        .args(args)
        .exec();
    eprintln!("controller: cannot run {}: {error}", program.display());
    ExitCode::from(127)
}
