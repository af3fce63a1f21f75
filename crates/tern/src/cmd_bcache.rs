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
