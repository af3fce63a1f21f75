//! The fast lane's body as one generated function (issue 21, item 1): for the common case
//! (unicast or drop, no clone, digest, resubmit, recirculate or multicast) one native call
//! stores the standard metadata at constant PHV offsets, runs the generated parser, the
//! ingress pipeline, makes the after-ingress decision, stores the egress metadata, runs the
//! egress pipeline and the emit loop with the checksums compiled in, and returns a status.
//! Parser, pipelines and emit are generated inside this one function (no calls: the PHV,
//! validity and packet pointers stay in registers); the module's standalone parser, pipeline
//! and emit functions remain for the other paths.
//! Everything else comes back to Rust at the point where it left the common case (after
//! ingress, after egress, checksums left to the caller), where `switch::fast` goes on exactly as
//! its Rust lane does.
//!
//! This module owns [`LaneCtx`] (what the lane function reads and writes besides the PHV: the
//! pipeline context first, then the frame, the clock and the outputs), the eligibility check
//! ([`spec`]), the generator ([`Gen::lane`]) and the safe entry ([`Native::run_lane`]).

use std::mem::offset_of;

use cranelift_codegen::ir::{self, condcodes::IntCC, types, InstBuilder};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_frontend::Variable;

use super::pipeline::{BurstCtx, PipeCtx, Pipes, FAULT};
use super::{mem, Gen, Native};
use crate::compile::{CParser, Engine, GNode};
use crate::csum::NativeCsum;
use crate::exec::{Fault, Pkt, State};
use crate::layout::FieldLoc;

/// `(lane context) -> status` (see the `ST_*` codes; `>= 0`: forwarded, that many bytes).
pub(super) type LaneFn = unsafe extern "C" fn(*mut LaneCtx) -> i64;

/// Dropped before egress (by `egress_spec` or a priority with no queue): one pass.
const ST_DROP_INGRESS: i64 = -1;
/// Dropped after egress: two passes.
const ST_DROP_EGRESS: i64 = -2;
/// Back to Rust after the ingress pipeline (its return code in [`LaneCtx::rc`]): it did not
/// end normally, a helper touched the packet's registers, or `mcast_grp` is set.
const ST_INGRESS: i64 = -3;
/// Back to Rust after the egress pipeline (return code in [`LaneCtx::rc`]), for the same
/// reasons; the egress port is in [`LaneCtx::eport`].
const ST_EGRESS: i64 = -4;
/// Emitted, the checksums left to the caller ([`CSUM_LEFT`]): bytes in [`LaneCtx::n`].
const ST_CSUM_LEFT: i64 = -5;

/// What the generated lane reads and writes besides the PHV, kept for a burst: the pipeline
/// context first (the pipelines and their helpers are handed the same pointer), then the
/// packet's inputs, then its outputs.
#[repr(C)]
pub struct LaneCtx {
    pub burst: BurstCtx,
    data: *const u8,
    len: u64,
    port: u64,
    now: u64,
    /// Priority queues of the switch (at least 1): a higher priority is dropped.
    nqueues: u64,
    out: *mut u8,
    emit_off: *mut u32,
    stack_next: *mut u32,
    /// Out: the parsed length.
    cursor: u64,
    /// In: the parser states each packet may enter (the switch's
    /// [`crate::exec::ParserBudget::max_states`], set once per burst; the code only reads it).
    states: u64,
    /// Out: the egress port (`egress_spec` at the after-ingress decision).
    eport: u64,
    /// Out: a pipeline's return code ([`ST_INGRESS`], [`ST_EGRESS`]).
    rc: i64,
    /// Out: bytes emitted ([`ST_CSUM_LEFT`]).
    n: u64,
    /// Per-port destinations (added for the direct writes of a burst, `switch::burst`): when
    /// the egress port is below `nport_out` and `port_out[port]` is not null, the packet is
    /// deparsed there instead of at `out` (same room). Null / 0: always at `out`.
    port_out: *const *mut u8,
    nport_out: u64,
    /// Out, summed over the packets since [`LaneCtx::flush_parser`]: parser states entered,
    /// work units (each packet's states / [`crate::exec::STATES_PER_UNIT`], rounded down) and
    /// parses that ran out of states (`ParserTimeout`). The generated code adds to them, so a
    /// burst's packets need no per-packet Rust for the parser's budget.
    parsed_states: u64,
    parser_units: u64,
    parser_timeouts: u64,
}

// The pipelines take the lane context as their own: it must start with it.
const _: () = assert!(offset_of!(LaneCtx, burst) == 0);

impl LaneCtx {
    pub fn new() -> LaneCtx {
        LaneCtx {
            burst: BurstCtx::new(),
            data: std::ptr::null(),
            len: 0,
            port: 0,
            now: 0,
            nqueues: 1,
            out: std::ptr::null_mut(),
            emit_off: std::ptr::null_mut(),
            stack_next: std::ptr::null_mut(),
            cursor: 0,
            states: 0,
            eport: 0,
            rc: 0,
            n: 0,
            port_out: std::ptr::null(),
            nport_out: 0,
            parsed_states: 0,
            parser_units: 0,
            parser_timeouts: 0,
        }
    }
}

impl LaneCtx {
    /// The per-port destinations of the next packets (`tbl`: `n` pointers indexed by egress
    /// port, null for none; see the field): a packet to a port with one is deparsed there
    /// instead of at [`LaneEntry::call`]'s `out`, with the same room (the caller of `call`
    /// guarantees it for both). Null / 0: none.
    pub fn set_port_out(&mut self, tbl: *const *mut u8, n: usize) {
        self.port_out = tbl;
        self.nport_out = if tbl.is_null() { 0 } else { n as u64 };
    }

    /// Add the parser's counts of the packets run since the last flush to `budget` and start
    /// them again (call before anything reads the budget: after a burst, after one packet).
    #[inline(always)]
    pub fn flush_parser(&mut self, budget: &mut crate::exec::ParserBudget) {
        budget.add(self.parsed_states, self.parser_units, self.parser_timeouts);
        self.parsed_states = 0;
        self.parser_units = 0;
        self.parser_timeouts = 0;
    }
}

impl Default for LaneCtx {
    fn default() -> Self {
        Self::new()
    }
}

/// Where one packet of the generated lane stopped.
#[derive(Debug)]
pub enum LaneEnd {
    /// Deparsed into the output (`bytes` written), to `port`: the headers, the checksums
    /// and the payload; or, when `csum_left`, the headers only (the checksums and the
    /// payload are the caller's).
    Sent {
        bytes: usize,
        port: u32,
        csum_left: bool,
    },
    /// Dropped after `passes` pipeline passes (1: before egress, 2: after it).
    Dropped { passes: u8 },
    /// The ingress pipeline ran (this is its result): the rest is Rust's, from the
    /// divergence test on.
    AfterIngress(Result<(), Fault>),
    /// The egress pipeline ran for `port` (this is its result): the rest is Rust's.
    AfterEgress(Result<(), Fault>, u32),
}

/// The standard-metadata fields the lane function stores or reads (absent: `None`).
pub(super) struct LaneSpec {
    ingress_port: Option<FieldLoc>,
    packet_length: Option<FieldLoc>,
    ingress_ts: Option<FieldLoc>,
    parser_error: Option<FieldLoc>,
    checksum_error: Option<FieldLoc>,
    /// The program reads `checksum_error`: the checksums are verified after the parser
    /// ([`h_verify`]).
    verify: bool,
    mcast_grp: Option<FieldLoc>,
    egress_spec: Option<FieldLoc>,
    egress_port: Option<FieldLoc>,
    egress_ts: Option<FieldLoc>,
    instance_type: Option<FieldLoc>,
    priority: Option<FieldLoc>,
    qid: Option<FieldLoc>,
    queueing: Option<[FieldLoc; 4]>,
    /// The PHV reset of a new packet done in the lane function (`Phv::reset` as constant
    /// stores), when it is small and has nothing variable (no variable-length fields, no
    /// header-union stacks).
    pub(super) reset: Option<Reset>,
}

/// What [`crate::layout::Phv::reset`] writes, fixed at load: zeroed metadata byte ranges,
/// the validity template, and the stacks' next indexes (zero).
pub(super) struct Reset {
    ranges: Vec<(u32, u32)>,
    valid: Vec<u8>,
    stacks: u32,
}

/// Most bytes the lane function's reset stores (beyond that, `Phv::reset` does it).
const MAX_RESET_BYTES: u32 = 1024;

/// Whether a lane function can be generated for `eng` (given a native parser and emit
/// function, the pipelines native or absent): `Err(why not)` when the program has checksum
/// updates the emit function does not compile, or keeps a standard-metadata field the lane
/// touches in anything but a plain slot of at most 8 bytes.
pub(super) fn spec(eng: &Engine, emit_csum: bool) -> Result<LaneSpec, String> {
    let s = &eng.std;
    if !emit_csum && eng.checksums.iter().any(|c| c.update) {
        return Err("checksum updates not compiled".into());
    }
    let total = eng.layout.total_bytes;
    let plain = |f: Option<FieldLoc>| -> Result<Option<FieldLoc>, String> {
        match f {
            Some(l)
                if l.is_valid_bit
                    || l.saturating
                    || l.is_vl
                    || l.width > 64
                    || l.nbytes == 0
                    || l.nbytes > 8
                    || l.off + l.nbytes > total =>
            {
                Err("a standard-metadata field not in a plain slot".into())
            }
            _ => Ok(f),
        }
    };
    let queueing = match s.queueing {
        Some(q) => {
            for f in q {
                plain(Some(f))?;
            }
            Some(q)
        }
        None => None,
    };
    let l = &eng.layout;
    let reset_bytes: u32 = l.metadata_ranges.iter().map(|(a, b)| b - a).sum::<u32>()
        + l.headers.len() as u32
        + 4 * l.stacks.len() as u32;
    let reset = (!l.has_vl
        && l.union_stacks.is_empty()
        && reset_bytes <= MAX_RESET_BYTES
        && l.metadata_ranges.iter().all(|&(a, b)| a <= b && b <= total)
        && l.valid_template.len() == l.headers.len())
    .then(|| Reset {
        ranges: l.metadata_ranges.clone(),
        valid: l.valid_template.iter().map(|v| u8::from(*v)).collect(),
        stacks: l.stacks.len() as u32,
    });
    Ok(LaneSpec {
        reset,
        ingress_port: plain(s.ingress_port.f)?,
        packet_length: plain(s.packet_length.f)?,
        ingress_ts: plain(s.ingress_ts.f)?,
        parser_error: plain(s.parser_error.f)?,
        checksum_error: plain(s.checksum_error.f)?,
        verify: s.checksum_error.f.is_some(),
        mcast_grp: plain(s.mcast_grp.f)?,
        egress_spec: plain(s.egress_spec.f)?,
        egress_port: plain(s.egress_port.f)?,
        egress_ts: plain(s.egress_ts.f)?,
        instance_type: plain(s.instance_type.f)?,
        priority: plain(s.priority.f)?,
        qid: plain(s.qid.f)?,
        queueing,
    })
}

/// What the lane function inlines: the parser, the pipelines, the emit loop and its
/// checksums.
pub(super) struct Calls<'a> {
    pub parser: &'a CParser,
    /// The pipelines' first nodes (inlined too) and their plans.
    pub ingress: Option<GNode>,
    pub egress: Option<GNode>,
    pub pipes: &'a Pipes,
    /// The deparser's emit order.
    pub order: &'a [u32],
    /// The compiled checksum updates after the emit loop (else there are none to run).
    pub csums: Option<&'a [NativeCsum]>,
    /// The target (for the payload's `memcpy` call).
    pub target: TargetFrontendConfig,
}

fn off32(off: usize) -> i32 {
    i32::try_from(off).expect("context offset fits")
}

impl Gen<'_, '_> {
    /// The lane function (see the module comment): `(lane context) -> status`.
    pub(super) fn lane(mut self, sp: &LaneSpec, c: &Calls) {
        let i64t = types::I64;
        let entry = self.b.create_block();
        self.b.append_block_params_for_function_params(entry);
        self.b.switch_to_block(entry);
        let lc = self.b.block_params(entry)[0];
        let ld = |g: &mut Self, off: usize| g.b.ins().load(i64t, mem(), lc, off32(off));
        let phv: Variable = self.b.declare_var(i64t);
        let valid: Variable = self.b.declare_var(i64t);
        let reload = |g: &mut Self| {
            let p = ld(g, offset_of!(PipeCtx, phv));
            let v = ld(g, offset_of!(PipeCtx, valid));
            g.b.def_var(phv, p);
            g.b.def_var(valid, v);
        };
        reload(&mut self);
        if let Some(r) = &sp.reset {
            // `Phv::reset`: metadata zero, the validity template, stack indexes zero.
            let p = self.b.use_var(phv);
            for &(a, b) in &r.ranges {
                for (o, c) in super::chunks(b - a) {
                    let z = self.b.ins().iconst(super::int_type(c), 0);
                    self.b.ins().store(mem(), z, p, off32((a + o) as usize));
                }
            }
            let v = self.b.use_var(valid);
            for (o, c) in super::chunks(r.valid.len() as u32) {
                let bytes = &r.valid[o as usize..(o + c) as usize];
                let x = bytes
                    .iter()
                    .rev()
                    .fold(0i64, |acc, b| (acc << 8) | i64::from(*b));
                let x = self.b.ins().iconst(super::int_type(c), x);
                self.b.ins().store(mem(), x, v, off32(o as usize));
            }
            if r.stacks > 0 {
                let sn = ld(&mut self, offset_of!(LaneCtx, stack_next));
                let z = self.b.ins().iconst(types::I32, 0);
                for k in 0..r.stacks {
                    self.b.ins().store(mem(), z, sn, off32(4 * k as usize));
                }
            }
        }
        let put = |g: &mut Self, f: &Option<FieldLoc>, v: ir::Value| {
            if let Some(f) = f {
                g.write_field(phv, f, v);
            }
        };
        let get = |g: &mut Self, f: &Option<FieldLoc>| match f {
            Some(f) => {
                let (p, v) = (g.b.use_var(phv), g.b.use_var(valid));
                g.key_field(p, v, f)
            }
            None => g.b.ins().iconst(i64t, 0),
        };
        // Return `code` (a constant status) from here.
        let ret = |g: &mut Self, code: i64| {
            let v = g.b.ins().iconst(i64t, code);
            g.b.ins().return_(&[v]);
        };
        // Continue in a new block when `cond` is zero, else return `code`.
        let bail_if = |g: &mut Self, cond: ir::Value, code: i64| {
            let (out, on) = (g.b.create_block(), g.b.create_block());
            // Out of line: the common case falls through.
            g.b.set_cold_block(out);
            g.b.ins().brif(cond, out, &[], on, &[]);
            g.b.switch_to_block(out);
            ret(g, code);
            g.b.switch_to_block(on);
        };

        // Ingress metadata, parse.
        // (A context word is loaded only where a field needs it: an unused load is not
        // removed by the code generator.)
        if sp.ingress_port.is_some() {
            let port = ld(&mut self, offset_of!(LaneCtx, port));
            put(&mut self, &sp.ingress_port, port);
        }
        let len = ld(&mut self, offset_of!(LaneCtx, len));
        put(&mut self, &sp.packet_length, len);
        if sp.ingress_ts.is_some() {
            let now = ld(&mut self, offset_of!(LaneCtx, now));
            put(&mut self, &sp.ingress_ts, now);
        }
        let (p, v) = (self.b.use_var(phv), self.b.use_var(valid));
        let data = ld(&mut self, offset_of!(LaneCtx, data));
        let cursor = lc;
        let stacks = if self.eng.layout.stacks.is_empty() {
            self.b.ins().iconst(i64t, 0)
        } else {
            ld(&mut self, offset_of!(LaneCtx, stack_next))
        };
        // The parser inlined: the PHV pointers and the packet stay in registers.
        let max_states = ld(&mut self, offset_of!(LaneCtx, states));
        let (err, parsed, left) = self.parse_body(c.parser, p, v, data, len, stacks, max_states);
        self.b
            .ins()
            .store(mem(), parsed, cursor, off32(offset_of!(LaneCtx, cursor)));
        // The parser's budget, summed in the context (`LaneCtx::flush_parser`): `left` is
        // `u64::MAX` when the packet ran out of states (it entered all `max_states`).
        let out_of = self.b.ins().icmp_imm(IntCC::Equal, left, -1);
        let rest = self.b.ins().isub(max_states, left);
        let used = self.b.ins().select(out_of, max_states, rest);
        let units = self.b.ins().ushr_imm(
            used,
            i64::from(crate::exec::STATES_PER_UNIT.trailing_zeros()),
        );
        let timeout = self.b.ins().uextend(i64t, out_of);
        for (field, add) in [
            (offset_of!(LaneCtx, parsed_states), used),
            (offset_of!(LaneCtx, parser_units), units),
            (offset_of!(LaneCtx, parser_timeouts), timeout),
        ] {
            let sum = ld(&mut self, field);
            let sum = self.b.ins().iadd(sum, add);
            self.b.ins().store(mem(), sum, lc, off32(field));
        }
        let zero = self.b.ins().iconst(i64t, 0);
        let bad = if sp.verify {
            // `h_verify(lc)`: 0 or 1, negative on a fault (back to Rust as the ingress
            // pipeline's fault).
            let mut sig = ir::Signature::new(self.b.func.signature.call_conv);
            sig.params.push(ir::AbiParam::new(i64t));
            sig.returns.push(ir::AbiParam::new(i64t));
            let sig = self.b.import_signature(sig);
            let addr = h_verify as *const () as usize;
            let callee = self.b.ins().iconst(i64t, addr as i64);
            let call = self.b.ins().call_indirect(sig, callee, &[lc]);
            let bad = self.b.inst_results(call)[0];
            let failed = self.b.ins().icmp_imm(IntCC::SignedLessThan, bad, 0);
            let fault = self.b.ins().iconst(i64t, FAULT);
            self.b
                .ins()
                .store(mem(), fault, lc, off32(offset_of!(LaneCtx, rc)));
            bail_if(&mut self, failed, ST_INGRESS);
            bad
        } else {
            zero
        };
        put(&mut self, &sp.parser_error, err);
        put(&mut self, &sp.checksum_error, bad);
        self.b
            .ins()
            .store(mem(), zero, lc, off32(offset_of!(PipeCtx, touched)));

        // A pipeline: its return code stored; back to Rust with `code` unless it ended
        // normally with no helper touching the packet's registers.
        let pipe = |g: &mut Self, init: GNode, code: i64| {
            // The PHV pointers stay in `phv` and `valid` (the body reloads them after a
            // helper call).
            let r = g.pipeline_body(init, c.pipes, lc, Some((phv, valid)));
            let t = ld(g, offset_of!(PipeCtx, touched));
            let off = g.b.ins().bor(r, t);
            // Back to Rust (out of line) with the return code in `rc`.
            let (out, on) = (g.b.create_block(), g.b.create_block());
            g.b.set_cold_block(out);
            g.b.ins().brif(off, out, &[], on, &[]);
            g.b.switch_to_block(out);
            g.b.ins()
                .store(mem(), r, lc, off32(offset_of!(LaneCtx, rc)));
            ret(g, code);
            g.b.switch_to_block(on);
        };
        if let Some(f) = c.ingress {
            pipe(&mut self, f, ST_INGRESS);
        }
        if sp.mcast_grp.is_some() {
            let m = get(&mut self, &sp.mcast_grp);
            self.b
                .ins()
                .store(mem(), zero, lc, off32(offset_of!(LaneCtx, rc)));
            bail_if(&mut self, m, ST_INGRESS);
        }
        let drop_port = ld(&mut self, offset_of!(PipeCtx, drop_port));
        let spec = get(&mut self, &sp.egress_spec);
        let prio = get(&mut self, &sp.priority);
        let nq = ld(&mut self, offset_of!(LaneCtx, nqueues));
        let d1 = self.b.ins().icmp(IntCC::Equal, spec, drop_port);
        let d2 = self
            .b
            .ins()
            .icmp(IntCC::UnsignedGreaterThanOrEqual, prio, nq);
        let dropped = self.b.ins().bor(d1, d2);
        bail_if(&mut self, dropped, ST_DROP_INGRESS);

        // Enqueued and dequeued at once (empty queue), the egress metadata.
        let eport = self.b.ins().ireduce(types::I32, spec);
        let eport = self.b.ins().uextend(i64t, eport);
        self.b
            .ins()
            .store(mem(), eport, lc, off32(offset_of!(LaneCtx, eport)));
        put(&mut self, &sp.instance_type, zero);
        let now = if sp.queueing.is_some() || sp.egress_ts.is_some() {
            ld(&mut self, offset_of!(LaneCtx, now))
        } else {
            zero
        };
        if let Some([ts, qd, dt, dq]) = &sp.queueing {
            put(&mut self, &Some(*ts), now);
            put(&mut self, &Some(*qd), zero);
            put(&mut self, &Some(*dt), zero);
            put(&mut self, &Some(*dq), zero);
            put(&mut self, &sp.qid, prio);
        }
        put(&mut self, &sp.egress_ts, now);
        put(&mut self, &sp.egress_port, eport);
        let next = self.b.ins().iadd_imm(drop_port, 1);
        put(&mut self, &sp.egress_spec, next);
        if sp.packet_length.is_some() {
            let pkt = ld(&mut self, offset_of!(PipeCtx, pkt));
            let lr = self
                .b
                .ins()
                .load(types::I32, mem(), pkt, off32(offset_of!(Pkt, length_reg)));
            let lr = self.b.ins().uextend(i64t, lr);
            put(&mut self, &sp.packet_length, lr);
        }
        if let Some(f) = c.egress {
            pipe(&mut self, f, ST_EGRESS);
        }
        let spec = get(&mut self, &sp.egress_spec);
        let drop_port = ld(&mut self, offset_of!(PipeCtx, drop_port));
        let dropped = self.b.ins().icmp(IntCC::Equal, spec, drop_port);
        bail_if(&mut self, dropped, ST_DROP_EGRESS);

        // Deparse straight into the output.
        let (p, v) = (self.b.use_var(phv), self.b.use_var(valid));
        let out = {
            // The port's own destination when the context has one for it (`port_out`).
            let out = ld(&mut self, offset_of!(LaneCtx, out));
            let np = ld(&mut self, offset_of!(LaneCtx, nport_out));
            let inr = self.b.ins().icmp(IntCC::UnsignedLessThan, eport, np);
            let (tb, join) = (self.b.create_block(), self.b.create_block());
            self.b.append_block_param(join, i64t);
            self.b.ins().brif(inr, tb, &[], join, &[out.into()]);
            self.b.switch_to_block(tb);
            let tbl = ld(&mut self, offset_of!(LaneCtx, port_out));
            let at = self.b.ins().ishl_imm(eport, 3);
            let at = self.b.ins().iadd(tbl, at);
            let d = self.b.ins().load(i64t, mem(), at, 0);
            let some = self.b.ins().icmp_imm(IntCC::NotEqual, d, 0);
            let d = self.b.ins().select(some, d, out);
            self.b.ins().jump(join, &[d.into()]);
            self.b.switch_to_block(join);
            self.b.block_params(join)[0]
        };
        let offs = ld(&mut self, offset_of!(LaneCtx, emit_off));
        // The emit loop and checksums inlined; checksums left to Rust: the bytes in `n`.
        let left = self.b.create_block();
        self.b.set_cold_block(left);
        self.b.append_block_param(left, i64t);
        let n = self.emit_body(c.order, c.csums, p, v, out, offs, left);
        let ok = self.b.create_block();
        self.b.ins().jump(ok, &[]);
        self.b.switch_to_block(left);
        let bytes = self.b.block_params(left)[0];
        self.b
            .ins()
            .store(mem(), bytes, lc, off32(offset_of!(LaneCtx, n)));
        ret(&mut self, ST_CSUM_LEFT);
        self.b.switch_to_block(ok);
        // The payload after the headers: `data[min(cursor, len)..]` (one `memcpy`).
        let cur = self.b.ins().umin(parsed, len);
        let src = self.b.ins().iadd(data, cur);
        let dst = self.b.ins().iadd(out, n);
        let size = self.b.ins().isub(len, cur);
        self.b.call_memcpy(c.target, dst, src, size);
        let total = self.b.ins().iadd(n, size);
        self.b.ins().return_(&[total]);
        self.b.seal_all_blocks();
        self.b.finalize();
    }
}

/// The checksum verification of the packet the lane context points at
/// ([`Engine::verify_checksums`]): 1 if a checksum is wrong, 0 if not; on a panic the fault is
/// left in the context and the result is -1.
extern "C" fn h_verify(lc: *mut LaneCtx) -> i64 {
    // SAFETY: called only by the lane function with the context `Native::run_lane` gave it,
    // whose engine, state and packet pointers `BurstCtx::enter` set from live exclusive
    // borrows that nothing else uses during the call; these borrows end before returning.
    let c = unsafe { &mut (*lc).burst.0 };
    let (eng, st, pkt) = unsafe { (&*c.eng, &mut *c.st, &*c.pkt) };
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        eng.verify_checksums(&mut st.ext, pkt)
    }));
    match r {
        Ok(bad) => i64::from(bad),
        Err(_) => {
            c.fault = Some(Fault("internal error in a checksum verification".into()));
            -1
        }
    }
}

impl Native {
    /// Whether the fast lane's body runs as one generated function ([`Native::run_lane`]).
    pub fn has_lane(&self) -> bool {
        self.lane.is_some()
    }

    /// Most bytes the emit function writes (the headers of one packet).
    pub fn emit_max(&self) -> usize {
        self.emit_max
    }

    /// Whether that function resets the PHV itself (its caller then skips `Phv::reset`).
    pub fn lane_resets_phv(&self) -> bool {
        self.lane.is_some() && self.lane_resets
    }

    /// One packet through the generated lane (see the module comment): `pkt` is a fresh
    /// instance of `data` (not copied into it) arriving on `port` at `now`, its PHV reset
    /// unless [`Native::lane_resets_phv`] (then reset here, by the function); the output bytes
    /// go to `out` (cleared here; the payload is not appended). `None` when there is no lane
    /// function. `pkt.payload_off` is set in every case.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub fn run_lane(
        &self,
        lc: &mut LaneCtx,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        data: &[u8],
        port: u32,
        now: u64,
        nqueues: u64,
        out: &mut Vec<u8>,
        emit_off: &mut Vec<u32>,
    ) -> Option<LaneEnd> {
        let entry = self.lane_enter(lc, eng, st, pkt, now, nqueues, emit_off)?;
        out.clear();
        out.reserve(entry.room(data.len()));
        // SAFETY: `lane_enter` just pointed the context at these live borrows of `eng`, `st`,
        // `pkt` and `emit_off`, untouched until the call returns; `out`'s spare capacity is at
        // least `entry.room(data.len())` bytes (reserved just above) and cannot overlap `data`
        // (a shared borrow beside `out`'s exclusive one).
        let r = unsafe {
            entry.call(
                lc,
                data,
                port,
                out.spare_capacity_mut().as_mut_ptr().cast::<u8>(),
            )
        };
        lc.flush_parser(&mut st.parser);
        let end = self.lane_status(r, lc, pkt, data.len());
        if let LaneEnd::Sent { bytes, .. } = end {
            // SAFETY: `lane_status` bounds `bytes` by the room reserved above; every byte of
            // `[0, bytes)` was written by the call (`LaneEntry::call`'s contract).
            unsafe { out.set_len(bytes) };
        }
        Some(end)
    }

    /// Point `lc` at a burst's packet instance, state and engine, once for the burst (the
    /// lane function's fixed inputs: the pipeline context, the clock, the priority queues,
    /// the emit offsets, the stack indexes), after the checks that make the later calls
    /// safe (the PHV and its arrays belong to this program, `emit_off` is long enough).
    /// `None` when there is no lane function. The context is valid for
    /// [`LaneEntry::call`] while these borrows are not used otherwise; after anything else
    /// touched them (a packet handed to the general path, a new packet instance), enter again.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn lane_enter(
        &self,
        lc: &mut LaneCtx,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        now: u64,
        nqueues: u64,
        emit_off: &mut Vec<u32>,
    ) -> Option<LaneEntry> {
        let f = self.lane?;
        self.check_phv(&pkt.phv);
        assert!(
            pkt.phv.stack_next.len() == self.stacks,
            "PHV does not belong to this program"
        );
        if emit_off.len() < self.headers {
            emit_off.resize(self.headers, 0);
        }
        lc.states = st.parser.max_states;
        lc.burst.enter(eng, st, pkt);
        lc.now = now;
        lc.nqueues = nqueues;
        lc.emit_off = emit_off.as_mut_ptr();
        lc.stack_next = pkt.phv.stack_next.as_mut_ptr();
        // No per-port destinations unless the caller sets them again (`set_port_out`).
        lc.set_port_out(std::ptr::null(), 0);
        Some(LaneEntry {
            f,
            emit_max: self.emit_max,
        })
    }

    /// What the status `r` of [`LaneEntry::call`] (for a frame of `len` bytes) means; sets
    /// `pkt.payload_off` (the parsed length). [`LaneEnd::Sent`]'s `bytes` is bounded by
    /// [`LaneEntry::room`].
    #[inline(always)]
    pub fn lane_status(&self, r: i64, lc: &mut LaneCtx, pkt: &mut Pkt, len: usize) -> LaneEnd {
        pkt.payload_off = lc.cursor as usize;
        let port = lc.eport as u32;
        let sent = |n: u64, left: bool| LaneEnd::Sent {
            bytes: (n as usize).min(self.emit_max + len),
            port,
            csum_left: left,
        };
        match r {
            n if n >= 0 => sent(n as u64, false),
            ST_DROP_INGRESS => LaneEnd::Dropped { passes: 1 },
            ST_DROP_EGRESS => LaneEnd::Dropped { passes: 2 },
            ST_INGRESS => LaneEnd::AfterIngress(lc.burst.result(lc.rc, pkt)),
            ST_EGRESS => LaneEnd::AfterEgress(lc.burst.result(lc.rc, pkt), port),
            ST_CSUM_LEFT => sent(lc.n, true),
            _ => unreachable!("lane status {r}"),
        }
    }
}

/// The generated lane function of a program, for the packets of a burst
/// ([`Native::lane_enter`]).
#[derive(Clone, Copy)]
pub struct LaneEntry {
    f: LaneFn,
    emit_max: usize,
}

impl LaneEntry {
    /// Most bytes one packet of a `len`-byte frame writes at the output (headers and payload).
    #[inline(always)]
    pub fn room(&self, len: usize) -> usize {
        self.emit_max + len
    }

    /// Whether a status of [`LaneEntry::call`] is "forwarded, this many bytes written".
    #[inline(always)]
    pub fn sent(r: i64) -> Option<usize> {
        (r >= 0).then_some(r as usize)
    }

    /// Whether a status is a drop, and after how many pipeline passes (1 or 2).
    #[inline(always)]
    pub fn dropped(r: i64) -> Option<u64> {
        match r {
            ST_DROP_INGRESS => Some(1),
            ST_DROP_EGRESS => Some(2),
            _ => None,
        }
    }

    /// The egress port of the last packet that went past the after-ingress decision.
    #[inline(always)]
    pub fn port(lc: &LaneCtx) -> u32 {
        lc.eport as u32
    }

    /// One packet of `data` arriving on `port` through the lane function, its output written
    /// at `out`: the status (see [`LaneEntry::sent`], [`LaneEntry::dropped`], else
    /// [`Native::lane_status`]). The packet instance `lc` points at must have been renewed
    /// for this frame (its registers and lengths; its PHV too unless the function resets it).
    ///
    /// # Safety
    /// `lc` was set by [`Native::lane_enter`] (which returned `self`) over borrows that are
    /// still live and have not been used otherwise since (nothing else reads or writes the
    /// engine's state, the packet instance or the emit offsets during the call); `out` is
    /// valid for writes of [`LaneEntry::room`]`(data.len())` bytes and does not overlap `data`,
    /// and so is every non-null destination of [`LaneCtx::set_port_out`]'s table.
    #[inline(always)]
    pub unsafe fn call(&self, lc: &mut LaneCtx, data: &[u8], port: u32, out: *mut u8) -> i64 {
        lc.data = data.as_ptr();
        lc.len = data.len() as u64;
        lc.port = u64::from(port);
        lc.out = out;
        // SAFETY: the parser, pipelines and emit function it calls are this module's,
        // generated for this engine's layout, and `lane_enter` checked the sizes (the PHV,
        // validity and stack-index arrays have the layout's lengths, `emit_off` at least
        // `headers` long): their own safety arguments hold (see `Native::parse_bytes`,
        // `Pipes::run_at_in`, `Native::emit_csum`): the parser reads `data` only below `len`;
        // the pipelines get the context `lane_enter` pointed at live exclusive borrows of the
        // engine, state and packet, untouched until the call returns (the caller's contract);
        // the emit function writes at most `emit_max` bytes at `out`, then the lane code copies
        // at most `data.len()` payload bytes after them from `data` (the caller gave room for
        // both, not overlapping `data`), and `u32`s below `headers` in `emit_off`. The lane
        // code itself stores only inside the PHV (plain standard-metadata slots, checked in
        // `spec`) and into the context's own words, and reads `length_reg` of the packet the
        // context points at.
        unsafe { (self.f)(lc) }
    }
}
