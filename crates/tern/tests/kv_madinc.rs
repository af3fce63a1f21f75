//! `p4/kv/madinc.p4` (MADINC's multitenant cache) passes `p4/kv/madinc.stf` through the `tern`
//! binary, from the P4 source and from the BMv2 JSON `tern compile` writes, with `check_counter`
//! lines evaluated: hit, miss, write-through invalidation, forged and unknown tenants dropped and
//! counted, tenants isolated on the same key, page ownership enforced, hot report once per
//! tenant, strict parsing. A mutated expectation (one tenant served another's value) fails.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn tern(args: &[&Path]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tern"));
    c.arg("test").arg("--strict-counters");
    for a in args {
        c.arg(a);
    }
    c.output().unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn kv_dir() -> PathBuf {
    Path::new(ROOT).join("p4/kv")
}

#[test]
fn madinc_stf_passes_from_source_and_json() {
    let p4 = kv_dir().join("madinc.p4");
    let stf = kv_dir().join("madinc.stf");
    let o = tern(&[&p4, &stf]);
    assert!(
        o.status.success() && text(&o).contains("PASS"),
        "{}",
        text(&o)
    );
    let tmp = tern_fixtures::scratch("kvm-json");
    let json = tmp.join("madinc.json");
    let c = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("compile")
        .arg(&p4)
        .arg("-o")
        .arg(&json)
        .output()
        .unwrap();
    assert!(c.status.success(), "{}", text(&c));
    let o = tern(&[&json, &stf]);
    assert!(
        o.status.success() && text(&o).contains("PASS"),
        "{}",
        text(&o)
    );
}

/// The STF really checks isolation: expecting tenant 1's value in tenant 2's reply fails.
#[test]
fn serving_another_tenants_value_fails_the_stf() {
    let stf = std::fs::read_to_string(kv_dir().join("madinc.stf")).unwrap();
    // "tenant-2 has its own value" as hex, and "value-01" padded to the same length.
    let theirs = hex(b"tenant-2 has its own value");
    assert!(stf.contains(&theirs), "expectation not found");
    let mut mine = hex(b"value-01");
    mine.push_str(&"00".repeat(b"tenant-2 has its own value".len() - 8));
    let broken = stf.replacen(&theirs, &mine, 1);
    let tmp = tern_fixtures::scratch("kvm-broken");
    let path = tmp.join("broken.stf");
    std::fs::write(&path, broken).unwrap();
    let o = tern(&[&kv_dir().join("madinc.p4"), &path]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL"));
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
