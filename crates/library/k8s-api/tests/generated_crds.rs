//! The policy CRDs in `deploy/crds/` are exactly what the Rust types generate.

use std::path::Path;

#[test]
fn deploy_crds_match_the_rust_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../deploy/crds");
    let mut stale = Vec::new();
    for (file, crd) in k8s_api::crds::generated() {
        let expected = k8s_api::crds::render(&crd).expect("render CRD");
        let path = dir.join(&file);
        let actual = std::fs::read_to_string(&path).unwrap_or_default();
        if actual != expected {
            stale.push(file);
        }
    }
    assert!(
        stale.is_empty(),
        "these CRDs differ from the Rust types; run `cargo xtask gen-crds`: {stale:?}"
    );
}
