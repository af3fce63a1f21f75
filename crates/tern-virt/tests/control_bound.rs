//! The bound on a device's queued control work (issue 17, h-tidy): `VirtWorkers::post`,
//! `post_steps` and `submit` reserve turns (a job one, a batch one per step) of the device's
//! `WorkerOptions::max_queued_control`; past it the call is refused with
//! `VirtError::ControlBacklog` and counted in the device's `control_backlog_refused`, the
//! queue (and the worker's inbox) stays at the bound, another device on the same worker posts
//! freely meanwhile, and once the queue drains the device posts again. Turns a job gives up
//! unrun (a batch ended by a panic) come back too.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};

use tern_runtime::OutputPacket;
use tern_virt::{Caller, DeviceId, Target, VirtError, VirtSwitch, VirtWorkers, WorkerOptions};

mod common;
use common::{compile, packet, port_rule, route, spec};

const OTHER: DeviceId = 1;
const TENANT: DeviceId = 2;
const LIMIT: usize = 8;

/// Both devices on ONE worker (the bound is per device, not per worker): OTHER on physical
/// port 1 (out on 2), TENANT on port 10 (out on 12), basic.p4 with one route each.
fn pool() -> VirtWorkers {
    let json = compile("p4/tutorials/basic.p4");
    let mut vs = VirtSwitch::new();
    for (id, port, out) in [(OTHER, 1, 2), (TENANT, 10, 12)] {
        vs.add_device(id, spec(&json)).unwrap();
        route(
            &mut vs.runtime(Caller::Operator, id).unwrap(),
            [10, 0, 2, 2],
            2,
        );
        vs.add_rule(port_rule(port, id)).unwrap();
        vs.map_port(id, 2, Target::Phys(out)).unwrap();
    }
    VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 1,
            max_queued_control: LIMIT,
            ..WorkerOptions::default()
        },
    )
}

/// Hold the worker in a job of OTHER until the returned sender is dropped (returns once the
/// job has started, so it is not queued any more).
fn hold_worker(p: &VirtWorkers) -> mpsc::Sender<()> {
    let (started_tx, started_rx) = mpsc::channel();
    let (hold_tx, hold_rx) = mpsc::channel::<()>();
    p.post(OTHER, move |_| {
        started_tx.send(()).unwrap();
        let _ = hold_rx.recv();
    })
    .unwrap();
    started_rx.recv().unwrap();
    hold_tx
}

fn counter(ran: &Arc<AtomicUsize>) -> impl FnOnce(&mut VirtSwitch) + Send + 'static {
    let ran = Arc::clone(ran);
    move |_| {
        ran.fetch_add(1, Ordering::SeqCst);
    }
}

fn is_backlog(r: Result<(), VirtError>, queued: usize, asked: usize) {
    match r {
        Err(VirtError::ControlBacklog {
            device,
            queued: q,
            asked: a,
            limit,
        }) => assert_eq!(
            (device, q, a, limit),
            (TENANT, queued, asked, LIMIT),
            "the refusal names the device, its queue and the bound"
        ),
        other => panic!("expected a ControlBacklog refusal, got {other:?}"),
    }
}

#[test]
fn a_device_past_its_control_bound_is_refused_and_counted_until_its_queue_drains() {
    let mut p = pool();
    let tenant_ran = Arc::new(AtomicUsize::new(0));
    let other_ran = Arc::new(AtomicUsize::new(0));
    let hold = hold_worker(&p);

    // Up to the bound: LIMIT - 3 jobs and a batch of 3 steps.
    for _ in 0..LIMIT - 3 {
        p.post(TENANT, counter(&tenant_ran)).unwrap();
    }
    let steps_ran = Arc::clone(&tenant_ran);
    p.post_steps(TENANT, 3, move |_, _| {
        steps_ran.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    assert_eq!(p.control_queued(TENANT), LIMIT);
    let inbox = p.inbox_len(0);
    assert_eq!(inbox, LIMIT - 2, "the accepted jobs' messages");

    // Past it: every kind of post is refused, with what was queued and the bound.
    let flood = 1000;
    for i in 0..flood {
        match i % 3 {
            0 => is_backlog(p.post(TENANT, counter(&tenant_ran)), LIMIT, 1),
            1 => is_backlog(p.post_steps(TENANT, 2, |_, _| {}), LIMIT, 2),
            _ => {
                let e = p.submit(TENANT, |_| 7u32).map(|_| ()).unwrap_err();
                assert!(
                    e.to_string().contains(&format!("device {TENANT}"))
                        && e.to_string().contains(&format!("limit of {LIMIT}")),
                    "{e}"
                );
                is_backlog(Err(e), LIMIT, 1);
            }
        }
    }
    // The queue (memory) did not grow: same count, no message more in the worker's inbox.
    assert_eq!(p.control_queued(TENANT), LIMIT);
    assert_eq!(p.inbox_len(0), inbox);

    // Meanwhile another device on the same worker posts freely (its own bound).
    for _ in 0..LIMIT {
        p.post(OTHER, counter(&other_ran)).unwrap();
    }
    assert_eq!(p.control_queued(OTHER), LIMIT);

    drop(hold);
    p.wait_idle();
    assert_eq!(
        tenant_ran.load(Ordering::SeqCst),
        LIMIT,
        "exactly the accepted turns ran, no refused one"
    );
    assert_eq!(other_ran.load(Ordering::SeqCst), LIMIT);
    assert_eq!(p.control_queued(TENANT), 0);
    assert_eq!(p.control_queued(OTHER), 0);
    assert_eq!(
        p.device_stats(TENANT).unwrap().control_backlog_refused,
        flood as u64
    );
    assert_eq!(p.device_stats(OTHER).unwrap().control_backlog_refused, 0);

    // Drained: the tenant posts again, up to its bound in one batch.
    let again = Arc::clone(&tenant_ran);
    p.post_steps(TENANT, LIMIT, move |_, _| {
        again.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    p.wait_idle();
    assert_eq!(tenant_ran.load(Ordering::SeqCst), 2 * LIMIT);
    assert_eq!(
        p.submit(TENANT, |_| 7u32).unwrap().recv().unwrap().unwrap(),
        7
    );

    // Packets of both devices kept forwarding.
    let mut out: Vec<OutputPacket> = Vec::new();
    let f = packet([10, 0, 2, 2]);
    p.process_batch(&[(1, &f), (10, &f)], &mut out);
    let mut ports: Vec<u32> = out.iter().map(|o| o.port).collect();
    ports.sort_unstable();
    assert_eq!(ports, vec![2, 12]);
    p.recycle_outputs(&mut out);
}

#[test]
fn turns_a_panicking_batch_drops_unrun_come_back() {
    let mut p = pool();
    // Step 1 of 8 panics: the device is quarantined and steps 2..8 are dropped unrun; their
    // turns must come back, or the device could never post again.
    p.post_steps(TENANT, LIMIT, |_, i| {
        if i == 1 {
            panic!("a tenant's write tripped an assertion");
        }
    })
    .unwrap();
    p.wait_idle();
    assert_eq!(p.control_queued(TENANT), 0);
    let ran = Arc::new(AtomicUsize::new(0));
    let r = Arc::clone(&ran);
    p.post_steps(TENANT, LIMIT, move |_, _| {
        r.fetch_add(1, Ordering::SeqCst);
    })
    .unwrap();
    p.wait_idle();
    assert_eq!(ran.load(Ordering::SeqCst), LIMIT);
    assert_eq!(p.device_stats(TENANT).unwrap().control_backlog_refused, 0);

    // A device removed with work queued: a device added under its id starts from zero.
    let hold = hold_worker(&p);
    for _ in 0..LIMIT {
        p.post(TENANT, |_| {}).unwrap();
    }
    drop(hold);
    p.remove_device(TENANT).unwrap();
    assert_eq!(p.control_queued(TENANT), 0);
    assert!(matches!(
        p.post(TENANT, |_| {}),
        Err(VirtError::NoSuchDevice(TENANT))
    ));
}
