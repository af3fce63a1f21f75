//! Generates the P4Runtime message and service code from tern's `.proto` files with the
//! pure-Rust `protox` compiler (no `protoc` needed) and `tonic-build`.

use protox::prost::Message;
use std::path::PathBuf;

const PROTOS: &[&str] = &[
    "p4/v1/p4runtime.proto",
    "p4/v1/p4data.proto",
    "p4/config/v1/p4info.proto",
    "p4/config/v1/p4types.proto",
    "google/rpc/status.proto",
    "google/rpc/code.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let fds = protox::compile(PROTOS, ["proto"])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("p4rt_descriptor.bin"), fds.encode_to_vec())?;
    tonic_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    for p in PROTOS {
        println!("cargo:rerun-if-changed=proto/{p}");
    }
    Ok(())
}
