//! `tern run --workers N` with pcap-file ports: the same outputs as one worker (per port, the
//! same frames, each flow in order; with `--deterministic` byte-identical files and logs), and
//! control-plane changes over Thrift reach every worker while counters read back summed.
//! Self-contained: the program is P4 source compiled by tern, the traffic is generated here.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};
use tern_dataplane::workers::flow_hash;
use tern_ports::pcap::{PcapReader, PcapWriter, WriterConfig};
use tern_runtime::Runtime;

/// An L3 router with a per-ingress-port counter and a `log_msg` per forwarded packet.
const ROUTER: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct metadata { }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
parser MyParser(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {
    state start {
        p.extract(h.ethernet);
        transition select(h.ethernet.etherType) { 0x0800: parse_ipv4; default: accept; }
    }
    state parse_ipv4 { p.extract(h.ipv4); transition accept; }
}
control MyVerify(inout headers h, inout metadata m) { apply { } }
control MyIngress(inout headers h, inout metadata m, inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) rx_port;
    action drop() { mark_to_drop(sm); }
    action set_nhop(bit<48> dmac, bit<9> port) {
        sm.egress_spec = port;
        h.ethernet.srcAddr = h.ethernet.dstAddr;
        h.ethernet.dstAddr = dmac;
        h.ipv4.ttl = h.ipv4.ttl - 1;
        log_msg("nhop {} for {}", {port, h.ipv4.dstAddr});
    }
    table ipv4_lpm {
        key = { h.ipv4.dstAddr: lpm; }
        actions = { set_nhop; drop; }
        default_action = drop();
    }
    apply {
        rx_port.count((bit<32>)sm.ingress_port);
        if (h.ipv4.isValid() && h.ipv4.ttl > 1) { ipv4_lpm.apply(); } else { drop(); }
    }
}
control MyEgress(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }
control MyCompute(inout headers h, inout metadata m) { apply { } }
control MyDeparser(packet_out p, in headers h) { apply { p.emit(h.ethernet); p.emit(h.ipv4); } }
V1Switch(MyParser(), MyVerify(), MyIngress(), MyEgress(), MyCompute(), MyDeparser()) main;
"#;

/// Routes 10.1/16 → port 1, 10.2/16 → 2, 10.3/16 → 3; 10.9/16 has none (dropped).
const ROUTES: &str = "\
table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.1.0.0/16 => 00:00:00:00:01:01 1
table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.2.0.0/16 => 00:00:00:00:02:02 2
table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.3.0.0/16 => 00:00:00:00:03:03 3
";

const PORTS: u32 = 3;
const FLOWS: u16 = 48;
const PER_PORT: usize = 300;

/// A scratch directory for one test, removed when it ends (also on failure).
fn tmpdir(name: &str) -> tern_fixtures::ScratchDir {
    tern_fixtures::scratch(&format!("workers-{name}"))
}

/// A UDP frame of flow `f` (its 5-tuple) carrying sequence number `seq`; flows with
/// `f % 8 == 7` go to the unrouted 10.9/16; every 50th frame is ARP (no IPv4: dropped).
fn frame(f: u16, seq: u32) -> Vec<u8> {
    let mut b = vec![0u8; 64];
    b[0..6].copy_from_slice(&[0, 0, 0, 0, 0xee, 1]);
    b[6..12].copy_from_slice(&[0, 0, 0, 0, 0xaa, f as u8]);
    if seq % 50 == 49 {
        b[12..14].copy_from_slice(&[0x08, 0x06]);
        b[14..18].copy_from_slice(&seq.to_be_bytes());
        return b;
    }
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    b[14] = 0x45;
    b[16..18].copy_from_slice(&50u16.to_be_bytes());
    b[22] = 64;
    b[23] = 17;
    b[26..30].copy_from_slice(&[192, 168, 0, f as u8]);
    let net = if f % 8 == 7 { 9 } else { 1 + (f % 3) as u8 };
    b[30..34].copy_from_slice(&[10, net, 0, f as u8]);
    b[34..36].copy_from_slice(&(1000 + f).to_be_bytes());
    b[36..38].copy_from_slice(&53u16.to_be_bytes());
    b[42..46].copy_from_slice(&seq.to_be_bytes());
    b
}

/// Write `pN_in.pcap` for ports 1..=3: port p carries flows f with `f % 3 == p - 1`, the
/// frames of those flows interleaved; timestamps interleave the ports too. Returns the
/// frames per input port.
fn write_inputs(d: &Path) -> Vec<usize> {
    let mut counts = Vec::new();
    for p in 1..=PORTS {
        let f = std::fs::File::create(d.join(format!("p{p}_in.pcap"))).unwrap();
        let mut w = PcapWriter::new(f, WriterConfig::ethernet()).unwrap();
        let flows: Vec<u16> = (0..FLOWS).filter(|f| (f % 3) as u32 == p - 1).collect();
        for i in 0..PER_PORT {
            let fl = flows[(i * 7 + i / 5) % flows.len()];
            let ts = 1_000_000_000 + (i as u64 * PORTS as u64 + p as u64) * 1_000;
            w.write_packet(ts, &frame(fl, i as u32)).unwrap();
        }
        counts.push(PER_PORT);
    }
    counts
}

fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
    let b = std::fs::read(path).unwrap_or_default();
    if b.is_empty() {
        return Vec::new();
    }
    let mut r = PcapReader::new(&b[..]).unwrap();
    let mut v = Vec::new();
    while let Some(p) = r.next_packet().unwrap() {
        v.push(p.data.to_vec());
    }
    v
}

fn tern(dir: &Path, workers: usize, extra: &[&str]) -> Output {
    let mut args = vec![
        "run".to_string(),
        "router.p4".into(),
        "--use-files".into(),
        "0".into(),
        "--commands".into(),
        "routes.txt".into(),
        "--workers".into(),
        workers.to_string(),
    ];
    for p in 1..=PORTS {
        args.push("-i".into());
        args.push(format!("{p}@p{p}"));
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let child = Command::new(env!("CARGO_BIN_EXE_tern"))
        .current_dir(dir)
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A hung run (e.g. a worker that never answers the control) fails instead of blocking.
    let pid = child.id();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(120) {
            if flag.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    });
    let out = child.wait_with_output().unwrap();
    done.store(true, std::sync::atomic::Ordering::Release);
    assert!(
        out.status.code().is_some(),
        "tern run --workers {workers} hung (killed after 120 s)"
    );
    out
}

fn setup(name: &str) -> tern_fixtures::ScratchDir {
    let d = tmpdir(name);
    std::fs::write(d.join("router.p4"), ROUTER).unwrap();
    // Plus routes no traffic uses: more control operations than a worker's queue holds, so
    // the first batches may find a queue full of control wake-ups.
    let mut routes = ROUTES.to_string();
    for i in 0..40 {
        routes.push_str(&format!(
            "table_add MyIngress.ipv4_lpm MyIngress.set_nhop 10.{}.0.0/16 => 00:00:00:00:00:01 1\n",
            100 + i
        ));
    }
    std::fs::write(d.join("routes.txt"), routes).unwrap();
    write_inputs(&d);
    d
}

/// Output frames of every port of a finished run, renamed away so the next run starts clean.
fn take_outputs(d: &Path, tag: &str) -> Vec<Vec<Vec<u8>>> {
    (1..=PORTS)
        .map(|p| {
            let f = d.join(format!("p{p}_out.pcap"));
            let v = read_pcap(&f);
            std::fs::rename(&f, d.join(format!("p{p}_out.{tag}.pcap"))).unwrap();
            v
        })
        .collect()
}

/// The frames of each flow (keyed by its 5-tuple bytes) in the order they left, as sequence
/// numbers.
fn per_flow(frames: &[Vec<u8>]) -> BTreeMap<Vec<u8>, Vec<u32>> {
    let mut m: BTreeMap<Vec<u8>, Vec<u32>> = BTreeMap::new();
    for f in frames {
        let seq = u32::from_be_bytes(f[42..46].try_into().unwrap());
        m.entry(f[23..38].to_vec()).or_default().push(seq);
    }
    m
}

fn workers_of_routed_flows(n: u64) -> Vec<u64> {
    let mut per = vec![0; n as usize];
    for f in (0..FLOWS).filter(|f| f % 8 != 7) {
        per[(flow_hash(&frame(f, 0)) % n) as usize] += 1;
    }
    per
}

/// Two and three workers write, per port, the same multiset of frames as one worker, each
/// flow's frames in the same order; the summary counts agree and every worker ran packets.
#[test]
fn workers_forward_like_one_worker_per_port_and_per_flow() {
    let d = setup("same");
    let one = tern(&d, 1, &[]);
    assert!(
        one.status.success(),
        "{}",
        String::from_utf8_lossy(&one.stderr)
    );
    let base = take_outputs(&d, "w1");
    let total: usize = base.iter().map(Vec::len).sum();
    // 42 of 48 flows are routed; ARP frames are dropped: most but not all frames leave.
    assert!(
        total > PER_PORT * 2 && total < PER_PORT * 3,
        "{total} frames out"
    );
    let summary = |o: &Output| {
        let e = String::from_utf8_lossy(&o.stderr).to_string();
        let line = e
            .lines()
            .find(|l| l.contains("packets in"))
            .unwrap_or_else(|| panic!("no summary: {e}"))
            .to_string();
        // Drop the timing part (", 0.123 s, 4567 pps").
        line.split(" digests").next().unwrap().to_string()
    };
    for n in [2usize, 3] {
        assert!(workers_of_routed_flows(n as u64).iter().all(|&k| k > 0));
        let o = tern(&d, n, &[]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{err}");
        assert_eq!(summary(&o), summary(&one));
        for w in 0..n {
            assert!(
                err.lines()
                    .any(|l| l.starts_with(&format!("tern run: worker {w}: "))
                        && !l.contains(": 0 packets")),
                "worker {w} ran nothing: {err}"
            );
        }
        let got = take_outputs(&d, &format!("w{n}"));
        for p in 0..PORTS as usize {
            let (mut a, mut b) = (base[p].clone(), got[p].clone());
            assert_eq!(
                per_flow(&a),
                per_flow(&b),
                "port {}: per-flow order differs with {n} workers",
                p + 1
            );
            a.sort();
            b.sort();
            assert_eq!(a, b, "port {}: frames differ with {n} workers", p + 1);
        }
    }
}

/// With `--deterministic`, output files and the log are byte-identical to one worker's.
#[test]
fn deterministic_runs_are_byte_identical_to_one_worker() {
    let d = setup("det");
    let mut files = Vec::new();
    for n in [1usize, 2] {
        let log = format!("log{n}.txt");
        let o = tern(
            &d,
            n,
            &["--deterministic", "--log-file", &log, "-L", "debug"],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let outs: Vec<Vec<u8>> = (1..=PORTS)
            .map(|p| {
                let f = d.join(format!("p{p}_out.pcap"));
                let b = std::fs::read(&f).unwrap();
                std::fs::remove_file(&f).unwrap();
                b
            })
            .collect();
        let log = std::fs::read_to_string(d.join(&log)).unwrap();
        assert!(log.contains("nhop 2 for"), "log_msg lines missing");
        assert!(log.contains("Packet dropped"), "debug lines missing");
        assert!(
            log.contains("Table 'MyIngress.ipv4_lpm'"),
            "per-packet trace missing"
        );
        files.push((outs, log));
    }
    assert!(files[0].0 == files[1].0, "output files differ");
    assert!(files[0].1 == files[1].1, "logs differ");
}

/// Refused combinations say why.
#[test]
fn p4runtime_with_workers_is_refused() {
    let d = setup("refuse");
    let o = tern(&d, 2, &["--grpc-addr", "127.0.0.1:1"]);
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("not supported with workers"), "{e}");
}

struct Child(std::process::Child);
impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Routes installed over Thrift while the run waits reach both workers (every routed flow is
/// forwarded, whichever worker it hashes to); the per-port counter read over Thrift is the sum
/// over workers (every input frame), a write sets the sum, a reset clears every worker; a
/// route deleted after the replay is gone from the control replica.
#[test]
fn thrift_updates_reach_every_worker_and_counters_are_summed() {
    let d = tmpdir("thrift");
    std::fs::write(d.join("router.p4"), ROUTER).unwrap();
    let inputs = write_inputs(&d);
    let port = common::free_port();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tern"));
    cmd.current_dir(&d)
        .args(["run", "router.p4", "--use-files", "2", "--workers", "2"])
        .args(["--thrift-port", &port.to_string()]);
    for p in 1..=PORTS {
        cmd.args(["-i", &format!("{p}@p{p}")]);
    }
    let _switch = Child(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let mut rt = common::thrift_client(port, 30);
    let mut handles = Vec::new();
    for (net, mac) in [(1u8, 0x11u8), (2, 0x22), (3, 0x33)] {
        let h = rt
            .mt_add_entry(
                "MyIngress.ipv4_lpm",
                &[tern_runtime::MatchParam::Lpm {
                    key: vec![10, net, 0, 0],
                    prefix_len: 16,
                }],
                "MyIngress.set_nhop",
                &[vec![0, 0, 0, 0, mac, mac], vec![0, net]],
                None,
            )
            .expect("add route");
        handles.push(h);
    }
    // Wait for the replay (after the 2 s wait) to write every routed frame.
    let want: Vec<usize> = (1..=PORTS)
        .map(|p| {
            (0..PER_PORT)
                .filter(|&i| {
                    let fl: Vec<u16> = (0..FLOWS).filter(|f| (f % 3) as u32 == p - 1).collect();
                    let f = fl[(i * 7 + i / 5) % fl.len()];
                    i % 50 != 49 && f % 8 != 7
                })
                .count()
        })
        .collect();
    let deadline = Instant::now() + Duration::from_secs(60);
    let got = loop {
        let got: Vec<Vec<Vec<u8>>> = (1..=PORTS)
            .map(|p| read_pcap(&d.join(format!("p{p}_out.pcap"))))
            .collect();
        let counts: Vec<usize> = got.iter().map(Vec::len).collect();
        if counts == want || Instant::now() > deadline {
            break got;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let counts: Vec<usize> = got.iter().map(Vec::len).collect();
    assert_eq!(counts, want, "frames forwarded per port");
    for (p, frames) in got.iter().enumerate() {
        let mac = 0x11 * (p as u8 + 1);
        assert!(frames.iter().all(|f| f[0..6] == [0, 0, 0, 0, mac, mac]));
    }
    // Both workers had routed flows, so both applied the routes.
    assert!(workers_of_routed_flows(2).iter().all(|&k| k > 0));
    // Counters: every input frame was counted by some worker; the read is the sum.
    for p in 1..=PORTS {
        let c = rt.counter_read("MyIngress.rx_port", p).expect("read");
        assert_eq!(c.packets, inputs[p as usize - 1] as u64, "port {p}");
        assert_eq!(c.bytes, 64 * c.packets, "port {p}");
    }
    rt.counter_write(
        "MyIngress.rx_port",
        1,
        tern_runtime::CounterValue {
            packets: 5,
            bytes: 7,
        },
    )
    .expect("write");
    let c = rt.counter_read("MyIngress.rx_port", 1).unwrap();
    assert_eq!((c.packets, c.bytes), (5, 7));
    rt.counter_reset_all("MyIngress.rx_port").expect("reset");
    assert_eq!(rt.counter_read("MyIngress.rx_port", 2).unwrap().packets, 0);
    // Errors come from the control replica's validation, as with one switch.
    assert!(rt.counter_read("MyIngress.nope", 1).is_err());
    rt.mt_delete_entry("MyIngress.ipv4_lpm", handles[0])
        .expect("delete");
    assert_eq!(rt.mt_get_num_entries("MyIngress.ipv4_lpm").unwrap(), 2);
}
