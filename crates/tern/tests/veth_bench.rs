//! `scripts/virt/veth-bench.sh` end to end, tiny: the L2 switch native vs sliced on veth, two
//! rounds of 0.2 s, with this build's `tern` and the `veth_probe` example
//! (`target/<profile>/examples/veth_probe`, built by `cargo test -p tern-ports` or a
//! workspace test run). Checks that both paths forwarded the probe's frames, that the summary
//! holds every figure with a ratio, and that nothing is left behind (`SCHED=none`: no real-time
//! priority beside the other tests). Needs root, `ip`, `taskset` and python3; skipped with a
//! message otherwise. No timing is asserted.

mod common;
use common::*;

use std::path::PathBuf;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn probe() -> Option<PathBuf> {
    let p = PathBuf::from(TERN).parent()?.join("examples/veth_probe");
    p.exists().then_some(p)
}

#[test]
fn veth_bench_runs_both_sides_and_cleans_up() {
    if !is_root()
        || !["ip", "taskset", "chrt", "python3"]
            .iter()
            .all(|p| on_path(p))
    {
        eprintln!("skipping: needs root, ip, taskset, chrt and python3");
        return;
    }
    let Some(probe) = probe() else {
        eprintln!("skipping: examples/veth_probe not built (cargo build -p tern-ports --example veth_probe)");
        return;
    };
    let out = tempfile::tempdir().unwrap();
    // SIGTERM on a timeout lets the script clean up; SIGKILL only 30 s later.
    let child = Command::new("timeout")
        .args(["-k", "30", "120"])
        .arg(format!("{ROOT}/scripts/virt/veth-bench.sh"))
        .arg("--tern")
        .arg(TERN)
        .arg("--probe")
        .arg(&probe)
        .arg("--out")
        .arg(out.path())
        .envs([
            ("FUNCTIONS", "l2"),
            ("ROUNDS", "2"),
            ("RATE_SECS", "0.2"),
            ("LAT_SECS", "0.2"),
            ("LAT_PPS", "2000"),
            ("WARMUP", "0.1"),
            // No real-time priority: other tests run beside this one.
            ("SCHED", "none"),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let o = child.wait_with_output().unwrap();
    // The script names its namespaces vb<its pid>-*.
    let left: Vec<String> = text(
        &Command::new("ip")
            .args(["netns", "list"])
            .output()
            .unwrap()
            .stdout,
    )
    .lines()
    .filter(|l| {
        l.strip_prefix("vb").is_some_and(|r| {
            r.split('-')
                .next()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
    })
    .map(str::to_string)
    .collect();
    assert!(
        o.status.success(),
        "veth-bench.sh failed:\n{}\n{}",
        text(&o.stdout),
        text(&o.stderr)
    );
    assert!(left.is_empty(), "namespaces left behind: {left:?}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("veth_abba.json")).unwrap())
            .unwrap();
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "two rounds, two sides");
    for r in rows {
        assert!(r["latency"]["received"].as_u64().unwrap() > 0, "{r}");
        assert!(r["rate"]["received"].as_u64().unwrap() > 0, "{r}");
        assert!(r["switch_cpu_ns"].as_u64().unwrap() > 0, "{r}");
    }
    // A B then B A.
    let order: Vec<&str> = rows.iter().map(|r| r["side"].as_str().unwrap()).collect();
    assert_eq!(order, ["native", "sliced", "sliced", "native"]);
    let figs = &j["summary"]["l2"]["figures"];
    for f in [
        "rate_pps",
        "cpu_us_per_frame",
        "lat_p50_us",
        "lat_p99_us",
        "lat_p999_us",
    ] {
        let r = figs[f]["ratio_median"].as_f64().unwrap_or(0.0);
        assert!(r > 0.0, "{f}: {}", figs[f]);
        assert!(figs[f]["verdict"].is_string(), "{f}");
    }
    let md = std::fs::read_to_string(out.path().join("veth_abba.md")).unwrap();
    assert!(
        md.contains("| l2 | one-way p99 µs, rounds pooled |"),
        "{md}"
    );
}
