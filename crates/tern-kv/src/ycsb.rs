//! YCSB's request generators reproduced algorithm for algorithm (`site.ycsb.generator` and
//! `CoreWorkload`): Gray et al.'s ZipfianGenerator with incremental zeta, ScrambledZipfian with
//! FNV-1a 64, SkewedLatest, UniformLong, the DiscreteGenerator operation mix, the core workloads
//! A/B/C/D/F plus load and a write-only synthetic one, pre-generated and dealt to client threads.
//!
//! Only the random source differs: YCSB uses `ThreadLocalRandom`; here every stream comes from a
//! seeded [`Rng`] so runs are reproducible.

use crate::protocol::Key;
use crate::rng::Rng;

/// YCSB's default Zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;
/// ScrambledZipfianGenerator's item count.
pub const SCRAMBLED_ITEM_COUNT: i64 = 10_000_000_000;
/// ScrambledZipfianGenerator's precomputed zeta(10^10, 0.99).
pub const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val` (low byte first) with Java's
/// wrapping signed arithmetic, then `Math.abs` (which leaves `i64::MIN` negative).
pub fn fnvhash64(mut val: i64) -> i64 {
    let mut h: i64 = 0xCBF2_9CE4_8422_2325_u64 as i64;
    for _ in 0..8 {
        h ^= val & 0xff;
        h = h.wrapping_mul(1_099_511_628_211);
        val >>= 8;
    }
    h.wrapping_abs()
}

/// `zeta(st, n, θ, initial)`: `initial + Σ_{i=st}^{n-1} 1/(i+1)^θ` (YCSB's incremental zeta).
pub fn zeta_from(st: i64, n: i64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    let mut i = st;
    while i < n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
        i += 1;
    }
    sum
}

/// `zeta(n, θ) = Σ_{i=1}^{n} 1/i^θ`. Summed exactly up to 10^7 terms; above that the tail is
/// the Euler–Maclaurin approximation (relative error far below 1e-12), because YCSB's own loop
/// over 10^10 terms takes minutes.
pub fn zeta(n: i64, theta: f64) -> f64 {
    const EXACT: i64 = 10_000_000;
    if n <= EXACT {
        return zeta_from(0, n, theta, 0.0);
    }
    let head = zeta_from(0, EXACT, theta, 0.0);
    let (a, b) = ((EXACT + 1) as f64, n as f64);
    let f = |x: f64| x.powf(-theta);
    let df = |x: f64| -theta * x.powf(-theta - 1.0);
    let integral = if (theta - 1.0).abs() < 1e-12 {
        b.ln() - a.ln()
    } else {
        (b.powf(1.0 - theta) - a.powf(1.0 - theta)) / (1.0 - theta)
    };
    head + integral + (f(a) + f(b)) / 2.0 + (df(b) - df(a)) / 12.0
}

/// YCSB's ZipfianGenerator (Gray et al., "Quickly generating billion-record synthetic
/// databases", SIGMOD'94). Rank 0 (= `base`) is the most popular.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: i64,
    base: i64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: i64,
    last: i64,
}

impl Zipfian {
    /// Over `[min, max]` with θ = 0.99.
    pub fn new(min: i64, max: i64) -> Zipfian {
        Zipfian::with_theta(min, max, ZIPFIAN_CONSTANT)
    }

    /// Over `[min, max]` with the given θ (zeta computed here).
    pub fn with_theta(min: i64, max: i64, theta: f64) -> Zipfian {
        Zipfian::with_zetan(min, max, theta, zeta(max - min + 1, theta))
    }

    /// Over `[min, max]` with a precomputed `zetan`.
    pub fn with_zetan(min: i64, max: i64, theta: f64, zetan: f64) -> Zipfian {
        let items = max - min + 1;
        let zeta2theta = zeta(2, theta);
        Zipfian {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan),
            count_for_zeta: items,
            last: min,
        }
    }

    /// Number of items the generator was built for.
    pub fn items(&self) -> i64 {
        self.items
    }

    /// The current zeta(n) (after any incremental growth).
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// `nextLong(itemcount)` with the uniform draw `u` ∈ [0, 1) supplied. A larger `itemcount`
    /// than before extends zetan incrementally (and, like YCSB, recomputes eta with the
    /// original item count); a smaller one is ignored (YCSB's default).
    pub fn next_long_with(&mut self, itemcount: i64, u: f64) -> i64 {
        if itemcount > self.count_for_zeta {
            self.zetan = zeta_from(self.count_for_zeta, itemcount, self.theta, self.zetan);
            self.count_for_zeta = itemcount;
            self.eta = (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
                / (1.0 - self.zeta2theta / self.zetan);
        }
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let ret = self.base
            + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as i64;
        self.last = ret;
        ret
    }

    /// `nextLong(itemcount)`.
    pub fn next_long(&mut self, itemcount: i64, rng: &mut Rng) -> i64 {
        self.next_long_with(itemcount, rng.next_f64())
    }

    /// `nextValue()` = `nextLong(items)`.
    pub fn next(&mut self, rng: &mut Rng) -> i64 {
        let n = self.items;
        self.next_long(n, rng)
    }

    /// The probability the algorithm gives to rank `r` (0-based) when drawing from `itemcount`
    /// items with the current zetan/eta: the measure of the `u` interval that maps to `r`.
    pub fn rank_probability(&self, r: i64, itemcount: i64) -> f64 {
        let p0 = 1.0 / self.zetan;
        let p1_end = (1.0 + 0.5f64.powf(self.theta)) / self.zetan;
        if r == 0 {
            return p0.min(1.0);
        }
        if r == 1 {
            return (p1_end.min(1.0) - p0.min(1.0)).max(0.0);
        }
        // base + floor(n·(eta·u − eta + 1)^alpha) = r  ⇔  u ∈ [g(r), g(r+1))
        let g =
            |x: f64| ((x / itemcount as f64).powf(1.0 / self.alpha) - 1.0 + self.eta) / self.eta;
        let lo = g(r as f64).max(p1_end);
        let hi = g((r + 1) as f64).min(1.0);
        (hi - lo).max(0.0)
    }
}

/// YCSB's ScrambledZipfianGenerator: a Zipfian over 10^10 items hashed with FNV-1a 64 onto
/// `[min, max]`, so popular items are scattered over the key space.
#[derive(Clone, Debug)]
pub struct ScrambledZipfian {
    min: i64,
    itemcount: i64,
    gen: Zipfian,
}

impl ScrambledZipfian {
    /// Over `[min, max]` with θ = 0.99 (YCSB's precomputed zetan).
    pub fn new(min: i64, max: i64) -> Result<ScrambledZipfian, WorkloadError> {
        ScrambledZipfian::with_theta(min, max, ZIPFIAN_CONSTANT)
    }

    /// Over `[min, max]` with θ (zeta(10^10 + 1, θ) computed unless θ = 0.99).
    pub fn with_theta(min: i64, max: i64, theta: f64) -> Result<ScrambledZipfian, WorkloadError> {
        if max < min || !(theta > 0.0 && theta < 1.0) {
            return Err(WorkloadError::Invalid {
                workload: "scrambled zipfian".into(),
                what: format!("range [{min}, {max}] must be non-empty and theta {theta} in (0, 1)"),
            });
        }
        let gen = if theta == ZIPFIAN_CONSTANT {
            Zipfian::with_zetan(0, SCRAMBLED_ITEM_COUNT, theta, SCRAMBLED_ZETAN)
        } else {
            Zipfian::with_theta(0, SCRAMBLED_ITEM_COUNT, theta)
        };
        Ok(ScrambledZipfian {
            min,
            itemcount: max - min + 1,
            gen,
        })
    }

    /// The item a given Zipfian rank maps to: `min + fnvhash64(rank) mod itemcount` (Java `%`;
    /// the one negative hash, `i64::MIN`, is folded into range instead of going below `min`).
    pub fn item_of_rank(&self, rank: i64) -> i64 {
        self.min + (fnvhash64(rank) % self.itemcount).rem_euclid(self.itemcount)
    }

    /// `nextValue()`.
    pub fn next(&mut self, rng: &mut Rng) -> i64 {
        let r = self.gen.next(rng);
        self.item_of_rank(r)
    }
}

/// YCSB's AcknowledgedCounterGenerator as used at generation time: `next_value` hands out
/// insert key numbers, `last_value` is the highest *acknowledged* one (acks arrive in order).
#[derive(Clone, Debug)]
pub struct Counter {
    next: i64,
    limit: i64,
}

impl Counter {
    /// Starts at `start`; nothing beyond `start - 1` is acknowledged yet.
    pub fn new(start: i64) -> Counter {
        Counter {
            next: start,
            limit: start - 1,
        }
    }
    /// `nextValue()`, acknowledged at once.
    pub fn next_value(&mut self) -> i64 {
        let v = self.next_unacked();
        self.acknowledge(v);
        v
    }
    /// `nextValue()` without acknowledging it.
    pub fn next_unacked(&mut self) -> i64 {
        let v = self.next;
        self.next += 1;
        v
    }
    /// `acknowledge(v)`: advances the limit if `v` is the next value in order.
    pub fn acknowledge(&mut self, v: i64) {
        if v == self.limit + 1 {
            self.limit = v;
        }
    }
    /// `lastValue()`: the highest acknowledged value (start − 1 before any).
    pub fn last_value(&self) -> i64 {
        self.limit
    }
}

/// YCSB's SkewedLatestGenerator: `max − zipf.nextLong(max)` with `max = basis.lastValue()`.
#[derive(Clone, Debug)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// Built on the counter's current last value; like YCSB's constructor it draws once.
    pub fn new(basis: &Counter, rng: &mut Rng) -> SkewedLatest {
        let mut s = SkewedLatest {
            zipf: Zipfian::new(0, basis.last_value() - 1),
        };
        s.next(basis, rng);
        s
    }

    /// `nextValue()`.
    pub fn next(&mut self, basis: &Counter, rng: &mut Rng) -> i64 {
        let max = basis.last_value();
        max - self.zipf.next_long(max, rng)
    }
}

/// YCSB's UniformLongGenerator over `[lb, ub]`: `abs(nextLong()) % interval + lb`.
#[derive(Clone, Debug)]
pub struct UniformLong {
    lb: i64,
    interval: i64,
}

impl UniformLong {
    /// Over `[lb, ub]` (non-empty).
    pub fn new(lb: i64, ub: i64) -> Result<UniformLong, WorkloadError> {
        if ub < lb {
            return Err(WorkloadError::Invalid {
                workload: "uniform".into(),
                what: format!("range [{lb}, {ub}] is empty"),
            });
        }
        Ok(UniformLong {
            lb,
            interval: ub - lb + 1,
        })
    }
    /// `nextValue()` (the `i64::MIN` case folded into range).
    pub fn next(&self, rng: &mut Rng) -> i64 {
        let r = (rng.next_u64() as i64).wrapping_abs();
        (r % self.interval).rem_euclid(self.interval) + self.lb
    }
}

/// The request distribution of a workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Scrambled Zipfian with this θ.
    Zipfian(f64),
    /// Skewed latest (θ 0.99 over the insert counter).
    Latest,
    /// Uniform over the loaded records.
    Uniform,
}

/// One operation kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub enum OpKind {
    /// GET.
    Read,
    /// PUT of an existing key.
    Update,
    /// PUT of a new key.
    Insert,
    /// GET then PUT of the same key.
    ReadModifyWrite,
}

/// A workload definition (YCSB core properties that matter for a key-value store).
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Name ("a", "b", …).
    pub name: String,
    /// Read proportion.
    pub read: f64,
    /// Update proportion.
    pub update: f64,
    /// Insert proportion.
    pub insert: f64,
    /// Read-modify-write proportion.
    pub rmw: f64,
    /// Request distribution.
    pub distribution: Distribution,
    /// `recordcount`.
    pub record_count: i64,
    /// `operationcount`.
    pub operation_count: i64,
    /// Value size in bytes (FarReach: 128).
    pub value_len: usize,
}

/// Bad workload parameters.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    /// The name is not a known workload.
    #[error("unknown workload {0:?} (expected a, b, c, d, f, load or write-only)")]
    Unknown(String),
    /// A parameter is out of range.
    #[error("workload {workload}: {what}")]
    Invalid {
        /// The workload.
        workload: String,
        /// What is wrong.
        what: String,
    },
}

impl WorkloadSpec {
    /// A core workload by name: `a`, `b`, `c`, `d`, `f`, `load` (inserts only, no key choice),
    /// or `write-only` (FarReach's synthetic 100% updates, Zipfian).
    pub fn core(
        name: &str,
        record_count: i64,
        operation_count: i64,
    ) -> Result<Self, WorkloadError> {
        let z = Distribution::Zipfian(ZIPFIAN_CONSTANT);
        let (read, update, insert, rmw, distribution) = match name.to_ascii_lowercase().as_str() {
            "a" => (0.5, 0.5, 0.0, 0.0, z),
            "b" => (0.95, 0.05, 0.0, 0.0, z),
            "c" => (1.0, 0.0, 0.0, 0.0, z),
            "d" => (0.95, 0.0, 0.05, 0.0, Distribution::Latest),
            "f" => (0.5, 0.0, 0.0, 0.5, z),
            "load" => (0.0, 0.0, 1.0, 0.0, z),
            "write-only" | "w" => (0.0, 1.0, 0.0, 0.0, z),
            _ => return Err(WorkloadError::Unknown(name.to_string())),
        };
        let spec = WorkloadSpec {
            name: name.to_ascii_lowercase(),
            read,
            update,
            insert,
            rmw,
            distribution,
            record_count,
            operation_count,
            value_len: 128,
        };
        spec.validate()?;
        Ok(spec)
    }

    /// Checks the parameters.
    pub fn validate(&self) -> Result<(), WorkloadError> {
        let bad = |what: String| {
            Err(WorkloadError::Invalid {
                workload: self.name.clone(),
                what,
            })
        };
        if self.record_count < 1 || self.record_count > i64::from(i32::MAX) {
            return bad(format!(
                "record count {} must be in 1..=2^31-1",
                self.record_count
            ));
        }
        if self.operation_count < 0 {
            return bad(format!(
                "operation count {} is negative",
                self.operation_count
            ));
        }
        let ps = [self.read, self.update, self.insert, self.rmw];
        if ps.iter().any(|p| !p.is_finite() || *p < 0.0) || ps.iter().sum::<f64>() <= 0.0 {
            return bad("proportions must be non-negative and not all zero".into());
        }
        if let Distribution::Zipfian(t) = self.distribution {
            if !(t > 0.0 && t < 1.0) {
                return bad(format!("zipfian theta {t} must be in (0, 1)"));
            }
        }
        Ok(())
    }
}

/// One pre-generated operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KvOp {
    /// What to do.
    pub kind: OpKind,
    /// YCSB key number (before hashing).
    pub keynum: i64,
    /// The wire key: `Key::from_id(fnvhash64(keynum))` (YCSB's hashed insert order).
    pub key: Key,
}

/// The key of YCSB key number `keynum` under `insertorder = hashed`: the number in
/// `"user" + fnvhash64(keynum)`.
pub fn key_of(keynum: i64) -> Key {
    Key::from_id(fnvhash64(keynum) as u64)
}

/// The keys loaded by the load phase (key numbers `0..record_count`).
pub fn load_keys(record_count: i64) -> impl Iterator<Item = Key> {
    (0..record_count).map(key_of)
}

/// The deterministic value written for a key number (length `len`).
pub fn value_for(keynum: i64, len: usize, version: u64) -> Vec<u8> {
    let mut rng = Rng::new((keynum as u64) ^ version.rotate_left(32));
    let mut v = vec![0u8; len];
    rng.fill(&mut v);
    v
}

/// Generates the run phase: `operation_count` operations exactly as YCSB's CoreWorkload picks
/// them (DiscreteGenerator over read/update/insert/rmw; key chooser per distribution; inserts
/// from the counter starting at `record_count`; `nextKeynum` redraws keys beyond the last
/// insert and truncates to 32 bits like `intValue()`).
pub fn generate(spec: &WorkloadSpec, seed: u64) -> Result<Vec<KvOp>, WorkloadError> {
    generate_with_ack_lag(spec, seed, 0)
}

/// Like [`generate`], but an insert is acknowledged (becomes readable for the key choosers) only
/// `ack_lag` operations after it was generated, modelling YCSB's AcknowledgedCounterGenerator
/// when the stream is later executed by several threads at once (use about 2 × threads).
pub fn generate_with_ack_lag(
    spec: &WorkloadSpec,
    seed: u64,
    ack_lag: usize,
) -> Result<Vec<KvOp>, WorkloadError> {
    spec.validate()?;
    let mut pending: std::collections::VecDeque<(usize, i64)> = std::collections::VecDeque::new();
    let mut rng = Rng::new(seed);
    let mut inserts = Counter::new(spec.record_count);
    let mut chooser = match spec.distribution {
        Distribution::Zipfian(theta) => {
            Chooser::Scrambled(ScrambledZipfian::with_theta(0, zipfian_max(spec), theta)?)
        }
        Distribution::Latest => Chooser::Latest(SkewedLatest::new(&inserts, &mut rng)),
        Distribution::Uniform => Chooser::Uniform(UniformLong::new(0, spec.record_count - 1)?),
    };
    let weights = [
        (OpKind::Read, spec.read),
        (OpKind::Update, spec.update),
        (OpKind::Insert, spec.insert),
        (OpKind::ReadModifyWrite, spec.rmw),
    ];
    let sum: f64 = weights.iter().map(|w| w.1).sum();
    let mut ops = Vec::with_capacity(spec.operation_count as usize);
    for i in 0..spec.operation_count as usize {
        while pending.front().is_some_and(|&(at, _)| at + ack_lag <= i) {
            if let Some((_, v)) = pending.pop_front() {
                inserts.acknowledge(v);
            }
        }
        let kind = discrete(&weights, sum, rng.next_f64());
        let keynum = if kind == OpKind::Insert {
            let v = inserts.next_unacked();
            if ack_lag == 0 {
                inserts.acknowledge(v);
            } else {
                pending.push_back((i, v));
            }
            v
        } else {
            loop {
                let k = chooser.next(&inserts, &mut rng) as i32 as i64;
                if k <= inserts.last_value() {
                    break k;
                }
            }
        };
        ops.push(KvOp {
            kind,
            keynum,
            key: key_of(keynum),
        });
    }
    Ok(ops)
}

/// The upper bound YCSB gives its scrambled Zipfian key chooser:
/// `insertstart + insertcount + expectednewkeys` (inclusive, so one more item than records).
fn zipfian_max(spec: &WorkloadSpec) -> i64 {
    let expected_new = (spec.operation_count as f64 * spec.insert * 2.0) as i32 as i64;
    spec.record_count + expected_new
}

/// DiscreteGenerator: walk the weights subtracting normalised probabilities.
fn discrete(weights: &[(OpKind, f64)], sum: f64, mut val: f64) -> OpKind {
    for &(kind, w) in weights {
        if w <= 0.0 {
            continue;
        }
        let pw = w / sum;
        if val < pw {
            return kind;
        }
        val -= pw;
    }
    // Rounding left `val` just above the last bucket: YCSB would fail here; take the last one.
    weights
        .iter()
        .rev()
        .find(|w| w.1 > 0.0)
        .map_or(OpKind::Read, |w| w.0)
}

enum Chooser {
    Scrambled(ScrambledZipfian),
    Latest(SkewedLatest),
    Uniform(UniformLong),
}

impl Chooser {
    fn next(&mut self, inserts: &Counter, rng: &mut Rng) -> i64 {
        match self {
            Chooser::Scrambled(g) => g.next(rng),
            Chooser::Latest(g) => g.next(inserts, rng),
            Chooser::Uniform(g) => g.next(rng),
        }
    }
}

/// Deals a pre-generated stream round-robin to `threads` client threads (operation i goes to
/// thread i mod threads), so every thread's slice is ready before the clock starts.
pub fn deal(ops: Vec<KvOp>, threads: usize) -> Vec<Vec<KvOp>> {
    let threads = threads.max(1);
    let mut out: Vec<Vec<KvOp>> = (0..threads)
        .map(|_| Vec::with_capacity(ops.len() / threads + 1))
        .collect();
    for (i, op) in ops.into_iter().enumerate() {
        out[i % threads].push(op);
    }
    out
}

/// A dynamic-popularity pattern (NetCache / FarReach): every period, `keys` keys change places
/// in the popularity order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Dynamic {
    /// `keys` cold keys become the hottest; the previous hottest drop to the next ranks.
    HotIn,
    /// The `keys` hottest keys become cold; the next `keys` move up to the top.
    HotOut,
    /// `keys` randomly chosen hot keys are replaced by random cold keys.
    Random,
}

impl Dynamic {
    /// Parses `hot-in`, `hot-out` or `random`.
    pub fn parse(s: &str) -> Result<Dynamic, WorkloadError> {
        match s {
            "hot-in" => Ok(Dynamic::HotIn),
            "hot-out" => Ok(Dynamic::HotOut),
            "random" => Ok(Dynamic::Random),
            other => Err(WorkloadError::Invalid {
                workload: "dynamic".into(),
                what: format!("pattern {other:?}: expected hot-in, hot-out or random"),
            }),
        }
    }
}

/// Remaps key numbers per period: a request drawn for key number `x` goes to `occupant(x)`, a
/// bijection that moves the hottest key numbers of the base (scrambled Zipfian) distribution.
#[derive(Clone, Debug)]
pub struct PopularityShift {
    pattern: Dynamic,
    keys: usize,
    /// The 2·keys hottest distinct key numbers, hottest first.
    hot: Vec<i64>,
    record_count: i64,
    seed: u64,
}

impl PopularityShift {
    /// For a Zipfian workload over `spec.record_count` records, moving `keys` keys per period.
    pub fn new(
        pattern: Dynamic,
        spec: &WorkloadSpec,
        keys: usize,
        seed: u64,
    ) -> Result<PopularityShift, WorkloadError> {
        let bad = |what: String| WorkloadError::Invalid {
            workload: spec.name.clone(),
            what,
        };
        let Distribution::Zipfian(theta) = spec.distribution else {
            return Err(bad(
                "dynamic popularity needs the zipfian distribution".into()
            ));
        };
        if keys == 0 || (keys as i64).saturating_mul(8) > spec.record_count {
            return Err(bad(format!(
                "{keys} dynamic keys need at least 8× as many records (have {})",
                spec.record_count
            )));
        }
        let g = ScrambledZipfian::with_theta(0, zipfian_max(spec), theta)?;
        let mut hot = Vec::with_capacity(2 * keys);
        let mut seen = std::collections::HashSet::new();
        let mut rank = 0i64;
        while hot.len() < 2 * keys && rank < spec.record_count * 64 {
            let k = g.item_of_rank(rank);
            // Items beyond the loaded records are redrawn by the generator, never requested.
            if k < spec.record_count && seen.insert(k) {
                hot.push(k);
            }
            rank += 1;
        }
        if hot.len() < 2 * keys {
            return Err(bad("could not find enough distinct hot keys".into()));
        }
        Ok(PopularityShift {
            pattern,
            keys,
            hot,
            record_count: spec.record_count,
            seed,
        })
    }

    /// The hottest key numbers of the base distribution (2·keys of them, hottest first).
    pub fn hot(&self) -> &[i64] {
        &self.hot
    }

    /// `keys` cold key numbers for `period` (random, not among the hot ones), deterministic.
    pub fn cold(&self, period: u64) -> Vec<i64> {
        let mut rng = Rng::new(self.seed ^ period.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let hot: std::collections::HashSet<i64> = self.hot.iter().copied().collect();
        let mut out = Vec::with_capacity(self.keys);
        let mut taken = std::collections::HashSet::new();
        while out.len() < self.keys {
            let k = rng.below(self.record_count as u64) as i64;
            if !hot.contains(&k) && taken.insert(k) {
                out.push(k);
            }
        }
        out
    }

    /// The remapping of `period` (period 0 is the identity: an empty map).
    pub fn mapping(&self, period: u64) -> std::collections::HashMap<i64, i64> {
        let mut m = std::collections::HashMap::new();
        if period == 0 {
            return m;
        }
        let k = self.keys;
        let cold = self.cold(period);
        let (top, next) = self.hot.split_at(k);
        match self.pattern {
            Dynamic::HotIn => {
                for i in 0..k {
                    m.insert(top[i], cold[i]);
                    m.insert(next[i], top[i]);
                    m.insert(cold[i], next[i]);
                }
            }
            Dynamic::HotOut => {
                for i in 0..k {
                    m.insert(top[i], next[i]);
                    m.insert(next[i], cold[i]);
                    m.insert(cold[i], top[i]);
                }
            }
            Dynamic::Random => {
                let mut rng = Rng::new(self.seed.rotate_left(17) ^ period);
                let mut idx: Vec<usize> = (0..self.hot.len()).collect();
                for i in 0..k {
                    let j = i + rng.below((idx.len() - i) as u64) as usize;
                    idx.swap(i, j);
                }
                for i in 0..k {
                    let h = self.hot[idx[i]];
                    m.insert(h, cold[i]);
                    m.insert(cold[i], h);
                }
            }
        }
        m
    }
}
