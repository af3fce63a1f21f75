//! The B-Cache cases' network (`p4/bcache/case1..4.p4`): one deterministic population of
//! hosts, VLANs, routes, ACL rules, NAT bindings and source-guard bindings, from which both the
//! table contents (runtime-CLI commands, `p4/bcache/caseN.txt`) and the traffic (flows with
//! their ingress port and the forwarding a correct switch gives them) are derived, so the two
//! always match. Flows are drawn Zipf-skewed over N flows for `tern bench --traffic caseN` and
//! the experiments (`tern bcache experiment`).
//!
//! The network: 8 access ports (port p in VLAN `10 * (1 + p % 4)`), 4,000 hosts (host i in
//! VLAN index `i % 4`, on port `i % 4 + 4 * (i / 4 % 2)`, MAC `02:00:00:00:xx:xx`, address
//! `10.v.a.b`), a router MAC, 1,000 /32 routes to the first 1,000 hosts ("servers") and 1,000
//! remote /24 prefixes (`20.x.y.0/24`) through 16 gateway hosts; VLANs 10 and 20 are VRF 1,
//! 30 and 40 VRF 2 (case4 only; a flow's destination is always in its source's VRF).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use tern_runtime::{MatchParam, Runtime};

/// Access ports.
pub const PORTS: u32 = 8;
/// Hosts (MAC learning, switching and source-guard entries: one each).
pub const HOSTS: u32 = 4000;
/// Hosts with a /32 route.
pub const SERVERS: u32 = 1000;
/// Remote /24 prefixes.
pub const PREFIXES: u32 = 1000;
/// Gateways (the next hops of the remote prefixes: hosts 0..16).
pub const GATEWAYS: u32 = 16;
/// ACL deny rules (destination ports 6000..6100) and permit rules (remote prefixes).
pub const ACL_DENY: u32 = 100;
pub const ACL_PERMIT: u32 = 900;
/// NAT bindings at most (the first routed-to-remote flows' source address and port).
pub const NAT_MAX: u32 = 4000;
/// The router's MAC.
pub const ROUTER_MAC: u64 = 0x0000_5e00_0101;
/// The multicast group of `broadcast(1)`.
pub const FLOOD_GROUP: u32 = 1;

/// A flow's kind, in the traffic mix (percent of flows).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// 55 %: to a remote prefix via a gateway (NAT applies in case3 and case4 when bound).
    Remote,
    /// 20 %: to a server's /32.
    Server,
    /// 15 %: bridged within the VLAN.
    Bridged,
    /// 2 %: to the broadcast MAC (flooded to the group, counted by storm control in case4).
    Broadcast,
    /// 6 %: to a server on a denied destination port (dropped by the ACL in case2..4).
    Denied,
    /// 2 %: bridged from a spoofed (unbound, unlearned) source MAC (dropped by the source guard
    /// in case4; a digest per packet in every case).
    Spoofed,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Remote,
        Kind::Server,
        Kind::Bridged,
        Kind::Broadcast,
        Kind::Denied,
        Kind::Spoofed,
    ];
    fn of(pct: u64) -> Kind {
        match pct {
            0..55 => Kind::Remote,
            55..75 => Kind::Server,
            75..90 => Kind::Bridged,
            90..92 => Kind::Broadcast,
            92..98 => Kind::Denied,
            _ => Kind::Spoofed,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Kind::Remote => "remote",
            Kind::Server => "server",
            Kind::Bridged => "bridged",
            Kind::Broadcast => "broadcast",
            Kind::Denied => "acl-denied",
            Kind::Spoofed => "spoofed",
        }
    }
}

/// splitmix64: the population's deterministic hash.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub fn vid_of_vlan(v: u32) -> u32 {
    10 * (v + 1)
}
pub fn vlan_of_port(p: u32) -> u32 {
    p % 4
}
/// VRF of a VLAN index (case4): VLANs 10, 20 → 1; 30, 40 → 2.
pub fn vrf_of_vlan(v: u32) -> u32 {
    1 + v / 2
}
pub fn host_vlan(i: u32) -> u32 {
    i % 4
}
pub fn host_port(i: u32) -> u32 {
    i % 4 + 4 * (i / 4 % 2)
}
pub fn host_mac(i: u32) -> u64 {
    0x0200_0000_0000 | (i as u64 + 1)
}
pub fn host_ip(i: u32) -> u32 {
    let j = i / 4;
    (10 << 24) | ((host_vlan(i) + 1) << 16) | ((j / 250) << 8) | (j % 250 + 1)
}
/// Remote prefix r (a /24) and its gateway host.
pub fn prefix(r: u32) -> u32 {
    (20 << 24) | (r << 8)
}
pub fn gateway(r: u32) -> u32 {
    r % GATEWAYS
}

/// One flow: its headers, ingress port and what a correct switch does with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flow {
    pub kind: Kind,
    pub port: u32,
    pub dst_mac: u64,
    pub src_mac: u64,
    pub src_ip: u32,
    pub dst_ip: u32,
    pub proto: u8,
    pub sport: u16,
    pub dport: u16,
}

/// Flow `k` of the population (the same for every N).
pub fn flow(k: u32) -> Flow {
    let h = mix(k as u64 ^ 0xbcac_4e00_0000_0000);
    let kind = Kind::of(h % 100);
    let h2 = mix(h);
    let src = (h2 % HOSTS as u64) as u32;
    let v = host_vlan(src);
    let h3 = mix(h2);
    let proto = if h3 & 1 == 0 { 6 } else { 17 };
    let sport = 1024 + (h3 >> 8) as u16 % 50_000;
    let dport = [80u16, 443, 53, 8080, 22, 3306, 5201, 123][(h3 >> 40) as usize % 8];
    // A host of VLAN v (or of v's VRF for routed flows) chosen by `x` among `n` slots.
    let same_vlan = |x: u64, n: u32| v + 4 * ((x % (n / 4) as u64) as u32);
    let same_vrf = |x: u64, n: u32| {
        let other = v ^ 1; // the VLAN sharing v's VRF
        let vl = if x & 1 == 0 { v } else { other };
        vl + 4 * (((x >> 1) % (n / 4) as u64) as u32)
    };
    let mut f = Flow {
        kind,
        port: host_port(src),
        dst_mac: ROUTER_MAC,
        src_mac: host_mac(src),
        src_ip: host_ip(src),
        dst_ip: 0,
        proto,
        sport,
        dport,
    };
    let h4 = mix(h3);
    match kind {
        Kind::Remote => {
            // A prefix whose gateway is in the source's VRF.
            let g = same_vrf(h4, GATEWAYS);
            let r = g + GATEWAYS * ((h4 >> 20) as u32 % (PREFIXES / GATEWAYS));
            f.dst_ip = prefix(r) | (1 + (h4 >> 40) as u32 % 254);
        }
        Kind::Server => f.dst_ip = host_ip(same_vrf(h4, SERVERS)),
        Kind::Denied => {
            f.dst_ip = host_ip(same_vrf(h4, SERVERS));
            f.dport = 6000 + (h4 >> 32) as u16 % ACL_DENY as u16;
        }
        Kind::Bridged | Kind::Spoofed => {
            let d = same_vlan(h4, HOSTS);
            f.dst_mac = host_mac(d);
            f.dst_ip = host_ip(d);
            if kind == Kind::Spoofed {
                f.src_mac = 0x0266_0000_0000 | (h4 >> 24) & 0xffff_ffff;
            }
        }
        Kind::Broadcast => {
            f.dst_mac = 0xffff_ffff_ffff;
            f.dst_ip = (10 << 24) | ((v + 1) << 16) | 0xffff;
        }
    }
    f
}

/// Where a correct switch sends flow `f` in `case`: `Some(port)` unicast, `Some(u32::MAX)`
/// flooded to the group, `None` dropped.
pub fn expected_port(f: &Flow, case: u32) -> Option<u32> {
    let dst_host = |ip: u32| -> Option<u32> {
        let (v, j) = ((ip >> 16) & 0xff, ((ip >> 8) & 0xff) * 250 + (ip & 0xff));
        let i = 4 * j.checked_sub(1)? + v.checked_sub(1)?;
        (i < HOSTS && host_ip(i) == ip).then_some(i)
    };
    match f.kind {
        Kind::Remote => {
            let r = (f.dst_ip >> 8) & 0xffff;
            Some(host_port(gateway(r)))
        }
        Kind::Server => dst_host(f.dst_ip).map(host_port),
        Kind::Denied if case >= 2 => None,
        Kind::Denied => dst_host(f.dst_ip).map(host_port),
        Kind::Spoofed if case >= 4 => None,
        Kind::Bridged | Kind::Spoofed => {
            let d = (f.dst_mac & 0xffff) as u32 - 1;
            Some(host_port(d))
        }
        Kind::Broadcast => Some(u32::MAX),
    }
}

/// The NAT bindings: (source address, source port) of the first routed-to-remote flows.
pub fn nat_bindings() -> Vec<(u32, u16)> {
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut k = 0u32;
    while out.len() < NAT_MAX as usize && k < 64 * NAT_MAX {
        let f = flow(k);
        if f.kind == Kind::Remote && seen.insert((f.src_ip, f.sport)) {
            out.push((f.src_ip, f.sport));
        }
        k += 1;
    }
    out
}

/// The translated (address, port) of NAT binding `i`.
pub fn nat_target(i: u32) -> (u32, u16) {
    (
        (198 << 24) | (51 << 16) | (100 << 8) | (1 + i % 254),
        20_000 + (i % 40_000) as u16,
    )
}

/// The case number of a name like `case3` (1..=4).
pub fn case_number(name: &str) -> Option<u32> {
    let n: u32 = name.strip_prefix("case")?.parse().ok()?;
    (1..=4).contains(&n).then_some(n)
}

/// One table operation of a case's contents.
#[derive(Clone, Debug)]
pub enum Op {
    Add {
        table: &'static str,
        key: Vec<MatchParam>,
        action: &'static str,
        data: Vec<Vec<u8>>,
        priority: Option<i32>,
    },
    SetDefault {
        table: &'static str,
        action: &'static str,
    },
}

fn be(v: u64, bytes: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - bytes..].to_vec()
}
fn ex(v: u64, bytes: usize) -> MatchParam {
    MatchParam::Exact(be(v, bytes))
}
fn tern(v: u64, m: u64, bytes: usize) -> MatchParam {
    MatchParam::Ternary {
        key: be(v, bytes),
        mask: be(m, bytes),
    }
}
fn lpm(v: u32, len: u32) -> MatchParam {
    MatchParam::Lpm {
        key: v.to_be_bytes().to_vec(),
        prefix_len: len,
    }
}

/// The table contents of `case` (multicast group aside: [`FLOOD_GROUP`] on every port).
pub fn ops(case: u32) -> Vec<Op> {
    let mut v = Vec::new();
    let mut add = |table, key, action, data, priority| {
        v.push(Op::Add {
            table,
            key,
            action,
            data,
            priority,
        })
    };
    for p in 0..PORTS as u64 {
        let vid = vid_of_vlan(vlan_of_port(p as u32)) as u64;
        let valid = |b| MatchParam::Exact(vec![b]);
        add(
            "CIngress.vlan_ingress",
            vec![ex(p, 2), valid(0)],
            "CIngress.add_vlan",
            vec![be(vid, 2)],
            None,
        );
        add(
            "CIngress.vlan_ingress",
            vec![ex(p, 2), valid(1)],
            "CIngress.use_vlan",
            vec![],
            None,
        );
    }
    for i in 0..HOSTS {
        add(
            "CIngress.mac_learning",
            vec![ex(host_mac(i), 6)],
            "CIngress.nop",
            vec![],
            None,
        );
    }
    let vidb = |h: u32| be(vid_of_vlan(host_vlan(h)) as u64, 2);
    if case >= 4 {
        for i in 0..HOSTS {
            let key = vec![
                ex(host_port(i) as u64, 2),
                MatchParam::Exact(vidb(i)),
                ex(host_mac(i), 6),
            ];
            add(
                "CIngress.source_guard",
                key,
                "CIngress.sg_permit",
                vec![],
                None,
            );
        }
        for p in 0..PORTS as u64 {
            let key = vec![ex(p, 2), tern(0xffff_ffff_ffff, 0xffff_ffff_ffff, 6)];
            add(
                "CIngress.storm_control",
                key,
                "CIngress.storm_count",
                vec![be(p, 1)],
                Some(1),
            );
        }
        for vl in 0..4 {
            let key = vec![ex(vid_of_vlan(vl) as u64, 2)];
            add(
                "CIngress.vrf",
                key,
                "CIngress.set_vrf",
                vec![be(vrf_of_vlan(vl) as u64, 1)],
                None,
            );
        }
    }
    for vl in 0..4 {
        let key = vec![ex(ROUTER_MAC, 6), ex(vid_of_vlan(vl) as u64, 2)];
        add("CIngress.routable", key, "CIngress.route", vec![], None);
    }
    if case >= 3 {
        for (i, (a, p)) in nat_bindings().into_iter().enumerate() {
            let (ta, tp) = nat_target(i as u32);
            let key = vec![ex(a as u64, 4), ex(p as u64, 2)];
            add(
                "CIngress.nat",
                key,
                "CIngress.snat",
                vec![be(ta as u64, 4), be(tp as u64, 2)],
                None,
            );
        }
    }
    let route_key = |host: u32, m: MatchParam| {
        if case >= 4 {
            vec![ex(vrf_of_vlan(host_vlan(host)) as u64, 1), m]
        } else {
            vec![m]
        }
    };
    let nhop = |host: u32| vec![be(ROUTER_MAC, 6), be(host_mac(host), 6), vidb(host)];
    for i in 0..SERVERS {
        add(
            "CIngress.routing",
            route_key(i, lpm(host_ip(i), 32)),
            "CIngress.set_nhop",
            nhop(i),
            None,
        );
    }
    for r in 0..PREFIXES {
        let g = gateway(r);
        add(
            "CIngress.routing",
            route_key(g, lpm(prefix(r), 24)),
            "CIngress.set_nhop",
            nhop(g),
            None,
        );
    }
    for i in 0..HOSTS {
        let key = vec![ex(host_mac(i), 6), MatchParam::Exact(vidb(i))];
        add(
            "CIngress.switching",
            key,
            "CIngress.forward",
            vec![be(host_port(i) as u64, 2)],
            None,
        );
    }
    if case >= 2 {
        // Denies first (BMv2: the smaller priority wins), then permits of the remote
        // prefixes; the two sets match disjoint flows.
        let any = |n| tern(0, 0, n);
        for d in 0..ACL_DENY {
            let key = vec![
                any(4),
                any(4),
                any(1),
                any(2),
                tern(6000 + d as u64, 0xffff, 2),
            ];
            add(
                "CIngress.acl",
                key,
                "CIngress.acl_deny",
                vec![],
                Some(d as i32 + 1),
            );
        }
        for r in 0..ACL_PERMIT {
            let key = vec![
                any(4),
                tern(prefix(r) as u64, 0xffff_ff00, 4),
                any(1),
                any(2),
                any(2),
            ];
            add(
                "CIngress.acl",
                key,
                "CIngress.acl_permit",
                vec![],
                Some((ACL_DENY + r) as i32 + 1),
            );
        }
    }
    for p in 0..PORTS as u64 {
        add(
            "CIngress.vlan_egress",
            vec![ex(p, 2)],
            "CIngress.strip_vlan",
            vec![],
            None,
        );
    }
    if case >= 4 {
        v.push(Op::SetDefault {
            table: "CIngress.source_guard",
            action: "CIngress.drop",
        });
    }
    v
}

/// A key or parameter value in the CLI's syntax: MAC for 6 bytes, dotted quad for 4,
/// decimal otherwise.
fn cli_value(b: &[u8]) -> String {
    match b.len() {
        6 => b
            .iter()
            .map(|x| format!("{x:02x}"))
            .collect::<Vec<_>>()
            .join(":"),
        4 => format!("{}.{}.{}.{}", b[0], b[1], b[2], b[3]),
        _ => b.iter().fold(0u64, |a, x| a << 8 | *x as u64).to_string(),
    }
}

fn cli_key(m: &MatchParam) -> String {
    match m {
        MatchParam::Exact(v) => cli_value(v),
        MatchParam::Lpm { key, prefix_len } => format!("{}/{prefix_len}", cli_value(key)),
        MatchParam::Ternary { key, mask } => format!("{}&&&{}", cli_value(key), cli_value(mask)),
        MatchParam::Valid(b) => (*b as u8).to_string(),
        MatchParam::Range { start, end } => format!("{}->{}", cli_value(start), cli_value(end)),
    }
}

/// The table contents of `case` as runtime-CLI commands (simple_switch_CLI syntax), the
/// same operations [`install`] applies.
pub fn commands(case: u32) -> String {
    let mut s = String::new();
    let w = &mut s;
    let _ = writeln!(
        w,
        "# B-Cache case{case} table contents (generated by `tern bcache gen case{case}`; the \
         traffic of `tern bench --traffic case{case}` matches them). {PORTS} access ports in 4 \
         VLANs, {HOSTS} hosts, {SERVERS} host routes, {PREFIXES} remote prefixes."
    );
    let _ = writeln!(w, "mc_mgrp_create {FLOOD_GROUP}");
    let ports: Vec<String> = (0..PORTS).map(|p| p.to_string()).collect();
    let _ = writeln!(w, "mc_node_create 0 {}", ports.join(" "));
    let _ = writeln!(w, "mc_node_associate {FLOOD_GROUP} 0");
    for op in ops(case) {
        match op {
            Op::Add {
                table,
                key,
                action,
                data,
                priority,
            } => {
                let k: Vec<String> = key.iter().map(cli_key).collect();
                let d: Vec<String> = data.iter().map(|b| cli_value(b)).collect();
                let short = action.rsplit('.').next().unwrap_or(action);
                let _ = write!(w, "table_add {table} {short} {} =>", k.join(" "));
                for x in d {
                    let _ = write!(w, " {x}");
                }
                if let Some(p) = priority {
                    let _ = write!(w, " {p}");
                }
                let _ = writeln!(w);
            }
            Op::SetDefault { table, action } => {
                let short = action.rsplit('.').next().unwrap_or(action);
                let _ = writeln!(w, "table_set_default {table} {short}");
            }
        }
    }
    s
}

/// Apply `case`'s contents to `rt` through the runtime API (the same operations as
/// [`commands`], without the CLI's parsing: ~20x faster in a debug build).
pub fn install(rt: &mut dyn Runtime, case: u32) -> Result<usize, String> {
    let g = rt
        .mc_mgrp_create(FLOOD_GROUP)
        .map_err(|e| format!("mc_mgrp_create: {e}"))?;
    let ports: Vec<u32> = (0..PORTS).collect();
    let n = rt
        .mc_node_create(0, &ports, &[])
        .map_err(|e| format!("mc_node_create: {e}"))?;
    rt.mc_node_associate(g, n)
        .map_err(|e| format!("mc_node_associate: {e}"))?;
    let ops = ops(case);
    for op in &ops {
        match op {
            Op::Add {
                table,
                key,
                action,
                data,
                priority,
            } => {
                rt.mt_add_entry(table, key, action, data, *priority)
                    .map_err(|e| format!("{table} {action} {key:?}: {e}"))?;
            }
            Op::SetDefault { table, action } => {
                rt.mt_set_default_action(table, action, &[])
                    .map_err(|e| format!("default of {table}: {e}"))?;
            }
        }
    }
    Ok(ops.len())
}

/// An untagged Ethernet/IPv4/(TCP|UDP) frame of `size` bytes (at least 54) for `f`, with a
/// valid IPv4 checksum (the L4 header carries ports, a TCP header's other fields are zero).
pub fn frame(f: &Flow, size: usize) -> Vec<u8> {
    let l4 = if f.proto == 6 { 20 } else { 8 };
    let mut b = vec![0u8; size.max(34 + l4)];
    b[0..6].copy_from_slice(&f.dst_mac.to_be_bytes()[2..]);
    b[6..12].copy_from_slice(&f.src_mac.to_be_bytes()[2..]);
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (b.len() - 14) as u16;
    let ipb = &mut b[14..34];
    ipb[0] = 0x45;
    ipb[2..4].copy_from_slice(&total.to_be_bytes());
    ipb[8] = 64;
    ipb[9] = f.proto;
    ipb[12..16].copy_from_slice(&f.src_ip.to_be_bytes());
    ipb[16..20].copy_from_slice(&f.dst_ip.to_be_bytes());
    let mut s: u32 = ipb
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ipb[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    b[34..36].copy_from_slice(&f.sport.to_be_bytes());
    b[36..38].copy_from_slice(&f.dport.to_be_bytes());
    if f.proto == 17 {
        b[38..40].copy_from_slice(&(total - 20).to_be_bytes());
    } else {
        b[46] = 0x50; // data offset 5
    }
    b
}

/// Zipf(`s`) ranks over `n` items by inverse CDF (`s` = 0: uniform).
pub struct Zipf {
    cdf: Vec<f64>,
    state: u64,
}

impl Zipf {
    pub fn new(n: u32, s: f64, seed: u64) -> Zipf {
        let mut cdf = Vec::with_capacity(n as usize);
        let mut acc = 0.0;
        for r in 1..=n.max(1) {
            acc += 1.0 / (r as f64).powf(s);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Zipf {
            cdf,
            state: seed | 1,
        }
    }
    /// The next rank (0-based; 0 is the most popular).
    pub fn next_rank(&mut self) -> u32 {
        self.state = mix(self.state);
        let u = (self.state >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf.partition_point(|&c| c < u).min(self.cdf.len() - 1) as u32
    }
}

/// The traffic of a case: `flows` distinct flows and a packet sequence (indices into the
/// flows) of `len` packets, Zipf(`skew`)-distributed (0: the flows in turn).
pub struct Traffic {
    pub flows: Vec<Flow>,
    pub frames: Vec<Vec<u8>>,
    pub sequence: Vec<u32>,
}

impl Traffic {
    pub fn new(flows: u32, skew: f64, len: usize, size: usize, seed: u64) -> Traffic {
        let fl: Vec<Flow> = (0..flows).map(flow).collect();
        let frames = fl.iter().map(|f| frame(f, size)).collect();
        let sequence = if skew <= 0.0 {
            (0..len)
                .map(|i| (i % flows.max(1) as usize) as u32)
                .collect()
        } else {
            let mut z = Zipf::new(flows, skew, seed);
            (0..len).map(|_| z.next_rank()).collect()
        };
        Traffic {
            flows: fl,
            frames,
            sequence,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_dataplane::{Switch, SwitchOptions};
    use tern_runtime::PacketPath;

    fn root() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    /// A case's switch with its committed table contents applied (every command succeeds).
    pub(crate) fn case_switch(case: u32, opts: SwitchOptions) -> Switch {
        let p = root().join(format!("p4/bcache/case{case}.p4"));
        let json = crate::cmd_bcache::load_json(&p).expect("compiles");
        let mut sw = Switch::from_json(&json, opts).expect("loads");
        let mut cli = tern_control::Cli::new(sw.program());
        for (n, line) in commands(case).lines().enumerate() {
            if line.starts_with('#') {
                continue;
            }
            let out = cli.execute(&mut sw, line);
            assert!(
                !cli.last_command_failed(),
                "case{case} line {}: {line}: {out}",
                n + 1
            );
        }
        sw
    }

    /// The runtime-API installation and the CLI commands give the same tables.
    #[test]
    fn install_equals_the_commands() {
        for case in 1..=4 {
            let a = case_switch(case, SwitchOptions::default());
            let p = root().join(format!("p4/bcache/case{case}.p4"));
            let json = crate::cmd_bcache::load_json(&p).expect("compiles");
            let mut b = Switch::from_json(&json, SwitchOptions::default()).expect("loads");
            let n = install(&mut b, case).expect("installs");
            assert!(n > 10_000, "case{case}: {n}");
            for pl in &a.program().pipelines {
                for t in &pl.tables {
                    let n = &t.name;
                    assert_eq!(
                        format!("{:?}", a.mt_get_entries(n)),
                        format!("{:?}", b.mt_get_entries(n)),
                        "case{case} {n}"
                    );
                    assert_eq!(
                        format!("{:?}", a.mt_get_default_entry(n)),
                        format!("{:?}", b.mt_get_default_entry(n)),
                        "case{case} default of {n}"
                    );
                }
            }
        }
    }

    /// The committed command files are the generator's output (they cannot drift from the
    /// traffic).
    #[test]
    fn committed_commands_match_the_generator() {
        for case in 1..=4 {
            let p = root().join(format!("p4/bcache/case{case}.txt"));
            let text = std::fs::read_to_string(&p).expect("read the command file");
            assert!(
                text == commands(case),
                "{} is stale: run `tern bcache gen case{case} -o {}`",
                p.display(),
                p.display()
            );
        }
    }

    /// Every case forwards each flow of the population where the model says: unicast to the
    /// destination's port (routed flows with the router MAC as source and TTL 63, bridged
    /// ones untouched, all untagged again on the way out), flooded, or dropped by the ACL
    /// (case2+) or the source guard (case4).
    #[test]
    fn cases_forward_the_population_as_modelled() {
        for case in 1..=4 {
            let mut sw = case_switch(case, SwitchOptions::default());
            let mut out = Vec::new();
            let mut kinds = std::collections::BTreeMap::new();
            for k in 0..3000 {
                let f = flow(k);
                let fr = frame(&f, 64);
                sw.process_packet(f.port, &fr, &mut out);
                sw.take_digests();
                let got: Vec<u32> = out.iter().map(|o| o.port).collect();
                let want = expected_port(&f, case);
                match want {
                    None => assert!(got.is_empty(), "case{case} flow {k} {f:?}: {got:?}"),
                    Some(u32::MAX) => assert_eq!(got.len(), PORTS as usize, "case{case} {f:?}"),
                    Some(p) => {
                        assert_eq!(got, vec![p], "case{case} flow {k} {f:?}");
                        let o = &out[0].data;
                        assert_eq!(o.len(), fr.len(), "case{case}: the tag is stripped");
                        assert_eq!(&o[12..14], &[8, 0]);
                        let routed = matches!(f.kind, Kind::Remote | Kind::Server | Kind::Denied);
                        assert_eq!(o[22], if routed { 63 } else { 64 }, "{f:?}");
                        if routed {
                            assert_eq!(&o[6..12], &ROUTER_MAC.to_be_bytes()[2..]);
                        }
                    }
                }
                *kinds.entry(f.kind.name()).or_insert(0u32) += 1;
                out.clear();
            }
            assert!(kinds.len() == Kind::ALL.len(), "{kinds:?}");
        }
    }

    /// NAT rewrites the bound flows' source in case3 and case4 and no other case.
    #[test]
    fn nat_rewrites_bound_flows() {
        let b = nat_bindings();
        assert!(b.len() >= 3000, "{}", b.len());
        let k = (0..)
            .find(|&k| flow(k).kind == Kind::Remote)
            .expect("a remote flow");
        let f = flow(k);
        let (ta, tp) = nat_target(0);
        assert_eq!((f.src_ip, f.sport), b[0]);
        for case in 1..=4 {
            let mut sw = case_switch(case, SwitchOptions::default());
            let mut out = Vec::new();
            sw.process_packet(f.port, &frame(&f, 64), &mut out);
            assert_eq!(out.len(), 1, "case{case}");
            let o = &out[0].data;
            let src = u32::from_be_bytes(o[26..30].try_into().unwrap());
            let sport = u16::from_be_bytes(o[34..36].try_into().unwrap());
            if case >= 3 {
                assert_eq!((src, sport), (ta, tp), "case{case}");
            } else {
                assert_eq!((src, sport), (f.src_ip, f.sport), "case{case}");
            }
        }
    }

    /// With a cache larger than the population, each flow is one behaviour: Zipf traffic
    /// inserts at most one entry per distinct flow, whatever the order. (A recycled packet
    /// keeps the previous packet's bytes in the slots of headers invalid on arrival, as
    /// BMv2 does; `add_vlan` writes the VLAN header, so the cache masks those stale bytes
    /// out of its key, `bcache::analysis::StaleFacts`.)
    #[test]
    fn one_behaviour_per_flow() {
        for case in [1, 4] {
            let mut sw = case_switch(
                case,
                SwitchOptions {
                    bcache: Some(tern_dataplane::bcache::Config::default()),
                    ..SwitchOptions::default()
                },
            );
            let t = Traffic::new(300, 1.0, 3000, 64, 3);
            let mut out = Vec::new();
            let mut seen = BTreeSet::new();
            for &r in &t.sequence {
                let f = &t.flows[r as usize];
                sw.process_packet(f.port, &t.frames[r as usize], &mut out);
                out.clear();
                sw.take_digests();
                seen.insert(r);
                let st = sw.bcache_stats().unwrap();
                assert!(
                    st.inserts <= seen.len() as u64,
                    "case{case} after flow {r} ({f:?}): {st}"
                );
            }
        }
    }

    #[test]
    fn zipf_is_skewed_and_deterministic() {
        let mut a = Zipf::new(1000, 1.0, 7);
        let mut b = Zipf::new(1000, 1.0, 7);
        let v: Vec<u32> = (0..20_000).map(|_| a.next_rank()).collect();
        assert_eq!(v, (0..20_000).map(|_| b.next_rank()).collect::<Vec<_>>());
        let top = v.iter().filter(|&&r| r == 0).count() as f64 / v.len() as f64;
        // H(1000) ≈ 7.49: rank 0 takes ≈ 13 % of the packets.
        assert!((0.11..0.16).contains(&top), "{top}");
        assert!(v.iter().all(|&r| r < 1000));
    }
}
