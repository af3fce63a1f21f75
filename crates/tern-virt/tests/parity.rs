//! The slice's fast paths give exactly the native outputs, packet by packet: a router alone in
//! a slice (one packet per call, and batches of mixed sizes), the same router behind a
//! port-only classifier with a renumbering port map, and a firewall → router chain against
//! the two switches applied in turn. The traffic mixes routed, unrouted (dropped), non-IPv4
//! and malformed frames on several ports.

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Rule, Target, VirtSwitch};

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

fn compile(rel: &str) -> String {
    tern_p4::compile_file(
        std::path::Path::new(&format!("{ROOT}{rel}")),
        &tern_p4::Options::default(),
    )
    .unwrap()
    .json
}

fn spec(json: &str) -> DeviceSpec {
    DeviceSpec {
        json: json.to_string(),
        owner: None,
        quotas: Quotas::default(),
    }
}

fn routes(rt: &mut dyn Runtime) {
    routes_to(rt, 0);
}

/// Three /32 routes, out of ports 1..=3 plus `off`.
fn routes_to(rt: &mut dyn Runtime, off: u8) {
    for (dst, port) in [([10, 0, 2, 2], 2u8), ([10, 0, 3, 3], 3), ([10, 0, 1, 1], 1)] {
        rt.mt_add_entry(
            "MyIngress.ipv4_lpm",
            &[MatchParam::Lpm {
                key: dst.to_vec(),
                prefix_len: 32,
            }],
            "MyIngress.ipv4_forward",
            &[vec![8, 0, 0, 0, port, 0x22], vec![0, port + off]],
            None,
        )
        .unwrap();
    }
}

fn fw(rt: &mut dyn Runtime) {
    for (port, to) in [(1u8, 2u8), (2, 2), (3, 2)] {
        rt.mt_add_entry(
            "FwIngress.fwd",
            &[MatchParam::Exact(vec![0, port])],
            "FwIngress.set_egress",
            &[vec![0, to]],
            None,
        )
        .unwrap();
    }
}

/// A deterministic mix of frames: (physical port, frame).
fn traffic(n: usize) -> Vec<(u32, Vec<u8>)> {
    let mut x: u32 = 0x2545_f491;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        x
    };
    (0..n)
        .map(|i| {
            let r = next();
            let port = 1 + r % 3;
            let dst = match (r >> 4) % 5 {
                0 => [10, 0, 2, 2],
                1 => [10, 0, 3, 3],
                2 => [10, 0, 1, 1],
                3 => [10, 9, 9, 9], // no route: dropped
                _ => [10, 0, 2, (r >> 8) as u8],
            };
            let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
            p.extend_from_slice(&[0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1]);
            p.extend_from_slice(&dst);
            p.extend_from_slice(&(i as u32).to_be_bytes());
            p.extend_from_slice(&[0x5a; 12]);
            match (r >> 12) % 8 {
                0 => p[12..14].copy_from_slice(&[0x86, 0xdd]), // not IPv4
                1 => p.truncate(20),                           // cut inside the IPv4 header
                2 => p[22] = 1,                                // TTL 1
                _ => {}
            }
            (port, p)
        })
        .collect()
}

fn frames(out: &[OutputPacket]) -> Vec<(u32, Vec<u8>)> {
    out.iter().map(|o| (o.port, o.data.to_vec())).collect()
}

/// Native outputs of each packet through `switches` in turn (the last one's frames).
fn native(switches: &mut [Switch], pkts: &[(u32, Vec<u8>)]) -> Vec<Vec<(u32, Vec<u8>)>> {
    pkts.iter()
        .map(|(port, data)| {
            let mut cur = vec![(*port, data.clone())];
            for (i, sw) in switches.iter_mut().enumerate() {
                let mut next = Vec::new();
                for (p, d) in &cur {
                    // Between switches of a chain, the frame enters the next on port 1.
                    let inp = if i == 0 { *p } else { 1 };
                    let mut out = Vec::new();
                    sw.process_packet(inp, d, &mut out);
                    next.extend(frames(&out));
                }
                cur = next;
            }
            cur
        })
        .collect()
}

/// `VirtSwitch::process_next` (one packet per call, the previous call's frames given back in
/// the call) gives `want[i]` for packet `i`, whatever the previous packet did; the last
/// packet's frames are given back with `recycle_outputs`.
fn one_by_one_with_process_next(
    vs: &mut VirtSwitch,
    pkts: &[(u32, Vec<u8>)],
    want: &[Vec<(u32, Vec<u8>)>],
) {
    let mut out = Vec::new();
    for (i, (port, data)) in pkts.iter().enumerate() {
        vs.process_next(*port, data, &mut out);
        assert_eq!(frames(&out), want[i], "packet {i}, process_next");
    }
    vs.recycle_outputs(&mut out);
    assert!(out.is_empty());
}

#[test]
fn a_router_in_a_slice_gives_the_native_outputs_packet_by_packet() {
    let json = compile("p4/tutorials/basic.p4");
    let mut sw = Switch::from_json(&json, SwitchOptions::default()).unwrap();
    routes(&mut sw);
    let pkts = traffic(600);
    let want = native(std::slice::from_mut(&mut sw), &pkts);
    assert!(
        want.iter().filter(|w| w.is_empty()).count() > 50,
        "some dropped"
    );
    assert!(
        want.iter().filter(|w| w.len() == 1).count() > 300,
        "most forwarded"
    );

    // Catch-all rule, 1:1 port map: the whole-batch path and the one-packet path.
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&json)).unwrap();
    routes(&mut vs.runtime(Caller::Operator, 1).unwrap());
    vs.add_rule(Rule {
        priority: 0,
        port: None,
        vlan: None,
        field: None,
        device: 1,
        vport: None,
    })
    .unwrap();
    for p in 0..4 {
        vs.map_port(1, p, Target::Phys(p)).unwrap();
    }
    let mut out = Vec::new();
    for (i, (port, data)) in pkts.iter().enumerate() {
        vs.process_batch(&[(*port, data)], &mut out);
        assert_eq!(frames(&out), want[i], "packet {i}, one per call");
        vs.recycle_outputs(&mut out);
    }
    let once = vs.device_stats(Caller::Operator, 1).unwrap();
    one_by_one_with_process_next(&mut vs, &pkts, &want);
    let twice = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!(
        (twice.packets_in, twice.to_phys, twice.dropped),
        (2 * once.packets_in, 2 * once.to_phys, 2 * once.dropped)
    );
    let mut i = 0;
    for size in [1usize, 2, 3, 7, 32, 5, 64, 1, 16].iter().cycle() {
        if i >= pkts.len() {
            break;
        }
        let end = (i + size).min(pkts.len());
        let batch: Vec<(u32, &[u8])> = pkts[i..end].iter().map(|(p, d)| (*p, &d[..])).collect();
        vs.process_batch(&batch, &mut out);
        let got = frames(&out);
        let expect: Vec<_> = want[i..end].iter().flatten().cloned().collect();
        assert_eq!(got, expect, "batch of packets {i}..{end}");
        vs.recycle_outputs(&mut out);
        i = end;
    }

    // Port rules with a renumbering map: physical p arrives on virtual p + 10, virtual
    // q + 10 leaves on physical q.
    let mut sw2 = Switch::from_json(&json, SwitchOptions::default()).unwrap();
    routes_to(&mut sw2, 10);
    let mut vs = VirtSwitch::new();
    vs.add_device(7, spec(&json)).unwrap();
    routes_to(&mut vs.runtime(Caller::Operator, 7).unwrap(), 10);
    for p in 1..4 {
        vs.add_rule(Rule {
            priority: 0,
            port: Some(p),
            vlan: None,
            field: None,
            device: 7,
            vport: Some(p + 10),
        })
        .unwrap();
        vs.map_port(7, p + 10, Target::Phys(p)).unwrap();
    }
    for (i, (port, data)) in pkts.iter().enumerate() {
        vs.process_batch(&[(*port, data)], &mut out);
        // The program sees port + 10: the native run with the same ports, its outputs through
        // the port map (virtual 11..=13 to physical 1..=3, the rest unmapped: dropped).
        let mut n = Vec::new();
        sw2.process_packet(port + 10, data, &mut n);
        let expect: Vec<_> = n
            .iter()
            .filter(|o| (11..=13).contains(&o.port))
            .map(|o| (o.port - 10, o.data.to_vec()))
            .collect();
        assert_eq!(frames(&out), expect, "packet {i}, renumbered");
        vs.recycle_outputs(&mut out);
    }
    let renumbered: Vec<Vec<(u32, Vec<u8>)>> = pkts
        .iter()
        .map(|(port, data)| {
            let mut n = Vec::new();
            sw2.process_packet(port + 10, data, &mut n);
            n.iter()
                .filter(|o| (11..=13).contains(&o.port))
                .map(|o| (o.port - 10, o.data.to_vec()))
                .collect()
        })
        .collect();
    one_by_one_with_process_next(&mut vs, &pkts, &renumbered);
    // The same in batches: of mixed ports (each packet renumbered by the port table on its
    // way into the switch) and of one port (all on one virtual port), the outputs mapped
    // (the unmapped ones dropped in the middle of a batch's physical frames).
    let expect_of = |sw: &mut Switch, batch: &[(u32, &[u8])]| -> Vec<(u32, Vec<u8>)> {
        let mut n = Vec::new();
        for &(port, data) in batch {
            sw.process_packet(port + 10, data, &mut n);
        }
        n.iter()
            .filter(|o| (11..=13).contains(&o.port))
            .map(|o| (o.port - 10, o.data.to_vec()))
            .collect()
    };
    let mut i = 0;
    for size in [2usize, 32, 3, 64, 7, 1, 16].iter().cycle() {
        if i >= pkts.len() {
            break;
        }
        let end = (i + size).min(pkts.len());
        let batch: Vec<(u32, &[u8])> = pkts[i..end].iter().map(|(p, d)| (*p, &d[..])).collect();
        vs.process_batch(&batch, &mut out);
        assert_eq!(
            frames(&out),
            expect_of(&mut sw2, &batch),
            "renumbered batch of packets {i}..{end}"
        );
        vs.recycle_outputs(&mut out);
        // The batch's packets again, all on one physical port.
        let port = 1 + (i as u32 % 3);
        let one: Vec<(u32, &[u8])> = batch.iter().map(|&(_, d)| (port, d)).collect();
        vs.process_batch(&one, &mut out);
        assert_eq!(
            frames(&out),
            expect_of(&mut sw2, &one),
            "renumbered batch of packets {i}..{end} on port {port}"
        );
        vs.recycle_outputs(&mut out);
        i = end;
    }
}

#[test]
fn a_chain_gives_the_two_programs_outputs_packet_by_packet() {
    let (fwj, rj) = (
        compile("p4/virt/firewall.p4"),
        compile("p4/tutorials/basic.p4"),
    );
    let mut a = Switch::from_json(&fwj, SwitchOptions::default()).unwrap();
    fw(&mut a);
    let mut b = Switch::from_json(&rj, SwitchOptions::default()).unwrap();
    routes(&mut b);
    let mut pair = [a, b];
    let pkts = traffic(400);
    let want = native(&mut pair, &pkts);
    assert!(want.iter().filter(|w| w.len() == 1).count() > 150);

    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(&fwj)).unwrap();
    vs.add_device(2, spec(&rj)).unwrap();
    fw(&mut vs.runtime(Caller::Operator, 1).unwrap());
    routes(&mut vs.runtime(Caller::Operator, 2).unwrap());
    vs.add_rule(Rule {
        priority: 0,
        port: None,
        vlan: None,
        field: None,
        device: 1,
        vport: None,
    })
    .unwrap();
    vs.map_port(
        1,
        2,
        Target::Link {
            device: 2,
            vport: 1,
        },
    )
    .unwrap();
    for p in 0..4 {
        vs.map_port(2, p, Target::Phys(p)).unwrap();
    }
    let mut out = Vec::new();
    for (i, (port, data)) in pkts.iter().enumerate() {
        vs.process_batch(&[(*port, data)], &mut out);
        assert_eq!(frames(&out), want[i], "packet {i}, one per call");
        vs.recycle_outputs(&mut out);
    }
    one_by_one_with_process_next(&mut vs, &pkts, &want);
    for (k, chunk) in pkts.chunks(9).enumerate() {
        let batch: Vec<(u32, &[u8])> = chunk.iter().map(|(p, d)| (*p, &d[..])).collect();
        vs.process_batch(&batch, &mut out);
        let expect: Vec<_> = want[k * 9..k * 9 + chunk.len()]
            .iter()
            .flatten()
            .cloned()
            .collect();
        assert_eq!(frames(&out), expect, "batch {k}");
        vs.recycle_outputs(&mut out);
    }
    let s = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!(s.hop_cut, 0);
}
