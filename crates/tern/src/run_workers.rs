//! `tern run --workers N` (N > 1): the program replicated on N run-to-completion worker
//! threads ([`tern_dataplane::workers`]), driven by the same command line as the
//! single-threaded run.
//!
//! * Dispatch: every input packet gets the next packet id and goes to worker
//!   `flow_hash(frame) % N`, so all packets of a flow run on one worker, in order.
//! * Control: `--commands` and the Thrift server drive the workers' [`Control`] (a
//!   [`tern_runtime::Runtime`]): changes are validated on the control replica and published to
//!   every worker, which applies them between batches; counter reads are summed over workers.
//!   An idle worker (blocked waiting for packets) is woken to apply changes and answer reads.
//! * Files (`--use-files`): the main thread reads the inputs (merged in timestamp order),
//!   sends batches to the workers over bounded channels (it blocks, never spins, when a worker
//!   is behind; results wait in an unbounded channel, bounded in practice by the queues) and
//!   writes the results back **in input order** (a small reorder buffer keyed
//!   by packet id), so the output files, log lines and summary are those of one worker
//!   (outputs are flushed after each round of results when an input is a FIFO, else when
//!   their 256 KiB buffers fill; output timestamps read the clock once per round); with
//!   `--deterministic` (switch clock = packet time) they are byte-identical, except for
//!   programs whose shared registers couple flows.
//!   Batches are sent when full (64 packets), every 4,096 packets read, and when the inputs
//!   end, and results are written when the reader gets back to them: a packet's outputs may
//!   wait for later input, so inputs fed interactively through FIFOs (a writer waiting for
//!   each output before the next input) need one worker.
//! * Interfaces: the main thread is the one receive loop over all interfaces (AF_PACKET, as
//!   the single-threaded run) and hands each frame to its worker as it arrives (frames the
//!   rings already hold go together, up to 64, one batch per worker); each worker
//!   transmits its outputs on its own AF_PACKET sockets, flushing them whenever its queue runs
//!   empty, then blocks. Frames of one flow leave in order; different flows may interleave
//!   differently than with one worker.
//! * Not supported (refused with an error): P4Runtime (`--grpc-addr`, `--no-p4`: its server
//!   drives one switch), `--pcap` capture on interfaces (outputs leave from several threads).
//!   Digests are counted (and logged at debug level) as the single-threaded run does without a
//!   controller; `log_msg` lines are logged with their packet.

use super::*;
use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError};
use tern_dataplane::workers::{self, flow_hash, Control, Worker};
use tern_ports::LiveStats;
use tern_runtime::Port;

/// Packets per batch sent to a worker (file mode).
const BATCH: usize = 64;
/// Live mode: frames already in the rings handed over together after a blocking receive.
const LIVE_BURST: usize = 64;
/// Batches queued per worker before the dispatcher waits for it.
const QUEUE: usize = 16;
/// File mode: partly filled batches are sent at least this often (packets read), so a worker
/// that receives few flows does not hold back the in-order writing of the others.
const FLUSH_EVERY: u64 = 4096;

/// One input packet of a batch: its bytes are `data[start..end]` of the batch.
struct Meta {
    id: u64,
    port: Port,
    ts_ns: u64,
    start: usize,
    end: usize,
}

/// Packets for one worker, with frames to give back to its buffer pool.
#[derive(Default)]
struct Batch {
    pkts: Vec<Meta>,
    data: Vec<u8>,
    spare: Vec<OutputPacket>,
}

impl Batch {
    fn push(&mut self, id: u64, port: Port, ts_ns: u64, frame: &[u8]) {
        let start = self.data.len();
        self.data.extend_from_slice(frame);
        self.pkts.push(Meta {
            id,
            port,
            ts_ns,
            start,
            end: self.data.len(),
        });
    }

    fn frame(&self, m: &Meta) -> &[u8] {
        &self.data[m.start..m.end]
    }
}

/// What the worker threads receive.
enum Job {
    Pkts(Batch),
    /// The control queued an update or query: apply / answer it.
    Wake,
    /// End the thread.
    Stop,
}

/// Per packet of a processed batch.
struct Res {
    /// End of this packet's outputs in [`Done::outs`].
    outs_end: usize,
    /// `log_msg` lines.
    lines: Vec<String>,
    /// The packet's trace (parser, tables, actions, deparser), when logging at debug level.
    trace: Vec<tern_dataplane::trace::TraceLine>,
    digests: usize,
}

/// A processed batch (file mode), sent back to the writer.
struct Done {
    worker: usize,
    batch: Batch,
    outs: Vec<OutputPacket>,
    per: Vec<Res>,
}

/// Run every packet of `b` on worker `w`, appending outputs to `outs` and per-packet results
/// to `per`. Pending control changes are applied first.
fn process(
    w: &mut Worker,
    b: &mut Batch,
    deterministic: bool,
    outs: &mut Vec<OutputPacket>,
    per: &mut Vec<Res>,
) {
    w.poll();
    w.recycle_outputs(&mut b.spare);
    let sw = w.switch_mut();
    for m in &b.pkts {
        if deterministic {
            sw.set_clock_us(Some(m.ts_ns / 1000));
        }
        sw.process_packet(m.port, b.frame(m), outs);
        per.push(Res {
            outs_end: outs.len(),
            lines: sw.take_log(),
            trace: sw.take_trace(),
            digests: sw.take_digests().len(),
        });
    }
}

/// CPU time of the calling thread in nanoseconds (Linux `/proc/thread-self`), if readable.
pub(super) fn thread_cpu_ns() -> Option<u64> {
    if let Ok(s) = std::fs::read_to_string("/proc/thread-self/schedstat") {
        if let Some(ns) = s.split_whitespace().next().and_then(|v| v.parse().ok()) {
            return Some(ns);
        }
    }
    // Fallback: utime + stime in clock ticks (fields 14 and 15; the name may hold spaces).
    let s = std::fs::read_to_string("/proc/thread-self/stat").ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(ticks * 10_000_000)
}

/// Set while a wake-up is queued for a worker and not yet taken: a burst of control changes
/// queues one wake-up, not one per change (they would fill the worker's packet queue).
type WakeFlag = Arc<std::sync::atomic::AtomicBool>;

fn wake_flags(n: usize) -> Vec<WakeFlag> {
    (0..n).map(|_| WakeFlag::default()).collect()
}

/// A worker took a wake-up: clear its flag (before polling, so a change queued after this
/// point queues a new wake-up; the read-modify-write pairs with the control's, so every change
/// queued before the flag was set is visible to the poll that follows).
fn woken(flag: &WakeFlag) {
    flag.swap(false, std::sync::atomic::Ordering::SeqCst);
}

/// The control shared by the control servers, with wakers for the workers' queues.
fn shared_control(
    mut ctl: Control,
    txs: &[SyncSender<Job>],
    flags: Vec<WakeFlag>,
) -> Arc<Mutex<Control>> {
    let wake = txs.to_vec();
    ctl.set_waker(move |i| {
        if !flags[i].swap(true, std::sync::atomic::Ordering::SeqCst) {
            // A stopped worker no longer needs waking.
            let _ = wake[i].send(Job::Wake);
        }
    });
    // With the behaviour cache on, a change is acknowledged only once every worker has
    // applied it (and dropped the cached behaviours it invalidates).
    if ctl.switch().bcache_stats().is_some() {
        ctl.set_barrier(true);
    }
    Arc::new(Mutex::new(ctl))
}

fn lock(ctl: &Arc<Mutex<Control>>) -> anyhow::Result<std::sync::MutexGuard<'_, Control>> {
    ctl.lock()
        .map_err(|_| anyhow::anyhow!("control state poisoned by a panic"))
}

/// Apply `--commands` through the workers' control.
fn apply_commands_workers(ctl: &Arc<Mutex<Control>>, path: &Path) -> anyhow::Result<()> {
    let mut g = lock(ctl)?;
    let cli = tern_control::Cli::new(g.switch().program());
    run_commands(cli, &mut *g, path)
}

/// Print each worker's share: packets and CPU seconds (read on the worker's own thread, unless
/// `cpu` gives them).
fn worker_summary(
    ctl: &Arc<Mutex<Control>>,
    packets: &[u64],
    cpu: Option<Vec<Option<u64>>>,
) -> anyhow::Result<()> {
    let cpu = match cpu {
        Some(c) => c,
        None => lock(ctl)?.query(|_, _| thread_cpu_ns()),
    };
    for line in worker_lines(&cpu, packets, true) {
        eprintln!("{line}");
    }
    let bc = lock(ctl)?.query(|_, sw| sw.bcache_stats());
    if bc.iter().any(|b| b.is_some()) {
        let mut sum = tern_dataplane::bcache::Stats::default();
        for b in bc.iter().flatten() {
            sum.add(b);
        }
        eprintln!("tern run: bcache (sum over {} workers): {sum}", bc.len());
    }
    Ok(())
}

/// One summary line per worker: its packets and, when known, its CPU seconds (and, with
/// `per_packet`, nanoseconds per packet).
fn worker_lines(cpu: &[Option<u64>], packets: &[u64], per_packet: bool) -> Vec<String> {
    packets
        .iter()
        .enumerate()
        .map(|(i, n)| match cpu.get(i).copied().flatten() {
            Some(ns) => format!(
                "tern run: worker {i}: {n} packets, {:.3} CPU-s{}",
                ns as f64 / 1e9,
                if per_packet && *n > 0 {
                    format!(", {:.0} ns/packet", ns as f64 / *n as f64)
                } else {
                    String::new()
                }
            ),
            None => format!("tern run: worker {i}: {n} packets"),
        })
        .collect()
}

/// Entry from [`super::run`] when `--workers` > 1.
pub(super) fn run(
    args: &RunArgs,
    json: &str,
    opts: SwitchOptions,
    specs: &[PortSpec],
    live: bool,
    wait: u64,
) -> anyhow::Result<ExitCode> {
    let n = args.dataplane.workers as usize;
    if args.control.grpc_addr.is_some() || args.control.no_p4 {
        anyhow::bail!(
            "--workers {n}: P4Runtime (--grpc-addr, --no-p4) drives a single switch and is not \
             supported with workers; use --workers 1"
        );
    }
    if live && args.pcap.is_some() {
        anyhow::bail!(
            "--workers {n}: --pcap capture on interfaces is not supported with workers \
             (outputs leave from several threads); use --workers 1"
        );
    }
    let (ctl, mut ws) = match workers::build(json, opts, n) {
        Ok(r) => r,
        Err(e) => {
            // As the single-threaded run (and simple_switch): the reason on stdout, exit 1.
            println!("{e}");
            return Ok(ExitCode::from(1));
        }
    };
    let mut log = Logger::new(args)?;
    if log.on(Level::Debug) {
        // As with one worker: at debug level and below each packet's trace is logged.
        for w in &mut ws {
            w.switch_mut().set_trace(true);
        }
    }
    if live {
        run_live(ctl, ws, specs, log, args)
    } else {
        run_files(ctl, ws, specs, &mut log, args, wait)
    }
}

/// File mode; see the module documentation.
fn run_files(
    ctl: Control,
    ws: Vec<Worker>,
    specs: &[PortSpec],
    log: &mut Logger,
    args: &RunArgs,
    wait: u64,
) -> anyhow::Result<ExitCode> {
    // With a FIFO input outputs are flushed whenever the writer has caught up with the
    // workers (after each processed batch it writes); with regular files only when the
    // 256 KiB buffers fill and at the end (a write per batch cost system time per 64 packets).
    let out_cfg = tern_ports::WriterConfig {
        flush_each_packet: false,
        ..tern_ports::WriterConfig::bmv2()
    };
    let Some(mut ports) = open_file_ports(specs, out_cfg, args, log)? else {
        return Ok(ExitCode::from(1));
    };

    let n = ws.len();
    let (done_tx, done_rx) = mpsc::channel::<Done>();
    let flags = wake_flags(n);
    let det = args.deterministic;
    let spawn = |w: Worker, rx: Receiver<Job>| {
        let done = done_tx.clone();
        let flag = flags[w.id].clone();
        std::thread::Builder::new()
            .name(format!("worker-{}", w.id))
            .spawn(move || file_worker(w, rx, done, det, flag))
            .context("starting a worker thread")
    };
    let mut txs = Vec::new();
    let mut threads = Vec::new();
    for w in ws {
        let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
        txs.push(tx);
        threads.push(spawn(w, rx)?);
    }
    let ctl = shared_control(ctl, &txs, flags.clone());

    if let Some(cmds) = &args.commands {
        apply_commands_workers(&ctl, cmds)?;
    }
    let control = start_control_server(&ctl, args)?;
    if wait > 0 {
        std::thread::sleep(Duration::from_secs(wait));
    }

    let fifo = tern_ports::any_fifo_input(Path::new(""), specs);
    // Mapped inputs without per-packet logging: the workers read and write the files
    // themselves (`run_files_par`), the main thread only reads the record headers.
    let par = !fifo && !log.on(Level::Info) && ports.as_files().is_some_and(|f| f.mapped());
    let (stats, per_worker, cpu) = if par {
        // The workers come back from their threads for the run (their queues stay, so
        // control wake-ups sent meanwhile wait there; the run polls the control itself)
        // and go back afterwards to keep answering the control plane.
        let mut back = Vec::with_capacity(n);
        for tx in &txs {
            tx.send(Job::Stop)
                .map_err(|_| anyhow::anyhow!("a worker ended early"))?;
        }
        for t in threads.drain(..) {
            back.push(
                t.join()
                    .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?
                    .ok_or_else(|| anyhow::anyhow!("a worker ended early"))?,
            );
        }
        let (mut ws, rxs): (Vec<Worker>, Vec<Receiver<Job>>) = back.into_iter().unzip();
        let files = ports.as_files().expect("checked above");
        let res = run_files_par::replay(&mut ws, files, det);
        for (w, rx) in ws.into_iter().zip(rxs) {
            threads.push(spawn(w, rx)?);
        }
        let r = res?;
        (r.stats, r.per_worker, Some(r.cpu_ns))
    } else {
        let mut d = Dispatcher::new(n, args, fifo);
        let stats = d.replay(ports.as_mut(), log, &txs, &done_rx)?;
        (stats, std::mem::take(&mut d.per_worker), None)
    };
    drop(done_tx);
    ports.flush()?;
    log.finish()?;
    summary(&stats);
    worker_summary(&ctl, &per_worker, cpu)?;
    if let Some(server) = control {
        // As with one worker: keep serving the control plane (the workers stay up to apply
        // changes and answer counter reads).
        eprintln!("tern run: inputs exhausted; control server still running");
        server
            .join()
            .map_err(|_| anyhow::anyhow!("the control server thread panicked"))?;
    }
    for tx in &txs {
        let _ = tx.send(Job::Stop);
    }
    for t in threads {
        t.join()
            .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// A worker thread of the dispatching run: runs the batches it receives and answers control
/// wake-ups. On [`Job::Stop`] it gives its worker and queue back; `None`: the dispatcher is gone.
fn file_worker(
    mut w: Worker,
    rx: Receiver<Job>,
    done: Sender<Done>,
    deterministic: bool,
    flag: WakeFlag,
) -> Option<(Worker, Receiver<Job>)> {
    while let Ok(job) = rx.recv() {
        match job {
            Job::Pkts(mut batch) => {
                let mut outs = Vec::with_capacity(batch.pkts.len());
                let mut per = Vec::with_capacity(batch.pkts.len());
                process(&mut w, &mut batch, deterministic, &mut outs, &mut per);
                let d = Done {
                    worker: w.id,
                    batch,
                    outs,
                    per,
                };
                if done.send(d).is_err() {
                    return None;
                }
            }
            Job::Wake => {
                woken(&flag);
                w.poll();
            }
            Job::Stop => return Some((w, rx)),
        }
    }
    None
}

/// File mode's main loop state: open batches, the reorder buffer, counters.
struct Dispatcher {
    n: usize,
    /// The batch being filled for each worker.
    open: Vec<Batch>,
    /// Emptied batches for reuse.
    pool: Vec<Batch>,
    /// Written frames to hand back to each worker's buffer pool with its next batch.
    spare: Vec<Vec<OutputPacket>>,
    /// The worker of every packet read but not yet written, in packet id order.
    order: VecDeque<u32>,
    /// Processed batches per worker, with the index of the next packet to write.
    pending: Vec<VecDeque<(Done, usize)>>,
    /// Packets given to each worker.
    per_worker: Vec<u64>,
    st: Stats,
    dump: usize,
    wall_out: bool,
    /// Flush the outputs after each round of written results (an input is a FIFO).
    flush_often: bool,
}

impl Dispatcher {
    fn new(n: usize, args: &RunArgs, fifo: bool) -> Dispatcher {
        Dispatcher {
            n,
            open: (0..n).map(|_| Batch::default()).collect(),
            pool: Vec::new(),
            spare: (0..n).map(|_| Vec::new()).collect(),
            order: VecDeque::new(),
            pending: (0..n).map(|_| VecDeque::new()).collect(),
            per_worker: vec![0; n],
            st: Stats::default(),
            dump: args.log.dump_packet_data,
            wall_out: !args.deterministic,
            flush_often: fifo,
        }
    }

    fn replay(
        &mut self,
        ports: &mut dyn PortIo,
        log: &mut Logger,
        txs: &[SyncSender<Job>],
        done: &Receiver<Done>,
    ) -> anyhow::Result<(Stats, Duration)> {
        let start = Instant::now();
        let mut held: Vec<Held> = Vec::with_capacity(BATCH);
        // An input error ends the reading; the packets read before it are still processed
        // and written (as with one worker), then the run stops with it.
        let mut pending: Option<tern_ports::PortError> = None;
        match ports.recv_held(BATCH, &mut held) {
            Ok(true) => {
                // Mapped input files: each frame is copied once, from the mapping into its
                // worker's batch.
                while !held.is_empty() {
                    for h in &held {
                        if self.enqueue(h.meta, ports.held(h), txs)? {
                            self.collect(ports, log, done)?;
                        }
                    }
                    if let Err(e) = ports.recv_held(BATCH, &mut held) {
                        pending = Some(e);
                        break;
                    }
                }
            }
            Ok(false) => {
                let mut buf = Vec::with_capacity(2048);
                loop {
                    match ports.recv(&mut buf) {
                        Ok(Some(m)) => {
                            if self.enqueue(m, &buf, txs)? {
                                self.collect(ports, log, done)?;
                            }
                        }
                        Ok(None) => break,
                        Err(e) => {
                            pending = Some(e);
                            break;
                        }
                    }
                }
            }
            Err(e) => pending = Some(e),
        }
        for w in 0..self.n {
            if !self.open[w].pkts.is_empty() {
                self.dispatch(w, txs)?;
            }
        }
        while !self.order.is_empty() {
            let d = done
                .recv()
                .map_err(|_| anyhow::anyhow!("the workers ended early"))?;
            self.store(d, ports, log)?;
        }
        if let Some(e) = pending {
            return Err(e.into());
        }
        Ok((std::mem::take(&mut self.st), start.elapsed()))
    }

    /// Give an input packet its id and put it in its worker's open batch; sends the batch when
    /// it is full (and every open batch every [`FLUSH_EVERY`] packets). `true`: a batch was
    /// sent, so results may be waiting.
    fn enqueue(
        &mut self,
        m: RxMeta,
        frame: &[u8],
        txs: &[SyncSender<Job>],
    ) -> anyhow::Result<bool> {
        let id = self.st.rx;
        self.st.rx += 1;
        let w = (flow_hash(frame) % self.n as u64) as usize;
        self.per_worker[w] += 1;
        self.order.push_back(w as u32);
        self.open[w].push(id, m.port, m.ts_ns, frame);
        let mut sent = false;
        if self.open[w].pkts.len() >= BATCH {
            self.dispatch(w, txs)?;
            sent = true;
        }
        if self.st.rx.is_multiple_of(FLUSH_EVERY) {
            for w in 0..self.n {
                if !self.open[w].pkts.is_empty() {
                    self.dispatch(w, txs)?;
                    sent = true;
                }
            }
        }
        Ok(sent)
    }

    /// Write the results that are ready. Results are collected when a batch has just been
    /// sent (every ~BATCH / N packets), not after every packet: a channel poll per packet is
    /// work of the serial thread.
    fn collect(
        &mut self,
        ports: &mut dyn PortIo,
        log: &mut Logger,
        done: &Receiver<Done>,
    ) -> anyhow::Result<()> {
        let mut wrote = false;
        loop {
            match done.try_recv() {
                Ok(d) => {
                    self.store(d, ports, log)?;
                    wrote = true;
                }
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => anyhow::bail!("the workers ended early"),
            }
        }
        if wrote && self.flush_often {
            ports.flush()?;
        }
        Ok(())
    }

    /// Send worker `w` its open batch, blocking while its queue is full. This cannot
    /// deadlock: a worker never waits for this thread (its results go to an unbounded
    /// channel), and the queue may be full of control wake-ups only, so waiting for a result
    /// instead could wait forever.
    fn dispatch(&mut self, w: usize, txs: &[SyncSender<Job>]) -> anyhow::Result<()> {
        let next = self.pool.pop().unwrap_or_default();
        let mut b = std::mem::replace(&mut self.open[w], next);
        b.spare = std::mem::take(&mut self.spare[w]);
        txs[w]
            .send(Job::Pkts(b))
            .map_err(|_| anyhow::anyhow!("worker {w} ended early"))
    }

    /// Keep a processed batch and write every packet now next in input order.
    fn store(&mut self, d: Done, ports: &mut dyn PortIo, log: &mut Logger) -> anyhow::Result<()> {
        self.pending[d.worker].push_back((d, 0));
        // Output timestamps: the wall clock once per round of writing, not per output.
        let wall = if self.wall_out { wall_ns() } else { 0 };
        while let Some(&w) = self.order.front() {
            let w = w as usize;
            let Some((d, k)) = self.pending[w].front_mut() else {
                break;
            };
            let i = *k;
            *k += 1;
            let first = if i == 0 { 0 } else { d.per[i - 1].outs_end };
            write_packet(
                &mut self.st,
                ports,
                log,
                &d.batch,
                i,
                &d.outs[first..d.per[i].outs_end],
                &d.per[i],
                self.dump,
                self.wall_out.then_some(wall),
            )?;
            self.order.pop_front();
            if *k == d.per.len() {
                let (mut d, _) = self.pending[w].pop_front().expect("front exists");
                self.spare[w].append(&mut d.outs);
                d.batch.pkts.clear();
                d.batch.data.clear();
                self.pool.push(d.batch);
            }
        }
        Ok(())
    }
}

/// Log and write packet `i` of `batch` (its outputs `outs`), as the single-threaded run does.
#[allow(clippy::too_many_arguments)]
fn write_packet(
    st: &mut Stats,
    ports: &mut dyn PortIo,
    log: &mut Logger,
    batch: &Batch,
    i: usize,
    outs: &[OutputPacket],
    res: &Res,
    dump: usize,
    wall: Option<u64>,
) -> anyhow::Result<()> {
    let m = &batch.pkts[i];
    let ts = || wall.unwrap_or(m.ts_ns);
    finish_packet(st, ports, log, m, batch.frame(m), res, outs, dump, ts)
}

/// One packet's log lines and outputs, in the single-threaded run's order: the receive lines,
/// its trace and `log_msg` lines, the drop and digest notes, then each output frame (stamped
/// with `ts()`).
#[allow(clippy::too_many_arguments)]
fn finish_packet(
    st: &mut Stats,
    ports: &mut dyn PortIo,
    log: &mut Logger,
    m: &Meta,
    frame: &[u8],
    res: &Res,
    outs: &[OutputPacket],
    dump: usize,
    ts: impl Fn() -> u64,
) -> anyhow::Result<()> {
    let pkt = Some((m.id, m.ts_ns));
    log_received(log, pkt, m.port, frame, dump)?;
    log_trace(log, pkt, &res.trace)?;
    for l in &res.lines {
        log.log(Level::Info, pkt, l)?;
    }
    st.digests += res.digests as u64;
    if outs.is_empty() {
        st.dropped += 1;
        if log.on(Level::Debug) {
            log.log(Level::Debug, pkt, "Packet dropped (no output)")?;
        }
    }
    if res.digests > 0 && log.on(Level::Debug) {
        log.log(
            Level::Debug,
            pkt,
            &format!("{} digest(s) generated (no listener)", res.digests),
        )?;
    }
    for o in outs {
        send_output(st, ports, log, pkt, o, ts(), dump)?;
    }
    Ok(())
}

/// The per-packet receive log lines (both run loops).
pub(super) fn log_received(
    log: &mut Logger,
    pkt: Option<(u64, u64)>,
    port: Port,
    frame: &[u8],
    dump: usize,
) -> anyhow::Result<()> {
    if log.on(Level::Debug) {
        log.log(
            Level::Debug,
            pkt,
            &format!("Processing packet received on port {port}"),
        )?;
    }
    if dump > 0 && log.on(Level::Info) {
        log.log(
            Level::Info,
            pkt,
            &format!(
                "Packet data received on port {port} ({} bytes): {}",
                frame.len(),
                hex(frame, dump)
            ),
        )?;
    }
    Ok(())
}

/// A packet's trace lines, each at its level (the single-threaded run logs them the same way).
pub(super) fn log_trace(
    log: &mut Logger,
    pkt: Option<(u64, u64)>,
    trace: &[tern_dataplane::trace::TraceLine],
) -> anyhow::Result<()> {
    use tern_dataplane::trace::TraceLevel;
    for t in trace {
        let level = match t.level {
            TraceLevel::Trace => Level::Trace,
            TraceLevel::Debug => Level::Debug,
            TraceLevel::Info => Level::Info,
            TraceLevel::Error => Level::Error,
        };
        if log.on(level) {
            log.log(level, pkt, &t.text)?;
        }
    }
    Ok(())
}

/// Send one output frame, with its log lines and counters (both run loops).
pub(super) fn send_output(
    st: &mut Stats,
    ports: &mut dyn PortIo,
    log: &mut Logger,
    pkt: Option<(u64, u64)>,
    o: &OutputPacket,
    ts: u64,
    dump: usize,
) -> anyhow::Result<()> {
    if log.on(Level::Debug) {
        log.log(
            Level::Debug,
            pkt,
            &format!(
                "Transmitting packet of size {} out of port {}",
                o.data.len(),
                o.port
            ),
        )?;
    }
    if ports.send(o.port, ts, &o.data)? {
        st.tx += 1;
        if dump > 0 && log.on(Level::Info) {
            log.log(
                Level::Info,
                pkt,
                &format!(
                    "Packet data sent on port {} ({} bytes): {}",
                    o.port,
                    o.data.len(),
                    hex(&o.data, dump)
                ),
            )?;
        }
    } else {
        st.discarded += 1;
        if log.on(Level::Debug) {
            log.log(
                Level::Debug,
                pkt,
                &format!("Port {} is not attached: packet discarded", o.port),
            )?;
        }
    }
    Ok(())
}

/// Live mode; see the module documentation.
fn run_live(
    ctl: Control,
    ws: Vec<Worker>,
    specs: &[PortSpec],
    mut log: Logger,
    args: &RunArgs,
) -> anyhow::Result<ExitCode> {
    let Some(mut live) = open_live_ports(specs, args, &mut log)? else {
        return Ok(ExitCode::from(1));
    };
    let logging = log.on(Level::Error);
    let log = Arc::new(Mutex::new(log));
    let n = ws.len();
    let flags = wake_flags(n);
    let mut txs = Vec::new();
    let mut threads = Vec::new();
    for w in ws {
        let (tx, rx) = mpsc::sync_channel::<Job>(1024);
        txs.push(tx);
        let (ready_tx, ready_rx) = mpsc::sync_channel::<Result<(), String>>(1);
        let specs = specs.to_vec();
        let log = Arc::clone(&log);
        let opts = LiveOpts {
            deterministic: args.deterministic,
            dump: args.log.dump_packet_data,
            logging,
            qdisc_bypass: !args.dataplane.no_qdisc_bypass,
        };
        let flag = flags[w.id].clone();
        threads.push(
            std::thread::Builder::new()
                .name(format!("worker-{}", w.id))
                .spawn(move || live_worker(w, rx, &specs, log, opts, flag, ready_tx))
                .context("starting a worker thread")?,
        );
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => anyhow::bail!("worker transmit sockets: {e}"),
            Err(_) => anyhow::bail!("a worker thread ended early"),
        }
    }
    let ctl = shared_control(ctl, &txs, flags);
    if let Some(cmds) = &args.commands {
        apply_commands_workers(&ctl, cmds)?;
    }
    // As the single-threaded run: Thrift on 9090 unless told otherwise (busy default: warning).
    let _control = match args.control.thrift_port {
        Some(p) => Some(serve_thrift(&ctl, p, args.control.thrift_max_connections)?),
        None => match serve_thrift(&ctl, 9090, args.control.thrift_max_connections) {
            Ok(h) => Some(h),
            Err(e) => {
                eprintln!("tern run: warning: {e:#}; running without a control server");
                None
            }
        },
    };
    eprintln!(
        "tern run: switching on {} with {n} workers (Ctrl-C or SIGTERM to stop)",
        specs
            .iter()
            .map(|s| format!("{}@{}", s.port, s.name))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let mut per_worker = vec![0u64; n];
    let mut buf = Vec::with_capacity(2048);
    let mut rx_count = 0u64;
    let start = Instant::now();
    let mut failed = None;
    // Frames are handed over as they arrive, in bursts: after a blocking receive, whatever
    // the rings already hold (up to LIVE_BURST frames) goes to the workers in one batch each,
    // so a burst costs one channel send (and one allocation) per worker, not per frame.
    let mut open: Vec<Batch> = (0..n).map(|_| Batch::default()).collect();
    'rx: while let Some(first) = live.recv(&mut buf)? {
        let mut m = first;
        for k in 1.. {
            let id = rx_count;
            rx_count += 1;
            let w = (flow_hash(&buf) % n as u64) as usize;
            per_worker[w] += 1;
            open[w].push(id, m.port, m.ts_ns, &buf);
            if k == LIVE_BURST {
                break;
            }
            match live.try_recv(&mut buf)? {
                Some(next) => m = next,
                None => break,
            }
        }
        for (w, b) in open.iter_mut().enumerate() {
            if !b.pkts.is_empty() && txs[w].send(Job::Pkts(std::mem::take(b))).is_err() {
                failed = Some(w);
                break 'rx;
            }
        }
    }
    let elapsed = start.elapsed();
    let mut st = Stats {
        rx: rx_count,
        ..Stats::default()
    };
    let cpu = worker_summary_lines(&ctl, &per_worker);
    for tx in &txs {
        let _ = tx.send(Job::Stop);
    }
    let mut tx_stats = LiveStats::default();
    for t in threads {
        let (s, l) = t
            .join()
            .map_err(|_| anyhow::anyhow!("a worker thread panicked"))?;
        st.tx += s.tx;
        st.dropped += s.dropped;
        st.discarded += s.discarded;
        st.digests += s.digests;
        tx_stats.tx += l.tx;
        tx_stats.tx_errors += l.tx_errors;
    }
    lock_log(&log)?.finish()?;
    if let Some(w) = failed {
        anyhow::bail!("worker {w} stopped early (see the messages above)");
    }
    summary(&(st, elapsed));
    for l in cpu {
        eprintln!("{l}");
    }
    let rx = live.stats();
    eprintln!(
        "tern run: interfaces: {} frames sent, {} send errors, {} checksums completed, \
         {} too long for the ring, {} received whole past the ring, {} interface errors",
        tx_stats.tx,
        tx_stats.tx_errors,
        rx.csum_completed,
        rx.truncated,
        rx.copied,
        rx.iface_errors
    );
    Ok(ExitCode::SUCCESS)
}

/// [`worker_summary`] as lines without the per-packet figure (live mode prints them after
/// the totals; a poisoned control gives the packet counts alone).
fn worker_summary_lines(ctl: &Arc<Mutex<Control>>, packets: &[u64]) -> Vec<String> {
    let cpu = lock(ctl)
        .map(|c| c.query(|_, _| thread_cpu_ns()))
        .unwrap_or_default();
    worker_lines(&cpu, packets, false)
}

fn lock_log(log: &Arc<Mutex<Logger>>) -> anyhow::Result<std::sync::MutexGuard<'_, Logger>> {
    log.lock()
        .map_err(|_| anyhow::anyhow!("logger poisoned by a panic"))
}

/// What a live worker needs from the command line.
#[derive(Clone, Copy)]
struct LiveOpts {
    deterministic: bool,
    dump: usize,
    /// Some logging is enabled (else the logger's lock is never taken).
    logging: bool,
    /// `PACKET_QDISC_BYPASS` on the worker's transmit sockets (not `--no-qdisc-bypass`).
    qdisc_bypass: bool,
}

/// A live worker: runs the frames it is given and transmits their outputs on its own
/// sockets; flushes whenever its queue is empty, then blocks. Returns its counters.
fn live_worker(
    mut w: Worker,
    rx: Receiver<Job>,
    specs: &[PortSpec],
    log: Arc<Mutex<Logger>>,
    o: LiveOpts,
    flag: WakeFlag,
    ready: SyncSender<Result<(), String>>,
) -> (Stats, LiveStats) {
    let mut st = Stats::default();
    // Transmit only: the smallest receive ring, no promiscuous mode.
    let cfg = LiveConfig {
        block_size: 4096,
        block_nr: 1,
        promisc: false,
        tx_batch: 64,
        qdisc_bypass: o.qdisc_bypass,
        ..LiveConfig::default()
    };
    let mut ports = match LivePorts::open(specs, cfg, Arc::default()) {
        Ok(p) => {
            let _ = ready.send(Ok(()));
            p
        }
        Err(e) => {
            let _ = ready.send(Err(e.to_string()));
            return (st, LiveStats::default());
        }
    };
    let mut outs = Vec::new();
    let mut per = Vec::new();
    loop {
        let job = match rx.try_recv() {
            Ok(j) => j,
            Err(TryRecvError::Empty) => {
                if let Err(e) = ports.flush() {
                    eprintln!("tern run: worker {}: {e}", w.id);
                }
                match rx.recv() {
                    Ok(j) => j,
                    Err(_) => break,
                }
            }
            Err(TryRecvError::Disconnected) => break,
        };
        match job {
            Job::Pkts(mut b) => {
                outs.clear();
                per.clear();
                process(&mut w, &mut b, o.deterministic, &mut outs, &mut per);
                if let Err(e) = live_outputs(&mut st, &mut ports, &log, &b, &outs, &per, o) {
                    eprintln!("tern run: worker {}: {e:#}", w.id);
                    break;
                }
                w.recycle_outputs(&mut outs);
            }
            Job::Wake => {
                woken(&flag);
                w.poll();
            }
            Job::Stop => break,
        }
    }
    let _ = ports.flush();
    (st, ports.stats())
}

/// Transmit (and log) the outputs of a live batch.
fn live_outputs(
    st: &mut Stats,
    ports: &mut LivePorts,
    log: &Arc<Mutex<Logger>>,
    b: &Batch,
    outs: &[OutputPacket],
    per: &[Res],
    o: LiveOpts,
) -> anyhow::Result<()> {
    let mut first = 0;
    for (i, res) in per.iter().enumerate() {
        let mine = &outs[first..res.outs_end];
        first = res.outs_end;
        let m = &b.pkts[i];
        if !o.logging {
            // Fast path: nothing is logged.
            st.digests += res.digests as u64;
            if mine.is_empty() {
                st.dropped += 1;
            }
            for p in mine {
                if ports.send(p.port, 0, &p.data)? {
                    st.tx += 1;
                } else {
                    st.discarded += 1;
                }
            }
            continue;
        }
        let mut l = lock_log(log)?;
        finish_packet(st, ports, &mut l, m, b.frame(m), res, mine, o.dump, || 0)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_runtime::{CounterValue, Runtime, RuntimeError, SwapError};

    /// Every packet increments register cell 0 (read then write in one action) and counter
    /// cell 1, and leaves on port 2.
    const COUNTING: &str = include_str!("../../../p4/tests/counting.p4");

    /// A register write from the control is applied once, to the shared bank, when it is made:
    /// a worker that applies its pending updates late must not write the old value over what
    /// packets (or later writes) put there since. Driven step by step, without threads, so the
    /// "late" worker is late every time.
    #[test]
    fn a_late_worker_does_not_replay_register_writes() {
        let json = tern_p4::compile_str(COUNTING, "counting.p4", &Default::default())
            .expect("compiles")
            .json;
        let (mut ctl, mut ws) = workers::build(&json, SwitchOptions::default(), 2).expect("loads");
        // The control's own read (under the bank's lock), not `Runtime::register_read`, which
        // asks worker 0's thread, and there is none here.
        let read = |ctl: &mut workers::Control, i| {
            workers::Control::register_read(ctl, "I.total", i).unwrap()
        };
        ctl.register_write("I.total", 0, 5).unwrap();
        assert_eq!(read(&mut ctl, 0), 5);
        // Worker 0 picks up what was published, then one packet adds 1.
        let mut out = Vec::new();
        ws[0].process_packet(1, &[0u8; 60], &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(read(&mut ctl, 0), 6);
        // Worker 1 polls only now: the increment stays.
        ws[1].poll();
        assert_eq!(read(&mut ctl, 0), 6);
        // Two writes in a row; a worker polling in between and after changes nothing.
        ctl.register_write("I.total", 1, 7).unwrap();
        ws[0].poll();
        ctl.register_write("I.total", 1, 8).unwrap();
        ws[0].poll();
        ws[1].poll();
        assert_eq!(read(&mut ctl, 1), 8);
        ctl.register_write_range("I.total", 2, 3, 4).unwrap();
        ctl.register_reset("I.total").unwrap();
        ws[1].process_packet(1, &[0u8; 60], &mut out);
        ws[0].poll();
        assert_eq!(read(&mut ctl, 0), 1);
        assert_eq!(read(&mut ctl, 2), 0);
    }

    /// The file-mode worker threads, driven as `run_files` drives them: packets in batches;
    /// then, with every worker idle (blocked on its queue), reads through the `Runtime` of the
    /// control must wake them: the register read comes from the shared bank (every increment
    /// of both workers), the counter is the sum over workers; a swap is refused for a program
    /// with registers; Stop ends the threads.
    #[test]
    fn idle_workers_answer_runtime_reads_through_the_waker() {
        let json = tern_p4::compile_str(COUNTING, "counting.p4", &Default::default())
            .expect("compiles")
            .json;
        let (ctl, ws) = workers::build(&json, SwitchOptions::default(), 2).expect("loads");
        let (done_tx, done_rx) = mpsc::channel::<Done>();
        let flags = wake_flags(2);
        let mut txs = Vec::new();
        let mut threads = Vec::new();
        for w in ws {
            let (tx, rx) = mpsc::sync_channel::<Job>(QUEUE);
            txs.push(tx);
            let done = done_tx.clone();
            let flag = flags[w.id].clone();
            threads.push(std::thread::spawn(move || {
                file_worker(w, rx, done, false, flag)
            }));
        }
        drop(done_tx);
        let ctl = shared_control(ctl, &txs, flags);
        let (batches, per) = (10usize, 50usize);
        let mut id = 0;
        for k in 0..batches {
            let mut b = Batch::default();
            for _ in 0..per {
                b.push(id, 1, 0, &[k as u8; 60]);
                id += 1;
            }
            txs[k % 2].send(Job::Pkts(b)).unwrap();
        }
        let mut outs = 0;
        for _ in 0..batches {
            let d = done_rx.recv().unwrap();
            assert!(d.outs.iter().all(|o| o.port == 2));
            outs += d.outs.len();
        }
        assert_eq!(outs, batches * per);
        let total = (batches * per) as u64;
        {
            let mut g = ctl.lock().unwrap();
            let rt: &mut dyn Runtime = &mut *g;
            assert_eq!(rt.register_read("I.total", 0).unwrap(), total);
            assert_eq!(rt.register_read_all("I.total").unwrap()[0], total);
            let c = rt.counter_read("I.seen", 1).unwrap();
            assert_eq!((c.packets, c.bytes), (total, 60 * total));
            rt.counter_write(
                "I.seen",
                1,
                CounterValue {
                    packets: 3,
                    bytes: 4,
                },
            )
            .unwrap();
            assert_eq!(rt.counter_read("I.seen", 1).unwrap().packets, 3);
            // A burst of changes (more than a queue holds) while the workers are idle.
            for v in 0..200 {
                rt.register_write("I.total", 1, v).unwrap();
            }
            assert_eq!(rt.register_read("I.total", 1).unwrap(), 199);
            rt.register_write("I.total", 0, 9).unwrap();
            assert_eq!(rt.register_read("I.total", 0).unwrap(), 9);
            assert!(rt.register_read("I.total", 99).is_err());
            assert_eq!(
                rt.load_new_config(&json).unwrap_err(),
                RuntimeError::Swap(SwapError::CONFIG_SWAP_DISABLED)
            );
        }
        for tx in &txs {
            tx.send(Job::Stop).unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
    }
}
