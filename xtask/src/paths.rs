//! Well-known paths of the workspace.

use std::path::PathBuf;

/// The workspace root (the parent of `xtask/`).
pub fn workspace_root() -> PathBuf {
    let xtask = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    xtask.parent().map(PathBuf::from).unwrap_or(xtask)
}

/// Where `cargo xtask cluster up` keeps the detached cluster's files.
pub fn cluster_dir() -> PathBuf {
    workspace_root().join(".meridian/cluster")
}
