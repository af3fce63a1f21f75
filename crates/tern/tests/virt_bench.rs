//! `tern virt bench --timed --processes N` (issue 17): the timed rows measured in N processes
//! of the binary one after the other, each figure the median over them with each process's
//! own figures kept beside it; the other processes' folders are removed afterwards.

use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
const TERN: &str = env!("CARGO_BIN_EXE_tern");

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[test]
fn timed_in_three_processes_reports_the_median_over_them() {
    let out = tempfile::tempdir().unwrap();
    let child = Command::new(TERN)
        .args([
            "virt",
            "bench",
            "--timed",
            "--processes",
            "3",
            "--runs",
            "1",
        ])
        .args(["--packets", "2000", "--only", "L2 switch", "--scenarios"])
        .arg(format!("{ROOT}/p4/virt/scenarios"))
        .arg("--out")
        .arg(out.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    for i in 1..=3 {
        assert!(err.contains(&format!("process {i} of 3")), "{err}");
    }
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("virt_bench.json")).unwrap())
            .unwrap();
    assert_eq!(j["processes"], 3);
    let rows = j["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let t = &rows[0]["tern"]["timed"];
    assert_eq!(t["processes"], 3);
    for (k, each) in [
        ("rate_loss_pct", "rate_loss_pct"),
        ("p99_added_pct", "p99_added_pct"),
        ("batch_rate_loss_pct", "batch_rate_loss_pct"),
    ] {
        let v: Vec<f64> = t["per_process"][each]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        assert_eq!(v.len(), 3, "{k}: {t}");
        assert_eq!(t[k].as_f64().unwrap(), median(v), "{k}: {t}");
    }
    assert!(t["native_mpps_median"].as_f64().unwrap() > 0.0);
    let md = std::fs::read_to_string(out.path().join("virt_bench.md")).unwrap();
    assert!(md.contains("Timed in 3 processes"), "{md}");
    let l2 = md
        .lines()
        .find(|l| l.starts_with("| L2 switch | −83 %"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(l2.contains(" … "), "the range over the processes: {l2}");
    // The other processes' folders are gone.
    let prefix = format!("tern-virt-bench-{pid}-");
    let left: Vec<_> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn processes_must_be_at_least_one() {
    let o = Command::new(TERN)
        .args(["virt", "bench", "--timed", "--processes", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--processes"), "{err}");
}
