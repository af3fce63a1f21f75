//! `tern bcache experiment ID`: the B-Cache experiments of ../shared/reference/bcache.md §6.H,
//! one command each, on the paper's cases (`p4/bcache/`, contents and traffic from
//! [`crate::bcache_cases`]). Each writes `eN.json`, `eN.md` (the paper's figure beside ours)
//! and `eN.png` (scripts/bcache-plot.sh) into `--out`. Timed experiments (E1, E2, E5, E7's
//! throughput, E9) give min / median / max over `--runs` runs and are meant for a release
//! build on a quiet machine; counted ones (E3, E6, E7's mismatches) do not depend on timing.
//! `--quick` shrinks every experiment to a smoke run (for the suite: well-formed outputs).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context as _};
use serde_json::{json, Value};
use tern_dataplane::bcache::{Admission, Config, Eviction};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};

use crate::bcache_cases as cases;

#[derive(clap::Args, Debug, Clone)]
pub struct ExperimentArgs {
    /// e1 (pipeline length), e2 (cases × no cache / miss / hit), e3 (key and effect bits),
    /// e4 (insert latency vs insert rate), e5 (invalidation latency), e6 (hit ratio vs cache size and skew), e7 (update storm),
    /// e8 (stateful programs: value-keyed vs symbolic), e9 (adversarial traffic), e10
    /// (per-worker caches), or all.
    #[arg(value_name = "ID")]
    pub id: String,
    /// Output folder (created).
    #[arg(long, default_value = "bench/bcache")]
    pub out: PathBuf,
    /// A smoke run: tiny sizes, one run (checks the outputs, measures nothing).
    #[arg(long)]
    pub quick: bool,
    /// Timed runs per point (min / median / max reported).
    #[arg(long, default_value_t = 3)]
    pub runs: u32,
    /// Skip the PNG plots.
    #[arg(long)]
    pub no_plot: bool,
    /// Count-based results only (E3, E6, E7 without its throughput), for a busy machine or a
    /// debug build; the timed experiments are refused.
    #[arg(long)]
    pub counts_only: bool,
    /// Packets per point (E6) or per run (E7) instead of the defaults (150,000 and 2,000,000).
    #[arg(long, value_name = "N")]
    pub packets: Option<u64>,
}

const ALL: [&str; 10] = ["e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8", "e9", "e10"];

pub fn run(a: ExperimentArgs) -> anyhow::Result<ExitCode> {
    let ids: Vec<&str> = if a.id == "all" {
        ALL.to_vec()
    } else if ALL.contains(&a.id.as_str()) {
        vec![a.id.as_str()]
    } else {
        bail!(
            "experiment '{}': give one of {} or all",
            a.id,
            ALL.join(", ")
        );
    };
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    if a.counts_only {
        if let Some(t) = ids.iter().find(|i| ["e1", "e2", "e5", "e9"].contains(i)) {
            bail!("{t} is timed: run it without --counts-only (release build, quiet machine)");
        }
    }
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    for id in ids {
        let t = Instant::now();
        eprintln!("experiment {id} ...");
        let (v, md) = match id {
            "e1" => e1(&a)?,
            "e2" => e2(&a)?,
            "e3" => e3(&a)?,
            "e4" => e4(&a)?,
            "e5" => e5(&a)?,
            "e6" => e6(&a)?,
            "e7" => e7(&a)?,
            "e8" => e8(&a)?,
            "e10" => e10(&a)?,
            _ => e9(&a)?,
        };
        let v = with_meta(v, id, &a);
        let json_path = a.out.join(format!("{id}.json"));
        std::fs::write(&json_path, serde_json::to_string_pretty(&v)?)
            .with_context(|| format!("writing {}", json_path.display()))?;
        let md_path = a.out.join(format!("{id}.md"));
        std::fs::write(&md_path, md).with_context(|| format!("writing {}", md_path.display()))?;
        if !a.no_plot {
            plot(&json_path, &a.out.join(format!("{id}.png")))?;
        }
        println!(
            "{id}: {} and {} written ({:.1} s)",
            json_path.display(),
            md_path.display(),
            t.elapsed().as_secs_f64()
        );
    }
    Ok(ExitCode::SUCCESS)
}

fn with_meta(mut v: Value, id: &str, a: &ExperimentArgs) -> Value {
    v["experiment"] = json!(id);
    v["quick"] = json!(a.quick);
    v["runs"] = json!(if a.quick { 1 } else { a.runs });
    v["build"] = json!(if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    });
    v["command"] = json!(format!(
        "tern bcache experiment {id} --out {}{}{}{}",
        a.out.display(),
        if a.quick { " --quick" } else { "" },
        if a.counts_only { " --counts-only" } else { "" },
        a.packets
            .map_or(String::new(), |n| format!(" --packets {n}"))
    ));
    v
}

/// The plot script (scripts/bcache-plot.sh, here or in the checkout this binary came from).
fn plot(json: &Path, png: &Path) -> anyhow::Result<()> {
    let built = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bcache-plot.sh");
    let script = [PathBuf::from("scripts/bcache-plot.sh"), built]
        .into_iter()
        .find(|p| p.is_file())
        .context("scripts/bcache-plot.sh not found (run from a tern checkout, or --no-plot)")?;
    let st = std::process::Command::new("bash")
        .arg(&script)
        .arg("-o")
        .arg(png)
        .arg(json)
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !st.success() {
        bail!("{} failed ({st})", script.display());
    }
    Ok(())
}

/// min / median / max of `v`.
fn stats(v: &[f64]) -> Value {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    json!({"min": s[0], "median": s[s.len() / 2], "max": s[s.len() - 1], "all": v})
}

fn median(v: &Value) -> f64 {
    v["median"].as_f64().unwrap_or(f64::NAN)
}

fn runs(a: &ExperimentArgs) -> u32 {
    if a.quick {
        1
    } else {
        a.runs
    }
}

/// The cache modes compared: none, every packet a miss (never admitted), every packet a hit.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Off,
    Miss,
    Hit,
}

impl Mode {
    const ALL: [Mode; 3] = [Mode::Off, Mode::Miss, Mode::Hit];
    fn name(self) -> &'static str {
        match self {
            Mode::Off => "no cache",
            Mode::Miss => "miss",
            Mode::Hit => "hit",
        }
    }
    fn config(self, capacity: usize) -> Option<Config> {
        match self {
            Mode::Off => None,
            Mode::Miss => Some(Config {
                capacity,
                // Never admitted: every packet pays lookup, recording and the detector.
                admission: Admission::CountMin {
                    threshold: u16::MAX - 1,
                },
                ..Config::default()
            }),
            Mode::Hit => Some(Config {
                capacity,
                ..Config::default()
            }),
        }
    }
}

fn opts(cfg: Option<Config>) -> SwitchOptions {
    SwitchOptions {
        bcache: cfg,
        ..SwitchOptions::default()
    }
}

/// A case's switch without table contents.
fn case_switch_empty(case: u32, cfg: Option<Config>) -> anyhow::Result<Switch> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../p4/bcache/case{case}.p4"));
    let local = PathBuf::from(format!("p4/bcache/case{case}.p4"));
    let p = if local.is_file() { local } else { p };
    let json = crate::cmd_bcache::load_json(&p)?;
    Switch::from_json(&json, opts(cfg)).with_context(|| p.display().to_string())
}

/// A case's switch with its table contents applied.
pub(crate) fn case_switch(case: u32, cfg: Option<Config>) -> anyhow::Result<Switch> {
    let mut sw = case_switch_empty(case, cfg)?;
    apply_case(&mut sw, case)?;
    Ok(sw)
}

/// Apply case `case`'s table contents to `sw` (runtime API; the same operations as
/// `p4/bcache/caseN.txt`).
pub(crate) fn apply_case(sw: &mut Switch, case: u32) -> anyhow::Result<()> {
    cases::install(sw, case).map_err(|e| anyhow::anyhow!("case{case} contents: {e}"))?;
    Ok(())
}

/// ns per packet over `packets` packets of `seq` (batches of 32), outputs recycled.
fn time_ns(sw: &mut Switch, frames: &[(u32, Vec<u8>)], seq: &[u32], packets: u64) -> f64 {
    let mut out: Vec<OutputPacket> = Vec::with_capacity(64);
    let mut batch: Vec<(u32, &[u8])> = Vec::with_capacity(32);
    let mut done = 0u64;
    let mut i = 0usize;
    let t = Instant::now();
    while done < packets {
        batch.clear();
        for _ in 0..32 {
            let (p, f) = &frames[seq[i] as usize];
            batch.push((*p, f.as_slice()));
            i = (i + 1) % seq.len();
        }
        sw.process_batch(&batch, &mut out);
        sw.recycle_outputs(&mut out);
        sw.discard_digests();
        done += 32;
    }
    t.elapsed().as_nanos() as f64 / done as f64
}

/// Every frame once (warms the cache in hit mode).
fn warm(sw: &mut Switch, frames: &[(u32, Vec<u8>)]) {
    let mut out = Vec::new();
    for (p, f) in frames {
        sw.process_packet(*p, f, &mut out);
        sw.recycle_outputs(&mut out);
        sw.discard_digests();
    }
}

fn hit_ratio(sw: &Switch) -> f64 {
    sw.bcache_stats()
        .map_or(0.0, |s| s.hits as f64 / s.lookups.max(1) as f64)
}

// ---------------------------------------------------------------------------------------
// E1: pipeline length

/// A program of `n` exact tables on the IPv4 destination, each writing its own metadata
/// field; the last one also forwards.
fn pipeline_program(n: usize) -> String {
    let mut s = String::from(
        "#include <core.p4>\n#include <v1model.p4>\n\
         header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }\n\
         header ipv4_t { bit<4> version; bit<4> ihl; bit<8> diffserv; bit<16> totalLen;\n\
         bit<16> identification; bit<3> flags; bit<13> fragOffset; bit<8> ttl; bit<8> protocol;\n\
         bit<16> hdrChecksum; bit<32> srcAddr; bit<32> dstAddr; }\n\
         struct headers { ethernet_t ethernet; ipv4_t ipv4; }\nstruct metadata {\n",
    );
    for i in 0..n {
        s += &format!("    bit<32> m{i};\n");
    }
    s += "}\n\
        parser P(packet_in pk, out headers h, inout metadata m, inout standard_metadata_t sm) {\n\
        state start { pk.extract(h.ethernet); transition select(h.ethernet.etherType) {\n\
        0x0800: ip; default: accept; } }\n\
        state ip { pk.extract(h.ipv4); transition accept; } }\n\
        control V(inout headers h, inout metadata m) { apply { } }\n\
        control I(inout headers h, inout metadata m, inout standard_metadata_t sm) {\n";
    for i in 0..n {
        if i + 1 == n {
            s += &format!(
                "    action a{i}(bit<32> v, bit<9> port) {{ m.m{i} = v; sm.egress_spec = port; }}\n"
            );
        } else {
            s += &format!("    action a{i}(bit<32> v) {{ m.m{i} = v; }}\n");
        }
        s += &format!(
            "    table t{i} {{ key = {{ h.ipv4.dstAddr: exact; }} actions = {{ a{i}; NoAction; }} \
             default_action = NoAction(); size = 65536; }}\n"
        );
    }
    s += "    apply {\n        if (h.ipv4.isValid()) {\n";
    for i in 0..n {
        s += &format!("            t{i}.apply();\n");
    }
    s += "        }\n    }\n}\n\
        control E(inout headers h, inout metadata m, inout standard_metadata_t sm) { apply { } }\n\
        control C(inout headers h, inout metadata m) { apply { } }\n\
        control D(packet_out pk, in headers h) { apply { pk.emit(h.ethernet); pk.emit(h.ipv4); } }\n\
        V1Switch(P(), V(), I(), E(), C(), D()) main;\n";
    s
}

fn e1(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let lengths: Vec<usize> = if a.quick {
        vec![1, 4]
    } else {
        vec![1, 2, 4, 8, 12, 16, 20, 25, 30]
    };
    let (flows, packets) = if a.quick {
        (64, 2_000)
    } else {
        (1024, 1_000_000)
    };
    let frames: Vec<(u32, Vec<u8>)> = (0..flows)
        .map(|k| {
            let mut f = cases::flow(k);
            f.dst_ip = (10 << 24) | k;
            f.proto = 17;
            (0, cases::frame(&f, 64))
        })
        .collect();
    let seq: Vec<u32> = (0..flows).collect();
    let mut rows = Vec::new();
    let mut md = String::from(
        "# E1: throughput vs pipeline length (exact tables)\n\n\
         Paper: the Whippersnapper motivation (BMv2 throughput falls with every table added; no \
         numbers in the text). Ours: ns/packet, median of the runs.\n\n\
         | tables | no cache ns | miss ns | hit ns | hit / no cache speed-up |\n|---|---|---|---|---|\n",
    );
    for &n in &lengths {
        let src = pipeline_program(n);
        let c = tern_p4::compile_str(&src, &format!("pipeline{n}.p4"), &Default::default())
            .map_err(|d| anyhow::anyhow!("pipeline of {n} tables: {d}"))?;
        let mut row = json!({"tables": n});
        for mode in Mode::ALL {
            let mut sw = Switch::from_json(&c.json, opts(mode.config(65_536)))?;
            for t in 0..n {
                for k in 0..flows {
                    let mut data = vec![vec![0, 0, (k >> 8) as u8, k as u8]];
                    if t + 1 == n {
                        data.push(vec![0, (1 + k % 4) as u8]);
                    }
                    sw.mt_add_entry(
                        &format!("I.t{t}"),
                        &[MatchParam::Exact(
                            ((10u32 << 24) | k).to_be_bytes().to_vec(),
                        )],
                        &format!("I.a{t}"),
                        &data,
                        None,
                    )
                    .map_err(|e| anyhow::anyhow!("pipeline{n} t{t}: {e}"))?;
                }
            }
            warm(&mut sw, &frames);
            let v: Vec<f64> = (0..runs(a))
                .map(|_| time_ns(&mut sw, &frames, &seq, packets))
                .collect();
            row[mode.name()] = stats(&v);
            if mode != Mode::Off {
                row[format!("{} hit ratio", mode.name())] = json!(hit_ratio(&sw));
            }
        }
        let (off, miss, hit) = (
            median(&row["no cache"]),
            median(&row["miss"]),
            median(&row["hit"]),
        );
        md += &format!(
            "| {n} | {off:.0} | {miss:.0} | {hit:.0} | {:.2}x |\n",
            off / hit
        );
        rows.push(row);
    }
    Ok((
        json!({"kind": "e1", "flows": flows, "packets_per_run": packets, "rows": rows}),
        md,
    ))
}

// ---------------------------------------------------------------------------------------
// E2: the cases × {no cache, miss, hit}

fn case_frames(flows: u32) -> Vec<(u32, Vec<u8>)> {
    (0..flows)
        .map(|k| {
            let f = cases::flow(k);
            (f.port, cases::frame(&f, 64))
        })
        .collect()
}

fn e2(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let (flows, packets) = if a.quick {
        (256, 2_000)
    } else {
        (4096, 1_000_000)
    };
    let frames = case_frames(flows);
    let seq: Vec<u32> = (0..flows).collect();
    let mut rows = Vec::new();
    let mut md = String::from(
        "# E2: the paper's cases, no cache / every packet a miss / every packet a hit\n\n\
         Paper (Fig. 9, BMv2, case #4 only in the text): hit vs no cache > +200 % throughput, \
         −49 % delay; miss penalty ≤ 3.1 %. Ours: in memory, one core, 64-byte frames, \
         ns/packet (median of the runs).\n\n\
         | case | no cache ns | miss ns | hit ns | hit speed-up | miss penalty | paper |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for case in 1..=4 {
        let mut row = json!({"case": case});
        for mode in Mode::ALL {
            let mut sw = case_switch(case, mode.config(65_536))?;
            warm(&mut sw, &frames);
            let v: Vec<f64> = (0..runs(a))
                .map(|_| time_ns(&mut sw, &frames, &seq, packets))
                .collect();
            row[mode.name()] = stats(&v);
            if mode != Mode::Off {
                row[format!("{} hit ratio", mode.name())] = json!(hit_ratio(&sw));
            }
        }
        let (off, miss, hit) = (
            median(&row["no cache"]),
            median(&row["miss"]),
            median(&row["hit"]),
        );
        md += &format!(
            "| #{case} | {off:.0} | {miss:.0} | {hit:.0} | {:.2}x | {:+.1} % | {} |\n",
            off / hit,
            100.0 * (miss - off) / off,
            if case == 4 {
                "> 3x, ≤ 3.1 %"
            } else {
                "(bars lost)"
            }
        );
        rows.push(row);
    }
    Ok((
        json!({"kind": "e2", "flows": flows, "packets_per_run": packets, "rows": rows}),
        md,
    ))
}

// ---------------------------------------------------------------------------------------
// E3: key and effect bits per case

fn e3(_a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    use tern_dataplane::bcache::analysis;
    let mut rows = Vec::new();
    let mut md = String::from(
        "# E3: what decides each case's behaviour (the cache key) and what a hit replays\n\n\
         Paper (Figs. 4, 5): key 157 bits (#1), 884 → 287 bits (#2–#4) after pruning; one \
         compound action per combination of actions (2^k; 4 actions / 52 primitives in #4). \
         Ours: per ingress pipeline, from `tern bcache explain`; one effect list per entry.\n\n\
         | case | tables | control-read bits | data-read bits | key bits | validity headers | \
         written bits | effects | uncacheable | packed key B | effect bytes | paper key bits |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for case in 1..=4 {
        let sw = case_switch_empty(case, Mode::Hit.config(1024))?;
        let p = sw.program();
        let an = analysis::analyse_all(p)
            .into_iter()
            .find(|x| x.name == "ingress")
            .context("no ingress pipeline")?;
        let bits = |s: &std::collections::BTreeSet<tern_model::FieldRef>| -> u32 {
            s.iter().map(|f| p.field_width(*f)).sum()
        };
        let key = an.key_fields(p);
        let plan = sw.bcache_plan().context("the cache is on")?;
        let tables: usize = p
            .pipelines
            .iter()
            .filter(|pl| pl.name == "ingress")
            .map(|pl| pl.tables.len())
            .sum();
        let row = json!({
            "case": case,
            "tables": tables,
            "control_read_bits": bits(&an.control_reads),
            "data_read_bits": bits(&an.data_reads),
            "key_bits": bits(&key),
            "validity_headers": an.validity_reads.len(),
            "written_bits": bits(&an.writes),
            "effects": an.effects.iter().map(|(w, at)| format!("{w} ({at})")).collect::<Vec<_>>(),
            "uncacheable": an.uncacheable.len(),
            "packed_key_bytes": plan.key_bytes,
            "effect_bytes": plan.write_bytes,
            "paper_key_bits": if case == 1 { 157 } else { 287 },
        });
        md += &format!(
            "| #{case} | {tables} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            row["control_read_bits"],
            row["data_read_bits"],
            row["key_bits"],
            row["validity_headers"],
            row["written_bits"],
            an.effects.len(),
            row["uncacheable"],
            row["packed_key_bytes"],
            row["effect_bytes"],
            row["paper_key_bits"]
        );
        rows.push(row);
    }
    md += "\nKey bits: every field the pipeline reads (control and data reads: the paper keyed \
           control reads only, unsound for action data reads, reference §2.4) or writes (a \
           field written on one path keeps its input value on another); packed key bytes add \
           the validity bits. Effect bytes: the written ranges a hit copies.\n";
    Ok((json!({"kind": "e3", "rows": rows}), md))
}

// ---------------------------------------------------------------------------------------
// E5: invalidation latency vs impacted entries

fn lpm(v: u32, len: u32) -> MatchParam {
    MatchParam::Lpm {
        key: v.to_be_bytes().to_vec(),
        prefix_len: len,
    }
}

fn router_frame(dst: u32) -> Vec<u8> {
    let f = cases::Flow {
        kind: cases::Kind::Server,
        port: 0,
        dst_mac: 0x0200_0000_0009,
        src_mac: 0x0200_0000_0001,
        src_ip: 0xac10_0001,
        dst_ip: dst,
        proto: 17,
        sport: 1000,
        dport: 2000,
    };
    cases::frame(&f, 64)
}

fn e5(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let installed: Vec<u32> = if a.quick {
        vec![2_000]
    } else {
        vec![10_000, 1_000_000]
    };
    let impacted_all: Vec<u32> = if a.quick {
        vec![1, 10, 100, 1000]
    } else {
        vec![1, 10, 100, 1000, 3000, 10_000]
    };
    let json_prog = crate::cmd_bcache::load_json(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4/bench/l3_router.p4"),
    )?;
    let mut rows = Vec::new();
    let mut md = String::from(
        "# E5: invalidation latency vs impacted cache entries\n\n\
         Paper (Fig. 10b, case #1, 10K entries): linear in impacted entries, < 0.2 s at 10K. \
         Ours: the L3 router (p4/bench/l3_router.p4) with T behaviours cached; one route change \
         (a modify of the route the impacted flows hit) invalidates exactly the impacted ones; \
         the time of the table call (engine invalidation included), one switch, median of the \
         runs.\n\n| installed | impacted | invalidated | latency µs (min / median / max) |\n\
         |---|---|---|---|\n",
    );
    for &total in &installed {
        let cfg = Config {
            capacity: (total as usize * 2).next_power_of_two(),
            ..Config::default()
        };
        let mut sw = Switch::from_json(&json_prog, opts(Some(cfg)))?;
        let a_route = sw
            .mt_add_entry(
                "RIngress.ipv4_lpm",
                &[lpm(11 << 24, 8)],
                "RIngress.set_nhop",
                &[vec![2, 0, 0, 0, 0, 2], vec![0, 2]],
                None,
            )
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        sw.mt_add_entry(
            "RIngress.ipv4_lpm",
            &[lpm(10 << 24, 8)],
            "RIngress.set_nhop",
            &[vec![2, 0, 0, 0, 0, 1], vec![0, 1]],
            None,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let max_imp = *impacted_all
            .iter()
            .filter(|&&k| k <= total)
            .max()
            .unwrap_or(&1);
        // The others (never impacted) fill the cache up to `total`.
        let mut out = Vec::new();
        let mut frame = router_frame(0);
        for i in 0..total - max_imp {
            frame[30..34].copy_from_slice(&((10 << 24) | i).to_be_bytes());
            sw.process_packet(0, &frame, &mut out);
            out.clear();
        }
        for &k in impacted_all.iter().filter(|&&k| k <= total) {
            let mut lat = Vec::new();
            let mut inval = Vec::new();
            for r in 0..runs(a) {
                // Exactly k behaviours through 11/8 (the rest of max_imp are not cached).
                for i in 0..k {
                    frame[30..34].copy_from_slice(&((11 << 24) | i).to_be_bytes());
                    sw.process_packet(0, &frame, &mut out);
                    out.clear();
                }
                let before = sw.bcache_stats().unwrap_or_default();
                let t = Instant::now();
                sw.mt_modify_entry(
                    "RIngress.ipv4_lpm",
                    a_route,
                    "RIngress.set_nhop",
                    &[vec![2, 0, 0, 0, 0, 2 + (r % 2) as u8], vec![0, 2]],
                )
                .map_err(|e| anyhow::anyhow!("{e}"))?;
                lat.push(t.elapsed().as_nanos() as f64 / 1e3);
                let after = sw.bcache_stats().unwrap_or_default();
                inval.push(after.invalidated - before.invalidated);
            }
            let s = stats(&lat);
            md += &format!(
                "| {total} | {k} | {} | {:.1} / {:.1} / {:.1} |\n",
                inval[0], s["min"], s["median"], s["max"]
            );
            rows.push(json!({"installed": total, "impacted": k,
                "invalidated": inval, "latency_us": s,
                "entries": sw.bcache_stats().unwrap_or_default().entries}));
        }
    }
    Ok((json!({"kind": "e5", "rows": rows}), md))
}

// ---------------------------------------------------------------------------------------
// E6: hit ratio vs cache size, skew and admission

fn e6(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let (flows, packets) = if a.quick {
        (500, 5_000)
    } else {
        (10_000, a.packets.unwrap_or(150_000) as usize)
    };
    let skews = [0.9, 1.0, 1.1, 1.2];
    let fracs: &[f64] = if a.quick {
        &[0.05, 0.2]
    } else {
        &[0.01, 0.02, 0.05, 0.1, 0.2]
    };
    let policies = ["always", "cm:2", "tinylfu:2:20000"];
    let frames = case_frames(flows);
    let mut rows = Vec::new();
    let mut md = format!(
        "# E6: hit ratio vs cache size, Zipf skew and admission (case #4)\n\n\
         Paper: not measured. Anchor: OVS megaflow hit ratio 97.7 % in production. Ours: case #4, \
         {flows} flows, {packets} packets Zipf(s); hit ratio over the last 90 % of the packets; \
         eviction CLOCK. `ideal` = share of packets to the C most popular flows (a static \
         oracle).\n\n| skew | cache entries | ideal | always | cm:2 | tinylfu:2 |\n\
         |---|---|---|---|---|---|\n"
    );
    for &s in &skews {
        let tr = cases::Traffic::new(flows, s, packets, 64, 0xe6 + (s * 10.0) as u64);
        let mut counts = vec![0u64; flows as usize];
        for &r in &tr.sequence {
            counts[r as usize] += 1;
        }
        counts.sort_unstable_by(|x, y| y.cmp(x));
        for &fr in fracs {
            let cap = ((flows as f64 * fr) as usize).max(8);
            let ideal = counts.iter().take(cap).sum::<u64>() as f64 / tr.sequence.len() as f64;
            let mut row = json!({"skew": s, "capacity": cap, "ideal": ideal});
            let mut cells = Vec::new();
            for pol in policies {
                let cfg = Config {
                    capacity: cap,
                    admission: Config::parse_admission(pol).map_err(anyhow::Error::msg)?,
                    eviction: Eviction::Clock,
                    ..Config::default()
                };
                let mut sw = case_switch(4, Some(cfg))?;
                let mut out = Vec::new();
                let warm_n = tr.sequence.len() / 10;
                for &r in &tr.sequence[..warm_n] {
                    let (p, f) = &frames[r as usize];
                    sw.process_packet(*p, f, &mut out);
                    sw.recycle_outputs(&mut out);
                    sw.discard_digests();
                }
                let b = sw.bcache_stats().unwrap_or_default();
                for &r in &tr.sequence[warm_n..] {
                    let (p, f) = &frames[r as usize];
                    sw.process_packet(*p, f, &mut out);
                    sw.recycle_outputs(&mut out);
                    sw.discard_digests();
                }
                let e = sw.bcache_stats().unwrap_or_default();
                let hr = (e.hits - b.hits) as f64 / (e.lookups - b.lookups).max(1) as f64;
                row[pol] = json!(hr);
                row[format!("{pol} inserts")] = json!(e.inserts);
                cells.push(format!("{:.1} %", 100.0 * hr));
            }
            md += &format!(
                "| {s} | {cap} | {:.1} % | {} |\n",
                100.0 * ideal,
                cells.join(" | ")
            );
            rows.push(row);
        }
    }
    Ok((
        json!({"kind": "e6", "flows": flows, "packets": packets, "policies": policies, "rows": rows}),
        md,
    ))
}

// ---------------------------------------------------------------------------------------
// E7: update storm

/// One control operation of the storm on `sw` (the same on both sides): a switching port
/// move, a route's next hop change, a NAT rebinding, or an ACL deny rule added or removed.
struct Storm {
    switching: Vec<u32>,
    routing: Vec<u32>,
    nat: Vec<u32>,
    acl_added: Vec<u32>,
    state: u64,
}

impl Storm {
    fn new(sw: &Switch) -> Storm {
        let handles = |t: &str| -> Vec<u32> {
            sw.mt_get_entries(t)
                .map(|v| v.iter().map(|e| e.handle).collect())
                .unwrap_or_default()
        };
        Storm {
            switching: handles("CIngress.switching"),
            routing: handles("CIngress.routing"),
            nat: handles("CIngress.nat"),
            acl_added: Vec::new(),
            state: 0x5707,
        }
    }

    fn next(&mut self) -> u64 {
        self.state = self
            .state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.state >> 33
    }

    /// The i-th operation, applied to both switches; their results must agree.
    fn op(&mut self, i: u64, on: &mut Switch, off: &mut Switch) -> anyhow::Result<()> {
        let x = self.next();
        let both = |on: &mut Switch,
                    off: &mut Switch,
                    f: &dyn Fn(&mut Switch) -> tern_runtime::RtResult<u32>|
         -> anyhow::Result<Option<u32>> {
            let (a, b) = (f(on), f(off));
            match (a, b) {
                (Ok(a), Ok(b)) if a == b => Ok(Some(a)),
                (Err(_), Err(_)) => Ok(None),
                (a, b) => bail!("storm op {i}: cached {a:?}, uncached {b:?}"),
            }
        };
        match i % 4 {
            0 => {
                let h = self.switching[x as usize % self.switching.len()];
                let port = (x >> 8) as u16 % cases::PORTS as u16;
                both(on, off, &|sw| {
                    sw.mt_modify_entry(
                        "CIngress.switching",
                        h,
                        "CIngress.forward",
                        &[port.to_be_bytes().to_vec()],
                    )
                    .map(|_| 0)
                })?;
            }
            1 => {
                let h = self.routing[x as usize % self.routing.len()];
                let host = (x >> 8) as u32 % cases::HOSTS;
                let data = vec![
                    cases::ROUTER_MAC.to_be_bytes()[2..].to_vec(),
                    cases::host_mac(host).to_be_bytes()[2..].to_vec(),
                    (cases::vid_of_vlan(cases::host_vlan(host)) as u16)
                        .to_be_bytes()
                        .to_vec(),
                ];
                both(on, off, &|sw| {
                    sw.mt_modify_entry("CIngress.routing", h, "CIngress.set_nhop", &data)
                        .map(|_| 0)
                })?;
            }
            2 => {
                let h = self.nat[x as usize % self.nat.len()];
                let data = vec![
                    ((198u32 << 24) | (x as u32 & 0xffff))
                        .to_be_bytes()
                        .to_vec(),
                    ((x >> 16) as u16).to_be_bytes().to_vec(),
                ];
                both(on, off, &|sw| {
                    sw.mt_modify_entry("CIngress.nat", h, "CIngress.snat", &data)
                        .map(|_| 0)
                })?;
            }
            _ => {
                if self.acl_added.len() > 8 || (x & 1 == 1 && !self.acl_added.is_empty()) {
                    let h = self.acl_added.remove(0);
                    both(on, off, &|sw| {
                        sw.mt_delete_entry("CIngress.acl", h).map(|_| 0)
                    })?;
                } else {
                    // Deny one of the common destination ports.
                    let dport = [80u16, 443, 53, 8080, 22, 3306, 5201, 123][x as usize % 8];
                    let t = |v: Vec<u8>, m: Vec<u8>| MatchParam::Ternary { key: v, mask: m };
                    let key = vec![
                        t(vec![0; 4], vec![0; 4]),
                        t(vec![0; 4], vec![0; 4]),
                        t(vec![0], vec![0]),
                        t(vec![0; 2], vec![0; 2]),
                        t(dport.to_be_bytes().to_vec(), vec![0xff; 2]),
                    ];
                    if let Some(h) = both(on, off, &|sw| {
                        sw.mt_add_entry("CIngress.acl", &key, "CIngress.acl_deny", &[], Some(5000))
                    })? {
                        self.acl_added.push(h);
                    }
                }
            }
        }
        Ok(())
    }
}

fn e7(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let (flows, packets) = if a.quick {
        (1_000, 20_000u64)
    } else {
        (10_000, a.packets.unwrap_or(2_000_000))
    };
    // 10K updates/s at a nominal 1 Mpps: one update every 100 packets.
    let every = 100u64;
    let tr = cases::Traffic::new(flows, 1.0, packets as usize, 64, 0xe7);
    let frames = case_frames(flows);
    let mut out_rows = Vec::new();
    let mut md = String::from(
        "# E7: update storm during traffic (case #4)\n\n\
         Paper: not evaluated (its barrier blocks the data plane). Target: zero differences, \
         bounded throughput drop. Ours: a cached and an uncached switch in lock-step on the \
         same Zipf(1.0) traffic; every 100 packets (10K updates/s at a nominal 1 Mpps) one \
         update (switching port move, route next hop change, NAT rebinding, ACL deny rule \
         added or removed) applied to both; every output packet and digest compared.\n\n\
         | storm | packets | updates | mismatches | hit ratio | invalidated | ns/packet cached (median) |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for storm in [false, true] {
        let mut on = case_switch(4, Some(Config::default()))?;
        let mut off = case_switch(4, None)?;
        let mut st = Storm::new(&on);
        let (mut mismatches, mut updates) = (0u64, 0u64);
        let mut first = None;
        let (mut o1, mut o2) = (Vec::new(), Vec::new());
        let window = (packets / 20).max(1);
        let mut timeline = Vec::new();
        let mut last = on.bcache_stats().unwrap_or_default();
        for (i, &r) in tr.sequence.iter().enumerate() {
            let i = i as u64;
            if storm && i % every == every - 1 {
                st.op(updates, &mut on, &mut off)?;
                updates += 1;
            }
            let (p, f) = &frames[r as usize];
            on.process_packet(*p, f, &mut o1);
            off.process_packet(*p, f, &mut o2);
            let (d1, d2) = (on.take_digests(), off.take_digests());
            let same = o1.len() == o2.len()
                && o1
                    .iter()
                    .zip(&o2)
                    .all(|(x, y)| x.port == y.port && x.data == y.data)
                && format!("{d1:?}") == format!("{d2:?}");
            if !same {
                mismatches += 1;
                first.get_or_insert_with(|| format!("packet {i} (flow {r})"));
            }
            o1.clear();
            o2.clear();
            if i % window == window - 1 {
                let s = on.bcache_stats().unwrap_or_default();
                timeline.push(json!({
                    "packet": i + 1,
                    "hit_ratio": (s.hits - last.hits) as f64 / (s.lookups - last.lookups).max(1) as f64,
                    "invalidated": s.invalidated - last.invalidated,
                }));
                last = s;
            }
        }
        let s = on.bcache_stats().unwrap_or_default();
        // Throughput of the cached switch alone, with the same storm.
        let mut ns = Vec::new();
        for _ in 0..if a.counts_only { 0 } else { runs(a) } {
            let mut sw = case_switch(4, Some(Config::default()))?;
            let mut twin = case_switch(4, None)?; // receives the same updates, not timed
            let mut st = Storm::new(&sw);
            let mut out = Vec::new();
            let mut n = 0u64;
            let t = Instant::now();
            for (i, &r) in tr.sequence.iter().enumerate() {
                if storm && i as u64 % every == every - 1 {
                    st.op(n, &mut sw, &mut twin)?;
                    n += 1;
                }
                let (p, f) = &frames[r as usize];
                sw.process_packet(*p, f, &mut out);
                sw.recycle_outputs(&mut out);
                sw.discard_digests();
            }
            ns.push(t.elapsed().as_nanos() as f64 / packets as f64);
        }
        let ns = if ns.is_empty() {
            Value::Null
        } else {
            stats(&ns)
        };
        md += &format!(
            "| {} | {packets} | {updates} | {mismatches} | {:.1} % | {} | {} |\n",
            if storm { "10K/s" } else { "none" },
            100.0 * s.hits as f64 / s.lookups.max(1) as f64,
            s.invalidated,
            ns["median"]
                .as_f64()
                .map_or("not timed".to_string(), |v| format!("{v:.0}"))
        );
        out_rows.push(json!({
            "storm": storm, "packets": packets, "updates": updates,
            "mismatches": mismatches, "first_mismatch": first,
            "hit_ratio": s.hits as f64 / s.lookups.max(1) as f64,
            "invalidated": s.invalidated, "ns_per_packet": ns, "timeline": timeline,
        }));
    }
    md += "\nThe timed runs include the twin switch's half of each update (one table call), \
           so the drop is an upper bound.\n";
    Ok((json!({"kind": "e7", "flows": flows, "rows": out_rows}), md))
}

// ---------------------------------------------------------------------------------------
// E9: adversarial traffic

fn e9(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let (n, packets) = if a.quick {
        (2_000u32, 2_000)
    } else {
        (1 << 20, 1_000_000)
    };
    // Every packet a new behaviour: random MACs, addresses and ports on random ports; half
    // the destination MACs are the router's (so they take the routed path).
    let mut x = 0x9e9u64;
    let mut rnd = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let frames: Vec<(u32, Vec<u8>)> = (0..n)
        .map(|_| {
            let r = rnd();
            let f = cases::Flow {
                kind: cases::Kind::Remote,
                port: (r % cases::PORTS as u64) as u32,
                dst_mac: if r & 8 == 0 {
                    cases::ROUTER_MAC
                } else {
                    rnd() & 0xfeff_ffff_ffff
                },
                src_mac: rnd() & 0xfeff_ffff_ffff,
                src_ip: rnd() as u32,
                dst_ip: rnd() as u32,
                proto: if r & 16 == 0 { 6 } else { 17 },
                sport: (r >> 20) as u16,
                dport: (r >> 40) as u16,
            };
            (f.port, cases::frame(&f, 64))
        })
        .collect();
    let seq: Vec<u32> = (0..n).collect();
    let modes: [(&str, Option<Config>); 3] = [
        ("no cache", None),
        (
            "cache, always admit",
            Some(Config {
                capacity: 65_536,
                ..Config::default()
            }),
        ),
        (
            "cache, cm:2 detector",
            Some(Config {
                capacity: 65_536,
                admission: Admission::CountMin { threshold: 2 },
                ..Config::default()
            }),
        ),
    ];
    let mut rows = Vec::new();
    let mut md = String::from(
        "# E9: adversarial traffic (case #4, every packet a new random header)\n\n\
         Paper: miss penalty ≤ 3.1 % (delay and throughput, case #4). Ours: ns/packet, \
         median of the runs; the penalty is against no cache.\n\n\
         | mode | ns/packet | hit ratio | inserts | evictions | penalty |\n|---|---|---|---|---|---|\n",
    );
    let mut base = f64::NAN;
    for (name, cfg) in modes {
        let mut sw = case_switch(4, cfg)?;
        let v: Vec<f64> = (0..runs(a))
            .map(|_| time_ns(&mut sw, &frames, &seq, packets.min(n as u64)))
            .collect();
        let s = stats(&v);
        let m = median(&s);
        if base.is_nan() {
            base = m;
        }
        let b = sw.bcache_stats().unwrap_or_default();
        md += &format!(
            "| {name} | {m:.0} | {:.2} % | {} | {} | {:+.1} % |\n",
            100.0 * hit_ratio(&sw),
            b.inserts,
            b.evictions,
            100.0 * (m - base) / base
        );
        rows.push(
            json!({"mode": name, "ns_per_packet": s, "hit_ratio": hit_ratio(&sw),
            "inserts": b.inserts, "evictions": b.evictions}),
        );
    }
    Ok((json!({"kind": "e9", "rows": rows}), md))
}

/// E4: table inserts during traffic at 100/s to 1M/s (virtual time: 1 Mpps of case #4
/// traffic, one insert every 1M/R packets). Two kinds of insert: a new MAC in
/// `mac_learning` (exact: the cache finds the affected behaviours through its key index)
/// and a /32 in `routing` (LPM: it scans the behaviours that applied the table). Latency of
/// the table call (invalidation included) is timed unless `--counts-only`; references
/// scanned and behaviours invalidated per insert are counted.
fn e4(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let (flows, budget) = if a.quick {
        (256usize, 4_000usize)
    } else {
        (4096, a.packets.unwrap_or(200_000) as usize)
    };
    let frames = case_frames(flows as u32);
    let rates: &[u64] = if a.quick {
        &[1_000_000]
    } else {
        &[100, 1_000, 10_000, 100_000, 1_000_000]
    };
    let timed = !a.counts_only;
    let mut rows = Vec::new();
    let mut md = String::from(
        "# E4: insert latency vs insert rate\n\n\
         Paper (Fig. 10a): the cache manager's insert latency as the insertion rate grows \
         (BMv2, case #1). Ours: table inserts into case #4 during its traffic (4,096 flows \
         cached; virtual time at 1 Mpps, one insert every 10^6/R packets); each insert \
         invalidates the behaviours it affects before returning. `mac_learning` is exact \
         (affected behaviours found by the key index: references scanned = behaviours that \
         looked up that key), `routing` is LPM (scan of the behaviours that applied it). \
         Latency of the table call, µs (min / median / max); `-` = counted run \
         (--counts-only).\n\n| rate /s | table | inserts | scanned / insert | \
         invalidated | hit ratio | latency µs |\n|---|---|---|---|---|---|---|\n",
    );
    for &rate in rates {
        let gap = (1_000_000 / rate).max(1) as usize;
        let inserts = (budget / gap).clamp(20, 2_000);
        for table in ["mac_learning", "routing"] {
            let mut sw = case_switch(4, Some(Config::default()))?;
            warm(&mut sw, &frames);
            let mut out = Vec::new();
            let mut lat = Vec::new();
            let mut live = std::collections::VecDeque::new();
            let before = sw.bcache_stats().unwrap_or_default();
            let mut i = 0usize;
            for n in 0..inserts {
                for _ in 0..gap {
                    let (p, f) = &frames[i % flows];
                    i += 1;
                    sw.process_packet(*p, f, &mut out);
                    sw.recycle_outputs(&mut out);
                    sw.discard_digests();
                }
                let t = Instant::now();
                let h = if table == "mac_learning" {
                    let mac = 0x0a00_0000_0000u64 | n as u64;
                    sw.mt_add_entry(
                        "CIngress.mac_learning",
                        &[MatchParam::Exact(mac.to_be_bytes()[2..].to_vec())],
                        "CIngress.nop",
                        &[],
                        None,
                    )
                } else {
                    // A /32 inside one of the served subnets (host n of 10.1.200.0/24).
                    let ip = (10 << 24) | (1 << 16) | (200 << 8) | (n as u32 % 250 + 1);
                    sw.mt_add_entry(
                        "CIngress.routing",
                        &[MatchParam::Exact(vec![1]), lpm(ip, 32)],
                        "CIngress.set_nhop",
                        &[vec![2, 0, 0, 0, 0, 1], vec![2, 0, 0, 0, 0, 2], vec![0, 1]],
                        None,
                    )
                }
                .map_err(|e| anyhow::anyhow!("{table} insert: {e}"))?;
                lat.push(t.elapsed().as_nanos() as f64 / 1e3);
                live.push_back(h);
                // Keep the tables below their size: delete the oldest insert.
                if live.len() > 32 {
                    let old = live.pop_front().unwrap_or_default();
                    sw.mt_delete_entry(&format!("CIngress.{table}"), old)
                        .map_err(|e| anyhow::anyhow!("{table} delete: {e}"))?;
                }
            }
            let after = sw.bcache_stats().unwrap_or_default();
            let adds = inserts as f64;
            // Deletes are counted too (by entry id: only the behaviours that hit the entry).
            let scanned = (after.invalidation_scanned - before.invalidation_scanned) as f64 / adds;
            let inval = after.invalidated - before.invalidated;
            let hr =
                (after.hits - before.hits) as f64 / (after.lookups - before.lookups).max(1) as f64;
            let l = stats(&lat);
            md += &format!(
                "| {rate} | {table} | {inserts} | {scanned:.1} | {inval} | {:.1} % | {} |\n",
                100.0 * hr,
                if timed {
                    format!("{:.1} / {:.1} / {:.1}", l["min"], l["median"], l["max"])
                } else {
                    "-".into()
                }
            );
            rows.push(json!({"rate": rate, "table": table, "inserts": inserts,
                "scanned_per_insert": scanned, "invalidated": inval, "hit_ratio": hr,
                "latency_us": if timed { l } else { Value::Null },
                "entries": after.entries}));
        }
    }
    Ok((json!({"kind": "e4", "rows": rows, "timed": timed}), md))
}

/// A program of `p4/bcache/` compiled (the checkout's copy when run from one).
fn bcache_json(file: &str) -> anyhow::Result<String> {
    let local = PathBuf::from("p4/bcache").join(file);
    let p = if local.is_file() {
        local
    } else {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../p4/bcache")
            .join(file)
    };
    crate::cmd_bcache::load_json(&p)
}

/// E8: stateful programs, hit ratio with register values in the key (the paper) vs guards
/// and symbolic updates (tern), through the differential harness (so every point is also an
/// equivalence run: any difference fails the experiment).
fn e8(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    use tern_dataplane::bcache::diff::Diff;
    use tern_dataplane::bcache::Stateful;
    let events = if a.quick {
        3_000
    } else {
        a.packets.unwrap_or(200_000)
    };
    let progs = [
        ("heavy hitter", "heavy_hitter.p4"),
        ("stateful firewall", "stateful_firewall.p4"),
        ("storm control (meter)", "storm_control.p4"),
    ];
    let mut rows = Vec::new();
    let mut md = format!(
        "# E8: stateful programs, hit ratio value-keyed vs guarded / symbolic\n\n\
         Paper: no figure; its stateful mode puts the register values a behaviour read into \
         the key (§II-B), our `value` bars. Ours: `symbolic` replays register \
         read-modify-writes as `cell := live + c` and re-checks conditions on the state as \
         guards (value guards where the analysis cannot). Each bar is one run of the \
         differential harness ({events} events: generated packets with repeats, table and \
         register writes interleaved; cache 4,096 entries, admission always), cached vs \
         uncached in lock-step, 0 differences. Meters are not guards yet: storm control caches \
         the prefix before its meter (`resumed` = hits that then ran the metered part \
         natively).\n\n| program | mode | hit ratio | hits | guard misses | resumed | differences |\n\
         |---|---|---|---|---|---|---|\n"
    );
    for (name, file) in progs {
        let json = bcache_json(file)?;
        for (mode, label) in [(Stateful::Value, "value"), (Stateful::Symbolic, "symbolic")] {
            let cfg = Config {
                capacity: 4096,
                stateful: mode,
                ..Config::default()
            };
            let mut d = Diff::new(&json, cfg, 0xe8).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
            let r = d
                .run(events, 997)
                .map_err(|e| anyhow::anyhow!("{file} ({label}): difference: {e}"))?;
            let s = r.stats;
            let hr = s.hits as f64 / s.lookups.max(1) as f64;
            md += &format!(
                "| {name} | {label} | {:.1} % | {} | {} | {} | 0 |\n",
                100.0 * hr,
                s.hits,
                s.miss_guard,
                s.resumed
            );
            rows.push(
                json!({"program": name, "file": file, "mode": label, "hit_ratio": hr,
                "events": r.events, "packets": r.packets, "lookups": s.lookups, "hits": s.hits,
                "miss_guard": s.miss_guard, "resumed": s.resumed, "inserts": s.inserts,
                "differences": 0}),
            );
        }
    }
    Ok((json!({"kind": "e8", "rows": rows, "events": events}), md))
}

/// E10: per-worker caches. Workers share nothing: each has its own switch replica and cache,
/// and traffic is spread by a flow hash (as RSS does). Counted here: packets, hit ratio,
/// entries and bytes per worker for 1, 2, 4 and 8 workers (the cache's footprint grows with
/// the workers only by the flows they share: none with a flow hash). Instructions per packet
/// per worker: `bench/bcache_workers_callgrind.sh` (callgrind, one thread per worker).
fn e10(a: &ExperimentArgs) -> anyhow::Result<(Value, String)> {
    let (flows, packets) = if a.quick {
        (256, 4_000)
    } else {
        (4096, a.packets.unwrap_or(400_000) as usize)
    };
    let tr = cases::Traffic::new(flows, 1.0, packets, 64, 0xe10);
    let mut rows = Vec::new();
    let mut md = format!(
        "# E10: per-worker caches, 1–N workers (case #4)\n\n\
         Paper: one BMv2 thread, no scaling figure. Ours: case #4 with its contents, {flows} \
         flows, {packets} packets Zipf(1.0), spread over N workers by a flow hash; each \
         worker has its own switch replica and cache (capacity 65,536, admission always). \
         Counted per worker (not timed). Throughput per worker needs as many free cores as \
         workers: on this 2-vCPU machine see the instructions per packet per worker \
         (`bench/bcache_workers_callgrind.sh`); on a larger machine run \
         `tern bench p4/bcache/case4.p4 --traffic case4 --bcache --workers N` for N = 1..cores \
         on a quiet machine (bench/quiet.sh) and plot Mpps against N.\n\n\
         | workers | worker | packets | hit ratio | entries | bytes |\n|---|---|---|---|---|---|\n"
    );
    for n in [1usize, 2, 4, 8] {
        let mut sws = (0..n)
            .map(|_| case_switch(4, Some(Config::default())))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut out = Vec::new();
        for &r in &tr.sequence {
            let f = &tr.flows[r as usize];
            // The flow hash: the 5-tuple's bytes through the cache's own key hasher.
            let mut h = tern_dataplane::bcache::KeyHasher::default();
            std::hash::Hasher::write(&mut h, &tr.frames[r as usize][26..38]);
            let w = (std::hash::Hasher::finish(&h) % n as u64) as usize;
            sws[w].process_packet(f.port, &tr.frames[r as usize], &mut out);
            sws[w].recycle_outputs(&mut out);
            sws[w].discard_digests();
        }
        let mut workers = Vec::new();
        for (i, sw) in sws.iter().enumerate() {
            let s = sw.bcache_stats().unwrap_or_default();
            let hr = s.hits as f64 / s.lookups.max(1) as f64;
            md += &format!(
                "| {n} | {i} | {} | {:.1} % | {} | {} |\n",
                s.lookups,
                100.0 * hr,
                s.entries,
                s.bytes
            );
            workers.push(json!({"worker": i, "packets": s.lookups, "hit_ratio": hr,
                "entries": s.entries, "bytes": s.bytes}));
        }
        rows.push(json!({"workers": n, "per_worker": workers}));
    }
    Ok((
        json!({"kind": "e10", "rows": rows, "flows": flows, "packets": packets}),
        md,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tmp(PathBuf);
    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// Every experiment's quick mode writes well-formed JSON and Markdown (plots skipped:
    /// the suite does not need matplotlib); no timing is asserted, only counts: E7's storm
    /// leaves zero differences, E5 invalidates exactly the impacted entries.
    #[test]
    fn quick_experiments_write_well_formed_outputs() {
        let dir = std::env::temp_dir().join(format!("tern-bcx-exp-{}", std::process::id()));
        let _t = Tmp(dir.clone());
        let a = ExperimentArgs {
            id: "all".into(),
            out: dir.clone(),
            quick: true,
            runs: 1,
            no_plot: true,
            counts_only: false,
            packets: None,
        };
        run(a).expect("runs");
        for id in ALL {
            let v: Value = serde_json::from_str(
                &std::fs::read_to_string(dir.join(format!("{id}.json"))).unwrap(),
            )
            .unwrap_or_else(|e| panic!("{id}.json: {e}"));
            assert_eq!(v["experiment"], id);
            assert!(v["rows"].as_array().is_some_and(|r| !r.is_empty()), "{id}");
            let md = std::fs::read_to_string(dir.join(format!("{id}.md"))).unwrap();
            assert!(md.starts_with(&format!("# {}", id.to_uppercase())), "{md}");
            assert!(md.contains("Paper"), "{id}: the paper's figure beside ours");
        }
        let e7: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("e7.json")).unwrap()).unwrap();
        for r in e7["rows"].as_array().unwrap() {
            assert_eq!(r["mismatches"], 0, "{r}");
        }
        assert!(e7["rows"][1]["updates"].as_u64().unwrap() > 100);
        let e5: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("e5.json")).unwrap()).unwrap();
        for r in e5["rows"].as_array().unwrap() {
            let k = r["impacted"].as_u64().unwrap();
            for v in r["invalidated"].as_array().unwrap() {
                assert_eq!(v.as_u64(), Some(k), "{r}");
            }
        }
        let e4: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("e4.json")).unwrap()).unwrap();
        for r in e4["rows"].as_array().unwrap() {
            if r["table"] == "mac_learning" {
                // A new MAC: nobody looked it up, nothing to scan (the key index).
                assert!(r["scanned_per_insert"].as_f64().unwrap() < 1.0, "{r}");
            }
        }
        let e8: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("e8.json")).unwrap()).unwrap();
        let hh: Vec<u64> = e8["rows"].as_array().unwrap()[..2]
            .iter()
            .map(|r| r["hits"].as_u64().unwrap())
            .collect();
        assert!(
            hh[1] > hh[0],
            "heavy hitter: symbolic hits more than value: {hh:?}"
        );
        let e10: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("e10.json")).unwrap()).unwrap();
        for r in e10["rows"].as_array().unwrap() {
            let w = r["per_worker"].as_array().unwrap();
            assert_eq!(w.len() as u64, r["workers"].as_u64().unwrap());
            let total: u64 = w.iter().map(|x| x["packets"].as_u64().unwrap()).sum();
            assert_eq!(total, e10["packets"].as_u64().unwrap(), "{r}");
        }
        let e3: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("e3.json")).unwrap()).unwrap();
        let tables: Vec<u64> = e3["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["tables"].as_u64().unwrap())
            .collect();
        assert!(
            tables.windows(2).all(|w| w[0] < w[1]),
            "each case adds tables: {tables:?}"
        );
    }

    #[test]
    fn unknown_experiment_is_refused() {
        let e = run(ExperimentArgs {
            id: "e42".into(),
            out: std::env::temp_dir(),
            quick: true,
            runs: 1,
            no_plot: true,
            counts_only: false,
            packets: None,
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("e42") && e.contains("e1"), "{e}");
    }
}
