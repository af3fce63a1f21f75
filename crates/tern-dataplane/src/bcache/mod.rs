//! Behaviour-level caching (B-Cache) of the ingress pipeline: owns the per-switch cache
//! (one per worker replica), its key layout ([`Plan`], from [`analysis`]), admission and
//! eviction, the replay of a cached behaviour and the invalidation of entries when the
//! control plane changes a table.
//!
//! A behaviour is keyed on the packed input bits of every field the pipeline may read or
//! write (a field written on one path keeps its input value on another, so its input decides
//! the output too), the validity of every header, stack fill levels and variable-length
//! widths. Given the same key and the same table contents the pipeline is deterministic
//! (pipelines with registers, meters, random numbers, logging or volatile metadata are not
//! cached), so the recorded outcome is exact: the final bytes of every field the pipeline
//! may write, validity, the packet registers (clone, resubmit, recirculate, digest,
//! truncate), the packet-length change, success or fault (drops are cached too), and the
//! side effects replayed live on every hit: the direct counters and ageing stamps of the
//! entries that were hit and the indirect counters that were counted (with the hit packet's
//! own length). Each entry records the table entries it hit and the tables it missed, and
//! the control plane's changes remove exactly the entries that depended on what changed.

pub mod analysis;
pub mod diff;
pub mod state;

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use crate::compile::{Engine, GNode};
use crate::exec::{Fault, Pkt, PktRegs, State};
use analysis::PipelineAnalysis;

/// How new behaviours are admitted into the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Every recorded miss is inserted.
    Always,
    /// The paper's hot-behaviour detector: a count-min sketch of 2 × 64K 16-bit counters;
    /// a behaviour is admitted when both its counters exceed `threshold` (then both are
    /// cleared).
    CountMin { threshold: u16 },
    /// The same sketch with decay (TinyLFU-style): every `window` increments all counters
    /// are halved.
    TinyLfu { threshold: u16, window: u32 },
}

/// Which entry makes room for a new one when the cache is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Eviction {
    /// Oldest inserted first (the paper's cache manager).
    Fifo,
    /// CLOCK (second chance): entries hit since the hand last passed are kept.
    Clock,
}

/// How pipelines that read or write registers are cached ([`state`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Stateful {
    /// Not cached (bypassed as uncacheable).
    Off,
    /// The paper's value-in-key: a hit needs every register cell the behaviour read to hold
    /// the recorded value.
    Value,
    /// Guards and symbolic updates where the analysis allows them (a register
    /// read-modify-write replayed as `cell := live + c`, conditions on the value re-checked),
    /// value guards elsewhere.
    #[default]
    Symbolic,
}

/// Cache settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Entries per cache (per worker).
    pub capacity: usize,
    pub admission: Admission,
    pub eviction: Eviction,
    /// Tables (by their JSON names) whose application makes a behaviour uncached (a
    /// per-table opt-out, for debugging); names the program does not have are ignored.
    pub skip_tables: Vec<String>,
    /// Pipelines with registers.
    pub stateful: Stateful,
    /// Cache the egress pipeline too (off by default: on case #4 the egress pipeline is
    /// cheaper natively than a lookup, see `bench/RESULTS.md`).
    pub egress: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            capacity: 65_536,
            admission: Admission::Always,
            eviction: Eviction::Clock,
            skip_tables: Vec::new(),
            stateful: Stateful::default(),
            egress: false,
        }
    }
}

impl Config {
    /// Parse an admission policy: `always`, `cm:T` (count-min, threshold T) or
    /// `tinylfu:T[:W]` (count-min with halving every W increments, default 1,000,000).
    pub fn parse_admission(s: &str) -> Result<Admission, String> {
        let mut it = s.split(':');
        let kind = it.next().unwrap_or("");
        let num = |v: Option<&str>, what: &str, default: Option<u32>| -> Result<u32, String> {
            match v {
                Some(v) => v
                    .parse::<u32>()
                    .map_err(|_| format!("admission '{s}': {what} '{v}' is not a number")),
                None => default.ok_or(format!("admission '{s}': give a {what}")),
            }
        };
        let adm = match kind {
            "always" => Admission::Always,
            "cm" | "count-min" => Admission::CountMin {
                threshold: num(it.next(), "threshold", None)?.min(u16::MAX as u32 - 1) as u16,
            },
            "tinylfu" => Admission::TinyLfu {
                threshold: num(it.next(), "threshold", None)?.min(u16::MAX as u32 - 1) as u16,
                window: num(it.next(), "window", Some(1_000_000))?.max(1),
            },
            _ => {
                return Err(format!(
                    "admission '{s}': give always, cm:THRESHOLD or tinylfu:THRESHOLD[:WINDOW]"
                ))
            }
        };
        if it.next().is_some() {
            return Err(format!("admission '{s}': too many ':' parts"));
        }
        Ok(adm)
    }

    /// Parse a stateful mode: `off`, `value` or `symbolic`.
    pub fn parse_stateful(s: &str) -> Result<Stateful, String> {
        match s {
            "off" => Ok(Stateful::Off),
            "value" => Ok(Stateful::Value),
            "symbolic" => Ok(Stateful::Symbolic),
            _ => Err(format!("stateful mode '{s}': give off, value or symbolic")),
        }
    }

    /// Parse an eviction policy: `fifo` or `clock`.
    pub fn parse_eviction(s: &str) -> Result<Eviction, String> {
        match s {
            "fifo" => Ok(Eviction::Fifo),
            "clock" => Ok(Eviction::Clock),
            _ => Err(format!("eviction '{s}': give fifo or clock")),
        }
    }
}

/// Counters of one cache (or the sum over workers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets that reached the cached pipeline.
    pub lookups: u64,
    pub hits: u64,
    /// Hits that replayed a cached prefix and resumed the pipeline natively.
    pub resumed: u64,
    /// Misses: no entry for the key.
    pub miss_absent: u64,
    /// Misses: an entry whose preconditions the packet does not meet (packet-length register
    /// too small, other incoming packet registers).
    pub miss_length: u64,
    /// Misses: an entry whose state guards fail (a register value or branch changed); the
    /// new behaviour replaces it.
    pub miss_guard: u64,
    /// Not looked up: the pipeline is not cacheable.
    pub bypass_uncacheable: u64,
    /// Not looked up: tracing or stage timing is on.
    pub bypass_debug: u64,
    /// Misses not recorded (the admission policy said no).
    pub admission_rejected: u64,
    pub inserts: u64,
    /// Recorded misses not inserted: the packet-length register saturated.
    pub insert_refused_length: u64,
    /// Recorded misses not inserted: the pipeline changed a byte outside the analysed write
    /// set (an analysis gap; must stay 0).
    pub insert_refused_unexpected_write: u64,
    /// Recorded misses not inserted: they applied an opted-out table.
    pub insert_refused_opt_out: u64,
    /// Recorded misses not inserted: register accesses the symbolic mode cannot replay
    /// (a cell read twice or after a write in one run).
    pub insert_refused_stateful: u64,
    /// Recorded misses not inserted: the run read bytes of a header invalid on arrival
    /// (stale bytes the key masks, [`Plan::stale`]).
    pub insert_refused_stale_read: u64,
    pub evictions: u64,
    /// Entries removed by control-plane changes.
    pub invalidated: u64,
    /// Control-plane changes that reached the cache.
    pub invalidation_ops: u64,
    /// Index references the changes examined (the invalidation work: the affected entries
    /// for deletes, modifies and default changes; every entry that applied the table for an
    /// added entry).
    pub invalidation_scanned: u64,
    /// Whole-cache flushes (program swap, state reset, hash parameters).
    pub flushes: u64,
    /// Entries now.
    pub entries: u64,
    /// Bytes held by the entries now (keys, effects, paths), estimated.
    pub bytes: u64,
}

impl Stats {
    /// Add `o` into `self` (for the sum over workers).
    pub fn add(&mut self, o: &Stats) {
        self.lookups += o.lookups;
        self.hits += o.hits;
        self.resumed += o.resumed;
        self.miss_absent += o.miss_absent;
        self.miss_length += o.miss_length;
        self.miss_guard += o.miss_guard;
        self.bypass_uncacheable += o.bypass_uncacheable;
        self.bypass_debug += o.bypass_debug;
        self.admission_rejected += o.admission_rejected;
        self.inserts += o.inserts;
        self.insert_refused_length += o.insert_refused_length;
        self.insert_refused_unexpected_write += o.insert_refused_unexpected_write;
        self.insert_refused_opt_out += o.insert_refused_opt_out;
        self.insert_refused_stale_read += o.insert_refused_stale_read;
        self.insert_refused_stateful += o.insert_refused_stateful;
        self.evictions += o.evictions;
        self.invalidated += o.invalidated;
        self.invalidation_ops += o.invalidation_ops;
        self.invalidation_scanned += o.invalidation_scanned;
        self.flushes += o.flushes;
        self.entries += o.entries;
        self.bytes += o.bytes;
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pct = |n: u64| {
            if self.lookups == 0 {
                0.0
            } else {
                100.0 * n as f64 / self.lookups as f64
            }
        };
        write!(
            f,
            "lookups {}, hits {} ({:.1}%, {} resumed), misses: absent {}, length {}, guard {}; bypassed: uncacheable {}, debug {}; \
             admission rejected {}, inserts {}, refused (length {}, unexpected write {}, opt-out {}, stateful {}, stale read {}), evictions {}, \
             invalidated {} in {} changes, flushes {}, entries {} ({} bytes, {} per entry)",
            self.lookups,
            self.hits,
            pct(self.hits),
            self.resumed,
            self.miss_absent,
            self.miss_length,
            self.miss_guard,
            self.bypass_uncacheable,
            self.bypass_debug,
            self.admission_rejected,
            self.inserts,
            self.insert_refused_length,
            self.insert_refused_unexpected_write,
            self.insert_refused_opt_out,
            self.insert_refused_stateful,
            self.insert_refused_stale_read,
            self.evictions,
            self.invalidated,
            self.invalidation_ops,
            self.flushes,
            self.entries,
            self.bytes,
            self.bytes.checked_div(self.entries).unwrap_or(0)
        )
    }
}

/// What the slow path records while it runs for the cache (kept in
/// [`crate::exec::ExternState::rec`] while a miss is recorded).
#[derive(Clone, Debug, Default)]
pub struct Rec {
    /// Every table applied: `(table, Some((slot, handle)), key offset, key length)` on a
    /// hit, `(table, None, ..)` on a miss; the key is the one the table looked up, in
    /// [`Rec::keys`].
    pub path: Vec<Step>,
    /// The action each step of `path` ran (`u32::MAX`: none).
    pub actions: Vec<u32>,
    pub keys: Vec<u8>,
    /// Indirect counters counted: `(counter array, index)`.
    pub counts: Vec<(u32, u32)>,
    /// Register accesses and conditions ([`state`]).
    pub regs: state::RegLog,
    /// Prefix caching: the interpreter stops before any of these nodes ...
    pub stop: Vec<GNode>,
    /// ... and leaves here the one it stopped at.
    pub resume: Option<GNode>,
}

impl Rec {
    pub(crate) fn reg_read(&mut self, array: u32, index: u32, cell: &[u8], dst: Option<u32>) {
        let l = &mut self.regs;
        l.reads.push(state::RegAccess {
            array,
            index,
            value: l.bytes.len() as u64,
            field: dst,
            seq: l.reads.len() as u32,
        });
        l.bytes.extend_from_slice(cell);
    }

    pub(crate) fn reg_write(&mut self, array: u32, index: u32, value: u64, src: Option<u32>) {
        let l = &mut self.regs;
        l.writes.push(state::RegAccess {
            array,
            index,
            value,
            field: src,
            seq: l.reads.len() as u32,
        });
    }

    pub(crate) fn cond(&mut self, c: u32, v: bool, phv: &crate::layout::Phv) {
        let l = &mut self.regs;
        if l.watch.is_empty() {
            return;
        }
        l.conds
            .push((c, v, l.vals.len() as u32, l.reads.len() as u32));
        for w in &l.watch {
            l.vals.push(phv.read_u64(w));
        }
    }
}

/// One table applied by a recorded run: table, `(slot, handle)` of the entry hit (`None`
/// on a miss), offset and length of the lookup key in the entry's key bytes.
pub type Step = (u32, Option<(u32, u32)>, u32, u32);

/// The key layout and write set of the ingress pipeline, at the engine's byte level.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    /// Why the pipeline is not cached (`None`: cached).
    pub uncacheable: Option<String>,
    /// PHV byte ranges `(offset, length)` packed into the key (read or written fields).
    pub key_ranges: Vec<(u32, u32)>,
    /// PHV byte ranges the pipeline may write (their final bytes are the effect).
    pub write_ranges: Vec<(u32, u32)>,
    /// Bytes of the key: ranges, validity bits, stack levels, VL widths.
    pub key_bytes: usize,
    pub write_bytes: usize,
    /// Some action removes a header: hits need the packet-length register at least as large
    /// as the recorded packet's.
    pub removes_headers: bool,
    pub has_vl: bool,
    /// The pipeline this plan caches (`ingress` or `egress`).
    pub pipeline: String,
    /// The pipeline accesses registers (entries carry state guards, [`state`]).
    pub stateful: bool,
    /// Symbolic mode: the state fields (`None`: value guards).
    pub state_fields: Option<Vec<crate::layout::FieldLoc>>,
    /// Why the symbolic mode was not used (stateful pipelines only).
    pub symbolic_refused: Option<String>,
    /// Per engine condition: it reads a state field (re-checked on a hit).
    pub guard_conds: Vec<bool>,
    /// Prefix caching: the pipeline is not cacheable as a whole (`prefix_of` says why), so
    /// the cache keys and replays its cacheable prefix and the pipeline resumes natively at
    /// the first of these (uncacheable) nodes a packet reaches.
    pub stop: Vec<GNode>,
    pub prefix_of: Option<String>,
    /// Bytes of a packed key in the cache's key arena: `key_bytes` rounded up to 8 (the
    /// hash and the comparison work on whole 64-bit words; the padding is zero).
    pub stride: usize,
    /// Headers whose bytes the key masks while they are invalid ([`analysis::StaleFacts`]).
    pub stale: Vec<StaleHdr>,
    /// Per engine table: the candidates (bits of [`StaleHdr::bit`]) its key reads.
    pub stale_tables: Vec<u64>,
    /// Per engine action: `(zeroes, stale)` candidates ([`analysis::StaleFacts::actions`]).
    pub stale_actions: Vec<(u64, u64)>,
}

/// A header whose stale bytes are masked out of the key while it is invalid.
#[derive(Clone, Debug, Default)]
pub struct StaleHdr {
    pub header: u32,
    /// Its bit in [`Plan::stale_tables`] and [`Plan::stale_actions`].
    pub bit: u32,
    /// `(offset, length)` of its bytes in the packed key.
    pub key: Vec<(u32, u32)>,
    /// `(offset, length)` of its bytes in the PHV's write ranges: a hit whose recorded run
    /// left the header stale (never zeroed) keeps the packet's own bytes there.
    pub keep: Vec<(u32, u32)>,
}

fn merge(mut r: Vec<(u32, u32)>) -> Vec<(u32, u32)> {
    r.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (o, n) in r {
        if n == 0 {
            continue;
        }
        match out.last_mut() {
            Some((lo, ln)) if o <= *lo + *ln => *ln = (*ln).max(o + n - *lo),
            _ => out.push((o, n)),
        }
    }
    out
}

impl Plan {
    /// The plan of `eng`'s ingress pipeline.
    pub fn new(eng: &Engine) -> Plan {
        Plan::for_pipeline(eng, "ingress")
    }

    /// The plan of `eng`'s pipeline `name` (`ingress` or `egress`), registers cached
    /// symbolically where possible.
    pub fn for_pipeline(eng: &Engine, name: &str) -> Plan {
        Plan::with_mode(eng, name, Stateful::default())
    }

    /// The plan of `eng`'s pipeline `name` with stateful mode `mode`.
    pub fn with_mode(eng: &Engine, name: &str, mode: Stateful) -> Plan {
        let p = &eng.prog;
        let Some(pi) = p.pipelines.iter().position(|pl| pl.name == name) else {
            return Plan {
                uncacheable: Some(format!("no {name} pipeline")),
                pipeline: name.to_string(),
                ..Default::default()
            };
        };
        let full = analysis::analyse(p, pi);
        let mut stop = Vec::new();
        let mut prefix_of = None;
        let a = match full.prefix {
            Some(pa) if !full.uncacheable.is_empty() => {
                let (tb, cb, ab) = p.pipelines[..pi].iter().fold((0, 0, 0), |(t, c, a), pl| {
                    (
                        t + pl.tables.len() as u32,
                        c + pl.conditionals.len() as u32,
                        a + pl.action_calls.len() as u32,
                    )
                });
                for n in &full.stop_nodes {
                    stop.push(match *n {
                        tern_model::Node::Table(t) => GNode::Table(tb + t),
                        tern_model::Node::Conditional(c) => GNode::Cond(cb + c),
                        tern_model::Node::ActionCall(c) => GNode::Call(ab + c),
                    });
                }
                prefix_of = full
                    .uncacheable
                    .first()
                    .map(|(node, why)| format!("{node}: {why}"));
                *pa
            }
            _ => PipelineAnalysis {
                prefix: None,
                ..full
            },
        };
        let mut plan = Plan {
            stop,
            prefix_of,
            removes_headers: a.removes_headers,
            has_vl: eng.layout.has_vl,
            pipeline: name.to_string(),
            ..Default::default()
        };
        if let Some((node, why)) = a.uncacheable.first() {
            plan.uncacheable = Some(format!("{node}: {why}"));
        }
        if let Some((node, what)) = a.stateful.first() {
            plan.stateful = true;
            if mode == Stateful::Off && plan.uncacheable.is_none() {
                plan.uncacheable = Some(format!("{node}: {what} (stateful caching is off)"));
            }
            if mode == Stateful::Symbolic {
                match analysis::symbolic_state(p, pi) {
                    Ok(fs) => {
                        let locs: Vec<crate::layout::FieldLoc> = fs
                            .iter()
                            .filter_map(|f| {
                                eng.layout
                                    .headers
                                    .get(f.header as usize)
                                    .and_then(|h| h.fields.get(f.field as usize))
                                    .copied()
                            })
                            .collect();
                        plan.guard_conds = eng
                            .conds
                            .iter()
                            .map(|c| reads_any(&c.expr, &locs))
                            .collect();
                        plan.state_fields = Some(locs);
                    }
                    Err(why) => plan.symbolic_refused = Some(why),
                }
            } else if mode == Stateful::Value {
                plan.symbolic_refused = Some("value mode".into());
            }
        }
        let loc = |f: &tern_model::FieldRef| {
            eng.layout
                .headers
                .get(f.header as usize)
                .and_then(|h| h.fields.get(f.field as usize))
                .map(|l| (l.off, l.nbytes))
        };
        let whole = |h: u32| {
            let hl = &eng.layout.headers[h as usize];
            (hl.off, hl.slot_bytes)
        };
        let mut key: Vec<(u32, u32)> = a.key_fields(p).iter().filter_map(loc).collect();
        key.extend(a.whole_headers.iter().map(|h| whole(*h)));
        let mut w: Vec<(u32, u32)> = a
            .writes
            .iter()
            .filter(|f| f.field != tern_model::VALID_FIELD)
            .filter_map(loc)
            .collect();
        w.extend(a.whole_headers.iter().map(|h| whole(*h)));
        // Drops write the engine's resolved egress_spec / mcast_grp slots.
        if a.effects.iter().any(|(e, _)| e == "drop") {
            for s in [&eng.std.egress_spec, &eng.std.mcast_grp] {
                if let Some(f) = s.f {
                    w.push((f.off, f.nbytes));
                }
            }
        }
        key.extend(w.iter().copied());
        // Volatile standard metadata the analysis may have missed by name.
        if plan.uncacheable.is_none() {
            for s in [&eng.std.ingress_ts, &eng.std.egress_ts] {
                if let Some(f) = s.f {
                    if key
                        .iter()
                        .any(|(o, n)| f.off < o + n && *o < f.off + f.nbytes)
                    {
                        plan.uncacheable = Some("reads a timestamp".into());
                    }
                }
            }
        }
        plan.key_ranges = merge(key);
        plan.write_ranges = merge(w);
        plan.write_bytes = plan.write_ranges.iter().map(|r| r.1 as usize).sum();
        let valid_bytes = eng.layout.headers.len().div_ceil(8);
        plan.key_bytes = plan.key_ranges.iter().map(|r| r.1 as usize).sum::<usize>()
            + valid_bytes
            + 4 * (eng.layout.stacks.len() + eng.layout.union_stacks.len())
            + if plan.has_vl {
                4 * eng.layout.headers.len()
            } else {
                0
            };
        plan.stride = plan.key_bytes.div_ceil(8).max(1) * 8;
        plan.stale_plan(eng, pi);
        plan
    }

    /// Fill [`Plan::stale`], [`Plan::stale_tables`] and [`Plan::stale_actions`].
    fn stale_plan(&mut self, eng: &Engine, pi: usize) {
        let p = &eng.prog;
        if eng.actions.len() != p.actions.len() {
            return;
        }
        let f = analysis::stale_facts(p, pi);
        let tb: usize = p.pipelines[..pi].iter().map(|pl| pl.tables.len()).sum();
        // The part of `[a, a + n)` inside each range of `ranges`, as `(offset in the packed
        // ranges, PHV offset, length)`.
        let overlap = |ranges: &[(u32, u32)], a: u32, n: u32| -> Vec<(u32, u32, u32)> {
            let mut at = 0u32;
            let mut out = Vec::new();
            for &(o, l) in ranges {
                let (lo, hi) = (o.max(a), (o + l).min(a + n));
                if lo < hi {
                    out.push((at + lo - o, lo, hi - lo));
                }
                at += l;
            }
            out
        };
        for (bit, &h) in f.headers.iter().enumerate() {
            let hl = &eng.layout.headers[h as usize];
            let key: Vec<(u32, u32)> = overlap(&self.key_ranges, hl.off, hl.slot_bytes)
                .into_iter()
                .map(|(k, _, n)| (k, n))
                .collect();
            if key.is_empty() {
                continue;
            }
            let keep = overlap(&self.write_ranges, hl.off, hl.slot_bytes)
                .into_iter()
                .map(|(_, o, n)| (o, n))
                .collect();
            self.stale.push(StaleHdr {
                header: h,
                bit: bit as u32,
                key,
                keep,
            });
        }
        if self.stale.is_empty() {
            return;
        }
        self.stale_tables = vec![0; eng.tables.len()];
        for (i, m) in f.table_reads.iter().enumerate() {
            if let Some(t) = self.stale_tables.get_mut(tb + i) {
                *t = *m;
            }
        }
        self.stale_actions = f.actions;
    }

    /// The candidates of [`Plan::stale`] invalid in `pkt` (bits of [`StaleHdr::bit`]).
    fn stale_now(&self, pkt: &Pkt) -> u64 {
        self.stale
            .iter()
            .filter(|s| !pkt.phv.valid[s.header as usize])
            .fold(0, |m, s| m | 1 << s.bit)
    }

    /// The candidates still stale after the recorded `path` (`actions`: the action each
    /// step ran, `u32::MAX` for none) from `stale` on arrival; `None` if the path read one.
    fn stale_after(&self, mut stale: u64, path: &[Step], actions: &[u32]) -> Option<u64> {
        for (s, a) in path.iter().zip(actions) {
            if self.stale_tables.get(s.0 as usize).copied().unwrap_or(0) & stale != 0 {
                return None;
            }
            let (z, t) = self
                .stale_actions
                .get(*a as usize)
                .copied()
                .unwrap_or((0, 0));
            if t & stale != 0 {
                return None;
            }
            stale &= !z;
        }
        Some(stale)
    }

    /// Pack `pkt`'s key into `out` (`stride` bytes; the padding stays zero).
    fn key(&self, pkt: &Pkt, out: &mut [u8]) {
        let b = &pkt.phv.bytes;
        let mut at = 0usize;
        for &(o, n) in &self.key_ranges {
            let (o, n) = (o as usize, n as usize);
            copy_exact(&mut out[at..at + n], &b[o..o + n]);
            at += n;
        }
        // SAFETY: `bool` is one byte holding 0 or 1, so a `[bool]` is a valid `[u8]` of the
        // same length; the slice borrows `pkt` for this function only.
        let valid: &[u8] = unsafe {
            std::slice::from_raw_parts(pkt.phv.valid.as_ptr().cast::<u8>(), pkt.phv.valid.len())
        };
        let mut chunks = valid.chunks_exact(8);
        for c in &mut chunks {
            // Eight 0/1 bytes to eight bits: every partial product of the multiply lands on
            // its own bit, so the top byte holds the eight flags (no carries).
            let w = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            out[at] = (w.wrapping_mul(0x0102_0408_1020_4080) >> 56) as u8;
            at += 1;
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut x = 0u8;
            for (i, v) in rest.iter().enumerate() {
                x |= v << (7 - i);
            }
            out[at] = x;
            at += 1;
        }
        for s in pkt.phv.stack_next.iter().chain(&pkt.phv.union_stack_next) {
            out[at..at + 4].copy_from_slice(&s.to_le_bytes());
            at += 4;
        }
        if self.has_vl {
            for w in &pkt.phv.vl_width {
                out[at..at + 4].copy_from_slice(&w.to_le_bytes());
                at += 4;
            }
        }
        for s in &self.stale {
            if !pkt.phv.valid[s.header as usize] {
                for &(o, n) in &s.key {
                    out[o as usize..(o + n) as usize].fill(0);
                }
            }
        }
    }
}

/// `d.copy_from_slice(s)` with fixed-size moves for the short lengths fields have (a
/// variable-length `copy_from_slice` is a `memcpy` call, ~25 instructions for a few bytes).
#[inline(always)]
fn copy_exact(d: &mut [u8], s: &[u8]) {
    macro_rules! fixed {
        ($n:literal) => {{
            let a: [u8; $n] = s[..$n].try_into().unwrap_or([0; $n]);
            d[..$n].copy_from_slice(&a);
        }};
    }
    match s.len() {
        1 => d[0] = s[0],
        2 => fixed!(2),
        3 => fixed!(3),
        4 => fixed!(4),
        5 => fixed!(5),
        6 => fixed!(6),
        7 => fixed!(7),
        8 => fixed!(8),
        _ => d.copy_from_slice(s),
    }
}

/// Does `e` read one of the fields `locs`?
fn reads_any(e: &crate::expr::CExpr, locs: &[crate::layout::FieldLoc]) -> bool {
    use crate::expr::CExpr;
    match e {
        CExpr::Field(f) => locs.iter().any(|l| l.off == f.off),
        CExpr::Register { index, .. } => reads_any(index, locs),
        CExpr::Op { l, r, c, .. } => [l, r, c].into_iter().flatten().any(|x| reads_any(x, locs)),
        _ => false,
    }
}

/// FxHash-style hasher over the packed key (keys are not attacker-chosen hash-flooding
/// targets beyond what the admission policy bounds; SipHash would double the lookup cost).
#[derive(Default)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        // Final avalanche so the low bits (bucket index) depend on every input bit.
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x
    }
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x517c_c1b7_2722_0a95;
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let v = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
            self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(K);
        }
        let mut last = 0u64;
        for (i, b) in chunks.remainder().iter().enumerate() {
            last |= (*b as u64) << (8 * i);
        }
        self.0 = (self.0.rotate_left(5) ^ last ^ ((bytes.len() as u64) << 56)).wrapping_mul(K);
    }
}

/// `(table, entry handle)` → `(slot, generation)` of the cached behaviours that hit it.
type EntryIndex = HashMap<(u32, u32), Vec<(u32, u32)>, BuildHasherDefault<KeyHasher>>;
type KeyIndex = HashMap<(u32, u64), Vec<(u32, u32)>, BuildHasherDefault<KeyHasher>>;

/// The mask of an exact-only table's entries (`None`: some field is not exact).
fn exact_mask(t: &crate::compile::CTable) -> Option<Box<[u8]>> {
    let mut m = vec![0u8; t.spec.total as usize];
    for f in &t.spec.fields {
        let (o, nb) = (f.off as usize, f.nbytes as usize);
        match f.kind {
            tern_model::MatchKind::Exact => {
                let field = m.get_mut(o..o + nb)?;
                field.fill(0xff);
                // Clear the bits above the width (big-endian: the leading ones).
                let mut clear = (nb * 8).saturating_sub(f.width as usize);
                for b in field.iter_mut() {
                    if clear == 0 {
                        break;
                    }
                    let c = clear.min(8);
                    *b &= (0xffu16 >> c) as u8;
                    clear -= c;
                }
            }
            tern_model::MatchKind::Valid => *m.get_mut(o)? = 1,
            _ => return None,
        }
    }
    Some(m.into())
}

/// The hash of a lookup key under an exact table's mask.
fn masked_hash(key: &[u8], mask: &[u8]) -> u64 {
    let mut h = KeyHasher::default();
    for (k, m) in key.iter().zip(mask) {
        h.write_u8(k & m);
    }
    h.finish()
}

/// The hash of a packed key (`stride` bytes, a multiple of 8): one pass over its words.
#[inline]
fn hash_key(k: &[u8]) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    let mut h = k.len() as u64;
    for c in k.chunks_exact(8) {
        let v = u64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
        h = (h.rotate_left(5) ^ v).wrapping_mul(K);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

/// Open-addressing index over the cache's slots (linear probing, backward-shift deletion, no
/// tombstones): each bucket holds `slot + 1` (0: empty) in its low 32 bits and the top 32 bits
/// of the slot's hash above, so a probe compares a tag before touching the key arena.
#[derive(Debug, Default)]
struct Index {
    buckets: Vec<u64>,
    len: usize,
}

impl Index {
    fn mask(&self) -> usize {
        self.buckets.len().wrapping_sub(1)
    }

    #[inline]
    fn find(&self, h: u64, key: &[u8], keys: &[u8], stride: usize) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.mask();
        let tag = h >> 32;
        let mut i = h as usize & mask;
        loop {
            let b = self.buckets[i];
            if b == 0 {
                return None;
            }
            if b >> 32 == tag {
                let s = (b as u32 - 1) as usize;
                if &keys[s * stride..(s + 1) * stride] == key {
                    return Some(s as u32);
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// Add `slot` (hash `h`), growing to keep the load at most one half.
    fn insert(&mut self, h: u64, slot: u32, hashes: &[u64]) {
        if 2 * (self.len + 1) > self.buckets.len() {
            let n = (self.buckets.len() * 2).max(16);
            let old = std::mem::replace(&mut self.buckets, vec![0; n]);
            for b in old.into_iter().filter(|b| *b != 0) {
                let s = (b as u32 - 1) as usize;
                self.place(hashes[s], b);
            }
        }
        self.place(h, (h >> 32) << 32 | (slot as u64 + 1));
        self.len += 1;
    }

    fn place(&mut self, h: u64, b: u64) {
        let mask = self.mask();
        let mut i = h as usize & mask;
        while self.buckets[i] != 0 {
            i = (i + 1) & mask;
        }
        self.buckets[i] = b;
    }

    /// Remove `slot` (hash `h`; it must be present).
    fn remove(&mut self, h: u64, slot: u32, hashes: &[u64]) {
        let mask = self.mask();
        let mut i = h as usize & mask;
        while self.buckets[i] as u32 != slot + 1 {
            if self.buckets[i] == 0 {
                return;
            }
            i = (i + 1) & mask;
        }
        self.len -= 1;
        // Backward shift: pull later members of the cluster into the hole when their home
        // bucket is not cyclically in (hole, their position].
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let b = self.buckets[j];
            if b == 0 {
                self.buckets[i] = 0;
                return;
            }
            let k = hashes[(b as u32 - 1) as usize] as usize & mask;
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if !stays {
                self.buckets[i] = b;
                i = j;
            }
        }
    }

    fn clear(&mut self) {
        self.buckets.clear();
        self.len = 0;
    }
}

/// One cached behaviour.
#[derive(Debug)]
struct Entry {
    /// Final bytes of the plan's write ranges, concatenated.
    writes: Box<[u8]>,
    valid: Box<[bool]>,
    stack_next: Box<[u32]>,
    union_stack_next: Box<[u32]>,
    vl_width: Box<[u32]>,
    regs: PktRegs,
    /// The packet registers the recorded run started with (egress packets carry ingress's
    /// truncation; a hit needs the same).
    regs0: PktRegs,
    len_delta: i64,
    /// The recorded packet's length register (a hit needs at least this much when the
    /// pipeline removes headers).
    len0: u32,
    /// `None`: the pipeline completed; `Some(fault)`: it faulted (the packet is dropped).
    fault: Option<String>,
    path: Box<[Step]>,
    /// The lookup keys of `path`, concatenated.
    keys: Box<[u8]>,
    counts: Box<[(u32, u32)]>,
    /// The steps of `path` whose entry has a direct counter or ageing: `(table, store slot,
    /// flags)` (bit 0: ageing, bit 1: counter), replayed on every hit.
    live: Box<[(u32, u32, u32)]>,
    /// Register guards and effects (stateful pipelines).
    state: Option<state::EntryState>,
    /// Prefix caching: where the pipeline resumes natively after the replay.
    resume: Option<GNode>,
    /// Masked headers ([`Plan::stale`] bits) the recorded run left stale: a hit keeps the
    /// packet's own bytes there (the run did not write them).
    keep: u64,
    referenced: bool,
}

impl Entry {
    fn bytes(&self) -> usize {
        std::mem::size_of::<Entry>()
            + self.writes.len()
            + self.valid.len()
            + 4 * (self.stack_next.len() + self.union_stack_next.len() + self.vl_width.len())
            + std::mem::size_of::<Step>() * self.path.len()
            + self.keys.len()
            + 8 * self.counts.len()
            + 12 * self.live.len()
            + self.state.as_ref().map_or(0, |s| s.bytes())
            + self.fault.as_ref().map_or(0, |f| f.len())
    }
}

const CM_SLOTS: usize = 1 << 16;

fn skip_of(cfg: &Config, eng: &Engine) -> Vec<bool> {
    eng.tables
        .iter()
        .map(|t| cfg.skip_tables.contains(&t.name))
        .collect()
}

/// The behaviour cache of one switch replica.
#[derive(Debug)]
pub struct Cache {
    pub cfg: Config,
    pub plan: Plan,
    /// Per engine table: opted out ([`Config::skip_tables`]).
    skip: Vec<bool>,
    /// Slots by key.
    index: Index,
    /// Packed keys, `plan.stride` bytes per slot.
    keys: Vec<u8>,
    /// Key hash per slot.
    hashes: Vec<u64>,
    slab: Vec<Option<Entry>>,
    gens: Vec<u32>,
    free: Vec<u32>,
    fifo: VecDeque<(u32, u32)>,
    hand: usize,
    by_table: Vec<Vec<(u32, u32)>>,
    by_miss: Vec<Vec<(u32, u32)>>,
    by_entry: EntryIndex,
    /// Behaviours by the lookup key they looked up in an exact table (masked by
    /// `exact_mask`, hashed): a new entry of such a table finds the behaviours it affects
    /// here, without scanning every behaviour that applied the table.
    by_key: KeyIndex,
    /// Per engine table whose key fields are all exact (or validity): the mask its entries
    /// carry.
    exact_mask: Vec<Option<Box<[u8]>>>,
    /// Per engine table: indexed in `by_key` (from the first entry added to it while
    /// behaviours that applied it are cached: tables nobody adds to during traffic cost
    /// inserts nothing). `by_key` holds at most one reference per
    /// `by_table` one, so the rebuilds `by_table` triggers bound it too.
    key_indexed: Vec<bool>,
    /// References pushed into the reverse indexes since their last rebuild (live or stale).
    index_refs: usize,
    /// References the live entries hold (two per table on their path): the indexes are
    /// rebuilt once the stale ones outnumber these, so a rebuild costs no more than the inserts
    /// that made it necessary (a bound on the capacity alone made a full cache of long-path
    /// behaviours rebuild on almost every insert).
    live_refs: usize,
    cm: Vec<[u16; 2]>,
    cm_ticks: u32,
    kbuf: Vec<u8>,
    /// The packet's own bytes of stale headers a hit keeps ([`Entry::keep`]).
    kept: Vec<u8>,
    pre: Vec<u8>,
    rec: Option<Box<Rec>>,
    stats: Stats,
    bytes: usize,
    /// The egress pipeline's cache (owned by the ingress one, so every invalidation reaches
    /// both); `None` in the egress cache itself.
    egress: Option<Box<Cache>>,
}

impl Cache {
    /// An empty cache for `eng`'s ingress pipeline.
    pub fn new(cfg: Config, eng: &Engine) -> Cache {
        Cache::for_pipeline(cfg, eng, "ingress")
    }

    /// An empty cache for `eng`'s pipeline `name` (`ingress` or `egress`).
    pub fn for_pipeline(cfg: Config, eng: &Engine, name: &str) -> Cache {
        let plan = Plan::with_mode(eng, name, cfg.stateful);
        let n = eng.tables.len();
        let cm = match cfg.admission {
            Admission::Always => Vec::new(),
            _ => vec![[0u16; 2]; CM_SLOTS],
        };
        let skip = skip_of(&cfg, eng);
        let mut c = Cache {
            cfg,
            plan,
            skip,
            index: Index::default(),
            keys: Vec::new(),
            hashes: Vec::new(),
            slab: Vec::new(),
            gens: Vec::new(),
            free: Vec::new(),
            fifo: VecDeque::new(),
            hand: 0,
            by_table: vec![Vec::new(); n],
            by_miss: vec![Vec::new(); n],
            by_entry: HashMap::default(),
            by_key: HashMap::default(),
            exact_mask: eng.tables.iter().map(exact_mask).collect(),
            key_indexed: vec![false; n],
            index_refs: 0,
            live_refs: 0,
            cm,
            cm_ticks: 0,
            kbuf: Vec::new(),
            kept: Vec::new(),
            pre: Vec::new(),
            rec: Some(Box::default()),
            stats: Stats::default(),
            bytes: 0,
            egress: None,
        };
        if name == "ingress" && c.cfg.egress && eng.egress.is_some() {
            c.egress = Some(Box::new(Cache::for_pipeline(c.cfg.clone(), eng, "egress")));
        }
        c
    }

    /// The egress cache's plan and counters (`None`: the program has no egress pipeline).
    pub fn egress_plan(&self) -> Option<&Plan> {
        self.egress.as_ref().map(|e| &e.plan)
    }

    /// The egress cache's counters (entries and bytes as of now).
    pub fn egress_stats(&self) -> Option<Stats> {
        self.egress.as_ref().map(|e| e.stats())
    }

    /// Run the egress pipeline of `pkt` through the egress cache (natively when there is
    /// none).
    pub(crate) fn run_egress(
        &mut self,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        init: Option<GNode>,
    ) -> Result<(), Fault> {
        match self.egress.as_deref_mut() {
            Some(e) => e.run(eng, st, pkt, init),
            None => eng.run_pipeline(st, pkt, "egress", init),
        }
    }

    /// The counters so far (entries and bytes as of now).
    pub fn stats(&self) -> Stats {
        let mut s = self.stats;
        s.entries = self.index.len as u64;
        s.bytes = self.bytes as u64;
        s
    }

    /// Run the ingress pipeline of `pkt` through the cache: replay a cached behaviour, or
    /// run the pipeline (recording it when the admission policy admits the key).
    pub(crate) fn run(
        &mut self,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        init: Option<GNode>,
    ) -> Result<(), Fault> {
        self.stats.lookups += 1;
        if self.plan.uncacheable.is_some() {
            self.stats.bypass_uncacheable += 1;
            return eng.run_pipeline(st, pkt, &self.plan.pipeline, init);
        }
        if st.ext.trace.is_some() || st.ext.probe.is_some() {
            self.stats.bypass_debug += 1;
            return eng.run_pipeline(st, pkt, &self.plan.pipeline, init);
        }
        let stride = self.plan.stride;
        if self.kbuf.len() != stride {
            self.kbuf = vec![0; stride];
        }
        self.plan.key(pkt, &mut self.kbuf);
        let h = hash_key(&self.kbuf);
        if let Some(slot) = self.index.find(h, &self.kbuf, &self.keys, stride) {
            match self.replay(eng, st, pkt, slot) {
                Ok(r) => {
                    self.stats.hits += 1;
                    return r;
                }
                Err(Miss::Length) => {
                    self.stats.miss_length += 1;
                    return eng.run_pipeline(st, pkt, &self.plan.pipeline, init);
                }
                Err(Miss::Guard) => {
                    // The state moved on: record the behaviour it leads to now (it
                    // replaces the entry).
                    self.stats.miss_guard += 1;
                    return self.record(eng, st, pkt, init, h);
                }
            }
        }
        self.stats.miss_absent += 1;
        if !self.admit(h) {
            self.stats.admission_rejected += 1;
            return eng.run_pipeline(st, pkt, &self.plan.pipeline, init);
        }
        self.record(eng, st, pkt, init, h)
    }

    /// Run the pipeline with the recorder on and insert the behaviour (key in `self.kbuf`,
    /// hash `h`) if it can be replayed.
    fn record(
        &mut self,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        init: Option<GNode>,
        h: u64,
    ) -> Result<(), Fault> {
        // Record: the slow path (interpreted, so every table apply is seen) with the
        // recorder on.
        self.pre.clear();
        self.pre.extend_from_slice(&pkt.phv.bytes);
        let len0 = pkt.length_reg;
        let regs0 = pkt.regs.clone();
        let mut rec = self.rec.take().unwrap_or_default();
        rec.path.clear();
        rec.actions.clear();
        rec.keys.clear();
        let stale0 = self.plan.stale_now(pkt);
        rec.counts.clear();
        rec.regs.clear();
        rec.regs.watch.clear();
        rec.stop.clear();
        rec.stop.extend_from_slice(&self.plan.stop);
        rec.resume = None;
        if let Some(w) = &self.plan.state_fields {
            rec.regs.watch.extend_from_slice(w);
        }
        st.ext.rec = Some(rec);
        let r = eng.run_pipeline(st, pkt, &self.plan.pipeline, init);
        let rec = st.ext.rec.take().unwrap_or_default();
        let resume = rec.resume;
        let stale = if stale0 == 0 {
            Some(0)
        } else if rec.path.len() == rec.actions.len() {
            self.plan.stale_after(stale0, &rec.path, &rec.actions)
        } else {
            None
        };
        let est = state::build(
            &rec.regs,
            st,
            &pkt.phv,
            self.plan.state_fields.is_some(),
            &self.plan.guard_conds,
        );
        if regs0.len_saturated || pkt.regs.len_saturated {
            self.stats.insert_refused_length += 1;
        } else if rec.path.iter().any(|s| self.skip[s.0 as usize]) {
            self.stats.insert_refused_opt_out += 1;
        } else if !self.only_writes_planned(&pkt.phv.bytes) {
            self.stats.insert_refused_unexpected_write += 1;
        } else if est.is_err() {
            self.stats.insert_refused_stateful += 1;
        } else if stale.is_none() {
            self.stats.insert_refused_stale_read += 1;
        } else {
            let est = est.ok().flatten();
            let mut writes = Vec::with_capacity(self.plan.write_bytes);
            for &(o, n) in &self.plan.write_ranges {
                writes.extend_from_slice(&pkt.phv.bytes[o as usize..(o + n) as usize]);
            }
            let live: Vec<(u32, u32, u32)> = rec
                .path
                .iter()
                .filter_map(|&(ti, hit, _, _)| {
                    let (s, _) = hit?;
                    let t = &eng.tables[ti as usize];
                    let flags = t.support_timeout as u32 | (t.with_counters as u32) << 1;
                    (flags != 0).then_some((ti, s, flags))
                })
                .collect();
            let e = Entry {
                writes: writes.into(),
                valid: pkt.phv.valid.as_slice().into(),
                stack_next: pkt.phv.stack_next.as_slice().into(),
                union_stack_next: pkt.phv.union_stack_next.as_slice().into(),
                vl_width: if self.plan.has_vl {
                    pkt.phv.vl_width.as_slice().into()
                } else {
                    Box::new([])
                },
                regs: pkt.regs.clone(),
                regs0: regs0.clone(),
                len_delta: pkt.length_reg as i64 - len0 as i64,
                len0,
                fault: r.as_ref().err().map(|f| f.0.clone()),
                path: rec.path.as_slice().into(),
                keys: rec.keys.as_slice().into(),
                counts: rec.counts.as_slice().into(),
                live: live.into(),
                state: est,
                resume,
                keep: stale.unwrap_or(0),
                referenced: false,
            };
            // A behaviour whose guards failed is replaced.
            if let Some(old) = self.index.find(h, &self.kbuf, &self.keys, self.plan.stride) {
                self.remove(old);
            }
            self.insert(e, h);
        }
        self.rec = Some(rec);
        match resume {
            // The prefix is recorded; the rest runs natively.
            Some(n) if r.is_ok() => eng.run_pipeline(st, pkt, &self.plan.pipeline, Some(n)),
            _ => r,
        }
    }

    /// No byte outside the planned write ranges changed since `self.pre`.
    fn only_writes_planned(&self, now: &[u8]) -> bool {
        let mut at = 0usize;
        for &(o, n) in &self.plan.write_ranges {
            if now[at..o as usize] != self.pre[at..o as usize] {
                return false;
            }
            at = (o + n) as usize;
        }
        now[at..] == self.pre[at..]
    }

    fn admit(&mut self, h: u64) -> bool {
        let (threshold, window) = match self.cfg.admission {
            Admission::Always => return true,
            Admission::CountMin { threshold } => (threshold, 0),
            Admission::TinyLfu { threshold, window } => (threshold, window),
        };
        let i1 = (h & 0xffff) as usize;
        let i2 = ((h >> 32) & 0xffff) as usize;
        let c1 = self.cm[i1][0].saturating_add(1);
        let c2 = self.cm[i2][1].saturating_add(1);
        self.cm[i1][0] = c1;
        self.cm[i2][1] = c2;
        if window > 0 {
            self.cm_ticks += 1;
            if self.cm_ticks >= window {
                self.cm_ticks = 0;
                for c in &mut self.cm {
                    c[0] >>= 1;
                    c[1] >>= 1;
                }
            }
        }
        if c1.min(c2) > threshold {
            self.cm[i1][0] = 0;
            self.cm[i2][1] = 0;
            true
        } else {
            false
        }
    }

    /// Replay entry `slot` onto `pkt`; `Err` if its packet-length precondition or its state
    /// guards fail.
    fn replay(
        &mut self,
        eng: &Engine,
        st: &mut State,
        pkt: &mut Pkt,
        slot: u32,
    ) -> Result<Result<(), Fault>, Miss> {
        let Some(e) = self.slab[slot as usize].as_mut() else {
            return Err(Miss::Length);
        };
        if (self.plan.removes_headers && pkt.length_reg < e.len0) || pkt.regs != e.regs0 {
            return Err(Miss::Length);
        }
        if let Some(es) = &e.state {
            if !state::check(es, eng, st, pkt) {
                return Err(Miss::Guard);
            }
        }
        let keep = e.keep & self.plan.stale_now(pkt);
        if keep != 0 {
            self.kept.clear();
            for s in self.plan.stale.iter().filter(|s| keep & 1 << s.bit != 0) {
                for &(o, n) in &s.keep {
                    self.kept
                        .extend_from_slice(&pkt.phv.bytes[o as usize..(o + n) as usize]);
                }
            }
        }
        let mut at = 0usize;
        for &(o, n) in &self.plan.write_ranges {
            let n = n as usize;
            copy_exact(
                &mut pkt.phv.bytes[o as usize..o as usize + n],
                &e.writes[at..at + n],
            );
            at += n;
        }
        if keep != 0 {
            let mut at = 0usize;
            for s in self.plan.stale.iter().filter(|s| keep & 1 << s.bit != 0) {
                for &(o, n) in &s.keep {
                    let n = n as usize;
                    pkt.phv.bytes[o as usize..o as usize + n]
                        .copy_from_slice(&self.kept[at..at + n]);
                    at += n;
                }
            }
        }
        pkt.phv.valid.copy_from_slice(&e.valid);
        if !e.stack_next.is_empty() {
            pkt.phv.stack_next.copy_from_slice(&e.stack_next);
        }
        if !e.union_stack_next.is_empty() {
            pkt.phv
                .union_stack_next
                .copy_from_slice(&e.union_stack_next);
        }
        if !e.vl_width.is_empty() {
            pkt.phv.vl_width.copy_from_slice(&e.vl_width);
        }
        pkt.regs.clone_from(&e.regs);
        pkt.length_reg = (pkt.length_reg as i64 + e.len_delta) as u32;
        let now = st.ext.now_us;
        for &(ti, s, flags) in e.live.iter() {
            if let Some(en) = st.tables[ti as usize].store.slots[s as usize].as_mut() {
                if flags & 1 != 0 {
                    en.last_hit_us = now;
                }
                if flags & 2 != 0 {
                    en.counter.packets += 1;
                    en.counter.bytes += pkt.ingress_len as u64;
                }
            }
        }
        for &(c, i) in e.counts.iter() {
            if let Some(cv) = st.ext.counters[c as usize].get_mut(i as usize) {
                cv.packets += 1;
                cv.bytes += pkt.ingress_len as u64;
            }
        }
        if let Some(es) = &e.state {
            state::replay(es, st, pkt);
        }
        e.referenced = true;
        let r = match &e.fault {
            None => Ok(()),
            Some(f) => Err(Fault(f.clone())),
        };
        Ok(match e.resume {
            Some(n) if r.is_ok() => {
                self.stats.resumed += 1;
                eng.run_pipeline(st, pkt, &self.plan.pipeline, Some(n))
            }
            _ => r,
        })
    }

    /// Insert `e` under the key in `self.kbuf` (hash `h`).
    fn insert(&mut self, e: Entry, h: u64) {
        if self.cfg.capacity == 0 {
            return;
        }
        if self.index.len >= self.cfg.capacity {
            self.evict_one();
        }
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slab.push(None);
                self.gens.push(0);
                self.hashes.push(0);
                self.keys.resize(self.keys.len() + self.plan.stride, 0);
                (self.slab.len() - 1) as u32
            }
        };
        let stride = self.plan.stride;
        self.keys[slot as usize * stride..(slot as usize + 1) * stride].copy_from_slice(&self.kbuf);
        self.hashes[slot as usize] = h;
        self.index.insert(h, slot, &self.hashes);
        let g = self.gens[slot as usize];
        let r = (slot, g);
        for &(ti, hit, o, n) in e.path.iter() {
            self.by_table[ti as usize].push(r);
            match hit {
                Some((_, h)) => self.by_entry.entry((ti, h)).or_default().push(r),
                None => self.by_miss[ti as usize].push(r),
            }
            self.index_refs += 2;
            if self.key_indexed[ti as usize] {
                if let Some(m) = &self.exact_mask[ti as usize] {
                    let k = masked_hash(&e.keys[o as usize..(o + n) as usize], m);
                    self.by_key.entry((ti, k)).or_default().push(r);
                }
            }
        }
        if self.cfg.eviction == Eviction::Fifo {
            self.fifo.push_back(r);
        }
        self.bytes += e.bytes();
        self.live_refs += 2 * e.path.len();
        self.slab[slot as usize] = Some(e);
        self.stats.inserts += 1;
        if self.index_refs > 2 * self.live_refs + 4096
            || self.fifo.len() > 2 * self.cfg.capacity + 1024
        {
            self.rebuild_indexes();
        }
    }

    fn evict_one(&mut self) {
        match self.cfg.eviction {
            Eviction::Fifo => {
                while let Some((s, g)) = self.fifo.pop_front() {
                    if self.gens[s as usize] == g && self.slab[s as usize].is_some() {
                        self.remove(s);
                        self.stats.evictions += 1;
                        return;
                    }
                }
            }
            Eviction::Clock => {
                let n = self.slab.len();
                for _ in 0..2 * n + 1 {
                    let s = self.hand % n.max(1);
                    self.hand = s + 1;
                    if let Some(e) = self.slab[s].as_mut() {
                        if e.referenced {
                            e.referenced = false;
                        } else {
                            self.remove(s as u32);
                            self.stats.evictions += 1;
                            return;
                        }
                    }
                }
            }
        }
    }

    fn remove(&mut self, slot: u32) {
        if let Some(e) = self.slab[slot as usize].take() {
            self.bytes -= e.bytes();
            self.live_refs -= 2 * e.path.len();
            self.index
                .remove(self.hashes[slot as usize], slot, &self.hashes);
            self.gens[slot as usize] = self.gens[slot as usize].wrapping_add(1);
            self.free.push(slot);
        }
    }

    /// Start indexing table `t`'s lookups in `by_key`: the live behaviours that applied it.
    fn index_table_keys(&mut self, t: u32) {
        self.key_indexed[t as usize] = true;
        let Some(m) = self.exact_mask[t as usize].as_deref() else {
            return;
        };
        // Counted as scanned: the one scan the table's first insert still pays.
        self.stats.invalidation_scanned += self.by_table[t as usize].len() as u64;
        for &(s, g) in &self.by_table[t as usize] {
            let Some(en) = self.slab[s as usize]
                .as_ref()
                .filter(|_| self.gens[s as usize] == g)
            else {
                continue;
            };
            for &(ti, _, o, n) in en.path.iter() {
                if ti == t {
                    let k = masked_hash(&en.keys[o as usize..(o + n) as usize], m);
                    self.by_key.entry((t, k)).or_default().push((s, g));
                }
            }
        }
    }

    fn remove_refs(&mut self, refs: Vec<(u32, u32)>) {
        self.stats.invalidation_scanned += refs.len() as u64;
        for (s, g) in refs {
            if self.gens[s as usize] == g && self.slab[s as usize].is_some() {
                self.remove(s);
                self.stats.invalidated += 1;
            }
        }
    }

    /// Rebuild the reverse indexes and the FIFO from the live entries (drops references to
    /// removed entries; amortised over many inserts).
    fn rebuild_indexes(&mut self) {
        for v in self.by_table.iter_mut().chain(self.by_miss.iter_mut()) {
            v.clear();
        }
        self.by_entry.clear();
        self.by_key.clear();
        self.index_refs = 0;
        let fifo: Vec<(u32, u32)> = self
            .fifo
            .iter()
            .copied()
            .filter(|(s, g)| self.gens[*s as usize] == *g && self.slab[*s as usize].is_some())
            .collect();
        self.fifo = fifo.into();
        for (s, e) in self.slab.iter().enumerate() {
            let Some(e) = e else { continue };
            let r = (s as u32, self.gens[s]);
            for &(ti, hit, o, n) in e.path.iter() {
                self.by_table[ti as usize].push(r);
                match hit {
                    Some((_, h)) => self.by_entry.entry((ti, h)).or_default().push(r),
                    None => self.by_miss[ti as usize].push(r),
                }
                self.index_refs += 2;
                if self.key_indexed[ti as usize] {
                    if let Some(m) = &self.exact_mask[ti as usize] {
                        let k = masked_hash(&e.keys[o as usize..(o + n) as usize], m);
                        self.by_key.entry((ti, k)).or_default().push(r);
                    }
                }
            }
        }
    }

    /// A control-plane change: remove exactly the entries that depend on it.
    pub fn invalidate(&mut self, what: Invalidate) {
        if let Some(e) = self.egress.as_deref_mut() {
            e.invalidate(what);
        }
        self.stats.invalidation_ops += 1;
        match what {
            Invalidate::Entry(t, h) => {
                if let Some(refs) = self.by_entry.remove(&(t, h)) {
                    self.remove_refs(refs);
                }
            }
            Invalidate::Default(t) => {
                if let Some(v) = self.by_miss.get_mut(t as usize) {
                    let refs = std::mem::take(v);
                    self.remove_refs(refs);
                }
            }
            Invalidate::Table(t) => {
                if let Some(v) = self.by_table.get_mut(t as usize) {
                    let refs = std::mem::take(v);
                    self.remove_refs(refs);
                }
            }
            Invalidate::All => self.flush(),
        }
    }

    /// A new program: flush, then a new plan and indexes for it (counters kept).
    pub fn rebuild(&mut self, eng: &Engine) {
        self.flush();
        if self.plan.pipeline == "ingress" {
            let cfg = self.cfg.clone();
            self.egress = (cfg.egress && eng.egress.is_some())
                .then(|| Box::new(Cache::for_pipeline(cfg, eng, "egress")));
        }
        self.plan = Plan::with_mode(eng, &self.plan.pipeline.clone(), self.cfg.stateful);
        self.skip = skip_of(&self.cfg, eng);
        self.by_table = vec![Vec::new(); eng.tables.len()];
        self.by_miss = vec![Vec::new(); eng.tables.len()];
        self.exact_mask = eng.tables.iter().map(exact_mask).collect();
        self.key_indexed = vec![false; eng.tables.len()];
    }

    /// Table `t` got entry `e`: remove exactly the cached behaviours whose lookup in `t`
    /// the new entry matches (their result may change; a lookup it does not match keeps
    /// its result whatever the priorities).
    pub fn invalidate_added(&mut self, t: u32, e: &crate::table::Entry) {
        if let Some(eg) = self.egress.as_deref_mut() {
            eg.invalidate_added(t, e);
        }
        self.stats.invalidation_ops += 1;
        // An exact table: the behaviours that looked up exactly this key (the new entry
        // cannot change any other lookup).
        let exact = self
            .exact_mask
            .get(t as usize)
            .and_then(|m| m.as_deref())
            .is_some_and(|m| e.ranges.is_empty() && *e.mask == *m);
        if exact {
            if !self.key_indexed[t as usize] {
                if self.by_table[t as usize].is_empty() {
                    // Nothing cached went through the table (e.g. populating it before
                    // traffic): nothing to invalidate, and no index yet.
                    return;
                }
                self.index_table_keys(t);
            }
            {
                let k = (t, masked_hash(&e.value, &e.mask));
                let refs = self.by_key.remove(&k).unwrap_or_default();
                let keep = self.invalidate_matching(t, e, refs);
                if !keep.is_empty() {
                    self.by_key.insert(k, keep);
                }
                return;
            }
        }
        let Some(v) = self.by_table.get_mut(t as usize) else {
            return;
        };
        let refs = std::mem::take(v);
        self.by_table[t as usize] = self.invalidate_matching(t, e, refs);
    }

    /// Of the references `refs` (slot, generation) to behaviours that applied table `t`,
    /// remove the live ones whose lookup in `t` entry `e` matches, drop the stale ones, and
    /// return the rest (still live, not matched) to be kept.
    fn invalidate_matching(
        &mut self,
        t: u32,
        e: &crate::table::Entry,
        refs: Vec<(u32, u32)>,
    ) -> Vec<(u32, u32)> {
        self.stats.invalidation_scanned += refs.len() as u64;
        let mut keep = Vec::with_capacity(refs.len());
        for (s, g) in refs {
            let Some(en) = self.slab[s as usize]
                .as_ref()
                .filter(|_| self.gens[s as usize] == g)
            else {
                continue;
            };
            let hit = en.path.iter().any(|&(ti, _, o, n)| {
                ti == t
                    && tern_match::entry_matches(
                        &e.value,
                        &e.mask,
                        &e.ranges,
                        &en.keys[o as usize..(o + n) as usize],
                    )
            });
            if hit {
                self.remove(s);
                self.stats.invalidated += 1;
            } else {
                keep.push((s, g));
            }
        }
        keep
    }

    /// Remove every entry.
    pub fn flush(&mut self) {
        if let Some(e) = self.egress.as_deref_mut() {
            e.flush();
        }
        self.stats.flushes += 1;
        self.stats.invalidated += self.index.len as u64;
        self.index.clear();
        self.keys.clear();
        self.hashes.clear();
        self.slab.clear();
        self.gens.clear();
        self.free.clear();
        self.fifo.clear();
        self.hand = 0;
        for v in self.by_table.iter_mut().chain(self.by_miss.iter_mut()) {
            v.clear();
        }
        self.by_entry.clear();
        self.by_key.clear();
        self.index_refs = 0;
        self.live_refs = 0;
        self.bytes = 0;
    }
}

/// Why a found entry was not replayed.
enum Miss {
    Length,
    Guard,
}

/// What a control-plane change affects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Invalidate {
    /// Entry `handle` of table `t` was modified or deleted: entries that hit it.
    Entry(u32, u32),
    /// Table `t`'s default entry changed: entries that missed it.
    Default(u32),
    /// Table `t` was cleared or its action profile changed: entries that applied it. (A new
    /// entry goes through [`Cache::invalidate_added`].)
    Table(u32),
    /// Everything (program swap, state reset, hash parameters).
    All,
}
