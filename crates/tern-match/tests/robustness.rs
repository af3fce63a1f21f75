//! Bad input never panics: random layouts (valid or not) and random operations with wrong
//! lengths, bad ranges, oversized prefixes and handles, on both the structured engines and the
//! scan; every refusal is a `MatchError`.

use tern_match::{EntryKey, Kind, Layout, LpmField, MatchError, MatchTable};

mod common;
use common::Rng;

impl Rng {
    /// `usual` most of the time, a random length below 24 one time in eight.
    fn len(&mut self, usual: usize) -> usize {
        if self.below(8) == 0 {
            self.below(24) as usize
        } else {
            usual
        }
    }
}

#[test]
fn random_layouts_and_operations_return_errors_not_panics() {
    let mut rng = Rng(77);
    let kinds = [Kind::Exact, Kind::Lpm, Kind::Ternary, Kind::Range];
    let mut built = 0;
    for _ in 0..400 {
        let key_len = rng.below(20) as usize;
        let kind = kinds[rng.below(4) as usize];
        let lpm = (rng.below(3) > 0).then(|| LpmField {
            off: rng.below(key_len as u64 + 2) as usize,
            nbytes: rng.below(6) as usize,
            width: rng.below(48) as u32,
        });
        let layout = Layout { kind, key_len, lpm };
        let mut t = match MatchTable::new(layout.clone()) {
            Ok(t) => t,
            Err(e) => {
                assert!(matches!(e, MatchError::BadLayout(_)), "{e}");
                continue;
            }
        };
        built += 1;
        let mut scan = MatchTable::new_scan(layout);
        for _ in 0..60 {
            // Mostly well-formed, sometimes one length off.
            let vl = rng.len(key_len);
            let ml = rng.len(key_len);
            let mask = rng.bytes(ml);
            let value: Vec<u8> = rng
                .bytes(vl)
                .iter()
                .zip(mask.iter().chain(std::iter::repeat(&0xff)))
                .map(|(a, b)| a & b)
                .collect();
            let ranges = if kind == Kind::Range && key_len >= 2 && rng.below(2) == 0 {
                let off = rng.below(key_len as u64 + 1) as u32;
                let len = rng.below(3) as u32;
                vec![(off, len, rng.bytes(len as usize), {
                    let n = rng.below(3) as usize;
                    rng.bytes(n)
                })]
            } else {
                vec![]
            };
            let k = EntryKey {
                value: &value,
                mask: &mask,
                ranges: &ranges,
                prefix_len: rng.below(50) as u32,
                priority: rng.below(5) as i32 - 2,
            };
            let h = if rng.below(20) == 0 {
                rng.next() as u32
            } else {
                rng.below(40) as u32
            };
            match rng.below(4) {
                0 | 1 => {
                    let _ = t.insert(h, &k);
                    let _ = scan.insert(h, &k);
                }
                2 => {
                    let _ = t.delete(h);
                    let _ = scan.delete(h);
                }
                _ => {
                    let _ = t.modify(h, &k);
                    let _ = scan.modify(h, &k);
                }
            }
            let _ = t.find(&k);
            let kl = rng.len(key_len);
            let key = rng.bytes(kl);
            let _ = t.lookup(&key);
        }
        let _ = t.memory_bytes();
        t.clear();
        assert!(t.is_empty());
    }
    assert!(built > 100, "only {built} layouts accepted");
}
