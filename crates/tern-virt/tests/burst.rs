//! The slice's burst path and its one-panic-boundary session (issue 17, h-slice4), checked
//! exactly against the paths they stand for:
//! * `VirtSwitch::process_burst` gives, batch by batch, the frames `process_batch` gives (same
//!   bytes, same physical ports, same order), the same CPU frames and the same counters: one
//!   device with multicast, CPU, drop and unmapped ports, its ports renumbered (one physical
//!   port, and mixed ports through the port table), and a three-device chain with links
//!   (the general path); a single device's descriptors name the packet they came from;
//! * `VirtSwitch::process_each` runs a loop of packets as `process_next` calls would, packet
//!   by packet, and a panic in packet k quarantines only that device: the packets before it
//!   were done, the later ones run;
//! * a device's buffer quota (`Quotas::max_buffers`) bounds the generated lane's output
//!   buffers too: past it a frame is dropped and counted, never allocated.

use tern_dataplane::{BurstOut, Switch, SwitchOptions};
use tern_runtime::{OutputPacket, Port, Runtime};
use tern_virt::{Caller, DeviceId, DeviceStats, Quotas, Target, VirtSwitch};

mod common;
use common::{compile, ex1, ex1_entry_traffic, mac, rule, spec, Rng};

/// The source MACs the L2 devices here know.
const KNOWN: [u16; 6] = [1, 2, 3, 4, 5, 6];

/// The L2 switch's tables: the sources of [`KNOWN`] known, `dmac` forwarded, the rest flooded
/// to `flood` (multicast group 1).
fn l2_setup(rt: &mut dyn Runtime, dmac: &[(u16, Port)], flood: &[Port]) {
    common::l2_setup(rt, &KNOWN, dmac, flood);
}

/// Ethernet `src` → `dst`, IPv4, TCP, a payload carrying `seq` (every frame unique).
fn frame(dst: u16, src: u16, seq: u32) -> Vec<u8> {
    let mut f = mac(dst).to_vec();
    f.extend_from_slice(&mac(src));
    f.extend_from_slice(&[8, 0]);
    f.extend_from_slice(&[
        0x45, 0, 0, 44, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 3,
    ]);
    f.extend_from_slice(&[
        0x04, 0xd2, 0, 80, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0,
    ]);
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&seq.to_be_bytes());
    f
}

/// One L2 device behind renumbered ports: physical 11 → virtual 1, physical 12 → virtual 2
/// (the port table renumbers a mixed batch). Virtual 3, 4 → physical 13, 14; 5 → CPU; 6 →
/// drop; 7 unmapped. Destinations 3 and 4 are forwarded, 5 to the CPU, 6 dropped by the
/// port map, 7 to the unmapped port; the rest flooded to 1, 3, 4, 5, 6, 7 (a multicast with
/// every kind of output).
fn one_device() -> VirtSwitch {
    one_device_mapped(&[(3, 13), (4, 14)])
}

/// [`one_device`] with virtual ports 3 and 4 on physical `phys` (given as (virtual,
/// physical)).
fn one_device_mapped(phys: &[(Port, Port)]) -> VirtSwitch {
    let l2 = compile("p4/virt/l2_switch.p4");
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&l2)).unwrap();
    vs.add_rule(rule(11, 1, 1)).unwrap();
    vs.add_rule(rule(12, 1, 2)).unwrap();
    for (p, t) in [
        (1, Target::Phys(11)),
        (2, Target::Phys(12)),
        (phys[0].0, Target::Phys(phys[0].1)),
        (phys[1].0, Target::Phys(phys[1].1)),
        (5, Target::Cpu),
        (6, Target::Drop),
    ] {
        vs.map_port(1, p, t).unwrap();
    }
    l2_setup(
        &mut vs.runtime(Caller::Operator, 1).unwrap(),
        &[(3, 3), (4, 4), (5, 5), (6, 6), (7, 7)],
        &[1, 3, 4, 5, 6, 7],
    );
    vs
}

/// `n` frames; `mixed`: on physical 11 and 12, else all on 11. Mostly forwarded, some to the
/// CPU, dropped, unmapped and flooded.
fn one_device_traffic(n: usize, mixed: bool) -> Vec<(Port, Vec<u8>)> {
    let mut r = Rng(0x2545_f491);
    (0..n as u32)
        .map(|seq| {
            let x = r.next();
            let port = if mixed && x.is_multiple_of(3) { 12 } else { 11 };
            let dst = [3u16, 4, 3, 4, 3, 5, 6, 7, 0x77][((x >> 4) % 9) as usize];
            (port, frame(dst, 1 + (x >> 9) as u16 % 6, seq))
        })
        .collect()
}

/// Three L2 devices: 1 (physical 1) → link → 2 → link → 3 → physical 4, with floods to
/// physical ports, the CPU and drops on the way (the general path: links).
fn chain() -> VirtSwitch {
    common::three_l2_hops(&KNOWN)
}

fn chain_traffic(n: usize) -> Vec<(Port, Vec<u8>)> {
    let mut r = Rng(0x9e37_79b9);
    (0..n as u32)
        .map(|seq| {
            let x = r.next();
            let dst = [2u16, 3, 3, 4, 0x77][((x >> 3) % 5) as usize];
            (1, frame(dst, 1, seq))
        })
        .collect()
}

fn stats(vs: &VirtSwitch, devices: &[DeviceId]) -> Vec<DeviceStats> {
    devices
        .iter()
        .map(|&d| vs.device_stats(Caller::Operator, d).unwrap())
        .collect()
}

type Frames = Vec<(Port, Vec<u8>)>;

/// Batch by batch (sizes cycling through `sizes`): the physical frames, then the CPU frames.
fn run_batches(
    vs: &mut VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
    sizes: &[usize],
    burst: bool,
) -> Vec<(Frames, Frames)> {
    let mut got = Vec::new();
    let (mut out, mut bout) = (Vec::new(), BurstOut::new());
    let mut i = 0;
    for &n in sizes.iter().cycle() {
        if i >= pkts.len() {
            break;
        }
        let chunk = &pkts[i..(i + n).min(pkts.len())];
        let batch: Vec<(Port, &[u8])> = chunk.iter().map(|(p, d)| (*p, d.as_slice())).collect();
        let phys: Frames = if burst {
            vs.process_burst(&batch, &mut bout);
            let f = bout.iter().map(|(p, _, d)| (p, d.to_vec())).collect();
            bout.clear();
            f
        } else {
            vs.process_batch(&batch, &mut out);
            let f = out.iter().map(|o| (o.port, o.data.clone())).collect();
            vs.recycle_outputs(&mut out);
            f
        };
        let mut cpu = Frames::new();
        for &d in devices {
            cpu.extend(vs.take_cpu_packets(Caller::Operator, d).unwrap());
        }
        got.push((phys, cpu));
        i += chunk.len();
    }
    got
}

/// `process_burst` against `process_batch` on two switches from `build`: every batch's
/// frames equal and in order, the CPU frames and every counter equal. Returns the frames.
fn check_burst_equals_batch(
    build: impl Fn() -> VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
) -> Vec<(Frames, Frames)> {
    let mut want = Vec::new();
    for sizes in [&[32][..], &[7, 32, 1, 64, 3, 100]] {
        let mut a = build();
        let mut b = build();
        want = run_batches(&mut a, devices, pkts, sizes, false);
        let got = run_batches(&mut b, devices, pkts, sizes, true);
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.iter().zip(&want).enumerate() {
            let at = g.0.iter().zip(&w.0).position(|(a, b)| a != b);
            assert!(
                g == w,
                "batch {k} of sizes {sizes:?}: {} / {} frames, {} / {} CPU, first difference \
                 at {at:?}: {:?} / {:?}",
                g.0.len(),
                w.0.len(),
                g.1.len(),
                w.1.len(),
                at.map(|i| (g.0[i].0, g.0[i].1.len())),
                at.map(|i| (w.0[i].0, w.0[i].1.len())),
            );
        }
        assert_eq!(stats(&b, devices), stats(&a, devices), "{sizes:?}");
        assert_eq!(b.stats(), a.stats());
    }
    want
}

#[test]
fn a_burst_for_one_device_gives_the_frames_of_process_batch() {
    for mixed in [false, true] {
        let pkts = one_device_traffic(600, mixed);
        let got = check_burst_equals_batch(one_device, &[1], &pkts);
        // Every kind of output took part.
        let phys: Vec<Port> = got
            .iter()
            .flat_map(|(p, _)| p.iter().map(|f| f.0))
            .collect();
        for p in [13, 14] {
            assert!(phys.iter().filter(|&&x| x == p).count() > 20, "port {p}");
        }
        if mixed {
            // Floods from virtual port 2 reach virtual port 1 (physical 11).
            assert!(phys.contains(&11));
        }
        assert!(got.iter().map(|(_, c)| c.len()).sum::<usize>() > 20);
        let mut vs = one_device();
        run_batches(&mut vs, &[1], &pkts, &[32], true);
        let s = vs.device_stats(Caller::Operator, 1).unwrap();
        assert_eq!(s.packets_in, 600);
        assert!(s.dropped > 20 && s.to_cpu > 20, "{s:?}");
    }
}

/// Virtual ports 3 and 4 on physical 3 and 4 (a run that keeps its numbers, issue 17,
/// h-chain5: one comparison per descriptor), with renumbered ports (1, 2 → 11, 12), the CPU
/// (5) right after the run and drop and unmapped ports beside it: the same frames as
/// `process_batch`.
#[test]
fn a_burst_for_a_device_keeping_port_numbers_gives_the_frames_of_process_batch() {
    for mixed in [false, true] {
        let pkts = one_device_traffic(600, mixed);
        let got = check_burst_equals_batch(|| one_device_mapped(&[(3, 3), (4, 4)]), &[1], &pkts);
        let phys: Vec<Port> = got
            .iter()
            .flat_map(|(p, _)| p.iter().map(|f| f.0))
            .collect();
        for p in [3, 4] {
            assert!(phys.iter().filter(|&&x| x == p).count() > 20, "port {p}");
        }
        assert!(!phys.contains(&5) && !phys.contains(&13));
        assert!(got.iter().map(|(_, c)| c.len()).sum::<usize>() > 20);
    }
}

#[test]
fn a_burst_for_one_device_numbers_each_frame_by_its_packet() {
    let pkts = one_device_traffic(64, true);
    let mut one = one_device();
    let mut want = Vec::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    for (i, (p, d)) in pkts.iter().enumerate() {
        one.process_batch(&[(*p, d)], &mut out);
        want.extend(out.iter().map(|o| (o.port, i as u32, o.data.clone())));
        one.recycle_outputs(&mut out);
    }
    let mut vs = one_device();
    let batch: Vec<(Port, &[u8])> = pkts.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    let mut bout = BurstOut::new();
    vs.process_burst(&batch, &mut bout);
    let got: Vec<(Port, u32, Vec<u8>)> = bout.iter().map(|(p, i, d)| (p, i, d.to_vec())).collect();
    assert_eq!(got, want);
}

#[test]
fn a_burst_through_a_chain_gives_the_frames_of_process_batch() {
    let got = check_burst_equals_batch(chain, &[1, 2, 3], &chain_traffic(500));
    let phys: Vec<Port> = got
        .iter()
        .flat_map(|(p, _)| p.iter().map(|f| f.0))
        .collect();
    for p in [2, 3, 4] {
        assert!(phys.contains(&p), "port {p}");
    }
}

#[test]
fn a_burst_through_example_1_gives_the_frames_of_process_batch() {
    for (phase, routed) in [("B", false), ("C", true)] {
        let devices = ex1(phase).device_ids();
        let pkts = ex1_entry_traffic(400, routed);
        let got = check_burst_equals_batch(|| ex1(phase), &devices, &pkts);
        let out: usize = got
            .iter()
            .map(|(p, _)| p.iter().filter(|f| f.0 == 3).count())
            .sum();
        assert!(out > 300, "phase {phase}: {out} frames to h3");
    }
}

/// Two L2 devices, each on its own physical port (the one-packet lane applies): device 1 on
/// physical 1 (virtual 1) forwards to physical 3, device 2 on physical 2 to physical 4.
fn two_devices() -> VirtSwitch {
    let l2 = compile("p4/virt/l2_switch.p4");
    let mut vs = VirtSwitch::new();
    for d in 1..=2 {
        vs.add_device(d, spec(&l2)).unwrap();
        vs.add_rule(rule(d, d, 1)).unwrap();
        vs.map_port(d, 3, Target::Phys(d + 2)).unwrap();
        l2_setup(
            &mut vs.runtime(Caller::Operator, d).unwrap(),
            &[(3, 3)],
            &[3],
        );
    }
    vs
}

fn two_device_traffic(n: usize) -> Vec<(Port, Vec<u8>)> {
    let mut r = Rng(0x1234_5677);
    (0..n as u32)
        .map(|seq| (1 + r.next() % 2, frame(3, 1, seq)))
        .collect()
}

/// A loop of `process_next` calls: each packet's frames (port, bytes).
fn by_next(vs: &mut VirtSwitch, pkts: &[(Port, Vec<u8>)]) -> Vec<Frames> {
    let mut out = Vec::new();
    let mut got = Vec::new();
    for (p, d) in pkts {
        vs.process_next(*p, d, &mut out);
        got.push(out.iter().map(|o| (o.port, o.data.clone())).collect());
    }
    vs.recycle_outputs(&mut out);
    got
}

/// One `process_each` session: each packet's frames as `sent` saw them.
fn by_session(vs: &mut VirtSwitch, pkts: &[(Port, Vec<u8>)]) -> Vec<Frames> {
    let mut out = Vec::new();
    let mut got = Vec::new();
    let n = vs.process_each(
        pkts.iter().map(|(p, d)| (*p, d.as_slice())),
        &mut out,
        |o| got.push(o.iter().map(|o| (o.port, o.data.clone())).collect()),
    );
    assert_eq!(n, pkts.len() as u64);
    vs.recycle_outputs(&mut out);
    got
}

#[test]
fn a_session_runs_packets_as_process_next_does() {
    let pkts = two_device_traffic(300);
    let mut a = two_devices();
    let mut b = two_devices();
    let want = by_next(&mut a, &pkts);
    let got = by_session(&mut b, &pkts);
    assert_eq!(got, want);
    assert_eq!(stats(&b, &[1, 2]), stats(&a, &[1, 2]));
    assert!(want.iter().all(|f| f.len() == 1));
}

#[test]
fn a_panic_in_packet_k_of_a_session_quarantines_only_its_device() {
    let pkts = two_device_traffic(200);
    // Device 1's 37th packet panics.
    let k = 37;
    let at = pkts
        .iter()
        .enumerate()
        .filter(|(_, (p, _))| *p == 1)
        .nth(k - 1)
        .map(|(i, _)| i)
        .unwrap();
    let mut a = two_devices();
    let mut b = two_devices();
    a.inject_panic(1, k as u64).unwrap();
    b.inject_panic(1, k as u64).unwrap();
    let want = by_next(&mut a, &pkts);
    let got = by_session(&mut b, &pkts);
    assert_eq!(got, want);
    assert_eq!(stats(&b, &[1, 2]), stats(&a, &[1, 2]));
    // Exactly: every packet before the panic forwarded, the panicking one and device 1's
    // later ones not, device 2's all.
    for (i, ((p, d), f)) in pkts.iter().zip(&got).enumerate() {
        let forwarded = *p == 2 || i < at;
        if forwarded {
            assert_eq!(f, &vec![(p + 2, d.clone())], "packet {i}");
        } else {
            assert!(f.is_empty(), "packet {i}");
        }
    }
    let ones = pkts.iter().filter(|(p, _)| *p == 1).count() as u64;
    let s = b.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!(
        (s.packets_in, s.to_phys, s.panics, s.quarantine_drops),
        (k as u64, k as u64 - 1, 1, ones - k as u64)
    );
    assert!(b.quarantine(Caller::Operator, 1).unwrap().is_some());
    assert!(b.quarantine(Caller::Operator, 2).unwrap().is_none());
    let s2 = b.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!(
        (s2.packets_in, s2.to_phys, s2.panics),
        (200 - ones, 200 - ones, 0)
    );
}

#[test]
fn a_panic_outside_the_devices_leaves_the_session() {
    let pkts = two_device_traffic(20);
    let mut vs = two_devices();
    let mut out = Vec::new();
    let mut seen = 0;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        vs.process_each(
            pkts.iter().map(|(p, d)| (*p, d.as_slice())),
            &mut out,
            |_| {
                seen += 1;
                if seen == 5 {
                    panic!("the caller's own");
                }
            },
        )
    }));
    assert!(r.is_err());
    assert_eq!(seen, 5);
    for d in 1..=2 {
        assert!(vs.quarantine(Caller::Operator, d).unwrap().is_none());
        assert_eq!(vs.device_stats(Caller::Operator, d).unwrap().panics, 0);
    }
}

/// A device with a quota of `q` buffers, none given back: the lane's frames stop at the
/// quota, the rest are dropped and counted; given back, they flow again.
#[test]
fn the_lane_takes_its_output_buffers_from_the_bounded_pool() {
    let l2 = compile("p4/virt/l2_switch.p4");
    assert!(
        Switch::from_json(&l2, SwitchOptions::default())
            .unwrap()
            .lane_generated(),
        "the test needs the generated lane"
    );
    let q = 8;
    for batch in [1usize, 5] {
        let mut vs = two_devices();
        let mut quotas = vs.device_config(1).unwrap().1;
        quotas.max_buffers = Some(q);
        vs.configure(1, None, quotas).unwrap();
        let pkts: Vec<(Port, Vec<u8>)> = (0..20).map(|s| (1, frame(3, 1, s))).collect();
        let mut out = Vec::new();
        for c in pkts.chunks(batch) {
            let b: Vec<(Port, &[u8])> = c.iter().map(|(p, d)| (*p, d.as_slice())).collect();
            // `out` keeps every frame: no buffer goes back.
            vs.process_batch(&b, &mut out);
        }
        let s = vs.device_stats(Caller::Operator, 1).unwrap();
        assert_eq!(out.len(), q, "batches of {batch}");
        assert_eq!((s.to_phys, s.buffer_drops), (q as u64, 20 - q as u64));
        // Given back, the buffers carry the next frames.
        vs.recycle_outputs(&mut out);
        let b: Vec<(Port, &[u8])> = pkts[..q].iter().map(|(p, d)| (*p, d.as_slice())).collect();
        vs.process_batch(&b, &mut out);
        assert_eq!(out.len(), q);
        let s = vs.device_stats(Caller::Operator, 1).unwrap();
        assert_eq!(s.buffer_drops, 20 - q as u64);
        // Device 2 has no quota of its own: unbounded on the caller's thread.
        out.clear();
        let b: Vec<(Port, &[u8])> = (0..20).map(|_| (2, pkts[0].1.as_slice())).collect();
        vs.process_batch(&b, &mut out);
        assert_eq!(out.len(), 20);
        // A burst writes into the caller's buffer: the pool is not used.
        let mut bout = BurstOut::new();
        let b: Vec<(Port, &[u8])> = pkts.iter().map(|(p, d)| (*p, d.as_slice())).collect();
        vs.process_burst(&b, &mut bout);
        assert_eq!(bout.len(), 20);
    }
}

#[test]
fn the_buffer_quota_is_configured_like_the_others() {
    let q = tern_virt::config::parse_quota_words(&["max_buffers=64"], Quotas::default()).unwrap();
    assert_eq!(q.max_buffers, Some(64));
    let q = tern_virt::config::parse_quota_words(&["max_buffers=none"], q).unwrap();
    assert_eq!(q.max_buffers, None);
    for bad in ["max_buffers=0", "max_buffers=2000000", "max_buffers=x"] {
        assert!(tern_virt::config::parse_quota_words(&[bad], Quotas::default()).is_err());
    }
}
