//! `tern run --workers N` on mapped pcap inputs (regular classic pcap files, no `--pcap`
//! capture, no per-packet logging): the main thread is off the per-packet path. N worker
//! threads are started once for the run (a pool). The inputs are read in windows of up to
//! [`WINDOW`] packets (the main thread's only per-packet work: the record headers, merged by
//! timestamp when several inputs are left; the frames stay in the read-only mapping, read
//! through a [`Frames`] handle) into one of two window slots; while the pool works on one
//! window (a round, started and ended by barriers with the main thread) in three phases
//! separated by barriers, the main thread reads the next into the other slot:
//!
//! 1. each thread hashes the flows of a 1/N slice of the window (which worker owns each
//!    packet: [`flow_hash`] modulo N, as the dispatching run does);
//! 2. each thread runs its own packets, in input order, through its replica
//!    ([`Switch::process_batch_into`], batches of [`RUN_BATCH`]) and encodes every output as a
//!    pcap record into its own buffer for that output port, with (packet index, record length)
//!    entries;
//! 3. each thread merges the output ports it owns (port k goes to thread k mod N): the
//!    entries of every thread for that port, in packet order, whole runs of one thread's
//!    consecutive records written straight from the threads' buffers with vectored writes
//!    (each record is copied once in user space: when it is encoded).
//!
//! The files are byte-identical to one worker's with `--deterministic` (same order per port,
//! same records), and the counters are the same.

use super::*;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Barrier, RwLock};
use tern_dataplane::switch::OutputSink;
use tern_dataplane::workers::{flow_hash, Worker};
use tern_ports::{Frames, PortIndex, PortWriter, WriterConfig};

/// Packets read per window.
pub(super) const WINDOW: usize = 32 * 1024;

/// One thread's share of a window: its outputs per output port and its counters.
#[derive(Default)]
struct Part {
    /// Per output port: the encoded records, back to back.
    bufs: Vec<Vec<u8>>,
    /// Per output port: (packet index in the window, record length), ascending.
    ents: Vec<Vec<(u32, u32)>>,
    /// Window indices of this thread's packets.
    mine: Vec<u32>,
    packets: u64,
    tx: u64,
    discarded: u64,
    with_out: u64,
    digests: u64,
    err: Option<tern_ports::PortError>,
}

impl Part {
    fn clear(&mut self, outputs: usize) {
        self.bufs.resize_with(outputs, Vec::new);
        self.ents.resize_with(outputs, Vec::new);
        self.bufs.iter_mut().for_each(Vec::clear);
        self.ents.iter_mut().for_each(Vec::clear);
        self.mine.clear();
        (self.packets, self.tx, self.discarded) = (0, 0, 0);
        (self.with_out, self.digests) = (0, 0);
    }
}

/// Encodes the outputs of one batch of a thread's packets into its [`Part`].
struct PartSink<'p> {
    part: &'p mut Part,
    index: PortIndex<'p>,
    cfg: WriterConfig,
    /// Window index of each packet of the batch.
    batch: &'p [u32],
    held: &'p [Held],
    wall: Option<u64>,
    last: usize,
    /// The last timestamp and its encoded fields.
    ts: (u64, [u8; 8]),
}

impl OutputSink for PartSink<'_> {
    #[inline]
    fn output(&mut self, pkt: usize, port: tern_runtime::Port, data: &[u8]) {
        if pkt != self.last {
            self.last = pkt;
            self.part.with_out += 1;
        }
        let Some(p) = self.index.get(port) else {
            self.part.discarded += 1;
            return;
        };
        let k = self.batch[pkt];
        let ts = match self.wall {
            Some(t) => t,
            None => self.held[k as usize].meta.ts_ns,
        };
        // Outputs of a window (wall clock) or of a packet share their timestamp.
        if ts != self.ts.0 {
            self.ts = (ts, self.cfg.encode_ts(ts));
        }
        let buf = &mut self.part.bufs[p];
        let before = buf.len();
        if let Err(e) = self.cfg.encode_record_at(buf, self.ts.1, data) {
            if self.part.err.is_none() {
                self.part.err = Some(tern_ports::PortError::Os {
                    name: format!("output port {port}"),
                    what: "encoding a pcap record",
                    error: e,
                });
            }
            return;
        }
        self.part.ents[p].push((k, (buf.len() - before) as u32));
        self.part.tx += 1;
    }
}

/// What a run gives back: the counters, the time, packets and CPU time per worker.
pub(super) struct ParRun {
    pub stats: (Stats, Duration),
    pub per_worker: Vec<u64>,
    pub cpu_ns: Vec<Option<u64>>,
}

/// `Pool::slot` when the workers are to return.
const STOP: usize = usize::MAX;

/// Replay every input packet of `files` (all mapped) on `ws`; see the module documentation.
/// The worker threads are started once for the whole run; while they run a window, the main
/// thread reads the next one into the other window slot.
pub(super) fn replay(
    ws: &mut [Worker],
    files: &mut FilePorts,
    deterministic: bool,
) -> anyhow::Result<ParRun> {
    let n = ws.len();
    let start = Instant::now();
    // The frames are read through their own handle, so that the reader can go on.
    let frames = files.frames();
    let (mut reader, outputs) = files.split_reader();
    let (index, writers) = outputs.into_parts();
    let Some(cfg) = writers.first().map(PortWriter::config) else {
        anyhow::bail!("no output files");
    };
    // Output port k is merged by thread k mod n.
    let mut owned: Vec<Vec<(usize, PortWriter)>> = (0..n).map(|_| Vec::new()).collect();
    for (k, w) in writers.into_iter().enumerate() {
        owned[k % n].push((k, w));
    }
    let pool = Pool {
        frames: &frames,
        index,
        cfg,
        deterministic,
        windows: [
            RwLock::new(Vec::with_capacity(WINDOW)),
            RwLock::new(Vec::with_capacity(WINDOW)),
        ],
        slot: AtomicUsize::new(STOP),
        wall: AtomicU64::new(0),
        owner: (0..WINDOW).map(|_| AtomicU32::new(0)).collect(),
        parts: (0..n).map(|_| RwLock::new(Part::default())).collect(),
        fails: (0..n).map(|_| Mutex::new(None)).collect(),
        start: Barrier::new(n + 1),
        done: Barrier::new(n + 1),
        phase: Barrier::new(n),
    };
    let (run, cpu_ns) = std::thread::scope(|s| {
        let hs: Vec<_> = ws
            .iter_mut()
            .zip(owned.iter_mut())
            .enumerate()
            .map(|(t, (w, mine))| {
                let pool = &pool;
                s.spawn(move || pool.worker(t, w, mine))
            })
            .collect();
        let run = pool.drive(&mut reader);
        // Whatever happened, every worker is now waiting for the next round: stop them.
        pool.slot.store(STOP, Ordering::Release);
        pool.start.wait();
        let cpu: Vec<Option<u64>> = hs.into_iter().map(|h| h.join().ok().flatten()).collect();
        (run, cpu)
    });
    let (st, per_worker) = run?;
    Ok(ParRun {
        stats: (st, start.elapsed()),
        per_worker,
        cpu_ns,
    })
}

/// The state the main thread and the pool of worker threads share for the whole run.
struct Pool<'w> {
    frames: &'w Frames,
    index: PortIndex<'w>,
    cfg: WriterConfig,
    deterministic: bool,
    /// Two windows of packets: the workers run one while the main thread reads the other.
    windows: [RwLock<Vec<Held>>; 2],
    /// The window the next round runs (0 or 1), or [`STOP`].
    slot: AtomicUsize,
    /// The round's output timestamp (wall clock, ns) when not `deterministic`.
    wall: AtomicU64,
    /// Which worker owns each packet of the window.
    owner: Vec<AtomicU32>,
    parts: Vec<RwLock<Part>>,
    /// A worker's failure in the last round (a panic, a write error).
    fails: Vec<Mutex<Option<anyhow::Error>>>,
    /// The main thread and every worker: a round starts; a round is over.
    start: Barrier,
    done: Barrier,
    /// The workers between the phases of a round.
    phase: Barrier,
}

impl Pool<'_> {
    /// The main thread: read the windows and count them, one round per window, the next
    /// window read while the workers run one. Returns after a `done` barrier (or before
    /// the first round), so that the workers are then waiting at `start`.
    fn drive(&self, reader: &mut tern_ports::HeldReader<'_>) -> anyhow::Result<(Stats, Vec<u64>)> {
        let n = self.parts.len();
        let mut st = Stats::default();
        let mut per_worker = vec![0u64; n];
        let lock_err = || anyhow::anyhow!("a worker thread panicked");
        reader.recv_held(
            WINDOW,
            &mut *self.windows[0].write().map_err(|_| lock_err())?,
        )?;
        // An input error: the packets read before it are processed and written, then the
        // run stops with it (`recv_held` returns it on the call after those packets).
        let mut stop: Option<tern_ports::PortError> = None;
        let mut cur = 0;
        loop {
            let len = self.windows[cur].read().map_err(|_| lock_err())?.len();
            if len == 0 {
                break;
            }
            self.slot.store(cur, Ordering::Release);
            if !self.deterministic {
                self.wall.store(wall_ns(), Ordering::Relaxed);
            }
            self.start.wait();
            // Meanwhile the next window.
            let read = {
                let mut next = self.windows[1 - cur].write();
                match next.as_deref_mut() {
                    Ok(next) => {
                        let r = reader.recv_held(WINDOW, next);
                        if r.is_err() {
                            next.clear();
                        }
                        r.map(|_| ())
                    }
                    // Only a panic of this thread poisons it: not reached.
                    Err(_) => Ok(()),
                }
            };
            self.done.wait();
            for f in &self.fails {
                if let Some(e) = f.lock().map_err(|_| lock_err())?.take() {
                    return Err(e);
                }
            }
            for (t, p) in self.parts.iter().enumerate() {
                let mut p = p.write().map_err(|_| lock_err())?;
                if let Some(e) = p.err.take() {
                    return Err(e.into());
                }
                per_worker[t] += p.packets;
                st.tx += p.tx;
                st.discarded += p.discarded;
                st.dropped += p.packets - p.with_out;
                st.digests += p.digests;
            }
            st.rx += len as u64;
            if let Err(e) = read {
                stop = Some(e);
            }
            cur = 1 - cur;
        }
        match stop {
            Some(e) => Err(e.into()),
            None => Ok((st, per_worker)),
        }
    }

    /// Worker thread `t`: one round per window until [`STOP`]; returns its CPU time (if
    /// readable). A failure is left in `fails[t]` for the main thread, and the thread goes on
    /// meeting every barrier, so that none waits forever.
    fn worker(&self, t: usize, w: &mut Worker, ports: &mut [(usize, PortWriter)]) -> Option<u64> {
        let cpu0 = run_workers::thread_cpu_ns();
        let mut scratch: Vec<OutputPacket> = Vec::new();
        loop {
            self.start.wait();
            let slot = self.slot.load(Ordering::Acquire);
            if slot == STOP {
                break;
            }
            // Only a panic of the main thread while reading could poison it; the packets
            // are whole records either way.
            let held = self.windows[slot].read().unwrap_or_else(|e| e.into_inner());
            let wall = (!self.deterministic).then(|| self.wall.load(Ordering::Relaxed));
            if let Err(e) = self.round(t, &held, wall, w, &mut scratch, ports) {
                if let Ok(mut f) = self.fails[t].lock() {
                    f.get_or_insert(e);
                }
            }
            drop(held);
            self.done.wait();
        }
        let cpu1 = run_workers::thread_cpu_ns();
        cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a))
    }

    /// Thread `t`'s three phases of one window. Every thread reaches the phase barrier
    /// whatever happens.
    fn round(
        &self,
        t: usize,
        held: &[Held],
        wall: Option<u64>,
        w: &mut Worker,
        scratch: &mut Vec<OutputPacket>,
        ports: &mut [(usize, PortWriter)],
    ) -> anyhow::Result<()> {
        let n = self.parts.len();
        let poisoned = || anyhow::anyhow!("a worker thread panicked");
        // 1. Flow hashes of a 1/n slice.
        let step1 = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let len = held.len();
            let (a, b) = (len * t / n, len * (t + 1) / n);
            for (h, o) in held[a..b].iter().zip(&self.owner[a..b]) {
                let w = (flow_hash(self.frames.held(h)) % n as u64) as u32;
                // The barrier orders these stores before the other threads' loads.
                o.store(w, Ordering::Relaxed);
            }
        }));
        self.phase.wait();
        // 2. This thread's packets. A panic here must not leave the others waiting.
        let step2 = step1.map_err(|_| poisoned()).and_then(|()| {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut part = self.parts[t].write().map_err(|_| poisoned())?;
                self.process(t, held, wall, w, scratch, &mut part);
                Ok::<(), anyhow::Error>(())
            }))
            .unwrap_or_else(|_| Err(poisoned()))
        });
        self.phase.wait();
        step2?;
        // 3. Merge the ports this thread owns.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let parts = self
                .parts
                .iter()
                .map(|p| p.read().map_err(|_| poisoned()))
                .collect::<anyhow::Result<Vec<_>>>()?;
            for (k, pw) in ports.iter_mut() {
                merge_port(*k, &parts, pw)?;
            }
            Ok(())
        }))
        .unwrap_or_else(|_| Err(poisoned()))
    }

    fn process(
        &self,
        t: usize,
        held: &[Held],
        wall: Option<u64>,
        w: &mut Worker,
        scratch: &mut Vec<OutputPacket>,
        part: &mut Part,
    ) {
        part.clear(self.index.len());
        part.mine.extend(
            (0..held.len() as u32)
                .filter(|&k| self.owner[k as usize].load(Ordering::Relaxed) == t as u32),
        );
        part.packets = part.mine.len() as u64;
        w.poll();
        let mine = std::mem::take(&mut part.mine);
        let sw = w.switch_mut();
        // (any timestamp, its encoding): a cache that any first timestamp replaces or hits.
        let mut ts = (u64::MAX, self.cfg.encode_ts(u64::MAX));
        for batch in mine.chunks(RUN_BATCH) {
            let pkts = batch.iter().map(|&k| {
                let h = &held[k as usize];
                let clock = if self.deterministic {
                    Some(h.meta.ts_ns / 1000)
                } else {
                    None
                };
                (h.meta.port, clock, self.frames.held(h))
            });
            let mut sink = PartSink {
                part: &mut *part,
                index: self.index,
                cfg: self.cfg,
                batch,
                held,
                wall,
                last: usize::MAX,
                ts,
            };
            sw.process_batch_into(pkts, scratch, &mut sink);
            ts = sink.ts;
            // As with one worker: log lines and digests have no reader here.
            drop(sw.take_log());
            part.digests += sw.take_digests().len() as u64;
        }
        part.mine = mine;
    }
}

/// Write output port `k`'s records of every thread in packet order: at each step the thread
/// with the lowest next packet gives every record it has before the other threads' next one,
/// as one run; the runs are written straight from the threads' buffers (vectored writes, no
/// second copy).
fn merge_port(
    k: usize,
    parts: &[std::sync::RwLockReadGuard<'_, Part>],
    pw: &mut PortWriter,
) -> anyhow::Result<()> {
    let n = parts.len();
    let mut pos = vec![0usize; n];
    let mut off = vec![0usize; n];
    // At most one run per record: no growth while merging.
    let mut runs: Vec<std::io::IoSlice<'_>> =
        Vec::with_capacity(parts.iter().map(|p| p.ents[k].len()).sum());
    let mut packets = 0u64;
    loop {
        // The thread with the lowest next packet, and the lowest next packet of the others.
        let (mut best, mut next_other) = (None::<(u32, usize)>, u32::MAX);
        for (t, p) in parts.iter().enumerate() {
            if let Some(&(id, _)) = p.ents[k].get(pos[t]) {
                match best {
                    Some((b, _)) if b < id => next_other = next_other.min(id),
                    Some((b, _)) => {
                        next_other = next_other.min(b);
                        best = Some((id, t));
                    }
                    None => best = Some((id, t)),
                }
            }
        }
        let Some((_, t)) = best else {
            break;
        };
        let ents = &parts[t].ents[k];
        let (from, first) = (off[t], pos[t]);
        while let Some(&(id, len)) = ents.get(pos[t]) {
            if id > next_other {
                break;
            }
            off[t] += len as usize;
            pos[t] += 1;
        }
        runs.push(std::io::IoSlice::new(&parts[t].bufs[k][from..off[t]]));
        packets += (pos[t] - first) as u64;
    }
    if packets > 0 {
        pw.write_records_vectored(&mut runs, packets)?;
    }
    Ok(())
}
