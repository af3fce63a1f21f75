//! The cost of a slice, for instruction counting (`valgrind --tool=callgrind`), never for
//! wall-clock timing: runs N IPv4 packets through a router (`basic.p4` JSON, one /32 route)
//! either natively (a bare `Switch`) or inside a `VirtSwitch` (catch-all classifier rule,
//! 1:1 port map), or a firewall → router chain over a link versus the two switches applied
//! one after the other. `native_l2` / `slice_l2` do the same as native / slice with the L2
//! switch (`p4/virt/l2_switch.p4`, the source MAC known, the destination forwarded), the
//! cheapest of HyPer4's functions, where the slice's fixed cost weighs most.
//!
//! `slice_cost MODE N ROUTER [FIREWALL [L2]]`, MODE = native | slice | chain | pair | native_l2 |
//! slice_l2; each program a `.p4` (compiled at start-up: the same in every run, so it cancels
//! out of the delta) or BMv2 JSON; `BATCH=B` in the environment sends the packets in batches
//! of B (native and slice, either program).

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Rule, Target, VirtSwitch};

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
    let bsize: usize = std::env::var("BATCH")
        .ok()
        .and_then(|b| b.parse().ok())
        .unwrap_or(1)
        .max(1);
    let batch: Vec<(u32, &[u8])> = vec![(1, pkt.as_slice()); bsize];
    let rule = Rule {
        priority: 0,
        port: None,
        vlan: None,
        field: None,
        device: 1,
        vport: None,
    };
    match a[1].trim_end_matches("_l2") {
        "native" => {
            let mut sw = Switch::from_json(&router, SwitchOptions::default()).unwrap();
            setup(&mut sw);
            for _ in 0..n / bsize {
                sw.process_batch(&batch, &mut out);
                sent += out.len();
                sw.recycle_outputs(&mut out);
            }
        }
        "slice" => {
            let mut vs = VirtSwitch::new();
            vs.add_device(1, spec(&router)).unwrap();
            setup(&mut vs.runtime(Caller::Operator, 1).unwrap());
            vs.add_rule(rule).unwrap();
            for p in 0..4 {
                vs.map_port(1, p, Target::Phys(p)).unwrap();
            }
            for _ in 0..n / bsize {
                vs.process_batch(&batch, &mut out);
                sent += out.len();
                vs.recycle_outputs(&mut out);
            }
        }
        "pair" => {
            let f = firewall.expect("FIREWALL.json");
            let mut a_sw = Switch::from_json(&f, SwitchOptions::default()).unwrap();
            fw(&mut a_sw);
            let mut b_sw = Switch::from_json(&router, SwitchOptions::default()).unwrap();
            route(&mut b_sw);
            let mut mid: Vec<OutputPacket> = Vec::with_capacity(16);
            for _ in 0..n {
                a_sw.process_packet(1, &pkt, &mut mid);
                for m in &mid {
                    b_sw.process_packet(1, &m.data, &mut out);
                }
                a_sw.recycle_outputs(&mut mid);
                sent += out.len();
                b_sw.recycle_outputs(&mut out);
            }
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
            for _ in 0..n {
                vs.process_batch(&[(1, &pkt)], &mut out);
                sent += out.len();
                vs.recycle_outputs(&mut out);
            }
        }
        m => {
            eprintln!("unknown mode {m}");
            std::process::exit(2);
        }
    }
    assert_eq!(sent, n, "every packet must be forwarded");
    println!("{} packets forwarded ({})", sent, a[1]);
}
