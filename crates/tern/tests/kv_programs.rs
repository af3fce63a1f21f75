//! The key-value cache programs in `p4/kv/` (`farreach.p4`, `netcache.p4`) pass their STF tests
//! (`p4/kv/X.stf`, every op path: hit, miss, absorbed or invalidating write, delete, eviction,
//! snapshot case 1, sketch report, strict parsing) through the `tern` binary, from the P4 source
//! and from the BMv2 JSON tern's compiler writes for it, with `check_counter` lines evaluated.

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

fn tern() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tern"))
}

/// Runs `tern test --strict-counters prog stf` and panics with its output unless it passes.
fn assert_stf_passes(prog: &Path, stf: &Path) {
    let o = tern()
        .arg("test")
        .arg("--strict-counters")
        .arg(prog)
        .arg(stf)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success(),
        "{} with {}:\n{out}",
        prog.display(),
        stf.display()
    );
    assert!(out.contains("PASS"), "{out}");
}

fn check_program(name: &str) {
    let dir = Path::new(ROOT).join("p4/kv");
    let p4 = dir.join(format!("{name}.p4"));
    let stf = dir.join(format!("{name}.stf"));
    assert_stf_passes(&p4, &stf);
    let tmp = tern_fixtures::scratch(&format!("kvp-{name}"));
    let json = tmp.join(format!("{name}.json"));
    let o = tern()
        .arg("compile")
        .arg(&p4)
        .arg("-o")
        .arg(&json)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_stf_passes(&json, &stf);
}

#[test]
fn farreach_stf_passes_from_source_and_json() {
    check_program("farreach");
}

#[test]
fn netcache_stf_passes_from_source_and_json() {
    check_program("netcache");
}

/// The STF files really check the cache: a wrong sequence number in one expectation fails.
#[test]
fn a_wrong_cache_answer_fails() {
    let dir = Path::new(ROOT).join("p4/kv");
    let text = std::fs::read_to_string(dir.join("farreach.stf")).unwrap();
    // The first absorbed PUT of k4 is answered with seq 101 (0x65); claim 102 instead.
    let needle = "000a0000000000000000000000000000000e000a0000006500000000";
    assert!(
        text.to_lowercase().contains(needle),
        "expectation not found"
    );
    let broken = text.to_lowercase().replacen(
        needle,
        "000a0000000000000000000000000000000e000a0000006600000000",
        1,
    );
    let tmp = tern_fixtures::scratch("kvp-broken");
    let stf = tmp.join("broken.stf");
    std::fs::write(&stf, broken).unwrap();
    let o = tern()
        .arg("test")
        .arg(dir.join("farreach.p4"))
        .arg(&stf)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL"));
}
