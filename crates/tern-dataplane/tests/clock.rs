//! The packet paths read the clock only for programs that can observe it
//! (`Switch::reads_clock`: a timestamp of the standard metadata, a meter, a table with
//! ageing): a program that copies a timestamp into the frame still gets the real time, packet
//! by packet and batch by batch, and one that cannot see the clock is marked so (its packets
//! then cost no `clock_gettime`).

use std::time::Duration;

use tern_dataplane::{BurstOut, Switch, SwitchOptions};
use tern_runtime::PacketPath;

/// A v1model program forwarding everything to port 2, with `ingress` / `egress` / `decls`
/// spliced into its ingress and egress controls.
fn program(decls: &str, ingress: &str, egress: &str) -> String {
    let src = format!(
        r#"
#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct headers {{ eth_t eth; }}
struct metadata {{ bit<32> color; }}
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {{
    state start {{ p.extract(h.eth); transition accept; }}
}}
control V(inout headers h, inout metadata m) {{ apply {{ }} }}
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {{
    {decls}
    apply {{ sm.egress_spec = 2; {ingress} }}
}}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {{
    apply {{ {egress} }}
}}
control C(inout headers h, inout metadata m) {{ apply {{ }} }}
control D(packet_out p, in headers h) {{ apply {{ p.emit(h.eth); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    );
    tern_p4::compile_str(&src, "clock.p4", &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{d}"))
        .json
}

fn switch(json: &str) -> Switch {
    Switch::from_json(json, SwitchOptions::default()).expect("load")
}

fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

/// The 48-bit field at `off` of the only output.
fn field48(out: &[tern_runtime::OutputPacket], off: usize) -> u64 {
    assert_eq!(out.len(), 1, "one output");
    assert_eq!(out[0].port, 2);
    out[0].data[off..off + 6]
        .iter()
        .fold(0, |a, &b| (a << 8) | u64::from(b))
}

#[test]
fn which_programs_read_the_clock() {
    let cases = [
        ("plain forwarding", "", "", "", false),
        (
            "ingress timestamp",
            "",
            "h.eth.src = (bit<48>) sm.ingress_global_timestamp;",
            "",
            true,
        ),
        (
            "egress timestamp",
            "",
            "",
            "h.eth.dst = (bit<48>) sm.egress_global_timestamp;",
            true,
        ),
        (
            "queueing metadata",
            "",
            "",
            "h.eth.dst = (bit<48>) sm.deq_timedelta;",
            true,
        ),
        (
            "indirect meter",
            "meter(32w4, MeterType.packets) mt;",
            "mt.execute_meter((bit<32>) 0, m.color);",
            "",
            true,
        ),
        (
            "table with ageing",
            "action a() { } table t { key = { h.eth.dst: exact; } actions = { a; } \
             support_timeout = true; }",
            "t.apply();",
            "",
            true,
        ),
        (
            "a table without ageing, a register and a counter",
            "action a() { } table t { key = { h.eth.dst: exact; } actions = { a; } } \
             register<bit<32>>(4) r; counter(4, CounterType.packets) c;",
            "t.apply(); r.write(0, 1); c.count(0);",
            "",
            false,
        ),
    ];
    for (name, decls, ingress, egress, reads) in cases {
        let sw = switch(&program(decls, ingress, egress));
        assert_eq!(sw.reads_clock(), reads, "{name}");
    }
}

/// A program that copies the ingress timestamp into the frame gets the clock's time on every
/// path: one packet per call, in a batch and in a burst, later packets later stamps.
#[test]
fn timestamps_still_follow_the_clock() {
    let json = program("", "h.eth.src = (bit<48>) sm.ingress_global_timestamp;", "");
    let mut sw = switch(&json);
    assert!(sw.reads_clock());
    let f = frame();
    let mut out = Vec::new();
    std::thread::sleep(Duration::from_millis(3));
    sw.process_packet(1, &f, &mut out);
    let t1 = field48(&out, 6);
    assert!(t1 >= 3_000, "stamped {t1} µs after 3 ms");
    sw.recycle_outputs(&mut out);
    std::thread::sleep(Duration::from_millis(3));
    sw.process_batch(&[(1, &f)], &mut out);
    let t2 = field48(&out, 6);
    assert!(t2 >= t1 + 3_000, "batch stamped {t2} µs, 3 ms after {t1}");
    sw.recycle_outputs(&mut out);
    std::thread::sleep(Duration::from_millis(3));
    let mut b = BurstOut::new();
    sw.process_burst(&[(1, &f)], &mut b);
    let (port, _, data) = b.iter().next().expect("one output");
    assert_eq!(port, 2);
    let t3 = data[6..12]
        .iter()
        .fold(0u64, |a, &x| (a << 8) | u64::from(x));
    assert!(t3 >= t2 + 3_000, "burst stamped {t3} µs, 3 ms after {t2}");
    // And a fixed clock is followed as before.
    sw.set_clock_us(Some(1234));
    sw.process_packet(1, &f, &mut out);
    assert_eq!(field48(&out, 6), 1234);
}
