//! `tern kv experiment madinc-users | madinc-policies | madinc-distribution | madinc-burst |
//! madinc-tenants | madinc-all`: the MADINC thesis's three experiments (§5.5 of
//! `../shared/reference/kv-caching.md`) and two beyond it, on the in-process MADINC network of
//! `madinc_net` (tern switches running `p4/kv/madinc.p4`, RocksDB stores, the controller behind
//! acknowledged and retried control messages with loss injected).
//!
//! What is counted and what is modelled: every request really passes the switches and, on a
//! miss, the store; who answered (which switch of the route, or the store), the reports made and
//! delivered, and every read's value are counted. Time is not measured (the machine is shared):
//! the thesis's throughput is modelled from the counted answers with the thesis's own
//! calibration (30 kQPS offered, split equally among users; a store host serves 32 × 75 QPS =
//! 2,400 QPS, so a user's throughput is min(offered, 2,400 / store share)), and its RTT from
//! the answering hop (0.4 ms per switch reached, the step of the thesis's CDF; the store one step
//! beyond the last switch). Outputs per experiment: `madinc-<name>.json` (points, the thesis's
//! figures, the comparison), `.md` (thesis beside tern) and `.png` (`scripts/kv-plot.sh`).
//!
//! Measured, not modelled: `madinc-users-measured`, `madinc-policies-measured` (both:
//! `madinc-measured`, not part of madinc-all) run every switch as a `tern kv madinc-switch`
//! process and closed-loop client threads over it with a one-way delay per link traversal, and
//! take reads/s and every read's RTT from the clients' clocks (tenants join and leave during the
//! policies run).

use super::cmd_kv::{plot, say, write_json};
use super::cmd_kv_exp::ExperimentArgs;
use super::kv_paper::{mean_ci95, Compare, Point};
use super::madinc_net::{Answer, Net, NetConfig, Topology};
use anyhow::{bail, Context};
use serde::Serialize;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
use tern_kv::madinc_ctl::Policy;
use tern_kv::madinc_wire::Loss;
use tern_kv::protocol::Key;
use tern_kv::rng::Rng;
use tern_kv::ycsb::Zipfian;

/// The thesis's calibration: total offered load (QPS).
const OFFERED: f64 = 30_000.0;
/// One store host: 32 emulated stores of 75 QPS.
const STORE_QPS: f64 = 2_400.0;
/// RTT step per switch hop (ms), from the thesis's CDF.
const HOP_MS: f64 = 0.4;
/// Keys per user (the thesis's 1,000).
const KEYS: u64 = 1000;

/// An experiment's report (`kind` = `kv-madinc-experiment`, read by `scripts/kv-plot.py`).
#[derive(Serialize)]
struct Report {
    #[serde(flatten)]
    stamp: Stamp,
    experiment: String,
    title: String,
    figure: String,
    x_label: String,
    metric: String,
    method_note: String,
    scale: serde_json::Value,
    points: Vec<Point>,
    /// The thesis's figures, as points of the same form (method = `thesis`).
    thesis: Vec<Point>,
    compare: Vec<Compare>,
    /// Counters of the control plane over the whole experiment.
    control: serde_json::Value,
}

/// What every report says of where and when it was made (flattened into its JSON).
#[derive(Serialize)]
struct Stamp {
    kind: &'static str,
    date: String,
    machine: String,
    command: String,
}

impl Stamp {
    fn now() -> Stamp {
        Stamp {
            kind: "kv-madinc-experiment",
            date: super::cmd_kv_exp::now_utc(),
            machine: super::cmd_kv_exp::machine(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
        }
    }
}

#[derive(Clone, Copy)]
enum Dist {
    Zipf(f64),
    Uniform,
}

impl Dist {
    fn name(self) -> String {
        match self {
            Dist::Zipf(t) => format!("zipf-{t}"),
            Dist::Uniform => "uniform".into(),
        }
    }
}

const DISTS: [Dist; 4] = [
    Dist::Zipf(0.9),
    Dist::Zipf(0.95),
    Dist::Zipf(0.99),
    Dist::Uniform,
];

struct Gen {
    zipf: Option<Zipfian>,
    rng: Rng,
    keys: u64,
}

impl Gen {
    fn new(d: Dist, keys: u64, seed: u64) -> Gen {
        Gen {
            zipf: match d {
                Dist::Zipf(t) => Some(Zipfian::with_theta(0, keys as i64 - 1, t)),
                Dist::Uniform => None,
            },
            rng: Rng::new(seed),
            keys,
        }
    }
    fn next(&mut self) -> u64 {
        match &mut self.zipf {
            Some(z) => z.next(&mut self.rng) as u64,
            None => self.rng.below(self.keys),
        }
    }
}

/// What one user's run counted.
#[derive(Default, Clone)]
struct Counts {
    reads: u64,
    writes: u64,
    /// Reads answered per route position.
    at: Vec<u64>,
    store: u64,
    dropped: u64,
    /// Reads whose value was not the tenant's latest write (must stay 0).
    wrong: u64,
    /// Modelled RTT of every read (ms).
    rtt: Vec<f64>,
}

struct Sizes {
    quick: bool,
    ops: u64,
    threshold: u16,
    loss: u32,
}

fn sizes(a: &ExperimentArgs) -> Sizes {
    Sizes {
        quick: a.quick,
        ops: a
            .ops
            .map(|o| o.max(1) as u64)
            .unwrap_or(if a.quick { 4000 } else { 100_000 }),
        threshold: if a.quick { 4 } else { 16 },
        loss: 200_000,
    }
}

fn value_of(tenant: u16, key: u64, version: u32) -> Vec<u8> {
    format!("t{tenant}-k{key}-v{version}").into_bytes()
}

/// A fresh network under a scratch folder that is removed afterwards.
struct Bed {
    net: Option<Net>,
    dir: PathBuf,
}

impl Bed {
    fn new(
        topology: Topology,
        switches: usize,
        pages: u32,
        stores: usize,
        loss: u32,
    ) -> anyhow::Result<Bed> {
        Bed::start(topology, switches, pages, stores, loss, false)
    }

    /// With `processes`, every switch is a `tern kv madinc-switch` process.
    fn start(
        topology: Topology,
        switches: usize,
        pages: u32,
        stores: usize,
        loss: u32,
        processes: bool,
    ) -> anyhow::Result<Bed> {
        let exe = if processes {
            Some(std::env::current_exe().context("the tern executable")?)
        } else {
            None
        };
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tern-madinc-{}-{}",
            std::process::id(),
            N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let net = Net::start_with(
            NetConfig {
                topology,
                switches,
                pages,
                loss: Loss {
                    per_million: loss,
                    seed: 42,
                },
                retry: Duration::from_millis(3),
            },
            stores,
            &dir,
            exe.as_deref(),
        );
        match net {
            Ok(n) => Ok(Bed { net: Some(n), dir }),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }
    fn net(&mut self) -> &mut Net {
        self.net.as_mut().expect("running")
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        self.net.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs `ops` requests of `users` (round-robin), each drawing keys from its own generator,
/// `write_ratio` of them writes; the controller takes its messages every 16 requests. Every
/// read is checked against the user's latest write (`latest`).
#[allow(clippy::too_many_arguments)]
fn drive(
    net: &mut Net,
    users: &[u16],
    gens: &mut [Gen],
    ops: u64,
    write_ratio: f64,
    rng: &mut Rng,
    latest: &mut HashMap<(u16, u64), u32>,
    counts: &mut [Counts],
    route_len: usize,
) -> anyhow::Result<()> {
    for i in 0..ops {
        let u = (i % users.len() as u64) as usize;
        let t = users[u];
        let k = gens[u].next();
        let c = &mut counts[u];
        if c.at.len() < route_len {
            c.at.resize(route_len, 0);
        }
        if write_ratio > 0.0 && rng.next_f64() < write_ratio {
            let v = latest.get(&(t, k)).copied().unwrap_or(0) + 1;
            if !net.write(t, Key::from_id(k), &value_of(t, k, v))? {
                bail!("tenant {t}: write of key {k} not stored");
            }
            latest.insert((t, k), v);
            c.writes += 1;
        } else {
            let (a, v) = net.read(t, Key::from_id(k))?;
            c.reads += 1;
            let want = latest.get(&(t, k)).map(|&v| value_of(t, k, v));
            if v != want {
                c.wrong += 1;
            }
            match a {
                Answer::Switch(h) => {
                    c.at[h] += 1;
                    c.rtt.push(HOP_MS * (h + 1) as f64);
                }
                Answer::Store => {
                    c.store += 1;
                    c.rtt.push(HOP_MS * (route_len + 1) as f64);
                }
                Answer::Dropped => c.dropped += 1,
            }
        }
        if i % 16 == 15 {
            net.pump(Duration::from_micros(200))?;
        }
    }
    Ok(())
}

/// A network after [`warm_up`]: its users, their route's length, every key's latest version,
/// the users' key generators and the random source, ready for the measured part.
struct Warmed {
    ids: Vec<u16>,
    route_len: usize,
    latest: HashMap<(u16, u64), u32>,
    gens: Vec<Gen>,
    rng: Rng,
    /// The warm-up's counts (its wrong reads count with the measured part's).
    warm: Vec<Counts>,
}

/// Adds users `1..=users` with `pages` pages each under `policy`, loads their records and
/// runs the unmeasured warm-up (`s.ops / 2` reads in four parts; under the least-loaded policy
/// each user's pages are rebalanced by load after each part).
#[allow(clippy::too_many_arguments)]
fn warm_up(
    net: &mut Net,
    s: &Sizes,
    users: usize,
    pages: u32,
    policy: Policy,
    d: Dist,
    seed: u64,
) -> anyhow::Result<Warmed> {
    let ids: Vec<u16> = (0..users as u16).map(|i| i + 1).collect();
    for &t in &ids {
        net.add_tenant(t, 0x7e00_0000 | t as u32, s.threshold, pages, policy)?;
    }
    let route_len = net.route_len(ids[0]);
    let mut latest = HashMap::new();
    load(net, &ids, KEYS, &mut latest)?;
    let mut gens: Vec<Gen> = ids
        .iter()
        .map(|&t| Gen::new(d, KEYS, seed ^ t as u64))
        .collect();
    let mut rng = Rng::new(seed);
    let mut warm = vec![Counts::default(); users];
    for _ in 0..4 {
        drive(
            net,
            &ids,
            &mut gens,
            s.ops / 8,
            0.0,
            &mut rng,
            &mut latest,
            &mut warm,
            route_len,
        )?;
        if policy == Policy::LeastLoaded {
            for &t in &ids {
                net.rebalance(t)?;
            }
        }
    }
    Ok(Warmed {
        ids,
        route_len,
        latest,
        gens,
        rng,
        warm,
    })
}

/// Loads `KEYS` records for each user straight into its store (as the thesis's store loads
/// its file) and remembers them as version 1.
fn load(
    net: &mut Net,
    users: &[u16],
    keys: u64,
    latest: &mut HashMap<(u16, u64), u32>,
) -> anyhow::Result<()> {
    for &t in users {
        for k in 0..keys {
            net.load(t, Key::from_id(k), &value_of(t, k, 1))?;
            latest.insert((t, k), 1);
        }
    }
    Ok(())
}

fn point(
    x: &str,
    method: &str,
    samples: Vec<f64>,
    share: Vec<f64>,
    extra: serde_json::Value,
) -> Point {
    let (mean, ci95) = mean_ci95(&samples);
    Point {
        x: x.into(),
        method: method.into(),
        samples,
        mean,
        ci95,
        switch_share: share,
        extra,
    }
}

fn thesis(x: &str, method: &str, v: f64) -> Point {
    point(x, method, vec![v], vec![], serde_json::Value::Null)
}

fn cmp(what: &str, paper: &str, paper_value: Option<f64>, ours: f64) -> Compare {
    Compare {
        what: what.into(),
        paper: paper.into(),
        paper_value,
        ours,
        ratio: paper_value.filter(|p| *p != 0.0).map(|p| ours / p),
    }
}

/// Modelled throughput of one user from its counted store share.
fn modelled(offered: f64, c: &Counts) -> f64 {
    let store = c.store as f64 / c.reads.max(1) as f64;
    if store == 0.0 {
        offered
    } else {
        offered.min(STORE_QPS / store)
    }
}

/// The control plane's account of a run: every hot report made is delivered to the controller
/// (taken, or dropped because its tenant had left while it was in flight) or lost.
struct Ctl {
    made: u64,
    delivered: u64,
    tenant_gone: u64,
    retries: (u64, u64, u64),
    injected: u64,
    gave_up: u64,
    settled: bool,
}

impl Ctl {
    fn lost(&self) -> u64 {
        self.made.saturating_sub(self.delivered)
    }
}

fn settle(net: &mut Net) -> anyhow::Result<Ctl> {
    let settled = net.settle(Duration::from_secs(120))?;
    let s = net.stats();
    Ok(Ctl {
        made: s.reports_made,
        delivered: s.reports_delivered,
        tenant_gone: s.reports_tenant_gone,
        retries: net.retries(),
        injected: net.injected_drops(),
        gave_up: net.gave_up(),
        settled,
    })
}

/// One run: a fresh network, `users` users with `pages` pages each under `policy`, a warm-up
/// half and a measured half of `ops` requests.
#[allow(clippy::too_many_arguments)]
fn run_once(
    s: &Sizes,
    topology: Topology,
    switches: usize,
    users: usize,
    pages: u32,
    policy: Policy,
    d: Dist,
    seed: u64,
) -> anyhow::Result<(Vec<Counts>, Ctl, Vec<usize>)> {
    let mut bed = Bed::new(topology, switches, 64, users.max(1), s.loss)?;
    let net = bed.net();
    let Warmed {
        ids,
        route_len,
        mut latest,
        mut gens,
        mut rng,
        warm,
    } = warm_up(net, s, users, pages, policy, d, seed)?;
    let mut counts = vec![Counts::default(); users];
    drive(
        net,
        &ids,
        &mut gens,
        s.ops / 2,
        0.0,
        &mut rng,
        &mut latest,
        &mut counts,
        route_len,
    )?;
    let ctl = settle(net)?;
    let wrong: u64 = warm.iter().chain(&counts).map(|c| c.wrong).sum();
    if wrong > 0 {
        bail!("{wrong} reads returned a value that was not the tenant's latest");
    }
    let pages_at = net.pages_of(ids[0]);
    Ok((counts, ctl, pages_at))
}

fn control_json(ctls: &[Ctl]) -> serde_json::Value {
    let made: u64 = ctls.iter().map(|c| c.made).sum();
    let delivered: u64 = ctls.iter().map(|c| c.delivered).sum();
    serde_json::json!({
        "reports_made": made,
        "reports_delivered": delivered,
        "reports_dropped_tenant_gone": ctls.iter().map(|c| c.tenant_gone).sum::<u64>(),
        "reports_lost": ctls.iter().map(Ctl::lost).sum::<u64>(),
        "messages_given_up": ctls.iter().map(|c| c.gave_up).sum::<u64>(),
        "retries_reports": ctls.iter().map(|c| c.retries.0).sum::<u64>(),
        "retries_notices": ctls.iter().map(|c| c.retries.1).sum::<u64>(),
        "retries_control": ctls.iter().map(|c| c.retries.2).sum::<u64>(),
        "injected_drops": ctls.iter().map(|c| c.injected).sum::<u64>(),
        "all_links_settled": ctls.iter().all(|c| c.settled),
    })
}

fn users_exp(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let mut points = Vec::new();
    let mut ctls = Vec::new();
    let mut compare = Vec::new();
    for d in DISTS {
        for users in 1..=3usize {
            let (counts, ctl, _) =
                run_once(s, Topology::Star, 3, users, 25, Policy::NearClient, d, 7)?;
            let offered = OFFERED / users as f64;
            let tput: f64 = counts.iter().map(|c| modelled(offered, c)).sum();
            let reads: u64 = counts.iter().map(|c| c.reads).sum();
            let store: u64 = counts.iter().map(|c| c.store).sum();
            let share = 1.0 - store as f64 / reads.max(1) as f64;
            let delivered = ctl.delivered as f64 / ctl.made.max(1) as f64;
            if matches!(d, Dist::Uniform) && users == 1 {
                compare.push(cmp(
                    "uniform, 1 user: share of hot reports processed",
                    "≈ 40 % (≈ 60 % lost in the burst)",
                    Some(0.4),
                    delivered,
                ));
            }
            points.push(point(
                &d.name(),
                &format!("{users} user{}", if users > 1 { "s" } else { "" }),
                vec![tput],
                vec![share],
                serde_json::json!({"reports_made": ctl.made, "reports_delivered": ctl.delivered,
                                   "switch_share_per_user": counts.iter().map(|c| 1.0 - c.store as f64 / c.reads.max(1) as f64).collect::<Vec<_>>()}),
            ));
            ctls.push(ctl);
        }
    }
    // The thesis's Fig. (user scalability): read off its text (kv-caching.md §5.5).
    let thesis_pts = vec![
        thesis("zipf-0.9", "1 user", 15_000.0),
        thesis("zipf-0.95", "1 user", 15_000.0),
        thesis("uniform", "1 user", 10_000.0),
    ];
    compare.push(cmp(
        "zipf-0.9, 1 user: throughput plateau (kQPS, start-up)",
        "≈ 15 kQPS before rising to 30",
        Some(15_000.0),
        points[0].mean,
    ));
    compare.push(cmp(
        "uniform, 1 user: throughput (QPS)",
        "≈ 3× lower than Zipf (≈ 10 kQPS)",
        Some(10_000.0),
        points[9].mean,
    ));
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-users".into(),
        title: "user scalability (star, 1–3 users, 25 pages each)".into(),
        figure: "thesis §6, Exp 1".into(),
        x_label: "workload".into(),
        metric: "modelled throughput (QPS)".into(),
        method_note: "star of 3 tern switches (core + 2 leaves), each user's client and store on different leaves; 25 pages per user near-client; 30 kQPS offered split among users; throughput modelled from the counted store share of the measured half (store host 2,400 QPS); reports through a control link with 20 % loss injected each way".into(),
        scale: scale_json(s, a),
        points,
        thesis: thesis_pts,
        compare,
        control: control_json(&ctls),
    })
}

fn policies_exp(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let mut points = Vec::new();
    let mut ctls = Vec::new();
    for d in DISTS {
        for (name, p) in [
            ("near-client", Policy::NearClient),
            ("near-store", Policy::NearStore),
            ("even-split", Policy::EvenSplit),
            ("least-loaded", Policy::LeastLoaded),
        ] {
            let (counts, ctl, pages) = run_once(s, Topology::Line, 2, 1, 20, p, d, 11)?;
            let c = &counts[0];
            points.push(point(
                &d.name(),
                name,
                vec![modelled(OFFERED, c)],
                vec![1.0 - c.store as f64 / c.reads.max(1) as f64],
                serde_json::json!({"answered_at_switch": c.at, "store": c.store, "pages_per_switch": pages,
                                   "mean_rtt_ms": c.rtt.iter().sum::<f64>() / c.rtt.len().max(1) as f64}),
            ));
            ctls.push(ctl);
        }
    }
    let u = |m: &str| {
        points
            .iter()
            .find(|p| p.x == "uniform" && p.method == m)
            .map_or(0.0, |p| p.mean)
    };
    let compare = vec![
        cmp(
            "uniform: even-split minus near-client (QPS)",
            "≈ +2–3 kQPS",
            Some(2_500.0),
            u("even-split") - u("near-client"),
        ),
        cmp(
            "uniform: even-split below offered (QPS)",
            "> 10 kQPS below 30 kQPS (lost reports)",
            Some(10_000.0),
            OFFERED - u("even-split"),
        ),
    ];
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-policies".into(),
        title: "allocation policies (line of 2, 1 user, 20 pages)".into(),
        figure: "thesis §6, Exp 2".into(),
        x_label: "workload".into(),
        metric: "modelled throughput (QPS)".into(),
        method_note: "line of 2 tern switches (client side, store side), 1 user with 20 pages under each policy (least-loaded: tern's fourth policy, pages moved from the switch answering most reads to an idle one after each quarter of the warm-up); 30 kQPS offered; throughput modelled from the counted store share (store host 2,400 QPS); 20 % loss injected on every control link. With no report lost, the policies change which hop answers (mean modelled RTT in the JSON), not the store share: the thesis's differences came from lost reports".into(),
        scale: scale_json(s, a),
        points,
        thesis: vec![
            thesis("uniform", "even-split", 20_000.0),
            thesis("uniform", "near-client", 17_500.0),
        ],
        compare,
        control: control_json(&ctls),
    })
}

fn distribution_exp(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let mut points = Vec::new();
    let mut ctls = Vec::new();
    let mut compare = Vec::new();
    for d in DISTS {
        let (counts, ctl, pages) = run_once(s, Topology::Line, 3, 1, 30, Policy::EvenSplit, d, 13)?;
        let c = &counts[0];
        let reads = c.reads.max(1) as f64;
        let mut rtt = c.rtt.clone();
        rtt.sort_by(f64::total_cmp);
        // CDF at each step.
        let steps: Vec<(f64, f64)> = (1..=4)
            .map(|h| {
                let x = HOP_MS * h as f64;
                let n = rtt.iter().filter(|&&r| r <= x + 1e-9).count();
                (x, n as f64 / rtt.len().max(1) as f64)
            })
            .collect();
        for (h, n) in c.at.iter().enumerate() {
            points.push(point(
                &d.name(),
                &format!("switch {}", h + 1),
                vec![*n as f64 / reads],
                vec![],
                serde_json::Value::Null,
            ));
        }
        points.push(point(
            &d.name(),
            "store",
            vec![c.store as f64 / reads],
            vec![],
            serde_json::json!({"rtt_cdf_ms": steps, "pages_per_switch": pages}),
        ));
        let s1 = c.at.first().copied().unwrap_or(0) as f64 / reads;
        match d {
            Dist::Zipf(0.99) => compare.push(cmp(
                "zipf-0.99: share of reads answered at switch 1",
                "≈ 70 %",
                Some(0.70),
                s1,
            )),
            Dist::Uniform => compare.push(cmp(
                "uniform: share of reads answered at switch 1",
                "≈ 33 %",
                Some(0.33),
                s1,
            )),
            _ => {}
        }
        ctls.push(ctl);
    }
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-distribution".into(),
        title: "cache distribution over a line of 3 (1 user, 30 pages, even-split)".into(),
        figure: "thesis §6, Exp 3 (reads per switch, RTT CDF)".into(),
        x_label: "workload".into(),
        metric: "share of reads answered".into(),
        method_note: "line of 3 tern switches (client at switch 1, store behind switch 3), 1 user, 30 pages even-split; shares counted over the measured half; RTT modelled at 0.4 ms per switch reached (the thesis's CDF step), the store one step beyond switch 3".into(),
        scale: scale_json(s, a),
        points,
        thesis: vec![
            thesis("zipf-0.99", "switch 1", 0.70),
            thesis("uniform", "switch 1", 0.33),
        ],
        compare,
        control: control_json(&ctls),
    })
}

/// A uniform burst: `tenants` tenants, every key of each crossing the threshold at once, with
/// 20 % loss on every control link; every report made must be delivered.
fn burst_exp(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let tenants: u16 = 64;
    let keys: u64 = if s.quick { 16 } else { 128 };
    let mut points = Vec::new();
    let mut ctls = Vec::new();
    for loss in [0u32, s.loss, 2 * s.loss] {
        let mut bed = Bed::new(Topology::Line, 3, 64, 4, loss)?;
        let net = bed.net();
        let ids: Vec<u16> = (0..tenants).map(|i| 300 + i).collect();
        for &t in &ids {
            net.add_tenant(t, 0xb000_0000 | t as u32, s.threshold, 2, Policy::EvenSplit)?;
        }
        let mut latest = HashMap::new();
        load(net, &ids, keys, &mut latest)?;
        // The burst: every key of every tenant read `threshold` times back to back, without
        // giving the controller a turn, so all reports are in flight together.
        let mut made_reads = 0u64;
        for round in 0..s.threshold {
            for k in 0..keys {
                for &t in &ids {
                    let (_, v) = net.read(t, Key::from_id(k))?;
                    if v != Some(value_of(t, k, 1)) {
                        bail!("tenant {t} key {k}: wrong value in round {round}");
                    }
                    made_reads += 1;
                }
            }
        }
        let ctl = settle(net)?;
        // After the burst: every key is cached (2 pages hold 256 items ≥ keys).
        let mut hits = 0u64;
        for k in 0..keys {
            for &t in &ids {
                if matches!(net.read(t, Key::from_id(k))?.0, Answer::Switch(_)) {
                    hits += 1;
                }
            }
        }
        let total = keys * tenants as u64;
        points.push(point(
            &format!("{} % loss", loss / 10_000),
            "tern",
            vec![ctl.lost() as f64],
            vec![hits as f64 / total as f64],
            serde_json::json!({"reports_made": ctl.made, "reports_delivered": ctl.delivered,
                               "admitted": net.stats().admitted, "burst_reads": made_reads,
                               "retries": ctl.retries, "injected_drops": ctl.injected,
                               "cached_after": hits, "items": total}),
        ));
        ctls.push(ctl);
    }
    let lost: f64 = points.iter().map(|p| p.mean).sum();
    let made: u64 = ctls.iter().map(|c| c.made).sum();
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-burst".into(),
        title: "uniform burst of hot reports: 64 tenants, loss injected".into(),
        figure: "thesis §6, Exp 1 uniform (≈ 60 % of reports lost)".into(),
        x_label: "loss injected on every control link".into(),
        metric: "hot reports lost".into(),
        method_note: format!("line of 3 tern switches, {tenants} tenants × {keys} keys, threshold {}; every key read threshold times back to back (all reports in flight at once), then the controller drains; then one more read of every item counts the switch answers", s.threshold),
        scale: scale_json(s, a),
        points,
        thesis: vec![thesis("uniform", "thesis", 0.6)],
        compare: vec![cmp(
            "share of hot reports lost",
            "≈ 60 %",
            Some(0.6),
            lost / made.max(1) as f64,
        )],
        control: control_json(&ctls),
    })
}

/// ≥ 64 tenants at once, joining and leaving during the run, reads and writes, every read
/// checked against the tenant's latest write.
fn tenants_exp(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let keys: u64 = if s.quick { 16 } else { 64 };
    let start: u16 = 64;
    let mut bed = Bed::new(Topology::Star, 4, 64, 4, s.loss)?;
    let net = bed.net();
    let mut live: Vec<u16> = (0..start).map(|i| 1000 + i).collect();
    let mut next_id = 1000 + start;
    let mut latest = HashMap::new();
    for &t in &live {
        net.add_tenant(t, 0xc000_0000 | t as u32, s.threshold, 2, Policy::EvenSplit)?;
    }
    load(net, &live, keys, &mut latest)?;
    let mut rng = Rng::new(99);
    let rounds = 8u64;
    // Enough requests per round for every tenant's hot keys to cross its threshold.
    let per_round = (s.ops / rounds).max(16 * start as u64);
    let mut points = Vec::new();
    let mut peak = live.len();
    let mut wrong = 0;
    let mut joined = 0;
    let mut left = 0;
    for r in 0..rounds {
        let mut gens: Vec<Gen> = live
            .iter()
            .map(|&t| Gen::new(Dist::Zipf(0.99), keys, t as u64 ^ r))
            .collect();
        let mut counts = vec![Counts::default(); live.len()];
        drive(
            net,
            &live,
            &mut gens,
            per_round,
            0.2,
            &mut rng,
            &mut latest,
            &mut counts,
            3,
        )?;
        let reads: u64 = counts.iter().map(|c| c.reads).sum();
        let store: u64 = counts.iter().map(|c| c.store).sum();
        wrong += counts.iter().map(|c| c.wrong).sum::<u64>();
        points.push(point(
            &format!("round {}", r + 1),
            "tern",
            vec![live.len() as f64],
            vec![1.0 - store as f64 / reads.max(1) as f64],
            serde_json::json!({"reads": reads, "writes": counts.iter().map(|c| c.writes).sum::<u64>(),
                               "wrong_values": counts.iter().map(|c| c.wrong).sum::<u64>()}),
        ));
        // A new detection period, then four leave (their items and pages go) and six join (the
        // free pages are reused).
        net.new_period()?;
        for _ in 0..4 {
            let i = rng.below(live.len() as u64) as usize;
            let t = live.swap_remove(i);
            net.remove_tenant(t)?;
            latest.retain(|(tt, _), _| *tt != t);
            left += 1;
        }
        for _ in 0..6 {
            let t = next_id;
            next_id += 1;
            net.add_tenant(t, 0xc000_0000 | t as u32, s.threshold, 2, Policy::EvenSplit)?;
            load(net, &[t], keys, &mut latest)?;
            live.push(t);
            joined += 1;
        }
        peak = peak.max(live.len());
    }
    let ctl = settle(net)?;
    if wrong > 0 {
        bail!("{wrong} reads returned a value that was not the tenant's latest write");
    }
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-tenants".into(),
        title: format!("{start}–{peak} tenants joining and leaving, 20 % writes"),
        figure: "beyond the thesis (3 users at most, allocation only at start-up, read-only)".into(),
        x_label: "round".into(),
        metric: "tenants present".into(),
        method_note: format!("star of 4 tern switches (core + 3 leaves); {start} tenants of 2 pages, then every round 4 leave and 6 join ({joined} joined, {left} left in all); Zipf 0.99 over {keys} keys per tenant, 20 % writes (write-through: the switch invalidates, the store tells the controller, the controller re-validates); every read checked against the tenant's latest write: {wrong} wrong"),
        scale: scale_json(s, a),
        points,
        thesis: vec![thesis("thesis", "thesis", 3.0)],
        compare: vec![cmp("most tenants at once", "3 users", Some(3.0), peak as f64)],
        control: control_json(&[ctl]),
    })
}

/// The closed-loop measured runs' size: seconds measured per point, client threads in all
/// (split equally among the users, as the thesis split its offered load), one-way delay per
/// link traversal.
struct Timed {
    secs: f64,
    clients: usize,
    hop: Duration,
    dists: Vec<Dist>,
}

fn timed(s: &Sizes) -> Timed {
    if s.quick {
        Timed {
            secs: 1.0,
            clients: 6,
            hop: Duration::from_micros(200),
            dists: vec![Dist::Zipf(0.99), Dist::Uniform],
        }
    } else {
        Timed {
            secs: 10.0,
            clients: 24,
            hop: Duration::from_micros(200),
            dists: DISTS.to_vec(),
        }
    }
}

/// What a measured run saw.
struct Measured {
    /// Reads per second over the measured window (all users).
    ops_per_s: f64,
    /// Reads per user.
    per_user: Vec<u64>,
    /// Every read's round-trip time (ms), sorted.
    rtt: Vec<f64>,
    /// Reads answered per route position, and by the store.
    at: Vec<u64>,
    store: u64,
    secs: f64,
    /// Tenants that joined and left during the measured window (with `churn`).
    joined: u64,
    left: u64,
}

impl Measured {
    fn pct(&self, q: f64) -> f64 {
        if self.rtt.is_empty() {
            return 0.0;
        }
        let i = ((q * self.rtt.len() as f64).ceil() as usize).clamp(1, self.rtt.len()) - 1;
        self.rtt[i]
    }
    /// (RTT in ms, share of reads at or below it) at every 5 %, as madinc-distribution's.
    fn cdf(&self) -> Vec<(f64, f64)> {
        (1..=20)
            .map(|i| (self.pct(i as f64 / 20.0), i as f64 / 20.0))
            .collect()
    }
    fn json(&self) -> serde_json::Value {
        serde_json::json!({"reads_per_s": self.ops_per_s, "reads_per_user": self.per_user,
            "seconds": self.secs, "answered_at_switch": self.at, "store": self.store,
            "rtt_ms_p50": self.pct(0.5), "rtt_ms_p90": self.pct(0.9), "rtt_ms_p99": self.pct(0.99),
            "rtt_cdf_ms": self.cdf(), "tenants_joined": self.joined, "tenants_left": self.left})
    }
}

/// One measured run: a fresh network, `users` users with `pages` pages each under `policy`,
/// an unmeasured warm-up of `ops / 2` requests (reports admitted as they come), then
/// `clients / users` closed-loop client threads per user reading for `secs` seconds with the link
/// delay on while the controller keeps handling reports; every read's value is checked. With
/// `churn`, other tenants join (2 pages, a record loaded and read back) and leave every 50 ms
/// during the window while the measured clients read.
#[allow(clippy::too_many_arguments)]
fn measured_once(
    s: &Sizes,
    t: &Timed,
    churn: bool,
    topology: Topology,
    switches: usize,
    users: usize,
    pages: u32,
    policy: Policy,
    d: Dist,
    seed: u64,
) -> anyhow::Result<(Measured, Ctl)> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut bed = Bed::start(topology, switches, 64, users.max(1), s.loss, true)?;
    let net = bed.net();
    let Warmed {
        ids,
        route_len,
        warm,
        ..
    } = warm_up(net, s, users, pages, policy, d, seed)?;
    net.settle(Duration::from_secs(60))?;
    net.set_hop_delay(t.hop);
    let mut clients = Vec::new();
    for (ui, &u) in ids.iter().enumerate() {
        for c in 0..(t.clients / users.max(1)).max(1) {
            clients.push((ui, u, c, net.client(u)?));
        }
    }
    let stop = AtomicBool::new(false);
    struct Seen {
        user: usize,
        reads: u64,
        rtt: Vec<f64>,
        at: Vec<u64>,
        store: u64,
        wrong: u64,
    }
    let (mut joined, mut left) = (0u64, 0u64);
    let start = std::time::Instant::now();
    let (seen, secs) = std::thread::scope(|sc| -> anyhow::Result<(Vec<Seen>, f64)> {
        let stop = &stop;
        let handles: Vec<_> = clients
            .into_iter()
            .map(|(ui, u, c, cl)| {
                sc.spawn(move || -> anyhow::Result<Seen> {
                    let mut g = Gen::new(d, KEYS, seed ^ ((u as u64) << 8) ^ c as u64);
                    let mut out = Seen {
                        user: ui,
                        reads: 0,
                        rtt: Vec::new(),
                        at: vec![0; route_len],
                        store: 0,
                        wrong: 0,
                    };
                    while !stop.load(Ordering::Relaxed) {
                        let k = g.next();
                        let t0 = std::time::Instant::now();
                        let (a, v) = cl.read(Key::from_id(k))?;
                        out.rtt.push(t0.elapsed().as_secs_f64() * 1e3);
                        out.reads += 1;
                        if v != Some(value_of(u, k, 1)) {
                            out.wrong += 1;
                        }
                        match a {
                            Answer::Switch(h) => out.at[h] += 1,
                            Answer::Store => out.store += 1,
                            Answer::Dropped => out.wrong += 1,
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        let mut pumped = Ok(());
        let mut next_churn = start + Duration::from_millis(50);
        let mut live = std::collections::VecDeque::new();
        let mut churn_id = 1000u16;
        while start.elapsed().as_secs_f64() < t.secs {
            let mut turn = || -> anyhow::Result<()> {
                net.pump(Duration::from_millis(1))?;
                if churn && std::time::Instant::now() >= next_churn {
                    next_churn += Duration::from_millis(50);
                    let id = churn_id;
                    churn_id += 1;
                    net.add_tenant(
                        id,
                        0x5100_0000 | id as u32,
                        s.threshold,
                        2,
                        Policy::EvenSplit,
                    )?;
                    net.load(id, Key::from_id(1), &value_of(id, 1, 1))?;
                    let (_, v) = net.read(id, Key::from_id(1))?;
                    if v != Some(value_of(id, 1, 1)) {
                        bail!("joining tenant {id} read {v:?}, not its own record");
                    }
                    live.push_back(id);
                    joined += 1;
                    if live.len() > 1 {
                        if let Some(old) = live.pop_front() {
                            net.remove_tenant(old)?;
                            left += 1;
                        }
                    }
                }
                Ok(())
            };
            if let Err(e) = turn() {
                pumped = Err(e);
                break;
            }
        }
        stop.store(true, Ordering::Relaxed);
        let secs = start.elapsed().as_secs_f64();
        let mut seen = Vec::new();
        for h in handles {
            seen.push(
                h.join()
                    .map_err(|_| anyhow::anyhow!("a client thread panicked"))??,
            );
        }
        pumped?;
        Ok((seen, secs))
    })?;
    net.set_hop_delay(Duration::ZERO);
    let ctl = settle(net)?;
    let wrong: u64 =
        seen.iter().map(|x| x.wrong).sum::<u64>() + warm.iter().map(|c| c.wrong).sum::<u64>();
    if wrong > 0 {
        bail!("{wrong} measured reads returned a wrong value or were dropped");
    }
    let mut m = Measured {
        ops_per_s: 0.0,
        per_user: vec![0; users],
        rtt: Vec::new(),
        at: vec![0; route_len],
        store: 0,
        secs,
        joined,
        left,
    };
    for x in seen {
        m.per_user[x.user] += x.reads;
        m.rtt.extend(x.rtt);
        for (a, b) in m.at.iter_mut().zip(&x.at) {
            *a += b;
        }
        m.store += x.store;
    }
    m.ops_per_s = m.per_user.iter().sum::<u64>() as f64 / secs;
    m.rtt.sort_by(f64::total_cmp);
    Ok((m, ctl))
}

fn timed_scale(s: &Sizes, t: &Timed) -> serde_json::Value {
    serde_json::json!({"quick": s.quick, "warmup_ops": s.ops / 2, "keys": KEYS,
        "hot_threshold": s.threshold, "loss_per_million": s.loss, "seconds_per_point": t.secs,
        "clients_in_all": t.clients, "link_delay_ms": t.hop.as_secs_f64() * 1e3})
}

fn users_measured(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let _ = a;
    let t = timed(s);
    let mut points = Vec::new();
    let mut ctls = Vec::new();
    for &d in &t.dists {
        for users in 1..=3usize {
            let (m, ctl) = measured_once(
                s,
                &t,
                false,
                Topology::Star,
                3,
                users,
                25,
                Policy::NearClient,
                d,
                7,
            )?;
            let share = 1.0 - m.store as f64 / m.rtt.len().max(1) as f64;
            points.push(point(
                &d.name(),
                &format!("{users} user{}", if users > 1 { "s" } else { "" }),
                vec![m.ops_per_s],
                vec![share],
                m.json(),
            ));
            ctls.push(ctl);
        }
    }
    let get = |x: &str, u: &str| {
        points
            .iter()
            .find(|p| p.x == x && p.method == u)
            .map_or(0.0, |p| p.mean)
    };
    let last = t.dists.last().map_or("uniform".into(), |d| d.name());
    let compare = vec![
        cmp(
            "zipf-0.99: 3 users / 1 user, measured reads/s",
            "slightly below 1 (30 kQPS offered split among users; BMv2 the limit)",
            Some(1.0),
            get("zipf-0.99", "3 users") / get("zipf-0.99", "1 user").max(1e-9),
        ),
        cmp(
            "uniform / zipf-0.99, 1 user, measured reads/s",
            "≈ 1/3 (lost reports under the uniform burst)",
            Some(1.0 / 3.0),
            get(&last, "1 user") / get("zipf-0.99", "1 user").max(1e-9),
        ),
    ];
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-users-measured".into(),
        title: "user scalability, measured (star, 1–3 users, 25 pages each)".into(),
        figure: "thesis §6, Exp 1".into(),
        x_label: "workload".into(),
        metric: "measured reads/s (closed loop)".into(),
        method_note: format!("star of 3 tern switches (core + 2 leaves), each a `tern kv madinc-switch` process (madinc.p4 and its switch agent) reached over loopback UDP, each user's client and store on different leaves, 25 pages per user near-client; after an unmeasured warm-up, {} closed-loop client threads in all (split equally among the users, as the thesis split its 30 kQPS) read for {} s with a {} ms one-way delay on every link traversal (the thesis's 0.4 ms RTT step per switch hop) while the controller keeps admitting reported items; ops/s and every read's RTT measured by the clients' clocks; on the shared machine, so the absolute rate is this machine's, not a switch's", t.clients, t.secs, t.hop.as_secs_f64() * 1e3),
        scale: timed_scale(s, &t),
        points,
        thesis: vec![
            thesis("zipf-0.9", "1 user", 30_000.0),
            thesis("uniform", "1 user", 10_000.0),
        ],
        compare,
        control: control_json(&ctls),
    })
}

fn policies_measured(s: &Sizes, a: &ExperimentArgs) -> anyhow::Result<Report> {
    let _ = a;
    let t = timed(s);
    let mut points = Vec::new();
    let mut ctls = Vec::new();
    for &d in &t.dists {
        for (name, p) in [
            ("near-client", Policy::NearClient),
            ("near-store", Policy::NearStore),
            ("even-split", Policy::EvenSplit),
            ("least-loaded", Policy::LeastLoaded),
        ] {
            let (m, ctl) = measured_once(s, &t, true, Topology::Line, 2, 1, 20, p, d, 11)?;
            let share = 1.0 - m.store as f64 / m.rtt.len().max(1) as f64;
            points.push(point(
                &d.name(),
                name,
                vec![m.ops_per_s],
                vec![share],
                m.json(),
            ));
            ctls.push(ctl);
        }
    }
    let p50 = |x: &str, m: &str| {
        points
            .iter()
            .find(|p| p.x == x && p.method == m)
            .and_then(|p| p.extra["rtt_ms_p50"].as_f64())
            .unwrap_or(0.0)
    };
    let compare = vec![
        cmp(
            "zipf-0.99, near-client: median RTT (ms)",
            "≈ 0.4 ms (answered at the first switch)",
            Some(0.4),
            p50("zipf-0.99", "near-client"),
        ),
        cmp(
            "zipf-0.99, near-store: median RTT (ms)",
            "≈ 0.8 ms (answered at the second switch)",
            Some(0.8),
            p50("zipf-0.99", "near-store"),
        ),
    ];
    Ok(Report {
        stamp: Stamp::now(),
        experiment: "madinc-policies-measured".into(),
        title: "allocation policies, measured (line of 2, 1 user, 20 pages)".into(),
        figure: "thesis §6, Exp 2 (RTT steps of Exp 3)".into(),
        x_label: "workload".into(),
        metric: "measured reads/s (closed loop)".into(),
        method_note: format!("line of 2 tern switches (client side, store side), each a `tern kv madinc-switch` process reached over loopback UDP, 1 user with 20 pages under each policy; after an unmeasured warm-up, {} closed-loop client threads read for {} s with a {} ms one-way delay on every link traversal while other tenants join (2 pages each, their own record read back) and leave every 50 ms; reads/s and RTT measured (p50/p90/p99 and a 20-point CDF per point in the JSON); on the shared machine", t.clients, t.secs, t.hop.as_secs_f64() * 1e3),
        scale: timed_scale(s, &t),
        points,
        thesis: vec![
            thesis("uniform", "even-split", 20_000.0),
            thesis("uniform", "near-client", 17_500.0),
        ],
        compare,
        control: control_json(&ctls),
    })
}

fn scale_json(s: &Sizes, a: &ExperimentArgs) -> serde_json::Value {
    let _ = a;
    serde_json::json!({"quick": s.quick, "ops": s.ops, "keys": KEYS, "hot_threshold": s.threshold,
                       "loss_per_million": s.loss, "offered_qps": OFFERED, "store_qps": STORE_QPS,
                       "hop_ms": HOP_MS})
}

fn markdown(r: &Report) -> String {
    let mut m = format!("# {} — {} ({})\n\n", r.experiment, r.title, r.figure);
    m += &format!(
        "* Date: {}; machine: {}\n* Command: `{}`\n* Method: {}\n* Scale: `{}`\n* Control plane: `{}`\n\n",
        r.stamp.date, r.stamp.machine, r.stamp.command, r.method_note, r.scale, r.control
    );
    let c = &r.control;
    m += &format!(
        "## Hot reports\n\n| made | delivered | of which dropped: tenant gone | lost | retries (reports) | injected drops | given up | settled |\n|---|---|---|---|---|---|---|---|\n| {} | {} | {} | {} | {} | {} | {} | {} |\n\n",
        c["reports_made"],
        c["reports_delivered"],
        c["reports_dropped_tenant_gone"],
        c["reports_lost"],
        c["retries_reports"],
        c["injected_drops"],
        c["messages_given_up"],
        c["all_links_settled"]
    );
    m += "## Thesis beside tern\n\n| what | thesis | tern | tern / thesis |\n|---|---|---|---|\n";
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
        "\n## Points\n\n| {} | series | {} | switch answered |\n|---|---|---|---|\n",
        r.x_label, r.metric
    );
    for p in &r.points {
        let share = if p.switch_share.is_empty() {
            "–".to_string()
        } else {
            format!("{:.1} %", 100.0 * mean_ci95(&p.switch_share).0)
        };
        m += &format!("| {} | {} | {:.3} | {} |\n", p.x, p.method, p.mean, share);
    }
    m
}

const ALL: [&str; 5] = [
    "madinc-users",
    "madinc-policies",
    "madinc-distribution",
    "madinc-burst",
    "madinc-tenants",
];

/// Timed (wall-clock) experiments: not part of madinc-all (a quiet machine is needed).
const MEASURED: [&str; 2] = ["madinc-users-measured", "madinc-policies-measured"];

/// `tern kv experiment madinc-…`.
pub fn run(a: &ExperimentArgs) -> anyhow::Result<()> {
    let names: Vec<&str> = if a.suite == "madinc-all" {
        ALL.to_vec()
    } else if a.suite == "madinc-measured" {
        MEASURED.to_vec()
    } else if ALL.contains(&a.suite.as_str()) || MEASURED.contains(&a.suite.as_str()) {
        vec![a.suite.as_str()]
    } else {
        bail!(
            "unknown MADINC experiment {:?} (madinc-users, madinc-policies, madinc-distribution, madinc-burst, madinc-tenants, madinc-all; measured: madinc-users-measured, madinc-policies-measured, madinc-measured)",
            a.suite
        );
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let s = sizes(a);
    for name in names {
        say(&format!("{name}: running"));
        let r = match name {
            "madinc-users" => users_exp(&s, a)?,
            "madinc-policies" => policies_exp(&s, a)?,
            "madinc-distribution" => distribution_exp(&s, a)?,
            "madinc-burst" => burst_exp(&s, a)?,
            "madinc-users-measured" => users_measured(&s, a)?,
            "madinc-policies-measured" => policies_measured(&s, a)?,
            _ => tenants_exp(&s, a)?,
        };
        let json = a.out.join(format!("{name}.json"));
        write_json(&json, &r)?;
        let md = a.out.join(format!("{name}.md"));
        std::fs::write(&md, markdown(&r)).with_context(|| format!("writing {}", md.display()))?;
        say(&format!("{name}: {} and {}", json.display(), md.display()));
        if !a.no_plot {
            plot(&[json.as_path()], &a.out.join(format!("{name}.png")))?;
        }
    }
    Ok(())
}
