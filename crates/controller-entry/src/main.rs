//! `/controller SUBCOMMAND ARGS…`: the entry point of the Meridian image.
//!
//! Linkerd's chart starts its controller image as `destination -addr=…` and
//! `sp-validator -log-level=…`, the first argument naming a subcommand of
//! Linkerd's Go `/controller`. Meridian ships each as its own binary; this
//! replaces itself (`execv`) with `<dir>/destination` or `<dir>/sp-validator`,
//! `<dir>` being the directory of this executable (`/` in the image), passing
//! the remaining arguments unchanged. Other subcommands of the Go controller
//! (`identity`, `proxy-injector`, …) are not part of Meridian and are refused.

use std::{os::unix::process::CommandExt as _, path::PathBuf, process::ExitCode};

/// Subcommands this image serves, each a binary beside this one.
const SUBCOMMANDS: &[&str] = &["destination", "sp-validator"];

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    let Some(subcommand) = args.next() else {
        eprintln!("usage: controller <{}> [ARGS…]", SUBCOMMANDS.join("|"));
        return ExitCode::from(2);
    };
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
