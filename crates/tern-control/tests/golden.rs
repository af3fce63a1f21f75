//! BMv2's CLI golden tests (`runtime-cli.md` §4): each command's output must equal the
//! corresponding `????`-delimited block of the `.out` file byte for byte.

use tern_control::{Cli, PreType};
use tern_dataplane::{Switch, SwitchOptions};

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/bmv2/targets/simple_switch/tests/CLI_tests/testdata"
);

fn run_golden(test: &str, json: &str, pre: PreType) {
    let read = |name: &str| {
        std::fs::read_to_string(format!("{DIR}/{name}"))
            .unwrap_or_else(|e| panic!("cannot read {name}: {e}"))
    };
    let json_text = read(json);
    let mut sw = Switch::from_json(&json_text, SwitchOptions::default()).expect("load");
    let program = tern_model::load(&json_text).expect("model");
    let mut cli = Cli::new(&program).with_pre(pre);
    let input = read(&format!("{test}.in"));
    let expected = read(&format!("{test}.out"));
    // Blocks between consecutive `????` lines.
    let parts: Vec<&str> = expected.split("????\n").collect();
    let blocks = &parts[1..parts.len() - 1];
    let commands: Vec<&str> = input.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(commands.len(), blocks.len(), "{test}: block count");
    for (i, (cmd, want)) in commands.iter().zip(blocks).enumerate() {
        let got = cli.execute(&mut sw, cmd);
        assert_eq!(&got, want, "{test}: command {i} `{cmd}`");
    }
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

#[test]
fn deprecated_forms_write_notice_to_stderr_only() {
    tern_fixtures::require!();
    let json_text = std::fs::read_to_string(format!("{DIR}/ecmp.json")).unwrap();
    let mut sw = Switch::from_json(&json_text, SwitchOptions::default()).unwrap();
    let mut cli = Cli::new(&tern_model::load(&json_text).unwrap());
    let out = cli.execute(&mut sw, "table_indirect_create_group ecmp_group");
    assert_eq!(out, "Group has been created with handle 0\n");
    assert_eq!(
        cli.take_stderr(),
        "This is a deprecated command, use 'act_prof_create_group' instead\n"
    );
    // table_dump_member is not strictly deprecated: no notice.
    let out = cli.execute(&mut sw, "table_dump_group ecmp_group 0");
    assert_eq!(out, "Dumping group 0\nMembers: []\n");
    assert_eq!(cli.take_stderr(), "");
}
