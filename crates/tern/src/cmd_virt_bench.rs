//! `tern virt bench`: HyPer4's penalty table (`../shared/reference/virtualization.md` §1.7–1.8)
//! measured on tern. For each of HyPer4's four functions and for Example 1's phases B and C, one
//! packet on the function's most complex path goes through the native programs (bare `Switch`es,
//! one after the other for a chain, traced) and through the sliced tern of the scenario configs
//! (`p4/virt/scenarios/`); both must give the same frame on the same port. Counted per packet:
//! tables applied (match stages), parser passes (resubmits / recirculations show up as extra
//! passes), link hops and classifier lookups; counted per configuration: table entries,
//! classifier rules and links. With `--timed`, packet rates in memory (native vs sliced, median
//! of several runs) are added: never record those from a shared, busy machine.
//! Writes `virt_bench.json` and `virt_bench.md` (HyPer4's figures beside tern's) to `--out`.
//! Live change (always printed; written with `--timed`): how long adding, replacing, removing a
//! device and switching a snapshot keep the *other* devices waiting — the whole switch on one
//! thread, the operation's worker over 2 workers (compiling happens off it) — and a count of
//! the other devices' packets lost meanwhile (must be 0).

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use serde_json::json;
use tern_dataplane::{BurstOut, Switch, SwitchOptions};
use tern_runtime::{OutputPacket, PacketPath};
use tern_virt::config::{load_program, Config};
use tern_virt::{Caller, DeviceId, DeviceSpec, Target, VirtSwitch, VirtWorkers, WorkerOptions};

/// `tern virt bench`
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Folder for virt_bench.json and virt_bench.md (created).
    #[arg(long, default_value = "bench/virt")]
    out: PathBuf,
    /// The scenario configs (p4/virt/scenarios of the repository).
    #[arg(long, default_value = "p4/virt/scenarios")]
    scenarios: PathBuf,
    /// Also time the packet rate in memory, native vs sliced (release build, quiet machine).
    #[arg(long)]
    timed: bool,
    /// Packets per timed run.
    #[arg(long, default_value_t = 200_000)]
    packets: usize,
    /// Timed runs per case (the median is reported; native and sliced take turns going first).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Only the rows whose name contains this text (e.g. "Ex. 1 B"; case-sensitive).
    #[arg(long, value_name = "TEXT")]
    only: Option<String>,
    /// --timed: time in this many processes, one after the other (this one and N − 1 fresh
    /// runs of this binary), and report per row the median over the processes of each
    /// one's median, with their range. Each process has its own address-space layout,
    /// which moves a row's figures by a few points, more than the runs of one process do.
    #[arg(long, default_value_t = 1, value_name = "N")]
    processes: usize,
    /// Time the isolation suite instead: an open-loop victim's delivered rate, loss and latency
    /// alone and under each attack running flat out, over 1 and 2 workers (writes
    /// isolation.json, isolation.md and isolation.png to --out).
    #[arg(long)]
    isolation: bool,
    /// --isolation: victim packets per dispatch at most (the pacing batch).
    #[arg(long, default_value_t = 8)]
    batch: usize,
    /// --isolation: attacker frames dispatched with each victim dispatch.
    #[arg(long, default_value_t = 64)]
    attack_frames: usize,
    /// --isolation: worker counts to run (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "1,2")]
    workers: Vec<usize>,
    /// --isolation: the victim's offered rate as a share of its capacity measured alone.
    #[arg(long, default_value_t = 0.4)]
    victim_share: f64,
    /// --isolation: offer the victim this many kpps instead of `--victim-share` of its
    /// measured capacity (the same load for every build or setting compared).
    #[arg(long, value_name = "KPPS")]
    victim_kpps: Option<f64>,
    /// --isolation: the fair scheduler's quantum, in ns of work per device per round.
    #[arg(long, default_value_t = tern_virt::DEFAULT_QUANTUM_NS)]
    quantum_ns: u64,
    /// --isolation: what the fair scheduler charges: `work` (counted pipeline passes at each
    /// device's calibrated ns per pass, measured time as a guard), `time` (measured ns per
    /// chunk) or `bytes` (classic DRR).
    #[arg(long, default_value = "work", value_parser = ["work", "time", "bytes"])]
    charge: String,
    /// --isolation: workers with work left after a round yield their CPU (`sched_yield`);
    /// off by default (it raised the victim's p99 with two workers on a 2-vCPU machine).
    #[arg(long = "yield")]
    yield_busy: bool,
    /// --isolation: with 2 or more workers the front sleeps until the *victim's* worker hands
    /// outputs over (or the next packet is due) and collects the attacker's frames when it
    /// runs anyway; with this flag every worker's hand-over wakes it (as before: the
    /// attacker's worker woke it with each of its turns).
    #[arg(long)]
    front_wakes_all: bool,
    /// --isolation: ask the kernel for a time slice of this many µs for the front and every
    /// worker thread (EEVDF's custom slice, Linux 6.12+; 0: the kernel's default). A shorter
    /// slice lets a woken thread (the victim's worker, the front) in sooner when a flat-out
    /// worker holds the CPU it needs (more threads than CPUs).
    #[arg(long, default_value_t = 0)]
    slice_us: u64,
    /// --isolation: the time slice (µs) the worker threads ask for when they start
    /// (`WorkerOptions::slice`, as `tern virt run --worker-slice-us`; 0 or absent: the
    /// kernel's default). `--slice-us` then overrides it for every thread, the front included.
    #[arg(long, value_name = "US")]
    worker_slice_us: Option<u64>,
    /// --isolation: skip the plot (isolation.png needs matplotlib).
    #[arg(long)]
    no_plot: bool,
}

/// HyPer4's published figures for one row (virtualization.md §1.5, §1.7).
struct Hyper4 {
    stages_native: Option<u32>,
    stages_hp4: Option<u32>,
    entries_native: Option<u32>,
    entries_hp4: Option<u32>,
    passes: &'static str,
    bandwidth_loss_pct: Option<f64>,
    latency_factor: Option<f64>,
}

/// One native switch of a native baseline: program, command file, ingress port, and the port
/// its output must leave on (into the next switch, or the final port).
struct Hop {
    program: &'static str,
    commands: &'static str,
    ingress: u32,
    egress: u32,
}

struct Case {
    name: &'static str,
    what: &'static str,
    packet: Vec<u8>,
    native: Vec<Hop>,
    /// The devices of the sliced path as native switches, when `native` is another baseline
    /// (a merged program): the sliced counts come from these.
    slice_native: Option<Vec<Hop>>,
    /// Scenario config (relative to --scenarios), snapshot, physical in and out port.
    config: &'static str,
    snapshot: Option<&'static str>,
    phys_in: u32,
    phys_out: u32,
    hyper4: Hyper4,
}

const H1: [u8; 6] = [0, 0, 0, 0, 0, 1];
const H2: [u8; 6] = [0, 0, 0, 0, 0, 2];
const H3: [u8; 6] = [0, 0, 0, 0, 0, 3];
const RMAC: [u8; 6] = [0, 0, 0, 0, 0x0a, 0x0a];

/// RFC 1071 checksum (the engine's).
fn csum(b: &[u8]) -> u16 {
    tern_dataplane::hash::csum16(b) as u16
}

/// Ethernet + IPv4 (valid checksum) + `l4` payload.
fn ipv4(dst: [u8; 6], src: [u8; 6], sip: [u8; 4], dip: [u8; 4], proto: u8, l4: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[8, 0]);
    let len = (20 + l4.len()) as u16;
    let mut ip = vec![
        0x45,
        0,
        (len >> 8) as u8,
        len as u8,
        0,
        1,
        0x40,
        0,
        64,
        proto,
        0,
        0,
    ];
    ip.extend_from_slice(&sip);
    ip.extend_from_slice(&dip);
    let c = csum(&ip);
    ip[10] = (c >> 8) as u8;
    ip[11] = c as u8;
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    f
}

/// A TCP segment 1234 -> 5001 (iperf's port) with 64 bytes of data.
fn tcp_5001(dst: [u8; 6], sip: [u8; 4], dip: [u8; 4]) -> Vec<u8> {
    let mut l4 = vec![
        0x04, 0xd2, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x18, 0x20, 0, 0, 0, 0, 0,
    ];
    l4.extend_from_slice(&[0x5a; 64]);
    ipv4(dst, H1, sip, dip, 6, &l4)
}

/// An ARP request from h1 (10.0.0.1) for `tpa`.
fn arp_request(tpa: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&H1);
    f.extend_from_slice(&[8, 6, 0, 1, 8, 0, 6, 4, 0, 1]);
    f.extend_from_slice(&H1);
    f.extend_from_slice(&[10, 0, 0, 1]);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&tpa);
    f
}

fn cases() -> Vec<Case> {
    let hop = |program, commands, ingress, egress| Hop {
        program,
        commands,
        ingress,
        egress,
    };
    let icmp = [8, 0, 0xf7, 0xfe, 0, 1, 0, 0];
    vec![
        Case {
            name: "L2 switch",
            what: "ICMP echo h1 -> h2 (known MACs)",
            packet: ipv4(H2, H1, [10, 0, 0, 1], [10, 0, 0, 2], 1, &icmp),
            native: vec![hop("l2_switch.p4", "ex1/s1_l2.txt", 1, 2)],
            slice_native: None,
            config: "functions/virt.json",
            snapshot: None,
            phys_in: 1,
            phys_out: 2,
            hyper4: Hyper4 {
                stages_native: Some(2),
                stages_hp4: Some(13),
                entries_native: Some(4),
                entries_hp4: Some(35),
                passes: "0 resubmits",
                bandwidth_loss_pct: Some(83.0),
                latency_factor: Some(3.4),
            },
        },
        Case {
            name: "firewall",
            what: "TCP 1234 -> 5001, allowed (fwd, tcp_block, ipv4_block)",
            packet: tcp_5001(H3, [10, 0, 0, 1], [10, 0, 0, 3]),
            native: vec![hop("firewall_l4.p4", "ex1/s2_fw_b.txt", 1, 2)],
            slice_native: None,
            config: "functions/virt.json",
            snapshot: None,
            phys_in: 4,
            phys_out: 5,
            hyper4: Hyper4 {
                stages_native: Some(3),
                stages_hp4: Some(22),
                entries_native: Some(7),
                entries_hp4: Some(66),
                passes: "1 resubmit per ping, 2 per TCP packet",
                bandwidth_loss_pct: Some(88.7),
                latency_factor: Some(4.7),
            },
        },
        Case {
            name: "router",
            what: "TCP h1 -> 10.0.1.3, routed (lpm, next hop, source MAC)",
            packet: tcp_5001(RMAC, [10, 0, 0, 1], [10, 0, 1, 3]),
            native: vec![hop("router.p4", "ex1/s2_router.txt", 1, 2)],
            slice_native: None,
            config: "functions/virt.json",
            snapshot: None,
            phys_in: 6,
            phys_out: 7,
            hyper4: Hyper4 {
                stages_native: Some(4),
                stages_hp4: Some(28),
                entries_native: Some(7),
                entries_hp4: Some(49),
                passes: "not given",
                bandwidth_loss_pct: None,
                latency_factor: None,
            },
        },
        Case {
            name: "ARP proxy (answered)",
            what: "ARP request for 10.0.0.2, answered out of the ingress port",
            packet: arp_request([10, 0, 0, 2]),
            native: vec![hop("arp_proxy.p4", "functions/arp_proxy.txt", 1, 1)],
            slice_native: None,
            config: "functions/virt.json",
            snapshot: None,
            phys_in: 8,
            phys_out: 8,
            hyper4: Hyper4 {
                stages_native: Some(4),
                stages_hp4: Some(48),
                entries_native: Some(9),
                entries_hp4: Some(87),
                passes: "not given",
                bandwidth_loss_pct: None,
                latency_factor: None,
            },
        },
        Case {
            name: "ARP proxy (forwarded)",
            what: "ARP request for 10.0.0.9 (not proxied), forwarded",
            packet: arp_request([10, 0, 0, 9]),
            native: vec![hop("arp_proxy.p4", "functions/arp_proxy.txt", 1, 2)],
            slice_native: None,
            config: "functions/virt.json",
            snapshot: None,
            phys_in: 8,
            phys_out: 9,
            hyper4: Hyper4 {
                stages_native: None,
                stages_hp4: None,
                entries_native: None,
                entries_hp4: None,
                passes: "not given",
                bandwidth_loss_pct: None,
                latency_factor: None,
            },
        },
        Case {
            name: "Ex. 1 B (L2 - FW - L2)",
            what: "TCP h1 -> h3 port 5001 across s1, s2, s3",
            packet: tcp_5001(H3, [10, 0, 0, 1], [10, 0, 0, 3]),
            native: vec![
                hop("l2_switch.p4", "ex1/s1_l2.txt", 1, 3),
                hop("firewall_l4.p4", "ex1/s2_fw_b.txt", 1, 2),
                hop("l2_switch.p4", "ex1/s3_l2.txt", 3, 1),
            ],
            slice_native: None,
            config: "ex1/virt.json",
            snapshot: Some("B"),
            phys_in: 1,
            phys_out: 3,
            hyper4: Hyper4 {
                stages_native: None,
                stages_hp4: None,
                entries_native: None,
                entries_hp4: None,
                passes: "1 resubmit per ping, 2 per TCP packet (at s2)",
                bandwidth_loss_pct: Some(83.0),
                latency_factor: Some(3.4),
            },
        },
        Case {
            name: "Ex. 1 C (L2 - [ARP -> FW -> R] - L2)",
            what: "TCP h1 -> h3 (10.0.1.3) port 5001, routed at s2",
            packet: tcp_5001(RMAC, [10, 0, 0, 1], [10, 0, 1, 3]),
            native: vec![
                hop("l2_switch.p4", "ex1/s1_l2.txt", 1, 3),
                hop("arp_proxy.p4", "ex1/s2_arp.txt", 1, 3),
                hop("firewall_l4.p4", "ex1/s2_fw_c.txt", 1, 3),
                hop("router.p4", "ex1/s2_router.txt", 1, 2),
                hop("l2_switch.p4", "ex1/s3_l2.txt", 3, 1),
            ],
            slice_native: None,
            config: "ex1/virt.json",
            snapshot: Some("C"),
            phys_in: 1,
            phys_out: 3,
            hyper4: Hyper4 {
                stages_native: None,
                stages_hp4: None,
                entries_native: None,
                entries_hp4: None,
                passes: "2 recirculations + 2 resubmits per ping, 2 + 3 per TCP packet (at s2)",
                bandwidth_loss_pct: Some(88.2),
                latency_factor: Some(3.9),
            },
        },
        Case {
            name: "Ex. 1 C, merged native s2",
            what: "as Ex. 1 C; native: s2 as one hand-merged program (HyPer4's d1_C_s2_native)",
            packet: tcp_5001(RMAC, [10, 0, 0, 1], [10, 0, 1, 3]),
            native: vec![
                hop("l2_switch.p4", "ex1/s1_l2.txt", 1, 3),
                hop("scenarios/ex1/s2_merged.p4", "ex1/s2_merged.txt", 1, 2),
                hop("l2_switch.p4", "ex1/s3_l2.txt", 3, 1),
            ],
            slice_native: Some(vec![
                hop("l2_switch.p4", "ex1/s1_l2.txt", 1, 3),
                hop("arp_proxy.p4", "ex1/s2_arp.txt", 1, 3),
                hop("firewall_l4.p4", "ex1/s2_fw_c.txt", 1, 3),
                hop("router.p4", "ex1/s2_router.txt", 1, 2),
                hop("l2_switch.p4", "ex1/s3_l2.txt", 3, 1),
            ]),
            config: "ex1/virt.json",
            snapshot: Some("C"),
            phys_in: 1,
            phys_out: 3,
            hyper4: Hyper4 {
                stages_native: None,
                stages_hp4: None,
                entries_native: None,
                entries_hp4: None,
                passes: "as Ex. 1 C",
                bandwidth_loss_pct: Some(88.2),
                latency_factor: Some(3.9),
            },
        },
    ]
}

/// A native switch loaded with its program and command file.
fn native_switch(dir: &Path, hop: &Hop) -> anyhow::Result<(Switch, u64)> {
    let p4 = dir.join("..").join(hop.program);
    let json = load_program(&p4).map_err(|e| anyhow::anyhow!(e))?;
    let mut sw = Switch::from_json(&json, SwitchOptions::default())
        .with_context(|| format!("loading {}", p4.display()))?;
    let cmds = dir.join(hop.commands);
    let text =
        std::fs::read_to_string(&cmds).with_context(|| format!("reading {}", cmds.display()))?;
    let program = sw.program().clone();
    let mut cli = tern_control::Cli::new(&program);
    let mut entries = 0;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let out = cli.execute(&mut sw, t);
        if cli.last_command_failed() {
            bail!("{}:{}: '{t}' failed: {}", cmds.display(), n + 1, out.trim());
        }
        if t.starts_with("table_add") {
            entries += 1;
        }
    }
    Ok((sw, entries))
}

/// What one native chain did with the case's packet.
#[derive(Clone)]
struct NativeRun {
    out: (u32, Vec<u8>),
    /// Match tables applied (tables with a key).
    tables: u64,
    /// Every table applied, with the compiler's keyless action tables (`tbl_act*`).
    applied: u64,
    parser_passes: u64,
    entries: u64,
}

fn run_native(dir: &Path, c: &Case, hops: &[Hop]) -> anyhow::Result<(Vec<Switch>, NativeRun)> {
    let mut switches = Vec::new();
    let mut entries = 0;
    for h in hops {
        let (sw, e) = native_switch(dir, h)?;
        switches.push(sw);
        entries += e;
    }
    let (mut tables, mut applied, mut passes) = (0, 0, 0);
    let mut data = c.packet.clone();
    let mut port = 0;
    for (sw, h) in switches.iter_mut().zip(hops) {
        let keyed: std::collections::HashSet<String> = sw
            .program()
            .pipelines
            .iter()
            .flat_map(|p| &p.tables)
            .filter(|t| !t.key.is_empty())
            .map(|t| t.name.clone())
            .collect();
        sw.set_trace(true);
        let mut out = Vec::new();
        sw.process_packet(h.ingress, &data, &mut out);
        for l in sw.take_trace() {
            if let Some(name) = l.text.strip_prefix("Applying table '") {
                applied += 1;
                if keyed.contains(name.trim_end_matches('\'')) {
                    tables += 1;
                }
            }
            if l.text.starts_with("Parser") && l.text.ends_with(": start") {
                passes += 1;
            }
        }
        sw.set_trace(false);
        if out.len() != 1 || out[0].port != h.egress {
            bail!(
                "{}: native {} sent {:?} instead of one frame on port {}",
                c.name,
                h.program,
                out.iter().map(|o| o.port).collect::<Vec<_>>(),
                h.egress
            );
        }
        data = out[0].data.to_vec();
        port = out[0].port;
    }
    Ok((
        switches,
        NativeRun {
            out: (port, data),
            tables,
            applied,
            parser_passes: passes,
            entries,
        },
    ))
}

/// The sliced tern of a case: the scenario config built, its snapshot active.
fn build_slice(dir: &Path, c: &Case) -> anyhow::Result<VirtSwitch> {
    let path = dir.join(c.config);
    let cfg = Config::load(&path)?;
    let (mut vs, _) = cfg.build(path.parent().unwrap_or(Path::new(".")))?;
    if let Some(s) = c.snapshot {
        vs.activate_snapshot(s)?;
    }
    Ok(vs)
}

/// Table entries of every device that took part, the classifier rules pointing at them and
/// their links (virtual ports mapped to another device).
fn slice_entries(vs: &mut VirtSwitch, devices: &[DeviceId]) -> anyhow::Result<(u64, u64, u64)> {
    let mut entries = 0;
    for &d in devices {
        let rt = vs.runtime(Caller::Operator, d)?;
        let program = rt.program().clone();
        for t in program.pipelines.iter().flat_map(|p| &p.tables) {
            entries += tern_runtime::Runtime::mt_get_num_entries(&rt, &t.name)?;
        }
    }
    let topo = vs.topology();
    let rules = topo
        .rules
        .iter()
        .filter(|r| devices.contains(&r.device))
        .count() as u64;
    let links = devices
        .iter()
        .filter_map(|d| topo.port_maps.get(d))
        .flat_map(|m| m.values())
        .filter(|t| matches!(t, Target::Link { .. }))
        .count() as u64;
    Ok((entries, rules, links))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One row's timed figures: of one process (medians of its runs), or the medians over
/// processes (`--processes`) with each process's own figures in `processes`.
struct Timed {
    /// Packets per second one per call, native and sliced.
    n: f64,
    s: f64,
    /// Latency p50 / p99 in ns, native and sliced.
    n50: f64,
    n99: f64,
    s50: f64,
    s99: f64,
    /// Packets per second in batches, native and sliced.
    nb: f64,
    sb: f64,
    /// Rate lost one per call, p99 added and rate lost in batches, sliced vs native (%).
    loss: f64,
    p99_added: f64,
    batch_loss: f64,
    processes: Vec<Timed>,
}

impl Timed {
    /// One process's figures: the medians of its runs.
    fn of_runs(
        tn: Vec<f64>,
        ts: Vec<f64>,
        ln: Vec<(f64, f64)>,
        ls: Vec<(f64, f64)>,
        bn: Vec<f64>,
        bs: Vec<f64>,
    ) -> Timed {
        let (n, s, nb, sb) = (median(tn), median(ts), median(bn), median(bs));
        let p = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median(v.iter().map(f).collect());
        let (n99, s99) = (p(&ln, |l| l.1), p(&ls, |l| l.1));
        Timed {
            n,
            s,
            n50: p(&ln, |l| l.0),
            n99,
            s50: p(&ls, |l| l.0),
            s99,
            nb,
            sb,
            loss: 100.0 * (1.0 - s / n),
            p99_added: 100.0 * (s99 / n99 - 1.0),
            batch_loss: 100.0 * (1.0 - sb / nb),
            processes: Vec::new(),
        }
    }

    /// The same figures as another process wrote them in its `virt_bench.json`.
    fn of_json(t: &serde_json::Value) -> Option<Timed> {
        let f = |k: &str| t[k].as_f64();
        Some(Timed {
            n: f("native_mpps_median")? * 1e6,
            s: f("sliced_mpps_median")? * 1e6,
            n50: f("native_latency_p50_ns")?,
            n99: f("native_latency_p99_ns")?,
            s50: f("sliced_latency_p50_ns")?,
            s99: f("sliced_latency_p99_ns")?,
            nb: f("native_batch_mpps_median")? * 1e6,
            sb: f("sliced_batch_mpps_median")? * 1e6,
            loss: f("rate_loss_pct")?,
            p99_added: f("p99_added_pct")?,
            batch_loss: f("batch_rate_loss_pct")?,
            processes: Vec::new(),
        })
    }

    /// `own` and row `name` of each of the `others` processes' rows: every figure the
    /// median over the processes (the losses too: each process's own, paired within it).
    fn across(own: Timed, others: &[Vec<serde_json::Value>], name: &str) -> anyhow::Result<Timed> {
        let mut all = vec![own];
        for (i, rows) in others.iter().enumerate() {
            let t = rows
                .iter()
                .find(|r| r["row"] == name)
                .and_then(|r| Timed::of_json(&r["tern"]["timed"]))
                .with_context(|| format!("process {}: no timed figures for {name}", i + 2))?;
            all.push(t);
        }
        let m = |f: fn(&Timed) -> f64| median(all.iter().map(f).collect());
        Ok(Timed {
            n: m(|t| t.n),
            s: m(|t| t.s),
            n50: m(|t| t.n50),
            n99: m(|t| t.n99),
            s50: m(|t| t.s50),
            s99: m(|t| t.s99),
            nb: m(|t| t.nb),
            sb: m(|t| t.sb),
            loss: m(|t| t.loss),
            p99_added: m(|t| t.p99_added),
            batch_loss: m(|t| t.batch_loss),
            processes: all,
        })
    }
}

/// `--processes N`: the timed bench in N − 1 fresh processes of this binary, one after the
/// other (the same rows, packets and runs; each into a folder of its own, removed after),
/// before this one times its own; their rows.
fn other_processes(a: &BenchArgs) -> anyhow::Result<Vec<Vec<serde_json::Value>>> {
    let exe = std::env::current_exe().context("finding this binary to run it again")?;
    let tmp = TempDir::new()?;
    let mut all = Vec::new();
    for i in 2..=a.processes {
        eprintln!(
            "tern virt bench: process {i} of {} (then this one) ...",
            a.processes
        );
        let out = tmp.0.join(format!("process-{i}"));
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["virt", "bench", "--timed", "--processes", "1"])
            .arg("--packets")
            .arg(a.packets.to_string())
            .arg("--runs")
            .arg(a.runs.to_string())
            .arg("--scenarios")
            .arg(&a.scenarios)
            .arg("--out")
            .arg(&out)
            .stdout(std::process::Stdio::null());
        if let Some(o) = &a.only {
            cmd.arg("--only").arg(o);
        }
        let st = cmd
            .status()
            .with_context(|| format!("running {}", exe.display()))?;
        if !st.success() {
            bail!("process {i} of the timed bench failed ({st})");
        }
        let j = out.join("virt_bench.json");
        let v: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(&j).with_context(|| format!("reading {}", j.display()))?,
        )
        .with_context(|| format!("parsing {}", j.display()))?;
        all.push(v["rows"].as_array().cloned().unwrap_or_default());
    }
    eprintln!(
        "tern virt bench: process 1 of {} (this one) ...",
        a.processes
    );
    Ok(all)
}

/// A folder of its own under the system's temporary folder, removed when dropped (also on
/// an error or a panic on the way).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let p =
            std::env::temp_dir().join(format!("tern-virt-bench-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&p).with_context(|| format!("creating {}", p.display()))?;
        Ok(TempDir(p))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One packet through the native chain: each hop gets its previous frame back and runs the
/// previous hop's first frame (the case's packet at the first hop).
#[inline(always)]
fn native_hops(switches: &mut [Switch], outs: &mut [Vec<OutputPacket>], c: &Case) {
    for i in 0..switches.len() {
        let (before, rest) = outs.split_at_mut(i);
        let out = &mut rest[0];
        switches[i].recycle_outputs(out);
        let input: &[u8] = if i == 0 {
            &c.packet
        } else {
            &before[i - 1][0].data
        };
        switches[i].process_packet(c.native[i].ingress, input, out);
    }
}

/// Packets per second through the native chain (one packet at a time, buffers recycled).
/// Out of line, as are the other three timed loops, so that `bench/virt_bench_callgrind.sh`
/// counts each side's instructions in the very code the timed figures come from.
#[inline(never)]
fn time_native(switches: &mut [Switch], c: &Case, n: usize) -> f64 {
    let mut outs: Vec<Vec<OutputPacket>> = switches.iter().map(|_| Vec::new()).collect();
    let t = Instant::now();
    for _ in 0..n {
        native_hops(switches, &mut outs, c);
    }
    n as f64 / t.elapsed().as_secs_f64()
}

/// Packets per second through the sliced tern one packet per call: one
/// `VirtSwitch::process_each` session over the run (one panic boundary for the loop, each
/// packet's frame given back at the next, as a receive loop one frame at a time does).
#[inline(never)]
fn time_slice(vs: &mut VirtSwitch, c: &Case, n: usize) -> f64 {
    let mut out = Vec::new();
    let mut sent = 0usize;
    let t = Instant::now();
    vs.process_each(
        std::iter::repeat_n((c.phys_in, c.packet.as_slice()), n),
        &mut out,
        |o| sent += o.len(),
    );
    let r = n as f64 / t.elapsed().as_secs_f64();
    vs.recycle_outputs(&mut out);
    assert_eq!(sent, n, "{}: every packet forwarded", c.name);
    r
}

/// Packets per call in the batched rows of `--timed`.
const BATCH: usize = 32;

/// `v` emptied, its allocation kept for references of another lifetime (so that a batch of
/// references to the previous hop's frames needs no allocation per batch).
fn reuse<'b>(mut v: Vec<(u32, &[u8])>) -> Vec<(u32, &'b [u8])> {
    v.clear();
    v.into_iter().map(|_| unreachable!("empty")).collect()
}

/// Packets per second through the native chain in batches of [`BATCH`], each switch through
/// its best batch path, `Switch::process_burst` (the outputs back to back in one buffer, the
/// generated lane's context set once per burst): every hop runs the previous hop's frames as
/// one burst.
#[inline(never)]
fn time_native_batch(switches: &mut [Switch], c: &Case, n: usize) -> f64 {
    let mut outs: Vec<BurstOut> = switches.iter().map(|_| BurstOut::new()).collect();
    let first: Vec<(u32, &[u8])> = vec![(c.native[0].ingress, c.packet.as_slice()); BATCH];
    let mut spare: Vec<(u32, &[u8])> = Vec::with_capacity(BATCH);
    let t = Instant::now();
    for _ in 0..n / BATCH {
        for i in 0..switches.len() {
            let (before, rest) = outs.split_at_mut(i);
            let out = &mut rest[0];
            out.clear();
            if i == 0 {
                switches[i].process_burst(&first, out);
            } else {
                let mut refs = reuse(std::mem::take(&mut spare));
                let ingress = c.native[i].ingress;
                refs.extend(before[i - 1].iter().map(|(_, _, d)| (ingress, d)));
                switches[i].process_burst(&refs, out);
                spare = reuse(refs);
            }
        }
    }
    (n / BATCH * BATCH) as f64 / t.elapsed().as_secs_f64()
}

/// Packets per second through the sliced tern in batches of [`BATCH`] (one
/// `VirtSwitch::process_burst` per batch).
#[inline(never)]
fn time_slice_batch(vs: &mut VirtSwitch, c: &Case, n: usize) -> f64 {
    let mut out = BurstOut::new();
    let batch: Vec<(u32, &[u8])> = vec![(c.phys_in, c.packet.as_slice()); BATCH];
    let t = Instant::now();
    for _ in 0..n / BATCH {
        out.clear();
        vs.process_burst(&batch, &mut out);
    }
    (n / BATCH * BATCH) as f64 / t.elapsed().as_secs_f64()
}

/// How the latency columns are taken (written with them).
const LATENCY_METHOD: &str = "each sample times a group of 16 packets run one per call back \
     to back (native: `process_packet` through each hop; sliced: one `process_each` session) \
     with `Instant` (CLOCK_MONOTONIC), minus the median cost of an empty timed group, divided \
     by 16; native and sliced groups alternate (ABBA), packets / 16 samples a side per run; \
     p50 / p99 over the samples (of a group's mean, not of single packets), median over the \
     runs.";

/// Packets per latency sample: a sample times a group of this many packets run one per call
/// back to back and gives their mean, so that the clock's own cost and granularity (tens of
/// ns a reading, against packets of 100–900 ns) weigh little, and what is left of them is
/// subtracted ([`clock_cost`]).
const LAT_GROUP: usize = 16;

/// The median cost of one timed empty group (`Instant::now` then `elapsed`), in ns.
fn clock_cost() -> f64 {
    let v: Vec<f64> = (0..10_001)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(());
            t.elapsed().as_nanos() as f64
        })
        .collect();
    median(v)
}

/// Per-packet latency of the native chain and of the sliced tern, one packet per call
/// (native: `process_packet` through each hop; sliced: one `process_each` session per group),
/// sampled **alternately** — a native group, a sliced group, then the other order — so that
/// both sides see the same machine (interrupts, frequency, other load): ((p50, p99) native,
/// (p50, p99) sliced) over `n / LAT_GROUP` samples each, in ns per packet, the clock's cost
/// subtracted.
#[allow(clippy::type_complexity)]
fn latency_pair(
    switches: &mut [Switch],
    vs: &mut VirtSwitch,
    c: &Case,
    n: usize,
    clock: f64,
) -> ((f64, f64), (f64, f64)) {
    let mut outs: Vec<Vec<OutputPacket>> = switches.iter().map(|_| Vec::new()).collect();
    let mut sout = Vec::new();
    let samples = (n / LAT_GROUP).max(1);
    let (mut ln, mut ls) = (Vec::with_capacity(samples), Vec::with_capacity(samples));
    let per = |ns: u128| (ns as f64 - clock).max(0.0) / LAT_GROUP as f64;
    for s in 0..samples {
        for side in [s % 2, 1 - s % 2] {
            if side == 0 {
                let t = Instant::now();
                for _ in 0..LAT_GROUP {
                    native_hops(switches, &mut outs, c);
                }
                ln.push(per(t.elapsed().as_nanos()));
            } else {
                let t = Instant::now();
                vs.process_each(
                    std::iter::repeat_n((c.phys_in, c.packet.as_slice()), LAT_GROUP),
                    &mut sout,
                    |_| {},
                );
                ls.push(per(t.elapsed().as_nanos()));
            }
        }
    }
    vs.recycle_outputs(&mut sout);
    (p50_p99(ln), p50_p99(ls))
}

fn p50_p99(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    (at(0.5), at(0.99))
}

fn opt<T: serde::Serialize>(v: Option<T>) -> serde_json::Value {
    v.map_or(serde_json::Value::Null, |x| json!(x))
}

fn cell<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("—".to_string(), |x| x.to_string())
}

/// One live-change figure: the median and the worst of `runs` operations, in microseconds.
fn us_stats(mut v: Vec<f64>) -> serde_json::Value {
    v.sort_by(f64::total_cmp);
    json!({ "median_us": v[v.len() / 2], "max_us": v[v.len() - 1], "runs": v.len() })
}

/// How long each live change keeps the other devices waiting, on one thread and over two
/// workers, with the L2 switch's traffic counted across the changes (functions/virt.json: the
/// four functions as devices 1–4; device 9 added and removed, running the router's program;
/// device 2 replaced by its own program, entries carried; two snapshots switched).
fn live_change(dir: &Path, runs: usize) -> anyhow::Result<(serde_json::Value, String)> {
    let path = dir.join("functions/virt.json");
    let build = || -> anyhow::Result<VirtSwitch> {
        let mut vs = Config::load(&path)?
            .build(path.parent().unwrap_or(Path::new(".")))?
            .0;
        vs.save_snapshot("a");
        let mut t = vs.topology().clone();
        t.port_maps
            .insert(4, [(1, Target::Drop)].into_iter().collect());
        vs.store_snapshot("b", t);
        Ok(vs)
    };
    let program = |f: &str| load_program(&dir.join("../").join(f)).map_err(anyhow::Error::msg);
    let (router, firewall) = (program("router.p4")?, program("firewall_l4.p4")?);
    let spec = |json: &String| DeviceSpec {
        json: json.clone(),
        owner: None,
        quotas: Default::default(),
    };
    let l2 = cases().remove(0).packet;
    let ops = ["add", "replace", "snapshot", "remove"];
    let mut one: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
    let mut two: Vec<Vec<f64>> = vec![Vec::new(); ops.len()];
    // One thread: the caller holds the whole switch for the call.
    let mut vs = build()?;
    let (mut sent, mut got) = (0u64, 0u64);
    let mut out = Vec::new();
    for r in 0..runs {
        for (i, op) in ops.iter().enumerate() {
            vs.process_batch(&[(1, &l2)], &mut out);
            sent += 1;
            got += out.len() as u64;
            vs.recycle_outputs(&mut out);
            let t = Instant::now();
            match *op {
                "add" => vs.add_device(9, spec(&router))?,
                "replace" => drop(vs.replace_device(2, spec(&firewall))?),
                "snapshot" => vs.activate_snapshot(if r % 2 == 0 { "b" } else { "a" })?,
                _ => drop(vs.remove_device(9)?),
            }
            one[i].push(t.elapsed().as_secs_f64() * 1e6);
        }
    }
    // Two workers: the operation's worker stops for `last_pause`.
    let mut pool = VirtWorkers::new(
        build()?,
        WorkerOptions {
            workers: 2,
            rebalance_every: 0,
            ..WorkerOptions::default()
        },
    );
    for r in 0..runs {
        for (i, op) in ops.iter().enumerate() {
            pool.dispatch(&[(1, &l2)]);
            sent += 1;
            match *op {
                "add" => pool.add_device(9, spec(&router))?,
                "replace" => drop(pool.replace_device(2, spec(&firewall))?),
                "snapshot" => pool.activate_snapshot(if r % 2 == 0 { "b" } else { "a" })?,
                _ => drop(pool.remove_device(9)?),
            }
            two[i].push(pool.last_pause().as_secs_f64() * 1e6);
        }
    }
    pool.wait_idle();
    pool.take_outputs(&mut out);
    got += out.len() as u64;
    let lost = sent - got;
    let mut j = json!({ "other_devices_packets_sent": sent, "other_devices_packets_lost": lost });
    let mut md = format!(
        "\n## Live change: the other devices' time (µs, median / worst of {runs})\n\n\
         On one thread the call holds the whole switch; over 2 workers, only the operation's \
         worker stops (compiling and building happen off it). The L2 switch's packets across \
         every change: {sent} sent, {lost} lost. Target: < 1,000 µs.\n\n\
         | operation | one thread | 2 workers |\n|---|---|---|\n"
    );
    for (i, op) in ops.iter().enumerate() {
        let (a, b) = (us_stats(one[i].clone()), us_stats(two[i].clone()));
        md.push_str(&format!(
            "| {op} | {:.0} / {:.0} | {:.0} / {:.0} |\n",
            a["median_us"].as_f64().unwrap_or(0.0),
            a["max_us"].as_f64().unwrap_or(0.0),
            b["median_us"].as_f64().unwrap_or(0.0),
            b["max_us"].as_f64().unwrap_or(0.0)
        ));
        j[op] = json!({ "one_thread": a, "two_workers": b });
    }
    Ok((j, md))
}

pub fn run(a: BenchArgs) -> anyhow::Result<std::process::ExitCode> {
    let dir = &a.scenarios;
    if a.isolation {
        if a.workers.is_empty() || a.workers.contains(&0) {
            bail!("--workers: give worker counts of at least 1 (e.g. 1,2)");
        }
        super::isolation::run(&super::isolation::IsolationArgs {
            out: a.out.clone(),
            p4_dir: super::isolation::p4_dir(dir),
            packets: a.packets,
            runs: a.runs.max(1),
            batch: a.batch.max(1),
            attack_frames: a.attack_frames,
            workers: a.workers.clone(),
            victim_share: a.victim_share,
            victim_pps: a.victim_kpps.filter(|k| *k > 0.0).map(|k| k * 1e3),
            quantum_ns: a.quantum_ns.max(1),
            cost: match a.charge.as_str() {
                "time" => tern_virt::Cost::Nanos,
                "bytes" => tern_virt::Cost::Bytes,
                _ => tern_virt::Cost::Work,
            },
            yield_when_busy: a.yield_busy,
            front_wakes_all: a.front_wakes_all,
            slice_us: a.slice_us,
            worker_slice: a.worker_slice_us.map_or(
                tern_virt::ThreadSlice::Kernel,
                tern_virt::ThreadSlice::from_us,
            ),
            plot: !a.no_plot,
        })?;
        return Ok(std::process::ExitCode::SUCCESS);
    }
    if a.processes == 0 {
        bail!("--processes: give at least 1 (the processes the timed rows are measured in)");
    }
    if !dir.join("ex1/virt.json").is_file() {
        bail!(
            "{}: no scenario configs here (give --scenarios p4/virt/scenarios of the repository)",
            dir.display()
        );
    }
    let mut rows = Vec::new();
    let mut md = String::from(
        "| row | path | tables/packet: HyPer4 native → persona | tern native → sliced | \
         extra passes: HyPer4 | tern (native / sliced) | entries: HyPer4 native → persona | \
         tern native → sliced (+ rules + links) |\n|---|---|---|---|---|---|---|---|\n",
    );
    let mut timed_md = String::new();
    let mut batch_md = String::new();
    let chosen: Vec<Case> = cases()
        .into_iter()
        .filter(|c| a.only.as_ref().is_none_or(|o| c.name.contains(o.as_str())))
        .collect();
    if chosen.is_empty() {
        bail!(
            "--only {:?}: no row's name contains it (rows: {})",
            a.only.as_deref().unwrap_or(""),
            cases()
                .iter()
                .map(|c| c.name)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let others = if a.timed && a.processes > 1 {
        other_processes(&a)?
    } else {
        Vec::new()
    };
    for c in chosen {
        let (mut switches, nat) = run_native(dir, &c, &c.native)?;
        // What the slice's own devices do natively (the same as `nat` unless the baseline is
        // a merged program).
        let dev = match &c.slice_native {
            Some(h) => {
                let d = run_native(dir, &c, h)?.1;
                if d.out != nat.out {
                    bail!("{}: the merged baseline and the chain differ", c.name);
                }
                d
            }
            None => nat.clone(),
        };
        let mut vs = build_slice(dir, &c)?;
        let before: Vec<(DeviceId, tern_virt::DeviceStats)> = vs
            .device_ids()
            .into_iter()
            .map(|d| Ok((d, vs.device_stats(Caller::Operator, d)?)))
            .collect::<anyhow::Result<_>>()?;
        let mut out = Vec::new();
        vs.process_batch(&[(c.phys_in, &c.packet)], &mut out);
        if out.len() != 1 || out[0].port != c.phys_out || out[0].data[..] != nat.out.1[..] {
            bail!(
                "{}: the sliced tern sent {:?}, the native chain one frame on port {} \
                 (frames equal: {})",
                c.name,
                out.iter().map(|o| o.port).collect::<Vec<_>>(),
                c.phys_out,
                out.first().is_some_and(|o| o.data[..] == nat.out.1[..])
            );
        }
        vs.recycle_outputs(&mut out);
        let (mut devices, mut hops) = (Vec::new(), 0);
        for (d, s0) in &before {
            let s1 = vs.device_stats(Caller::Operator, *d)?;
            if s1.packets_in > s0.packets_in {
                devices.push(*d);
            }
            hops += s1.to_links - s0.to_links;
        }
        // The timed batches' path gives the same frame for every packet of a burst.
        let mut burst = BurstOut::new();
        vs.process_burst(&vec![(c.phys_in, c.packet.as_slice()); BATCH], &mut burst);
        if burst.len() != BATCH
            || burst
                .iter()
                .any(|(p, _, d)| p != c.phys_out || d != &nat.out.1[..])
        {
            bail!(
                "{}: the sliced tern's burst differs from the native chain",
                c.name
            );
        }
        let (entries, rules, links) = slice_entries(&mut vs, &devices)?;
        // One classifier lookup on arrival; each link hop is one port-map lookup.
        let sliced_tables = dev.tables + 1 + hops;
        let extra_native = nat.parser_passes - c.native.len() as u64;
        let extra_sliced =
            dev.parser_passes - c.slice_native.as_ref().map_or(c.native.len(), Vec::len) as u64;
        let h = &c.hyper4;
        let mut row = json!({
            "row": c.name,
            "path": c.what,
            "devices_on_path": devices,
            "hyper4": {
                "tables_native": opt(h.stages_native),
                "tables_persona": opt(h.stages_hp4),
                "entries_native": opt(h.entries_native),
                "entries_persona": opt(h.entries_hp4),
                "passes": h.passes,
                "bandwidth_loss_pct": opt(h.bandwidth_loss_pct),
                "ping_flood_factor": opt(h.latency_factor),
            },
            "tern": {
                "tables_native": nat.tables,
                "tables_sliced": sliced_tables,
                "tables_applied_with_keyless_native": nat.applied,
                "classifier_lookups": 1,
                "link_hops": hops,
                "extra_passes_native": extra_native,
                "extra_passes_sliced": extra_sliced,
                "entries_native": nat.entries,
                "entries_sliced": entries,
                "classifier_rules": rules,
                "links": links,
                "same_output": true,
            },
        });
        md.push_str(&format!(
            "| {} | {} | {} → {} | {} → {} ({} classifier + {} link hops) | {} | {} / {} | {} → {} \
             | {} → {} (+ {} rules + {} links) |\n",
            c.name,
            c.what,
            cell(h.stages_native),
            cell(h.stages_hp4),
            nat.tables,
            sliced_tables,
            1,
            hops,
            h.passes,
            extra_native,
            extra_sliced,
            cell(h.entries_native),
            cell(h.entries_hp4),
            nat.entries,
            entries,
            rules,
            links
        ));
        if a.timed {
            let (mut tn, mut ts) = (Vec::new(), Vec::new());
            let (mut ln, mut ls) = (Vec::new(), Vec::new());
            let (mut bn, mut bs) = (Vec::new(), Vec::new());
            let clock = clock_cost();
            for r in 0..a.runs.max(1) {
                // Which side goes first alternates run by run (native then sliced, then the
                // other way round), so that a drift within a run (caches and branch
                // predictors warmed by the side before, the clock's frequency) falls on both
                // sides alike instead of always on the second.
                if r % 2 == 0 {
                    tn.push(time_native(&mut switches, &c, a.packets));
                    ts.push(time_slice(&mut vs, &c, a.packets));
                    bn.push(time_native_batch(&mut switches, &c, a.packets));
                    bs.push(time_slice_batch(&mut vs, &c, a.packets));
                } else {
                    ts.push(time_slice(&mut vs, &c, a.packets));
                    tn.push(time_native(&mut switches, &c, a.packets));
                    bs.push(time_slice_batch(&mut vs, &c, a.packets));
                    bn.push(time_native_batch(&mut switches, &c, a.packets));
                }
                let (n, s) = latency_pair(&mut switches, &mut vs, &c, a.packets, clock);
                ln.push(n);
                ls.push(s);
            }
            let own = Timed::of_runs(tn, ts, ln, ls, bn, bs);
            let t = Timed::across(own, &others, c.name)?;
            let k = t.processes.len();
            // Per process: its rate loss, p99 added and batch loss (paired within it).
            let each = |f: fn(&Timed) -> f64| t.processes.iter().map(f).collect::<Vec<_>>();
            row["tern"]["timed"] = json!({
                "packets_per_run": a.packets,
                "runs": a.runs,
                "processes": k,
                "native_mpps_median": t.n / 1e6,
                "sliced_mpps_median": t.s / 1e6,
                "rate_loss_pct": t.loss,
                "ns_added_per_packet": 1e9 / t.s - 1e9 / t.n,
                "native_latency_p50_ns": t.n50,
                "native_latency_p99_ns": t.n99,
                "sliced_latency_p50_ns": t.s50,
                "sliced_latency_p99_ns": t.s99,
                "p99_added_pct": t.p99_added,
                "latency_method": LATENCY_METHOD,
                "latency_group": LAT_GROUP,
                "latency_samples_per_run": (a.packets / LAT_GROUP).max(1),
                "clock_cost_ns": clock,
                "batch": BATCH,
                "native_batch_mpps_median": t.nb / 1e6,
                "sliced_batch_mpps_median": t.sb / 1e6,
                "batch_rate_loss_pct": t.batch_loss,
                "per_process": {
                    "rate_loss_pct": each(|p| p.loss),
                    "p99_added_pct": each(|p| p.p99_added),
                    "batch_rate_loss_pct": each(|p| p.batch_loss),
                },
            });
            // With several processes, each figure's range over them beside it.
            let range = |f: fn(&Timed) -> f64, sign: f64| {
                if k < 2 {
                    return String::new();
                }
                let v = each(f).into_iter().map(|x| sign * x);
                let (lo, hi) = v.fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(x), h.max(x)));
                format!(" ({lo:+.1} … {hi:+.1})")
            };
            batch_md.push_str(&format!(
                "| {} | {:.3} | {:.3} | {:+.1} %{} | {:+.1} |\n",
                c.name,
                t.nb / 1e6,
                t.sb / 1e6,
                -t.batch_loss,
                range(|p| p.batch_loss, -1.0),
                1e9 / t.sb - 1e9 / t.nb
            ));
            timed_md.push_str(&format!(
                "| {} | {} | {:.3} | {:.3} | {:+.1} %{} | {:+.0} | {:.0} / {:.0} | {:.0} / {:.0} | \
                 {:+.1} %{} |\n",
                c.name,
                cell(h.bandwidth_loss_pct.map(|b| format!("−{b} %"))),
                t.n / 1e6,
                t.s / 1e6,
                -t.loss,
                range(|p| p.loss, -1.0),
                1e9 / t.s - 1e9 / t.n,
                t.n50,
                t.n99,
                t.s50,
                t.s99,
                t.p99_added,
                range(|p| p.p99_added, 1.0)
            ));
        }
        println!(
            "{}: tables {} native, {} sliced; entries {} native, {} sliced (+{} rules, +{} links)",
            c.name, nat.tables, sliced_tables, nat.entries, entries, rules, links
        );
        rows.push(row);
    }
    let (live, live_md) = live_change(dir, a.runs.max(1) * 5)?;
    print!("{live_md}");
    if live["other_devices_packets_lost"] != json!(0) {
        bail!("live change lost packets of other devices: {live}");
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let mut report = json!({
        "what": "HyPer4's penalty table on tern (tern virt bench)",
        "timed": a.timed,
        "processes": if a.timed { a.processes.max(1) } else { 1 },
        "rows": rows,
    });
    if a.timed {
        report["live_change"] = live;
    }
    let jpath = a.out.join("virt_bench.json");
    std::fs::write(&jpath, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", jpath.display()))?;
    let mut text = String::from(
        "# HyPer4's penalties beside tern's (`tern virt bench`)\n\nCounted per packet on the \
         row's most complex path; the sliced tern gives the same frame on the same port as the \
         native programs. HyPer4's figures: `../shared/reference/virtualization.md` §1.5, §1.7 \
         (its native rows are P4-14 programs with more condition tables; tern's are \
         `p4/virt/*.p4`).\n\n",
    );
    text.push_str(&md);
    if a.timed {
        if a.processes > 1 {
            text.push_str(&format!(
                "\nTimed in {} processes one after the other, {} run(s) each: every figure is \
                 the median over the processes of each one's median; a ratio's median is of \
                 each process's own ratio (native and sliced timed in the same process), in \
                 brackets its range over the processes.\n",
                a.processes,
                a.runs.max(1)
            ));
        }
        text.push_str(
            "\n## Packet rate in memory (one core, one packet per call, median; native \
             `process_packet`, sliced one `VirtSwitch::process_each` session)\n\n\
             | row | HyPer4 bandwidth | tern native Mpps | tern sliced Mpps | sliced vs native | \
             ns added | native latency p50 / p99 ns | sliced p50 / p99 ns | p99 sliced vs native |\n\
             |---|---|---|---|---|---|---|---|---|\n",
        );
        text.push_str(&timed_md);
        text.push_str(&format!("\nLatency: {LATENCY_METHOD}\n"));
        text.push_str(&format!(
            "\n## Packet rate in memory, batches of {BATCH} (one core, median; both sides through \
             the burst API: native `Switch::process_burst`, each hop running the previous hop's \
             frames as one burst; sliced `VirtSwitch::process_burst`)\n\n\
             | row | tern native Mpps | tern sliced Mpps | sliced vs native | ns added |\n\
             |---|---|---|---|---|\n"
        ));
        text.push_str(&batch_md);
        text.push_str(&live_md);
    }
    let mpath = a.out.join("virt_bench.md");
    std::fs::write(&mpath, text).with_context(|| format!("writing {}", mpath.display()))?;
    println!("wrote {} and {}", jpath.display(), mpath.display());
    Ok(std::process::ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

    /// The bench's arguments as the tests run it: writing to `dir`, the repository's
    /// scenarios, 50 packets and one run, untimed, no plot (the command line's other
    /// defaults); each test sets what it is about.
    fn test_args(dir: &Path) -> BenchArgs {
        BenchArgs {
            out: dir.to_path_buf(),
            scenarios: Path::new(ROOT).join("p4/virt/scenarios"),
            timed: false,
            packets: 50,
            runs: 1,
            only: None,
            processes: 1,
            isolation: false,
            batch: 32,
            attack_frames: 32,
            workers: vec![1, 2],
            victim_share: 0.4,
            victim_kpps: None,
            quantum_ns: tern_virt::DEFAULT_QUANTUM_NS,
            charge: "work".into(),
            yield_busy: false,
            front_wakes_all: false,
            slice_us: 0,
            worker_slice_us: None,
            no_plot: true,
        }
    }

    /// `--only TEXT` runs the rows whose name contains TEXT, and names the rows when none
    /// does.
    #[test]
    fn only_runs_the_rows_named() {
        let dir = tern_fixtures::scratch("virt-bench-only");
        let args = |only: &str| BenchArgs {
            only: Some(only.into()),
            workers: vec![1],
            ..test_args(&dir)
        };
        run(args("Ex. 1 B")).unwrap();
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("virt_bench.json")).unwrap())
                .unwrap();
        let names: Vec<&str> = j["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["row"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Ex. 1 B (L2 - FW - L2)"]);
        let e = run(args("no such row")).unwrap_err().to_string();
        assert!(
            e.contains("no row's name contains it") && e.contains("firewall"),
            "{e}"
        );
    }

    /// Every row runs: native and sliced give the same frame; the counts are what the
    /// programs do (no extra passes; the sliced path adds one classifier lookup plus its hops).
    #[test]
    fn counted_table() {
        let dir = tern_fixtures::scratch("virt-bench");
        run(BenchArgs {
            timed: true,
            ..test_args(&dir)
        })
        .unwrap();
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("virt_bench.json")).unwrap())
                .unwrap();
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 8);
        let row = |name: &str| {
            rows.iter()
                .find(|r| r["row"].as_str().unwrap().starts_with(name))
                .unwrap()["tern"]
                .clone()
        };
        let t = |name: &str, k: &str| row(name)[k].as_u64().unwrap();
        assert_eq!(t("L2 switch", "tables_native"), 2);
        assert_eq!(t("firewall", "tables_native"), 3);
        assert_eq!(t("router", "tables_native"), 3);
        assert_eq!(t("ARP proxy (answered)", "tables_native"), 1);
        assert_eq!(t("ARP proxy (forwarded)", "tables_native"), 2);
        for r in rows {
            let tr = &r["tern"];
            assert_eq!(tr["extra_passes_native"], 0, "{r}");
            assert_eq!(tr["extra_passes_sliced"], 0, "{r}");
            if !r["row"].as_str().unwrap().contains("merged") {
                assert_eq!(
                    tr["tables_sliced"].as_u64().unwrap(),
                    tr["tables_native"].as_u64().unwrap() + 1 + tr["link_hops"].as_u64().unwrap()
                );
                assert_eq!(tr["entries_sliced"], tr["entries_native"], "{r}");
            }
        }
        assert_eq!(t("L2 switch", "link_hops"), 0);
        assert_eq!(t("Ex. 1 B", "link_hops"), 2);
        assert_eq!(t("Ex. 1 C", "link_hops"), 4);
        // s1 L2 (smac, dmac), ARP proxy (fwd: not ARP), firewall (fwd, tcp_block, ipv4_block),
        // router (ipv4_lpm, forward, send_frame), s3 L2.
        assert_eq!(t("Ex. 1 C", "tables_native"), 2 + 1 + 3 + 3 + 2);
        assert!(
            row("firewall")["timed"]["sliced_mpps_median"]
                .as_f64()
                .unwrap()
                > 0.0
        );
        // The batched rows, both sides, for every row (the chains too).
        for r in rows {
            for k in ["native_batch_mpps_median", "sliced_batch_mpps_median"] {
                assert!(r["tern"]["timed"][k].as_f64().unwrap() > 0.0, "{k}: {r}");
            }
        }
        let md = std::fs::read_to_string(dir.join("virt_bench.md")).unwrap();
        assert!(
            md.contains("| L2 switch |") && md.contains("2 → 13"),
            "{md}"
        );
        assert!(md.contains("batches of 32"), "{md}");
        assert!(
            row("router")["timed"]["sliced_latency_p99_ns"]
                .as_f64()
                .unwrap()
                > 0.0
        );
    }

    /// The timed isolation suite runs every attack over 1 and 2 workers with the open-loop
    /// victim; every victim packet comes out byte-exact and in order (checked inside), none
    /// is lost at this small load, and each attack did its work.
    #[test]
    fn isolation_suite_runs() {
        let dir = tern_fixtures::scratch("virt-isolation");
        run(BenchArgs {
            packets: 64,
            isolation: true,
            batch: 8,
            attack_frames: 4,
            victim_share: 0.2,
            ..test_args(&dir)
        })
        .unwrap();
        let j: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("isolation.json")).unwrap())
                .unwrap();
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 18);
        let row = |w: u64, name: &str| {
            rows.iter()
                .find(|r| r["workers"] == w && r["attack"].as_str().unwrap().starts_with(name))
                .unwrap()
                .clone()
        };
        for r in rows {
            // Charged by counted work: the victim's 64 packets ran 2 passes each (ingress,
            // egress), whatever the attack beside it.
            assert_eq!(r["charge"], "work");
            assert_eq!(r["victim_units"], 2 * 64, "{r}");
        }
        for w in [1, 2] {
            assert!(row(w, "alone")["delivered_pps"].as_f64().unwrap() > 0.0);
            assert!(row(w, "alone")["capacity_pps"].as_f64().unwrap() > 0.0);
            assert_eq!(row(w, "alone")["attacker_packets_in"], 0);
            assert!(row(w, "alone")["attacker_work_ns"] == 0);
            // Panics are injected with every dispatch and caught.
            assert!(
                row(w, "injected panic")["attacker_panics"]
                    .as_u64()
                    .unwrap()
                    >= 1
            );
            // The multicast storm is cut by the pass quota (64): at most 63 replicas a frame.
            let m = row(w, "multicast");
            let (out, inp) = (
                m["attacker_frames_out"].as_u64().unwrap(),
                m["attacker_packets_in"].as_u64().unwrap(),
            );
            assert!(out > 0 && out <= inp * 63, "{out} {inp}");
            for r in rows.iter().filter(|r| r["workers"] == w) {
                // Warm-up (8) and the run (64), all of them out; an attack's row also ran the
                // victim alone once on its pool before the attack (its paired baseline: one
                // run, the attack's one, split half before and half after), which its
                // comparisons are made against.
                let alone_row = r["attack"] == "alone";
                let paired = &r["alone_paired"];
                assert_eq!(paired["runs"], if alone_row { 0 } else { 1 }, "{r}");
                let want_in = if alone_row { 72 } else { 72 + 64 };
                assert_eq!(r["victim_packets_in"].as_u64().unwrap(), want_in, "{r}");
                let (p99, p990) = (
                    r["p99_ns"].as_f64().unwrap(),
                    paired["p99_ns"].as_f64().unwrap(),
                );
                // The runs' own p99 (one run here: the median is it), and the machine's
                // interrupts over them.
                assert_eq!(r["p99_ns_runs"][0].as_f64().unwrap(), p99, "{r}");
                if std::fs::read_to_string("/proc/interrupts").is_ok_and(|t| t.contains("LOC:")) {
                    assert!(r["interrupts"]["LOC"].is_u64(), "{r}");
                }
                let pct = r["p99_vs_alone_pct"].as_f64().unwrap();
                assert!((pct - 100.0 * (p99 / p990 - 1.0)).abs() < 1e-6, "{r}");
                if !alone_row {
                    // The baseline is the paired run's own figure.
                    assert_eq!(paired["p99_ns_runs"][0].as_f64().unwrap(), p990, "{r}");
                    assert_eq!(
                        paired["delivered_pps_runs"][0], paired["delivered_pps"],
                        "{r}"
                    );
                }
                assert_eq!(r["lost"], 0, "{r}");
                assert!(r["victim_work_ns"].as_u64().unwrap() > 0, "{r}");
                if r["attack"] != "alone" && r["attack"] != "control-plane flood" {
                    assert!(r["attacker_work_ns"].as_u64().unwrap() > 0, "{r}");
                }
                // Where the victim waited: five stages, each in causal order (no negative
                // stage), whose sum for the slowest packet is its latency (at least the p99).
                let st = &r["victim_stages"];
                let mut tail = 0.0;
                for name in [
                    "front_late",
                    "to_worker",
                    "staged_to_queued",
                    "queued_to_ran",
                    "ran_to_front",
                ] {
                    let (p50, p99) = (
                        st[name]["p50_ns"].as_f64().unwrap(),
                        st[name]["p99_ns"].as_f64().unwrap(),
                    );
                    assert!(p50 >= 0.0 && p99 >= p50, "{name}: {r}");
                    tail += st[name]["slowest_1pct_mean_ns"].as_f64().unwrap();
                }
                let p99 = r["p99_ns"].as_f64().unwrap();
                assert!(tail >= p99 - 1.0, "{tail} < {p99}: {r}");
                assert!(st["dispatch_call"]["p99_ns"].as_f64().unwrap() > 0.0, "{r}");
                // Each thread's CPU time and run-queue wait over the row's runs (Linux).
                if cfg!(target_os = "linux") {
                    let th = &r["threads"];
                    assert!(th["front"]["cpu_ms"].as_f64().unwrap() > 0.0, "{r}");
                    for k in 0..w {
                        let t = &th[format!("worker {k}")];
                        assert!(t["runqueue_wait_ms"].as_f64().unwrap() >= 0.0, "{r}");
                    }
                }
            }
        }
        assert!(j["front_timer_slack_ns"].as_u64().is_some());
        let md = std::fs::read_to_string(dir.join("isolation.md")).unwrap();
        assert!(md.contains("| 2 | control-plane flood |"), "{md}");
        assert!(md.contains("## Where the victim waits"), "{md}");
        assert!(md.contains("## Threads"), "{md}");
    }
}
