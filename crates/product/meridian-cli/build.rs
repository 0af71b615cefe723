//! Compiles the descriptors of Linkerd's proxy API (the `.proto` files the
//! `linkerd2-proxy-api` crate ships, at the version this package is built
//! with) for `meridian-cli compare`, which decodes both control planes'
//! answers by field name. The crate's sources are found through `cargo
//! metadata` (from the lockfile), so nothing is copied into this
//! repository; protox compiles them, with no `protoc` on the machine.

use std::{path::PathBuf, process::Command};

/// The API's files `compare` decodes (their imports come along).
const FILES: [&str; 3] = ["destination.proto", "inbound.proto", "outbound.proto"];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = std::env::var("TARGET")?;
    let metadata = |offline: bool| {
        let mut command = Command::new(&cargo);
        command
            .args(["metadata", "--format-version=1", "--locked"])
            .args(["--filter-platform", &target])
            .arg("--manifest-path")
            .arg(&manifest);
        if offline {
            command.arg("--offline");
        }
        command.output()
    };
    // Offline first (everything this build needs is downloaded); the
    // workspace's other members may need packages this build did not
    // download (e.g. `cargo build --bin destination` in a fresh container).
    let mut output = metadata(true)?;
    if !output.status.success() {
        output = metadata(false)?;
    }
    if !output.status.success() {
        return Err(format!(
            "cargo metadata failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let metadata: serde_json::Value = serde_json::from_slice(&output.stdout)?;
    let api = metadata["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["name"] == "linkerd2-proxy-api")
        .filter_map(|p| p["manifest_path"].as_str().map(PathBuf::from))
        .next()
        .ok_or("cargo metadata lists no linkerd2-proxy-api package")?;
    let proto = api
        .parent()
        .ok_or("linkerd2-proxy-api's manifest has no directory")?
        .join("proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    println!("cargo:rerun-if-changed=build.rs");
    let mut compiler = protox::Compiler::new([&proto])?;
    compiler.include_imports(true).include_source_info(false);
    compiler.open_files(FILES)?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?).join("linkerd2_proxy_api.fds");
    std::fs::write(out, compiler.encode_file_descriptor_set())?;
    Ok(())
}
