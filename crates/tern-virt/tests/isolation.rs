//! Isolation between tenants (issue 17, "quotas and isolation"): the register-memory quota
//! checked at load, a parser that loops, a multicast storm and a control-plane flood. In each
//! case a victim device (basic.p4 with one /32 route) forwards every one of its packets
//! correctly and its counters are exact, while the attacker is contained. The packet attacks
//! run three ways: on the caller's thread, and with the devices over 1 and 2 worker threads
//! (`VirtWorkers`; with 1 both devices share the worker).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use tern_runtime::{MatchParam, OutputPacket, Runtime, RuntimeError, TableError};
use tern_virt::{
    register_bytes, Caller, Cost, DeviceSpec, DeviceStats, FairScheduler, Quotas, Rule,
    SharedDevice, Target, VirtError, VirtSwitch, VirtWorkers, WorkerOptions,
};

mod common;
use common::basic;

const VICTIM: u32 = 1;
const ATTACKER: u32 = 2;

fn p4(src: &str) -> String {
    tern_p4::compile_str(src, "attacker.p4", &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{d}"))
        .json
}

fn spec(json: &str, owner: &str, quotas: Quotas) -> DeviceSpec {
    DeviceSpec {
        json: json.to_string(),
        owner: Some(owner.to_string()),
        quotas,
    }
}

/// A v1model program around `parser_body` and `ingress_body` (Ethernet only).
fn program(parser_body: &str, ingress_decls: &str, ingress_body: &str) -> String {
    format!(
        r#"
#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct headers {{ eth_t eth; }}
struct metadata {{ }}
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {{
    {parser_body}
}}
control V(inout headers h, inout metadata m) {{ apply {{ }} }}
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {{
    {ingress_decls}
    apply {{ {ingress_body} }}
}}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout headers h, inout metadata m) {{ apply {{ }} }}
control D(packet_out p, in headers h) {{ apply {{ p.emit(h.eth); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    )
}

/// The victim's packet: IPv4 10.0.1.1 → 10.0.2.2 in on port 1.
fn victim_packet(seq: u16) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    p.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ]);
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0x5a; 14]);
    p
}

/// What basic.p4 makes of it: MACs rewritten, TTL decremented, checksum updated, port 2.
fn victim_expected(seq: u16) -> Vec<u8> {
    let mut native =
        tern_dataplane::Switch::from_json(&basic(), tern_dataplane::SwitchOptions::default())
            .unwrap();
    victim_route(&mut native);
    let mut out = Vec::new();
    tern_runtime::PacketPath::process_packet(&mut native, 1, &victim_packet(seq), &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    out.remove(0).data
}

fn victim_route(rt: &mut dyn Runtime) {
    rt.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 2, 2],
            prefix_len: 32,
        }],
        "MyIngress.ipv4_forward",
        &[vec![8, 0, 0, 0, 2, 0x22], vec![0, 2]],
        None,
    )
    .unwrap();
}

/// Victim on physical port 1 (out on 2), attacker on physical port 10 (virtual port 0).
fn two_tenants(attacker_json: &str, attacker_quotas: Quotas) -> VirtSwitch {
    let mut vs = VirtSwitch::new();
    vs.add_device(VICTIM, spec(&basic(), "alice", Quotas::default()))
        .unwrap();
    vs.add_device(ATTACKER, spec(attacker_json, "mallory", attacker_quotas))
        .unwrap();
    victim_route(&mut vs.runtime(Caller::Tenant("alice"), VICTIM).unwrap());
    let rule = |port, device, vport| Rule {
        priority: 0,
        port: Some(port),
        vlan: None,
        field: None,
        device,
        vport,
    };
    vs.add_rule(rule(1, VICTIM, None)).unwrap();
    vs.add_rule(rule(10, ATTACKER, Some(0))).unwrap();
    vs.map_port(VICTIM, 2, Target::Phys(2)).unwrap();
    for vp in 0..512 {
        vs.map_port(ATTACKER, vp, Target::Phys(100 + vp)).unwrap();
    }
    vs
}

fn attacker_frame() -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0, 0, 0, 0, 0, 9, 0x88, 0xb5]);
    f.extend_from_slice(&[0; 46]);
    f
}

/// The switch on the caller's thread or over worker threads.
enum Drive {
    Direct(VirtSwitch),
    Workers(VirtWorkers),
}

impl Drive {
    /// `workers` = 0: on the caller's thread.
    fn new(vs: VirtSwitch, workers: usize) -> Drive {
        if workers == 0 {
            return Drive::Direct(vs);
        }
        Drive::Workers(VirtWorkers::new(
            vs,
            WorkerOptions {
                workers,
                ..WorkerOptions::default()
            },
        ))
    }

    fn process_batch(&mut self, pkts: &[(u32, &[u8])], out: &mut Vec<OutputPacket>) {
        match self {
            Drive::Direct(vs) => vs.process_batch(pkts, out),
            Drive::Workers(w) => w.process_batch(pkts, out),
        }
    }

    fn recycle(&mut self, out: &mut Vec<OutputPacket>) {
        match self {
            Drive::Direct(vs) => vs.recycle_outputs(out),
            Drive::Workers(_) => out.clear(),
        }
    }

    fn stats(&self, id: u32) -> DeviceStats {
        match self {
            Drive::Direct(vs) => vs.device_stats(Caller::Operator, id).unwrap(),
            Drive::Workers(w) => w.device_stats(id).unwrap(),
        }
    }

    fn parser(&self, id: u32) -> tern_dataplane::exec::ParserBudget {
        match self {
            Drive::Direct(vs) => vs.parser_counts(Caller::Operator, id).unwrap(),
            Drive::Workers(w) => w
                .call(id, move |vs| vs.parser_counts(Caller::Operator, id))
                .unwrap()
                .unwrap(),
        }
    }

    fn quarantine(&self, id: u32) -> Option<String> {
        match self {
            Drive::Direct(vs) => vs.quarantine(Caller::Operator, id).unwrap(),
            Drive::Workers(w) => w
                .call(id, move |vs| vs.quarantine(Caller::Operator, id))
                .unwrap()
                .unwrap(),
        }
    }
}

/// Interleave `n` victim packets with attacker frames; every victim packet must come out
/// exactly as natively. Returns the attacker's frames out.
fn interleave(vs: &mut Drive, n: u16) -> usize {
    let mut attacker_out = 0;
    let mut out: Vec<OutputPacket> = Vec::new();
    let want = victim_expected(0);
    for seq in 0..n {
        let a = attacker_frame();
        vs.process_batch(&[(10, &a)], &mut out);
        attacker_out += out.len();
        assert!(out.iter().all(|o| (100..612).contains(&o.port)));
        vs.recycle(&mut out);
        let v = victim_packet(seq);
        vs.process_batch(&[(1, &v)], &mut out);
        assert_eq!(out.len(), 1, "victim packet {seq}");
        assert_eq!(out[0].port, 2);
        let mut w = want.clone();
        w[34..36].copy_from_slice(&seq.to_be_bytes());
        assert_eq!(out[0].data, w, "victim packet {seq}");
        vs.recycle(&mut out);
    }
    let s = vs.stats(VICTIM);
    assert_eq!(
        (s.packets_in, s.to_phys, s.dropped, s.panics),
        (u64::from(n), u64::from(n), 0, 0)
    );
    attacker_out
}

#[test]
fn register_memory_quota_is_checked_at_load() {
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "register<bit<32>>(1024) r;",
        "r.write(0, 1); sm.egress_spec = 1;",
    ));
    let model = tern_model::load(&json).unwrap();
    assert_eq!(register_bytes(&model), 4096);
    let quota = |bytes| Quotas {
        max_register_bytes: Some(bytes),
        ..Quotas::default()
    };
    let mut vs = VirtSwitch::new();
    let e = vs
        .add_device(ATTACKER, spec(&json, "mallory", quota(4095)))
        .unwrap_err();
    assert_eq!(
        e,
        VirtError::Program {
            device: ATTACKER,
            message: "the program's registers take 4096 bytes, over the quota of 4095".into()
        }
    );
    assert!(vs.device_ids().is_empty());
    vs.add_device(ATTACKER, spec(&json, "mallory", quota(4096)))
        .unwrap();
    // A replacement with more register memory than the quota is refused; the device keeps
    // its program.
    let big = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "register<bit<48>>(100000) r;",
        "r.write(0, 1); sm.egress_spec = 1;",
    ));
    let e = vs
        .replace_device(ATTACKER, spec(&big, "mallory", quota(4096)))
        .unwrap_err();
    assert!(e.to_string().contains("600000 bytes"), "{e}");
    let rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
    assert_eq!(rt.program().register_arrays[0].size, 1024);
    // 16M cells of 64 bits (128 MiB) are refused before anything is allocated.
    let huge = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "register<bit<64>>(16777216) r;",
        "r.write(0, 1); sm.egress_spec = 1;",
    ));
    let e = vs
        .add_device(3, spec(&huge, "mallory", quota(1 << 20)))
        .unwrap_err();
    assert!(e.to_string().contains("134217728 bytes"), "{e}");
}

/// The looping parser: Ethernet, then one state for ever.
fn spinning_parser() -> String {
    p4(&program(
        "state start { p.extract(h.eth); transition spin; } state spin { transition spin; }",
        "",
        "sm.egress_spec = 1;",
    ))
}

#[test]
fn a_parser_loop_is_contained() {
    // The parser never reaches accept: it goes round one state until the device's quota of
    // parser states (the tenants' default, 1,000) ends the packet with ParserTimeout, which
    // (as any parser error in simple_switch) does not drop it.
    let json = spinning_parser();
    for workers in [0, 1, 2] {
        let mut vs = Drive::new(two_tenants(&json, Quotas::default()), workers);
        let attacker_out = interleave(&mut vs, 40);
        let s = vs.stats(ATTACKER);
        assert_eq!((s.packets_in, s.panics), (40, 0), "{workers} workers");
        assert_eq!(vs.quarantine(ATTACKER), None);
        assert_eq!(attacker_out, 40);
        let p = vs.parser(ATTACKER);
        assert_eq!(
            (p.max_states, p.states, p.timeouts, p.units),
            (1_000, 40_000, 40, 40 * 15),
            "{workers} workers"
        );
        // The victim's parser is untouched by the attacker's quota: start, parse_ethernet,
        // parse_ipv4, 3 states a packet.
        let v = vs.parser(VICTIM);
        assert_eq!(
            (v.states, v.timeouts, v.units),
            (120, 0, 0),
            "{workers} workers"
        );
    }
}

/// A looping parser with the tenant quota of 1,000 states a packet beside a victim offering
/// one packet a round, through the fair scheduler on one thread (as one worker runs both),
/// each chunk charged the work counted by the device (`VirtSwitch::device_work`: passes plus
/// one unit per 64 parser states a packet entered). Between two victim packets the attacker
/// runs at most a quantum's worth of packets, each stopped at 1,000 states: at most
/// 16,000 states with a quantum of 256 units. Charged by its passes only, the same attacker
/// runs 128,000 states between two victim packets; with a plain switch's bound of 100,000
/// states a single packet of it would.
#[test]
fn a_parser_loop_under_its_state_quota_holds_the_victims_worker_for_a_bounded_number_of_states() {
    const Q: u64 = 256;
    const ROUNDS: u16 = 200;
    // 2 passes and 1,000 / 64 = 15 units of parsing per attacker packet.
    const PER_PACKET: u64 = 17;
    let json = spinning_parser();
    // The largest number of attacker states run between two victim chunks, the attacker's
    // chunks charged `work(device_work delta, passes delta)`.
    let run = |quotas: Quotas, work: fn(u64, u64) -> u64| -> u64 {
        let mut vs = two_tenants(&json, quotas);
        // Queues of 256: the attacker always has more than a quantum's worth waiting.
        let mut fair = FairScheduler::with_cost(Cost::Work, Q, 256);
        let frame = attacker_frame();
        let mut want = victim_expected(0);
        let mut out: Vec<OutputPacket> = Vec::new();
        // (device, parser states) of every chunk in the order they ran.
        let mut log: Vec<(u32, u64)> = Vec::new();
        let (mut since_victim, mut max_between) = (0u64, 0u64);
        for seq in 0..ROUNDS {
            while fair.enqueue(&vs, 10, &frame) {}
            assert!(fair.enqueue(&vs, 1, &victim_packet(seq)));
            log.clear();
            let mut st = (&mut vs, &mut out, &mut log);
            fair.run_round_with(
                &mut st,
                |(vs, out, log), id, pkts| {
                    let states = |vs: &VirtSwitch| vs.parser_counts(Caller::Operator, id).unwrap();
                    let (b, bw, bp) = (states(vs), vs.device_work(id), vs.device_passes(id));
                    vs.process_on(id, pkts, out);
                    let a = states(vs);
                    log.push((id, a.states - b.states));
                    work(vs.device_work(id) - bw, vs.device_passes(id) - bp)
                },
                |_, _, _| 0,
                |_, _| {},
            );
            let victim: Vec<&OutputPacket> = out.iter().filter(|o| o.port == 2).collect();
            assert_eq!(victim.len(), 1, "round {seq}: the victim's packet came out");
            want[34..36].copy_from_slice(&seq.to_be_bytes());
            assert_eq!(victim[0].data, want, "round {seq}");
            for &(id, n) in log.iter() {
                if id == VICTIM {
                    max_between = max_between.max(since_victim);
                    since_victim = 0;
                } else {
                    since_victim += n;
                }
            }
            vs.recycle_outputs(&mut out);
        }
        let a = fair.stats(ATTACKER);
        let p = vs.parser_counts(Caller::Operator, ATTACKER).unwrap();
        // Every attacker packet served ran exactly its quota of states and timed out.
        assert_eq!((p.timeouts, p.states), (a.served, a.served * p.max_states));
        max_between
    };
    let quota = Quotas::default();
    assert_eq!(quota.max_parser_states, 1_000);
    let counted = run(quota, |work, _| work);
    // Under a quantum and one packet of work: at most (Q + 16) / 17 = 16 packets.
    let bound = Q.div_ceil(PER_PACKET) * 1_000;
    assert!(
        counted <= bound,
        "{counted} states between two victim packets"
    );
    assert!(counted >= 1_000, "the attacker ran: {counted}");
    // Blind to the states (its passes only), the attacker gets Q / 2 packets a turn.
    let passes_only = run(quota, |_, passes| passes);
    assert_eq!(passes_only, Q / 2 * 1_000);
    // The plain bound: one packet is 100,000 states (and 1,564 units: a packet a round).
    let plain = Quotas {
        max_parser_states: tern_virt::MAX_PARSER_STATES,
        ..Quotas::default()
    };
    assert_eq!(run(plain, |work, _| work), 100_000);
    println!(
        "attacker states between two victim packets: {counted} (quota 1,000, charged), \
         {passes_only} (quota 1,000, passes only), 100,000 (plain bound)"
    );
}

/// The workers' front drops the frames of a physical port whose rules all lead to
/// quarantined devices before classifying them (counted as `quarantined_port`; the device's
/// own counters do not move), classifies them again once the device is released, and
/// counts the frames of a port whose device was removed as unclassified; the victim's
/// packets come through all along. The attacker's port has a VLAN rule besides its port rule
/// (a classifier that looks into the frame).
#[test]
fn the_front_drops_the_frames_of_a_port_whose_devices_are_all_quarantined() {
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "",
        "sm.egress_spec = 1;",
    ));
    for workers in [1, 2] {
        let mut vs = two_tenants(&json, Quotas::default());
        vs.add_rule(Rule {
            priority: 5,
            port: Some(10),
            vlan: Some(5),
            field: None,
            device: ATTACKER,
            vport: Some(0),
        })
        .unwrap();
        vs.inject_panic(ATTACKER, 1).unwrap();
        let mut w = VirtWorkers::new(
            vs,
            WorkerOptions {
                workers,
                ..WorkerOptions::default()
            },
        );
        let mut out: Vec<OutputPacket> = Vec::new();
        let a = attacker_frame();
        let mut seq = 0u16;
        let mut victim = |w: &mut VirtWorkers, out: &mut Vec<OutputPacket>| {
            let v = victim_packet(seq);
            w.process_batch(&[(1, &v)], out);
            let mut want = victim_expected(0);
            want[34..36].copy_from_slice(&seq.to_be_bytes());
            assert_eq!(out.len(), 1, "{workers} workers");
            assert_eq!((out[0].port, &out[0].data), (2, &want), "{workers} workers");
            out.clear();
            seq += 1;
        };
        // The first attacker frame panics the device: quarantined.
        w.process_batch(&[(10, &a)], &mut out);
        assert!(out.is_empty());
        let s = w.device_stats(ATTACKER).unwrap();
        assert_eq!((s.packets_in, s.panics), (1, 1), "{workers} workers");
        victim(&mut w, &mut out);
        // From now on the front drops the port's frames without classifying them.
        for _ in 0..5 {
            w.process_batch(&[(10, &a), (10, &a)], &mut out);
            assert!(out.is_empty());
            victim(&mut w, &mut out);
        }
        assert_eq!(w.stats().quarantined_port, 10, "{workers} workers");
        let s = w.device_stats(ATTACKER).unwrap();
        assert_eq!(
            (s.packets_in, s.quarantine_drops),
            (1, 0),
            "{workers} workers: the worker never saw them"
        );
        // Released: classified and forwarded again.
        w.call(ATTACKER, |vs| vs.release(ATTACKER))
            .unwrap()
            .unwrap();
        w.process_batch(&[(10, &a)], &mut out);
        assert_eq!(out.len(), 1, "{workers} workers");
        assert_eq!(out[0].port, 101);
        out.clear();
        assert_eq!(w.stats().quarantined_port, 10);
        assert_eq!(w.device_stats(ATTACKER).unwrap().packets_in, 2);
        // Removed: its port has no rule left, its frames are unclassified at the front.
        let before = w.stats().unclassified;
        w.remove_device(ATTACKER).unwrap();
        w.process_batch(&[(10, &a)], &mut out);
        assert!(out.is_empty());
        assert_eq!(w.stats().unclassified, before + 1, "{workers} workers");
        victim(&mut w, &mut out);
    }
}

#[test]
fn a_multicast_storm_is_bounded_by_the_pass_quota() {
    // Every packet is multicast to group 1, which replicates to 512 ports.
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "",
        "sm.mcast_grp = 1;",
    ));
    let storm = |quotas: Quotas| {
        let mut vs = two_tenants(&json, quotas);
        let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
        let g = rt.mc_mgrp_create(1).unwrap();
        let ports: Vec<u32> = (0..512).collect();
        let node = rt.mc_node_create(0, &ports, &[]).unwrap();
        rt.mc_node_associate(g, node).unwrap();
        vs
    };
    for workers in [0, 1, 2] {
        let quotas = Quotas {
            max_passes: 9,
            ..Quotas::default()
        };
        let mut vs = Drive::new(storm(quotas), workers);
        let attacker_out = interleave(&mut vs, 50);
        // The input pass plus at most 8 replicas per packet.
        assert!(attacker_out > 0 && attacker_out <= 50 * 8, "{attacker_out}");
        let s = vs.stats(ATTACKER);
        assert_eq!((s.packets_in, s.to_phys), (50, attacker_out as u64));
        // The same group without the quota would have sent 512 per packet.
        let mut free = Drive::new(storm(Quotas::default()), workers);
        assert_eq!(interleave(&mut free, 2), 1024, "{workers} workers");
    }
}

/// A multicast storm to 512 ports (64 passes a packet under the pass quota) beside an
/// open-loop victim offering one packet a round, through the fair scheduler for 400 rounds,
/// with each device charged the passes its packets ran, counted from its own counters (one
/// ingress pass per packet in, one egress pass per frame out): every victim packet comes out
/// byte-exact in the round it was offered, the attacker's work per round is its quantum plus
/// less than one packet, and between two victim packets the attacker ran at most that.
#[test]
fn a_storm_charged_by_its_passes_gets_its_share_and_the_victim_waits_one_quantum() {
    const Q: u64 = 256;
    const PASSES: u64 = 64;
    const ROUNDS: u16 = 400;
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "",
        "sm.mcast_grp = 1;",
    ));
    let quotas = Quotas {
        max_passes: PASSES as usize,
        ..Quotas::default()
    };
    let mut vs = two_tenants(&json, quotas);
    let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
    let g = rt.mc_mgrp_create(1).unwrap();
    let ports: Vec<u32> = (0..512).collect();
    let node = rt.mc_node_create(0, &ports, &[]).unwrap();
    rt.mc_node_associate(g, node).unwrap();
    let mut fair = FairScheduler::with_cost(Cost::Nanos, Q, 64);
    let frame = attacker_frame();
    // The sequence number (bytes 34..36, past the IPv4 header) is all that differs.
    let mut want = victim_expected(0);
    let mut out: Vec<OutputPacket> = Vec::new();
    // (device, work) of every chunk in the order they ran.
    let mut log: Vec<(u32, u64)> = Vec::new();
    let (mut since_victim, mut max_between) = (0u64, 0u64);
    for seq in 0..ROUNDS {
        while fair.enqueue(&vs, 10, &frame) {}
        assert!(fair.enqueue(&vs, 1, &victim_packet(seq)));
        log.clear();
        let mut st = (&mut vs, &mut out, &mut log);
        fair.run_round_with(
            &mut st,
            |(vs, out, log), id, pkts| {
                let b = vs.device_stats(Caller::Operator, id).unwrap();
                vs.process_on(id, pkts, out);
                let a = vs.device_stats(Caller::Operator, id).unwrap();
                let work = (a.packets_in - b.packets_in) + (a.to_phys - b.to_phys);
                log.push((id, work));
                work
            },
            |_, _, _| 0,
            |_, _| {},
        );
        let victim: Vec<&OutputPacket> = out.iter().filter(|o| o.port == 2).collect();
        assert_eq!(
            victim.len(),
            1,
            "round {seq}: the victim's packet came out in its round"
        );
        want[34..36].copy_from_slice(&seq.to_be_bytes());
        assert_eq!(victim[0].data, want, "round {seq}");
        let attacker_work: u64 = log.iter().filter(|c| c.0 == ATTACKER).map(|c| c.1).sum();
        assert!(
            attacker_work < Q + PASSES,
            "round {seq}: attacker ran {attacker_work}"
        );
        for &(id, w) in log.iter() {
            if id == VICTIM {
                max_between = max_between.max(since_victim);
                since_victim = 0;
            } else {
                since_victim += w;
            }
        }
        vs.recycle_outputs(&mut out);
    }
    let a = fair.stats(ATTACKER);
    let v = fair.stats(VICTIM);
    assert_eq!((v.served, v.overflow), (u64::from(ROUNDS), 0));
    // 2 passes per victim packet; the attacker's 64 each, its quantum a round and no more.
    assert_eq!(v.work, 2 * u64::from(ROUNDS));
    assert!(a.work <= u64::from(ROUNDS) * Q + PASSES, "{a:?}");
    assert!(
        a.work >= u64::from(ROUNDS) * (Q - PASSES),
        "the attacker got its share: {a:?}"
    );
    assert_eq!(a.work, a.served * PASSES);
    assert!(max_between < Q + PASSES, "{max_between}");
    let s = vs.device_stats(Caller::Operator, ATTACKER).unwrap();
    assert_eq!(s.to_phys, a.served * (PASSES - 1));
}

#[test]
fn a_control_plane_flood_leaves_the_victims_packets_intact() {
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "action fwd(bit<9> port) { sm.egress_spec = port; }
         table t { key = { h.eth.dst: exact; } actions = { fwd; NoAction; } size = 100000; }",
        "t.apply();",
    ));
    let vs = Arc::new(Mutex::new(two_tenants(
        &json,
        Quotas {
            max_entries: Some(500),
            ..Quotas::default()
        },
    )));
    // Mallory's credentials reach her device only: Alice's answers like a missing one.
    let e = SharedDevice::new(vs.clone(), Caller::Tenant("mallory"), VICTIM).unwrap_err();
    assert_eq!(e, VirtError::NoSuchDevice(VICTIM));
    let mut mallory = SharedDevice::new(vs.clone(), Caller::Tenant("mallory"), ATTACKER).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let flood = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut calls, mut full) = (0u64, 0u64);
            let mut handles = Vec::new();
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                k += 1;
                let key = MatchParam::Exact(k.to_be_bytes()[2..].to_vec());
                match mallory.mt_add_entry("I.t", &[key], "I.fwd", &[vec![0, 1]], None) {
                    Ok(h) => handles.push(h),
                    Err(RuntimeError::Table(TableError::TABLE_FULL)) => {
                        full += 1;
                        // Make room and go on hammering.
                        for h in handles.drain(..10) {
                            mallory.mt_delete_entry("I.t", h).unwrap();
                            calls += 1;
                        }
                    }
                    Err(e) => panic!("unexpected {e}"),
                }
                calls += 1;
                let _ = mallory.mt_get_num_entries("I.t");
                calls += 1;
            }
            (calls, full, mallory.mt_get_num_entries("I.t").unwrap())
        })
    };
    let want = victim_expected(0);
    let mut out: Vec<OutputPacket> = Vec::new();
    let n: u16 = 2000;
    for seq in 0..n {
        let v = victim_packet(seq);
        let mut g = vs.lock().unwrap();
        g.process_batch(&[(1, &v)], &mut out);
        assert_eq!(out.len(), 1, "victim packet {seq}");
        let mut w = want.clone();
        w[34..36].copy_from_slice(&seq.to_be_bytes());
        assert_eq!((out[0].port, &out[0].data), (2, &w), "victim packet {seq}");
        g.recycle_outputs(&mut out);
        drop(g);
        if seq % 100 == 0 {
            std::thread::yield_now();
        }
    }
    stop.store(true, Ordering::Relaxed);
    let (calls, full, entries) = flood.join().unwrap();
    assert!(calls > 0);
    assert!(entries <= 500, "{entries}");
    let g = vs.lock().unwrap();
    let s = g.device_stats(Caller::Operator, VICTIM).unwrap();
    assert_eq!((s.packets_in, s.to_phys), (u64::from(n), u64::from(n)));
    // The victim's table holds exactly its one route.
    drop(g);
    let alice = SharedDevice::new(vs.clone(), Caller::Tenant("alice"), VICTIM).unwrap();
    assert_eq!(alice.mt_get_num_entries("MyIngress.ipv4_lpm").unwrap(), 1);
    println!("control-plane flood: {calls} calls, {full} refused with TABLE_FULL, victim {n}/{n}");
}

/// `Cost::Work` counts what each packet did, from the data plane's pass counter: beside a
/// resubmit loop, a multicast storm and a clone storm (each cut at the pass quota of 64), the victim's
/// packets count exactly 2 passes each (ingress, egress) and the attacker's exactly 64, on
/// a real switch through the fair scheduler. The count (not the clock) is what the victim
/// is charged for; every victim packet still comes out byte-exact.
#[test]
fn counted_work_is_the_passes_each_device_ran() {
    const PASSES: u64 = 64;
    const N: u16 = 100;
    let quotas = Quotas {
        max_passes: PASSES as usize,
        ..Quotas::default()
    };
    let attacks = [
        ("resubmit", "resubmit_preserving_field_list(0);"),
        ("multicast", "sm.mcast_grp = 1;"),
        (
            "clone",
            "clone(CloneType.I2E, 1); resubmit_preserving_field_list(0);",
        ),
    ];
    for (name, body) in attacks {
        let json = p4(&program(
            "state start { p.extract(h.eth); transition accept; }",
            "",
            body,
        ));
        let mut vs = two_tenants(&json, quotas);
        if name == "multicast" {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
            let g = rt.mc_mgrp_create(1).unwrap();
            let ports: Vec<u32> = (0..512).collect();
            let node = rt.mc_node_create(0, &ports, &[]).unwrap();
            rt.mc_node_associate(g, node).unwrap();
        }
        if name == "clone" {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
            rt.mirroring_session_add(
                1,
                tern_runtime::MirroringSession {
                    port: Some(1),
                    mgid: None,
                },
            )
            .unwrap();
        }
        let mut fair = FairScheduler::with_cost(Cost::Work, 20_000, 4096);
        assert_eq!(fair.cost(), Cost::Work);
        let frame = attacker_frame();
        for seq in 0..N {
            assert!(fair.enqueue(&vs, 10, &frame));
            assert!(fair.enqueue(&vs, 1, &victim_packet(seq)));
        }
        let mut out: Vec<OutputPacket> = Vec::new();
        while fair.backlog() > 0 {
            fair.run_round(&mut vs, &mut out);
        }
        let victim: Vec<&OutputPacket> = out.iter().filter(|o| o.port == 2).collect();
        assert_eq!(victim.len(), usize::from(N), "{name}");
        for (seq, o) in victim.iter().enumerate() {
            assert_eq!(o.data, victim_expected(seq as u16), "{name}: packet {seq}");
        }
        let (v, a) = (fair.stats(VICTIM), fair.stats(ATTACKER));
        assert_eq!(v.units, 2 * u64::from(N), "{name}: {v:?}");
        assert_eq!(a.units, PASSES * u64::from(N), "{name}: {a:?}");
        assert_eq!(vs.device_passes(VICTIM), v.units);
        assert_eq!(vs.device_passes(ATTACKER), a.units);
        // Priced at the device's own calibration, never more than it was measured.
        assert!(fair.price(VICTIM).unwrap().calibration().unwrap() > 0.0);
        assert!(v.work > 0 && a.work > 0);
    }
}

/// A panic is charged what it took (`Cost::Work` on a real switch): every chunk of packets
/// and every control job in which the attacker panicked is counted in `faulted`
/// (`fair::Spent::Faulted`: charged its measured time, not its counted passes at the price
/// of its cheap quarantined chunks), the chunks and jobs that did not are not, and the
/// victim's packets beside them all come out byte-exact.
#[test]
fn every_chunk_and_job_that_panicked_is_charged_as_faulted() {
    const N: u16 = 50;
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "",
        "sm.egress_spec = 1;",
    ));
    let mut vs = two_tenants(&json, Quotas::default());
    let mut fair = FairScheduler::with_cost(Cost::Work, 20_000, 4096);
    let frame = attacker_frame();
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut victim = 0;
    for seq in 0..N {
        // Released and armed: its next packet panics; every fifth round released and the
        // job itself panics (its packets then meet the quarantine).
        if seq % 5 == 4 {
            fair.enqueue_job(
                ATTACKER,
                Box::new(|vs| {
                    vs.release(ATTACKER).unwrap();
                    panic!("a tenant's job trips");
                }),
            );
        } else {
            fair.enqueue_job(
                ATTACKER,
                Box::new(|vs| {
                    vs.release(ATTACKER).unwrap();
                    vs.inject_panic(ATTACKER, 1).unwrap();
                }),
            );
        }
        for _ in 0..8 {
            assert!(fair.enqueue(&vs, 10, &frame));
        }
        assert!(fair.enqueue(&vs, 1, &victim_packet(seq)));
        while fair.backlog() > 0 {
            fair.run_round(&mut vs, &mut out);
        }
        for o in out.drain(..) {
            assert_eq!(
                o.port, 2,
                "round {seq}: the quarantined attacker sent nothing"
            );
            assert_eq!(o.data, victim_expected(seq), "round {seq}");
            victim += 1;
        }
    }
    assert_eq!(victim, usize::from(N));
    let a = fair.stats(ATTACKER);
    let panics = vs.device_panics(ATTACKER);
    assert_eq!(panics, u64::from(N), "{a:?}");
    assert_eq!(a.job_panics, u64::from(N / 5), "{a:?}");
    assert_eq!(a.faulted, panics, "{a:?}");
    assert_eq!(fair.stats(VICTIM).faulted, 0);
    // The quarantined chunks after each panic were served and not counted as faulted.
    assert_eq!(a.served, 8 * u64::from(N), "{a:?}");
}

/// Control jobs are charged by the entries they touch (`Cost::Work` on a real switch): a
/// tenant's job of 10 adds counts 10 units, a batch of 32 add + delete pairs posted as 32
/// steps counts 2 a step (64 in all, one step a turn), an add the entry quota refuses counts
/// 1, a table clear the entries it removed (and at least 1), a job that writes nothing 1;
/// the victim's packets beside them all come out byte-exact.
#[test]
fn control_jobs_are_counted_by_the_entries_they_touch() {
    let json = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "action fwd(bit<9> port) { sm.egress_spec = port; }
         table t { key = { h.eth.dst: exact; } actions = { fwd; NoAction; } size = 100000; }",
        "t.apply();",
    ));
    let mut vs = two_tenants(
        &json,
        Quotas {
            max_entries: Some(12),
            ..Quotas::default()
        },
    );
    let key = |k: u64| vec![MatchParam::Exact(k.to_be_bytes()[2..].to_vec())];
    let mut fair = FairScheduler::with_cost(Cost::Work, 20_000, 1024);
    let mut out: Vec<OutputPacket> = Vec::new();
    let run = |fair: &mut FairScheduler, vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>| {
        while fair.backlog() > 0 {
            fair.run_round(vs, out);
        }
    };
    // 10 adds in one job: 10 units.
    fair.enqueue_job(
        ATTACKER,
        Box::new(move |vs| {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
            for k in 0..10 {
                rt.mt_add_entry("I.t", &key(k), "I.fwd", &[vec![0, 1]], None)
                    .unwrap();
            }
        }),
    );
    run(&mut fair, &mut vs, &mut out);
    let s = fair.stats(ATTACKER);
    assert_eq!((s.jobs, s.control_units), (1, 10));
    // 32 steps of an add and a delete: 2 units each.
    fair.enqueue_steps(ATTACKER, 32, move |vs, i| {
        let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
        let h = rt
            .mt_add_entry("I.t", &key(100 + i as u64), "I.fwd", &[vec![0, 1]], None)
            .unwrap();
        rt.mt_delete_entry("I.t", h).unwrap();
    });
    for seq in 0..8u16 {
        assert!(fair.enqueue(&vs, 1, &victim_packet(seq)));
    }
    run(&mut fair, &mut vs, &mut out);
    let s = fair.stats(ATTACKER);
    assert_eq!((s.jobs, s.control_units), (33, 10 + 64));
    let victim: Vec<&OutputPacket> = out.iter().filter(|o| o.port == 2).collect();
    assert_eq!(victim.len(), 8);
    for (seq, o) in victim.iter().enumerate() {
        let mut w = victim_expected(0);
        w[34..36].copy_from_slice(&(seq as u16).to_be_bytes());
        assert_eq!(o.data, w, "victim packet {seq}");
    }
    // Quota of 12 with 10 in: two adds pass, the third is refused (1 unit all the same).
    fair.enqueue_job(
        ATTACKER,
        Box::new(move |vs| {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
            for k in 200..203 {
                let r = rt.mt_add_entry("I.t", &key(k), "I.fwd", &[vec![0, 1]], None);
                assert_eq!(r.is_err(), k == 202, "{r:?}");
            }
        }),
    );
    run(&mut fair, &mut vs, &mut out);
    assert_eq!(fair.stats(ATTACKER).control_units, 74 + 3);
    // A clear of the 12 entries: 12; a job that writes nothing: 1.
    fair.enqueue_job(
        ATTACKER,
        Box::new(|vs| {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER).unwrap();
            rt.mt_clear_entries("I.t", false).unwrap();
        }),
    );
    fair.enqueue_job(ATTACKER, Box::new(|_| {}));
    run(&mut fair, &mut vs, &mut out);
    let s = fair.stats(ATTACKER);
    assert_eq!((s.jobs, s.control_units), (36, 77 + 12 + 1));
    assert_eq!(
        vs.device_stats(Caller::Operator, ATTACKER)
            .unwrap()
            .control_work,
        10 + 64 + 3 + 12
    );
}

/// A device's price starts again when its program is replaced by any path — here a job of
/// the device replacing it, as a tenant's P4Runtime pipeline does through its lease (the
/// operator's `VirtWorkers::replace_device` always did): calibrated on a cheap program, a
/// dear one would otherwise be charged the cheap program's ns per pass for its passes, below
/// the guard's 64×, for good — more than its share of the worker. Counted: `recalibrated`
/// is 1 after the replacement (0 before it), and the attacker's packets run on (after the
/// debt of the replacement's own time).
#[test]
fn a_program_replaced_by_a_job_is_calibrated_afresh() {
    let cheap = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "",
        "mark_to_drop(sm);",
    ));
    let dear = p4(&program(
        "state start { p.extract(h.eth); transition accept; }",
        "action a() { h.eth.src = h.eth.src + 1; }
         table t1 { key = { h.eth.dst: exact; } actions = { a; } default_action = a(); }
         table t2 { key = { h.eth.src: exact; } actions = { a; } default_action = a(); }
         table t3 { key = { h.eth.dst: exact; } actions = { a; } default_action = a(); }",
        "t1.apply(); t2.apply(); t3.apply(); mark_to_drop(sm);",
    ));
    let mut vs = two_tenants(&cheap, Quotas::default());
    let mut fair = FairScheduler::with_cost(Cost::Work, 20_000, 64);
    let mut out: Vec<OutputPacket> = Vec::new();
    let frame = attacker_frame();
    for _ in 0..20 {
        while fair.enqueue(&vs, 10, &frame) {}
        fair.run_round(&mut vs, &mut out);
    }
    assert!(fair.price(ATTACKER).unwrap().calibration().is_some());
    assert_eq!(fair.stats(ATTACKER).recalibrated, 0);
    assert_eq!(vs.program_epoch(ATTACKER), 0);
    fair.enqueue_job(
        ATTACKER,
        Box::new(move |vs| {
            vs.replace_device(ATTACKER, spec(&dear, "mallory", Quotas::default()))
                .unwrap();
        }),
    );
    let served = fair.stats(ATTACKER).served;
    // The replacement's own time is the device's work (a debt it sits out first).
    for _ in 0..100_000 {
        while fair.enqueue(&vs, 10, &frame) {}
        fair.run_round(&mut vs, &mut out);
        if fair.stats(ATTACKER).served > served + 100 {
            break;
        }
        out.clear();
    }
    assert_eq!(vs.program_epoch(ATTACKER), 1);
    let s = fair.stats(ATTACKER);
    assert_eq!(s.recalibrated, 1, "{s:?}");
    assert!(s.served > served + 100, "{s:?}");
}
