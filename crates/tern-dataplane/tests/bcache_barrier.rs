//! The behaviour cache's barrier with run-to-completion workers: once `Control::update`
//! returns, every worker has applied the change and dropped the cached behaviours it
//! invalidates, so a packet the worker runs right away — without polling first — already sees
//! the new table. Also checks the barrier's latency counters.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};

use tern_dataplane::bcache::Config;
use tern_dataplane::workers;
use tern_dataplane::SwitchOptions;
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};

fn router_json() -> Option<String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/fixtures/bmv2/targets/simple_router/simple_router.json");
    std::fs::read_to_string(path).ok()
}

fn frame() -> Vec<u8> {
    let mut f = vec![0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0];
    f.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 10,
    ]);
    f.resize(64, 0);
    f
}

#[test]
fn an_acknowledged_delete_is_seen_by_every_worker_at_once() {
    tern_fixtures::require!();
    let Some(json) = router_json() else { return };
    let opts = SwitchOptions {
        bcache: Some(Config::default()),
        ..SwitchOptions::default()
    };
    let (mut ctl, ws) = workers::build(&json, opts, 2).expect("loads");
    // Set-up is published before the workers' threads run (they apply it on their first
    // packet), so without the barrier.
    for t in ["send_frame", "forward", "ipv4_lpm"] {
        ctl.update(move |sw| sw.mt_set_default_action(t, "_drop", &[]))
            .expect("default");
    }
    ctl.update(|sw| {
        sw.mt_add_entry(
            "send_frame",
            &[MatchParam::Exact(vec![0, 2])],
            "rewrite_mac",
            &[vec![0, 0xaa, 0xbb, 0, 0, 1]],
            None,
        )
    })
    .expect("send_frame");
    ctl.update(|sw| {
        sw.mt_add_entry(
            "forward",
            &[MatchParam::Exact(vec![10, 0, 1, 10])],
            "set_dmac",
            &[vec![0, 4, 0, 0, 0, 1]],
            None,
        )
    })
    .expect("forward");
    let route = ctl
        .update(|sw| {
            sw.mt_add_entry(
                "ipv4_lpm",
                &[MatchParam::Lpm {
                    key: vec![10, 0, 1, 10],
                    prefix_len: 32,
                }],
                "set_nhop",
                &[vec![10, 0, 1, 10], vec![0, 2]],
                None,
            )
        })
        .expect("route");
    // Phase 0: forward (and cache); phase 1: run one packet without polling and report.
    let phase = Arc::new(AtomicU32::new(0));
    let (tx, rx) = mpsc::channel::<(usize, &'static str, usize)>();
    let f = frame();
    let handles: Vec<_> = ws
        .into_iter()
        .map(|mut w| {
            let (phase, tx, f) = (phase.clone(), tx.clone(), f.clone());
            std::thread::spawn(move || {
                let mut out: Vec<OutputPacket> = Vec::new();
                let mut warmed = false;
                loop {
                    match phase.load(Ordering::SeqCst) {
                        0 => {
                            w.process_packet(1, &f, &mut out);
                            if !warmed && out.len() == 1 {
                                warmed = true;
                                let _ = tx.send((w.id, "warm", out.len()));
                            }
                            w.recycle_outputs(&mut out);
                            out.clear();
                        }
                        1 => {
                            // No poll: the barrier already made this worker apply the delete.
                            w.switch_mut().process_packet(1, &f, &mut out);
                            let _ = tx.send((w.id, "after", out.len()));
                            return w.bcache_stats();
                        }
                        _ => return None,
                    }
                    std::thread::yield_now();
                }
            })
        })
        .collect();
    drop(tx);
    // Both workers forward and cache the flow first.
    for _ in 0..2 {
        let (_, what, n) = rx.recv().expect("warm");
        assert_eq!((what, n), ("warm", 1));
    }
    ctl.set_barrier(true);
    ctl.update(move |sw| sw.mt_delete_entry("ipv4_lpm", route))
        .expect("delete");
    phase.store(1, Ordering::SeqCst);
    for _ in 0..2 {
        let (id, what, n) = rx.recv().expect("after");
        assert_eq!(
            (what, n),
            ("after", 0),
            "worker {id} forwarded after the delete"
        );
    }
    for h in handles {
        let st = h.join().expect("worker").expect("cache on");
        assert!(st.hits > 0 && st.invalidated > 0, "{st}");
    }
    let b = ctl.barrier_stats();
    assert_eq!(b.count, 1, "{b:?}");
    assert_eq!(b.timeouts, 0);
    assert!(
        b.max_ns >= b.p99_ns && b.p99_ns >= b.p50_ns && b.p50_ns > 0,
        "{b:?}"
    );
}
