//! STF tests of tern's own P4 programs (`p4/tutorials/`): compiled with tern's compiler, loaded
//! into the data plane and checked by the STF runner — the whole pipeline end to end.

use tern_dataplane::{Switch, SwitchOptions};
use tern_stf::StfReport;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

fn run(p4: &str, stf: &str) -> StfReport {
    run_defs(p4, &[], stf)
}

fn run_defs(p4: &str, defines: &[&str], stf: &str) -> StfReport {
    let path = std::path::PathBuf::from(format!("{ROOT}p4/tutorials/{p4}"));
    let opts = tern_p4::Options {
        include_dirs: vec![],
        defines: defines.iter().map(|d| d.to_string()).collect(),
    };
    let compiled = tern_p4::compile_file(&path, &opts)
        .unwrap_or_else(|d| panic!("{p4} does not compile:\n{d}"));
    let mut sw = Switch::from_json(&compiled.json, SwitchOptions::default())
        .unwrap_or_else(|e| panic!("{p4}: {e}"));
    let text = std::fs::read_to_string(format!("{ROOT}tests/stf/{stf}")).unwrap();
    let script = tern_stf::parse(&text, stf).unwrap_or_else(|e| panic!("{e}"));
    let program = sw.program().clone();
    tern_stf::run(&script, &mut sw, &program)
}

#[test]
fn basic_router() {
    let r = run("basic.p4", "basic.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(
        (r.expectations.len(), r.packets_sent, r.discarded),
        (3, 4, 0),
        "{r}"
    );
    assert!(r.warnings.is_empty(), "{r}");
}

#[test]
fn calculator() {
    let r = run("calc.p4", "calc.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(
        (r.expectations.len(), r.packets_sent, r.discarded),
        (5, 8, 0),
        "{r}"
    );
}

/// The same script against a program that forwards differently fails.
#[test]
fn basic_script_fails_on_the_calculator() {
    let r = run("calc.p4", "basic.stf");
    assert!(!r.passed());
    assert!(
        !r.errors.is_empty(),
        "ipv4_lpm does not exist in calc.p4: {r}"
    );
}

#[test]
fn multicast_flood_and_unicast() {
    let r = run("multicast.p4", "multicast.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(
        (r.expectations.len(), r.packets_sent, r.discarded),
        (3, 4, 0),
        "{r}"
    );
    assert!(r.warnings.is_empty(), "{r}");
}

#[test]
fn source_routing_two_hops() {
    let r = run("source_routing.p4", "source_routing.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(
        (r.expectations.len(), r.packets_sent, r.discarded),
        (2, 3, 0),
        "{r}"
    );
}

#[test]
fn basic_tunnel_and_ipv4() {
    let r = run("basic_tunnel.p4", "basic_tunnel.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(
        (r.expectations.len(), r.packets_sent, r.discarded),
        (2, 4, 0),
        "{r}"
    );
    assert!(r.warnings.is_empty(), "{r}");
}

#[test]
fn ecn_marking_follows_the_threshold() {
    let r = run("ecn.p4", "ecn_below_threshold.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(r.expectations.len(), 4);
    let r = run_defs("ecn.p4", &["ECN_THRESHOLD=0"], "ecn_marked.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(r.expectations.len(), 4);
    // Without the define, the ECN-capable packets are not marked: three expectations fail.
    let r = run("ecn.p4", "ecn_marked.stf");
    assert!(!r.passed());
    assert_eq!(r.met_count(), 1, "{r}");
}

#[test]
fn firewall_bloom_filter() {
    let r = run("firewall.p4", "firewall.stf");
    assert!(r.passed(), "{r}");
    assert_eq!(
        (r.expectations.len(), r.packets_sent, r.discarded),
        (3, 6, 0),
        "{r}"
    );
    assert!(r.warnings.is_empty(), "{r}");
}
