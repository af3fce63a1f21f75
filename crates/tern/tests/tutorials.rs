//! The tutorial programs in `p4/tutorials/` pass their STF packet tests in `tests/stf/tutorials/`
//! when compiled by tern's own compiler: `tern test p4/tutorials/X.p4 tests/stf/tutorials/X.stf`,
//! exactly the way p4c's test runner pairs a program with its STF file.

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

#[test]
fn every_tutorial_stf_passes() {
    let stf_dir = Path::new(ROOT).join("tests/stf/tutorials");
    let mut stfs: Vec<_> = std::fs::read_dir(&stf_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "stf"))
        .collect();
    stfs.sort();
    assert!(!stfs.is_empty(), "no STF files in {}", stf_dir.display());
    let mut failures = Vec::new();
    for stf in &stfs {
        let name = stf.file_stem().unwrap().to_string_lossy().into_owned();
        let p4 = Path::new(ROOT).join(format!("p4/tutorials/{name}.p4"));
        assert!(
            p4.exists(),
            "{} has no program {}",
            stf.display(),
            p4.display()
        );
        let o = Command::new(env!("CARGO_BIN_EXE_tern"))
            .arg("test")
            .arg(&p4)
            .arg(stf)
            .output()
            .unwrap();
        if !o.status.success() {
            failures.push(format!(
                "{name}:\n{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_wrong_expectation_fails_the_run() {
    let stf = Path::new(ROOT).join("tests/stf/tutorials/basic.stf");
    let text = std::fs::read_to_string(&stf).unwrap();
    // Expect the routed packet on the wrong port.
    let broken = text.replacen("expect 1 ", "expect 2 ", 1);
    assert_ne!(broken, text);
    let tmp = std::env::temp_dir().join(format!("tern-tut-{}.stf", std::process::id()));
    std::fs::write(&tmp, broken).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("test")
        .arg(Path::new(ROOT).join("p4/tutorials/basic.p4"))
        .arg(&tmp)
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("FAIL"));
}
