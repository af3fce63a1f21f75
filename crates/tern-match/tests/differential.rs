//! Randomized differential tests: every structured engine against the linear-scan reference,
//! with thousands of overlapping entries, equal priorities, deletes and re-inserts.

use tern_match::{EntryKey, Kind, Layout, LpmField, MatchError, MatchTable, RangeSpec};

mod common;
use common::Rng;

#[derive(Clone, Debug)]
struct Ent {
    value: Vec<u8>,
    mask: Vec<u8>,
    ranges: Vec<RangeSpec>,
    prefix_len: u32,
    priority: i32,
}

impl Ent {
    fn key(&self) -> EntryKey<'_> {
        EntryKey {
            value: &self.value,
            mask: &self.mask,
            ranges: &self.ranges,
            prefix_len: self.prefix_len,
            priority: self.priority,
        }
    }
}

fn and(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x & y).collect()
}

/// Width mask of a field: `nbytes` bytes, the top `nbytes*8-width` bits clear.
fn width_mask(nbytes: usize, width: u32) -> Vec<u8> {
    let mut m = vec![0xff; nbytes];
    m[0] = 0xff >> (nbytes as u32 * 8 - width);
    m
}

fn prefix_mask(nbytes: usize, width: u32, plen: u32) -> Vec<u8> {
    let mut m = vec![0u8; nbytes];
    let pad = nbytes as u32 * 8 - width;
    for b in pad..pad + plen {
        m[(b / 8) as usize] |= 0x80 >> (b % 8);
    }
    m
}

/// Drive both tables with the same operations; compare every result and many lookups.
fn run(layout: Layout, entries: Vec<Ent>, keys: impl Fn(&mut Rng, &[Ent]) -> Vec<u8>, seed: u64) {
    let mut rng = Rng(seed);
    let mut fast = MatchTable::new(layout.clone()).unwrap();
    let mut slow = MatchTable::new_scan(layout.clone());
    let mut live: Vec<Option<Ent>> = Vec::new();
    let mut dups = 0;
    for e in &entries {
        let h = live.len() as u32;
        let a = fast.insert(h, &e.key());
        let b = slow.insert(h, &e.key());
        assert_eq!(a, b, "insert {e:?}");
        if let Err(MatchError::Duplicate { .. }) = a {
            dups += 1;
        }
        live.push(a.is_ok().then(|| e.clone()));
    }
    assert_eq!(fast.len(), slow.len());
    // Delete a third, then re-insert fresh entries into freed handles (out of order).
    let n = live.len();
    for _ in 0..n / 3 {
        let h = rng.below(n as u64) as u32;
        let a = fast.delete(h);
        assert_eq!(a, slow.delete(h), "delete {h}");
        if a.is_ok() {
            live[h as usize] = None;
        }
    }
    for i in 0..n / 4 {
        let Some(h) = live.iter().position(|x| x.is_none()) else {
            break;
        };
        let e = &entries[(i * 7 + 3) % entries.len()];
        let a = fast.insert(h as u32, &e.key());
        assert_eq!(a, slow.insert(h as u32, &e.key()));
        live[h] = Some(e.clone());
        if a.is_err() {
            // Mark the slot used so `position` moves on; it stays empty in both tables.
            live[h] = Some(Ent {
                priority: i32::MIN,
                ..e.clone()
            });
        }
    }
    assert_eq!(fast.len(), slow.len());
    let ents: Vec<Ent> = live.iter().flatten().cloned().collect();
    let mut hits = 0;
    for _ in 0..4_000 {
        let k = keys(&mut rng, &ents);
        let (a, b) = (fast.lookup(&k), slow.lookup(&k));
        assert_eq!(a, b, "lookup {k:02x?} ({})", fast.engine_name());
        hits += a.is_some() as u32;
    }
    // find agrees for every live entry.
    for (h, e) in live.iter().enumerate() {
        if let Some(e) = e {
            if e.priority != i32::MIN {
                assert_eq!(fast.find(&e.key()), Some(h as u32));
            }
        }
    }
    assert!(hits > 400, "too few hits ({hits}) to exercise ranking");
    assert!(fast.memory_bytes() > 0);
    let _ = dups;
}

/// A key that matches `e` in its masked bits, random elsewhere.
fn near(rng: &mut Rng, e: &Ent, n: usize) -> Vec<u8> {
    let r = rng.bytes(n);
    let mut k: Vec<u8> = (0..n)
        .map(|i| (e.value[i] & e.mask[i]) | (r[i] & !e.mask[i]))
        .collect();
    for (off, len, s, _) in &e.ranges {
        let o = *off as usize;
        k[o..o + *len as usize].copy_from_slice(s);
    }
    k
}

fn pick<'a>(rng: &mut Rng, ents: &'a [Ent]) -> Option<&'a Ent> {
    (!ents.is_empty()).then(|| &ents[rng.below(ents.len() as u64) as usize])
}

#[test]
fn exact_matches_scan_for_inline_and_wide_keys() {
    for (seed, n, field_mask) in [
        (1u64, 2usize, width_mask(2, 9)),
        (2, 6, vec![0xff; 6]),
        (3, 13, vec![0xff; 13]),
        (4, 20, width_mask(20, 155)),
    ] {
        let mut rng = Rng(seed);
        let entries: Vec<Ent> = (0..4000)
            .map(|_| {
                // A small value space so duplicates happen.
                let mut v = rng.bytes(n);
                v[n - 1] %= 64;
                for b in v.iter_mut().take(n - 1) {
                    *b &= 0x3;
                }
                Ent {
                    value: and(&v, &field_mask),
                    mask: field_mask.clone(),
                    ranges: vec![],
                    prefix_len: 0,
                    priority: 0,
                }
            })
            .collect();
        let fm = field_mask.clone();
        run(
            Layout {
                kind: Kind::Exact,
                key_len: n,
                lpm: None,
            },
            entries,
            move |rng, ents| match pick(rng, ents) {
                Some(e) if rng.below(3) > 0 => e.value.clone(),
                _ => {
                    let mut v = rng.bytes(n);
                    for b in v.iter_mut().take(n - 1) {
                        *b &= 0x3;
                    }
                    v[n - 1] %= 64;
                    and(&v, &fm)
                }
            },
            seed,
        );
    }
}

/// LPM layouts: (key_len, lpm field, non-LPM field masks as (offset, mask)).
fn lpm_case(seed: u64, n: usize, f: LpmField, exact: Vec<(usize, Vec<u8>)>) {
    lpm_case_bases(seed, n, f, exact, 6)
}

fn lpm_case_bases(seed: u64, n: usize, f: LpmField, exact: Vec<(usize, Vec<u8>)>, nbases: usize) {
    let mut rng = Rng(seed);
    // Few base addresses and exact values: heavy prefix overlap.
    let bases: Vec<Vec<u8>> = (0..nbases).map(|_| rng.bytes(f.nbytes)).collect();
    let mut table_mask = vec![0u8; n];
    for (off, m) in &exact {
        table_mask[*off..*off + m.len()].copy_from_slice(m);
    }
    let entries: Vec<Ent> = (0..5000)
        .map(|_| {
            let plen = match rng.below(4) {
                0 => rng.below(f.width as u64 + 1) as u32,
                _ => f.width - rng.below(f.width.min(12) as u64 + 1) as u32,
            };
            let mut addr = bases[rng.below(bases.len() as u64) as usize].clone();
            // Perturb low bits so sibling prefixes differ.
            let last = addr.len() - 1;
            addr[last] ^= rng.below(4) as u8;
            let pm = prefix_mask(f.nbytes, f.width, plen);
            let mut value = rng.bytes(n);
            for b in value.iter_mut() {
                *b &= 0x1;
            }
            let mut mask = table_mask.clone();
            value[f.off..f.off + f.nbytes].copy_from_slice(&and(&addr, &pm));
            mask[f.off..f.off + f.nbytes].copy_from_slice(&pm);
            Ent {
                value: and(&value, &mask),
                mask,
                ranges: vec![],
                prefix_len: plen,
                priority: 0,
            }
        })
        .collect();
    run(
        Layout {
            kind: Kind::Lpm,
            key_len: n,
            lpm: Some(f),
        },
        entries,
        move |rng, ents| match pick(rng, ents) {
            Some(e) if rng.below(4) > 0 => {
                let mut k = near(rng, e, n);
                // Keep the non-LPM part well formed half of the time only: the engine masks it.
                if rng.below(2) == 0 {
                    for (off, m) in &exact {
                        for (i, mb) in m.iter().enumerate() {
                            k[off + i] &= mb;
                        }
                    }
                }
                k
            }
            _ => rng.bytes(n),
        },
        seed,
    );
}

#[test]
fn lpm_matches_scan_pure_32_bit() {
    lpm_case(
        10,
        4,
        LpmField {
            off: 0,
            nbytes: 4,
            width: 32,
        },
        vec![],
    );
}

#[test]
fn lpm_matches_scan_scattered_prefixes_sparse_and_dense_nodes() {
    // Many distinct bases: most nodes below the root stay sparse, some densify.
    lpm_case_bases(
        16,
        4,
        LpmField {
            off: 0,
            nbytes: 4,
            width: 32,
        },
        vec![],
        300,
    );
    lpm_case_bases(
        17,
        5,
        LpmField {
            off: 0,
            nbytes: 5,
            width: 40,
        },
        vec![],
        40,
    );
}

#[test]
fn lpm_matches_scan_narrow_and_padded_fields() {
    lpm_case(
        11,
        1,
        LpmField {
            off: 0,
            nbytes: 1,
            width: 8,
        },
        vec![],
    );
    lpm_case(
        12,
        2,
        LpmField {
            off: 0,
            nbytes: 2,
            width: 12,
        },
        vec![],
    );
    lpm_case(
        13,
        3,
        LpmField {
            off: 0,
            nbytes: 3,
            width: 20,
        },
        vec![],
    );
}

#[test]
fn lpm_matches_scan_with_exact_and_valid_fields() {
    // [9-bit port][IPv4 lpm][valid byte]
    lpm_case(
        14,
        7,
        LpmField {
            off: 2,
            nbytes: 4,
            width: 32,
        },
        vec![(0, vec![0x01, 0xff]), (6, vec![0x01])],
    );
    // [IPv6 lpm][16-bit vrf with a static mask]: wide keys.
    lpm_case(
        15,
        18,
        LpmField {
            off: 0,
            nbytes: 16,
            width: 128,
        },
        vec![(16, vec![0x0f, 0xf0])],
    );
}

fn ternary_case(seed: u64, n: usize, width_bits: u32) {
    let mut rng = Rng(seed);
    let fm = width_mask(n, width_bits);
    let masks: Vec<Vec<u8>> = (0..24)
        .map(|i| {
            let m = match i % 3 {
                0 => rng.bytes(n),
                1 => prefix_mask(n, n as u32 * 8, rng.below(n as u64 * 8 + 1) as u32),
                _ => {
                    let mut m = vec![0u8; n];
                    m[rng.below(n as u64) as usize] = 0xff;
                    m
                }
            };
            and(&m, &fm)
        })
        .collect();
    let entries: Vec<Ent> = (0..2500)
        .map(|_| {
            let mask = masks[rng.below(masks.len() as u64) as usize].clone();
            let mut v = rng.bytes(n);
            for b in v.iter_mut() {
                *b &= 0x11;
            }
            Ent {
                value: and(&v, &mask),
                mask,
                ranges: vec![],
                prefix_len: 0,
                priority: rng.below(8) as i32 - 2,
            }
        })
        .collect();
    run(
        Layout {
            kind: Kind::Ternary,
            key_len: n,
            lpm: None,
        },
        entries,
        move |rng, ents| match pick(rng, ents) {
            Some(e) if rng.below(4) > 0 => {
                let mut k = near(rng, e, n);
                for b in k.iter_mut() {
                    *b &= 0x31;
                }
                k
            }
            _ => rng.bytes(n).iter().map(|b| b & 0x11).collect(),
        },
        seed,
    );
}

#[test]
fn ternary_matches_scan_all_key_representations() {
    ternary_case(20, 4, 32);
    ternary_case(21, 8, 61);
    ternary_case(22, 13, 104);
    ternary_case(23, 20, 160);
}

#[test]
fn range_matches_scan() {
    let mut rng = Rng(30);
    let n = 5;
    // [16-bit range][16-bit range][8-bit ternary]
    let entries: Vec<Ent> = (0..3000)
        .map(|_| {
            let mut ranges = Vec::new();
            for off in [0u32, 2] {
                let a = rng.below(1024) as u16;
                let b = a.saturating_add(rng.below(300) as u16);
                ranges.push((off, 2, a.to_be_bytes().to_vec(), b.to_be_bytes().to_vec()));
            }
            let m = [0u8, 0x0f, 0xff][rng.below(3) as usize];
            let v = rng.next() as u8 & m;
            Ent {
                value: vec![0, 0, 0, 0, v],
                mask: vec![0, 0, 0, 0, m],
                ranges,
                prefix_len: 0,
                priority: rng.below(6) as i32,
            }
        })
        .collect();
    run(
        Layout {
            kind: Kind::Range,
            key_len: n,
            lpm: None,
        },
        entries,
        |rng, ents| match pick(rng, ents) {
            Some(e) if rng.below(4) > 0 => {
                let mut k = near(rng, e, 5);
                let bump = rng.below(200) as u16;
                let x = u16::from_be_bytes([k[0], k[1]]).saturating_add(bump);
                k[..2].copy_from_slice(&x.to_be_bytes());
                k
            }
            _ => {
                let mut k = rng.bytes(5);
                k[0] &= 3;
                k[2] &= 3;
                k
            }
        },
        30,
    );
}

#[test]
fn range_mass_deletes_compact_tombstones_and_keep_ranking() {
    let layout = Layout {
        kind: Kind::Range,
        key_len: 2,
        lpm: None,
    };
    let mut fast = MatchTable::new(layout.clone()).unwrap();
    let mut slow = MatchTable::new_scan(layout);
    let mut rng = Rng(31);
    for h in 0..2000u32 {
        let a = rng.below(60_000) as u16;
        let b = a.saturating_add(rng.below(5000) as u16);
        let ranges = [(
            0u32,
            2u32,
            a.to_be_bytes().to_vec(),
            b.to_be_bytes().to_vec(),
        )];
        let k = EntryKey {
            value: &[0, 0],
            mask: &[0, 0],
            ranges: &ranges,
            prefix_len: 0,
            priority: rng.below(50) as i32,
        };
        assert_eq!(fast.insert(h, &k), slow.insert(h, &k));
    }
    let check = |fast: &MatchTable, slow: &MatchTable, rng: &mut Rng| {
        for _ in 0..3000 {
            let k = (rng.below(65536) as u16).to_be_bytes();
            assert_eq!(fast.lookup(&k), slow.lookup(&k), "key {k:?}");
        }
    };
    check(&fast, &slow, &mut rng);
    // Delete 90% in random order (tombstones, then compaction), checking along the way.
    let mut order: Vec<u32> = (0..2000).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i as u64 + 1) as usize);
    }
    for (i, h) in order.iter().take(1800).enumerate() {
        assert_eq!(fast.delete(*h), slow.delete(*h));
        if i % 600 == 0 {
            check(&fast, &slow, &mut rng);
        }
    }
    assert_eq!(fast.len(), 200);
    check(&fast, &slow, &mut rng);
}

#[test]
fn lpm_root_rebuilt_wide_at_4096_entries_keeps_results() {
    let layout = Layout {
        kind: Kind::Lpm,
        key_len: 4,
        lpm: Some(LpmField {
            off: 0,
            nbytes: 4,
            width: 32,
        }),
    };
    let mut fast = MatchTable::new(layout.clone()).unwrap();
    let mut slow = MatchTable::new_scan(layout);
    let mut rng = Rng(40);
    let mut h = 0u32;
    let mut krng = Rng(41);
    let mut check = |fast: &MatchTable, slow: &MatchTable, ents: &[Ent]| {
        for _ in 0..2000 {
            let rng = &mut krng;
            let k = match pick(rng, ents) {
                Some(e) => near(rng, e, 4),
                None => rng.bytes(4),
            };
            assert_eq!(fast.lookup(&k), slow.lookup(&k), "key {k:?}");
        }
    };
    let mut ents = Vec::new();
    while fast.len() < 6000 {
        let plen = [0u32, 4, 8, 12, 16, 20, 24, 28, 32][rng.below(9) as usize];
        let m = prefix_mask(4, 32, plen);
        let e = Ent {
            value: and(&rng.bytes(4), &m),
            mask: m,
            ranges: vec![],
            prefix_len: plen,
            priority: 0,
        };
        let r = fast.insert(h, &e.key());
        assert_eq!(r, slow.insert(h, &e.key()));
        if r.is_ok() {
            ents.push(e);
            h += 1;
        }
        if fast.len() == 4095 {
            check(&fast, &slow, &ents);
        }
    }
    check(&fast, &slow, &ents);
    for d in (0..h).step_by(2) {
        assert_eq!(fast.delete(d), slow.delete(d));
    }
    check(&fast, &slow, &ents);
}
