//! `tern kv experiment nocache`: the NoCache baseline end to end from one command — YCSB load,
//! A/B/C/D/F and write-only on two in-process RocksDB servers, FarReach's server rotation (16
//! emulated servers, and 32/64/128 for workload A), latency at open-loop target rates, dynamic
//! popularity — each as a JSON report and a PNG, plus `summary.json`, `summary.png` and
//! `nocache.md` (a table with the command, machine and date).

use anyhow::{bail, Context};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tern_kv::bench::{self, BenchConfig, BenchReport, DynamicConfig};
use tern_kv::rotation::RotationReport;
use tern_kv::router::Router;
use tern_kv::storage::StoreOptions;
use tern_kv::ycsb::{Dynamic, WorkloadSpec};

use super::cmd_kv::{plot, say, write_json};

/// `tern kv experiment`
#[derive(clap::Args, Debug)]
pub struct ExperimentArgs {
    /// The suite: `nocache` (the NoCache baseline), `exp1` … `exp10` (FarReach's evaluation,
    /// each with NoCache, NetCache and FarReach), `all` (exp1 … exp10 in order), or MADINC's
    /// `madinc-users`, `madinc-policies`, `madinc-distribution`, `madinc-burst`,
    /// `madinc-tenants`, `madinc-all` (only --out, --quick, --ops and --no-plot apply).
    pub(crate) suite: String,
    /// Output directory (JSON reports, PNGs, Markdown tables).
    #[arg(long, default_value = "bench/kv")]
    pub(crate) out: PathBuf,
    /// Small sizes (exp1 … exp10): each experiment in under a minute, for tests.
    #[arg(long)]
    pub(crate) quick: bool,
    /// Records loaded (nocache: 100000; exp*: 100000, --quick 1000).
    #[arg(long)]
    pub(crate) records: Option<i64>,
    /// Operations per workload run / request stream (100000; --quick 1000).
    #[arg(long)]
    pub(crate) ops: Option<i64>,
    /// Client threads (4; --quick 2).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Worker threads per server.
    #[arg(long, default_value_t = 2)]
    pub(crate) workers: usize,
    /// Emulated servers of the rotation runs (16; --quick 4).
    #[arg(long)]
    pub(crate) rotation: Option<usize>,
    /// Emulated server counts for the scalability runs (nocache: 32,64,128; exp3:
    /// 16,32,64,128; --quick 4,8).
    #[arg(long, value_delimiter = ',')]
    pub(crate) scale: Option<Vec<usize>>,
    /// Open-loop target rates for workload A, as fractions of its closed-loop throughput
    /// (nocache suite).
    #[arg(long, value_delimiter = ',', default_value = "0.2,0.4,0.6,0.8")]
    pub(crate) rates: Vec<f64>,
    /// Dynamic-popularity period in seconds (FarReach: 10; nocache 1, exp7 2, --quick 0.25).
    #[arg(long)]
    pub(crate) dynamic_period: Option<f64>,
    /// Cache size in records (exp*: 10000, FarReach's; --quick 50).
    #[arg(long)]
    pub(crate) cache_size: Option<u32>,
    /// Repetitions of every point (exp*: 3, `all`: 1 so that the suite stays under an hour;
    /// --quick 2; the paper: 5).
    #[arg(long)]
    pub(crate) repeat: Option<usize>,
    /// Operations of a dynamic run (exp7, exp8: 300000; --quick 1500).
    #[arg(long)]
    pub(crate) dyn_ops: Option<i64>,
    /// Methods to run (default nocache,netcache,farreach).
    #[arg(long, value_delimiter = ',')]
    pub(crate) methods: Option<Vec<String>>,
    /// Skip the plots.
    #[arg(long)]
    pub(crate) no_plot: bool,
    /// exp10's probe (internal): the program to load.
    #[arg(long, hide = true)]
    pub(crate) probe_program: Option<String>,
    /// exp10's probe (internal): packets to send.
    #[arg(long, hide = true, default_value_t = 0)]
    pub(crate) probe_packets: u64,
}

/// One row of the summary table.
#[derive(Serialize, Debug)]
struct Row {
    experiment: String,
    workload: String,
    servers: usize,
    throughput: f64,
    p50_us: u64,
    p99_us: u64,
    p999_us: u64,
    imbalance: f64,
    errors: u64,
    mismatches: u64,
    file: String,
}

#[derive(Serialize, Debug)]
struct Summary {
    kind: &'static str,
    date: String,
    machine: String,
    command: String,
    records: i64,
    ops: i64,
    threads: usize,
    load_throughput: f64,
    rows: Vec<Row>,
    /// (workload, 2-server closed-loop ops/s, rotation aggregate requests/s)
    workloads: Vec<(String, f64, f64)>,
    /// (emulated servers, aggregate requests/s, normalized, imbalance)
    scalability: Vec<(usize, f64, f64, f64)>,
    /// (target ops/s, achieved ops/s, mean µs, p50, p99)
    latency_curve: Vec<(f64, f64, f64, u64, u64)>,
    /// (pattern, ops/s per 100 ms)
    dynamic: Vec<(String, Vec<u64>)>,
}

pub(crate) fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or("?".into(), |kib| {
            format!("{:.0} GiB", kib as f64 / 1048576.0)
        });
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_default();
    format!("{cores} cores ({cpu}), {mem} RAM, Linux {kernel}, load average {load} at start")
}

pub(crate) fn now_utc() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn row(experiment: &str, r: &BenchReport, file: &str) -> Row {
    Row {
        experiment: experiment.into(),
        workload: r.workload.clone(),
        servers: r.servers,
        throughput: r.throughput,
        p50_us: r.latency.p50_us,
        p99_us: r.latency.p99_us,
        p999_us: r.latency.p999_us,
        imbalance: r.imbalance,
        errors: r.errors,
        mismatches: r.mismatches,
        file: file.into(),
    }
}

fn rot_row(r: &RotationReport, file: &str) -> Row {
    Row {
        experiment: format!("rotation {}", r.servers),
        workload: r.workload.clone(),
        servers: r.servers,
        throughput: r.aggregate_rate,
        p50_us: r.bottleneck_run.latency.p50_us,
        p99_us: r.bottleneck_run.latency.p99_us,
        p999_us: r.bottleneck_run.latency.p999_us,
        imbalance: r.imbalance,
        errors: r.errors,
        mismatches: r.mismatches,
        file: file.into(),
    }
}

/// Runs `tern kv experiment`.
pub fn run(a: ExperimentArgs) -> anyhow::Result<ExitCode> {
    if a.suite.starts_with("madinc") {
        super::madinc_exp::run(&a)?;
        return Ok(ExitCode::SUCCESS);
    }
    if a.suite == "probe" {
        super::kv_paper::probe(&a)?;
        return Ok(ExitCode::SUCCESS);
    }
    if a.suite != "nocache" {
        super::kv_paper::run(&a)?;
        return Ok(ExitCode::SUCCESS);
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    if !a.no_plot {
        // Fail early (before minutes of runs) if the plot script is missing.
        super::cmd_kv::plot_script()?;
    }
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let machine = machine();
    let date = now_utc();
    let data = std::env::temp_dir().join(format!("tern-kv-exp-{}", std::process::id()));
    let servers = bench::start_local_servers(&data, 2, 1, a.workers, &StoreOptions::default())?;
    let result = suite(&a, &servers, command, machine, date);
    for s in servers {
        if let Err(e) = s.shutdown() {
            eprintln!("tern kv experiment: stopping a server: {e}");
        }
    }
    let _ = std::fs::remove_dir_all(&data);
    result?;
    Ok(ExitCode::SUCCESS)
}

fn suite(
    a: &ExperimentArgs,
    servers: &[tern_kv::server::ServerHandle],
    command: String,
    machine: String,
    date: String,
) -> anyhow::Result<()> {
    let records = a.records.unwrap_or(100_000);
    let ops = a.ops.unwrap_or(100_000);
    let threads = a.threads.unwrap_or(4);
    let rotation = a.rotation.unwrap_or(16);
    let scale = a.scale.clone().unwrap_or(vec![32, 64, 128]);
    let dynamic_period = a.dynamic_period.unwrap_or(1.0);
    let out = |name: &str| a.out.join(name);
    let plots = |json: &Path, png: &str| -> anyhow::Result<()> {
        if !a.no_plot {
            plot(&[json], &out(png))?;
        }
        Ok(())
    };
    let addrs = bench::addrs(servers);
    let base = |name: &str| -> anyhow::Result<BenchConfig> {
        let mut w = WorkloadSpec::core(name, records, ops)?;
        w.name = name.to_string();
        Ok(BenchConfig {
            router: Router::new(addrs.clone())?,
            workload: w,
            threads,
            seed: 1,
            timeout: Duration::from_millis(200),
            retries: 5,
            target_rate: None,
            dynamic: None,
            preserve: None,
        })
    };
    let mut rows = Vec::new();
    let mut workloads = Vec::new();

    say("== load");
    let l = bench::load(&base("a")?)?;
    say(&format!(
        "load: {} records in {:.2} s = {:.0} records/s ({} errors)",
        l.records, l.seconds, l.throughput, l.errors
    ));
    write_json(&out("load.json"), &l)?;
    if l.errors > 0 {
        bail!("{} records failed to load", l.errors);
    }

    let names = ["a", "b", "c", "d", "f", "write-only"];
    let mut closed = Vec::new();
    for name in names {
        say(&format!("== workload {name}, 2 servers, closed loop"));
        let r = bench::run(&base(name)?)?;
        say(r
            .summary()
            .lines()
            .take(4)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str());
        let file = format!("{name}.json");
        write_json(&out(&file), &r)?;
        plots(&out(&file), &format!("{name}.png"))?;
        rows.push(row("closed loop", &r, &file));
        closed.push((name, r.throughput));
    }

    // Rotation: both physical servers must hold every record.
    for p in &addrs {
        let mut c = base("a")?;
        c.router = Router::new(vec![*p])?;
        let l = bench::load(&c)?;
        if l.errors > 0 {
            bail!("{} records failed to load into {p}", l.errors);
        }
    }
    let phys = [addrs[0], addrs[1]];
    for (name, tput) in &closed {
        say(&format!(
            "== workload {name}, server rotation over {} emulated servers",
            rotation
        ));
        let r = tern_kv::rotation::run(&base(name)?, rotation, phys)?;
        say(r
            .summary()
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str());
        let file = format!("rot{}-{name}.json", rotation);
        write_json(&out(&file), &r)?;
        plots(&out(&file), &format!("rot{}-{name}.png", rotation))?;
        rows.push(rot_row(&r, &file));
        workloads.push((name.to_string(), *tput, r.aggregate_rate));
    }
    let mut scalability = Vec::new();
    for &n in std::iter::once(&rotation).chain(scale.iter()) {
        let file = format!("rot{n}-a.json");
        if n == rotation {
            let text = std::fs::read_to_string(out(&file))?;
            let v: serde_json::Value = serde_json::from_str(&text)?;
            scalability.push((
                n,
                v["aggregate_rate"].as_f64().unwrap_or(0.0),
                v["normalized"].as_f64().unwrap_or(0.0),
                v["imbalance"].as_f64().unwrap_or(0.0),
            ));
            continue;
        }
        say(&format!(
            "== workload a, server rotation over {n} emulated servers"
        ));
        let r = tern_kv::rotation::run(&base("a")?, n, phys)?;
        say(r
            .summary()
            .lines()
            .take(2)
            .collect::<Vec<_>>()
            .join("\n")
            .as_str());
        write_json(&out(&file), &r)?;
        plots(&out(&file), &format!("rot{n}-a.png"))?;
        rows.push(rot_row(&r, &file));
        scalability.push((n, r.aggregate_rate, r.normalized, r.imbalance));
    }

    // Latency at open-loop target rates (workload A).
    let peak = closed.first().map_or(1000.0, |c| c.1);
    let mut latency_curve = Vec::new();
    for (i, f) in a.rates.iter().enumerate() {
        let rate = (peak * f).max(100.0);
        say(&format!("== workload a, open loop at {rate:.0} ops/s"));
        let mut c = base("a")?;
        c.target_rate = Some(rate);
        // About two seconds of operations at the target rate.
        c.workload.operation_count = ((rate * 2.0) as i64).clamp(200, ops);
        let r = bench::run(&c)?;
        let file = format!("rate{}.json", i + 1);
        write_json(&out(&file), &r)?;
        rows.push(row(&format!("open loop {rate:.0}/s"), &r, &file));
        latency_curve.push((
            rate,
            r.throughput,
            r.latency.mean_us,
            r.latency.p50_us,
            r.latency.p99_us,
        ));
    }

    // Dynamic popularity (write-only, two servers, no rotation, as FarReach's Exp#7).
    let mut dynamic = Vec::new();
    for p in ["static", "hot-in", "hot-out", "random"] {
        say(&format!("== write-only, dynamic popularity {p}"));
        let mut c = base("write-only")?;
        if p != "static" {
            c.dynamic = Some(DynamicConfig {
                pattern: Dynamic::parse(p)?,
                keys: 200,
                period_s: dynamic_period,
            });
        }
        let r = bench::run(&c)?;
        let file = format!("dyn-{p}.json");
        write_json(&out(&file), &r)?;
        plots(&out(&file), &format!("dyn-{p}.png"))?;
        rows.push(row(&format!("dynamic {p}"), &r, &file));
        dynamic.push((p.to_string(), r.timeline_100ms.clone()));
    }

    let bad: u64 = rows.iter().map(|r| r.errors + r.mismatches).sum();
    let summary = Summary {
        kind: "nocache-summary",
        date,
        machine,
        command,
        records,
        ops,
        threads,
        load_throughput: l.throughput,
        rows,
        workloads,
        scalability,
        latency_curve,
        dynamic,
    };
    write_json(&out("summary.json"), &summary)?;
    plots(&out("summary.json"), "summary.png")?;
    std::fs::write(out("nocache.md"), markdown(&summary)).context("writing nocache.md")?;
    say(&format!(
        "tern kv experiment nocache: done; table in {}",
        out("nocache.md").display()
    ));
    if bad > 0 {
        bail!("{bad} operations failed or read wrong values (see the table)");
    }
    Ok(())
}

fn markdown(s: &Summary) -> String {
    let mut m = String::from("# NoCache baseline (tern kv experiment nocache)\n\n");
    m += &format!(
        "* **Date**: {}\n* **Machine**: {}\n* **Command**: `{}`\n* {} records (16-byte keys, \
         128-byte values), {} operations per run, {} client threads; two in-process RocksDB \
         servers on loopback; load phase {:.0} records/s.\n\n",
        s.date, s.machine, s.command, s.records, s.ops, s.threads, s.load_throughput
    );
    m += "Rotation rows: aggregate = sum of the emulated servers' request rates (requests/s; an \
          F read-modify-write is two requests), latency of the bottleneck-only iteration, \
          imbalance = max/min per-server rate. Other rows: operations/s, imbalance = max/mean \
          per-server requests.\n\n";
    m += "| experiment | workload | servers | throughput | p50 (µs) | p99 (µs) | p99.9 (µs) | imbalance | errors | mismatches | report |\n";
    m += "|---|---|---|---|---|---|---|---|---|---|---|\n";
    for r in &s.rows {
        m += &format!(
            "| {} | {} | {} | {:.0} | {} | {} | {} | {:.2} | {} | {} | {} |\n",
            r.experiment,
            r.workload,
            r.servers,
            r.throughput,
            r.p50_us,
            r.p99_us,
            r.p999_us,
            r.imbalance,
            r.errors,
            r.mismatches,
            r.file
        );
    }
    m
}
