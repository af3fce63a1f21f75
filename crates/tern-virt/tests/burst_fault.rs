//! The burst path's own panic boundaries (issue 17, h-harden). An injected fault
//! (`VirtSwitch::inject_panic`) no longer sends a device off `process_burst`'s fast paths: it
//! fires inside them — inside the one-device burst (`Switch::process_burst` of the whole
//! batch) and inside a chain's hop-by-hop bursts — as a real panic in the middle of the
//! switch's burst would. Checked against `process_batch` with the same fault, batch by batch:
//! the same frames in the same order, the same CPU frames, every device's counters and the
//! switch's equal, the faulty device quarantined with one panic. And the fast path really
//! ran while the fault was armed: the frames of the batches before it fired carry their
//! packet's index (the fast paths' descriptors), where the general path's copies carry
//! `u32::MAX` (before h-harden every frame of a device with a fault armed did).

use tern_dataplane::BurstOut;
use tern_runtime::Port;
use tern_virt::{Caller, DeviceId, DeviceStats, Target, VirtSwitch};

mod common;
use common::{compile, ex1, ex1_entry_traffic, mac, rule, spec, tcp, Rng};

/// Add L2 device `id` (`p4/virt/l2_switch.p4`) with its port map, sources 1–6 known, `dmac`
/// (destination, virtual port) forwarded, the rest flooded to `flood`.
fn l2(
    vs: &mut VirtSwitch,
    id: DeviceId,
    map: &[(Port, Target)],
    dmac: &[(u16, u16)],
    flood: &[Port],
) {
    vs.add_device(id, spec(&compile("p4/virt/l2_switch.p4")))
        .unwrap();
    for &(p, t) in map {
        vs.map_port(id, p, t).unwrap();
    }
    let dmac: Vec<(u16, Port)> = dmac.iter().map(|&(m, p)| (m, Port::from(p))).collect();
    common::l2_setup(
        &mut vs.runtime(Caller::Operator, id).unwrap(),
        &[1, 2, 3, 4, 5, 6],
        &dmac,
        flood,
    );
}

/// One L2 device behind renumbered ports (physical 11 → virtual 1, 12 → 2; virtual 3, 4 →
/// physical 13, 14, 5 → CPU, 6 → drop, 7 unmapped), destinations 3 and 4 forwarded, 5 to
/// the CPU, 6 dropped, the rest flooded to every kind of output.
fn one_device() -> VirtSwitch {
    let mut vs = VirtSwitch::new();
    l2(
        &mut vs,
        1,
        &[
            (1, Target::Phys(11)),
            (2, Target::Phys(12)),
            (3, Target::Phys(13)),
            (4, Target::Phys(14)),
            (5, Target::Cpu),
            (6, Target::Drop),
        ],
        &[(3, 3), (4, 4), (5, 5), (6, 6), (7, 7)],
        &[1, 3, 4, 5, 6, 7],
    );
    vs.add_rule(rule(11, 1, 1)).unwrap();
    vs.add_rule(rule(12, 1, 2)).unwrap();
    vs
}

/// Two L2 devices (the second added first), the second linking nowhere (a chain's burst ends in the caller's buffer):
/// 1 (physical 11 and 12) sends destinations 3, 4 and 5 over the link to 2, 7 to physical 14,
/// floods to 1, the link and 14; 2 forwards 3 and 4 to physical 23 and 24, 5 to the CPU,
/// floods to 3, 4 and the CPU.
fn pair() -> VirtSwitch {
    let mut vs = VirtSwitch::new();
    let link = Target::Link {
        device: 2,
        vport: 1,
    };
    l2(
        &mut vs,
        2,
        &[
            (3, Target::Phys(23)),
            (4, Target::Phys(24)),
            (5, Target::Cpu),
        ],
        &[(3, 3), (4, 4), (5, 5)],
        &[3, 4, 5],
    );
    l2(
        &mut vs,
        1,
        &[(1, Target::Phys(11)), (3, link), (4, Target::Phys(14))],
        &[(3, 3), (4, 3), (5, 3), (7, 4)],
        &[1, 3, 4],
    );
    vs.add_rule(rule(11, 1, 1)).unwrap();
    vs.add_rule(rule(12, 1, 1)).unwrap();
    vs
}

fn one_device_traffic(n: usize) -> Vec<(Port, Vec<u8>)> {
    let mut r = Rng(0x2545_f491);
    (0..n as u32)
        .map(|seq| {
            let x = r.next();
            let port = if x.is_multiple_of(3) { 12 } else { 11 };
            let dst = [3u16, 4, 3, 4, 3, 5, 6, 7, 0x77, 3, 4, 3][((x >> 4) % 12) as usize];
            (
                port,
                tcp(mac(dst), 1 + (x >> 9) as u16 % 6, [10, 0, 0, 3], 1234, seq),
            )
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

/// One batch's outputs: the physical frames, the CPU frames, and (bursts only) how many
/// frames carry a packet index (made by a fast path, not copied from the general path).
struct Batch {
    phys: Frames,
    cpu: Frames,
    indexed: usize,
}

/// Batch by batch (sizes cycling through `sizes`).
fn run_batches(
    vs: &mut VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
    sizes: &[usize],
    burst: bool,
) -> Vec<Batch> {
    let mut got = Vec::new();
    let (mut out, mut bout) = (Vec::new(), BurstOut::new());
    let mut i = 0;
    for &n in sizes.iter().cycle() {
        if i >= pkts.len() {
            break;
        }
        let chunk = &pkts[i..(i + n).min(pkts.len())];
        let batch: Vec<(Port, &[u8])> = chunk.iter().map(|(p, d)| (*p, d.as_slice())).collect();
        let (phys, indexed) = if burst {
            vs.process_burst(&batch, &mut bout);
            let f = bout.iter().map(|(p, _, d)| (p, d.to_vec())).collect();
            let indexed = bout.iter().filter(|(_, k, _)| *k != u32::MAX).count();
            bout.clear();
            (f, indexed)
        } else {
            vs.process_batch(&batch, &mut out);
            let f = out.iter().map(|o| (o.port, o.data.clone())).collect();
            vs.recycle_outputs(&mut out);
            (f, 0)
        };
        let mut cpu = Frames::new();
        for &d in devices {
            cpu.extend(vs.take_cpu_packets(Caller::Operator, d).unwrap());
        }
        got.push(Batch { phys, cpu, indexed });
        i += chunk.len();
    }
    got
}

/// The fault in device `dev`'s `k`-th packet, on two switches from `build`: `process_burst`
/// against `process_batch`, batch by batch, every frame and counter equal; `dev` quarantined
/// with one panic; and frames made by the burst's fast paths in the batches before the one
/// the fault fired in.
fn check_fault(
    build: &dyn Fn() -> VirtSwitch,
    devices: &[DeviceId],
    pkts: &[(Port, Vec<u8>)],
    dev: DeviceId,
    k: u64,
) {
    for sizes in [&[32][..], &[7, 32, 1, 64, 3, 100]] {
        let (mut a, mut b) = (build(), build());
        a.inject_panic(dev, k).unwrap();
        b.inject_panic(dev, k).unwrap();
        let want = run_batches(&mut a, devices, pkts, sizes, false);
        let got = run_batches(&mut b, devices, pkts, sizes, true);
        let what = format!("device {dev}, packet {k}, sizes {sizes:?}");
        assert_eq!(got.len(), want.len());
        for (n, (g, w)) in got.iter().zip(&want).enumerate() {
            assert!(
                g.phys == w.phys && g.cpu == w.cpu,
                "{what}: batch {n}: {} / {} frames, {} / {} CPU",
                g.phys.len(),
                w.phys.len(),
                g.cpu.len(),
                w.cpu.len()
            );
        }
        assert_eq!(stats(&b, devices), stats(&a, devices), "{what}");
        assert_eq!(b.stats(), a.stats(), "{what}");
        let s = b.device_stats(Caller::Operator, dev).unwrap();
        assert_eq!(s.panics, 1, "{what}");
        let why = b.quarantine(Caller::Operator, dev).unwrap();
        assert!(why.is_some_and(|w| w.contains("injected fault")), "{what}");
        for &d in devices.iter().filter(|&&d| d != dev) {
            assert_eq!(b.device_stats(Caller::Operator, d).unwrap().panics, 0);
            assert!(b.quarantine(Caller::Operator, d).unwrap().is_none());
        }
        // Where the fault fired: the first batch after which `dev` is quarantined, found by
        // running the batches once more on a fresh switch.
        let mut c = build();
        c.inject_panic(dev, k).unwrap();
        let fired = {
            let (mut i, mut n, mut bout) = (0, 0, BurstOut::new());
            loop {
                assert!(i < pkts.len(), "the fault never fired");
                let len = sizes[n % sizes.len()];
                let chunk = &pkts[i..(i + len).min(pkts.len())];
                let batch: Vec<(Port, &[u8])> =
                    chunk.iter().map(|(p, d)| (*p, d.as_slice())).collect();
                c.process_burst(&batch, &mut bout);
                bout.clear();
                if c.quarantine(Caller::Operator, dev).unwrap().is_some() {
                    break n;
                }
                i += chunk.len();
                n += 1;
            }
        };
        // While the fault was armed the fast paths ran: frames with their packet's index.
        let before: usize = got[..fired].iter().map(|g| g.indexed).sum();
        if fired > 0 {
            assert!(
                before > 0,
                "{what}: no fast-path frame in the {fired} batches before the fault"
            );
        }
    }
}

#[test]
fn a_fault_inside_one_devices_burst_quarantines_it_as_process_batch_does() {
    let pkts = one_device_traffic(400);
    // The first packet of a batch, one in the middle of one, one in a batch of 100, the
    // last of a batch of 32.
    for k in [1, 33, 37, 150, 224] {
        check_fault(&one_device, &[1], &pkts, 1, k);
    }
}

#[test]
fn a_fault_inside_a_chains_burst_quarantines_that_device_as_process_batch_does() {
    for (phase, routed) in [("B", false), ("C", true)] {
        let build = || ex1(phase);
        let devices = build().device_ids();
        let pkts = ex1_entry_traffic(200, routed);
        // Every device of the chain in turn (the entry, the middle hops and the last), at
        // its 5th and 70th packet when it takes that many.
        let mut plain = build();
        run_batches(&mut plain, &devices, &pkts, &[32], true);
        let mut checked = 0;
        for &dev in &devices {
            let took = plain
                .device_stats(Caller::Operator, dev)
                .unwrap()
                .packets_in;
            for k in [5, 70].into_iter().filter(|&k| k <= took) {
                check_fault(&build, &devices, &pkts, dev, k);
                checked += 1;
            }
        }
        assert!(checked >= 2 * 3, "phase {phase}: {checked} faults checked");
    }
}

/// Into `pair`: mostly over the link (destinations 3, 4, 5); in every 64 packets one to
/// physical 14 and one flooded (their passes have frames for several targets).
fn pair_traffic(n: usize) -> Vec<(Port, Vec<u8>)> {
    (0..n as u32)
        .map(|seq| {
            let dst = match seq % 64 {
                62 => 7,
                63 => 0x77,
                x => [3u16, 4, 5][x as usize % 3],
            };
            (
                11,
                tcp(mac(dst), 1 + (seq % 6) as u16, [10, 0, 0, 3], 1234, seq),
            )
        })
        .collect()
}

#[test]
fn a_fault_inside_a_bursts_last_hop_takes_its_frames_back_from_the_callers_buffer() {
    let pkts = pair_traffic(300);
    let mut plain = pair();
    run_batches(&mut plain, &[1, 2], &pkts, &[32], true);
    assert!(plain.device_stats(Caller::Operator, 2).unwrap().packets_in > 150);
    for dev in [1, 2] {
        for k in [2, 40, 130] {
            check_fault(&pair, &[1, 2], &pkts, dev, k);
        }
    }
}
