//! Devices running the same program share one compiled copy (`tern_dataplane::CompiledProgram`):
//! 64 devices of `basic.p4` in a `VirtSwitch` against 64 separately compiled switches, memory
//! counted by a global allocator that tracks live heap bytes; and each device still keeps its
//! own state.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Rule, Target, VirtSwitch};

struct Live;

static LIVE: AtomicI64 = AtomicI64::new(0);

// SAFETY: every call is passed to the system allocator unchanged; the counter is an atomic.
unsafe impl GlobalAlloc for Live {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as i64, Ordering::Relaxed);
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        LIVE.fetch_add(n as i64 - l.size() as i64, Ordering::Relaxed);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Live = Live;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");
const N: u32 = 64;

fn live() -> i64 {
    LIVE.load(Ordering::Relaxed)
}

#[test]
fn sixty_four_devices_share_one_compiled_program() {
    let json = tern_p4::compile_file(
        std::path::Path::new(&format!("{ROOT}p4/tutorials/basic.p4")),
        &tern_p4::Options::default(),
    )
    .unwrap()
    .json;

    // Before the split: every device compiled its own copy.
    let base = live();
    let separate: Vec<Switch> = (0..N)
        .map(|_| Switch::from_json(&json, SwitchOptions::default()).unwrap())
        .collect();
    let separate_bytes = live() - base;
    drop(separate);

    let base = live();
    let mut vs = VirtSwitch::new();
    for id in 1..=N {
        vs.add_device(
            id,
            DeviceSpec {
                json: json.clone(),
                owner: None,
                quotas: Quotas::default(),
            },
        )
        .unwrap();
    }
    let shared_bytes = live() - base;
    assert_eq!(vs.compiled_programs(), 1);
    println!(
        "{N} devices of basic.p4: {separate_bytes} bytes compiled separately, \
         {shared_bytes} bytes sharing one compiled program ({:.1}x less)",
        separate_bytes as f64 / shared_bytes as f64
    );
    assert!(
        shared_bytes * 2 < separate_bytes,
        "sharing should at least halve the memory: {shared_bytes} vs {separate_bytes}"
    );

    // Each device keeps its own state: a route in device 7 only.
    vs.runtime(Caller::Operator, 7)
        .unwrap()
        .mt_add_entry(
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
    for id in 1..=N {
        let n = vs
            .runtime(Caller::Operator, id)
            .unwrap()
            .mt_get_num_entries("MyIngress.ipv4_lpm")
            .unwrap();
        assert_eq!(n, u64::from(id == 7), "device {id}");
    }
    for (port, id) in [(1, 7), (2, 8)] {
        vs.add_rule(Rule {
            priority: 0,
            port: Some(port),
            vlan: None,
            field: None,
            device: id,
            vport: None,
        })
        .unwrap();
        vs.map_port(id, 2, Target::Phys(2)).unwrap();
    }
    let mut pkt = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    pkt.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ]);
    pkt.extend_from_slice(&[0x5a; 16]);
    let mut out: Vec<OutputPacket> = Vec::new();
    vs.process_batch(&[(1, &pkt), (2, &pkt)], &mut out);
    // Device 7 routes it out of port 2; device 8 has no route and drops it.
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].port, 2);
    vs.recycle_outputs(&mut out);

    // A replaced device with another program holds its own compiled copy; removing the last
    // user of a program lets it go.
    let fw = tern_p4::compile_file(
        std::path::Path::new(&format!("{ROOT}p4/virt/firewall.p4")),
        &tern_p4::Options::default(),
    )
    .unwrap()
    .json;
    vs.replace_device(
        3,
        DeviceSpec {
            json: fw,
            owner: None,
            quotas: Quotas::default(),
        },
    )
    .unwrap();
    assert_eq!(vs.compiled_programs(), 2);
    vs.remove_device(3).unwrap();
    assert_eq!(vs.compiled_programs(), 1);
}
