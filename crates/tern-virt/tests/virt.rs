//! tern-virt end to end: equivalence of every STF test inside a slice, composition over a
//! link, live change under traffic with every packet checked, and isolation (hop budget,
//! entry quotas, pass quotas, injected panic, cross-tenant access), plus the config file.

use std::collections::BTreeMap;

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Port, Runtime, RuntimeError, TableError};
use tern_stf::{RunOptions, StfReport};
use tern_virt::config::Config;
use tern_virt::{
    Caller, DeviceSpec, Field, FieldMatch, Quotas, Rule, Target, Topology, VirtError, VirtSwitch,
    VirtWorkers, WorkerOptions,
};

mod common;
use common::{ipv4_checksum, spec, ROOT};

fn compile(rel: &str, defines: &[&str]) -> String {
    let opts = tern_p4::Options {
        include_dirs: vec![],
        defines: defines.iter().map(|d| d.to_string()).collect(),
    };
    tern_p4::compile_file(std::path::Path::new(&format!("{ROOT}{rel}")), &opts)
        .unwrap_or_else(|d| panic!("{rel} does not compile:\n{d}"))
        .json
}

fn fixture(rel: &str) -> String {
    std::fs::read_to_string(tern_fixtures::bmv2(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn native(json: &str) -> Switch {
    Switch::from_json(json, SwitchOptions::default()).unwrap()
}

/// Device 1 running `json` behind a catch-all classifier rule and a 1:1 port map.
fn one_slice(json: &str) -> VirtSwitch {
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(json)).unwrap();
    let mut t = Topology::default();
    t.rules.push(Rule {
        priority: 0,
        port: None,
        vlan: None,
        field: None,
        device: 1,
        vport: None,
    });
    t.port_maps
        .insert(1, (0..=511).map(|p| (p, Target::Phys(p))).collect());
    vs.set_topology(t).unwrap();
    vs
}

fn stf_script(rel: &str) -> tern_stf::StfScript {
    let text = std::fs::read_to_string(format!("{ROOT}{rel}")).unwrap();
    tern_stf::parse(&text, rel).unwrap_or_else(|e| panic!("{e}"))
}

/// Run the STF natively and inside a slice; both reports must be identical and pass.
fn equivalent(json: &str, stf: &str, strict: bool) {
    let script = stf_script(stf);
    let opts = RunOptions {
        strict_counters: strict,
    };
    // Both clocks fixed: timestamps (queueing metadata) are then equal too.
    let mut sw = native(json);
    sw.set_clock_us(Some(1_000));
    let program = sw.program().clone();
    let nat: StfReport = tern_stf::run_with_options(&script, &mut sw, &program, opts);
    assert!(nat.passed(), "natively: {nat}");
    let mut vs = one_slice(json);
    vs.set_clock_us(Some(1_000));
    let mut rt = vs.runtime(Caller::Operator, 1).unwrap();
    let sliced = tern_stf::run_with_options(&script, &mut rt, &program, opts);
    assert_eq!(nat.to_string(), sliced.to_string(), "{stf} inside a slice");
    assert_eq!(
        (nat.frames_out, nat.discarded, nat.expectations.len()),
        (
            sliced.frames_out,
            sliced.discarded,
            sliced.expectations.len()
        )
    );
    assert!(sliced.passed(), "{sliced}");
    assert_eq!(vs.stats().unclassified, 0);
}

#[test]
fn equivalence_fixture_stf_tests() {
    if !tern_fixtures::available() {
        return;
    }
    const PR: &str = "targets/simple_switch/tests/testdata/packet_redirect.json";
    let cases: &[(&str, &str)] = &[
        (PR, "packet_redirect_baseline.stf"),
        (PR, "packet_redirect_multicast.stf"),
        (PR, "packet_redirect_clone_i2e.stf"),
        (PR, "packet_redirect_clone_e2e.stf"),
        (PR, "packet_redirect_resubmit.stf"),
        (PR, "packet_redirect_recirculate.stf"),
        (PR, "packet_redirect_exit_ingress.stf"),
        (
            "targets/simple_switch/tests/testdata/parser_error.json",
            "parser_error.stf",
        ),
        (
            "targets/simple_switch/tests/testdata/queueing.json",
            "queueing.stf",
        ),
        (
            "targets/simple_switch/tests/testdata/recirc.json",
            "recirc.stf",
        ),
        (
            "targets/simple_switch/tests/testdata/truncate.json",
            "truncate.stf",
        ),
        (
            "targets/simple_router/simple_router.json",
            "simple_router.stf",
        ),
        (
            "targets/simple_router/simple_router.json",
            "simple_router_unconfigured.stf",
        ),
        (
            "targets/l2_switch/l2_switch.json",
            "l2_switch_on_simple_switch.stf",
        ),
        (
            "targets/simple_switch_grpc/tests/testdata/ternary.json",
            "ternary_priority.stf",
        ),
    ];
    for (json, stf) in cases {
        equivalent(&fixture(json), &format!("tests/stf/{stf}"), false);
    }
    equivalent(
        &fixture("targets/simple_switch_grpc/tests/testdata/counter.json"),
        "tests/stf/counter_direct.stf",
        true,
    );
}

#[test]
fn equivalence_tutorial_programs() {
    let cases: &[(&str, &[&str], &str)] = &[
        ("basic.p4", &[], "basic.stf"),
        ("calc.p4", &[], "calc.stf"),
        ("multicast.p4", &[], "multicast.stf"),
        ("source_routing.p4", &[], "source_routing.stf"),
        ("firewall.p4", &[], "firewall.stf"),
        ("ecn.p4", &[], "ecn_below_threshold.stf"),
        ("ecn.p4", &["ECN_THRESHOLD=0"], "ecn_marked.stf"),
        ("basic_tunnel.p4", &[], "basic_tunnel.stf"),
    ];
    for (p4, defs, stf) in cases {
        let json = compile(&format!("p4/tutorials/{p4}"), defs);
        equivalent(&json, &format!("tests/stf/{stf}"), false);
    }
}

/// Every `p4/tests/X.p4` with an `X.stf` beside it, and the programs of `p4/virt/`.
#[test]
fn equivalence_p4_test_programs() {
    let mut n = 0;
    for dir in ["p4/tests", "p4/virt"] {
        let mut stfs: Vec<_> = std::fs::read_dir(format!("{ROOT}{dir}"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|f| f.ends_with(".stf"))
            .collect();
        stfs.sort();
        for stf in stfs {
            let p4 = format!("{dir}/{}", stf.replace(".stf", ".p4"));
            if !std::path::Path::new(&format!("{ROOT}{p4}")).exists() {
                continue;
            }
            equivalent(&compile(&p4, &[]), &format!("{dir}/{stf}"), false);
            n += 1;
        }
    }
    assert!(n >= 14, "only {n} programs found");
}

// ---------------------------------------------------------------------- packets

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// An IPv4 frame from 10.0.1.`src` to `dst` with protocol `proto` and TTL 64.
fn ipv4(src: u8, dst: [u8; 4], proto: u8) -> Vec<u8> {
    let mut p = hex("000000000100 000000000101 0800 45000024000100004000 0000 0a0001");
    p[23] = proto;
    p.push(src);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&hex("101112131415161718191a1b1c1d1e1f"));
    p
}

fn non_ip() -> Vec<u8> {
    hex("000000000100 000000000101 86dd 000102030405060708090a0b0c0d0e0f")
}

fn add(rt: &mut dyn Runtime, table: &str, key: Vec<MatchParam>, action: &str, data: &[&[u8]]) {
    let data: Vec<Vec<u8>> = data.iter().map(|d| d.to_vec()).collect();
    let prio = matches!(key.first(), Some(MatchParam::Ternary { .. })).then_some(1);
    rt.mt_add_entry(table, &key, action, &data, prio)
        .unwrap_or_else(|e| panic!("add {table}: {e}"));
}

fn router_entries(rt: &mut dyn Runtime) {
    let lpm = |a: [u8; 4], l| MatchParam::Lpm {
        key: a.to_vec(),
        prefix_len: l,
    };
    add(
        rt,
        "MyIngress.ipv4_lpm",
        vec![lpm([10, 0, 2, 2], 32)],
        "MyIngress.ipv4_forward",
        &[&[8, 0, 0, 0, 2, 0x22], &[0, 2]],
    );
    add(
        rt,
        "MyIngress.ipv4_lpm",
        vec![lpm([10, 0, 3, 0], 24)],
        "MyIngress.ipv4_forward",
        &[&[0, 0, 0, 0, 3, 0], &[0, 3]],
    );
}

fn firewall_entries(rt: &mut dyn Runtime) {
    add(
        rt,
        "FwIngress.fwd",
        vec![MatchParam::Exact(vec![0, 1])],
        "FwIngress.set_egress",
        &[&[0, 2]],
    );
    // Deny UDP from 10.0.1.0/24.
    let t = |k: &[u8], m: &[u8]| MatchParam::Ternary {
        key: k.to_vec(),
        mask: m.to_vec(),
    };
    add(
        rt,
        "FwIngress.acl",
        vec![
            t(&[10, 0, 1, 0], &[255, 255, 255, 0]),
            t(&[0; 4], &[0; 4]),
            t(&[17], &[255]),
        ],
        "FwIngress.deny",
        &[],
    );
}

fn run_native(sw: &mut Switch, port: Port, data: &[u8]) -> Vec<OutputPacket> {
    let mut out = Vec::new();
    sw.process_packet(port, data, &mut out);
    out
}

fn run_virt(vs: &mut VirtSwitch, port: Port, data: &[u8]) -> Vec<OutputPacket> {
    let mut out = Vec::new();
    vs.process_batch(&[(port, data)], &mut out);
    out
}

fn rule(priority: i32, port: Option<Port>, device: u32, vport: Option<Port>) -> Rule {
    Rule {
        priority,
        port,
        vlan: None,
        field: None,
        device,
        vport,
    }
}

fn basic() -> String {
    compile("p4/tutorials/basic.p4", &[])
}

fn firewall() -> String {
    compile("p4/virt/firewall.p4", &[])
}

// ---------------------------------------------------------------------- composition

/// firewall → router over a link gives exactly what the two programs give one after the other.
#[test]
fn chain_firewall_then_router_equals_sequential_application() {
    let (fw_json, rt_json) = (firewall(), basic());
    let mut fw = native(&fw_json);
    firewall_entries(&mut fw);
    let mut router = native(&rt_json);
    router_entries(&mut router);

    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&fw_json)).unwrap();
    vs.add_device(2, spec(&rt_json)).unwrap();
    firewall_entries(&mut vs.runtime(Caller::Operator, 1).unwrap());
    router_entries(&mut vs.runtime(Caller::Operator, 2).unwrap());
    vs.add_rule(rule(0, Some(1), 1, None)).unwrap();
    vs.map_port(
        1,
        2,
        Target::Link {
            device: 2,
            vport: 1,
        },
    )
    .unwrap();
    for p in [0, 2, 3] {
        vs.map_port(2, p, Target::Phys(10 + p)).unwrap();
    }

    let packets = [
        ipv4(1, [10, 0, 2, 2], 6),  // allowed, /32 route
        ipv4(1, [10, 0, 3, 7], 6),  // allowed, /24 route
        ipv4(1, [10, 0, 2, 2], 17), // denied by the firewall
        ipv4(1, [10, 9, 9, 9], 6),  // allowed, no route: the router drops
        non_ip(),                   // passes the firewall; the router sends it to port 0
    ];
    let mut forwarded = 0;
    for p in &packets {
        let mut expect = Vec::new();
        for o in run_native(&mut fw, 1, p) {
            assert_eq!(o.port, 2);
            for r in run_native(&mut router, 1, &o.data) {
                expect.push(OutputPacket {
                    port: 10 + r.port,
                    data: r.data,
                });
            }
        }
        forwarded += expect.len();
        assert_eq!(run_virt(&mut vs, 1, p), expect);
    }
    assert_eq!(forwarded, 3);
    let s1 = vs.device_stats(Caller::Operator, 1).unwrap();
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!((s1.packets_in, s1.to_links), (5, 4));
    assert_eq!((s2.packets_in, s2.to_phys), (4, 3));
}

#[test]
fn classifier_by_vlan_and_header_field_with_priorities() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=3 {
        vs.add_device(d, spec(&json)).unwrap();
        vs.map_port(d, 0, Target::Phys(100 * d)).unwrap();
    }
    // Low priority: everything on port 1 goes to device 1.
    vs.add_rule(rule(0, Some(1), 1, None)).unwrap();
    // Higher: VLAN 7 on any port goes to device 2.
    vs.add_rule(Rule {
        vlan: Some(7),
        ..rule(10, None, 2, Some(0))
    })
    .unwrap();
    // Highest: EtherType 0x86dd on port 1 goes to device 3.
    vs.add_rule(Rule {
        field: Some(FieldMatch {
            field: Field::EtherType,
            value: 0x86dd,
            mask: 0xffff,
        }),
        ..rule(20, Some(1), 3, None)
    })
    .unwrap();
    let mut tagged = hex("000000000100 000000000101 8100 0007 0806 00010203");
    assert_eq!(vs.classify(1, &tagged), Some((2, 0)));
    assert_eq!(vs.classify(5, &tagged), Some((2, 0)));
    tagged[15] = 8; // VLAN 8
    assert_eq!(vs.classify(1, &tagged), Some((1, 1)));
    assert_eq!(vs.classify(5, &tagged), None);
    // IPv6 behind a VLAN 7 tag: the field rule (priority 20) wins on port 1.
    let v6 = hex("000000000100 000000000101 8100 0007 86dd 00010203");
    assert_eq!(vs.classify(1, &v6), Some((3, 1)));
    assert_eq!(vs.classify(2, &v6), Some((2, 0)));
    // A non-IPv4 frame leaves basic.p4 on its virtual port 0, mapped per device.
    let out = run_virt(&mut vs, 1, &non_ip());
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 300);
    assert!(run_virt(&mut vs, 9, &non_ip()).is_empty());
    assert_eq!(vs.stats().unclassified, 1);
}

/// `frame` with an 802.1Q tag (VLAN `vid`) after the MAC addresses.
fn tagged(frame: &[u8], vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&[0x81, 0x00]);
    f.extend_from_slice(&vid.to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// VLAN slicing on a trunk: physical port 1 carries VLANs 10 and 20. VLAN 10 goes to
/// device 1 on tagged virtual ports (tag stripped on the way in, pushed back on the way out
/// of the trunk); VLAN 20 to device 2, whose output port 3 is an untagged access port. Both
/// routers see plain IPv4 (without the strip basic.p4 would not parse the tagged frame) and
/// their outputs are exactly the native router's, with the tag where the port map says. The
/// same with the devices over 2 workers.
#[test]
fn vlan_tags_are_stripped_in_and_pushed_out_per_virtual_port() {
    let json = basic();
    let mut reference = native(&json);
    router_entries(&mut reference);
    let mut vs = VirtSwitch::new();
    for d in [1, 2] {
        vs.add_device(d, spec(&json)).unwrap();
        router_entries(&mut vs.runtime(Caller::Operator, d).unwrap());
    }
    for (vid, d) in [(10, 1), (20, 2)] {
        vs.add_rule(Rule {
            vlan: Some(vid),
            ..rule(0, Some(1), d, Some(1))
        })
        .unwrap();
    }
    vs.map_port(1, 2, Target::Phys(1)).unwrap();
    vs.map_port(1, 0, Target::Phys(9)).unwrap();
    vs.tag_port(1, 1, Some(10)).unwrap();
    vs.tag_port(1, 2, Some(10)).unwrap();
    vs.map_port(2, 2, Target::Phys(3)).unwrap();
    vs.tag_port(2, 1, Some(20)).unwrap();
    // A bad VLAN id is refused and changes nothing.
    let before = vs.topology().clone();
    let e = vs.tag_port(2, 2, Some(4095)).unwrap_err();
    assert!(e.to_string().contains("VLAN id 4095"), "{e}");
    assert_eq!(vs.tag_port(7, 1, Some(5)), Err(VirtError::NoSuchDevice(7)));
    assert_eq!(vs.topology(), &before);

    let plain = ipv4(1, [10, 0, 2, 2], 6);
    let routed = run_native(&mut reference, 1, &plain);
    assert_eq!((routed.len(), routed[0].port), (1, 2));
    let check = |out: &[OutputPacket]| {
        assert_eq!(out.len(), 2, "{out:?}");
        // VLAN 10 back out of the trunk, tagged; VLAN 20 out of the access port, untagged.
        assert_eq!(
            (out[0].port, &out[0].data),
            (1, &tagged(&routed[0].data, 10))
        );
        assert_eq!((out[1].port, &out[1].data), (3, &routed[0].data));
    };
    let (a, b, c) = (tagged(&plain, 10), tagged(&plain, 20), tagged(&plain, 30));
    let mut out = Vec::new();
    vs.process_batch(&[(1, &a), (1, &b), (1, &c)], &mut out);
    check(&out);
    assert_eq!(vs.stats().unclassified, 1);
    // An untagged frame classified to a tagged virtual port (no VLAN rule) is left as it
    // is: basic.p4 routes it and the tag is pushed on the way out.
    vs.add_rule(rule(-1, Some(1), 1, Some(1))).unwrap();
    let out = run_virt(&mut vs, 1, &plain);
    assert_eq!(
        (out[0].port, &out[0].data),
        (1, &tagged(&routed[0].data, 10))
    );
    vs.set_topology(before).unwrap();

    let mut pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 2,
            ..WorkerOptions::default()
        },
    );
    let mut out = Vec::new();
    pool.process_batch(&[(1, &a)], &mut out);
    pool.process_batch(&[(1, &b), (1, &c)], &mut out);
    check(&out);
}

// ---------------------------------------------------------------------- live change

/// The live-change tests' switch: device 1 (the router `rt_json`, routed) on physical 1 with
/// virtual ports 0, 2, 3 on the same physical ports; device 2 (the firewall `fw_json`) on
/// physical 5 (its virtual port 1), its port 2 out on physical 6; snapshot "base" of that, and
/// "maintenance": device 2's traffic goes to drop, device 1 as in "base".
fn live_change_switch(rt_json: &str, fw_json: &str) -> VirtSwitch {
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(rt_json)).unwrap();
    router_entries(&mut vs.runtime(Caller::Operator, 1).unwrap());
    vs.add_rule(rule(0, Some(1), 1, None)).unwrap();
    for p in [0, 2, 3] {
        vs.map_port(1, p, Target::Phys(p)).unwrap();
    }
    vs.add_device(2, spec(fw_json)).unwrap();
    firewall_entries(&mut vs.runtime(Caller::Operator, 2).unwrap());
    vs.add_rule(rule(0, Some(5), 2, Some(1))).unwrap();
    vs.map_port(2, 2, Target::Phys(6)).unwrap();
    vs.save_snapshot("base");
    let mut maint = vs.topology().clone();
    maint
        .port_maps
        .insert(2, BTreeMap::from([(2, Target::Drop)]));
    vs.store_snapshot("maintenance", maint);
    vs
}

/// Device A's packets are checked one by one while device B is replaced, added, removed and
/// the topology switched between snapshots, many times.
#[test]
fn live_change_under_traffic_leaves_other_devices_untouched() {
    let (rt_json, fw_json) = (basic(), firewall());
    let mut reference = native(&rt_json);
    router_entries(&mut reference);

    let mut vs = live_change_switch(&rt_json, &fw_json);

    let a_packets = [
        ipv4(1, [10, 0, 2, 2], 6),
        ipv4(1, [10, 0, 3, 9], 17),
        ipv4(1, [10, 1, 1, 1], 6),
        non_ip(),
    ];
    let mut checked = 0;
    for round in 0..40u32 {
        for p in &a_packets {
            assert_eq!(
                run_virt(&mut vs, 1, p),
                run_native(&mut reference, 1, p),
                "round {round}"
            );
            checked += 1;
        }
        match round % 5 {
            0 => {
                // Replace device 2 by itself: entries are carried over.
                let r = vs.replace_device(2, spec(&fw_json)).unwrap();
                assert_eq!(r.entries, 2, "{r:?}");
                let out = run_virt(&mut vs, 5, &ipv4(1, [10, 0, 2, 2], 6));
                assert_eq!(out.len(), 1);
                assert_eq!(out[0].port, 6);
                assert!(run_virt(&mut vs, 5, &ipv4(1, [10, 0, 2, 2], 17)).is_empty());
            }
            1 => {
                vs.add_device(3, spec(&rt_json)).unwrap();
                vs.add_rule(rule(5, Some(7), 3, None)).unwrap();
                vs.map_port(3, 0, Target::Phys(8)).unwrap();
                assert_eq!(run_virt(&mut vs, 7, &non_ip())[0].port, 8);
            }
            2 => {
                vs.remove_device(3).unwrap();
                assert!(run_virt(&mut vs, 7, &non_ip()).is_empty());
            }
            3 => {
                vs.activate_snapshot("maintenance").unwrap();
                assert!(run_virt(&mut vs, 5, &ipv4(1, [10, 0, 2, 2], 6)).is_empty());
            }
            _ => {
                vs.activate_snapshot("base").unwrap();
                // Replace device 2 by a different program: nothing is carried.
                let r = vs.replace_device(2, spec(&rt_json)).unwrap();
                assert_eq!((r.entries, r.tables.len()), (0, 0), "{r:?}");
                let r = vs.replace_device(2, spec(&fw_json)).unwrap();
                assert_eq!(r.entries, 0);
                firewall_entries(&mut vs.runtime(Caller::Operator, 2).unwrap());
            }
        }
    }
    assert_eq!(checked, 160);
    let rt = vs.runtime(Caller::Operator, 1).unwrap();
    assert_eq!(rt.mt_get_num_entries("MyIngress.ipv4_lpm").unwrap(), 2);
    let s = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!(s.packets_in, 160);
    assert_eq!((s.panics, s.hop_cut, s.quarantine_drops), (0, 0, 0));
}

/// The same live changes with the devices over 2 worker threads: device A's packets are
/// dispatched without waiting, interleaved with every change (device B replaced, device C
/// added, linked from B — which brings B and C onto one worker — and removed, snapshots
/// switched); afterwards every one of A's 160 packets has come out, in order, exactly as
/// natively, and B's and C's checks hold after each change.
#[test]
fn live_change_under_traffic_with_two_workers() {
    let (rt_json, fw_json) = (basic(), firewall());
    let mut reference = native(&rt_json);
    router_entries(&mut reference);

    let vs = live_change_switch(&rt_json, &fw_json);
    let mut pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    assert_ne!(pool.worker_of(1), pool.worker_of(2));

    let a_packets = [
        ipv4(1, [10, 0, 2, 2], 6),
        ipv4(1, [10, 0, 3, 9], 17),
        ipv4(1, [10, 1, 1, 1], 6),
        non_ip(),
    ];
    let mut want = Vec::new();
    let mut a_out: Vec<OutputPacket> = Vec::new();
    // Runs `pkts` and waits; A's frames (ports 0, 2, 3) go to `a_out`, the rest is returned.
    let run = |pool: &mut VirtWorkers, a_out: &mut Vec<OutputPacket>, port, data: &[u8]| {
        let mut out = Vec::new();
        pool.process_batch(&[(port, data)], &mut out);
        let (a, rest): (Vec<_>, Vec<_>) = out.into_iter().partition(|o| o.port <= 3);
        a_out.extend(a);
        rest
    };
    for round in 0..40u32 {
        for p in &a_packets {
            want.extend(run_native(&mut reference, 1, p));
            pool.dispatch(&[(1, p)]);
        }
        match round % 5 {
            0 => {
                let r = pool.replace_device(2, spec(&fw_json)).unwrap();
                assert_eq!(r.entries, 2, "{r:?}");
                let out = run(&mut pool, &mut a_out, 5, &ipv4(1, [10, 0, 2, 2], 6));
                assert_eq!(out.len(), 1);
                assert_eq!(out[0].port, 6);
                assert!(run(&mut pool, &mut a_out, 5, &ipv4(1, [10, 0, 2, 2], 17)).is_empty());
            }
            1 => {
                pool.add_device(3, spec(&rt_json)).unwrap();
                pool.add_rule(rule(5, Some(7), 3, None)).unwrap();
                pool.map_port(3, 0, Target::Phys(8)).unwrap();
                // A link from B into C: the two now share a worker.
                pool.map_port(
                    2,
                    9,
                    Target::Link {
                        device: 3,
                        vport: 0,
                    },
                )
                .unwrap();
                assert_eq!(pool.worker_of(2), pool.worker_of(3));
                assert_eq!(run(&mut pool, &mut a_out, 7, &non_ip())[0].port, 8);
            }
            2 => {
                pool.remove_device(3).unwrap();
                assert!(run(&mut pool, &mut a_out, 7, &non_ip()).is_empty());
            }
            3 => {
                pool.activate_snapshot("maintenance").unwrap();
                assert!(run(&mut pool, &mut a_out, 5, &ipv4(1, [10, 0, 2, 2], 6)).is_empty());
            }
            _ => {
                pool.activate_snapshot("base").unwrap();
                let r = pool.replace_device(2, spec(&rt_json)).unwrap();
                assert_eq!((r.entries, r.tables.len()), (0, 0), "{r:?}");
                let r = pool.replace_device(2, spec(&fw_json)).unwrap();
                assert_eq!(r.entries, 0);
                pool.call(2, |vs| {
                    firewall_entries(&mut vs.runtime(Caller::Operator, 2).unwrap())
                })
                .unwrap();
            }
        }
    }
    pool.wait_idle();
    let mut rest = Vec::new();
    pool.take_outputs(&mut rest);
    a_out.extend(rest.into_iter().filter(|o| o.port <= 3));
    assert_eq!(a_out.len(), want.len());
    assert_eq!(a_out, want);
    assert!(pool.moves() >= 8, "{}", pool.moves());
    let n = pool
        .call(1, |vs| {
            vs.runtime(Caller::Operator, 1)
                .unwrap()
                .mt_get_num_entries("MyIngress.ipv4_lpm")
        })
        .unwrap();
    assert_eq!(n.unwrap(), 2);
    let s = pool.device_stats(1).unwrap();
    assert_eq!(s.packets_in, 160);
    assert_eq!((s.panics, s.hop_cut, s.quarantine_drops), (0, 0, 0));
    // Back on one thread, every device and the topology are there.
    let mut out = Vec::new();
    let vs = pool.shutdown(&mut out);
    assert!(out.is_empty());
    assert_eq!(vs.device_ids(), vec![1, 2]);
    assert_eq!(
        vs.device_stats(Caller::Operator, 1).unwrap().packets_in,
        160
    );
}

#[test]
fn bad_topology_changes_are_refused_and_change_nothing() {
    let mut vs = one_slice(&basic());
    let before = vs.topology().clone();
    let e = vs
        .map_port(
            1,
            3,
            Target::Link {
                device: 9,
                vport: 0,
            },
        )
        .unwrap_err();
    assert!(e.to_string().contains("device 9"), "{e}");
    assert!(vs.add_rule(rule(0, None, 4, None)).is_err());
    assert_eq!(
        vs.activate_snapshot("nope"),
        Err(VirtError::NoSuchSnapshot("nope".into()))
    );
    assert_eq!(vs.topology(), &before);
    assert_eq!(
        vs.add_device(1, spec(&basic())),
        Err(VirtError::DeviceExists(1))
    );
    let e = vs.add_device(2, spec("{")).unwrap_err();
    assert!(matches!(e, VirtError::Program { device: 2, .. }), "{e}");
}

// ---------------------------------------------------------------------- isolation

#[test]
fn a_loop_between_devices_is_cut_by_the_hop_budget() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=3 {
        vs.add_device(d, spec(&json)).unwrap();
    }
    vs.add_rule(rule(0, Some(1), 1, Some(0))).unwrap();
    vs.add_rule(rule(0, Some(2), 3, Some(0))).unwrap();
    // Non-IPv4 frames leave basic.p4 on port 0: 1 → 2 → 1 → ...
    vs.map_port(
        1,
        0,
        Target::Link {
            device: 2,
            vport: 0,
        },
    )
    .unwrap();
    vs.map_port(
        2,
        0,
        Target::Link {
            device: 1,
            vport: 0,
        },
    )
    .unwrap();
    vs.map_port(3, 0, Target::Phys(9)).unwrap();
    vs.set_max_hops(6);
    assert!(run_virt(&mut vs, 1, &non_ip()).is_empty());
    let s1 = vs.device_stats(Caller::Operator, 1).unwrap();
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!(s1.packets_in + s2.packets_in, 7);
    assert_eq!(s1.hop_cut + s2.hop_cut, 1);
    // The bystander is unaffected.
    assert_eq!(run_virt(&mut vs, 2, &non_ip()).len(), 1);
}

#[test]
fn one_tenant_filling_its_entry_quota_does_not_affect_another() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    vs.add_device(
        1,
        DeviceSpec {
            quotas: Quotas {
                max_entries: Some(3),
                ..Quotas::default()
            },
            ..spec(&json)
        },
    )
    .unwrap();
    vs.add_device(2, spec(&json)).unwrap();
    let key = |i: u8| {
        vec![MatchParam::Lpm {
            key: vec![10, 0, i, 0],
            prefix_len: 24,
        }]
    };
    let data = vec![vec![0, 0, 0, 0, 0, 1], vec![0, 1]];
    let mut a = vs.runtime(Caller::Operator, 1).unwrap();
    for i in 0..3 {
        a.mt_add_entry(
            "MyIngress.ipv4_lpm",
            &key(i),
            "MyIngress.ipv4_forward",
            &data,
            None,
        )
        .unwrap();
    }
    let e = a
        .mt_add_entry(
            "MyIngress.ipv4_lpm",
            &key(3),
            "MyIngress.ipv4_forward",
            &data,
            None,
        )
        .unwrap_err();
    assert_eq!(e, RuntimeError::Table(TableError::TABLE_FULL));
    // Deleting one makes room again.
    let h = a.mt_get_entries("MyIngress.ipv4_lpm").unwrap()[0].handle;
    a.mt_delete_entry("MyIngress.ipv4_lpm", h).unwrap();
    a.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &key(3),
        "MyIngress.ipv4_forward",
        &data,
        None,
    )
    .unwrap();
    let mut b = vs.runtime(Caller::Operator, 2).unwrap();
    for i in 0..50 {
        b.mt_add_entry(
            "MyIngress.ipv4_lpm",
            &key(i),
            "MyIngress.ipv4_forward",
            &data,
            None,
        )
        .unwrap();
    }
    assert_eq!(b.mt_get_num_entries("MyIngress.ipv4_lpm").unwrap(), 50);
    // The CLI language reports the refusal like BMv2 does.
    let program = vs.runtime(Caller::Operator, 1).unwrap().program().clone();
    let mut cli = tern_control::Cli::new(&program);
    let out = cli.execute(
        &mut vs.runtime(Caller::Operator, 1).unwrap(),
        "table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.9.0.0/16 => 00:00:00:00:00:01 1",
    );
    assert!(cli.last_command_failed());
    assert!(out.contains("TABLE_FULL"), "{out}");
}

#[test]
fn the_pass_quota_bounds_the_copies_of_one_packet() {
    let json = compile("p4/tutorials/multicast.p4", &[]);
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&json)).unwrap();
    vs.add_device(
        2,
        DeviceSpec {
            quotas: Quotas {
                max_entries: None,
                max_passes: 2,
                ..Quotas::default()
            },
            ..spec(&json)
        },
    )
    .unwrap();
    for d in 1..=2 {
        let mut rt = vs.runtime(Caller::Operator, d).unwrap();
        rt.mc_mgrp_create(1).unwrap();
        for p in 1..=4u32 {
            let n = rt.mc_node_create(p, &[p], &[]).unwrap();
            rt.mc_node_associate(1, n).unwrap();
        }
        vs.add_rule(rule(0, Some(d * 10), d, Some(9))).unwrap();
        for p in 1..=4 {
            vs.map_port(d, p, Target::Phys(d * 10 + p)).unwrap();
        }
    }
    let flood = hex("ffffffffffff 000000000001 0800 0102030405060708");
    // Four replicas without a quota; the ingress pass plus one replica with max_passes 2.
    assert_eq!(run_virt(&mut vs, 10, &flood).len(), 4);
    assert_eq!(run_virt(&mut vs, 20, &flood).len(), 1);
}

#[test]
fn a_panic_quarantines_one_device_and_the_others_go_on() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=2 {
        vs.add_device(d, spec(&json)).unwrap();
        vs.add_rule(rule(0, Some(d), d, Some(0))).unwrap();
        vs.map_port(d, 0, Target::Phys(d + 10)).unwrap();
    }
    vs.inject_panic(1, 3).unwrap();
    let mut got = [0usize; 3];
    for _ in 0..10 {
        for d in 1..=2u32 {
            got[d as usize] += run_virt(&mut vs, d, &non_ip()).len();
        }
    }
    assert_eq!(got, [0, 2, 10]);
    let s = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!((s.packets_in, s.panics, s.quarantine_drops), (3, 1, 7));
    let why = vs.quarantine(Caller::Operator, 1).unwrap().unwrap();
    assert!(why.contains("injected fault"), "{why}");
    // State kept; released, it forwards again.
    vs.release(1).unwrap();
    assert_eq!(run_virt(&mut vs, 1, &non_ip()).len(), 1);
}

/// A batch of packets for two devices runs as one batch per device (passes of up to 32, in
/// arrival order), each pass under its own `catch_unwind`: the injected panic in device 1's
/// 35th packet (inside its second pass) quarantines device 1 only and takes back only that
/// pass's frames (also those of the two packets before the fault in that pass, as after a
/// real panic in the middle of `Switch::process_batch`): device 1's first pass of 32 is out,
/// all 40 of device 2's packets are out in order.
#[test]
fn a_panic_inside_a_mixed_batch_quarantines_only_its_device_and_the_batch_goes_on() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=2 {
        vs.add_device(d, spec(&json)).unwrap();
        vs.add_rule(rule(0, Some(d), d, Some(0))).unwrap();
        vs.map_port(d, 0, Target::Phys(d + 10)).unwrap();
    }
    vs.inject_panic(1, 35).unwrap();
    let frames: Vec<Vec<u8>> = (0..40u8)
        .map(|i| {
            let mut f = non_ip();
            f.push(i);
            f
        })
        .collect();
    let batch: Vec<(Port, &[u8])> = frames
        .iter()
        .flat_map(|f| [(1, f.as_slice()), (2, f.as_slice())])
        .collect();
    let mut out = Vec::new();
    vs.process_batch(&batch, &mut out);
    let got: Vec<(Port, Vec<u8>)> = out.iter().map(|o| (o.port, o.data.clone())).collect();
    let mut want: Vec<(Port, Vec<u8>)> = frames[..32].iter().map(|f| (11, f.clone())).collect();
    want.extend(frames.iter().map(|f| (12, f.clone())));
    assert_eq!(got, want);
    let s = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!(
        (s.packets_in, s.panics, s.quarantine_drops, s.to_phys),
        (40, 1, 0, 32)
    );
    let s = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!((s.packets_in, s.panics, s.to_phys), (40, 0, 40));
    assert!(vs.quarantine(Caller::Operator, 2).unwrap().is_none());
    vs.recycle_outputs(&mut out);
    // Later packets of the quarantined device are counted, the other's forwarded.
    vs.process_batch(&batch, &mut out);
    assert_eq!(out.len(), 40);
    assert!(out.iter().all(|o| o.port == 12));
    assert_eq!(
        vs.device_stats(Caller::Operator, 1)
            .unwrap()
            .quarantine_drops,
        40
    );
    vs.recycle_outputs(&mut out);
    vs.release(1).unwrap();
    assert_eq!(run_virt(&mut vs, 1, &non_ip()).len(), 1);
}

/// Over a link the panic is charged to the device that was running: device 1 links every
/// frame to device 2, which runs the 40 frames of one hop in passes of 32 and 8; the fault
/// fires on its third frame, in the first pass. Device 2 is quarantined and that pass's
/// frames are lost with it, the 8 of its next pass are counted as quarantine drops; device 1
/// runs all 40 and stays in service.
#[test]
fn a_panic_downstream_of_a_link_quarantines_the_linked_device() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=2 {
        vs.add_device(d, spec(&json)).unwrap();
    }
    vs.add_rule(rule(0, Some(1), 1, Some(0))).unwrap();
    vs.map_port(
        1,
        0,
        Target::Link {
            device: 2,
            vport: 0,
        },
    )
    .unwrap();
    vs.map_port(2, 0, Target::Phys(12)).unwrap();
    vs.inject_panic(2, 3).unwrap();
    let frames: Vec<Vec<u8>> = (0..40u8)
        .map(|i| {
            let mut f = non_ip();
            f.push(i);
            f
        })
        .collect();
    let batch: Vec<(Port, &[u8])> = frames.iter().map(|f| (1, f.as_slice())).collect();
    let mut out = Vec::new();
    vs.process_batch(&batch, &mut out);
    assert!(out.is_empty());
    let s1 = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!((s1.packets_in, s1.to_links, s1.panics), (40, 40, 0));
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!(
        (s2.packets_in, s2.panics, s2.quarantine_drops, s2.to_phys),
        (32, 1, 8, 0)
    );
    assert!(vs.quarantine(Caller::Operator, 1).unwrap().is_none());
    assert!(vs.quarantine(Caller::Operator, 2).unwrap().is_some());
    // Released, the chain forwards every frame again, in order.
    vs.release(2).unwrap();
    vs.process_batch(&batch, &mut out);
    let got: Vec<(Port, Vec<u8>)> = out.iter().map(|o| (o.port, o.data.clone())).collect();
    let want: Vec<(Port, Vec<u8>)> = frames.iter().map(|f| (12, f.clone())).collect();
    assert_eq!(got, want);
}

#[test]
fn another_tenants_device_answers_like_a_missing_one() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for (d, who) in [(1, "alice"), (2, "bob")] {
        vs.add_device(
            d,
            DeviceSpec {
                owner: Some(who.into()),
                ..spec(&json)
            },
        )
        .unwrap();
    }
    assert!(vs.runtime(Caller::Tenant("alice"), 1).is_ok());
    let foreign = vs.runtime(Caller::Tenant("alice"), 2).err().unwrap();
    let missing = vs.runtime(Caller::Tenant("alice"), 3).err().unwrap();
    assert_eq!(
        foreign.to_string().replace('2', "N"),
        missing.to_string().replace('3', "N")
    );
    assert_eq!(foreign, VirtError::NoSuchDevice(2));
    assert_eq!(
        vs.device_stats(Caller::Tenant("bob"), 1),
        Err(VirtError::NoSuchDevice(1))
    );
    assert!(vs.take_cpu_packets(Caller::Tenant("bob"), 2).is_ok());
    assert!(vs.runtime(Caller::Operator, 2).is_ok());
}

// ---------------------------------------------------------------------- config

#[test]
fn config_file_builds_a_chain_with_commands_and_snapshots() {
    let dir = tern_fixtures::scratch("virt-config");
    std::fs::write(
        dir.join("fw.txt"),
        "table_add FwIngress.fwd FwIngress.set_egress 1 => 2\n\
         table_add FwIngress.acl FwIngress.deny 10.0.1.0&&&255.255.255.0 0&&&0 17&&&255 => 1\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("rt.txt"),
        "table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 2\n",
    )
    .unwrap();
    let text = format!(
        r#"{{
  "max_hops": 4,
  "devices": [
    {{ "id": 1, "program": "{ROOT}p4/virt/firewall.p4", "owner": "alice", "commands": "fw.txt",
       "quotas": {{ "max_entries": 10, "max_passes": 16 }},
       "ports": {{ "2": "link:2:1" }} }},
    {{ "id": 2, "program": "{ROOT}p4/tutorials/basic.p4", "commands": "rt.txt",
       "ports": {{ "2": "phys:2", "0": "cpu" }} }}
  ],
  "rules": [ {{ "priority": 1, "port": 1, "device": 1 }},
             {{ "priority": 5, "port": 1, "field": "ipv4.dst", "value": "10.0.3.0",
                "mask": "255.255.255.0", "device": 2, "vport": 1 }} ],
  "snapshots": {{ "off": {{ "rules": [] }} }}
}}"#
    );
    let cfg = Config::parse(&text, "virt.json").unwrap();
    let (mut vs, _log) = cfg.build(&dir).unwrap();
    let out = run_virt(&mut vs, 1, &ipv4(1, [10, 0, 2, 2], 6));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    assert_eq!(&out[0].data[..6], &[8, 0, 0, 0, 2, 0x22]);
    assert!(run_virt(&mut vs, 1, &ipv4(1, [10, 0, 2, 2], 17)).is_empty());
    // The field rule sends 10.0.3.0/24 straight to the router, which has no route: dropped.
    assert!(run_virt(&mut vs, 1, &ipv4(1, [10, 0, 3, 3], 6)).is_empty());
    assert_eq!(vs.device_stats(Caller::Operator, 1).unwrap().packets_in, 2);
    // Non-IPv4 goes through the firewall, then to the router's CPU port.
    assert!(run_virt(&mut vs, 1, &non_ip()).is_empty());
    assert_eq!(vs.take_cpu_packets(Caller::Operator, 2).unwrap().len(), 1);
    vs.activate_snapshot("off").unwrap();
    assert!(run_virt(&mut vs, 1, &ipv4(1, [10, 0, 2, 2], 6)).is_empty());
    assert_eq!(vs.stats().unclassified, 1);
}

#[test]
fn config_errors_say_what_and_where() {
    let err = |text: &str| Config::parse(text, "v.json").unwrap_err().to_string();
    assert!(err("{").contains("not JSON"));
    let e = err(r#"{"devices": [], "bogus": 1}"#);
    assert!(e.contains("top level") && e.contains("bogus"), "{e}");
    let e = err(r#"{"devices": [{"id": 1, "program": "a.json", "ports": {"3": "wire:1"}}]}"#);
    assert!(
        e.contains(r#"devices[0].ports."3""#) && e.contains("wire:1"),
        "{e}"
    );
    let e = err(
        r#"{"devices": [{"id": 1, "program": "a.json"}], "rules": [{"device": 1, "field": "ipv6.dst", "value": 1}]}"#,
    );
    assert!(
        e.contains("rules[0].field") && e.contains("ipv6.dst"),
        "{e}"
    );
    let e = err(
        r#"{"devices": [{"id": 1, "program": "a.json"}], "rules": [{"device": 1, "vlan": 5000}]}"#,
    );
    assert!(e.contains("rules[0].vlan"), "{e}");
    let e = err(r#"{"devices": [{"id": 1, "program": "a.json"}, {"id": 1, "program": "b.json"}]}"#);
    assert!(e.contains("devices[1].id"), "{e}");
    let e = err(r#"{"devices": [{"id": 1, "program": "a.json", "vlans": {"2": 0}}]}"#);
    assert!(
        e.contains(r#"devices[0].vlans."2""#) && e.contains("1..=4094"),
        "{e}"
    );
    let e = err(r#"{"devices": [{"id": 1, "program": "a.json", "vlans": {"2": 4095}}]}"#);
    assert!(
        e.contains(r#"devices[0].vlans."2""#) && e.contains("above 4094"),
        "{e}"
    );
    // The parser-state quota: 1,000 by default, 1..=100,000.
    let quotas = |q: &str| {
        let text = format!(r#"{{"devices": [{{"id": 1, "program": "a.json", "quotas": {q}}}]}}"#);
        Config::parse(&text, "v.json").map(|c| c.devices[0].quotas)
    };
    assert_eq!(quotas("{}").unwrap().max_parser_states, 1_000);
    let q = quotas(r#"{"max_parser_states": 64}"#).unwrap();
    assert_eq!(q.max_parser_states, 64);
    let e = quotas(r#"{"max_parser_states": 0}"#)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("devices[0].quotas.max_parser_states") && e.contains("at least 1"),
        "{e}"
    );
    let e = quotas(r#"{"max_parser_states": 100001}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("100001 is above 100000"), "{e}");
    let w = |words: &[&str]| tern_virt::config::parse_quota_words(words, Quotas::default());
    assert_eq!(w(&["max_parser_states=5"]).unwrap().max_parser_states, 5);
    let e = w(&["max_parser_states=0"]).unwrap_err();
    assert!(e.contains("not in 1..=100000"), "{e}");
    // The buffer quota: none by default (the switch's), 1..=MAX_BUFFERS.
    assert_eq!(quotas("{}").unwrap().max_buffers, None);
    assert_eq!(
        quotas(r#"{"max_buffers": 256}"#).unwrap().max_buffers,
        Some(256)
    );
    let e = quotas(r#"{"max_buffers": 0}"#).unwrap_err().to_string();
    assert!(
        e.contains("devices[0].quotas.max_buffers") && e.contains("at least 1"),
        "{e}"
    );
    let e = quotas(r#"{"max_buffers": 2000000}"#)
        .unwrap_err()
        .to_string();
    assert!(e.contains("is above 1048576"), "{e}");
    // Tagged virtual ports are part of the topology and of every snapshot.
    let cfg = Config::parse(
        r#"{"devices": [{"id": 1, "program": "a.json", "vlans": {"2": 100}}],
            "snapshots": {"s": {"rules": []}}}"#,
        "v.json",
    )
    .unwrap();
    let want = BTreeMap::from([(1, BTreeMap::from([(2, 100u16)]))]);
    assert_eq!(cfg.topology.vlans, want);
    assert_eq!(cfg.snapshots["s"].vlans, want);
    // Build-time errors: a missing program, a link into a device that does not exist.
    let dir = tern_fixtures::scratch("virt-config-err");
    let cfg = Config::parse(
        r#"{"devices": [{"id": 1, "program": "missing.json"}]}"#,
        "v.json",
    )
    .unwrap();
    let e = cfg.build(&dir).unwrap_err().to_string();
    assert!(
        e.contains("devices[0].program") && e.contains("missing.json"),
        "{e}"
    );
    let cfg = Config::parse(
        &format!(
            r#"{{"devices": [{{"id": 1, "program": "{ROOT}p4/virt/firewall.p4", "ports": {{"1": "link:7:1"}}}}]}}"#
        ),
        "v.json",
    )
    .unwrap();
    let e = cfg.build(&dir).unwrap_err().to_string();
    assert!(e.contains("device 7"), "{e}");
}

// ---------------------------------------------------------------------- per-tenant Thrift

/// A Thrift server per tenant: the tenant's client (BMv2's wire protocol) reaches its own
/// device only, while packets flow through the shared switch.
#[test]
fn thrift_server_per_tenant_reaches_only_its_device() {
    use std::sync::{Arc, Mutex};
    use tern_virt::SharedDevice;

    let json = basic();
    let mut vs = VirtSwitch::new();
    for (d, who) in [(1, "alice"), (2, "bob")] {
        vs.add_device(
            d,
            DeviceSpec {
                owner: Some(who.into()),
                ..spec(&json)
            },
        )
        .unwrap();
        vs.add_rule(rule(0, Some(d), d, Some(1))).unwrap();
        vs.map_port(d, 2, Target::Phys(10 * d + 2)).unwrap();
    }
    let vs = Arc::new(Mutex::new(vs));
    // Alice's credentials do not reach Bob's device: the same answer as for no device.
    assert_eq!(
        SharedDevice::new(vs.clone(), Caller::Tenant("alice"), 2).unwrap_err(),
        VirtError::NoSuchDevice(2)
    );
    assert_eq!(
        SharedDevice::new(vs.clone(), Caller::Tenant("alice"), 3).unwrap_err(),
        VirtError::NoSuchDevice(3)
    );
    let alice = SharedDevice::new(vs.clone(), Caller::Tenant("alice"), 1).unwrap();
    let (addr, _server) = tern_thrift::spawn("127.0.0.1:0", Arc::new(Mutex::new(alice))).unwrap();
    let mut client = tern_thrift::ThriftRuntime::connect(addr).unwrap();
    assert_eq!(client.switch_info().device_id, 1);
    assert_eq!(client.get_config(), json);
    router_entries(&mut client);
    assert_eq!(client.mt_get_num_entries("MyIngress.ipv4_lpm").unwrap(), 2);
    let mut g = vs.lock().unwrap();
    assert_eq!(
        g.runtime(Caller::Operator, 2)
            .unwrap()
            .mt_get_num_entries("MyIngress.ipv4_lpm")
            .unwrap(),
        0
    );
    // Alice's routes forward her traffic; Bob's device, without routes, drops his.
    let out = run_virt(&mut g, 1, &ipv4(1, [10, 0, 2, 2], 6));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 12);
    assert!(run_virt(&mut g, 2, &ipv4(1, [10, 0, 2, 2], 6)).is_empty());
    // Once the device is removed, the server answers like for a missing device.
    g.remove_device(1).unwrap();
    drop(g);
    assert!(client.mt_get_num_entries("MyIngress.ipv4_lpm").is_err());
}

// ---------------------------------------------------------------------- HyPer4 example 2

/// An IPv4 frame with a correct header checksum.
fn ipv4_ok(dmac: u64, smac: u64, src: [u8; 4], dst: [u8; 4], proto: u8, ttl: u8) -> Vec<u8> {
    let mut p = dmac.to_be_bytes()[2..].to_vec();
    p.extend_from_slice(&smac.to_be_bytes()[2..]);
    p.extend_from_slice(&[8, 0]);
    let mut h = vec![0x45, 0, 0, 0x24, 0, 1, 0, 0, ttl, proto, 0, 0];
    h.extend_from_slice(&src);
    h.extend_from_slice(&dst);
    let c = ipv4_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&h);
    p.extend_from_slice(&[0x42; 16]);
    p
}

/// HyPer4's example 2 on one tern: ports 1–2 are an L2 switch's slice; ports 3–4 a firewall
/// linked to a router. Both slices work, the firewall blocks, and nothing crosses slices.
#[test]
fn hyper4_example_2_slicing_and_composition() {
    let (h1, h2, h3, h4, gw) = (0x0a01u64, 0x0a02u64, 0x0a03u64, 0x0a04u64, 0x0a0au64);
    let mac = |m: u64| m.to_be_bytes()[2..].to_vec();
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&compile("p4/virt/l2_switch.p4", &[])))
        .unwrap();
    vs.add_device(2, spec(&firewall())).unwrap();
    vs.add_device(3, spec(&compile("p4/virt/router.p4", &[])))
        .unwrap();
    for (port, dev, vport) in [(1, 1, 1), (2, 1, 2), (3, 2, 1), (4, 2, 2)] {
        vs.add_rule(rule(0, Some(port), dev, Some(vport))).unwrap();
    }
    for (dev, vport, target) in [
        (1, 1, Target::Phys(1)),
        (1, 2, Target::Phys(2)),
        (
            2,
            3,
            Target::Link {
                device: 3,
                vport: 1,
            },
        ),
        (3, 1, Target::Phys(3)),
        (3, 2, Target::Phys(4)),
    ] {
        vs.map_port(dev, vport, target).unwrap();
    }
    {
        let mut l2 = vs.runtime(Caller::Operator, 1).unwrap();
        l2.mc_mgrp_create(1).unwrap();
        for p in [1, 2] {
            let n = l2.mc_node_create(0, &[p], &[]).unwrap();
            l2.mc_node_associate(1, n).unwrap();
        }
        for (m, p) in [(h1, 1u8), (h2, 2)] {
            add(
                &mut l2,
                "L2Ingress.smac",
                vec![MatchParam::Exact(mac(m))],
                "L2Ingress.known",
                &[],
            );
            add(
                &mut l2,
                "L2Ingress.dmac",
                vec![MatchParam::Exact(mac(m))],
                "L2Ingress.forward",
                &[&[0, p]],
            );
        }
    }
    {
        let mut fw = vs.runtime(Caller::Operator, 2).unwrap();
        for p in [1u8, 2] {
            add(
                &mut fw,
                "FwIngress.fwd",
                vec![MatchParam::Exact(vec![0, p])],
                "FwIngress.set_egress",
                &[&[0, 3]],
            );
        }
        // Block UDP into 10.0.2.0/24.
        let t = |k: &[u8], m: &[u8]| MatchParam::Ternary {
            key: k.to_vec(),
            mask: m.to_vec(),
        };
        add(
            &mut fw,
            "FwIngress.acl",
            vec![
                t(&[0; 4], &[0; 4]),
                t(&[10, 0, 2, 0], &[255, 255, 255, 0]),
                t(&[17], &[255]),
            ],
            "FwIngress.deny",
            &[],
        );
    }
    {
        let mut r = vs.runtime(Caller::Operator, 3).unwrap();
        for (ip, port, m) in [([10, 0, 1, 3], 1u8, h3), ([10, 0, 2, 4], 2, h4)] {
            add(
                &mut r,
                "RtIngress.ipv4_lpm",
                vec![MatchParam::Lpm {
                    key: ip.to_vec(),
                    prefix_len: 24,
                }],
                "RtIngress.set_nhop",
                &[&ip, &[0, port]],
            );
            add(
                &mut r,
                "RtIngress.forward",
                vec![MatchParam::Exact(ip.to_vec())],
                "RtIngress.set_dmac",
                &[&mac(m)],
            );
            add(
                &mut r,
                "RtEgress.send_frame",
                vec![MatchParam::Exact(vec![0, port])],
                "RtEgress.rewrite_mac",
                &[&mac(gw)],
            );
        }
    }
    // h1 -> h2 inside the L2 slice, unchanged.
    let f = ipv4_ok(h2, h1, [10, 0, 0, 1], [10, 0, 0, 2], 6, 64);
    let out = run_virt(&mut vs, 1, &f);
    assert_eq!(out, vec![OutputPacket { port: 2, data: f }]);
    // A broadcast from h1 floods inside its slice only.
    let b = hex("ffffffffffff 000000000a01 0806 0001080006040001");
    let out = run_virt(&mut vs, 1, &b);
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![2]);
    // h3 -> h4 through firewall and router: routed (TTL - 1, MACs rewritten, checksum right).
    let f = ipv4_ok(gw, h3, [10, 0, 1, 3], [10, 0, 2, 4], 6, 64);
    let out = run_virt(&mut vs, 3, &f);
    let want = ipv4_ok(h4, gw, [10, 0, 1, 3], [10, 0, 2, 4], 6, 63);
    assert_eq!(
        out,
        vec![OutputPacket {
            port: 4,
            data: want
        }]
    );
    // And back.
    let f = ipv4_ok(gw, h4, [10, 0, 2, 4], [10, 0, 1, 3], 17, 9);
    let out = run_virt(&mut vs, 4, &f);
    let want = ipv4_ok(h3, gw, [10, 0, 2, 4], [10, 0, 1, 3], 17, 8);
    assert_eq!(
        out,
        vec![OutputPacket {
            port: 3,
            data: want
        }]
    );
    // UDP into 10.0.2.0/24 is blocked by the firewall.
    let f = ipv4_ok(gw, h3, [10, 0, 1, 3], [10, 0, 2, 4], 17, 64);
    assert!(run_virt(&mut vs, 3, &f).is_empty());
    // h4's address sent into the L2 slice stays there (unknown MAC: flooded to port 2 only).
    let f = ipv4_ok(h4, h1, [10, 0, 0, 1], [10, 0, 2, 4], 6, 64);
    let out = run_virt(&mut vs, 1, &f);
    assert_eq!(out.iter().map(|o| o.port).collect::<Vec<_>>(), vec![2]);
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!((s2.packets_in, s2.to_links), (3, 2));
}

/// A tenant whose program clones and resubmits every packet forever (a clone storm) is cut
/// by its pass quota — the number of copies it emits follows the quota, where the engine's own
/// cap would allow 10,000 instances; its neighbour forwards every packet meanwhile.
#[test]
fn a_clone_and_resubmit_storm_is_bounded_by_the_pass_quota() {
    const LOOP: &str = r#"
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers { eth_t eth; }
struct metadata { }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition accept; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    apply { clone(CloneType.I2E, 1); resubmit_preserving_field_list(0); }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let looping = tern_p4::compile_str(LOOP, "loop.p4", &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{d}"))
        .json;
    let mut vs = VirtSwitch::new();
    vs.add_device(
        1,
        DeviceSpec {
            quotas: Quotas {
                max_entries: None,
                max_passes: 16,
                ..Quotas::default()
            },
            ..spec(&looping)
        },
    )
    .unwrap();
    vs.add_device(
        3,
        DeviceSpec {
            quotas: Quotas {
                max_entries: None,
                max_passes: 64,
                ..Quotas::default()
            },
            ..spec(&looping)
        },
    )
    .unwrap();
    vs.add_device(2, spec(&basic())).unwrap();
    vs.add_rule(rule(0, Some(1), 1, None)).unwrap();
    vs.add_rule(rule(0, Some(3), 3, Some(1))).unwrap();
    vs.add_rule(rule(0, Some(2), 2, Some(0))).unwrap();
    for d in [1, 3] {
        vs.map_port(d, 1, Target::Phys(d)).unwrap();
        vs.runtime(Caller::Operator, d)
            .unwrap()
            .mirroring_session_add(
                1,
                tern_runtime::MirroringSession {
                    port: Some(1),
                    mgid: None,
                },
            )
            .unwrap();
    }
    vs.map_port(2, 0, Target::Phys(20)).unwrap();
    for _ in 0..20 {
        // Each pass emits one clone, until the quota ends the lineage.
        let small = run_virt(&mut vs, 1, &non_ip());
        let big = run_virt(&mut vs, 3, &non_ip());
        assert!((1..=16).contains(&small.len()), "{}", small.len());
        assert!(big.len() > small.len() && big.len() <= 64, "{}", big.len());
        assert!(small.iter().chain(&big).all(|o| o.data == non_ip()));
        assert_eq!(run_virt(&mut vs, 2, &non_ip()).len(), 1);
    }
    let s = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!((s.packets_in, s.panics), (20, 0));
}

/// Removing a device that others link into turns those links into drops; the topology stays
/// valid (later changes are accepted) and a snapshot naming the device is refused.
#[test]
fn removing_a_linked_device_keeps_the_topology_valid() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=2 {
        vs.add_device(d, spec(&json)).unwrap();
    }
    vs.add_rule(rule(0, Some(1), 1, Some(0))).unwrap();
    vs.map_port(
        1,
        0,
        Target::Link {
            device: 2,
            vport: 0,
        },
    )
    .unwrap();
    vs.map_port(2, 0, Target::Phys(7)).unwrap();
    vs.save_snapshot("both");
    assert_eq!(run_virt(&mut vs, 1, &non_ip())[0].port, 7);
    vs.remove_device(2).unwrap();
    assert!(run_virt(&mut vs, 1, &non_ip()).is_empty());
    assert_eq!(vs.device_stats(Caller::Operator, 1).unwrap().dropped, 1);
    assert_eq!(vs.topology().port_maps[&1][&0], Target::Drop);
    vs.add_rule(rule(1, Some(2), 1, Some(0))).unwrap();
    let e = vs.activate_snapshot("both").unwrap_err();
    assert!(e.to_string().contains("device 2"), "{e}");
    assert_eq!(vs.stats().dangling, 0);
}

/// 64 devices (one P4 program compiled once, its JSON loaded into 64 switches) run at once, each on its
/// own physical port with its own route.
#[test]
fn sixty_four_devices_run_at_once() {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=64u32 {
        vs.add_device(d, spec(&json)).unwrap();
        vs.add_rule(rule(0, Some(d), d, Some(1))).unwrap();
        vs.map_port(d, 2, Target::Phys(1000 + d)).unwrap();
        let mut rt = vs.runtime(Caller::Operator, d).unwrap();
        add(
            &mut rt,
            "MyIngress.ipv4_lpm",
            vec![MatchParam::Lpm {
                key: vec![10, 0, 2, d as u8],
                prefix_len: 32,
            }],
            "MyIngress.ipv4_forward",
            &[&[8, 0, 0, 0, 2, d as u8], &[0, 2]],
        );
    }
    for d in 1..=64u32 {
        let out = run_virt(&mut vs, d, &ipv4(1, [10, 0, 2, d as u8], 6));
        assert_eq!(out.len(), 1, "device {d}");
        assert_eq!((out[0].port, out[0].data[5]), (1000 + d, d as u8));
        // Another device's address has no route here.
        let other = (d % 64 + 1) as u8;
        assert!(run_virt(&mut vs, d, &ipv4(1, [10, 0, 2, other], 6)).is_empty());
    }
    assert_eq!(vs.device_ids().len(), 64);
}

/// The shipped HyPer4 example 2 configuration (`p4/virt/example2/`) builds and behaves.
#[test]
fn shipped_example_2_config_works() {
    let path = format!("{ROOT}p4/virt/example2/virt.json");
    let cfg = Config::load(std::path::Path::new(&path)).unwrap();
    let (mut vs, _) = cfg
        .build(std::path::Path::new(&format!("{ROOT}p4/virt/example2")))
        .unwrap();
    let (h1, h2, h3, h4, gw) = (0x0a01u64, 0x0a02u64, 0x0a03u64, 0x0a04u64, 0x0a0au64);
    let f = ipv4_ok(h2, h1, [10, 0, 0, 1], [10, 0, 0, 2], 6, 64);
    assert_eq!(
        run_virt(&mut vs, 1, &f),
        vec![OutputPacket { port: 2, data: f }]
    );
    let f = ipv4_ok(gw, h3, [10, 0, 1, 3], [10, 0, 2, 4], 6, 64);
    let want = ipv4_ok(h4, gw, [10, 0, 1, 3], [10, 0, 2, 4], 6, 63);
    assert_eq!(
        run_virt(&mut vs, 3, &f),
        vec![OutputPacket {
            port: 4,
            data: want
        }]
    );
    let f = ipv4_ok(gw, h3, [10, 0, 1, 3], [10, 0, 2, 4], 17, 64);
    assert!(run_virt(&mut vs, 3, &f).is_empty());
    // Tenant B reaches the firewall and the router, not the L2 switch.
    assert!(vs.runtime(Caller::Tenant("tenant-b"), 3).is_ok());
    assert!(vs.runtime(Caller::Tenant("tenant-b"), 1).is_err());
    // The "l2-only" snapshot takes slice B offline.
    vs.activate_snapshot("l2-only").unwrap();
    let f = ipv4_ok(gw, h3, [10, 0, 1, 3], [10, 0, 2, 4], 6, 64);
    assert!(run_virt(&mut vs, 3, &f).is_empty());
    assert_eq!(vs.stats().unclassified, 1);
}

/// Truncated and random frames through VLAN and field rules, a chain and a CPU port: nothing
/// panics, nothing is quarantined, every packet is accounted for.
#[test]
fn malformed_frames_never_crash_the_classifier_or_devices() {
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&firewall())).unwrap();
    vs.add_device(2, spec(&basic())).unwrap();
    firewall_entries(&mut vs.runtime(Caller::Operator, 1).unwrap());
    vs.add_rule(Rule {
        vlan: Some(3),
        ..rule(5, None, 2, Some(1))
    })
    .unwrap();
    for f in [Field::Ipv4Dst, Field::Ipv4Proto, Field::EthSrc] {
        vs.add_rule(Rule {
            field: Some(FieldMatch {
                field: f,
                value: 1,
                mask: 1,
            }),
            ..rule(3, None, 1, Some(1))
        })
        .unwrap();
    }
    vs.add_rule(rule(0, Some(1), 1, None)).unwrap();
    vs.map_port(
        1,
        2,
        Target::Link {
            device: 2,
            vport: 1,
        },
    )
    .unwrap();
    vs.map_port(2, 0, Target::Cpu).unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let base = ipv4(1, [10, 0, 2, 2], 6);
    let mut sent = 0u64;
    for len in 0..=base.len() + 8 {
        for _ in 0..8 {
            let mut f: Vec<u8> = (0..len).map(|i| *base.get(i).unwrap_or(&0)).collect();
            if !f.is_empty() {
                let n = (next() as usize) % f.len();
                f[n] = next() as u8;
            }
            if f.len() > 16 && next() % 3 == 0 {
                f[12] = 0x81;
                f[13] = 0;
                f[15] = (next() % 4) as u8;
            }
            let port = (next() % 3) as u32;
            let _ = run_virt(&mut vs, port, &f);
            sent += 1;
        }
    }
    let s1 = vs.device_stats(Caller::Operator, 1).unwrap();
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!((s1.panics, s2.panics), (0, 0));
    assert!(vs.quarantine(Caller::Operator, 1).unwrap().is_none());
    let classified_first = s1.packets_in + s2.packets_in - s1.to_links;
    assert_eq!(classified_first + vs.stats().unclassified, sent);
}

/// A batch whose packets all go to one device without links runs in one call of the device's
/// switch: the outputs are exactly those of packet-by-packet processing; a mixed batch falls
/// back to packet by packet.
#[test]
fn whole_batch_path_equals_packet_by_packet() {
    let json = basic();
    let build = || {
        let mut vs = VirtSwitch::new();
        for d in 1..=2 {
            vs.add_device(d, spec(&json)).unwrap();
            router_entries(&mut vs.runtime(Caller::Operator, d).unwrap());
            for p in [0, 2, 3] {
                vs.map_port(d, p, Target::Phys(10 * d + p)).unwrap();
            }
        }
        vs.add_rule(rule(0, Some(1), 1, None)).unwrap();
        vs.add_rule(rule(0, Some(4), 1, None)).unwrap();
        vs.add_rule(rule(0, Some(2), 2, None)).unwrap();
        vs.set_clock_us(Some(5));
        vs
    };
    let frames = [
        ipv4(1, [10, 0, 2, 2], 6),
        ipv4(1, [10, 0, 3, 9], 17),
        ipv4(1, [10, 1, 1, 1], 6),
        non_ip(),
    ];
    for ports in [[1, 1, 1, 4], [1, 2, 1, 2]] {
        let batch: Vec<(Port, &[u8])> = ports
            .iter()
            .zip(&frames)
            .map(|(&p, f)| (p, f.as_slice()))
            .collect();
        let (mut a, mut b) = (build(), build());
        let mut whole = Vec::new();
        a.process_batch(&batch, &mut whole);
        let mut one_by_one = Vec::new();
        for &(p, f) in &batch {
            b.process_batch(&[(p, f)], &mut one_by_one);
        }
        assert_eq!(whole, one_by_one, "ports {ports:?}");
        assert_eq!(whole.len(), 3);
        for d in 1..=2 {
            assert_eq!(
                a.device_stats(Caller::Operator, d).unwrap(),
                b.device_stats(Caller::Operator, d).unwrap()
            );
        }
    }
}

/// A batch for one device whose port-only rules renumber its ports (physical 7 and 8 arrive on
/// virtual 1 and 4) runs whole, renumbered in chunks of 32 on the stack: 70 packets (three
/// chunks) of calc.p4, which answers out of the ingress port, give exactly the outputs and
/// counters of packet-by-packet processing, on the physical ports the virtual ones map to.
#[test]
fn renumbered_whole_batch_equals_packet_by_packet() {
    let json = compile("p4/tutorials/calc.p4", &[]);
    let build = || {
        let mut vs = VirtSwitch::new();
        vs.add_device(1, spec(&json)).unwrap();
        vs.map_port(1, 1, Target::Phys(21)).unwrap();
        vs.map_port(1, 4, Target::Phys(24)).unwrap();
        vs.add_rule(rule(0, Some(7), 1, Some(1))).unwrap();
        vs.add_rule(rule(0, Some(8), 1, Some(4))).unwrap();
        vs.set_clock_us(Some(5));
        vs
    };
    let calc = |op: u8, a: u32, b: u32| {
        let mut f = hex("000000000001 000000000002 1234 50 34 01");
        f.push(op);
        f.extend_from_slice(&a.to_be_bytes());
        f.extend_from_slice(&b.to_be_bytes());
        f.extend_from_slice(&[0; 4]);
        f
    };
    let frames = [
        calc(b'+', 7, 5),
        calc(b'-', 9, 4),
        calc(b'^', 6, 3),
        non_ip(),
    ];
    let batch: Vec<(Port, &[u8])> = (0..70)
        .map(|i| (7 + (i % 3 == 0) as Port, frames[i % 4].as_slice()))
        .collect();
    let (mut a, mut b) = (build(), build());
    let mut whole = Vec::new();
    a.process_batch(&batch, &mut whole);
    let mut one_by_one = Vec::new();
    for &(p, f) in &batch {
        b.process_batch(&[(p, f)], &mut one_by_one);
    }
    // Every calc frame answered (the non-calc ones dropped), on both mapped ports.
    let answered = batch
        .iter()
        .filter(|(_, f)| f.len() > 14 && f[12] == 0x12)
        .count();
    assert_eq!(whole.len(), answered);
    for port in [21, 24] {
        assert!(
            whole.iter().any(|o| o.port == port),
            "nothing out of {port}"
        );
    }
    assert_eq!(whole, one_by_one);
    assert_eq!(
        a.device_stats(Caller::Operator, 1).unwrap(),
        b.device_stats(Caller::Operator, 1).unwrap()
    );
    assert_eq!(a.device_stats(Caller::Operator, 1).unwrap().packets_in, 70);
    // Batches all on one physical port (every packet on that port's virtual port): each
    // answer leaves by the port it came in on.
    for (port, out_port) in [(7, 21), (8, 24)] {
        let batch: Vec<(Port, &[u8])> = (0..40).map(|i| (port, frames[i % 4].as_slice())).collect();
        let (mut whole, mut one_by_one) = (Vec::new(), Vec::new());
        a.process_batch(&batch, &mut whole);
        for &(p, f) in &batch {
            b.process_batch(&[(p, f)], &mut one_by_one);
        }
        assert_eq!(whole.len(), 30, "port {port}");
        assert!(whole.iter().all(|o| o.port == out_port), "port {port}");
        assert_eq!(whole, one_by_one, "port {port}");
    }
    assert_eq!(
        a.device_stats(Caller::Operator, 1).unwrap(),
        b.device_stats(Caller::Operator, 1).unwrap()
    );
}

/// Port-only rule sets are compiled to an array by port; the answers equal the rule scan's
/// (which a VLAN rule, matching nothing here, forces) for every port and priority order.
#[test]
fn port_table_classifier_equals_the_rule_scan() {
    let json = basic();
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for round in 0..30 {
        let mut vs = VirtSwitch::new();
        for d in 1..=3 {
            vs.add_device(d, spec(&json)).unwrap();
        }
        let mut t = Topology::default();
        for _ in 0..(next() % 8) {
            t.rules.push(Rule {
                priority: (next() % 4) as i32,
                port: (next() % 3 != 0).then(|| (next() % 6) as Port),
                vlan: None,
                field: None,
                device: (next() % 3 + 1) as u32,
                vport: (next() % 2 == 0).then(|| (next() % 9) as Port),
            });
        }
        vs.set_topology(t.clone()).unwrap();
        let frame = non_ip();
        let table: Vec<_> = (0..10).map(|p| vs.classify(p, &frame)).collect();
        // The straightforward rule scan, written out here.
        let mut order: Vec<&Rule> = t.rules.iter().collect();
        order.sort_by_key(|r| std::cmp::Reverse(r.priority));
        let scan: Vec<_> = (0..10)
            .map(|p| {
                order
                    .iter()
                    .find(|r| !matches!(r.port, Some(q) if q != p))
                    .map(|r| (r.device, r.vport.unwrap_or(p)))
            })
            .collect();
        assert_eq!(table, scan, "round {round}: {:?}", t.rules);
        // A VLAN rule (no frame here is tagged) switches to the scan: same answers.
        t.rules.push(Rule {
            vlan: Some(9),
            ..rule(100, None, 1, None)
        });
        vs.set_topology(t).unwrap();
        let scanned: Vec<_> = (0..10).map(|p| vs.classify(p, &frame)).collect();
        assert_eq!(scanned, scan, "round {round}");
    }
}
