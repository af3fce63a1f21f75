//! Standard metadata the program refers to is still written by the switch now that fields it
//! never refers to are not stored (`tern_dataplane::uses`): a small hand-written BMv2 JSON
//! copies `ingress_port` and `packet_length` (ingress) and `egress_port` (egress) into the
//! Ethernet addresses, and the emitted frames carry the values. `mark_to_drop` on the whole
//! header does not count as a use of its other fields.

use tern_dataplane::uses::Uses;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::PacketPath;

/// The program: `fwd` sends to port 3 and, with `copy`, copies the metadata into the Ethernet
/// header; `drop` (`mark_to_drop(standard_metadata)`) is a table action that never runs.
fn program(copy: bool) -> String {
    let copies = if copy {
        r#",
    {"op": "assign", "parameters": [{"type": "field", "value": ["ethernet", "srcAddr"]},
      {"type": "field", "value": ["standard_metadata", "ingress_port"]}]},
    {"op": "assign", "parameters": [{"type": "field", "value": ["ethernet", "etherType"]},
      {"type": "field", "value": ["standard_metadata", "packet_length"]}]}"#
    } else {
        ""
    };
    let egress_copy = if copy {
        r#"{"op": "assign", "parameters": [{"type": "field", "value": ["ethernet", "dstAddr"]},
      {"type": "field", "value": ["standard_metadata", "egress_port"]}]}"#
    } else {
        ""
    };
    format!(
        r#"{{
  "header_types": [
    {{"name": "standard_metadata_t", "id": 0, "fields": [["ingress_port", 9, false],
      ["egress_spec", 9, false], ["egress_port", 9, false], ["instance_type", 32, false],
      ["packet_length", 32, false], ["_padding", 5, false]]}},
    {{"name": "ethernet_t", "id": 1, "fields": [["dstAddr", 48, false], ["srcAddr", 48, false],
      ["etherType", 16, false]]}}
  ],
  "headers": [
    {{"name": "standard_metadata", "id": 0, "header_type": "standard_metadata_t", "metadata": true}},
    {{"name": "ethernet", "id": 1, "header_type": "ethernet_t", "metadata": false}}
  ],
  "header_stacks": [],
  "parsers": [{{"name": "parser", "id": 0, "init_state": "start", "parse_states": [
    {{"name": "start", "id": 0,
      "parser_ops": [{{"op": "extract", "parameters": [{{"type": "regular", "value": "ethernet"}}]}}],
      "transition_key": [],
      "transitions": [{{"type": "default", "value": null, "mask": null, "next_state": null}}]}}
  ]}}],
  "deparsers": [{{"name": "deparser", "id": 0, "order": ["ethernet"]}}],
  "actions": [
    {{"name": "fwd", "id": 0, "runtime_data": [], "primitives": [
      {{"op": "assign", "parameters": [
        {{"type": "field", "value": ["standard_metadata", "egress_spec"]}},
        {{"type": "hexstr", "value": "0x0003"}}]}}{copies}]}},
    {{"name": "drop", "id": 1, "runtime_data": [], "primitives": [
      {{"op": "mark_to_drop", "parameters": [{{"type": "header", "value": "standard_metadata"}}]}}]}},
    {{"name": "eg", "id": 2, "runtime_data": [], "primitives": [{egress_copy}]}}
  ],
  "pipelines": [
    {{"name": "ingress", "id": 0, "init_table": "tbl_fwd", "tables": [
      {{"name": "tbl_fwd", "id": 0, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
        "action_ids": [0, 1], "actions": ["fwd", "drop"], "base_default_next": null,
        "next_tables": {{"fwd": null, "drop": null}},
        "default_entry": {{"action_id": 0, "action_const": true, "action_data": [],
                          "action_entry_const": true}}}}],
     "action_profiles": [], "conditionals": []}},
    {{"name": "egress", "id": 1, "init_table": "tbl_eg", "tables": [
      {{"name": "tbl_eg", "id": 1, "key": [], "match_type": "exact", "type": "simple",
        "max_size": 1, "with_counters": false, "support_timeout": false, "direct_meters": null,
        "action_ids": [2], "actions": ["eg"], "base_default_next": null,
        "next_tables": {{"eg": null}},
        "default_entry": {{"action_id": 2, "action_const": true, "action_data": [],
                          "action_entry_const": true}}}}],
     "action_profiles": [], "conditionals": []}}
  ],
  "calculations": [], "checksums": [], "learn_lists": [], "field_lists": [],
  "counter_arrays": [], "register_arrays": [], "meter_arrays": [], "parse_vsets": []
}}"#
    )
}

fn frame(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + 1) as u8).collect()
}

#[test]
fn referenced_standard_metadata_reaches_the_program() {
    let mut sw = Switch::from_json(&program(true), SwitchOptions::default()).expect("loads");
    for (port, len) in [(0u32, 14usize), (1, 60), (7, 64), (300, 100)] {
        let f = frame(len);
        let mut out = Vec::new();
        sw.process_packet(port, &f, &mut out);
        assert_eq!(out.len(), 1, "port {port}");
        let o = &out[0];
        assert_eq!(o.port, 3);
        let be = |b: &[u8]| b.iter().fold(0u64, |a, x| (a << 8) | *x as u64);
        assert_eq!(be(&o.data[0..6]), 3, "egress_port in egress");
        assert_eq!(be(&o.data[6..12]), port as u64, "ingress_port");
        assert_eq!(be(&o.data[12..14]), len as u64, "packet_length");
        assert_eq!(&o.data[14..], &f[14..], "payload");
    }
}

#[test]
fn uses_sees_references_and_not_mark_to_drop() {
    let find = |p: &tern_model::Program, f: &str| {
        p.field_by_name("standard_metadata", f)
            .expect("field exists")
    };
    let with = tern_model::load(&program(true)).expect("model");
    let u = Uses::of(&with);
    for f in [
        "ingress_port",
        "packet_length",
        "egress_port",
        "egress_spec",
    ] {
        assert!(u.reads(find(&with, f)), "{f} is referenced");
    }
    assert!(
        !u.reads(find(&with, "instance_type")),
        "instance_type is not"
    );
    let without = tern_model::load(&program(false)).expect("model");
    let u = Uses::of(&without);
    // Only egress_spec (assigned by fwd); mark_to_drop(standard_metadata) is no whole-header use.
    for f in [
        "ingress_port",
        "packet_length",
        "egress_port",
        "instance_type",
    ] {
        assert!(!u.reads(find(&without, f)), "{f} is not referenced");
    }
    assert!(u.reads(find(&without, "egress_spec")));
    // Without the copies the frame goes out unchanged.
    let mut sw = Switch::from_json(&program(false), SwitchOptions::default()).expect("loads");
    let f = frame(60);
    let mut out = Vec::new();
    sw.process_packet(5, &f, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].data, f);
}
