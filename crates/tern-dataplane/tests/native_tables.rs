//! Tables looked up in generated code (`jit/pipeline.rs`: exact index probed inline, one
//! ternary tuple probed without the tuple loop, the hit's record dispatched by one compare of
//! its head, key validity tests left out where a condition proved the header valid) against
//! the interpreter, packet by packet, while the control plane adds, modifies and deletes
//! entries between packets: every change must be seen by the very next packet. Starts from
//! empty tables (the empty index view) and grows past several index resizes.

use tern_dataplane::jit::TablePath;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};

/// `route` (unguarded: its key tests ipv4's validity), then under `isValid()` `strip` (may
/// set ipv4 invalid: the validity proof ends there) and `by_src` (after `strip`: must test),
/// then under a second `isValid()` `mark` (proved valid: no test) and `acl` (one ternary
/// tuple).
const PROGRAM: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct metadata { bit<32> acc; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    state start {
        p.extract(h.ethernet);
        transition select(h.ethernet.etherType) { 0x0800: ip; default: accept; }
    }
    state ip { p.extract(h.ipv4); transition accept; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    action nop() { }
    action fwd(bit<9> port, bit<48> mac) { s.egress_spec = port; h.ethernet.dst = mac; }
    action inval() { h.ipv4.setInvalid(); }
    action to(bit<9> port) { s.egress_spec = port; }
    action tag(bit<8> d, bit<32> v) { h.ipv4.diffserv = d; m.acc = m.acc + v; }
    action deny() { mark_to_drop(s); }
    action note(bit<48> x) { h.ethernet.src = x; }
    table route {
        key = { h.ipv4.dstAddr: exact; }
        actions = { fwd; nop; }
        default_action = nop();
    }
    table strip {
        key = { h.ethernet.src: exact; }
        actions = { inval; nop; }
        default_action = nop();
    }
    table by_src {
        key = { h.ipv4.srcAddr: exact; }
        actions = { to; nop; }
        default_action = nop();
    }
    table mark {
        key = { h.ipv4.srcAddr: exact; h.ipv4.protocol: exact; }
        actions = { tag; nop; }
        default_action = nop();
    }
    table acl {
        key = { h.ipv4.dstAddr: ternary; h.ipv4.ttl: ternary; }
        actions = { note; deny; nop; }
        default_action = nop();
    }
    apply {
        route.apply();
        if (h.ipv4.isValid()) {
            strip.apply();
            by_src.apply();
        }
        if (h.ipv4.isValid() && h.ipv4.ttl > 1) {
            mark.apply();
            acl.apply();
            h.ipv4.identification = (bit<16>)m.acc;
        }
    }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.ethernet); p.emit(h.ipv4); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

fn switches() -> (Switch, Switch) {
    switches_of(PROGRAM)
}

fn switches_of(program: &str) -> (Switch, Switch) {
    switches_from_json(&json_of(program))
}

fn json_of(program: &str) -> String {
    match tern_p4::compile_str(program, "native_tables.p4", &Default::default()) {
        Ok(c) => c.json,
        Err(d) => panic!("the test program does not compile: {d:?}"),
    }
}

fn switches_from_json(json: &str) -> (Switch, Switch) {
    let mk = || Switch::from_json(json, SwitchOptions::default()).expect("load");
    let (native, mut interp) = (mk(), mk());
    interp.use_interpreter();
    (native, interp)
}

/// Ethernet (+ IPv4 unless `ip` is false) with source MAC `smac`, addresses `src`/`dst`,
/// protocol `proto` and TTL `ttl`.
fn frame(ip: bool, smac: u8, src: u32, dst: u32, proto: u8, ttl: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0, 0, 0, 0, 0xaa, 1]);
    f[6..12].copy_from_slice(&[0, 0, 0, 0, 0xbb, smac]);
    f[12..14].copy_from_slice(if ip { &[0x08, 0x00] } else { &[0x86, 0xdd] });
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[22] = ttl;
    f[23] = proto;
    f[26..30].copy_from_slice(&src.to_be_bytes());
    f[30..34].copy_from_slice(&dst.to_be_bytes());
    f
}

struct Pair {
    native: Switch,
    interp: Switch,
    out: Vec<OutputPacket>,
    sent: u32,
}

impl Pair {
    /// Both switches add the same entry; they must give it the same handle (later operations
    /// name it by that one handle).
    fn add_both(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> tern_runtime::EntryHandle {
        let h = self
            .native
            .mt_add_entry(table, key, action, data, priority)
            .expect("native add");
        let h2 = self
            .interp
            .mt_add_entry(table, key, action, data, priority)
            .expect("interpreter add");
        assert_eq!(
            h, h2,
            "{table}: the two switches gave the entry different handles"
        );
        h
    }

    /// Both switches do the same control-plane operation.
    fn both(&mut self, f: impl Fn(&mut Switch)) {
        f(&mut self.native);
        f(&mut self.interp);
    }

    /// Send `f` to both; the outputs (ports and bytes) must be the same.
    fn send(&mut self, f: &[u8], what: &str) -> Vec<(u32, Vec<u8>)> {
        self.sent += 1;
        let mut pick = |sw: &mut Switch| {
            self.out.clear();
            sw.process_packet(1, f, &mut self.out);
            self.out
                .drain(..)
                .map(|o| (o.port, o.data))
                .collect::<Vec<_>>()
        };
        let a = pick(&mut self.native);
        let b = pick(&mut self.interp);
        assert_eq!(a, b, "packet {} ({what}): native vs interpreter", self.sent);
        a
    }

    /// A mix of packets over the keys `0..n` (hits and misses of every table).
    fn sweep(&mut self, n: u32, what: &str) {
        for k in 0..n {
            for (ip, smac, ttl) in [(true, 1, 64), (true, 7, 64), (true, 1, 1), (false, 1, 64)] {
                let f = frame(ip, smac, 0x0a00_0000 + k, 0xc0a8_0000 + k, 17, ttl);
                self.send(&f, what);
            }
        }
    }
}

fn ex(v: u64, n: usize) -> MatchParam {
    MatchParam::Exact(v.to_be_bytes()[8 - n..].to_vec())
}

fn bytes(v: u64, n: usize) -> Vec<u8> {
    v.to_be_bytes()[8 - n..].to_vec()
}

#[test]
fn entries_changed_between_packets_are_seen_by_the_next_packet() {
    let (native, interp) = switches();
    let ns = native.native_summary();
    // Every table on a native lookup path: the exact ones inline, the ACL by its tuples.
    for (name, path) in &ns.tables {
        let want = if name.ends_with("acl") {
            TablePath::Tuples
        } else if name.starts_with("tbl_") {
            // The statement after `acl` (a keyless table of the compiler's).
            TablePath::ConstDefault
        } else {
            TablePath::Inline
        };
        assert_eq!(*path, want, "{name}: {ns}");
    }
    let mut p = Pair {
        native,
        interp,
        out: Vec::new(),
        sent: 0,
    };
    // Empty tables: every lookup probes the empty index view.
    p.sweep(4, "empty tables");
    // `route`, one entry at a time, each checked by the next packet (hit with the new
    // parameters, the previous keys still hitting, a neighbour missing).
    let mut handles = Vec::new();
    for k in 0..40u64 {
        let key = vec![ex(0xc0a8_0000 + k, 4)];
        let data = [bytes(k % 4 + 1, 2), bytes(0x0200_0000_0000 + k, 6)];
        handles.push(p.add_both("I.route", &key, "I.fwd", &data, None));
        let f = frame(true, 1, 1, 0xc0a8_0000 + k as u32, 17, 64);
        let out = p.send(&f, "route added");
        assert_eq!(out.len(), 1, "one output");
        assert_eq!(out[0].0 as u64, k % 4 + 1, "the new entry's port");
        assert_eq!(out[0].1[..6], bytes(0x0200_0000_0000 + k, 6)[..]);
        p.send(
            &frame(true, 1, 1, 0xc0a8_0000 + k as u32 + 1, 17, 64),
            "miss",
        );
    }
    // A key 0 entry: a frame without IPv4 has key 0 in `route` (its header is not valid).
    p.both(|sw| {
        sw.mt_add_entry(
            "I.route",
            &[ex(0, 4)],
            "I.fwd",
            &[bytes(3, 2), bytes(0x0200_0000_00ff, 6)],
            None,
        )
        .expect("add key 0");
    });
    let out = p.send(&frame(false, 1, 5, 6, 17, 64), "not IPv4: key 0");
    assert_eq!(out[0].0, 3, "the key 0 entry");
    // Modified parameters and then another action, seen at once.
    for (i, h) in handles.iter().enumerate() {
        let k = i as u64;
        p.both(|sw| {
            sw.mt_modify_entry(
                "I.route",
                *h,
                "I.fwd",
                &[bytes(7, 2), bytes(0x0200_0000_1000 + k, 6)],
            )
            .expect("modify");
        });
        let out = p.send(
            &frame(true, 1, 1, 0xc0a8_0000 + k as u32, 17, 64),
            "modified",
        );
        assert_eq!(out[0].0, 7, "the modified port");
        if i % 5 == 0 {
            p.both(|sw| {
                sw.mt_modify_entry("I.route", *h, "I.nop", &[])
                    .expect("to nop")
            });
            let out = p.send(&frame(true, 1, 1, 0xc0a8_0000 + k as u32, 17, 64), "nop");
            assert_eq!(out[0].0, 0, "nop leaves the port");
        }
    }
    // Deleted, one at a time: the next packet misses.
    for (i, h) in handles.iter().enumerate().filter(|(i, _)| i % 3 == 0) {
        p.both(|sw| sw.mt_delete_entry("I.route", *h).expect("delete"));
        let out = p.send(
            &frame(true, 1, 1, 0xc0a8_0000 + i as u32, 17, 64),
            "deleted",
        );
        assert_eq!(out[0].0, 0, "a deleted entry misses");
    }
    p.sweep(48, "after route churn");
    // `strip` sets ipv4 invalid for source MAC ..:07; `by_src` then keys on a field of an
    // invalid header: 0, which has its own entry (port 9).
    p.both(|sw| {
        sw.mt_add_entry("I.strip", &[ex(0xbb07, 6)], "I.inval", &[], None)
            .expect("strip");
        sw.mt_add_entry("I.by_src", &[ex(0, 4)], "I.to", &[bytes(9, 2)], None)
            .expect("by_src 0");
    });
    for k in 0..300u64 {
        p.both(|sw| {
            sw.mt_add_entry(
                "I.by_src",
                &[ex(0x0a00_0000 + k, 4)],
                "I.to",
                &[bytes(k % 6 + 1, 2)],
                None,
            )
            .expect("by_src");
            sw.mt_add_entry(
                "I.mark",
                &[ex(0x0a00_0000 + k, 4), ex(17, 1)],
                "I.tag",
                &[bytes(k, 1), bytes(k * 1000, 4)],
                None,
            )
            .expect("mark");
        });
    }
    let out = p.send(&frame(true, 7, 0x0a00_0005, 0, 17, 64), "stripped");
    assert_eq!(out[0].0, 9, "by_src saw the invalid header's key as 0");
    p.sweep(64, "by_src and mark");
    // ACL: one tuple (full masks), then a second mask (two tuples: the loop), then back.
    for k in 0..32u64 {
        p.both(|sw| {
            sw.mt_add_entry(
                "I.acl",
                &[
                    MatchParam::Ternary {
                        key: bytes(0xc0a8_0000 + k, 4),
                        mask: vec![0xff; 4],
                    },
                    MatchParam::Ternary {
                        key: vec![64],
                        mask: vec![0xff],
                    },
                ],
                "I.note",
                &[bytes(0x0200_0000_3000 + k, 6)],
                Some(10 + k as i32),
            )
            .expect("acl");
        });
    }
    p.sweep(40, "acl, one tuple");
    let wide = p.add_both(
        "I.acl",
        &[
            MatchParam::Ternary {
                key: bytes(0xc0a8_0000, 4),
                mask: bytes(0xffff_fff0, 4),
            },
            MatchParam::Ternary {
                key: vec![0],
                mask: vec![0],
            },
        ],
        "I.deny",
        &[],
        Some(1),
    );
    p.sweep(40, "acl, two tuples");
    p.both(|sw| sw.mt_delete_entry("I.acl", wide).expect("delete wide"));
    p.sweep(40, "acl, one tuple again");
    // Everything cleared: the empty views again.
    for t in ["I.route", "I.strip", "I.by_src", "I.mark", "I.acl"] {
        p.both(|sw| {
            for e in sw.mt_get_entries(t).expect("entries") {
                sw.mt_delete_entry(t, e.handle).expect("delete");
            }
        });
    }
    p.sweep(8, "all deleted");
    assert!(
        p.native.lane_counts().0 > 0,
        "the native switch took its lane"
    );
}

/// Tables keyed on fields that an earlier table's or statement's action writes: the
/// generated code keeps a key field's value for the later tables keyed on it only while no
/// action on the way may write it (`fresh_keys`), so each of these lookups must see the new
/// value.
const REKEYED: &str = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct metadata { bit<32> k; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    state start {
        p.extract(h.ethernet);
        transition select(h.ethernet.etherType) { 0x0800: ip; default: accept; }
    }
    state ip { p.extract(h.ipv4); transition accept; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    action nop() { }
    action rewrite(bit<32> a) { h.ipv4.dstAddr = a; }
    action to(bit<9> port) { s.egress_spec = port; }
    action setk(bit<32> v) { m.k = v; s.egress_spec = 1; }
    table first {
        key = { h.ipv4.dstAddr: exact; }
        actions = { rewrite; nop; }
        default_action = nop();
    }
    table second {
        key = { h.ipv4.dstAddr: exact; }
        actions = { to; setk; nop; }
        default_action = nop();
    }
    table third {
        key = { m.k: exact; h.ipv4.dstAddr: exact; }
        actions = { to; nop; }
        default_action = nop();
    }
    table fourth {
        key = { h.ipv4.srcAddr: exact; }
        actions = { to; nop; }
        default_action = nop();
    }
    table fifth {
        key = { h.ipv4.srcAddr: exact; }
        actions = { to; nop; }
        default_action = nop();
    }
    apply {
        if (h.ipv4.isValid()) {
            fourth.apply();
            first.apply();
            second.apply();
            third.apply();
            h.ipv4.srcAddr = h.ipv4.srcAddr + 1;
            fifth.apply();
        }
    }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.ethernet); p.emit(h.ipv4); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;

#[test]
fn a_key_written_by_an_earlier_action_is_read_again() {
    rekeyed(switches_of(REKEYED));
}

/// The same with the compiler's keyless table for `srcAddr + 1` turned into an
/// `action_calls` node (the form newer p4c writes): a call's writes end a kept key too.
#[test]
fn a_key_written_by_an_action_call_is_read_again() {
    let mut v: serde_json::Value = serde_json::from_str(&json_of(REKEYED)).expect("json");
    let ing = v["pipelines"]
        .as_array_mut()
        .expect("pipelines")
        .iter_mut()
        .find(|p| p["name"] == "ingress")
        .expect("ingress");
    let tables = ing["tables"].as_array_mut().expect("tables");
    let keyless: Vec<usize> = (0..tables.len())
        .filter(|&i| {
            tables[i]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("tbl_"))
        })
        .collect();
    assert_eq!(keyless.len(), 1, "one statement table");
    let t = tables.remove(keyless[0]);
    // Same node name: the nodes that led to the table now lead to the call.
    ing["action_calls"] = serde_json::json!([{
        "name": t["name"],
        "id": 0,
        "action_id": t["action_ids"][0],
        "next_node": t["base_default_next"],
    }]);
    rekeyed(switches_from_json(&v.to_string()));
}

fn rekeyed((native, interp): (Switch, Switch)) {
    let ns = native.native_summary();
    for (name, path) in &ns.tables {
        if !name.starts_with("tbl_") {
            assert_eq!(*path, TablePath::Inline, "{name}: {ns}");
        }
    }
    let mut p = Pair {
        native,
        interp,
        out: Vec::new(),
        sent: 0,
    };
    let (a, b) = (0xc0a8_0001u64, 0xc0a8_0002u64);
    // `first` rewrites a to b; `second` must look b up (port 5), not a (port 6).
    p.add_both("I.first", &[ex(a, 4)], "I.rewrite", &[bytes(b, 4)], None);
    p.add_both("I.second", &[ex(b, 4)], "I.to", &[bytes(5, 2)], None);
    p.add_both("I.second", &[ex(a, 4)], "I.to", &[bytes(6, 2)], None);
    let out = p.send(&frame(true, 1, 0x0a00_0001, a as u32, 17, 64), "rewritten");
    assert_eq!(out[0].0, 5, "second looked up the rewritten address");
    // `second` sets `m.k`; `third` keys on it (and on the address).
    p.both(|sw| {
        sw.mt_modify_entry("I.second", 0, "I.setk", &[bytes(77, 4)])
            .expect("to setk")
    });
    p.add_both(
        "I.third",
        &[ex(77, 4), ex(b, 4)],
        "I.to",
        &[bytes(7, 2)],
        None,
    );
    p.add_both(
        "I.third",
        &[ex(0, 4), ex(b, 4)],
        "I.to",
        &[bytes(8, 2)],
        None,
    );
    let out = p.send(&frame(true, 1, 0x0a00_0001, a as u32, 17, 64), "m.k set");
    assert_eq!(out[0].0, 7, "third looked up the new m.k");
    // `fourth` and `fifth` key on the source address, incremented between them.
    p.add_both(
        "I.fifth",
        &[ex(0x0a00_0002, 4)],
        "I.to",
        &[bytes(9, 2)],
        None,
    );
    p.add_both(
        "I.fifth",
        &[ex(0x0a00_0001, 4)],
        "I.to",
        &[bytes(10, 2)],
        None,
    );
    p.add_both(
        "I.fourth",
        &[ex(0x0a00_0001, 4)],
        "I.to",
        &[bytes(11, 2)],
        None,
    );
    let out = p.send(&frame(true, 1, 0x0a00_0001, 0x0101_0101, 17, 64), "src + 1");
    assert_eq!(out[0].0, 9, "fifth looked up the incremented source");
    p.sweep(8, "rekeyed");
}

/// A parser that never reaches `accept` (it goes round one state): the parser inlined into
/// the lane function must still stop at the bound on parser states, as the interpreter does,
/// and the packet go on with the interpreter's outcome.
#[test]
fn a_parser_loop_in_the_lane_function_stops_at_the_state_bound() {
    let program = r#"
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> etherType; }
struct metadata { }
struct headers { ethernet_t ethernet; }
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t s) {
    state start { p.extract(h.ethernet); transition spin; }
    state spin { transition spin; }
}
control V(inout headers h, inout metadata m) { apply { } }
control I(inout headers h, inout metadata m, inout standard_metadata_t s) {
    apply {
        s.egress_spec = 2;
        if (s.parser_error == error.NoError) { h.ethernet.etherType = 7; }
        if (s.parser_error == error.PacketTooShort) { h.ethernet.etherType = 8; }
    }
}
control E(inout headers h, inout metadata m, inout standard_metadata_t s) { apply { } }
control C(inout headers h, inout metadata m) { apply { } }
control D(packet_out p, in headers h) { apply { p.emit(h.ethernet); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#;
    let (native, interp) = switches_of(program);
    assert!(native.lane_generated(), "the lane function is generated");
    let mut p = Pair {
        native,
        interp,
        out: Vec::new(),
        sent: 0,
    };
    for len in [14usize, 20, 60] {
        let mut f = frame(false, 3, 0, 0, 0, 0);
        f.truncate(len);
        p.send(&f, "parser loop");
    }
    assert!(
        p.native.lane_counts().0 > 0,
        "the native switch took its lane"
    );
}
