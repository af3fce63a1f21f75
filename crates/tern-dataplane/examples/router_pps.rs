//! In-process throughput of simple_router (BMv2's benchmark program) with the entries of
//! `commands.txt`: `cargo run --release -p tern-dataplane --example router_pps [packets] [batch]`
//! (with `batch`: through `Switch::process_batch`, 32 packets a call, output buffers recycled).

use std::time::Instant;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, PacketPath, Runtime};

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200_000);
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bmv2/targets/simple_router/simple_router.json"
    );
    let Ok(json) = std::fs::read_to_string(path) else {
        println!("skipping: {path} not found");
        return;
    };
    let mut sw = match Switch::from_json(&json, SwitchOptions::default()) {
        Ok(s) => s,
        Err(e) => {
            println!("load failed: {e}");
            return;
        }
    };
    let ex = |b: &[u8]| MatchParam::Exact(b.to_vec());
    let setup = || -> Result<(), tern_runtime::RuntimeError> { Ok(()) };
    setup().ok();
    for t in ["send_frame", "forward", "ipv4_lpm"] {
        sw.mt_set_default_action(t, "_drop", &[]).ok();
    }
    sw.mt_add_entry(
        "send_frame",
        &[ex(&[0, 2])],
        "rewrite_mac",
        &[vec![0, 0xaa, 0xbb, 0, 0, 1]],
        None,
    )
    .ok();
    sw.mt_add_entry(
        "forward",
        &[ex(&[10, 0, 1, 10])],
        "set_dmac",
        &[vec![0, 4, 0, 0, 0, 1]],
        None,
    )
    .ok();
    let lpm = MatchParam::Lpm {
        key: vec![10, 0, 1, 10],
        prefix_len: 32,
    };
    sw.mt_add_entry(
        "ipv4_lpm",
        &[lpm],
        "set_nhop",
        &[vec![10, 0, 1, 10], vec![0, 2]],
        None,
    )
    .ok();
    let mut frame = vec![0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0];
    frame.extend_from_slice(&[
        0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 10,
    ]);
    frame.resize(64, 0);
    let mut out = Vec::with_capacity(64);
    if std::env::args().nth(2).as_deref() == Some("batch") {
        // `process_batch` (32 packets per call) with output buffers recycled.
        let batch: Vec<(u32, &[u8])> = (0..32).map(|_| (1u32, frame.as_slice())).collect();
        let t0 = Instant::now();
        let mut sent = 0;
        for _ in 0..n / batch.len() {
            sw.process_batch(&batch, &mut out);
            sent += out.len();
            sw.recycle_outputs(&mut out);
        }
        let dt = t0.elapsed().as_secs_f64();
        let m = n / batch.len() * batch.len();
        println!(
            "batched: {m} packets, {sent} out, {:.0} pps, {:.2} us/packet",
            m as f64 / dt,
            dt * 1e6 / m as f64
        );
        return;
    }
    let t0 = Instant::now();
    let mut sent = 0;
    for _ in 0..n {
        out.clear();
        sw.process_packet(1, &frame, &mut out);
        sent += out.len();
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{n} packets, {sent} out, {:.0} pps, {:.2} us/packet",
        n as f64 / dt,
        dt * 1e6 / n as f64
    );
}
