//! `tern run --use-files` reading inputs in place (mapped pcap files): the files it writes are
//! byte-identical to those of the streaming paths (the `--pcap` capture wrapper and FIFO inputs
//! read packets through copies; logging at info level runs one packet at a time) on a program
//! with several ports, drops, multicast, resubmit, recirculate and clones to a CPU port; a
//! truncated input still gets the packets before the cut written; an empty input is a clear
//! error.

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
    let mut sum: u32 = ip
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    let mut csum = !(sum as u16);
    if k % 17 == 0 {
        csum ^= 1; // a bad checksum now and then
    }
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.resize(60 + (k % 30) as usize, k as u8);
    if k % 23 == 0 {
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
