//! `tern bench`: in-memory throughput, latency and memory of a program on one core.
//!
//! Owns: loading the program (P4-16 through tern's compiler, or BMv2 JSON), generating table
//! entries and traffic that match each other, the timed runs, and the report (stdout, or JSON
//! with `--json`). Entries go through [`tern_runtime::Runtime`] like any control plane's;
//! packets go through [`Switch::process_burst`] (outputs back to back in one buffer) when the
//! switch runs the generated lane, else [`Switch::process_batch`] with output buffers recycled.
//!
//! Entries and traffic are derived from the same flow numbers: flow `k` has destination
//! `10.r.r.h` (route `r = k mod routes`, host `h`), source `172.x.x.x`, UDP ports and MACs
//! derived from `k`. A table key field is filled from the flow by its name (`dstAddr`,
//! `srcAddr`, `dstPort`, `srcPort`, `protocol`, `etherType`, `ingress_port`; other fields get
//! the entry number); LPM tables get one /24 per route, other tables one entry per flow (up to
//! the table size). The action installed is the table's first action not named like a drop.

use anyhow::Context as _;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;
use tern_dataplane::{BurstOut, Switch, SwitchOptions};
use tern_model::{KeyTarget, MatchKind, Program};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};

/// The built-in program: the L3 router of `p4/bench/`.
const L3_ROUTER: &str = include_str!("../../../p4/bench/l3_router.p4");

#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Program: a P4-16 file (compiled with tern's compiler) or a BMv2 JSON file.
    /// Default: the built-in L3 router (p4/bench/l3_router.p4).
    #[arg(value_name = "PROG.p4|PROG.json")]
    pub program: Option<PathBuf>,
    /// Routes installed in each LPM table (one /24 each).
    #[arg(long, default_value_t = 1000)]
    pub routes: u32,
    /// Distinct flows in the traffic (and entries in each non-LPM table).
    #[arg(long, default_value_t = 1024)]
    pub flows: u32,
    /// Packets per timed run.
    #[arg(long, default_value_t = 2_000_000)]
    pub packets: u64,
    /// Frame size in bytes (without FCS; at least 42).
    #[arg(long, default_value_t = 60)]
    pub size: usize,
    /// Packets per batch handed to the switch.
    #[arg(long, default_value_t = 32)]
    pub batch: usize,
    /// Timed runs (the report gives min / median / max).
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Packets timed one by one for the latency percentiles (0: skip).
    #[arg(long, default_value_t = 200_000)]
    pub latency_samples: u64,
    /// Packets run with per-stage timing for the breakdown (0: skip).
    #[arg(long, default_value_t = 500_000)]
    pub stage_packets: u64,
    /// Run-to-completion worker threads (flows hashed to workers, tables updated RCU-style
    /// through an operation log); without it, one thread drives the switch directly.
    #[arg(long, value_name = "N")]
    pub workers: Option<usize>,
    /// Update storm: table updates per second applied by the control thread during the timed
    /// runs (the entries of one table flip between two next hops); every output is checked
    /// against the two reference forwardings. Implies `--workers 1` if not given.
    #[arg(long, value_name = "PER_SEC", default_value_t = 0)]
    pub update_rate: u64,
    /// Behaviour-level caching (`--bcache`, off by default); its counters are reported.
    #[command(flatten)]
    pub bcache: crate::cmd_bcache::BcacheArgs,
    /// Key-value workload (`--kv`, for `p4/kv/*.p4`).
    #[command(flatten)]
    pub kv_args: crate::cmd_bench_kv::KvBenchArgs,
    /// The table contents and traffic of one of B-Cache's cases (p4/bcache/): `--traffic
    /// case4` installs case4's entries (unless --commands) and sends case4's flows.
    #[command(flatten)]
    pub case: CaseTraffic,
}

/// `--commands`, `--traffic` and `--zipf` (single-threaded bench only).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct CaseTraffic {
    /// Install these runtime commands (simple_switch_CLI language) instead of the generated
    /// entries.
    #[arg(long, value_name = "FILE")]
    pub commands: Option<PathBuf>,
    /// Traffic of a B-Cache case (case1..case4, `tern bcache gen`): flows with their ingress
    /// ports from the case's population (most forwarded, some dropped by ACL and source
    /// guard, some flooded); the case's table contents are installed unless --commands.
    #[arg(long, value_name = "CASE")]
    pub traffic: Option<String>,
    /// Zipf skew of the flows' popularity with --traffic (0: every flow in turn).
    #[arg(long, value_name = "S", default_value_t = 0.0)]
    pub zipf: f64,
}

/// One flow's header values.
pub(crate) struct Flow {
    dst_ip: u32,
    src_ip: u32,
    dst_mac: u64,
    src_mac: u64,
    sport: u16,
    dport: u16,
}

pub(crate) fn flow(k: u32, routes: u32) -> Flow {
    let r = k % routes.max(1);
    let host = 1 + (k / routes.max(1)) % 254;
    Flow {
        dst_ip: (10 << 24) | ((r & 0xffff) << 8) | host,
        src_ip: (172 << 24) | ((16 + ((k >> 16) & 15)) << 16) | (k & 0xffff),
        dst_mac: 0x02ff_0000_0000 | k as u64,
        src_mac: 0x0200_0000_0000 | k as u64,
        sport: 1024 + (k % 60_000) as u16,
        dport: 5000 + (k % 60_000) as u16,
    }
}

/// `v` as a big-endian slot of `width` bits.
pub(crate) fn bytes_of(v: u64, width: u32) -> Vec<u8> {
    let n = width.div_ceil(8).max(1) as usize;
    let v = if width >= 64 {
        v
    } else {
        v & ((1u64 << width) - 1)
    };
    let mut out = vec![0u8; n];
    for (i, b) in out.iter_mut().rev().enumerate().take(8) {
        *b = (v >> (8 * i)) as u8;
    }
    out
}

/// The value a key field takes for flow `f` (entry number `i`), chosen by the field's name.
fn key_value(name: &str, width: u32, f: &Flow, i: u32) -> u64 {
    let last = name.rsplit('.').next().unwrap_or(name);
    match (last, width) {
        ("dstAddr", 48) => f.dst_mac,
        ("srcAddr", 48) => f.src_mac,
        ("dstAddr", _) => f.dst_ip as u64,
        ("srcAddr", _) => f.src_ip as u64,
        ("dstPort", _) => f.dport as u64,
        ("srcPort", _) => f.sport as u64,
        ("protocol", _) => 17,
        ("etherType", _) => 0x0800,
        ("ingress_port", _) => 0,
        _ => i as u64,
    }
}

/// Action parameter values for entry `i`: ports spread over 1..=4, everything else `i + 1`.
fn param_value(name: &str, width: u32, i: u32) -> Vec<u8> {
    param_value_alt(name, width, i, false)
}

/// Parameter values of entry `i` in the storm's second state (`alt`): another port, another
/// MAC, another value.
pub(crate) fn param_value_alt(name: &str, width: u32, i: u32, alt: bool) -> Vec<u8> {
    let a = alt as u64;
    if name.contains("port") && width <= 16 {
        bytes_of(1 + (i as u64 + 2 * a) % 4, width)
    } else if width == 48 {
        bytes_of((0x0200_00aa_0000 + (a << 20)) | i as u64, width)
    } else {
        bytes_of(i as u64 + 1 + (a << (width.min(17) - 1)), width)
    }
}

/// Install entries in every table of the program; returns (entries installed, failures,
/// first failure).
pub(crate) fn install(
    sw: &mut Switch,
    prog: &Program,
    args: &BenchArgs,
) -> (u64, u64, Option<String>) {
    let (mut ok, mut failed, mut first) = (0u64, 0u64, None);
    for pl in &prog.pipelines {
        for t in &pl.tables {
            if t.key.is_empty() || t.entries.is_some() || t.action_profile.is_some() {
                continue;
            }
            let Some(&ai) = t
                .actions
                .iter()
                .find(|a| {
                    let n = prog.actions[**a as usize].name.to_ascii_lowercase();
                    !n.contains("drop") && !n.contains("deny") && !n.ends_with("noaction")
                })
                .or(t.actions.first())
            else {
                continue;
            };
            let action = &prog.actions[ai as usize];
            let is_lpm = t.key.iter().any(|k| k.match_kind == MatchKind::Lpm);
            let prio = t
                .key
                .iter()
                .any(|k| matches!(k.match_kind, MatchKind::Ternary | MatchKind::Range));
            let mut count = if is_lpm { args.routes } else { args.flows };
            if t.max_size > 0 {
                count = count.min(t.max_size);
            }
            for i in 0..count {
                let f = flow(i, args.routes);
                let key: Vec<MatchParam> = t
                    .key
                    .iter()
                    .map(|k| match k.target {
                        KeyTarget::Valid(_) => MatchParam::Valid(true),
                        KeyTarget::Field(fr) => {
                            let w = prog.field_width(fr);
                            let v = bytes_of(key_value(&prog.field_name(fr), w, &f, i), w);
                            match k.match_kind {
                                MatchKind::Lpm => {
                                    let mut v = v;
                                    let len = w.min(24);
                                    for (j, b) in v.iter_mut().enumerate() {
                                        let keep = len.saturating_sub(8 * j as u32).min(8);
                                        *b &= (0xff00u16 >> keep) as u8;
                                    }
                                    MatchParam::Lpm {
                                        key: v,
                                        prefix_len: len,
                                    }
                                }
                                MatchKind::Ternary => MatchParam::Ternary {
                                    mask: vec![0xff; v.len()],
                                    key: v,
                                },
                                MatchKind::Range => MatchParam::Range {
                                    start: v.clone(),
                                    end: v,
                                },
                                _ => MatchParam::Exact(v),
                            }
                        }
                    })
                    .collect();
                let data: Vec<Vec<u8>> = action
                    .runtime_data
                    .iter()
                    .map(|(n, w)| param_value(n, *w, i))
                    .collect();
                let priority = prio.then_some(i as i32 + 1);
                match sw.mt_add_entry(&t.name, &key, &action.name, &data, priority) {
                    Ok(_) => ok += 1,
                    Err(e) => {
                        failed += 1;
                        first.get_or_insert_with(|| format!("table {}: {e}", t.name));
                    }
                }
            }
        }
    }
    (ok, failed, first)
}

/// An Ethernet/IPv4/UDP frame of `size` bytes for flow `f`, with a valid IPv4 checksum.
pub(crate) fn frame(f: &Flow, size: usize) -> Vec<u8> {
    let mut b = vec![0u8; size.max(42)];
    b[0..6].copy_from_slice(&f.dst_mac.to_be_bytes()[2..]);
    b[6..12].copy_from_slice(&f.src_mac.to_be_bytes()[2..]);
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    let total = (b.len() - 14) as u16;
    let ip = &mut b[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&f.src_ip.to_be_bytes());
    ip[16..20].copy_from_slice(&f.dst_ip.to_be_bytes());
    let mut s: u32 = ip
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    ip[10..12].copy_from_slice(&(!(s as u16)).to_be_bytes());
    b[34..36].copy_from_slice(&f.sport.to_be_bytes());
    b[36..38].copy_from_slice(&f.dport.to_be_bytes());
    b[38..40].copy_from_slice(&(total - 20).to_be_bytes());
    b
}

/// Run a file of runtime commands on `sw`; returns (commands that succeeded, failures, first
/// failure) like [`install`]. `what` names the source in messages.
pub(crate) fn run_commands(
    sw: &mut Switch,
    text: &str,
    what: &str,
) -> anyhow::Result<(u64, u64, Option<String>)> {
    let mut cli = tern_control::Cli::new(sw.program());
    let (mut ok, mut failed, mut first) = (0u64, 0u64, None);
    for (n, line) in text.lines().enumerate() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        let out = cli.execute(sw, l);
        if cli.last_command_failed() {
            failed += 1;
            first.get_or_insert_with(|| format!("{what} line {}: {l}: {}", n + 1, out.trim()));
        } else {
            ok += 1;
        }
    }
    Ok((ok, failed, first))
}

/// The cache's counters as a JSON object.
pub(crate) fn bcache_json(b: &tern_dataplane::bcache::Stats) -> String {
    format!(
        "{{\"lookups\":{},\"hits\":{},\"miss_absent\":{},\"miss_length\":{},\"bypass_uncacheable\":{},         \"bypass_debug\":{},\"admission_rejected\":{},\"inserts\":{},\"insert_refused_length\":{},         \"insert_refused_unexpected_write\":{},\"insert_refused_opt_out\":{},\"evictions\":{},\"invalidated\":{},\"invalidation_ops\":{},         \"flushes\":{},\"entries\":{},\"bytes\":{}}}",
        b.lookups,
        b.hits,
        b.miss_absent,
        b.miss_length,
        b.bypass_uncacheable,
        b.bypass_debug,
        b.admission_rejected,
        b.inserts,
        b.insert_refused_length,
        b.insert_refused_unexpected_write,
        b.insert_refused_opt_out,
        b.evictions,
        b.invalidated,
        b.invalidation_ops,
        b.flushes,
        b.entries,
        b.bytes
    )
}

/// Resident and peak memory (kB) from /proc/self/status, if readable.
pub(crate) fn memory_kb() -> (Option<u64>, Option<u64>) {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let get = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
    };
    (get("VmRSS:"), get("VmHWM:"))
}

pub(crate) fn load(args: &BenchArgs) -> anyhow::Result<(String, String)> {
    let Some(p) = &args.program else {
        let c = tern_p4::compile_str(L3_ROUTER, "p4/bench/l3_router.p4", &Default::default())
            .map_err(|d| anyhow::anyhow!("{d}"))?;
        return Ok(("p4/bench/l3_router.p4 (built in)".into(), c.json));
    };
    let name = p.display().to_string();
    if p.extension().is_some_and(|e| e == "json") {
        let json = std::fs::read_to_string(p).with_context(|| format!("reading {name}"))?;
        return Ok((name, json));
    }
    let c = tern_p4::compile_file(p, &Default::default()).map_err(|d| anyhow::anyhow!("{d}"))?;
    Ok((name, c.json))
}

use tern_dataplane::exec::stage::NAMES as STAGE_NAMES;

/// Per-stage cost (ns per packet, clock reads subtracted) over `packets` packets.
pub(crate) struct Stages {
    pub packets: u64,
    pub ns: Vec<f64>,
}

/// Run `packets` packets (batches cycled) with per-stage timing on.
pub(crate) fn stage_breakdown(
    sw: &mut Switch,
    batches: &[Vec<(u32, &[u8])>],
    packets: u64,
    clock_ns: f64,
) -> Stages {
    let mut out = Vec::new();
    sw.set_stage_timing(true);
    let mut done = 0u64;
    let mut bi = 0;
    while done < packets && !batches.is_empty() {
        sw.process_batch(&batches[bi], &mut out);
        sw.recycle_outputs(&mut out);
        sw.discard_digests();
        done += batches[bi].len() as u64;
        bi = (bi + 1) % batches.len();
    }
    let (ns, marks) = sw.stage_times().unwrap_or_default();
    sw.set_stage_timing(false);
    Stages {
        packets: done,
        ns: ns
            .iter()
            .zip(&marks)
            .map(|(n, m)| ((*n as f64 - *m as f64 * clock_ns) / done.max(1) as f64).max(0.0))
            .collect(),
    }
}

pub(crate) fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    if args.kv_args.kv {
        anyhow::ensure!(
            args.workers.is_none() && args.update_rate == 0,
            "--kv runs on one thread: --workers and --update-rate do not apply"
        );
        return crate::cmd_bench_kv::run(args);
    }
    if args.workers.is_some() || args.update_rate > 0 {
        anyhow::ensure!(
            args.case.commands.is_none() && args.case.traffic.is_none(),
            "--commands and --traffic are single-threaded only (not with --workers or --update-rate)"
        );
        return crate::cmd_bench_workers::run(args);
    }
    check_args(&args)?;
    run_single(args)
}

pub(crate) fn check_args(args: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.size >= 42,
        "--size {} is below 42 bytes (Ethernet+IPv4+UDP)",
        args.size
    );
    anyhow::ensure!(args.flows >= 1, "--flows must be at least 1");
    anyhow::ensure!(args.routes >= 1, "--routes must be at least 1");
    anyhow::ensure!(args.batch >= 1, "--batch must be at least 1");
    anyhow::ensure!(args.runs >= 1, "--runs must be at least 1");
    if let Some(w) = args.workers {
        anyhow::ensure!((1..=256).contains(&w), "--workers {w}: give 1 to 256");
    }
    Ok(())
}

fn run_single(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let (rss0, _) = memory_kb();

    let (name, json) = load(&args)?;
    let t = Instant::now();
    let opts = SwitchOptions {
        bcache: args.bcache.config()?,
        ..SwitchOptions::default()
    };
    let mut sw = Switch::from_json(&json, opts).with_context(|| format!("loading {name}"))?;
    let load_ms = t.elapsed().as_secs_f64() * 1e3;
    let prog = sw.program().clone();
    let tables: usize = prog.pipelines.iter().map(|p| p.tables.len()).sum();
    let (rss_loaded, _) = memory_kb();

    eprintln!("installing entries ...");
    let t = Instant::now();
    let case =
        match &args.case.traffic {
            Some(c) => Some(crate::bcache_cases::case_number(c).ok_or_else(|| {
                anyhow::anyhow!("--traffic {c}: give case1, case2, case3 or case4")
            })?),
            None => None,
        };
    let (entries, failed, first_err) = match (&args.case.commands, case) {
        (Some(path), _) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--commands: reading {}", path.display()))?;
            run_commands(&mut sw, &text, &path.display().to_string())?
        }
        (None, Some(c)) => {
            let n = crate::bcache_cases::install(&mut sw, c)
                .map_err(|e| anyhow::anyhow!("installing the case{c} contents: {e}"))?;
            (n as u64, 0, None)
        }
        (None, None) => install(&mut sw, &prog, &args),
    };
    let install_s = t.elapsed().as_secs_f64();
    if let Some(e) = &first_err {
        eprintln!("warning: {failed} entries were refused; first: {e}");
    }
    let (rss_entries, _) = memory_kb();

    // Flows as (ingress port, frame), and the order they are sent in (indices).
    let mut model: Vec<Option<u32>> = Vec::new();
    let (frames, seq): (Vec<(u32, Vec<u8>)>, Vec<u32>) = match case {
        Some(c) => {
            let len = if args.case.zipf > 0.0 {
                (args.flows as usize).max(1 << 18)
            } else {
                args.flows as usize
            };
            let t =
                crate::bcache_cases::Traffic::new(args.flows, args.case.zipf, len, args.size, 1);
            model = t
                .flows
                .iter()
                .map(|f| crate::bcache_cases::expected_port(f, c))
                .collect();
            let fr = t
                .flows
                .iter()
                .zip(t.frames)
                .map(|(f, b)| (f.port, b))
                .collect();
            (fr, t.sequence)
        }
        None => (
            (0..args.flows)
                .map(|k| (0, frame(&flow(k, args.routes), args.size)))
                .collect(),
            (0..args.flows).collect(),
        ),
    };
    let mut out: Vec<OutputPacket> = Vec::with_capacity(args.batch * 2);

    // Correctness / warm-up pass: every flow once.
    let (mut forwarded, mut as_modelled) = (0u64, 0u64);
    for (k, (p, f)) in frames.iter().enumerate() {
        sw.process_packet(*p, f, &mut out);
        forwarded += !out.is_empty() as u64;
        if let Some(want) = model.get(k) {
            let ok = match want {
                None => out.is_empty(),
                Some(u32::MAX) => out.len() > 1,
                Some(p) => out.len() == 1 && out[0].port == *p,
            };
            as_modelled += ok as u64;
        }
        sw.recycle_outputs(&mut out);
        sw.discard_digests();
    }

    // Timed runs.
    let batches: Vec<Vec<(u32, &[u8])>> = seq
        .chunks(args.batch)
        .map(|c| {
            c.iter()
                .map(|&i| (frames[i as usize].0, frames[i as usize].1.as_slice()))
                .collect()
        })
        .collect();
    let mut mpps = Vec::new();
    let mut sent_total = 0u64;
    // On the generated lane the outputs of a batch are written back to back into one buffer
    // (`Switch::process_burst`); every other switch hands back one buffer per output.
    let burst = sw.lane_generated();
    let mut burst_out = BurstOut::new();
    for run in 0..args.runs {
        let (mut done, mut sent) = (0u64, 0u64);
        let mut bi = 0usize;
        let mut last = Instant::now();
        let t = Instant::now();
        while done < args.packets {
            let b = &batches[bi];
            bi = (bi + 1) % batches.len();
            if burst {
                sw.process_burst(b, &mut burst_out);
                sent += burst_out.len() as u64;
                burst_out.clear();
            } else {
                sw.process_batch(b, &mut out);
                sent += out.len() as u64;
                sw.recycle_outputs(&mut out);
            }
            // No digest listener here: the learned samples are dropped, not queued forever.
            sw.discard_digests();
            done += b.len() as u64;
            if done % (1 << 20) < b.len() as u64 && last.elapsed().as_secs() >= 2 {
                eprintln!("  run {}: {done} / {} packets", run + 1, args.packets);
                last = Instant::now();
            }
        }
        let dt = t.elapsed().as_secs_f64();
        mpps.push(done as f64 / dt / 1e6);
        sent_total += sent;
        eprintln!("  run {}: {:.2} Mpps", run + 1, done as f64 / dt / 1e6);
    }
    let mut sorted = mpps.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];

    // Latency: each packet timed on its own (includes one clock read, measured below).
    let samples = args.packets.min(args.latency_samples) as usize;
    let mut lat = Vec::with_capacity(samples);
    for i in 0..samples {
        let (p, f) = &frames[seq[i % seq.len()] as usize];
        let t = Instant::now();
        sw.process_packet(*p, f, &mut out);
        lat.push(t.elapsed().as_nanos() as u64);
        sw.recycle_outputs(&mut out);
        sw.discard_digests();
    }
    lat.sort_unstable();
    let mut clock = Vec::with_capacity(10_000);
    for _ in 0..10_000 {
        let t = Instant::now();
        clock.push(t.elapsed().as_nanos() as u64);
    }
    clock.sort_unstable();
    let clock_ns = percentile(&clock, 0.5);
    // Mean cost of one clock read (the per-stage probe pays one per stage boundary).
    let clock_mean = {
        let n = 100_000u32;
        let t = Instant::now();
        for _ in 0..n {
            std::hint::black_box(Instant::now());
        }
        t.elapsed().as_nanos() as f64 / n as f64
    };
    // The cache's counters after the timed runs and latency samples (the stage breakdown
    // bypasses the cache: timed packets take the pipeline).
    let bstats = sw.bcache_stats();
    let stages = stage_breakdown(&mut sw, &batches, args.stage_packets, clock_mean);
    let (rss_end, hwm) = memory_kb();

    let pct = [0.5, 0.9, 0.99, 0.999];
    let lats: Vec<u64> = pct.iter().map(|p| percentile(&lat, *p)).collect();
    let kb = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("{v} kB"));
    println!("tern bench: {name}");
    println!(
        "  program: {tables} tables, loaded in {load_ms:.1} ms; {entries} entries installed in {:.2} s{}",
        install_s,
        if failed > 0 {
            format!(" ({failed} refused)")
        } else {
            String::new()
        }
    );
    println!("  native code: {}", sw.native_summary());
    println!(
        "  traffic: {} flows, {} routes, {}-byte frames, batches of {}; {} of {} flows forwarded",
        args.flows, args.routes, args.size, args.batch, forwarded, args.flows
    );
    if let Some(c) = case {
        println!(
            "  case{c} traffic (zipf {}): {as_modelled} of {} flows forwarded or dropped as the population says",
            args.case.zipf, args.flows
        );
    }
    println!(
        "  throughput (1 core, {} runs x {} packets): median {:.2} Mpps = {:.0} ns/packet (min {:.2}, max {:.2} Mpps); {:.1}% of packets sent",
        args.runs,
        args.packets,
        median,
        1e3 / median,
        sorted[0],
        sorted[sorted.len() - 1],
        100.0 * sent_total as f64 / (args.packets * args.runs as u64) as f64
    );
    println!(
        "  latency per packet (single packets, {samples} samples, clock read ~{clock_ns} ns included): p50 {} ns, p90 {} ns, p99 {} ns, p99.9 {} ns, max {} ns",
        lats[0],
        lats[1],
        lats[2],
        lats[3],
        lat.last().copied().unwrap_or(0)
    );
    if let Some(b) = &bstats {
        println!("  bcache: {b}");
        if let Some(p) = sw.bcache_plan() {
            println!(
                "  bcache plan: {}; key {} bytes, effect {} bytes",
                p.uncacheable
                    .as_deref()
                    .map_or("ingress cached".to_string(), |w| format!(
                        "not cached ({w})"
                    )),
                p.key_bytes,
                p.write_bytes
            );
        }
    }
    println!(
        "  memory: RSS {} at start, {} loaded, {} with entries, {} at end (peak {})",
        kb(rss0),
        kb(rss_loaded),
        kb(rss_entries),
        kb(rss_end),
        kb(hwm)
    );
    println!(
        "  per-stage breakdown ({} packets timed at every stage boundary, {clock_mean:.1} ns per clock read subtracted; instruction-exact figures: valgrind --tool=callgrind, bench/RESULTS.md):",
        stages.packets
    );
    let total: f64 = stages.ns.iter().sum();
    for (name, ns) in STAGE_NAMES.iter().zip(&stages.ns) {
        println!(
            "    {name:<9} {ns:>8.1} ns/packet  {:>5.1}%",
            if total > 0.0 { 100.0 * ns / total } else { 0.0 }
        );
    }
    println!(
        "    {:<9} {total:>8.1} ns/packet (untimed run: {:.1} ns/packet)",
        "sum",
        1e3 / median
    );

    if let Some(path) = &args.json {
        let mut j = String::new();
        let opt = |v: Option<u64>| v.map_or("null".to_string(), |v| v.to_string());
        let _ = write!(
            j,
            "{{\"program\":{:?},\"tables\":{tables},\"entries\":{entries},\"entries_refused\":{failed},\
             \"flows\":{},\"routes\":{},\"size\":{},\"batch\":{},\"packets_per_run\":{},\
             \"flows_forwarded\":{forwarded},\"mpps\":[{}],\"mpps_median\":{median:.4},\
             \"ns_per_packet\":{:.2},\"latency_ns\":{{\"p50\":{},\"p90\":{},\"p99\":{},\"p999\":{},\"max\":{}}},\
             \"clock_read_ns\":{clock_ns},\"bcache\":{},\"stages_ns\":{{{}}},\"rss_kb\":{{\"start\":{},\"loaded\":{},\"entries\":{},\"end\":{},\"peak\":{}}}}}",
            name,
            args.flows,
            args.routes,
            args.size,
            args.batch,
            args.packets,
            mpps.iter()
                .map(|m| format!("{m:.4}"))
                .collect::<Vec<_>>()
                .join(","),
            1e3 / median,
            lats[0],
            lats[1],
            lats[2],
            lats[3],
            lat.last().copied().unwrap_or(0),
            bstats.map_or("null".to_string(), |b| bcache_json(&b)),
            STAGE_NAMES
                .iter()
                .zip(&stages.ns)
                .map(|(n, v)| format!("\"{n}\":{v:.2}"))
                .collect::<Vec<_>>()
                .join(","),
            opt(rss0),
            opt(rss_loaded),
            opt(rss_entries),
            opt(rss_end),
            opt(hwm)
        );
        j.push('\n');
        std::fs::write(path, j).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_runtime::{ActionEntry, MeterRate};

    fn args(program: Option<PathBuf>) -> BenchArgs {
        BenchArgs {
            program,
            routes: 16,
            flows: 64,
            packets: 2_000,
            size: 60,
            batch: 8,
            runs: 1,
            json: None,
            latency_samples: 2_000,
            stage_packets: 2_000,
            workers: None,
            update_rate: 0,
            bcache: Default::default(),
            kv_args: Default::default(),
            case: Default::default(),
        }
    }

    /// The generated frames are valid IPv4 (checksum over the header folds to zero).
    #[test]
    fn frames_have_valid_checksums() {
        for k in [0, 1, 999, 70_000] {
            let f = frame(&flow(k, 1000), 60);
            assert_eq!(f.len(), 60);
            let s: u32 = f[14..34]
                .chunks(2)
                .map(|c| u16::from_be_bytes([c[0], c[1]]) as u32)
                .sum();
            assert_eq!((s & 0xffff) + (s >> 16), 0xffff, "flow {k}");
        }
    }

    fn bench_program(file: &str) -> (Switch, Program, BenchArgs) {
        let path =
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/bench/")).join(file);
        let a = args(Some(path));
        let (_, json) = load(&a).expect("compile");
        let sw = Switch::from_json(&json, SwitchOptions::default()).expect("load");
        let prog = sw.program().clone();
        (sw, prog, a)
    }

    /// Every bench program takes all its generated entries, and every flow is forwarded to the
    /// port its route names, with the TTL decremented.
    #[test]
    fn bench_programs_forward_every_flow() {
        for (file, min_tables) in [
            ("l3_router.p4", 1),
            ("l2l3_acl_nat.p4", 5),
            ("pipeline20.p4", 21),
        ] {
            let (mut sw, prog, a) = bench_program(file);
            let tables: usize = prog.pipelines.iter().map(|p| p.tables.len()).sum();
            assert!(tables >= min_tables, "{file}: {tables} tables");
            let (ok, failed, first) = install(&mut sw, &prog, &a);
            assert_eq!(failed, 0, "{file}: {first:?}");
            assert!(ok >= a.routes as u64, "{file}: {ok} entries");
            let mut out = Vec::new();
            for k in 0..a.flows {
                let f = frame(&flow(k, a.routes), 60);
                sw.process_packet(0, &f, &mut out);
                assert_eq!(out.len(), 1, "{file}: flow {k} not forwarded");
                let o = out.pop().expect("one packet");
                let route = k % a.routes;
                assert_eq!(o.port, 1 + route % 4, "{file}: flow {k}");
                assert_eq!(o.data[22], 63, "{file}: flow {k} TTL");
            }
        }
    }

    /// Send the same frames (bench flows that hit and miss, payloads random, some with a byte
    /// flipped, the IPv4 protocol changed or cut short) through both switches; the outputs
    /// (ports and bytes) must agree packet by packet.
    fn compare_traffic(
        native: &mut Switch,
        interp: &mut Switch,
        a: &BenchArgs,
        next: &mut impl FnMut() -> u64,
        name: &str,
    ) {
        let (mut o1, mut o2) = (Vec::new(), Vec::new());
        for k in 0..3 * a.flows {
            let mut f = frame(&flow(k, a.routes), 60 + (k as usize % 3) * 40);
            for b in &mut f[42..] {
                *b = next() as u8;
            }
            match k % 4 {
                1 => {
                    let i = next() as usize % 54;
                    f[i] = next() as u8;
                }
                2 => f[23] = [6, 1, 17, 0x11][(k as usize / 4) % 4],
                3 if k % 8 == 3 => f.truncate(next() as usize % f.len()),
                _ => {}
            }
            let port = k % 5;
            native.process_packet(port, &f, &mut o1);
            interp.process_packet(port, &f, &mut o2);
            let got: Vec<_> = o1.drain(..).map(|o| (o.port, o.data)).collect();
            let want: Vec<_> = o2.drain(..).map(|o| (o.port, o.data)).collect();
            assert_eq!(got, want, "{name}: packet {k} {f:02x?}");
        }
    }

    /// Add `n` entries to every ternary table (the same on every switch in `sws`): keys of the
    /// bench's flows under masks from `sets` (one mask per field for each set: all ones,
    /// none, the high half or the low nibble of each byte), priorities -2 to 3 (repeated: ties go to the
    /// smaller slot; some negative), every action of the table in turn. They overlap each other and the
    /// bench's full-mask entries (priorities from 1 up), so hits cross tuples and priorities.
    fn add_overlapping_ternary(
        sws: [&mut Switch; 2],
        prog: &Program,
        a: &BenchArgs,
        sets: std::ops::Range<u32>,
        n: u32,
        next: &mut impl FnMut() -> u64,
    ) {
        let [x, y] = sws;
        for t in prog.pipelines.iter().flat_map(|p| &p.tables) {
            let ternary = t.key.iter().any(|k| k.match_kind == MatchKind::Ternary);
            if !ternary || t.entries.is_some() || t.action_profile.is_some() {
                continue;
            }
            for j in 0..n {
                let r = next();
                let i = (r % u64::from(a.flows)) as u32;
                let f = flow(i, a.routes);
                let set = sets.start + ((r >> 16) as u32 % (sets.end - sets.start));
                let key: Vec<MatchParam> = t
                    .key
                    .iter()
                    .enumerate()
                    .map(|(fi, k)| match k.target {
                        KeyTarget::Valid(_) => MatchParam::Valid(true),
                        KeyTarget::Field(fr) => {
                            let w = prog.field_width(fr);
                            let v = bytes_of(key_value(&prog.field_name(fr), w, &f, i), w);
                            let nb = v.len();
                            let m: Vec<u8> = (0..nb)
                                // Field `fi`'s pattern: digit `fi % 3` of `set` in base 4, so
                                // sets below 16 have distinct masks when there are two
                                // fields or more.
                                .map(|b| match (set >> (2 * (fi as u32 % 3))) & 3 {
                                    0 => 0xff,
                                    1 => 0,
                                    2 if b < nb.div_ceil(2) => 0xff,
                                    2 => 0,
                                    _ => 0x0f,
                                })
                                .collect();
                            match k.match_kind {
                                MatchKind::Ternary => MatchParam::Ternary {
                                    key: v.iter().zip(&m).map(|(a, b)| a & b).collect(),
                                    mask: m,
                                },
                                _ => MatchParam::Exact(v),
                            }
                        }
                    })
                    .collect();
                let ai = t.actions[j as usize % t.actions.len()];
                let action = &prog.actions[ai as usize];
                let data: Vec<Vec<u8>> = action
                    .runtime_data
                    .iter()
                    .map(|(n, w)| param_value(n, *w, j + 7))
                    .collect();
                let prio = Some((r >> 40) as i32 % 6 - 2);
                let rx = x.mt_add_entry(&t.name, &key, &action.name, &data, prio);
                let ry = y.mt_add_entry(&t.name, &key, &action.name, &data, prio);
                assert_eq!(rx.is_ok(), ry.is_ok(), "{}: entry {j}", t.name);
            }
        }
    }

    /// Modify every direct entry's parameters (the storm's alternate values), delete every
    /// third entry, and add the first deleted one back.
    fn churn_entries(sw: &mut Switch, prog: &Program) {
        // Tables with const entries are immutable, as in BMv2.
        for t in prog.pipelines.iter().flat_map(|p| &p.tables) {
            if t.entries.is_some() {
                continue;
            }
            let Ok(entries) = sw.mt_get_entries(&t.name) else {
                continue;
            };
            let mut readd = None;
            for (j, e) in entries.iter().enumerate() {
                let ActionEntry::Action { name, data } = &e.action else {
                    continue;
                };
                let Some(act) = prog.actions.iter().find(|x| &x.name == name) else {
                    continue;
                };
                let alt: Vec<Vec<u8>> = act
                    .runtime_data
                    .iter()
                    .map(|(n, w)| param_value_alt(n, *w, j as u32 + 7, true))
                    .collect();
                sw.mt_modify_entry(&t.name, e.handle, name, &alt)
                    .expect("modify");
                if j % 3 == 1 {
                    sw.mt_delete_entry(&t.name, e.handle).expect("delete");
                    readd.get_or_insert((
                        e.match_key.clone(),
                        e.priority,
                        name.clone(),
                        data.clone(),
                    ));
                }
            }
            if let Some((key, prio, action, data)) = readd {
                let prio = (prio >= 0).then_some(prio);
                sw.mt_add_entry(&t.name, &key, &action, &data, prio)
                    .expect("re-add");
            }
        }
    }

    /// Native code (parser, pipelines with inlined actions, emit loop) against the interpreter
    /// on whole switches: the bench programs and the tutorials with the bench's entries, flows
    /// that hit and flows that miss, and frames with bytes flipped or cut short. Every output
    /// (port and bytes), every counter cell and every register cell must agree.
    #[test]
    fn native_code_matches_the_interpreter() {
        let root = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4"));
        let mut files: Vec<PathBuf> = ["l3_router.p4", "l2l3_acl_nat.p4", "pipeline20.p4"]
            .iter()
            .map(|f| root.join("bench").join(f))
            .collect();
        // Every native operation with its result in an emitted header (see the file).
        files.push(root.join("tests/native.p4"));
        // Register reads and writes in place, in and out of range, every cell width.
        files.push(root.join("tests/native_regs.p4"));
        // Direct counters, direct meters and ageing on native hits.
        files.push(root.join("tests/native_direct.p4"));
        let mut tut: Vec<PathBuf> = std::fs::read_dir(root.join("tutorials"))
            .expect("p4/tutorials")
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "p4"))
            .collect();
        tut.sort();
        files.extend(tut);
        let mut native_pipelines = 0;
        let mut lanes = 0;
        let mut rng = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            rng ^= rng >> 12;
            rng ^= rng << 25;
            rng ^= rng >> 27;
            rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        for path in files {
            let name = path.display().to_string();
            let a = args(Some(path));
            let (_, json) = load(&a).expect("compile");
            let mut sws = [0, 1].map(|_| Switch::from_json(&json, SwitchOptions::default()));
            let [Ok(native), Ok(interp)] = &mut sws else {
                panic!("{name}: load failed")
            };
            interp.use_interpreter();
            let ns = native.native_summary();
            native_pipelines += ns.pipelines;
            if name.ends_with("native.p4") {
                // Its point is the inlined actions and lookups: every table on a native path.
                assert!(
                    ns.pipelines == 2 && ns.actions_inlined >= 15,
                    "{name}: {ns}"
                );
                assert!(
                    ns.tables
                        .iter()
                        .all(|(_, p)| !matches!(p, tern_dataplane::jit::TablePath::Helper(_))),
                    "{name}: {ns}"
                );
            }
            if name.ends_with("l2l3_acl_nat.p4") {
                // The ACL (13-byte ternary key): tuples probed natively.
                assert!(
                    ns.tables
                        .iter()
                        .any(|(_, p)| *p == tern_dataplane::jit::TablePath::Tuples),
                    "{name}: {ns}"
                );
            }
            if name.ends_with("native_direct.p4") {
                assert!(
                    ns.tables
                        .iter()
                        .all(|(_, p)| !matches!(p, tern_dataplane::jit::TablePath::Helper(_))),
                    "{name}: {ns}"
                );
            }
            if name.ends_with("native_regs.p4") {
                assert!(
                    ns.pipelines == 2 && ns.actions_inlined == ns.actions,
                    "{name}: {ns}"
                );
            }
            let prog = native.program().clone();
            for sw in [&mut *native, &mut *interp] {
                sw.set_clock_us(Some(1_000));
                let (_, failed, first) = install(sw, &prog, &a);
                assert_eq!(failed, 0, "{name}: {first:?}");
            }
            // Direct meters: small rates (60 to 600 bytes per 10 ms, bursts of 1 to 4 frames),
            // so that with the clock fixed the colours change as the traffic goes on.
            for t in prog.pipelines.iter().flat_map(|p| &p.tables) {
                if t.direct_meter.is_none() {
                    continue;
                }
                let entries = native.mt_get_entries(&t.name).expect("entries");
                for (j, e) in entries.iter().enumerate() {
                    let j = j as u32;
                    let rates = [
                        MeterRate {
                            units_per_micros: 0.006 * f64::from(j % 10 + 1),
                            burst_size: 60 * (j % 4 + 1),
                        },
                        MeterRate {
                            units_per_micros: 0.012 * f64::from(j % 10 + 1),
                            burst_size: 120 * (j % 4 + 1),
                        },
                    ];
                    for sw in [&mut *native, &mut *interp] {
                        sw.mt_set_meter_rates(&t.name, e.handle, &rates)
                            .expect("meter rates");
                    }
                }
            }
            // Random register contents, the same on both (the reads then see every bit).
            for r in &prog.register_arrays {
                for i in 0..r.size.min(4_096) {
                    let v = next();
                    for sw in [&mut *native, &mut *interp] {
                        sw.register_write(&r.name, i, v).expect("register write");
                    }
                }
            }
            compare_traffic(native, interp, &a, &mut next, &name);
            // Ternary tables: overlapping entries under up to 6 masks (the native tuple
            // probes), compared; after the churn below, 6 more masks (more tuples than the
            // native code probes: the lookup helper at run time).
            add_overlapping_ternary(
                [&mut *native, &mut *interp],
                &prog,
                &a,
                0..6,
                150,
                &mut next,
            );
            compare_traffic(native, interp, &a, &mut next, &name);
            // Entries changed under the native code's compact records (`HotRec`): every
            // entry's parameters modified, every third deleted, then the first deleted one
            // added back (into a reused slot); the same traffic must still agree.
            for sw in [&mut *native, &mut *interp] {
                churn_entries(sw, &prog);
            }
            compare_traffic(native, interp, &a, &mut next, &name);
            add_overlapping_ternary(
                [&mut *native, &mut *interp],
                &prog,
                &a,
                6..12,
                150,
                &mut next,
            );
            compare_traffic(native, interp, &a, &mut next, &name);
            // The native switch's common packets took the fast lane (`switch/fast.rs`) where
            // the program has native code for every stage; the interpreter never does.
            if native.lane_why_not().is_none() {
                lanes += 1;
                assert!(native.lane_counts().0 > 0, "{name}: fast lane not taken");
            }
            assert_eq!(interp.lane_counts(), (0, 0), "{name}");
            for c in &prog.counter_arrays {
                for i in 0..c.size {
                    let (x, y) = (
                        native.counter_read(&c.name, i),
                        interp.counter_read(&c.name, i),
                    );
                    assert_eq!(x, y, "{name}: counter {}[{i}]", c.name);
                }
            }
            for r in &prog.register_arrays {
                let (x, y) = (
                    native.register_read_all(&r.name),
                    interp.register_read_all(&r.name),
                );
                assert_eq!(x, y, "{name}: register {}", r.name);
            }
            // Direct counters of every entry (handles agree: same operations on both).
            for t in prog.pipelines.iter().flat_map(|p| &p.tables) {
                let Ok(entries) = native.mt_get_entries(&t.name) else {
                    continue;
                };
                for e in entries {
                    let (x, y) = (
                        native.mt_read_counter(&t.name, e.handle).ok(),
                        interp.mt_read_counter(&t.name, e.handle).ok(),
                    );
                    assert_eq!(x, y, "{name}: {} entry {:#x}", t.name, e.handle);
                }
            }
        }
        // The comparison is only worth something if native pipelines ran.
        assert!(
            native_pipelines >= 10,
            "{native_pipelines} native pipelines"
        );
        // ... and if the fast lane carried the bench programs' packets.
        assert!(lanes >= 3, "{lanes} programs on the fast lane");
    }

    /// `--traffic case1` installs case1's contents and sends its flows: every flow is
    /// forwarded (case1 drops nothing); case4 drops some (ACL, source guard) but not most;
    /// `--commands` with the committed file gives the same; bad cases and files are refused.
    #[test]
    fn case_traffic_is_forwarded() {
        let dir = std::env::temp_dir().join(format!("tern-bench-case-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        struct Rm(PathBuf);
        impl Drop for Rm {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
        let _rm = Rm(dir.clone());
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let forwarded = |case: u32, commands: bool| -> u64 {
            let j = dir.join(format!("c{case}{commands}.json"));
            let mut a = args(Some(root.join(format!("p4/bcache/case{case}.p4"))));
            a.case.traffic = Some(format!("case{case}"));
            a.case.zipf = 1.0;
            if commands {
                a.case.commands = Some(root.join(format!("p4/bcache/case{case}.txt")));
            }
            a.json = Some(j.clone());
            assert_eq!(run(a).expect("run"), ExitCode::SUCCESS);
            let v: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
            assert_eq!(v["entries_refused"], 0, "{v}");
            v["flows_forwarded"].as_u64().unwrap()
        };
        assert_eq!(forwarded(1, false), 64);
        assert_eq!(forwarded(1, true), 64);
        let f4 = forwarded(4, false);
        assert!((48..64).contains(&f4), "case4 forwarded {f4} of 64");
        let mut a = args(None);
        a.case.traffic = Some("case9".into());
        let e = run(a).unwrap_err().to_string();
        assert!(e.contains("case9"), "{e}");
        let mut a = args(None);
        a.case.commands = Some(dir.join("missing.txt"));
        let e = format!("{:#}", run(a).unwrap_err());
        assert!(e.contains("missing.txt"), "{e}");
    }

    /// A full (small) run of the command with a JSON report.
    #[test]
    fn run_writes_json() {
        let dir = std::env::temp_dir().join(format!("tern-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let j = dir.join("r.json");
        let mut a = args(None);
        a.json = Some(j.clone());
        assert_eq!(run(a).expect("run"), ExitCode::SUCCESS);
        let text = std::fs::read_to_string(&j).expect("json written");
        assert!(text.contains("\"flows_forwarded\":64"), "{text}");
        assert!(text.contains("\"mpps_median\":"), "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
        let st = &v["stages_ns"];
        // Every stage is reported, as a time that cannot be negative (the clock's own cost is
        // subtracted, so a short stage on a loaded machine may read 0: no timing is asserted).
        for name in STAGE_NAMES {
            let ns = st[name].as_f64();
            assert!(ns.is_some_and(|ns| ns >= 0.0), "stage {name}: {text}");
        }
        // The breakdown measured something: the stages add up to more than nothing.
        let total: f64 = STAGE_NAMES.iter().filter_map(|n| st[n].as_f64()).sum();
        assert!(total > 0.0, "{text}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Bad arguments are refused with a message naming the option.
    #[test]
    fn bad_size_is_refused() {
        let mut a = args(None);
        a.size = 20;
        let e = run(a).expect_err("size 20");
        assert!(e.to_string().contains("--size 20"), "{e}");
    }
}
