//! Behaviour-cache cost in instructions per packet, for valgrind's callgrind (no wall clock):
//! `bcache_cost PROG.json MODE PACKETS [FLOWS]` sets a program up with the differential
//! harness's table contents and traffic (`bcache::diff`, seed fixed), sends every one of
//! FLOWS frames (default 1,024) once to warm up, then PACKETS more round-robin over them, and
//! prints the cache counters. MODE: `off` (no cache), `hit` (`--bcache`: the warm-up
//! inserts), `miss` (`--bcache-admission cm:65000`: every packet misses, nothing is
//! admitted). `BCACHE_EGRESS=1` caches the egress pipeline too. Per-packet cost = (Ir at PACKETS=N2 − Ir at N1) / (N2 − N1), so loading, JIT
//! compilation and the warm-up cancel out; `bench/bcache_callgrind_engine.sh` runs it.

use tern_dataplane::bcache::diff::Diff;
use tern_dataplane::bcache::{Admission, Config};
use tern_runtime::{OutputPacket, PacketPath};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 4 {
        eprintln!("usage: bcache_cost PROG.json off|hit|miss PACKETS [FLOWS]");
        std::process::exit(2);
    }
    let json = match std::fs::read_to_string(&args[1]) {
        Ok(j) => j,
        Err(e) => {
            eprintln!("bcache_cost: {}: {e}", args[1]);
            std::process::exit(1);
        }
    };
    let mode = args[2].as_str();
    let Ok(packets) = args[3].parse::<usize>() else {
        eprintln!("bcache_cost: PACKETS '{}' is not a number", args[3]);
        std::process::exit(2);
    };
    let flows: usize = args.get(4).and_then(|a| a.parse().ok()).unwrap_or(1024);
    let admission = match mode {
        "off" | "hit" => Admission::Always,
        "miss" => Admission::CountMin { threshold: 65_000 },
        _ => {
            eprintln!("bcache_cost: MODE '{mode}': give off, hit or miss");
            std::process::exit(2);
        }
    };
    let cfg = Config {
        capacity: 4 * flows,
        admission,
        egress: std::env::var_os("BCACHE_EGRESS").is_some(),
        ..Config::default()
    };
    let mut d = match Diff::new(&json, cfg, 0xc057) {
        Ok(d) => d,
        Err(e) => {
            eprintln!("bcache_cost: {}: {e}", args[1]);
            std::process::exit(1);
        }
    };
    if let Err(e) = d.setup() {
        eprintln!("bcache_cost: set-up: {e}");
        std::process::exit(1);
    }
    let frames = d.frames(flows);
    if std::env::var_os("BCACHE_COST_COMPARE").is_some() {
        // Debugging aid: both switches, frame by frame.
        for (i, (port, f)) in frames.iter().enumerate() {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            d.on.process_packet(*port, f, &mut a);
            d.off.process_packet(*port, f, &mut b);
            if format!("{a:?}") != format!("{b:?}") {
                println!("frame {i} port {port} {f:02x?}:\n cached   {a:?}\n uncached {b:?}");
            }
        }
        return;
    }
    let sw = if mode == "off" { &mut d.off } else { &mut d.on };
    sw.set_clock_us(Some(1_000));
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut sent = 0usize;
    let dump = std::env::var_os("BCACHE_COST_DUMP").is_some();
    for (i, (port, f)) in frames.iter().enumerate() {
        sw.process_packet(*port, f, &mut out);
        sent += out.len();
        if dump {
            println!(
                "{i}: {:?}",
                out.iter()
                    .map(|o| (o.port, o.data.len()))
                    .collect::<Vec<_>>()
            );
        }
        sw.recycle_outputs(&mut out);
        sw.discard_digests();
    }
    for i in 0..packets {
        let (port, f) = &frames[i % frames.len()];
        sw.process_packet(*port, f, &mut out);
        sent += out.len();
        sw.recycle_outputs(&mut out);
        if i % 64 == 0 {
            sw.discard_digests();
        }
    }
    println!("{mode}: {} packets, {sent} outputs", flows + packets);
    if let Some(s) = sw.bcache_stats() {
        println!("ingress: {s}");
    }
    if let Some(s) = sw.bcache_egress_stats() {
        println!("egress: {s}");
    }
}
