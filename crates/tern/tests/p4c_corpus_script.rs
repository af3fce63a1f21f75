//! `scripts/p4c-corpus.sh` measures tern on a folder laid out like p4c's testdata: it picks
//! the programs p4c's BMv2 back end runs (`*-bmv2.p4` that include `v1model.p4`, with an
//! `.stf`), and reports each as passed / failed / refused / xfail (on p4c's own BMv2 XFAIL
//! list) or skipped (not a v1model program), with a closing count line. The programs here are
//! tiny ones written for this test, laid out in a scratch folder that removes itself.

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// A v1model program that sends every packet to port 1 with its first byte plus one.
const FORWARD: &str = r#"
#include <core.p4>
#include <v1model.p4>
header b_t { bit<8> v; }
struct hs_t { b_t b; }
struct m_t {}
parser P(packet_in pk, out hs_t h, inout m_t m, inout standard_metadata_t s) {
    state start { pk.extract(h.b); transition accept; }
}
control N(inout hs_t h, inout m_t m) { apply {} }
control I(inout hs_t h, inout m_t m, inout standard_metadata_t s) {
    apply { h.b.v = h.b.v + 1; s.egress_spec = 1; }
}
control E(inout hs_t h, inout m_t m, inout standard_metadata_t s) { apply {} }
control D(packet_out pk, in hs_t h) { apply { pk.emit(h.b); } }
V1Switch(P(), N(), I(), E(), N(), D()) main;
"#;

/// Writes `name.p4` (and `name.stf` when given) into `dir`.
fn put(dir: &Path, name: &str, p4: &str, stf: Option<&str>) {
    std::fs::write(dir.join(format!("{name}.p4")), p4).unwrap();
    if let Some(stf) = stf {
        std::fs::write(dir.join(format!("{name}.stf")), stf).unwrap();
    }
}

/// Runs the script on `dir` (with an optional name filter); its stdout.
fn run(dir: &Path, tmp: &Path, filter: Option<&str>) -> String {
    let mut cmd = Command::new("bash");
    cmd.arg(Path::new(ROOT).join("scripts/p4c-corpus.sh"))
        .arg(dir)
        .env("TERN", env!("CARGO_BIN_EXE_tern"))
        .env("TMPDIR", tmp);
    if let Some(f) = filter {
        cmd.arg(f);
    }
    let o = cmd.output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "p4c-corpus.sh failed:\n{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The table row of `name`, split into its words.
fn row<'a>(out: &'a str, name: &str) -> Option<Vec<&'a str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|w| w.first() == Some(&name))
}

#[test]
fn corpus_script_selects_and_counts_like_p4cs_bmv2_suite() {
    let scratch = tern_fixtures::scratch("p4c-corpus");
    let samples = scratch.join("testdata/p4_16_samples");
    let tmp = scratch.join("tmp");
    std::fs::create_dir_all(&samples).unwrap();
    std::fs::create_dir_all(&tmp).unwrap();

    put(
        &samples,
        "fwd-bmv2",
        FORWARD,
        Some("packet 0 41\nexpect 1 42\n"),
    );
    // Compiles, but its STF expects another byte: failed.
    put(
        &samples,
        "wrong-bmv2",
        FORWARD,
        Some("packet 0 41\nexpect 1 43\n"),
    );
    // A bit<32> assigned to a bit<9> without a cast: refused by the compiler.
    let bad = FORWARD.replace("s.egress_spec = 1;", "bit<32> w = 1; s.egress_spec = w;");
    put(
        &samples,
        "bad-bmv2",
        &bad,
        Some("packet 0 41\nexpect 1 42\n"),
    );
    // Refused, but named like a program on p4c's BMv2 XFAIL list: xfail.
    put(
        &samples,
        "issue1193-bmv2",
        &bad,
        Some("packet 0 41\nexpect 1 42\n"),
    );
    // Its own package, no v1model.p4: p4c's BMv2 suite does not run it.
    let own = "#include <core.p4>\nparser P(packet_in p);\npackage Top(P p);\n\
               parser MyP(packet_in p) { state start { transition accept; } }\n\
               Top(MyP()) main;\n";
    put(&samples, "own-bmv2", own, Some("packet 0 41\n"));
    // Not listed: no STF, or not a `-bmv2` program.
    put(&samples, "nostf-bmv2", FORWARD, None);
    put(
        &samples,
        "other",
        FORWARD,
        Some("packet 0 41\nexpect 1 42\n"),
    );

    let out = run(&scratch, &tmp, None);
    let get = |name: &str| row(&out, name).unwrap_or_else(|| panic!("no row {name}:\n{out}"));
    assert_eq!(get("fwd-bmv2")[1], "passed", "{out}");
    assert_eq!(get("wrong-bmv2")[1], "failed", "{out}");
    assert!(get("wrong-bmv2").contains(&"FAIL"), "{out}");
    let bad_row = get("bad-bmv2");
    assert_eq!(bad_row[1], "refused", "{out}");
    assert!(bad_row.contains(&"error:"), "{out}");
    assert_eq!(get("issue1193-bmv2")[1], "xfail", "{out}");
    assert_eq!(get("own-bmv2")[1], "skipped", "{out}");
    assert!(row(&out, "nostf-bmv2").is_none(), "{out}");
    assert!(row(&out, "other").is_none(), "{out}");
    assert_eq!(
        out.lines().last().unwrap(),
        "total 4: 1 passed, 1 failed, 1 refused, 1 xfail (25.0 % passed); 1 skipped (not v1model)",
        "{out}"
    );

    // The name filter picks rows; the samples folder itself may be given too.
    let out = run(&samples, &tmp, Some("fwd|own"));
    assert_eq!(
        out.lines().last().unwrap(),
        "total 1: 1 passed, 0 failed, 0 refused, 0 xfail (100.0 % passed); 1 skipped (not v1model)",
        "{out}"
    );

    // The script's own work folder is gone.
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}
