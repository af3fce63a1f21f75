//! In-process throughput of simple_router with `R` routes in `ipv4_lpm` (random /16–/32
//! prefixes, 16 next hops) and 4096 pre-built 64-byte frames addressed inside those routes:
//! `cargo run --release -p tern-dataplane --example router_routes -- [routes...]`
//! (default `1 1000 10000`). Prints, per route count, the time to load the routes through
//! `mt_add_entry` and packets/s over about 0.4 s. Uses only the public `Runtime`/`PacketPath`
//! API, so the same file builds against older engines for before/after comparisons.

use std::time::Instant;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, PacketPath, Runtime};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn main() {
    let counts: Vec<usize> = {
        let v: Vec<usize> = std::env::args()
            .skip(1)
            .filter_map(|a| a.parse().ok())
            .collect();
        if v.is_empty() {
            vec![1, 1000, 10_000]
        } else {
            v
        }
    };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../shared/fixtures/bmv2/targets/simple_router/simple_router.json"
    );
    let Ok(json) = std::fs::read_to_string(path) else {
        println!("skipping: {path} not found");
        return;
    };
    // Lift the tables' max_size (256..1024 in the fixture) so large route sets fit.
    let json = ["256", "512", "1024"].iter().fold(json, |j, n| {
        j.replace(&format!("\"max_size\": {n}"), "\"max_size\": 2000000")
    });
    println!("| routes | load (s) | routes/s | packets | forwarded | pps | ns/packet |");
    println!("|---:|---:|---:|---:|---:|---:|---:|");
    for routes in counts {
        let mut sw = match Switch::from_json(&json, SwitchOptions::default()) {
            Ok(s) => s,
            Err(e) => {
                println!("load failed: {e}");
                return;
            }
        };
        let ex = |b: &[u8]| MatchParam::Exact(b.to_vec());
        for t in ["send_frame", "forward", "ipv4_lpm"] {
            sw.mt_set_default_action(t, "_drop", &[]).ok();
        }
        for port in 0..4u8 {
            sw.mt_add_entry(
                "send_frame",
                &[ex(&[0, port])],
                "rewrite_mac",
                &[vec![0, 0xaa, 0xbb, 0, 0, port]],
                None,
            )
            .expect("send_frame entry");
        }
        for nh in 0..16u8 {
            sw.mt_add_entry(
                "forward",
                &[ex(&[10, 0, 0, nh])],
                "set_dmac",
                &[vec![0, 4, 0, 0, 0, nh]],
                None,
            )
            .expect("forward entry");
        }
        let mut rng = Rng(0x1234_5678_9abc_def1);
        let mut dsts = Vec::with_capacity(routes);
        let t0 = Instant::now();
        let mut added = 0;
        while added < routes {
            let r = rng.next();
            let plen = 16 + (r % 17) as u32;
            let addr = ((r >> 32) as u32) & (!0u32).checked_shl(32 - plen).unwrap_or(0);
            let nh = (r >> 8) as u8 % 16;
            let res = sw.mt_add_entry(
                "ipv4_lpm",
                &[MatchParam::Lpm {
                    key: addr.to_be_bytes().to_vec(),
                    prefix_len: plen,
                }],
                "set_nhop",
                &[vec![10, 0, 0, nh], vec![0, nh % 4]],
                None,
            );
            if let Err(e) = &res {
                if !e.to_string().contains("DUPLICATE_ENTRY") {
                    println!("route {added}: {e}");
                    return;
                }
            }
            if res.is_ok() {
                added += 1;
                dsts.push(addr | ((r as u32) & !(!0u32).checked_shl(32 - plen).unwrap_or(0)));
            }
        }
        let load = t0.elapsed().as_secs_f64();
        let frames: Vec<Vec<u8>> = (0..4096)
            .map(|i| {
                let d = dsts[(rng.next() as usize) % dsts.len()].to_be_bytes();
                let mut f = vec![0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 8, 0];
                f.extend_from_slice(&[0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0]);
                f.extend_from_slice(&[10, 1, (i >> 8) as u8, i as u8]);
                f.extend_from_slice(&d);
                f.resize(64, 0);
                f
            })
            .collect();
        let mut out = Vec::with_capacity(4);
        let (mut n, mut sent) = (0usize, 0usize);
        let t0 = Instant::now();
        while t0.elapsed().as_secs_f64() < 0.4 {
            for f in frames.iter().take(256) {
                out.clear();
                sw.process_packet(1, &frames[(n * 97) % frames.len()], &mut out);
                let _ = f;
                sent += out.len();
                n += 1;
            }
        }
        let dt = t0.elapsed().as_secs_f64();
        println!(
            "| {routes} | {load:.3} | {:.3e} | {n} | {sent} | {:.3e} | {:.0} |",
            routes as f64 / load,
            n as f64 / dt,
            dt * 1e9 / n as f64
        );
    }
}
