//! `cargo xtask gen-crds`: writes the CRDs generated from the Rust types
//! (crates/library/k8s-api) into `deploy/crds/`.

use anyhow::Context;

use crate::paths::workspace_root;

pub fn run() -> anyhow::Result<()> {
    let dir = workspace_root().join("deploy/crds");
    std::fs::create_dir_all(&dir)?;
    for (file, crd) in k8s_api::crds::generated() {
        let path = dir.join(&file);
        std::fs::write(&path, k8s_api::crds::render(&crd)?)
            .with_context(|| format!("writing {}", path.display()))?;
        println!("wrote {}", path.display());
    }
    Ok(())
}
