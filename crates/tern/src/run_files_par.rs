//! `tern run --workers N` on mapped pcap inputs (regular classic pcap files, no `--pcap`
//! capture, no per-packet logging): the main thread is off the per-packet path. The inputs
//! are read in windows of up to [`WINDOW`] packets (the main thread's only per-packet work:
//! the record headers, merged by timestamp when several inputs are left; the frames stay in
//! the read-only mapping, read through a [`Frames`] handle), and while N threads work on one
//! window in three phases separated by barriers, the main thread reads the next:
//!
//! 1. each thread hashes the flows of a 1/N slice of the window (which worker owns each
//!    packet: [`flow_hash`] modulo N, as the dispatching run does);
//! 2. each thread runs its own packets, in input order, through its replica
//!    ([`Switch::process_batch_into`], batches of [`RUN_BATCH`]) and encodes every output as a
//!    pcap record into its own buffer for that output port, with (packet index, record length)
//!    entries;
//! 3. each thread merges the output ports it owns (port k goes to thread k mod N): the
//!    entries of every thread for that port, in packet order, whole runs of one thread's
//!    consecutive records copied at once into the port file's buffer.
//!
//! The files are byte-identical to one worker's with `--deterministic` (same order per port,
//! same records), and the counters are the same.

use super::*;
use std::sync::atomic::{AtomicU32, Ordering};
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
        let buf = &mut self.part.bufs[p];
        let before = buf.len();
        if let Err(e) = self.cfg.encode_record(buf, ts, data) {
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

/// Replay every input packet of `files` (all mapped) on `ws`; see the module documentation.
/// While the workers run a window, the main thread reads the next one.
pub(super) fn replay(
    ws: &mut [Worker],
    files: &mut FilePorts,
    deterministic: bool,
) -> anyhow::Result<ParRun> {
    let n = ws.len();
    let start = Instant::now();
    let mut st = Stats::default();
    let mut per_worker = vec![0u64; n];
    let mut cpu_ns: Vec<Option<u64>> = vec![Some(0); n];
    let owner: Vec<AtomicU32> = (0..WINDOW).map(|_| AtomicU32::new(0)).collect();
    let parts: Vec<RwLock<Part>> = (0..n).map(|_| RwLock::new(Part::default())).collect();
    let mut scratch: Vec<Vec<OutputPacket>> = (0..n).map(|_| Vec::new()).collect();
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
    let mut cur: Vec<Held> = Vec::with_capacity(WINDOW);
    let mut next: Vec<Held> = Vec::with_capacity(WINDOW);
    // An input error: the packets read before it are processed and written, then the run
    // stops with it (`recv_held` returns it on the call after those packets).
    let mut stop: Option<tern_ports::PortError> = None;
    if let Err(e) = reader.recv_held(WINDOW, &mut cur) {
        return Err(e.into());
    }
    while !cur.is_empty() {
        let barrier = Barrier::new(n);
        let win = Window {
            held: &cur,
            frames: &frames,
            index,
            cfg,
            wall: (!deterministic).then(wall_ns),
            deterministic,
            owner: &owner[..cur.len()],
            parts: &parts,
            barrier: &barrier,
        };
        let (results, read) = std::thread::scope(|s| {
            let hs: Vec<_> = ws
                .iter_mut()
                .zip(owned.iter_mut())
                .zip(scratch.iter_mut())
                .enumerate()
                .map(|(t, ((w, mine), scr))| {
                    let win = &win;
                    s.spawn(move || win.run(t, w, scr, mine))
                })
                .collect();
            // Meanwhile the next window.
            let read = reader.recv_held(WINDOW, &mut next);
            let results: Vec<anyhow::Result<Option<u64>>> = hs
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a worker thread panicked")))
                })
                .collect();
            (results, read)
        });
        for (t, r) in results.into_iter().enumerate() {
            let cpu = r?;
            cpu_ns[t] = cpu_ns[t].zip(cpu).map(|(a, b)| a + b);
        }
        for (t, p) in parts.iter().enumerate() {
            let mut p = p
                .write()
                .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
            if let Some(e) = p.err.take() {
                return Err(e.into());
            }
            per_worker[t] += p.packets;
            st.tx += p.tx;
            st.discarded += p.discarded;
            st.dropped += p.packets - p.with_out;
            st.digests += p.digests;
        }
        st.rx += cur.len() as u64;
        if let Err(e) = read {
            stop = Some(e);
            next.clear();
        }
        std::mem::swap(&mut cur, &mut next);
    }
    if let Some(e) = stop {
        return Err(e.into());
    }
    Ok(ParRun {
        stats: (st, start.elapsed()),
        per_worker,
        cpu_ns,
    })
}

/// One window's shared state.
struct Window<'w> {
    held: &'w [Held],
    frames: &'w Frames,
    index: PortIndex<'w>,
    cfg: WriterConfig,
    wall: Option<u64>,
    deterministic: bool,
    owner: &'w [AtomicU32],
    parts: &'w [RwLock<Part>],
    barrier: &'w Barrier,
}

impl Window<'_> {
    /// Thread `t`'s three phases; returns its CPU time (if readable). Every thread reaches
    /// both barriers whatever happens, so that none waits forever.
    fn run(
        &self,
        t: usize,
        w: &mut Worker,
        scratch: &mut Vec<OutputPacket>,
        ports: &mut [(usize, PortWriter)],
    ) -> anyhow::Result<Option<u64>> {
        let cpu0 = run_workers::thread_cpu_ns();
        let n = self.parts.len();
        // 1. Flow hashes of a 1/n slice.
        let len = self.held.len();
        let (a, b) = (len * t / n, len * (t + 1) / n);
        for k in a..b {
            let w = (flow_hash(self.frames.held(&self.held[k])) % n as u64) as u32;
            // The barrier orders these stores before the other threads' loads.
            self.owner[k].store(w, Ordering::Relaxed);
        }
        self.barrier.wait();
        // 2. This thread's packets.
        let poisoned = || anyhow::anyhow!("a worker thread panicked");
        // A panic here must not leave the other threads waiting at the barrier.
        let step2 = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut part = self.parts[t].write().map_err(|_| poisoned())?;
            self.process(t, w, scratch, &mut part);
            Ok::<(), anyhow::Error>(())
        }))
        .unwrap_or_else(|_| Err(poisoned()));
        self.barrier.wait();
        step2?;
        // 3. Merge the ports this thread owns.
        let parts = self
            .parts
            .iter()
            .map(|p| p.read().map_err(|_| poisoned()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for (k, pw) in ports.iter_mut() {
            merge_port(*k, &parts, pw)?;
        }
        let cpu1 = run_workers::thread_cpu_ns();
        Ok(cpu0.zip(cpu1).map(|(a, b)| b.saturating_sub(a)))
    }

    fn process(&self, t: usize, w: &mut Worker, scratch: &mut Vec<OutputPacket>, part: &mut Part) {
        part.clear(self.index.len());
        part.mine.extend(
            (0..self.held.len() as u32)
                .filter(|&k| self.owner[k as usize].load(Ordering::Relaxed) == t as u32),
        );
        part.packets = part.mine.len() as u64;
        w.poll();
        let mine = std::mem::take(&mut part.mine);
        let sw = w.switch_mut();
        for batch in mine.chunks(RUN_BATCH) {
            let pkts = batch.iter().map(|&k| {
                let h = &self.held[k as usize];
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
                held: self.held,
                wall: self.wall,
                last: usize::MAX,
            };
            sw.process_batch_into(pkts, scratch, &mut sink);
            // As with one worker: log lines and digests have no reader here.
            drop(sw.take_log());
            part.digests += sw.take_digests().len() as u64;
        }
        part.mine = mine;
    }
}

/// Write output port `k`'s records of every thread in packet order: at each step the thread
/// with the lowest next packet gives every record it has before the other threads' next one,
/// copied as one run.
fn merge_port(
    k: usize,
    parts: &[std::sync::RwLockReadGuard<'_, Part>],
    pw: &mut PortWriter,
) -> anyhow::Result<()> {
    let n = parts.len();
    let mut pos = vec![0usize; n];
    let mut off = vec![0usize; n];
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
            return Ok(());
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
        pw.append_records(&parts[t].bufs[k][from..off[t]], (pos[t] - first) as u64)?;
    }
}
