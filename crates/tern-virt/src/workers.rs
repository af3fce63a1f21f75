//! Devices spread over worker threads ([`VirtWorkers`]), with fair shares between them.
//!
//! Each worker thread owns a *shard*: a [`VirtSwitch`] holding some of the devices (their
//! whole state, moved in, so the packet path takes no lock) and a [`FairScheduler`] over them.
//! A device is on exactly one worker at a time, so its packets run in arrival order and its
//! state is touched by one thread only. Devices joined by links form one *group* and always
//! sit on the same worker, so a chain runs to completion inside one worker as on one thread.
//!
//! The front (the caller's thread) classifies every arriving packet with the full classifier
//! and hands it, already classified, to the worker of its device: each worker has an inbox (a
//! ring of messages under a lock, one lock per worker per [`VirtWorkers::dispatch`], each
//! dispatch's packets closed by a round marker). A worker moves everything its inbox holds into
//! its own ring, then *stages* everything up to the first control message per device
//! (`FairScheduler::stage`): a device's staged dispatch joins its bounded queue as soon as it
//! fits whole (at a round's start and after every chunk), its oldest whatever its size when
//! the device has nothing queued (the excess over the room left overflows that device's
//! queue, counted). Then it runs one deficit-round-robin round over its devices, and goes on
//! with rounds while packets wait. Between two chunks of a round it looks at its inbox (one
//! atomic load when nothing came) and stages what arrived, up to the first control message
//! (an operator's call; a tenant's runtime calls are its device's jobs): a device at its rate
//! (a victim) gets its packets at once and, having used less than the device running, the
//! next chunk. So inside a worker a flooding device gets its quantum per
//! round like every other device, overflows only its own queue, and its backlog of dispatches
//! waits in its own staging, not in front of another device's packets. A worker that still
//! has work after a round yields its CPU (`WorkerOptions::yield_when_busy`).
//!
//! No allocation per packet: the rings (the inboxes, each worker's outputs' ring, the device queues)
//! keep their capacity, and frame buffers go round: the front copies an arriving frame into a
//! buffer of its pool, the buffer travels to the device's queue, once served it becomes a
//! spare output buffer of a device that sent a frame out in that round (a chain's last
//! device), the output frame travels back to the front, and [`VirtWorkers::recycle_outputs`]
//! puts it into the front's pool again, or gives it back to a worker when the front has
//! enough. A device that sends more frames than it receives (clones, multicast) takes them
//! from its bounded pools ([`DEVICE_BUFFERS`]: past them a copy is dropped and counted, never
//! allocated), and nobody frees a frame buffer on the packet path.
//!
//! Across workers the share is kept by the device → worker assignment: the front counts the
//! bytes it dispatches per device, and [`VirtWorkers::rebalance`] (also run every
//! `rebalance_every` packets) moves one group from the busiest worker to the idlest when that
//! evens their load. A move is a message to each of the two workers: the device leaves with
//! its state, its queue of waiting packets and its credit, so nothing is lost or reordered.
//! Moving whole device queues now and then, rather than stealing work packet by packet,
//! keeps each device on one thread (no lock, no cache-line traffic on its tables) and costs
//! one hand-over per move instead of a synchronisation per stolen batch.
//!
//! Control operations (add, remove, replace, runtime calls, topology and snapshots) are
//! messages too, run by the device's worker between two rounds; a topology change first brings
//! every group it creates onto one worker, then sends each worker its part of the port maps,
//! then switches the front's classifier.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tern_runtime::{OutputPacket, Port};

use crate::backend::WorkerControl;
use crate::fair::{Arrival, Cost, Job as DeviceWork, Queue, StageTrace};
use crate::sched::{self, ThreadSlice};
use crate::{
    validate_topology, CarryReport, Classifier, Device, DeviceId, DeviceSpec, DeviceStats,
    FairScheduler, FairStats, PortState, PortStates, Quarantined, Rule, Target, Topology,
    VirtError, VirtStats, VirtSwitch,
};

/// How [`VirtWorkers`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkerOptions {
    /// Worker threads (at least 1).
    pub workers: usize,
    /// What a device is charged for its packets (default: counted work, [`Cost::Work`]).
    pub cost: Cost,
    /// Credit a backlogged device gets per round, in the unit of `cost`
    /// ([`FairScheduler::with_cost`]).
    pub quantum: u64,
    /// Packets a device's queue holds.
    pub capacity: usize,
    /// Rebalance after this many dispatched packets (0: only when
    /// [`VirtWorkers::rebalance`] is called).
    pub rebalance_every: u64,
    /// A worker that still has work queued after a round yields its CPU before the next one
    /// (`sched_yield`): a worker running flat out lets a thread waiting for that CPU (another
    /// worker just woken, the front) in at once instead of after the scheduler's time slice.
    /// Off by default: on the 2-vCPU machine it made the victim's p99 worse with two workers
    /// (bench/RESULTS.md, "Isolation, timed, fifth session").
    pub yield_when_busy: bool,
    /// The time slice each worker thread asks the kernel for ([`ThreadSlice`]; default
    /// [`ThreadSlice::Kernel`]: measured, a short slice did not shorten the two-worker stall
    /// on the 2-vCPU machine, see [`crate::sched`]).
    pub slice: ThreadSlice,
    /// Turns of control work one device may have queued on its worker, not started yet
    /// ([`VirtWorkers::post`] and [`VirtWorkers::submit`]: one each; [`VirtWorkers::post_steps`]:
    /// one per step): past it the call is refused with [`VirtError::ControlBacklog`] and
    /// counted in the device's [`DeviceStats::control_backlog_refused`], so a tenant flooding
    /// its control plane cannot grow its worker's queue (memory) without bound. Each device
    /// has its own count: the other devices post freely meanwhile. Default
    /// [`DEFAULT_MAX_QUEUED_CONTROL`]. Leases ([`crate::WorkerControl::lease`], what the
    /// P4Runtime and Thrift servers take) are not counted: each waits for its turn, holding its
    /// caller's thread, so a device has at most one queued per calling thread.
    pub max_queued_control: usize,
}

impl Default for WorkerOptions {
    fn default() -> Self {
        WorkerOptions {
            workers: 2,
            cost: Cost::Work,
            quantum: DEFAULT_QUANTUM_NS,
            capacity: 1024,
            rebalance_every: 65_536,
            yield_when_busy: false,
            slice: ThreadSlice::Kernel,
            max_queued_control: DEFAULT_MAX_QUEUED_CONTROL,
        }
    }
}

/// The default [`WorkerOptions::max_queued_control`]: 65,536 turns of control work per
/// device, as many as the packets the front lets a device have inside the workers with the
/// default queue (`BACKLOG_FACTOR` × 1,024). A controller's batch of up to that many writes
/// posted as steps fits whole.
pub const DEFAULT_MAX_QUEUED_CONTROL: usize = 65_536;

/// One device's control work posted and not started yet, counted by the front against
/// [`WorkerOptions::max_queued_control`], and the posts refused at that bound.
#[derive(Debug, Default)]
struct ControlQueue {
    queued: AtomicUsize,
    refused: AtomicU64,
}

/// Turns of a device's control work reserved in its [`ControlQueue`], carried inside the
/// posted job: each turn gives one back as it starts ([`Ticket::start`]), and dropping the
/// job gives back whatever it still holds, however it leaves the queue (run, a batch ended by
/// a panic, the device removed, the worker gone, the message refused).
struct Ticket {
    q: Arc<ControlQueue>,
    left: usize,
}

impl Ticket {
    fn start(&mut self) {
        if self.left > 0 {
            self.left -= 1;
            self.q.queued.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.q.queued.fetch_sub(self.left, Ordering::AcqRel);
    }
}

/// The default quantum: 20 µs of a device's processing per round (a device's turn is cut to
/// it, plus at most one packet; a waiting device's packets wait at most the other devices'
/// turns).
pub const DEFAULT_QUANTUM_NS: u64 = 20_000;

/// Frame buffers the front keeps for arriving packets, at most.
const MAX_SPARE: usize = 4096;

/// ... and at least (see `VirtWorkers::keep`).
const FRONT_KEEP_MIN: usize = 64;

/// Packet instances and output buffers each device on a worker may allocate
/// (`tern_dataplane::Switch::set_buffer_quota`, a DPDK mempool's size): its clones, multicast
/// replicas, resubmits, recirculations and transmitted frames take them from its pools; with
/// a pool empty past that, the copy is dropped and counted (`DeviceStats::buffer_drops`),
/// never allocated on the packet path. Output buffers come back to the worker whose devices
/// sent them ([`VirtWorkers::recycle_outputs`]) and go to the devices that send frames out.
pub const DEVICE_BUFFERS: usize = 1024;

/// Bytes a new frame buffer gets beyond the frame it first carries, for the headers a program
/// adds when the buffer later carries an output (as a DPDK mbuf's tailroom).
const FRAME_TAILROOM: usize = 128;

/// Devices whose backlog the front bounds (ids below this; larger ids are not bounded).
const BOUNDED_IDS: usize = 4096;

/// A device's packets inside the workers (inbox, staging, queue) are bounded by this many
/// times its queue's capacity: past it the front drops the device's arriving packets before
/// copying them (counted with its `overflow`). A flood cannot grow memory without bound, nor
/// make the front copy and hand over frames its worker will only drop.
const BACKLOG_FACTOR: u64 = 64;

/// Per device id: the packets of the device that left its worker's scheduler (served or
/// overflowed), as its worker last published them (after every round).
type DoneCounts = Arc<Vec<std::sync::atomic::AtomicU64>>;

type Job = Box<dyn FnOnce(&mut VirtSwitch, &mut FairScheduler) + Send>;

/// Devices moving between workers, with their port maps and waiting packets.
pub(crate) struct Moved {
    devices: Vec<Device>,
    maps: BTreeMap<DeviceId, BTreeMap<Port, Target>>,
    queues: Vec<(DeviceId, Queue)>,
    /// How long taking them out held the source worker.
    took: Duration,
}

pub(crate) enum Msg {
    /// A classified packet: (device, virtual ingress port, frame).
    Packet(DeviceId, Port, Vec<u8>),
    /// The end of one dispatch's packets: each device's staged packets join its queue a
    /// dispatch at a time (whole, when they fit), so a backlog of dispatches waits in order
    /// in its device's staging rather than overflowing the device's queue all at once.
    Round,
    /// A control operation, run between two rounds.
    Call(Job),
    /// Control work of one device, queued in its fair share ([`VirtWorkers::post`]).
    Post(DeviceId, DeviceWork),
    Take(Vec<DeviceId>, mpsc::Sender<Moved>),
    Put(Box<Moved>),
    /// Stop and give the shard back.
    Stop(mpsc::Sender<(VirtSwitch, FairScheduler)>),
}

/// What a worker's inbox holds, under its lock.
#[derive(Default)]
struct Inbox {
    /// Messages in arrival order (a ring that keeps its capacity).
    items: VecDeque<Msg>,
    /// The worker waits with nothing queued and nothing to run.
    idle: bool,
    /// Callers of [`VirtWorkers::wait_idle`] waiting for this worker: the worker signals
    /// `idle` only then (a condition variable's notify is a system call even with nobody
    /// waiting, and the victim's worker goes idle after every dispatch).
    idle_waiters: usize,
    /// The front has gone: the worker ends once its queues are empty.
    closed: bool,
    /// The worker thread has ended (messages are refused).
    gone: bool,
}

/// A worker's inbox with its two wake-ups.
#[derive(Default)]
pub(crate) struct Mailbox {
    inbox: Mutex<Inbox>,
    /// Set (under the lock) whenever messages are queued, cleared when the worker takes
    /// them: the worker looks at it between two chunks of a round without taking the lock.
    pending: AtomicBool,
    /// The worker waits here for messages.
    wake: Condvar,
    /// [`VirtWorkers::wait_idle`] waits here for the worker to become idle.
    idle: Condvar,
}

/// One worker's outputs, in the order they ran (a ring that keeps its capacity).
#[derive(Default)]
struct Outputs {
    frames: VecDeque<OutputPacket>,
    /// Set by [`VirtWorkers::take_output_channel`]: each device turn's outputs go down this
    /// channel (one `Vec` per turn) instead of into `frames`.
    forward: Option<mpsc::Sender<Vec<OutputPacket>>>,
    /// Frame buffers the workers hand back to the front: served input buffers no device
    /// needs for its outputs (a flood that sends nothing out, or overflows its queue), so
    /// the front's pool does not run dry and allocate per arriving frame.
    spares: Vec<Vec<u8>>,
    /// Frame buffers the front gives back to this worker (outputs it transmitted beyond
    /// what its own pool keeps): the worker's devices' next output buffers. Nobody frees a
    /// frame buffer on the packet path; they go round.
    back: Vec<Vec<u8>>,
}

/// Served buffers a worker keeps for its devices' outputs; past [`KEEP_HIGH`] it hands the
/// excess down to this many back to the front.
const KEEP_LOW: usize = 256;
const KEEP_HIGH: usize = 1024;

/// The outputs of every worker: one ring per worker under its own lock, so a worker handing
/// over a flood's frames never holds up another worker's hand-over (the victim's), and the
/// front's wake-up.
struct Outbox {
    q: Vec<Mutex<Outputs>>,
    /// The workers whose outputs the front waits for ([`VirtWorkers::wait_outputs_from`]),
    /// one bit per worker (workers from 63 on share bit 63): a worker wakes it only then (no
    /// system call per round otherwise), and a worker the front does not wait for never.
    waiting: AtomicU64,
    sig: Mutex<()>,
    ready: Condvar,
    /// Per worker: the output buffers its devices are owed for the frames they sent away
    /// and could not be paid yet (published after each device turn): how many of the
    /// transmitted frames the front gives back to it ([`VirtWorkers::recycle_outputs`]).
    want: Vec<AtomicUsize>,
    /// Per worker: the front put buffers into its `back` (one load when it did not).
    returned: Vec<AtomicBool>,
}

impl Outbox {
    fn new(workers: usize) -> Outbox {
        Outbox {
            q: (0..workers).map(|_| Mutex::default()).collect(),
            waiting: AtomicU64::new(0),
            sig: Mutex::new(()),
            ready: Condvar::new(),
            want: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            returned: (0..workers).map(|_| AtomicBool::new(false)).collect(),
        }
    }

    /// Wake the front if it waits for worker `w`'s outputs (after frames were added: see
    /// `wait_outputs_from`).
    fn wake(&self, w: usize) {
        if self.waiting.load(Ordering::SeqCst) & worker_bit(w) != 0 {
            // Taking `sig` orders this after the front's look at the rings (it holds `sig`
            // from setting the flag until its wait releases it); the notify comes after
            // `sig` is free again, so the woken front does not wait for this thread's lock.
            drop(lock(&self.sig));
            self.ready.notify_all();
        }
    }
}

impl Mailbox {
    /// Queue `m` for the worker (waking it if it waits); `Err` when the worker has ended.
    pub(crate) fn post(&self, m: Msg) -> Result<(), Msg> {
        let mut ib = lock(&self.inbox);
        if ib.gone {
            return Err(m);
        }
        ib.items.push_back(m);
        self.pending.store(true, Ordering::Release);
        if ib.idle {
            self.wake.notify_one();
        }
        Ok(())
    }
}

/// Worker `w`'s bit in [`Outbox::waiting`].
fn worker_bit(w: usize) -> u64 {
    1 << w.min(63)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Marks the worker gone when its thread ends (also by a panic): its queued messages are
/// dropped, so every caller waiting for an answer gets an error instead of waiting forever.
struct Gone(Arc<Mailbox>);

impl Drop for Gone {
    fn drop(&mut self) {
        let mut ib = lock(&self.0.inbox);
        ib.gone = true;
        ib.items.clear();
        self.0.idle.notify_all();
    }
}

/// Between two chunks of a round: move the packets, dispatch ends and posted control work
/// that arrived since into `arrivals`, in order, up to the first message that must wait for
/// the round's end (a control call, a device moving, a stop). The scheduler stages the
/// packets per device, so a backlog of one device's dispatches does not hold another's
/// packets back ([`FairScheduler::stage`]). Costs one atomic load when nothing came.
fn poll_inbox(local: &mut VecDeque<Msg>, mb: &Mailbox, arrivals: &mut Vec<Arrival>) {
    for _ in 0..2 {
        if local.is_empty() {
            if !mb.pending.load(Ordering::Acquire) {
                return;
            }
            let mut ib = lock(&mb.inbox);
            mb.pending.store(false, Ordering::Relaxed);
            std::mem::swap(&mut ib.items, local);
        }
        while let Some(m) = local.front() {
            match m {
                Msg::Packet(..) | Msg::Round | Msg::Post(..) => {}
                _ => return,
            }
            match local.pop_front() {
                Some(Msg::Packet(id, vport, data)) => {
                    arrivals.push(Arrival::Packet(id, vport, data));
                }
                Some(Msg::Post(id, job)) => arrivals.push(Arrival::Job(id, job)),
                _ => arrivals.push(Arrival::Round),
            }
        }
    }
}

fn worker(
    mut vs: VirtSwitch,
    mut fair: FairScheduler,
    mb: Arc<Mailbox>,
    up: Arc<Outbox>,
    me: usize,
    done: DoneCounts,
    yield_when_busy: bool,
) {
    let publish = |fair: &FairScheduler| {
        for (id, n) in fair.done_counts() {
            if let Some(c) = done.get(id as usize) {
                c.store(n, Ordering::Release);
            }
        }
    };
    let _gone = Gone(mb.clone());
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut local: VecDeque<Msg> = VecDeque::new();
    // Called after each device's turn in a round: that device's outputs go up at once (a
    // victim served first does not wait for the rest of the round).
    let send_up = |vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>, spare: &mut Vec<Vec<u8>>| {
        let returned = up.returned[me].swap(false, Ordering::Acquire);
        if !out.is_empty() || returned {
            let sent = out.len();
            {
                let mut q = lock(&up.q[me]);
                if let Some(tx) = &q.forward {
                    let _ = tx.send(std::mem::take(out));
                }
                q.frames.extend(out.drain(..));
                // Buffers the front gave back: this shard's devices' next output buffers.
                spare.append(&mut q.back);
            }
            if sent > 0 {
                up.wake(me);
            }
        }
        // The frames left the shard for good: each device that sent frames out is owed as
        // many buffers for its next outputs (a chain's last device, not its first), paid
        // from the served input buffers and those the front gave back, up to what its pool
        // takes ([`DEVICE_BUFFERS`]).
        vs.feed_producers(spare);
        up.want[me].store(vs.buffers_owed(), Ordering::Relaxed);
        if spare.len() > KEEP_HIGH {
            // The excess goes to the front (never freed here: a buffer the front allocated
            // would be freed in this thread's allocator, and the front would allocate anew).
            lock(&up.q[me]).spares.extend(spare.drain(KEEP_LOW..));
        }
    };
    loop {
        if local.is_empty() {
            let mut ib = lock(&mb.inbox);
            if !fair.has_work() {
                while ib.items.is_empty() {
                    if ib.closed {
                        return;
                    }
                    ib.idle = true;
                    if ib.idle_waiters > 0 {
                        mb.idle.notify_all();
                    }
                    ib = mb.wake.wait(ib).unwrap_or_else(PoisonError::into_inner);
                }
            }
            ib.idle = false;
            // Take everything at once; both rings keep their capacity.
            mb.pending.store(false, Ordering::Relaxed);
            std::mem::swap(&mut ib.items, &mut local);
        }
        // Stage everything up to the first control message, then one round (a control
        // message runs after the round, so it sees the packets dispatched before it run as
        // far as their shares allow, as when one dispatch was staged per round). Staging a
        // backlog of dispatches at once puts each device's packets in its own staging at
        // once: a victim's packet behind a flood's dispatches waits for no chunk.
        let mut staged = false;
        while let Some(m) = local.front() {
            let control = !matches!(m, Msg::Packet(..) | Msg::Round | Msg::Post(..));
            if control && staged {
                break;
            }
            let Some(m) = local.pop_front() else { break };
            match m {
                Msg::Round => {
                    fair.end_dispatch();
                    staged = true;
                }
                Msg::Packet(id, vport, data) => {
                    fair.stage(id, vport, data);
                    staged = true;
                }
                Msg::Call(job) => job(&mut vs, &mut fair),
                Msg::Post(id, job) => {
                    fair.queue_job(id, job);
                    staged = true;
                }
                Msg::Take(ids, reply) => {
                    let t = Instant::now();
                    let (devices, maps) = vs.take_devices(&ids);
                    let queues = ids
                        .iter()
                        .filter_map(|&id| fair.take_queue(id).map(|q| (id, q)))
                        .collect();
                    let _ = reply.send(Moved {
                        devices,
                        maps,
                        queues,
                        took: t.elapsed(),
                    });
                }
                Msg::Put(m) => {
                    let m = *m;
                    vs.put_devices(m.devices, m.maps);
                    for (id, q) in m.queues {
                        fair.put_queue(id, q);
                    }
                }
                Msg::Stop(reply) => {
                    // Run what is queued, then hand the shard back.
                    while fair.has_work() {
                        fair.run_round_flushing(&mut vs, &mut out, &send_up);
                    }
                    let _ = reply.send((vs, fair));
                    return;
                }
            }
        }
        if fair.has_work() {
            fair.run_round_polling(&mut vs, &mut out, &send_up, |arrivals| {
                poll_inbox(&mut local, &mb, arrivals)
            });
            publish(&fair);
            if yield_when_busy && fair.has_work() {
                std::thread::yield_now();
            }
        }
    }
}

/// Ports [`sole_devices`] looks at (larger port numbers are always classified).
const SOLE_PORTS: usize = 1024;

/// Per physical port below [`SOLE_PORTS`], the device every packet arriving on it is
/// classified to, when the rules make it one: every rule that can match on the port (its
/// own and the rules for any port) names that device, and one of them matches every packet
/// (no VLAN, no field). Which rule matches (and the virtual port) may still depend on the
/// frame, the device does not.
fn sole_devices(rules: &[Rule]) -> Vec<Option<DeviceId>> {
    let of = |port: Option<Port>| -> Option<DeviceId> {
        let mut on = rules.iter().filter(|r| r.port.is_none() || r.port == port);
        let first = on.clone().next()?.device;
        let one = on.clone().all(|r| r.device == first);
        let all = on.any(|r| r.vlan.is_none() && r.field.is_none());
        (one && all).then_some(first)
    };
    // Ports no rule names see only the rules for any port.
    let mut sole = vec![of(None); SOLE_PORTS];
    for r in rules {
        if let Some(p) = r.port.filter(|&p| (p as usize) < SOLE_PORTS) {
            sole[p as usize] = of(Some(p));
        }
    }
    sole
}

/// The groups of devices joined by links (in either direction) in any of `topos`.
fn groups(devices: &[DeviceId], topos: &[&Topology]) -> Vec<Vec<DeviceId>> {
    let index: HashMap<DeviceId, usize> =
        devices.iter().enumerate().map(|(i, &d)| (d, i)).collect();
    let mut parent: Vec<usize> = (0..devices.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for t in topos {
        for (d, map) in &t.port_maps {
            for target in map.values() {
                if let Target::Link { device, .. } = target {
                    if let (Some(&a), Some(&b)) = (index.get(d), index.get(device)) {
                        let (ra, rb) = (root(&mut parent, a), root(&mut parent, b));
                        parent[ra] = rb;
                    }
                }
            }
        }
    }
    let mut by_root: BTreeMap<usize, Vec<DeviceId>> = BTreeMap::new();
    for (i, &d) in devices.iter().enumerate() {
        let r = root(&mut parent, i);
        by_root.entry(r).or_default().push(d);
    }
    by_root.into_values().collect()
}

/// The part of `t` a worker holding `devices` needs: their port maps (no rules: packets
/// arrive classified).
fn shard_topology(t: &Topology, devices: &BTreeSet<DeviceId>) -> Topology {
    Topology {
        rules: Vec::new(),
        port_maps: t
            .port_maps
            .iter()
            .filter(|(d, _)| devices.contains(d))
            .map(|(d, m)| (*d, m.clone()))
            .collect(),
        vlans: t
            .vlans
            .iter()
            .filter(|(d, _)| devices.contains(d))
            .map(|(d, m)| (*d, m.clone()))
            .collect(),
    }
}

/// A [`VirtSwitch`]'s devices spread over worker threads (see the module documentation).
pub struct VirtWorkers {
    opts: WorkerOptions,
    boxes: Vec<Arc<Mailbox>>,
    handles: Vec<JoinHandle<()>>,
    /// Per worker: its thread's kernel id.
    tids: Vec<i32>,
    /// The slice (ns) the workers asked for (`None`: the kernel's default).
    slice: Option<u64>,
    up: Arc<Outbox>,
    /// Outputs collected from the workers' rings before a move, handed out first.
    held: VecDeque<OutputPacket>,
    /// Per device id: packets handed to its worker, and those that left its scheduler
    /// (published by the workers): the difference bounds its backlog ([`BACKLOG_FACTOR`]).
    sent: Vec<u64>,
    done: DoneCounts,
    backlog_bound: u64,
    /// Packets the front dropped because their device's backlog was at its bound.
    front_drops: BTreeMap<DeviceId, u64>,
    /// Per device: its posted control work not started yet ([`WorkerOptions::max_queued_control`]).
    control: HashMap<DeviceId, Arc<ControlQueue>>,
    /// Per physical port (below [`SOLE_PORTS`]): the device every packet arriving on it is
    /// classified to, when one is ([`sole_devices`]): a frame for it at its backlog bound is
    /// dropped before it is classified.
    sole: Vec<Option<DeviceId>>,
    /// Frames dropped that way ([`VirtWorkers::port_drops`]).
    port_drops: u64,
    /// Frame buffers for arriving packets (given back by [`VirtWorkers::recycle_outputs`]).
    spare: Vec<Vec<u8>>,
    /// How many of the transmitted frames' buffers `spare` keeps (twice the largest
    /// dispatch so far, 64 to [`MAX_SPARE`]); the rest go back to the workers, whose devices
    /// send the next frames in them ([`VirtWorkers::recycle_outputs`]).
    keep: usize,
    topo: Topology,
    cls: Classifier,
    /// The devices in quarantine as the workers report them, and what each physical port's
    /// frames can reach given them ([`Classifier::port_states`], recomputed when either
    /// changed: `ports_gen` is the board's generation they were computed at).
    board: Arc<Quarantined>,
    ports: PortStates,
    ports_gen: u64,
    snapshots: HashMap<String, Topology>,
    max_hops: u32,
    /// Device → worker.
    assign: BTreeMap<DeviceId, usize>,
    /// Bytes dispatched per device since the last rebalance.
    load: BTreeMap<DeviceId, u64>,
    since: u64,
    moves: u64,
    stats: VirtStats,
    /// Per worker: the packets of the current dispatch (kept for their capacity).
    batches: Vec<Vec<(DeviceId, Port, Vec<u8>)>>,
    /// Compiles programs and builds devices off the workers (its cache of compiled programs
    /// is shared by every device built here); shared with [`WorkerControl`], never taken on
    /// the packet path.
    factory: Arc<Mutex<VirtSwitch>>,
    /// `assign` as the control threads see it (see [`WorkerControl`]).
    routes: Arc<RwLock<BTreeMap<DeviceId, usize>>>,
    /// How long the last control operation held a worker (the longest, when it ran on
    /// several).
    pause: Cell<Duration>,
}

impl VirtWorkers {
    /// Spread `vs`'s devices over `opts.workers` threads (groups of linked devices kept
    /// together, by device count). Its topology, snapshots and hop budget carry over.
    pub fn new(mut vs: VirtSwitch, opts: WorkerOptions) -> VirtWorkers {
        let n = opts.workers.max(1);
        let topo = vs.topology().clone();
        let snapshots = vs.snapshots().clone();
        let max_hops = vs.max_hops();
        let ids = vs.device_ids();
        let mut sizes = vec![0usize; n];
        let mut assign = BTreeMap::new();
        let mut gs = groups(&ids, &[&topo]);
        gs.sort_by_key(|g| std::cmp::Reverse(g.len()));
        for g in gs {
            let w = (0..n).min_by_key(|&w| (sizes[w], w)).expect("n >= 1");
            sizes[w] += g.len();
            for d in g {
                assign.insert(d, w);
            }
        }
        // Devices added later share the programs compiled so far.
        let board: Arc<Quarantined> = Arc::default();
        let factory = VirtSwitch {
            programs: std::mem::take(&mut vs.programs),
            board: Some(board.clone()),
            ..VirtSwitch::default()
        };
        let up: Arc<Outbox> = Arc::new(Outbox::new(n));
        let done: DoneCounts = Arc::new((0..BOUNDED_IDS).map(|_| Default::default()).collect());
        let mut boxes = Vec::new();
        let mut handles = Vec::new();
        // Each worker asks for its slice itself (a thread sets its own attributes), then says
        // which thread it is.
        let slice = opts.slice.resolve(n, sched::cpus());
        let (tid_tx, tid_rx) = mpsc::channel();
        for w in 0..n {
            let mine: Vec<DeviceId> = assign
                .iter()
                .filter(|(_, &x)| x == w)
                .map(|(&d, _)| d)
                .collect();
            let (devices, maps) = vs.take_devices(&mine);
            let mut shard = VirtSwitch::new();
            shard.board = Some(board.clone());
            shard.set_max_hops(max_hops);
            shard.set_buffer_quota(Some(DEVICE_BUFFERS));
            shard.put_devices(devices, maps);
            let fair = FairScheduler::with_cost(opts.cost, opts.quantum, opts.capacity);
            let mb: Arc<Mailbox> = Arc::default();
            let (mb2, up2) = (mb.clone(), up.clone());
            let yield_when_busy = opts.yield_when_busy;
            let done2 = Arc::clone(&done);
            let tid_tx = tid_tx.clone();
            handles.push(
                std::thread::Builder::new()
                    .name(format!("tern-virt-{w}"))
                    .spawn(move || {
                        // A kernel that refuses keeps its own slice (`thread_slice` tells).
                        if let Some(ns) = slice {
                            let _ = sched::set_current_slice(ns);
                        }
                        let _ = tid_tx.send((w, sched::current_tid()));
                        drop(tid_tx);
                        worker(shard, fair, mb2, up2, w, done2, yield_when_busy)
                    })
                    .expect("spawn a worker thread"),
            );
            boxes.push(mb);
        }
        drop(tid_tx);
        let mut tids = vec![0; n];
        for (w, tid) in tid_rx.iter() {
            tids[w] = tid;
        }
        VirtWorkers {
            opts: WorkerOptions { workers: n, ..opts },
            boxes,
            handles,
            tids,
            slice,
            up,
            held: VecDeque::new(),
            sent: vec![0; BOUNDED_IDS],
            backlog_bound: BACKLOG_FACTOR * opts.capacity.max(1) as u64,
            done,
            front_drops: BTreeMap::new(),
            control: assign.keys().map(|&d| (d, Arc::default())).collect(),
            sole: sole_devices(&topo.rules),
            port_drops: 0,
            spare: Vec::new(),
            keep: FRONT_KEEP_MIN,
            cls: Classifier::new(&topo.rules),
            board,
            ports: PortStates::live(),
            ports_gen: u64::MAX,
            routes: Arc::new(RwLock::new(assign.clone())),
            topo,
            snapshots,
            max_hops,
            assign,
            load: BTreeMap::new(),
            since: 0,
            moves: 0,
            stats: VirtStats::default(),
            batches: (0..n).map(|_| Vec::new()).collect(),
            factory: Arc::new(Mutex::new(factory)),
            pause: Cell::new(Duration::ZERO),
        }
    }

    /// The handle control threads reach the devices through (leases of the owning worker's
    /// shard: `Shared::Workers(pool.control())` for `SharedDevice` and `VirtTarget`).
    pub fn control(&self) -> WorkerControl {
        WorkerControl {
            routes: Arc::clone(&self.routes),
            boxes: self.boxes.clone(),
            factory: Arc::clone(&self.factory),
        }
    }

    /// Hand the workers' output channel to the caller (for a transmit thread of its own, as
    /// live ports need); [`VirtWorkers::take_outputs`] gives nothing afterwards. The frames
    /// sent down the channel do not come back, so the devices' buffer pools are unbounded
    /// from then on ([`DEVICE_BUFFERS`] would run dry: a multicast's copies would be dropped);
    /// their extra output buffers are allocated as before h-pool.
    pub fn take_output_channel(&mut self) -> mpsc::Receiver<Vec<OutputPacket>> {
        let (tx, rx) = mpsc::channel();
        for q in &self.up.q {
            lock(q).forward = Some(tx.clone());
        }
        for w in 0..self.boxes.len() {
            let _ = self.run_on(w, |vs, _| vs.set_buffer_quota(None));
        }
        rx
    }

    fn factory(&self) -> std::sync::MutexGuard<'_, VirtSwitch> {
        self.factory.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn write_routes(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<DeviceId, usize>> {
        self.routes.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Worker threads.
    pub fn workers(&self) -> usize {
        self.opts.workers
    }

    /// Per worker: its thread's kernel id (`gettid`; 0 off Linux): for `taskset`, `chrt`,
    /// `/proc/PID/task/TID/schedstat`, or [`crate::sched::thread_slice`].
    pub fn thread_ids(&self) -> &[i32] {
        &self.tids
    }

    /// The time slice (ns) the worker threads asked the kernel for when they started
    /// ([`WorkerOptions::slice`] resolved; `None`: the kernel's default).
    pub fn slice_ns(&self) -> Option<u64> {
        self.slice
    }

    /// The worker a device runs on.
    pub fn worker_of(&self, id: DeviceId) -> Option<usize> {
        self.assign.get(&id).copied()
    }

    /// Groups moved between workers so far.
    pub fn moves(&self) -> u64 {
        self.moves
    }

    /// The device ids, ascending.
    pub fn device_ids(&self) -> Vec<DeviceId> {
        self.assign.keys().copied().collect()
    }

    /// The live topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    /// Classify packets arriving on physical ports and hand each to its device's worker
    /// (returns at once; outputs come through [`VirtWorkers::take_outputs`]).
    pub fn dispatch(&mut self, pkts: &[(Port, &[u8])]) {
        self.keep = self.keep.max(2 * pkts.len()).min(MAX_SPARE);
        if self.spare.len() < pkts.len() {
            // Buffers the workers handed back (served, not needed for outputs).
            for q in &self.up.q {
                let mut q = lock(q);
                let room = MAX_SPARE.saturating_sub(self.spare.len());
                let n = q.spares.len().min(room);
                let at = q.spares.len() - n;
                self.spare.extend(q.spares.drain(at..));
            }
        }
        let gen = self.board.generation();
        if gen != self.ports_gen {
            self.ports = self.cls.port_states(&self.board.ids());
            self.ports_gen = gen;
        }
        for &(port, data) in pkts {
            // A port whose rules all lead to quarantined devices (or none) is dropped here,
            // before classifying (a VLAN or field classifier looks into the frame).
            match self.ports.get(port) {
                PortState::Live => {}
                PortState::NoRule => {
                    self.stats.unclassified += 1;
                    continue;
                }
                PortState::Quarantined => {
                    self.stats.quarantined_port += 1;
                    continue;
                }
            }
            // A port whose every packet goes to one device at its backlog bound: dropped
            // before classifying (and copying) it, counted as below.
            if let Some(&Some(id)) = self.sole.get(port as usize) {
                if let Some(&sent) = self.sent.get(id as usize) {
                    let done = self.done[id as usize].load(Ordering::Acquire);
                    if sent.saturating_sub(done) >= self.backlog_bound {
                        *self.front_drops.entry(id).or_default() += 1;
                        self.port_drops += 1;
                        continue;
                    }
                }
            }
            let Some((id, vport)) = self.cls.classify(port, data) else {
                self.stats.unclassified += 1;
                continue;
            };
            let Some(&w) = self.assign.get(&id) else {
                self.stats.dangling += 1;
                continue;
            };
            if let Some(sent) = self.sent.get_mut(id as usize) {
                let done = self.done[id as usize].load(Ordering::Acquire);
                if sent.saturating_sub(done) >= self.backlog_bound {
                    *self.front_drops.entry(id).or_default() += 1;
                    continue;
                }
                *sent += 1;
            }
            *self.load.entry(id).or_default() += data.len() as u64;
            // A new buffer gets tailroom: it may come back as a device's output buffer, which
            // the fast lane reserves for the program's largest emit (headers it adds); without
            // room that reserve would reallocate on the packet path the first time a given
            // buffer turns into an output (`tests/alloc_flood.rs` caught it).
            let mut buf = self
                .spare
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(data.len() + FRAME_TAILROOM));
            buf.clear();
            buf.extend_from_slice(data);
            self.batches[w].push((id, vport, buf));
        }
        for (w, b) in self.batches.iter_mut().enumerate() {
            if b.is_empty() {
                continue;
            }
            let mb = &self.boxes[w];
            let mut ib = lock(&mb.inbox);
            if ib.gone {
                // A stopped worker: its devices' packets are lost with it.
                self.stats.dangling += b.len() as u64;
                self.spare.extend(b.drain(..).map(|(_, _, d)| d));
                continue;
            }
            ib.items
                .extend(b.drain(..).map(|(id, vport, d)| Msg::Packet(id, vport, d)));
            ib.items.push_back(Msg::Round);
            mb.pending.store(true, Ordering::Release);
            // Woken after the lock is free (an idle worker is inside its wait: it cannot
            // miss this), so it does not wake only to wait for the inbox's lock.
            let idle = ib.idle;
            drop(ib);
            if idle {
                mb.wake.notify_one();
            }
        }
        self.since += pkts.len() as u64;
        if self.opts.rebalance_every > 0 && self.since >= self.opts.rebalance_every {
            self.rebalance();
        }
    }

    /// Append the outputs the workers have produced so far (physical ports; per device in
    /// order; worker by worker, each worker's in the order they ran).
    pub fn take_outputs(&mut self, out: &mut Vec<OutputPacket>) {
        out.extend(self.held.drain(..));
        for q in &self.up.q {
            out.extend(lock(q).frames.drain(..));
        }
    }

    /// Move every worker's outputs so far into `held` (before a device changes worker).
    fn collect_outputs(&mut self) {
        for q in &self.up.q {
            self.held.extend(lock(q).frames.drain(..));
        }
    }

    /// Wait until some outputs are ready for [`VirtWorkers::take_outputs`] (true), or until
    /// `timeout` has passed (false): for a caller that waits for its frames without spinning.
    pub fn wait_outputs(&self, timeout: Duration) -> bool {
        self.wait_outputs_from(&[], timeout)
    }

    /// [`VirtWorkers::wait_outputs`] for the outputs of `workers` only (empty: every
    /// worker): the other workers' hand-overs do not wake the caller (their frames wait in
    /// their rings for the next [`VirtWorkers::take_outputs`]). For a caller that needs
    /// some devices' outputs promptly and can collect the rest when it runs anyway — the
    /// isolation bench's front, which a flooding device's worker woke with every turn.
    pub fn wait_outputs_from(&self, workers: &[usize], timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let up = &self.up;
        let n = up.q.len();
        let mask = if workers.is_empty() {
            (0..n).fold(0, |m, w| m | worker_bit(w))
        } else {
            workers.iter().fold(0, |m, &w| m | worker_bit(w))
        };
        let mut g = lock(&up.sig);
        let ready = loop {
            // Say so first, then look: a worker adding frames after the look sees the flag
            // and wakes us under `sig`, which we hold until the wait releases it.
            up.waiting.store(mask, Ordering::SeqCst);
            if !self.held.is_empty()
                || (0..n).any(|w| mask & worker_bit(w) != 0 && !lock(&up.q[w]).frames.is_empty())
            {
                break true;
            }
            let now = Instant::now();
            if now >= end {
                break false;
            }
            g = up
                .ready
                .wait_timeout(g, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        };
        up.waiting.store(0, Ordering::SeqCst);
        drop(g);
        ready
    }

    /// Give transmitted frames back (empties `out`): their buffers carry the next arriving
    /// packets, so the steady state allocates nothing per packet.
    ///
    /// The front keeps what its next dispatches need (twice the largest dispatch so far),
    /// gives the worker whose devices are owed the most buffers (a device sending more
    /// frames than it receives: multicast, clones) as many as they are owed, and keeps the
    /// rest for arriving frames: the front never frees a buffer a worker allocated, a
    /// device's pool refills as its frames are transmitted, and no buffer is handed back
    /// and forth that no device needs (each move costs both threads).
    pub fn recycle_outputs(&mut self, out: &mut Vec<OutputPacket>) {
        let keep = self.keep.saturating_sub(self.spare.len()).min(out.len());
        self.spare.extend(out.drain(..keep).map(|o| o.data));
        if out.is_empty() {
            return;
        }
        let up = &self.up;
        let w = (0..up.q.len())
            .max_by_key(|&w| up.want[w].load(Ordering::Relaxed))
            .unwrap_or(0);
        let want = up.want[w].load(Ordering::Relaxed);
        let n = want.min(out.len());
        if n > 0 {
            up.want[w].store(want - n, Ordering::Relaxed);
            lock(&up.q[w]).back.extend(out.drain(..n).map(|o| o.data));
            up.returned[w].store(true, Ordering::Release);
        }
        self.spare.extend(out.drain(..).map(|o| o.data));
    }

    /// Messages waiting in worker `w`'s inbox, not taken by the worker yet (packets, dispatch
    /// ends, control work): what a test or a monitor sees of a worker's backlog before it is
    /// staged (0 for a worker that does not exist).
    pub fn inbox_len(&self, w: usize) -> usize {
        self.boxes
            .get(w)
            .map_or(0, |mb| lock(&mb.inbox).items.len())
    }

    /// Wait until every packet dispatched so far has run (and its outputs are in
    /// [`VirtWorkers::take_outputs`]).
    pub fn wait_idle(&mut self) {
        for mb in &self.boxes {
            let mut ib = lock(&mb.inbox);
            while !(ib.gone || (ib.idle && ib.items.is_empty())) {
                ib.idle_waiters += 1;
                ib = mb.idle.wait(ib).unwrap_or_else(PoisonError::into_inner);
                ib.idle_waiters -= 1;
            }
        }
    }

    /// Queue a control message for worker `w`.
    fn send(&self, w: usize, m: Msg) -> Result<(), VirtError> {
        self.boxes[w].post(m).map_err(|_| Self::stopped(w))
    }

    /// [`VirtWorkers::dispatch`], wait until it has run, and append its outputs.
    pub fn process_batch(&mut self, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        self.dispatch(pkts);
        self.wait_idle();
        self.take_outputs(out);
    }

    fn stopped(w: usize) -> VirtError {
        VirtError::Topology(format!("worker {w} has stopped"))
    }

    fn run_on<R: Send + 'static>(
        &self,
        w: usize,
        f: impl FnOnce(&mut VirtSwitch, &mut FairScheduler) -> R + Send + 'static,
    ) -> Result<R, VirtError> {
        let (s, r) = mpsc::channel();
        self.send(
            w,
            Msg::Call(Box::new(move |vs, fair| {
                let t = Instant::now();
                // A panic in the operation is the caller's error, not the worker's end (its
                // other devices go on).
                let x = catch_unwind(AssertUnwindSafe(|| f(vs, fair)))
                    .map_err(|e| crate::fair::panic_text(&*e));
                let _ = s.send((x, t.elapsed()));
            })),
        )?;
        let (x, took) = r.recv().map_err(|_| Self::stopped(w))?;
        self.pause.set(self.pause.get().max(took));
        x.map_err(|m| VirtError::Topology(format!("worker {w}: the operation panicked: {m}")))
    }

    /// How long the last control operation ([`VirtWorkers::add_device`], `replace_device`,
    /// `remove_device`, `set_topology` and the snapshot and port calls, `call`) kept a worker
    /// from its devices' packets: the longest stop of one worker, from the moment it took the
    /// operation to its answer. Compiling and building a device happen on the caller's
    /// thread and are not part of it.
    pub fn last_pause(&self) -> Duration {
        self.pause.get()
    }

    /// Run `f` on the shard holding device `id`, on its worker between two rounds (after the
    /// packets dispatched before, in queue order; packets already staged or queued — a backlog
    /// of dispatches included — may run after it: use [`VirtWorkers::wait_idle`] first for a
    /// call that must see them run).
    /// The way to reach a device's runtime: `call(id, move |vs| vs.runtime(caller, id)...)`.
    pub fn call<R: Send + 'static>(
        &self,
        id: DeviceId,
        f: impl FnOnce(&mut VirtSwitch) -> R + Send + 'static,
    ) -> Result<R, VirtError> {
        let w = *self.assign.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        self.run_on(w, move |vs, _| {
            // A panic quarantines the device (a tenant's call into a device whose state
            // trips an assertion), as a panic in a posted job does.
            let mut x = None;
            crate::fair::guarded(vs, id, |vs| x = Some(f(vs)));
            x
        })?
        .ok_or_else(|| Self::job_panicked(id))
    }

    /// The answer to a caller whose control work panicked on the worker.
    fn job_panicked(id: DeviceId) -> VirtError {
        VirtError::Program {
            device: id,
            message: "the control call panicked; the device is quarantined".to_string(),
        }
    }

    /// [`VirtWorkers::post`] with an answer: `f` runs as a posted job of device `id` (in its
    /// turn of the fair share, charged like one) and what it returns comes down the returned
    /// channel — or, when `f` panics, an error (the device is then quarantined and the
    /// worker goes on with its other devices). A job dropped before it ran (the device
    /// removed) closes the channel without an answer.
    pub fn submit<R: Send + 'static>(
        &self,
        id: DeviceId,
        f: impl FnOnce(&mut VirtSwitch) -> R + Send + 'static,
    ) -> Result<mpsc::Receiver<Result<R, VirtError>>, VirtError> {
        let (tx, rx) = mpsc::channel();
        self.post(id, move |vs| {
            match catch_unwind(AssertUnwindSafe(|| f(vs))) {
                Ok(r) => {
                    let _ = tx.send(Ok(r));
                }
                Err(e) => {
                    let _ = tx.send(Err(Self::job_panicked(id)));
                    // The scheduler's boundary quarantines the device.
                    std::panic::resume_unwind(e)
                }
            }
        })?;
        Ok(rx)
    }

    /// Queue `f` to run on the shard holding device `id` without waiting for it (on its worker
    /// between two rounds, after the packets dispatched before): control-plane work that does
    /// not hold the caller, as a controller's stream of writes. What `f` returns is dropped.
    /// `f` is queued with the device's packets and runs in the device's turn of the fair
    /// scheduler ([`FairScheduler::enqueue_job`]): its work is charged to the device's share
    /// (a tenant's control flood spends its own turns, not its neighbours').
    pub fn post(
        &self,
        id: DeviceId,
        f: impl FnOnce(&mut VirtSwitch) + Send + 'static,
    ) -> Result<(), VirtError> {
        let w = *self.assign.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        let mut t = self.reserve(id, 1)?;
        self.send(
            w,
            Msg::Post(
                id,
                DeviceWork::Once(Box::new(move |vs| {
                    t.start();
                    f(vs)
                })),
            ),
        )
    }

    /// Reserve `turns` of device `id`'s control queue ([`WorkerOptions::max_queued_control`]),
    /// or refuse (counted) when they do not fit.
    fn reserve(&self, id: DeviceId, turns: usize) -> Result<Ticket, VirtError> {
        let q = self.control.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        let limit = self.opts.max_queued_control;
        match q
            .queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n.saturating_add(turns) <= limit).then_some(n + turns)
            }) {
            Ok(_) => Ok(Ticket {
                q: Arc::clone(q),
                left: turns,
            }),
            Err(queued) => {
                q.refused.fetch_add(1, Ordering::Relaxed);
                Err(VirtError::ControlBacklog {
                    device: id,
                    queued,
                    asked: turns,
                    limit,
                })
            }
        }
    }

    /// Turns of device `id`'s posted control work not started yet (jobs, and steps left of
    /// batches; [`WorkerOptions::max_queued_control`] bounds it); 0 for an unknown device.
    pub fn control_queued(&self, id: DeviceId) -> usize {
        self.control
            .get(&id)
            .map_or(0, |q| q.queued.load(Ordering::Acquire))
    }

    /// Posts of device `id` refused at its bound ([`DeviceStats::control_backlog_refused`]).
    fn control_refused(&self, id: DeviceId) -> u64 {
        self.control
            .get(&id)
            .map_or(0, |q| q.refused.load(Ordering::Relaxed))
    }

    /// [`VirtWorkers::post`] for a batch of control work cut into `steps` steps (a tenant's
    /// batch of table writes, one write a step): `f(vs, i)` runs step `i`, in order, one
    /// step per turn of the device in its fair share ([`FairScheduler::enqueue_steps`]), each
    /// charged by the entries it touched. A device beside it waits for at most one step, not
    /// for the whole batch.
    pub fn post_steps(
        &self,
        id: DeviceId,
        steps: usize,
        f: impl FnMut(&mut VirtSwitch, usize) + Send + 'static,
    ) -> Result<(), VirtError> {
        let w = *self.assign.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        if steps == 0 {
            return Ok(());
        }
        let mut t = self.reserve(id, steps)?;
        let mut f = f;
        self.send(
            w,
            Msg::Post(
                id,
                DeviceWork::Steps {
                    f: Box::new(move |vs, i| {
                        t.start();
                        f(vs, i)
                    }),
                    next: 0,
                    end: steps,
                },
            ),
        )
    }

    /// Time the stages of device `trace.device()`'s packets on every worker from now on
    /// ([`StageTrace`]: staged, released into its queue, run); `None` stops. Packets of the
    /// device dispatched before this call may be counted (wait until they are out first).
    pub fn set_trace(&self, trace: Option<Arc<StageTrace>>) -> Result<(), VirtError> {
        for w in 0..self.boxes.len() {
            let t = trace.clone();
            self.run_on(w, move |_, fair| fair.set_trace(t))?;
        }
        Ok(())
    }

    /// A device's counters (operator view).
    pub fn device_stats(&self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        let mut s = self.call(id, move |vs| vs.device_stats(crate::Caller::Operator, id))??;
        s.control_backlog_refused += self.control_refused(id);
        Ok(s)
    }

    /// A device's scheduler counters on its worker; `overflow` includes the packets the
    /// front dropped at the device's backlog bound ([`VirtWorkers::front_drops`]).
    pub fn fair_stats(&self, id: DeviceId) -> Result<FairStats, VirtError> {
        let w = *self.assign.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        let mut s = self.run_on(w, move |_, fair| fair.stats(id))?;
        s.overflow += self.front_drops(id);
        Ok(s)
    }

    /// Packets of device `id` the front dropped before copying them, because the device
    /// already had its bound of packets inside the workers (64 × its queue's capacity).
    pub fn front_drops(&self, id: DeviceId) -> u64 {
        self.front_drops.get(&id).copied().unwrap_or(0)
    }

    /// Of the front's drops at backlog bounds ([`VirtWorkers::front_drops`]), those made by
    /// the arriving port alone, before the frame was classified: the port's every packet
    /// goes to that one device (its rules, [`sole_devices`]).
    pub fn port_drops(&self) -> u64 {
        self.port_drops
    }

    /// A device id starts afresh (added or removed): its backlog count goes to zero.
    fn reset_backlog(&mut self, id: DeviceId) {
        if let Some(s) = self.sent.get_mut(id as usize) {
            *s = 0;
            self.done[id as usize].store(0, Ordering::Release);
        }
        self.front_drops.remove(&id);
    }

    /// Whole-switch counters: the front's (unclassified) plus every worker's.
    pub fn stats(&self) -> VirtStats {
        let mut s = self.stats;
        for w in 0..self.boxes.len() {
            if let Ok(x) = self.run_on(w, |vs, _| vs.stats()) {
                s.unclassified += x.unclassified;
                s.dangling += x.dangling;
            }
        }
        s
    }

    fn idlest(&self) -> usize {
        let mut count = vec![0usize; self.boxes.len()];
        for &w in self.assign.values() {
            count[w] += 1;
        }
        (0..count.len()).min_by_key(|&w| (count[w], w)).unwrap_or(0)
    }

    /// Load a new device on the worker with the fewest devices.
    pub fn add_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<(), VirtError> {
        if self.assign.contains_key(&id) {
            return Err(VirtError::DeviceExists(id));
        }
        self.pause.set(Duration::ZERO);
        // Compile and build here; the worker only takes the finished device in.
        let (devices, maps) = {
            let mut f = self.factory();
            f.add_device(id, spec)?;
            f.take_devices(&[id])
        };
        let w = self.idlest();
        self.run_on(w, move |vs, _| vs.put_devices(devices, maps))?;
        self.reset_backlog(id);
        self.control.insert(id, Arc::default());
        self.assign.insert(id, w);
        self.write_routes().insert(id, w);
        Ok(())
    }

    /// Remove a device (as [`VirtSwitch::remove_device`]); its waiting packets are dropped.
    pub fn remove_device(&mut self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        let w = *self.assign.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        self.pause.set(Duration::ZERO);
        // The front stops classifying into it first.
        self.topo.rules.retain(|r| r.device != id);
        self.topo.port_maps.remove(&id);
        self.topo.vlans.remove(&id);
        for map in self.topo.port_maps.values_mut() {
            for t in map.values_mut() {
                if matches!(t, Target::Link { device, .. } if *device == id) {
                    *t = Target::Drop;
                }
            }
        }
        self.cls = Classifier::new(&self.topo.rules);
        self.ports_gen = u64::MAX;
        self.sole = sole_devices(&self.topo.rules);
        self.assign.remove(&id);
        self.write_routes().remove(&id);
        self.load.remove(&id);
        let r = self.run_on(w, move |vs, fair| {
            fair.forget(id);
            vs.remove_device(id)
        })?;
        // Gone from the worker: it reports nothing more (a device added later under this id
        // starts in service).
        self.board.set(id, false);
        self.reset_backlog(id);
        let refused = self.control_refused(id);
        self.control.remove(&id);
        r.map(|s| DeviceStats {
            control_backlog_refused: s.control_backlog_refused + refused,
            ..s
        })
    }

    /// Replace a device's program (as [`VirtSwitch::replace_device`]).
    pub fn replace_device(
        &mut self,
        id: DeviceId,
        spec: DeviceSpec,
    ) -> Result<CarryReport, VirtError> {
        if !self.assign.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        self.pause.set(Duration::ZERO);
        // Compile and build here; the worker carries the entries over and swaps.
        let switch = self.factory().build_switch(id, &spec)?;
        let w = *self.assign.get(&id).ok_or(VirtError::NoSuchDevice(id))?;
        // A new program: the device's work is priced afresh.
        self.run_on(w, move |vs, fair| {
            let r = vs.install_replacement(id, switch, spec);
            if r.is_ok() {
                fair.recalibrate(id);
            }
            r
        })?
    }

    /// Move devices to worker `to` (with their state and waiting packets).
    fn move_devices(&mut self, ids: &[DeviceId], to: usize) -> Result<(), VirtError> {
        let mut from: BTreeMap<usize, Vec<DeviceId>> = BTreeMap::new();
        for &d in ids {
            match self.assign.get(&d) {
                Some(&w) if w != to => from.entry(w).or_default().push(d),
                _ => {}
            }
        }
        // Control threads' leases are ordered before or after each hand-over.
        let routes = Arc::clone(&self.routes);
        let mut routes = routes.write().unwrap_or_else(|e| e.into_inner());
        for (w, ds) in from {
            let (s, r) = mpsc::channel();
            self.send(w, Msg::Take(ds.clone(), s))?;
            let moved = r.recv().map_err(|_| Self::stopped(w))?;
            // The devices' outputs from their old worker are all in its ring now: collect
            // them before the new worker can add later ones to its own (per-device order).
            self.collect_outputs();
            self.pause.set(self.pause.get().max(moved.took));
            self.send(to, Msg::Put(Box::new(moved)))?;
            for d in ds {
                self.assign.insert(d, to);
                routes.insert(d, to);
            }
            self.moves += 1;
        }
        Ok(())
    }

    /// Pin device `id` and the devices linked with it to worker `to` (until the next
    /// rebalance moves them).
    pub fn move_group(&mut self, id: DeviceId, to: usize) -> Result<(), VirtError> {
        if !self.assign.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        if to >= self.boxes.len() {
            return Err(VirtError::Topology(format!(
                "worker {to} does not exist ({} workers)",
                self.boxes.len()
            )));
        }
        let ids = self.device_ids();
        let g = groups(&ids, &[&self.topo])
            .into_iter()
            .find(|g| g.contains(&id))
            .expect("every device is in a group");
        self.move_devices(&g, to)
    }

    /// Replace the whole topology (validated first; on error nothing changes). Devices that
    /// the old or the new links join are brought onto one worker first.
    pub fn set_topology(&mut self, t: Topology) -> Result<(), VirtError> {
        validate_topology(&t, |d| self.assign.contains_key(&d))?;
        self.pause.set(Duration::ZERO);
        let ids = self.device_ids();
        for g in groups(&ids, &[&self.topo, &t]) {
            let mut count: BTreeMap<usize, usize> = BTreeMap::new();
            for d in &g {
                *count.entry(self.assign[d]).or_default() += 1;
            }
            if count.len() > 1 {
                let to = count
                    .iter()
                    .max_by_key(|(w, c)| (**c, std::cmp::Reverse(**w)))
                    .map(|(w, _)| *w)
                    .expect("not empty");
                self.move_devices(&g, to)?;
            }
        }
        for w in 0..self.boxes.len() {
            let mine: BTreeSet<DeviceId> = self
                .assign
                .iter()
                .filter(|(_, &x)| x == w)
                .map(|(&d, _)| d)
                .collect();
            let part = shard_topology(&t, &mine);
            self.run_on(w, move |vs, _| vs.set_topology(part))??;
        }
        self.cls = Classifier::new(&t.rules);
        self.ports_gen = u64::MAX;
        self.sole = sole_devices(&t.rules);
        self.topo = t;
        Ok(())
    }

    /// Add one classifier rule.
    pub fn add_rule(&mut self, rule: crate::Rule) -> Result<(), VirtError> {
        let mut t = self.topo.clone();
        t.rules.push(rule);
        self.set_topology(t)
    }

    /// Map one virtual port of a device.
    pub fn map_port(&mut self, id: DeviceId, vport: Port, target: Target) -> Result<(), VirtError> {
        if !self.assign.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        let mut t = self.topo.clone();
        t.port_maps.entry(id).or_default().insert(vport, target);
        self.set_topology(t)
    }

    /// Make a device's virtual port tagged with VLAN `vid` (`None`: untagged).
    pub fn tag_port(
        &mut self,
        id: DeviceId,
        vport: Port,
        vid: Option<u16>,
    ) -> Result<(), VirtError> {
        if !self.assign.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        let t = crate::with_tag(&self.topo, id, vport, vid);
        self.set_topology(t)
    }

    /// Forget every stored snapshot.
    pub fn clear_snapshots(&mut self) {
        self.snapshots.clear();
    }

    /// The stored snapshots' names, sorted.
    pub fn snapshot_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.snapshots.keys().cloned().collect();
        v.sort();
        v
    }

    /// Set the hop budget on every worker.
    pub fn set_max_hops(&mut self, hops: u32) {
        self.max_hops = hops;
        for w in 0..self.boxes.len() {
            let _ = self.run_on(w, move |vs, _| vs.set_max_hops(hops));
        }
    }

    /// Store the live topology as snapshot `name`.
    pub fn save_snapshot(&mut self, name: &str) {
        self.snapshots.insert(name.to_string(), self.topo.clone());
    }

    /// Store `t` as snapshot `name` without activating it.
    pub fn store_snapshot(&mut self, name: &str, t: Topology) {
        self.snapshots.insert(name.to_string(), t);
    }

    /// Make snapshot `name` the live topology.
    pub fn activate_snapshot(&mut self, name: &str) -> Result<(), VirtError> {
        let t = self
            .snapshots
            .get(name)
            .cloned()
            .ok_or_else(|| VirtError::NoSuchSnapshot(name.to_string()))?;
        self.set_topology(t)
    }

    /// Bytes dispatched per worker since the last rebalance.
    pub fn worker_load(&self) -> Vec<u64> {
        let mut load = vec![0u64; self.boxes.len()];
        for (d, &b) in &self.load {
            if let Some(&w) = self.assign.get(d) {
                load[w] += b;
            }
        }
        load
    }

    /// Even the load between the busiest and the idlest worker (bytes dispatched since the
    /// last rebalance): move the group whose load brings the two closest, when that narrows
    /// the gap. Returns the groups moved (0 or 1) and starts a new measuring window.
    pub fn rebalance(&mut self) -> usize {
        self.since = 0;
        let load = self.worker_load();
        let n = load.len();
        let window = std::mem::take(&mut self.load);
        if n < 2 {
            return 0;
        }
        let hi = (0..n)
            .max_by_key(|&w| (load[w], std::cmp::Reverse(w)))
            .expect("n >= 2");
        let lo = (0..n).min_by_key(|&w| (load[w], w)).expect("n >= 2");
        let gap = load[hi] - load[lo];
        if gap == 0 {
            return 0;
        }
        let ids = self.device_ids();
        // The group on `hi` whose load is closest to half the gap; moving it must narrow the
        // gap (a group carrying more than the gap would only swap the roles).
        let best = groups(&ids, &[&self.topo])
            .into_iter()
            .filter(|g| self.assign[&g[0]] == hi)
            .map(|g| {
                let l: u64 = g.iter().map(|d| window.get(d).copied().unwrap_or(0)).sum();
                (g, l)
            })
            .filter(|(_, l)| *l > 0 && *l < gap)
            .min_by_key(|(_, l)| l.abs_diff(gap / 2));
        match best {
            Some((g, _)) => usize::from(self.move_devices(&g, lo).is_ok()),
            None => 0,
        }
    }

    /// Stop the workers (after running every queued packet; their last outputs are still in
    /// [`VirtWorkers::take_outputs`] until this returns) and gather the devices back into one
    /// [`VirtSwitch`] with the topology and snapshots.
    pub fn shutdown(mut self, out: &mut Vec<OutputPacket>) -> VirtSwitch {
        let mut vs = VirtSwitch::new();
        vs.set_max_hops(self.max_hops);
        self.write_routes().clear();
        let replies: Vec<_> = (0..self.boxes.len())
            .map(|w| {
                let (s, r) = mpsc::channel();
                let _ = self.send(w, Msg::Stop(s));
                r
            })
            .collect();
        let mut unclassified = self.stats.unclassified;
        let mut dangling = self.stats.dangling;
        for r in replies {
            if let Ok((mut shard, _)) = r.recv() {
                let s = shard.stats();
                unclassified += s.unclassified;
                dangling += s.dangling;
                let ids = shard.device_ids();
                let (devices, _) = shard.take_devices(&ids);
                vs.put_devices(devices, BTreeMap::new());
            }
        }
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
        self.take_outputs(out);
        self.boxes.clear();
        // Devices lost with a stopped worker make the topology invalid: keep what is valid.
        let t = std::mem::take(&mut self.topo);
        if vs.set_topology(t.clone()).is_err() {
            let present: BTreeSet<DeviceId> = vs.device_ids().into_iter().collect();
            let mut t = t;
            t.rules.retain(|r| present.contains(&r.device));
            t.port_maps.retain(|d, _| present.contains(d));
            for map in t.port_maps.values_mut() {
                for tg in map.values_mut() {
                    if matches!(tg, Target::Link { device, .. } if !present.contains(device)) {
                        *tg = Target::Drop;
                    }
                }
            }
            let _ = vs.set_topology(t);
        }
        for (name, t) in std::mem::take(&mut self.snapshots) {
            vs.store_snapshot(&name, t);
        }
        vs.add_stats(VirtStats {
            unclassified,
            dangling,
            quarantined_port: self.stats.quarantined_port,
        });
        vs
    }
}

impl Drop for VirtWorkers {
    fn drop(&mut self) {
        // Control handles keep the mailboxes alive: the closed flag, not the handles' count,
        // ends each worker once its queues are empty.
        self.write_routes().clear();
        for mb in &self.boxes {
            lock(&mb.inbox).closed = true;
            mb.wake.notify_one();
        }
        for h in std::mem::take(&mut self.handles) {
            let _ = h.join();
        }
    }
}
