//! Fair sharing of packet processing between devices: a deficit-round-robin scheduler
//! ([`FairScheduler`]) in front of a [`VirtSwitch`]. Arriving packets are classified into one
//! bounded queue per device (a full queue drops that device's packet, counted); each round
//! gives every backlogged device a quantum of bytes to spend (unspent credit carries over
//! while its queue is not empty, as in DRR), so a tenant that floods the switch fills and
//! overflows only its own queue and cannot take another device's share. A packet is
//! classified once, on arrival, and runs on that device's virtual port when it is served.

use std::collections::{BTreeMap, VecDeque};

use tern_runtime::{OutputPacket, Port};

use crate::{DeviceId, VirtSwitch};

/// Buffers of served packets kept for reuse.
const MAX_SPARE: usize = 4096;

/// Per-device counters of the scheduler.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FairStats {
    /// Packets queued for the device.
    pub queued: u64,
    /// Packets dropped because the device's queue was full.
    pub overflow: u64,
    /// Packets handed to the device.
    pub served: u64,
}

/// One device's queue: (virtual ingress port, frame) in arrival order, and its credit.
#[derive(Default)]
pub(crate) struct Queue {
    packets: VecDeque<(Port, Vec<u8>)>,
    deficit: u64,
    stats: FairStats,
}

/// A deficit-round-robin scheduler over the devices of a [`VirtSwitch`] (see the module
/// documentation). Packets no rule classifies are not queued (the switch would drop them).
pub struct FairScheduler {
    quantum: u64,
    capacity: usize,
    queues: BTreeMap<DeviceId, Queue>,
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
    /// `quantum`: bytes each backlogged device may send per round (at least one frame's worth
    /// is useful: a frame longer than the credit waits for more rounds); `capacity`: packets a
    /// device's queue holds.
    pub fn new(quantum: u64, capacity: usize) -> FairScheduler {
        FairScheduler {
            quantum: quantum.max(1),
            capacity: capacity.max(1),
            queues: BTreeMap::new(),
            spare: Vec::new(),
            batch: Vec::new(),
            refs: Vec::new(),
        }
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

    /// Packets waiting, over all devices.
    pub fn backlog(&self) -> usize {
        self.queues.values().map(|q| q.packets.len()).sum()
    }

    /// One DRR round: every device with packets waiting gets `quantum` more bytes of credit
    /// and its packets run (in one batch per device) while the credit covers them. Outputs
    /// are appended to `out`. Returns the packets served.
    pub fn run_round(&mut self, vs: &mut VirtSwitch, out: &mut Vec<OutputPacket>) -> usize {
        let mut served = 0;
        for (&id, q) in self.queues.iter_mut() {
            if q.packets.is_empty() {
                q.deficit = 0;
                continue;
            }
            q.deficit += self.quantum;
            while let Some((_, head)) = q.packets.front() {
                let len = head.len() as u64;
                if len > q.deficit {
                    break;
                }
                q.deficit -= len;
                self.batch
                    .push(q.packets.pop_front().expect("front exists"));
            }
            if q.packets.is_empty() {
                q.deficit = 0;
            }
            q.stats.served += self.batch.len() as u64;
            served += self.batch.len();
            if !self.batch.is_empty() {
                let mut refs = relifetime(std::mem::take(&mut self.refs));
                refs.extend(self.batch.iter().map(|(p, d)| (*p, d.as_slice())));
                vs.process_on(id, &refs, out);
                self.refs = relifetime(refs);
                let room = MAX_SPARE.saturating_sub(self.spare.len());
                self.spare
                    .extend(self.batch.drain(..).map(|(_, d)| d).take(room));
                self.batch.clear();
            }
        }
        served
    }

    /// A device's scheduler counters (zero for a device that never had a packet queued).
    pub fn stats(&self, id: DeviceId) -> FairStats {
        self.queues.get(&id).map(|q| q.stats).unwrap_or_default()
    }
}
