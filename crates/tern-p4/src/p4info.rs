//! P4Info (P4Runtime v1, protobuf text format) for a compiled program, with p4c's id scheme:
//! `(kind prefix << 24) | (jenkins one-at-a-time hash of the name & 0xffffff)`, collisions
//! resolved by linear probing in sorted-name order.

use crate::lower::Extra;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write;
use tern_model as m;

/// Jenkins one-at-a-time hash.
pub fn jenkins(name: &str) -> u32 {
    let mut h: u32 = 0;
    for b in name.bytes() {
        h = h.wrapping_add(b as u32);
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h = h.wrapping_add(h << 15);
    h
}

/// Allocate ids for names of one kind (`prefix` = entity kind byte).
pub fn allocate_ids(prefix: u8, names: &[String]) -> BTreeMap<String, u32> {
    allocate_ids_with(prefix, names, &HashMap::new())
}

/// Allocate ids, honouring `@id` overrides first (the kind prefix is still OR-ed in).
pub fn allocate_ids_with(
    prefix: u8,
    names: &[String],
    overrides: &HashMap<String, u32>,
) -> BTreeMap<String, u32> {
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort();
    sorted.dedup();
    let mut used = HashSet::new();
    let mut out = BTreeMap::new();
    for n in &sorted {
        if let Some(v) = overrides.get(*n) {
            let id = ((prefix as u32) << 24) | (v & 0xff_ffff);
            used.insert(id);
            out.insert((*n).clone(), id);
        }
    }
    for n in sorted {
        if out.contains_key(n) {
            continue;
        }
        let mut h = jenkins(n) & 0xff_ffff;
        loop {
            let id = ((prefix as u32) << 24) | h;
            if used.insert(id) {
                out.insert(n.clone(), id);
                break;
            }
            h = (h + 1) & 0xff_ffff;
        }
    }
    out
}

fn alias(name: &str) -> &str {
    name.rsplit('.').next().unwrap_or(name)
}

fn preamble(out: &mut String, id: u32, name: &str) {
    let _ = writeln!(
        out,
        "  preamble {{\n    id: {id}\n    name: \"{name}\"\n    alias: \"{}\"\n  }}",
        alias(name)
    );
}

/// Write the P4Info text for a program.
pub fn write(p: &m::Program, extra: &Extra) -> String {
    let mut out = String::from("pkg_info {\n  arch: \"v1model\"\n}\n");
    let ids = |p: u8, n: &[String]| allocate_ids_with(p, n, &extra.id_overrides);
    let visible: Vec<usize> = (0..p.actions.len())
        .filter(|i| !extra.action_hidden.get(*i).copied().unwrap_or(false))
        .collect();
    let action_names: Vec<String> = visible.iter().map(|i| p.actions[*i].name.clone()).collect();
    let action_ids = ids(0x01, &action_names);
    let table_ids = ids(
        0x02,
        &extra
            .tables
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>(),
    );
    let profiles: Vec<&m::ActionProfile> = p
        .pipelines
        .iter()
        .flat_map(|pl| &pl.action_profiles)
        .collect();
    let profile_ids = ids(
        0x11,
        &profiles.iter().map(|a| a.name.clone()).collect::<Vec<_>>(),
    );
    let counters: Vec<&m::CounterArray> =
        p.counter_arrays.iter().filter(|c| !c.is_direct).collect();
    let dcounters: Vec<&m::CounterArray> =
        p.counter_arrays.iter().filter(|c| c.is_direct).collect();
    let meters: Vec<&m::MeterArray> = p.meter_arrays.iter().filter(|c| !c.is_direct).collect();
    let dmeters: Vec<&m::MeterArray> = p.meter_arrays.iter().filter(|c| c.is_direct).collect();
    let counter_ids = ids(
        0x12,
        &counters.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    );
    let dcounter_ids = ids(
        0x13,
        &dcounters.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    );
    let meter_ids = ids(
        0x14,
        &meters.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    );
    let dmeter_ids = ids(
        0x15,
        &dmeters.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
    );
    let register_ids = ids(
        0x16,
        &p.register_arrays
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>(),
    );
    let digest_ids = ids(
        0x17,
        &p.learn_lists
            .iter()
            .map(|c| c.name.clone())
            .collect::<Vec<_>>(),
    );
    let vset_ids = ids(
        0x03,
        &extra
            .value_sets
            .iter()
            .map(|v| v.0.clone())
            .collect::<Vec<_>>(),
    );

    for t in &extra.tables {
        out.push_str("tables {\n");
        preamble(&mut out, table_ids[&t.name], &t.name);
        for (i, (n, kind, w)) in t.keys.iter().enumerate() {
            let mt = match kind.as_str() {
                "exact" => "EXACT",
                "lpm" => "LPM",
                "ternary" => "TERNARY",
                "range" => "RANGE",
                "optional" => "OPTIONAL",
                _ => "EXACT",
            };
            let _ = writeln!(out, "  match_fields {{\n    id: {}\n    name: \"{n}\"\n    bitwidth: {w}\n    match_type: {mt}\n  }}", i + 1);
        }
        for (a, defonly, tableonly) in &t.actions {
            let name = &p.actions[*a as usize].name;
            let Some(id) = action_ids.get(name) else {
                continue;
            };
            let _ = write!(out, "  action_refs {{\n    id: {id}\n");
            if *defonly {
                out.push_str("    annotations: \"@defaultonly\"\n    scope: DEFAULT_ONLY\n");
            } else if *tableonly {
                out.push_str("    annotations: \"@tableonly\"\n    scope: TABLE_ONLY\n");
            }
            out.push_str("  }\n");
        }
        if let Some(pn) = &t.impl_profile {
            let _ = writeln!(out, "  implementation_id: {}", profile_ids[pn]);
        }
        if let Some(c) = &t.direct_counter {
            let _ = writeln!(out, "  direct_resource_ids: {}", dcounter_ids[c]);
        }
        if let Some(c) = &t.direct_meter {
            let _ = writeln!(out, "  direct_resource_ids: {}", dmeter_ids[c]);
        }
        let _ = writeln!(out, "  size: {}", t.size);
        if t.support_timeout {
            out.push_str("  idle_timeout_behavior: NOTIFY_CONTROL\n");
        }
        if t.const_default {
            // p4c marks the const default action through the action ref; keep a hint.
            out.push_str("  const_default_action_id: ");
            let da = p
                .pipelines
                .iter()
                .flat_map(|pl| &pl.tables)
                .find(|x| x.name == t.name)
                .and_then(|x| x.default_entry.as_ref())
                .and_then(|d| action_ids.get(&p.actions[d.action as usize].name));
            let _ = writeln!(out, "{}", da.copied().unwrap_or(0));
        }
        if t.has_const_entries {
            out.push_str("  is_const_table: true\n");
        }
        out.push_str("}\n");
    }
    let mut seen = HashSet::new();
    for i in visible {
        let a = &p.actions[i];
        if !seen.insert(a.name.clone()) {
            continue;
        }
        out.push_str("actions {\n");
        preamble(&mut out, action_ids[&a.name], &a.name);
        for (j, (n, w)) in a.runtime_data.iter().enumerate() {
            let _ = writeln!(
                out,
                "  params {{\n    id: {}\n    name: \"{n}\"\n    bitwidth: {w}\n  }}",
                j + 1
            );
        }
        out.push_str("}\n");
    }
    for a in &profiles {
        out.push_str("action_profiles {\n");
        preamble(&mut out, profile_ids[&a.name], &a.name);
        for t in extra
            .tables
            .iter()
            .filter(|t| t.impl_profile.as_deref() == Some(a.name.as_str()))
        {
            let _ = writeln!(out, "  table_ids: {}", table_ids[&t.name]);
        }
        if a.selector.is_some() {
            out.push_str("  with_selector: true\n");
        }
        let _ = writeln!(out, "  size: {}", a.max_size);
        out.push_str("}\n");
    }
    let unit = |n: &str| match extra.counter_units.get(n).map(|s| s.as_str()) {
        Some("packets") => "PACKETS",
        Some("bytes") => "BYTES",
        _ => "BOTH",
    };
    for c in &counters {
        out.push_str("counters {\n");
        preamble(&mut out, counter_ids[&c.name], &c.name);
        let _ = writeln!(
            out,
            "  spec {{\n    unit: {}\n  }}\n  size: {}",
            unit(&c.name),
            c.size
        );
        out.push_str("}\n");
    }
    for c in &dcounters {
        out.push_str("direct_counters {\n");
        preamble(&mut out, dcounter_ids[&c.name], &c.name);
        let _ = writeln!(out, "  spec {{\n    unit: {}\n  }}", unit(&c.name));
        if let Some(t) = c.binding.as_ref().and_then(|b| table_ids.get(b)) {
            let _ = writeln!(out, "  direct_table_id: {t}");
        }
        out.push_str("}\n");
    }
    let munit = |t: m::MeterType| match t {
        m::MeterType::Bytes => "BYTES",
        m::MeterType::Packets => "PACKETS",
    };
    for c in &meters {
        out.push_str("meters {\n");
        preamble(&mut out, meter_ids[&c.name], &c.name);
        let _ = writeln!(
            out,
            "  spec {{\n    unit: {}\n  }}\n  size: {}",
            munit(c.meter_type),
            c.size
        );
        out.push_str("}\n");
    }
    for c in &dmeters {
        out.push_str("direct_meters {\n");
        preamble(&mut out, dmeter_ids[&c.name], &c.name);
        let _ = writeln!(out, "  spec {{\n    unit: {}\n  }}", munit(c.meter_type));
        if let Some(t) = c.binding.as_ref().and_then(|b| table_ids.get(b)) {
            let _ = writeln!(out, "  direct_table_id: {t}");
        }
        out.push_str("}\n");
    }
    for r in &p.register_arrays {
        out.push_str("registers {\n");
        preamble(&mut out, register_ids[&r.name], &r.name);
        let _ = writeln!(out, "  type_spec {{\n    bitstring {{\n      bit {{\n        bitwidth: {}\n      }}\n    }}\n  }}\n  size: {}", r.bitwidth, r.size);
        out.push_str("}\n");
    }
    for l in &p.learn_lists {
        out.push_str("digests {\n");
        preamble(&mut out, digest_ids[&l.name], &l.name);
        out.push_str("  type_spec {\n    tuple {\n");
        for f in &l.elements {
            let _ = writeln!(out, "      members {{\n        bitstring {{\n          bit {{\n            bitwidth: {}\n          }}\n        }}\n      }}", p.field_width(*f));
        }
        out.push_str("    }\n  }\n}\n");
    }
    // p4c hashes the header type's name (not the annotation's) for the id; `@id` on the type
    // overrides it.
    let ch_ids = allocate_ids_with(
        0x04,
        &extra
            .controller_headers
            .iter()
            .map(|c| c.type_name.clone())
            .collect::<Vec<_>>(),
        &extra
            .controller_headers
            .iter()
            .filter_map(|c| c.id.map(|id| (c.type_name.clone(), id)))
            .collect(),
    );
    for c in &extra.controller_headers {
        let n = &c.name;
        out.push_str("controller_packet_metadata {\n");
        let _ = writeln!(out, "  preamble {{\n    id: {}\n    name: \"{n}\"\n    alias: \"{n}\"\n    annotations: \"@controller_header(\\\"{n}\\\")\"\n  }}", ch_ids[&c.type_name]);
        for (f, w, id) in &c.fields {
            let _ = writeln!(
                out,
                "  metadata {{\n    id: {id}\n    name: \"{f}\"\n    bitwidth: {w}\n  }}"
            );
        }
        out.push_str("}\n");
    }
    for (n, w, size) in &extra.value_sets {
        out.push_str("value_sets {\n");
        preamble(&mut out, vset_ids[n], n);
        let _ = writeln!(
            out,
            "  match {{\n    id: 1\n    bitwidth: {w}\n    match_type: EXACT\n  }}\n  size: {size}"
        );
        out.push_str("}\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_match_p4c_vectors() {
        // Test vectors from the P4Runtime reference (24-bit form).
        let t = allocate_ids(0x02, &["MyIngress.ipv4_lpm".to_string()]);
        assert_eq!(t["MyIngress.ipv4_lpm"], 37375156);
        let a = allocate_ids(0x01, &["NoAction".to_string()]);
        assert_eq!(a["NoAction"], 21257015);
        let d = allocate_ids(0x17, &["L2_digest".to_string()]);
        assert_eq!(d["L2_digest"], 386370872);
    }

    #[test]
    fn id_annotations_override_the_hash() {
        let mut o = HashMap::new();
        o.insert("t".to_string(), 5u32);
        let ids = allocate_ids_with(0x02, &["t".to_string(), "u".to_string()], &o);
        assert_eq!(ids["t"], 0x0200_0005);
        assert_eq!(ids["u"], 0x0200_0000 | (jenkins("u") & 0xff_ffff));
    }

    #[test]
    fn collisions_probe_linearly() {
        let names = vec!["a".to_string(), "a".to_string(), "b".to_string()];
        let ids = allocate_ids(0x01, &names);
        assert_eq!(ids.len(), 2);
    }
}
