//! P4Info handling: text-format parsing, p4c's id scheme, derivation of a P4Info from a BMv2
//! JSON program, and the byte-string rules (canonical and zero-padded values) of P4Runtime.

use crate::proto::p4::config::v1 as cfg;
use prost_reflect::{DescriptorPool, DynamicMessage};
use tern_model::{FieldWidth, KeyTarget, MatchKind, Program};

/// Parse a P4Info in protobuf text format (what p4c's `--p4runtime-files x.txt` writes).
pub fn parse_p4info_text(text: &str) -> Result<cfg::P4Info, String> {
    let pool = DescriptorPool::decode(crate::proto::FILE_DESCRIPTOR_SET)
        .map_err(|e| format!("internal descriptor error: {e}"))?;
    let desc = pool
        .get_message_by_name("p4.config.v1.P4Info")
        .ok_or("internal descriptor error: no p4.config.v1.P4Info")?;
    let msg = DynamicMessage::parse_text_format(desc, text)
        .map_err(|e| format!("P4Info text format: {e}"))?;
    msg.transcode_to::<cfg::P4Info>()
        .map_err(|e| format!("P4Info text format: {e}"))
}

/// Jenkins one-at-a-time hash (p4c's P4Runtime symbol-table hash).
pub fn jenkins_one_at_a_time(name: &str) -> u32 {
    let mut h: u32 = 0;
    for &b in name.as_bytes() {
        h = h.wrapping_add(u32::from(b));
        h = h.wrapping_add(h << 10);
        h ^= h >> 6;
    }
    h = h.wrapping_add(h << 3);
    h ^= h >> 11;
    h.wrapping_add(h << 15)
}

/// p4c's id for `name` with resource `prefix` (24-bit hash form of current p4c).
pub fn p4c_id(prefix: u8, name: &str) -> u32 {
    (u32::from(prefix) << 24) | (jenkins_one_at_a_time(name) & 0x00ff_ffff)
}

/// Assigns ids to names of one prefix the way p4c does: sorted names, linear probing on clashes.
fn assign_ids(prefix: u8, names: &[String]) -> Vec<u32> {
    let mut sorted: Vec<(usize, &String)> = names.iter().enumerate().collect();
    sorted.sort_by(|a, b| a.1.cmp(b.1));
    let mut used = std::collections::HashSet::new();
    let mut ids = vec![0u32; names.len()];
    for (i, name) in sorted {
        let mut h = jenkins_one_at_a_time(name) & 0x00ff_ffff;
        loop {
            let id = (u32::from(prefix) << 24) | h;
            if used.insert(id) {
                ids[i] = id;
                break;
            }
            h = (h + 1) & 0x00ff_ffff;
        }
    }
    ids
}

fn preamble(id: u32, name: &str) -> Option<cfg::Preamble> {
    let alias = name.rsplit('.').next().unwrap_or(name).to_string();
    Some(cfg::Preamble {
        id,
        name: name.to_string(),
        alias,
        ..Default::default()
    })
}

fn field_width(prog: &Program, header: u32, field: u32) -> i32 {
    let Some(h) = prog.headers.get(header as usize) else {
        return 0;
    };
    let Some(ht) = prog.header_types.get(h.header_type as usize) else {
        return 0;
    };
    match ht.fields.get(field as usize).map(|f| &f.width) {
        Some(FieldWidth::Fixed(w)) => *w as i32,
        _ => 0,
    }
}

/// Derive a P4Info from a loaded BMv2 JSON program (tables, actions, counters, meters,
/// registers, digests, value sets; p4c's 24-bit id scheme). Controller headers cannot be
/// derived (they are not marked in the JSON).
pub fn derive_p4info(prog: &Program) -> cfg::P4Info {
    let mut info = cfg::P4Info {
        pkg_info: Some(cfg::PkgInfo {
            arch: "v1model".into(),
            ..Default::default()
        }),
        ..Default::default()
    };
    // Actions: names can repeat (e.g. NoAction); keep one per name.
    let mut action_names: Vec<String> = Vec::new();
    for a in &prog.actions {
        if !action_names.contains(&a.name) {
            action_names.push(a.name.clone());
        }
    }
    let action_ids = assign_ids(0x01, &action_names);
    for (name, id) in action_names.iter().zip(&action_ids) {
        let a = prog.actions.iter().find(|a| &a.name == name);
        let params = a
            .map(|a| {
                a.runtime_data
                    .iter()
                    .enumerate()
                    .map(|(i, (n, w))| cfg::action::Param {
                        id: i as u32 + 1,
                        name: n.clone(),
                        bitwidth: *w as i32,
                        ..Default::default()
                    })
                    .collect()
            })
            .unwrap_or_default();
        info.actions.push(cfg::Action {
            preamble: preamble(*id, name),
            params,
        });
    }
    let action_id_of = |idx: u32| -> u32 {
        prog.actions
            .get(idx as usize)
            .and_then(|a| action_names.iter().position(|n| n == &a.name))
            .map(|p| action_ids[p])
            .unwrap_or(0)
    };
    let tables: Vec<&tern_model::Table> = prog.pipelines.iter().flat_map(|p| &p.tables).collect();
    let table_names: Vec<String> = tables.iter().map(|t| t.name.clone()).collect();
    let table_ids = assign_ids(0x02, &table_names);
    let dc_names: Vec<String> = prog
        .counter_arrays
        .iter()
        .filter(|c| c.is_direct)
        .map(|c| c.name.clone())
        .collect();
    let dc_ids = assign_ids(0x13, &dc_names);
    let dm_names: Vec<String> = prog
        .meter_arrays
        .iter()
        .filter(|m| m.is_direct)
        .map(|m| m.name.clone())
        .collect();
    let dm_ids = assign_ids(0x15, &dm_names);
    for (t, id) in tables.iter().zip(&table_ids) {
        let match_fields = t
            .key
            .iter()
            .enumerate()
            .map(|(i, k)| {
                let (bitwidth, mt) = match (&k.target, k.match_kind) {
                    (KeyTarget::Field(f), kind) => (
                        field_width(prog, f.header, f.field),
                        match kind {
                            MatchKind::Exact => cfg::match_field::MatchType::Exact,
                            MatchKind::Lpm => cfg::match_field::MatchType::Lpm,
                            MatchKind::Ternary => cfg::match_field::MatchType::Ternary,
                            MatchKind::Range => cfg::match_field::MatchType::Range,
                            MatchKind::Valid => cfg::match_field::MatchType::Exact,
                        },
                    ),
                    (_, _) => (1, cfg::match_field::MatchType::Exact),
                };
                cfg::MatchField {
                    id: i as u32 + 1,
                    name: k.name.clone(),
                    bitwidth,
                    r#match: Some(cfg::match_field::Match::MatchType(mt as i32)),
                    ..Default::default()
                }
            })
            .collect();
        let mut direct = Vec::new();
        for (c, cid) in prog
            .counter_arrays
            .iter()
            .filter(|c| c.is_direct)
            .zip(&dc_ids)
        {
            if c.binding.as_deref() == Some(t.name.as_str()) {
                direct.push(*cid);
                info.direct_counters.push(cfg::DirectCounter {
                    preamble: preamble(*cid, &c.name),
                    spec: Some(cfg::CounterSpec {
                        unit: cfg::counter_spec::Unit::Both as i32,
                    }),
                    direct_table_id: *id,
                });
            }
        }
        for (m, mid) in prog
            .meter_arrays
            .iter()
            .filter(|m| m.is_direct)
            .zip(&dm_ids)
        {
            if m.binding.as_deref() == Some(t.name.as_str()) {
                direct.push(*mid);
                info.direct_meters.push(cfg::DirectMeter {
                    preamble: preamble(*mid, &m.name),
                    spec: Some(cfg::MeterSpec::default()),
                    direct_table_id: *id,
                });
            }
        }
        let mut action_refs: Vec<cfg::ActionRef> = Vec::new();
        for a in &t.actions {
            let aid = action_id_of(*a);
            if aid != 0 && !action_refs.iter().any(|r| r.id == aid) {
                action_refs.push(cfg::ActionRef {
                    id: aid,
                    ..Default::default()
                });
            }
        }
        let const_default_action_id = t
            .default_entry
            .as_ref()
            .filter(|d| d.action_const)
            .map(|d| action_id_of(d.action))
            .unwrap_or(0);
        info.tables.push(cfg::Table {
            preamble: preamble(*id, &t.name),
            match_fields,
            action_refs,
            const_default_action_id,
            direct_resource_ids: direct,
            size: i64::from(t.max_size),
            idle_timeout_behavior: if t.support_timeout {
                cfg::table::IdleTimeoutBehavior::NotifyControl as i32
            } else {
                0
            },
            is_const_table: t.entries.is_some(),
            ..Default::default()
        });
    }
    let names: Vec<String> = prog
        .counter_arrays
        .iter()
        .filter(|c| !c.is_direct)
        .map(|c| c.name.clone())
        .collect();
    for (c, id) in prog
        .counter_arrays
        .iter()
        .filter(|c| !c.is_direct)
        .zip(assign_ids(0x12, &names))
    {
        info.counters.push(cfg::Counter {
            preamble: preamble(id, &c.name),
            spec: Some(cfg::CounterSpec {
                unit: cfg::counter_spec::Unit::Both as i32,
            }),
            size: i64::from(c.size),
            index_type_name: None,
        });
    }
    let names: Vec<String> = prog
        .meter_arrays
        .iter()
        .filter(|m| !m.is_direct)
        .map(|m| m.name.clone())
        .collect();
    for (m, id) in prog
        .meter_arrays
        .iter()
        .filter(|m| !m.is_direct)
        .zip(assign_ids(0x14, &names))
    {
        info.meters.push(cfg::Meter {
            preamble: preamble(id, &m.name),
            spec: Some(cfg::MeterSpec::default()),
            size: i64::from(m.size),
            index_type_name: None,
        });
    }
    let names: Vec<String> = prog
        .register_arrays
        .iter()
        .map(|r| r.name.clone())
        .collect();
    for (r, id) in prog.register_arrays.iter().zip(assign_ids(0x16, &names)) {
        info.registers.push(cfg::Register {
            preamble: preamble(id, &r.name),
            type_spec: Some(bit_type(r.bitwidth as i32)),
            size: r.size as i32,
            index_type_name: None,
        });
    }
    let names: Vec<String> = prog.learn_lists.iter().map(|l| l.name.clone()).collect();
    for (l, id) in prog.learn_lists.iter().zip(assign_ids(0x17, &names)) {
        let members = l
            .elements
            .iter()
            .map(|f| bit_type(field_width(prog, f.header, f.field)))
            .collect();
        info.digests.push(cfg::Digest {
            preamble: preamble(id, &l.name),
            type_spec: Some(cfg::P4DataTypeSpec {
                type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Tuple(
                    cfg::P4TupleTypeSpec { members },
                )),
            }),
        });
    }
    let names: Vec<String> = prog.parse_vsets.iter().map(|v| v.name.clone()).collect();
    for (v, id) in prog.parse_vsets.iter().zip(assign_ids(0x03, &names)) {
        info.value_sets.push(cfg::ValueSet {
            preamble: preamble(id, &v.name),
            r#match: vec![cfg::MatchField {
                id: 1,
                name: "value".into(),
                bitwidth: v.compressed_bitwidth as i32,
                r#match: Some(cfg::match_field::Match::MatchType(
                    cfg::match_field::MatchType::Exact as i32,
                )),
                ..Default::default()
            }],
            size: 0,
        });
    }
    info
}

fn bit_type(bitwidth: i32) -> cfg::P4DataTypeSpec {
    cfg::P4DataTypeSpec {
        type_spec: Some(cfg::p4_data_type_spec::TypeSpec::Bitstring(
            cfg::P4BitstringLikeTypeSpec {
                type_spec: Some(cfg::p4_bitstring_like_type_spec::TypeSpec::Bit(
                    cfg::P4BitTypeSpec { bitwidth },
                )),
                ..Default::default()
            },
        )),
    }
}

/// Number of bytes of a `bitwidth`-bit value.
pub fn nbytes(bitwidth: i32) -> usize {
    (bitwidth.max(0) as usize).div_ceil(8)
}

/// The canonical form of a byte string: no leading zero bytes (a zero value is one `0x00`).
pub fn canonical(v: &[u8]) -> Vec<u8> {
    let first = v.iter().position(|&b| b != 0);
    match first {
        Some(i) => v[i..].to_vec(),
        None => vec![0],
    }
}

/// Check that `v` (canonical, shorter, or zero-padded) fits in `bitwidth` bits and return it
/// left-padded to exactly `ceil(bitwidth / 8)` bytes.
pub fn to_width(v: &[u8], bitwidth: i32, what: &str) -> Result<Vec<u8>, String> {
    let n = nbytes(bitwidth);
    let c = canonical(v);
    let bits = if c == [0] {
        0
    } else {
        (c.len() - 1) * 8 + (8 - c[0].leading_zeros() as usize)
    };
    if v.is_empty() {
        return Err(format!("{what}: empty byte string"));
    }
    if bits > bitwidth.max(0) as usize {
        return Err(format!(
            "{what}: value 0x{} does not fit in {bitwidth} bits",
            hex(v)
        ));
    }
    let mut out = vec![0u8; n];
    let c = if c == [0] { Vec::new() } else { c };
    out[n - c.len()..].copy_from_slice(&c);
    Ok(out)
}

/// Lower-case hex of bytes (for messages).
pub fn hex(v: &[u8]) -> String {
    v.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p4c_id_vectors() {
        assert_eq!(p4c_id(0x02, "MyIngress.ipv4_lpm"), 37375156);
        assert_eq!(p4c_id(0x02, "ingress.smac"), 49600925);
        assert_eq!(p4c_id(0x01, "NoAction"), 21257015);
        assert_eq!(p4c_id(0x17, "L2_digest"), 386370872);
        assert_eq!(p4c_id(0x02, "t_redirect"), 42046103);
        assert_eq!(
            (0x02 << 24) | (jenkins_one_at_a_time("MyIngress.ipv4_lpm") & 0xffff),
            33574068
        );
    }

    #[test]
    fn byte_strings() {
        assert_eq!(to_width(&[0, 0, 1], 9, "x").unwrap(), vec![0, 1]);
        assert_eq!(to_width(&[1, 0xff], 9, "x").unwrap(), vec![1, 0xff]);
        assert!(to_width(&[2, 0], 9, "x").unwrap_err().contains("9 bits"));
        assert_eq!(to_width(&[0], 48, "x").unwrap(), vec![0; 6]);
        assert!(to_width(&[], 8, "x").is_err());
        assert_eq!(canonical(&[0, 0, 5, 0]), vec![5, 0]);
        assert_eq!(canonical(&[0, 0]), vec![0]);
    }
}
