//! The load-time checksum plan (`tern_dataplane::csum`): a `csum16` over one header's fields
//! summed over the emitted bytes gives the same frames as the generic field-packing path, on
//! random IPv4 headers, for field lists the plan takes (IPv4 without its checksum field, the
//! whole header, a left-out 16-bit run) and refuses (a left-out run that is not whole 16-bit
//! words). The program is a small hand-written BMv2 JSON: parse Ethernet + IPv4, forward to
//! port 1, update the checksum, emit both headers; frames come back unchanged but for the
//! checksum (the IPv4 extract/emit plan of `tern_dataplane::layout` round-trips).

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{OutputPacket, PacketPath};

const IPV4: [(&str, u32); 12] = [
    ("version", 4),
    ("ihl", 4),
    ("diffserv", 8),
    ("totalLen", 16),
    ("identification", 16),
    ("flags", 3),
    ("fragOffset", 13),
    ("ttl", 8),
    ("protocol", 8),
    ("hdrChecksum", 16),
    ("srcAddr", 32),
    ("dstAddr", 32),
];

/// The program with `list` (IPv4 field names) as the checksum's field list, no condition.
fn program(list: &[&str]) -> String {
    program_with(list, "null", false)
}

/// The program with `list` as the checksum's field list (the payload after it when
/// `payload`), `cond` the checksum's `if_cond` JSON.
fn program_with(list: &[&str], cond: &str, payload: bool) -> String {
    let fields = |fs: &[(&str, u32)]| {
        fs.iter()
            .map(|(n, w)| format!("[\"{n}\", {w}, false]"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let input = list
        .iter()
        .map(|f| format!("{{\"type\": \"field\", \"value\": [\"ipv4\", \"{f}\"]}}"))
        .chain(payload.then(|| "{\"type\": \"payload\", \"value\": null}".to_string()))
        .collect::<Vec<_>>()
        .join(", ");
    let std_fields = fields(&[
        ("ingress_port", 9),
        ("egress_spec", 9),
        ("egress_port", 9),
        ("instance_type", 32),
        ("packet_length", 32),
        ("_padding", 5),
    ]);
    let eth = fields(&[("dstAddr", 48), ("srcAddr", 48), ("etherType", 16)]);
    let ip = fields(&IPV4);
    format!(
        r#"{{
  "header_types": [
    {{"name": "standard_metadata_t", "id": 0, "fields": [{std_fields}]}},
    {{"name": "ethernet_t", "id": 1, "fields": [{eth}]}},
    {{"name": "ipv4_t", "id": 2, "fields": [{ip}]}}
  ],
  "headers": [
    {{"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true}},
    {{"name": "ethernet", "id": 1, "header_type": "ethernet_t", "metadata": false}},
    {{"name": "ipv4", "id": 2, "header_type": "ipv4_t", "metadata": false}}
  ],
  "header_stacks": [],
  "parsers": [{{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {{"name": "start", "id": 0,
      "parser_ops": [{{"op": "extract", "parameters": [{{"type": "regular", "value": "ethernet"}}]}}],
      "transition_key": [{{"type": "field", "value": ["ethernet", "etherType"]}}],
      "transitions": [
        {{"type": "hexstr", "value": "0x0800", "mask": null, "next_state": "parse_ipv4"}},
        {{"type": "default", "value": null, "mask": null, "next_state": null}}]}},
    {{"name": "parse_ipv4", "id": 1,
      "parser_ops": [{{"op": "extract", "parameters": [{{"type": "regular", "value": "ipv4"}}]}}],
      "transition_key": [],
      "transitions": [{{"type": "default", "value": null, "mask": null, "next_state": null}}]}}
  ]}}],
  "deparsers": [{{"name": "deparser", "id": 0, "order": ["ethernet", "ipv4"]}}],
  "actions": [{{"name": "fwd", "id": 0, "runtime_data": [], "primitives": [
    {{"op": "assign", "parameters": [
      {{"type": "field", "value": ["standard_metadata", "egress_spec"]}},
      {{"type": "hexstr", "value": "0x0001"}}]}}]}}],
  "pipelines": [
    {{"name": "ingress", "id": 0, "init_table": "tbl_fwd", "tables": [
      {{"name": "tbl_fwd", "id": 0, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
        "action_ids": [0], "actions": ["fwd"], "base_default_next": null,
        "next_tables": {{"fwd": null}},
        "default_entry": {{"action_id": 0, "action_const": true, "action_data": [],
                          "action_entry_const": true}}}}],
     "action_profiles": [], "conditionals": []}},
    {{"name": "egress", "id": 1, "init_table": null, "tables": [], "action_profiles": [],
     "conditionals": []}}
  ],
  "calculations": [{{"name": "ipv4_checksum", "id": 0, "input": [{input}], "algo": "csum16"}}],
  "checksums": [{{"name": "ipv4_checksum", "id": 0, "target": ["ipv4", "hdrChecksum"],
                 "type": "generic", "calculation": "ipv4_checksum", "if_cond": {cond}}}],
  "learn_lists": [], "field_lists": [], "counter_arrays": [], "register_arrays": [],
  "meter_arrays": [], "parse_vsets": []
}}"#
    )
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A random Ethernet + IPv4 frame with `payload` random bytes after the IPv4 header.
fn frame(r: &mut Rng, payload: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..14 + 20 + payload).map(|_| r.next() as u8).collect();
    f[12] = 0x08;
    f[13] = 0x00;
    f
}

fn run(sw: &mut Switch, f: &[u8]) -> Vec<OutputPacket> {
    let mut out = Vec::new();
    sw.process_packet(0, f, &mut out);
    out
}

/// Same frames with and without the plan; returns the planned switch's frames.
fn compare(list: &[&str], planned: bool) -> Vec<Vec<u8>> {
    compare_json(&program(list), list, planned, planned)
}

/// Same frames three ways: the plan compiled into the native emit function (when `native`),
/// the plan run in Rust after the emit loop, and the generic path; returns the first's frames.
fn compare_json(json: &str, list: &[&str], planned: bool, native: bool) -> Vec<Vec<u8>> {
    let mut fast = Switch::from_json(json, SwitchOptions::default()).expect("program loads");
    let mut rust = Switch::from_json(json, SwitchOptions::default()).expect("program loads");
    let mut slow = Switch::from_json(json, SwitchOptions::default()).expect("program loads");
    assert_eq!(fast.has_checksum_plan(), planned, "plan for {list:?}");
    assert_eq!(fast.has_native_checksums(), native, "compiled for {list:?}");
    rust.use_rust_checksums();
    assert!(!rust.has_native_checksums());
    assert_eq!(rust.has_checksum_plan(), planned);
    slow.use_generic_checksums();
    assert!(!slow.has_checksum_plan());
    let mut r = Rng(0x1234_5678_9abc_def1);
    let mut frames = Vec::new();
    for i in 0..500 {
        let f = frame(&mut r, i % 7);
        let (a, b, c) = (run(&mut fast, &f), run(&mut rust, &f), run(&mut slow, &f));
        assert_eq!(a.len(), 1, "one output");
        assert_eq!(a[0].port, b[0].port);
        assert_eq!(
            a[0].data, b[0].data,
            "{list:?}: frame {f:02x?} (compiled vs Rust plan)"
        );
        assert_eq!(
            a[0].data, c[0].data,
            "{list:?}: frame {f:02x?} (vs generic)"
        );
        assert_eq!(c.len(), 1);
        if i % 5 == 0 {
            // Not IPv4 (the header stays invalid): same frames, unchanged.
            let mut g = f.clone();
            g[12] = 0x86;
            g[13] = 0xdd;
            let (a, b, c) = (run(&mut fast, &g), run(&mut rust, &g), run(&mut slow, &g));
            assert_eq!(a[0].data, g, "{list:?}: non-IPv4 frame");
            assert_eq!(b[0].data, g);
            assert_eq!(c[0].data, g);
        }
        // Parsed and re-emitted unchanged but for the checksum (bytes 24..26): the IPv4
        // header's sub-byte fields go through the extract/emit plan both ways.
        let mut want = f.clone();
        want[24..26].copy_from_slice(&a[0].data[24..26]);
        assert_eq!(a[0].data, want, "{list:?}: round trip");
        frames.push(a[0].data.clone());
    }
    frames
}

/// One's-complement sum of 16-bit words, folded.
fn ones_sum(b: &[u8]) -> u32 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u32)
        .sum();
    while s >> 16 != 0 {
        s = (s & 0xffff) + (s >> 16);
    }
    s
}

#[test]
fn ipv4_checksum_over_emitted_bytes_is_valid_and_matches_generic() {
    let list: Vec<&str> = IPV4
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| *n != "hdrChecksum")
        .collect();
    for f in compare(&list, true) {
        // A correct IPv4 header checksum makes the whole header sum to 0xffff.
        assert_eq!(ones_sum(&f[14..34]), 0xffff, "{f:02x?}");
    }
}

#[test]
fn whole_header_and_word_runs_are_planned() {
    let all: Vec<&str> = IPV4.iter().map(|(n, _)| *n).collect();
    compare(&all, true);
    // ttl + protocol (one 16-bit word at byte 8) and the checksum left out.
    let no_ttl_proto: Vec<&str> = all
        .iter()
        .copied()
        .filter(|n| !["ttl", "protocol", "hdrChecksum"].contains(n))
        .collect();
    compare(&no_ttl_proto, true);
    // Trailing fields left out (dstAddr) and leading ones (version .. totalLen).
    compare(&all[..11], true);
    compare(&all[4..], true);
}

#[test]
fn runs_that_are_not_whole_words_keep_the_generic_path() {
    let all: Vec<&str> = IPV4.iter().map(|(n, _)| *n).collect();
    // ttl alone (8 bits) left out: the packed bytes shift by one byte.
    let no_ttl: Vec<&str> = all.iter().copied().filter(|n| *n != "ttl").collect();
    compare(&no_ttl, false);
    // Out of wire order.
    let mut swapped = all.clone();
    swapped.swap(10, 11);
    compare(&swapped, false);
}

/// `update_checksum(hdr.ipv4.isValid(), ...)` as p4c writes it (`d2b` of `$valid$`) and as
/// `isValid()`: compiled into the emit function, same frames as the Rust plan and the generic
/// path, and a valid IPv4 checksum.
#[test]
fn validity_conditions_are_compiled() {
    let list: Vec<&str> = IPV4
        .iter()
        .map(|(n, _)| *n)
        .filter(|n| *n != "hdrChecksum")
        .collect();
    let d2b = r#"{"type": "expression", "value": {"op": "d2b", "left": null,
        "right": {"type": "field", "value": ["ipv4", "$valid$"]}}}"#;
    let valid = r#"{"type": "expression", "value": {"op": "valid", "left": null,
        "right": {"type": "header", "value": "ipv4"}}}"#;
    for cond in [d2b, valid] {
        for f in compare_json(&program_with(&list, cond, false), &list, true, true) {
            assert_eq!(ones_sum(&f[14..34]), 0xffff, "{f:02x?}");
        }
    }
    // A condition that is not a validity test (ttl != 0) keeps the plan in Rust.
    let ttl = r#"{"type": "expression", "value": {"op": "!=", "left":
        {"type": "field", "value": ["ipv4", "ttl"]}, "right": {"type": "hexstr", "value": "0x00"}}}"#;
    compare_json(&program_with(&list, ttl, false), &list, true, false);
}

/// A checksum over the header and the payload (`update_checksum_with_payload`'s form) is not
/// planned and not compiled: the generic path, same frames either way.
#[test]
fn payload_checksums_keep_the_generic_path() {
    let all: Vec<&str> = IPV4.iter().map(|(n, _)| *n).collect();
    compare_json(&program_with(&all, "null", true), &all, false, false);
}
