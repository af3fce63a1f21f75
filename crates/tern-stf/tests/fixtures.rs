//! The BMv2 fixture scenarios of `shared/fixtures/bmv2/MANIFEST.md` §5, written as STF files in
//! `tests/stf/` and run through the STF runner against tern's data plane.

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MirroringSession, Runtime};
use tern_stf::{Outcome, StfReport};

const FIXTURES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/bmv2/"
);
const STF_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/stf/");

const PACKET_REDIRECT: &str = "targets/simple_switch/tests/testdata/packet_redirect.json";

fn switch(json: &str) -> Switch {
    let text = std::fs::read_to_string(format!("{FIXTURES}{json}"))
        .unwrap_or_else(|e| panic!("reading fixture {json}: {e}"));
    Switch::from_json(&text, SwitchOptions::default())
        .unwrap_or_else(|e| panic!("loading fixture {json}: {e}"))
}

fn script(stf: &str) -> tern_stf::StfScript {
    let path = format!("{STF_DIR}{stf}");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    tern_stf::parse(&text, stf).unwrap_or_else(|e| panic!("{e}"))
}

/// Run `stf` against a fresh switch loaded with `json`, after `setup`.
fn run_with(json: &str, stf: &str, setup: impl FnOnce(&mut Switch)) -> StfReport {
    let mut sw = switch(json);
    setup(&mut sw);
    let program = sw.program().clone();
    tern_stf::run(&script(stf), &mut sw, &program)
}

fn run(json: &str, stf: &str) -> StfReport {
    run_with(json, stf, |_| {})
}

/// Assert a pass with the given number of expectations and frames on unattached ports.
fn assert_pass(r: &StfReport, expectations: usize, discarded: usize) {
    assert!(r.passed(), "{r}");
    assert_eq!(r.expectations.len(), expectations, "{r}");
    assert_eq!(r.discarded, discarded, "frames on unattached ports\n{r}");
}

#[test]
fn packet_redirect_baseline() {
    let r = run(PACKET_REDIRECT, "packet_redirect_baseline.stf");
    assert_pass(&r, 1, 0);
    assert_eq!(r.expectations[0].got.as_deref(), Some(&[0x01, 0x02][..]));
}

#[test]
fn packet_redirect_multicast() {
    let r = run(PACKET_REDIRECT, "packet_redirect_multicast.stf");
    assert_pass(&r, 2, 0);
}

#[test]
fn packet_redirect_clone_i2e() {
    assert_pass(&run(PACKET_REDIRECT, "packet_redirect_clone_i2e.stf"), 2, 0);
}

/// CloneI2E_Multicast: session 1 has a port *and* a group, which the STF pass-through commands
/// cannot express (each `mirroring_add*` replaces the session), so the session is set up
/// through the runtime API; the STF file's `mirroring_add 1 3` is replaced by it.
#[test]
fn packet_redirect_clone_i2e_multicast() {
    let text = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_clone_i2e.stf"))
        .unwrap()
        .replace(
            "mirroring_add 1 3",
            "mc_mgrp_create 1\nmc_node_create 0 4\nmc_node_associate 1 0",
        )
        + "expect 4 03040000 $\n";
    let s = tern_stf::parse(&text, "clone_i2e_multicast").unwrap();
    let mut sw = switch(PACKET_REDIRECT);
    sw.mirroring_session_add(
        1,
        MirroringSession {
            port: Some(3),
            mgid: Some(1),
        },
    )
    .unwrap();
    let program = sw.program().clone();
    let r = tern_stf::run(&s, &mut sw, &program);
    assert_pass(&r, 3, 0);
}

#[test]
fn packet_redirect_clone_e2e() {
    assert_pass(&run(PACKET_REDIRECT, "packet_redirect_clone_e2e.stf"), 2, 0);
}

#[test]
fn packet_redirect_clone_e2e_multicast() {
    let text = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_clone_e2e.stf"))
        .unwrap()
        .replace(
            "mirroring_add 1 3",
            "mc_mgrp_create 1\nmc_node_create 0 4\nmc_node_associate 1 0",
        )
        + "expect 4 0402 $\n";
    let s = tern_stf::parse(&text, "clone_e2e_multicast").unwrap();
    let mut sw = switch(PACKET_REDIRECT);
    sw.mirroring_session_add(
        1,
        MirroringSession {
            port: Some(3),
            mgid: Some(1),
        },
    )
    .unwrap();
    let program = sw.program().clone();
    let r = tern_stf::run(&s, &mut sw, &program);
    assert_pass(&r, 3, 0);
}

#[test]
fn packet_redirect_resubmit() {
    // "port 3 only": nothing may leave on any other port either.
    assert_pass(&run(PACKET_REDIRECT, "packet_redirect_resubmit.stf"), 1, 0);
}

#[test]
fn packet_redirect_recirculate() {
    assert_pass(
        &run(PACKET_REDIRECT, "packet_redirect_recirculate.stf"),
        1,
        0,
    );
}

#[test]
fn packet_redirect_exit_ingress() {
    assert_pass(
        &run(PACKET_REDIRECT, "packet_redirect_exit_ingress.stf"),
        1,
        0,
    );
}

#[test]
fn parser_error_scenarios() {
    let r = run(
        "targets/simple_switch/tests/testdata/parser_error.json",
        "parser_error.stf",
    );
    assert_pass(&r, 3, 0);
}

#[test]
fn truncate_keeps_32_bytes() {
    let r = run(
        "targets/simple_switch/tests/testdata/truncate.json",
        "truncate.stf",
    );
    assert_pass(&r, 1, 0);
    assert_eq!(r.expectations[0].got.as_ref().map(Vec::len), Some(32));
}

#[test]
fn recirc_preserves_and_reparses() {
    let r = run(
        "targets/simple_switch/tests/testdata/recirc.json",
        "recirc.stf",
    );
    assert_pass(&r, 1, 0);
}

#[test]
fn simple_router_forwarding() {
    let r = run(
        "targets/simple_router/simple_router.json",
        "simple_router.stf",
    );
    assert_pass(&r, 2, 0);
    assert!(r.warnings.is_empty(), "{r}");
}

#[test]
fn simple_router_unconfigured_leaves_on_port_0() {
    let r = run(
        "targets/simple_router/simple_router.json",
        "simple_router_unconfigured.stf",
    );
    assert_pass(&r, 1, 0);
}

#[test]
fn queueing_basic() {
    let r = run(
        "targets/simple_switch/tests/testdata/queueing.json",
        "queueing.stf",
    );
    assert_pass(&r, 1, 0);
    assert_eq!(r.expectations[0].got.as_ref().map(Vec::len), Some(273));
}

#[test]
fn l2_switch_on_simple_switch_never_floods() {
    let r = run(
        "targets/l2_switch/l2_switch.json",
        "l2_switch_on_simple_switch.stf",
    );
    assert_pass(&r, 1, 0);
}

/// A wrong expectation must fail, and the report must point at the first differing nibble.
#[test]
fn wrong_expectation_is_reported_as_failure() {
    let text = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_baseline.stf"))
        .unwrap()
        .replace("expect 2 01 02 $", "expect 2 01 03 $");
    let s = tern_stf::parse(&text, "baseline_wrong").unwrap();
    let mut sw = switch(PACKET_REDIRECT);
    let program = sw.program().clone();
    let r = tern_stf::run(&s, &mut sw, &program);
    assert!(!r.passed());
    assert_eq!(r.expectations[0].outcome, Outcome::Mismatch { nibble: 3 });
    let text = r.to_string();
    assert!(text.starts_with("FAIL baseline_wrong"), "{text}");
    assert!(text.contains("expected 0103$"), "{text}");
    assert!(text.contains("got      0102"), "{text}");
}

/// A frame on a port that only appears in `packet` lines is a failure (silence rule).
#[test]
fn output_on_input_only_port_fails() {
    let text = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_multicast.stf"))
        .unwrap()
        .replace("expect 1 0202 $\n", "");
    let s = tern_stf::parse(&text, "multicast_missing_expect").unwrap();
    let mut sw = switch(PACKET_REDIRECT);
    let program = sw.program().clone();
    let r = tern_stf::run(&s, &mut sw, &program);
    assert!(!r.passed(), "{r}");
    assert_eq!(r.unexpected.len(), 1);
    assert_eq!(r.unexpected[0].port, 1);
    assert_eq!(r.unexpected[0].data, vec![0x02, 0x02]);
}

/// An expectation with no frame is a failure ("expected packets not received").
#[test]
fn missing_frame_fails() {
    let text = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_baseline.stf")).unwrap()
        + "expect 5 00\n";
    let s = tern_stf::parse(&text, "missing").unwrap();
    let mut sw = switch(PACKET_REDIRECT);
    let program = sw.program().clone();
    let r = tern_stf::run(&s, &mut sw, &program);
    assert!(!r.passed());
    let miss: Vec<_> = r
        .expectations
        .iter()
        .filter(|e| e.outcome == Outcome::Missing)
        .collect();
    assert_eq!(miss.len(), 1);
    assert_eq!(miss[0].port, 5);
}

/// A bad name in an `add` fails the test with the line of the command.
#[test]
fn unknown_table_is_an_error_with_position() {
    let s = tern_stf::parse("add no_such_table f1:1 _nop()\npacket 1 00\n", "bad.stf").unwrap();
    let mut sw = switch(PACKET_REDIRECT);
    let program = sw.program().clone();
    let r = tern_stf::run(&s, &mut sw, &program);
    assert!(!r.passed());
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].pos.line, 1);
    assert!(
        r.to_string()
            .contains("bad.stf:1:1: add: no table named 'no_such_table'"),
        "{r}"
    );
}

fn run_text(json: &str, text: &str) -> StfReport {
    let s = tern_stf::parse(text, "inline.stf").unwrap_or_else(|e| panic!("{e}"));
    let mut sw = switch(json);
    let program = sw.program().clone();
    tern_stf::run(&s, &mut sw, &program)
}

/// A command the switch rejects (duplicate entry) is only a warning, as with p4c's CLI; the
/// first entry stays in effect.
#[test]
fn rejected_command_is_a_warning_not_a_failure() {
    let base = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_baseline.stf")).unwrap();
    let text = base.replace(
        "expect 2",
        "add t_ingress_1 hdrA.f1:0x01 metaA.f1:0x00 _set_port(port:3)\nexpect 2",
    );
    let r = run_text(PACKET_REDIRECT, &text);
    assert!(r.passed(), "{r}");
    assert_eq!(r.warnings.len(), 1, "{r}");
    assert!(
        r.warnings[0].message.contains("DUPLICATE_ENTRY"),
        "{}",
        r.warnings[0].message
    );
}

/// `wait`, `remove all`, `check_counter` and `= id` are ignored as in p4c.
#[test]
fn ignored_commands_do_not_change_the_verdict() {
    let base = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_baseline.stf")).unwrap();
    let text = base.replace("_set_port(port:2)", "_set_port(port:2) = e1")
        + "wait\nremove all\ncheck_counter cnt(e1) packets == 12345\n";
    let r = run_text(PACKET_REDIRECT, &text);
    assert!(r.passed(), "{r}");
    assert_eq!(
        r.notes
            .iter()
            .filter(|n| n.message.contains("ignored"))
            .count(),
        3
    );
}

/// A bare `expect <port>` and `no_packet` fail, as they do with p4c's BMv2 runner.
#[test]
fn bare_expect_and_no_packet_fail() {
    let base = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_baseline.stf")).unwrap();
    let r = run_text(
        PACKET_REDIRECT,
        &base.replace("expect 2 01 02 $", "expect 2"),
    );
    assert!(!r.passed());
    assert_eq!(r.expectations[0].outcome, Outcome::Bare);
    let r = run_text(PACKET_REDIRECT, &(base + "no_packet\n"));
    assert!(!r.passed());
    assert_eq!(r.errors.len(), 1);
    assert_eq!(r.errors[0].command, "no_packet");
}

/// Pass-through counter, register and meter commands reach the switch (dot-suffix names).
#[test]
fn pass_through_externs() {
    let json = "targets/simple_switch/tests/CLI_tests/testdata/indirect_res.json";
    let r = run_text(
        json,
        "register_write my_register 1 99\nregister_read my_register 1\nregister_reset my_register\n\
         register_read my_register 1\ncounter_write my_indirect_counter 2 5 500\n\
         counter_read my_indirect_counter 2\nmeter_set_rates my_indirect_meter 0 0.5:10 1:20\n\
         meter_get_rates my_indirect_meter 0\nregister_read my_register 16\ncounter_read nope 0\n",
    );
    assert!(r.passed(), "{r}");
    let notes: Vec<&str> = r.notes.iter().map(|n| n.message.as_str()).collect();
    assert!(notes.contains(&"my_register[1]= 99"), "{notes:?}");
    assert!(notes.contains(&"my_register[1]= 0"), "{notes:?}");
    assert!(
        notes.contains(&"my_indirect_counter[2]= (500 bytes, 5 packets)"),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n.contains("0: info rate = 0.5, burst size = 10")),
        "{notes:?}"
    );
    let warnings: Vec<&str> = r.warnings.iter().map(|n| n.message.as_str()).collect();
    assert_eq!(
        warnings,
        vec![
            "rejected: Invalid register operation (INVALID_INDEX)",
            "rejected: Invalid counter name (nope)"
        ]
    );
}

/// Expectations may precede their packet; each port's list is consumed in file order.
#[test]
fn per_port_order_across_packets() {
    let text = "setdefault t_ingress_1 _nop()\nsetdefault t_ingress_2 _nop()\n\
                setdefault t_egress _nop()\nsetdefault t_exit set_hdr()\n\
                add t_ingress_1 hdrA.f1:0x01 metaA.f1:0x00 _set_port(port:2)\n\
                add t_ingress_1 hdrA.f1:0x02 metaA.f1:0x00 _set_port(port:2)\n\
                expect 2 0102\nexpect 2 02 03 ff $\npacket 1 01000000\npacket 1 02000000 ff\n";
    let r = run_text(PACKET_REDIRECT, text);
    assert!(r.passed(), "{r}");
    // Swapping the two expectations makes both fail.
    let swapped = text.replace(
        "expect 2 0102\nexpect 2 02 03 ff $",
        "expect 2 02 03 ff $\nexpect 2 0102",
    );
    let r = run_text(PACKET_REDIRECT, &swapped);
    assert!(!r.passed());
    assert_eq!(r.met_count(), 0);
}
