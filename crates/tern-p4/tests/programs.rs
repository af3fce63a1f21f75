//! Feature programs in `p4/tests/`: compile, run on the tern data plane, check exact bytes.

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{OutputPacket, PacketPath};

fn switch(name: &str) -> Switch {
    let path = format!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/tests/{}"),
        name
    );
    let c = tern_p4::compile_file(std::path::Path::new(&path), &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{name} does not compile:\n{d}"));
    Switch::from_json(&c.json, SwitchOptions::default())
        .unwrap_or_else(|e| panic!("{name}: JSON rejected: {e}"))
}

fn run(sw: &mut Switch, port: u32, data: &[u8]) -> Vec<OutputPacket> {
    let mut out = Vec::new();
    sw.process_packet(port, data, &mut out);
    out
}

/// Send an ops packet; returns (a, b, r8, r16, s) of the output.
fn ops(sw: &mut Switch, op: u8, a: u8, b: u8) -> (u8, u8, u8, u16, i8) {
    let mut p = vec![0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 2, 0x88, 0xb5];
    p.extend_from_slice(&[op, a, b, 0, 0, 0, 0]);
    let out = run(sw, 3, &p);
    assert_eq!(out.len(), 1, "op {op}");
    assert_eq!(out[0].port, 1);
    let o = &out[0].data;
    assert_eq!(o.len(), p.len());
    (
        o[15],
        o[16],
        o[17],
        u16::from_be_bytes([o[18], o[19]]),
        o[20] as i8,
    )
}

#[test]
fn ops_arithmetic_and_statements() {
    let mut sw = switch("ops.p4");
    // b is overwritten with count(1) + a at the end of ingress.
    let tail = |a: u8| 1u8.wrapping_add(a);
    let r = ops(&mut sw, 1, 200, 100);
    assert_eq!((r.2, r.1), (44, tail(200)), "add wraps");
    assert_eq!(ops(&mut sw, 2, 5, 7).2, 254, "sub wraps");
    assert_eq!(ops(&mut sw, 3, 200, 100).2, 255, "saturating add");
    assert_eq!(ops(&mut sw, 4, 5, 7).2, 0, "saturating sub");
    let r = ops(&mut sw, 5, 0xab, 0xcd);
    assert_eq!((r.2, r.3), (0x0a, 0x0cd0), "slice read and slice write");
    assert_eq!(ops(&mut sw, 6, 0x12, 0x34).3, 0x1234, "concatenation");
    let r = ops(&mut sw, 7, 0x81, 0);
    assert_eq!((r.2, r.3), (0x08, 0x0810), "shifts");
    let r = ops(&mut sw, 8, 0xf0, 0x05);
    assert_eq!(r.4, -16 + 5, "signed add");
    assert_eq!(r.2, (-8i8) as u8, "arithmetic shift of int<8>");
    let r = ops(&mut sw, 8, 100, 100);
    assert_eq!(r.4, (200u8) as i8, "signed wrap");
    assert_eq!(ops(&mut sw, 9, 3, 9).2, 9, "function max");
    assert_eq!(ops(&mut sw, 9, 30, 9).2, 30);
    let r = ops(&mut sw, 10, 7, 0);
    assert_eq!(
        (r.2, r.3),
        (1, 0xffff),
        "if/else chain inside an action, bool metadata"
    );
    let r = ops(&mut sw, 10, 64, 0);
    assert_eq!((r.2, r.3), (2, 0));
    assert_eq!(ops(&mut sw, 10, 200, 0).2, 3);
    assert_eq!(ops(&mut sw, 11, 9, 3).2, 6, "ternary true");
    assert_eq!(ops(&mut sw, 11, 3, 9).2, 0, "ternary false");
    let r = ops(&mut sw, 12, 3, 9);
    assert_eq!((r.2, r.1), (0xee, 9), "exit skips the rest of ingress");
    let r = ops(&mut sw, 13, 20, 30);
    assert_eq!((r.2, r.3), (600u32 as u8, 600), "multiplication");
    let r = ops(&mut sw, 14, 1, 0);
    assert_eq!((r.2, r.3), (255, 0x00fe), "negation and complement");
    assert_eq!(ops(&mut sw, 99, 1, 0).2, 0xdd, "switch default");
    // Not an ops packet: exit at once, forwarded unchanged.
    let p = vec![0u8; 14];
    let out = run(&mut sw, 3, &p);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data, p);
}
