//! Generates the Rust code of `proto/` with a pure-Rust protobuf compiler
//! (protox), so building needs no `protoc` on the machine.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs (not `env!`, fixed when it was compiled):
    // a build-script binary reused by another checkout must read its own
    // sources.
    let proto_root =
        std::path::PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("../../../proto");
    let files = ["meridian/policy/v1/workload_ports.proto"];
    for file in files {
        println!("cargo:rerun-if-changed={}", proto_root.join(file).display());
    }
    let fds = protox::compile(files, [&proto_root])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
