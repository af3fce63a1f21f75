//! The per-packet header vector (PHV): its load-time layout and the packet-time storage.
//!
//! Every field of every header instance gets a byte-aligned slot of `ceil(width/8)` bytes,
//! big-endian, right-aligned (the value in the low bits). That is exactly BMv2's table-key
//! format for one field, so building a key is a copy. A header's fields are contiguous, so
//! copying a header is one `copy_within`. Validity is one byte per header; stacks keep their
//! `next` counter. Variable-length fields get a slot of the header's maximum size.

use tern_model::{FieldRef, FieldWidth, Program, VALID_FIELD};

/// Where a field lives in the PHV and how it is stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldLoc {
    /// Byte offset of the slot.
    pub off: u32,
    /// Slot size in bytes.
    pub nbytes: u32,
    /// Width in bits (for VL fields: the maximum width).
    pub width: u32,
    pub signed: bool,
    pub saturating: bool,
    /// Owning header instance.
    pub header: u32,
    /// `$valid$`: the slot is the header's validity byte.
    pub is_valid_bit: bool,
    /// A variable-length field (its current width is in [`Phv::vl_width`]).
    pub is_vl: bool,
}

/// Layout of one header instance.
#[derive(Clone, Debug)]
pub struct HeaderLayout {
    pub name: String,
    /// First byte of the header's field slots.
    pub off: u32,
    /// Total slot bytes.
    pub slot_bytes: u32,
    /// Fields in declaration order.
    pub fields: Vec<FieldLoc>,
    /// Fixed wire size in bits (VL field excluded).
    pub fixed_bits: u32,
    pub metadata: bool,
    /// Index of the VL field, if any.
    pub vl_field: Option<u32>,
    /// Union this header belongs to, if any.
    pub union: Option<u32>,
    /// Every field is a whole number of bytes (no VL field): the wire bytes are exactly the
    /// slot bytes, so extract and emit are one copy.
    pub packed: bool,
    /// For a header with no VL field and no field wider than 56 bits (used when it is not
    /// packed): extract and emit as a few steps (runs of whole-byte fields copied, the other fields
    /// through a 64-bit window), computed once here.
    pub wire: Option<Vec<WireStep>>,
}

/// One step of a header's wire ↔ slot conversion ([`HeaderLayout::wire`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WireStep {
    /// Byte-aligned whole-byte fields: wire bytes `wire..wire + len` of the header are the
    /// PHV bytes `slot..slot + len`.
    Copy { wire: u32, slot: u32, len: u32 },
    /// A field of `width` bits (1..=56) at wire bit `bit`, slot at `slot` of `nbytes` bytes.
    Bits {
        bit: u32,
        width: u32,
        slot: u32,
        nbytes: u32,
    },
}

/// The [`WireStep`]s of a header's fields (see [`HeaderLayout::wire`]).
fn wire_steps(fields: &[FieldLoc]) -> Option<Vec<WireStep>> {
    if fields.iter().any(|f| f.is_vl || f.width > 56) {
        return None;
    }
    let mut steps: Vec<WireStep> = Vec::new();
    let mut bit = 0u32;
    for f in fields {
        let w = f.width;
        if w == 0 {
            continue;
        }
        if bit.is_multiple_of(8) && w.is_multiple_of(8) {
            match steps.last_mut() {
                Some(WireStep::Copy { wire, slot, len })
                    if *wire + *len == bit / 8 && *slot + *len == f.off =>
                {
                    *len += w / 8
                }
                _ => steps.push(WireStep::Copy {
                    wire: bit / 8,
                    slot: f.off,
                    len: w / 8,
                }),
            }
        } else {
            steps.push(WireStep::Bits {
                bit,
                width: w,
                slot: f.off,
                nbytes: f.nbytes,
            });
        }
        bit += w;
    }
    Some(steps)
}

/// Read `width` (1..=56) bits at bit `bit` of `src` (bits past its end read as zero).
#[inline]
pub fn read_bits(src: &[u8], bit: u32, width: u32) -> u64 {
    let (b0, sh) = ((bit / 8) as usize, bit % 8);
    let x = match src.get(b0..b0 + 8) {
        Some(s) => u64::from_be_bytes([s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]]),
        None => {
            let mut x = [0u8; 8];
            let s = &src[b0.min(src.len())..];
            x[..s.len()].copy_from_slice(s);
            u64::from_be_bytes(x)
        }
    };
    (x << sh) >> (64 - width)
}

/// The whole PHV layout.
#[derive(Clone, Debug)]
pub struct Layout {
    pub headers: Vec<HeaderLayout>,
    pub total_bytes: u32,
    /// Header instances of each stack, in index order.
    pub stacks: Vec<Vec<u32>>,
    /// Header instances of each union, in member order.
    pub unions: Vec<Vec<u32>>,
    /// Unions of each union stack.
    pub union_stacks: Vec<Vec<u32>>,
    /// Byte ranges of the metadata slots, adjacent ranges merged (what a reset zeroes).
    pub metadata_ranges: Vec<(u32, u32)>,
    /// Validity after a reset: true for metadata headers, false for the others.
    pub valid_template: Vec<bool>,
    /// Some header has a variable-length field (or the parser has a variable-length
    /// `extract`). Without one every [`Phv::vl_width`] stays 0 (it is only ever set to 0 or
    /// copied), so a reset leaves it alone.
    pub has_vl: bool,
}

impl Layout {
    /// Lay out every header of the program.
    pub fn new(p: &Program) -> Layout {
        let mut headers = Vec::with_capacity(p.headers.len());
        let mut off = 0u32;
        for (hi, h) in p.headers.iter().enumerate() {
            let ht = &p.header_types[h.header_type as usize];
            let start = off;
            let mut fields = Vec::with_capacity(ht.fields.len());
            let fixed_bits = ht.fixed_bits();
            for f in &ht.fields {
                let (width, is_vl) = match f.width {
                    FieldWidth::Fixed(w) => (w, false),
                    FieldWidth::Variable => {
                        let max = if ht.max_length > 0 {
                            (ht.max_length * 8).saturating_sub(fixed_bits)
                        } else {
                            // No bound given: allow up to 256 bytes (documented limit).
                            2048
                        };
                        (max, true)
                    }
                };
                let nbytes = width.div_ceil(8);
                fields.push(FieldLoc {
                    off,
                    nbytes,
                    width,
                    signed: f.signed,
                    saturating: f.saturating,
                    header: hi as u32,
                    is_valid_bit: false,
                    is_vl,
                });
                off += nbytes;
            }
            headers.push(HeaderLayout {
                name: h.name.clone(),
                off: start,
                slot_bytes: off - start,
                fixed_bits,
                metadata: h.metadata,
                vl_field: ht.vl_field().map(|x| x as u32),
                packed: ht
                    .fields
                    .iter()
                    .all(|f| matches!(f.width, FieldWidth::Fixed(w) if w % 8 == 0)),
                wire: wire_steps(&fields),
                fields,
                union: None,
            });
        }
        let unions: Vec<Vec<u32>> = p.header_unions.iter().map(|u| u.headers.clone()).collect();
        for (ui, u) in unions.iter().enumerate() {
            for h in u {
                headers[*h as usize].union = Some(ui as u32);
            }
        }
        let mut metadata_ranges: Vec<(u32, u32)> = Vec::new();
        for h in headers.iter().filter(|h| h.metadata && h.slot_bytes > 0) {
            let end = h.off + h.slot_bytes;
            match metadata_ranges.last_mut() {
                Some(r) if r.1 == h.off => r.1 = end,
                _ => metadata_ranges.push((h.off, end)),
            }
        }
        let valid_template = headers.iter().map(|h| h.metadata).collect();
        Layout {
            // An `extract` with a length on a fixed header also sets a width: count it too.
            has_vl: headers.iter().any(|h| h.vl_field.is_some())
                || p.parsers.iter().flat_map(|ps| &ps.states).any(|s| {
                    s.ops
                        .iter()
                        .any(|op| matches!(op, tern_model::ParserOp::ExtractVl(..)))
                }),
            metadata_ranges,
            valid_template,
            headers,
            total_bytes: off,
            stacks: p.header_stacks.iter().map(|s| s.headers.clone()).collect(),
            unions,
            union_stacks: p
                .header_union_stacks
                .iter()
                .map(|s| s.unions.clone())
                .collect(),
        }
    }

    /// The location of a field reference.
    pub fn field(&self, f: FieldRef) -> FieldLoc {
        let h = &self.headers[f.header as usize];
        if f.field == VALID_FIELD {
            return FieldLoc {
                off: 0,
                nbytes: 1,
                width: 1,
                signed: false,
                saturating: false,
                header: f.header,
                is_valid_bit: true,
                is_vl: false,
            };
        }
        h.fields[f.field as usize]
    }
}

/// The packet-time header vector.
#[derive(Clone, Debug)]
pub struct Phv {
    pub bytes: Vec<u8>,
    pub valid: Vec<bool>,
    pub stack_next: Vec<u32>,
    pub union_stack_next: Vec<u32>,
    /// Current width in bits of each header's VL field (0 if none).
    pub vl_width: Vec<u32>,
}

impl Phv {
    /// A PHV for `layout`: all zero, metadata valid, other headers invalid.
    pub fn new(layout: &Layout) -> Phv {
        let mut p = Phv {
            bytes: vec![0; layout.total_bytes as usize],
            valid: vec![false; layout.headers.len()],
            stack_next: vec![0; layout.stacks.len()],
            union_stack_next: vec![0; layout.union_stacks.len()],
            vl_width: vec![0; layout.headers.len()],
        };
        p.reset(layout);
        p
    }

    /// Reset for a new packet: metadata zeroed and valid, other headers invalid (their stale
    /// field values are kept, as BMv2 does; nothing reads them while invalid).
    pub fn reset(&mut self, layout: &Layout) {
        self.reset_metadata(layout);
        self.valid.copy_from_slice(&layout.valid_template);
        // Each fill is a `memset` call even when there is nothing to zero: skip those.
        if layout.has_vl {
            self.vl_width.fill(0);
        }
        if !self.stack_next.is_empty() {
            self.stack_next.fill(0);
        }
        if !self.union_stack_next.is_empty() {
            self.union_stack_next.fill(0);
        }
    }

    /// Zero every metadata header (clone/resubmit/recirculate reset): one fill per run of
    /// adjacent metadata slots, precomputed by [`Layout::new`].
    pub fn reset_metadata(&mut self, layout: &Layout) {
        for &(a, b) in &layout.metadata_ranges {
            self.bytes[a as usize..b as usize].fill(0);
        }
    }

    /// Invalidate every non-metadata header (start of a parse); metadata validity is kept.
    pub fn invalidate_headers(&mut self, layout: &Layout) {
        for (v, m) in self.valid.iter_mut().zip(&layout.valid_template) {
            *v &= *m;
        }
    }

    /// The slot bytes of a (non-`$valid$`) field.
    #[inline]
    pub fn slot(&self, f: &FieldLoc) -> &[u8] {
        &self.bytes[f.off as usize..(f.off + f.nbytes) as usize]
    }

    /// Read a field of at most 64 bits as an unsigned value (`$valid$` included).
    #[inline]
    pub fn read_u64(&self, f: &FieldLoc) -> u64 {
        if f.is_valid_bit {
            return self.valid[f.header as usize] as u64;
        }
        be_read(self.slot(f))
    }

    /// A standard-metadata field's value ([`StdSlot`]): what [`Phv::read_u64`] gives (the
    /// low 8 bytes of a wider slot), 0 if the program has no such field. Always inlined (the
    /// switch reads a few per packet): the window load, or 0 for an absent field; other
    /// fields take `Phv::read_std_slow`.
    #[inline(always)]
    pub fn read_std(&self, s: &StdSlot) -> u64 {
        match s.win {
            Some((start, shift, bmask, _)) => {
                let st = start as usize;
                let w: [u8; 8] = self.bytes[st..st + 8].try_into().unwrap();
                (u64::from_be_bytes(w) >> shift) & bmask
            }
            None if s.f.is_none() => 0,
            None => self.read_std_slow(s),
        }
    }

    #[inline(never)]
    fn read_std_slow(&self, s: &StdSlot) -> u64 {
        match &s.f {
            Some(f) if f.width <= 64 => self.read_u64(f),
            Some(f) => {
                let b = self.slot(f);
                be_read(&b[b.len().saturating_sub(8)..])
            }
            None => 0,
        }
    }

    /// Store a non-negative value into a standard-metadata field ([`StdSlot`]), exactly as
    /// `exec::store_field_u64` does; nothing if the program has no such field. Always inlined
    /// as [`Phv::read_std`] is: the window's read-modify-write, the rest out of line.
    #[inline(always)]
    pub fn write_std(&mut self, s: &StdSlot, v: u64) {
        match s.win {
            Some((start, shift, bmask, wmask)) => {
                let st = start as usize;
                let w: &mut [u8; 8] = (&mut self.bytes[st..st + 8]).try_into().unwrap();
                let old = u64::from_be_bytes(*w);
                *w = ((old & !(bmask << shift)) | ((v & wmask) << shift)).to_be_bytes();
            }
            None => {
                if let Some(f) = &s.f {
                    self.write_std_slow(f, v);
                }
            }
        }
    }

    #[inline(never)]
    fn write_std_slow(&mut self, f: &FieldLoc, v: u64) {
        crate::exec::store_field_u64(self, f, v);
    }

    /// Write the low `width` bits of `v` (unsigned wrap) into a field of at most 64 bits.
    #[inline]
    pub fn write_u64(&mut self, f: &FieldLoc, v: u64) {
        if f.is_valid_bit {
            // `$valid$` is read-only in BMv2; writes are ignored.
            return;
        }
        let v = if f.width >= 64 {
            v
        } else {
            v & ((1u64 << f.width) - 1)
        };
        let off = f.off as usize;
        be_write(&mut self.bytes[off..off + f.nbytes as usize], v);
    }
}

/// A field the switch itself reads or writes on every packet (standard metadata), resolved
/// once at load time. A plain field of at most 8 bytes whose 8-byte PHV window fits is read as
/// one fixed-size load, a shift and a mask, and written as one read-modify-write of that
/// window; anything else (or an absent field) takes the generic path through `f`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StdSlot {
    pub f: Option<FieldLoc>,
    /// `(window start, shift of the slot in the window, slot-bytes mask, width mask)`.
    win: Option<(u32, u32, u64, u64)>,
}

impl StdSlot {
    pub fn new(f: Option<FieldLoc>, total_bytes: u32) -> StdSlot {
        let win = f.and_then(|f| {
            let plain = !f.is_valid_bit && !f.saturating && !f.is_vl;
            if !plain || f.width > 64 || f.nbytes == 0 || f.nbytes > 8 {
                return None;
            }
            let bmask = u64::MAX >> (64 - 8 * f.nbytes);
            let wmask = u64::MAX >> (64 - f.width);
            let end = f.off + f.nbytes;
            if f.off + 8 <= total_bytes {
                Some((f.off, 64 - 8 * f.nbytes, bmask, wmask))
            } else if end >= 8 && end <= total_bytes {
                Some((end - 8, 0, bmask, wmask))
            } else {
                None
            }
        });
        StdSlot { f, win }
    }
}

/// A big-endian slot of at most 8 bytes as a `u64` (the usual sizes without a loop).
#[inline]
pub fn be_read(s: &[u8]) -> u64 {
    match *s {
        [a] => a as u64,
        [a, b] => u16::from_be_bytes([a, b]) as u64,
        [a, b, c, d] => u32::from_be_bytes([a, b, c, d]) as u64,
        [a, b, c, d, e, f] => u64::from_be_bytes([0, 0, a, b, c, d, e, f]),
        _ => s.iter().fold(0u64, |v, b| (v << 8) | *b as u64),
    }
}

/// Write the low bytes of `v` big-endian into `dst` (at most 8 bytes; longer slots get zeros
/// in front).
#[inline]
pub fn be_write(dst: &mut [u8], v: u64) {
    let b = v.to_be_bytes();
    match dst.len() {
        1 => dst[0] = b[7],
        2 => dst.copy_from_slice(&b[6..]),
        4 => dst.copy_from_slice(&b[4..]),
        6 => dst.copy_from_slice(&b[2..]),
        8 => dst.copy_from_slice(&b),
        _ => {
            for (i, d) in dst.iter_mut().rev().enumerate() {
                *d = if i < 8 { b[7 - i] } else { 0 };
            }
        }
    }
}

/// Copy `width` bits starting at bit `src_bit` of `src` into the low bits of the byte slot
/// `dst` (big-endian, right-aligned, `dst.len() == ceil(width/8)`).
pub fn bits_to_slot(src: &[u8], src_bit: usize, width: usize, dst: &mut [u8]) {
    if src_bit.is_multiple_of(8) && width.is_multiple_of(8) {
        let s = src_bit / 8;
        dst.copy_from_slice(&src[s..s + width / 8]);
        return;
    }
    if width <= 56 {
        // Fast path: one 64-bit window.
        let (b0, shift) = (src_bit / 8, src_bit % 8);
        let span = (shift + width).div_ceil(8);
        let mut v = 0u64;
        for b in &src[b0..b0 + span] {
            v = (v << 8) | *b as u64;
        }
        let v = (v >> (span * 8 - shift - width)) & ((1u64 << width) - 1);
        let n = dst.len();
        for (i, d) in dst.iter_mut().enumerate() {
            let sh = 8 * (n - 1 - i);
            *d = if sh < 64 { (v >> sh) as u8 } else { 0 };
        }
        return;
    }
    dst.fill(0);
    let pad = dst.len() * 8 - width;
    for i in 0..width {
        let sb = src_bit + i;
        let bit = (src[sb / 8] >> (7 - sb % 8)) & 1;
        if bit != 0 {
            let db = pad + i;
            dst[db / 8] |= 1 << (7 - db % 8);
        }
    }
}

/// Write the low `width` bits of a right-aligned slot into `dst` at bit `dst_bit`.
pub fn slot_to_bits(slot: &[u8], width: usize, dst: &mut [u8], dst_bit: usize) {
    if dst_bit.is_multiple_of(8) && width.is_multiple_of(8) {
        let d = dst_bit / 8;
        dst[d..d + width / 8].copy_from_slice(&slot[slot.len() - width / 8..]);
        return;
    }
    if width <= 56 {
        let mut v = 0u64;
        for b in &slot[slot.len().saturating_sub(8)..] {
            v = (v << 8) | *b as u64;
        }
        let mask = (1u64 << width) - 1;
        let (b0, shift) = (dst_bit / 8, dst_bit % 8);
        let span = (shift + width).div_ceil(8);
        let mut cur = 0u64;
        for b in &dst[b0..b0 + span] {
            cur = (cur << 8) | *b as u64;
        }
        let sh = span * 8 - shift - width;
        cur = (cur & !(mask << sh)) | ((v & mask) << sh);
        for (i, d) in dst[b0..b0 + span].iter_mut().enumerate() {
            *d = (cur >> (8 * (span - 1 - i))) as u8;
        }
        return;
    }
    let pad = slot.len() * 8 - width;
    for i in 0..width {
        let sb = pad + i;
        let bit = (slot[sb / 8] >> (7 - sb % 8)) & 1;
        let db = dst_bit + i;
        if bit != 0 {
            dst[db / 8] |= 1 << (7 - db % 8);
        } else {
            dst[db / 8] &= !(1 << (7 - db % 8));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_copies_round_trip() {
        let src = [0b1010_1100, 0b0101_0011];
        let mut slot = [0u8; 2];
        bits_to_slot(&src, 3, 9, &mut slot);
        assert_eq!(u16::from_be_bytes(slot), 0b0_1100_0101);
        let mut dst = [0u8; 2];
        slot_to_bits(&slot, 9, &mut dst, 3);
        assert_eq!(dst[0] & 0b0001_1111, src[0] & 0b0001_1111);
        assert_eq!(dst[1] & 0b1111_0000, src[1] & 0b1111_0000);
        // Fast and slow paths agree.
        for w in [1usize, 3, 9, 13, 31, 56, 57, 63] {
            for off in [0usize, 1, 5, 7] {
                let src: Vec<u8> = (0..12u8)
                    .map(|i| i.wrapping_mul(37).wrapping_add(11))
                    .collect();
                let n = w.div_ceil(8);
                let mut a = vec![0u8; n];
                bits_to_slot(&src, off, w, &mut a);
                let mut slow = vec![0u8; n];
                for i in 0..w {
                    let sb = off + i;
                    if (src[sb / 8] >> (7 - sb % 8)) & 1 == 1 {
                        let db = n * 8 - w + i;
                        slow[db / 8] |= 1 << (7 - db % 8);
                    }
                }
                assert_eq!(a, slow, "w={w} off={off}");
                let mut back = vec![0x5au8; 12];
                slot_to_bits(&a, w, &mut back, off);
                for i in 0..w {
                    let b = off + i;
                    assert_eq!(
                        (back[b / 8] >> (7 - b % 8)) & 1,
                        (src[b / 8] >> (7 - b % 8)) & 1
                    );
                }
                assert_eq!(back[11], 0x5a);
            }
        }
        let mut s2 = [0u8; 1];
        bits_to_slot(&src, 8, 8, &mut s2);
        assert_eq!(s2[0], src[1]);
    }
}

/// Packs bit fields most-significant bit first into a byte vector, through a 128-bit
/// accumulator flushed eight bytes at a time (the byte-at-a-time read-modify-write of
/// [`slot_to_bits`] costs several times more for the short fields hash and checksum inputs are
/// made of).
pub struct BitPacker<'a> {
    out: &'a mut Vec<u8>,
    acc: u128,
    /// Bits waiting in `acc` (always < 64 between calls).
    n: u32,
}

impl<'a> BitPacker<'a> {
    /// Append to `out` (its current bytes are kept).
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        BitPacker { out, acc: 0, n: 0 }
    }

    /// Append the low `w` (≤ 64) bits of `v`.
    #[inline]
    pub fn push(&mut self, v: u64, w: u32) {
        debug_assert!(w <= 64);
        if w == 0 {
            return;
        }
        let v = if w >= 64 { v } else { v & ((1u64 << w) - 1) };
        self.acc = (self.acc << w) | v as u128;
        self.n += w;
        if self.n >= 64 {
            self.n -= 64;
            self.out
                .extend_from_slice(&((self.acc >> self.n) as u64).to_be_bytes());
            self.acc &= (1u128 << self.n) - 1;
        }
    }

    /// Append a `w`-bit value stored right-aligned, big-endian, in `slot` (a PHV slot or a
    /// constant's bytes; `slot` may be longer than `ceil(w / 8)`).
    #[inline]
    pub fn push_slot(&mut self, slot: &[u8], w: u32) {
        let nb = w.div_ceil(8) as usize;
        let s = &slot[slot.len() - nb.min(slot.len())..];
        if w <= 64 {
            let v = s.iter().fold(0u64, |v, b| (v << 8) | *b as u64);
            self.push(v, w);
            return;
        }
        let first = w - 8 * (nb as u32 - 1);
        self.push(s[0] as u64, first);
        let rest = &s[1..];
        if self.n == 0 {
            self.out.extend_from_slice(rest);
            return;
        }
        let mut chunks = rest.chunks_exact(8);
        for c in &mut chunks {
            let mut x = [0u8; 8];
            x.copy_from_slice(c);
            self.push(u64::from_be_bytes(x), 64);
        }
        for b in chunks.remainder() {
            self.push(*b as u64, 8);
        }
    }

    /// Append fixed-width fields of at most 64 bits each, read from their PHV slots in
    /// `bytes` (one header's run of calculation inputs: no per-field call or slice walk).
    #[inline]
    pub fn push_fields(&mut self, bytes: &[u8], fields: &[FieldLoc]) {
        let (mut acc, mut n) = (self.acc, self.n);
        for f in fields {
            debug_assert!(f.width <= 64 && !f.is_vl && !f.is_valid_bit);
            let o = f.off as usize;
            let v = match f.nbytes {
                1 => bytes[o] as u64,
                2 => u16::from_be_bytes([bytes[o], bytes[o + 1]]) as u64,
                4 => {
                    u32::from_be_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as u64
                }
                k => bytes[o..o + k as usize]
                    .iter()
                    .fold(0u64, |v, b| (v << 8) | *b as u64),
            };
            let w = f.width;
            let v = if w >= 64 { v } else { v & ((1u64 << w) - 1) };
            acc = (acc << w) | v as u128;
            n += w;
            if n >= 64 {
                n -= 64;
                self.out
                    .extend_from_slice(&((acc >> n) as u64).to_be_bytes());
                acc &= (1u128 << n) - 1;
            }
        }
        self.acc = acc;
        self.n = n;
    }

    /// Write out the pending bits, padded with zero bits on the right to a byte boundary.
    fn flush_padded(&mut self) {
        if self.n == 0 {
            return;
        }
        let pad = (8 - self.n % 8) % 8;
        let acc = self.acc << pad;
        let nbytes = (self.n + pad) / 8;
        for i in (0..nbytes).rev() {
            self.out.push((acc >> (8 * i)) as u8);
        }
        self.acc = 0;
        self.n = 0;
    }

    /// Pad to a byte boundary with zero bits, then append `bytes`.
    pub fn align_and_extend(&mut self, bytes: &[u8]) {
        self.flush_padded();
        self.out.extend_from_slice(bytes);
    }

    /// Flush a partial last byte (padded with zero bits on the right).
    pub fn finish(mut self) {
        self.flush_padded();
    }
}

#[cfg(test)]
mod bit_packer_tests {
    use super::*;

    /// `be_read`/`be_write` agree with a byte-at-a-time big-endian reading for every size.
    #[test]
    fn be_read_write_round_trip() {
        let v = 0x0123_4567_89ab_cdefu64;
        for n in 1..=10usize {
            let mut slot = vec![0xeeu8; n];
            be_write(&mut slot, v);
            let want: Vec<u8> = (0..n)
                .map(|i| {
                    let k = n - 1 - i;
                    if k < 8 {
                        (v >> (8 * k)) as u8
                    } else {
                        0
                    }
                })
                .collect();
            assert_eq!(slot, want, "{n} bytes");
            if n <= 8 {
                let low = if n == 8 {
                    v
                } else {
                    v & ((1u64 << (8 * n)) - 1)
                };
                assert_eq!(be_read(&slot), low, "{n} bytes");
            }
        }
    }

    /// The packer agrees with the bit-at-a-time reference for every width mix.
    #[test]
    fn packer_matches_slot_to_bits() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for _ in 0..2000 {
            let nfields = 1 + next() % 8;
            let fields: Vec<(Vec<u8>, u32)> = (0..nfields)
                .map(|_| {
                    let w = 1 + (next() % 130) as u32;
                    let nb = w.div_ceil(8) as usize;
                    let mut slot: Vec<u8> = (0..nb).map(|_| next() as u8).collect();
                    slot[0] &= (0xffu16 >> (nb as u32 * 8 - w)) as u8;
                    (slot, w)
                })
                .collect();
            let total: u32 = fields.iter().map(|f| f.1).sum();
            let mut want = vec![0u8; total.div_ceil(8) as usize];
            let mut bit = 0;
            for (s, w) in &fields {
                slot_to_bits(s, *w as usize, &mut want, bit);
                bit += *w as usize;
            }
            let mut got = Vec::new();
            let mut p = BitPacker::new(&mut got);
            // Fields of at most 64 bits also go through `push_fields`, as one run.
            let mut phv = Vec::new();
            let mut locs = Vec::new();
            for (s, w) in &fields {
                if *w <= 64 && next() % 3 != 0 {
                    locs.push(FieldLoc {
                        off: phv.len() as u32,
                        nbytes: s.len() as u32,
                        width: *w,
                        signed: false,
                        saturating: false,
                        header: 0,
                        is_valid_bit: false,
                        is_vl: false,
                    });
                    phv.extend_from_slice(s);
                    continue;
                }
                p.push_fields(&phv, &locs);
                locs.clear();
                p.push_slot(s, *w);
            }
            p.push_fields(&phv, &locs);
            if next() % 2 == 0 {
                let tail: Vec<u8> = (0..next() % 20).map(|_| next() as u8).collect();
                p.align_and_extend(&tail);
                want.extend_from_slice(&tail);
            }
            p.finish();
            assert_eq!(got, want, "fields {fields:?}");
        }
    }
}
