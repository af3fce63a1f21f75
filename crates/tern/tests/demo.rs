//! `tern demo` (and `tern` with no arguments) runs end to end: compile, configure, forward,
//! and every flow it checks is forwarded correctly.

use std::process::Command;

fn demo(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(args)
        .output()
        .expect("run tern");
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

#[test]
fn demo_compiles_configures_and_forwards_correctly() {
    let (ok, out) = demo(&["demo", "--packets", "5000", "--flows", "500"]);
    assert!(ok, "{out}");
    assert!(out.contains("compiled p4/tutorials/basic.p4"), "{out}");
    assert!(out.contains("Entry has been added with handle 3"), "{out}");
    assert!(
        out.contains("every one of the 500 flows was checked"),
        "{out}"
    );
    // 1 in 5 flows has no route: the drop share is reported.
    assert!(out.contains("dropped:     1000 packets (20.0%"), "{out}");
}

#[test]
fn demo_with_a_broken_program_fails_with_a_diagnostic() {
    let dir = tern_fixtures::scratch("demo");
    let p = dir.join("bad.p4");
    std::fs::write(&p, "header h { bit<8> a }\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["demo", "--p4", p.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("bad.p4:1:"), "{err}");
}
