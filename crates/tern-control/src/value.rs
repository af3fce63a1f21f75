//! Text ↔ bytes conversions of the CLI: Python-compatible integer literals, action-parameter
//! and match-key values (`runtime-cli.md` §1.3, §1.4), hex rendering and Python float repr.

use tern_model::MatchKind;
use tern_runtime::MatchParam;

/// Largest magnitude (in bytes) an integer literal may have before it is reported as too large.
const MAX_INT_BYTES: usize = 4096;

/// A Python integer: sign and big-endian magnitude (no leading zero bytes; empty = 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PyInt {
    pub negative: bool,
    pub magnitude: Vec<u8>,
    /// The literal was syntactically valid but larger than [`MAX_INT_BYTES`].
    pub huge: bool,
}

impl PyInt {
    /// The value as an `i128`, if it fits.
    pub fn to_i128(&self) -> Option<i128> {
        if self.huge || self.magnitude.len() > 15 {
            return None;
        }
        let mut v: i128 = 0;
        for b in &self.magnitude {
            v = (v << 8) | i128::from(*b);
        }
        Some(if self.negative { -v } else { v })
    }

    /// The value as a `u32`, if it is in range.
    pub fn to_u32(&self) -> Option<u32> {
        self.to_i128().and_then(|v| u32::try_from(v).ok())
    }

    /// Python's `int_to_bytes(i, num)`: big-endian in exactly `num` bytes; negative → zeros.
    pub fn to_bytes(&self, num: usize) -> Option<Vec<u8>> {
        if self.huge {
            return None;
        }
        if self.negative {
            return Some(vec![0; num]);
        }
        if self.magnitude.len() > num {
            return None;
        }
        let mut out = vec![0; num - self.magnitude.len()];
        out.extend_from_slice(&self.magnitude);
        Some(out)
    }
}

impl std::fmt::Display for PyInt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.to_i128() {
            Some(v) => write!(f, "{v}"),
            None => {
                if self.negative {
                    f.write_str("-")?;
                }
                f.write_str("0x")?;
                for b in &self.magnitude {
                    write!(f, "{b:02x}")?;
                }
                Ok(())
            }
        }
    }
}

fn mul_add(mag: &mut Vec<u8>, base: u32, digit: u32) {
    let mut carry = digit;
    for b in mag.iter_mut().rev() {
        let v = u32::from(*b) * base + carry;
        *b = (v & 0xff) as u8;
        carry = v >> 8;
    }
    while carry > 0 {
        mag.insert(0, (carry & 0xff) as u8);
        carry >>= 8;
    }
}

/// Python `int(text, 0)` (`auto_base`) or `int(text)` (decimal only). `None` if invalid.
pub fn py_int(text: &str, auto_base: bool) -> Option<PyInt> {
    let s = text.trim();
    let (negative, s) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = s.get(..2).map(|p| p.to_ascii_lowercase());
    let (base, digits, after_prefix) = match (auto_base, lower.as_deref()) {
        (true, Some("0x")) => (16, &s[2..], true),
        (true, Some("0o")) => (8, &s[2..], true),
        (true, Some("0b")) => (2, &s[2..], true),
        _ => (10, s, false),
    };
    if digits.is_empty() {
        return None;
    }
    // Underscores: single, between digits (or right after a base prefix).
    let bytes = digits.as_bytes();
    if bytes[bytes.len() - 1] == b'_' || (!after_prefix && bytes[0] == b'_') {
        return None;
    }
    if digits.contains("__") {
        return None;
    }
    let mut mag: Vec<u8> = Vec::new();
    let mut huge = false;
    let mut all_zero = true;
    let mut first_digit = None;
    for c in digits.chars() {
        if c == '_' {
            continue;
        }
        let d = c.to_digit(base)?;
        if first_digit.is_none() {
            first_digit = Some(d);
        }
        if d != 0 {
            all_zero = false;
        }
        if !huge {
            mul_add(&mut mag, base, d);
            if mag.len() > MAX_INT_BYTES {
                huge = true;
                mag.clear();
            }
        }
    }
    // Python's base-0 rule: a decimal literal may not start with 0 unless it is all zeros.
    if auto_base && base == 10 && first_digit == Some(0) && !all_zero {
        return None;
    }
    let first_nz = mag.iter().position(|b| *b != 0).unwrap_or(mag.len());
    mag.drain(..first_nz);
    Some(PyInt {
        negative: negative && (!mag.is_empty() || huge),
        magnitude: mag,
        huge,
    })
}

/// Python `int(text)` as an `i128` (decimal); `None` if invalid or out of range.
pub fn py_int10(text: &str) -> Option<i128> {
    py_int(text, false).and_then(|v| v.to_i128())
}

/// `ceil(bitwidth / 8)`.
pub fn byte_width(bitwidth: u32) -> usize {
    (bitwidth as usize).div_ceil(8)
}

/// `parse_param(text, bitwidth)` of §1.3; the error is the reason text.
pub fn parse_param(text: &str, bitwidth: u32) -> Result<Vec<u8>, String> {
    if bitwidth == 32 && text.contains('.') {
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() != 4 {
            return Err("Invalid IPv4 address".into());
        }
        return parts
            .iter()
            .map(|p| {
                py_int10(p)
                    .and_then(|v| u8::try_from(v).ok())
                    .ok_or_else(|| "Invalid IPv4 address".to_string())
            })
            .collect();
    }
    if bitwidth == 48 && text.contains(':') {
        let parts: Vec<&str> = text.split(':').collect();
        if parts.len() != 6 {
            return Err("Invalid MAC address".into());
        }
        return parts
            .iter()
            .map(|p| {
                let ok = !p.is_empty() && p.len() <= 2 && p.chars().all(|c| c.is_ascii_hexdigit());
                if ok {
                    u8::from_str_radix(p, 16).map_err(|_| "Invalid MAC address".to_string())
                } else {
                    Err("Invalid MAC address".to_string())
                }
            })
            .collect();
    }
    if bitwidth == 128 && text.contains(':') {
        return text
            .parse::<std::net::Ipv6Addr>()
            .map(|a| a.octets().to_vec())
            .map_err(|_| "Invalid IPv6 address".to_string());
    }
    let v = py_int(text, true).ok_or_else(|| {
        "Invalid input, could not cast to integer, try in hex with 0x prefix".to_string()
    })?;
    v.to_bytes(byte_width(bitwidth))
        .ok_or_else(|| "Parameter is too large".to_string())
}

/// Lower-case hex without separators (`hexstr` of the stock CLI).
pub fn hexstr(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Lower-case hex bytes joined by `:` (the `table_add` echo format).
pub fn colon_hex(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// Why a key field did not parse; printed after `Invalid match key: `.
pub fn parse_match_key(
    keys: &[(String, MatchKind, u32)],
    fields: &[&str],
) -> Result<Vec<MatchParam>, String> {
    let pp =
        |f: &str, bw: u32| parse_param(f, bw).map_err(|e| format!("Error while parsing {f} - {e}"));
    let mut out = Vec::with_capacity(fields.len());
    for (field, (_, kind, bw)) in fields.iter().zip(keys) {
        let bw = *bw;
        let p = match kind {
            MatchKind::Exact => MatchParam::Exact(pp(field, bw)?),
            MatchKind::Lpm => {
                let parts: Vec<&str> = field.split('/').collect();
                if parts.len() != 2 {
                    return Err(format!(
                        "Invalid LPM value {field}, use '/' to separate prefix and length"
                    ));
                }
                let key = pp(parts[0], bw)?;
                let len = py_int10(parts[1])
                    .and_then(|v| u32::try_from(v).ok())
                    .ok_or_else(|| format!("Invalid prefix length in LPM value {field}"))?;
                MatchParam::Lpm {
                    key,
                    prefix_len: len,
                }
            }
            MatchKind::Ternary => {
                let parts: Vec<&str> = field.split("&&&").collect();
                if parts.len() != 2 {
                    return Err(format!(
                        "Invalid ternary value {field}, use '&&&' to separate key and mask"
                    ));
                }
                let key = pp(parts[0], bw)?;
                let mask = pp(parts[1], bw)?;
                MatchParam::Ternary { key, mask }
            }
            MatchKind::Valid => {
                let v = py_int10(field)
                    .ok_or_else(|| format!("Invalid valid value {field}, use 0 or 1"))?;
                MatchParam::Valid(v != 0)
            }
            MatchKind::Range => {
                let parts: Vec<&str> = field.split("->").collect();
                if parts.len() != 2 {
                    return Err(format!(
                        "Invalid range value {field}, use '->' to separate range start and range end"
                    ));
                }
                let start = pp(parts[0], bw)?;
                let end = pp(parts[1], bw)?;
                if start > end {
                    return Err(format!("start is less than end in expression {field}"));
                }
                MatchParam::Range { start, end }
            }
        };
        out.push(p);
    }
    Ok(out)
}

/// The `table_add` echo of one key field, e.g. `LPM-0a:00:01:0a/32`.
pub fn match_param_echo(p: &MatchParam) -> String {
    match p {
        MatchParam::Exact(k) => format!("EXACT-{}", colon_hex(k)),
        MatchParam::Lpm { key, prefix_len } => format!("LPM-{}/{prefix_len}", colon_hex(key)),
        MatchParam::Ternary { key, mask } => {
            format!("TERNARY-{} &&& {}", colon_hex(key), colon_hex(mask))
        }
        MatchParam::Valid(_) => "VALID-".to_string(),
        MatchParam::Range { start, end } => {
            format!("RANGE-{} -> {}", colon_hex(start), colon_hex(end))
        }
    }
}

/// The dump rendering of one key field value (§2.6).
pub fn match_param_dump(p: &MatchParam) -> (&'static str, String) {
    match p {
        MatchParam::Exact(k) => ("EXACT", hexstr(k)),
        MatchParam::Lpm { key, prefix_len } => ("LPM", format!("{}/{prefix_len}", hexstr(key))),
        MatchParam::Ternary { key, mask } => {
            ("TERNARY", format!("{} &&& {}", hexstr(key), hexstr(mask)))
        }
        MatchParam::Valid(v) => ("VALID", if *v { "01" } else { "00" }.to_string()),
        MatchParam::Range { start, end } => {
            ("RANGE", format!("{} -> {}", hexstr(start), hexstr(end)))
        }
    }
}

/// Python `repr(float)`: shortest round-trip digits, fixed notation for exponents in
/// `-4..16`, otherwise `d.ddde+XX`.
pub fn py_float(v: f64) -> String {
    if v.is_nan() {
        return "nan".into();
    }
    if v.is_infinite() {
        return if v > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{v:e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mant) = match mant.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mant),
    };
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let s = if exp < 0 {
            format!("0.{}{}", "0".repeat((-exp - 1) as usize), digits)
        } else if exp + 1 >= n {
            format!("{}{}.0", digits, "0".repeat((exp + 1 - n) as usize))
        } else {
            let (a, b) = digits.split_at((exp + 1) as usize);
            format!("{a}.{b}")
        };
        format!("{sign}{s}")
    } else {
        let m = if digits.len() > 1 {
            format!("{}.{}", &digits[..1], &digits[1..])
        } else {
            digits.clone()
        };
        let es = if exp < 0 { "-" } else { "+" };
        format!("{sign}{m}e{es}{:02}", exp.abs())
    }
}

/// Python's `'{:^w}'.format(s)`: centred, extra padding on the right.
pub fn center(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n >= w {
        return s.to_string();
    }
    let pad = w - n;
    let left = pad / 2;
    format!("{}{}{}", " ".repeat(left), s, " ".repeat(pad - left))
}

/// Python's `'{:w}'.format(s)`: left-aligned, padded to `w`.
pub fn pad(s: &str, w: usize) -> String {
    let n = s.chars().count();
    if n >= w {
        s.to_string()
    } else {
        format!("{}{}", s, " ".repeat(w - n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_int_literals() {
        let v = |s| py_int(s, true).and_then(|v| v.to_i128());
        assert_eq!(v("123"), Some(123));
        assert_eq!(v("0x1f"), Some(31));
        assert_eq!(v("0X1F"), Some(31));
        assert_eq!(v("0b101"), Some(5));
        assert_eq!(v("0o17"), Some(15));
        assert_eq!(v("-5"), Some(-5));
        assert_eq!(v("1_000"), Some(1000));
        assert_eq!(v("000"), Some(0));
        assert_eq!(v("010"), None);
        assert_eq!(v("1__0"), None);
        assert_eq!(v("_1"), None);
        assert_eq!(v("0x"), None);
        assert_eq!(v(""), None);
        assert_eq!(v("abc"), None);
        assert_eq!(py_int10("010"), Some(10));
        assert_eq!(py_int10("0x10"), None);
        let big = py_int(&"9".repeat(20000), true).unwrap();
        assert!(big.huge);
        assert_eq!(big.to_bytes(16), None);
    }

    #[test]
    fn params() {
        assert_eq!(parse_param("10.0.1.10", 32).unwrap(), vec![10, 0, 1, 10]);
        assert_eq!(
            parse_param("10.0.1", 32).unwrap_err(),
            "Invalid IPv4 address"
        );
        assert_eq!(
            parse_param("10.0.1.300", 32).unwrap_err(),
            "Invalid IPv4 address"
        );
        assert_eq!(
            parse_param("00:aa:bb:00:00:01", 48).unwrap(),
            vec![0, 0xaa, 0xbb, 0, 0, 1]
        );
        assert_eq!(
            parse_param("00:aa:bb", 48).unwrap_err(),
            "Invalid MAC address"
        );
        assert_eq!(parse_param("::1", 128).unwrap()[15], 1);
        assert_eq!(parse_param("1", 9).unwrap(), vec![0, 1]);
        assert_eq!(parse_param("0x1ff", 9).unwrap(), vec![1, 0xff]);
        assert_eq!(parse_param("0x3ff", 9).unwrap(), vec![3, 0xff]);
        assert_eq!(
            parse_param("0x10000", 16).unwrap_err(),
            "Parameter is too large"
        );
        assert_eq!(parse_param("-3", 16).unwrap(), vec![0, 0]);
        assert!(parse_param("zz", 16)
            .unwrap_err()
            .starts_with("Invalid input"));
    }

    #[test]
    fn float_repr() {
        assert_eq!(py_float(1.0), "1.0");
        assert_eq!(py_float(0.5), "0.5");
        assert_eq!(py_float(2.25), "2.25");
        assert_eq!(py_float(1e-5), "1e-05");
        assert_eq!(py_float(0.0001), "0.0001");
        assert_eq!(py_float(1e16), "1e+16");
        assert_eq!(py_float(1.5e16), "1.5e+16");
        assert_eq!(py_float(123456.0), "123456.0");
        assert_eq!(py_float(-0.25), "-0.25");
    }

    #[test]
    fn centring() {
        assert_eq!(center("port #", 10), "  port #  ");
        assert_eq!(center("status", 9), " status  ");
    }
}

#[cfg(test)]
mod key_tests {
    use super::*;

    fn keys() -> Vec<(String, MatchKind, u32)> {
        vec![
            ("h.a".into(), MatchKind::Exact, 16),
            ("h.b".into(), MatchKind::Lpm, 32),
            ("h.c".into(), MatchKind::Ternary, 8),
            ("h_valid".into(), MatchKind::Valid, 1),
            ("h.d".into(), MatchKind::Range, 16),
        ]
    }

    #[test]
    fn every_key_kind_parses_and_renders() {
        let k = parse_match_key(
            &keys(),
            &["0x102", "10.1.0.0/16", "5&&&0xf", "1", "10->0x20"],
        )
        .unwrap();
        let echo: Vec<String> = k.iter().map(match_param_echo).collect();
        assert_eq!(
            echo,
            [
                "EXACT-01:02",
                "LPM-0a:01:00:00/16",
                "TERNARY-05 &&& 0f",
                "VALID-",
                "RANGE-00:0a -> 00:20"
            ]
        );
        let dump: Vec<(&str, String)> = k.iter().map(match_param_dump).collect();
        assert_eq!(dump[0], ("EXACT", "0102".to_string()));
        assert_eq!(dump[1], ("LPM", "0a010000/16".to_string()));
        assert_eq!(dump[2], ("TERNARY", "05 &&& 0f".to_string()));
        assert_eq!(dump[3], ("VALID", "01".to_string()));
        assert_eq!(dump[4], ("RANGE", "000a -> 0020".to_string()));
    }

    #[test]
    fn key_errors() {
        let ks = keys();
        let one = |i: usize, f: &str| parse_match_key(&ks[i..=i], &[f]).unwrap_err();
        assert_eq!(one(4, "5->1"), "start is less than end in expression 5->1");
        assert_eq!(
            one(4, "5"),
            "Invalid range value 5, use '->' to separate range start and range end"
        );
        assert_eq!(
            one(1, "1/2/3"),
            "Invalid LPM value 1/2/3, use '/' to separate prefix and length"
        );
        assert_eq!(
            one(2, "1&&&2&&&3"),
            "Invalid ternary value 1&&&2&&&3, use '&&&' to separate key and mask"
        );
        assert_eq!(one(3, "x"), "Invalid valid value x, use 0 or 1");
        assert_eq!(
            one(0, "0x10000"),
            "Error while parsing 0x10000 - Parameter is too large"
        );
    }
}
