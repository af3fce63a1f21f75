//! Native code ([`tern_dataplane::jit`]) against the interpreter on every BMv2 fixture it
//! compiles: random, seeded and mutated packets must give the same error code, parsed length,
//! header validity and PHV bytes, and the same emitted headers.

mod common;
use common::{fixture_jsons, Rng};
use tern_dataplane::compile::Engine;
use tern_dataplane::jit::compare_with_interpreter;

/// Frames that take parsers past Ethernet: IPv4/UDP, IPv4/TCP, VLAN, IPv6, ARP, MPLS.
fn seeds() -> Vec<Vec<u8>> {
    let eth = |t: u16| {
        let mut f = vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        f.extend_from_slice(&t.to_be_bytes());
        f
    };
    let ipv4 = |proto: u8| {
        vec![
            0x45, 0, 0, 40, 0, 1, 0x40, 0, 64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 1, 1,
        ]
    };
    let mut out = Vec::new();
    for proto in [6u8, 17, 1, 0x11] {
        let mut f = eth(0x0800);
        f.extend(ipv4(proto));
        f.extend([
            0x12, 0x34, 0x56, 0x78, 0, 8, 0, 0, 0, 0, 0, 0, 0x50, 0x02, 0, 0,
        ]);
        f.extend([0u8; 16]);
        out.push(f);
    }
    let mut f = eth(0x8100);
    f.extend([0, 5, 0x08, 0x00]);
    f.extend(ipv4(17));
    f.extend([0u8; 24]);
    out.push(f);
    let mut f = eth(0x86dd);
    f.extend([0x60, 0, 0, 0, 0, 8, 17, 64]);
    f.extend([0xfe; 32]);
    f.extend([0u8; 16]);
    out.push(f);
    let mut f = eth(0x0806);
    f.extend([0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend([0u8; 20]);
    out.push(f);
    let mut f = eth(0x8847);
    f.extend([0, 1, 0x01, 64, 0, 2, 0x11, 64]);
    f.extend(ipv4(17));
    f.extend([0u8; 16]);
    out.push(f);
    out
}

fn packets(rng: &mut Rng) -> Vec<Vec<u8>> {
    let mut out = seeds();
    let base = out.clone();
    for _ in 0..1500 {
        let mut p = base[rng.below(base.len())].clone();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(p.len());
            p[i] = rng.next() as u8;
        }
        if rng.below(4) == 0 {
            p.truncate(rng.below(p.len() + 1));
        }
        out.push(p);
    }
    for _ in 0..500 {
        let n = rng.below(96);
        out.push((0..n).map(|_| rng.next() as u8).collect());
    }
    out
}

#[test]
fn native_parser_matches_the_interpreter_on_every_fixture() {
    let files = fixture_jsons();
    if files.is_empty() {
        println!("skipping: ../shared/fixtures not found");
        return;
    }
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let pkts = packets(&mut rng);
    let (mut parsers, mut emits, mut notes) = (Vec::new(), Vec::new(), Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let Ok(prog) = tern_model::load(&text) else {
            continue;
        };
        let Ok(eng) = Engine::compile(prog) else {
            continue;
        };
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if !eng.jit_notes.is_empty() {
            notes.push(format!("{name}: {:?}", eng.jit_notes));
        }
        let Some(j) = &eng.jit else { continue };
        let n = compare_with_interpreter(&eng, pkts.iter().map(|p| p.as_slice()))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(n, pkts.len());
        if j.has_parser() {
            parsers.push(name.clone());
        }
        if j.has_emit() {
            emits.push(name);
        }
    }
    println!("native parser: {} fixtures: {parsers:?}", parsers.len());
    println!("native emit: {} fixtures: {emits:?}", emits.len());
    println!("left to the interpreter: {notes:#?}");
    // The comparison must not be vacuous: most fixtures are in the native subset.
    assert!(parsers.len() >= 10, "only {} native parsers", parsers.len());
    assert!(emits.len() >= 10, "only {} native emit loops", emits.len());
    for must in [
        "simple_router.json",
        "l2_switch.json",
        "packet_redirect.json",
    ] {
        assert!(
            parsers.iter().any(|n| n == must),
            "{must}: parser not native"
        );
        assert!(emits.iter().any(|n| n == must), "{must}: emit not native");
    }
}
