//! The behaviour cache on stateful programs (`p4/bcache/heavy_hitter.p4`,
//! `p4/bcache/stateful_firewall.p4`): in both stateful modes (the paper's value-in-key and
//! tern's symbolic updates) a cached switch and an uncached one agree on every packet and,
//! periodically, on every register cell, through the differential harness (control-plane
//! register writes included). Prints each mode's hit ratio; on the heavy hitter, whose count
//! changes with every packet, only the symbolic mode can hit.

use tern_dataplane::bcache::diff::Diff;
use tern_dataplane::bcache::{Config, Stateful, Stats};

fn events() -> u64 {
    std::env::var("TERN_BCACHE_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

fn compile(file: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../p4/bcache")
        .join(file);
    match tern_p4::compile_file(&path, &tern_p4::Options::default()) {
        Ok(c) => c.json,
        Err(d) => panic!("{file} does not compile: {d:?}"),
    }
}

/// Run the harness on `json` in `mode`; the cached switch's counters.
fn run(name: &str, json: &str, mode: Stateful, symbolic_expected: bool) -> Stats {
    let cfg = Config {
        capacity: 4096,
        stateful: mode,
        ..Config::default()
    };
    let mut d = Diff::new(json, cfg, 0x57a7e).unwrap_or_else(|e| panic!("{name}: {e}"));
    let plan = d.on.bcache_plan().expect("cache on").clone();
    assert!(plan.uncacheable.is_none(), "{name}: {:?}", plan.uncacheable);
    assert!(plan.stateful, "{name}: the analysis saw no register access");
    assert_eq!(
        plan.state_fields.is_some(),
        symbolic_expected,
        "{name} ({mode:?}): symbolic refused: {:?}",
        plan.symbolic_refused
    );
    let r = d
        .run(events(), 997)
        .unwrap_or_else(|e| panic!("{name} ({mode:?}): {e}"));
    println!(
        "{name} ({mode:?}): {} events, {} packets, {} control ops, {} state checks; {}",
        r.events, r.packets, r.controls, r.state_checks, r.stats
    );
    assert_eq!(r.stats.insert_refused_unexpected_write, 0, "{name}");
    r.stats
}

fn ratio(s: &Stats) -> f64 {
    s.hits as f64 / s.lookups.max(1) as f64
}

#[test]
fn heavy_hitter_agrees_in_both_modes_and_symbolic_hits() {
    let json = compile("heavy_hitter.p4");
    let v = run("heavy_hitter", &json, Stateful::Value, false);
    let s = run("heavy_hitter", &json, Stateful::Symbolic, true);
    println!(
        "heavy_hitter hit ratio: value {:.1}%, symbolic {:.1}%",
        100.0 * ratio(&v),
        100.0 * ratio(&s)
    );
    // The count changes with every IPv4 packet: value guards fail on nearly every repeat,
    // symbolic ones only when a source crosses the threshold.
    assert!(v.miss_guard > 0, "{v}");
    assert!(
        s.hits > v.hits && s.miss_guard * 10 < v.miss_guard,
        "symbolic should hit more: value {v}, symbolic {s}"
    );
}

#[test]
fn stateful_firewall_agrees_in_both_modes() {
    let json = compile("stateful_firewall.p4");
    let v = run("stateful_firewall", &json, Stateful::Value, false);
    let s = run("stateful_firewall", &json, Stateful::Symbolic, true);
    println!(
        "stateful_firewall hit ratio: value {:.1}%, symbolic {:.1}%",
        100.0 * ratio(&v),
        100.0 * ratio(&s)
    );
    assert!(v.hits > 0 && s.hits > 0);
}

#[test]
fn stateful_off_bypasses() {
    let json = compile("heavy_hitter.p4");
    let cfg = Config {
        stateful: Stateful::Off,
        ..Config::default()
    };
    let mut d = Diff::new(&json, cfg, 1).expect("loads");
    let why = d.on.bcache_plan().and_then(|p| p.uncacheable.clone());
    assert!(
        why.as_deref()
            .is_some_and(|w| w.contains("stateful caching is off")),
        "{why:?}"
    );
    let r = d.run(2_000, 997).expect("agree");
    assert_eq!(r.stats.hits, 0);
    assert_eq!(r.stats.bypass_uncacheable, r.stats.lookups);
}

/// Case #4 (`p4/bcache/case4.p4`: VLAN insertion/removal, multicast, digests, counters,
/// ageing) with its egress cached too.
#[test]
fn case4_agrees_with_ingress_and_egress_cached() {
    let json = compile("case4.p4");
    let cfg = Config {
        egress: true,
        ..Config::default()
    };
    let mut d = Diff::new(&json, cfg, 0xca5e4).expect("loads");
    let r = d
        .run(events(), 997)
        .unwrap_or_else(|e| panic!("case4: {e}"));
    let eg = d.on.bcache_egress_stats().expect("egress cache");
    println!("case4: {}; egress: {eg}", r.stats);
    assert!(r.stats.hits > 0 && eg.hits > 0);
}
