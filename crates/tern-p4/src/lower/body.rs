//! Lowering of calls (methods, externs, actions, functions) and statements into BMv2
//! primitives, including `_jump`-based conditionals inside actions.

use super::*;

/// Where lowered statements go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Action,
    Parser,
    Deparser,
    Checksum,
}

impl Lower {
    pub(super) fn emit(&mut self, p: m::Primitive) {
        self.cur.push(p);
    }

    /// The field a place denotes (for `out` arguments and assignment targets).
    pub(super) fn field_of(&mut self, v: &Val, pos: Pos) -> R<(m::FieldRef, Ty)> {
        match v {
            Val::Place(Place::Field(f, t)) => Ok((*f, t.clone())),
            Val::Place(Place::Param(..)) => {
                err(pos, "cannot write to a directionless action parameter")
            }
            _ => err(pos, "expected a field or variable (an l-value) here"),
        }
    }

    fn arg_data(&mut self, e: &Expr, want: Option<&Ty>) -> R<m::Arg> {
        let v = self.expr(e)?;
        let v = match want {
            Some(t) => self.convert(v, t, e.pos)?,
            None => v,
        };
        let (x, _) = self.data(v, e.pos)?;
        Ok(to_arg(x))
    }

    fn const_arg(&mut self, e: &Expr, what: &str) -> R<i128> {
        match self.expr(e)? {
            Val::Const(v, _) => Ok(v),
            _ => err(e.pos, format!("{what} must be a compile-time constant")),
        }
    }

    fn nargs(args: &[Expr], n: usize, what: &str, pos: Pos) -> R<()> {
        if args.len() != n {
            return err(
                pos,
                format!("{what} expects {n} argument(s) but got {}", args.len()),
            );
        }
        Ok(())
    }

    /// Flatten a value into the fields it consists of (for field lists, digests, hashes).
    fn flatten(&mut self, v: Val, pos: Pos, out: &mut Vec<m::CalcInput>) -> R<()> {
        match v {
            Val::List(items) => {
                for i in items {
                    self.flatten(i, pos, out)?;
                }
            }
            Val::Named(items) => {
                for (_, i) in items {
                    self.flatten(i, pos, out)?;
                }
            }
            Val::Place(Place::Struct(_, fields)) => {
                for (_, p) in fields {
                    self.flatten(Val::Place(p), pos, out)?;
                }
            }
            Val::Place(Place::Header(h, _)) => out.push(m::CalcInput::Header(h)),
            Val::Place(Place::Field(f, _)) => out.push(m::CalcInput::Field(f)),
            Val::Const(c, t) => {
                let w = match t.width() {
                    Some(w) => w,
                    None => return err(pos, "constants in a field list need a width (e.g. 8w0)"),
                };
                out.push(m::CalcInput::Const {
                    value: int_of(c).to_bytes(w),
                    bitwidth: w,
                });
            }
            other => {
                // Any other expression: copy into a temporary.
                let (e, t) = self.data(other, pos)?;
                let t = match t {
                    Ty::InfInt => return err(pos, "values in a field list need a width"),
                    t => t,
                };
                let f = self.new_scalar("tmp", &t);
                self.emit(prim("assign", vec![m::Arg::Field(f), to_arg(e)]));
                out.push(m::CalcInput::Field(f));
            }
        }
        Ok(())
    }

    /// Width of a field, also for scalars not yet written into the program.
    fn prog_field_width(&self, f: m::FieldRef) -> u32 {
        if f.header == 0 {
            return match self.scalar_fields.get(f.field as usize).map(|d| d.width) {
                Some(m::FieldWidth::Fixed(w)) => w,
                _ => 32,
            };
        }
        self.prog.field_width(f).max(1)
    }

    fn calculation(&mut self, algo: &str, inputs: Vec<m::CalcInput>) -> u32 {
        let name = self.unique("calc");
        let idx = self.prog.calculations.len() as u32;
        self.prog.calculations.push(m::Calculation {
            name,
            id: idx as i64,
            algo: algo.into(),
            input: inputs,
        });
        idx
    }

    pub(super) fn algo_name(&mut self, e: &Expr) -> R<String> {
        match self.expr(e)? {
            Val::Const(v, Ty::Enum(en, _)) if en == "HashAlgorithm" => {
                let (_, ms) = self.enums.get(&en).cloned().unwrap_or_default();
                let n = ms
                    .iter()
                    .find(|(_, x)| *x == v)
                    .map(|(n, _)| n.clone())
                    .unwrap_or_default();
                if !m::known_hash_algorithm(&n) {
                    return err(
                        e.pos,
                        format!("hash algorithm `{n}` is not supported by the BMv2 target"),
                    );
                }
                Ok(n)
            }
            _ => err(
                e.pos,
                "expected a HashAlgorithm constant (e.g. HashAlgorithm.crc16)",
            ),
        }
    }

    /// A field list made of the fields of a data argument (older clone3/resubmit forms).
    fn data_field_list(&mut self, a: &Expr) -> R<i64> {
        let v = self.expr(a)?;
        let mut inputs = Vec::new();
        self.flatten(v, a.pos, &mut inputs)?;
        let mut elements = Vec::new();
        for i in inputs {
            match i {
                m::CalcInput::Field(f) => elements.push(m::FieldListElem::Field(f)),
                m::CalcInput::Const { value, bitwidth } => {
                    elements.push(m::FieldListElem::Const { value, bitwidth })
                }
                _ => return err(a.pos, "preserved data must consist of fields"),
            }
        }
        let id = self.prog.field_lists.len() as i64 + 1;
        self.prog.field_lists.push(m::FieldList {
            name: format!("fl_{id}"),
            id,
            elements,
        });
        Ok(id)
    }

    fn field_list_id(&mut self, idx: i128) -> i64 {
        if let Some(id) = self.field_list_ids.get(&idx) {
            return *id;
        }
        let mut elements = Vec::new();
        for (f, anns) in &self.meta_fields {
            for a in anns.iter().filter(|a| a.name == "field_list") {
                if a.args
                    .iter()
                    .any(|x| matches!(x.kind, ExprKind::Int(v, _) if v as i128 == idx))
                {
                    elements.push(m::FieldListElem::Field(*f));
                }
            }
        }
        let id = self.prog.field_lists.len() as i64 + 1;
        self.prog.field_lists.push(m::FieldList {
            name: format!("field_list{idx}"),
            id,
            elements,
        });
        self.field_list_ids.insert(idx, id);
        id
    }

    /// Lower a call; returns its value if it has one.
    pub(super) fn call(
        &mut self,
        callee: &Expr,
        targs: &[TypeRef],
        args: &[Expr],
        pos: Pos,
    ) -> R<Option<Val>> {
        if let ExprKind::Member(obj, method) = &callee.kind {
            // Methods on packets, headers, stacks, externs and tables.
            let ov = self.expr(obj)?;
            return self.method(ov, method, targs, args, pos, obj.pos);
        }
        let ExprKind::Name(fname) = &callee.kind else {
            return err(pos, "this expression cannot be called");
        };
        if let Some(Val::Place(Place::Action(a))) = self.lookup(fname) {
            let d = self
                .local_actions
                .get(&a)
                .or(self.global_actions.get(&a))
                .cloned();
            if let Some(d) = d {
                self.inline(&d, args, pos)?;
                return Ok(None);
            }
        }
        if let Some(Val::Place(Place::Function(f))) = self.lookup(fname) {
            if let Some(d) = self.global_funcs.get(&f).cloned() {
                return self.inline(&d, args, pos);
            }
        }
        let std = m::Arg::Header(self.std_header);
        match fname.as_str() {
            "mark_to_drop" => {
                if args.len() > 1 {
                    return err(pos, "mark_to_drop expects (standard_metadata)");
                }
                let h = match args.first().map(|a| self.expr(a)).transpose()? {
                    Some(Val::Place(Place::Header(h, _))) => m::Arg::Header(h),
                    _ => std,
                };
                self.emit(prim("mark_to_drop", vec![h]));
            }
            "clone" | "clone_preserving_field_list" | "clone3" => {
                if args.len() < 2 {
                    return err(pos, format!("{fname} expects at least 2 arguments"));
                }
                let kind = self.const_arg(&args[0], "the clone type")?;
                let session = self.arg_data(&args[1], Some(&Ty::Bit(32)))?;
                let fl = if fname == "clone_preserving_field_list" {
                    Self::nargs(args, 3, fname, pos)?;
                    let idx = self.const_arg(&args[2], "the field list index")?;
                    self.field_list_id(idx)
                } else if fname == "clone3" {
                    Self::nargs(args, 3, fname, pos)?;
                    self.data_field_list(&args[2])?
                } else {
                    Self::nargs(args, 2, fname, pos)?;
                    0
                };
                let opn = if kind == 0 {
                    "clone_ingress_pkt_to_egress"
                } else {
                    "clone_egress_pkt_to_egress"
                };
                self.emit(prim(opn, vec![session, m::Arg::Const(int_of(fl as i128))]));
            }
            "resubmit_preserving_field_list" | "recirculate_preserving_field_list" => {
                Self::nargs(args, 1, fname, pos)?;
                let idx = self.const_arg(&args[0], "the field list index")?;
                let id = self.field_list_id(idx);
                let opn = if fname.starts_with("resubmit") {
                    "resubmit"
                } else {
                    "recirculate"
                };
                self.emit(prim(opn, vec![m::Arg::Const(int_of(id as i128))]));
            }
            "resubmit" | "recirculate" => {
                // The older v1model forms that take the data to preserve.
                if args.len() > 1 {
                    return err(pos, format!("{fname} expects at most one argument"));
                }
                let id = match args.first() {
                    Some(a) => self.data_field_list(a)?,
                    None => 0,
                };
                let id = if id == 0 {
                    let id = self.prog.field_lists.len() as i64 + 1;
                    self.prog.field_lists.push(m::FieldList {
                        name: format!("fl_{id}"),
                        id,
                        elements: vec![],
                    });
                    id
                } else {
                    id
                };
                self.emit(prim(fname, vec![m::Arg::Const(int_of(id as i128))]));
            }
            "truncate" => {
                Self::nargs(args, 1, fname, pos)?;
                let a = self.arg_data(&args[0], Some(&Ty::Bit(32)))?;
                self.emit(prim("truncate", vec![a]));
            }
            "assert" | "assume" => {
                Self::nargs(args, 1, fname, pos)?;
                let v = self.expr(&args[0])?;
                let (e, t) = self.data(v, args[0].pos)?;
                let _ = t;
                self.emit(prim(
                    fname,
                    vec![m::Arg::Expr(op(m::Op::D2B, None, Some(e)))],
                ));
            }
            "log_msg" => {
                if args.is_empty() || args.len() > 2 {
                    return err(pos, "log_msg expects a format string and optionally data");
                }
                let Val::Str(s) = self.expr(&args[0])? else {
                    return err(args[0].pos, "log_msg needs a string literal");
                };
                let mut vals = Vec::new();
                if let Some(d) = args.get(1) {
                    let v = self.expr(d)?;
                    let items = match v {
                        Val::List(items) => items,
                        v => vec![v],
                    };
                    for i in items {
                        let (e, _) = self.data(i, d.pos)?;
                        vals.push(to_arg(e));
                    }
                }
                self.emit(prim(
                    "log_msg",
                    vec![m::Arg::String(s), m::Arg::ParametersVector(vals)],
                ));
            }
            "random" => {
                Self::nargs(args, 3, fname, pos)?;
                let dv = self.expr(&args[0])?;
                let (f, t) = self.field_of(&dv, args[0].pos)?;
                let lo = self.arg_data(&args[1], Some(&t))?;
                let hi = self.arg_data(&args[2], Some(&t))?;
                self.emit(prim(
                    "modify_field_rng_uniform",
                    vec![m::Arg::Field(f), lo, hi],
                ));
            }
            "hash" => {
                Self::nargs(args, 5, fname, pos)?;
                let dv = self.expr(&args[0])?;
                let (f, t) = self.field_of(&dv, args[0].pos)?;
                let algo = self.algo_name(&args[1])?;
                let _ = &t;
                let base = self.arg_data(&args[2], None)?;
                let data = self.expr(&args[3])?;
                let mut inputs = Vec::new();
                self.flatten(data, args[3].pos, &mut inputs)?;
                let maxv = self.expr(&args[4])?;
                let (maxe, _) = self.data(maxv, args[4].pos)?;
                let c = self.calculation(&algo, inputs);
                self.emit(prim(
                    "modify_field_with_hash_based_offset",
                    vec![m::Arg::Field(f), base, m::Arg::Calculation(c), to_arg(maxe)],
                ));
            }
            "digest" => {
                Self::nargs(args, 2, fname, pos)?;
                let recv = self.arg_data(&args[0], Some(&Ty::Bit(32)))?;
                let data = self.expr(&args[1])?;
                let tname = match (&data, targs.first()) {
                    (_, Some(TypeRef::Named(n, _, _))) => n.clone(),
                    (Val::Place(Place::Struct(n, _)), _) => n.clone(),
                    _ => "digest".to_string(),
                };
                let mut inputs = Vec::new();
                self.flatten(data, args[1].pos, &mut inputs)?;
                // Like p4c, copy the data into temporaries at the call: BMv2 reads the learn
                // list's fields only at the end of ingress. Calls with the same data type share
                // one learn list (and its temporaries).
                let existing = self
                    .learn_by_type
                    .get(&tname)
                    .and_then(|id| self.prog.learn_lists.iter().find(|l| l.id == *id))
                    .map(|l| (l.id, l.elements.clone()));
                let mut elements = Vec::new();
                for (k, i) in inputs.into_iter().enumerate() {
                    match i {
                        m::CalcInput::Field(f) => {
                            let t = match existing.as_ref().and_then(|(_, e)| e.get(k)) {
                                Some(t) => *t,
                                None => {
                                    let w = self.prog_field_width(f);
                                    self.new_scalar("digest_tmp", &Ty::Bit(w))
                                }
                            };
                            self.emit(prim("assign", vec![m::Arg::Field(t), m::Arg::Field(f)]));
                            elements.push(t)
                        }
                        _ => return err(args[1].pos, "digest data must consist of fields"),
                    }
                }
                let id = match existing {
                    Some((id, e)) => {
                        if e.len() != elements.len() {
                            return err(args[1].pos, format!("digest data of type `{tname}` has a different shape than an earlier digest of that type"));
                        }
                        id
                    }
                    None => {
                        let id = self.prog.learn_lists.len() as i64 + 1;
                        self.prog.learn_lists.push(m::LearnList {
                            name: tname.clone(),
                            id,
                            elements,
                        });
                        self.learn_by_type.insert(tname.clone(), id);
                        id
                    }
                };
                self.emit(prim(
                    "generate_digest",
                    vec![recv, m::Arg::Const(int_of(id as i128))],
                ));
            }
            "verify" => {
                if self.mode != Mode::Parser {
                    return err(pos, "verify() can only be used in a parser");
                }
                Self::nargs(args, 2, fname, pos)?;
                let c = self.expr(&args[0])?;
                let ce = self.boolean(c, args[0].pos)?;
                let ev = self.expr(&args[1])?;
                let (ee, _) = self.data(ev, args[1].pos)?;
                self.flush_parser();
                self.parser_ops.push(m::ParserOp::Verify(ce, ee));
            }
            "verify_checksum"
            | "update_checksum"
            | "verify_checksum_with_payload"
            | "update_checksum_with_payload" => {
                Self::nargs(args, 4, fname, pos)?;
                let cond = self.expr(&args[0])?;
                let if_cond = match cond {
                    Val::Const(0, _) => return Ok(None),
                    Val::Const(_, _) => None,
                    v => Some(self.boolean(v, args[0].pos)?),
                };
                let data = self.expr(&args[1])?;
                let mut inputs = Vec::new();
                let before = self.cur.len();
                self.flatten(data, args[1].pos, &mut inputs)?;
                if self.cur.len() != before {
                    return err(
                        args[1].pos,
                        "checksum data must consist of fields and constants",
                    );
                }
                if fname.ends_with("_with_payload") {
                    inputs.push(m::CalcInput::Payload);
                }
                let tv = self.expr(&args[2])?;
                let (target, _) = self.field_of(&tv, args[2].pos)?;
                let algo = self.algo_name(&args[3])?;
                let c = self.calculation(&algo, inputs);
                let name = self.unique("cksum");
                let verify = fname.starts_with("verify");
                self.prog.checksums.push(m::Checksum {
                    name,
                    id: self.prog.checksums.len() as i64,
                    target,
                    checksum_type: m::ChecksumType::Generic,
                    calculation: Some(c),
                    update: !verify,
                    verify,
                    if_cond,
                });
            }
            _ => return err(callee.pos, format!("unknown function or action `{fname}`")),
        }
        Ok(None)
    }

    fn method(
        &mut self,
        ov: Val,
        method: &str,
        targs: &[TypeRef],
        args: &[Expr],
        pos: Pos,
        opos: Pos,
    ) -> R<Option<Val>> {
        match ov {
            Val::Place(Place::Header(_, ht))
                if matches!(
                    method,
                    "minSizeInBits" | "minSizeInBytes" | "maxSizeInBits" | "maxSizeInBytes"
                ) =>
            {
                let fields = self.headers.get(&ht).cloned().unwrap_or_default();
                let max = method.starts_with("max");
                let bits: u32 = fields
                    .iter()
                    .map(|(_, t, _)| match t {
                        Ty::Varbit(w) => {
                            if max {
                                *w
                            } else {
                                0
                            }
                        }
                        t => t.width().unwrap_or(0),
                    })
                    .sum();
                let v = if method.ends_with("Bytes") {
                    bits.div_ceil(8)
                } else {
                    bits
                };
                Ok(Some(Val::Const(v as i128, Ty::InfInt)))
            }
            Val::Place(Place::Header(h, _)) => match method {
                "isValid" => Ok(Some(Val::Rv(
                    op(m::Op::Valid, None, Some(m::Expr::Header(h))),
                    Ty::Bool,
                ))),
                "setValid" => {
                    self.emit(prim("add_header", vec![m::Arg::Header(h)]));
                    Ok(None)
                }
                "setInvalid" => {
                    self.emit(prim("remove_header", vec![m::Arg::Header(h)]));
                    Ok(None)
                }
                _ => err(pos, format!("headers have no method `{method}`")),
            },
            Val::Place(Place::Union(u, _, members)) => match method {
                "isValid" => Ok(Some(Val::Rv(
                    op(m::Op::ValidUnion, None, Some(m::Expr::Union(u))),
                    Ty::Bool,
                ))),
                "setInvalid" => {
                    for (_, p) in members {
                        if let Place::Header(h, _) = p {
                            self.emit(prim("remove_header", vec![m::Arg::Header(h)]));
                        }
                    }
                    Ok(None)
                }
                _ => err(pos, format!("header unions have no method `{method}`")),
            },
            Val::Place(Place::Stack { stack, .. }) => match method {
                "push_front" | "pop_front" => {
                    Self::nargs(args, 1, method, pos)?;
                    let n = self.const_arg(&args[0], "the count")?;
                    let opn = if method == "push_front" { "push" } else { "pop" };
                    self.emit(prim(
                        opn,
                        vec![m::Arg::HeaderStack(stack), m::Arg::Const(int_of(n))],
                    ));
                    Ok(None)
                }
                _ => err(pos, format!("header stacks have no method `{method}`")),
            },
            Val::Place(Place::UnionStack(stack, _, _))
                if matches!(method, "push_front" | "pop_front") =>
            {
                Self::nargs(args, 1, method, pos)?;
                let n = self.const_arg(&args[0], "the count")?;
                let opn = if method == "push_front" { "push" } else { "pop" };
                self.emit(prim(
                    opn,
                    vec![m::Arg::HeaderUnionStack(stack), m::Arg::Const(int_of(n))],
                ));
                Ok(None)
            }
            Val::Place(Place::Packet) => self.packet_method(method, targs, args, pos),
            Val::Place(Place::Extern(i)) => self.extern_method(i, method, args, pos),
            Val::Place(Place::Table(t)) => err(
                pos,
                format!("`{t}.{method}()` may only be used as a statement, in `if (…apply().hit)` or in `switch (…apply().action_run)`"),
            ),
            _ => err(opos, format!("this value has no method `{method}`")),
        }
    }

    fn packet_method(
        &mut self,
        method: &str,
        targs: &[TypeRef],
        args: &[Expr],
        pos: Pos,
    ) -> R<Option<Val>> {
        match (method, self.mode) {
            ("extract", Mode::Parser) => {
                if args.is_empty() || args.len() > 2 {
                    return err(pos, "extract expects 1 or 2 arguments");
                }
                let target = if matches!(args[0].kind, ExprKind::Default) {
                    // `extract<H>(_)`: the header is parsed (and skipped) into a scratch
                    // instance nothing else reads.
                    let t = match targs.first() {
                        Some(t) => self.ty(t)?,
                        None => {
                            return err(
                                args[0].pos,
                                "`extract(_)` needs the header type, e.g. extract<H>(_)",
                            )
                        }
                    };
                    let Ty::Header(h) = t else {
                        return err(
                            args[0].pos,
                            format!("extract needs a header type, not {}", t.name()),
                        );
                    };
                    Val::Place(Place::Header(self.new_header("dontcare", &h, false), h))
                } else {
                    self.expr(&args[0])?
                };
                let target = match target {
                    Val::Place(Place::Header(h, _)) => m::ExtractTarget::Regular(h),
                    Val::Place(Place::StackNext(s)) => m::ExtractTarget::Stack(s),
                    Val::Place(Place::UnionStackNextMember(s, mi)) => {
                        m::ExtractTarget::UnionStack(s, mi)
                    }
                    _ => return err(args[0].pos, "extract needs a header or `stack.next`"),
                };
                let op = if let Some(len) = args.get(1) {
                    let v = self.expr(len)?;
                    let (e, _) = self.data(v, len.pos)?;
                    m::ParserOp::ExtractVl(target, e)
                } else {
                    m::ParserOp::Extract(target)
                };
                self.flush_parser();
                self.parser_ops.push(op);
                Ok(None)
            }
            ("advance", Mode::Parser) => {
                Self::nargs(args, 1, "advance", pos)?;
                let v = self.expr(&args[0])?;
                let (e, _) = self.data(v, args[0].pos)?;
                self.flush_parser();
                self.parser_ops.push(m::ParserOp::Advance(e));
                Ok(None)
            }
            ("lookahead", Mode::Parser) => {
                let Some(t) = targs.first() else {
                    return err(
                        pos,
                        "lookahead needs a type argument, e.g. lookahead<bit<8>>()",
                    );
                };
                let t = self.ty(t)?;
                let Some(w) = self.lookahead_width(&t) else {
                    return err(
                        pos,
                        format!(
                            "lookahead of type {} is not supported (it has no fixed width)",
                            t.name()
                        ),
                    );
                };
                Ok(Some(Val::Lookahead(0, w, t)))
            }
            ("emit", Mode::Deparser) => {
                Self::nargs(args, 1, "emit", pos)?;
                let v = self.expr(&args[0])?;
                self.emit_order(v, args[0].pos)?;
                Ok(None)
            }
            (m, _) => err(pos, format!("packet method `{m}` is not allowed here")),
        }
    }

    fn emit_order(&mut self, v: Val, pos: Pos) -> R<()> {
        match v {
            Val::Place(Place::Header(h, _)) => self.deparse_order.push(h),
            Val::Place(Place::Stack { headers, .. }) => self.deparse_order.extend(headers),
            Val::Place(Place::UnionStack(_, _, unions)) => {
                for u in unions {
                    self.emit_order(Val::Place(u), pos)?;
                }
            }
            Val::Place(Place::Union(_, _, members)) => {
                for (_, p) in members {
                    self.emit_order(Val::Place(p), pos)?;
                }
            }
            Val::Place(Place::Struct(_, fields)) => {
                for (_, p) in fields {
                    if !matches!(p, Place::Field(..)) {
                        self.emit_order(Val::Place(p), pos)?;
                    }
                }
            }
            Val::List(items) => {
                for i in items {
                    self.emit_order(i, pos)?;
                }
            }
            _ => {
                return err(
                    pos,
                    "emit needs a header, header stack or struct of headers",
                )
            }
        }
        Ok(())
    }

    fn extern_method(&mut self, i: usize, method: &str, args: &[Expr], pos: Pos) -> R<Option<Val>> {
        let x = self.ext[i].clone();
        let idx = x.index;
        match (x.kind.as_str(), method) {
            ("counter", "count") => {
                Self::nargs(args, 1, "count", pos)?;
                let a = self.arg_data(&args[0], None)?;
                self.emit(prim("count", vec![m::Arg::CounterArray(idx), a]));
                Ok(None)
            }
            ("direct_counter", "count") => Ok(None),
            ("meter", "execute_meter") => {
                Self::nargs(args, 2, "execute_meter", pos)?;
                let a = self.arg_data(&args[0], None)?;
                let dv = self.expr(&args[1])?;
                let (f, _) = self.field_of(&dv, args[1].pos)?;
                self.emit(prim(
                    "execute_meter",
                    vec![m::Arg::MeterArray(idx), a, m::Arg::Field(f)],
                ));
                Ok(None)
            }
            ("direct_meter", "read") => {
                Self::nargs(args, 1, "read", pos)?;
                let dv = self.expr(&args[0])?;
                let (f, _) = self.field_of(&dv, args[0].pos)?;
                self.prog.meter_arrays[idx as usize].result_target = Some(f);
                Ok(None)
            }
            ("register", "read") => {
                let elem = x.elem.clone().unwrap_or(Ty::Bit(32));
                match args.len() {
                    2 => {
                        let dv = self.expr(&args[0])?;
                        let (f, _) = self.field_of(&dv, args[0].pos)?;
                        let a = self.arg_data(&args[1], Some(&Ty::Bit(32)))?;
                        self.emit(prim(
                            "register_read",
                            vec![m::Arg::Field(f), m::Arg::RegisterArray(idx), a],
                        ));
                        Ok(None)
                    }
                    1 => {
                        let a = self.arg_data(&args[0], Some(&Ty::Bit(32)))?;
                        let f = self.new_scalar("tmp", &elem);
                        self.emit(prim(
                            "register_read",
                            vec![m::Arg::Field(f), m::Arg::RegisterArray(idx), a],
                        ));
                        Ok(Some(Val::Place(Place::Field(f, elem))))
                    }
                    _ => err(pos, "register read expects (out value, index)"),
                }
            }
            ("register", "write") => {
                Self::nargs(args, 2, "write", pos)?;
                let elem = x.elem.clone().unwrap_or(Ty::Bit(32));
                let a = self.arg_data(&args[0], Some(&Ty::Bit(32)))?;
                let v = self.arg_data(&args[1], Some(&elem))?;
                self.emit(prim(
                    "register_write",
                    vec![m::Arg::RegisterArray(idx), a, v],
                ));
                Ok(None)
            }
            (k, m) => err(
                pos,
                format!("extern `{}` of type {k} has no method `{m}`", x.name),
            ),
        }
    }

    /// Inline an action or function call (copy-in/copy-out where aliasing is possible, see `alias`).
    pub(super) fn inline(&mut self, d: &Decl, args: &[Expr], pos: Pos) -> R<Option<Val>> {
        let (params, body, ret) = match &d.kind {
            DeclKind::Action { params, body, .. } => (params, body, None),
            DeclKind::Function {
                params, body, ret, ..
            } => (params, body, Some(ret)),
            _ => return err(pos, "not callable"),
        };
        if args.len() > params.len()
            || args.len() < params.iter().filter(|p| p.default.is_none()).count()
        {
            return err(
                pos,
                format!(
                    "`{}` expects {} argument(s) but got {}",
                    d.name().unwrap_or("?"),
                    params.len(),
                    args.len()
                ),
            );
        }
        if self.inline_depth > 16 {
            return err(
                pos,
                "calls nested too deeply (recursion is not allowed in P4)",
            );
        }
        let mut binds = Vec::new();
        // Copy-in/copy-out (P4-16 calling convention) where binding by reference could be
        // observed: an out/inout argument that may overlap another argument or storage the
        // callee touches, an `out` argument (it starts uninitialized), and an `in` header or
        // struct the callee may write through another name. Everything else is bound by
        // reference. Copy-outs run after the body, left to right.
        let arg_paths: Vec<Option<alias::Path>> = (0..params.len())
            .map(|i| {
                args.get(i)
                    .or(params[i].default.as_ref())
                    .and_then(alias::path_of)
                    .map(|p| self.union_cut(p))
            })
            .collect();
        let fp = self.footprint(d);
        // What evaluating each argument writes (a call among the arguments).
        let arg_writes: Vec<Vec<alias::Path>> = (0..params.len())
            .map(|i| {
                args.get(i)
                    .or(params[i].default.as_ref())
                    .map(|a| self.expr_writes(a))
                    .unwrap_or_default()
            })
            .collect();
        let others_overlap = |i: usize, only_written: bool| -> bool {
            let Some(p) = &arg_paths[i] else { return false };
            (0..params.len()).any(|j| {
                j != i
                    && (arg_writes[j].iter().any(|q| alias::overlap(p, q))
                        || ((!only_written
                            || matches!(params[j].dir, Some("out") | Some("inout")))
                            && arg_paths[j].as_ref().is_some_and(|q| alias::overlap(p, q))))
            })
        };
        // out/inout arguments through a run-time stack index are copied in and out of a
        // temporary, the index evaluated once (argument, index node, elements, index temp,
        // temporary); others needing a copy keep their place (evaluated once) and temporary.
        let mut writebacks: Vec<Writeback> = Vec::new();
        for (i, p) in params.iter().enumerate() {
            let t = self.ty(&p.ty)?;
            let a = match args.get(i).or(p.default.as_ref()) {
                Some(a) => a,
                None => return err(pos, format!("missing argument `{}`", p.name)),
            };
            if matches!(p.dir, Some("out") | Some("inout")) {
                if let Some((at, base, idx)) = self.dyn_index_in_chain(a)? {
                    if self.mode != Mode::Action {
                        return err(
                            a.pos,
                            "run-time header stack indices are only supported in controls",
                        );
                    }
                    let (n, itmp) = self.dyn_index_setup(&base, &idx)?;
                    let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                    if p.dir == Some("inout") {
                        self.per_index(itmp, n, |this, k| {
                            let v = this.expr(&replace_index(a, at, k))?;
                            let v = this.convert(v, &t, a.pos)?;
                            this.assign_val(&tmp, v, a.pos)
                        })?;
                    } else {
                        // `out`: starts uninitialized, headers invalid.
                        self.invalidate_headers(&tmp);
                    }
                    writebacks.push(Writeback::Dyn(a.clone(), at, n, itmp, tmp.clone()));
                    binds.push((p.name.clone(), Val::Place(tmp)));
                    continue;
                }
            }
            if matches!(p.dir, Some("out") | Some("inout")) && matches!(a.kind, ExprKind::Slice(..))
            {
                // A slice is an l-value (P4-16 §6.7): copied in (inout) and back out.
                let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                if p.dir == Some("inout") {
                    let v = self.expr(a)?;
                    let v = self.convert(v, &t, a.pos)?;
                    self.assign_val(&tmp, v, a.pos)?;
                }
                writebacks.push(Writeback::Slice(a.clone(), tmp.clone()));
                binds.push((p.name.clone(), Val::Place(tmp)));
                continue;
            }
            let v = self.expr(a)?;
            let v = self.convert(v, &t, a.pos)?;
            let bound = match p.dir {
                Some("out") | Some("inout") => match &v {
                    Val::Place(place) => {
                        let copy = copyable(place, self.std_header)
                            && (p.dir == Some("out")
                                || others_overlap(i, false)
                                || arg_paths[i].as_ref().is_some_and(|q| fp.touches(q)));
                        if copy {
                            let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                            if p.dir == Some("inout") {
                                self.assign_val(&tmp, v.clone(), a.pos)?;
                            } else if self.mode == Mode::Action {
                                // An `out` argument starts uninitialized: headers invalid.
                                self.invalidate_headers(&tmp);
                            }
                            writebacks.push(Writeback::Place(place.clone(), tmp.clone(), a.pos));
                            Val::Place(tmp)
                        } else {
                            v
                        }
                    }
                    _ => {
                        return err(
                            a.pos,
                            format!(
                                "argument for `{} {}` must be an l-value",
                                p.dir.unwrap_or(""),
                                p.name
                            ),
                        )
                    }
                },
                _ => match v {
                    Val::Const(..) | Val::Place(Place::Param(..)) => v,
                    Val::Place(
                        ref place @ (Place::Header(..)
                        | Place::Struct(..)
                        | Place::Stack { .. }
                        | Place::Union(..)),
                    ) if copyable(place, self.std_header)
                        && (others_overlap(i, true)
                            || arg_paths[i].as_ref().is_some_and(|q| fp.writes_to(q))) =>
                    {
                        let place = place.clone();
                        let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                        self.assign_val(&tmp, Val::Place(place), a.pos)?;
                        Val::Place(tmp)
                    }
                    Val::Place(Place::Header(..))
                    | Val::Place(Place::Struct(..))
                    | Val::Place(Place::Stack { .. }) => v,
                    v => {
                        let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                        self.assign_val(&tmp, v, a.pos)?;
                        Val::Place(tmp)
                    }
                },
            };
            binds.push((p.name.clone(), bound));
        }
        self.scope.push();
        for (n, v) in binds {
            self.scope.set(&n, v);
        }
        let ret_slot = match ret {
            Some(t) => {
                let t = self.ty(t)?;
                if t == Ty::Void {
                    None
                } else {
                    Some(self.alloc("retval", &t, pos, false)?)
                }
            }
            None => None,
        };
        self.inline_depth += 1;
        self.return_jumps.push(Vec::new());
        self.exit_copyouts.push(writebacks.clone());
        let saved_ret = std::mem::replace(&mut self.ret_slot, ret_slot.clone());
        let r = self.stmts(body);
        self.ret_slot = saved_ret;
        self.exit_copyouts.pop();
        let jumps = self.return_jumps.pop().unwrap_or_default();
        self.inline_depth -= 1;
        self.scope.pop();
        r?;
        let end = self.cur.len();
        for j in jumps {
            self.patch_jump(j, end);
        }
        for wb in &writebacks {
            self.copy_out(wb)?;
        }
        Ok(ret_slot.map(Val::Place))
    }

    /// One copy-out after an inlined call (or before an `exit` inside it).
    pub(super) fn copy_out(&mut self, wb: &Writeback) -> R<()> {
        match wb {
            Writeback::Place(dst, tmp, apos) => {
                self.assign_val(dst, Val::Place(tmp.clone()), *apos)?;
            }
            Writeback::Slice(a, tmp) => {
                self.assign_slice(a, Val::Place(tmp.clone()), a.pos)?;
            }
            Writeback::Dyn(a, at, n, itmp, tmp) => {
                self.per_index(*itmp, *n, |this, k| {
                    let Val::Place(dst) = this.expr(&replace_index(a, *at, k))? else {
                        return err(a.pos, "this argument is not assignable");
                    };
                    this.assign_val(&dst, Val::Place(tmp.clone()), a.pos)
                })?;
            }
        }
        Ok(())
    }

    /// `f(k)` for each element `k` of a stack of `n`, each guarded by `itmp == k` (a run-time
    /// index evaluated once into `itmp`).
    fn per_index(
        &mut self,
        itmp: m::FieldRef,
        n: usize,
        mut f: impl FnMut(&mut Self, usize) -> R<()>,
    ) -> R<()> {
        for k in 0..n {
            let jz = self.jump_if_zero(op(
                m::Op::Eq,
                Some(m::Expr::Field(itmp)),
                Some(cnst(k as i128)),
            ));
            f(self, k)?;
            let here = self.cur.len();
            self.patch_jump(jz, here);
        }
        Ok(())
    }

    /// `setInvalid()` on every header in a place (a header, a stack or a struct of them).
    pub(super) fn invalidate_headers(&mut self, p: &Place) {
        match p {
            Place::Header(h, _) => self.emit(prim("remove_header", vec![m::Arg::Header(*h)])),
            Place::Stack { headers, .. } => {
                for h in headers.clone() {
                    self.emit(prim("remove_header", vec![m::Arg::Header(h)]));
                }
            }
            Place::Struct(_, fields) => {
                for (_, f) in fields.clone() {
                    self.invalidate_headers(&f);
                }
            }
            Place::Union(_, _, members) => {
                for (_, f) in members.clone() {
                    self.invalidate_headers(&f);
                }
            }
            Place::UnionStack(_, _, unions) => {
                for u in unions.clone() {
                    self.invalidate_headers(&u);
                }
            }
            _ => {}
        }
    }

    pub(super) fn patch_jump(&mut self, at: usize, target: usize) {
        if let Some(p) = self.cur.get_mut(at) {
            let n = p.params.len();
            if n > 0 {
                p.params[n - 1] = m::Arg::Const(int_of(target as i128));
            }
        }
    }

    /// Assign a value to a place.
    pub(super) fn assign_val(&mut self, dst: &Place, v: Val, pos: Pos) -> R<()> {
        if let Place::Field(f, Ty::Varbit(w)) = dst {
            // Variable-length fields are copied whole (value and current length).
            return match v {
                Val::Place(Place::Field(s, Ty::Varbit(sw))) if sw == *w => {
                    self.emit(prim("assign_VL", vec![m::Arg::Field(*f), m::Arg::Field(s)]));
                    Ok(())
                }
                v => err(
                    pos,
                    format!(
                        "a varbit<{w}> can only be assigned a varbit<{w}> (found {})",
                        self.val_ty(&v)
                            .map(|t| t.name())
                            .unwrap_or_else(|| "a value of another type".into())
                    ),
                ),
            };
        }
        match dst {
            Place::Field(f, t) => {
                // Widening an unsigned (or signed) value into a wider field of the same
                // signedness is accepted: BMv2 stores the value unchanged.
                let widening = matches!(
                    (self.val_ty(&v), t),
                    (Some(Ty::Bit(a)), Ty::Bit(b)) | (Some(Ty::Int(a)), Ty::Int(b)) if a < *b
                ) && !matches!(v, Val::Const(..));
                let v = if widening {
                    v
                } else {
                    self.convert(v, t, pos)?
                };
                if let Some(vt) = self.val_ty(&v) {
                    let ok = vt == *t
                        || widening
                        || matches!((&vt, t), (Ty::Enum(_, Some(a)), Ty::Bit(b)) | (Ty::Bit(a), Ty::Enum(_, Some(b))) if a == b);
                    if !ok {
                        return err(
                            pos,
                            format!(
                                "cannot assign a value of type {} to a {}",
                                vt.name(),
                                t.name()
                            ),
                        );
                    }
                }
                let (e, _) = self.data(v, pos)?;
                self.emit(prim("assign", vec![m::Arg::Field(*f), to_arg(e)]));
            }
            Place::Header(h, ht) => match v {
                Val::Place(Place::Header(s, st)) => {
                    if st != *ht {
                        return err(pos, format!("cannot assign a {st} header to a {ht} header"));
                    }
                    self.emit(prim(
                        "assign_header",
                        vec![m::Arg::Header(*h), m::Arg::Header(s)],
                    ));
                }
                Val::List(items) => {
                    let fields = self.headers.get(ht).cloned().unwrap_or_default();
                    if items.len() != fields.len() {
                        return err(
                            pos,
                            format!(
                                "header `{ht}` has {} fields but the initializer has {}",
                                fields.len(),
                                items.len()
                            ),
                        );
                    }
                    self.emit(prim("add_header", vec![m::Arg::Header(*h)]));
                    for (i, (it, (_, ft, _))) in items.into_iter().zip(fields).enumerate() {
                        let p = Place::Field(
                            m::FieldRef {
                                header: *h,
                                field: i as u32,
                            },
                            ft,
                        );
                        self.assign_val(&p, it, pos)?;
                    }
                }
                Val::Named(items) => {
                    let fields = self.headers.get(ht).cloned().unwrap_or_default();
                    self.emit(prim("add_header", vec![m::Arg::Header(*h)]));
                    for (n, it) in items {
                        let Some(i) = fields.iter().position(|(f, _, _)| *f == n) else {
                            return err(pos, format!("header `{ht}` has no field `{n}`"));
                        };
                        let p = Place::Field(
                            m::FieldRef {
                                header: *h,
                                field: i as u32,
                            },
                            fields[i].1.clone(),
                        );
                        self.assign_val(&p, it, pos)?;
                    }
                }
                Val::Default => {}
                _ => return err(pos, format!("cannot assign this value to a `{ht}` header")),
            },
            Place::Struct(sn, fields) => match v {
                Val::Place(Place::Struct(vn, vf)) => {
                    if vn != *sn {
                        return err(pos, format!("cannot assign a `{vn}` to a `{sn}`"));
                    }
                    for ((_, d), (_, s)) in fields.iter().zip(vf) {
                        self.assign_val(d, Val::Place(s), pos)?;
                    }
                }
                Val::List(items) => {
                    if items.len() != fields.len() {
                        return err(
                            pos,
                            format!(
                                "struct `{sn}` has {} fields but the initializer has {}",
                                fields.len(),
                                items.len()
                            ),
                        );
                    }
                    for ((_, d), s) in fields.iter().zip(items) {
                        self.assign_val(d, s, pos)?;
                    }
                }
                Val::Named(items) => {
                    for (n, it) in items {
                        let Some((_, d)) = fields.iter().find(|(f, _)| *f == n) else {
                            return err(pos, format!("struct `{sn}` has no field `{n}`"));
                        };
                        self.assign_val(d, it, pos)?;
                    }
                }
                _ => return err(pos, format!("cannot assign this value to a `{sn}`")),
            },
            Place::Stack { headers, .. } => match v {
                Val::Place(Place::Stack { headers: src, .. }) if src.len() == headers.len() => {
                    for (d, s) in headers.iter().zip(src) {
                        self.emit(prim(
                            "assign_header",
                            vec![m::Arg::Header(*d), m::Arg::Header(s)],
                        ));
                    }
                }
                _ => return err(pos, "cannot assign this value to a header stack"),
            },
            Place::Param(..) => {
                return err(pos, "cannot assign to a directionless action parameter")
            }
            _ => return err(pos, "cannot assign to this expression"),
        }
        Ok(())
    }

    fn assign(&mut self, l: &Expr, r: &Expr, pos: Pos) -> R<()> {
        if let ExprKind::Slice(..) = &l.kind {
            return self.assign_slice_with(l, |this| this.expr(r), r.pos);
        }
        let lv = self.expr(l)?;
        let Val::Place(dst) = lv else {
            return err(l.pos, "the left side of `=` is not assignable");
        };
        let v = self.expr(r)?;
        self.assign_val(&dst, v, pos)
    }

    /// Write `v` into the slice l-value `l` (`x[h:l]`, also nested slices).
    pub(super) fn assign_slice(&mut self, l: &Expr, v: Val, vpos: Pos) -> R<()> {
        self.assign_slice_with(l, |_| Ok(v), vpos)
    }

    /// Write into the slice l-value `l` the value `value` evaluates to (after the left side).
    fn assign_slice_with(
        &mut self,
        l: &Expr,
        value: impl FnOnce(&mut Self) -> R<Val>,
        vpos: Pos,
    ) -> R<()> {
        if let ExprKind::Slice(base, h, lo) = &l.kind {
            // Nested slices `x[a:b][c:d]` write `x[b+c:b+d]`.
            let mut hi = self.const_u32(h, "a slice bound")?;
            let mut lo = self.const_u32(lo, "a slice bound")?;
            let mut base = base;
            while let ExprKind::Slice(b2, h2, l2) = &base.kind {
                let h2 = self.const_u32(h2, "a slice bound")?;
                let l2 = self.const_u32(l2, "a slice bound")?;
                if hi < lo || hi > h2.saturating_sub(l2) || h2 < l2 {
                    return err(
                        l.pos,
                        format!("slice [{hi}:{lo}] is out of range of slice [{h2}:{l2}]"),
                    );
                }
                hi += l2;
                lo += l2;
                base = b2;
            }
            let bv = self.expr(base)?;
            let (f, t) = self.field_of(&bv, base.pos)?;
            let w = match t {
                Ty::Bit(w) | Ty::Int(w) => w,
                _ => return err(base.pos, "only bit<W>/int<W> values can be sliced"),
            };
            if hi < lo || hi >= w {
                return err(
                    l.pos,
                    format!("slice [{hi}:{lo}] is out of range for a {w}-bit value"),
                );
            }
            let sw = hi - lo + 1;
            let v = value(self)?;
            let v = self.convert(v, &Ty::Bit(sw), vpos)?;
            let (ve, _) = self.data(v, vpos)?;
            // keep = field & ~(mask << lo)
            let keep_mask: Vec<u8> = {
                let full = mask_int(w).to_bytes(w);
                let hole = m::Int {
                    negative: false,
                    magnitude: shl_bytes(&mask_int(sw).to_bytes(w), lo),
                }
                .to_bytes(w);
                full.iter().zip(hole).map(|(a, b)| a & !b).collect()
            };
            let keep = op(
                m::Op::And,
                Some(m::Expr::Field(f)),
                Some(m::Expr::Const(m::Int {
                    negative: false,
                    magnitude: keep_mask,
                })),
            );
            let ins = op(
                m::Op::Shl,
                Some(op(m::Op::And, Some(ve), Some(m::Expr::Const(mask_int(sw))))),
                Some(cnst(lo as i128)),
            );
            let e = op(m::Op::Or, Some(keep), Some(ins));
            self.emit(prim("assign", vec![m::Arg::Field(f), m::Arg::Expr(e)]));
            return Ok(());
        }
        err(l.pos, "expected a slice")
    }

    /// Lower statements into primitives (`self.cur`).
    pub(super) fn stmts(&mut self, ss: &[Stmt]) -> R<()> {
        for s in ss {
            self.stmt(s)?;
        }
        Ok(())
    }

    pub(super) fn jump_if_zero(&mut self, cond: m::Expr) -> usize {
        let at = self.cur.len();
        self.emit(prim(
            "_jump_if_zero",
            vec![
                m::Arg::Expr(op(m::Op::B2D, None, Some(cond))),
                m::Arg::Const(int_of(0)),
            ],
        ));
        at
    }

    pub(super) fn jump(&mut self) -> usize {
        let at = self.cur.len();
        self.emit(prim("_jump", vec![m::Arg::Const(int_of(0))]));
        at
    }

    pub(super) fn stmt(&mut self, s: &Stmt) -> R<()> {
        // A write through a run-time header stack index: one guarded copy per element.
        let target = match &s.kind {
            StmtKind::Assign(l, _) => Some(l),
            StmtKind::Call(e) => Some(e),
            _ => None,
        };
        if let Some(t) = target {
            if let Some((at, base, idx)) = self.dyn_index_in_chain(t)? {
                if self.mode != Mode::Action {
                    return err(
                        s.pos,
                        "run-time header stack indices are only supported in controls",
                    );
                }
                let (n, tmp) = self.dyn_index_setup(&base, &idx)?;
                let mut ends = Vec::new();
                self.per_index(tmp, n, |this, k| {
                    let kind = match &s.kind {
                        StmtKind::Assign(l, r) => StmtKind::Assign(
                            replace_index(l, at, k),
                            replace_index_everywhere(r, at, k),
                        ),
                        StmtKind::Call(e) => StmtKind::Call(replace_index(e, at, k)),
                        other => other.clone(),
                    };
                    this.stmt(&Stmt { kind, pos: s.pos })?;
                    ends.push(this.jump());
                    Ok(())
                })?;
                let end = self.cur.len();
                for j in ends {
                    self.patch_jump(j, end);
                }
                return Ok(());
            }
        }
        match &s.kind {
            StmtKind::Assign(l, r) => self.assign(l, r, s.pos),
            StmtKind::Call(e) => {
                let ExprKind::Call(c, t, a) = &e.kind else {
                    return err(s.pos, "expected a call");
                };
                let v = self.call(c, t, a, e.pos)?;
                if let (Some(Val::Lookahead(0, w, _)), Mode::Parser) = (&v, self.mode) {
                    // A bare `lookahead<T>();` still needs T's bits in the packet (P4-16:
                    // otherwise error.PacketTooShort): a placeholder `verify`, given its
                    // condition once the state's offset is known (`check_bare_lookaheads`).
                    self.flush_parser();
                    let code = self
                        .errors
                        .iter()
                        .position(|e| e == "PacketTooShort")
                        .unwrap_or(1);
                    self.parser_ops
                        .push(m::ParserOp::Verify(m::Expr::Bool(true), cnst(code as i128)));
                    let at = self.parser_ops.len() - 1;
                    self.bare_lookaheads.push((self.cur_state.clone(), at, *w));
                }
                Ok(())
            }
            StmtKind::Empty => Ok(()),
            StmtKind::Block(b) => {
                self.scope.push();
                let r = self.stmts(b);
                self.scope.pop();
                r
            }
            StmtKind::Var(d) => self.local_decl(d),
            StmtKind::If(c, t, e) => {
                let cv = self.expr(c)?;
                if let Val::Const(v, _) = cv {
                    if v != 0 {
                        return self.stmt(t);
                    }
                    return match e {
                        Some(e) => self.stmt(e),
                        None => Ok(()),
                    };
                }
                if self.mode == Mode::Parser {
                    // A parser state's own `if`s were split into states before lowering;
                    // one reached here sits in a function inlined into the state.
                    return err(
                        s.pos,
                        "`if` inside a function called from a parser state is not supported \
                         (an `if` directly in the state is)",
                    );
                }
                if self.mode != Mode::Action {
                    return err(s.pos, "`if` statements are not supported here (only in actions and control apply blocks)");
                }
                let ce = self.boolean(cv, c.pos)?;
                let jz = self.jump_if_zero(ce);
                self.stmt(t)?;
                match e {
                    Some(e) => {
                        let j = self.jump();
                        let else_start = self.cur.len();
                        self.patch_jump(jz, else_start);
                        self.stmt(e)?;
                        let end = self.cur.len();
                        self.patch_jump(j, end);
                    }
                    None => {
                        let end = self.cur.len();
                        self.patch_jump(jz, end);
                    }
                }
                Ok(())
            }
            StmtKind::Switch(e, cases) => {
                // switch on a value inside an action: a chain of conditionals.
                let v = self.expr(e)?;
                let (ve, vt) = self.data(v, e.pos)?;
                let tmp = self.new_scalar("switch_tmp", &vt);
                self.emit(prim("assign", vec![m::Arg::Field(tmp), to_arg(ve)]));
                let mut end_jumps = Vec::new();
                let mut pending: Vec<Val> = Vec::new();
                for c in cases {
                    if let Some(l) = &c.label {
                        pending.push(self.expr(l)?);
                    }
                    let Some(body) = &c.body else { continue };
                    let is_default = c.label.is_none();
                    let mut jz = None;
                    if !is_default {
                        let mut cond: Option<m::Expr> = None;
                        for p in pending.drain(..) {
                            let p = self.convert(p, &vt, c.pos)?;
                            let (pe, _) = self.data(p, c.pos)?;
                            let eq = op(m::Op::Eq, Some(m::Expr::Field(tmp)), Some(pe));
                            cond = Some(match cond {
                                Some(x) => op(m::Op::LOr, Some(x), Some(eq)),
                                None => eq,
                            });
                        }
                        if let Some(cond) = cond {
                            jz = Some(self.jump_if_zero(cond));
                        }
                    }
                    self.scope.push();
                    let r = self.stmts(body);
                    self.scope.pop();
                    r?;
                    end_jumps.push(self.jump());
                    if let Some(j) = jz {
                        let here = self.cur.len();
                        self.patch_jump(j, here);
                    }
                }
                let end = self.cur.len();
                for j in end_jumps {
                    self.patch_jump(j, end);
                }
                Ok(())
            }
            StmtKind::For {
                init,
                cond,
                update,
                body,
            } => {
                if self.mode != Mode::Action {
                    return err(
                        s.pos,
                        "`for` loops are only supported in actions and controls",
                    );
                }
                self.scope.push();
                let r = (|| {
                    for i in init {
                        self.stmt(i)?;
                    }
                    let start = self.cur.len();
                    let jz = match cond {
                        Some(c) => {
                            let cv = self.expr(c)?;
                            let ce = self.boolean(cv, c.pos)?;
                            Some(self.jump_if_zero(ce))
                        }
                        None => None,
                    };
                    self.loops.push((Vec::new(), Vec::new()));
                    let rb = self.stmt(body);
                    let (breaks, conts) = self.loops.pop().unwrap_or_default();
                    rb?;
                    let update_at = self.cur.len();
                    for u in update {
                        self.stmt(u)?;
                    }
                    self.emit(prim("_jump", vec![m::Arg::Const(int_of(start as i128))]));
                    let end = self.cur.len();
                    if let Some(j) = jz {
                        self.patch_jump(j, end);
                    }
                    for b in breaks {
                        self.patch_jump(b, end);
                    }
                    for c in conts {
                        self.patch_jump(c, update_at);
                    }
                    Ok(())
                })();
                self.scope.pop();
                r
            }
            StmtKind::Break | StmtKind::Continue => {
                if self.loops.is_empty() {
                    return err(s.pos, "`break`/`continue` outside a loop");
                }
                let j = self.jump();
                if let Some((b, c)) = self.loops.last_mut() {
                    if matches!(s.kind, StmtKind::Break) {
                        b.push(j);
                    } else {
                        c.push(j);
                    }
                }
                Ok(())
            }
            StmtKind::Exit => {
                if self.mode != Mode::Action {
                    return err(s.pos, "`exit` is not allowed here");
                }
                // Copy-out of the enclosing calls' out/inout arguments still happens after
                // `exit` (innermost call first); then leave the outermost action.
                for frame in self.exit_copyouts.clone().iter().rev() {
                    for wb in frame {
                        self.copy_out(wb)?;
                    }
                }
                self.emit(prim("exit", vec![]));
                let j = self.jump();
                match self.return_jumps.first_mut() {
                    Some(v) => v.push(j),
                    None => {
                        self.cur.pop();
                    }
                }
                Ok(())
            }
            StmtKind::Return(v) => {
                if let Some(v) = v {
                    let val = self.expr(v)?;
                    match self.ret_slot.clone() {
                        Some(slot) => self.assign_val(&slot, val, v.pos)?,
                        None => return err(v.pos, "`return` with a value outside a function"),
                    }
                }
                if self.mode != Mode::Action {
                    return err(s.pos, "`return` is not allowed here");
                }
                let j = self.jump();
                match self.return_jumps.last_mut() {
                    Some(v) => v.push(j),
                    None => {
                        self.cur.pop();
                    }
                }
                Ok(())
            }
        }
    }

    /// A local declaration (variable or constant) in a block.
    pub(super) fn local_decl(&mut self, d: &Decl) -> R<()> {
        match &d.kind {
            DeclKind::Var { ty, name, init } => {
                let t = self.ty(ty).map_err(|mut e| {
                    if e.pos == Pos::default() {
                        e.pos = d.pos;
                    }
                    e
                })?;
                let p = self.alloc(name, &t, d.pos, false)?;
                if let Some(i) = init {
                    let v = self.expr(i)?;
                    self.assign_val(&p, v, i.pos)?;
                } else if let Place::Header(h, _) = &p {
                    // Uninitialized local headers are invalid.
                    self.emit(prim("remove_header", vec![m::Arg::Header(*h)]));
                }
                self.scope.set(name, Val::Place(p));
                Ok(())
            }
            DeclKind::Const { ty, name, value } => {
                let t = self.ty(ty)?;
                let v = self.expr(value)?;
                let v = self.convert(v, &t, value.pos)?;
                if !matches!(v, Val::Const(..)) {
                    return err(
                        value.pos,
                        format!("initializer of `{name}` is not a constant"),
                    );
                }
                self.scope.set(name, v);
                Ok(())
            }
            _ => err(d.pos, "this declaration is not allowed inside a block"),
        }
    }

    /// Convert the pending primitives of a parser state into parser ops.
    pub(super) fn flush_parser(&mut self) {
        for p in std::mem::take(&mut self.cur) {
            if p.op == "assign" && p.params.len() == 2 {
                if let m::Arg::Field(f) = p.params[0] {
                    let e = match &p.params[1] {
                        m::Arg::Field(x) => m::Expr::Field(*x),
                        m::Arg::Const(c) => m::Expr::Const(c.clone()),
                        m::Arg::Expr(e) => e.clone(),
                        _ => {
                            self.parser_ops.push(m::ParserOp::Primitive(p));
                            continue;
                        }
                    };
                    self.parser_ops.push(m::ParserOp::Set(f, e));
                    continue;
                }
            }
            self.parser_ops.push(m::ParserOp::Primitive(p));
        }
    }
}

/// Shift a big-endian byte string left by `n` bits (keeping its length + growth).
fn shl_bytes(b: &[u8], n: u32) -> Vec<u8> {
    let mut v: Vec<u8> = b.to_vec();
    v.resize(v.len() + (n / 8) as usize, 0);
    let r = n % 8;
    if r > 0 {
        let mut out = vec![0u8; v.len() + 1];
        for (i, byte) in v.iter().enumerate() {
            out[i] |= byte >> (8 - r);
            out[i + 1] |= byte << r;
        }
        v = out;
    }
    v
}

/// A copy-out after an inlined call: to a place fixed at the call, or through a run-time
/// stack index evaluated once (argument, index node, elements, index temp, temporary).
#[derive(Clone, Debug)]
pub(super) enum Writeback {
    Place(Place, Place, Pos),
    /// A slice `x[h:l]` passed as an out/inout argument: copied back from the temporary.
    Slice(Expr, Place),
    Dyn(Expr, Pos, usize, m::FieldRef, Place),
}

/// Places a temporary can stand for (storage that `assign_val` copies as a whole);
/// `standard_metadata` (header `std`) stays bound by reference.
pub(super) fn copyable(p: &Place, std: u32) -> bool {
    !matches!(p, Place::Header(h, _) if *h == std)
        && matches!(
            p,
            Place::Field(..)
                | Place::Header(..)
                | Place::Struct(..)
                | Place::Union(..)
                | Place::Stack { .. }
        )
}
