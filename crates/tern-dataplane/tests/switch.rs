//! End-to-end tests of the engine on BMv2's own fixtures: load acceptance, simple_router, and
//! the simple_switch packet scenarios of `fixtures/bmv2/MANIFEST.md` §5.

use std::path::{Path, PathBuf};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, MirroringSession, OutputPacket, PacketPath, Runtime};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/bmv2");
    if p.is_dir() {
        Some(p)
    } else {
        println!("skipping: {} not found", p.display());
        None
    }
}

fn load(rel: &str) -> Option<Switch> {
    let dir = fixtures()?;
    let text = std::fs::read_to_string(dir.join(rel)).unwrap();
    Some(
        Switch::from_json(&text, SwitchOptions::default()).unwrap_or_else(|e| panic!("{rel}: {e}")),
    )
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

fn run(sw: &mut Switch, port: u32, data: &[u8]) -> Vec<OutputPacket> {
    let mut out = Vec::new();
    sw.process_packet(port, data, &mut out);
    out
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn ex(b: &[u8]) -> MatchParam {
    MatchParam::Exact(b.to_vec())
}

#[test]
fn fixtures_load_or_are_rejected_like_simple_switch() {
    let Some(dir) = fixtures() else { return };
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    assert_eq!(files.len(), 41);
    let required =
        "Field standard_metadata.egress_port is required by switch target but is not defined";
    let rejected: &[(&str, &str)] = &[
        ("tests/testdata/empty_config.json", required),
        ("tests/testdata/config_options.json", required),
        ("tests/testdata/one_header.json", required),
        ("tests/testdata/logging.json", required),
        (
            "targets/pna_nic/tests/testdata/pna-demo-L2-one-table.json",
            required,
        ),
        (
            "tests/testdata/one_extern.json",
            "/extern_instances/0: Invalid reference to extern type 'DummyExtern'",
        ),
    ];
    let mut loaded = 0;
    for f in &files {
        let rel = f.strip_prefix(&dir).unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(f).unwrap();
        let r = Switch::from_json(&text, SwitchOptions::default());
        match rejected.iter().find(|(n, _)| *n == rel) {
            Some((_, msg)) => assert_eq!(r.unwrap_err().to_string(), *msg, "{rel}"),
            None => {
                r.unwrap_or_else(|e| panic!("{rel}: {e}"));
                loaded += 1;
            }
        }
    }
    assert_eq!(loaded, 35);
}

fn udp_frame(dst_ip: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = hex("000400000000 000000000001 0800");
    let mut ip = vec![0x45, 0, 0, 50, 0, 0, 0, 0, ttl, 17, 0, 0, 10, 0, 0, 1];
    ip.extend_from_slice(&dst_ip);
    let c = tern_dataplane::hash::csum16(&ip);
    ip[10] = (c >> 8) as u8;
    ip[11] = c as u8;
    f.extend_from_slice(&ip);
    f.resize(64, 0xab);
    f
}

#[test]
fn simple_router_forwards_with_commands_txt_entries() {
    let Some(mut sw) = load("targets/simple_router/simple_router.json") else {
        return;
    };
    let frame = udp_frame([10, 0, 1, 10], 64);
    // Without entries: the first table misses with no default, the pipeline ends, port 0.
    let out = run(&mut sw, 1, &frame);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 0);
    assert_eq!(out[0].data, frame);

    for t in ["send_frame", "forward", "ipv4_lpm"] {
        sw.mt_set_default_action(t, "_drop", &[]).unwrap();
    }
    assert_eq!(
        sw.mt_add_entry(
            "send_frame",
            &[ex(&[0, 1])],
            "rewrite_mac",
            &[hex("00aabb000000")],
            None
        )
        .unwrap(),
        0
    );
    assert_eq!(
        sw.mt_add_entry(
            "send_frame",
            &[ex(&[0, 2])],
            "rewrite_mac",
            &[hex("00aabb000001")],
            None
        )
        .unwrap(),
        1
    );
    sw.mt_add_entry(
        "forward",
        &[ex(&[10, 0, 0, 10])],
        "set_dmac",
        &[hex("000400000000")],
        None,
    )
    .unwrap();
    sw.mt_add_entry(
        "forward",
        &[ex(&[10, 0, 1, 10])],
        "set_dmac",
        &[hex("000400000001")],
        None,
    )
    .unwrap();
    let lpm = |ip: [u8; 4]| MatchParam::Lpm {
        key: ip.to_vec(),
        prefix_len: 32,
    };
    sw.mt_add_entry(
        "ipv4_lpm",
        &[lpm([10, 0, 0, 10])],
        "set_nhop",
        &[vec![10, 0, 0, 10], vec![0, 1]],
        None,
    )
    .unwrap();
    sw.mt_add_entry(
        "ipv4_lpm",
        &[lpm([10, 0, 1, 10])],
        "set_nhop",
        &[vec![10, 0, 1, 10], vec![0, 2]],
        None,
    )
    .unwrap();
    assert_eq!(sw.mt_get_num_entries("ipv4_lpm").unwrap(), 2);

    let out = run(&mut sw, 1, &frame);
    assert_eq!(out.len(), 1, "{out:?}");
    let o = &out[0];
    assert_eq!(o.port, 2);
    assert_eq!(o.data.len(), 64);
    assert_eq!(&o.data[0..6], &hex("000400000001")[..]);
    assert_eq!(&o.data[6..12], &hex("00aabb000001")[..]);
    assert_eq!(o.data[14 + 8], 63, "TTL decremented");
    let expected = udp_frame([10, 0, 1, 10], 63);
    assert_eq!(
        &o.data[14..34],
        &expected[14..34],
        "IPv4 checksum recomputed"
    );
    assert_eq!(&o.data[34..], &frame[34..], "payload untouched");

    // Unknown destination: ipv4_lpm default _drop.
    assert!(run(&mut sw, 1, &udp_frame([10, 0, 9, 9], 64)).is_empty());
    // Other direction.
    let out = run(&mut sw, 2, &udp_frame([10, 0, 0, 10], 64));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    assert_eq!(&out[0].data[6..12], &hex("00aabb000000")[..]);

    // Control-plane errors are BMv2's.
    let e = sw
        .mt_add_entry(
            "forward",
            &[ex(&[10, 0, 0, 10])],
            "set_dmac",
            &[hex("000400000000")],
            None,
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "Invalid table operation (DUPLICATE_ENTRY)");
    let e = sw
        .mt_add_entry("nope", &[], "set_dmac", &[], None)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Invalid table operation (INVALID_TABLE_NAME)"
    );
    let e = sw
        .mt_add_entry(
            "forward",
            &[ex(&[10, 0, 0, 11])],
            "rewrite_mac",
            &[hex("000400000000")],
            None,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "Invalid table operation (INVALID_ACTION_NAME)"
    );
    let e = sw
        .mt_add_entry(
            "forward",
            &[ex(&[10, 0, 0])],
            "set_dmac",
            &[hex("000400000000")],
            None,
        )
        .unwrap_err();
    assert_eq!(e.to_string(), "Invalid table operation (BAD_MATCH_KEY)");
    sw.mt_delete_entry("send_frame", 0).unwrap();
    let e = sw.mt_delete_entry("send_frame", 0).unwrap_err();
    assert_eq!(e.to_string(), "Invalid table operation (INVALID_HANDLE)");
    assert_eq!(
        sw.mt_add_entry(
            "send_frame",
            &[ex(&[0, 1])],
            "rewrite_mac",
            &[hex("00aabb000000")],
            None
        )
        .unwrap(),
        1 << 24
    );
    assert_eq!(
        sw.mt_get_entry("send_frame", 0).unwrap_err().to_string(),
        "Invalid table operation (EXPIRED_HANDLE)"
    );
}

/// packet_redirect.json set-up common to every scenario (MANIFEST §5.1).
fn redirect() -> Option<Switch> {
    let mut sw = load("targets/simple_switch/tests/testdata/packet_redirect.json")?;
    sw.mt_set_default_action("t_ingress_1", "_nop", &[])
        .unwrap();
    sw.mt_set_default_action("t_ingress_2", "_nop", &[])
        .unwrap();
    sw.mt_set_default_action("t_egress", "_nop", &[]).unwrap();
    sw.mt_set_default_action("t_exit", "set_hdr", &[]).unwrap();
    Some(sw)
}

fn sorted(mut v: Vec<OutputPacket>) -> Vec<(u32, Vec<u8>)> {
    v.sort_by(|a, b| (a.port, &a.data).cmp(&(b.port, &b.data)));
    v.into_iter().map(|o| (o.port, o.data)).collect()
}

fn set_port(sw: &mut Switch, f1: u8, meta: u8, port: u8) {
    sw.mt_add_entry(
        "t_ingress_1",
        &[ex(&[f1]), ex(&[meta])],
        "_set_port",
        &[vec![0, port]],
        None,
    )
    .unwrap();
}

fn tern(v: u8, m: u8) -> MatchParam {
    MatchParam::Ternary {
        key: vec![v],
        mask: vec![m],
    }
}

fn it(v: u32, m: u32) -> MatchParam {
    MatchParam::Ternary {
        key: v.to_be_bytes().to_vec(),
        mask: m.to_be_bytes().to_vec(),
    }
}

#[test]
fn packet_redirect_baseline_and_exit() {
    let Some(mut sw) = redirect() else { return };
    set_port(&mut sw, 1, 0, 2);
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("01000000"))),
        vec![(2, hex("0102"))]
    );
    sw.mt_add_entry("t_ingress_1", &[ex(&[7]), ex(&[0])], "_exit", &[], None)
        .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("07000000"))),
        vec![(0, hex("0704 0000"))]
    );
}

#[test]
fn packet_redirect_multicast() {
    let Some(mut sw) = redirect() else { return };
    sw.mt_add_entry(
        "t_ingress_1",
        &[ex(&[2]), ex(&[0])],
        "_multicast",
        &[vec![0, 1]],
        None,
    )
    .unwrap();
    sw.mc_mgrp_create(1).unwrap();
    let n1 = sw.mc_node_create(1, &[1], &[]).unwrap();
    let n2 = sw.mc_node_create(2, &[2], &[]).unwrap();
    sw.mc_node_associate(1, n1).unwrap();
    sw.mc_node_associate(1, n2).unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("02000000"))),
        vec![(1, hex("0202")), (2, hex("0202"))]
    );
}

#[test]
fn packet_redirect_clone_i2e() {
    let Some(mut sw) = redirect() else { return };
    set_port(&mut sw, 3, 0, 2);
    sw.mt_add_entry(
        "t_ingress_2",
        &[ex(&[3]), it(0, 0)],
        "_clone_i2e",
        &[vec![0, 0, 0, 1]],
        Some(1),
    )
    .unwrap();
    // Unconfigured session: no clone.
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("03000000"))),
        vec![(2, hex("0302"))]
    );
    sw.mirroring_session_add(
        1,
        MirroringSession {
            port: Some(3),
            mgid: None,
        },
    )
    .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("03000000"))),
        vec![(2, hex("0302")), (3, hex("03040000"))]
    );
    // Session with a port and a group.
    sw.mc_mgrp_create(1).unwrap();
    let n = sw.mc_node_create(0, &[4], &[]).unwrap();
    sw.mc_node_associate(1, n).unwrap();
    sw.mirroring_session_add(
        1,
        MirroringSession {
            port: Some(3),
            mgid: Some(1),
        },
    )
    .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("03000000"))),
        vec![(2, hex("0302")), (3, hex("03040000")), (4, hex("03040000"))]
    );
}

#[test]
fn packet_redirect_clone_e2e() {
    let Some(mut sw) = redirect() else { return };
    set_port(&mut sw, 4, 0, 2);
    sw.mt_add_entry(
        "t_egress",
        &[ex(&[4]), it(0, 0xffff_ffff), tern(0, 0xff)],
        "_clone_e2e",
        &[vec![0, 0, 0, 1]],
        Some(1),
    )
    .unwrap();
    sw.mirroring_session_add(
        1,
        MirroringSession {
            port: Some(3),
            mgid: None,
        },
    )
    .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("04000000"))),
        vec![(2, hex("0402")), (3, hex("0402"))]
    );
    sw.mc_mgrp_create(1).unwrap();
    let n = sw.mc_node_create(0, &[4], &[]).unwrap();
    sw.mc_node_associate(1, n).unwrap();
    sw.mirroring_session_add(
        1,
        MirroringSession {
            port: Some(3),
            mgid: Some(1),
        },
    )
    .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("04000000"))),
        vec![(2, hex("0402")), (3, hex("0402")), (4, hex("0402"))]
    );
}

#[test]
fn packet_redirect_resubmit() {
    let Some(mut sw) = redirect() else { return };
    set_port(&mut sw, 5, 0, 2);
    set_port(&mut sw, 5, 1, 3);
    sw.mt_add_entry(
        "t_ingress_2",
        &[ex(&[5]), it(0, 0xffff_ffff)],
        "_resubmit",
        &[],
        Some(1),
    )
    .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("05000000"))),
        vec![(3, hex("0502"))]
    );
}

#[test]
fn packet_redirect_recirculate() {
    let Some(mut sw) = redirect() else { return };
    set_port(&mut sw, 6, 0, 2);
    set_port(&mut sw, 6, 1, 3);
    sw.mt_add_entry(
        "t_egress",
        &[ex(&[6]), it(0, 0xffff_ffff), tern(0, 0xff)],
        "_recirculate",
        &[],
        Some(1),
    )
    .unwrap();
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("060000000000"))),
        vec![(3, hex("0602"))]
    );
}

#[test]
fn parser_error_reaches_ingress() {
    let Some(mut sw) = load("targets/simple_switch/tests/testdata/parser_error.json") else {
        return;
    };
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("00000000"))),
        vec![(1, hex("00000000"))]
    );
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("0000"))),
        vec![(1, hex("00000001 0000"))]
    );
    assert_eq!(
        sorted(run(&mut sw, 1, &hex("000000ab"))),
        vec![(1, hex("00000002"))]
    );
}

#[test]
fn recirc_preserves_standard_metadata() {
    let Some(mut sw) = load("targets/simple_switch/tests/testdata/recirc.json") else {
        return;
    };
    assert_eq!(sorted(run(&mut sw, 1, &hex("00"))), vec![(1, hex("01ab"))]);
}

#[test]
fn truncate_cuts_the_emitted_packet() {
    let Some(mut sw) = load("targets/simple_switch/tests/testdata/truncate.json") else {
        return;
    };
    sw.mt_add_entry(
        "t_ingress",
        &[ex(&[1])],
        "_truncate",
        &[vec![0, 0, 0, 32], vec![0, 2]],
        None,
    )
    .unwrap();
    let mut pkt = vec![1u8];
    pkt.extend(std::iter::repeat_n(0xab, 127));
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    assert_eq!(out[0].data, pkt[..32].to_vec());
}

#[test]
fn queueing_metadata_is_written() {
    let Some(mut sw) = load("targets/simple_switch/tests/testdata/queueing.json") else {
        return;
    };
    sw.mt_set_default_action("t_ingress", "set_port", &[vec![0, 2]])
        .unwrap();
    sw.mt_set_default_action("t_egress", "copy_queueing_data", &[])
        .unwrap();
    let mut pkt = vec![0u8; 256];
    pkt[0] = 1;
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    assert_eq!(out[0].data.len(), 273);
    // queueing_hdr: enq_timestamp 48, enq_qdepth 24, deq_timedelta 32, deq_qdepth 24, qid 8.
    let q = &out[0].data[2..19];
    assert_eq!(&q[6..9], &[0, 0, 0], "enq_qdepth");
    assert_eq!(&q[13..16], &[0, 0, 0], "deq_qdepth");
    assert_eq!(q[16], 0, "qid");
    assert_eq!(&out[0].data[19..], &pkt[2..]);
}

#[test]
fn indexed_counters_meters_registers() {
    let Some(mut sw) = load("targets/simple_switch/tests/CLI_tests/testdata/indirect_res.json")
    else {
        return;
    };
    use tern_runtime::{CounterValue, MeterRate};
    assert_eq!(
        sw.counter_read("my_indirect_counter", 0).unwrap(),
        CounterValue::default()
    );
    assert_eq!(
        sw.counter_read("my_indirect_counter", 16)
            .unwrap_err()
            .to_string(),
        "Invalid counter operation (INVALID_INDEX)"
    );
    let r = |u, b| MeterRate {
        units_per_micros: u,
        burst_size: b,
    };
    sw.meter_set_rates("my_indirect_meter", 0, &[r(1.0, 1), r(2.0, 1)])
        .unwrap();
    assert_eq!(
        sw.meter_set_rates("my_indirect_meter", 16, &[r(1.0, 1), r(2.0, 1)])
            .unwrap_err()
            .to_string(),
        "Invalid meter operation (INVALID_INDEX)"
    );
    assert_eq!(
        sw.meter_set_rates("my_indirect_meter", 0, &[r(2.0, 1), r(1.0, 1)])
            .unwrap_err()
            .to_string(),
        "Invalid meter operation (INVALID_INFO_RATE_VALUE)"
    );
    assert_eq!(
        sw.meter_get_rates("my_indirect_meter", 0).unwrap(),
        vec![r(1.0, 1), r(2.0, 1)]
    );
    assert_eq!(
        sw.register_read("my_register", 16).unwrap_err().to_string(),
        "Invalid register operation (INVALID_INDEX)"
    );
    sw.register_write("my_register", 0, 1).unwrap();
    assert_eq!(sw.register_read("my_register", 0).unwrap(), 1);
    sw.register_write("my_register", 2, 0x1_0000_0005).unwrap();
    assert_eq!(
        sw.register_read("my_register", 2).unwrap(),
        5,
        "truncated to 32 bits"
    );

    // The keyless table's default action counts, meters and writes register cell 1.
    sw.mt_set_default_action("m_table", "m_action", &[])
        .unwrap();
    run(&mut sw, 0, &[0u8; 20]);
    run(&mut sw, 0, &[0u8; 30]);
    assert_eq!(
        sw.counter_read("my_indirect_counter", 1).unwrap(),
        CounterValue {
            bytes: 50,
            packets: 2
        }
    );
    assert_eq!(sw.register_read("my_register", 1).unwrap(), 0xab);
    assert_eq!(sw.register_read_all("my_register").unwrap().len(), 16);
    sw.counter_reset_all("my_indirect_counter").unwrap();
    assert_eq!(
        sw.counter_read("my_indirect_counter", 1).unwrap(),
        CounterValue::default()
    );
}

#[test]
fn header_stack_extract_and_pop() {
    let Some(mut sw) = load("tests/testdata/header_stack.json") else {
        return;
    };
    sw.mt_set_default_action("t1", "a1", &[vec![0xbe, 0xef]])
        .unwrap();
    // hdr[1].f1 := 0xbeef, then pop 1: hdr[0] <- hdr[1], hdr[1] invalid.
    let out = run(&mut sw, 0, &hex("0001 0002 0003 0004 ffff"));
    assert_eq!(sorted(out), vec![(0, hex("beef 0004 ffff"))]);
}

#[test]
fn direct_counter_counts_hits() {
    let Some(mut sw) = load("targets/simple_switch_grpc/tests/testdata/counter.json") else {
        return;
    };
    use tern_runtime::CounterValue;
    let h = sw
        .mt_add_entry(
            "t_redirect",
            &[ex(&[0, 0, 0, 10])],
            "port_redirect",
            &[],
            None,
        )
        .unwrap();
    let out = run(&mut sw, 3, &[7u8; 10]);
    assert_eq!(sorted(out), vec![(3, vec![7u8; 10])]);
    run(&mut sw, 3, &[7u8; 11]); // miss: not counted
    assert_eq!(
        sw.mt_read_counter("t_redirect", h).unwrap(),
        CounterValue {
            bytes: 10,
            packets: 1
        }
    );
    sw.mt_write_counter(
        "t_redirect",
        h,
        CounterValue {
            bytes: 1,
            packets: 2,
        },
    )
    .unwrap();
    assert_eq!(
        sw.mt_read_counter("t_redirect", h).unwrap(),
        CounterValue {
            bytes: 1,
            packets: 2
        }
    );
    assert_eq!(
        sw.counter_read("cntr", 0).unwrap_err().to_string(),
        "Invalid counter operation (INVALID_COUNTER_NAME)"
    );
}

#[test]
fn config_swap() {
    let Some(dir) = fixtures() else { return };
    let j1 = std::fs::read_to_string(dir.join("targets/simple_switch/tests/testdata/swap_1.json"))
        .unwrap();
    let j2 = std::fs::read_to_string(dir.join("targets/simple_switch/tests/testdata/swap_2.json"))
        .unwrap();
    let mut sw = Switch::from_json(&j1, SwitchOptions::default()).unwrap();
    assert_eq!(
        sw.load_new_config(&j2).unwrap_err().to_string(),
        "Invalid swap operation (CONFIG_SWAP_DISABLED)"
    );
    let mut sw2 = Switch::from_json(
        &j1,
        SwitchOptions {
            enable_swap: true,
            ..Default::default()
        },
    )
    .unwrap();
    assert_eq!(
        sw.swap_configs().unwrap_err().to_string(),
        "Invalid swap operation (CONFIG_SWAP_DISABLED)"
    );
    let sw = &mut sw2;
    sw.mt_set_default_action("t_ingress_1", "a11", &[]).unwrap();
    sw.mt_add_entry("t_ingress_1", &[ex(&[0xab])], "a12", &[], None)
        .unwrap();
    assert_eq!(run(sw, 0, &hex("0000"))[0].port, 1);
    assert_eq!(run(sw, 0, &hex("ab00"))[0].port, 2);
    assert_eq!(
        sw.swap_configs().unwrap_err().to_string(),
        "Invalid swap operation (NO_ONGOING_SWAP)"
    );
    sw.load_new_config(&j2).unwrap();
    assert_eq!(
        sw.load_new_config(&j2).unwrap_err().to_string(),
        "Invalid swap operation (ONGOING_SWAP)"
    );
    // Control operations address the pending config; traffic still follows the old one.
    sw.mt_set_default_action("t_ingress_2", "a21", &[]).unwrap();
    sw.mt_add_entry("t_ingress_2", &[ex(&[0xcd])], "a22", &[], None)
        .unwrap();
    assert_eq!(run(sw, 0, &hex("ab00"))[0].port, 2);
    sw.swap_configs().unwrap();
    assert_eq!(run(sw, 0, &hex("00000000"))[0].port, 3);
    assert_eq!(run(sw, 0, &hex("cd000000"))[0].port, 4);
    assert_eq!(sw.get_config(), j2);
}

#[test]
fn l2_switch_digest_on_simple_switch() {
    let Some(mut sw) = load("targets/l2_switch/l2_switch.json") else {
        return;
    };
    sw.mt_set_default_action("smac", "mac_learn", &[]).unwrap();
    sw.mt_set_default_action("dmac", "broadcast", &[]).unwrap();
    let frame = hex("ffffffffffff 0000000000aa 0800 00000000");
    let out = run(&mut sw, 3, &frame);
    // On simple_switch l2_switch never sets egress_spec or mcast_grp: port 0.
    assert_eq!(sorted(out), vec![(0, frame.clone())]);
    let d = sw.take_digests();
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].list_name, "mac_learn_digest");
    assert_eq!(d[0].fields, vec![hex("0000000000aa"), vec![0, 3]]);
    assert!(sw.take_digests().is_empty());
}

#[test]
fn ecmp_indirect_ws_selects_group_members() {
    let Some(mut sw) = load("targets/simple_switch/tests/CLI_tests/testdata/ecmp.json") else {
        return;
    };
    let prof = "ecmp_action_profile";
    let m0 = sw
        .act_prof_add_member(prof, "set_nhop", &[vec![10, 0, 0, 1], vec![0, 1]])
        .unwrap();
    let m1 = sw
        .act_prof_add_member(prof, "set_nhop", &[vec![10, 0, 0, 2], vec![0, 2]])
        .unwrap();
    assert_eq!((m0, m1), (0, 1));
    let g = sw.act_prof_create_group(prof).unwrap();
    sw.act_prof_add_member_to_group(prof, m1, g).unwrap();
    sw.act_prof_add_member_to_group(prof, m0, g).unwrap();
    assert_eq!(
        sw.act_prof_add_member_to_group(prof, m0, g)
            .unwrap_err()
            .to_string(),
        "Invalid table operation (MBR_ALREADY_IN_GRP)"
    );
    assert_eq!(sw.act_prof_get_group(prof, g).unwrap().members, vec![0, 1]);
    let key = [MatchParam::Lpm {
        key: vec![10, 0, 0, 0],
        prefix_len: 8,
    }];
    let e = sw
        .mt_add_entry("ecmp_group", &key, "set_nhop", &[], None)
        .unwrap_err();
    assert_eq!(e.to_string(), "Invalid table operation (WRONG_TABLE_TYPE)");
    let h = sw
        .mt_indirect_ws_add_entry("ecmp_group", &key, g, None)
        .unwrap();
    assert_eq!(
        sw.act_prof_delete_member(prof, m0).unwrap_err().to_string(),
        "Invalid table operation (MBR_STILL_USED)"
    );
    sw.mt_set_default_action("forward", "_drop", &[]).unwrap();
    sw.mt_add_entry(
        "forward",
        &[ex(&[10, 0, 0, 1])],
        "set_dmac",
        &[hex("000000000001")],
        None,
    )
    .unwrap();
    sw.mt_add_entry(
        "forward",
        &[ex(&[10, 0, 0, 2])],
        "set_dmac",
        &[hex("000000000002")],
        None,
    )
    .unwrap();
    let entry = sw.mt_get_entry("ecmp_group", h).unwrap();
    assert_eq!(entry.action, tern_runtime::ActionEntry::Group(g));
    // Different flows spread over both members; the same flow always takes the same one.
    let mut ports = std::collections::BTreeSet::new();
    for sport in 0..32u8 {
        let mut f = hex("000000000000 000000000009 0800");
        f.extend_from_slice(&[
            0x45, 0, 0, 40, 0, 0, 0, 0, 64, 6, 0, 0, 10, 1, 1, 1, 10, 0, 0, 99,
        ]);
        f.extend_from_slice(&[0, sport, 0, 80]);
        f.extend_from_slice(&[0u8; 16]);
        let a = run(&mut sw, 1, &f);
        let b = run(&mut sw, 1, &f);
        assert_eq!(a, b);
        assert_eq!(a.len(), 1);
        ports.insert(a[0].port);
    }
    assert_eq!(ports, [1u32, 2].into_iter().collect());
}

/// A hand-written program exercising expression operators, signed/saturating stores,
/// jumps and action data (BMv2 semantics: unbounded arithmetic, truncation on store).
const EXPR_PROGRAM: &str = r#"{
  "__meta__": {"version": [2, 18]},
  "header_types": [
    {"name": "standard_metadata_t", "id": 0, "fields": [["ingress_port", 9], ["packet_length", 32], ["egress_spec", 9], ["egress_port", 9], ["instance_type", 32], ["_pad", 5]]},
    {"name": "h_t", "id": 1, "fields": [["a", 8], ["b", 8], ["c", 16]]},
    {"name": "s_t", "id": 2, "fields": [["x", 8, true], ["y", 8, true, true], ["z", 8, false, true]]},
    {"name": "o_t", "id": 3, "fields": [["r0", 8], ["r1", 8], ["r2", 8], ["r3", 8], ["r4", 8], ["r5", 8], ["r6", 8], ["r7", 8]]}
  ],
  "headers": [
    {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true},
    {"name": "h", "id": 1, "header_type": "h_t", "metadata": false},
    {"name": "s", "id": 2, "header_type": "s_t", "metadata": false},
    {"name": "o", "id": 3, "header_type": "o_t", "metadata": false}
  ],
  "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {"name": "start", "id": 0, "parser_ops": [
      {"op": "extract", "parameters": [{"type": "regular", "value": "h"}]},
      {"op": "extract", "parameters": [{"type": "regular", "value": "s"}]}],
     "transition_key": [], "transitions": [{"type": "default", "value": null, "mask": null, "next_state": null}]}]}],
  "deparsers": [{"name": "deparser", "id": 0, "order": ["h", "s", "o"]}],
  "actions": [{"name": "act", "id": 0, "runtime_data": [{"name": "p0", "bitwidth": 8}], "primitives": [
    {"op": "add_header", "parameters": [{"type": "header", "value": "o"}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r0"]},
      {"type": "expression", "value": {"op": "+", "left": {"type": "field", "value": ["h", "a"]}, "right": {"type": "field", "value": ["h", "b"]}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r1"]},
      {"type": "expression", "value": {"op": "-", "left": {"type": "field", "value": ["h", "a"]}, "right": {"type": "field", "value": ["h", "b"]}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["s", "x"]},
      {"type": "expression", "value": {"op": "-", "left": {"type": "field", "value": ["s", "x"]}, "right": {"type": "hexstr", "value": "0x64"}}}]},
    {"op": "add_to_field", "parameters": [{"type": "field", "value": ["s", "y"]}, {"type": "hexstr", "value": "0x64"}]},
    {"op": "subtract_from_field", "parameters": [{"type": "field", "value": ["s", "z"]}, {"type": "hexstr", "value": "0xc8"}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r2"]},
      {"type": "expression", "value": {"op": ">>", "left": {"type": "expression", "value": {"op": "<<", "left": {"type": "field", "value": ["h", "a"]}, "right": {"type": "hexstr", "value": "0x4"}}}, "right": {"type": "hexstr", "value": "0x2"}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r3"]},
      {"type": "expression", "value": {"op": "?", "left": {"type": "hexstr", "value": "0x1"}, "right": {"type": "hexstr", "value": "0x2"},
        "cond": {"type": "expression", "value": {"op": ">", "left": {"type": "field", "value": ["h", "a"]}, "right": {"type": "field", "value": ["h", "b"]}}}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r4"]},
      {"type": "expression", "value": {"op": "two_comp_mod", "left": {"type": "expression", "value": {"op": "*", "left": {"type": "field", "value": ["h", "a"]}, "right": {"type": "hexstr", "value": "0x3"}}}, "right": {"type": "hexstr", "value": "0x8"}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r5"]},
      {"type": "expression", "value": {"op": "~", "left": null, "right": {"type": "field", "value": ["h", "a"]}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r6"]},
      {"type": "expression", "value": {"op": "%", "left": {"type": "field", "value": ["h", "c"]}, "right": {"type": "hexstr", "value": "0x7"}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r7"]}, {"type": "runtime_data", "value": 0}]},
    {"op": "_jump_if_zero", "parameters": [{"type": "expression", "value": {"op": "-", "left": {"type": "field", "value": ["h", "a"]}, "right": {"type": "hexstr", "value": "0x0a"}}}, {"type": "hexstr", "value": "0xe"}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["o", "r7"]}, {"type": "hexstr", "value": "0x99"}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["standard_metadata", "egress_spec"]}, {"type": "hexstr", "value": "0x1"}]}
  ]}],
  "pipelines": [
    {"name": "ingress", "id": 0, "init_table": "node_1", "action_profiles": [],
     "tables": [{"name": "t", "id": 0, "match_type": "exact", "type": "simple", "key": [], "actions": ["act"], "action_ids": [0],
       "next_tables": {"act": null}, "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
       "default_entry": {"action_id": 0, "action_const": true, "action_data": ["0x42"], "action_entry_const": true}}],
     "conditionals": [{"name": "node_1", "id": 0, "expression": {"type": "expression", "value": {"op": "valid", "left": null, "right": {"type": "header", "value": "h"}}},
       "true_next": "t", "false_next": null}]},
    {"name": "egress", "id": 1, "init_table": null, "action_profiles": [], "tables": [], "conditionals": []}
  ]
}"#;

#[test]
fn expression_semantics_and_jumps() {
    let mut sw = Switch::from_json(EXPR_PROGRAM, SwitchOptions::default()).unwrap();
    let out = run(&mut sw, 0, &hex("0a14 03e8 ce6432"));
    assert_eq!(
        sorted(out),
        vec![(1, hex("0a14 03e8 6a7f00 1ef6 2802 1ef5 0642"))]
    );
    let out = run(&mut sw, 0, &hex("0014 03e8 ce6432"));
    assert_eq!(
        sorted(out),
        vec![(1, hex("0014 03e8 6a7f00 14ec 0002 00ff 0699"))]
    );
    // Too short for h: parser error, h invalid, the conditional skips the table: port 0.
    assert_eq!(sorted(run(&mut sw, 0, &hex("0a"))), vec![(0, hex("0a"))]);
    // The default entry is const.
    assert_eq!(
        sw.mt_set_default_action("t", "act", &[vec![1]])
            .unwrap_err()
            .to_string(),
        "Invalid table operation (DEFAULT_ENTRY_IS_CONST)"
    );
}

#[test]
fn switch_is_send() {
    fn assert_send<T: Send>() {}
    assert_send::<Switch>();
}

const CSUM_PROGRAM: &str = r#"{
  "header_types": [
    {"name": "standard_metadata_t", "id": 0, "fields": [["ingress_port", 9], ["packet_length", 32], ["egress_spec", 9], ["egress_port", 9], ["instance_type", 32], ["checksum_error", 1], ["_pad", 4]]},
    {"name": "h_t", "id": 1, "fields": [["a", 16], ["c", 16]]}
  ],
  "headers": [
    {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true},
    {"name": "h", "id": 1, "header_type": "h_t", "metadata": false}
  ],
  "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {"name": "start", "id": 0, "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
     "transition_key": [], "transitions": [{"type": "default", "value": null, "mask": null, "next_state": null}]}]}],
  "deparsers": [{"name": "deparser", "id": 0, "order": ["h"]}],
  "calculations": [{"name": "calc", "id": 0, "algo": "csum16", "input": [{"type": "field", "value": ["h", "a"]}]}],
  "checksums": [{"name": "ck", "id": 0, "target": ["h", "c"], "type": "generic", "calculation": "calc", "verify": true, "update": false, "if_cond": null}],
  "actions": [{"name": "act", "id": 0, "runtime_data": [], "primitives": [
    {"op": "assign", "parameters": [{"type": "field", "value": ["standard_metadata", "egress_spec"]},
      {"type": "expression", "value": {"op": "+", "left": {"type": "field", "value": ["standard_metadata", "checksum_error"]}, "right": {"type": "hexstr", "value": "0x1"}}}]}]}],
  "pipelines": [
    {"name": "ingress", "id": 0, "init_table": "t", "action_profiles": [], "conditionals": [],
     "tables": [{"name": "t", "id": 0, "match_type": "exact", "type": "simple", "key": [], "actions": ["act"],
       "next_tables": {"act": null}, "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
       "default_entry": {"action_id": 0, "action_const": false, "action_data": [], "action_entry_const": false}}]},
    {"name": "egress", "id": 1, "init_table": null, "action_profiles": [], "tables": [], "conditionals": []}
  ]
}"#;

#[test]
fn checksum_error_is_reported_not_dropped() {
    let mut sw = Switch::from_json(CSUM_PROGRAM, SwitchOptions::default()).unwrap();
    // csum16(0x1234) = !0x1234 = 0xedcb.
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("1234 edcb"))),
        vec![(1, hex("1234 edcb"))]
    );
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("1234 edcc"))),
        vec![(2, hex("1234 edcc"))]
    );
}

#[test]
fn table_dump_golden_sequence_on_ecmp() {
    // The Runtime calls behind BMv2's CLI golden test `table_dump` (MANIFEST §4).
    let Some(mut sw) = load("targets/simple_switch/tests/CLI_tests/testdata/ecmp.json") else {
        return;
    };
    use tern_runtime::ActionEntry;
    let prof = "ecmp_action_profile";
    assert_eq!(sw.mt_get_num_entries("ecmp_group").unwrap(), 0);
    assert_eq!(sw.act_prof_create_group(prof).unwrap(), 0);
    assert_eq!(
        sw.act_prof_add_member(prof, "set_nhop", &[vec![10, 0, 0, 1], vec![0, 1]])
            .unwrap(),
        0
    );
    let k12 = [MatchParam::Lpm {
        key: vec![10, 0, 0, 1],
        prefix_len: 12,
    }];
    assert_eq!(
        sw.mt_indirect_add_entry("ecmp_group", &k12, 0, None)
            .unwrap(),
        0
    );
    sw.act_prof_add_member_to_group(prof, 0, 0).unwrap();
    let k32 = [MatchParam::Lpm {
        key: vec![10, 0, 1, 1],
        prefix_len: 32,
    }];
    assert_eq!(
        sw.mt_indirect_ws_add_entry("ecmp_group", &k32, 0, None)
            .unwrap(),
        1
    );
    let entries = sw.mt_get_entries("ecmp_group").unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!(
        entries[0].match_key,
        k12.to_vec(),
        "LPM keys read back as given"
    );
    assert_eq!(entries[0].priority, -1);
    assert_eq!(entries[0].action, ActionEntry::Member(0));
    assert_eq!(entries[1].action, ActionEntry::Group(0));
    assert_eq!(
        sw.mt_get_default_entry("ecmp_group").unwrap(),
        ActionEntry::None
    );
    let m = sw.act_prof_get_member(prof, 0).unwrap();
    assert_eq!(
        (m.action.as_str(), m.data),
        ("set_nhop", vec![vec![10, 0, 0, 1], vec![0, 1]])
    );
    assert_eq!(sw.act_prof_get_group(prof, 0).unwrap().members, vec![0]);
    assert_eq!(
        sw.mt_get_entry_from_key("ecmp_group", &k12, None)
            .unwrap()
            .handle,
        0
    );
    sw.mt_clear_entries("ecmp_group", false).unwrap();
    assert_eq!(sw.mt_get_num_entries("ecmp_group").unwrap(), 0);
}

#[test]
fn entry_ttl_needs_support_timeout() {
    let Some(mut sw) = load("targets/simple_switch_grpc/tests/testdata/digest.json") else {
        return;
    };
    let h = sw
        .mt_add_entry(
            "ingress.smac",
            &[ex(&hex("0000000000aa"))],
            "NoAction",
            &[],
            None,
        )
        .unwrap();
    assert_eq!(sw.mt_get_entry("ingress.smac", h).unwrap().life, None);
    sw.mt_set_entry_ttl("ingress.smac", h, 500).unwrap();
    let life = sw.mt_get_entry("ingress.smac", h).unwrap().life.unwrap();
    assert_eq!(life.timeout_ms, 500);
    let Some(mut r) = load("targets/simple_router/simple_router.json") else {
        return;
    };
    let h = r
        .mt_add_entry("forward", &[ex(&[10, 0, 0, 1])], "_drop", &[], None)
        .unwrap();
    assert_eq!(
        r.mt_set_entry_ttl("forward", h, 500)
            .unwrap_err()
            .to_string(),
        "Invalid table operation (AGEING_DISABLED)"
    );
}

#[test]
fn arbitrary_packets_never_panic_on_any_fixture() {
    let Some(dir) = fixtures() else { return };
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    let mut seed = 0x1234_5678_9abc_def0u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut loaded = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let Ok(mut sw) = Switch::from_json(&text, SwitchOptions::default()) else {
            continue;
        };
        loaded += 1;
        for len in 0..96usize {
            let pkt: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            let mut out = Vec::new();
            sw.process_packet((next() % 8) as u32, &pkt, &mut out);
            for o in &out {
                assert!(
                    o.data.len() <= len + 512,
                    "{}: output grew beyond the headroom",
                    f.display()
                );
            }
        }
    }
    assert_eq!(loaded, 35);
}

/// Unions, union assignment, stack push, stack expressions, header equality.
const UNION_PROGRAM: &str = r#"{
  "header_types": [
    {"name": "standard_metadata_t", "id": 0, "fields": [["ingress_port", 9], ["packet_length", 32], ["egress_spec", 9], ["egress_port", 9], ["instance_type", 32], ["_pad", 5]]},
    {"name": "A", "id": 1, "fields": [["x", 8]]},
    {"name": "B", "id": 2, "fields": [["y", 16]]}
  ],
  "headers": [
    {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true},
    {"name": "a0", "id": 1, "header_type": "A", "metadata": false},
    {"name": "b0", "id": 2, "header_type": "B", "metadata": false},
    {"name": "a1", "id": 3, "header_type": "A", "metadata": false},
    {"name": "b1", "id": 4, "header_type": "B", "metadata": false},
    {"name": "s0", "id": 5, "header_type": "A", "metadata": false},
    {"name": "s1", "id": 6, "header_type": "A", "metadata": false},
    {"name": "s2", "id": 7, "header_type": "A", "metadata": false}
  ],
  "header_stacks": [{"name": "st", "id": 0, "header_type": "A", "header_ids": [5, 6, 7]}],
  "header_union_types": [{"name": "U", "id": 0, "headers": [["a", "A"], ["b", "B"]]}],
  "header_unions": [{"name": "u0", "id": 0, "union_type": "U", "header_ids": [1, 2]}, {"name": "u1", "id": 1, "union_type": "U", "header_ids": [3, 4]}],
  "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {"name": "start", "id": 0, "parser_ops": [
      {"op": "extract", "parameters": [{"type": "regular", "value": "a0"}]},
      {"op": "extract", "parameters": [{"type": "regular", "value": "b0"}]},
      {"op": "extract", "parameters": [{"type": "stack", "value": "st"}]},
      {"op": "extract", "parameters": [{"type": "stack", "value": "st"}]}],
     "transition_key": [], "transitions": []}]}],
  "deparsers": [{"name": "deparser", "id": 0, "order": ["a0", "b0", "s0", "s1", "s2", "a1", "b1"]}],
  "actions": [{"name": "act", "id": 0, "runtime_data": [], "primitives": [
    {"op": "assign_union", "parameters": [{"type": "header_union", "value": "u1"}, {"type": "header_union", "value": "u0"}]},
    {"op": "push", "parameters": [{"type": "header_stack", "value": "st"}, {"type": "hexstr", "value": "0x1"}]},
    {"op": "add_header", "parameters": [{"type": "header", "value": "s0"}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["s0", "x"]},
      {"type": "expression", "value": {"op": "last_stack_index", "left": null, "right": {"type": "header_stack", "value": "st"}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["standard_metadata", "egress_spec"]}, {"type": "hexstr", "value": "0x1"}]}
  ]}],
  "pipelines": [
    {"name": "ingress", "id": 0, "init_table": "c", "action_profiles": [],
     "tables": [{"name": "t", "id": 0, "match_type": "exact", "type": "simple", "key": [], "actions": ["act"],
       "next_tables": {"act": null}, "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
       "default_entry": {"action_id": 0, "action_const": false, "action_data": [], "action_entry_const": false}}],
     "conditionals": [{"name": "c", "id": 0, "true_next": "t", "false_next": null, "expression": {"type": "expression", "value":
       {"op": "and",
        "left": {"type": "expression", "value": {"op": "valid_union", "left": null, "right": {"type": "header_union", "value": "u0"}}},
        "right": {"type": "expression", "value": {"op": "not", "left": null, "right": {"type": "expression", "value":
          {"op": "==", "left": {"type": "header", "value": "a0"}, "right": {"type": "header", "value": "a1"}}}}}}}}]},
    {"name": "egress", "id": 1, "init_table": null, "action_profiles": [], "tables": [], "conditionals": []}
  ]
}"#;

#[test]
fn unions_and_stacks() {
    let mut sw = Switch::from_json(UNION_PROGRAM, SwitchOptions::default()).unwrap();
    // b0 extracted after a0 invalidates a0 (same union); stack holds 44, 55.
    let out = run(&mut sw, 0, &hex("11 2233 44 55 ee"));
    assert_eq!(sorted(out), vec![(1, hex("2233 02 44 55 2233 ee"))]);
}

#[test]
fn direct_meter_rates_per_entry() {
    let Some(mut sw) = load("targets/simple_switch_grpc/tests/testdata/meter.json") else {
        return;
    };
    use tern_runtime::MeterRate;
    let t = "ingress.t_redirect";
    let h = sw
        .mt_add_entry(t, &[ex(&[0, 1])], "ingress.port_redirect", &[], None)
        .unwrap();
    let r = |u, b| MeterRate {
        units_per_micros: u,
        burst_size: b,
    };
    assert_eq!(sw.mt_get_meter_rates(t, h).unwrap(), vec![]);
    sw.mt_set_meter_rates(t, h, &[r(0.5, 10), r(1.0, 20)])
        .unwrap();
    assert_eq!(
        sw.mt_get_meter_rates(t, h).unwrap(),
        vec![r(0.5, 10), r(1.0, 20)]
    );
    assert_eq!(
        sw.mt_set_meter_rates(t, h, &[r(0.5, 10)])
            .unwrap_err()
            .to_string(),
        "Invalid table operation (INVALID_METER_OPERATION)"
    );
    assert_eq!(
        sorted(run(&mut sw, 1, &[1, 2, 3])),
        vec![(1, vec![1, 2, 3])]
    );
    let Some(mut r2) = load("targets/simple_router/simple_router.json") else {
        return;
    };
    let h = r2
        .mt_add_entry("forward", &[ex(&[10, 0, 0, 1])], "_drop", &[], None)
        .unwrap();
    assert_eq!(
        r2.mt_set_meter_rates("forward", h, &[r(0.5, 10), r(1.0, 20)])
            .unwrap_err()
            .to_string(),
        "Invalid table operation (METERS_DISABLED)"
    );
}

const VSET_PROGRAM: &str = r#"{
  "header_types": [
    {"name": "standard_metadata_t", "id": 0, "fields": [["ingress_port", 9], ["packet_length", 32], ["egress_spec", 9], ["egress_port", 9], ["instance_type", 32], ["_pad", 5]]},
    {"name": "h_t", "id": 1, "fields": [["a", 8]]}
  ],
  "headers": [
    {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true},
    {"name": "h", "id": 1, "header_type": "h_t", "metadata": false},
    {"name": "x", "id": 2, "header_type": "h_t", "metadata": false}
  ],
  "parse_vsets": [{"name": "pv", "id": 0, "compressed_bitwidth": 8}],
  "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {"name": "start", "id": 0, "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
     "transition_key": [{"type": "field", "value": ["h", "a"]}],
     "transitions": [{"type": "parse_vset", "value": "pv", "mask": null, "next_state": "px"},
                     {"type": "default", "value": null, "mask": null, "next_state": null}]},
    {"name": "px", "id": 1, "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "x"}]}],
     "transition_key": [], "transitions": []}]}],
  "deparsers": [{"name": "deparser", "id": 0, "order": ["h", "x"]}],
  "actions": [{"name": "to", "id": 0, "runtime_data": [{"name": "p", "bitwidth": 9}], "primitives": [
    {"op": "assign", "parameters": [{"type": "field", "value": ["standard_metadata", "egress_spec"]}, {"type": "runtime_data", "value": 0}]}]}],
  "pipelines": [
    {"name": "ingress", "id": 0, "init_table": "c", "action_profiles": [],
     "tables": [
       {"name": "t1", "id": 0, "match_type": "exact", "type": "simple", "key": [], "actions": ["to"], "next_tables": {"to": null},
        "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
        "default_entry": {"action_id": 0, "action_const": true, "action_data": ["0x1"], "action_entry_const": true}},
       {"name": "t2", "id": 1, "match_type": "exact", "type": "simple", "key": [], "actions": ["to"], "next_tables": {"to": null},
        "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
        "default_entry": {"action_id": 0, "action_const": true, "action_data": ["0x2"], "action_entry_const": true}}],
     "conditionals": [{"name": "c", "id": 0, "true_next": "t1", "false_next": "t2",
       "expression": {"type": "expression", "value": {"op": "d2b", "left": null, "right": {"type": "field", "value": ["x", "$valid$"]}}}}]},
    {"name": "egress", "id": 1, "init_table": null, "action_profiles": [], "tables": [], "conditionals": []}
  ]
}"#;

#[test]
fn parser_value_sets_are_runtime_configured() {
    let mut sw = Switch::from_json(VSET_PROGRAM, SwitchOptions::default()).unwrap();
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("07 ff"))),
        vec![(2, hex("07 ff"))]
    );
    // The stock CLI sends one extra leading zero byte: accepted.
    sw.parse_vset_add("pv", &[0, 7]).unwrap();
    assert_eq!(sw.parse_vset_get("pv").unwrap(), vec![vec![7]]);
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("07 ff"))),
        vec![(1, hex("07 ff"))]
    );
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("08 ff"))),
        vec![(2, hex("08 ff"))]
    );
    // Extracting x needs one more byte: PacketTooShort, x stays invalid.
    assert_eq!(sorted(run(&mut sw, 0, &hex("07"))), vec![(2, hex("07"))]);
    assert_eq!(
        sw.parse_vset_add("pv", &[1, 7]).unwrap_err().to_string(),
        "Invalid parser value set operation (ERROR)"
    );
    assert_eq!(
        sw.parse_vset_add("nope", &[7]).unwrap_err().to_string(),
        "Invalid parser value set operation (INVALID_PARSE_VSET_NAME)"
    );
    sw.parse_vset_remove("pv", &[7]).unwrap();
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("07 ff"))),
        vec![(2, hex("07 ff"))]
    );
    sw.parse_vset_add("pv", &[7]).unwrap();
    sw.parse_vset_clear("pv").unwrap();
    assert!(sw.parse_vset_get("pv").unwrap().is_empty());
}

const VL_PROGRAM: &str = r#"{
  "header_types": [
    {"name": "standard_metadata_t", "id": 0, "fields": [["ingress_port", 9], ["packet_length", 32], ["egress_spec", 9], ["egress_port", 9], ["instance_type", 32], ["_pad", 5]]},
    {"name": "a_t", "id": 1, "fields": [["len", 8]]},
    {"name": "v_t", "id": 2, "fields": [["data", "*"]], "max_length": 4}
  ],
  "headers": [
    {"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true},
    {"name": "a", "id": 1, "header_type": "a_t", "metadata": false},
    {"name": "v", "id": 2, "header_type": "v_t", "metadata": false}
  ],
  "parsers": [{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {"name": "start", "id": 0, "parser_ops": [
      {"op": "extract", "parameters": [{"type": "regular", "value": "a"}]},
      {"op": "extract_VL", "parameters": [{"type": "regular", "value": "v"},
        {"type": "expression", "value": {"op": "*", "left": {"type": "field", "value": ["a", "len"]}, "right": {"type": "hexstr", "value": "0x8"}}}]}],
     "transition_key": [], "transitions": []}]}],
  "deparsers": [{"name": "deparser", "id": 0, "order": ["a", "v"]}],
  "actions": [{"name": "act", "id": 0, "runtime_data": [], "primitives": [
    {"op": "log_msg", "parameters": [{"type": "string", "value": "len={} \\{x\\}"}, {"type": "parameters_vector", "value": [{"type": "field", "value": ["a", "len"]}]}]},
    {"op": "assert", "parameters": [{"type": "expression", "value": {"op": "b2d", "left": null, "right": {"type": "expression", "value":
      {"op": "!=", "left": {"type": "field", "value": ["a", "len"]}, "right": {"type": "hexstr", "value": "0x3"}}}}}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["standard_metadata", "egress_spec"]}, {"type": "hexstr", "value": "0x1"}]}]}],
  "pipelines": [
    {"name": "ingress", "id": 0, "init_table": "t", "action_profiles": [], "conditionals": [],
     "tables": [{"name": "t", "id": 0, "match_type": "exact", "type": "simple", "key": [], "actions": ["act"], "next_tables": {"act": null},
        "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
        "default_entry": {"action_id": 0, "action_const": true, "action_data": [], "action_entry_const": true}}]},
    {"name": "egress", "id": 1, "init_table": null, "action_profiles": [], "tables": [], "conditionals": []}
  ]
}"#;

#[test]
fn varbit_extract_assert_and_log() {
    let mut sw = Switch::from_json(VL_PROGRAM, SwitchOptions::default()).unwrap();
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("02 aabb cc"))),
        vec![(1, hex("02 aabb cc"))]
    );
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("00 cc"))),
        vec![(1, hex("00 cc"))]
    );
    // 5 bytes exceed max_length (HeaderTooShort); 2 bytes missing (PacketTooShort): v stays
    // invalid and the bytes are payload.
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("05 aabb"))),
        vec![(1, hex("05 aabb"))]
    );
    assert_eq!(
        sorted(run(&mut sw, 0, &hex("02 aa"))),
        vec![(1, hex("02 aa"))]
    );
    // A failed assert drops the packet (BMv2 aborts the process).
    assert!(run(&mut sw, 0, &hex("03 aabbcc")).is_empty());
    let log = sw.take_log();
    assert_eq!(log.first().map(String::as_str), Some("len=2 {x}"));
    assert_eq!(log.len(), 5);
}

#[test]
fn aged_entries_are_reported_after_their_ttl() {
    let Some(mut sw) = load("targets/simple_switch_grpc/tests/testdata/digest.json") else {
        return;
    };
    let h = sw
        .mt_add_entry(
            "ingress.smac",
            &[ex(&hex("0000000000aa"))],
            "NoAction",
            &[],
            None,
        )
        .unwrap();
    let h2 = sw
        .mt_add_entry(
            "ingress.smac",
            &[ex(&hex("0000000000bb"))],
            "NoAction",
            &[],
            None,
        )
        .unwrap();
    sw.mt_set_entry_ttl("ingress.smac", h, 1).unwrap();
    sw.mt_set_entry_ttl("ingress.smac", h2, 60_000).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(sw.aged_entries(), vec![("ingress.smac".to_string(), h)]);
}

#[test]
fn fixed_clock_makes_ageing_deterministic() {
    let Some(mut sw) = load("targets/simple_switch_grpc/tests/testdata/digest.json") else {
        return;
    };
    sw.set_clock_us(Some(1_000));
    let h = sw
        .mt_add_entry(
            "ingress.smac",
            &[ex(&hex("0000000000aa"))],
            "NoAction",
            &[],
            None,
        )
        .unwrap();
    sw.mt_set_entry_ttl("ingress.smac", h, 10).unwrap();
    // 9.999 ms later: not aged; 10 ms later: aged. Real time plays no part.
    sw.set_clock_us(Some(10_999));
    assert!(sw.aged_entries().is_empty());
    sw.set_clock_us(Some(11_000));
    assert_eq!(sw.aged_entries(), vec![("ingress.smac".to_string(), h)]);
    let e = sw.mt_get_entry("ingress.smac", h).unwrap();
    assert_eq!(e.life.map(|l| l.time_since_hit_ms), Some(10));
}

#[test]
fn digests_beyond_the_queue_cap_are_dropped_and_counted() {
    let Some(mut sw) = load("targets/l2_switch/l2_switch.json") else {
        return;
    };
    sw.mt_set_default_action("smac", "mac_learn", &[]).unwrap();
    sw.mt_set_default_action("dmac", "broadcast", &[]).unwrap();
    sw.set_digest_queue_cap(3);
    for i in 0..5u8 {
        let frame = hex(&format!("ffffffffffff 0000000000{i:02x} 0800 00000000"));
        // Forwarding goes on whether or not the digest had room.
        assert_eq!(run(&mut sw, 3, &frame).len(), 1);
    }
    let d = sw.take_digests();
    assert_eq!(d.len(), 3);
    // The first three are kept, in order.
    assert_eq!(d[2].fields[0], hex("000000000002"));
    assert_eq!(sw.digests_dropped(), 2);
    // Taking them makes room again.
    run(&mut sw, 3, &hex("ffffffffffff 0000000000aa 0800 00000000"));
    assert_eq!(sw.take_digests().len(), 1);
    assert_eq!(sw.digests_dropped(), 2);
}
