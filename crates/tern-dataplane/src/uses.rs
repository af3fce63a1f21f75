//! Which fields a program can observe: every field reference of the model (expressions,
//! primitive arguments, parser operations and keys, table keys, calculations, field and learn
//! lists, selectors, meter targets, checksums) and every header used as a whole (header
//! arguments, calculation inputs, deparser order, extraction). A field that is referenced nowhere
//! cannot be read by the program, so the switch may skip writing it (see
//! [`crate::compile::Std`]). The walk over-approximates: writes count as references too.
//! Header stacks and unions are not followed (their members are packet headers; the answer is
//! meant for metadata headers, which are never stack or union members).

use std::collections::HashSet;

use tern_model::{
    Arg, CalcInput, Expr, ExtractTarget, FieldListElem, FieldRef, KeyElem, KeyTarget, ParserOp,
    Primitive, Program,
};

/// The fields and whole headers a program refers to.
#[derive(Clone, Debug, Default)]
pub struct Uses {
    pub fields: HashSet<FieldRef>,
    /// Header instances referred to as a whole (all their fields count as referenced).
    pub headers: HashSet<u32>,
}

impl Uses {
    /// Collect the references of `p`.
    pub fn of(p: &Program) -> Uses {
        let mut u = Uses::default();
        for ps in &p.parsers {
            for s in &ps.states {
                for op in &s.ops {
                    match op {
                        ParserOp::Extract(t) => u.target(t),
                        ParserOp::ExtractVl(t, e) => {
                            u.target(t);
                            u.expr(e);
                        }
                        ParserOp::Set(f, e) => {
                            u.fields.insert(*f);
                            u.expr(e);
                        }
                        ParserOp::Verify(a, b) => {
                            u.expr(a);
                            u.expr(b);
                        }
                        ParserOp::Shift(_) => {}
                        ParserOp::Advance(e) => u.expr(e),
                        ParserOp::Primitive(pr) => u.prim(pr),
                    }
                }
                for k in &s.key {
                    if let KeyElem::Field(f) = k {
                        u.fields.insert(*f);
                    }
                }
            }
        }
        for d in &p.deparsers {
            u.headers.extend(d.order.iter().copied());
            for pr in &d.primitives {
                u.prim(pr);
            }
        }
        for c in &p.calculations {
            for i in &c.input {
                match i {
                    CalcInput::Field(f) => {
                        u.fields.insert(*f);
                    }
                    CalcInput::Header(h) => {
                        u.headers.insert(*h);
                    }
                    CalcInput::Const { .. } | CalcInput::Payload => {}
                }
            }
        }
        for m in &p.meter_arrays {
            u.fields.extend(m.result_target);
        }
        for a in &p.actions {
            for pr in &a.primitives {
                u.prim(pr);
            }
        }
        for pl in &p.pipelines {
            for ap in &pl.action_profiles {
                if let Some(s) = &ap.selector {
                    u.fields.extend(s.input.iter().copied());
                }
            }
            for t in &pl.tables {
                for k in &t.key {
                    match k.target {
                        KeyTarget::Field(f) => {
                            u.fields.insert(f);
                        }
                        KeyTarget::Valid(h) => {
                            u.headers.insert(h);
                        }
                    }
                }
            }
            for c in &pl.conditionals {
                u.expr(&c.expr);
            }
        }
        for c in &p.checksums {
            u.fields.insert(c.target);
            if let Some(e) = &c.if_cond {
                u.expr(e);
            }
        }
        for l in &p.learn_lists {
            u.fields.extend(l.elements.iter().copied());
        }
        for l in &p.field_lists {
            for e in &l.elements {
                if let FieldListElem::Field(f) = e {
                    u.fields.insert(*f);
                }
            }
        }
        u
    }

    /// True if the program may read field `f` (referenced by name or through its header).
    pub fn reads(&self, f: FieldRef) -> bool {
        self.fields.contains(&f) || self.headers.contains(&f.header)
    }

    fn target(&mut self, t: &ExtractTarget) {
        if let ExtractTarget::Regular(h) = t {
            self.headers.insert(*h);
        }
    }

    fn prim(&mut self, p: &Primitive) {
        for a in &p.params {
            match a {
                // `mark_to_drop(standard_metadata)` writes egress_spec and mcast_grp only
                // (compile.rs resolves those two fields); it reads nothing of the header.
                Arg::Header(_) if p.op == "mark_to_drop" => {}
                _ => self.arg(a),
            }
        }
    }

    fn arg(&mut self, a: &Arg) {
        match a {
            Arg::Field(f) => {
                self.fields.insert(*f);
            }
            Arg::Header(h) => {
                self.headers.insert(*h);
            }
            Arg::Register { index, .. } => self.expr(index),
            Arg::ParametersVector(v) => {
                for a in v {
                    self.arg(a);
                }
            }
            Arg::FieldList(v) => self.fields.extend(v.iter().copied()),
            Arg::Expr(e) => self.expr(e),
            Arg::Const(_)
            | Arg::Bool(_)
            | Arg::RuntimeData(_)
            | Arg::HeaderStack(_)
            | Arg::HeaderUnion(_)
            | Arg::HeaderUnionStack(_)
            | Arg::Calculation(_)
            | Arg::CounterArray(_)
            | Arg::MeterArray(_)
            | Arg::RegisterArray(_)
            | Arg::Extern(_)
            | Arg::String(_)
            | Arg::StackField { .. } => {}
        }
    }

    fn expr(&mut self, e: &Expr) {
        match e {
            Expr::Field(f) => {
                self.fields.insert(*f);
            }
            Expr::Header(h) => {
                self.headers.insert(*h);
            }
            Expr::Register { index, .. } => self.expr(index),
            Expr::Op {
                left, right, cond, ..
            } => {
                for x in [left, right, cond].into_iter().flatten() {
                    self.expr(x);
                }
            }
            Expr::Const(_)
            | Expr::Bool(_)
            | Expr::Local(_)
            | Expr::HeaderStack(_)
            | Expr::StackField { .. }
            | Expr::Union(_)
            | Expr::UnionStack(_)
            | Expr::Lookahead { .. } => {}
        }
    }
}
