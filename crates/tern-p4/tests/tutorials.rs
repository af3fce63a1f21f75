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

use tern_fixtures::ipv4_checksum;

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

/// CRC-16/ARC (BMv2's `crc16`).
fn crc16(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for b in data {
        crc ^= *b as u16;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xa001
            } else {
                crc >> 1
            };
        }
    }
    crc
}

#[test]
fn load_balance_hashes_the_five_tuple() {
    let mut sw = switch("load_balance.p4");
    sw.mt_add_entry(
        "MyIngress.ecmp_group",
        &[MatchParam::Lpm {
            key: vec![10, 0, 0, 1],
            prefix_len: 32,
        }],
        "MyIngress.set_ecmp_select",
        &[vec![0, 0], vec![0, 0, 0, 2]],
        None,
    )
    .unwrap();
    for (sel, port, ip) in [(0u8, 2u8, [10, 0, 2, 2]), (1, 3, [10, 0, 3, 3])] {
        sw.mt_add_entry(
            "MyIngress.ecmp_nhop",
            &[MatchParam::Exact(vec![0, sel])],
            "MyIngress.set_nhop",
            &[hex("00000000aa00"), ip.to_vec(), vec![0, port]],
            None,
        )
        .unwrap();
        sw.mt_add_entry(
            "MyEgress.send_frame",
            &[MatchParam::Exact(vec![0, port])],
            "MyEgress.rewrite_mac",
            &[vec![0, 0, 0, 0, 0xbb, port]],
            None,
        )
        .unwrap();
    }
    let mut seen = [false; 2];
    for sport in 1000u16..1016 {
        let pkt = tcp_packet([10, 0, 1, 1], [10, 0, 0, 1], sport, 80, 0x10);
        let mut t = vec![10, 0, 1, 1, 10, 0, 0, 1, 6];
        t.extend_from_slice(&sport.to_be_bytes());
        t.extend_from_slice(&80u16.to_be_bytes());
        let sel = (crc16(&t) % 2) as usize;
        seen[sel] = true;
        let out = run(&mut sw, 1, &pkt);
        assert_eq!(out.len(), 1);
        let port = [2u32, 3][sel];
        assert_eq!(out[0].port, port, "sport {sport}");
        let o = &out[0].data;
        assert_eq!(
            &o[6..12],
            &[0, 0, 0, 0, 0xbb, port as u8],
            "egress rewrote the source MAC"
        );
        assert_eq!(
            &o[30..34],
            &[[10, 0, 2, 2], [10, 0, 3, 3]][sel],
            "new destination IP"
        );
        assert_eq!(
            u16::from_be_bytes([o[24], o[25]]),
            ipv4_checksum(&o[14..34])
        );
    }
    assert!(seen[0] && seen[1], "both paths used");
}

#[test]
fn mri_pushes_a_trace_record_per_hop() {
    let mut sw = switch("mri.p4");
    sw.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 0, 0],
            prefix_len: 8,
        }],
        "MyIngress.ipv4_forward",
        &[hex("000000000003"), vec![0, 3]],
        None,
    )
    .unwrap();
    sw.mt_set_default_action(
        "MyEgress.swtrace",
        "MyEgress.add_swtrace",
        &[vec![0, 0, 0, 7]],
    )
    .unwrap();
    // IPv4 with ihl 6: option 31 (length 4) + MRI count 0, then a UDP-ish payload.
    let mut p = hex("000000000001 000000000002 0800");
    let mut ip = hex("46 00 0000 0001 0000 40 11 0000 0a000101 0a000202 1f04 0000");
    let payload = b"payload!";
    let total = (ip.len() + payload.len()) as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    p.extend(ip);
    p.extend_from_slice(payload);
    let out = run(&mut sw, 1, &p);
    assert_eq!(out.len(), 1);
    let o = &out[0].data;
    assert_eq!(o.len(), p.len() + 8);
    assert_eq!(o[14] & 0x0f, 8, "ihl grew by 2 words");
    assert_eq!(u16::from_be_bytes([o[16], o[17]]), total + 8);
    assert_eq!(o[35], 12, "option length");
    assert_eq!(u16::from_be_bytes([o[36], o[37]]), 1, "count");
    assert_eq!(&o[38..46], &[0, 0, 0, 7, 0, 0, 0, 0], "swid 7, qdepth 0");
    assert_eq!(&o[46..], payload);
    // A second hop pushes in front of the first record.
    sw.mt_set_default_action(
        "MyEgress.swtrace",
        "MyEgress.add_swtrace",
        &[vec![0, 0, 0, 9]],
    )
    .unwrap();
    let out2 = run(&mut sw, 1, o);
    let o2 = &out2[0].data;
    assert_eq!(u16::from_be_bytes([o2[36], o2[37]]), 2);
    assert_eq!(&o2[38..42], &[0, 0, 0, 9]);
    assert_eq!(&o2[46..50], &[0, 0, 0, 7]);
    assert_eq!(&o2[54..], payload);
}

#[test]
fn qos_marks_dscp_by_protocol() {
    let mut sw = switch("qos.p4");
    sw.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 0, 0],
            prefix_len: 8,
        }],
        "MyIngress.ipv4_forward",
        &[hex("000000000009"), vec![0, 4]],
        None,
    )
    .unwrap();
    let mut udp = ipv4_packet([10, 0, 0, 9], 10, b"u");
    udp[15] = 0x02; // ECN bits set, DSCP 0
    let o = &run(&mut sw, 1, &udp)[0].data;
    assert_eq!(o[15], (46 << 2) | 2, "EF, ECN kept");
    assert_eq!(
        u16::from_be_bytes([o[24], o[25]]),
        ipv4_checksum(&o[14..34])
    );
    let tcp = tcp_packet([10, 0, 0, 1], [10, 0, 0, 9], 1, 2, 0x10);
    let o = &run(&mut sw, 1, &tcp)[0].data;
    assert_eq!(o[15] >> 2, 26, "AF31");
}

#[test]
fn p4runtime_tunnels_and_counts() {
    let mut sw = switch("p4runtime.p4");
    sw.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 2, 2],
            prefix_len: 32,
        }],
        "MyIngress.myTunnel_ingress",
        &[vec![0, 100]],
        None,
    )
    .unwrap();
    sw.mt_add_entry(
        "MyIngress.myTunnel_exact",
        &[MatchParam::Exact(vec![0, 100])],
        "MyIngress.myTunnel_forward",
        &[vec![0, 2]],
        None,
    )
    .unwrap();
    let pkt = ipv4_packet([10, 0, 2, 2], 64, b"hi");
    let out = run(&mut sw, 1, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    let o = &out[0].data;
    assert_eq!(
        &o[12..18],
        &[0x12, 0x12, 0x08, 0x00, 0, 100],
        "encapsulated"
    );
    assert_eq!(&o[18..], &pkt[14..]);
    assert_eq!(
        sw.counter_read("MyIngress.ingressTunnelCounter", 100)
            .unwrap()
            .packets,
        1
    );
    // At the last hop the tunnel is removed.
    sw.mt_modify_entry(
        "MyIngress.myTunnel_exact",
        0,
        "MyIngress.myTunnel_egress",
        &[hex("0000000000ee"), vec![0, 7]],
    )
    .unwrap();
    let out = run(&mut sw, 3, o);
    assert_eq!(out[0].port, 7);
    assert_eq!(&out[0].data[..6], &hex("0000000000ee")[..]);
    assert_eq!(&out[0].data[12..], &pkt[12..], "decapsulated");
    assert_eq!(
        sw.counter_read("MyIngress.egressTunnelCounter", 100)
            .unwrap()
            .packets,
        1
    );
}

#[test]
fn link_monitor_probe_collects_port_bytes() {
    let mut sw = switch("link_monitor.p4");
    sw.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 0, 0],
            prefix_len: 8,
        }],
        "MyIngress.ipv4_forward",
        &[hex("000000000002"), vec![0, 2]],
        None,
    )
    .unwrap();
    sw.mt_set_default_action("MyEgress.swid", "MyEgress.set_swid", &[vec![5]])
        .unwrap();
    let data = ipv4_packet([10, 0, 0, 2], 64, &[0u8; 26]);
    assert_eq!(run(&mut sw, 1, &data)[0].port, 2);
    assert_eq!(
        sw.register_read("MyEgress.byte_cnt_reg", 2).unwrap(),
        data.len() as u64
    );
    let probe = hex("ffffffffffff 000000000001 0812 00 02 03");
    let out = run(&mut sw, 1, &probe);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    let o = &out[0].data;
    assert_eq!(o.len(), probe.len() + 18);
    assert_eq!(o[14], 1, "hop count");
    assert_eq!(o[15], 0x80 | 5, "bos and swid");
    assert_eq!(o[16], 2, "egress port");
    let bytes = u32::from_be_bytes([o[17], o[18], o[19], o[20]]);
    assert_eq!(
        bytes as usize,
        data.len() + probe.len(),
        "bytes since the last probe"
    );
    assert_eq!(&o[21..27], &[0; 6], "no earlier probe");
    assert_eq!(&o[33..], &[2, 3], "forwarding hops kept");
    assert_eq!(
        sw.register_read("MyEgress.byte_cnt_reg", 2).unwrap(),
        0,
        "reset by the probe"
    );
}

#[test]
fn flowcache_misses_go_to_the_controller() {
    let c = compile("flowcache.p4");
    assert!(
        c.json.contains("\"support_timeout\": true") || c.json.contains("\"support_timeout\":true")
    );
    assert!(
        c.p4info.contains("controller_packet_metadata"),
        "{}",
        c.p4info
    );
    assert!(c.p4info.contains("name: \"ingress_port\""));
    assert!(c.p4info.contains("idle_timeout_behavior: NOTIFY_CONTROL"));
    let mut sw = Switch::from_json(&c.json, SwitchOptions::default()).unwrap();
    let pkt = ipv4_packet([10, 0, 0, 2], 64, b"abc");
    // Miss: to the CPU port with packet_in (ingress port 3 in 9 bits, then 7 pad bits).
    let out = run(&mut sw, 3, &pkt);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 255);
    assert_eq!(&out[0].data[..2], &[0x01, 0x80]);
    assert_eq!(&out[0].data[2..], &pkt[..]);
    // packet_out from the controller: sent where it says, header removed.
    let mut po = vec![0x02, 0x00]; // egress port 4
    po.extend_from_slice(&pkt);
    let out = run(&mut sw, 255, &po);
    assert_eq!(out[0].port, 4);
    assert_eq!(out[0].data, pkt);
    // After the controller installs the flow, packets are forwarded directly.
    sw.mt_add_entry(
        "MyIngress.flow_cache",
        &[
            MatchParam::Exact(vec![0x11]),
            MatchParam::Exact(vec![10, 0, 0, 1]),
            MatchParam::Exact(vec![10, 0, 0, 2]),
        ],
        "MyIngress.cached_action",
        &[vec![0, 6], hex("00000000cccc")],
        None,
    )
    .unwrap();
    let out = run(&mut sw, 3, &pkt);
    assert_eq!(out[0].port, 6);
    assert_eq!(&out[0].data[..6], &hex("00000000cccc")[..]);
    assert_eq!(out[0].data[22], 63);
}

/// The `controller_packet_metadata` block of `p4info` named `name`, or "".
fn controller_block<'a>(p4info: &'a str, name: &str) -> &'a str {
    p4info
        .split("controller_packet_metadata {")
        .skip(1)
        .map(|b| b.split("\n}\n").next().unwrap_or(b))
        .find(|b| b.contains(&format!("name: \"{name}\"")))
        .unwrap_or("")
}

#[test]
fn controller_headers_get_p4c_ids() {
    // p4c hashes the header *type* name: packet_in_t -> 0x04 << 24 | jenkins & 0xffffff.
    let c = compile("flowcache.p4");
    let pin = controller_block(&c.p4info, "packet_in");
    assert!(pin.contains("id: 80671331\n"), "{pin}");
    assert!(pin.contains("alias: \"packet_in\""), "{pin}");
    assert!(
        pin.contains("@controller_header(\\\"packet_in\\\")"),
        "{pin}"
    );
    let pout = controller_block(&c.p4info, "packet_out");
    assert!(pout.contains("id: 75327753\n"), "{pout}");
    assert!(
        pout.contains("id: 1\n    name: \"egress_port\"\n    bitwidth: 9")
            && pout.contains("id: 2\n    name: \"_pad\"\n    bitwidth: 7"),
        "{pout}"
    );
    // @id on the type and on fields as p4c's allocator: explicit ids first, the rest 1, 2, ...
    // skipping the taken ones.
    let src = r#"
#include <core.p4>
#include <v1model.p4>
@controller_header("packet_in") @id(7)
header cpu_in_t { bit<16> a; @id(1) bit<8> b; bit<8> c; }
@controller_header("packet_out")
header cpu_out_t { bit<16> port; }
struct headers { cpu_in_t cpu_in; cpu_out_t cpu_out; }
struct metadata { }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(h.cpu_out); transition accept; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    apply { h.cpu_in.setValid(); h.cpu_in.a = 1; }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.cpu_in); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let c = tern_p4::compile_str(src, "cpu.p4", &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{d}"));
    let pin = controller_block(&c.p4info, "packet_in");
    assert!(pin.contains(&format!("id: {}\n", 0x0400_0007)), "{pin}");
    for (id, name) in [(2, "a"), (1, "b"), (3, "c")] {
        assert!(
            pin.contains(&format!("id: {id}\n    name: \"{name}\"")),
            "{name}: {pin}"
        );
    }
    let pout = controller_block(&c.p4info, "packet_out");
    let want = 0x0400_0000 | (tern_p4::p4info::jenkins("cpu_out_t") & 0xff_ffff);
    assert!(pout.contains(&format!("id: {want}\n")), "{pout}");
}
