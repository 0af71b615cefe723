//! Replays the committed fuzz inputs through the very checks the libFuzzer
//! targets run, on the stable toolchain, as part of `cargo test`:
//! `fuzz/regressions/<target>/*` (every crash found, kept once fixed) and
//! `fuzz/seeds/<target>/*` (the hand-written starting corpus).

use std::path::{Path, PathBuf};

fn dir(kind: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../fuzz")
        .join(kind)
}

/// Runs every input under `fuzz/<kind>/<target>/`; returns how many ran.
fn replay(kind: &str) -> usize {
    let mut replayed = 0;
    for (name, check) in fuzz_checks::TARGETS {
        let Ok(entries) = std::fs::read_dir(dir(kind).join(name)) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("corpus entry").path();
            let data = std::fs::read(&path).expect("corpus input");
            let outcome = std::panic::catch_unwind(|| check(&data));
            assert!(outcome.is_ok(), "{name}: {} fails", path.display());
            replayed += 1;
        }
    }
    replayed
}

#[test]
fn every_regression_input_passes_its_check() {
    assert!(replay("regressions") > 0, "no input under fuzz/regressions");
}

#[test]
fn every_seed_passes_its_check() {
    assert!(replay("seeds") > 0, "no input under fuzz/seeds");
}

#[test]
fn every_corpus_directory_names_a_target() {
    for kind in ["regressions", "seeds"] {
        for entry in std::fs::read_dir(dir(kind)).expect("fuzz corpus directory") {
            let name = entry.expect("entry").file_name();
            let name = name.to_string_lossy().into_owned();
            assert!(
                fuzz_checks::TARGETS.iter().any(|(t, _)| *t == name),
                "fuzz/{kind}/{name} is not a target"
            );
        }
    }
}
