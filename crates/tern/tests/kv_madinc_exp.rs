//! `tern kv experiment madinc-burst` and `madinc-tenants` in their quick forms: a uniform burst
//! of hot reports from 64 tenants through control links with 0, 20 and 40 % loss loses no report
//! and leaves every item cached; 64 to 80 tenants join and leave during a run with 20 % writes
//! and every read returns the tenant's latest write; madinc-policies-measured's closed-loop run
//! answers at the hop its policy chose. JSON and Markdown are written; no speed is asserted.

use std::process::Command;

fn run(dir: &std::path::Path, name: &str) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["kv", "experiment", name, "--quick", "--no-plot", "--out"])
        .arg(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md = std::fs::read_to_string(dir.join(format!("{name}.md"))).unwrap();
    assert!(md.contains("## Thesis beside tern"), "{md}");
    let text = std::fs::read_to_string(dir.join(format!("{name}.json"))).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    // scripts/kv-plot.py picks the plot by `kind`; every report says when, where and how.
    assert_eq!(v["kind"], "kv-madinc-experiment", "{text}");
    for k in ["date", "machine", "command"] {
        assert!(v[k].as_str().is_some_and(|s| !s.is_empty()), "{k}: {text}");
    }
    v
}

#[test]
fn a_uniform_burst_from_64_tenants_loses_no_hot_report() {
    let dir = tern_fixtures::scratch("madinc-burst");
    let r = run(&dir, "madinc-burst");
    let c = &r["control"];
    assert!(c["reports_made"].as_u64().unwrap() > 1000, "{c}");
    assert_eq!(c["reports_made"], c["reports_delivered"]);
    assert_eq!(c["reports_lost"], 0);
    assert_eq!(c["all_links_settled"], true);
    assert!(c["injected_drops"].as_u64().unwrap() > 0);
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 3);
    for p in points {
        assert_eq!(p["mean"], 0.0, "{p}");
        assert_eq!(p["extra"]["cached_after"], p["extra"]["items"], "{p}");
    }
}

#[test]
fn sixty_four_tenants_and_more_join_and_leave_with_writes() {
    let dir = tern_fixtures::scratch("madinc-tenants");
    let r = run(&dir, "madinc-tenants");
    let points = r["points"].as_array().unwrap();
    assert!(points.iter().all(|p| p["mean"].as_f64().unwrap() >= 64.0));
    let writes: u64 = points
        .iter()
        .map(|p| p["extra"]["writes"].as_u64().unwrap())
        .sum();
    assert!(writes > 0);
    for p in points {
        assert_eq!(p["extra"]["wrong_values"], 0, "{p}");
    }
    // The caches answer once the tenants' keys are hot.
    let last = points.last().unwrap()["switch_share"][0].as_f64().unwrap();
    assert!(last > 0.1, "switch share {last}");
    assert_eq!(r["compare"][0]["ours"], 80.0);
    // Every report made reached the controller (some after their tenant left: dropped with
    // that reason, counted apart), each once; no link gave a message up.
    let c = &r["control"];
    assert!(c["reports_made"].as_u64().unwrap() > 100, "{c}");
    assert_eq!(c["reports_made"], c["reports_delivered"], "{c}");
    assert_eq!(c["reports_lost"], 0, "{c}");
    assert_eq!(c["messages_given_up"], 0, "{c}");
    assert_eq!(c["all_links_settled"], true, "{c}");
    assert!(c["reports_dropped_tenant_gone"].is_u64(), "{c}");
    let md = std::fs::read_to_string(dir.join("madinc-tenants.md")).unwrap();
    assert!(md.contains("dropped: tenant gone"), "{md}");
}

/// madinc-policies-measured, quick: every switch a `tern kv madinc-switch` process, real
/// closed-loop clients with a 0.2 ms delay per link traversal, tenants joining and leaving
/// meanwhile. Asserted: structure, not speed — near-client
/// answers at the first switch and near-store at the second (so near-store's median RTT carries
/// at least the two extra link traversals), every report delivered, every read right (the run
/// fails otherwise), tenants joined and left.
#[test]
fn measured_policies_show_the_answering_hop_in_the_rtt() {
    let dir = tern_fixtures::scratch("madinc-measured");
    let r = run(&dir, "madinc-policies-measured");
    let c = &r["control"];
    assert_eq!(c["reports_made"], c["reports_delivered"], "{c}");
    assert_eq!(c["all_links_settled"], true);
    let points = r["points"].as_array().unwrap();
    assert_eq!(points.len(), 8);
    let find = |x: &str, m: &str| {
        points
            .iter()
            .find(|p| p["x"] == x && p["method"] == m)
            .unwrap()
            .clone()
    };
    for p in points {
        assert!(p["mean"].as_f64().unwrap() > 0.0, "{p}");
        let e = &p["extra"];
        assert!(e["tenants_joined"].as_u64().unwrap() > 0, "{p}");
        assert!(e["tenants_left"].as_u64().unwrap() > 0, "{p}");
        let cdf = e["rtt_cdf_ms"].as_array().unwrap();
        let v: Vec<f64> = cdf.iter().map(|q| q[0].as_f64().unwrap()).collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{p}");
        // Two link traversals at least, each at least 0.2 ms.
        assert!(v[0] >= 0.4, "{p}");
    }
    let nc = find("zipf-0.99", "near-client");
    let ns = find("zipf-0.99", "near-store");
    assert_eq!(nc["extra"]["answered_at_switch"][1], 0, "{nc}");
    assert!(nc["extra"]["answered_at_switch"][0].as_u64().unwrap() > 0);
    assert_eq!(ns["extra"]["answered_at_switch"][0], 0, "{ns}");
    assert!(ns["extra"]["answered_at_switch"][1].as_u64().unwrap() > 0);
    let p50 = |p: &serde_json::Value| p["extra"]["rtt_ms_p50"].as_f64().unwrap();
    assert!(p50(&ns) > p50(&nc), "{nc} {ns}");
}
