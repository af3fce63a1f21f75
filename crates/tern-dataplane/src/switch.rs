//! The v1model switch: one program instance with its state, the packet flow of simple_switch
//! (`simple-switch.md` §2) in deterministic run-to-completion mode, and the
//! [`tern_runtime::Runtime`] control surface.

use crate::bcache::Invalidate;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::compile::{CompileError, Engine, FlElem, Std};
use crate::exec::{mark, stage, Pkt, PktRegs, Probe, State, TableState};
use crate::expr::RegArray;
use crate::externs::{Meter, Pre};
use crate::hash::Algo;
use crate::layout::{FieldLoc, Layout, Phv, StdSlot};
use crate::table::{EntryAction, EntryStore, Profile};
use tern_model::{ConstKey, LoadError, MatchKind, TableType};
use tern_runtime::*;

/// The general v1model flow ([`Flow`]) of one arriving packet over switch `$sw`'s queues,
/// pools and tables (a macro rather than a method: `$eng` and `$st` are borrowed from
/// `$sw.live` beside the other fields). Used by [`Switch::process_one`] and by the fast
/// lane's hand-overs.
macro_rules! general_flow {
    ($sw:ident, $eng:expr, $st:expr, $out:expr, $now:expr, $bcache:expr) => {
        Flow {
            eng: $eng,
            st: $st,
            pre: &$sw.pre,
            mirroring: &$sw.mirroring,
            digests: &mut $sw.digests,
            jobs: &mut $sw.jobs,
            replicas: &mut $sw.replicas,
            out: $out,
            pool: &mut $sw.pool,
            spare: &mut $sw.spare,
            bufs: {
                // Until `run_jobs` sets it: a hand-over's copies are cut there as before.
                $sw.bufs.left = $sw.opts.max_instances_per_packet;
                &mut $sw.bufs
            },
            priority_queues: $sw.opts.priority_queues.max(1),
            now: $now,
            bcache: $bcache,
        }
    };
}

mod burst;
mod fast;
mod fast_cache;

pub use burst::{BurstOut, EmitSink, OutDesc};

/// What of a program runs as native code ([`Switch::native_summary`]).
#[derive(Clone, Debug, Default)]
pub struct NativeSummary {
    pub parser: bool,
    pub emit: bool,
    /// The checksum updates compiled into the emit function ([`Switch::has_native_checksums`]).
    pub emit_csum: bool,
    /// Pipelines (ingress, egress) generated as native functions.
    pub pipelines: usize,
    /// Actions in the native subset (inlined where they run), of `actions`.
    pub actions_inlined: usize,
    pub actions: usize,
    /// Each table with its lookup path (empty without native code).
    pub tables: Vec<(String, crate::jit::TablePath)>,
    /// For each part left to the interpreter, why.
    pub notes: Vec<String>,
    /// Why packets do not take the fast lane (one function per packet path, see
    /// [`Switch::use_slow_path`]); `None`: the common case takes it.
    pub lane: Option<String>,
    /// The lane's common case runs as one generated function ([`Switch::lane_generated`]).
    pub lane_generated: bool,
}

impl std::fmt::Display for NativeSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use crate::jit::TablePath;
        let part = |on: bool, what: &str| {
            if on {
                what.to_string()
            } else {
                format!("{what} interpreted")
            }
        };
        write!(
            f,
            "{}, {}, {} native pipeline(s), {} of {} actions inlined",
            part(self.parser, "parser"),
            part(
                self.emit,
                if self.emit_csum {
                    "emit with checksums"
                } else {
                    "emit"
                }
            ),
            self.pipelines,
            self.actions_inlined,
            self.actions
        )?;
        let count = |p: fn(&TablePath) -> bool| self.tables.iter().filter(|(_, t)| p(t)).count();
        let (inline, lpm, tuples, find, consts) = (
            count(|t| *t == TablePath::Inline),
            count(|t| *t == TablePath::Lpm),
            count(|t| *t == TablePath::Tuples),
            count(|t| *t == TablePath::Find),
            count(|t| *t == TablePath::ConstDefault),
        );
        write!(
            f,
            "; tables: {inline} probed inline, {lpm} LPM index inline, {tuples} ternary tuples \
             inline, {find} via key helper, {consts} constant default inlined"
        )?;
        for (name, t) in &self.tables {
            if let TablePath::Helper(why) = t {
                write!(f, ", {name} via table helper ({why})")?;
            }
        }
        match &self.lane {
            None if self.lane_generated => write!(f, "; fast lane on (one generated function)")?,
            None => write!(f, "; fast lane on")?,
            Some(why) => write!(f, "; fast lane off ({why})")?,
        }
        for n in &self.notes {
            write!(f, "; {n}")?;
        }
        Ok(())
    }
}

/// Options of a switch instance (simple_switch's command-line knobs that affect semantics).
#[derive(Clone, Debug)]
pub struct SwitchOptions {
    /// `--drop-port` (511).
    pub drop_port: u32,
    /// `--enable-swap`.
    pub enable_swap: bool,
    /// `--device-id`.
    pub device_id: u64,
    /// `--thrift-port` (reported by `switch_info`).
    pub thrift_port: u32,
    /// Seed of the random generator (`modify_field_rng_uniform`).
    pub seed: u64,
    /// Upper bound on packet instances one input may spawn (recirculation loops).
    pub max_instances_per_packet: usize,
    /// `--priority-queues` (1): packets whose `intrinsic_metadata.priority` is not below it
    /// are dropped at enqueue, as in BMv2.
    pub priority_queues: u32,
    /// Behaviour-level caching of the ingress pipeline ([`crate::bcache`]); off by default.
    pub bcache: Option<crate::bcache::Config>,
    /// Parser states one packet may enter (100,000; at least 1): past it the parser stops
    /// with `error.ParserTimeout` ([`crate::exec::ParserBudget`]).
    pub max_parser_states: u64,
}

impl Default for SwitchOptions {
    fn default() -> Self {
        SwitchOptions {
            drop_port: 511,
            enable_swap: false,
            device_id: 0,
            thrift_port: 9090,
            seed: 0x9E37_79B9_7F4A_7C15,
            max_instances_per_packet: 10_000,
            priority_queues: 1,
            bcache: None,
            max_parser_states: crate::exec::MAX_PARSER_STATES,
        }
    }
}

/// Why a JSON cannot be run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SwitchError {
    /// The loader rejected the JSON.
    #[error("{0}")]
    Load(#[from] LoadError),
    /// simple_switch's required-field check.
    #[error("Field {0} is required by switch target but is not defined")]
    MissingField(String),
    /// A table initializer (const entries / default entry) is invalid.
    #[error("{0}")]
    Init(String),
    /// The engine cannot run a construct.
    #[error("{0}")]
    Compile(#[from] CompileError),
}

/// An immutable compiled program (the engine, with its native code, and its JSON), shareable
/// between devices: N switches built from one `CompiledProgram` ([`Switch::from_program`])
/// hold one copy of the program and each its own state. Cloning is a reference count.
#[derive(Clone, Debug)]
pub struct CompiledProgram {
    engine: Arc<Engine>,
    json: Arc<str>,
}

impl CompiledProgram {
    /// Load and compile a BMv2 JSON (the same checks as [`Switch::from_json`]). Of `opts`
    /// only `drop_port` shapes the program.
    pub fn compile(json: &str, opts: &SwitchOptions) -> Result<CompiledProgram, SwitchError> {
        let prog = tern_model::load(json)?;
        if let Some(f) = prog.missing_required_field() {
            return Err(SwitchError::MissingField(f.to_string()));
        }
        let mut engine = Engine::compile(prog)?;
        engine.drop_port = opts.drop_port;
        Ok(CompiledProgram {
            engine: Arc::new(engine),
            json: json.into(),
        })
    }

    /// The program model.
    pub fn program(&self) -> &tern_model::Program {
        &self.engine.prog
    }

    /// The BMv2 JSON it was compiled from.
    pub fn json(&self) -> &str {
        &self.json
    }

    /// The drop port it was compiled for.
    pub fn drop_port(&self) -> u32 {
        self.engine.drop_port
    }

    /// How many switches (and other holders) share this compiled copy.
    pub fn holders(&self) -> usize {
        Arc::strong_count(&self.engine)
    }
}

/// A loaded program with its state.
#[derive(Debug)]
struct Instance {
    engine: Arc<Engine>,
    state: State,
    json: Arc<str>,
    /// Const-entry tables.
    immutable: Vec<bool>,
    /// Why this program's packets cannot take the fast lane ([`fast`]); `None`: they can.
    lane_off: Option<String>,
    /// The lane parses the received frame in place and appends its payload straight to the
    /// output (no copy into the packet instance): [`fast::direct`].
    lane_direct: bool,
    /// What the lane resolved of the program at load ([`fast::LanePlan`]).
    lane_plan: fast::LanePlan,
}

fn action_bytes(v: &tern_model::Int, width: u32) -> Vec<u8> {
    v.to_bytes(width)
}

fn norm_data(widths: &[u32], data: &[Vec<u8>]) -> Result<Vec<Vec<u8>>, TableError> {
    if widths.len() != data.len() {
        return Err(TableError::BAD_ACTION_DATA);
    }
    Ok(widths
        .iter()
        .zip(data)
        .map(|(w, d)| {
            let n = w.div_ceil(8) as usize;
            let mut out = vec![0u8; n];
            for i in 0..n.min(d.len()) {
                out[n - 1 - i] = d[d.len() - 1 - i];
            }
            let extra = n as u32 * 8 - w;
            if extra > 0 && n > 0 {
                out[0] &= 0xff >> extra;
            }
            out
        })
        .collect())
}

impl Instance {
    fn new(json: &str, opts: &SwitchOptions) -> Result<Instance, SwitchError> {
        Instance::from_program(&CompiledProgram::compile(json, opts)?, opts)
    }

    /// The engine to change (CRC parameters, Toeplitz keys, test switches): a shared engine is
    /// always as compiled (changes privatize first), so a private copy is compiled again from
    /// its program model before the change; other switches keep the shared one.
    /// Decide the fast lane for the engine as it is now (after a load, or after a
    /// differential switch dropped one of its paths).
    fn plan_lane(&mut self) {
        self.lane_off = fast::why_not(&self.engine);
        self.lane_direct = fast::direct(&self.engine);
        self.lane_plan = fast::LanePlan::new(&self.engine);
    }

    fn engine_mut(&mut self) -> &mut Engine {
        if Arc::get_mut(&mut self.engine).is_none() {
            let mut e = Engine::compile(self.engine.prog.clone())
                .expect("a program that compiled once compiles again");
            e.drop_port = self.engine.drop_port;
            self.engine = Arc::new(e);
        }
        Arc::get_mut(&mut self.engine).expect("private after the copy")
    }

    /// Fresh state for a compiled program (the program itself is shared).
    fn from_program(cp: &CompiledProgram, opts: &SwitchOptions) -> Result<Instance, SwitchError> {
        let engine = cp.engine.clone();
        let p = &engine.prog;
        let mut state = State {
            tables: engine
                .tables
                .iter()
                .map(|t| TableState {
                    store: EntryStore::new(t.max_size),
                    default: None,
                })
                .collect(),
            profiles: vec![Profile::default(); engine.profiles.len()],
            ..State::default()
        };
        state.ext.regs = p
            .register_arrays
            .iter()
            .map(|r| RegArray::new(r.bitwidth, r.size))
            .collect();
        state.ext.counters = p
            .counter_arrays
            .iter()
            .map(|c| vec![CounterValue::default(); if c.is_direct { 0 } else { c.size as usize }])
            .collect();
        state.ext.meters = p
            .meter_arrays
            .iter()
            .map(|m| vec![Meter::default(); if m.is_direct { 0 } else { m.size as usize }])
            .collect();
        state.ext.vsets = vec![Default::default(); p.parse_vsets.len()];
        state.ext.rng = opts.seed | 1;
        state.parser.max_states = opts.max_parser_states.max(1);
        let mut inst = Instance {
            engine,
            state,
            json: cp.json.clone(),
            immutable: Vec::new(),
            lane_off: None,
            lane_direct: false,
            lane_plan: Default::default(),
        };
        inst.plan_lane();
        inst.immutable = inst
            .engine
            .tables
            .iter()
            .map(|t| t.const_entries.is_some())
            .collect();
        for ti in 0..inst.engine.tables.len() {
            inst.reset_default(ti);
            inst.add_const_entries(ti)?;
        }
        Ok(inst)
    }

    fn reset_default(&mut self, ti: usize) {
        let t = &self.engine.tables[ti];
        self.state.tables[ti].default = t.default_entry.as_ref().map(|d| {
            let widths = &self.engine.actions[d.action as usize].param_widths;
            EntryAction::Action {
                action: d.action,
                data: d
                    .action_data
                    .iter()
                    .zip(widths)
                    .map(|(v, w)| action_bytes(v, *w))
                    .collect(),
            }
        });
    }

    fn add_const_entries(&mut self, ti: usize) -> Result<(), SwitchError> {
        let t = &self.engine.tables[ti];
        let Some(entries) = &t.const_entries else {
            return Ok(());
        };
        let store = &mut self.state.tables[ti].store;
        store.max_size = store.max_size.max(entries.len() as u32);
        for e in entries {
            let params: Vec<MatchParam> = e
                .key
                .iter()
                .map(|k| match k {
                    ConstKey::Exact(v) => MatchParam::Exact(v.clone()),
                    ConstKey::Lpm(v, l) => MatchParam::Lpm {
                        key: v.clone(),
                        prefix_len: *l,
                    },
                    ConstKey::Ternary(v, m) => MatchParam::Ternary {
                        key: v.clone(),
                        mask: m.clone(),
                    },
                    ConstKey::Range(s, e) => MatchParam::Range {
                        start: s.clone(),
                        end: e.clone(),
                    },
                    ConstKey::Valid(b) => MatchParam::Valid(*b),
                })
                .collect();
            let widths = &self.engine.actions[e.action as usize].param_widths;
            let data = e
                .action_data
                .iter()
                .zip(widths)
                .map(|(v, w)| action_bytes(v, *w))
                .collect();
            match store.add(
                &t.spec,
                &params,
                e.priority,
                EntryAction::Action {
                    action: e.action,
                    data,
                },
            ) {
                Ok(_) => {}
                Err(TableError::DUPLICATE_ENTRY) => {
                    return Err(SwitchError::Init(
                        "Duplicate entries in table initializer".into(),
                    ))
                }
                Err(_) => {
                    return Err(SwitchError::Init(
                        "Error when adding table entry, match key is malformed".into(),
                    ))
                }
            }
        }
        Ok(())
    }

    fn table(&self, name: &str) -> RtResult<usize> {
        self.engine
            .table_by_name
            .get(name)
            .map(|t| *t as usize)
            .ok_or(TableError::INVALID_TABLE_NAME.into())
    }

    fn table_action(&self, ti: usize, name: &str) -> RtResult<u32> {
        self.engine.tables[ti]
            .actions
            .iter()
            .copied()
            .find(|a| self.engine.actions[*a as usize].name == name)
            .ok_or(TableError::INVALID_ACTION_NAME.into())
    }

    fn profile(&self, name: &str) -> RtResult<usize> {
        self.engine
            .profile_by_name
            .get(name)
            .map(|p| *p as usize)
            .ok_or(TableError::INVALID_ACTION_PROFILE_NAME.into())
    }

    fn profile_action(&self, pi: usize, name: &str) -> RtResult<u32> {
        // Actions of any table using this profile.
        self.engine
            .tables
            .iter()
            .filter(|t| t.profile == Some(pi as u32))
            .flat_map(|t| t.actions.iter().copied())
            .find(|a| self.engine.actions[*a as usize].name == name)
            .ok_or(TableError::INVALID_ACTION_NAME.into())
    }

    fn to_action_entry(&self, ea: &EntryAction) -> ActionEntry {
        match ea {
            EntryAction::Action { action, data } => ActionEntry::Action {
                name: self.engine.actions[*action as usize].name.clone(),
                data: data.clone(),
            },
            EntryAction::Member(m) => ActionEntry::Member(*m),
            EntryAction::Group(g) => ActionEntry::Group(*g),
        }
    }

    fn entry_of(&self, ti: usize, h: EntryHandle, now_us: u64) -> RtResult<TableEntry> {
        let e = self.state.tables[ti].store.get(h)?;
        Ok(TableEntry {
            match_key: e.params.clone(),
            priority: if self.engine.tables[ti].spec.has_priority() {
                e.priority
            } else {
                -1
            },
            handle: h,
            action: self.to_action_entry(&e.action),
            life: e.timeout_ms.map(|t| EntryLife {
                timeout_ms: t,
                time_since_hit_ms: (now_us.saturating_sub(e.last_hit_us) / 1000) as u32,
            }),
        })
    }

    fn check_mutable(&self, ti: usize) -> RtResult<()> {
        if self.immutable[ti] {
            return Err(TableError::IMMUTABLE_TABLE_ENTRIES.into());
        }
        Ok(())
    }

    fn want_type(&self, ti: usize, ty: TableType) -> RtResult<()> {
        if self.engine.tables[ti].table_type != ty {
            return Err(TableError::WRONG_TABLE_TYPE.into());
        }
        Ok(())
    }

    fn add_entry(
        &mut self,
        ti: usize,
        key: &[MatchParam],
        prio: Option<i32>,
        ea: EntryAction,
    ) -> RtResult<EntryHandle> {
        self.check_mutable(ti)?;
        let spec = &self.engine.tables[ti].spec;
        let store = &mut self.state.tables[ti].store;
        let h = store.add(spec, key, prio.unwrap_or(0), ea)?;
        // As in BMv2, a new entry's idle timer starts when it is added.
        store.get_mut(h)?.last_hit_us = self.state.ext.now_us;
        Ok(h)
    }

    fn member_ok(&self, ti: usize, m: MemberHandle) -> RtResult<()> {
        let p = self.engine.tables[ti]
            .profile
            .ok_or(TableError::WRONG_TABLE_TYPE)?;
        self.state.profiles[p as usize].member(m)?;
        Ok(())
    }

    fn group_ok(&self, ti: usize, g: GroupHandle) -> RtResult<()> {
        let p = self.engine.tables[ti]
            .profile
            .ok_or(TableError::WRONG_TABLE_TYPE)?;
        self.state.profiles[p as usize].group(g)?;
        Ok(())
    }

    fn counter(&self, name: &str) -> RtResult<usize> {
        self.engine
            .prog
            .counter_arrays
            .iter()
            .position(|c| c.name == name && !c.is_direct)
            .ok_or(CounterError::INVALID_COUNTER_NAME.into())
    }

    fn meter(&self, name: &str) -> RtResult<usize> {
        self.engine
            .prog
            .meter_arrays
            .iter()
            .position(|c| c.name == name && !c.is_direct)
            .ok_or(MeterError::INVALID_METER_NAME.into())
    }

    fn register(&self, name: &str) -> RtResult<usize> {
        self.engine
            .prog
            .register_arrays
            .iter()
            .position(|c| c.name == name)
            .ok_or(RegisterError::INVALID_REGISTER_NAME.into())
    }

    fn vset(&self, name: &str) -> RtResult<usize> {
        self.engine
            .prog
            .parse_vsets
            .iter()
            .position(|c| c.name == name)
            .ok_or(ParseVSetError::INVALID_PARSE_VSET_NAME.into())
    }

    /// A value-set value as `ceil(bitwidth/8)` bytes; extra leading zero bytes (sent by the
    /// stock CLI) are accepted, bits above the width are an error.
    fn vset_value(&self, v: usize, value: &[u8]) -> RtResult<Vec<u8>> {
        let bw = self.engine.prog.parse_vsets[v].compressed_bitwidth;
        let n = bw.div_ceil(8) as usize;
        let extra = value.len().saturating_sub(n);
        if value[..extra].iter().any(|b| *b != 0) {
            return Err(ParseVSetError::ERROR.into());
        }
        let mut out = vec![0u8; n];
        let tail = &value[extra..];
        out[n - tail.len()..].copy_from_slice(tail);
        if n > 0 && !bw.is_multiple_of(8) && out[0] >> (bw % 8) != 0 {
            return Err(ParseVSetError::ERROR.into());
        }
        Ok(out)
    }

    fn check_rates(&self, rate_count: u32, rates: &[MeterRate]) -> RtResult<()> {
        if rates.len() != rate_count as usize {
            return Err(MeterError::BAD_RATES_LIST.into());
        }
        Ok(())
    }
}

/// A packet instance waiting in the deterministic scheduler.
enum Job {
    Ingress(Box<Pkt>),
    Egress(Box<Pkt>, u32),
}

/// A simple_switch-compatible device running one program.
///
/// Create it with [`Switch::from_json`]; drive it with [`Runtime`] (control) and
/// [`PacketPath`] (packets).
pub struct Switch {
    live: Instance,
    pending: Option<Instance>,
    opts: SwitchOptions,
    start: Instant,
    pre: Pre,
    mirroring: HashMap<u32, MirroringSession>,
    digests: DigestQueue,
    ports: BTreeMap<Port, (String, Option<String>)>,
    jobs: VecDeque<Job>,
    replicas: Vec<(Port, u32)>,
    /// Recycled packet instances (their buffers are reused: no per-packet allocation). Boxed: a packet moves between ingress, the job queue and
    /// egress, and moving a box is a pointer copy instead of a ~250-byte `memcpy` (measured:
    /// −380 instructions per packet on the L3 router).
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Pkt>>,
    /// Output buffers handed back by [`Switch::recycle_outputs`], reused for transmitted
    /// frames.
    spare: Vec<Vec<u8>>,
    /// A fixed clock (microseconds since start) for deterministic runs; `None` = real time.
    clock_us: Option<u64>,
    /// Register arrays and indirect meters shared with other replicas of this program
    /// (`--workers`, [`crate::workers`]): swapped into the live state for each packet and
    /// each control operation while the bank's lock is held.
    shared: Option<std::sync::Arc<std::sync::Mutex<SharedExterns>>>,
    /// The behaviour cache of the live program's ingress pipeline (`opts.bcache`).
    bcache: Option<Box<crate::bcache::Cache>>,
    /// The fast lane's packet instance ([`fast`]), reused packet after packet.
    lane_pkt: Option<Box<Pkt>>,
    /// The fast lane turned off for this switch ([`Switch::use_slow_path`]).
    slow_only: bool,
    /// Packets that entered the fast lane, and those of them handed to the general path
    /// ([`Switch::lane_counts`]).
    lane_counts: [u64; 2],
    /// Pipeline passes run so far ([`Switch::passes`]).
    passes: u64,
    /// The bounded pools of packet instances and output buffers ([`Switch::set_buffer_quota`]).
    bufs: Buffers,
}

/// A switch's bound on the packet instances and output buffers it allocates
/// ([`Switch::set_buffer_quota`]), as a DPDK mempool: the switch allocates an instance or an
/// output buffer only while fewer than `quota` of each were made (its pools then hold them
/// all, recycled packet after packet); with the pool empty past that, a copy (clone,
/// multicast replica, resubmit, recirculation) or a transmitted frame is dropped and counted
/// (`drops`) instead of allocating on the packet path. `None`: unbounded (the native switch).
#[derive(Debug, Default)]
pub(crate) struct Buffers {
    quota: Option<usize>,
    pkts_made: usize,
    bufs_made: usize,
    drops: u64,
    /// Jobs the current input may still run after the running one (its instance budget,
    /// kept by `run_jobs`): a replica queued past it would only be cut, so it is not made.
    left: usize,
}

/// Capacity of an output buffer a bounded switch allocates (a DPDK mbuf's data room): a
/// frame up to it, plus the headers a program adds, never reallocates it.
const POOL_FRAME: usize = 2048;
/// Output buffers a bounded switch's pool is filled with when its quota is set.
const BUFFER_PREFILL: usize = 64;

/// Default bound of a switch's pending digests ([`Switch::set_digest_queue_cap`]).
pub const DIGEST_QUEUE_CAP: usize = 65_536;

/// Digests waiting for the control plane: bounded, so that a program that learns on every
/// packet cannot grow memory without limit when nobody takes them.
#[derive(Debug)]
struct DigestQueue {
    items: Vec<Digest>,
    cap: usize,
    dropped: u64,
}

impl Default for DigestQueue {
    fn default() -> Self {
        DigestQueue {
            items: Vec::new(),
            cap: DIGEST_QUEUE_CAP,
            dropped: 0,
        }
    }
}

impl DigestQueue {
    /// Queue the digest `make` builds, or count it dropped (without building it) when full.
    fn push(&mut self, make: impl FnOnce() -> Digest) {
        if self.items.len() < self.cap {
            self.items.push(make());
        } else {
            self.dropped += 1;
        }
    }

    fn clear(&mut self) {
        self.items.clear();
    }
}

/// Register arrays and indirect meter arrays of a program shared by several replicas of a
/// switch ([`crate::workers`]).
#[derive(Debug, Default)]
pub(crate) struct SharedExterns {
    pub(crate) regs: Vec<RegArray>,
    pub(crate) meters: Vec<Vec<Meter>>,
}

impl std::fmt::Debug for Switch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Switch")
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Switch {
    /// Load a BMv2 JSON and build a switch, as `simple_switch <json>` does (same accept/reject
    /// decisions; the error's `Display` is BMv2's message, prefixed by the JSON path for
    /// loader errors).
    pub fn from_json(json: &str, opts: SwitchOptions) -> Result<Switch, SwitchError> {
        Switch::from_program(&CompiledProgram::compile(json, &opts)?, opts)
    }

    /// A switch running a compiled program that other switches may share: only the state
    /// (tables, externs, PRE, mirroring, ...) is this switch's own. The program's drop port
    /// wins over `opts.drop_port`.
    pub fn from_program(cp: &CompiledProgram, opts: SwitchOptions) -> Result<Switch, SwitchError> {
        let live = Instance::from_program(cp, &opts)?;
        let bcache = opts
            .bcache
            .clone()
            .map(|c| Box::new(crate::bcache::Cache::new(c, &live.engine)));
        Ok(Switch {
            bcache,
            live,
            pending: None,
            opts,
            start: Instant::now(),
            pre: Pre::default(),
            mirroring: HashMap::new(),
            digests: DigestQueue::default(),
            ports: BTreeMap::new(),
            jobs: VecDeque::new(),
            replicas: Vec::new(),
            pool: Vec::new(),
            spare: Vec::new(),
            clock_us: None,
            shared: None,
            lane_pkt: None,
            slow_only: false,
            lane_counts: [0; 2],
            passes: 0,
            bufs: Buffers::default(),
        })
    }

    /// Does the program have register arrays or indirect meters (state that replicas must
    /// share)?
    pub(crate) fn has_shared_externs(&self) -> bool {
        let p = &self.live.engine.prog;
        !p.register_arrays.is_empty() || p.meter_arrays.iter().any(|m| !m.is_direct)
    }

    /// Move this switch's register arrays and indirect meters into a bank that other replicas
    /// can join with [`Switch::join_shared_externs`].
    pub(crate) fn share_externs(&mut self) -> std::sync::Arc<std::sync::Mutex<SharedExterns>> {
        let ext = &mut self.live.state.ext;
        let bank = std::sync::Arc::new(std::sync::Mutex::new(SharedExterns {
            regs: std::mem::take(&mut ext.regs),
            meters: std::mem::take(&mut ext.meters),
        }));
        self.shared = Some(bank.clone());
        bank
    }

    /// Use `bank` (same program) instead of this switch's own register arrays and meters.
    pub(crate) fn join_shared_externs(
        &mut self,
        bank: std::sync::Arc<std::sync::Mutex<SharedExterns>>,
    ) {
        let ext = &mut self.live.state.ext;
        ext.regs.clear();
        ext.meters.clear();
        self.shared = Some(bank);
    }

    /// Run `f` with the shared register/meter bank (if any) swapped into the live state,
    /// holding its lock: everything `f` does to registers and meters is atomic with respect
    /// to the other replicas.
    pub(crate) fn with_shared_externs<R>(&mut self, f: impl FnOnce(&mut Switch) -> R) -> R {
        let Some(bank) = self.shared.take() else {
            return f(self);
        };
        let r = {
            let mut g = bank.lock().unwrap_or_else(|e| e.into_inner());
            let ext = &mut self.live.state.ext;
            std::mem::swap(&mut g.regs, &mut ext.regs);
            std::mem::swap(&mut g.meters, &mut ext.meters);
            let r = f(self);
            let ext = &mut self.live.state.ext;
            std::mem::swap(&mut g.regs, &mut ext.regs);
            std::mem::swap(&mut g.meters, &mut ext.meters);
            r
        };
        self.shared = Some(bank);
        r
    }

    /// The loaded program model.
    pub fn program(&self) -> &tern_model::Program {
        &self.live.engine.prog
    }

    /// Whether the running program sums planned checksums over the emitted header bytes
    /// ([`crate::csum`]).
    pub fn has_checksum_plan(&self) -> bool {
        self.live.engine.csum_plan.is_some()
    }

    /// Whether the running program's checksum updates are compiled into its native emit
    /// function ([`crate::csum::native_list`]).
    pub fn has_native_checksums(&self) -> bool {
        let e = &self.live.engine;
        e.csum_plan.is_some() && e.jit.as_ref().is_some_and(|j| j.has_emit_csum())
    }

    /// Keep the checksum plan but run it in Rust after the emit loop, not compiled into the
    /// emit function: for differential tests. The next program loaded compiles it again.
    pub fn use_rust_checksums(&mut self) {
        if let Some(j) = self.live.engine_mut().jit.as_mut() {
            j.drop_emit_csum();
        }
        self.live.plan_lane();
    }

    /// Drop the checksum plan so every checksum takes the generic path (field packing): for
    /// differential tests of the two paths. The next program loaded plans again.
    pub fn use_generic_checksums(&mut self) {
        self.live.engine_mut().csum_plan = None;
        self.live.plan_lane();
    }

    /// Drop the running program's native code ([`crate::jit`]) so every stage is interpreted:
    /// for differential tests of the two paths in one process (`TERN_NO_JIT=1` does the same
    /// for a whole run). The next program loaded compiles again.
    pub fn use_interpreter(&mut self) {
        self.live.engine_mut().jit = None;
        self.live.plan_lane();
    }

    /// What of the running program runs as native code, and why the rest does not.
    pub fn native_summary(&self) -> NativeSummary {
        let e = &self.live.engine;
        let mut s = NativeSummary {
            actions: e.actions.len(),
            notes: e.jit_notes.clone(),
            lane: self.lane_why_not(),
            lane_generated: self.lane_generated(),
            ..NativeSummary::default()
        };
        if let Some(j) = &e.jit {
            s.parser = j.has_parser();
            s.emit = j.has_emit();
            s.emit_csum = self.has_native_checksums();
            s.pipelines = j.pipelines();
            s.actions_inlined = j.native_actions();
            s.tables = e
                .tables
                .iter()
                .map(|t| t.name.clone())
                .zip(j.table_paths(e))
                .collect();
        }
        s
    }

    /// Entries whose ageing timeout has elapsed since their last hit (tables with
    /// `support_timeout`), as `(table, handle)`: what BMv2's 1-second ageing sweep notifies.
    /// The control plane polls this; the entries are not removed.
    pub fn aged_entries(&self) -> Vec<(String, EntryHandle)> {
        let now = self.now_us();
        let i = &self.live;
        let mut out = Vec::new();
        for (t, ts) in i.engine.tables.iter().zip(&i.state.tables) {
            if !t.support_timeout {
                continue;
            }
            for (idx, e) in ts.store.slots.iter().enumerate() {
                let Some(e) = e else { continue };
                if let Some(ttl) = e.timeout_ms {
                    if now.saturating_sub(e.last_hit_us) >= ttl as u64 * 1000 {
                        out.push((t.name.clone(), ts.store.handle_of(idx as u32)));
                    }
                }
            }
        }
        out
    }

    /// `log_msg` output so far (oldest first), cleared by the call.
    pub fn take_log(&mut self) -> Vec<String> {
        std::mem::take(&mut self.live.state.ext.log)
    }

    /// Fix the switch clock (microseconds since the switch started) for deterministic runs:
    /// timestamps (`ingress_global_timestamp`, meters, entry ageing) read this value until the
    /// next call. `None` returns to real time.
    pub fn set_clock_us(&mut self, now_us: Option<u64>) {
        self.clock_us = now_us;
    }

    /// Change the bound on packet instances one input may spawn
    /// ([`SwitchOptions::max_instances_per_packet`]) from the next packet on.
    pub fn set_max_instances_per_packet(&mut self, n: usize) {
        self.opts.max_instances_per_packet = n.max(1);
    }

    /// Change the bound on parser states per packet ([`SwitchOptions::max_parser_states`],
    /// at least 1) from the next packet on; it stays when the program is swapped.
    pub fn set_max_parser_states(&mut self, n: u64) {
        self.opts.max_parser_states = n.max(1);
        self.live.state.parser.max_states = n.max(1);
        if let Some(p) = &mut self.pending {
            p.state.parser.max_states = n.max(1);
        }
    }

    /// What the live program's parser did so far: states entered, packets stopped by the
    /// bound (`ParserTimeout`) and the work units of long parses (states / 64 per packet),
    /// as [`crate::exec::ParserBudget`] counts them.
    pub fn parser_counts(&self) -> crate::exec::ParserBudget {
        self.live.state.parser
    }

    /// The switch clock now (microseconds since the switch started, or the fixed value of
    /// [`Switch::set_clock_us`]): read once per batch by loops that feed
    /// [`Switch::process_at`] themselves.
    pub fn now_us(&self) -> u64 {
        self.clock_us
            .unwrap_or_else(|| self.start.elapsed().as_micros() as u64)
    }

    /// Whether the live program can observe the clock (see [`Switch::packet_now_us`]).
    pub fn reads_clock(&self) -> bool {
        self.live.engine.reads_clock
    }

    /// The time the packet paths stamp packets with: [`Switch::now_us`] when the live program
    /// can observe the clock (`Engine::reads_clock`: timestamps, meters, ageing), else 0
    /// without reading it (nothing the program does, and nothing the control plane reads of
    /// it, depends on it then).
    #[inline]
    pub fn packet_now_us(&self) -> u64 {
        if self.live.engine.reads_clock {
            self.now_us()
        } else {
            0
        }
    }

    /// Tell the behaviour cache about a change to table `table` of the program control
    /// operations address (before the change: an error afterwards only costs entries).
    /// Changes staged for a pending swap do not touch the live program.
    fn bc_table(&mut self, table: &str, what: impl FnOnce(u32) -> Invalidate) {
        if self.pending.is_some() {
            return;
        }
        if let (Some(bc), Ok(ti)) = (self.bcache.as_deref_mut(), self.live.table(table)) {
            bc.invalidate(what(ti as u32));
        }
    }

    /// Entry `h` was added to table `ti` of the program control operations address: the
    /// cached behaviours whose lookup in it the entry matches.
    fn bc_added(&mut self, ti: usize, h: EntryHandle) {
        if self.pending.is_some() {
            return;
        }
        if let (Some(bc), Ok(e)) = (
            self.bcache.as_deref_mut(),
            self.live.state.tables[ti].store.get(h),
        ) {
            bc.invalidate_added(ti as u32, e);
        }
    }

    /// An action profile's members or groups change: every table using it.
    fn bc_profile(&mut self, prof: &str) {
        if self.pending.is_some() {
            return;
        }
        let (Some(bc), Ok(pi)) = (self.bcache.as_deref_mut(), self.live.profile(prof)) else {
            return;
        };
        for (ti, t) in self.live.engine.tables.iter().enumerate() {
            if t.profile == Some(pi as u32) {
                bc.invalidate(Invalidate::Table(ti as u32));
            }
        }
    }

    fn bc_flush(&mut self) {
        if let Some(bc) = self.bcache.as_deref_mut() {
            bc.invalidate(Invalidate::All);
        }
    }

    /// A new live program: a new plan, no entries.
    fn bc_rebuild(&mut self) {
        if let Some(bc) = self.bcache.as_deref_mut() {
            bc.rebuild(&self.live.engine);
        }
    }

    /// The behaviour cache's counters (`None` when it is off).
    pub fn bcache_stats(&self) -> Option<crate::bcache::Stats> {
        self.bcache.as_ref().map(|b| b.stats())
    }

    /// The egress behaviour cache's counters (`None` when the cache is off or the program has
    /// no egress pipeline).
    pub fn bcache_egress_stats(&self) -> Option<crate::bcache::Stats> {
        self.bcache.as_ref().and_then(|b| b.egress_stats())
    }

    /// The egress behaviour cache's plan (`None` when the cache is off or the program has no
    /// egress pipeline).
    pub fn bcache_egress_plan(&self) -> Option<&crate::bcache::Plan> {
        self.bcache.as_ref().and_then(|b| b.egress_plan())
    }

    /// The behaviour cache's plan for the live program (`None` when it is off).
    pub fn bcache_plan(&self) -> Option<&crate::bcache::Plan> {
        self.bcache.as_ref().map(|b| &b.plan)
    }

    fn ctl(&self) -> &Instance {
        self.pending.as_ref().unwrap_or(&self.live)
    }

    /// The instance control operations address; its clock is brought up to date so that
    /// entries added now start their ageing now.
    fn ctl_mut(&mut self) -> &mut Instance {
        let now = self.now_us();
        let i = self.pending.as_mut().unwrap_or(&mut self.live);
        i.state.ext.now_us = now;
        i
    }
}

// ---------------------------------------------------------------------- packet flow

fn copy_field_list(eng: &Engine, id: i64, src: &Phv, dst: &mut Phv) {
    if let Some(list) = eng.field_lists.get(&id) {
        for FlElem::Field(f) in list {
            copy_field(f, src, dst);
        }
    }
}

fn copy_field(f: &FieldLoc, src: &Phv, dst: &mut Phv) {
    if f.is_valid_bit {
        return;
    }
    let r = f.off as usize..(f.off + f.nbytes) as usize;
    dst.bytes[r.clone()].copy_from_slice(&src.bytes[r]);
}

#[inline]
fn set(eng: &Engine, phv: &mut Phv, f: fn(&Std) -> &StdSlot, v: u64) {
    eng.set_std(phv, f, v);
}

struct Flow<'a> {
    eng: &'a Engine,
    st: &'a mut State,
    pre: &'a Pre,
    mirroring: &'a HashMap<u32, MirroringSession>,
    digests: &'a mut DigestQueue,
    jobs: &'a mut VecDeque<Job>,
    replicas: &'a mut Vec<(Port, u32)>,
    out: &'a mut Vec<OutputPacket>,
    #[allow(clippy::vec_box)]
    pool: &'a mut Vec<Box<Pkt>>,
    spare: &'a mut Vec<Vec<u8>>,
    bufs: &'a mut Buffers,
    priority_queues: u32,
    now: u64,
    bcache: Option<&'a mut crate::bcache::Cache>,
}

/// `reuse` (a pooled instance) or a new one, made a fresh instance of the `data.len()`-byte
/// frame arriving on `port`: PHV reset (metadata zero, headers invalid), registers and times
/// cleared, the frame copied in when `copy` (the fast lane may parse it in place instead).
#[inline]
pub(crate) fn fresh_pkt(
    reuse: Option<Box<Pkt>>,
    layout: &Layout,
    data: &[u8],
    copy: bool,
    port: u32,
) -> Box<Pkt> {
    match reuse {
        Some(mut p) => {
            renew_pkt(&mut p, layout, data, copy, port);
            p
        }
        None => {
            let len = data.len() as u32;
            let mut p = Box::new(Pkt {
                phv: Phv::new(layout),
                data: Vec::with_capacity(data.len()),
                payload_off: 0,
                ingress_len: len,
                length_reg: len,
                ingress_port: port,
                regs: PktRegs::default(),
                enq_ts: 0,
            });
            if copy {
                p.data.extend_from_slice(data);
            }
            p
        }
    }
}

/// [`fresh_pkt`] of an instance at hand (the fast lane's own, inlined there).
#[inline(always)]
pub(crate) fn renew_pkt(p: &mut Pkt, layout: &Layout, data: &[u8], copy: bool, port: u32) {
    let len = data.len() as u32;
    p.phv.reset(layout);
    p.data.clear();
    p.payload_off = 0;
    p.regs = PktRegs::default();
    p.enq_ts = 0;
    if copy {
        p.data.extend_from_slice(data);
    }
    p.ingress_len = len;
    p.length_reg = len;
    p.ingress_port = port;
}

impl Flow<'_> {
    /// A new packet instance over `data`: fresh PHV (metadata zero, headers invalid).
    fn new_pkt(&mut self, data: &[u8], port: u32) -> Box<Pkt> {
        fresh_pkt(self.pool.pop(), &self.eng.layout, data, true, port)
    }

    /// A new instance for a copy (clone, resubmit, recirculation) of the `data.len()`-byte
    /// frame on `port`, as [`Flow::new_pkt`]; `None` (counted) when a bounded switch's pool
    /// is empty and its quota of instances made ([`Buffers`]).
    fn new_copy(&mut self, data: &[u8], port: u32) -> Option<Box<Pkt>> {
        if self.pool.is_empty() && !self.may_make_pkt() {
            return None;
        }
        Some(self.new_pkt(data, port))
    }

    /// Whether a new instance may be allocated (counted as made), or the copy is dropped
    /// (counted as a drop).
    fn may_make_pkt(&mut self) -> bool {
        match self.bufs.quota {
            Some(q) if self.bufs.pkts_made >= q => {
                self.bufs.drops += 1;
                false
            }
            Some(_) => {
                self.bufs.pkts_made += 1;
                true
            }
            None => true,
        }
    }

    /// A buffer for a transmitted or recirculated frame of `len` bytes: a spare one, a new
    /// one, or `None` (counted) when a bounded switch has none left to give.
    fn out_buf(&mut self, len: usize) -> Option<Vec<u8>> {
        if let Some(b) = self.spare.pop() {
            return Some(b);
        }
        match self.bufs.quota {
            Some(q) if self.bufs.bufs_made >= q => {
                self.bufs.drops += 1;
                None
            }
            Some(_) => {
                self.bufs.bufs_made += 1;
                Some(Vec::with_capacity((len + 64).max(POOL_FRAME)))
            }
            None => Some(Vec::new()),
        }
    }

    /// Room for one more replica within the input's instance budget (see `Buffers::left`).
    fn budget_room(&self) -> bool {
        self.jobs.len() < self.bufs.left
    }

    /// A full copy of `src` (headers, metadata, registers), reusing pooled buffers; `None`
    /// when a bounded switch has no instance to give (see [`Flow::new_copy`]).
    fn dup(&mut self, src: &Pkt) -> Option<Box<Pkt>> {
        if self.pool.is_empty() && !self.may_make_pkt() {
            return None;
        }
        Some(match self.pool.pop() {
            Some(mut p) => {
                p.phv.bytes.clone_from(&src.phv.bytes);
                p.phv.valid.clone_from(&src.phv.valid);
                p.phv.stack_next.clone_from(&src.phv.stack_next);
                p.phv.union_stack_next.clone_from(&src.phv.union_stack_next);
                p.phv.vl_width.clone_from(&src.phv.vl_width);
                p.data.clone_from(&src.data);
                p.payload_off = src.payload_off;
                p.ingress_len = src.ingress_len;
                p.length_reg = src.length_reg;
                p.ingress_port = src.ingress_port;
                p.regs = src.regs.clone();
                p.enq_ts = src.enq_ts;
                p
            }
            None => Box::new(src.clone()),
        })
    }

    fn recycle(&mut self, p: Box<Pkt>) {
        // A bounded switch keeps every instance it made (it makes no more than its quota).
        if self.pool.len() < 64 || self.bufs.quota.is_some() {
            self.pool.push(p);
        }
    }

    fn qdepth(&self, port: u32) -> u64 {
        self.jobs
            .iter()
            .filter(|j| matches!(j, Job::Egress(_, p) if *p == port))
            .count() as u64
    }

    fn enqueue(&mut self, pkt: Box<Pkt>, port: u32) {
        if let Some(pkt) = self.admit(pkt, port) {
            self.jobs.push_back(Job::Egress(pkt, port));
        }
    }

    /// Everything of [`Flow::enqueue`] but the push: the priority check and the enqueue-time
    /// metadata. `None` if the packet is dropped.
    fn admit(&mut self, mut pkt: Box<Pkt>, port: u32) -> Option<Box<Pkt>> {
        // Priority ≥ the number of priority queues: BMv2 drops the packet (with an error log).
        if self.eng.get_std(&pkt.phv, |s| &s.priority) >= self.priority_queues as u64 {
            self.recycle(pkt);
            return None;
        }
        if let Some([ts, qd, _, _]) = self.eng.std.queueing {
            let depth = self.qdepth(port);
            crate::exec::store_field_u64(&mut pkt.phv, &ts, self.now);
            crate::exec::store_field_u64(&mut pkt.phv, &qd, depth);
        }
        pkt.enq_ts = self.now;
        Some(pkt)
    }

    /// Send a clone copy to a mirroring session's port and/or group.
    fn mirror(&mut self, pkt: Box<Pkt>, session: &MirroringSession) {
        if let Some(mgid) = session.mgid {
            self.replicas.clear();
            self.pre.replicate(mgid, self.replicas);
            let reps = std::mem::take(self.replicas);
            for (port, rid) in &reps {
                if !self.budget_room() {
                    break;
                }
                let Some(mut c) = self.dup(&pkt) else { break };
                set(self.eng, &mut c.phv, |s| &s.egress_rid, *rid as u64);
                self.enqueue(c, *port);
            }
            *self.replicas = reps;
        }
        match session.port {
            Some(port) => self.enqueue(pkt, port),
            None => self.recycle(pkt),
        }
    }

    /// Parse and verify a packet fresh from [`Flow::new_pkt`] (every ingress job is one): its
    /// headers are already invalid and its stack counters zero, so nothing is reset here.
    fn parse_and_verify(&mut self, pkt: &mut Pkt) {
        let err = self.eng.parse(self.st, pkt);
        // Verification is only observable through `checksum_error`: skip it when the program
        // has no such field (BMv2 computes it and discards the result).
        let bad = self.eng.std.checksum_error.f.is_some()
            && self.eng.verify_checksums(&mut self.st.ext, pkt);
        set(self.eng, &mut pkt.phv, |s| &s.parser_error, err as u64);
        set(self.eng, &mut pkt.phv, |s| &s.checksum_error, bad as u64);
        mark(&mut self.st.ext, stage::PARSE);
    }

    /// Run ingress and its epilogue. Plain unicast with no other job queued returns the
    /// packet and its port instead of queueing it: it is the very next job, so the caller runs
    /// egress on it directly (same order, same queue depths).
    fn ingress(&mut self, mut pkt: Box<Pkt>) -> Option<(Box<Pkt>, u32)> {
        let eng = self.eng;
        self.parse_and_verify(&mut pkt);
        if let Some(init) = eng.ingress {
            let r = match self.bcache.as_deref_mut() {
                Some(bc) => bc.run(eng, self.st, &mut pkt, init),
                None => eng.run_pipeline(self.st, &mut pkt, "ingress", init),
            };
            if r.is_err() {
                self.recycle(pkt);
                return None;
            }
        }
        self.ingress_tail(pkt)
    }

    /// Ingress's epilogue (after the pipeline): clone, digest, resubmit, multicast, drop,
    /// unicast, as [`Flow::ingress`]. The fast lane ([`fast`]) hands a packet over here when
    /// its ingress asked for anything but plain unicast or drop.
    fn ingress_tail(&mut self, mut pkt: Box<Pkt>) -> Option<(Box<Pkt>, u32)> {
        let eng = self.eng;
        pkt.regs.exit = false;

        // 1. I2E clone.
        if let Some((session, fl)) = pkt.regs.clone.take() {
            if let Some(ms) = self.mirroring.get(&session).copied() {
                if let Some(mut c) = self.new_copy(&pkt.data, pkt.ingress_port) {
                    c.ingress_len = pkt.ingress_len;
                    c.length_reg = pkt.ingress_len;
                    set(
                        eng,
                        &mut c.phv,
                        |s| &s.ingress_port,
                        pkt.ingress_port as u64,
                    );
                    self.parse_and_verify(&mut c);
                    c.phv.reset_metadata(&eng.layout);
                    copy_field_list(eng, fl, &pkt.phv, &mut c.phv);
                    set(eng, &mut c.phv, |s| &s.instance_type, 1);
                    self.mirror(c, &ms);
                }
            }
        }
        // 2. Digest.
        if let Some(id) = pkt.regs.digest.take() {
            if let Some((li, fields)) = eng.learn_lists.get(&id) {
                let l = &eng.prog.learn_lists[*li];
                self.digests.push(|| Digest {
                    list_id: l.id as i32,
                    list_name: l.name.clone(),
                    fields: fields
                        .iter()
                        .map(|f| {
                            if f.is_valid_bit {
                                vec![pkt.phv.valid[f.header as usize] as u8]
                            } else {
                                pkt.phv.slot(f).to_vec()
                            }
                        })
                        .collect(),
                });
            }
        }
        // 3. Resubmit.
        if pkt.regs.resubmit != 0 {
            let Some(mut r) = self.new_copy(&pkt.data, pkt.ingress_port) else {
                self.recycle(pkt);
                return None;
            };
            r.ingress_len = pkt.ingress_len;
            r.length_reg = pkt.ingress_len;
            copy_field_list(eng, pkt.regs.resubmit, &pkt.phv, &mut r.phv);
            set(eng, &mut r.phv, |s| &s.instance_type, 6);
            set(
                eng,
                &mut r.phv,
                |s| &s.packet_length,
                pkt.ingress_len as u64,
            );
            self.jobs.push_back(Job::Ingress(r));
            self.recycle(pkt);
            return None;
        }
        // 4. Multicast.
        let mgid = eng.get_std(&pkt.phv, |s| &s.mcast_grp);
        if mgid != 0 {
            set(eng, &mut pkt.phv, |s| &s.instance_type, 5);
            self.replicas.clear();
            self.pre.replicate(mgid as u32, self.replicas);
            let reps = std::mem::take(self.replicas);
            for (port, rid) in &reps {
                // Replicas past the input's instance budget would only be cut: not made.
                if !self.budget_room() {
                    break;
                }
                let Some(mut c) = self.dup(&pkt) else { break };
                set(eng, &mut c.phv, |s| &s.egress_rid, *rid as u64);
                self.enqueue(c, *port);
            }
            *self.replicas = reps;
            self.recycle(pkt);
            return None;
        }
        // 5. Drop. 6. Unicast.
        let spec = eng.get_std(&pkt.phv, |s| &s.egress_spec);
        if spec == eng.drop_port as u64 {
            self.recycle(pkt);
            return None;
        }
        set(eng, &mut pkt.phv, |s| &s.instance_type, 0);
        if self.jobs.is_empty() {
            return self.admit(pkt, spec as u32).map(|p| (p, spec as u32));
        }
        self.enqueue(pkt, spec as u32);
        None
    }

    fn egress(&mut self, mut pkt: Box<Pkt>, port: u32) {
        let eng = self.eng;
        set(eng, &mut pkt.phv, |s| &s.egress_ts, self.now);
        if let Some([_, _, dt, dq]) = eng.std.queueing {
            let depth = self.qdepth(port);
            crate::exec::store_field_u64(&mut pkt.phv, &dt, self.now.saturating_sub(pkt.enq_ts));
            crate::exec::store_field_u64(&mut pkt.phv, &dq, depth);
            let prio = eng.get_std(&pkt.phv, |s| &s.priority);
            set(eng, &mut pkt.phv, |s| &s.qid, prio);
        }
        set(eng, &mut pkt.phv, |s| &s.egress_port, port as u64);
        set(
            eng,
            &mut pkt.phv,
            |s| &s.egress_spec,
            eng.drop_port as u64 + 1,
        );
        set(
            eng,
            &mut pkt.phv,
            |s| &s.packet_length,
            pkt.length_reg as u64,
        );
        mark(&mut self.st.ext, stage::QUEUE);
        if let Some(init) = eng.egress {
            let r = match self.bcache.as_deref_mut() {
                Some(bc) => bc.run_egress(eng, self.st, &mut pkt, init),
                None => eng.run_pipeline(self.st, &mut pkt, "egress", init),
            };
            if r.is_err() {
                self.recycle(pkt);
                return;
            }
        }
        self.egress_tail(pkt, port);
    }

    /// Egress's epilogue (after the pipeline): clone, drop, deparse, recirculate, transmit,
    /// as [`Flow::egress`]. The fast lane ([`fast`]) hands a packet over here when its egress
    /// asked for a clone or a recirculation.
    fn egress_tail(&mut self, mut pkt: Box<Pkt>, port: u32) {
        let eng = self.eng;
        pkt.regs.exit = false;

        // 1. E2E clone.
        if let Some((session, fl)) = pkt.regs.clone.take() {
            if let Some(ms) = self.mirroring.get(&session).copied() {
                if let Some(mut c) = self.dup(&pkt) {
                    c.regs = PktRegs::default();
                    c.phv.reset_metadata(&eng.layout);
                    copy_field_list(eng, fl, &pkt.phv, &mut c.phv);
                    set(eng, &mut c.phv, |s| &s.instance_type, 2);
                    self.mirror(c, &ms);
                }
            }
        }
        // 2. Drop.
        if eng.get_std(&pkt.phv, |s| &s.egress_spec) == eng.drop_port as u64 {
            self.recycle(pkt);
            return;
        }
        // 3. Deparse.
        // Deparse straight into the output buffer: the transmitted frame is never copied again.
        let Some(mut bytes) = self.out_buf(pkt.data.len()) else {
            self.recycle(pkt);
            return;
        };
        bytes.reserve(pkt.data.len() + 64);
        eng.deparse(self.st, &mut pkt, &mut bytes);
        if let Some(t) = pkt.regs.truncate {
            bytes.truncate(t as usize);
        }
        mark(&mut self.st.ext, stage::DEPARSE);
        // 4. Recirculate.
        if pkt.regs.recirculate != 0 {
            let r = self.new_copy(&bytes, pkt.ingress_port);
            // The deparsed frame was copied into the new instance: its buffer is kept.
            self.spare.push(bytes);
            let Some(mut r) = r else {
                self.recycle(pkt);
                return;
            };
            let len = r.data.len() as u32;
            r.ingress_len = len;
            r.length_reg = len;
            copy_field_list(eng, pkt.regs.recirculate, &pkt.phv, &mut r.phv);
            set(eng, &mut r.phv, |s| &s.instance_type, 4);
            set(eng, &mut r.phv, |s| &s.packet_length, len as u64);
            self.jobs.push_back(Job::Ingress(r));
            self.recycle(pkt);
            return;
        }
        // 5. Transmit.
        self.out.push(OutputPacket { port, data: bytes });
        self.recycle(pkt);
    }
}

/// Where [`Switch::process_batch_into`] hands each output: a writer that copies the bytes
/// where they go (a pcap file's buffer) while the switch keeps the buffer.
pub trait OutputSink {
    /// Packet `pkt` of the batch (counted from 0) sends `data` out of `port`.
    fn output(&mut self, pkt: usize, port: Port, data: &[u8]);
}

impl Switch {
    /// Process a batch of packets in order, exactly as that many [`PacketPath::process_packet`]
    /// calls would (outputs appended to `out` in order), except that the clock is read once
    /// for the whole batch: every packet of a batch gets the same ingress timestamp.
    ///
    /// Give `out`'s frames back with [`Switch::recycle_outputs`] once they are transmitted:
    /// the fast path then reuses their buffers and allocates nothing per packet.
    pub fn process_batch(&mut self, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        let now = self.packet_now_us();
        self.run_batch(now, pkts.iter().copied(), out, |_| {});
    }

    /// [`Switch::process_batch`] with the packets from an iterator: for a caller that renumbers
    /// the ports on the way in (tern-virt's virtual ports) without copying the batch first.
    pub fn process_batch_iter<'a>(
        &mut self,
        frames: impl Iterator<Item = (Port, &'a [u8])>,
        out: &mut Vec<OutputPacket>,
    ) {
        let now = self.packet_now_us();
        self.run_batch(now, frames, out, |_| {});
    }

    /// [`Switch::process_batch`] for a caller that needs each packet's outputs apart (a run
    /// loop counting drops): the packets come from `frames`, all at switch time `now`, and
    /// `ends[i]` is `out.len()` after packet i (pushed, `ends` is not cleared).
    pub fn process_batch_ends<'a>(
        &mut self,
        now: u64,
        frames: impl Iterator<Item = (Port, &'a [u8])>,
        out: &mut Vec<OutputPacket>,
        ends: &mut Vec<usize>,
    ) {
        self.run_batch(now, frames, out, |n| ends.push(n));
    }

    /// [`Switch::process_batch_ends`] for a caller that needs only the number of packets
    /// of the batch that left no output (dropped), which it returns: a run loop writing
    /// every output of the batch with one timestamp.
    pub fn process_batch_drops<'a>(
        &mut self,
        now: u64,
        frames: impl Iterator<Item = (Port, &'a [u8])>,
        out: &mut Vec<OutputPacket>,
    ) -> u64 {
        let (mut dropped, mut last) = (0, out.len());
        self.run_batch(now, frames, out, |n| {
            dropped += u64::from(n == last);
            last = n;
        });
        dropped
    }

    /// The packets of a batch in order at time `now`; `done(out.len())` after each.
    fn run_batch<'a>(
        &mut self,
        now: u64,
        frames: impl Iterator<Item = (Port, &'a [u8])>,
        out: &mut Vec<OutputPacket>,
        mut done: impl FnMut(usize),
    ) {
        if self.shared.is_none() && self.lane_ready() {
            // Nothing a packet does turns the trace, the stage timing or the lane off, and a
            // packet that leaves the common case is handed over inside `process_lane`: the
            // whole batch goes straight to the lane.
            let mut ctx = crate::jit::LaneCtx::new();
            for (port, data) in frames {
                self.process_lane(now, port, data, out, &mut ctx);
                done(out.len());
            }
            return;
        }
        for (port, data) in frames {
            self.process_at(now, port, data, out);
            done(out.len());
        }
    }

    /// [`Switch::process_batch`] with the outputs handed to `sink` as slices of the switch's
    /// own buffers, in the order they leave (packet `i` of the batch is `pkts`' i-th item):
    /// no output `Vec` goes back to the caller, and the buffers are kept for the next
    /// packets. Each item is (port, clock, bytes): clock `None` is the batch's clock (read
    /// once, before the first packet); `Some(us)` fixes the switch clock to `us` from that
    /// packet on, as [`Switch::set_clock_us`] does (deterministic replays). `scratch` is
    /// working space (left empty; reuse it across calls to allocate nothing): the batch's
    /// outputs are kept there until its end, so a batch's size is bounded by the caller.
    pub fn process_batch_into<'a, S: OutputSink + ?Sized>(
        &mut self,
        pkts: impl IntoIterator<Item = (Port, Option<u64>, &'a [u8])>,
        scratch: &mut Vec<OutputPacket>,
        sink: &mut S,
    ) {
        self.recycle_outputs(scratch);
        let batch_now = self.packet_now_us();
        // As in `run_batch`: nothing a packet does turns the lane off, so the whole batch
        // goes to the lane as one burst when the first packet would.
        let lane = self.shared.is_none() && self.lane_ready();
        let mut ctx = crate::jit::LaneCtx::new();
        for (i, (port, clock, data)) in pkts.into_iter().enumerate() {
            let now = match clock {
                Some(us) => {
                    self.clock_us = Some(us);
                    us
                }
                None => batch_now,
            };
            let first = scratch.len();
            if lane {
                self.process_lane(now, port, data, scratch, &mut ctx);
            } else {
                self.process_at(now, port, data, scratch);
            }
            for o in &scratch[first..] {
                sink.output(i, o.port, &o.data);
            }
        }
        // The buffers go back once per batch (per packet cost twice as much).
        self.recycle_outputs(scratch);
    }

    /// Turn per-stage timing on (counters zeroed) or off. When on, every stage boundary reads
    /// the clock (tens of ns each): use it on a sample of the traffic, not for throughput.
    pub fn set_stage_timing(&mut self, on: bool) {
        self.live.state.ext.probe = on.then(|| Box::new(Probe::new()));
    }

    /// Turn the per-packet trace on or off (BMv2's debug/trace log lines: parser states,
    /// tables with keys and hit/miss, actions, conditions, deparser). While on, `log_msg`
    /// output goes into the trace too, in order, instead of [`Switch::take_log`]. Costs
    /// allocations per packet: for debugging, not for throughput.
    pub fn set_trace(&mut self, on: bool) {
        self.live.state.ext.trace = on.then(Box::default);
    }

    /// The trace lines recorded since the last call (oldest first); empty when tracing is off.
    pub fn take_trace(&mut self) -> Vec<crate::trace::TraceLine> {
        self.live
            .state
            .ext
            .trace
            .as_deref_mut()
            .map(|t| std::mem::take(&mut t.lines))
            .unwrap_or_default()
    }

    /// Per-stage timing so far, if on: `(ns, clock reads)` per stage, in
    /// [`crate::exec::stage::NAMES`] order.
    pub fn stage_times(&self) -> Option<([u64; stage::COUNT], [u64; stage::COUNT])> {
        self.live.state.ext.probe.as_ref().map(|p| (p.ns, p.marks))
    }

    /// Take the frames of `out` (emptying it) and keep their buffers for reuse by the next
    /// transmitted packets (up to a bounded number; the rest are freed). One frame (a caller
    /// running one packet per call) is given back with one [`Switch::recycle_buffer`]
    /// (≈ 10 instructions, against ≈ 100 for the drain of a batch; callgrind), inlined into
    /// the caller (a call of its own cost a one-per-call slice ≈ 10 instructions a packet).
    #[inline(always)]
    pub fn recycle_outputs(&mut self, out: &mut Vec<OutputPacket>) {
        if out.len() == 1 {
            if let Some(o) = out.pop() {
                self.recycle_buffer(o.data);
            }
            return;
        }
        self.recycle_batch(out);
    }

    /// [`Switch::recycle_outputs`] of any other number of frames.
    fn recycle_batch(&mut self, out: &mut Vec<OutputPacket>) {
        // As many as there is room for, moved in one pass (one capacity check); the rest
        // are freed.
        let room = MAX_SPARE.saturating_sub(self.spare.len()).min(out.len());
        self.spare.extend(out.drain(..room).map(|o| o.data));
        out.clear();
    }

    /// Bound the packet instances and output buffers this switch allocates to `quota` of
    /// each (`None`: unbounded, the default), as a DPDK mempool of that many buffers: once
    /// that many were made, a copy (clone, multicast replica, resubmit, recirculation) or a
    /// transmitted frame that finds its pool empty is dropped and counted
    /// ([`Switch::buffer_drops`]) instead of allocating on the packet path; the switch keeps
    /// every instance it made, and output buffers come back through
    /// [`Switch::recycle_buffer`] / [`Switch::recycle_outputs`]. Replicas past an input's
    /// instance budget (`max_instances_per_packet`) are never made, bounded or not.
    pub fn set_buffer_quota(&mut self, quota: Option<usize>) {
        self.bufs.quota = quota;
        // A bounded pool starts with some buffers made (counted against the quota), as a
        // mempool is filled when created: a device whose frames in flight stay below this
        // never makes one on the packet path, however the hand-back of its buffers is timed.
        if let Some(q) = quota {
            let want = q.min(BUFFER_PREFILL);
            while self.spare.len() < want && self.bufs.bufs_made < q {
                self.spare.push(Vec::with_capacity(POOL_FRAME));
                self.bufs.bufs_made += 1;
            }
        }
    }

    /// Copies and frames dropped because a bounded switch's pool was empty
    /// ([`Switch::set_buffer_quota`]).
    pub fn buffer_drops(&self) -> u64 {
        self.bufs.drops
    }

    /// Output buffers in the switch's pool (its next transmitted frames' buffers).
    pub fn spare_buffers(&self) -> usize {
        self.spare.len()
    }

    /// How many more output buffers the switch's pool takes: up to the quota for a bounded
    /// switch ([`Switch::set_buffer_quota`]), up to the recycling bound otherwise.
    pub fn buffer_room(&self) -> usize {
        self.bufs
            .quota
            .unwrap_or(MAX_SPARE)
            .saturating_sub(self.spare.len())
    }

    /// Keep one transmitted frame's buffer for reuse (as [`Switch::recycle_outputs`] does for
    /// a whole batch): for callers that hand frames on one by one (tern-virt's links).
    #[inline]
    pub fn recycle_buffer(&mut self, data: Vec<u8>) {
        if self.spare.len() < MAX_SPARE {
            self.spare.push(data);
        }
    }

    /// Drop the digests generated so far without handing them out (keeps the queue's memory):
    /// for a caller with no digest listener, so that the queue does not grow with every packet
    /// of a program that learns (e.g. `tern bench`).
    pub fn discard_digests(&mut self) {
        self.digests.clear();
    }

    /// Bound the digests kept for the control plane between two [`Runtime::take_digests`]
    /// calls (default [`DIGEST_QUEUE_CAP`]); digests generated while the queue is full are
    /// dropped and counted, as BMv2's learn engine drops samples it has no room for.
    pub fn set_digest_queue_cap(&mut self, cap: usize) {
        self.digests.cap = cap;
    }

    /// Digests dropped because the queue was full (see [`Switch::set_digest_queue_cap`]).
    pub fn digests_dropped(&self) -> u64 {
        self.digests.dropped
    }

    /// Process one packet with switch time `now` (from [`Switch::now_us`]): what
    /// [`Switch::process_batch`] does per packet, for callers that need each packet's outputs
    /// apart (they are appended to `out`) without a clock read per packet.
    pub fn process_at(&mut self, now: u64, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        if self.shared.is_some() {
            // Replicas share registers and meters: the whole packet (all its actions) runs
            // under the bank's lock.
            self.with_shared_externs(|sw| sw.process_one(now, port, data, out));
        } else {
            self.process_one(now, port, data, out);
        }
    }

    fn process_one(&mut self, now: u64, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        if self.lane_ready() {
            self.process_lane(now, port, data, out, &mut crate::jit::LaneCtx::new());
            return;
        }
        let inst = &mut self.live;
        inst.state.ext.now_us = now;
        if let Some(p) = inst.state.ext.probe.as_deref_mut() {
            p.start();
        }
        let eng = &inst.engine;
        self.jobs.clear();
        let mut flow = general_flow!(
            self,
            eng,
            &mut inst.state,
            out,
            now,
            self.bcache.as_deref_mut()
        );
        let mut pkt = flow.new_pkt(data, port);
        set(eng, &mut pkt.phv, |s| &s.ingress_port, port as u64);
        set(eng, &mut pkt.phv, |s| &s.packet_length, data.len() as u64);
        // instance_type is 0 (NORMAL): `new_pkt` zeroed the metadata.
        set(eng, &mut pkt.phv, |s| &s.ingress_ts, now);
        mark(&mut flow.st.ext, stage::RECEIVE);
        let budget = self.opts.max_instances_per_packet;
        let ran = flow.run_jobs(Some(Job::Ingress(pkt)), budget);
        mark(&mut flow.st.ext, stage::TRANSMIT);
        self.passes += ran as u64;
    }
}

impl Flow<'_> {
    /// The packet's jobs in order, `next` first, then the queue, at most `budget` of them
    /// (`max_instances_per_packet`; the rest are dropped). Returns the jobs (pipeline passes)
    /// run.
    fn run_jobs(&mut self, mut next: Option<Job>, budget: usize) -> usize {
        let mut left = budget;
        let flow = self;
        // `next` is the job at the head of the queue, held outside it: the input packet, then
        // the unicast egress job `ingress` hands back when nothing else is queued.
        while let Some(job) = next.take().or_else(|| flow.jobs.pop_front()) {
            if left == 0 {
                // The instances cut (this job's and the queue's) go back to the pool (a
                // bounded switch keeps them all).
                let (Job::Ingress(p) | Job::Egress(p, _)) = job;
                flow.recycle(p);
                while let Some(j) = flow.jobs.pop_front() {
                    let (Job::Ingress(p) | Job::Egress(p, _)) = j;
                    flow.recycle(p);
                }
                break;
            }
            left -= 1;
            flow.bufs.left = left;
            match job {
                Job::Ingress(p) => next = flow.ingress(p).map(|(p, port)| Job::Egress(p, port)),
                Job::Egress(p, port) => flow.egress(p, port),
            }
        }
        budget - left
    }
}

/// Output buffers kept for reuse by [`Switch::recycle_outputs`].
const MAX_SPARE: usize = 4096;

impl PacketPath for Switch {
    fn process_packet(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        let now = self.packet_now_us();
        self.process_at(now, port, data, out);
    }

    fn take_digests(&mut self) -> Vec<Digest> {
        std::mem::take(&mut self.digests.items)
    }
}

// ---------------------------------------------------------------------- control plane

impl Runtime for Switch {
    fn get_config(&self) -> String {
        self.live.json.to_string()
    }

    fn get_config_md5(&self) -> [u8; 16] {
        use md5::{Digest as _, Md5};
        let d = Md5::digest(self.live.json.as_bytes());
        let mut out = [0u8; 16];
        out.copy_from_slice(&d);
        out
    }

    fn load_new_config(&mut self, json: &str) -> RtResult<()> {
        if !self.opts.enable_swap {
            return Err(SwapError::CONFIG_SWAP_DISABLED.into());
        }
        if self.pending.is_some() {
            return Err(SwapError::ONGOING_SWAP.into());
        }
        // BMv2 has no swap error code for a bad JSON; NO_ONGOING_SWAP says "nothing staged".
        let inst = Instance::new(json, &self.opts).map_err(|_| SwapError::NO_ONGOING_SWAP)?;
        self.pending = Some(inst);
        Ok(())
    }

    fn swap_configs(&mut self) -> RtResult<()> {
        if !self.opts.enable_swap {
            return Err(SwapError::CONFIG_SWAP_DISABLED.into());
        }
        match self.pending.take() {
            Some(p) => {
                self.live = p;
                self.pool.clear();
                self.bufs.pkts_made = 0;
                self.lane_pkt = None;
                self.bc_rebuild();
                Ok(())
            }
            None => Err(SwapError::NO_ONGOING_SWAP.into()),
        }
    }

    fn reset_state(&mut self) {
        // A fresh engine too: CRC parameters and Toeplitz keys go back to the program's.
        let json = self.live.json.clone();
        if let Ok(inst) = Instance::new(&json, &self.opts) {
            self.live = inst;
        }
        self.bc_rebuild();
        self.pending = None;
        self.pool.clear();
        self.bufs.pkts_made = 0;
        self.lane_pkt = None;
        self.pre = Pre::default();
        self.mirroring.clear();
        self.digests.clear();
    }

    fn serialize_state(&self) -> String {
        let i = self.ctl();
        let mut s = String::new();
        for (t, ts) in i.engine.tables.iter().zip(&i.state.tables) {
            s.push_str(&format!("table {} entries {}\n", t.name, ts.store.len()));
        }
        for (r, ra) in i.engine.prog.register_arrays.iter().zip(&i.state.ext.regs) {
            s.push_str(&format!(
                "register {} {}\n",
                r.name,
                ra.cells()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<String>()
            ));
        }
        s
    }

    fn switch_info(&self) -> SwitchInfo {
        SwitchInfo {
            device_id: self.opts.device_id,
            thrift_port: self.opts.thrift_port,
            ..Default::default()
        }
    }

    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32> {
        let p = &self.ctl().engine.prog;
        let id = match kind {
            ResourceType::MatchTable => p
                .pipelines
                .iter()
                .flat_map(|pl| &pl.tables)
                .find(|t| t.name == name)
                .map(|t| t.id),
            ResourceType::ActionProfile => p
                .pipelines
                .iter()
                .flat_map(|pl| &pl.action_profiles)
                .find(|t| t.name == name)
                .map(|t| t.id),
            ResourceType::Counter => p
                .counter_arrays
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.id),
            ResourceType::Meter => p.meter_arrays.iter().find(|t| t.name == name).map(|t| t.id),
            ResourceType::Register => p
                .register_arrays
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.id),
            ResourceType::LearningList => {
                p.learn_lists.iter().find(|t| t.name == name).map(|t| t.id)
            }
        };
        id.map(|i| i as i32)
            .ok_or(IdLookupError::INVALID_RESOURCE_NAME.into())
    }

    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64> {
        let i = self.ctl();
        Ok(i.state.tables[i.table(table)?].store.len() as u64)
    }

    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()> {
        self.bc_table(table, Invalidate::Table);
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.check_mutable(ti)?;
        i.state.tables[ti].store.clear();
        if reset_default_entry {
            i.reset_default(ti);
        }
        Ok(())
    }

    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::Simple)?;
        let a = i.table_action(ti, action)?;
        let data = norm_data(&i.engine.actions[a as usize].param_widths, data)?;
        let h = i.add_entry(ti, key, priority, EntryAction::Action { action: a, data })?;
        self.bc_added(ti, h);
        Ok(h)
    }

    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.bc_table(table, Invalidate::Default);
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::Simple)?;
        let a = i.table_action(ti, action)?;
        if let Some(d) = &i.engine.tables[ti].default_entry {
            if d.action_entry_const {
                return Err(TableError::DEFAULT_ENTRY_IS_CONST.into());
            }
            if d.action_const && d.action != a {
                return Err(TableError::DEFAULT_ACTION_IS_CONST.into());
            }
        }
        let data = norm_data(&i.engine.actions[a as usize].param_widths, data)?;
        i.state.tables[ti].default = Some(EntryAction::Action { action: a, data });
        Ok(())
    }

    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.bc_table(table, Invalidate::Default);
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::Simple)?;
        if i.engine.tables[ti]
            .default_entry
            .as_ref()
            .is_some_and(|d| d.action_entry_const)
        {
            return Err(TableError::DEFAULT_ENTRY_IS_CONST.into());
        }
        i.reset_default(ti);
        Ok(())
    }

    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.bc_table(table, |t| Invalidate::Entry(t, handle));
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::Simple)?;
        i.check_mutable(ti)?;
        i.state.tables[ti].store.delete(handle)?;
        Ok(())
    }

    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.bc_table(table, |t| Invalidate::Entry(t, handle));
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::Simple)?;
        i.check_mutable(ti)?;
        let a = i.table_action(ti, action)?;
        let data = norm_data(&i.engine.actions[a as usize].param_widths, data)?;
        i.state.tables[ti]
            .store
            .set_action(handle, EntryAction::Action { action: a, data })?;
        Ok(())
    }

    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()> {
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if !i.engine.tables[ti].support_timeout {
            return Err(TableError::AGEING_DISABLED.into());
        }
        i.state.tables[ti].store.get_mut(handle)?.timeout_ms = Some(timeout_ms);
        Ok(())
    }

    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if i.engine.tables[ti].table_type == TableType::Simple {
            return Err(TableError::WRONG_TABLE_TYPE.into());
        }
        i.member_ok(ti, member)?;
        let h = i.add_entry(ti, key, priority, EntryAction::Member(member))?;
        self.bc_added(ti, h);
        Ok(h)
    }

    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.bc_table(table, |t| Invalidate::Entry(t, handle));
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if i.engine.tables[ti].table_type == TableType::Simple {
            return Err(TableError::WRONG_TABLE_TYPE.into());
        }
        i.member_ok(ti, member)?;
        i.state.tables[ti]
            .store
            .set_action(handle, EntryAction::Member(member))?;
        Ok(())
    }

    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.bc_table(table, |t| Invalidate::Entry(t, handle));
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if i.engine.tables[ti].table_type == TableType::Simple {
            return Err(TableError::WRONG_TABLE_TYPE.into());
        }
        i.state.tables[ti].store.delete(handle)?;
        Ok(())
    }

    fn mt_indirect_set_default_member(
        &mut self,
        table: &str,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.bc_table(table, Invalidate::Default);
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if i.engine.tables[ti].table_type == TableType::Simple {
            return Err(TableError::WRONG_TABLE_TYPE.into());
        }
        i.member_ok(ti, member)?;
        i.state.tables[ti].default = Some(EntryAction::Member(member));
        Ok(())
    }

    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.bc_table(table, Invalidate::Default);
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if i.engine.tables[ti].table_type == TableType::Simple {
            return Err(TableError::WRONG_TABLE_TYPE.into());
        }
        i.state.tables[ti].default = None;
        Ok(())
    }

    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::IndirectWs)?;
        i.group_ok(ti, group)?;
        let h = i.add_entry(ti, key, priority, EntryAction::Group(group))?;
        self.bc_added(ti, h);
        Ok(h)
    }

    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.bc_table(table, |t| Invalidate::Entry(t, handle));
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::IndirectWs)?;
        i.group_ok(ti, group)?;
        i.state.tables[ti]
            .store
            .set_action(handle, EntryAction::Group(group))?;
        Ok(())
    }

    fn mt_indirect_ws_set_default_group(
        &mut self,
        table: &str,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.bc_table(table, Invalidate::Default);
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        i.want_type(ti, TableType::IndirectWs)?;
        i.group_ok(ti, group)?;
        i.state.tables[ti].default = Some(EntryAction::Group(group));
        Ok(())
    }

    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        let i = self.ctl();
        let ti = i.table(table)?;
        if !i.engine.tables[ti].with_counters {
            return Err(TableError::COUNTERS_DISABLED.into());
        }
        Ok(i.state.tables[ti].store.get(handle)?.counter)
    }

    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()> {
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if !i.engine.tables[ti].with_counters {
            return Err(TableError::COUNTERS_DISABLED.into());
        }
        for e in i.state.tables[ti].store.slots.iter_mut().flatten() {
            e.counter = CounterValue::default();
        }
        Ok(())
    }

    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        if !i.engine.tables[ti].with_counters {
            return Err(TableError::COUNTERS_DISABLED.into());
        }
        i.state.tables[ti].store.get_mut(handle)?.counter = value;
        Ok(())
    }

    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()> {
        let now = self.now_us();
        let i = self.ctl_mut();
        let ti = i.table(table)?;
        let Some((m, _)) = i.engine.tables[ti].direct_meter else {
            return Err(TableError::METERS_DISABLED.into());
        };
        if rates.len() != i.engine.prog.meter_arrays[m as usize].rate_count as usize {
            return Err(TableError::INVALID_METER_OPERATION.into());
        }
        i.state.tables[ti]
            .store
            .get_mut(handle)?
            .meter
            .set_rates(rates, now)
            .map_err(|_| TableError::INVALID_METER_OPERATION)?;
        Ok(())
    }

    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> {
        let i = self.ctl();
        let ti = i.table(table)?;
        if i.engine.tables[ti].direct_meter.is_none() {
            return Err(TableError::METERS_DISABLED.into());
        }
        Ok(i.state.tables[ti].store.get(handle)?.meter.rates().to_vec())
    }

    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>> {
        let now = self.now_us();
        let i = self.ctl();
        let ti = i.table(table)?;
        let store = &i.state.tables[ti].store;
        let mut out = Vec::with_capacity(store.len());
        for (idx, s) in store.slots.iter().enumerate() {
            if s.is_some() {
                out.push(i.entry_of(ti, store.handle_of(idx as u32), now)?);
            }
        }
        Ok(out)
    }

    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry> {
        let i = self.ctl();
        i.entry_of(i.table(table)?, handle, self.now_us())
    }

    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry> {
        let i = self.ctl();
        let ti = i.table(table)?;
        Ok(match &i.state.tables[ti].default {
            None => ActionEntry::None,
            Some(ea) => i.to_action_entry(ea),
        })
    }

    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry> {
        let i = self.ctl();
        let ti = i.table(table)?;
        let spec = &i.engine.tables[ti].spec;
        let (v, m, r, _, _) = crate::table::normalize(spec, key)?;
        let store = &i.state.tables[ti].store;
        let idx = store
            .find(spec, &v, &m, &r, priority.unwrap_or(0))
            .ok_or(TableError::BAD_MATCH_KEY)?;
        i.entry_of(ti, store.handle_of(idx), self.now_us())
    }

    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle> {
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        let a = i.profile_action(pi, action)?;
        let data = norm_data(&i.engine.actions[a as usize].param_widths, data)?;
        Ok(i.state.profiles[pi].add_member(a, data))
    }

    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()> {
        self.bc_profile(prof);
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        i.state.profiles[pi].member(member)?;
        let used_by_entries = i.engine.tables.iter().zip(&i.state.tables).any(|(t, ts)| {
            t.profile == Some(pi as u32)
                && (ts
                    .store
                    .slots
                    .iter()
                    .flatten()
                    .any(|e| e.action == EntryAction::Member(member))
                    || ts.default == Some(EntryAction::Member(member)))
        });
        let in_group = i.state.profiles[pi]
            .groups
            .iter()
            .flatten()
            .any(|g| g.contains(&member));
        if used_by_entries || in_group {
            return Err(TableError::MBR_STILL_USED.into());
        }
        i.state.profiles[pi].members[member as usize] = None;
        Ok(())
    }

    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.bc_profile(prof);
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        i.state.profiles[pi].member(member)?;
        let a = i.profile_action(pi, action)?;
        let data = norm_data(&i.engine.actions[a as usize].param_widths, data)?;
        i.state.profiles[pi].members[member as usize] = Some((a, data));
        Ok(())
    }

    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle> {
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        if i.engine.profiles[pi].selector.is_none() {
            return Err(TableError::NO_ACTION_PROFILE_SELECTION.into());
        }
        Ok(i.state.profiles[pi].create_group())
    }

    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()> {
        self.bc_profile(prof);
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        i.state.profiles[pi].group(group)?;
        let used = i.engine.tables.iter().zip(&i.state.tables).any(|(t, ts)| {
            t.profile == Some(pi as u32)
                && (ts
                    .store
                    .slots
                    .iter()
                    .flatten()
                    .any(|e| e.action == EntryAction::Group(group))
                    || ts.default == Some(EntryAction::Group(group)))
        });
        if used {
            return Err(TableError::GRP_STILL_USED.into());
        }
        i.state.profiles[pi].groups[group as usize] = None;
        Ok(())
    }

    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.bc_profile(prof);
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        let p = &mut i.state.profiles[pi];
        p.member(member)?;
        p.group(group)?;
        let Some(Some(g)) = p.groups.get_mut(group as usize) else {
            return Err(TableError::INVALID_GRP_HANDLE.into());
        };
        if g.contains(&member) {
            return Err(TableError::MBR_ALREADY_IN_GRP.into());
        }
        g.push(member);
        g.sort_unstable();
        Ok(())
    }

    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.bc_profile(prof);
        let i = self.ctl_mut();
        let pi = i.profile(prof)?;
        let p = &mut i.state.profiles[pi];
        p.member(member)?;
        let Some(Some(g)) = p.groups.get_mut(group as usize) else {
            return Err(TableError::INVALID_GRP_HANDLE.into());
        };
        let Some(pos) = g.iter().position(|m| *m == member) else {
            return Err(TableError::MBR_NOT_IN_GRP.into());
        };
        g.remove(pos);
        Ok(())
    }

    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>> {
        let i = self.ctl();
        let pi = i.profile(prof)?;
        Ok(i.state.profiles[pi]
            .members
            .iter()
            .enumerate()
            .filter_map(|(h, m)| {
                m.as_ref().map(|(a, d)| ProfileMember {
                    handle: h as u32,
                    action: i.engine.actions[*a as usize].name.clone(),
                    data: d.clone(),
                })
            })
            .collect())
    }

    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember> {
        let i = self.ctl();
        let pi = i.profile(prof)?;
        let (a, d) = i.state.profiles[pi].member(member)?;
        Ok(ProfileMember {
            handle: member,
            action: i.engine.actions[*a as usize].name.clone(),
            data: d.clone(),
        })
    }

    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>> {
        let i = self.ctl();
        let pi = i.profile(prof)?;
        Ok(i.state.profiles[pi]
            .groups
            .iter()
            .enumerate()
            .filter_map(|(h, g)| {
                g.as_ref().map(|m| ProfileGroup {
                    handle: h as u32,
                    members: m.clone(),
                })
            })
            .collect())
    }

    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> {
        let i = self.ctl();
        let pi = i.profile(prof)?;
        Ok(ProfileGroup {
            handle: group,
            members: i.state.profiles[pi].group(group)?.clone(),
        })
    }

    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        let i = self.ctl();
        let c = i.counter(counter)?;
        i.state.ext.counters[c]
            .get(index as usize)
            .copied()
            .ok_or(CounterError::INVALID_INDEX.into())
    }

    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()> {
        let i = self.ctl_mut();
        let c = i.counter(counter)?;
        i.state.ext.counters[c].fill(CounterValue::default());
        Ok(())
    }

    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()> {
        let i = self.ctl_mut();
        let c = i.counter(counter)?;
        *i.state.ext.counters[c]
            .get_mut(index as usize)
            .ok_or(CounterError::INVALID_INDEX)? = value;
        Ok(())
    }

    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()> {
        let now = self.now_us();
        let i = self.ctl_mut();
        let m = i.meter(meter)?;
        i.check_rates(i.engine.prog.meter_arrays[m].rate_count, rates)?;
        for cell in &mut i.state.ext.meters[m] {
            cell.set_rates(rates, now)?;
        }
        Ok(())
    }

    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> {
        let now = self.now_us();
        let i = self.ctl_mut();
        let m = i.meter(meter)?;
        if index as usize >= i.state.ext.meters[m].len() {
            return Err(MeterError::INVALID_INDEX.into());
        }
        i.check_rates(i.engine.prog.meter_arrays[m].rate_count, rates)?;
        i.state.ext.meters[m][index as usize].set_rates(rates, now)?;
        Ok(())
    }

    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>> {
        let i = self.ctl();
        let m = i.meter(meter)?;
        Ok(i.state.ext.meters[m]
            .get(index as usize)
            .ok_or(MeterError::INVALID_INDEX)?
            .rates()
            .to_vec())
    }

    fn register_read(&self, register: &str, index: u32) -> RtResult<u64> {
        let i = self.ctl();
        let r = &i.state.ext.regs[i.register(register)?];
        if index >= r.size {
            return Err(RegisterError::INVALID_INDEX.into());
        }
        let c = r.cell(index);
        Ok(c[c.len().saturating_sub(8)..]
            .iter()
            .fold(0u64, |a, b| (a << 8) | *b as u64))
    }

    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>> {
        let i = self.ctl();
        let size = i.state.ext.regs[i.register(register)?].size;
        (0..size).map(|x| self.register_read(register, x)).collect()
    }

    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()> {
        self.register_write_range(register, index, index, value)
    }

    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()> {
        let i = self.ctl_mut();
        let ri = i.register(register)?;
        let r = &mut i.state.ext.regs[ri];
        if start > end || end >= r.size {
            return Err(RegisterError::INVALID_INDEX.into());
        }
        let w = r.width;
        for x in start..=end {
            crate::expr::Value::Small(value as i128).store(w, false, false, r.cell_mut(x));
        }
        Ok(())
    }

    fn register_reset(&mut self, register: &str) -> RtResult<()> {
        let i = self.ctl_mut();
        let ri = i.register(register)?;
        i.state.ext.regs[ri].cells_mut().fill(0);
        Ok(())
    }

    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        let i = self.ctl_mut();
        let v = i.vset(vset)?;
        let value = i.vset_value(v, value)?;
        i.state.ext.vsets[v].insert(value);
        Ok(())
    }

    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        let i = self.ctl_mut();
        let v = i.vset(vset)?;
        let value = i.vset_value(v, value)?;
        i.state.ext.vsets[v].remove(&value);
        Ok(())
    }

    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>> {
        let i = self.ctl();
        let v = i.vset(vset)?;
        let mut out: Vec<Vec<u8>> = i.state.ext.vsets[v].iter().cloned().collect();
        out.sort();
        Ok(out)
    }

    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()> {
        let i = self.ctl_mut();
        let v = i.vset(vset)?;
        i.state.ext.vsets[v].clear();
        Ok(())
    }

    fn learning_ack(&mut self, list_id: i32, _buffer_id: i64, _sample_ids: &[i32]) -> RtResult<()> {
        self.learn_list_ok(list_id)
    }

    fn learning_ack_buffer(&mut self, list_id: i32, _buffer_id: i64) -> RtResult<()> {
        self.learn_list_ok(list_id)
    }

    fn learning_set_timeout(&mut self, list_id: i32, _timeout_ms: u32) -> RtResult<()> {
        self.learn_list_ok(list_id)
    }

    fn learning_set_buffer_size(&mut self, list_id: i32, _nb_samples: u32) -> RtResult<()> {
        self.learn_list_ok(list_id)
    }

    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        self.bc_flush();
        self.set_custom_crc(calc, "crc16_custom", 16, config)
    }

    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        self.bc_flush();
        self.set_custom_crc(calc, "crc32_custom", 32, config)
    }

    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()> {
        self.bc_flush();
        let i = self.ctl();
        let c = i
            .engine
            .prog
            .calculations
            .iter()
            .find(|c| c.name == calc)
            .ok_or(ToeplitzError::INVALID_CALCULATION_NAME)?;
        if c.algo != "toeplitz" {
            return Err(ToeplitzError::WRONG_TYPE_CALCULATION.into());
        }
        if key.is_empty() || !key.len().is_multiple_of(4) {
            return Err(ToeplitzError::INVALID_KEY.into());
        }
        let i = self.ctl_mut();
        if let Some(ci) = i
            .engine
            .prog
            .calculations
            .iter()
            .position(|c| c.name == calc)
        {
            i.engine_mut().calcs[ci].algo = Algo::Toeplitz(key.to_vec());
        }
        Ok(())
    }

    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()> {
        if self.ports.contains_key(&port) || self.ports.values().any(|(n, _)| n == iface_name) {
            return Err(DevMgrError::ERROR.into());
        }
        self.ports.insert(
            port,
            (iface_name.to_string(), pcap_path.map(str::to_string)),
        );
        Ok(())
    }

    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()> {
        self.ports
            .remove(&port)
            .map(|_| ())
            .ok_or(DevMgrError::ERROR.into())
    }

    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>> {
        Ok(self
            .ports
            .iter()
            .map(|(p, (n, _))| PortInfo {
                port: *p,
                iface_name: n.clone(),
                is_up: true,
                extra: Vec::new(),
            })
            .collect())
    }

    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32> {
        if self.pre.groups.len() >= 4096 && !self.pre.groups.contains_key(&mgid) {
            return Err(McError::TABLE_FULL.into());
        }
        Ok(self.pre.mgrp_create(mgid))
    }

    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()> {
        Ok(self.pre.mgrp_destroy(mgrp_handle)?)
    }

    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> {
        Ok(self.pre.node_create(rid, ports, lags)?)
    }

    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        Ok(self.pre.node_associate(mgrp_handle, node)?)
    }

    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        Ok(self.pre.node_dissociate(mgrp_handle, node)?)
    }

    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()> {
        Ok(self.pre.node_destroy(node)?)
    }

    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> {
        Ok(self.pre.node_update(node, ports, lags)?)
    }

    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()> {
        self.pre.set_lag_membership(lag, ports);
        Ok(())
    }

    fn mc_get_entries(&self) -> RtResult<String> {
        Ok(self.pre.dump_json())
    }

    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()> {
        if id > 32767 {
            return Err(MirroringError::SESSION_NOT_FOUND.into());
        }
        self.mirroring.insert(id, session);
        Ok(())
    }

    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()> {
        self.mirroring
            .remove(&id)
            .map(|_| ())
            .ok_or(MirroringError::SESSION_NOT_FOUND.into())
    }

    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession> {
        self.mirroring
            .get(&id)
            .copied()
            .ok_or(MirroringError::SESSION_NOT_FOUND.into())
    }

    fn set_egress_queue_depth(
        &mut self,
        _port: Option<Port>,
        _priority: Option<u32>,
        _depth_pkts: u32,
    ) -> RtResult<()> {
        // Deterministic mode runs each packet to completion: queues never fill.
        Ok(())
    }

    fn set_egress_queue_rate(
        &mut self,
        _port: Option<Port>,
        _priority: Option<u32>,
        _rate_pps: u64,
    ) -> RtResult<()> {
        Ok(())
    }

    fn get_time_elapsed_us(&self) -> u64 {
        self.now_us()
    }

    fn get_time_since_epoch_us(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_micros() as u64)
            .unwrap_or(0)
    }
}

impl Switch {
    fn learn_list_ok(&self, list_id: i32) -> RtResult<()> {
        if self
            .ctl()
            .engine
            .prog
            .learn_lists
            .iter()
            .any(|l| l.id == list_id as i64)
        {
            Ok(())
        } else {
            Err(LearnError::INVALID_LIST_ID.into())
        }
    }

    fn set_custom_crc(&mut self, calc: &str, want: &str, width: u32, c: CrcConfig) -> RtResult<()> {
        let i = self.ctl_mut();
        let Some(ci) = i
            .engine
            .prog
            .calculations
            .iter()
            .position(|x| x.name == calc)
        else {
            return Err(CrcError::INVALID_CALCULATION_NAME.into());
        };
        if i.engine.prog.calculations[ci].algo != want {
            return Err(CrcError::WRONG_TYPE_CALCULATION.into());
        }
        let mask = if width == 32 { u32::MAX } else { 0xffff };
        i.engine_mut().calcs[ci].algo = Algo::Crc {
            width,
            poly: (c.polynomial & mask) as u64,
            init: (c.initial_remainder & mask) as u64,
            xorout: (c.final_xor_value & mask) as u64,
            reflect: c.data_reflected,
        };
        Ok(())
    }
}

/// Match kinds of a table's key fields (for tools).
pub fn table_key_kinds(sw: &Switch, table: &str) -> Option<Vec<MatchKind>> {
    let i = sw.ctl();
    i.engine
        .table_by_name
        .get(table)
        .map(|t| i.engine.key_kinds(*t))
}
