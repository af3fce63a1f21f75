//! End-to-end: compile tern's tutorial programs, load the JSON in the tern data plane, install
//! entries through the Runtime trait and check the exact output packets.

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};

fn tutorial(name: &str) -> String {
    format!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/tutorials/{}"),
        name
    )
}

fn compile(name: &str) -> tern_p4::Compiled {
    let path = tutorial(name);
    tern_p4::compile_file(std::path::Path::new(&path), &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{name} does not compile:\n{d}"))
}

fn switch(name: &str) -> Switch {
    let c = compile(name);
    Switch::from_json(&c.json, SwitchOptions::default())
        .unwrap_or_else(|e| panic!("{name}: JSON rejected by the data plane: {e}"))
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

/// RFC 1071 checksum over a header with its checksum field zeroed.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for (i, c) in h.chunks(2).enumerate() {
        if i == 5 {
            continue;
        }
        sum += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

fn ipv4_packet(dst: [u8; 4], ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = hex("000000000001 000000000002 0800");
    let mut ip = hex("45 00 0000 0001 0000 00 11 0000 0a000001");
    ip[8] = ttl;
    ip.extend_from_slice(&dst);
    let total = (ip.len() + payload.len()) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    let c = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend(ip);
    p.extend_from_slice(payload);
    p
}

#[test]
fn basic_forwards_rewrites_and_drops() {
    let mut sw = switch("basic.p4");
    sw.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 2, 0],
            prefix_len: 24,
        }],
        "MyIngress.ipv4_forward",
        &[hex("080000000222"), vec![0x00, 0x02]],
        None,
    )
    .unwrap();
    let pkt = ipv4_packet([10, 0, 2, 2], 64, b"hello");
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1, "one packet out");
    assert_eq!(out[0].port, 2);
    let o = &out[0].data;
    assert_eq!(&o[0..6], &hex("080000000222")[..], "new dst MAC");
    assert_eq!(&o[6..12], &pkt[0..6], "src MAC = old dst MAC");
    assert_eq!(o[14 + 8], 63, "TTL decremented");
    let want = ipv4_checksum(&o[14..34]);
    assert_eq!(
        u16::from_be_bytes([o[24], o[25]]),
        want,
        "checksum recomputed"
    );
    assert_ne!(want, u16::from_be_bytes([pkt[24], pkt[25]]));
    assert_eq!(&o[34..], b"hello");
    assert_eq!(o.len(), pkt.len());

    // A miss runs the default action drop().
    let out = run(&mut sw, 1, &ipv4_packet([192, 168, 0, 1], 64, b"x"));
    assert!(out.is_empty(), "miss must drop: {out:?}");

    // Non-IPv4 traffic skips the table; egress_spec stays 0.
    let arp = hex("ffffffffffff 000000000001 0806 0001");
    let out = run(&mut sw, 3, &arp);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 0);
    assert_eq!(out[0].data, arp);
}

#[test]
fn basic_p4info_names_the_table_and_actions() {
    let c = compile("basic.p4");
    assert!(c.p4info.contains("name: \"MyIngress.ipv4_lpm\""));
    assert!(c.p4info.contains("id: 37375156"), "{}", c.p4info);
    assert!(c.p4info.contains("match_type: LPM"));
    assert!(c.p4info.contains("name: \"MyIngress.ipv4_forward\""));
}

#[test]
fn basic_tunnel_forwards_by_tunnel_id() {
    let mut sw = switch("basic_tunnel.p4");
    sw.mt_add_entry(
        "MyIngress.myTunnel_exact",
        &[MatchParam::Exact(vec![0x00, 0x02])],
        "MyIngress.myTunnel_forward",
        &[vec![0x00, 0x05]],
        None,
    )
    .unwrap();
    // Tunnel packet: proto_id 0x0800, dst_id 2, then an IPv4 header.
    let mut pkt = hex("000000000001 000000000002 1212 0800 0002");
    pkt.extend_from_slice(&ipv4_packet([10, 0, 3, 3], 9, b"")[14..]);
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 5);
    assert_eq!(
        out[0].data, pkt,
        "tunnel forwarding leaves the packet unchanged"
    );
    // Unknown tunnel id: dropped by the default action.
    let mut other = pkt.clone();
    other[17] = 9;
    assert!(run(&mut sw, 1, &other).is_empty());
    // Plain IPv4 without a route: dropped.
    assert!(run(&mut sw, 1, &ipv4_packet([10, 0, 3, 3], 9, b"")).is_empty());
}

fn calc_packet(op: u8, a: u32, b: u32) -> Vec<u8> {
    let mut p = hex("0000000000aa 0000000000bb 1234 50 34 01");
    p.push(op);
    p.extend_from_slice(&a.to_be_bytes());
    p.extend_from_slice(&b.to_be_bytes());
    p.extend_from_slice(&[0xee; 4]);
    p
}

#[test]
fn calc_computes_with_const_entries() {
    let mut sw = switch("calc.p4");
    for (op, a, b, want) in [
        (b'+', 7u32, 5u32, 12u32),
        (b'-', 5, 7, 5u32.wrapping_sub(7)),
        (b'&', 0xf0f0, 0xff00, 0xf000),
        (b'|', 0xf0f0, 0x0f00, 0xfff0),
        (b'^', 0xffff, 0x00ff, 0xff00),
    ] {
        let out = run(&mut sw, 4, &calc_packet(op, a, b));
        assert_eq!(out.len(), 1, "op {}", op as char);
        assert_eq!(out[0].port, 4, "sent back to the ingress port");
        let o = &out[0].data;
        assert_eq!(&o[0..6], &hex("0000000000bb")[..], "MACs swapped");
        assert_eq!(&o[6..12], &hex("0000000000aa")[..]);
        assert_eq!(
            u32::from_be_bytes([o[26], o[27], o[28], o[29]]),
            want,
            "op {}",
            op as char
        );
    }
    // Unknown operator and a bad version are dropped.
    assert!(run(&mut sw, 4, &calc_packet(b'*', 1, 2)).is_empty());
    let mut bad = calc_packet(b'+', 1, 2);
    bad[16] = 2;
    assert!(run(&mut sw, 4, &bad).is_empty());
    // The const entries make the table immutable.
    let e = sw.mt_add_entry(
        "MyIngress.calculate",
        &[MatchParam::Exact(vec![b'*'])],
        "MyIngress.operation_add",
        &[],
        None,
    );
    assert!(e.is_err());
}

fn ecn_switch(defines: &[&str]) -> Switch {
    let opts = tern_p4::Options {
        include_dirs: vec![],
        defines: defines.iter().map(|s| s.to_string()).collect(),
    };
    let c = tern_p4::compile_file(std::path::Path::new(&tutorial("ecn.p4")), &opts)
        .unwrap_or_else(|d| panic!("{d}"));
    let mut sw = Switch::from_json(&c.json, SwitchOptions::default()).unwrap();
    sw.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 0, 0],
            prefix_len: 8,
        }],
        "MyIngress.ipv4_forward",
        &[hex("0a0a0a0a0a0a"), vec![0x00, 0x03]],
        None,
    )
    .unwrap();
    sw
}

#[test]
fn ecn_marks_only_above_the_threshold() {
    let mut pkt = ipv4_packet([10, 1, 1, 1], 20, b"data");
    pkt[15] = 0x01; // ECT(1)
    let c = ipv4_checksum(&pkt[14..34]);
    pkt[24..26].copy_from_slice(&c.to_be_bytes());

    // Default threshold (10): the queue is empty, nothing is marked.
    let mut sw = ecn_switch(&[]);
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data[15] & 3, 1);

    // -D ECN_THRESHOLD=0: every ECN-capable packet is marked; the checksum follows.
    let mut sw = ecn_switch(&["ECN_THRESHOLD=0"]);
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    let o = &out[0].data;
    assert_eq!(o[15] & 3, 3, "marked CE");
    assert_eq!(o[22], 19);
    assert_eq!(
        u16::from_be_bytes([o[24], o[25]]),
        ipv4_checksum(&o[14..34])
    );

    // Not ECN-capable (ecn 0): never marked.
    let mut plain = pkt.clone();
    plain[15] = 0;
    let out = run(&mut sw, 1, &plain);
    assert_eq!(out[0].data[15] & 3, 0);
}

#[test]
fn source_routing_pops_hops() {
    let mut sw = switch("source_routing.p4");
    // Two hops: port 2 then port 3 (bottom of stack), then IPv4.
    let mut pkt = hex("000000000001 000000000002 1234 0002 8003");
    pkt.extend_from_slice(&ipv4_packet([10, 0, 0, 1], 30, b"")[14..]);
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    let mut want = hex("000000000001 000000000002 1234 8003");
    want.extend_from_slice(&pkt[18..]);
    want[16 + 8] = 29; // every hop decrements the TTL
    assert_eq!(out[0].data, want, "first hop popped");
    // Second switch: last hop; EtherType becomes IPv4.
    let out = run(&mut sw, 1, &want);
    assert_eq!(out[0].port, 3);
    let o = &out[0].data;
    assert_eq!(&o[12..14], &[0x08, 0x00]);
    assert_eq!(o[14 + 8], 28);
    assert_eq!(o.len(), want.len() - 2);
    // No source route: dropped.
    assert!(run(&mut sw, 1, &ipv4_packet([10, 0, 0, 1], 30, b"")).is_empty());
}

fn tcp_packet(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, flags: u8) -> Vec<u8> {
    let mut p = hex("000000000001 000000000002 0800");
    let mut ip = hex("45 00 0028 0001 0000 40 06 0000");
    ip.extend_from_slice(&src);
    ip.extend_from_slice(&dst);
    let c = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    p.extend(ip);
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    p.extend_from_slice(&hex("00000001 00000000 50"));
    p.push(flags);
    p.extend_from_slice(&hex("ffff 0000 0000"));
    p
}

#[test]
fn firewall_admits_only_established_flows() {
    let mut sw = switch("firewall.p4");
    for (net, port) in [([10, 0, 1, 0], 1u8), ([10, 0, 2, 0], 2u8)] {
        sw.mt_add_entry(
            "MyIngress.ipv4_lpm",
            &[MatchParam::Lpm {
                key: net.to_vec(),
                prefix_len: 24,
            }],
            "MyIngress.ipv4_forward",
            &[hex("00000000aaaa"), vec![0, port]],
            None,
        )
        .unwrap();
    }
    let ports = |i: u8, e: u8| [MatchParam::Exact(vec![0, i]), MatchParam::Exact(vec![0, e])];
    sw.mt_add_entry(
        "MyIngress.check_ports",
        &ports(1, 2),
        "MyIngress.set_direction",
        &[vec![0]],
        None,
    )
    .unwrap();
    sw.mt_add_entry(
        "MyIngress.check_ports",
        &ports(2, 1),
        "MyIngress.set_direction",
        &[vec![1]],
        None,
    )
    .unwrap();
    let inside = [10, 0, 1, 1];
    let outside = [10, 0, 2, 2];
    // An unsolicited inbound packet is dropped.
    let inbound = tcp_packet(outside, inside, 80, 5555, 0x12);
    assert!(run(&mut sw, 2, &inbound).is_empty());
    // Outbound SYN goes out and records the flow.
    let out = run(&mut sw, 1, &tcp_packet(inside, outside, 5555, 80, 0x02));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    // Now the reply is admitted.
    let out = run(&mut sw, 2, &inbound);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 1);
    // A reply for another flow is still dropped.
    assert!(run(&mut sw, 2, &tcp_packet(outside, inside, 81, 5555, 0x12)).is_empty());
    // The filter bits were set through the registers.
    let bits: u64 = sw
        .register_read_all("MyIngress.bloom_filter_1")
        .unwrap()
        .iter()
        .sum();
    assert_eq!(bits, 1);
}

#[test]
fn multicast_replicates_except_to_the_ingress_port() {
    let mut sw = switch("multicast.p4");
    let g = sw.mc_mgrp_create(1).unwrap();
    let n = sw.mc_node_create(7, &[1, 2, 3], &[]).unwrap();
    sw.mc_node_associate(g, n).unwrap();
    sw.mt_add_entry(
        "MyIngress.mac_lookup",
        &[MatchParam::Exact(hex("000000000002"))],
        "MyIngress.mac_forward",
        &[vec![0, 2]],
        None,
    )
    .unwrap();
    let bcast = hex("ffffffffffff 000000000101 0800 0102");
    let mut out = run(&mut sw, 1, &bcast);
    out.sort_by_key(|o| o.port);
    let ports: Vec<u32> = out.iter().map(|o| o.port).collect();
    assert_eq!(ports, vec![2, 3]);
    for o in &out {
        assert_eq!(o.data[11], 7, "rid stamped into the source MAC");
        assert_eq!(&o.data[..11], &bcast[..11]);
    }
    // Unicast.
    let uni = hex("000000000002 000000000101 0800");
    let out = run(&mut sw, 1, &uni);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    assert_eq!(out[0].data, uni);
}
