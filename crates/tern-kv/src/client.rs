//! The key-value client library: get / put / delete / load over UDP to the server that owns the
//! key (via a [`Router`]), with a per-attempt timeout and a bounded number of retries.

use crate::protocol::{Key, Message, Op};
use crate::router::Router;
use crate::server::CONTROL_KEY;
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Client errors.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No matching reply after every attempt.
    #[error("{op} for key {key:?} to {server}: no reply after {attempts} attempts of {timeout:?}")]
    Timeout {
        /// The request op.
        op: Op,
        /// The key.
        key: Key,
        /// The server asked.
        server: SocketAddr,
        /// Attempts made.
        attempts: u32,
        /// Per-attempt timeout.
        timeout: Duration,
    },
    /// A socket operation failed.
    #[error("udp: {0}")]
    Io(#[from] std::io::Error),
    /// A server index outside the router's list.
    #[error("server index {index} out of range: the router has {count} servers")]
    NoServer {
        /// The index asked for.
        index: usize,
        /// Number of servers.
        count: usize,
    },
    /// The request could not be encoded (e.g. the value is too long).
    #[error("request: {0}")]
    Encode(#[from] crate::protocol::EncodeError),
}

/// The answer to a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetResult {
    /// The value, `None` if the key does not exist (never written or deleted).
    pub value: Option<Vec<u8>>,
    /// The record's seq (0 if never written).
    pub seq: u32,
    /// `stat_hdr.nodeidx`: the server index, or 0xFFFF if a switch answered.
    pub served_by: u16,
}

/// How long a socket replaced after a retried request keeps its port (late replies to it are
/// dropped there instead of reaching a socket that reuses the port).
const RETIRED_FOR: Duration = Duration::from_secs(10);
/// Replaced sockets kept at most.
const RETIRED_MAX: usize = 64;

/// A client bound to one local UDP socket.
///
/// Requests carry no id, so a reply is matched by key and op only. After a request that was
/// sent more than once (or got no reply), a reply to an earlier send may still arrive; the
/// client then moves to a fresh socket, so such a late reply can never be taken for the answer
/// to a later request of the same key (a read answered with a value from before a write that
/// was acknowledged meanwhile: a stale read).
pub struct Client {
    sock: UdpSocket,
    /// Sockets replaced after retried requests, with when (kept open for [`RETIRED_FOR`]).
    retired: std::collections::VecDeque<(UdpSocket, Instant)>,
    router: Router,
    timeout: Duration,
    retries: u32,
    buf: Vec<u8>,
    out: Vec<u8>,
    /// Requests sent per server (retries included).
    pub sent: Vec<u64>,
    /// Retries made.
    pub retried: u64,
    /// Times the client moved to a fresh socket after a retried request.
    pub rebound: u64,
}

impl Client {
    /// A client on an ephemeral port: on loopback if every server is on loopback, else on the
    /// unspecified address of the servers' family (so it can reach hosts in other namespaces).
    pub fn new(router: Router, timeout: Duration, retries: u32) -> Result<Client, ClientError> {
        let servers = router.servers();
        let local: std::net::IpAddr = if servers.iter().all(|a| a.ip().is_loopback()) {
            match servers.first() {
                Some(SocketAddr::V6(_)) => std::net::Ipv6Addr::LOCALHOST.into(),
                _ => std::net::Ipv4Addr::LOCALHOST.into(),
            }
        } else if servers.iter().any(SocketAddr::is_ipv6) {
            std::net::Ipv6Addr::UNSPECIFIED.into()
        } else {
            std::net::Ipv4Addr::UNSPECIFIED.into()
        };
        let sock = UdpSocket::bind((local, 0))?;
        let n = router.servers().len();
        Ok(Client {
            sock,
            retired: std::collections::VecDeque::new(),
            router,
            timeout,
            retries,
            buf: vec![0u8; 65536],
            out: Vec::with_capacity(256),
            sent: vec![0; n],
            retried: 0,
            rebound: 0,
        })
    }

    /// The router.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Sends `req` to `server` and waits for a reply with the same key and one of `accept`.
    pub fn request_to(
        &mut self,
        server: usize,
        req: &Message,
        accept: &[Op],
    ) -> Result<Message, ClientError> {
        let count = self.router.servers().len();
        let addr = *self
            .router
            .servers()
            .get(server)
            .ok_or(ClientError::NoServer {
                index: server,
                count,
            })?;
        self.out.clear();
        req.encode_into(&mut self.out)?;
        let (res, sends) = self.exchange(server, addr, req, accept);
        if sends > 1 || (sends == 1 && res.is_err()) {
            // A reply to a send this request no longer waits for may still arrive.
            self.fresh_socket()?;
        }
        res
    }

    /// The sends of [`Client::request_to`]: the result and how many times the request was sent.
    fn exchange(
        &mut self,
        server: usize,
        addr: SocketAddr,
        req: &Message,
        accept: &[Op],
    ) -> (Result<Message, ClientError>, u32) {
        let attempts = self.retries + 1;
        let mut sends = 0;
        for attempt in 0..attempts {
            if attempt > 0 {
                self.retried += 1;
            }
            if let Err(e) = self.sock.send_to(&self.out, addr) {
                return (Err(e.into()), sends);
            }
            sends += 1;
            self.sent[server] += 1;
            let deadline = Instant::now() + self.timeout;
            loop {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                if let Err(e) = self.sock.set_read_timeout(Some(left)) {
                    return (Err(e.into()), sends);
                }
                let n = match self.sock.recv_from(&mut self.buf) {
                    Ok((n, _)) => n,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock
                                | std::io::ErrorKind::TimedOut
                                | std::io::ErrorKind::Interrupted
                                | std::io::ErrorKind::ConnectionRefused
                        ) =>
                    {
                        continue
                    }
                    Err(e) => return (Err(e.into()), sends),
                };
                // Late replies to earlier attempts or other keys are skipped.
                if let Ok(m) = Message::decode(&self.buf[..n]) {
                    if m.key == req.key && accept.contains(&m.op) {
                        return (Ok(m), sends);
                    }
                }
            }
        }
        let err = ClientError::Timeout {
            op: req.op,
            key: req.key,
            server: addr,
            attempts,
            timeout: self.timeout,
        };
        (Err(err), sends)
    }

    /// Moves to a new socket (another port). The old one stays open for [`RETIRED_FOR`], so its
    /// port is not handed to another socket while late replies may still arrive at it.
    fn fresh_socket(&mut self) -> Result<(), ClientError> {
        let local = self.sock.local_addr()?.ip();
        let sock = UdpSocket::bind((local, 0))?;
        let old = std::mem::replace(&mut self.sock, sock);
        let now = Instant::now();
        while self.retired.len() >= RETIRED_MAX
            || self
                .retired
                .front()
                .is_some_and(|(_, at)| now.duration_since(*at) > RETIRED_FOR)
        {
            self.retired.pop_front();
        }
        self.retired.push_back((old, now));
        self.rebound += 1;
        Ok(())
    }

    fn request(&mut self, req: &Message, accept: &[Op]) -> Result<Message, ClientError> {
        let server = self.router.server_index(&req.key);
        self.request_to(server, req, accept)
    }

    /// Reads `key`.
    pub fn get(&mut self, key: Key) -> Result<GetResult, ClientError> {
        let m = self.request(
            &Message::new(Op::GETREQ, key),
            &[Op::GETRES_SEQ, Op::GETRES],
        )?;
        let exists = m.stat.is_some_and(|s| s.exists);
        Ok(GetResult {
            value: if exists { m.value } else { None },
            seq: m.seq.map_or(0, |s| s.seq),
            served_by: m.stat.map_or(0, |s| s.nodeidx),
        })
    }

    /// Writes `key = value`; returns the seq the write got.
    pub fn put(&mut self, key: Key, value: &[u8]) -> Result<u32, ClientError> {
        let req = Message::new(Op::PUTREQ, key).with_value(value);
        let m = self.request(&req, &[Op::PUTRES_SEQ, Op::PUTRES])?;
        Ok(m.seq.map_or(0, |s| s.seq))
    }

    /// Writes `key = value`; returns the seq and `stat_hdr.nodeidx` (0xFFFF: the switch took
    /// the write, write-back state a client preserves for recovery).
    pub fn put_detailed(&mut self, key: Key, value: &[u8]) -> Result<(u32, u16), ClientError> {
        let req = Message::new(Op::PUTREQ, key).with_value(value);
        let m = self.request(&req, &[Op::PUTRES_SEQ, Op::PUTRES])?;
        Ok((m.seq.map_or(0, |s| s.seq), m.stat.map_or(0, |s| s.nodeidx)))
    }

    /// Asks for `key` to be cached (WARMUPREQ, answered WARMUPACK by its server, which reports
    /// it to the cache's switch OS).
    pub fn warmup(&mut self, key: Key) -> Result<(), ClientError> {
        self.request(&Message::new(Op::WARMUPREQ, key), &[Op::WARMUPACK])
            .map(|_| ())
    }

    /// Deletes `key`; returns the tombstone's seq and `stat_hdr.nodeidx`.
    pub fn delete_detailed(&mut self, key: Key) -> Result<(u32, u16), ClientError> {
        let m = self.request(
            &Message::new(Op::DELREQ, key),
            &[Op::DELRES_SEQ, Op::DELRES],
        )?;
        Ok((m.seq.map_or(0, |s| s.seq), m.stat.map_or(0, |s| s.nodeidx)))
    }

    /// Deletes `key`; returns the tombstone's seq.
    pub fn delete(&mut self, key: Key) -> Result<u32, ClientError> {
        let m = self.request(
            &Message::new(Op::DELREQ, key),
            &[Op::DELRES_SEQ, Op::DELRES],
        )?;
        Ok(m.seq.map_or(0, |s| s.seq))
    }

    /// Loads `key = value` (the YCSB load phase).
    pub fn load(&mut self, key: Key, value: &[u8]) -> Result<(), ClientError> {
        let req = Message::new(Op::LOADREQ, key).with_value(value);
        self.request(&req, &[Op::LOADACK]).map(|_| ())
    }

    /// Asks server `i` to flush and stop; returns once it acknowledged.
    pub fn shutdown_server(&mut self, i: usize) -> Result<(), ClientError> {
        let req = Message::new(Op::TERN_SHUTDOWN, CONTROL_KEY);
        self.request_to(i, &req, &[Op::TERN_SHUTDOWN_ACK])
            .map(|_| ())
    }

    /// Asks server `i` for a snapshot; returns its live-record count.
    pub fn snapshot_server(&mut self, i: usize) -> Result<u64, ClientError> {
        let req = Message::new(Op::TERN_SNAPSHOT, CONTROL_KEY);
        let m = self.request_to(i, &req, &[Op::TERN_SNAPSHOT_ACK])?;
        let b: [u8; 8] = m.body.as_slice().try_into().unwrap_or([0; 8]);
        Ok(u64::from_be_bytes(b))
    }
}
