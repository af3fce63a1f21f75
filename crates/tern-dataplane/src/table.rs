//! Match-table state: entries with BMv2's handle rules, key normalization and validation
//! (`bmv2-json.md` §7.6), lookup, and action profiles (members and groups).
//!
//! Lookup structures come from `tern-match`, chosen per table from its key layout
//! ([`engine_for`]): exact → hash map on the packed key; lpm → multibit trie; ternary →
//! tuple-space search; range → (priority, index)-ordered scan; irregular layouts → linear
//! scan. All rank as BMv2 does (longest prefix; lowest priority value, then lowest index).
//! Slot indexes are the engines' handles; free slots are reused lowest first.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::hash::Hasher;
use tern_match::{EntryKey, Kind, Layout, LpmField, MatchError, MatchTable};
use tern_model::MatchKind;
use tern_runtime::{CounterValue, EntryHandle, MatchParam, TableError};

use crate::externs::Meter;
use crate::lpm::LpmIndex;

/// A fast non-cryptographic hasher for packed keys (FxHash's multiply-rotate over 8-byte
/// words). Keys come from packets, but the table is not exposed to algorithmic-complexity
/// attacks any more than BMv2's own unordered_map with std::hash.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let w = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
        }
        let mut tail = 0u64;
        for (i, b) in chunks.remainder().iter().enumerate() {
            tail |= (*b as u64) << (8 * i);
        }
        self.0 = (self.0.rotate_left(5) ^ tail).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// One key field of a table: where its bytes sit in the packed key.
#[derive(Clone, Debug)]
pub struct KeyField {
    pub kind: MatchKind,
    pub off: u32,
    pub nbytes: u32,
    pub width: u32,
    pub static_mask: Option<Vec<u8>>,
}

/// A table's key layout.
#[derive(Clone, Debug)]
pub struct KeySpec {
    pub fields: Vec<KeyField>,
    pub total: u32,
    /// Table-level match type (selects ranking).
    pub table_kind: MatchKind,
}

impl KeySpec {
    /// Exact tables use the hash map.
    pub fn is_exact(&self) -> bool {
        self.table_kind == MatchKind::Exact
            && self
                .fields
                .iter()
                .all(|f| matches!(f.kind, MatchKind::Exact | MatchKind::Valid))
    }
    /// Ternary and range tables carry priorities.
    pub fn has_priority(&self) -> bool {
        matches!(self.table_kind, MatchKind::Ternary | MatchKind::Range)
    }
}

/// What an entry runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EntryAction {
    Action { action: u32, data: Vec<Vec<u8>> },
    Member(u32),
    Group(u32),
}

/// A stored entry.
#[derive(Clone, Debug)]
pub struct Entry {
    pub value: Vec<u8>,
    pub mask: Vec<u8>,
    /// `(offset, nbytes, start, end)` of each range field.
    pub ranges: Vec<(u32, u32, Vec<u8>, Vec<u8>)>,
    pub prefix: u32,
    pub priority: i32,
    /// The normalized params, for read-back.
    pub params: Vec<MatchParam>,
    pub action: EntryAction,
    pub counter: CounterValue,
    pub meter: Meter,
    pub timeout_ms: Option<u32>,
    /// Time of the last hit (µs since switch start), for ageing read-back.
    pub last_hit_us: u64,
}

/// Normalized key: value, mask, ranges, prefix length, params.
type Normalized = (
    Vec<u8>,
    Vec<u8>,
    Vec<(u32, u32, Vec<u8>, Vec<u8>)>,
    u32,
    Vec<MatchParam>,
);

fn clear_top(width: u32, b: &mut [u8]) {
    let extra = b.len() as u32 * 8 - width;
    if extra > 0 && !b.is_empty() {
        b[0] &= 0xffu8 >> extra;
    }
}

fn prefix_mask(width: u32, nbytes: u32, plen: u32) -> Vec<u8> {
    let mut m = vec![0u8; nbytes as usize];
    let pad = nbytes * 8 - width;
    for i in 0..plen {
        let b = pad + i;
        m[(b / 8) as usize] |= 1 << (7 - b % 8);
    }
    m
}

/// Validate and normalize control-plane match params against a key spec.
pub fn normalize(spec: &KeySpec, params: &[MatchParam]) -> Result<Normalized, TableError> {
    if params.len() != spec.fields.len() {
        return Err(TableError::BAD_MATCH_KEY);
    }
    let n = spec.total as usize;
    let mut value = vec![0u8; n];
    let mut mask = vec![0u8; n];
    let mut ranges = Vec::new();
    let mut prefix = 0;
    let mut out = Vec::with_capacity(params.len());
    for (f, p) in spec.fields.iter().zip(params) {
        let (o, nb) = (f.off as usize, f.nbytes as usize);
        let ones = {
            let mut m = vec![0xffu8; nb];
            clear_top(f.width, &mut m);
            m
        };
        let (v, m) = match (f.kind, p) {
            (MatchKind::Exact, MatchParam::Exact(k)) => {
                if k.len() != nb {
                    return Err(TableError::BAD_MATCH_KEY);
                }
                let mut k = k.clone();
                clear_top(f.width, &mut k);
                out.push(MatchParam::Exact(k.clone()));
                (k, ones)
            }
            (MatchKind::Valid, MatchParam::Valid(b)) => {
                out.push(MatchParam::Valid(*b));
                (vec![*b as u8], vec![1])
            }
            (MatchKind::Lpm, MatchParam::Lpm { key, prefix_len }) => {
                if key.len() != nb || *prefix_len > f.width {
                    return Err(TableError::BAD_MATCH_KEY);
                }
                let m = prefix_mask(f.width, f.nbytes, *prefix_len);
                let k: Vec<u8> = key.iter().zip(&m).map(|(a, b)| a & b).collect();
                prefix = *prefix_len;
                // BMv2 reads LPM keys back as given (only the excess first-byte bits
                // cleared): its `table_dump` shows `0a000001/12`.
                let mut given = key.clone();
                clear_top(f.width, &mut given);
                out.push(MatchParam::Lpm {
                    key: given,
                    prefix_len: *prefix_len,
                });
                (k, m)
            }
            (MatchKind::Ternary, MatchParam::Ternary { key, mask: m }) => {
                if key.len() != nb || m.len() != nb {
                    return Err(TableError::BAD_MATCH_KEY);
                }
                let mut m = m.clone();
                clear_top(f.width, &mut m);
                let k: Vec<u8> = key.iter().zip(&m).map(|(a, b)| a & b).collect();
                out.push(MatchParam::Ternary {
                    key: k.clone(),
                    mask: m.clone(),
                });
                (k, m)
            }
            (MatchKind::Range, MatchParam::Range { start, end }) => {
                if start.len() != nb || end.len() != nb {
                    return Err(TableError::BAD_MATCH_KEY);
                }
                let (mut s, mut e) = (start.clone(), end.clone());
                clear_top(f.width, &mut s);
                clear_top(f.width, &mut e);
                if s > e {
                    return Err(TableError::BAD_MATCH_KEY);
                }
                out.push(MatchParam::Range {
                    start: s.clone(),
                    end: e.clone(),
                });
                ranges.push((f.off, f.nbytes, s, e));
                (vec![0; nb], vec![0; nb])
            }
            _ => return Err(TableError::BAD_MATCH_KEY),
        };
        value[o..o + nb].copy_from_slice(&v);
        mask[o..o + nb].copy_from_slice(&m);
        if let Some(sm) = &f.static_mask {
            for i in 0..nb {
                value[o + i] &= sm[i];
                mask[o + i] &= sm[i];
            }
        }
    }
    Ok((value, mask, ranges, prefix, out))
}

/// The `tern-match` engine for a table's key layout: the structured engine of the table's
/// match kind where the layout fits it, a linear scan with the same ranking otherwise (e.g. an
/// lpm table with a ternary key, or a static mask on the LPM field).
pub fn engine_for(spec: &KeySpec) -> MatchTable {
    let fields = &spec.fields;
    let only = |ks: &[MatchKind]| fields.iter().all(|f| ks.contains(&f.kind));
    let layout = |kind, lpm| Layout {
        kind,
        key_len: spec.total as usize,
        lpm,
    };
    let structured = match spec.table_kind {
        MatchKind::Exact if only(&[MatchKind::Exact, MatchKind::Valid]) => {
            MatchTable::new(layout(Kind::Exact, None))
        }
        MatchKind::Lpm if only(&[MatchKind::Exact, MatchKind::Valid, MatchKind::Lpm]) => {
            let lpms: Vec<&KeyField> = fields.iter().filter(|f| f.kind == MatchKind::Lpm).collect();
            match lpms.as_slice() {
                [] => MatchTable::new(layout(Kind::Lpm, None)),
                [f] if f.static_mask.is_none() => MatchTable::new(layout(
                    Kind::Lpm,
                    Some(LpmField {
                        off: f.off as usize,
                        nbytes: f.nbytes as usize,
                        width: f.width,
                    }),
                )),
                _ => Err(MatchError::BadLayout("not a single plain LPM field".into())),
            }
        }
        MatchKind::Ternary if !fields.iter().any(|f| f.kind == MatchKind::Range) => {
            MatchTable::new(layout(Kind::Ternary, None))
        }
        MatchKind::Ternary | MatchKind::Range => MatchTable::new(layout(Kind::Range, None)),
        _ => Err(MatchError::BadLayout("irregular".into())),
    };
    structured.unwrap_or_else(|_| {
        let kind = match spec.table_kind {
            MatchKind::Lpm => Kind::Lpm,
            MatchKind::Exact => Kind::Exact,
            MatchKind::Range => Kind::Range,
            _ => Kind::Ternary,
        };
        MatchTable::new_scan(layout(kind, None))
    })
}

/// Prefix length encoded by an lpm-field mask (the number of set bits).
fn prefix_from_mask(spec: &KeySpec, mask: &[u8]) -> u32 {
    spec.fields
        .iter()
        .find(|f| f.kind == MatchKind::Lpm)
        .and_then(|f| mask.get(f.off as usize..(f.off + f.nbytes) as usize))
        .map_or(0, |m| m.iter().map(|b| b.count_ones()).sum())
}

/// Parameters a [`HotRec`] holds; an entry whose action has more takes the slow path.
pub const HOT_PARAMS: usize = 3;

/// A slot's direct action in a compact form for the packet path: the action and up to
/// [`HOT_PARAMS`] parameters as `u64`s (each parameter's low 64 bits, as
/// [`crate::layout::be_read`] reads it). 32 bytes, aligned so that one never straddles a cache
/// line: a hit reads this instead of the [`Entry`] (≈ 220 bytes) and the parameters' own heap
/// blocks, which with many random entries were one cache miss each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C, align(32))]
pub struct HotRec {
    /// `HOT_SET | param count << 32 | action`, or 0: no compact form (empty slot, member or
    /// group, too many parameters).
    head: u64,
    pub params: [u64; HOT_PARAMS],
}

/// [`HotRec`]'s flag of a record in compact form.
pub(crate) const HOT_SET: u64 = 1 << 63;

impl HotRec {
    /// The head of a compact record of action `action` with `params` parameters (what
    /// [`HotRec::of`] writes), for generated code that compares a record's head in one go.
    pub(crate) const fn head_of(action: u32, params: usize) -> u64 {
        HOT_SET | (params as u64) << 32 | action as u64
    }
}

impl HotRec {
    fn of(ea: &EntryAction) -> HotRec {
        let EntryAction::Action { action, data } = ea else {
            return HotRec::default();
        };
        if data.len() > HOT_PARAMS {
            return HotRec::default();
        }
        let mut r = HotRec {
            head: HotRec::head_of(*action, data.len()),
            params: [0; HOT_PARAMS],
        };
        for (p, d) in r.params.iter_mut().zip(data) {
            *p = crate::layout::be_read(d);
        }
        r
    }

    /// `(action, parameter count)`, if the slot has a compact form.
    #[inline]
    pub fn action(&self) -> Option<(u32, usize)> {
        (self.head & HOT_SET != 0).then_some((self.head as u32, (self.head >> 32) as u8 as usize))
    }
}

/// One bucket of an [`ExactIndex`]: a packed key (its low 64 bits in `key`, the next 64 in
/// `key_hi`, bits 128 to 191 in `key_x`) and the slot it maps to (`used` 0: empty). 32 bytes:
/// two per cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct Bucket {
    pub key: u64,
    pub key_hi: u64,
    pub slot: u32,
    pub used: u32,
    pub key_x: u64,
}

/// A packed exact key of at most [`MAX_INDEX_KEY`] bytes, big-endian: its low 128 bits and
/// bits 128 to 191 (0 for keys of at most 16 bytes).
pub type PackedKey = (u128, u64);

/// Most key bytes an [`ExactIndex`] holds (three 64-bit words of a [`Bucket`]).
pub const MAX_INDEX_KEY: u32 = 24;

/// Multiplier of the index's hash (Fibonacci hashing: the bucket is the top bits of
/// `(lo ^ hi × INDEX_MUL_HI) × INDEX_MUL` for a key of high and low 64 bits; keys of at most
/// 8 bytes have `hi` 0, so theirs is `lo × INDEX_MUL`). Native code computes the same.
pub const INDEX_MUL: u64 = 0x9E37_79B9_7F4A_7C15;
/// Multiplier of the high 64 bits of keys of 9 to 16 bytes (see [`INDEX_MUL`]).
pub const INDEX_MUL_HI: u64 = 0xC2B2_AE3D_27D4_EB4F;
/// Multiplier of bits 128 to 191 of keys of 17 to 24 bytes: the hash is
/// `(lo ^ hi × INDEX_MUL_HI ^ x × INDEX_MUL_X) × INDEX_MUL` (unchanged for shorter keys).
pub const INDEX_MUL_X: u64 = 0x1656_67B1_9E37_79F9;

/// The index's hash of a packed key (see [`INDEX_MUL`]).
#[inline]
fn index_hash((key, x): PackedKey) -> u64 {
    let (hi, lo) = ((key >> 64) as u64, key as u64);
    (lo ^ hi.wrapping_mul(INDEX_MUL_HI) ^ x.wrapping_mul(INDEX_MUL_X)).wrapping_mul(INDEX_MUL)
}

/// A packed key of at most [`MAX_INDEX_KEY`] bytes, big-endian.
fn packed_key(bytes: &[u8]) -> PackedKey {
    let fold = |b: &[u8]| b.iter().fold(0u128, |v, b| (v << 8) | u128::from(*b));
    let split = bytes.len().saturating_sub(16);
    (fold(&bytes[split..]), fold(&bytes[..split]) as u64)
}

/// An exact table's entries by packed key (the key bytes big-endian, [`PackedKey`]), in an
/// open-addressing table with linear probing kept at most half full, so that native code can
/// look a key up with a multiply, a shift and a few loads (see [`IndexView`]). Kept beside the
/// `tern-match` engine, which stays the reference for every other use.
#[derive(Clone, Debug, Default)]
struct ExactIndex {
    buckets: Vec<Bucket>,
    len: usize,
    /// `64 - log2(buckets.len())`.
    shift: u32,
}

impl ExactIndex {
    #[inline]
    fn pos(&self, key: PackedKey) -> usize {
        (index_hash(key) >> self.shift) as usize & (self.buckets.len() - 1)
    }

    fn get(&self, key: PackedKey) -> Option<u32> {
        if self.buckets.is_empty() {
            return None;
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.pos(key);
        loop {
            let b = &self.buckets[i];
            if b.used == 0 {
                return None;
            }
            if b.packed() == key {
                return Some(b.slot);
            }
            i = (i + 1) & mask;
        }
    }

    /// Map `key` to `slot` (`key` is not in the index: the matcher refused duplicates).
    fn insert(&mut self, key: PackedKey, slot: u32) {
        if (self.len + 1) * 2 > self.buckets.len() {
            let cap = (self.buckets.len() * 2).max(16);
            let old = std::mem::replace(&mut self.buckets, vec![Bucket::default(); cap]);
            self.shift = 64 - cap.trailing_zeros();
            self.len = 0;
            for b in old.into_iter().filter(|b| b.used != 0) {
                self.insert(b.packed(), b.slot);
            }
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.pos(key);
        while self.buckets[i].used != 0 {
            i = (i + 1) & mask;
        }
        self.buckets[i] = Bucket {
            key: key.0 as u64,
            key_hi: (key.0 >> 64) as u64,
            slot,
            used: 1,
            key_x: key.1,
        };
        self.len += 1;
    }

    /// Remove `key`, closing the gap by shifting later entries of its probe run back (no
    /// tombstones, so lookups stay short after many deletions).
    fn remove(&mut self, key: PackedKey) {
        if self.buckets.is_empty() {
            return;
        }
        let mask = self.buckets.len() - 1;
        let mut i = self.pos(key);
        loop {
            let b = self.buckets[i];
            if b.used == 0 {
                return;
            }
            if b.packed() == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let mut j = i;
        loop {
            j = (j + 1) & mask;
            let b = self.buckets[j];
            if b.used == 0 {
                break;
            }
            // `b` may stay at `j` if its home is cyclically in (i, j].
            let k = self.pos(b.packed());
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if !stays {
                self.buckets[i] = b;
                i = j;
            }
        }
        self.buckets[i] = Bucket::default();
        self.len -= 1;
    }

    fn clear(&mut self) {
        self.buckets.fill(Bucket::default());
        self.len = 0;
    }
}

/// Most tuples (distinct masks) of a ternary table that native code probes itself; with more,
/// it calls the lookup helper (`tern-match`'s pruned tuple-space search).
pub const MAX_NATIVE_TUPLES: u64 = 8;

/// One tuple of a [`TernIndex`] as native code reads it: the mask (packed like the key) and
/// the tuple's [`ExactIndex`] of masked keys.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct TupleView {
    pub mask: u64,
    pub mask_hi: u64,
    pub mask_x: u64,
    pub buckets: *const Bucket,
    /// `buckets.len() - 1`.
    pub bmask: u64,
    pub shift: u64,
}

// SAFETY: the pointer points into an index owned by the same `EntryStore` (or the static
// empty bucket), only read, and the views are rebuilt whenever the store changes or is cloned
// (a cloned view is replaced before anything reads it), as for `IndexView`.
unsafe impl Send for TupleView {}
// SAFETY: as above.
unsafe impl Sync for TupleView {}

/// One mask's entries: the index maps each masked value to its winning slot (smallest
/// `(priority, slot)`, `tern-match`'s ranking); `members` holds every `(priority, slot)` of
/// each value, sorted, so that a delete can hand the value to the next one.
#[derive(Clone, Debug)]
struct Tuple {
    mask: PackedKey,
    index: ExactIndex,
    members: HashMap<PackedKey, Vec<(i32, u32)>>,
}

/// Ternary tables (ternary, exact and validity fields, at most [`MAX_INDEX_KEY`] key bytes):
/// tuple-space search that native code runs inline — per distinct mask one open-addressing
/// index of masked values, each value's winning slot in it, and every slot's priority, so
/// that the best `(priority, slot)` over the tuples is the `tern-match` engine's winner. Kept
/// beside the engine by `EntryStore` on add, delete and clear.
#[derive(Clone, Debug, Default)]
struct TernIndex {
    tuples: Vec<Tuple>,
    /// Priority of each slot (by slot index; stale for free slots, which no index maps to).
    prio: Vec<i32>,
    views: Vec<TupleView>,
}

fn and_key(a: PackedKey, b: PackedKey) -> PackedKey {
    (a.0 & b.0, a.1 & b.1)
}

impl TernIndex {
    fn insert(&mut self, value: PackedKey, mask: PackedKey, prio: i32, slot: u32) {
        if self.prio.len() <= slot as usize {
            self.prio.resize(slot as usize + 1, 0);
        }
        self.prio[slot as usize] = prio;
        let t = match self.tuples.iter().position(|t| t.mask == mask) {
            Some(t) => t,
            None => {
                self.tuples.push(Tuple {
                    mask,
                    index: ExactIndex::default(),
                    members: HashMap::new(),
                });
                self.tuples.len() - 1
            }
        };
        let t = &mut self.tuples[t];
        let v = and_key(value, mask);
        let list = t.members.entry(v).or_default();
        let old = list.first().copied();
        let at = list.partition_point(|m| *m < (prio, slot));
        list.insert(at, (prio, slot));
        if old != list.first().copied() {
            if old.is_some() {
                t.index.remove(v);
            }
            t.index.insert(v, slot);
        }
    }

    fn remove(&mut self, value: PackedKey, mask: PackedKey, prio: i32, slot: u32) {
        let Some(ti) = self.tuples.iter().position(|t| t.mask == mask) else {
            return;
        };
        let t = &mut self.tuples[ti];
        let v = and_key(value, mask);
        let Some(list) = t.members.get_mut(&v) else {
            return;
        };
        let Some(at) = list.iter().position(|m| *m == (prio, slot)) else {
            return;
        };
        list.remove(at);
        if at == 0 {
            t.index.remove(v);
            match list.first() {
                Some(&(_, s)) => t.index.insert(v, s),
                None => {
                    t.members.remove(&v);
                }
            }
        }
        if t.members.is_empty() {
            self.tuples.remove(ti);
        }
    }

    fn clear(&mut self) {
        self.tuples.clear();
    }

    /// The winning slot for a packed key: what the generated code computes.
    fn get(&self, key: PackedKey) -> Option<u32> {
        self.tuples
            .iter()
            .filter_map(|t| {
                let s = t.index.get(and_key(key, t.mask))?;
                Some((self.prio[s as usize], s))
            })
            .min()
            .map(|(_, s)| s)
    }

    fn refresh_views(&mut self) {
        self.views.clear();
        for t in &self.tuples {
            let (buckets, bmask, shift) = if t.index.buckets.is_empty() {
                (NO_BUCKETS.as_ptr(), 1, 63)
            } else {
                (
                    t.index.buckets.as_ptr(),
                    (t.index.buckets.len() - 1) as u64,
                    u64::from(t.index.shift),
                )
            };
            self.views.push(TupleView {
                mask: t.mask.0 as u64,
                mask_hi: (t.mask.0 >> 64) as u64,
                mask_x: t.mask.1,
                buckets,
                bmask,
                shift,
            });
        }
    }
}

/// An empty bucket.
const NO_BUCKET: Bucket = Bucket {
    key: 0,
    key_hi: 0,
    slot: 0,
    used: 0,
    key_x: 0,
};

/// An empty index for views of stores that have none: every probe misses. Two buckets for a
/// shift of 63: native code takes a hash's top bits as the first position without masking
/// them (a shift of `64 - log2(buckets)` leaves nothing to mask), so the first position of an
/// empty view is bucket 0 or 1.
static NO_BUCKETS: [Bucket; 2] = [NO_BUCKET; 2];

/// The first level of an absent [`LpmIndex`]: one miss.
static NO_CELLS: [u32; 1] = [0];

impl Bucket {
    fn packed(&self) -> PackedKey {
        (
            (u128::from(self.key_hi) << 64) | u128::from(self.key),
            self.key_x,
        )
    }
}

/// What native code reads of an [`EntryStore`] to look an exact key up and take the hit's
/// [`HotRec`] without calling back into Rust: where the buckets and records are, and the
/// index's mask and shift. Refreshed by every method that changes them (and by `clone`).
#[derive(Debug)]
#[repr(C)]
pub struct IndexView {
    pub buckets: *const Bucket,
    /// `buckets.len() - 1` (1 for an empty index: the two buckets of `NO_BUCKETS`).
    pub mask: u64,
    pub shift: u64,
    pub hot: *const HotRec,
    /// LPM tables with an [`LpmIndex`] (see [`EntryStore::lpm_indexable`]): its first level,
    /// the first level's index shift, its chunks, and the shift that left-aligns a key.
    /// Tables without one point at a single miss cell with a shift of 32.
    pub lpm_l1: *const u32,
    pub lpm_sh1: u64,
    pub lpm_chunks: *const u32,
    pub lpm_align: u64,
    /// Ternary tables with a [`TernIndex`]: its tuples, their number, and each slot's
    /// priority. Tables without one have no tuples.
    pub tuples: *const TupleView,
    pub ntuples: u64,
    pub prio: *const i32,
}

impl Default for IndexView {
    fn default() -> Self {
        IndexView {
            buckets: NO_BUCKETS.as_ptr(),
            mask: 1,
            shift: 63,
            hot: std::ptr::null(),
            lpm_l1: NO_CELLS.as_ptr(),
            lpm_sh1: 32,
            lpm_chunks: NO_CELLS.as_ptr(),
            lpm_align: 0,
            tuples: std::ptr::null(),
            ntuples: 0,
            prio: std::ptr::null(),
        }
    }
}

// SAFETY: the pointers point into buffers owned by the same `EntryStore` (or the static empty
// bucket); they are only read, through shared access to the store, and are refreshed whenever
// the store changes or is cloned, so sending or sharing the store is as safe as for its
// vectors.
unsafe impl Send for IndexView {}
// SAFETY: as above.
unsafe impl Sync for IndexView {}

/// The entries of one table.
///
/// `slots` may be read and have counters, meters and timestamps changed in place; an entry's
/// action changes only through [`EntryStore::add`], [`EntryStore::set_action`],
/// [`EntryStore::delete`] and [`EntryStore::clear`], which keep its [`HotRec`] in step.
#[derive(Debug, Default)]
pub struct EntryStore {
    pub slots: Vec<Option<Entry>>,
    /// The compact form of each slot's action (same indexes as `slots`).
    hot: Vec<HotRec>,
    /// Exact tables with keys of at most [`MAX_INDEX_KEY`] bytes: the index native code probes.
    index: Option<ExactIndex>,
    /// LPM tables keyed by one LPM field of at most 32 bits: the multibit index lookups use.
    lpm: Option<LpmIndex>,
    /// Ternary tables of at most [`MAX_INDEX_KEY`] key bytes: the tuples native code probes.
    tern: Option<TernIndex>,
    view: IndexView,
    versions: Vec<u8>,
    count: usize,
    /// Free slot indexes below `slots.len()`, lowest first.
    free: BinaryHeap<Reverse<u32>>,
    /// Built from the key spec on the first add.
    engine: Option<MatchTable>,
    pub max_size: u32,
}

impl Clone for EntryStore {
    fn clone(&self) -> Self {
        let mut c = EntryStore {
            slots: self.slots.clone(),
            hot: self.hot.clone(),
            index: self.index.clone(),
            lpm: self.lpm.clone(),
            tern: self.tern.clone(),
            view: IndexView::default(),
            versions: self.versions.clone(),
            count: self.count,
            free: self.free.clone(),
            engine: self.engine.clone(),
            max_size: self.max_size,
        };
        c.refresh_view();
        c
    }
}

impl EntryStore {
    pub fn new(max_size: u32) -> EntryStore {
        EntryStore {
            max_size,
            ..Default::default()
        }
    }

    /// Byte offset of the [`IndexView`] in an `EntryStore` (for native code).
    pub const VIEW_OFFSET: usize = std::mem::offset_of!(EntryStore, view);

    /// Whether a table with this key layout gets an [`ExactIndex`]: exact (and validity)
    /// fields only, no static masks, at most [`MAX_INDEX_KEY`] key bytes.
    pub fn indexable(spec: &KeySpec) -> bool {
        spec.is_exact()
            && !spec.fields.is_empty()
            && spec.total <= MAX_INDEX_KEY
            && spec.fields.iter().all(|f| f.static_mask.is_none())
    }

    /// Whether a table with this key layout gets a [`TernIndex`]: a ternary table of ternary,
    /// exact and validity fields, no static masks, at most [`MAX_INDEX_KEY`] key bytes.
    pub fn tern_indexable(spec: &KeySpec) -> bool {
        spec.table_kind == MatchKind::Ternary
            && !spec.fields.is_empty()
            && spec.total <= MAX_INDEX_KEY
            && spec.fields.iter().all(|f| {
                matches!(
                    f.kind,
                    MatchKind::Ternary | MatchKind::Exact | MatchKind::Valid
                ) && f.static_mask.is_none()
            })
    }

    /// Whether a table with this key layout gets an [`LpmIndex`]: an LPM table whose key is
    /// one LPM field of at most 32 bits, with no static mask.
    pub fn lpm_indexable(spec: &KeySpec) -> bool {
        spec.table_kind == MatchKind::Lpm
            && matches!(spec.fields.as_slice(), [f] if f.kind == MatchKind::Lpm
                && f.static_mask.is_none() && f.off == 0 && (1..=32).contains(&f.width))
    }

    fn refresh_view(&mut self) {
        let mut view = match &self.index {
            Some(ix) if !ix.buckets.is_empty() => IndexView {
                buckets: ix.buckets.as_ptr(),
                mask: (ix.buckets.len() - 1) as u64,
                shift: u64::from(ix.shift),
                hot: self.hot.as_ptr(),
                ..IndexView::default()
            },
            // Tables without an index: native code finds slots through a helper and reads
            // their records here.
            _ => IndexView {
                hot: self.hot.as_ptr(),
                ..IndexView::default()
            },
        };
        if let Some(lx) = &self.lpm {
            let (l1, sh1, chunks, align) = lx.raw();
            view.lpm_l1 = l1;
            view.lpm_sh1 = u64::from(sh1);
            view.lpm_chunks = chunks;
            view.lpm_align = u64::from(align);
        }
        if let Some(tx) = &mut self.tern {
            tx.refresh_views();
            view.tuples = tx.views.as_ptr();
            view.ntuples = tx.views.len() as u64;
            view.prio = tx.prio.as_ptr();
        }
        self.view = view;
    }

    /// The slot the exact index maps a packed key to (what native code finds); `None` when
    /// there is no index or no such entry.
    pub fn index_get(&self, key: PackedKey) -> Option<u32> {
        self.index.as_ref()?.get(key)
    }

    /// The slot the ternary tuples give a packed key (what native code finds); `None` when
    /// there is no such index or no match.
    pub fn tern_get(&self, key: PackedKey) -> Option<u32> {
        self.tern.as_ref()?.get(key)
    }

    /// The view native code reads (see [`IndexView`]).
    pub fn view(&self) -> &IndexView {
        &self.view
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn clear(&mut self) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.take().is_some() {
                self.versions[i] = self.versions[i].wrapping_add(1);
            }
        }
        self.hot.fill(HotRec::default());
        if let Some(ix) = &mut self.index {
            ix.clear();
        }
        if let Some(lx) = &mut self.lpm {
            lx.clear();
        }
        if let Some(tx) = &mut self.tern {
            tx.clear();
        }
        self.refresh_view();
        if let Some(e) = &mut self.engine {
            e.clear();
        }
        self.free = (0..self.slots.len() as u32).map(Reverse).collect();
        self.count = 0;
    }

    /// The lookup engine in use (`None` until the first entry is added).
    pub fn engine(&self) -> Option<&MatchTable> {
        self.engine.as_ref()
    }

    fn handle(&self, idx: u32) -> EntryHandle {
        ((self.versions[idx as usize] as u32) << 24) | idx
    }

    /// Resolve a handle to a slot index (`INVALID_HANDLE` / `EXPIRED_HANDLE`).
    pub fn index(&self, h: EntryHandle) -> Result<u32, TableError> {
        let idx = h & 0xff_ffff;
        let ver = (h >> 24) as u8;
        match self.slots.get(idx as usize) {
            Some(Some(_)) if self.versions[idx as usize] == ver => Ok(idx),
            Some(Some(_)) => Err(TableError::EXPIRED_HANDLE),
            _ => Err(TableError::INVALID_HANDLE),
        }
    }

    pub fn get(&self, h: EntryHandle) -> Result<&Entry, TableError> {
        let i = self.index(h)?;
        self.slots[i as usize]
            .as_ref()
            .ok_or(TableError::INVALID_HANDLE)
    }

    /// The entry, to change anything but its action (see [`EntryStore::set_action`]).
    pub fn get_mut(&mut self, h: EntryHandle) -> Result<&mut Entry, TableError> {
        let i = self.index(h)?;
        self.slots[i as usize]
            .as_mut()
            .ok_or(TableError::INVALID_HANDLE)
    }

    /// Replace an entry's action (and its compact form).
    pub fn set_action(&mut self, h: EntryHandle, action: EntryAction) -> Result<(), TableError> {
        let i = self.index(h)? as usize;
        let e = self.slots[i].as_mut().ok_or(TableError::INVALID_HANDLE)?;
        self.hot[i] = HotRec::of(&action);
        e.action = action;
        Ok(())
    }

    /// The compact form of slot `i`'s action (see [`HotRec`]).
    #[inline(always)]
    pub fn hot(&self, i: u32) -> &HotRec {
        &self.hot[i as usize]
    }

    /// Find an entry with exactly this normalized key (and priority for priority tables).
    pub fn find(
        &self,
        spec: &KeySpec,
        value: &[u8],
        mask: &[u8],
        ranges: &[(u32, u32, Vec<u8>, Vec<u8>)],
        priority: i32,
    ) -> Option<u32> {
        self.engine.as_ref()?.find(&EntryKey {
            value,
            mask,
            ranges,
            prefix_len: prefix_from_mask(spec, mask),
            priority,
        })
    }

    /// Add an entry; returns its handle.
    pub fn add(
        &mut self,
        spec: &KeySpec,
        params: &[MatchParam],
        priority: i32,
        action: EntryAction,
    ) -> Result<EntryHandle, TableError> {
        if spec.fields.is_empty() {
            return Err(TableError::NO_TABLE_KEY);
        }
        let (value, mask, ranges, prefix, params) = normalize(spec, params)?;
        if self.engine.is_none() && EntryStore::indexable(spec) {
            self.index = Some(ExactIndex::default());
        }
        if self.engine.is_none() && EntryStore::lpm_indexable(spec) {
            self.lpm = LpmIndex::new(spec.fields[0].width);
        }
        if self.engine.is_none() && EntryStore::tern_indexable(spec) {
            self.tern = Some(TernIndex::default());
        }
        let engine = self.engine.get_or_insert_with(|| engine_for(spec));
        let key = EntryKey {
            value: &value,
            mask: &mask,
            ranges: &ranges,
            prefix_len: prefix,
            priority,
        };
        if engine.find(&key).is_some() {
            return Err(TableError::DUPLICATE_ENTRY);
        }
        if self.count as u64 >= self.max_size as u64 {
            return Err(TableError::TABLE_FULL);
        }
        let idx = match self.free.peek() {
            Some(&Reverse(i)) => i as usize,
            None => self.slots.len(),
        };
        if idx > 0xff_ffff {
            return Err(TableError::TABLE_FULL);
        }
        match engine.insert(idx as u32, &key) {
            Ok(()) => {}
            Err(MatchError::Duplicate { .. }) => return Err(TableError::DUPLICATE_ENTRY),
            Err(_) => return Err(TableError::BAD_MATCH_KEY),
        }
        if idx == self.slots.len() {
            self.slots.push(None);
            self.versions.push(0);
            self.hot.push(HotRec::default());
        } else {
            self.free.pop();
        }
        self.hot[idx] = HotRec::of(&action);
        if let Some(ix) = &mut self.index {
            ix.insert(packed_key(&value), idx as u32);
        }
        if let Some(lx) = &mut self.lpm {
            lx.insert(crate::layout::be_read(&value), prefix, idx as u32);
        }
        if let Some(tx) = &mut self.tern {
            tx.insert(packed_key(&value), packed_key(&mask), priority, idx as u32);
        }
        let priority = if spec.has_priority() { priority } else { -1 };
        self.slots[idx] = Some(Entry {
            value,
            mask,
            ranges,
            prefix,
            priority,
            params,
            action,
            counter: CounterValue::default(),
            meter: Meter::default(),
            timeout_ms: None,
            last_hit_us: 0,
        });
        self.count += 1;
        self.refresh_view();
        Ok(self.handle(idx as u32))
    }

    pub fn delete(&mut self, h: EntryHandle) -> Result<Entry, TableError> {
        let i = self.index(h)? as usize;
        let e = self.slots[i].take().ok_or(TableError::INVALID_HANDLE)?;
        self.hot[i] = HotRec::default();
        if let Some(ix) = &mut self.index {
            ix.remove(packed_key(&e.value));
        }
        if let Some(lx) = &mut self.lpm {
            lx.remove(crate::layout::be_read(&e.value), e.prefix);
        }
        if let Some(tx) = &mut self.tern {
            tx.remove(
                packed_key(&e.value),
                packed_key(&e.mask),
                e.priority,
                i as u32,
            );
        }
        self.refresh_view();
        if let Some(engine) = &mut self.engine {
            // The slot and the engine hold the same entries; a miss here cannot happen.
            let _ = engine.delete(i as u32);
        }
        self.free.push(Reverse(i as u32));
        self.versions[i] = self.versions[i].wrapping_add(1);
        self.count -= 1;
        Ok(e)
    }

    /// The handle of slot `i`.
    pub fn handle_of(&self, i: u32) -> EntryHandle {
        self.handle(i)
    }

    /// Look up a packed key; returns the slot index of the winning entry.
    #[inline(always)]
    pub fn lookup(&self, _spec: &KeySpec, key: &[u8]) -> Option<u32> {
        if self.count == 0 {
            return None;
        }
        if let Some(lx) = &self.lpm {
            // Same winner as the engine (prefixes are unique): `lpm_index_agrees_with_the_matcher`.
            return lx.get(crate::layout::be_read(key));
        }
        self.engine.as_ref()?.lookup(key)
    }
}

/// An action profile's members and groups.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    pub members: Vec<Option<(u32, Vec<Vec<u8>>)>>,
    /// Uses of each member by entries, defaults and groups.
    pub member_refs: Vec<u32>,
    pub groups: Vec<Option<Vec<u32>>>,
    pub group_refs: Vec<u32>,
}

impl Profile {
    pub fn add_member(&mut self, action: u32, data: Vec<Vec<u8>>) -> u32 {
        let idx = match self.members.iter().position(|m| m.is_none()) {
            Some(i) => i,
            None => {
                self.members.push(None);
                self.member_refs.push(0);
                self.members.len() - 1
            }
        };
        self.members[idx] = Some((action, data));
        self.member_refs[idx] = 0;
        idx as u32
    }

    pub fn member(&self, m: u32) -> Result<&(u32, Vec<Vec<u8>>), TableError> {
        self.members
            .get(m as usize)
            .and_then(|x| x.as_ref())
            .ok_or(TableError::INVALID_MBR_HANDLE)
    }

    pub fn group(&self, g: u32) -> Result<&Vec<u32>, TableError> {
        self.groups
            .get(g as usize)
            .and_then(|x| x.as_ref())
            .ok_or(TableError::INVALID_GRP_HANDLE)
    }

    pub fn create_group(&mut self) -> u32 {
        let idx = match self.groups.iter().position(|m| m.is_none()) {
            Some(i) => i,
            None => {
                self.groups.push(None);
                self.group_refs.push(0);
                self.groups.len() - 1
            }
        };
        self.groups[idx] = Some(Vec::new());
        self.group_refs[idx] = 0;
        idx as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(kind: MatchKind, width: u32) -> KeySpec {
        let nbytes = width.div_ceil(8);
        KeySpec {
            fields: vec![KeyField {
                kind,
                off: 0,
                nbytes,
                width,
                static_mask: None,
            }],
            total: nbytes,
            table_kind: kind,
        }
    }

    fn act(a: u32) -> EntryAction {
        EntryAction::Action {
            action: a,
            data: vec![],
        }
    }

    /// The exact index agrees with the matcher after random adds, deletes (with backward
    /// shifts through wrapped probe runs) and clears, over a small key space so that runs
    /// collide; the view describes the index; a clone gets its own view.
    #[test]
    fn exact_index_agrees_with_the_matcher() {
        // 2-byte keys, 16-byte keys (`key << 64 | key * odd`: both halves vary), and 18- and
        // 24-byte keys (the 16 bytes after a prefix that varies too).
        for width in [16u32, 128, 144, 192] {
            let t = index_vs_matcher(width);
            check_view(&t);
        }
    }

    fn key_bytes(width: u32, k: u16) -> Vec<u8> {
        if width > 128 {
            let x = (u64::from(k) * 0x0001_0003_0007_000b).to_be_bytes();
            let mut b = x[8 - (width - 128).div_ceil(8) as usize..].to_vec();
            b.extend(key_bytes(128, k));
            return b;
        }
        let k = u128::from(k);
        let v = if width > 64 {
            (k << 64) | (k * 0x1_0000_0001)
        } else {
            k
        };
        v.to_be_bytes()[16 - width.div_ceil(8) as usize..].to_vec()
    }

    fn index_vs_matcher(width: u32) -> EntryStore {
        let s = spec(MatchKind::Exact, width);
        assert!(EntryStore::indexable(&s));
        let mut t = EntryStore::new(100_000);
        let mut handles: std::collections::HashMap<u16, EntryHandle> = Default::default();
        let mut x = 0x9e37_79b9u64;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let k = (x % 600) as u16;
            if step % 5_000 == 4_999 {
                t.clear();
                handles.clear();
            } else if let Some(h) = handles.remove(&k) {
                t.delete(h).unwrap();
            } else {
                let h = t.add(&s, &[MatchParam::Exact(key_bytes(width, k))], 0, act(1));
                handles.insert(k, h.unwrap());
            }
            if step % 97 == 0 || step > 19_900 {
                for k in 0..600u16 {
                    let b = key_bytes(width, k);
                    let want = t.lookup(&s, &b);
                    assert_eq!(t.index_get(packed_key(&b)), want, "step {step} key {k}");
                }
            }
        }
        t
    }

    fn check_view(t: &EntryStore) {
        let v = t.view();
        let ix = t.index.as_ref().unwrap();
        assert_eq!(
            (v.buckets, v.mask as usize + 1),
            (ix.buckets.as_ptr(), ix.buckets.len())
        );
        assert!(ix.len * 2 <= ix.buckets.len());
        let c = t.clone();
        assert_eq!(c.view().buckets, c.index.as_ref().unwrap().buckets.as_ptr());
        assert_ne!(c.view().buckets, v.buckets);
        assert_eq!(c.view().hot, c.hot.as_ptr());
    }

    /// The ternary tuples give the matcher's winner (smallest priority, ties to the smallest
    /// slot) after random adds, deletes and clears of overlapping entries under a few masks,
    /// with repeated priorities and values shared by several entries; for 3-, 13- and 24-byte
    /// keys (one ternary field); the view describes the tuples; a clone gets its own.
    #[test]
    fn tern_index_agrees_with_the_matcher() {
        for width in [24u32, 104, 192] {
            let nb = width.div_ceil(8) as usize;
            let s = spec(MatchKind::Ternary, width);
            assert!(EntryStore::tern_indexable(&s));
            let mut t = EntryStore::new(100_000);
            let mut live: Vec<EntryHandle> = Vec::new();
            let mut x = 0x2545_f491u64 ^ u64::from(width);
            let mut next = move || {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x
            };
            // Keys from a small space: byte i is one of four values.
            let key = |r: u64| -> Vec<u8> {
                (0..nb)
                    .map(|i| [0x00, 0x0f, 0xf0, 0xff][((r >> (2 * (i % 32))) & 3) as usize])
                    .collect()
            };
            let masks: Vec<Vec<u8>> = (0..5u8)
                .map(|m| {
                    (0..nb)
                        .map(|i| match m {
                            0 => 0xff,
                            1 => 0xf0,
                            2 if i % 2 == 0 => 0xff,
                            3 if i == 0 => 0x0f,
                            _ => 0,
                        })
                        .collect()
                })
                .collect();
            for step in 0..6_000 {
                let r = next();
                if step % 2_000 == 1_999 {
                    t.clear();
                    live.clear();
                } else if r % 3 == 0 && !live.is_empty() {
                    let h = live.swap_remove((r >> 8) as usize % live.len());
                    t.delete(h).unwrap();
                } else {
                    let m = &masks[(r >> 4) as usize % masks.len()];
                    let p = [MatchParam::Ternary {
                        key: key(r >> 12),
                        mask: m.clone(),
                    }];
                    // Duplicates (same value, mask and priority) are refused, as by BMv2.
                    if let Ok(h) = t.add(&s, &p, (r >> 40) as i32 % 4, act(1)) {
                        live.push(h);
                    }
                }
                if step % 53 == 0 || step > 5_950 {
                    for q in 0..64u64 {
                        let k = key(next());
                        let want = t.lookup(&s, &k);
                        assert_eq!(
                            t.tern_get(packed_key(&k)),
                            want,
                            "width {width} step {step} query {q}"
                        );
                    }
                    let v = t.view();
                    let tx = t.tern.as_ref().unwrap();
                    assert_eq!(v.ntuples as usize, tx.tuples.len());
                    assert!(v.ntuples <= masks.len() as u64);
                }
            }
            let c = t.clone();
            assert_ne!(c.view().tuples, t.view().tuples);
            assert_ne!(c.view().prio, t.view().prio);
        }
    }

    /// The LPM index gives the matcher's winner after random adds, deletes and clears of
    /// nested and overlapping prefixes (widths 32, 20 and 9), and its view points at it.
    #[test]
    fn lpm_index_agrees_with_the_matcher() {
        for width in [32u32, 20, 9] {
            let s = spec(MatchKind::Lpm, width);
            assert!(EntryStore::lpm_indexable(&s));
            let nb = width.div_ceil(8) as usize;
            let mut t = EntryStore::new(100_000);
            let mut handles: std::collections::HashMap<(u64, u32), EntryHandle> =
                Default::default();
            let mut x = 0x9e37_79b9u64 ^ u64::from(width);
            let wmask = (1u64 << width) - 1;
            let bytes = |v: u64| v.to_be_bytes()[8 - nb..].to_vec();
            for step in 0..4_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Keys near a few bases, so prefixes nest.
                let base = [0x0a00_0000u64, 0xc0a8_0100, 0x0a01_0000][(x >> 50) as usize % 3];
                let v = (base ^ (x & 0x3_ffff)) & wmask;
                let len = (x >> 20) as u32 % (width + 1);
                let norm = if len == 0 {
                    0
                } else {
                    v & (wmask << (width - len)) & wmask
                };
                if step % 1_500 == 1_499 {
                    t.clear();
                    handles.clear();
                } else if let Some(h) = handles.remove(&(norm, len)) {
                    t.delete(h).unwrap();
                } else {
                    let p = [MatchParam::Lpm {
                        key: bytes(v),
                        prefix_len: len,
                    }];
                    handles.insert((norm, len), t.add(&s, &p, 0, act(1)).unwrap());
                }
                if step % 97 == 0 || step > 3_990 {
                    for q in 0..200u64 {
                        let k = bytes((base ^ (q * 0x1_0101 % 0x4_0000)) & wmask);
                        let want = t.engine().and_then(|e| e.lookup(&k));
                        let want = if t.is_empty() { None } else { want };
                        assert_eq!(t.lookup(&s, &k), want, "w{width} step {step} key {k:?}");
                    }
                }
            }
            let (v, lx) = (t.view(), t.lpm.as_ref().unwrap());
            assert_eq!(v.lpm_l1, lx.raw().0);
            let c = t.clone();
            assert_eq!(c.view().lpm_l1, c.lpm.as_ref().unwrap().raw().0);
            assert_ne!(c.view().lpm_l1, v.lpm_l1);
        }
        assert!(!EntryStore::lpm_indexable(&spec(MatchKind::Lpm, 33)));
        assert!(!EntryStore::lpm_indexable(&spec(MatchKind::Exact, 16)));
    }

    /// The compact record follows the entry's action through add, modify, delete and clear;
    /// members, groups and actions with more than `HOT_PARAMS` parameters have none.
    #[test]
    fn hot_records_follow_the_entries() {
        let s = spec(MatchKind::Exact, 16);
        let mut t = EntryStore::new(10);
        let with = |a: u32, data: Vec<Vec<u8>>| EntryAction::Action { action: a, data };
        let k = |v: u8| [MatchParam::Exact(vec![0, v])];
        let h = t
            .add(&s, &k(1), 0, with(3, vec![vec![1, 2], vec![9; 12]]))
            .unwrap();
        let i = t.index(h).unwrap();
        assert_eq!(t.hot(i).action(), Some((3, 2)));
        // Wider than 64 bits: the low 64 bits, as the interpreter's `be_read` gives them.
        assert_eq!(t.hot(i).params[..2], [0x0102, 0x0909_0909_0909_0909]);
        t.set_action(h, with(4, vec![vec![7]])).unwrap();
        assert_eq!((t.hot(i).action(), t.hot(i).params[0]), (Some((4, 1)), 7));
        t.set_action(h, EntryAction::Member(0)).unwrap();
        assert_eq!(t.hot(i).action(), None);
        t.set_action(h, with(5, vec![vec![1]; HOT_PARAMS + 1]))
            .unwrap();
        assert_eq!(t.hot(i).action(), None);
        t.delete(h).unwrap();
        assert_eq!(t.hot(i).action(), None);
        let h = t.add(&s, &k(2), 0, with(6, vec![])).unwrap();
        assert_eq!(t.index(h).unwrap(), i, "slot reused");
        assert_eq!(t.hot(i).action(), Some((6, 0)));
        t.clear();
        assert_eq!(t.hot(i).action(), None);
        assert_eq!(std::mem::size_of::<HotRec>(), 32);
    }

    #[test]
    fn handles_versions_and_reuse() {
        let s = spec(MatchKind::Exact, 9);
        let mut t = EntryStore::new(2);
        let h0 = t
            .add(&s, &[MatchParam::Exact(vec![0xff, 0x01])], 0, act(0))
            .unwrap();
        assert_eq!(h0, 0);
        // Bits above the width are cleared: 0xff01 -> 0x0101.
        assert_eq!(t.lookup(&s, &[0x01, 0x01]), Some(0));
        assert_eq!(
            t.add(&s, &[MatchParam::Exact(vec![0x01, 0x01])], 0, act(1)),
            Err(TableError::DUPLICATE_ENTRY)
        );
        let h1 = t
            .add(&s, &[MatchParam::Exact(vec![0, 2])], 0, act(1))
            .unwrap();
        assert_eq!(h1, 1);
        assert_eq!(
            t.add(&s, &[MatchParam::Exact(vec![0, 3])], 0, act(1)),
            Err(TableError::TABLE_FULL)
        );
        t.delete(h0).unwrap();
        assert_eq!(t.delete(h0).unwrap_err(), TableError::INVALID_HANDLE);
        let h2 = t
            .add(&s, &[MatchParam::Exact(vec![0, 3])], 0, act(1))
            .unwrap();
        assert_eq!(h2, 1 << 24);
        assert_eq!(t.get(h0).unwrap_err(), TableError::EXPIRED_HANDLE);
        assert_eq!(
            t.add(&s, &[MatchParam::Exact(vec![3])], 0, act(1)),
            Err(TableError::BAD_MATCH_KEY)
        );
    }

    #[test]
    fn lpm_longest_prefix_and_ternary_priority() {
        let s = spec(MatchKind::Lpm, 32);
        let mut t = EntryStore::new(10);
        t.add(
            &s,
            &[MatchParam::Lpm {
                key: vec![10, 0, 0, 0],
                prefix_len: 8,
            }],
            0,
            act(0),
        )
        .unwrap();
        t.add(
            &s,
            &[MatchParam::Lpm {
                key: vec![10, 0, 1, 0],
                prefix_len: 24,
            }],
            0,
            act(1),
        )
        .unwrap();
        assert_eq!(t.lookup(&s, &[10, 0, 1, 5]), Some(1));
        assert_eq!(t.lookup(&s, &[10, 9, 1, 5]), Some(0));
        assert_eq!(t.lookup(&s, &[11, 0, 1, 5]), None);
        assert!(t
            .add(
                &s,
                &[MatchParam::Lpm {
                    key: vec![10, 0, 0, 0],
                    prefix_len: 33
                }],
                0,
                act(0)
            )
            .is_err());

        let s = spec(MatchKind::Ternary, 8);
        let mut t = EntryStore::new(10);
        t.add(
            &s,
            &[MatchParam::Ternary {
                key: vec![0],
                mask: vec![0],
            }],
            5,
            act(0),
        )
        .unwrap();
        t.add(
            &s,
            &[MatchParam::Ternary {
                key: vec![7],
                mask: vec![0xff],
            }],
            3,
            act(1),
        )
        .unwrap();
        // Same key and mask, different priority: allowed.
        t.add(
            &s,
            &[MatchParam::Ternary {
                key: vec![7],
                mask: vec![0xff],
            }],
            1,
            act(2),
        )
        .unwrap();
        assert_eq!(t.lookup(&s, &[7]), Some(2));
        assert_eq!(t.lookup(&s, &[8]), Some(0));
        let s = spec(MatchKind::Range, 16);
        let mut t = EntryStore::new(10);
        t.add(
            &s,
            &[MatchParam::Range {
                start: vec![0, 10],
                end: vec![0, 20],
            }],
            1,
            act(0),
        )
        .unwrap();
        assert_eq!(t.lookup(&s, &[0, 15]), Some(0));
        assert_eq!(t.lookup(&s, &[0, 21]), None);
        assert!(t
            .add(
                &s,
                &[MatchParam::Range {
                    start: vec![0, 30],
                    end: vec![0, 20]
                }],
                1,
                act(0)
            )
            .is_err());
    }

    fn field(kind: MatchKind, off: u32, width: u32) -> KeyField {
        KeyField {
            kind,
            off,
            nbytes: width.div_ceil(8),
            width,
            static_mask: None,
        }
    }

    #[test]
    fn engine_choice_follows_the_key_layout() {
        let spec = |table_kind, fields: Vec<KeyField>| KeySpec {
            total: fields.iter().map(|f| f.off + f.nbytes).max().unwrap_or(0),
            fields,
            table_kind,
        };
        let name = |s: &KeySpec| engine_for(s).engine_name();
        let e = field(MatchKind::Exact, 0, 9);
        let l = field(MatchKind::Lpm, 2, 32);
        let t = field(MatchKind::Ternary, 2, 32);
        let r = field(MatchKind::Range, 2, 16);
        assert_eq!(name(&spec(MatchKind::Exact, vec![e.clone()])), "exact-hash");
        assert_eq!(
            name(&spec(MatchKind::Lpm, vec![e.clone(), l.clone()])),
            "lpm-multibit-trie"
        );
        assert_eq!(
            name(&spec(MatchKind::Ternary, vec![e.clone(), t.clone()])),
            "ternary-tuple-space"
        );
        assert_eq!(
            name(&spec(MatchKind::Range, vec![e.clone(), r])),
            "range-sorted-scan"
        );
        // An lpm table with a ternary key or a static mask on the LPM field: scan.
        assert_eq!(
            name(&spec(MatchKind::Lpm, vec![e.clone(), t])),
            "linear-scan"
        );
        let mut masked = l;
        masked.static_mask = Some(vec![0xff, 0xff, 0, 0]);
        assert_eq!(name(&spec(MatchKind::Lpm, vec![e, masked])), "linear-scan");
    }

    #[test]
    fn freed_slots_are_reused_lowest_first_and_find_sees_lpm_entries() {
        let s = spec(MatchKind::Lpm, 16);
        let mut t = EntryStore::new(100);
        let lpm = |a: u8, p: u32| MatchParam::Lpm {
            key: vec![a, 0],
            prefix_len: p,
        };
        let hs: Vec<EntryHandle> = (0..5)
            .map(|i| t.add(&s, &[lpm(i, 8)], 0, act(i as u32)).unwrap())
            .collect();
        t.delete(hs[3]).unwrap();
        t.delete(hs[1]).unwrap();
        let a = t.add(&s, &[lpm(9, 8)], 0, act(0)).unwrap();
        let b = t.add(&s, &[lpm(10, 8)], 0, act(0)).unwrap();
        assert_eq!((a & 0xff_ffff, b & 0xff_ffff), (1, 3));
        assert_eq!(t.lookup(&s, &[9, 77]), Some(1));
        assert_eq!(t.lookup(&s, &[3, 77]), None);
        let (v, m, r, _, _) = normalize(&s, &[lpm(10, 8)]).unwrap();
        assert_eq!(t.find(&s, &v, &m, &r, 0), Some(3));
        let (v, m, r, _, _) = normalize(&s, &[lpm(10, 9)]).unwrap();
        assert_eq!(t.find(&s, &v, &m, &r, 0), None);
        t.clear();
        assert_eq!(t.lookup(&s, &[9, 77]), None);
        let c = t.add(&s, &[lpm(9, 8)], 0, act(0)).unwrap();
        assert_eq!(c & 0xff_ffff, 0);
    }

    /// The ranking the store had before tern-match: scan every slot, longest prefix for lpm
    /// tables, else lowest priority, ties to the lowest slot.
    fn scan_lookup(t: &EntryStore, spec: &KeySpec, key: &[u8]) -> Option<u32> {
        let mut best: Option<(u32, &Entry)> = None;
        for (i, e) in t.slots.iter().enumerate() {
            let Some(e) = e else { continue };
            if !tern_match::entry_matches(&e.value, &e.mask, &e.ranges, key) {
                continue;
            }
            let better = best.is_none_or(|(_, b)| {
                if spec.table_kind == MatchKind::Lpm {
                    e.prefix > b.prefix
                } else {
                    e.priority < b.priority
                }
            });
            if better {
                best = Some((i as u32, e));
            }
        }
        best.map(|(i, _)| i)
    }

    #[test]
    fn store_lookups_equal_the_old_scan_for_mixed_keys() {
        let seed = std::cell::Cell::new(0x2545_f491_4f6c_dd1du64);
        let rnd = || {
            let mut x = seed.get();
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            seed.set(x);
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        };
        let mk = |table_kind, fields: Vec<KeyField>| KeySpec {
            total: fields.iter().map(|f| f.off + f.nbytes).max().unwrap(),
            fields,
            table_kind,
        };
        let valid = KeyField {
            kind: MatchKind::Valid,
            off: 6,
            nbytes: 1,
            width: 1,
            static_mask: None,
        };
        let specs = [
            mk(
                MatchKind::Lpm,
                vec![
                    field(MatchKind::Exact, 0, 9),
                    field(MatchKind::Lpm, 2, 32),
                    valid,
                ],
            ),
            mk(
                MatchKind::Ternary,
                vec![
                    field(MatchKind::Exact, 0, 8),
                    field(MatchKind::Ternary, 1, 16),
                    field(MatchKind::Lpm, 3, 24),
                ],
            ),
            mk(
                MatchKind::Range,
                vec![
                    field(MatchKind::Range, 0, 16),
                    field(MatchKind::Ternary, 2, 8),
                ],
            ),
        ];
        for spec in &specs {
            let mut t = EntryStore::new(100_000);
            let mut handles = Vec::new();
            // Small value spaces: overlaps, duplicates and equal priorities are common.
            let small = |n: u32| -> Vec<u8> {
                let mut v: Vec<u8> = (0..n).map(|_| rnd() as u8 & 0x3).collect();
                if let Some(b) = v.first_mut() {
                    *b &= 0x1;
                }
                v
            };
            for _ in 0..1500 {
                let params: Vec<MatchParam> = spec
                    .fields
                    .iter()
                    .map(|f| match f.kind {
                        MatchKind::Exact => MatchParam::Exact(small(f.nbytes)),
                        MatchKind::Valid => MatchParam::Valid(small(1)[0] == 1),
                        MatchKind::Lpm => MatchParam::Lpm {
                            key: small(f.nbytes),
                            prefix_len: (small(1)[0] as u32 * 7 + small(1)[0] as u32)
                                % (f.width + 1),
                        },
                        MatchKind::Ternary => MatchParam::Ternary {
                            key: small(f.nbytes),
                            mask: small(f.nbytes).iter().map(|b| b * 0x55).collect(),
                        },
                        MatchKind::Range => {
                            let a = (rnd() % 8) as u16;
                            let b = a + (rnd() % 4) as u16;
                            MatchParam::Range {
                                start: a.to_be_bytes().to_vec(),
                                end: b.to_be_bytes().to_vec(),
                            }
                        }
                    })
                    .collect();
                if let Ok(h) = t.add(spec, &params, (rnd() % 4) as i32, act(0)) {
                    handles.push(h);
                }
            }
            for h in handles.iter().step_by(3) {
                t.delete(*h).unwrap();
            }
            assert!(
                t.len() > 50,
                "{:?}: only {} entries",
                spec.table_kind,
                t.len()
            );
            let mut hits = 0;
            for _ in 0..4000 {
                let key = small(spec.total);
                let got = t.lookup(spec, &key);
                assert_eq!(
                    got,
                    scan_lookup(&t, spec, &key),
                    "{:?} key {key:?}",
                    spec.table_kind
                );
                hits += got.is_some() as u32;
            }
            assert!(hits > 200, "{:?}: {hits} hits", spec.table_kind);
        }
    }
}
