//! The two hex-string flavours of BMv2 JSON (`bmv2-json.md` §2.1): arbitrary-precision
//! *values* (optional `-`, optional `0x`) and *byte strings* whose byte length matters.

/// An arbitrary-precision integer constant: sign and big-endian magnitude.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Int {
    pub negative: bool,
    /// Big-endian magnitude (may have leading zero bytes).
    pub magnitude: Vec<u8>,
}

impl Int {
    /// A non-negative constant.
    pub fn from_u64(v: u64) -> Int {
        Int {
            negative: false,
            magnitude: v.to_be_bytes().to_vec(),
        }
    }

    /// A signed constant.
    pub fn from_i64(v: i64) -> Int {
        Int {
            negative: v < 0,
            magnitude: v.unsigned_abs().to_be_bytes().to_vec(),
        }
    }

    /// Number of significant bits of the magnitude.
    pub fn magnitude_bits(&self) -> u32 {
        for (i, b) in self.magnitude.iter().enumerate() {
            if *b != 0 {
                let rest = (self.magnitude.len() - i - 1) as u32;
                return rest * 8 + (8 - b.leading_zeros());
            }
        }
        0
    }

    /// The value as `i128` if it fits.
    pub fn to_i128(&self) -> Option<i128> {
        if self.magnitude_bits() > 127 {
            return None;
        }
        let mut v: i128 = 0;
        for b in &self.magnitude {
            v = (v << 8) | *b as i128;
        }
        Some(if self.negative { -v } else { v })
    }

    /// The value modulo 2^128, two's complement (wider constants keep their low 128 bits).
    pub fn to_i128_wrapping(&self) -> i128 {
        let mut v: u128 = 0;
        for b in &self.magnitude {
            v = (v << 8) | *b as u128;
        }
        let v = v as i128;
        if self.negative {
            v.wrapping_neg()
        } else {
            v
        }
    }

    /// The low `width` bits of the two's-complement value, big-endian in `ceil(width/8)` bytes.
    pub fn to_bytes(&self, width: u32) -> Vec<u8> {
        let nbytes = width.div_ceil(8) as usize;
        let mut out = vec![0u8; nbytes];
        // Copy the magnitude right-aligned.
        let m = &self.magnitude;
        for i in 0..nbytes.min(m.len()) {
            out[nbytes - 1 - i] = m[m.len() - 1 - i];
        }
        if self.negative {
            // Two's complement: invert and add one.
            let mut carry = 1u16;
            for b in out.iter_mut().rev() {
                let v = (!*b) as u16 + carry;
                *b = v as u8;
                carry = v >> 8;
            }
        }
        if !width.is_multiple_of(8) && nbytes > 0 {
            out[0] &= (1u8 << (width % 8)) - 1;
        }
        out
    }
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn digits_to_bytes(d: &[u8]) -> Option<Vec<u8>> {
    if d.is_empty() {
        return None;
    }
    let mut out = Vec::with_capacity(d.len() / 2 + 1);
    let mut i = 0;
    if d.len() % 2 == 1 {
        out.push(hex_digit(d[0])?);
        i = 1;
    }
    while i < d.len() {
        out.push(hex_digit(d[i])? << 4 | hex_digit(d[i + 1])?);
        i += 2;
    }
    Some(out)
}

/// Parse a *value* hex string: `[-][0x]digits`.
pub fn parse_value(s: &str) -> Option<Int> {
    let (negative, rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s),
    };
    let rest = rest.strip_prefix("0x").unwrap_or(rest);
    let magnitude = digits_to_bytes(rest.as_bytes())?;
    Some(Int {
        negative,
        magnitude,
    })
}

/// Parse a *byte string*: `[0x]digits`; an odd digit count makes the first digit a byte.
pub fn parse_byte_string(s: &str) -> Option<Vec<u8>> {
    let rest = s.strip_prefix("0x").unwrap_or(s);
    digits_to_bytes(rest.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_strings_keep_their_length() {
        assert_eq!(parse_byte_string("0x0001"), Some(vec![0, 1]));
        assert_eq!(parse_byte_string("0x1"), Some(vec![1]));
        assert_eq!(parse_byte_string("0x001"), Some(vec![0, 1]));
        assert_eq!(parse_byte_string("0x0aba03"), Some(vec![0x0a, 0xba, 0x03]));
        assert_eq!(parse_byte_string("-0x1"), None);
        assert_eq!(parse_byte_string("0xg1"), None);
    }

    #[test]
    fn values_have_sign_and_precision() {
        let v = parse_value("-0x1").unwrap();
        assert_eq!(v.to_i128(), Some(-1));
        assert_eq!(v.to_bytes(8), vec![0xff]);
        assert_eq!(v.to_bytes(12), vec![0x0f, 0xff]);
        let big = parse_value("0x0100000000000000000000000000000000").unwrap();
        assert_eq!(big.magnitude_bits(), 129);
        assert_eq!(big.to_i128(), None);
        assert_eq!(parse_value("ff").unwrap().to_i128(), Some(255));
        assert_eq!(Int::from_u64(0x1234).to_bytes(9), vec![0x00, 0x34]);
    }
}
