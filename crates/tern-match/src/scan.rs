//! Linear-scan engine: every entry is tested against the key and the best one by the table's
//! ranking wins. The fallback for layouts the structured engines do not cover, and the
//! reference the structured engines are tested against.

use crate::{entry_matches, EntryKey, Kind, MatchError, RangeSpec, Slots};

#[derive(Clone, Debug)]
struct Rec {
    value: Box<[u8]>,
    mask: Box<[u8]>,
    ranges: Box<[RangeSpec]>,
    prefix_len: u32,
    priority: i32,
}

/// Entries in handle order, scanned on every lookup.
#[derive(Clone, Debug)]
pub struct ScanTable {
    kind: Kind,
    recs: Slots<Rec>,
    len: usize,
}

impl ScanTable {
    pub fn new(kind: Kind) -> ScanTable {
        ScanTable {
            kind,
            recs: Slots::default(),
            len: 0,
        }
    }

    pub fn insert(&mut self, h: u32, k: &EntryKey) -> Result<(), MatchError> {
        if let Some(e) = self.find(k) {
            return Err(MatchError::Duplicate { existing: e });
        }
        self.recs.check_free(h)?;
        self.recs.set(
            h,
            Rec {
                value: k.value.into(),
                mask: k.mask.into(),
                ranges: k.ranges.into(),
                prefix_len: k.prefix_len,
                priority: k.priority,
            },
        );
        self.len += 1;
        Ok(())
    }

    pub fn delete(&mut self, h: u32) -> Result<(), MatchError> {
        self.recs.take(h)?;
        self.len -= 1;
        Ok(())
    }

    pub fn contains(&self, h: u32) -> bool {
        self.recs.get(h).is_some()
    }

    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        let prio = self.kind.has_priority();
        self.recs
            .iter()
            .find(|(_, r)| {
                *r.value == *k.value
                    && *r.mask == *k.mask
                    && *r.ranges == *k.ranges
                    && (!prio || r.priority == k.priority)
            })
            .map(|(h, _)| h)
    }

    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        let mut best: Option<(u32, &Rec)> = None;
        for (h, r) in self.recs.iter() {
            if !entry_matches(&r.value, &r.mask, &r.ranges, key) {
                continue;
            }
            let better = match best {
                None => true,
                Some((_, b)) => match self.kind {
                    Kind::Lpm => r.prefix_len > b.prefix_len,
                    Kind::Exact => false,
                    Kind::Ternary | Kind::Range => r.priority < b.priority,
                },
            };
            if better {
                best = Some((h, r));
            }
        }
        best.map(|(h, _)| h)
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.recs.clear();
        self.len = 0;
    }

    pub fn memory_bytes(&self) -> usize {
        let heap: usize = self
            .recs
            .iter()
            .map(|(_, r)| 2 * r.value.len().div_ceil(16) * 16 + r.ranges.len() * 80)
            .sum();
        self.recs.bytes() + heap
    }
}
