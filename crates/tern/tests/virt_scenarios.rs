//! HyPer4's three scenarios in network namespaces (`scripts/virt/scenario.sh`): hosts on veth pairs,
//! one `tern virt run --live` with many devices, every expected behaviour checked (pings per
//! pair, ARP answered locally, firewall rules, routed pings, isolation between slices, live
//! snapshot switches under ping floods with 0 % loss). Needs root, `ip`, `ping` and python3
//! (skipped with a message otherwise). The script removes its namespaces, veths, processes and
//! temporary folder on exit, also when a check fails or it is stopped by `timeout`.

mod common;
use common::*;

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn scenario(name: &str) {
    scenario_with(name, None);
}

/// The scenario with `--workers N` when `workers` is given (`VIRT_WORKERS`).
fn scenario_with(name: &str, workers: Option<usize>) {
    if !is_root() || !on_path("ip") || !on_path("ping") || !on_path("python3") {
        eprintln!("skipping: needs root, ip, ping and python3 (network namespaces)");
        return;
    }
    // SIGTERM on a timeout lets the script clean up; SIGKILL only 30 s later.
    let mut cmd = Command::new("timeout");
    if let Some(n) = workers {
        cmd.env("VIRT_WORKERS", n.to_string());
    }
    let o = cmd
        .args(["--signal=TERM", "--kill-after=30", "300", "bash"])
        .arg(format!("{ROOT}/scripts/virt/scenario.sh"))
        .args([name, TERN])
        .output()
        .expect("running scripts/virt/scenario.sh");
    let out = text(&o.stdout);
    let err = text(&o.stderr);
    assert!(
        o.status.success() && out.contains(&format!("{name}: all ")),
        "scenario {name} failed ({:?}):\n{out}\n{err}",
        o.status
    );
    assert!(!out.contains("FAIL:"), "{out}");
    eprintln!("{out}");
}

#[test]
fn hyper4_example1_snapshots_and_composition() {
    scenario("ex1");
}

#[test]
fn hyper4_example2_slicing_and_composition() {
    scenario("ex2");
}

#[test]
fn hyper4_example3_virtual_networking() {
    scenario("ex3");
}

/// Example 1 with the devices on two worker threads (`--live --workers 2 --admin`): the
/// operator's snapshot switches reach the workers, the ping floods of unaffected flows lose
/// nothing.
#[test]
fn hyper4_example1_on_two_workers() {
    scenario_with("ex1", Some(2));
}

/// Example 2 (slices and a chain) with the devices on two worker threads.
#[test]
fn hyper4_example2_on_two_workers() {
    scenario_with("ex2", Some(2));
}

/// The hand-merged s2 of Example 1 C (the penalty table's native baseline) behaves as the
/// chain it stands for: proxy answers, routed frames, firewall drops (STF; runs anywhere).
#[test]
fn merged_s2_baseline_stf() {
    let dir = format!("{ROOT}/p4/virt/scenarios/ex1");
    let o = Command::new(TERN)
        .args(["test", "s2_merged.p4", "s2_merged.stf"])
        .current_dir(&dir)
        .output()
        .unwrap();
    let out = text(&o.stdout);
    assert!(
        o.status.success() && out.contains("PASS s2_merged.stf: 2/2"),
        "{out}{}",
        text(&o.stderr)
    );
}
