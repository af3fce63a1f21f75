//! The closed-loop YCSB benchmark driver: loads the records, runs a pre-generated workload on T
//! client threads (one outstanding request each), and reports throughput (overall and per
//! second), latency percentiles, per-server load and imbalance, as text and JSON.

use crate::client::{Client, ClientError};
use crate::router::Router;
use crate::server::{start, ServerConfig, ServerError, ServerHandle};
use crate::storage::StoreOptions;
use crate::ycsb::{
    deal, generate_with_ack_lag, key_of, value_for, Dynamic, KvOp, OpKind, PopularityShift,
    WorkloadError, WorkloadSpec,
};
use serde::Serialize;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Benchmark settings.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// The servers' partition-range table.
    pub router: Router,
    /// The workload (record count, op count, mix, distribution, value size).
    pub workload: WorkloadSpec,
    /// Client threads.
    pub threads: usize,
    /// Seed of the generator.
    pub seed: u64,
    /// Per-attempt timeout.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub retries: u32,
    /// Open-loop target rate in operations per second over all threads (`None` = closed loop).
    /// Each thread sends on a fixed schedule; latency is measured from the scheduled send time,
    /// so time spent queued behind a slow request counts (no coordinated omission).
    pub target_rate: Option<f64>,
    /// Dynamic popularity: pattern, keys moved per period, period length.
    pub dynamic: Option<DynamicConfig>,
    /// Client-side preservation for switch recovery: keep the newest switch-answered write of
    /// every key and dump them to this file ([`crate::history::Preserver`]).
    pub preserve: Option<std::path::PathBuf>,
}

/// A dynamic-popularity setting for a run.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct DynamicConfig {
    /// The pattern.
    pub pattern: Dynamic,
    /// Keys moved per period (FarReach / NetCache: 200).
    pub keys: usize,
    /// Period length in seconds (FarReach: 10).
    pub period_s: f64,
}

/// Benchmark errors.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// Bad workload.
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    /// A client could not be created.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// A local server could not start.
    #[error(transparent)]
    Server(#[from] ServerError),
    /// Bad settings.
    #[error("bench: {0}")]
    Config(String),
}

/// Latency percentiles in microseconds.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Latency {
    /// Samples.
    pub count: u64,
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Maximum.
    pub max_us: u64,
}

impl Latency {
    /// Percentiles of `samples` (sorted in place), nearest-rank.
    pub fn from_samples(samples: &mut [u32]) -> Latency {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_unstable();
        let n = samples.len();
        let at = |q: f64| u64::from(samples[((q * n as f64).ceil() as usize).clamp(1, n) - 1]);
        Latency {
            count: n as u64,
            mean_us: samples.iter().map(|&s| f64::from(s)).sum::<f64>() / n as f64,
            p50_us: at(0.5),
            p90_us: at(0.9),
            p99_us: at(0.99),
            p999_us: at(0.999),
            max_us: u64::from(samples[n - 1]),
        }
    }
}

/// Requests one server received from the run phase.
#[derive(Clone, Debug, Serialize)]
pub struct ServerLoad {
    /// Server address.
    pub server: String,
    /// Requests routed to it (first attempts).
    pub requests: u64,
    /// Its share of all requests.
    pub share: f64,
}

/// The load phase's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// Records loaded.
    pub records: u64,
    /// Wall time in seconds.
    pub seconds: f64,
    /// Records per second.
    pub throughput: f64,
    /// Records that failed after every retry.
    pub errors: u64,
}

/// The run phase's outcome.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// Workload name.
    pub workload: String,
    /// Open-loop target rate (ops/s), or `None` for closed loop.
    pub target_rate: Option<f64>,
    /// Dynamic popularity, if any.
    pub dynamic: Option<DynamicConfig>,
    /// Request distribution (Debug form).
    pub distribution: String,
    /// Records loaded before the run.
    pub records: i64,
    /// Operations executed.
    pub operations: u64,
    /// Client threads.
    pub threads: usize,
    /// Value size in bytes.
    pub value_len: usize,
    /// Servers.
    pub servers: usize,
    /// Run wall time in seconds.
    pub seconds: f64,
    /// Operations per second.
    pub throughput: f64,
    /// Latency over all operations (an RMW counts once, covering both requests).
    pub latency: Latency,
    /// Latency of reads only.
    pub read_latency: Latency,
    /// Latency of writes only (updates, inserts, RMWs).
    pub write_latency: Latency,
    /// Completed operations per second of the run (throughput over time).
    pub timeline: Vec<u64>,
    /// Completed operations per 100 ms of the run (finer throughput over time).
    pub timeline_100ms: Vec<u64>,
    /// Per-server request counts.
    pub per_server: Vec<ServerLoad>,
    /// Max per-server requests divided by the mean (1.0 = perfectly balanced).
    pub imbalance: f64,
    /// Operations that failed after every retry.
    pub errors: u64,
    /// Retransmissions.
    pub retries: u64,
    /// Reads that found no record.
    pub misses: u64,
    /// Reads whose value was neither the loaded value nor the value this run writes for the
    /// key (always 0 unless something corrupts or mixes up records).
    pub mismatches: u64,
    /// Latency distribution: `(quantile, microseconds)` at 1%..99% in steps of 1%, then
    /// 99.5%, 99.9%, 99.99% and 100%.
    pub latency_cdf: Vec<(f64, u64)>,
    /// The load phase, if one ran.
    pub load: Option<LoadReport>,
}

impl BenchReport {
    /// A human-readable summary.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "workload {} ({}), {} records, {} ops, {} threads, {} B values, {} servers, {}\n",
            self.workload,
            self.distribution,
            self.records,
            self.operations,
            self.threads,
            self.value_len,
            self.servers,
            match self.target_rate {
                Some(r) => format!("open loop at {r:.0} ops/s"),
                None => "closed loop".to_string(),
            }
        );
        if let Some(d) = &self.dynamic {
            s += &format!(
                "dynamic popularity: {:?}, {} keys every {} s\n",
                d.pattern, d.keys, d.period_s
            );
        }
        if let Some(l) = &self.load {
            s += &format!(
                "load: {} records in {:.2} s = {:.0} records/s ({} errors)\n",
                l.records, l.seconds, l.throughput, l.errors
            );
        }
        let lat = |name: &str, l: &Latency| {
            format!(
                "{name:<6} n={:<8} mean {:>8.1} us  p50 {:>6} us  p99 {:>6} us  p99.9 {:>6} us  max {:>7} us\n",
                l.count, l.mean_us, l.p50_us, l.p99_us, l.p999_us, l.max_us
            )
        };
        s += &format!(
            "run: {:.2} s, throughput {:.0} ops/s, errors {}, retries {}, read misses {}, value mismatches {}\n",
            self.seconds, self.throughput, self.errors, self.retries, self.misses, self.mismatches
        );
        s += &lat("all", &self.latency);
        s += &lat("read", &self.read_latency);
        s += &lat("write", &self.write_latency);
        s += &format!(
            "per-server load (imbalance max/mean = {:.3}):\n",
            self.imbalance
        );
        for l in &self.per_server {
            s += &format!(
                "  {:<22} {:>9} requests  {:>6.2}%\n",
                l.server,
                l.requests,
                l.share * 100.0
            );
        }
        s += &format!("ops per second: {:?}\n", self.timeline);
        s
    }
}

fn check(cfg: &BenchConfig) -> Result<(), BenchError> {
    if cfg.threads == 0 || cfg.threads > 1024 {
        return Err(BenchError::Config(format!(
            "thread count {} must be between 1 and 1024",
            cfg.threads
        )));
    }
    cfg.workload.validate()?;
    if let Some(d) = &cfg.dynamic {
        if !(d.period_s.is_finite() && d.period_s > 0.0) {
            return Err(BenchError::Config(format!(
                "dynamic period {} s must be positive",
                d.period_s
            )));
        }
    }
    if let Some(r) = cfg.target_rate {
        if !(r.is_finite() && r > 0.0 && cfg.threads as f64 / r < 3600.0) {
            return Err(BenchError::Config(format!(
                "target rate {r} ops/s must be positive and at least one op per hour per thread"
            )));
        }
    }
    Ok(())
}

/// Loads records `0..record_count` (YCSB's load phase) with `threads` clients.
pub fn load(cfg: &BenchConfig) -> Result<LoadReport, BenchError> {
    check(cfg)?;
    let n = cfg.workload.record_count;
    let started = Instant::now();
    let errors = std::thread::scope(|s| {
        let handles: Vec<_> = (0..cfg.threads)
            .map(|t| {
                s.spawn(move || -> Result<u64, ClientError> {
                    let mut c = Client::new(cfg.router.clone(), cfg.timeout, cfg.retries)?;
                    let mut errors = 0;
                    let mut k = t as i64;
                    while k < n {
                        let v = value_for(k, cfg.workload.value_len, 0);
                        if c.load(crate::ycsb::key_of(k), &v).is_err() {
                            errors += 1;
                        }
                        k += cfg.threads as i64;
                    }
                    Ok(errors)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or(Ok(u64::MAX)))
            .try_fold(0u64, |acc, r| r.map(|e| acc.saturating_add(e)))
    })?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(LoadReport {
        records: n as u64,
        seconds,
        throughput: n as f64 / seconds.max(1e-9),
        errors,
    })
}

struct ThreadResult {
    all: Vec<u32>,
    reads: Vec<u32>,
    writes: Vec<u32>,
    per_server: Vec<u64>,
    timeline: Vec<u64>,
    fine: Vec<u64>,
    errors: u64,
    retries: u64,
    misses: u64,
    mismatches: u64,
}

/// Waits (briefly) until the insert of `keynum` by another thread is acknowledged, as YCSB's
/// AcknowledgedCounterGenerator guarantees for reads of new keys.
fn wait_inserted(inserted: &[AtomicBool], record_count: i64, keynum: i64) {
    let Some(flag) = usize::try_from(keynum - record_count)
        .ok()
        .and_then(|i| inserted.get(i))
    else {
        return;
    };
    let deadline = Instant::now() + Duration::from_secs(2);
    while !flag.load(Ordering::Acquire) && Instant::now() < deadline {
        std::thread::yield_now();
    }
}

/// Whether a read's value is one a correct store can return: the loaded value of the key
/// (version 0) or the value this run writes for it. A missing value is a miss, not a mismatch.
fn plausible(g: &crate::client::GetResult, keynum: i64, len: usize, version: u64) -> bool {
    match &g.value {
        None => true,
        Some(v) => {
            v.len() == len
                && (*v == value_for(keynum, len, 0) || *v == value_for(keynum, len, version))
        }
    }
}

fn run_thread(
    cfg: &BenchConfig,
    ops: &[KvOp],
    start: Instant,
    version: u64,
    inserted: &[AtomicBool],
    shift: Option<&PopularityShift>,
    keep: Option<&crate::history::Preserver>,
) -> Result<ThreadResult, ClientError> {
    // A PUT; a write the switch answered (nodeidx 0xFFFF) is preserved for recovery.
    let put = |c: &mut Client, key, value: Vec<u8>| -> bool {
        match c.put_detailed(key, &value) {
            Ok((seq, by)) => {
                if let (Some(k), 0xFFFF) = (keep, by) {
                    k.record(key, Some(value), seq);
                }
                true
            }
            Err(_) => false,
        }
    };
    let mut c = Client::new(cfg.router.clone(), cfg.timeout, cfg.retries)?;
    let n_servers = cfg.router.servers().len();
    let mut r = ThreadResult {
        all: Vec::with_capacity(ops.len()),
        reads: Vec::new(),
        writes: Vec::new(),
        per_server: vec![0; n_servers],
        timeline: Vec::new(),
        fine: Vec::new(),
        errors: 0,
        retries: 0,
        misses: 0,
        mismatches: 0,
    };
    let value_len = cfg.workload.value_len;
    let rc = cfg.workload.record_count;
    let interval = cfg
        .target_rate
        .map(|r| Duration::from_secs_f64(cfg.threads as f64 / r));
    let mut scheduled = 0u64;
    let period = cfg.dynamic.map(|d| Duration::from_secs_f64(d.period_s));
    let mut current_period = 0u64;
    let mut remap: std::collections::HashMap<i64, i64> = std::collections::HashMap::new();
    for op in ops {
        let mut op = *op;
        if let (Some(shift), Some(period)) = (shift, period) {
            let p = (start.elapsed().as_secs_f64() / period.as_secs_f64()) as u64;
            if p != current_period {
                current_period = p;
                remap = shift.mapping(p);
            }
            if op.kind != OpKind::Insert {
                if let Some(&k) = remap.get(&op.keynum) {
                    op.keynum = k;
                    op.key = key_of(k);
                }
            }
        }
        if op.kind != OpKind::Insert {
            wait_inserted(inserted, rc, op.keynum);
        }
        let server = cfg.router.server_index(&op.key);
        let t0 = match interval {
            Some(iv) => {
                let due = start + iv.mul_f64(scheduled as f64);
                scheduled += 1;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                due
            }
            None => Instant::now(),
        };
        let ok = match op.kind {
            OpKind::Read => {
                r.per_server[server] += 1;
                match c.get(op.key) {
                    Ok(g) => {
                        r.misses += u64::from(g.value.is_none());
                        r.mismatches += u64::from(!plausible(&g, op.keynum, value_len, version));
                        true
                    }
                    Err(_) => false,
                }
            }
            OpKind::Update | OpKind::Insert => {
                r.per_server[server] += 1;
                let ok = put(&mut c, op.key, value_for(op.keynum, value_len, version));
                if ok && op.kind == OpKind::Insert {
                    let slot = usize::try_from(op.keynum - rc).ok();
                    if let Some(f) = slot.and_then(|i| inserted.get(i)) {
                        f.store(true, Ordering::Release);
                    }
                }
                ok
            }
            OpKind::ReadModifyWrite => {
                r.per_server[server] += 2;
                let read = c.get(op.key);
                if let Ok(g) = &read {
                    r.misses += u64::from(g.value.is_none());
                    r.mismatches += u64::from(!plausible(g, op.keynum, value_len, version));
                }
                read.is_ok() && put(&mut c, op.key, value_for(op.keynum, value_len, version))
            }
        };
        let done = Instant::now();
        if !ok {
            r.errors += 1;
            continue;
        }
        let us = u32::try_from(done.duration_since(t0).as_micros()).unwrap_or(u32::MAX);
        r.all.push(us);
        if op.kind == OpKind::Read {
            r.reads.push(us);
        } else {
            r.writes.push(us);
        }
        let sec = done.duration_since(start).as_secs() as usize;
        if r.timeline.len() <= sec {
            r.timeline.resize(sec + 1, 0);
        }
        r.timeline[sec] += 1;
        let tenth = (done.duration_since(start).as_millis() / 100) as usize;
        if r.fine.len() <= tenth {
            r.fine.resize(tenth + 1, 0);
        }
        r.fine[tenth] += 1;
    }
    r.retries = c.retried;
    Ok(r)
}

/// Runs the workload's run phase (the records must already be loaded).
pub fn run(cfg: &BenchConfig) -> Result<BenchReport, BenchError> {
    check(cfg)?;
    let ops = generate_with_ack_lag(&cfg.workload, cfg.seed, 2 * cfg.threads)?;
    run_ops(cfg, ops)
}

/// Runs a given, already generated operation stream (e.g. a filtered one, as server rotation
/// uses) with `cfg`'s clients and router; see [`run`].
pub fn run_ops(cfg: &BenchConfig, ops: Vec<KvOp>) -> Result<BenchReport, BenchError> {
    check(cfg)?;
    let total = ops.len() as u64;
    let rc = cfg.workload.record_count;
    // One flag per inserted key number (a filtered stream may skip some).
    let inserts = ops
        .iter()
        .filter(|o| o.kind == OpKind::Insert)
        .map(|o| usize::try_from(o.keynum - rc + 1).unwrap_or(0))
        .max()
        .unwrap_or(0);
    let inserted: Vec<AtomicBool> = (0..inserts).map(|_| AtomicBool::new(false)).collect();
    let inserted = &inserted;
    let shift = match &cfg.dynamic {
        Some(d) => Some(PopularityShift::new(
            d.pattern,
            &cfg.workload,
            d.keys,
            cfg.seed,
        )?),
        None => None,
    };
    let shift = shift.as_ref();
    let per_thread = deal(ops, cfg.threads);
    let version = cfg.seed.wrapping_add(1);
    let preserver = cfg
        .preserve
        .as_ref()
        .map(|p| crate::history::Preserver::start(Some(p.clone())));
    let keep = preserver.as_ref();
    let start = Instant::now();
    let results = std::thread::scope(|s| {
        let handles: Vec<_> = per_thread
            .iter()
            .map(|ops| s.spawn(move || run_thread(cfg, ops, start, version, inserted, shift, keep)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ClientError::Io(std::io::Error::other(
                        "client thread panicked",
                    )))
                })
            })
            .collect::<Result<Vec<_>, _>>()
    })?;
    let seconds = start.elapsed().as_secs_f64();
    if let Some(p) = &preserver {
        p.finish();
    }
    let n_servers = cfg.router.servers().len();
    let (mut all, mut reads, mut writes) = (Vec::new(), Vec::new(), Vec::new());
    let mut per_server = vec![0u64; n_servers];
    let mut timeline: Vec<u64> = Vec::new();
    let mut fine: Vec<u64> = Vec::new();
    let (mut errors, mut retries, mut misses, mut mismatches) = (0, 0, 0, 0);
    for r in results {
        all.extend(r.all);
        reads.extend(r.reads);
        writes.extend(r.writes);
        for (a, b) in per_server.iter_mut().zip(&r.per_server) {
            *a += b;
        }
        if timeline.len() < r.timeline.len() {
            timeline.resize(r.timeline.len(), 0);
        }
        for (a, b) in timeline.iter_mut().zip(&r.timeline) {
            *a += b;
        }
        if fine.len() < r.fine.len() {
            fine.resize(r.fine.len(), 0);
        }
        for (a, b) in fine.iter_mut().zip(&r.fine) {
            *a += b;
        }
        errors += r.errors;
        retries += r.retries;
        misses += r.misses;
        mismatches += r.mismatches;
    }
    let sum: u64 = per_server.iter().sum();
    let mean = sum as f64 / n_servers as f64;
    let imbalance = if sum == 0 {
        1.0
    } else {
        per_server.iter().copied().max().unwrap_or(0) as f64 / mean
    };
    let latency = Latency::from_samples(&mut all);
    let latency_cdf = cdf(&all);
    Ok(BenchReport {
        workload: cfg.workload.name.clone(),
        target_rate: cfg.target_rate,
        dynamic: cfg.dynamic,
        distribution: format!("{:?}", cfg.workload.distribution),
        records: cfg.workload.record_count,
        operations: total,
        threads: cfg.threads,
        value_len: cfg.workload.value_len,
        servers: n_servers,
        seconds,
        throughput: (total - errors) as f64 / seconds.max(1e-9),
        latency,
        read_latency: Latency::from_samples(&mut reads),
        write_latency: Latency::from_samples(&mut writes),
        timeline,
        timeline_100ms: fine,
        per_server: per_server
            .iter()
            .zip(cfg.router.servers())
            .map(|(&n, a)| ServerLoad {
                server: a.to_string(),
                requests: n,
                share: if sum == 0 { 0.0 } else { n as f64 / sum as f64 },
            })
            .collect(),
        imbalance,
        errors,
        retries,
        misses,
        mismatches,
        latency_cdf,
        load: None,
    })
}

/// `(quantile, value)` points of sorted samples (nearest rank): 1%..99%, 99.5%, 99.9%, 99.99%,
/// 100%. Empty for no samples.
pub fn cdf(sorted: &[u32]) -> Vec<(f64, u64)> {
    if sorted.is_empty() {
        return Vec::new();
    }
    let n = sorted.len();
    let qs = (1..100)
        .map(|i| f64::from(i) / 100.0)
        .chain([0.995, 0.999, 0.9999, 1.0]);
    qs.map(|q| {
        let i = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        (q, u64::from(sorted[i]))
    })
    .collect()
}

/// Starts `n` storage servers in this process on free loopback ports, each with its own
/// directory `dir/server<i>`, `partitions` partitions and `workers` workers.
pub fn start_local_servers(
    dir: &Path,
    n: usize,
    partitions: usize,
    workers: usize,
    store: &StoreOptions,
) -> Result<Vec<ServerHandle>, BenchError> {
    if n == 0 || n > 128 {
        return Err(BenchError::Config(format!(
            "local server count {n} must be between 1 and 128"
        )));
    }
    (0..n)
        .map(|i| {
            let mut c = ServerConfig::new(dir.join(format!("server{i}")), 0);
            c.partitions = partitions;
            c.workers = workers;
            c.index = i as u16;
            c.store = store.clone();
            Ok(start(&c)?)
        })
        .collect()
}

/// The addresses of started servers.
pub fn addrs(servers: &[ServerHandle]) -> Vec<SocketAddr> {
    servers.iter().map(ServerHandle::addr).collect()
}
