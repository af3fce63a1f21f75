//! Translation of P4Runtime entities (table entries, action profiles, counters, meters,
//! registers, value sets, PRE entries, digests, controller packet headers) to and from
//! `tern_runtime::Runtime` calls, by P4Info name and declaration order.

#![allow(clippy::result_large_err)]

use crate::p4info::{canonical, hex, nbytes, to_width};
use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;
use crate::server::Inner;
use crate::target::DeviceState;
use tern_model::{MatchKind, Program};
use tern_runtime::{
    ActionEntry, CounterValue, MatchParam, MeterRate, MirroringSession, RuntimeError,
};
use tonic::Status;

type R<T> = Result<T, Status>;

fn inv(msg: impl Into<String>) -> Status {
    Status::invalid_argument(msg.into())
}

fn pre_name(p: &Option<cfg::Preamble>) -> &str {
    p.as_ref().map(|p| p.name.as_str()).unwrap_or("")
}

fn pre_id(p: &Option<cfg::Preamble>) -> u32 {
    p.as_ref().map(|p| p.id).unwrap_or(0)
}

/// Map a BMv2 runtime error to a gRPC status.
fn rt(e: RuntimeError, what: &str) -> Status {
    let s = e.to_string();
    let code = if s.contains("DUPLICATE") || s.contains("ALREADY") {
        tonic::Code::AlreadyExists
    } else if s.contains("FULL") {
        tonic::Code::ResourceExhausted
    } else if s.contains("INVALID_HANDLE")
        || s.contains("EXPIRED_HANDLE")
        || s.contains("NOT_FOUND")
        || s.contains("INVALID_MBR_HANDLE")
        || s.contains("INVALID_GRP_HANDLE")
    {
        tonic::Code::NotFound
    } else if s.contains("IS_CONST") || s.contains("IMMUTABLE") {
        tonic::Code::PermissionDenied
    } else {
        tonic::Code::InvalidArgument
    };
    Status::new(code, format!("{what}: {s}"))
}

/// Check that every P4Info table, action, counter, meter and register exists in the JSON.
pub fn check_p4info_matches(info: &cfg::P4Info, prog: &Program) -> Result<(), String> {
    let tables: Vec<&tern_model::Table> = prog.pipelines.iter().flat_map(|p| &p.tables).collect();
    for t in &info.tables {
        let name = pre_name(&t.preamble);
        let Some(jt) = tables.iter().find(|x| x.name == name) else {
            return Err(format!("P4Info table '{name}' is not in the BMv2 JSON"));
        };
        if jt.key.len() != t.match_fields.len() {
            return Err(format!(
                "P4Info table '{name}' has {} match fields, the BMv2 JSON has {}",
                t.match_fields.len(),
                jt.key.len()
            ));
        }
    }
    for a in &info.actions {
        let name = pre_name(&a.preamble);
        let Some(ja) = prog.actions.iter().find(|x| x.name == name) else {
            return Err(format!("P4Info action '{name}' is not in the BMv2 JSON"));
        };
        if ja.runtime_data.len() != a.params.len() {
            return Err(format!(
                "P4Info action '{name}' has {} parameters, the BMv2 JSON has {}",
                a.params.len(),
                ja.runtime_data.len()
            ));
        }
    }
    for c in &info.counters {
        let name = pre_name(&c.preamble);
        if !prog.counter_arrays.iter().any(|x| x.name == name) {
            return Err(format!("P4Info counter '{name}' is not in the BMv2 JSON"));
        }
    }
    for r in &info.registers {
        let name = pre_name(&r.preamble);
        if !prog.register_arrays.iter().any(|x| x.name == name) {
            return Err(format!("P4Info register '{name}' is not in the BMv2 JSON"));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- controller headers

fn cpm<'a>(info: &'a cfg::P4Info, name: &str) -> Option<&'a cfg::ControllerPacketMetadata> {
    info.controller_packet_metadata
        .iter()
        .find(|c| pre_name(&c.preamble) == name)
}

fn get_bits(data: &[u8], bit: usize, width: usize) -> Vec<u8> {
    let n = width.div_ceil(8);
    let mut out = vec![0u8; n];
    for i in 0..width {
        let src = bit + i;
        let b = (data.get(src / 8).copied().unwrap_or(0) >> (7 - src % 8)) & 1;
        let dst = n * 8 - width + i;
        out[dst / 8] |= b << (7 - dst % 8);
    }
    out
}

fn put_bits(out: &mut [u8], bit: usize, width: usize, value: &[u8]) {
    let n = value.len();
    for i in 0..width {
        let src = n * 8 - width + i;
        let b = (value[src / 8] >> (7 - src % 8)) & 1;
        let dst = bit + i;
        out[dst / 8] |= b << (7 - dst % 8);
    }
}

/// Split a frame sent to the CPU port into the `packet_in` header metadata and the payload.
pub fn packet_in(info: &cfg::P4Info, data: &[u8]) -> p4::PacketIn {
    let Some(h) = cpm(info, "packet_in") else {
        return p4::PacketIn {
            payload: data.to_vec(),
            metadata: vec![],
        };
    };
    let total: usize = h.metadata.iter().map(|m| m.bitwidth.max(0) as usize).sum();
    let hdr = total.div_ceil(8);
    let mut bit = 0;
    let metadata = h
        .metadata
        .iter()
        .map(|m| {
            let w = m.bitwidth.max(0) as usize;
            let v = get_bits(data, bit, w);
            bit += w;
            p4::PacketMetadata {
                metadata_id: m.id,
                value: canonical(&v),
            }
        })
        .collect();
    p4::PacketIn {
        payload: data.get(hdr..).unwrap_or(&[]).to_vec(),
        metadata,
    }
}

/// Build the frame injected on the CPU port for a packet-out: the bit-packed `packet_out`
/// header (metadata in P4Info order, missing ones zero) followed by the payload.
pub fn packet_out_frame(info: &cfg::P4Info, po: &p4::PacketOut) -> Result<Vec<u8>, String> {
    let Some(h) = cpm(info, "packet_out") else {
        return Ok(po.payload.clone());
    };
    for m in &po.metadata {
        if !h.metadata.iter().any(|x| x.id == m.metadata_id) {
            return Err(format!(
                "packet_out metadata id {} is not in the P4Info",
                m.metadata_id
            ));
        }
    }
    let total: usize = h.metadata.iter().map(|m| m.bitwidth.max(0) as usize).sum();
    let mut out = vec![0u8; total.div_ceil(8)];
    let mut bit = 0;
    for m in &h.metadata {
        let w = m.bitwidth.max(0) as usize;
        if let Some(v) = po.metadata.iter().find(|x| x.metadata_id == m.id) {
            let v = to_width(
                &v.value,
                m.bitwidth,
                &format!("packet_out metadata '{}'", m.name),
            )?;
            put_bits(&mut out, bit, w, &v);
        }
        bit += w;
    }
    out.extend_from_slice(&po.payload);
    Ok(out)
}

/// One digest sample as P4Data: a struct of canonical bitstrings in field order.
pub fn digest_data(_info: &cfg::Digest, fields: &[Vec<u8>]) -> p4::P4Data {
    p4::P4Data {
        data: Some(p4::p4_data::Data::Struct(p4::P4StructLike {
            members: fields
                .iter()
                .map(|f| p4::P4Data {
                    data: Some(p4::p4_data::Data::Bitstring(canonical(f))),
                })
                .collect(),
        })),
    }
}

// ---------------------------------------------------------------- lookups

fn table_by_id(info: &cfg::P4Info, id: u32) -> R<&cfg::Table> {
    info.tables
        .iter()
        .find(|t| pre_id(&t.preamble) == id)
        .ok_or_else(|| inv(format!("Unknown table id {id}")))
}

fn action_by_id(info: &cfg::P4Info, id: u32) -> R<&cfg::Action> {
    info.actions
        .iter()
        .find(|a| pre_id(&a.preamble) == id)
        .ok_or_else(|| inv(format!("Unknown action id {id}")))
}

fn action_by_name<'a>(info: &'a cfg::P4Info, name: &str) -> Option<&'a cfg::Action> {
    info.actions.iter().find(|a| pre_name(&a.preamble) == name)
}

fn json_table<'a>(prog: &'a Program, name: &str) -> Option<&'a tern_model::Table> {
    prog.pipelines
        .iter()
        .flat_map(|p| &p.tables)
        .find(|t| t.name == name)
}

fn match_type(f: &cfg::MatchField) -> Option<cfg::match_field::MatchType> {
    match f.r#match {
        Some(cfg::match_field::Match::MatchType(t)) => {
            cfg::match_field::MatchType::try_from(t).ok()
        }
        _ => None,
    }
}

fn ones(bitwidth: i32) -> Vec<u8> {
    let n = nbytes(bitwidth);
    let mut v = vec![0xffu8; n];
    if n > 0 {
        let extra = n * 8 - bitwidth as usize;
        v[0] = 0xff >> extra;
    }
    v
}

fn needs_priority(t: &cfg::Table) -> bool {
    use cfg::match_field::MatchType as M;
    t.match_fields
        .iter()
        .any(|f| matches!(match_type(f), Some(M::Ternary | M::Range | M::Optional)))
}

/// BMv2 (smaller wins) priority of a P4Runtime (larger wins) priority.
fn bm_priority(p: i32) -> i32 {
    i32::MAX - p
}

/// Build the BMv2 key of a table entry, in P4Info (= JSON key) order.
fn build_key(
    t: &cfg::Table,
    jt: &tern_model::Table,
    matches: &[p4::FieldMatch],
) -> R<Vec<MatchParam>> {
    use cfg::match_field::MatchType as M;
    use p4::field_match::FieldMatchType as F;
    let tname = pre_name(&t.preamble);
    for (i, m) in matches.iter().enumerate() {
        if !t.match_fields.iter().any(|f| f.id == m.field_id) {
            return Err(inv(format!(
                "Unknown match field id {} in table '{tname}'",
                m.field_id
            )));
        }
        if matches[..i].iter().any(|x| x.field_id == m.field_id) {
            return Err(inv(format!(
                "Duplicate match field id {} in table '{tname}'",
                m.field_id
            )));
        }
    }
    let mut key = Vec::new();
    for (i, f) in t.match_fields.iter().enumerate() {
        let what = format!("match field '{}' of table '{tname}'", f.name);
        let w = f.bitwidth;
        let json_kind = jt
            .key
            .get(i)
            .map(|k| k.match_kind)
            .unwrap_or(MatchKind::Exact);
        let given = matches.iter().find(|m| m.field_id == f.id);
        let kind = match_type(f).ok_or_else(|| inv(format!("{what}: unsupported match type")))?;
        let p = match (kind, given.and_then(|g| g.field_match_type.as_ref())) {
            (M::Exact, Some(F::Exact(e))) => {
                let v = to_width(&e.value, w, &what).map_err(inv)?;
                if json_kind == MatchKind::Ternary {
                    MatchParam::Ternary {
                        key: v,
                        mask: ones(w),
                    }
                } else {
                    MatchParam::Exact(v)
                }
            }
            (M::Exact, None) => return Err(inv(format!("{what}: exact match is required"))),
            (M::Lpm, Some(F::Lpm(l))) => {
                if l.prefix_len < 0 || l.prefix_len > w {
                    return Err(inv(format!(
                        "{what}: prefix length {} out of range",
                        l.prefix_len
                    )));
                }
                let v = to_width(&l.value, w, &what).map_err(inv)?;
                let mask = prefix_mask(w, l.prefix_len);
                if v.iter().zip(&mask).any(|(a, m)| a & !m != 0) {
                    return Err(inv(format!(
                        "{what}: LPM value has bits set beyond the prefix length"
                    )));
                }
                MatchParam::Lpm {
                    key: v,
                    prefix_len: l.prefix_len as u32,
                }
            }
            (M::Lpm, None) => MatchParam::Lpm {
                key: vec![0; nbytes(w)],
                prefix_len: 0,
            },
            (M::Ternary, Some(F::Ternary(t))) => {
                let v = to_width(&t.value, w, &what).map_err(inv)?;
                let m = to_width(&t.mask, w, &what).map_err(inv)?;
                if v.iter().zip(&m).any(|(a, m)| a & !m != 0) {
                    return Err(inv(format!(
                        "{what}: ternary value has bits set outside the mask"
                    )));
                }
                MatchParam::Ternary { key: v, mask: m }
            }
            (M::Optional, Some(F::Optional(o))) => {
                let v = to_width(&o.value, w, &what).map_err(inv)?;
                MatchParam::Ternary {
                    key: v,
                    mask: ones(w),
                }
            }
            (M::Ternary | M::Optional, None) => MatchParam::Ternary {
                key: vec![0; nbytes(w)],
                mask: vec![0; nbytes(w)],
            },
            (M::Range, Some(F::Range(r))) => {
                let lo = to_width(&r.low, w, &what).map_err(inv)?;
                let hi = to_width(&r.high, w, &what).map_err(inv)?;
                if lo > hi {
                    return Err(inv(format!("{what}: range low is above high")));
                }
                MatchParam::Range { start: lo, end: hi }
            }
            (M::Range, None) => MatchParam::Range {
                start: vec![0; nbytes(w)],
                end: ones(w),
            },
            (_, Some(_)) => {
                return Err(inv(format!(
                    "{what}: match kind does not match the P4Info ({kind:?})"
                )))
            }
            (M::Unspecified, None) => return Err(inv(format!("{what}: unsupported match type"))),
        };
        key.push(p);
    }
    Ok(key)
}

fn prefix_mask(w: i32, plen: i32) -> Vec<u8> {
    let n = nbytes(w);
    let mut m = vec![0u8; n];
    let lead = n * 8 - w as usize;
    for i in 0..plen as usize {
        let b = lead + i;
        m[b / 8] |= 1 << (7 - b % 8);
    }
    m
}

fn key_to_p4(t: &cfg::Table, key: &[MatchParam]) -> Vec<p4::FieldMatch> {
    use cfg::match_field::MatchType as M;
    use p4::field_match::FieldMatchType as F;
    let mut out = Vec::new();
    for (f, p) in t.match_fields.iter().zip(key) {
        let fm = match (match_type(f), p) {
            (Some(M::Exact), MatchParam::Exact(v)) => Some(F::Exact(p4::field_match::Exact {
                value: canonical(v),
            })),
            (Some(M::Exact), MatchParam::Ternary { key, .. }) => {
                Some(F::Exact(p4::field_match::Exact {
                    value: canonical(key),
                }))
            }
            (_, MatchParam::Lpm { key, prefix_len }) => (*prefix_len > 0).then(|| {
                F::Lpm(p4::field_match::Lpm {
                    value: canonical(key),
                    prefix_len: *prefix_len as i32,
                })
            }),
            (Some(M::Optional), MatchParam::Ternary { key, mask }) => {
                mask.iter().any(|b| *b != 0).then(|| {
                    F::Optional(p4::field_match::Optional {
                        value: canonical(key),
                    })
                })
            }
            (_, MatchParam::Ternary { key, mask }) => mask.iter().any(|b| *b != 0).then(|| {
                F::Ternary(p4::field_match::Ternary {
                    value: canonical(key),
                    mask: canonical(mask),
                })
            }),
            (_, MatchParam::Range { start, end }) => {
                (!(start.iter().all(|b| *b == 0) && *end == ones(f.bitwidth))).then(|| {
                    F::Range(p4::field_match::Range {
                        low: canonical(start),
                        high: canonical(end),
                    })
                })
            }
            (_, MatchParam::Exact(v)) => Some(F::Exact(p4::field_match::Exact {
                value: canonical(v),
            })),
            (_, MatchParam::Valid(b)) => Some(F::Exact(p4::field_match::Exact {
                value: vec![u8::from(*b)],
            })),
        };
        if let Some(fm) = fm {
            out.push(p4::FieldMatch {
                field_id: f.id,
                field_match_type: Some(fm),
            });
        }
    }
    out
}

/// Resolve a P4Runtime action to (BMv2 action name, data padded to widths).
fn action_data(
    info: &cfg::P4Info,
    a: &p4::Action,
    table: Option<&cfg::Table>,
) -> R<(String, Vec<Vec<u8>>)> {
    let act = action_by_id(info, a.action_id)?;
    let aname = pre_name(&act.preamble).to_string();
    if let Some(t) = table {
        if !t.action_refs.iter().any(|r| r.id == a.action_id) {
            return Err(inv(format!(
                "Action '{aname}' is not an action of table '{}'",
                pre_name(&t.preamble)
            )));
        }
    }
    for (i, p) in a.params.iter().enumerate() {
        if !act.params.iter().any(|x| x.id == p.param_id) {
            return Err(inv(format!(
                "Unknown param id {} of action '{aname}'",
                p.param_id
            )));
        }
        if a.params[..i].iter().any(|x| x.param_id == p.param_id) {
            return Err(inv(format!(
                "Duplicate param id {} of action '{aname}'",
                p.param_id
            )));
        }
    }
    let mut data = Vec::new();
    for p in &act.params {
        let what = format!("param '{}' of action '{aname}'", p.name);
        let v = a
            .params
            .iter()
            .find(|x| x.param_id == p.id)
            .ok_or_else(|| inv(format!("{what} is missing")))?;
        data.push(to_width(&v.value, p.bitwidth, &what).map_err(inv)?);
    }
    Ok((aname, data))
}

fn action_to_p4(info: &cfg::P4Info, name: &str, data: &[Vec<u8>]) -> Option<p4::Action> {
    let act = action_by_name(info, name)?;
    Some(p4::Action {
        action_id: pre_id(&act.preamble),
        params: act
            .params
            .iter()
            .zip(data)
            .map(|(p, v)| p4::action::Param {
                param_id: p.id,
                value: canonical(v),
            })
            .collect(),
    })
}

// ---------------------------------------------------------------- write

/// Apply one update of a Write batch.
pub fn apply_update(inner: &mut Inner, u: &p4::Update) -> R<()> {
    use p4::entity::Entity as E;
    use p4::update::Type as T;
    let ty = T::try_from(u.r#type).unwrap_or(T::Unspecified);
    if ty == T::Unspecified {
        return Err(inv("Update type is UNSPECIFIED"));
    }
    let Some(ent) = u.entity.as_ref().and_then(|e| e.entity.as_ref()) else {
        return Err(inv("Update has no entity"));
    };
    let info = inner
        .pipeline
        .as_ref()
        .map(|p| p.p4info.clone())
        .ok_or_else(|| {
            Status::failed_precondition("No forwarding pipeline config set for this device")
        })?;
    match ent {
        E::TableEntry(te) => write_table_entry(inner, &info, ty, te),
        E::ActionProfileMember(m) => write_member(inner, &info, ty, m),
        E::ActionProfileGroup(g) => write_group(inner, &info, ty, g),
        E::CounterEntry(c) => {
            if ty != T::Modify {
                return Err(inv("Counter entries can only be modified"));
            }
            let ctr = info
                .counters
                .iter()
                .find(|x| pre_id(&x.preamble) == c.counter_id)
                .ok_or_else(|| inv(format!("Unknown counter id {}", c.counter_id)))?;
            let name = pre_name(&ctr.preamble);
            let idx = c.index.as_ref().ok_or_else(|| {
                Status::unimplemented("Wildcard writes to indexed counters are not supported")
            })?;
            let d = c.data.unwrap_or_default();
            let v = CounterValue {
                bytes: d.byte_count as u64,
                packets: d.packet_count as u64,
            };
            let idx = index_u32(idx.index, ctr.size, name)?;
            inner
                .target
                .lock()
                .counter_write(name, idx, v)
                .map_err(|e| rt(e, name))
        }
        E::DirectCounterEntry(d) => {
            if ty != T::Modify {
                return Err(inv("Direct counter entries can only be modified"));
            }
            let te = d
                .table_entry
                .as_ref()
                .ok_or_else(|| inv("Direct counter entry without table_entry"))?;
            let (tname, h) = find_entry(inner, &info, te)?;
            let c = d.data.unwrap_or_default();
            inner
                .target
                .lock()
                .mt_write_counter(
                    &tname,
                    h,
                    CounterValue {
                        bytes: c.byte_count as u64,
                        packets: c.packet_count as u64,
                    },
                )
                .map_err(|e| rt(e, &tname))
        }
        E::MeterEntry(m) => {
            if ty != T::Modify {
                return Err(inv("Meter entries can only be modified"));
            }
            let mt = info
                .meters
                .iter()
                .find(|x| pre_id(&x.preamble) == m.meter_id)
                .ok_or_else(|| inv(format!("Unknown meter id {}", m.meter_id)))?;
            let name = pre_name(&mt.preamble);
            let idx = m.index.as_ref().ok_or_else(|| {
                Status::unimplemented("Wildcard writes to meters are not supported")
            })?;
            let idx = index_u32(idx.index, mt.size, name)?;
            let rates = meter_rates(m.config.as_ref())?;
            inner
                .target
                .lock()
                .meter_set_rates(name, idx, &rates)
                .map_err(|e| rt(e, name))
        }
        E::DirectMeterEntry(d) => {
            if ty != T::Modify {
                return Err(inv("Direct meter entries can only be modified"));
            }
            let te = d
                .table_entry
                .as_ref()
                .ok_or_else(|| inv("Direct meter entry without table_entry"))?;
            let (tname, h) = find_entry(inner, &info, te)?;
            let rates = meter_rates(d.config.as_ref())?;
            inner
                .target
                .lock()
                .mt_set_meter_rates(&tname, h, &rates)
                .map_err(|e| rt(e, &tname))
        }
        E::RegisterEntry(r) => {
            if ty != T::Modify {
                return Err(inv("Register entries can only be modified"));
            }
            let reg = info
                .registers
                .iter()
                .find(|x| pre_id(&x.preamble) == r.register_id)
                .ok_or_else(|| inv(format!("Unknown register id {}", r.register_id)))?;
            let name = pre_name(&reg.preamble);
            let v = match r.data.as_ref().and_then(|d| d.data.as_ref()) {
                Some(p4::p4_data::Data::Bitstring(b)) => b.clone(),
                _ => return Err(inv(format!("register '{name}': data must be a bitstring"))),
            };
            let bw = register_width(reg).min(64);
            let c = to_width(&v, bw, &format!("register '{name}'")).map_err(inv)?;
            let val = c.iter().fold(0u64, |a, b| (a << 8) | u64::from(*b));
            let mut sw = inner.target.lock();
            match &r.index {
                Some(i) => {
                    let idx = index_u32(i.index, i64::from(reg.size), name)?;
                    sw.register_write(name, idx, val).map_err(|e| rt(e, name))
                }
                None => {
                    for idx in 0..reg.size.max(0) as u32 {
                        sw.register_write(name, idx, val).map_err(|e| rt(e, name))?;
                    }
                    Ok(())
                }
            }
        }
        E::ValueSetEntry(v) => {
            if ty != T::Modify {
                return Err(inv("Value set entries can only be modified"));
            }
            let vs = info
                .value_sets
                .iter()
                .find(|x| pre_id(&x.preamble) == v.value_set_id)
                .ok_or_else(|| inv(format!("Unknown value set id {}", v.value_set_id)))?;
            let name = pre_name(&vs.preamble);
            if vs.r#match.len() != 1 {
                return Err(Status::unimplemented(format!(
                    "value set '{name}': only single-field value sets are supported"
                )));
            }
            let f = &vs.r#match[0];
            let mut vals = Vec::new();
            for m in &v.members {
                let [fm] = m.r#match.as_slice() else {
                    return Err(inv(format!(
                        "value set '{name}': each member needs one match"
                    )));
                };
                let val = match &fm.field_match_type {
                    Some(p4::field_match::FieldMatchType::Exact(e)) => &e.value,
                    _ => {
                        return Err(inv(format!(
                            "value set '{name}': members must be exact matches"
                        )))
                    }
                };
                vals.push(to_width(val, f.bitwidth, &format!("value set '{name}'")).map_err(inv)?);
            }
            let mut sw = inner.target.lock();
            sw.parse_vset_clear(name).map_err(|e| rt(e, name))?;
            for v in vals {
                sw.parse_vset_add(name, &v).map_err(|e| rt(e, name))?;
            }
            Ok(())
        }
        E::PacketReplicationEngineEntry(p) => match &p.r#type {
            Some(p4::packet_replication_engine_entry::Type::MulticastGroupEntry(g)) => {
                write_mc(inner, ty, g)
            }
            Some(p4::packet_replication_engine_entry::Type::CloneSessionEntry(c)) => {
                write_clone(inner, ty, c)
            }
            None => Err(inv("Empty packet replication engine entry")),
        },
        E::DigestEntry(d) => {
            let dg = info
                .digests
                .iter()
                .find(|x| pre_id(&x.preamble) == d.digest_id)
                .ok_or_else(|| inv(format!("Unknown digest id {}", d.digest_id)))?;
            let name = pre_name(&dg.preamble).to_string();
            let exists = inner.pre.digests.contains_key(&d.digest_id);
            match ty {
                T::Insert if exists => Err(Status::already_exists(format!(
                    "digest '{name}' is already configured"
                ))),
                T::Modify | T::Delete if !exists => Err(Status::not_found(format!(
                    "digest '{name}' is not configured"
                ))),
                T::Delete => {
                    inner.pre.digests.remove(&d.digest_id);
                    Ok(())
                }
                _ => {
                    let c = d
                        .config
                        .ok_or_else(|| inv(format!("digest '{name}': missing config")))?;
                    inner.pre.digests.insert(d.digest_id, c);
                    Ok(())
                }
            }
        }
        E::ExternEntry(_) => Err(Status::unimplemented("Extern entries are not supported")),
    }
}

fn index_u32(i: i64, size: i64, name: &str) -> R<u32> {
    if i < 0 || (size > 0 && i >= size) {
        return Err(Status::out_of_range(format!(
            "index {i} out of range for '{name}' (size {size})"
        )));
    }
    u32::try_from(i)
        .map_err(|_| Status::out_of_range(format!("index {i} out of range for '{name}'")))
}

fn meter_rates(c: Option<&p4::MeterConfig>) -> R<Vec<MeterRate>> {
    let c = c.ok_or_else(|| inv("Missing meter config"))?;
    if c.cir < 0 || c.pir < 0 || c.cburst < 0 || c.pburst < 0 {
        return Err(inv("Meter rates and bursts must not be negative"));
    }
    if c.cir > c.pir {
        return Err(inv("Meter CIR must not exceed PIR"));
    }
    Ok(vec![
        MeterRate {
            units_per_micros: c.cir as f64 / 1e6,
            burst_size: c.cburst.min(u32::MAX as i64) as u32,
        },
        MeterRate {
            units_per_micros: c.pir as f64 / 1e6,
            burst_size: c.pburst.min(u32::MAX as i64) as u32,
        },
    ])
}

fn rates_to_config(r: &[MeterRate]) -> Option<p4::MeterConfig> {
    let [c, p] = r else { return None };
    Some(p4::MeterConfig {
        cir: (c.units_per_micros * 1e6).round() as i64,
        cburst: i64::from(c.burst_size),
        pir: (p.units_per_micros * 1e6).round() as i64,
        pburst: i64::from(p.burst_size),
        eburst: 0,
    })
}

/// Find the BMv2 handle of the entry a P4Runtime table entry (key + priority) names.
fn find_entry(inner: &Inner, info: &cfg::P4Info, te: &p4::TableEntry) -> R<(String, u32)> {
    let t = table_by_id(info, te.table_id)?;
    let tname = pre_name(&t.preamble).to_string();
    let sw = inner.target.lock();
    let jt = json_table(sw.program(), &tname)
        .ok_or_else(|| inv(format!("table '{tname}' is not in the program")))?;
    let key = build_key(t, jt, &te.r#match)?;
    let prio = needs_priority(t).then(|| bm_priority(te.priority));
    let e = sw
        .mt_get_entry_from_key(&tname, &key, prio)
        .map_err(|_| Status::not_found(format!("No such entry in table '{tname}'")))?;
    Ok((tname, e.handle))
}

fn write_table_entry(
    inner: &mut Inner,
    info: &cfg::P4Info,
    ty: p4::update::Type,
    te: &p4::TableEntry,
) -> R<()> {
    use p4::table_action::Type as A;
    use p4::update::Type as T;
    let t = table_by_id(info, te.table_id)?;
    let tname = pre_name(&t.preamble).to_string();
    if te.is_default_action {
        if ty != T::Modify {
            return Err(inv(format!(
                "table '{tname}': the default entry can only be modified"
            )));
        }
        if !te.r#match.is_empty() || te.priority != 0 {
            return Err(inv(format!(
                "table '{tname}': a default entry has no match and no priority"
            )));
        }
        let mut sw = inner.target.lock();
        return match te.action.as_ref().and_then(|a| a.r#type.as_ref()) {
            None => sw.mt_reset_default_entry(&tname).map_err(|e| rt(e, &tname)),
            Some(A::Action(a)) => {
                let (aname, data) = action_data(info, a, Some(t))?;
                sw.mt_set_default_action(&tname, &aname, &data)
                    .map_err(|e| rt(e, &tname))
            }
            Some(A::ActionProfileMemberId(m)) => {
                let prof = profile_of(info, t)?;
                let h = *inner
                    .pre
                    .members
                    .get(&(prof.0, *m))
                    .ok_or_else(|| Status::not_found(format!("No member {m}")))?;
                sw.mt_indirect_set_default_member(&tname, h)
                    .map_err(|e| rt(e, &tname))
            }
            Some(A::ActionProfileGroupId(g)) => {
                let prof = profile_of(info, t)?;
                let h = inner
                    .pre
                    .groups_ap
                    .get(&(prof.0, *g))
                    .ok_or_else(|| Status::not_found(format!("No group {g}")))?
                    .0;
                sw.mt_indirect_ws_set_default_group(&tname, h)
                    .map_err(|e| rt(e, &tname))
            }
            Some(A::ActionProfileActionSet(_)) => Err(Status::unimplemented(
                "One-shot action sets are not supported",
            )),
        };
    }
    let np = needs_priority(t);
    if np && te.priority <= 0 {
        return Err(inv(format!(
            "table '{tname}': entries need a priority > 0 (ternary, range or optional match)"
        )));
    }
    if !np && te.priority != 0 {
        return Err(inv(format!("table '{tname}': priority must be 0 for a table without ternary, range or optional match")));
    }
    if t.is_const_table {
        return Err(Status::permission_denied(format!(
            "table '{tname}' is const"
        )));
    }
    let prio = np.then(|| bm_priority(te.priority));
    if ty == T::Delete {
        let (_, h) = find_entry(inner, info, te)?;
        let mut sw = inner.target.lock();
        let e = sw.mt_get_entry(&tname, h).map_err(|e| rt(e, &tname))?;
        match e.action {
            ActionEntry::Member(_) => sw.mt_indirect_delete_entry(&tname, h),
            ActionEntry::Group(_) => sw.mt_indirect_delete_entry(&tname, h),
            _ => sw.mt_delete_entry(&tname, h),
        }
        .map_err(|e| rt(e, &tname))?;
        if let Some(old) = inner.pre.oneshots.remove(&(tname.clone(), h)) {
            oneshot_remove(&mut *sw, info, t, &old);
        }
        return Ok(());
    }
    let action = te
        .action
        .as_ref()
        .and_then(|a| a.r#type.as_ref())
        .ok_or_else(|| inv(format!("table '{tname}': entry without an action")))?;
    let handle = if ty == T::Insert {
        let sw_prog_key = {
            let sw = inner.target.lock();
            let jt = json_table(sw.program(), &tname)
                .ok_or_else(|| inv(format!("table '{tname}' is not in the program")))?;
            build_key(t, jt, &te.r#match)?
        };
        let mut sw = inner.target.lock();
        if sw.mt_get_entry_from_key(&tname, &sw_prog_key, prio).is_ok() {
            return Err(Status::already_exists(format!(
                "Entry already exists in table '{tname}'"
            )));
        }
        match action {
            A::Action(a) => {
                let (aname, data) = action_data(info, a, Some(t))?;
                sw.mt_add_entry(&tname, &sw_prog_key, &aname, &data, prio)
            }
            A::ActionProfileMemberId(m) => {
                let prof = profile_of(info, t)?;
                let h = *inner.pre.members.get(&(prof.0, *m)).ok_or_else(|| {
                    Status::not_found(format!("No member {m} in action profile '{}'", prof.1))
                })?;
                sw.mt_indirect_add_entry(&tname, &sw_prog_key, h, prio)
            }
            A::ActionProfileGroupId(g) => {
                let prof = profile_of(info, t)?;
                let h = inner
                    .pre
                    .groups_ap
                    .get(&(prof.0, *g))
                    .ok_or_else(|| {
                        Status::not_found(format!("No group {g} in action profile '{}'", prof.1))
                    })?
                    .0;
                sw.mt_indirect_ws_add_entry(&tname, &sw_prog_key, h, prio)
            }
            A::ActionProfileActionSet(set) => {
                let os = oneshot_install(&mut *sw, info, t, set)?;
                let r = match os.0 {
                    Some(g) => sw.mt_indirect_ws_add_entry(&tname, &sw_prog_key, g, prio),
                    None => sw.mt_indirect_add_entry(&tname, &sw_prog_key, os.1[0], prio),
                };
                match r {
                    Ok(h) => {
                        inner.pre.oneshots.insert((tname.clone(), h), os);
                        Ok(h)
                    }
                    Err(e) => {
                        oneshot_remove(&mut *sw, info, t, &os);
                        Err(e)
                    }
                }
            }
        }
        .map_err(|e| rt(e, &tname))?
    } else {
        let (_, h) = find_entry(inner, info, te)?;
        let mut sw = inner.target.lock();
        match action {
            A::Action(a) => {
                let (aname, data) = action_data(info, a, Some(t))?;
                sw.mt_modify_entry(&tname, h, &aname, &data)
            }
            A::ActionProfileMemberId(m) => {
                let prof = profile_of(info, t)?;
                let mh = *inner
                    .pre
                    .members
                    .get(&(prof.0, *m))
                    .ok_or_else(|| Status::not_found(format!("No member {m}")))?;
                sw.mt_indirect_modify_entry(&tname, h, mh)
            }
            A::ActionProfileGroupId(g) => {
                let prof = profile_of(info, t)?;
                let gh = inner
                    .pre
                    .groups_ap
                    .get(&(prof.0, *g))
                    .ok_or_else(|| Status::not_found(format!("No group {g}")))?
                    .0;
                sw.mt_indirect_ws_modify_entry(&tname, h, gh)
            }
            A::ActionProfileActionSet(set) => {
                let os = oneshot_install(&mut *sw, info, t, set)?;
                let r = match os.0 {
                    Some(g) => sw.mt_indirect_ws_modify_entry(&tname, h, g),
                    None => sw.mt_indirect_modify_entry(&tname, h, os.1[0]),
                };
                if r.is_err() {
                    oneshot_remove(&mut *sw, info, t, &os);
                } else if let Some(old) = inner.pre.oneshots.insert((tname.clone(), h), os) {
                    oneshot_remove(&mut *sw, info, t, &old);
                }
                r
            }
        }
        .map_err(|e| rt(e, &tname))?;
        if !matches!(action, A::ActionProfileActionSet(_)) {
            if let Some(old) = inner.pre.oneshots.remove(&(tname.clone(), h)) {
                oneshot_remove(&mut *sw, info, t, &old);
            }
        }
        h
    };
    let mut sw = inner.target.lock();
    if te.idle_timeout_ns > 0 {
        let ms = (te.idle_timeout_ns / 1_000_000).clamp(1, u32::MAX as i64) as u32;
        sw.mt_set_entry_ttl(&tname, handle, ms)
            .map_err(|e| rt(e, &tname))?;
    }
    if let Some(c) = te.counter_data {
        let _ = sw.mt_write_counter(
            &tname,
            handle,
            CounterValue {
                bytes: c.byte_count as u64,
                packets: c.packet_count as u64,
            },
        );
    }
    if let Some(m) = te.meter_config.as_ref() {
        let rates = meter_rates(Some(m))?;
        sw.mt_set_meter_rates(&tname, handle, &rates)
            .map_err(|e| rt(e, &tname))?;
    }
    Ok(())
}

fn profile_of<'a>(info: &'a cfg::P4Info, t: &cfg::Table) -> R<(u32, &'a str)> {
    info.action_profiles
        .iter()
        .find(|p| pre_id(&p.preamble) == t.implementation_id)
        .map(|p| (pre_id(&p.preamble), pre_name(&p.preamble)))
        .ok_or_else(|| {
            inv(format!(
                "table '{}' has no action profile",
                pre_name(&t.preamble)
            ))
        })
}

fn profile_by_id(info: &cfg::P4Info, id: u32) -> R<&cfg::ActionProfile> {
    info.action_profiles
        .iter()
        .find(|p| pre_id(&p.preamble) == id)
        .ok_or_else(|| inv(format!("Unknown action profile id {id}")))
}

fn write_member(
    inner: &mut Inner,
    info: &cfg::P4Info,
    ty: p4::update::Type,
    m: &p4::ActionProfileMember,
) -> R<()> {
    use p4::update::Type as T;
    let prof = profile_by_id(info, m.action_profile_id)?;
    let pname = pre_name(&prof.preamble).to_string();
    let key = (m.action_profile_id, m.member_id);
    let existing = inner.pre.members.get(&key).copied();
    let mut sw = inner.target.lock();
    match (ty, existing) {
        (T::Insert, Some(_)) => Err(Status::already_exists(format!(
            "member {} already exists in '{pname}'",
            m.member_id
        ))),
        (T::Modify | T::Delete, None) => Err(Status::not_found(format!(
            "No member {} in '{pname}'",
            m.member_id
        ))),
        (T::Delete, Some(h)) => {
            sw.act_prof_delete_member(&pname, h)
                .map_err(|e| rt(e, &pname))?;
            inner.pre.members.remove(&key);
            Ok(())
        }
        (_, existing) => {
            let a = m
                .action
                .as_ref()
                .ok_or_else(|| inv("Member without an action"))?;
            let (aname, data) = action_data(info, a, None)?;
            match existing {
                Some(h) => sw
                    .act_prof_modify_member(&pname, h, &aname, &data)
                    .map_err(|e| rt(e, &pname)),
                None => {
                    let h = sw
                        .act_prof_add_member(&pname, &aname, &data)
                        .map_err(|e| rt(e, &pname))?;
                    inner.pre.members.insert(key, h);
                    Ok(())
                }
            }
        }
    }
}

fn write_group(
    inner: &mut Inner,
    info: &cfg::P4Info,
    ty: p4::update::Type,
    g: &p4::ActionProfileGroup,
) -> R<()> {
    use p4::update::Type as T;
    let prof = profile_by_id(info, g.action_profile_id)?;
    let pname = pre_name(&prof.preamble).to_string();
    let key = (g.action_profile_id, g.group_id);
    let existing = inner.pre.groups_ap.get(&key).cloned();
    let mut wanted = Vec::new();
    for m in &g.members {
        let h = *inner
            .pre
            .members
            .get(&(g.action_profile_id, m.member_id))
            .ok_or_else(|| Status::not_found(format!("No member {} in '{pname}'", m.member_id)))?;
        wanted.push((m.member_id, h));
    }
    let mut sw = inner.target.lock();
    match (ty, existing) {
        (T::Insert, Some(_)) => Err(Status::already_exists(format!(
            "group {} already exists in '{pname}'",
            g.group_id
        ))),
        (T::Modify | T::Delete, None) => Err(Status::not_found(format!(
            "No group {} in '{pname}'",
            g.group_id
        ))),
        (T::Delete, Some((h, _))) => {
            sw.act_prof_delete_group(&pname, h)
                .map_err(|e| rt(e, &pname))?;
            inner.pre.groups_ap.remove(&key);
            Ok(())
        }
        (_, existing) => {
            let gh = match &existing {
                Some((h, old)) => {
                    for m in old {
                        if let Some(mh) = inner.pre.members.get(&(g.action_profile_id, *m)) {
                            let _ = sw.act_prof_remove_member_from_group(&pname, *mh, *h);
                        }
                    }
                    *h
                }
                None => sw
                    .act_prof_create_group(&pname)
                    .map_err(|e| rt(e, &pname))?,
            };
            for (_, mh) in &wanted {
                sw.act_prof_add_member_to_group(&pname, *mh, gh)
                    .map_err(|e| rt(e, &pname))?;
            }
            inner
                .pre
                .groups_ap
                .insert(key, (gh, wanted.iter().map(|w| w.0).collect()));
            Ok(())
        }
    }
}

fn replica_port(r: &p4::Replica) -> R<u32> {
    match &r.port_kind {
        Some(p4::replica::PortKind::EgressPort(p)) => Ok(*p),
        Some(p4::replica::PortKind::Port(b)) => {
            let c = canonical(b);
            if c.len() > 4 {
                return Err(inv(format!("replica port 0x{} is too wide", hex(b))));
            }
            Ok(c.iter().fold(0u32, |a, b| (a << 8) | u32::from(*b)))
        }
        None => Ok(0),
    }
}

fn mc_install(sw: &mut dyn DeviceState, gid: u32, replicas: &[p4::Replica]) -> R<(u32, Vec<u32>)> {
    let mut by_instance: Vec<(u32, Vec<u32>)> = Vec::new();
    for r in replicas {
        let p = replica_port(r)?;
        match by_instance.iter_mut().find(|(i, _)| *i == r.instance) {
            Some((_, ports)) if ports.contains(&p) => {
                return Err(inv(format!(
                    "Duplicate replica (port {p}, instance {})",
                    r.instance
                )))
            }
            Some((_, ports)) => ports.push(p),
            None => by_instance.push((r.instance, vec![p])),
        }
    }
    let gh = sw
        .mc_mgrp_create(gid)
        .map_err(|e| rt(e, "multicast group"))?;
    let mut nodes = Vec::new();
    for (rid, ports) in by_instance {
        let n = sw
            .mc_node_create(rid, &ports, &[])
            .map_err(|e| rt(e, "multicast node"))?;
        sw.mc_node_associate(gh, n)
            .map_err(|e| rt(e, "multicast node"))?;
        nodes.push(n);
    }
    Ok((gh, nodes))
}

fn mc_remove(sw: &mut dyn DeviceState, gh: u32, nodes: &[u32]) -> R<()> {
    for n in nodes {
        let _ = sw.mc_node_dissociate(gh, *n);
        sw.mc_node_destroy(*n)
            .map_err(|e| rt(e, "multicast node"))?;
    }
    sw.mc_mgrp_destroy(gh).map_err(|e| rt(e, "multicast group"))
}

fn write_mc(inner: &mut Inner, ty: p4::update::Type, g: &p4::MulticastGroupEntry) -> R<()> {
    use p4::update::Type as T;
    let gid = g.multicast_group_id;
    if gid == 0 {
        return Err(inv("multicast_group_id 0 is reserved"));
    }
    let existing = inner.pre.groups.get(&gid).cloned();
    let mut sw = inner.target.lock();
    match (ty, existing) {
        (T::Insert, Some(_)) => Err(Status::already_exists(format!(
            "Multicast group {gid} already exists"
        ))),
        (T::Modify | T::Delete, None) => Err(Status::not_found(format!(
            "Multicast group {gid} does not exist"
        ))),
        (T::Delete, Some((gh, nodes, _))) => {
            mc_remove(&mut *sw, gh, &nodes)?;
            inner.pre.groups.remove(&gid);
            Ok(())
        }
        (_, existing) => {
            if let Some((gh, nodes, _)) = existing {
                mc_remove(&mut *sw, gh, &nodes)?;
                inner.pre.groups.remove(&gid);
            }
            let (gh, nodes) = mc_install(&mut *sw, gid, &g.replicas)?;
            inner
                .pre
                .groups
                .insert(gid, (gh, nodes, g.replicas.clone()));
            Ok(())
        }
    }
}

/// Multicast group ids used internally for clone sessions with several replicas.
const CLONE_MGID_BASE: u32 = 0x8000;

fn write_clone(inner: &mut Inner, ty: p4::update::Type, c: &p4::CloneSessionEntry) -> R<()> {
    use p4::update::Type as T;
    let sid = c.session_id;
    if sid == 0 || sid > 32767 {
        return Err(inv(format!(
            "clone session id {sid} out of range (1..32767)"
        )));
    }
    if c.packet_length_bytes != 0 {
        return Err(Status::unimplemented(
            "Clone session truncation (packet_length_bytes) is not supported",
        ));
    }
    let existing = inner.pre.clones.get(&sid).cloned();
    let internal_group =
        |pre: &crate::server::PreState| pre.groups.get(&(CLONE_MGID_BASE + sid)).cloned();
    match (ty, &existing) {
        (T::Insert, Some(_)) => {
            return Err(Status::already_exists(format!(
                "Clone session {sid} already exists"
            )))
        }
        (T::Modify | T::Delete, None) => {
            return Err(Status::not_found(format!(
                "Clone session {sid} does not exist"
            )))
        }
        _ => {}
    }
    let mut sw = inner.target.lock();
    if existing.is_some() {
        sw.mirroring_session_delete(sid)
            .map_err(|e| rt(e, "clone session"))?;
        if let Some((gh, nodes, _)) = internal_group(&inner.pre) {
            mc_remove(&mut *sw, gh, &nodes)?;
            inner.pre.groups.remove(&(CLONE_MGID_BASE + sid));
        }
        inner.pre.clones.remove(&sid);
    }
    if ty == T::Delete {
        return Ok(());
    }
    let session = match c.replicas.as_slice() {
        [] => MirroringSession::default(),
        [r] => MirroringSession {
            port: Some(replica_port(r)?),
            mgid: None,
        },
        many => {
            let (gh, nodes) = mc_install(&mut *sw, CLONE_MGID_BASE + sid, many)?;
            inner
                .pre
                .groups
                .insert(CLONE_MGID_BASE + sid, (gh, nodes, Vec::new()));
            MirroringSession {
                port: None,
                mgid: Some(CLONE_MGID_BASE + sid),
            }
        }
    };
    sw.mirroring_session_add(sid, session)
        .map_err(|e| rt(e, "clone session"))?;
    inner.pre.clones.insert(sid, (c.clone(), None));
    Ok(())
}

// ---------------------------------------------------------------- read

fn ent(e: p4::entity::Entity) -> p4::Entity {
    p4::Entity { entity: Some(e) }
}

/// Read the entities one filter selects and append them to `out`.
pub fn read_entity(inner: &Inner, e: &p4::Entity, out: &mut Vec<p4::Entity>) -> R<()> {
    use p4::entity::Entity as E;
    let info = &inner
        .pipeline
        .as_ref()
        .ok_or_else(|| {
            Status::failed_precondition("No forwarding pipeline config set for this device")
        })?
        .p4info;
    let Some(e) = &e.entity else {
        return Err(inv("Read filter with no entity"));
    };
    match e {
        E::TableEntry(f) => {
            for te in read_table(inner, info, f)? {
                out.push(ent(E::TableEntry(te)));
            }
        }
        E::DirectCounterEntry(d) => {
            let mut f = d.table_entry.clone().unwrap_or_default();
            f.counter_data = Some(p4::CounterData::default());
            for te in read_table(inner, info, &f)? {
                let data = te.counter_data;
                let mut te = te;
                te.counter_data = None;
                out.push(ent(E::DirectCounterEntry(p4::DirectCounterEntry {
                    table_entry: Some(te),
                    data,
                })));
            }
        }
        E::DirectMeterEntry(d) => {
            let mut f = d.table_entry.clone().unwrap_or_default();
            f.meter_config = Some(p4::MeterConfig::default());
            for te in read_table(inner, info, &f)? {
                let config = te.meter_config;
                let mut te = te;
                te.meter_config = None;
                out.push(ent(E::DirectMeterEntry(p4::DirectMeterEntry {
                    table_entry: Some(te),
                    config,
                    counter_data: None,
                })));
            }
        }
        E::CounterEntry(c) => {
            let sw = inner.target.lock();
            let ctrs: Vec<&cfg::Counter> = info
                .counters
                .iter()
                .filter(|x| c.counter_id == 0 || pre_id(&x.preamble) == c.counter_id)
                .collect();
            if ctrs.is_empty() && c.counter_id != 0 {
                return Err(inv(format!("Unknown counter id {}", c.counter_id)));
            }
            for ctr in ctrs {
                let name = pre_name(&ctr.preamble);
                let idxs: Vec<u32> = match &c.index {
                    Some(i) => vec![index_u32(i.index, ctr.size, name)?],
                    None => (0..ctr.size.max(0) as u32).collect(),
                };
                for idx in idxs {
                    let v = sw.counter_read(name, idx).map_err(|e| rt(e, name))?;
                    out.push(ent(E::CounterEntry(p4::CounterEntry {
                        counter_id: pre_id(&ctr.preamble),
                        index: Some(p4::Index {
                            index: i64::from(idx),
                        }),
                        data: Some(p4::CounterData {
                            byte_count: v.bytes as i64,
                            packet_count: v.packets as i64,
                        }),
                    })));
                }
            }
        }
        E::MeterEntry(m) => {
            let sw = inner.target.lock();
            let ms: Vec<&cfg::Meter> = info
                .meters
                .iter()
                .filter(|x| m.meter_id == 0 || pre_id(&x.preamble) == m.meter_id)
                .collect();
            if ms.is_empty() && m.meter_id != 0 {
                return Err(inv(format!("Unknown meter id {}", m.meter_id)));
            }
            for mt in ms {
                let name = pre_name(&mt.preamble);
                let idxs: Vec<u32> = match &m.index {
                    Some(i) => vec![index_u32(i.index, mt.size, name)?],
                    None => (0..mt.size.max(0) as u32).collect(),
                };
                for idx in idxs {
                    let r = sw.meter_get_rates(name, idx).map_err(|e| rt(e, name))?;
                    out.push(ent(E::MeterEntry(p4::MeterEntry {
                        meter_id: pre_id(&mt.preamble),
                        index: Some(p4::Index {
                            index: i64::from(idx),
                        }),
                        config: rates_to_config(&r),
                        counter_data: None,
                    })));
                }
            }
        }
        E::RegisterEntry(r) => {
            let sw = inner.target.lock();
            let regs: Vec<&cfg::Register> = info
                .registers
                .iter()
                .filter(|x| r.register_id == 0 || pre_id(&x.preamble) == r.register_id)
                .collect();
            if regs.is_empty() && r.register_id != 0 {
                return Err(inv(format!("Unknown register id {}", r.register_id)));
            }
            for reg in regs {
                let name = pre_name(&reg.preamble);
                let idxs: Vec<u32> = match &r.index {
                    Some(i) => vec![index_u32(i.index, i64::from(reg.size), name)?],
                    None => (0..reg.size.max(0) as u32).collect(),
                };
                for idx in idxs {
                    let v = sw.register_read(name, idx).map_err(|e| rt(e, name))?;
                    out.push(ent(E::RegisterEntry(p4::RegisterEntry {
                        register_id: pre_id(&reg.preamble),
                        index: Some(p4::Index {
                            index: i64::from(idx),
                        }),
                        data: Some(p4::P4Data {
                            data: Some(p4::p4_data::Data::Bitstring(canonical(&v.to_be_bytes()))),
                        }),
                    })));
                }
            }
        }
        E::ValueSetEntry(v) => {
            let sw = inner.target.lock();
            for vs in info
                .value_sets
                .iter()
                .filter(|x| v.value_set_id == 0 || pre_id(&x.preamble) == v.value_set_id)
            {
                let name = pre_name(&vs.preamble);
                let fid = vs.r#match.first().map(|f| f.id).unwrap_or(1);
                let vals = sw.parse_vset_get(name).map_err(|e| rt(e, name))?;
                out.push(ent(E::ValueSetEntry(p4::ValueSetEntry {
                    value_set_id: pre_id(&vs.preamble),
                    members: vals
                        .iter()
                        .map(|x| p4::ValueSetMember {
                            r#match: vec![p4::FieldMatch {
                                field_id: fid,
                                field_match_type: Some(p4::field_match::FieldMatchType::Exact(
                                    p4::field_match::Exact {
                                        value: canonical(x),
                                    },
                                )),
                            }],
                        })
                        .collect(),
                })));
            }
        }
        E::ActionProfileMember(m) => {
            let sw = inner.target.lock();
            let mut keys: Vec<&(u32, u32)> = inner
                .pre
                .members
                .keys()
                .filter(|(p, id)| {
                    (m.action_profile_id == 0 || *p == m.action_profile_id)
                        && (m.member_id == 0 || *id == m.member_id)
                })
                .collect();
            keys.sort();
            for k in keys {
                let prof = profile_by_id(info, k.0)?;
                let pname = pre_name(&prof.preamble);
                let pm = sw
                    .act_prof_get_member(pname, inner.pre.members[k])
                    .map_err(|e| rt(e, pname))?;
                out.push(ent(E::ActionProfileMember(p4::ActionProfileMember {
                    action_profile_id: k.0,
                    member_id: k.1,
                    action: action_to_p4(info, &pm.action, &pm.data),
                })));
            }
        }
        E::ActionProfileGroup(g) => {
            let mut keys: Vec<&(u32, u32)> = inner
                .pre
                .groups_ap
                .keys()
                .filter(|(p, id)| {
                    (g.action_profile_id == 0 || *p == g.action_profile_id)
                        && (g.group_id == 0 || *id == g.group_id)
                })
                .collect();
            keys.sort();
            for k in keys {
                let (_, members) = &inner.pre.groups_ap[k];
                out.push(ent(E::ActionProfileGroup(p4::ActionProfileGroup {
                    action_profile_id: k.0,
                    group_id: k.1,
                    members: members
                        .iter()
                        .map(|m| p4::action_profile_group::Member {
                            member_id: *m,
                            weight: 1,
                            watch_kind: None,
                        })
                        .collect(),
                    max_size: 0,
                })));
            }
        }
        E::PacketReplicationEngineEntry(p) => {
            use p4::packet_replication_engine_entry::Type as P;
            match &p.r#type {
                Some(P::MulticastGroupEntry(g)) => {
                    let mut ids: Vec<&u32> = inner
                        .pre
                        .groups
                        .keys()
                        .filter(|id| {
                            (g.multicast_group_id == 0 && **id < CLONE_MGID_BASE)
                                || **id == g.multicast_group_id
                        })
                        .collect();
                    ids.sort();
                    for id in ids {
                        out.push(ent(E::PacketReplicationEngineEntry(
                            p4::PacketReplicationEngineEntry {
                                r#type: Some(P::MulticastGroupEntry(p4::MulticastGroupEntry {
                                    multicast_group_id: *id,
                                    replicas: inner.pre.groups[id].2.clone(),
                                    metadata: vec![],
                                })),
                            },
                        )));
                    }
                }
                Some(P::CloneSessionEntry(c)) => {
                    let mut ids: Vec<&u32> = inner
                        .pre
                        .clones
                        .keys()
                        .filter(|id| c.session_id == 0 || **id == c.session_id)
                        .collect();
                    ids.sort();
                    for id in ids {
                        out.push(ent(E::PacketReplicationEngineEntry(
                            p4::PacketReplicationEngineEntry {
                                r#type: Some(P::CloneSessionEntry(inner.pre.clones[id].0.clone())),
                            },
                        )));
                    }
                }
                None => return Err(inv("Empty packet replication engine entry filter")),
            }
        }
        E::DigestEntry(d) => {
            let mut ids: Vec<&u32> = inner
                .pre
                .digests
                .keys()
                .filter(|id| d.digest_id == 0 || **id == d.digest_id)
                .collect();
            ids.sort();
            for id in ids {
                out.push(ent(E::DigestEntry(p4::DigestEntry {
                    digest_id: *id,
                    config: Some(inner.pre.digests[id]),
                })));
            }
        }
        E::ExternEntry(_) => return Err(Status::unimplemented("Extern entries are not supported")),
    }
    Ok(())
}

fn read_table(inner: &Inner, info: &cfg::P4Info, f: &p4::TableEntry) -> R<Vec<p4::TableEntry>> {
    let tables: Vec<&cfg::Table> = if f.table_id == 0 {
        info.tables.iter().collect()
    } else {
        vec![table_by_id(info, f.table_id)?]
    };
    let sw = inner.target.lock();
    let mut out = Vec::new();
    for t in tables {
        let tname = pre_name(&t.preamble);
        let tid = pre_id(&t.preamble);
        if f.is_default_action {
            let a = sw.mt_get_default_entry(tname).map_err(|e| rt(e, tname))?;
            let action = table_action(inner, info, t, &a);
            out.push(p4::TableEntry {
                table_id: tid,
                action,
                is_default_action: true,
                ..Default::default()
            });
            continue;
        }
        let entries = if f.r#match.is_empty() {
            sw.mt_get_entries(tname).map_err(|e| rt(e, tname))?
        } else {
            let jt = json_table(sw.program(), tname)
                .ok_or_else(|| inv(format!("table '{tname}' is not in the program")))?;
            let key = build_key(t, jt, &f.r#match)?;
            let prio = needs_priority(t).then(|| bm_priority(f.priority));
            sw.mt_get_entry_from_key(tname, &key, prio)
                .map(|e| vec![e])
                .unwrap_or_default()
        };
        for e in entries {
            let mut te = entry_to_p4(inner, info, t, &e);
            if let Some(l) = e.life {
                if f.time_since_last_hit.is_some() {
                    te.time_since_last_hit = Some(p4::table_entry::IdleTimeout {
                        elapsed_ns: i64::from(l.time_since_hit_ms) * 1_000_000,
                    });
                }
            }
            if f.counter_data.is_some() {
                if let Ok(c) = sw.mt_read_counter(tname, e.handle) {
                    te.counter_data = Some(p4::CounterData {
                        byte_count: c.bytes as i64,
                        packet_count: c.packets as i64,
                    });
                }
            }
            if f.meter_config.is_some() {
                if let Ok(r) = sw.mt_get_meter_rates(tname, e.handle) {
                    te.meter_config = rates_to_config(&r);
                }
            }
            out.push(te);
        }
    }
    Ok(out)
}

fn table_action(
    inner: &Inner,
    info: &cfg::P4Info,
    t: &cfg::Table,
    a: &ActionEntry,
) -> Option<p4::TableAction> {
    use p4::table_action::Type as A;
    let ty = match a {
        ActionEntry::None => return None,
        ActionEntry::Action { name, data } => A::Action(action_to_p4(info, name, data)?),
        ActionEntry::Member(h) => {
            let prof = t.implementation_id;
            let (k, _) = inner
                .pre
                .members
                .iter()
                .find(|(k, v)| k.0 == prof && **v == *h)?;
            A::ActionProfileMemberId(k.1)
        }
        ActionEntry::Group(h) => {
            let prof = t.implementation_id;
            let (k, _) = inner
                .pre
                .groups_ap
                .iter()
                .find(|(k, v)| k.0 == prof && v.0 == *h)?;
            A::ActionProfileGroupId(k.1)
        }
    };
    Some(p4::TableAction { r#type: Some(ty) })
}

/// A BMv2 entry in P4Runtime terms (match, priority, action, idle timeout).
fn entry_to_p4(
    inner: &Inner,
    info: &cfg::P4Info,
    t: &cfg::Table,
    e: &tern_runtime::TableEntry,
) -> p4::TableEntry {
    p4::TableEntry {
        table_id: pre_id(&t.preamble),
        r#match: key_to_p4(t, &e.match_key),
        action: match inner
            .pre
            .oneshots
            .get(&(pre_name(&t.preamble).to_string(), e.handle))
        {
            Some(os) => Some(p4::TableAction {
                r#type: Some(p4::table_action::Type::ActionProfileActionSet(os.2.clone())),
            }),
            None => table_action(inner, info, t, &e.action),
        },
        priority: if e.priority >= 0 && needs_priority(t) {
            i32::MAX - e.priority
        } else {
            0
        },
        idle_timeout_ns: e
            .life
            .map(|l| i64::from(l.timeout_ms) * 1_000_000)
            .unwrap_or(0),
        ..Default::default()
    }
}

/// Entries whose idle timeout expired, as P4Runtime table entries, with their BMv2 identity.
pub fn aged_entries(inner: &Inner) -> Vec<((String, u32), p4::TableEntry)> {
    let Some(p) = &inner.pipeline else {
        return Vec::new();
    };
    let sw = inner.target.lock();
    let mut out = Vec::new();
    for (tname, h) in sw.aged_entries() {
        let Some(t) = p
            .p4info
            .tables
            .iter()
            .find(|t| pre_name(&t.preamble) == tname)
        else {
            continue;
        };
        if let Ok(e) = sw.mt_get_entry(&tname, h) {
            out.push(((tname, h), entry_to_p4(inner, &p.p4info, t, &e)));
        }
    }
    out
}

/// The bit width of a register's cells (from its P4Info type spec; 64 when not a bitstring).
fn register_width(r: &cfg::Register) -> i32 {
    use cfg::p4_bitstring_like_type_spec::TypeSpec as B;
    use cfg::p4_data_type_spec::TypeSpec as D;
    match r.type_spec.as_ref().and_then(|t| t.type_spec.as_ref()) {
        Some(D::Bitstring(b)) => match b.type_spec {
            Some(B::Bit(x)) => x.bitwidth,
            Some(B::Int(x)) => x.bitwidth,
            _ => 64,
        },
        _ => 64,
    }
}

/// A one-shot action set as installed: (selector group, members, the set as written).
pub type Oneshot = (Option<u32>, Vec<u32>, p4::ActionProfileActionSet);

/// Create the members (and, for a selector, the group) a one-shot action set needs.
fn oneshot_install(
    sw: &mut dyn DeviceState,
    info: &cfg::P4Info,
    t: &cfg::Table,
    set: &p4::ActionProfileActionSet,
) -> R<Oneshot> {
    let (prof_id, pname) = profile_of(info, t)?;
    let prof = profile_by_id(info, prof_id)?;
    if set.action_profile_actions.is_empty() {
        return Err(inv("One-shot action set is empty"));
    }
    if !prof.with_selector && set.action_profile_actions.len() != 1 {
        return Err(inv(format!(
            "action profile '{pname}' has no selector: a one-shot set needs exactly one action"
        )));
    }
    let mut resolved = Vec::new();
    for a in &set.action_profile_actions {
        let act = a
            .action
            .as_ref()
            .ok_or_else(|| inv("One-shot action without an action"))?;
        if a.weight < 0 {
            return Err(inv("One-shot action weight must not be negative"));
        }
        resolved.push(action_data(info, act, Some(t))?);
    }
    let mut members = Vec::new();
    let undo = |sw: &mut dyn DeviceState, members: &[u32]| {
        for m in members {
            let _ = sw.act_prof_delete_member(pname, *m);
        }
    };
    for (aname, data) in &resolved {
        match sw.act_prof_add_member(pname, aname, data) {
            Ok(m) => members.push(m),
            Err(e) => {
                undo(sw, &members);
                return Err(rt(e, pname));
            }
        }
    }
    if !prof.with_selector {
        return Ok((None, members, set.clone()));
    }
    let g = match sw.act_prof_create_group(pname) {
        Ok(g) => g,
        Err(e) => {
            undo(sw, &members);
            return Err(rt(e, pname));
        }
    };
    for m in &members {
        if let Err(e) = sw.act_prof_add_member_to_group(pname, *m, g) {
            let _ = sw.act_prof_delete_group(pname, g);
            undo(sw, &members);
            return Err(rt(e, pname));
        }
    }
    Ok((Some(g), members, set.clone()))
}

/// Remove what [`oneshot_install`] created (best effort: the entry no longer uses it).
fn oneshot_remove(sw: &mut dyn DeviceState, info: &cfg::P4Info, t: &cfg::Table, os: &Oneshot) {
    let Ok((_, pname)) = profile_of(info, t) else {
        return;
    };
    if let Some(g) = os.0 {
        for m in &os.1 {
            let _ = sw.act_prof_remove_member_from_group(pname, *m, g);
        }
        let _ = sw.act_prof_delete_group(pname, g);
    }
    for m in &os.1 {
        let _ = sw.act_prof_delete_member(pname, *m);
    }
}
