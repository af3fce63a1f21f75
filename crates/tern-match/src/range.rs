//! Range engine: entries (value/mask plus range bounds, flattened into one fixed-stride byte
//! record each) kept in a main array sorted by (priority, handle), scanned in order so the
//! first match wins and the scan stops there, plus a small unsorted delta of recent inserts
//! that is scanned in full and merged into the main array once it outgrows
//! `64 + 4·√n`. Deletes in the main array leave tombstones, compacted when they reach half.

use crate::{EntryKey, MatchError, RangeSpec, Slots};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Main,
    Delta,
}

/// Range (and mixed range/ternary/exact) table.
#[derive(Clone, Debug, Default)]
pub struct RangeTable {
    /// Range field `(offset, length)`s, fixed by the first entry.
    fields: Option<Box<[(u32, u32)]>>,
    key_len: usize,
    stride: usize,
    main: Vec<(i32, u32)>,
    main_data: Vec<u8>,
    dead: Vec<bool>,
    ndead: usize,
    delta: Vec<(i32, u32)>,
    delta_data: Vec<u8>,
    recs: Slots<(i32, Place)>,
    len: usize,
}

/// Does `key` match the flattened record `rec` (value, mask, then start/end per field)?
#[inline]
fn rec_matches(rec: &[u8], key: &[u8], fields: &[(u32, u32)]) -> bool {
    let n = key.len();
    let (value, rest) = rec.split_at(n);
    let (mask, mut bounds) = rest.split_at(n);
    if key
        .iter()
        .zip(mask)
        .zip(value)
        .any(|((k, m), v)| k & m != *v)
    {
        return false;
    }
    for &(off, len) in fields {
        let (off, len) = (off as usize, len as usize);
        let k = &key[off..off + len];
        let (s, r) = bounds.split_at(len);
        let (e, r) = r.split_at(len);
        if k < s || k > e {
            return false;
        }
        bounds = r;
    }
    true
}

impl RangeTable {
    pub fn new() -> RangeTable {
        RangeTable::default()
    }

    fn encode(&self, k: &EntryKey) -> Vec<u8> {
        let mut r = Vec::with_capacity(self.stride);
        r.extend_from_slice(k.value);
        r.extend_from_slice(k.mask);
        for (_, _, s, e) in k.ranges {
            r.extend_from_slice(s);
            r.extend_from_slice(e);
        }
        r
    }

    fn fields_of(ranges: &[RangeSpec]) -> Box<[(u32, u32)]> {
        ranges.iter().map(|(o, l, _, _)| (*o, *l)).collect()
    }

    /// The entry's range fields must sit where the table's do.
    fn check_fields(&self, k: &EntryKey) -> Result<(), MatchError> {
        match &self.fields {
            Some(f) if **f != *Self::fields_of(k.ranges) => Err(MatchError::BadLayout(
                "range fields differ from the table's other entries".into(),
            )),
            _ => Ok(()),
        }
    }

    fn main_pos(&self, prio: i32, h: u32) -> Option<usize> {
        self.main.binary_search(&(prio, h)).ok()
    }

    pub fn insert(&mut self, h: u32, k: &EntryKey) -> Result<(), MatchError> {
        self.check_fields(k)?;
        if let Some(e) = self.find(k) {
            return Err(MatchError::Duplicate { existing: e });
        }
        self.recs.check_free(h)?;
        if self.fields.is_none() {
            self.fields = Some(Self::fields_of(k.ranges));
            self.key_len = k.value.len();
            self.stride =
                2 * self.key_len + k.ranges.iter().map(|r| 2 * r.1 as usize).sum::<usize>();
        }
        let rec = self.encode(k);
        self.delta.push((k.priority, h));
        self.delta_data.extend_from_slice(&rec);
        self.recs.set(h, (k.priority, Place::Delta));
        self.len += 1;
        let limit = 64 + 4 * (self.len as f64).sqrt() as usize;
        if self.delta.len() > limit {
            self.rebuild();
        }
        Ok(())
    }

    /// Merge the (sorted) delta into the main array and drop tombstones: one linear pass.
    fn rebuild(&mut self) {
        let s = self.stride;
        let mut d: Vec<usize> = (0..self.delta.len()).collect();
        d.sort_unstable_by_key(|&i| self.delta[i]);
        let n = self.len;
        let (mut main, mut data) = (Vec::with_capacity(n), Vec::with_capacity(n * s));
        let (mut i, mut j) = (0, 0);
        while i < self.main.len() || j < d.len() {
            let take_main = match (self.main.get(i), d.get(j)) {
                (Some(m), Some(&dj)) => *m < self.delta[dj],
                (Some(_), None) => true,
                _ => false,
            };
            if take_main {
                if !self.dead[i] {
                    main.push(self.main[i]);
                    data.extend_from_slice(&self.main_data[i * s..(i + 1) * s]);
                }
                i += 1;
            } else {
                let x = self.delta[d[j]];
                main.push(x);
                data.extend_from_slice(&self.delta_data[d[j] * s..(d[j] + 1) * s]);
                self.recs.set(x.1, (x.0, Place::Main));
                j += 1;
            }
        }
        self.dead = vec![false; main.len()];
        self.main = main;
        self.main_data = data;
        self.ndead = 0;
        self.delta.clear();
        self.delta_data.clear();
    }

    pub fn delete(&mut self, h: u32) -> Result<(), MatchError> {
        let (p, place) = self.recs.take(h)?;
        match place {
            Place::Delta => {
                let i = self
                    .delta
                    .iter()
                    .position(|x| x.1 == h)
                    .expect("delta holds its records");
                let s = self.stride;
                self.delta.swap_remove(i);
                let last = self.delta_data.len() - s;
                if i * s != last {
                    self.delta_data.copy_within(last.., i * s);
                }
                self.delta_data.truncate(last);
            }
            Place::Main => {
                let i = self.main_pos(p, h).expect("main holds its records");
                self.dead[i] = true;
                self.ndead += 1;
            }
        }
        self.len -= 1;
        if self.ndead > 64 && self.ndead * 2 > self.main.len() {
            self.rebuild();
        }
        Ok(())
    }

    pub fn contains(&self, h: u32) -> bool {
        self.recs.get(h).is_some()
    }

    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        let fields = self.fields.as_ref()?;
        if **fields != *Self::fields_of(k.ranges) || k.value.len() != self.key_len {
            return None;
        }
        let rec = self.encode(k);
        let s = self.stride;
        let lo = self.main.partition_point(|x| x.0 < k.priority);
        for i in lo..self.main.len() {
            if self.main[i].0 != k.priority {
                break;
            }
            if !self.dead[i] && self.main_data[i * s..(i + 1) * s] == rec[..] {
                return Some(self.main[i].1);
            }
        }
        self.delta
            .iter()
            .enumerate()
            .find(|(i, x)| x.0 == k.priority && self.delta_data[i * s..(i + 1) * s] == rec[..])
            .map(|(_, x)| x.1)
    }

    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        let fields = self.fields.as_deref()?;
        if key.len() != self.key_len {
            return None;
        }
        let s = self.stride;
        let mut best: Option<(i32, u32)> = None;
        for (x, rec) in self.delta.iter().zip(self.delta_data.chunks_exact(s)) {
            if best.is_none_or(|b| *x < b) && rec_matches(rec, key, fields) {
                best = Some(*x);
            }
        }
        for (i, (x, rec)) in self
            .main
            .iter()
            .zip(self.main_data.chunks_exact(s))
            .enumerate()
        {
            if best.is_some_and(|b| *x > b) {
                break;
            }
            if !self.dead[i] && rec_matches(rec, key, fields) {
                best = Some(*x);
                break;
            }
        }
        best.map(|(_, h)| h)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        *self = RangeTable::default();
    }

    pub fn memory_bytes(&self) -> usize {
        self.main.capacity() * 8
            + self.main_data.capacity()
            + self.dead.capacity()
            + self.delta.capacity() * 8
            + self.delta_data.capacity()
            + self.recs.bytes()
    }
}
