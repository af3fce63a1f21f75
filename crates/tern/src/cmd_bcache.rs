//! `tern bcache`: the behaviour cache's analysis (`tern bcache explain PROG`), the
//! `--bcache*` options shared by `tern run` and `tern bench`, and the differential harness
//! over tern's own programs (tutorials, bench programs, `p4/bcache/`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use tern_dataplane::bcache::{self, Config};

/// `--bcache` and its settings (off by default).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct BcacheArgs {
    /// Cache the ingress pipeline's behaviours (B-Cache): per worker, exact replay,
    /// invalidated by every table change. Off by default.
    #[arg(long)]
    pub bcache: bool,
    /// Entries per cache (per worker).
    #[arg(long, value_name = "N", default_value_t = 65_536)]
    pub bcache_size: usize,
    /// Admission: always, cm:THRESHOLD (the paper's count-min detector) or
    /// tinylfu:THRESHOLD[:WINDOW] (count-min halved every WINDOW misses).
    #[arg(long, value_name = "POLICY", default_value = "always")]
    pub bcache_admission: String,
    /// Eviction: clock or fifo.
    #[arg(long, value_name = "POLICY", default_value = "clock")]
    pub bcache_eviction: String,
    /// Do not cache behaviours that apply this table (JSON name; repeatable).
    #[arg(long, value_name = "TABLE")]
    pub bcache_skip_table: Vec<String>,
}

impl BcacheArgs {
    /// The cache configuration, `None` without `--bcache`.
    pub fn config(&self) -> anyhow::Result<Option<Config>> {
        if !self.bcache {
            return Ok(None);
        }
        Ok(Some(Config {
            capacity: self.bcache_size,
            admission: Config::parse_admission(&self.bcache_admission)
                .map_err(|e| anyhow::anyhow!("--bcache-admission: {e}"))?,
            eviction: Config::parse_eviction(&self.bcache_eviction)
                .map_err(|e| anyhow::anyhow!("--bcache-eviction: {e}"))?,
            skip_tables: self.bcache_skip_table.clone(),
            stateful: Default::default(),
            egress: false,
        }))
    }
}

#[derive(clap::Subcommand, Debug)]
pub enum BcacheCmd {
    /// Print, per pipeline, the fields that decide its behaviour (the cache key), what it
    /// writes, the effects a hit replays and what is not cacheable.
    Explain {
        /// A BMv2 JSON or a P4-16 program (compiled by tern).
        #[arg(value_name = "PROG.json|PROG.p4")]
        program: PathBuf,
    },
    /// Print (or write with -o) the table contents of one of the paper's cases
    /// (`p4/bcache/caseN.p4`) as runtime-CLI commands; `tern bench --traffic caseN` sends
    /// the traffic that matches them.
    Gen {
        /// case1, case2, case3 or case4.
        #[arg(value_name = "CASE")]
        case: String,
        /// Write to FILE instead of stdout.
        #[arg(short, long, value_name = "FILE")]
        out: Option<PathBuf>,
    },
    /// Run one of the B-Cache experiments (E1, E2, E3, E5, E6, E7, E9 of
    /// ../shared/reference/bcache.md §6.H): JSON, a Markdown table beside the paper's figure
    /// and a PNG plot in --out.
    Experiment(crate::cmd_bcache_exp::ExperimentArgs),
}

/// Load `path` as BMv2 JSON, or compile it when it is P4-16.
pub(crate) fn load_json(path: &std::path::Path) -> anyhow::Result<String> {
    let name = path.display().to_string();
    if path.extension().is_some_and(|e| e == "p4") {
        let c =
            tern_p4::compile_file(path, &Default::default()).map_err(|d| anyhow::anyhow!("{d}"))?;
        return Ok(c.json);
    }
    std::fs::read_to_string(path).with_context(|| format!("reading {name}"))
}

pub fn run(cmd: BcacheCmd) -> anyhow::Result<ExitCode> {
    match cmd {
        BcacheCmd::Explain { program } => {
            let json = load_json(&program)?;
            let prog = tern_model::load(&json)
                .map_err(|e| anyhow::anyhow!("{}: {e}", program.display()))?;
            print!("{}", bcache::analysis::explain(&prog));
            Ok(ExitCode::SUCCESS)
        }
        BcacheCmd::Gen { case, out } => {
            let n = crate::bcache_cases::case_number(&case).ok_or_else(|| {
                anyhow::anyhow!("case '{case}': give case1, case2, case3 or case4")
            })?;
            let text = crate::bcache_cases::commands(n);
            let mut mix = std::collections::BTreeMap::new();
            for k in 0..10_000 {
                *mix.entry(crate::bcache_cases::flow(k).kind.name())
                    .or_insert(0u32) += 1;
            }
            let mix: Vec<String> = crate::bcache_cases::Kind::ALL
                .iter()
                .map(|k| {
                    format!(
                        "{} {:.1} %",
                        k.name(),
                        mix.get(k.name()).copied().unwrap_or(0) as f64 / 100.0
                    )
                })
                .collect();
            eprintln!(
                "case{n}: {} commands; traffic mix of the first 10,000 flows: {}",
                text.lines().filter(|l| !l.starts_with('#')).count(),
                mix.join(", ")
            );
            match out {
                Some(p) => {
                    std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?
                }
                None => print!("{text}"),
            }
            Ok(ExitCode::SUCCESS)
        }
        BcacheCmd::Experiment(a) => crate::cmd_bcache_exp::run(a),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use tern_dataplane::bcache::diff::Diff;
    use tern_dataplane::bcache::{Admission, Eviction};

    fn p4(rel: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../p4")
            .join(rel)
    }

    fn events() -> u64 {
        std::env::var("TERN_BCACHE_EVENTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000)
    }

    fn programs() -> Vec<PathBuf> {
        let mut out = Vec::new();
        for dir in ["tutorials", "bench", "bcache"] {
            let Ok(rd) = std::fs::read_dir(p4(dir)) else {
                continue;
            };
            let mut v: Vec<PathBuf> = rd
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "p4"))
                .collect();
            v.sort();
            out.extend(v);
        }
        out
    }

    /// The contract on tern's own programs: cached and uncached switches agree on every
    /// packet, digest, log line and on all state, under interleaved table changes.
    #[test]
    fn cached_and_uncached_switches_agree_on_tern_programs() {
        let n = events();
        let mut cacheable = 0;
        for (i, path) in programs().iter().enumerate() {
            let name = path.display().to_string();
            let json = load_json(path).unwrap_or_else(|e| panic!("{name}: {e:#}"));
            let cfg = Config {
                capacity: [4096, 64, 256][i % 3],
                admission: [
                    Admission::Always,
                    Admission::TinyLfu {
                        threshold: 1,
                        window: 1000,
                    },
                    Admission::CountMin { threshold: 0 },
                ][i % 3],
                eviction: [Eviction::Fifo, Eviction::Clock][i % 2],
                skip_tables: Vec::new(),
                stateful: Default::default(),
                egress: false,
            };
            let mut d = Diff::new(&json, cfg, 0xb0c + i as u64).expect("loads");
            let ok = d.on.bcache_plan().is_some_and(|p| p.uncacheable.is_none());
            cacheable += ok as u32;
            let r = d
                .run(if ok { n } else { n / 50 }, 1009)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            println!(
                "{name}: {} events, {} packets, {} outputs, {} control ops; {}",
                r.events,
                r.packets,
                r.outputs,
                r.controls,
                match d.on.bcache_plan().and_then(|p| p.uncacheable.clone()) {
                    None => format!("{}", r.stats),
                    Some(why) => format!("not cached: {why}"),
                }
            );
            assert_eq!(r.stats.insert_refused_unexpected_write, 0, "{name}");
            if ok {
                assert!(r.stats.hits > 0, "{name}: no hits");
            }
        }
        assert!(cacheable >= 8, "only {cacheable} programs cacheable");
    }

    use tern_dataplane::{Switch, SwitchOptions};
    use tern_runtime::{MatchParam, PacketPath, Runtime};

    /// A new entry of an exact table looks at the behaviours that looked up its key only,
    /// not at every behaviour that applied the table (after the table's first insert, which
    /// indexes them).
    #[test]
    fn adding_an_exact_entry_scans_only_the_affected_behaviours() {
        let json = load_json(&p4("bcache/stale_read.p4")).expect("compiles");
        let mut sw = Switch::from_json(
            &json,
            SwitchOptions {
                bcache: Some(Config::default()),
                ..SwitchOptions::default()
            },
        )
        .expect("loads");
        let mut out = Vec::new();
        for v in 0..200u16 {
            let mut b = vec![0u8; 64];
            b[12..14].copy_from_slice(&[0x88, 0xb5]);
            b[14..16].copy_from_slice(&v.to_be_bytes());
            sw.process_packet(1, &b, &mut out);
            out.clear();
        }
        // The table's first insert indexes the behaviours that applied it (one scan).
        let before = sw.bcache_stats().unwrap();
        assert_eq!(before.entries, 200, "{before}");
        sw.mt_add_entry(
            "I.by_tag",
            &[MatchParam::Exact(vec![1, 0])],
            "I.drop",
            &[],
            None,
        )
        .expect("entry");
        let first = sw.bcache_stats().unwrap();
        assert_eq!(
            first.invalidation_scanned - before.invalidation_scanned,
            200
        );
        assert_eq!(
            first.invalidated, before.invalidated,
            "tag 256 was never seen"
        );
        let before = first;
        sw.mt_add_entry(
            "I.by_tag",
            &[MatchParam::Exact(vec![0, 5])],
            "I.drop",
            &[],
            None,
        )
        .expect("entry");
        let after = sw.bcache_stats().unwrap();
        assert_eq!(after.invalidated - before.invalidated, 1, "{after}");
        assert_eq!(
            after.invalidation_scanned - before.invalidation_scanned,
            1,
            "{after}"
        );
        // The dropped tag now drops; another tag still forwards from the cache.
        let mut b = vec![0u8; 64];
        b[12..14].copy_from_slice(&[0x88, 0xb5]);
        b[15] = 5;
        sw.process_packet(1, &b, &mut out);
        assert!(out.is_empty(), "tag 5 dropped");
        b[15] = 6;
        sw.process_packet(1, &b, &mut out);
        assert_eq!(out.len(), 1);
    }

    /// Headers invalid on arrival keep the previous packet's bytes (as in BMv2); the cache
    /// masks them out of its key and refuses the behaviours that read them, so a program
    /// that reads them (`stale_read.p4`: a default action and a table key on a header the
    /// packet may lack) still agrees with the uncached switch, and its pushes are cached.
    #[test]
    fn stale_bytes_of_invalid_headers_are_masked_and_never_read_from_the_cache() {
        let json = load_json(&p4("bcache/stale_read.p4")).expect("compiles");
        let mut d = Diff::new(&json, Config::default(), 0x57a1e).expect("loads");
        let plan = d.on.bcache_plan().expect("cache on").clone();
        assert!(plan.uncacheable.is_none(), "{:?}", plan.uncacheable);
        // Both headers: a runt frame has no ethernet header either.
        assert_eq!(plan.stale.len(), 2, "{:?}", plan.stale);
        let r = d.run(events() / 5, 1009).expect("no difference");
        println!("stale_read: {} events; {}", r.events, r.stats);
        assert!(r.stats.hits > 0, "{}", r.stats);
        assert!(r.stats.insert_refused_stale_read > 0, "{}", r.stats);

        // A pushed tag is zeroed first: the untagged packets of one port are one behaviour
        // whatever the previous packet's tag was.
        let mut sw = Switch::from_json(
            &json,
            SwitchOptions {
                bcache: Some(Config::default()),
                ..SwitchOptions::default()
            },
        )
        .expect("loads");
        sw.mt_add_entry(
            "I.edge",
            &[MatchParam::Exact(vec![0, 2])],
            "I.push_tag",
            &[vec![0, 7]],
            None,
        )
        .expect("entry");
        let frame = |tag: Option<u16>| {
            let mut b = vec![0u8; 64];
            b[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
            match tag {
                Some(v) => {
                    b[12..14].copy_from_slice(&[0x88, 0xb5]);
                    b[14..16].copy_from_slice(&v.to_be_bytes());
                    b[16..18].copy_from_slice(&[0x08, 0x00]);
                }
                None => b[12..14].copy_from_slice(&[0x08, 0x00]),
            }
            b
        };
        let mut out = Vec::new();
        for v in 0..20u16 {
            // A tagged packet on port 1 (tag v) leaves v in the slot; then untagged on 2.
            sw.process_packet(1, &frame(Some(v)), &mut out);
            out.clear();
            sw.process_packet(2, &frame(None), &mut out);
            assert_eq!(out.len(), 1);
            assert_eq!(&out[0].data[12..16], &[0x88, 0xb5, 0, 7]);
            out.clear();
        }
        let st = sw.bcache_stats().unwrap();
        // Port 2 untagged: one behaviour; port 1 tagged: one per tag value.
        assert_eq!(st.inserts, 21, "{st}");
        assert_eq!(st.hits, 19, "{st}");
    }

    /// The L3 router with the cache, routes 10.0.1.0/24 → port 1 and 10.0.2.0/24 → port 2.
    fn router(cfg: Config) -> (Switch, u32, u32) {
        let json = load_json(&p4("bench/l3_router.p4")).expect("compiles");
        let mut sw = Switch::from_json(
            &json,
            SwitchOptions {
                bcache: Some(cfg),
                ..SwitchOptions::default()
            },
        )
        .expect("loads");
        let mut h = [0u32; 2];
        for (i, net) in [1u8, 2].iter().enumerate() {
            let key = [MatchParam::Lpm {
                key: vec![10, 0, *net, 0],
                prefix_len: 24,
            }];
            let data = [vec![0, 0, 0, 0, 0, *net], vec![0, *net]];
            h[i] = sw
                .mt_add_entry("RIngress.ipv4_lpm", &key, "RIngress.set_nhop", &data, None)
                .expect("route");
        }
        (sw, h[0], h[1])
    }

    fn frame(net: u8, host: u8) -> Vec<u8> {
        let mut b = vec![0u8; 60];
        b[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 9]);
        b[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        b[12..14].copy_from_slice(&[0x08, 0x00]);
        b[14] = 0x45;
        b[22] = 64;
        b[23] = 17;
        b[30..34].copy_from_slice(&[10, 0, net, host]);
        b
    }

    fn send(sw: &mut Switch, f: &[u8]) -> Vec<u32> {
        let mut out = Vec::new();
        sw.process_packet(0, f, &mut out);
        out.iter().map(|o| o.port).collect()
    }

    /// Changes invalidate exactly the behaviours that depend on them: a new entry only those
    /// whose lookup it matches, a modified entry only those that hit it, a default change
    /// only those that missed.
    #[test]
    fn invalidation_is_precise() {
        let (mut sw, h1, _) = router(Config::default());
        let (a, b, c) = (frame(1, 5), frame(2, 5), frame(3, 5));
        for f in [&a, &b, &c] {
            send(&mut sw, f);
        }
        let st = sw.bcache_stats().unwrap();
        assert_eq!((st.inserts, st.entries, st.hits), (3, 3, 0));
        assert_eq!(send(&mut sw, &a), vec![1]);
        assert_eq!(send(&mut sw, &c), Vec::<u32>::new());
        assert_eq!(sw.bcache_stats().unwrap().hits, 2);
        // A /32 for a's host: only a's behaviour goes.
        let key = [MatchParam::Lpm {
            key: vec![10, 0, 1, 5],
            prefix_len: 32,
        }];
        sw.mt_add_entry(
            "RIngress.ipv4_lpm",
            &key,
            "RIngress.set_nhop",
            &[vec![0; 6], vec![0, 7]],
            None,
        )
        .unwrap();
        let st = sw.bcache_stats().unwrap();
        assert_eq!((st.invalidated, st.entries), (1, 2));
        assert_eq!(send(&mut sw, &a), vec![7]);
        // Modifying route 1 (no cached behaviour hits it now: a hits the /32) removes
        // nothing.
        sw.mt_modify_entry(
            "RIngress.ipv4_lpm",
            h1,
            "RIngress.set_nhop",
            &[vec![0; 6], vec![0, 3]],
        )
        .unwrap();
        assert_eq!(sw.bcache_stats().unwrap().invalidated, 1);
        // The default changes: c (a miss) goes, a and b stay.
        sw.mt_set_default_action(
            "RIngress.ipv4_lpm",
            "RIngress.set_nhop",
            &[vec![0; 6], vec![0, 4]],
        )
        .unwrap();
        let st = sw.bcache_stats().unwrap();
        assert_eq!(st.invalidated, 2, "{st}");
        assert_eq!(send(&mut sw, &c), vec![4]);
        assert_eq!(send(&mut sw, &b), vec![2]);
        // Program reset: everything.
        sw.reset_state();
        assert_eq!(sw.bcache_stats().unwrap().entries, 0);
    }

    /// Capacity bounds the entries (evictions counted); the count-min detector admits a
    /// behaviour once it has been seen more than `threshold` times.
    #[test]
    fn capacity_and_admission() {
        for ev in [Eviction::Fifo, Eviction::Clock] {
            let (mut sw, _, _) = router(Config {
                capacity: 4,
                admission: Admission::Always,
                eviction: ev,
                skip_tables: Vec::new(),
                stateful: Default::default(),
                egress: false,
            });
            for host in 0..10 {
                send(&mut sw, &frame(1, host));
            }
            let st = sw.bcache_stats().unwrap();
            assert_eq!(
                (st.entries, st.evictions, st.inserts),
                (4, 6, 10),
                "{ev:?}: {st}"
            );
        }
        let (mut sw, _, _) = router(Config {
            capacity: 16,
            admission: Admission::CountMin { threshold: 2 },
            eviction: Eviction::Clock,
            skip_tables: Vec::new(),
            stateful: Default::default(),
            egress: false,
        });
        let a = frame(1, 1);
        for n in 1..=4 {
            send(&mut sw, &a);
            let st = sw.bcache_stats().unwrap();
            assert_eq!(st.inserts, (n >= 3) as u64, "after {n}: {st}");
        }
        assert_eq!(sw.bcache_stats().unwrap().hits, 1);
        // The opt-out: behaviours through the routing table are never stored.
        let (mut sw, _, _) = router(Config {
            skip_tables: vec!["RIngress.ipv4_lpm".into()],
            stateful: Default::default(),
            egress: false,
            ..Config::default()
        });
        for _ in 0..4 {
            assert_eq!(send(&mut sw, &a), vec![1]);
        }
        let st = sw.bcache_stats().unwrap();
        assert_eq!(
            (st.inserts, st.hits, st.insert_refused_opt_out),
            (0, 0, 4),
            "{st}"
        );
    }

    #[test]
    fn explain_names_key_effects_and_guards() {
        let json = load_json(&p4("bench/l3_router.p4")).expect("compiles");
        let prog = tern_model::load(&json).expect("loads");
        let text = bcache::analysis::explain(&prog);
        assert!(text.contains("pipeline ingress"), "{text}");
        assert!(text.contains("cacheable: yes"), "{text}");
        assert!(text.contains("ipv4.dstAddr:32"), "{text}");
        let json = load_json(&p4("tutorials/link_monitor.p4")).expect("compiles");
        let text = bcache::analysis::explain(&tern_model::load(&json).expect("loads"));
        assert!(text.contains("register"), "{text}");
    }

    #[test]
    fn bad_policies_are_refused_with_the_option_name() {
        let a = BcacheArgs {
            bcache: true,
            bcache_admission: "sometimes".into(),
            bcache_eviction: "clock".into(),
            bcache_size: 8,
            bcache_skip_table: Vec::new(),
        };
        let e = a.config().unwrap_err().to_string();
        assert!(
            e.contains("--bcache-admission") && e.contains("sometimes"),
            "{e}"
        );
        let a = BcacheArgs {
            bcache_admission: "cm:x".into(),
            ..a
        };
        assert!(a.config().unwrap_err().to_string().contains("not a number"));
        let a = BcacheArgs {
            bcache_admission: "tinylfu:4".into(),
            bcache_eviction: "lru".into(),
            ..a
        };
        assert!(a
            .config()
            .unwrap_err()
            .to_string()
            .contains("--bcache-eviction"));
    }
}
