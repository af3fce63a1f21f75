//! The UDP storage server: W worker threads share one socket and a [`Store`] of N RocksDB
//! partitions, answer the NoCache / FarReach server-side requests, and stop gracefully (flushing
//! every partition) on a TERN_SHUTDOWN message or when the stop flag is raised (ctrl-c).

use crate::protocol::{Key, Message, Op};
use crate::storage::{Store, StoreError, StoreOptions, WriteOutcome};
use std::net::{SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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

/// Answers one decoded request against `store` (no I/O besides the store).
pub fn handle(
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
            Action::Reply(get_reply(Op::GETRES_LATEST_SEQ, Op::GETRES_DELETED_SEQ)?)
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
        | Op::NETCACHE_PUTREQ_SEQ_CACHED => {
            checked(Some(req.value.as_deref().unwrap_or(&[])), Op::PUTRES_SEQ)?
        }
        Op::DELREQ_SEQ
        | Op::DELREQ_SEQ_CASE3
        | Op::DELREQ_SEQ_BEINGEVICTED
        | Op::DELREQ_SEQ_CASE3_BEINGEVICTED
        | Op::NETCACHE_DELREQ_SEQ_CACHED => checked(None, Op::DELRES_SEQ)?,
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
    let mut workers = Vec::new();
    for w in 0..cfg.workers {
        let sock = sock.try_clone().map_err(|e| io(addr, e))?;
        let (store, stop, stats) = (store.clone(), stop.clone(), stats.clone());
        let index = cfg.index;
        let h = std::thread::Builder::new()
            .name(format!("kv-worker-{w}"))
            .spawn(move || worker(&sock, &store, index, &stop, &stats))
            .map_err(|e| io(addr, e))?;
        workers.push(h);
    }
    Ok(ServerHandle {
        addr,
        stop,
        store,
        stats,
        workers,
    })
}

fn worker(sock: &UdpSocket, store: &Store, index: u16, stop: &AtomicBool, stats: &ServerStats) {
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
        let req = match Message::decode(&buf[..n]) {
            Ok(m) => m,
            Err(_) => {
                stats.rejected.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let reply = match handle(store, index, &req, stats) {
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
