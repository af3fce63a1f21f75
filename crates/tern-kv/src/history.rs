//! The history checker (`tern kv check`): concurrent clients read, write and delete a small,
//! skewed key set through any topology, every write carrying a unique value; every read is
//! checked against the history. A read must return (a) a value some write of that key
//! attempted, or the loaded value, and (b) a seq at least as large as every write of the key
//! acknowledged before the read was sent (no stale value), and (c) when its seq is one a write
//! was acknowledged with, that write's value (value and seq belong together).

use crate::client::{Client, ClientError};
use crate::protocol::Key;
use crate::rng::Rng;
use crate::router::Router;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Checker settings.
#[derive(Clone, Debug)]
pub struct CheckConfig {
    /// Servers, in partition-range order.
    pub servers: Vec<SocketAddr>,
    /// Keys (ids 1..=keys; skewed access: id ≈ keys × u³).
    pub keys: u64,
    /// Client threads.
    pub threads: usize,
    /// Operations per thread.
    pub ops: usize,
    /// Fraction of writes (PUT).
    pub write_ratio: f64,
    /// Fraction of deletes (taken from the writes).
    pub delete_ratio: f64,
    /// Value size in bytes (16..=128).
    pub value_len: usize,
    /// Fraction of the PUTs that write a large value (`large_len` bytes, never cached: the
    /// switch forwards them to the server).
    pub large_ratio: f64,
    /// Hot-set shifts: the run is cut into `shifts + 1` phases of equal length and each phase
    /// moves the skewed key distribution by `keys / (shifts + 1)` ids (0: no shift).
    pub shifts: u32,
    /// Size of the large values (129..=8192; over namespaces keep it under the MTU: a
    /// fragmented request is dropped by the cache programs).
    pub large_len: usize,
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Seed.
    pub seed: u64,
    /// Client-side preservation (FarReach's upstream backup): keep the newest write of every
    /// key the switch answered and dump them to this file (every 10 ms while they change), for
    /// the recovery of a crashed switch.
    pub preserve: Option<std::path::PathBuf>,
}

/// The clients' preserved records by key (`(changed since the last dump, records)`).
type PreserveMap = Mutex<(bool, HashMap<Key, (Option<Vec<u8>>, u32)>)>;

/// Client-side preservation (FarReach's upstream backup, §3.9 of the reference): the newest
/// switch-answered write of every key, dumped to a file (atomically, [`write_preserved`]) every
/// 10 ms while it changes and once more when finished, for the recovery of a crashed switch.
/// Shared by the client threads of `tern kv check` and `tern kv bench`.
pub struct Preserver {
    map: Arc<PreserveMap>,
    done: Arc<std::sync::atomic::AtomicBool>,
    dumper: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Preserver {
    /// Starts dumping to `path` (`None`: records are kept in memory only).
    pub fn start(path: Option<std::path::PathBuf>) -> Preserver {
        let map: Arc<PreserveMap> = Arc::new(Mutex::new((false, HashMap::new())));
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let dump = |p: &std::path::Path, m: &PreserveMap| {
            let recs: Option<Vec<Preserved>> = m.lock().ok().and_then(|mut g| {
                let changed = std::mem::take(&mut g.0);
                changed.then(|| g.1.iter().map(|(k, (v, s))| (*k, v.clone(), *s)).collect())
            });
            if let Some(recs) = recs {
                if let Err(e) = write_preserved(p, &recs) {
                    eprintln!("preserving records to {}: {e}", p.display());
                }
            }
        };
        let dumper = path.map(|p| {
            let (m, done) = (map.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(std::sync::atomic::Ordering::Acquire) {
                    dump(&p, &m);
                    std::thread::sleep(Duration::from_millis(10));
                }
                dump(&p, &m);
            })
        });
        Preserver {
            map,
            done,
            dumper: Mutex::new(dumper),
        }
    }

    /// Keeps `(value, seq)` (`None`: deleted) for `key` unless a newer seq is kept already.
    pub fn record(&self, key: Key, value: Option<Vec<u8>>, seq: u32) {
        if let Ok(mut p) = self.map.lock() {
            let e = p.1.entry(key).or_insert((None, 0));
            if seq >= e.1 {
                *e = (value, seq);
            }
            p.0 = true;
        }
    }

    /// Records kept so far.
    pub fn len(&self) -> usize {
        self.map.lock().map_or(0, |m| m.1.len())
    }

    /// Whether no record is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the final dump and stops the dumper.
    pub fn finish(&self) {
        self.done.store(true, std::sync::atomic::Ordering::Release);
        if let Some(d) = self.dumper.lock().ok().and_then(|mut d| d.take()) {
            let _ = d.join();
        }
    }
}

impl Drop for Preserver {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A preserved record: `(key, value or None for deleted, seq)`.
pub type Preserved = (Key, Option<Vec<u8>>, u32);

/// Writes preserved records: one line per record, `key-hex seq 1 value-hex` or `key-hex seq 0`.
pub fn write_preserved(path: &std::path::Path, recs: &[Preserved]) -> std::io::Result<()> {
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let mut text = String::new();
    for (k, v, seq) in recs {
        match v {
            Some(v) => text += &format!("{} {seq} 1 {}\n", hex(&k.0), hex(v)),
            None => text += &format!("{} {seq} 0\n", hex(&k.0)),
        }
    }
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)?;
    std::fs::rename(&tmp, path)
}

/// Reads a file [`write_preserved`] wrote; a bad line is an error naming it.
pub fn read_preserved(path: &std::path::Path) -> Result<Vec<Preserved>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let unhex = |s: &str| -> Option<Vec<u8>> {
        (s.len() & 1 == 0)
            .then(|| {
                (0..s.len())
                    .step_by(2)
                    .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
                    .collect()
            })
            .flatten()
    };
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || {
            format!(
                "{} line {}: not `key seq stat [value]`",
                path.display(),
                i + 1
            )
        };
        let f: Vec<&str> = line.split_whitespace().collect();
        let key: [u8; 16] = f
            .first()
            .and_then(|k| unhex(k))
            .and_then(|k| k.try_into().ok())
            .ok_or_else(bad)?;
        let seq: u32 = f.get(1).and_then(|s| s.parse().ok()).ok_or_else(bad)?;
        let value = match (f.get(2).copied(), f.get(3)) {
            (Some("1"), Some(v)) => Some(unhex(v).ok_or_else(bad)?),
            (Some("1"), None) => Some(Vec::new()),
            (Some("0"), None) => None,
            _ => return Err(bad()),
        };
        out.push((Key(key), value, seq));
    }
    Ok(out)
}

/// What the checker found.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct CheckReport {
    /// Reads checked.
    pub reads: u64,
    /// Reads answered by the switch (nodeidx 0xFFFF).
    pub switch_reads: u64,
    /// `(reads, answered by the switch)` per hot-set phase.
    pub phase_reads: Vec<(u64, u64)>,
    /// Acknowledged PUTs of large values.
    pub large_writes: u64,
    /// Reads that returned a large value.
    pub large_reads: u64,
    /// Writes acknowledged.
    pub writes: u64,
    /// Deletes acknowledged.
    pub deletes: u64,
    /// Operations that failed (timeout after every retry).
    pub errors: u64,
    /// Reads older than a write acknowledged before they were sent.
    pub stale: u64,
    /// Reads returning a value no write of the key attempted.
    pub unknown: u64,
    /// Reads whose seq belongs to an acknowledged write with another value.
    pub mixed: u64,
    /// Up to 10 descriptions of violations.
    pub examples: Vec<String>,
}

impl CheckReport {
    /// Violations found.
    pub fn violations(&self) -> u64 {
        self.stale + self.unknown + self.mixed
    }
}

#[derive(Default)]
struct KeyHistory {
    /// `(time the client saw the ack, seq)` of acknowledged writes and deletes.
    acked: Vec<(Instant, u32)>,
    /// `(client thread, who answered: server index or 0xFFFF for the switch, delete)` of each
    /// entry of `acked` (for the violation reports).
    who: Vec<(usize, u16, bool)>,
    /// seq → value (`None` = delete) of acknowledged writes.
    by_seq: HashMap<u32, Option<Vec<u8>>>,
}

fn value_of(key: u64, thread: usize, n: u64, len: usize) -> Vec<u8> {
    let mut v = format!("k{key}-t{thread}-n{n}-").into_bytes();
    while v.len() < len {
        v.push(b'a' + (v.len() % 26) as u8);
    }
    v.truncate(len);
    v
}

/// The loaded value of key `id`.
fn initial(id: u64, len: usize) -> Vec<u8> {
    value_of(id, 9999, 0, len)
}

/// Parses `k{key}-t{thread}-n{n}-…`: whether it names key `id`.
fn names_key(v: &[u8], id: u64) -> bool {
    let p = format!("k{id}-t");
    v.starts_with(p.as_bytes())
}

/// The history of a key around a bad read by thread `thread` (sent at `sent`, answered at
/// `answered`, after `retries` retries): the last acknowledged writes before it and the first
/// after, each with its seq, client thread, who answered it and when relative to the read's
/// send (the checker's examples; a violation is rare and these name what happened around it).
fn around(h: &KeyHistory, thread: usize, sent: Instant, answered: Instant, retries: u64) -> String {
    let ms = |at: Instant| {
        if at >= sent {
            format!("+{:.1}", (at - sent).as_secs_f64() * 1e3)
        } else {
            format!("-{:.1}", (sent - at).as_secs_f64() * 1e3)
        }
    };
    let mut order: Vec<usize> = (0..h.acked.len()).collect();
    order.sort_by_key(|&i| h.acked[i].0);
    let before = order.iter().filter(|&&i| h.acked[i].0 < sent).count();
    let lo = before.saturating_sub(4);
    let hi = (before + 2).min(order.len());
    let items: Vec<String> = order[lo..hi]
        .iter()
        .map(|&i| {
            let (at, seq) = h.acked[i];
            let (t, by, del) = h.who.get(i).copied().unwrap_or((usize::MAX, 0, false));
            let who = if t == usize::MAX {
                "load".to_string()
            } else {
                format!("t{t}")
            };
            let by = if by == 0xFFFF {
                "switch".to_string()
            } else {
                format!("server {by}")
            };
            let what = if del { "delete" } else { "write" };
            format!("{what} seq {seq} by {who} acked by {by} at {} ms", ms(at))
        })
        .collect();
    format!(
        "read by t{thread} answered at {} ms after {retries} retries; writes around it: [{}]",
        ms(answered),
        items.join(", ")
    )
}

/// Loads the keys, runs the clients and checks every read.
pub fn run(cfg: &CheckConfig) -> Result<CheckReport, ClientError> {
    let router = Router::new(cfg.servers.clone()).map_err(|e| {
        ClientError::Io(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            e.to_string(),
        ))
    })?;
    let len = cfg.value_len.clamp(16, 128);
    let large_len = cfg.large_len.clamp(129, crate::protocol::MAX_VALUE_LEN);
    let hist: Arc<Vec<Mutex<KeyHistory>>> = Arc::new(
        (0..=cfg.keys)
            .map(|_| Mutex::new(KeyHistory::default()))
            .collect(),
    );
    let mut loader = Client::new(router.clone(), cfg.timeout, cfg.retries)?;
    for id in 1..=cfg.keys {
        let v = initial(id, len);
        let seq = loader.put(Key::from_id(id), &v)?;
        if let Ok(mut h) = hist[id as usize].lock() {
            h.acked.push((Instant::now(), seq));
            h.who.push((usize::MAX, 0, false));
            h.by_seq.insert(seq, Some(v));
        }
    }
    let report = Arc::new(Mutex::new(CheckReport::default()));
    let preserved = Arc::new(Preserver::start(cfg.preserve.clone()));
    let mut handles = Vec::new();
    for t in 0..cfg.threads {
        let (cfg, router, hist, report) =
            (cfg.clone(), router.clone(), hist.clone(), report.clone());
        let preserved = preserved.clone();
        handles.push(std::thread::spawn(move || -> Result<(), ClientError> {
            let mut c = Client::new(router, cfg.timeout, cfg.retries)?;
            let mut rng = Rng::new(cfg.seed ^ (t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
            let mut local = CheckReport::default();
            let phases = u64::from(cfg.shifts) + 1;
            for n in 0..cfg.ops as u64 {
                let u = rng.next_f64();
                let phase = (n * phases / (cfg.ops as u64).max(1)).min(phases - 1) as usize;
                let offset = phase as u64 * cfg.keys / phases;
                let id = 1 + (((cfg.keys as f64) * u * u * u) as u64 + offset) % cfg.keys;
                let key = Key::from_id(id);
                let r = rng.next_f64();
                if r < cfg.write_ratio {
                    let del = r < cfg.write_ratio * cfg.delete_ratio;
                    let big = !del && rng.next_f64() < cfg.large_ratio;
                    let v = value_of(id, t, n + 1, if big { large_len } else { len });
                    let res = if del {
                        c.delete_detailed(key)
                    } else {
                        c.put_detailed(key, &v)
                    };
                    match res {
                        Ok((seq, by)) => {
                            let now = Instant::now();
                            local.large_writes += u64::from(big);
                            if by == 0xFFFF && cfg.preserve.is_some() {
                                preserved.record(key, (!del).then(|| v.clone()), seq);
                            }
                            if let Ok(mut h) = hist[id as usize].lock() {
                                h.acked.push((now, seq));
                                h.who.push((t, by, del));
                                h.by_seq.insert(seq, (!del).then_some(v));
                            }
                            if del {
                                local.deletes += 1;
                            } else {
                                local.writes += 1;
                            }
                        }
                        Err(_) => local.errors += 1,
                    }
                } else {
                    let t0 = Instant::now();
                    let sends_before = c.retried;
                    let g = match c.get(key) {
                        Ok(g) => g,
                        Err(_) => {
                            local.errors += 1;
                            continue;
                        }
                    };
                    local.reads += 1;
                    local.switch_reads += u64::from(g.served_by == 0xFFFF);
                    if local.phase_reads.len() <= phase {
                        local.phase_reads.resize(phase + 1, (0, 0));
                    }
                    local.phase_reads[phase].0 += 1;
                    local.phase_reads[phase].1 += u64::from(g.served_by == 0xFFFF);
                    local.large_reads +=
                        u64::from(g.value.as_ref().is_some_and(|v| v.len() == large_len));
                    let Ok(h) = hist[id as usize].lock() else {
                        continue;
                    };
                    let need = h
                        .acked
                        .iter()
                        .filter(|(at, _)| *at < t0)
                        .map(|(_, s)| *s)
                        .max();
                    let mut bad = Vec::new();
                    if let Some(v) = &g.value {
                        if !names_key(v, id) || (v.len() != len && v.len() != large_len) {
                            local.unknown += 1;
                            bad.push("a value no write of the key attempted");
                        }
                    }
                    if need.is_some_and(|s| g.seq < s) {
                        local.stale += 1;
                        bad.push("stale: older than an acknowledged write");
                    }
                    if let Some(expected) = h.by_seq.get(&g.seq) {
                        if *expected != g.value {
                            local.mixed += 1;
                            bad.push("seq of one write with another value");
                        }
                    }
                    if !bad.is_empty() && local.examples.len() < 10 {
                        local.examples.push(format!(
                            "key {id}: read seq {} value {:?} (served by {}), acked before: \
                             seq {:?}: {}; {}",
                            g.seq,
                            g.value.as_deref().map(String::from_utf8_lossy),
                            g.served_by,
                            need,
                            bad.join("; "),
                            around(&h, t, t0, Instant::now(), c.retried - sends_before)
                        ));
                    }
                }
            }
            if let Ok(mut r) = report.lock() {
                r.reads += local.reads;
                r.switch_reads += local.switch_reads;
                if r.phase_reads.len() < local.phase_reads.len() {
                    r.phase_reads.resize(local.phase_reads.len(), (0, 0));
                }
                for (a, b) in r.phase_reads.iter_mut().zip(&local.phase_reads) {
                    a.0 += b.0;
                    a.1 += b.1;
                }
                r.large_writes += local.large_writes;
                r.large_reads += local.large_reads;
                r.writes += local.writes;
                r.deletes += local.deletes;
                r.errors += local.errors;
                r.stale += local.stale;
                r.unknown += local.unknown;
                r.mixed += local.mixed;
                let room = 10usize.saturating_sub(r.examples.len());
                r.examples.extend(local.examples.into_iter().take(room));
            }
            Ok(())
        }));
    }
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => {
                return Err(ClientError::Io(std::io::Error::other(
                    "a checker thread panicked",
                )))
            }
        }
    }
    preserved.finish();
    let r = report.lock().map(|r| r.clone()).unwrap_or_default();
    Ok(r)
}
