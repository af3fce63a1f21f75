//! Translating STF names and values into runtime calls (`stf.md` §4): table/action/key name
//! resolution, key encodings per match kind, the priority convention, and the runtime CLI's
//! value syntax for action parameters and pass-through object names.

use crate::ast::{ActionCall, KeyValue, Pos, Radix, StfNumber};
use std::fmt;
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

/// Why an `add`/`setdefault` line cannot be translated, with the position of the part at
/// fault (a key, the action, a parameter) when there is one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TranslateError {
    pub pos: Option<Pos>,
    pub message: String,
    /// The error is one p4c's runner leaves to `simple_switch_CLI` (a value it cannot parse):
    /// the CLI prints it and the test goes on, so it is not a failure by itself.
    pub cli_side: bool,
}

impl From<String> for TranslateError {
    fn from(message: String) -> Self {
        TranslateError {
            pos: None,
            message,
            cli_side: false,
        }
    }
}

impl TranslateError {
    fn cli(self) -> TranslateError {
        TranslateError {
            cli_side: true,
            ..self
        }
    }
}

impl fmt::Display for TranslateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

fn at(pos: Pos) -> impl Fn(String) -> TranslateError {
    move |message| TranslateError {
        pos: Some(pos),
        message,
        cli_side: false,
    }
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
    if let Some(i) = names.iter().position(|n| {
        n.ends_with(&dotted)
            || n.ends_with(&dotted_dollar)
            || (name == "valid" && n.ends_with(".$valid$"))
    }) {
        return Ok(i);
    }
    if name == "valid" {
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
) -> Result<Vec<Vec<u8>>, TranslateError> {
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
            })
            .map_err(at(p.pos))?;
        if data[i].is_some() {
            return Err(at(p.pos)(format!("parameter '{}' given twice", p.name)));
        }
        let bw = act.runtime_data[i].1;
        data[i] = Some(
            parse_cli_value(&p.value, bw)
                .map_err(|e| at(p.pos)(format!("parameter '{}': {e}", p.name)).cli())?,
        );
    }
    data.into_iter()
        .enumerate()
        .map(|(i, d)| {
            d.ok_or_else(|| {
                at(call.pos)(format!(
                    "action '{}' needs parameter '{}'",
                    act.name, act.runtime_data[i].0
                ))
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
) -> Result<AddEntry, TranslateError> {
    let t = resolve_table(program, table)?;
    if t.key.iter().any(|k| k.match_kind == MatchKind::Range) {
        return Err(format!(
            "Unexpected key type: table '{}' has a range key and cannot be used with add",
            t.name
        )
        .into());
    }
    let a = resolve_action(program, t, &action.name).map_err(at(action.pos))?;
    let data = action_data(program, a, action)?;
    let mut given: Vec<Option<&KeyValue>> = vec![None; t.key.len()];
    for kv in keys {
        let i = resolve_key(t, &kv.name).map_err(at(kv.pos))?;
        if given[i].is_some() {
            return Err(at(kv.pos)(format!("key '{}' given twice", t.key[i].name)));
        }
        given[i] = Some(kv);
    }
    let mut key = Vec::with_capacity(t.key.len());
    for (k, g) in t.key.iter().zip(&given) {
        let bits = key_width(program, &k.target);
        key.push(match g {
            Some(kv) => {
                if k.match_kind == MatchKind::Ternary && kv.value.radix == Radix::Dec {
                    return Err(at(kv.value.pos)(format!(
                        "ternary key '{}' needs a hex or binary value, got decimal '{}'",
                        k.name,
                        kv.value.text()
                    )));
                }
                match (kv.prefix_len, k.match_kind) {
                    (None, _) => encode_key(k.match_kind, bits, &kv.value, &k.name)
                        .map_err(|e| at(kv.value.pos)(e).cli())?,
                    (Some(len), MatchKind::Lpm) => {
                        let mut v = kv.value.clone();
                        v.digits = v.digits.replace('*', "0");
                        let key = match encode_key(MatchKind::Lpm, bits, &v, &k.name)
                            .map_err(|e| at(kv.value.pos)(e).cli())?
                        {
                            MatchParam::Lpm { key, .. } => key,
                            _ => vec![0; bits.div_ceil(8) as usize],
                        };
                        MatchParam::Lpm {
                            key,
                            prefix_len: len,
                        }
                    }
                    (Some(_), kind) => {
                        return Err(at(kv.value.pos)(format!(
                            "'/<len>' is only meaningful for lpm keys; '{}' is {kind}",
                            k.name
                        ))
                        .cli())
                    }
                }
            }
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

/// `setdefault`: p4c's runner resolves the table and action with its own rules (an error
/// there fails the test) and checks the parameter names, then hands the names *as written* to
/// the CLI, which resolves them by dot-suffix (an error there is only printed: `cli_side`).
pub fn translate_setdefault(
    program: &Program,
    table: &str,
    action: &ActionCall,
) -> Result<(String, String, Vec<Vec<u8>>), TranslateError> {
    let runner_table = resolve_table(program, table)?;
    let runner_action =
        resolve_action(program, runner_table, &action.name).map_err(at(action.pos))?;
    let data = action_data(program, runner_action, action)?;
    let cli = |e: String| TranslateError::from(e).cli();
    let tname =
        cli_resolve(tables(program).map(|t| t.name.as_str()), table, "table").map_err(cli)?;
    let t = tables(program)
        .find(|t| t.name == tname)
        .ok_or_else(|| cli(format!("Invalid table name ({table})")))?;
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
    })
    .map_err(|e| at(action.pos)(e).cli())?;
    if !t.actions.iter().any(|&a| {
        program
            .actions
            .get(a as usize)
            .is_some_and(|x| x.name == aname)
    }) {
        return Err(
            at(action.pos)(format!("Table {} has no action {}", t.name, action.name)).cli(),
        );
    }
    Ok((t.name.clone(), aname.to_string(), data))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ast::{Command, StfScript};

    fn program() -> Program {
        tern_model::load(include_str!("../tests/data/toy.json")).expect("toy.json loads")
    }

    fn add_line(p: &Program, line: &str) -> Result<AddEntry, String> {
        let s: StfScript = crate::parse(line, "t.stf").unwrap_or_else(|e| panic!("{e}"));
        match &s.commands[0].command {
            Command::Add {
                table,
                priority,
                keys,
                action,
                ..
            } => translate_add(p, table, *priority, keys, action).map_err(|e| e.message),
            c => panic!("{c:?}"),
        }
    }

    fn tern(key: &[u8], mask: &[u8]) -> MatchParam {
        MatchParam::Ternary {
            key: key.to_vec(),
            mask: mask.to_vec(),
        }
    }

    #[test]
    fn ternary_add_matches_the_reference_example() {
        let p = program();
        let e = add_line(&p, "add acl 20 type:0x0800 src:0x0a0000** permit(port:2)").unwrap();
        assert_eq!(e.table, "ingress.acl");
        assert_eq!(e.action, "ingress.permit");
        assert_eq!(
            e.key,
            vec![
                MatchParam::Exact(vec![0x08, 0x00]),
                tern(&[0x0a, 0, 0, 0], &[0xff, 0xff, 0xff, 0x00]),
                MatchParam::Valid(false),
            ]
        );
        assert_eq!(e.data, vec![vec![0x00, 0x02]]);
        assert_eq!(e.priority, Some(9980));
    }

    #[test]
    fn ternary_masks_follow_written_digits() {
        let p = program();
        let e = add_line(&p, "add acl 1 src:0x1 drop_it()").unwrap();
        assert_eq!(e.key[1], tern(&[0, 0, 0, 1], &[0, 0, 0, 0x0f]));
        let e = add_line(&p, "add acl 1 src:0b1**0 drop_it()").unwrap();
        assert_eq!(e.key[1], tern(&[0, 0, 0, 0b1000], &[0, 0, 0, 0b1001]));
        // Not mentioned: exact 0, ternary 0&&&0, valid false.
        assert_eq!(e.key[0], MatchParam::Exact(vec![0, 0]));
        let e = add_line(&p, "add acl 1 type:1 drop_it()").unwrap();
        assert_eq!(e.key[1], tern(&[0; 4], &[0; 4]));
        let err = add_line(&p, "add acl 1 src:10 drop_it()").unwrap_err();
        assert!(err.contains("needs a hex or binary value"), "{err}");
        let err = add_line(&p, "add acl 1 src:0x123456789 drop_it()").unwrap_err();
        assert!(err.contains("too large"), "{err}");
        let err = add_line(&p, "add acl 1 src:0x000000000 drop_it()").unwrap_err();
        assert!(err.contains("mask"), "{err}");
    }

    #[test]
    fn priority_convention() {
        let p = program();
        assert_eq!(
            add_line(&p, "add acl 1 drop_it()").unwrap().priority,
            Some(9999)
        );
        assert_eq!(
            add_line(&p, "add acl 300 drop_it()").unwrap().priority,
            Some(9700)
        );
        let err = add_line(&p, "add acl type:1 drop_it()").unwrap_err();
        assert!(err.contains("needs a priority"), "{err}");
        // Dropped for non-ternary tables.
        let e = add_line(&p, "add ipv4_route 7 dst:0x0a01**** drop_it()").unwrap();
        assert_eq!(e.priority, None);
    }

    #[test]
    fn lpm_lengths_and_params() {
        let p = program();
        let e = add_line(
            &p,
            "add ipv4_route dst:0x0a01**** tags$1.tci:5 set_nexthop(mac:00:00:00:00:00:03, ip:10.1.0.1, port:0x1ff)",
        )
        .unwrap();
        assert_eq!(e.table, "ingress.ipv4_route");
        assert_eq!(
            e.key,
            vec![
                MatchParam::Lpm {
                    key: vec![0x0a, 0x01, 0, 0],
                    prefix_len: 16
                },
                MatchParam::Exact(vec![0, 5]),
            ]
        );
        // runtime_data order, whatever the written order.
        assert_eq!(
            e.data,
            vec![vec![0x01, 0xff], vec![0, 0, 0, 0, 0, 3], vec![10, 1, 0, 1]]
        );
        let e = add_line(&p, "add route dst:0xc0a80101 drop_it()").unwrap();
        assert_eq!(
            e.key[0],
            MatchParam::Lpm {
                key: vec![0xc0, 0xa8, 1, 1],
                prefix_len: 32
            }
        );
        let e = add_line(&p, "add route dst:0b101* drop_it()").unwrap();
        assert_eq!(
            e.key[0],
            MatchParam::Lpm {
                key: vec![0, 0, 0, 0b1010],
                prefix_len: 3
            }
        );
        // A decimal value is re-spelled as hex first: 10 -> 0xa -> /4.
        let e = add_line(&p, "add route dst:10 drop_it()").unwrap();
        assert_eq!(
            e.key[0],
            MatchParam::Lpm {
                key: vec![0, 0, 0, 10],
                prefix_len: 4
            }
        );
        let e = add_line(&p, "add route dst:0x0a000000/8 drop_it()").unwrap();
        assert_eq!(
            e.key[0],
            MatchParam::Lpm {
                key: vec![0x0a, 0, 0, 0],
                prefix_len: 8
            }
        );
        let err = add_line(&p, "add route tci:1/8 drop_it()").unwrap_err();
        assert!(err.contains("only meaningful for lpm"), "{err}");
        let err = add_line(&p, "add route dst:0x0a*1 drop_it()").unwrap_err();
        assert!(err.contains("at the end"), "{err}");
    }

    #[test]
    fn key_name_rules() {
        let p = program();
        let t = resolve_table(&p, "acl").unwrap();
        assert_eq!(resolve_key(t, "eth.type"), Ok(0));
        assert_eq!(resolve_key(t, "type"), Ok(0));
        assert_eq!(resolve_key(t, "hdr.ipv4.src"), Ok(1));
        assert_eq!(resolve_key(t, "ipv4.src"), Ok(1));
        assert_eq!(resolve_key(t, "ipv4"), Ok(2));
        assert_eq!(resolve_key(t, "ipv4.valid"), Ok(2));
        assert_eq!(resolve_key(t, "valid"), Ok(2));
        assert!(
            resolve_key(t, "pv4.src").is_err(),
            "suffixes are dot-aligned"
        );
        let err = resolve_key(t, "nope").unwrap_err();
        assert!(
            err.contains("has no key 'nope'") && err.contains("eth.type"),
            "{err}"
        );
        let r = resolve_table(&p, "ipv4_route").unwrap();
        assert_eq!(resolve_key(r, "tags$1.tci"), Ok(1));
        assert_eq!(resolve_key(r, "tags[1].tci"), Ok(1));
        assert!(resolve_key(r, "tags$0.tci").is_err());
        let e = add_line(&p, "add acl 1 ipv4.valid:1 drop_it()").unwrap();
        assert_eq!(e.key[2], MatchParam::Valid(true));
        let err = add_line(&p, "add acl 1 type:1 eth.type:2 drop_it()").unwrap_err();
        assert!(err.contains("given twice"), "{err}");
        let err = add_line(&p, "add acl 1 type:0x0** drop_it()").unwrap_err();
        assert!(err.contains("'*' digits are not allowed"), "{err}");
    }

    #[test]
    fn table_and_action_resolution() {
        let p = program();
        assert_eq!(
            resolve_table(&p, "ingress.acl").unwrap().name,
            "ingress.acl"
        );
        // Plain string suffix, not dot-aligned.
        assert_eq!(resolve_table(&p, "cl").unwrap().name, "ingress.acl");
        assert!(resolve_table(&p, "nope").unwrap_err().contains("no table"));
        let err = add_line(&p, "add ranged type:1 drop_it()").unwrap_err();
        assert!(err.contains("Unexpected key type"), "{err}");
        let t = resolve_table(&p, "acl").unwrap();
        assert_eq!(resolve_action(&p, t, "ingress.drop_it"), Ok(2));
        assert_eq!(resolve_action(&p, t, "all"), Ok(3));
        let err = resolve_action(&p, t, "t").unwrap_err();
        assert!(err.contains("ambiguous"), "{err}");
        let err = resolve_action(&p, t, "set_nexthop").unwrap_err();
        assert!(err.contains("has no action"), "{err}");
    }

    #[test]
    fn action_parameter_errors() {
        let p = program();
        let err = add_line(&p, "add route dst:0x0a set_nexthop(port:1, mac:0)").unwrap_err();
        assert!(err.contains("needs parameter 'ip'"), "{err}");
        let err = add_line(&p, "add acl 1 permit(port:1, prt:2)").unwrap_err();
        assert!(err.contains("no parameter 'prt'"), "{err}");
        let err = add_line(&p, "add acl 1 permit(port:1, port:2)").unwrap_err();
        assert!(err.contains("given twice"), "{err}");
        let err = add_line(&p, "add acl 1 permit(port:70000)").unwrap_err();
        assert!(err.contains("too large"), "{err}");
    }

    #[test]
    fn cli_value_syntax() {
        assert_eq!(parse_cli_value("10.1.0.1", 32), Ok(vec![10, 1, 0, 1]));
        assert!(parse_cli_value("10.1.0", 32).unwrap_err().contains("IPv4"));
        assert_eq!(
            parse_cli_value("00:AA:bb:0:00:01", 48),
            Ok(vec![0, 0xaa, 0xbb, 0, 0, 1])
        );
        assert!(parse_cli_value("00:aa", 48).unwrap_err().contains("MAC"));
        assert_eq!(
            parse_cli_value("::1", 128).map(|v| v[15]),
            Ok(1),
            "IPv6 text"
        );
        assert_eq!(parse_cli_value("0x1ff", 9), Ok(vec![1, 0xff]));
        assert_eq!(
            parse_cli_value("512", 9),
            Ok(vec![2, 0]),
            "byte width, not bit width"
        );
        assert!(parse_cli_value("65536", 9)
            .unwrap_err()
            .contains("too large"));
        assert_eq!(parse_cli_value("-1", 16), Ok(vec![0, 0]));
        assert_eq!(parse_cli_value("0o17", 8), Ok(vec![15]));
        assert_eq!(parse_cli_value("0b101", 8), Ok(vec![5]));
        assert_eq!(parse_cli_value("1_000", 16), Ok(vec![0x03, 0xe8]));
        assert_eq!(parse_cli_value("0", 8), Ok(vec![0]));
        assert!(parse_cli_value("010", 8).is_err());
        assert!(parse_cli_value("abc", 8)
            .unwrap_err()
            .contains("could not cast"));
        assert!(parse_cli_value("", 8).is_err());
        assert_eq!(
            parse_cli_value("340282366920938463463374607431768211455", 128),
            Ok(vec![0xff; 16])
        );
    }

    #[test]
    fn setdefault_uses_cli_component_suffixes() {
        let p = program();
        let call = |name: &str| ActionCall {
            name: name.into(),
            params: vec![],
            pos: Default::default(),
        };
        let (t, a, d) = translate_setdefault(&p, "ipv4_route", &call("drop_it")).unwrap();
        let msg = |r: Result<_, TranslateError>| {
            let e = r.unwrap_err();
            (e.cli_side, e.message)
        };
        assert_eq!(
            (t.as_str(), a.as_str(), d.len()),
            ("ingress.ipv4_route", "ingress.drop_it", 0)
        );
        // The runner finds "route" (string suffix), the CLI does not (component suffix).
        let (cli_side, m) = msg(translate_setdefault(&p, "route", &call("drop_it")));
        assert!(cli_side && m.contains("Invalid table name (route)"), "{m}");
        // Unknown to the runner: a failure, not a CLI rejection.
        let (cli_side, m) = msg(translate_setdefault(&p, "nope", &call("drop_it")));
        assert!(!cli_side && m.contains("no table"), "{m}");
        let (cli_side, m) = msg(translate_setdefault(&p, "acl", &call("set_nexthop")));
        assert!(!cli_side && m.contains("has no action"), "{m}");
        let mut c = call("permit");
        c.params.push(crate::ast::ParamValue {
            name: "prt".into(),
            value: "1".into(),
            pos: Default::default(),
        });
        let (cli_side, m) = msg(translate_setdefault(&p, "acl", &c));
        assert!(!cli_side && m.contains("no parameter 'prt'"), "{m}");
    }

    #[test]
    fn stack_dollar_rewrite() {
        assert_eq!(rewrite_stack_dollar("tags$1.tci"), "tags[1].tci");
        assert_eq!(rewrite_stack_dollar("a.b$12"), "a.b[12]");
        assert_eq!(rewrite_stack_dollar("ipv4.$valid$"), "ipv4.$valid$");
        assert_eq!(rewrite_stack_dollar("x$1y"), "x$1y");
    }
}
