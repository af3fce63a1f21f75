//! Translating STF names and values into runtime calls (`stf.md` §4): table/action/key name
//! resolution, key encodings per match kind, the priority convention, and the runtime CLI's
//! value syntax for action parameters and pass-through object names.

use crate::ast::{ActionCall, KeyValue, Radix, StfNumber};
use tern_model::{KeyTarget, MatchKind, Program, Table};
use tern_runtime::MatchParam;

/// A fully translated `add`: what `table_add` would send to the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddEntry {
    /// Full JSON table name.
    pub table: String,
    /// Full JSON action name.
    pub action: String,
    /// One match parameter per JSON key, in key order.
    pub key: Vec<MatchParam>,
    /// Action data in `runtime_data` order.
    pub data: Vec<Vec<u8>>,
    /// BMv2 priority (`10000 - stf priority`), only for ternary tables.
    pub priority: Option<i32>,
}

/// Tables the runner knows: those of the first two pipelines, as p4c's runner reads them.
fn tables(program: &Program) -> impl Iterator<Item = &Table> {
    program
        .pipelines
        .iter()
        .take(2)
        .flat_map(|p| p.tables.iter())
}

/// Exact name, else the unique table whose name ends with `name` (plain string suffix).
pub fn resolve_table<'p>(program: &'p Program, name: &str) -> Result<&'p Table, String> {
    if let Some(t) = tables(program).find(|t| t.name == name) {
        return Ok(t);
    }
    let c: Vec<&Table> = tables(program).filter(|t| t.name.ends_with(name)).collect();
    match c.as_slice() {
        [t] => Ok(t),
        [] => Err(format!("no table named '{name}' (nor ending with it)")),
        _ => Err(format!(
            "table name '{name}' is ambiguous: {}",
            c.iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Among the table's actions: exact name, else unique string-suffix match. Returns the action index.
pub fn resolve_action(program: &Program, table: &Table, name: &str) -> Result<usize, String> {
    let acts: Vec<usize> = table
        .actions
        .iter()
        .map(|&a| a as usize)
        .filter(|&a| a < program.actions.len())
        .collect();
    if let Some(&a) = acts.iter().find(|&&a| program.actions[a].name == name) {
        return Ok(a);
    }
    let c: Vec<usize> = acts
        .into_iter()
        .filter(|&a| program.actions[a].name.ends_with(name))
        .collect();
    match c.as_slice() {
        [a] => Ok(*a),
        [] => Err(format!("table '{}' has no action '{name}'", table.name)),
        _ => Err(format!(
            "action name '{name}' is ambiguous in table '{}': {}",
            table.name,
            c.iter()
                .map(|&a| program.actions[a].name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Rewrite `x$N...` stack-element spellings into `x[N]...`.
fn rewrite_stack_dollar(name: &str) -> String {
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '$'
            && i > 0
            && chars[i - 1] != '.'
            && chars.get(i + 1).is_some_and(char::is_ascii_digit)
        {
            let mut j = i + 1;
            while j < chars.len() && chars[j].is_ascii_digit() {
                j += 1;
            }
            if j == chars.len() || chars[j] == '.' {
                out.push('[');
                out.extend(&chars[i + 1..j]);
                out.push(']');
                i = j;
                continue;
            }
        }
        out.push(c);
        i += 1;
    }
    out
}

/// Resolve an STF key name to the index of a JSON key (§4.2 rules 1–6).
pub fn resolve_key(table: &Table, stf_name: &str) -> Result<usize, String> {
    let name = rewrite_stack_dollar(stf_name);
    let names: Vec<&str> = table.key.iter().map(|k| k.name.as_str()).collect();
    let find = |want: &str| names.iter().position(|n| *n == want);
    if let Some(i) = find(&name) {
        return Ok(i);
    }
    if let Some(i) = find(&format!("{name}$")) {
        return Ok(i);
    }
    if let Some(i) = find(&format!("{name}.$valid$")) {
        return Ok(i);
    }
    if let Some(base) = name.strip_suffix(".valid") {
        if let Some(i) = find(&format!("{base}.$valid$")) {
            return Ok(i);
        }
    }
    let dotted = format!(".{name}");
    let dotted_dollar = format!(".{name}$");
    if let Some(i) = names
        .iter()
        .position(|n| n.ends_with(&dotted) || n.ends_with(&dotted_dollar))
    {
        return Ok(i);
    }
    if name == "valid" {
        if let Some(i) = names.iter().position(|n| n.ends_with(".$valid$")) {
            return Ok(i);
        }
        if let Some(i) = find("$valid$") {
            return Ok(i);
        }
    }
    Err(format!(
        "table '{}' has no key '{stf_name}' (keys: {})",
        table.name,
        if names.is_empty() {
            "none".to_string()
        } else {
            names.join(", ")
        }
    ))
}

/// Bits of the digits of a hex/binary number, most significant first; `*` gives `None`.
fn digit_bits(n: &StfNumber) -> Vec<Option<bool>> {
    let per = if n.radix == Radix::Hex { 4 } else { 1 };
    let mut bits = Vec::new();
    for c in n.digits.chars() {
        match c.to_digit(if per == 4 { 16 } else { 2 }) {
            Some(v) => {
                for b in (0..per).rev() {
                    bits.push(Some((v >> b) & 1 == 1));
                }
            }
            None => bits.resize(bits.len() + per, None),
        }
    }
    bits
}

/// Pack bits (MSB first) into exactly `nbytes` big-endian bytes; `None` if they do not fit.
fn pack_bits(bits: &[bool], nbytes: usize) -> Option<Vec<u8>> {
    let first_one = bits.iter().position(|&b| b).unwrap_or(bits.len());
    let significant = &bits[first_one..];
    if significant.len() > nbytes * 8 {
        return None;
    }
    let mut out = vec![0u8; nbytes];
    for (i, &b) in significant.iter().rev().enumerate() {
        if b {
            out[nbytes - 1 - i / 8] |= 1 << (i % 8);
        }
    }
    Some(out)
}

/// A decimal digit string as big-endian bytes of width `nbytes`; `None` if it does not fit.
fn decimal_to_bytes(digits: &str, nbytes: usize) -> Option<Vec<u8>> {
    let mut out = vec![0u8; nbytes];
    for c in digits.chars() {
        let mut carry = c.to_digit(10)?;
        for b in out.iter_mut().rev() {
            let v = u32::from(*b) * 10 + carry;
            *b = (v & 0xff) as u8;
            carry = v >> 8;
        }
        if carry != 0 {
            return None;
        }
    }
    Some(out)
}

/// An STF number (without `*`) as big-endian bytes of width `nbytes`.
fn number_bytes(n: &StfNumber, nbytes: usize) -> Option<Vec<u8>> {
    match n.radix {
        Radix::Dec => decimal_to_bytes(&n.digits, nbytes),
        _ => {
            let bits: Option<Vec<bool>> = digit_bits(n).into_iter().collect();
            pack_bits(&bits?, nbytes)
        }
    }
}

/// The runtime CLI's `parse_param(text, bitwidth)` (`runtime-cli.md` §1.3).
pub fn parse_cli_value(text: &str, bitwidth: u32) -> Result<Vec<u8>, String> {
    let nbytes = bitwidth.div_ceil(8) as usize;
    if bitwidth == 32 && text.contains('.') {
        let parts: Vec<&str> = text.split('.').collect();
        let bytes: Option<Vec<u8>> = parts.iter().map(|p| p.parse::<u8>().ok()).collect();
        return match bytes {
            Some(b) if b.len() == 4 => Ok(b),
            _ => Err(format!("Invalid IPv4 address '{text}'")),
        };
    }
    if bitwidth == 48 && text.contains(':') {
        let parts: Vec<&str> = text.split(':').collect();
        let bytes: Option<Vec<u8>> = parts
            .iter()
            .map(|p| {
                if p.is_empty() || p.len() > 2 {
                    None
                } else {
                    u8::from_str_radix(p, 16).ok()
                }
            })
            .collect();
        return match bytes {
            Some(b) if b.len() == 6 => Ok(b),
            _ => Err(format!("Invalid MAC address '{text}'")),
        };
    }
    if bitwidth == 128 && text.contains(':') {
        return text
            .parse::<std::net::Ipv6Addr>()
            .map(|a| a.octets().to_vec())
            .map_err(|_| format!("Invalid IPv6 address '{text}'"));
    }
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits): (Radix, String) = if let Some(d) = lower.strip_prefix("0x") {
        (Radix::Hex, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0b") {
        (Radix::Bin, d.to_string())
    } else if let Some(d) = lower.strip_prefix("0o") {
        // Octal: re-spelled as binary digits.
        let bin: Option<String> = d
            .chars()
            .filter(|&c| c != '_')
            .map(|c| c.to_digit(8).map(|v| format!("{v:03b}")))
            .collect();
        match bin {
            Some(b) if !b.is_empty() => (Radix::Bin, b),
            _ => return Err(cast_error(text)),
        }
    } else {
        (Radix::Dec, lower.clone())
    };
    let digits: String = digits.chars().filter(|&c| c != '_').collect();
    let valid = !digits.is_empty()
        && digits.chars().all(|c| match radix {
            Radix::Dec => c.is_ascii_digit(),
            Radix::Hex => c.is_ascii_hexdigit(),
            Radix::Bin => c == '0' || c == '1',
        })
        && (radix != Radix::Dec
            || !(digits.len() > 1 && digits.starts_with('0'))
            || digits.chars().all(|c| c == '0'));
    if !valid {
        return Err(cast_error(text));
    }
    if negative {
        return Ok(vec![0; nbytes]);
    }
    let n = StfNumber {
        radix,
        digits,
        pos: Default::default(),
    };
    number_bytes(&n, nbytes)
        .ok_or_else(|| format!("Parameter '{text}' is too large for {bitwidth} bits"))
}

fn cast_error(text: &str) -> String {
    format!("Invalid input '{text}', could not cast to integer, try in hex with 0x prefix")
}

/// Width in bits of a key (a `valid` key is one bit).
fn key_width(program: &Program, target: &KeyTarget) -> u32 {
    match target {
        KeyTarget::Field(f) => program.field_width(*f),
        KeyTarget::Valid(_) => 1,
    }
}

/// Encode one STF key value for a key of `kind` and width `bits` (§4.3).
fn encode_key(
    kind: MatchKind,
    bits: u32,
    v: &StfNumber,
    kname: &str,
) -> Result<MatchParam, String> {
    let nbytes = bits.div_ceil(8) as usize;
    let too_large = || {
        format!(
            "value '{}' is too large for key '{kname}' ({bits} bits)",
            v.text()
        )
    };
    match kind {
        MatchKind::Exact | MatchKind::Valid => {
            if v.has_wildcards() {
                return Err(format!(
                    "'*' digits are not allowed for {kind} key '{kname}' (value '{}')",
                    v.text()
                ));
            }
            let bytes = number_bytes(v, nbytes).ok_or_else(too_large)?;
            if kind == MatchKind::Valid {
                Ok(MatchParam::Valid(bytes.iter().any(|&b| b != 0)))
            } else {
                Ok(MatchParam::Exact(bytes))
            }
        }
        MatchKind::Ternary => {
            if v.radix == Radix::Dec {
                return Err(format!(
                    "ternary key '{kname}' needs a hex or binary value, got decimal '{}'",
                    v.text()
                ));
            }
            let bits_v = digit_bits(v);
            let value: Vec<bool> = bits_v.iter().map(|b| b.unwrap_or(false)).collect();
            let mask: Vec<bool> = bits_v.iter().map(|b| b.is_some()).collect();
            let key = pack_bits(&value, nbytes).ok_or_else(too_large)?;
            let mask = pack_bits(&mask, nbytes).ok_or_else(|| {
                format!(
                    "the mask of '{}' ({} digits) is too large for key '{kname}' ({bits} bits)",
                    v.text(),
                    v.digits.len()
                )
            })?;
            Ok(MatchParam::Ternary { key, mask })
        }
        MatchKind::Lpm => {
            let (hexish, per) = match v.radix {
                Radix::Dec => {
                    // p4c converts a decimal value to hex text first: the prefix length
                    // follows that text's digit count.
                    let bytes =
                        decimal_to_bytes(&v.digits, nbytes.max(1) + 64).ok_or_else(too_large)?;
                    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                    let hex = hex.trim_start_matches('0');
                    let hex = if hex.is_empty() { "0" } else { hex };
                    (
                        StfNumber {
                            radix: Radix::Hex,
                            digits: hex.to_string(),
                            pos: v.pos,
                        },
                        4,
                    )
                }
                Radix::Hex => (v.clone(), 4),
                Radix::Bin => (v.clone(), 1),
            };
            let trimmed = hexish.digits.trim_end_matches('*');
            if trimmed.contains('*') {
                return Err(format!(
                    "lpm key '{kname}': '*' digits must all be at the end (value '{}')",
                    v.text()
                ));
            }
            let prefix_len = u32::try_from(trimmed.len() * per).unwrap_or(u32::MAX);
            let value: Vec<bool> = digit_bits(&hexish)
                .iter()
                .map(|b| b.unwrap_or(false))
                .collect();
            let key = pack_bits(&value, nbytes).ok_or_else(too_large)?;
            Ok(MatchParam::Lpm { key, prefix_len })
        }
        MatchKind::Range => Err("Unexpected key type range".to_string()),
    }
}

/// The wildcard for a key not mentioned in the `add` line.
fn default_key(kind: MatchKind, bits: u32) -> MatchParam {
    let z = vec![0u8; bits.div_ceil(8) as usize];
    match kind {
        MatchKind::Ternary => MatchParam::Ternary {
            key: z.clone(),
            mask: z,
        },
        MatchKind::Lpm => MatchParam::Lpm {
            key: z,
            prefix_len: 0,
        },
        MatchKind::Valid => MatchParam::Valid(false),
        MatchKind::Exact | MatchKind::Range => MatchParam::Exact(z),
    }
}

/// Action data in `runtime_data` order; every parameter must be given exactly once.
pub fn action_data(
    program: &Program,
    action: usize,
    call: &ActionCall,
) -> Result<Vec<Vec<u8>>, String> {
    let act = &program.actions[action];
    let mut data: Vec<Option<Vec<u8>>> = vec![None; act.runtime_data.len()];
    for p in &call.params {
        let i = act
            .runtime_data
            .iter()
            .position(|(n, _)| *n == p.name)
            .ok_or_else(|| {
                format!(
                    "action '{}' has no parameter '{}' (parameters: {})",
                    act.name,
                    p.name,
                    if act.runtime_data.is_empty() {
                        "none".to_string()
                    } else {
                        act.runtime_data
                            .iter()
                            .map(|(n, _)| n.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                )
            })?;
        if data[i].is_some() {
            return Err(format!("parameter '{}' given twice", p.name));
        }
        let bw = act.runtime_data[i].1;
        data[i] = Some(
            parse_cli_value(&p.value, bw).map_err(|e| format!("parameter '{}': {e}", p.name))?,
        );
    }
    data.into_iter()
        .enumerate()
        .map(|(i, d)| {
            d.ok_or_else(|| {
                format!(
                    "action '{}' needs parameter '{}'",
                    act.name, act.runtime_data[i].0
                )
            })
        })
        .collect()
}

/// Translate an `add` line (§4).
pub fn translate_add(
    program: &Program,
    table: &str,
    priority: Option<u32>,
    keys: &[KeyValue],
    action: &ActionCall,
) -> Result<AddEntry, String> {
    let t = resolve_table(program, table)?;
    if t.key.iter().any(|k| k.match_kind == MatchKind::Range) {
        return Err(format!(
            "Unexpected key type: table '{}' has a range key and cannot be used with add",
            t.name
        ));
    }
    let a = resolve_action(program, t, &action.name)?;
    let data = action_data(program, a, action)?;
    let mut given: Vec<Option<&KeyValue>> = vec![None; t.key.len()];
    for kv in keys {
        let i = resolve_key(t, &kv.name)?;
        if given[i].is_some() {
            return Err(format!("key '{}' given twice", t.key[i].name));
        }
        given[i] = Some(kv);
    }
    let mut key = Vec::with_capacity(t.key.len());
    for (k, g) in t.key.iter().zip(&given) {
        let bits = key_width(program, &k.target);
        key.push(match g {
            Some(kv) => encode_key(k.match_kind, bits, &kv.value, &k.name)?,
            None => default_key(k.match_kind, bits),
        });
    }
    let priority = if t.match_type == MatchKind::Ternary {
        let p = priority.ok_or_else(|| {
            format!(
                "table '{}' is ternary: the add needs a priority (a decimal right after the table name)",
                t.name
            )
        })?;
        Some(10000 - i32::try_from(p).unwrap_or(i32::MAX))
    } else {
        None
    };
    Ok(AddEntry {
        table: t.name.clone(),
        action: program.actions[a].name.clone(),
        key,
        data,
        priority,
    })
}

/// The runtime CLI's name lookup: the unique object whose name equals `typed` or ends with
/// `.typed` (whole dot-separated components, `runtime-cli.md` §1.2).
pub fn cli_resolve<'a>(
    names: impl Iterator<Item = &'a str>,
    typed: &str,
    kind: &str,
) -> Result<&'a str, String> {
    let suffix = format!(".{typed}");
    let c: Vec<&str> = names
        .filter(|n| *n == typed || n.ends_with(&suffix))
        .collect();
    match c.as_slice() {
        [n] => Ok(n),
        [] => Err(format!("Invalid {kind} name ({typed})")),
        _ => Err(format!(
            "Invalid {kind} name ({typed}): ambiguous between {}",
            c.join(", ")
        )),
    }
}

/// `setdefault`: CLI name resolution of table and action, data in declaration order.
pub fn translate_setdefault(
    program: &Program,
    table: &str,
    action: &ActionCall,
) -> Result<(String, String, Vec<Vec<u8>>), String> {
    let tname = cli_resolve(tables(program).map(|t| t.name.as_str()), table, "table")?;
    let t = tables(program)
        .find(|t| t.name == tname)
        .ok_or_else(|| format!("Invalid table name ({table})"))?;
    let aname = cli_resolve(
        program.actions.iter().map(|a| a.name.as_str()),
        &action.name,
        "action",
    )
    .or_else(|_| {
        // Several actions can share a name (p4c copies): fall back to the table's own list.
        cli_resolve(
            t.actions
                .iter()
                .filter_map(|&a| program.actions.get(a as usize))
                .map(|a| a.name.as_str()),
            &action.name,
            "action",
        )
    })?;
    let a = t
        .actions
        .iter()
        .map(|&a| a as usize)
        .find(|&a| program.actions.get(a).is_some_and(|x| x.name == aname))
        .ok_or_else(|| format!("Table {} has no action {}", t.name, action.name))?;
    let data = action_data(program, a, action)?;
    Ok((t.name.clone(), aname.to_string(), data))
}
