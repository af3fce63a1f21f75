//! Packed-key plumbing shared by the hash-based engines: a fast non-cryptographic hasher and
//! the `PackedKey` trait that stores keys of ≤ 8 / ≤ 16 bytes inline as integers and longer
//! keys as boxed byte strings, with lookups (plain or masked) that never allocate for keys up
//! to [`STACK_KEY`] bytes.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// Masked lookups of wide keys use a stack buffer of this many bytes; longer keys allocate.
pub const STACK_KEY: usize = 128;

const MUL: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// FxHash-style multiply-rotate hasher (not keyed: table keys are not attacker-chosen in a
/// way that BMv2's own `std::hash` would resist either).
#[derive(Default, Clone, Copy)]
pub struct FxHasher(u64);

impl FxHasher {
    #[inline]
    fn add(&mut self, w: u64) {
        self.0 = (self.0.rotate_left(5) ^ w).wrapping_mul(MUL);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let mut tail = 0u64;
        for (i, b) in chunks.remainder().iter().enumerate() {
            tail |= (*b as u64) << (8 * i);
        }
        self.add(tail);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_u128(&mut self, i: u128) {
        self.add(i as u64);
        self.add((i >> 64) as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        // Fold the high bits down: hashbrown takes its bucket index from the low bits and
        // its control tag from the top 7 bits.
        self.0 ^ (self.0 >> 29)
    }
}

/// Hash map with [`FxHasher`].
pub type FxMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

/// A key representation for the hash-based engines.
pub trait PackedKey: Eq + Hash + Clone + std::fmt::Debug {
    /// Largest key length (bytes) this representation holds.
    const MAX_LEN: usize;
    /// Build from key bytes (`bytes.len() <= MAX_LEN`).
    fn from_bytes(bytes: &[u8]) -> Self;
    /// Build from `bytes & mask`.
    fn from_masked(bytes: &[u8], mask: &[u8]) -> Self;
    /// Look `bytes` up without allocating.
    fn get<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8]) -> Option<&'m V>;
    /// Look `bytes & mask` up (`mask` in this representation); allocation-free up to
    /// [`STACK_KEY`] bytes.
    fn get_masked<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8], mask: &Self) -> Option<&'m V>;
    /// Heap bytes owned by one key beyond `size_of::<Self>()`.
    fn heap_bytes(&self) -> usize;
    /// The `len` key bytes back (inverse of [`from_bytes`](Self::from_bytes)).
    fn to_bytes(&self, len: usize) -> Vec<u8>;
}

#[inline]
fn load_u64(b: &[u8]) -> u64 {
    if b.len() == 8 {
        let mut w = [0u8; 8];
        w.copy_from_slice(b);
        return u64::from_be_bytes(w);
    }
    b.iter().fold(0u64, |a, x| (a << 8) | *x as u64)
}

#[inline]
fn load_u128(b: &[u8]) -> u128 {
    if b.len() == 16 {
        let mut w = [0u8; 16];
        w.copy_from_slice(b);
        return u128::from_be_bytes(w);
    }
    b.iter().fold(0u128, |a, x| (a << 8) | *x as u128)
}

impl PackedKey for u64 {
    const MAX_LEN: usize = 8;
    fn from_bytes(bytes: &[u8]) -> Self {
        load_u64(bytes)
    }
    fn from_masked(bytes: &[u8], mask: &[u8]) -> Self {
        load_u64(bytes) & load_u64(mask)
    }
    #[inline]
    fn get<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8]) -> Option<&'m V> {
        map.get(&load_u64(bytes))
    }
    #[inline]
    fn get_masked<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8], mask: &Self) -> Option<&'m V> {
        map.get(&(load_u64(bytes) & mask))
    }
    fn heap_bytes(&self) -> usize {
        0
    }
    fn to_bytes(&self, len: usize) -> Vec<u8> {
        self.to_be_bytes()[8 - len.min(8)..].to_vec()
    }
}

impl PackedKey for u128 {
    const MAX_LEN: usize = 16;
    fn from_bytes(bytes: &[u8]) -> Self {
        load_u128(bytes)
    }
    fn from_masked(bytes: &[u8], mask: &[u8]) -> Self {
        load_u128(bytes) & load_u128(mask)
    }
    #[inline]
    fn get<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8]) -> Option<&'m V> {
        map.get(&load_u128(bytes))
    }
    #[inline]
    fn get_masked<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8], mask: &Self) -> Option<&'m V> {
        map.get(&(load_u128(bytes) & mask))
    }
    fn heap_bytes(&self) -> usize {
        0
    }
    fn to_bytes(&self, len: usize) -> Vec<u8> {
        self.to_be_bytes()[16 - len.min(16)..].to_vec()
    }
}

impl PackedKey for Box<[u8]> {
    const MAX_LEN: usize = usize::MAX;
    fn from_bytes(bytes: &[u8]) -> Self {
        bytes.into()
    }
    fn from_masked(bytes: &[u8], mask: &[u8]) -> Self {
        bytes.iter().zip(mask).map(|(a, b)| a & b).collect()
    }
    #[inline]
    fn get<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8]) -> Option<&'m V> {
        map.get(bytes)
    }
    fn get_masked<'m, V>(map: &'m FxMap<Self, V>, bytes: &[u8], mask: &Self) -> Option<&'m V> {
        if bytes.len() != mask.len() {
            return None;
        }
        if bytes.len() <= STACK_KEY {
            let mut buf = [0u8; STACK_KEY];
            for ((o, b), m) in buf.iter_mut().zip(bytes).zip(mask.iter()) {
                *o = b & m;
            }
            map.get(&buf[..bytes.len()])
        } else {
            let v: Vec<u8> = bytes.iter().zip(mask.iter()).map(|(a, b)| a & b).collect();
            map.get(v.as_slice())
        }
    }
    fn heap_bytes(&self) -> usize {
        // Allocation rounded up to the allocator's 16-byte granule.
        self.len().div_ceil(16) * 16
    }
    fn to_bytes(&self, _len: usize) -> Vec<u8> {
        self.to_vec()
    }
}

/// Approximate bytes used by a hashbrown map of `cap` buckets with `K, V` entries.
pub fn map_bytes<K, V>(map: &FxMap<K, V>) -> usize {
    let cap = map.capacity();
    if cap == 0 {
        return 0;
    }
    // hashbrown keeps load ≤ 7/8: buckets = next power of two ≥ cap * 8 / 7.
    let buckets = (cap * 8 / 7).next_power_of_two();
    buckets * (std::mem::size_of::<(K, V)>() + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_keys_pack_big_endian_and_mask() {
        assert_eq!(u64::from_bytes(&[1, 2]), 0x0102);
        assert_eq!(u64::from_masked(&[0xff, 0xff], &[0x0f, 0xf0]), 0x0ff0);
        assert_eq!(
            u128::from_bytes(&[0xaa; 16]),
            u128::from_be_bytes([0xaa; 16])
        );
        let mut m: FxMap<u64, u32> = FxMap::default();
        m.insert(0x0a00, 7);
        assert_eq!(u64::get_masked(&m, &[0x0a, 0x55], &0xff00), Some(&7));
        assert_eq!(u64::get(&m, &[0x0a, 0x55]), None);
    }

    #[test]
    fn boxed_keys_masked_lookup_without_and_with_heap() {
        let mut m: FxMap<Box<[u8]>, u32> = FxMap::default();
        let long = vec![0x5a; 200];
        let mask: Box<[u8]> = vec![0x0f; 200].into();
        m.insert(<Box<[u8]>>::from_masked(&long, &mask), 1);
        m.insert(<Box<[u8]>>::from_bytes(&[1, 2, 3]), 2);
        assert_eq!(<Box<[u8]>>::get_masked(&m, &long, &mask), Some(&1));
        assert_eq!(<Box<[u8]>>::get(&m, &[1, 2, 3]), Some(&2));
        let short_mask: Box<[u8]> = vec![0xff, 0xff, 0xff].into();
        assert_eq!(
            <Box<[u8]>>::get_masked(&m, &[1, 2, 3], &short_mask),
            Some(&2)
        );
        assert_eq!(<Box<[u8]>>::get_masked(&m, &[1, 2], &short_mask), None);
    }
}
