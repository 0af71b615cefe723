//! What `/controller` says when the chart's `controllerImage` value made
//! another Linkerd workload start the Meridian image.

use std::process::Command;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_controller"))
        .args(args)
        .output()
        .expect("run controller");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The identity, proxy-injector and heartbeat workloads run the same
/// image when `controllerImage` is set: each is refused with a message
/// naming the value and what to do instead.
#[test]
fn other_linkerd_subcommands_name_the_controller_image_value() {
    for subcommand in ["identity", "proxy-injector", "heartbeat", "service-mirror"] {
        let (code, stderr) = run(&[subcommand, "-log-level=info"]);
        assert_eq!(code, Some(2), "{subcommand}: {stderr}");
        for needle in [
            &format!("`{subcommand}` is a Linkerd component that Meridian does not replace"),
            "`controllerImage`",
            "linkerd-identity, linkerd-proxy-injector and the heartbeat CronJob",
            "Never set `controllerImage` to Meridian",
            "destination, sp-validator and policy containers",
        ] {
            assert!(
                stderr.contains(needle),
                "{subcommand}: {needle:?} not in {stderr}"
            );
        }
    }
}

#[test]
fn unknown_subcommands_and_none_are_usage_errors() {
    let (code, stderr) = run(&["frobnicate"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("unknown subcommand \"frobnicate\""),
        "{stderr}"
    );
    let (code, stderr) = run(&[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.starts_with("usage: controller <destination|sp-validator>"),
        "{stderr}"
    );
}
