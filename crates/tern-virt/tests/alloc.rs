//! The steady-state packet path of a `VirtSwitch` allocates nothing: a firewall → router
//! chain over a link, outputs given back with `recycle_outputs`, counted by a global
//! allocator that counts the test thread's allocations only.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Rule, Target, VirtSwitch};

struct Counting;

thread_local! {
    static COUNT: Cell<Option<u64>> = const { Cell::new(None) };
}

// SAFETY: every call is passed to the system allocator unchanged; the counter is a
// thread-local `Cell` with a const initializer, which never allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|n| n + 1)));
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get().map(|x| x + 1)));
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

fn compile(rel: &str) -> String {
    tern_p4::compile_file(
        std::path::Path::new(&format!("{ROOT}{rel}")),
        &tern_p4::Options::default(),
    )
    .unwrap()
    .json
}

#[test]
fn steady_state_chain_allocates_nothing_per_packet() {
    let spec = |json: String| DeviceSpec {
        json,
        owner: None,
        quotas: Quotas::default(),
    };
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(compile("p4/virt/firewall.p4")))
        .unwrap();
    vs.add_device(2, spec(compile("p4/tutorials/basic.p4")))
        .unwrap();
    let mut fw = vs.runtime(Caller::Operator, 1).unwrap();
    fw.mt_add_entry(
        "FwIngress.fwd",
        &[MatchParam::Exact(vec![0, 1])],
        "FwIngress.set_egress",
        &[vec![0, 2]],
        None,
    )
    .unwrap();
    let mut rt = vs.runtime(Caller::Operator, 2).unwrap();
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
    vs.add_rule(Rule {
        priority: 0,
        port: Some(1),
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
    vs.map_port(2, 2, Target::Phys(2)).unwrap();

    let mut pkt = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    pkt.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ]);
    pkt.extend_from_slice(&[0x5a; 16]);
    let batch = [(1u32, pkt.as_slice()); 8];
    let mut out: Vec<OutputPacket> = Vec::with_capacity(64);
    let run = |vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>| {
        vs.process_batch(&batch, out);
        assert_eq!(out.len(), 8);
        assert!(out.iter().all(|o| o.port == 2));
        vs.recycle_outputs(out);
    };
    for _ in 0..50 {
        run(&mut vs, &mut out);
    }
    COUNT.with(|c| c.set(Some(0)));
    for _ in 0..200 {
        run(&mut vs, &mut out);
    }
    let n = COUNT.with(|c| c.replace(None)).unwrap();
    assert_eq!(
        n, 0,
        "allocations in 1600 packets through a two-device chain"
    );
    let s = vs.device_stats(Caller::Operator, 2).unwrap();
    assert_eq!(s.to_phys, 2000);

    // Batches of 40: each hop runs in two passes (32 + 8), the frames cross the link as one
    // hop of 40; still nothing allocated once warm.
    let big = [(1u32, pkt.as_slice()); 40];
    let run = |vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>| {
        vs.process_batch(&big, out);
        assert_eq!(out.len(), 40);
        vs.recycle_outputs(out);
    };
    for _ in 0..20 {
        run(&mut vs, &mut out);
    }
    COUNT.with(|c| c.set(Some(0)));
    for _ in 0..100 {
        run(&mut vs, &mut out);
    }
    let n = COUNT.with(|c| c.replace(None)).unwrap();
    assert_eq!(n, 0, "allocations in 4000 packets in batches of 40");

    // Batches for two devices (port 3 straight into the router): grouped per device, then
    // the link's hop.
    vs.add_rule(Rule {
        priority: 0,
        port: Some(3),
        vlan: None,
        field: None,
        device: 2,
        vport: Some(1),
    })
    .unwrap();
    let mixed: Vec<(u32, &[u8])> = (0..32)
        .map(|i| (if i % 3 == 0 { 3 } else { 1 }, pkt.as_slice()))
        .collect();
    let run = |vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>| {
        vs.process_batch(&mixed, out);
        assert_eq!(out.len(), 32);
        vs.recycle_outputs(out);
    };
    for _ in 0..20 {
        run(&mut vs, &mut out);
    }
    COUNT.with(|c| c.set(Some(0)));
    for _ in 0..100 {
        run(&mut vs, &mut out);
    }
    let n = COUNT.with(|c| c.replace(None)).unwrap();
    assert_eq!(n, 0, "allocations in 3200 packets for two devices");

    // One packet per call with `process_next` (the previous frame given back in the call):
    // through the chain (port 1), then alternating with packets straight into the router
    // (port 3), so the frame goes back to another device than the next packet's half of the
    // time, then all into the router (the lane with the give-back folded in).
    for round in 0..3 {
        let run = |vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>, i: usize| {
            let port = match round {
                0 => 1,
                1 if i.is_multiple_of(2) => 1,
                _ => 3,
            };
            vs.process_next(port, &pkt, out);
            assert_eq!(out.len(), 1);
            assert_eq!(out[0].port, 2);
        };
        for i in 0..100 {
            run(&mut vs, &mut out, i);
        }
        COUNT.with(|c| c.set(Some(0)));
        for i in 0..1000 {
            run(&mut vs, &mut out, i);
        }
        let n = COUNT.with(|c| c.replace(None)).unwrap();
        assert_eq!(
            n, 0,
            "allocations in 1000 packets with process_next, round {round}"
        );
    }
    // The same three patterns as one `process_each` session each (issue 17, h-chain5): the
    // chain's last frame goes back to the router while the next packet enters the firewall.
    for round in 0..3 {
        let port = |i: usize| match round {
            0 => 1,
            1 if i.is_multiple_of(2) => 1,
            _ => 3,
        };
        let mut sent = 0;
        vs.process_each((0..100).map(|i| (port(i), pkt.as_slice())), &mut out, |o| {
            sent += o.len()
        });
        COUNT.with(|c| c.set(Some(0)));
        vs.process_each(
            (0..1000).map(|i| (port(i), pkt.as_slice())),
            &mut out,
            |o| sent += o.len(),
        );
        let n = COUNT.with(|c| c.replace(None)).unwrap();
        assert_eq!(sent, 1100);
        assert_eq!(
            n, 0,
            "allocations in 1000 packets with process_each, round {round}"
        );
    }
    vs.recycle_outputs(&mut out);
}
