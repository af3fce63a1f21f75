//! The cost of a slice, for instruction counting (`valgrind --tool=callgrind`), never for
//! wall-clock timing: runs N IPv4 packets through a router (`basic.p4` JSON, one /32 route)
//! either natively (a bare `Switch`) or inside a `VirtSwitch` (catch-all classifier rule,
//! 1:1 port map), or a firewall → router chain over a link versus the two switches applied
//! one after the other. `native_l2` / `slice_l2` do the same as native / slice with the L2
//! switch (`p4/virt/l2_switch.p4`, the source MAC known, the destination forwarded), the
//! cheapest of HyPer4's functions, where the slice's fixed cost weighs most.
//!
//! `ex1b` / `ex1c` run HyPer4's Example 1 phases B (L2 – FW – L2, three devices) and C (L2 –
//! [ARP → FW → R] – L2, five devices) from `p4/virt/scenarios/ex1/virt.json` with the
//! snapshot active, against `ex1b_native` / `ex1c_native`: the same programs and command files
//! as bare switches run in turn (in batches, each hop runs the previous hop's frames as one
//! `process_batch`, as `tern virt bench --timed` does). The packet is the bench's: TCP h1 → h3
//! port 5001.
//!
//! `slice_cost MODE N ROUTER [FIREWALL [L2]]`, MODE = native | slice | chain | pair | native_l2 |
//! slice_l2 | ex1b | ex1b_native | ex1c | ex1c_native | fn | fn_native; each program a `.p4` (compiled at
//! start-up: the same in every run, so it cancels out of the delta) or BMv2 JSON; `BATCH=B` in
//! the environment sends the packets in batches of B (every mode). The ex1 modes read the
//! scenario folder `p4/virt/scenarios` (or `SCENARIOS=DIR`) and ignore the program arguments.
//!
//! `fn` / `fn_native` run one of HyPer4's four functions exactly as `tern virt bench --timed`
//! does (`FUNC=l2|fw|router|arp|arpfwd`, default `l2`): natively, the program with its
//! scenario command file as a bare switch; sliced, `functions/virt.json` (four devices, each
//! on its own physical ports, virtual ports renumbered) with the bench's packet on the
//! device's physical port. The program arguments are ignored.
//!
//! `NEXT=1` in the environment runs the sliced side of `slice` and `fn` one packet per call
//! with `VirtSwitch::process_next` (the previous call's frame given back in the call) instead
//! of `process_batch` followed by `recycle_outputs` (`BATCH` must be 1); `EACH=1` runs them
//! as one `VirtSwitch::process_each` session (one panic boundary for the whole loop).
//!
//! The chain modes (`chain`, `ex1b`, `ex1c`) take `NEXT=1` / `EACH=1` too (issue 17,
//! h-chain5): their sliced side one packet per call, against `pair` / `ex1b_native` /
//! `ex1c_native` with `BATCH=1`, which run the bare switches one packet per call as
//! `tern virt bench --timed` does (each hop `process_packet` on the previous hop's frame,
//! its own previous frame given back first).
//!
//! `BURST=1` runs the batches of `fn`, `fn_native` and the ex1 modes through the burst API:
//! natively `Switch::process_burst` (each hop of a chain running the previous hop's burst),
//! sliced `VirtSwitch::process_burst` (`BATCH` > 1).

use tern_dataplane::{BurstOut, Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};
use tern_virt::config::Config;
use tern_virt::{Caller, DeviceSpec, Quotas, Rule, Target, VirtSwitch};

/// HyPer4's Example 1 hops as bare switches: program (relative to `p4/virt`), command file
/// (relative to the scenario folder), ingress port.
const EX1B: [(&str, &str, u32); 3] = [
    ("l2_switch.p4", "ex1/s1_l2.txt", 1),
    ("firewall_l4.p4", "ex1/s2_fw_b.txt", 1),
    ("l2_switch.p4", "ex1/s3_l2.txt", 3),
];
const EX1C: [(&str, &str, u32); 5] = [
    ("l2_switch.p4", "ex1/s1_l2.txt", 1),
    ("arp_proxy.p4", "ex1/s2_arp.txt", 1),
    ("firewall_l4.p4", "ex1/s2_fw_c.txt", 1),
    ("router.p4", "ex1/s2_router.txt", 1),
    ("l2_switch.p4", "ex1/s3_l2.txt", 3),
];

/// The measured part: `calls` calls of `body` (one batch each). Out of line so that
/// `bench/virt_callgrind.sh` counts only it (`--toggle-collect`), not the set-up, whose cost
/// moves between runs with hash seeds.
/// Generic, not `dyn`: the body is inlined into the loop, so that the bare switches run one
/// packet per call pay no indirect call per packet, as the bench's native loop does not
/// (with `dyn` they paid 26 instructions a packet more; `bench/RESULTS.md`).
#[inline(never)]
fn measured(calls: usize, mut body: impl FnMut()) {
    for _ in 0..calls {
        body();
    }
}

fn fail(msg: String) -> ! {
    eprintln!("{msg}");
    std::process::exit(2)
}

/// A bare switch loaded with its program and command file.
fn native_hop(dir: &std::path::Path, program: &str, commands: &str) -> Switch {
    let p4 = dir.join("..").join(program);
    let json = tern_virt::config::load_program(&p4).unwrap_or_else(|e| fail(e));
    let mut sw = Switch::from_json(&json, SwitchOptions::default())
        .unwrap_or_else(|e| fail(format!("{}: {e}", p4.display())));
    let cmds = dir.join(commands);
    let text =
        std::fs::read_to_string(&cmds).unwrap_or_else(|e| fail(format!("{}: {e}", cmds.display())));
    let program = sw.program().clone();
    let mut cli = tern_control::Cli::new(&program);
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let r = cli.execute(&mut sw, line);
        if cli.last_command_failed() {
            fail(format!("{}: '{line}' failed: {r}", cmds.display()));
        }
    }
    sw
}

/// Ethernet h1 → 00:00:00:00:00:03 (Ex. 1 B) or the router's MAC (Ex. 1 C), IPv4 10.0.0.1 →
/// `dip`, TCP 1234 → 5001 with 64 bytes of data (the bench's packet).
fn ex1_packet(dst: [u8; 6], dip: [u8; 4]) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&[0, 0, 0, 0, 0, 1, 8, 0]);
    let mut ip = vec![0x45, 0, 0, 104, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1];
    ip.extend_from_slice(&dip);
    let c = ip_checksum(&ip);
    ip[10] = (c >> 8) as u8;
    ip[11] = c as u8;
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[
        0x04, 0xd2, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0,
    ]);
    f.extend_from_slice(&[0x5a; 64]);
    f
}

/// `tern virt bench --timed`'s single-function rows: (program, command file, native ingress,
/// physical ingress of the sliced device).
fn function_case(name: &str) -> (&'static str, &'static str, u32, u32, Vec<u8>) {
    let h1 = [0, 0, 0, 0, 0, 1];
    let arp = |tpa: [u8; 4]| {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&h1);
        f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
        f.extend_from_slice(&h1);
        f.extend_from_slice(&[10, 0, 0, 1]);
        f.extend_from_slice(&[0; 6]);
        f.extend_from_slice(&tpa);
        f
    };
    match name {
        "l2" => {
            // ICMP echo h1 -> h2 (known MACs).
            let mut f = ex1_packet([0, 0, 0, 0, 0, 2], [10, 0, 0, 2]);
            f.truncate(14 + 20);
            f[14 + 9] = 1;
            f[14 + 3] = 28;
            f[14 + 10] = 0;
            f[14 + 11] = 0;
            let c = ip_checksum(&f[14..34]);
            f[14 + 10] = (c >> 8) as u8;
            f[14 + 11] = c as u8;
            f.extend_from_slice(&[8, 0, 0xf7, 0xfe, 0, 1, 0, 0]);
            ("l2_switch.p4", "ex1/s1_l2.txt", 1, 1, f)
        }
        "fw" => (
            "firewall_l4.p4",
            "ex1/s2_fw_b.txt",
            1,
            4,
            ex1_packet([0, 0, 0, 0, 0, 3], [10, 0, 0, 3]),
        ),
        "router" => (
            "router.p4",
            "ex1/s2_router.txt",
            1,
            6,
            ex1_packet([0, 0, 0, 0, 0x0a, 0x0a], [10, 0, 1, 3]),
        ),
        "arp" => (
            "arp_proxy.p4",
            "functions/arp_proxy.txt",
            1,
            8,
            arp([10, 0, 0, 2]),
        ),
        "arpfwd" => (
            "arp_proxy.p4",
            "functions/arp_proxy.txt",
            1,
            8,
            arp([10, 0, 0, 9]),
        ),
        f => fail(format!("unknown FUNC {f} (l2, fw, router, arp, arpfwd)")),
    }
}

/// RFC 1071 checksum of an IPv4 header with its checksum field zero (the engine's).
fn ip_checksum(h: &[u8]) -> u16 {
    tern_dataplane::hash::csum16(h) as u16
}

/// One of the four functions (see the module documentation), natively or sliced. Returns the
/// frames sent.
fn function(native: bool, n: usize, bsize: usize) -> usize {
    let dir = std::path::PathBuf::from(
        std::env::var("SCENARIOS").unwrap_or_else(|_| "p4/virt/scenarios".to_string()),
    );
    let func = std::env::var("FUNC").unwrap_or_else(|_| "l2".to_string());
    let (program, commands, ingress, phys_in, pkt) = function_case(&func);
    let mut out: Vec<OutputPacket> = Vec::with_capacity(64);
    let mut sent = 0;
    let mut bout = BurstOut::new();
    if native {
        let mut sw = native_hop(&dir, program, commands);
        let batch: Vec<(u32, &[u8])> = vec![(ingress, pkt.as_slice()); bsize];
        if burst() && bsize > 1 {
            measured(n / bsize, &mut || {
                sw.process_burst(&batch, &mut bout);
                sent += bout.len();
                bout.clear();
            });
            return sent;
        }
        measured(n / bsize, &mut || {
            if bsize == 1 {
                // One packet per call as the bench's native side runs it.
                sw.process_packet(ingress, &pkt, &mut out);
            } else {
                sw.process_batch(&batch, &mut out);
            }
            sent += out.len();
            sw.recycle_outputs(&mut out);
        });
    } else {
        let path = dir.join("functions/virt.json");
        let cfg = Config::load(&path).unwrap_or_else(|e| fail(e.to_string()));
        let (mut vs, _) = cfg
            .build(&dir.join("functions"))
            .unwrap_or_else(|e| fail(e.to_string()));
        let batch: Vec<(u32, &[u8])> = vec![(phys_in, pkt.as_slice()); bsize];
        if next() {
            assert_eq!(bsize, 1, "NEXT=1 runs one packet per call");
            measured(n, &mut || {
                vs.process_next(phys_in, &pkt, &mut out);
                sent += out.len();
            });
            vs.recycle_outputs(&mut out);
            return sent;
        }
        if each() {
            assert_eq!(bsize, 1, "EACH=1 runs one packet per call");
            measured(1, &mut || {
                vs.process_each(
                    std::iter::repeat_n((phys_in, pkt.as_slice()), n),
                    &mut out,
                    |o| sent += o.len(),
                );
            });
            vs.recycle_outputs(&mut out);
            return sent;
        }
        if burst() && bsize > 1 {
            measured(n / bsize, &mut || {
                vs.process_burst(&batch, &mut bout);
                sent += bout.len();
                bout.clear();
            });
            return sent;
        }
        measured(n / bsize, &mut || {
            vs.process_batch(&batch, &mut out);
            sent += out.len();
            vs.recycle_outputs(&mut out);
        });
    }
    sent
}

/// `NEXT=1` / `EACH=1`: `n` packets one per call through `vs` (`process_next`, or one
/// `process_each` session), the frames counted in `sent`. False (nothing run) otherwise.
fn one_per_call(
    vs: &mut VirtSwitch,
    port: u32,
    pkt: &[u8],
    n: usize,
    bsize: usize,
    out: &mut Vec<OutputPacket>,
    sent: &mut usize,
) -> bool {
    if next() {
        assert_eq!(bsize, 1, "NEXT=1 runs one packet per call");
        measured(n, &mut || {
            vs.process_next(port, pkt, out);
            *sent += out.len();
        });
    } else if each() {
        assert_eq!(bsize, 1, "EACH=1 runs one packet per call");
        measured(1, &mut || {
            vs.process_each(std::iter::repeat_n((port, pkt), n), out, |o| {
                *sent += o.len()
            });
        });
    } else {
        return false;
    }
    vs.recycle_outputs(out);
    true
}

/// `NEXT=1`: the sliced side one packet per call through `VirtSwitch::process_next`.
fn next() -> bool {
    std::env::var("NEXT").is_ok_and(|v| v == "1")
}

/// `EACH=1`: the sliced side one packet per call in one `VirtSwitch::process_each` session.
fn each() -> bool {
    std::env::var("EACH").is_ok_and(|v| v == "1")
}

/// `BURST=1`: batches through the burst API on both sides.
fn burst() -> bool {
    std::env::var("BURST").is_ok_and(|v| v == "1")
}

/// `v` emptied, its allocation kept for references of another lifetime.
fn reuse<'b>(mut v: Vec<(u32, &[u8])>) -> Vec<(u32, &'b [u8])> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// Example 1 phase B or C: `native` runs the hops as bare switches in turn (each hop's frames
/// as one batch into the next), else the scenario's sliced tern. Returns the frames sent.
fn ex1(phase: &str, native: bool, n: usize, bsize: usize) -> usize {
    let dir = std::path::PathBuf::from(
        std::env::var("SCENARIOS").unwrap_or_else(|_| "p4/virt/scenarios".to_string()),
    );
    let (hops, pkt): (&[(&str, &str, u32)], Vec<u8>) = if phase == "b" {
        (&EX1B, ex1_packet([0, 0, 0, 0, 0, 3], [10, 0, 0, 3]))
    } else {
        (&EX1C, ex1_packet([0, 0, 0, 0, 0x0a, 0x0a], [10, 0, 1, 3]))
    };
    let batch: Vec<(u32, &[u8])> = vec![(1, pkt.as_slice()); bsize];
    let mut sent = 0;
    if native && burst() && bsize > 1 {
        let mut sws: Vec<Switch> = hops.iter().map(|h| native_hop(&dir, h.0, h.1)).collect();
        let mut outs: Vec<BurstOut> = sws.iter().map(|_| BurstOut::new()).collect();
        let mut spare: Vec<(u32, &[u8])> = Vec::with_capacity(bsize);
        measured(n / bsize, &mut || {
            for i in 0..sws.len() {
                let (before, rest) = outs.split_at_mut(i);
                let out = &mut rest[0];
                out.clear();
                if i == 0 {
                    sws[i].process_burst(&batch, out);
                } else {
                    let mut refs = reuse(std::mem::take(&mut spare));
                    refs.extend(before[i - 1].iter().map(|(_, _, d)| (hops[i].2, d)));
                    sws[i].process_burst(&refs, out);
                    spare = reuse(refs);
                }
            }
            sent += outs.last().map_or(0, BurstOut::len);
        });
    } else if native && bsize == 1 {
        // One packet per call as `tern virt bench --timed` runs the native chain: each hop
        // gets its previous frame back and runs the previous hop's frame.
        let mut sws: Vec<Switch> = hops.iter().map(|h| native_hop(&dir, h.0, h.1)).collect();
        let mut outs: Vec<Vec<OutputPacket>> = sws.iter().map(|_| Vec::new()).collect();
        measured(n, &mut || {
            for i in 0..sws.len() {
                let (before, rest) = outs.split_at_mut(i);
                let out = &mut rest[0];
                sws[i].recycle_outputs(out);
                let input: &[u8] = if i == 0 { &pkt } else { &before[i - 1][0].data };
                sws[i].process_packet(hops[i].2, input, out);
            }
            sent += outs.last().map_or(0, Vec::len);
        });
    } else if native {
        let mut sws: Vec<Switch> = hops.iter().map(|h| native_hop(&dir, h.0, h.1)).collect();
        let mut outs: Vec<Vec<OutputPacket>> = sws.iter().map(|_| Vec::new()).collect();
        let mut spare: Vec<(u32, &[u8])> = Vec::with_capacity(bsize);
        measured(n / bsize, &mut || {
            for i in 0..sws.len() {
                let (before, rest) = outs.split_at_mut(i);
                let out = &mut rest[0];
                sws[i].recycle_outputs(out);
                if i == 0 {
                    sws[i].process_batch(&batch, out);
                } else {
                    let mut refs = reuse(std::mem::take(&mut spare));
                    refs.extend(before[i - 1].iter().map(|o| (hops[i].2, o.data.as_slice())));
                    sws[i].process_batch(&refs, out);
                    spare = reuse(refs);
                }
            }
            sent += outs.last().map_or(0, Vec::len);
        });
    } else {
        let path = dir.join("ex1/virt.json");
        let cfg = Config::load(&path).unwrap_or_else(|e| fail(e.to_string()));
        let (mut vs, _) = cfg
            .build(&dir.join("ex1"))
            .unwrap_or_else(|e| fail(e.to_string()));
        vs.activate_snapshot(&phase.to_uppercase())
            .unwrap_or_else(|e| fail(e.to_string()));
        let mut out: Vec<OutputPacket> = Vec::with_capacity(64);
        let mut bout = BurstOut::new();
        if one_per_call(&mut vs, 1, &pkt, n, bsize, &mut out, &mut sent) {
            return sent;
        }
        // Read once: `std::env::var` inside the loop cost ≈ 450 instructions per call.
        let bursts = burst() && bsize > 1;
        measured(n / bsize, &mut || {
            if bursts {
                vs.process_burst(&batch, &mut bout);
                sent += bout.len();
                bout.clear();
                return;
            }
            vs.process_batch(&batch, &mut out);
            sent += out.len();
            vs.recycle_outputs(&mut out);
        });
    }
    sent
}

fn route(rt: &mut dyn Runtime) {
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
    .expect("route");
}

fn fw(rt: &mut dyn Runtime) {
    rt.mt_add_entry(
        "FwIngress.fwd",
        &[MatchParam::Exact(vec![0, 1])],
        "FwIngress.set_egress",
        &[vec![0, 2]],
        None,
    )
    .expect("fwd");
}

fn l2(rt: &mut dyn Runtime) {
    rt.mt_add_entry(
        "L2Ingress.smac",
        &[MatchParam::Exact(vec![0, 0, 0, 0, 1, 1])],
        "L2Ingress.known",
        &[],
        None,
    )
    .expect("smac");
    rt.mt_add_entry(
        "L2Ingress.dmac",
        &[MatchParam::Exact(vec![0, 0, 0, 0, 1, 0])],
        "L2Ingress.forward",
        &[vec![0, 2]],
        None,
    )
    .expect("dmac");
}

fn spec(json: &str) -> DeviceSpec {
    DeviceSpec {
        json: json.to_string(),
        owner: None,
        quotas: Quotas::default(),
    }
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() < 4 {
        eprintln!(
            "usage: slice_cost native|slice|chain|pair|native_l2|slice_l2 N ROUTER \
             [FIREWALL [L2]] (.p4 or BMv2 JSON)"
        );
        std::process::exit(2);
    }
    let n: usize = a[2].parse().expect("N");
    let bsize: usize = std::env::var("BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(1)
        .max(1);
    if a[1] == "fn" || a[1] == "fn_native" {
        let sent = function(a[1] == "fn_native", n, bsize);
        assert_eq!(sent, n / bsize * bsize, "every packet must be forwarded");
        println!("{sent} packets forwarded ({})", a[1]);
        return;
    }
    let load = |p: &str| {
        tern_virt::config::load_program(std::path::Path::new(p)).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(2)
        })
    };
    let l2_mode = a[1].ends_with("_l2");
    // The L2 modes run the L2 switch where the others run the router.
    let (router, setup): (String, fn(&mut dyn Runtime)) = if l2_mode {
        (load(a.get(5).expect("L2 program")), l2)
    } else {
        (load(&a[3]), route)
    };
    let firewall = a.get(4).map(|p| load(p));
    let mut pkt = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    pkt.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ]);
    pkt.extend_from_slice(&[0x5a; 16]);
    let mut out: Vec<OutputPacket> = Vec::with_capacity(16);
    let mut sent = 0usize;
    let batch: Vec<(u32, &[u8])> = vec![(1, pkt.as_slice()); bsize];
    let rule = Rule {
        priority: 0,
        port: None,
        vlan: None,
        field: None,
        device: 1,
        vport: None,
    };
    if let Some(phase) = a[1].strip_prefix("ex1") {
        let (phase, native) = match phase.strip_suffix("_native") {
            Some(p) => (p, true),
            None => (phase, false),
        };
        if phase != "b" && phase != "c" {
            fail(format!("unknown mode {}", a[1]));
        }
        let sent = ex1(phase, native, n, bsize);
        assert_eq!(sent, n / bsize * bsize, "every packet must be forwarded");
        println!("{sent} packets forwarded ({})", a[1]);
        return;
    }
    match a[1].trim_end_matches("_l2") {
        "native" => {
            let mut sw = Switch::from_json(&router, SwitchOptions::default()).unwrap();
            setup(&mut sw);
            measured(n / bsize, &mut || {
                sw.process_batch(&batch, &mut out);
                sent += out.len();
                sw.recycle_outputs(&mut out);
            });
        }
        "slice" => {
            let mut vs = VirtSwitch::new();
            vs.add_device(1, spec(&router)).unwrap();
            setup(&mut vs.runtime(Caller::Operator, 1).unwrap());
            vs.add_rule(rule).unwrap();
            for p in 0..4 {
                vs.map_port(1, p, Target::Phys(p)).unwrap();
            }
            if next() {
                assert_eq!(bsize, 1, "NEXT=1 runs one packet per call");
                let (port, pkt) = batch[0];
                measured(n, &mut || {
                    vs.process_next(port, pkt, &mut out);
                    sent += out.len();
                });
                vs.recycle_outputs(&mut out);
            } else if each() {
                assert_eq!(bsize, 1, "EACH=1 runs one packet per call");
                let (port, pkt) = batch[0];
                measured(1, &mut || {
                    vs.process_each(std::iter::repeat_n((port, pkt), n), &mut out, |o| {
                        sent += o.len()
                    });
                });
                vs.recycle_outputs(&mut out);
            } else {
                measured(n / bsize, &mut || {
                    vs.process_batch(&batch, &mut out);
                    sent += out.len();
                    vs.recycle_outputs(&mut out);
                });
            }
        }
        "pair" => {
            let f = firewall.expect("FIREWALL.json");
            let mut a_sw = Switch::from_json(&f, SwitchOptions::default()).unwrap();
            fw(&mut a_sw);
            let mut b_sw = Switch::from_json(&router, SwitchOptions::default()).unwrap();
            route(&mut b_sw);
            let mut mid: Vec<OutputPacket> = Vec::with_capacity(64);
            let mut spare: Vec<(u32, &[u8])> = Vec::with_capacity(bsize);
            measured(n / bsize, &mut || {
                if bsize == 1 {
                    // One packet per call: as before batches existed here.
                    a_sw.process_packet(1, &pkt, &mut mid);
                    for m in &mid {
                        b_sw.process_packet(1, &m.data, &mut out);
                    }
                    a_sw.recycle_outputs(&mut mid);
                    sent += out.len();
                    b_sw.recycle_outputs(&mut out);
                    return;
                }
                a_sw.process_batch(&batch, &mut mid);
                let mut refs = reuse(std::mem::take(&mut spare));
                refs.extend(mid.iter().map(|m| (1, m.data.as_slice())));
                b_sw.process_batch(&refs, &mut out);
                spare = reuse(refs);
                a_sw.recycle_outputs(&mut mid);
                sent += out.len();
                b_sw.recycle_outputs(&mut out);
            });
        }
        "chain" => {
            let f = firewall.expect("FIREWALL.json");
            let mut vs = VirtSwitch::new();
            vs.add_device(1, spec(&f)).unwrap();
            vs.add_device(2, spec(&router)).unwrap();
            fw(&mut vs.runtime(Caller::Operator, 1).unwrap());
            route(&mut vs.runtime(Caller::Operator, 2).unwrap());
            vs.add_rule(rule).unwrap();
            vs.map_port(
                1,
                2,
                Target::Link {
                    device: 2,
                    vport: 1,
                },
            )
            .unwrap();
            vs.map_port(2, 2, Target::Phys(2)).unwrap();
            let (port, p) = batch[0];
            if one_per_call(&mut vs, port, p, n, bsize, &mut out, &mut sent) {
                assert_eq!(sent, n, "every packet must be forwarded");
                println!("{sent} packets forwarded ({})", a[1]);
                return;
            }
            measured(n / bsize, &mut || {
                vs.process_batch(&batch, &mut out);
                sent += out.len();
                vs.recycle_outputs(&mut out);
            });
        }
        m => {
            eprintln!("unknown mode {m}");
            std::process::exit(2);
        }
    }
    assert_eq!(sent, n / bsize * bsize, "every packet must be forwarded");
    println!("{} packets forwarded ({})", sent, a[1]);
}
