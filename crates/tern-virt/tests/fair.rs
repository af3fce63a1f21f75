//! Fair share between devices under overload: a tenant that sends twenty times the victim's
//! rate, beyond what one round serves, overflows only its own queue; the victim's packets are
//! all served and forwarded (`FairScheduler`, deficit round robin). A single shared FIFO of the
//! same total size, for contrast, loses victim packets. The same holds with the devices over
//! worker threads (`VirtWorkers`, 1 and 2 workers), the attacker on the victim's worker.

use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{
    Caller, Cost, DeviceSpec, FairScheduler, Quotas, Rule, Target, VirtSwitch, VirtWorkers,
    WorkerOptions,
};

mod common;
use common::basic;

fn packet(dst: u8, seq: u16) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    p.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, dst,
    ]);
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0x5a; 14]);
    p
}

/// Device d (1 = victim, 2 = attacker) on physical port d, routing 10.0.2.d out of port 10 + d.
fn switch() -> VirtSwitch {
    let json = basic();
    let mut vs = VirtSwitch::new();
    for d in 1..=2u32 {
        vs.add_device(
            d,
            DeviceSpec {
                json: json.clone(),
                owner: None,
                quotas: Quotas::default(),
            },
        )
        .unwrap();
        vs.add_rule(Rule {
            priority: 0,
            port: Some(d),
            vlan: None,
            field: None,
            device: d,
            vport: Some(1),
        })
        .unwrap();
        vs.map_port(d, 2, Target::Phys(10 + d)).unwrap();
        vs.runtime(Caller::Operator, d)
            .unwrap()
            .mt_add_entry(
                "MyIngress.ipv4_lpm",
                &[MatchParam::Lpm {
                    key: vec![10, 0, 2, d as u8],
                    prefix_len: 32,
                }],
                "MyIngress.ipv4_forward",
                &[vec![8, 0, 0, 0, 2, d as u8], vec![0, 2]],
                None,
            )
            .unwrap();
    }
    vs
}

const TICKS: u16 = 500;
const ATTACK: u16 = 20;
/// Bytes per device per round: 8 of the 50-byte frames.
const QUANTUM: u64 = 400;
const CAPACITY: usize = 32;

#[test]
fn a_flooding_tenant_cannot_take_the_victims_share() {
    let mut vs = switch();
    let mut fair = FairScheduler::new(QUANTUM, CAPACITY);
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut victim_out = Vec::new();
    let mut attacker_out = 0u64;
    for t in 0..TICKS {
        for k in 0..ATTACK {
            fair.enqueue(&vs, 2, &packet(2, t * ATTACK + k));
        }
        assert!(
            fair.enqueue(&vs, 1, &packet(1, t)),
            "victim packet {t} queued"
        );
        // One round per tick: the switch serves 8 frames per device per tick, the attacker
        // offers 20.
        fair.run_round(&mut vs, &mut out);
        for o in &out {
            match o.port {
                11 => victim_out.push(u16::from_be_bytes([o.data[34], o.data[35]])),
                12 => attacker_out += 1,
                p => panic!("unexpected port {p}"),
            }
        }
        vs.recycle_outputs(&mut out);
    }
    while fair.backlog() > 0 {
        fair.run_round(&mut vs, &mut out);
        attacker_out += out.iter().filter(|o| o.port == 12).count() as u64;
        assert!(out.iter().all(|o| o.port == 12));
        vs.recycle_outputs(&mut out);
    }
    // Every victim packet forwarded, in order.
    assert_eq!(victim_out, (0..TICKS).collect::<Vec<_>>());
    let v = fair.stats(1);
    assert_eq!((v.queued, v.overflow, v.served), (500, 0, 500));
    // The attacker got its share and no more: 8 per round; the rest overflowed its queue.
    let a = fair.stats(2);
    assert_eq!(a.queued + a.overflow, u64::from(TICKS * ATTACK));
    assert_eq!(a.served, a.queued);
    assert_eq!(attacker_out, a.served);
    assert!(
        a.served <= u64::from(TICKS) * 8 + CAPACITY as u64,
        "{}",
        a.served
    );
    assert!(a.overflow >= u64::from(TICKS) * 11, "{}", a.overflow);
    let sv = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!((sv.packets_in, sv.to_phys), (500, 500));
    println!(
        "victim {}/{} served; attacker offered {}, served {}, overflowed {}",
        v.served,
        TICKS,
        TICKS * ATTACK,
        a.served,
        a.overflow
    );
}

/// The same load through one shared FIFO of the same total size (2 x 32) and the same service
/// (16 frames per tick) loses most of the victim's packets.
#[test]
fn without_fair_queueing_the_victim_starves() {
    let mut vs = switch();
    let mut fifo: std::collections::VecDeque<(u32, Vec<u8>)> = Default::default();
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut victim = 0;
    for t in 0..TICKS {
        for k in 0..ATTACK {
            if fifo.len() < 2 * CAPACITY {
                fifo.push_back((2, packet(2, t * ATTACK + k)));
            }
        }
        if fifo.len() < 2 * CAPACITY {
            fifo.push_back((1, packet(1, t)));
        }
        for _ in 0..16 {
            if let Some((p, d)) = fifo.pop_front() {
                vs.process_batch(&[(p, &d)], &mut out);
            }
        }
        victim += out.iter().filter(|o| o.port == 11).count();
        vs.recycle_outputs(&mut out);
    }
    assert!(victim < usize::from(TICKS) / 10, "{victim}");
}

/// The flood through `VirtWorkers`: the victim and the attacker on the same worker (with 2
/// workers, the attacker is moved onto the victim's), each tick one dispatch of the attacker's
/// 40 packets (more than its queue holds) and the victim's one. Every victim packet comes out, in order; the attacker's
/// excess overflows its own queue.
const FLOOD: u16 = 40;

#[test]
fn with_workers_a_flooding_tenant_on_the_victims_worker_cannot_starve_it() {
    for workers in [1, 2] {
        let mut pool = VirtWorkers::new(
            switch(),
            WorkerOptions {
                workers,
                cost: Cost::Bytes,
                quantum: QUANTUM,
                capacity: CAPACITY,
                rebalance_every: 0,
                yield_when_busy: true,
                slice: tern_virt::ThreadSlice::Kernel,
                ..WorkerOptions::default()
            },
        );
        let w = pool.worker_of(1).unwrap();
        pool.move_group(2, w).unwrap();
        assert_eq!(pool.worker_of(2), Some(w));
        let mut out: Vec<OutputPacket> = Vec::new();
        for t in 0..TICKS {
            let mut pkts: Vec<Vec<u8>> = (0..FLOOD).map(|k| packet(2, t * FLOOD + k)).collect();
            pkts.push(packet(1, t));
            let mut batch: Vec<(u32, &[u8])> = pkts[..FLOOD as usize]
                .iter()
                .map(|p| (2, p.as_slice()))
                .collect();
            batch.push((1, &pkts[FLOOD as usize]));
            pool.dispatch(&batch);
        }
        pool.wait_idle();
        pool.take_outputs(&mut out);
        let victim: Vec<u16> = out
            .iter()
            .filter(|o| o.port == 11)
            .map(|o| u16::from_be_bytes([o.data[34], o.data[35]]))
            .collect();
        assert_eq!(victim, (0..TICKS).collect::<Vec<_>>(), "{workers} workers");
        let v = pool.fair_stats(1).unwrap();
        assert_eq!((v.queued, v.overflow, v.served), (500, 0, 500));
        let a = pool.fair_stats(2).unwrap();
        assert_eq!(a.queued + a.overflow, u64::from(TICKS * FLOOD));
        assert_eq!(a.served, a.queued);
        let attacker_out = out.iter().filter(|o| o.port == 12).count() as u64;
        assert_eq!(attacker_out, a.served);
        assert_eq!(attacker_out + victim.len() as u64, out.len() as u64);
        // Each dispatch offers 40 to a queue of 32: at least 8 overflow per tick, however
        // fast the worker runs.
        assert!(a.overflow >= u64::from(TICKS) * 8, "{a:?}");
        let sv = pool.device_stats(1).unwrap();
        assert_eq!((sv.packets_in, sv.to_phys), (500, 500));
        println!(
            "{workers} workers: victim {}/{TICKS}; attacker served {}, overflowed {}",
            v.served, a.served, a.overflow
        );
    }
}

/// Both devices start on worker 0 of 2; after 100 dispatched packets the front sees worker 1
/// idle and moves one device there under traffic (its state and waiting packets with it).
/// Every packet of both devices comes out, each device's in order, and one move was enough.
#[test]
fn rebalancing_moves_a_device_under_traffic_losing_nothing() {
    let mut pool = VirtWorkers::new(
        switch(),
        WorkerOptions {
            workers: 2,
            cost: Cost::Bytes,
            quantum: QUANTUM,
            capacity: 4096,
            rebalance_every: 100,
            yield_when_busy: true,
            slice: tern_virt::ThreadSlice::Kernel,
            ..WorkerOptions::default()
        },
    );
    pool.move_group(1, 0).unwrap();
    pool.move_group(2, 0).unwrap();
    // Device 2 started on worker 1: pinning it was one move.
    assert_eq!(pool.moves(), 1);
    let n: u16 = 2000;
    for t in 0..n {
        let (a, b) = (packet(1, t), packet(2, t));
        pool.dispatch(&[(1, &a), (2, &b)]);
    }
    pool.wait_idle();
    let mut out: Vec<OutputPacket> = Vec::new();
    pool.take_outputs(&mut out);
    for (port, dst) in [(11, 1u8), (12, 2)] {
        let seqs: Vec<u16> = out
            .iter()
            .filter(|o| o.port == port)
            .map(|o| {
                assert_eq!(o.data[33], dst);
                u16::from_be_bytes([o.data[34], o.data[35]])
            })
            .collect();
        assert_eq!(seqs, (0..n).collect::<Vec<_>>(), "port {port}");
    }
    assert_eq!(out.len(), 2 * usize::from(n));
    assert_eq!(pool.moves(), 2);
    assert_ne!(pool.worker_of(1), pool.worker_of(2));
    for d in [1, 2] {
        let s = pool.device_stats(d).unwrap();
        assert_eq!((s.packets_in, s.to_phys), (u64::from(n), u64::from(n)));
    }
}

/// [`switch`]'s devices plus an idle third (basic.p4) on one worker with queues of 32, the
/// worker held inside a round (a job of device 3) until the returned sender sends.
fn held_worker() -> (VirtWorkers, std::sync::mpsc::Sender<()>) {
    held_worker_with(WorkerOptions::default())
}

/// [`held_worker`] with `opts`' cost and quantum.
fn held_worker_with(opts: WorkerOptions) -> (VirtWorkers, std::sync::mpsc::Sender<()>) {
    held_worker_on(switch(), opts)
}

/// [`held_worker_with`] over `vs` (the two devices of [`switch`], maybe more rules).
fn held_worker_on(
    mut vs: VirtSwitch,
    opts: WorkerOptions,
) -> (VirtWorkers, std::sync::mpsc::Sender<()>) {
    vs.add_device(
        3,
        DeviceSpec {
            json: basic(),
            owner: None,
            quotas: Quotas::default(),
        },
    )
    .unwrap();
    let pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 1,
            capacity: 32,
            rebalance_every: 0,
            ..opts
        },
    );
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (in_tx, in_rx) = std::sync::mpsc::channel::<()>();
    pool.post(3, move |_| {
        in_tx.send(()).unwrap();
        let _ = hold_rx.recv();
    })
    .unwrap();
    in_rx.recv().unwrap();
    (pool, hold_tx)
}

/// On a worker, a victim's packet does not wait behind the attacker's backlog of dispatches:
/// the worker is held inside a round (a job of an idle third device) while the front
/// dispatches ten attacker dispatches of 64 frames (twice its queue of 32) and then one victim
/// packet. Once released, the victim's packet is the first frame out; the attacker still takes
/// its dispatches one at a time, each overflowing its queue by at least 32. (Taking one
/// dispatch per round for all devices, as the workers did before, put the victim's packet
/// behind ten rounds of attacker frames.)
#[test]
fn on_a_worker_the_victim_does_not_wait_behind_the_attackers_backlog_of_dispatches() {
    let (mut pool, hold_tx) = held_worker();
    let attack: Vec<Vec<u8>> = (0..64).map(|k| packet(2, k)).collect();
    let batch: Vec<(u32, &[u8])> = attack.iter().map(|f| (2, f.as_slice())).collect();
    for _ in 0..10 {
        pool.dispatch(&batch);
    }
    let victim = packet(1, 0);
    pool.dispatch(&[(1, &victim)]);
    hold_tx.send(()).unwrap();
    pool.wait_idle();
    let mut out: Vec<OutputPacket> = Vec::new();
    pool.take_outputs(&mut out);
    let pos = out
        .iter()
        .position(|o| o.port == 11)
        .expect("the victim's packet came out");
    assert_eq!(pos, 0, "{pos} attacker frames out before the victim's");
    // Every attacker frame queued or overflowed, each dispatch (64 into a queue of 32)
    // overflowing by at least 32; every queued one served and out.
    let a = pool.fair_stats(2).unwrap();
    assert_eq!(a.queued + a.overflow, 640);
    assert!(a.overflow >= 320, "{a:?}");
    assert_eq!(a.served, a.queued);
    assert_eq!(out.len() as u64, 1 + a.served);
}

/// A flood's backlog inside the workers is bounded: with the worker held, 40 dispatches of 64
/// attacker frames (2,560) meet the bound of 64 × its queue of 32 = 2,048 packets inside; the
/// front drops the other 512 before copying them (counted with the attacker's overflow),
/// while the victim's packet, dispatched last, goes in and is the first frame out.
#[test]
fn the_front_bounds_a_floods_backlog_inside_the_workers() {
    let (mut pool, hold_tx) = held_worker();
    let attack: Vec<Vec<u8>> = (0..64).map(|k| packet(2, k)).collect();
    let batch: Vec<(u32, &[u8])> = attack.iter().map(|f| (2, f.as_slice())).collect();
    for _ in 0..40 {
        pool.dispatch(&batch);
    }
    assert_eq!(pool.front_drops(2), 512);
    // Port 2's packets all go to device 2 (its one rule): dropped by port, not classified.
    assert_eq!(pool.port_drops(), 512);
    let victim = packet(1, 0);
    pool.dispatch(&[(1, &victim)]);
    assert_eq!(pool.front_drops(1), 0);
    hold_tx.send(()).unwrap();
    pool.wait_idle();
    let mut out: Vec<OutputPacket> = Vec::new();
    pool.take_outputs(&mut out);
    assert_eq!(out.iter().position(|o| o.port == 11), Some(0));
    let a = pool.fair_stats(2).unwrap();
    assert_eq!(a.queued + a.overflow, 2_560, "{a:?}");
    assert_eq!(out.len() as u64, 1 + a.served);
    // Drained: the bound lets the flood in again.
    pool.dispatch(&batch);
    assert_eq!(pool.front_drops(2), 512);
    pool.wait_idle();
}

/// The front drops a flood's frames by port only where the port's every packet goes to the
/// flooding device: with a VLAN rule on port 2 for device 1 beside device 2's rule, the
/// same flood meets the same bound (512 dropped), each frame classified first (no drop by
/// port), and with the VLAN rule naming device 2 as well, all 512 are dropped by port.
#[test]
fn the_front_drops_by_port_only_where_the_port_has_one_device() {
    for (vlan_device, by_port) in [(1, 0), (2, 512)] {
        let mut vs = switch();
        vs.add_rule(Rule {
            priority: 5,
            port: Some(2),
            vlan: Some(10),
            field: None,
            device: vlan_device,
            vport: Some(1),
        })
        .unwrap();
        let (mut pool, hold_tx) = held_worker_on(vs, WorkerOptions::default());
        let attack: Vec<Vec<u8>> = (0..64).map(|k| packet(2, k)).collect();
        let batch: Vec<(u32, &[u8])> = attack.iter().map(|f| (2, f.as_slice())).collect();
        for _ in 0..40 {
            pool.dispatch(&batch);
        }
        assert_eq!(
            pool.front_drops(2),
            512,
            "VLAN rule to device {vlan_device}"
        );
        assert_eq!(
            pool.port_drops(),
            by_port,
            "VLAN rule to device {vlan_device}"
        );
        hold_tx.send(()).unwrap();
        pool.wait_idle();
    }
}

/// A tenant's runtime calls through leases (how the Thrift and P4Runtime servers reach a
/// device on a worker) are control work in that device's fair share, not stops of its worker
/// between two rounds: with the worker held, ten attacker dispatches of 64 frames, each
/// followed by a lease of the attacker's device requested from a control thread, then one
/// victim packet. Once the worker goes on, the victim's packet is the first frame out and
/// every lease was granted (counted in frames: as a call run between rounds, each lease
/// stopped the worker from looking past it, so the victim's packet waited behind ten rounds
/// of attacker frames).
#[test]
fn leases_interleaved_with_a_flood_do_not_hold_the_victims_packet_back() {
    let (mut pool, hold_tx) = held_worker();
    let attack: Vec<Vec<u8>> = (0..64).map(|k| packet(2, k)).collect();
    let batch: Vec<(u32, &[u8])> = attack.iter().map(|f| (2, f.as_slice())).collect();
    let ctl = pool.control();
    let mut leases = Vec::new();
    for _ in 0..10 {
        pool.dispatch(&batch);
        let before = pool.inbox_len(0);
        let c = ctl.clone();
        leases.push(std::thread::spawn(move || c.lease(2).map(drop)));
        // The lease's request is in the inbox behind this dispatch before the next one.
        while pool.inbox_len(0) == before {
            std::thread::yield_now();
        }
    }
    let victim = packet(1, 0);
    pool.dispatch(&[(1, &victim)]);
    hold_tx.send(()).unwrap();
    for l in leases {
        l.join().unwrap().expect("the lease was granted");
    }
    pool.wait_idle();
    let mut out: Vec<OutputPacket> = Vec::new();
    pool.take_outputs(&mut out);
    let pos = out
        .iter()
        .position(|o| o.port == 11)
        .expect("the victim's packet came out");
    assert_eq!(pos, 0, "{pos} attacker frames out before the victim's");
    let a = pool.fair_stats(2).unwrap();
    assert_eq!(a.queued + a.overflow, 640);
    assert_eq!(out.len() as u64, 1 + a.served);
}

/// A victim at its rate whose packets are spread over a flood's backlog of dispatches takes
/// them all at once: with the worker held, ten dispatches, each 64 attacker frames (twice its
/// queue of 32) and one victim packet, charged by bytes (a quantum of 8 of the 50-byte
/// frames, so the counts do not depend on the clock). Once the worker goes on, the victim
/// runs its quantum (8 packets), the attacker its quantum, the victim its last 2: at most
/// one attacker quantum among the victim's ten packets. Taking its staged packets one
/// dispatch a round, the victim's tenth packet waited for nine rounds of attacker frames.
#[test]
fn a_victims_packets_spread_over_a_floods_backlog_all_run_at_once() {
    let (mut pool, hold_tx) = held_worker_with(WorkerOptions {
        cost: Cost::Bytes,
        quantum: QUANTUM,
        ..WorkerOptions::default()
    });
    let frames: Vec<Vec<u8>> = (0..64).map(|k| packet(2, k)).collect();
    let victims: Vec<Vec<u8>> = (0..10).map(|k| packet(1, k)).collect();
    for v in &victims {
        let mut batch: Vec<(u32, &[u8])> = frames.iter().map(|f| (2, f.as_slice())).collect();
        batch.push((1, v.as_slice()));
        pool.dispatch(&batch);
    }
    hold_tx.send(()).unwrap();
    pool.wait_idle();
    let mut out: Vec<OutputPacket> = Vec::new();
    pool.take_outputs(&mut out);
    let at: Vec<usize> = out
        .iter()
        .enumerate()
        .filter(|(_, o)| o.port == 11)
        .map(|(i, _)| i)
        .collect();
    let seqs: Vec<u16> = out
        .iter()
        .filter(|o| o.port == 11)
        .map(|o| u16::from_be_bytes([o.data[34], o.data[35]]))
        .collect();
    assert_eq!(seqs, (0..10).collect::<Vec<_>>());
    assert_eq!(at, [0, 1, 2, 3, 4, 5, 6, 7, 16, 17]);
}

/// `wait_outputs_from` waits for the named workers' outputs only: with the victim on worker 0
/// and the attacker on worker 1, the attacker's frames (all out, in worker 1's ring) do not
/// end a wait for worker 0, end one for worker 1 or for every worker at once, and are all
/// still there for `take_outputs`.
#[test]
fn waiting_for_one_workers_outputs_ignores_the_others() {
    let mut pool = VirtWorkers::new(
        switch(),
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    pool.move_group(1, 0).unwrap();
    pool.move_group(2, 1).unwrap();
    let frames: Vec<Vec<u8>> = (0..16).map(|k| packet(2, k)).collect();
    let batch: Vec<(u32, &[u8])> = frames.iter().map(|f| (2, f.as_slice())).collect();
    pool.dispatch(&batch);
    pool.wait_idle();
    assert!(!pool.wait_outputs_from(&[0], std::time::Duration::from_millis(20)));
    assert!(pool.wait_outputs_from(&[1], std::time::Duration::from_secs(10)));
    assert!(pool.wait_outputs(std::time::Duration::from_secs(10)));
    let mut out: Vec<OutputPacket> = Vec::new();
    pool.take_outputs(&mut out);
    assert_eq!(out.len(), 16);
    assert!(out.iter().all(|o| o.port == 12));
}
