//! Every hash algorithm and checksum simple_switch registers, by the names BMv2 JSON uses.
//!
//! [`resolve`] turns a calculation or selector algorithm name (the built-ins, the named CRC
//! catalogue of BMv2's `crc_map`, and parametric `poly_0x1…_init_…_xout_…[_not_rev]` names)
//! into an [`Algo`]; [`compute`] runs it over the packed input bytes. The CRCs share one
//! bit-wise generic implementation; `tests/known_answers.rs` pins each against the published
//! check value of the CRC catalogue (input `"123456789"`).

/// A resolved algorithm.
#[derive(Clone, Debug, PartialEq)]
pub enum Algo {
    Csum16,
    Crc {
        width: u32,
        poly: u64,
        init: u64,
        xorout: u64,
        reflect: bool,
    },
    Identity,
    Xor16,
    Xor32,
    HashEx,
    Xxh64,
    RoundRobin,
    /// Like round robin, but an input always gets the value it got first (the state lives in
    /// the caller, see `exec::ExternState::rr_seen`).
    RoundRobinConsistent,
    /// Toeplitz (RSS) hash with its run-time key (default: 4 zero bytes).
    Toeplitz(Vec<u8>),
    Unsupported(String),
}

fn crc(width: u32, poly: u64, init: u64, xorout: u64, reflect: bool) -> Algo {
    Algo::Crc {
        width,
        poly,
        init,
        xorout,
        reflect,
    }
}

/// Resolve an algorithm name (already validated by the loader).
pub fn resolve(name: &str) -> Algo {
    match name {
        "csum16" | "cksum16" => Algo::Csum16,
        "crc16" | "crc16_custom" | "crc_16" => crc(16, 0x8005, 0, 0, true),
        "crc32" | "crc32_custom" | "crc_32" => crc(32, 0x04C1_1DB7, 0xFFFF_FFFF, 0xFFFF_FFFF, true),
        "crcCCITT" | "crc_ccitt_false" => crc(16, 0x1021, 0xFFFF, 0, false),
        "crc8_custom" | "crc_8" => crc(8, 0x07, 0, 0, false),
        "crc64_custom" | "crc_64" => crc(64, 0x1B, 0, 0, true),
        "crc_8_darc" => crc(8, 0x39, 0, 0, true),
        "crc_8_i_code" => crc(8, 0x1d, 0xfd, 0, false),
        "crc_8_itu" => crc(8, 0x07, 0, 0x55, false),
        "crc_8_maxim" => crc(8, 0x31, 0, 0, true),
        "crc_8_rohc" => crc(8, 0x07, 0xff, 0, true),
        "crc_8_wcdma" => crc(8, 0x9b, 0, 0, true),
        "crc_16_buypass" => crc(16, 0x8005, 0, 0, false),
        "crc_16_dds_110" => crc(16, 0x8005, 0x800d, 0, false),
        "crc_16_dect" => crc(16, 0x0589, 0, 1, false),
        "crc_16_dnp" => crc(16, 0x3d65, 0, 0xffff, true),
        "crc_16_en_13757" => crc(16, 0x3d65, 0, 0xffff, false),
        "crc_16_genibus" => crc(16, 0x1021, 0xffff, 0xffff, false),
        "crc_16_maxim" => crc(16, 0x8005, 0, 0xffff, true),
        "crc_16_mcrf4xx" => crc(16, 0x1021, 0xffff, 0, true),
        "crc_16_riello" => crc(16, 0x1021, 0xb2aa, 0, true),
        "crc_16_t10_dif" => crc(16, 0x8bb7, 0, 0, false),
        "crc_16_teledisk" => crc(16, 0xa097, 0, 0, false),
        "crc_16_usb" => crc(16, 0x8005, 0xffff, 0xffff, true),
        "x_25" => crc(16, 0x1021, 0xffff, 0xffff, true),
        "xmodem" => crc(16, 0x1021, 0, 0, false),
        "modbus" => crc(16, 0x8005, 0xffff, 0, true),
        "kermit" => crc(16, 0x1021, 0, 0, true),
        "crc_aug_ccitt" => crc(16, 0x1021, 0x1d0f, 0, false),
        "crc_32_bzip2" => crc(32, 0x04c11db7, 0xffffffff, 0xffffffff, false),
        "crc_32c" => crc(32, 0x1edc6f41, 0xffffffff, 0xffffffff, true),
        "crc_32d" => crc(32, 0xa833982b, 0xffffffff, 0xffffffff, true),
        "crc_32_mpeg" => crc(32, 0x04c11db7, 0xffffffff, 0, false),
        "posix" => crc(32, 0x04c11db7, 0, 0xffffffff, false),
        "crc_32q" => crc(32, 0x814141ab, 0, 0, false),
        "jamcrc" => crc(32, 0x04c11db7, 0xffffffff, 0, true),
        "xfer" => crc(32, 0xaf, 0, 0, false),
        "crc_64_we" => crc(64, 0x42f0e1eba9ea3693, u64::MAX, u64::MAX, false),
        "crc_64_jones" => crc(64, 0xad93d23594c935a9, u64::MAX, 0, true),
        "identity" => Algo::Identity,
        "xor16" => Algo::Xor16,
        "xor32" => Algo::Xor32,
        "hash_ex" => Algo::HashEx,
        "xxh64" | "bmv2_hash" => Algo::Xxh64,
        "round_robin" => Algo::RoundRobin,
        "round_robin_consistent" => Algo::RoundRobinConsistent,
        "toeplitz" => Algo::Toeplitz(vec![0; 4]),
        other => parametric(other).unwrap_or_else(|| Algo::Unsupported(other.to_string())),
    }
}

/// Parse a parametric CRC name: `poly_0x1<hex>` (the leading `1` is the implicit top bit and
/// fixes the width: 8, 16, 32 or 64), then any of `init_0x<hex>`, `xout_0x<hex>`, `not_rev`
/// (the default is reflected in and out). Any other token makes the name invalid.
fn parametric(name: &str) -> Option<Algo> {
    let mut toks = name.split('_');
    fn hex_digits(s: &str) -> Option<&str> {
        s.strip_prefix("0x")
            .filter(|h| !h.is_empty() && h.bytes().all(|c| c.is_ascii_hexdigit()))
    }
    let hex_value = |s: &str| hex_digits(s).and_then(|h| u64::from_str_radix(h, 16).ok());
    if toks.next()? != "poly" {
        return None;
    }
    let digits = hex_digits(toks.next()?)?.trim_start_matches('0');
    let rest = digits.strip_prefix('1')?;
    let width = (rest.len() * 4) as u32;
    if ![8, 16, 32, 64].contains(&width) {
        return None;
    }
    let poly = u64::from_str_radix(rest, 16).ok()?;
    let (mut init, mut xorout, mut reflect) = (0u64, 0u64, true);
    while let Some(tok) = toks.next() {
        match (tok, toks.next()) {
            ("init", Some(v)) => init = hex_value(v)?,
            ("xout", Some(v)) => xorout = hex_value(v)?,
            ("not", Some("rev")) => reflect = false,
            _ => return None,
        }
    }
    Some(crc(width, poly, init, xorout, reflect))
}

/// Is `name` an algorithm simple_switch registers (so a JSON naming it loads)?
pub fn is_known(name: &str) -> bool {
    !matches!(resolve(name), Algo::Unsupported(_))
}

fn generic_crc(data: &[u8], width: u32, poly: u64, init: u64, xorout: u64, reflect: bool) -> u64 {
    let mask = if width == 64 {
        u64::MAX
    } else {
        (1u64 << width) - 1
    };
    let top = 1u64 << (width - 1);
    let mut r = init & mask;
    for &b in data {
        let b = if reflect { b.reverse_bits() } else { b };
        for i in (0..8).rev() {
            let bit = (b >> i) & 1 == 1;
            let t = (r & top != 0) ^ bit;
            r = (r << 1) & mask;
            if t {
                r ^= poly;
            }
        }
    }
    if reflect {
        r = r.reverse_bits() >> (64 - width);
    }
    (r ^ xorout) & mask
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn xx_round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn xx_merge(h: u64, v: u64) -> u64 {
    (h ^ xx_round(0, v)).wrapping_mul(P1).wrapping_add(P4)
}

fn le64(b: &[u8]) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[..8]);
    u64::from_le_bytes(w)
}

/// xxHash64 (the algorithm behind `xxh64` and `bmv2_hash`).
pub fn xxh64(data: &[u8], seed: u64) -> u64 {
    let len = data.len();
    let mut rest = data;
    let mut h = if len >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 32 {
            for (i, acc) in v.iter_mut().enumerate() {
                *acc = xx_round(*acc, le64(&rest[i * 8..]));
            }
            rest = &rest[32..];
        }
        let mut h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        for x in v {
            h = xx_merge(h, x);
        }
        h
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(len as u64);
    while rest.len() >= 8 {
        h ^= xx_round(0, le64(rest));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        rest = &rest[8..];
    }
    if rest.len() >= 4 {
        let w = u32::from_le_bytes([rest[0], rest[1], rest[2], rest[3]]) as u64;
        h ^= w.wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        rest = &rest[4..];
    }
    for b in rest {
        h ^= (*b as u64).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

/// Toeplitz hash: for every set input bit i (MSB first), XOR in the 32 key bits starting at
/// bit i; key bits past the end of the key read as zero.
pub fn toeplitz(key: &[u8], data: &[u8]) -> u64 {
    let key_bit = |b: usize| -> u32 {
        key.get(b / 8)
            .map_or(0, |k| ((k >> (7 - b % 8)) & 1) as u32)
    };
    let mut window: u32 = (0..32).fold(0, |w, b| (w << 1) | key_bit(b));
    let mut result = 0u32;
    for (i, byte) in data.iter().enumerate() {
        for j in 0..8 {
            if (byte >> (7 - j)) & 1 == 1 {
                result ^= window;
            }
            window = (window << 1) | key_bit(i * 8 + j + 32);
        }
    }
    result as u64
}

/// RFC 1071 Internet checksum.
pub fn csum16(data: &[u8]) -> u64 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u64;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u64) << 8;
    }
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    (!sum) & 0xffff
}

/// Compute `algo` over `data`; `rr` is the algorithm's round-robin counter.
pub fn compute(algo: &Algo, data: &[u8], rr: &mut u64) -> u64 {
    match algo {
        Algo::Csum16 => csum16(data),
        Algo::Crc {
            width,
            poly,
            init,
            xorout,
            reflect,
        } => generic_crc(data, *width, *poly, *init, *xorout, *reflect),
        Algo::Identity => data.iter().take(8).fold(0u64, |a, b| (a << 8) | *b as u64),
        Algo::Xor16 => data.chunks(2).fold(0u64, |a, c| {
            a ^ ((c[0] as u64) << 8 | c.get(1).copied().unwrap_or(0) as u64)
        }),
        Algo::Xor32 => data.chunks(4).fold(0u64, |a, c| {
            let mut w = [0u8; 4];
            w[..c.len()].copy_from_slice(c);
            a ^ u32::from_be_bytes(w) as u64
        }),
        Algo::HashEx => {
            let mut h: u32 = 2166136261;
            for &b in data {
                h = (h ^ (b as i8 as i32 as u32)).wrapping_mul(16777619);
            }
            h = h.wrapping_add(h << 13);
            h ^= h >> 7;
            h = h.wrapping_add(h << 3);
            h ^= h >> 17;
            h = h.wrapping_add(h << 5);
            h as u64
        }
        Algo::Xxh64 => xxh64(data, 0),
        Algo::RoundRobin | Algo::RoundRobinConsistent => {
            let v = *rr;
            *rr += 1;
            v
        }
        Algo::Toeplitz(key) => toeplitz(key, data),
        Algo::Unsupported(_) => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_values() {
        let d = b"123456789";
        let mut rr = 0;
        assert_eq!(compute(&resolve("crc16"), d, &mut rr), 0xBB3D);
        assert_eq!(compute(&resolve("crc32"), d, &mut rr), 0xCBF43926);
        assert_eq!(compute(&resolve("crcCCITT"), d, &mut rr), 0x29B1);
        assert_eq!(compute(&resolve("crc_32c"), d, &mut rr), 0xE3069283);
        assert_eq!(
            compute(
                &resolve("poly_0x11021_init_0xffff_xout_0x0_not_rev"),
                d,
                &mut rr
            ),
            0x29B1
        );
        assert_eq!(compute(&resolve("crc_8"), d, &mut rr), 0xF4);
        assert_eq!(
            compute(&resolve("crc_64_we"), d, &mut rr),
            0x62EC59E3F1A4F00A
        );
        assert_eq!(xxh64(b"", 0), 0xEF46_DB37_51D8_E999);
        // Microsoft's RSS verification suite: 66.9.149.187 -> 161.142.100.80 (IPv4 only).
        let key = [
            0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
            0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
            0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
        ];
        assert_eq!(
            toeplitz(&key, &[66, 9, 149, 187, 161, 142, 100, 80]),
            0x323e_8fc2
        );
        assert_eq!(toeplitz(&[0; 4], b"anything"), 0);
        assert_eq!(xxh64(b"abc", 0), 0x44BC_2CF5_AD77_0999);
        assert_eq!(
            xxh64(b"Nobody inspects the spammish repetition", 0),
            0xFBCE_A83C_8A37_8BF1
        );
        // RFC 1071 example header.
        let ip = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0, 0, 0xc0, 0xa8, 0x00,
            0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(csum16(&ip), 0xb861);
    }
}
