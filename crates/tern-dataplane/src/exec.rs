//! Packet-time execution: parser, checksums, actions, tables, pipelines, deparser.
//!
//! Everything here works on resolved indices from [`crate::compile`]; nothing looks a name up.

use std::collections::HashSet;

use crate::compile::*;
use crate::expr::{
    self, eval_bool, eval_data, eval_header, eval_union, lookahead_slot, Cx, RegArray, Value,
};
use crate::externs::Meter;
use crate::hash;
use crate::layout::{bits_to_slot, slot_to_bits, BitPacker, FieldLoc, Phv, StdSlot, WireStep};
use crate::table::{Entry, EntryAction, EntryStore, Profile};
use tern_model::{KeyElem, MatchKind, MeterType};
use tern_runtime::CounterValue;

/// Per-packet registers the program cannot read (`simple-switch.md` §2.7).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PktRegs {
    /// `(session, field list id)` of the last clone call.
    pub clone: Option<(u32, i64)>,
    pub resubmit: i64,
    pub recirculate: i64,
    pub digest: Option<i64>,
    pub truncate: Option<u32>,
    pub exit: bool,
    /// A `remove_header` found the packet-length register smaller than the header (it
    /// saturated at 0): the behaviour cache does not record such a run.
    pub len_saturated: bool,
}

/// One packet instance in flight.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub phv: Phv,
    /// The bytes the parser ran on.
    pub data: Vec<u8>,
    /// First unparsed byte of `data`.
    pub payload_off: usize,
    /// Length counters and meters see.
    pub ingress_len: u32,
    /// The packet-length register (`add_header` / `remove_header` adjust it).
    pub length_reg: u32,
    pub ingress_port: u32,
    pub regs: PktRegs,
    pub enq_ts: u64,
}

/// Stages of [`Probe`]'s per-stage timing.
pub mod stage {
    /// Packet instance and standard metadata at receive.
    pub const RECEIVE: usize = 0;
    /// Parser and checksum verification.
    pub const PARSE: usize = 1;
    /// Table keys, lookups, conditions and the control-flow walk.
    pub const TABLES: usize = 2;
    /// Actions (table actions and direct action calls).
    pub const ACTIONS: usize = 3;
    /// Between the pipelines: ingress epilogue (clone/digest/multicast/drop decisions),
    /// enqueue, the job queue, egress standard metadata.
    pub const QUEUE: usize = 4;
    /// Checksum updates, deparser, payload copy.
    pub const DEPARSE: usize = 5;
    /// Output frame hand-off and packet recycling.
    pub const TRANSMIT: usize = 6;
    /// Number of stages.
    pub const COUNT: usize = 7;
    /// Stage names, in index order.
    pub const NAMES: [&str; COUNT] = [
        "receive", "parse", "tables", "actions", "queue", "deparse", "transmit",
    ];
}

/// Per-stage wall-clock accounting (off unless enabled: one branch per stage boundary).
/// Each [`Probe::mark`] charges the time since the previous mark to a stage and counts one
/// clock read against it, so callers can subtract the clock's own cost.
#[derive(Clone, Debug)]
pub struct Probe {
    last: std::time::Instant,
    /// Nanoseconds charged to each stage.
    pub ns: [u64; stage::COUNT],
    /// Marks (clock reads) charged to each stage.
    pub marks: [u64; stage::COUNT],
}

impl Probe {
    pub fn new() -> Probe {
        Probe {
            last: std::time::Instant::now(),
            ns: [0; stage::COUNT],
            marks: [0; stage::COUNT],
        }
    }

    /// Restart the interval without charging it (at the start of a packet).
    #[inline]
    pub fn start(&mut self) {
        self.last = std::time::Instant::now();
    }

    /// Charge the time since the last mark to stage `s`.
    #[inline]
    pub fn mark(&mut self, s: usize) {
        let now = std::time::Instant::now();
        self.ns[s] += now.duration_since(self.last).as_nanos() as u64;
        self.marks[s] += 1;
        self.last = now;
    }
}

impl Default for Probe {
    fn default() -> Self {
        Probe::new()
    }
}

/// Charge the time since the last mark to stage `s`, if timing is on.
#[inline(always)]
pub fn mark(ext: &mut ExternState, s: usize) {
    if let Some(p) = ext.probe.as_deref_mut() {
        p.mark(s);
    }
}

/// Mutable state of the externs an action can touch.
#[derive(Clone, Debug, Default)]
pub struct ExternState {
    /// Per-stage timing, when enabled ([`crate::Switch::set_stage_timing`]).
    pub probe: Option<Box<Probe>>,
    /// Per-packet trace, when enabled ([`crate::Switch::set_trace`]).
    pub trace: Option<Box<crate::trace::Trace>>,
    pub regs: Vec<RegArray>,
    pub counters: Vec<Vec<CounterValue>>,
    pub meters: Vec<Vec<Meter>>,
    pub vsets: Vec<HashSet<Vec<u8>>>,
    pub rng: u64,
    pub rr: Vec<u64>,
    pub now_us: u64,
    pub log: Vec<String>,
    /// `round_robin_consistent`: the value each (calculation, input) got first.
    pub rr_seen: std::collections::HashMap<(usize, Vec<u8>), u64>,
    scratch: Vec<u8>,
    /// While the behaviour cache records a miss: the tables applied and counters counted
    /// ([`crate::bcache::Rec`]); the pipeline then runs interpreted.
    pub rec: Option<Box<crate::bcache::Rec>>,
}

/// Table state: entries plus the default entry.
#[derive(Clone, Debug, Default)]
pub struct TableState {
    pub store: EntryStore,
    pub default: Option<EntryAction>,
}

/// All mutable state of a program instance.
#[derive(Clone, Debug, Default)]
pub struct State {
    pub tables: Vec<TableState>,
    pub profiles: Vec<Profile>,
    pub ext: ExternState,
    /// Reused table-key buffer (no per-packet allocation).
    pub key_buf: Vec<u8>,
    /// Output offset of each header emitted by the current deparse (planned checksums).
    pub emit_off: Vec<u32>,
    /// The parser's bound on states per packet and what it counted ([`ParserBudget`]).
    pub parser: ParserBudget,
}

/// Default of [`ParserBudget::max_states`]: the bound a plain switch has always had.
pub const MAX_PARSER_STATES: u64 = 100_000;

/// A switch's bound on parser states per packet and the states its parsers ran. A packet
/// whose parser would enter one state more than `max_states` stops there with
/// `error.ParserTimeout` (P4-16 core; BMv2 has no bound — a parser loop that extracts
/// nothing runs forever there): like every parser error in simple_switch it is not dropped,
/// ingress sees `standard_metadata.parser_error` and the unparsed bytes stay payload.
/// Both the interpreter and the generated parser read `max_states` per packet (the generated
/// parser takes it in its cursor word's neighbour: [`crate::jit::Native::parse_bytes`]).
#[derive(Clone, Copy, Debug)]
pub struct ParserBudget {
    /// States one packet may enter (at least 1).
    pub max_states: u64,
    /// States entered by every packet parsed so far (a count of work, for a scheduler).
    pub states: u64,
    /// Packets whose parser stopped at `max_states` (`error.ParserTimeout`).
    pub timeouts: u64,
    /// Work units of long parses: each packet adds its states / [`STATES_PER_UNIT`] (rounded
    /// down), so an ordinary parse adds nothing and a loop pays for its length
    /// ([`crate::Switch::parser_counts`]; tern-virt's fair scheduler adds it to the passes).
    pub units: u64,
}

/// Parser states charged as one unit of work ([`ParserBudget::units`]), about a pipeline
/// pass: a state that only selects and moves on is a few instructions, a pass hundreds.
pub const STATES_PER_UNIT: u64 = 64;
// The generated lane divides by it with a shift.
const _: () = assert!(STATES_PER_UNIT.is_power_of_two());

impl Default for ParserBudget {
    fn default() -> Self {
        ParserBudget {
            max_states: MAX_PARSER_STATES,
            states: 0,
            timeouts: 0,
            units: 0,
        }
    }
}

impl ParserBudget {
    /// Count a packet that entered `max_states - left` states, or, `left == u64::MAX`, ran
    /// out of them (`ParserTimeout` after `max_states`).
    #[inline(always)]
    pub fn count(&mut self, left: u64) {
        let used = if left == u64::MAX {
            self.timeouts += 1;
            self.max_states
        } else {
            self.max_states - left
        };
        self.states += used;
        self.units += used / STATES_PER_UNIT;
    }

    /// Add counts summed elsewhere (the generated lane's, `LaneCtx::flush_parser`): states
    /// entered, work units (per packet, as [`ParserBudget::count`] rounds them) and timeouts.
    #[inline(always)]
    pub fn add(&mut self, states: u64, units: u64, timeouts: u64) {
        self.states += states;
        self.units += units;
        self.timeouts += timeouts;
    }
}

impl ExternState {
    pub(crate) fn next_rand(&mut self) -> u64 {
        // xorshift64*: deterministic for a given seed.
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// A fault during execution: the packet is dropped (BMv2 would abort).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fault(pub String);

type XR<T> = Result<T, Fault>;

fn fault(m: &str) -> Fault {
    Fault(m.to_string())
}

/// Store a value into a field slot (truncating/wrapping/saturating).
#[inline]
pub fn store_field(phv: &mut Phv, f: &FieldLoc, v: &Value) {
    if f.is_valid_bit {
        return;
    }
    let s = &mut phv.bytes[f.off as usize..(f.off + f.nbytes) as usize];
    v.store(f.width, f.signed, f.saturating, s);
}

/// Store a non-negative value into a field: the ≤ 64-bit path writes the low `width` bits
/// directly (what [`store_field`] does with `Value::Small(v)`, without the generic conversion).
#[inline]
pub fn store_field_u64(phv: &mut Phv, f: &FieldLoc, v: u64) {
    if f.is_valid_bit {
        return;
    }
    if f.width <= 64 && !f.saturating && !f.is_vl {
        // Unsigned and signed stores wrap identically to the low `width` bits.
        phv.write_u64(f, v);
    } else {
        store_field(phv, f, &Value::Small(v as i128));
    }
}

#[inline]
fn store_u64(phv: &mut Phv, f: &Option<FieldLoc>, v: u64) {
    if let Some(f) = f {
        store_field_u64(phv, f, v);
    }
}

/// An entry action resolved to the action to run and its data (borrowed from the entry).
pub(crate) type Resolved<'s> = Option<(u32, &'s [Vec<u8>])>;

impl Engine {
    pub(crate) fn cx<'a>(
        &'a self,
        phv: &'a Phv,
        locals: &'a [Vec<u8>],
        ext: &'a ExternState,
        pkt: &'a [u8],
        cursor: usize,
    ) -> Cx<'a> {
        Cx {
            layout: &self.layout,
            phv,
            locals,
            regs: &ext.regs,
            pkt,
            cursor,
        }
    }

    /// Standard-metadata accessors (inlined: most calls are on absent fields, a single test).
    #[inline]
    pub fn set_std(&self, phv: &mut Phv, f: fn(&Std) -> &StdSlot, v: u64) {
        phv.write_std(f(&self.std), v);
    }
    #[inline]
    pub fn get_std(&self, phv: &Phv, f: fn(&Std) -> &StdSlot) -> u64 {
        phv.read_std(f(&self.std))
    }

    /// Header wire size in bytes (fixed part plus current VL width).
    pub fn header_bytes(&self, phv: &Phv, h: u32) -> u32 {
        let hl = &self.layout.headers[h as usize];
        (hl.fixed_bits + phv.vl_width[h as usize]).div_ceil(8)
    }

    fn set_valid(&self, phv: &mut Phv, h: u32) {
        phv.valid[h as usize] = true;
        if let Some(u) = self.layout.headers[h as usize].union {
            for m in &self.layout.unions[u as usize] {
                if *m != h {
                    phv.valid[*m as usize] = false;
                }
            }
        }
    }

    // ------------------------------------------------------------------ parser

    fn extract_into(
        &self,
        pkt: &mut Pkt,
        cursor: &mut usize,
        h: u32,
        vl_bits: Option<u32>,
    ) -> Result<(), i64> {
        let hl = &self.layout.headers[h as usize];
        let vl = vl_bits.unwrap_or(0);
        let total_bits = hl.fixed_bits as u64 + vl as u64;
        let nbytes = total_bits.div_ceil(8) as usize;
        // BMv2 (`parser.cpp`, `extract_VL`): first the packet must hold the whole header
        // (PacketTooShort), only then is its length checked against the header's maximum
        // (HeaderTooShort). Nothing is written to the header before both checks pass.
        if nbytes > pkt.data.len().saturating_sub(*cursor) {
            return Err(self.errors.packet_too_short);
        }
        if let Some(vi) = hl.vl_field {
            if vl > hl.fields[vi as usize].width {
                return Err(self.errors.header_too_short);
            }
        }
        if hl.packed {
            let o = hl.off as usize;
            pkt.phv.bytes[o..o + nbytes].copy_from_slice(&pkt.data[*cursor..*cursor + nbytes]);
            self.set_valid(&mut pkt.phv, h);
            *cursor += nbytes;
            return Ok(());
        }
        if let (Some(steps), 0) = (&hl.wire, vl) {
            // Load-time plan: runs of whole-byte fields copied, the others through a 64-bit
            // window (bits past the header read whatever follows and are shifted out).
            let src = &pkt.data[*cursor..];
            let bytes = &mut pkt.phv.bytes;
            for s in steps {
                match *s {
                    WireStep::Copy { wire, slot, len } => {
                        let (w, o, n) = (wire as usize, slot as usize, len as usize);
                        bytes[o..o + n].copy_from_slice(&src[w..w + n]);
                    }
                    WireStep::Bits {
                        bit,
                        width,
                        slot,
                        nbytes,
                    } => {
                        let o = slot as usize;
                        let v = crate::layout::read_bits(src, bit, width);
                        crate::layout::be_write(&mut bytes[o..o + nbytes as usize], v);
                    }
                }
            }
            pkt.phv.vl_width[h as usize] = 0;
            self.set_valid(&mut pkt.phv, h);
            *cursor += nbytes;
            return Ok(());
        }
        let src = &pkt.data[*cursor..*cursor + nbytes];
        let mut bit = 0usize;
        for f in &hl.fields {
            let w = if f.is_vl { vl } else { f.width } as usize;
            let dst = &mut pkt.phv.bytes[f.off as usize..(f.off + f.nbytes) as usize];
            if f.is_vl {
                dst.fill(0);
                let n = w.div_ceil(8);
                let len = dst.len();
                bits_to_slot(src, bit, w, &mut dst[len - n..]);
            } else {
                bits_to_slot(src, bit, w, dst);
            }
            bit += w;
        }
        pkt.phv.vl_width[h as usize] = vl;
        self.set_valid(&mut pkt.phv, h);
        *cursor += nbytes;
        Ok(())
    }

    fn extract_target(
        &self,
        pkt: &mut Pkt,
        cursor: &mut usize,
        t: ETarget,
        vl: Option<u32>,
    ) -> Result<(), i64> {
        match t {
            ETarget::Header(h) => self.extract_into(pkt, cursor, h, vl),
            ETarget::Stack(s) => {
                let next = pkt.phv.stack_next[s as usize] as usize;
                let Some(&h) = self.layout.stacks[s as usize].get(next) else {
                    return Err(self.errors.stack_out_of_bounds);
                };
                self.extract_into(pkt, cursor, h, vl)?;
                pkt.phv.stack_next[s as usize] += 1;
                Ok(())
            }
            ETarget::UnionStack(s, m) => {
                let next = pkt.phv.union_stack_next[s as usize] as usize;
                let Some(&u) = self.layout.union_stacks[s as usize].get(next) else {
                    return Err(self.errors.stack_out_of_bounds);
                };
                let h = self.layout.unions[u as usize][m as usize];
                self.extract_into(pkt, cursor, h, vl)?;
                pkt.phv.union_stack_next[s as usize] += 1;
                Ok(())
            }
        }
    }

    #[inline(always)]
    fn transition_key(&self, pkt: &Pkt, cursor: usize, key: &[KeyElem], out: &mut Vec<u8>) {
        out.clear();
        let phv = &pkt.phv;
        let push_field = |out: &mut Vec<u8>, f: &FieldLoc| {
            if f.is_valid_bit {
                out.push(phv.valid[f.header as usize] as u8);
            } else {
                out.extend_from_slice(phv.slot(f));
            }
        };
        for k in key {
            match *k {
                KeyElem::Field(f) => push_field(out, &self.layout.field(f)),
                KeyElem::StackField { stack, field } => {
                    let next = phv.stack_next[stack as usize];
                    let hs = &self.layout.stacks[stack as usize];
                    if hs.is_empty() {
                        continue;
                    }
                    let h = hs[(next as usize)
                        .saturating_sub(1)
                        .min(hs.len().saturating_sub(1))];
                    push_field(
                        out,
                        &self.layout.field(tern_model::FieldRef { header: h, field }),
                    );
                }
                KeyElem::UnionStackField {
                    stack,
                    member,
                    field,
                } => {
                    let next = phv.union_stack_next[stack as usize];
                    let us = &self.layout.union_stacks[stack as usize];
                    if us.is_empty() {
                        continue;
                    }
                    let u = us[(next as usize)
                        .saturating_sub(1)
                        .min(us.len().saturating_sub(1))];
                    let h = self.layout.unions[u as usize][member as usize];
                    push_field(
                        out,
                        &self.layout.field(tern_model::FieldRef { header: h, field }),
                    );
                }
                KeyElem::Lookahead { offset, width } => {
                    let n = width.div_ceil(8) as usize;
                    let start = out.len();
                    out.resize(start + n, 0);
                    lookahead_slot(&pkt.data, cursor, offset, width, &mut out[start..]);
                }
            }
        }
    }

    /// Run the parser; returns the error code (NoError on success).
    pub fn parse(&self, st: &mut State, pkt: &mut Pkt) -> i64 {
        if let Some(j) = &self.jit {
            // Native code (same semantics); a traced packet takes the interpreter.
            if st.ext.trace.is_none() {
                if let Some(err) = j.parse(pkt, &mut st.parser) {
                    return err;
                }
            }
        }
        self.parse_interpreted(st, pkt)
    }

    /// [`Engine::parse`] by the interpreter, whether or not the parser has native code.
    pub fn parse_interpreted(&self, st: &mut State, pkt: &mut Pkt) -> i64 {
        let Some(p) = &self.parser else {
            pkt.payload_off = 0;
            return self.errors.no_error;
        };
        let mut key = std::mem::take(&mut st.key_buf);
        // Tracing is decided once per stage: the untraced instantiation has no trace code.
        let err = if st.ext.trace.is_some() {
            self.trace_parser_start(&mut st.ext);
            let err = self.parse_states::<true>(st, pkt, p, &mut key);
            self.trace_parser_end(&mut st.ext, err);
            err
        } else {
            self.parse_states::<false>(st, pkt, p, &mut key)
        };
        st.key_buf = key;
        err
    }

    fn parse_states<const TRACE: bool>(
        &self,
        st: &mut State,
        pkt: &mut Pkt,
        p: &CParser,
        key: &mut Vec<u8>,
    ) -> i64 {
        let mut cursor = 0usize;
        let mut state = p.init;
        let max = st.parser.max_states;
        let mut steps = 0u64;
        let mut timed_out = false;
        let mut err = self.errors.no_error;
        'states: while let Some(si) = state {
            if steps == max {
                err = self.errors.parser_timeout;
                timed_out = true;
                break;
            }
            steps += 1;
            let s = &p.states[si as usize];
            if TRACE {
                self.trace_state(&mut st.ext, si);
            }
            for op in &s.ops {
                let r: Result<(), i64> = match op {
                    POp::Extract(t) => {
                        let vl = match t {
                            ETarget::Header(h) => self.vl_from_length_exp(pkt, *h),
                            _ => None,
                        };
                        let r = self.extract_target(pkt, &mut cursor, *t, vl);
                        if TRACE && r.is_ok() {
                            self.trace_extract(&mut st.ext, &pkt.phv, *t);
                        }
                        r
                    }
                    POp::ExtractVl(t, e) => {
                        let cx = self.cx(&pkt.phv, &[], &st.ext, &pkt.data, cursor);
                        match eval_data(e, &cx) {
                            Ok(v) => {
                                let bits = v.to_i64_sat();
                                // BMv2: `nbits % 8 != 0` is ParserInvalidArgument (C++'s
                                // remainder, so -4 too); a negative multiple of 8 asks for
                                // more bytes than any packet has: PacketTooShort.
                                if bits % 8 != 0 {
                                    Err(self.errors.invalid_argument)
                                } else if bits < 0 {
                                    Err(self.errors.packet_too_short)
                                } else {
                                    self.extract_target(
                                        pkt,
                                        &mut cursor,
                                        *t,
                                        Some(bits.min(u32::MAX as i64) as u32),
                                    )
                                }
                            }
                            Err(_) => Err(self.errors.invalid_argument),
                        }
                    }
                    POp::Set(dst, e) => {
                        let cx = self.cx(&pkt.phv, &[], &st.ext, &pkt.data, cursor);
                        let needs = lookahead_need(e, cursor);
                        if needs > pkt.data.len() {
                            Err(self.errors.packet_too_short)
                        } else {
                            match eval_data(e, &cx) {
                                Ok(v) => {
                                    store_field(&mut pkt.phv, dst, &v);
                                    Ok(())
                                }
                                Err(_) => Ok(()),
                            }
                        }
                    }
                    POp::Verify(c, e) => {
                        let cx = self.cx(&pkt.phv, &[], &st.ext, &pkt.data, cursor);
                        match eval_bool(c, &cx) {
                            Ok(true) => Ok(()),
                            _ => Err(eval_data(e, &cx)
                                .map(|v| v.to_i64_sat())
                                .unwrap_or(self.errors.invalid_argument)),
                        }
                    }
                    POp::Shift(n) => {
                        if cursor + *n as usize > pkt.data.len() {
                            Err(self.errors.packet_too_short)
                        } else {
                            cursor += *n as usize;
                            Ok(())
                        }
                    }
                    POp::Advance(e) => {
                        let cx = self.cx(&pkt.phv, &[], &st.ext, &pkt.data, cursor);
                        match eval_data(e, &cx) {
                            Ok(v) => {
                                let bits = v.to_i64_sat();
                                if bits < 0 || bits % 8 != 0 {
                                    Err(self.errors.invalid_argument)
                                } else if cursor + (bits / 8) as usize > pkt.data.len() {
                                    Err(self.errors.packet_too_short)
                                } else {
                                    cursor += (bits / 8) as usize;
                                    Ok(())
                                }
                            }
                            Err(_) => Err(self.errors.invalid_argument),
                        }
                    }
                    POp::Primitive(instrs) => {
                        let _ = self.run_instrs(&mut st.ext, pkt, instrs, &[]);
                        Ok(())
                    }
                };
                if let Err(code) = r {
                    err = code;
                    break 'states;
                }
            }
            // BMv2 (`ParseState::find_next_state`): a select on lookahead bits needs them in
            // the packet, else PacketTooShort.
            if s.lookahead_bytes > pkt.data.len().saturating_sub(cursor) {
                err = self.errors.packet_too_short;
                break 'states;
            }
            self.transition_key(pkt, cursor, &s.key, key);
            if TRACE {
                self.trace_state_key(&mut st.ext, si, key, cursor);
            }
            let mut next = None;
            let mut default = None;
            let mut matched = false;
            for (m, n) in &s.transitions {
                let hit = match m {
                    PMatch::Default => {
                        if default.is_none() {
                            default = Some(*n);
                        }
                        false
                    }
                    PMatch::Value { value, mask } => match mask {
                        None => *key == *value,
                        Some(mask) => key
                            .iter()
                            .zip(value)
                            .zip(mask)
                            .all(|((k, v), m)| k & m == v & m),
                    },
                    PMatch::Vset { vset, mask } => match (st.ext.vsets.get(*vset as usize), mask) {
                        (None, _) => false,
                        (Some(set), None) => set.contains(key.as_slice()),
                        (Some(set), Some(m)) => {
                            let off = key.len().saturating_sub(m.len());
                            let k: Vec<u8> = key[off..].iter().zip(m).map(|(a, b)| a & b).collect();
                            set.contains(&k)
                        }
                    },
                };
                if hit {
                    next = *n;
                    matched = true;
                    break;
                }
            }
            if !matched {
                next = default.flatten();
            }
            state = next;
        }
        pkt.payload_off = cursor;
        st.parser
            .count(if timed_out { u64::MAX } else { max - steps });
        err
    }

    #[inline(always)]
    fn vl_from_length_exp(&self, pkt: &Pkt, h: u32) -> Option<u32> {
        let hl = &self.layout.headers[h as usize];
        hl.vl_field?;
        // A VL header with `length_exp`: the loader guarantees it exists; the expression gives
        // the VL field width in bits. It reads fields already in the PHV.
        let ht = &self.prog.header_types[self.prog.headers[h as usize].header_type as usize];
        let e = ht.length_exp.as_ref()?;
        let ce = crate::compile::compile_free_expr(self, e)?;
        let ext = ExternState::default();
        let cx = self.cx(&pkt.phv, &[], &ext, &pkt.data, 0);
        eval_data(&ce, &cx)
            .ok()
            .map(|v| v.to_i64_sat().max(0) as u32)
    }

    // ------------------------------------------------------------------ checksums and hashes

    /// Compute a calculation over the packet.
    pub fn compute_calc(
        &self,
        ext: &mut ExternState,
        pkt: &Pkt,
        calc: &CCalc,
        rr_slot: usize,
    ) -> u64 {
        let mut buf = std::mem::take(&mut ext.scratch);
        buf.clear();
        let mut packer = BitPacker::new(&mut buf);
        for i in &calc.inputs {
            match i {
                CInput::Field(f) => {
                    if f.is_valid_bit {
                        packer.push(pkt.phv.valid[f.header as usize] as u64, 1);
                    } else if pkt.phv.valid[f.header as usize] {
                        let w = if f.is_vl {
                            pkt.phv.vl_width[f.header as usize]
                        } else {
                            f.width
                        };
                        packer.push_slot(pkt.phv.slot(f), w);
                    }
                }
                CInput::Const { value, bitwidth } => packer.push_slot(value, *bitwidth),
                CInput::Header(h) => {
                    if !pkt.phv.valid[*h as usize] {
                        continue;
                    }
                    for f in &self.layout.headers[*h as usize].fields {
                        let w = if f.is_vl {
                            pkt.phv.vl_width[*h as usize]
                        } else {
                            f.width
                        };
                        packer.push_slot(pkt.phv.slot(f), w);
                    }
                }
                CInput::Fields { header, fields } => {
                    if pkt.phv.valid[*header as usize] {
                        packer.push_fields(&pkt.phv.bytes, fields);
                    }
                }
                CInput::Payload => {
                    // The payload starts on a byte boundary: pad, then append.
                    packer.align_and_extend(&pkt.data[pkt.payload_off.min(pkt.data.len())..]);
                }
            }
        }
        packer.finish();
        if ext.rr.len() <= rr_slot {
            ext.rr.resize(rr_slot + 1, 0);
        }
        let mut rr = ext.rr[rr_slot];
        let v = if calc.algo == hash::Algo::RoundRobinConsistent {
            match ext.rr_seen.get(&(rr_slot, buf.clone())) {
                Some(v) => *v,
                None => {
                    let v = rr;
                    rr += 1;
                    ext.rr_seen.insert((rr_slot, buf.clone()), v);
                    v
                }
            }
        } else {
            hash::compute(&calc.algo, &buf, &mut rr)
        };
        ext.rr[rr_slot] = rr;
        ext.scratch = buf;
        v
    }

    fn checksum_value(&self, ext: &mut ExternState, pkt: &Pkt, c: &CChecksum) -> u64 {
        if c.ipv4 {
            let h = c.target.header;
            let mut bytes = std::mem::take(&mut ext.scratch);
            bytes.clear();
            let mut packer = BitPacker::new(&mut bytes);
            let fields = &self.layout.headers[h as usize].fields;
            if fields.iter().all(|f| f.width <= 64 && !f.is_vl) {
                packer.push_fields(&pkt.phv.bytes, fields);
            } else {
                for f in fields {
                    packer.push_slot(pkt.phv.slot(f), f.width);
                }
            }
            packer.finish();
            if bytes.len() >= 12 {
                bytes[10] = 0;
                bytes[11] = 0;
            }
            let v = hash::csum16(&bytes);
            ext.scratch = bytes;
            return v;
        }
        match c.calc {
            Some(ci) => self.compute_calc(ext, pkt, &self.calcs[ci as usize], 1_000 + ci as usize),
            None => 0,
        }
    }

    #[inline]
    fn checksum_cond(&self, ext: &ExternState, pkt: &Pkt, c: &CChecksum) -> bool {
        match &c.fast_cond {
            // A validity condition (IPv4's `hdr.ipv4.isValid()`) is read here, without a call.
            Some(expr::FastBool::Valid(h)) => pkt.phv.valid[*h as usize],
            Some(f) => f.eval(&pkt.phv),
            None => match &c.cond {
                None => true,
                Some(e) => {
                    eval_bool(e, &self.cx(&pkt.phv, &[], ext, &pkt.data, 0)).unwrap_or(false)
                }
            },
        }
    }

    /// Verify checksums after parsing; true if any failed.
    pub fn verify_checksums(&self, ext: &mut ExternState, pkt: &Pkt) -> bool {
        let mut bad = false;
        for c in &self.checksums {
            if !c.verify
                || !pkt.phv.valid[c.target.header as usize]
                || !self.checksum_cond(ext, pkt, c)
            {
                continue;
            }
            let v = self.checksum_value(ext, pkt, c);
            let mask = if c.target.width >= 64 {
                u64::MAX
            } else {
                (1u64 << c.target.width) - 1
            };
            if v & mask != pkt.phv.read_u64(&c.target) {
                bad = true;
            }
        }
        bad
    }

    /// Update checksums (start of deparse).
    pub fn update_checksums(&self, ext: &mut ExternState, pkt: &mut Pkt) {
        if ext.trace.is_some() {
            self.update_checksums_impl::<true>(ext, pkt)
        } else {
            self.update_checksums_impl::<false>(ext, pkt)
        }
    }

    fn update_checksums_impl<const TRACE: bool>(&self, ext: &mut ExternState, pkt: &mut Pkt) {
        for (i, c) in self.checksums.iter().enumerate() {
            if !c.update || !self.checksum_cond(ext, pkt, c) {
                continue;
            }
            if TRACE {
                self.trace_checksum(ext, i);
            }
            let v = self.checksum_value(ext, pkt, c);
            store_field_u64(&mut pkt.phv, &c.target, v);
        }
    }

    // ------------------------------------------------------------------ deparser

    /// Emit the valid headers in deparser order, then the payload.
    pub fn deparse(&self, st: &mut State, pkt: &mut Pkt, out: &mut Vec<u8>) {
        if st.ext.trace.is_some() {
            self.trace_deparser(&mut st.ext, true);
            self.deparse_impl::<true>(st, pkt, out);
            self.trace_deparser(&mut st.ext, false);
        } else {
            self.deparse_impl::<false>(st, pkt, out);
        }
    }

    fn deparse_impl<const TRACE: bool>(&self, st: &mut State, pkt: &mut Pkt, out: &mut Vec<u8>) {
        // Traced packets keep the generic order (checksum updates logged before the emitted
        // headers, as BMv2 does); the values are the same either way.
        let plan = if TRACE { None } else { self.csum_plan.as_ref() };
        if plan.is_none() {
            self.update_checksums_impl::<TRACE>(&mut st.ext, pkt);
        }
        if st.emit_off.len() < self.layout.headers.len() {
            st.emit_off.resize(self.layout.headers.len(), 0);
        }
        out.clear();
        let mut csum_done = false;
        if let Some((order, prims)) = &self.deparser {
            if !prims.is_empty() {
                let _ = self.run_instrs(&mut st.ext, pkt, prims, &[]);
            }
            // Native emit loop when there is one (same bytes, same header offsets); traced
            // packets are interpreted.
            // With a plan, the emit function with the checksums compiled in when there is one
            // (`csum_done`: they ran in it).
            let jit = if TRACE { None } else { self.jit.as_ref() };
            let compiled = match (jit, plan) {
                (Some(j), Some(_)) => j.emit_csum(&mut pkt.phv, out, &mut st.emit_off),
                _ => None,
            };
            csum_done = compiled == Some(true);
            let native =
                compiled.is_some() || jit.is_some_and(|j| j.emit(&pkt.phv, out, &mut st.emit_off));
            if !native {
                let offs = plan.is_some().then_some(st.emit_off.as_mut_slice());
                self.emit_headers::<TRACE>(&mut st.ext, &pkt.phv, order, out, offs);
            }
        }
        if let Some(plan) = plan.filter(|_| !csum_done) {
            self.update_checksums_emitted(&mut st.ext, pkt, plan, &st.emit_off, out);
        }
        out.extend_from_slice(&pkt.data[pkt.payload_off.min(pkt.data.len())..]);
    }

    /// The deparser's emit loop, interpreted: append the valid headers of `order` to `out`,
    /// recording where each starts in `emit_off` when given.
    fn emit_headers<const TRACE: bool>(
        &self,
        ext: &mut ExternState,
        phv: &Phv,
        order: &[u32],
        out: &mut Vec<u8>,
        mut emit_off: Option<&mut [u32]>,
    ) {
        for &h in order {
            if !phv.valid[h as usize] {
                continue;
            }
            if TRACE {
                self.trace_deparse_header(ext, h);
            }
            if let Some(offs) = emit_off.as_deref_mut() {
                offs[h as usize] = out.len() as u32;
            }
            let n = self.header_bytes(phv, h) as usize;
            let hl = &self.layout.headers[h as usize];
            if hl.packed {
                let o = hl.off as usize;
                out.extend_from_slice(&phv.bytes[o..o + n]);
                continue;
            }
            let start = out.len();
            if let Some(steps) = &hl.wire {
                // Load-time plan: whole-byte runs copied, the other fields ORed through a
                // 64-bit window into a zeroed area (8 bytes of slack, trimmed afterwards).
                out.resize(start + n + 8, 0);
                let bytes = &phv.bytes;
                for s in steps {
                    match *s {
                        WireStep::Copy { wire, slot, len } => {
                            let (w, o, l) = (start + wire as usize, slot as usize, len as usize);
                            out[w..w + l].copy_from_slice(&bytes[o..o + l]);
                        }
                        WireStep::Bits {
                            bit,
                            width,
                            slot,
                            nbytes,
                        } => {
                            let o = slot as usize;
                            let v = crate::layout::be_read(&bytes[o..o + nbytes as usize])
                                & (u64::MAX >> (64 - width));
                            let (b0, sh) = (start + (bit / 8) as usize, bit % 8);
                            let mut x = [0u8; 8];
                            x.copy_from_slice(&out[b0..b0 + 8]);
                            let cur = u64::from_be_bytes(x) | (v << (64 - width - sh));
                            out[b0..b0 + 8].copy_from_slice(&cur.to_be_bytes());
                        }
                    }
                }
                out.truncate(start + n);
                continue;
            }
            out.resize(start + n, 0);
            let mut bit = start * 8;
            for f in &self.layout.headers[h as usize].fields {
                let w = if f.is_vl {
                    phv.vl_width[h as usize]
                } else {
                    f.width
                } as usize;
                let s = phv.slot(f);
                let nb = w.div_ceil(8);
                slot_to_bits(&s[s.len() - nb..], w, out, bit);
                bit += w;
            }
        }
    }

    /// [`Engine::update_checksums`] after the headers are emitted (see [`crate::csum`]): the
    /// same checksums in the same order, planned ones summed over the emitted bytes, every
    /// result stored in the PHV and copied into the emitted target.
    pub(crate) fn update_checksums_emitted(
        &self,
        ext: &mut ExternState,
        pkt: &mut Pkt,
        plan: &crate::csum::CsumPlan,
        emit_off: &[u32],
        out: &mut [u8],
    ) {
        let planned = self.checksums.iter().zip(&plan.wire).zip(&plan.patch);
        for ((c, wire), patch) in planned {
            if !c.update || !self.checksum_cond(ext, pkt, c) {
                continue;
            }
            let v = match wire {
                Some(w) if pkt.phv.valid[w.header as usize] => {
                    let o = emit_off[w.header as usize] as usize;
                    crate::csum::csum16_skip(&out[o..o + w.len as usize], &w.skip)
                }
                _ => self.checksum_value(ext, pkt, c),
            };
            let t = &c.target;
            let (o, n) = (t.off as usize, t.nbytes as usize);
            // What the target's slot holds afterwards, as an integer (`n` ≤ 8 bytes: the plan's
            // condition); written with the size dispatch of `be_write`, not a memcpy call.
            let stored = if t.saturating {
                store_field_u64(&mut pkt.phv, t, v);
                crate::layout::be_read(&pkt.phv.bytes[o..o + n])
            } else {
                // Whole bytes (the plan's condition): the low `n` bytes are the wrapped value.
                crate::layout::be_write(&mut pkt.phv.bytes[o..o + n], v);
                v
            };
            if let Some(p) = *patch {
                if pkt.phv.valid[t.header as usize] {
                    let o = emit_off[t.header as usize] as usize + p as usize;
                    crate::layout::be_write(&mut out[o..o + n], stored);
                }
            }
        }
    }

    /// The deparser's emit loop by the interpreter (no checksums, no payload), whether or not
    /// it has native code, recording where each emitted header starts in `emit_off` (indexed
    /// by header): for comparisons.
    pub fn emit_interpreted(&self, phv: &Phv, out: &mut Vec<u8>, emit_off: &mut Vec<u32>) {
        if emit_off.len() < self.layout.headers.len() {
            emit_off.resize(self.layout.headers.len(), 0);
        }
        if let Some((order, _)) = &self.deparser {
            let offs = Some(emit_off.as_mut_slice());
            self.emit_headers::<false>(&mut ExternState::default(), phv, order, out, offs);
        }
    }

    // ------------------------------------------------------------------ actions

    fn lval_loc(
        &self,
        pkt: &Pkt,
        ext: &ExternState,
        locals: &[Vec<u8>],
        l: &LVal,
    ) -> XR<Option<FieldLoc>> {
        Ok(Some(match l {
            LVal::Field(f) => *f,
            LVal::StackField { stack, field } => {
                let next = pkt.phv.stack_next[*stack as usize];
                if next == 0 {
                    return Err(fault("stack_field on an empty stack"));
                }
                let h = self.layout.stacks[*stack as usize][next as usize - 1];
                self.layout.headers[h as usize].fields[*field as usize]
            }
            LVal::Dyn { header, field } => {
                let h = eval_header(header, &self.cx(&pkt.phv, locals, ext, &pkt.data, 0))
                    .map_err(fault)?;
                match self.layout.headers[h as usize].fields.get(*field as usize) {
                    Some(f) => *f,
                    None => return Err(fault("field offset out of range")),
                }
            }
            LVal::Register { .. } => return Ok(None),
        }))
    }

    fn assign(
        &self,
        ext: &mut ExternState,
        pkt: &mut Pkt,
        locals: &[Vec<u8>],
        dst: &LVal,
        v: &Value,
    ) -> XR<()> {
        match self.lval_loc(pkt, ext, locals, dst)? {
            Some(f) => store_field(&mut pkt.phv, &f, v),
            None => {
                if let LVal::Register { array, index } = dst {
                    let idx = eval_data(index, &self.cx(&pkt.phv, locals, ext, &pkt.data, 0))
                        .map_err(fault)?
                        .to_i64_sat();
                    let r = &mut ext.regs[*array as usize];
                    if idx >= 0 && (idx as u64) < r.size as u64 {
                        let w = r.width;
                        v.store(w, false, false, r.cell_mut(idx as u32));
                    }
                }
            }
        }
        Ok(())
    }

    fn copy_header(&self, phv: &mut Phv, dst: u32, src: u32) {
        if dst == src {
            return;
        }
        let (d, s) = (
            &self.layout.headers[dst as usize],
            &self.layout.headers[src as usize],
        );
        if phv.valid[src as usize] {
            let n = d.slot_bytes.min(s.slot_bytes) as usize;
            phv.bytes
                .copy_within(s.off as usize..s.off as usize + n, d.off as usize);
            phv.vl_width[dst as usize] = phv.vl_width[src as usize];
            self.set_valid(phv, dst);
        } else {
            phv.valid[dst as usize] = false;
        }
    }

    fn copy_union(&self, phv: &mut Phv, dst: u32, src: u32) {
        let (d, s) = (
            self.layout.unions[dst as usize].clone(),
            &self.layout.unions[src as usize],
        );
        for (dh, sh) in d.iter().zip(s) {
            self.copy_header(phv, *dh, *sh);
        }
        if !s.iter().any(|h| phv.valid[*h as usize]) {
            for h in &d {
                phv.valid[*h as usize] = false;
            }
        }
    }

    fn stack_elems(&self, s: StackRef) -> Vec<u32> {
        match s {
            StackRef::Headers(s) => self.layout.stacks[s as usize].clone(),
            StackRef::Unions(s) => self.layout.union_stacks[s as usize].clone(),
        }
    }

    fn move_elem(&self, phv: &mut Phv, s: StackRef, dst: u32, src: u32) {
        match s {
            StackRef::Headers(_) => self.copy_header(phv, dst, src),
            StackRef::Unions(_) => self.copy_union(phv, dst, src),
        }
    }

    /// Exchange two stack elements entirely, as BMv2's `Header::swap_values` does: slot
    /// bytes, validity and VL length (for a union stack, member by member).
    fn swap_elems(&self, phv: &mut Phv, s: StackRef, a: u32, b: u32) {
        match s {
            StackRef::Headers(_) => self.swap_headers(phv, a, b),
            StackRef::Unions(_) => {
                let n = self.layout.unions[a as usize].len();
                for m in 0..n {
                    let (ha, hb) = (
                        self.layout.unions[a as usize][m],
                        self.layout.unions[b as usize][m],
                    );
                    self.swap_headers(phv, ha, hb);
                }
            }
        }
    }

    fn swap_headers(&self, phv: &mut Phv, a: u32, b: u32) {
        if a == b {
            return;
        }
        let (la, lb) = (
            &self.layout.headers[a as usize],
            &self.layout.headers[b as usize],
        );
        let n = la.slot_bytes.min(lb.slot_bytes) as usize;
        let (oa, ob) = (la.off as usize, lb.off as usize);
        let (lo, hi) = if oa < ob { (oa, ob) } else { (ob, oa) };
        if lo + n <= hi {
            let (x, y) = phv.bytes.split_at_mut(hi);
            x[lo..lo + n].swap_with_slice(&mut y[..n]);
        }
        phv.valid.swap(a as usize, b as usize);
        phv.vl_width.swap(a as usize, b as usize);
    }

    fn invalidate_elem(&self, phv: &mut Phv, s: StackRef, e: u32) {
        match s {
            StackRef::Headers(_) => phv.valid[e as usize] = false,
            StackRef::Unions(_) => {
                for h in &self.layout.unions[e as usize] {
                    phv.valid[*h as usize] = false;
                }
            }
        }
    }

    fn next_of(phv: &mut Phv, s: StackRef) -> &mut u32 {
        match s {
            StackRef::Headers(i) => &mut phv.stack_next[i as usize],
            StackRef::Unions(i) => &mut phv.union_stack_next[i as usize],
        }
    }

    /// Run an instruction list (an action body).
    pub fn run_instrs(
        &self,
        ext: &mut ExternState,
        pkt: &mut Pkt,
        instrs: &[Instr],
        locals: &[Vec<u8>],
    ) -> XR<()> {
        let mut pc = 0usize;
        let mut steps = 0u32;
        while pc < instrs.len() {
            steps += 1;
            if steps > 1_000_000 {
                return Err(fault("action does not terminate"));
            }
            let ins = &instrs[pc];
            pc += 1;
            macro_rules! cx {
                () => {
                    self.cx(&pkt.phv, locals, ext, &pkt.data, 0)
                };
            }
            macro_rules! data {
                ($e:expr) => {
                    eval_data($e, &cx!()).map_err(fault)?
                };
            }
            match ins {
                Instr::SetU64 { dst, src, add } => {
                    let v = match src {
                        FastSrc::Field(f) => pkt.phv.read_u64(f),
                        FastSrc::Local(i) => match locals.get(*i as usize) {
                            Some(b) => crate::layout::be_read(b),
                            None => return Err(fault("action parameter out of range")),
                        },
                        FastSrc::Const(c) => *c,
                    };
                    pkt.phv.write_u64(dst, v.wrapping_add(*add));
                }
                Instr::SetBin { dst, op, a, b } => {
                    match (a.get(&pkt.phv, locals), b.get(&pkt.phv, locals)) {
                        (Some(x), Some(y)) => pkt.phv.write_u64(dst, op.apply(x, y)),
                        _ => return Err(fault("action parameter out of range")),
                    }
                }
                Instr::SetExpr { dst, expr } => {
                    let v = expr.eval(&pkt.phv, locals).map_err(fault)?;
                    pkt.phv.write_u64(dst, v);
                }
                Instr::Assign { dst, src } => {
                    let v = data!(src);
                    self.assign(ext, pkt, locals, dst, &v)?;
                }
                Instr::AssignVl { dst, src } => {
                    let n = dst.nbytes.min(src.nbytes) as usize;
                    let (s0, d0) = (
                        src.off as usize + src.nbytes as usize - n,
                        dst.off as usize + dst.nbytes as usize - n,
                    );
                    pkt.phv.bytes.copy_within(s0..s0 + n, d0);
                    pkt.phv.vl_width[dst.header as usize] = pkt.phv.vl_width[src.header as usize];
                }
                Instr::AssignHeader { dst, src } => {
                    let d = eval_header(dst, &cx!()).map_err(fault)?;
                    let s = eval_header(src, &cx!()).map_err(fault)?;
                    self.copy_header(&mut pkt.phv, d, s);
                }
                Instr::AssignUnion { dst, src } => {
                    let d = eval_union(dst, &cx!()).map_err(fault)?;
                    let s = eval_union(src, &cx!()).map_err(fault)?;
                    self.copy_union(&mut pkt.phv, d, s);
                }
                Instr::AssignStack { dst, src } => {
                    let (d, s) = (self.stack_elems(*dst), self.stack_elems(*src));
                    for (de, se) in d.iter().zip(&s) {
                        self.move_elem(&mut pkt.phv, *dst, *de, *se);
                    }
                    let n = *Self::next_of(&mut pkt.phv, *src);
                    *Self::next_of(&mut pkt.phv, *dst) = n;
                }
                // BMv2's P4_16 stacks (`stacks.cpp`, `StackP4_16`): elements move by swapping
                // their whole contents (validity, field values, VL length), so the values an
                // invalid element holds travel too; the elements pushed in or popped out are
                // then marked invalid (their values stay what the swaps left).
                Instr::Push { stack, count } => {
                    let n = data!(count).to_i64_sat().max(0) as usize;
                    let el = self.stack_elems(*stack);
                    let size = el.len();
                    if n > 0 {
                        for i in (n..size).rev() {
                            self.swap_elems(&mut pkt.phv, *stack, el[i], el[i - n]);
                        }
                        for e in el.iter().take(n) {
                            self.invalidate_elem(&mut pkt.phv, *stack, *e);
                        }
                        let next = Self::next_of(&mut pkt.phv, *stack);
                        *next = (*next as usize).saturating_add(n).min(size) as u32;
                    }
                }
                Instr::Pop { stack, count } => {
                    let n = data!(count).to_i64_sat().max(0) as usize;
                    let el = self.stack_elems(*stack);
                    let size = el.len();
                    if n > 0 {
                        for i in 0..size.saturating_sub(n) {
                            self.swap_elems(&mut pkt.phv, *stack, el[i], el[i + n]);
                        }
                        for e in el.iter().skip(size.saturating_sub(n)) {
                            self.invalidate_elem(&mut pkt.phv, *stack, *e);
                        }
                        let next = Self::next_of(&mut pkt.phv, *stack);
                        *next = (*next as usize).saturating_sub(n) as u32;
                    }
                }
                Instr::Jump(t) => pc = *t,
                Instr::JumpIfZero { value, target } => {
                    if data!(value).is_zero() {
                        pc = *target;
                    }
                }
                Instr::Exit => pkt.regs.exit = true,
                Instr::Assert { value, what, info } => {
                    if data!(value).is_zero() {
                        return Err(Fault(format!("{what}: {info}")));
                    }
                }
                Instr::LogMsg { fmt, args } => {
                    let mut vals = Vec::with_capacity(args.len());
                    for a in args {
                        vals.push(data!(a).to_big().to_string());
                    }
                    let msg = format_log(fmt, &vals);
                    if let Some(t) = ext.trace.as_deref_mut() {
                        // In order with the packet's other trace lines.
                        t.push(crate::trace::TraceLevel::Info, msg);
                    } else if ext.log.len() < 10_000 {
                        ext.log.push(msg);
                    }
                }
                Instr::RngUniform { dst, lo, hi } => {
                    let (lo, hi) = (data!(lo).low_u64(), data!(hi).low_u64());
                    if lo <= hi {
                        let span = hi - lo;
                        let r = ext.next_rand();
                        let v = if span == u64::MAX {
                            r
                        } else {
                            lo + r % (span + 1)
                        };
                        self.assign(ext, pkt, locals, dst, &Value::Small(v as i128))?;
                    }
                }
                Instr::Drop {
                    egress_spec,
                    mcast_grp,
                } => {
                    store_u64(&mut pkt.phv, egress_spec, self.drop_port as u64);
                    store_u64(&mut pkt.phv, mcast_grp, 0);
                }
                Instr::GenerateDigest { list } => pkt.regs.digest = Some(data!(list).to_i64_sat()),
                Instr::AddHeader { header, zero } => {
                    let h = eval_header(header, &cx!()).map_err(fault)?;
                    if !pkt.phv.valid[h as usize] {
                        if *zero {
                            let hl = &self.layout.headers[h as usize];
                            pkt.phv.bytes[hl.off as usize..(hl.off + hl.slot_bytes) as usize]
                                .fill(0);
                            pkt.phv.vl_width[h as usize] = 0;
                        }
                        self.set_valid(&mut pkt.phv, h);
                        pkt.length_reg += self.header_bytes(&pkt.phv, h);
                    }
                }
                Instr::RemoveHeader { header } => {
                    let h = eval_header(header, &cx!()).map_err(fault)?;
                    if pkt.phv.valid[h as usize] {
                        let n = self.header_bytes(&pkt.phv, h);
                        pkt.regs.len_saturated |= pkt.length_reg < n;
                        pkt.length_reg = pkt.length_reg.saturating_sub(n);
                        pkt.phv.valid[h as usize] = false;
                    }
                }
                Instr::Clone {
                    session,
                    field_list,
                    ..
                } => {
                    let s = (data!(session).low_u64() & 0x7fff) as u32;
                    let fl = data!(field_list).to_i64_sat();
                    pkt.regs.clone = Some((s, fl));
                }
                Instr::Resubmit { field_list } => {
                    pkt.regs.resubmit = data!(field_list).to_i64_sat()
                }
                Instr::Recirculate { field_list } => {
                    pkt.regs.recirculate = data!(field_list).to_i64_sat()
                }
                Instr::HashOffset {
                    dst,
                    base,
                    calc,
                    size,
                } => {
                    let b = data!(base);
                    let sz = data!(size).low_u64().max(1);
                    let h =
                        self.compute_calc(ext, pkt, &self.calcs[*calc as usize], *calc as usize);
                    let off = (h % sz) as i128;
                    let v = match b {
                        Value::Small(x) if x.checked_add(off).is_some() => Value::Small(x + off),
                        b => Value::Big(b.to_big() + num_bigint::BigInt::from(off)),
                    };
                    self.assign(ext, pkt, locals, dst, &v)?;
                }
                Instr::NoOp => {}
                Instr::ExecuteMeter { meter, index, dst } => {
                    let idx = data!(index).to_i64_sat();
                    let units = match self.prog.meter_arrays[*meter as usize].meter_type {
                        MeterType::Bytes => pkt.ingress_len as u64,
                        MeterType::Packets => 1,
                    };
                    let now = ext.now_us;
                    let color = match ext.meters[*meter as usize].get_mut(idx.max(0) as usize) {
                        Some(m) if idx >= 0 => m.execute(units, now),
                        _ => continue,
                    };
                    self.assign(ext, pkt, locals, dst, &Value::Small(color as i128))?;
                }
                Instr::Count { counter, index } => {
                    let idx = data!(index).to_i64_sat();
                    if let Some(c) = ext.counters[*counter as usize].get_mut(idx.max(0) as usize) {
                        if idx >= 0 {
                            c.packets += 1;
                            c.bytes += pkt.ingress_len as u64;
                            if let Some(r) = ext.rec.as_deref_mut() {
                                r.counts.push((*counter, idx as u32));
                            }
                        }
                    }
                }
                Instr::RegisterRead { dst, array, index } => {
                    let idx = data!(index).to_i64_sat();
                    let r = &ext.regs[*array as usize];
                    if idx < 0 || idx as u64 >= r.size as u64 {
                        continue;
                    }
                    let v = match expr::Num::from_slot(r.cell(idx as u32), r.width, false) {
                        Ok(v) => Value::Small(v),
                        Err(_) => Value::Big(num_bigint::BigInt::from_bytes_be(
                            num_bigint::Sign::Plus,
                            r.cell(idx as u32),
                        )),
                    };
                    if let Some(rc) = ext.rec.as_deref_mut() {
                        let f = match dst {
                            LVal::Field(f) => Some(f.off),
                            _ => None,
                        };
                        rc.reg_read(*array, idx as u32, r.cell(idx as u32), f);
                    }
                    self.assign(ext, pkt, locals, dst, &v)?;
                }
                Instr::RegisterWrite {
                    array,
                    index,
                    value,
                } => {
                    let idx = data!(index).to_i64_sat();
                    let v = data!(value);
                    if let Some(rc) = ext.rec.as_deref_mut() {
                        if idx >= 0 && (idx as u64) < ext.regs[*array as usize].size as u64 {
                            let f = match value {
                                crate::expr::CExpr::Field(f) => Some(f.off),
                                _ => None,
                            };
                            rc.reg_write(*array, idx as u32, v.low_u64(), f);
                        }
                    }
                    let r = &mut ext.regs[*array as usize];
                    if idx >= 0 && (idx as u64) < r.size as u64 {
                        let w = r.width;
                        v.store(w, false, false, r.cell_mut(idx as u32));
                    }
                }
                Instr::Truncate { len } => {
                    let l = data!(len).low_u64().min(u32::MAX as u64) as u32;
                    pkt.regs.truncate = Some(pkt.regs.truncate.map_or(l, |t| t.min(l)));
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------------ tables and pipelines

    #[inline(always)]
    fn build_key(&self, t: &CTable, phv: &Phv, key: &mut Vec<u8>) {
        key.clear();
        for (kf, src) in t.spec.fields.iter().zip(&t.srcs) {
            let start = key.len();
            match src {
                KeySrc::Valid(h) => key.push(phv.valid[*h as usize] as u8),
                KeySrc::Field(f) => {
                    if f.is_valid_bit {
                        key.push(phv.valid[f.header as usize] as u8);
                    } else if phv.valid[f.header as usize] {
                        key.extend_from_slice(phv.slot(f));
                    } else {
                        key.resize(start + f.nbytes as usize, 0);
                    }
                }
            }
            if let Some(m) = &kf.static_mask {
                for (k, m) in key[start..].iter_mut().zip(m) {
                    *k &= m;
                }
            }
        }
    }

    fn selector_pick(
        &self,
        ext: &mut ExternState,
        pkt: &Pkt,
        prof: u32,
        members: &[u32],
    ) -> Option<u32> {
        if members.is_empty() {
            return None;
        }
        let h = match &self.profiles[prof as usize].selector {
            Some(sel) => self.compute_calc(ext, pkt, sel, 2_000 + prof as usize),
            None => 0,
        };
        Some(members[(h % members.len() as u64) as usize])
    }

    /// Resolve an entry action to `(action, data)` through the table's action profile (a
    /// group's member picked by the selector). Borrows the entry in place: no copy of the data.
    fn resolve_action<'s, const TRACE: bool>(
        &self,
        ext: &mut ExternState,
        profiles: &'s [Profile],
        pkt: &Pkt,
        t: &CTable,
        ea: &'s EntryAction,
    ) -> Resolved<'s> {
        let resolved: Option<(u32, &[Vec<u8>])> = match ea {
            EntryAction::Action { action, data } => Some((*action, data)),
            EntryAction::Member(m) => t
                .profile
                .and_then(|p| profiles[p as usize].member(*m).ok())
                .map(|(a, d)| (*a, d.as_slice())),
            EntryAction::Group(g) => t.profile.and_then(|p| {
                let members = profiles[p as usize].group(*g).ok()?;
                let m = self.selector_pick(ext, pkt, p, members)?;
                let (a, d) = profiles[p as usize].member(m).ok()?;
                Some((*a, d.as_slice()))
            }),
        };
        if TRACE {
            match resolved {
                Some((action, data)) => self.trace_action_entry(ext, action, data),
                None => self.trace_no_action(ext, ea),
            }
        }
        resolved
    }

    /// Build table `ti`'s key from the packet, look it up and do a hit's bookkeeping (ageing
    /// stamp, direct counter, direct meter). Returns whether it hit and the entry action to
    /// run (the hit entry's or the default one), resolved; `None` when there is none.
    pub(crate) fn lookup<'s, const TRACE: bool>(
        &self,
        tables: &'s mut [TableState],
        profiles: &'s [Profile],
        ext: &mut ExternState,
        pkt: &mut Pkt,
        ti: u32,
        key: &mut Vec<u8>,
    ) -> (bool, Resolved<'s>) {
        let hit = self.match_key(&tables[ti as usize], &pkt.phv, ti, key);
        self.finish_lookup::<TRACE>(tables, profiles, ext, pkt, ti, key, hit)
    }

    /// Build table `ti`'s key from the PHV into `key` and look it up: the winning entry's slot.
    #[inline]
    pub(crate) fn match_key(
        &self,
        ts: &TableState,
        phv: &Phv,
        ti: u32,
        key: &mut Vec<u8>,
    ) -> Option<u32> {
        let t = &self.tables[ti as usize];
        self.build_key(t, phv, key);
        if t.spec.fields.is_empty() {
            None
        } else {
            ts.store.lookup(&t.spec, key)
        }
    }

    /// The rest of [`Engine::lookup`] after [`Engine::match_key`] found `hit`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn finish_lookup<'s, const TRACE: bool>(
        &self,
        tables: &'s mut [TableState],
        profiles: &'s [Profile],
        ext: &mut ExternState,
        pkt: &mut Pkt,
        ti: u32,
        key: &[u8],
        hit: Option<u32>,
    ) -> (bool, Resolved<'s>) {
        let t = &self.tables[ti as usize];
        let ts = &mut tables[ti as usize];
        if let Some(r) = ext.rec.as_deref_mut() {
            r.path.push((
                ti,
                hit.map(|i| (i, ts.store.handle_of(i))),
                r.keys.len() as u32,
                key.len() as u32,
            ));
            r.keys.extend_from_slice(key);
            r.actions.push(u32::MAX);
        }
        if TRACE {
            let handle = hit.map(|i| ts.store.handle_of(i) as u64);
            self.trace_table(ext, t, key, handle);
        }
        let ea: &'s EntryAction = match hit {
            Some(idx) => {
                // The matcher only returns occupied slots; an empty one would be a hit with
                // nothing to run.
                let Some(e) = ts.store.slots[idx as usize].as_mut() else {
                    return (true, None);
                };
                self.hit_effects(t, e, ext.now_us, pkt);
                &e.action
            }
            None => match &ts.default {
                Some(ea) => ea,
                None => return (false, None),
            },
        };
        let action = self.resolve_action::<TRACE>(ext, profiles, pkt, t, ea);
        if let Some(r) = ext.rec.as_deref_mut() {
            if let Some(l) = r.actions.last_mut() {
                *l = action.map_or(u32::MAX, |a| a.0);
            }
        }
        (hit.is_some(), action)
    }

    /// What a hit does to its entry besides choosing the action: the ageing timestamp, the
    /// direct counter, the direct meter (its colour stored into the table's field).
    #[inline]
    pub(crate) fn hit_effects(&self, t: &CTable, e: &mut Entry, now: u64, pkt: &mut Pkt) {
        if t.support_timeout {
            e.last_hit_us = now;
        }
        if t.with_counters {
            e.counter.packets += 1;
            e.counter.bytes += pkt.ingress_len as u64;
        }
        if let Some((m, f)) = t.direct_meter {
            let units = match self.prog.meter_arrays[m as usize].meter_type {
                MeterType::Bytes => pkt.ingress_len as u64,
                MeterType::Packets => 1,
            };
            let c = e.meter.execute(units, now);
            store_field_u64(&mut pkt.phv, &f, c as u64);
        }
    }

    fn apply_table<const TRACE: bool>(
        &self,
        st: &mut State,
        pkt: &mut Pkt,
        ti: u32,
        key: &mut Vec<u8>,
    ) -> XR<Option<GNode>> {
        let State {
            tables,
            profiles,
            ext,
            ..
        } = st;
        let (hit, action) = self.lookup::<TRACE>(tables, profiles, ext, pkt, ti, key);
        mark(ext, stage::TABLES);
        let ran = match action {
            Some((a, data)) => {
                let r = self.run_instrs(ext, pkt, &self.actions[a as usize].instrs, data);
                mark(ext, stage::ACTIONS);
                r?;
                Some(a)
            }
            None => None,
        };
        Ok(self.tables[ti as usize].next(hit, ran))
    }

    /// Run pipeline `name` (for the trace) from its first node.
    pub fn run_pipeline(
        &self,
        st: &mut State,
        pkt: &mut Pkt,
        name: &str,
        init: Option<GNode>,
    ) -> XR<()> {
        if st.ext.trace.is_none() && st.ext.probe.is_none() && st.ext.rec.is_none() {
            // An empty pipeline has nothing to run (traced, it still logs its start and end).
            let Some(init) = init else { return Ok(()) };
            if let Some(r) = self
                .jit
                .as_ref()
                .and_then(|j| j.run_pipeline(self, st, pkt, init))
            {
                return r;
            }
        }
        let mut key = std::mem::take(&mut st.key_buf);
        let r = if st.ext.trace.is_some() {
            self.trace_pipeline(&mut st.ext, name, true);
            let r = self.run_nodes::<true>(st, pkt, init, &mut key);
            if r.is_ok() {
                self.trace_pipeline(&mut st.ext, name, false);
            }
            r
        } else {
            self.run_nodes::<false>(st, pkt, init, &mut key)
        };
        st.key_buf = key;
        r
    }

    /// Evaluate condition `c` on `pkt` as the pipeline would (the behaviour cache's guards).
    pub(crate) fn eval_cond(&self, st: &State, pkt: &Pkt, c: u32) -> XR<bool> {
        let cond = &self.conds[c as usize];
        match &cond.fast {
            Some(f) => Ok(f.eval(&pkt.phv)),
            None => {
                eval_bool(&cond.expr, &self.cx(&pkt.phv, &[], &st.ext, &pkt.data, 0)).map_err(fault)
            }
        }
    }

    fn run_nodes<const TRACE: bool>(
        &self,
        st: &mut State,
        pkt: &mut Pkt,
        init: Option<GNode>,
        key: &mut Vec<u8>,
    ) -> XR<()> {
        let mut node = init;
        let mut steps = 0;
        while let Some(n) = node {
            if pkt.regs.exit {
                break;
            }
            if let Some(rc) = st.ext.rec.as_deref_mut() {
                // Prefix caching: the recorded run stops before an uncacheable node.
                if rc.stop.contains(&n) {
                    rc.resume = Some(n);
                    break;
                }
            }
            steps += 1;
            if steps > 100_000 {
                return Err(fault("control flow does not terminate"));
            }
            node = match n {
                GNode::Table(t) => self.apply_table::<TRACE>(st, pkt, t, key)?,
                GNode::Cond(c) => {
                    let cond = &self.conds[c as usize];
                    let v = if let Some(f) = &cond.fast {
                        f.eval(&pkt.phv)
                    } else {
                        eval_bool(&cond.expr, &self.cx(&pkt.phv, &[], &st.ext, &pkt.data, 0))
                            .map_err(fault)?
                    };
                    if TRACE {
                        self.trace_cond(&mut st.ext, c, v);
                    }
                    if let Some(rc) = st.ext.rec.as_deref_mut() {
                        rc.cond(c, v, &pkt.phv);
                    }
                    mark(&mut st.ext, stage::TABLES);
                    if v {
                        cond.t
                    } else {
                        cond.f
                    }
                }
                GNode::Call(c) => {
                    let (a, next) = self.calls[c as usize];
                    let r =
                        self.run_instrs(&mut st.ext, pkt, &self.actions[a as usize].instrs, &[]);
                    mark(&mut st.ext, stage::ACTIONS);
                    r?;
                    next
                }
            };
        }
        Ok(())
    }

    /// Is this table's key built only from exact fields (for const entry conversion)?
    pub fn key_kinds(&self, t: u32) -> Vec<MatchKind> {
        self.tables[t as usize]
            .spec
            .fields
            .iter()
            .map(|f| f.kind)
            .collect()
    }
}

/// Bytes a parser `set` from lookahead needs: BMv2 (`ParserOpSet<ParserLookAhead>`) checks
/// only the lookahead's own byte count, whatever its offset.
fn lookahead_need(e: &expr::CExpr, cursor: usize) -> usize {
    match e {
        expr::CExpr::Lookahead { width, .. } => cursor + width.div_ceil(8) as usize,
        _ => 0,
    }
}

/// `log_msg` formatting: `{}` takes the next value, `\{` and `\}` are literal braces.
pub fn format_log(fmt: &str, vals: &[String]) -> String {
    let mut out = String::with_capacity(fmt.len());
    let mut it = vals.iter();
    let mut chars = fmt.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if matches!(chars.peek(), Some('{') | Some('}')) => {
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '{' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push_str(it.next().map(String::as_str).unwrap_or("{}"));
            }
            c => out.push(c),
        }
    }
    out
}
