//! End to end in `tern kv up --mode sim`: NoCache, NetCache and FarReach serve the YCSB bench
//! and the history checker (`tern kv check`) with no stale, foreign or mixed value, while the
//! switch OS admits, evicts (FarReach: with write-backs) and snapshots; the lossy-control mode
//! retries and stays correct; and the checker does find stale reads when a cache is broken.

use std::path::Path;
use std::process::Command;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

struct Run {
    ok: bool,
    out: String,
    stats: Option<serde_json::Value>,
    /// The stats file (for `tern kv stats`), in `_dir`, which lives as long as the run.
    stats_file: std::path::PathBuf,
    _dir: tern_fixtures::ScratchDir,
}

/// `tern kv up --mode sim --servers 2 UP... -- tern CMD...` with a stats file.
fn up(tag: &str, up_args: &[&str], cmd: &[&str]) -> Run {
    up_in("sim", tag, up_args, cmd)
}

/// [`up`] in another topology mode (`loopback`: switch and servers as processes).
fn up_in(mode: &str, tag: &str, up_args: &[&str], cmd: &[&str]) -> Run {
    let tmp = tern_fixtures::scratch(&format!("kvc-{tag}"));
    let stats_file = tmp.join("stats.json");
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["kv", "up", "--mode", mode, "--servers", "2", "--dir"])
        .arg(tmp.join("data"))
        .arg("--stats-file")
        .arg(&stats_file)
        .args(up_args)
        .arg("--")
        .arg("tern")
        .args(cmd)
        .output()
        .unwrap();
    let out = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    let stats = std::fs::read_to_string(&stats_file)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    Run {
        ok: o.status.success(),
        out,
        stats,
        stats_file,
        _dir: tmp,
    }
}

const SMALL_CACHE: &[&str] = &[
    "--cache-size",
    "20",
    "--hot-threshold",
    "2",
    "--sample-all",
    "--snapshot-ms",
    "300",
];

const CHECK: &[&str] = &[
    "kv",
    "check",
    "--keys",
    "100",
    "--threads",
    "4",
    "--ops",
    "2500",
];

/// The run succeeded and the history checker found no stale, unknown or mixed value.
fn assert_clean(r: &Run, what: &str) {
    assert!(r.ok, "{what}: {}", r.out);
    assert!(
        r.out
            .contains("violations: 0 stale, 0 unknown value, 0 value/seq mixed"),
        "{what}: {}",
        r.out
    );
}

fn n(j: &serde_json::Value, k: &str) -> u64 {
    j[k].as_u64()
        .unwrap_or_else(|| panic!("stats without {k}: {j}"))
}

fn check_cache(cache: &str) -> serde_json::Value {
    let mut args = vec!["--cache", cache];
    args.extend_from_slice(SMALL_CACHE);
    let r = up(cache, &args, CHECK);
    assert_clean(&r, "run");
    let j = r
        .stats
        .unwrap_or_else(|| panic!("no stats file:\n{}", r.out));
    // 100 skewed keys through 20 slots: the switch OS must admit and evict, and the switch
    // must answer reads.
    assert!(n(&j, "admissions") > 20, "{j}");
    assert!(n(&j, "evictions") > 0, "{j}");
    assert!(n(&j, "get_hits") > 0, "{j}");
    assert!(r.out.contains("answered by the switch"), "{}", r.out);
    j
}

#[test]
fn farreach_history_is_clean_with_admission_eviction_and_snapshots() {
    let j = check_cache("farreach");
    assert!(n(&j, "writes_in_switch") > 0, "{j}");
    assert!(n(&j, "writebacks") > 0, "{j}");
    assert!(n(&j, "snapshots") > 0, "{j}");
}

#[test]
fn netcache_history_is_clean_with_admission_and_eviction() {
    let j = check_cache("netcache");
    assert_eq!(n(&j, "writes_in_switch"), 0, "{j}");
}

#[test]
fn nocache_history_is_clean() {
    let r = up("nocache", &[], CHECK);
    assert!(r.ok, "{}", r.out);
    assert!(r.out.contains("(0 answered by the switch)"), "{}", r.out);
    assert!(r.out.contains("violations: 0 stale"), "{}", r.out);
}

#[test]
fn ycsb_bench_runs_unchanged_on_every_cache() {
    for cache in ["nocache", "netcache", "farreach"] {
        let mut args = vec!["--cache", cache];
        args.extend_from_slice(SMALL_CACHE);
        let r = up(
            &format!("bench-{cache}"),
            &args,
            &[
                "kv",
                "bench",
                "--workload",
                "a",
                "--records",
                "500",
                "--ops",
                "3000",
                "--threads",
                "2",
            ],
        );
        assert!(r.ok, "{cache}: {}", r.out);
        assert!(r.out.contains("errors 0,"), "{cache}: {}", r.out);
        assert!(r.out.contains("value mismatches 0"), "{cache}: {}", r.out);
        if cache != "nocache" {
            let j = r.stats.expect("stats");
            assert!(n(&j, "get_hits") > 0, "{cache}: {j}");
        }
    }
}

#[test]
fn lossy_control_retries_and_stays_correct() {
    for cache in ["farreach", "netcache"] {
        let mut args = vec!["--cache", cache, "--control-loss", "0.3"];
        args.extend_from_slice(SMALL_CACHE);
        let r = up(&format!("lossy-{cache}"), &args, CHECK);
        assert_clean(&r, cache);
        let j = r.stats.expect("stats");
        assert!(n(&j, "control_dropped_on_purpose") > 0, "{cache}: {j}");
        assert!(n(&j, "control_retried") > 0, "{cache}: {j}");
        assert!(n(&j, "admissions") > 0, "{cache}: {j}");
    }
}

/// Duplicated control messages (half the switch OS's requests and report acknowledgements sent
/// twice, half the reports handled twice) change nothing: every admission, eviction write-back
/// and NetCache update stays idempotent and the checker finds nothing.
#[test]
fn duplicated_control_messages_change_nothing() {
    for cache in ["farreach", "netcache"] {
        let mut args = vec!["--cache", cache, "--control-dup", "0.5"];
        args.extend_from_slice(SMALL_CACHE);
        let r = up(&format!("dup-{cache}"), &args, CHECK);
        assert_clean(&r, cache);
        let j = r.stats.expect("stats");
        assert!(n(&j, "control_duplicated_on_purpose") > 10, "{cache}: {j}");
        assert!(n(&j, "admissions") > 20, "{cache}: {j}");
        assert!(n(&j, "evictions") > 0, "{cache}: {j}");
        assert_eq!(n(&j, "control_gave_up"), 0, "{cache}: {j}");
    }
}

/// NetCache without its invalidation on writes serves stale copies: the checker must say so.
#[test]
fn the_checker_finds_stale_reads_of_a_broken_cache() {
    let src = std::fs::read_to_string(Path::new(ROOT).join("p4/kv/netcache.p4")).unwrap();
    let needle = "            latest_reg.write(meta.idx, 0);\n            savedseq_reg.write(meta.idx, s);\n";
    assert!(src.contains(needle));
    let broken = src.replace(needle, "");
    let tmp = tern_fixtures::scratch("kvc-broken");
    let p4 = tmp.join("broken.p4");
    std::fs::write(&p4, broken).unwrap();
    let mut args = vec!["--cache", "netcache", "--program", p4.to_str().unwrap()];
    args.extend_from_slice(SMALL_CACHE);
    let r = up("broken-run", &args, CHECK);
    assert!(!r.ok, "{}", r.out);
    assert!(
        r.out.contains("stale: older than an acknowledged write"),
        "{}",
        r.out
    );
    // Each example names the history around the bad read: a write acknowledged (by a server:
    // NetCache writes through) before the read was sent, at a negative offset from it.
    let line = r
        .out
        .lines()
        .find(|l| l.contains("stale: older than an acknowledged write"))
        .unwrap();
    assert!(line.contains("writes around it: ["), "{line}");
    assert!(line.contains(" acked by server "), "{line}");
    assert!(line.contains(" at -"), "{line}");
}

const CRASHES: &[&str] = &["--crashes", "3", "--crash-period-ms", "300"];

/// The switch crashes three times at random moments of a write-heavy run (registers, entries
/// and switch OS lost) and recovers from the last snapshot plus the clients' preserved records:
/// the history checker finds no lost or stale value.
#[test]
fn farreach_recovers_from_switch_crashes_without_losing_a_write() {
    let mut args = vec!["--cache", "farreach"];
    args.extend_from_slice(SMALL_CACHE);
    args.extend_from_slice(CRASHES);
    let r = up("crash", &args, CHECK);
    assert_clean(&r, "run");
    let j = r.stats.expect("stats");
    assert!(n(&j, "crashes") >= 1, "{j}");
    assert!(r.out.contains("switch crashed and recovered"), "{}", r.out);
}

#[test]
fn netcache_survives_switch_crashes() {
    let mut args = vec!["--cache", "netcache"];
    args.extend_from_slice(SMALL_CACHE);
    args.extend_from_slice(CRASHES);
    let r = up("crash-nc", &args, CHECK);
    assert!(r.ok, "{}", r.out);
    assert!(r.out.contains("violations: 0 stale"), "{}", r.out);
    assert!(n(&r.stats.expect("stats"), "crashes") >= 1);
}

/// Without the clients' preserved records, writes the switch absorbed after the last snapshot
/// die with it: the checker must see stale reads.
#[test]
fn recovery_without_client_preservation_loses_writes_and_the_checker_sees_it() {
    let tmp = tern_fixtures::scratch("kvc-nopreserve");
    let elsewhere = tmp.join("elsewhere.txt");
    let mut args = vec!["--cache", "farreach"];
    args.extend_from_slice(SMALL_CACHE);
    args.extend_from_slice(CRASHES);
    let mut cmd = CHECK.to_vec();
    cmd.extend_from_slice(&["--preserve", elsewhere.to_str().unwrap()]);
    let r = up("nopreserve-run", &args, &cmd);
    assert!(!r.ok, "{}", r.out);
    assert!(
        r.out.contains("stale: older than an acknowledged write"),
        "{}",
        r.out
    );
}

/// Two consecutive free UDP ports on 127.0.0.1 (found through port 0, then released).
fn free_udp_pair() -> u16 {
    for _ in 0..100 {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let p = a.local_addr().unwrap().port();
        if p < 65535 && std::net::UdpSocket::bind(("127.0.0.1", p + 1)).is_ok() {
            return p;
        }
    }
    panic!("no two consecutive free UDP ports");
}

/// loopback: server processes, the switch in a `tern kv sim-switch` process driven over Thrift;
/// the fault injector SIGKILLs that process three times during the run and recovers.
#[test]
fn loopback_switch_process_sigkilled_and_recovered() {
    for cache in ["farreach", "netcache"] {
        let base = free_udp_pair().to_string();
        let mut args = vec!["--cache", cache, "--base-port", &base];
        args.extend_from_slice(SMALL_CACHE);
        args.extend_from_slice(CRASHES);
        let r = up_in("loopback", &format!("lo-{cache}"), &args, CHECK);
        assert_clean(&r, cache);
        let out = &r.out;
        assert!(
            out.contains("switch crashed and recovered"),
            "{cache}: {out}"
        );
        let j = r.stats.expect("the stats file");
        assert!(n(&j, "crashes") >= 1, "{j}");
        assert!(n(&j, "admissions") > 0, "{j}");
    }
}

/// `tern kv bench --warmup N` (FarReach's static mode): the N keys the run uses most are
/// admitted before it starts.
#[test]
fn bench_warm_up_admits_the_hottest_keys() {
    for cache in ["netcache", "farreach"] {
        let r = up(
            &format!("warm-{cache}"),
            &["--cache", cache, "--cache-size", "200"],
            &[
                "kv",
                "bench",
                "--workload",
                "c",
                "--records",
                "500",
                "--ops",
                "3000",
                "--threads",
                "2",
                "--warmup",
                "100",
            ],
        );
        assert!(r.ok, "{cache}: {}", r.out);
        assert!(
            r.out.contains("warm-up: 100 keys reported"),
            "{cache}: {}",
            r.out
        );
        assert!(r.out.contains("value mismatches 0"), "{cache}: {}", r.out);
        let j = r.stats.expect("stats");
        assert!(n(&j, "admissions") >= 100, "{cache}: {j}");
        assert!(j["hit_ratio"].as_f64().unwrap() > 0.2, "{cache}: {j}");
    }
}

/// Large values (600 bytes, > 128: never cached, forwarded to the server with a switch seq)
/// mixed with small ones on the same keys, under all three caches: the checker finds nothing,
/// large values are read back, and the cache still answers (small values) from the switch.
#[test]
fn large_values_mixed_with_small_ones_stay_correct_under_every_cache() {
    for cache in ["farreach", "netcache", "nocache"] {
        let mut args = vec!["--cache", cache];
        if cache != "nocache" {
            args.extend_from_slice(SMALL_CACHE);
        }
        let mut cmd = CHECK.to_vec();
        cmd.extend_from_slice(&["--large-ratio", "0.3", "--large-size", "600"]);
        let r = up(&format!("large-{cache}"), &args, &cmd);
        assert_clean(&r, cache);
        let line = r
            .out
            .lines()
            .find(|l| l.contains("large values (600 bytes)"))
            .unwrap_or_else(|| panic!("{cache}: no large-value line: {}", r.out));
        let nums: Vec<u64> = line
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|w| w.parse().ok())
            .collect();
        // [600, writes, reads]
        assert!(
            nums.len() >= 3 && nums[1] > 100 && nums[2] > 50,
            "{cache}: {line}"
        );
        if cache != "nocache" {
            assert!(
                !r.out.contains("(0 answered by the switch)"),
                "{cache}: {}",
                r.out
            );
        }
    }
}

/// Admission and eviction under sustained skewed load whose hot set moves three times (200
/// keys, 20 slots, a write-heavy mix): the switch OS follows it (the switch answers a share of
/// the reads in every phase, not only the first), evictions write dirty records back, and the
/// checker finds nothing.
#[test]
fn the_caches_follow_a_moving_hot_set() {
    for cache in ["farreach", "netcache"] {
        let mut args = vec!["--cache", cache];
        args.extend_from_slice(SMALL_CACHE);
        let cmd = [
            "kv",
            "check",
            "--keys",
            "200",
            "--threads",
            "4",
            "--ops",
            "4000",
            "--shifts",
            "3",
        ];
        let r = up(&format!("shift-{cache}"), &args, &cmd);
        assert_clean(&r, cache);
        let line = r
            .out
            .lines()
            .find(|l| l.contains("by hot-set phase:"))
            .unwrap_or_else(|| panic!("{cache}: no phase line: {}", r.out));
        let shares: Vec<f64> = line
            .rsplit(':')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert_eq!(shares.len(), 4, "{cache}: {line}");
        // Each phase's hot keys get cached: the switch answers reads in every phase (measured
        // in debug builds: 0.07 to 0.30 by phase with 20 slots; see docs/status.md).
        assert!(shares.iter().all(|s| *s > 0.03), "{cache}: {line}");
        let j = r.stats.expect("stats");
        assert!(n(&j, "evictions") > 20, "{cache}: {j}");
        if cache == "farreach" {
            assert!(n(&j, "writebacks") > 0, "{cache}: {j}");
        }
    }
}

/// Checks the `server_kills` of a run's stats: `kills` kills, each server restarted and
/// answering again; with a cache, the switch answered cached GETs while a server was dead.
fn assert_kills(j: &serde_json::Value, kills: usize, cached: bool, what: &str) {
    let k = j["server_kills"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no server_kills: {j}"));
    assert_eq!(k.len(), kills, "{what}: {j}");
    for x in k {
        assert!(x["down_ms"].as_u64().unwrap() >= 500, "{what}: {x}");
        assert!(x["answering_after_ms"].as_f64().is_some(), "{what}: {x}");
    }
    if cached {
        let hits: u64 = k
            .iter()
            .map(|x| x["hits_while_down"].as_u64().unwrap())
            .sum();
        assert!(
            hits > 0,
            "{what}: the switch answered nothing while a server was dead: {j}"
        );
    }
}

/// `--kill-server` in loopback mode: storage server processes SIGKILLed twice during a
/// write-heavy run and restarted after 800 ms on the same folder and port. No acknowledged
/// write is lost and no stale value is read (the checker reads every key again after the
/// restarts), the switch keeps answering cached keys while a server is dead, and every
/// restarted server answers through the switch again.
#[test]
fn loopback_servers_killed_and_restarted_under_every_cache() {
    for cache in ["farreach", "netcache", "nocache"] {
        let base = free_udp_pair().to_string();
        let mut args = vec![
            "--cache",
            cache,
            "--base-port",
            &base,
            "--kill-server",
            "2",
            "--crash-period-ms",
            "600",
            "--server-down-ms",
            "800",
        ];
        args.extend_from_slice(SMALL_CACHE);
        // Long enough to outlast both kills (≈ 2 × (600 + 800) ms) on a fast, idle machine:
        // with 1,500 operations per thread the run could end before the second kill.
        let check = [
            "kv",
            "check",
            "--keys",
            "100",
            "--threads",
            "16",
            "--ops",
            "6000",
        ];
        let r = up_in("loopback", &format!("kill-{cache}"), &args, &check);
        assert_clean(&r, cache);
        let out = &r.out;
        assert_eq!(out.matches("killed (SIGKILL)").count(), 2, "{cache}: {out}");
        let j = r.stats.expect("the stats file");
        assert_kills(&j, 2, cache != "nocache", cache);
    }
}

#[test]
fn kill_server_needs_server_processes() {
    let o = Command::new(env!("CARGO_BIN_EXE_tern"))
        .args(["kv", "up", "--mode", "sim", "--kill-server", "1"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--kill-server needs server processes"),
        "{err}"
    );
}

/// The number after `label` in `text` (e.g. "control messages retried 12").
fn number_after(text: &str, label: &str) -> u64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in {text}"));
    text[at + label.len()..]
        .trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {label:?} in {text}"))
}

/// Lost and duplicated control messages in loopback mode (the switch in a `tern kv sim-switch`
/// process, the switch OS driving it over Thrift and talking to server processes over UDP):
/// 30 % of the switch OS's messages dropped and 30 % sent twice; the checker finds nothing and
/// `tern kv stats` shows the retries.
#[test]
fn loopback_lost_and_duplicated_control_messages() {
    for cache in ["farreach", "netcache"] {
        let base = free_udp_pair().to_string();
        let mut args = vec![
            "--cache",
            cache,
            "--base-port",
            &base,
            "--control-loss",
            "0.3",
            "--control-dup",
            "0.3",
        ];
        args.extend_from_slice(SMALL_CACHE);
        let r = up_in("loopback", &format!("lossdup-{cache}"), &args, CHECK);
        assert_clean(&r, cache);
        let s = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["kv", "stats"])
            .arg(&r.stats_file)
            .output()
            .unwrap();
        let line = String::from_utf8_lossy(&s.stdout).into_owned();
        assert!(s.status.success(), "{line}");
        assert!(
            number_after(&line, "control messages retried") > 0,
            "{line}"
        );
        assert!(number_after(&line, "dropped on purpose") > 0, "{line}");
        assert!(number_after(&line, "duplicated on purpose") > 0, "{line}");
        assert_eq!(number_after(&line, "given up"), 0, "{line}");
        assert!(number_after(&line, "admissions") > 20, "{line}");
    }
}

/// A damaged snapshot file stops `tern kv switchos --recover` with an error naming the file
/// and what is wrong, before it touches a switch or a server.
#[test]
fn recovery_from_a_damaged_snapshot_file_is_a_clear_error() {
    let tmp = tern_fixtures::scratch("kvc-badsnap");
    let f = tmp.join("snapshot.bin");
    for (bytes, want) in [
        (&b"TERNSNAP\0\0\0\x01 and then some garbage"[..], "checksum"),
        (&b"short"[..], "shorter than"),
    ] {
        std::fs::write(&f, bytes).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_tern"))
            .args(["kv", "switchos", "--cache", "farreach"])
            .args([
                "--servers",
                "127.0.0.1:9",
                "--bind",
                "127.0.0.1:0",
                "--recover",
            ])
            .arg("--snapshot-file")
            .arg(&f)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(err.contains("snapshot.bin") && err.contains(want), "{err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}
