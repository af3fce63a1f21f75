//! `tern virt bench --isolation`: the isolation suite timed. A victim device (`basic.p4` with
//! one /32 route) forwards its packets while an attacker device on the same tern runs one of
//! the suite's attacks (recirculate loop, resubmit loop, parser loop, multicast storm, clone
//! storm, table exhaustion, injected panics, control-plane flood); the victim's packet rate and
//! its per-packet latency (median, p99) are measured alone and under each attack, over 1 and 2
//! worker threads (`VirtWorkers`; with 2 the victim and the attacker each have a worker).
//! Every victim packet is checked byte for byte against what the native program makes of it.
//!
//! The load is closed-loop: the front dispatches a batch of the victim's packets together with
//! the attacker's frames (and, for the control-plane attacks, queues the attacker's control
//! work on its worker without waiting), then waits until all of the victim's outputs are back.
//! A victim packet's latency is from its batch's dispatch to the moment the front holds its
//! output (the front sleeps until a worker hands outputs over: no spinning thread competes
//! with the workers); the rate is victim packets over the run's wall time. Timings from a shared or busy
//! machine mean nothing: the figures are for a quiet machine and a release build.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use serde_json::json;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, MirroringSession, OutputPacket, PacketPath, Runtime};
use tern_virt::config::load_program;
use tern_virt::{
    Caller, DeviceId, DeviceSpec, Quotas, Rule, Target, VirtSwitch, VirtWorkers, WorkerOptions,
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
    /// Victim packets per batch.
    pub batch: usize,
    /// Attacker frames sent with each victim batch.
    pub attack_frames: usize,
    pub workers: Vec<usize>,
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

/// The victim's packet `seq`: IPv4 10.0.1.1 → 10.0.2.2, the sequence number in the payload.
fn victim_packet(seq: u16) -> Vec<u8> {
    let mut p = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
    p.extend_from_slice(&[
        0x45, 0, 0, 0x24, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
    ]);
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&[0x5a; 14]);
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
/// bytes 34..36 is the only difference between packets).
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

/// The attacker's control work queued with one batch (not waited for).
fn control_work(pool: &VirtWorkers, attack: Attack, batch_no: u64) -> anyhow::Result<()> {
    match attack {
        Attack::Panic => pool.post(ATTACKER, |vs| {
            let _ = vs.release(ATTACKER);
            let _ = vs.inject_panic(ATTACKER, 1);
        })?,
        Attack::TableExhaustion => pool.post(ATTACKER, move |vs| {
            // Add entries until the quota refuses them, then keep trying.
            if let Ok(mut rt) = vs.runtime(Caller::Tenant("mallory"), ATTACKER) {
                for i in 0..64 {
                    let _ = rt.mt_add_entry(
                        "I.t",
                        &key(batch_no * 64 + i),
                        "I.fwd",
                        &[vec![0, 3]],
                        None,
                    );
                }
            }
        })?,
        Attack::ControlFlood => pool.post(ATTACKER, move |vs| {
            // A burst of adds and deletes (within the quota), as a controller hammering writes.
            if let Ok(mut rt) = vs.runtime(Caller::Tenant("mallory"), ATTACKER) {
                for i in 0..32 {
                    if let Ok(h) = rt.mt_add_entry(
                        "I.t",
                        &key(batch_no * 32 + i),
                        "I.fwd",
                        &[vec![0, 3]],
                        None,
                    ) {
                        let _ = rt.mt_delete_entry("I.t", h);
                    }
                }
            }
        })?,
        _ => {}
    }
    Ok(())
}

/// One timed run's figures.
struct Run {
    rate_pps: f64,
    p50_ns: f64,
    p99_ns: f64,
    attacker_out: u64,
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Send `packets` victim packets (and the attack) through `pool`; every victim output is
/// checked against `want`.
fn run_once(
    pool: &mut VirtWorkers,
    a: &IsolationArgs,
    attack: Attack,
    want: &[u8],
    batch_no: &mut u64,
) -> anyhow::Result<Run> {
    let b = a.batch.max(1);
    let attackers: Vec<Vec<u8>> = if attack == Attack::Alone {
        Vec::new()
    } else {
        (0..a.attack_frames).map(attacker_frame).collect()
    };
    let victims: Vec<Vec<u8>> = (0..b).map(|i| victim_packet(i as u16)).collect();
    let mut pkts: Vec<(u32, &[u8])> = Vec::with_capacity(b + attackers.len());
    // The attacker's frames first: the victim's wait behind them where anything can.
    pkts.extend(attackers.iter().map(|f| (A_IN, f.as_slice())));
    pkts.extend(victims.iter().map(|f| (V_IN, f.as_slice())));
    let batches = a.packets.div_ceil(b);
    let mut lat: Vec<f64> = Vec::with_capacity(batches * b);
    let mut out: Vec<OutputPacket> = Vec::with_capacity(4 * (b + attackers.len()));
    let mut attacker_out = 0u64;
    let mut expect = want.to_vec();
    let t = Instant::now();
    for _ in 0..batches {
        *batch_no += 1;
        control_work(pool, attack, *batch_no)?;
        let sent = Instant::now();
        pool.dispatch(&pkts);
        let mut got = 0;
        while got < b {
            pool.take_outputs(&mut out);
            if out.is_empty() {
                // Sleep until a worker hands outputs over (no spinning on the shared cores).
                if !pool.wait_outputs(std::time::Duration::from_secs(10)) {
                    bail!("{}: the victim's packets did not come back", attack.name());
                }
                continue;
            }
            let now = sent.elapsed().as_nanos() as f64;
            for o in &out {
                if o.port == V_OUT {
                    let seq = u16::from_be_bytes([o.data[34], o.data[35]]);
                    expect[34..36].copy_from_slice(&seq.to_be_bytes());
                    if o.data[..] != expect[..] || usize::from(seq) != got {
                        bail!(
                            "{}: victim packet {got} came out wrong or out of order",
                            attack.name()
                        );
                    }
                    got += 1;
                    lat.push(now);
                } else {
                    attacker_out += 1;
                }
            }
            pool.recycle_outputs(&mut out);
        }
    }
    let secs = t.elapsed().as_secs_f64();
    let n = lat.len();
    Ok(Run {
        rate_pps: n as f64 / secs,
        p50_ns: percentile(&mut lat, 0.5),
        p99_ns: percentile(&mut lat, 0.99),
        attacker_out,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Run the suite; prints the table and writes `isolation.json` and `isolation.md` to `a.out`.
pub fn run(a: &IsolationArgs) -> anyhow::Result<serde_json::Value> {
    let basic = a.p4_dir.join("tutorials/basic.p4");
    let victim_json = load_program(&basic)
        .map_err(|e| anyhow::anyhow!("{e} (give --scenarios p4/virt/scenarios)"))?;
    let want = victim_expected(&victim_json)?;
    // Injected panics are caught by the switch; keep the default hook from printing each.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = suite(a, &victim_json, &want);
    std::panic::set_hook(hook);
    let (rows, md) = result?;
    let report = json!({
        "what": "the isolation suite timed (tern virt bench --isolation)",
        "packets_per_run": a.packets,
        "runs": a.runs,
        "batch": a.batch,
        "attack_frames_per_batch": a.attack_frames,
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
    Ok(report)
}

fn suite(
    a: &IsolationArgs,
    victim_json: &str,
    want: &[u8],
) -> anyhow::Result<(Vec<serde_json::Value>, String)> {
    let mut rows = Vec::new();
    let mut md = format!(
        "# The isolation suite timed (`tern virt bench --isolation`)\n\n\
         Victim: `basic.p4` with one /32 route, {} packets per run in batches of {}, each batch \
         dispatched with {} attacker frames; median of {} runs. Attacker quotas: {} passes per \
         packet, {} table entries. Latency: from a batch's dispatch to the front holding the \
         victim's output. Target: the victim's rate and p99 within 5 % of alone.\n\n\
         | workers | attack | victim kpps | vs alone | p50 µs | p99 µs | p99 vs alone | \
         attacker frames out | attacker overflow | attacker panics |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        a.packets, a.batch, a.attack_frames, a.runs, A_PASSES, A_ENTRIES
    );
    for &workers in &a.workers {
        let mut alone: Option<(f64, f64)> = None;
        for attack in ATTACKS {
            let vs = build(victim_json, attack)?;
            let mut pool = VirtWorkers::new(
                vs,
                WorkerOptions {
                    workers,
                    rebalance_every: 0,
                    ..WorkerOptions::default()
                },
            );
            if workers > 1 {
                pool.move_group(VICTIM, 0)?;
                pool.move_group(ATTACKER, 1)?;
            }
            let mut batch_no = 0;
            // Warm-up (tables, buffers, rings), then the timed runs.
            let warm = IsolationArgs {
                packets: (a.packets / 10).max(a.batch),
                out: a.out.clone(),
                p4_dir: a.p4_dir.clone(),
                workers: Vec::new(),
                ..*a
            };
            run_once(&mut pool, &warm, attack, want, &mut batch_no)?;
            let (mut rates, mut p50s, mut p99s, mut a_out) = (vec![], vec![], vec![], 0);
            for _ in 0..a.runs.max(1) {
                let r = run_once(&mut pool, a, attack, want, &mut batch_no)?;
                rates.push(r.rate_pps);
                p50s.push(r.p50_ns);
                p99s.push(r.p99_ns);
                a_out += r.attacker_out;
            }
            pool.wait_idle();
            let mut rest = Vec::new();
            pool.take_outputs(&mut rest);
            a_out += rest.iter().filter(|o| o.port != V_OUT).count() as u64;
            let vstats = pool.device_stats(VICTIM)?;
            let astats = pool.device_stats(ATTACKER)?;
            let afair = pool.fair_stats(ATTACKER)?;
            let (rate, p50, p99) = (median(rates), median(p50s), median(p99s));
            let (rate0, p990) = *alone.get_or_insert((rate, p99));
            let rate_pct = 100.0 * (rate / rate0 - 1.0);
            let p99_pct = 100.0 * (p99 / p990 - 1.0);
            if vstats.dropped + vstats.panics + vstats.quarantine_drops > 0 {
                bail!("{}: the victim lost packets: {vstats:?}", attack.name());
            }
            rows.push(json!({
                "workers": workers,
                "attack": attack.name(),
                "victim_pps_median": rate,
                "victim_p50_ns": p50,
                "victim_p99_ns": p99,
                "rate_vs_alone_pct": rate_pct,
                "p99_vs_alone_pct": p99_pct,
                "victim_packets_in": vstats.packets_in,
                "attacker_frames_out": a_out,
                "attacker_packets_in": astats.packets_in,
                "attacker_overflow": afair.overflow,
                "attacker_panics": astats.panics,
            }));
            md.push_str(&format!(
                "| {workers} | {} | {:.1} | {:+.1} % | {:.1} | {:.1} | {:+.1} % | {a_out} | {} | {} |\n",
                attack.name(),
                rate / 1e3,
                rate_pct,
                p50 / 1e3,
                p99 / 1e3,
                p99_pct,
                afair.overflow,
                astats.panics
            ));
            let mut out = Vec::new();
            drop(pool.shutdown(&mut out));
        }
    }
    Ok((rows, md))
}

/// The `p4` folder of the repository from the scenarios folder (`p4/virt/scenarios`).
pub fn p4_dir(scenarios: &Path) -> PathBuf {
    scenarios.join("../..")
}
