//! Exact-match engine: one hash map from the packed key to the handle; keys of ≤ 8 / ≤ 16
//! bytes are stored inline as integers.

use crate::key::{map_bytes, FxMap, PackedKey};
use crate::{EntryKey, MatchError, Slots};

/// Exact table over keys represented as `K`.
#[derive(Clone, Debug)]
pub struct ExactTable<K: PackedKey> {
    map: FxMap<K, u32>,
    keys: Slots<K>,
}

impl<K: PackedKey> Default for ExactTable<K> {
    fn default() -> Self {
        ExactTable {
            map: FxMap::default(),
            keys: Slots::default(),
        }
    }
}

impl<K: PackedKey> ExactTable<K> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Only `value` counts: the mask of an exact table is the same for every entry.
    pub fn insert(&mut self, h: u32, k: &EntryKey) -> Result<(), MatchError> {
        if let Some(&e) = K::get(&self.map, k.value) {
            return Err(MatchError::Duplicate { existing: e });
        }
        self.keys.check_free(h)?;
        let key = K::from_bytes(k.value);
        self.map.insert(key.clone(), h);
        self.keys.set(h, key);
        Ok(())
    }

    pub fn delete(&mut self, h: u32) -> Result<(), MatchError> {
        let key = self.keys.take(h)?;
        self.map.remove(&key);
        Ok(())
    }

    pub fn contains(&self, h: u32) -> bool {
        self.keys.get(h).is_some()
    }

    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        K::get(&self.map, k.value).copied()
    }

    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        K::get(&self.map, key).copied()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.keys.clear();
    }

    pub fn memory_bytes(&self) -> usize {
        let heap: usize = self.map.keys().map(|k| 2 * k.heap_bytes()).sum();
        map_bytes(&self.map) + self.keys.bytes() + heap
    }
}
