//! A flood that sends nothing out (its packets dropped by its program, and more of them than
//! its queue holds) costs no allocation per packet either: the workers hand the served and
//! overflowed buffers back to the front, whose pool would otherwise run dry and allocate one
//! buffer per arriving frame. A global allocator counts every thread's allocations while a
//! window is open (this file holds one test, so no other test's allocations run meanwhile).

mod common;

use tern_runtime::OutputPacket;
use tern_virt::{Caller, DeviceSpec, Quotas, VirtSwitch, VirtWorkers};

use common::{compile, packet, route};

#[global_allocator]
static A: common::Counting = common::Counting;

/// A victim (basic.p4, routed) and a flooding attacker (basic.p4 without routes: every
/// packet dropped) on 1 and on 2 workers; each dispatch carries 64 attacker frames, twice
/// what its queue holds, and 8 victim packets. After a warm-up, 400 dispatches allocate
/// nothing on any thread, and every victim packet comes out.
#[test]
fn a_flood_that_sends_nothing_out_allocates_nothing_per_packet() {
    let router = compile("p4/tutorials/basic.p4");
    for workers in [1, 2] {
        let spec = |owner: &str| DeviceSpec {
            json: router.clone(),
            owner: Some(owner.into()),
            quotas: Quotas::default(),
        };
        let mut vs = VirtSwitch::new();
        vs.add_device(1, spec("alice")).unwrap();
        vs.add_device(2, spec("mallory")).unwrap();
        route(
            &mut vs.runtime(Caller::Operator, 1).unwrap(),
            [10, 0, 2, 2],
            2,
        );
        let mut pool = common::victim_and_tenant(vs, workers);
        let (v, a) = (packet([10, 0, 2, 2]), packet([10, 0, 9, 9]));
        let mut batch: Vec<(u32, &[u8])> = (0..64).map(|_| (5, &a[..])).collect();
        batch.extend((0..8).map(|_| (1, &v[..])));
        let mut out: Vec<OutputPacket> = Vec::with_capacity(64);
        let run = |pool: &mut VirtWorkers, out: &mut Vec<OutputPacket>| {
            pool.process_batch(&batch, out);
            assert_eq!(out.len(), 8);
            assert!(out.iter().all(|o| o.port == 2));
            pool.recycle_outputs(out);
        };
        for _ in 0..1000 {
            run(&mut pool, &mut out);
        }
        // Windows of 400 dispatches, until one allocates nothing (at most 3). A cost per
        // packet allocates in every window; what a window may catch once is a queue or ring
        // growing to a depth the warm-up did not reach, when the threads (front and 2 workers
        // on 2 vCPUs) are scheduled unusually — seen once in a loaded suite run, 2–3
        // allocations; the capacity stays, so the next window allocates nothing.
        let mut counts = Vec::new();
        for _ in 0..3 {
            common::start();
            for _ in 0..400 {
                run(&mut pool, &mut out);
            }
            counts.push(common::stop());
            if counts.last() == Some(&0) {
                break;
            }
        }
        assert_eq!(
            counts.last(),
            Some(&0),
            "{workers} worker(s): allocations in windows of 400 dispatches of 64 flood frames \
             and 8 victim packets: {counts:?}"
        );
        let windows = counts.len() as u64;
        let s = pool.fair_stats(2).unwrap();
        assert!(
            s.overflow >= 400 * 32,
            "the flood overflowed its queue: {s:?}"
        );
        assert_eq!(
            pool.device_stats(1).unwrap().to_phys,
            (1000 + 400 * windows) * 8
        );
    }
}
