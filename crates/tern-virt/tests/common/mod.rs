//! What the allocation tests over worker threads share: a global allocator that counts every
//! thread's allocations (and frees) while a window is open, the thread that called
//! [`start`] (the front) apart from the others (the workers) — each test file using it holds
//! one test, so no other test's allocations run meanwhile — and basic.p4 set-up.
#![allow(dead_code)] // each test file uses part of it

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    .unwrap()
    .json
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
    tern_virt::Rule {
        priority: 0,
        port: Some(port),
        vlan: None,
        field: None,
        device,
        vport: Some(1),
    }
}
