//! Run-to-completion workers: one program on several threads, with control-plane updates
//! published to them without ever stalling a packet.
//!
//! Model (a left-right / operation-log scheme rather than copy-on-write snapshots):
//! * [`build`] makes `n + 1` replicas of one [`Switch`] from the same JSON: a [`Control`]
//!   replica that answers the control plane, and `n` [`Worker`]s, each owned by one thread
//!   that runs its packets to completion (parse → pipelines → deparse) without locks.
//! * A table update is applied to the control replica first (which validates it and gives
//!   the result, e.g. the entry handle); if it succeeds, the same operation is queued to every
//!   worker. A worker applies queued operations between batches ([`Worker::process_batch`]
//!   does it first), so a packet sees the tables either before or after an operation, never
//!   half of one; several changes made in one [`Control::update`] call are applied together.
//!   Replicas apply the same operations in the same order to the same initial state, so
//!   handles agree everywhere. An update costs O(1) per replica (no copy of a whole table),
//!   which is what makes 10k updates/s cheap; readers never wait for a writer.
//! * Flows are spread over workers by [`flow_hash`] (Ethernet/IPv4/IPv6 5-tuple): every packet
//!   of a flow goes to the same worker, which keeps the flow's order.
//! * Counters (indirect arrays and direct per-entry counters) are per worker and summed on
//!   read ([`Control::counter_read`], [`Control::mt_read_counter`]); writes put the value in
//!   worker 0 and zero elsewhere.
//! * Register arrays and indirect meters are *shared*: one bank behind a mutex. A worker holds
//!   it for the whole of each packet that runs on a program having registers or meters, so
//!   every action's accesses to a register array are atomic (BMv2 locks per action; this is
//!   stronger: per packet), and control-plane register reads/writes take the same lock.
//!   Control writes to the bank (registers, indirect meters' rates) are applied once, by the
//!   control replica, before the call returns; they are not published to the workers, which
//!   would re-apply them later over newer values.
//!   Programs without registers or meters never touch the lock. Direct meters are per worker
//!   (each worker meters its own share of the flows).
//! * [`Control`] implements [`Runtime`], so every control front end (the CLI command language,
//!   the Thrift server) drives the workers as it drives one switch: reads come from the control
//!   replica (counters summed over workers, registers and indirect meters from the shared
//!   bank), changes are validated there and published. A worker that blocks waiting for
//!   packets is woken by the callback given to [`Control::set_waker`], so it answers queries
//!   and applies updates while idle. Known differences from one switch: per-entry hit times
//!   (entry ageing) and `serialize_state`'s counters are the control replica's (it sees no
//!   packets); `load_new_config` is refused for programs with registers or indirect meters.
//! * The barrier ([`Control::set_barrier`], off by default; `tern run --workers` turns it on
//!   with the behaviour cache): an
//!   update returns only after every live worker has applied it, so once the control plane
//!   has its answer no worker can still replay a cached behaviour the change invalidated
//!   (each worker's cache is invalidated by the same operation, when the worker applies it).
//!   The time from publishing to the last worker's acknowledgement is kept
//!   ([`Control::barrier_stats`]: p50, p99, max).

use std::sync::mpsc;
use std::sync::Arc;

use crate::switch::{Switch, SwitchError, SwitchOptions};
use tern_runtime::{
    ActionEntry, CounterValue, CrcConfig, EntryHandle, GroupHandle, MatchParam, MemberHandle,
    MeterRate, MirroringSession, NodeHandle, OutputPacket, PacketPath, Port, PortInfo,
    ProfileGroup, ProfileMember, ResourceType, RtResult, Runtime, SwapError, SwitchInfo,
    TableEntry,
};

/// Called after a message is queued for worker `i`, to wake its thread if it blocks
/// elsewhere (see [`Control::set_waker`]).
pub type Waker = dyn Fn(usize) + Send + Sync;

/// A replicated control-plane operation (applied to the control replica, then to every
/// worker's replica).
pub type UpdateFn = dyn Fn(&mut Switch) + Send + Sync;

/// A query run once on one worker's replica (with the worker's number).
type QueryFn = dyn FnOnce(usize, &mut Switch) + Send;

enum Msg {
    /// An operation, and where to acknowledge it once applied (barrier on).
    Update(Arc<UpdateFn>, Option<mpsc::Sender<()>>),
    Query(Box<QueryFn>),
}

/// Barrier latencies: publish → every live worker applied, over the last
/// [`BARRIER_SAMPLES`] barriered updates (max over all of them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BarrierStats {
    /// Barriered updates so far.
    pub count: u64,
    /// Updates whose wait gave up after [`BARRIER_TIMEOUT`] (a worker thread that stopped
    /// polling without ending).
    pub timeouts: u64,
    pub p50_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

/// Latency samples kept for [`BarrierStats`]' percentiles.
pub const BARRIER_SAMPLES: usize = 4096;

/// How long an update waits for one worker's acknowledgement before giving up (and counting
/// a timeout): a worker whose thread neither polls nor ends.
pub const BARRIER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Debug, Default)]
struct Barrier {
    on: bool,
    count: u64,
    timeouts: u64,
    max_ns: u64,
    samples: Vec<u64>,
    next: usize,
}

impl Barrier {
    fn record(&mut self, ns: u64) {
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
        if self.samples.len() < BARRIER_SAMPLES {
            self.samples.push(ns);
        } else {
            self.samples[self.next] = ns;
            self.next = (self.next + 1) % BARRIER_SAMPLES;
        }
    }

    fn stats(&self) -> BarrierStats {
        let mut v = self.samples.clone();
        v.sort_unstable();
        let pct = |p: f64| -> u64 {
            if v.is_empty() {
                0
            } else {
                v[((v.len() - 1) as f64 * p).round() as usize]
            }
        };
        BarrierStats {
            count: self.count,
            timeouts: self.timeouts,
            p50_ns: pct(0.5),
            p99_ns: pct(0.99),
            max_ns: self.max_ns,
        }
    }
}

/// The control side: answers reads, validates and publishes updates.
pub struct Control {
    sw: Switch,
    txs: Vec<mpsc::Sender<Msg>>,
    published: u64,
    waker: Option<Box<Waker>>,
    opts: SwitchOptions,
    barrier: Barrier,
}

/// One worker's replica; owned by the thread that runs its packets.
pub struct Worker {
    /// Worker number (0-based), the value [`flow_hash`] `% n` selects.
    pub id: usize,
    sw: Switch,
    rx: mpsc::Receiver<Msg>,
    applied: u64,
}

/// Build a control replica and `n` workers for one program (`n` ≥ 1).
pub fn build(
    json: &str,
    opts: SwitchOptions,
    n: usize,
) -> Result<(Control, Vec<Worker>), SwitchError> {
    let mut sw = Switch::from_json(json, opts.clone())?;
    let bank = sw.has_shared_externs().then(|| sw.share_externs());
    let mut txs = Vec::new();
    let mut workers = Vec::new();
    for id in 0..n.max(1) {
        let mut w = Switch::from_json(json, opts.clone())?;
        if let Some(b) = &bank {
            w.join_shared_externs(b.clone());
        }
        let (tx, rx) = mpsc::channel();
        txs.push(tx);
        workers.push(Worker {
            id,
            sw: w,
            rx,
            applied: 0,
        });
    }
    Ok((
        Control {
            sw,
            txs,
            published: 0,
            barrier: Barrier {
                on: false,
                ..Barrier::default()
            },
            waker: None,
            opts,
        },
        workers,
    ))
}

/// The worker a frame belongs to: a hash of its flow (IPv4/IPv6 addresses, protocol and, for
/// TCP/UDP/SCTP, ports; the Ethernet addresses and type for other frames; one VLAN tag is
/// looked through). Every packet of a flow gets the same value.
pub fn flow_hash(frame: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut mix = |b: &[u8]| {
        for &x in b {
            h = (h ^ x as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    let mut l3 = 14;
    let mut ty = frame
        .get(12..14)
        .map_or(0, |t| u16::from_be_bytes([t[0], t[1]]));
    if ty == 0x8100 || ty == 0x88a8 {
        ty = frame
            .get(16..18)
            .map_or(0, |t| u16::from_be_bytes([t[0], t[1]]));
        l3 = 18;
    }
    let ports = |proto: u8, off: usize| -> Option<&[u8]> {
        matches!(proto, 6 | 17 | 132)
            .then(|| frame.get(off..off + 4))
            .flatten()
    };
    match ty {
        0x0800 if frame.len() >= l3 + 20 => {
            let ip = &frame[l3..];
            let ihl = (ip[0] & 15) as usize * 4;
            mix(&ip[12..20]);
            mix(&[ip[9]]);
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            if !frag {
                if let Some(p) = ports(ip[9], l3 + ihl.max(20)) {
                    mix(p);
                }
            }
        }
        0x86dd if frame.len() >= l3 + 40 => {
            let ip = &frame[l3..];
            mix(&ip[8..40]);
            mix(&[ip[6]]);
            if let Some(p) = ports(ip[6], l3 + 40) {
                mix(p);
            }
        }
        _ => mix(&frame[..frame.len().min(14)]),
    }
    // Final avalanche so that `% n` uses every bit.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h
}

impl Control {
    /// The control replica (for reads: entries, default actions, program, …). Its counters are
    /// not the packet counters; use [`Control::counter_read`] / [`Control::mt_read_counter`].
    pub fn switch(&self) -> &Switch {
        &self.sw
    }

    /// The control replica, mutable: for running reference packets on it. Changes made here
    /// directly are *not* published to the workers (use [`Control::update`]).
    pub fn switch_mut(&mut self) -> &mut Switch {
        &mut self.sw
    }

    /// Workers built with this control.
    pub fn workers(&self) -> usize {
        self.txs.len()
    }

    /// Call `wake(i)` after queueing an update or query for worker `i`. Needed when a worker's
    /// thread can block on something else (e.g. a channel of packets) between batches: the
    /// callback makes it return to [`Worker::poll`]. Without it, queries wait until each
    /// worker's next batch.
    pub fn set_waker(&mut self, wake: impl Fn(usize) + Send + Sync + 'static) {
        self.waker = Some(Box::new(wake));
    }

    fn send(&self, i: usize, m: Msg) -> bool {
        let ok = self.txs[i].send(m).is_ok();
        if ok {
            if let Some(w) = &self.waker {
                w(i);
            }
        }
        ok
    }

    /// Operations published so far.
    pub fn published(&self) -> u64 {
        self.published
    }

    /// Apply `f` to the control replica; if it returns `Ok`, publish it to every worker (which
    /// apply it between two batches, all changes made by `f` at once). `f` must be
    /// deterministic: given the same replica state it must make the same changes (every
    /// [`Runtime`] table, profile, multicast and register operation is). Do not write counters
    /// through it (they are summed over workers): use [`Control::counter_write`].
    pub fn update<T>(
        &mut self,
        f: impl Fn(&mut Switch) -> RtResult<T> + Send + Sync + 'static,
    ) -> RtResult<T> {
        let f = Arc::new(f);
        let r = self.sw.with_shared_externs(|sw| f(sw))?;
        let g = f.clone();
        let op: Arc<UpdateFn> = Arc::new(move |sw: &mut Switch| {
            let _ = g(sw);
        });
        let t0 = std::time::Instant::now();
        let (ack_tx, ack_rx) = mpsc::channel();
        let mut waiting = 0;
        for i in 0..self.txs.len() {
            // A worker whose thread has ended no longer needs updates.
            let ack = self.barrier.on.then(|| ack_tx.clone());
            if self.send(i, Msg::Update(op.clone(), ack)) {
                waiting += 1;
            }
        }
        drop(ack_tx);
        self.published += 1;
        if self.barrier.on {
            // Every live worker acknowledges once it has applied the operation (and so
            // invalidated its cache); a worker dropped meanwhile drops its sender, which
            // ends the wait early with an error.
            let mut timed_out = false;
            for _ in 0..waiting {
                match ack_rx.recv_timeout(BARRIER_TIMEOUT) {
                    Ok(()) => {}
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        timed_out = true;
                        break;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            if timed_out {
                self.barrier.timeouts += 1;
            }
            self.barrier.record(t0.elapsed().as_nanos() as u64);
        }
        Ok(r)
    }

    /// Make each update wait until every live worker has applied it (`true`) or return once
    /// it is queued (`false`, the default: callers that drive the workers from the thread
    /// that publishes, or publish before starting them, would wait). With the
    /// barrier on, the workers' threads must keep polling ([`Worker::poll`], or a waker
    /// from [`Control::set_waker`] when they block elsewhere): an update waits for each at
    /// most [`BARRIER_TIMEOUT`].
    pub fn set_barrier(&mut self, on: bool) {
        self.barrier.on = on;
    }

    /// Barrier latencies so far.
    pub fn barrier_stats(&self) -> BarrierStats {
        self.barrier.stats()
    }

    /// A change to the shared register/meter bank alone, applied once, here, under the bank's
    /// lock, and not published. Published, each worker would apply it again to the same bank
    /// whenever it next polls, and a worker that polls late would overwrite what was written
    /// since (by packets, or by a later control write) with this older value.
    fn update_shared<T>(&mut self, f: impl FnOnce(&mut Switch) -> RtResult<T>) -> RtResult<T> {
        self.sw.with_shared_externs(f)
    }

    /// Whether `meter` is an indirect meter array (kept in the shared bank); direct meters
    /// live in each worker's table entries.
    fn is_shared_meter(&self, meter: &str) -> bool {
        self.sw
            .program()
            .meter_arrays
            .iter()
            .any(|m| m.name == meter && !m.is_direct)
    }

    /// Run `f` on every worker's replica (after the updates published before it) and collect
    /// the results in worker order (`f` gets the worker number). Blocks until every worker has run it, i.e. until each
    /// worker's thread calls [`Worker::poll`] or [`Worker::process_batch`]; a worker whose
    /// thread has ended (or dropped its [`Worker`]) is skipped.
    pub fn query<T: Send + 'static>(
        &self,
        f: impl Fn(usize, &mut Switch) -> T + Send + Sync + 'static,
    ) -> Vec<T> {
        let f = Arc::new(f);
        let mut rxs = Vec::new();
        for i in 0..self.txs.len() {
            let (rtx, rrx) = mpsc::channel();
            let f = f.clone();
            let sent = self.send(
                i,
                Msg::Query(Box::new(move |id: usize, sw: &mut Switch| {
                    let _ = rtx.send(f(id, sw));
                })),
            );
            if sent {
                rxs.push(rrx);
            }
        }
        rxs.into_iter().filter_map(|r| r.recv().ok()).collect()
    }

    /// An indirect counter, summed over workers.
    pub fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        self.sw.counter_read(counter, index)?;
        let (c, i) = (counter.to_string(), index);
        sum(self.query(move |_, sw| sw.counter_read(&c, i)))
    }

    /// A direct (per-entry) counter, summed over workers.
    pub fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        self.sw.mt_read_counter(table, handle)?;
        let t = table.to_string();
        sum(self.query(move |_, sw| sw.mt_read_counter(&t, handle)))
    }

    /// Set an indirect counter: worker 0 gets `value`, the others zero, so the sum is `value`.
    pub fn counter_write(
        &mut self,
        counter: &str,
        index: u32,
        value: CounterValue,
    ) -> RtResult<()> {
        self.sw.counter_write(counter, index, value)?;
        let c = counter.to_string();
        self.write_first(value, move |sw, v| sw.counter_write(&c, index, v))
    }

    /// Set a direct counter: worker 0 gets `value`, the others zero.
    pub fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        self.sw.mt_write_counter(table, handle, value)?;
        let t = table.to_string();
        self.write_first(value, move |sw, v| sw.mt_write_counter(&t, handle, v))
    }

    /// Run `write` on every replica, with `value` on worker 0 and zero on the others (so the
    /// sum over workers is `value`); the first error, if any.
    fn write_first(
        &self,
        value: CounterValue,
        write: impl Fn(&mut Switch, CounterValue) -> RtResult<()> + Send + Sync + 'static,
    ) -> RtResult<()> {
        self.query(move |id, sw| {
            let v = if id == 0 {
                value
            } else {
                CounterValue::default()
            };
            write(sw, v)
        })
        .into_iter()
        .collect()
    }

    /// A register cell (registers are shared by all replicas), read through the control
    /// replica under the bank's lock (works when no worker thread is running, unlike
    /// [`Runtime::register_read`], which reads through worker 0).
    pub fn register_read(&mut self, register: &str, index: u32) -> RtResult<u64> {
        self.sw
            .with_shared_externs(|sw| sw.register_read(register, index))
    }

    /// Run `f` on worker `i` only (after the updates published before it); `None` if that
    /// worker's thread has ended.
    fn query_one<T: Send + 'static>(
        &self,
        i: usize,
        f: impl FnOnce(&mut Switch) -> T + Send + 'static,
    ) -> Option<T> {
        let (rtx, rrx) = mpsc::channel();
        let sent = self.send(
            i,
            Msg::Query(Box::new(move |_, sw: &mut Switch| {
                let _ = rtx.send(f(sw));
            })),
        );
        if sent {
            rrx.recv().ok()
        } else {
            None
        }
    }

    /// A read of the shared register/meter bank, run by worker 0 (which holds the bank's lock
    /// for it): the control replica cannot take the lock from `&self`. `gone` is the error
    /// when worker 0's thread has ended.
    fn shared_read<T: Send + 'static>(
        &self,
        gone: tern_runtime::RuntimeError,
        f: impl FnOnce(&mut Switch) -> RtResult<T> + Send + 'static,
    ) -> RtResult<T> {
        self.query_one(0, f).unwrap_or(Err(gone))
    }
}

/// Publish a change: `$call` runs on the control replica, then on every worker (arguments are
/// copied into the operation first: `let` bindings before the `=>`).
macro_rules! publish {
    ($self:ident, $($v:ident = $e:expr),* => |$sw:ident| $call:expr) => {{
        $(let $v = $e;)*
        $self.update(move |$sw: &mut Switch| $call)
    }};
}

/// The whole control API over the replicas: see the module documentation.
impl Runtime for Control {
    fn get_config(&self) -> String {
        self.sw.get_config()
    }
    fn get_config_md5(&self) -> [u8; 16] {
        self.sw.get_config_md5()
    }
    fn load_new_config(&mut self, json: &str) -> RtResult<()> {
        // The shared register/meter bank belongs to the running program: a swapped-in program
        // would run with the old program's bank, so such swaps are refused.
        let new_shares = Switch::from_json(json, self.opts.clone())
            .map(|s| s.has_shared_externs())
            .unwrap_or(false);
        if self.sw.has_shared_externs() || new_shares {
            return Err(SwapError::CONFIG_SWAP_DISABLED.into());
        }
        publish!(self, j = json.to_string() => |sw| sw.load_new_config(&j))
    }
    fn swap_configs(&mut self) -> RtResult<()> {
        publish!(self, => |sw| sw.swap_configs())
    }
    fn reset_state(&mut self) {
        let _ = publish!(self, => |sw| {
            sw.reset_state();
            Ok(())
        });
    }
    fn serialize_state(&self) -> String {
        self.sw.serialize_state()
    }
    fn switch_info(&self) -> SwitchInfo {
        self.sw.switch_info()
    }
    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32> {
        self.sw.get_id_from_name(kind, name)
    }

    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64> {
        self.sw.mt_get_num_entries(table)
    }
    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_clear_entries(&t, reset_default_entry))
    }
    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        publish!(self, t = table.to_string(), k = key.to_vec(), a = action.to_string(),
            d = data.to_vec() => |sw| sw.mt_add_entry(&t, &k, &a, &d, priority))
    }
    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        publish!(self, t = table.to_string(), a = action.to_string(), d = data.to_vec()
            => |sw| sw.mt_set_default_action(&t, &a, &d))
    }
    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_reset_default_entry(&t))
    }
    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_delete_entry(&t, handle))
    }
    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        publish!(self, t = table.to_string(), a = action.to_string(), d = data.to_vec()
            => |sw| sw.mt_modify_entry(&t, handle, &a, &d))
    }
    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_set_entry_ttl(&t, handle, timeout_ms))
    }
    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        publish!(self, t = table.to_string(), k = key.to_vec()
            => |sw| sw.mt_indirect_add_entry(&t, &k, member, priority))
    }
    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_indirect_modify_entry(&t, handle, member))
    }
    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_indirect_delete_entry(&t, handle))
    }
    fn mt_indirect_set_default_member(
        &mut self,
        table: &str,
        member: MemberHandle,
    ) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_indirect_set_default_member(&t, member))
    }
    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_indirect_reset_default_entry(&t))
    }
    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        publish!(self, t = table.to_string(), k = key.to_vec()
            => |sw| sw.mt_indirect_ws_add_entry(&t, &k, group, priority))
    }
    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_indirect_ws_modify_entry(&t, handle, group))
    }
    fn mt_indirect_ws_set_default_group(
        &mut self,
        table: &str,
        group: GroupHandle,
    ) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_indirect_ws_set_default_group(&t, group))
    }
    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        Control::mt_read_counter(self, table, handle)
    }
    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()> {
        publish!(self, t = table.to_string() => |sw| sw.mt_reset_counters(&t))
    }
    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        Control::mt_write_counter(self, table, handle, value)
    }
    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()> {
        publish!(self, t = table.to_string(), r = rates.to_vec()
            => |sw| sw.mt_set_meter_rates(&t, handle, &r))
    }
    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> {
        self.sw.mt_get_meter_rates(table, handle)
    }
    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>> {
        self.sw.mt_get_entries(table)
    }
    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry> {
        self.sw.mt_get_entry(table, handle)
    }
    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry> {
        self.sw.mt_get_default_entry(table)
    }
    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry> {
        self.sw.mt_get_entry_from_key(table, key, priority)
    }

    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle> {
        publish!(self, p = prof.to_string(), a = action.to_string(), d = data.to_vec()
            => |sw| sw.act_prof_add_member(&p, &a, &d))
    }
    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()> {
        publish!(self, p = prof.to_string() => |sw| sw.act_prof_delete_member(&p, member))
    }
    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        publish!(self, p = prof.to_string(), a = action.to_string(), d = data.to_vec()
            => |sw| sw.act_prof_modify_member(&p, member, &a, &d))
    }
    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle> {
        publish!(self, p = prof.to_string() => |sw| sw.act_prof_create_group(&p))
    }
    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()> {
        publish!(self, p = prof.to_string() => |sw| sw.act_prof_delete_group(&p, group))
    }
    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        publish!(self, p = prof.to_string() => |sw| sw.act_prof_add_member_to_group(&p, member, group))
    }
    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        publish!(self, p = prof.to_string()
            => |sw| sw.act_prof_remove_member_from_group(&p, member, group))
    }
    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>> {
        self.sw.act_prof_get_members(prof)
    }
    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember> {
        self.sw.act_prof_get_member(prof, member)
    }
    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>> {
        self.sw.act_prof_get_groups(prof)
    }
    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> {
        self.sw.act_prof_get_group(prof, group)
    }

    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        Control::counter_read(self, counter, index)
    }
    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()> {
        publish!(self, c = counter.to_string() => |sw| sw.counter_reset_all(&c))
    }
    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()> {
        Control::counter_write(self, counter, index, value)
    }
    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()> {
        if self.is_shared_meter(meter) {
            return self.update_shared(|sw| sw.meter_array_set_rates(meter, rates));
        }
        publish!(self, m = meter.to_string(), r = rates.to_vec()
            => |sw| sw.meter_array_set_rates(&m, &r))
    }
    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> {
        if self.is_shared_meter(meter) {
            return self.update_shared(|sw| sw.meter_set_rates(meter, index, rates));
        }
        publish!(self, m = meter.to_string(), r = rates.to_vec()
            => |sw| sw.meter_set_rates(&m, index, &r))
    }
    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>> {
        // Validate on the control replica first (names, indexes), then read the shared bank.
        self.sw.meter_get_rates(meter, index)?;
        let m = meter.to_string();
        self.shared_read(tern_runtime::MeterError::ERROR.into(), move |sw| {
            sw.meter_get_rates(&m, index)
        })
    }
    fn register_read(&self, register: &str, index: u32) -> RtResult<u64> {
        let r = register.to_string();
        self.shared_read(tern_runtime::RegisterError::ERROR.into(), move |sw| {
            sw.register_read(&r, index)
        })
    }
    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>> {
        let r = register.to_string();
        self.shared_read(tern_runtime::RegisterError::ERROR.into(), move |sw| {
            sw.register_read_all(&r)
        })
    }
    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()> {
        self.update_shared(|sw| sw.register_write(register, index, value))
    }
    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()> {
        self.update_shared(|sw| sw.register_write_range(register, start, end, value))
    }
    fn register_reset(&mut self, register: &str) -> RtResult<()> {
        self.update_shared(|sw| sw.register_reset(register))
    }

    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        publish!(self, n = vset.to_string(), v = value.to_vec() => |sw| sw.parse_vset_add(&n, &v))
    }
    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        publish!(self, n = vset.to_string(), v = value.to_vec()
            => |sw| sw.parse_vset_remove(&n, &v))
    }
    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>> {
        self.sw.parse_vset_get(vset)
    }
    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()> {
        publish!(self, n = vset.to_string() => |sw| sw.parse_vset_clear(&n))
    }

    fn learning_ack(&mut self, list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()> {
        publish!(self, ids = sample_ids.to_vec() => |sw| sw.learning_ack(list_id, buffer_id, &ids))
    }
    fn learning_ack_buffer(&mut self, list_id: i32, buffer_id: i64) -> RtResult<()> {
        publish!(self, => |sw| sw.learning_ack_buffer(list_id, buffer_id))
    }
    fn learning_set_timeout(&mut self, list_id: i32, timeout_ms: u32) -> RtResult<()> {
        publish!(self, => |sw| sw.learning_set_timeout(list_id, timeout_ms))
    }
    fn learning_set_buffer_size(&mut self, list_id: i32, nb_samples: u32) -> RtResult<()> {
        publish!(self, => |sw| sw.learning_set_buffer_size(list_id, nb_samples))
    }

    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        publish!(self, c = calc.to_string(), k = config
            => |sw| sw.set_crc16_custom_parameters(&c, k))
    }
    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        publish!(self, c = calc.to_string(), k = config
            => |sw| sw.set_crc32_custom_parameters(&c, k))
    }
    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()> {
        publish!(self, c = calc.to_string(), k = key.to_vec()
            => |sw| sw.set_toeplitz_hash_key(&c, &k))
    }

    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()> {
        publish!(self, i = iface_name.to_string(), p = pcap_path.map(str::to_string)
            => |sw| sw.dev_mgr_add_port(&i, port, p.as_deref()))
    }
    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()> {
        publish!(self, => |sw| sw.dev_mgr_remove_port(port))
    }
    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>> {
        self.sw.dev_mgr_show_ports()
    }

    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32> {
        publish!(self, => |sw| sw.mc_mgrp_create(mgid))
    }
    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()> {
        publish!(self, => |sw| sw.mc_mgrp_destroy(mgrp_handle))
    }
    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> {
        publish!(self, p = ports.to_vec(), l = lags.to_vec() => |sw| sw.mc_node_create(rid, &p, &l))
    }
    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        publish!(self, => |sw| sw.mc_node_associate(mgrp_handle, node))
    }
    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        publish!(self, => |sw| sw.mc_node_dissociate(mgrp_handle, node))
    }
    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()> {
        publish!(self, => |sw| sw.mc_node_destroy(node))
    }
    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> {
        publish!(self, p = ports.to_vec(), l = lags.to_vec() => |sw| sw.mc_node_update(node, &p, &l))
    }
    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()> {
        publish!(self, p = ports.to_vec() => |sw| sw.mc_set_lag_membership(lag, &p))
    }
    fn mc_get_entries(&self) -> RtResult<String> {
        self.sw.mc_get_entries()
    }

    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()> {
        publish!(self, s = session => |sw| sw.mirroring_session_add(id, s))
    }
    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()> {
        publish!(self, => |sw| sw.mirroring_session_delete(id))
    }
    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession> {
        self.sw.mirroring_session_get(id)
    }
    fn set_egress_queue_depth(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        depth_pkts: u32,
    ) -> RtResult<()> {
        publish!(self, => |sw| sw.set_egress_queue_depth(port, priority, depth_pkts))
    }
    fn set_egress_queue_rate(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        rate_pps: u64,
    ) -> RtResult<()> {
        publish!(self, => |sw| sw.set_egress_queue_rate(port, priority, rate_pps))
    }
    fn get_time_elapsed_us(&self) -> u64 {
        self.sw.get_time_elapsed_us()
    }
    fn get_time_since_epoch_us(&self) -> u64 {
        self.sw.get_time_since_epoch_us()
    }
}

fn sum(vals: Vec<RtResult<CounterValue>>) -> RtResult<CounterValue> {
    let mut total = CounterValue::default();
    for v in vals {
        let v = v?;
        total.packets += v.packets;
        total.bytes += v.bytes;
    }
    Ok(total)
}

impl Worker {
    /// Apply the operations published since the last call (and answer queries); returns how
    /// many table updates were applied.
    pub fn poll(&mut self) -> u64 {
        let mut n = 0;
        while let Ok(m) = self.rx.try_recv() {
            match m {
                Msg::Update(f, ack) => {
                    self.sw.with_shared_externs(|sw| f(sw));
                    n += 1;
                    if let Some(a) = ack {
                        let _ = a.send(());
                    }
                }
                Msg::Query(f) => {
                    let id = self.id;
                    self.sw.with_shared_externs(|sw| f(id, sw))
                }
            }
        }
        self.applied += n;
        n
    }

    /// Updates applied by this worker so far.
    pub fn applied(&self) -> u64 {
        self.applied
    }

    /// Apply pending updates, then run a batch to completion ([`Switch::process_batch`]).
    pub fn process_batch(&mut self, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        self.poll();
        self.sw.process_batch(pkts, out);
    }

    /// Drop this replica's pending digests ([`Switch::discard_digests`]).
    pub fn discard_digests(&mut self) {
        self.sw.discard_digests();
    }

    /// Apply pending updates, then run one packet.
    pub fn process_packet(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        self.poll();
        self.sw.process_packet(port, data, out);
    }

    /// Give transmitted frames' buffers back ([`Switch::recycle_outputs`]).
    pub fn recycle_outputs(&mut self, out: &mut Vec<OutputPacket>) {
        self.sw.recycle_outputs(out);
    }

    /// This worker's behaviour-cache counters (`None` when the cache is off).
    pub fn bcache_stats(&self) -> Option<crate::bcache::Stats> {
        self.sw.bcache_stats()
    }

    /// This worker's replica (its counters are this worker's share).
    pub fn switch_mut(&mut self) -> &mut Switch {
        &mut self.sw
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send<T: Send>() {}

    /// Workers move to their threads; the control may live on another.
    #[test]
    fn replicas_are_send() {
        assert_send::<Worker>();
        assert_send::<Control>();
    }

    fn udp(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&src);
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f
    }

    /// The flow hash reads the 5-tuple only: same flow, same hash whatever the payload or
    /// MACs; a different port or address changes it; flows spread over workers.
    #[test]
    fn flow_hash_follows_the_five_tuple() {
        let a = udp([10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000);
        let mut b = a.clone();
        b[0] = 0xaa;
        b[50] = 7;
        assert_eq!(flow_hash(&a), flow_hash(&b));
        assert_ne!(
            flow_hash(&a),
            flow_hash(&udp([10, 0, 0, 1], [10, 0, 0, 2], 1001, 2000))
        );
        assert_ne!(
            flow_hash(&a),
            flow_hash(&udp([10, 0, 0, 3], [10, 0, 0, 2], 1000, 2000))
        );
        let mut per = [0u32; 4];
        for k in 0..4000u16 {
            per[(flow_hash(&udp([10, 0, 0, 1], [10, 0, 0, 2], k, 53)) % 4) as usize] += 1;
        }
        assert!(per.iter().all(|n| (800..1200).contains(n)), "{per:?}");
        // Short and non-IP frames do not panic.
        flow_hash(&[]);
        flow_hash(&[0x08, 0, 0x45]);
        let mut v = a.clone();
        v.truncate(20);
        flow_hash(&v);
    }
}
