//! The UDP storage server: W worker threads share one socket and a [`Store`] of N RocksDB
//! partitions, answer the NoCache / FarReach / NetCache server-side requests, and stop gracefully
//! (flushing every partition) on a TERN_SHUTDOWN message or when the stop flag is raised
//! (ctrl-c).
//!
//! Cache duties (`CacheCtl`, driven by a control thread that retries until acknowledged):
//! GETREQ_POP / PUTREQ_POP_SEQ* and WARMUPREQ report the key to the switch OS (CACHE_POP),
//! NETCACHE_GETREQ_POP likewise (NETCACHE_CACHE_POP); CACHE_EVICT applies an evicted record with the seq check;
//! GETREQ_BEINGEVICTED_RECORD answers the newer of the embedded and the stored record;
//! NetCache writes of cached keys (NETCACHE_*_SEQ_CACHED) and NETCACHE_CACHE_POP_FINISH make the
//! server send NETCACHE_VALUEUPDATE (its current record) through the switch until the switch
//! acknowledges it.
//!
//! MADINC requests (`madinc::is_madinc`) are answered from the tenant's own key space
//! ([`handle_madinc`]); a tenant write is told to the MADINC controller when one is set
//! ([`CacheCtl::set_madinc_controller`]).

use crate::madinc::{is_madinc, MadBody, MadMessage, StoreOp};
use crate::protocol::{Key, Message, Op};
use crate::storage::{Store, StoreError, StoreOptions, WriteOutcome};
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Interval between two sends of an unacknowledged cache control message.
const CTL_RETRY: Duration = Duration::from_millis(10);
/// Sends of a CACHE_POP report before giving up (the key is reported again when hot again).
const POP_TRIES: u32 = 100;
/// Sends of a NETCACHE_VALUEUPDATE before giving up (the copy then stays invalid: reads go to
/// the server until the next write of the key refreshes it).
const UPDATE_TRIES: u32 = 50;

/// An unacknowledged cache control message.
struct Pending {
    dest: SocketAddr,
    next: Instant,
    tries: u32,
    /// The message; `None` for NETCACHE_VALUEUPDATE, built from the store at every send so a
    /// retry carries the then-current record.
    msg: Option<Message>,
}

/// Cache control state of a server: where the switch OS listens, unacknowledged messages.
#[derive(Default)]
pub struct CacheCtl {
    switchos: Mutex<Option<SocketAddr>>,
    pending: Mutex<HashMap<(Op, Key), Pending>>,
    /// Where a NETCACHE_GETREQ_POP came from: the path through the switch for the update that
    /// validates the key once the switch OS has admitted it.
    pop_via: Mutex<HashMap<Key, SocketAddr>>,
    /// Control messages given up after all their tries.
    pub gave_up: AtomicU64,
    /// Control messages sent again after a timeout.
    pub retried: AtomicU64,
    /// MADINC: the acknowledged link to the controller that write notices go to, if any.
    madinc: Mutex<Option<Arc<crate::madinc_wire::Link>>>,
}

impl CacheCtl {
    /// Sets (or clears) the MADINC controller a server tells of every tenant write (a
    /// CONTROL_UPDATE with slot `u32::MAX` and the stored value, acknowledged and retried), so
    /// it re-validates a cached copy the write invalidated on its way through a switch.
    pub fn set_madinc_controller(&self, link: Option<Arc<crate::madinc_wire::Link>>) {
        *self.madinc.lock().unwrap_or_else(|p| p.into_inner()) = link;
    }

    fn madinc_link(&self) -> Option<Arc<crate::madinc_wire::Link>> {
        self.madinc
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Sets (or clears) the switch OS address hot keys are reported to.
    pub fn set_switchos(&self, addr: Option<SocketAddr>) {
        if let Ok(mut s) = self.switchos.lock() {
            *s = addr;
        }
    }

    fn switchos(&self) -> Option<SocketAddr> {
        self.switchos.lock().ok().and_then(|s| *s)
    }

    fn queue(&self, op: Op, key: Key, dest: SocketAddr, msg: Option<Message>) {
        if let Ok(mut p) = self.pending.lock() {
            // A newer request for the same key replaces the old one (and restarts its tries).
            p.insert(
                (op, key),
                Pending {
                    dest,
                    next: Instant::now(),
                    tries: 0,
                    msg,
                },
            );
        }
    }

    fn acked(&self, op: Op, key: &Key) {
        if let Ok(mut p) = self.pending.lock() {
            p.remove(&(op, *key));
        }
    }

    /// Unacknowledged control messages right now.
    pub fn pending_count(&self) -> usize {
        self.pending.lock().map_or(0, |p| p.len())
    }

    /// Sends what is due; called by the control thread.
    fn pump(&self, sock: &UdpSocket, store: &Store, index: u16) {
        let now = Instant::now();
        let mut due = Vec::new();
        if let Ok(mut p) = self.pending.lock() {
            p.retain(|(op, key), e| {
                if e.next > now {
                    return true;
                }
                let limit = if *op == Op::NETCACHE_VALUEUPDATE {
                    UPDATE_TRIES
                } else {
                    POP_TRIES
                };
                if e.tries >= limit {
                    self.gave_up.fetch_add(1, Ordering::Relaxed);
                    return false;
                }
                if e.tries > 0 {
                    self.retried.fetch_add(1, Ordering::Relaxed);
                }
                e.tries += 1;
                e.next = now + CTL_RETRY;
                due.push((*op, *key, e.dest, e.msg.clone()));
                true
            });
        }
        for (op, key, dest, msg) in due {
            let msg = match msg {
                Some(m) => m,
                None => match value_update(store, &key, index) {
                    Ok(m) => m,
                    Err(e) => {
                        eprintln!("kv server: value update of {key:?}: {e}");
                        continue;
                    }
                },
            };
            debug_assert_eq!(msg.op, op);
            if !msg.fits_switch() {
                // A value larger than the switch stores is never cached: the copy stays invalid
                // (reads come here) until a write of a small value refreshes it.
                self.acked(op, &key);
                continue;
            }
            if let Ok(b) = msg.encode() {
                let _ = sock.send_to(&b, dest);
            }
        }
    }
}

/// Keys reported but never admitted (or reported by FarReach's warm-up, which has no
/// POP_FINISH) must not grow the map without bound: past this many it starts afresh (a key
/// admitted later then stays invalid until its next write: slower, never wrong).
const POP_VIA_MAX: usize = 1 << 16;

fn remember_via(via: &mut HashMap<Key, SocketAddr>, key: Key, from: SocketAddr) {
    if via.len() >= POP_VIA_MAX && !via.contains_key(&key) {
        via.clear();
    }
    via.insert(key, from);
}

/// NETCACHE_VALUEUPDATE carrying the stored record of `key`.
fn value_update(store: &Store, key: &Key, index: u16) -> Result<Message, StoreError> {
    let (value, seq, exists) = match store.get(key)? {
        Some(r) => match r.value {
            Some(v) => (v, r.seq, true),
            None => (Vec::new(), r.seq, false),
        },
        None => (Vec::new(), 0, false),
    };
    Ok(Message::new(Op::NETCACHE_VALUEUPDATE, *key)
        .with_value(value)
        .with_seq(seq, 0)
        .with_stat(exists, index))
}

/// The body of CACHE_EVICT: `stat u8 (1 exists, 0 deleted) | seq u32 | vallen u16 | value`.
pub fn evict_body(value: Option<&[u8]>, seq: u32) -> Vec<u8> {
    let v = value.unwrap_or(&[]);
    let mut b = Vec::with_capacity(7 + v.len());
    b.push(u8::from(value.is_some()));
    b.extend_from_slice(&seq.to_be_bytes());
    b.extend_from_slice(&(v.len() as u16).to_be_bytes());
    b.extend_from_slice(v);
    b
}

/// Parses a CACHE_EVICT body: `(value or None for deleted, seq)`.
pub fn parse_evict_body(b: &[u8]) -> Result<(Option<Vec<u8>>, u32), String> {
    if b.len() < 7 {
        return Err(format!(
            "CACHE_EVICT body of {} bytes: need at least 7",
            b.len()
        ));
    }
    let seq = u32::from_be_bytes([b[1], b[2], b[3], b[4]]);
    let len = usize::from(u16::from_be_bytes([b[5], b[6]]));
    if b.len() != 7 + len {
        return Err(format!(
            "CACHE_EVICT body of {} bytes: value length {len} says {}",
            b.len(),
            7 + len
        ));
    }
    match b[0] {
        1 => Ok((Some(b[7..].to_vec()), seq)),
        0 if len == 0 => Ok((None, seq)),
        0 => Err("CACHE_EVICT of a deleted record with a value".into()),
        x => Err(format!("CACHE_EVICT stat {x}: must be 0 or 1")),
    }
}

/// Server configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Directory holding the partitions.
    pub dir: PathBuf,
    /// UDP address to bind (port 0 = any free port).
    pub addr: SocketAddr,
    /// Number of RocksDB partitions.
    pub partitions: usize,
    /// Number of worker threads.
    pub workers: usize,
    /// This server's index (reported in `stat_hdr.nodeidx`).
    pub index: u16,
    /// RocksDB settings.
    pub store: StoreOptions,
    /// Where a cache's switch OS listens for hot-key reports (CACHE_POP), if any.
    pub switchos: Option<SocketAddr>,
}

impl ServerConfig {
    /// A loopback server on `port` with the given directory and defaults elsewhere.
    pub fn new(dir: impl Into<PathBuf>, port: u16) -> ServerConfig {
        ServerConfig {
            dir: dir.into(),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            partitions: 1,
            workers: 1,
            index: 0,
            store: StoreOptions::default(),
            switchos: None,
        }
    }
}

/// Server errors.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// Opening or using the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A socket operation failed.
    #[error("udp socket {addr}: {source}")]
    Io {
        /// The address.
        addr: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// Bad configuration.
    #[error("server configuration: {0}")]
    Config(String),
}

/// Request counters.
#[derive(Default, Debug)]
pub struct ServerStats {
    /// Reads answered.
    pub gets: AtomicU64,
    /// Puts applied (including loads).
    pub puts: AtomicU64,
    /// Deletes applied.
    pub deletes: AtomicU64,
    /// Sequence-checked writes ignored because a newer record was stored.
    pub stale_writes: AtomicU64,
    /// Datagrams that did not decode or were not requests for a server.
    pub rejected: AtomicU64,
    /// Store errors while serving.
    pub store_errors: AtomicU64,
}

impl ServerStats {
    /// `(gets, puts, deletes, stale, rejected, store_errors)` right now.
    pub fn snapshot(&self) -> [u64; 6] {
        [
            self.gets.load(Ordering::Relaxed),
            self.puts.load(Ordering::Relaxed),
            self.deletes.load(Ordering::Relaxed),
            self.stale_writes.load(Ordering::Relaxed),
            self.rejected.load(Ordering::Relaxed),
            self.store_errors.load(Ordering::Relaxed),
        ]
    }
}

/// What handling one request asks the worker to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Action {
    /// Send this reply to the requester.
    Reply(Message),
    /// Flush, acknowledge with this reply, and stop the server.
    Shutdown(Message),
    /// Nothing to send.
    Ignore,
}

/// Answers one decoded request against `store` (no I/O besides the store), without cache duties.
pub fn handle(
    store: &Store,
    index: u16,
    req: &Message,
    stats: &ServerStats,
) -> Result<Action, StoreError> {
    handle_from(store, index, req, stats, &CacheCtl::default(), None)
}

/// [`handle`] for a request from `from`, queueing cache control messages on `ctl` (sent by the
/// server's control thread).
pub fn handle_from(
    store: &Store,
    index: u16,
    req: &Message,
    stats: &ServerStats,
    ctl: &CacheCtl,
    from: Option<SocketAddr>,
) -> Result<Action, StoreError> {
    let key = req.key;
    let report = |op: Op| {
        if let Some(so) = ctl.switchos() {
            let m = Message::new(op, key).with_body(index.to_be_bytes());
            ctl.queue(op, key, so, Some(m));
        }
    };
    match req.op {
        Op::GETREQ_POP | Op::PUTREQ_POP_SEQ | Op::PUTREQ_POP_SEQ_CASE3 => report(Op::CACHE_POP),
        Op::WARMUPREQ => {
            // Warm-up (FarReach's static mode): the key is reported for admission as if hot.
            if let (Some(f), Ok(mut via)) = (from, ctl.pop_via.lock()) {
                remember_via(&mut via, key, f);
            }
            report(Op::CACHE_POP);
            return Ok(Action::Reply(Message::new(Op::WARMUPACK, key)));
        }
        Op::NETCACHE_GETREQ_POP => {
            if let (Some(f), Ok(mut via)) = (from, ctl.pop_via.lock()) {
                remember_via(&mut via, key, f);
            }
            report(Op::NETCACHE_CACHE_POP)
        }
        Op::CACHE_POP_ACK => {
            ctl.acked(Op::CACHE_POP, &key);
            return Ok(Action::Ignore);
        }
        Op::NETCACHE_CACHE_POP_ACK => {
            ctl.acked(Op::NETCACHE_CACHE_POP, &key);
            return Ok(Action::Ignore);
        }
        Op::NETCACHE_VALUEUPDATE_ACK => {
            ctl.acked(Op::NETCACHE_VALUEUPDATE, &key);
            return Ok(Action::Ignore);
        }
        Op::NETCACHE_CACHE_POP_FINISH => {
            let via = ctl.pop_via.lock().ok().and_then(|mut v| v.remove(&key));
            if let Some(via) = via {
                ctl.queue(Op::NETCACHE_VALUEUPDATE, key, via, None);
            }
            return Ok(Action::Reply(Message::new(
                Op::NETCACHE_CACHE_POP_FINISH_ACK,
                key,
            )));
        }
        Op::NETCACHE_PUTREQ_SEQ_CACHED | Op::NETCACHE_DELREQ_SEQ_CACHED => {
            if let Some(f) = from {
                // Queued once the write is applied; the control thread reads the record when
                // it sends, so the update carries this write or a newer one.
                let out = handle_plain(store, index, req, stats)?;
                ctl.queue(Op::NETCACHE_VALUEUPDATE, key, f, None);
                return Ok(out);
            }
        }
        _ => {}
    }
    handle_plain(store, index, req, stats)
}

fn handle_plain(
    store: &Store,
    index: u16,
    req: &Message,
    stats: &ServerStats,
) -> Result<Action, StoreError> {
    let key = req.key;
    let seq_of = |m: &Message| m.seq.map_or(0, |s| s.seq);
    let token_of = |m: &Message| m.seq.map_or(0, |s| s.snapshot_token);
    let get_reply = |op_live: Op, op_deleted: Op| -> Result<Message, StoreError> {
        stats.gets.fetch_add(1, Ordering::Relaxed);
        let rec = store.get(&key)?;
        let (value, seq, exists) = match rec {
            Some(r) => match r.value {
                Some(v) => (v, r.seq, true),
                None => (Vec::new(), r.seq, false),
            },
            None => (Vec::new(), 0, false),
        };
        let op = if exists { op_live } else { op_deleted };
        Ok(Message::new(op, key)
            .with_value(value)
            .with_seq(seq, 0)
            .with_stat(exists, index))
    };
    let checked = |value: Option<&[u8]>, res: Op| -> Result<Action, StoreError> {
        let seq = seq_of(req);
        let outcome = store.write_checked(&key, value, seq)?;
        count_write(stats, value.is_some(), &outcome);
        Ok(Action::Reply(
            Message::new(res, key)
                .with_seq(seq, token_of(req))
                .with_stat(value.is_some(), index),
        ))
    };
    Ok(match req.op {
        Op::GETREQ | Op::GETREQ_POP | Op::NETCACHE_GETREQ_POP => {
            Action::Reply(get_reply(Op::GETRES_SEQ, Op::GETRES_SEQ)?)
        }
        Op::GETREQ_NLATEST => {
            let m = get_reply(Op::GETRES_LATEST_SEQ, Op::GETRES_DELETED_SEQ)?;
            if m.fits_switch() {
                Action::Reply(m)
            } else {
                // The latest value is larger than the switch stores: straight to the client
                // (GETRES_SEQ passes the switch untouched; the slot stays not latest).
                Action::Reply(get_reply(Op::GETRES_SEQ, Op::GETRES_SEQ)?)
            }
        }
        Op::PUTREQ => {
            let v = req.value.as_deref().unwrap_or(&[]);
            let seq = store.write_next(&key, Some(v))?;
            stats.puts.fetch_add(1, Ordering::Relaxed);
            Action::Reply(
                Message::new(Op::PUTRES_SEQ, key)
                    .with_seq(seq, 0)
                    .with_stat(true, index),
            )
        }
        Op::DELREQ => {
            let seq = store.write_next(&key, None)?;
            stats.deletes.fetch_add(1, Ordering::Relaxed);
            Action::Reply(
                Message::new(Op::DELRES_SEQ, key)
                    .with_seq(seq, 0)
                    .with_stat(false, index),
            )
        }
        Op::LOADREQ => {
            let v = req.value.as_deref().unwrap_or(&[]);
            store.write_next(&key, Some(v))?;
            stats.puts.fetch_add(1, Ordering::Relaxed);
            Action::Reply(Message::new(Op::LOADACK, key))
        }
        Op::PUTREQ_SEQ
        | Op::PUTREQ_POP_SEQ
        | Op::PUTREQ_SEQ_CASE3
        | Op::PUTREQ_POP_SEQ_CASE3
        | Op::PUTREQ_SEQ_BEINGEVICTED
        | Op::PUTREQ_SEQ_CASE3_BEINGEVICTED
        | Op::NETCACHE_PUTREQ_SEQ_CACHED
        | Op::TERN_PUTREQ_LARGE_SEQ => {
            checked(Some(req.value.as_deref().unwrap_or(&[])), Op::PUTRES_SEQ)?
        }
        Op::DELREQ_SEQ
        | Op::DELREQ_SEQ_CASE3
        | Op::DELREQ_SEQ_BEINGEVICTED
        | Op::DELREQ_SEQ_CASE3_BEINGEVICTED
        | Op::NETCACHE_DELREQ_SEQ_CACHED => checked(None, Op::DELRES_SEQ)?,
        Op::GETREQ_BEINGEVICTED_RECORD | Op::GETREQ_LARGEVALUEBLOCK_RECORD => {
            // The switch's record of a key being evicted, or followed by a large write that
            // may not have arrived (record embedding): the newer wins.
            let stored = get_reply(Op::GETRES_SEQ, Op::GETRES_SEQ)?;
            let embedded_seq = seq_of(req);
            let stored_seq = seq_of(&stored);
            if embedded_seq > stored_seq {
                let exists = req.stat.is_some_and(|s| s.exists);
                Action::Reply(
                    Message::new(Op::GETRES_SEQ, key)
                        .with_value(req.value.clone().unwrap_or_default())
                        .with_seq(embedded_seq, 0)
                        .with_stat(exists, index),
                )
            } else {
                Action::Reply(stored)
            }
        }
        Op::CACHE_EVICT | Op::CACHE_EVICT_CASE2 => match parse_evict_body(&req.body) {
            Ok((value, seq)) => {
                let outcome = store.write_checked(&key, value.as_deref(), seq)?;
                count_write(stats, value.is_some(), &outcome);
                Action::Reply(Message::new(Op::CACHE_EVICT_ACK, key))
            }
            Err(e) => {
                eprintln!("kv server: {e} (key {key:?}); ignored");
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                Action::Ignore
            }
        },
        Op::TERN_MAXSEQ => {
            let m = store.max_seq()?;
            Action::Reply(Message::new(Op::TERN_MAXSEQ_ACK, key).with_body(m.to_be_bytes()))
        }
        Op::TERN_SNAPSHOT => {
            let n = store.snapshot_live_count()?;
            Action::Reply(Message::new(Op::TERN_SNAPSHOT_ACK, key).with_body(n.to_be_bytes()))
        }
        Op::TERN_SHUTDOWN => Action::Shutdown(Message::new(Op::TERN_SHUTDOWN_ACK, key)),
        _ => {
            stats.rejected.fetch_add(1, Ordering::Relaxed);
            Action::Ignore
        }
    })
}

/// Answers one MADINC request against the tenant's own key space of `store`: READ_REQUEST →
/// READ_REPLY, WRITE_REQUEST → WRITE_REPLY (and a write notice to the controller when `ctl` has
/// one). Other MADINC ops are not for a server: `None`.
pub fn handle_madinc(
    store: &Store,
    index: u16,
    req: &MadMessage,
    stats: &ServerStats,
    ctl: &CacheCtl,
) -> Result<Option<MadMessage>, StoreError> {
    let reply = |body| MadMessage {
        tenant: req.tenant,
        tag: req.tag,
        key: req.key,
        body,
    };
    Ok(match &req.body {
        MadBody::ReadRequest => {
            stats.gets.fetch_add(1, Ordering::Relaxed);
            let value = store
                .tenant_get(req.tenant, &req.key)?
                .and_then(|r| r.value);
            Some(reply(MadBody::ReadReply {
                found: value.is_some(),
                source: index,
                value: value.unwrap_or_default(),
            }))
        }
        MadBody::WriteRequest { value } => {
            store.tenant_write(req.tenant, &req.key, Some(value))?;
            stats.puts.fetch_add(1, Ordering::Relaxed);
            if let Some(link) = ctl.madinc_link() {
                let notice = reply(MadBody::Store {
                    op: StoreOp::Update,
                    id: link.next_id(),
                    switch: index,
                    slot: u32::MAX,
                    value: value.clone(),
                });
                if link.send(&notice).is_err() {
                    stats.store_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(reply(MadBody::WriteReply {
                stored: true,
                source: index,
            }))
        }
        _ => None,
    })
}

fn count_write(stats: &ServerStats, put: bool, outcome: &WriteOutcome) {
    match outcome {
        WriteOutcome::Applied if put => stats.puts.fetch_add(1, Ordering::Relaxed),
        WriteOutcome::Applied => stats.deletes.fetch_add(1, Ordering::Relaxed),
        WriteOutcome::Stale { .. } => stats.stale_writes.fetch_add(1, Ordering::Relaxed),
    };
}

/// A running server.
pub struct ServerHandle {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    store: Arc<Store>,
    stats: Arc<ServerStats>,
    ctl: Arc<CacheCtl>,
    workers: Vec<JoinHandle<()>>,
}

/// Starts a server: opens the store, binds the socket, spawns the workers.
pub fn start(cfg: &ServerConfig) -> Result<ServerHandle, ServerError> {
    if cfg.workers == 0 || cfg.workers > 256 {
        return Err(ServerError::Config(format!(
            "worker count {} must be between 1 and 256",
            cfg.workers
        )));
    }
    let store = Arc::new(Store::open(&cfg.dir, cfg.partitions, &cfg.store)?);
    let io = |addr, source| ServerError::Io { addr, source };
    let sock = UdpSocket::bind(cfg.addr).map_err(|e| io(cfg.addr, e))?;
    let addr = sock.local_addr().map_err(|e| io(cfg.addr, e))?;
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|e| io(addr, e))?;
    let stop = Arc::new(AtomicBool::new(false));
    let stats = Arc::new(ServerStats::default());
    let ctl = Arc::new(CacheCtl::default());
    ctl.set_switchos(cfg.switchos);
    let mut workers = Vec::new();
    for w in 0..cfg.workers {
        let sock = sock.try_clone().map_err(|e| io(addr, e))?;
        let (store, stop, stats, ctl) = (store.clone(), stop.clone(), stats.clone(), ctl.clone());
        let index = cfg.index;
        let h = std::thread::Builder::new()
            .name(format!("kv-worker-{w}"))
            .spawn(move || worker(&sock, &store, index, &stop, &stats, &ctl))
            .map_err(|e| io(addr, e))?;
        workers.push(h);
    }
    {
        let sock = sock.try_clone().map_err(|e| io(addr, e))?;
        let (store, stop, ctl) = (store.clone(), stop.clone(), ctl.clone());
        let index = cfg.index;
        let h = std::thread::Builder::new()
            .name("kv-cache-ctl".into())
            .spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    ctl.pump(&sock, &store, index);
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
            .map_err(|e| io(addr, e))?;
        workers.push(h);
    }
    Ok(ServerHandle {
        addr,
        stop,
        store,
        stats,
        ctl,
        workers,
    })
}

fn worker(
    sock: &UdpSocket,
    store: &Store,
    index: u16,
    stop: &AtomicBool,
    stats: &ServerStats,
    ctl: &CacheCtl,
) {
    let mut buf = vec![0u8; 65536];
    let mut out = Vec::with_capacity(256);
    while !stop.load(Ordering::Acquire) {
        let (n, from) = match sock.recv_from(&mut buf) {
            Ok(x) => x,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                        | std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::ConnectionReset
                ) =>
            {
                continue
            }
            Err(e) => {
                eprintln!("kv server: receive failed: {e}");
                continue;
            }
        };
        if is_madinc(&buf[..n]) {
            let reply = match MadMessage::decode(&buf[..n]) {
                Ok(req) => match handle_madinc(store, index, &req, stats, ctl) {
                    Ok(r) => r,
                    Err(e) => {
                        eprintln!(
                            "kv server: MADINC tenant {} key {:?}: {e}",
                            req.tenant, req.key
                        );
                        stats.store_errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                },
                Err(_) => None,
            };
            match reply.map(|r| r.encode()) {
                Some(Ok(b)) => {
                    let _ = sock.send_to(&b, from);
                }
                _ => {
                    stats.rejected.fetch_add(1, Ordering::Relaxed);
                }
            }
            continue;
        }
        let req = match Message::decode(&buf[..n]) {
            Ok(m) => m,
            Err(_) => {
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let reply = match handle_from(store, index, &req, stats, ctl, Some(from)) {
            Ok(Action::Reply(m)) => m,
            Ok(Action::Shutdown(m)) => {
                stop.store(true, Ordering::Release);
                if let Err(e) = store.flush() {
                    eprintln!("kv server: flush on shutdown failed: {e}");
                    stats.store_errors.fetch_add(1, Ordering::Relaxed);
                }
                m
            }
            Ok(Action::Ignore) => continue,
            Err(e) => {
                eprintln!("kv server: {} for key {:?}: {e}", req.op, req.key);
                stats.store_errors.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        out.clear();
        if reply.encode_into(&mut out).is_ok() {
            // A lost reply is recovered by the client's retry.
            let _ = sock.send_to(&out, from);
        }
    }
}

impl ServerHandle {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The stop flag (set it to stop the workers; e.g. from a ctrl-c handler).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.stop.clone()
    }

    /// Request counters.
    pub fn stats(&self) -> &ServerStats {
        &self.stats
    }

    /// The cache control state (switch OS address, unacknowledged messages).
    pub fn cache_ctl(&self) -> &Arc<CacheCtl> {
        &self.ctl
    }

    /// The store (for inspection in tests and tools).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Whether a stop was requested (by the flag or a TERN_SHUTDOWN message).
    pub fn stopping(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Waits until the workers stop (after a shutdown message or the flag), then flushes;
    /// returns the final counters (see [`ServerStats::snapshot`]).
    pub fn wait(self) -> Result<[u64; 6], ServerError> {
        for w in self.workers {
            let _ = w.join();
        }
        self.store.flush()?;
        Ok(self.stats.snapshot())
    }

    /// Raises the stop flag, then [`ServerHandle::wait`]s.
    pub fn shutdown(self) -> Result<[u64; 6], ServerError> {
        self.stop.store(true, Ordering::Release);
        self.wait()
    }
}

/// Key used by control messages that have no key of their own.
pub const CONTROL_KEY: Key = Key([0; 16]);
