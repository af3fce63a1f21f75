//! `tern kv experiment all --quick`: every experiment of FarReach's evaluation runs with the
//! three methods in a temporary directory and writes well-formed JSON and Markdown; the caches
//! really answer from the switch on skewed workloads (FarReach's and NetCache's switch share is
//! positive, NoCache's zero), FarReach's snapshots and recovery happen, and the resource table
//! has each program's registers. No timing is asserted.

use std::process::Command;

fn json(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let p = dir.join(format!("{name}.json"));
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap()
}

fn point<'a>(r: &'a serde_json::Value, x: &str, m: &str) -> &'a serde_json::Value {
    r["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["x"] == x && p["method"] == m)
        .unwrap_or_else(|| panic!("{}: no point {x} {m}", r["experiment"]))
}

fn mean(v: &serde_json::Value) -> f64 {
    let a = v.as_array().unwrap();
    a.iter().map(|x| x.as_f64().unwrap()).sum::<f64>() / a.len().max(1) as f64
}

#[test]
fn every_experiment_runs_quick_with_all_methods() {
    let tmp = tern_fixtures::scratch("kvpaper");
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["kv", "experiment", "all", "--quick", "--no-plot", "--out"])
        .arg(&*tmp)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Progress is shown per run.
    assert!(out.contains("[exp1] A farreach: run 2/2"), "{out}");
    for i in 1..=10 {
        let name = format!("exp{i}");
        let r = json(&tmp, &name);
        assert_eq!(r["kind"], "kv-paper-experiment");
        assert_eq!(r["experiment"], name.as_str());
        let points = r["points"].as_array().unwrap();
        assert!(!points.is_empty(), "{name}: no points");
        for m in ["nocache", "netcache", "farreach"] {
            assert!(
                points.iter().any(|p| p["method"] == m),
                "{name}: {m} did not run"
            );
        }
        for p in points {
            let samples = p["samples"].as_array().unwrap();
            if name != "exp10" {
                assert_eq!(samples.len(), 2, "{name}: {p}");
                assert!(p["mean"].as_f64().unwrap() > 0.0, "{name}: {p}");
                assert!(p["ci95"].as_f64().unwrap() >= 0.0, "{name}: {p}");
            }
        }
        assert!(
            !r["compare"].as_array().unwrap().is_empty(),
            "{name}: no comparison with the paper"
        );
        let md = std::fs::read_to_string(tmp.join(format!("{name}.md"))).unwrap();
        assert!(
            md.contains("| what | paper | ours | ours / paper |"),
            "{md}"
        );
        assert!(md.contains("not a result"), "{md}");
    }
    let summary = std::fs::read_to_string(tmp.join("summary.md")).unwrap();
    assert!(summary.contains("exp1") && summary.contains("exp10"));

    // exp1: with the hottest keys cached, the switch answers part of workload A (both caches)
    // and of read-only C; NoCache's switch answers nothing.
    let e1 = json(&tmp, "exp1");
    for x in ["A", "C"] {
        assert!(
            mean(&point(&e1, x, "farreach")["switch_share"]) > 0.0,
            "{x}"
        );
        assert!(
            mean(&point(&e1, x, "netcache")["switch_share"]) > 0.0,
            "{x}"
        );
        assert_eq!(mean(&point(&e1, x, "nocache")["switch_share"]), 0.0, "{x}");
    }
    // Write-only: FarReach absorbs writes, NetCache (write-through) answers none of them.
    let e5 = json(&tmp, "exp5");
    assert!(mean(&point(&e5, "zipf-0.99", "farreach")["switch_share"]) > 0.0);
    assert_eq!(
        mean(&point(&e5, "zipf-0.99", "netcache")["switch_share"]),
        0.0
    );

    // exp8: periodic snapshots were taken and cost bandwidth.
    let e8 = json(&tmp, "exp8");
    let snaps: u64 = e8["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["method"] == "farreach" && p["x"] != "0")
        .flat_map(|p| p["extra"].as_array().unwrap().clone())
        .map(|e| e["snapshots"].as_u64().unwrap())
        .sum();
    assert!(snaps > 0, "no snapshot in exp8");
    for e in point(&e8, "0", "farreach")["extra"].as_array().unwrap() {
        assert_eq!(e["snapshots"], 0);
    }

    // exp9: FarReach's snapshot held the cached records, all re-admitted after the crash;
    // the clients preserved the writes the switch answered and recovery read them.
    let e9 = json(&tmp, "exp9");
    for e in point(&e9, "50", "farreach")["extra"].as_array().unwrap() {
        let n = e["snapshot_records"].as_u64().unwrap();
        assert!(n > 0, "{e}");
        assert!(e["preserved_records"].as_u64().unwrap() > 0, "{e}");
        assert_eq!(e["readmitted"].as_u64().unwrap(), n, "{e}");
        assert!(e["switch_s"].as_f64().unwrap() > 0.0);
    }

    // exp10: the caches' registers, the forward program's three entries.
    let e10 = json(&tmp, "exp10");
    let ex = |m: &str| point(&e10, "resources", m)["extra"].clone();
    assert_eq!(ex("nocache")["entries_installed"], 3);
    assert_eq!(ex("farreach")["entries_installed"], 3 + 50);
    assert!(
        ex("farreach")["register_bytes"].as_u64().unwrap()
            > ex("nocache")["register_bytes"].as_u64().unwrap()
    );
    assert!(ex("netcache")["register_bytes"].as_u64().unwrap() > 0);
}
