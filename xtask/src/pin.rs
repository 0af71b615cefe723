//! `cargo xtask cluster pin vX.Y.Z`: regenerates `xtask/gotools/kubebin/go.mod`
//! for another Kubernetes release.
//!
//! `k8s.io/kubernetes` requires its staging modules at `v0.0.0` and replaces
//! them with `./staging/...`; a dependent module must replace each with the
//! matching `v0.Y.Z` release. The list is read from the served go.mod (the
//! verbatim upstream file), never typed by hand.

use std::process::Command;

use anyhow::{Context, bail};

pub fn pin(version: &str) -> anyhow::Result<()> {
    let Some(rest) = version.strip_prefix("v1.") else {
        bail!("expected a version like v1.36.3, got {version}");
    };
    let staging = format!("v0.{rest}");
    let dir = local_cluster::binaries::gotools_dir().join("kubebin");
    let scratch = std::env::temp_dir();
    let out = Command::new("go")
        .args([
            "mod",
            "download",
            "-json",
            &format!("k8s.io/kubernetes@{version}"),
        ])
        .current_dir(&scratch)
        .env("GOWORK", "off")
        .output()
        .context("running go mod download")?;
    if !out.status.success() {
        bail!(
            "go mod download failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let info: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let go_mod_path = info["GoMod"]
        .as_str()
        .context("go mod download printed no GoMod path")?;
    let upstream = std::fs::read_to_string(go_mod_path)?;
    if let Some(go_line) = upstream.lines().find(|l| l.starts_with("go ")) {
        println!("upstream {go_line}");
    }
    let modules = staging_modules(&upstream);
    if modules.is_empty() {
        bail!("no staging replaces found in {go_mod_path}");
    }
    println!("{} staging modules → {staging}", modules.len());
    go(&dir, &["mod", "edit", "-dropreplace=k8s.io/..."]).ok();
    for module in &modules {
        go(
            &dir,
            &[
                "mod",
                "edit",
                &format!("-replace={module}={module}@{staging}"),
            ],
        )?;
    }
    go(
        &dir,
        &[
            "mod",
            "edit",
            &format!("-require=k8s.io/kubernetes@{version}"),
        ],
    )?;
    go(&dir, &["mod", "tidy"])?;
    println!("pinned k8s.io/kubernetes {version}; next `cargo xtask cluster build` rebuilds");
    Ok(())
}

/// Module paths replaced with `./staging/...` in an upstream go.mod.
fn staging_modules(go_mod: &str) -> Vec<String> {
    go_mod
        .lines()
        .filter_map(|line| {
            let (module, target) = line.trim().split_once("=>")?;
            let module = module.trim().trim_start_matches("replace").trim();
            (target.trim().starts_with("./staging/") && module.starts_with("k8s.io/"))
                .then(|| module.to_string())
        })
        .collect()
}

fn go(dir: &std::path::Path, args: &[&str]) -> anyhow::Result<()> {
    let status = Command::new("go")
        .args(args)
        .current_dir(dir)
        .env("GOWORK", "off")
        .status()
        .with_context(|| format!("running go {}", args.join(" ")))?;
    if !status.success() {
        bail!("go {} failed with {status}", args.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn staging_modules_are_read_from_the_replace_block() {
        let go_mod = "module k8s.io/kubernetes\n\nreplace (\n\tk8s.io/api => ./staging/src/k8s.io/api\n\tk8s.io/streaming => ./staging/src/k8s.io/streaming\n\tgithub.com/x/y => github.com/x/y v1.0.0\n)\nreplace k8s.io/kms => ./staging/src/k8s.io/kms\n";
        assert_eq!(
            staging_modules(go_mod),
            vec!["k8s.io/api", "k8s.io/streaming", "k8s.io/kms"]
        );
    }
}
