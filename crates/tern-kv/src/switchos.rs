//! The switch OS of the in-network caches (`p4/kv/netcache.p4`, `p4/kv/farreach.p4`): cache
//! admission, eviction by sampling, periodic sketch resets and (FarReach) crash-consistent
//! snapshots. It drives the switch only through tern's runtime interface ([`Runtime`]: table
//! entries, registers, default actions), so the same code drives the in-process switch of
//! `tern kv up --mode sim` or any switch behind the Thrift API.
//!
//! * Reports: servers send CACHE_POP / NETCACHE_CACHE_POP (body: server index, u16) when the
//!   data plane marked a request hot; the receiver thread acknowledges each at once and queues
//!   the key (admission never blocks a request: the data plane forwarded it already).
//! * Admission (worker thread): a free slot, else a victim (the least frequent of `sample`
//!   random cached slots); the slot's record is cleared with latest = 0 (FarReach fetches the
//!   value on the first read, GETREQ_NLATEST; NetCache asks the server to send its record,
//!   NETCACHE_CACHE_POP_FINISH → NETCACHE_VALUEUPDATE), then `cache_lookup` gets key → slot and
//!   validvalue := 1.
//! * Eviction: FarReach marks the slot being evicted (validvalue 3; reads still served, writes go
//!   to the server), writes the switch's record back whenever the slot holds one (CACHE_EVICT,
//!   applied with the seq check; not only when latest: a write passing between two runtime
//!   calls clears latest), then validvalue := 0 and the entry is removed. A write-back nobody
//!   acknowledges leaves the slot being evicted (never valid again) until a later eviction
//!   retries it. NetCache copies are clean: validvalue := 0, entry removed.
//! * Snapshot (FarReach, every `snapshot_period`): set the snapshot token, read every cached
//!   slot (its shadow record when case 1 copied one), clear the token and the case1 bits.
//! * Every message to a server is retried until acknowledged (`tries` × `ack_timeout`); a lost
//!   message costs a retry, an unanswered one a skipped admission, never a wrong cache.
//!   `loss` drops that fraction of the switch OS's own sends and received reports (lossy mode).

use crate::protocol::{Key, Message, Op};
use crate::rng::Rng;
use crate::server::evict_body;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tern_runtime::{EntryHandle, MatchParam, RtResult, Runtime};

/// Access to a switch's runtime interface, serialised with its packet processing.
pub trait SwitchAccess: Send + Sync + 'static {
    /// Runs `f` on the switch.
    fn with(&self, f: &mut dyn FnMut(&mut dyn Runtime) -> RtResult<()>) -> RtResult<()>;
}

impl<T: SwitchAccess + ?Sized> SwitchAccess for Box<T> {
    fn with(&self, f: &mut dyn FnMut(&mut dyn Runtime) -> RtResult<()>) -> RtResult<()> {
        (**self).with(f)
    }
}

impl<R: Runtime + Send + 'static> SwitchAccess for Mutex<R> {
    fn with(&self, f: &mut dyn FnMut(&mut dyn Runtime) -> RtResult<()>) -> RtResult<()> {
        match self.lock() {
            Ok(mut g) => f(&mut *g),
            Err(p) => f(&mut *p.into_inner()),
        }
    }
}

/// Which cache program the switch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheKind {
    /// `p4/kv/netcache.p4`: write-through.
    NetCache,
    /// `p4/kv/farreach.p4`: write-back.
    FarReach,
}

/// Switch OS settings.
#[derive(Clone, Debug)]
pub struct SwitchOsConfig {
    /// The program.
    pub kind: CacheKind,
    /// Cache capacity in records (at most the program's `KV_RECORDS`).
    pub capacity: u32,
    /// Cached slots sampled per eviction (FarReach: 10).
    pub sample: usize,
    /// Hot threshold on sampled requests (FarReach: 10 at sampling 0.5).
    pub hot_threshold: u16,
    /// Count every request in the sketch instead of one in two.
    pub sample_all: bool,
    /// Period of the sketch, Bloom filter and frequency resets.
    pub sketch_reset: Duration,
    /// Snapshot period (FarReach only; `None`: no periodic snapshot).
    pub snapshot_period: Option<Duration>,
    /// Storage server addresses, by server index.
    pub servers: Vec<SocketAddr>,
    /// Wait for an acknowledgement before sending again.
    pub ack_timeout: Duration,
    /// Sends of one control message before giving up.
    pub tries: u32,
    /// Fraction of the switch OS's sends and received reports dropped (lossy-control mode).
    pub loss: f64,
    /// Fraction of the switch OS's sends and received reports duplicated (sent twice, handled
    /// twice: duplicated-control mode).
    pub dup: f64,
    /// Seed of the sampling and loss generator.
    pub seed: u64,
    /// Address of the report socket (port 0: any free loopback port).
    pub bind: SocketAddr,
    /// FarReach: write every completed snapshot to this file (atomically, checksummed; see
    /// [`crate::snapfile`]) so that it survives the switch OS process.
    pub snapshot_file: Option<std::path::PathBuf>,
}

impl SwitchOsConfig {
    /// FarReach's defaults for `kind` and `servers`.
    pub fn new(kind: CacheKind, servers: Vec<SocketAddr>) -> SwitchOsConfig {
        SwitchOsConfig {
            kind,
            capacity: 10_000,
            sample: 10,
            hot_threshold: 10,
            sample_all: false,
            sketch_reset: Duration::from_secs(1),
            snapshot_period: (kind == CacheKind::FarReach).then(|| Duration::from_secs(10)),
            servers,
            ack_timeout: Duration::from_millis(20),
            tries: 50,
            loss: 0.0,
            dup: 0.0,
            seed: 0x5eed,
            bind: SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
            snapshot_file: None,
        }
    }
}

/// Switch OS counters.
#[derive(Default, Debug)]
pub struct SwitchOsStats {
    /// Hot-key reports received (duplicates included).
    pub reports: AtomicU64,
    /// Keys admitted.
    pub admissions: AtomicU64,
    /// Keys evicted.
    pub evictions: AtomicU64,
    /// Evicted records written back to their server (FarReach).
    pub writebacks: AtomicU64,
    /// Control messages sent again after a timeout.
    pub retried: AtomicU64,
    /// Control messages given up after every try.
    pub gave_up: AtomicU64,
    /// Messages dropped on purpose (lossy mode).
    pub dropped: AtomicU64,
    /// Messages duplicated on purpose (duplicated-control mode).
    pub duplicated: AtomicU64,
    /// Runtime-interface calls that failed.
    pub runtime_errors: AtomicU64,
    /// Sketch resets.
    pub sketch_resets: AtomicU64,
    /// Snapshots taken.
    pub snapshots: AtomicU64,
    /// Duration of the last snapshot, µs.
    pub last_snapshot_us: AtomicU64,
    /// Longest snapshot, µs.
    pub max_snapshot_us: AtomicU64,
    /// Bytes of control datagrams the switch OS sent or received (reports, acknowledgements,
    /// requests to servers and their answers): the control-plane traffic of cache management.
    pub control_bytes: AtomicU64,
    /// Bytes of the snapshots' records in FarReach's wire form (16-byte key, u16 value length,
    /// value, u32 seq, 1-byte stat each): what a snapshot ships to the controller.
    pub snapshot_bytes: AtomicU64,
}

/// One record of a snapshot: the key, its server, its value (`None`: deleted) and seq.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotRecord {
    /// The key.
    pub key: Key,
    /// Index of the server owning it.
    pub server: u16,
    /// The value, `None` for a deleted record.
    pub value: Option<Vec<u8>>,
    /// The record's seq.
    pub seq: u32,
}

/// A completed snapshot.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Snapshot id (the token the data plane saw).
    pub id: u32,
    /// The write-back records the switch held at the snapshot point.
    pub records: Vec<SnapshotRecord>,
}

const P: &str = "KvIngress.";

struct Slot {
    key: Key,
    server: u16,
    handle: EntryHandle,
    /// FarReach: an eviction's write-back got no acknowledgement and the slot stays being
    /// evicted (validvalue 3) until a later eviction writes it back (see [`Worker::evict`]).
    evicting: bool,
    /// When an eviction may try that write-back again (before then evictions take other
    /// victims, so a dead server does not stop admission for the others).
    retry_at: Instant,
}

struct Shared<A> {
    access: A,
    cfg: SwitchOsConfig,
    stats: SwitchOsStats,
    stop: AtomicBool,
    snapshot: Mutex<Snapshot>,
    snapshot_now: AtomicBool,
    seq_base: AtomicU64,
    cached: Mutex<HashMap<Key, u32>>,
    /// The admission queue (also fed by [`SwitchOs::admit_later`]).
    queue: Mutex<Option<Sender<(Key, u16)>>>,
}

/// A running switch OS; stopped on drop.
pub struct SwitchOs<A: SwitchAccess> {
    shared: Arc<Shared<A>>,
    addr: SocketAddr,
    threads: Vec<JoinHandle<()>>,
}

/// Switch OS errors.
#[derive(Debug, thiserror::Error)]
pub enum SwitchOsError {
    /// A socket operation failed.
    #[error("switch OS socket: {0}")]
    Io(#[from] std::io::Error),
    /// The switch refused a runtime call.
    #[error("switch OS: runtime interface: {0}")]
    Runtime(String),
    /// A server did not answer.
    #[error("switch OS: server {0} did not answer {1}")]
    NoAnswer(SocketAddr, &'static str),
    /// Bad configuration.
    #[error("switch OS configuration: {0}")]
    Config(String),
}

fn rt_err(e: impl std::fmt::Display) -> SwitchOsError {
    SwitchOsError::Runtime(e.to_string())
}

impl<A: SwitchAccess> SwitchOs<A> {
    /// Starts the switch OS on a loopback port: asks every server for its largest seq, sets the
    /// program's parameters (seq floor above it), then serves reports.
    pub fn start(access: A, cfg: SwitchOsConfig) -> Result<SwitchOs<A>, SwitchOsError> {
        if cfg.servers.is_empty() || cfg.servers.len() > usize::from(u16::MAX) {
            return Err(SwitchOsError::Config(format!(
                "{} servers: need 1..65535",
                cfg.servers.len()
            )));
        }
        if cfg.capacity == 0 || cfg.sample == 0 || cfg.tries == 0 {
            return Err(SwitchOsError::Config(
                "capacity, sample and tries must be positive".into(),
            ));
        }
        if !(0.0..1.0).contains(&cfg.loss) {
            return Err(SwitchOsError::Config(format!(
                "loss {} must be in [0, 1)",
                cfg.loss
            )));
        }
        let sock = UdpSocket::bind(cfg.bind)?;
        sock.set_read_timeout(Some(Duration::from_millis(20)))?;
        let addr = sock.local_addr()?;
        // Requests to the servers leave from the report address's interface.
        let ctl = UdpSocket::bind(SocketAddr::new(cfg.bind.ip(), 0))?;
        let shared = Arc::new(Shared {
            access,
            cfg,
            stats: SwitchOsStats::default(),
            stop: AtomicBool::new(false),
            snapshot: Mutex::new(Snapshot::default()),
            snapshot_now: AtomicBool::new(false),
            seq_base: AtomicU64::new(0),
            cached: Mutex::new(HashMap::new()),
            queue: Mutex::new(None),
        });
        let mut w = Worker::new(shared.clone(), ctl);
        let mut base = 0u32;
        for i in 0..shared.cfg.servers.len() {
            let m = w.request(
                i as u16,
                Message::new(Op::TERN_MAXSEQ, Key([0; 16])),
                Op::TERN_MAXSEQ_ACK,
            )?;
            let b: [u8; 4] = m
                .body
                .get(..4)
                .and_then(|b| b.try_into().ok())
                .ok_or_else(|| {
                    SwitchOsError::Config(format!("server {i}: TERN_MAXSEQ_ACK without a seq"))
                })?;
            base = base.max(u32::from_be_bytes(b));
        }
        shared.seq_base.store(u64::from(base), Ordering::Relaxed);
        w.set_params(0)?;
        w.reset_sketch()?;
        let (tx, rx) = channel();
        if let Ok(mut q) = shared.queue.lock() {
            *q = Some(tx.clone());
        }
        let mut threads = Vec::new();
        let s2 = shared.clone();
        threads.push(std::thread::spawn(move || receiver(&s2, &sock, &tx)));
        threads.push(std::thread::spawn(move || w.run(&rx)));
        Ok(SwitchOs {
            shared,
            addr,
            threads,
        })
    }

    /// Queues `key` (owned by server `server`) for admission, as a report would; recovery
    /// re-admits the snapshot's keys this way (their first read fetches the latest value).
    pub fn admit_later(&self, key: Key, server: u16) {
        if let Some(q) = self.shared.queue.lock().ok().and_then(|q| q.clone()) {
            let _ = q.send((key, server));
        }
    }

    /// Queues every key for admission and waits until the cache holds them all or `timeout`
    /// passed (the re-install phase of recovery); returns the records cached then.
    pub fn reinstall(&self, keys: &[(Key, u16)], timeout: Duration) -> usize {
        let target = (self.cached_count() + keys.len()).min(self.shared.cfg.capacity as usize);
        for &(k, server) in keys {
            self.admit_later(k, server);
        }
        let deadline = Instant::now() + timeout;
        while self.cached_count() < target && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.cached_count()
    }

    /// The address servers report hot keys to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Counters.
    pub fn stats(&self) -> &SwitchOsStats {
        &self.shared.stats
    }

    /// Keys cached right now.
    pub fn cached_count(&self) -> usize {
        self.shared.cached.lock().map_or(0, |c| c.len())
    }

    /// The seq floor set in the program.
    pub fn seq_base(&self) -> u32 {
        self.shared.seq_base.load(Ordering::Relaxed) as u32
    }

    /// Takes a snapshot now (FarReach) and waits for it; returns it.
    pub fn snapshot(&self) -> Snapshot {
        let before = self.shared.stats.snapshots.load(Ordering::Acquire);
        self.shared.snapshot_now.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.shared.stats.snapshots.load(Ordering::Acquire) == before
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(2));
        }
        self.last_snapshot()
    }

    /// The last completed snapshot.
    pub fn last_snapshot(&self) -> Snapshot {
        self.shared
            .snapshot
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Runs `f` on the switch (for tools and tests).
    pub fn with_switch(&self, f: &mut dyn FnMut(&mut dyn Runtime) -> RtResult<()>) -> RtResult<()> {
        self.shared.access.with(f)
    }

    /// Stops the threads.
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Ok(mut q) = self.shared.queue.lock() {
            q.take();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl<A: SwitchAccess> Drop for SwitchOs<A> {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Receives reports, acknowledges them and queues `(key, server)` for admission.
fn receiver<A: SwitchAccess>(s: &Shared<A>, sock: &UdpSocket, tx: &Sender<(Key, u16)>) {
    let mut buf = vec![0u8; 65536];
    let mut rng = Rng::new(s.cfg.seed ^ 0xa5a5);
    while !s.stop.load(Ordering::Acquire) {
        let Ok((n, from)) = sock.recv_from(&mut buf) else {
            continue;
        };
        s.stats.control_bytes.fetch_add(n as u64, Ordering::Relaxed);
        let m = match Message::decode(&buf[..n]) {
            Ok(m) => m,
            Err(e) => {
                eprintln!("switch OS: undecodable datagram from {from}: {e}");
                continue;
            }
        };
        let ack = match m.op {
            Op::CACHE_POP => Op::CACHE_POP_ACK,
            Op::NETCACHE_CACHE_POP => Op::NETCACHE_CACHE_POP_ACK,
            other => {
                eprintln!("switch OS: unexpected {other} from {from}");
                continue;
            }
        };
        if s.cfg.loss > 0.0 && rng.next_f64() < s.cfg.loss {
            s.stats.dropped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let Some(server) = m.body.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
            eprintln!("switch OS: {} from {from} without a server index", m.op);
            continue;
        };
        s.stats.reports.fetch_add(1, Ordering::Relaxed);
        let dup = s.cfg.dup > 0.0 && rng.next_f64() < s.cfg.dup;
        if dup {
            s.stats.duplicated.fetch_add(1, Ordering::Relaxed);
        }
        if let Ok(b) = Message::new(ack, m.key).encode() {
            if !(s.cfg.loss > 0.0 && rng.next_f64() < s.cfg.loss) {
                s.stats
                    .control_bytes
                    .fetch_add(b.len() as u64, Ordering::Relaxed);
                let _ = sock.send_to(&b, from);
                if dup {
                    let _ = sock.send_to(&b, from);
                }
            } else {
                s.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        let _ = tx.send((m.key, server));
        if dup {
            let _ = tx.send((m.key, server));
        }
    }
}

struct Worker<A: SwitchAccess> {
    s: Arc<Shared<A>>,
    ctl: UdpSocket,
    slots: Vec<Option<Slot>>,
    free: Vec<u32>,
    used: Vec<u32>,
    rng: Rng,
    token: u32,
}

impl<A: SwitchAccess> Worker<A> {
    fn new(s: Arc<Shared<A>>, ctl: UdpSocket) -> Worker<A> {
        let cap = s.cfg.capacity;
        let rng = Rng::new(s.cfg.seed);
        Worker {
            s,
            ctl,
            slots: (0..cap).map(|_| None).collect(),
            free: (0..cap).rev().collect(),
            used: Vec::new(),
            rng,
            token: 0,
        }
    }

    fn run(mut self, rx: &Receiver<(Key, u16)>) {
        let mut next_reset = Instant::now() + self.s.cfg.sketch_reset;
        let mut next_snapshot = self.s.cfg.snapshot_period.map(|p| Instant::now() + p);
        while !self.s.stop.load(Ordering::Acquire) {
            match rx.recv_timeout(Duration::from_millis(5)) {
                Ok((key, server)) => {
                    if let Err(e) = self.admit(key, server) {
                        eprintln!("switch OS: admission of {key:?}: {e}");
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            let now = Instant::now();
            if now >= next_reset {
                next_reset = now + self.s.cfg.sketch_reset;
                if let Err(e) = self.reset_sketch() {
                    eprintln!("switch OS: sketch reset: {e}");
                }
            }
            let forced = self.s.snapshot_now.swap(false, Ordering::AcqRel);
            if forced || next_snapshot.is_some_and(|t| now >= t) {
                if let Some(p) = self.s.cfg.snapshot_period {
                    next_snapshot = Some(now + p);
                }
                if let Err(e) = self.take_snapshot() {
                    eprintln!("switch OS: snapshot: {e}");
                }
            }
        }
    }

    fn rt(&self, f: &mut dyn FnMut(&mut dyn Runtime) -> RtResult<()>) -> Result<(), SwitchOsError> {
        self.s.access.with(f).map_err(|e| {
            self.s.stats.runtime_errors.fetch_add(1, Ordering::Relaxed);
            rt_err(e)
        })
    }

    fn set_params(&self, token: u32) -> Result<(), SwitchOsError> {
        let c = &self.s.cfg;
        let base = self.s.seq_base.load(Ordering::Relaxed) as u32;
        let data = vec![
            c.hot_threshold.to_be_bytes().to_vec(),
            vec![u8::from(c.sample_all)],
            base.to_be_bytes().to_vec(),
            token.to_be_bytes().to_vec(),
        ];
        self.rt(&mut |rt| {
            rt.mt_set_default_action(&format!("{P}kv_params"), &format!("{P}set_params"), &data)
        })
    }

    fn reset_sketch(&self) -> Result<(), SwitchOsError> {
        self.rt(&mut |rt| {
            for r in [
                "cm1_reg", "cm2_reg", "cm3_reg", "cm4_reg", "bf1_reg", "bf2_reg", "bf3_reg",
            ] {
                rt.register_reset(&format!("{P}{r}"))?;
            }
            rt.register_reset(&format!("{P}frequency_reg"))
        })?;
        self.s.stats.sketch_resets.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn lose(&mut self) -> bool {
        if self.s.cfg.loss > 0.0 && self.rng.next_f64() < self.s.cfg.loss {
            self.s.stats.dropped.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        false
    }

    /// Sends `msg` to server `server` until an `ack` for the same key arrives.
    fn request(&mut self, server: u16, msg: Message, ack: Op) -> Result<Message, SwitchOsError> {
        let dest = *self
            .s
            .cfg
            .servers
            .get(usize::from(server))
            .ok_or_else(|| SwitchOsError::Config(format!("no server {server}")))?;
        let bytes = msg
            .encode()
            .map_err(|e| SwitchOsError::Config(e.to_string()))?;
        let mut buf = vec![0u8; 65536];
        // Late or duplicated answers to earlier requests must not acknowledge this one.
        self.ctl.set_nonblocking(true)?;
        while self.ctl.recv_from(&mut buf).is_ok() {}
        self.ctl.set_nonblocking(false)?;
        for t in 0..self.s.cfg.tries {
            if t > 0 {
                self.s.stats.retried.fetch_add(1, Ordering::Relaxed);
            }
            if !self.lose() {
                self.s
                    .stats
                    .control_bytes
                    .fetch_add(bytes.len() as u64, Ordering::Relaxed);
                self.ctl.send_to(&bytes, dest)?;
                if self.s.cfg.dup > 0.0 && self.rng.next_f64() < self.s.cfg.dup {
                    self.s.stats.duplicated.fetch_add(1, Ordering::Relaxed);
                    self.ctl.send_to(&bytes, dest)?;
                }
            }
            let deadline = Instant::now() + self.s.cfg.ack_timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                self.ctl.set_read_timeout(Some(left))?;
                let Ok((n, _)) = self.ctl.recv_from(&mut buf) else {
                    break;
                };
                self.s
                    .stats
                    .control_bytes
                    .fetch_add(n as u64, Ordering::Relaxed);
                if let Ok(m) = Message::decode(&buf[..n]) {
                    if m.op == ack && m.key == msg.key {
                        return Ok(m);
                    }
                }
            }
        }
        self.s.stats.gave_up.fetch_add(1, Ordering::Relaxed);
        Err(SwitchOsError::NoAnswer(dest, ack.name()))
    }

    fn admit(&mut self, key: Key, server: u16) -> Result<(), SwitchOsError> {
        if usize::from(server) >= self.s.cfg.servers.len() {
            return Err(SwitchOsError::Config(format!(
                "report names server {server} of {}",
                self.s.cfg.servers.len()
            )));
        }
        if self.s.cached.lock().is_ok_and(|c| c.contains_key(&key)) {
            return Ok(());
        }
        let idx = match self.free.pop() {
            Some(i) => i,
            None => match self.evict()? {
                Some(i) => i,
                None => return Ok(()),
            },
        };
        let data = vec![idx.to_be_bytes().to_vec()];
        let mut handle = 0;
        let r = self.rt(&mut |rt| {
            rt.register_write(&format!("{P}latest_reg"), idx, 0)?;
            rt.register_write(&format!("{P}deleted_reg"), idx, 1)?;
            rt.register_write(&format!("{P}savedseq_reg"), idx, 0)?;
            rt.register_write(&format!("{P}vallen_reg"), idx, 0)?;
            rt.register_write(&format!("{P}frequency_reg"), idx, 0)?;
            handle = rt.mt_add_entry(
                &format!("{P}cache_lookup"),
                &[MatchParam::Exact(key.0.to_vec())],
                &format!("{P}set_cached"),
                &data,
                None,
            )?;
            rt.register_write(&format!("{P}validvalue_reg"), idx, 1)
        });
        if let Err(e) = r {
            self.free.push(idx);
            return Err(e);
        }
        self.slots[idx as usize] = Some(Slot {
            key,
            server,
            handle,
            evicting: false,
            retry_at: Instant::now(),
        });
        self.used.push(idx);
        if let Ok(mut c) = self.s.cached.lock() {
            c.insert(key, idx);
        }
        self.s.stats.admissions.fetch_add(1, Ordering::Relaxed);
        if self.s.cfg.kind == CacheKind::NetCache {
            // Ask the server for its record; until it arrives the copy is invalid (correct,
            // only slower), so a failure here is not an error of the cache.
            let _ = self.request(
                server,
                Message::new(Op::NETCACHE_CACHE_POP_FINISH, key),
                Op::NETCACHE_CACHE_POP_FINISH_ACK,
            );
        }
        Ok(())
    }

    /// Reads slot `idx`'s record from the registers named `prefix*`: `(value or None, seq)`.
    fn read_record(&self, idx: u32, snap: bool) -> Result<(Option<Vec<u8>>, u32), SwitchOsError> {
        let (d, s, l, v) = if snap {
            (
                "snap_deleted_reg",
                "snap_seq_reg",
                "snap_vallen_reg",
                "snap_val_reg",
            )
        } else {
            ("deleted_reg", "savedseq_reg", "vallen_reg", "val_reg")
        };
        let mut out = (None, 0);
        self.rt(&mut |rt| {
            let deleted = rt.register_read(&format!("{P}{d}"), idx)? != 0;
            let seq = rt.register_read(&format!("{P}{s}"), idx)? as u32;
            let len = (rt.register_read(&format!("{P}{l}"), idx)? as usize).min(128);
            let mut value = Vec::with_capacity(len.div_ceil(8) * 8);
            for i in 0..len.div_ceil(8) as u32 {
                let w = rt.register_read(&format!("{P}{v}"), idx * 16 + i)?;
                value.extend_from_slice(&w.to_be_bytes());
            }
            value.truncate(len);
            out = ((!deleted).then_some(value), seq);
            Ok(())
        })?;
        Ok(out)
    }

    /// Frees a slot by sampling; `None` if the victim could not be written back (it stays).
    ///
    /// FarReach: a victim whose write-back got no acknowledgement (its server dead) stays being
    /// evicted (validvalue 3) and is tried again by the first eviction after as long again as
    /// the failed attempt took (meanwhile evictions sample the other slots, or retry it at once
    /// when there is no other). It never goes back to valid 1:
    /// a write that passed to the server while it was being evicted cleared its latest bit,
    /// and a valid slot that is not latest sends reads to the server, which may not have the
    /// switch's record (the write that passed may have been lost with the dead server) — a
    /// stale read of an acknowledged write. Being evicted, reads get the switch's record while
    /// no write passed (latest 1) and carry it to the server otherwise
    /// (GETREQ_BEINGEVICTED_RECORD: the newer wins); writes go to the server.
    fn evict(&mut self) -> Result<Option<u32>, SwitchOsError> {
        if self.used.is_empty() {
            return Ok(None);
        }
        let now = Instant::now();
        let evicting = |i: u32| {
            self.slots[i as usize]
                .as_ref()
                .filter(|slot| slot.evicting)
                .map(|slot| slot.retry_at)
        };
        // A failed write-back due again goes first; else a victim sampled among the others;
        // with no other, the failed one again.
        let due = (0..self.used.len()).find(|&p| evicting(self.used[p]).is_some_and(|t| t <= now));
        let others: Vec<usize> = (0..self.used.len())
            .filter(|&p| evicting(self.used[p]).is_none())
            .collect();
        let pos = match (due, others.is_empty()) {
            (Some(p), _) => p,
            (None, true) => 0,
            (None, false) => {
                let picks: Vec<usize> = (0..self.s.cfg.sample)
                    .map(|_| others[self.rng.below(others.len() as u64) as usize])
                    .collect();
                let mut best = (u64::MAX, 0usize);
                for p in picks {
                    let idx = self.used[p];
                    let mut f = 0;
                    self.rt(&mut |rt| {
                        f = rt.register_read(&format!("{P}frequency_reg"), idx)?;
                        Ok(())
                    })?;
                    if f < best.0 {
                        best = (f, p);
                    }
                }
                best.1
            }
        };
        let idx = self.used[pos];
        // Stays in `slots` until it is gone from the switch: a runtime error on the way leaves
        // it cached (and retried) rather than lost to the switch OS.
        let Some((key, server, handle)) = self.slots[idx as usize]
            .as_ref()
            .map(|slot| (slot.key, slot.server, slot.handle))
        else {
            return Ok(None);
        };
        if self.s.cfg.kind == CacheKind::FarReach {
            let mut latest = 0;
            self.rt(&mut |rt| {
                rt.register_write(&format!("{P}validvalue_reg"), idx, 3)?;
                latest = rt.register_read(&format!("{P}latest_reg"), idx)?;
                Ok(())
            })?;
            // The record stays put while validvalue is 3 (no write or fill changes it).
            let (value, seq) = self.read_record(idx, false)?;
            // Written back whenever the slot ever held a record (seq 0: admitted, never
            // filled), not only when latest: over Thrift every runtime call is its own RPC,
            // so a write can pass between validvalue := 3 and the read of latest and clear it
            // (as can a write during an earlier, failed attempt), and if that write is lost
            // the switch's record is the only copy of an acknowledged write. The seq check
            // keeps the server's record when it is newer.
            if latest != 0 || seq != 0 {
                let m =
                    Message::new(Op::CACHE_EVICT, key).with_body(evict_body(value.as_deref(), seq));
                if let Err(e) = self.request(server, m, Op::CACHE_EVICT_ACK) {
                    // Stays being evicted (see above); written back by the next eviction.
                    let wait = self.s.cfg.ack_timeout * self.s.cfg.tries;
                    if let Some(slot) = self.slots[idx as usize].as_mut() {
                        slot.evicting = true;
                        slot.retry_at = Instant::now() + wait;
                    }
                    eprintln!("switch OS: eviction write-back: {e}");
                    return Ok(None);
                }
                self.s.stats.writebacks.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.rt(&mut |rt| {
            rt.register_write(&format!("{P}validvalue_reg"), idx, 0)?;
            rt.mt_delete_entry(&format!("{P}cache_lookup"), handle)?;
            rt.register_write(&format!("{P}latest_reg"), idx, 0)
        })?;
        self.slots[idx as usize] = None;
        self.used.swap_remove(pos);
        if let Ok(mut c) = self.s.cached.lock() {
            c.remove(&key);
        }
        self.s.stats.evictions.fetch_add(1, Ordering::Relaxed);
        Ok(Some(idx))
    }

    /// FarReach's crash-consistent snapshot of the write-back records.
    fn take_snapshot(&mut self) -> Result<(), SwitchOsError> {
        if self.s.cfg.kind != CacheKind::FarReach {
            return Ok(());
        }
        let t0 = Instant::now();
        self.token = self.token.wrapping_add(1).max(1);
        self.set_params(self.token)?;
        let mut records = Vec::new();
        let used = self.used.clone();
        let result = (|| {
            for idx in used {
                let Some(slot) = &self.slots[idx as usize] else {
                    continue;
                };
                let (key, server, evicting) = (slot.key, slot.server, slot.evicting);
                let mut latest = 0;
                self.rt(&mut |rt| {
                    latest = rt.register_read(&format!("{P}latest_reg"), idx)?;
                    Ok(())
                })?;
                let live = self.read_record(idx, false)?;
                // Read after the live record: if set now, the slot changed since the flag
                // and the shadow holds its state at the snapshot point.
                let mut case1 = 0;
                self.rt(&mut |rt| {
                    case1 = rt.register_read(&format!("{P}case1_reg"), idx)?;
                    Ok(())
                })?;
                let rec = if case1 == 1 {
                    Some(self.read_record(idx, true)?)
                } else if latest != 0 || (evicting && live.1 != 0) {
                    // 1: the switch's record is the latest; 2 (FarReach): a large write
                    // followed it, which the seq check sorts out on replay. A slot whose
                    // write-back failed keeps its record even when a write passed since (latest
                    // 0): that write may have been lost, and the seq check drops the record on
                    // replay if not.
                    Some(live)
                } else {
                    None
                };
                if let Some((value, seq)) = rec {
                    records.push(SnapshotRecord {
                        key,
                        server,
                        value,
                        seq,
                    });
                }
            }
            Ok::<(), SwitchOsError>(())
        })();
        self.set_params(0)?;
        self.rt(&mut |rt| rt.register_reset(&format!("{P}case1_reg")))?;
        result?;
        let bytes: usize = records
            .iter()
            .map(|r| 16 + 2 + r.value.as_ref().map_or(0, Vec::len) + 4 + 1)
            .sum();
        self.s
            .stats
            .snapshot_bytes
            .fetch_add(bytes as u64, Ordering::Relaxed);
        let snap = Snapshot {
            id: self.token,
            records,
        };
        if let Some(path) = &self.s.cfg.snapshot_file {
            // Written before the snapshot counts as taken: a recovery after the count moved
            // finds this snapshot (or a newer one) on disk.
            if let Err(e) = crate::snapfile::write(path, &snap) {
                eprintln!("switch OS: {e}");
                self.s.stats.runtime_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Ok(mut s) = self.s.snapshot.lock() {
            *s = snap;
        }
        let us = t0.elapsed().as_micros() as u64;
        self.s.stats.last_snapshot_us.store(us, Ordering::Relaxed);
        self.s
            .stats
            .max_snapshot_us
            .fetch_max(us, Ordering::Relaxed);
        self.s.stats.snapshots.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

/// The largest seq any of `servers` stores (TERN_MAXSEQ, retried).
pub fn max_seq(
    servers: &[SocketAddr],
    timeout: Duration,
    tries: u32,
) -> Result<u32, SwitchOsError> {
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let mut buf = vec![0u8; 2048];
    let bytes = Message::new(Op::TERN_MAXSEQ, Key([0; 16]))
        .encode()
        .map_err(|e| SwitchOsError::Config(e.to_string()))?;
    let mut best = 0;
    for &dest in servers {
        let mut got = None;
        'tries: for _ in 0..tries {
            sock.send_to(&bytes, dest)?;
            let deadline = Instant::now() + timeout;
            while let Some(left) = deadline.checked_duration_since(Instant::now()) {
                if left.is_zero() {
                    break;
                }
                sock.set_read_timeout(Some(left))?;
                let Ok((n, _)) = sock.recv_from(&mut buf) else {
                    break;
                };
                if let Ok(m) = Message::decode(&buf[..n]) {
                    if let (Op::TERN_MAXSEQ_ACK, Some(b)) = (m.op, m.body.get(..4)) {
                        got = Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
                        break 'tries;
                    }
                }
            }
        }
        best = best.max(got.ok_or(SwitchOsError::NoAnswer(dest, "TERN_MAXSEQ_ACK"))?);
    }
    Ok(best)
}

/// The phases of a recovery after a switch crash (FarReach §3.9), as measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecoveryReport {
    /// Records of the last snapshot.
    pub snapshot_records: usize,
    /// Records the clients preserved.
    pub preserved_records: usize,
    /// Records replayed into the servers (the newest per key).
    pub replayed: usize,
    /// Records cached again after the re-install.
    pub reinstalled: usize,
    /// Taking the last snapshot's records from the dead switch OS.
    pub snapshot_load: Duration,
    /// Reading the clients' preserved records.
    pub preserved_load: Duration,
    /// Replaying the merged records into the servers with the seq check.
    pub replay: Duration,
    /// Starting a switch OS and re-admitting the snapshot's keys.
    pub reinstall: Duration,
    /// Crash to switch up again.
    pub total: Duration,
}

/// Records [`replay`] keeps in flight at once.
const REPLAY_WINDOW: usize = 256;

/// What [`replay`] did.
#[derive(Clone, Debug, Default)]
pub struct ReplayReport {
    /// Records given (snapshot + preserved).
    pub given: usize,
    /// Records sent (the newest per key).
    pub replayed: usize,
    /// Time spent.
    pub elapsed: Duration,
}

/// Server recovery after a switch crash (FarReach §3.9): merges the last snapshot's records and
/// the clients' preserved records, keeps the largest seq per key, and applies each to its
/// server with the seq check (CACHE_EVICT, retried until acknowledged), so an older record never
/// overwrites a newer one. `servers` in partition-range order.
pub fn replay(
    servers: &[SocketAddr],
    records: impl IntoIterator<Item = (Key, Option<Vec<u8>>, u32)>,
    timeout: Duration,
    tries: u32,
) -> Result<ReplayReport, SwitchOsError> {
    let t0 = Instant::now();
    let router = crate::router::Router::new(servers.to_vec())
        .map_err(|e| SwitchOsError::Config(e.to_string()))?;
    let mut newest: HashMap<Key, (Option<Vec<u8>>, u32)> = HashMap::new();
    let mut given = 0;
    for (k, v, seq) in records {
        given += 1;
        let e = newest.entry(k).or_insert((None, 0));
        if seq >= e.1 {
            *e = (v, seq);
        }
    }
    // Pipelined: up to REPLAY_WINDOW records in flight, each resent after `timeout` until
    // acknowledged (the seq check makes a duplicate harmless), `tries` sends at most.
    // Any local address: in a network namespace the servers are not on loopback.
    let sock = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0))?;
    let mut buf = vec![0u8; 65536];
    let mut todo: Vec<(Key, SocketAddr, Vec<u8>)> = Vec::with_capacity(newest.len());
    for (key, (value, seq)) in &newest {
        let dest = servers[router.server_index(key)];
        let bytes = Message::new(Op::CACHE_EVICT, *key)
            .with_body(evict_body(value.as_deref(), *seq))
            .encode()
            .map_err(|e| SwitchOsError::Config(e.to_string()))?;
        todo.push((*key, dest, bytes));
    }
    // In flight: key → (index into todo, next send, sends so far).
    let mut flight: HashMap<Key, (usize, Instant, u32)> = HashMap::new();
    let mut next = 0usize;
    sock.set_read_timeout(Some(Duration::from_millis(1)))?;
    while next < todo.len() || !flight.is_empty() {
        while next < todo.len() && flight.len() < REPLAY_WINDOW {
            let (key, dest, bytes) = &todo[next];
            sock.send_to(bytes, dest)?;
            flight.insert(*key, (next, Instant::now() + timeout, 1));
            next += 1;
        }
        // Drain the acknowledgements that arrived.
        while let Ok((n, _)) = sock.recv_from(&mut buf) {
            if let Ok(m) = Message::decode(&buf[..n]) {
                if m.op == Op::CACHE_EVICT_ACK {
                    flight.remove(&m.key);
                }
            }
            sock.set_nonblocking(true)?;
        }
        sock.set_nonblocking(false)?;
        let now = Instant::now();
        for (i, due, sent) in flight.values_mut() {
            if *due > now {
                continue;
            }
            let (_, dest, bytes) = &todo[*i];
            if *sent >= tries {
                return Err(SwitchOsError::NoAnswer(*dest, "CACHE_EVICT_ACK"));
            }
            sock.send_to(bytes, dest)?;
            *sent += 1;
            *due = now + timeout;
        }
    }
    Ok(ReplayReport {
        given,
        replayed: newest.len(),
        elapsed: t0.elapsed(),
    })
}
