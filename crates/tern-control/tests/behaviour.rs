//! Command behaviour beyond the golden files: priorities, direct resources, timeouts, value
//! sets, multicast maps, and BMv2-style errors for bad input.

use tern_control::{Cli, PreType};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::Runtime;

const FIX: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/fixtures/bmv2");

fn setup(json: &str) -> (Switch, Cli) {
    let text = std::fs::read_to_string(format!("{FIX}/{json}")).expect("read json");
    let sw = Switch::from_json(&text, SwitchOptions::default()).expect("load switch");
    let cli = Cli::new(&tern_model::load(&text).expect("load model"));
    (sw, cli)
}

const GRPC: &str = "targets/simple_switch_grpc/tests/testdata";
const CLI_T: &str = "targets/simple_switch/tests/CLI_tests/testdata";

#[test]
fn ternary_table_priorities_and_dump() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{GRPC}/ternary.json"));
    let out = cli.execute(&mut sw, "table_add ter send_1 0x0a00&&&0xff00 => 7");
    assert_eq!(
        out,
        "Adding entry to ternary match table ter\n\
         match key:           TERNARY-0a:00 &&& ff:00\n\
         action:              send_1\n\
         runtime data:        \n\
         Entry has been added with handle 0\n"
    );
    // The priority is required for ternary tables.
    assert_eq!(
        cli.execute(&mut sw, "table_add ter send_2 0x0a00&&&0xff00 =>"),
        "Error: Table is ternary, but could not extract a valid priority from args\n"
    );
    // Same key and priority again: the switch refuses it.
    let dup = cli.execute(
        &mut sw,
        "table_add ingress.ter ingress.send_2 0x0a00&&&0xff00 => 7",
    );
    assert!(
        dup.ends_with("Invalid table operation (DUPLICATE_ENTRY)\n"),
        "{dup}"
    );
    assert_eq!(
        cli.execute(&mut sw, "table_dump_entry ter 0"),
        "Dumping entry 0x0\nMatch key:\n* hdr.f1              : TERNARY   0a00 &&& ff00\n\
         Priority: 7\nAction entry: ingress.send_1 - \n"
    );
    assert_eq!(
        cli.execute(&mut sw, "table_dump_entry_from_key ter 0x0a00&&&0xff00 7"),
        cli.execute(&mut sw, "table_dump_entry ter 0")
    );
    assert_eq!(
        cli.execute(&mut sw, "table_add ter send_1 0x0a00 => 7"),
        "Invalid match key: Invalid ternary value 0x0a00, use '&&&' to separate key and mask\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "table_modify ter send_2 0"),
        "Modifying entry 0 for ternary match table ter\n"
    );
    assert!(cli
        .execute(&mut sw, "table_dump ter")
        .contains("Action entry: ingress.send_2 - \n"));
    assert_eq!(
        cli.execute(&mut sw, "table_delete ter 0"),
        "Deleting entry 0 from ter\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "table_delete ter 0"),
        "Deleting entry 0 from ter\nInvalid table operation (INVALID_HANDLE)\n"
    );
    assert_eq!(cli.execute(&mut sw, "table_num_entries ter"), "0\n");
}

#[test]
fn show_and_info() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{GRPC}/ternary.json"));
    assert_eq!(
        cli.execute(&mut sw, "table_info ter"),
        format!(
            "{:<30} [implementation=None, mk=hdr.f1(ternary, 16)]\n{}\n\
             {:<30} []\n{:<30} []\n{:<30} []\n",
            "ingress.ter",
            "*".repeat(80),
            "NoAction",
            "ingress.send_1",
            "ingress.send_2"
        )
    );
    let help = cli.execute(&mut sw, "help");
    assert!(help.starts_with("\nDocumented commands (type help <topic>):\n"));
    for name in Cli::command_names() {
        assert!(help.contains(name), "help lacks {name}");
    }
    assert_eq!(
        cli.execute(&mut sw, "help table_delete"),
        "Delete entry from a match table: table_delete <table name> <entry handle>\n"
    );
    assert_eq!(cli.execute(&mut sw, "help nope"), "*** No help on nope\n");
}

#[test]
fn direct_counter_and_meter() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{GRPC}/counter.json"));
    let add = cli.execute(&mut sw, "table_add t_redirect port_redirect 64 =>");
    assert!(
        add.ends_with("Entry has been added with handle 0\n"),
        "{add}"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_write cntr 0 3 300"),
        "writing to direct counter for table t_redirect\ncntr[0] has been updated\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_read cntr 0"),
        "this is the direct counter for table t_redirect\ncntr[0]= (300 bytes, 3 packets)\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_reset cntr"),
        "this is the direct counter for table t_redirect\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_read cntr 0"),
        "this is the direct counter for table t_redirect\ncntr[0]= (0 bytes, 0 packets)\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_read cntr 9"),
        "this is the direct counter for table t_redirect\nInvalid table operation (INVALID_HANDLE)\n"
    );

    let (mut sw, mut cli) = setup(&format!("{GRPC}/meter.json"));
    cli.execute(&mut sw, "table_add t_redirect port_redirect 1 =>");
    assert_eq!(
        cli.execute(&mut sw, "meter_set_rates mtr 0 0.5:10 2.25:20"),
        ""
    );
    assert_eq!(
        cli.execute(&mut sw, "meter_get_rates mtr 0"),
        "0: info rate = 0.5, burst size = 10\n1: info rate = 2.25, burst size = 20\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "meter_set_rates mtr 0 0.5:10"),
        "Error: Invalid number of rates, expected 2 but got 1\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "meter_set_rates mtr 0 0.5:10 x:1"),
        "Error: Error while parsing rates\n"
    );
}

#[test]
fn indexed_resources() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{CLI_T}/indirect_res.json"));
    assert_eq!(
        cli.execute(&mut sw, "register_write my_register 3 0x10"),
        "Error: Bad format for value, must be an integer\n"
    );
    assert_eq!(cli.execute(&mut sw, "register_write my_register 3 77"), "");
    assert_eq!(
        cli.execute(&mut sw, "register_read my_register 3"),
        "my_register[3]= 77\n"
    );
    let all = cli.execute(&mut sw, "register_read my_register");
    assert!(all.starts_with("my_register= 0, 0, 0, 77, 0"), "{all}");
    assert_eq!(
        cli.take_stderr(),
        "register index omitted, reading entire array\n"
    );
    assert_eq!(cli.execute(&mut sw, "register_reset my_register"), "");
    assert_eq!(
        cli.execute(&mut sw, "register_read my_register 3"),
        "my_register[3]= 0\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "register_read my_register -1"),
        "Invalid register operation (INVALID_INDEX)\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_write my_indirect_counter 2 5 500"),
        "my_indirect_counter[2] has been updated\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_read my_indirect_counter 2"),
        "my_indirect_counter[2]= (500 bytes, 5 packets)\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_reset my_indirect_counter"),
        ""
    );
    assert_eq!(
        cli.execute(&mut sw, "counter_read my_indirect_counter 2"),
        "my_indirect_counter[2]= (0 bytes, 0 packets)\n"
    );
}

#[test]
fn entry_timeouts() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{GRPC}/digest.json"));
    let add = cli.execute(&mut sw, "table_add smac NoAction 00:11:22:33:44:55 =>");
    assert!(
        add.contains("match key:           EXACT-00:11:22:33:44:55\n"),
        "{add}"
    );
    assert_eq!(
        cli.execute(&mut sw, "table_set_timeout smac 0 5000"),
        "Setting a 5000 ms timeout for entry 0\n"
    );
    let e = cli.execute(&mut sw, "table_dump_entry smac 0");
    assert!(
        e.contains("Life: ") && e.contains("timeout is 5000ms\n"),
        "{e}"
    );
    assert_eq!(
        cli.execute(&mut sw, "table_set_timeout tbl_act 0 5000"),
        "Error: Table tbl_act does not support entry timeouts\n"
    );
}

#[test]
fn parser_value_sets() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup("tests/testdata/parse_vset.json");
    assert_eq!(cli.execute(&mut sw, "pvs_add pv1 0x0800"), "");
    assert_eq!(cli.execute(&mut sw, "pvs_add pv1 0x86dd"), "");
    assert_eq!(cli.execute(&mut sw, "pvs_get pv1"), "0800\n86dd\n");
    assert_eq!(
        cli.execute(&mut sw, "pvs_add pv1 0x10000"),
        "Error: Input is too large, it should fit within 16 bits\n"
    );
    assert_eq!(cli.execute(&mut sw, "pvs_remove pv1 0x0800"), "");
    assert_eq!(cli.execute(&mut sw, "pvs_get pv1"), "86dd\n");
    assert_eq!(cli.execute(&mut sw, "pvs_clear pv1"), "");
    assert_eq!(cli.execute(&mut sw, "pvs_get pv1"), "");
    assert_eq!(
        cli.execute(&mut sw, "pvs_get nope"),
        "Error: Invalid parser value set name (nope)\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "show_pvs"),
        format!(
            "{:<30} [compressed bitwidth:16]\n{:<30} [compressed bitwidth:16]\n",
            "pv1", "pv2"
        )
    );
}

#[test]
fn multicast_plain_pre_and_errors() {
    tern_fixtures::require!();
    let (mut sw, cli) = setup(&format!("{CLI_T}/ecmp.json"));
    let mut cli = cli.with_pre(PreType::SimplePre);
    assert_eq!(
        cli.execute(&mut sw, "mc_mgrp_create 3"),
        "Creating multicast group 3\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_create 7 0 3"),
        "Creating node with rid 7 and with port map 1001\nnode was created with handle 0\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_create 7 1 1"),
        "Error: Found duplicate port number '1'\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_create 7 -1"),
        "Error: '-1' is not a valid port number\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_update 0 2"),
        "Updating node 0 with port map 100\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_associate 3 0"),
        "Associating node 0 to multicast group 3\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_set_lag_membership 1 2"),
        "Error: Cannot execute this command with this type of PRE, SimplePreLAG is required\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_dump"),
        "==========\nMC ENTRIES\n**********\nmgrp(3)\n  -> (L1h=0, rid=7) -> (ports=[2], lags=[])\n\
         ==========\nLAGS\nNone for this PRE type\n==========\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_dissociate 3 0"),
        "Dissociating node 0 from multicast group 3\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_destroy 0"),
        "Destroying node 0\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mc_node_destroy 0"),
        "Destroying node 0\nInvalid PRE operation (INVALID_L1_HANDLE)\n"
    );
    let mut none = cli.clone().with_pre(PreType::None);
    assert_eq!(
        none.execute(&mut sw, "mc_dump"),
        "Error: Cannot execute this command without packet replication engine\n"
    );
}

#[test]
fn mirroring_and_switch_commands() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{CLI_T}/ecmp.json"));
    assert_eq!(cli.execute(&mut sw, "mirroring_add 5 7"), "");
    assert_eq!(
        cli.execute(&mut sw, "mirroring_get 5"),
        "MirroringSessionConfig(port=7, mgid=None)\n"
    );
    assert_eq!(cli.execute(&mut sw, "mirroring_add_mc 6 9"), "");
    assert_eq!(
        cli.execute(&mut sw, "mirroring_get 6"),
        "MirroringSessionConfig(port=None, mgid=9)\n"
    );
    assert_eq!(cli.execute(&mut sw, "mirroring_delete 5"), "");
    assert_eq!(
        cli.execute(&mut sw, "mirroring_delete 5"),
        "Invalid mirroring operation (SESSION_NOT_FOUND)\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "mirroring_add x 7"),
        "Error: Bad format for mirror_id, expected integer\n"
    );
    assert_eq!(cli.execute(&mut sw, "set_queue_depth 64"), "");
    assert_eq!(cli.execute(&mut sw, "set_queue_rate 1000 2 0"), "");
    let info = cli.execute(&mut sw, "switch_info");
    assert!(
        info.starts_with("device_id                : 0\nthrift_port              : 9090\n"),
        "{info}"
    );
    assert!(info.contains("notifications_socket     : "), "{info}");
    let t = cli.execute(&mut sw, "get_time_elapsed");
    assert!(t.trim().parse::<u64>().is_ok(), "{t}");
    assert_eq!(cli.execute(&mut sw, "greet"), "hello\n");
    cli.execute(
        &mut sw,
        "table_indirect_create_member ecmp_group set_nhop 10.0.0.1 1",
    );
    assert_eq!(
        sw.act_prof_get_members("ecmp_action_profile")
            .unwrap()
            .len(),
        1
    );
    assert_eq!(cli.execute(&mut sw, "reset_state"), "");
    assert_eq!(
        sw.act_prof_get_members("ecmp_action_profile")
            .unwrap()
            .len(),
        0
    );
    let dir = tern_fixtures::scratch("control-cfg");
    let path = dir.join("config.json");
    let p = path.to_string_lossy().to_string();
    assert_eq!(
        cli.execute(&mut sw, &format!("write_config_to_file {p}")),
        ""
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), sw.get_config());
}

/// Bad inputs: each gives the BMv2-style message and never panics.
#[test]
fn bad_inputs_table() {
    tern_fixtures::require!();
    let (mut router, mut router_cli) = setup("targets/simple_router/simple_router.json");
    let (mut ecmp, mut ecmp_cli) = setup(&format!("{CLI_T}/ecmp.json"));
    let long = format!("table_add {}", "x".repeat(100_000));
    let long_num = format!(
        "table_add ipv4_lpm set_nhop 1/32 => 1{} 1",
        "0".repeat(5000)
    );
    let cases: Vec<(&str, String)> = vec![
        ("table_add nope a 1 => 2", "Error: Invalid table name (nope)\n".into()),
        ("table_add ipv4_lpm nope 1/32 =>", "Error: Table ipv4_lpm has no action nope\n".into()),
        ("table_add ipv4_lpm set_nhop", "Error: Insufficient number of args\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0.1/32 10.0.0.2/32 => 1 2",
         "Error: Table ipv4_lpm needs 1 key fields\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0.1/32 => 1",
         "Error: Action set_nhop needs 2 parameters\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0.1 => 10.0.0.1 1",
         "Invalid match key: Invalid LPM value 10.0.0.1, use '/' to separate prefix and length\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0/8 => 10.0.0.1 1",
         "Invalid match key: Error while parsing 10.0.0 - Invalid IPv4 address\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0.1/8 => 10.0.0.1 0x10000",
         "Invalid runtime data: Error while parsing 0x10000 - Parameter is too large\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0.1/8 => 10.0.0.1 zz",
         "Invalid runtime data: Error while parsing zz - Invalid input, could not cast to integer, try in hex with 0x prefix\n".into()),
        ("table_add ipv4_lpm set_nhop 10.0.0.1/x => 10.0.0.1 1",
         "Invalid match key: Invalid prefix length in LPM value 10.0.0.1/x\n".into()),
        (long_num.as_str(),
         format!("Invalid runtime data: Error while parsing 1{} - Parameter is too large\n", "0".repeat(5000))),
        ("table_delete ipv4_lpm", "Error: Wrong number of args, expected 2 but got 1\n".into()),
        ("table_delete ipv4_lpm abc", "Error: Bad format for entry handle\n".into()),
        ("table_modify ipv4_lpm set_nhop x 1 2", "Error: Bad format for entry handle\n".into()),
        ("table_indirect_add forward 10.0.0.1 => 0",
         "Error: Cannot run this command on non-indirect table\n".into()),
        ("table_indirect_add ecmp_group 10.0.0.1/8 =>",
         "Error: Invalid arguments, could not find handle\n".into()),
        ("act_prof_create_group nope", "Error: Invalid action profile name (nope)\n".into()),
        ("act_prof_create_member ecmp_action_profile nope",
         "Error: Action profile 'ecmp_action_profile' has no action 'nope'\n".into()),
        ("act_prof_dump_member ecmp_action_profile 9",
         "Invalid table operation (INVALID_MBR_HANDLE)\n".into()),
        ("act_prof_dump_group ecmp_action_profile -1",
         "Invalid table operation (INVALID_GRP_HANDLE)\n".into()),
        ("counter_read nope 0", "Error: Invalid counter name (nope)\n".into()),
        ("meter_get_rates nope 0", "Error: Invalid meter name (nope)\n".into()),
        ("register_read nope 0", "Error: Invalid register name (nope)\n".into()),
        ("mc_node_create x", "Error: Bad format for rid\n".into()),
        ("mc_node_associate 1 x", "Error: Bad format for node handle\n".into()),
        ("mc_mgrp_create", "Error: Wrong number of args, expected 1 but got 0\n".into()),
        ("set_crc16_parameters nope 1 2 3 true false", "Error: Invalid crc16_custom name (nope)\n".into()),
        ("load_new_config_file /nonexistent/x.json", "Error: Not a valid filename\n".into()),
        ("swap_configs", "Swapping configs\nInvalid swap operation (CONFIG_SWAP_DISABLED)\n".into()),
        ("frobnicate 1 2", "*** Unknown syntax: frobnicate 1 2\n".into()),
        ("!ls", "*** Unknown syntax: !ls\n".into()),
        ("\u{0}\u{1}\u{7f}garbage\u{fffd}", "*** Unknown syntax: \u{0}\u{1}\u{7f}garbage\u{fffd}\n".into()),
        (long.as_str(), "Error: Insufficient number of args\n".into()),
        ("   ", String::new()),
    ];
    for (input, want) in &cases {
        // Commands naming the indirect table / profile run against ecmp.json.
        let got = if input.contains("ecmp") || input.contains("table_indirect_add ") {
            ecmp_cli.execute(&mut ecmp, input)
        } else {
            router_cli.execute(&mut router, input)
        };
        assert_eq!(&got, want, "input: {}", &input[..input.len().min(80)]);
    }
    router_cli.execute(&mut router, "table_num_entries ipv4_lpm");
    assert!(!router_cli.last_command_failed());
    router_cli.execute(&mut router, "table_num_entries nope");
    assert!(router_cli.last_command_failed());
    router_cli.execute(&mut router, "frobnicate");
    assert!(router_cli.last_command_failed());
    assert_eq!(router.mt_get_num_entries("ipv4_lpm").unwrap(), 0);
    assert_eq!(ecmp.mt_get_num_entries("ecmp_group").unwrap(), 0);
}

/// Every command except those that write files named by their argument.
fn fuzzable_commands() -> Vec<&'static str> {
    Cli::command_names()
        .iter()
        .copied()
        .filter(|c| !matches!(*c, "write_config_to_file" | "serialize_state"))
        .collect()
}

/// Random lines built from command names, resource names and value-ish tokens never panic.
#[test]
fn fuzz_random_lines_never_panic() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{CLI_T}/ecmp.json"));
    let names = fuzzable_commands();
    let tokens = [
        "ecmp_group",
        "ipv4_lpm",
        "ecmp_action_profile",
        "set_nhop",
        "_drop",
        "=>",
        "|",
        "0",
        "1",
        "-1",
        "4294967296",
        "0x",
        "0xffffffffffffffffffffffffffff",
        "10.0.0.1/32",
        "10.0.0.1/99",
        "1&&&2",
        "1->0",
        "aa:bb:cc:dd:ee:ff",
        "::1",
        "1.5:3",
        "nan:1",
        "inf:1",
        "-0.0:0",
        "/",
        "&&&",
        "->",
        "\u{e9}",
        "9999999999999999999999",
        "1_0",
        "true",
        "",
        "?",
    ];
    let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..20_000 {
        let mut line = String::new();
        if next() % 10 != 0 {
            line.push_str(names[(next() % names.len() as u64) as usize]);
        }
        for _ in 0..(next() % 7) {
            line.push(' ');
            line.push_str(tokens[(next() % tokens.len() as u64) as usize]);
        }
        let out = cli.execute(&mut sw, &line);
        let _ = cli.take_stderr();
        // Every output is complete lines.
        assert!(out.is_empty() || out.ends_with('\n'), "{line:?} -> {out:?}");
    }
}

/// Names resolve by unique dot-suffix; a suffix shared by two tables resolves to neither.
#[test]
fn dot_suffix_resolution_and_ambiguity() {
    tern_fixtures::require!();
    let text = std::fs::read_to_string(format!("{FIX}/{GRPC}/ternary.json")).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tables = j["pipelines"][0]["tables"].as_array_mut().unwrap();
    let mut twin = tables[0].clone();
    twin["name"] = "other.ter".into();
    twin["id"] = 1000.into();
    tables.push(twin);
    let text = serde_json::to_string(&j).unwrap();
    let mut sw = Switch::from_json(&text, SwitchOptions::default()).expect("load twin");
    let mut cli = Cli::new(&tern_model::load(&text).unwrap());
    assert_eq!(
        cli.execute(&mut sw, "table_num_entries ter"),
        "Error: Invalid table name (ter)\n"
    );
    assert_eq!(cli.execute(&mut sw, "table_num_entries ingress.ter"), "0\n");
    assert_eq!(cli.execute(&mut sw, "table_num_entries other.ter"), "0\n");
    // Whole components only: `er` is not a suffix of `ingress.ter`.
    assert_eq!(
        cli.execute(&mut sw, "table_num_entries er"),
        "Error: Invalid table name (er)\n"
    );
    // Actions resolve by suffix too, and are echoed as typed.
    let out = cli.execute(&mut sw, "table_add other.ter send_1 1&&&1 => 3");
    assert!(out.contains("action:              send_1\n"), "{out}");
    assert!(
        out.ends_with("Entry has been added with handle 0\n"),
        "{out}"
    );
    assert_eq!(sw.mt_get_num_entries("other.ter").unwrap(), 1);
    assert_eq!(sw.mt_get_num_entries("ingress.ter").unwrap(), 0);
}

/// Random lines against programs with ternary keys, direct meters/counters, value sets and
/// timeouts, under every PRE type, never panic (in the CLI or the switch behind it).
#[test]
fn fuzz_many_programs_never_panic() {
    tern_fixtures::require!();
    let programs = [
        format!("{GRPC}/ternary.json"),
        format!("{GRPC}/meter.json"),
        format!("{GRPC}/counter.json"),
        format!("{GRPC}/digest.json"),
        "tests/testdata/parse_vset.json".to_string(),
        format!("{CLI_T}/indirect_res.json"),
        format!("{CLI_T}/table_dump_extra.json"),
    ];
    let tokens = [
        "0",
        "1",
        "2",
        "-1",
        "7",
        "65535",
        "4294967295",
        "4294967296",
        "0x1ff",
        "0xffff&&&0xff00",
        "0&&&0",
        "5->1",
        "1->5",
        "10.0.0.1/33",
        "10.0.0.1/0",
        "::/200",
        "1e308:1",
        "nan:1",
        "-1:5",
        "1:-5",
        "0.5:1",
        "inf:4294967295",
        "=>",
        "|",
        "ter",
        "ingress.ter",
        "send_1",
        "mtr",
        "cntr",
        "t_redirect",
        "port_redirect",
        "smac",
        "pv1",
        "pv2",
        "my_register",
        "my_indirect_counter",
        "my_indirect_meter",
        "empty_key",
        "_nop",
        "NoAction",
        "0x",
        "99999999999999999999999999999999999999",
        "\u{0}",
        "\u{202e}",
        "1_000",
    ];
    let pres = [PreType::SimplePreLag, PreType::SimplePre, PreType::None];
    let names = fuzzable_commands();
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for (i, prog) in programs.iter().enumerate() {
        let (mut sw, cli) = setup(prog);
        let mut cli = cli.with_pre(pres[i % pres.len()]);
        for _ in 0..4_000 {
            let mut line = names[(next() % names.len() as u64) as usize].to_string();
            for _ in 0..(next() % 8) {
                line.push(' ');
                line.push_str(tokens[(next() % tokens.len() as u64) as usize]);
            }
            let out = cli.execute(&mut sw, &line);
            assert!(out.is_empty() || out.ends_with('\n'), "{line:?} -> {out:?}");
        }
    }
}

/// The whole action-profile life cycle through the CLI, and the legacy forms' refusal of
/// shared profiles.
#[test]
fn indirect_table_lifecycle() {
    tern_fixtures::require!();
    let (mut sw, mut cli) = setup(&format!("{CLI_T}/ecmp.json"));
    let mut run = |line: &str| cli.execute(&mut sw, line);
    assert_eq!(
        run("act_prof_create_member ecmp_action_profile set_nhop 10.0.0.1 1"),
        "Member has been created with handle 0\n"
    );
    assert_eq!(
        run("act_prof_create_member ecmp_action_profile set_nhop 10.0.0.2 2"),
        "Member has been created with handle 1\n"
    );
    assert_eq!(
        run("act_prof_modify_member ecmp_action_profile set_nhop 1 => 0.0.0.0 3"),
        ""
    );
    assert_eq!(
        run("act_prof_dump_member ecmp_action_profile 1"),
        "Dumping member 1\nAction entry: set_nhop - 00, 03\n"
    );
    assert_eq!(
        run("act_prof_create_group ecmp_action_profile"),
        "Group has been created with handle 0\n"
    );
    assert_eq!(
        run("act_prof_add_member_to_group ecmp_action_profile 0 0"),
        ""
    );
    assert_eq!(
        run("act_prof_add_member_to_group ecmp_action_profile 1 0"),
        ""
    );
    assert_eq!(
        run("act_prof_add_member_to_group ecmp_action_profile 1 0"),
        "Invalid table operation (MBR_ALREADY_IN_GRP)\n"
    );
    assert_eq!(
        run("act_prof_dump ecmp_action_profile"),
        "==========\nMEMBERS\n**********\nDumping member 0\nAction entry: set_nhop - 0a000001, 01\n\
         **********\nDumping member 1\nAction entry: set_nhop - 00, 03\n==========\nGROUPS\n\
         **********\nDumping group 0\nMembers: [0, 1]\n"
    );
    assert_eq!(
        run("act_prof_remove_member_from_group ecmp_action_profile 1 0"),
        ""
    );
    assert_eq!(
        run("act_prof_dump_group ecmp_action_profile 0"),
        "Dumping group 0\nMembers: [0]\n"
    );
    assert_eq!(run("table_indirect_set_default ecmp_group 1"), "");
    assert!(run("table_dump ecmp_group")
        .ends_with("Dumping default entry\nIndex: member(1)\n==========\n"));
    assert_eq!(
        run("table_indirect_set_default_with_group ecmp_group 0"),
        ""
    );
    assert!(run("table_dump ecmp_group")
        .ends_with("Dumping default entry\nIndex: group(0)\n==========\n"));
    assert_eq!(run("table_indirect_reset_default ecmp_group"), "");
    assert!(run("table_dump ecmp_group").ends_with("Dumping default entry\nEMPTY\n==========\n"));
    assert_eq!(
        run("table_indirect_add ecmp_group 10.1.0.0/16 => 1"),
        "Adding entry to indirect match table ecmp_group\nEntry has been added with handle 0\n"
    );
    assert_eq!(
        run("act_prof_delete_member ecmp_action_profile 1"),
        "Invalid table operation (MBR_STILL_USED)\n"
    );
    assert_eq!(
        run("table_indirect_delete ecmp_group 0"),
        "Deleting entry 0 from ecmp_group\n"
    );
    assert_eq!(run("act_prof_delete_member ecmp_action_profile 1"), "");
    assert_eq!(run("act_prof_delete_group ecmp_action_profile 0"), "");
    assert_eq!(
        run("table_indirect_delete forward 0"),
        "Error: Cannot run this command on non-indirect table\n"
    );

    // Two tables sharing one profile: the legacy forms refuse, the act_prof_* forms work.
    let text = std::fs::read_to_string(format!("{FIX}/{CLI_T}/ecmp.json")).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&text).unwrap();
    let tables = j["pipelines"][0]["tables"].as_array_mut().unwrap();
    let idx = tables
        .iter()
        .position(|t| t["name"] == "ecmp_group")
        .unwrap();
    let mut twin = tables[idx].clone();
    twin["name"] = "ecmp_group2".into();
    twin["id"] = 1000.into();
    tables.push(twin);
    let text = serde_json::to_string(&j).unwrap();
    let mut sw = Switch::from_json(&text, SwitchOptions::default()).expect("load shared");
    let mut cli = Cli::new(&tern_model::load(&text).unwrap());
    assert_eq!(
        cli.execute(&mut sw, "table_indirect_create_group ecmp_group2"),
        "Error: Legacy command does not work with shared action profiles\n"
    );
    assert_eq!(
        cli.execute(&mut sw, "act_prof_create_group ecmp_action_profile"),
        "Group has been created with handle 0\n"
    );
    // table_dump_group is not strictly deprecated: it works on shared profiles.
    assert_eq!(
        cli.execute(&mut sw, "table_dump_group ecmp_group2 0"),
        "Dumping group 0\nMembers: []\n"
    );
}

/// `load_new_config_file` stages a JSON on the switch and re-reads it locally; after
/// `swap_configs` the new program's names are the ones that resolve.
#[test]
fn load_and_swap_config() {
    tern_fixtures::require!();
    let text = std::fs::read_to_string(format!("{FIX}/{CLI_T}/ecmp.json")).unwrap();
    let opts = SwitchOptions {
        enable_swap: true,
        ..SwitchOptions::default()
    };
    let mut sw = Switch::from_json(&text, opts).unwrap();
    let mut cli = Cli::new(&tern_model::load(&text).unwrap());
    let new = format!("{FIX}/{GRPC}/ternary.json");
    assert_eq!(
        cli.execute(&mut sw, &format!("load_new_config_file {new}")),
        "Loading new Json config\n"
    );
    assert_eq!(cli.execute(&mut sw, "swap_configs"), "Swapping configs\n");
    assert_eq!(cli.execute(&mut sw, "table_num_entries ter"), "0\n");
    assert_eq!(
        cli.execute(&mut sw, "table_num_entries ecmp_group"),
        "Error: Invalid table name (ecmp_group)\n"
    );
    // A file that is not JSON is refused before reaching the switch.
    let dir = tern_fixtures::scratch("control-junk");
    let junk = dir.join("junk.json");
    std::fs::write(&junk, "not json").unwrap();
    assert_eq!(
        cli.execute(&mut sw, &format!("load_new_config_file {}", junk.display())),
        "Loading new Json config\nError: Not a valid JSON file\n"
    );
}
