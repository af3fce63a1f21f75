//! `tern virt bench --isolation`: the isolation suite timed. A victim device (`basic.p4` with
//! one /32 route) forwards its packets while an attacker device on the same tern runs one of
//! the suite's attacks (recirculate loop, resubmit loop, parser loop, multicast storm, clone
//! storm, table exhaustion, injected panics, control-plane flood); the victim's packet rate and
//! its per-packet latency (median, p99) are measured alone and under each attack, over 1 and 2
//! worker threads (`VirtWorkers`; with 2 the victim and the attacker each have a worker). Each
//! attack's row is compared with the victim alone on the same pool (the attacker's device
//! loaded and silent), as many runs as the attack's, half before them and half after: a
//! baseline beside the row in time, not the suite's alone row measured minutes before.
//! Every victim packet is checked byte for byte against what the native program makes of it.
//!
//! The victim is **open loop**: it offers a fixed rate, `--victim-share` (default 40 %) of
//! the capacity measured first (the victim alone, closed loop, on the same worker count),
//! paced by the clock in dispatches of at most `--batch` packets; each packet is timestamped
//! at the moment it was due to be offered (so a front that falls behind counts as latency),
//! and its latency runs from there to the moment the front holds its output. The attacker
//! runs flat out: `--attack-frames` frames with every dispatch, more than its device can
//! take, so its queue stays full (and overflows); the control-plane attacks also queue their
//! control work with every dispatch. Reported per row: offered and delivered rate, loss,
//! p50/p99/p999 latency, the delivered rate and p99 against the victim alone, and the work
//! the scheduler charged each device (`--charge work`, the default: counted pipeline passes
//! at each device's calibrated ns per pass, `tern_virt::Cost::Work`; `time`: measured ns;
//! `bytes`), the units it counted and the chunks its guard charged by the clock. The
//! front sleeps until a worker hands outputs over or the next packet is due (no spinning
//! thread competes with the workers): with 2 workers only the victim's worker's hand-overs
//! wake it (`--front-wakes-all`: every worker's), and its timer slack is 1 ns.
//!
//! **Where the victim waits**: each victim packet's latency is cut into five stages that add
//! up to it — due → the front's dispatch call (front late), → staged by its worker (the
//! inbox and the worker's local ring, the chunk or job the worker was in), → released into
//! its device's queue, → the end of the chunk it ran in, → the front holding its output —
//! from the front's own stamps and the worker's (`tern_virt::StageTrace`, the victim's
//! packets only), with p50/p99 per stage and the mean of each over the slowest 1 %.
//! Timings from a shared or busy machine mean nothing: the figures are for a quiet machine
//! and a release build.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use serde_json::json;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, MirroringSession, OutputPacket, PacketPath, Runtime};
use tern_virt::config::load_program;
use tern_virt::{
    Caller, Cost, DeviceId, DeviceSpec, Quotas, Rule, Stage, StageTrace, Target, VirtSwitch,
    VirtWorkers, WorkerOptions,
};

const VICTIM: DeviceId = 1;
const ATTACKER: DeviceId = 2;
/// The victim's physical ports (in, out) and the attacker's ingress.
const V_IN: u32 = 1;
const V_OUT: u32 = 2;
const A_IN: u32 = 10;
/// The attacker's pass quota (instances one arriving packet may spawn).
const A_PASSES: usize = 64;
/// The attacker's entry quota (table exhaustion).
const A_ENTRIES: u64 = 1024;

/// What `tern virt bench --isolation` runs.
pub struct IsolationArgs {
    pub out: PathBuf,
    /// Where `p4/tutorials/basic.p4` is (the repository's `p4` folder).
    pub p4_dir: PathBuf,
    /// Victim packets per timed run.
    pub packets: usize,
    pub runs: usize,
    /// Victim packets per dispatch at most (the pacing batch).
    pub batch: usize,
    /// Attacker frames sent with each dispatch.
    pub attack_frames: usize,
    pub workers: Vec<usize>,
    /// The victim's offered rate as a share of its measured capacity (0 < share <= 1).
    pub victim_share: f64,
    /// Offer the victim this many packets per second instead of `victim_share` of its
    /// measured capacity (the same load for every build and setting compared: the capacity
    /// probe's figure moves with the machine's load).
    pub victim_pps: Option<f64>,
    /// The scheduler's quantum (ns of work per device per round).
    pub quantum_ns: u64,
    /// What the scheduler charges (`Cost::Work` by default).
    pub cost: Cost,
    /// `WorkerOptions::yield_when_busy`.
    pub yield_when_busy: bool,
    /// Every worker's hand-over wakes the front (default: with 2 or more workers only the
    /// victim's worker's; `VirtWorkers::wait_outputs_from`).
    pub front_wakes_all: bool,
    /// The time slice (µs) asked for the front and the workers (0: the kernel's default).
    pub slice_us: u64,
    /// The time slice the worker threads ask for (`WorkerOptions::slice`).
    pub worker_slice: tern_virt::ThreadSlice,
    /// Draw isolation.png (matplotlib, scripts/virt/isolation-plot.sh).
    pub plot: bool,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Attack {
    Alone,
    Recirculate,
    Resubmit,
    ParserLoop,
    Multicast,
    CloneStorm,
    TableExhaustion,
    Panic,
    ControlFlood,
}

const ATTACKS: [Attack; 9] = [
    Attack::Alone,
    Attack::Recirculate,
    Attack::Resubmit,
    Attack::ParserLoop,
    Attack::Multicast,
    Attack::CloneStorm,
    Attack::TableExhaustion,
    Attack::Panic,
    Attack::ControlFlood,
];

impl Attack {
    fn name(self) -> &'static str {
        match self {
            Attack::Alone => "alone",
            Attack::Recirculate => "recirculate loop",
            Attack::Resubmit => "resubmit loop",
            Attack::ParserLoop => "parser loop",
            Attack::Multicast => "multicast storm (512 ports)",
            Attack::CloneStorm => "clone storm (clone + resubmit)",
            Attack::TableExhaustion => "table exhaustion",
            Attack::Panic => "injected panic (every batch)",
            Attack::ControlFlood => "control-plane flood",
        }
    }

    /// The attacker's program: parser body, ingress declarations, ingress body, egress body.
    fn program(self) -> (&'static str, &'static str, &'static str, &'static str) {
        const PARSE: &str = "state start { p.extract(h.eth); transition accept; }";
        match self {
            Attack::Recirculate => (
                PARSE,
                "",
                "sm.egress_spec = 1;",
                "recirculate_preserving_field_list(0);",
            ),
            Attack::Resubmit => (PARSE, "", "resubmit_preserving_field_list(0);", ""),
            Attack::ParserLoop => (
                "state start { p.extract(h.eth); transition spin; } state spin { transition spin; }",
                "",
                "sm.egress_spec = 1;",
                "",
            ),
            Attack::Multicast => (PARSE, "", "sm.mcast_grp = 1;", ""),
            Attack::CloneStorm => (
                PARSE,
                "",
                "clone(CloneType.I2E, 1); resubmit_preserving_field_list(0);",
                "",
            ),
            Attack::TableExhaustion | Attack::ControlFlood => (
                PARSE,
                "action fwd(bit<9> port) { sm.egress_spec = port; } \
                 table t { key = { h.eth.dst: exact; } actions = { fwd; NoAction; } \
                 size = 65536; default_action = NoAction(); }",
                "sm.egress_spec = 1; t.apply();",
                "",
            ),
            Attack::Alone | Attack::Panic => (PARSE, "", "sm.egress_spec = 1;", ""),
        }
    }
}

/// A v1model program (Ethernet only) around the attack's bodies.
fn attacker_source(a: Attack) -> String {
    let (parser, decls, ingress, egress) = a.program();
    format!(
        r#"
#include <core.p4>
#include <v1model.p4>
header eth_t {{ bit<48> dst; bit<48> src; bit<16> type; }}
struct headers {{ eth_t eth; }}
struct metadata {{ }}
parser P(packet_in p, out headers h, inout metadata m, inout standard_metadata_t sm) {{
    {parser}
}}
control V(inout headers h, inout metadata m) {{ apply {{ }} }}
control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {{
    {decls}
    apply {{ {ingress} }}
}}
control E(inout headers h, inout metadata m, inout standard_metadata_t sm) {{ apply {{ {egress} }} }}
control C(inout headers h, inout metadata m) {{ apply {{ }} }}
control D(packet_out p, in headers h) {{ apply {{ p.emit(h.eth); }} }}
V1Switch(P(), V(), I(), E(), C(), D()) main;
"#
    )
}

/// The victim's packet `seq`: IPv4 10.0.1.1 → 10.0.2.2, the sequence number in the first
/// four payload bytes (34..38).
fn victim_packet(seq: u32) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    p.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ]);
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0x5a; 12]);
    p
}

fn attacker_frame(i: usize) -> Vec<u8> {
    let mut f = vec![0xff; 6];
    f.extend_from_slice(&[0, 0, 0, 0, 0, 9, 0x88, 0xb5]);
    f.extend_from_slice(&(i as u32).to_be_bytes());
    f.extend_from_slice(&[0; 42]);
    f
}

fn victim_route(rt: &mut dyn Runtime) -> anyhow::Result<()> {
    rt.mt_add_entry(
        "MyIngress.ipv4_lpm",
        &[MatchParam::Lpm {
            key: vec![10, 0, 2, 2],
            prefix_len: 32,
        }],
        "MyIngress.ipv4_forward",
        &[vec![8, 0, 0, 0, 2, 0x22], vec![0, 2]],
        None,
    )?;
    Ok(())
}

/// The victim's output for packet 0 as the native program makes it (the sequence number at
/// bytes 34..38 is the only difference between packets).
fn victim_expected(victim_json: &str) -> anyhow::Result<Vec<u8>> {
    let mut native = Switch::from_json(victim_json, SwitchOptions::default())?;
    victim_route(&mut native)?;
    let mut out = Vec::new();
    native.process_packet(V_IN, &victim_packet(0), &mut out);
    if out.len() != 1 || out[0].port != V_OUT {
        bail!("the native victim program does not forward its packet to port {V_OUT}");
    }
    Ok(out.remove(0).data)
}

/// The victim and one attacker on one `VirtSwitch`.
fn build(victim_json: &str, attack: Attack) -> anyhow::Result<VirtSwitch> {
    let attacker_json = tern_p4::compile_str(
        &attacker_source(attack),
        "attacker.p4",
        &tern_p4::Options::default(),
    )
    .map_err(|d| anyhow::anyhow!("the {} attacker does not compile: {d}", attack.name()))?
    .json;
    let mut vs = VirtSwitch::new();
    let spec = |json: &str, owner: &str, quotas| DeviceSpec {
        json: json.to_string(),
        owner: Some(owner.to_string()),
        quotas,
    };
    vs.add_device(VICTIM, spec(victim_json, "alice", Quotas::default()))?;
    let quotas = Quotas {
        max_entries: Some(A_ENTRIES),
        max_passes: A_PASSES,
        max_register_bytes: None,
        max_parser_states: tern_virt::DEFAULT_PARSER_STATES,
        max_buffers: None,
    };
    vs.add_device(ATTACKER, spec(&attacker_json, "mallory", quotas))?;
    victim_route(&mut vs.runtime(Caller::Tenant("alice"), VICTIM)?)?;
    let rule = |port, device, vport| Rule {
        priority: 0,
        port: Some(port),
        vlan: None,
        field: None,
        device,
        vport,
    };
    vs.add_rule(rule(V_IN, VICTIM, None))?;
    vs.add_rule(rule(A_IN, ATTACKER, Some(0)))?;
    let mut t = vs.topology().clone();
    t.port_maps
        .entry(VICTIM)
        .or_default()
        .insert(V_OUT, Target::Phys(V_OUT));
    let m = t.port_maps.entry(ATTACKER).or_default();
    for vp in 0..512 {
        m.insert(vp, Target::Phys(100 + vp));
    }
    vs.set_topology(t)?;
    let mut rt = vs.runtime(Caller::Tenant("mallory"), ATTACKER)?;
    match attack {
        Attack::Multicast => {
            let g = rt.mc_mgrp_create(1)?;
            let ports: Vec<u32> = (0..512).collect();
            let node = rt.mc_node_create(0, &ports, &[])?;
            rt.mc_node_associate(g, node)?;
        }
        Attack::CloneStorm => rt.mirroring_session_add(
            1,
            MirroringSession {
                port: Some(1),
                mgid: None,
            },
        )?,
        _ => {}
    }
    Ok(vs)
}

/// An exact key of the attacker's table `t` (48-bit Ethernet destination).
fn key(n: u64) -> Vec<MatchParam> {
    vec![MatchParam::Exact(n.to_be_bytes()[2..].to_vec())]
}

/// The attacker's control work queued with one batch (not waited for). A post refused
/// because the attacker already has its bound of control work queued
/// (`WorkerOptions::max_queued_control`) is part of the attack, not the bench's failure: it
/// is counted in the attacker's `control_backlog_refused`.
fn control_work(pool: &VirtWorkers, attack: Attack, batch_no: u64) -> anyhow::Result<()> {
    match post_control(pool, attack, batch_no) {
        Err(tern_virt::VirtError::ControlBacklog { .. }) => Ok(()),
        r => Ok(r?),
    }
}

fn post_control(
    pool: &VirtWorkers,
    attack: Attack,
    batch_no: u64,
) -> Result<(), tern_virt::VirtError> {
    match attack {
        Attack::Panic => pool.post(ATTACKER, |vs| {
            let _ = vs.release(ATTACKER);
            let _ = vs.inject_panic(ATTACKER, 1);
        })?,
        // A tenant's batch of writes, posted as steps of one write (an add, or an add and
        // its delete): the workers run a step per turn of the device, charged by the entries
        // it touched (`VirtWorkers::post_steps`).
        Attack::TableExhaustion => pool.post_steps(ATTACKER, 64, move |vs, i| {
            // Add entries until the quota refuses them, then keep trying.
            if let Ok(mut rt) = vs.runtime(Caller::Tenant("mallory"), ATTACKER) {
                let _ = rt.mt_add_entry(
                    "I.t",
                    &key(batch_no * 64 + i as u64),
                    "I.fwd",
                    &[vec![0, 3]],
                    None,
                );
            }
        })?,
        Attack::ControlFlood => pool.post_steps(ATTACKER, 32, move |vs, i| {
            // A burst of adds and deletes (within the quota), as a controller hammering writes.
            if let Ok(mut rt) = vs.runtime(Caller::Tenant("mallory"), ATTACKER) {
                if let Ok(h) = rt.mt_add_entry(
                    "I.t",
                    &key(batch_no * 32 + i as u64),
                    "I.fwd",
                    &[vec![0, 3]],
                    None,
                ) {
                    let _ = rt.mt_delete_entry("I.t", h);
                }
            }
        })?,
        _ => {}
    }
    Ok(())
}

/// One timed run's figures.
struct Run {
    /// Victim packets offered, and over how long (first due to last dispatched).
    offered: u64,
    offered_pps: f64,
    /// Victim packets out, and their rate (from the start to the last one out).
    delivered: u64,
    delivered_pps: f64,
    p50_ns: f64,
    p99_ns: f64,
    p999_ns: f64,
    attacker_out: u64,
    /// Where the victim's packets waited (`None`: a packet was lost or overflowed, so the
    /// stamps do not line up).
    stages: Option<Breakdown>,
}

/// The stages of a victim packet's latency, in order; they add up to its latency.
const STAGES: [&str; 5] = [
    "front_late",
    "to_worker",
    "staged_to_queued",
    "queued_to_ran",
    "ran_to_front",
];

/// What each stage's column means (for the markdown).
const STAGE_TITLES: [&str; 5] = [
    "due → dispatch call (front late)",
    "dispatch call → staged by the worker (the front's dispatch, inbox, local ring)",
    "staged → released into its queue",
    "released → its chunk ran (end of chunk)",
    "ran → the front took its output (turn end, outputs ring, the front's wake-up)",
];

/// One run's latency breakdown: per stage, p50 and p99 over the victim's packets, and the
/// mean of each stage over the slowest 1 % (what the p99 is made of); the front's dispatch
/// call itself (p50, p99).
#[derive(Clone, Copy, Default)]
struct Breakdown {
    p50: [f64; 5],
    p99: [f64; 5],
    tail: [f64; 5],
    dispatch: (f64, f64),
}

/// The breakdown of one run: `due(seq)` the packet's due time, `call`/`ret` when the front
/// called `dispatch` with it and when that returned, `took` when the front took its output
/// (ns since the run's start; NaN: not out), the workers' stamps in `trace` (ns since
/// `trace_base`, which is `offset` ns before the run's start).
fn breakdown(
    n: usize,
    due: impl Fn(usize) -> f64,
    call: &[f64],
    ret: &[f64],
    took: &[f64],
    trace: &StageTrace,
    offset: f64,
) -> Option<Breakdown> {
    if trace.overflowed() || trace.count(Stage::Ran) < n as u64 {
        return None;
    }
    let mut per: Vec<[f64; 5]> = Vec::with_capacity(n);
    for seq in 0..n {
        let at = |s| trace.at(s, seq).map(|v| v as f64 - offset);
        let (Some(st), Some(rel), Some(ran)) =
            (at(Stage::Staged), at(Stage::Released), at(Stage::Ran))
        else {
            return None;
        };
        if took[seq].is_nan() {
            return None;
        }
        let d = due(seq);
        per.push([
            call[seq] - d,
            st - call[seq],
            rel - st,
            ran - rel,
            took[seq] - ran,
        ]);
    }
    let mut b = Breakdown::default();
    for i in 0..5 {
        let mut v: Vec<f64> = per.iter().map(|p| p[i]).collect();
        v.sort_by(f64::total_cmp);
        b.p50[i] = percentile(&v, 0.5);
        b.p99[i] = percentile(&v, 0.99);
    }
    per.sort_by(|a, b| f64::total_cmp(&a.iter().sum(), &b.iter().sum()));
    let tail = &per[per.len() - per.len().div_ceil(100)..];
    for i in 0..5 {
        b.tail[i] = tail.iter().map(|p| p[i]).sum::<f64>() / tail.len() as f64;
    }
    let mut d: Vec<f64> = (0..n).map(|s| ret[s] - call[s]).collect();
    d.sort_by(f64::total_cmp);
    b.dispatch = (percentile(&d, 0.5), percentile(&d, 0.99));
    Some(b)
}

/// `p` (0..=1) of sorted `v` (0 when empty).
fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Packets per capacity probe's dispatch.
const PROBE_BATCH: usize = 32;

/// The victim alone, closed loop (a batch of 32 dispatched, all its outputs waited for, the
/// next), through `pool`: its packet rate, the capacity the open-loop victim's share is of.
fn capacity(pool: &mut VirtWorkers, packets: usize, want: &[u8]) -> anyhow::Result<f64> {
    let victims: Vec<Vec<u8>> = (0..PROBE_BATCH as u32).map(victim_packet).collect();
    let pkts: Vec<(u32, &[u8])> = victims.iter().map(|f| (V_IN, f.as_slice())).collect();
    let batches = packets.div_ceil(PROBE_BATCH).max(1);
    let mut out = Vec::new();
    let t = Instant::now();
    for _ in 0..batches {
        pool.dispatch(&pkts);
        let mut got = 0;
        while got < PROBE_BATCH {
            pool.take_outputs(&mut out);
            if out.is_empty() {
                if !pool.wait_outputs(Duration::from_secs(10)) {
                    bail!("capacity probe: the victim's packets did not come back");
                }
                continue;
            }
            for o in &out {
                if o.port != V_OUT || o.data[..34] != want[..34] {
                    bail!("capacity probe: the victim's packet came out wrong");
                }
                got += 1;
            }
            pool.recycle_outputs(&mut out);
        }
    }
    Ok((batches * PROBE_BATCH) as f64 / t.elapsed().as_secs_f64())
}

/// The front's side of a run: outputs taken, victim packets checked and timed.
struct Collect {
    attack: Attack,
    ns_per: f64,
    expect: Vec<u8>,
    lat: Vec<f64>,
    got: u64,
    next_seq: u64,
    attacker_out: u64,
    last_out_ns: f64,
    /// When the front took each victim packet's output (by sequence number; NaN: not yet).
    took: Vec<f64>,
}

impl Collect {
    /// Take what the workers handed over; returns the frames taken.
    fn take(
        &mut self,
        pool: &mut VirtWorkers,
        out: &mut Vec<OutputPacket>,
        start: Instant,
    ) -> anyhow::Result<usize> {
        pool.take_outputs(out);
        let k = out.len();
        if k == 0 {
            return Ok(0);
        }
        let t = start.elapsed().as_nanos() as f64;
        for o in out.iter() {
            if o.port != V_OUT {
                self.attacker_out += 1;
                continue;
            }
            let seq = u32::from_be_bytes([o.data[34], o.data[35], o.data[36], o.data[37]]);
            self.expect[34..38].copy_from_slice(&seq.to_be_bytes());
            if o.data[..] != self.expect[..] || u64::from(seq) < self.next_seq {
                bail!(
                    "{}: victim packet {seq} came out wrong or out of order",
                    self.attack.name()
                );
            }
            self.next_seq = u64::from(seq) + 1;
            self.got += 1;
            self.lat.push(t - f64::from(seq) * self.ns_per);
            if let Some(x) = self.took.get_mut(seq as usize) {
                *x = t;
            }
            self.last_out_ns = t;
        }
        pool.recycle_outputs(out);
        Ok(k)
    }
}

/// Offer `a.packets` victim packets at `rate_pps` (open loop, paced by the clock) beside the
/// attack running flat out; every victim output is checked against `want` (its sequence
/// number patched in) and must come out in order (a lost one is skipped, counted).
fn run_open(
    pool: &mut VirtWorkers,
    a: &IsolationArgs,
    attack: Attack,
    want: &[u8],
    rate_pps: f64,
    batch_no: &mut u64,
) -> anyhow::Result<Run> {
    let n = a.packets.max(1) as u64;
    let b = a.batch.max(1);
    let attackers: Vec<Vec<u8>> = if attack == Attack::Alone {
        Vec::new()
    } else {
        (0..a.attack_frames).map(attacker_frame).collect()
    };
    let mut frames: Vec<Vec<u8>> = (0..b).map(|_| victim_packet(0)).collect();
    let ns_per = 1e9 / rate_pps;
    let mut c = Collect {
        attack,
        ns_per,
        expect: want.to_vec(),
        lat: Vec::with_capacity(n as usize),
        got: 0,
        next_seq: 0,
        attacker_out: 0,
        last_out_ns: 0.0,
        took: vec![f64::NAN; n as usize],
    };
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut sent = 0u64;
    let mut sent_all: Option<(Instant, f64)> = None;
    // The workers whose hand-overs wake the front (empty: all).
    let wake_for: Vec<usize> = match pool.worker_of(VICTIM) {
        Some(w) if pool.workers() > 1 && !a.front_wakes_all => vec![w],
        _ => Vec::new(),
    };
    // The workers stamp the victim's stages (its packets of earlier runs are all out).
    let base = Instant::now();
    let trace = StageTrace::new(VICTIM, base, n as usize);
    pool.set_trace(Some(Arc::clone(&trace)))?;
    let (mut call, mut ret) = (vec![f64::NAN; n as usize], vec![f64::NAN; n as usize]);
    let start = Instant::now();
    loop {
        let now_ns = start.elapsed().as_nanos() as f64;
        // Packet i is due at i * ns_per.
        let due = ((now_ns / ns_per) as u64 + 1).min(n);
        if sent < due {
            let k = ((due - sent) as usize).min(b);
            for (i, f) in frames[..k].iter_mut().enumerate() {
                f[34..38].copy_from_slice(&((sent + i as u64) as u32).to_be_bytes());
            }
            *batch_no += 1;
            control_work(pool, attack, *batch_no)?;
            let mut pkts: Vec<(u32, &[u8])> = Vec::with_capacity(attackers.len() + k);
            pkts.extend(attackers.iter().map(|f| (A_IN, f.as_slice())));
            pkts.extend(frames[..k].iter().map(|f| (V_IN, f.as_slice())));
            let t0 = start.elapsed().as_nanos() as f64;
            pool.dispatch(&pkts);
            let t1 = start.elapsed().as_nanos() as f64;
            call[sent as usize..sent as usize + k].fill(t0);
            ret[sent as usize..sent as usize + k].fill(t1);
            sent += k as u64;
            if sent == n {
                sent_all = Some((Instant::now(), start.elapsed().as_nanos() as f64));
            }
        }
        if c.take(pool, &mut out, start)? > 0 {
            continue;
        }
        if c.got == n {
            break;
        }
        match sent_all {
            Some((at, _)) if at.elapsed() > Duration::from_secs(2) => {
                // What is still inside comes out once the workers are idle (measured then);
                // the rest was lost.
                pool.wait_idle();
                c.take(pool, &mut out, start)?;
                break;
            }
            Some(_) => {
                pool.wait_outputs_from(&wake_for, Duration::from_millis(20));
            }
            None => {
                let next_due = sent as f64 * ns_per;
                let now = start.elapsed().as_nanos() as f64;
                if next_due > now {
                    pool.wait_outputs_from(
                        &wake_for,
                        Duration::from_nanos((next_due - now) as u64),
                    );
                }
            }
        }
    }
    pool.set_trace(None)?;
    let Collect {
        mut lat,
        got,
        attacker_out,
        last_out_ns,
        took,
        ..
    } = c;
    let offset = start.duration_since(base).as_nanos() as f64;
    let stages = breakdown(
        n as usize,
        |seq| seq as f64 * ns_per,
        &call,
        &ret,
        &took,
        &trace,
        offset,
    );
    lat.sort_by(f64::total_cmp);
    let offer_ns = sent_all.map(|s| s.1).unwrap_or(1.0).max(1.0);
    Ok(Run {
        offered: n,
        offered_pps: n as f64 / offer_ns * 1e9,
        delivered: got,
        delivered_pps: got as f64 / last_out_ns.max(1.0) * 1e9,
        p50_ns: percentile(&lat, 0.5),
        p99_ns: percentile(&lat, 0.99),
        p999_ns: percentile(&lat, 0.999),
        attacker_out,
        stages,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The machine's counts of the interrupts a thread on the other CPU can cause or suffer
/// (`/proc/interrupts`, summed over the CPUs): local timer, rescheduling and function-call
/// IPIs, TLB shootdowns. Empty when the file cannot be read.
fn interrupts() -> Vec<(String, u64)> {
    let Ok(text) = std::fs::read_to_string("/proc/interrupts") else {
        return Vec::new();
    };
    text.lines()
        .filter_map(|l| {
            let (name, rest) = l.trim_start().split_once(':')?;
            if !["LOC", "RES", "CAL", "TLB"].contains(&name) {
                return None;
            }
            let n = rest
                .split_whitespace()
                .map_while(|w| w.parse::<u64>().ok())
                .sum();
            Some((name.to_string(), n))
        })
        .collect()
}

/// Runs of the victim alone paired with an attack's runs: (before, after) the attack's `runs`
/// (the alone row itself: none).
fn paired_alone_runs(attack: Attack, runs: usize) -> (usize, usize) {
    if attack == Attack::Alone {
        return (0, 0);
    }
    let n = runs.max(1);
    (n.div_ceil(2), n / 2)
}

/// `n` runs of the victim alone on `pool` (an attack's paired baseline), added to `into`.
fn alone_runs(
    pool: &mut VirtWorkers,
    a: &IsolationArgs,
    want: &[u8],
    rate: f64,
    batch_no: &mut u64,
    n: usize,
    into: &mut Vec<Run>,
) -> anyhow::Result<()> {
    for _ in 0..n {
        into.push(run_open(pool, a, Attack::Alone, want, rate, batch_no)?);
    }
    Ok(())
}

/// The victim's and the attacker's devices over `workers` workers (with 2 or more, each on
/// its own worker).
fn pool_for(
    victim_json: &str,
    attack: Attack,
    workers: usize,
    a: &IsolationArgs,
) -> anyhow::Result<VirtWorkers> {
    let vs = build(victim_json, attack)?;
    let mut pool = VirtWorkers::new(
        vs,
        WorkerOptions {
            workers,
            cost: a.cost,
            quantum: a.quantum_ns,
            rebalance_every: 0,
            yield_when_busy: a.yield_when_busy,
            slice: a.worker_slice,
            ..WorkerOptions::default()
        },
    );
    apply_slice(a.slice_us)?;
    if workers > 1 {
        pool.move_group(VICTIM, 0)?;
        pool.move_group(ATTACKER, 1)?;
        // No rebalancing (rebalance_every 0): the attacker stays off the victim's worker.
        if pool.worker_of(VICTIM) == pool.worker_of(ATTACKER) {
            bail!("the victim and the attacker ended up on one worker");
        }
    }
    Ok(pool)
}

/// Run the suite; prints the table and writes `isolation.json`, `isolation.md` (and with
/// `a.plot`, `isolation.png`) to `a.out`.
pub fn run(a: &IsolationArgs) -> anyhow::Result<serde_json::Value> {
    if !(a.victim_share > 0.0 && a.victim_share <= 1.0) {
        bail!(
            "--victim-share {}: give a share of the capacity in (0, 1]",
            a.victim_share
        );
    }
    let basic = a.p4_dir.join("tutorials/basic.p4");
    let victim_json = load_program(&basic)
        .map_err(|e| anyhow::anyhow!("{e} (give --scenarios p4/virt/scenarios)"))?;
    let want = victim_expected(&victim_json)?;
    let slack = front_timer_slack();
    // Injected panics are caught by the switch; keep the default hook from printing each.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = suite(a, &victim_json, &want);
    std::panic::set_hook(hook);
    let (rows, md) = result?;
    let report = json!({
        "what": "the isolation suite timed (tern virt bench --isolation): an open-loop victim \
                 beside a flat-out attacker",
        "packets_per_run": a.packets,
        "runs": a.runs,
        "batch": a.batch,
        "attack_frames_per_dispatch": a.attack_frames,
        "victim_share": a.victim_share,
        "victim_pps_fixed": a.victim_pps,
        "quantum_ns": a.quantum_ns,
        "charge": charge_name(a.cost),
        "yield_when_busy": a.yield_when_busy,
        "attacker_max_passes": A_PASSES,
        "attacker_max_parser_states": tern_virt::DEFAULT_PARSER_STATES,
        "front_timer_slack_ns": slack,
        "slice_us": (a.slice_us > 0).then_some(a.slice_us),
        "front_wakes_for": if a.front_wakes_all { "every worker" } else { "the victim's worker" },
        "rows": rows,
    });
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let jpath = a.out.join("isolation.json");
    std::fs::write(&jpath, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", jpath.display()))?;
    let mpath = a.out.join("isolation.md");
    std::fs::write(&mpath, &md).with_context(|| format!("writing {}", mpath.display()))?;
    print!("{md}");
    println!("wrote {} and {}", jpath.display(), mpath.display());
    if a.plot {
        plot(&a.out)?;
    }
    Ok(report)
}

/// The front's timer slack: the front sleeps until a worker hands outputs over or the next
/// victim packet is due (a timed wait), and Linux lets a timed wait end up to the thread's
/// timer slack late (50 µs by default) — the pacing's own lateness, counted in every victim
/// packet's latency ("front late"), alone and under attack alike. 1 ns for this thread
/// (`PR_SET_TIMERSLACK`), so the apparatus adds as little as it can; the workers' waits are
/// untimed (woken by the front), so their slack does not matter. Returns the slack in
/// force (ns; `None` where it cannot be read or set).
fn front_timer_slack() -> Option<u64> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: prctl with PR_SET_TIMERSLACK / PR_GET_TIMERSLACK takes integer arguments
        // only and changes the calling thread's timer slack; no memory is passed.
        let got = unsafe {
            libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
            libc::prctl(libc::PR_GET_TIMERSLACK, 0, 0, 0, 0)
        };
        u64::try_from(got).ok()
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// CPU time and run-queue wait (ns: time runnable but not running, waiting for a CPU) of the
/// front (this thread) and of each worker thread (`tern-virt-N`), from Linux's
/// `/proc/.../schedstat` (empty where it cannot be read). What tells the machine's share of
/// the victim's wait (too few CPUs for the busy threads) from tern's.
fn sched_times() -> Vec<(String, u64, u64)> {
    fn read(dir: &Path) -> Option<(u64, u64)> {
        let s = std::fs::read_to_string(dir.join("schedstat")).ok()?;
        let mut it = s.split_whitespace();
        Some((it.next()?.parse().ok()?, it.next()?.parse().ok()?))
    }
    let mut v = Vec::new();
    if let Some((run, wait)) = read(Path::new("/proc/thread-self")) {
        v.push(("front".to_string(), run, wait));
    }
    if let Ok(rd) = std::fs::read_dir("/proc/self/task") {
        for e in rd.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if let Some(n) = comm.trim().strip_prefix("tern-virt-") {
                if let Some((run, wait)) = read(&e.path()) {
                    v.push((format!("worker {n}"), run, wait));
                }
            }
        }
    }
    v.sort();
    v
}

/// Give the front (this thread) and every worker thread of the process (`tern-virt-N`) a
/// time slice of `us` µs (`--slice-us`; nothing for 0).
fn apply_slice(us: u64) -> anyhow::Result<()> {
    if us == 0 {
        return Ok(());
    }
    #[cfg(target_os = "linux")]
    {
        let ns = us * 1000;
        let refused = |e: std::io::Error| {
            anyhow::anyhow!(
                "--slice-us {us}: the kernel refused a custom time slice ({e}; Linux 6.12 or \
                 later schedules normal threads with custom slices)"
            )
        };
        tern_virt::sched::set_thread_slice(0, ns).map_err(refused)?;
        for e in std::fs::read_dir("/proc/self/task")?.flatten() {
            let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
            if comm.trim().starts_with("tern-virt-") {
                if let Some(tid) = e.file_name().to_str().and_then(|t| t.parse().ok()) {
                    tern_virt::sched::set_thread_slice(tid, ns).map_err(refused)?;
                }
            }
        }
        Ok(())
    }
    #[cfg(not(target_os = "linux"))]
    {
        bail!("--slice-us: custom time slices are a Linux feature")
    }
}

/// `after` − `before` per thread name: (name, CPU ns, run-queue wait ns).
fn sched_delta(
    before: &[(String, u64, u64)],
    after: &[(String, u64, u64)],
) -> Vec<(String, u64, u64)> {
    after
        .iter()
        .filter_map(|(n, r, w)| {
            let (_, r0, w0) = before.iter().find(|b| &b.0 == n)?;
            Some((n.clone(), r.saturating_sub(*r0), w.saturating_sub(*w0)))
        })
        .collect()
}

/// The `--charge` name of a cost.
fn charge_name(c: Cost) -> &'static str {
    match c {
        Cost::Work => "work",
        Cost::Nanos => "time",
        Cost::Bytes => "bytes",
    }
}

/// `scripts/virt/isolation-plot.sh DIR` (matplotlib in .venv-plot): DIR/isolation.png.
fn plot(dir: &Path) -> anyhow::Result<()> {
    let built =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/virt/isolation-plot.sh");
    let script = [PathBuf::from("scripts/virt/isolation-plot.sh"), built]
        .into_iter()
        .find(|p| p.is_file())
        .context("scripts/virt/isolation-plot.sh not found (run from a tern checkout)")?;
    let st = std::process::Command::new("bash")
        .arg(&script)
        .arg(dir)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !st.success() {
        bail!("{} failed ({st})", script.display());
    }
    Ok(())
}

fn suite(
    a: &IsolationArgs,
    victim_json: &str,
    want: &[u8],
) -> anyhow::Result<(Vec<serde_json::Value>, String)> {
    let mut rows = Vec::new();
    let mut md = format!(
        "# The isolation suite timed (`tern virt bench --isolation`)\n\n\
         Victim: `basic.p4` with one /32 route, **open loop**: it offers {:.0} % of its \
         capacity (measured alone, closed loop, on the same worker count), {} packets per run \
         paced by the clock in dispatches of at most {}, each timestamped when due; latency \
         from then to the front holding its output. Attacker: flat out, {} frames with every \
         dispatch (its queue stays full), quotas {} passes per packet and {} table entries. \
         Scheduler: DRR charged by {}, quantum {} µs{}. Median of {} runs. Target: \
         the victim's rate and p99 within 5 % of alone. **Alone**, for an attack's row: the \
         victim alone on the same pool (the attacker's device loaded and silent), as many \
         runs, half before the attack's and half after (its p99 in `alone p99 µs`); the \
         alone row's own runs, measured first, are the `suite alone` column's baseline. \
         Work columns: what the scheduler \
         charged (ms of priced work), the units it counted (pipeline passes; with \
         `--charge time` the ns measured) and the chunks the guard charged their measured \
         time.\n\n\
         | workers | attack | offered kpps | delivered kpps | delivered/offered | loss | \
         rate vs alone | p50 µs | p99 µs | p999 µs | alone p99 µs | p99 vs alone | p99 vs \
         suite alone | victim work ms | victim units | victim guarded | attacker work ms | \
         attacker units | attacker guarded | attacker frames out | attacker overflow | \
         attacker panics |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
        100.0 * a.victim_share,
        a.packets,
        a.batch,
        a.attack_frames,
        A_PASSES,
        A_ENTRIES,
        match a.cost {
            Cost::Work => "counted work (pipeline passes at each device's calibrated ns per pass)",
            Cost::Nanos => "measured time",
            Cost::Bytes => "frame bytes",
        },
        a.quantum_ns as f64 / 1e3,
        if a.yield_when_busy {
            ", busy workers yield"
        } else {
            ""
        },
        a.runs
    );
    let mut md_stages = String::from(
        "\n## Where the victim waits\n\n\
         Each victim packet's latency cut into stages that add up to it (stamped by the front \
         and, for the victim's packets only, by its worker: `tern_virt::StageTrace`): ",
    );
    for (i, t) in STAGE_TITLES.iter().enumerate() {
        md_stages.push_str(&format!(
            "**{}** {t}{}",
            i + 1,
            if i < 4 { "; " } else { "." }
        ));
    }
    md_stages.push_str(
        " Per stage p50 / p99 in µs, then the mean of each stage over the slowest 1 % of the \
         packets (what the p99 is made of), and the front's `dispatch` call itself (p50 / \
         p99, not a stage: the packets become visible to the worker during it). Median of the \
         runs. Empty: a victim packet was lost or overflowed (the stamps do not line up).\n\n\
         | workers | attack | 1 p50/p99 | 2 p50/p99 | 3 p50/p99 | 4 p50/p99 | 5 p50/p99 | \
         slowest 1 %: 1 / 2 / 3 / 4 / 5 | dispatch call p50/p99 |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let mut md_sched = String::from(
        "\n## Threads: CPU time and time waiting for a CPU\n\n\
         Over the timed runs of each row, per thread: ms on a CPU / ms runnable but waiting \
         for one (Linux schedstat). With 2 workers the victim is on worker 0 and the attacker \
         on worker 1; with 1, both on worker 0. Waiting for a CPU is the machine's share of \
         the victim's wait (more busy threads than CPUs), not the scheduler's. Then every \
         thread on the machine that is not tern's (`/proc/*/task/*/schedstat` before and after \
         the row's timed runs): ms on a CPU (times run) in all, of which DAMON's `kdamond` \
         (the VM's memory monitor: 2–4 ms runs that stall one of the victim's threads when \
         both CPUs are busy), and the busiest names.\n\n\
         | workers | attack | front | worker 0 | worker 1 | other threads ms (runs) | kdamond \
         ms (runs) | busiest others |\n|---|---|---|---|---|---|---|---|\n",
    );
    for &workers in &a.workers {
        let cap = {
            let mut pool = pool_for(victim_json, Attack::Alone, workers, a)?;
            capacity(&mut pool, a.packets / 10, want)?;
            let c = capacity(&mut pool, a.packets, want)?;
            let mut out = Vec::new();
            drop(pool.shutdown(&mut out));
            c
        };
        let rate = a.victim_pps.unwrap_or(a.victim_share * cap);
        println!(
            "{workers} worker(s): victim capacity {:.1} kpps, offering {:.1} kpps",
            cap / 1e3,
            rate / 1e3
        );
        let mut alone: Option<(f64, f64)> = None;
        for attack in ATTACKS {
            let mut pool = pool_for(victim_json, attack, workers, a)?;
            let mut batch_no = 0;
            // Warm-up (tables, buffers, rings), then the timed runs.
            let warm = IsolationArgs {
                packets: (a.packets / 10).max(a.batch),
                out: a.out.clone(),
                p4_dir: a.p4_dir.clone(),
                workers: Vec::new(),
                ..*a
            };
            run_open(&mut pool, &warm, attack, want, rate, &mut batch_no)?;
            // The victim alone on this very pool (the attacker's device loaded, silent), half
            // of the runs before the attack's and half after: the row's own baseline, taken
            // beside it in time, so that a drift of the machine over the suite (the wake-ups
            // behind an idle worker's p99 come and go) does not fall on one row.
            let (pre, post) = paired_alone_runs(attack, a.runs);
            let mut paired = Vec::new();
            alone_runs(&mut pool, a, want, rate, &mut batch_no, pre, &mut paired)?;
            // The work windows close on idle workers (the attacker's staged dispatches run
            // after the victim's last packet came out; a control call may pass them).
            pool.wait_idle();
            let mut rest = Vec::new();
            pool.take_outputs(&mut rest);
            let v0 = pool.fair_stats(VICTIM)?;
            let a0 = pool.fair_stats(ATTACKER)?;
            let mut runs = Vec::new();
            let mut a_out = 0;
            let sched0 = sched_times();
            let irq0 = interrupts();
            let others0 = tern_virt::sched::other_threads();
            for _ in 0..a.runs.max(1) {
                let r = run_open(&mut pool, a, attack, want, rate, &mut batch_no)?;
                a_out += r.attacker_out;
                runs.push(r);
            }
            let sched = sched_delta(&sched0, &sched_times());
            let irqs: serde_json::Map<String, serde_json::Value> = interrupts()
                .into_iter()
                .map(|(name, n)| {
                    let n0 = irq0.iter().find(|i| i.0 == name).map_or(0, |i| i.1);
                    (name, json!(n.saturating_sub(n0)))
                })
                .collect();
            let others = tern_virt::sched::others_ran(&others0, &tern_virt::sched::other_threads());
            let ms = |ns: u64| ns as f64 / 1e6;
            md_sched.push_str(&format!("| {workers} | {} |", attack.name()));
            for name in ["front", "worker 0", "worker 1"] {
                match sched.iter().find(|t| t.0 == name) {
                    Some((_, run, wait)) => {
                        md_sched.push_str(&format!(" {:.1} / {:.1} |", ms(*run), ms(*wait)))
                    }
                    None => md_sched.push_str(" |"),
                }
            }
            let top: Vec<String> = others
                .top
                .iter()
                .take(3)
                .map(|(n, ns, runs)| format!("{n} {:.1} ms ({runs})", ms(*ns)))
                .collect();
            md_sched.push_str(&format!(
                " {:.1} ({}) | {:.1} ({}) | {} |\n",
                ms(others.run_ns),
                others.runs,
                ms(others.kdamond_ns),
                others.kdamond_runs,
                top.join(", ")
            ));
            let others_json = json!({
                "cpu_ms": ms(others.run_ns),
                "runs": others.runs,
                "kdamond_cpu_ms": ms(others.kdamond_ns),
                "kdamond_runs": others.kdamond_runs,
                "busiest": others
                    .top
                    .iter()
                    .map(|(n, ns, runs)| json!({ "name": n, "cpu_ms": ms(*ns), "runs": runs }))
                    .collect::<Vec<_>>(),
            });
            let sched_json: serde_json::Map<String, serde_json::Value> = sched
                .iter()
                .map(|(n, run, wait)| {
                    (
                        n.clone(),
                        json!({ "cpu_ms": ms(*run), "runqueue_wait_ms": ms(*wait) }),
                    )
                })
                .collect();
            pool.wait_idle();
            rest.clear();
            pool.take_outputs(&mut rest);
            let v1 = pool.fair_stats(VICTIM)?;
            let a1 = pool.fair_stats(ATTACKER)?;
            a_out += rest.iter().filter(|o| o.port != V_OUT).count() as u64;
            let vstats = pool.device_stats(VICTIM)?;
            let astats = pool.device_stats(ATTACKER)?;
            alone_runs(&mut pool, a, want, rate, &mut batch_no, post, &mut paired)?;
            let med = |v: &[Run], f: fn(&Run) -> f64| median(v.iter().map(f).collect());
            let m = |f: fn(&Run) -> f64| med(&runs, f);
            let (offered, delivered) = (m(|r| r.offered_pps), m(|r| r.delivered_pps));
            let (p50, p99, p999) = (m(|r| r.p50_ns), m(|r| r.p99_ns), m(|r| r.p999_ns));
            let lost: u64 = runs.iter().map(|r| r.offered - r.delivered).sum();
            let total: u64 = runs.iter().map(|r| r.offered).sum();
            let (rate_s, p99_s) = *alone.get_or_insert((delivered, p99));
            // Against the row's own alone runs (the alone row: itself).
            let (rate0, p990) = if paired.is_empty() {
                (delivered, p99)
            } else {
                (
                    med(&paired, |r| r.delivered_pps),
                    med(&paired, |r| r.p99_ns),
                )
            };
            let rate_pct = 100.0 * (delivered / rate0 - 1.0);
            let p99_pct = 100.0 * (p99 / p990 - 1.0);
            let p99_suite_pct = 100.0 * (p99 / p99_s - 1.0);
            let (v_work, a_work) = (v1.work - v0.work, a1.work - a0.work);
            let bd: Vec<Breakdown> = runs.iter().filter_map(|r| r.stages).collect();
            let stages = (bd.len() == runs.len()).then(|| {
                let med = |f: &dyn Fn(&Breakdown) -> f64| median(bd.iter().map(f).collect());
                let mut b = Breakdown::default();
                for i in 0..5 {
                    b.p50[i] = med(&|x| x.p50[i]);
                    b.p99[i] = med(&|x| x.p99[i]);
                    b.tail[i] = med(&|x| x.tail[i]);
                }
                b.dispatch = (med(&|x| x.dispatch.0), med(&|x| x.dispatch.1));
                b
            });
            let us = |v: f64| format!("{:.1}", v / 1e3);
            md_stages.push_str(&format!("| {workers} | {} |", attack.name()));
            match &stages {
                Some(b) => {
                    for i in 0..5 {
                        md_stages.push_str(&format!(" {} / {} |", us(b.p50[i]), us(b.p99[i])));
                    }
                    let tail: Vec<String> = b.tail.iter().map(|&v| us(v)).collect();
                    md_stages.push_str(&format!(
                        " {} | {} / {} |\n",
                        tail.join(" / "),
                        us(b.dispatch.0),
                        us(b.dispatch.1)
                    ));
                }
                None => md_stages.push_str(" | | | | | | |\n"),
            }
            let stages_json = stages.map(|b| {
                let mut o = serde_json::Map::new();
                for (i, name) in STAGES.iter().enumerate() {
                    o.insert(
                        name.to_string(),
                        json!({
                            "p50_ns": b.p50[i],
                            "p99_ns": b.p99[i],
                            "slowest_1pct_mean_ns": b.tail[i],
                        }),
                    );
                }
                o.insert(
                    "dispatch_call".to_string(),
                    json!({ "p50_ns": b.dispatch.0, "p99_ns": b.dispatch.1 }),
                );
                serde_json::Value::Object(o)
            });
            if vstats.dropped + vstats.panics + vstats.quarantine_drops > 0 {
                bail!("{}: the victim lost packets: {vstats:?}", attack.name());
            }
            rows.push(json!({
                "workers": workers,
                "attack": attack.name(),
                "capacity_pps": cap,
                "target_pps": rate,
                "offered_pps": offered,
                "delivered_pps": delivered,
                "delivered_vs_offered": delivered / offered,
                "lost": lost,
                "loss_pct": 100.0 * lost as f64 / total as f64,
                "rate_vs_alone_pct": rate_pct,
                "p50_ns": p50,
                "p99_ns": p99,
                "p999_ns": p999,
                "p99_vs_alone_pct": p99_pct,
                // The row's baseline: the victim alone on the same pool, half of its runs
                // before the attack's and half after (`rate_vs_alone_pct`,
                // `p99_vs_alone_pct` compare with it), and the comparison with the suite's
                // alone row, measured once before every attack, as the suite did until the
                // 2026-11-27 session.
                "alone_paired": {
                    "runs": paired.len(),
                    "delivered_pps": rate0,
                    "p99_ns": p990,
                    "delivered_pps_runs": paired.iter().map(|r| r.delivered_pps).collect::<Vec<_>>(),
                    "p99_ns_runs": paired.iter().map(|r| r.p99_ns).collect::<Vec<_>>(),
                },
                "rate_vs_suite_alone_pct": 100.0 * (delivered / rate_s - 1.0),
                "p99_vs_suite_alone_pct": p99_suite_pct,
                "victim_work_ns": v_work,
                "attacker_work_ns": a_work,
                "charge": charge_name(a.cost),
                "victim_units": v1.units - v0.units,
                "attacker_units": a1.units - a0.units,
                "victim_guarded": v1.guarded - v0.guarded,
                "attacker_guarded": a1.guarded - a0.guarded,
                // Chunks and jobs in which it panicked, charged their measured time.
                "attacker_faulted": a1.faulted - a0.faulted,
                "victim_overflow": v1.overflow,
                "victim_packets_in": vstats.packets_in,
                "attacker_frames_out": a_out,
                "attacker_packets_in": astats.packets_in,
                "attacker_overflow": a1.overflow,
                "attacker_panics": astats.panics,
                // Copies the attacker's bounded buffer pool could not take (h-pool), and
                // frames the front dropped by port before classifying them.
                "attacker_buffer_drops": astats.buffer_drops,
                // Posts of control work refused at the attacker's bound of queued turns.
                "attacker_control_refused": astats.control_backlog_refused,
                "front_port_drops": pool.port_drops(),
                "victim_stages": stages_json,
                "threads": sched_json,
                // Every thread on the machine that is not tern's (kernel threads included:
                // DAMON's kdamond, kworkers), over the same timed runs: the VM's housekeeping
                // beside the victim's p99.
                "other_threads": others_json,
                // The machine's interrupts over the same timed runs, all CPUs (timer,
                // rescheduling and function-call IPIs, TLB shootdowns: what a worker's
                // `munmap` or a wake-up sends the other CPU).
                "interrupts": irqs,
                "p99_ns_runs": runs.iter().map(|r| r.p99_ns).collect::<Vec<_>>(),
                // The slice in force for each worker thread, as the kernel reports it (ns).
                "worker_slice_ns": pool
                    .thread_ids()
                    .iter()
                    .map(|&t| tern_virt::sched::thread_slice(t).ok())
                    .collect::<Vec<_>>(),
            }));
            md.push_str(&format!(
                "| {workers} | {} | {:.1} | {:.1} | {:.3} | {lost} | {:+.1} % | {:.1} | {:.1} | \
                 {:.1} | {:.1} | {:+.1} % | {:+.1} % | {:.1} | {} | {} | {:.1} | {} | {} | {a_out} \
                 | {} | {} |\n",
                attack.name(),
                offered / 1e3,
                delivered / 1e3,
                delivered / offered,
                rate_pct,
                p50 / 1e3,
                p99 / 1e3,
                p999 / 1e3,
                p990 / 1e3,
                p99_pct,
                p99_suite_pct,
                v_work as f64 / 1e6,
                v1.units - v0.units,
                v1.guarded - v0.guarded,
                a_work as f64 / 1e6,
                a1.units - a0.units,
                a1.guarded - a0.guarded,
                a1.overflow,
                astats.panics
            ));
            let mut out = Vec::new();
            drop(pool.shutdown(&mut out));
        }
    }
    md.push_str(&md_stages);
    md.push_str(&md_sched);
    Ok((rows, md))
}

/// The `p4` folder of the repository from the scenarios folder (`p4/virt/scenarios`).
pub fn p4_dir(scenarios: &Path) -> PathBuf {
    scenarios.join("../..")
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The slice in force for thread `tid` (ns), from `/proc/self/task/TID/sched`.
    fn slice_of(tid: libc::pid_t) -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/sched")).ok()?;
        let line = s.lines().find(|l| l.starts_with("se.slice"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    /// `--slice-us` reaches the front (the calling thread) and every `tern-virt-N` thread, as
    /// the kernel reports it; a kernel without custom slices gives a clear error instead.
    #[test]
    fn slice_us_reaches_the_front_and_the_workers() {
        let (tid_tx, tid_rx) = std::sync::mpsc::channel();
        let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
        let worker = std::thread::Builder::new()
            .name("tern-virt-99".into())
            .spawn(move || {
                // SAFETY: gettid takes no arguments and only returns the caller's id.
                tid_tx.send(unsafe { libc::gettid() }).unwrap();
                let _ = stop_rx.recv();
            })
            .unwrap();
        let tid = tid_rx.recv().unwrap();
        // SAFETY: as above.
        let me = unsafe { libc::gettid() };
        match apply_slice(300) {
            Ok(()) => {
                assert_eq!(slice_of(me), Some(300_000));
                assert_eq!(slice_of(tid), Some(300_000));
            }
            Err(e) => {
                assert!(e.to_string().contains("--slice-us 300"), "{e}");
                eprintln!("skipped: {e}");
            }
        }
        assert!(apply_slice(0).is_ok());
        stop_tx.send(()).unwrap();
        worker.join().unwrap();
    }

    /// Every row reports the other threads of the machine (not tern's) that ran during its
    /// timed runs, in the JSON and the Markdown (another process kept busy meanwhile, so that
    /// some did).
    #[test]
    fn each_row_reports_the_other_threads_that_ran() {
        let dir = tern_fixtures::scratch("virt-isolation-others");
        // Another process busy all along (a shell loop), killed even if the test fails.
        let busy = tern_fixtures::BusyProcess::spawn();
        let r = run(&IsolationArgs {
            out: dir.to_path_buf(),
            p4_dir: p4_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4/virt/scenarios")),
            packets: 2000,
            runs: 1,
            batch: 8,
            attack_frames: 4,
            workers: vec![1],
            victim_share: 0.2,
            victim_pps: None,
            quantum_ns: tern_virt::DEFAULT_QUANTUM_NS,
            cost: Cost::Work,
            yield_when_busy: false,
            front_wakes_all: false,
            slice_us: 0,
            worker_slice: tern_virt::ThreadSlice::Kernel,
            plot: false,
        });
        drop(busy);
        let j = r.unwrap();
        let rows = j["rows"].as_array().unwrap();
        assert_eq!(rows.len(), 9);
        for r in rows {
            let o = &r["other_threads"];
            assert!(o["cpu_ms"].as_f64().unwrap() > 0.0, "{r}");
            assert!(o["runs"].as_u64().unwrap() > 0, "{r}");
            assert!(o["kdamond_cpu_ms"].as_f64().unwrap() >= 0.0, "{r}");
            assert!(!o["busiest"].as_array().unwrap().is_empty(), "{r}");
        }
        let md = std::fs::read_to_string(dir.join("isolation.md")).unwrap();
        assert!(
            md.contains("| other threads ms (runs) | kdamond ms (runs) |"),
            "{md}"
        );
    }
}
