//! The per-switch bound on parser states (`SwitchOptions::max_parser_states`,
//! `Switch::set_max_parser_states`; issue 17 item 5): a packet whose parser would enter one
//! state more stops there with `error.ParserTimeout`, is not dropped (ingress sees
//! `parser_error`, as after any parser error in simple_switch) and the unparsed bytes stay
//! payload. The generated lane, the Rust lane with the native parser and the interpreter stop
//! at the same state, give the same frames and count the same states, timeouts and units.

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{OutputPacket, PacketPath};

/// A parser that takes up to 6 802.1Q tags (one state per tag after `start`, each tag its own
/// header), or, with `spin`, goes round one state for ever after Ethernet. Ingress writes
/// 0xdead into the Ethernet source's low bytes on `ParserTimeout` and sends everything to
/// port 1.
fn program(spin: bool) -> String {
    let mut states = String::new();
    let mut tags = String::new();
    let mut emits = String::new();
    if spin {
        states.push_str(
            "state start { p.extract(h.eth); transition spin; } state spin { transition spin; }",
        );
    } else {
        states.push_str(
            "state start { p.extract(h.eth); transition select(h.eth.t) { 0x8100: s1; default: accept; } }",
        );
        for i in 1..=6 {
            let next = if i < 6 {
                format!("s{}", i + 1)
            } else {
                "accept".into()
            };
            states.push_str(&format!(
                " state s{i} {{ p.extract(h.tag{i}); transition select(h.tag{i}.t) {{ 0x8100: {next}; default: accept; }} }}"
            ));
        }
    }
    for i in 1..=6 {
        tags.push_str(&format!(" tag_t tag{i};"));
        emits.push_str(&format!(" p.emit(h.tag{i});"));
    }
    let src = format!(
        r#"
#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> t; }}
header tag_t {{ bit<16> tci; bit<16> t; }}
struct headers {{ eth_t eth; {tags} }}
struct metadata {{ }}
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {{
    {states}
}}
control V(inout headers h, inout metadata m) {{ apply {{ }} }}
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {{
    apply {{
        sm.egress_spec = 1;
        if (sm.parser_error == error.ParserTimeout) {{ h.eth.src = 0xdead; }}
    }}
}}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {{ apply {{ }} }}
control C(inout headers h, inout metadata m) {{ apply {{ }} }}
control D(packet_out p, in headers h) {{ apply {{ p.emit(h.eth);{emits} }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    );
    tern_p4::compile_str(&src, "budget.p4", &tern_p4::Options::default())
        .unwrap_or_else(|d| panic!("{d}"))
        .json
}

/// Ethernet with `tags` 802.1Q tags (the last one says IPv4), then 8 payload bytes.
fn frame(tags: usize) -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2];
    for i in 0..tags {
        f.extend_from_slice(&[0x81, 0x00, 0, i as u8]);
    }
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&[0x5a; 8]);
    f
}

/// The ways a switch can run the parser.
#[derive(Clone, Copy, Debug)]
enum Path {
    /// Defaults: the generated lane where the program allows it.
    Native,
    /// The Rust lane and the general path (the native parser called from Rust).
    Slow,
    /// Every stage interpreted.
    Interpreter,
}

fn switch(json: &str, path: Path, max_states: Option<u64>) -> Switch {
    let mut opts = SwitchOptions::default();
    if let Some(n) = max_states {
        opts.max_parser_states = n;
    }
    let mut sw = Switch::from_json(json, opts).unwrap();
    match path {
        Path::Native => {
            let s = sw.native_summary();
            assert!(s.parser, "the parser is native: {:?}", s.notes);
            assert!(sw.lane_generated(), "{:?}", sw.lane_why_not());
        }
        Path::Slow => sw.use_slow_path(),
        Path::Interpreter => sw.use_interpreter(),
    }
    sw
}

fn run(sw: &mut Switch, frames: &[Vec<u8>]) -> Vec<OutputPacket> {
    let mut all = Vec::new();
    for f in frames {
        let mut out = Vec::new();
        sw.process_packet(0, f, &mut out);
        assert_eq!(
            out.len(),
            1,
            "every frame goes out (a parser error does not drop)"
        );
        all.append(&mut out);
    }
    all
}

#[test]
fn the_bound_stops_the_parser_at_the_same_state_on_every_path() {
    let json = program(false);
    let frames: Vec<Vec<u8>> = (0..=5).map(frame).collect();
    // Three states: `start` and two tags; a third tag would be a fourth state.
    let mut seen = Vec::new();
    for path in [Path::Native, Path::Slow, Path::Interpreter] {
        let mut sw = switch(&json, path, Some(3));
        let out = run(&mut sw, &frames);
        for (tags, o) in out.iter().enumerate() {
            let timed_out = tags >= 3;
            assert_eq!(o.port, 1);
            let src_low = &o.data[10..12];
            assert_eq!(src_low == [0xde, 0xad], timed_out, "{path:?}, {tags} tags");
            // Every byte goes out: the two tags parsed are emitted, the rest is payload.
            assert_eq!(o.data.len(), frames[tags].len(), "{path:?}, {tags} tags");
            assert_eq!(o.data[12..], frames[tags][12..], "{path:?}, {tags} tags");
        }
        let c = sw.parser_counts();
        // 1, 2, 3 states for 0, 1, 2 tags; 3 for each of the three timed out.
        assert_eq!(
            (c.states, c.timeouts, c.units),
            (1 + 2 + 3 + 3 * 3, 3, 0),
            "{path:?}"
        );
        seen.push(out);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0], seen[2]);
    // The default bound (100,000) lets all of them parse: no timeout, 1 + tags states each.
    for path in [Path::Native, Path::Slow, Path::Interpreter] {
        let mut sw = switch(&json, path, None);
        let out = run(&mut sw, &frames);
        assert!(out.iter().all(|o| o.data[10..12] == [0, 2]), "{path:?}");
        let c = sw.parser_counts();
        assert_eq!((c.states, c.timeouts), ((1..=6).sum(), 0), "{path:?}");
    }
}

#[test]
fn a_parser_loop_ends_at_the_bound_with_parser_timeout_and_pays_for_it() {
    let json = program(true);
    let frames: Vec<Vec<u8>> = (0..10).map(|_| frame(0)).collect();
    let mut seen = Vec::new();
    for path in [Path::Native, Path::Slow, Path::Interpreter] {
        let mut sw = switch(&json, path, Some(1000));
        let out = run(&mut sw, &frames);
        assert!(
            out.iter().all(|o| o.data[10..12] == [0xde, 0xad]),
            "{path:?}"
        );
        let c = sw.parser_counts();
        // 1,000 states a packet: 15 units each (1,000 / 64).
        assert_eq!(
            (c.states, c.timeouts, c.units),
            (10_000, 10, 150),
            "{path:?}"
        );
        // The bound changed at run time holds from the next packet on.
        sw.set_max_parser_states(10);
        run(&mut sw, &frames[..1]);
        assert_eq!(sw.parser_counts().states, 10_010, "{path:?}");
        seen.push(out);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(seen[0], seen[2]);
    // A plain switch keeps its bound of 100,000 states (simple_switch has none and would
    // never finish this packet).
    let mut sw = switch(&json, Path::Native, None);
    run(&mut sw, &frames[..1]);
    let c = sw.parser_counts();
    assert_eq!((c.max_states, c.states, c.timeouts), (100_000, 100_000, 1));
}

/// A burst through the generated lane (`Switch::process_burst`: the lane function runs
/// packet after packet with its context set once) gives every packet the whole bound and
/// counts exactly what packet-by-packet calls count: the states the lane function sums in its
/// context reach the switch's counts once per burst, and nothing of one packet's budget is
/// left to the next.
#[test]
fn a_burst_gives_every_packet_the_whole_bound_and_counts_as_one_by_one() {
    let json = program(false);
    // 0..=5 tags, 40 times over: 240 packets in one burst, a bound of 3 states.
    let frames: Vec<Vec<u8>> = (0..240).map(|i| frame(i % 6)).collect();
    let mut one = switch(&json, Path::Native, Some(3));
    let want = run(&mut one, &frames);
    let mut sw = switch(&json, Path::Native, Some(3));
    let pkts: Vec<(u32, &[u8])> = frames.iter().map(|f| (0, f.as_slice())).collect();
    let mut out = tern_dataplane::BurstOut::new();
    let dropped = sw.process_burst(&pkts, &mut out);
    assert_eq!(dropped, 0);
    let got: Vec<(u32, u32, Vec<u8>)> = out.iter().map(|(p, i, d)| (p, i, d.to_vec())).collect();
    assert_eq!(got.len(), want.len());
    for (k, ((port, i, data), w)) in got.iter().zip(&want).enumerate() {
        assert_eq!((*port, *i as usize), (w.port, k));
        assert_eq!(data, &w.data, "packet {k}");
    }
    let (a, b) = (sw.parser_counts(), one.parser_counts());
    assert_eq!(
        (a.states, a.timeouts, a.units),
        (b.states, b.timeouts, b.units)
    );
    // 1 + 2 + 3 + 3 × 3 states every six packets, three of them timed out.
    assert_eq!((a.states, a.timeouts), (40 * 15, 40 * 3));
    // Long parses: 1,000 states each in a loop (15 units each), in one burst.
    let json = program(true);
    let mut sw = switch(&json, Path::Native, Some(1000));
    let frames: Vec<Vec<u8>> = (0..50).map(|_| frame(0)).collect();
    let pkts: Vec<(u32, &[u8])> = frames.iter().map(|f| (0, f.as_slice())).collect();
    out.clear();
    sw.process_burst(&pkts, &mut out);
    assert_eq!(out.len(), 50);
    let c = sw.parser_counts();
    assert_eq!((c.states, c.timeouts, c.units), (50_000, 50, 750));
}
