//! Match engines for P4 tables with BMv2's ranking rules, on packed key bytes.
//!
//! * exact → hash map on the packed key ([`exact`]);
//! * lpm (one LPM field plus exact/valid fields) → multibit trie with a 16-bit root stride and
//!   8-bit strides below, prefix expansion and per-slot prefix lengths ([`lpm`]); the longest
//!   prefix wins;
//! * ternary → tuple-space search, one hash table per distinct mask, tuples visited in order
//!   of their best priority and pruned ([`ternary`]);
//! * range → entries kept sorted by (priority, handle), first match wins ([`range`]);
//! * [`scan`] → a plain linear scan with the same rules, used as the fallback for irregular
//!   layouts and as the reference in differential tests.
//!
//! Ranking (`bmv2-json.md` §7.6): lpm → longest prefix; ternary/range → numerically smallest
//! priority, ties to the smallest handle (BMv2's "smallest internal index"). Handles are small
//! dense integers chosen by the caller (table slot indexes); per-handle records grow with the
//! largest handle used.

pub mod exact;
pub mod key;
pub mod lpm;
pub mod range;
pub mod scan;
pub mod ternary;

use std::fmt;

/// A table's ranking rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Exact,
    Lpm,
    Ternary,
    Range,
}

impl Kind {
    /// Ternary and range entries carry a priority (part of their identity).
    pub fn has_priority(self) -> bool {
        matches!(self, Kind::Ternary | Kind::Range)
    }
}

/// Where the LPM field sits in the packed key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LpmField {
    /// Byte offset in the packed key.
    pub off: usize,
    /// Byte length (`width.div_ceil(8)`).
    pub nbytes: usize,
    /// Bit width; the top `nbytes * 8 - width` bits of the first byte are padding.
    pub width: u32,
}

/// A table's packed-key layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    pub kind: Kind,
    /// Bytes of every packed key and entry value/mask.
    pub key_len: usize,
    /// The LPM field (lpm tables).
    pub lpm: Option<LpmField>,
}

/// A range field of an entry: `(byte offset, byte length, start, end)`, bounds compared as
/// big-endian byte strings, inclusive.
pub type RangeSpec = (u32, u32, Vec<u8>, Vec<u8>);

/// One entry's match key, normalized: `value` is pre-ANDed with `mask`.
#[derive(Clone, Copy, Debug)]
pub struct EntryKey<'a> {
    pub value: &'a [u8],
    pub mask: &'a [u8],
    /// Range fields (their bytes have mask 0 in `mask`).
    pub ranges: &'a [RangeSpec],
    /// Prefix length of the LPM field in bits (lpm tables).
    pub prefix_len: u32,
    /// Priority (ternary/range tables): numerically smaller wins.
    pub priority: i32,
}

/// Why an engine refused an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MatchError {
    /// A value, mask or range bound has the wrong byte length.
    KeyLength {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A range field lies outside the key or has `start > end`.
    BadRange { index: usize, reason: &'static str },
    /// The prefix length exceeds the LPM field's width.
    PrefixTooLong { prefix_len: u32, width: u32 },
    /// An lpm-table entry whose non-LPM mask differs from the table's other entries at `byte`.
    MaskMismatch { byte: usize },
    /// The layout is unusable (explained).
    BadLayout(String),
    /// An entry with the same key (and priority, where it counts) exists under `existing`.
    Duplicate { existing: u32 },
    /// The handle already holds an entry.
    HandleInUse(u32),
    /// No entry under this handle.
    UnknownHandle(u32),
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::KeyLength {
                what,
                expected,
                got,
            } => write!(
                f,
                "entry {what} has {got} bytes, the table key has {expected}"
            ),
            MatchError::BadRange { index, reason } => write!(f, "range field #{index}: {reason}"),
            MatchError::PrefixTooLong { prefix_len, width } => write!(
                f,
                "prefix length {prefix_len} exceeds the LPM field width {width}"
            ),
            MatchError::MaskMismatch { byte } => write!(
                f,
                "lpm entry's mask of the non-LPM key bytes differs from the table's at byte {byte}"
            ),
            MatchError::BadLayout(s) => write!(f, "bad key layout: {s}"),
            MatchError::Duplicate { existing } => {
                write!(f, "duplicate entry (same key as handle {existing})")
            }
            MatchError::HandleInUse(h) => write!(f, "handle {h} already holds an entry"),
            MatchError::UnknownHandle(h) => write!(f, "no entry with handle {h}"),
        }
    }
}

impl std::error::Error for MatchError {}

/// Does `key` match an entry (value/mask and ranges)?
#[inline]
pub fn entry_matches(value: &[u8], mask: &[u8], ranges: &[RangeSpec], key: &[u8]) -> bool {
    if key.len() != value.len() {
        return false;
    }
    if key
        .iter()
        .zip(mask)
        .zip(value)
        .any(|((k, m), v)| k & m != *v)
    {
        return false;
    }
    ranges.iter().all(|(off, n, s, e)| {
        let k = &key[*off as usize..(*off + *n) as usize];
        k >= s.as_slice() && k <= e.as_slice()
    })
}

/// Per-handle records, indexed by handle.
#[derive(Clone, Debug)]
pub(crate) struct Slots<T> {
    v: Vec<Option<T>>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { v: Vec::new() }
    }
}

impl<T> Slots<T> {
    pub(crate) fn check_free(&self, h: u32) -> Result<(), MatchError> {
        match self.v.get(h as usize) {
            Some(Some(_)) => Err(MatchError::HandleInUse(h)),
            _ => Ok(()),
        }
    }
    pub(crate) fn set(&mut self, h: u32, t: T) {
        let i = h as usize;
        if i >= self.v.len() {
            self.v.resize_with(i + 1, || None);
        }
        self.v[i] = Some(t);
    }
    pub(crate) fn take(&mut self, h: u32) -> Result<T, MatchError> {
        self.v
            .get_mut(h as usize)
            .and_then(|s| s.take())
            .ok_or(MatchError::UnknownHandle(h))
    }
    pub(crate) fn get(&self, h: u32) -> Option<&T> {
        self.v.get(h as usize).and_then(|s| s.as_ref())
    }
    pub(crate) fn clear(&mut self) {
        self.v.clear();
    }
    pub(crate) fn bytes(&self) -> usize {
        self.v.capacity() * std::mem::size_of::<Option<T>>()
    }
    pub(crate) fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.v
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.as_ref().map(|t| (i as u32, t)))
    }
}

#[derive(Clone, Debug)]
enum Engine {
    Exact8(exact::ExactTable<u64>),
    Exact16(exact::ExactTable<u128>),
    ExactWide(exact::ExactTable<Box<[u8]>>),
    Lpm8(lpm::LpmTable<u64>),
    Lpm16(lpm::LpmTable<u128>),
    LpmWide(lpm::LpmTable<Box<[u8]>>),
    Tern8(ternary::TernaryTable<u64>),
    Tern16(ternary::TernaryTable<u128>),
    TernWide(ternary::TernaryTable<Box<[u8]>>),
    Range(range::RangeTable),
    Scan(scan::ScanTable),
}

macro_rules! each {
    ($self:expr, $t:ident => $e:expr) => {
        match $self {
            Engine::Exact8($t) => $e,
            Engine::Exact16($t) => $e,
            Engine::ExactWide($t) => $e,
            Engine::Lpm8($t) => $e,
            Engine::Lpm16($t) => $e,
            Engine::LpmWide($t) => $e,
            Engine::Tern8($t) => $e,
            Engine::Tern16($t) => $e,
            Engine::TernWide($t) => $e,
            Engine::Range($t) => $e,
            Engine::Scan($t) => $e,
        }
    };
}

/// A match table: the engine chosen for its layout, behind one interface.
#[derive(Clone, Debug)]
pub struct MatchTable {
    layout: Layout,
    engine: Engine,
}

impl MatchTable {
    /// The structured engine for `layout.kind`.
    pub fn new(layout: Layout) -> Result<MatchTable, MatchError> {
        let n = layout.key_len;
        if let Some(f) = layout.lpm {
            if f.off + f.nbytes > n || f.width as usize > f.nbytes * 8 || f.nbytes == 0 {
                return Err(MatchError::BadLayout(format!(
                    "LPM field (offset {}, {} bytes, {} bits) does not fit a {n}-byte key",
                    f.off, f.nbytes, f.width
                )));
            }
        }
        let engine = match layout.kind {
            Kind::Exact if n <= 8 => Engine::Exact8(exact::ExactTable::new()),
            Kind::Exact if n <= 16 => Engine::Exact16(exact::ExactTable::new()),
            Kind::Exact => Engine::ExactWide(exact::ExactTable::new()),
            Kind::Lpm if n <= 8 => Engine::Lpm8(lpm::LpmTable::new(n, layout.lpm)),
            Kind::Lpm if n <= 16 => Engine::Lpm16(lpm::LpmTable::new(n, layout.lpm)),
            Kind::Lpm => Engine::LpmWide(lpm::LpmTable::new(n, layout.lpm)),
            Kind::Ternary if n <= 8 => Engine::Tern8(ternary::TernaryTable::new()),
            Kind::Ternary if n <= 16 => Engine::Tern16(ternary::TernaryTable::new()),
            Kind::Ternary => Engine::TernWide(ternary::TernaryTable::new()),
            Kind::Range => Engine::Range(range::RangeTable::new()),
        };
        Ok(MatchTable { layout, engine })
    }

    /// The linear-scan engine with `layout.kind`'s ranking (any layout).
    pub fn new_scan(layout: Layout) -> MatchTable {
        MatchTable {
            engine: Engine::Scan(scan::ScanTable::new(layout.kind)),
            layout,
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Name of the engine in use (for logs and benchmarks).
    pub fn engine_name(&self) -> &'static str {
        match &self.engine {
            Engine::Exact8(_) | Engine::Exact16(_) | Engine::ExactWide(_) => "exact-hash",
            Engine::Lpm8(_) | Engine::Lpm16(_) | Engine::LpmWide(_) => "lpm-multibit-trie",
            Engine::Tern8(_) | Engine::Tern16(_) | Engine::TernWide(_) => "ternary-tuple-space",
            Engine::Range(_) => "range-sorted-scan",
            Engine::Scan(_) => "linear-scan",
        }
    }

    fn validate(&self, k: &EntryKey) -> Result<(), MatchError> {
        let n = self.layout.key_len;
        for (what, got) in [("value", k.value.len()), ("mask", k.mask.len())] {
            if got != n {
                return Err(MatchError::KeyLength {
                    what,
                    expected: n,
                    got,
                });
            }
        }
        for (i, (off, len, s, e)) in k.ranges.iter().enumerate() {
            let (off, len) = (*off as usize, *len as usize);
            if off + len > n {
                return Err(MatchError::BadRange {
                    index: i,
                    reason: "field lies outside the key",
                });
            }
            if s.len() != len || e.len() != len {
                return Err(MatchError::BadRange {
                    index: i,
                    reason: "bound length differs from the field's byte length",
                });
            }
            if s > e {
                return Err(MatchError::BadRange {
                    index: i,
                    reason: "start is above end",
                });
            }
        }
        if self.layout.kind == Kind::Lpm {
            if let Some(f) = self.layout.lpm {
                if k.prefix_len > f.width {
                    return Err(MatchError::PrefixTooLong {
                        prefix_len: k.prefix_len,
                        width: f.width,
                    });
                }
            }
        }
        Ok(())
    }

    /// Add an entry under `handle`.
    pub fn insert(&mut self, handle: u32, k: &EntryKey) -> Result<(), MatchError> {
        self.validate(k)?;
        each!(&mut self.engine, t => t.insert(handle, k))
    }

    /// Remove the entry under `handle`.
    pub fn delete(&mut self, handle: u32) -> Result<(), MatchError> {
        each!(&mut self.engine, t => t.delete(handle))
    }

    /// Replace the key (and priority) of the entry under `handle`; on error nothing changes.
    pub fn modify(&mut self, handle: u32, k: &EntryKey) -> Result<(), MatchError> {
        self.validate(k)?;
        if !self.contains(handle) {
            return Err(MatchError::UnknownHandle(handle));
        }
        match self.find(k) {
            Some(h) if h != handle => return Err(MatchError::Duplicate { existing: h }),
            _ => {}
        }
        self.delete(handle)?;
        self.insert(handle, k)
    }

    /// Is there an entry under `handle`?
    pub fn contains(&self, handle: u32) -> bool {
        each!(&self.engine, t => t.contains(handle))
    }

    /// The handle of an entry with exactly this key (and priority, for ternary/range).
    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        if self.validate(k).is_err() {
            return None;
        }
        each!(&self.engine, t => t.find(k))
    }

    /// The winning entry for a packed lookup key (`None` on a miss or a key of the wrong length).
    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        if key.len() != self.layout.key_len {
            return None;
        }
        each!(&self.engine, t => t.lookup(key))
    }

    pub fn len(&self) -> usize {
        each!(&self.engine, t => t.len())
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Remove every entry.
    pub fn clear(&mut self) {
        each!(&mut self.engine, t => t.clear())
    }

    /// Estimated bytes held by the engine (tables, nodes, per-handle records, key heap).
    pub fn memory_bytes(&self) -> usize {
        each!(&self.engine, t => t.memory_bytes())
    }

    /// [`memory_bytes`](Self::memory_bytes) divided by the entry count (0 when empty).
    pub fn bytes_per_entry(&self) -> f64 {
        match self.len() {
            0 => 0.0,
            n => self.memory_bytes() as f64 / n as f64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k<'a>(value: &'a [u8], mask: &'a [u8], plen: u32, prio: i32) -> EntryKey<'a> {
        EntryKey {
            value,
            mask,
            ranges: &[],
            prefix_len: plen,
            priority: prio,
        }
    }

    fn ipv4() -> MatchTable {
        MatchTable::new(Layout {
            kind: Kind::Lpm,
            key_len: 4,
            lpm: Some(LpmField {
                off: 0,
                nbytes: 4,
                width: 32,
            }),
        })
        .unwrap()
    }

    #[test]
    fn lpm_longest_prefix_default_route_and_delete_refill() {
        let mut t = ipv4();
        let ones = [0xff; 4];
        t.insert(0, &k(&[0, 0, 0, 0], &[0; 4], 0, 0)).unwrap();
        t.insert(1, &k(&[10, 0, 0, 0], &[255, 0, 0, 0], 8, 0))
            .unwrap();
        t.insert(2, &k(&[10, 1, 0, 0], &[255, 255, 0, 0], 16, 0))
            .unwrap();
        t.insert(3, &k(&[10, 1, 2, 3], &ones, 32, 0)).unwrap();
        t.insert(4, &k(&[10, 1, 2, 0], &[255, 255, 255, 0], 24, 0))
            .unwrap();
        assert_eq!(t.lookup(&[10, 1, 2, 3]), Some(3));
        assert_eq!(t.lookup(&[10, 1, 2, 4]), Some(4));
        assert_eq!(t.lookup(&[10, 1, 9, 9]), Some(2));
        assert_eq!(t.lookup(&[10, 9, 9, 9]), Some(1));
        assert_eq!(t.lookup(&[11, 0, 0, 0]), Some(0));
        assert_eq!(t.lookup(&[10, 1, 2]), None, "short key");
        // Deleting the /24 hands its slots back to the /16 (same node depth range).
        t.delete(4).unwrap();
        assert_eq!(t.lookup(&[10, 1, 2, 4]), Some(2));
        assert_eq!(t.lookup(&[10, 1, 2, 3]), Some(3));
        t.delete(2).unwrap();
        assert_eq!(t.lookup(&[10, 1, 2, 4]), Some(1));
        assert_eq!(
            t.insert(9, &k(&[10, 1, 2, 3], &ones, 32, 0)),
            Err(MatchError::Duplicate { existing: 3 })
        );
        assert_eq!(
            t.insert(3, &k(&[10, 1, 2, 7], &ones, 32, 0)),
            Err(MatchError::HandleInUse(3))
        );
        assert_eq!(
            t.insert(5, &k(&[10, 1, 2, 7], &ones, 33, 0)),
            Err(MatchError::PrefixTooLong {
                prefix_len: 33,
                width: 32
            })
        );
        for h in [0, 1, 3] {
            t.delete(h).unwrap();
        }
        assert_eq!(t.delete(3), Err(MatchError::UnknownHandle(3)));
        assert!(t.is_empty());
        assert_eq!(t.lookup(&[10, 1, 2, 3]), None);
        match &t.engine {
            Engine::Lpm8(l) => assert_eq!(l.node_count(), 1, "child nodes freed"),
            _ => panic!("4-byte lpm uses the inline trie"),
        }
    }

    #[test]
    fn lpm_rejects_a_different_exact_mask() {
        let mut t = MatchTable::new(Layout {
            kind: Kind::Lpm,
            key_len: 2,
            lpm: Some(LpmField {
                off: 1,
                nbytes: 1,
                width: 8,
            }),
        })
        .unwrap();
        t.insert(0, &k(&[1, 0x80], &[0xff, 0x80], 1, 0)).unwrap();
        assert_eq!(
            t.insert(1, &k(&[1, 0x80], &[0x0f, 0x80], 1, 0)),
            Err(MatchError::MaskMismatch { byte: 0 })
        );
        assert_eq!(t.lookup(&[1, 0xc0]), Some(0));
        assert_eq!(t.lookup(&[2, 0xc0]), None);
    }

    #[test]
    fn ternary_priority_then_handle_and_same_key_different_priority() {
        let mut t = MatchTable::new(Layout {
            kind: Kind::Ternary,
            key_len: 1,
            lpm: None,
        })
        .unwrap();
        t.insert(5, &k(&[0], &[0], 0, 3)).unwrap();
        t.insert(2, &k(&[7], &[0xff], 0, 3)).unwrap();
        t.insert(1, &k(&[7], &[0xff], 0, 1)).unwrap();
        assert_eq!(t.lookup(&[7]), Some(1));
        t.delete(1).unwrap();
        // Equal priority 3: the smaller handle wins across tuples.
        assert_eq!(t.lookup(&[7]), Some(2));
        t.insert(0, &k(&[0], &[0xf0], 0, 3)).unwrap();
        assert_eq!(t.lookup(&[7]), Some(0));
        assert_eq!(t.lookup(&[0x17]), Some(5));
        assert_eq!(
            t.insert(8, &k(&[7], &[0xff], 0, 3)),
            Err(MatchError::Duplicate { existing: 2 })
        );
        // modify moves an entry to a new priority; a clash leaves it unchanged.
        t.modify(5, &k(&[0], &[0], 0, -1)).unwrap();
        assert_eq!(t.lookup(&[7]), Some(5));
        assert_eq!(
            t.modify(5, &k(&[7], &[0xff], 0, 3)),
            Err(MatchError::Duplicate { existing: 2 })
        );
        assert_eq!(t.lookup(&[7]), Some(5));
        assert_eq!(
            t.modify(6, &k(&[7], &[0xff], 0, 3)),
            Err(MatchError::UnknownHandle(6))
        );
        t.clear();
        assert_eq!(t.lookup(&[7]), None);
    }

    #[test]
    fn bad_lengths_and_layouts_are_errors_not_panics() {
        let mut t = ipv4();
        let e = t.insert(0, &k(&[1, 2], &[0xff, 0xff], 8, 0)).unwrap_err();
        assert_eq!(
            e.to_string(),
            "entry value has 2 bytes, the table key has 4"
        );
        let bad = MatchTable::new(Layout {
            kind: Kind::Lpm,
            key_len: 4,
            lpm: Some(LpmField {
                off: 2,
                nbytes: 4,
                width: 32,
            }),
        });
        assert!(matches!(bad, Err(MatchError::BadLayout(_))));
        let mut r = MatchTable::new(Layout {
            kind: Kind::Range,
            key_len: 2,
            lpm: None,
        })
        .unwrap();
        let ranges = [(0u32, 2u32, vec![0, 9], vec![0, 3])];
        let e = r
            .insert(
                0,
                &EntryKey {
                    value: &[0, 0],
                    mask: &[0, 0],
                    ranges: &ranges,
                    prefix_len: 0,
                    priority: 0,
                },
            )
            .unwrap_err();
        assert_eq!(e.to_string(), "range field #0: start is above end");
    }

    #[test]
    fn exact_engine_picks_inline_or_boxed_keys() {
        for n in [3usize, 12, 40] {
            let mut t = MatchTable::new(Layout {
                kind: Kind::Exact,
                key_len: n,
                lpm: None,
            })
            .unwrap();
            let ones = vec![0xff; n];
            for h in 0..100u32 {
                let mut v = vec![0u8; n];
                v[n - 1] = h as u8;
                v[0] = 0x80;
                t.insert(h, &k(&v, &ones, 0, 0)).unwrap();
            }
            let mut v = vec![0u8; n];
            v[n - 1] = 42;
            v[0] = 0x80;
            assert_eq!(t.lookup(&v), Some(42));
            v[0] = 0;
            assert_eq!(t.lookup(&v), None);
            t.delete(42).unwrap();
            v[0] = 0x80;
            assert_eq!(t.lookup(&v), None);
            assert!(t.bytes_per_entry() > 4.0);
        }
    }
}
