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
//!   Programs without registers or meters never touch the lock. Direct meters are per worker
//!   (each worker meters its own share of the flows).

use std::sync::mpsc;
use std::sync::Arc;

use crate::switch::{Switch, SwitchError, SwitchOptions};
use tern_runtime::{CounterValue, EntryHandle, OutputPacket, PacketPath, Port, RtResult, Runtime};

/// A replicated control-plane operation (applied to the control replica, then to every
/// worker's replica).
pub type UpdateFn = dyn Fn(&mut Switch) + Send + Sync;

/// A query run once on one worker's replica (with the worker's number).
type QueryFn = dyn FnOnce(usize, &mut Switch) + Send;

enum Msg {
    Update(Arc<UpdateFn>),
    Query(Box<QueryFn>),
}

/// The control side: answers reads, validates and publishes updates.
pub struct Control {
    sw: Switch,
    txs: Vec<mpsc::Sender<Msg>>,
    published: u64,
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
        for tx in &self.txs {
            // A worker whose thread has ended no longer needs updates.
            let _ = tx.send(Msg::Update(op.clone()));
        }
        self.published += 1;
        Ok(r)
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
        for tx in &self.txs {
            let (rtx, rrx) = mpsc::channel();
            let f = f.clone();
            let sent = tx.send(Msg::Query(Box::new(move |id: usize, sw: &mut Switch| {
                let _ = rtx.send(f(id, sw));
            })));
            if sent.is_ok() {
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

    /// A register cell (registers are shared by all replicas).
    pub fn register_read(&mut self, register: &str, index: u32) -> RtResult<u64> {
        self.sw
            .with_shared_externs(|sw| sw.register_read(register, index))
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
                Msg::Update(f) => {
                    self.sw.with_shared_externs(|sw| f(sw));
                    n += 1;
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

    /// Apply pending updates, then run one packet.
    pub fn process_packet(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        self.poll();
        self.sw.process_packet(port, data, out);
    }

    /// Give transmitted frames' buffers back ([`Switch::recycle_outputs`]).
    pub fn recycle_outputs(&mut self, out: &mut Vec<OutputPacket>) {
        self.sw.recycle_outputs(out);
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
