//! Load-time compilation: a [`tern_model::Program`] becomes an [`Engine`] in which every
//! operand is a resolved location (PHV slot, action-data index, extern index), every control
//! node a global index, and every table key a packed layout.

use std::collections::HashMap;

use crate::expr::{CExpr, Const, FastBool};
use crate::hash::{self, Algo};
use crate::layout::{FieldLoc, Layout, Phv, StdSlot};
use crate::table::{KeyField, KeySpec};
use tern_model::*;

/// A compile error (a construct the engine cannot run).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CompileError(pub String);

type R<T> = Result<T, CompileError>;

fn cerr<T>(m: impl Into<String>) -> R<T> {
    Err(CompileError(m.into()))
}

/// An assignable location.
#[derive(Clone, Debug)]
pub enum LVal {
    Field(FieldLoc),
    StackField {
        stack: u32,
        field: u32,
    },
    /// Field `field` of the header an expression yields.
    Dyn {
        header: CExpr,
        field: u32,
    },
    Register {
        array: u32,
        index: CExpr,
    },
}

/// Stack kinds for push/pop.
#[derive(Clone, Copy, Debug)]
pub enum StackRef {
    Headers(u32),
    Unions(u32),
}

/// Source of a specialized ≤ 64-bit store.
#[derive(Clone, Copy, Debug)]
pub enum FastSrc {
    /// An unsigned field of at most 64 bits.
    Field(FieldLoc),
    /// Action parameter `i` (at most 64 bits wide).
    Local(u32),
    /// A constant, as its low 64 bits (two's complement).
    Const(u64),
}

/// Low-bit-preserving operators of a [`FastExpr`] (bit `k` of the result depends only on bits
/// `0..=k` of the operands).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FastBin {
    Add,
    Sub,
    Mul,
    And,
    Or,
    Xor,
}

impl FastBin {
    /// The operator in wrapping `u64` arithmetic.
    #[inline]
    pub fn apply(self, x: u64, y: u64) -> u64 {
        match self {
            FastBin::Add => x.wrapping_add(y),
            FastBin::Sub => x.wrapping_sub(y),
            FastBin::Mul => x.wrapping_mul(y),
            FastBin::And => x & y,
            FastBin::Or => x | y,
            FastBin::Xor => x ^ y,
        }
    }
}

/// An expression evaluated in wrapping `u64` arithmetic. Every operator is low-bit-preserving
/// and every leaf is exact in its low 64 bits, so the low 64 bits equal those of BMv2's
/// unbounded result: storing into a field of at most 64 bits gives the same value.
#[derive(Clone, Debug)]
pub enum FastExpr {
    Src(FastSrc),
    Bin(FastBin, Box<FastExpr>, Box<FastExpr>),
    /// Shift left by a constant amount.
    Shl(Box<FastExpr>, u32),
}

impl FastExpr {
    /// The fast form of an expression, if it has one.
    pub fn compile(e: &CExpr) -> Option<FastExpr> {
        if let Some(s) = fast_src(e) {
            return Some(FastExpr::Src(s));
        }
        let CExpr::Op {
            op,
            l: Some(l),
            r: Some(r),
            c: None,
        } = e
        else {
            return None;
        };
        let bin = match op {
            Op::Add => FastBin::Add,
            Op::Sub => FastBin::Sub,
            Op::Mul => FastBin::Mul,
            Op::And => FastBin::And,
            Op::Or => FastBin::Or,
            Op::Xor => FastBin::Xor,
            Op::Shl => {
                let CExpr::Const(c) = r.as_ref() else {
                    return None;
                };
                let n = c.small.filter(|v| (0..=u32::MAX as i128).contains(v))?;
                return Some(FastExpr::Shl(Box::new(FastExpr::compile(l)?), n as u32));
            }
            _ => return None,
        };
        Some(FastExpr::Bin(
            bin,
            Box::new(FastExpr::compile(l)?),
            Box::new(FastExpr::compile(r)?),
        ))
    }

    /// Evaluate (low 64 bits); fails only on an action parameter index out of range.
    pub fn eval(&self, phv: &Phv, locals: &[Vec<u8>]) -> Result<u64, &'static str> {
        Ok(match self {
            FastExpr::Src(s) => s.get(phv, locals).ok_or("action parameter out of range")?,
            FastExpr::Shl(a, n) => {
                let v = a.eval(phv, locals)?;
                if *n >= 64 {
                    0
                } else {
                    v << n
                }
            }
            FastExpr::Bin(op, a, b) => op.apply(a.eval(phv, locals)?, b.eval(phv, locals)?),
        })
    }
}

impl FastSrc {
    /// The operand's value (`None`: action parameter index out of range).
    #[inline(always)]
    pub fn get(&self, phv: &Phv, locals: &[Vec<u8>]) -> Option<u64> {
        match self {
            FastSrc::Field(f) => Some(phv.read_u64(f)),
            FastSrc::Local(i) => locals.get(*i as usize).map(|b| crate::layout::be_read(b)),
            FastSrc::Const(c) => Some(*c),
        }
    }
}

/// A compiled primitive.
#[derive(Clone, Debug)]
pub enum Instr {
    /// `dst = src (+ add)` for a non-saturating destination of at most 64 bits: wrapping
    /// arithmetic on the low 64 bits equals BMv2's unbounded arithmetic truncated on store.
    SetU64 {
        dst: FieldLoc,
        src: FastSrc,
        add: u64,
    },
    /// `dst = a op b` for the same destinations (two plain operands, wrapping `u64`).
    SetBin {
        dst: FieldLoc,
        op: FastBin,
        a: FastSrc,
        b: FastSrc,
    },
    /// `dst = expr` for the same destinations, with a [`FastExpr`] source.
    SetExpr {
        dst: FieldLoc,
        expr: FastExpr,
    },
    Assign {
        dst: LVal,
        src: CExpr,
    },
    AssignVl {
        dst: FieldLoc,
        src: FieldLoc,
    },
    AssignHeader {
        dst: CExpr,
        src: CExpr,
    },
    AssignUnion {
        dst: CExpr,
        src: CExpr,
    },
    AssignStack {
        dst: StackRef,
        src: StackRef,
    },
    Push {
        stack: StackRef,
        count: CExpr,
    },
    Pop {
        stack: StackRef,
        count: CExpr,
    },
    Jump(usize),
    JumpIfZero {
        value: CExpr,
        target: usize,
    },
    Exit,
    Assert {
        value: CExpr,
        what: &'static str,
        info: String,
    },
    LogMsg {
        fmt: String,
        args: Vec<CExpr>,
    },
    RngUniform {
        dst: LVal,
        lo: CExpr,
        hi: CExpr,
    },
    Drop {
        egress_spec: Option<FieldLoc>,
        mcast_grp: Option<FieldLoc>,
    },
    GenerateDigest {
        list: CExpr,
    },
    AddHeader {
        header: CExpr,
        zero: bool,
    },
    RemoveHeader {
        header: CExpr,
    },
    Clone {
        session: CExpr,
        field_list: CExpr,
        egress: bool,
    },
    Resubmit {
        field_list: CExpr,
    },
    Recirculate {
        field_list: CExpr,
    },
    HashOffset {
        dst: LVal,
        base: CExpr,
        calc: u32,
        size: CExpr,
    },
    NoOp,
    ExecuteMeter {
        meter: u32,
        index: CExpr,
        dst: LVal,
    },
    Count {
        counter: u32,
        index: CExpr,
    },
    RegisterRead {
        dst: LVal,
        array: u32,
        index: CExpr,
    },
    RegisterWrite {
        array: u32,
        index: CExpr,
        value: CExpr,
    },
    Truncate {
        len: CExpr,
    },
}

/// A compiled action.
#[derive(Clone, Debug)]
pub struct CAction {
    pub name: String,
    pub param_widths: Vec<u32>,
    pub instrs: Vec<Instr>,
}

/// Where extracted bytes go.
#[derive(Clone, Copy, Debug)]
pub enum ETarget {
    Header(u32),
    Stack(u32),
    UnionStack(u32, u32),
}

/// A compiled parser op.
#[derive(Clone, Debug)]
pub enum POp {
    Extract(ETarget),
    ExtractVl(ETarget, CExpr),
    Set(FieldLoc, CExpr),
    Verify(CExpr, CExpr),
    Shift(u32),
    Advance(CExpr),
    Primitive(Vec<Instr>),
}

/// A compiled transition.
#[derive(Clone, Debug)]
pub enum PMatch {
    Value {
        value: Vec<u8>,
        mask: Option<Vec<u8>>,
    },
    Default,
    Vset {
        vset: u32,
        mask: Option<Vec<u8>>,
    },
}

/// A compiled parse state.
#[derive(Clone, Debug)]
pub struct CState {
    pub ops: Vec<POp>,
    pub key: Vec<KeyElem>,
    pub key_bytes: u32,
    /// Bytes past the cursor the key's lookaheads read (BMv2's `get_required_bytes`: the
    /// largest `offset / 8 + ceil(width / 8)`); fewer left is PacketTooShort.
    pub lookahead_bytes: usize,
    pub transitions: Vec<(PMatch, Option<u32>)>,
}

/// A compiled parser.
#[derive(Clone, Debug)]
pub struct CParser {
    pub init: Option<u32>,
    pub states: Vec<CState>,
}

/// A control node, with global indices.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GNode {
    Table(u32),
    Cond(u32),
    Call(u32),
}

/// What a table key field reads.
#[derive(Clone, Copy, Debug)]
pub enum KeySrc {
    Field(FieldLoc),
    Valid(u32),
}

impl CTable {
    /// The next node after running action `a` (per-action shape).
    #[inline]
    pub fn next_after(&self, a: u32) -> Option<GNode> {
        self.per_action
            .iter()
            .find(|(x, _)| *x == a)
            .and_then(|(_, n)| *n)
    }

    /// Whether a hit needs nothing of its entry but the action: no direct counter, ageing
    /// stamp or direct meter to update, no action profile to resolve through.
    #[inline]
    pub fn plain_hits(&self) -> bool {
        !self.with_counters
            && !self.support_timeout
            && self.direct_meter.is_none()
            && self.profile.is_none()
    }

    /// The node after this table, given whether the lookup hit and which action ran.
    #[inline]
    pub fn next(&self, hit: bool, ran: Option<u32>) -> Option<GNode> {
        match (&self.hit_miss, ran) {
            (Some((h, m)), _) => {
                if hit {
                    *h
                } else {
                    *m
                }
            }
            (None, Some(a)) => self.next_after(a),
            (None, None) => self.base_default_next,
        }
    }
}

/// A compiled table.
#[derive(Clone, Debug)]
pub struct CTable {
    pub name: String,
    pub table_type: TableType,
    pub spec: KeySpec,
    pub srcs: Vec<KeySrc>,
    pub actions: Vec<u32>,
    pub key_names: Vec<String>,
    /// `(hit, miss)` in the hit/miss shape.
    pub hit_miss: Option<(Option<GNode>, Option<GNode>)>,
    /// Next node per action (global action index, next); a short list scanned linearly.
    pub per_action: Vec<(u32, Option<GNode>)>,
    pub base_default_next: Option<GNode>,
    pub max_size: u32,
    pub with_counters: bool,
    pub support_timeout: bool,
    pub direct_meter: Option<(u32, FieldLoc)>,
    pub default_entry: Option<DefaultEntry>,
    /// Global profile index.
    pub profile: Option<u32>,
    pub const_entries: Option<Vec<ConstEntry>>,
}

/// A compiled conditional.
#[derive(Clone, Debug)]
pub struct CCond {
    pub expr: CExpr,
    /// The `u64` form of `expr`, when it has one (see [`FastBool`]).
    pub fast: Option<FastBool>,
    pub t: Option<GNode>,
    pub f: Option<GNode>,
}

/// A compiled calculation input.
#[derive(Clone, Debug)]
pub enum CInput {
    Field(FieldLoc),
    Const {
        value: Vec<u8>,
        bitwidth: u32,
    },
    Header(u32),
    Payload,
    /// Consecutive inputs that are fixed-width fields (≤ 64 bits) of one header, fused at load
    /// time: one validity test, then [`BitPacker::push_fields`](crate::layout::BitPacker).
    Fields {
        header: u32,
        fields: Vec<FieldLoc>,
    },
}

/// Fuse runs of plain fields of one header (and whole headers without wide or
/// variable-length fields) into [`CInput::Fields`]. Skipping happens per header in both forms
/// (an invalid header's fields are left out), so the packed bytes are the same.
pub fn fuse_inputs(inputs: Vec<CInput>, layout: &crate::layout::Layout) -> Vec<CInput> {
    let plain = |f: &FieldLoc| f.width <= 64 && !f.is_vl && !f.is_valid_bit;
    let mut out: Vec<CInput> = Vec::with_capacity(inputs.len());
    for i in inputs {
        let (h, fs) = match &i {
            CInput::Field(f) if plain(f) => (f.header, vec![*f]),
            CInput::Header(h)
                if layout
                    .headers
                    .get(*h as usize)
                    .is_some_and(|hl| hl.fields.iter().all(plain)) =>
            {
                (*h, layout.headers[*h as usize].fields.clone())
            }
            _ => {
                out.push(i);
                continue;
            }
        };
        match out.last_mut() {
            Some(CInput::Fields { header, fields }) if *header == h => fields.extend(fs),
            _ => out.push(CInput::Fields {
                header: h,
                fields: fs,
            }),
        }
    }
    out
}

/// A compiled calculation.
#[derive(Clone, Debug)]
pub struct CCalc {
    pub name: String,
    pub algo: Algo,
    pub inputs: Vec<CInput>,
}

/// A compiled checksum.
#[derive(Clone, Debug)]
pub struct CChecksum {
    pub target: FieldLoc,
    pub ipv4: bool,
    pub calc: Option<u32>,
    pub update: bool,
    pub verify: bool,
    pub cond: Option<CExpr>,
    /// The `u64` form of `cond`, when it has one.
    pub fast_cond: Option<FastBool>,
}

/// A compiled action profile.
#[derive(Clone, Debug)]
pub struct CProfile {
    pub name: String,
    pub selector: Option<CCalc>,
}

/// The simple_switch fields the target reads and writes, each resolved at load time for
/// one-load access ([`StdSlot`]; absent ones have no field, `f` is `None`). A field the switch
/// only writes is also absent when the program never refers to it ([`crate::uses`]): its value
/// could not be observed, so it is not stored.
#[derive(Clone, Debug, Default)]
pub struct Std {
    pub ingress_port: StdSlot,
    pub egress_spec: StdSlot,
    pub egress_port: StdSlot,
    pub instance_type: StdSlot,
    pub packet_length: StdSlot,
    pub parser_error: StdSlot,
    pub checksum_error: StdSlot,
    pub mcast_grp: StdSlot,
    pub egress_rid: StdSlot,
    pub ingress_ts: StdSlot,
    pub egress_ts: StdSlot,
    /// enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth (only if all four exist).
    pub queueing: Option<[FieldLoc; 4]>,
    pub qid: StdSlot,
    pub priority: StdSlot,
}

/// Parser error codes of the program.
#[derive(Clone, Copy, Debug, Default)]
pub struct ErrorCodes {
    pub no_error: i64,
    pub packet_too_short: i64,
    pub stack_out_of_bounds: i64,
    pub header_too_short: i64,
    pub invalid_argument: i64,
    /// `ParserTimeout`: the parser ran out of states ([`crate::exec::ParserBudget`]).
    pub parser_timeout: i64,
}

/// An element of a field list (for clone/resubmit/recirculate).
#[derive(Clone, Debug)]
pub enum FlElem {
    Field(FieldLoc),
}

/// The executable program.
#[derive(Debug)]
pub struct Engine {
    pub prog: Program,
    pub layout: Layout,
    pub actions: Vec<CAction>,
    pub parser: Option<CParser>,
    pub deparser: Option<(Vec<u32>, Vec<Instr>)>,
    pub tables: Vec<CTable>,
    pub conds: Vec<CCond>,
    pub calls: Vec<(u32, Option<GNode>)>,
    pub profiles: Vec<CProfile>,
    pub ingress: Option<Option<GNode>>,
    pub egress: Option<Option<GNode>>,
    pub calcs: Vec<CCalc>,
    pub checksums: Vec<CChecksum>,
    pub std: Std,
    pub errors: ErrorCodes,
    pub field_lists: HashMap<i64, Vec<FlElem>>,
    /// Learn lists by id: (index in `prog.learn_lists`, fields).
    pub learn_lists: HashMap<i64, (usize, Vec<FieldLoc>)>,
    pub table_by_name: HashMap<String, u32>,
    pub profile_by_name: HashMap<String, u32>,
    /// simple_switch's drop port (`--drop-port`, 511 by default).
    pub drop_port: u32,
    /// Checksums summed over the emitted header bytes, when the program allows it
    /// ([`crate::csum`]).
    pub csum_plan: Option<crate::csum::CsumPlan>,
    /// Native code for the parser and/or the deparser's emit loop ([`crate::jit`]).
    pub jit: Option<crate::jit::Native>,
    /// Why a part runs interpreted (e.g. `parser: value set`).
    pub jit_notes: Vec<String>,
    /// The program can observe the switch's clock: it refers to a timestamp of the standard
    /// metadata (ingress or egress global timestamp, the queueing metadata) or has a meter
    /// (direct or indirect) or a table with ageing (`support_timeout`). When it cannot, the
    /// packet paths do not read the clock ([`crate::Switch`]: one `clock_gettime` a packet
    /// and a hop was about a quarter of a three-hop chain's time one packet per call).
    pub reads_clock: bool,
}

/// Compile an expression outside any action (no parameters), e.g. a `length_exp`.
pub fn compile_free_expr(engine: &Engine, e: &Expr) -> Option<CExpr> {
    Cx {
        p: &engine.prog,
        layout: &engine.layout,
    }
    .expr(e, &[])
    .ok()
}

struct Cx<'a> {
    p: &'a Program,
    layout: &'a Layout,
}

impl Cx<'_> {
    fn field(&self, f: FieldRef) -> FieldLoc {
        self.layout.field(f)
    }

    fn expr(&self, e: &Expr, widths: &[u32]) -> R<CExpr> {
        Ok(match e {
            Expr::Field(f) => CExpr::Field(self.field(*f)),
            Expr::Const(i) => CExpr::Const(Const::new(i)),
            Expr::Bool(b) => CExpr::Bool(*b),
            Expr::Local(i) => match widths.get(*i as usize) {
                Some(w) => CExpr::Local(*i, *w),
                None => {
                    return cerr(format!(
                        "expression uses action parameter {i}, which does not exist"
                    ))
                }
            },
            Expr::Register { array, index } => CExpr::Register {
                array: *array,
                index: Box::new(self.expr(index, widths)?),
            },
            Expr::Header(h) => CExpr::Header(*h),
            Expr::HeaderStack(s) => CExpr::Stack(*s),
            Expr::StackField { stack, field } => CExpr::StackField {
                stack: *stack,
                field: *field,
            },
            Expr::Union(u) => CExpr::Union(*u),
            Expr::UnionStack(u) => CExpr::UnionStack(*u),
            Expr::Lookahead { offset, width } => CExpr::Lookahead {
                offset: *offset,
                width: *width,
            },
            Expr::Op {
                op,
                left,
                right,
                cond,
            } => {
                let sub = |x: &Option<Box<Expr>>| -> R<Option<Box<CExpr>>> {
                    match x {
                        Some(e) => Ok(Some(Box::new(self.expr(e, widths)?))),
                        None => Ok(None),
                    }
                };
                CExpr::Op {
                    op: *op,
                    l: sub(left)?,
                    r: sub(right)?,
                    c: sub(cond)?,
                }
            }
        })
    }

    fn arg_expr(&self, a: &Arg, widths: &[u32]) -> R<CExpr> {
        Ok(match a {
            Arg::Field(f) => CExpr::Field(self.field(*f)),
            Arg::Const(i) => CExpr::Const(Const::new(i)),
            Arg::Bool(b) => CExpr::Bool(*b),
            Arg::RuntimeData(i) => CExpr::Local(*i, widths.get(*i as usize).copied().unwrap_or(0)),
            Arg::Header(h) => CExpr::Header(*h),
            Arg::HeaderStack(s) => CExpr::Stack(*s),
            Arg::HeaderUnion(u) => CExpr::Union(*u),
            Arg::HeaderUnionStack(u) => CExpr::UnionStack(*u),
            Arg::Register { array, index } => CExpr::Register {
                array: *array,
                index: Box::new(self.expr(index, widths)?),
            },
            Arg::StackField { stack, field } => CExpr::StackField {
                stack: *stack,
                field: *field,
            },
            Arg::Expr(e) => self.expr(e, widths)?,
            other => return cerr(format!("argument {other:?} cannot be used as a value")),
        })
    }

    fn lval(&self, a: &Arg, widths: &[u32]) -> R<LVal> {
        Ok(match a {
            Arg::Field(f) => LVal::Field(self.field(*f)),
            Arg::StackField { stack, field } => LVal::StackField {
                stack: *stack,
                field: *field,
            },
            Arg::Register { array, index } => LVal::Register {
                array: *array,
                index: self.expr(index, widths)?,
            },
            Arg::Expr(Expr::Op {
                op: Op::AccessField(f),
                left: Some(h),
                ..
            }) => LVal::Dyn {
                header: self.expr(h, widths)?,
                field: *f,
            },
            Arg::Expr(Expr::Field(f)) => LVal::Field(self.field(*f)),
            other => return cerr(format!("{other:?} is not assignable")),
        })
    }

    fn stack_ref(&self, a: &Arg) -> R<StackRef> {
        match a {
            Arg::HeaderStack(s) => Ok(StackRef::Headers(*s)),
            Arg::HeaderUnionStack(s) => Ok(StackRef::Unions(*s)),
            other => cerr(format!("{other:?} is not a stack")),
        }
    }

    fn header_field(&self, h: u32, name: &str) -> Option<FieldLoc> {
        let ht = &self.p.header_types[self.p.headers[h as usize].header_type as usize];
        ht.fields
            .iter()
            .position(|f| f.name == name)
            .map(|i| self.layout.headers[h as usize].fields[i])
    }

    fn primitive(&self, pr: &Primitive, widths: &[u32], std: &Std) -> R<Instr> {
        let a = &pr.params;
        let e = |i: usize| self.arg_expr(&a[i], widths);
        let bin = |op: Op, x: CExpr, y: CExpr| CExpr::Op {
            op,
            l: Some(Box::new(x)),
            r: Some(Box::new(y)),
            c: None,
        };
        Ok(match pr.op.as_str() {
            "assign" | "modify_field" => Instr::Assign {
                dst: self.lval(&a[0], widths)?,
                src: e(1)?,
            },
            "assign_VL" => match (&a[0], &a[1]) {
                (Arg::Field(d), Arg::Field(s)) => Instr::AssignVl {
                    dst: self.field(*d),
                    src: self.field(*s),
                },
                _ => return cerr("assign_VL needs two fields"),
            },
            "assign_header" | "copy_header" => Instr::AssignHeader {
                dst: e(0)?,
                src: e(1)?,
            },
            "assign_union" => Instr::AssignUnion {
                dst: e(0)?,
                src: e(1)?,
            },
            "assign_header_stack" | "assign_union_stack" => Instr::AssignStack {
                dst: self.stack_ref(&a[0])?,
                src: self.stack_ref(&a[1])?,
            },
            "push" => Instr::Push {
                stack: self.stack_ref(&a[0])?,
                count: e(1)?,
            },
            "pop" => Instr::Pop {
                stack: self.stack_ref(&a[0])?,
                count: e(1)?,
            },
            "_jump" => Instr::Jump(const_usize(&a[0])?),
            "_jump_if_zero" => Instr::JumpIfZero {
                value: e(0)?,
                target: const_usize(&a[1])?,
            },
            "exit" => Instr::Exit,
            "assert" | "assume" => Instr::Assert {
                value: e(0)?,
                what: if pr.op == "assert" {
                    "Assert error"
                } else {
                    "Assume error"
                },
                info: pr
                    .source_info
                    .as_ref()
                    .map(|s| s.source_fragment.clone())
                    .unwrap_or_default(),
            },
            "log_msg" => {
                let fmt = match &a[0] {
                    Arg::String(s) => s.clone(),
                    _ => return cerr("log_msg needs a format string"),
                };
                let args = match &a[1] {
                    Arg::ParametersVector(v) => v
                        .iter()
                        .map(|x| self.arg_expr(x, widths))
                        .collect::<R<Vec<_>>>()?,
                    _ => return cerr("log_msg needs a parameters_vector"),
                };
                Instr::LogMsg { fmt, args }
            }
            "modify_field_rng_uniform" => Instr::RngUniform {
                dst: self.lval(&a[0], widths)?,
                lo: e(1)?,
                hi: e(2)?,
            },
            "add_to_field" => {
                let dst = self.lval(&a[0], widths)?;
                Instr::Assign {
                    src: bin(Op::Add, e(0)?, e(1)?),
                    dst,
                }
            }
            "subtract_from_field" => {
                let dst = self.lval(&a[0], widths)?;
                Instr::Assign {
                    src: bin(Op::Sub, e(0)?, e(1)?),
                    dst,
                }
            }
            "add" | "subtract" | "bit_xor" | "bit_or" | "bit_and" | "shift_left"
            | "shift_right" => {
                let op = match pr.op.as_str() {
                    "add" => Op::Add,
                    "subtract" => Op::Sub,
                    "bit_xor" => Op::Xor,
                    "bit_or" => Op::Or,
                    "bit_and" => Op::And,
                    "shift_left" => Op::Shl,
                    _ => Op::Shr,
                };
                Instr::Assign {
                    dst: self.lval(&a[0], widths)?,
                    src: bin(op, e(1)?, e(2)?),
                }
            }
            "drop" => Instr::Drop {
                egress_spec: std.egress_spec.f,
                mcast_grp: std.mcast_grp.f,
            },
            "mark_to_drop" => match &a[0] {
                Arg::Header(h) => Instr::Drop {
                    egress_spec: self.header_field(*h, "egress_spec"),
                    mcast_grp: self.header_field(*h, "mcast_grp").or(std.mcast_grp.f),
                },
                _ => Instr::Drop {
                    egress_spec: std.egress_spec.f,
                    mcast_grp: std.mcast_grp.f,
                },
            },
            "generate_digest" => Instr::GenerateDigest { list: e(1)? },
            "add_header" => Instr::AddHeader {
                header: e(0)?,
                zero: true,
            },
            "add_header_fast" => Instr::AddHeader {
                header: e(0)?,
                zero: false,
            },
            "remove_header" => Instr::RemoveHeader { header: e(0)? },
            "clone_ingress_pkt_to_egress" => Instr::Clone {
                session: e(0)?,
                field_list: e(1)?,
                egress: false,
            },
            "clone_egress_pkt_to_egress" => Instr::Clone {
                session: e(0)?,
                field_list: e(1)?,
                egress: true,
            },
            "resubmit" => Instr::Resubmit { field_list: e(0)? },
            "recirculate" => Instr::Recirculate { field_list: e(0)? },
            "modify_field_with_hash_based_offset" => match &a[2] {
                Arg::Calculation(c) => Instr::HashOffset {
                    dst: self.lval(&a[0], widths)?,
                    base: e(1)?,
                    calc: *c,
                    size: e(3)?,
                },
                _ => return cerr("modify_field_with_hash_based_offset needs a calculation"),
            },
            "no_op" => Instr::NoOp,
            "execute_meter" => match &a[0] {
                Arg::MeterArray(m) => Instr::ExecuteMeter {
                    meter: *m,
                    index: e(1)?,
                    dst: self.lval(&a[2], widths)?,
                },
                _ => return cerr("execute_meter needs a meter array"),
            },
            "count" => match &a[0] {
                Arg::CounterArray(c) => Instr::Count {
                    counter: *c,
                    index: e(1)?,
                },
                _ => return cerr("count needs a counter array"),
            },
            "register_read" => match &a[1] {
                Arg::RegisterArray(r) => Instr::RegisterRead {
                    dst: self.lval(&a[0], widths)?,
                    array: *r,
                    index: e(2)?,
                },
                _ => return cerr("register_read needs a register array"),
            },
            "register_write" => match &a[0] {
                Arg::RegisterArray(r) => Instr::RegisterWrite {
                    array: *r,
                    index: e(1)?,
                    value: e(2)?,
                },
                _ => return cerr("register_write needs a register array"),
            },
            "truncate" => Instr::Truncate { len: e(0)? },
            other => return cerr(format!("primitive '{other}' is not supported")),
        })
    }

    fn primitives(&self, prims: &[Primitive], widths: &[u32], std: &Std) -> R<Vec<Instr>> {
        let out = prims
            .iter()
            .map(|p| self.primitive(p, widths, std).map(specialize))
            .collect::<R<Vec<_>>>()?;
        for i in &out {
            if let Instr::Jump(t) | Instr::JumpIfZero { target: t, .. } = i {
                if *t > out.len() {
                    return cerr(format!("jump target {t} is out of range"));
                }
            }
        }
        Ok(out)
    }

    fn calc(&self, c: &Calculation) -> CCalc {
        let inputs = c
            .input
            .iter()
            .map(|i| match i {
                CalcInput::Field(f) => CInput::Field(self.field(*f)),
                CalcInput::Const { value, bitwidth } => CInput::Const {
                    value: value.clone(),
                    bitwidth: *bitwidth,
                },
                CalcInput::Header(h) => CInput::Header(*h),
                CalcInput::Payload => CInput::Payload,
            })
            .collect();
        CCalc {
            name: c.name.clone(),
            algo: hash::resolve(&c.algo),
            inputs: fuse_inputs(inputs, self.layout),
        }
    }
}

/// A ≤ 64-bit operand that can be read as a plain `u64` (value = its unsigned reading).
fn fast_src(e: &CExpr) -> Option<FastSrc> {
    match e {
        CExpr::Field(f) if !f.signed && !f.is_vl && !f.is_valid_bit && f.width <= 64 => {
            Some(FastSrc::Field(*f))
        }
        CExpr::Local(i, w) if *w <= 64 => Some(FastSrc::Local(*i)),
        CExpr::Const(c) => c.small.map(|v| FastSrc::Const(v as u64)),
        _ => None,
    }
}

/// Peephole: turn the common assignment shapes into [`Instr::SetU64`].
fn specialize(i: Instr) -> Instr {
    let Instr::Assign {
        dst: LVal::Field(d),
        src,
    } = &i
    else {
        return i;
    };
    if d.saturating || d.is_vl || d.is_valid_bit || d.width > 64 {
        return i;
    }
    let src = strip_mask(src, d.width);
    if let Some(s) = fast_src(src) {
        return Instr::SetU64 {
            dst: *d,
            src: s,
            add: 0,
        };
    }
    if let CExpr::Op {
        op: op @ (Op::Add | Op::Sub),
        l: Some(l),
        r: Some(r),
        c: None,
    } = src
    {
        if let (Some(s), CExpr::Const(c)) = (fast_src(l), r.as_ref()) {
            if let Some(v) = c.small {
                let v = v as u64;
                let add = if *op == Op::Add { v } else { v.wrapping_neg() };
                return Instr::SetU64 {
                    dst: *d,
                    src: s,
                    add,
                };
            }
        }
    }
    match FastExpr::compile(src) {
        Some(FastExpr::Bin(op, a, b)) => match (*a, *b) {
            (FastExpr::Src(a), FastExpr::Src(b)) => Instr::SetBin { dst: *d, op, a, b },
            (a, b) => Instr::SetExpr {
                dst: *d,
                expr: FastExpr::Bin(op, Box::new(a), Box::new(b)),
            },
        },
        Some(expr) => Instr::SetExpr { dst: *d, expr },
        None => i,
    }
}

/// `x & c` stored into a `width`-bit field stores the low bits of `x` when `c` has all of the
/// low `width` bits set (the usual `& 0xff..` p4c wraps around arithmetic): drop the mask.
fn strip_mask(e: &CExpr, width: u32) -> &CExpr {
    let low = if width >= 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    if let CExpr::Op {
        op: Op::And,
        l: Some(l),
        r: Some(r),
        c: None,
    } = e
    {
        let full = |c: &CExpr| matches!(c, CExpr::Const(Const { small: Some(v), .. }) if (*v as u64) & low == low);
        if full(r) {
            return l;
        }
        if full(l) {
            return r;
        }
    }
    e
}

fn const_usize(a: &Arg) -> R<usize> {
    match a {
        Arg::Const(i) => i
            .to_i128()
            .filter(|v| *v >= 0)
            .map(|v| v as usize)
            .map_or_else(|| cerr("bad jump offset"), Ok),
        _ => cerr("jump offsets must be constants"),
    }
}

fn gnode(n: Option<Node>, tb: u32, cb: u32, ab: u32) -> Option<GNode> {
    n.map(|n| match n {
        Node::Table(i) => GNode::Table(tb + i),
        Node::Conditional(i) => GNode::Cond(cb + i),
        Node::ActionCall(i) => GNode::Call(ab + i),
    })
}

impl Engine {
    /// Compile a loaded program.
    pub fn compile(prog: Program) -> Result<Engine, CompileError> {
        let layout = Layout::new(&prog);
        let cx = Cx {
            p: &prog,
            layout: &layout,
        };
        let f = |h: &str, n: &str| prog.field_by_name(h, n).map(|r| layout.field(r));
        // Fields the switch only writes are kept only if the program refers to them: nothing
        // else can observe them (egress_spec, mcast_grp and priority are read by the switch).
        let uses = crate::uses::Uses::of(&prog);
        let seen = |h: &str, n: &str| prog.field_by_name(h, n).is_some_and(|r| uses.reads(r));
        let w = |h: &str, n: &str| f(h, n).filter(|_| seen(h, n));
        // Resolved once for the switch's per-packet reads and writes.
        let slot = |l: Option<FieldLoc>| StdSlot::new(l, layout.total_bytes);
        const QUEUEING: [&str; 4] = ["enq_timestamp", "enq_qdepth", "deq_timedelta", "deq_qdepth"];
        let queueing = match QUEUEING.map(|n| f("queueing_metadata", n)) {
            [Some(a), Some(b), Some(c), Some(d)]
                if QUEUEING.iter().any(|n| seen("queueing_metadata", n)) =>
            {
                Some([a, b, c, d])
            }
            _ => None,
        };
        let std = Std {
            ingress_port: slot(w("standard_metadata", "ingress_port")),
            egress_spec: slot(f("standard_metadata", "egress_spec")),
            egress_port: slot(w("standard_metadata", "egress_port")),
            instance_type: slot(w("standard_metadata", "instance_type")),
            packet_length: slot(w("standard_metadata", "packet_length")),
            parser_error: slot(w("standard_metadata", "parser_error")),
            checksum_error: slot(w("standard_metadata", "checksum_error")),
            mcast_grp: slot(f("intrinsic_metadata", "mcast_grp")),
            egress_rid: slot(w("intrinsic_metadata", "egress_rid")),
            ingress_ts: slot(w("intrinsic_metadata", "ingress_global_timestamp")),
            egress_ts: slot(w("intrinsic_metadata", "egress_global_timestamp")),
            queueing,
            qid: slot(w("queueing_metadata", "qid")),
            priority: slot(f("intrinsic_metadata", "priority")),
        };
        let ev = |n: &str| prog.error_value(n).unwrap_or(0);
        let errors = ErrorCodes {
            no_error: ev("NoError"),
            packet_too_short: ev("PacketTooShort"),
            stack_out_of_bounds: ev("StackOutOfBounds"),
            header_too_short: ev("HeaderTooShort"),
            invalid_argument: ev("ParserInvalidArgument"),
            parser_timeout: ev("ParserTimeout"),
        };

        let mut actions = Vec::with_capacity(prog.actions.len());
        for a in &prog.actions {
            let widths: Vec<u32> = a.runtime_data.iter().map(|(_, w)| *w).collect();
            let instrs = cx
                .primitives(&a.primitives, &widths, &std)
                .map_err(|e| CompileError(format!("action '{}': {}", a.name, e.0)))?;
            actions.push(CAction {
                name: a.name.clone(),
                param_widths: widths,
                instrs,
            });
        }

        let parser = match prog.parsers.iter().find(|p| p.name == "parser") {
            None => None,
            Some(p) => {
                let mut states = Vec::new();
                for s in &p.states {
                    let mut ops = Vec::new();
                    for o in &s.ops {
                        let t = |t: &ExtractTarget| match t {
                            ExtractTarget::Regular(h) => ETarget::Header(*h),
                            ExtractTarget::Stack(s) => ETarget::Stack(*s),
                            ExtractTarget::UnionStack(u, m) => ETarget::UnionStack(*u, *m),
                        };
                        ops.push(match o {
                            ParserOp::Extract(x) => POp::Extract(t(x)),
                            ParserOp::ExtractVl(x, e) => POp::ExtractVl(t(x), cx.expr(e, &[])?),
                            ParserOp::Set(d, e) => POp::Set(cx.field(*d), cx.expr(e, &[])?),
                            ParserOp::Verify(c, e) => {
                                POp::Verify(cx.expr(c, &[])?, cx.expr(e, &[])?)
                            }
                            ParserOp::Shift(n) => POp::Shift(*n),
                            ParserOp::Advance(e) => POp::Advance(cx.expr(e, &[])?),
                            ParserOp::Primitive(pr) => {
                                POp::Primitive(vec![cx.primitive(pr, &[], &std)?])
                            }
                        });
                    }
                    let transitions = s
                        .transitions
                        .iter()
                        .map(|t| {
                            let m = match &t.matcher {
                                TransitionMatch::Value { value, mask } => PMatch::Value {
                                    value: value.clone(),
                                    mask: mask.clone(),
                                },
                                TransitionMatch::Default => PMatch::Default,
                                TransitionMatch::Vset { vset, mask } => PMatch::Vset {
                                    vset: *vset,
                                    mask: mask.clone(),
                                },
                            };
                            (m, t.next)
                        })
                        .collect();
                    let lookahead_bytes = s
                        .key
                        .iter()
                        .map(|k| match k {
                            KeyElem::Lookahead { offset, width } => {
                                (offset / 8 + width.div_ceil(8)) as usize
                            }
                            _ => 0,
                        })
                        .max()
                        .unwrap_or(0);
                    states.push(CState {
                        ops,
                        key: s.key.clone(),
                        key_bytes: s.key_bytes,
                        lookahead_bytes,
                        transitions,
                    });
                }
                Some(CParser {
                    init: p.init_state,
                    states,
                })
            }
        };

        let deparser = match prog.deparsers.iter().find(|d| d.name == "deparser") {
            None => None,
            Some(d) => Some((d.order.clone(), cx.primitives(&d.primitives, &[], &std)?)),
        };

        let calcs: Vec<CCalc> = prog.calculations.iter().map(|c| cx.calc(c)).collect();

        // Pipelines: global numbering of tables, conditionals, calls and profiles.
        let (mut tables, mut conds, mut calls, mut profiles) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let (mut ingress, mut egress) = (None, None);
        let mut table_by_name = HashMap::new();
        let mut profile_by_name = HashMap::new();
        for pl in &prog.pipelines {
            let (tb, cb, ab, pb) = (
                tables.len() as u32,
                conds.len() as u32,
                calls.len() as u32,
                profiles.len() as u32,
            );
            let g = |n: Option<Node>| gnode(n, tb, cb, ab);
            for ap in &pl.action_profiles {
                profile_by_name
                    .entry(ap.name.clone())
                    .or_insert(profiles.len() as u32);
                profiles.push(CProfile {
                    name: ap.name.clone(),
                    selector: ap.selector.as_ref().map(|s| CCalc {
                        name: ap.name.clone(),
                        algo: hash::resolve(&s.algo),
                        inputs: fuse_inputs(
                            s.input
                                .iter()
                                .map(|f| CInput::Field(cx.field(*f)))
                                .collect(),
                            &layout,
                        ),
                    }),
                });
            }
            for t in &pl.tables {
                let mut fields = Vec::new();
                let mut srcs = Vec::new();
                let mut key_names = Vec::new();
                let mut off = 0;
                for k in &t.key {
                    let (src, width, kname) = match k.target {
                        KeyTarget::Field(f) => {
                            let loc = cx.field(f);
                            let n = if f.field == VALID_FIELD {
                                format!("{}_valid", prog.headers[f.header as usize].name)
                            } else {
                                prog.field_name(f)
                            };
                            (KeySrc::Field(loc), loc.width, n)
                        }
                        KeyTarget::Valid(h) => (
                            KeySrc::Valid(h),
                            1,
                            format!("{}_valid", prog.headers[h as usize].name),
                        ),
                    };
                    let nbytes = width.div_ceil(8);
                    fields.push(KeyField {
                        kind: k.match_kind,
                        off,
                        nbytes,
                        width,
                        static_mask: k.mask.clone(),
                    });
                    srcs.push(src);
                    key_names.push(kname);
                    off += nbytes;
                }
                let (hit_miss, per_action) = match &t.next_tables {
                    NextTables::HitMiss { hit, miss } => (Some((g(*hit), g(*miss))), Vec::new()),
                    NextTables::PerAction(v) => (
                        None,
                        t.actions.iter().zip(v).map(|(a, n)| (*a, g(*n))).collect(),
                    ),
                };
                let direct_meter = match t.direct_meter {
                    Some(m) => match prog.meter_arrays[m as usize].result_target {
                        Some(rt) => Some((m, cx.field(rt))),
                        None => {
                            return cerr(format!(
                                "direct meter of table '{}' has no result_target",
                                t.name
                            ))
                        }
                    },
                    None => None,
                };
                table_by_name.insert(t.name.clone(), tables.len() as u32);
                tables.push(CTable {
                    name: t.name.clone(),
                    table_type: t.table_type,
                    spec: KeySpec {
                        fields,
                        total: off,
                        table_kind: t.match_type,
                    },
                    srcs,
                    actions: t.actions.clone(),
                    key_names,
                    hit_miss,
                    per_action,
                    base_default_next: g(t.base_default_next),
                    max_size: t.max_size,
                    with_counters: t.with_counters,
                    support_timeout: t.support_timeout,
                    direct_meter,
                    default_entry: t.default_entry.clone(),
                    profile: t.action_profile.map(|p| pb + p),
                    const_entries: t.entries.clone(),
                });
            }
            for c in &pl.conditionals {
                let expr = cx.expr(&c.expr, &[])?;
                conds.push(CCond {
                    fast: FastBool::compile(&expr),
                    expr,
                    t: g(c.true_next),
                    f: g(c.false_next),
                });
            }
            for c in &pl.action_calls {
                calls.push((c.action, g(c.next)));
            }
            match pl.name.as_str() {
                "ingress" => ingress = Some(g(pl.init)),
                "egress" => egress = Some(g(pl.init)),
                _ => {}
            }
        }

        let checksums = prog
            .checksums
            .iter()
            .map(|c| {
                let cond = match &c.if_cond {
                    Some(e) => Some(cx.expr(e, &[])?),
                    None => None,
                };
                Ok(CChecksum {
                    fast_cond: cond.as_ref().and_then(FastBool::compile),
                    target: cx.field(c.target),
                    ipv4: c.checksum_type == ChecksumType::Ipv4,
                    calc: c.calculation,
                    update: c.update,
                    verify: c.verify,
                    cond,
                })
            })
            .collect::<R<Vec<_>>>()?;

        let field_lists = prog
            .field_lists
            .iter()
            .map(|fl| {
                let elems = fl
                    .elements
                    .iter()
                    .filter_map(|e| match e {
                        FieldListElem::Field(f) => Some(FlElem::Field(cx.field(*f))),
                        FieldListElem::Const { .. } => None,
                    })
                    .collect();
                (fl.id, elems)
            })
            .collect();
        let learn_lists = prog
            .learn_lists
            .iter()
            .enumerate()
            .map(|(i, l)| (l.id, (i, l.elements.iter().map(|f| cx.field(*f)).collect())))
            .collect();

        let reads_clock = std.ingress_ts.f.is_some()
            || std.egress_ts.f.is_some()
            || std.queueing.is_some()
            || !prog.meter_arrays.is_empty()
            || tables
                .iter()
                .any(|t| t.support_timeout || t.direct_meter.is_some());
        let mut engine = Engine {
            reads_clock,
            layout,
            actions,
            parser,
            deparser,
            tables,
            conds,
            calls,
            profiles,
            ingress,
            egress,
            calcs,
            checksums,
            std,
            errors,
            field_lists,
            learn_lists,
            table_by_name,
            profile_by_name,
            drop_port: 511,
            prog,
            csum_plan: None,
            jit: None,
            jit_notes: Vec::new(),
        };
        engine.csum_plan = crate::csum::plan(&engine);
        (engine.jit, engine.jit_notes) = crate::jit::compile(&engine);
        Ok(engine)
    }
}

#[cfg(test)]
mod fast_expr_tests {
    use super::*;
    use crate::expr::{eval_data, Cx};
    use num_bigint::BigInt;

    fn field(off: u32, width: u32) -> FieldLoc {
        FieldLoc {
            off,
            nbytes: width.div_ceil(8),
            width,
            signed: false,
            saturating: false,
            header: 0,
            is_valid_bit: false,
            is_vl: false,
        }
    }

    /// Random trees of + - * & | ^ << over fields, action parameters and constants (negative
    /// ones included), stored into fields of 1..=64 bits: the wrapping-u64 form stores exactly
    /// what the generic unbounded evaluator stores.
    #[test]
    fn fast_expressions_store_what_eval_stores() {
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        // Source fields: widths 8, 16, 32, 48, 64, 9 at consecutive offsets.
        let widths = [8u32, 16, 32, 48, 64, 9];
        let mut srcs = Vec::new();
        let mut off = 0;
        for w in widths {
            srcs.push(field(off, w));
            off += w.div_ceil(8);
        }
        let dst_off = off;
        let layout = Layout {
            headers: Vec::new(),
            total_bytes: dst_off + 8,
            stacks: Vec::new(),
            unions: Vec::new(),
            union_stacks: Vec::new(),
            metadata_ranges: Vec::new(),
            valid_template: Vec::new(),
            has_vl: false,
        };
        fn tree(next: &mut dyn FnMut() -> u64, srcs: &[FieldLoc], depth: u32) -> CExpr {
            let n = next();
            if depth == 0 || n.is_multiple_of(3) {
                return match n / 3 % 3 {
                    0 => CExpr::Field(srcs[(n / 9 % srcs.len() as u64) as usize]),
                    1 => CExpr::Local((n / 9 % 2) as u32, 32),
                    _ => {
                        let v = (next() as i64 as i128) >> (next() % 64);
                        CExpr::Const(Const {
                            small: Some(v),
                            big: BigInt::from(v),
                        })
                    }
                };
            }
            let ops = [Op::Add, Op::Sub, Op::Mul, Op::And, Op::Or, Op::Xor, Op::Shl];
            let op = ops[(n / 3 % 7) as usize];
            let r = if op == Op::Shl {
                let v = (next() % 70) as i128;
                CExpr::Const(Const {
                    small: Some(v),
                    big: BigInt::from(v),
                })
            } else {
                tree(next, srcs, depth - 1)
            };
            CExpr::Op {
                op,
                l: Some(Box::new(tree(next, srcs, depth - 1))),
                r: Some(Box::new(r)),
                c: None,
            }
        }
        for _ in 0..3000 {
            let e = tree(&mut next, &srcs, 4);
            let fast = FastExpr::compile(&e).expect("all operators have a fast form");
            let mut bytes: Vec<u8> = (0..dst_off + 8).map(|_| next() as u8).collect();
            for f in &srcs {
                // Keep every source within its width.
                let top = f.off as usize;
                let extra = f.nbytes * 8 - f.width;
                bytes[top] &= 0xffu8 >> extra;
            }
            let phv = Phv {
                bytes,
                valid: vec![true],
                stack_next: Vec::new(),
                union_stack_next: Vec::new(),
                vl_width: vec![0],
            };
            let locals = vec![
                (next() as u32).to_be_bytes().to_vec(),
                (next() as u32).to_be_bytes().to_vec(),
            ];
            let cx = Cx {
                layout: &layout,
                phv: &phv,
                locals: &locals,
                regs: &[],
                pkt: &[],
                cursor: 0,
            };
            let dst = field(dst_off, 1 + (next() % 64) as u32);
            let want = eval_data(&e, &cx).expect("eval");
            let mut a = phv.clone();
            crate::exec::store_field(&mut a, &dst, &want);
            let mut b = phv.clone();
            b.write_u64(&dst, fast.eval(&phv, &locals).expect("fast eval"));
            assert_eq!(a.bytes, b.bytes, "{e:?} into {} bits", dst.width);
        }
    }

    /// p4c's `(x + y) & 0xff..` into a field no wider than the mask becomes one `SetBin`;
    /// a mask narrower than the destination is kept (it changes the stored value).
    #[test]
    fn masks_covering_the_destination_are_dropped() {
        let k = |v: i128| {
            CExpr::Const(Const {
                small: Some(v),
                big: BigInt::from(v),
            })
        };
        let sum = CExpr::Op {
            op: Op::Add,
            l: Some(Box::new(CExpr::Field(field(0, 32)))),
            r: Some(Box::new(CExpr::Local(0, 32))),
            c: None,
        };
        let masked = |m: i128| CExpr::Op {
            op: Op::And,
            l: Some(Box::new(sum.clone())),
            r: Some(Box::new(k(m))),
            c: None,
        };
        let assign = |w: u32, m: i128| {
            specialize(Instr::Assign {
                dst: LVal::Field(field(8, w)),
                src: masked(m),
            })
        };
        assert!(matches!(
            assign(32, 0xffff_ffff),
            Instr::SetBin {
                op: FastBin::Add,
                a: FastSrc::Field(_),
                b: FastSrc::Local(0),
                ..
            }
        ));
        assert!(matches!(assign(16, 0xffff_ffff), Instr::SetBin { .. }));
        // 0xff into a 16-bit field: the mask is an operation of its own.
        assert!(matches!(
            assign(16, 0xff),
            Instr::SetExpr {
                expr: FastExpr::Bin(FastBin::And, _, _),
                ..
            }
        ));
    }

    /// Right shifts, comparisons and signed fields keep the generic path.
    #[test]
    fn non_low_bit_operators_have_no_fast_form() {
        let f = CExpr::Field(field(0, 8));
        let op = |op| CExpr::Op {
            op,
            l: Some(Box::new(f.clone())),
            r: Some(Box::new(f.clone())),
            c: None,
        };
        for o in [Op::Shr, Op::Div, Op::Mod, Op::Gt] {
            assert!(FastExpr::compile(&op(o)).is_none(), "{o:?}");
        }
        let mut s = field(0, 8);
        s.signed = true;
        assert!(FastExpr::compile(&CExpr::Field(s)).is_none());
    }
}
