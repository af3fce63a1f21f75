//! Checksums over deparsed bytes: a load-time plan that lets `update_checksum` with `csum16`
//! over one header's fields in wire order (the IPv4 header checksum) sum the header's emitted
//! bytes directly instead of packing its fields one by one.
//!
//! The packed field list of such a checksum is the header's wire bytes with the left-out fields
//! removed. When every left-out run of fields starts on a 16-bit boundary and is a whole number
//! of 16-bit words, removing it keeps every other byte at the same position within its 16-bit
//! word, so the one's-complement sum is the sum over the whole header minus the left-out words
//! ([`csum16_skip`]). The checksums then run right after the headers are emitted (in program
//! order, each result stored in the PHV and patched into the emitted bytes), which is only
//! equivalent to running them before emission when nothing else happens in between: the plan
//! is taken only when the deparser has no primitives, each planned header is emitted exactly
//! once, and every updated target can be patched in place (whole bytes, byte-aligned on the
//! wire). Otherwise every checksum keeps the generic path. When every update is planned, with
//! no condition or a validity test, [`native_list`] gives the form the generated emit function
//! runs them in (`jit::Native::emit_csum`).

use crate::compile::{CChecksum, CInput, Engine};
use crate::hash::Algo;
use crate::layout::Layout;

/// A checksum summed over its header's emitted bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WireCsum {
    /// Header instance whose emitted bytes are summed.
    pub header: u32,
    /// Wire size of the header in bytes.
    pub len: u32,
    /// Byte ranges `(start, end)` of the header left out of the sum (even-aligned, even length).
    pub skip: Vec<(u32, u32)>,
}

/// The deparse-time checksum plan of a program (present only when it applies, see the module
/// documentation).
#[derive(Clone, Debug, Default)]
pub struct CsumPlan {
    /// Per checksum (same index as [`Engine::checksums`]): summed over emitted bytes, or `None`
    /// for the generic path.
    pub wire: Vec<Option<WireCsum>>,
    /// Per checksum: byte position of the target field within its emitted header, if the
    /// target's header is emitted (the stored result is copied there).
    pub patch: Vec<Option<u32>>,
}

/// Wire bit offset of every field of fixed-width header `h` (None if it has a VL field).
fn wire_offsets(layout: &Layout, h: u32) -> Option<Vec<u32>> {
    let hl = layout.headers.get(h as usize)?;
    if hl.vl_field.is_some() {
        return None;
    }
    let mut bit = 0;
    Some(
        hl.fields
            .iter()
            .map(|f| {
                let b = bit;
                bit += f.width;
                b
            })
            .collect(),
    )
}

/// The wire form of checksum `c`, if it is `csum16` over one fixed-size header's fields in
/// wire order with only 16-bit-word runs left out (or the P4_14 `ipv4` checksum type).
fn wire_form(eng: &Engine, c: &CChecksum) -> Option<WireCsum> {
    let layout = &eng.layout;
    if c.ipv4 {
        let h = c.target.header;
        let hl = layout.headers.get(h as usize)?;
        if hl.vl_field.is_some() || hl.fields.iter().any(|f| f.width > 64) {
            return None;
        }
        let len = hl.fixed_bits.div_ceil(8);
        // The generic path zeroes bytes 10..12 of the packed header when it has them.
        let skip = if len >= 12 {
            vec![(10, 12)]
        } else {
            Vec::new()
        };
        return Some(WireCsum {
            header: h,
            len,
            skip,
        });
    }
    let calc = eng.calcs.get(c.calc? as usize)?;
    if calc.algo != Algo::Csum16 {
        return None;
    }
    let [CInput::Fields { header, fields }] = calc.inputs.as_slice() else {
        return None;
    };
    let h = *header;
    let hl = &layout.headers[h as usize];
    let offs = wire_offsets(layout, h)?;
    let total = hl.fixed_bits;
    if !total.is_multiple_of(8) {
        return None;
    }
    // Match the list against the header's fields in order; collect the left-out runs.
    let mut skip_bits: Vec<(u32, u32)> = Vec::new();
    let mut next = 0usize;
    for f in fields {
        let i = hl.fields[next..].iter().position(|x| x.off == f.off)? + next;
        if i > next {
            skip_bits.push((offs[next], offs[i]));
        }
        next = i + 1;
    }
    if next < hl.fields.len() {
        skip_bits.push((offs[next], total));
    }
    let mut skip = Vec::with_capacity(skip_bits.len());
    for (a, b) in skip_bits {
        if !a.is_multiple_of(16) || !(b - a).is_multiple_of(16) {
            return None;
        }
        skip.push((a / 8, b / 8));
    }
    Some(WireCsum {
        header: h,
        len: total / 8,
        skip,
    })
}

/// The plan for `eng`, or `None` when the program keeps the generic checksum path.
pub fn plan(eng: &Engine) -> Option<CsumPlan> {
    let (order, prims) = eng.deparser.as_ref()?;
    if !prims.is_empty() {
        return None;
    }
    let emitted = |h: u32| order.iter().filter(|&&x| x == h).count();
    let mut out = CsumPlan::default();
    for c in &eng.checksums {
        if !c.update {
            out.wire.push(None);
            out.patch.push(None);
            continue;
        }
        let t = &c.target;
        if t.is_valid_bit || t.is_vl || !t.width.is_multiple_of(8) || t.width > 64 {
            return None;
        }
        let patch = match emitted(t.header) {
            0 => None,
            1 => {
                let offs = wire_offsets(&eng.layout, t.header)?;
                let fi = eng.layout.headers[t.header as usize]
                    .fields
                    .iter()
                    .position(|f| f.off == t.off)?;
                if !offs[fi].is_multiple_of(8) {
                    return None;
                }
                Some(offs[fi] / 8)
            }
            _ => return None,
        };
        out.patch.push(patch);
        out.wire
            .push(wire_form(eng, c).filter(|w| emitted(w.header) == 1));
    }
    out.wire.iter().any(Option::is_some).then_some(out)
}

/// One checksum update the generated emit function performs itself (see
/// `jit::Gen::checksums`): everything it needs, fixed at load.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NativeCsum {
    /// The update's condition: the header whose validity it tests (`None`: always).
    pub cond: Option<u32>,
    /// The summed header's wire form.
    pub wire: WireCsum,
    /// PHV byte offset and size (whole bytes, ≤ 8) of the target field's slot.
    pub target_off: u32,
    pub target_bytes: u32,
    /// The target's header and the target's byte position within its emitted bytes, when the
    /// target is emitted (patched there if that header is valid).
    pub patch: Option<(u32, u32)>,
}

/// The checksum updates of `eng`, in program order, in the form the generated emit function
/// computes (the planned path of [`CsumPlan`], with every decision taken at load): only when
/// every update is planned over emitted bytes, its condition is absent or one validity test,
/// and its target is not saturating. Otherwise why not (the Rust path of the plan stays).
pub fn native_list(eng: &Engine) -> Result<Vec<NativeCsum>, String> {
    let plan = eng.csum_plan.as_ref().ok_or("no checksum plan")?;
    let mut out = Vec::new();
    for (i, c) in eng.checksums.iter().enumerate() {
        if !c.update {
            continue;
        }
        let wire = plan.wire[i]
            .clone()
            .ok_or("a checksum not summed over one emitted header")?;
        use crate::expr::{FastBool, FastVal};
        let cond = match (&c.cond, &c.fast_cond) {
            (None, _) | (Some(_), Some(FastBool::Const(true))) => None,
            // `isValid()`, or p4c's `d2b` of the `$valid$` field.
            (Some(_), Some(FastBool::Valid(h))) => Some(*h),
            (Some(_), Some(FastBool::NonZero(FastVal::Field(f)))) if f.is_valid_bit => {
                Some(f.header)
            }
            _ => return Err("a checksum condition other than a validity test".into()),
        };
        let t = &c.target;
        if t.saturating || t.nbytes > 8 || t.nbytes * 8 != t.width {
            return Err("a checksum target that is not plain whole bytes".into());
        }
        out.push(NativeCsum {
            cond,
            wire,
            target_off: t.off,
            target_bytes: t.nbytes,
            patch: plan.patch[i].map(|p| (t.header, p)),
        });
    }
    if out.is_empty() {
        return Err("no checksum update".into());
    }
    Ok(out)
}

/// `csum16` of `bytes` with the byte ranges `skip` (even-aligned, even length, in order, not
/// overlapping) left out:
/// the same value as [`crate::hash::csum16`] over the bytes that remain.
#[inline]
pub fn csum16_skip(bytes: &[u8], skip: &[(u32, u32)]) -> u64 {
    // Sum the whole header once as big-endian 32-bit words (read 8 bytes at a time, each split
    // into its two 32-bit halves), then a 16-bit word, then a last odd byte shifted left by 8;
    // then subtract every left-out 16-bit word with the weight it had in that sum (2^16 as the
    // high half of a 32-bit word, else 1). What remains is exactly the sum of the kept bytes
    // with the same weights: each kept 16-bit word (the kept ranges start on even bytes, so
    // their 16-bit words are those of the packed list) counted with weight 1 or 2^16. That is
    // congruent to the plain sum of the kept 16-bit words modulo 0xffff (2^16 ≡ 1), and zero
    // only if every kept word is; the fold maps a non-zero sum to the unique representative in
    // 1..=0xffff: the same value csum16 computes.
    let len = bytes.len();
    let mut sum = 0u64;
    let mut c8 = bytes.chunks_exact(8);
    for c in &mut c8 {
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        sum += (w >> 32) + (w & 0xffff_ffff);
    }
    let r = c8.remainder();
    let mut at = 0;
    if r.len() >= 4 {
        sum += u32::from_be_bytes([r[0], r[1], r[2], r[3]]) as u64;
        at = 4;
    }
    if r.len() - at >= 2 {
        sum += u16::from_be_bytes([r[at], r[at + 1]]) as u64;
        at += 2;
    }
    if r.len() > at {
        sum += (r[at] as u64) << 8;
    }
    // Bytes below `words` were summed in 32-bit words.
    let words = len & !3;
    for &(a, b) in skip {
        let mut k = a as usize;
        while k < b as usize {
            let w = u16::from_be_bytes([bytes[k], bytes[k + 1]]) as u64;
            let high = k < words && k.is_multiple_of(4);
            sum -= if high { w << 16 } else { w };
            k += 2;
        }
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    (!sum) & 0xffff
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Remove the skipped ranges and sum with the reference csum16: same value, on random
    /// bytes, lengths and skip sets.
    #[test]
    fn skip_sum_matches_reference_on_remaining_bytes() {
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for _ in 0..5_000 {
            let len = (next() % 41) as usize;
            let bytes: Vec<u8> = (0..len)
                .map(|_| if next() % 4 == 0 { 0xff } else { next() as u8 })
                .collect();
            let mut skip = Vec::new();
            let mut pos = 0u32;
            while (pos as usize) + 2 <= len && next() % 3 != 0 {
                let a = pos + 2 * (next() % 3) as u32;
                let b = a + 2 * (next() % 3) as u32;
                if b as usize > len {
                    break;
                }
                skip.push((a, b));
                pos = b;
            }
            let kept: Vec<u8> = bytes
                .iter()
                .enumerate()
                .filter(|(i, _)| !skip.iter().any(|&(a, b)| (a..b).contains(&(*i as u32))))
                .map(|(_, b)| *b)
                .collect();
            assert_eq!(
                csum16_skip(&bytes, &skip),
                crate::hash::csum16(&kept),
                "{bytes:02x?} skip {skip:?}"
            );
        }
    }
}
