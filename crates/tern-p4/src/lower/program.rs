//! Lowering of the program structure: the `V1Switch` package, parsers (states, select),
//! controls (tables, hidden tables for plain statements, conditionals, hit/miss and
//! action_run switches), extern instances, checksum controls and the deparser.

use super::body::Mode;
use super::*;

/// The scope a (sub-parser) state's names resolve in; `None` = the parser's own scope.
type StateEnv = Option<HashMap<String, Val>>;

const CORE_ERRORS: [&str; 7] = [
    "NoError",
    "PacketTooShort",
    "NoMatch",
    "StackOutOfBounds",
    "HeaderTooShort",
    "ParserTimeout",
    "ParserInvalidArgument",
];

/// Parser states may contain `if` statements; BMv2 parsers branch only at transitions, so a
/// state `S { pre; if (c) A else B; rest; transition T }` becomes `S { pre; v = c; select(v) }`,
/// `S_t { A }`, `S_f { B }` and `S_j { rest; transition T }`.
fn split_parser_ifs(states: &[State]) -> Vec<State> {
    fn flatten(body: &[Stmt], out: &mut Vec<Stmt>) {
        for s in body {
            match &s.kind {
                StmtKind::Block(b) => flatten(b, out),
                _ => out.push(s.clone()),
            }
        }
    }
    let mut out = Vec::new();
    let mut work: std::collections::VecDeque<State> = states.iter().cloned().collect();
    let mut k = 0usize;
    while let Some(mut st) = work.pop_front() {
        let mut body = Vec::new();
        flatten(&st.body, &mut body);
        let Some(i) = body.iter().position(|s| matches!(s.kind, StmtKind::If(..))) else {
            st.body = body;
            out.push(st);
            continue;
        };
        let rest = body.split_off(i + 1);
        let Some(Stmt {
            kind: StmtKind::If(c, a, b),
            pos,
        }) = body.pop()
        else {
            continue;
        };
        let var = format!("__if{k}");
        let (tn, fname, jn) = (
            format!("{}_if{k}_true", st.name),
            format!("{}_if{k}_false", st.name),
            format!("{}_if{k}_join", st.name),
        );
        k += 1;
        let one = |p: Pos| Expr {
            kind: ExprKind::Int(1, None),
            pos: p,
        };
        body.push(Stmt {
            kind: StmtKind::Var(Decl {
                annotations: vec![],
                kind: DeclKind::Var {
                    ty: TypeRef::Bit(Box::new(one(pos))),
                    name: var.clone(),
                    init: Some(Expr {
                        kind: ExprKind::Cast(TypeRef::Bit(Box::new(one(pos))), Box::new(c.clone())),
                        pos: c.pos,
                    }),
                },
                pos,
            }),
            pos,
        });
        let head = State {
            annotations: st.annotations.clone(),
            name: st.name.clone(),
            body,
            transition: Some(Transition::Select(
                vec![Expr {
                    kind: ExprKind::Name(var),
                    pos,
                }],
                vec![
                    (one(pos), tn.clone(), pos),
                    (
                        Expr {
                            kind: ExprKind::Default,
                            pos,
                        },
                        fname.clone(),
                        pos,
                    ),
                ],
            )),
            pos: st.pos,
        };
        let branch = |name: String, s: Option<Stmt>| State {
            annotations: vec![],
            name,
            body: s.into_iter().collect(),
            transition: Some(Transition::Direct(jn.clone(), pos)),
            pos,
        };
        let t = branch(tn, Some((*a).clone()));
        let f = branch(fname, b.map(|b| *b));
        let j = State {
            annotations: vec![],
            name: jn.clone(),
            body: rest,
            transition: st.transition.clone(),
            pos,
        };
        out.push(head);
        work.push_front(j);
        work.push_front(f);
        work.push_front(t);
    }
    out
}

/// Cover `[lo, hi]` (width `w` ≤ 64) with value/mask prefix blocks.
fn range_to_masks(lo: i128, hi: i128, w: u32) -> Vec<(i128, Option<i128>)> {
    let full: i128 = (1i128 << w) - 1;
    let (mut lo, hi) = (lo.clamp(0, full), hi.clamp(0, full));
    let mut out = Vec::new();
    while lo <= hi && out.len() < 4096 {
        let mut size: i128 = 1;
        while size < (1i128 << w) && lo % (size * 2) == 0 && lo + size * 2 - 1 <= hi {
            size *= 2;
        }
        out.push((lo, Some(full & !(size - 1))));
        lo += size;
    }
    out
}

/// In a deparser, `if (X.isValid()) { pkt.emit(X); }` means the same as `pkt.emit(X);` (BMv2
/// emits only valid headers), so such guards are dropped; other conditionals stay (and are
/// reported as unsupported).
fn strip_validity_guards(body: &[Stmt]) -> Vec<Stmt> {
    fn guard_of(c: &Expr) -> Option<&Expr> {
        match &c.kind {
            ExprKind::Call(f, _, a) if a.is_empty() => match &f.kind {
                ExprKind::Member(x, m) if m == "isValid" => Some(x),
                _ => None,
            },
            _ => None,
        }
    }
    fn emits_only(s: &Stmt, x: &Expr) -> bool {
        match &s.kind {
            StmtKind::Block(b) => b.len() == 1 && emits_only(&b[0], x),
            StmtKind::Call(e) => match &e.kind {
                ExprKind::Call(f, _, a) => {
                    matches!(&f.kind, ExprKind::Member(_, m) if m == "emit")
                        && a.len() == 1
                        && expr_text(&a[0]) == expr_text(x)
                }
                _ => false,
            },
            _ => false,
        }
    }
    body.iter()
        .map(|s| match &s.kind {
            StmtKind::If(c, t, None) => match guard_of(c) {
                Some(x) if emits_only(t, x) => (**t).clone(),
                _ => s.clone(),
            },
            _ => s.clone(),
        })
        .collect()
}

fn ann_name(anns: &[Annotation]) -> Option<String> {
    annotation_str(anns, "name")
}

fn key_kind(kind: &str) -> Option<m::MatchKind> {
    Some(match kind {
        "exact" => m::MatchKind::Exact,
        "lpm" => m::MatchKind::Lpm,
        "ternary" | "optional" => m::MatchKind::Ternary,
        "range" => m::MatchKind::Range,
        _ => return None,
    })
}

impl Lower {
    /// Run the whole lowering.
    pub fn run(mut self) -> Result<(m::Program, Extra), Vec<Diagnostic>> {
        self.collect();
        for (i, e) in CORE_ERRORS.iter().enumerate() {
            if !self.errors.iter().any(|x| x == e) {
                self.errors.insert(i.min(self.errors.len()), e.to_string());
            }
        }
        if !self.diags.is_empty() {
            return Err(self.diags);
        }
        if let Err(e) = self.program() {
            self.diags.push(e);
        }
        if !self.diags.is_empty() {
            return Err(self.diags);
        }
        Ok((self.prog, self.extra))
    }

    fn find_decl(&self, name: &str) -> Option<Decl> {
        self.decls
            .iter()
            .find(|d| {
                d.name() == Some(name)
                    && matches!(d.kind, DeclKind::Parser { .. } | DeclKind::Control { .. })
            })
            .cloned()
    }

    fn program(&mut self) -> R<()> {
        let main = self
            .decls
            .iter()
            .rev()
            .find(|d| matches!(&d.kind, DeclKind::Instance { name, .. } if name == "main"))
            .cloned();
        let Some(main) = main else {
            let pos = self.decls.last().map(|d| d.pos).unwrap_or_default();
            return err(
                pos,
                "the program has no `main` package instance (e.g. `V1Switch(...) main;`)",
            );
        };
        let DeclKind::Instance { ty, args, .. } = &main.kind else {
            return err(main.pos, "bad main");
        };
        match ty {
            TypeRef::Named(n, _, _) if n == "V1Switch" => {}
            _ => {
                return err(
                    main.pos,
                    "`main` must be a V1Switch package (tern compiles v1model programs)",
                )
            }
        }
        if args.len() != 6 {
            return err(main.pos, format!("V1Switch takes 6 arguments (parser, verify checksum, ingress, egress, compute checksum, deparser) but got {}", args.len()));
        }
        let mut blocks = Vec::new();
        // Constructor arguments of each block (compile-time constants).
        let mut top_ctor: Vec<Vec<Expr>> = Vec::new();
        for a in args {
            let name = match &a.kind {
                ExprKind::Call(c, _, cargs) => match &c.kind {
                    ExprKind::Name(n) => {
                        top_ctor.push(cargs.clone());
                        n.clone()
                    }
                    _ => {
                        return err(
                            a.pos,
                            "expected a parser or control instantiation like `MyIngress()`",
                        )
                    }
                },
                ExprKind::Name(n) => {
                    top_ctor.push(Vec::new());
                    n.clone()
                }
                _ => {
                    return err(
                        a.pos,
                        "expected a parser or control instantiation like `MyIngress()`",
                    )
                }
            };
            let d = self.find_decl(&name).ok_or_else(|| {
                Diagnostic::new(
                    a.pos,
                    format!("`{name}` is not a declared parser or control"),
                )
            })?;
            blocks.push(d);
        }
        // scalars and standard_metadata.
        self.prog.header_types.push(m::HeaderType {
            name: "scalars_0".into(),
            id: 0,
            fields: vec![],
            length_exp: None,
            max_length: 0,
        });
        self.header_type_index.insert("scalars_0".into(), 0);
        self.prog.headers.push(m::Header {
            name: "scalars".into(),
            id: 0,
            header_type: 0,
            metadata: true,
        });
        self.used_names.insert("scalars".into(), 1);
        let mut std_fields = self
            .structs
            .get("standard_metadata_t")
            .cloned()
            .ok_or_else(|| {
                Diagnostic::new(
                    main.pos,
                    "standard_metadata_t is not declared (include <v1model.p4>)",
                )
            })?;
        let total: u32 = std_fields
            .iter()
            .map(|(_, t, _)| t.width().unwrap_or(0))
            .sum();
        if total & 7 != 0 {
            std_fields.push(("_padding".into(), Ty::Bit(8 - total % 8), vec![]));
        }
        self.headers
            .insert("standard_metadata".into(), std_fields.clone());
        let std_h = self.new_header("standard_metadata", "standard_metadata", true);
        self.std_header = std_h;
        for (i, (_, _, anns)) in std_fields.iter().enumerate() {
            if let Some(a) = annotation_str(anns, "alias") {
                self.prog.field_aliases.push((
                    a,
                    m::FieldRef {
                        header: std_h,
                        field: i as u32,
                    },
                ));
            }
        }
        let std_place = Place::Header(std_h, "standard_metadata".into());

        // Roots from the parser's parameters.
        let DeclKind::Parser { params, .. } = &blocks[0].kind else {
            return err(args[0].pos, "the first V1Switch argument must be a parser");
        };
        if params.len() != 4 {
            return err(blocks[0].pos, "the v1model parser takes (packet_in, out headers, inout metadata, inout standard_metadata_t)");
        }
        let ht = self.ty(&params[1].ty)?;
        let mt = self.ty(&params[2].ty)?;
        let hdr = match &ht {
            Ty::Struct(s) => self.alloc_root(s, "", params[1].pos, false)?,
            Ty::Header(h) => Place::Header(self.new_header(&params[1].name, h, false), h.clone()),
            t => {
                return err(
                    params[1].pos,
                    format!("the headers parameter must be a struct, found {}", t.name()),
                )
            }
        };
        let meta = match &mt {
            Ty::Struct(s) => self.alloc_root(s, &params[2].name, params[2].pos, true)?,
            t => {
                return err(
                    params[2].pos,
                    format!(
                        "the metadata parameter must be a struct, found {}",
                        t.name()
                    ),
                )
            }
        };

        let roles = [
            "parser", "verify", "ingress", "egress", "compute", "deparser",
        ];
        for (i, d) in blocks.iter().enumerate() {
            self.top_ctor = top_ctor.get(i).cloned().unwrap_or_default();
            let r = match roles[i] {
                "parser" => self.lower_parser(d, &hdr, &meta, &std_place),
                "deparser" => self.lower_deparser(d, &hdr),
                "verify" | "compute" => self.lower_checksum_control(d, &hdr, &meta),
                role => self.lower_pipeline(d, role, &hdr, &meta, &std_place),
            };
            if let Err(e) = r {
                self.diags.push(e);
            }
        }
        // A direct meter that is never read still needs a result field in BMv2 JSON.
        for i in 0..self.prog.meter_arrays.len() {
            if self.prog.meter_arrays[i].is_direct
                && self.prog.meter_arrays[i].result_target.is_none()
            {
                let f = self.new_scalar("meter_color", &Ty::Bit(32));
                self.prog.meter_arrays[i].result_target = Some(f);
            }
        }
        // Scalars' fields, errors.
        self.prog.header_types[0].fields = std::mem::take(&mut self.scalar_fields);
        let total: u32 = self.prog.header_types[0]
            .fields
            .iter()
            .map(|f| match f.width {
                m::FieldWidth::Fixed(w) => w,
                _ => 0,
            })
            .sum();
        if total & 7 != 0 {
            self.prog.header_types[0].fields.push(m::FieldDef {
                name: "_padding_0".into(),
                width: m::FieldWidth::Fixed(8 - total % 8),
                signed: false,
                saturating: false,
            });
        }
        self.prog.errors = self
            .errors
            .iter()
            .enumerate()
            .map(|(i, e)| (e.clone(), i as i64))
            .collect();
        Ok(())
    }

    fn alloc_root(&mut self, s: &str, prefix: &str, pos: Pos, meta: bool) -> R<Place> {
        let fields = self.structs.get(s).cloned().unwrap_or_default();
        let mut v = Vec::new();
        for (n, ft, anns) in fields {
            let path = if prefix.is_empty() {
                n.clone()
            } else {
                format!("{prefix}.{n}")
            };
            let p = self.alloc(&path, &ft, pos, meta)?;
            if meta {
                if let Place::Field(f, _) = &p {
                    self.meta_fields.push((*f, anns.clone()));
                }
            }
            v.push((n, p));
        }
        Ok(Place::Struct(s.into(), v))
    }

    /// Constructor parameters of a block `main` instantiates, bound to the compile-time
    /// constants given there (`V1Switch(P(8w2), …)`).
    fn bind_top_ctor(&mut self, d: &Decl) -> R<()> {
        let (DeclKind::Parser { ctor_params, .. } | DeclKind::Control { ctor_params, .. }) =
            &d.kind
        else {
            return Ok(());
        };
        let args = std::mem::take(&mut self.top_ctor);
        let what = d.name().unwrap_or("?").to_string();
        let vals = self.const_ctor_args(&what, ctor_params, &args, d.pos)?;
        for (p, v) in ctor_params.iter().zip(vals) {
            self.scope.set(&p.name, v);
        }
        Ok(())
    }

    /// Evaluate constructor arguments that must be compile-time constants.
    fn const_ctor_args(
        &mut self,
        what: &str,
        ctor_params: &[Param],
        args: &[Expr],
        pos: Pos,
    ) -> R<Vec<Val>> {
        if args.len() != ctor_params.len() {
            return err(
                pos,
                format!(
                    "`{what}` expects {} constructor argument(s) but got {}",
                    ctor_params.len(),
                    args.len()
                ),
            );
        }
        let mut vals = Vec::new();
        for (p, a) in ctor_params.iter().zip(args) {
            let v = self.expr(a)?;
            let t = self.ty(&p.ty)?;
            match v {
                Val::Const(..) => vals.push(self.convert(v, &t, a.pos)?),
                _ => {
                    return err(
                        a.pos,
                        format!(
                            "constructor argument `{}` of `{what}` must be a compile-time constant",
                            p.name
                        ),
                    )
                }
            }
        }
        Ok(vals)
    }

    fn bind_params(&mut self, params: &[Param], vals: &[Option<Place>]) -> R<()> {
        for (p, v) in params.iter().zip(vals) {
            match v {
                Some(pl) => self.scope.set(&p.name, Val::Place(pl.clone())),
                None => self.scope.set(&p.name, Val::Place(Place::Packet)),
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ parser

    fn lower_parser(&mut self, d: &Decl, hdr: &Place, meta: &Place, std: &Place) -> R<()> {
        let DeclKind::Parser {
            name,
            params,
            locals,
            states,
            ..
        } = &d.kind
        else {
            return err(d.pos, "expected a parser");
        };
        self.scope.push();
        self.bind_global_instances()?;
        self.control_name = name.clone();
        self.bind_top_ctor(d)?;
        self.bind_params(
            params,
            &[
                None,
                Some(hdr.clone()),
                Some(meta.clone()),
                Some(std.clone()),
            ],
        )?;
        self.mode = Mode::Parser;
        self.cur.clear();
        self.parser_ops.clear();
        let mut init_ops = Vec::new();
        let mut subs: HashMap<String, (Decl, Vec<Val>)> = HashMap::new();
        for l in locals {
            match &l.kind {
                DeclKind::ValueSet { ty, size, name: vn } => {
                    let t = self.ty(ty)?;
                    let w = match &t {
                        Ty::Bit(w) => *w,
                        Ty::Struct(s) => self
                            .structs
                            .get(s)
                            .map(|f| f.iter().map(|(_, t, _)| t.width().unwrap_or(0)).sum())
                            .unwrap_or(0),
                        t => {
                            return err(
                                l.pos,
                                format!("value sets of type {} are not supported", t.name()),
                            )
                        }
                    };
                    let n = self.const_size(size, "the value set size")?;
                    let idx = self.prog.parse_vsets.len() as u32;
                    let qn = format!("{name}.{vn}");
                    self.prog.parse_vsets.push(m::ParseVset {
                        name: qn.clone(),
                        id: idx as i64,
                        compressed_bitwidth: w,
                    });
                    self.extra.value_sets.push((qn, w, n));
                    self.scope.set(vn, Val::Place(Place::ValueSet(idx)));
                }
                DeclKind::Instance {
                    ty: TypeRef::Named(k, _, _),
                    name: inst,
                    args,
                } if matches!(
                    self.find_decl(k).map(|d| d.kind),
                    Some(DeclKind::Parser { .. })
                ) =>
                {
                    if let Some(sd) = self.find_decl(k) {
                        // Constructor arguments: compile-time constants, bound in the
                        // sub-parser's scope at each `apply`.
                        let DeclKind::Parser { ctor_params, .. } = &sd.kind else {
                            continue;
                        };
                        let vals = self.const_ctor_args(k, ctor_params, args, l.pos)?;
                        subs.insert(inst.clone(), (sd, vals));
                    }
                }
                DeclKind::Instance { .. } => self.instance(l, name)?,
                _ => {
                    self.local_decl(l)?;
                    self.flush_parser();
                    init_ops.append(&mut self.parser_ops);
                }
            }
        }
        let with_env = self.expand_subparsers(states, &subs)?;
        let mut states_env: Vec<(State, StateEnv)> = Vec::new();
        let mut dyn_count = 0usize;
        for (st, env) in with_env {
            let st = self.parser_dyn_indices(st, &env, &mut dyn_count)?;
            for s2 in split_parser_ifs(std::slice::from_ref(&st)) {
                states_env.push((s2, env.clone()));
            }
        }
        let states: Vec<State> = states_env.iter().map(|(s, _)| s.clone()).collect();
        let states = &states;
        let mut pstates: Vec<m::ParseState> = Vec::new();
        let mut index: HashMap<String, u32> = HashMap::new();
        for s in states {
            if index.contains_key(&s.name) {
                return err(s.pos, format!("duplicate parser state `{}`", s.name));
            }
            if s.name == "accept" || s.name == "reject" {
                return err(s.pos, format!("`{}` is a reserved state name", s.name));
            }
            index.insert(s.name.clone(), pstates.len() as u32);
            pstates.push(m::ParseState {
                name: s.name.clone(),
                id: pstates.len() as i64,
                ops: vec![],
                key: vec![],
                key_bytes: 0,
                transitions: vec![],
            });
        }
        let Some(start) = index.get("start").copied() else {
            return err(d.pos, format!("parser `{name}` has no `start` state"));
        };
        let mut reject_states: HashMap<String, u32> = HashMap::new();
        self.bare_lookaheads.clear();
        for (s, env) in &states_env {
            self.cur_state = s.name.clone();
            self.cur.clear();
            self.parser_ops.clear();
            if s.name == "start" {
                self.parser_ops.append(&mut init_ops.clone());
            }
            if let Some(e) = env {
                self.scope.vars.push(e.clone());
            }
            let r = self.stmts(&s.body);
            self.flush_parser();
            let r = r.and_then(|_| self.transition(s, &index, &mut pstates, &mut reject_states));
            if env.is_some() {
                self.scope.pop();
            }
            if let Err(e) = r {
                self.diags.push(e);
            }
        }
        self.scope.pop();
        self.check_bare_lookaheads(&mut pstates, start);
        self.prog.parsers.push(m::Parser {
            name: "parser".into(),
            id: 0,
            init_state: Some(start),
            states: pstates,
        });
        Ok(())
    }

    /// Bits an extract or advance moves the parser by, when fixed.
    fn op_bits(&self, op: &m::ParserOp) -> Option<u64> {
        let type_bits = |ht: u32| -> Option<u64> {
            let t = self.prog.header_types.get(ht as usize)?;
            t.fields
                .iter()
                .map(|f| match f.width {
                    m::FieldWidth::Fixed(w) => Some(w as u64),
                    _ => None,
                })
                .sum()
        };
        match op {
            m::ParserOp::Extract(m::ExtractTarget::Regular(h)) => {
                type_bits(self.prog.headers.get(*h as usize)?.header_type)
            }
            m::ParserOp::Extract(m::ExtractTarget::Stack(s)) => {
                type_bits(self.prog.header_stacks.get(*s as usize)?.header_type)
            }
            m::ParserOp::Extract(m::ExtractTarget::UnionStack(s, mi)) => {
                let ut = self.prog.header_union_stacks.get(*s as usize)?.union_type;
                let ty = self.prog.header_union_types.get(ut as usize)?;
                type_bits(ty.members.get(*mi as usize)?.1)
            }
            m::ParserOp::ExtractVl(..) => None,
            m::ParserOp::Advance(m::Expr::Const(c)) if !c.negative && c.magnitude.len() <= 8 => {
                Some(c.magnitude.iter().fold(0u64, |a, b| a << 8 | *b as u64))
            }
            m::ParserOp::Advance(_) => None,
            _ => Some(0),
        }
    }

    /// Give each bare `lookahead<T>();` its check: where the state's offset in the packet is
    /// the same on every path from `start` (fixed-size extracts and advances), it becomes
    /// `verify(standard_metadata.packet_length >= bytes up to the end of T,
    /// error.PacketTooShort)`; elsewhere the placeholder is dropped (no check, as p4c's BMv2
    /// back end, which emits nothing for it).
    fn check_bare_lookaheads(&mut self, pstates: &mut [m::ParseState], start: u32) {
        if self.bare_lookaheads.is_empty() {
            return;
        }
        // Offset in bits at each state's entry: None = not reached yet, Some(None) = differs
        // between paths (or not fixed).
        let mut entry: Vec<Option<Option<u64>>> = vec![None; pstates.len()];
        entry[start as usize] = Some(Some(0));
        let mut work = vec![start as usize];
        while let Some(si) = work.pop() {
            let exit = entry[si].flatten().and_then(|o| {
                pstates[si]
                    .ops
                    .iter()
                    .try_fold(o, |acc, op| Some(acc + self.op_bits(op)?))
            });
            for t in &pstates[si].transitions {
                let Some(n) = t.next.map(|n| n as usize) else {
                    continue;
                };
                let new = match entry[n] {
                    None => Some(exit),
                    Some(Some(o)) if exit == Some(o) => None,
                    Some(None) => None,
                    Some(Some(_)) => Some(None),
                };
                if let Some(v) = new {
                    entry[n] = Some(v);
                    work.push(n);
                }
            }
        }
        let std_fields = self
            .prog
            .headers
            .get(self.std_header as usize)
            .and_then(|h| self.prog.header_types.get(h.header_type as usize))
            .map(|t| t.fields.clone())
            .unwrap_or_default();
        let pkt_len = std_fields
            .iter()
            .position(|f| f.name == "packet_length")
            .map(|i| m::FieldRef {
                header: self.std_header,
                field: i as u32,
            });
        let mut found = std::mem::take(&mut self.bare_lookaheads);
        // Later ops first, so removing one leaves the others' indices valid.
        found.sort_by_key(|f| std::cmp::Reverse(f.1));
        for (state, at, w) in found {
            let Some(si) = pstates.iter().position(|p| p.name == state) else {
                continue;
            };
            if at >= pstates[si].ops.len() {
                continue;
            }
            let before = entry[si].flatten().and_then(|o| {
                pstates[si].ops[..at]
                    .iter()
                    .try_fold(o, |acc, op| Some(acc + self.op_bits(op)?))
            });
            match (before, pkt_len, pstates[si].ops.get_mut(at)) {
                (Some(off), Some(pl), Some(m::ParserOp::Verify(cond, _))) => {
                    *cond = op(
                        m::Op::Ge,
                        Some(m::Expr::Field(pl)),
                        Some(cnst((off + w as u64).div_ceil(8) as i128)),
                    );
                }
                _ => {
                    pstates[si].ops.remove(at);
                }
            }
        }
    }

    /// Run-time header stack indices written in a parser state (`hs[i].f = v`,
    /// `pkt.extract(hs[i])`): the index is stored once, then an `if` chain selects the
    /// statement with each constant index (out of range: reject with
    /// `error.StackOutOfBounds`), which `split_parser_ifs`
    /// turns into states.
    fn parser_dyn_indices(&mut self, st: State, env: &StateEnv, count: &mut usize) -> R<State> {
        if let Some(e) = env {
            self.scope.vars.push(e.clone());
        }
        let saved = self.cur.len();
        let body = self.dyn_stmts(&st.body, count);
        self.cur.truncate(saved);
        if env.is_some() {
            self.scope.pop();
        }
        Ok(State { body: body?, ..st })
    }

    fn dyn_stmts(&mut self, body: &[Stmt], count: &mut usize) -> R<Vec<Stmt>> {
        let mut out = Vec::new();
        for s in body {
            let pos = s.pos;
            let found = match &s.kind {
                StmtKind::Block(b) => {
                    out.push(Stmt {
                        kind: StmtKind::Block(self.dyn_stmts(b, count)?),
                        pos,
                    });
                    continue;
                }
                StmtKind::If(c, a, b) => {
                    let a = self.dyn_stmts(std::slice::from_ref(&**a), count)?;
                    let b = match b {
                        Some(b) => Some(self.dyn_stmts(std::slice::from_ref(&**b), count)?),
                        None => None,
                    };
                    out.push(Stmt {
                        kind: StmtKind::If(
                            c.clone(),
                            Box::new(Stmt {
                                kind: StmtKind::Block(a),
                                pos,
                            }),
                            b.map(|b| {
                                Box::new(Stmt {
                                    kind: StmtKind::Block(b),
                                    pos,
                                })
                            }),
                        ),
                        pos,
                    });
                    continue;
                }
                StmtKind::Assign(l, _) => self.dyn_index_in_chain(l)?.map(|f| (f, None)),
                StmtKind::Call(e) => match self.dyn_index_in_chain(e)? {
                    Some(f) => Some((f, None)),
                    None => {
                        let mut hit = None;
                        if let ExprKind::Call(_, _, args) = &e.kind {
                            for (j, a) in args.iter().enumerate() {
                                if let Some(f) = self.dyn_index_in_chain(a)? {
                                    hit = Some((f, Some(j)));
                                    break;
                                }
                            }
                        }
                        hit
                    }
                },
                _ => None,
            };
            let Some(((at, base, idx), arg)) = found else {
                out.push(s.clone());
                continue;
            };
            let n = self.stack_len(&base)?;
            let var = format!("__stack_index{count}");
            *count += 1;
            let b32 = |p: Pos| {
                TypeRef::Bit(Box::new(Expr {
                    kind: ExprKind::Int(32, None),
                    pos: p,
                }))
            };
            out.push(Stmt {
                kind: StmtKind::Var(Decl {
                    annotations: vec![],
                    kind: DeclKind::Var {
                        ty: b32(pos),
                        name: var.clone(),
                        init: Some(Expr {
                            kind: ExprKind::Cast(b32(pos), Box::new(idx.clone())),
                            pos: idx.pos,
                        }),
                    },
                    pos,
                }),
                pos,
            });
            // Out of range in a parser: reject with error.StackOutOfBounds.
            let ex = |kind| Expr { kind, pos };
            let mut chain: Option<Box<Stmt>> = Some(Box::new(Stmt {
                kind: StmtKind::Call(ex(ExprKind::Call(
                    Box::new(ex(ExprKind::Name("verify".into()))),
                    vec![],
                    vec![
                        ex(ExprKind::Bool(false)),
                        ex(ExprKind::Member(
                            Box::new(ex(ExprKind::Name("error".into()))),
                            "StackOutOfBounds".into(),
                        )),
                    ],
                ))),
                pos,
            }));
            for k in (0..n).rev() {
                let kind = match (&s.kind, arg) {
                    (StmtKind::Assign(l, r), _) => StmtKind::Assign(
                        replace_index(l, at, k),
                        replace_index_everywhere(r, at, k),
                    ),
                    (StmtKind::Call(e), None) => StmtKind::Call(replace_index(e, at, k)),
                    (StmtKind::Call(e), Some(j)) => {
                        let ExprKind::Call(c, t, args) = &e.kind else {
                            continue;
                        };
                        let mut args = args.clone();
                        args[j] = replace_index(&args[j], at, k);
                        StmtKind::Call(Expr {
                            kind: ExprKind::Call(c.clone(), t.clone(), args),
                            pos: e.pos,
                        })
                    }
                    (other, _) => other.clone(),
                };
                let cond = Expr {
                    kind: ExprKind::Binary(
                        "==",
                        Box::new(Expr {
                            kind: ExprKind::Name(var.clone()),
                            pos,
                        }),
                        Box::new(Expr {
                            kind: ExprKind::Int(k as u128, None),
                            pos,
                        }),
                    ),
                    pos,
                };
                chain = Some(Box::new(Stmt {
                    kind: StmtKind::If(cond, Box::new(Stmt { kind, pos }), chain),
                    pos,
                }));
            }
            if let Some(c) = chain {
                out.push(*c);
            }
        }
        Ok(out)
    }

    /// Inline sub-parser calls `inst.apply(args)`: the calling state ends with a transition into
    /// the sub-parser's (renamed) states, whose `accept` continues in a new state holding the
    /// rest of the caller. Each state comes with the scope its names resolve in.
    fn expand_subparsers(
        &mut self,
        states: &[State],
        subs: &HashMap<String, (Decl, Vec<Val>)>,
    ) -> R<Vec<(State, StateEnv)>> {
        type Env = StateEnv;
        let mut work: std::collections::VecDeque<(State, Env, usize)> =
            states.iter().map(|s| (s.clone(), None, 0)).collect();
        let mut out = Vec::new();
        let call_of = |st: &Stmt| -> Option<(String, Vec<Expr>)> {
            if let StmtKind::Call(e) = &st.kind {
                if let ExprKind::Call(c, _, a) = &e.kind {
                    if let ExprKind::Member(t, m) = &c.kind {
                        if let ExprKind::Name(n) = &t.kind {
                            if m == "apply" && subs.contains_key(n) {
                                return Some((n.clone(), a.clone()));
                            }
                        }
                    }
                }
            }
            None
        };
        while let Some((st, env, depth)) = work.pop_front() {
            let Some(i) = st.body.iter().position(|x| call_of(x).is_some()) else {
                out.push((st, env));
                continue;
            };
            if depth > 4 || out.len() + work.len() > 4096 {
                return err(st.pos, "sub-parsers nested too deeply");
            }
            let (inst, args) = call_of(&st.body[i]).unwrap_or_default();
            let call_pos = st.body[i].pos;
            let Some((sub, ctor_vals)) = subs.get(&inst) else {
                continue;
            };
            let DeclKind::Parser {
                params,
                ctor_params,
                locals,
                states: sstates,
                ..
            } = &sub.kind
            else {
                continue;
            };
            if params.len() != args.len() {
                return err(
                    call_pos,
                    format!(
                        "parser `{inst}` expects {} argument(s) but got {}",
                        params.len(),
                        args.len()
                    ),
                );
            }
            if let Some(e) = &env {
                self.scope.vars.push(e.clone());
            }
            // Variables the calling state declares before the call are in scope for its
            // arguments (P4-16 §6.8: a name is visible from its declaration to the end of its
            // block): they are declared now, their declarations become assignments, and the
            // state and its continuation resolve names in a scope that holds them.
            self.scope.push();
            let mut st = st;
            let mut res = Ok(());
            for s in st.body[..i].iter_mut() {
                let StmtKind::Var(d) = &s.kind else { continue };
                let DeclKind::Var { ty, name, init } = &d.kind else {
                    continue;
                };
                let bare = Decl {
                    kind: DeclKind::Var {
                        ty: ty.clone(),
                        name: name.clone(),
                        init: None,
                    },
                    ..d.clone()
                };
                let mark = self.cur.len();
                if let Err(e) = self.local_decl(&bare) {
                    res = Err(e);
                    break;
                }
                let invalidate = self.cur.len() != mark;
                self.cur.truncate(mark);
                let var = Expr {
                    kind: ExprKind::Name(name.clone()),
                    pos: d.pos,
                };
                s.kind = match init {
                    Some(v) => StmtKind::Assign(var, v.clone()),
                    // An uninitialized header starts invalid.
                    None if invalidate => StmtKind::Call(Expr {
                        kind: ExprKind::Call(
                            Box::new(Expr {
                                kind: ExprKind::Member(Box::new(var), "setInvalid".into()),
                                pos: d.pos,
                            }),
                            vec![],
                            vec![],
                        ),
                        pos: d.pos,
                    }),
                    None => StmtKind::Empty,
                };
            }
            let mut vals = Vec::new();
            if res.is_ok() {
                for a in &args {
                    match self.expr(a) {
                        Ok(v) => vals.push(v),
                        Err(e) => {
                            res = Err(e);
                            break;
                        }
                    }
                }
            }
            let hoisted = self.scope.vars.pop().unwrap_or_default();
            if env.is_some() {
                self.scope.pop();
            }
            res?;
            let env = if hoisted.is_empty() {
                env
            } else {
                let mut e = env.unwrap_or_default();
                e.extend(hoisted);
                Some(e)
            };
            self.scope.push();
            for (p, v) in ctor_params.iter().zip(ctor_vals.iter().cloned()) {
                self.scope.set(&p.name, v);
            }
            for (p, v) in params.iter().zip(vals) {
                self.scope.set(&p.name, v);
            }
            let before = self.cur.len();
            for l in locals {
                if let Err(e) = self.local_decl(l) {
                    self.scope.pop();
                    return Err(e);
                }
            }
            let sub_env = self.scope.vars.pop().unwrap_or_default();
            if self.cur.len() != before {
                self.cur.truncate(before);
                return err(
                    call_pos,
                    "initialized local variables in sub-parsers are not supported",
                );
            }
            let prefix = format!("{}_{inst}", st.name);
            let cont = format!("{}_after_{inst}", st.name);
            let rename = |n: &str| match n {
                "accept" => cont.clone(),
                "reject" => "reject".to_string(),
                other => format!("{prefix}_{other}"),
            };
            let mut body = st.body.clone();
            let rest = body.split_off(i + 1);
            body.pop();
            out.push((
                State {
                    annotations: st.annotations.clone(),
                    name: st.name.clone(),
                    body,
                    transition: Some(Transition::Direct(format!("{prefix}_start"), call_pos)),
                    pos: st.pos,
                },
                env.clone(),
            ));
            work.push_front((
                State {
                    annotations: vec![],
                    name: cont.clone(),
                    body: rest,
                    transition: st.transition.clone(),
                    pos: call_pos,
                },
                env,
                depth,
            ));
            for ss in sstates {
                let mut ns = ss.clone();
                ns.name = format!("{prefix}_{}", ss.name);
                ns.transition = match &ss.transition {
                    Some(Transition::Direct(n, p)) => Some(Transition::Direct(rename(n), *p)),
                    Some(Transition::Select(k, cases)) => Some(Transition::Select(
                        k.clone(),
                        cases
                            .iter()
                            .map(|(e, n, p)| (e.clone(), rename(n), *p))
                            .collect(),
                    )),
                    None => None,
                };
                work.push_back((ns, Some(sub_env.clone()), depth + 1));
            }
        }
        Ok(out)
    }

    fn reject_state(
        &mut self,
        err_name: &str,
        pstates: &mut Vec<m::ParseState>,
        rejects: &mut HashMap<String, u32>,
    ) -> u32 {
        if let Some(i) = rejects.get(err_name) {
            return *i;
        }
        let code = self.errors.iter().position(|e| e == err_name).unwrap_or(0);
        let idx = pstates.len() as u32;
        let name = if err_name == "NoError" {
            "reject".to_string()
        } else {
            format!("reject_{err_name}")
        };
        pstates.push(m::ParseState {
            name,
            id: idx as i64,
            ops: vec![m::ParserOp::Verify(
                m::Expr::Bool(false),
                cnst(code as i128),
            )],
            key: vec![],
            key_bytes: 0,
            transitions: vec![m::Transition {
                matcher: m::TransitionMatch::Default,
                next: None,
            }],
        });
        rejects.insert(err_name.into(), idx);
        idx
    }

    fn target_state(
        &mut self,
        name: &str,
        pos: Pos,
        index: &HashMap<String, u32>,
        pstates: &mut Vec<m::ParseState>,
        rejects: &mut HashMap<String, u32>,
    ) -> R<Option<u32>> {
        match name {
            "accept" => Ok(None),
            "reject" => Ok(Some(self.reject_state("NoError", pstates, rejects))),
            n => match index.get(n) {
                Some(i) => Ok(Some(*i)),
                None => err(pos, format!("parser state `{n}` is not declared")),
            },
        }
    }

    fn transition(
        &mut self,
        s: &State,
        index: &HashMap<String, u32>,
        pstates: &mut Vec<m::ParseState>,
        rejects: &mut HashMap<String, u32>,
    ) -> R<()> {
        let si = index[&s.name] as usize;
        let mut ops = std::mem::take(&mut self.parser_ops);
        let mut key = Vec::new();
        let mut widths = Vec::new();
        let mut transitions = Vec::new();
        match &s.transition {
            None => {
                let r = self.reject_state("NoError", pstates, rejects);
                transitions.push(m::Transition {
                    matcher: m::TransitionMatch::Default,
                    next: Some(r),
                });
            }
            Some(Transition::Direct(n, pos)) => {
                let next = self.target_state(n, *pos, index, pstates, rejects)?;
                transitions.push(m::Transition {
                    matcher: m::TransitionMatch::Default,
                    next,
                });
            }
            Some(Transition::Select(keys, cases)) => {
                for k in keys {
                    let v = self.expr(k)?;
                    match v {
                        Val::Place(Place::Field(f, t)) => {
                            let w = t.width().unwrap_or(1);
                            key.push(m::KeyElem::Field(f));
                            widths.push(w);
                        }
                        Val::Lookahead(o, w, _) => {
                            key.push(m::KeyElem::Lookahead {
                                offset: o,
                                width: w,
                            });
                            widths.push(w);
                        }
                        Val::Rv(m::Expr::StackField { stack, field }, t) => {
                            key.push(m::KeyElem::StackField { stack, field });
                            widths.push(t.width().unwrap_or(1));
                        }
                        v => {
                            let (e, t) = self.data(v, k.pos)?;
                            let w = match t.width() {
                                Some(w) if t != Ty::InfInt => w,
                                _ => return err(k.pos, "select key needs a known width"),
                            };
                            let f = self.new_scalar("tmp", &t);
                            ops.push(m::ParserOp::Set(f, e));
                            key.push(m::KeyElem::Field(f));
                            widths.push(w);
                        }
                    }
                }
                let mut has_default = false;
                for (ks, target, tpos) in cases {
                    let elems: Vec<&Expr> = match &ks.kind {
                        ExprKind::List(v) if keys.len() > 1 || v.len() > 1 => v.iter().collect(),
                        _ => vec![ks],
                    };
                    if elems.len() != keys.len()
                        && !(elems.len() == 1 && matches!(elems[0].kind, ExprKind::Default))
                    {
                        return err(
                            ks.pos,
                            format!(
                                "select has {} key(s) but this case has {}",
                                keys.len(),
                                elems.len()
                            ),
                        );
                    }
                    let next = self.target_state(target, *tpos, index, pstates, rejects)?;
                    if elems.len() == 1 && matches!(elems[0].kind, ExprKind::Default) {
                        has_default = true;
                        transitions.push(m::Transition {
                            matcher: m::TransitionMatch::Default,
                            next,
                        });
                        continue;
                    }
                    // Per key element: the (value, mask) alternatives (ranges expand into
                    // several prefix masks); the case matches their cartesian product.
                    let mut alts: Vec<Vec<(i128, Option<i128>)>> = Vec::new();
                    let mut masked = false;
                    let mut vset = None;
                    let mut all_default = true;
                    for (e, w) in elems.iter().zip(&widths) {
                        let v = self.expr(e)?;
                        let t = Ty::Bit(*w);
                        let a: Vec<(i128, Option<i128>)> = match v {
                            Val::Default => {
                                masked = true;
                                vec![(0, Some(0))]
                            }
                            Val::Mask(a, b) => {
                                masked = true;
                                all_default = false;
                                let a = self.convert(*a, &t, e.pos)?;
                                let b = self.convert(*b, &t, e.pos)?;
                                match (a, b) {
                                    (Val::Const(a, _), Val::Const(b, _)) => vec![(a & b, Some(b))],
                                    _ => return err(e.pos, "select masks must be constants"),
                                }
                            }
                            Val::Place(Place::ValueSet(vs)) => {
                                if keys.len() != 1 {
                                    return err(
                                        e.pos,
                                        "value sets are only supported with a single select key",
                                    );
                                }
                                vset = Some(vs);
                                vec![(0, None)]
                            }
                            Val::Range(lo, hi) => {
                                masked = true;
                                all_default = false;
                                let lo = self.convert(*lo, &t, e.pos)?;
                                let hi = self.convert(*hi, &t, e.pos)?;
                                let (Val::Const(lo, _), Val::Const(hi, _)) = (lo, hi) else {
                                    return err(e.pos, "select ranges must be constants");
                                };
                                if *w > 64 {
                                    return err(e.pos, "select ranges are supported up to 64 bits");
                                }
                                range_to_masks(lo, hi, *w)
                            }
                            v => {
                                all_default = false;
                                // A `bool` key (1 bit on the wire) matches `true`/`false`.
                                let v = match v {
                                    Val::Const(c, Ty::Bool) if *w == 1 => Val::Const(c, t.clone()),
                                    v => v,
                                };
                                match self.convert(v, &t, e.pos)? {
                                    Val::Const(c, _) => vec![(c, None)],
                                    _ => {
                                        return err(
                                            e.pos,
                                            "select case values must be compile-time constants",
                                        )
                                    }
                                }
                            }
                        };
                        alts.push(a);
                    }
                    if let Some(vs) = vset {
                        transitions.push(m::Transition {
                            matcher: m::TransitionMatch::Vset {
                                vset: vs,
                                mask: None,
                            },
                            next,
                        });
                        continue;
                    }
                    if all_default && masked {
                        has_default = true;
                        transitions.push(m::Transition {
                            matcher: m::TransitionMatch::Default,
                            next,
                        });
                        continue;
                    }
                    let mut combos: Vec<Vec<(i128, Option<i128>)>> = vec![vec![]];
                    for a in &alts {
                        let mut nc = Vec::new();
                        for c in &combos {
                            for x in a {
                                let mut c2 = c.clone();
                                c2.push(*x);
                                nc.push(c2);
                            }
                        }
                        combos = nc;
                        if combos.len() > 4096 {
                            return err(
                                ks.pos,
                                "this select case expands into too many transitions",
                            );
                        }
                    }
                    for c in combos {
                        let mut value = Vec::new();
                        let mut mask = Vec::new();
                        for ((val, msk), w) in c.iter().zip(&widths) {
                            let t = Ty::Bit(*w);
                            value.extend(int_of(wrap(*val, &t)).to_bytes(*w));
                            match msk {
                                Some(mv) => mask.extend(int_of(wrap(*mv, &t)).to_bytes(*w)),
                                None => mask.extend(mask_int(*w).to_bytes(*w)),
                            }
                        }
                        transitions.push(m::Transition {
                            matcher: m::TransitionMatch::Value {
                                value,
                                mask: if masked { Some(mask) } else { None },
                            },
                            next,
                        });
                    }
                }
                if !has_default {
                    let r = self.reject_state("NoMatch", pstates, rejects);
                    transitions.push(m::Transition {
                        matcher: m::TransitionMatch::Default,
                        next: Some(r),
                    });
                }
            }
        }
        let st = &mut pstates[si];
        st.ops = ops;
        st.key = key;
        st.key_bytes = widths.iter().map(|w| w.div_ceil(8)).sum();
        st.transitions = transitions;
        Ok(())
    }

    // ------------------------------------------------------------ deparser / checksums

    fn lower_deparser(&mut self, d: &Decl, hdr: &Place) -> R<()> {
        let DeclKind::Control {
            params,
            apply,
            locals,
            name,
            ..
        } = &d.kind
        else {
            return err(d.pos, "the deparser must be a control");
        };
        self.scope.push();
        self.control_name = name.clone();
        self.bind_top_ctor(d)?;
        self.bind_params(params, &[None, Some(hdr.clone())])?;
        self.mode = Mode::Deparser;
        self.cur.clear();
        self.deparse_order.clear();
        for l in locals {
            self.local_decl(l)?;
        }
        let apply = strip_validity_guards(apply);
        let r = self.stmts(&apply);
        self.scope.pop();
        r?;
        if !self.cur.is_empty() {
            return err(d.pos, "the deparser may only emit headers");
        }
        self.prog.deparsers.push(m::Deparser {
            name: "deparser".into(),
            id: 0,
            order: std::mem::take(&mut self.deparse_order),
            primitives: vec![],
        });
        Ok(())
    }

    fn lower_checksum_control(&mut self, d: &Decl, hdr: &Place, meta: &Place) -> R<()> {
        let DeclKind::Control {
            params,
            apply,
            name,
            ..
        } = &d.kind
        else {
            return err(d.pos, "checksum blocks must be controls");
        };
        self.scope.push();
        self.control_name = name.clone();
        self.bind_top_ctor(d)?;
        self.bind_params(params, &[Some(hdr.clone()), Some(meta.clone())])?;
        self.mode = Mode::Checksum;
        self.cur.clear();
        let r = self.stmts(apply);
        self.scope.pop();
        r?;
        if !self.cur.is_empty() {
            return err(
                d.pos,
                format!("control `{name}` may only call verify_checksum/update_checksum"),
            );
        }
        Ok(())
    }

    // ------------------------------------------------------------ pipelines

    fn note_id(&mut self, name: &str, anns: &[Annotation]) {
        if let Some(v) = annotation_int(anns, "id") {
            self.extra
                .id_overrides
                .insert(name.to_string(), (v & 0xff_ffff) as u32);
        }
    }

    fn qualify(&self, local: &str, anns: &[Annotation]) -> String {
        match ann_name(anns) {
            Some(n) if n.starts_with('.') => n[1..].to_string(),
            // Top-level declarations (no enclosing block) keep their own names.
            Some(n) if self.control_name.is_empty() => n,
            None if self.control_name.is_empty() => local.to_string(),
            Some(n) => format!("{}.{n}", self.control_name),
            None => format!("{}.{local}", self.control_name),
        }
    }

    /// Extern instances declared at the top level (`register<bit<8>>(256) r;` outside any
    /// block) are in scope in every parser and control: one object each, named by its own name.
    fn bind_global_instances(&mut self) -> R<()> {
        let globals: Vec<Decl> = self
            .decls
            .iter()
            .filter(|d| {
                matches!(&d.kind, DeclKind::Instance { ty: TypeRef::Named(k, _, _), .. }
                    if self.externs.contains_key(k))
            })
            .cloned()
            .collect();
        let saved = std::mem::take(&mut self.control_name);
        let mut r = Ok(());
        for d in &globals {
            r = self.instance(d, "");
            if r.is_err() {
                break;
            }
        }
        self.control_name = saved;
        r
    }

    fn instance(&mut self, d: &Decl, _owner: &str) -> R<()> {
        let DeclKind::Instance { ty, args, name } = &d.kind else {
            return err(d.pos, "expected an instantiation");
        };
        let TypeRef::Named(kind, targs, _) = ty else {
            return err(d.pos, "cannot instantiate this type");
        };
        if let Some(cd) = self.find_decl(kind) {
            if let DeclKind::Control { ctor_params, .. } = &cd.kind {
                if args.len() != ctor_params.len() {
                    return err(
                        d.pos,
                        format!(
                            "control `{kind}` expects {} constructor argument(s) but got {}",
                            ctor_params.len(),
                            args.len()
                        ),
                    );
                }
                // Constructor arguments: control instances (bound by name) and compile-time
                // constants.
                let mut vals = Vec::new();
                for (p, a) in ctor_params.iter().zip(args) {
                    let v = self.expr(a)?;
                    let v = match v {
                        Val::Place(Place::Control(..)) => v,
                        Val::Const(..) => {
                            let t = self.ty(&p.ty)?;
                            self.convert(v, &t, a.pos)?
                        }
                        _ => {
                            return err(
                                a.pos,
                                "constructor arguments must be control instances or compile-time constants",
                            )
                        }
                    };
                    vals.push(v);
                }
                // The instance is one object wherever it is applied (also through
                // constructor parameters of other controls): named by where it is declared.
                let path = format!("{}.{name}", self.control_name);
                self.ctor_args.insert((kind.clone(), path.clone()), vals);
                self.scope
                    .set(name, Val::Place(Place::Control(kind.clone(), path)));
                return Ok(());
            }
            return err(d.pos, "sub-parsers are not supported yet");
        }
        let qn = self.qualify(name, &d.annotations);
        // A control instance applied more than once (or through several controls) keeps
        // one set of externs.
        if let Some(i) = self
            .ext
            .iter()
            .position(|x| x.name == qn && &x.kind == kind)
        {
            self.scope.set(name, Val::Place(Place::Extern(i)));
            return Ok(());
        }
        self.note_id(&qn, &d.annotations);
        let mut elem = None;
        let index = match kind.as_str() {
            "counter" | "direct_counter" => {
                let direct = kind == "direct_counter";
                let size = if direct {
                    0
                } else {
                    let a = args
                        .first()
                        .ok_or_else(|| Diagnostic::new(d.pos, "counter needs a size"))?;
                    self.const_size(a, "the counter size")?
                };
                let unit_arg = args.get(if direct { 0 } else { 1 });
                if let Some(u) = unit_arg {
                    if let Val::Const(v, Ty::Enum(en, _)) = self.expr(u)? {
                        let n = self
                            .enums
                            .get(&en)
                            .and_then(|(_, ms)| {
                                ms.iter().find(|(_, x)| *x == v).map(|(n, _)| n.clone())
                            })
                            .unwrap_or_default();
                        self.extra.counter_units.insert(qn.clone(), n);
                    }
                }
                let idx = self.prog.counter_arrays.len() as u32;
                self.prog.counter_arrays.push(m::CounterArray {
                    name: qn.clone(),
                    id: idx as i64,
                    size,
                    is_direct: direct,
                    binding: None,
                });
                idx
            }
            "meter" | "direct_meter" => {
                let direct = kind == "direct_meter";
                let size = if direct {
                    0
                } else {
                    let a = args
                        .first()
                        .ok_or_else(|| Diagnostic::new(d.pos, "meter needs a size"))?;
                    self.const_size(a, "the meter size")?
                };
                let unit = args.get(if direct { 0 } else { 1 });
                let mt = match unit.map(|u| self.expr(u)) {
                    Some(Ok(Val::Const(1, _))) => m::MeterType::Bytes,
                    _ => m::MeterType::Packets,
                };
                let idx = self.prog.meter_arrays.len() as u32;
                self.prog.meter_arrays.push(m::MeterArray {
                    name: qn.clone(),
                    id: idx as i64,
                    meter_type: mt,
                    rate_count: 2,
                    size,
                    is_direct: direct,
                    binding: None,
                    result_target: None,
                });
                idx
            }
            "register" => {
                let t = match targs.first() {
                    Some(t) => self.ty(t)?,
                    None => {
                        return err(
                            d.pos,
                            "register needs a type argument, e.g. register<bit<32>>",
                        )
                    }
                };
                let w = match t.width() {
                    Some(w) => w,
                    None => {
                        return err(
                            d.pos,
                            format!("registers of type {} are not supported", t.name()),
                        )
                    }
                };
                elem = Some(t);
                let a = args
                    .first()
                    .ok_or_else(|| Diagnostic::new(d.pos, "register needs a size"))?;
                let size = self.const_size(a, "the register size")?;
                let idx = self.prog.register_arrays.len() as u32;
                self.prog.register_arrays.push(m::RegisterArray {
                    name: qn.clone(),
                    id: idx as i64,
                    size,
                    bitwidth: w,
                });
                idx
            }
            "action_profile" | "action_selector" => {
                let pl = self.pipeline;
                let (size, selector) = if kind == "action_profile" {
                    let a = args
                        .first()
                        .ok_or_else(|| Diagnostic::new(d.pos, "action_profile needs a size"))?;
                    (self.const_size(a, "the action profile size")?, None)
                } else {
                    if args.len() != 3 {
                        return err(
                            d.pos,
                            "action_selector takes (algorithm, size, output width)",
                        );
                    }
                    let algo = self.algo_name(&args[0])?;
                    (
                        self.const_size(&args[1], "the action selector size")?,
                        Some(m::Selector {
                            algo,
                            input: vec![],
                        }),
                    )
                };
                let Some(p) = self.prog.pipelines.get_mut(pl) else {
                    return err(
                        d.pos,
                        "action profiles must be declared inside ingress or egress",
                    );
                };
                let idx = p.action_profiles.len() as u32;
                p.action_profiles.push(m::ActionProfile {
                    name: qn.clone(),
                    id: idx as i64,
                    max_size: size,
                    selector,
                });
                idx
            }
            k => return err(d.pos, format!("cannot instantiate `{k}` here")),
        };
        let profile = if kind.starts_with("action_") {
            Some((self.pipeline, index))
        } else {
            None
        };
        self.ext.push(ExternInst {
            kind: kind.clone(),
            name: qn,
            index,
            elem,
            profile,
        });
        let i = self.ext.len() - 1;
        self.scope.set(name, Val::Place(Place::Extern(i)));
        Ok(())
    }

    fn lower_pipeline(
        &mut self,
        d: &Decl,
        role: &str,
        hdr: &Place,
        meta: &Place,
        std: &Place,
    ) -> R<()> {
        let DeclKind::Control {
            name,
            params,
            locals,
            apply,
            ..
        } = &d.kind
        else {
            return err(d.pos, format!("the {role} block must be a control"));
        };
        if params.len() != 3 {
            return err(d.pos, format!("the v1model {role} control takes (inout headers, inout metadata, inout standard_metadata_t)"));
        }
        self.pipeline = self.prog.pipelines.len();
        self.prog.pipelines.push(m::Pipeline {
            name: role.into(),
            id: self.pipeline as i64,
            init: None,
            action_profiles: vec![],
            tables: vec![],
            conditionals: vec![],
            action_calls: vec![],
        });
        self.scope.push();
        self.bind_global_instances()?;
        self.control_name = name.clone();
        self.bind_top_ctor(d)?;
        self.local_actions.clear();
        self.tables.clear();
        self.bind_params(
            params,
            &[Some(hdr.clone()), Some(meta.clone()), Some(std.clone())],
        )?;
        self.mode = Mode::Action;
        self.cur.clear();
        let init_prims = self.control_locals(locals, name);
        self.return_jumps = vec![Vec::new()];
        let items = self.items(apply);
        self.return_jumps.clear();
        self.scope.pop();
        let mut items = items?;
        if !init_prims.is_empty() {
            items.insert(0, Item::Prims(init_prims));
        }
        let init = self.link(items, None, None);
        self.prog.pipelines[self.pipeline].init = init;
        Ok(())
    }

    /// Declare a control's local actions, tables, instances and variables; returns the
    /// primitives that initialize the variables.
    fn control_locals(&mut self, locals: &[Decl], name: &str) -> Vec<m::Primitive> {
        let mut init_prims = Vec::new();
        let saved = std::mem::take(&mut self.cur);
        for l in locals {
            let r = match &l.kind {
                DeclKind::Action { name: an, .. } => {
                    self.local_actions.insert(an.clone(), l.clone());
                    Ok(())
                }
                DeclKind::Table { name: tn, .. } => {
                    self.tables.insert(
                        tn.clone(),
                        TableInfo {
                            decl: l.clone(),
                            control: name.to_string(),
                            node: None,
                        },
                    );
                    self.scope.set(tn, Val::Place(Place::Table(tn.clone())));
                    Ok(())
                }
                DeclKind::Instance { .. } => self.instance(l, name),
                DeclKind::Var { .. } | DeclKind::Const { .. } => {
                    // One primitive list for all initializers: `_jump` targets (inlined
                    // function calls, conditionals) are positions in it.
                    self.cur = std::mem::take(&mut init_prims);
                    let r = self.local_decl(l);
                    init_prims = std::mem::take(&mut self.cur);
                    r
                }
                _ => err(l.pos, "this declaration is not allowed inside a control"),
            };
            if let Err(e) = r {
                self.diags.push(e);
            }
        }
        self.cur = saved;
        init_prims
    }

    fn subcontrol_of(&self, e: &Expr) -> Option<(String, String, Vec<Expr>)> {
        if let ExprKind::Call(c, _, a) = &e.kind {
            if let ExprKind::Member(t, m) = &c.kind {
                if m == "apply" {
                    if let ExprKind::Name(n) = &t.kind {
                        match self.scope.get(n) {
                            Some(Val::Place(Place::Control(ct, inst))) => {
                                return Some((ct.clone(), inst.clone(), a.clone()));
                            }
                            // A control type applied directly (`C.apply(…)`): an instance of
                            // its own, named like the type.
                            None if self
                                .find_decl(n)
                                .is_some_and(|d| matches!(d.kind, DeclKind::Control { .. })) =>
                            {
                                return Some((
                                    n.clone(),
                                    format!("{}.{n}", self.control_name),
                                    a.clone(),
                                ));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        None
    }

    /// Inline `inst.apply(args)` of a control instantiated inside the current one.
    fn apply_subcontrol(
        &mut self,
        ctl: &str,
        inst: &str,
        args: &[Expr],
        pos: Pos,
        out: &mut Vec<Item>,
    ) -> R<()> {
        let Some(d) = self.find_decl(ctl) else {
            return err(pos, format!("`{ctl}` is not a control"));
        };
        let DeclKind::Control {
            params,
            ctor_params,
            locals,
            apply,
            ..
        } = &d.kind
        else {
            return err(pos, format!("`{ctl}` is not a control"));
        };
        let ctor_vals = self
            .ctor_args
            .get(&(ctl.to_string(), inst.to_string()))
            .cloned()
            .unwrap_or_default();
        if ctor_vals.len() != ctor_params.len() {
            return err(
                pos,
                format!(
                    "control `{ctl}` needs {} constructor argument(s); instantiate it with them",
                    ctor_params.len()
                ),
            );
        }
        if args.len() != params.len() {
            return err(
                pos,
                format!(
                    "control `{ctl}` expects {} argument(s) but got {}",
                    params.len(),
                    args.len()
                ),
            );
        }
        if self.inline_depth > 8 {
            return err(pos, "controls nested too deeply");
        }
        let mut binds = Vec::new();
        for (p, a) in params.iter().zip(args) {
            let t = self.ty(&p.ty)?;
            let v = self.expr(a)?;
            let v = self.convert(v, &t, a.pos)?;
            let bound = match (p.dir, v) {
                // `in` scalars are copied (copy-in), everything else is bound by reference.
                (None | Some("in"), Val::Place(Place::Field(f, ft))) => {
                    let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                    self.assign_val(&tmp, Val::Place(Place::Field(f, ft)), a.pos)?;
                    Val::Place(tmp)
                }
                (_, v @ Val::Place(_)) => v,
                (Some("out") | Some("inout"), _) => {
                    return err(
                        a.pos,
                        format!("argument for `{}` must be an l-value", p.name),
                    )
                }
                (_, v @ Val::Const(..)) => v,
                (_, v) => {
                    let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                    self.assign_val(&tmp, v, a.pos)?;
                    Val::Place(tmp)
                }
            };
            binds.push((p.name.clone(), bound));
        }
        let outer = inst.to_string();
        let saved_name = std::mem::replace(&mut self.control_name, outer.clone());
        let saved_actions = std::mem::take(&mut self.local_actions);
        let saved_tables = std::mem::take(&mut self.tables);
        self.scope.push();
        for (p, v) in ctor_params.iter().zip(ctor_vals) {
            self.scope.set(&p.name, v);
        }
        for (n, v) in binds {
            self.scope.set(&n, v);
        }
        self.inline_depth += 1;
        let mut init = self.control_locals(locals, &outer);
        self.cur.append(&mut init);
        let mut sub = Vec::new();
        let r = self.items_into(apply, &mut sub);
        out.push(Item::Sub(sub));
        self.inline_depth -= 1;
        self.scope.pop();
        self.control_name = saved_name;
        self.local_actions = saved_actions;
        self.tables = saved_tables;
        r
    }

    fn table_of_apply(&self, e: &Expr) -> Option<String> {
        if let ExprKind::Call(c, _, a) = &e.kind {
            if let ExprKind::Member(t, m) = &c.kind {
                if m == "apply" && a.is_empty() {
                    if let ExprKind::Name(n) = &t.kind {
                        if let Some(Val::Place(Place::Table(tn))) = self.scope.get(n) {
                            return Some(tn.clone());
                        }
                    }
                }
            }
        }
        None
    }

    /// `t.apply().hit` / `.miss` / `!…` → (table, is_hit).
    fn hit_test(&self, e: &Expr) -> Option<(String, bool)> {
        match &e.kind {
            ExprKind::Unary("!", x) => self.hit_test(x).map(|(t, h)| (t, !h)),
            ExprKind::Member(x, m) if m == "hit" || m == "miss" => {
                self.table_of_apply(x).map(|t| (t, m == "hit"))
            }
            _ => None,
        }
    }

    /// Does `e` apply a table somewhere inside?
    fn contains_apply(&self, e: &Expr) -> bool {
        if self.table_of_apply(e).is_some() {
            return true;
        }
        match &e.kind {
            ExprKind::Member(b, _) | ExprKind::Unary(_, b) | ExprKind::Cast(_, b) => {
                self.contains_apply(b)
            }
            ExprKind::Index(a, b)
            | ExprKind::Binary(_, a, b)
            | ExprKind::Mask(a, b)
            | ExprKind::Range(a, b) => self.contains_apply(a) || self.contains_apply(b),
            ExprKind::Slice(a, b, c) | ExprKind::Ternary(a, b, c) => {
                self.contains_apply(a) || self.contains_apply(b) || self.contains_apply(c)
            }
            ExprKind::Call(c, _, args) => {
                self.contains_apply(c) || args.iter().any(|a| self.contains_apply(a))
            }
            ExprKind::List(items) => items.iter().any(|a| self.contains_apply(a)),
            ExprKind::NamedList(items) => items.iter().any(|(_, a)| self.contains_apply(a)),
            _ => false,
        }
    }

    /// A statement that uses `t.apply().hit` (or `.miss`) inside a larger expression, rewritten
    /// into statements the control-flow lowering handles: each table application becomes an
    /// `if (t.apply().hit)` that sets a temporary, run only where the expression would evaluate
    /// it (`&&`, `||` and `?:` are short-circuiting). `None` when there is nothing to rewrite.
    fn hoist_applies(&mut self, s: &Stmt) -> Option<Vec<Stmt>> {
        let mut decls = Vec::new();
        let mut pre = Vec::new();
        let last = match &s.kind {
            StmtKind::Assign(l, r) if self.hit_test(r).is_none() && self.contains_apply(r) => {
                let r = self.hoist(r, &mut decls, &mut pre);
                StmtKind::Assign(l.clone(), r)
            }
            StmtKind::Var(d) => {
                let DeclKind::Var {
                    ty,
                    name,
                    init: Some(i),
                } = &d.kind
                else {
                    return None;
                };
                if self.hit_test(i).is_some() || !self.contains_apply(i) {
                    return None;
                }
                decls.push(Stmt {
                    kind: StmtKind::Var(Decl {
                        annotations: d.annotations.clone(),
                        kind: DeclKind::Var {
                            ty: ty.clone(),
                            name: name.clone(),
                            init: None,
                        },
                        pos: d.pos,
                    }),
                    pos: s.pos,
                });
                let r = self.hoist(i, &mut decls, &mut pre);
                StmtKind::Assign(
                    Expr {
                        kind: ExprKind::Name(name.clone()),
                        pos: d.pos,
                    },
                    r,
                )
            }
            StmtKind::If(c, a, b) if self.hit_test(c).is_none() && self.contains_apply(c) => {
                let c = self.hoist(c, &mut decls, &mut pre);
                StmtKind::If(c, a.clone(), b.clone())
            }
            StmtKind::Call(e)
                if self.table_of_apply(e).is_none()
                    && self.subcontrol_of(e).is_none()
                    && self.contains_apply(e) =>
            {
                StmtKind::Call(self.hoist(e, &mut decls, &mut pre))
            }
            StmtKind::Switch(e, cases)
                if !matches!(&e.kind, ExprKind::Member(_, m) if m == "action_run")
                    && self.contains_apply(e) =>
            {
                StmtKind::Switch(self.hoist(e, &mut decls, &mut pre), cases.clone())
            }
            _ => return None,
        };
        decls.extend(pre);
        decls.push(Stmt {
            kind: last,
            pos: s.pos,
        });
        Some(decls)
    }

    /// A fresh `bool` temporary declared in `decls`; returns its name.
    fn hoist_temp(&mut self, decls: &mut Vec<Stmt>, pos: Pos) -> String {
        let name = self.unique("$hoisted");
        decls.push(Stmt {
            kind: StmtKind::Var(Decl {
                annotations: vec![],
                kind: DeclKind::Var {
                    ty: TypeRef::Bool,
                    name: name.clone(),
                    init: None,
                },
                pos,
            }),
            pos,
        });
        name
    }

    fn hoist(&mut self, e: &Expr, decls: &mut Vec<Stmt>, pre: &mut Vec<Stmt>) -> Expr {
        if !self.contains_apply(e) {
            return e.clone();
        }
        let pos = e.pos;
        let name = |n: &str| Expr {
            kind: ExprKind::Name(n.to_string()),
            pos,
        };
        let set = |n: &str, v: Expr| Stmt {
            kind: StmtKind::Assign(
                Expr {
                    kind: ExprKind::Name(n.to_string()),
                    pos,
                },
                v,
            ),
            pos,
        };
        let not = |x: Expr| Expr {
            kind: ExprKind::Unary("!", Box::new(x)),
            pos,
        };
        let block = |ss: Vec<Stmt>| {
            Box::new(Stmt {
                kind: StmtKind::Block(ss),
                pos,
            })
        };
        if self.hit_test(e).is_some() {
            let t = self.hoist_temp(decls, pos);
            let b = |v: bool| Expr {
                kind: ExprKind::Bool(v),
                pos,
            };
            pre.push(Stmt {
                kind: StmtKind::If(
                    e.clone(),
                    block(vec![set(&t, b(true))]),
                    Some(block(vec![set(&t, b(false))])),
                ),
                pos,
            });
            return name(&t);
        }
        let bx = |x: Expr| Box::new(x);
        let kind = match &e.kind {
            ExprKind::Binary(o, a, b) if *o == "&&" || *o == "||" => {
                let a2 = self.hoist(a, decls, pre);
                if !self.contains_apply(b) {
                    ExprKind::Binary(o, bx(a2), b.clone())
                } else {
                    let t = self.hoist_temp(decls, pos);
                    pre.push(set(&t, a2));
                    let mut inner = Vec::new();
                    let b2 = self.hoist(b, decls, &mut inner);
                    inner.push(set(&t, b2));
                    let cond = if *o == "&&" { name(&t) } else { not(name(&t)) };
                    pre.push(Stmt {
                        kind: StmtKind::If(cond, block(inner), None),
                        pos,
                    });
                    return name(&t);
                }
            }
            ExprKind::Ternary(c, x, y) => {
                let c2 = self.hoist(c, decls, pre);
                let t = self.hoist_temp(decls, pos);
                pre.push(set(&t, c2));
                let mut arm = |this: &mut Self, v: &Expr, cond: Expr, pre: &mut Vec<Stmt>| {
                    if !this.contains_apply(v) {
                        return v.clone();
                    }
                    let mut inner = Vec::new();
                    let v2 = this.hoist(v, decls, &mut inner);
                    pre.push(Stmt {
                        kind: StmtKind::If(cond, block(inner), None),
                        pos,
                    });
                    v2
                };
                let x2 = arm(self, x, name(&t), pre);
                let y2 = arm(self, y, not(name(&t)), pre);
                ExprKind::Ternary(bx(name(&t)), bx(x2), bx(y2))
            }
            ExprKind::Binary(o, a, b) => ExprKind::Binary(
                o,
                bx(self.hoist(a, decls, pre)),
                bx(self.hoist(b, decls, pre)),
            ),
            ExprKind::Unary(o, a) => ExprKind::Unary(o, bx(self.hoist(a, decls, pre))),
            ExprKind::Cast(t, a) => ExprKind::Cast(t.clone(), bx(self.hoist(a, decls, pre))),
            ExprKind::Call(c, targs, args) => {
                let args = args.iter().map(|a| self.hoist(a, decls, pre)).collect();
                ExprKind::Call(c.clone(), targs.clone(), args)
            }
            ExprKind::List(items) => {
                ExprKind::List(items.iter().map(|a| self.hoist(a, decls, pre)).collect())
            }
            other => other.clone(),
        };
        Expr { kind, pos }
    }

    fn flush_items(&mut self, out: &mut Vec<Item>, _pos: Pos) {
        // `exit` inside inlined actions jumps to the end of the group's hidden action.
        if let Some(frame) = self.return_jumps.first_mut() {
            let jumps = std::mem::take(frame);
            let end = self.cur.len();
            for j in jumps {
                self.patch_jump(j, end);
            }
        }
        if !self.cur.is_empty() {
            out.push(Item::Prims(std::mem::take(&mut self.cur)));
        }
    }

    /// Build control-flow items of an apply block.
    fn items(&mut self, ss: &[Stmt]) -> R<Vec<Item>> {
        let mut out = Vec::new();
        let saved = std::mem::take(&mut self.cur);
        let r = self.items_into(ss, &mut out);
        self.cur = saved;
        r.map(|_| out)
    }

    fn items_into(&mut self, ss: &[Stmt], out: &mut Vec<Item>) -> R<()> {
        for s in ss {
            if let Some(rewritten) = self.hoist_applies(s) {
                self.items_into(&rewritten, out)?;
                continue;
            }
            match &s.kind {
                StmtKind::Call(e) if self.subcontrol_of(e).is_some() => {
                    let (ct, inst, args) = self.subcontrol_of(e).unwrap_or_default();
                    self.apply_subcontrol(&ct, &inst, &args, s.pos, out)?;
                }
                StmtKind::Call(e) if self.table_of_apply(e).is_some() => {
                    let t = self.table_of_apply(e).unwrap_or_default();
                    self.flush_items(out, s.pos);
                    let (ti, pre) = self.apply_table(&t, s.pos)?;
                    if !pre.is_empty() {
                        out.push(Item::Prims(pre));
                    }
                    out.push(Item::Apply(ti));
                }
                StmtKind::Assign(l, r) if self.hit_test(r).is_some() => {
                    let (t, hit) = self.hit_test(r).unwrap_or_default();
                    self.flush_items(out, s.pos);
                    let (ti, pre) = self.apply_table(&t, s.pos)?;
                    if !pre.is_empty() {
                        out.push(Item::Prims(pre));
                    }
                    let set = |v: bool| Stmt {
                        kind: StmtKind::Assign(
                            l.clone(),
                            Expr {
                                kind: ExprKind::Bool(v),
                                pos: r.pos,
                            },
                        ),
                        pos: s.pos,
                    };
                    let ai = self.items(&[set(true)])?;
                    let bi = self.items(&[set(false)])?;
                    out.push(Item::IfHit(ti, hit, ai, bi));
                }
                StmtKind::Var(d) if matches!(&d.kind, DeclKind::Var { init: Some(i), .. } if self.hit_test(i).is_some()) =>
                {
                    let DeclKind::Var { ty, name, init } = &d.kind else {
                        continue;
                    };
                    let init = init.clone().unwrap_or(Expr {
                        kind: ExprKind::Bool(false),
                        pos: d.pos,
                    });
                    let decl = Decl {
                        annotations: vec![],
                        kind: DeclKind::Var {
                            ty: ty.clone(),
                            name: name.clone(),
                            init: None,
                        },
                        pos: d.pos,
                    };
                    self.local_decl(&decl)?;
                    let assign = Stmt {
                        kind: StmtKind::Assign(
                            Expr {
                                kind: ExprKind::Name(name.clone()),
                                pos: d.pos,
                            },
                            init,
                        ),
                        pos: s.pos,
                    };
                    self.items_into(std::slice::from_ref(&assign), out)?;
                }
                StmtKind::If(c, a, b) => {
                    if let Some((t, hit)) = self.hit_test(c) {
                        self.flush_items(out, s.pos);
                        let (ti, pre) = self.apply_table(&t, s.pos)?;
                        if !pre.is_empty() {
                            out.push(Item::Prims(pre));
                        }
                        let ai = self.items(std::slice::from_ref(a))?;
                        let bi = match b {
                            Some(b) => self.items(std::slice::from_ref(b))?,
                            None => vec![],
                        };
                        out.push(Item::IfHit(ti, hit, ai, bi));
                        continue;
                    }
                    let cv = self.expr(c)?;
                    if let Val::Const(v, _) = cv {
                        let chosen = if v != 0 { Some(&**a) } else { b.as_deref() };
                        if let Some(st) = chosen {
                            self.scope.push();
                            let r = self.items_into(std::slice::from_ref(st), out);
                            self.scope.pop();
                            r?;
                        }
                        continue;
                    }
                    let ce = self.boolean(cv, c.pos)?;
                    self.flush_items(out, s.pos);
                    let ai = self.items(std::slice::from_ref(a))?;
                    let bi = match b {
                        Some(b) => self.items(std::slice::from_ref(b))?,
                        None => vec![],
                    };
                    out.push(Item::If(ce, ai, bi));
                }
                StmtKind::Switch(e, cases) => {
                    if let ExprKind::Member(x, mm) = &e.kind {
                        if mm == "action_run" {
                            if let Some(t) = self.table_of_apply(x) {
                                self.flush_items(out, s.pos);
                                let (ti, pre) = self.apply_table(&t, s.pos)?;
                                if !pre.is_empty() {
                                    out.push(Item::Prims(pre));
                                }
                                let mut arms = Vec::new();
                                let mut default = None;
                                let mut pending: Vec<u32> = Vec::new();
                                let table_actions = self.prog.pipelines[self.pipeline].tables
                                    [ti as usize]
                                    .actions
                                    .clone();
                                for c in cases {
                                    if let Some(l) = &c.label {
                                        {
                                            let ExprKind::Name(an) = &l.kind else {
                                                return err(l.pos, "switch labels on action_run must be action names");
                                            };
                                            // The label names the action as the table
                                            // lists it (with its bound directional
                                            // arguments, `a(hdr.x)`).
                                            let listed = self.listed_action(&t, an);
                                            let ai = match listed {
                                                Some(e) => self.action_ref(&e)?.1,
                                                None => self.table_action(an, l.pos)?,
                                            };
                                            if !table_actions.contains(&ai) {
                                                return err(l.pos, format!("action `{an}` is not an action of table `{t}`"));
                                            }
                                            pending.push(ai);
                                        }
                                    }
                                    if let Some(body) = &c.body {
                                        let items = self.items(body)?;
                                        if c.label.is_none() {
                                            default = Some(items);
                                        } else {
                                            arms.push((std::mem::take(&mut pending), items));
                                        }
                                    }
                                }
                                out.push(Item::Switch(ti, arms, default));
                                continue;
                            }
                        }
                    }
                    // switch on a value: lower as primitives with jumps is not possible at
                    // control level; build conditionals.
                    let v = self.expr(e)?;
                    let (ve, vt) = self.data(v, e.pos)?;
                    let tmp = self.new_scalar("switch_tmp", &vt);
                    self.emit(prim("assign", vec![m::Arg::Field(tmp), to_arg(ve)]));
                    self.flush_items(out, s.pos);
                    let mut arms: Vec<(Option<m::Expr>, Vec<Item>)> = Vec::new();
                    let mut pending: Vec<m::Expr> = Vec::new();
                    for c in cases {
                        if let Some(l) = &c.label {
                            let lv = self.expr(l)?;
                            let lv = self.convert(lv, &vt, l.pos)?;
                            let (le, _) = self.data(lv, l.pos)?;
                            pending.push(op(m::Op::Eq, Some(m::Expr::Field(tmp)), Some(le)));
                        }
                        if let Some(body) = &c.body {
                            let items = self.items(body)?;
                            if c.label.is_none() {
                                arms.push((None, items));
                            } else {
                                let cond = pending
                                    .drain(..)
                                    .reduce(|a, b| op(m::Op::LOr, Some(a), Some(b)));
                                arms.push((cond, items));
                            }
                        }
                    }
                    let mut tail: Vec<Item> = Vec::new();
                    for (cond, items) in arms.into_iter().rev() {
                        tail = match cond {
                            Some(c) => vec![Item::If(c, items, tail)],
                            None => items,
                        };
                    }
                    out.extend(tail);
                }
                StmtKind::Exit => {
                    self.emit(prim("exit", vec![]));
                    out.push(Item::Exit(std::mem::take(&mut self.cur)));
                    return Ok(());
                }
                StmtKind::Return(None) => {
                    self.flush_items(out, s.pos);
                    out.push(Item::Return);
                    return Ok(());
                }
                StmtKind::Block(b) => {
                    self.scope.push();
                    let r = self.items_into(b, out);
                    self.scope.pop();
                    r?;
                }
                _ => {
                    // Report the error and keep going so one run shows several problems.
                    if let Err(e) = self.stmt(s) {
                        self.diags.push(e);
                    }
                }
            }
        }
        self.flush_items(out, Pos::default());
        Ok(())
    }

    /// Link items backwards into pipeline nodes; returns the entry node.
    fn link(
        &mut self,
        items: Vec<Item>,
        mut next: Option<m::Node>,
        ret: Option<m::Node>,
    ) -> Option<m::Node> {
        for it in items.into_iter().rev() {
            next = match it {
                Item::Prims(p) => Some(self.hidden_table(p, next)),
                Item::Exit(p) => Some(self.hidden_table(p, None)),
                Item::Return => ret,
                Item::Sub(inner) => self.link(inner, next, next),
                Item::Apply(t) => {
                    let tb = &mut self.prog.pipelines[self.pipeline].tables[t as usize];
                    tb.next_tables = m::NextTables::PerAction(vec![next; tb.actions.len()]);
                    tb.base_default_next = next;
                    Some(m::Node::Table(t))
                }
                Item::IfHit(t, hit, a, b) => {
                    let an = self.link(a, next, ret);
                    let bn = self.link(b, next, ret);
                    let (h, mi) = if hit { (an, bn) } else { (bn, an) };
                    let tb = &mut self.prog.pipelines[self.pipeline].tables[t as usize];
                    tb.next_tables = m::NextTables::HitMiss { hit: h, miss: mi };
                    tb.base_default_next = mi;
                    Some(m::Node::Table(t))
                }
                Item::Switch(t, arms, default) => {
                    let dn = match default {
                        Some(d) => self.link(d, next, ret),
                        None => next,
                    };
                    let acts = self.prog.pipelines[self.pipeline].tables[t as usize]
                        .actions
                        .clone();
                    let mut per = vec![dn; acts.len()];
                    for (labels, items) in arms {
                        let n = self.link(items, next, ret);
                        for l in labels {
                            for (i, a) in acts.iter().enumerate() {
                                if *a == l {
                                    per[i] = n;
                                }
                            }
                        }
                    }
                    let tb = &mut self.prog.pipelines[self.pipeline].tables[t as usize];
                    tb.next_tables = m::NextTables::PerAction(per);
                    tb.base_default_next = dn;
                    Some(m::Node::Table(t))
                }
                Item::If(c, a, b) => {
                    let an = self.link(a, next, ret);
                    let bn = self.link(b, next, ret);
                    let name = self.unique("node");
                    let pl = &mut self.prog.pipelines[self.pipeline];
                    let idx = pl.conditionals.len() as u32;
                    pl.conditionals.push(m::Conditional {
                        name,
                        id: idx as i64,
                        expr: c,
                        true_next: an,
                        false_next: bn,
                    });
                    Some(m::Node::Conditional(idx))
                }
            };
        }
        next
    }

    fn new_action(
        &mut self,
        name: String,
        runtime_data: Vec<(String, u32)>,
        prims: Vec<m::Primitive>,
        hidden: bool,
    ) -> u32 {
        let idx = self.prog.actions.len() as u32;
        self.prog.actions.push(m::Action {
            name,
            id: idx as i64,
            runtime_data,
            primitives: prims,
        });
        self.extra.action_hidden.push(hidden);
        idx
    }

    fn hidden_table(&mut self, prims: Vec<m::Primitive>, next: Option<m::Node>) -> m::Node {
        let an = self.unique("act");
        let a = self.new_action(an.clone(), vec![], prims, true);
        // Hidden table names end in a digit (p4c's end in a source line number), so a table
        // named by its suffix in an STF file (`t`) is never ambiguous with them.
        let base = format!("tbl_{an}");
        let base = if base.ends_with(|c: char| c.is_ascii_digit()) {
            base
        } else {
            format!("{base}_0")
        };
        let tn = self.unique(&base);
        let pl = &mut self.prog.pipelines[self.pipeline];
        let idx = pl.tables.len() as u32;
        pl.tables.push(m::Table {
            name: tn,
            id: idx as i64,
            match_type: m::MatchKind::Exact,
            table_type: m::TableType::Simple,
            key: vec![],
            actions: vec![a],
            next_tables: m::NextTables::PerAction(vec![next]),
            base_default_next: next,
            max_size: 1024,
            with_counters: false,
            support_timeout: false,
            direct_meter: None,
            default_entry: Some(m::DefaultEntry {
                action: a,
                action_const: true,
                action_data: vec![],
                action_entry_const: true,
            }),
            action_profile: None,
            entries: None,
        });
        m::Node::Table(idx)
    }

    /// Lower (once) an action usable in tables; returns its index.
    pub(super) fn table_action(&mut self, name: &str, pos: Pos) -> R<u32> {
        self.table_action_bound(name, pos, &[])
    }

    /// Number of leading directional parameters of action `name` (bound in the actions list).
    fn directional_params(&self, name: &str) -> usize {
        let d = self
            .local_actions
            .get(name)
            .or_else(|| self.global_actions.get(name));
        match d.map(|d| &d.kind) {
            Some(DeclKind::Action { params, .. }) => {
                params.iter().take_while(|p| p.dir.is_some()).count()
            }
            _ => 0,
        }
    }

    /// A table's action; `bound` are the arguments of its directional parameters as the
    /// actions list gives them (`a(hdr.x)`), bound by reference like a direct call.
    fn table_action_bound(&mut self, name: &str, pos: Pos, bound: &[Expr]) -> R<u32> {
        let (d, local) = match self.local_actions.get(name) {
            Some(d) => (d.clone(), true),
            None => match self.global_actions.get(name) {
                Some(d) => (d.clone(), false),
                None => return err(pos, format!("action `{name}` is not declared")),
            },
        };
        let qn = if local {
            self.qualify(name, &d.annotations)
        } else {
            match ann_name(&d.annotations) {
                Some(n) => n.trim_start_matches('.').to_string(),
                None => name.to_string(),
            }
        };
        let mut key = format!(
            "{}/{qn}",
            if local {
                self.control_name.as_str()
            } else {
                ""
            }
        );
        for b in bound {
            key.push('/');
            key.push_str(&expr_text(b));
        }
        if let Some(i) = self.action_index.get(&key) {
            return Ok(*i);
        }
        let DeclKind::Action { params, body, .. } = &d.kind else {
            return err(pos, "not an action");
        };
        let saved_cur = std::mem::take(&mut self.cur);
        let saved_mode = self.mode;
        let saved_jumps = std::mem::take(&mut self.return_jumps);
        self.mode = Mode::Action;
        self.return_jumps.push(Vec::new());
        self.scope.push();
        let mut rd = Vec::new();
        let mut res = Ok(());
        let nbound = bound.len();
        // Bound directional arguments follow the calling convention too: copied in and out
        // (after the body, left to right) where binding by reference could be observed.
        let fp = self.footprint(&d);
        let bpaths: Vec<Option<alias::Path>> = bound
            .iter()
            .map(|b| alias::path_of(b).map(|p| self.union_cut(p)))
            .collect();
        let overlaps = |i: usize, only_written: bool| -> bool {
            let Some(p) = &bpaths[i] else { return false };
            bpaths.iter().enumerate().any(|(j, q)| {
                j != i
                    && (!only_written
                        || matches!(
                            params.get(j).and_then(|p| p.dir),
                            Some("out") | Some("inout")
                        ))
                    && q.as_ref().is_some_and(|q| alias::overlap(p, q))
            })
        };
        let mut copy_out: Vec<body::Writeback> = Vec::new();
        for (i, p) in params.iter().enumerate() {
            if p.dir.is_some() {
                let Some(a) = bound.get(i) else {
                    res = err(
                        p.pos,
                        format!(
                            "directional parameter `{}` of action `{name}` must be bound in the table's actions list, like `{name}(…)`",
                            p.name
                        ),
                    );
                    break;
                };
                let v = match self.ty(&p.ty).and_then(|t| {
                    let v = self.expr(a)?;
                    self.convert(v, &t, a.pos)
                }) {
                    Ok(v) => v,
                    Err(e) => {
                        res = Err(e);
                        break;
                    }
                };
                if matches!(p.dir, Some("out") | Some("inout")) && !matches!(v, Val::Place(_)) {
                    res = err(
                        a.pos,
                        format!("argument for `{}` must be an l-value", p.name),
                    );
                    break;
                }
                let written = matches!(p.dir, Some("out") | Some("inout"));
                let v = match &v {
                    Val::Place(place)
                        if body::copyable(place, self.std_header)
                            && (p.dir == Some("out")
                                || overlaps(i, !written)
                                || bpaths[i].as_ref().is_some_and(|q| {
                                    if written {
                                        fp.touches(q)
                                    } else {
                                        fp.writes_to(q)
                                    }
                                })) =>
                    {
                        let r = self.ty(&p.ty).and_then(|t| {
                            let tmp = self.alloc(&p.name, &t, a.pos, false)?;
                            if p.dir == Some("out") {
                                self.invalidate_headers(&tmp);
                            } else {
                                self.assign_val(&tmp, v.clone(), a.pos)?;
                            }
                            Ok(tmp)
                        });
                        match r {
                            Ok(tmp) => {
                                if written {
                                    copy_out.push(body::Writeback::Place(
                                        place.clone(),
                                        tmp.clone(),
                                        a.pos,
                                    ));
                                }
                                Val::Place(tmp)
                            }
                            Err(e) => {
                                res = Err(e);
                                break;
                            }
                        }
                    }
                    _ => v,
                };
                self.scope.set(&p.name, v);
                continue;
            }
            let i = i - nbound;
            match self.ty(&p.ty) {
                Ok(t) => {
                    let w = match &t {
                        Ty::Bool => 1,
                        t => match t.width() {
                            Some(w) => w,
                            None => {
                                res = err(
                                    p.pos,
                                    format!(
                                        "action parameter `{}` must have a fixed-width type",
                                        p.name
                                    ),
                                );
                                break;
                            }
                        },
                    };
                    rd.push((p.name.clone(), w));
                    self.scope
                        .set(&p.name, Val::Place(Place::Param(i as u32, t)));
                }
                Err(mut e) => {
                    if e.pos == Pos::default() {
                        e.pos = p.pos;
                    }
                    res = Err(e);
                    break;
                }
            }
        }
        let saved_copyouts = std::mem::replace(&mut self.exit_copyouts, vec![copy_out.clone()]);
        if res.is_ok() {
            res = self.stmts(body);
        }
        self.exit_copyouts = saved_copyouts;
        self.scope.pop();
        let jumps = self.return_jumps.pop().unwrap_or_default();
        let end = self.cur.len();
        for j in jumps {
            if let Some(p) = self.cur.get_mut(j) {
                if let Some(last) = p.params.last_mut() {
                    *last = m::Arg::Const(int_of(end as i128));
                }
            }
        }
        if res.is_ok() {
            for wb in &copy_out {
                if let Err(e) = self.copy_out(wb) {
                    res = Err(e);
                    break;
                }
            }
        }
        let prims = std::mem::replace(&mut self.cur, saved_cur);
        self.mode = saved_mode;
        self.return_jumps = saved_jumps;
        res?;
        self.note_id(&qn, &d.annotations);
        let idx = self.new_action(qn, rd, prims, false);
        self.action_index.insert(key, idx);
        Ok(idx)
    }

    /// The entry of table `table`'s actions list that names action `action`.
    fn listed_action(&self, table: &str, action: &str) -> Option<Expr> {
        let info = self.tables.get(table)?;
        let DeclKind::Table { props, .. } = &info.decl.kind else {
            return None;
        };
        props.iter().find_map(|(p, _)| match p {
            TableProp::Actions(list) => list.iter().find_map(|(_, e)| {
                let n = match &e.kind {
                    ExprKind::Name(n) => n,
                    ExprKind::Call(c, _, _) => match &c.kind {
                        ExprKind::Name(n) => n,
                        _ => return None,
                    },
                    _ => return None,
                };
                (n == action).then(|| e.clone())
            }),
            _ => None,
        })
    }

    fn action_ref(&mut self, e: &Expr) -> R<(String, u32, Vec<Expr>)> {
        match &e.kind {
            ExprKind::Name(n) => Ok((n.clone(), self.table_action(n, e.pos)?, vec![])),
            ExprKind::Call(c, _, args) => match &c.kind {
                ExprKind::Name(n) => {
                    let k = self.directional_params(n).min(args.len());
                    let ai = self.table_action_bound(n, c.pos, &args[..k])?;
                    Ok((n.clone(), ai, args[k..].to_vec()))
                }
                _ => err(e.pos, "expected an action name"),
            },
            _ => err(e.pos, "expected an action name or call"),
        }
    }

    fn action_data(&mut self, action: u32, args: &[Expr], pos: Pos) -> R<Vec<m::Int>> {
        let rd = self.prog.actions[action as usize].runtime_data.clone();
        if rd.len() != args.len() {
            return err(
                pos,
                format!(
                    "action `{}` expects {} argument(s) but got {}",
                    self.prog.actions[action as usize].name,
                    rd.len(),
                    args.len()
                ),
            );
        }
        let mut out = Vec::new();
        for ((_, w), a) in rd.iter().zip(args) {
            let v = self.expr(a)?;
            match self.convert(v, &Ty::Bit(*w), a.pos) {
                Ok(Val::Const(c, _)) => out.push(int_of(wrap(c, &Ty::Bit(*w)))),
                _ => match self.expr(a)? {
                    Val::Const(c, _) => out.push(int_of(wrap(c, &Ty::Bit(*w)))),
                    _ => {
                        return err(
                            a.pos,
                            "action arguments here must be compile-time constants",
                        )
                    }
                },
            }
        }
        Ok(out)
    }

    /// Lower a table at its (single) apply site. Returns its index and primitives that must run
    /// before it (computed keys).
    fn apply_table(&mut self, tname: &str, pos: Pos) -> R<(u32, Vec<m::Primitive>)> {
        let Some(info) = self.tables.get(tname) else {
            return err(pos, format!("`{tname}` is not a table"));
        };
        if info.node.is_some() {
            return err(
                pos,
                format!(
                    "table `{tname}` is applied more than once (BMv2 allows one apply per table)"
                ),
            );
        }
        let decl = info.decl.clone();
        let _ = &info.control;
        let DeclKind::Table { props, .. } = &decl.kind else {
            return err(pos, "not a table");
        };
        let qn = self.qualify(tname, &decl.annotations);
        // A control instance is one object: applying it twice would apply its tables twice.
        if self
            .prog
            .pipelines
            .iter()
            .any(|p| p.tables.iter().any(|t| t.name == qn))
        {
            return err(
                pos,
                format!(
                    "table `{qn}` is applied more than once (its control instance is applied more than once; BMv2 allows one apply per table)"
                ),
            );
        }
        self.note_id(&qn, &decl.annotations);
        let mut meta = TableMeta {
            name: qn.clone(),
            size: 1024,
            ..Default::default()
        };
        let mut keys = Vec::new();
        let mut selector_inputs = Vec::new();
        let mut pre = Vec::new();
        let mut actions: Vec<u32> = Vec::new();
        let mut default: Option<(u32, Vec<m::Int>, bool)> = None;
        let mut entries_ast: Option<Vec<TableEntry>> = None;
        let mut profile: Option<u32> = None;
        let mut is_ws = false;
        let mut with_counters = false;
        let mut direct_meter = None;
        let mut support_timeout = false;
        let saved_cur = std::mem::take(&mut self.cur);
        for (p, ppos) in props {
            match p {
                TableProp::Key(ks) => {
                    for k in ks {
                        let kname = ann_name(&k.annotations).unwrap_or_else(|| expr_text(&k.expr));
                        let v = self.expr(&k.expr)?;
                        if k.kind == "selector" {
                            let (e, t) = self.data(v, k.expr.pos)?;
                            let f = match e {
                                m::Expr::Field(f) => f,
                                e => {
                                    let f = self.new_scalar("key", &t);
                                    self.emit(prim("assign", vec![m::Arg::Field(f), to_arg(e)]));
                                    f
                                }
                            };
                            selector_inputs.push(f);
                            continue;
                        }
                        let Some(mk) = key_kind(&k.kind) else {
                            return err(k.pos, format!("unknown match kind `{}` (expected exact, lpm, ternary, range, optional or selector)", k.kind));
                        };
                        let (target, mask, w) = match v {
                            Val::Place(Place::Field(f, t)) => {
                                (m::KeyTarget::Field(f), None, t.width().unwrap_or(1))
                            }
                            Val::Rv(
                                m::Expr::Op {
                                    op: m::Op::Valid,
                                    right: Some(h),
                                    ..
                                },
                                _,
                            ) => match *h {
                                m::Expr::Header(h) => (
                                    m::KeyTarget::Field(m::FieldRef {
                                        header: h,
                                        field: m::VALID_FIELD,
                                    }),
                                    None,
                                    1,
                                ),
                                _ => return err(k.pos, "unsupported key"),
                            },
                            v => {
                                let (e, t) = self.data(v, k.expr.pos)?;
                                let w = match t.width() {
                                    Some(w) if t != Ty::InfInt => w,
                                    _ => return err(k.pos, "table keys need a known width"),
                                };
                                let f = self.new_scalar("key", &t);
                                self.emit(prim("assign", vec![m::Arg::Field(f), to_arg(e)]));
                                (m::KeyTarget::Field(f), None, w)
                            }
                        };
                        meta.keys.push((kname.clone(), k.kind.clone(), w));
                        keys.push((
                            m::TableKey {
                                match_kind: mk,
                                target,
                                mask,
                                name: kname,
                            },
                            w,
                        ));
                    }
                }
                TableProp::Actions(list) => {
                    for (anns, e) in list {
                        let (_, ai, _) = self.action_ref(e)?;
                        if !actions.contains(&ai) {
                            actions.push(ai);
                            meta.actions.push((
                                ai,
                                annotation(anns, "defaultonly").is_some(),
                                annotation(anns, "tableonly").is_some(),
                            ));
                        }
                    }
                }
                TableProp::Entries { entries, .. } => {
                    entries_ast = Some(entries.clone());
                }
                TableProp::Value {
                    name,
                    is_const,
                    value,
                } => match name.as_str() {
                    "default_action" => {
                        let (an, ai, args) = self.action_ref(value)?;
                        if !actions.contains(&ai) {
                            return err(value.pos, format!("default action `{an}` is not in the actions list of table `{tname}`"));
                        }
                        let data = self.action_data(ai, &args, value.pos)?;
                        default = Some((ai, data, *is_const));
                        meta.const_default = *is_const;
                    }
                    "size" => meta.size = self.const_size(value, "the table size")?,
                    "support_timeout" => {
                        support_timeout = matches!(self.expr(value)?, Val::Const(1, _))
                    }
                    "implementation" => {
                        let i = match &value.kind {
                            ExprKind::Name(n) => match self.lookup(n) {
                                Some(Val::Place(Place::Extern(i))) => i,
                                _ => {
                                    return err(
                                        value.pos,
                                        format!("`{n}` is not an action profile or selector"),
                                    )
                                }
                            },
                            ExprKind::Call(c, _, args) => {
                                let ExprKind::Name(kind) = &c.kind else {
                                    return err(value.pos, "bad implementation");
                                };
                                let d = Decl {
                                    annotations: vec![],
                                    kind: DeclKind::Instance {
                                        ty: TypeRef::Named(kind.clone(), vec![], value.pos),
                                        args: args.clone(),
                                        name: format!("{tname}_profile"),
                                    },
                                    pos: value.pos,
                                };
                                self.instance(&d, tname)?;
                                self.ext.len() - 1
                            }
                            _ => return err(value.pos, "bad implementation"),
                        };
                        let x = self.ext[i].clone();
                        let Some((_, pi)) = x.profile else {
                            return err(
                                value.pos,
                                format!("`{}` is not an action profile or selector", x.name),
                            );
                        };
                        is_ws = x.kind == "action_selector";
                        profile = Some(pi);
                        meta.impl_profile = Some(x.name.clone());
                    }
                    "counters" => {
                        let ExprKind::Name(n) = &value.kind else {
                            return err(value.pos, "expected a direct_counter instance");
                        };
                        match self.lookup(n) {
                            Some(Val::Place(Place::Extern(i)))
                                if self.ext[i].kind == "direct_counter" =>
                            {
                                let ci = self.ext[i].index as usize;
                                self.prog.counter_arrays[ci].binding = Some(qn.clone());
                                with_counters = true;
                                meta.direct_counter = Some(self.ext[i].name.clone());
                            }
                            _ => return err(value.pos, format!("`{n}` is not a direct_counter")),
                        }
                    }
                    "meters" => {
                        let ExprKind::Name(n) = &value.kind else {
                            return err(value.pos, "expected a direct_meter instance");
                        };
                        match self.lookup(n) {
                            Some(Val::Place(Place::Extern(i)))
                                if self.ext[i].kind == "direct_meter" =>
                            {
                                let mi = self.ext[i].index;
                                self.prog.meter_arrays[mi as usize].binding = Some(qn.clone());
                                direct_meter = Some(mi);
                                meta.direct_meter = Some(self.ext[i].name.clone());
                            }
                            _ => return err(value.pos, format!("`{n}` is not a direct_meter")),
                        }
                    }
                    other => {
                        let _ = (other, ppos);
                    }
                },
            }
        }
        pre.append(&mut self.cur);
        self.cur = saved_cur;
        // An empty actions list is allowed (P4-16 §14.2.1.2): the table runs its default
        // action, `NoAction` unless another is given.
        if default.is_none() && profile.is_none() {
            let na = self.table_action("NoAction", decl.pos)?;
            if !actions.contains(&na) {
                actions.push(na);
                meta.actions.push((na, true, false));
            }
            default = Some((na, vec![], false));
        }
        if actions.is_empty() {
            return err(decl.pos, format!("table `{tname}` has no actions"));
        }
        let match_type = if keys
            .iter()
            .any(|(k, _)| k.match_kind == m::MatchKind::Range)
        {
            m::MatchKind::Range
        } else if keys
            .iter()
            .any(|(k, _)| k.match_kind == m::MatchKind::Ternary)
        {
            m::MatchKind::Ternary
        } else if keys.iter().any(|(k, _)| k.match_kind == m::MatchKind::Lpm) {
            m::MatchKind::Lpm
        } else {
            m::MatchKind::Exact
        };
        if keys
            .iter()
            .filter(|(k, _)| k.match_kind == m::MatchKind::Lpm)
            .count()
            > 1
        {
            return err(
                decl.pos,
                format!("table `{tname}` has more than one lpm key"),
            );
        }
        let entries = match entries_ast {
            Some(es) => {
                let mut out = Vec::new();
                for (i, e) in es.iter().enumerate() {
                    out.push(self.const_entry(e, &keys, &actions, i)?);
                }
                // Explicit priorities follow P4's rule (the largest value wins); entries without
                // one continue from the previous entry. BMv2's smallest value wins, so invert.
                if es.iter().any(|e| e.priority.is_some()) {
                    let mut p4: Vec<i64> = Vec::new();
                    for (i, e) in es.iter().enumerate() {
                        let v = match &e.priority {
                            Some(_) => out[i].priority as i64,
                            None => p4.last().map(|p| p - 1).unwrap_or(es.len() as i64),
                        };
                        p4.push(v);
                    }
                    let max = p4.iter().copied().max().unwrap_or(0);
                    for (o, p) in out.iter_mut().zip(p4) {
                        o.priority = (max + 1 - p).clamp(1, i32::MAX as i64) as i32;
                    }
                }
                // `@priority(N)` (the older annotation form) is BMv2's own priority, as p4c
                // passes it through: the smallest value wins. Other entries keep their position.
                for (o, e) in out.iter_mut().zip(&es) {
                    if e.priority.is_some() {
                        continue;
                    }
                    if let Some(v) =
                        annotation(&e.annotations, "priority").and_then(|a| a.args.first().cloned())
                    {
                        let n = self.const_arg_i(&v)?;
                        if !(1..=i32::MAX as i128).contains(&n) {
                            return err(v.pos, format!("entry priority {n} is out of range"));
                        }
                        o.priority = n as i32;
                    }
                }
                meta.has_const_entries = true;
                Some(out)
            }
            None => None,
        };
        if let (Some(pi), true) = (profile, is_ws) {
            if let Some(s) = self.prog.pipelines[self.pipeline].action_profiles[pi as usize]
                .selector
                .as_mut()
            {
                s.input = selector_inputs;
            }
        }
        meta.support_timeout = support_timeout;
        let pl = &mut self.prog.pipelines[self.pipeline];
        let idx = pl.tables.len() as u32;
        let n = actions.len();
        pl.tables.push(m::Table {
            name: qn,
            id: idx as i64,
            match_type,
            table_type: match (profile, is_ws) {
                (None, _) => m::TableType::Simple,
                (Some(_), false) => m::TableType::Indirect,
                (Some(_), true) => m::TableType::IndirectWs,
            },
            key: keys.into_iter().map(|(k, _)| k).collect(),
            actions,
            next_tables: m::NextTables::PerAction(vec![None; n]),
            base_default_next: None,
            max_size: meta.size,
            with_counters,
            support_timeout,
            direct_meter,
            default_entry: if profile.is_some() {
                None
            } else {
                default.map(|(a, d, c)| m::DefaultEntry {
                    action: a,
                    action_const: c,
                    action_data: d,
                    action_entry_const: c,
                })
            },
            action_profile: profile,
            entries,
        });
        self.extra.tables.push(meta);
        if let Some(t) = self.tables.get_mut(tname) {
            t.node = Some(idx);
        }
        Ok((idx, pre))
    }

    fn const_entry(
        &mut self,
        e: &TableEntry,
        keys: &[(m::TableKey, u32)],
        actions: &[u32],
        i: usize,
    ) -> R<m::ConstEntry> {
        let elems: Vec<&Expr> = if e.keys.len() == 1 {
            match &e.keys[0].kind {
                ExprKind::List(v) if keys.len() > 1 => v.iter().collect(),
                _ => vec![&e.keys[0]],
            }
        } else {
            e.keys.iter().collect()
        };
        if elems.len() != keys.len() {
            return err(
                e.pos,
                format!(
                    "the table has {} key field(s) but this entry has {}",
                    keys.len(),
                    elems.len()
                ),
            );
        }
        let mut out = Vec::new();
        for (x, (k, w)) in elems.iter().zip(keys) {
            let t = Ty::Bit(*w);
            let v = self.expr(x)?;
            let cst = |s: &mut Self, v: Val| -> R<i128> {
                if let Val::Const(c, Ty::Bool) = v {
                    return Ok(c);
                }
                match s.convert(v, &t, x.pos)? {
                    Val::Const(c, _) => Ok(wrap(c, &t)),
                    _ => err(x.pos, "entry keys must be compile-time constants"),
                }
            };
            let b = |v: i128| int_of(v).to_bytes(*w);
            let full = mask_int(*w).to_bytes(*w);
            let ck = match (k.match_kind, v) {
                (m::MatchKind::Exact | m::MatchKind::Valid, Val::Default) => {
                    return err(x.pos, "an exact key cannot be a wildcard (`_` or default)")
                }
                (m::MatchKind::Exact, v) => m::ConstKey::Exact(b(cst(self, v)?)),
                (m::MatchKind::Lpm, Val::Default) => m::ConstKey::Lpm(b(0), 0),
                (m::MatchKind::Lpm, Val::Mask(a, mk)) => {
                    let a = cst(self, *a)?;
                    let mk = cst(self, *mk)?;
                    let ones = mk.count_ones();
                    if *w < 127 && mk != wrap(!((1i128 << (*w - ones.min(*w))) - 1), &t) {
                        return err(x.pos, "lpm masks must be a contiguous prefix");
                    }
                    m::ConstKey::Lpm(b(a & mk), ones)
                }
                (m::MatchKind::Lpm, v) => m::ConstKey::Lpm(b(cst(self, v)?), *w),
                (m::MatchKind::Ternary, Val::Default) => m::ConstKey::Ternary(b(0), b(0)),
                (m::MatchKind::Ternary, Val::Mask(a, mk)) => {
                    let a = cst(self, *a)?;
                    let mk = cst(self, *mk)?;
                    m::ConstKey::Ternary(b(a & mk), b(mk))
                }
                (m::MatchKind::Ternary, v) => m::ConstKey::Ternary(b(cst(self, v)?), full),
                (m::MatchKind::Range, Val::Default) => m::ConstKey::Range(b(0), full),
                (m::MatchKind::Range, Val::Range(a, z)) => {
                    let a = cst(self, *a)?;
                    let z = cst(self, *z)?;
                    m::ConstKey::Range(b(a), b(z))
                }
                (m::MatchKind::Range, v) => {
                    let c = cst(self, v)?;
                    m::ConstKey::Range(b(c), b(c))
                }
                (m::MatchKind::Valid, v) => m::ConstKey::Valid(cst(self, v)? != 0),
            };
            out.push(ck);
        }
        let (an, ai, args) = self.action_ref(&e.action)?;
        if !actions.contains(&ai) {
            return err(
                e.action.pos,
                format!("action `{an}` is not in the table's actions list"),
            );
        }
        let data = self.action_data(ai, &args, e.action.pos)?;
        let priority = match &e.priority {
            Some(p) => self.const_arg_i(p)? as i32,
            None => i as i32 + 1,
        };
        Ok(m::ConstEntry {
            key: out,
            action: ai,
            action_data: data,
            priority,
        })
    }

    fn const_arg_i(&mut self, e: &Expr) -> R<i128> {
        match self.expr(e)? {
            Val::Const(v, _) => Ok(v),
            _ => err(e.pos, "expected a constant"),
        }
    }
}
