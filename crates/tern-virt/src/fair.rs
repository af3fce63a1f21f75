//! Fair sharing of packet processing between devices: a deficit-round-robin scheduler
//! ([`FairScheduler`]) in front of a [`VirtSwitch`]. Arriving packets are classified into one
//! bounded queue per device (a full queue drops that device's packet, counted); each round
//! gives every backlogged device a quantum of *work* to spend, so a tenant that floods the
//! switch fills and overflows only its own queue and cannot take another device's share. A
//! packet is classified once, on arrival, and runs on that device's virtual port when it is
//! served.
//!
//! **Charged by counted work** ([`Cost::Work`], the workers' default): a device is charged
//! what its packets *did* — the pipeline passes they ran (inputs, resubmits, recirculations,
//! clones, multicast replicas: `tern_dataplane::Switch::passes`) plus one unit per 64 parser
//! states a packet entered (`VirtSwitch::device_work`: a parser loop stopped at the tenant
//! quota of 1,000 states costs its device 15 more), at least one per packet —
//! priced in nanoseconds per pass by the device's own calibration ([`Price`]: the lowest
//! nanoseconds per pass any of its chunks took, so it only falls towards what the device's
//! program costs undisturbed). What another device does to the caches or to the thread's time
//! slice does not change what a device is charged. The clock stays as a guard ([`GUARD`]): a
//! device whose chunks keep taking far longer than their counted passes at its calibration
//! (64×; a parse is counted in whole units of 64 states, the rest is not) is charged their
//! measured time instead. A chunk or control job in which the device panicked is charged its
//! measured time whatever its share (`Spent::Faulted`): unwinding is no counted pass.
//! [`Cost::Nanos`] charges the measured time of every chunk (h-iso's
//! model: it bills a device for the attacker's cache pollution and for the preemption of
//! the thread); [`Cost::Bytes`] charges frame bytes before the packet runs (classic DRR).
//! The workers stage a packet per device (`FairScheduler::stage`) until the device takes
//! its next dispatch.
//! The charge comes after the work (it cannot be known before): a device whose credit is
//! used up goes into debt and sits out rounds until the quanta of later rounds have paid it
//! back, so over time it gets its quantum per round and no more, whatever one of its packets
//! costs.
//!
//! **Precedence for a device under its share**: inside a round the next chunk always goes to
//! the backlogged device (with credit left) that has used the *least* work in this round, and
//! a chunk is at most a quarter of the quantum (at least one packet, at most [`MAX_CHUNK`]).
//! Between two chunks the caller may hand in packets that arrived meanwhile (the workers
//! look at their inbox), and a device that had none at the start of the round gets its
//! quantum on arrival. So a victim's packet that arrives while an attacker is running waits
//! for at most one attacker chunk (a quarter quantum plus one packet), not for the
//! attacker's whole quantum or the rest of the round. [`FairScheduler::run_round_with`] is
//! the scheduler with the work done and measured by the caller (what the tests count with).

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use tern_runtime::{OutputPacket, Port};

use crate::{DeviceId, VirtSwitch};

/// Packets a device runs in one call at most (its chunk is cut further by its credit).
pub const MAX_CHUNK: usize = 32;

/// What a device is charged for the packets it runs (the unit of the quantum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// Counted work: the pipeline passes of a chunk priced at the device's calibrated
    /// nanoseconds per pass ([`Price`]), measured time only as a guard. Quantum in ns.
    Work,
    /// Nanoseconds of the device's processing as measured, one clock reading per chunk.
    Nanos,
    /// Frame bytes, charged before the packet runs (classic DRR: blind to passes, copies and
    /// parser loops).
    Bytes,
}

/// Per-device counters of the scheduler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FairStats {
    /// Packets queued for the device.
    pub queued: u64,
    /// Packets dropped because the device's queue was full.
    pub overflow: u64,
    /// Packets handed to the device.
    pub served: u64,
    /// Work charged to the device (in the scheduler's [`Cost`] unit; ns for `Work`).
    pub work: u64,
    /// Work units counted ([`Cost::Work`]: pipeline passes, at least one per packet).
    pub units: u64,
    /// Chunks charged by the guard (measured time far above the calibration).
    pub guarded: u64,
    /// Rounds the device sat out with packets waiting, paying back a debt.
    pub skipped: u64,
    /// Control jobs and steps run ([`FairScheduler::enqueue_job`],
    /// [`FairScheduler::enqueue_steps`]).
    pub jobs: u64,
    /// Their work counted ([`Cost::Work`]: entries touched, at least one per job or step).
    pub control_units: u64,
    /// Of those, refused writes (priced apart, [`ControlPrice`]).
    pub control_refused: u64,
    /// Times the device's calibration started again because its program was replaced.
    pub recalibrated: u64,
    /// Control jobs and steps that panicked (each quarantined the device; a batch's later
    /// steps were dropped).
    pub job_panics: u64,
    /// Chunks and control jobs in which the device panicked, charged their measured time
    /// ([`Cost::Work`]; `Spent::Faulted` inside the scheduler).
    pub faulted: u64,
}

/// A stage of a packet's way through a worker's scheduler ([`StageTrace`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The worker took it from its inbox and staged it ([`FairScheduler::stage`]).
    Staged = 0,
    /// Its dispatch was released into the device's queue.
    Released = 1,
    /// The chunk it ran in ended.
    Ran = 2,
}

/// Where one device's packets wait inside the workers: for the traced device, the time
/// (ns since `base`) each of its packets was staged, released into its queue, and ran (the
/// end of its chunk), by the packet's ordinal (the n-th packet of the device handed to the
/// workers since the trace was set: a device's packets keep their order through every
/// stage). Only the traced device's packets read the clock (one reading per stage and
/// batch of them); the others cost one comparison. The ordinals hold while none of the
/// device's packets overflows its queue (an overflowed packet never reaches `Released`;
/// [`StageTrace::overflowed`] says whether one did).
pub struct StageTrace {
    device: DeviceId,
    base: Instant,
    stamps: [Vec<AtomicU64>; 3],
    next: [AtomicU64; 3],
    overflow: AtomicU64,
}

impl StageTrace {
    /// A trace of device `device`'s next `packets` packets, times measured from `base`.
    pub fn new(device: DeviceId, base: Instant, packets: usize) -> Arc<StageTrace> {
        let col = || (0..packets).map(|_| AtomicU64::new(u64::MAX)).collect();
        Arc::new(StageTrace {
            device,
            base,
            stamps: [col(), col(), col()],
            next: Default::default(),
            overflow: AtomicU64::new(0),
        })
    }

    /// The traced device.
    pub fn device(&self) -> DeviceId {
        self.device
    }

    /// The next `n` packets of the device reached `stage` now.
    fn mark(&self, stage: Stage, n: usize) {
        let ns = self.base.elapsed().as_nanos() as u64;
        let first = self.next[stage as usize].fetch_add(n as u64, Ordering::Relaxed) as usize;
        let col = &self.stamps[stage as usize];
        for s in col.iter().skip(first).take(n) {
            s.store(ns, Ordering::Relaxed);
        }
    }

    /// When packet `ordinal` reached `stage` (ns since `base`), if it did and was traced.
    /// Read after the packet's output came out (the worker's hand-over of its outputs
    /// orders the stamps before).
    pub fn at(&self, stage: Stage, ordinal: usize) -> Option<u64> {
        let v = self.stamps[stage as usize]
            .get(ordinal)?
            .load(Ordering::Relaxed);
        (v != u64::MAX).then_some(v)
    }

    /// Packets of the device that reached `stage` so far.
    pub fn count(&self, stage: Stage) -> u64 {
        self.next[stage as usize].load(Ordering::Relaxed)
    }

    /// Whether a packet of the device overflowed its queue (the ordinals of `Released` and
    /// `Ran` no longer match those of `Staged` after it).
    pub fn overflowed(&self) -> bool {
        self.overflow.load(Ordering::Relaxed) > 0
    }
}

/// Control work queued for a device ([`FairScheduler::enqueue_job`]).
pub type DeviceJob = Box<dyn FnOnce(&mut VirtSwitch) + Send>;

/// A batch of control work cut into steps ([`FairScheduler::enqueue_steps`]): called with
/// step 0, 1, ... in order, one step per turn of the device.
pub type StepJob = Box<dyn FnMut(&mut VirtSwitch, usize) + Send>;

/// Run `f`, a control job or step of device `id`, under its own panic boundary: a panic
/// (a tenant's call tripping an assertion in its device's state) quarantines the device, as
/// a panic in its packets does, and returns false; the worker and its other devices go on.
pub(crate) fn guarded(vs: &mut VirtSwitch, id: DeviceId, f: impl FnOnce(&mut VirtSwitch)) -> bool {
    match catch_unwind(AssertUnwindSafe(|| f(vs))) {
        Ok(()) => true,
        Err(e) => {
            vs.quarantine_after_job_panic(id, &panic_text(&*e));
            false
        }
    }
}

/// The message of a caught panic, by reference (the payload may be resumed afterwards).
pub(crate) fn panic_text(e: &(dyn std::any::Any + Send)) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// A device's queued control work: one job, or a batch run a step at a time.
pub(crate) enum Job {
    Once(DeviceJob),
    Steps { f: StepJob, next: usize, end: usize },
}

impl Job {
    /// The turns it still takes: 1 for a job, the steps left of a batch.
    fn left(&self) -> usize {
        match self {
            Job::Once(_) => 1,
            Job::Steps { next, end, .. } => end.saturating_sub(*next),
        }
    }
}

/// The measured time above the calibration from which a chunk counts as far above it
/// ([`Price::charge`]): 64×, above what another tenant's cache pollution does to a small
/// chunk of a device (a debug build on a loaded machine showed victim chunks past 8×), far
/// below what a parser loop (100,000 states for 2 counted passes) or a panic's unwinding
/// costs per counted pass.
pub const GUARD: f64 = 64.0;

/// The share of a device's recent chunks that must be far above its calibration before
/// those chunks are charged their measured time: 1 in 8 (a sustained pattern, not the
/// occasional preempted chunk).
pub const GUARD_SHARE: f64 = 0.125;

/// How [`Cost::Work`] prices one device's counted work in nanoseconds.
///
/// * **Calibration**: the lowest nanoseconds per unit any chunk of the device took (the first
///   chunk sets it; it only falls). A device's undisturbed chunks set it, so neither another
///   tenant's cache pollution nor the thread's preemption raise it; it is the device's
///   program's own cost (a parser that loops 100,000 times per packet calibrates at that).
///   It starts again when the device's program is replaced ([`FairScheduler::recalibrate`]).
/// * **Charge**: units × calibration.
/// * **Guard**: a chunk whose measured time is more than [`GUARD`] (64) × its counted charge is
///   *far above*; the share of far-above chunks is followed as a moving average (weight 1/32
///   a chunk). While that share is [`GUARD_SHARE`] (1 in 8) or more, each far-above chunk is
///   charged its measured time (the larger): a device that calibrated on cheap packets and
///   then sends dear ones (a parser loop) pays their time from its fifth such chunk on, one
///   that mixes them pays for the dear ones. A chunk stretched now and then by a preemption
///   (1 in 48, at any factor) never trips it. The limit: a device keeping its far-above
///   chunks under 1 in 8 has them charged at its counted work.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Price {
    /// Calibrated ns per unit (0: not calibrated yet).
    cal: f64,
    /// Moving share of chunks far above the calibration.
    far: f64,
}

impl Price {
    /// The charge (ns) of a chunk that counted `units` and measured `ns`; the second value
    /// says whether the guard priced it.
    pub fn charge(&mut self, units: u64, ns: u64) -> (u64, bool) {
        let units = units.max(1) as f64;
        let ratio = ns.max(1) as f64 / units;
        if self.cal == 0.0 || ratio < self.cal {
            self.cal = ratio;
        }
        let counted = units * self.cal;
        let above = ns as f64 > GUARD * counted;
        self.far += (f64::from(u8::from(above)) - self.far) / 32.0;
        if above && self.far >= GUARD_SHARE {
            (ns, true)
        } else {
            ((counted.round() as u64).max(1), false)
        }
    }

    /// The calibration: ns per unit (`None` before the first chunk).
    pub fn calibration(&self) -> Option<f64> {
        (self.cal > 0.0).then_some(self.cal)
    }
}

/// How [`Cost::Work`] prices a device's control work (entries touched): applied writes and
/// refused ones (an error: past the entry quota, a bad table or key) each at their own
/// calibrated [`Price`]. One price for both (the lowest ns per entry seen, h-iso3) let a
/// tenant's cheap refused writes set the price of its dear applied ones, undercharging them
/// by up to the guard's 64× (`tests`: `one_price_for_refused_and_applied_writes_undercharges`).
///
/// * A job of applied writes only, or of refused ones only, is priced (and calibrates) at
///   that kind's price.
/// * A mixed job: its refused units at the refused calibration, the rest of its measured
///   time priced (and calibrating) as its applied units; before the refused writes have a
///   calibration of their own, all of its time counts for its applied units. Either way
///   refusals never lower the applied price below what applied writes took.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ControlPrice {
    applied: Price,
    refused: Price,
}

impl ControlPrice {
    /// The charge (ns) of a job whose writes touched `applied` entries and were refused
    /// `refused` times, measured `ns`; the second value says whether the guard priced it.
    pub fn charge(&mut self, applied: u64, refused: u64, ns: u64) -> (u64, bool) {
        match (applied, refused) {
            (a, 0) => self.applied.charge(a.max(1), ns),
            (0, r) => self.refused.charge(r, ns),
            (a, r) => match self.refused.calibration() {
                Some(cal) => {
                    let r_ns = ((r as f64 * cal).round() as u64).min(ns);
                    let (w, guarded) = self.applied.charge(a, ns - r_ns);
                    (w + r_ns, guarded)
                }
                None => self.applied.charge(a, ns),
            },
        }
    }

    /// The calibrations (ns per entry) of applied and of refused writes.
    pub fn calibration(&self) -> (Option<f64>, Option<f64>) {
        (self.applied.calibration(), self.refused.calibration())
    }
}

/// What one chunk cost, as the caller of [`FairScheduler::run_round_with`] reports it.
pub(crate) enum Spent {
    /// Charge this much (in the quantum's unit).
    Charged(u64),
    /// Counted units and measured ns, priced by the device's [`Price`] (a control job: of
    /// its `units`, `refused` were refused writes, [`ControlPrice`]).
    Counted { units: u64, refused: u64, ns: u64 },
    /// [`Spent::Counted`] by a device whose program is in its `epoch`-th version
    /// ([`VirtSwitch::program_epoch`]): a new epoch starts the device's calibrations again
    /// (and its chunk size) before the chunk is priced.
    CountedAt {
        units: u64,
        refused: u64,
        ns: u64,
        epoch: u64,
    },
    /// A chunk or control job in which the device panicked: charged its measured time `ns`
    /// (at least 1), not its `units` at its calibration, and left out of the calibration.
    /// The unwinding is the device's own doing and no pass counts it: at the calibration of
    /// its cheap quarantined chunks (about 1 ns a packet) a panicking tenant was charged
    /// some 30 ns for a chunk that took 3–14 µs, under the guard's notice (issue 17).
    Faulted { units: u64, ns: u64 },
}

impl Spent {
    /// The counted form, after starting `q`'s calibration again if the program changed.
    fn counted(self, q: &mut Queue) -> Spent {
        match self {
            Spent::CountedAt {
                units,
                refused,
                ns,
                epoch,
            } => {
                if epoch != q.epoch {
                    q.epoch = epoch;
                    q.price = Price::default();
                    q.control_price = ControlPrice::default();
                    // The next chunk learns the new program's work per packet (one packet).
                    q.per_packet = 0;
                    q.stats.recalibrated += 1;
                }
                Spent::Counted { units, refused, ns }
            }
            s => s,
        }
    }
}

/// Work that arrived while a round ran (handed in between two chunks).
pub(crate) enum Arrival {
    /// A packet of the current dispatch ([`FairScheduler::stage`]).
    Packet(DeviceId, Port, Vec<u8>),
    Job(DeviceId, Job),
    /// The end of a dispatch ([`FairScheduler::end_dispatch`]).
    Round,
}

/// One device's queue: (virtual ingress port, frame) in arrival order, its queued control
/// work, its credit (negative: a debt), its recent work per packet, the work it used in the
/// current round and the round it was last credited in, and its price.
#[derive(Default)]
pub(crate) struct Queue {
    packets: VecDeque<(Port, Vec<u8>)>,
    /// Packets handed over by a worker but not released into `packets` yet: (dispatch,
    /// virtual port, frame), in order ([`FairScheduler::stage`]).
    staged: VecDeque<(u64, Port, Vec<u8>)>,
    jobs: VecDeque<Job>,
    deficit: i64,
    per_packet: u64,
    used: u64,
    round: u64,
    price: Price,
    /// The price of its control work (entries touched), calibrated apart from its packets'.
    control_price: ControlPrice,
    /// The device's program version its prices were calibrated on.
    epoch: u64,
    stats: FairStats,
}

impl Queue {
    /// Work it can run now (staged packets wait for their release).
    fn backlogged(&self) -> bool {
        !(self.packets.is_empty() && self.jobs.is_empty())
    }
}

/// Chunks a quantum is cut into at least (a chunk is at most a quarter of the quantum of
/// work, at least one packet).
const SLICES: u64 = 4;

/// A deficit-round-robin scheduler over the devices of a [`VirtSwitch`] (see the module
/// documentation). Packets no rule classifies are not queued (the switch would drop them).
pub struct FairScheduler {
    quantum: u64,
    capacity: usize,
    cost: Cost,
    queues: BTreeMap<DeviceId, Queue>,
    /// Rounds run so far.
    round: u64,
    /// Dispatches staged so far ([`FairScheduler::end_dispatch`]).
    dispatch: u64,
    /// Work handed in between two chunks (kept for its capacity).
    arrivals: Vec<Arrival>,
    /// Reused buffers of served packets (the workers hand them on to the devices that sent
    /// frames out, see `VirtSwitch::feed_producers`).
    pub(crate) spare: Vec<Vec<u8>>,
    batch: Vec<(Port, Vec<u8>)>,
    /// The batch as the device takes it (kept empty between rounds for its capacity).
    refs: Vec<(Port, &'static [u8])>,
    /// The device whose packets' stages are timed, if any ([`FairScheduler::set_trace`]).
    trace: Option<Arc<StageTrace>>,
}

/// `v`, emptied, as a vector of another lifetime: the allocation is reused (an in-place
/// collect of an empty vector), so a per-round batch of borrowed frames allocates nothing.
fn relifetime<'b>(mut v: Vec<(Port, &[u8])>) -> Vec<(Port, &'b [u8])> {
    v.clear();
    v.into_iter().map(|_| unreachable!("emptied")).collect()
}

impl FairScheduler {
    /// A scheduler charging frame bytes ([`Cost::Bytes`]): `quantum`: bytes each backlogged
    /// device may send per round (a frame longer than the credit waits for more rounds);
    /// `capacity`: packets a device's queue holds.
    pub fn new(quantum: u64, capacity: usize) -> FairScheduler {
        FairScheduler::with_cost(Cost::Bytes, quantum, capacity)
    }

    /// A scheduler charging `cost`, `quantum` of it per backlogged device per round;
    /// `capacity`: packets a device's queue holds.
    pub fn with_cost(cost: Cost, quantum: u64, capacity: usize) -> FairScheduler {
        FairScheduler {
            quantum: quantum.clamp(1, i64::MAX as u64 / 4),
            capacity: capacity.max(1),
            cost,
            queues: BTreeMap::new(),
            round: 0,
            dispatch: 0,
            arrivals: Vec::new(),
            spare: Vec::new(),
            batch: Vec::new(),
            refs: Vec::new(),
            trace: None,
        }
    }

    /// Time the stages of one device's packets from now on (`None`: stop).
    pub fn set_trace(&mut self, trace: Option<Arc<StageTrace>>) {
        self.trace = trace;
    }

    /// The trace, when it follows device `id`.
    fn traced(&self, id: DeviceId) -> Option<&StageTrace> {
        self.trace.as_deref().filter(|t| t.device == id)
    }

    /// What the scheduler charges.
    pub fn cost(&self) -> Cost {
        self.cost
    }

    /// Queue a packet arriving on physical `port` for the device the classifier picks.
    /// Returns false when it is not queued (unclassified, or its device's queue is full).
    pub fn enqueue(&mut self, vs: &VirtSwitch, port: Port, data: &[u8]) -> bool {
        let Some((id, vport)) = vs.classify(port, data) else {
            return false;
        };
        self.enqueue_to(id, vport, data)
    }

    /// Queue a packet already classified to device `id`, virtual ingress port `vport`.
    /// Returns false when the device's queue is full (counted as `overflow`).
    pub fn enqueue_to(&mut self, id: DeviceId, vport: Port, data: &[u8]) -> bool {
        let q = self.queues.entry(id).or_default();
        if q.packets.len() >= self.capacity {
            q.stats.overflow += 1;
            return false;
        }
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(data);
        q.packets.push_back((vport, buf));
        q.stats.queued += 1;
        true
    }

    /// Stage a packet of the current dispatch for device `id` (a worker's arrivals): its
    /// dispatch joins the device's queue as soon as it fits whole (at the start of a round
    /// or between two chunks), or when the device has nothing queued (then past the
    /// queue's capacity the rest of that dispatch overflows, counted). So a flood takes its
    /// arrivals a dispatch at a time as its queue drains (its backlog waits, in order,
    /// rather than overflowing its queue at once), and a device at its rate does not wait
    /// behind another device's backlog of dispatches.
    pub(crate) fn stage(&mut self, id: DeviceId, vport: Port, data: Vec<u8>) {
        let seq = self.dispatch;
        if let Some(t) = self.traced(id) {
            t.mark(Stage::Staged, 1);
        }
        self.queues
            .entry(id)
            .or_default()
            .staged
            .push_back((seq, vport, data));
    }

    /// The current dispatch is complete: packets staged from now on belong to the next.
    pub(crate) fn end_dispatch(&mut self) {
        self.dispatch += 1;
    }

    /// Move each device's staged dispatches into its queue, oldest first, while each fits
    /// whole in the room left; the oldest moves even when it does not fit (its excess
    /// overflows, counted) when the device has nothing queued. Called at the start of a
    /// round and after every chunk. So a flood's backlog waits in order, a dispatch at a
    /// time as its queue drains (a dispatch larger than the queue overflows by its excess),
    /// while a device at its rate takes every dispatch staged behind another device's backlog
    /// at once, not one a round nor only when its queue is empty (its packets staged while
    /// it still had some queued used to wait for the round's end), and never overflows a
    /// queue it does not fill.
    fn release(&mut self) {
        for (&id, q) in self.queues.iter_mut() {
            if q.staged.is_empty() {
                continue;
            }
            let trace = self.trace.as_deref().filter(|t| t.device == id);
            let mut force = q.packets.is_empty();
            while let Some(&(seq, _, _)) = q.staged.front() {
                if !force {
                    let whole = q.staged.iter().take_while(|s| s.0 == seq).count();
                    if q.packets.len() + whole > self.capacity {
                        break;
                    }
                }
                force = false;
                Self::release_one(q, seq, self.capacity, &mut self.spare, trace);
            }
        }
    }

    /// Move dispatch `seq` (at the front of `q.staged`) into `q`'s queue; what does not fit
    /// overflows.
    fn release_one(
        q: &mut Queue,
        seq: u64,
        capacity: usize,
        spare: &mut Vec<Vec<u8>>,
        trace: Option<&StageTrace>,
    ) {
        let (queued, overflow) = (q.stats.queued, q.stats.overflow);
        while q.staged.front().is_some_and(|s| s.0 == seq) {
            let (_, vport, data) = q.staged.pop_front().expect("front");
            if q.packets.len() >= capacity {
                q.stats.overflow += 1;
                // Kept whatever the pool holds (never freed on the packet path: over
                // workers the front allocated it); the worker hands the excess back.
                spare.push(data);
            } else {
                q.packets.push_back((vport, data));
                q.stats.queued += 1;
            }
        }
        if let Some(t) = trace {
            let n = (q.stats.queued - queued) as usize;
            if n > 0 {
                t.mark(Stage::Released, n);
            }
            t.overflow
                .fetch_add(q.stats.overflow - overflow, Ordering::Relaxed);
        }
    }

    /// Take a device's queue out (its waiting packets, credit and counters), to move the
    /// device to another scheduler.
    pub(crate) fn take_queue(&mut self, id: DeviceId) -> Option<Queue> {
        self.queues.remove(&id)
    }

    /// Put a queue taken from another scheduler in.
    pub(crate) fn put_queue(&mut self, id: DeviceId, q: Queue) {
        self.queues.insert(id, q);
    }

    /// Forget a removed device's queue (its waiting packets are dropped).
    pub(crate) fn forget(&mut self, id: DeviceId) {
        self.queues.remove(&id);
    }

    /// Start device `id`'s calibration again (its program was replaced).
    pub fn recalibrate(&mut self, id: DeviceId) {
        if let Some(q) = self.queues.get_mut(&id) {
            q.price = Price::default();
        }
    }

    /// A device's price ([`Cost::Work`]), if it has run packets here.
    pub fn price(&self, id: DeviceId) -> Option<Price> {
        self.queues.get(&id).map(|q| q.price)
    }

    /// Whether anything waits: a packet (queued or staged) or control work of any device.
    /// What a worker asks between rounds: it looks at each device once, never at each
    /// job, so a control flood's thousands of queued batches cost it nothing
    /// ([`FairScheduler::backlog`] counts them one by one, for reports).
    #[inline]
    pub fn has_work(&self) -> bool {
        self.queues
            .values()
            .any(|q| !q.packets.is_empty() || !q.staged.is_empty() || !q.jobs.is_empty())
    }

    /// Packets, control jobs and steps waiting, over all devices: each packet (queued or
    /// staged), each job and each step of a batch not run yet counts one (a batch of `n`
    /// writes is `n` turns of its device, [`FairScheduler::enqueue_steps`]). It walks every
    /// queued job: for reports, not for a loop ([`FairScheduler::has_work`]).
    pub fn backlog(&self) -> usize {
        self.queues
            .values()
            .map(|q| q.packets.len() + q.staged.len() + q.jobs.iter().map(Job::left).sum::<usize>())
            .sum()
    }

    /// Queue control work for device `id` (a tenant's posted writes): it runs in the
    /// device's turn, before its packets, and its work is charged to the device like its
    /// packets' (so a control flood spends its own share, and waits while in debt).
    pub fn enqueue_job(&mut self, id: DeviceId, job: DeviceJob) {
        self.queue_job(id, Job::Once(job));
    }

    /// Queue a batch of control work for device `id` cut into `steps` steps (a tenant's
    /// batch of table writes, one write a step): `f(vs, i)` runs step `i`, in order, **one
    /// step per turn** of the device, each charged like a job ([`Cost::Work`]: by the entries
    /// it touched). So one big batch cannot hold the worker for long: a device under its share
    /// gets the next chunk after at most one step, and the batch spends the device's own
    /// credit, step by step, waiting in debt like a packet flood.
    pub fn enqueue_steps(
        &mut self,
        id: DeviceId,
        steps: usize,
        f: impl FnMut(&mut VirtSwitch, usize) + Send + 'static,
    ) {
        if steps > 0 {
            self.queue_job(
                id,
                Job::Steps {
                    f: Box::new(f),
                    next: 0,
                    end: steps,
                },
            );
        }
    }

    pub(crate) fn queue_job(&mut self, id: DeviceId, job: Job) {
        self.queues.entry(id).or_default().jobs.push_back(job);
    }

    /// One DRR round over `vs`: outputs are appended to `out`; returns the packets served.
    /// With [`Cost::Work`] and [`Cost::Nanos`] the clock is read once before the round's
    /// first chunk and once after each chunk.
    pub fn run_round(&mut self, vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>) -> usize {
        self.run_round_flushing(vs, out, |_, _, _| {})
    }

    /// [`FairScheduler::run_round`], calling `flush(vs, out, spare)` after each device's turn
    /// (a worker hands that device's outputs over at once instead of after the whole round;
    /// `spare` is the pool of served buffers).
    pub fn run_round_flushing(
        &mut self,
        vs: &mut VirtSwitch,
        out: &mut Vec<OutputPacket>,
        flush: impl FnMut(&mut VirtSwitch, &mut Vec<OutputPacket>, &mut Vec<Vec<u8>>),
    ) -> usize {
        self.run_round_polling(vs, out, flush, |_| {})
    }

    /// [`FairScheduler::run_round_flushing`], calling `poll(arrivals)` after every chunk:
    /// work that arrived meanwhile (the worker's inbox) joins the queues at once, and a
    /// device under its share is served before the running device's next chunk.
    pub(crate) fn run_round_polling(
        &mut self,
        vs: &mut VirtSwitch,
        out: &mut Vec<OutputPacket>,
        mut flush: impl FnMut(&mut VirtSwitch, &mut Vec<OutputPacket>, &mut Vec<Vec<u8>>),
        mut poll: impl FnMut(&mut Vec<Arrival>),
    ) -> usize {
        let cost = self.cost;
        let mut st = (vs, out, Instant::now());
        self.round_core(
            &mut st,
            |(vs, out, last), id, pkts| match cost {
                Cost::Bytes => {
                    vs.process_on(id, pkts, out);
                    Spent::Charged(pkts.iter().map(|(_, d)| d.len() as u64).sum())
                }
                Cost::Nanos => {
                    vs.process_on(id, pkts, out);
                    let now = Instant::now();
                    let ns = now.duration_since(*last).as_nanos() as u64;
                    *last = now;
                    Spent::Charged(ns.max(1))
                }
                Cost::Work => {
                    let before = vs.device_work(id);
                    let panics = vs.device_panics(id);
                    vs.process_on(id, pkts, out);
                    let units = (vs.device_work(id).saturating_sub(before)).max(pkts.len() as u64);
                    let now = Instant::now();
                    let ns = now.duration_since(*last).as_nanos() as u64;
                    *last = now;
                    if vs.device_panics(id) != panics {
                        Spent::Faulted { units, ns }
                    } else {
                        Spent::CountedAt {
                            units,
                            refused: 0,
                            ns,
                            epoch: vs.program_epoch(id),
                        }
                    }
                }
            },
            |(vs, _, last), id, job| {
                let before = vs.device_control_work(id);
                let refused_before = vs.device_control_refused(id);
                let panics = vs.device_panics(id);
                job(vs);
                let now = Instant::now();
                let ns = now.duration_since(*last).as_nanos() as u64;
                *last = now;
                // The entries it touched (at least one: a job that wrote nothing still ran).
                let units = vs.device_control_work(id).saturating_sub(before).max(1);
                match cost {
                    Cost::Bytes => Spent::Charged(0),
                    Cost::Nanos => Spent::Charged(ns.max(1)),
                    Cost::Work if vs.device_panics(id) != panics => Spent::Faulted { units, ns },
                    // Priced at the device's own control calibration. A job that replaced
                    // the program (a P4Runtime pipeline) starts the device's calibrations
                    // again.
                    Cost::Work => Spent::CountedAt {
                        units,
                        refused: vs.device_control_refused(id).saturating_sub(refused_before),
                        ns,
                        epoch: vs.program_epoch(id),
                    },
                }
            },
            |(vs, out, last), spare| {
                flush(vs, out, spare);
                // The hand-over is not the next device's work.
                *last = Instant::now();
            },
            |(_, _, last), arrivals| {
                poll(arrivals);
                *last = Instant::now();
            },
        )
    }

    /// One DRR round, the packets run by `run(state, device, packets)`, which returns the work
    /// they cost (in the unit of the quantum); `job(state, device, job)` runs one queued
    /// control job and returns its work (a device's jobs run before its packets, one at a
    /// time while its credit lasts); `done(state, spare)` is called whenever the device
    /// served changes and at the end. Every device with packets waiting gets `quantum` more
    /// credit (credit does not pile up past one quantum; a debt carries over even when the
    /// queue empties); the next chunk always goes to the device with credit left that has
    /// used the least work in this round (ties: most credit, then lowest id), cut to what a
    /// quarter of the quantum or its credit covers at its recent work per packet (at least one
    /// packet, at most [`MAX_CHUNK`]; by frame bytes for [`Cost::Bytes`]); each chunk's work
    /// is charged after it ran. Returns the packets served.
    pub fn run_round_with<S>(
        &mut self,
        state: &mut S,
        mut run: impl FnMut(&mut S, DeviceId, &[(Port, &[u8])]) -> u64,
        mut job: impl FnMut(&mut S, DeviceId, &mut dyn FnMut(&mut VirtSwitch)) -> u64,
        done: impl FnMut(&mut S, &mut Vec<Vec<u8>>),
    ) -> usize {
        self.round_core(
            state,
            |s, id, pkts| Spent::Charged(run(s, id, pkts)),
            |s, id, j| Spent::Charged(job(s, id, j)),
            done,
            |_, _| {},
        )
    }

    /// Give device `id` its credit for the current round (once per round, when it has work).
    fn credit(q: &mut Queue, quantum: i64, round: u64) {
        q.round = round;
        q.deficit = (q.deficit + quantum).min(quantum);
        if q.deficit <= 0 {
            q.stats.skipped += 1;
        }
    }

    /// The round itself (see [`FairScheduler::run_round_with`]); `poll(state, arrivals)` is
    /// called after every chunk and job: what it pushes is queued at once (a device that
    /// had no work at the start of the round is credited on arrival).
    pub(crate) fn round_core<S>(
        &mut self,
        state: &mut S,
        mut run: impl FnMut(&mut S, DeviceId, &[(Port, &[u8])]) -> Spent,
        mut job: impl FnMut(&mut S, DeviceId, &mut dyn FnMut(&mut VirtSwitch)) -> Spent,
        mut done: impl FnMut(&mut S, &mut Vec<Vec<u8>>),
        mut poll: impl FnMut(&mut S, &mut Vec<Arrival>),
    ) -> usize {
        let quantum = self.quantum as i64;
        let slice = (self.quantum / SLICES).max(1) as i64;
        self.round += 1;
        let round = self.round;
        // Each device takes the staged dispatches that fit (an empty queue its oldest).
        self.release();
        for q in self.queues.values_mut() {
            q.used = 0;
            if q.backlogged() {
                Self::credit(q, quantum, round);
            } else {
                q.deficit = q.deficit.min(0);
            }
        }
        let mut served = 0;
        let mut last: Option<DeviceId> = None;
        loop {
            // The device under its share: least used this round, credit left.
            let pick = self
                .queues
                .iter()
                .filter(|(_, q)| q.round == round && q.deficit > 0 && q.backlogged())
                .min_by_key(|(&id, q)| (q.used, std::cmp::Reverse(q.deficit), id))
                .map(|(&id, _)| id);
            let Some(id) = pick else {
                break;
            };
            if last.is_some_and(|l| l != id) {
                done(state, &mut self.spare);
            }
            last = Some(id);
            let q = self.queues.get_mut(&id).expect("picked");
            if let Some(front) = q.jobs.front_mut() {
                // One job, or one step of a batch (the rest stays at the front). Each runs
                // under its own panic boundary: a panic quarantines the device, ends a
                // batch (its later steps are dropped) and the worker goes on.
                let mut failed = false;
                let spent = match front {
                    Job::Steps { f, next, end } => {
                        let i = *next;
                        *next += 1;
                        let finished = *next >= *end;
                        let spent = job(state, id, &mut |vs: &mut VirtSwitch| {
                            failed = !guarded(vs, id, |vs| f(vs, i));
                        });
                        if finished || failed {
                            q.jobs.pop_front();
                        }
                        spent
                    }
                    Job::Once(_) => {
                        let Some(Job::Once(j)) = q.jobs.pop_front() else {
                            unreachable!("the front is a single job")
                        };
                        let mut j = Some(j);
                        job(state, id, &mut |vs: &mut VirtSwitch| {
                            if let Some(j) = j.take() {
                                failed = !guarded(vs, id, j);
                            }
                        })
                    }
                };
                q.stats.job_panics += u64::from(failed);
                let work = match spent.counted(q) {
                    Spent::Charged(w) => w,
                    Spent::Faulted { units, ns } => {
                        q.stats.faulted += 1;
                        q.stats.control_units += units;
                        ns.max(1)
                    }
                    Spent::Counted { units, refused, ns }
                    | Spent::CountedAt {
                        units, refused, ns, ..
                    } => {
                        let refused = refused.min(units);
                        let (w, guarded) = q.control_price.charge(units - refused, refused, ns);
                        q.stats.guarded += u64::from(guarded);
                        q.stats.control_units += units;
                        q.stats.control_refused += refused;
                        w
                    }
                };
                q.stats.jobs += 1;
                q.deficit = q.deficit.saturating_sub(work.min(i64::MAX as u64) as i64);
                q.used = q.used.saturating_add(work);
                q.stats.work += work;
            } else {
                // The chunk a quarter quantum (or the credit) covers at the device's recent
                // work per packet.
                let budget = q.deficit.min(slice);
                let n = match self.cost {
                    Cost::Bytes => {
                        let mut credit = q.deficit;
                        let mut n = 0;
                        for (_, d) in q.packets.iter().take(MAX_CHUNK) {
                            if n > 0 && d.len() as i64 > credit {
                                break;
                            }
                            credit -= d.len() as i64;
                            n += 1;
                        }
                        n
                    }
                    // Unknown yet: one packet to learn it.
                    _ if q.per_packet == 0 => 1,
                    _ => (budget as u64)
                        .div_ceil(q.per_packet)
                        .clamp(1, MAX_CHUNK as u64) as usize,
                };
                let n = n.min(q.packets.len());
                self.batch.extend(q.packets.drain(..n));
                let mut refs = relifetime(std::mem::take(&mut self.refs));
                refs.extend(self.batch.iter().map(|(p, d)| (*p, d.as_slice())));
                let spent = run(state, id, &refs);
                self.refs = relifetime(refs);
                if let Some(t) = self.traced(id) {
                    t.mark(Stage::Ran, n);
                }
                let q = self.queues.get_mut(&id).expect("picked");
                let work = match spent.counted(q) {
                    Spent::Charged(w) => {
                        q.stats.units += w;
                        w
                    }
                    Spent::Faulted { units, ns } => {
                        q.stats.units += units;
                        q.stats.faulted += 1;
                        ns.max(1)
                    }
                    Spent::Counted { units, ns, .. } | Spent::CountedAt { units, ns, .. } => {
                        let (w, guarded) = q.price.charge(units, ns);
                        q.stats.units += units;
                        q.stats.guarded += u64::from(guarded);
                        w
                    }
                };
                q.deficit = q.deficit.saturating_sub(work.min(i64::MAX as u64) as i64);
                q.used = q.used.saturating_add(work);
                // A decaying maximum: up at once, down by an eighth a chunk (a device cannot
                // lower it with a few cheap packets and then run a long chunk of dear ones).
                q.per_packet = (work / n as u64)
                    .max(q.per_packet - q.per_packet / 8)
                    .max(1);
                q.stats.work += work;
                q.stats.served += n as u64;
                served += n;
                // Every served buffer is kept (see `release_one`).
                self.spare.extend(self.batch.drain(..).map(|(_, d)| d));
            }
            // Work that arrived meanwhile joins now.
            let mut arrivals = std::mem::take(&mut self.arrivals);
            poll(state, &mut arrivals);
            for a in arrivals.drain(..) {
                match a {
                    Arrival::Packet(id, vport, data) => self.stage(id, vport, data),
                    Arrival::Job(id, j) => self.queue_job(id, j),
                    Arrival::Round => self.end_dispatch(),
                }
            }
            self.arrivals = arrivals;
            // Staged dispatches that fit join their queues now (a device with nothing queued
            // takes its oldest whatever its size); a device that had no work at the start of
            // the round is credited now.
            self.release();
            for q in self.queues.values_mut() {
                if q.round != round && q.backlogged() {
                    q.used = 0;
                    Self::credit(q, quantum, round);
                }
            }
        }
        if last.is_some() {
            done(state, &mut self.spare);
        }
        for q in self.queues.values_mut() {
            if !q.backlogged() {
                q.deficit = q.deficit.min(0);
            }
        }
        served
    }

    /// Every device's packets handed in so far that left (served or overflowed): what the
    /// workers publish for the front's bound on a device's backlog.
    pub(crate) fn done_counts(&self) -> impl Iterator<Item = (DeviceId, u64)> + '_ {
        self.queues
            .iter()
            .map(|(&id, q)| (id, q.stats.served + q.stats.overflow))
    }

    /// A device's scheduler counters (zero for a device that never had a packet queued).
    pub fn stats(&self, id: DeviceId) -> FairStats {
        self.queues.get(&id).map(|q| q.stats).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    //! The scheduler with work counted in units: the device's packets cost what the test says
    //! (no clock), so shares and waits are exact counts.

    use super::*;

    const VICTIM: DeviceId = 1;
    const ATTACKER: DeviceId = 2;

    /// Work units of one packet: its first payload byte (the test's frames say what they
    /// cost, as a packet with N passes would).
    fn frame(units: u8) -> Vec<u8> {
        vec![units; 16]
    }

    /// What one round did: (device, packets, work) per chunk in the order they ran.
    fn round(f: &mut FairScheduler) -> Vec<(DeviceId, usize, u64)> {
        let mut log = Vec::new();
        f.run_round_with(
            &mut log,
            |log, id, pkts| {
                let w: u64 = pkts.iter().map(|(_, d)| u64::from(d[0])).sum();
                log.push((id, pkts.len(), w));
                w
            },
            |log, id, _job| {
                // A control job costs 50 units (logged as a chunk of 0 packets).
                log.push((id, 0, 50));
                50
            },
            |_, _| {},
        );
        log
    }

    /// Top the attacker's queue up to full (it runs flat out) and offer `victim` victim
    /// packets of 1 unit.
    fn offer(f: &mut FairScheduler, attacker_units: u8, victim: usize) {
        while f.enqueue_to(ATTACKER, 0, &frame(attacker_units)) {}
        for _ in 0..victim {
            assert!(
                f.enqueue_to(VICTIM, 0, &frame(1)),
                "the victim's queue is full"
            );
        }
    }

    /// An attacker whose packets cost 64 units each (64 passes) beside a victim whose packets
    /// cost 1, both always backlogged: each gets its quantum of work per round, the attacker
    /// overshooting by less than one of its packets.
    #[test]
    fn an_attacker_doing_64x_work_per_packet_gets_only_its_share_of_work() {
        const Q: u64 = 100;
        const ROUNDS: u64 = 1000;
        let mut f = FairScheduler::with_cost(Cost::Nanos, Q, 256);
        let (mut v_work, mut a_work) = (0u64, 0u64);
        for _ in 0..ROUNDS {
            offer(&mut f, 64, 0);
            while f.enqueue_to(VICTIM, 0, &frame(1)) {}
            for (id, _, w) in round(&mut f) {
                match id {
                    VICTIM => v_work += w,
                    _ => a_work += w,
                }
            }
        }
        assert_eq!(f.stats(ATTACKER).work, a_work);
        assert_eq!(f.stats(VICTIM).work, v_work);
        // The attacker: its quantum per round and at most one packet past it over the run.
        assert!(a_work <= ROUNDS * Q + 64, "attacker work {a_work}");
        assert!(a_work >= ROUNDS * Q - 64, "attacker work {a_work}");
        // The victim (always backlogged, 1 unit a packet): exactly its quantum per round.
        assert_eq!(v_work, ROUNDS * Q);
        // In packets the attacker is served 64 times fewer: about 100/64 per round.
        let a_served = f.stats(ATTACKER).served;
        assert!(a_served <= ROUNDS * Q / 64 + 1, "{a_served}");
    }

    /// The same load charged by bytes (classic DRR): both devices' frames are 16 bytes, so
    /// the attacker runs as many packets as the victim and 64 times its work.
    #[test]
    fn charged_by_bytes_the_same_attacker_takes_64x_the_work() {
        let mut f = FairScheduler::with_cost(Cost::Bytes, 160, 256);
        let mut units = [0u64; 2];
        for _ in 0..100 {
            offer(&mut f, 64, 0);
            while f.enqueue_to(VICTIM, 0, &frame(1)) {}
            f.run_round_with(
                &mut units,
                |units, id, pkts| {
                    units[id as usize - 1] +=
                        pkts.iter().map(|(_, d)| u64::from(d[0])).sum::<u64>();
                    pkts.iter().map(|(_, d)| d.len() as u64).sum()
                },
                |_, _, _| 0,
                |_, _| {},
            );
        }
        assert_eq!(f.stats(VICTIM).served, f.stats(ATTACKER).served);
        assert_eq!(units[1], 64 * units[0]);
    }

    /// An open-loop victim (one packet a round) beside a flat-out attacker of 64-unit packets:
    /// every victim packet runs in the round it arrived, first, and between two victim
    /// packets the attacker ran at most its quantum plus one packet.
    #[test]
    fn the_victim_waits_behind_at_most_one_quantum_of_attacker_work() {
        const Q: u64 = 200;
        let mut f = FairScheduler::with_cost(Cost::Nanos, Q, 64);
        let mut since_victim = 0u64;
        let mut max_between = 0u64;
        for r in 0..2000u64 {
            offer(&mut f, 64, 1);
            let log = round(&mut f);
            let v: Vec<_> = log.iter().filter(|c| c.0 == VICTIM).collect();
            assert_eq!(
                v.len(),
                1,
                "round {r}: the victim's packet ran in its round"
            );
            assert_eq!(
                log[0].0, VICTIM,
                "round {r}: the victim (most credit) went first"
            );
            for (id, _, w) in log {
                if id == VICTIM {
                    max_between = max_between.max(since_victim);
                    since_victim = 0;
                } else {
                    since_victim += w;
                }
            }
        }
        assert!(max_between <= Q + 64, "{max_between}");
        assert!(
            max_between >= Q,
            "the attacker ran its share: {max_between}"
        );
        assert_eq!(f.stats(VICTIM).served, 2000);
        assert_eq!(f.stats(VICTIM).overflow, 0);
    }

    /// A debt outlives an empty queue: an attacker that spends 250 units in one packet and
    /// goes quiet is not forgiven; when it sends again it first sits out the round that pays
    /// the rest back.
    #[test]
    fn a_debt_is_paid_back_even_across_an_empty_queue() {
        const Q: u64 = 100;
        let mut f = FairScheduler::with_cost(Cost::Nanos, Q, 16);
        assert!(f.enqueue_to(ATTACKER, 0, &frame(250)));
        assert_eq!(round(&mut f), vec![(ATTACKER, 1, 250)]);
        // Debt 150; quiet rounds neither add credit nor forget it.
        for _ in 0..3 {
            assert!(round(&mut f).is_empty());
        }
        assert!(f.enqueue_to(ATTACKER, 0, &frame(1)));
        assert!(round(&mut f).is_empty(), "-150 + 100: still in debt");
        assert_eq!(round(&mut f), vec![(ATTACKER, 1, 1)]);
        assert_eq!(f.stats(ATTACKER).skipped, 1);
        assert_eq!(f.stats(ATTACKER).work, 251);
    }

    /// A control flood is scheduled like packets: an attacker posting 10 jobs of 50 units a
    /// round beside a backlogged victim runs at most its quantum of them (plus one) a
    /// round, the rest waiting in its queue, and the victim keeps its quantum.
    #[test]
    fn a_control_flood_spends_its_own_share() {
        const Q: u64 = 100;
        let mut f = FairScheduler::with_cost(Cost::Nanos, Q, 256);
        let (mut v_work, mut a_work) = (0u64, 0u64);
        for r in 0..100 {
            for _ in 0..10 {
                f.enqueue_job(ATTACKER, Box::new(|_| {}));
            }
            while f.enqueue_to(VICTIM, 0, &frame(1)) {}
            let log = round(&mut f);
            let a: u64 = log.iter().filter(|c| c.0 == ATTACKER).map(|c| c.2).sum();
            assert!(a <= Q + 50, "round {r}: {a}");
            a_work += a;
            v_work += log
                .iter()
                .filter(|c| c.0 == VICTIM)
                .map(|c| c.2)
                .sum::<u64>();
        }
        assert_eq!(v_work, 100 * Q);
        assert!(a_work <= 100 * Q + 50, "{a_work}");
        // 1000 jobs posted, about 200 run: the rest wait.
        assert!(f.backlog() >= 700, "{}", f.backlog());
    }

    /// A chunk is cut to the credit at the device's recent work per packet: a cheap device
    /// runs up to `MAX_CHUNK` packets a call, an expensive one packet at a time.
    #[test]
    fn chunks_follow_the_credit() {
        let mut f = FairScheduler::with_cost(Cost::Nanos, 200, 256);
        while f.enqueue_to(VICTIM, 0, &frame(1)) {}
        let log = round(&mut f);
        // One packet to learn the cost, then chunks of the most a call takes.
        assert_eq!(log[0].1, 1);
        assert!(log[1..]
            .iter()
            .all(|c| c.1 == MAX_CHUNK || c.1 == 199 % MAX_CHUNK));
        assert_eq!(log.iter().map(|c| c.2).sum::<u64>(), 200);
        let mut f = FairScheduler::with_cost(Cost::Nanos, 64, 256);
        while f.enqueue_to(ATTACKER, 0, &frame(64)) {}
        round(&mut f); // learns the cost
        for _ in 0..10 {
            for c in round(&mut f) {
                assert_eq!(c.1, 1, "one 64-unit packet per chunk");
            }
        }
    }

    /// One round with counted work: each chunk's units are its packets' first bytes, and
    /// its measured ns what `ns(device, units, chunk number)` says (the test plays the
    /// clock); returns (device, packets, units, charge) per chunk.
    fn counted_round(
        f: &mut FairScheduler,
        chunk: &mut u64,
        ns: &mut impl FnMut(DeviceId, u64, u64) -> u64,
    ) -> Vec<(DeviceId, usize, u64)> {
        let mut log = Vec::new();
        f.round_core(
            &mut (&mut log, chunk, ns),
            |(log, chunk, ns), id, pkts| {
                let units: u64 = pkts.iter().map(|(_, d)| u64::from(d[0])).sum();
                **chunk += 1;
                log.push((id, pkts.len(), units));
                Spent::Counted {
                    units,
                    refused: 0,
                    ns: ns(id, units, **chunk),
                }
            },
            |_, _, _| Spent::Charged(0),
            |_, _| {},
            |_, _| {},
        );
        log
    }

    /// The victim's charge is its counted work at its own calibration, whatever the attacker
    /// beside it does to the clock: its chunks measured 1–8× slower after attacker chunks
    /// (cache pollution) and now and then 4,000× (the thread preempted) are charged exactly
    /// what they are undisturbed, and the guard never trips for it.
    #[test]
    fn counted_work_charges_the_victim_the_same_beside_any_attacker() {
        const Q: u64 = 4_000;
        let mut f = FairScheduler::with_cost(Cost::Work, Q, 256);
        let mut chunk = 0u64;
        let mut seed = 7u64;
        // 100 ns per victim unit undisturbed; the attacker's 2-unit packets take 50 µs.
        let mut clock = |id: DeviceId, units: u64, n: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            match id {
                VICTIM if n == 1 => units * 100,
                VICTIM if n.is_multiple_of(97) => units * 100 * 4_000,
                VICTIM => units * 100 * (1 + (seed >> 61)),
                _ => units * 25_000,
            }
        };
        let mut units = 0;
        for _ in 0..500 {
            while f.enqueue_to(ATTACKER, 0, &frame(2)) {}
            while f.enqueue_to(VICTIM, 0, &frame(1)) {}
            for (id, _, u) in counted_round(&mut f, &mut chunk, &mut clock) {
                if id == VICTIM {
                    units += u;
                }
            }
        }
        let v = f.stats(VICTIM);
        assert_eq!(v.units, units);
        assert_eq!(v.work, 100 * units, "{v:?}");
        assert_eq!(v.guarded, 0);
        assert_eq!(f.price(VICTIM).unwrap().calibration(), Some(100.0));
        // The attacker's 2-pass packets that take 50 µs calibrate at 25 µs a unit: charged
        // what they cost, so both get the same work per round.
        let a = f.stats(ATTACKER);
        assert_eq!(a.work, 25_000 * a.units);
        let rounds = 500;
        assert!(
            v.work >= rounds * (Q - 100) && v.work <= rounds * Q + 100,
            "{v:?}"
        );
        assert!(a.work <= rounds * Q + 50_000, "{a:?}");
    }

    /// A chunk in which the device panicked ([`Spent::Faulted`]) is charged its measured time,
    /// counted in `faulted`, and left out of the calibration. The tenant it is written
    /// against: quarantined chunks at 1 ns a packet, and one chunk in 10 a panic of 3 µs
    /// (released and armed again each time). One in 10 is under the guard's share of 1 in
    /// 8, so priced as counted work those panics would cost it 32 ns each.
    #[test]
    fn a_chunk_that_panicked_is_charged_its_measured_time() {
        const Q: u64 = 20_000;
        let mut f = FairScheduler::with_cost(Cost::Work, Q, 256);
        let mut chunk = 0u64;
        let (mut faulted, mut counted_units, mut panic_ns) = (0u64, 0u64, 0u64);
        for _ in 0..300 {
            while f.enqueue_to(ATTACKER, 0, &frame(1)) {}
            f.round_core(
                &mut (),
                |_, _, pkts| {
                    chunk += 1;
                    let units = pkts.len() as u64;
                    if chunk.is_multiple_of(10) {
                        faulted += 1;
                        panic_ns += 3_000;
                        Spent::Faulted { units, ns: 3_000 }
                    } else {
                        counted_units += units;
                        Spent::Counted {
                            units,
                            refused: 0,
                            ns: units,
                        }
                    }
                },
                |_, _, _| Spent::Charged(0),
                |_, _| {},
                |_, _| {},
            );
        }
        let a = f.stats(ATTACKER);
        assert!(faulted >= 100, "{faulted} panics");
        assert_eq!(a.faulted, faulted, "{a:?}");
        assert_eq!(a.guarded, 0, "{a:?}");
        assert_eq!(a.work, counted_units + panic_ns, "{a:?}");
        // The panicking chunks did not move its calibration.
        assert_eq!(f.price(ATTACKER).unwrap().calibration(), Some(1.0));
        // What the same chunks cost it priced as counted work (the flaw this fixes): under
        // the guard's share, 1 ns a unit.
        let mut p = Price::default();
        let mut as_counted = 0;
        for i in 1..=1_000u64 {
            let ns = if i.is_multiple_of(10) { 3_000 } else { 32 };
            let (w, g) = p.charge(32, ns);
            assert!(!g, "chunk {i}");
            as_counted += w;
        }
        assert_eq!(as_counted, 32 * 1_000);
    }

    /// The guard: a device that calibrated on cheap packets (100 ns a pass) and then parses
    /// in a loop (2 passes, 200 µs) is charged about its measured time after a few chunks;
    /// one that mixes the two, chunk by chunk, is charged within 2× of its measured time.
    #[test]
    fn the_guard_charges_a_device_far_above_its_calibration_its_measured_time() {
        let mut p = Price::default();
        for _ in 0..50 {
            assert_eq!(p.charge(32, 3_200), (3_200, false));
        }
        let (mut charged, mut measured, mut guarded) = (0u64, 0u64, 0);
        for _ in 0..200 {
            let (c, g) = p.charge(2, 200_000);
            charged += c;
            measured += 200_000;
            guarded += u64::from(g);
        }
        assert!(guarded >= 195, "{guarded}");
        assert!(charged >= measured * 9 / 10, "{charged} of {measured}");
        assert!(charged <= measured, "{charged} of {measured}");
        // Alternating cheap and dear chunks.
        let mut p = Price::default();
        let (mut charged, mut measured) = (0u64, 0u64);
        for i in 0..400u32 {
            let (u, ns) = if i.is_multiple_of(2) {
                (32, 3_200)
            } else {
                (2, 200_000)
            };
            charged += p.charge(u, ns).0;
            measured += ns;
        }
        assert!(
            charged >= measured / 2 && charged <= measured * 2,
            "{charged} of {measured}"
        );
    }

    /// Sporadic outliers (one chunk in 50 stretched 4,000× by a preemption) never trip the
    /// guard: the device is charged its counted work only.
    #[test]
    fn a_preempted_chunk_now_and_then_does_not_trip_the_guard() {
        let mut p = Price::default();
        let mut charged = 0;
        for i in 1..=1000u64 {
            let ns = if i.is_multiple_of(50) { 400_000 } else { 100 };
            let (c, g) = p.charge(1, ns);
            assert!(!g, "chunk {i}");
            charged += c;
        }
        assert_eq!(charged, 100 * 1000);
    }

    /// Precedence under the share: victim packets arriving at arbitrary points while a
    /// flat-out attacker runs (handed in between chunks, as the workers' inbox does) wait
    /// behind at most one attacker chunk — a quarter quantum plus one packet of attacker work
    /// units — never behind the attacker's whole quantum or the rest of its round. Counted
    /// for a cheap attacker (5 units a packet, chunks of many packets) and a dear one (64).
    #[test]
    fn a_victim_arriving_mid_round_waits_at_most_one_attacker_chunk() {
        const Q: u64 = 400;
        for cost in [5u8, 64] {
            let mut f = FairScheduler::with_cost(Cost::Work, Q, 1024);
            // Chunks run so far; the attacker units run since each waiting victim packet
            // arrived; the largest such wait.
            let mut chunks = 0u64;
            // Attacker units of the last chunk (a packet arriving is handed in after the
            // chunk it arrived during: worst case, it waited for all of it).
            let mut last = 0u64;
            let mut waiting: Vec<u64> = Vec::new();
            let mut max_wait = 0u64;
            let (mut arrived, mut served) = (0u64, 0u64);
            let mut seed = 11u64;
            for _ in 0..300 {
                while f.enqueue_to(ATTACKER, 0, &frame(cost)) {}
                let mut st = (
                    &mut chunks,
                    &mut waiting,
                    &mut max_wait,
                    &mut served,
                    &mut last,
                );
                f.round_core(
                    &mut st,
                    |(chunks, waiting, max_wait, served, last), id, pkts| {
                        **chunks += 1;
                        let units: u64 = pkts.iter().map(|(_, d)| u64::from(d[0])).sum();
                        **last = if id == VICTIM { 0 } else { units };
                        if id == VICTIM {
                            for _ in pkts {
                                let w = waiting.remove(0);
                                **max_wait = (**max_wait).max(w);
                                **served += 1;
                            }
                        } else {
                            for w in waiting.iter_mut() {
                                *w += units;
                            }
                        }
                        // Undisturbed: 1 ns a unit (so the charge counts units).
                        Spent::Counted {
                            units,
                            refused: 0,
                            ns: units,
                        }
                    },
                    |_, _, _| Spent::Charged(0),
                    |_, _| {},
                    |(_, waiting, _, _, last), arrivals| {
                        // A victim packet now and then, at points the test does not choose.
                        seed = seed
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        if seed >> 62 == 0 {
                            arrivals.push(Arrival::Packet(VICTIM, 0, frame(1)));
                            waiting.push(**last);
                            arrived += 1;
                        }
                    },
                );
            }
            assert!(arrived > 100, "{arrived}");
            // Every victim packet ran (those arriving in a round's last chunk run next round).
            assert!(served + waiting.len() as u64 == arrived && waiting.len() <= 1);
            let chunk = Q / SLICES + u64::from(cost);
            assert!(
                max_wait <= chunk,
                "cost {cost}: waited behind {max_wait} > {chunk}"
            );
            assert!(max_wait >= u64::from(cost), "cost {cost}: {max_wait}");
            // And the attacker still got its share: its quantum per round, about.
            let a = f.stats(ATTACKER);
            assert!(
                a.work >= 300 * (Q - u64::from(cost)) && a.work <= 300 * Q + 64,
                "{a:?}"
            );
        }
    }

    /// A victim dispatch that arrives while the victim's queue still holds packets (its chunk
    /// was cut at `MAX_CHUNK`) joins the queue at the next chunk, not at the round's end:
    /// victim dispatches of 1 to 48 packets, arriving at points the test does not choose
    /// beside a flat-out attacker that also posts control jobs (80 units each, now and then
    /// with the arrivals, as a control flood interleaved with dispatches), each wait behind
    /// at most one attacker chunk of work (a quarter quantum plus one packet) or one job,
    /// counted packet by packet. (Released only into an empty queue and only when something
    /// arrived, a dispatch staged behind a cut chunk waited for the attacker's whole quantum.)
    #[test]
    fn a_victim_dispatch_arriving_while_its_queue_is_not_empty_waits_at_most_one_chunk() {
        const Q: u64 = 400;
        const COST: u8 = 5;
        const JOB: u64 = 80;
        let mut f = FairScheduler::with_cost(Cost::Work, Q, 1024);
        // Per victim packet arrived and not run: the attacker units run since it arrived.
        let mut waiting: VecDeque<u64> = VecDeque::new();
        let (mut max_wait, mut arrived, mut served, mut jobs) = (0u64, 0u64, 0u64, 0u64);
        let mut seed = 5u64;
        for _ in 0..400 {
            while f.enqueue_to(ATTACKER, 0, &frame(COST)) {}
            let mut st = (&mut waiting, &mut max_wait, &mut served);
            f.round_core(
                &mut st,
                |(waiting, max_wait, served), id, pkts| {
                    let units: u64 = pkts.iter().map(|(_, d)| u64::from(d[0])).sum();
                    if id == VICTIM {
                        for _ in pkts {
                            let w = waiting.pop_front().expect("a victim packet waits");
                            **max_wait = (**max_wait).max(w);
                            **served += 1;
                        }
                    } else {
                        for w in waiting.iter_mut() {
                            *w += units;
                        }
                    }
                    Spent::Counted {
                        units,
                        refused: 0,
                        ns: units,
                    }
                },
                |(waiting, _, _), _, _| {
                    for w in waiting.iter_mut() {
                        *w += JOB;
                    }
                    Spent::Charged(JOB)
                },
                |_, _| {},
                |(waiting, _, _), arrivals| {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    if (seed >> 40).is_multiple_of(3) {
                        arrivals.push(Arrival::Job(ATTACKER, Job::Once(Box::new(|_| {}))));
                        jobs += 1;
                    }
                    if seed >> 62 == 0 {
                        let k = 1 + (seed >> 20) % 48;
                        for _ in 0..k {
                            arrivals.push(Arrival::Packet(VICTIM, 0, frame(1)));
                            waiting.push_back(0);
                        }
                        arrivals.push(Arrival::Round);
                        arrived += k;
                    }
                },
            );
        }
        assert!(arrived > 1000 && jobs > 500, "{arrived} {jobs}");
        assert_eq!(served + waiting.len() as u64, arrived);
        let v = f.stats(VICTIM);
        assert_eq!((v.overflow, v.skipped), (0, 0), "{v:?}");
        let bound = (Q / SLICES + u64::from(COST)).max(JOB);
        assert!(max_wait <= bound, "waited behind {max_wait} > {bound}");
    }

    /// A worker's arrivals are staged per device: behind an attacker's backlog of 10
    /// dispatches (40 packets each, queue of 32), the victim's packet of the last dispatch
    /// runs in the first round, while the attacker takes one dispatch a round (its excess
    /// over the queue overflowing, as a dispatch did before) and the rest waits in order.
    /// (Quantum 150: 30 attacker packets a round; its queue empties once a round, with
    /// credit left, and then takes its next dispatch at once.)
    #[test]
    fn a_backlog_of_attacker_dispatches_does_not_hold_the_victims_packet_back() {
        let mut f = FairScheduler::with_cost(Cost::Work, 150, 32);
        for d in 0..10 {
            for _ in 0..40 {
                f.stage(ATTACKER, 0, frame(5));
            }
            if d == 9 {
                f.stage(VICTIM, 0, frame(1));
            }
            f.end_dispatch();
        }
        let log = round(&mut f);
        assert!(log.iter().any(|c| c.0 == VICTIM), "{log:?}");
        assert_eq!(f.stats(VICTIM).served, 1);
        let a = f.stats(ATTACKER);
        assert_eq!((a.queued, a.overflow, a.served), (32, 8, 30));
        assert_eq!(f.backlog(), 9 * 40 + 2);
        for r in 2..=10u64 {
            round(&mut f);
            let a = f.stats(ATTACKER);
            assert_eq!(a.queued + a.overflow, 40 * r, "one dispatch a round");
            assert_eq!(a.served, 30 * r);
        }
        round(&mut f);
        assert_eq!(f.backlog(), 0);
    }

    /// A device at its rate takes every dispatch staged behind a flood's backlog in one go:
    /// 10 dispatches, each 40 attacker packets (queue of 32) and one victim packet, are all
    /// staged before a round; the victim runs all 10 of its packets in the first round (it
    /// took them one dispatch a round, waiting up to 10 rounds, before), while the attacker
    /// still takes its backlog one dispatch a round, in order.
    #[test]
    fn a_device_at_its_rate_takes_all_its_staged_dispatches_at_once() {
        let mut f = FairScheduler::with_cost(Cost::Work, 150, 32);
        for _ in 0..10 {
            for _ in 0..40 {
                f.stage(ATTACKER, 0, frame(5));
            }
            f.stage(VICTIM, 0, frame(1));
            f.end_dispatch();
        }
        round(&mut f);
        assert_eq!(f.stats(VICTIM).served, 10);
        let a = f.stats(ATTACKER);
        assert_eq!((a.queued, a.overflow, a.served), (32, 8, 30));
        assert_eq!(f.backlog(), 9 * 40 + 2);
    }

    /// A tenant's batch of 32 table writes beside a victim whose packets arrive at points the
    /// test does not choose, also in the middle of a write batch (they are seen at the
    /// worker's next look at its inbox, after the job or step that was running): posted as
    /// steps, the batch runs one write per turn of its device, so a victim packet waits
    /// behind at most one write; the same batch as one job holds it for up to all 32. Every
    /// write runs once, in order, and each step is charged its writes (8 ns each).
    /// A tenant alternating cheap refused writes (adds past its entry quota: 200 ns each) with
    /// dear applied ones (5,000 ns an entry), in jobs of their own and mixed in one job: one
    /// price for both (the lowest ns per entry seen, the old rule) charges the applied writes
    /// 1/25 of what they took (under the guard's 64×, so the guard never steps in) and the
    /// whole stream 1/11.7; priced apart, every job is charged exactly what it took.
    #[test]
    fn one_price_for_refused_and_applied_writes_undercharges() {
        const REFUSED_NS: u64 = 200;
        const APPLIED_NS: u64 = 5_000;
        // (applied entries, refused writes) of each job, repeated.
        let jobs = [(0, 1), (10, 0), (10, 1), (0, 4), (3, 0), (6, 30)];
        let (mut old, mut new) = (Price::default(), ControlPrice::default());
        let (mut took, mut old_charged, mut new_charged) = (0, 0, 0);
        for _ in 0..100 {
            for &(a, r) in &jobs {
                let ns = a * APPLIED_NS + r * REFUSED_NS;
                took += ns;
                old_charged += old.charge(a + r, ns).0;
                new_charged += new.charge(a, r, ns).0;
            }
        }
        assert_eq!(new_charged, took);
        assert_eq!(
            new.calibration(),
            (Some(APPLIED_NS as f64), Some(REFUSED_NS as f64))
        );
        // The old rule: everything at 200 ns an entry after the first refused write.
        assert_eq!(old.calibration(), Some(REFUSED_NS as f64));
        let applied: u64 = jobs.iter().map(|j| j.0).sum::<u64>() * 100;
        let refused: u64 = jobs.iter().map(|j| j.1).sum::<u64>() * 100;
        assert_eq!(old_charged, (applied + refused) * REFUSED_NS);
        // 15.22 ms of work charged as 1.3 ms: 11.7× under (the applied writes 25×).
        assert_eq!((took, old_charged), (15_220_000, 1_300_000));
    }

    /// A mixed job before any job of refused writes alone: all of its time counts for its
    /// applied entries (never below what they took), and the refused price stays unset.
    #[test]
    fn a_mixed_job_never_lowers_the_applied_price() {
        let mut p = ControlPrice::default();
        // 2 applied at 1,000 and 50 refused at 100: 7,000 ns.
        assert_eq!(p.charge(2, 50, 7_000), (7_000, false));
        assert_eq!(p.calibration(), (Some(3_500.0), None));
        // Refusals alone calibrate their own price.
        assert_eq!(p.charge(0, 10, 1_000), (1_000, false));
        // Now a mixed job: the refusals at their price, the rest as applied work.
        assert_eq!(p.charge(2, 50, 7_000), (7_000, false));
        assert_eq!(p.calibration(), (Some(1_000.0), Some(100.0)));
        // An applied-only job at that price.
        assert_eq!(p.charge(4, 0, 4_000), (4_000, false));
    }

    /// The backlog counts a batch's steps left, not the batch: 10 steps and a job are 11,
    /// then one fewer per round (one step a turn), with packets counted beside them.
    #[test]
    fn the_backlog_counts_the_steps_left() {
        let mut f = FairScheduler::with_cost(Cost::Work, 1_000, 64);
        f.enqueue_steps(ATTACKER, 10, |_, _| {});
        f.enqueue_job(ATTACKER, Box::new(|_| {}));
        assert!(f.enqueue_to(VICTIM, 1, &frame(1)));
        assert_eq!(f.backlog(), 12);
        assert!(f.has_work());
        let mut vs = VirtSwitch::new();
        for left in (1..=10).rev() {
            // Each step costs a whole quantum: one a round.
            f.run_round_with(
                &mut vs,
                |_, _, p| p.len() as u64,
                |_, _, j| {
                    j(&mut VirtSwitch::new());
                    1_000
                },
                |_, _| {},
            );
            // A step of the attacker's per round; the victim's packet went in the first.
            assert_eq!(f.backlog(), left, "after {} rounds", 11 - left);
            assert!(f.has_work());
        }
        f.run_round_with(
            &mut vs,
            |_, _, p| p.len() as u64,
            |_, _, _| 1_000,
            |_, _| {},
        );
        assert_eq!(f.backlog(), 0);
        assert!(!f.has_work());
        assert_eq!(f.stats(ATTACKER).jobs, 11);
    }

    #[test]
    fn a_batch_of_writes_runs_a_step_per_turn_and_the_victim_waits_one_write() {
        use std::sync::atomic::AtomicUsize;
        const WRITES: usize = 32;
        const BATCHES: usize = 300;
        for as_steps in [true, false] {
            let mut f = FairScheduler::with_cost(Cost::Work, 400, 64);
            let done = Arc::new(AtomicUsize::new(0));
            // Per victim packet waiting: the writes run since it arrived; `early`: packets
            // that arrived during a job, with the writes they waited for in it.
            let mut waiting: VecDeque<u64> = VecDeque::new();
            let mut early: Vec<u64> = Vec::new();
            let (mut max_wait, mut arrived, mut served) = (0u64, 0u64, 0u64);
            let mut vs = VirtSwitch::new();
            let mut seed = 11u64;
            let mut rnd = move || {
                seed = seed
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                seed >> 33
            };
            for b in 0..BATCHES {
                let d = Arc::clone(&done);
                if as_steps {
                    f.enqueue_steps(ATTACKER, WRITES, move |_, i| {
                        let n = d.fetch_add(1, Ordering::Relaxed);
                        assert_eq!(n, b * WRITES + i, "writes run once, in order");
                    });
                } else {
                    f.enqueue_job(
                        ATTACKER,
                        Box::new(move |_| {
                            d.fetch_add(WRITES, Ordering::Relaxed);
                        }),
                    );
                }
                // Rounds until this batch has run (bounded: a batch run whole in one turn
                // counts one job and must not loop here).
                for _ in 0..4 * WRITES {
                    let mut st = (
                        &mut waiting,
                        &mut early,
                        &mut max_wait,
                        &mut served,
                        &mut vs,
                        &mut rnd,
                        &mut arrived,
                    );
                    let count = Arc::clone(&done);
                    f.round_core(
                        &mut st,
                        |(waiting, _, max_wait, served, ..), id, pkts| {
                            assert_eq!(id, VICTIM);
                            for _ in pkts {
                                let w = waiting.pop_front().expect("a victim packet waits");
                                **max_wait = (**max_wait).max(w);
                                **served += 1;
                            }
                            Spent::Counted {
                                units: pkts.len() as u64,
                                refused: 0,
                                ns: pkts.len() as u64,
                            }
                        },
                        |(waiting, early, _, _, vs, rnd, arrived), _, job| {
                            let before = count.load(Ordering::Relaxed);
                            job(vs);
                            let writes = (count.load(Ordering::Relaxed) - before) as u64;
                            for w in waiting.iter_mut() {
                                *w += writes;
                            }
                            // A victim packet arrived during the job, before its write `at`.
                            if rnd() % 4 == 0 {
                                let at = rnd() % writes.max(1);
                                early.push(writes - at);
                                **arrived += 1;
                            }
                            // A write costs 8 ns, a victim packet 1 (a table write is
                            // dearer than forwarding a packet).
                            Spent::Counted {
                                units: writes,
                                refused: 0,
                                ns: 8 * writes,
                            }
                        },
                        |_, _| {},
                        |(waiting, early, .., rnd, arrived), arrivals| {
                            // Arrived meanwhile (during the last job), or just now.
                            if rnd() % 8 == 0 {
                                early.push(0);
                                **arrived += 1;
                            }
                            for w in early.drain(..) {
                                arrivals.push(Arrival::Packet(VICTIM, 0, frame(1)));
                                arrivals.push(Arrival::Round);
                                waiting.push_back(w);
                            }
                        },
                    );
                    if f.stats(ATTACKER).jobs as usize
                        >= (b + 1) * if as_steps { WRITES } else { 1 }
                    {
                        break;
                    }
                }
            }
            assert!(arrived > 100, "{arrived}");
            assert_eq!(served + waiting.len() as u64 + early.len() as u64, arrived);
            assert_eq!(done.load(Ordering::Relaxed), WRITES * BATCHES);
            let a = f.stats(ATTACKER);
            if as_steps {
                assert_eq!(a.jobs as usize, WRITES * BATCHES);
                assert_eq!(a.control_units as usize, WRITES * BATCHES);
                assert!(max_wait <= 1, "waited behind {max_wait} writes");
            } else {
                assert_eq!(a.jobs as usize, BATCHES);
                assert!(max_wait > 16, "one job holds the victim: {max_wait}");
            }
        }
    }
}
