//! LPM engine: a multibit trie over the packed key with the non-LPM (exact/valid) bytes moved
//! in front of the LPM field, so an entry is one bit prefix: all exact bits, the field's
//! padding bits, then `prefix_len` bits. Root stride 8 bits, rebuilt as 16 bits once the
//! table reaches [`WIDE_ROOT_AT`] entries (keys of ≥ 2 bytes); 8 below;
//! controlled prefix expansion with the expanded prefix's length kept per slot, so inserts and
//! deletes touch one node. Below the root, a node starts *sparse* (a short list of unexpanded
//! prefixes and child links, scanned) and becomes a dense 256-slot array once it holds more
//! than [`SPARSE_MAX`] items, which bounds memory for scattered long prefixes. A `(length, prefix)` hash map holds the entries for duplicate checks
//! and for refilling slots on delete. Lookups walk at most `key_len - 1` nodes, allocation-free.

use crate::key::{map_bytes, FxMap, PackedKey};
use crate::{EntryKey, LpmField, MatchError, Slots};

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    /// handle + 1 of the longest prefix expanded into this slot (0: none).
    val: u32,
    /// child node index + 1 (0: none).
    child: u32,
}

/// Entries at which a table's 8-bit root is rebuilt as a 16-bit one (≈ 576 KB).
pub const WIDE_ROOT_AT: usize = 4096;

/// Items a sparse node holds before it is expanded into a dense one.
pub const SPARSE_MAX: usize = 12;

/// An item of a sparse node: a prefix (`rel` = its length in the node, 1..=8) or a child
/// link (`rel` = 0, `bits` = the slot index).
#[derive(Clone, Copy, Debug)]
struct Item {
    bits: u8,
    rel: u8,
    /// handle + 1, or child node index + 1 for a link.
    val: u32,
}

#[derive(Clone, Debug)]
struct Node {
    /// Sparse nodes keep `items` (and empty `slots`/`lens`); dense nodes the reverse.
    sparse: bool,
    items: Vec<Item>,
    slots: Box<[Slot]>,
    /// Length of the stored prefix relative to the node depth (1..=stride).
    lens: Box<[u8]>,
    /// Slots with a value or a child.
    used: u32,
    stride: u32,
    parent: u32,
    parent_idx: u32,
}

impl Node {
    fn dense(stride: u32, parent: u32, parent_idx: u32) -> Node {
        Node {
            sparse: false,
            items: Vec::new(),
            slots: vec![Slot::default(); 1 << stride].into(),
            lens: vec![0; 1 << stride].into(),
            used: 0,
            stride,
            parent,
            parent_idx,
        }
    }

    fn sparse(parent: u32, parent_idx: u32) -> Node {
        Node {
            sparse: true,
            items: Vec::with_capacity(1),
            slots: Box::new([]),
            lens: Box::new([]),
            used: 0,
            stride: 8,
            parent,
            parent_idx,
        }
    }

    fn is_empty(&self) -> bool {
        if self.sparse {
            self.items.is_empty()
        } else {
            self.used == 0
        }
    }

    /// Child node index + 1 under slot `idx` (0: none).
    fn child(&self, idx: usize) -> u32 {
        if self.sparse {
            self.items
                .iter()
                .find(|it| it.rel == 0 && it.bits as usize == idx)
                .map_or(0, |it| it.val)
        } else {
            self.slots[idx].child
        }
    }

    /// Expand a sparse node that outgrew [`SPARSE_MAX`] into 256 slots.
    fn densify(&mut self) {
        let mut items = std::mem::take(&mut self.items);
        items.sort_by_key(|it| it.rel);
        let mut d = Node::dense(self.stride, self.parent, self.parent_idx);
        for it in items {
            if it.rel == 0 {
                let s = &mut d.slots[it.bits as usize];
                if s.val == 0 {
                    d.used += 1;
                }
                s.child = it.val;
            } else {
                let base = it.bits as usize;
                for i in base..base + (1usize << (8 - it.rel)) {
                    let s = &mut d.slots[i];
                    if s.val == 0 && s.child == 0 {
                        d.used += 1;
                    }
                    s.val = it.val;
                    d.lens[i] = it.rel;
                }
            }
        }
        *self = d;
    }
}

/// LPM table over (reordered) keys represented as `K`.
#[derive(Clone, Debug)]
pub struct LpmTable<K: PackedKey> {
    key_len: usize,
    /// Reordered byte `i` is key byte `order[i]`...
    order: Box<[u32]>,
    /// ...ANDed with `lmask[i]` (exact bytes: the table's mask; LPM bytes: padding cleared).
    lmask: Box<[u8]>,
    /// Bits before the LPM field's first prefix bit (exact bytes + LPM padding).
    base_bits: u32,
    lpm: Option<LpmField>,
    /// Mask of the non-LPM bytes, fixed by the first entry.
    exact_mask: Option<Box<[u8]>>,
    /// The root has a 16-bit stride (else 8).
    root16: bool,
    nodes: Vec<Node>,
    free_nodes: Vec<u32>,
    /// handle + 1 of the zero-length prefix.
    default: u32,
    prefixes: FxMap<(u32, K), u32>,
    recs: Slots<(u32, K)>,
}

fn truncate(r: &mut [u8], bits: u32) {
    for (i, b) in r.iter_mut().enumerate() {
        let lo = i as u32 * 8;
        if lo >= bits {
            *b = 0;
        } else if bits < lo + 8 {
            *b &= 0xffu8 << (lo + 8 - bits);
        }
    }
}

#[inline]
fn index(r: &[u8], depth: u32, stride: u32) -> usize {
    let i = (depth / 8) as usize;
    if stride == 16 {
        (r[i] as usize) << 8 | r[i + 1] as usize
    } else {
        r[i] as usize
    }
}

impl<K: PackedKey> LpmTable<K> {
    /// A table for `key_len`-byte keys with the LPM field `lpm` (without one, entries match
    /// exactly).
    pub fn new(key_len: usize, lpm: Option<LpmField>) -> Self {
        let in_lpm = |i: usize| lpm.is_some_and(|f| i >= f.off && i < f.off + f.nbytes);
        let mut order: Vec<u32> = (0..key_len)
            .filter(|&i| !in_lpm(i))
            .map(|i| i as u32)
            .collect();
        let mut lmask = vec![0xffu8; key_len];
        let mut base_bits = order.len() as u32 * 8;
        if let Some(f) = lpm {
            let pad = f.nbytes as u32 * 8 - f.width;
            lmask[order.len()] = 0xff >> pad;
            base_bits += pad;
            order.extend((f.off..f.off + f.nbytes).map(|i| i as u32));
        }
        LpmTable {
            key_len,
            order: order.into(),
            lmask: lmask.into(),
            base_bits,
            lpm,
            exact_mask: None,
            root16: false,
            nodes: Vec::new(),
            free_nodes: Vec::new(),
            default: 0,
            prefixes: FxMap::default(),
            recs: Slots::default(),
        }
    }

    fn in_lpm(&self, i: usize) -> bool {
        self.lpm.is_some_and(|f| i >= f.off && i < f.off + f.nbytes)
    }

    /// Check the entry's non-LPM mask against the table's.
    fn check_mask(&self, k: &EntryKey) -> Result<(), MatchError> {
        if let Some(m) = &self.exact_mask {
            for i in 0..self.key_len {
                if !self.in_lpm(i) && k.mask[i] != m[i] {
                    return Err(MatchError::MaskMismatch { byte: i });
                }
            }
        }
        Ok(())
    }

    /// The entry as (total prefix bits, reordered and truncated prefix bytes).
    fn prefix_of(&self, k: &EntryKey) -> (u32, Vec<u8>) {
        let nexact = self.key_len - self.lpm.map_or(0, |f| f.nbytes);
        let mut r: Vec<u8> = self
            .order
            .iter()
            .enumerate()
            .map(|(i, &o)| {
                let m = if i < nexact {
                    k.mask[o as usize]
                } else {
                    self.lmask[i]
                };
                k.value[o as usize] & m
            })
            .collect();
        let bits = match self.lpm {
            Some(_) => self.base_bits + k.prefix_len,
            None => self.base_bits,
        };
        truncate(&mut r, bits);
        (bits, r)
    }

    fn alloc(&mut self, node: Node) -> u32 {
        match self.free_nodes.pop() {
            Some(i) => {
                self.nodes[i as usize] = node;
                i
            }
            None => {
                self.nodes.push(node);
                self.nodes.len() as u32 - 1
            }
        }
    }

    pub fn insert(&mut self, h: u32, k: &EntryKey) -> Result<(), MatchError> {
        self.check_mask(k)?;
        let (bits, r) = self.prefix_of(k);
        let pk = K::from_bytes(&r);
        if let Some(&e) = self.prefixes.get(&(bits, pk.clone())) {
            return Err(MatchError::Duplicate { existing: e });
        }
        self.recs.check_free(h)?;
        if h == u32::MAX {
            return Err(MatchError::BadLayout("handle u32::MAX is reserved".into()));
        }
        if self.exact_mask.is_none() {
            let m: Vec<u8> = (0..self.key_len)
                .map(|i| if self.in_lpm(i) { 0xff } else { k.mask[i] })
                .collect();
            let nexact = self.key_len - self.lpm.map_or(0, |f| f.nbytes);
            let mut lm = self.lmask.to_vec();
            for (i, &o) in self.order.iter().enumerate().take(nexact) {
                lm[i] = m[o as usize];
            }
            self.lmask = lm.into();
            self.exact_mask = Some(m.into());
        }
        self.prefixes.insert((bits, pk.clone()), h);
        self.recs.set(h, (bits, pk));
        self.trie_insert(h, bits, &r);
        if !self.root16 && self.key_len >= 2 && self.prefixes.len() >= WIDE_ROOT_AT {
            self.rebuild_wide_root();
        }
        Ok(())
    }

    /// Rebuild the trie with a 16-bit root once the table is large enough to pay for it.
    fn rebuild_wide_root(&mut self) {
        self.root16 = true;
        self.nodes.clear();
        self.free_nodes.clear();
        self.default = 0;
        let all: Vec<(u32, u32, Vec<u8>)> = self
            .recs
            .iter()
            .map(|(h, (bits, pk))| (h, *bits, pk.to_bytes(self.key_len)))
            .collect();
        for (h, bits, r) in all {
            self.trie_insert(h, bits, &r);
        }
    }

    /// Put handle `h` (prefix `r` of `bits` bits) into the trie.
    fn trie_insert(&mut self, h: u32, bits: u32, r: &[u8]) {
        if bits == 0 {
            self.default = h + 1;
            return;
        }
        if self.nodes.is_empty() {
            let stride = if self.root16 { 16 } else { 8 };
            self.alloc(Node::dense(stride, 0, 0));
        }
        let (mut ni, mut d) = (0usize, 0u32);
        loop {
            let s = self.nodes[ni].stride;
            if bits <= d + s {
                break;
            }
            let idx = index(r, d, s);
            if self.nodes[ni].child(idx) == 0 {
                let c = self.alloc(Node::sparse(ni as u32, idx as u32));
                let n = &mut self.nodes[ni];
                if n.sparse {
                    n.items.push(Item {
                        bits: idx as u8,
                        rel: 0,
                        val: c + 1,
                    });
                    if n.items.len() > SPARSE_MAX {
                        n.densify();
                    }
                } else {
                    if n.slots[idx].val == 0 {
                        n.used += 1;
                    }
                    n.slots[idx].child = c + 1;
                }
            }
            ni = self.nodes[ni].child(idx) as usize - 1;
            d += s;
        }
        let n = &mut self.nodes[ni];
        let rel = bits - d;
        let base = index(r, d, n.stride);
        if n.sparse {
            n.items.push(Item {
                bits: base as u8,
                rel: rel as u8,
                val: h + 1,
            });
            if n.items.len() > SPARSE_MAX {
                n.densify();
            }
            return;
        }
        for i in base..base + (1usize << (n.stride - rel)) {
            let slot = &mut n.slots[i];
            if slot.val == 0 || (n.lens[i] as u32) < rel {
                if slot.val == 0 && slot.child == 0 {
                    n.used += 1;
                }
                slot.val = h + 1;
                n.lens[i] = rel as u8;
            }
        }
    }

    pub fn delete(&mut self, h: u32) -> Result<(), MatchError> {
        let (bits, pk) = self.recs.take(h)?;
        let r = pk.to_bytes(self.key_len);
        self.prefixes.remove(&(bits, pk));
        if bits == 0 {
            self.default = 0;
            return Ok(());
        }
        let (mut ni, mut d) = (0usize, 0u32);
        loop {
            let s = self.nodes[ni].stride;
            if bits <= d + s {
                break;
            }
            ni = self.nodes[ni].child(index(&r, d, s)) as usize - 1;
            d += s;
        }
        if self.nodes[ni].sparse {
            let n = &mut self.nodes[ni];
            n.items.retain(|it| it.rel == 0 || it.val != h + 1);
        } else {
            self.delete_dense(ni, d, bits, &r, h);
        }
        while ni != 0 && self.nodes[ni].is_empty() {
            let (p, pi) = (
                self.nodes[ni].parent as usize,
                self.nodes[ni].parent_idx as usize,
            );
            self.nodes[ni] = Node::sparse(0, 0);
            self.free_nodes.push(ni as u32);
            let pn = &mut self.nodes[p];
            if pn.sparse {
                pn.items.retain(|it| it.rel != 0 || it.bits as usize != pi);
            } else {
                pn.slots[pi].child = 0;
                if pn.slots[pi].val == 0 {
                    pn.used -= 1;
                }
            }
            ni = p;
        }
        Ok(())
    }

    /// Remove handle `h` (prefix `r` of `bits` bits) from dense node `ni` at depth `d`.
    fn delete_dense(&mut self, ni: usize, d: u32, bits: u32, r: &[u8], h: u32) {
        // The longest remaining prefix of this entry stored in the same node takes its slots.
        let mut repl = None;
        for l in (d + 1..bits).rev() {
            let mut r2 = r.to_vec();
            truncate(&mut r2, l);
            if let Some(&h2) = self.prefixes.get(&(l, K::from_bytes(&r2))) {
                repl = Some((h2, l - d));
                break;
            }
        }
        let n = &mut self.nodes[ni];
        let base = index(r, d, n.stride);
        for i in base..base + (1usize << (n.stride - (bits - d))) {
            let slot = &mut n.slots[i];
            if slot.val != h + 1 {
                continue;
            }
            match repl {
                Some((h2, rl)) => {
                    slot.val = h2 + 1;
                    n.lens[i] = rl as u8;
                }
                None => {
                    slot.val = 0;
                    n.lens[i] = 0;
                    if slot.child == 0 {
                        n.used -= 1;
                    }
                }
            }
        }
    }

    pub fn contains(&self, h: u32) -> bool {
        self.recs.get(h).is_some()
    }

    pub fn find(&self, k: &EntryKey) -> Option<u32> {
        self.check_mask(k).ok()?;
        let (bits, r) = self.prefix_of(k);
        self.prefixes.get(&(bits, K::from_bytes(&r))).copied()
    }

    #[inline]
    fn kb(&self, key: &[u8], i: usize) -> usize {
        (key[self.order[i] as usize] & self.lmask[i]) as usize
    }

    #[inline]
    pub fn lookup(&self, key: &[u8]) -> Option<u32> {
        let mut best = self.default;
        if let Some(mut n) = self.nodes.first() {
            let mut d = 0usize;
            loop {
                let next;
                if n.sparse {
                    let idx = self.kb(key, d);
                    let (mut child, mut br) = (0, 0);
                    for it in &n.items {
                        if it.rel == 0 {
                            if it.bits as usize == idx {
                                child = it.val;
                            }
                        } else if it.rel > br && (idx ^ it.bits as usize) >> (8 - it.rel) == 0 {
                            br = it.rel;
                            best = it.val;
                        }
                    }
                    next = child;
                } else {
                    let idx = if n.stride == 16 {
                        self.kb(key, d) << 8 | self.kb(key, d + 1)
                    } else {
                        self.kb(key, d)
                    };
                    let s = n.slots[idx];
                    if s.val != 0 {
                        best = s.val;
                    }
                    next = s.child;
                }
                if next == 0 {
                    break;
                }
                d += (n.stride / 8) as usize;
                n = &self.nodes[next as usize - 1];
            }
        }
        best.checked_sub(1)
    }

    pub fn len(&self) -> usize {
        self.prefixes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// Trie nodes in use.
    pub fn node_count(&self) -> usize {
        self.nodes.len() - self.free_nodes.len()
    }

    pub fn clear(&mut self) {
        *self = LpmTable::new(self.key_len, self.lpm);
    }

    pub fn memory_bytes(&self) -> usize {
        let nodes: usize = self
            .nodes
            .iter()
            .map(|n| std::mem::size_of::<Node>() + n.slots.len() * 9 + n.items.capacity() * 8)
            .sum();
        let heap: usize = self.prefixes.keys().map(|(_, k)| 2 * k.heap_bytes()).sum();
        nodes + map_bytes(&self.prefixes) + self.recs.bytes() + heap
    }
}
