//! `tern kv`: the key-value suite's commands — `server` (a RocksDB storage server on UDP),
//! `bench` (YCSB load + run against servers, or against servers it starts in-process),
//! `shutdown` and `snapshot` (control messages to running servers), `up` / `down` (topologies,
//! in `cmd_kv_up`) and `experiment` (the NoCache experiments with plots, in `cmd_kv_exp`).
//! The work is in `tern-kv`.

use anyhow::{bail, Context};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tern_kv::bench::{self, BenchConfig, DynamicConfig};
use tern_kv::client::Client;
use tern_kv::router::Router;
use tern_kv::server::{start, ServerConfig};
use tern_kv::storage::StoreOptions;
use tern_kv::ycsb::{Distribution, Dynamic, WorkloadSpec};

/// `tern kv …`
#[derive(clap::Args)]
pub struct KvArgs {
    #[command(subcommand)]
    command: KvCommand,
}

#[derive(clap::Subcommand)]
enum KvCommand {
    /// Run a storage server: N RocksDB partitions behind one UDP port, W worker threads.
    Server(ServerArgs),
    /// Load records and run a YCSB workload (closed loop); print and optionally save a report.
    Bench(Box<BenchArgs>),
    /// Ask servers to flush and stop.
    Shutdown(ControlArgs),
    /// Ask servers for a snapshot; prints each one's live-record count.
    Snapshot(ControlArgs),
    /// Bring up a topology (loopback, in-process, or network namespaces through a tern switch),
    /// optionally run one command in it, tear it down on exit or ctrl-c.
    Up(Box<super::cmd_kv_up::UpArgs>),
    /// Remove namespaces left by `tern kv up` runs that were killed.
    Down(super::cmd_kv_up::DownArgs),
    /// Run an experiment suite end to end (JSON reports, a table and plots).
    Experiment(super::cmd_kv_exp::ExperimentArgs),
    /// The in-process switch of `--mode sim` as a process of its own, with BMv2's Thrift API
    /// (what `tern kv up --mode loopback --cache ...` runs, and its fault injector SIGKILLs).
    SimSwitch(super::cmd_kv_up::SimSwitchArgs),
    /// One switch of a MADINC network as a process (what the measured MADINC experiments run).
    MadincSwitch(super::madinc_net::MadSwitchArgs),
    /// The caches' switch OS against a running switch's Thrift API (what `tern kv up --mode
    /// netns --cache ...` runs in the switch namespace).
    Switchos(super::cmd_kv_up::SwitchOsArgs),
    /// History checker: concurrent reads, writes and deletes of unique values on a skewed key
    /// set; every read must return the latest acknowledged write or one still in flight.
    Check(CheckArgs),
    /// Print the cache counters `tern kv up --stats-file F` wrote (hit ratio, admissions,
    /// evictions, snapshot durations, control messages retried).
    Stats(StatsArgs),
}

#[derive(clap::Args)]
struct CheckArgs {
    /// Comma-separated server addresses (default: TERN_KV_SERVERS, set by `tern kv up`).
    #[arg(long)]
    servers: Option<String>,
    /// Keys (ids 1..=N, skewed access).
    #[arg(long, default_value_t = 200)]
    keys: u64,
    /// Client threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Operations per thread.
    #[arg(long, default_value_t = 5000)]
    ops: usize,
    /// Fraction of writes.
    #[arg(long, default_value_t = 0.5)]
    write_ratio: f64,
    /// Fraction of the writes that are deletes.
    #[arg(long, default_value_t = 0.05)]
    delete_ratio: f64,
    /// Value size in bytes (16..=128).
    #[arg(long, default_value_t = 64)]
    value_size: usize,
    /// Hot-set shifts: the run is cut into N + 1 phases, each moving the skewed key
    /// distribution by keys / (N + 1) ids (admission and eviction under a moving hot set).
    #[arg(long, default_value_t = 0)]
    shifts: u32,
    /// Fraction of the PUTs that write a large value (never cached; forwarded to the server).
    #[arg(long, default_value_t = 0.0)]
    large_ratio: f64,
    /// Size of the large values in bytes (129..=8192; over namespaces stay under the MTU).
    #[arg(long, default_value_t = 600)]
    large_size: usize,
    /// Per-attempt timeout in milliseconds.
    #[arg(long, default_value_t = 200)]
    timeout_ms: u64,
    /// Retries after the first attempt.
    #[arg(long, default_value_t = 10)]
    retries: u32,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Preserve the switch-answered writes in this file for switch recovery (default: the
    /// TERN_KV_PRESERVE environment variable that `tern kv up --cache` sets).
    #[arg(long)]
    preserve: Option<PathBuf>,
}

#[derive(clap::Args)]
struct StatsArgs {
    /// The JSON file `tern kv up --stats-file` wrote.
    file: PathBuf,
}

#[derive(clap::Args)]
struct ServerArgs {
    /// Directory for the partitions (created if missing).
    #[arg(long)]
    dir: PathBuf,
    /// UDP port (FarReach's servers use 1152 + index).
    #[arg(long, default_value_t = 1152)]
    port: u16,
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// Number of RocksDB partitions.
    #[arg(long, default_value_t = 1)]
    partitions: usize,
    /// Worker threads.
    #[arg(long, default_value_t = 2)]
    workers: usize,
    /// Server index reported in replies.
    #[arg(long, default_value_t = 0)]
    index: u16,
    /// Fsync the WAL on every write.
    #[arg(long)]
    sync: bool,
    /// RocksDB block cache in MiB (shared by the partitions).
    #[arg(long, default_value_t = 64)]
    cache_mib: usize,
    /// Address of a cache's switch OS to report hot keys to (CACHE_POP).
    #[arg(long)]
    switchos: Option<SocketAddr>,
}

#[derive(clap::Args)]
struct BenchArgs {
    /// Preserve the switch-answered writes in this file for switch recovery (default: the
    /// TERN_KV_PRESERVE environment variable that `tern kv up --cache` sets).
    #[arg(long)]
    preserve: Option<PathBuf>,
    /// Comma-separated server addresses (host:port), in partition-range order (default: the
    /// TERN_KV_SERVERS environment variable that `tern kv up` sets).
    #[arg(long, conflicts_with = "local")]
    servers: Option<String>,
    /// Start this many servers in-process on free loopback ports instead.
    #[arg(long)]
    local: Option<usize>,
    /// Data directory of the in-process servers (default: a temporary one, removed after).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Partitions per in-process server.
    #[arg(long, default_value_t = 1)]
    partitions: usize,
    /// Workers per in-process server.
    #[arg(long, default_value_t = 1)]
    workers: usize,
    /// Workload: a, b, c, d, f, write-only, or load (load phase only).
    #[arg(long, default_value = "a")]
    workload: String,
    /// Records (YCSB recordcount).
    #[arg(long, default_value_t = 10_000)]
    records: i64,
    /// Operations (YCSB operationcount).
    #[arg(long, default_value_t = 10_000)]
    ops: i64,
    /// Client threads (one outstanding request each).
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 128)]
    value_len: usize,
    /// Override the request distribution: zipfian, uniform or latest.
    #[arg(long)]
    distribution: Option<String>,
    /// Zipfian constant.
    #[arg(long, default_value_t = 0.99)]
    theta: f64,
    /// Generator seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Per-attempt timeout in milliseconds.
    #[arg(long, default_value_t = 200)]
    timeout_ms: u64,
    /// Retries after the first attempt.
    #[arg(long, default_value_t = 5)]
    retries: u32,
    /// Open-loop target rate in ops/s over all threads (default: closed loop).
    #[arg(long)]
    rate: Option<f64>,
    /// Dynamic popularity: hot-in, hot-out or random (zipfian workloads).
    #[arg(long)]
    dynamic: Option<String>,
    /// Keys moved per dynamic period.
    #[arg(long, default_value_t = 200)]
    dynamic_keys: usize,
    /// Dynamic period in seconds.
    #[arg(long, default_value_t = 10.0)]
    dynamic_period: f64,
    /// Warm a cache up before the run (FarReach's static mode): the N keys the run uses most
    /// are reported for admission (WARMUPREQ) after the load phase.
    #[arg(long, default_value_t = 0)]
    warmup: usize,
    /// Skip the load phase (records already loaded).
    #[arg(long)]
    no_load: bool,
    /// Write the report as JSON to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// FarReach's server rotation: emulate N servers on two physical ones (`--local 2` or two
    /// `--servers`); both get every record.
    #[arg(long, value_name = "N")]
    rotation: Option<usize>,
    /// Draw the report as a PNG (throughput over time, latency CDF, per-server load) with
    /// scripts/kv-plot.sh (matplotlib in .venv-plot, created on first use).
    #[arg(long)]
    plot: Option<PathBuf>,
}

#[derive(clap::Args)]
struct ControlArgs {
    /// Comma-separated server addresses.
    #[arg(long)]
    servers: String,
}

/// Runs `tern kv`.
pub fn run(args: KvArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        KvCommand::Server(a) => server(a),
        KvCommand::Bench(a) => bench_cmd(*a),
        KvCommand::Shutdown(a) => control(a, true),
        KvCommand::Snapshot(a) => control(a, false),
        KvCommand::Up(a) => super::cmd_kv_up::up(*a),
        KvCommand::Down(a) => super::cmd_kv_up::down(a),
        KvCommand::Experiment(a) => super::cmd_kv_exp::run(a),
        KvCommand::Check(a) => check_cmd(a),
        KvCommand::SimSwitch(a) => super::cmd_kv_up::sim_switch(a),
        KvCommand::MadincSwitch(a) => super::madinc_net::mad_switch(a),
        KvCommand::Switchos(a) => super::cmd_kv_up::switchos_cmd(a),
        KvCommand::Stats(a) => {
            let text = std::fs::read_to_string(&a.file)
                .with_context(|| format!("reading {}", a.file.display()))?;
            let j: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: not a stats file", a.file.display()))?;
            say(&super::cmd_kv_up::stats_line(&j));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn server(a: ServerArgs) -> anyhow::Result<ExitCode> {
    let cfg = ServerConfig {
        dir: a.dir,
        addr: SocketAddr::new(a.bind, a.port),
        partitions: a.partitions,
        workers: a.workers,
        index: a.index,
        store: StoreOptions {
            sync: a.sync,
            block_cache: a.cache_mib << 20,
            ..StoreOptions::default()
        },
        switchos: a.switchos,
    };
    let handle = start(&cfg).context("starting the storage server")?;
    let stop = handle.stop_flag();
    ctrlc::set_handler(move || stop.store(true, Ordering::Release))
        .context("installing the ctrl-c handler")?;
    say(&format!(
        "tern kv server: {} partitions in {} on udp {} ({} workers); ctrl-c or `tern kv shutdown` to stop",
        cfg.partitions,
        cfg.dir.display(),
        handle.addr(),
        cfg.workers
    ));
    let [gets, puts, dels, stale, rejected, errors] =
        handle.wait().context("flushing on shutdown")?;
    say(&format!(
        "tern kv server: flushed and stopped ({gets} gets, {puts} puts, {dels} deletes, \
         {stale} stale writes, {rejected} rejected datagrams, {errors} store errors)"
    ));
    Ok(ExitCode::SUCCESS)
}

fn workload(a: &BenchArgs) -> anyhow::Result<WorkloadSpec> {
    let name = if a.workload == "load" {
        "c"
    } else {
        a.workload.as_str()
    };
    let mut w = WorkloadSpec::core(name, a.records, a.ops)?;
    w.name = a.workload.to_ascii_lowercase();
    w.value_len = a.value_len;
    if a.value_len > tern_kv::protocol::MAX_VALUE_LEN {
        bail!(
            "--value-len {} exceeds the protocol maximum of {} bytes",
            a.value_len,
            tern_kv::protocol::MAX_VALUE_LEN
        );
    }
    if let Distribution::Zipfian(_) = w.distribution {
        w.distribution = Distribution::Zipfian(a.theta);
    }
    if let Some(d) = &a.distribution {
        w.distribution = match d.as_str() {
            "zipfian" => Distribution::Zipfian(a.theta),
            "uniform" => Distribution::Uniform,
            "latest" => Distribution::Latest,
            other => bail!("--distribution {other:?}: expected zipfian, uniform or latest"),
        };
    }
    w.validate()?;
    Ok(w)
}

fn check_cmd(a: CheckArgs) -> anyhow::Result<ExitCode> {
    let Some(list) = a.servers.or_else(|| std::env::var("TERN_KV_SERVERS").ok()) else {
        bail!(
            "give --servers host:port,... (or run under `tern kv up`, which sets TERN_KV_SERVERS)"
        );
    };
    if a.keys == 0 || a.threads == 0 || !(0.0..=1.0).contains(&a.write_ratio) {
        bail!("--keys and --threads must be positive, --write-ratio in [0, 1]");
    }
    if !(0.0..=1.0).contains(&a.large_ratio)
        || !(129..=tern_kv::protocol::MAX_VALUE_LEN).contains(&a.large_size)
    {
        bail!(
            "--large-ratio must be in [0, 1] and --large-size in 129..={}",
            tern_kv::protocol::MAX_VALUE_LEN
        );
    }
    let cfg = tern_kv::history::CheckConfig {
        servers: Router::parse(&list)?.servers().to_vec(),
        keys: a.keys,
        threads: a.threads,
        ops: a.ops,
        write_ratio: a.write_ratio,
        delete_ratio: a.delete_ratio,
        value_len: a.value_size,
        large_ratio: a.large_ratio,
        shifts: a.shifts,
        large_len: a.large_size,
        timeout: std::time::Duration::from_millis(a.timeout_ms),
        retries: a.retries,
        seed: a.seed,
        preserve: a
            .preserve
            .or_else(|| std::env::var_os("TERN_KV_PRESERVE").map(PathBuf::from)),
    };
    let r = tern_kv::history::run(&cfg)?;
    say(&format!(
        "tern kv check: {} reads ({} answered by the switch), {} writes, {} deletes, {} errors; \
         violations: {} stale, {} unknown value, {} value/seq mixed",
        r.reads, r.switch_reads, r.writes, r.deletes, r.errors, r.stale, r.unknown, r.mixed
    ));
    if a.shifts > 0 {
        let per: Vec<String> = r
            .phase_reads
            .iter()
            .map(|(n, s)| format!("{:.3}", *s as f64 / (*n).max(1) as f64))
            .collect();
        say(&format!(
            "  switch-answered share of reads by hot-set phase: {}",
            per.join(" ")
        ));
    }
    if a.large_ratio > 0.0 {
        say(&format!(
            "  large values ({} bytes): {} writes, {} reads returned one",
            a.large_size, r.large_writes, r.large_reads
        ));
    }
    for e in &r.examples {
        say(&format!("  {e}"));
    }
    Ok(if r.violations() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Reports the `n` keys `ops` uses most for admission, then gives the switch OS time to admit
/// them (about 0.2 ms each).
fn warmup(cfg: &BenchConfig, ops: &[tern_kv::ycsb::KvOp], n: usize) -> anyhow::Result<()> {
    let mut freq: std::collections::HashMap<tern_kv::protocol::Key, u64> =
        std::collections::HashMap::new();
    for o in ops {
        *freq.entry(o.key).or_default() += 1;
    }
    let mut keys: Vec<_> = freq.into_iter().collect();
    keys.sort_by(|a, b| b.1.cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
    keys.truncate(n);
    let mut c = tern_kv::client::Client::new(cfg.router.clone(), cfg.timeout, cfg.retries)?;
    for (k, _) in &keys {
        c.warmup(*k)?;
    }
    std::thread::sleep(Duration::from_millis(500) + Duration::from_micros(200) * keys.len() as u32);
    say(&format!(
        "warm-up: {} keys reported for admission",
        keys.len()
    ));
    Ok(())
}

fn bench_cmd(a: BenchArgs) -> anyhow::Result<ExitCode> {
    let w = workload(&a)?;
    let env_servers = std::env::var("TERN_KV_SERVERS").ok();
    let servers = match (&a.servers, a.local) {
        (None, None) => env_servers,
        (s, _) => s.clone(),
    };
    let (router, local, tmp) = match (&servers, a.local) {
        (Some(list), None) => (Router::parse(list)?, Vec::new(), None),
        (None, Some(n)) => {
            let (dir, tmp) = match &a.dir {
                Some(d) => (d.clone(), None),
                None => {
                    let d =
                        std::env::temp_dir().join(format!("tern-kv-bench-{}", std::process::id()));
                    (d.clone(), Some(d))
                }
            };
            let servers = bench::start_local_servers(
                &dir,
                n,
                a.partitions,
                a.workers,
                &StoreOptions::default(),
            )?;
            (Router::new(bench::addrs(&servers))?, servers, tmp)
        }
        _ => bail!("give either --servers host:port,... (or TERN_KV_SERVERS) or --local N"),
    };
    let cfg = BenchConfig {
        router,
        workload: w,
        threads: a.threads,
        seed: a.seed,
        timeout: Duration::from_millis(a.timeout_ms),
        retries: a.retries,
        target_rate: a.rate,
        dynamic: match &a.dynamic {
            Some(p) => Some(DynamicConfig {
                pattern: Dynamic::parse(p)?,
                keys: a.dynamic_keys,
                period_s: a.dynamic_period,
            }),
            None => None,
        },
        preserve: a
            .preserve
            .clone()
            .or_else(|| std::env::var_os("TERN_KV_PRESERVE").map(PathBuf::from)),
    };
    let result = (|| -> anyhow::Result<()> {
        if let Some(n) = a.rotation {
            let addrs = cfg.router.servers().to_vec();
            let [p0, p1] = addrs[..] else {
                bail!(
                    "--rotation needs exactly two physical servers (--local 2 or two --servers), not {}",
                    addrs.len()
                );
            };
            if !a.no_load {
                for p in [p0, p1] {
                    let mut c = cfg.clone();
                    c.router = Router::new(vec![p])?;
                    let l = bench::load(&c)?;
                    say(&format!(
                        "load into {p}: {} records in {:.2} s ({} errors)",
                        l.records, l.seconds, l.errors
                    ));
                }
            }
            let report = tern_kv::rotation::run(&cfg, n, [p0, p1])?;
            say(report.summary().trim_end());
            if let Some(path) = &a.json {
                write_json(path, &report)?;
            }
            if let Some(png) = &a.plot {
                let json = a
                    .json
                    .clone()
                    .context("--plot needs --json (the plot reads it)")?;
                plot(&[json.as_path()], png)?;
            }
            return Ok(());
        }
        let load = if a.no_load {
            None
        } else {
            Some(bench::load(&cfg)?)
        };
        if a.workload == "load" {
            let l = load.context("workload `load` with --no-load does nothing")?;
            say(&format!(
                "load: {} records in {:.2} s = {:.0} records/s ({} errors)",
                l.records, l.seconds, l.throughput, l.errors
            ));
            if let Some(path) = &a.json {
                write_json(path, &l)?;
            }
            return Ok(());
        }
        let mut report = if a.warmup > 0 {
            let ops =
                tern_kv::ycsb::generate_with_ack_lag(&cfg.workload, cfg.seed, 2 * cfg.threads)?;
            warmup(&cfg, &ops, a.warmup)?;
            bench::run_ops(&cfg, ops)?
        } else {
            bench::run(&cfg)?
        };
        report.load = load;
        say(report.summary().trim_end());
        if let Some(path) = &a.json {
            write_json(path, &report)?;
            say(&format!("report written to {}", path.display()));
        }
        if let Some(png) = &a.plot {
            let json = a
                .json
                .clone()
                .context("--plot needs --json (the plot reads it)")?;
            plot(&[json.as_path()], png)?;
        }
        if report.errors > 0 || report.mismatches > 0 {
            bail!(
                "{} operations failed and {} reads returned a wrong value",
                report.errors,
                report.mismatches
            );
        }
        Ok(())
    })();
    for s in local {
        s.shutdown()?;
    }
    if let Some(t) = tmp {
        let _ = std::fs::remove_dir_all(t);
    }
    result?;
    Ok(ExitCode::SUCCESS)
}

fn control(a: ControlArgs, shutdown: bool) -> anyhow::Result<ExitCode> {
    let router = Router::parse(&a.servers)?;
    let n = router.servers().len();
    let addrs = router.servers().to_vec();
    let mut c = Client::new(router, Duration::from_millis(500), 3)?;
    for (i, addr) in addrs.iter().enumerate().take(n) {
        if shutdown {
            c.shutdown_server(i)?;
            say(&format!("{addr}: flushed and stopping"));
        } else {
            say(&format!("{addr}: {} live records", c.snapshot_server(i)?));
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes `value` as pretty JSON to `path`.
pub(crate) fn write_json<T: serde::Serialize>(
    path: &std::path::Path,
    value: &T,
) -> anyhow::Result<()> {
    std::fs::write(path, serde_json::to_string_pretty(value)?)
        .with_context(|| format!("writing {}", path.display()))
}

/// The plot script: `scripts/kv-plot.sh` under the current directory or the source checkout
/// this binary was built from (override with TERN_KV_PLOT).
pub(crate) fn plot_script() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("TERN_KV_PLOT") {
        return Ok(PathBuf::from(p));
    }
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/kv-plot.sh");
    [PathBuf::from("scripts/kv-plot.sh"), built]
        .into_iter()
        .find(|p| p.is_file())
        .context("scripts/kv-plot.sh not found (run from a tern checkout or set TERN_KV_PLOT)")
}

/// Draws JSON reports into `png` with the plot script.
pub(crate) fn plot(jsons: &[&std::path::Path], png: &std::path::Path) -> anyhow::Result<()> {
    let script = plot_script()?;
    let st = std::process::Command::new("bash")
        .arg(&script)
        .arg("-o")
        .arg(png)
        .args(jsons)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !st.success() {
        bail!("{} failed ({st})", script.display());
    }
    say(&format!("plot written to {}", png.display()));
    Ok(())
}

/// Prints a line to stdout; a closed pipe (e.g. `| head`) is not an error worth a panic.
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}
