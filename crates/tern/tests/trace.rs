//! `tern run --log-console` at debug/trace level narrates each packet as simple_switch does:
//! parser states and extracted headers, tables with key, hit/miss and action data, conditions,
//! pipelines, checksum updates and deparsed headers, in that order.

use std::path::Path;
use std::process::Command;
use tern_ports::pcap::{PcapWriter, WriterConfig};

const TERN: &str = env!("CARGO_BIN_EXE_tern");
const BASIC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/tutorials/basic.p4");

/// A scratch directory for one test, removed when it ends (also on failure).
fn tmpdir(name: &str) -> tern_fixtures::ScratchDir {
    tern_fixtures::scratch(&format!("trace-{name}"))
}

/// Ethernet + IPv4 (UDP protocol number, valid header checksum) to `dst`.
fn ipv4_frame(dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![8, 0, 0, 0, 1, 1, 8, 0, 0, 0, 2, 2, 0x08, 0x00];
    let mut ip = vec![0x45, 0, 0, 28, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 1, 1];
    ip.extend_from_slice(&dst);
    let csum = tern_fixtures::ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0; 8]);
    f
}

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let f = std::fs::File::create(path).unwrap();
    let mut w = PcapWriter::new(f, WriterConfig::ethernet()).unwrap();
    for (i, fr) in frames.iter().enumerate() {
        w.write_packet(1_000_000_000 + i as u64 * 1000, fr).unwrap();
    }
}

/// Runs basic.p4 with one route on two packets (one routed, one missed); returns the log
/// lines without their timestamp/thread prefix.
fn run_basic(dir: &Path, level: &str) -> Vec<String> {
    let o = Command::new(TERN)
        .current_dir(dir)
        .args(["compile", BASIC, "-o", "basic.json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(
        dir.join("cmds.txt"),
        "table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.2/32 => 08:00:00:00:02:22 1\n",
    )
    .unwrap();
    write_pcap(
        &dir.join("p0_in.pcap"),
        &[ipv4_frame([10, 0, 2, 2]), ipv4_frame([10, 9, 9, 9])],
    );
    write_pcap(&dir.join("p1_in.pcap"), &[]);
    let o = Command::new(TERN)
        .current_dir(dir)
        .args(["run", "--use-files", "0", "-i", "0@p0", "-i", "1@p1"])
        .args(["--commands", "cmds.txt", "--log-console", "-L", level])
        .arg("basic.json")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(|l| {
            // "[time] [bmv2] [D] [thread N] [0.0] [cxt 0] text" -> "[D] text"
            match (l.find("[bmv2] "), l.find("[cxt 0] ")) {
                (Some(b), Some(c)) => format!("{} {}", &l[b + 7..b + 10], &l[c + 8..]),
                _ => l.to_string(),
            }
        })
        .collect()
}

/// `want` appear in `lines` in this order (other lines may come between).
fn assert_in_order(lines: &[String], want: &[&str]) {
    let mut it = lines.iter();
    for w in want {
        assert!(
            it.any(|l| l == w),
            "missing or out of order: {w:?}\nlog:\n{}",
            lines.join("\n")
        );
    }
}

#[test]
fn trace_level_narrates_parser_tables_actions_and_deparser() {
    let d = tmpdir("trace");
    let lines = run_basic(&d, "trace");
    assert_in_order(
        &lines,
        &[
            "[D] Processing packet received on port 0",
            "[D] Parser 'parser': start",
            "[D] Parser 'parser' entering state 'start'",
            "[D] Parser 'parser' entering state 'parse_ethernet'",
            "[D] Extracting header 'ethernet'",
            "[D] Parser state 'parse_ethernet': key is 0800",
            "[T] Bytes parsed: 14",
            "[D] Parser 'parser' entering state 'parse_ipv4'",
            "[D] Extracting header 'ipv4'",
            "[T] Bytes parsed: 34",
            "[D] Parser 'parser': end",
            "[D] Pipeline 'ingress': start",
            "[T] Applying table 'MyIngress.ipv4_lpm'",
            "[D] Looking up key:",
            "* hdr.ipv4.dstAddr    : 0a000202",
            "[D] Table 'MyIngress.ipv4_lpm': hit with handle 0",
            "[D] Action entry is MyIngress.ipv4_forward - 80000000222,1,",
            "[T] Action MyIngress.ipv4_forward",
            "[D] Pipeline 'ingress': end",
            "[D] Pipeline 'egress': start",
            "[D] Pipeline 'egress': end",
            "[D] Deparser 'deparser': start",
            "[D] Updating checksum 'cksum'",
            "[D] Deparsing header 'ethernet'",
            "[D] Deparsing header 'ipv4'",
            "[D] Deparser 'deparser': end",
            "[D] Transmitting packet of size 42 out of port 1",
            // The second packet misses and runs the default action (drop).
            "* hdr.ipv4.dstAddr    : 0a090909",
            "[D] Table 'MyIngress.ipv4_lpm': miss",
            "[D] Action entry is MyIngress.drop - ",
        ],
    );
    // basic.p4's only condition (`hdr.ipv4.isValid()`) is logged with its outcome.
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("[T] Condition \"") && l.ends_with(" is true")),
        "{}",
        lines.join("\n")
    );
}

#[test]
fn debug_level_omits_trace_lines_and_info_omits_the_narration() {
    let d = tmpdir("debug");
    let lines = run_basic(&d, "debug");
    assert!(lines
        .iter()
        .any(|l| l == "[D] Table 'MyIngress.ipv4_lpm': miss"));
    assert!(!lines.iter().any(|l| l.starts_with("[T] ")), "{lines:?}");

    let d = tmpdir("info");
    let lines = run_basic(&d, "info");
    assert!(
        !lines
            .iter()
            .any(|l| l.contains("Parser '") || l.contains("Table '")),
        "{lines:?}"
    );
}
