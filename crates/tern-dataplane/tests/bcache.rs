//! The behaviour cache's contract on the BMv2 fixtures: a switch with the cache and one
//! without, driven in lock-step by the differential harness (`tern_dataplane::bcache::diff`),
//! agree on every packet, digest, log line and, periodically, all state. Each cacheable
//! program gets `TERN_BCACHE_EVENTS` events (default 100,000); programs whose ingress the
//! analysis refuses get a shorter run (the cache is bypassed, the harness still checks that).

#[allow(dead_code)] // the shared generator is not used here
mod common;
use common::fixture_jsons;
use tern_dataplane::bcache::diff::Diff;
use tern_dataplane::bcache::{Admission, Config, Eviction};

fn events() -> u64 {
    std::env::var("TERN_BCACHE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

#[test]
fn cached_and_uncached_switches_agree_on_every_fixture() {
    tern_fixtures::require!();
    let n = events();
    let (mut cacheable, mut total_events, mut hits, mut egress_hits) = (0, 0u64, 0u64, 0u64);
    let mut resumed = 0u64;
    // Hits of cached switches whose packets all take the fast lane (served there).
    let (mut lane_programs, mut lane_hits) = (0, 0u64);
    let mut lines = Vec::new();
    for (i, path) in fixture_jsons().iter().enumerate() {
        let json = std::fs::read_to_string(path).expect("read fixture");
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        // Small caches with every policy in turn, so evictions happen too.
        let cfg = Config {
            capacity: [64, 4096, 16][i % 3],
            admission: [
                Admission::Always,
                Admission::CountMin { threshold: 1 },
                Admission::TinyLfu {
                    threshold: 0,
                    window: 500,
                },
            ][i % 3],
            eviction: [Eviction::Clock, Eviction::Fifo][i % 2],
            skip_tables: Vec::new(),
            stateful: Default::default(),
            egress: true,
        };
        let Ok(mut d) = Diff::new(&json, cfg, 0x5eed + i as u64) else {
            continue; // not loadable by simple_switch either (the loader tests cover that)
        };
        let ok = d.on.bcache_plan().is_some_and(|p| p.uncacheable.is_none());
        let t = std::time::Instant::now();
        let r = d
            .run(if ok { n } else { n / 50 }, 997)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        println!("{name}: {:.1} s", t.elapsed().as_secs_f64());
        if ok {
            cacheable += 1;
        }
        if ok && d.on.lane_why_not().is_none() {
            assert_eq!(r.lane, r.packets, "{name}: every packet takes the lane");
            lane_programs += 1;
            lane_hits += r.stats.hits;
        }
        total_events += r.events;
        hits += r.stats.hits;
        resumed += r.stats.resumed;
        if let Some(e) = d.on.bcache_egress_stats() {
            egress_hits += e.hits;
        }
        lines.push(format!(
            "{name}: {} events, {} packets, {} outputs, {} control ops, {} state checks; {}",
            r.events,
            r.packets,
            r.outputs,
            r.controls,
            r.state_checks,
            match d.on.bcache_plan().and_then(|p| p.uncacheable.clone()) {
                None => format!(
                    "{}; egress: {}",
                    r.stats,
                    d.on.bcache_egress_stats()
                        .map_or("none".to_string(), |e| e.to_string())
                ),
                Some(why) => format!("not cached: {why}"),
            }
        ));
        assert_eq!(
            r.stats.insert_refused_unexpected_write, 0,
            "{name}: the analysis missed a write"
        );
    }
    for l in &lines {
        println!("{l}");
    }
    println!("{cacheable} cacheable programs, {total_events} events, {hits} hits ({resumed} of a cached prefix), {egress_hits} egress hits; {lane_programs} programs on the fast lane with {lane_hits} hits there");
    assert!(cacheable >= 5, "only {cacheable} fixtures were cacheable");
    // Egress is cached, and a program with a meter late in ingress (serialize.json) has its
    // prefix cached.
    assert!(hits > 0 && egress_hits > 0 && resumed > 0);
    // The fast lane serves hits (`switch/fast_cache.rs`): the parity above covers it.
    assert!(
        lane_programs > 0 && lane_hits > 0,
        "no hits on the fast lane"
    );
}

/// The fast lane serves the cache's hits (`switch/fast_cache.rs`): on the paper's cases #1
/// and #4 (native code, every packet on the lane) the differential harness's cached switch
/// hits on the lane and agrees with the uncached one on every packet and all state.
#[test]
fn the_fast_lane_serves_hits_on_the_papers_cases() {
    for (i, case) in ["case1", "case4"].iter().enumerate() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../../p4/bcache/{case}.p4"));
        let json = match tern_p4::compile_file(&path, &tern_p4::Options::default()) {
            Ok(c) => c.json,
            Err(d) => panic!("{case}.p4 does not compile: {d:?}"),
        };
        let cfg = Config {
            capacity: [4096, 64][i],
            ..Config::default()
        };
        let mut d = Diff::new(&json, cfg, 0x1a2e + i as u64).expect("load");
        assert_eq!(
            d.on.lane_why_not(),
            None,
            "{case}: {}",
            d.on.native_summary()
        );
        let r = d
            .run((events() / 5).max(5_000), 997)
            .unwrap_or_else(|e| panic!("{case}: {e}"));
        println!(
            "{case}: {} packets, {} on the lane; {}",
            r.packets, r.lane, r.stats
        );
        assert_eq!(r.lane, r.packets, "{case}: every packet takes the lane");
        // At least one packet in 20 a hit (about one in ten at 20,000 events: the harness's
        // mutated packets and control changes make most of them new behaviours).
        assert!(r.stats.hits > r.packets / 20, "{case}: {}", r.stats);
    }
}
