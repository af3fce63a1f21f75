//! The checker and back end: resolves names and types of a parsed v1model program and lowers it
//! to a [`tern_model::Program`] (BMv2 JSON) the way simple_switch expects it: metadata and locals
//! as scalars, standard_metadata with its field aliases, statements outside tables as hidden
//! tables, conditionals inside actions as `_jump`s, calculations for hashes and checksums,
//! learn lists and field lists.

use crate::ast::*;
use crate::diag::{Diagnostic, Pos};
use std::collections::HashMap;
use tern_model as m;

type R<T> = Result<T, Diagnostic>;

fn err<T>(pos: Pos, msg: impl Into<String>) -> R<T> {
    Err(Diagnostic::new(pos, msg))
}

/// A resolved type.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Bit(u32),
    Int(u32),
    Varbit(u32),
    Bool,
    InfInt,
    Error,
    Str,
    Void,
    Header(String),
    Union(String),
    Struct(String),
    Stack(Box<Ty>, u32),
    /// Enum name and the underlying width for serializable enums.
    Enum(String, Option<u32>),
    Extern(String),
    MatchKind,
    Tuple(Vec<Ty>),
}

impl Ty {
    fn width(&self) -> Option<u32> {
        match self {
            Ty::Bit(w) | Ty::Int(w) => Some(*w),
            Ty::Bool => Some(1),
            Ty::Error => Some(32),
            Ty::Enum(_, Some(w)) => Some(*w),
            Ty::Enum(_, None) => Some(32),
            _ => None,
        }
    }
    fn name(&self) -> String {
        match self {
            Ty::Bit(w) => format!("bit<{w}>"),
            Ty::Int(w) => format!("int<{w}>"),
            Ty::Varbit(w) => format!("varbit<{w}>"),
            Ty::Bool => "bool".into(),
            Ty::InfInt => "int".into(),
            Ty::Error => "error".into(),
            Ty::Str => "string".into(),
            Ty::Void => "void".into(),
            Ty::Header(n) | Ty::Union(n) | Ty::Struct(n) | Ty::Enum(n, _) | Ty::Extern(n) => {
                n.clone()
            }
            Ty::Stack(t, n) => format!("{}[{n}]", t.name()),
            Ty::MatchKind => "match_kind".into(),
            Ty::Tuple(v) => format!(
                "tuple<{}>",
                v.iter().map(|t| t.name()).collect::<Vec<_>>().join(", ")
            ),
        }
    }
    fn is_numeric(&self) -> bool {
        matches!(self, Ty::Bit(_) | Ty::Int(_) | Ty::InfInt)
    }
}

/// A storage location or named entity an expression can denote.
#[derive(Clone, Debug)]
enum Place {
    Field(m::FieldRef, Ty),
    Header(u32, String),
    Stack {
        stack: u32,
        elem: String,
        headers: Vec<u32>,
    },
    StackNext(u32),
    StackLast(u32, String),
    Struct(String, Vec<(String, Place)>),
    Param(u32, Ty),
    Extern(usize),
    Table(String),
    Action(String),
    Function(String),
    Packet,
    ValueSet(u32),
    /// A header union instance: index, type name and its member headers.
    Union(u32, String, Vec<(String, Place)>),
    /// A header-union stack: index and its unions (`Place::Union`), in index order.
    UnionStack(u32, String, Vec<Place>),
    /// `us.next` of a header-union stack (index, union type), in parsers.
    UnionStackNext(u32, String),
    /// `us.next.member` (stack index, member index), an extract target.
    UnionStackNextMember(u32, u32),
    /// A control instantiated inside another: (control type, instance name).
    Control(String, String),
    Enum(String),
    ErrorNs,
}

/// A lowered expression value.
#[derive(Clone, Debug)]
enum Val {
    Const(i128, Ty),
    Rv(m::Expr, Ty),
    Place(Place),
    Str(String),
    List(Vec<Val>),
    /// A named initializer `{ f = v, ... }`.
    Named(Vec<(String, Val)>),
    Default,
    Mask(Box<Val>, Box<Val>),
    Range(Box<Val>, Box<Val>),
    /// `lookahead<T>`: bit offset, width and `T` (a header or struct gives members by name).
    Lookahead(u32, u32, Ty),
}

/// An extern instance (counter, register, …).
#[derive(Clone, Debug)]
struct ExternInst {
    kind: String,
    name: String,
    /// Index into the corresponding program array.
    index: u32,
    elem: Option<Ty>,
    /// Action profile/selector: index in the pipeline's action profiles.
    profile: Option<(usize, u32)>,
}

/// Control-flow items of an apply block (built forward, linked backward).
enum Item {
    Prims(Vec<m::Primitive>),
    Exit(Vec<m::Primitive>),
    Apply(u32),
    If(m::Expr, Vec<Item>, Vec<Item>),
    IfHit(u32, bool, Vec<Item>, Vec<Item>),
    Switch(u32, Vec<(Vec<u32>, Vec<Item>)>, Option<Vec<Item>>),
    Return,
    /// An inlined sub-control: `return` inside it continues after it.
    Sub(Vec<Item>),
}

struct TableInfo {
    decl: Decl,
    control: String,
    node: Option<u32>,
}

/// Per-table-action knowledge for P4Info.
#[derive(Clone, Debug, Default)]
pub struct TableMeta {
    pub name: String,
    pub keys: Vec<(String, String, u32)>,
    pub actions: Vec<(u32, bool, bool)>,
    pub size: u32,
    pub const_default: bool,
    pub impl_profile: Option<String>,
    pub direct_counter: Option<String>,
    pub direct_meter: Option<String>,
    pub support_timeout: bool,
    pub has_const_entries: bool,
}

/// Extra knowledge the P4Info writer needs beyond the JSON model.
#[derive(Clone, Debug, Default)]
pub struct Extra {
    pub tables: Vec<TableMeta>,
    /// Action index → `@id` override, hidden flag.
    pub action_hidden: Vec<bool>,
    pub counter_units: HashMap<String, String>,
    pub digest_types: Vec<(String, Vec<(String, u32)>)>,
    pub value_sets: Vec<(String, u32, u32)>,
    /// `@id(N)` annotations: P4Info name → N.
    pub id_overrides: HashMap<String, u32>,
    /// `@controller_header("packet_in"/"packet_out")` headers, in declaration order.
    pub controller_headers: Vec<ControllerHeader>,
}

/// A header type annotated `@controller_header("...")` (P4Info `controller_packet_metadata`).
#[derive(Clone, Debug, Default)]
pub struct ControllerHeader {
    /// The annotation's name (`packet_in`, `packet_out`): the P4Info preamble name and alias.
    pub name: String,
    /// The header type's control-plane name (`@name` or the type name): p4c hashes this one
    /// for the id.
    pub type_name: String,
    /// `@id(N)` on the header type.
    pub id: Option<u32>,
    /// Fields: (name, bit width, P4Info metadata id).
    pub fields: Vec<(String, u32, u32)>,
}

/// Metadata ids as p4c's `FieldIdAllocator` gives them: `@id(N)` where annotated, the others
/// 1, 2, ... in declaration order, skipping ids already taken.
fn field_ids(fields: &[(String, Ty, Vec<Annotation>)]) -> Vec<u32> {
    let explicit: Vec<Option<u32>> = fields
        .iter()
        .map(|(_, _, anns)| annotation_int(anns, "id").and_then(|v| u32::try_from(v).ok()))
        .collect();
    let taken: std::collections::HashSet<u32> = explicit.iter().flatten().copied().collect();
    let mut next = 1u32;
    explicit
        .iter()
        .map(|e| match e {
            Some(id) => *id,
            None => {
                while taken.contains(&next) {
                    next += 1;
                }
                next += 1;
                next - 1
            }
        })
        .collect()
}

struct Scope {
    vars: Vec<HashMap<String, Val>>,
}

impl Scope {
    fn get(&self, n: &str) -> Option<&Val> {
        self.vars.iter().rev().find_map(|s| s.get(n))
    }
    fn set(&mut self, n: &str, v: Val) {
        if let Some(s) = self.vars.last_mut() {
            s.insert(n.to_string(), v);
        }
    }
    fn push(&mut self) {
        self.vars.push(HashMap::new());
    }
    fn pop(&mut self) {
        self.vars.pop();
    }
}

/// An enum: underlying width (serializable enums) and members with values.
type EnumInfo = (Option<u32>, Vec<(String, i128)>);

/// The lowering state.
pub struct Lower {
    pub prog: m::Program,
    pub extra: Extra,
    /// Constructor arguments of control instances, by (control type, instance name).
    ctor_args: HashMap<(String, String), Vec<Val>>,
    /// Constructor arguments `main` gives the block being lowered.
    top_ctor: Vec<Expr>,
    typedefs: HashMap<String, Ty>,
    headers: HashMap<String, Vec<(String, Ty, Vec<Annotation>)>>,
    /// Struct-typed fields of headers, flattened into the header's fields `row_e`, `row_t`, …:
    /// (header type, flattened prefix) → struct type.
    header_structs: HashMap<(String, String), String>,
    structs: HashMap<String, Vec<(String, Ty, Vec<Annotation>)>>,
    unions: HashMap<String, Vec<(String, Ty, Vec<Annotation>)>>,
    enums: HashMap<String, EnumInfo>,
    errors: Vec<String>,
    externs: HashMap<String, ()>,
    global_actions: HashMap<String, Decl>,
    global_funcs: HashMap<String, Decl>,
    global_consts: HashMap<String, Val>,
    decls: Vec<Decl>,
    scope: Scope,
    /// Actions visible in the current control (local first): name → decl.
    local_actions: HashMap<String, Decl>,
    control_name: String,
    /// Lowered table actions: (qualified name) → action index.
    action_index: HashMap<String, u32>,
    ext: Vec<ExternInst>,
    tables: HashMap<String, TableInfo>,
    header_type_index: HashMap<String, u32>,
    used_names: HashMap<String, u32>,
    scalar_fields: Vec<m::FieldDef>,
    pipeline: usize,
    std_header: u32,
    meta_fields: Vec<(m::FieldRef, Vec<Annotation>)>,
    field_list_ids: HashMap<i128, i64>,
    learn_by_type: HashMap<String, i64>,
    return_jumps: Vec<Vec<usize>>,
    /// Copy-outs of the calls being inlined (outermost first), run before an `exit`.
    exit_copyouts: Vec<Vec<body::Writeback>>,
    inline_depth: usize,
    cur: Vec<m::Primitive>,
    /// Open loops: (break jumps, continue jumps).
    loops: Vec<(Vec<usize>, Vec<usize>)>,
    mode: body::Mode,
    parser_ops: Vec<m::ParserOp>,
    /// The parser state being lowered (its name).
    cur_state: String,
    /// Bare `lookahead<T>();` statements of the parser being lowered: (state, index of their
    /// placeholder op, bits of `T`); checked once the states' offsets are known.
    bare_lookaheads: Vec<(String, usize, u32)>,
    deparse_order: Vec<u32>,
    ret_slot: Option<Place>,
    pub diags: Vec<Diagnostic>,
}

fn int_of(v: i128) -> m::Int {
    m::Int {
        negative: v < 0,
        magnitude: {
            let b = v.unsigned_abs().to_be_bytes().to_vec();
            let first = b.iter().position(|x| *x != 0).unwrap_or(b.len() - 1);
            b[first..].to_vec()
        },
    }
}

fn mask_int(w: u32) -> m::Int {
    let nbytes = w.div_ceil(8) as usize;
    let mut mag = vec![0xffu8; nbytes.max(1)];
    let extra = nbytes as u32 * 8 - w;
    if extra > 0 && !mag.is_empty() {
        mag[0] = 0xff >> extra;
    }
    if w == 0 {
        mag = vec![0];
    }
    m::Int {
        negative: false,
        magnitude: mag,
    }
}

fn wrap(v: i128, t: &Ty) -> i128 {
    match t {
        Ty::Bit(w) if *w < 127 => v & ((1i128 << w) - 1),
        Ty::Int(w) if *w < 127 => {
            let m = (1i128 << w) - 1;
            let u = v & m;
            if u >> (w - 1) & 1 == 1 {
                u - (1i128 << w)
            } else {
                u
            }
        }
        Ty::Bool => (v != 0) as i128,
        _ => v,
    }
}

fn op(op: m::Op, l: Option<m::Expr>, r: Option<m::Expr>) -> m::Expr {
    m::Expr::Op {
        op,
        left: l.map(Box::new),
        right: r.map(Box::new),
        cond: None,
    }
}

fn cnst(v: i128) -> m::Expr {
    m::Expr::Const(int_of(v))
}

fn to_arg(e: m::Expr) -> m::Arg {
    match e {
        m::Expr::Field(f) => m::Arg::Field(f),
        m::Expr::Const(c) => m::Arg::Const(c),
        m::Expr::Local(i) => m::Arg::RuntimeData(i),
        m::Expr::Header(h) => m::Arg::Header(h),
        m::Expr::HeaderStack(s) => m::Arg::HeaderStack(s),
        m::Expr::StackField { stack, field } => m::Arg::StackField { stack, field },
        e => m::Arg::Expr(e),
    }
}

fn prim(opname: &str, params: Vec<m::Arg>) -> m::Primitive {
    m::Primitive {
        op: opname.into(),
        params,
        source_info: None,
    }
}

/// Rebuild an access chain with the index node at `at` replaced by the constant `k`.
pub(crate) fn replace_index(e: &Expr, at: Pos, k: usize) -> Expr {
    let kind = match &e.kind {
        ExprKind::Index(b, i) if e.pos == at => ExprKind::Index(
            b.clone(),
            Box::new(Expr {
                kind: ExprKind::Int(k as u128, None),
                pos: i.pos,
            }),
        ),
        ExprKind::Index(b, i) => ExprKind::Index(Box::new(replace_index(b, at, k)), i.clone()),
        ExprKind::Member(b, n) => ExprKind::Member(Box::new(replace_index(b, at, k)), n.clone()),
        ExprKind::Slice(b, h, l) => {
            ExprKind::Slice(Box::new(replace_index(b, at, k)), h.clone(), l.clone())
        }
        ExprKind::Call(c, t, a) => {
            ExprKind::Call(Box::new(replace_index(c, at, k)), t.clone(), a.clone())
        }
        other => other.clone(),
    };
    Expr { kind, pos: e.pos }
}

/// Whether evaluating `e` may write storage: it contains a call other than the pure built-in
/// methods (`isValid`, the size queries).
pub(crate) fn has_effects(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Call(c, _, a) => {
            let pure = matches!(&c.kind, ExprKind::Member(_, m) if matches!(m.as_str(),
                "isValid" | "minSizeInBits" | "minSizeInBytes" | "maxSizeInBits"
                    | "maxSizeInBytes" | "sizeInBits" | "sizeInBytes"));
            !pure || has_effects(c) || a.iter().any(has_effects)
        }
        ExprKind::Member(x, _) | ExprKind::Unary(_, x) | ExprKind::Cast(_, x) => has_effects(x),
        ExprKind::Index(x, y)
        | ExprKind::Binary(_, x, y)
        | ExprKind::Mask(x, y)
        | ExprKind::Range(x, y) => has_effects(x) || has_effects(y),
        ExprKind::Slice(x, h, l) => has_effects(x) || has_effects(h) || has_effects(l),
        ExprKind::Ternary(c, x, y) => has_effects(c) || has_effects(x) || has_effects(y),
        ExprKind::List(v) => v.iter().any(has_effects),
        ExprKind::NamedList(v) => v.iter().any(|(_, x)| has_effects(x)),
        _ => false,
    }
}

/// [`replace_index`] applied to every sub-expression of `e`: a right side that repeats the left
/// side of a compound assignment (`a[i].x |= v` is `a[i].x = a[i].x | v`, the copy keeping the
/// positions) reads the element the left side writes, its index evaluated once.
pub(crate) fn replace_index_everywhere(e: &Expr, at: Pos, k: usize) -> Expr {
    let b = |x: &Expr| Box::new(replace_index_everywhere(x, at, k));
    let kind = match &e.kind {
        ExprKind::Index(..) | ExprKind::Member(..) | ExprKind::Slice(..)
            if replace_index(e, at, k) != *e =>
        {
            return replace_index(e, at, k);
        }
        ExprKind::Member(x, n) => ExprKind::Member(b(x), n.clone()),
        ExprKind::Index(x, i) => ExprKind::Index(b(x), b(i)),
        ExprKind::Slice(x, h, l) => ExprKind::Slice(b(x), h.clone(), l.clone()),
        ExprKind::Call(c, t, a) => ExprKind::Call(
            b(c),
            t.clone(),
            a.iter()
                .map(|x| replace_index_everywhere(x, at, k))
                .collect(),
        ),
        ExprKind::Unary(o, x) => ExprKind::Unary(o, b(x)),
        ExprKind::Binary(o, x, y) => ExprKind::Binary(o, b(x), b(y)),
        ExprKind::Ternary(c, x, y) => ExprKind::Ternary(b(c), b(x), b(y)),
        ExprKind::Cast(t, x) => ExprKind::Cast(t.clone(), b(x)),
        ExprKind::List(v) => ExprKind::List(
            v.iter()
                .map(|x| replace_index_everywhere(x, at, k))
                .collect(),
        ),
        other => other.clone(),
    };
    Expr { kind, pos: e.pos }
}

/// Source text of a simple expression (for key names).
pub fn expr_text(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Member(b, n) => format!("{}.{n}", expr_text(b)),
        ExprKind::Index(b, i) => format!("{}[{}]", expr_text(b), expr_text(i)),
        ExprKind::Slice(b, h, l) => format!("{}[{}:{}]", expr_text(b), expr_text(h), expr_text(l)),
        ExprKind::Call(b, _, a) => format!(
            "{}({})",
            expr_text(b),
            a.iter().map(expr_text).collect::<Vec<_>>().join(", ")
        ),
        ExprKind::Int(v, _) => v.to_string(),
        ExprKind::Bool(b) => b.to_string(),
        _ => "expr".into(),
    }
}

impl Lower {
    /// Set up a lowering pass for `decls` (`filename` labels the program).
    pub fn new(decls: Vec<Decl>) -> Lower {
        Lower {
            prog: m::Program {
                version: Some((2, 23)),
                ..Default::default()
            },
            extra: Extra::default(),
            typedefs: HashMap::new(),
            headers: HashMap::new(),
            header_structs: HashMap::new(),
            structs: HashMap::new(),
            unions: HashMap::new(),
            enums: HashMap::new(),
            errors: Vec::new(),
            externs: HashMap::new(),
            global_actions: HashMap::new(),
            global_funcs: HashMap::new(),
            global_consts: HashMap::new(),
            decls,
            scope: Scope {
                vars: vec![HashMap::new()],
            },
            local_actions: HashMap::new(),
            control_name: String::new(),
            action_index: HashMap::new(),
            ext: Vec::new(),
            tables: HashMap::new(),
            header_type_index: HashMap::new(),
            used_names: HashMap::new(),
            scalar_fields: Vec::new(),
            pipeline: 0,
            std_header: 1,
            meta_fields: Vec::new(),
            field_list_ids: HashMap::new(),
            learn_by_type: HashMap::new(),
            return_jumps: Vec::new(),
            exit_copyouts: Vec::new(),
            inline_depth: 0,
            ctor_args: HashMap::new(),
            top_ctor: Vec::new(),
            cur: Vec::new(),
            loops: Vec::new(),
            mode: body::Mode::Action,
            parser_ops: Vec::new(),
            cur_state: String::new(),
            bare_lookaheads: Vec::new(),
            deparse_order: Vec::new(),
            ret_slot: None,
            diags: Vec::new(),
        }
    }

    fn unique(&mut self, base: &str) -> String {
        let n = self.used_names.entry(base.to_string()).or_insert(0);
        let name = if *n == 0 {
            base.to_string()
        } else {
            format!("{base}_{}", *n - 1)
        };
        *n += 1;
        if name != base && self.used_names.contains_key(&name) {
            return self.unique(base);
        }
        self.used_names.entry(name.clone()).or_insert(1);
        name
    }

    // ---------------------------------------------------------------- types

    /// A width, stack size or slice bound: a compile-time constant in `0..=2^20`.
    fn const_u32(&mut self, e: &Expr, what: &str) -> R<u32> {
        self.const_at_most(e, what, 1 << 20)
    }

    /// The size of a table or of an extern instance (counter, meter, register, action
    /// profile or selector, value set): a compile-time constant in `0..=2^24`, the most
    /// entries or cells the data plane indexes.
    pub(crate) fn const_size(&mut self, e: &Expr, what: &str) -> R<u32> {
        self.const_at_most(e, what, 1 << 24)
    }

    fn const_at_most(&mut self, e: &Expr, what: &str, max: i128) -> R<u32> {
        match self.expr(e)? {
            Val::Const(v, _) if (0..=max).contains(&v) => Ok(v as u32),
            Val::Const(v, _) if v > max => err(e.pos, format!("{what} is {v}: at most {max}")),
            _ => err(
                e.pos,
                format!("{what} must be a non-negative compile-time constant"),
            ),
        }
    }

    fn ty(&mut self, t: &TypeRef) -> R<Ty> {
        Ok(match t {
            TypeRef::Bit(w) => {
                let w = self.const_u32(w, "a bit width")?;
                if w == 0 || w > 2048 {
                    return err(Pos::default(), format!("bit width {w} is out of range"));
                }
                Ty::Bit(w)
            }
            TypeRef::Int(w) => {
                let pw = w.pos;
                let w = self.const_u32(w, "an int width")?;
                if !(2..=2048).contains(&w) {
                    return err(pw, format!("int width {w} is out of range (2..=2048)"));
                }
                Ty::Int(w)
            }
            TypeRef::Varbit(w) => Ty::Varbit(self.const_u32(w, "a varbit width")?),
            TypeRef::Bool => Ty::Bool,
            TypeRef::Error => Ty::Error,
            TypeRef::Str => Ty::Str,
            TypeRef::Void => Ty::Void,
            TypeRef::InfInt => Ty::InfInt,
            TypeRef::Tuple(v) => {
                let mut o = Vec::new();
                for t in v {
                    o.push(self.ty(t)?);
                }
                Ty::Tuple(o)
            }
            TypeRef::Stack(t, n) => {
                let et = self.ty(t)?;
                let n = self.const_u32(n, "a header stack size")?;
                if n == 0 || n > 1024 {
                    return err(Pos::default(), "header stack size out of range");
                }
                Ty::Stack(Box::new(et), n)
            }
            TypeRef::Named(n, _, pos) => {
                if let Some(t) = self.typedefs.get(n) {
                    return Ok(t.clone());
                }
                if self.headers.contains_key(n) {
                    Ty::Header(n.clone())
                } else if self.structs.contains_key(n) {
                    Ty::Struct(n.clone())
                } else if self.unions.contains_key(n) {
                    Ty::Union(n.clone())
                } else if let Some((w, _)) = self.enums.get(n) {
                    Ty::Enum(n.clone(), *w)
                } else if self.externs.contains_key(n) {
                    Ty::Extern(n.clone())
                } else if n == "match_kind" {
                    Ty::MatchKind
                } else {
                    return err(*pos, format!("unknown type `{n}`"));
                }
            }
        })
    }

    fn fields_of(&mut self, fields: &[Field]) -> R<Vec<(String, Ty, Vec<Annotation>)>> {
        let mut v: Vec<(String, Ty, Vec<Annotation>)> = Vec::new();
        for f in fields {
            let t = self.ty(&f.ty).map_err(|mut d| {
                if d.pos == Pos::default() {
                    d.pos = f.pos;
                }
                d
            })?;
            if v.iter().any(|(n, _, _)| *n == f.name) {
                return err(f.pos, format!("duplicate field `{}`", f.name));
            }
            v.push((f.name.clone(), t, f.annotations.clone()));
        }
        Ok(v)
    }

    /// A header field as BMv2 fields: a struct-typed field (P4-16 allows structs of bit<W>,
    /// int<W>, bool and nested such structs in headers) becomes one field per member,
    /// named `field_member` like p4c's header flattening.
    fn flatten_header_field(
        &mut self,
        header: &str,
        name: String,
        t: Ty,
        anns: Vec<Annotation>,
        out: &mut Vec<(String, Ty, Vec<Annotation>)>,
        pos: Pos,
    ) -> R<()> {
        let Ty::Struct(sname) = &t else {
            out.push((name, t, anns));
            return Ok(());
        };
        let Some(members) = self.structs.get(sname).cloned() else {
            return err(
                pos,
                format!("header field `{name}` has struct type `{sname}`, which is not declared before it"),
            );
        };
        self.header_structs
            .insert((header.to_string(), name.clone()), sname.clone());
        for (m, mt, ma) in members {
            self.flatten_header_field(header, format!("{name}_{m}"), mt, ma, out, pos)?;
        }
        Ok(())
    }

    /// The struct-typed field `prefix` (of struct type `sname`) of header instance `h`: a
    /// struct place whose members are the header's flattened fields.
    fn header_struct_place(&self, h: u32, ht: &str, prefix: &str, sname: &str) -> Place {
        let hf = self.headers.get(ht).cloned().unwrap_or_default();
        let members = self.structs.get(sname).cloned().unwrap_or_default();
        let v = members
            .into_iter()
            .map(|(m, mt, _)| {
                let full = format!("{prefix}_{m}");
                let p = match &mt {
                    Ty::Struct(s2) => self.header_struct_place(h, ht, &full, s2),
                    _ => Place::Field(
                        m::FieldRef {
                            header: h,
                            field: hf.iter().position(|(n, _, _)| *n == full).unwrap_or(0) as u32,
                        },
                        mt,
                    ),
                };
                (m, p)
            })
            .collect();
        Place::Struct(sname.to_string(), v)
    }

    /// Pass 1: collect type declarations, constants, global actions and functions.
    fn collect(&mut self) {
        let decls = std::mem::take(&mut self.decls);
        for d in &decls {
            if let Err(e) = self.collect_one(d) {
                self.diags.push(e);
            }
        }
        self.decls = decls;
    }

    fn collect_one(&mut self, d: &Decl) -> R<()> {
        match &d.kind {
            DeclKind::Header { name, fields } => {
                let mut f = Vec::new();
                for (n, t, a) in self.fields_of(fields)? {
                    self.flatten_header_field(name, n, t, a, &mut f, d.pos)?;
                }
                let mut seen = std::collections::HashSet::new();
                if let Some((n, _, _)) = f.iter().find(|(n, _, _)| !seen.insert(n.as_str())) {
                    return err(
                        d.pos,
                        format!("header `{name}` has two fields named `{n}` (struct fields are flattened to `field_member`)"),
                    );
                }
                for (n, t, _) in &f {
                    if !matches!(t, Ty::Bit(_) | Ty::Int(_) | Ty::Varbit(_) | Ty::Bool)
                        && !matches!(t, Ty::Enum(_, Some(_)))
                    {
                        return err(
                            d.pos,
                            format!("header field `{n}` has type {} (headers hold bit<W>, int<W>, varbit<W>, bool or serializable enums)", t.name()),
                        );
                    }
                }
                if let Some(ch) = annotation_str(&d.annotations, "controller_header") {
                    let fields = f
                        .iter()
                        .zip(field_ids(&f))
                        .map(|((n, t, _), id)| (n.clone(), t.width().unwrap_or(0), id))
                        .collect();
                    let id = annotation_int(&d.annotations, "id").map(|v| (v & 0xff_ffff) as u32);
                    self.extra.controller_headers.push(ControllerHeader {
                        name: ch,
                        type_name: annotation_str(&d.annotations, "name")
                            .unwrap_or_else(|| name.clone()),
                        id,
                        fields,
                    });
                }
                self.headers.insert(name.clone(), f);
            }
            DeclKind::Struct { name, fields } => {
                let f = self.fields_of(fields)?;
                self.structs.insert(name.clone(), f);
            }
            DeclKind::HeaderUnion { name, fields } => {
                let f = self.fields_of(fields)?;
                self.unions.insert(name.clone(), f);
            }
            DeclKind::Typedef { name, ty } => {
                let t = self.ty(ty).map_err(|mut e| {
                    if e.pos == Pos::default() {
                        e.pos = d.pos;
                    }
                    e
                })?;
                self.typedefs.insert(name.clone(), t);
            }
            DeclKind::Enum {
                name,
                underlying,
                members,
            } => {
                let w = match underlying {
                    Some(t) => match self.ty(t)? {
                        Ty::Bit(w) | Ty::Int(w) => Some(w),
                        _ => return err(d.pos, "enum underlying type must be bit<W> or int<W>"),
                    },
                    None => None,
                };
                let mut ms = Vec::new();
                for (i, (n, v, p)) in members.iter().enumerate() {
                    let val = match (v, w) {
                        (Some(e), Some(_)) => match self.expr(e)? {
                            Val::Const(v, _) => v,
                            _ => return err(*p, "enum member value must be a constant"),
                        },
                        (None, Some(_)) => {
                            return err(*p, "serializable enum members need a value")
                        }
                        _ => i as i128,
                    };
                    ms.push((n.clone(), val));
                }
                self.enums.insert(name.clone(), (w, ms));
            }
            DeclKind::Error(names) => {
                for n in names {
                    if !self.errors.contains(n) {
                        self.errors.push(n.clone());
                    }
                }
            }
            DeclKind::Const { ty, name, value } => {
                let t = self.ty(ty)?;
                let v = self.expr(value)?;
                let v = self.convert(v, &t, value.pos)?;
                match v {
                    Val::Const(..) => {}
                    _ => {
                        return err(
                            value.pos,
                            format!("initializer of `{name}` is not a constant"),
                        )
                    }
                }
                self.global_consts.insert(name.clone(), v.clone());
                self.scope.vars[0].insert(name.clone(), v);
            }
            DeclKind::Extern { name, .. } => {
                self.externs.insert(name.clone(), ());
            }
            DeclKind::Action { name, .. } => {
                self.global_actions.insert(name.clone(), d.clone());
            }
            DeclKind::Function { name, .. } => {
                self.global_funcs.insert(name.clone(), d.clone());
            }
            _ => {}
        }
        Ok(())
    }

    // ---------------------------------------------------------------- storage

    fn header_type(&mut self, name: &str) -> u32 {
        if let Some(i) = self.header_type_index.get(name) {
            return *i;
        }
        let fields = self.headers.get(name).cloned().unwrap_or_default();
        let defs = fields
            .iter()
            .map(|(n, t, _)| m::FieldDef {
                name: n.clone(),
                width: match t {
                    Ty::Varbit(_) => m::FieldWidth::Variable,
                    t => m::FieldWidth::Fixed(t.width().unwrap_or(1)),
                },
                signed: matches!(t, Ty::Int(_)),
                saturating: false,
            })
            .collect();
        let max_length = fields
            .iter()
            .map(|(_, t, _)| match t {
                Ty::Varbit(w) => *w,
                t => t.width().unwrap_or(0),
            })
            .sum::<u32>()
            .div_ceil(8);
        let has_vl = fields.iter().any(|(_, t, _)| matches!(t, Ty::Varbit(_)));
        let idx = self.prog.header_types.len() as u32;
        self.prog.header_types.push(m::HeaderType {
            name: name.into(),
            id: idx as i64,
            fields: defs,
            length_exp: None,
            max_length: if has_vl { max_length } else { 0 },
        });
        self.header_type_index.insert(name.into(), idx);
        idx
    }

    fn new_header(&mut self, inst: &str, ty: &str, metadata: bool) -> u32 {
        let ht = self.header_type(ty);
        let name = self.unique(inst);
        let idx = self.prog.headers.len() as u32;
        self.prog.headers.push(m::Header {
            name,
            id: idx as i64,
            header_type: ht,
            metadata,
        });
        idx
    }

    fn new_scalar(&mut self, name: &str, t: &Ty) -> m::FieldRef {
        let name = self.unique(name);
        let w = t.width().unwrap_or(32);
        self.scalar_fields.push(m::FieldDef {
            name,
            width: m::FieldWidth::Fixed(w),
            signed: matches!(t, Ty::Int(_)),
            saturating: false,
        });
        m::FieldRef {
            header: 0,
            field: self.scalar_fields.len() as u32 - 1,
        }
    }

    /// Allocate storage for a value of type `t` named `path`.
    fn alloc(&mut self, path: &str, t: &Ty, pos: Pos, meta: bool) -> R<Place> {
        Ok(match t {
            Ty::Header(h) => Place::Header(self.new_header(path, h, false), h.clone()),
            Ty::Struct(s) => {
                let fields = self.structs.get(s).cloned().unwrap_or_default();
                let mut v = Vec::new();
                for (n, ft, anns) in fields {
                    let p = self.alloc(&format!("{path}.{n}"), &ft, pos, meta)?;
                    if meta {
                        if let Place::Field(f, _) = &p {
                            self.meta_fields.push((*f, anns.clone()));
                        }
                    }
                    v.push((n, p));
                }
                Place::Struct(s.clone(), v)
            }
            Ty::Stack(et, n) if matches!(**et, Ty::Union(_)) => {
                let Ty::Union(u) = &**et else {
                    return err(pos, "expected a header union stack");
                };
                let mut us = Vec::new();
                let mut ids = Vec::new();
                for i in 0..*n {
                    let p = self.alloc(&format!("{path}[{i}]"), et, pos, meta)?;
                    if let Place::Union(idx, _, _) = &p {
                        ids.push(*idx);
                    }
                    us.push(p);
                }
                let union_type = self
                    .prog
                    .header_union_types
                    .iter()
                    .position(|t| t.name == *u)
                    .unwrap_or(0) as u32;
                let sname = self.unique(path);
                let idx = self.prog.header_union_stacks.len() as u32;
                self.prog.header_union_stacks.push(m::UnionStack {
                    name: sname,
                    id: idx as i64,
                    union_type,
                    unions: ids,
                });
                Place::UnionStack(idx, u.clone(), us)
            }
            Ty::Stack(et, n) => {
                let Ty::Header(h) = &**et else {
                    return err(pos, "only stacks of headers or header unions are supported");
                };
                let mut hs = Vec::new();
                for i in 0..*n {
                    hs.push(self.new_header(&format!("{path}[{i}]"), h, false));
                }
                let ht = self.header_type(h);
                let sname = self.unique(path);
                let idx = self.prog.header_stacks.len() as u32;
                self.prog.header_stacks.push(m::HeaderStack {
                    name: sname,
                    id: idx as i64,
                    header_type: ht,
                    headers: hs.clone(),
                });
                Place::Stack {
                    stack: idx,
                    elem: h.clone(),
                    headers: hs,
                }
            }
            Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Error | Ty::Enum(..) => {
                Place::Field(self.new_scalar(path, t), t.clone())
            }
            Ty::Varbit(w) => {
                // BMv2 keeps variable-length fields only in headers (one per header): a
                // `varbit` variable is a metadata header of its own with that one field, as
                // p4c's back end does it.
                let ht = format!("varbit_{w}_t");
                self.headers
                    .entry(ht.clone())
                    .or_insert_with(|| vec![("field".to_string(), t.clone(), vec![])]);
                let h = self.new_header(path, &ht, true);
                Place::Field(
                    m::FieldRef {
                        header: h,
                        field: 0,
                    },
                    t.clone(),
                )
            }
            Ty::Tuple(elems) => {
                let mut v = Vec::new();
                for (i, et) in elems.iter().enumerate() {
                    v.push((
                        i.to_string(),
                        self.alloc(&format!("{path}.{i}"), et, pos, meta)?,
                    ));
                }
                Place::Struct(t.name(), v)
            }
            Ty::Union(u) => {
                let members = self.unions.get(u).cloned().unwrap_or_default();
                let mut places = Vec::new();
                let mut hs = Vec::new();
                let mut mtypes = Vec::new();
                for (n, mt, _) in &members {
                    let Ty::Header(h) = mt else {
                        return err(
                            pos,
                            format!("header union `{u}` member `{n}` is not a header"),
                        );
                    };
                    let hi = self.new_header(&format!("{path}.{n}"), h, false);
                    let ht = self.header_type(h);
                    mtypes.push((n.clone(), ht));
                    hs.push(hi);
                    places.push((n.clone(), Place::Header(hi, h.clone())));
                }
                let ut = match self
                    .prog
                    .header_union_types
                    .iter()
                    .position(|t| t.name == *u)
                {
                    Some(i) => i as u32,
                    None => {
                        let i = self.prog.header_union_types.len() as u32;
                        self.prog.header_union_types.push(m::UnionType {
                            name: u.clone(),
                            id: i as i64,
                            members: mtypes,
                        });
                        i
                    }
                };
                let name = self.unique(path);
                let idx = self.prog.header_unions.len() as u32;
                self.prog.header_unions.push(m::HeaderUnion {
                    name,
                    id: idx as i64,
                    union_type: ut,
                    headers: hs,
                });
                Place::Union(idx, u.clone(), places)
            }
            t => return err(pos, format!("cannot declare storage of type {}", t.name())),
        })
    }

    // ---------------------------------------------------------------- expressions

    fn lookup(&self, n: &str) -> Option<Val> {
        if let Some(v) = self.scope.get(n) {
            return Some(v.clone());
        }
        if let Some(v) = self.global_consts.get(n) {
            return Some(v.clone());
        }
        if self.local_actions.contains_key(n) || self.global_actions.contains_key(n) {
            return Some(Val::Place(Place::Action(n.into())));
        }
        if self.global_funcs.contains_key(n) {
            return Some(Val::Place(Place::Function(n.into())));
        }
        if self.enums.contains_key(n) {
            return Some(Val::Place(Place::Enum(n.into())));
        }
        if n == "error" {
            return Some(Val::Place(Place::ErrorNs));
        }
        None
    }

    /// The bits a `lookahead<T>` reads for `T`: fixed-width types, and headers and structs
    /// of them (nested); `None` for types without a fixed wire width.
    fn lookahead_width(&self, t: &Ty) -> Option<u32> {
        match t {
            Ty::Bit(w) | Ty::Int(w) => Some(*w),
            Ty::Bool => Some(1),
            Ty::Enum(_, Some(w)) => Some(*w),
            Ty::Header(h) => self
                .headers
                .get(h)?
                .iter()
                .map(|(_, t, _)| self.lookahead_width(t))
                .sum(),
            Ty::Struct(s) => self
                .structs
                .get(s)?
                .iter()
                .map(|(_, t, _)| self.lookahead_width(t))
                .sum(),
            _ => None,
        }
    }

    /// Read a value: places become rvalues.
    fn rv(&mut self, v: Val, pos: Pos) -> R<(m::Expr, Ty)> {
        match v {
            Val::Const(c, t) => {
                if t == Ty::Bool {
                    Ok((m::Expr::Bool(c != 0), t))
                } else {
                    Ok((cnst(c), t))
                }
            }
            Val::Rv(e, t) => Ok((e, t)),
            Val::Place(Place::Field(f, t)) => {
                if t == Ty::Bool {
                    Ok((op(m::Op::D2B, None, Some(m::Expr::Field(f))), t))
                } else {
                    Ok((m::Expr::Field(f), t))
                }
            }
            Val::Place(Place::Param(i, t)) => {
                if t == Ty::Bool {
                    Ok((op(m::Op::D2B, None, Some(m::Expr::Local(i))), t))
                } else {
                    Ok((m::Expr::Local(i), t))
                }
            }
            Val::Lookahead(o, w, t) => {
                let e = m::Expr::Lookahead {
                    offset: o,
                    width: w,
                };
                Ok(match t {
                    Ty::Bool => (op(m::Op::D2B, None, Some(e)), Ty::Bool),
                    t @ (Ty::Int(_) | Ty::Enum(_, Some(_))) => (e, t),
                    _ => (e, Ty::Bit(w)),
                })
            }
            Val::Place(Place::Header(h, t)) => Ok((m::Expr::Header(h), Ty::Header(t))),
            _ => err(pos, "this expression does not denote a value"),
        }
    }

    /// Data (non-bool) rvalue.
    fn data(&mut self, v: Val, pos: Pos) -> R<(m::Expr, Ty)> {
        let (e, t) = self.rv(v, pos)?;
        if t == Ty::Bool {
            if let m::Expr::Bool(b) = e {
                return Ok((cnst(b as i128), Ty::Bit(1)));
            }
            if let m::Expr::Op {
                op: m::Op::D2B,
                right: Some(r),
                ..
            } = &e
            {
                return Ok(((**r).clone(), Ty::Bit(1)));
            }
            return Ok((op(m::Op::B2D, None, Some(e)), Ty::Bit(1)));
        }
        Ok((e, t))
    }

    fn boolean(&mut self, v: Val, pos: Pos) -> R<m::Expr> {
        let (e, t) = self.rv(v, pos)?;
        if t != Ty::Bool {
            return err(pos, format!("expected a bool, found {}", t.name()));
        }
        Ok(e)
    }

    /// Implicit conversion of `v` to type `t` (constants get the type; same types pass).
    fn convert(&mut self, v: Val, t: &Ty, pos: Pos) -> R<Val> {
        match (&v, t) {
            (Val::Const(c, Ty::InfInt), Ty::Bit(_) | Ty::Int(_)) => {
                Ok(Val::Const(wrap(*c, t), t.clone()))
            }
            (Val::Const(c, Ty::InfInt), Ty::Enum(_, Some(_))) => Ok(Val::Const(*c, t.clone())),
            (Val::Const(_, vt), _) if vt == t => Ok(v),
            (Val::Const(c, Ty::Enum(_, Some(w))), Ty::Bit(tw)) if w == tw => {
                Ok(Val::Const(*c, t.clone()))
            }
            (Val::List(_), _)
            | (Val::Named(_), _)
            | (Val::Place(_), _)
            | (Val::Default, _)
            | (Val::Str(_), _) => Ok(v),
            _ => {
                let vt = self.val_ty(&v);
                match (&vt, t) {
                    (Some(a), b) if a == b => Ok(v),
                    (Some(Ty::Enum(_, Some(w))), Ty::Bit(tw)) if w == tw => Ok(v),
                    (Some(Ty::Bit(w)), Ty::Enum(_, Some(tw))) if w == tw => Ok(v),
                    (Some(a), b) => err(
                        pos,
                        format!("type mismatch: expected {}, found {}", b.name(), a.name()),
                    ),
                    (None, _) => Ok(v),
                }
            }
        }
    }

    fn val_ty(&self, v: &Val) -> Option<Ty> {
        match v {
            Val::Const(_, t) | Val::Rv(_, t) => Some(t.clone()),
            Val::Place(Place::Field(_, t)) | Val::Place(Place::Param(_, t)) => Some(t.clone()),
            Val::Place(Place::Header(_, h)) => Some(Ty::Header(h.clone())),
            Val::Lookahead(_, w, t) => Some(match t {
                Ty::Bool | Ty::Int(_) | Ty::Enum(_, Some(_)) => t.clone(),
                _ => Ty::Bit(*w),
            }),
            _ => None,
        }
    }

    /// Lower an expression.
    fn expr(&mut self, e: &Expr) -> R<Val> {
        let pos = e.pos;
        if matches!(
            e.kind,
            ExprKind::Member(..) | ExprKind::Slice(..) | ExprKind::Call(..) | ExprKind::Index(..)
        ) {
            if let Some((at, base, idx)) = self.dyn_index_in_chain(e)? {
                return self.expand_read(e, at, &base, &idx);
            }
        }
        match &e.kind {
            ExprKind::Int(v, w) => {
                let v = *v as i128;
                Ok(match w {
                    Some((w, false)) => Val::Const(wrap(v, &Ty::Bit(*w)), Ty::Bit(*w)),
                    Some((w, true)) => {
                        if *w < 2 {
                            return err(pos, "signed literals need a width of at least 2");
                        }
                        Val::Const(wrap(v, &Ty::Int(*w)), Ty::Int(*w))
                    }
                    None => Val::Const(v, Ty::InfInt),
                })
            }
            ExprKind::Bool(b) => Ok(Val::Const(*b as i128, Ty::Bool)),
            ExprKind::Str(s) => Ok(Val::Str(s.clone())),
            ExprKind::Default => Ok(Val::Default),
            ExprKind::Name(n) => self
                .lookup(n)
                .ok_or_else(|| Diagnostic::new(pos, format!("`{n}` is not declared"))),
            ExprKind::Type(_) => err(pos, "a type cannot be used as a value here"),
            ExprKind::Member(b, name) => self.member(b, name, pos),
            ExprKind::Index(b, i) => {
                let bv = self.expr(b)?;
                let iv = self.expr(i)?;
                match (bv, iv) {
                    (Val::Place(Place::Stack { headers, elem, .. }), Val::Const(i, _)) => {
                        match headers.get(i as usize) {
                            Some(h) if i >= 0 => Ok(Val::Place(Place::Header(*h, elem))),
                            _ => err(pos, format!("stack index {i} is out of bounds")),
                        }
                    }
                    (Val::Place(Place::Stack { .. }), _) => {
                        err(pos, "header stack indices must be compile-time constants")
                    }
                    (Val::Place(Place::UnionStack(_, _, unions)), Val::Const(i, _)) => {
                        match unions.get(i as usize) {
                            Some(u) if i >= 0 => Ok(Val::Place(u.clone())),
                            _ => err(pos, format!("stack index {i} is out of bounds")),
                        }
                    }
                    (Val::Place(Place::Struct(n, fields)), Val::Const(i, _))
                        if n.starts_with("tuple<") =>
                    {
                        match fields.get(i as usize) {
                            Some((_, p)) if i >= 0 => Ok(Val::Place(p.clone())),
                            _ => err(pos, format!("tuple index {i} is out of range")),
                        }
                    }
                    _ => err(pos, "only header stacks can be indexed"),
                }
            }
            ExprKind::Slice(b, h, l) => {
                let bv = self.expr(b)?;
                let hi = self.const_u32(h, "a slice bound")?;
                let lo = self.const_u32(l, "a slice bound")?;
                let (be, bt) = self.data(bv.clone(), pos)?;
                let w = match bt {
                    Ty::Bit(w) | Ty::Int(w) => w,
                    Ty::InfInt => 128,
                    t => return err(pos, format!("cannot slice a value of type {}", t.name())),
                };
                if hi < lo || hi >= w {
                    return err(
                        pos,
                        format!("slice [{hi}:{lo}] is out of range for a {w}-bit value"),
                    );
                }
                let rw = hi - lo + 1;
                if let Val::Const(c, _) = bv {
                    let sh = c.checked_shr(lo).unwrap_or(if c < 0 { -1 } else { 0 });
                    return Ok(Val::Const(wrap(sh, &Ty::Bit(rw)), Ty::Bit(rw)));
                }
                let sh = if lo > 0 {
                    op(m::Op::Shr, Some(be), Some(cnst(lo as i128)))
                } else {
                    be
                };
                Ok(Val::Rv(
                    op(m::Op::And, Some(sh), Some(m::Expr::Const(mask_int(rw)))),
                    Ty::Bit(rw),
                ))
            }
            ExprKind::Call(callee, targs, args) => match self.call(callee, targs, args, pos)? {
                Some(v) => Ok(v),
                None => err(pos, "this call does not return a value"),
            },
            ExprKind::Unary(o, x) => self.unary(o, x, pos),
            ExprKind::Binary(o, l, r) => self.binary(o, l, r, pos),
            ExprKind::Ternary(c, a, b) => {
                let cv = self.expr(c)?;
                if let Val::Const(c, _) = cv {
                    // Only the chosen arm is evaluated (it may have side effects).
                    return self.expr(if c != 0 { a } else { b });
                }
                let mark = self.cur.len();
                let av = self.expr(a)?;
                let bv = self.expr(b)?;
                let ce = self.boolean(cv, c.pos)?;
                if self.cur.len() != mark && self.mode == body::Mode::Action {
                    if let Some(v) = self.ternary_with_effects(
                        ce.clone(),
                        a,
                        b,
                        av.clone(),
                        bv.clone(),
                        mark,
                        pos,
                    )? {
                        return Ok(v);
                    }
                }
                let (av, bv) = self.unify(av, bv, pos)?;
                let (ae, at) = self.rv(av, a.pos)?;
                let (be, _) = self.rv(bv, b.pos)?;
                Ok(Val::Rv(
                    m::Expr::Op {
                        op: m::Op::Ternary,
                        left: Some(Box::new(ae)),
                        right: Some(Box::new(be)),
                        cond: Some(Box::new(ce)),
                    },
                    at,
                ))
            }
            ExprKind::Cast(t, x) => {
                let t = self.ty(t).map_err(|mut d| {
                    if d.pos == Pos::default() {
                        d.pos = pos;
                    }
                    d
                })?;
                let v = self.expr(x)?;
                self.cast(v, &t, pos)
            }
            ExprKind::List(items) => Ok(Val::List(self.exprs_in_order(items.iter())?)),
            ExprKind::NamedList(items) => {
                let vals = self.exprs_in_order(items.iter().map(|(_, i)| i))?;
                Ok(Val::Named(
                    items.iter().map(|(n, _)| n.clone()).zip(vals).collect(),
                ))
            }
            ExprKind::Mask(a, b) => Ok(Val::Mask(Box::new(self.expr(a)?), Box::new(self.expr(b)?))),
            ExprKind::Range(a, b) => {
                Ok(Val::Range(Box::new(self.expr(a)?), Box::new(self.expr(b)?)))
            }
        }
    }

    /// `c ? a : b` where an arm has side effects (calls): evaluate only the chosen arm, with
    /// jumps, into a temporary. `None` when the type has no scalar temporary (kept as is).
    #[allow(clippy::too_many_arguments)]
    fn ternary_with_effects(
        &mut self,
        ce: m::Expr,
        a: &Expr,
        b: &Expr,
        av: Val,
        bv: Val,
        mark: usize,
        pos: Pos,
    ) -> R<Option<Val>> {
        let (uav, _) = self.unify(av, bv, pos)?;
        let t = match self.val_ty(&uav) {
            Some(t @ (Ty::Bit(_) | Ty::Int(_) | Ty::Bool)) => t,
            _ => return Ok(None),
        };
        self.cur.truncate(mark);
        let tmp = self.new_scalar("mux", &t);
        let dst = Place::Field(tmp, t.clone());
        let cond_tmp = self.new_scalar("mux_cond", &Ty::Bool);
        self.cur.push(prim(
            "assign",
            vec![
                m::Arg::Field(cond_tmp),
                m::Arg::Expr(op(m::Op::B2D, None, Some(ce))),
            ],
        ));
        let jz = self.jump_if_zero(op(m::Op::D2B, None, Some(m::Expr::Field(cond_tmp))));
        let v = self.expr(a)?;
        let v = self.convert(v, &t, a.pos)?;
        self.assign_val(&dst, v, a.pos)?;
        let at = self.jump();
        let else_at = self.cur.len();
        self.patch_jump(jz, else_at);
        let v = self.expr(b)?;
        let v = self.convert(v, &t, b.pos)?;
        self.assign_val(&dst, v, b.pos)?;
        let end = self.cur.len();
        self.patch_jump(at, end);
        Ok(Some(Val::Place(dst)))
    }

    /// The first header-stack index in the access chain of `e` that is not a compile-time
    /// constant: (position of the index expression node, stack expression, index).
    pub(super) fn dyn_index_in_chain(&mut self, e: &Expr) -> R<Option<(Pos, Expr, Expr)>> {
        let mut cur = e;
        let mut found = None;
        loop {
            match &cur.kind {
                ExprKind::Member(b, _) | ExprKind::Slice(b, _, _) => cur = b,
                ExprKind::Call(c, _, _) => cur = c,
                ExprKind::Index(b, i) => {
                    let saved = self.cur.len();
                    let c = matches!(self.expr(i), Ok(Val::Const(..)));
                    self.cur.truncate(saved);
                    if !c {
                        found = Some((cur.pos, (**b).clone(), (**i).clone()));
                    }
                    cur = b;
                }
                _ => return Ok(found),
            }
        }
    }

    /// Number of elements of a header (or header-union) stack expression.
    pub(super) fn stack_len(&mut self, base: &Expr) -> R<usize> {
        match self.expr(base)? {
            Val::Place(Place::Stack { headers, .. }) => Ok(headers.len()),
            Val::Place(Place::UnionStack(_, _, unions)) => Ok(unions.len()),
            _ => err(base.pos, "only header stacks can be indexed"),
        }
    }

    /// Number of elements of a header stack expression, and the index copied into a temporary.
    pub(super) fn dyn_index_setup(&mut self, base: &Expr, idx: &Expr) -> R<(usize, m::FieldRef)> {
        let n = self.stack_len(base)?;
        let iv = self.expr(idx)?;
        let (ie, it) = self.data(iv, idx.pos)?;
        let t = match it {
            Ty::Bit(_) | Ty::Int(_) => it,
            _ => Ty::Bit(32),
        };
        let tmp = self.new_scalar("index", &t);
        self.cur
            .push(prim("assign", vec![m::Arg::Field(tmp), to_arg(ie)]));
        Ok((n, tmp))
    }

    fn expand_read(&mut self, e: &Expr, at: Pos, base: &Expr, idx: &Expr) -> R<Val> {
        let (n, tmp) = self.dyn_index_setup(base, idx)?;
        let mut chain: Option<(m::Expr, Ty)> = None;
        for k in (0..n).rev() {
            let v = replace_index(e, at, k);
            let val = self.expr(&v)?;
            let (ve, vt) = self.rv(val, e.pos)?;
            chain = Some(match chain {
                None => (ve, vt),
                Some((rest, _)) => (
                    m::Expr::Op {
                        op: m::Op::Ternary,
                        left: Some(Box::new(ve)),
                        right: Some(Box::new(rest)),
                        cond: Some(Box::new(op(
                            m::Op::Eq,
                            Some(m::Expr::Field(tmp)),
                            Some(cnst(k as i128)),
                        ))),
                    },
                    vt,
                ),
            });
        }
        match chain {
            Some((e, t)) => Ok(Val::Rv(e, t)),
            None => err(e.pos, "empty header stack"),
        }
    }

    fn member(&mut self, b: &Expr, name: &str, pos: Pos) -> R<Val> {
        let bv = self.expr(b)?;
        match bv {
            Val::Place(Place::Struct(sname, fields)) => fields
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| Val::Place(p.clone()))
                .ok_or_else(|| {
                    Diagnostic::new(pos, format!("struct `{sname}` has no field `{name}`"))
                }),
            Val::Place(Place::Union(_, un, members)) => members
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| Val::Place(p.clone()))
                .ok_or_else(|| {
                    Diagnostic::new(pos, format!("header union `{un}` has no member `{name}`"))
                }),
            Val::Place(Place::Header(h, ht)) => {
                let fields = self.headers.get(&ht).cloned().unwrap_or_default();
                match fields.iter().position(|(n, _, _)| n == name) {
                    Some(i) => Ok(Val::Place(Place::Field(
                        m::FieldRef {
                            header: h,
                            field: i as u32,
                        },
                        fields[i].1.clone(),
                    ))),
                    None => match self.header_structs.get(&(ht.clone(), name.to_string())) {
                        Some(s) => Ok(Val::Place(self.header_struct_place(h, &ht, name, s))),
                        None => err(pos, format!("header `{ht}` has no field `{name}`")),
                    },
                }
            }
            Val::Place(Place::Stack {
                stack,
                elem,
                headers,
            }) => match name {
                "next" => Ok(Val::Place(Place::StackNext(stack))),
                "last" => Ok(Val::Place(Place::StackLast(stack, elem))),
                "size" => Ok(Val::Const(headers.len() as i128, Ty::Bit(32))),
                "lastIndex" => Ok(Val::Rv(
                    op(
                        m::Op::LastStackIndex,
                        None,
                        Some(m::Expr::HeaderStack(stack)),
                    ),
                    Ty::Bit(32),
                )),
                _ => Ok(Val::Place(Place::Stack {
                    stack,
                    elem,
                    headers,
                })),
            },
            Val::Place(Place::UnionStack(_, _, unions)) if name == "size" => {
                Ok(Val::Const(unions.len() as i128, Ty::Bit(32)))
            }
            Val::Place(Place::UnionStack(idx, u, _)) if name == "next" => {
                Ok(Val::Place(Place::UnionStackNext(idx, u)))
            }
            Val::Place(Place::UnionStackNext(idx, u)) => {
                let members = self.unions.get(&u).cloned().unwrap_or_default();
                match members.iter().position(|(n, _, _)| n == name) {
                    Some(i) => Ok(Val::Place(Place::UnionStackNextMember(idx, i as u32))),
                    None => err(pos, format!("header union `{u}` has no member `{name}`")),
                }
            }
            Val::Place(Place::StackLast(stack, ht)) => {
                let fields = self.headers.get(&ht).cloned().unwrap_or_default();
                match fields.iter().position(|(n, _, _)| n == name) {
                    Some(i) => Ok(Val::Rv(
                        m::Expr::StackField {
                            stack,
                            field: i as u32,
                        },
                        fields[i].1.clone(),
                    )),
                    None => err(pos, format!("header `{ht}` has no field `{name}`")),
                }
            }
            Val::Lookahead(o, _, ct @ (Ty::Header(_) | Ty::Struct(_))) => {
                let (fields, what) = match &ct {
                    Ty::Header(h) => (self.headers.get(h).cloned(), "header"),
                    Ty::Struct(s) => (self.structs.get(s).cloned(), "struct"),
                    _ => (None, "type"),
                };
                let mut off = o;
                for (n, t, _) in fields.unwrap_or_default() {
                    let w = self.lookahead_width(&t).unwrap_or(0);
                    if n == name {
                        return Ok(Val::Lookahead(off, w, t));
                    }
                    off += w;
                }
                err(pos, format!("{what} `{}` has no field `{name}`", ct.name()))
            }
            Val::Place(Place::Enum(en)) => {
                let (w, ms) = self.enums.get(&en).cloned().unwrap_or((None, Vec::new()));
                match ms.iter().find(|(n, _)| n == name) {
                    Some((_, v)) => Ok(Val::Const(*v, Ty::Enum(en.clone(), w))),
                    None => err(pos, format!("enum `{en}` has no member `{name}`")),
                }
            }
            Val::Place(Place::ErrorNs) => match self.errors.iter().position(|e| e == name) {
                Some(i) => Ok(Val::Const(i as i128, Ty::Error)),
                None => err(pos, format!("error `{name}` is not declared")),
            },
            // Methods are handled in `call`; a bare member of other things is an error.
            _ => err(pos, format!("cannot access member `{name}` here")),
        }
    }

    fn unify(&mut self, a: Val, b: Val, pos: Pos) -> R<(Val, Val)> {
        let at = self.val_ty(&a);
        let bt = self.val_ty(&b);
        match (at, bt) {
            (Some(Ty::InfInt), Some(t)) if t != Ty::InfInt => Ok((self.convert(a, &t, pos)?, b)),
            (Some(t), Some(Ty::InfInt)) if t != Ty::InfInt => {
                let b = self.convert(b, &t, pos)?;
                Ok((a, b))
            }
            (Some(x), Some(y)) => {
                let norm = |t: Ty| match t {
                    Ty::Enum(_, Some(w)) => Ty::Bit(w),
                    t => t,
                };
                let (nx, ny) = (norm(x.clone()), norm(y.clone()));
                if nx != ny && !(matches!(x, Ty::Enum(..)) && x == y) {
                    return err(
                        pos,
                        format!(
                            "operands have different types: {} and {}",
                            x.name(),
                            y.name()
                        ),
                    );
                }
                Ok((a, b))
            }
            _ => Ok((a, b)),
        }
    }

    fn fixup(&self, e: m::Expr, t: &Ty) -> m::Expr {
        match t {
            Ty::Bit(w) => op(m::Op::And, Some(e), Some(m::Expr::Const(mask_int(*w)))),
            Ty::Int(w) => op(m::Op::TwoCompMod, Some(e), Some(cnst(*w as i128))),
            _ => e,
        }
    }

    fn unary(&mut self, o: &str, x: &Expr, pos: Pos) -> R<Val> {
        let v = self.expr(x)?;
        if let Val::Const(c, t) = &v {
            return Ok(match o {
                "!" if *t == Ty::Bool => Val::Const((*c == 0) as i128, Ty::Bool),
                "-" if t.is_numeric() => Val::Const(wrap(c.wrapping_neg(), t), t.clone()),
                "~" if matches!(t, Ty::Bit(_) | Ty::Int(_)) => Val::Const(wrap(!c, t), t.clone()),
                _ => {
                    return err(
                        pos,
                        format!("operator `{o}` cannot be applied to {}", t.name()),
                    )
                }
            });
        }
        match o {
            "!" => {
                let e = self.boolean(v, x.pos)?;
                Ok(Val::Rv(op(m::Op::LNot, None, Some(e)), Ty::Bool))
            }
            "-" | "~" => {
                let (e, t) = self.data(v, x.pos)?;
                if !matches!(t, Ty::Bit(_) | Ty::Int(_)) {
                    return err(
                        pos,
                        format!("operator `{o}` cannot be applied to {}", t.name()),
                    );
                }
                let r = if o == "-" {
                    op(m::Op::Sub, None, Some(e))
                } else {
                    op(m::Op::Not, None, Some(e))
                };
                Ok(Val::Rv(self.fixup(r, &t), t))
            }
            _ => err(pos, format!("unknown operator `{o}`")),
        }
    }

    fn binary(&mut self, o: &str, l: &Expr, r: &Expr, pos: Pos) -> R<Val> {
        let lv = self.expr(l)?;
        if (o == "&&" || o == "||") && self.mode == body::Mode::Action {
            // Short-circuit: if the right side has side effects, evaluate it only when needed.
            let mark = self.cur.len();
            let probe = self.expr(r);
            // A constant left side decides alone: the right side is not evaluated at all.
            if let Val::Const(c, _) = lv {
                if (o == "||" && c != 0) || (o == "&&" && c == 0) {
                    self.cur.truncate(mark);
                    return Ok(Val::Const((o == "||") as i128, Ty::Bool));
                }
            }
            if self.cur.len() != mark && !matches!(lv, Val::Const(..)) {
                self.cur.truncate(mark);
                let _ = probe;
                let a = self.boolean(lv, l.pos)?;
                let t = self.new_scalar("sc", &Ty::Bool);
                self.cur.push(prim(
                    "assign",
                    vec![
                        m::Arg::Field(t),
                        m::Arg::Expr(op(m::Op::B2D, None, Some(a))),
                    ],
                ));
                let test = if o == "&&" {
                    op(m::Op::D2B, None, Some(m::Expr::Field(t)))
                } else {
                    op(
                        m::Op::LNot,
                        None,
                        Some(op(m::Op::D2B, None, Some(m::Expr::Field(t)))),
                    )
                };
                let jz = self.jump_if_zero(test);
                let rv = self.expr(r)?;
                let b = self.boolean(rv, r.pos)?;
                self.cur.push(prim(
                    "assign",
                    vec![
                        m::Arg::Field(t),
                        m::Arg::Expr(op(m::Op::B2D, None, Some(b))),
                    ],
                ));
                let end = self.cur.len();
                self.patch_jump(jz, end);
                return Ok(Val::Place(Place::Field(t, Ty::Bool)));
            }
            let rv = probe?;
            return self.binary_vals(o, lv, rv, l, r, pos);
        }
        // Operands are evaluated left to right: a call on the right must not change what the
        // left side read (`x + f(x)` with `inout x` adds the old `x`).
        let lv = if has_effects(r) {
            self.snapshot(lv, l.pos)?
        } else {
            lv
        };
        let rv = self.expr(r)?;
        self.binary_vals(o, lv, rv, l, r, pos)
    }

    /// The value `v` copied into a temporary when it is a scalar read from storage (a later
    /// operand with side effects may write that storage); other values as they are.
    fn snapshot(&mut self, v: Val, pos: Pos) -> R<Val> {
        match v {
            Val::Place(Place::Field(..)) | Val::Rv(..) => {
                let t = match self.val_ty(&v) {
                    Some(t @ (Ty::Bit(_) | Ty::Int(_) | Ty::Bool | Ty::Enum(_, _) | Ty::Error)) => {
                        t
                    }
                    _ => return Ok(v),
                };
                let tmp = self.new_scalar("operand", &t);
                let dst = Place::Field(tmp, t);
                self.assign_val(&dst, v, pos)?;
                Ok(Val::Place(dst))
            }
            Val::List(items) => Ok(Val::List(
                items
                    .into_iter()
                    .map(|x| self.snapshot(x, pos))
                    .collect::<R<_>>()?,
            )),
            Val::Named(items) => Ok(Val::Named(
                items
                    .into_iter()
                    .map(|(n, x)| Ok((n, self.snapshot(x, pos)?)))
                    .collect::<R<_>>()?,
            )),
            v => Ok(v),
        }
    }

    /// Evaluate list items left to right: items read before an item with side effects are
    /// copied first (`{ x, f(x) }` keeps the old `x`).
    fn exprs_in_order<'e>(&mut self, items: impl Iterator<Item = &'e Expr>) -> R<Vec<Val>> {
        let mut v: Vec<Val> = Vec::new();
        for i in items {
            if has_effects(i) {
                for x in v.iter_mut() {
                    let old = std::mem::replace(x, Val::Default);
                    *x = self.snapshot(old, i.pos)?;
                }
            }
            v.push(self.expr(i)?);
        }
        Ok(v)
    }

    fn binary_vals(&mut self, o: &str, lv: Val, rv: Val, l: &Expr, r: &Expr, pos: Pos) -> R<Val> {
        if matches!(o, "==" | "!=") {
            if let (
                Val::Place(Place::Stack { headers: ah, .. }),
                Val::Place(Place::Stack { headers: bh, .. }),
            ) = (&lv, &rv)
            {
                if ah.len() != bh.len() {
                    return err(pos, "cannot compare header stacks of different sizes");
                }
                let mut acc: Option<m::Expr> = None;
                for (x, y) in ah.iter().zip(bh) {
                    let e = op(
                        m::Op::Eq,
                        Some(m::Expr::Header(*x)),
                        Some(m::Expr::Header(*y)),
                    );
                    acc = Some(match acc {
                        Some(a) => op(m::Op::LAnd, Some(a), Some(e)),
                        None => e,
                    });
                }
                let e = acc.unwrap_or(m::Expr::Bool(true));
                let e = if o == "!=" {
                    op(m::Op::LNot, None, Some(e))
                } else {
                    e
                };
                return Ok(Val::Rv(e, Ty::Bool));
            }
            if let (Val::Place(Place::Struct(a, af)), Val::Place(Place::Struct(b, bf))) = (&lv, &rv)
            {
                if a != b {
                    return err(pos, format!("cannot compare a `{a}` with a `{b}`"));
                }
                let mut acc: Option<m::Expr> = None;
                for ((_, x), (_, y)) in af.clone().into_iter().zip(bf.clone()) {
                    let e = self.binary_vals("==", Val::Place(x), Val::Place(y), l, r, pos)?;
                    let e = self.boolean(e, pos)?;
                    acc = Some(match acc {
                        Some(a) => op(m::Op::LAnd, Some(a), Some(e)),
                        None => e,
                    });
                }
                let e = acc.unwrap_or(m::Expr::Bool(true));
                let e = if o == "!=" {
                    op(m::Op::LNot, None, Some(e))
                } else {
                    e
                };
                return Ok(Val::Rv(e, Ty::Bool));
            }
        }
        match o {
            "&&" | "||" => {
                if let (Val::Const(a, _), Val::Const(b, _)) = (&lv, &rv) {
                    let v = if o == "&&" {
                        *a != 0 && *b != 0
                    } else {
                        *a != 0 || *b != 0
                    };
                    return Ok(Val::Const(v as i128, Ty::Bool));
                }
                let a = self.boolean(lv, l.pos)?;
                let b = self.boolean(rv, r.pos)?;
                let mo = if o == "&&" { m::Op::LAnd } else { m::Op::LOr };
                return Ok(Val::Rv(op(mo, Some(a), Some(b)), Ty::Bool));
            }
            "++" => {
                let (lc, rc) = (lv.clone(), rv.clone());
                let (le, lt) = self.data(lv, l.pos)?;
                let (re, rt) = self.data(rv, r.pos)?;
                let (Some(lw), Some(rw)) = (
                    match lt {
                        Ty::Bit(w) | Ty::Int(w) => Some(w),
                        _ => None,
                    },
                    match rt {
                        Ty::Bit(w) | Ty::Int(w) => Some(w),
                        _ => None,
                    },
                ) else {
                    return err(
                        pos,
                        "`++` needs operands of type bit<W> or int<W> with known widths",
                    );
                };
                let t = if matches!(lt, Ty::Int(_)) {
                    Ty::Int(lw + rw)
                } else {
                    Ty::Bit(lw + rw)
                };
                if let (Val::Const(a, _), Val::Const(b, _)) = (lc, rc) {
                    if lw + rw < 127 {
                        return Ok(Val::Const(
                            wrap((wrap(a, &Ty::Bit(lw)) << rw) | wrap(b, &Ty::Bit(rw)), &t),
                            t,
                        ));
                    }
                }
                let le = if matches!(lt, Ty::Int(_)) {
                    op(m::Op::And, Some(le), Some(m::Expr::Const(mask_int(lw))))
                } else {
                    le
                };
                let re = if matches!(rt, Ty::Int(_)) {
                    op(m::Op::And, Some(re), Some(m::Expr::Const(mask_int(rw))))
                } else {
                    re
                };
                let e = op(
                    m::Op::Or,
                    Some(op(m::Op::Shl, Some(le), Some(cnst(rw as i128)))),
                    Some(re),
                );
                let e = if matches!(t, Ty::Int(_)) {
                    self.fixup(e, &t)
                } else {
                    e
                };
                return Ok(Val::Rv(e, t));
            }
            "<<" | ">>" => {
                // The shift amount keeps its own type.
                if let (Val::Const(a, t), Val::Const(b, _)) = (&lv, &rv) {
                    if *b < 0 {
                        return err(r.pos, "negative shift amount");
                    }
                    let b = (*b).min(127) as u32;
                    let v = if o == "<<" {
                        a.checked_shl(b).unwrap_or(0)
                    } else {
                        a >> b
                    };
                    return Ok(Val::Const(wrap(v, t), t.clone()));
                }
                let (le, lt) = self.data(lv, l.pos)?;
                let (re, _) = self.data(rv, r.pos)?;
                if !lt.is_numeric() {
                    return err(l.pos, format!("cannot shift a value of type {}", lt.name()));
                }
                if o == "<<" {
                    let e = op(m::Op::Shl, Some(le), Some(re));
                    return Ok(Val::Rv(self.fixup(e, &lt), lt));
                }
                return Ok(Val::Rv(op(m::Op::Shr, Some(le), Some(re)), lt));
            }
            _ => {}
        }
        let (lv, rv) = self.unify(lv, rv, pos)?;
        if let (Val::Const(a, t), Val::Const(b, _)) = (&lv, &rv) {
            let (a, b) = (*a, *b);
            let t = t.clone();
            let arith = |v: i128| Val::Const(wrap(v, &t), t.clone());
            let cmp = |v: bool| Val::Const(v as i128, Ty::Bool);
            return Ok(match o {
                "+" => arith(a.wrapping_add(b)),
                "-" => arith(a.wrapping_sub(b)),
                "*" => arith(a.wrapping_mul(b)),
                "/" | "%" => {
                    if b == 0 {
                        return err(r.pos, "division by zero");
                    }
                    arith(if o == "/" {
                        a.wrapping_div(b)
                    } else {
                        a.wrapping_rem(b)
                    })
                }
                "&" => arith(a & b),
                "|" => arith(a | b),
                "^" => arith(a ^ b),
                "==" => cmp(a == b),
                "!=" => cmp(a != b),
                "<" => cmp(a < b),
                ">" => cmp(a > b),
                "<=" => cmp(a <= b),
                ">=" => cmp(a >= b),
                "|+|" | "|-|" => {
                    let v = if o == "|+|" {
                        a.saturating_add(b)
                    } else {
                        a.saturating_sub(b)
                    };
                    let v = match t {
                        Ty::Bit(w) if w < 127 => v.clamp(0, (1i128 << w) - 1),
                        Ty::Int(w) if w < 127 => {
                            v.clamp(-(1i128 << (w - 1)), (1i128 << (w - 1)) - 1)
                        }
                        _ => v,
                    };
                    Val::Const(v, t)
                }
                _ => return err(pos, format!("unknown operator `{o}`")),
            });
        }
        if matches!(o, "==" | "!=") {
            let lt = self.val_ty(&lv);
            if lt == Some(Ty::Bool) {
                let a = self.boolean(lv, l.pos)?;
                let b = self.boolean(rv, r.pos)?;
                let mo = if o == "==" { m::Op::Eq } else { m::Op::Ne };
                return Ok(Val::Rv(op(mo, Some(a), Some(b)), Ty::Bool));
            }
        }
        let (le, lt) = self.data(lv, l.pos)?;
        let (re, _) = self.data(rv, r.pos)?;
        let numeric = matches!(lt, Ty::Bit(_) | Ty::Int(_) | Ty::InfInt);
        let cmp_ok =
            numeric || matches!(lt, Ty::Enum(..) | Ty::Error | Ty::Header(_) | Ty::Varbit(_));
        let (mo, is_cmp, needs_fix) = match o {
            "+" => (m::Op::Add, false, true),
            "-" => (m::Op::Sub, false, true),
            "*" => (m::Op::Mul, false, true),
            "/" => (m::Op::Div, false, false),
            "%" => (m::Op::Mod, false, false),
            "&" => (m::Op::And, false, false),
            "|" => (m::Op::Or, false, false),
            "^" => (m::Op::Xor, false, false),
            "==" => (m::Op::Eq, true, false),
            "!=" => (m::Op::Ne, true, false),
            "<" => (m::Op::Lt, true, false),
            ">" => (m::Op::Gt, true, false),
            "<=" => (m::Op::Le, true, false),
            ">=" => (m::Op::Ge, true, false),
            "|+|" | "|-|" => {
                let base = if o == "|+|" { m::Op::Add } else { m::Op::Sub };
                let (sat, w) = match lt {
                    Ty::Bit(w) => (m::Op::USatCast, w),
                    Ty::Int(w) => (m::Op::SatCast, w),
                    _ => return err(pos, "saturating operators need bit<W> or int<W> operands"),
                };
                let e = op(
                    sat,
                    Some(op(base, Some(le), Some(re))),
                    Some(cnst(w as i128)),
                );
                return Ok(Val::Rv(e, lt));
            }
            _ => return err(pos, format!("unknown operator `{o}`")),
        };
        if is_cmp {
            let ordered = !matches!(o, "==" | "!=");
            if !cmp_ok || (ordered && !numeric) {
                return err(
                    pos,
                    format!("operator `{o}` cannot compare values of type {}", lt.name()),
                );
            }
            return Ok(Val::Rv(op(mo, Some(le), Some(re)), Ty::Bool));
        }
        if !numeric {
            return err(
                pos,
                format!("operator `{o}` needs numeric operands, found {}", lt.name()),
            );
        }
        let e = op(mo, Some(le), Some(re));
        let e = if needs_fix { self.fixup(e, &lt) } else { e };
        Ok(Val::Rv(e, lt))
    }

    fn cast(&mut self, v: Val, t: &Ty, pos: Pos) -> R<Val> {
        if let Val::Const(c, ft) = &v {
            return Ok(match (ft, t) {
                (_, Ty::Bool) => Val::Const((*c != 0) as i128, Ty::Bool),
                (_, Ty::Bit(_) | Ty::Int(_)) => Val::Const(wrap(*c, t), t.clone()),
                (_, Ty::Enum(_, Some(_))) => Val::Const(*c, t.clone()),
                (a, b) if a == b => v.clone(),
                _ => return err(pos, format!("cannot cast {} to {}", ft.name(), t.name())),
            });
        }
        if let Val::List(_) | Val::Named(_) = v {
            return Ok(v);
        }
        let (e, ft) = self.rv(v, pos)?;
        Ok(match (&ft, t) {
            (a, b) if a == b => Val::Rv(e, ft),
            (Ty::Bool, Ty::Bit(1)) => Val::Rv(op(m::Op::B2D, None, Some(e)), t.clone()),
            (Ty::Bit(1), Ty::Bool) => Val::Rv(op(m::Op::D2B, None, Some(e)), Ty::Bool),
            (Ty::Bit(a) | Ty::Enum(_, Some(a)), Ty::Bit(b)) => {
                if b < a {
                    Val::Rv(
                        op(m::Op::And, Some(e), Some(m::Expr::Const(mask_int(*b)))),
                        t.clone(),
                    )
                } else {
                    Val::Rv(e, t.clone())
                }
            }
            (Ty::Int(a), Ty::Bit(b)) => {
                let _ = a;
                Val::Rv(
                    op(m::Op::And, Some(e), Some(m::Expr::Const(mask_int(*b)))),
                    t.clone(),
                )
            }
            (Ty::Bit(_) | Ty::Int(_), Ty::Int(b)) => Val::Rv(
                op(m::Op::TwoCompMod, Some(e), Some(cnst(*b as i128))),
                t.clone(),
            ),
            (Ty::Bit(a), Ty::Enum(_, Some(b))) if a == b => Val::Rv(e, t.clone()),
            _ => return err(pos, format!("cannot cast {} to {}", ft.name(), t.name())),
        })
    }
}

mod alias;
mod body;
mod program;
