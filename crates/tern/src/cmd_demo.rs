//! `tern demo` (also what `tern` runs with no arguments): the whole stack in one go.
//!
//! 1. compile the built-in IPv4 router (`p4/tutorials/basic.p4`) with tern's own P4 compiler;
//! 2. load the BMv2 JSON it emits into the engine;
//! 3. install routes through the simple_switch_CLI command language;
//! 4. push generated traffic through the switch in memory and report where it went, a sample
//!    packet before and after, whether every forwarded packet is a correct IPv4 packet
//!    (TTL decremented, checksum valid), and how fast it ran.

use anyhow::Context as _;
use std::process::ExitCode;
use std::time::Instant;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{OutputPacket, PacketPath};

const BASIC_P4: &str = include_str!("../../../p4/tutorials/basic.p4");

/// Routes of the demo, in the runtime command language.
const COMMANDS: &str = "\
table_set_default MyIngress.ipv4_lpm MyIngress.drop
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.1.0/24 => 00:00:0a:00:01:01 1
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.0/24 => 00:00:0a:00:02:02 2
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.0.0/16 => 00:00:0a:00:00:fe 3
table_add MyIngress.ipv4_lpm MyIngress.ipv4_forward 10.0.2.7/32 => 00:00:0a:00:02:07 4
";

#[derive(clap::Args)]
pub struct DemoArgs {
    /// Packets to push through the switch.
    #[arg(long, default_value_t = 1_000_000)]
    pub packets: u64,
    /// Distinct destination addresses in the generated traffic.
    #[arg(long, default_value_t = 1024)]
    pub flows: u32,
    /// Compile this P4 file instead of the built-in router (routes are still the router's:
    /// use with programs that have the same tables).
    #[arg(long, value_name = "FILE")]
    pub p4: Option<std::path::PathBuf>,
}

impl Default for DemoArgs {
    fn default() -> Self {
        DemoArgs {
            packets: 1_000_000,
            flows: 1024,
            p4: None,
        }
    }
}

pub fn run(args: DemoArgs) -> anyhow::Result<ExitCode> {
    println!("tern demo: compile a P4 router, configure it, push traffic through it\n");

    // 1. Compile.
    let (src, name) = match &args.p4 {
        Some(p) => (
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
            p.display().to_string(),
        ),
        None => (BASIC_P4.to_string(), "p4/tutorials/basic.p4".to_string()),
    };
    let t = Instant::now();
    let compiled = tern_p4::compile_str(&src, &name, &tern_p4::Options::default())
        .map_err(|d| anyhow::anyhow!("{d}"))?;
    let tables: usize = compiled
        .program
        .pipelines
        .iter()
        .map(|p| p.tables.len())
        .sum();
    println!(
        "[1] compiled {name} ({} lines) with tern's P4 compiler in {:.1} ms: {} tables, {} actions, \
         {} bytes of BMv2 JSON, {} bytes of P4Info",
        src.lines().count(),
        t.elapsed().as_secs_f64() * 1e3,
        tables,
        compiled.program.actions.len(),
        compiled.json.len(),
        compiled.p4info.len()
    );

    // 2. Load.
    let t = Instant::now();
    let mut sw = Switch::from_json(&compiled.json, SwitchOptions::default())
        .context("loading the compiled JSON")?;
    println!(
        "[2] loaded into the engine in {:.1} ms",
        t.elapsed().as_secs_f64() * 1e3
    );

    // 3. Configure.
    println!("[3] runtime commands (simple_switch_CLI syntax):");
    let mut cli = tern_control::Cli::new(sw.program());
    for line in COMMANDS.lines() {
        let out = cli.execute(&mut sw, line);
        println!("    RuntimeCmd: {line}");
        for l in out.lines().filter(|l| !l.trim().is_empty()) {
            println!("      {l}");
        }
    }

    // 4. Traffic.
    let flows = args.flows.max(1);
    let frames: Vec<Vec<u8>> = (0..flows).map(|i| frame(dst_of(i))).collect();
    let mut per_port = std::collections::BTreeMap::<u32, u64>::new();
    let mut dropped = 0u64;
    let mut bad = Vec::new();
    let mut out: Vec<OutputPacket> = Vec::with_capacity(4);

    // Correctness pass: every flow once, every output checked.
    for (i, f) in frames.iter().enumerate() {
        out.clear();
        sw.process_packet(0, f, &mut out);
        let want = expected_port(dst_of(i as u32));
        let got = out.first().map(|o| o.port);
        if got != want || out.len() > 1 {
            bad.push(format!(
                "dst {}: expected {:?}, got {:?}",
                ip(dst_of(i as u32)),
                want,
                got
            ));
        }
        if let Some(o) = out.first() {
            if let Err(e) = check_forwarded(f, &o.data) {
                bad.push(format!("dst {}: {e}", ip(dst_of(i as u32))));
            }
        }
    }
    let sample_in = &frames[1 % frames.len()];
    out.clear();
    sw.process_packet(0, sample_in, &mut out);
    println!("[4] a packet to {} before and after:", ip(dst_of(1)));
    println!("    in  port 0: {}", hex(&sample_in[..34]));
    if let Some(o) = out.first() {
        println!("    out port {}: {}", o.port, hex(&o.data[..34]));
        println!(
            "    (MACs rewritten, TTL 64 -> {}, checksum recomputed)",
            o.data[22]
        );
    }

    // Throughput pass.
    let n = args.packets;
    let t = Instant::now();
    let mut last_report = Instant::now();
    for k in 0..n {
        out.clear();
        sw.process_packet(0, &frames[(k % flows as u64) as usize], &mut out);
        match out.first() {
            Some(o) => *per_port.entry(o.port).or_default() += 1,
            None => dropped += 1,
        }
        if last_report.elapsed().as_secs() >= 2 {
            eprintln!("    ... {k} / {n} packets");
            last_report = Instant::now();
        }
    }
    let dt = t.elapsed().as_secs_f64();
    println!("[5] {n} packets ({flows} flows, 64 bytes) through the switch in memory:");
    for (p, c) in &per_port {
        println!(
            "    port {p}: {c:>9} packets ({:.1}%)",
            100.0 * *c as f64 / n as f64
        );
    }
    println!(
        "    dropped: {dropped:>8} packets ({:.1}%, no route)",
        100.0 * dropped as f64 / n as f64
    );
    println!(
        "    {:.2} Mpps on one core, {:.0} ns per packet",
        n as f64 / dt / 1e6,
        dt * 1e9 / n as f64
    );
    if bad.is_empty() {
        println!(
            "    every one of the {flows} flows was checked: right port, TTL-1, valid checksum"
        );
        println!(
            "\nNext: `tern help` lists run, test, compile, cli, p4runtime, bench, kv; \
             README.md has the details."
        );
        Ok(ExitCode::SUCCESS)
    } else {
        println!("    {} flows were forwarded wrongly:", bad.len());
        for b in bad.iter().take(10) {
            println!("      {b}");
        }
        Ok(ExitCode::FAILURE)
    }
}

/// Destination address of flow `i`: spread over the routed prefixes and unrouted space.
fn dst_of(i: u32) -> u32 {
    let host = i / 5;
    let low = (host % 250 + 1) as u8;
    let mid = ((host / 250) % 200) as u8;
    match i % 5 {
        0 => u32::from_be_bytes([10, 0, 1, low]),
        1 => u32::from_be_bytes([10, 0, 2, low]),
        2 => u32::from_be_bytes([10, 0, 3 + mid % 200, low]),
        3 => u32::from_be_bytes([10, 0, 2, 7]),
        _ => u32::from_be_bytes([192, 168, mid, low]),
    }
}

/// Where the routes send `dst` (longest prefix), or `None` for a drop.
fn expected_port(dst: u32) -> Option<u32> {
    let [a, b, c, d] = dst.to_be_bytes();
    match (a, b, c, d) {
        (10, 0, 2, 7) => Some(4),
        (10, 0, 1, _) => Some(1),
        (10, 0, 2, _) => Some(2),
        (10, 0, _, _) => Some(3),
        _ => None,
    }
}

/// A 64-byte Ethernet/IPv4/UDP frame to `dst` with a valid header checksum.
fn frame(dst: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0, 0, 0x0a, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0, 0, 0x0a, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip.copy_from_slice(&[
        0x45, 0, 0, 50, 0, 1, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 0, 0, 0, 0,
    ]);
    ip[16..20].copy_from_slice(&dst.to_be_bytes());
    let c = csum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&5678u16.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f
}

/// The forwarded packet is the input with the router's rewrites and nothing else.
fn check_forwarded(inp: &[u8], out: &[u8]) -> Result<(), String> {
    if out.len() != inp.len() {
        return Err(format!("length {} -> {}", inp.len(), out.len()));
    }
    if out[6..12] != inp[0..6] {
        return Err("source MAC is not the old destination MAC".into());
    }
    if out[22] != inp[22] - 1 {
        return Err(format!("TTL {} -> {}", inp[22], out[22]));
    }
    if csum(&out[14..34]) != 0 {
        return Err("IPv4 header checksum is wrong".into());
    }
    if out[34..] != inp[34..] {
        return Err("payload changed".into());
    }
    Ok(())
}

/// RFC 1071 checksum (0 over a header whose checksum is right).
fn csum(b: &[u8]) -> u16 {
    tern_dataplane::hash::csum16(b) as u16
}

fn ip(a: u32) -> String {
    std::net::Ipv4Addr::from(a).to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
