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
    tern_fixtures::require!();
    let r = run(PACKET_REDIRECT, "packet_redirect_baseline.stf");
    assert_pass(&r, 1, 0);
    assert_eq!(r.expectations[0].got.as_deref(), Some(&[0x01, 0x02][..]));
}

#[test]
fn packet_redirect_multicast() {
    tern_fixtures::require!();
    let r = run(PACKET_REDIRECT, "packet_redirect_multicast.stf");
    assert_pass(&r, 2, 0);
}

#[test]
fn packet_redirect_clone_i2e() {
    tern_fixtures::require!();
    assert_pass(&run(PACKET_REDIRECT, "packet_redirect_clone_i2e.stf"), 2, 0);
}

/// CloneI2E_Multicast: session 1 has a port *and* a group, which the STF pass-through commands
/// cannot express (each `mirroring_add*` replaces the session), so the session is set up
/// through the runtime API; the STF file's `mirroring_add 1 3` is replaced by it.
#[test]
fn packet_redirect_clone_i2e_multicast() {
    tern_fixtures::require!();
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
    tern_fixtures::require!();
    assert_pass(&run(PACKET_REDIRECT, "packet_redirect_clone_e2e.stf"), 2, 0);
}

#[test]
fn packet_redirect_clone_e2e_multicast() {
    tern_fixtures::require!();
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
    tern_fixtures::require!();
    // "port 3 only": nothing may leave on any other port either.
    assert_pass(&run(PACKET_REDIRECT, "packet_redirect_resubmit.stf"), 1, 0);
}

#[test]
fn packet_redirect_recirculate() {
    tern_fixtures::require!();
    assert_pass(
        &run(PACKET_REDIRECT, "packet_redirect_recirculate.stf"),
        1,
        0,
    );
}

#[test]
fn packet_redirect_exit_ingress() {
    tern_fixtures::require!();
    assert_pass(
        &run(PACKET_REDIRECT, "packet_redirect_exit_ingress.stf"),
        1,
        0,
    );
}

#[test]
fn parser_error_scenarios() {
    tern_fixtures::require!();
    let r = run(
        "targets/simple_switch/tests/testdata/parser_error.json",
        "parser_error.stf",
    );
    assert_pass(&r, 3, 0);
}

#[test]
fn truncate_keeps_32_bytes() {
    tern_fixtures::require!();
    let r = run(
        "targets/simple_switch/tests/testdata/truncate.json",
        "truncate.stf",
    );
    assert_pass(&r, 1, 0);
    assert_eq!(r.expectations[0].got.as_ref().map(Vec::len), Some(32));
}

#[test]
fn recirc_preserves_and_reparses() {
    tern_fixtures::require!();
    let r = run(
        "targets/simple_switch/tests/testdata/recirc.json",
        "recirc.stf",
    );
    assert_pass(&r, 1, 0);
}

#[test]
fn simple_router_forwarding() {
    tern_fixtures::require!();
    let r = run(
        "targets/simple_router/simple_router.json",
        "simple_router.stf",
    );
    assert_pass(&r, 2, 0);
    assert!(r.warnings.is_empty(), "{r}");
}

#[test]
fn simple_router_unconfigured_leaves_on_port_0() {
    tern_fixtures::require!();
    let r = run(
        "targets/simple_router/simple_router.json",
        "simple_router_unconfigured.stf",
    );
    assert_pass(&r, 1, 0);
}

#[test]
fn queueing_basic() {
    tern_fixtures::require!();
    let r = run(
        "targets/simple_switch/tests/testdata/queueing.json",
        "queueing.stf",
    );
    assert_pass(&r, 1, 0);
    assert_eq!(r.expectations[0].got.as_ref().map(Vec::len), Some(273));
}

#[test]
fn l2_switch_on_simple_switch_never_floods() {
    tern_fixtures::require!();
    let r = run(
        "targets/l2_switch/l2_switch.json",
        "l2_switch_on_simple_switch.stf",
    );
    assert_pass(&r, 1, 0);
}

/// A wrong expectation must fail, and the report must point at the first differing nibble.
#[test]
fn wrong_expectation_is_reported_as_failure() {
    tern_fixtures::require!();
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
    tern_fixtures::require!();
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
    tern_fixtures::require!();
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
    tern_fixtures::require!();
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
    tern_fixtures::require!();
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
    tern_fixtures::require!();
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
    tern_fixtures::require!();
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
    tern_fixtures::require!();
    let json = "targets/simple_switch/tests/CLI_tests/testdata/indirect_res.json";
    let r = run_text(
        json,
        "register_write my_register 1 99\nregister_read my_register 1\nregister_reset my_register\n\
         register_read my_register 1\ncounter_write my_indirect_counter 2 5 500\n\
         counter_read my_indirect_counter 2\nmeter_set_rates my_indirect_meter 0 0.5:10 1:20\n\
         meter_get_rates my_indirect_meter 0\nregister_read my_register 16\ncounter_read nope 0\n\
         meter_set_rates my_indirect_meter 0 0.5:10\n",
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
            "rejected: Error: Invalid counter name (nope)",
            "rejected: Error: Invalid number of rates, expected 2 but got 1",
        ]
    );
}

/// Expectations may precede their packet; each port's list is consumed in file order.
#[test]
fn per_port_order_across_packets() {
    tern_fixtures::require!();
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

const GRPC: &str = "targets/simple_switch_grpc/tests/testdata/";

#[test]
fn ternary_larger_stf_priority_wins() {
    tern_fixtures::require!();
    let r = run(&format!("{GRPC}ternary.json"), "ternary_priority.stf");
    assert_pass(&r, 3, 0);
}

/// Reversing the priorities changes which entry wins (the priority really is sent).
#[test]
fn ternary_priority_reversed_changes_the_winner() {
    tern_fixtures::require!();
    let text = std::fs::read_to_string(format!("{STF_DIR}ternary_priority.stf"))
        .unwrap()
        .replace("add ter 10", "add ter 30");
    let r = run_text(&format!("{GRPC}ternary.json"), &text);
    assert!(!r.passed());
    // 0a01 now goes to port 1: the port-2 expectation misses it and port 1 gets an extra frame.
    assert_eq!(r.unexpected.len(), 1, "{r}");
    assert_eq!(r.unexpected[0].port, 1);
}

fn strict(json: &str, text: &str) -> StfReport {
    let s = tern_stf::parse(text, "strict.stf").unwrap_or_else(|e| panic!("{e}"));
    let mut sw = switch(json);
    let program = sw.program().clone();
    let opts = tern_stf::RunOptions {
        strict_counters: true,
    };
    tern_stf::run_with_options(&s, &mut sw, &program, opts)
}

#[test]
fn direct_counter_checks() {
    tern_fixtures::require!();
    let json = format!("{GRPC}counter.json");
    let text = std::fs::read_to_string(format!("{STF_DIR}counter_direct.stf")).unwrap();
    // p4c semantics: ignored.
    assert_pass(&run_text(&json, &text), 3, 0);
    // strict: evaluated and true.
    let r = strict(&json, &text);
    assert!(r.passed(), "{r}");
    assert!(
        r.notes
            .iter()
            .any(|n| n.message == "cntr(e1) = 2 packets, 12 bytes: packets == 2 holds"),
        "{r}"
    );
    // strict and false: a failure naming the line.
    let r = strict(&json, &text.replace("packets == 2", "packets == 3"));
    assert!(!r.passed());
    assert_eq!(r.errors.len(), 1, "{r}");
    assert_eq!(r.errors[0].pos.line, 12);
    assert!(r.errors[0].message.contains("expected packets == 3"), "{r}");
    // unknown label
    let r = strict(&json, &text.replace("cntr(e1) bytes", "cntr(e9) bytes"));
    assert!(!r.passed());
    assert!(r.errors[0].message.contains("'e9'"), "{r}");
}

#[test]
fn indexed_counter_checks() {
    tern_fixtures::require!();
    let json = "targets/simple_switch/tests/CLI_tests/testdata/indirect_res.json";
    let text = "setdefault m_table m_action()\npacket 1 000102030405\npacket 1 0001\n\
                check_counter my_indirect_counter(1) packets == 2\n\
                check_counter my_indirect_counter(1) bytes == 8\n\
                check_counter my_indirect_counter(0) packets == 0\n\
                register_read my_register 1\n";
    let r = strict(json, text);
    assert!(r.passed(), "{r}");
    assert!(
        r.notes.iter().any(|n| n.message == "my_register[1]= 171"),
        "{r}"
    );
    let r = strict(json, &text.replace("bytes == 8", "bytes < 8"));
    assert!(!r.passed());
}

/// A tiny deterministic generator (xorshift64*).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn pick<'a>(&mut self, v: &[&'a str]) -> &'a str {
        v[(self.next() % v.len() as u64) as usize]
    }
    fn hex(&mut self, nibbles: usize) -> String {
        (0..nibbles)
            .map(|_| char::from_digit((self.next() % 16) as u32, 16).unwrap())
            .collect()
    }
}

/// Random but well-formed scripts (names from the program, random values, packets, odd
/// ports) run against the real data plane: the runner must never panic and every
/// expectation must get an outcome.
#[test]
fn random_scripts_never_panic() {
    tern_fixtures::require!();
    let tables = [
        "t_ingress_1",
        "t_ingress_2",
        "t_egress",
        "t_exit",
        "nope",
        "t_",
    ];
    let keys = [
        "hdrA.f1",
        "metaA.f1",
        "instance_type",
        "f2",
        "hdrA.f2",
        "zz",
    ];
    let actions = [
        "_nop()",
        "_set_port(port:2)",
        "_set_port(port:511)",
        "_set_port(port:0x1ff)",
        "_multicast(mgrp:1)",
        "_multicast(mgrp:15)",
        "_exit()",
        "_resubmit()",
        "_recirculate()",
        "_clone_i2e(mirror_id:1)",
        "_clone_e2e(mirror_id:2)",
        "set_hdr()",
        "_set_port()",
        "_set_port(port:99999)",
    ];
    let mut rng = Rng(7);
    for round in 0..300 {
        let mut text = String::new();
        for _ in 0..(5 + rng.next() % 25) {
            let line = match rng.next() % 12 {
                0 | 1 => {
                    let mut l = format!("add {}", rng.pick(&tables));
                    if rng.next() % 3 < 2 {
                        l += &format!(" {}", rng.next() % 40);
                    }
                    for _ in 0..(rng.next() % 4) {
                        let v = match rng.next() % 4 {
                            0 => {
                                let n = 1 + (rng.next() % 3) as usize;
                                format!("0x{}", rng.hex(n))
                            }
                            1 => format!("{}", rng.next() % 300),
                            2 => format!("0x{}**", rng.hex(1)),
                            _ => format!("0b{}", rng.next() % 2),
                        };
                        l += &format!(" {}:{v}", rng.pick(&keys));
                    }
                    format!("{l} {}", rng.pick(&actions))
                }
                2 => format!("setdefault {} {}", rng.pick(&tables), rng.pick(&actions)),
                3 => format!("mirroring_add {} {}", rng.next() % 4, rng.next() % 8),
                4 => format!("mirroring_add_mc {} {}", rng.next() % 4, rng.next() % 4),
                5 => format!("mc_mgrp_create {}", rng.next() % 4),
                6 => format!(
                    "mc_node_create {} {} {}",
                    rng.next() % 4,
                    rng.next() % 8,
                    rng.next() % 600
                ),
                7 => format!("mc_node_associate {} {}", rng.next() % 4, rng.next() % 4),
                8 => {
                    let port = rng.next() % 5;
                    let n = (rng.next() % 10) as usize;
                    let data = rng.hex(n);
                    let exact = if rng.next() & 1 == 0 { " $" } else { "" };
                    format!("expect {port} {data}{exact}")
                }
                _ => {
                    let port = rng.next() % 5;
                    let n = 2 * (1 + rng.next() % 12) as usize;
                    format!("packet {port} {}", rng.hex(n))
                }
            };
            text.push_str(&line);
            text.push('\n');
        }
        let s = tern_stf::parse(&text, "random.stf")
            .unwrap_or_else(|e| panic!("round {round}: generated text must parse: {e}\n{text}"));
        let n_expect = s
            .commands
            .iter()
            .filter(|c| matches!(c.command, tern_stf::Command::Expect { .. }))
            .count();
        let mut sw = switch(PACKET_REDIRECT);
        let program = sw.program().clone();
        let r = tern_stf::run(&s, &mut sw, &program);
        assert_eq!(r.expectations.len(), n_expect, "round {round}\n{text}\n{r}");
        let _ = r.to_string();
    }
}

/// The same program in the legacy JSON form (transitions without `type`) behaves the same.
#[test]
fn simple_router_legacy_json_forwarding() {
    tern_fixtures::require!();
    let r = run("mininet/simple_router.json", "simple_router.stf");
    assert_pass(&r, 2, 0);
}

/// serialize.json is simple_router plus a direct meter on ipv4_lpm (unconfigured meters
/// mark green): forwarding is unchanged.
#[test]
fn simple_router_with_direct_meter_forwarding() {
    tern_fixtures::require!();
    let r = run("tests/testdata/serialize.json", "simple_router.stf");
    assert_pass(&r, 2, 0);
}

/// Translation errors point at the key, value or parameter at fault. Names p4c's runner
/// cannot resolve fail the test; values it leaves to the CLI are only rejected (a warning).
#[test]
fn translation_errors_point_at_the_culprit() {
    tern_fixtures::require!();
    let r = run_text(
        PACKET_REDIRECT,
        "add t_ingress_1 hdrA.f1:1 zz:2 _nop()\n\
         add t_ingress_2 3 hdrA.f1:0x1 instance_type:12 _nop()\n\
         add t_ingress_1 hdrA.f1:1 _set_port(port:1.2.3)\n\
         add t_ingress_1 hdrA.f1:1 _sett_port(port:1)\n\
         add t_ingress_1 hdrA.f1:0x100 _nop()\n",
    );
    let at: Vec<(u32, u32)> = r
        .errors
        .iter()
        .map(|e| (e.pos.line, e.pos.column))
        .collect();
    assert_eq!(at, vec![(1, 27), (2, 45), (4, 27)], "{r}");
    assert!(r.errors[0].message.contains("no key 'zz'"), "{r}");
    assert!(
        r.errors[1].message.contains("needs a hex or binary value"),
        "{r}"
    );
    assert!(
        r.errors[2].message.contains("has no action '_sett_port'"),
        "{r}"
    );
    assert!(r.to_string().contains("inline.stf:2:45: add:"), "{r}");
    let at: Vec<(u32, u32)> = r
        .warnings
        .iter()
        .map(|e| (e.pos.line, e.pos.column))
        .collect();
    assert_eq!(at, vec![(3, 37), (5, 25)], "{r}");
    assert!(r.warnings[0].message.contains("could not cast"), "{r}");
    assert!(r.warnings[1].message.contains("too large"), "{r}");
}

/// simple-switch.md §10.6: `egress_spec` 511 drops. A file of only `packet` lines asserts
/// silence on its ports; the runner's counters show nothing left anywhere.
#[test]
fn drop_port_emits_nothing() {
    tern_fixtures::require!();
    let base = std::fs::read_to_string(format!("{STF_DIR}packet_redirect_baseline.stf")).unwrap();
    let text = base
        .replace("_set_port(port:2)", "_set_port(port:511)")
        .replace("expect 2 01 02 $\n", "");
    let r = run_text(PACKET_REDIRECT, &text);
    assert!(r.passed(), "{r}");
    assert_eq!((r.packets_sent, r.frames_out), (1, 0), "{r}");
    // The same file with port 2 still expected fails: the frame never comes.
    let r = run_text(PACKET_REDIRECT, &(text + "expect 2 0102\n"));
    assert!(!r.passed());
    assert_eq!(r.expectations[0].outcome, Outcome::Missing);
}

/// MANIFEST §5.5: config swap. The STF runner drives each phase on the same switch; the swap
/// itself goes through the runtime API (STF has no command for it).
#[test]
fn config_swap_phases() {
    tern_fixtures::require!();
    let dir = format!("{FIXTURES}targets/simple_switch/tests/testdata/");
    let j1 = std::fs::read_to_string(format!("{dir}swap_1.json")).unwrap();
    let j2 = std::fs::read_to_string(format!("{dir}swap_2.json")).unwrap();
    let opts = SwitchOptions {
        enable_swap: true,
        ..SwitchOptions::default()
    };
    let mut sw = Switch::from_json(&j1, opts).unwrap();
    let p1 = sw.program().clone();
    let p2 = tern_model::load(&j2).unwrap();
    let r = tern_stf::run(&script("swap_1.stf"), &mut sw, &p1);
    assert_pass(&r, 2, 0);
    sw.load_new_config(&j2).unwrap();
    // Staged only: traffic follows swap_1 (step 2).
    let traffic = "expect 1 0000 $\npacket 0 0000\nexpect 2 ab00 $\npacket 0 ab00\n";
    let s = tern_stf::parse(traffic, "staged.stf").unwrap();
    assert_pass(&tern_stf::run(&s, &mut sw, &p1), 2, 0);
    // Configure the staged program (step 3).
    let r = tern_stf::run(&script("swap_2_pending.stf"), &mut sw, &p2);
    assert_pass(&r, 3, 0);
    assert!(r.warnings.is_empty(), "{r}");
    sw.swap_configs().unwrap();
    let r = tern_stf::run(&script("swap_2_live.stf"), &mut sw, &p2);
    assert_pass(&r, 2, 0);
}

/// `add` on an indirect (action-selector) table: the CLI's `table_add` is refused by the
/// switch, which p4c only prints; a direct table of the same program still works.
#[test]
fn add_on_indirect_table_is_rejected_not_fatal() {
    tern_fixtures::require!();
    let json = "targets/simple_switch/tests/CLI_tests/testdata/ecmp.json";
    let r = run_text(
        json,
        "add ecmp_group dstAddr:0x0a000001 set_nhop(nhop_ipv4:10.0.0.1, port:1)\n\
         add forward nhop_ipv4:0x0a000001 set_dmac(dmac:00:00:00:00:00:01)\n",
    );
    assert!(r.passed(), "{r}");
    assert_eq!(r.warnings.len(), 1, "{r}");
    assert_eq!(r.warnings[0].pos.line, 1);
    assert!(
        r.warnings[0]
            .message
            .starts_with("rejected: Invalid table operation"),
        "{r}"
    );
}
