//! Ternary engine: tuple-space search. Entries are grouped by mask; each group ("tuple") is a
//! hash map from the masked value to its best (priority, handle). Lookups visit tuples in
//! order of their best priority and stop once no remaining tuple can beat the current winner.

use std::collections::BTreeMap;

use crate::key::{map_bytes, FxMap, PackedKey};
use crate::{EntryKey, MatchError, Slots};

#[derive(Clone, Debug)]
struct Tuple<K: PackedKey> {
    mask: K,
    mask_bytes: Box<[u8]>,
    /// Best (priority, handle) per masked value.
    best: FxMap<K, (i32, u32)>,
    /// Every (priority, handle) of values held by more than one entry, sorted.
    more: FxMap<K, Vec<(i32, u32)>>,
    /// Priority → number of entries, to keep the tuple's best priority.
    prios: BTreeMap<i32, u32>,
}

impl<K: PackedKey> Tuple<K> {
    fn best_priority(&self) -> i32 {
        self.prios.keys().next().copied().unwrap_or(i32::MAX)
    }
}

/// Ternary table over keys represented as `K`.
#[derive(Clone, Debug)]
pub struct TernaryTable<K: PackedKey> {
    tuples: Vec<Option<Tuple<K>>>,
    free_tuples: Vec<u32>,
    by_mask: FxMap<Box<[u8]>, u32>,
    /// (best priority, tuple id), ascending: the lookup order.
    order: Vec<(i32, u32)>,
    recs: Slots<(u32, K, i32)>,
    len: usize,
}

impl<K: PackedKey> Default for TernaryTable<K> {
    fn default() -> Self {
        TernaryTable {
            tuples: Vec::new(),
            free_tuples: Vec::new(),
            by_mask: FxMap::default(),
            order: Vec::new(),
            recs: Slots::default(),
            len: 0,
        }
    }
}

impl<K: PackedKey> TernaryTable<K> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of distinct masks.
    pub fn tuple_count(&self) -> usize {
        self.by_mask.len()
    }

    fn reorder(&mut self, tid: u32, old: i32, new: i32) {
        let alive = self.tuples[tid as usize].is_some();
        if old == new && alive {
            return;
        }
        if let Ok(i) = self.order.binary_search(&(old, tid)) {
            self.order.remove(i);
        }
        if alive {
            let i = self.order.binary_search(&(new, tid)).unwrap_or_else(|i| i);
            self.order.insert(i, (new, tid));
        }
    }

    pub fn insert(&mut self, h: u32, k: &EntryKey) -> Result<(), MatchError> {
        if let Some(e) = self.find(k) {
            return Err(MatchError::Duplicate { existing: e });
        }
        self.recs.check_free(h)?;
        let tid = match self.by_mask.get(k.mask) {
            Some(&t) => t,
            None => {
                let t = Tuple {
                    mask: K::from_bytes(k.mask),
                    mask_bytes: k.mask.into(),
                    best: FxMap::default(),
                    more: FxMap::default(),
                    prios: BTreeMap::new(),
                };
                let tid = match self.free_tuples.pop() {
                    Some(i) => {
                        self.tuples[i as usize] = Some(t);
                        i
                    }
                    None => {
                        self.tuples.push(Some(t));
                        self.tuples.len() as u32 - 1
                    }
                };
                self.by_mask.insert(k.mask.into(), tid);
                let i = self
                    .order
                    .binary_search(&(i32::MAX, tid))
                    .unwrap_or_else(|i| i);
                self.order.insert(i, (i32::MAX, tid));
                tid
            }
        };
        let t = self.tuples[tid as usize]
            .as_mut()
            .expect("by_mask names a live tuple");
        let v = K::from_masked(k.value, k.mask);
        let me = (k.priority, h);
        match t.best.get_mut(&v) {
            None => {
                t.best.insert(v.clone(), me);
            }
            Some(b) => {
                let list = t.more.entry(v.clone()).or_insert_with(|| vec![*b]);
                let i = list.binary_search(&me).unwrap_or_else(|i| i);
                list.insert(i, me);
                *b = list[0];
            }
        }
        let old = t.best_priority();
        *t.prios.entry(k.priority).or_insert(0) += 1;
        let new = t.best_priority();
        self.reorder(tid, old, new);
        self.recs.set(h, (tid, v, k.priority));
        self.len += 1;
        Ok(())
    }

    pub fn delete(&mut self, h: u32) -> Result<(), MatchError> {
        let (tid, v, p) = self.recs.take(h)?;
        let t = self.tuples[tid as usize]
            .as_mut()
            .expect("records name live tuples");
        let me = (p, h);
        if let Some(list) = t.more.get_mut(&v) {
            list.retain(|x| *x != me);
            let first = list[0];
            if list.len() == 1 {
                t.more.remove(&v);
            }
            t.best.insert(v, first);
        } else {
            t.best.remove(&v);
        }
        let old = t.best_priority();
        if let Some(c) = t.prios.get_mut(&p) {
            *c -= 1;
            if *c == 0 {
                t.prios.remove(&p);
            }
        }
        let new = t.best_priority();
        if t.best.is_empty() {
            let mask = t.mask_bytes.clone();
            self.by_mask.remove(&mask);
            self.tuples[tid as usize] = None;
            self.free_tuples.push(tid);
        }
        self.reorder(tid, old, new);
        self.len -= 1;
        Ok(())
    }

    pub fn contains(&self, h: u32) -> bool {
        self.recs.get(h).is_some()
    }

    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        let tid = *self.by_mask.get(k.mask)?;
        let t = self.tuples[tid as usize].as_ref()?;
        let v = K::from_masked(k.value, k.mask);
        if let Some(list) = t.more.get(&v) {
            return list.iter().find(|(p, _)| *p == k.priority).map(|(_, h)| *h);
        }
        t.best
            .get(&v)
            .filter(|(p, _)| *p == k.priority)
            .map(|(_, h)| *h)
    }

    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        let mut best: Option<(i32, u32)> = None;
        for &(tb, tid) in &self.order {
            if let Some((bp, _)) = best {
                if tb > bp {
                    break;
                }
            }
            let Some(t) = &self.tuples[tid as usize] else {
                continue;
            };
            if let Some(&c) = K::get_masked(&t.best, key, &t.mask) {
                if best.is_none_or(|b| c < b) {
                    best = Some(c);
                }
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
        *self = Self::default();
    }

    pub fn memory_bytes(&self) -> usize {
        let mut b = self.recs.bytes() + self.order.capacity() * 8 + map_bytes(&self.by_mask);
        for t in self.tuples.iter().flatten() {
            b += std::mem::size_of::<Tuple<K>>() + map_bytes(&t.best) + map_bytes(&t.more);
            b += t.best.keys().map(|k| 2 * k.heap_bytes()).sum::<usize>();
            b += t.more.values().map(|l| l.capacity() * 8).sum::<usize>();
            b += t.prios.len() * 16;
        }
        b
    }
}
