//! Table exhaustion under traffic (issue 17, h-pool: where does its allocation come from?):
//! a tenant whose table is at its entry quota keeps adding entries through control work
//! posted with every dispatch, as the isolation bench's attacker. Counted by thread: the
//! refused adds allocate nothing in tern (on the worker that runs them); the front's only
//! allocation is the posted job's box, one per dispatch, which the worker frees. (The
//! bench's attacker also builds its keys inside the job: those allocations are its own.)
//! A global allocator counts every thread's allocations while a window is open (this file
//! holds one test, so no other test's allocations run meanwhile).

mod common;

use std::sync::Arc;

use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{Caller, DeviceSpec, Quotas, Target, VirtSwitch, VirtWorkers, WorkerOptions};

use common::{compile, packet, route};

#[global_allocator]
static A: common::Counting = common::Counting;

fn key(n: u64) -> Vec<MatchParam> {
    vec![MatchParam::Exact(n.to_be_bytes()[2..].to_vec())]
}

/// The victim (basic.p4, routed) and an attacker with a 65,536-entry table under a quota of
/// 1,024 entries, on one worker; each dispatch carries 8 packets of each and posts a job of
/// 64 adds (fresh keys, built beforehand) to the attacker. After 1,000 dispatches (the
/// quota long reached), 100 more: 0 allocations on the worker, 100 on the front (the jobs'
/// boxes) and 100 frees on the worker (the same boxes); every add refused, every victim
/// packet out.
#[test]
fn refused_adds_allocate_nothing_and_the_front_only_its_jobs() {
    let router = compile("p4/tutorials/basic.p4");
    let src = r#"
#include <core.p4>
#include <v1model.p4>
header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers { eth_t eth; }
struct metadata { }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition accept; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    table t { key = { h.eth.dst: exact; } actions = { fwd; NoAction; } size = 65536; default_action = NoAction(); }
    apply { sm.egress_spec = 1; t.apply(); }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let json = tern_p4::compile_str(src, "a.p4", &tern_p4::Options::default())
        .unwrap()
        .json;
    let mut vs = VirtSwitch::new();
    vs.add_device(
        1,
        DeviceSpec {
            json: router,
            owner: Some("alice".into()),
            quotas: Quotas::default(),
        },
    )
    .unwrap();
    vs.add_device(
        2,
        DeviceSpec {
            json,
            owner: Some("mallory".into()),
            quotas: Quotas {
                max_entries: Some(1024),
                ..Quotas::default()
            },
        },
    )
    .unwrap();
    route(
        &mut vs.runtime(Caller::Operator, 1).unwrap(),
        [10, 0, 2, 2],
        2,
    );
    vs.add_rule(common::port_rule(1, 1)).unwrap();
    vs.add_rule(common::port_rule(5, 2)).unwrap();
    vs.map_port(1, 2, Target::Phys(2)).unwrap();
    vs.map_port(2, 1, Target::Phys(3)).unwrap();
    let mut pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers: 1,
            capacity: 32,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    let (v, a) = (packet([10, 0, 2, 2]), packet([10, 0, 9, 9]));
    let mut batch: Vec<(u32, &[u8])> = (0..8).map(|_| (5, &a[..])).collect();
    batch.extend((0..8).map(|_| (1, &v[..])));
    let mut out: Vec<OutputPacket> = Vec::with_capacity(4096);
    // Keys for every add of the run, built before it (the jobs share them).
    let keys: Arc<Vec<Vec<MatchParam>>> = Arc::new((0..1100 * 64).map(key).collect());
    let data: Arc<Vec<Vec<u8>>> = Arc::new(vec![vec![0, 3]]);
    let refused = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut no = 0usize;
    let mut run = |pool: &mut VirtWorkers, out: &mut Vec<OutputPacket>| {
        let (keys, data, refused) = (keys.clone(), data.clone(), refused.clone());
        let b = no;
        no += 1;
        pool.post(2, move |vs| {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), 2).unwrap();
            for k in &keys[b * 64..b * 64 + 64] {
                if rt.mt_add_entry("I.t", k, "I.fwd", &data, None).is_err() {
                    refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        })
        .unwrap();
        pool.process_batch(&batch, out);
        assert_eq!(out.iter().filter(|o| o.port == 2).count(), 8);
        pool.recycle_outputs(out);
    };
    for _ in 0..1000 {
        run(&mut pool, &mut out);
    }
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::Relaxed),
        1000 * 64 - 1024
    );
    common::start();
    for _ in 0..100 {
        run(&mut pool, &mut out);
    }
    let n = common::stop_by_thread();
    assert_eq!(
        n,
        common::ByThread {
            front_allocs: 100,
            front_frees: 0,
            worker_allocs: 0,
            worker_frees: 100,
        },
        "100 dispatches, each with a job of 64 refused adds"
    );
    assert_eq!(
        refused.load(std::sync::atomic::Ordering::Relaxed),
        1100 * 64 - 1024
    );
}
