//! `tern bench --workers N [--update-rate R]`: the same program, entries and traffic as
//! `tern bench`, run by N run-to-completion worker threads ([`tern_dataplane::workers`]),
//! optionally with a storm of table updates from the control thread.
//!
//! Flows are assigned to workers by [`flow_hash`]; each worker loops over its own flows'
//! frames in batches. Each worker's CPU time is read from `/proc/thread-self/schedstat`, so the
//! report gives both the aggregate rate (packets / wall time) and the rate per CPU-second of a
//! worker (what one core does, even when workers share cores).
//!
//! Storm: the entries of one table (the first LPM table with entries, else the first table
//! with entries) flip between two states (another port, MAC and values, see
//! [`param_value_alt`]) with `mt_modify_entry`, at the requested rate. Before the runs the
//! control replica forwards every flow once in each state; during the runs every output of
//! every packet is compared byte for byte with those two references. A packet whose outputs
//! match neither counts as misforwarded; outputs missing against the reference count as lost.
//! The same runs without updates (also checked) give the baseline for the throughput change.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use tern_dataplane::workers::{self, flow_hash, Control, Worker};
use tern_dataplane::SwitchOptions;
use tern_model::{MatchKind, Program};
use tern_runtime::{OutputPacket, PacketPath, Runtime};

use crate::cmd_bench::{
    check_args, flow, frame, install, load, memory_kb, param_value_alt, BenchArgs,
};

/// Expected outputs of one packet: `(port, frame)` in order.
type Outs = Vec<(u32, Vec<u8>)>;

/// Frames of one batch with their input ports.
type Batch = Vec<(u32, Vec<u8>)>;

/// One worker's traffic: batches of frames and the flow number of each frame.
struct Share {
    batches: Vec<Batch>,
    flows: Vec<Vec<u32>>,
}

/// What one worker did in one timed run.
#[derive(Default, Clone, Copy)]
struct RunStats {
    packets: u64,
    outputs: u64,
    wall_s: f64,
    cpu_s: f64,
    lost: u64,
    misforwarded: u64,
    /// Updates this worker applied during the run.
    applied: u64,
}

/// The table whose entries the storm flips, with its action and the handles in install order.
struct StormTable {
    table: String,
    action: String,
    params: Vec<(String, u32)>,
    handles: Vec<tern_runtime::EntryHandle>,
}

/// CPU time of the calling thread (ns), from `/proc/thread-self/schedstat`.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

fn storm_table(prog: &Program, ctl: &Control) -> Option<StormTable> {
    let tables: Vec<_> = prog.pipelines.iter().flat_map(|p| &p.tables).collect();
    let pick = |lpm: bool| {
        tables.iter().find(|t| {
            (!lpm || t.key.iter().any(|k| k.match_kind == MatchKind::Lpm))
                && ctl.switch().mt_get_num_entries(&t.name).unwrap_or(0) > 0
                && t.action_profile.is_none()
                && t.entries.is_none()
        })
    };
    let t = pick(true).or_else(|| pick(false))?;
    let entries = ctl.switch().mt_get_entries(&t.name).ok()?;
    let action = match &entries.first()?.action {
        tern_runtime::ActionEntry::Action { name, .. } => name.clone(),
        _ => return None,
    };
    let a = prog.actions.iter().find(|a| a.name == action)?;
    Some(StormTable {
        table: t.name.clone(),
        action,
        params: a.runtime_data.clone(),
        handles: entries.iter().map(|e| e.handle).collect(),
    })
}

fn storm_data(st: &StormTable, i: usize, alt: bool) -> Vec<Vec<u8>> {
    st.params
        .iter()
        .map(|(n, w)| param_value_alt(n, *w, i as u32, alt))
        .collect()
}

/// Publish one update that puts every storm entry in state `alt`.
fn set_all(ctl: &mut Control, st: &StormTable, alt: bool) -> anyhow::Result<()> {
    let ops: Vec<(tern_runtime::EntryHandle, Vec<Vec<u8>>)> = st
        .handles
        .iter()
        .enumerate()
        .map(|(i, h)| (*h, storm_data(st, i, alt)))
        .collect();
    let (t, a) = (st.table.clone(), st.action.clone());
    ctl.update(move |sw| {
        for (h, d) in &ops {
            sw.mt_modify_entry(&t, *h, &a, d)?;
        }
        Ok(())
    })
    .map_err(|e| anyhow::anyhow!("storm table {}: {e}", st.table))
}

/// Compare a batch's outputs with the references; returns (lost, misforwarded).
fn check(out: &[OutputPacket], flows: &[u32], refs: &[Vec<Outs>; 2]) -> (u64, u64) {
    let (mut pos, mut mis) = (0usize, 0u64);
    let mut expected = 0u64;
    let mut aligned = true;
    for &k in flows {
        let k = k as usize;
        expected += refs[0][k].len() as u64;
        if !aligned {
            continue;
        }
        let fits = |r: &Outs| {
            out.len() >= pos + r.len()
                && r.iter()
                    .zip(&out[pos..])
                    .all(|((p, d), o)| *p == o.port && *d == o.data)
        };
        if let Some(r) = refs.iter().map(|r| &r[k]).find(|r| fits(r)) {
            pos += r.len();
        } else {
            mis += 1;
            aligned = false;
        }
    }
    (expected.saturating_sub(out.len() as u64), mis)
}

fn worker_run(
    w: &mut Worker,
    share: &Share,
    quota: u64,
    refs: Option<&[Vec<Outs>; 2]>,
    start: &Barrier,
) -> RunStats {
    let pkts: Vec<Vec<(u32, &[u8])>> = share
        .batches
        .iter()
        .map(|b| b.iter().map(|(p, f)| (*p, f.as_slice())).collect())
        .collect();
    let mut out = Vec::with_capacity(64);
    let mut st = RunStats::default();
    start.wait();
    if pkts.is_empty() {
        w.poll();
        return st;
    }
    let cpu0 = thread_cpu_ns();
    let applied0 = w.applied();
    let t = Instant::now();
    let mut bi = 0;
    while st.packets < quota {
        let b = &pkts[bi];
        w.process_batch(b, &mut out);
        st.outputs += out.len() as u64;
        if let Some(r) = refs {
            let (l, m) = check(&out, &share.flows[bi], r);
            st.lost += l;
            st.misforwarded += m;
        }
        w.recycle_outputs(&mut out);
        w.discard_digests();
        st.packets += b.len() as u64;
        bi = (bi + 1) % pkts.len();
    }
    st.wall_s = t.elapsed().as_secs_f64();
    st.applied = w.applied() - applied0;
    st.cpu_s = match (cpu0, thread_cpu_ns()) {
        (Some(a), Some(b)) => (b - a) as f64 / 1e9,
        _ => st.wall_s,
    };
    st
}

/// One timed run over all workers; `storm` = (table, rate) to update during the run.
/// Returns per-worker stats, the run's wall time and the updates applied.
fn timed_run(
    ctl: &mut Control,
    ws: &mut [Worker],
    shares: &[Share],
    quota: &[u64],
    refs: Option<&[Vec<Outs>; 2]>,
    storm: Option<(&StormTable, u64, &mut Vec<bool>)>,
) -> anyhow::Result<(Vec<RunStats>, f64, u64)> {
    let n = ws.len();
    let start = Barrier::new(n + 1);
    let finished = AtomicUsize::new(0);
    let mut updates = 0u64;
    let mut err = None;
    let mut next = 0usize;
    // Publish updates until `due` have been sent, flipping entries round-robin.
    let mut publish = |ctl: &mut Control, st: &StormTable, state: &mut [bool], due| {
        while updates < due && !st.handles.is_empty() {
            let i = next;
            next = (next + 1) % st.handles.len();
            state[i] = !state[i];
            let (tb, a, h) = (st.table.clone(), st.action.clone(), st.handles[i]);
            let d = storm_data(st, i, state[i]);
            if let Err(e) = ctl.update(move |sw| sw.mt_modify_entry(&tb, h, &a, &d)) {
                err.get_or_insert(e);
            }
            updates += 1;
        }
    };
    let mut storm = storm;
    // The storm starts with the run: its first update is published before the workers are
    // released, so each applies it at its first batch however short the run (a run of a few
    // milliseconds could otherwise end before the controller thread was scheduled at all).
    // The bench's control runs without the update barrier (`Control::set_barrier` is not
    // called here): with it, this update would wait for acknowledgements from workers not
    // yet running.
    if let Some((st, _, state)) = storm.as_mut() {
        publish(ctl, st, state, 1);
    }
    let (stats, wall) = std::thread::scope(|s| {
        let handles: Vec<_> = ws
            .iter_mut()
            .zip(shares)
            .zip(quota)
            .map(|((w, sh), q)| {
                let (start, finished) = (&start, &finished);
                s.spawn(move || {
                    let r = worker_run(w, sh, *q, refs, start);
                    finished.fetch_add(1, Ordering::Release);
                    r
                })
            })
            .collect();
        start.wait();
        let t = Instant::now();
        if let Some((st, rate, state)) = storm.as_mut() {
            while finished.load(Ordering::Acquire) < n {
                let due = 1 + (t.elapsed().as_secs_f64() * *rate as f64) as u64;
                publish(ctl, st, state, due);
                // Updates are paced in bursts of ~rate/1000 every millisecond, as a controller
                // batches writes: waking every 100 µs (one update each) cost the shared vCPUs
                // 13-14 % of the workers' throughput in scheduling alone (bench/RESULTS.md).
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        let stats: Vec<RunStats> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_default())
            .collect();
        (stats, t.elapsed().as_secs_f64())
    });
    if let Some(e) = err {
        anyhow::bail!("storm update refused: {e}");
    }
    Ok((stats, wall, updates))
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s[s.len() / 2]
}

/// Summary of a set of runs: (aggregate Mpps per run, Mpps per worker CPU-second per run,
/// packets, outputs, lost, misforwarded, updates/s per run).
#[derive(Default)]
struct Summary {
    mpps: Vec<f64>,
    per_core: Vec<f64>,
    per_worker: Vec<Vec<f64>>,
    packets: u64,
    outputs: u64,
    lost: u64,
    misforwarded: u64,
    updates_per_s: Vec<f64>,
    /// Updates applied by the workers while they ran (summed over workers).
    applied: u64,
}

impl Summary {
    fn add(&mut self, stats: &[RunStats], wall: f64, updates: u64) {
        let pk: u64 = stats.iter().map(|s| s.packets).sum();
        let cpu: f64 = stats.iter().map(|s| s.cpu_s).sum();
        self.mpps.push(pk as f64 / wall / 1e6);
        self.per_core.push(if cpu > 0.0 {
            pk as f64 / cpu / 1e6
        } else {
            0.0
        });
        self.per_worker.push(
            stats
                .iter()
                .map(|s| {
                    if s.wall_s > 0.0 {
                        s.packets as f64 / s.wall_s / 1e6
                    } else {
                        0.0
                    }
                })
                .collect(),
        );
        self.packets += pk;
        self.outputs += stats.iter().map(|s| s.outputs).sum::<u64>();
        self.lost += stats.iter().map(|s| s.lost).sum::<u64>();
        self.misforwarded += stats.iter().map(|s| s.misforwarded).sum::<u64>();
        self.updates_per_s.push(updates as f64 / wall);
        self.applied += stats.iter().map(|s| s.applied).sum::<u64>();
    }

    fn json(&self) -> String {
        let list = |v: &[f64]| {
            v.iter()
                .map(|m| format!("{m:.4}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        format!(
            "{{\"mpps\":[{}],\"mpps_median\":{:.4},\"mpps_per_worker_cpu\":[{}],\"mpps_per_worker_cpu_median\":{:.4},\
             \"packets\":{},\"outputs\":{},\"lost\":{},\"misforwarded\":{},\"updates_per_s\":[{}]}}",
            list(&self.mpps),
            median(&self.mpps),
            list(&self.per_core),
            median(&self.per_core),
            self.packets,
            self.outputs,
            self.lost,
            self.misforwarded,
            list(&self.updates_per_s)
        )
    }
}

/// The outcome of a workers run (also used by the tests).
struct Outcome {
    baseline: Summary,
    storm: Option<Summary>,
    report: String,
}

pub(crate) fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let o = execute(&args)?;
    print!("{}", o.report);
    let bad = o.baseline.lost
        + o.baseline.misforwarded
        + o.storm.as_ref().map_or(0, |s| s.lost + s.misforwarded);
    Ok(if bad > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn execute(args: &BenchArgs) -> anyhow::Result<Outcome> {
    check_args(args)?;
    let n = args.workers.unwrap_or(1);
    let (name, json) = load(args)?;
    let opts = SwitchOptions {
        bcache: args.bcache.config()?,
        ..SwitchOptions::default()
    };
    let (mut ctl, mut ws) =
        workers::build(&json, opts, n).with_context(|| format!("loading {name}"))?;
    let prog = ctl.switch().program().clone();
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());

    eprintln!("installing entries ...");
    let t = Instant::now();
    let (p2, a2) = (Arc::new(prog.clone()), Arc::new(args.clone()));
    let (entries, failed, first_err) = ctl
        .update(move |sw| Ok(install(sw, &p2, &a2)))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let install_s = t.elapsed().as_secs_f64();
    if let Some(e) = &first_err {
        eprintln!("warning: {failed} entries were refused; first: {e}");
    }

    // Traffic, split by flow hash; references from the control replica.
    let frames: Vec<Vec<u8>> = (0..args.flows)
        .map(|k| frame(&flow(k, args.routes), args.size))
        .collect();
    let storm = if args.update_rate > 0 {
        Some(storm_table(&prog, &ctl).context("--update-rate: no table with entries to update")?)
    } else {
        None
    };
    let reference = |ctl: &mut Control| -> Vec<Outs> {
        let mut out = Vec::new();
        frames
            .iter()
            .map(|f| {
                ctl.switch_mut().process_packet(0, f, &mut out);
                out.drain(..).map(|o| (o.port, o.data)).collect()
            })
            .collect()
    };
    let ref_a = reference(&mut ctl);
    let ref_b = match &storm {
        Some(st) => {
            set_all(&mut ctl, st, true)?;
            let r = reference(&mut ctl);
            set_all(&mut ctl, st, false)?;
            r
        }
        None => ref_a.clone(),
    };
    let forwarded = ref_a.iter().filter(|o| !o.is_empty()).count();
    if let Some(st) = &storm {
        let differ = (0..frames.len()).filter(|k| ref_a[*k] != ref_b[*k]).count();
        eprintln!(
            "storm: table {} ({} entries, action {}); {differ} of {} flows forward differently in the two states",
            st.table,
            st.handles.len(),
            st.action,
            frames.len()
        );
    }
    let refs = [ref_a, ref_b];

    let mut shares: Vec<Share> = (0..n)
        .map(|_| Share {
            batches: Vec::new(),
            flows: Vec::new(),
        })
        .collect();
    let mut pending: Vec<(Batch, Vec<u32>)> = vec![Default::default(); n];
    for (k, f) in frames.iter().enumerate() {
        let w = (flow_hash(f) % n as u64) as usize;
        let (b, fl) = &mut pending[w];
        b.push((0, f.clone()));
        fl.push(k as u32);
        if b.len() == args.batch {
            shares[w].batches.push(std::mem::take(b));
            shares[w].flows.push(std::mem::take(fl));
        }
    }
    for (w, (b, fl)) in pending.into_iter().enumerate() {
        if !b.is_empty() {
            shares[w].batches.push(b);
            shares[w].flows.push(fl);
        }
    }
    let total_flows = frames.len().max(1) as u64;
    let quota: Vec<u64> = shares
        .iter()
        .map(|s| {
            let f: u64 = s.flows.iter().map(|f| f.len() as u64).sum();
            (args.packets * f).div_ceil(total_flows)
        })
        .collect();

    let check_refs = storm.is_some().then_some(&refs);
    let mut base = Summary::default();
    for run in 0..args.runs {
        let (st, wall, _) = timed_run(&mut ctl, &mut ws, &shares, &quota, check_refs, None)?;
        base.add(&st, wall, 0);
        eprintln!(
            "  run {}: {:.2} Mpps ({n} workers)",
            run + 1,
            base.mpps[run as usize]
        );
    }
    let mut storm_sum = None;
    if let Some(st) = &storm {
        let mut state = vec![false; st.handles.len()];
        let mut sum = Summary::default();
        for run in 0..args.runs {
            let (stats, wall, ups) = timed_run(
                &mut ctl,
                &mut ws,
                &shares,
                &quota,
                check_refs,
                Some((st, args.update_rate, &mut state)),
            )?;
            sum.add(&stats, wall, ups);
            eprintln!(
                "  storm run {}: {:.2} Mpps, {:.0} updates/s",
                run + 1,
                sum.mpps[run as usize],
                sum.updates_per_s[run as usize]
            );
        }
        storm_sum = Some(sum);
    }
    let (rss, hwm) = memory_kb();

    let mut r = String::new();
    use std::fmt::Write as _;
    let _ = writeln!(r, "tern bench: {name}");
    let _ = writeln!(
        r,
        "  program: {} tables; {entries} entries installed in {install_s:.2} s{}; {n} workers on {cores} CPUs",
        prog.pipelines.iter().map(|p| p.tables.len()).sum::<usize>(),
        if failed > 0 {
            format!(" ({failed} refused)")
        } else {
            String::new()
        }
    );
    let flows_per: Vec<usize> = shares
        .iter()
        .map(|s| s.flows.iter().map(Vec::len).sum())
        .collect();
    let _ = writeln!(
        r,
        "  traffic: {} flows ({} forwarded), flows per worker {:?}, {}-byte frames, batches of {}",
        args.flows, forwarded, flows_per, args.size, args.batch
    );
    let line = |r: &mut String, what: &str, s: &Summary| {
        let _ = writeln!(
            r,
            "  {what}: median {:.2} Mpps aggregate ({:.0} ns/packet), {:.2} Mpps per worker CPU-second; runs {:?}",
            median(&s.mpps),
            1e3 / median(&s.mpps),
            median(&s.per_core),
            s.mpps
                .iter()
                .map(|m| (m * 100.0).round() / 100.0)
                .collect::<Vec<_>>()
        );
    };
    line(
        &mut r,
        &format!("throughput ({} runs x {} packets)", args.runs, args.packets),
        &base,
    );
    if let Some(s) = &storm_sum {
        line(&mut r, "with update storm", s);
        let b = median(&base.mpps);
        let _ = writeln!(
            r,
            "  update storm: {:.0} updates/s applied (asked {}; the workers applied {} while they ran), throughput change {:+.1}%; packets checked {} (+ {} without updates): lost {}, misforwarded {} (without updates: lost {}, misforwarded {})",
            median(&s.updates_per_s),
            args.update_rate,
            s.applied,
            100.0 * (median(&s.mpps) - b) / b,
            s.packets,
            base.packets,
            s.lost,
            s.misforwarded,
            base.lost,
            base.misforwarded
        );
    }
    if ws.iter().any(|w| w.bcache_stats().is_some()) {
        let mut sum = tern_dataplane::bcache::Stats::default();
        for w in &ws {
            sum.add(&w.bcache_stats().unwrap_or_default());
        }
        let _ = writeln!(r, "  bcache (sum over {n} workers): {sum}");
    }
    let kb = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("{v} kB"));
    let _ = writeln!(
        r,
        "  memory: RSS {} (peak {}) with {} replicas",
        kb(rss),
        kb(hwm),
        n + 1
    );
    if let Some(path) = &args.json {
        let j = format!(
            "{{\"program\":{name:?},\"workers\":{n},\"cpus\":{cores},\"entries\":{entries},\"flows\":{},\"routes\":{},\"size\":{},\"batch\":{},\"packets_per_run\":{},\"flows_forwarded\":{forwarded},\"update_rate\":{},\"baseline\":{},\"storm\":{}}}\n",
            args.flows,
            args.routes,
            args.size,
            args.batch,
            args.packets,
            args.update_rate,
            base.json(),
            storm_sum.as_ref().map_or("null".to_string(), Summary::json)
        );
        std::fs::write(path, j).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(Outcome {
        baseline: base,
        storm: storm_sum,
        report: r,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn args(file: &str) -> BenchArgs {
        BenchArgs {
            program: Some(
                PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/bench/")).join(file),
            ),
            routes: 64,
            flows: 256,
            packets: 6_000,
            size: 60,
            batch: 8,
            runs: 1,
            json: None,
            latency_samples: 0,
            stage_packets: 0,
            workers: Some(2),
            update_rate: 0,
            bcache: Default::default(),
            kv_args: Default::default(),
            case: Default::default(),
        }
    }

    /// Two workers forward every packet exactly as the single-threaded reference does
    /// (checked byte for byte), and the flows are split between them.
    #[test]
    fn workers_forward_like_the_reference() {
        let mut a = args("l3_router.p4");
        a.update_rate = 1; // checked runs; the storm part is exercised below
        let o = execute(&a).expect("run");
        // Quotas are whole batches: at least the packets asked, each forwarded once.
        assert!(o.baseline.packets >= 6_000, "{}", o.report);
        assert_eq!(o.baseline.outputs, o.baseline.packets, "{}", o.report);
        assert_eq!((o.baseline.lost, o.baseline.misforwarded), (0, 0));
        assert!(o.report.contains("2 workers"), "{}", o.report);
    }

    /// Concurrent updates never produce a misforward: with 50k updates/s asked, every output of every packet is
    /// one of the two reference forwardings, nothing is lost, and the updates were really
    /// applied while traffic ran (most flows differ between the two states).
    #[test]
    fn update_storm_never_misforwards() {
        for file in ["l3_router.p4", "l2l3_acl_nat.p4"] {
            let mut a = args(file);
            a.packets = 20_000;
            a.update_rate = 50_000;
            let o = execute(&a).expect("run");
            let s = o.storm.expect("storm ran");
            assert!(s.packets >= 20_000, "{file}");
            assert_eq!(s.outputs, s.packets, "{file}: {}", o.report);
            assert_eq!((s.lost, s.misforwarded), (0, 0), "{file}: {}", o.report);
            assert!(
                s.applied > 0,
                "{file}: no update applied during the run: {}",
                o.report
            );
        }
    }

    /// The same storm with the behaviour cache on in every worker: still no packet differs
    /// from both references (each update and its invalidation reach a worker between two
    /// batches), the cache was hit and the updates invalidated entries.
    #[test]
    fn update_storm_with_the_behaviour_cache_never_misforwards() {
        for file in ["l3_router.p4", "l2l3_acl_nat.p4"] {
            let mut a = args(file);
            a.packets = 20_000;
            a.update_rate = 50_000;
            a.bcache = crate::cmd_bcache::BcacheArgs {
                bcache: true,
                bcache_size: 4096,
                bcache_admission: "always".into(),
                bcache_eviction: "clock".into(),
                bcache_skip_table: Vec::new(),
            };
            let o = execute(&a).expect("run");
            let s = o.storm.expect("storm ran");
            assert_eq!(s.outputs, s.packets, "{file}: {}", o.report);
            assert_eq!((s.lost, s.misforwarded), (0, 0), "{file}: {}", o.report);
            assert!(s.applied > 0, "{file}: {}", o.report);
            assert!(
                o.report.contains("bcache (sum over 2 workers)"),
                "{}",
                o.report
            );
            let line = o
                .report
                .lines()
                .find(|l| l.contains("bcache (sum"))
                .unwrap();
            println!("{file}: {line}");
            assert!(!line.contains(" hits 0 "), "{file}: {line}");
            assert!(!line.contains("invalidated 0 "), "{file}: {line}");
        }
    }

    /// The checker itself: a frame that differs from both references is a misforward, a
    /// missing output is a loss.
    #[test]
    fn checker_catches_wrong_and_missing_outputs() {
        let refs = [
            vec![vec![(1u32, vec![1u8, 2])], vec![(2, vec![3])]],
            vec![vec![(3u32, vec![9u8, 9])], vec![(2, vec![3])]],
        ];
        let o = |port, data: &[u8]| OutputPacket {
            port,
            data: data.to_vec(),
        };
        assert_eq!(check(&[o(1, &[1, 2]), o(2, &[3])], &[0, 1], &refs), (0, 0));
        assert_eq!(check(&[o(3, &[9, 9]), o(2, &[3])], &[0, 1], &refs), (0, 0));
        // Port of state A with the frame of state B: half an update.
        assert_eq!(check(&[o(1, &[9, 9]), o(2, &[3])], &[0, 1], &refs), (0, 1));
        assert_eq!(check(&[o(2, &[3])], &[0, 1], &refs), (1, 1));
    }
}

#[cfg(test)]
mod shared_state_tests {
    use tern_dataplane::workers;
    use tern_dataplane::SwitchOptions;
    use tern_runtime::PacketPath;

    /// Every packet increments register cell 0 and counter cell 1, and leaves on port 2.
    const COUNTING: &str = include_str!("../../../p4/tests/counting.p4");

    /// Registers are shared and each action's read-modify-write is atomic: two workers
    /// incrementing the same cell concurrently lose no increment. Counters are per worker and
    /// the control's read is their sum; a counter write sets the sum.
    #[test]
    fn registers_shared_atomically_counters_summed() {
        let json = tern_p4::compile_str(COUNTING, "counting.p4", &Default::default())
            .expect("compiles")
            .json;
        let (mut ctl, ws) = workers::build(&json, SwitchOptions::default(), 2).expect("loads");
        let per = 3_000u64;
        let stop = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            for mut w in ws {
                let stop = &stop;
                s.spawn(move || {
                    let mut out = Vec::new();
                    for i in 0..per {
                        let mut f = vec![0u8; 60];
                        f[0] = w.id as u8;
                        f[5] = i as u8;
                        w.process_packet(1, &f, &mut out);
                        assert_eq!(out.len(), 1);
                        w.recycle_outputs(&mut out);
                    }
                    // Keep answering the control until it is done with its queries.
                    while !stop.load(std::sync::atomic::Ordering::Acquire) {
                        w.poll();
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                });
            }
            // Workers stop polling when this goes, even if an assertion below fails.
            struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);
            impl Drop for StopOnDrop<'_> {
                fn drop(&mut self) {
                    self.0.store(true, std::sync::atomic::Ordering::Release);
                }
            }
            let _stop = StopOnDrop(&stop);
            // Reads while packets run take the same lock (never a torn value).
            for _ in 0..20 {
                let v = ctl.register_read("I.total", 0).expect("register");
                assert!(v <= 2 * per);
            }
            let t = std::time::Instant::now();
            while ctl.register_read("I.total", 0).expect("register") < 2 * per
                && t.elapsed().as_secs() < 20
            {
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            assert_eq!(ctl.register_read("I.total", 0).expect("register"), 2 * per);
            let c = ctl.counter_read("I.seen", 1).expect("counter");
            assert_eq!(c.packets, 2 * per);
            ctl.counter_write(
                "I.seen",
                1,
                tern_runtime::CounterValue {
                    packets: 7,
                    bytes: 0,
                },
            )
            .expect("write");
            assert_eq!(ctl.counter_read("I.seen", 1).expect("counter").packets, 7);
        });
        // The control replica processes packets against the same register bank.
        let mut out = Vec::new();
        ctl.switch_mut().process_packet(1, &[0u8; 60], &mut out);
        assert_eq!(
            ctl.register_read("I.total", 0).expect("register"),
            2 * per + 1
        );
    }
}
