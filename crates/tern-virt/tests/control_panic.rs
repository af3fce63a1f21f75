//! A panic in a tenant's control work on a worker thread (issue 17, h-harden): a posted job
//! (`VirtWorkers::post`), a step of a posted batch (`post_steps`), a job with an answer
//! (`submit`) and a control call (`call`) each run under their own panic boundary on the
//! device's worker. The panic quarantines that device (as a panic in its packets does), the
//! caller of `submit` and `call` gets an error, a batch's later steps are dropped, and the
//! worker goes on serving its other devices: the victim's packets are checked one by one,
//! with 1 worker (victim and panicking tenant on the same thread) and 2.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{Caller, DeviceId, Rule, Target, VirtSwitch, VirtWorkers, WorkerOptions};

mod common;
use common::{basic, spec};

const VICTIM: DeviceId = 1;
const TENANT: DeviceId = 2;

fn route(rt: &mut dyn Runtime, dst: [u8; 4], port: u8) -> Result<(), String> {
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
    .map(|_| ())
    .map_err(|e| e.to_string())
}

/// IPv4 10.0.1.1 → `dst`, a payload carrying `seq`.
fn packet(dst: [u8; 4], seq: u16) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    p.extend_from_slice(&[0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1]);
    p.extend_from_slice(&dst);
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0x5a; 14]);
    p
}

const V_DST: [u8; 4] = [10, 0, 2, 2];

/// What basic.p4 makes of the victim's packet (port 2).
fn expected(seq: u16) -> Vec<u8> {
    let mut native =
        tern_dataplane::Switch::from_json(&basic(), tern_dataplane::SwitchOptions::default())
            .unwrap();
    route(&mut native, V_DST, 2).unwrap();
    let mut out = Vec::new();
    tern_runtime::PacketPath::process_packet(&mut native, 1, &packet(V_DST, seq), &mut out);
    assert_eq!(out.len(), 1);
    out.remove(0).data
}

/// The victim on physical port 1 (out on 2), the tenant on port 10 (out on 12); both
/// basic.p4 with one route.
fn pool(workers: usize) -> VirtWorkers {
    let mut vs = VirtSwitch::new();
    for (id, port, out) in [(VICTIM, 1, 2), (TENANT, 10, 12)] {
        vs.add_device(id, spec(&basic())).unwrap();
        route(&mut vs.runtime(Caller::Operator, id).unwrap(), V_DST, 2).unwrap();
        vs.add_rule(Rule {
            priority: 0,
            port: Some(port),
            vlan: None,
            field: None,
            device: id,
            vport: Some(1),
        })
        .unwrap();
        vs.map_port(id, 2, Target::Phys(out)).unwrap();
    }
    VirtWorkers::new(
        vs,
        WorkerOptions {
            workers,
            ..WorkerOptions::default()
        },
    )
}

/// `n` victim packets, each dispatched alone and checked: exactly its routed frame out.
fn victim_served(p: &mut VirtWorkers, seqs: std::ops::Range<u16>) {
    let mut out: Vec<OutputPacket> = Vec::new();
    for seq in seqs {
        let f = packet(V_DST, seq);
        p.process_batch(&[(1, &f)], &mut out);
        let got: Vec<(u32, Vec<u8>)> = out.iter().map(|o| (o.port, o.data.clone())).collect();
        assert_eq!(got, vec![(2, expected(seq))], "victim packet {seq}");
        p.recycle_outputs(&mut out);
    }
}

fn quarantine(p: &VirtWorkers, id: DeviceId) -> Option<String> {
    p.call(id, move |vs| vs.quarantine(Caller::Operator, id))
        .unwrap()
        .unwrap()
}

fn release(p: &VirtWorkers, id: DeviceId) {
    p.call(id, move |vs| vs.release(id)).unwrap().unwrap();
}

/// The tenant's packets while quarantined: none out.
fn tenant_dropped(p: &mut VirtWorkers, n: u16) {
    let frames: Vec<Vec<u8>> = (0..n).map(|s| packet(V_DST, s)).collect();
    let batch: Vec<(u32, &[u8])> = frames.iter().map(|f| (10, f.as_slice())).collect();
    let mut out = Vec::new();
    p.process_batch(&batch, &mut out);
    assert!(out.is_empty(), "{} tenant frames out", out.len());
}

#[test]
fn a_panic_in_a_posted_job_quarantines_its_device_and_the_worker_goes_on() {
    for workers in [1, 2] {
        let mut p = pool(workers);
        victim_served(&mut p, 0..5);
        p.post(TENANT, |_| panic!("tenant state tripped an assertion"))
            .unwrap();
        victim_served(&mut p, 5..40);
        let why = quarantine(&p, TENANT).expect("quarantined");
        assert!(
            why.contains("control job") && why.contains("tripped an assertion"),
            "{why}"
        );
        assert_eq!(quarantine(&p, VICTIM), None);
        let s = p.device_stats(TENANT).unwrap();
        assert_eq!((s.panics, s.packets_in), (1, 0));
        let f = p.fair_stats(TENANT).unwrap();
        assert_eq!((f.jobs, f.job_panics), (1, 1));
        // Its port leads only to it: the front drops its frames (the quarantine board).
        let before = p.stats().quarantined_port;
        tenant_dropped(&mut p, 7);
        assert_eq!(p.stats().quarantined_port - before, 7);
        assert_eq!(p.device_stats(TENANT).unwrap().packets_in, 0);
        // Released, its state is as the job left it (the route added before still works).
        release(&p, TENANT);
        let mut out = Vec::new();
        p.process_batch(&[(10, &packet(V_DST, 99))], &mut out);
        assert_eq!(out.len(), 1, "{workers} workers");
        assert_eq!(out[0].port, 12);
        p.recycle_outputs(&mut out);
        victim_served(&mut p, 40..45);
        let mut out = Vec::new();
        drop(p.shutdown(&mut out));
    }
}

#[test]
fn a_panic_in_a_step_drops_the_rest_of_its_batch() {
    for workers in [1, 2] {
        let mut p = pool(workers);
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        // Ten steps, each adding a route; step 3 panics: steps 0, 1, 2 added theirs, 4–9
        // never run.
        p.post_steps(TENANT, 10, move |vs, i| {
            r.fetch_add(1, Ordering::SeqCst);
            if i == 3 {
                panic!("step {i} tripped an assertion");
            }
            route(
                &mut vs.runtime(Caller::Operator, TENANT).unwrap(),
                [10, 9, 0, i as u8],
                2,
            )
            .unwrap();
        })
        .unwrap();
        // A later job of the same device still runs (and sees the three routes).
        let answer = p
            .submit(TENANT, |vs| {
                vs.runtime(Caller::Operator, TENANT)
                    .unwrap()
                    .mt_get_entries("MyIngress.ipv4_lpm")
                    .unwrap()
                    .len()
            })
            .unwrap();
        victim_served(&mut p, 0..40);
        assert_eq!(answer.recv().unwrap().unwrap(), 4, "1 route + 3 steps");
        assert_eq!(ran.load(Ordering::SeqCst), 4, "{workers} workers");
        let f = p.fair_stats(TENANT).unwrap();
        assert_eq!((f.jobs, f.job_panics), (5, 1));
        assert_eq!(p.device_stats(TENANT).unwrap().panics, 1);
        assert!(quarantine(&p, TENANT).unwrap().contains("step 3"));
        assert_eq!(quarantine(&p, VICTIM), None);
        let mut out = Vec::new();
        drop(p.shutdown(&mut out));
    }
}

#[test]
fn a_panic_in_a_call_or_a_submitted_job_answers_the_caller_with_an_error() {
    for workers in [1, 2] {
        let mut p = pool(workers);
        let r: Result<u32, _> = p.call(TENANT, |_| panic!("a call tripped an assertion"));
        let e = r.unwrap_err().to_string();
        assert!(e.contains("device 2") && e.contains("panicked"), "{e}");
        assert!(quarantine(&p, TENANT).unwrap().contains("a call tripped"));
        victim_served(&mut p, 0..20);
        release(&p, TENANT);
        let ok = p.submit(TENANT, |_| 7u32).unwrap();
        let bad = p
            .submit(TENANT, |_| -> u32 {
                panic!("a submitted job tripped an assertion")
            })
            .unwrap();
        victim_served(&mut p, 20..40);
        assert_eq!(ok.recv().unwrap().unwrap(), 7);
        let e = bad.recv().unwrap().unwrap_err().to_string();
        assert!(e.contains("panicked"), "{e}");
        assert!(quarantine(&p, TENANT)
            .unwrap()
            .contains("a submitted job tripped"));
        assert_eq!(p.device_stats(TENANT).unwrap().panics, 2);
        assert_eq!(p.device_stats(VICTIM).unwrap().panics, 0);
        victim_served(&mut p, 40..45);
        let mut out = Vec::new();
        drop(p.shutdown(&mut out));
    }
}

/// A tenant's control thread that panics while it holds a lease on the device's worker
/// (Thrift or P4Runtime through `SharedDevice`): the lease is dropped while unwinding, the
/// device is quarantined, the worker goes on.
#[test]
fn a_panic_while_holding_a_lease_quarantines_the_device() {
    let mut p = pool(1);
    let c = p.control();
    let h = std::thread::spawn(move || {
        let mut l = c.lease(TENANT).unwrap();
        route(
            &mut l.runtime(Caller::Operator, TENANT).unwrap(),
            [10, 9, 9, 9],
            2,
        )
        .unwrap();
        panic!("the control thread tripped an assertion");
    });
    assert!(h.join().is_err());
    assert!(quarantine(&p, TENANT)
        .unwrap()
        .contains("while holding the lease"));
    victim_served(&mut p, 0..20);
    let mut out = Vec::new();
    drop(p.shutdown(&mut out));
}
