//! Refused writes are counted apart (issue 17, h-harden): every write call through a device's
//! runtime counts in `DeviceStats::control_work`, and one that returns an error (past the
//! entry quota, an unknown table or entry) in `control_refused` too, so the scheduler prices
//! refusals apart from applied writes (`ControlPrice`: cheap refusals cannot lower the price
//! of dear writes).

use tern_runtime::{MatchParam, OutputPacket, Runtime};
use tern_virt::{Caller, Cost, DeviceSpec, FairScheduler, Quotas, VirtSwitch};

mod common;
use common::basic;

fn add(rt: &mut dyn Runtime, last: u8) -> bool {
    rt.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 2, last],
            prefix_len: 32,
        }],
        "MyIngress.ipv4_forward",
        &[vec![8, 0, 0, 0, 2, 0x22], vec![0, 2]],
        None,
    )
    .is_ok()
}

#[test]
fn refused_writes_are_counted_apart_and_reach_the_scheduler() {
    let mut vs = VirtSwitch::new();
    vs.add_device(
        1,
        DeviceSpec {
            json: basic(),
            owner: Some("mallory".into()),
            quotas: Quotas {
                max_entries: Some(2),
                ..Quotas::default()
            },
        },
    )
    .unwrap();
    let mut fair = FairScheduler::with_cost(Cost::Work, 20_000, 64);
    // Three adds against a quota of 2 (the third refused), an add to an unknown table and
    // the delete of an unknown entry (both refused): 5 writes, 3 refused.
    fair.enqueue_job(
        1,
        Box::new(|vs: &mut VirtSwitch| {
            let mut rt = vs.runtime(Caller::Tenant("mallory"), 1).unwrap();
            assert_eq!(
                [add(&mut rt, 1), add(&mut rt, 2), add(&mut rt, 3)],
                [true, true, false]
            );
            assert!(rt.mt_add_entry("nope", &[], "nope", &[], None).is_err());
            assert!(rt.mt_delete_entry("MyIngress.ipv4_lpm", 999).is_err());
        }),
    );
    let mut out: Vec<OutputPacket> = Vec::new();
    while fair.backlog() > 0 {
        fair.run_round(&mut vs, &mut out);
    }
    let s = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!((s.control_work, s.control_refused), (5, 3));
    let f = fair.stats(1);
    assert_eq!((f.jobs, f.control_units, f.control_refused), (1, 5, 3));
    // A clear that succeeds refuses nothing.
    vs.runtime(Caller::Operator, 1)
        .unwrap()
        .mt_clear_entries("MyIngress.ipv4_lpm", false)
        .unwrap();
    let s = vs.device_stats(Caller::Operator, 1).unwrap();
    assert_eq!((s.control_work, s.control_refused), (7, 3));
}
