//! Range engine: entries ordered by (priority, handle) in a B-tree, so the first matching
//! entry of an in-order scan is the winner and the scan stops there; inserts and deletes
//! cost O(log n).

use std::collections::BTreeMap;

use crate::{entry_matches, EntryKey, MatchError, RangeSpec, Slots};

#[derive(Clone, Debug)]
struct Rec {
    value: Box<[u8]>,
    mask: Box<[u8]>,
    ranges: Box<[RangeSpec]>,
}

/// Range (and mixed range/ternary/exact) table.
#[derive(Clone, Debug, Default)]
pub struct RangeTable {
    ordered: BTreeMap<(i32, u32), Rec>,
    prio: Slots<i32>,
}

impl RangeTable {
    pub fn new() -> RangeTable {
        RangeTable::default()
    }

    pub fn insert(&mut self, h: u32, k: &EntryKey) -> Result<(), MatchError> {
        if let Some(e) = self.find(k) {
            return Err(MatchError::Duplicate { existing: e });
        }
        self.prio.check_free(h)?;
        self.ordered.insert(
            (k.priority, h),
            Rec {
                value: k.value.into(),
                mask: k.mask.into(),
                ranges: k.ranges.into(),
            },
        );
        self.prio.set(h, k.priority);
        Ok(())
    }

    pub fn delete(&mut self, h: u32) -> Result<(), MatchError> {
        let p = self.prio.take(h)?;
        self.ordered.remove(&(p, h));
        Ok(())
    }

    pub fn contains(&self, h: u32) -> bool {
        self.prio.get(h).is_some()
    }

    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        self.ordered
            .range((k.priority, 0)..=(k.priority, u32::MAX))
            .find(|(_, r)| *r.value == *k.value && *r.mask == *k.mask && *r.ranges == *k.ranges)
            .map(|((_, h), _)| *h)
    }

    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        self.ordered
            .iter()
            .find(|(_, r)| entry_matches(&r.value, &r.mask, &r.ranges, key))
            .map(|((_, h), _)| *h)
    }

    pub fn len(&self) -> usize {
        self.ordered.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ordered.is_empty()
    }

    pub fn clear(&mut self) {
        self.ordered.clear();
        self.prio.clear();
    }

    pub fn memory_bytes(&self) -> usize {
        // B-tree nodes hold up to 11 (key, value) pairs; assume 2/3 full.
        let pair = std::mem::size_of::<((i32, u32), Rec)>();
        let heap: usize = self
            .ordered
            .values()
            .map(|r| {
                2 * r.value.len().div_ceil(16) * 16
                    + r.ranges
                        .iter()
                        .map(|x| std::mem::size_of::<RangeSpec>() + 2 * x.2.len().div_ceil(16) * 16)
                        .sum::<usize>()
            })
            .sum();
        self.ordered.len() * pair * 3 / 2 + heap + self.prio.bytes()
    }
}
