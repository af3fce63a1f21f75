//! The behaviour cache's contract under a fuzzer: events decoded from the input (frames,
//! repeats, generated packets, interleaved table changes; `Diff::fuzz`) go to two switches
//! running the same program, one with the cache (small, so evictions happen) and one
//! without; every output, digest and log line and, at the end of each input, all state must
//! agree. The first byte picks the program; the switches persist across inputs (both evolve
//! identically, so their state is part of what is compared).
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;
use tern_dataplane::bcache::diff::Diff;
use tern_dataplane::bcache::{Admission, Config, Eviction};

const PROGRAMS: [&str; 4] = [
    include_str!("../../p4/bench/l2l3_acl_nat.p4"),
    include_str!("../../p4/bench/l3_router.p4"),
    include_str!("../../p4/tutorials/basic_tunnel.p4"),
    include_str!("../../p4/tutorials/mri.p4"),
];

fn harnesses() -> &'static Mutex<Vec<Diff>> {
    static S: std::sync::OnceLock<Mutex<Vec<Diff>>> = std::sync::OnceLock::new();
    S.get_or_init(|| {
        let out = PROGRAMS
            .iter()
            .enumerate()
            .map(|(i, src)| {
                let json = tern_p4::compile_str(src, "fuzz.p4", &Default::default())
                    .expect("compiles")
                    .json;
                let cfg = Config {
                    capacity: 32,
                    admission: if i % 2 == 0 {
                        Admission::Always
                    } else {
                        Admission::CountMin { threshold: 1 }
                    },
                    eviction: if i % 2 == 0 { Eviction::Clock } else { Eviction::Fifo },
                    skip_tables: Vec::new(),
                    stateful: Default::default(),
                    egress: true,
                };
                let mut d = Diff::new(&json, cfg, 7 + i as u64).expect("loads");
                d.setup().expect("setup agrees");
                d
            })
            .collect();
        Mutex::new(out)
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let mut hs = harnesses().lock().unwrap_or_else(|e| e.into_inner());
    let n = hs.len();
    if let Err(e) = hs[pick as usize % n].fuzz(rest) {
        panic!("cache on/off differ: {e}");
    }
});
