//! The steady-state packet path of `VirtWorkers` allocates nothing per packet, on any thread:
//! the front's dispatch, the worker threads' queues and devices, the outputs' way back and the
//! buffers given back with `recycle_outputs`. A global allocator counts every thread's
//! allocations while a window is open (this file holds one test, so no other test's
//! allocations run meanwhile).

mod common;

use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Target, VirtSwitch, VirtWorkers, WorkerOptions};

use common::{compile, packet, route};

#[global_allocator]
static A: common::Counting = common::Counting;

/// Two workers: a firewall → router chain (devices 1 and 2, one group) on one, a router
/// (device 3) on the other; batches of 8 packets, half to each.
#[test]
fn steady_state_workers_allocate_nothing_per_packet() {
    let spec = |json: String| DeviceSpec {
        json,
        owner: None,
        quotas: Quotas::default(),
    };
    let router = compile("p4/tutorials/basic.p4");
    let mut vs = VirtSwitch::new();
    vs.add_device(1, spec(compile("p4/virt/firewall.p4")))
        .unwrap();
    vs.add_device(2, spec(router.clone())).unwrap();
    vs.add_device(3, spec(router)).unwrap();
    vs.runtime(Caller::Operator, 1)
        .unwrap()
        .mt_add_entry(
            "FwIngress.fwd",
            &[MatchParam::Exact(vec![0, 1])],
            "FwIngress.set_egress",
            &[vec![0, 2]],
            None,
        )
        .unwrap();
    route(
        &mut vs.runtime(Caller::Operator, 2).unwrap(),
        [10, 0, 2, 2],
        2,
    );
    route(
        &mut vs.runtime(Caller::Operator, 3).unwrap(),
        [10, 0, 3, 3],
        2,
    );
    vs.add_rule(common::port_rule(1, 1)).unwrap();
    vs.add_rule(common::port_rule(5, 3)).unwrap();
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
    vs.map_port(3, 2, Target::Phys(6)).unwrap();
    let mut pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    assert_ne!(
        pool.worker_of(1),
        pool.worker_of(3),
        "one device group per worker"
    );
    assert_eq!(pool.worker_of(1), pool.worker_of(2));

    let (a, b) = (packet([10, 0, 2, 2]), packet([10, 0, 3, 3]));
    let batch: Vec<(u32, &[u8])> = (0..8)
        .map(|i| if i % 2 == 0 { (1, &a[..]) } else { (5, &b[..]) })
        .collect();
    let mut out: Vec<OutputPacket> = Vec::with_capacity(64);
    let run = |pool: &mut VirtWorkers, out: &mut Vec<OutputPacket>| {
        pool.process_batch(&batch, out);
        assert_eq!(out.len(), 8);
        assert_eq!(out.iter().filter(|o| o.port == 2).count(), 4);
        assert_eq!(out.iter().filter(|o| o.port == 6).count(), 4);
        pool.recycle_outputs(out);
    };
    for _ in 0..100 {
        run(&mut pool, &mut out);
    }
    common::start();
    for _ in 0..400 {
        run(&mut pool, &mut out);
    }
    let n = common::stop();
    assert_eq!(
        n, 0,
        "allocations in 3,200 packets through 2 workers (a chain on one, a router on the other)"
    );
    assert_eq!(pool.device_stats(2).unwrap().to_phys, 2000);
    assert_eq!(pool.device_stats(3).unwrap().to_phys, 2000);
}
