//! `tern kv experiment exp1` … `exp10` and `all`: FarReach's evaluation (USENIX ATC'23 §5;
//! every parameter and reported number in `../shared/reference/kv-caching.md` §3.11) regenerated
//! on tern. Each experiment runs NoCache, NetCache and FarReach through the same machinery: two
//! in-process RocksDB servers (each holding every record), the in-process switch of
//! `tern kv up --mode sim` running the method's real program (`p4/kv/forward.p4`,
//! `netcache.p4`, `farreach.p4`) in front of them, and, for the caches, the switch OS
//! (`tern_kv::switchos`) driving it through tern's runtime interface.
//!
//! Method (as the paper and its artefact): every run starts a fresh switch and switch OS; the
//! caches are pre-loaded with the hottest keys of the pre-generated request stream (WARMUPREQ
//! through the switch, as FarReach's `warmup_client`, then one GET per key so FarReach's slots
//! hold the latest value) and, in the static experiments, runtime admission is off (hot
//! threshold out of reach), as the artefact's `workload_mode = 0`. Static experiments use
//! server rotation (`tern_kv::rotation`): the stream is split into N logical partitions by
//! crc32; the bottleneck partition (most requests in the raw stream, the same for every
//! method, as the artefact's fixed `bottleneck_serveridx`) always runs on physical server 0
//! and each other partition in turn on server 1, with only those two partitions' requests
//! sent. With a cache in front, the switch answers the cached keys of both partitions itself,
//! so each logical server's rate is the rate of its partition's requests as the client sees
//! them (switch-answered ones included) and the server only sees what the switch lets through;
//! rates are rescaled to the mean bottleneck rate and summed. Dynamic experiments (exp7, exp8)
//! run on the two physical servers without rotation and with runtime admission on.
//! Every point is repeated (`--repeat`) with the same request stream; mean and 95 % confidence
//! interval (Student's t) are reported. Outputs per experiment: `expN.json` (raw samples),
//! `expN.png` (the paper's figure form, by `scripts/kv-plot.py`) and `expN.md` (paper's number,
//! ours, ratio).

use super::cmd_kv::{plot, say, write_json};
use super::cmd_kv_exp::ExperimentArgs;
use super::kv_sim::{server_ip, SimAccess, SimSwitch, CLIENT_IP};
use anyhow::{bail, Context};
use serde::Serialize;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tern_kv::bench::{self, BenchConfig, DynamicConfig};
use tern_kv::client::Client;
use tern_kv::protocol::Key;
use tern_kv::router::Router;
use tern_kv::server::ServerHandle;
use tern_kv::switchos::{CacheKind, SwitchOs, SwitchOsConfig};
use tern_kv::ycsb::{Distribution, Dynamic, KvOp, OpKind, WorkloadSpec};
use tern_runtime::PacketPath;

/// The experiments, in order.
pub const EXPERIMENTS: [&str; 10] = [
    "exp1", "exp2", "exp3", "exp4", "exp5", "exp6", "exp7", "exp8", "exp9", "exp10",
];

/// A compared method.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Method {
    /// No cache: `p4/kv/forward.p4`.
    NoCache,
    /// Write-through cache: `p4/kv/netcache.p4`.
    NetCache,
    /// Write-back cache: `p4/kv/farreach.p4`.
    FarReach,
}

impl Method {
    const ALL: [Method; 3] = [Method::NoCache, Method::NetCache, Method::FarReach];

    fn name(self) -> &'static str {
        match self {
            Method::NoCache => "nocache",
            Method::NetCache => "netcache",
            Method::FarReach => "farreach",
        }
    }

    fn kind(self) -> Option<CacheKind> {
        match self {
            Method::NoCache => None,
            Method::NetCache => Some(CacheKind::NetCache),
            Method::FarReach => Some(CacheKind::FarReach),
        }
    }

    fn source(self) -> (&'static str, &'static str) {
        use super::cmd_kv_up::{FARREACH_P4, FORWARD_P4, NETCACHE_P4};
        match self {
            Method::NoCache => (FORWARD_P4, "p4/kv/forward.p4"),
            Method::NetCache => (NETCACHE_P4, "p4/kv/netcache.p4"),
            Method::FarReach => (FARREACH_P4, "p4/kv/farreach.p4"),
        }
    }

    fn parse(s: &str) -> anyhow::Result<Method> {
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .with_context(|| format!("method {s:?}: expected nocache, netcache or farreach"))
    }
}

/// The sizes of a run (stated in every report).
#[derive(Clone, Debug, Serialize)]
pub struct Scale {
    /// `--quick`: test sizes.
    pub quick: bool,
    /// Records loaded into each physical server.
    pub records: i64,
    /// Operations per request stream (static experiments).
    pub ops: i64,
    /// Client threads.
    pub threads: usize,
    /// Worker threads per server.
    pub workers: usize,
    /// Emulated servers (rotation) of the static experiments (paper: 16).
    pub servers: usize,
    /// Emulated server counts of exp3 (paper: 16, 32, 64, 128).
    pub scale: Vec<usize>,
    /// Cache size in records (paper: 10,000).
    pub cache: u32,
    /// Repetitions of every point (paper: 5).
    pub repeat: usize,
    /// Operations of a dynamic run (exp7, exp8).
    pub dyn_ops: i64,
    /// Popularity change period of exp7 in seconds (paper: 10 over 70 s runs).
    pub dyn_period: f64,
    /// Snapshot periods of exp8 in seconds (0: none; paper: 0, 2.5, 5, 7.5, 10).
    pub snapshot_periods: Vec<f64>,
    /// Cache sizes of exp9 (paper: 100, 1,000, 10,000).
    pub recovery_sizes: Vec<u32>,
    /// exp2 target rates as fractions of NoCache's closed-loop throughput.
    pub rates: Vec<f64>,
    /// exp10: packets of the resident-set probe and of the callgrind run.
    pub probe_packets: (u64, u64),
}

impl Scale {
    /// The sizes from the command line: `--quick` or the recorded defaults, each overridable.
    pub fn from_args(a: &ExperimentArgs) -> anyhow::Result<Scale> {
        let q = a.quick;
        let s = Scale {
            quick: q,
            records: a.records.unwrap_or(if q { 1_000 } else { 100_000 }),
            ops: a.ops.unwrap_or(if q { 1_000 } else { 100_000 }),
            threads: a.threads.unwrap_or(if q { 2 } else { 4 }),
            workers: a.workers,
            servers: a.rotation.unwrap_or(if q { 4 } else { 16 }),
            scale: a
                .scale
                .clone()
                .unwrap_or(if q { vec![4, 8] } else { vec![16, 32, 64, 128] }),
            cache: a.cache_size.unwrap_or(if q { 50 } else { 10_000 }),
            // `all` with 3 repetitions is ≈ 1.6 h in a release build (docs/kv-experiments.md,
            // "Duration"); one repetition keeps the suite under the hour.
            repeat: a.repeat.unwrap_or(match (q, a.suite == "all") {
                (true, _) => 2,
                (false, true) => 1,
                (false, false) => 3,
            }),
            dyn_ops: a.dyn_ops.unwrap_or(if q { 1_500 } else { 300_000 }),
            dyn_period: a.dynamic_period.unwrap_or(if q { 0.25 } else { 2.0 }),
            snapshot_periods: if q {
                vec![0.0, 0.1, 0.2]
            } else {
                vec![0.0, 2.5, 5.0, 7.5, 10.0]
            },
            recovery_sizes: if q {
                vec![10, 50]
            } else {
                vec![100, 1_000, 10_000]
            },
            rates: if q {
                vec![0.5, 1.0]
            } else {
                vec![0.25, 0.5, 0.75, 1.0]
            },
            probe_packets: if q { (100, 200) } else { (1_000, 10_000) },
        };
        if s.records < 10 || s.ops < 10 || s.dyn_ops < 10 {
            bail!("--records, --ops and --dyn-ops must be at least 10");
        }
        if s.threads == 0 || s.repeat == 0 {
            bail!("--threads and --repeat must be positive");
        }
        if !(2..=1024).contains(&s.servers) || s.scale.iter().any(|n| !(2..=1024).contains(n)) {
            bail!("--rotation and --scale: between 2 and 1024 emulated servers");
        }
        if s.cache == 0 || s.cache > 10_000 || s.recovery_sizes.iter().any(|&c| c > 10_000) {
            bail!(
                "--cache-size {}: between 1 and 10000 (the programs' KV_RECORDS)",
                s.cache
            );
        }
        if s.dyn_period.is_nan() || s.dyn_period <= 0.0 {
            bail!("--dynamic-period must be positive");
        }
        Ok(s)
    }
}

/// Mean and half-width of the 95 % confidence interval (Student's t, n − 1 degrees of
/// freedom); the half-width is 0 for a single sample.
pub fn mean_ci95(samples: &[f64]) -> (f64, f64) {
    const T: [f64; 30] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042,
    ];
    let n = samples.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    let mean = samples.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return (mean, 0.0);
    }
    let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let t = T.get(n - 2).copied().unwrap_or(1.960);
    (mean, t * (var / n as f64).sqrt())
}

/// One measured point: a method at one x value, every repetition.
#[derive(Clone, Debug, Serialize)]
pub struct Point {
    /// The x value (workload, server count, write ratio, …).
    pub x: String,
    /// The method.
    pub method: String,
    /// The metric's samples, one per repetition.
    pub samples: Vec<f64>,
    /// Their mean.
    pub mean: f64,
    /// Half-width of the 95 % confidence interval.
    pub ci95: f64,
    /// Fraction of requests the switch answered (hits + absorbed writes), per repetition.
    pub switch_share: Vec<f64>,
    /// Other per-repetition figures (phases, bandwidth, timelines, …).
    pub extra: serde_json::Value,
}

/// One line of the comparison with the paper.
#[derive(Clone, Debug, Serialize)]
pub struct Compare {
    /// What is compared.
    pub what: String,
    /// The paper's figure (as the paper states it).
    pub paper: String,
    /// The paper's figure as a number, when it is one.
    pub paper_value: Option<f64>,
    /// Ours.
    pub ours: f64,
    /// Ours / paper's.
    pub ratio: Option<f64>,
}

/// An experiment's report (the JSON file; the plot script reads `plot`).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// `kv-paper-experiment`.
    pub kind: &'static str,
    /// `exp1` …
    pub experiment: String,
    /// Title.
    pub title: String,
    /// The paper's figure or table.
    pub figure: String,
    /// Plot form: `bars`, `lines`, `timeline`, `stacked` or `table`.
    pub plot: String,
    /// x axis label.
    pub x_label: String,
    /// The metric (y axis label).
    pub metric: String,
    /// Sizes.
    pub scale: Scale,
    /// How it was measured.
    pub method_note: String,
    /// Machine, date, command.
    pub machine: String,
    /// Date (UTC).
    pub date: String,
    /// Command line.
    pub command: String,
    /// Warning for runs that are not results.
    pub note: String,
    /// Points.
    pub points: Vec<Point>,
    /// The comparison with the paper.
    pub compare: Vec<Compare>,
    /// Seconds the experiment took.
    pub seconds: f64,
}

/// Two servers, each with every record.
struct Store {
    dir: PathBuf,
    handles: Vec<ServerHandle>,
    addrs: Vec<SocketAddr>,
}

impl Drop for Store {
    fn drop(&mut self) {
        for h in self.handles.drain(..) {
            if let Err(e) = h.shutdown() {
                eprintln!("tern kv experiment: stopping a server: {e}");
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A method's switch (and switch OS) in front of a [`Store`].
struct Bed {
    sim: SimSwitch,
    os: Option<SwitchOs<SimAccess>>,
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Some(mut os) = self.os.take() {
            os.stop();
        }
        self.sim.stop();
    }
}

/// What a bed starts with.
struct BedCfg {
    cache: u32,
    /// Runtime admission of hot keys (dynamic experiments).
    admission: bool,
    snapshot: Option<Duration>,
    /// Keys to pre-load, with the physical server (0 or 1) their requests go to.
    hot: Vec<(Key, usize)>,
}

/// Counters of the data plane (`kv_ops`) — see `p4/kv/*.p4`.
#[derive(Clone, Copy, Default)]
struct Ops([u64; 11]);

impl Ops {
    fn since(self, before: Ops) -> Ops {
        let mut o = Ops::default();
        for i in 0..11 {
            o.0[i] = self.0[i].saturating_sub(before.0[i]);
        }
        o
    }
    /// GETs answered by the switch plus writes it absorbed (FarReach).
    fn switch_answered(self, m: Method) -> u64 {
        self.0[0] + if m == Method::FarReach { self.0[4] } else { 0 }
    }
    /// Requests that reached the cache logic.
    fn requests(self) -> u64 {
        self.0[..6].iter().sum()
    }
}

/// The state shared by all experiments of one command.
struct Ctx {
    scale: Scale,
    out: PathBuf,
    data: PathBuf,
    no_plot: bool,
    machine: String,
    date: String,
    command: String,
    programs: HashMap<&'static str, String>,
    methods: Vec<Method>,
}

impl Ctx {
    fn program(&mut self, m: Method) -> anyhow::Result<String> {
        let (src, name) = m.source();
        if let Some(j) = self.programs.get(name) {
            return Ok(j.clone());
        }
        let json = tern_p4::compile_str(src, name, &Default::default())
            .map_err(|d| anyhow::anyhow!("compiling {name}: {d}"))?
            .json;
        self.programs.insert(name, json.clone());
        Ok(json)
    }

    fn spec(&self, name: &str, value_len: usize) -> anyhow::Result<WorkloadSpec> {
        let mut w = WorkloadSpec::core(name, self.scale.records, self.scale.ops)?;
        w.name = name.to_string();
        w.value_len = value_len;
        Ok(w)
    }

    fn cfg(&self, router: Router, w: WorkloadSpec) -> BenchConfig {
        BenchConfig {
            router,
            workload: w,
            threads: self.scale.threads,
            seed: 1,
            timeout: Duration::from_millis(500),
            retries: 5,
            target_rate: None,
            dynamic: None,
            preserve: None,
        }
    }

    /// Two fresh servers, each loaded with every record (values of `value_len` bytes).
    fn store(&self, value_len: usize) -> anyhow::Result<Store> {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let dir = self
            .data
            .join(format!("store{}", N.fetch_add(1, Ordering::Relaxed)));
        let handles = bench::start_local_servers(
            &dir,
            2,
            1,
            self.scale.workers,
            &tern_kv::storage::StoreOptions::default(),
        )?;
        let addrs = bench::addrs(&handles);
        let store = Store {
            dir,
            handles,
            addrs,
        };
        for a in &store.addrs {
            let c = self.cfg(Router::new(vec![*a])?, self.spec("a", value_len)?);
            let l = bench::load(&c)?;
            if l.errors > 0 {
                bail!("{} records failed to load into {a}", l.errors);
            }
        }
        Ok(store)
    }

    /// Starts method `m`'s switch (and switch OS) in front of `store` and pre-loads the cache.
    fn bed(&mut self, m: Method, store: &Store, b: &BedCfg) -> anyhow::Result<Bed> {
        let json = self.program(m)?;
        let mut entries = format!("table_add forward to_port {} => 1\n", u32::from(CLIENT_IP));
        for k in 0..store.addrs.len() {
            entries += &format!(
                "table_add forward to_port {} => {}\n",
                u32::from(server_ip(k)),
                k + 2
            );
        }
        let sim = SimSwitch::start(&json, &entries, &store.addrs)?;
        let Some(kind) = m.kind() else {
            return Ok(Bed { sim, os: None });
        };
        let mut c = SwitchOsConfig::new(kind, store.addrs.clone());
        c.capacity = b.cache.max(1);
        if !b.admission {
            c.hot_threshold = u16::MAX;
        }
        c.snapshot_period = if kind == CacheKind::FarReach {
            b.snapshot
        } else {
            None
        };
        let os = SwitchOs::start(sim.access(), c).context("starting the switch OS")?;
        for h in &store.handles {
            h.cache_ctl().set_switchos(Some(os.addr()));
        }
        let bed = Bed { sim, os: Some(os) };
        bed.warm(&b.hot)?;
        Ok(bed)
    }
}

impl Bed {
    fn os(&self) -> Option<&SwitchOs<SimAccess>> {
        self.os.as_ref()
    }

    /// Pre-loads `hot` (as FarReach's warm-up client) and waits until all are cached.
    fn warm(&self, hot: &[(Key, usize)]) -> anyhow::Result<()> {
        let Some(os) = self.os() else { return Ok(()) };
        if hot.is_empty() {
            return Ok(());
        }
        let fronts = self.sim.fronts();
        let mut clients = Vec::new();
        for f in &fronts {
            clients.push(Client::new(
                Router::new(vec![*f])?,
                Duration::from_millis(500),
                10,
            )?);
        }
        for (k, s) in hot {
            clients[*s].warmup(*k).context("warm-up request")?;
        }
        let want = hot.len();
        let deadline = Instant::now() + Duration::from_secs(60 + hot.len() as u64 / 100);
        while os.cached_count() < want {
            if Instant::now() > deadline {
                bail!(
                    "warm-up: {} of {} keys cached after the deadline",
                    os.cached_count(),
                    want
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // The first read of an admitted key fetches its value (FarReach: latest = 0).
        for (k, s) in hot {
            clients[*s].get(*k).context("warm-up read")?;
        }
        Ok(())
    }

    fn ops(&self) -> Ops {
        let mut o = Ops::default();
        if let Some(os) = self.os() {
            let _ = os.with_switch(&mut |rt| {
                for (i, v) in o.0.iter_mut().enumerate() {
                    *v = rt.counter_read("KvIngress.kv_ops", i as u32)?.packets;
                }
                Ok(())
            });
        }
        o
    }
}

/// Requests an operation sends (a read-modify-write sends two).
fn weight(op: &KvOp) -> u64 {
    if op.kind == OpKind::ReadModifyWrite {
        2
    } else {
        1
    }
}

/// The hottest `n` keys of `ops` (by requests), each with the physical server its requests go
/// to under rotation over `logical` partitions (`None`: the two physical servers directly).
fn hottest(ops: &[KvOp], n: usize, logical: Option<usize>) -> anyhow::Result<Vec<(Key, usize)>> {
    let mut count: HashMap<Key, u64> = HashMap::new();
    for o in ops {
        if o.kind != OpKind::Insert {
            *count.entry(o.key).or_default() += weight(o);
        }
    }
    let dummy = SocketAddr::from(([127, 0, 0, 1], 9));
    let shape = Router::new(vec![dummy; logical.unwrap_or(2)])?;
    let place: Box<dyn Fn(&Key) -> usize> = match logical {
        Some(l) => {
            let mut req = vec![0u64; l];
            for o in ops {
                req[shape.server_index(&o.key)] += weight(o);
            }
            // As tern_kv::rotation: the partition with the most requests (the last on a tie).
            let b = (0..l).max_by_key(|&i| req[i]).unwrap_or(0);
            Box::new(move |k: &Key| usize::from(shape.server_index(k) != b))
        }
        None => Box::new(move |k: &Key| shape.server_index(k)),
    };
    let mut keys: Vec<(Key, u64)> = count.into_iter().collect();
    keys.sort_by(|a, b| b.1.cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
    Ok(keys
        .into_iter()
        .take(n)
        .map(|(k, _)| (k, place(&k)))
        .collect())
}

/// A record to replay: value (`None`: deleted) and seq.
type Record = (Option<Vec<u8>>, u32);

/// What one rotation or direct run gave.
struct Sample {
    value: f64,
    switch_share: f64,
    extra: serde_json::Value,
}

impl Ctx {
    /// One rotation run of `w` over `logical` servers for method `m` (fresh bed).
    fn rotation(
        &mut self,
        m: Method,
        store: &Store,
        w: &WorkloadSpec,
        logical: usize,
    ) -> anyhow::Result<Sample> {
        let ops = tern_kv::ycsb::generate_with_ack_lag(w, 1, 2 * self.scale.threads)?;
        let hot = if m.kind().is_some() {
            hottest(&ops, self.scale.cache as usize, Some(logical))?
        } else {
            Vec::new()
        };
        drop(ops);
        let bed = self.bed(
            m,
            store,
            &BedCfg {
                cache: self.scale.cache,
                admission: false,
                snapshot: None,
                hot,
            },
        )?;
        let fronts = bed.sim.fronts();
        let before = bed.ops();
        let cfg = self.cfg(Router::new(fronts.clone())?, w.clone());
        let r = tern_kv::rotation::run(&cfg, logical, [fronts[0], fronts[1]])?;
        let d = bed.ops().since(before);
        if r.errors > 0 || r.mismatches > 0 {
            bail!(
                "{} on {}: {} errors, {} value mismatches",
                m.name(),
                w.name,
                r.errors,
                r.mismatches
            );
        }
        let share = if d.requests() == 0 {
            0.0
        } else {
            d.switch_answered(m) as f64 / d.requests() as f64
        };
        Ok(Sample {
            value: r.aggregate_rate,
            switch_share: share,
            extra: serde_json::json!({
                "bottleneck": r.bottleneck,
                "bottleneck_rate": r.bottleneck_rate,
                "normalized": r.normalized,
                "imbalance": r.imbalance,
                "per_server_rate": r.per_server_rate,
                "kv_ops": d.0.to_vec(),
            }),
        })
    }

    /// Repeats `f` and makes a point of the samples.
    fn point(
        &mut self,
        exp: &str,
        x: &str,
        m: Method,
        mut f: impl FnMut(&mut Ctx) -> anyhow::Result<Sample>,
    ) -> anyhow::Result<Point> {
        let mut samples = Vec::new();
        let mut shares = Vec::new();
        let mut extra = Vec::new();
        for i in 0..self.scale.repeat {
            let t0 = Instant::now();
            let s = f(self)?;
            say(&format!(
                "[{exp}] {x} {}: run {}/{}: {:.1} (switch answered {:.1} %) in {:.1} s",
                m.name(),
                i + 1,
                self.scale.repeat,
                s.value,
                s.switch_share * 100.0,
                t0.elapsed().as_secs_f64()
            ));
            samples.push(s.value);
            shares.push(s.switch_share);
            extra.push(s.extra);
        }
        let (mean, ci95) = mean_ci95(&samples);
        Ok(Point {
            x: x.to_string(),
            method: m.name().into(),
            samples,
            mean,
            ci95,
            switch_share: shares,
            extra: serde_json::Value::Array(extra),
        })
    }
}

fn find<'a>(points: &'a [Point], x: &str, m: Method) -> Option<&'a Point> {
    points.iter().find(|p| p.x == x && p.method == m.name())
}

/// `ours = a / b` of the means at `x`, compared with the paper's `paper` (a factor).
fn gain(
    points: &[Point],
    x: &str,
    a: Method,
    b: Method,
    paper: &str,
    pv: Option<f64>,
) -> Option<Compare> {
    let (pa, pb) = (find(points, x, a)?, find(points, x, b)?);
    if pb.mean <= 0.0 {
        return None;
    }
    let ours = pa.mean / pb.mean;
    Some(Compare {
        what: format!("{x}: {} / {} throughput", a.name(), b.name()),
        paper: paper.into(),
        paper_value: pv,
        ours,
        ratio: pv.map(|p| ours / p),
    })
}

/// Runs `tern kv experiment exp1..exp10|all` (not `nocache`).
pub fn run(a: &ExperimentArgs) -> anyhow::Result<()> {
    let names: Vec<&str> = if a.suite == "all" {
        EXPERIMENTS.to_vec()
    } else if let Some(n) = EXPERIMENTS.iter().find(|n| **n == a.suite) {
        vec![*n]
    } else {
        bail!(
            "experiment {:?}: expected nocache, all or one of {}",
            a.suite,
            EXPERIMENTS.join(", ")
        );
    };
    let scale = Scale::from_args(a)?;
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    if !a.no_plot {
        super::cmd_kv::plot_script()?;
    }
    let methods = match &a.methods {
        Some(ms) => ms
            .iter()
            .map(|m| Method::parse(m))
            .collect::<anyhow::Result<_>>()?,
        None => Method::ALL.to_vec(),
    };
    let data = std::env::temp_dir().join(format!("tern-kv-paper-{}", std::process::id()));
    let mut ctx = Ctx {
        scale,
        out: a.out.clone(),
        data: data.clone(),
        no_plot: a.no_plot,
        machine: super::cmd_kv_exp::machine(),
        date: super::cmd_kv_exp::now_utc(),
        command: std::env::args().collect::<Vec<_>>().join(" "),
        programs: HashMap::new(),
        methods,
    };
    let result = (|| {
        let mut done = Vec::new();
        for n in &names {
            say(&format!("== {n}"));
            let r = ctx.experiment(n)?;
            done.push(r);
        }
        if names.len() > 1 {
            let p = ctx.out.join("summary.md");
            std::fs::write(&p, summary_md(&done)).context("writing summary.md")?;
            say(&format!(
                "tern kv experiment all: summary in {}",
                p.display()
            ));
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir_all(&data);
    result
}

impl Ctx {
    fn note(&self) -> String {
        if self.scale.quick || cfg!(debug_assertions) {
            "quick or debug build: a check that the experiment runs, not a result".into()
        } else {
            format!("release build; {}", self.machine)
        }
    }

    fn experiment(&mut self, name: &str) -> anyhow::Result<Report> {
        let t0 = Instant::now();
        let mut r = match name {
            "exp1" => self.exp1()?,
            "exp2" => self.exp2()?,
            "exp3" => self.exp3()?,
            "exp4" => self.exp4()?,
            "exp5" => self.exp5()?,
            "exp6" => self.exp6()?,
            "exp7" => self.exp7()?,
            "exp8" => self.exp8()?,
            "exp9" => self.exp9()?,
            "exp10" => self.exp10()?,
            other => bail!("no experiment {other}"),
        };
        r.seconds = t0.elapsed().as_secs_f64();
        let json = self.out.join(format!("{name}.json"));
        write_json(&json, &r)?;
        std::fs::write(self.out.join(format!("{name}.md")), report_md(&r))
            .with_context(|| format!("writing {name}.md"))?;
        if !self.no_plot {
            plot(&[json.as_path()], &self.out.join(format!("{name}.png")))?;
        }
        say(&format!(
            "[{name}] done in {:.0} s: {}",
            r.seconds,
            r.compare
                .iter()
                .map(|c| format!("{} = {:.2} (paper {})", c.what, c.ours, c.paper))
                .collect::<Vec<_>>()
                .join("; ")
        ));
        Ok(r)
    }

    #[allow(clippy::too_many_arguments)]
    fn report(
        &self,
        exp: &str,
        title: &str,
        figure: &str,
        plot: &str,
        x_label: &str,
        metric: &str,
        method_note: &str,
        points: Vec<Point>,
        compare: Vec<Compare>,
    ) -> Report {
        Report {
            kind: "kv-paper-experiment",
            experiment: exp.into(),
            title: title.into(),
            figure: figure.into(),
            plot: plot.into(),
            x_label: x_label.into(),
            metric: metric.into(),
            scale: self.scale.clone(),
            method_note: method_note.into(),
            machine: self.machine.clone(),
            date: self.date.clone(),
            command: self.command.clone(),
            note: self.note(),
            points,
            compare,
            seconds: 0.0,
        }
    }

    /// Rotation points of `(x label, workload)` for every method, on one store per value size.
    fn rotation_points(
        &mut self,
        exp: &str,
        cases: &[(String, WorkloadSpec)],
        logical: usize,
    ) -> anyhow::Result<Vec<Point>> {
        let mut points = Vec::new();
        let mut stores: HashMap<usize, Store> = HashMap::new();
        for (x, w) in cases {
            if !stores.contains_key(&w.value_len) {
                stores.clear();
                stores.insert(w.value_len, self.store(w.value_len)?);
            }
            let store = &stores[&w.value_len];
            for m in self.methods.clone() {
                let p = self.point(exp, x, m, |c| c.rotation(m, store, w, logical))?;
                points.push(p);
            }
        }
        Ok(points)
    }

    fn exp1(&mut self) -> anyhow::Result<Report> {
        let mut cases = Vec::new();
        for n in ["load", "a", "b", "c", "d", "f"] {
            cases.push((n.to_uppercase(), self.spec(n, 128)?));
        }
        cases[0].0 = "Load".into();
        let points = self.rotation_points("exp1", &cases, self.scale.servers)?;
        let (f, n, c) = (Method::FarReach, Method::NoCache, Method::NetCache);
        let mut cmp = Vec::new();
        for (x, pn, pc) in [
            ("A", 1.91, Some(1.84)),
            ("B", 1.55, Some(1.20)),
            ("C", 1.85, None),
            ("F", 1.72, Some(1.61)),
        ] {
            cmp.extend(gain(&points, x, f, n, &format!("{pn:.2}×"), Some(pn)));
            match pc {
                Some(v) => cmp.extend(gain(&points, x, f, c, &format!("{v:.2}×"), Some(v))),
                None => cmp.extend(gain(&points, x, f, c, "≈ 1 (similar)", Some(1.0))),
            }
        }
        for x in ["Load", "D"] {
            cmp.extend(gain(&points, x, f, n, "≈ 1 (similar)", Some(1.0)));
        }
        Ok(self.report(
            "exp1",
            "Throughput under YCSB workloads",
            "Figure 7",
            "bars",
            "workload",
            "aggregate throughput (requests/s, rotation)",
            &format!(
                "server rotation over {} emulated servers; 16-byte keys, 128-byte values, Zipf 0.99 \
                 (Load uniform, D latest); cache of the {} hottest keys, admission off",
                self.scale.servers, self.scale.cache
            ),
            points,
            cmp,
        ))
    }

    fn exp2(&mut self) -> anyhow::Result<Report> {
        let store = self.store(128)?;
        let w = self.spec("a", 128)?;
        // The peak: NoCache's closed-loop throughput on the two servers.
        let peak = {
            let bed = self.bed(Method::NoCache, &store, &self.no_cache_cfg())?;
            let r = bench::run(&self.cfg(Router::new(bed.sim.fronts())?, w.clone()))?;
            say(&format!(
                "[exp2] NoCache closed loop: {:.0} ops/s",
                r.throughput
            ));
            r.throughput
        };
        let ops = tern_kv::ycsb::generate_with_ack_lag(&w, 1, 2 * self.scale.threads)?;
        let hot = hottest(&ops, self.scale.cache as usize, None)?;
        drop(ops);
        let mut points = Vec::new();
        for f in self.scale.rates.clone() {
            let rate = (peak * f).max(100.0);
            let x = format!("{:.0}", rate);
            for m in self.methods.clone() {
                let hot = hot.clone();
                let p = self.point("exp2", &x, m, |c| {
                    let bed = c.bed(
                        m,
                        &store,
                        &BedCfg {
                            cache: c.scale.cache,
                            admission: false,
                            snapshot: None,
                            hot: if m.kind().is_some() {
                                hot.clone()
                            } else {
                                Vec::new()
                            },
                        },
                    )?;
                    let mut cfg = c.cfg(Router::new(bed.sim.fronts())?, w.clone());
                    cfg.target_rate = Some(rate);
                    cfg.workload.operation_count = ((rate * if c.scale.quick { 0.5 } else { 5.0 })
                        as i64)
                        .clamp(100, c.scale.ops);
                    let before = bed.ops();
                    let r = bench::run(&cfg)?;
                    let d = bed.ops().since(before);
                    if r.errors > 0 || r.mismatches > 0 {
                        bail!(
                            "{}: {} errors, {} mismatches",
                            m.name(),
                            r.errors,
                            r.mismatches
                        );
                    }
                    Ok(Sample {
                        value: r.latency.mean_us,
                        switch_share: if d.requests() == 0 {
                            0.0
                        } else {
                            d.switch_answered(m) as f64 / d.requests() as f64
                        },
                        extra: serde_json::json!({
                            "target": rate, "achieved": r.throughput,
                            "p50_us": r.latency.p50_us, "p90_us": r.latency.p90_us,
                            "p99_us": r.latency.p99_us,
                        }),
                    })
                })?;
                points.push(p);
            }
        }
        let mut cmp = Vec::new();
        if let Some(top) = points.last().map(|p| p.x.clone()) {
            for (b, paper) in [(Method::NoCache, 0.65), (Method::NetCache, 0.72)] {
                if let (Some(pf), Some(pb)) = (
                    find(&points, &top, Method::FarReach),
                    find(&points, &top, b),
                ) {
                    if pb.mean > 0.0 {
                        let ours = 1.0 - pf.mean / pb.mean;
                        cmp.push(Compare {
                            what: format!(
                                "farreach's mean-latency reduction vs {} at the top rate",
                                b.name()
                            ),
                            paper: format!("{paper:.2} (−{:.0} % at 0.8 MOPS)", paper * 100.0),
                            paper_value: Some(paper),
                            ours,
                            ratio: Some(ours / paper),
                        });
                    }
                }
            }
        }
        Ok(self.report(
            "exp2",
            "Latency against target throughput (workload A)",
            "Figure 8",
            "lines",
            "target throughput (ops/s)",
            "mean latency (µs)",
            &format!(
                "open loop on the two physical servers (no rotation: open-loop rates do not \
                 rotate), target rates {:?} × NoCache's closed-loop peak ({peak:.0} ops/s); \
                 latency from the scheduled send time",
                self.scale.rates
            ),
            points,
            cmp,
        ))
    }

    fn no_cache_cfg(&self) -> BedCfg {
        BedCfg {
            cache: self.scale.cache,
            admission: false,
            snapshot: None,
            hot: Vec::new(),
        }
    }

    fn exp3(&mut self) -> anyhow::Result<Report> {
        let w = self.spec("a", 128)?;
        let store = self.store(128)?;
        let mut points = Vec::new();
        for n in self.scale.scale.clone() {
            for m in self.methods.clone() {
                let p = self.point("exp3", &n.to_string(), m, |c| c.rotation(m, &store, &w, n))?;
                points.push(p);
            }
        }
        let mut cmp = Vec::new();
        for (n, g) in [(16, 1.9), (32, 2.5), (64, 3.9), (128, 6.6)] {
            cmp.extend(gain(
                &points,
                &n.to_string(),
                Method::FarReach,
                Method::NoCache,
                &format!("{g}×"),
                Some(g),
            ));
        }
        if cmp.is_empty() {
            for n in &self.scale.scale {
                cmp.extend(gain(
                    &points,
                    &n.to_string(),
                    Method::FarReach,
                    Method::NoCache,
                    "1.9–6.6× (16–128 servers)",
                    None,
                ));
            }
        }
        Ok(self.report(
            "exp3",
            "Scalability (workload A)",
            "Figure 9",
            "lines",
            "emulated servers",
            "aggregate throughput (requests/s, rotation)",
            "server rotation over each server count; workload A, Zipf 0.99",
            points,
            cmp,
        ))
    }

    fn synthetic(
        &self,
        write: f64,
        dist: Distribution,
        value_len: usize,
    ) -> anyhow::Result<WorkloadSpec> {
        let mut w = self.spec("write-only", value_len)?;
        w.read = 1.0 - write;
        w.update = write;
        w.distribution = dist;
        Ok(w)
    }

    fn exp4(&mut self) -> anyhow::Result<Report> {
        let mut cases = Vec::new();
        for pct in [0, 25, 50, 75, 100] {
            let mut w = self.synthetic(f64::from(pct) / 100.0, Distribution::Zipfian(0.99), 128)?;
            w.name = format!("write-{pct}");
            cases.push((format!("{pct}%"), w));
        }
        let points = self.rotation_points("exp4", &cases, self.scale.servers)?;
        let mut cmp = Vec::new();
        for (x, _) in &cases {
            cmp.extend(gain(
                &points,
                x,
                Method::FarReach,
                Method::NoCache,
                "1.67–2.35× (0–100 %)",
                None,
            ));
            let pc = if x == "0%" {
                "≈ 1 (similar)"
            } else {
                "1.48–2.86× (25–100 %)"
            };
            cmp.extend(gain(
                &points,
                x,
                Method::FarReach,
                Method::NetCache,
                pc,
                (x == "0%").then_some(1.0),
            ));
        }
        Ok(self.report(
            "exp4",
            "Impact of write ratio (synthetic, Zipf 0.99)",
            "Figure 10",
            "bars",
            "write ratio",
            "aggregate throughput (requests/s, rotation)",
            "server rotation; synthetic reads/updates, Zipf 0.99, 128-byte values",
            points,
            cmp,
        ))
    }

    fn exp5(&mut self) -> anyhow::Result<Report> {
        let mut cases = Vec::new();
        for (x, d) in [
            ("uniform", Distribution::Uniform),
            ("zipf-0.9", Distribution::Zipfian(0.9)),
            ("zipf-0.95", Distribution::Zipfian(0.95)),
            ("zipf-0.99", Distribution::Zipfian(0.99)),
        ] {
            let mut w = self.synthetic(1.0, d, 128)?;
            w.name = format!("write-only-{x}");
            cases.push((x.to_string(), w));
        }
        let points = self.rotation_points("exp5", &cases, self.scale.servers)?;
        let mut cmp = Vec::new();
        cmp.extend(gain(
            &points,
            "uniform",
            Method::FarReach,
            Method::NoCache,
            "≈ 1 (all ≈ 1 MOPS)",
            Some(1.0),
        ));
        for x in ["zipf-0.9", "zipf-0.95", "zipf-0.99"] {
            cmp.extend(gain(
                &points,
                x,
                Method::FarReach,
                Method::NoCache,
                "1.34–2.35× (0.9–0.99)",
                None,
            ));
            cmp.extend(gain(
                &points,
                x,
                Method::FarReach,
                Method::NetCache,
                "1.50–2.86× (0.9–0.99)",
                None,
            ));
        }
        Ok(self.report(
            "exp5",
            "Impact of key distribution (write-only)",
            "Figure 11",
            "bars",
            "key distribution",
            "aggregate throughput (requests/s, rotation)",
            "server rotation; synthetic 100 % writes, 128-byte values",
            points,
            cmp,
        ))
    }

    fn exp6(&mut self) -> anyhow::Result<Report> {
        let mut cases = Vec::new();
        for len in [16usize, 32, 64, 128] {
            let mut w = self.synthetic(1.0, Distribution::Zipfian(0.99), len)?;
            w.name = format!("write-only-{len}B");
            cases.push((format!("{len}"), w));
        }
        let points = self.rotation_points("exp6", &cases, self.scale.servers)?;
        let mut cmp = Vec::new();
        for (x, _) in &cases {
            cmp.extend(gain(
                &points,
                x,
                Method::FarReach,
                Method::NoCache,
                "2.33×",
                Some(2.33),
            ));
            cmp.extend(gain(
                &points,
                x,
                Method::FarReach,
                Method::NetCache,
                "2.33×",
                Some(2.33),
            ));
        }
        Ok(self.report(
            "exp6",
            "Impact of value size (write-only, Zipf 0.99)",
            "Figure 12",
            "bars",
            "value size (bytes)",
            "aggregate throughput (requests/s, rotation)",
            "server rotation; synthetic 100 % writes, Zipf 0.99; servers reloaded per value size",
            points,
            cmp,
        ))
    }

    /// A dynamic run (two servers, admission on): returns the report, the data-plane
    /// counters and the switch OS's control bytes.
    fn dynamic_run(
        &mut self,
        m: Method,
        store: &Store,
        pattern: Option<Dynamic>,
        snapshot: Option<Duration>,
    ) -> anyhow::Result<(bench::BenchReport, Sample)> {
        let mut w = self.synthetic(1.0, Distribution::Zipfian(0.99), 128)?;
        w.operation_count = self.scale.dyn_ops;
        let ops = tern_kv::ycsb::generate_with_ack_lag(&w, 1, 2 * self.scale.threads)?;
        let hot = if m.kind().is_some() {
            hottest(&ops, self.scale.cache as usize, None)?
        } else {
            Vec::new()
        };
        drop(ops);
        let bed = self.bed(
            m,
            store,
            &BedCfg {
                cache: self.scale.cache,
                admission: true,
                snapshot,
                hot,
            },
        )?;
        let mut cfg = self.cfg(Router::new(bed.sim.fronts())?, w);
        cfg.dynamic = pattern.map(|p| DynamicConfig {
            pattern: p,
            // FarReach: 200; fewer on small key spaces (a pattern needs 8× as many records).
            keys: 200.min(self.scale.records as usize / 8).max(1),
            period_s: self.scale.dyn_period,
        });
        let stats = bed.os().map(|os| {
            (
                os.stats().control_bytes.load(Ordering::Relaxed),
                os.stats().snapshot_bytes.load(Ordering::Relaxed),
                os.stats().snapshots.load(Ordering::Relaxed),
                os.stats().admissions.load(Ordering::Relaxed),
            )
        });
        let before = bed.ops();
        let r = bench::run(&cfg)?;
        let d = bed.ops().since(before);
        if r.errors > 0 || r.mismatches > 0 {
            bail!(
                "{}: {} errors, {} mismatches",
                m.name(),
                r.errors,
                r.mismatches
            );
        }
        let after = bed.os().map(|os| {
            (
                os.stats().control_bytes.load(Ordering::Relaxed),
                os.stats().snapshot_bytes.load(Ordering::Relaxed),
                os.stats().snapshots.load(Ordering::Relaxed),
                os.stats().admissions.load(Ordering::Relaxed),
            )
        });
        let (ctl, snap, snaps, adm) = match (stats, after) {
            (Some(b), Some(a)) => (a.0 - b.0, a.1 - b.1, a.2 - b.2, a.3 - b.3),
            _ => (0, 0, 0, 0),
        };
        let secs = r.seconds.max(1e-9);
        let mib = |b: u64| b as f64 / secs / 1_048_576.0;
        let s = Sample {
            value: r.throughput,
            switch_share: if d.requests() == 0 {
                0.0
            } else {
                d.switch_answered(m) as f64 / d.requests() as f64
            },
            extra: serde_json::json!({
                "seconds": r.seconds,
                "per_second": r.timeline,
                "per_100ms": r.timeline_100ms,
                "control_mib_s": mib(ctl + snap),
                "cache_management_mib_s": mib(ctl),
                "snapshot_mib_s": mib(snap),
                "snapshots": snaps,
                "admissions": adm,
                "kv_ops": d.0.to_vec(),
            }),
        };
        Ok((r, s))
    }

    fn exp7(&mut self) -> anyhow::Result<Report> {
        let store = self.store(128)?;
        let mut points = Vec::new();
        for p in ["static", "hot-in", "hot-out", "random"] {
            let pattern = if p == "static" {
                None
            } else {
                Some(Dynamic::parse(p)?)
            };
            for m in self.methods.clone() {
                let pt = self.point("exp7", p, m, |c| {
                    c.dynamic_run(m, &store, pattern, None).map(|(_, s)| s)
                })?;
                points.push(pt);
            }
        }
        let mut cmp = Vec::new();
        for p in ["static", "hot-in", "hot-out", "random"] {
            cmp.extend(gain(
                &points,
                p,
                Method::FarReach,
                Method::NoCache,
                "≥ 1.59×",
                None,
            ));
            cmp.extend(gain(
                &points,
                p,
                Method::FarReach,
                Method::NetCache,
                "≥ 1.59×",
                None,
            ));
        }
        Ok(self.report(
            "exp7",
            "Dynamic key popularity (write-only, two servers)",
            "Figure 13",
            "timeline",
            "pattern",
            "throughput (ops/s)",
            &format!(
                "two physical servers, no rotation; 200 keys change every {} s; runtime \
                 admission on (hot threshold 10 at sampling 0.5), cache pre-loaded with the \
                 hottest {} keys of the static stream; {} operations per run",
                self.scale.dyn_period, self.scale.cache, self.scale.dyn_ops
            ),
            points,
            cmp,
        ))
    }

    fn exp8(&mut self) -> anyhow::Result<Report> {
        let store = self.store(128)?;
        let hot_in = Some(Dynamic::HotIn);
        let mut points = Vec::new();
        for m in self.methods.clone() {
            let periods = if m == Method::FarReach {
                self.scale.snapshot_periods.clone()
            } else {
                vec![0.0]
            };
            for period in periods {
                let snap = (period > 0.0).then(|| Duration::from_secs_f64(period));
                let x = format!("{period}");
                let pt = self.point("exp8", &x, m, |c| {
                    c.dynamic_run(m, &store, hot_in, snap).map(|(_, mut s)| {
                        // The point's metric is the throughput; the bandwidth rides in extra.
                        s.extra["throughput"] = serde_json::json!(s.value);
                        s
                    })
                })?;
                points.push(pt);
            }
        }
        let bw = |p: &Point| -> f64 {
            let v: Vec<f64> = p
                .extra
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|e| e["control_mib_s"].as_f64())
                        .collect()
                })
                .unwrap_or_default();
            mean_ci95(&v).0
        };
        let mut cmp = Vec::new();
        let fr: Vec<&Point> = points.iter().filter(|p| p.method == "farreach").collect();
        if let Some(base) = fr.iter().find(|p| p.x == "0") {
            cmp.push(Compare {
                what: "farreach control-plane bandwidth without snapshots (MiB/s)".into(),
                paper: "0.03 MiB/s".into(),
                paper_value: Some(0.03),
                ours: bw(base),
                ratio: Some(bw(base) / 0.03),
            });
            for p in fr.iter().filter(|p| p.x != "0") {
                let paper = match p.x.as_str() {
                    "2.5" => Some(1.41),
                    "10" => Some(0.33),
                    _ => None,
                };
                cmp.push(Compare {
                    what: format!(
                        "farreach control-plane bandwidth, snapshot every {} s (MiB/s)",
                        p.x
                    ),
                    paper: paper.map_or("1.41 → 0.33 MiB/s (2.5 → 10 s)".into(), |v| {
                        format!("{v} MiB/s")
                    }),
                    paper_value: paper,
                    ours: bw(p),
                    ratio: paper.map(|v| bw(p) / v),
                });
                if base.mean > 0.0 {
                    cmp.push(Compare {
                        what: format!(
                            "farreach throughput with snapshots every {} s / without",
                            p.x
                        ),
                        paper: "≈ 1 (≈ 0.2 MOPS throughout)".into(),
                        paper_value: Some(1.0),
                        ours: p.mean / base.mean,
                        ratio: Some(p.mean / base.mean),
                    });
                }
            }
        }
        Ok(self.report(
            "exp8",
            "Snapshot period: throughput and control-plane bandwidth (hot-in)",
            "Figure 14",
            "lines",
            "snapshot period (s; 0 = none)",
            "throughput (ops/s)",
            "two physical servers, hot-in dynamic write-only workload, admission on; bandwidth = \
             the switch OS's control datagrams (reports, acks, requests, answers) plus each \
             snapshot's records in FarReach's wire form, per second of run; NoCache and NetCache \
             have no snapshots (one point each)",
            points,
            cmp,
        ))
    }

    fn exp9(&mut self) -> anyhow::Result<Report> {
        let store = self.store(128)?;
        let mut points = Vec::new();
        for size in self.scale.recovery_sizes.clone() {
            for m in self.methods.clone() {
                let pt = self.point("exp9", &size.to_string(), m, |c| {
                    c.recovery(m, &store, size)
                })?;
                points.push(pt);
            }
        }
        let phase = |p: &Point, k: &str| -> f64 {
            let v: Vec<f64> = p
                .extra
                .as_array()
                .map(|a| a.iter().filter_map(|e| e[k].as_f64()).collect())
                .unwrap_or_default();
            mean_ci95(&v).0
        };
        let mut cmp = Vec::new();
        for p in points.iter().filter(|p| p.method == "farreach") {
            let paper_switch = match p.x.as_str() {
                "100" => Some(1.0),
                "10000" => Some(1.35),
                _ => None,
            };
            cmp.push(Compare {
                what: format!("farreach server recovery, cache {} (s)", p.x),
                paper: "≈ 1 s".into(),
                paper_value: Some(1.0),
                ours: phase(p, "server_s"),
                ratio: Some(phase(p, "server_s")),
            });
            cmp.push(Compare {
                what: format!("farreach switch recovery, cache {} (s)", p.x),
                paper: paper_switch
                    .map_or("1 → 1.35 s (100 → 10,000)".into(), |v| format!("{v} s")),
                paper_value: paper_switch,
                ours: phase(p, "switch_s"),
                ratio: paper_switch.map(|v| phase(p, "switch_s") / v),
            });
            cmp.push(Compare {
                what: format!("farreach total recovery, cache {} (s)", p.x),
                paper: "≤ 2.35 s".into(),
                paper_value: Some(2.35),
                ours: p.mean,
                ratio: Some(p.mean / 2.35),
            });
        }
        Ok(self.report(
            "exp9",
            "Crash recovery time by cache size",
            "Figure 15",
            "stacked",
            "cache size (records)",
            "recovery time (s)",
            "write-only static run with the cache pre-loaded, a snapshot, then the switch and \
             its OS are killed. Phases: collect (the controller's last snapshot and the file of \
             the clients' preserved records: every write the switch answered, newest per key; \
             the crash follows the last snapshot, so they add no newer record but are read \
             and merged), preprocess (newest record per key of both, split by server), server (mean per server of \
             replaying its records with the seq check), switch (reboot with program and \
             forwarding entries, new switch OS, re-admission of the snapshot's keys until all \
             are cached). NoCache: reboot only; NetCache: reboot and re-admission of its cached \
             keys (its copies are clean, nothing to replay).",
            points,
            cmp,
        ))
    }

    /// One crash and recovery of method `m` with a cache of `size` (total seconds; phases in
    /// extra).
    fn recovery(&mut self, m: Method, store: &Store, size: u32) -> anyhow::Result<Sample> {
        let mut w = self.synthetic(1.0, Distribution::Zipfian(0.99), 128)?;
        w.operation_count = self.scale.ops;
        let ops = tern_kv::ycsb::generate_with_ack_lag(&w, 1, 2 * self.scale.threads)?;
        let hot = if m.kind().is_some() {
            hottest(&ops, size as usize, None)?
        } else {
            Vec::new()
        };
        drop(ops);
        let mut bed = self.bed(
            m,
            store,
            &BedCfg {
                cache: size.max(1),
                admission: false,
                snapshot: None,
                hot: hot.clone(),
            },
        )?;
        // FarReach's clients preserve the writes the switch answered (their upstream backup),
        // dumped to a file as the paper's clients do.
        let preserve = self.data.join(format!("preserved-{size}.txt"));
        let _ = std::fs::remove_file(&preserve);
        let mut bc = self.cfg(Router::new(bed.sim.fronts())?, w);
        bc.preserve = (m == Method::FarReach).then(|| preserve.clone());
        let r = bench::run(&bc)?;
        if r.errors > 0 || r.mismatches > 0 {
            bail!(
                "{}: {} errors, {} mismatches",
                m.name(),
                r.errors,
                r.mismatches
            );
        }
        if let (Some(os), Method::FarReach) = (bed.os(), m) {
            os.snapshot();
        }
        // Crash: the switch goes down; the switch OS dies (the controller keeps its snapshot).
        bed.sim.set_down(true);
        let t0 = Instant::now();
        let snapshot = bed.os.take().map(|mut os| {
            let s = os.last_snapshot();
            os.stop();
            s
        });
        let preserved = if m == Method::FarReach {
            tern_kv::history::read_preserved(&preserve).map_err(|e| anyhow::anyhow!(e))?
        } else {
            Vec::new()
        };
        let _ = std::fs::remove_file(&preserve);
        let collect = t0.elapsed().as_secs_f64();
        let t1 = Instant::now();
        let mut per_server: Vec<HashMap<Key, Record>> = vec![HashMap::new(); 2];
        let snap_records = snapshot.as_ref().map_or(0, |s| s.records.len());
        let preserved_records = preserved.len();
        if m == Method::FarReach {
            let router = Router::new(store.addrs.clone())?;
            let from_snapshot = snapshot
                .iter()
                .flat_map(|s| s.records.iter())
                .map(|r| (r.key, r.value.clone(), r.seq));
            for (key, value, seq) in from_snapshot.chain(preserved) {
                let e = per_server[router.server_index(&key).min(1)]
                    .entry(key)
                    .or_insert((None, 0));
                if seq >= e.1 {
                    *e = (value, seq);
                }
            }
        }
        let preprocess = t1.elapsed().as_secs_f64();
        let mut server_times = Vec::new();
        for (i, recs) in per_server.into_iter().enumerate() {
            let t = Instant::now();
            if !recs.is_empty() {
                tern_kv::switchos::replay(
                    &store.addrs[i..=i],
                    recs.into_iter().map(|(k, (v, s))| (k, v, s)),
                    Duration::from_millis(20),
                    50,
                )?;
            }
            server_times.push(t.elapsed().as_secs_f64());
        }
        let server = server_times.iter().sum::<f64>() / server_times.len() as f64;
        let t2 = Instant::now();
        bed.sim.crash_and_reboot()?;
        let mut cached = 0;
        if let Some(kind) = m.kind() {
            let mut c = SwitchOsConfig::new(kind, store.addrs.clone());
            c.capacity = size.max(1);
            c.hot_threshold = u16::MAX;
            c.snapshot_period = None;
            let os = SwitchOs::start(bed.sim.access(), c).context("restarting the switch OS")?;
            let keys: Vec<(Key, u16)> = match &snapshot {
                Some(s) if m == Method::FarReach => {
                    s.records.iter().map(|r| (r.key, r.server)).collect()
                }
                _ => hot.iter().map(|(k, s)| (*k, *s as u16)).collect(),
            };
            for (k, s) in &keys {
                os.admit_later(*k, *s);
            }
            let deadline = Instant::now() + Duration::from_secs(120);
            while os.cached_count() < keys.len() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(2));
            }
            cached = os.cached_count();
            if cached < keys.len() {
                bail!(
                    "{}: {} of {} keys re-admitted",
                    m.name(),
                    cached,
                    keys.len()
                );
            }
            for h in &store.handles {
                h.cache_ctl().set_switchos(Some(os.addr()));
            }
            bed.os = Some(os);
        }
        bed.sim.set_down(false);
        let switch = t2.elapsed().as_secs_f64();
        let total = collect + preprocess + server + switch;
        Ok(Sample {
            value: total,
            switch_share: 0.0,
            extra: serde_json::json!({
                "collect_s": collect, "preprocess_s": preprocess, "server_s": server,
                "switch_s": switch, "snapshot_records": snap_records,
                "preserved_records": preserved_records, "readmitted": cached,
                "per_server_s": server_times,
            }),
        })
    }

    fn exp10(&mut self) -> anyhow::Result<Report> {
        let mut points = Vec::new();
        let valgrind = which("valgrind");
        let store = self.store(128)?;
        for m in self.methods.clone() {
            let json = self.program(m)?;
            let v: serde_json::Value = serde_json::from_str(&json)?;
            let mut tables = 0u64;
            let mut table_capacity = 0u64;
            for p in v["pipelines"].as_array().into_iter().flatten() {
                for t in p["tables"].as_array().into_iter().flatten() {
                    tables += 1;
                    table_capacity += t["max_size"].as_u64().unwrap_or(0);
                }
            }
            let actions = v["actions"].as_array().map_or(0, Vec::len);
            let mut reg_bits = 0u64;
            let mut regs = 0u64;
            for r in v["register_arrays"].as_array().into_iter().flatten() {
                regs += 1;
                reg_bits += r["size"].as_u64().unwrap_or(0) * r["bitwidth"].as_u64().unwrap_or(0);
            }
            // Entries installed with a full cache.
            let hot: Vec<(Key, usize)> = (0..u64::from(self.scale.cache))
                .map(|i| (tern_kv::ycsb::key_of(i as i64), 0usize))
                .map(|(k, _)| {
                    let s = Router::new(store.addrs.clone()).map_or(0, |r| r.server_index(&k));
                    (k, s)
                })
                .collect();
            let bed = self.bed(
                m,
                &store,
                &BedCfg {
                    cache: self.scale.cache,
                    admission: false,
                    snapshot: None,
                    hot: if m.kind().is_some() { hot } else { Vec::new() },
                },
            )?;
            let entries = 3 + bed.os().map_or(0, |o| o.cached_count()) as u64;
            drop(bed);
            let probe = self.probe(m, valgrind)?;
            say(&format!(
                "[exp10] {}: {tables} tables, {entries} entries, {} B registers, {actions} actions, {}",
                m.name(),
                reg_bits / 8,
                probe
            ));
            let ipp = probe["instructions_per_packet"].as_f64();
            points.push(Point {
                x: "resources".into(),
                method: m.name().into(),
                samples: ipp.into_iter().collect(),
                mean: ipp.unwrap_or(0.0),
                ci95: 0.0,
                switch_share: Vec::new(),
                extra: serde_json::json!({
                    "tables": tables, "table_capacity": table_capacity,
                    "entries_installed": entries, "register_arrays": regs,
                    "register_bytes": reg_bits / 8, "actions": actions,
                    "instructions_per_packet": ipp,
                    "probe": probe,
                }),
            });
        }
        let regb = |m: Method| -> Option<f64> {
            points
                .iter()
                .find(|p| p.method == m.name())
                .and_then(|p| p.extra["register_bytes"].as_f64())
        };
        let mut cmp = Vec::new();
        if let (Some(f), Some(n)) = (regb(Method::FarReach), regb(Method::NetCache)) {
            if n > 0.0 {
                cmp.push(Compare {
                    what: "farreach / netcache stateful memory (register bytes; paper: SRAM)"
                        .into(),
                    paper: "8992 / 8800 KiB = 1.02".into(),
                    paper_value: Some(8992.0 / 8800.0),
                    ours: f / n,
                    ratio: Some(f / n / (8992.0 / 8800.0)),
                });
            }
        }
        Ok(self.report(
            "exp10",
            "Switch resources of each program",
            "Table 2",
            "table",
            "program",
            "instructions per packet (callgrind; GET miss path)",
            "tables, actions and register arrays from each program's BMv2 JSON; entries installed \
             with a full cache; instructions per packet = callgrind's count difference of two \
             runs of the same probe with different packet counts (GET requests of uncached keys \
             through the switch), skipped when valgrind is missing; memory = the probe's \
             resident-set growth from loading the program",
            points,
            cmp,
        ))
    }

    /// Runs the exp10 probe for `m` (memory) and, with valgrind, twice under callgrind.
    fn probe(&self, m: Method, valgrind: bool) -> anyhow::Result<serde_json::Value> {
        let exe = std::env::current_exe().context("locating tern")?;
        let (src, name) = m.source();
        let prog = self.data.join(format!("{}.json", m.name()));
        let json = tern_p4::compile_str(src, name, &Default::default())
            .map_err(|d| anyhow::anyhow!("compiling {name}: {d}"))?
            .json;
        std::fs::write(&prog, json).context("writing the probe's program")?;
        let run = |packets: u64| -> anyhow::Result<serde_json::Value> {
            let o = std::process::Command::new(&exe)
                .args(["kv", "experiment", "probe", "--probe-program"])
                .arg(&prog)
                .args(["--probe-packets", &packets.to_string()])
                .output()
                .context("running the exp10 probe")?;
            if !o.status.success() {
                bail!("exp10 probe failed: {}", String::from_utf8_lossy(&o.stderr));
            }
            serde_json::from_slice(&o.stdout).context("reading the probe's output")
        };
        let base = run(self.scale.probe_packets.0)?;
        let mut v = serde_json::json!({ "rss_load_kib": base["rss_load_kib"] });
        if !valgrind {
            v["instructions_per_packet"] = serde_json::Value::Null;
            v["callgrind"] = "skipped: valgrind not found".into();
            return Ok(v);
        }
        let dir = self.data.join(format!("callgrind-{}", m.name()));
        std::fs::create_dir_all(&dir)?;
        // Only the measured packets are counted (callgrind collects inside
        // `probe_measured` alone), so start-up and program loading cancel out.
        let packets = self.scale.probe_packets.1;
        let f = dir.join("callgrind.out");
        let st = std::process::Command::new("valgrind")
            .arg("--tool=callgrind")
            .arg("--collect-atstart=no")
            .arg("--toggle-collect=*probe_measured*")
            .arg(format!("--callgrind-out-file={}", f.display()))
            .arg(&exe)
            .args(["kv", "experiment", "probe", "--probe-program"])
            .arg(&prog)
            .args(["--probe-packets", &packets.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .context("running valgrind")?;
        if !st.success() {
            bail!("valgrind failed ({st})");
        }
        let text = std::fs::read_to_string(&f)?;
        let total: u64 = text
            .lines()
            .find_map(|l| {
                l.strip_prefix("summary:")
                    .or_else(|| l.strip_prefix("totals:"))
                    .and_then(|r| r.split_whitespace().next())
                    .and_then(|n| n.parse().ok())
            })
            .context("no total in the callgrind output")?;
        if total == 0 {
            bail!("callgrind counted nothing in probe_measured");
        }
        v["instructions_per_packet"] = serde_json::json!(total as f64 / packets as f64);
        v["callgrind"] = serde_json::json!({ "packets": packets, "instructions": total });
        let _ = std::fs::remove_dir_all(&dir);
        Ok(v)
    }
}

fn which(prog: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(prog).is_file()))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Sends `frames` into port 1; returns the packets that came out (callgrind counts this
/// function alone).
#[inline(never)]
fn probe_measured(sw: &mut tern_dataplane::Switch, frames: &[Vec<u8>]) -> u64 {
    let mut out = Vec::new();
    let mut sent = 0;
    for f in frames {
        out.clear();
        sw.process_packet(1, f, &mut out);
        sent += out.len() as u64;
    }
    sent
}

/// `tern kv experiment probe --probe-program FILE.json --probe-packets N`: loads the program
/// with its forwarding entries, sends N GET requests of uncached keys through it, prints JSON.
pub fn probe(a: &ExperimentArgs) -> anyhow::Result<()> {
    let name = a
        .probe_program
        .as_deref()
        .context("probe: --probe-program FILE.json")?;
    let json = std::fs::read_to_string(name).with_context(|| format!("reading {name}"))?;
    let before = rss_kib();
    let mut sw = tern_dataplane::Switch::from_json(&json, tern_dataplane::SwitchOptions::default())
        .context("loading the program")?;
    let mut cli = tern_control::Cli::new(sw.program());
    let entries = format!(
        "table_add forward to_port {} => 1\ntable_add forward to_port {} => 2\n",
        u32::from(CLIENT_IP),
        u32::from(server_ip(0))
    );
    let mut sink = Vec::new();
    cli.run_script(&mut sw, &mut entries.as_bytes(), &mut sink)
        .context("applying the entries")?;
    let loaded = rss_kib();
    // 50 warm-up packets, then the measured ones (different keys each).
    let mut frames = Vec::new();
    for i in 0..50 + a.probe_packets {
        let msg = tern_kv::protocol::Message::new(tern_kv::protocol::Op::GETREQ, Key::from_id(i))
            .encode()
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        frames.push(super::kv_sim::frame(
            (CLIENT_IP, 40000),
            (server_ip(0), 1152),
            &msg,
        ));
    }
    probe_measured(&mut sw, &frames[..50]);
    let sent = probe_measured(&mut sw, &frames[50..]);
    say(&serde_json::json!({
        "program": name,
        "packets": a.probe_packets,
        "forwarded": sent,
        "rss_load_kib": loaded.saturating_sub(before),
    })
    .to_string());
    Ok(())
}

fn report_md(r: &Report) -> String {
    let mut m = format!("# {} — {} ({})\n\n", r.experiment, r.title, r.figure);
    m += &format!(
        "* **{}**\n* Date: {}; machine: {}\n* Command: `{}`\n* Scale: {} records per server, \
         {} operations per stream, {} client threads, {} emulated servers, cache {} records, \
         {} repetitions (mean ± 95 % CI, Student's t)\n* Method: {}\n* Took {:.0} s\n\n",
        r.note,
        r.date,
        r.machine,
        r.command,
        r.scale.records,
        r.scale.ops,
        r.scale.threads,
        r.scale.servers,
        r.scale.cache,
        r.scale.repeat,
        r.method_note,
        r.seconds
    );
    m += "## Against the paper\n\n| what | paper | ours | ours / paper |\n|---|---|---|---|\n";
    for c in &r.compare {
        m += &format!(
            "| {} | {} | {:.3} | {} |\n",
            c.what,
            c.paper,
            c.ours,
            c.ratio.map_or("–".into(), |x| format!("{x:.2}"))
        );
    }
    m += &format!(
        "\n## Points\n\n| {} | method | {} (mean) | ± 95 % CI | samples | switch answered |\n|---|---|---|---|---|---|\n",
        r.x_label, r.metric
    );
    for p in &r.points {
        let share = if p.switch_share.is_empty() {
            "–".to_string()
        } else {
            format!("{:.1} %", 100.0 * mean_ci95(&p.switch_share).0)
        };
        m += &format!(
            "| {} | {} | {:.1} | {:.1} | {} | {} |\n",
            p.x,
            p.method,
            p.mean,
            p.ci95,
            p.samples
                .iter()
                .map(|s| format!("{s:.1}"))
                .collect::<Vec<_>>()
                .join(", "),
            share
        );
    }
    if r.experiment == "exp10" {
        m += "\n## Resources\n\n| program | tables | entries installed | register arrays | register bytes | actions | instructions/packet | RSS of the loaded program (KiB) |\n|---|---|---|---|---|---|---|---|\n";
        for p in &r.points {
            let e = &p.extra;
            m += &format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                p.method,
                e["tables"],
                e["entries_installed"],
                e["register_arrays"],
                e["register_bytes"],
                e["actions"],
                e["instructions_per_packet"]
                    .as_f64()
                    .map_or("skipped (no valgrind)".into(), |v| format!("{v:.0}")),
                e["probe"]["rss_load_kib"]
            );
        }
        m += "\nPaper (Tofino): SRAM 320 / 8800 / 8992 KiB, stages 4 / 12 / 12, actions 6 / 69 / 70, \
              stateful ALUs 0 / 45 / 45, PHV 134 / 528 / 499 bytes (NoCache / NetCache / FarReach).\n";
    }
    m
}

fn summary_md(rs: &[Report]) -> String {
    let mut m = String::from(
        "# FarReach's evaluation on tern (tern kv experiment all)\n\n| experiment | figure | \
         what | paper | ours | ours / paper |\n|---|---|---|---|---|---|\n",
    );
    for r in rs {
        for c in &r.compare {
            m += &format!(
                "| {} | {} | {} | {} | {:.3} | {} |\n",
                r.experiment,
                r.figure,
                c.what,
                c.paper,
                c.ours,
                c.ratio.map_or("–".into(), |x| format!("{x:.2}"))
            );
        }
    }
    if let Some(r) = rs.first() {
        m += &format!("\n{}; {}; `{}`\n", r.note, r.date, r.command);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_interval_is_students_t() {
        let (m, ci) = mean_ci95(&[1.0, 2.0, 3.0]);
        assert!((m - 2.0).abs() < 1e-12);
        // s = 1, n = 3, t(2) = 4.303: 4.303 / sqrt(3).
        assert!((ci - 4.303 / 3f64.sqrt()).abs() < 1e-9, "{ci}");
        assert_eq!(mean_ci95(&[5.0]), (5.0, 0.0));
        assert_eq!(mean_ci95(&[]), (0.0, 0.0));
    }

    #[test]
    fn hottest_keys_go_to_the_rotation_servers() {
        let w = WorkloadSpec::core("a", 1000, 5000).unwrap();
        let ops = tern_kv::ycsb::generate(&w, 1).unwrap();
        let hot = hottest(&ops, 10, Some(4)).unwrap();
        assert_eq!(hot.len(), 10);
        assert!(hot.iter().all(|(_, s)| *s <= 1));
        // The first is the most requested key of the stream.
        let mut c: HashMap<Key, u64> = HashMap::new();
        for o in &ops {
            *c.entry(o.key).or_default() += 1;
        }
        let top = c.values().copied().max().unwrap();
        assert_eq!(c[&hot[0].0], top);
    }
}
