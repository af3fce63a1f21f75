//! How BMv2 reads a JSON value: simple_switch parses its program with jsoncpp (`is >> root`,
//! the `CharReaderBuilder` defaults) and converts every member with `asBool`, `asInt`,
//! `asUInt` or `asString`. This module owns those rules so the loader accepts exactly the
//! scalar shapes simple_switch accepts (`"signed": 1`, `"bitwidth": 8.0`, `"id": true`,
//! `"name": 5`, a missing member read as null) and rejects the others with jsoncpp's own words.
//! The table of which member is read how is in the crate README.

use serde_json::Value;
use std::borrow::Cow;

/// jsoncpp's `Value::asBool`: null is false, numbers are "non-zero" (NaN cannot occur in
/// JSON), strings, arrays and objects are errors.
pub fn as_bool(v: &Value) -> Result<bool, &'static str> {
    match v {
        Value::Null => Ok(false),
        Value::Bool(b) => Ok(*b),
        Value::Number(n) => Ok(if let Some(u) = n.as_u64() {
            u != 0
        } else if let Some(i) = n.as_i64() {
            i != 0
        } else {
            n.as_f64().is_some_and(|f| f != 0.0)
        }),
        _ => Err("Value is not convertible to bool."),
    }
}

/// jsoncpp's `Value::asInt` (32-bit): integers in range, reals in range truncated toward
/// zero, null 0, booleans 0/1; anything else is an error.
pub fn as_int(v: &Value) -> Result<i32, &'static str> {
    match v {
        Value::Null => Ok(0),
        Value::Bool(b) => Ok(*b as i32),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                i32::try_from(i).map_err(|_| "LargestInt out of Int range")
            } else if n.as_u64().is_some() {
                Err("LargestUInt out of Int range")
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if (i32::MIN as f64..=i32::MAX as f64).contains(&f) {
                    Ok(f as i32)
                } else {
                    Err("double out of Int range")
                }
            }
        }
        _ => Err("Value is not convertible to Int."),
    }
}

/// jsoncpp's `Value::asUInt` (32-bit): as [`as_int`] with the range `0..=u32::MAX`.
pub fn as_uint(v: &Value) -> Result<u32, &'static str> {
    match v {
        Value::Null => Ok(0),
        Value::Bool(b) => Ok(*b as u32),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                u32::try_from(u).map_err(|_| "LargestUInt out of UInt range")
            } else if n.as_i64().is_some() {
                Err("LargestInt out of UInt range")
            } else {
                let f = n.as_f64().unwrap_or(f64::NAN);
                if (0.0..=u32::MAX as f64).contains(&f) {
                    Ok(f as u32)
                } else {
                    Err("double out of UInt range")
                }
            }
        }
        _ => Err("Value is not convertible to UInt."),
    }
}

/// jsoncpp's `Value::isInt`: an integer, or a real with no fraction, in the 32-bit range
/// (BMv2's `verify` takes a plain error code when this holds).
pub fn is_int(v: &Value) -> bool {
    match v {
        Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => i32::try_from(i).is_ok(),
            (None, Some(_), _) => false,
            (_, _, Some(f)) => f.fract() == 0.0 && (i32::MIN as f64..=i32::MAX as f64).contains(&f),
            _ => false,
        },
        _ => false,
    }
}

/// jsoncpp's `Value::asString`: null is `""`, booleans `true`/`false`, numbers in decimal
/// (reals as `%.17g`, with `.0` added when that has no `.` or exponent); arrays and objects
/// are errors.
pub fn as_string(v: &Value) -> Result<Cow<'_, str>, &'static str> {
    match v {
        Value::Null => Ok(Cow::Borrowed("")),
        Value::String(s) => Ok(Cow::Borrowed(s)),
        Value::Bool(b) => Ok(Cow::Borrowed(if *b { "true" } else { "false" })),
        Value::Number(n) => Ok(Cow::Owned(if let Some(u) = n.as_u64() {
            u.to_string()
        } else if let Some(i) = n.as_i64() {
            i.to_string()
        } else {
            real_to_string(n.as_f64().unwrap_or(0.0))
        })),
        _ => Err("Type is not convertible to string"),
    }
}

/// `printf("%.17g")` plus jsoncpp's `.0` suffix.
fn real_to_string(f: f64) -> String {
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // 17 significant digits: d.dddddddddddddddde±x
    let sci = format!("{f:.16e}");
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let strip = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    let mut out = if !(-4..17).contains(&exp) {
        let m = strip(mant);
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{m}e{sign}{:02}", exp.abs())
    } else {
        let decimals = (16 - exp).max(0) as usize;
        strip(&format!("{f:.decimals$}"))
    };
    if !out.contains('.') && !out.contains('e') {
        out.push_str(".0");
    }
    out
}

/// Parse a document as jsoncpp's default reader does: `//` and `/* */` comments are allowed
/// and whatever follows the first complete value is ignored. Duplicate keys keep the last
/// value (as jsoncpp and serde_json both do).
///
/// Nesting: jsoncpp's reader allows 1000 levels (`stackLimit`); serde_json's default stops at
/// 128, which a long chain of `&&` in a p4c expression can pass. Documents nested deeper than
/// 1000 are refused with jsoncpp's message; deeper than 128 are parsed on a thread with a
/// large stack, so no input can overflow the caller's stack.
pub fn parse(text: &str) -> Result<Value, String> {
    let clean = strip_comments(text)?;
    let depth = max_depth(&clean);
    if depth > STACK_LIMIT {
        return Err(format!(
            "Exceeded stackLimit in readValue(). (nesting depth {depth} > {STACK_LIMIT})"
        ));
    }
    if depth <= 128 {
        return first_value(&clean);
    }
    let owned = clean.into_owned();
    std::thread::Builder::new()
        .stack_size(256 << 20)
        .spawn(move || first_value(&owned))
        .map_err(|e| format!("cannot start the JSON reader: {e}"))?
        .join()
        .unwrap_or_else(|_| Err("the JSON reader failed".to_string()))
}

/// jsoncpp's default `stackLimit`.
const STACK_LIMIT: usize = 1000;

fn first_value(text: &str) -> Result<Value, String> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    let mut values = de.into_iter::<Value>();
    match values.next() {
        Some(Ok(v)) => Ok(v),
        Some(Err(e)) => Err(e.to_string()),
        None => Err("the document is empty".to_string()),
    }
}

/// Deepest `[`/`{` nesting outside strings.
fn max_depth(text: &str) -> usize {
    let (mut depth, mut max, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for b in text.bytes() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// `text` with every comment outside strings replaced by spaces (newlines kept, so serde's
/// line and column numbers stay right).
fn strip_comments(text: &str) -> Result<Cow<'_, str>, String> {
    if !text.contains('/') {
        return Ok(Cow::Borrowed(text));
    }
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    let mut in_string = false;
    while i < b.len() {
        let c = b[i];
        if in_string {
            out.push(c);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == b'"' {
                in_string = false;
            }
            i += 1;
        } else if c == b'"' {
            in_string = true;
            out.push(c);
            i += 1;
        } else if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                out.push(b' ');
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let start = i;
            i += 2;
            loop {
                if i + 1 >= b.len() {
                    let line = text[..start].matches('\n').count() + 1;
                    return Err(format!("unterminated /* comment starting on line {line}"));
                }
                if b[i] == b'*' && b[i + 1] == b'/' {
                    i += 2;
                    break;
                }
                i += 1;
            }
            out.extend(
                text[start..i]
                    .bytes()
                    .map(|x| if x == b'\n' { b'\n' } else { b' ' }),
            );
        } else {
            out.push(c);
            i += 1;
        }
    }
    // Only ASCII bytes were replaced, by ASCII: still UTF-8.
    String::from_utf8(out)
        .map(Cow::Owned)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bools() {
        for (v, b) in [
            (json!(true), true),
            (json!(false), false),
            (json!(null), false),
            (json!(0), false),
            (json!(1), true),
            (json!(-3), true),
            (json!(0.0), false),
            (json!(0.5), true),
        ] {
            assert_eq!(as_bool(&v), Ok(b), "{v}");
        }
        for v in [json!("true"), json!([]), json!({})] {
            assert_eq!(as_bool(&v), Err("Value is not convertible to bool."), "{v}");
        }
    }

    #[test]
    fn ints() {
        assert_eq!(as_int(&json!(7)), Ok(7));
        assert_eq!(as_int(&json!(-7)), Ok(-7));
        assert_eq!(as_int(&json!(7.9)), Ok(7));
        assert_eq!(as_int(&json!(-7.9)), Ok(-7));
        assert_eq!(as_int(&json!(1.0)), Ok(1));
        assert_eq!(as_int(&json!(true)), Ok(1));
        assert_eq!(as_int(&json!(null)), Ok(0));
        assert!(as_int(&json!(2147483648u64)).is_err());
        assert!(as_int(&json!(1e10)).is_err());
        assert_eq!(as_int(&json!("1")), Err("Value is not convertible to Int."));
        assert_eq!(as_uint(&json!(4294967295u64)), Ok(u32::MAX));
        assert_eq!(as_uint(&json!(-1)), Err("LargestInt out of UInt range"));
        assert_eq!(as_uint(&json!(3.5)), Ok(3));
        assert_eq!(as_uint(&json!(-0.5)), Err("double out of UInt range"));
        assert!(is_int(&json!(3)) && is_int(&json!(3.0)) && !is_int(&json!(3.5)));
        assert!(!is_int(&json!("3")) && !is_int(&json!(true)));
    }

    #[test]
    fn strings() {
        assert_eq!(as_string(&json!("x")).unwrap(), "x");
        assert_eq!(as_string(&json!(null)).unwrap(), "");
        assert_eq!(as_string(&json!(false)).unwrap(), "false");
        assert_eq!(as_string(&json!(42)).unwrap(), "42");
        assert_eq!(as_string(&json!(-42)).unwrap(), "-42");
        assert_eq!(as_string(&json!(1.0)).unwrap(), "1.0");
        assert_eq!(as_string(&json!(0.5)).unwrap(), "0.5");
        assert_eq!(as_string(&json!(0.1)).unwrap(), "0.10000000000000001");
        assert_eq!(as_string(&json!(1e20)).unwrap(), "1e+20");
        assert!(as_string(&json!([1])).is_err());
    }

    #[test]
    fn reader() {
        let v = parse("// a program\n{\"a\": /* one */ 1, \"s\": \"//not a comment\"} trailing")
            .unwrap();
        assert_eq!(v, json!({"a": 1, "s": "//not a comment"}));
        assert_eq!(parse("{\"a\": 1, \"a\": 2}").unwrap(), json!({"a": 2}));
        assert!(parse("{\"a\": 1 /* open")
            .unwrap_err()
            .contains("unterminated"));
        assert!(parse("").is_err());
        assert!(parse("{\"a\": }").is_err());
        // 900 levels load (serde_json alone stops at 128); 1001 are jsoncpp's limit.
        let deep = |n: usize| format!("{}1{}", "[".repeat(n), "]".repeat(n));
        assert!(parse(&deep(900)).is_ok());
        assert!(parse(&deep(1001)).unwrap_err().contains("stackLimit"));
        assert_eq!(max_depth(r#"{"a": "[[[", "b": [[1], {"c": "\\\"{"}]}"#), 3);
    }
}
