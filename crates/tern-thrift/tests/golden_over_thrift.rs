//! BMv2's CLI golden tests (`runtime-cli.md` §4) with the switch behind the Thrift wire: the
//! text CLI downloads the JSON with `bm_get_config`, as simple_switch_CLI does, and drives the
//! served switch through `ThriftRuntime`. Every command's output must equal the expected block.

mod common;

use common::*;
use tern_control::{Cli, PreType};
use tern_runtime::Runtime;
use tern_thrift::{PreService, ThriftRuntime};

const DIR: &str = "targets/simple_switch/tests/CLI_tests/testdata";

fn run_golden(test: &str, json: &str, pre: PreType) {
    let (addr, _sw) = serve_fixture(&format!("{DIR}/{json}"), Default::default());
    let service = match pre {
        PreType::SimplePreLag => PreService::Lag,
        _ => PreService::Plain,
    };
    let mut rt = ThriftRuntime::connect_with(addr, service).unwrap();
    let program = tern_model::load(&rt.get_config()).expect("downloaded JSON loads");
    let mut cli = Cli::new(&program).with_pre(pre);
    let input = fixture(&format!("{DIR}/{test}.in"));
    let expected = fixture(&format!("{DIR}/{test}.out"));
    let parts: Vec<&str> = expected.split("????\n").collect();
    let blocks = &parts[1..parts.len() - 1];
    let commands: Vec<&str> = input.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(commands.len(), blocks.len(), "{test}: block count");
    for (i, (cmd, want)) in commands.iter().zip(blocks).enumerate() {
        let got = cli.execute(&mut rt, cmd);
        assert_eq!(&got, want, "{test}: command {i} `{cmd}`");
    }
    assert_eq!(
        rt.last_error(),
        None,
        "{test}: a transport-level failure happened"
    );
}

#[test]
fn table_dump_old() {
    tern_fixtures::require!();
    run_golden("table_dump_old", "ecmp.json", PreType::SimplePre);
}

#[test]
fn table_dump() {
    tern_fixtures::require!();
    run_golden("table_dump", "ecmp.json", PreType::SimplePre);
}

#[test]
fn table_dump_extra() {
    tern_fixtures::require!();
    run_golden(
        "table_dump_extra",
        "table_dump_extra.json",
        PreType::SimplePre,
    );
}

#[test]
fn indirect_res() {
    tern_fixtures::require!();
    run_golden("indirect_res", "indirect_res.json", PreType::SimplePre);
}

#[test]
fn mc_dump() {
    tern_fixtures::require!();
    run_golden("mc_dump", "ecmp.json", PreType::SimplePreLag);
}
