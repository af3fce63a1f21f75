//! Chains in batches (issue 17): links carry batches, hop by hop. A batch through a chain must
//! give what the same packets give one per call, **per flow** — every frame out exactly once,
//! with unchanged bytes, in the same order per (physical input port → output) — where an
//! output is a physical port or a device's CPU queue. The global interleaving of outputs of
//! different flows is not part of the contract (see the crate README, "Order"). Checked on
//! HyPer4's Example 1 phases B and C, a three-hop chain with multicast, CPU and drop outputs
//! in the middle (also over worker threads), a loop cut by the hop budget inside a batch, and a
//! panic in the second hop in the middle of a batch.

use std::collections::{BTreeMap, HashMap};

use tern_runtime::{OutputPacket, Port, Runtime};
use tern_virt::{Caller, DeviceId, Quotas, Target, VirtSwitch, VirtWorkers, WorkerOptions};

mod common;
use common::{compile, ex1, link, mac, rule, spec, Rng};

/// Ethernet + IPv4 (valid checksum) + TCP `sport` → `dport` + a payload carrying `seq`, so
/// that every frame is unique.
fn tcp(
    dst: [u8; 6],
    src: [u8; 6],
    sip: [u8; 4],
    dip: [u8; 4],
    ports: (u16, u16),
    seq: u32,
) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&src);
    f.extend_from_slice(&[8, 0]);
    let mut ip = vec![0x45, 0, 0, 48, 0, 1, 0x40, 0, 64, 6, 0, 0];
    ip.extend_from_slice(&sip);
    ip.extend_from_slice(&dip);
    let c = common::ipv4_checksum(&ip);
    ip[10] = (c >> 8) as u8;
    ip[11] = c as u8;
    f.extend_from_slice(&ip);
    f.extend_from_slice(&ports.0.to_be_bytes());
    f.extend_from_slice(&ports.1.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0x5a; 4]);
    f
}

/// An ARP request from (`sha`, `spa`) for `tpa`, padded with `seq` (unique frames).
fn arp(sha: [u8; 6], spa: [u8; 4], tpa: [u8; 4], seq: u32) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&sha);
    f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&sha);
    f.extend_from_slice(&spa);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(&[0; 14]);
    f
}

/// An output: a physical port, or the CPU queue of a device (`CPU + device`).
const CPU: u64 = 1 << 32;

/// The source MACs the L2 devices here know.
const KNOWN: [u16; 6] = [1, 2, 3, 4, 5, 0x0a0a];

/// The L2 switch's tables: the sources of [`KNOWN`] known, `dmac` (destination, virtual port)
/// forwarded, the rest flooded over `flood` (virtual ports).
fn l2_setup(rt: &mut dyn Runtime, dmac: &[(u16, Port)], flood: &[Port]) {
    common::l2_setup(rt, &KNOWN, dmac, flood);
}

/// Per flow (input port, output) the frames in order.
type Flows = BTreeMap<(Port, u64), Vec<Vec<u8>>>;

/// Drain every device's CPU queue as outputs.
fn cpu_outputs(vs: &mut VirtSwitch, devices: &[DeviceId]) -> Vec<(u64, Vec<u8>)> {
    let mut v = Vec::new();
    for &d in devices {
        for (_, f) in vs.take_cpu_packets(Caller::Operator, d).unwrap() {
            v.push((CPU + u64::from(d), f));
        }
    }
    v
}

fn phys(out: &[OutputPacket]) -> Vec<(u64, Vec<u8>)> {
    out.iter()
        .map(|o| (u64::from(o.port), o.data.clone()))
        .collect()
}

/// Run `pkts` one per call: the flows, and which input port each (output, frame) came from
/// (every frame unique per output, asserted).
fn one_by_one(
    vs: &mut VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
) -> (Flows, HashMap<(u64, Vec<u8>), Port>) {
    let mut flows = Flows::new();
    let mut origin = HashMap::new();
    let mut out = Vec::new();
    for (port, data) in pkts {
        vs.process_batch(&[(*port, data)], &mut out);
        let mut got = phys(&out);
        vs.recycle_outputs(&mut out);
        got.extend(cpu_outputs(vs, devices));
        for (o, f) in got {
            if let Some(prev) = origin.insert((o, f.clone()), *port) {
                assert_eq!(
                    prev, *port,
                    "one frame from two input ports: ambiguous test data"
                );
            }
            flows.entry((*port, o)).or_default().push(f);
        }
    }
    (flows, origin)
}

/// Split outputs into flows by their input port.
fn to_flows(got: Vec<(u64, Vec<u8>)>, origin: &HashMap<(u64, Vec<u8>), Port>) -> Flows {
    let mut flows = Flows::new();
    for (o, f) in got {
        let Some(&port) = origin.get(&(o, f.clone())) else {
            panic!("a frame on {o} that one per call never sent: {f:02x?}");
        };
        flows.entry((port, o)).or_default().push(f);
    }
    flows
}

/// Run `pkts` in batches of the sizes `sizes` cycles through: the outputs (physical ports in
/// the order given, then each batch's CPU frames).
fn batched(
    vs: &mut VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
    sizes: &[usize],
) -> Vec<(u64, Vec<u8>)> {
    let mut got = Vec::new();
    let mut out = Vec::new();
    let mut i = 0;
    for &n in sizes.iter().cycle() {
        if i >= pkts.len() {
            break;
        }
        let chunk = &pkts[i..(i + n).min(pkts.len())];
        i += chunk.len();
        let batch: Vec<(Port, &[u8])> = chunk.iter().map(|(p, d)| (*p, d.as_slice())).collect();
        vs.process_batch(&batch, &mut out);
        got.extend(phys(&out));
        vs.recycle_outputs(&mut out);
        got.extend(cpu_outputs(vs, devices));
    }
    got
}

fn stats(vs: &VirtSwitch, devices: &[DeviceId]) -> Vec<tern_virt::DeviceStats> {
    devices
        .iter()
        .map(|&d| vs.device_stats(Caller::Operator, d).unwrap())
        .collect()
}

/// Two identical switches from `build`: one runs `pkts` one per call, the other in batches;
/// the flows, every device's counters and the switch's counters must be equal. Returns the
/// flows.
fn check_batches_equal_one_by_one(
    build: impl Fn() -> VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
) -> Flows {
    let mut one = build();
    let (want, origin) = one_by_one(&mut one, devices, pkts);
    for sizes in [&[32][..], &[7, 32, 1, 64, 3, 100]] {
        let mut many = build();
        let got = batched(&mut many, devices, pkts, sizes);
        let total: usize = want.values().map(Vec::len).sum();
        assert_eq!(got.len(), total, "every frame out exactly once ({sizes:?})");
        let got = to_flows(got, &origin);
        for (k, v) in &want {
            assert_eq!(got.get(k), Some(v), "flow {k:?} in batches of {sizes:?}");
        }
        assert_eq!(got.len(), want.len());
        assert_eq!(stats(&many, devices), stats(&one, devices), "{sizes:?}");
        assert_eq!(many.stats(), one.stats());
    }
    want
}

/// Example 1's hosts: h1, h2 behind physical ports 1, 2; h3, h4 behind 3, 4.
fn ex1_traffic(n: usize, routed: bool) -> Vec<(Port, Vec<u8>)> {
    let mut r = Rng(0x1234_5678);
    let rmac = mac(0x0a0a);
    (0..n as u32)
        .map(|seq| {
            let x = r.next();
            let from = 1 + x % 4; // host = port
            let to = [1, 2, 3, 4][((x >> 4) % 4) as usize];
            let ip = |h: u32| {
                if routed && h >= 3 {
                    [10, 0, 1, h as u8]
                } else {
                    [10, 0, 0, h as u8]
                }
            };
            let dst = if routed && (from <= 2) != (to <= 2) {
                rmac // across the router
            } else {
                mac(to as u16)
            };
            let sport = if (x >> 8).is_multiple_of(7) {
                4000
            } else {
                1234
            }; // 4000: blocked
            let f = match (x >> 12) % 6 {
                0 => arp(
                    mac(from as u16),
                    ip(from),
                    if from <= 2 {
                        [10, 0, 0, 5]
                    } else {
                        [10, 0, 1, 1]
                    },
                    seq,
                ),
                1 => {
                    // Unknown destination: flooded. Routed (phase C), the copy that reaches
                    // the router goes to the other side, never back to its own.
                    let to = match (routed, from <= 2) {
                        (true, true) => 3,
                        (true, false) => 1,
                        _ => to,
                    };
                    tcp(
                        mac(0x77),
                        mac(from as u16),
                        ip(from),
                        ip(to),
                        (1234, 5001),
                        seq,
                    )
                }
                _ => tcp(dst, mac(from as u16), ip(from), ip(to), (sport, 5001), seq),
            };
            (from, f)
        })
        .collect()
}

#[test]
fn example_1_b_in_batches_equals_one_by_one_per_flow() {
    let devices = [12, 22, 32];
    let want = check_batches_equal_one_by_one(|| ex1("B"), &devices, &ex1_traffic(600, false));
    // The traffic crosses the chain both ways and floods at the edges.
    assert!(
        want.get(&(1, 3)).is_some_and(|v| v.len() > 20),
        "{:?}",
        want.keys()
    );
    assert!(want.get(&(3, 1)).is_some_and(|v| v.len() > 20));
    assert!(want.get(&(1, 2)).is_some_and(|v| v.len() > 20));
}

#[test]
fn example_1_c_in_batches_equals_one_by_one_per_flow() {
    let devices = [12, 23, 24, 25, 32];
    let want = check_batches_equal_one_by_one(|| ex1("C"), &devices, &ex1_traffic(600, true));
    // Routed both ways, and ARP answered by the proxy two hops in (back out of port 1).
    assert!(
        want.get(&(1, 3)).is_some_and(|v| v.len() > 20),
        "{:?}",
        want.keys()
    );
    assert!(want.get(&(4, 2)).is_some_and(|v| v.len() > 10));
    assert!(want
        .get(&(1, 1))
        .is_some_and(|v| v.iter().any(|f| f[12..14] == [8, 6])));
}

/// Three L2 switches in a row, with fan-out in the middle (`common::three_l2_hops`), and
/// device 3 also straight from physical 5 on its port 9, so that a wrong ingress port shows in
/// the counters.
fn three_hops() -> VirtSwitch {
    let mut vs = common::three_l2_hops(&KNOWN);
    vs.add_rule(rule(5, 3, 9)).unwrap();
    vs
}

/// TCP from host 1 (10.0.0.1) to 10.0.0.3 port 80, to the MAC of `dst`, carrying `seq`.
fn from_h1(dst: u16, seq: u32) -> Vec<u8> {
    tcp(
        mac(dst),
        mac(1),
        [10, 0, 0, 1],
        [10, 0, 0, 3],
        (1234, 80),
        seq,
    )
}

fn three_hop_traffic(n: usize) -> Vec<(Port, Vec<u8>)> {
    let mut r = Rng(0x9e37_79b9);
    (0..n as u32)
        .map(|seq| {
            let x = r.next();
            let port = if x.is_multiple_of(5) { 5 } else { 1 };
            let dst = [2u16, 3, 3, 4, 0x77][((x >> 3) % 5) as usize];
            (port, from_h1(dst, seq))
        })
        .collect()
}

#[test]
fn three_hops_with_multicast_and_cpu_in_the_middle_in_batches_equal_one_by_one() {
    let want = check_batches_equal_one_by_one(three_hops, &[1, 2, 3], &three_hop_traffic(500));
    // Every kind of output took part: physical ports after one, two and three devices, both
    // CPU queues, and device 3's outputs from two input ports.
    for k in [
        (1, 2),
        (1, 3),
        (1, 4),
        (1, CPU + 2),
        (1, CPU + 3),
        (5, 4),
        (5, CPU + 3),
    ] {
        assert!(
            want.get(&k).is_some_and(|v| v.len() > 10),
            "{k:?}: {:?}",
            want.keys()
        );
    }
}

/// The same chain over worker threads (the fair scheduler runs each device's share as a
/// batch, its frames over links hop by hop): each flow's frames as one per call.
#[test]
fn three_hops_over_workers_equal_one_by_one_per_flow() {
    let pkts = three_hop_traffic(400);
    let mut one = three_hops();
    let (want, origin) = one_by_one(&mut one, &[2, 3], &pkts);
    for workers in [1, 2] {
        let mut pool = VirtWorkers::new(
            three_hops(),
            WorkerOptions {
                workers,
                rebalance_every: 0,
                ..WorkerOptions::default()
            },
        );
        let mut got = Vec::new();
        let mut out = Vec::new();
        for chunk in pkts.chunks(37) {
            let batch: Vec<(Port, &[u8])> = chunk.iter().map(|(p, d)| (*p, d.as_slice())).collect();
            pool.process_batch(&batch, &mut out);
            got.extend(phys(&out));
            pool.recycle_outputs(&mut out);
        }
        let mut vs = pool.shutdown(&mut out);
        got.extend(phys(&out));
        for d in 2..=3 {
            got.extend(cpu_outputs(&mut vs, &[d]));
        }
        // The CPU queues were drained once at the end: per flow, in order, as well.
        let got = to_flows(got, &origin);
        for (k, v) in &want {
            assert_eq!(got.get(k), Some(v), "flow {k:?} over {workers} workers");
        }
        assert_eq!(got.len(), want.len());
        assert_eq!(stats(&vs, &[1, 2, 3]), stats(&one, &[1, 2, 3]));
    }
}

/// Two L2 switches linked both ways (device 1's port 3 to device 2's port 1, device 2's port
/// 2 to device 1's port 4); dst 3 loops between them until the hop budget cuts it, dst 2
/// leaves on physical 2 from device 1 and dst 4 on physical 4 from device 2, in the same
/// batches.
fn looping() -> VirtSwitch {
    let l2 = compile("p4/virt/l2_switch.p4");
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&l2)).unwrap();
    vs.add_device(2, spec(&l2)).unwrap();
    vs.set_max_hops(5);
    vs.add_rule(rule(1, 1, 1)).unwrap();
    for (d, p, t) in [
        (1, 2, Target::Phys(2)),
        (1, 3, link(2, 1)),
        (2, 2, link(1, 4)),
        (2, 4, Target::Phys(4)),
    ] {
        vs.map_port(d, p, t).unwrap();
    }
    l2_setup(
        &mut vs.runtime(Caller::Operator, 1).unwrap(),
        &[(2, 2), (3, 3), (4, 3)],
        &[2],
    );
    l2_setup(
        &mut vs.runtime(Caller::Operator, 2).unwrap(),
        &[(3, 2), (4, 4)],
        &[4],
    );
    vs
}

#[test]
fn the_hop_budget_cuts_a_loop_inside_a_batch_and_the_rest_goes_on() {
    let mut r = Rng(77);
    let pkts: Vec<(Port, Vec<u8>)> = (0..300u32)
        .map(|seq| {
            let dst = [2u16, 3, 4][(r.next() % 3) as usize];
            (
                1,
                tcp(mac(dst), mac(1), [10, 0, 0, 1], [10, 0, 0, 2], (1, 2), seq),
            )
        })
        .collect();
    let loops = pkts.iter().filter(|(_, f)| f[5] == 3).count() as u64;
    assert!(loops > 50);
    let want = check_batches_equal_one_by_one(looping, &[1, 2], &pkts);
    assert_eq!(want.keys().copied().collect::<Vec<_>>(), [(1, 2), (1, 4)]);
    // Each looping frame crossed 5 links (1→2→1→2→1→2) and device 2 cut the sixth.
    let mut vs = looping();
    let got = batched(&mut vs, &[], &pkts, &[32]);
    assert_eq!(got.len() as u64, pkts.len() as u64 - loops);
    let (s1, s2) = (
        vs.device_stats(Caller::Operator, 1).unwrap(),
        vs.device_stats(Caller::Operator, 2).unwrap(),
    );
    assert_eq!((s1.hop_cut, s2.hop_cut), (0, loops));
    assert_eq!(s1.packets_in, pkts.len() as u64 + 2 * loops);
    assert_eq!(s2.packets_in, 3 * loops + want[&(1, 4)].len() as u64);
}

/// Device 1 sends dst 2 to physical 2 and dst 3 over a link to device 2 (→ physical 3).
fn two_hops() -> VirtSwitch {
    let l2 = compile("p4/virt/l2_switch.p4");
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&l2)).unwrap();
    vs.add_device(2, spec(&l2)).unwrap();
    vs.add_rule(rule(1, 1, 1)).unwrap();
    for (d, p, t) in [
        (1, 2, Target::Phys(2)),
        (1, 3, link(2, 1)),
        (2, 3, Target::Phys(3)),
    ] {
        vs.map_port(d, p, t).unwrap();
    }
    l2_setup(
        &mut vs.runtime(Caller::Operator, 1).unwrap(),
        &[(2, 2), (3, 3)],
        &[2],
    );
    l2_setup(
        &mut vs.runtime(Caller::Operator, 2).unwrap(),
        &[(3, 3)],
        &[3],
    );
    vs
}

/// A panic in the second hop in the middle of a batch: device 2 runs the 40 frames device 1
/// sent it in passes of 32 and 8; the fault fires on its 35th frame, inside the second pass.
/// Device 2 is quarantined; the frames of its first pass (32) are out, those of the pass that
/// panicked (the two before the fault included) are taken back and lost with it; device 1's
/// own frames to physical 2 are all out, in order; device 1 stays in service. The next batch:
/// device 1 forwards as before, device 2's frames are counted as quarantine drops.
#[test]
fn a_panic_in_the_second_hop_mid_batch_quarantines_it_and_the_frames_out_stay_out() {
    let mut vs = two_hops();
    let frames = |base: u32| -> Vec<(Port, Vec<u8>)> {
        (0..80u32)
            .map(|i| {
                let dst = if i.is_multiple_of(2) { 2 } else { 3 };
                let seq = base + i;
                (
                    1,
                    tcp(mac(dst), mac(1), [10, 0, 0, 1], [10, 0, 0, 2], (1, 2), seq),
                )
            })
            .collect()
    };
    vs.inject_panic(2, 35).unwrap();
    let pkts = frames(0);
    let batch: Vec<(Port, &[u8])> = pkts.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    let mut out = Vec::new();
    vs.process_batch(&batch, &mut out);
    let got = phys(&out);
    vs.recycle_outputs(&mut out);
    let to2: Vec<(u64, Vec<u8>)> = pkts
        .iter()
        .filter(|(_, f)| f[5] == 2)
        .map(|(_, f)| (2, f.clone()))
        .collect();
    let to3: Vec<(u64, Vec<u8>)> = pkts
        .iter()
        .filter(|(_, f)| f[5] == 3)
        .map(|(_, f)| (3, f.clone()))
        .collect();
    assert_eq!(to2.len(), 40);
    let mut want = to2.clone();
    want.extend_from_slice(&to3[..32]);
    assert_eq!(got, want);
    let s1 = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!(
        (s1.packets_in, s1.to_phys, s1.to_links, s1.panics),
        (80, 40, 40, 0)
    );
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!(
        (s2.packets_in, s2.to_phys, s2.panics, s2.quarantine_drops),
        (40, 32, 1, 0)
    );
    let why = vs.quarantine(Caller::Operator, 2).unwrap().unwrap();
    assert!(why.contains("injected fault"), "{why}");
    assert!(vs.quarantine(Caller::Operator, 1).unwrap().is_none());

    // The next batch: device 1 as before, device 2's 40 frames dropped and counted.
    let pkts = frames(1000);
    let batch: Vec<(Port, &[u8])> = pkts.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    vs.process_batch(&batch, &mut out);
    let want: Vec<(u64, Vec<u8>)> = pkts
        .iter()
        .filter(|(_, f)| f[5] == 2)
        .map(|(_, f)| (2, f.clone()))
        .collect();
    assert_eq!(phys(&out), want);
    vs.recycle_outputs(&mut out);
    let s2 = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!((s2.packets_in, s2.quarantine_drops), (40, 40));

    // Released, the chain forwards again, in batches.
    vs.release(2).unwrap();
    vs.process_batch(&batch, &mut out);
    assert_eq!(out.len(), 80);
    assert_eq!(
        out.iter().filter(|o| o.port == 3).count(),
        40,
        "device 2 back in service"
    );
    vs.recycle_outputs(&mut out);
}

// ---------------------------------------------------------------------------------------
// One packet per call along a chain (issue 17, h-chain5): the lane (`process_batch` of one,
// `process_next`, `process_each`) against the general path, packet by packet.

/// What one packet left: its frames on physical ports, the CPU frames it queued, every
/// device's counters and the switch's.
#[derive(Debug, PartialEq)]
struct Step {
    frames: Vec<(u64, Vec<u8>)>,
    cpu: Vec<(u64, Vec<u8>)>,
    stats: Vec<tern_virt::DeviceStats>,
    switch: tern_virt::VirtStats,
}

fn step(vs: &mut VirtSwitch, devices: &[DeviceId], frames: Vec<(u64, Vec<u8>)>) -> Step {
    Step {
        frames,
        cpu: cpu_outputs(vs, devices),
        stats: stats(vs, devices),
        switch: vs.stats(),
    }
}

/// Bound each of `devices`' pool of frame buffers to `pool` (`Quotas::max_buffers`; the
/// buffers are made up front), so that a buffer lost, kept or given to the wrong device shows
/// in `spare_buffers`.
fn bound_pools(vs: &mut VirtSwitch, devices: &[DeviceId], pool: usize) {
    for &d in devices {
        let (owner, q) = vs.device_config(d).unwrap();
        let q = Quotas {
            max_buffers: Some(pool),
            ..q
        };
        vs.configure(d, owner, q).unwrap();
    }
}

/// The buffers in each of `devices`' pools (`spare_buffers`).
fn pools(vs: &VirtSwitch, devices: &[DeviceId]) -> Vec<usize> {
    devices
        .iter()
        .map(|&d| vs.spare_buffers(d).unwrap())
        .collect()
}

/// Every rule of `vs` given a condition that always holds (the EtherType under mask 0): the
/// classifier becomes the list of rules, which the one-packet lane never takes, so every
/// packet runs on the general path (the device's pass, then the links hop by hop).
fn off_the_lane(vs: &mut VirtSwitch) {
    let mut t = vs.topology().clone();
    for r in &mut t.rules {
        assert!(r.field.is_none(), "the lane needs rules on ports only");
        r.field = Some(tern_virt::FieldMatch {
            field: tern_virt::Field::EtherType,
            value: 0,
            mask: 0,
        });
    }
    vs.set_topology(t).unwrap();
}

/// The same traffic one packet per call through four identical switches from `build` (`arm`
/// is applied to each first): the general path (the reference), `process_batch` of one
/// packet with `recycle_outputs`, `process_next`, and `process_each` (one session per
/// packet, then one session for all): each packet's frames, CPU frames and every counter
/// after it must be the reference's. Returns the reference's steps.
fn check_lane_equals_general(
    build: impl Fn() -> VirtSwitch,
    arm: impl Fn(&mut VirtSwitch),
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
) -> Vec<Step> {
    let mut reference = build();
    off_the_lane(&mut reference);
    arm(&mut reference);
    let mut out = Vec::new();
    let mut want = Vec::new();
    for (port, data) in pkts {
        reference.process_batch(&[(*port, data)], &mut out);
        let f = phys(&out);
        reference.recycle_outputs(&mut out);
        want.push(step(&mut reference, devices, f));
    }

    let mut vs = build();
    arm(&mut vs);
    for (i, (port, data)) in pkts.iter().enumerate() {
        vs.process_batch(&[(*port, data)], &mut out);
        let f = phys(&out);
        vs.recycle_outputs(&mut out);
        assert_eq!(
            step(&mut vs, devices, f),
            want[i],
            "process_batch, packet {i}"
        );
    }

    let mut vs = build();
    arm(&mut vs);
    for (i, (port, data)) in pkts.iter().enumerate() {
        vs.process_next(*port, data, &mut out);
        let f = phys(&out);
        assert_eq!(
            step(&mut vs, devices, f),
            want[i],
            "process_next, packet {i}"
        );
    }
    vs.recycle_outputs(&mut out);

    let mut vs = build();
    arm(&mut vs);
    for (i, (port, data)) in pkts.iter().enumerate() {
        let mut f = Vec::new();
        let n = vs.process_each([(*port, data.as_slice())], &mut out, |o| f = phys(o));
        assert_eq!(n, 1);
        assert_eq!(phys(&out), f);
        assert_eq!(
            step(&mut vs, devices, f),
            want[i],
            "process_each, packet {i}"
        );
    }
    vs.recycle_outputs(&mut out);

    let mut vs = build();
    arm(&mut vs);
    let mut got = Vec::new();
    let n = vs.process_each(
        pkts.iter().map(|(p, d)| (*p, d.as_slice())),
        &mut out,
        |o| got.push(phys(o)),
    );
    vs.recycle_outputs(&mut out);
    assert_eq!(n, pkts.len() as u64);
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f, &want[i].frames, "one process_each session, packet {i}");
    }
    let cpu: Vec<_> = want.iter().flat_map(|s| s.cpu.iter().cloned()).collect();
    let mut queued = Vec::new();
    for &d in devices {
        queued.extend(cpu_outputs(&mut vs, &[d]));
    }
    let mut cpu_sorted = cpu.clone();
    cpu_sorted.sort();
    queued.sort();
    assert_eq!(queued, cpu_sorted, "one process_each session: CPU frames");
    let last = want.last().expect("traffic");
    assert_eq!(stats(&vs, devices), last.stats, "one process_each session");
    assert_eq!(vs.stats(), last.switch);
    want
}

#[test]
fn example_1_b_one_per_call_on_the_lane_equals_the_general_path() {
    let devices = [12, 22, 32];
    let want = check_lane_equals_general(|| ex1("B"), |_| {}, &devices, &ex1_traffic(300, false));
    // Through the whole chain both ways, and flooded at the edges.
    let through = |o: u64| {
        want.iter()
            .filter(|s| s.frames.iter().any(|f| f.0 == o))
            .count()
    };
    assert!(through(3) > 30 && through(1) > 30 && through(2) > 30);
}

#[test]
fn example_1_c_one_per_call_on_the_lane_equals_the_general_path() {
    let devices = [12, 23, 24, 25, 32];
    let want = check_lane_equals_general(|| ex1("C"), |_| {}, &devices, &ex1_traffic(300, true));
    // Routed through all five devices, and ARP answered two hops in.
    assert!(
        want.iter()
            .filter(|s| s.frames.iter().any(|f| f.0 == 3 && f.1[12..14] == [8, 0]))
            .count()
            > 20
    );
    assert!(want
        .iter()
        .any(|s| s.frames.iter().any(|f| f.0 == 1 && f.1[12..14] == [8, 6])));
}

#[test]
fn three_hops_with_multicast_cpu_and_drop_one_per_call_equal_the_general_path() {
    let want = check_lane_equals_general(three_hops, |_| {}, &[1, 2, 3], &three_hop_traffic(300));
    // Single frames along the whole chain (the lane), and floods with CPU and drop outputs
    // in the middle (the general path from there).
    assert!(
        want.iter()
            .filter(|s| s.frames == [(4, s.frames[0].1.clone())])
            .count()
            > 30
    );
    assert!(want.iter().filter(|s| s.frames.len() > 1).count() > 30);
    assert!(want.iter().filter(|s| !s.cpu.is_empty()).count() > 30);
    assert!(want.last().unwrap().stats[1].dropped > 10);
}

/// `pkts` in runs of one ingress port: each window of 24 packets ordered by port (stable), so
/// that a `process_each` session sees long runs of packets on one port, where it takes the
/// way of the run's last packet again (`LaneMemo`) instead of asking the classifier.
fn in_runs(mut pkts: Vec<(Port, Vec<u8>)>) -> Vec<(Port, Vec<u8>)> {
    for w in pkts.chunks_mut(24) {
        w.sort_by_key(|(p, _)| *p);
    }
    pkts
}

/// One session over runs of one port (the session's memo of the last packet's way): every
/// packet's frames, the CPU frames and every counter equal the general path's, for a single
/// device's runs, chains of three and five devices ending on a physical port (the memo names
/// the chain's last device, whose frame goes back to it), and runs broken by floods, CPU
/// frames and drops in the middle of a chain.
#[test]
fn one_per_call_in_runs_of_one_port_equals_the_general_path() {
    let want = check_lane_equals_general(
        || ex1("B"),
        |_| {},
        &[12, 22, 32],
        &in_runs(ex1_traffic(400, false)),
    );
    assert!(want.iter().filter(|s| s.frames.len() == 1).count() > 100);
    check_lane_equals_general(
        || ex1("C"),
        |_| {},
        &[12, 23, 24, 25, 32],
        &in_runs(ex1_traffic(400, true)),
    );
    let want = check_lane_equals_general(
        three_hops,
        |_| {},
        &[1, 2, 3],
        &in_runs(three_hop_traffic(400)),
    );
    assert!(want.iter().filter(|s| s.frames.len() > 1).count() > 30);
    assert!(want.iter().filter(|s| !s.cpu.is_empty()).count() > 30);
    // A single device (the first L2 switch alone on its ports), the same packet over and
    // over: after the first, every packet takes the memo's way.
    let single = || {
        let mut vs = ex1("B");
        for p in 1..=2 {
            vs.map_port(12, p, Target::Phys(p)).unwrap();
        }
        vs
    };
    let pkt = tcp(
        mac(2),
        mac(1),
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        (1234, 5001),
        7,
    );
    let pkts: Vec<(Port, Vec<u8>)> = (0..50).map(|_| (1, pkt.clone())).collect();
    let want = check_lane_equals_general(single, |_| {}, &[12, 22, 32], &pkts);
    assert!(want
        .iter()
        .all(|s| s.frames.len() == 1 && s.frames[0].0 == 2));

    // Every buffer back to the device that made it: with each pool bounded to POOL (all made
    // up front), one session over the runs ends with every pool full again, neither short
    // (a buffer kept or lost) nor over (a buffer given to the wrong device).
    const POOL: usize = 64;
    for (phase, devices, routed) in [
        ("B", &[12, 22, 32][..], false),
        ("C", &[12, 23, 24, 25, 32][..], true),
    ] {
        let mut vs = ex1(phase);
        bound_pools(&mut vs, devices, POOL);
        let pkts = in_runs(ex1_traffic(400, routed));
        let mut out = Vec::new();
        let n = vs.process_each(
            pkts.iter().map(|(p, d)| (*p, d.as_slice())),
            &mut out,
            |_| {},
        );
        assert_eq!(n, 400);
        vs.recycle_outputs(&mut out);
        assert_eq!(
            pools(&vs, devices),
            vec![POOL; devices.len()],
            "phase {phase}"
        );
    }
}

/// A session's chain memo left at each device of the chain, every way a device can leave it:
/// three L2 switches (`common::three_l2_hops`, device 1 also sending destinations 4, 5 and 6
/// on to device 2, device 2 also 5 on to device 3), runs of four packets for destination 3
/// (1 → 2 → 3, the memo's way) each followed by a packet that leaves it — flooded by device 1
/// (0x77: frames in `out`), sent to device 2's CPU (4: one frame to another port, in the
/// hop's second buffer) or flooded by it (6: several frames there), or flooded by device 3
/// (5: back in `out`). Every packet's frames, CPU frames and counters equal the general
/// path's, and with pools bounded each pool ends as the general path's.
#[test]
fn a_chain_memo_left_at_each_device_goes_on_as_the_general_path() {
    let build = || {
        let mut vs = common::three_l2_hops(&KNOWN);
        // (device, destination, virtual port): device 1's link to device 2 is its port 3,
        // device 2's to device 3 its port 2.
        for (d, dst, p) in [(1, 4, 3), (1, 5, 3), (1, 6, 3), (2, 5, 2)] {
            vs.runtime(Caller::Operator, d)
                .unwrap()
                .mt_add_entry(
                    "L2Ingress.dmac",
                    &[tern_runtime::MatchParam::Exact(mac(dst).to_vec())],
                    "L2Ingress.forward",
                    &[vec![0, p]],
                    None,
                )
                .unwrap();
        }
        vs
    };
    let pkts: Vec<(Port, Vec<u8>)> = (0..200u32)
        .map(|i| {
            let dst = if i % 5 == 4 {
                [0x77, 4, 6, 5][(i / 5 % 4) as usize]
            } else {
                3
            };
            (1, from_h1(dst, i))
        })
        .collect();
    let devices = [1, 2, 3];
    let want = check_lane_equals_general(build, |_| {}, &devices, &pkts);
    // Each way of leaving happened (the outputs as the general path gives them): device 1's
    // flood (physical 2, and on through devices 2 and 3), device 2's CPU, device 2's flood
    // (physical 3, its CPU, and on through device 3), device 3's flood (physical 4, its CPU).
    let outs = |i: usize| -> Vec<u64> {
        let s = &want[i];
        let mut v: Vec<u64> = s.frames.iter().chain(&s.cpu).map(|f| f.0).collect();
        v.sort();
        v
    };
    assert_eq!(outs(4), [2, 3, 4, CPU + 2, CPU + 3]);
    assert_eq!(outs(9), [CPU + 2]);
    assert_eq!(outs(14), [3, 4, CPU + 2, CPU + 3]);
    assert_eq!(outs(19), [4, CPU + 3]);

    // With pools bounded, each pool ends as the general path's (frames kept in CPU queues
    // hold their buffers there): a buffer lost, kept or given to another device shows.
    const POOL: usize = 64;
    let mut reference = build();
    off_the_lane(&mut reference);
    bound_pools(&mut reference, &devices, POOL);
    let mut out = Vec::new();
    for (port, data) in &pkts {
        reference.process_batch(&[(*port, data)], &mut out);
        reference.recycle_outputs(&mut out);
    }
    let mut vs = build();
    bound_pools(&mut vs, &devices, POOL);
    let mut got = Vec::new();
    vs.process_each(
        pkts.iter().map(|(p, d)| (*p, d.as_slice())),
        &mut out,
        |o| got.push(phys(o)),
    );
    for (i, f) in got.iter().enumerate() {
        assert_eq!(f, &want[i].frames, "packet {i}");
    }
    vs.recycle_outputs(&mut out);
    assert_eq!(pools(&vs, &devices), pools(&reference, &devices));
}

/// A chain that runs one device twice: firewalls A → B → A → C to physical port 9 (A
/// forwards 1 → 2 and 3 → 4; A's remembered link, `LinkGuess`, changes twice a packet). Each
/// packet's frame and every counter equal the general path's, one per call and in a session.
#[test]
fn a_chain_through_one_device_twice_equals_the_general_path() {
    let build = || {
        let fw = compile("p4/virt/firewall.p4");
        let mut vs = VirtSwitch::new();
        for d in 1..=3 {
            vs.add_device(d, spec(&fw)).unwrap();
        }
        vs.add_rule(rule(1, 1, 1)).unwrap();
        for (d, p, t) in [
            (1, 2, link(2, 1)),
            (2, 2, link(1, 3)),
            (1, 4, link(3, 1)),
            (3, 2, Target::Phys(9)),
        ] {
            vs.map_port(d, p, t).unwrap();
        }
        for (d, from, to) in [(1, 1, 2), (1, 3, 4), (2, 1, 2), (3, 1, 2)] {
            vs.runtime(Caller::Operator, d)
                .unwrap()
                .mt_add_entry(
                    "FwIngress.fwd",
                    &[tern_runtime::MatchParam::Exact(vec![0, from])],
                    "FwIngress.set_egress",
                    &[vec![0, to]],
                    None,
                )
                .unwrap();
        }
        vs
    };
    let pkts: Vec<(Port, Vec<u8>)> = (0..30).map(|seq| (1, from_h1(3, seq))).collect();
    let want = check_lane_equals_general(build, |_| {}, &[1, 2, 3], &pkts);
    assert!(want
        .iter()
        .all(|s| s.frames.len() == 1 && s.frames[0].0 == 9));
    let last = &want.last().unwrap().stats;
    assert_eq!(
        (last[0].packets_in, last[1].packets_in, last[2].packets_in),
        (60, 30, 30),
        "A runs each packet twice"
    );
}

/// A chain's hop on the lane answers a device's link from the last one it took (`link_of`):
/// a change of the port map between sessions must be seen at once. Ex. 1 B host 1 → host 3
/// runs 12 → 22 → 32 → physical 3; then the firewall's way on to 32 becomes physical 9, then
/// the first switch's way into the firewall becomes physical 8, then both links come back —
/// each packet comes out where the port map of the moment sends it, through `process_each`
/// and `process_next` alike.
#[test]
fn a_chain_on_the_lane_follows_a_changed_port_map_at_once() {
    let pkt = tcp(
        mac(3),
        mac(1),
        [10, 0, 0, 1],
        [10, 0, 0, 3],
        (1234, 5001),
        1,
    );
    for each in [true, false] {
        let mut vs = ex1("B");
        let mut out = Vec::new();
        let ports_out = |vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>| -> Vec<u32> {
            let mut got = Vec::new();
            if each {
                vs.process_each((0..5).map(|_| (1, pkt.as_slice())), out, |o| {
                    got.extend(o.iter().map(|f| f.port))
                });
            } else {
                for _ in 0..5 {
                    vs.process_next(1, &pkt, out);
                    got.extend(out.iter().map(|f| f.port));
                }
            }
            got
        };
        assert_eq!(ports_out(&mut vs, &mut out), [3; 5], "each: {each}");
        vs.map_port(22, 2, Target::Phys(9)).unwrap();
        assert_eq!(ports_out(&mut vs, &mut out), [9; 5], "each: {each}");
        vs.map_port(12, 3, Target::Phys(8)).unwrap();
        assert_eq!(ports_out(&mut vs, &mut out), [8; 5], "each: {each}");
        vs.map_port(12, 3, link(22, 1)).unwrap();
        vs.map_port(22, 2, link(32, 3)).unwrap();
        assert_eq!(ports_out(&mut vs, &mut out), [3; 5], "each: {each}");
        vs.recycle_outputs(&mut out);
    }
}

#[test]
fn a_loop_one_per_call_is_cut_by_the_hop_budget_as_on_the_general_path() {
    let mut r = Rng(91);
    let pkts: Vec<(Port, Vec<u8>)> = (0..200u32)
        .map(|seq| {
            let dst = [2u16, 3, 4][(r.next() % 3) as usize];
            (
                1,
                tcp(mac(dst), mac(1), [10, 0, 0, 1], [10, 0, 0, 2], (1, 2), seq),
            )
        })
        .collect();
    let loops = pkts.iter().filter(|(_, f)| f[5] == 3).count() as u64;
    assert!(loops > 40);
    let want = check_lane_equals_general(looping, |_| {}, &[1, 2], &pkts);
    let last = &want.last().unwrap().stats;
    assert_eq!((last[0].hop_cut, last[1].hop_cut), (0, loops));
}

/// Hop 2 of 3 (Ex. 1 B's firewall) panics on its 40th packet: on the lane as on the general
/// path, the firewall is quarantined, the packet's frames are lost, the later packets for it
/// are counted as quarantine drops and the first switch forwards the rest. Then the same with
/// hop 3 (a device with a fault armed is off the lane; the fault fires inside the lane's hop
/// into it, `fire_in_hop`, when the link brings the packet it fires on).
#[test]
fn a_panic_in_hop_2_of_3_at_packet_k_one_per_call_equals_the_general_path() {
    let devices = [12, 22, 32];
    for (hop, k) in [(1, 40), (2, 25)] {
        let want = check_lane_equals_general(
            || ex1("B"),
            |vs| vs.inject_panic(devices[hop], k).unwrap(),
            &devices,
            &ex1_traffic(300, false),
        );
        let last = &want.last().unwrap().stats;
        assert_eq!(last[hop].panics, 1);
        assert!(last[hop].quarantine_drops > 10, "{last:?}");
        assert!(last[0].to_phys > 10);
    }
}

/// A device of Example 1 B's chain panics **on the lane**, inside a hop of `fast_hops`
/// (issue 17, h-tidy): the middle device (the firewall, 22) in the chain's first hop, and the
/// last switch (32, entered from the firewall) in its second, where the frame it runs waits
/// in the other of the hop's two buffers. The frame it was running (the previous device's
/// output) must go back to the pool of the device that produced it — in a `process_each`
/// session by the session's boundary after the caught panic (`give_back_hop`), with
/// `process_next` by the hop itself. Every device's pool is bounded to `POOL` buffers (all
/// made up front), so a buffer lost shows as a pool short of one and a buffer given twice,
/// or to the wrong device, as a pool past it: after every packet the buffers in the pools
/// plus the frames in the caller's hands are the 3 × `POOL` made, and after the last
/// give-back each pool holds exactly `POOL`. Each packet's frames and every counter equal the
/// general path's with the same fault, packet by packet, before and after the panic (the
/// other switches go on forwarding), and the device is quarantined with one panic.
#[test]
fn a_real_panic_in_a_hop_one_per_call_gives_its_frame_back_and_the_chain_goes_on() {
    // The firewall's 40th packet (it is entered only over links); the last switch's first
    // packet past its 40th that comes over the link (from hosts 1 and 2 on ports 1 and 2,
    // to hosts 3 and 4: the second hop of 12 → 22 → 32) right after a packet that left one
    // frame.
    let pkts = ex1_traffic(300, false);
    let mut probe = ex1("B");
    let mut out = Vec::new();
    let mut k32 = None;
    let mut one_before = false;
    for (port, data) in &pkts {
        let before = stats(&probe, &[32])[0].packets_in;
        probe.process_batch(&[(*port, data)], &mut out);
        let over_link = *port <= 2 && stats(&probe, &[32])[0].packets_in == before + 1;
        // The packet before left one frame: this one takes the one-packet lane in a
        // `process_each` session (the hop with the session's boundary, not its own).
        if over_link && one_before && before >= 40 {
            k32 = Some(before + 1);
            break;
        }
        one_before = out.len() == 1;
        probe.recycle_outputs(&mut out);
    }
    let k32 = k32.expect("a packet from ports 1-2 reaches device 32 over the link");
    for (hop, k) in [(22, 40), (32, k32)] {
        panic_in_hop(&pkts, hop, k);
    }
}

/// [`a_real_panic_in_a_hop_one_per_call_gives_its_frame_back_and_the_chain_goes_on`] with
/// the fault on device `hop`'s `k`-th packet.
fn panic_in_hop(pkts: &[(Port, Vec<u8>)], hop: DeviceId, k: u64) {
    const POOL: usize = 64;
    let devices = [12, 22, 32];
    let at = devices.iter().position(|&d| d == hop).unwrap();
    let build = || {
        let mut vs = ex1("B");
        bound_pools(&mut vs, &devices, POOL);
        vs.inject_panic(hop, k).unwrap();
        vs
    };
    let pools = |vs: &VirtSwitch| pools(vs, &devices);

    let mut reference = build();
    off_the_lane(&mut reference);
    let mut out = Vec::new();
    let mut want = Vec::new();
    for (port, data) in pkts {
        reference.process_batch(&[(*port, data)], &mut out);
        let f = phys(&out);
        reference.recycle_outputs(&mut out);
        want.push(step(&mut reference, &devices, f));
    }
    // The fault fired at the device's k-th packet; afterwards the other switches forwarded
    // packets out of physical ports (to their own hosts, and flooded).
    let fired = want.iter().position(|s| s.stats[at].panics == 1).unwrap();
    assert!(
        want[fired + 1..]
            .iter()
            .filter(|s| !s.frames.is_empty())
            .count()
            > 50,
        "the edges forward after the panic"
    );
    let quarantined = |vs: &VirtSwitch, mode: &str| {
        let last = stats(vs, &devices);
        assert_eq!(last[at].panics, 1, "{mode}");
        assert_eq!(last.iter().map(|s| s.buffer_drops).sum::<u64>(), 0);
        assert!(vs.quarantine(Caller::Operator, hop).unwrap().is_some());
    };

    for each in [false, true] {
        let mode = if each { "process_each" } else { "process_next" };
        let mut vs = build();
        assert_eq!(pools(&vs), [POOL; 3]);
        for (i, (port, data)) in pkts.iter().enumerate() {
            let f = if each {
                let mut f = Vec::new();
                let n = vs.process_each([(*port, data.as_slice())], &mut out, |o| f = phys(o));
                assert_eq!(n, 1, "{mode}: the session went on past the panic");
                f
            } else {
                vs.process_next(*port, data, &mut out);
                phys(&out)
            };
            assert_eq!(step(&mut vs, &devices, f), want[i], "{mode}, packet {i}");
            assert_eq!(
                pools(&vs).iter().sum::<usize>() + out.len(),
                3 * POOL,
                "{mode}, packet {i}: a buffer lost or given twice ({:?} pooled, {} out)",
                pools(&vs),
                out.len()
            );
        }
        vs.recycle_outputs(&mut out);
        assert_eq!(
            pools(&vs),
            [POOL; 3],
            "{mode}: each buffer back in its own pool"
        );
        quarantined(&vs, mode);
    }

    // The whole traffic as one `process_each` session: the panic is caught mid-session (and
    // the packets that come in on the previous one's port take its way again, `LaneMemo`).
    let mut vs = build();
    let mut frames = Vec::new();
    let n = vs.process_each(
        pkts.iter().map(|(p, d)| (*p, d.as_slice())),
        &mut out,
        |o| frames.push(phys(o)),
    );
    assert_eq!(n, pkts.len() as u64, "one session: every packet run");
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f, &want[i].frames, "one session, packet {i}");
    }
    let end = step(&mut vs, &devices, frames.pop().unwrap());
    assert_eq!(
        &end,
        want.last().unwrap(),
        "one session: the counters at the end"
    );
    assert_eq!(pools(&vs).iter().sum::<usize>() + out.len(), 3 * POOL);
    vs.recycle_outputs(&mut out);
    assert_eq!(
        pools(&vs),
        [POOL; 3],
        "one session: each buffer back in its own pool"
    );
    quarantined(&vs, "one session");
}
