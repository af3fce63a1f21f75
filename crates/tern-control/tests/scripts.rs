//! The command files shipped with BMv2 apply cleanly, and their effects are visible.

use tern_control::Cli;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::Runtime;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

fn setup(json: &str) -> (Switch, Cli) {
    let text = std::fs::read_to_string(format!("{FIX}/{json}")).expect("read json");
    let sw = Switch::from_json(&text, SwitchOptions::default()).expect("load switch");
    let cli = Cli::new(&tern_model::load(&text).expect("load model"));
    (sw, cli)
}

fn run(sw: &mut Switch, cli: &mut Cli, commands: &str) -> (usize, String) {
    let text = std::fs::read_to_string(format!("{FIX}/{commands}")).expect("read commands");
    let mut out = Vec::new();
    let n = cli
        .run_script(sw, &mut text.as_bytes(), &mut out)
        .expect("run script");
    (n, String::from_utf8(out).expect("utf8"))
}

fn assert_clean(out: &str) {
    for line in out.lines() {
        assert!(
            !(line.starts_with("Error") || line.starts_with("Invalid") || line.starts_with("***")),
            "error line in output: {line}\n--- full output ---\n{out}"
        );
    }
}

#[test]
fn simple_router_commands() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup("targets/simple_router/simple_router.json");
    let (n, out) = run(&mut sw, &mut cli, "targets/simple_router/commands.txt");
    assert_eq!(n, 9);
    assert_clean(&out);
    assert_eq!(sw.mt_get_num_entries("ipv4_lpm").unwrap(), 2);
    assert_eq!(sw.mt_get_num_entries("send_frame").unwrap(), 2);
    assert!(out.contains(
        "Adding entry to lpm match table ipv4_lpm\nmatch key:           LPM-0a:00:01:0a/32\n\
         action:              set_nhop\nruntime data:        0a:00:01:0a\t00:02\n\
         Entry has been added with handle 1\n"
    ));
}

#[test]
fn stress_test_commands() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup("mininet/simple_router.json");
    let (n, out) = run(&mut sw, &mut cli, "mininet/stress_test_commands.txt");
    assert!(n >= 9, "only {n} commands");
    assert_clean(&out);
    assert!(sw.mt_get_num_entries("forward").unwrap() >= 2);
}

#[test]
fn l2_switch_commands() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup("targets/l2_switch/l2_switch.json");
    let (n, out) = run(&mut sw, &mut cli, "targets/l2_switch/commands.txt");
    assert_eq!(n, 7);
    assert_clean(&out);
    let dump = cli.execute(&mut sw, "mc_dump");
    assert_eq!(
        dump,
        "==========\nMC ENTRIES\n**********\nmgrp(1)\n  -> (L1h=0, rid=0) -> (ports=[1], lags=[])\n\
         \x20 -> (L1h=1, rid=1) -> (ports=[2], lags=[])\n==========\nLAGS\n==========\n"
    );
    let dflt = cli.execute(&mut sw, "table_dump dmac");
    assert!(dflt.ends_with("Dumping default entry\nAction entry: broadcast - \n==========\n"));
}
