//! Interop with Apache Thrift's Python library (the stack of BMv2's simple_switch_CLI).
//! Needs a venv with PyPI `thrift` and Python code generated from `idl/`, both under the
//! workspace's `target/`: run `crates/tern-thrift/scripts/py-check.sh`, which sets them up and
//! runs this test.

mod common;

use std::path::Path;
use std::process::Command;

use common::*;

#[test]
#[ignore = "needs target/pyenv and target/pygen: run scripts/py-check.sh"]
fn python_thrift_client_drives_tern() {
    tern_fixtures::require!();
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/../../target");
    let python = format!("{target}/pyenv/bin/python");
    let pygen = format!("{target}/pygen");
    assert!(
        Path::new(&python).exists() && Path::new(&pygen).exists(),
        "run crates/tern-thrift/scripts/py-check.sh first"
    );
    let (addr, _sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    let out = Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/py/check.py"))
        .arg(addr.port().to_string())
        .arg(pygen)
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success() && stdout.contains("ALL OK"),
        "python check failed:\n{stdout}\n{stderr}"
    );
}
