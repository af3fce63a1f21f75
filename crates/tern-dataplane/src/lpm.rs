//! Multibit LPM index for tables keyed by one LPM field of at most 32 bits (`LpmIndex`):
//! a DIR-16-8-8 table (the DIR-24-8 scheme with a 16-bit first level) kept beside the
//! `tern-match` engine, so that a lookup is one to three dependent loads.
//!
//! A key is taken as a 32-bit address `a` (the field's `W` bits left-aligned). The first
//! level has `2^min(W, 16)` cells indexed by the top bits of `a`; a cell is a miss (0), a leaf
//! (`slot + 1`) or a pointer ([`PTR`]) to a chunk of 256 cells indexed by the next 8 bits
//! (`(a >> 8) & 255`), whose cells may point to a chunk indexed by the last 8 bits (`a & 255`).
//! Every cell also records the prefix length of the leaf it holds, which makes updates
//! incremental: adding a prefix of length `L` overwrites the cells of its range whose leaf is
//! no longer than `L`; deleting it gives the cells it owned (depth `L`) to the longest
//! remaining prefix that covers it. A chunk whose cells all hold the same leaf again is folded
//! back into its parent cell. Prefixes are unique per table (the matcher refuses duplicates),
//! so the longest match, and so the slot, is the engine's.

use std::collections::HashMap;

/// A cell that points to a chunk (chunk index in the low bits).
pub const PTR: u32 = 1 << 31;

/// Cells per chunk (8 bits of the address).
const CHUNK: usize = 256;

#[derive(Clone, Debug)]
pub struct LpmIndex {
    /// Key width in bits (1..=32).
    width: u32,
    /// `32 - log2(l1.len())`: the first level's index is `a >> sh1`.
    sh1: u32,
    l1: Vec<u32>,
    l1_depth: Vec<u8>,
    /// Chunks of [`CHUNK`] cells, back to back.
    chunks: Vec<u32>,
    chunk_depth: Vec<u8>,
    free_chunks: Vec<u32>,
    /// Every stored prefix: `(length, left-aligned address)` → slot.
    prefixes: HashMap<(u32, u32), u32>,
}

/// The cells a prefix covers at one level: `[lo, lo + n)`.
fn span(a: u32, len: u32, level_shift: u32, level_bits: u32) -> (usize, usize) {
    // The level's cells cover address bits [32 - level_shift - level_bits, 32 - level_shift).
    let idx =
        ((u64::from(a) << level_shift) >> (32 - level_bits)) as usize & ((1 << level_bits) - 1);
    let covered = level_shift + level_bits; // prefix bits this level resolves
    let n = if len >= covered {
        1
    } else {
        1usize << (covered - len)
    };
    (idx & !(n - 1), n)
}

impl LpmIndex {
    /// An empty index for keys of `width` bits; `None` outside 1..=32.
    pub fn new(width: u32) -> Option<LpmIndex> {
        if !(1..=32).contains(&width) {
            return None;
        }
        let b1 = width.min(16);
        Some(LpmIndex {
            width,
            sh1: 32 - b1,
            l1: vec![0; 1 << b1],
            l1_depth: vec![0; 1 << b1],
            chunks: Vec::new(),
            chunk_depth: Vec::new(),
            free_chunks: Vec::new(),
            prefixes: HashMap::new(),
        })
    }

    /// The key value (its low `width` bits) as a left-aligned 32-bit address.
    #[inline(always)]
    pub fn addr(&self, key: u64) -> u32 {
        ((key << (32 - self.width)) & 0xffff_ffff) as u32
    }

    /// The slot of the longest prefix matching `key` (the field's value, low `width` bits).
    #[inline(always)]
    pub fn get(&self, key: u64) -> Option<u32> {
        let a = self.addr(key);
        let mut c = self.l1[(a >> self.sh1) as usize];
        if c & PTR != 0 {
            c = self.chunks[((c & !PTR) as usize) * CHUNK + ((a >> 8) & 255) as usize];
            if c & PTR != 0 {
                c = self.chunks[((c & !PTR) as usize) * CHUNK + (a & 255) as usize];
            }
        }
        c.checked_sub(1)
    }

    /// What native code reads: the first level, its index shift, the chunks, and the shift
    /// that left-aligns a key (`32 - width`).
    pub fn raw(&self) -> (*const u32, u32, *const u32, u32) {
        (
            self.l1.as_ptr(),
            self.sh1,
            self.chunks.as_ptr(),
            32 - self.width,
        )
    }

    /// Number of chunks in use (for tests: folding keeps memory bounded).
    pub fn chunks_in_use(&self) -> usize {
        self.chunks.len() / CHUNK - self.free_chunks.len()
    }

    fn new_chunk(&mut self, fill: u32, depth: u8) -> u32 {
        match self.free_chunks.pop() {
            Some(c) => {
                let r = c as usize * CHUNK..(c as usize + 1) * CHUNK;
                self.chunks[r.clone()].fill(fill);
                self.chunk_depth[r].fill(depth);
                c
            }
            None => {
                let c = (self.chunks.len() / CHUNK) as u32;
                self.chunks.resize(self.chunks.len() + CHUNK, fill);
                self.chunk_depth
                    .resize(self.chunk_depth.len() + CHUNK, depth);
                c
            }
        }
    }

    /// Add prefix `key/len` (`len` ≤ width) for `slot`.
    pub fn insert(&mut self, key: u64, len: u32, slot: u32) {
        let a = self.addr(key) & mask32(len);
        self.prefixes.insert((len, a), slot);
        self.paint(a, len, slot + 1, len as u8, None);
    }

    /// Remove prefix `key/len` (no-op if absent).
    pub fn remove(&mut self, key: u64, len: u32) {
        let a = self.addr(key) & mask32(len);
        let Some(slot) = self.prefixes.remove(&(len, a)) else {
            return;
        };
        // The longest remaining prefix covering this one takes its cells.
        let (val, depth) = (0..len)
            .rev()
            .find_map(|l| {
                self.prefixes
                    .get(&(l, a & mask32(l)))
                    .map(|s| (s + 1, l as u8))
            })
            .unwrap_or((0, 0));
        self.paint(a, len, val, depth, Some((slot + 1, len as u8)));
    }

    pub fn clear(&mut self) {
        self.l1.fill(0);
        self.l1_depth.fill(0);
        self.chunks.clear();
        self.chunk_depth.clear();
        self.free_chunks.clear();
        self.prefixes.clear();
    }

    /// Write leaf `(val, depth)` over prefix `a/len`'s cells: on an add (`owner` `None`) the
    /// cells whose leaf is no longer than `len`; on a delete the cells the deleted prefix
    /// `owner` holds.
    fn paint(&mut self, a: u32, len: u32, val: u32, depth: u8, owner: Option<(u32, u8)>) {
        let b1 = 32 - self.sh1;
        let (lo, n) = span(a, len, 0, b1);
        for i in lo..lo + n {
            let c = self.l1[i];
            if c & PTR != 0 {
                let ch = c & !PTR;
                self.paint_chunk(ch, a, len, b1, val, depth, owner);
                if let Some(leaf) = self.uniform(ch) {
                    self.free_chunks.push(ch);
                    (self.l1[i], self.l1_depth[i]) = leaf;
                }
            } else if len > b1 {
                // Longer than this level resolves: split the cell into a chunk.
                if owner.is_some() {
                    continue; // the deleted prefix was never painted below this leaf
                }
                let ch = self.new_chunk(c, self.l1_depth[i]);
                self.l1[i] = PTR | ch;
                self.paint_chunk(ch, a, len, b1, val, depth, owner);
            } else if owns(c, self.l1_depth[i], len, owner) {
                self.l1[i] = val;
                self.l1_depth[i] = depth;
            }
        }
    }

    /// [`LpmIndex::paint`] inside chunk `ch`, whose cells resolve address bits
    /// `[shift, shift + 8)`.
    #[allow(clippy::too_many_arguments)]
    fn paint_chunk(
        &mut self,
        ch: u32,
        a: u32,
        len: u32,
        shift: u32,
        val: u32,
        depth: u8,
        owner: Option<(u32, u8)>,
    ) {
        let base = ch as usize * CHUNK;
        let (lo, n) = if len <= shift {
            (0, CHUNK)
        } else {
            span(a, len, shift, 8)
        };
        for i in base + lo..base + lo + n {
            let c = self.chunks[i];
            if c & PTR != 0 {
                let sub = c & !PTR;
                self.paint_chunk(sub, a, len, shift + 8, val, depth, owner);
                if let Some(leaf) = self.uniform(sub) {
                    self.free_chunks.push(sub);
                    (self.chunks[i], self.chunk_depth[i]) = leaf;
                }
            } else if len > shift + 8 {
                if owner.is_some() {
                    continue;
                }
                let sub = self.new_chunk(c, self.chunk_depth[i]);
                self.chunks[i] = PTR | sub;
                self.paint_chunk(sub, a, len, shift + 8, val, depth, owner);
            } else if owns(c, self.chunk_depth[i], len, owner) {
                self.chunks[i] = val;
                self.chunk_depth[i] = depth;
            }
        }
    }

    /// The leaf every cell of chunk `ch` holds, if they all hold the same one.
    fn uniform(&self, ch: u32) -> Option<(u32, u8)> {
        let r = ch as usize * CHUNK..(ch as usize + 1) * CHUNK;
        let (cells, depths) = (&self.chunks[r.clone()], &self.chunk_depth[r]);
        let (c0, d0) = (cells[0], depths[0]);
        (c0 & PTR == 0 && cells.iter().all(|&c| c == c0) && depths.iter().all(|&d| d == d0))
            .then_some((c0, d0))
    }
}

/// Whether a leaf cell `(c, d)` is overwritten: on an add of a prefix of length `len`, if its
/// leaf is no longer; on a delete, if the deleted prefix holds it.
#[inline]
fn owns(c: u32, d: u8, len: u32, owner: Option<(u32, u8)>) -> bool {
    match owner {
        None => u32::from(d) <= len,
        Some((v, od)) => c == v && d == od,
    }
}

/// The top `len` bits of a 32-bit address.
fn mask32(len: u32) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The longest stored prefix by brute force.
    fn brute(p: &HashMap<(u32, u32), u32>, width: u32, key: u64) -> Option<u32> {
        let a = ((key << (32 - width)) & 0xffff_ffff) as u32;
        (0..=width)
            .rev()
            .find_map(|l| p.get(&(l, a & mask32(l))).copied())
    }

    #[test]
    fn agrees_with_brute_force_under_churn() {
        for width in [32u32, 24, 20, 16, 9, 1] {
            let mut x = LpmIndex::new(width).unwrap();
            let mut stored: HashMap<(u32, u32), u32> = HashMap::new();
            let mut s = 0x1234_5678_9abc_def0u64 ^ u64::from(width);
            let mut rnd = || {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                s
            };
            let wmask = if width == 32 {
                u64::from(u32::MAX)
            } else {
                (1u64 << width) - 1
            };
            // Keys clustered in a few regions so prefixes nest and overlap.
            let base = rnd() & wmask;
            for step in 0..6000u32 {
                let r = rnd();
                let key =
                    (base ^ (r & 0xffff & wmask) ^ ((r >> 40) & 3) << width.saturating_sub(2))
                        & wmask;
                let len = (r >> 20) as u32 % (width + 1);
                let a = ((key << (32 - width)) & 0xffff_ffff) as u32 & mask32(len);
                if (r >> 30) % 3 == 0 && !stored.is_empty() {
                    let k = *stored
                        .keys()
                        .nth((r >> 33) as usize % stored.len())
                        .unwrap();
                    stored.remove(&k);
                    x.remove(u64::from(k.1) >> (32 - width), k.0);
                } else if let std::collections::hash_map::Entry::Vacant(v) = stored.entry((len, a))
                {
                    v.insert(step);
                    x.insert(key, len, step);
                }
                for _ in 0..4 {
                    let q = (base ^ (rnd() & 0x1ffff)) & wmask;
                    assert_eq!(
                        x.get(q),
                        brute(&stored, width, q),
                        "w{width} step {step} q {q:#x}"
                    );
                }
            }
            // Deleting everything folds every chunk back and leaves only misses.
            for k in stored.keys().copied().collect::<Vec<_>>() {
                x.remove(u64::from(k.1) >> (32 - width), k.0);
            }
            assert_eq!(x.chunks_in_use(), 0, "width {width}");
            assert!(x.l1.iter().all(|&c| c == 0));
            x.insert(0, 0, 7);
            assert_eq!(x.get(wmask), Some(7));
            x.clear();
            assert_eq!(x.get(0), None);
        }
    }

    #[test]
    fn widths_outside_one_to_32_are_refused() {
        assert!(LpmIndex::new(0).is_none());
        assert!(LpmIndex::new(33).is_none());
    }
}
