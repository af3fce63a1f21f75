//! Writing a [`Program`] back out as BMv2 JSON (format 2.23, the shape p4c emits), so a front
//! end can build the model and hand simple_switch-compatible JSON to any consumer.
//! `load(&to_json(&p)) == p` for every program the loader accepts.

use crate::*;
use serde_json::{json, Map, Value};

fn hex_bytes(b: &[u8]) -> String {
    let mut s = String::with_capacity(2 + 2 * b.len());
    s.push_str("0x");
    for x in b {
        s.push_str(&format!("{x:02x}"));
    }
    s
}

fn hex_int(i: &Int) -> String {
    let mut s = String::new();
    if i.negative {
        s.push('-');
    }
    s.push_str(&hex_bytes(if i.magnitude.is_empty() {
        &[0]
    } else {
        &i.magnitude
    }));
    s
}

struct W<'a> {
    p: &'a Program,
}

impl W<'_> {
    fn hname(&self, h: u32) -> &str {
        &self.p.headers[h as usize].name
    }

    fn field(&self, f: FieldRef) -> Value {
        let fname = match self.p.field_def(f) {
            Some(d) => d.name.clone(),
            None => "$valid$".to_string(),
        };
        json!([self.hname(f.header), fname])
    }

    fn type_field(&self, ht: u32, field: u32) -> String {
        if field == VALID_FIELD {
            return "$valid$".into();
        }
        self.p.header_types[ht as usize].fields[field as usize]
            .name
            .clone()
    }

    fn stack_type(&self, s: u32) -> u32 {
        self.p.header_stacks[s as usize].header_type
    }

    fn union_member(&self, us: u32, m: u32) -> (String, u32) {
        let ut =
            &self.p.header_union_types[self.p.header_union_stacks[us as usize].union_type as usize];
        ut.members[m as usize].clone()
    }

    fn expr(&self, e: &Expr) -> Value {
        match e {
            Expr::Field(f) => json!({"type": "field", "value": self.field(*f)}),
            Expr::Const(i) => json!({"type": "hexstr", "value": hex_int(i)}),
            Expr::Bool(b) => json!({"type": "bool", "value": b}),
            Expr::Local(i) => json!({"type": "local", "value": i}),
            Expr::Register { array, index } => json!({"type": "register",
                "value": [self.p.register_arrays[*array as usize].name, self.expr(index)]}),
            Expr::Header(h) => json!({"type": "header", "value": self.hname(*h)}),
            Expr::HeaderStack(s) => {
                json!({"type": "header_stack", "value": self.p.header_stacks[*s as usize].name})
            }
            Expr::StackField { stack, field } => json!({"type": "stack_field",
                "value": [self.p.header_stacks[*stack as usize].name, self.type_field(self.stack_type(*stack), *field)]}),
            Expr::Union(u) => {
                json!({"type": "header_union", "value": self.p.header_unions[*u as usize].name})
            }
            Expr::UnionStack(u) => {
                json!({"type": "header_union_stack", "value": self.p.header_union_stacks[*u as usize].name})
            }
            Expr::Lookahead { offset, width } => {
                json!({"type": "lookahead", "value": [offset, width]})
            }
            Expr::Op { .. } => json!({"type": "expression", "value": self.expr_body(e)}),
        }
    }

    fn expr_body(&self, e: &Expr) -> Value {
        let Expr::Op {
            op,
            left,
            right,
            cond,
        } = e
        else {
            return self.expr(e);
        };
        let sub = |x: &Option<Box<Expr>>| x.as_ref().map_or(Value::Null, |e| self.expr(e));
        let (name, right_v) = match op {
            Op::AccessField(i) => ("access_field", json!(i)),
            Op::AccessUnionHeader(i) => ("access_union_header", json!(i)),
            _ => (op_name(*op), sub(right)),
        };
        let mut m = Map::new();
        m.insert("op".into(), json!(name));
        m.insert("left".into(), sub(left));
        m.insert("right".into(), right_v);
        if *op == Op::Ternary {
            m.insert("cond".into(), sub(cond));
        }
        Value::Object(m)
    }

    fn arg(&self, a: &Arg) -> Value {
        let named = |t: &str, n: &str| json!({"type": t, "value": n});
        match a {
            Arg::Field(f) => json!({"type": "field", "value": self.field(*f)}),
            Arg::Const(i) => json!({"type": "hexstr", "value": hex_int(i)}),
            Arg::Bool(b) => json!({"type": "bool", "value": b}),
            Arg::RuntimeData(i) => json!({"type": "runtime_data", "value": i}),
            Arg::Header(h) => named("header", self.hname(*h)),
            Arg::HeaderStack(s) => named("header_stack", &self.p.header_stacks[*s as usize].name),
            Arg::HeaderUnion(u) => named("header_union", &self.p.header_unions[*u as usize].name),
            Arg::HeaderUnionStack(u) => named(
                "header_union_stack",
                &self.p.header_union_stacks[*u as usize].name,
            ),
            Arg::Calculation(c) => named("calculation", &self.p.calculations[*c as usize].name),
            Arg::CounterArray(c) => {
                named("counter_array", &self.p.counter_arrays[*c as usize].name)
            }
            Arg::MeterArray(m) => named("meter_array", &self.p.meter_arrays[*m as usize].name),
            Arg::RegisterArray(r) => {
                named("register_array", &self.p.register_arrays[*r as usize].name)
            }
            Arg::Extern(e) => named("extern", &self.p.extern_instances[*e as usize].name),
            Arg::String(s) => named("string", s),
            Arg::Register { array, index } => json!({"type": "register",
                "value": [self.p.register_arrays[*array as usize].name, self.expr(index)]}),
            Arg::StackField { stack, field } => json!({"type": "stack_field",
                "value": [self.p.header_stacks[*stack as usize].name, self.type_field(self.stack_type(*stack), *field)]}),
            Arg::ParametersVector(v) => {
                json!({"type": "parameters_vector", "value": v.iter().map(|x| self.arg(x)).collect::<Vec<_>>()})
            }
            Arg::FieldList(v) => json!({"type": "field_list",
                "value": v.iter().map(|f| json!({"type": "field", "value": self.field(*f)})).collect::<Vec<_>>()}),
            Arg::Expr(e) => json!({"type": "expression", "value": self.expr_body(e)}),
        }
    }

    fn primitive(&self, p: &Primitive) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), json!(p.op));
        m.insert(
            "parameters".into(),
            Value::Array(p.params.iter().map(|a| self.arg(a)).collect()),
        );
        if let Some(si) = &p.source_info {
            m.insert(
                "source_info".into(),
                json!({"filename": si.filename, "line": si.line, "column": si.column,
                       "source_fragment": si.source_fragment}),
            );
        }
        Value::Object(m)
    }

    fn extract_target(&self, t: &ExtractTarget) -> Value {
        match t {
            ExtractTarget::Regular(h) => json!({"type": "regular", "value": self.hname(*h)}),
            ExtractTarget::Stack(s) => {
                json!({"type": "stack", "value": self.p.header_stacks[*s as usize].name})
            }
            ExtractTarget::UnionStack(us, m) => json!({"type": "union_stack",
                "value": [self.p.header_union_stacks[*us as usize].name, self.union_member(*us, *m).0]}),
        }
    }

    fn parser(&self, p: &Parser) -> Value {
        let sname = |s: Option<u32>| s.map_or(Value::Null, |s| json!(p.states[s as usize].name));
        let states: Vec<Value> = p
            .states
            .iter()
            .map(|s| {
                let ops: Vec<Value> = s
                    .ops
                    .iter()
                    .map(|o| match o {
                        ParserOp::Extract(t) => json!({"op": "extract", "parameters": [self.extract_target(t)]}),
                        ParserOp::ExtractVl(t, e) => {
                            json!({"op": "extract_VL", "parameters": [self.extract_target(t), self.expr_tv(e)]})
                        }
                        ParserOp::Set(f, e) => json!({"op": "set",
                            "parameters": [{"type": "field", "value": self.field(*f)}, self.expr_tv(e)]}),
                        ParserOp::Verify(c, e) => json!({"op": "verify", "parameters": [self.expr_tv(c), self.expr_tv(e)]}),
                        ParserOp::Shift(n) => json!({"op": "shift", "parameters": [n]}),
                        ParserOp::Advance(e) => json!({"op": "advance", "parameters": [self.expr_tv(e)]}),
                        ParserOp::Primitive(pr) => json!({"op": "primitive", "parameters": [self.primitive(pr)]}),
                    })
                    .collect();
                let key: Vec<Value> = s
                    .key
                    .iter()
                    .map(|k| match *k {
                        KeyElem::Field(f) => json!({"type": "field", "value": self.field(f)}),
                        KeyElem::StackField { stack, field } => json!({"type": "stack_field",
                            "value": [self.p.header_stacks[stack as usize].name, self.type_field(self.stack_type(stack), field)]}),
                        KeyElem::UnionStackField { stack, member, field } => {
                            let (mname, ht) = self.union_member(stack, member);
                            json!({"type": "union_stack_field", "value":
                                [self.p.header_union_stacks[stack as usize].name, mname, self.type_field(ht, field)]})
                        }
                        KeyElem::Lookahead { offset, width } => json!({"type": "lookahead", "value": [offset, width]}),
                    })
                    .collect();
                let transitions: Vec<Value> = s
                    .transitions
                    .iter()
                    .map(|t| {
                        let mask = |m: &Option<Vec<u8>>| m.as_ref().map_or(Value::Null, |m| json!(hex_bytes(m)));
                        match &t.matcher {
                            TransitionMatch::Default => json!({"type": "default", "value": null, "mask": null,
                                "next_state": sname(t.next)}),
                            TransitionMatch::Value { value, mask: m } => json!({"type": "hexstr",
                                "value": hex_bytes(value), "mask": mask(m), "next_state": sname(t.next)}),
                            TransitionMatch::Vset { vset, mask: m } => json!({"type": "parse_vset",
                                "value": self.p.parse_vsets[*vset as usize].name, "mask": mask(m),
                                "next_state": sname(t.next)}),
                        }
                    })
                    .collect();
                json!({"name": s.name, "id": s.id, "parser_ops": ops, "transition_key": key,
                       "transitions": transitions})
            })
            .collect();
        json!({"name": p.name, "id": p.id, "init_state": sname(p.init_state), "parse_states": states})
    }

    /// A type/value wrapper around an expression (leaves stay leaves).
    fn expr_tv(&self, e: &Expr) -> Value {
        self.expr(e)
    }

    fn node(&self, pl: &Pipeline, n: Option<Node>) -> Value {
        match n {
            None => Value::Null,
            Some(Node::Table(i)) => json!(pl.tables[i as usize].name),
            Some(Node::Conditional(i)) => json!(pl.conditionals[i as usize].name),
            Some(Node::ActionCall(i)) => json!(pl.action_calls[i as usize].name),
        }
    }

    fn table(&self, pl: &Pipeline, t: &Table) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), json!(t.name));
        m.insert("id".into(), json!(t.id));
        m.insert("match_type".into(), json!(t.match_type.as_str()));
        m.insert(
            "type".into(),
            json!(match t.table_type {
                TableType::Simple => "simple",
                TableType::Indirect => "indirect",
                TableType::IndirectWs => "indirect_ws",
            }),
        );
        if let Some(ap) = t.action_profile {
            m.insert(
                "action_profile".into(),
                json!(pl.action_profiles[ap as usize].name),
            );
        }
        let key: Vec<Value> = t
            .key
            .iter()
            .map(|k| {
                let target = match k.target {
                    KeyTarget::Field(f) => self.field(f),
                    KeyTarget::Valid(h) => json!(self.hname(h)),
                };
                json!({"match_type": k.match_kind.as_str(), "name": k.name, "target": target,
                       "mask": k.mask.as_ref().map_or(Value::Null, |m| json!(hex_bytes(m)))})
            })
            .collect();
        m.insert("key".into(), Value::Array(key));
        m.insert("max_size".into(), json!(t.max_size));
        m.insert("with_counters".into(), json!(t.with_counters));
        m.insert("support_timeout".into(), json!(t.support_timeout));
        m.insert(
            "direct_meters".into(),
            t.direct_meter
                .map_or(Value::Null, |d| json!(self.p.meter_arrays[d as usize].name)),
        );
        m.insert(
            "action_ids".into(),
            json!(t
                .actions
                .iter()
                .map(|a| self.p.actions[*a as usize].id)
                .collect::<Vec<_>>()),
        );
        m.insert(
            "actions".into(),
            json!(t
                .actions
                .iter()
                .map(|a| self.p.actions[*a as usize].name.clone())
                .collect::<Vec<_>>()),
        );
        m.insert(
            "base_default_next".into(),
            self.node(pl, t.base_default_next),
        );
        let mut nt = Map::new();
        match &t.next_tables {
            NextTables::HitMiss { hit, miss } => {
                nt.insert("__HIT__".into(), self.node(pl, *hit));
                nt.insert("__MISS__".into(), self.node(pl, *miss));
            }
            NextTables::PerAction(v) => {
                for (a, n) in t.actions.iter().zip(v) {
                    nt.insert(self.p.actions[*a as usize].name.clone(), self.node(pl, *n));
                }
            }
        }
        m.insert("next_tables".into(), Value::Object(nt));
        let data = |d: &[Int]| d.iter().map(hex_int).collect::<Vec<_>>();
        if let Some(d) = &t.default_entry {
            m.insert(
                "default_entry".into(),
                json!({"action_id": self.p.actions[d.action as usize].id, "action_const": d.action_const,
                       "action_data": data(&d.action_data), "action_entry_const": d.action_entry_const}),
            );
        }
        if let Some(entries) = &t.entries {
            let es: Vec<Value> = entries
                .iter()
                .map(|e| {
                    let mk: Vec<Value> = e
                        .key
                        .iter()
                        .map(|k| match k {
                            ConstKey::Exact(v) => json!({"match_type": "exact", "key": hex_bytes(v)}),
                            ConstKey::Lpm(v, l) => json!({"match_type": "lpm", "key": hex_bytes(v), "prefix_length": l}),
                            ConstKey::Ternary(v, mk) => {
                                json!({"match_type": "ternary", "key": hex_bytes(v), "mask": hex_bytes(mk)})
                            }
                            ConstKey::Range(s, en) => {
                                json!({"match_type": "range", "start": hex_bytes(s), "end": hex_bytes(en)})
                            }
                            ConstKey::Valid(b) => json!({"match_type": "valid", "key": b}),
                        })
                        .collect();
                    json!({"match_key": mk, "action_entry": {"action_id": self.p.actions[e.action as usize].id,
                           "action_data": data(&e.action_data)}, "priority": e.priority})
                })
                .collect();
            m.insert("entries".into(), Value::Array(es));
        }
        Value::Object(m)
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Add => "+",
        Op::Sub => "-",
        Op::Mul => "*",
        Op::Div => "/",
        Op::Mod => "%",
        Op::Shl => "<<",
        Op::Shr => ">>",
        Op::And => "&",
        Op::Or => "|",
        Op::Xor => "^",
        Op::Not => "~",
        Op::Eq => "==",
        Op::Ne => "!=",
        Op::Gt => ">",
        Op::Ge => ">=",
        Op::Lt => "<",
        Op::Le => "<=",
        Op::LAnd => "and",
        Op::LOr => "or",
        Op::LNot => "not",
        Op::Valid => "valid",
        Op::ValidUnion => "valid_union",
        Op::Ternary => "?",
        Op::TwoCompMod => "two_comp_mod",
        Op::SatCast => "sat_cast",
        Op::USatCast => "usat_cast",
        Op::D2B => "d2b",
        Op::B2D => "b2d",
        Op::DerefStack => "dereference_header_stack",
        Op::DerefUnionStack => "dereference_union_stack",
        Op::LastStackIndex => "last_stack_index",
        Op::SizeStack => "size_stack",
        Op::AccessField(_) => "access_field",
        Op::AccessUnionHeader(_) => "access_union_header",
    }
}

/// Serialize a program as BMv2 JSON text (pretty-printed, version 2.23).
pub fn to_json(p: &Program) -> String {
    let w = W { p };
    let header_types: Vec<Value> = p
        .header_types
        .iter()
        .map(|ht| {
            let fields: Vec<Value> = ht
                .fields
                .iter()
                .map(|f| {
                    let width = match f.width {
                        FieldWidth::Fixed(n) => json!(n),
                        FieldWidth::Variable => json!("*"),
                    };
                    if f.saturating {
                        json!([f.name, width, f.signed, true])
                    } else if f.signed {
                        json!([f.name, width, true])
                    } else {
                        json!([f.name, width, false])
                    }
                })
                .collect();
            let mut m = Map::new();
            m.insert("name".into(), json!(ht.name));
            m.insert("id".into(), json!(ht.id));
            m.insert("fields".into(), Value::Array(fields));
            if let Some(e) = &ht.length_exp {
                m.insert("length_exp".into(), w.expr(e));
            }
            if ht.max_length > 0 {
                m.insert("max_length".into(), json!(ht.max_length));
            }
            Value::Object(m)
        })
        .collect();
    let tname = |t: u32| p.header_types[t as usize].name.clone();
    let headers: Vec<Value> = p
        .headers
        .iter()
        .map(|h| json!({"name": h.name, "id": h.id, "header_type": tname(h.header_type), "metadata": h.metadata}))
        .collect();
    let hid = |h: &u32| p.headers[*h as usize].id;
    let stacks: Vec<Value> = p
        .header_stacks
        .iter()
        .map(|s| json!({"name": s.name, "id": s.id, "size": s.headers.len(), "header_type": tname(s.header_type),
                        "header_ids": s.headers.iter().map(hid).collect::<Vec<_>>()}))
        .collect();
    let union_types: Vec<Value> = p
        .header_union_types
        .iter()
        .map(|u| {
            json!({"name": u.name, "id": u.id,
            "headers": u.members.iter().map(|(n, t)| json!([n, tname(*t)])).collect::<Vec<_>>()})
        })
        .collect();
    let uname = |u: u32| p.header_union_types[u as usize].name.clone();
    let unions: Vec<Value> = p
        .header_unions
        .iter()
        .map(|u| {
            json!({"name": u.name, "id": u.id, "union_type": uname(u.union_type),
                        "header_ids": u.headers.iter().map(hid).collect::<Vec<_>>()})
        })
        .collect();
    let union_stacks: Vec<Value> = p
        .header_union_stacks
        .iter()
        .map(|s| json!({"name": s.name, "id": s.id, "union_type": uname(s.union_type),
            "header_union_ids": s.unions.iter().map(|u| p.header_unions[*u as usize].id).collect::<Vec<_>>()}))
        .collect();
    let aliases: Vec<Value> = p
        .field_aliases
        .iter()
        .map(|(a, f)| json!([a, w.field(*f)]))
        .collect();
    let errors: Vec<Value> = p.errors.iter().map(|(n, v)| json!([n, v])).collect();
    let enums: Vec<Value> = p
        .enums
        .iter()
        .map(|e| json!({"name": e.name, "entries": e.entries.iter().map(|(n, v)| json!([n, v])).collect::<Vec<_>>()}))
        .collect();
    let vsets: Vec<Value> = p
        .parse_vsets
        .iter()
        .map(|v| json!({"name": v.name, "id": v.id, "compressed_bitwidth": v.compressed_bitwidth}))
        .collect();
    let parsers: Vec<Value> = p.parsers.iter().map(|x| w.parser(x)).collect();
    let deparsers: Vec<Value> = p
        .deparsers
        .iter()
        .map(|d| {
            json!({"name": d.name, "id": d.id,
            "order": d.order.iter().map(|h| w.hname(*h)).collect::<Vec<_>>(),
            "primitives": d.primitives.iter().map(|x| w.primitive(x)).collect::<Vec<_>>()})
        })
        .collect();
    let calcs: Vec<Value> = p
        .calculations
        .iter()
        .map(|c| {
            let input: Vec<Value> = c
                .input
                .iter()
                .map(|i| match i {
                    CalcInput::Field(f) => json!({"type": "field", "value": w.field(*f)}),
                    CalcInput::Const { value, bitwidth } => {
                        json!({"type": "hexstr", "value": hex_bytes(value), "bitwidth": bitwidth})
                    }
                    CalcInput::Header(h) => json!({"type": "header", "value": w.hname(*h)}),
                    CalcInput::Payload => json!({"type": "payload", "value": null}),
                })
                .collect();
            json!({"name": c.name, "id": c.id, "algo": c.algo, "input": input})
        })
        .collect();
    let counters: Vec<Value> = p
        .counter_arrays
        .iter()
        .map(|c| {
            let mut m =
                json!({"name": c.name, "id": c.id, "size": c.size, "is_direct": c.is_direct});
            if let Some(b) = &c.binding {
                m["binding"] = json!(b);
            }
            m
        })
        .collect();
    let meters: Vec<Value> = p
        .meter_arrays
        .iter()
        .map(|c| {
            let mut m = json!({"name": c.name, "id": c.id, "size": c.size, "is_direct": c.is_direct,
                "rate_count": c.rate_count,
                "type": match c.meter_type { MeterType::Bytes => "bytes", MeterType::Packets => "packets" }});
            if let Some(b) = &c.binding {
                m["binding"] = json!(b);
            }
            if let Some(t) = c.result_target {
                m["result_target"] = w.field(t);
            }
            m
        })
        .collect();
    let registers: Vec<Value> = p
        .register_arrays
        .iter()
        .map(|r| json!({"name": r.name, "id": r.id, "size": r.size, "bitwidth": r.bitwidth}))
        .collect();
    let actions: Vec<Value> = p
        .actions
        .iter()
        .map(|a| json!({"name": a.name, "id": a.id,
            "runtime_data": a.runtime_data.iter().map(|(n, b)| json!({"name": n, "bitwidth": b})).collect::<Vec<_>>(),
            "primitives": a.primitives.iter().map(|x| w.primitive(x)).collect::<Vec<_>>()}))
        .collect();
    let pipelines: Vec<Value> = p
        .pipelines
        .iter()
        .map(|pl| {
            let profiles: Vec<Value> = pl
                .action_profiles
                .iter()
                .map(|ap| {
                    let mut m = json!({"name": ap.name, "id": ap.id, "max_size": ap.max_size});
                    if let Some(s) = &ap.selector {
                        m["selector"] = json!({"algo": s.algo,
                            "input": s.input.iter().map(|f| json!({"type": "field", "value": w.field(*f)})).collect::<Vec<_>>()});
                    }
                    m
                })
                .collect();
            let conds: Vec<Value> = pl
                .conditionals
                .iter()
                .map(|c| json!({"name": c.name, "id": c.id, "expression": w.expr(&c.expr),
                    "true_next": w.node(pl, c.true_next), "false_next": w.node(pl, c.false_next)}))
                .collect();
            let calls: Vec<Value> = pl
                .action_calls
                .iter()
                .map(|c| json!({"name": c.name, "id": c.id, "action_id": p.actions[c.action as usize].id,
                    "next_node": w.node(pl, c.next)}))
                .collect();
            json!({"name": pl.name, "id": pl.id, "init_table": w.node(pl, pl.init),
                "action_profiles": profiles,
                "tables": pl.tables.iter().map(|t| w.table(pl, t)).collect::<Vec<_>>(),
                "conditionals": conds, "action_calls": calls})
        })
        .collect();
    let checksums: Vec<Value> = p
        .checksums
        .iter()
        .map(|c| {
            let mut m = json!({"name": c.name, "id": c.id, "target": w.field(c.target),
                "type": match c.checksum_type { ChecksumType::Generic => "generic", ChecksumType::Ipv4 => "ipv4" },
                "update": c.update, "verify": c.verify,
                "if_cond": c.if_cond.as_ref().map_or(Value::Null, |e| w.expr(e))});
            if let Some(ci) = c.calculation {
                m["calculation"] = json!(p.calculations[ci as usize].name);
            }
            m
        })
        .collect();
    let learn_lists: Vec<Value> = p
        .learn_lists
        .iter()
        .map(|l| json!({"name": l.name, "id": l.id,
            "elements": l.elements.iter().map(|f| json!({"type": "field", "value": w.field(*f)})).collect::<Vec<_>>()}))
        .collect();
    let field_lists: Vec<Value> = p
        .field_lists
        .iter()
        .map(|l| json!({"name": l.name, "id": l.id, "elements": l.elements.iter().map(|e| match e {
            FieldListElem::Field(f) => json!({"type": "field", "value": w.field(*f)}),
            FieldListElem::Const { value, bitwidth } => json!({"type": "hexstr", "value": hex_bytes(value), "bitwidth": bitwidth}),
        }).collect::<Vec<_>>()}))
        .collect();
    let mut config = Map::new();
    for (k, v) in &p.config_options {
        config.insert(k.clone(), json!(v));
    }
    let root = json!({
        "__meta__": {"version": [2, 23], "compiler": "tern"},
        "header_types": header_types,
        "headers": headers,
        "header_stacks": stacks,
        "header_union_types": union_types,
        "header_unions": unions,
        "header_union_stacks": union_stacks,
        "field_aliases": aliases,
        "errors": errors,
        "enums": enums,
        "parse_vsets": vsets,
        "parsers": parsers,
        "deparsers": deparsers,
        "meter_arrays": meters,
        "counter_arrays": counters,
        "register_arrays": registers,
        "calculations": calcs,
        "learn_lists": learn_lists,
        "field_lists": field_lists,
        "actions": actions,
        "pipelines": pipelines,
        "checksums": checksums,
        "extern_instances": [],
        "config_options": config,
    });
    serde_json::to_string_pretty(&root).unwrap_or_default()
}
