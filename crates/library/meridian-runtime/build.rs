//! Records what the binaries are built from, for
//! [`build_info`](src/build_info.rs): the git commit (`MERIDIAN_GIT_COMMIT`
//! from the environment if set, as an image build without `.git` can pass
//! it; else `git rev-parse --short HEAD`; else `unknown`) and the build
//! profile.
//!
//! It reruns when the commit may have moved: this checkout's `HEAD`, the
//! branch file `HEAD` names, or `packed-refs` when that branch is packed
//! (only paths that exist: a missing one would make every build rerun
//! it). Nothing fails without
//! git or outside a repository.

use std::{path::PathBuf, process::Command};

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=MERIDIAN_GIT_COMMIT");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    println!("cargo:rustc-env=MERIDIAN_BUILD_PROFILE={profile}");
    let commit = match std::env::var("MERIDIAN_GIT_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_string(),
        _ => from_git().unwrap_or_else(|| "unknown".into()),
    };
    println!("cargo:rustc-env=MERIDIAN_GIT_COMMIT={commit}");
}

/// `git <args>`'s first line, if it succeeds with one.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The short commit of `HEAD`, watching the files it is read from.
fn from_git() -> Option<String> {
    let commit = git(&["rev-parse", "--short", "HEAD"])?;
    if let Some(dir) = git(&["rev-parse", "--path-format=absolute", "--git-dir"]) {
        watch(PathBuf::from(dir).join("HEAD"));
    }
    if let Some(common) = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"]) {
        let common = PathBuf::from(common);
        let loose = git(&["symbolic-ref", "-q", "HEAD"]).map(|branch| common.join(branch));
        match loose {
            Some(file) if file.is_file() => watch(file),
            // A packed (or detached) branch moves in `packed-refs`.
            _ => watch(common.join("packed-refs")),
        }
    }
    Some(commit)
}

fn watch(path: PathBuf) {
    if path.is_file() {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}
