//! The tutorial programs in `p4/tutorials/` pass their STF packet tests (`tests/stf/X.stf` for
//! `p4/tutorials/X.p4`) through the `tern` binary: `tern test p4/tutorials/X.p4 tests/stf/X.stf`,
//! the way p4c's test runner pairs a program with its STF file. (`tern-stf`'s own tests check
//! the same files through the library with exact expectation counts.)

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Runs `tern test p4 stf`: `None` if it passes, else its stdout and stderr.
fn tern_test_failure(p4: &Path, stf: &Path) -> Option<String> {
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .arg("test")
        .arg(p4)
        .arg(stf)
        .output()
        .unwrap();
    (!o.status.success()).then(|| {
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[test]
fn every_tutorial_stf_passes() {
    let stf_dir = Path::new(ROOT).join("tests/stf");
    let tutorial = |p: &Path| {
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        Path::new(ROOT)
            .join(format!("p4/tutorials/{stem}.p4"))
            .exists()
    };
    let mut stfs: Vec<_> = std::fs::read_dir(&stf_dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "stf") && tutorial(p))
        .collect();
    stfs.sort();
    assert!(stfs.len() >= 4, "only {} tutorial STF files", stfs.len());
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
        if let Some(out) = tern_test_failure(&p4, stf) {
            failures.push(format!("{name}:\n{out}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The compiler's feature programs with an STF file beside them (`p4/tests/X.p4` and
/// `p4/tests/X.stf`) pass it through `tern test`.
#[test]
fn every_feature_program_stf_passes() {
    let dir = Path::new(ROOT).join("p4/tests");
    let mut stfs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "stf"))
        .collect();
    stfs.sort();
    assert!(!stfs.is_empty(), "no STF files in p4/tests");
    let mut failures = Vec::new();
    for stf in &stfs {
        let p4 = stf.with_extension("p4");
        assert!(p4.exists(), "{} has no program beside it", stf.display());
        if let Some(out) = tern_test_failure(&p4, stf) {
            failures.push(format!("{}:\n{out}", stf.display()));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_wrong_expectation_fails_the_run() {
    let stf = Path::new(ROOT).join("tests/stf/basic.stf");
    let text = std::fs::read_to_string(&stf).unwrap();
    // Expect the routed packet on the wrong port.
    let broken = text.replacen("expect 2 ", "expect 1 ", 1);
    assert_ne!(broken, text);
    let dir = tern_fixtures::scratch("tut");
    let tmp = dir.join("broken.stf");
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
