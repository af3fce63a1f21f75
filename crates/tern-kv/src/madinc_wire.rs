//! MADINC's control messages on the wire, acknowledged and retried: a [`Link`] sends MADINC
//! messages (hot reports from a switch, write notices from a storage server, control and page
//! messages from the controller) over UDP to one receiver and sends each again every retry
//! interval until a CONTROL_REPLY for it arrives; an [`Inbox`] acknowledges every message it
//! receives (again for a retry, whose acknowledgement may have been lost) and hands each to its
//! owner once. Both can drop a share of what they send (loss injection, deterministic) so a test
//! shows that a burst loses nothing.
//!
//! A message is identified by (op, tenant, key, id, switch). A switch's HOT_REPORT clone has no
//! id field; a [`SwitchAgent`] numbers every report it relays (HOT_REPORT_NUMBERED, the id from
//! its link's counter), so two reports of one item (one made before a new detection period and
//! still in flight, one after) are two messages, each handed over once, and a late retry of a
//! report is a duplicate whatever the period. A bare HOT_REPORT sent on a link is acknowledged
//! with id 0 and one (tenant, key, switch) is one report until [`Inbox::new_period`].

use crate::madinc::{MadBody, MadMessage, MadOp, ReplyStatus};
use crate::madinc_auth::{AuthKey, Opener, Refused, Sealer};
use crate::protocol::Key;
use crate::rng::Rng;
use std::collections::HashMap;
use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// What identifies a message for acknowledgement and deduplication.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MsgId {
    /// The op code.
    pub op: u16,
    /// The tenant.
    pub tenant: u16,
    /// The key.
    pub key: Key,
    /// The control message id (0 for a HOT_REPORT).
    pub id: u32,
    /// The switch (or server) named in the message.
    pub switch: u16,
}

/// The identity of a message that is acknowledged, or `None` for ops that are not control
/// messages (read/write requests and replies, CONTROL_REPLY itself).
pub fn msg_id(m: &MadMessage) -> Option<MsgId> {
    let (id, switch) = match &m.body {
        MadBody::HotReport { switch, id, .. } => (id.unwrap_or(0), *switch),
        MadBody::Store { id, switch, .. }
        | MadBody::Evict { id, switch, .. }
        | MadBody::Arm { id, switch, .. }
        | MadBody::Page { id, switch, .. }
        | MadBody::Tenant { id, switch, .. }
        | MadBody::Reset { id, switch } => (*id, *switch),
        _ => return None,
    };
    Some(MsgId {
        op: m.body.op().code(),
        tenant: m.tenant,
        key: m.key,
        id,
        switch,
    })
}

/// The CONTROL_REPLY acknowledging `m` with `status`.
pub fn ack_for(m: &MadMessage, status: u8) -> Option<MadMessage> {
    let i = msg_id(m)?;
    Some(MadMessage {
        tenant: m.tenant,
        tag: m.tag,
        key: m.key,
        body: MadBody::Reply {
            id: i.id,
            switch: i.switch,
            acked: m.body.op(),
            status,
        },
    })
}

/// The identity of the message a CONTROL_REPLY acknowledges.
fn acked_id(r: &MadMessage) -> Option<(MsgId, u8)> {
    match r.body {
        MadBody::Reply {
            id,
            switch,
            acked,
            status,
        } => Some((
            MsgId {
                op: acked.code(),
                tenant: r.tenant,
                key: r.key,
                id,
                switch,
            },
            status,
        )),
        _ => None,
    }
}

/// Loss injection: drops `per_million` of the datagrams a side sends, chosen by a seeded PRNG.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Loss {
    /// Datagrams dropped per million sent.
    pub per_million: u32,
    /// PRNG seed.
    pub seed: u64,
}

struct Dropper {
    per_million: u32,
    rng: Rng,
}

impl Dropper {
    fn new(l: Loss) -> Dropper {
        Dropper {
            per_million: l.per_million,
            rng: Rng::new(l.seed),
        }
    }

    fn drop_next(&mut self) -> bool {
        self.per_million > 0 && (self.rng.next_u64() % 1_000_000) < self.per_million as u64
    }
}

/// A link's counters.
#[derive(Default, Debug)]
pub struct LinkStats {
    /// Messages given to [`Link::send`].
    pub queued: AtomicU64,
    /// Datagrams put on the wire (first sends and retries, dropped ones included).
    pub sent: AtomicU64,
    /// Sends after a timeout.
    pub retried: AtomicU64,
    /// Datagrams the loss injection dropped.
    pub injected_drops: AtomicU64,
    /// Messages acknowledged.
    pub acked: AtomicU64,
    /// Acknowledgements with a status other than OK.
    pub refused: AtomicU64,
    /// Messages given up after the last try.
    pub gave_up: AtomicU64,
    /// Acknowledgements refused: not sealed with the deployment's key (forged) or a copy of
    /// one already taken (replayed).
    pub forged_acks: AtomicU64,
    /// Sends that waited for the oldest unacknowledged message to come within [`WINDOW`].
    pub window_waits: AtomicU64,
}

/// The span of message ids a receiver remembers per sender (and a link keeps its
/// unacknowledged messages within): a copy of a message more than this many ids older than
/// the newest one seen from its sender was acknowledged before (its sender kept it within the
/// window while it was pending), so it is dropped unanswered.
pub const WINDOW: u32 = 1 << 15;

/// A message waiting for its acknowledgement.
struct Pending {
    bytes: Vec<u8>,
    next: Instant,
    tries: u32,
    /// The wait before the next send: the retry interval, doubled after every send up to
    /// [`MAX_BACKOFF`] (a burst of unacknowledged messages must not flood the receiver).
    wait: Duration,
}

/// The longest wait between two sends of one message.
pub const MAX_BACKOFF: Duration = Duration::from_millis(50);

struct LinkShared {
    sock: UdpSocket,
    dest: SocketAddr,
    retry: Duration,
    max_tries: u32,
    pending: Mutex<HashMap<MsgId, Pending>>,
    dropper: Mutex<Dropper>,
    stop: AtomicBool,
    stats: LinkStats,
    next_id: AtomicU32,
    /// Messages acknowledged with a non-OK status, or given up ([`GAVE_UP`]), until
    /// [`Link::call`] takes their outcome.
    outcomes: Mutex<HashMap<MsgId, u8>>,
    /// With a deployment key: seals every send, opens every acknowledgement.
    auth: Option<Mutex<(Sealer, Opener)>>,
    /// The newest numbered id sent.
    newest: Mutex<Option<u32>>,
}

/// The outcome [`Link::call`] reports for a message given up after its last try.
pub const GAVE_UP: u8 = 0xFF;

impl LinkShared {
    fn put(&self, bytes: &[u8]) {
        self.stats.sent.fetch_add(1, Ordering::Relaxed);
        // Every send is sealed afresh: a retry carries a new sequence number.
        let sealed;
        let bytes = match &self.auth {
            Some(a) => {
                sealed = a.lock().unwrap_or_else(|p| p.into_inner()).0.seal(bytes);
                &sealed[..]
            }
            None => bytes,
        };
        let lost = self
            .dropper
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drop_next();
        if lost {
            self.stats.injected_drops.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // A send error is a lost datagram: the retry recovers it.
        let _ = self.sock.send_to(bytes, self.dest);
    }
}

/// A reliable sender of MADINC control messages to one receiver (its own socket and thread):
/// each message is sent again after the retry interval, then after twice that, and so on up to
/// [`MAX_BACKOFF`], until acknowledged. Stopped on drop.
pub struct Link {
    shared: Arc<LinkShared>,
    thread: Option<JoinHandle<()>>,
}

/// Why a link could not start or a message could not be sent.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// A socket operation failed.
    #[error("madinc link socket: {0}")]
    Io(#[from] std::io::Error),
    /// The message is not a control message (nothing would acknowledge it), or for [`call`] not
    /// a read or write request.
    #[error("{0} is not an acknowledged control message (or, for a call, not a request)")]
    NotControl(MadOp),
    /// The message does not encode.
    #[error("madinc link: {0}")]
    Encode(#[from] crate::madinc::MadError),
    /// A numbered message sent after one [`WINDOW`] ids newer: its receiver could take it for
    /// an old copy.
    #[error(
        "madinc link: message id {id} is {WINDOW} or more older than id {newest}, already sent"
    )]
    Window {
        /// The message's id.
        id: u32,
        /// The newest id sent.
        newest: u32,
    },
}

impl Link {
    /// A link from an ephemeral loopback port to `dest`, retrying every `retry` and giving a
    /// message up after `max_tries` sends.
    pub fn start(
        dest: SocketAddr,
        retry: Duration,
        max_tries: u32,
        loss: Loss,
    ) -> Result<Link, WireError> {
        Link::start_auth(dest, retry, max_tries, loss, None)
    }

    /// Like [`Link::start`]; with `auth`, every datagram is sealed with the deployment's key
    /// ([`crate::madinc_auth`]) and only acknowledgements sealed with it are taken.
    pub fn start_auth(
        dest: SocketAddr,
        retry: Duration,
        max_tries: u32,
        loss: Loss,
        auth: Option<AuthKey>,
    ) -> Result<Link, WireError> {
        // Loopback for a loopback receiver; any local address for one behind an interface (a
        // switch in a network namespace).
        let bind: SocketAddr = match (dest.is_ipv4(), dest.ip().is_loopback()) {
            (true, true) => ([127, 0, 0, 1], 0).into(),
            (true, false) => ([0, 0, 0, 0], 0).into(),
            (false, true) => (std::net::Ipv6Addr::LOCALHOST, 0).into(),
            (false, false) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind)?;
        sock.set_read_timeout(Some(Duration::from_millis(1)))?;
        let shared = Arc::new(LinkShared {
            sock,
            dest,
            retry,
            max_tries: max_tries.max(1),
            pending: Mutex::new(HashMap::new()),
            dropper: Mutex::new(Dropper::new(loss)),
            stop: AtomicBool::new(false),
            stats: LinkStats::default(),
            next_id: AtomicU32::new(1),
            outcomes: Mutex::new(HashMap::new()),
            auth: auth.map(|k| Mutex::new((Sealer::new(k), Opener::new(k)))),
            newest: Mutex::new(None),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("madinc-link".into())
            .spawn(move || pump(&s))?;
        Ok(Link {
            shared,
            thread: Some(thread),
        })
    }

    /// A fresh control message id (never 0).
    pub fn next_id(&self) -> u32 {
        loop {
            let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
            if id != 0 {
                return id;
            }
        }
    }

    /// Sends `m` now and again until acknowledged. A message with the identity of one still
    /// pending replaces it (the newer content is what gets retried). A numbered message (id ≠ 0)
    /// waits while a message [`WINDOW`] numbers older is still unacknowledged, and one
    /// [`WINDOW`] numbers older than the newest sent is refused ([`WireError::Window`]): the
    /// receiver's duplicate window never loses a message still to deliver.
    pub fn send(&self, m: &MadMessage) -> Result<(), WireError> {
        let id = msg_id(m).ok_or(WireError::NotControl(m.body.op()))?;
        let bytes = m.encode()?;
        let mut p = loop {
            let p = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            if id.id == 0 {
                break p;
            }
            let mut newest = self.shared.newest.lock().unwrap_or_else(|p| p.into_inner());
            let lag = newest.map_or(0, |n| n.wrapping_sub(id.id) as i32);
            if lag >= WINDOW as i32 {
                return Err(WireError::Window {
                    id: id.id,
                    newest: newest.unwrap_or(0),
                });
            }
            // How far behind this message the oldest unacknowledged numbered one is.
            let behind = p
                .keys()
                .filter(|k| k.id != 0)
                .map(|k| id.id.wrapping_sub(k.id) as i32)
                .max()
                .unwrap_or(0);
            if behind < WINDOW as i32 {
                if lag <= 0 {
                    *newest = Some(id.id);
                }
                break p;
            }
            drop(newest);
            drop(p);
            self.shared
                .stats
                .window_waits
                .fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(Duration::from_micros(500));
        };
        self.shared.stats.queued.fetch_add(1, Ordering::Relaxed);
        self.shared.put(&bytes);
        p.insert(
            id,
            Pending {
                bytes,
                next: Instant::now() + self.shared.retry,
                tries: 1,
                wait: self.shared.retry,
            },
        );
        Ok(())
    }

    /// Sends `m` and waits for its acknowledgement: the status the receiver answered
    /// ([`ReplyStatus`]), or [`GAVE_UP`] after the link's last try.
    pub fn call(&self, m: &MadMessage) -> Result<u8, WireError> {
        let id = msg_id(m).ok_or(WireError::NotControl(m.body.op()))?;
        self.send(m)?;
        loop {
            let pending = self
                .shared
                .pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains_key(&id);
            if !pending {
                break;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        Ok(self
            .shared
            .outcomes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
            .unwrap_or(ReplyStatus::OK))
    }

    /// Messages not yet acknowledged.
    pub fn pending(&self) -> usize {
        self.shared
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .len()
    }

    /// Waits until every message is acknowledged (or given up); false on timeout.
    pub fn wait_idle(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while self.pending() > 0 {
            if Instant::now() >= end {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// The counters.
    pub fn stats(&self) -> &LinkStats {
        &self.shared.stats
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The link's thread: takes acknowledgements, resends what is due.
fn pump(s: &LinkShared) {
    let mut buf = vec![0u8; 2048];
    while !s.stop.load(Ordering::Acquire) {
        // Drain the acknowledgements that arrived.
        while let Ok((n, _)) = s.sock.recv_from(&mut buf) {
            let body = match &s.auth {
                Some(a) => match a
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .1
                    .open(&buf[..n])
                {
                    Ok(b) => b,
                    Err(_) => {
                        s.stats.forged_acks.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                },
                None => &buf[..n],
            };
            let Ok(r) = MadMessage::decode(body) else {
                continue;
            };
            let Some((id, status)) = acked_id(&r) else {
                continue;
            };
            // The outcome is recorded before the pending entry goes (under its lock), so a
            // caller waiting in `call` never sees the message done without its status.
            let mut p = s.pending.lock().unwrap_or_else(|p| p.into_inner());
            if p.remove(&id).is_some() {
                s.stats.acked.fetch_add(1, Ordering::Relaxed);
                if status != ReplyStatus::OK {
                    s.stats.refused.fetch_add(1, Ordering::Relaxed);
                    s.outcomes
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .insert(id, status);
                }
            }
        }
        let now = Instant::now();
        let mut due = Vec::new();
        {
            let mut p = s.pending.lock().unwrap_or_else(|p| p.into_inner());
            let mut lost = Vec::new();
            p.retain(|id, m| {
                if m.next > now {
                    return true;
                }
                if m.tries >= s.max_tries {
                    s.stats.gave_up.fetch_add(1, Ordering::Relaxed);
                    lost.push(*id);
                    return false;
                }
                m.tries += 1;
                m.wait = (m.wait * 2).min(MAX_BACKOFF.max(s.retry));
                m.next = now + m.wait;
                due.push(m.bytes.clone());
                true
            });
            let mut o = s.outcomes.lock().unwrap_or_else(|p| p.into_inner());
            for id in lost {
                o.insert(id, GAVE_UP);
            }
        }
        for b in due {
            s.stats.retried.fetch_add(1, Ordering::Relaxed);
            s.put(&b);
        }
    }
}

/// A receiver's counters.
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct InboxStats {
    /// Control messages handed to the owner (each once).
    pub delivered: u64,
    /// Copies of a message already delivered (a retry whose acknowledgement was lost).
    pub duplicates: u64,
    /// Datagrams that did not decode, dropped.
    pub malformed: u64,
    /// MADINC messages that are not control messages, dropped.
    pub not_control: u64,
    /// Acknowledgements the loss injection dropped.
    pub injected_drops: u64,
    /// Datagrams refused because they were not sealed with the deployment's key (or altered).
    pub forged: u64,
    /// Sealed datagrams refused because their sequence number was seen before (a replay).
    pub replayed: u64,
    /// Copies of numbered messages older than their sender's window (delivered and
    /// acknowledged before): dropped unanswered.
    pub old_copies: u64,
}

/// One sender's numbered messages delivered: the newest id and the status of every id
/// delivered within [`WINDOW`] of it (at most 2 × [`WINDOW`] entries: older ones are pruned).
struct Window {
    newest: u32,
    status: HashMap<u32, u8>,
}

/// What a receiver makes of a numbered message.
enum Seen {
    /// Not delivered before.
    New,
    /// Delivered before, acknowledged with this status.
    Copy(u8),
    /// Older than the window: delivered and acknowledged before.
    Old,
}

impl Window {
    fn look(&self, id: u32) -> Seen {
        let back = self.newest.wrapping_sub(id) as i32;
        if back >= WINDOW as i32 {
            return Seen::Old;
        }
        match self.status.get(&id) {
            Some(&st) => Seen::Copy(st),
            None => Seen::New,
        }
    }

    fn record(&mut self, id: u32, status: u8) {
        if (id.wrapping_sub(self.newest) as i32) > 0 {
            self.newest = id;
        }
        self.status.insert(id, status);
        if self.status.len() > 2 * WINDOW as usize {
            let newest = self.newest;
            self.status
                .retain(|&i, _| (newest.wrapping_sub(i) as i32) < WINDOW as i32);
        }
    }
}

/// The receiving end: acknowledges and deduplicates control messages.
pub struct Inbox {
    sock: UdpSocket,
    /// Bare HOT_REPORTs (id 0) delivered in this detection period and their status.
    seen: HashMap<MsgId, u8>,
    /// Numbered messages delivered, per sender: (source address, op, switch) → window.
    windows: HashMap<(SocketAddr, u16, u16), Window>,
    dropper: Dropper,
    stats: InboxStats,
    buf: Vec<u8>,
    /// With a deployment key: opens every datagram, seals every acknowledgement.
    auth: Option<(Sealer, Opener)>,
}

impl Inbox {
    /// Binds `addr` (port 0 = any free port).
    pub fn bind(addr: SocketAddr, loss: Loss) -> Result<Inbox, WireError> {
        let sock = UdpSocket::bind(addr)?;
        Ok(Inbox {
            sock,
            seen: HashMap::new(),
            windows: HashMap::new(),
            dropper: Dropper::new(loss),
            stats: InboxStats::default(),
            buf: vec![0u8; 2048],
            auth: None,
        })
    }

    /// Takes only datagrams sealed with `key` (the others are counted as forged or replayed,
    /// neither applied nor acknowledged) and seals its acknowledgements.
    pub fn with_auth(mut self, key: AuthKey) -> Inbox {
        self.auth = Some((Sealer::new(key), Opener::new(key)));
        self
    }

    /// The bound address.
    pub fn addr(&self) -> Result<SocketAddr, WireError> {
        Ok(self.sock.local_addr()?)
    }

    /// The counters.
    pub fn stats(&self) -> InboxStats {
        self.stats
    }

    /// Messages remembered for deduplication (bare reports of this period and every
    /// sender's window).
    pub fn remembered(&self) -> usize {
        self.seen.len() + self.windows.values().map(|w| w.status.len()).sum::<usize>()
    }

    /// A new detection period: the switches may report the same items again.
    pub fn new_period(&mut self) {
        let hot = MadOp::HOT_REPORT.code();
        self.seen.retain(|i, _| i.op != hot);
    }

    /// The next new control message (acknowledged OK), waiting at most `timeout`; `None` when
    /// none arrived in time. Duplicates are acknowledged again and skipped; malformed datagrams
    /// are dropped and counted.
    pub fn recv(&mut self, timeout: Duration) -> Result<Option<MadMessage>, WireError> {
        let mut got = None;
        self.serve(timeout, &mut |m| {
            got = Some(m.clone());
            ReplyStatus::OK
        })?;
        Ok(got)
    }

    /// Like [`Inbox::recv`], but `apply` handles the new message first and its status is what
    /// the acknowledgement carries (now and for every later copy). Returns whether a new message
    /// was handled.
    pub fn serve(
        &mut self,
        timeout: Duration,
        apply: &mut dyn FnMut(&MadMessage) -> u8,
    ) -> Result<bool, WireError> {
        let end = Instant::now() + timeout;
        loop {
            // Once the time is up (or with a zero timeout) one more look at what is queued.
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                self.sock.set_nonblocking(true)?;
            } else {
                self.sock.set_nonblocking(false)?;
                self.sock.set_read_timeout(Some(left))?;
            }
            let (n, from) = match self.sock.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                            | std::io::ErrorKind::ConnectionRefused
                    ) =>
                {
                    if left.is_zero() {
                        return Ok(false);
                    }
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            let body = match &mut self.auth {
                Some((_, o)) => match o.open(&self.buf[..n]) {
                    Ok(b) => b,
                    Err(Refused::Forged) => {
                        self.stats.forged += 1;
                        continue;
                    }
                    Err(Refused::Replayed) => {
                        self.stats.replayed += 1;
                        continue;
                    }
                },
                None => &self.buf[..n],
            };
            let m = match MadMessage::decode(body) {
                Ok(m) => m,
                Err(_) => {
                    self.stats.malformed += 1;
                    continue;
                }
            };
            let Some(id) = msg_id(&m) else {
                self.stats.not_control += 1;
                continue;
            };
            let seen = if id.id == 0 {
                self.seen.get(&id).map_or(Seen::New, |&st| Seen::Copy(st))
            } else {
                match self.windows.get(&(from, id.op, id.switch)) {
                    Some(w) => w.look(id.id),
                    None => Seen::New,
                }
            };
            let (status, new) = match seen {
                Seen::Copy(st) => {
                    self.stats.duplicates += 1;
                    (st, false)
                }
                Seen::Old => {
                    self.stats.old_copies += 1;
                    continue;
                }
                Seen::New => {
                    let st = apply(&m);
                    if id.id == 0 {
                        self.seen.insert(id, st);
                    } else {
                        self.windows
                            .entry((from, id.op, id.switch))
                            .or_insert_with(|| Window {
                                newest: id.id,
                                status: HashMap::new(),
                            })
                            .record(id.id, st);
                    }
                    self.stats.delivered += 1;
                    (st, true)
                }
            };
            if let Some(a) = ack_for(&m, status) {
                if self.dropper.drop_next() {
                    self.stats.injected_drops += 1;
                } else if let Ok(b) = a.encode() {
                    let b = match &mut self.auth {
                        Some((s, _)) => s.seal(&b),
                        None => b,
                    };
                    // A lost acknowledgement is recovered by the sender's retry.
                    let _ = self.sock.send_to(&b, from);
                }
            }
            if new {
                return Ok(true);
            }
        }
    }
}

/// A MADINC read or write from a client: sends `req` to `dest` from `sock` and waits for the
/// reply of the same tenant and key (READ_REPLY for a read, WRITE_REPLY for a write), sending
/// again after each `timeout`, at most `tries` times. `Ok(None)` when no reply came (a forged or
/// unknown tenant is dropped by the switch and never answered).
pub fn call(
    sock: &UdpSocket,
    dest: SocketAddr,
    req: &MadMessage,
    timeout: Duration,
    tries: u32,
) -> Result<Option<MadMessage>, WireError> {
    let want = match req.body {
        MadBody::ReadRequest => MadOp::READ_REPLY,
        MadBody::WriteRequest { .. } => MadOp::WRITE_REPLY,
        _ => return Err(WireError::NotControl(req.body.op())),
    };
    let bytes = req.encode()?;
    let mut buf = vec![0u8; 2048];
    for _ in 0..tries.max(1) {
        sock.send_to(&bytes, dest)?;
        let end = Instant::now() + timeout;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            sock.set_read_timeout(Some(left))?;
            let n = match sock.recv_from(&mut buf) {
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
                Err(e) => return Err(e.into()),
            };
            if let Ok(m) = MadMessage::decode(&buf[..n]) {
                if m.body.op() == want && m.tenant == req.tenant && m.key == req.key {
                    return Ok(Some(m));
                }
            }
        }
    }
    Ok(None)
}

/// A switch's agent: applies the control messages that arrive on its inbox to the switch
/// ([`crate::madinc_ctl::apply_control`]), acknowledging each with the status of applying it,
/// and sends the switch's HOT_REPORTs to the controller over an acknowledged link. Stopped on
/// drop.
pub struct SwitchAgent {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    stats: Arc<Mutex<InboxStats>>,
    reports: Option<Link>,
}

impl SwitchAgent {
    /// An agent for `switch` listening on an ephemeral loopback port, with `loss` injected into
    /// its acknowledgements; its hot reports go to `controller` (if given) with `loss` too.
    pub fn start(
        switch: Arc<dyn crate::switchos::SwitchAccess>,
        controller: Option<SocketAddr>,
        retry: Duration,
        loss: Loss,
    ) -> Result<SwitchAgent, WireError> {
        SwitchAgent::start_auth(switch, controller, retry, loss, None)
    }

    /// Like [`SwitchAgent::start`]; with `auth`, the agent applies only control messages
    /// sealed with the deployment's key (forged and replayed ones are counted in its
    /// [`InboxStats`], neither applied nor acknowledged) and seals its hot reports.
    pub fn start_auth(
        switch: Arc<dyn crate::switchos::SwitchAccess>,
        controller: Option<SocketAddr>,
        retry: Duration,
        loss: Loss,
        auth: Option<AuthKey>,
    ) -> Result<SwitchAgent, WireError> {
        SwitchAgent::start_on(
            ([127, 0, 0, 1], 0).into(),
            switch,
            controller,
            retry,
            loss,
            auth,
        )
    }

    /// Like [`SwitchAgent::start_auth`], its inbox bound to `bind` (an address of a network
    /// namespace's interface).
    pub fn start_on(
        bind: SocketAddr,
        switch: Arc<dyn crate::switchos::SwitchAccess>,
        controller: Option<SocketAddr>,
        retry: Duration,
        loss: Loss,
        auth: Option<AuthKey>,
    ) -> Result<SwitchAgent, WireError> {
        let mut inbox = Inbox::bind(bind, loss)?;
        if let Some(k) = auth {
            inbox = inbox.with_auth(k);
        }
        let addr = inbox.addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Mutex::new(InboxStats::default()));
        let (st, sts) = (stop.clone(), stats.clone());
        let thread = std::thread::Builder::new()
            .name("madinc-agent".into())
            .spawn(move || {
                while !st.load(Ordering::Acquire) {
                    let served = inbox.serve(Duration::from_millis(5), &mut |m| {
                        let mut status = ReplyStatus::OK;
                        let _ = switch.with(&mut |rt| {
                            if let Err((s, _)) = crate::madinc_ctl::apply_control(rt, m) {
                                status = s;
                            }
                            Ok(())
                        });
                        status
                    });
                    if served.is_err() {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    *sts.lock().unwrap_or_else(|p| p.into_inner()) = inbox.stats();
                }
            })?;
        let reports = match controller {
            Some(c) => Some(Link::start_auth(
                c,
                retry,
                u32::MAX,
                Loss {
                    per_million: loss.per_million,
                    seed: loss.seed ^ 0x5eed,
                },
                auth,
            )?),
            None => None,
        };
        Ok(SwitchAgent {
            addr,
            stop,
            thread: Some(thread),
            stats,
            reports,
        })
    }

    /// Where the agent takes control messages.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its inbox's counters.
    pub fn stats(&self) -> InboxStats {
        *self.stats.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sends a HOT_REPORT the switch produced to the controller, until acknowledged: numbered
    /// (HOT_REPORT_NUMBERED, a fresh id of the report link) unless it already carries a number.
    pub fn report(&self, m: &MadMessage) -> Result<(), WireError> {
        let Some(l) = &self.reports else {
            return Ok(());
        };
        match m.body {
            MadBody::HotReport {
                switch,
                frequency,
                id: None,
            } => l.send(&MadMessage {
                body: MadBody::HotReport {
                    switch,
                    frequency,
                    id: Some(l.next_id()),
                },
                ..m.clone()
            }),
            _ => l.send(m),
        }
    }

    /// The report link (its counters), if there is a controller.
    pub fn report_link(&self) -> Option<&Link> {
        self.reports.as_ref()
    }
}

impl Drop for SwitchAgent {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The controller's side of a path whose switches have agents: one acknowledged link per
/// switch; each control message waits for its acknowledgement (a refusal is an error).
pub struct WirePath {
    links: Vec<Link>,
}

impl WirePath {
    /// Links to the agents at `agents` (in path order), retrying every `retry` up to
    /// `max_tries` times, with `loss` injected.
    pub fn connect(
        agents: &[SocketAddr],
        retry: Duration,
        max_tries: u32,
        loss: Loss,
    ) -> Result<WirePath, WireError> {
        WirePath::connect_auth(agents, retry, max_tries, loss, None)
    }

    /// Like [`WirePath::connect`], sealing every control message with `auth`.
    pub fn connect_auth(
        agents: &[SocketAddr],
        retry: Duration,
        max_tries: u32,
        loss: Loss,
        auth: Option<AuthKey>,
    ) -> Result<WirePath, WireError> {
        let links = agents
            .iter()
            .enumerate()
            .map(|(i, a)| {
                Link::start_auth(
                    *a,
                    retry,
                    max_tries,
                    Loss {
                        per_million: loss.per_million,
                        seed: loss.seed.wrapping_add(i as u64 * 7919),
                    },
                    auth,
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(WirePath { links })
    }

    /// The link to switch `i` (its counters).
    pub fn link(&self, i: usize) -> &Link {
        &self.links[i]
    }
}

impl crate::madinc_ctl::PathOps for WirePath {
    fn switches(&self) -> usize {
        self.links.len()
    }

    fn apply(&mut self, switch: usize, m: &MadMessage) -> Result<(), crate::madinc_ctl::CtlError> {
        use crate::madinc_ctl::CtlError;
        let status = self.links[switch].call(m).map_err(|e| CtlError::Runtime {
            switch,
            msg: e.to_string(),
        })?;
        match status {
            ReplyStatus::OK => Ok(()),
            status => Err(CtlError::Refused {
                switch,
                op: m.body.op(),
                status,
            }),
        }
    }
}
