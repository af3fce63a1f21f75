//! Fair sharing of packet processing between devices: a deficit-round-robin scheduler
//! ([`FairScheduler`]) in front of a [`VirtSwitch`]. Arriving packets are classified into one
//! bounded queue per device (a full queue drops that device's packet, counted); each round
//! gives every backlogged device a quantum of *work* to spend, so a tenant that floods the
//! switch fills and overflows only its own queue and cannot take another device's share. A
//! packet is classified once, on arrival, and runs on that device's virtual port when it is
//! served.
//!
//! **Charged by work** ([`Cost`]): by default a device is charged the nanoseconds its packets
//! took to run, measured with one clock reading per chunk of packets (not per packet), so
//! everything a packet costs counts: its passes (recirculations, resubmits, clones), its
//! multicast copies, its parser's loop iterations, a caught panic. The charge comes after the
//! work (it cannot be known before): a device whose credit is used up goes into debt and sits
//! out rounds until the quanta of later rounds have paid it back, so over time it gets its
//! quantum per round and no more, whatever one of its packets costs. A chunk is cut to what
//! the device's credit covers at its recent cost per packet (an expensive device runs one
//! packet at a time), so a round overshoots a device's quantum by at most one packet, and one
//! packet's work is bounded by the device's pass quota. [`Cost::Bytes`] charges frame bytes
//! before the packet runs (the classic DRR, kept for callers that want it).
//!
//! **Latency**: in each round the backlogged devices are served most credit first (the device
//! furthest below its share first), so a device that has been waiting with a full quantum does
//! not wait behind one in debt; the longest a queued packet waits for its device's turn is the
//! other devices' quanta plus one packet each. [`FairScheduler::run_round_with`] is the
//! scheduler with the work done and measured by the caller (what the tests count with).

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use tern_runtime::{OutputPacket, Port};

use crate::{DeviceId, VirtSwitch};

/// Buffers of served packets kept for reuse.
const MAX_SPARE: usize = 4096;

/// Packets a device runs in one call at most (its chunk is cut further by its credit).
pub const MAX_CHUNK: usize = 32;

/// What a device is charged for the packets it runs (the unit of the quantum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cost {
    /// Nanoseconds of the device's processing, one clock reading per chunk.
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
    /// Work charged to the device (in the scheduler's [`Cost`] unit).
    pub work: u64,
    /// Rounds the device sat out with packets waiting, paying back a debt.
    pub skipped: u64,
}

/// Control work queued for a device ([`FairScheduler::enqueue_job`]).
pub type DeviceJob = Box<dyn FnOnce(&mut VirtSwitch) + Send>;

/// One device's queue: (virtual ingress port, frame) in arrival order, its queued control
/// work, its credit (negative: a debt) and its recent work per packet.
#[derive(Default)]
pub(crate) struct Queue {
    packets: VecDeque<(Port, Vec<u8>)>,
    jobs: VecDeque<DeviceJob>,
    deficit: i64,
    per_packet: u64,
    stats: FairStats,
}

/// A deficit-round-robin scheduler over the devices of a [`VirtSwitch`] (see the module
/// documentation). Packets no rule classifies are not queued (the switch would drop them).
pub struct FairScheduler {
    quantum: u64,
    capacity: usize,
    cost: Cost,
    queues: BTreeMap<DeviceId, Queue>,
    /// This round's backlogged devices with their credit (kept for its capacity).
    order: Vec<(i64, DeviceId)>,
    /// Reused buffers of served packets (the workers hand them on to the devices that sent
    /// frames out, see `VirtSwitch::feed_producers`).
    pub(crate) spare: Vec<Vec<u8>>,
    batch: Vec<(Port, Vec<u8>)>,
    /// The batch as the device takes it (kept empty between rounds for its capacity).
    refs: Vec<(Port, &'static [u8])>,
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
            order: Vec::new(),
            spare: Vec::new(),
            batch: Vec::new(),
            refs: Vec::new(),
        }
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

    /// Queue a frame already classified to device `id`, virtual ingress port `vport`, by
    /// value (no copy). A full queue gives the frame back (counted as `overflow`).
    pub(crate) fn enqueue_owned(
        &mut self,
        id: DeviceId,
        vport: Port,
        data: Vec<u8>,
    ) -> Result<(), Vec<u8>> {
        let q = self.queues.entry(id).or_default();
        if q.packets.len() >= self.capacity {
            q.stats.overflow += 1;
            return Err(data);
        }
        q.packets.push_back((vport, data));
        q.stats.queued += 1;
        Ok(())
    }

    /// Keep a frame buffer for reuse (dropped past the bound).
    pub(crate) fn keep_spare(&mut self, data: Vec<u8>) {
        if self.spare.len() < MAX_SPARE {
            self.spare.push(data);
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

    /// Packets and control jobs waiting, over all devices.
    pub fn backlog(&self) -> usize {
        self.queues
            .values()
            .map(|q| q.packets.len() + q.jobs.len())
            .sum()
    }

    /// Queue control work for device `id` (a tenant's posted writes): it runs in the
    /// device's turn, before its packets, and its work is charged to the device like its
    /// packets' (so a control flood spends its own share, and waits while in debt).
    pub fn enqueue_job(&mut self, id: DeviceId, job: DeviceJob) {
        self.queues.entry(id).or_default().jobs.push_back(job);
    }

    /// One DRR round over `vs`: outputs are appended to `out`; returns the packets served.
    /// With [`Cost::Nanos`] the clock is read once before the round's first chunk and once
    /// after each chunk.
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
        mut flush: impl FnMut(&mut VirtSwitch, &mut Vec<OutputPacket>, &mut Vec<Vec<u8>>),
    ) -> usize {
        let mut st = (vs, out, Instant::now());
        match self.cost {
            Cost::Bytes => self.run_round_with(
                &mut st,
                |(vs, out, _), id, pkts| {
                    vs.process_on(id, pkts, out);
                    pkts.iter().map(|(_, d)| d.len() as u64).sum()
                },
                |(vs, _, _), _, job| {
                    job(vs);
                    0
                },
                |(vs, out, _), spare| flush(vs, out, spare),
            ),
            Cost::Nanos => self.run_round_with(
                &mut st,
                |(vs, out, last), id, pkts| {
                    vs.process_on(id, pkts, out);
                    let now = Instant::now();
                    let ns = now.duration_since(*last).as_nanos() as u64;
                    *last = now;
                    ns.max(1)
                },
                |(vs, _, last), _, job| {
                    job(vs);
                    let now = Instant::now();
                    let ns = now.duration_since(*last).as_nanos() as u64;
                    *last = now;
                    ns.max(1)
                },
                |(vs, out, last), spare| {
                    flush(vs, out, spare);
                    // The hand-over is not the next device's work.
                    *last = Instant::now();
                },
            ),
        }
    }

    /// One DRR round, the packets run by `run(state, device, packets)`, which returns the work
    /// they cost (in the unit of the quantum); `job(state, device, job)` runs one queued
    /// control job and returns its work (jobs run first in a device's turn, one at a time
    /// while its credit lasts); `done(state, spare)` is called after each device's turn.
    /// Chunks are cut by frame bytes for [`Cost::Bytes`], by the device's recent work per
    /// packet otherwise. Every device with packets waiting gets `quantum`
    /// more credit (credit does not pile up past one quantum; a debt carries over even when
    /// the queue empties); the devices with positive credit are served most credit first,
    /// each in chunks cut to what its credit covers at its recent work per packet (at least
    /// one packet, at most [`MAX_CHUNK`]), until its credit is spent or its queue empty; each
    /// chunk's work is charged after it ran. Returns the packets served.
    pub fn run_round_with<S>(
        &mut self,
        state: &mut S,
        mut run: impl FnMut(&mut S, DeviceId, &[(Port, &[u8])]) -> u64,
        mut job: impl FnMut(&mut S, DeviceId, DeviceJob) -> u64,
        mut done: impl FnMut(&mut S, &mut Vec<Vec<u8>>),
    ) -> usize {
        let quantum = self.quantum as i64;
        self.order.clear();
        for (&id, q) in self.queues.iter_mut() {
            if q.packets.is_empty() && q.jobs.is_empty() {
                q.deficit = q.deficit.min(0);
                continue;
            }
            q.deficit = (q.deficit + quantum).min(quantum);
            if q.deficit > 0 {
                self.order.push((q.deficit, id));
            } else {
                q.stats.skipped += 1;
            }
        }
        // Most credit first; ties in device order (the sort is stable).
        self.order.sort_by_key(|o| std::cmp::Reverse(o.0));
        let mut served = 0;
        for i in 0..self.order.len() {
            let id = self.order[i].1;
            let Some(q) = self.queues.get_mut(&id) else {
                continue;
            };
            while q.deficit > 0 {
                if let Some(j) = q.jobs.pop_front() {
                    let work = job(state, id, j);
                    q.deficit = q.deficit.saturating_sub(work.min(i64::MAX as u64) as i64);
                    q.stats.work += work;
                    continue;
                }
                if q.packets.is_empty() {
                    break;
                }
                // The chunk the credit covers at the device's recent work per packet.
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
                    Cost::Nanos if q.per_packet == 0 => 1,
                    Cost::Nanos => (q.deficit as u64)
                        .div_ceil(q.per_packet)
                        .clamp(1, MAX_CHUNK as u64) as usize,
                };
                let n = n.min(q.packets.len());
                self.batch.extend(q.packets.drain(..n));
                let mut refs = relifetime(std::mem::take(&mut self.refs));
                refs.extend(self.batch.iter().map(|(p, d)| (*p, d.as_slice())));
                let work = run(state, id, &refs);
                self.refs = relifetime(refs);
                q.deficit = q.deficit.saturating_sub(work.min(i64::MAX as u64) as i64);
                // A decaying maximum: up at once, down by an eighth a chunk (a device cannot
                // lower it with a few cheap packets and then run a long chunk of dear ones).
                q.per_packet = (work / n as u64)
                    .max(q.per_packet - q.per_packet / 8)
                    .max(1);
                q.stats.work += work;
                q.stats.served += n as u64;
                served += n;
                let room = MAX_SPARE.saturating_sub(self.spare.len());
                self.spare
                    .extend(self.batch.drain(..).map(|(_, d)| d).take(room));
                self.batch.clear();
            }
            if q.packets.is_empty() && q.jobs.is_empty() {
                q.deficit = q.deficit.min(0);
            }
            done(state, &mut self.spare);
        }
        served
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
}
