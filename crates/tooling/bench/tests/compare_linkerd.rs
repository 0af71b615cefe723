//! `meridian-bench compare-linkerd` without Linkerd's binaries: it says
//! SKIP, with the reason, and succeeds (CI has no Linkerd build).

use std::process::Command;

fn bench() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_meridian-bench"));
    cmd.env_remove("MERIDIAN_LINKERD_BIN").args([
        "compare-linkerd",
        "--destination-bin=/nonexistent/destination",
        "--policy-bin=/nonexistent/policy-controller",
    ]);
    cmd
}

#[test]
fn without_linkerd_bin_it_skips_visibly() {
    let out = bench().output().expect("meridian-bench runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.starts_with("SKIP compare-linkerd: no --linkerd-bin"),
        "{stdout}"
    );
}

#[test]
fn a_dir_without_the_binaries_is_named_in_the_skip() {
    let dir = std::env::temp_dir().join(format!("compare-linkerd-empty-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("controller"), b"").expect("a controller file");
    let out = bench()
        .arg(format!("--linkerd-bin={}", dir.display()))
        .output()
        .expect("meridian-bench runs");
    let _ = std::fs::remove_dir_all(&dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.starts_with("SKIP compare-linkerd: "), "{stdout}");
    assert!(stdout.contains("policy-controller not found"), "{stdout}");
    assert!(!stdout.contains("/controller and"), "{stdout}");
}
