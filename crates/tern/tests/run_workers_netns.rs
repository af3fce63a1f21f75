//! `tern run --workers 2` on live interfaces: two hosts in network namespaces joined through
//! veth pairs to the L3 router (`p4/bench/l3_router.p4`), routes added over Thrift while the
//! workers run (so every worker must apply them while idle); pings to several addresses (flows
//! spread over the workers) must cross it, and SIGTERM ends the run with a per-worker summary.
//! Needs root and `ip` (prints "skipping: ..." and passes otherwise).

mod common;
use common::*;

use std::process::{Command, Stdio};
use tern_runtime::{MatchParam, Runtime};

const TERN: &str = env!("CARGO_BIN_EXE_tern");
const ROUTER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/bench/l3_router.p4");

#[test]
fn live_workers_forward_pings_with_routes_added_over_thrift() {
    if !is_root() || !on_path("ip") || !on_path("ping") {
        eprintln!("skipping: needs root and the `ip` and `ping` commands");
        return;
    }
    let id = std::process::id() % 1_000_000;
    let (ns1, ns2) = (format!("tern-w1-{id}"), format!("tern-w2-{id}"));
    let (if1, if2) = (format!("tw{id}a"), format!("tw{id}b"));
    let mut topo = Topo::new();
    let h2_addrs = ["10.0.1.10", "10.0.1.11", "10.0.1.12", "10.0.1.13"];
    topo.add_host(
        &ns1,
        &if1,
        "00:04:00:00:00:01",
        &["10.0.0.10"],
        "10.0.0.1",
        "02:00:00:00:00:fe",
    );
    topo.add_host(
        &ns2,
        &if2,
        "00:04:00:00:00:02",
        &h2_addrs,
        "10.0.1.1",
        "02:00:00:00:00:fe",
    );

    let d = tmpdir("wnetns", "live");
    let log = d.join("switch.err");
    let port = free_port();
    let child = Command::new(TERN)
        .args(["run", ROUTER, "--workers", "2"])
        .args(["-i", &format!("1@{if1}"), "-i", &format!("2@{if2}")])
        .args(["--thrift-port", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    topo.switch = Some(child);
    topo.wait_switching(&log, 60);
    let mut rt = tern_thrift::ThriftRuntime::connect(("127.0.0.1", port)).expect("Thrift");
    for (net, mac, p) in [(0u8, 1u8, 1u8), (1, 2, 2)] {
        rt.mt_add_entry(
            "RIngress.ipv4_lpm",
            &[MatchParam::Lpm {
                key: vec![10, 0, net, 0],
                prefix_len: 24,
            }],
            "RIngress.set_nhop",
            &[vec![0, 4, 0, 0, 0, mac], vec![0, p]],
            None,
        )
        .expect("add route");
    }
    assert_eq!(rt.mt_get_num_entries("RIngress.ipv4_lpm").unwrap(), 2);
    for a in h2_addrs {
        let o = Command::new("ip")
            .args(["netns", "exec", &ns1, "ping", "-c", "2", "-i", "0.2"])
            .args(["-W", "2", a])
            .output()
            .unwrap();
        assert!(
            o.status.success() && text(&o.stdout).contains("2 received"),
            "ping h1 -> {a} failed: {}{}\nswitch: {}",
            text(&o.stdout),
            text(&o.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }
    let k = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(k.success());
    let out = wait_with_timeout(topo.switch.take().unwrap(), 20);
    let err = std::fs::read_to_string(&log).unwrap();
    assert!(out.status.success(), "switch exit {:?}: {err}", out.status);
    let summary = err
        .lines()
        .find(|l| l.contains("packets in"))
        .unwrap_or_else(|| panic!("no summary: {err}"));
    let n: u64 = summary
        .trim_start_matches("tern run: ")
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("bad summary: {summary}"));
    // 8 echo requests and 8 replies crossed the switch.
    assert!(n >= 16, "{summary}");
    let per_worker: u64 = (0..2)
        .map(|w| {
            let l = err
                .lines()
                .find(|l| l.starts_with(&format!("tern run: worker {w}: ")))
                .unwrap_or_else(|| panic!("no line for worker {w}: {err}"));
            l.split_whitespace().nth(4).unwrap().parse::<u64>().unwrap()
        })
        .sum();
    assert_eq!(per_worker, n, "per-worker packets add up: {err}");
    eprintln!("switch: {err}");
}
