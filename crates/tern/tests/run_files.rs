//! `tern run --use-files` reading inputs in place (mapped pcap files): the files it writes are
//! byte-identical to those of the streaming paths (the `--pcap` capture wrapper and FIFO inputs
//! read packets through copies; logging at info level runs one packet at a time) on a program
//! with several ports, drops, multicast, resubmit, recirculate and clones to a CPU port; a
//! truncated input still gets the packets before the cut written; an empty input is a clear
//! error; `--workers 2` on mapped inputs writes what one worker writes (the L3 router: no
//! register couples flows, so with `--deterministic` the files are byte-identical, which is
//! the same multiset per port and the same order within each flow).

use std::path::Path;
use std::process::{Command, Output};

const LANE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/tests/lane.p4");

/// Routes, a clone session to the CPU port (64) and multicast group 1 (ports 2 and 3).
const COMMANDS: &str = "\
table_add route fwd 10.0.0.1 => 2 0x0000000000aa
table_add route fwd 10.0.0.2 => 3 0x0000000000bb
table_add route fwd 10.0.0.3 => 4 0x0000000000cc
table_add route fwd 10.0.0.4 => 9 0x0000000000dd
mirroring_add 5 64
mirroring_add 6 64
mc_mgrp_create 1
mc_node_create 0 2 3
mc_node_associate 1 0
";

/// The port files: inputs on p0 and p1, outputs on every port (64 is the CPU port).
const PORTS: [(u32, &str); 6] = [
    (0, "p0"),
    (1, "p1"),
    (2, "p2"),
    (3, "p3"),
    (4, "p4"),
    (64, "cpu"),
];

fn ipv4_frame(k: u32) -> Vec<u8> {
    let mut f = vec![
        0x02,
        0,
        0,
        0,
        0,
        1,
        0x02,
        0,
        0,
        0,
        (k >> 8) as u8,
        k as u8,
        0x08,
        0x00,
    ];
    let ds = (k % 13) as u8; // 0..=11 pick the lane's cases, 12 is plain unicast
    let dst = [10, 0, 0, 1 + (k % 5) as u8]; // 10.0.0.5 misses the table
    let mut ip = vec![0x45, ds, 0, 46, (k >> 8) as u8, k as u8, 0, 0, 64, 17, 0, 0];
    ip.extend_from_slice(&[192, 168, 0, k as u8]);
    ip.extend_from_slice(&dst);
    let mut csum = tern_fixtures::ipv4_checksum(&ip);
    if k.is_multiple_of(17) {
        csum ^= 1; // a bad checksum now and then
    }
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.resize(60 + (k % 30) as usize, k as u8);
    if k.is_multiple_of(23) {
        f[12] = 0x86; // not IPv4
    }
    f
}

/// Classic pcap, host byte order, microseconds.
fn pcap(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut b = Vec::new();
    for v in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        b.extend_from_slice(&v.to_ne_bytes());
    }
    for (us, d) in frames {
        for v in [
            (us / 1_000_000) as u32,
            (us % 1_000_000) as u32,
            d.len() as u32,
            d.len() as u32,
        ] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(d);
    }
    b
}

/// 300 frames on p0 and 200 on p1, interleaved by timestamp (with ties).
fn inputs() -> [Vec<u8>; 2] {
    let a: Vec<_> = (0..300u32)
        .map(|k| (1_000 + 2 * k as u64, ipv4_frame(k)))
        .collect();
    let b: Vec<_> = (0..200u32)
        .map(|k| (1_000 + 3 * k as u64, ipv4_frame(1000 + k)))
        .collect();
    [pcap(&a), pcap(&b)]
}

fn setup(name: &str) -> tern_fixtures::ScratchDir {
    let d = tern_fixtures::scratch(&format!("runfiles-{name}"));
    std::fs::write(d.join("commands.txt"), COMMANDS).unwrap();
    let [a, b] = inputs();
    std::fs::write(d.join("p0_in.pcap"), a).unwrap();
    std::fs::write(d.join("p1_in.pcap"), b).unwrap();
    for (_, n) in &PORTS[2..] {
        std::fs::write(d.join(format!("{n}_in.pcap")), pcap(&[])).unwrap();
    }
    d
}

fn tern(dir: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "run",
        LANE,
        "--use-files",
        "0",
        "--commands",
        "commands.txt",
    ];
    let specs: Vec<String> = PORTS.iter().map(|(p, n)| format!("{p}@{n}")).collect();
    for s in &specs {
        args.extend(["-i", s]);
    }
    args.extend(extra);
    Command::new(env!("CARGO_BIN_EXE_tern"))
        .current_dir(dir)
        .args(&args)
        .output()
        .expect("run tern")
}

/// Every output file of the last run, by port name.
fn outputs(dir: &Path) -> Vec<(String, Vec<u8>)> {
    PORTS
        .iter()
        .map(|(_, n)| {
            let p = dir.join(format!("{n}_out.pcap"));
            (n.to_string(), std::fs::read(&p).unwrap())
        })
        .collect()
}

fn summary(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "stderr: {err}");
    err.lines()
        .find(|l| l.contains("packets in"))
        .unwrap_or_else(|| panic!("no summary: {err}"))
        .split(", ")
        .take(5) // counts only (not the time)
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn mapped_inputs_write_what_streamed_inputs_write() {
    tern_fixtures::require!();
    let d = setup("same");
    // Mapped inputs, batches of 32 read in place.
    let o = tern(&d, &["--deterministic"]);
    let counts = summary(&o);
    let mapped = outputs(&d);
    // Every kind of output is there: unicast on 2..4, multicast on 2 and 3, clones on the
    // CPU port, drops (misses, mark_to_drop) and discards (port 9 has no file).
    for (name, bytes) in &mapped {
        if name != "p0" && name != "p1" {
            assert!(bytes.len() > 24 + 16 * 20, "{name}: {} bytes", bytes.len());
        }
    }
    assert!(counts.contains("500 packets in"), "{counts}");
    assert!(
        !counts.contains(" 0 dropped") && !counts.contains(" 0 discarded"),
        "{counts}"
    );

    // The streaming port set under the `--pcap` capture (copies, per-frame sends).
    let cap = d.join("cap");
    std::fs::create_dir(&cap).unwrap();
    let o = tern(&d, &["--deterministic", "--pcap", cap.to_str().unwrap()]);
    assert_eq!(summary(&o), counts);
    assert_eq!(outputs(&d), mapped, "--pcap run");

    // One packet at a time (logging at info level takes the unbatched loop).
    let o = tern(
        &d,
        &["--deterministic", "--log-file", "run.log", "-L", "info"],
    );
    assert_eq!(summary(&o), counts);
    assert_eq!(outputs(&d), mapped, "per-packet run");
}

#[test]
fn fifo_inputs_write_what_mapped_inputs_write() {
    tern_fixtures::require!();
    let d = setup("fifo");
    let o = tern(&d, &["--deterministic"]);
    let counts = summary(&o);
    let mapped = outputs(&d);
    // The same inputs through FIFOs, each fed by its own thread.
    let [a, b] = inputs();
    let mut feeders = Vec::new();
    for (name, bytes) in [("p0", a), ("p1", b)] {
        let path = d.join(format!("{name}_in.pcap"));
        std::fs::remove_file(&path).unwrap();
        let st = Command::new("mkfifo").arg(&path).status().unwrap();
        assert!(st.success(), "mkfifo");
        feeders.push(std::thread::spawn(move || {
            // Blocks until tern opens the FIFO for reading; fails (not hangs) if tern exits.
            std::fs::write(&path, bytes)
        }));
    }
    let o = tern(&d, &["--deterministic"]);
    // Checked first: if tern failed before opening a FIFO, its feeder stays blocked (the
    // thread ends with the test process).
    assert_eq!(summary(&o), counts);
    for f in feeders {
        f.join().unwrap().unwrap();
    }
    assert_eq!(outputs(&d), mapped);
}

#[test]
fn truncated_input_writes_what_came_before_and_fails_clearly() {
    tern_fixtures::require!();
    let d = setup("trunc");
    let frames: Vec<_> = (0..100u32).map(|k| (k as u64, ipv4_frame(5 * k))).collect();
    let mut b = pcap(&frames);
    let whole = b.len();
    b.extend_from_slice(&pcap(&[(7, ipv4_frame(0))])[24..]);
    b.truncate(b.len() - 5);
    std::fs::write(d.join("p0_in.pcap"), &b).unwrap();
    std::fs::write(d.join("p1_in.pcap"), pcap(&[])).unwrap();
    let o = tern(&d, &["--deterministic"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("p0_in.pcap") && err.contains(&format!("byte offset {}", whole + 16)),
        "{err}"
    );
    // Frames 5k all go to 10.0.0.1 (port 2), plain unicast or one of the lane's cases: the
    // 100 packets before the cut were processed and written.
    let p2 = std::fs::read(d.join("p2_out.pcap")).unwrap();
    let mut r = tern_ports::PcapReader::new(&p2[..]).unwrap();
    let mut n = 0;
    while r.next_packet().unwrap().is_some() {
        n += 1;
    }
    assert!(n >= 60, "{n} frames on port 2");

    // An empty input file is an error naming it.
    std::fs::write(d.join("p1_in.pcap"), b"").unwrap();
    let o = tern(&d, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("p1_in.pcap") && err.contains("empty file"),
        "{err}"
    );
}

/// The run of the mapped inputs (one input left for most of the file: the fast path without
/// the merge) against the `--pcap` capture's (every packet through the merge and a copy):
/// same files, same counts, also when the input has a corrupt record in the middle (both
/// stop there with the same error and the packets before it written).
#[test]
fn one_input_fast_path_writes_what_the_merge_writes() {
    tern_fixtures::require!();
    let d = setup("one-input");
    // p1 ends after 10 packets; p0 carries 700 more alone.
    let a: Vec<_> = (0..700u32)
        .map(|k| (5_000 + k as u64, ipv4_frame(k)))
        .collect();
    let b: Vec<_> = (0..10u32)
        .map(|k| (5_000 + k as u64, ipv4_frame(2000 + k)))
        .collect();
    std::fs::write(d.join("p0_in.pcap"), pcap(&a)).unwrap();
    std::fs::write(d.join("p1_in.pcap"), pcap(&b)).unwrap();
    let cap = d.join("cap");
    std::fs::create_dir(&cap).unwrap();
    let capture = ["--pcap", cap.to_str().unwrap()];
    for det in [true, false] {
        let extra: &[&str] = if det { &["--deterministic"] } else { &[] };
        let o = tern(&d, extra);
        let counts = summary(&o);
        assert!(counts.contains("710 packets in"), "{counts}");
        let mapped = outputs(&d);
        let o = tern(&d, &[extra, &capture[..]].concat());
        assert_eq!(summary(&o), counts);
        if det {
            assert!(outputs(&d) == mapped, "--pcap run wrote different files");
        } else {
            // Wall-clock time (the lane writes it into the frames) differs: same records.
            let records = |f: &[u8]| {
                let mut r = tern_ports::PcapReader::new(f).unwrap();
                let mut n = 0;
                while r.next_packet().unwrap().is_some() {
                    n += 1;
                }
                n
            };
            for ((n, x), (_, y)) in outputs(&d).iter().zip(&mapped) {
                assert_eq!(records(x), records(y), "{n}");
            }
        }
    }

    // A record claiming 100 MiB after packet 400 of p0: both runs write the outputs of the
    // 410 packets before it (p0's 400, p1's 10) and fail with the same message.
    let mut bytes = pcap(&a[..400]);
    let bad_at = bytes.len();
    bytes.extend_from_slice(&pcap(&a[400..])[24..]);
    bytes[bad_at + 8..bad_at + 12].copy_from_slice(&(100u32 << 20).to_ne_bytes());
    std::fs::write(d.join("p0_in.pcap"), &bytes).unwrap();
    let o = tern(&d, &["--deterministic"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("p0_in.pcap") && err.contains(&format!("byte offset {}", bad_at + 8)),
        "{err}"
    );
    let mapped = outputs(&d);
    let o = tern(&d, &["--deterministic", "--pcap", cap.to_str().unwrap()]);
    assert!(!o.status.success());
    let err2 = String::from_utf8_lossy(&o.stderr).into_owned();
    let last = |e: &str| e.lines().last().unwrap_or_default().to_string();
    assert_eq!(last(&err2), last(&err));
    assert!(
        outputs(&d) == mapped,
        "--pcap run, corrupt input: different files"
    );
    // And the one-at-a-time loop (info-level logging).
    let o = tern(
        &d,
        &["--deterministic", "--log-file", "run.log", "-L", "info"],
    );
    assert!(!o.status.success());
    assert!(
        outputs(&d) == mapped,
        "per-packet run, corrupt input: different files"
    );
    // Something was written before the error.
    let total: usize = mapped.iter().map(|(_, b)| b.len()).sum();
    assert!(total > 6 * 24 + 300 * 76, "{total} bytes written");

    // A file that is not pcap at all: a clear error naming it.
    std::fs::write(d.join("p1_in.pcap"), b"this is not a capture file at all").unwrap();
    let o = tern(&d, &[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("p1_in.pcap"), "{err}");
}

const L3: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/bench/l3_router.p4");

/// Routes 10.0.R.0/24 (R < 4) to port 1 + R; 10.0.4.0/24 has no route (dropped).
const L3_ROUTES: &str = "\
table_add RIngress.ipv4_lpm RIngress.set_nhop 10.0.0.0/24 => 02:aa:00:00:00:00 1
table_add RIngress.ipv4_lpm RIngress.set_nhop 10.0.1.0/24 => 02:aa:00:00:00:01 2
table_add RIngress.ipv4_lpm RIngress.set_nhop 10.0.2.0/24 => 02:aa:00:00:00:02 3
table_add RIngress.ipv4_lpm RIngress.set_nhop 10.0.3.0/24 => 02:aa:00:00:00:03 4
";

/// An IPv4/UDP frame of flow `f` (source address and ports), packet `k` of it (in the IPv4
/// identification and the payload), towards 10.0.(f % 5).1; every 11th has TTL 1 (dropped).
fn l3_frame(f: u32, k: u32) -> Vec<u8> {
    let mut b = vec![2, 0xff, 0, 0, 0, f as u8, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    let ttl = if (f + k).is_multiple_of(11) { 1 } else { 64 };
    let mut ip = vec![0x45, 0, 0, 46, (k >> 8) as u8, k as u8, 0, 0, ttl, 17, 0, 0];
    ip.extend_from_slice(&[172, 16, (f >> 8) as u8, f as u8]);
    ip.extend_from_slice(&[10, 0, (f % 5) as u8, 1]);
    let csum = tern_fixtures::ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    b.extend_from_slice(&ip);
    let sport = 1000 + f as u16;
    b.extend_from_slice(&sport.to_be_bytes());
    b.extend_from_slice(&[0x13, 0x88, 0, 26, 0, 0]);
    b.resize(60, k as u8);
    b
}

#[test]
fn two_workers_write_what_one_writes() {
    tern_fixtures::require!();
    let d = tern_fixtures::scratch("runfiles-workers");
    std::fs::write(d.join("routes.txt"), L3_ROUTES).unwrap();
    // 3,000 packets of 40 flows on p0 and 2,000 of 30 other flows on p1, interleaved in time
    // (with ties), so that batches, worker chunks and the merge all matter.
    let a: Vec<_> = (0..3000u32)
        .map(|k| (1_000 + 2 * k as u64, l3_frame(k % 40, k)))
        .collect();
    let b: Vec<_> = (0..2000u32)
        .map(|k| (1_000 + 3 * k as u64, l3_frame(100 + k % 30, k)))
        .collect();
    std::fs::write(d.join("p0_in.pcap"), pcap(&a)).unwrap();
    std::fs::write(d.join("p1_in.pcap"), pcap(&b)).unwrap();
    for p in 2..5 {
        std::fs::write(d.join(format!("p{p}_in.pcap")), pcap(&[])).unwrap();
    }
    let run = |extra: &[&str]| {
        let mut args = vec!["run", L3, "--use-files", "0", "--commands", "routes.txt"];
        args.extend([
            "-i", "0@p0", "-i", "1@p1", "-i", "2@p2", "-i", "3@p3", "-i", "4@p4",
        ]);
        args.extend(extra);
        let o = Command::new(env!("CARGO_BIN_EXE_tern"))
            .current_dir(&d)
            .args(&args)
            .output()
            .expect("run tern");
        let counts = summary(&o);
        let files: Vec<Vec<u8>> = (0..5)
            .map(|p| std::fs::read(d.join(format!("p{p}_out.pcap"))).unwrap())
            .collect();
        (counts, files)
    };
    let (counts, one) = run(&["--deterministic"]);
    assert!(counts.contains("5000 packets in"), "{counts}");
    assert!(!counts.contains(" 0 dropped"), "{counts}");
    for (p, f) in one.iter().enumerate().skip(1) {
        assert!(f.len() > 24 + 100 * 76, "port {p}: {} bytes", f.len());
    }
    for w in ["2", "3"] {
        let (counts2, two) = run(&["--deterministic", "--workers", w]);
        assert_eq!(counts2, counts);
        for (p, (x, y)) in one.iter().zip(&two).enumerate() {
            assert!(x == y, "port {p}: --workers {w} wrote different bytes");
        }
    }
}

/// The files of a lane run with the bytes its shared registers write masked: the lane counts
/// packets per IPv4 diffserv value in registers shared by every worker, so with several
/// workers the counts a packet reads (written into the IPv4 identification and fragment
/// offset, and so the checksum) depend on how the workers' threads interleave. Everything
/// else (record headers, which frames, their order per port, the rest of their bytes) is
/// deterministic.
fn masked(files: Vec<(String, Vec<u8>)>) -> Vec<(String, Vec<u8>)> {
    files
        .into_iter()
        .map(|(n, mut b)| {
            let mut i = 24;
            while i + 16 <= b.len() {
                let len = u32::from_ne_bytes(b[i + 8..i + 12].try_into().unwrap()) as usize;
                let f = i + 16;
                // Truncated frames (the lane's `truncate` case) keep what they have of them.
                if len >= 14 && b[f + 12..f + 14] == [8, 0] {
                    for k in [18, 19, 20, 21, 24, 25].into_iter().filter(|&k| k < len) {
                        b[f + k] = 0;
                    }
                }
                i = f + len;
            }
            (n, b)
        })
        .collect()
}

/// `--workers 2` and `3` on mapped inputs (the workers read and write the files themselves)
/// against the dispatching run (the `--pcap` capture takes it: the main thread reads, hands
/// packets to the workers and writes in input order) on the lane program: multicast, clones
/// to the CPU port, drops, discards. Same counts, same files but for the bytes the lane's
/// shared registers write ([`masked`]). A corrupt record stops both after writing what
/// came before it.
#[test]
fn workers_on_mapped_files_write_what_the_dispatcher_writes() {
    tern_fixtures::require!();
    let d = setup("par-lane");
    let cap = d.join("cap");
    std::fs::create_dir(&cap).unwrap();
    for w in ["2", "3"] {
        let o = tern(&d, &["--deterministic", "--workers", w]);
        let counts = summary(&o);
        assert!(counts.contains("500 packets in"), "{counts}");
        let par = masked(outputs(&d));
        for (name, bytes) in &par {
            if name != "p0" && name != "p1" {
                assert!(bytes.len() > 24 + 16 * 20, "{name}: {} bytes", bytes.len());
            }
        }
        let o = tern(
            &d,
            &[
                "--deterministic",
                "--workers",
                w,
                "--pcap",
                cap.to_str().unwrap(),
            ],
        );
        assert_eq!(summary(&o), counts, "--workers {w}");
        assert!(
            masked(outputs(&d)) == par,
            "--workers {w}: the dispatcher wrote different files"
        );
    }

    let a: Vec<_> = (0..300u32)
        .map(|k| (1_000 + k as u64, ipv4_frame(k)))
        .collect();
    let mut bytes = pcap(&a[..250]);
    let bad_at = bytes.len();
    bytes.extend_from_slice(&pcap(&a[250..])[24..]);
    bytes[bad_at + 8..bad_at + 12].copy_from_slice(&(100u32 << 20).to_ne_bytes());
    std::fs::write(d.join("p0_in.pcap"), &bytes).unwrap();
    std::fs::write(d.join("p1_in.pcap"), pcap(&[])).unwrap();
    let o = tern(&d, &["--deterministic", "--workers", "2"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("p0_in.pcap") && err.contains(&format!("byte offset {}", bad_at + 8)),
        "{err}"
    );
    let par = masked(outputs(&d));
    let total: usize = par.iter().map(|(_, b)| b.len()).sum();
    assert!(total > 6 * 24 + 150 * 76, "{total} bytes written");
    let o = tern(
        &d,
        &[
            "--deterministic",
            "--workers",
            "2",
            "--pcap",
            cap.to_str().unwrap(),
        ],
    );
    assert!(!o.status.success());
    assert!(
        masked(outputs(&d)) == par,
        "corrupt input: the dispatcher wrote different files"
    );
}

/// More packets than one window of the workers' file mode (32,768), so that windows follow
/// each other while the next is read: `--workers 2` and `3` write what one worker writes,
/// also when a corrupt record in the third window stops the run (everything before it
/// written).
#[test]
fn workers_over_several_windows_write_what_one_writes() {
    tern_fixtures::require!();
    let d = tern_fixtures::scratch("runfiles-windows");
    std::fs::write(d.join("routes.txt"), L3_ROUTES).unwrap();
    let a: Vec<_> = (0..50_000u32)
        .map(|k| (1_000 + 3 * k as u64, l3_frame(k % 97, k)))
        .collect();
    let b: Vec<_> = (0..30_000u32)
        .map(|k| (1_000 + 5 * k as u64, l3_frame(200 + k % 31, k)))
        .collect();
    std::fs::write(d.join("p1_in.pcap"), pcap(&b)).unwrap();
    for p in 2..5 {
        std::fs::write(d.join(format!("p{p}_in.pcap")), pcap(&[])).unwrap();
    }
    let run = |extra: &[&str]| {
        let mut args = vec!["run", L3, "--use-files", "0", "--commands", "routes.txt"];
        args.extend([
            "-i", "0@p0", "-i", "1@p1", "-i", "2@p2", "-i", "3@p3", "-i", "4@p4",
        ]);
        args.extend(["--deterministic"]);
        args.extend(extra);
        let o = Command::new(env!("CARGO_BIN_EXE_tern"))
            .current_dir(&d)
            .args(&args)
            .output()
            .expect("run tern");
        let files: Vec<Vec<u8>> = (0..5)
            .map(|p| std::fs::read(d.join(format!("p{p}_out.pcap"))).unwrap())
            .collect();
        (o, files)
    };
    std::fs::write(d.join("p0_in.pcap"), pcap(&a)).unwrap();
    let (o, one) = run(&[]);
    let counts = summary(&o);
    assert!(counts.contains("80000 packets in"), "{counts}");
    for w in ["2", "3"] {
        let (o, files) = run(&["--workers", w]);
        assert_eq!(summary(&o), counts, "--workers {w}");
        for (p, (x, y)) in one.iter().zip(&files).enumerate() {
            assert!(x == y, "port {p}: --workers {w} wrote different bytes");
        }
    }

    // Record 45,000 of p0 claims 100 MiB: about 72,000 packets come before it.
    let mut bytes = pcap(&a[..45_000]);
    let bad_at = bytes.len();
    bytes.extend_from_slice(&pcap(&a[45_000..])[24..]);
    bytes[bad_at + 8..bad_at + 12].copy_from_slice(&(100u32 << 20).to_ne_bytes());
    std::fs::write(d.join("p0_in.pcap"), &bytes).unwrap();
    let (o, one) = run(&[]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        err.contains("p0_in.pcap") && err.contains(&format!("byte offset {}", bad_at + 8)),
        "{err}"
    );
    let total: usize = one.iter().map(|f| f.len()).sum();
    // (a fifth of the flows have no route and every 11th packet has TTL 1: dropped)
    assert!(total > 45_000 * 76, "{total} bytes written");
    let (o, two) = run(&["--workers", "2"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains(&format!("byte offset {}", bad_at + 8)),
        "--workers 2: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    for (p, (x, y)) in one.iter().zip(&two).enumerate() {
        assert!(
            x == y,
            "port {p}: --workers 2 wrote different bytes (corrupt input)"
        );
    }
}

/// An output that cannot be written (`p2_out.pcap` is a link to `/dev/full`: every write
/// fails with ENOSPC) ends the run with an error naming the file, on one thread and with a
/// pool of 2 or 3 workers (a worker's failure reaches the main thread, which stops the pool:
/// nothing waits forever at a barrier).
#[test]
fn a_failing_output_ends_the_run_with_an_error() {
    tern_fixtures::require!();
    if !Path::new("/dev/full").exists() {
        eprintln!("skipped: no /dev/full");
        return;
    }
    let d = tern_fixtures::scratch("runfiles-full");
    std::fs::write(d.join("routes.txt"), L3_ROUTES).unwrap();
    // Two windows of the workers' file mode, most of it routed to port 2.
    let a: Vec<_> = (0..40_000u32)
        .map(|k| {
            (
                1_000 + k as u64,
                l3_frame(if k % 4 == 0 { 2 } else { 1 }, k),
            )
        })
        .collect();
    std::fs::write(d.join("p0_in.pcap"), pcap(&a)).unwrap();
    for p in 1..5 {
        std::fs::write(d.join(format!("p{p}_in.pcap")), pcap(&[])).unwrap();
    }
    for w in ["1", "2", "3"] {
        let out = d.join("p2_out.pcap");
        let _ = std::fs::remove_file(&out);
        std::os::unix::fs::symlink("/dev/full", &out).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_tern"))
            .current_dir(&d)
            .args(["run", L3, "--use-files", "0", "--commands", "routes.txt"])
            .args([
                "-i", "0@p0", "-i", "1@p1", "-i", "2@p2", "-i", "3@p3", "-i", "4@p4",
            ])
            .args(["--workers", w])
            .output()
            .expect("run tern");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "--workers {w}: {err}");
        assert!(
            err.contains("p2_out.pcap") && err.contains("No space left"),
            "--workers {w}: {err}"
        );
        std::fs::remove_file(&out).unwrap();
    }
}
