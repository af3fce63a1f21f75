//! In-process throughput on BMv2's stress-test programs and traffic
//! (`tests/stress_tests/testdata`), the setup of BMv2's own `tests/stress_tests`:
//! `cargo run --release -p tern-dataplane --example stress -- <program> [passes]`
//! with program one of `parser_deparser_1`, `exact_match_1`, `LPM_match_1`, `ternary_match_1`.
//! Every table gets its only action as default, so each packet walks the whole pipeline.

use std::time::Instant;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{PacketPath, Runtime};

fn main() {
    let mut args = std::env::args().skip(1);
    let name = args.next().unwrap_or_else(|| "exact_match_1".into());
    let passes: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(20);
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bmv2/tests/stress_tests/testdata"
    );
    let (Ok(json), Ok(traffic)) = (
        std::fs::read_to_string(format!("{dir}/{name}.json")),
        std::fs::read(format!("{dir}/udp_tcp_traffic.bin")),
    ) else {
        println!("skipping: fixtures not found under {dir}");
        return;
    };
    let mut sw = match Switch::from_json(&json, SwitchOptions::default()) {
        Ok(s) => s,
        Err(e) => {
            println!("load failed: {e}");
            return;
        }
    };
    for t in &sw.program().pipelines.clone() {
        for table in &t.tables {
            if let Some(a) = table.actions.first() {
                let action = sw.program().actions[*a as usize].name.clone();
                sw.mt_set_default_action(&table.name, &action, &[]).ok();
            }
        }
    }
    let header_end = traffic
        .iter()
        .position(|b| *b == b'\n')
        .map_or(0, |p| p + 1);
    let frames: Vec<&[u8]> = traffic[header_end..].chunks(512).collect();
    let mut out = Vec::with_capacity(4);
    let t0 = Instant::now();
    let mut n = 0usize;
    for _ in 0..passes {
        for f in &frames {
            out.clear();
            sw.process_packet(0, f, &mut out);
            n += 1;
        }
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{name}: {n} packets, {:.0} pps, {:.2} us/packet",
        n as f64 / dt,
        dt * 1e6 / n as f64
    );
}
