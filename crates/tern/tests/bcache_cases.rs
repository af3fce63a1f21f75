//! The B-Cache cases (`p4/bcache/case1..4.p4`, one family: each adds to the previous) pass
//! their STF tests (`p4/bcache/caseN.stf`: routing, bridging, flooding, default drop, and per
//! case the ACL, NAT, source guard, VRF and storm control) through the `tern` binary, from
//! the P4 source (compiled by tern's compiler).

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn stf(case: u32, extra: &[&str]) {
    let dir = Path::new(ROOT).join("p4/bcache");
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("test")
        .args(extra)
        .arg(dir.join(format!("case{case}.p4")))
        .arg(dir.join(format!("case{case}.stf")))
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "case{case} {extra:?}:\n{out}");
    assert!(out.contains("PASS"), "{out}");
}

#[test]
fn case1_stf_passes() {
    stf(1, &[]);
}

#[test]
fn case2_stf_passes() {
    stf(2, &[]);
}

#[test]
fn case3_stf_passes() {
    stf(3, &[]);
}

#[test]
fn case4_stf_passes() {
    stf(4, &[]);
}
