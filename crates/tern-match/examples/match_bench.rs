//! Engine micro-benchmark: load time, bytes per entry and lookups/s of each engine at 1k,
//! 100k and 1M entries, with the linear scan at 1k for reference. Prints a Markdown table.
//! `cargo run --release -p tern-match --example match_bench [max_entries]`
//! Each lookup measurement runs for ~0.2 s over pre-built keys (≈ 90% hits).

use std::hint::black_box;
use std::time::Instant;
use tern_match::{EntryKey, Kind, Layout, LpmField, MatchTable, RangeSpec};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

struct Ent {
    value: Vec<u8>,
    mask: Vec<u8>,
    ranges: Vec<RangeSpec>,
    plen: u32,
    prio: i32,
}

fn prefix_mask(nbytes: usize, plen: u32) -> Vec<u8> {
    let mut m = vec![0u8; nbytes];
    for b in 0..plen {
        m[(b / 8) as usize] |= 0x80 >> (b % 8);
    }
    m
}

fn and(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x & y).collect()
}

/// Entries and lookup keys for one kind.
fn workload(kind: Kind, n: usize, rng: &mut Rng) -> (Layout, Vec<Ent>, Vec<Vec<u8>>) {
    let mut ents = Vec::with_capacity(n);
    let layout = match kind {
        Kind::Exact => Layout {
            kind,
            key_len: 6,
            lpm: None,
        },
        Kind::Lpm => Layout {
            kind,
            key_len: 4,
            lpm: Some(LpmField {
                off: 0,
                nbytes: 4,
                width: 32,
            }),
        },
        Kind::Ternary => Layout {
            kind,
            key_len: 13,
            lpm: None,
        },
        Kind::Range => Layout {
            kind,
            key_len: 4,
            lpm: None,
        },
    };
    // 16 ACL-style masks over (src/32, dst/32, sport, dport, proto).
    let acl_masks: Vec<Vec<u8>> = (0..16)
        .map(|i| {
            let sp = [0, 8, 16, 24, 32][i % 5];
            let dp = [32, 24, 16, 8][i % 4];
            let mut m = prefix_mask(4, sp);
            m.extend(prefix_mask(4, dp));
            m.extend(if i % 2 == 0 { [0, 0] } else { [0xff, 0xff] });
            m.extend(if i % 3 == 0 { [0xff, 0xff] } else { [0, 0] });
            m.push(if i % 4 == 0 { 0 } else { 0xff });
            m
        })
        .collect();
    for i in 0..n {
        let r = rng.next().to_be_bytes();
        let e = match kind {
            Kind::Exact => Ent {
                value: r[..6].to_vec(),
                mask: vec![0xff; 6],
                ranges: vec![],
                plen: 0,
                prio: 0,
            },
            Kind::Lpm => {
                let plen = match rng.below(10) {
                    0..=5 => 24,
                    6 | 7 => 16 + rng.below(8) as u32,
                    _ => 25 + rng.below(8) as u32,
                };
                let m = prefix_mask(4, plen);
                Ent {
                    value: and(&r[..4], &m),
                    mask: m,
                    ranges: vec![],
                    plen,
                    prio: 0,
                }
            }
            Kind::Ternary => {
                let m = acl_masks[i % acl_masks.len()].clone();
                let mut v = r.to_vec();
                v.extend_from_slice(&rng.next().to_be_bytes()[..5]);
                Ent {
                    value: and(&v, &m),
                    mask: m,
                    ranges: vec![],
                    plen: 0,
                    prio: rng.below(1 << 20) as i32,
                }
            }
            Kind::Range => {
                let a = u16::from_be_bytes([r[0], r[1]]);
                let b = a.saturating_add(rng.below(64) as u16);
                let c = u16::from_be_bytes([r[2], r[3]]);
                let d = c.saturating_add(rng.below(1024) as u16);
                Ent {
                    value: vec![0; 4],
                    mask: vec![0; 4],
                    ranges: vec![
                        (0, 2, a.to_be_bytes().to_vec(), b.to_be_bytes().to_vec()),
                        (2, 2, c.to_be_bytes().to_vec(), d.to_be_bytes().to_vec()),
                    ],
                    plen: 0,
                    prio: rng.below(1 << 20) as i32,
                }
            }
        };
        ents.push(e);
    }
    let nkeys = 1 << 16;
    let keys = (0..nkeys)
        .map(|_| {
            let len = layout.key_len;
            let r: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if rng.below(10) == 0 {
                return r;
            }
            let e = &ents[rng.below(n as u64) as usize];
            let mut k: Vec<u8> = (0..len)
                .map(|i| (e.value[i] & e.mask[i]) | (r[i] & !e.mask[i]))
                .collect();
            for (off, l, s, _) in &e.ranges {
                k[*off as usize..(*off + *l) as usize].copy_from_slice(s);
            }
            k
        })
        .collect();
    (layout, ents, keys)
}

/// Lookups per second over `keys`, for about `secs`.
fn rate(t: &MatchTable, keys: &[Vec<u8>], secs: f64) -> (f64, f64) {
    let t0 = Instant::now();
    let (mut done, mut hits) = (0u64, 0u64);
    while t0.elapsed().as_secs_f64() < secs {
        for k in keys.iter().take(256) {
            hits += black_box(t.lookup(black_box(k))).is_some() as u64;
        }
        let start = (done as usize * 257) % keys.len();
        for k in keys[start..].iter().take(1024) {
            hits += black_box(t.lookup(black_box(k))).is_some() as u64;
        }
        done += 256 + (keys.len() - start).min(1024) as u64;
    }
    (
        done as f64 / t0.elapsed().as_secs_f64(),
        hits as f64 / done as f64,
    )
}

fn main() {
    let max: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    println!("| engine | entries | load (s) | inserts/s | bytes/entry | lookups/s | ns/lookup | hit rate |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for kind in [Kind::Exact, Kind::Lpm, Kind::Ternary, Kind::Range] {
        for n in [1_000usize, 100_000, 1_000_000] {
            if n > max {
                continue;
            }
            let (layout, ents, keys) = workload(kind, n, &mut rng);
            let mut tables = vec![MatchTable::new(layout.clone()).expect("layout")];
            if n == 1_000 {
                tables.push(MatchTable::new_scan(layout));
            }
            for mut t in tables {
                let t0 = Instant::now();
                let mut h = 0u32;
                for e in &ents {
                    let k = EntryKey {
                        value: &e.value,
                        mask: &e.mask,
                        ranges: &e.ranges,
                        prefix_len: e.plen,
                        priority: e.prio,
                    };
                    // Random entries may collide (duplicates): skip those.
                    if t.insert(h, &k).is_ok() {
                        h += 1;
                    }
                }
                let load = t0.elapsed().as_secs_f64();
                let secs = if kind == Kind::Range && n >= 100_000 {
                    0.5
                } else {
                    0.2
                };
                let (lps, hit) = rate(&t, &keys, secs);
                println!(
                    "| {} ({:?}) | {} | {:.3} | {:.2e} | {:.0} | {:.3e} | {:.0} | {:.2} |",
                    t.engine_name(),
                    kind,
                    t.len(),
                    load,
                    t.len() as f64 / load,
                    t.bytes_per_entry(),
                    lps,
                    1e9 / lps,
                    hit
                );
            }
        }
    }
}
