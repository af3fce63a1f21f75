//! Expressions: compiled trees with resolved operands, evaluated with BMv2's unbounded-integer
//! semantics (`bmv2-json.md` §2.2, §3).
//!
//! Evaluation is generic over [`Num`]: a fast `i128` path with checked arithmetic, and a
//! `BigInt` path used when an operand is wider than 127 bits or an intermediate result
//! overflows. Both paths share one evaluator, so they cannot disagree.

use crate::layout::{FieldLoc, Layout, Phv};
use num_bigint::{BigInt, Sign};
use num_traits::{One, Signed, ToPrimitive, Zero};
use std::cmp::Ordering;
use tern_model::Op;

/// Why an evaluation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EvalError {
    /// The fast path overflowed: retry with big integers.
    Overflow,
    /// A run-time fault (BMv2 aborts; tern drops the packet with a log line).
    Fault(&'static str),
}

type ER<T> = Result<T, EvalError>;

/// Integer arithmetic the evaluator needs.
pub trait Num: Clone + Ord + std::fmt::Debug {
    fn from_i128(v: i128) -> ER<Self>;
    fn from_big(v: &BigInt) -> ER<Self>;
    /// Read a right-aligned big-endian slot of `width` bits.
    fn from_slot(b: &[u8], width: u32, signed: bool) -> ER<Self>;
    fn add(&self, o: &Self) -> ER<Self>;
    fn sub(&self, o: &Self) -> ER<Self>;
    fn mul(&self, o: &Self) -> ER<Self>;
    fn div(&self, o: &Self) -> ER<Self>;
    fn rem(&self, o: &Self) -> ER<Self>;
    fn shl(&self, s: u32) -> ER<Self>;
    fn shr(&self, s: u32) -> ER<Self>;
    fn and(&self, o: &Self) -> ER<Self>;
    fn or(&self, o: &Self) -> ER<Self>;
    fn xor(&self, o: &Self) -> ER<Self>;
    fn not(&self) -> ER<Self>;
    fn is_zero(&self) -> bool;
    fn is_negative(&self) -> bool;
    /// The value clamped into `i64` (for indices and shift amounts).
    fn to_i64_sat(&self) -> i64;
    /// Low 64 bits, two's complement.
    fn low_u64(&self) -> u64;
    /// Store into a slot of `width` bits: wrap (unsigned/signed) or saturate.
    fn store(&self, width: u32, signed: bool, saturating: bool, out: &mut [u8]);
    fn to_big(&self) -> BigInt;
}

fn pow2(w: u32) -> BigInt {
    BigInt::one() << w as usize
}

fn clamp_big(v: &BigInt, width: u32, signed: bool) -> BigInt {
    let (lo, hi) = if signed {
        (-pow2(width - 1), pow2(width - 1) - 1)
    } else {
        (BigInt::zero(), pow2(width) - 1)
    };
    if *v < lo {
        lo
    } else if *v > hi {
        hi
    } else {
        v.clone()
    }
}

/// Write the low `out.len()*8` bits of `v` (two's complement) into `out`, then clear the bits
/// above `width`.
fn store_big_bits(v: &BigInt, width: u32, out: &mut [u8]) {
    let bytes = v.to_signed_bytes_be();
    let fill = if v.sign() == Sign::Minus { 0xff } else { 0 };
    let n = out.len();
    for i in 0..n {
        out[n - 1 - i] = if i < bytes.len() {
            bytes[bytes.len() - 1 - i]
        } else {
            fill
        };
    }
    mask_top(width, out);
}

#[inline]
fn mask_top(width: u32, out: &mut [u8]) {
    let extra = (out.len() as u32 * 8).saturating_sub(width) as usize;
    let whole = (extra / 8).min(out.len());
    out[..whole].fill(0);
    if !extra.is_multiple_of(8) && whole < out.len() {
        out[whole] &= 0xffu8 >> (extra % 8);
    }
}

impl Num for i128 {
    fn from_i128(v: i128) -> ER<Self> {
        Ok(v)
    }
    fn from_big(v: &BigInt) -> ER<Self> {
        v.to_i128().ok_or(EvalError::Overflow)
    }
    #[inline]
    fn from_slot(b: &[u8], width: u32, signed: bool) -> ER<Self> {
        if width > 127 || (signed && width > 126) {
            return Err(EvalError::Overflow);
        }
        let mut v: u128 = 0;
        for x in b {
            v = (v << 8) | *x as u128;
        }
        if signed && width > 0 && (v >> (width - 1)) & 1 == 1 {
            Ok(v as i128 - (1i128 << width))
        } else {
            Ok(v as i128)
        }
    }
    fn add(&self, o: &Self) -> ER<Self> {
        self.checked_add(*o).ok_or(EvalError::Overflow)
    }
    fn sub(&self, o: &Self) -> ER<Self> {
        self.checked_sub(*o).ok_or(EvalError::Overflow)
    }
    fn mul(&self, o: &Self) -> ER<Self> {
        self.checked_mul(*o).ok_or(EvalError::Overflow)
    }
    fn div(&self, o: &Self) -> ER<Self> {
        if *o <= 0 || *self < 0 {
            return Err(EvalError::Fault(
                "division with a negative operand or by zero",
            ));
        }
        Ok(self / o)
    }
    fn rem(&self, o: &Self) -> ER<Self> {
        if *o <= 0 || *self < 0 {
            return Err(EvalError::Fault(
                "modulo with a negative operand or by zero",
            ));
        }
        Ok(self % o)
    }
    fn shl(&self, s: u32) -> ER<Self> {
        if *self == 0 {
            return Ok(0);
        }
        let lz = if *self >= 0 {
            self.leading_zeros()
        } else {
            (!*self).leading_zeros()
        };
        if s >= lz {
            return Err(EvalError::Overflow);
        }
        Ok(self << s)
    }
    fn shr(&self, s: u32) -> ER<Self> {
        Ok(if s >= 127 {
            if *self < 0 {
                -1
            } else {
                0
            }
        } else {
            self >> s
        })
    }
    fn and(&self, o: &Self) -> ER<Self> {
        Ok(self & o)
    }
    fn or(&self, o: &Self) -> ER<Self> {
        Ok(self | o)
    }
    fn xor(&self, o: &Self) -> ER<Self> {
        Ok(self ^ o)
    }
    fn not(&self) -> ER<Self> {
        Ok(!self)
    }
    fn is_zero(&self) -> bool {
        *self == 0
    }
    fn is_negative(&self) -> bool {
        *self < 0
    }
    fn to_i64_sat(&self) -> i64 {
        (*self).clamp(i64::MIN as i128, i64::MAX as i128) as i64
    }
    fn low_u64(&self) -> u64 {
        *self as u64
    }
    fn store(&self, width: u32, signed: bool, saturating: bool, out: &mut [u8]) {
        let mut v = *self;
        if width == 0 {
            out.fill(0);
            return;
        }
        if saturating && width >= 127 {
            BigInt::from(v).store(width, signed, saturating, out);
            return;
        }
        if saturating {
            let (lo, hi) = if signed {
                (-(1i128 << (width - 1)), (1i128 << (width - 1)) - 1)
            } else {
                (0, (1i128 << width) - 1)
            };
            v = v.clamp(lo, hi);
        }
        let fill = if v < 0 { 0xff } else { 0 };
        let n = out.len();
        let u = v as u128;
        for i in 0..n {
            out[n - 1 - i] = if i < 16 { (u >> (8 * i)) as u8 } else { fill };
        }
        mask_top(width, out);
    }
    fn to_big(&self) -> BigInt {
        BigInt::from(*self)
    }
}

impl Num for BigInt {
    fn from_i128(v: i128) -> ER<Self> {
        Ok(BigInt::from(v))
    }
    fn from_big(v: &BigInt) -> ER<Self> {
        Ok(v.clone())
    }
    fn from_slot(b: &[u8], width: u32, signed: bool) -> ER<Self> {
        let v = BigInt::from_bytes_be(Sign::Plus, b);
        if signed && width > 0 && v.bit(width as u64 - 1) {
            Ok(v - pow2(width))
        } else {
            Ok(v)
        }
    }
    fn add(&self, o: &Self) -> ER<Self> {
        Ok(self + o)
    }
    fn sub(&self, o: &Self) -> ER<Self> {
        Ok(self - o)
    }
    fn mul(&self, o: &Self) -> ER<Self> {
        Ok(self * o)
    }
    fn div(&self, o: &Self) -> ER<Self> {
        if !o.is_positive() || Signed::is_negative(self) {
            return Err(EvalError::Fault(
                "division with a negative operand or by zero",
            ));
        }
        Ok(self / o)
    }
    fn rem(&self, o: &Self) -> ER<Self> {
        if !o.is_positive() || Signed::is_negative(self) {
            return Err(EvalError::Fault(
                "modulo with a negative operand or by zero",
            ));
        }
        Ok(self % o)
    }
    fn shl(&self, s: u32) -> ER<Self> {
        if s > 1 << 16 {
            return Err(EvalError::Fault("shift amount too large"));
        }
        Ok(self << s as usize)
    }
    fn shr(&self, s: u32) -> ER<Self> {
        Ok(self >> s as usize)
    }
    fn and(&self, o: &Self) -> ER<Self> {
        Ok(self & o)
    }
    fn or(&self, o: &Self) -> ER<Self> {
        Ok(self | o)
    }
    fn xor(&self, o: &Self) -> ER<Self> {
        Ok(self ^ o)
    }
    fn not(&self) -> ER<Self> {
        Ok(!self)
    }
    fn is_zero(&self) -> bool {
        Zero::is_zero(self)
    }
    fn is_negative(&self) -> bool {
        Signed::is_negative(self)
    }
    fn to_i64_sat(&self) -> i64 {
        self.to_i64().unwrap_or(if Signed::is_negative(self) {
            i64::MIN
        } else {
            i64::MAX
        })
    }
    fn low_u64(&self) -> u64 {
        let m = self & BigInt::from(u64::MAX);
        m.to_u64().unwrap_or(0)
    }
    fn store(&self, width: u32, signed: bool, saturating: bool, out: &mut [u8]) {
        if saturating && width > 0 {
            store_big_bits(&clamp_big(self, width, signed), width, out);
        } else {
            store_big_bits(self, width, out);
        }
    }
    fn to_big(&self) -> BigInt {
        self.clone()
    }
}

/// A compiled constant: both representations, computed once.
#[derive(Clone, Debug)]
pub struct Const {
    pub small: Option<i128>,
    pub big: BigInt,
}

impl Const {
    pub fn new(i: &tern_model::Int) -> Const {
        let big = BigInt::from_bytes_be(Sign::Plus, &i.magnitude);
        let big = if i.negative { -big } else { big };
        Const {
            small: big.to_i128(),
            big,
        }
    }
}

/// A compiled expression.
#[derive(Clone, Debug)]
pub enum CExpr {
    Field(FieldLoc),
    Const(Const),
    Bool(bool),
    /// Action parameter: index and bit width.
    Local(u32, u32),
    Register {
        array: u32,
        index: Box<CExpr>,
    },
    Header(u32),
    Stack(u32),
    /// Field `field` of the last valid element of stack `stack`.
    StackField {
        stack: u32,
        field: u32,
    },
    Union(u32),
    UnionStack(u32),
    Lookahead {
        offset: u32,
        width: u32,
    },
    Op {
        op: Op,
        l: Option<Box<CExpr>>,
        r: Option<Box<CExpr>>,
        c: Option<Box<CExpr>>,
    },
}

/// A run-time value.
#[derive(Clone, Debug)]
pub enum Val<N> {
    Data(N),
    Bool(bool),
    Header(u32),
    Union(u32),
    Stack(u32),
    UnionStack(u32),
}

/// A register array's storage: cells of `nbytes` bytes, big-endian.
///
/// `repr(C)` with the cells' address in `base`: native pipelines read and write cells in
/// place (`jit::pipeline`, register access) from a pointer to the array of `RegArray`s. The
/// cells are private and never reallocated after `new` (only read, written or filled through
/// [`RegArray::cells`] / [`RegArray::cells_mut`]); `clone` sets the copy's own `base`. So
/// `base` always addresses `nbytes * size` live bytes.
#[derive(Debug)]
#[repr(C)]
pub struct RegArray {
    /// Address of `cells[0]`.
    pub base: usize,
    pub size: u32,
    pub nbytes: u32,
    pub width: u32,
    cells: Vec<u8>,
}

impl Clone for RegArray {
    fn clone(&self) -> RegArray {
        let cells = self.cells.clone();
        RegArray {
            base: cells.as_ptr() as usize,
            size: self.size,
            nbytes: self.nbytes,
            width: self.width,
            cells,
        }
    }
}

impl RegArray {
    pub fn new(width: u32, size: u32) -> RegArray {
        let nbytes = width.div_ceil(8).max(1);
        let cells = vec![0; (nbytes * size) as usize];
        RegArray {
            base: cells.as_ptr() as usize,
            width,
            nbytes,
            size,
            cells,
        }
    }
    /// Every cell's bytes, in index order.
    pub fn cells(&self) -> &[u8] {
        &self.cells
    }
    /// Every cell's bytes, writable in place (the storage itself cannot be replaced).
    pub fn cells_mut(&mut self) -> &mut [u8] {
        &mut self.cells
    }
    #[inline]
    pub fn cell(&self, i: u32) -> &[u8] {
        let s = (i * self.nbytes) as usize;
        &self.cells[s..s + self.nbytes as usize]
    }
    #[inline]
    pub fn cell_mut(&mut self, i: u32) -> &mut [u8] {
        let s = (i * self.nbytes) as usize;
        &mut self.cells[s..s + self.nbytes as usize]
    }
}

/// What an expression may read.
pub struct Cx<'a> {
    pub layout: &'a Layout,
    pub phv: &'a Phv,
    pub locals: &'a [Vec<u8>],
    pub regs: &'a [RegArray],
    /// Packet bytes and parse cursor (for lookahead).
    pub pkt: &'a [u8],
    pub cursor: usize,
}

fn data<N>(v: Val<N>) -> ER<N> {
    match v {
        Val::Data(n) => Ok(n),
        Val::Bool(_) => Err(EvalError::Fault("bool used as data")),
        _ => Err(EvalError::Fault("header used as data")),
    }
}

fn boolean<N: Num>(v: Val<N>) -> ER<bool> {
    match v {
        Val::Bool(b) => Ok(b),
        Val::Data(n) => Ok(!n.is_zero()),
        _ => Err(EvalError::Fault("header used as bool")),
    }
}

/// Read a field slot as `N`.
#[inline]
pub fn read_field<N: Num>(cx_phv: &Phv, f: &FieldLoc) -> ER<N> {
    if f.is_valid_bit {
        return N::from_i128(cx_phv.valid[f.header as usize] as i128);
    }
    N::from_slot(cx_phv.slot(f), f.width, f.signed)
}

/// Lookahead bits from the packet; missing bytes read as zero (BMv2 reads past the end).
pub fn lookahead_slot(pkt: &[u8], cursor: usize, offset: u32, width: u32, out: &mut [u8]) {
    let start_bit = cursor * 8 + offset as usize;
    let need = (start_bit + width as usize).div_ceil(8);
    if need <= pkt.len() {
        crate::layout::bits_to_slot(pkt, start_bit, width as usize, out);
    } else {
        let mut tmp = pkt.to_vec();
        tmp.resize(need, 0);
        crate::layout::bits_to_slot(&tmp, start_bit, width as usize, out);
    }
}

fn two_comp_mod<N: Num>(v: &N, w: i64) -> ER<N> {
    if !(1..=4096).contains(&w) {
        return Err(EvalError::Fault("bad width in two_comp_mod"));
    }
    let mut buf = [0u8; 513];
    let n = (w as usize).div_ceil(8);
    v.store(w as u32, true, false, &mut buf[..n]);
    N::from_slot(&buf[..n], w as u32, true)
}

fn sat<N: Num>(v: &N, w: i64, signed: bool) -> ER<N> {
    if !(1..=4096).contains(&w) {
        return Err(EvalError::Fault("bad width in saturating cast"));
    }
    let mut buf = [0u8; 513];
    let n = (w as usize).div_ceil(8);
    v.store(w as u32, signed, true, &mut buf[..n]);
    N::from_slot(&buf[..n], w as u32, signed)
}

fn header_eq(cx: &Cx, a: u32, b: u32) -> bool {
    let (la, lb) = (
        &cx.layout.headers[a as usize],
        &cx.layout.headers[b as usize],
    );
    if !cx.phv.valid[a as usize] || !cx.phv.valid[b as usize] || la.fields.len() != lb.fields.len()
    {
        return false;
    }
    la.fields
        .iter()
        .zip(&lb.fields)
        .all(|(x, y)| x.width == y.width && cx.phv.slot(x) == cx.phv.slot(y))
}

fn union_eq(cx: &Cx, a: u32, b: u32) -> bool {
    let (ua, ub) = (&cx.layout.unions[a as usize], &cx.layout.unions[b as usize]);
    let va = ua.iter().position(|h| cx.phv.valid[*h as usize]);
    let vb = ub.iter().position(|h| cx.phv.valid[*h as usize]);
    match (va, vb) {
        (Some(i), Some(j)) if i == j => header_eq(cx, ua[i], ub[j]),
        _ => false,
    }
}

/// Evaluate `e`.
pub fn eval<N: Num>(e: &CExpr, cx: &Cx) -> ER<Val<N>> {
    Ok(match e {
        CExpr::Field(f) => Val::Data(read_field(cx.phv, f)?),
        CExpr::Const(c) => match c.small {
            Some(s) => Val::Data(N::from_i128(s)?),
            None => Val::Data(N::from_big(&c.big)?),
        },
        CExpr::Bool(b) => Val::Bool(*b),
        CExpr::Local(i, w) => match cx.locals.get(*i as usize) {
            Some(b) => Val::Data(N::from_slot(b, *w, false)?),
            None => return Err(EvalError::Fault("action parameter out of range")),
        },
        CExpr::Register { array, index } => {
            let idx = data(eval::<N>(index, cx)?)?.to_i64_sat();
            let r = &cx.regs[*array as usize];
            if idx < 0 || idx >= r.size as i64 {
                return Err(EvalError::Fault("register index out of range"));
            }
            Val::Data(N::from_slot(r.cell(idx as u32), r.width, false)?)
        }
        CExpr::Header(h) => Val::Header(*h),
        CExpr::Stack(s) => Val::Stack(*s),
        CExpr::Union(u) => Val::Union(*u),
        CExpr::UnionStack(u) => Val::UnionStack(*u),
        CExpr::StackField { stack, field } => {
            let next = cx.phv.stack_next[*stack as usize];
            if next == 0 {
                return Err(EvalError::Fault("stack_field on an empty stack"));
            }
            let h = cx.layout.stacks[*stack as usize][next as usize - 1];
            let f = cx.layout.headers[h as usize].fields[*field as usize];
            Val::Data(read_field(cx.phv, &f)?)
        }
        CExpr::Lookahead { offset, width } => {
            if *width > 4096 {
                return Err(EvalError::Fault("lookahead wider than 4096 bits"));
            }
            let mut buf = [0u8; 513];
            let n = (*width as usize).div_ceil(8).min(513);
            lookahead_slot(cx.pkt, cx.cursor, *offset, *width, &mut buf[..n]);
            Val::Data(N::from_slot(&buf[..n], *width, false)?)
        }
        CExpr::Op { op, l, r, c } => eval_op(*op, l.as_deref(), r.as_deref(), c.as_deref(), cx)?,
    })
}

fn operand(x: Option<&CExpr>) -> ER<&CExpr> {
    x.ok_or(EvalError::Fault("missing operand"))
}

fn eval_op<N: Num>(
    op: Op,
    l: Option<&CExpr>,
    r: Option<&CExpr>,
    c: Option<&CExpr>,
    cx: &Cx,
) -> ER<Val<N>> {
    let d = |x: Option<&CExpr>| -> ER<N> { data(eval::<N>(operand(x)?, cx)?) };
    let b = |x: Option<&CExpr>| -> ER<bool> { boolean(eval::<N>(operand(x)?, cx)?) };
    let shift_amount = |x: &N| -> ER<u32> {
        if x.is_negative() {
            return Err(EvalError::Fault("negative shift amount"));
        }
        Ok(x.to_i64_sat().min(u32::MAX as i64) as u32)
    };
    Ok(match op {
        Op::Add => {
            let rv = d(r)?;
            match l {
                None => Val::Data(rv),
                Some(_) => Val::Data(d(l)?.add(&rv)?),
            }
        }
        Op::Sub => {
            let rv = d(r)?;
            match l {
                None => Val::Data(N::from_i128(0)?.sub(&rv)?),
                Some(_) => Val::Data(d(l)?.sub(&rv)?),
            }
        }
        Op::Mul => Val::Data(d(l)?.mul(&d(r)?)?),
        Op::Div => Val::Data(d(l)?.div(&d(r)?)?),
        Op::Mod => Val::Data(d(l)?.rem(&d(r)?)?),
        Op::Shl => {
            let s = shift_amount(&d(r)?)?;
            Val::Data(d(l)?.shl(s)?)
        }
        Op::Shr => {
            let s = shift_amount(&d(r)?)?;
            Val::Data(d(l)?.shr(s)?)
        }
        Op::And => Val::Data(d(l)?.and(&d(r)?)?),
        Op::Or => Val::Data(d(l)?.or(&d(r)?)?),
        Op::Xor => Val::Data(d(l)?.xor(&d(r)?)?),
        Op::Not => Val::Data(d(r)?.not()?),
        Op::Eq | Op::Ne => {
            let lv = eval::<N>(operand(l)?, cx)?;
            let rv = eval::<N>(operand(r)?, cx)?;
            let eq = match (lv, rv) {
                (Val::Data(a), Val::Data(b2)) => a == b2,
                (Val::Bool(a), Val::Bool(b2)) => a == b2,
                (Val::Bool(a), Val::Data(b2)) | (Val::Data(b2), Val::Bool(a)) => a != b2.is_zero(),
                (Val::Header(a), Val::Header(b2)) => header_eq(cx, a, b2),
                (Val::Union(a), Val::Union(b2)) => union_eq(cx, a, b2),
                _ => return Err(EvalError::Fault("comparison of different kinds")),
            };
            Val::Bool(if op == Op::Eq { eq } else { !eq })
        }
        Op::Gt | Op::Ge | Op::Lt | Op::Le => {
            let o = d(l)?.cmp(&d(r)?);
            Val::Bool(match op {
                Op::Gt => o == Ordering::Greater,
                Op::Ge => o != Ordering::Less,
                Op::Lt => o == Ordering::Less,
                _ => o != Ordering::Greater,
            })
        }
        Op::LAnd => {
            let (x, y) = (b(l)?, b(r)?);
            Val::Bool(x && y)
        }
        Op::LOr => {
            let (x, y) = (b(l)?, b(r)?);
            Val::Bool(x || y)
        }
        Op::LNot => Val::Bool(!b(r)?),
        Op::Valid => match eval::<N>(operand(r.or(l))?, cx)? {
            Val::Header(h) => Val::Bool(cx.phv.valid[h as usize]),
            _ => return Err(EvalError::Fault("valid on a non-header")),
        },
        Op::ValidUnion => match eval::<N>(operand(r.or(l))?, cx)? {
            Val::Union(u) => Val::Bool(
                cx.layout.unions[u as usize]
                    .iter()
                    .any(|h| cx.phv.valid[*h as usize]),
            ),
            _ => return Err(EvalError::Fault("valid_union on a non-union")),
        },
        Op::Ternary => {
            if b(c)? {
                eval::<N>(operand(l)?, cx)?
            } else {
                eval::<N>(operand(r)?, cx)?
            }
        }
        Op::TwoCompMod => Val::Data(two_comp_mod(&d(l)?, d(r)?.to_i64_sat())?),
        Op::SatCast => Val::Data(sat(&d(l)?, d(r)?.to_i64_sat(), true)?),
        Op::USatCast => Val::Data(sat(&d(l)?, d(r)?.to_i64_sat(), false)?),
        Op::D2B => Val::Bool(!d(r)?.is_zero()),
        Op::B2D => Val::Data(N::from_i128(b(r)? as i128)?),
        Op::DerefStack => {
            let s = match eval::<N>(operand(l)?, cx)? {
                Val::Stack(s) => s,
                _ => return Err(EvalError::Fault("dereference of a non-stack")),
            };
            let i = d(r)?.to_i64_sat();
            let hs = &cx.layout.stacks[s as usize];
            if i < 0 || i as usize >= hs.len() {
                return Err(EvalError::Fault("header stack index out of range"));
            }
            Val::Header(hs[i as usize])
        }
        Op::DerefUnionStack => {
            let s = match eval::<N>(operand(l)?, cx)? {
                Val::UnionStack(s) => s,
                _ => return Err(EvalError::Fault("dereference of a non-union-stack")),
            };
            let i = d(r)?.to_i64_sat();
            let us = &cx.layout.union_stacks[s as usize];
            if i < 0 || i as usize >= us.len() {
                return Err(EvalError::Fault("union stack index out of range"));
            }
            Val::Union(us[i as usize])
        }
        Op::LastStackIndex | Op::SizeStack => {
            let s = match eval::<N>(operand(r.or(l))?, cx)? {
                Val::Stack(s) => s,
                _ => return Err(EvalError::Fault("stack op on a non-stack")),
            };
            let next = cx.phv.stack_next[s as usize] as i128;
            Val::Data(N::from_i128(if op == Op::SizeStack {
                next
            } else {
                next - 1
            })?)
        }
        Op::AccessField(fi) => match eval::<N>(operand(l)?, cx)? {
            Val::Header(h) => match cx.layout.headers[h as usize].fields.get(fi as usize) {
                Some(f) => Val::Data(read_field(cx.phv, f)?),
                None => return Err(EvalError::Fault("field offset out of range")),
            },
            _ => return Err(EvalError::Fault("access_field on a non-header")),
        },
        Op::AccessUnionHeader(mi) => match eval::<N>(operand(l)?, cx)? {
            Val::Union(u) => match cx.layout.unions[u as usize].get(mi as usize) {
                Some(h) => Val::Header(*h),
                None => return Err(EvalError::Fault("union member out of range")),
            },
            _ => return Err(EvalError::Fault("access_union_header on a non-union")),
        },
    })
}

/// The result of a data expression, in whichever representation was needed.
#[derive(Clone, Debug)]
pub enum Value {
    Small(i128),
    Big(BigInt),
}

impl Value {
    pub fn store(&self, width: u32, signed: bool, saturating: bool, out: &mut [u8]) {
        match self {
            Value::Small(v) => v.store(width, signed, saturating, out),
            Value::Big(v) => v.store(width, signed, saturating, out),
        }
    }
    pub fn is_zero(&self) -> bool {
        match self {
            Value::Small(v) => *v == 0,
            Value::Big(v) => Zero::is_zero(v),
        }
    }
    pub fn to_i64_sat(&self) -> i64 {
        match self {
            Value::Small(v) => v.to_i64_sat(),
            Value::Big(v) => v.to_i64_sat(),
        }
    }
    pub fn low_u64(&self) -> u64 {
        match self {
            Value::Small(v) => v.low_u64(),
            Value::Big(v) => v.low_u64(),
        }
    }
    pub fn to_big(&self) -> BigInt {
        match self {
            Value::Small(v) => BigInt::from(*v),
            Value::Big(v) => v.clone(),
        }
    }
}

/// Evaluate a data expression: fast path first, big integers on overflow.
pub fn eval_data(e: &CExpr, cx: &Cx) -> Result<Value, &'static str> {
    match eval::<i128>(e, cx) {
        Ok(v) => match v {
            Val::Data(n) => Ok(Value::Small(n)),
            Val::Bool(b) => Ok(Value::Small(b as i128)),
            _ => Err("expected a data value"),
        },
        Err(EvalError::Overflow) => match eval::<BigInt>(e, cx) {
            Ok(Val::Data(n)) => Ok(Value::Big(n)),
            Ok(Val::Bool(b)) => Ok(Value::Small(b as i128)),
            Ok(_) => Err("expected a data value"),
            Err(EvalError::Fault(m)) => Err(m),
            Err(EvalError::Overflow) => Err("overflow"),
        },
        Err(EvalError::Fault(m)) => Err(m),
    }
}

/// Evaluate a boolean expression.
pub fn eval_bool(e: &CExpr, cx: &Cx) -> Result<bool, &'static str> {
    match eval::<i128>(e, cx) {
        Ok(v) => boolean(v).map_err(|_| "expected a boolean"),
        Err(EvalError::Overflow) => match eval::<BigInt>(e, cx) {
            Ok(v) => boolean(v).map_err(|_| "expected a boolean"),
            Err(EvalError::Fault(m)) => Err(m),
            Err(EvalError::Overflow) => Err("overflow"),
        },
        Err(EvalError::Fault(m)) => Err(m),
    }
}

/// Evaluate an expression that yields a header (for lvalues and header primitives).
pub fn eval_header(e: &CExpr, cx: &Cx) -> Result<u32, &'static str> {
    match eval::<BigInt>(e, cx) {
        Ok(Val::Header(h)) => Ok(h),
        Ok(_) => Err("expected a header"),
        Err(EvalError::Fault(m)) => Err(m),
        Err(EvalError::Overflow) => Err("overflow"),
    }
}

/// Evaluate an expression that yields a union.
pub fn eval_union(e: &CExpr, cx: &Cx) -> Result<u32, &'static str> {
    match eval::<BigInt>(e, cx) {
        Ok(Val::Union(u)) => Ok(u),
        Ok(_) => Err("expected a header union"),
        Err(EvalError::Fault(m)) => Err(m),
        Err(EvalError::Overflow) => Err("overflow"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrow_and_wide_store_agree() {
        for v in [-129i128, -1, 0, 1, 255, 256, 1 << 70] {
            for (w, s, sat) in [
                (8, false, false),
                (8, true, false),
                (8, true, true),
                (8, false, true),
                (12, false, false),
            ] {
                let mut a = [0u8; 2];
                let mut b = [0u8; 2];
                v.store(w, s, sat, &mut a);
                BigInt::from(v).store(w, s, sat, &mut b);
                assert_eq!(a, b, "v={v} w={w} s={s} sat={sat}");
            }
        }
        let mut a = [0u8; 1];
        (-129i128).store(8, true, false, &mut a);
        assert_eq!(a[0], 127);
        (300i128).store(8, false, true, &mut a);
        assert_eq!(a[0], 255);
        (-300i128).store(8, true, true, &mut a);
        assert_eq!(a[0], 0x80);
    }

    #[test]
    fn shifts_detect_overflow() {
        assert_eq!(1i128.shl(126), Ok(1i128 << 126));
        assert_eq!(1i128.shl(127), Err(EvalError::Overflow));
        assert_eq!((-8i128).shr(1), Ok(-4));
        assert_eq!(two_comp_mod(&257i128, 8), Ok(1));
        assert_eq!(two_comp_mod(&-129i128, 8), Ok(127));
        assert_eq!(sat(&300i128, 8, true), Ok(127));
        assert_eq!(sat(&-5i128, 8, false), Ok(0));
    }
}

// ---------------------------------------------------------------------- fast conditions

/// A ≤ 64-bit unsigned operand of a [`FastBool`].
#[derive(Clone, Copy, Debug)]
pub enum FastVal {
    /// An unsigned, fixed-width field of at most 64 bits (`$valid$` included).
    Field(FieldLoc),
    Const(u64),
}

impl FastVal {
    fn compile(e: &CExpr) -> Option<FastVal> {
        match e {
            CExpr::Field(f) if !f.signed && !f.is_vl && f.width <= 64 => Some(FastVal::Field(*f)),
            CExpr::Const(c) => match c.small {
                Some(s) if (0..=u64::MAX as i128).contains(&s) => Some(FastVal::Const(s as u64)),
                _ => None,
            },
            _ => None,
        }
    }

    #[inline]
    fn get(&self, phv: &Phv) -> u64 {
        match self {
            FastVal::Field(f) => phv.read_u64(f),
            FastVal::Const(c) => *c,
        }
    }
}

/// A condition compiled at load time to plain `u64` work: validity tests and comparisons of
/// unsigned fields of at most 64 bits with each other or with constants, combined with
/// `and`/`or`/`not`. These cannot overflow or fault, so the result equals [`eval_bool`]'s
/// (which evaluates through `i128` and the generic operator table).
#[derive(Clone, Debug)]
pub enum FastBool {
    Const(bool),
    Valid(u32),
    /// `l op r` with `op` one of `==`, `!=`, `>`, `>=`, `<`, `<=`.
    Cmp(Op, FastVal, FastVal),
    NonZero(FastVal),
    And(Box<FastBool>, Box<FastBool>),
    Or(Box<FastBool>, Box<FastBool>),
    Not(Box<FastBool>),
}

impl FastBool {
    /// The fast form of a boolean expression, if it has one.
    pub fn compile(e: &CExpr) -> Option<FastBool> {
        let sub = |x: &Option<Box<CExpr>>| x.as_deref().and_then(FastBool::compile).map(Box::new);
        match e {
            CExpr::Bool(b) => Some(FastBool::Const(*b)),
            CExpr::Field(_) => FastVal::compile(e).map(FastBool::NonZero),
            CExpr::Op { op, l, r, .. } => match op {
                Op::Valid => match r.as_deref().or(l.as_deref()) {
                    Some(CExpr::Header(h)) => Some(FastBool::Valid(*h)),
                    _ => None,
                },
                Op::Eq | Op::Ne | Op::Gt | Op::Ge | Op::Lt | Op::Le => {
                    let a = FastVal::compile(l.as_deref()?)?;
                    let b = FastVal::compile(r.as_deref()?)?;
                    Some(FastBool::Cmp(*op, a, b))
                }
                Op::LAnd => Some(FastBool::And(sub(l)?, sub(r)?)),
                Op::LOr => Some(FastBool::Or(sub(l)?, sub(r)?)),
                Op::LNot => Some(FastBool::Not(sub(r)?)),
                Op::D2B => FastVal::compile(r.as_deref()?).map(FastBool::NonZero),
                _ => None,
            },
            _ => None,
        }
    }

    /// Evaluate over a PHV.
    pub fn eval(&self, phv: &Phv) -> bool {
        match self {
            FastBool::Const(b) => *b,
            FastBool::Valid(h) => phv.valid[*h as usize],
            FastBool::Cmp(op, l, r) => {
                let (a, b) = (l.get(phv), r.get(phv));
                match op {
                    Op::Eq => a == b,
                    Op::Ne => a != b,
                    Op::Gt => a > b,
                    Op::Ge => a >= b,
                    Op::Lt => a < b,
                    _ => a <= b,
                }
            }
            FastBool::NonZero(v) => v.get(phv) != 0,
            FastBool::And(a, b) => a.eval(phv) && b.eval(phv),
            FastBool::Or(a, b) => a.eval(phv) || b.eval(phv),
            FastBool::Not(a) => !a.eval(phv),
        }
    }
}

#[cfg(test)]
mod fast_bool_tests {
    use super::*;

    fn field(off: u32, width: u32, header: u32) -> FieldLoc {
        FieldLoc {
            off,
            nbytes: width.div_ceil(8),
            width,
            signed: false,
            saturating: false,
            header,
            is_valid_bit: false,
            is_vl: false,
        }
    }

    fn op(op: Op, l: Option<CExpr>, r: Option<CExpr>) -> CExpr {
        CExpr::Op {
            op,
            l: l.map(Box::new),
            r: r.map(Box::new),
            c: None,
        }
    }

    fn konst(v: i128) -> CExpr {
        CExpr::Const(Const {
            small: Some(v),
            big: BigInt::from(v),
        })
    }

    /// Random conditions over random PHVs: the fast form agrees with the generic evaluator.
    #[test]
    fn fast_conditions_agree_with_eval_bool() {
        let layout = Layout {
            headers: Vec::new(),
            total_bytes: 16,
            stacks: Vec::new(),
            unions: Vec::new(),
            union_stacks: Vec::new(),
            metadata_ranges: Vec::new(),
            valid_template: Vec::new(),
            has_vl: false,
        };
        // ttl: 8 bits at 0 (header 0); addr: 32 bits at 1 (header 0); port: 9 bits at 5 (header 1).
        let fields = [field(0, 8, 0), field(1, 32, 0), field(5, 9, 1)];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let ops = [Op::Eq, Op::Ne, Op::Gt, Op::Ge, Op::Lt, Op::Le];
        let mut compiled = 0;
        for _ in 0..3000 {
            let leaf = |n: u64| -> CExpr {
                match n % 4 {
                    0 => CExpr::Field(fields[(n / 4 % 3) as usize]),
                    1 => konst((n >> 8) as i128 % 300),
                    2 => op(Op::Valid, None, Some(CExpr::Header((n / 4 % 2) as u32))),
                    _ => op(
                        Op::D2B,
                        None,
                        Some(CExpr::Field(fields[(n / 4 % 3) as usize])),
                    ),
                }
            };
            let (a, b, c, d) = (next(), next(), next(), next());
            let cmp1 = op(
                ops[(a % 6) as usize],
                Some(CExpr::Field(fields[(b % 3) as usize])),
                Some(if c % 2 == 0 {
                    konst((d % 300) as i128)
                } else {
                    CExpr::Field(fields[(d % 3) as usize])
                }),
            );
            let other = leaf(next());
            let e = match next() % 4 {
                0 => op(Op::LAnd, Some(cmp1), Some(other)),
                1 => op(Op::LOr, Some(other), Some(cmp1)),
                2 => op(Op::LNot, None, Some(cmp1)),
                _ => cmp1,
            };
            let mut phv = Phv {
                bytes: (0..16).map(|_| (next() % 4) as u8).collect(),
                valid: vec![next() % 2 == 0, next() % 2 == 0],
                stack_next: Vec::new(),
                union_stack_next: Vec::new(),
                vl_width: vec![0, 0],
            };
            phv.bytes[5] &= 1;
            let cx = Cx {
                layout: &layout,
                phv: &phv,
                locals: &[],
                regs: &[],
                pkt: &[],
                cursor: 0,
            };
            let want = eval_bool(&e, &cx);
            match FastBool::compile(&e) {
                Some(f) => {
                    compiled += 1;
                    assert_eq!(Ok(f.eval(&phv)), want, "{e:?} over {phv:?}");
                }
                // Only data used as a boolean operand of and/or/not lacks a fast form.
                None => assert!(!matches!(e, CExpr::Op { op: Op::Eq, .. })),
            }
        }
        assert!(
            compiled > 1500,
            "only {compiled} conditions had a fast form"
        );
    }

    /// Signed fields and wide constants keep the generic path.
    #[test]
    fn signed_and_wide_operands_have_no_fast_form() {
        let mut f = field(0, 8, 0);
        f.signed = true;
        let e = op(Op::Gt, Some(CExpr::Field(f)), Some(konst(0)));
        assert!(FastBool::compile(&e).is_none());
        let e = op(Op::Eq, Some(CExpr::Field(field(0, 8, 0))), Some(konst(-1)));
        assert!(FastBool::compile(&e).is_none());
    }
}
