//! Behaviour-cache invalidation cost: INSTALLED cached behaviours of simple_router (BMv2's
//! fixture), of which 10,000 depend on one route, then three control changes that each affect
//! those 10,000 — delete the route, re-add it, modify it — timed (wall clock, for a quiet
//! machine) and counted (entries removed, index references examined).
//! `bcache_invalidate [INSTALLED]` (default 10,000; a multiple of 10,000). The target:
//! under 20 ms for 10,000 affected entries, with 10k and with 1M installed.

use std::time::Instant;

use tern_dataplane::bcache::{Config, Stats};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, RtResult, Runtime};

const PER_ROUTE: u32 = 10_000;

fn frame(dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0];
    f.extend_from_slice(&[0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1]);
    f.extend_from_slice(&dst);
    f.resize(64, 0);
    f
}

fn route(k: u32) -> MatchParam {
    MatchParam::Lpm {
        key: vec![11, (k >> 8) as u8, k as u8, 0],
        prefix_len: 24,
    }
}

fn ok<T>(r: RtResult<T>, what: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("bcache_invalidate: {what}: {e}");
        std::process::exit(1)
    })
}

fn report(what: &str, before: &Stats, after: &Stats, us: f64) {
    println!(
        "{what}: {:.3} ms, {} entries removed, {} index references examined, {} entries left",
        us / 1000.0,
        after.invalidated - before.invalidated,
        after.invalidation_scanned - before.invalidation_scanned,
        after.entries
    );
}

fn main() {
    let installed: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(PER_ROUTE);
    let routes = (installed / PER_ROUTE).max(1);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bmv2/targets/simple_router/simple_router.json"
    );
    let Ok(json) = std::fs::read_to_string(path) else {
        println!("skipping: {path} not found");
        return;
    };
    let opts = SwitchOptions {
        bcache: Some(Config {
            capacity: (routes * PER_ROUTE) as usize + 1024,
            ..Config::default()
        }),
        ..SwitchOptions::default()
    };
    let mut sw = match Switch::from_json(&json, opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bcache_invalidate: {e}");
            std::process::exit(1);
        }
    };
    for t in ["send_frame", "forward", "ipv4_lpm"] {
        ok(sw.mt_set_default_action(t, "_drop", &[]), t);
    }
    ok(
        sw.mt_add_entry(
            "send_frame",
            &[MatchParam::Exact(vec![0, 2])],
            "rewrite_mac",
            &[vec![0, 0xaa, 0xbb, 0, 0, 1]],
            None,
        ),
        "send_frame",
    );
    ok(
        sw.mt_add_entry(
            "forward",
            &[MatchParam::Exact(vec![10, 0, 1, 10])],
            "set_dmac",
            &[vec![0, 4, 0, 0, 0, 1]],
            None,
        ),
        "forward",
    );
    let params = [vec![10, 0, 1, 10], vec![0, 2]];
    let mut handles = Vec::new();
    for k in 0..routes {
        handles.push(ok(
            sw.mt_add_entry("ipv4_lpm", &[route(k)], "set_nhop", &params, None),
            "route",
        ));
    }
    // PER_ROUTE flows under route k (11.k_hi.k_lo.0/24): the last address byte and the
    // TTL (written, so in the key) tell them apart.
    let mut out: Vec<OutputPacket> = Vec::new();
    let t = Instant::now();
    for k in 0..routes {
        for i in 0..PER_ROUTE {
            let mut f = frame([11, (k >> 8) as u8, k as u8, i as u8]);
            f[22] = 1 + (i >> 8) as u8 % 250;
            f[26] = (i >> 8) as u8;
            sw.process_packet(1, &f, &mut out);
            sw.recycle_outputs(&mut out);
        }
    }
    let fill_s = t.elapsed().as_secs_f64();
    let s0 = sw.bcache_stats().unwrap_or_default();
    println!(
        "installed: {} cached behaviours ({} routes x {PER_ROUTE} flows) in {fill_s:.1} s; {} bytes",
        s0.entries, routes, s0.bytes
    );
    let t = Instant::now();
    ok(sw.mt_delete_entry("ipv4_lpm", handles[0]), "delete");
    let us = t.elapsed().as_secs_f64() * 1e6;
    let s1 = sw.bcache_stats().unwrap_or_default();
    report("delete the route", &s0, &s1, us);
    // Re-cache route 0's flows (they now miss the table and hit the default).
    for i in 0..PER_ROUTE {
        let mut f = frame([11, 0, 0, i as u8]);
        f[22] = 1 + (i >> 8) as u8 % 250;
        f[26] = (i >> 8) as u8;
        sw.process_packet(1, &f, &mut out);
        sw.recycle_outputs(&mut out);
    }
    let s1 = sw.bcache_stats().unwrap_or_default();
    let t = Instant::now();
    let h = ok(
        sw.mt_add_entry("ipv4_lpm", &[route(0)], "set_nhop", &params, None),
        "re-add",
    );
    let us = t.elapsed().as_secs_f64() * 1e6;
    let s2 = sw.bcache_stats().unwrap_or_default();
    report("add the route back", &s1, &s2, us);
    for i in 0..PER_ROUTE {
        let mut f = frame([11, 0, 0, i as u8]);
        f[22] = 1 + (i >> 8) as u8 % 250;
        f[26] = (i >> 8) as u8;
        sw.process_packet(1, &f, &mut out);
        sw.recycle_outputs(&mut out);
    }
    let s2 = sw.bcache_stats().unwrap_or_default();
    let t = Instant::now();
    ok(
        sw.mt_modify_entry("ipv4_lpm", h, "set_nhop", &[vec![10, 0, 1, 10], vec![0, 3]]),
        "modify",
    );
    let us = t.elapsed().as_secs_f64() * 1e6;
    let s3 = sw.bcache_stats().unwrap_or_default();
    report("modify the route", &s2, &s3, us);
}
