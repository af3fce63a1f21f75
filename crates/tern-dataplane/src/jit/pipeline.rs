//! Native code for the match-action pipelines (ingress and egress).
//!
//! The interpreter walks the control graph node by node ([`GNode`]): it dispatches on the node
//! kind, evaluates a condition through a tree, looks a table up and runs the action's
//! instructions one by one, reading every field location at packet time. Here the graph of one
//! pipeline becomes one native function: a node is a basic block, a condition of the fast
//! subset ([`FastBool`]) is a few loads and compares, the next node is a branch, and the actions
//! of the ≤ 64-bit subset (`SetU64`, `SetBin`, `SetExpr`, `mark_to_drop`, `exit`, no-ops, a
//! final jump to the end) are inlined as loads, ALU operations and stores with constant offsets
//! and masks.
//!
//! Tables. When a table's key has at most 8 bytes (exact and ternary tables: 24) and it has no
//! action profile ([`native_key`]), the generated code packs the key from the PHV and finds the
//! winning slot itself: an exact table by probing the store's open-addressing index through its
//! [`IndexView`] (inline: hash, probe, compare), a one-field LPM table through its DIR-16-8-8
//! index, a ternary table through its tuples ([`TupleView`]: each tuple's index probed with the
//! key under its mask, the smallest `(priority, slot)` kept), any other through [`h_find`] (the
//! `tern-match` engine on the packed key). It then reads the slot's [`HotRec`]: if the action is
//! one of the table's native actions and the entry has the parameters its body reads, the body
//! runs inline with its parameters read from the record (after [`h_hit`] for tables whose hits
//! update a direct counter, a direct meter or an ageing stamp). Everything else goes to
//! [`h_resolve`] with the slot (or a miss), and tables outside that shape to [`h_table`] (key,
//! lookup, then the same [`resolve`]): hit bookkeeping (counters, ageing, meters), default and
//! profile actions; a native action is handed back with its parameters in
//! [`PipeCtx::params`], any other is run interpreted.
//!
//! The rest stays in the interpreter too, called through [`h_cond`] (conditions outside the
//! fast subset) and [`h_call`] (direct calls of actions with anything else: registers,
//! counters, meters, hashes, clones, header operations, branches...). So every program runs
//! natively up to its pipeline graph; only the share of the work that is inlined varies. A
//! graph with a cycle (p4c never emits one) is left to the interpreter.

use std::collections::HashMap;
use std::mem::offset_of;
use std::panic::{catch_unwind, AssertUnwindSafe};

use cranelift_codegen::ir::{self, condcodes::IntCC, types, AbiParam, InstBuilder};
use cranelift_frontend::{Switch, Variable};

use super::{mem, Gen};
use crate::compile::{Engine, FastBin, FastExpr, FastSrc, GNode, Instr, KeySrc, LVal};
use crate::exec::{Fault, Pkt, PktRegs, State, TableState};
use crate::expr::{eval_bool, CExpr, Const, FastBool, FastVal, RegArray};
use crate::layout::{be_read, FieldLoc};
use crate::table::{
    Bucket, EntryStore, HotRec, IndexView, TupleView, HOT_PARAMS, INDEX_MUL, INDEX_MUL_HI,
    INDEX_MUL_X, MAX_INDEX_KEY, MAX_NATIVE_TUPLES,
};
use tern_model::Op;
use tern_model::TableType;

/// Most action parameters a native action body reads.
pub const MAX_PARAMS: usize = 16;

/// A native lookup's hit compares the record's head with the expected head of at most this
/// many of the table's native actions (in the table's order) before the general test.
const MAX_HEAD_COMPARES: usize = 4;

/// What the generated pipeline code and the helpers it calls share for one packet.
#[repr(C)]
pub struct PipeCtx {
    /// PHV bytes and validity bytes (refreshed by every helper before it returns).
    pub(super) phv: *mut u8,
    pub(super) valid: *mut u8,
    /// The switch's drop port (`mark_to_drop` stores it in `egress_spec`).
    pub(super) drop_port: u64,
    /// The parameters of the action a table helper resolved, as `u64`s.
    params: [u64; MAX_PARAMS],
    /// The table states (`State::tables`), for the inline exact lookups (refreshed like `phv`).
    tables: *const TableState,
    pub(super) eng: *const Engine,
    pub(super) st: *mut State,
    pub(super) pkt: *mut Pkt,
    pub(super) fault: Option<Fault>,
    /// The value [`h_rng`] drew.
    scratch: u64,
    /// The register arrays (`ExternState::regs`) and their number, for the inline register
    /// accesses (refreshed like `phv`).
    regs: *const RegArray,
    nregs: u64,
    /// Set (non-zero) by a helper that left the packet off the lane's common case: a clone,
    /// digest, resubmit or recirculate request, or a fault (the generated lane, `super::lane`,
    /// then hands the packet back to Rust; cleared by the lane before each packet).
    pub(super) touched: u64,
}

/// A `PipeCtx` built once (parameter words zeroed once) and reused by every pipeline call
/// of a burst of packets: a call sets only its pointers (see `Pipes::run_at_in`).
/// Transparent: the generated lane (`super::lane`) takes a context that starts with one.
#[repr(transparent)]
pub struct BurstCtx(pub(super) PipeCtx);

impl BurstCtx {
    /// A context with no packet yet (every pointer is set by the call that uses it).
    #[inline]
    pub fn new() -> BurstCtx {
        BurstCtx(PipeCtx {
            phv: std::ptr::null_mut(),
            valid: std::ptr::null_mut(),
            drop_port: 0,
            params: [0; MAX_PARAMS],
            tables: std::ptr::null(),
            eng: std::ptr::null(),
            st: std::ptr::null_mut(),
            pkt: std::ptr::null_mut(),
            fault: None,
            scratch: 0,
            regs: std::ptr::null(),
            nregs: 0,
            touched: 0,
        })
    }

    /// Point the context at this packet, its state and engine (before a pipeline call).
    #[inline(always)]
    pub(super) fn enter(&mut self, eng: &Engine, st: &mut State, pkt: &mut Pkt) {
        let ctx = &mut self.0;
        ctx.phv = pkt.phv.bytes.as_mut_ptr();
        ctx.valid = pkt.phv.valid.as_mut_ptr().cast::<u8>();
        ctx.drop_port = u64::from(eng.drop_port);
        ctx.tables = st.tables.as_ptr();
        ctx.regs = st.ext.regs.as_ptr();
        ctx.nregs = st.ext.regs.len() as u64;
        ctx.eng = eng;
        ctx.st = st;
        ctx.pkt = pkt;
    }

    /// What a generated pipeline's return code `r` means for `pkt` (its exit flag set on
    /// an `exit`), the fault a helper left taken out of the context.
    #[inline(always)]
    pub(super) fn result(&mut self, r: i64, pkt: &mut Pkt) -> Result<(), Fault> {
        let fault = self.0.fault.take();
        match r {
            // A helper that cannot stop the code (`h_hash`) left a fault.
            _ if fault.is_some() && r != FAULT => Err(fault.expect("just checked")),
            DONE => Ok(()),
            EXIT => {
                pkt.regs.exit = true;
                Ok(())
            }
            _ => Err(fault.unwrap_or_else(|| Fault("native pipeline failed".into()))),
        }
    }
}

impl Default for BurstCtx {
    fn default() -> Self {
        Self::new()
    }
}

/// `(context) -> DONE | FAULT | EXIT`.
pub type PipeFn = unsafe extern "C" fn(*mut PipeCtx) -> i64;

/// Return codes of a generated pipeline.
const DONE: i64 = 0;
pub(super) const FAULT: i64 = 1;
/// An inlined `exit` ran: the caller sets the packet's exit flag.
const EXIT: i64 = 2;

/// A table helper's answer (negative: fault): the action index in the low 32 bits
/// ([`NO_ACTION`] if none), and flags.
const NO_ACTION: i64 = 0xffff_ffff;
const HIT: i64 = 1 << 32;
/// The helper ran the action (interpreted): the generated code only picks the next node.
const RAN: i64 = 1 << 33;
/// The action it ran set the exit flag: the pipeline ends.
const EXITED: i64 = 1 << 34;

/// [`h_find`]'s answers besides a slot.
const MISS: i64 = -1;
const FIND_FAULT: i64 = -2;

/// How a native action is run: how many parameters its body reads (an entry with fewer is
/// run interpreted, which reports the fault) and whether it contains `exit`.
#[derive(Clone, Copy, Debug)]
pub struct ActPlan {
    pub params: u32,
    pub exits: bool,
}

/// Native pipelines of a program.
#[derive(Default)]
pub struct Pipes {
    /// One function per pipeline, by its first node.
    pub fns: Vec<(GNode, PipeFn)>,
    /// For each action: its native plan, if its body is in the native subset.
    pub actions: Vec<Option<ActPlan>>,
    /// For each table: its actions that are native, with their plans (what the generated
    /// code of that table can run).
    pub by_table: Vec<Vec<(u32, ActPlan)>>,
    /// For each keyless table whose constant default action is native: the action and its
    /// parameters (the generated code reads them here, so they live as long as the code).
    pub const_defaults: Vec<Option<ConstDefault>>,
}

impl Pipes {
    /// Plans for every action, and per table the native ones among its actions; no code yet.
    pub fn plan(eng: &Engine) -> Pipes {
        let actions: Vec<_> = (0..eng.actions.len())
            .map(|a| plan_action(eng, a))
            .collect();
        let by_table: Vec<Vec<(u32, ActPlan)>> = eng
            .tables
            .iter()
            .map(|t| {
                let mut v: Vec<(u32, ActPlan)> = t
                    .actions
                    .iter()
                    .filter_map(|a| Some((*a, actions.get(*a as usize).copied().flatten()?)))
                    .collect();
                v.sort_by_key(|(a, _)| *a);
                v.dedup_by_key(|(a, _)| *a);
                v
            })
            .collect();
        let const_defaults = (0..eng.tables.len())
            .map(|t| const_default(eng, &by_table[t], t))
            .collect();
        Pipes {
            fns: Vec::new(),
            actions,
            by_table,
            const_defaults,
        }
    }

    /// Run the pipeline starting at `init` natively; `None` when it has no native code.
    pub fn run(
        &self,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        init: GNode,
    ) -> Option<Result<(), Fault>> {
        let f = self.fns.iter().find(|(i, _)| *i == init)?.1;
        Some(Self::run_fn(f, eng, st, pkt))
    }

    /// The index in [`Pipes::fns`] of the pipeline starting at `init` (for callers that
    /// resolve it once, at load: [`Pipes::run_at_in`]).
    pub fn index_of(&self, init: GNode) -> Option<usize> {
        self.fns.iter().position(|(i, _)| *i == init)
    }

    #[inline]
    fn run_fn(f: PipeFn, eng: &Engine, st: &mut State, pkt: &mut Pkt) -> Result<(), Fault> {
        Self::run_fn_in(&mut BurstCtx::new(), f, eng, st, pkt)
    }

    /// [`Pipes::run`] of the pipeline at index `i` of [`Pipes::fns`] (no search), with a
    /// context kept across calls ([`BurstCtx`]); `None` if there is no such pipeline.
    #[inline(always)]
    pub fn run_at_in(
        &self,
        ctx: &mut BurstCtx,
        i: usize,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
    ) -> Option<Result<(), Fault>> {
        let f = self.fns.get(i)?.1;
        Some(Self::run_fn_in(ctx, f, eng, st, pkt))
    }

    #[inline(always)]
    fn run_fn_in(
        c: &mut BurstCtx,
        f: PipeFn,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
    ) -> Result<(), Fault> {
        if pkt.regs.exit {
            return Ok(());
        }
        // Every pointer of the context refreshed for this call; the parameter words keep
        // what the last call left (the code reads a parameter word only after the helper that
        // resolved the action wrote it), `fault` is `None` (taken after every call).
        c.enter(eng, st, pkt);
        let ctx = &mut c.0;
        // SAFETY: the code was generated for this engine's layout, and the caller
        // (`Native::run_pipeline`) checked that the PHV has that layout's sizes: every PHV
        // and validity offset the code touches is below them (checked at generation). Every
        // pointer of the context was set just above from live references; the context
        // outlives the call; `st` and `pkt` are exclusively borrowed here and not touched
        // until the call returns; the helpers the code calls take the context pointer it was
        // given and end their borrows before returning. The pointers left in the context
        // after the call are not used again before the next call sets them.
        let r = unsafe { f(ctx) };
        c.result(r, pkt)
    }
}

/// Run `f` with the context's engine, state, packet and parameter array (for the
/// helpers below); a fault or a panic is stored in the context and becomes `-1`.
///
/// # Safety
/// `ctx` must be the context [`Pipes::run`] passed to the generated code.
unsafe fn with_ctx(
    ctx: *mut PipeCtx,
    f: impl FnOnce(&Engine, &mut State, &mut Pkt, &mut [u64; MAX_PARAMS]) -> Result<i64, Fault>,
) -> i64 {
    // SAFETY: per the contract, `ctx` points to the live context of `Pipes::run`, whose
    // pointers come from references that are exclusively borrowed for the whole call and
    // unused by the generated code while a helper runs; these borrows end before returning.
    let c = unsafe { &mut *ctx };
    let (eng, st, pkt) = unsafe { (&*c.eng, &mut *c.st, &mut *c.pkt) };
    let r = catch_unwind(AssertUnwindSafe(|| f(eng, st, pkt, &mut c.params)));
    c.phv = pkt.phv.bytes.as_mut_ptr();
    c.valid = pkt.phv.valid.as_mut_ptr().cast::<u8>();
    c.tables = st.tables.as_ptr();
    c.regs = st.ext.regs.as_ptr();
    c.nregs = st.ext.regs.len() as u64;
    let regs = &pkt.regs;
    if regs.clone.is_some() || regs.digest.is_some() || regs.resubmit != 0 || regs.recirculate != 0
    {
        c.touched = 1;
    }
    match r {
        Ok(Ok(v)) => v,
        Ok(Err(e)) => {
            c.touched = 1;
            c.fault = Some(e);
            -1
        }
        Err(_) => {
            c.touched = 1;
            c.fault = Some(Fault("internal error in the pipeline".into()));
            -1
        }
    }
}

/// Table `t`: key, lookup, then [`resolve`].
extern "C" fn h_table(ctx: *mut PipeCtx, t: u32) -> i64 {
    // SAFETY: called only by generated code, with the context it was given.
    unsafe {
        with_ctx(ctx, |eng, st, pkt, params| {
            // The state's reusable key buffer (no allocation per lookup).
            let mut key = std::mem::take(&mut st.key_buf);
            let hit = eng.match_key(&st.tables[t as usize], &pkt.phv, t, &mut key);
            st.key_buf = key;
            resolve(eng, st, pkt, t, hit, params)
        })
    }
}

/// Table `t` after native code looked its key up: `slot` is the hit's slot, or negative for
/// a miss; then [`resolve`].
extern "C" fn h_resolve(ctx: *mut PipeCtx, t: u32, slot: i64) -> i64 {
    // SAFETY: called only by generated code, with the context it was given.
    unsafe {
        with_ctx(ctx, |eng, st, pkt, params| {
            resolve(eng, st, pkt, t, u32::try_from(slot).ok(), params)
        })
    }
}

/// The slot of table `t`'s winning entry for `key` (the packed key bytes, big-endian, in the
/// low `spec.total` ≤ 8 bytes), [`MISS`] on a miss, [`FIND_FAULT`] if the lookup panicked.
extern "C" fn h_find(ctx: *mut PipeCtx, t: u32, key: u64) -> i64 {
    // SAFETY: called only by generated code, with the context `Pipes::run` gave it: the engine
    // and the table states are alive, and no helper holds `&mut State` while generated code
    // runs, so reading one table state is sound.
    let r = catch_unwind(|| unsafe {
        let c = &*ctx;
        let eng = &*c.eng;
        let ts = &*c.tables.add(t as usize);
        let spec = &eng.tables[t as usize].spec;
        let n = (spec.total as usize).min(8);
        let b = key.to_be_bytes();
        ts.store.lookup(spec, &b[8 - n..]).map_or(MISS, i64::from)
    });
    r.unwrap_or_else(|_| {
        // SAFETY: as above; the context outlives the call.
        unsafe { (*ctx).fault = Some(Fault("internal error in a table lookup".into())) };
        FIND_FAULT
    })
}

/// What a table helper answers for table `t` whose lookup gave `hit`: the hit's bookkeeping
/// (counters, ageing, meters), the action resolved (entry or default, through profiles);
/// a native action is left to the generated code with its parameters in `params`, any other
/// is run here. See [`HIT`], [`RAN`], [`EXITED`], [`NO_ACTION`].
fn resolve(
    eng: &Engine,
    st: &mut State,
    pkt: &mut Pkt,
    t: u32,
    hit: Option<u32>,
    params: &mut [u64; MAX_PARAMS],
) -> Result<i64, Fault> {
    let State {
        tables,
        profiles,
        ext,
        ..
    } = st;
    // The table's native actions with their plans (what the generated code can run).
    let natives = eng
        .jit
        .as_ref()
        .and_then(|j| j.pipes.by_table.get(t as usize))
        .map_or(&[][..], Vec::as_slice);
    let plan_of = |a: u32, n: usize| {
        let (_, p) = natives.iter().find(|(x, _)| *x == a)?;
        Some(*p).filter(|p| n >= p.params as usize)
    };
    // A hit that needs nothing of its entry but a native action: take the action and its
    // parameters from the slot's compact record (one cache line).
    if let Some(idx) = hit.filter(|_| eng.tables[t as usize].plain_hits()) {
        let rec = tables[t as usize].store.hot(idx);
        if let Some((a, n)) = rec.action() {
            if let Some(p) = plan_of(a, n) {
                let k = p.params as usize;
                params[..k].copy_from_slice(&rec.params[..k]);
                return Ok(HIT | i64::from(a));
            }
        }
    }
    let (hit, action) = eng.finish_lookup::<false>(tables, profiles, ext, pkt, t, &[], hit);
    let mut r = if hit { HIT } else { 0 };
    let Some((a, data)) = action else {
        return Ok(r | NO_ACTION);
    };
    r |= i64::from(a);
    if let Some(p) = plan_of(a, data.len()) {
        for (dst, d) in params.iter_mut().zip(&data[..p.params as usize]) {
            *dst = be_read(d);
        }
        return Ok(r);
    }
    eng.run_instrs(ext, pkt, &eng.actions[a as usize].instrs, data)?;
    r |= RAN;
    if pkt.regs.exit {
        r |= EXITED;
    }
    Ok(r)
}

/// Condition `c` outside the fast subset: 1 or 0.
extern "C" fn h_cond(ctx: *mut PipeCtx, c: u32) -> i64 {
    // SAFETY: called only by generated code, with the context it was given.
    unsafe {
        with_ctx(ctx, |eng, st, pkt, _| {
            let cx = eng.cx(&pkt.phv, &[], &st.ext, &pkt.data, 0);
            let v =
                eval_bool(&eng.conds[c as usize].expr, &cx).map_err(|e| Fault(e.to_string()))?;
            Ok(i64::from(v))
        })
    }
}

/// Direct action call `c` outside the native subset: 1 if it set the exit flag, else 0.
extern "C" fn h_call(ctx: *mut PipeCtx, c: u32) -> i64 {
    // SAFETY: called only by generated code, with the context it was given.
    unsafe {
        with_ctx(ctx, |eng, st, pkt, _| {
            let (a, _) = eng.calls[c as usize];
            eng.run_instrs(&mut st.ext, pkt, &eng.actions[a as usize].instrs, &[])?;
            Ok(i64::from(pkt.regs.exit))
        })
    }
}

/// A native hit on slot `slot` of table `t` whose hits update the entry (direct counter,
/// direct meter with its colour stored into the PHV, ageing stamp): those effects, as the
/// interpreter's `finish_lookup` does them. Returns 0, or -1 with the context's fault.
extern "C" fn h_hit(ctx: *mut PipeCtx, t: u32, slot: i64) -> i64 {
    // SAFETY: called only by generated code, with the context it was given.
    unsafe {
        with_ctx(ctx, |eng, st, pkt, _| {
            let now = st.ext.now_us;
            let e = st.tables[t as usize]
                .store
                .slots
                .get_mut(slot as usize)
                .and_then(Option::as_mut)
                .ok_or_else(|| Fault("native hit on an empty slot".into()))?;
            eng.hit_effects(&eng.tables[t as usize], e, now, pkt);
            Ok(0)
        })
    }
}

/// [`h_find`] for keys of up to 24 bytes, given as three 64-bit words (low first; see
/// `table::PackedKey`): the table's `tern-match` engine on the key bytes.
extern "C" fn h_find_wide(ctx: *mut PipeCtx, t: u32, lo: u64, hi: u64, x: u64) -> i64 {
    // SAFETY: as in `h_find`.
    let r = catch_unwind(|| unsafe {
        let c = &*ctx;
        let eng = &*c.eng;
        let ts = &*c.tables.add(t as usize);
        let spec = &eng.tables[t as usize].spec;
        let n = (spec.total as usize).min(24);
        let mut b = [0u8; 24];
        b[..8].copy_from_slice(&x.to_be_bytes());
        b[8..16].copy_from_slice(&hi.to_be_bytes());
        b[16..].copy_from_slice(&lo.to_be_bytes());
        ts.store.lookup(spec, &b[24 - n..]).map_or(MISS, i64::from)
    });
    r.unwrap_or_else(|_| {
        // SAFETY: as above; the context outlives the call.
        unsafe { (*ctx).fault = Some(Fault("internal error in a table lookup".into())) };
        FIND_FAULT
    })
}

/// `count` on cell `idx` of (indirect) counter array `c`: one packet and the packet's
/// ingress length in bytes; out of range: nothing. Returns 0.
extern "C" fn h_count(ctx: *mut PipeCtx, c: u32, idx: i64) -> i64 {
    // SAFETY: called only by generated code with the context `Pipes::run` gave it: the state
    // and the packet are alive and no other reference to them is in use while the helper
    // runs; the packet is only read.
    let (st, pkt) = unsafe { (&mut *(*ctx).st, &*(*ctx).pkt) };
    let Some(cells) = st.ext.counters.get_mut(c as usize) else {
        return 0;
    };
    if idx >= 0 {
        if let Some(cv) = cells.get_mut(idx as usize) {
            cv.packets += 1;
            cv.bytes += u64::from(pkt.ingress_len);
        }
    }
    0
}

/// `clone3` / `clone_ingress_pkt_to_egress` (and the egress ones): the packet's clone
/// request, as the interpreter records it (session's low 15 bits, field list). Returns 0.
extern "C" fn h_clone(ctx: *mut PipeCtx, session: u64, field_list: i64) -> i64 {
    // SAFETY: as in `h_count`; the generated code holds pointers into the PHV only, which
    // this does not touch.
    let pkt = unsafe { &mut *(*ctx).pkt };
    pkt.regs.clone = Some(((session & 0x7fff) as u32, field_list));
    // SAFETY: as above; the context is live for the call.
    unsafe { (*ctx).touched = 1 };
    0
}

/// `modify_field_rng_uniform` between `lo` and `hi` (their low 64 bits, as the interpreter
/// takes them): 1 with the value in the context's `scratch`, or 0 (no value, no draw) when
/// `lo > hi`. Draws from the switch's generator exactly as the interpreter does.
extern "C" fn h_rng(ctx: *mut PipeCtx, lo: u64, hi: u64) -> i64 {
    // SAFETY: as in `h_count`.
    let c = unsafe { &mut *ctx };
    let st = unsafe { &mut *c.st };
    if lo > hi {
        return 0;
    }
    let span = hi - lo;
    let r = st.ext.next_rand();
    c.scratch = if span == u64::MAX {
        r
    } else {
        lo + r % (span + 1)
    };
    1
}

/// `modify_field_with_hash_based_offset`'s offset: calculation `calc` over the packet
/// (`Engine::compute_calc`, the interpreter's), modulo `size` (at least 1). A panic becomes
/// the context's fault (the pipeline then fails as an interpreted one would) and 0.
extern "C" fn h_hash(ctx: *mut PipeCtx, calc: u32, size: u64) -> u64 {
    // SAFETY: as in `h_count`; the packet is only read.
    let c = unsafe { &mut *ctx };
    let (eng, st, pkt) = unsafe { (&*c.eng, &mut *c.st, &*c.pkt) };
    let r = catch_unwind(AssertUnwindSafe(|| {
        let cc = &eng.calcs[calc as usize];
        eng.compute_calc(&mut st.ext, pkt, cc, calc as usize)
    }));
    match r {
        Ok(h) => h % size.max(1),
        Err(_) => {
            c.touched = 1;
            c.fault = Some(Fault("internal error in a hash calculation".into()));
            0
        }
    }
}

/// An expression of an action body the generated code evaluates to the exact low 64 bits of
/// the interpreter's (unbounded) value: [`FastExpr`]'s operations (wrapping 64-bit `+ - * &
/// | ^ <<` keep the low 64 bits exact), plus `>>` by a constant of an operand known to lie in
/// `[0, 2^64)` (see [`in_u64`]) and `c ? a : b` with a fast condition (both arms are
/// evaluated: they have no side effects and cannot fault).
#[derive(Clone, Debug)]
pub(super) enum NExpr {
    Src(FastSrc),
    Bin(FastBin, Box<NExpr>, Box<NExpr>),
    Shl(Box<NExpr>, u32),
    Shr(Box<NExpr>, u32),
    /// `x % c` of an operand in `[0, 2^64)` by a constant `c > 0`.
    Rem(Box<NExpr>, u64),
    Cond(FastBool, Box<NExpr>, Box<NExpr>),
}

fn const_u64(e: &CExpr) -> Option<u64> {
    match e {
        CExpr::Const(Const { small: Some(v), .. }) if (0..=u64::MAX as i128).contains(v) => {
            Some(*v as u64)
        }
        _ => None,
    }
}

/// Whether the interpreter's value of `e` lies in `[0, 2^64)` (so its low 64 bits are all of
/// it): unsigned fields, parameters and constants in range, `x & c` with such a constant,
/// `x >> n`, `x % c`, `x | y`, `x ^ y` and `c ? a : b` of such operands.
fn in_u64(e: &CExpr) -> bool {
    match e {
        CExpr::Field(_) | CExpr::Local(..) => FastExpr::compile(e).is_some(),
        CExpr::Const(_) => const_u64(e).is_some(),
        CExpr::Op {
            op,
            l: Some(l),
            r: Some(r),
            c,
        } => match op {
            Op::And => c.is_none() && (const_u64(l).is_some() || const_u64(r).is_some()),
            Op::Shr | Op::Mod => c.is_none() && in_u64(l),
            // Both operands in `[0, 2^64)`: so is the result.
            Op::Xor | Op::Or => c.is_none() && in_u64(l) && in_u64(r),
            Op::Ternary => in_u64(l) && in_u64(r),
            _ => false,
        },
        _ => false,
    }
}

/// The native form of `e` (see [`NExpr`]).
pub(super) fn nexpr(e: &CExpr) -> Option<NExpr> {
    if let Some(FastExpr::Src(s)) = FastExpr::compile(e) {
        return Some(NExpr::Src(s));
    }
    let CExpr::Op {
        op,
        l: Some(l),
        r: Some(r),
        c,
    } = e
    else {
        return None;
    };
    let bin = |b| Some(NExpr::Bin(b, Box::new(nexpr(l)?), Box::new(nexpr(r)?)));
    match (op, c) {
        (Op::Ternary, Some(c)) => Some(NExpr::Cond(
            FastBool::compile(c)?,
            Box::new(nexpr(l)?),
            Box::new(nexpr(r)?),
        )),
        (_, Some(_)) => None,
        (Op::Add, None) => bin(FastBin::Add),
        (Op::Sub, None) => bin(FastBin::Sub),
        (Op::Mul, None) => bin(FastBin::Mul),
        (Op::And, None) => bin(FastBin::And),
        (Op::Or, None) => bin(FastBin::Or),
        (Op::Xor, None) => bin(FastBin::Xor),
        (Op::Shl, None) => {
            let n = const_u64(r).filter(|n| *n <= u64::from(u32::MAX))?;
            Some(NExpr::Shl(Box::new(nexpr(l)?), n as u32))
        }
        (Op::Mod, None) if in_u64(l) => {
            let c = const_u64(r).filter(|c| *c > 0)?;
            Some(NExpr::Rem(Box::new(nexpr(l)?), c))
        }
        (Op::Shr, None) if in_u64(l) => {
            let n = const_u64(r).filter(|n| *n <= u64::from(u32::MAX))?;
            Some(NExpr::Shr(Box::new(nexpr(l)?), n as u32))
        }
        _ => None,
    }
}

/// A register or counter index the generated code computes exactly as the interpreter
/// decides it (`to_i64_sat` of the unbounded value, then the bounds check): an expression
/// whose value lies in `[0, 2^64)`; its `u64` read as an `i64` is then out of range exactly
/// when the interpreter's is.
fn index_expr(e: &CExpr) -> Option<NExpr> {
    in_u64(e).then(|| nexpr(e)).flatten()
}

pub(super) fn nexpr_ok(eng: &Engine, e: &NExpr, params: &mut u32) -> bool {
    match e {
        NExpr::Src(s) => src_ok(eng, s, params),
        NExpr::Bin(_, a, b) => nexpr_ok(eng, a, params) && nexpr_ok(eng, b, params),
        NExpr::Shl(a, _) | NExpr::Shr(a, _) | NExpr::Rem(a, _) => nexpr_ok(eng, a, params),
        NExpr::Cond(c, a, b) => {
            bool_ok(eng, c) && nexpr_ok(eng, a, params) && nexpr_ok(eng, b, params)
        }
    }
}

/// A header `add_header` / `remove_header` can change inline: fixed, named by a constant,
/// not in a union (whose members' validity would change too).
fn inline_header(eng: &Engine, e: &CExpr) -> Option<u32> {
    let CExpr::Header(h) = e else { return None };
    let hl = eng.layout.headers.get(*h as usize)?;
    (hl.vl_field.is_none()
        && hl.union.is_none()
        && hl.off + hl.slot_bytes <= eng.layout.total_bytes)
        .then_some(*h)
}

/// A register array the generated code reads and writes in place (see `Gen::reg_cell`): ≤ 64
/// bits.
fn reg_ok(eng: &Engine, a: u32) -> bool {
    eng.prog
        .register_arrays
        .get(a as usize)
        .is_some_and(|r| r.bitwidth <= 64)
}

/// A field the generated code may read or write as a ≤ 64-bit value: a validity byte, or a
/// slot of at most 8 bytes inside the PHV.
fn field_ok(eng: &Engine, f: &FieldLoc) -> bool {
    if f.is_valid_bit {
        return (f.header as usize) < eng.layout.headers.len();
    }
    !f.is_vl && f.nbytes <= 8 && f.width <= 64 && f.off + f.nbytes <= eng.layout.total_bytes
}

/// A destination the generated code stores into as `store_field_u64` does on its ≤ 64-bit
/// path (`$valid$` destinations are ignored, as there).
pub(super) fn dst_ok(eng: &Engine, f: &FieldLoc) -> bool {
    f.is_valid_bit || (field_ok(eng, f) && !f.saturating)
}

fn src_ok(eng: &Engine, s: &FastSrc, params: &mut u32) -> bool {
    match s {
        FastSrc::Field(f) => field_ok(eng, f),
        FastSrc::Local(i) => {
            *params = (*params).max(i + 1);
            (*i as usize) < MAX_PARAMS
        }
        FastSrc::Const(_) => true,
    }
}

fn expr_ok(eng: &Engine, e: &FastExpr, params: &mut u32) -> bool {
    match e {
        FastExpr::Src(s) => src_ok(eng, s, params),
        FastExpr::Bin(_, a, b) => expr_ok(eng, a, params) && expr_ok(eng, b, params),
        FastExpr::Shl(a, _) => expr_ok(eng, a, params),
    }
}

fn val_ok(eng: &Engine, v: &FastVal) -> bool {
    match v {
        FastVal::Field(f) => field_ok(eng, f),
        FastVal::Const(_) => true,
    }
}

/// Whether a fast condition's fields are all within reach.
fn bool_ok(eng: &Engine, b: &FastBool) -> bool {
    match b {
        FastBool::Const(_) => true,
        FastBool::Valid(h) => (*h as usize) < eng.layout.headers.len(),
        FastBool::Cmp(_, l, r) => val_ok(eng, l) && val_ok(eng, r),
        FastBool::NonZero(v) => val_ok(eng, v),
        FastBool::And(a, b) | FastBool::Or(a, b) => bool_ok(eng, a) && bool_ok(eng, b),
        FastBool::Not(a) => bool_ok(eng, a),
    }
}

/// The native plan of action `a`, if every instruction is in the native subset.
fn plan_action(eng: &Engine, a: usize) -> Option<ActPlan> {
    let mut params = 0u32;
    let mut exits = false;
    let instrs = &eng.actions[a].instrs;
    for ins in instrs {
        let ok = match ins {
            // A jump to the end ends the action (what follows is dead): p4c-style `exit;`
            // bodies end with one.
            Instr::Jump(t) if *t >= instrs.len() => break,
            Instr::SetU64 { dst, src, .. } => dst_ok(eng, dst) && src_ok(eng, src, &mut params),
            Instr::SetBin { dst, a, b, .. } => {
                dst_ok(eng, dst) && src_ok(eng, a, &mut params) && src_ok(eng, b, &mut params)
            }
            Instr::SetExpr { dst, expr } => dst_ok(eng, dst) && expr_ok(eng, expr, &mut params),
            Instr::Drop {
                egress_spec,
                mcast_grp,
            } => [egress_spec, mcast_grp]
                .into_iter()
                .flatten()
                .all(|f| dst_ok(eng, f)),
            Instr::Exit => {
                exits = true;
                true
            }
            Instr::NoOp => true,
            Instr::RegisterRead {
                dst: LVal::Field(f),
                array,
                index,
            } => {
                dst_ok(eng, f)
                    && !f.is_valid_bit
                    && reg_ok(eng, *array)
                    && index_expr(index).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            Instr::RegisterWrite {
                array,
                index,
                value,
            } => {
                reg_ok(eng, *array)
                    && index_expr(index).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
                    && nexpr(value).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            Instr::Count { counter, index } => {
                (*counter as usize) < eng.prog.counter_arrays.len()
                    && index_expr(index).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            Instr::AddHeader { header, .. } | Instr::RemoveHeader { header } => {
                inline_header(eng, header).is_some()
            }
            Instr::Clone {
                session,
                field_list,
                ..
            } => {
                matches!(field_list, CExpr::Const(Const { small: Some(_), .. }))
                    && nexpr(session).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            Instr::RngUniform {
                dst: LVal::Field(f),
                lo,
                hi,
            } => {
                dst_ok(eng, f)
                    && !f.is_valid_bit
                    && nexpr(lo).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
                    && nexpr(hi).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            Instr::HashOffset {
                dst: LVal::Field(f),
                base,
                calc,
                size,
            } => {
                dst_ok(eng, f)
                    && !f.is_valid_bit
                    && (*calc as usize) < eng.calcs.len()
                    && nexpr(base).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
                    && nexpr(size).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            Instr::Assign {
                dst: LVal::Field(f),
                src,
            } => {
                dst_ok(eng, f)
                    && !f.is_valid_bit
                    && nexpr(src).is_some_and(|e| nexpr_ok(eng, &e, &mut params))
            }
            _ => false,
        };
        if !ok {
            return None;
        }
    }
    Some(ActPlan { params, exits })
}

/// One part of a packed table key (at most 8 bytes in all), read from the PHV.
#[derive(Clone, Copy, Debug)]
pub enum KeyPart {
    /// A header's validity byte.
    Valid(u32),
    /// A field's slot (zero when its header is invalid).
    Field(FieldLoc),
}

/// The key parts of table `ti` if native code can pack its key and go on without the table
/// helper on a hit: hits need nothing of the entry but the action
/// ([`crate::compile::CTable::plain_hits`]), the key has at most 8 bytes and every part is
/// within reach. Exact tables with an index ([`EntryStore::indexable`]) are then probed
/// inline, the others looked up by [`h_find`].
fn native_key(eng: &Engine, ti: u32) -> Option<Vec<KeyPart>> {
    let t = &eng.tables[ti as usize];
    if t.profile.is_some() || t.spec.fields.is_empty() || t.spec.total > MAX_INDEX_KEY {
        return None;
    }
    // Keys of 9 to 24 bytes: exact and ternary tables only (probed inline as 128- or 192-bit
    // keys).
    if t.spec.total > 8 && !EntryStore::indexable(&t.spec) && !EntryStore::tern_indexable(&t.spec) {
        return None;
    }
    let headers = eng.layout.headers.len();
    t.spec
        .fields
        .iter()
        .zip(&t.srcs)
        .map(|(kf, src)| {
            // Static key masks (p4c's `field & mask` keys) stay with the helper: no program
            // tern compiles has them, so the native form would go untested.
            if kf.static_mask.is_some() {
                return None;
            }
            let h = match src {
                KeySrc::Valid(h) => *h,
                KeySrc::Field(f) => f.header,
            };
            if h as usize >= headers {
                return None;
            }
            match src {
                KeySrc::Field(f) if !f.is_valid_bit => {
                    ((field_ok(eng, f) || wide_field_ok(eng, f)) && f.nbytes == kf.nbytes)
                        .then_some(KeyPart::Field(*f))
                }
                _ => (kf.nbytes == 1).then_some(KeyPart::Valid(h)),
            }
        })
        .collect()
}

/// A field of 9 to 16 bytes the generated code reads as two 64-bit halves (wide exact keys).
fn wide_field_ok(eng: &Engine, f: &FieldLoc) -> bool {
    !f.is_valid_bit
        && !f.is_vl
        && (9..=16).contains(&f.nbytes)
        && f.width <= 128
        && f.off + f.nbytes <= eng.layout.total_bytes
}

/// A keyless table's constant default: the action, its plan, its parameters as `u64`s.
pub type ConstDefault = (u32, ActPlan, Box<[u64]>);

/// Table `t`'s constant default action with its parameters, when the table is keyless (every
/// apply is a miss that runs it), its default entry cannot be changed by the control plane
/// (`action_entry_const`: `mt_set_default_action` and resets refuse or restore it) and the
/// action is native with the parameters its body reads: what p4c and tern-p4 emit for
/// statements outside actions (`tbl_act_*`).
fn const_default(eng: &Engine, natives: &[(u32, ActPlan)], t: usize) -> Option<ConstDefault> {
    let ct = &eng.tables[t];
    if ct.table_type != TableType::Simple || !ct.spec.fields.is_empty() {
        return None;
    }
    let d = ct.default_entry.as_ref().filter(|d| d.action_entry_const)?;
    let (_, p) = natives.iter().find(|(a, _)| *a == d.action)?;
    let widths = &eng.actions.get(d.action as usize)?.param_widths;
    if d.action_data.len() != widths.len() || widths.len() < p.params as usize {
        return None;
    }
    // As the switch stores the default entry's data (`Instance::reset_default`), read back
    // as the table helper hands parameters over.
    let params = d
        .action_data
        .iter()
        .zip(widths)
        .map(|(v, w)| be_read(&v.to_bytes(*w)))
        .collect();
    Some((d.action, *p, params))
}

/// How native code looks a table up (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TablePath {
    /// Keyless with a constant native default action: the action inlined, no lookup.
    ConstDefault,
    /// Key packed natively, exact index probed inline, native actions inlined.
    Inline,
    /// Key packed natively, LPM index ([`crate::lpm::LpmIndex`]) read inline, native
    /// actions inlined.
    Lpm,
    /// Key packed natively, ternary tuples ([`crate::table::TupleView`]) probed inline (up to
    /// [`MAX_NATIVE_TUPLES`]; with more, at run time, [`h_find`]), native actions inlined.
    Tuples,
    /// Key packed natively, slot found by [`h_find`], native actions inlined.
    Find,
    /// Everything through [`h_table`], for the reason given.
    Helper(&'static str),
}

/// The path table `ti` takes in generated code: the same decisions as the generator's.
pub fn table_path(eng: &Engine, pipes: &Pipes, ti: u32) -> TablePath {
    let t = &eng.tables[ti as usize];
    if pipes
        .const_defaults
        .get(ti as usize)
        .is_some_and(Option::is_some)
    {
        return TablePath::ConstDefault;
    }
    let natives = pipes.by_table.get(ti as usize).map_or(0, Vec::len);
    if t.profile.is_some() {
        return TablePath::Helper("action profile");
    }
    if t.spec.fields.is_empty() {
        return TablePath::Helper("keyless");
    }
    if t.spec.total > MAX_INDEX_KEY {
        return TablePath::Helper("key wider than 24 bytes");
    }
    if t.spec.total > 8 && !EntryStore::indexable(&t.spec) && !EntryStore::tern_indexable(&t.spec) {
        return TablePath::Helper("key wider than 8 bytes, not exact or ternary");
    }
    if native_key(eng, ti).is_none() {
        return TablePath::Helper("static key mask or key field out of reach");
    }
    if natives == 0 {
        return TablePath::Helper("no action in the native subset");
    }
    if EntryStore::indexable(&t.spec) {
        TablePath::Inline
    } else if EntryStore::lpm_indexable(&t.spec) {
        TablePath::Lpm
    } else if EntryStore::tern_indexable(&t.spec) {
        TablePath::Tuples
    } else {
        TablePath::Find
    }
}

/// The pipeline function's context pointer and variables, for code generated outside its
/// body.
struct Vars {
    ctx: ir::Value,
    phv: Variable,
    valid: Variable,
    tabs: Variable,
    pbase: Variable,
    /// Signature of the `(ctx, table, i64) -> i64` helpers (`h_find`, `h_resolve`).
    find_sig: ir::SigRef,
}

/// Where a native lookup leaves: the next node after a native action, `resolve(slot)`
/// (the table helper, told the slot or -1 for a miss) for anything else, `ret(code)` after an
/// action with `exit` or a fault.
struct Exits {
    /// For each native action: the block of the node after a hit that ran it.
    hit_next: Vec<(u32, ir::Block)>,
    resolve: ir::Block,
    ret: ir::Block,
}

/// The nodes a node can go to next.
fn successors(eng: &Engine, n: GNode) -> Vec<Option<GNode>> {
    match n {
        GNode::Table(t) => {
            let t = &eng.tables[t as usize];
            let mut v: Vec<_> = t.per_action.iter().map(|(_, n)| *n).collect();
            if let Some((h, m)) = t.hit_miss {
                v.extend([h, m]);
            }
            v.push(t.base_default_next);
            v
        }
        GNode::Cond(c) => {
            let c = &eng.conds[c as usize];
            vec![c.t, c.f]
        }
        GNode::Call(c) => vec![eng.calls[c as usize].1],
    }
}

/// Check that the graph from `init` has valid node indices and no cycle (the generated code
/// has no step bound, unlike the interpreter's walk).
pub fn check_graph(eng: &Engine, init: GNode) -> Result<(), String> {
    let exists = |n: GNode| match n {
        GNode::Table(t) => (t as usize) < eng.tables.len(),
        GNode::Cond(c) => (c as usize) < eng.conds.len(),
        GNode::Call(c) => (c as usize) < eng.calls.len(),
    };
    // Iterative depth-first search: 1 = on the current path, 2 = done.
    let mut state: HashMap<GNode, u8> = HashMap::new();
    let mut stack: Vec<(GNode, Vec<Option<GNode>>)> = Vec::new();
    if !exists(init) {
        return Err(format!("unknown node {init:?}"));
    }
    state.insert(init, 1);
    stack.push((init, successors(eng, init)));
    while let Some((n, succ)) = stack.last_mut() {
        let n = *n;
        match succ.pop() {
            None => {
                state.insert(n, 2);
                stack.pop();
            }
            Some(None) => {}
            Some(Some(m)) => match state.get(&m) {
                Some(1) => return Err(format!("control graph has a cycle through {m:?}")),
                Some(_) => {}
                None => {
                    if !exists(m) {
                        return Err(format!("unknown node {m:?}"));
                    }
                    state.insert(m, 1);
                    let s = successors(eng, m);
                    stack.push((m, s));
                }
            },
        }
    }
    Ok(())
}

/// Whether field `s`'s slot can be copied byte for byte into field `d`'s: both plain fields
/// of the same whole-byte width (no bits above the width to clear), at most 8 bytes.
fn same_bytes(d: &FieldLoc, s: &FieldLoc) -> bool {
    let plain =
        |f: &FieldLoc| !f.is_valid_bit && !f.is_vl && f.nbytes <= 8 && f.width == 8 * f.nbytes;
    plain(d) && plain(s) && d.nbytes == s.nbytes
}

/// The PHV fields action `a` may write (`None`: anything, validity included): the
/// destinations of field assignments, drops and register reads, when it keeps validity
/// ([`keeps_validity`]) and has only instructions whose writes are known.
fn action_writes(eng: &Engine, a: u32) -> Option<Vec<FieldLoc>> {
    if !keeps_validity(eng, a) {
        return None;
    }
    let mut out = Vec::new();
    for i in &eng.actions.get(a as usize)?.instrs {
        match i {
            Instr::SetU64 { dst, .. } | Instr::SetBin { dst, .. } | Instr::SetExpr { dst, .. } => {
                out.push(*dst)
            }
            Instr::Assign {
                dst: LVal::Field(f),
                ..
            }
            | Instr::RegisterRead {
                dst: LVal::Field(f),
                ..
            } => out.push(*f),
            Instr::Drop {
                egress_spec,
                mcast_grp,
            } => out.extend(egress_spec.iter().chain(mcast_grp.iter()).copied()),
            Instr::Jump(_)
            | Instr::JumpIfZero { .. }
            | Instr::Exit
            | Instr::NoOp
            | Instr::Count { .. }
            | Instr::RegisterWrite { .. } => {}
            _ => return None,
        }
    }
    Some(out)
}

/// The nodes of the (acyclic, [`check_graph`]) graph from `init` in reverse post-order:
/// every node after all the nodes that lead to it.
fn reverse_post_order(eng: &Engine, init: GNode) -> Vec<GNode> {
    let mut order = Vec::new();
    let mut seen: HashMap<GNode, ()> = HashMap::new();
    let mut stack: Vec<(GNode, Vec<Option<GNode>>)> = vec![(init, successors(eng, init))];
    seen.insert(init, ());
    while let Some((n, succ)) = stack.last_mut() {
        match succ.pop() {
            None => {
                order.push(*n);
                stack.pop();
            }
            Some(Some(m)) if !seen.contains_key(&m) => {
                seen.insert(m, ());
                let s = successors(eng, m);
                stack.push((m, s));
            }
            Some(_) => {}
        }
    }
    order.reverse();
    order
}

/// A forward data-flow meet: the set reaching node `m` (none: the graph's end) is the
/// intersection of the sets of every path to it; the first path sets it.
fn meet<T: PartialEq + Clone>(sets: &mut HashMap<GNode, Vec<T>>, m: Option<GNode>, set: &[T]) {
    let Some(m) = m else { return };
    match sets.get_mut(&m) {
        Some(old) => old.retain(|x| set.contains(x)),
        None => {
            sets.insert(m, set.to_vec());
        }
    }
}

/// For each node of the graph from `init`, the table key fields whose value (as the key
/// reads it: 0 when the header is invalid) a table before it already loaded on every path to
/// it, unchanged since: a table's lookup loads its fields ([`key_loads`]); a table or call
/// whose actions may write an overlapping field takes it out (anything unknown, a direct
/// meter or counter, or a validity change takes all out); sets meet by intersection. The
/// generated code keeps those values in variables and reads the PHV once.
fn fresh_keys(eng: &Engine, pipes: &Pipes, init: GNode) -> HashMap<GNode, Vec<FieldLoc>> {
    let overlaps =
        |a: &FieldLoc, b: &FieldLoc| a.off < b.off + b.nbytes && b.off < a.off + a.nbytes;
    let after = |set: &[FieldLoc], acts: &mut dyn Iterator<Item = u32>| -> Vec<FieldLoc> {
        let mut out = set.to_vec();
        for a in acts {
            match action_writes(eng, a) {
                None => return Vec::new(),
                Some(w) => out.retain(|f| !w.iter().any(|d| overlaps(d, f))),
            }
        }
        out
    };
    let order = reverse_post_order(eng, init);
    let mut fresh: HashMap<GNode, Vec<FieldLoc>> = HashMap::new();
    fresh.insert(init, Vec::new());
    for n in order {
        let here = fresh.get(&n).cloned().unwrap_or_default();
        match n {
            GNode::Cond(c) => {
                let cond = &eng.conds[c as usize];
                meet(&mut fresh, cond.t, &here);
                meet(&mut fresh, cond.f, &here);
            }
            GNode::Call(c) => {
                let (a, next) = eng.calls[c as usize];
                let out = after(&here, &mut std::iter::once(a));
                meet(&mut fresh, next, &out);
            }
            GNode::Table(t) => {
                let ct = &eng.tables[t as usize];
                let mut with = here.clone();
                for f in key_loads(eng, pipes, t) {
                    if !with.contains(&f) {
                        with.push(f);
                    }
                }
                let out = if ct.plain_hits() {
                    let mut acts = ct
                        .actions
                        .iter()
                        .copied()
                        .chain(ct.default_entry.as_ref().map(|d| d.action));
                    after(&with, &mut acts)
                } else {
                    Vec::new()
                };
                for m in successors(eng, n) {
                    meet(&mut fresh, m, &out);
                }
            }
        }
    }
    fresh
}

/// The key fields (of at most 8 bytes) table `t`'s generated lookup loads at its start: those
/// of [`native_key`] on the paths that build the key in generated code.
fn key_loads(eng: &Engine, pipes: &Pipes, t: u32) -> Vec<FieldLoc> {
    if pipes.const_defaults[t as usize].is_some() {
        return Vec::new();
    }
    let path = table_path(eng, pipes, t);
    if !matches!(
        path,
        TablePath::Inline | TablePath::Lpm | TablePath::Tuples | TablePath::Find
    ) {
        return Vec::new();
    }
    native_key(eng, t)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|p| match p {
            KeyPart::Field(f) if f.nbytes <= 8 => Some(f),
            _ => None,
        })
        .collect()
}

/// Whether action `a` leaves every header's validity as it is (then a header known valid
/// before it is known valid after it): field assignments, jumps, drops, counters and
/// registers; anything else (header assignments, stacks, add/remove, writes to a validity
/// field, unknown actions) may change one.
fn keeps_validity(eng: &Engine, a: u32) -> bool {
    let field = |f: &FieldLoc| !f.is_valid_bit;
    let lval = |l: &LVal| matches!(l, LVal::Field(f) if field(f));
    eng.actions.get(a as usize).is_some_and(|act| {
        act.instrs.iter().all(|i| match i {
            Instr::SetU64 { dst, .. } | Instr::SetBin { dst, .. } | Instr::SetExpr { dst, .. } => {
                field(dst)
            }
            Instr::Assign { dst, .. } | Instr::RegisterRead { dst, .. } => lval(dst),
            Instr::Jump(_)
            | Instr::JumpIfZero { .. }
            | Instr::Exit
            | Instr::NoOp
            | Instr::Drop { .. }
            | Instr::Count { .. }
            | Instr::RegisterWrite { .. } => true,
            _ => false,
        })
    })
}

/// The headers a condition's truth proves valid: the `isValid()` terms of its top-level
/// conjunction.
fn proves_valid(b: &FastBool, out: &mut Vec<u32>) {
    match b {
        FastBool::Valid(h) => out.push(*h),
        FastBool::And(x, y) => {
            proves_valid(x, out);
            proves_valid(y, out);
        }
        _ => {}
    }
}

/// For each node of the (acyclic, [`check_graph`]) graph from `init`, the headers valid on
/// every path to it: proved by a condition's true branch, kept through nodes whose actions
/// (all of a table's, or a call's) keep validity ([`keeps_validity`]), intersected where
/// paths meet. A table key field of such a header needs no validity test.
fn known_valid(eng: &Engine, init: GNode) -> HashMap<GNode, Vec<u32>> {
    let order = reverse_post_order(eng, init);
    let mut known: HashMap<GNode, Vec<u32>> = HashMap::new();
    known.insert(init, Vec::new());
    for n in order {
        let here = known.get(&n).cloned().unwrap_or_default();
        match n {
            GNode::Cond(c) => {
                let cond = &eng.conds[c as usize];
                let mut t = here.clone();
                if let Some(f) = &cond.fast {
                    proves_valid(f, &mut t);
                }
                meet(&mut known, cond.t, &t);
                meet(&mut known, cond.f, &here);
            }
            GNode::Call(c) => {
                let (a, next) = eng.calls[c as usize];
                let out = if keeps_validity(eng, a) {
                    here
                } else {
                    Vec::new()
                };
                meet(&mut known, next, &out);
            }
            GNode::Table(t) => {
                let ct = &eng.tables[t as usize];
                let keeps = ct.actions.iter().all(|a| keeps_validity(eng, *a))
                    && ct
                        .default_entry
                        .as_ref()
                        .is_none_or(|d| keeps_validity(eng, d.action));
                let out = if keeps { here } else { Vec::new() };
                for m in successors(eng, n) {
                    meet(&mut known, m, &out);
                }
            }
        }
    }
    known
}

/// The blocks of a pipeline's nodes, made on first use, and the nodes still to generate.
struct Nodes {
    blocks: HashMap<GNode, ir::Block>,
    todo: Vec<GNode>,
    /// Where `None` (the end of the pipeline) goes.
    done: ir::Block,
}

impl Nodes {
    fn block(&mut self, g: &mut Gen<'_, '_>, n: Option<GNode>) -> ir::Block {
        match n {
            None => self.done,
            Some(n) => *self.blocks.entry(n).or_insert_with(|| {
                self.todo.push(n);
                g.b.create_block()
            }),
        }
    }
}

/// `offset_of` as a Cranelift memory offset.
fn at(off: usize) -> i32 {
    off as i32
}

impl Gen<'_, '_> {
    /// The pipeline from `init`: `(ctx) -> DONE | FAULT | EXIT`.
    pub(super) fn pipeline(mut self, init: GNode, pipes: &Pipes) {
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let ctx = self.b.block_params(entry)[0];
        let code = self.pipeline_body(init, pipes, ctx, None);
        self.b.ins().return_(&[code]);
        self.b.seal_all_blocks();
        self.b.finalize();
    }

    /// The pipeline from `init` in the current function, from the current block, on the
    /// context `ctx`: returns its code (`DONE | FAULT | EXIT`) with the builder where it ended
    /// (the lane function inlines it; [`Gen::pipeline`] wraps it as a function). `ptrs`: the
    /// caller's variables holding the context's PHV and validity pointers (kept up to date
    /// here after every helper call), else they are loaded here.
    pub(super) fn pipeline_body(
        &mut self,
        init: GNode,
        pipes: &Pipes,
        ctx: ir::Value,
        ptrs: Option<(Variable, Variable)>,
    ) -> ir::Value {
        let (eng, plans, by_table) = (self.eng, &pipes.actions, &pipes.by_table);
        let ptr = types::I64;
        let (phv, valid): (Variable, Variable) =
            ptrs.unwrap_or_else(|| (self.b.declare_var(ptr), self.b.declare_var(ptr)));
        let tabs: Variable = self.b.declare_var(ptr);
        // Where the running action's parameters are: the context's array (table helper) or
        // the hit's compact record (inline lookup).
        let pbase: Variable = self.b.declare_var(ptr);
        let ret = self.b.create_block();
        self.b.append_block_param(ret, types::I64);

        let mut sig = self.b.func.signature.clone();
        sig.params = vec![AbiParam::new(ptr), AbiParam::new(types::I32)];
        sig.returns = vec![AbiParam::new(types::I64)];
        let helper_sig = self.b.import_signature(sig.clone());
        // `(ctx, table, i64) -> i64`: `h_resolve` (slot) and `h_find` (key).
        sig.params.push(AbiParam::new(types::I64));
        let find_sig = self.b.import_signature(sig);

        let reload = |g: &mut Self| {
            let p =
                g.b.ins()
                    .load(ptr, mem(), ctx, at(offset_of!(PipeCtx, phv)));
            let v =
                g.b.ins()
                    .load(ptr, mem(), ctx, at(offset_of!(PipeCtx, valid)));
            let t =
                g.b.ins()
                    .load(ptr, mem(), ctx, at(offset_of!(PipeCtx, tables)));
            g.b.def_var(phv, p);
            g.b.def_var(valid, v);
            g.b.def_var(tabs, t);
        };
        if ptrs.is_some() {
            let t = self
                .b
                .ins()
                .load(ptr, mem(), ctx, at(offset_of!(PipeCtx, tables)));
            self.b.def_var(tabs, t);
        } else {
            reload(self);
        }
        let p = self
            .b
            .ins()
            .iadd_imm(ctx, offset_of!(PipeCtx, params) as i64);
        self.b.def_var(pbase, p);

        // Headers whose validity a table's key need not test.
        let valid_known = known_valid(eng, init);
        // Key fields already loaded by an earlier table, and the variables holding them.
        let fresh = fresh_keys(eng, pipes, init);
        let mut key_vars: Vec<(FieldLoc, Variable)> = Vec::new();
        // Blocks of nodes, made on first use; `None` (end of pipeline) returns DONE.
        let done = self.b.create_block();
        let mut nodes = Nodes {
            blocks: HashMap::new(),
            todo: Vec::new(),
            done,
        };
        let first = nodes.block(self, Some(init));
        self.b.ins().jump(first, &[]);

        // Call a helper at `addr` with `args`, reload the PHV pointers, and leave on a fault.
        let call_with = |g: &mut Self, sig: ir::SigRef, addr: usize, args: &[ir::Value]| {
            let callee = g.b.ins().iconst(ptr, addr as i64);
            let inst = g.b.ins().call_indirect(sig, callee, args);
            let r = g.b.inst_results(inst)[0];
            reload(g);
            let failed = g.b.ins().icmp_imm(IntCC::SignedLessThan, r, 0);
            let ok = g.b.create_block();
            let code = g.b.ins().iconst(types::I64, FAULT);
            g.b.ins().brif(failed, ret, &[code.into()], ok, &[]);
            g.b.switch_to_block(ok);
            r
        };
        // `f(ctx, i)`: the table, condition and call helpers.
        let call = |g: &mut Self, f: extern "C" fn(*mut PipeCtx, u32) -> i64, i: u32| {
            let idx = g.b.ins().iconst(types::I32, i64::from(i));
            call_with(g, helper_sig, f as usize, &[ctx, idx])
        };
        // `h_resolve(ctx, table, slot)`.
        let call_resolve = |g: &mut Self, ti: u32, slot: ir::Value| {
            let idx = g.b.ins().iconst(types::I32, i64::from(ti));
            let addr = h_resolve as *const () as usize;
            call_with(g, find_sig, addr, &[ctx, idx, slot])
        };
        let leave = |g: &mut Self, code: i64| {
            let c = g.b.ins().iconst(types::I64, code);
            g.b.ins().jump(ret, &[c.into()]);
        };

        while let Some(n) = nodes.todo.pop() {
            let blk = nodes.blocks[&n];
            self.b.switch_to_block(blk);
            match n {
                GNode::Cond(c) => {
                    let cond = &eng.conds[c as usize];
                    let v = match cond.fast.as_ref().filter(|f| bool_ok(eng, f)) {
                        Some(f) => self.fast_bool(phv, valid, f),
                        None => call(self, h_cond, c),
                    };
                    let (t, f) = (nodes.block(self, cond.t), nodes.block(self, cond.f));
                    self.b.ins().brif(v, t, &[], f, &[]);
                }
                GNode::Call(c) => {
                    let (a, next) = eng.calls[c as usize];
                    let next = nodes.block(self, next);
                    match plans[a as usize].filter(|p| p.params == 0) {
                        Some(p) => {
                            self.action_body(ctx, pbase, phv, valid, a);
                            if p.exits {
                                leave(self, EXIT);
                            } else {
                                self.b.ins().jump(next, &[]);
                            }
                        }
                        None => {
                            let r = call(self, h_call, c);
                            let exited = self.b.create_block();
                            self.b.ins().brif(r, exited, &[], next, &[]);
                            self.b.switch_to_block(exited);
                            leave(self, DONE);
                        }
                    }
                }
                GNode::Table(ti) if pipes.const_defaults[ti as usize].is_some() => {
                    // A keyless table with a constant native default action: run it inline
                    // with its parameters from `const_defaults`, then the miss's next node.
                    let t = &eng.tables[ti as usize];
                    let Some((a, p, params)) = &pipes.const_defaults[ti as usize] else {
                        unreachable!("checked by the guard")
                    };
                    let pp = self.b.ins().iconst(ptr, params.as_ptr() as i64);
                    self.b.def_var(pbase, pp);
                    self.action_body(ctx, pbase, phv, valid, *a);
                    if p.exits {
                        leave(self, EXIT);
                    } else {
                        let next = nodes.block(self, t.next(false, Some(*a)));
                        self.b.ins().jump(next, &[]);
                    }
                }
                GNode::Table(ti) => {
                    let t = &eng.tables[ti as usize];
                    // Where the lookup's outcome goes: (action index or NO_ACTION, HIT flag).
                    let next = self.b.create_block();
                    self.b.append_block_param(next, types::I64);
                    self.b.append_block_param(next, types::I64);
                    let natives = &by_table[ti as usize];
                    // `slow`: the table helper does everything; `resolve(slot)`: native code
                    // found the slot (or -1); both give the helper's answer to `post(r)`.
                    let (slow, resolve, post) = (
                        self.b.create_block(),
                        self.b.create_block(),
                        self.b.create_block(),
                    );
                    self.b.append_block_param(resolve, types::I64);
                    self.b.append_block_param(post, types::I64);
                    // The decision `NativeSummary` reports ([`table_path`]).
                    let path = table_path(eng, pipes, ti);
                    match native_key(eng, ti).filter(|_| {
                        matches!(
                            path,
                            TablePath::Inline
                                | TablePath::Lpm
                                | TablePath::Tuples
                                | TablePath::Find
                        )
                    }) {
                        Some(parts) => {
                            let vars = Vars {
                                ctx,
                                phv,
                                valid,
                                tabs,
                                pbase,
                                find_sig,
                            };
                            // After a hit that ran action `a`: `CTable::next(true, Some(a))`.
                            let hit_next = natives
                                .iter()
                                .map(|(a, _)| {
                                    let n = match t.hit_miss {
                                        Some((h, _)) => h,
                                        None => t.next_after(*a),
                                    };
                                    (*a, nodes.block(self, n))
                                })
                                .collect();
                            let exits = Exits {
                                hit_next,
                                resolve,
                                ret,
                            };
                            let known = valid_known.get(&n).map_or(&[][..], Vec::as_slice);
                            let fresh = fresh.get(&n).map_or(&[][..], Vec::as_slice);
                            self.native_lookup(
                                &vars,
                                ti,
                                path,
                                (&parts, known),
                                (fresh, &mut key_vars),
                                natives,
                                &exits,
                            );
                        }
                        None => {
                            self.b.ins().jump(slow, &[]);
                        }
                    }
                    self.b.switch_to_block(slow);
                    let r = call(self, h_table, ti);
                    self.b.ins().jump(post, &[r.into()]);
                    self.b.switch_to_block(resolve);
                    let slot = self.b.block_params(resolve)[0];
                    let r = call_resolve(self, ti, slot);
                    self.b.ins().jump(post, &[r.into()]);
                    self.b.switch_to_block(post);
                    let r = self.b.block_params(post)[0];
                    // An interpreted action that set the exit flag ends the pipeline.
                    let exited = self.b.ins().band_imm(r, EXITED);
                    let (stop, go) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(exited, stop, &[], go, &[]);
                    self.b.switch_to_block(stop);
                    leave(self, DONE);
                    self.b.switch_to_block(go);
                    let act = self.b.ins().band_imm(r, NO_ACTION);
                    let hit = self.b.ins().band_imm(r, HIT);
                    let out = [act.into(), hit.into()];
                    // Not run yet: one of the table's native actions, parameters in the context.
                    if !natives.is_empty() {
                        let ran = self.b.ins().band_imm(r, RAN);
                        let pick = self.b.create_block();
                        self.b.ins().brif(ran, next, &out, pick, &[]);
                        self.b.switch_to_block(pick);
                        let p = self
                            .b
                            .ins()
                            .iadd_imm(ctx, offset_of!(PipeCtx, params) as i64);
                        self.b.def_var(pbase, p);
                        let mut sw = Switch::new();
                        let bodies: Vec<(u32, ir::Block)> = natives
                            .iter()
                            .map(|(a, _)| (*a, self.b.create_block()))
                            .collect();
                        for (a, blk) in &bodies {
                            sw.set_entry(u128::from(*a), *blk);
                        }
                        let other = self.b.create_block();
                        sw.emit(&mut self.b, act, other);
                        self.b.switch_to_block(other);
                        self.b.ins().jump(next, &out);
                        for (a, blk) in bodies {
                            self.b.switch_to_block(blk);
                            self.action_body(ctx, pbase, phv, valid, a);
                            if plans[a as usize].is_some_and(|p| p.exits) {
                                leave(self, EXIT);
                            } else {
                                self.b.ins().jump(next, &out);
                            }
                        }
                    } else {
                        self.b.ins().jump(next, &out);
                    }
                    // The next node: by hit/miss, or by the action that ran.
                    self.b.switch_to_block(next);
                    let act = self.b.block_params(next)[0];
                    let hit = self.b.block_params(next)[1];
                    match t.hit_miss {
                        Some((h, m)) => {
                            let (h, m) = (nodes.block(self, h), nodes.block(self, m));
                            self.b.ins().brif(hit, h, &[], m, &[]);
                        }
                        None => {
                            let mut sw = Switch::new();
                            let mut seen = Vec::new();
                            for (a, n) in &t.per_action {
                                if !seen.contains(a) {
                                    seen.push(*a);
                                    let b = nodes.block(self, *n);
                                    sw.set_entry(u128::from(*a), b);
                                }
                            }
                            let none = nodes.block(self, t.base_default_next);
                            if !seen.contains(&(NO_ACTION as u32)) {
                                sw.set_entry(NO_ACTION as u128, none);
                            }
                            sw.emit(&mut self.b, act, done);
                        }
                    }
                }
            }
        }

        self.b.switch_to_block(done);
        leave(self, DONE);
        self.b.switch_to_block(ret);
        self.b.block_params(ret)[0]
    }

    /// Native lookup of table `ti` (see [`native_key`]): the key packed from the PHV as
    /// `build_key` packs it; for an indexed exact table a probe of the store's index
    /// ([`crate::table::ExactIndex`], through its [`IndexView`]), otherwise [`h_find`]; then
    /// the hit's [`HotRec`] and one of the table's native actions inlined with its parameters
    /// read from the record. A miss, a slot without a record, another action or an entry with
    /// fewer parameters than the body reads goes to `resolve` with the slot (or -1). The key
    /// is its parts and the headers known valid there ([`known_valid`]: no validity test).
    #[allow(clippy::too_many_arguments)]
    fn native_lookup(
        &mut self,
        v: &Vars,
        ti: u32,
        path: TablePath,
        (parts, known): (&[KeyPart], &[u32]),
        (fresh, key_vars): (&[FieldLoc], &mut Vec<(FieldLoc, Variable)>),
        natives: &[(u32, ActPlan)],
        x: &Exits,
    ) {
        let i64t = types::I64;
        // The key: parts concatenated big-endian, as `build_key` lays them out, as up to three
        // 64-bit words (low first: `table::PackedKey`'s low 64 bits, the next 64 for keys of
        // more than 8 bytes, bits 128 to 191 for keys of more than 16). Each part's bit
        // position is known here, so it is shifted straight into its word (or the two words
        // it straddles); a field of 9 to 16 bytes is two parts (its low 8 bytes, the rest).
        let total = self.eng.tables[ti as usize].spec.total;
        let nwords = total.div_ceil(8).max(1) as usize;
        let mut words: Vec<Option<ir::Value>> = vec![None; nwords];
        // Bit position (from the key's least significant bit) of the part's low end.
        let mut pos = 8 * total;
        let mut put = |g: &mut Self, val: ir::Value, nbytes: u32, lo: u32| {
            let (w, sh) = ((lo / 64) as usize, lo % 64);
            let mut add = |g: &mut Self, w: usize, x: ir::Value| {
                words[w] = Some(match words[w] {
                    Some(o) => g.b.ins().bor(o, x),
                    None => x,
                });
            };
            let x = if sh > 0 {
                g.b.ins().ishl_imm(val, i64::from(sh))
            } else {
                val
            };
            add(g, w, x);
            if sh > 0 && sh + 8 * nbytes > 64 {
                let y = g.b.ins().ushr_imm(val, i64::from(64 - sh));
                add(g, w + 1, y);
            }
        };
        for part in parts {
            let vb = self.b.use_var(v.valid);
            match part {
                KeyPart::Valid(h) => {
                    let b = if known.contains(h) {
                        self.b.ins().iconst(i64t, 1)
                    } else {
                        let b = self.b.ins().load(types::I8, mem(), vb, *h as i32);
                        self.b.ins().uextend(i64t, b)
                    };
                    pos -= 8;
                    put(self, b, 1, pos);
                }
                KeyPart::Field(f) if f.nbytes > 8 => {
                    let p = self.b.use_var(v.phv);
                    let mut hi = self.load_be(p, f.off, f.nbytes - 8);
                    let mut lo = self.load_be(p, f.off + f.nbytes - 8, 8);
                    if !known.contains(&f.header) {
                        let ok = self.b.ins().load(types::I8, mem(), vb, f.header as i32);
                        let zero = self.b.ins().iconst(i64t, 0);
                        hi = self.b.ins().select(ok, hi, zero);
                        lo = self.b.ins().select(ok, lo, zero);
                    }
                    pos -= 8 * f.nbytes;
                    put(self, lo, 8, pos);
                    put(self, hi, f.nbytes - 8, pos + 64);
                }
                KeyPart::Field(f) => {
                    // The variable of this field's key value ([`fresh_keys`]).
                    let var = match key_vars.iter().find(|(g, _)| g == f) {
                        Some((_, var)) => *var,
                        None => {
                            let var = self.b.declare_var(i64t);
                            key_vars.push((*f, var));
                            var
                        }
                    };
                    let x = if fresh.contains(f) {
                        self.b.use_var(var)
                    } else {
                        let mut x = self.read_field(v.phv, v.valid, f);
                        // A field of an invalid header is 0 in the key.
                        if !known.contains(&f.header) {
                            let ok = self.b.ins().load(types::I8, mem(), vb, f.header as i32);
                            let zero = self.b.ins().iconst(i64t, 0);
                            x = self.b.ins().select(ok, x, zero);
                        }
                        self.b.def_var(var, x);
                        x
                    };
                    pos -= 8 * f.nbytes;
                    put(self, x, f.nbytes, pos);
                }
            }
        }
        debug_assert_eq!(pos, 0, "key parts cover the key");
        let word = |g: &mut Self, i: usize| {
            words
                .get(i)
                .map(|w| w.unwrap_or_else(|| g.b.ins().iconst(i64t, 0)))
        };
        let key = word(self, 0).expect("a native key has parts");
        let key_hi = word(self, 1);
        let key_x = word(self, 2);
        // The view: this table's `TableState::store.view`.
        let base = std::mem::size_of::<TableState>() * ti as usize
            + offset_of!(TableState, store)
            + EntryStore::VIEW_OFFSET;
        let tb = self.b.use_var(v.tabs);
        let field = |g: &mut Self, off: usize| g.b.ins().load(i64t, mem(), tb, at(base + off));
        let hot = field(self, offset_of!(IndexView, hot));
        let (found, miss) = (self.b.create_block(), self.b.create_block());
        self.b.append_block_param(found, i64t);
        if path == TablePath::Lpm {
            // DIR-16-8-8 (`LpmIndex::get`): the key left-aligned to 32 bits, the first level's
            // cell, then up to two chunk cells; 0 is a miss, else `slot + 1`.
            let l1 = field(self, offset_of!(IndexView, lpm_l1));
            let sh1 = field(self, offset_of!(IndexView, lpm_sh1));
            let chunks = field(self, offset_of!(IndexView, lpm_chunks));
            let align = field(self, offset_of!(IndexView, lpm_align));
            let a = self.b.ins().ishl(key, align);
            // The low 32 bits (a 32-bit move: no mask constant to load).
            let a = self.b.ins().ireduce(types::I32, a);
            let a = self.b.ins().uextend(i64t, a);
            let i1 = self.b.ins().ushr(a, sh1);
            let o1 = self.b.ins().ishl_imm(i1, 2);
            let p1 = self.b.ins().iadd(l1, o1);
            let c1 = self.b.ins().uload32(mem(), p1, 0);
            let (lvl2, lvl3, leaf) = (
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
            );
            self.b.append_block_param(leaf, i64t);
            let ptr = i64::from(crate::lpm::PTR);
            let is_ptr = self.b.ins().band_imm(c1, ptr);
            self.b.ins().brif(is_ptr, lvl2, &[], leaf, &[c1.into()]);
            // A chunk cell: `chunks[(c & !PTR) * 256 + index]`.
            let cell = |g: &mut Self, c: ir::Value, idx: ir::Value| {
                let ch = g.b.ins().band_imm(c, ptr - 1);
                let ch = g.b.ins().ishl_imm(ch, 8);
                let i = g.b.ins().iadd(ch, idx);
                let o = g.b.ins().ishl_imm(i, 2);
                let p = g.b.ins().iadd(chunks, o);
                g.b.ins().uload32(mem(), p, 0)
            };
            self.b.switch_to_block(lvl2);
            let i2 = self.b.ins().ushr_imm(a, 8);
            let i2 = self.b.ins().band_imm(i2, 255);
            let c2 = cell(self, c1, i2);
            let is_ptr = self.b.ins().band_imm(c2, ptr);
            self.b.ins().brif(is_ptr, lvl3, &[], leaf, &[c2.into()]);
            self.b.switch_to_block(lvl3);
            let i3 = self.b.ins().band_imm(a, 255);
            let c3 = cell(self, c2, i3);
            self.b.ins().jump(leaf, &[c3.into()]);
            self.b.switch_to_block(leaf);
            let c = self.b.block_params(leaf)[0];
            let slot = self.b.ins().iadd_imm(c, -1);
            self.b.ins().brif(c, found, &[slot.into()], miss, &[]);
        } else if path == TablePath::Inline {
            let buckets = field(self, offset_of!(IndexView, buckets));
            let mask = (tb, at(base + offset_of!(IndexView, mask)));
            let shift = field(self, offset_of!(IndexView, shift));
            let k = [Some(key), key_hi, key_x];
            self.probe_index(buckets, mask, shift, k, found, miss);
        } else if path == TablePath::Tuples {
            // Tuple-space search (`TernIndex::get`): every tuple's index probed with the key
            // under its mask; the smallest `(priority, slot)` among the hits wins, compared as
            // one unsigned `(priority ^ 2^31) << 32 | slot`.
            let tuples = field(self, offset_of!(IndexView, tuples));
            let ntuples = field(self, offset_of!(IndexView, ntuples));
            let (fast, slow) = (self.b.create_block(), self.b.create_block());
            let zero = self.b.ins().iconst(i64t, 0);
            let many = self.b.ins().icmp_imm(
                IntCC::UnsignedGreaterThan,
                ntuples,
                MAX_NATIVE_TUPLES as i64,
            );
            self.b.ins().brif(many, slow, &[], fast, &[]);
            // More tuples than the code probes: the engine's pruned search.
            self.b.switch_to_block(slow);
            let idx = self.b.ins().iconst(types::I32, i64::from(ti));
            let r = self.helper(
                h_find_wide as *const () as usize,
                &[
                    v.ctx,
                    idx,
                    key,
                    key_hi.unwrap_or(zero),
                    key_x.unwrap_or(zero),
                ],
            );
            self.find_result(r, found, miss, x);
            self.b.switch_to_block(fast);
            // One tuple (one mask, the usual ACL): its index's slot is the winner (the index
            // maps a masked value to its best `(priority, slot)`), no priorities to compare.
            let (single, multi) = (self.b.create_block(), self.b.create_block());
            let one = self.b.ins().icmp_imm(IntCC::Equal, ntuples, 1);
            self.b.ins().brif(one, single, &[], multi, &[]);
            self.b.switch_to_block(single);
            let t0 = |g: &mut Self, off: usize| g.b.ins().load(i64t, mem(), tuples, at(off));
            let masked0 = |g: &mut Self, k: Option<ir::Value>, off: usize| {
                k.map(|k| {
                    let m = t0(g, off);
                    g.b.ins().band(k, m)
                })
            };
            let k0 = [
                masked0(self, Some(key), offset_of!(TupleView, mask)),
                masked0(self, key_hi, offset_of!(TupleView, mask_hi)),
                masked0(self, key_x, offset_of!(TupleView, mask_x)),
            ];
            let buckets0 = t0(self, offset_of!(TupleView, buckets));
            let shift0 = t0(self, offset_of!(TupleView, shift));
            let bmask0 = (tuples, at(offset_of!(TupleView, bmask)));
            self.probe_index(buckets0, bmask0, shift0, k0, found, miss);
            self.b.switch_to_block(multi);
            let prio = field(self, offset_of!(IndexView, prio));
            let (tloop, tbody, tnext, tend, thit, tmiss) = (
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
                self.b.create_block(),
            );
            self.b.append_block_param(tloop, i64t);
            self.b.append_block_param(tloop, i64t);
            self.b.append_block_param(tnext, i64t);
            self.b.append_block_param(tend, i64t);
            self.b.append_block_param(thit, i64t);
            let none = self.b.ins().iconst(i64t, -1);
            self.b.ins().jump(tloop, &[zero.into(), none.into()]);
            self.b.switch_to_block(tloop);
            let (i, best) = (self.b.block_params(tloop)[0], self.b.block_params(tloop)[1]);
            let done = self
                .b
                .ins()
                .icmp(IntCC::UnsignedGreaterThanOrEqual, i, ntuples);
            self.b.ins().brif(done, tend, &[best.into()], tbody, &[]);
            self.b.switch_to_block(tbody);
            const _: () = assert!(std::mem::size_of::<TupleView>() == 48);
            let o = self.b.ins().imul_imm(i, 48);
            let tv = self.b.ins().iadd(tuples, o);
            let tfield = |g: &mut Self, off: usize| g.b.ins().load(i64t, mem(), tv, at(off));
            let masked = |g: &mut Self, k: Option<ir::Value>, off: usize| {
                k.map(|k| {
                    let m = tfield(g, off);
                    g.b.ins().band(k, m)
                })
            };
            let k = [
                masked(self, Some(key), offset_of!(TupleView, mask)),
                masked(self, key_hi, offset_of!(TupleView, mask_hi)),
                masked(self, key_x, offset_of!(TupleView, mask_x)),
            ];
            let buckets = tfield(self, offset_of!(TupleView, buckets));
            let bmask = (tv, at(offset_of!(TupleView, bmask)));
            let shift = tfield(self, offset_of!(TupleView, shift));
            self.probe_index(buckets, bmask, shift, k, thit, tmiss);
            // No hit in this tuple: `best` unchanged.
            self.b.switch_to_block(tmiss);
            self.b.ins().jump(tnext, &[best.into()]);
            self.b.switch_to_block(thit);
            let slot = self.b.block_params(thit)[0];
            let po = self.b.ins().ishl_imm(slot, 2);
            let pa = self.b.ins().iadd(prio, po);
            let p = self.b.ins().uload32(mem(), pa, 0);
            let p = self.b.ins().bxor_imm(p, 0x8000_0000);
            let p = self.b.ins().ishl_imm(p, 32);
            let c = self.b.ins().bor(p, slot);
            let nb = self.b.ins().umin(best, c);
            self.b.ins().jump(tnext, &[nb.into()]);
            self.b.switch_to_block(tnext);
            let b2 = self.b.block_params(tnext)[0];
            let i1 = self.b.ins().iadd_imm(i, 1);
            self.b.ins().jump(tloop, &[i1.into(), b2.into()]);
            self.b.switch_to_block(tend);
            let best = self.b.block_params(tend)[0];
            let slot = self.b.ins().band_imm(best, 0xffff_ffff);
            let hit = self.b.ins().icmp_imm(IntCC::NotEqual, best, -1);
            self.b.ins().brif(hit, found, &[slot.into()], miss, &[]);
        } else {
            let callee = self
                .b
                .ins()
                .iconst(i64t, h_find as *const () as usize as i64);
            let idx = self.b.ins().iconst(types::I32, i64::from(ti));
            let inst = self
                .b
                .ins()
                .call_indirect(v.find_sig, callee, &[v.ctx, idx, key]);
            let r = self.b.inst_results(inst)[0];
            self.find_result(r, found, miss, x);
        }
        self.b.switch_to_block(miss);
        let none = self.b.ins().iconst(i64t, MISS);
        self.b.ins().jump(x.resolve, &[none.into()]);
        // The hit's compact record: `HOT_SET | n << 32 | action`, then the parameters.
        self.b.switch_to_block(found);
        let slot = self.b.block_params(found)[0];
        let other = self.b.create_block();
        const _: () = assert!(std::mem::size_of::<HotRec>() == 32);
        let roff = self.b.ins().ishl_imm(slot, 5);
        let rec = self.b.ins().iadd(hot, roff);
        let head = self.b.ins().load(i64t, mem(), rec, 0);
        let params = self
            .b
            .ins()
            .iadd_imm(rec, offset_of!(HotRec, params) as i64);
        self.b.def_var(v.pbase, params);
        // Each native action's body (with the hit's bookkeeping first when the table has
        // any), entered once the record is known to hold that action with enough parameters.
        let arms: Vec<(u32, ActPlan, ir::Block)> = natives
            .iter()
            .map(|(a, p)| (*a, *p, self.b.create_block()))
            .collect();
        // The common case in one compare per action: the head an entry of the action with
        // all its declared parameters has (`HotRec::head_of`; what the control plane's
        // checked entries hold). Any other head (no compact form, another action, another
        // parameter count) takes the general test below.
        for (a, p, run) in arms.iter().take(MAX_HEAD_COMPARES) {
            let declared = self.eng.actions[*a as usize].param_widths.len();
            if declared > HOT_PARAMS || declared < p.params as usize {
                continue;
            }
            let expect = HotRec::head_of(*a, declared) as i64;
            let same = self.b.ins().icmp_imm(IntCC::Equal, head, expect);
            let next = self.b.create_block();
            self.b.ins().brif(same, *run, &[], next, &[]);
            self.b.switch_to_block(next);
        }
        let set = self.b.ins().icmp_imm(IntCC::SignedLessThan, head, 0);
        let have = self.b.create_block();
        // The general test: out of line (the head compares above take the common case).
        self.b.set_cold_block(have);
        self.b.set_cold_block(other);
        self.b.ins().brif(set, have, &[], other, &[]);
        self.b.switch_to_block(other);
        self.b.ins().jump(x.resolve, &[slot.into()]);
        self.b.switch_to_block(have);
        let act = self.b.ins().band_imm(head, 0xffff_ffff);
        let n = self.b.ins().ushr_imm(head, 32);
        let n = self.b.ins().band_imm(n, 0xff);
        let mut sw = Switch::new();
        let checks: Vec<ir::Block> = arms
            .iter()
            .map(|_| {
                let blk = self.b.create_block();
                self.b.set_cold_block(blk);
                blk
            })
            .collect();
        for ((a, _, _), blk) in arms.iter().zip(&checks) {
            sw.set_entry(u128::from(*a), *blk);
        }
        sw.emit(&mut self.b, act, other);
        for ((_, p, run), blk) in arms.iter().zip(checks) {
            self.b.switch_to_block(blk);
            if p.params > 0 {
                let enough = self.b.ins().icmp_imm(
                    IntCC::UnsignedGreaterThanOrEqual,
                    n,
                    i64::from(p.params),
                );
                self.b.ins().brif(enough, *run, &[], other, &[]);
            } else {
                self.b.ins().jump(*run, &[]);
            }
        }
        for (a, p, run) in arms {
            self.b.switch_to_block(run);
            if !self.eng.tables[ti as usize].plain_hits() {
                // The hit's direct counter, meter and ageing stamp (`h_resolve` does them on
                // the other paths).
                let idx = self.b.ins().iconst(types::I32, i64::from(ti));
                let r = self.helper(h_hit as *const () as usize, &[v.ctx, idx, slot]);
                let (ok, fault) = (self.b.create_block(), self.b.create_block());
                self.b.set_cold_block(fault);
                let bad = self.b.ins().icmp_imm(IntCC::SignedLessThan, r, 0);
                self.b.ins().brif(bad, fault, &[], ok, &[]);
                self.b.switch_to_block(fault);
                let c = self.b.ins().iconst(i64t, FAULT);
                self.b.ins().jump(x.ret, &[c.into()]);
                self.b.switch_to_block(ok);
            }
            self.action_body(v.ctx, v.pbase, v.phv, v.valid, a);
            if p.exits {
                let c = self.b.ins().iconst(i64t, EXIT);
                self.b.ins().jump(x.ret, &[c.into()]);
            } else {
                let (_, next) = x
                    .hit_next
                    .iter()
                    .find(|(b, _)| *b == a)
                    .expect("per action");
                self.b.ins().jump(*next, &[]);
            }
        }
    }

    /// Probe an [`crate::table::ExactIndex`] (`buckets`, `mask`, `shift`) for a packed key
    /// (`[low 64 bits, bits 64-127, bits 128-191]`, the absent ones 0) as `ExactIndex::get`
    /// does: `table::index_hash`, then linear probing until the key or an unused bucket.
    /// Jumps to `hit` with the slot, or to `miss`. `mask` is where the bucket mask is
    /// (pointer, offset): read only when a probe goes past its first bucket.
    fn probe_index(
        &mut self,
        buckets: ir::Value,
        (mask_at, mask_off): (ir::Value, i32),
        shift: ir::Value,
        [key, key_hi, key_x]: [Option<ir::Value>; 3],
        hit: ir::Block,
        miss: ir::Block,
    ) {
        let i64t = types::I64;
        let key = key.expect("a key has a low word");
        // `table::index_hash`.
        let mut mixed = key;
        for (w, mul) in [(key_hi, INDEX_MUL_HI), (key_x, INDEX_MUL_X)] {
            if let Some(w) = w {
                let m = self.b.ins().imul_imm(w, mul as i64);
                mixed = self.b.ins().bxor(mixed, m);
            }
        }
        let h = self.b.ins().imul_imm(mixed, INDEX_MUL as i64);
        // The first position: the hash's top bits, already below the bucket count (the shift
        // is `64 - log2(buckets)`; an empty view has two buckets and a shift of 63), so not
        // masked (`ExactIndex::pos` masks; the same value).
        let pos = self.b.ins().ushr(h, shift);
        // Linear probing: an unused bucket ends the run (the index is at most half full).
        let probe = self.b.create_block();
        self.b.append_block_param(probe, i64t);
        let (check, again, found) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        self.b.ins().jump(probe, &[pos.into()]);
        self.b.switch_to_block(probe);
        let pos = self.b.block_params(probe)[0];
        const _: () = assert!(std::mem::size_of::<Bucket>() == 32);
        let off = self.b.ins().ishl_imm(pos, 5);
        let addr = self.b.ins().iadd(buckets, off);
        let used = self
            .b
            .ins()
            .load(types::I32, mem(), addr, at(offset_of!(Bucket, used)));
        self.b.ins().brif(used, check, &[], miss, &[]);
        self.b.switch_to_block(check);
        let k = self
            .b
            .ins()
            .load(i64t, mem(), addr, at(offset_of!(Bucket, key)));
        let mut same = self.b.ins().icmp(IntCC::Equal, k, key);
        for (w, off) in [
            (key_hi, offset_of!(Bucket, key_hi)),
            (key_x, offset_of!(Bucket, key_x)),
        ] {
            if let Some(w) = w {
                let kw = self.b.ins().load(i64t, mem(), addr, at(off));
                let eq = self.b.ins().icmp(IntCC::Equal, kw, w);
                same = self.b.ins().band(same, eq);
            }
        }
        // A collision: out of line.
        self.b.set_cold_block(again);
        self.b.ins().brif(same, found, &[], again, &[]);
        self.b.switch_to_block(again);
        let mask = self.b.ins().load(i64t, mem(), mask_at, mask_off);
        let p1 = self.b.ins().iadd_imm(pos, 1);
        let p1 = self.b.ins().band(p1, mask);
        self.b.ins().jump(probe, &[p1.into()]);
        self.b.switch_to_block(found);
        let slot = self
            .b
            .ins()
            .uload32(mem(), addr, at(offset_of!(Bucket, slot)));
        self.b.ins().jump(hit, &[slot.into()]);
    }

    /// A lookup helper's answer `r` ([`h_find`]): a slot goes to `found`, [`MISS`] to `miss`,
    /// anything else ends the pipeline with a fault.
    fn find_result(&mut self, r: ir::Value, found: ir::Block, miss: ir::Block, x: &Exits) {
        let (neg, fault) = (self.b.create_block(), self.b.create_block());
        self.b.set_cold_block(fault);
        let is_slot = self.b.ins().icmp_imm(IntCC::SignedGreaterThanOrEqual, r, 0);
        self.b.ins().brif(is_slot, found, &[r.into()], neg, &[]);
        self.b.switch_to_block(neg);
        let is_miss = self.b.ins().icmp_imm(IntCC::Equal, r, MISS);
        self.b.ins().brif(is_miss, miss, &[], fault, &[]);
        self.b.switch_to_block(fault);
        let c = self.b.ins().iconst(types::I64, FAULT);
        self.b.ins().jump(x.ret, &[c.into()]);
    }

    /// A field's value as an i64 (validity byte, or the slot's big-endian value).
    fn read_field(&mut self, phv: Variable, valid: Variable, f: &FieldLoc) -> ir::Value {
        let (p, v) = (self.b.use_var(phv), self.b.use_var(valid));
        self.key_field(p, v, f)
    }

    /// Store the low `width` bits of `v` into `f` (ignored for `$valid$`).
    pub(super) fn write_field(&mut self, phv: Variable, f: &FieldLoc, v: ir::Value) {
        if f.is_valid_bit {
            return;
        }
        // The stores keep the low `8 * nbytes` bits: a mask only for narrower fields.
        let v = if f.width < 64 && f.width < 8 * f.nbytes {
            self.b.ins().band_imm(v, ((1u64 << f.width) - 1) as i64)
        } else {
            v
        };
        let p = self.b.use_var(phv);
        self.store_be(p, f.off, f.nbytes, v);
    }

    fn src(&mut self, pbase: Variable, phv: Variable, valid: Variable, s: &FastSrc) -> ir::Value {
        match s {
            FastSrc::Field(f) => self.read_field(phv, valid, f),
            FastSrc::Local(i) => {
                let p = self.b.use_var(pbase);
                self.b.ins().load(types::I64, mem(), p, at(8 * *i as usize))
            }
            FastSrc::Const(c) => self.b.ins().iconst(types::I64, *c as i64),
        }
    }

    fn bin(&mut self, op: FastBin, x: ir::Value, y: ir::Value) -> ir::Value {
        let i = self.b.ins();
        match op {
            FastBin::Add => i.iadd(x, y),
            FastBin::Sub => i.isub(x, y),
            FastBin::Mul => i.imul(x, y),
            FastBin::And => i.band(x, y),
            FastBin::Or => i.bor(x, y),
            FastBin::Xor => i.bxor(x, y),
        }
    }

    fn expr(&mut self, pb: Variable, phv: Variable, valid: Variable, e: &FastExpr) -> ir::Value {
        match e {
            FastExpr::Src(s) => self.src(pb, phv, valid, s),
            FastExpr::Bin(op, a, b) => {
                let x = self.expr(pb, phv, valid, a);
                let y = self.expr(pb, phv, valid, b);
                self.bin(*op, x, y)
            }
            FastExpr::Shl(a, n) => {
                let x = self.expr(pb, phv, valid, a);
                if *n >= 64 {
                    self.b.ins().iconst(types::I64, 0)
                } else {
                    self.b.ins().ishl_imm(x, i64::from(*n))
                }
            }
        }
    }

    /// Action `a`'s body (in the native subset, see [`plan_action`]); its parameters are read
    /// from `pb`.
    fn action_body(
        &mut self,
        ctx: ir::Value,
        pb: Variable,
        phv: Variable,
        valid: Variable,
        a: u32,
    ) {
        let instrs = &self.eng.actions[a as usize].instrs;
        for ins in instrs {
            match ins {
                // Ends the action (see `plan_action`).
                Instr::Jump(t) if *t >= instrs.len() => break,
                // A field copied to a field of the same whole-byte width: the slot's bytes as
                // they are (no byte swaps, no mask).
                Instr::SetU64 {
                    dst,
                    src: FastSrc::Field(s),
                    add: 0,
                } if same_bytes(dst, s) => {
                    let p = self.b.use_var(phv);
                    self.copy(p, dst.off, p, s.off, dst.nbytes);
                }
                Instr::SetU64 { dst, src, add } => {
                    let v = self.src(pb, phv, valid, src);
                    let v = if *add != 0 {
                        self.b.ins().iadd_imm(v, *add as i64)
                    } else {
                        v
                    };
                    self.write_field(phv, dst, v);
                }
                Instr::SetBin { dst, op, a, b } => {
                    let x = self.src(pb, phv, valid, a);
                    let y = self.src(pb, phv, valid, b);
                    let v = self.bin(*op, x, y);
                    self.write_field(phv, dst, v);
                }
                Instr::SetExpr { dst, expr } => {
                    let v = self.expr(pb, phv, valid, expr);
                    self.write_field(phv, dst, v);
                }
                Instr::Drop {
                    egress_spec,
                    mcast_grp,
                } => {
                    if let Some(f) = egress_spec {
                        let off = at(offset_of!(PipeCtx, drop_port));
                        let dp = self.b.ins().load(types::I64, mem(), ctx, off);
                        self.write_field(phv, f, dp);
                    }
                    if let Some(f) = mcast_grp {
                        let zero = self.b.ins().iconst(types::I64, 0);
                        self.write_field(phv, f, zero);
                    }
                }
                Instr::RegisterRead {
                    dst: LVal::Field(f),
                    array,
                    index,
                } => {
                    let e = index_expr(index).expect("checked by `plan_action`");
                    let idx = self.nexpr(pb, phv, valid, &e);
                    let (cell, nb, next) = self.reg_cell(ctx, *array, idx);
                    let v = self.load_be(cell, 0, nb);
                    self.write_field(phv, f, v);
                    self.b.ins().jump(next, &[]);
                    self.b.switch_to_block(next);
                }
                Instr::RegisterWrite {
                    array,
                    index,
                    value,
                } => {
                    let e = index_expr(index).expect("checked by `plan_action`");
                    let idx = self.nexpr(pb, phv, valid, &e);
                    let e = nexpr(value).expect("checked by `plan_action`");
                    let v = self.nexpr(pb, phv, valid, &e);
                    let width = self.eng.prog.register_arrays[*array as usize].bitwidth;
                    let v = if width < 64 {
                        self.b.ins().band_imm(v, ((1u64 << width) - 1) as i64)
                    } else {
                        v
                    };
                    let (cell, nb, next) = self.reg_cell(ctx, *array, idx);
                    self.store_be(cell, 0, nb, v);
                    self.b.ins().jump(next, &[]);
                    self.b.switch_to_block(next);
                }
                Instr::Count { counter, index } => {
                    let e = index_expr(index).expect("checked by `plan_action`");
                    let idx = self.nexpr(pb, phv, valid, &e);
                    let c = self.b.ins().iconst(types::I32, i64::from(*counter));
                    self.helper(h_count as *const () as usize, &[ctx, c, idx]);
                }
                Instr::Clone {
                    session,
                    field_list,
                    ..
                } => {
                    let CExpr::Const(Const {
                        small: Some(fl), ..
                    }) = field_list
                    else {
                        unreachable!("checked by `plan_action`")
                    };
                    // The interpreter's `to_i64_sat`.
                    let fl = (*fl).clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
                    let s = self.nexpr(pb, phv, valid, &nexpr(session).expect("checked"));
                    let fl = self.b.ins().iconst(types::I64, fl);
                    self.helper(h_clone as *const () as usize, &[ctx, s, fl]);
                }
                Instr::RngUniform {
                    dst: LVal::Field(f),
                    lo,
                    hi,
                } => {
                    let lo = self.nexpr(pb, phv, valid, &nexpr(lo).expect("checked"));
                    let hi = self.nexpr(pb, phv, valid, &nexpr(hi).expect("checked"));
                    let r = self.helper(h_rng as *const () as usize, &[ctx, lo, hi]);
                    let (set, next) = (self.b.create_block(), self.b.create_block());
                    self.b.ins().brif(r, set, &[], next, &[]);
                    self.b.switch_to_block(set);
                    let off = at(offset_of!(PipeCtx, scratch));
                    let v = self.b.ins().load(types::I64, mem(), ctx, off);
                    self.write_field(phv, f, v);
                    self.b.ins().jump(next, &[]);
                    self.b.switch_to_block(next);
                }
                Instr::HashOffset {
                    dst: LVal::Field(f),
                    base,
                    calc,
                    size,
                } => {
                    let b = self.nexpr(pb, phv, valid, &nexpr(base).expect("checked"));
                    let sz = self.nexpr(pb, phv, valid, &nexpr(size).expect("checked"));
                    let c = self.b.ins().iconst(types::I32, i64::from(*calc));
                    let off = self.helper(h_hash as *const () as usize, &[ctx, c, sz]);
                    let v = self.b.ins().iadd(b, off);
                    self.write_field(phv, f, v);
                }
                Instr::Assign {
                    dst: LVal::Field(f),
                    src,
                } => {
                    let e = nexpr(src).expect("checked by `plan_action`");
                    let v = self.nexpr(pb, phv, valid, &e);
                    self.write_field(phv, f, v);
                }
                Instr::AddHeader { header, zero } => {
                    let h = inline_header(self.eng, header).expect("checked by `plan_action`");
                    self.add_header(ctx, phv, valid, h, *zero);
                }
                Instr::RemoveHeader { header } => {
                    let h = inline_header(self.eng, header).expect("checked by `plan_action`");
                    self.remove_header(ctx, valid, h);
                }
                // `exit` is acted on after the body (see `ActPlan::exits`).
                Instr::Exit | Instr::NoOp => {}
                _ => unreachable!("checked by `plan_action`"),
            }
        }
    }

    pub(super) fn nexpr(
        &mut self,
        pb: Variable,
        phv: Variable,
        valid: Variable,
        e: &NExpr,
    ) -> ir::Value {
        match e {
            NExpr::Src(s) => self.src(pb, phv, valid, s),
            NExpr::Bin(op, a, b) => {
                let x = self.nexpr(pb, phv, valid, a);
                let y = self.nexpr(pb, phv, valid, b);
                self.bin(*op, x, y)
            }
            NExpr::Shl(a, n) | NExpr::Shr(a, n) if *n >= 64 => {
                let _ = a;
                self.b.ins().iconst(types::I64, 0)
            }
            NExpr::Shl(a, n) => {
                let x = self.nexpr(pb, phv, valid, a);
                self.b.ins().ishl_imm(x, i64::from(*n))
            }
            NExpr::Shr(a, n) => {
                let x = self.nexpr(pb, phv, valid, a);
                self.b.ins().ushr_imm(x, i64::from(*n))
            }
            NExpr::Rem(a, c) => {
                let x = self.nexpr(pb, phv, valid, a);
                let c = self.b.ins().iconst(types::I64, *c as i64);
                self.b.ins().urem(x, c)
            }
            NExpr::Cond(c, a, b) => {
                let c = self.fast_bool(phv, valid, c);
                let x = self.nexpr(pb, phv, valid, a);
                let y = self.nexpr(pb, phv, valid, b);
                self.b.ins().select(c, x, y)
            }
        }
    }

    /// The address of cell `idx` (an `i64`, see [`index_expr`]) of register array `a` (≤ 64
    /// bits, see [`reg_ok`]) and its size in bytes, as the interpreter bounds it: the code
    /// continues in a block where the index is in range (the returned address is then inside
    /// the array's cells); out of range (or no such array in the state) it jumps to the
    /// returned `next` block, which the caller must also reach from the in-range block and then
    /// switch to. Nothing is read or written out of range, as in the interpreter.
    fn reg_cell(&mut self, ctx: ir::Value, a: u32, idx: ir::Value) -> (ir::Value, u32, ir::Block) {
        let width = self.eng.prog.register_arrays[a as usize].bitwidth;
        let nb = width.div_ceil(8).max(1);
        let (have, inb, next) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let n = self
            .b
            .ins()
            .load(types::I64, mem(), ctx, at(offset_of!(PipeCtx, nregs)));
        let ok = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedGreaterThan, n, i64::from(a));
        self.b.ins().brif(ok, have, &[], next, &[]);
        self.b.switch_to_block(have);
        let regs = self
            .b
            .ins()
            .load(types::I64, mem(), ctx, at(offset_of!(PipeCtx, regs)));
        let ra = (a as usize * std::mem::size_of::<RegArray>()) as i32;
        let size = self
            .b
            .ins()
            .load(types::I32, mem(), regs, ra + at(offset_of!(RegArray, size)));
        let size = self.b.ins().uextend(types::I64, size);
        // A negative index is a huge unsigned one: out of range too.
        let ok = self.b.ins().icmp(IntCC::UnsignedLessThan, idx, size);
        self.b.ins().brif(ok, inb, &[], next, &[]);
        self.b.switch_to_block(inb);
        let base = self
            .b
            .ins()
            .load(types::I64, mem(), regs, ra + at(offset_of!(RegArray, base)));
        let off = self.b.ins().imul_imm(idx, i64::from(nb));
        let cell = self.b.ins().iadd(base, off);
        (cell, nb, next)
    }

    /// Call the extern "C" helper at `addr` with `args` (the context pointer, an `i32`, then
    /// `i64`s) returning an `i64`.
    fn helper(&mut self, addr: usize, args: &[ir::Value]) -> ir::Value {
        let mut sig = self.b.func.signature.clone();
        sig.params = args
            .iter()
            .map(|v| AbiParam::new(self.b.func.dfg.value_type(*v)))
            .collect();
        sig.returns = vec![AbiParam::new(types::I64)];
        let sig = self.b.import_signature(sig);
        let callee = self.b.ins().iconst(types::I64, addr as i64);
        let inst = self.b.ins().call_indirect(sig, callee, args);
        self.b.inst_results(inst)[0]
    }

    /// The packet's length register and its `len_saturated` flag, as addresses in the packet.
    fn pkt_ptr(&mut self, ctx: ir::Value) -> ir::Value {
        let off = at(offset_of!(PipeCtx, pkt));
        self.b.ins().load(types::I64, mem(), ctx, off)
    }

    /// `add_header` of fixed header `h` (see [`inline_header`]), as the interpreter does it:
    /// nothing if valid; else zero its slot (`zero`: p4c's `setValid` zeroes nothing, BMv2's
    /// `add_header` does), mark it valid and add its size to the packet-length register.
    fn add_header(&mut self, ctx: ir::Value, phv: Variable, valid: Variable, h: u32, zero: bool) {
        let hl = &self.eng.layout.headers[h as usize];
        let (off, slot, size) = (hl.off, hl.slot_bytes, hl.fixed_bits.div_ceil(8));
        let vb = self.b.use_var(valid);
        let v = self.b.ins().load(types::I8, mem(), vb, h as i32);
        let (set, next) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(v, next, &[], set, &[]);
        self.b.switch_to_block(set);
        if zero {
            let p = self.b.use_var(phv);
            for (o, c) in super::chunks(slot) {
                let z = self.b.ins().iconst(super::int_type(c), 0);
                self.b.ins().store(mem(), z, p, (off + o) as i32);
            }
        }
        let one = self.b.ins().iconst(types::I8, 1);
        self.b.ins().store(mem(), one, vb, h as i32);
        let pkt = self.pkt_ptr(ctx);
        let lo = at(offset_of!(Pkt, length_reg));
        let len = self.b.ins().load(types::I32, mem(), pkt, lo);
        let len = self.b.ins().iadd_imm(len, i64::from(size));
        self.b.ins().store(mem(), len, pkt, lo);
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
    }

    /// `remove_header` of fixed header `h`, as the interpreter does it: if valid, subtract its
    /// size from the packet-length register (saturating at 0, noted in `len_saturated`) and
    /// mark it invalid.
    fn remove_header(&mut self, ctx: ir::Value, valid: Variable, h: u32) {
        let size = self.eng.layout.headers[h as usize].fixed_bits.div_ceil(8);
        let vb = self.b.use_var(valid);
        let v = self.b.ins().load(types::I8, mem(), vb, h as i32);
        let (clear, next) = (self.b.create_block(), self.b.create_block());
        self.b.ins().brif(v, clear, &[], next, &[]);
        self.b.switch_to_block(clear);
        let pkt = self.pkt_ptr(ctx);
        let lo = at(offset_of!(Pkt, length_reg));
        let so = at(offset_of!(Pkt, regs) + offset_of!(PktRegs, len_saturated));
        let len = self.b.ins().load(types::I32, mem(), pkt, lo);
        let under = self
            .b
            .ins()
            .icmp_imm(IntCC::UnsignedLessThan, len, i64::from(size));
        let sat = self.b.ins().load(types::I8, mem(), pkt, so);
        let sat = self.b.ins().bor(sat, under);
        self.b.ins().store(mem(), sat, pkt, so);
        let n = self.b.ins().iconst(types::I32, i64::from(size));
        let left = self.b.ins().isub(len, n);
        let zero = self.b.ins().iconst(types::I32, 0);
        let len = self.b.ins().select(under, zero, left);
        self.b.ins().store(mem(), len, pkt, lo);
        let z8 = self.b.ins().iconst(types::I8, 0);
        self.b.ins().store(mem(), z8, vb, h as i32);
        self.b.ins().jump(next, &[]);
        self.b.switch_to_block(next);
    }

    fn fast_val(&mut self, phv: Variable, valid: Variable, v: &FastVal) -> ir::Value {
        match v {
            FastVal::Field(f) => self.read_field(phv, valid, f),
            FastVal::Const(c) => self.b.ins().iconst(types::I64, *c as i64),
        }
    }

    /// A fast condition as an i8 (0 or 1). Operands have no side effects and cannot fault,
    /// so `&&`/`||` evaluate both sides.
    fn fast_bool(&mut self, phv: Variable, valid: Variable, f: &FastBool) -> ir::Value {
        match f {
            FastBool::Const(b) => self.b.ins().iconst(types::I8, i64::from(*b)),
            FastBool::Valid(h) => {
                let v = self.b.use_var(valid);
                let x = self.b.ins().load(types::I8, mem(), v, *h as i32);
                self.b.ins().icmp_imm(IntCC::NotEqual, x, 0)
            }
            FastBool::Cmp(op, l, r) => {
                let (x, y) = (self.fast_val(phv, valid, l), self.fast_val(phv, valid, r));
                let cc = match op {
                    Op::Eq => IntCC::Equal,
                    Op::Ne => IntCC::NotEqual,
                    Op::Gt => IntCC::UnsignedGreaterThan,
                    Op::Ge => IntCC::UnsignedGreaterThanOrEqual,
                    Op::Lt => IntCC::UnsignedLessThan,
                    _ => IntCC::UnsignedLessThanOrEqual,
                };
                self.b.ins().icmp(cc, x, y)
            }
            FastBool::NonZero(v) => {
                let x = self.fast_val(phv, valid, v);
                self.b.ins().icmp_imm(IntCC::NotEqual, x, 0)
            }
            FastBool::And(a, b) => {
                let (x, y) = (self.fast_bool(phv, valid, a), self.fast_bool(phv, valid, b));
                self.b.ins().band(x, y)
            }
            FastBool::Or(a, b) => {
                let (x, y) = (self.fast_bool(phv, valid, a), self.fast_bool(phv, valid, b));
                self.b.ins().bor(x, y)
            }
            FastBool::Not(a) => {
                let x = self.fast_bool(phv, valid, a);
                self.b.ins().bxor_imm(x, 1)
            }
        }
    }
}
