//! Stateful behaviours in the behaviour cache: what a recorded run read from and wrote to
//! register arrays, and how a hit checks and replays it ([`super::Stateful`]).
//!
//! * **Value** (the paper's value-in-key): an entry holds the value of every register cell the
//!   run read before writing it; a hit needs each cell to hold the same value now, and then
//!   sets every cell the run wrote to its recorded final value.
//! * **Symbolic** (tern's design, reference §2.7): when [`super::analysis::symbolic_state`]
//!   accepts the pipeline, the fields `register_read` writes (state fields) hold `cell + c`
//!   for constants `c` only, so an entry keeps, per state field, the offset it had at each
//!   condition that read it (replayed as a guard: the condition is re-evaluated on the live
//!   value and must take the recorded branch), at each `register_write` of it (replayed as
//!   `cell := live + offset`) and at the end (the field's final value). One entry then serves
//!   every packet of, say, a heavy-hitter counter until the threshold flips the guard.
//!
//! A guard that fails is a miss: the pipeline runs (recording) and the new behaviour replaces
//! the entry. State is read live on every hit, so control-plane register writes need no
//! invalidation.

use crate::compile::Engine;
use crate::exec::{Pkt, State};
use crate::layout::{FieldLoc, Phv};

/// A register access seen by the recorder: `(array, index, value offset in
/// [`RegLog::bytes`] / the written value, field offset)`.
#[derive(Clone, Copy, Debug)]
pub struct RegAccess {
    pub array: u32,
    pub index: u32,
    /// Reads: offset of the cell's bytes in [`RegLog::bytes`]; writes: the value written
    /// (low 64 bits).
    pub value: u64,
    /// Reads: the destination field's PHV offset; writes: the source field's (when the
    /// value is a plain field).
    pub field: Option<u32>,
    /// Register reads recorded before this access (orders reads, writes and conditions).
    pub seq: u32,
}

/// What the recorder logs about state (part of [`super::Rec`]).
#[derive(Clone, Debug, Default)]
pub struct RegLog {
    pub reads: Vec<RegAccess>,
    pub writes: Vec<RegAccess>,
    /// Cell bytes of the reads.
    pub bytes: Vec<u8>,
    /// Conditions evaluated: `(condition, outcome, offset in `vals`, reads before it)`.
    pub conds: Vec<(u32, bool, u32, u32)>,
    /// State fields whose values each condition records (symbolic mode).
    pub watch: Vec<FieldLoc>,
    pub vals: Vec<u64>,
}

impl RegLog {
    pub(crate) fn clear(&mut self) {
        self.reads.clear();
        self.writes.clear();
        self.bytes.clear();
        self.conds.clear();
        self.vals.clear();
    }
}

/// Big-endian bytes to `u64` (the low 8 bytes).
pub(crate) fn be_u64(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |a, x| a << 8 | *x as u64)
}

fn mask(bits: u32) -> u64 {
    if bits >= 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// Where a state field's value at some point of the recorded run comes from at hit time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Val {
    /// `live cell of read k` (truncated to the field) `+ offset`, modulo the field's width.
    Sym { k: u32, off: u64 },
    /// A constant (the field was not read from a register yet at that point).
    Const(u64),
}

/// The state part of a cached behaviour.
#[derive(Clone, Debug)]
pub(crate) enum EntryState {
    /// Guards on values: `(array, index, offset in bytes, length)` of each cell read before
    /// written, and the final bytes of every cell written.
    Value {
        reads: Box<[(u32, u32, u32, u32)]>,
        writes: Box<[(u32, u32, u32, u32)]>,
        bytes: Box<[u8]>,
    },
    /// Symbolic updates.
    Symbolic(Box<Sym>),
}

/// A guard: `(condition, outcome, value of every watched field when it was evaluated)`.
type Guard = (u32, bool, Box<[(FieldLoc, Val)]>);

#[derive(Clone, Debug)]
pub(crate) struct Sym {
    /// Cells read into state fields: `(array, index, field)`; `k` indexes this list.
    reads: Box<[(u32, u32, FieldLoc)]>,
    /// Guards: `(condition, outcome, value of every watched field)`.
    guards: Box<[Guard]>,
    /// State fields' final values (symbolic ones only; constant ones are in the writes).
    finals: Box<[(FieldLoc, Val)]>,
    /// Cells written: `(array, index, value)`; a constant is the final cell value.
    writes: Box<[(u32, u32, Val)]>,
}

impl EntryState {
    pub(crate) fn bytes(&self) -> usize {
        match self {
            EntryState::Value {
                reads,
                writes,
                bytes,
            } => 16 * (reads.len() + writes.len()) + bytes.len(),
            EntryState::Symbolic(s) => {
                std::mem::size_of::<Sym>()
                    + 48 * s.reads.len()
                    + s.guards.iter().map(|g| 16 + 56 * g.2.len()).sum::<usize>()
                    + 56 * s.finals.len()
                    + 32 * s.writes.len()
            }
        }
    }
}

/// Build the state part of an entry from a recorded run (`st` holds the state after it,
/// `phv` the PHV).
/// `Ok(None)`: the run touched no register; `Err(())`: it cannot be replayed symbolically
/// (the caller refuses the insert).
pub(crate) fn build(
    log: &RegLog,
    st: &State,
    phv: &Phv,
    symbolic: bool,
    guard_conds: &[bool],
) -> Result<Option<EntryState>, ()> {
    if log.reads.is_empty() && log.writes.is_empty() {
        return Ok(None);
    }
    // Final bytes of each written cell (once per cell).
    let mut written: Vec<(u32, u32)> = log.writes.iter().map(|w| (w.array, w.index)).collect();
    written.sort_unstable();
    written.dedup();
    if !symbolic {
        let mut reads = Vec::new();
        let mut bytes = Vec::new();
        let mut seen: Vec<(u32, u32)> = Vec::new();
        for r in &log.reads {
            let c = (r.array, r.index);
            // A cell written earlier in the run holds a value the run decided itself.
            // (A write with `seq <= r.seq` came before read number `r.seq`.)
            let written_before = log
                .writes
                .iter()
                .any(|w| (w.array, w.index) == c && w.seq <= r.seq);
            if written_before || seen.contains(&c) {
                continue;
            }
            seen.push(c);
            let n = st.ext.regs[r.array as usize].nbytes;
            let at = bytes.len() as u32;
            bytes.extend_from_slice(&log.bytes[r.value as usize..r.value as usize + n as usize]);
            reads.push((r.array, r.index, at, n));
        }
        let mut writes = Vec::new();
        for (a, i) in written {
            let at = bytes.len() as u32;
            let cell = st.ext.regs[a as usize].cell(i);
            bytes.extend_from_slice(cell);
            writes.push((a, i, at, cell.len() as u32));
        }
        return Ok(Some(EntryState::Value {
            reads: reads.into(),
            writes: writes.into(),
            bytes: bytes.into(),
        }));
    }
    // Symbolic: every read writes a distinct watched field, no cell is read after being
    // written or read twice.
    let mut reads: Vec<(u32, u32, FieldLoc)> = Vec::new();
    let mut v0: Vec<u64> = Vec::new();
    for r in &log.reads {
        let Some(f) = r
            .field
            .and_then(|o| log.watch.iter().find(|w| w.off == o).copied())
        else {
            return Err(());
        };
        if reads
            .iter()
            .any(|x| x.2.off == f.off || (x.0, x.1) == (r.array, r.index))
            || log
                .writes
                .iter()
                .any(|w| (w.array, w.index) == (r.array, r.index) && w.seq <= r.seq)
        {
            return Err(());
        }
        let n = st.ext.regs[r.array as usize].nbytes as usize;
        v0.push(be_u64(&log.bytes[r.value as usize..r.value as usize + n]) & mask(f.width));
        reads.push((r.array, r.index, f));
    }
    // The value of watched field `w` (recorded `val`) when `nreads` reads had happened.
    let val_of = |w: &FieldLoc, val: u64, nreads: u32| -> Val {
        match reads.iter().position(|x| x.2.off == w.off) {
            Some(k) if (k as u32) < nreads => Val::Sym {
                k: k as u32,
                off: val.wrapping_sub(v0[k]) & mask(w.width),
            },
            _ => Val::Const(val),
        }
    };
    let mut guards = Vec::new();
    for &(c, outcome, at, nreads) in &log.conds {
        if !guard_conds.get(c as usize).copied().unwrap_or(false) {
            continue;
        }
        let vals: Box<[(FieldLoc, Val)]> = log
            .watch
            .iter()
            .enumerate()
            .map(|(i, w)| (*w, val_of(w, log.vals[at as usize + i], nreads)))
            .collect();
        if vals.iter().any(|(_, v)| matches!(v, Val::Sym { .. })) {
            guards.push((c, outcome, vals));
        }
    }
    let nr = reads.len() as u32;
    let finals: Vec<(FieldLoc, Val)> = reads
        .iter()
        .map(|x| (x.2, val_of(&x.2, phv.read_u64(&x.2), nr)))
        .collect();
    let mut writes = Vec::new();
    for (a, i) in written {
        // The last write to the cell decides its final value.
        let Some(w) = log
            .writes
            .iter()
            .rev()
            .find(|w| (w.array, w.index) == (a, i))
        else {
            continue;
        };
        let sym = w.field.and_then(|o| {
            let k = reads.iter().position(|x| x.2.off == o)?;
            ((k as u32) < w.seq).then_some(k)
        });
        let v = match sym {
            Some(k) => {
                let f = reads[k].2;
                Val::Sym {
                    k: k as u32,
                    off: w.value.wrapping_sub(v0[k]) & mask(f.width),
                }
            }
            None => Val::Const(be_u64(st.ext.regs[a as usize].cell(i))),
        };
        writes.push((a, i, v));
    }
    Ok(Some(EntryState::Symbolic(Box::new(Sym {
        reads: reads.into(),
        guards: guards.into(),
        finals: finals.into(),
        writes: writes.into(),
    }))))
}

fn live(st: &State, a: u32, i: u32) -> u64 {
    be_u64(st.ext.regs[a as usize].cell(i))
}

fn store_cell(st: &mut State, a: u32, i: u32, v: u64) {
    let r = &mut st.ext.regs[a as usize];
    let v = v & mask(r.width);
    let c = r.cell_mut(i);
    let n = c.len();
    let b = v.to_be_bytes();
    for (j, x) in c.iter_mut().enumerate() {
        *x = if n - j <= 8 { b[8 - (n - j)] } else { 0 };
    }
}

/// Do the guards hold for `pkt` now? (Value mode: the cells hold the recorded values;
/// symbolic: every recorded condition takes the recorded branch on the live values.)
/// `pkt`'s state fields are restored before returning.
pub(crate) fn check(es: &EntryState, eng: &Engine, st: &State, pkt: &mut Pkt) -> bool {
    match es {
        EntryState::Value { reads, bytes, .. } => reads.iter().all(|&(a, i, at, n)| {
            st.ext.regs[a as usize].cell(i) == &bytes[at as usize..(at + n) as usize]
        }),
        EntryState::Symbolic(s) => {
            if s.guards.is_empty() {
                return true;
            }
            let livev: Vec<u64> = s.reads.iter().map(|&(a, i, _)| live(st, a, i)).collect();
            let mut saved: Vec<(FieldLoc, u64)> = Vec::new();
            let mut ok = true;
            for (c, outcome, vals) in s.guards.iter() {
                for (f, v) in vals.iter() {
                    if !saved.iter().any(|(g, _)| g.off == f.off) {
                        saved.push((*f, pkt.phv.read_u64(f)));
                    }
                    let x = resolve(*v, &livev, f);
                    crate::exec::store_field_u64(&mut pkt.phv, f, x);
                }
                if eng.eval_cond(st, pkt, *c).ok() != Some(*outcome) {
                    ok = false;
                    break;
                }
            }
            for (f, v) in saved {
                crate::exec::store_field_u64(&mut pkt.phv, &f, v);
            }
            ok
        }
    }
}

fn resolve(v: Val, livev: &[u64], f: &FieldLoc) -> u64 {
    match v {
        Val::Const(x) => x,
        Val::Sym { k, off } => {
            (livev[k as usize] & mask(f.width)).wrapping_add(off) & mask(f.width)
        }
    }
}

/// Replay the state effects (after the field writes): cells written, state fields' finals.
pub(crate) fn replay(es: &EntryState, st: &mut State, pkt: &mut Pkt) {
    match es {
        EntryState::Value { writes, bytes, .. } => {
            for &(a, i, at, n) in writes.iter() {
                st.ext.regs[a as usize]
                    .cell_mut(i)
                    .copy_from_slice(&bytes[at as usize..(at + n) as usize]);
            }
        }
        EntryState::Symbolic(s) => {
            let livev: Vec<u64> = s.reads.iter().map(|&(a, i, _)| live(st, a, i)).collect();
            for (f, v) in s.finals.iter() {
                let x = resolve(*v, &livev, f);
                crate::exec::store_field_u64(&mut pkt.phv, f, x);
            }
            for &(a, i, v) in s.writes.iter() {
                let x = match v {
                    Val::Const(x) => x,
                    Val::Sym { k, .. } => resolve(v, &livev, &s.reads[k as usize].2),
                };
                store_cell(st, a, i, x);
            }
        }
    }
}
