//! Generates the CRI client and server types from `proto/runtime_v1.proto` with protox
//! (a protobuf compiler in Rust), so no `protoc` has to be installed to build.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto/runtime_v1.proto");
    let fds = protox::compile(["proto/runtime_v1.proto"], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds(fds)?;
    Ok(())
}
