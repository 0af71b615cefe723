//! `vendor/h2.patch`: Meridian's changes to h2, as a patch against the
//! crates.io release that `vendor/h2` starts from, and the check that the
//! release plus the patch is exactly the vendored tree.
//!
//! The patch is what a reviewer (or upstream) reads; the tree is what the
//! build uses. `cargo xtask test` runs [`check`], so the two cannot drift:
//! a change to `vendor/h2` without `cargo xtask h2-patch --write` fails it,
//! naming the files that differ.
//!
//! What the comparison covers, and why not the rest:
//! - every file of the release, but those the vendored copy does not carry
//!   ([`NOT_VENDORED`]: cargo's markers, upstream's CI config and lock
//!   file, benches and examples, none built or tested here);
//! - every file of the tree, but upstream's repository test material that
//!   the crates.io package does not hold ([`REPOSITORY_TESTS`]: the HPACK
//!   fixtures of h2's unit tests and the `h2-support`/`h2-tests` crates,
//!   see vendor/README.md).

use std::{
    collections::BTreeSet,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use anyhow::{Context, bail};

use crate::paths::workspace_root;

/// The h2 release vendor/h2 patches.
pub const H2_VERSION: &str = "0.4.20";

/// Top-level entries of the release the vendored copy leaves out.
const NOT_VENDORED: &[&str] = &[
    ".cargo-ok",
    ".cargo_vcs_info.json",
    ".github",
    "Cargo.lock",
    "benches",
    "examples",
];

/// Top-level entries of the vendored tree that come from upstream's
/// repository, not from the release (and so are not in the patch).
const REPOSITORY_TESTS: &[&str] = &["fixtures", "tests"];

/// `cargo xtask h2-patch --write` regenerates the patch; without it, checks it.
pub fn run(write: bool) -> anyhow::Result<()> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    if write {
        self::write(&cargo)
    } else {
        check(&cargo)
    }
}

/// The directory of the crates.io h2 release's source, fetched through a
/// scratch package (under `scratch`) that depends on exactly that version.
pub fn release_source(cargo: &str, scratch: &Path) -> anyhow::Result<PathBuf> {
    let dir = scratch.join("fetch");
    std::fs::create_dir_all(dir.join("src"))?;
    std::fs::write(
        dir.join("Cargo.toml"),
        format!(
            "[package]\nname = \"h2-release-fetch\"\nversion = \"0.0.0\"\nedition = \"2021\"\npublish = false\n\n[dependencies]\nh2 = \"={H2_VERSION}\"\n\n[workspace]\n"
        ),
    )?;
    std::fs::write(dir.join("src/lib.rs"), "")?;
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .stderr(Stdio::inherit())
        .output()
        .context("cargo metadata of the h2 fetch package")?;
    if !output.status.success() {
        bail!("cargo metadata failed ({})", output.status);
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let manifest = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == "h2" && p["version"] == H2_VERSION)
        .and_then(|p| p["manifest_path"].as_str())
        .context("h2 is not among the fetch package's dependencies")?;
    let source = Path::new(manifest)
        .parent()
        .context("h2's manifest has no directory")?;
    if source.starts_with(workspace_root().join("vendor")) {
        bail!("the fetched h2 is the vendored one ({})", source.display());
    }
    Ok(source.to_path_buf())
}

fn patch_file() -> PathBuf {
    workspace_root().join("vendor/h2.patch")
}

fn vendored() -> PathBuf {
    workspace_root().join("vendor/h2")
}

/// A fresh scratch directory under `target/h2-patch`.
fn scratch() -> anyhow::Result<PathBuf> {
    let dir = workspace_root().join("target/h2-patch");
    if dir.join("a").exists() || dir.join("b").exists() {
        std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// Writes `vendor/h2.patch`: `diff -ruN` of the release (less
/// [`NOT_VENDORED`]) against the tree (less [`REPOSITORY_TESTS`]), paths
/// `a/…` and `b/…`, no timestamps.
fn write(cargo: &str) -> anyhow::Result<()> {
    let dir = scratch()?;
    let release = release_source(cargo, &dir)?;
    copy_tree(&release, &dir.join("a"), NOT_VENDORED)?;
    copy_tree(&vendored(), &dir.join("b"), REPOSITORY_TESTS)?;
    let output = Command::new("diff")
        .args(["-ruN", "a", "b"])
        .current_dir(&dir)
        .output()
        .context("running diff (GNU diffutils)")?;
    // diff exits 1 when the trees differ, 2 on trouble.
    if output.status.code() == Some(2) {
        bail!("diff failed: {}", String::from_utf8_lossy(&output.stderr));
    }
    let text = String::from_utf8(output.stdout).context("the patch is not UTF-8")?;
    let patch = strip_timestamps(&text);
    std::fs::write(patch_file(), &patch)?;
    println!(
        "wrote {} ({} lines) against h2 {H2_VERSION} from {}",
        patch_file().display(),
        patch.lines().count(),
        release.display()
    );
    Ok(())
}

/// Applies `vendor/h2.patch` to a copy of the release and compares the
/// result with the tree, file by file.
pub fn check(cargo: &str) -> anyhow::Result<()> {
    let dir = scratch()?;
    let release = release_source(cargo, &dir)?;
    let patched = dir.join("a");
    copy_tree(&release, &patched, NOT_VENDORED)?;
    let patch = std::fs::File::open(patch_file())
        .with_context(|| format!("{} (cargo xtask h2-patch --write)", patch_file().display()))?;
    let output = Command::new("patch")
        .args([
            "-p1",
            "--quiet",
            "--batch",
            "--forward",
            "--no-backup-if-mismatch",
        ])
        .current_dir(&patched)
        .stdin(patch)
        .output()
        .context("running patch")?;
    if !output.status.success() {
        bail!(
            "vendor/h2.patch does not apply to h2 {H2_VERSION}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let differ = compare_trees(&patched, &vendored(), REPOSITORY_TESTS)?;
    if !differ.is_empty() {
        bail!(
            "h2 {H2_VERSION} + vendor/h2.patch is not vendor/h2; these differ: {}\n\
             (after changing vendor/h2, run `cargo xtask h2-patch --write`)",
            differ.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    println!("vendor/h2 is h2 {H2_VERSION} + vendor/h2.patch");
    Ok(())
}

/// Copies `from` to `to`, leaving out the top-level entries named in `skip`.
fn copy_tree(from: &Path, to: &Path, skip: &[&str]) -> anyhow::Result<()> {
    for path in files(from, skip)? {
        let target = to.join(&path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::copy(from.join(&path), &target)
            .with_context(|| format!("copying {}", from.join(&path).display()))?;
    }
    Ok(())
}

/// The files under `root` (relative paths), but under the top-level
/// entries named in `skip`.
fn files(root: &Path, skip: &[&str]) -> anyhow::Result<BTreeSet<PathBuf>> {
    let mut out = BTreeSet::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(rel) = pending.pop() {
        for entry in std::fs::read_dir(root.join(&rel))
            .with_context(|| format!("reading {}", root.join(&rel).display()))?
        {
            let entry = entry?;
            let name = entry.file_name();
            if rel.as_os_str().is_empty() && skip.iter().any(|s| name == *s) {
                continue;
            }
            let path = rel.join(&name);
            if entry.file_type()?.is_dir() {
                pending.push(path);
            } else {
                out.insert(path);
            }
        }
    }
    Ok(out)
}

/// The relative paths whose contents differ, or that only one side has.
fn compare_trees(a: &Path, b: &Path, skip_in_b: &[&str]) -> anyhow::Result<BTreeSet<String>> {
    let left = files(a, &[])?;
    let right = files(b, skip_in_b)?;
    let mut differ = BTreeSet::new();
    for path in left.union(&right) {
        let same = left.contains(path)
            && right.contains(path)
            && std::fs::read(a.join(path))? == std::fs::read(b.join(path))?;
        if !same {
            differ.insert(path.display().to_string());
        }
    }
    Ok(differ)
}

/// `--- a/x\t2026-…` → `--- a/x`: the patch does not change with the
/// files' modification times.
fn strip_timestamps(diff: &str) -> String {
    let mut out = String::with_capacity(diff.len());
    for line in diff.split_inclusive('\n') {
        if (line.starts_with("--- ") || line.starts_with("+++ "))
            && let Some((head, _)) = line.split_once('\t')
        {
            out.push_str(head);
            out.push('\n');
            continue;
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_go_and_the_rest_stays() {
        let diff = "diff -ruN a/x b/x\n--- a/x\t2026-12-04 22:00:00.000 +0000\n+++ b/x\t2026-12-04 22:01:00.000 +0000\n@@ -1 +1 @@\n-a\t1\n+b\t2\n";
        assert_eq!(
            strip_timestamps(diff),
            "diff -ruN a/x b/x\n--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\t1\n+b\t2\n"
        );
    }

    #[test]
    fn trees_differ_by_content_and_by_presence_but_not_by_skipped_entries() {
        let root = std::env::temp_dir().join(format!("h2-patch-test-{}", std::process::id()));
        let (a, b) = (root.join("a"), root.join("b"));
        for (dir, files) in [
            (
                &a,
                &[("same", "1"), ("changed", "old"), ("only-a", "x")][..],
            ),
            (
                &b,
                &[
                    ("same", "1"),
                    ("changed", "new"),
                    ("only-b/deep", "y"),
                    ("tests/t", "z"),
                ][..],
            ),
        ] {
            for (name, text) in files {
                let path = dir.join(name);
                std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
                std::fs::write(path, text).expect("write");
            }
        }
        let differ = compare_trees(&a, &b, &["tests"]).expect("compare");
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(
            differ.into_iter().collect::<Vec<_>>(),
            ["changed", "only-a", "only-b/deep"]
        );
    }
}
