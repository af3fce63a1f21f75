//! What tern-virt's test files share: a global allocator that counts every thread's
//! allocations (and frees) while a window is open, the thread that called [`start`] (the
//! front) apart from the others (the workers) — each test file registering it holds one test,
//! so no other test's allocations run meanwhile; basic.p4 set-up; and the building blocks of
//! the chain, burst and fault tests (device specs, classifier rules, links, MACs, a
//! deterministic sequence, the L2 switch's tables and the three-hop L2 chain).
#![allow(dead_code)] // each test file uses part of it

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

pub use tern_fixtures::ipv4_checksum;
use tern_runtime::{MatchParam, Runtime};

/// Counts allocations and reallocations on every thread between [`start`] and [`stop`].
pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static COUNT: AtomicU64 = AtomicU64::new(0);
/// In the window: [front allocations, front frees, other threads' allocations, their frees].
static BY_THREAD: [AtomicU64; 4] = [const { AtomicU64::new(0) }; 4];

thread_local! {
    /// The thread that opened the window (const-initialised, no destructor: reading it
    /// inside the allocator allocates nothing).
    static FRONT: Cell<bool> = const { Cell::new(false) };
}

/// What a window counted, by thread.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ByThread {
    pub front_allocs: u64,
    pub front_frees: u64,
    pub worker_allocs: u64,
    pub worker_frees: u64,
}

fn tally(free: bool) {
    if COUNTING.load(Ordering::Relaxed) {
        let front = FRONT.with(Cell::get);
        let i = usize::from(!front) * 2 + usize::from(free);
        BY_THREAD[i].fetch_add(1, Ordering::Relaxed);
    }
}

/// Open the counting window (from zero); the calling thread is the front.
pub fn start() {
    FRONT.with(|f| f.set(true));
    COUNT.store(0, Ordering::SeqCst);
    for c in &BY_THREAD {
        c.store(0, Ordering::SeqCst);
    }
    COUNTING.store(true, Ordering::SeqCst);
}

/// Close the window: allocations (and reallocations) and frees, the front's and the other
/// threads' apart.
pub fn stop_by_thread() -> ByThread {
    COUNTING.store(false, Ordering::SeqCst);
    let n = |i: usize| BY_THREAD[i].load(Ordering::SeqCst);
    ByThread {
        front_allocs: n(0),
        front_frees: n(1),
        worker_allocs: n(2),
        worker_frees: n(3),
    }
}

/// Close the window: the allocations counted in it.
pub fn stop() -> u64 {
    COUNTING.store(false, Ordering::SeqCst);
    COUNT.load(Ordering::SeqCst)
}

// SAFETY: every call is passed to the system allocator unchanged; the counters are atomics
// and a const-initialised thread-local without destructor, which never allocate.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        tally(false);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        tally(true);
        // SAFETY: `p` came from `System.alloc` with layout `l`.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            COUNT.fetch_add(1, Ordering::Relaxed);
        }
        tally(false);
        // SAFETY: forwarded unchanged.
        unsafe { System.realloc(p, l, n) }
    }
}

pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

/// basic.p4 and friends compiled by tern from the repository.
pub fn compile(rel: &str) -> String {
    tern_p4::compile_file(
        std::path::Path::new(&format!("{ROOT}{rel}")),
        &tern_p4::Options::default(),
    )
    .unwrap_or_else(|d| panic!("{rel} does not compile:\n{d}"))
    .json
}

/// `p4/tutorials/basic.p4` (the L3 router most tests run) compiled by tern.
pub fn basic() -> String {
    compile("p4/tutorials/basic.p4")
}

/// HyPer4's Example 1 (`p4/virt/scenarios/ex1`), snapshot `phase` active.
pub fn ex1(phase: &str) -> tern_virt::VirtSwitch {
    let path = std::path::PathBuf::from(format!("{ROOT}p4/virt/scenarios/ex1/virt.json"));
    let cfg = tern_virt::config::Config::load(&path).unwrap();
    let (mut vs, _) = cfg.build(path.parent().unwrap()).unwrap();
    vs.activate_snapshot(phase).unwrap();
    vs
}

/// A device running `json`, no owner, default quotas.
pub fn spec(json: &str) -> tern_virt::DeviceSpec {
    tern_virt::DeviceSpec {
        json: json.to_string(),
        owner: None,
        quotas: tern_virt::Quotas::default(),
    }
}

/// Every packet arriving on physical `port` goes to `device`'s virtual port `vport`.
pub fn rule(
    port: tern_runtime::Port,
    device: tern_virt::DeviceId,
    vport: tern_runtime::Port,
) -> tern_virt::Rule {
    tern_virt::Rule {
        priority: 0,
        port: Some(port),
        vlan: None,
        field: None,
        device,
        vport: Some(vport),
    }
}

/// A link into `device`'s virtual port `vport`.
pub fn link(device: tern_virt::DeviceId, vport: tern_runtime::Port) -> tern_virt::Target {
    tern_virt::Target::Link { device, vport }
}

/// The MAC address `00:00:00:00:HH:LL` of `last`.
pub fn mac(last: u16) -> [u8; 6] {
    [0, 0, 0, 0, (last >> 8) as u8, last as u8]
}

/// A deterministic pseudo-random sequence (xorshift).
pub struct Rng(pub u32);

impl Rng {
    pub fn next(&mut self) -> u32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        self.0
    }
}

/// The L2 switch's tables (`p4/virt/l2_switch.p4`): the source MACs of `known` known, `dmac`
/// (destination, virtual port) forwarded, the rest flooded to `flood` (multicast group 1, one
/// node a port).
pub fn l2_setup(
    rt: &mut dyn Runtime,
    known: &[u16],
    dmac: &[(u16, tern_runtime::Port)],
    flood: &[tern_runtime::Port],
) {
    for &m in known {
        rt.mt_add_entry(
            "L2Ingress.smac",
            &[MatchParam::Exact(mac(m).to_vec())],
            "L2Ingress.known",
            &[],
            None,
        )
        .unwrap();
    }
    for &(m, p) in dmac {
        rt.mt_add_entry(
            "L2Ingress.dmac",
            &[MatchParam::Exact(mac(m).to_vec())],
            "L2Ingress.forward",
            &[(p as u16).to_be_bytes().to_vec()],
            None,
        )
        .unwrap();
    }
    let g = rt.mc_mgrp_create(1).unwrap();
    for (rid, &p) in flood.iter().enumerate() {
        let n = rt.mc_node_create(rid as u32, &[p], &[]).unwrap();
        rt.mc_node_associate(g, n).unwrap();
    }
}

/// Three L2 switches in a row, with fan-out in the middle, the sources of `known` known on
/// each, every packet arriving on physical 1 into device 1:
/// * device 1: dst 3 → link to device 2, dst 2 → physical 2, others flood to physical 1, 2
///   and the link;
/// * device 2: dst 3 → link to device 3, dst 4 → its CPU, others flood to its unmapped port 1,
///   device 3, its CPU, physical 3 and a dropping port;
/// * device 3 (from device 2 on its port 4): dst 3 → physical 4, others flood to its unmapped
///   port 1 (dropped, counted), physical 4 and its CPU.
pub fn three_l2_hops(known: &[u16]) -> tern_virt::VirtSwitch {
    use tern_virt::{Caller, Target};
    let l2 = compile("p4/virt/l2_switch.p4");
    let mut vs = tern_virt::VirtSwitch::new();
    for d in 1..=3 {
        vs.add_device(d, spec(&l2)).unwrap();
    }
    vs.add_rule(rule(1, 1, 1)).unwrap();
    for (d, p, t) in [
        (1, 1, Target::Phys(1)),
        (1, 2, Target::Phys(2)),
        (1, 3, link(2, 1)),
        (2, 2, link(3, 4)),
        (2, 3, Target::Cpu),
        (2, 4, Target::Phys(3)),
        (2, 5, Target::Drop),
        (3, 2, Target::Phys(4)),
        (3, 3, Target::Cpu),
    ] {
        vs.map_port(d, p, t).unwrap();
    }
    let mut tables = |d, dmac: &[(u16, tern_runtime::Port)], flood: &[tern_runtime::Port]| {
        l2_setup(
            &mut vs.runtime(Caller::Operator, d).unwrap(),
            known,
            dmac,
            flood,
        );
    };
    tables(1, &[(3, 3), (2, 2)], &[1, 2, 3]);
    tables(2, &[(3, 2), (4, 3)], &[1, 2, 3, 4, 5]);
    tables(3, &[(3, 2)], &[1, 2, 3]);
    vs
}

pub fn route(rt: &mut dyn Runtime, dst: [u8; 4], port: u8) {
    rt.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: dst.to_vec(),
            prefix_len: 32,
        }],
        "MyIngress.ipv4_forward",
        &[vec![8, 0, 0, 0, 2, 0x22], vec![0, port]],
        None,
    )
    .unwrap();
}

pub fn packet(dst: [u8; 4]) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    p.extend_from_slice(&[0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1]);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&[0x5a; 16]);
    p
}

/// The classifier rule the allocation tests use: every packet arriving on physical `port`
/// goes to `device`'s virtual port 1.
pub fn port_rule(port: u32, device: tern_virt::DeviceId) -> tern_virt::Rule {
    rule(port, device, 1)
}

/// The allocation tests' workers: `vs`'s victim (device 1: physical 1 in, its virtual port 2
/// out on physical 2) and tenant (device 2: physical 5 in) over `workers` worker threads
/// (queues of 32 packets, no rebalancing), each device on a worker of its own when there are
/// two.
pub fn victim_and_tenant(mut vs: tern_virt::VirtSwitch, workers: usize) -> tern_virt::VirtWorkers {
    vs.add_rule(port_rule(1, 1)).unwrap();
    vs.add_rule(port_rule(5, 2)).unwrap();
    vs.map_port(1, 2, tern_virt::Target::Phys(2)).unwrap();
    let mut pool = tern_virt::VirtWorkers::new(
        vs,
        tern_virt::WorkerOptions {
            workers,
            capacity: 32,
            rebalance_every: 0,
            ..tern_virt::WorkerOptions::default()
        },
    );
    if workers == 2 {
        pool.move_group(1, 0).unwrap();
        pool.move_group(2, 1).unwrap();
    }
    pool
}

/// Ethernet `dst` ← `src`, IPv4 10.0.0.1 → `dip` (checksum valid), TCP `sport` → 5001, a
/// payload carrying `seq`.
pub fn tcp(dst: [u8; 6], src: u16, dip: [u8; 4], sport: u16, seq: u32) -> Vec<u8> {
    let mut f = dst.to_vec();
    f.extend_from_slice(&mac(src));
    f.extend_from_slice(&[8, 0]);
    let mut ip = vec![0x45, 0, 0, 48, 0, 1, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1];
    ip.extend_from_slice(&dip);
    let c = ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&[
        0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0,
    ]);
    f.extend_from_slice(&seq.to_be_bytes());
    f
}

/// Into Example 1's chain from h1 (physical 1): mostly to h3 across the chain, some blocked
/// by the firewall, some flooded (a pass with frames for several targets).
pub fn ex1_entry_traffic(n: usize, routed: bool) -> Vec<(tern_runtime::Port, Vec<u8>)> {
    let mut r = Rng(0x0bad_cafe);
    let (dst, dip) = if routed {
        (mac(0x0a0a), [10, 0, 1, 3])
    } else {
        (mac(3), [10, 0, 0, 3])
    };
    (0..n as u32)
        .map(|seq| {
            let f = match r.next() % 16 {
                0 => tcp(mac(0x77), 1, dip, 1234, seq),
                1 => tcp(dst, 1, dip, 4000, seq),
                _ => tcp(dst, 1, dip, 1234, seq),
            };
            (1, f)
        })
        .collect()
}
