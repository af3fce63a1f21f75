//! The JSON loader: `serde_json::Value` → [`Program`], in BMv2's load order
//! (`bmv2-json.md` §1.3), with BMv2's checks and messages plus the JSON pointer of the culprit.

use crate::hex::{parse_byte_string, parse_value, Int};
use crate::jsoncpp;
use crate::*;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

type R<T> = Result<T, LoadError>;
type NodeResolver<'a> = dyn Fn(Option<&Value>, &str) -> R<Option<Node>> + 'a;

fn err<T>(path: &str, msg: impl Into<String>) -> R<T> {
    Err(LoadError {
        path: path.to_string(),
        message: msg.into(),
    })
}

fn at(path: &str, key: impl std::fmt::Display) -> String {
    format!("{path}/{key}")
}

/// `o[k]`, treating JSON null as absent.
fn get<'v>(o: &'v Value, k: &str) -> Option<&'v Value> {
    match o.get(k) {
        Some(Value::Null) | None => None,
        Some(v) => Some(v),
    }
}

/// An array member; absent or null = empty.
fn arr<'v>(o: &'v Value, k: &str, path: &str) -> R<&'v [Value]> {
    match get(o, k) {
        None => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => err(&at(path, k), format!("'{k}' must be a JSON array")),
    }
}

fn as_arr<'v>(v: &'v Value, path: &str) -> R<&'v [Value]> {
    match v {
        Value::Array(a) => Ok(a),
        _ => err(path, "expected a JSON array"),
    }
}

/// A member read with jsoncpp's `asString` (missing or null is `""`, numbers and booleans
/// are spelled out, arrays and objects are an error).
fn req_str<'v>(o: &'v Value, k: &str, path: &str) -> R<Cow<'v, str>> {
    match o.get(k) {
        None => Ok(Cow::Borrowed("")),
        Some(v) => as_str(v, &at(path, k)),
    }
}

/// A value read with jsoncpp's `asString`.
fn as_str<'v>(v: &'v Value, path: &str) -> R<Cow<'v, str>> {
    jsoncpp::as_string(v).or_else(|m| err(path, m))
}

/// A value read with jsoncpp's `asInt` (32-bit, reals truncated, null 0, booleans 0/1).
fn as_int(v: &Value, path: &str) -> R<i64> {
    jsoncpp::as_int(v).map(i64::from).or_else(|m| err(path, m))
}

/// A value read with jsoncpp's `asUInt`.
fn as_u32(v: &Value, path: &str) -> R<u32> {
    jsoncpp::as_uint(v).or_else(|m| err(path, m))
}

/// A bit width BMv2 reads with `asInt`: negative widths, which BMv2 turns into nonsense
/// objects, are refused.
fn as_int_width(v: &Value, path: &str) -> R<u32> {
    let w = as_int(v, path)?;
    if w < 0 {
        return err(path, format!("bit width {w} is negative"));
    }
    check_width(w as u32, path)
}

/// Largest bit width tern accepts for a field, register, parameter, constant or lookahead
/// (a resource bound; BMv2 has none but no real program comes near it).
pub const MAX_WIDTH: u32 = 1 << 16;

fn check_width(w: u32, path: &str) -> R<u32> {
    if w > MAX_WIDTH {
        return err(
            path,
            format!("bit width {w} exceeds tern's limit of {MAX_WIDTH}"),
        );
    }
    Ok(w)
}

/// A bit width BMv2 reads with `asUInt`.
fn as_width(v: &Value, path: &str) -> R<u32> {
    check_width(as_u32(v, path)?, path)
}

/// A member that must be present (tern needs it to build anything; BMv2 would read null).
fn req<'v>(o: &'v Value, k: &str, path: &str) -> R<&'v Value> {
    match get(o, k) {
        Some(v) => Ok(v),
        None => err(path, format!("missing required key '{k}'")),
    }
}

fn req_width(o: &Value, k: &str, path: &str) -> R<u32> {
    as_width(o.get(k).unwrap_or(&Value::Null), &at(path, k))
}

/// A member read with `asInt`; missing or null is 0.
fn req_int(o: &Value, k: &str, path: &str) -> R<i64> {
    as_int(o.get(k).unwrap_or(&Value::Null), &at(path, k))
}

/// A member read with `asUInt`; missing or null is 0.
fn req_u32(o: &Value, k: &str, path: &str) -> R<u32> {
    as_u32(o.get(k).unwrap_or(&Value::Null), &at(path, k))
}

/// A member read with jsoncpp's `asBool`; missing or null is `default` (BMv2 passes `false`
/// to `Value::get` for the optional flags).
fn opt_bool(o: &Value, k: &str, default: bool, path: &str) -> R<bool> {
    match get(o, k) {
        None => Ok(default),
        Some(v) => as_bool(v, &at(path, k)),
    }
}

fn as_bool(v: &Value, path: &str) -> R<bool> {
    jsoncpp::as_bool(v).or_else(|m| err(path, m))
}

/// A value hex string as BMv2 reads it: `Data(v.asString())`, so a JSON number is read as
/// the hex digits of its decimal spelling (`10` is 0x10), as simple_switch does.
fn value_int(v: &Value, path: &str) -> R<Int> {
    match v {
        Value::Array(_) | Value::Object(_) => err(path, "expected a hex string"),
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            err(path, format!("invalid hex string '{n}'"))
        }
        _ => {
            let s = as_str(v, path)?;
            parse_value(&s).map_or_else(|| err(path, format!("invalid hex string '{s}'")), Ok)
        }
    }
}

fn byte_string(v: &Value, path: &str) -> R<Vec<u8>> {
    match v {
        Value::Array(_) | Value::Object(_) => err(path, "expected a hex byte string"),
        Value::Number(n) if !(n.is_i64() || n.is_u64()) => {
            err(path, format!("invalid byte string '{n}'"))
        }
        // BMv2: `ByteContainer(v.asString())`.
        _ => {
            let s = as_str(v, path)?;
            parse_byte_string(&s)
                .map_or_else(|| err(path, format!("invalid byte string '{s}'")), Ok)
        }
    }
}

/// Per-kind duplicate id / name checker.
struct Uniq {
    kind: &'static str,
    ids: HashSet<i64>,
    names: HashSet<String>,
    check_names: bool,
}

impl Uniq {
    fn new(kind: &'static str) -> Uniq {
        Uniq {
            kind,
            ids: HashSet::new(),
            names: HashSet::new(),
            check_names: true,
        }
    }
    fn ids_only(kind: &'static str) -> Uniq {
        Uniq {
            check_names: false,
            ..Uniq::new(kind)
        }
    }
    fn check(&mut self, name: &str, id: i64, path: &str) -> R<()> {
        if !self.ids.insert(id) {
            return err(
                path,
                format!(
                    "Several objects of type '{}' have the same id {id}",
                    self.kind
                ),
            );
        }
        if self.check_names && !self.names.insert(name.to_string()) {
            return err(
                path,
                format!(
                    "Duplicate objects of type '{}' with name '{name}'",
                    self.kind
                ),
            );
        }
        Ok(())
    }
}

/// `name` (`asString`) and `id` (`asInt`) of an object; BMv2 reads a missing one as `""` / 0.
fn name_id(o: &Value, path: &str) -> R<(String, i64)> {
    if !o.is_object() {
        return err(path, "expected a JSON object");
    }
    let name = req_str(o, "name", path)?.into_owned();
    let id = req_int(o, "id", path)?;
    Ok((name, id))
}

/// Primitives simple_switch knows, with their argument counts (`bmv2-json.md` §6).
fn primitive_arity(op: &str) -> Option<usize> {
    Some(match op {
        "exit" | "drop" | "no_op" => 0,
        "_jump" | "assert" | "assume" | "mark_to_drop" | "add_header" | "add_header_fast"
        | "remove_header" | "resubmit" | "recirculate" | "truncate" => 1,
        "assign"
        | "assign_VL"
        | "assign_header"
        | "assign_union"
        | "assign_header_stack"
        | "assign_union_stack"
        | "push"
        | "pop"
        | "_jump_if_zero"
        | "log_msg"
        | "modify_field"
        | "add_to_field"
        | "subtract_from_field"
        | "generate_digest"
        | "copy_header"
        | "clone_ingress_pkt_to_egress"
        | "clone_egress_pkt_to_egress"
        | "count" => 2,
        "modify_field_rng_uniform"
        | "add"
        | "subtract"
        | "bit_xor"
        | "bit_or"
        | "bit_and"
        | "shift_left"
        | "shift_right"
        | "execute_meter"
        | "register_read"
        | "register_write" => 3,
        "modify_field_with_hash_based_offset" => 4,
        _ => return None,
    })
}

/// Is `name` a hash algorithm simple_switch knows (`bmv2-json.md` §8.2)? `tern-hash` owns the
/// list, so what loads is exactly what the engine can compute.
pub fn known_hash_algorithm(name: &str) -> bool {
    tern_hash::is_known(name)
}

#[derive(Default)]
struct Names {
    header_types: HashMap<String, u32>,
    headers: HashMap<String, u32>,
    stacks: HashMap<String, u32>,
    union_types: HashMap<String, u32>,
    unions: HashMap<String, u32>,
    union_stacks: HashMap<String, u32>,
    aliases: HashMap<String, FieldRef>,
    externs: HashMap<String, u32>,
    vsets: HashMap<String, u32>,
    calcs: HashMap<String, u32>,
    counters: HashMap<String, u32>,
    meters: HashMap<String, u32>,
    registers: HashMap<String, u32>,
    actions_by_id: HashMap<i64, u32>,
    actions_by_name: HashMap<String, u32>,
}

struct Loader {
    p: Program,
    n: Names,
}

fn lookup(map: &HashMap<String, u32>, kind: &str, name: &str, path: &str) -> R<u32> {
    map.get(name).copied().map_or_else(
        || {
            err(
                path,
                format!("Invalid reference to object of type '{kind}' with name '{name}'"),
            )
        },
        Ok,
    )
}

/// Load a BMv2 JSON program. Never panics; the error names the JSON path and the problem.
pub fn load(json_text: &str) -> Result<Program, LoadError> {
    // jsoncpp's reader, as simple_switch's `is >> root`: comments and trailing text allowed.
    let root: Value = jsoncpp::parse(json_text).map_err(|e| LoadError {
        path: String::new(),
        message: format!("invalid JSON: {e}"),
    })?;
    if !root.is_object() {
        return err("", "the root of a BMv2 JSON must be an object");
    }
    let mut l = Loader {
        p: Program::default(),
        n: Names::default(),
    };
    l.meta(&root)?;
    l.enums(&root)?;
    l.header_types(&root)?;
    l.headers(&root)?;
    l.header_stacks(&root)?;
    l.unions(&root)?;
    l.field_aliases(&root)?;
    l.extern_instances(&root)?;
    l.parse_vsets(&root)?;
    l.errors(&root)?;
    l.parsers(&root)?;
    l.deparsers(&root)?;
    l.calculations(&root)?;
    l.counters(&root)?;
    l.meters(&root)?;
    l.registers(&root)?;
    l.actions(&root)?;
    l.pipelines(&root)?;
    l.checksums(&root)?;
    l.learn_lists(&root)?;
    l.field_lists(&root)?;
    l.force_arith(&root)?;
    l.config_options(&root)?;
    Ok(l.p)
}

impl Loader {
    fn meta(&mut self, root: &Value) -> R<()> {
        let Some(meta) = get(root, "__meta__") else {
            return Ok(());
        };
        let Some(v) = get(meta, "version") else {
            return Ok(());
        };
        let path = "/__meta__/version";
        let a = match v {
            Value::Array(a) if a.len() == 2 => a,
            _ => return err(path, "Expected 'version' to be a JSON array of size 2"),
        };
        let major = as_int(&a[0], &at(path, 0))?;
        let minor = as_int(&a[1], &at(path, 1))?;
        if major != 2 {
            return err(path, format!("We require a bmv2 JSON major version number of 2 but this JSON input is tagged with a major version number of {major}"));
        }
        if minor > 24 {
            return err(path, format!("The most recent bmv2 JSON version number supported is 2.24 but this JSON input is tagged with version number 2.{minor}"));
        }
        // BMv2 has no lower bound: a negative minor version loads (recorded as 0).
        self.p.version = Some((2, minor.max(0) as u32));
        Ok(())
    }

    fn enums(&mut self, root: &Value) -> R<()> {
        let mut seen = HashSet::new();
        for (i, e) in arr(root, "enums", "")?.iter().enumerate() {
            let path = at("/enums", i);
            let name = req_str(e, "name", &path)?.to_string();
            if !seen.insert(name.clone()) {
                return err(&path, "Invalid enums specification in json");
            }
            let mut entries = Vec::new();
            let mut names = HashSet::new();
            for (j, ent) in arr(e, "entries", &path)?.iter().enumerate() {
                let p = at(&at(&path, "entries"), j);
                let pair = as_arr(ent, &p)?;
                if pair.len() != 2 {
                    return err(&p, "Invalid enums specification in json");
                }
                let n = as_str(&pair[0], &p)?.to_string();
                let v = as_int(&pair[1], &p)?;
                if !names.insert(n.clone()) || entries.iter().any(|(_, x)| *x == v) {
                    return err(&p, "Invalid enums specification in json");
                }
                entries.push((n, v));
            }
            self.p.enums.push(EnumDef { name, entries });
        }
        Ok(())
    }

    fn header_types(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("header type");
        for (i, ht) in arr(root, "header_types", "")?.iter().enumerate() {
            let path = at("/header_types", i);
            let (name, id) = name_id(ht, &path)?;
            u.check(&name, id, &path)?;
            let mut fields = Vec::new();
            for (j, f) in arr(ht, "fields", &path)?.iter().enumerate() {
                let p = at(&at(&path, "fields"), j);
                let a = as_arr(f, &p)?;
                if a.len() < 2 || a.len() > 4 {
                    return err(&p, "a field must be [name, width, (signed), (saturating)]");
                }
                let fname = as_str(&a[0], &at(&p, 0))?.into_owned();
                // BMv2: `f[1].asString() == "*"` marks the VL field, else `f[1].asInt()`.
                let width = if as_str(&a[1], &at(&p, 1))? == "*" {
                    FieldWidth::Variable
                } else {
                    FieldWidth::Fixed(as_int_width(&a[1], &at(&p, 1))?)
                };
                // `signed` and `saturating` are read with `asBool` (p4c writes `0`/`1` for
                // the fields of `bool` type, `true`/`false` elsewhere).
                let signed = match a.get(2) {
                    Some(v) => as_bool(v, &at(&p, 2))?,
                    None => false,
                };
                let saturating = match a.get(3) {
                    Some(v) => as_bool(v, &at(&p, 3))?,
                    None => false,
                };
                if signed && width == FieldWidth::Fixed(1) {
                    return err(&p, "a signed field needs a width of at least 2");
                }
                if fields.iter().any(|x: &FieldDef| x.name == fname) {
                    return err(
                        &p,
                        format!("duplicate field '{fname}' in header type '{name}'"),
                    );
                }
                fields.push(FieldDef {
                    name: fname,
                    width,
                    signed,
                    saturating,
                });
            }
            if fields
                .iter()
                .filter(|f| f.width == FieldWidth::Variable)
                .count()
                > 1
            {
                return err(
                    &path,
                    "a header type can have at most one variable-length field",
                );
            }
            // BMv2 reads `max_length` (`asInt`) only for a header type with a VL field.
            let has_vl = fields.iter().any(|f| f.width == FieldWidth::Variable);
            let max_length = match ht.get("max_length") {
                Some(v) if has_vl => match as_int(v, &at(&path, "max_length"))? {
                    n if n < 0 => return err(&at(&path, "max_length"), "'max_length' is negative"),
                    n => n as u32,
                },
                Some(v) => jsoncpp::as_uint(v).unwrap_or(0),
                None => 0,
            };
            self.n.header_types.insert(name.clone(), i as u32);
            // length_exp needs field names of this very type: parsed after push.
            self.p.header_types.push(HeaderType {
                name,
                id,
                fields,
                length_exp: None,
                max_length,
            });
            if let Some(le) = get(ht, "length_exp") {
                let e = self.expr_body_or_tv(le, &at(&path, "length_exp"), Some(i as u32))?;
                self.p.header_types[i].length_exp = Some(e);
            }
        }
        Ok(())
    }

    fn headers(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("header");
        for (i, h) in arr(root, "headers", "")?.iter().enumerate() {
            let path = at("/headers", i);
            let (name, id) = name_id(h, &path)?;
            u.check(&name, id, &path)?;
            let ht = lookup(
                &self.n.header_types,
                "header type",
                &req_str(h, "header_type", &path)?,
                &path,
            )?;
            let metadata = opt_bool(h, "metadata", false, &path)?;
            self.n.headers.insert(name.clone(), i as u32);
            self.p.headers.push(Header {
                name,
                id,
                header_type: ht,
                metadata,
            });
        }
        Ok(())
    }

    fn header_by_id(&self, v: &Value, path: &str) -> R<u32> {
        let id = as_int(v, path)?;
        self.p.headers.iter().position(|h| h.id == id).map_or_else(
            || {
                err(
                    path,
                    format!("Invalid reference to object of type 'header' with id {id}"),
                )
            },
            |x| Ok(x as u32),
        )
    }

    fn header_stacks(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("header stack");
        for (i, s) in arr(root, "header_stacks", "")?.iter().enumerate() {
            let path = at("/header_stacks", i);
            let (name, id) = name_id(s, &path)?;
            u.check(&name, id, &path)?;
            let ht = lookup(
                &self.n.header_types,
                "header type",
                &req_str(s, "header_type", &path)?,
                &path,
            )?;
            let mut headers = Vec::new();
            for (j, hid) in arr(s, "header_ids", &path)?.iter().enumerate() {
                let p = at(&at(&path, "header_ids"), j);
                let h = self.header_by_id(hid, &p)?;
                if self.p.headers[h as usize].header_type != ht {
                    return err(
                        &p,
                        format!("header stack '{name}': element has the wrong header type"),
                    );
                }
                headers.push(h);
            }
            self.n.stacks.insert(name.clone(), i as u32);
            self.p.header_stacks.push(HeaderStack {
                name,
                id,
                header_type: ht,
                headers,
            });
        }
        Ok(())
    }

    fn unions(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("header union type");
        for (i, t) in arr(root, "header_union_types", "")?.iter().enumerate() {
            let path = at("/header_union_types", i);
            let (name, id) = name_id(t, &path)?;
            u.check(&name, id, &path)?;
            let mut members = Vec::new();
            for (j, m) in arr(t, "headers", &path)?.iter().enumerate() {
                let p = at(&at(&path, "headers"), j);
                let a = as_arr(m, &p)?;
                if a.len() != 2 {
                    return err(&p, "a union member must be [name, header_type]");
                }
                let mn = as_str(&a[0], &p)?.to_string();
                let ht = lookup(&self.n.header_types, "header type", &as_str(&a[1], &p)?, &p)?;
                members.push((mn, ht));
            }
            self.n.union_types.insert(name.clone(), i as u32);
            self.p
                .header_union_types
                .push(UnionType { name, id, members });
        }
        let mut u = Uniq::new("header union");
        for (i, un) in arr(root, "header_unions", "")?.iter().enumerate() {
            let path = at("/header_unions", i);
            let (name, id) = name_id(un, &path)?;
            u.check(&name, id, &path)?;
            let ut = lookup(
                &self.n.union_types,
                "header union type",
                &req_str(un, "union_type", &path)?,
                &path,
            )?;
            let mut headers = Vec::new();
            for (j, hid) in arr(un, "header_ids", &path)?.iter().enumerate() {
                headers.push(self.header_by_id(hid, &at(&at(&path, "header_ids"), j))?);
            }
            if headers.len() != self.p.header_union_types[ut as usize].members.len() {
                return err(
                    &path,
                    format!("header union '{name}' does not have one header per member"),
                );
            }
            self.n.unions.insert(name.clone(), i as u32);
            self.p.header_unions.push(HeaderUnion {
                name,
                id,
                union_type: ut,
                headers,
            });
        }
        let mut u = Uniq::new("header union stack");
        for (i, s) in arr(root, "header_union_stacks", "")?.iter().enumerate() {
            let path = at("/header_union_stacks", i);
            let (name, id) = name_id(s, &path)?;
            u.check(&name, id, &path)?;
            let ut = lookup(
                &self.n.union_types,
                "header union type",
                &req_str(s, "union_type", &path)?,
                &path,
            )?;
            let mut unions = Vec::new();
            for (j, uid) in arr(s, "header_union_ids", &path)?.iter().enumerate() {
                let p = at(&at(&path, "header_union_ids"), j);
                let id = as_int(uid, &p)?;
                let x = self.p.header_unions.iter().position(|h| h.id == id);
                match x {
                    Some(x) => unions.push(x as u32),
                    None => {
                        return err(
                            &p,
                            format!(
                                "Invalid reference to object of type 'header union' with id {id}"
                            ),
                        )
                    }
                }
            }
            self.n.union_stacks.insert(name.clone(), i as u32);
            self.p.header_union_stacks.push(UnionStack {
                name,
                id,
                union_type: ut,
                unions,
            });
        }
        Ok(())
    }

    /// Resolve `[header, field]` (honouring aliases `header.field`).
    fn field_ref(&self, v: &Value, path: &str) -> R<FieldRef> {
        let a = as_arr(v, path)?;
        if a.len() != 2 {
            return err(path, "a field reference must be [header, field]");
        }
        let h = as_str(&a[0], path)?;
        let f = as_str(&a[1], path)?;
        self.field_by_names(&h, &f, path)
    }

    fn field_by_names(&self, h: &str, f: &str, path: &str) -> R<FieldRef> {
        if let Some(r) = self.n.aliases.get(&format!("{h}.{f}")) {
            return Ok(*r);
        }
        let hi = lookup(&self.n.headers, "header", h, path)?;
        self.field_in_header(hi, f, path)
    }

    fn field_in_header(&self, hi: u32, f: &str, path: &str) -> R<FieldRef> {
        if f == "$valid$" {
            return Ok(FieldRef {
                header: hi,
                field: VALID_FIELD,
            });
        }
        let ht = &self.p.header_types[self.p.headers[hi as usize].header_type as usize];
        match ht.fields.iter().position(|x| x.name == f) {
            Some(fi) => Ok(FieldRef {
                header: hi,
                field: fi as u32,
            }),
            None => err(
                path,
                format!("No field '{f}' can be found in header type '{}'", ht.name),
            ),
        }
    }

    fn field_in_type(&self, ht: u32, f: &str, path: &str) -> R<u32> {
        if f == "$valid$" {
            return Ok(VALID_FIELD);
        }
        let t = &self.p.header_types[ht as usize];
        match t.fields.iter().position(|x| x.name == f) {
            Some(fi) => Ok(fi as u32),
            None => err(
                path,
                format!("No field '{f}' can be found in header type '{}'", t.name),
            ),
        }
    }

    fn field_aliases(&mut self, root: &Value) -> R<()> {
        for (i, a) in arr(root, "field_aliases", "")?.iter().enumerate() {
            let path = at("/field_aliases", i);
            let pair = as_arr(a, &path)?;
            if pair.len() != 2 {
                return err(&path, "a field alias must be [alias, [header, field]]");
            }
            let name = as_str(&pair[0], &path)?.to_string();
            let target = as_arr(&pair[1], &at(&path, 1))?;
            if target.len() != 2 {
                return err(
                    &at(&path, 1),
                    "a field alias target must be [header, field]",
                );
            }
            let h = lookup(
                &self.n.headers,
                "header",
                &as_str(&target[0], &path)?,
                &path,
            )?;
            let f = self.field_in_header(h, &as_str(&target[1], &path)?, &path)?;
            self.n.aliases.insert(name.clone(), f);
            self.p.field_aliases.push((name, f));
        }
        Ok(())
    }

    fn extern_instances(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("extern");
        // simple_switch registers no extern types (`bmv2-json.md` §9): the first instance fails.
        if let Some(e) = arr(root, "extern_instances", "")?.first() {
            let path = at("/extern_instances", 0);
            let (name, id) = name_id(e, &path)?;
            u.check(&name, id, &path)?;
            let t = req_str(e, "type", &path)?;
            return err(&path, format!("Invalid reference to extern type '{t}'"));
        }
        Ok(())
    }

    fn parse_vsets(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("parser vset");
        for (i, v) in arr(root, "parse_vsets", "")?.iter().enumerate() {
            let path = at("/parse_vsets", i);
            let (name, id) = name_id(v, &path)?;
            u.check(&name, id, &path)?;
            let compressed_bitwidth = req_width(v, "compressed_bitwidth", &path)?;
            self.n.vsets.insert(name.clone(), i as u32);
            self.p.parse_vsets.push(ParseVset {
                name,
                id,
                compressed_bitwidth,
            });
        }
        Ok(())
    }

    fn errors(&mut self, root: &Value) -> R<()> {
        let mut names = HashSet::new();
        let mut values = HashSet::new();
        for (i, e) in arr(root, "errors", "")?.iter().enumerate() {
            let path = at("/errors", i);
            let pair = as_arr(e, &path)?;
            if pair.len() != 2 {
                return err(&path, "Invalid errors specification in json");
            }
            let n = as_str(&pair[0], &path)?.to_string();
            let v = as_int(&pair[1], &path)?;
            if !(0..i32::MAX as i64).contains(&v) || !names.insert(n.clone()) || !values.insert(v) {
                return err(&path, "Invalid errors specification in json");
            }
            self.p.errors.push((n, v));
        }
        for core in [
            "NoError",
            "PacketTooShort",
            "NoMatch",
            "StackOutOfBounds",
            "HeaderTooShort",
            "ParserTimeout",
            "ParserInvalidArgument",
        ] {
            if !self.p.errors.iter().any(|(n, _)| n == core) {
                let next = self.p.errors.iter().map(|(_, v)| *v + 1).max().unwrap_or(0);
                self.p.errors.push((core.to_string(), next));
            }
        }
        Ok(())
    }

    // ---------------------------------------------------------------- expressions

    /// A `{type, value}` leaf or nested expression.
    fn expr_tv(&self, v: &Value, path: &str) -> R<Expr> {
        let t = req_str(v, "type", path)?;
        let val = v.get("value").unwrap_or(&Value::Null);
        let vp = at(path, "value");
        Ok(match &*t {
            "field" => Expr::Field(self.field_ref(val, &vp)?),
            "hexstr" => Expr::Const(value_int(val, &vp)?),
            "bool" => Expr::Bool(as_bool(val, &vp)?),
            "local" | "runtime_data" => Expr::Local(as_u32(val, &vp)?),
            "register" => {
                let (array, index) = self.register_ref(val, &vp)?;
                Expr::Register {
                    array,
                    index: Box::new(index),
                }
            }
            "header" => Expr::Header(lookup(&self.n.headers, "header", &as_str(val, &vp)?, &vp)?),
            "header_stack" => Expr::HeaderStack(lookup(
                &self.n.stacks,
                "header stack",
                &as_str(val, &vp)?,
                &vp,
            )?),
            "header_union" => Expr::Union(lookup(
                &self.n.unions,
                "header union",
                &as_str(val, &vp)?,
                &vp,
            )?),
            "header_union_stack" => Expr::UnionStack(lookup(
                &self.n.union_stacks,
                "header union stack",
                &as_str(val, &vp)?,
                &vp,
            )?),
            "stack_field" => {
                let (stack, field) = self.stack_field(val, &vp)?;
                Expr::StackField { stack, field }
            }
            "lookahead" => {
                let a = as_arr(val, &vp)?;
                if a.len() != 2 {
                    return err(&vp, "lookahead must be [offset, bitwidth]");
                }
                Expr::Lookahead {
                    offset: as_u32(&a[0], &vp)?,
                    width: as_width(&a[1], &vp)?,
                }
            }
            "expression" => self.expr_body_or_tv(val, &vp, None)?,
            other => return err(path, format!("Invalid 'type' in expression: '{other}'")),
        })
    }

    fn register_ref(&self, val: &Value, path: &str) -> R<(u32, Expr)> {
        let a = as_arr(val, path)?;
        if a.len() != 2 {
            return err(path, "register reference must be [register_array, index]");
        }
        let array = lookup(&self.n.registers, "register", &as_str(&a[0], path)?, path)?;
        let index = self.expr_tv(&a[1], &at(path, 1))?;
        Ok((array, index))
    }

    fn stack_field(&self, val: &Value, path: &str) -> R<(u32, u32)> {
        let a = as_arr(val, path)?;
        if a.len() != 2 {
            return err(path, "stack_field must be [header_stack, field]");
        }
        let stack = lookup(&self.n.stacks, "header stack", &as_str(&a[0], path)?, path)?;
        let ht = self.p.header_stacks[stack as usize].header_type;
        let field = self.field_in_type(ht, &as_str(&a[1], path)?, path)?;
        Ok((stack, field))
    }

    /// A `[union_stack, member]` pair: the union stack's id, the member's index in the union
    /// type, and the member's header type.
    fn union_stack_member(&self, stack: &Value, member: &Value, path: &str) -> R<(u32, u32, u32)> {
        let us = lookup(
            &self.n.union_stacks,
            "header union stack",
            &as_str(stack, path)?,
            path,
        )?;
        let ut =
            &self.p.header_union_types[self.p.header_union_stacks[us as usize].union_type as usize];
        let m = as_str(member, path)?;
        match ut.members.iter().position(|(n, _)| **n == *m) {
            Some(mi) => Ok((us, mi as u32, ut.members[mi].1)),
            None => err(
                path,
                format!("union type '{}' has no member '{m}'", ut.name),
            ),
        }
    }

    /// `length_exp` may be either a body or a type/value object; inside a header type's own
    /// `length_exp`, `field` leaves may name fields of that type (`hdr_type` context).
    fn expr_body_or_tv(&self, v: &Value, path: &str, _ht: Option<u32>) -> R<Expr> {
        if v.get("op").is_some() {
            self.expr_body(v, path, _ht)
        } else {
            self.expr_tv(v, path)
        }
    }

    fn expr_body(&self, v: &Value, path: &str, ht: Option<u32>) -> R<Expr> {
        let op_s = req_str(v, "op", path)?;
        let sub = |k: &str| -> R<Option<Box<Expr>>> {
            match get(v, k) {
                None => Ok(None),
                Some(x) => Ok(Some(Box::new(self.expr_tv(x, &at(path, k))?))),
            }
        };
        let op = match &*op_s {
            "+" => Op::Add,
            "-" => Op::Sub,
            "*" => Op::Mul,
            "/" => Op::Div,
            "%" => Op::Mod,
            "<<" => Op::Shl,
            ">>" => Op::Shr,
            "&" => Op::And,
            "|" => Op::Or,
            "^" => Op::Xor,
            "~" => Op::Not,
            "==" => Op::Eq,
            "!=" => Op::Ne,
            ">" => Op::Gt,
            ">=" => Op::Ge,
            "<" => Op::Lt,
            "<=" => Op::Le,
            "and" => Op::LAnd,
            "or" => Op::LOr,
            "not" => Op::LNot,
            "valid" => Op::Valid,
            "valid_union" => Op::ValidUnion,
            "?" => Op::Ternary,
            "two_comp_mod" => Op::TwoCompMod,
            "sat_cast" => Op::SatCast,
            "usat_cast" => Op::USatCast,
            "d2b" => Op::D2B,
            "b2d" => Op::B2D,
            "dereference_header_stack" | "dereference_stack" => Op::DerefStack,
            "dereference_union_stack" => Op::DerefUnionStack,
            "last_stack_index" => Op::LastStackIndex,
            "size_stack" => Op::SizeStack,
            "access_field" => Op::AccessField(as_u32(req(v, "right", path)?, &at(path, "right"))?),
            "access_union_header" => {
                Op::AccessUnionHeader(as_u32(req(v, "right", path)?, &at(path, "right"))?)
            }
            other => {
                return err(
                    &at(path, "op"),
                    format!("unknown expression operator '{other}'"),
                )
            }
        };
        let _ = ht;
        let left = sub("left")?;
        let right = match op {
            Op::AccessField(_) | Op::AccessUnionHeader(_) => None,
            _ => sub("right")?,
        };
        let cond = if op == Op::Ternary {
            sub("cond")?
        } else {
            None
        };
        let binary = !matches!(
            op,
            Op::Not
                | Op::LNot
                | Op::Valid
                | Op::ValidUnion
                | Op::D2B
                | Op::B2D
                | Op::LastStackIndex
                | Op::SizeStack
                | Op::AccessField(_)
                | Op::AccessUnionHeader(_)
                | Op::Add
                | Op::Sub
        );
        if binary && (left.is_none() || right.is_none()) && op != Op::Ternary {
            return err(
                path,
                format!("operator '{op_s}' needs a left and a right operand"),
            );
        }
        if right.is_none()
            && matches!(
                op,
                Op::Not | Op::LNot | Op::D2B | Op::B2D | Op::Add | Op::Sub
            )
        {
            return err(path, format!("operator '{op_s}' needs a right operand"));
        }
        if op == Op::Ternary && (cond.is_none() || left.is_none() || right.is_none()) {
            return err(path, "operator '?' needs cond, left and right");
        }
        Ok(Expr::Op {
            op,
            left,
            right,
            cond,
        })
    }

    // ---------------------------------------------------------------- primitives

    fn arg(&self, v: &Value, path: &str, nparams: usize, action: &str, prim: &str) -> R<Arg> {
        let t = req_str(v, "type", path)?;
        let val = v.get("value").unwrap_or(&Value::Null);
        let vp = at(path, "value");
        let name = || as_str(val, &vp);
        Ok(match &*t {
            "field" => Arg::Field(self.field_ref(val, &vp)?),
            "hexstr" => Arg::Const(value_int(val, &vp)?),
            "bool" => Arg::Bool(as_bool(val, &vp)?),
            "runtime_data" => {
                let i = as_u32(val, &vp)?;
                if i as usize >= nparams {
                    return err(&vp, format!("Invalid 'runtime_data' parameter reference in action '{action}' when calling primitive '{prim}': trying to use parameter at offset {i} but action only has {nparams} parameter(s)"));
                }
                Arg::RuntimeData(i)
            }
            "header" => Arg::Header(lookup(&self.n.headers, "header", &name()?, &vp)?),
            "header_stack" => {
                Arg::HeaderStack(lookup(&self.n.stacks, "header stack", &name()?, &vp)?)
            }
            "header_union" => {
                Arg::HeaderUnion(lookup(&self.n.unions, "header union", &name()?, &vp)?)
            }
            "header_union_stack" => Arg::HeaderUnionStack(lookup(
                &self.n.union_stacks,
                "header union stack",
                &name()?,
                &vp,
            )?),
            "calculation" => Arg::Calculation(lookup(&self.n.calcs, "calculation", &name()?, &vp)?),
            "counter_array" => {
                Arg::CounterArray(lookup(&self.n.counters, "counter", &name()?, &vp)?)
            }
            "meter_array" => Arg::MeterArray(lookup(&self.n.meters, "meter", &name()?, &vp)?),
            "register_array" => {
                Arg::RegisterArray(lookup(&self.n.registers, "register", &name()?, &vp)?)
            }
            "extern" => Arg::Extern(lookup(&self.n.externs, "extern", &name()?, &vp)?),
            "string" => Arg::String(name()?.to_string()),
            "register" => {
                let (array, index) = self.register_ref(val, &vp)?;
                Arg::Register { array, index }
            }
            "stack_field" => {
                let (stack, field) = self.stack_field(val, &vp)?;
                Arg::StackField { stack, field }
            }
            "parameters_vector" => {
                let mut out = Vec::new();
                for (i, x) in as_arr(val, &vp)?.iter().enumerate() {
                    out.push(self.arg(x, &at(&vp, i), nparams, action, prim)?);
                }
                Arg::ParametersVector(out)
            }
            "field_list" => {
                let mut out = Vec::new();
                for (i, x) in as_arr(val, &vp)?.iter().enumerate() {
                    let p = at(&vp, i);
                    let tt = req_str(x, "type", &p)?;
                    if tt != "field" {
                        return err(&p, format!("Invalid type '{tt}', expected 'field'"));
                    }
                    out.push(self.field_ref(req(x, "value", &p)?, &at(&p, "value"))?);
                }
                Arg::FieldList(out)
            }
            "expression" => Arg::Expr(self.expr_body_or_tv(val, &vp, None)?),
            other => return err(path, format!("Parameter type '{other}' not supported")),
        })
    }

    fn primitive(&self, v: &Value, path: &str, nparams: usize, action: &str) -> R<Primitive> {
        let op = req_str(v, "op", path)?.to_string();
        let Some(arity) = primitive_arity(&op) else {
            return err(&at(path, "op"), format!("Unknown primitive action: {op}"));
        };
        let params_v = arr(v, "parameters", path)?;
        if params_v.len() != arity {
            return err(path, format!("Invalid number of parameters for primitive action {op}: expected {arity} but got {}", params_v.len()));
        }
        let mut params = Vec::new();
        for (i, a) in params_v.iter().enumerate() {
            params.push(self.arg(a, &at(&at(path, "parameters"), i), nparams, action, &op)?);
        }
        let source_info = get(v, "source_info").map(source_info);
        Ok(Primitive {
            op,
            params,
            source_info,
        })
    }

    // ---------------------------------------------------------------- parsers

    fn extract_target(&self, v: &Value, path: &str) -> R<ExtractTarget> {
        let t = req_str(v, "type", path)?;
        let val = req(v, "value", path)?;
        let vp = at(path, "value");
        Ok(match &*t {
            "regular" => {
                ExtractTarget::Regular(lookup(&self.n.headers, "header", &as_str(val, &vp)?, &vp)?)
            }
            "stack" => ExtractTarget::Stack(lookup(
                &self.n.stacks,
                "header stack",
                &as_str(val, &vp)?,
                &vp,
            )?),
            "union_stack" => {
                let a = as_arr(val, &vp)?;
                if a.len() != 2 {
                    return err(
                        &vp,
                        "union_stack extract target must be [union_stack, member]",
                    );
                }
                let (us, mi, _) = self.union_stack_member(&a[0], &a[1], &vp)?;
                ExtractTarget::UnionStack(us, mi)
            }
            other => return err(path, format!("invalid extract type '{other}'")),
        })
    }

    fn target_type(&self, t: ExtractTarget) -> u32 {
        match t {
            ExtractTarget::Regular(h) => self.p.headers[h as usize].header_type,
            ExtractTarget::Stack(s) => self.p.header_stacks[s as usize].header_type,
            ExtractTarget::UnionStack(us, m) => {
                let ut = self.p.header_union_stacks[us as usize].union_type;
                self.p.header_union_types[ut as usize].members[m as usize].1
            }
        }
    }

    fn parser_op(&self, v: &Value, path: &str) -> R<ParserOp> {
        let op = req_str(v, "op", path)?;
        let params = arr(v, "parameters", path)?;
        let pp = at(path, "parameters");
        let want = |n: usize| -> R<()> {
            if params.len() != n {
                return err(
                    path,
                    format!(
                        "parser op '{op}' expects {n} parameter(s) but got {}",
                        params.len()
                    ),
                );
            }
            Ok(())
        };
        Ok(match &*op {
            "extract" => {
                want(1)?;
                let t = self.extract_target(&params[0], &at(&pp, 0))?;
                let ht = &self.p.header_types[self.target_type(t) as usize];
                if ht.vl_field().is_some() && ht.length_exp.is_none() {
                    return err(path, "Cannot use 'extract' parser op with a VL header for which no length expression was provided, use 'extract_VL' instead");
                }
                ParserOp::Extract(t)
            }
            "extract_VL" => {
                want(2)?;
                let t = self.extract_target(&params[0], &at(&pp, 0))?;
                if self.p.header_types[self.target_type(t) as usize]
                    .vl_field()
                    .is_none()
                {
                    return err(
                        path,
                        "extract_VL on a header without a variable-length field",
                    );
                }
                ParserOp::ExtractVl(t, self.expr_tv(&params[1], &at(&pp, 1))?)
            }
            "set" => {
                want(2)?;
                if req_str(&params[0], "type", &at(&pp, 0))? != "field" {
                    return err(
                        &at(&pp, 0),
                        "the destination of a 'set' parser op must be a field",
                    );
                }
                let dst = self.field_ref(
                    req(&params[0], "value", &at(&pp, 0))?,
                    &at(&at(&pp, 0), "value"),
                )?;
                let src = self.expr_tv(&params[1], &at(&pp, 1))?;
                ParserOp::Set(dst, src)
            }
            "verify" => {
                want(2)?;
                let cond = self.expr_tv(&params[0], &at(&pp, 0))?;
                let e = match &params[1] {
                    // BMv2: `isInt()` means a plain error code (a real with no fraction too).
                    v if jsoncpp::is_int(v) => {
                        let code = as_int(&params[1], &at(&pp, 1))?;
                        if !self.p.errors.iter().any(|(_, v)| *v == code) {
                            return err(&at(&pp, 1), format!("unknown error code {code}"));
                        }
                        Expr::Const(Int::from_i64(code))
                    }
                    x => self.expr_tv(x, &at(&pp, 1))?,
                };
                ParserOp::Verify(cond, e)
            }
            "shift" => {
                want(1)?;
                ParserOp::Shift(as_u32(&params[0], &at(&pp, 0))?)
            }
            "advance" => {
                want(1)?;
                ParserOp::Advance(self.expr_tv(&params[0], &at(&pp, 0))?)
            }
            "primitive" => {
                want(1)?;
                ParserOp::Primitive(self.primitive(&params[0], &at(&pp, 0), 0, "parser")?)
            }
            other => return err(&at(path, "op"), format!("Parser op '{other}'not supported")),
        })
    }

    fn key_elem(&self, v: &Value, path: &str) -> R<(KeyElem, u32)> {
        let t = req_str(v, "type", path)?;
        let val = req(v, "value", path)?;
        let vp = at(path, "value");
        let bytes = |w: u32| w.div_ceil(8);
        Ok(match &*t {
            "field" => {
                let f = self.field_ref(val, &vp)?;
                (KeyElem::Field(f), bytes(self.p.field_width(f)))
            }
            "stack_field" => {
                let (stack, field) = self.stack_field(val, &vp)?;
                let ht = self.p.header_stacks[stack as usize].header_type;
                let w = self.type_field_width(ht, field);
                (KeyElem::StackField { stack, field }, bytes(w))
            }
            "union_stack_field" => {
                let a = as_arr(val, &vp)?;
                if a.len() != 3 {
                    return err(
                        &vp,
                        "union_stack_field must be [union_stack, member, field]",
                    );
                }
                let (us, mi, ht) = self.union_stack_member(&a[0], &a[1], &vp)?;
                let field = self.field_in_type(ht, &as_str(&a[2], &vp)?, &vp)?;
                let w = self.type_field_width(ht, field);
                (
                    KeyElem::UnionStackField {
                        stack: us,
                        member: mi,
                        field,
                    },
                    bytes(w),
                )
            }
            "lookahead" => {
                let a = as_arr(val, &vp)?;
                if a.len() != 2 {
                    return err(&vp, "lookahead must be [offset, bitwidth]");
                }
                let (offset, width) = (as_u32(&a[0], &vp)?, as_width(&a[1], &vp)?);
                (KeyElem::Lookahead { offset, width }, bytes(width))
            }
            other => return err(path, format!("invalid transition key type '{other}'")),
        })
    }

    fn type_field_width(&self, ht: u32, field: u32) -> u32 {
        if field == VALID_FIELD {
            return 1;
        }
        match self.p.header_types[ht as usize].fields[field as usize].width {
            FieldWidth::Fixed(w) => w,
            FieldWidth::Variable => 0,
        }
    }

    fn parsers(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("parser");
        for (i, pv) in arr(root, "parsers", "")?.iter().enumerate() {
            let path = at("/parsers", i);
            let (name, id) = name_id(pv, &path)?;
            u.check(&name, id, &path)?;
            let states_v = arr(pv, "parse_states", &path)?;
            let mut su = Uniq::new("parse state");
            let mut state_names = HashMap::new();
            for (j, s) in states_v.iter().enumerate() {
                let sp = at(&at(&path, "parse_states"), j);
                let (sn, sid) = name_id(s, &sp)?;
                su.check(&sn, sid, &sp)?;
                state_names.insert(sn, j as u32);
            }
            let mut states = Vec::new();
            for (j, s) in states_v.iter().enumerate() {
                let sp = at(&at(&path, "parse_states"), j);
                let (sn, sid) = name_id(s, &sp)?;
                let mut ops = Vec::new();
                for (k, o) in arr(s, "parser_ops", &sp)?.iter().enumerate() {
                    ops.push(self.parser_op(o, &at(&at(&sp, "parser_ops"), k))?);
                }
                let mut key = Vec::new();
                let mut key_bytes = 0;
                for (k, e) in arr(s, "transition_key", &sp)?.iter().enumerate() {
                    let (ke, b) = self.key_elem(e, &at(&at(&sp, "transition_key"), k))?;
                    key.push(ke);
                    key_bytes += b;
                }
                let mut transitions = Vec::new();
                for (k, t) in arr(s, "transitions", &sp)?.iter().enumerate() {
                    let tp = at(&at(&sp, "transitions"), k);
                    // BMv2 looks the name up and takes a missing state (or null) as the end.
                    let next = match get(t, "next_state") {
                        None => None,
                        Some(n) => state_names
                            .get(&*as_str(n, &at(&tp, "next_state"))?)
                            .copied(),
                    };
                    // Legacy form: no `type` means "hexstr"; a "hexstr" whose value is
                    // "default" is the default case.
                    let mut ty: Cow<str> = match t.get("type") {
                        None => Cow::Borrowed("hexstr"),
                        Some(v) => as_str(v, &at(&tp, "type"))?,
                    };
                    if ty == "hexstr"
                        && as_str(t.get("value").unwrap_or(&Value::Null), &at(&tp, "value"))?
                            == "default"
                    {
                        ty = Cow::Borrowed("default");
                    }
                    let check_width = |b: &Vec<u8>, what: &str, want: u32| -> R<()> {
                        if b.len() as u32 != want {
                            return err(&tp, format!("Parser transition {what} has incorrect width, expected width is {want} bytes but actual width is {} bytes", b.len()));
                        }
                        Ok(())
                    };
                    let matcher = match &*ty {
                        "default" => TransitionMatch::Default,
                        "hexstr" => {
                            let value = byte_string(req(t, "value", &tp)?, &at(&tp, "value"))?;
                            check_width(&value, "value", key_bytes)?;
                            let mask = match get(t, "mask") {
                                None => None,
                                Some(m) => {
                                    let m = byte_string(m, &at(&tp, "mask"))?;
                                    check_width(&m, "mask", key_bytes)?;
                                    Some(m)
                                }
                            };
                            TransitionMatch::Value { value, mask }
                        }
                        "parse_vset" => {
                            let vn = as_str(req(t, "value", &tp)?, &at(&tp, "value"))?;
                            let vset = lookup(&self.n.vsets, "parser vset", &vn, &tp)?;
                            let vb = self.p.parse_vsets[vset as usize]
                                .compressed_bitwidth
                                .div_ceil(8);
                            let mask = match get(t, "mask") {
                                None => None,
                                Some(m) => {
                                    let m = byte_string(m, &at(&tp, "mask"))?;
                                    check_width(&m, "mask", vb)?;
                                    Some(m)
                                }
                            };
                            TransitionMatch::Vset { vset, mask }
                        }
                        // BMv2 adds no case for any other type: the transition is ignored.
                        _ => continue,
                    };
                    transitions.push(Transition { matcher, next });
                }
                states.push(ParseState {
                    name: sn,
                    id: sid,
                    ops,
                    key,
                    key_bytes,
                    transitions,
                });
            }
            // `asString`, looked up; an unknown name (or none) is no start state.
            let init_state = match get(pv, "init_state") {
                Some(n) => state_names
                    .get(&*as_str(n, &at(&path, "init_state"))?)
                    .copied(),
                None => None,
            };
            self.p.parsers.push(Parser {
                name,
                id,
                init_state,
                states,
            });
        }
        Ok(())
    }

    fn deparsers(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("deparser");
        for (i, d) in arr(root, "deparsers", "")?.iter().enumerate() {
            let path = at("/deparsers", i);
            let (name, id) = name_id(d, &path)?;
            u.check(&name, id, &path)?;
            let mut order = Vec::new();
            for (j, h) in arr(d, "order", &path)?.iter().enumerate() {
                let p = at(&at(&path, "order"), j);
                order.push(lookup(&self.n.headers, "header", &as_str(h, &p)?, &p)?);
            }
            let mut primitives = Vec::new();
            for (j, pr) in arr(d, "primitives", &path)?.iter().enumerate() {
                primitives.push(self.primitive(pr, &at(&at(&path, "primitives"), j), 0, &name)?);
            }
            self.p.deparsers.push(Deparser {
                name,
                id,
                order,
                primitives,
            });
        }
        Ok(())
    }

    fn calculations(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("calculation");
        for (i, c) in arr(root, "calculations", "")?.iter().enumerate() {
            let path = at("/calculations", i);
            let (name, id) = name_id(c, &path)?;
            u.check(&name, id, &path)?;
            let algo = req_str(c, "algo", &path)?.to_string();
            if !known_hash_algorithm(&algo) {
                return err(
                    &at(&path, "algo"),
                    format!("Unknown hash algorithm: {algo}"),
                );
            }
            let mut input = Vec::new();
            for (j, x) in arr(c, "input", &path)?.iter().enumerate() {
                let p = at(&at(&path, "input"), j);
                let t = req_str(x, "type", &p)?;
                input.push(match &*t {
                    "field" => {
                        CalcInput::Field(self.field_ref(req(x, "value", &p)?, &at(&p, "value"))?)
                    }
                    "hexstr" => {
                        let bitwidth = req_width(x, "bitwidth", &p)?;
                        let v = value_int(req(x, "value", &p)?, &at(&p, "value"))?;
                        CalcInput::Const {
                            value: v.to_bytes(bitwidth),
                            bitwidth,
                        }
                    }
                    "header" => CalcInput::Header(lookup(
                        &self.n.headers,
                        "header",
                        &req_str(x, "value", &p)?,
                        &p,
                    )?),
                    "payload" => CalcInput::Payload,
                    other => {
                        return err(
                            &p,
                            format!("Unsupported input type '{other}' for calculation '{name}'"),
                        )
                    }
                });
            }
            self.n.calcs.insert(name.clone(), i as u32);
            self.p.calculations.push(Calculation {
                name,
                id,
                algo,
                input,
            });
        }
        Ok(())
    }

    fn counters(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("counter");
        for (i, c) in arr(root, "counter_arrays", "")?.iter().enumerate() {
            let path = at("/counter_arrays", i);
            let (name, id) = name_id(c, &path)?;
            u.check(&name, id, &path)?;
            let is_direct = opt_bool(c, "is_direct", false, &path)?;
            let size = req_u32(c, "size", &path)?;
            let binding = match get(c, "binding") {
                Some(b) => Some(as_str(b, &at(&path, "binding"))?.into_owned()),
                None => None,
            };
            self.n.counters.insert(name.clone(), i as u32);
            self.p.counter_arrays.push(CounterArray {
                name,
                id,
                size,
                is_direct,
                binding,
            });
        }
        Ok(())
    }

    fn meters(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("meter");
        for (i, m) in arr(root, "meter_arrays", "")?.iter().enumerate() {
            let path = at("/meter_arrays", i);
            let (name, id) = name_id(m, &path)?;
            u.check(&name, id, &path)?;
            let meter_type = match &*req_str(m, "type", &path)? {
                "bytes" => MeterType::Bytes,
                "packets" => MeterType::Packets,
                t => return err(&at(&path, "type"), format!("Invalid meter type '{t}'")),
            };
            let rate_count = match get(m, "rate_count") {
                Some(v) => as_u32(v, &at(&path, "rate_count"))?,
                None => 2,
            };
            let is_direct = opt_bool(m, "is_direct", false, &path)?;
            let size = req_u32(m, "size", &path)?;
            let binding = match get(m, "binding") {
                Some(b) => Some(as_str(b, &at(&path, "binding"))?.into_owned()),
                None => None,
            };
            let result_target = match get(m, "result_target") {
                Some(v) => Some(self.field_ref(v, &at(&path, "result_target"))?),
                None if is_direct => return err(&path, "a direct meter needs 'result_target'"),
                None => None,
            };
            self.n.meters.insert(name.clone(), i as u32);
            self.p.meter_arrays.push(MeterArray {
                name,
                id,
                meter_type,
                rate_count,
                size,
                is_direct,
                binding,
                result_target,
            });
        }
        Ok(())
    }

    fn registers(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("register");
        for (i, r) in arr(root, "register_arrays", "")?.iter().enumerate() {
            let path = at("/register_arrays", i);
            let (name, id) = name_id(r, &path)?;
            u.check(&name, id, &path)?;
            let size = req_u32(r, "size", &path)?;
            let bitwidth = as_int_width(
                r.get("bitwidth").unwrap_or(&Value::Null),
                &at(&path, "bitwidth"),
            )?;
            self.n.registers.insert(name.clone(), i as u32);
            self.p.register_arrays.push(RegisterArray {
                name,
                id,
                size,
                bitwidth,
            });
        }
        Ok(())
    }

    fn actions(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::ids_only("action");
        for (i, a) in arr(root, "actions", "")?.iter().enumerate() {
            let path = at("/actions", i);
            let (name, id) = name_id(a, &path)?;
            u.check(&name, id, &path)?;
            let mut runtime_data = Vec::new();
            for (j, r) in arr(a, "runtime_data", &path)?.iter().enumerate() {
                let p = at(&at(&path, "runtime_data"), j);
                runtime_data.push((
                    req_str(r, "name", &p)?.to_string(),
                    req_width(r, "bitwidth", &p)?,
                ));
            }
            let mut primitives = Vec::new();
            for (j, pr) in arr(a, "primitives", &path)?.iter().enumerate() {
                primitives.push(self.primitive(
                    pr,
                    &at(&at(&path, "primitives"), j),
                    runtime_data.len(),
                    &name,
                )?);
            }
            self.n.actions_by_id.insert(id, i as u32);
            self.n
                .actions_by_name
                .entry(name.clone())
                .or_insert(i as u32);
            self.p.actions.push(Action {
                name,
                id,
                runtime_data,
                primitives,
            });
        }
        Ok(())
    }

    fn action_data(&self, v: &Value, path: &str, action: u32) -> R<Vec<Int>> {
        let a = as_arr(v, path)?;
        let act = &self.p.actions[action as usize];
        if a.len() != act.runtime_data.len() {
            return err(
                path,
                format!(
                    "Invalid number of arguments for action '{}': expected {} but got {}",
                    act.name,
                    act.runtime_data.len(),
                    a.len()
                ),
            );
        }
        a.iter()
            .enumerate()
            .map(|(i, x)| value_int(x, &at(path, i)))
            .collect()
    }

    fn pipelines(&mut self, root: &Value) -> R<()> {
        let mut pu = Uniq::new("pipeline");
        let mut global_nodes: HashSet<String> = HashSet::new();
        for (pi, pv) in arr(root, "pipelines", "")?.iter().enumerate() {
            let path = at("/pipelines", pi);
            let (name, id) = name_id(pv, &path)?;
            pu.check(&name, id, &path)?;

            // Action profiles.
            let mut action_profiles = Vec::new();
            let mut apu = Uniq::new("action profile");
            let mut ap_names: HashMap<String, u32> = HashMap::new();
            for (i, ap) in arr(pv, "action_profiles", &path)?.iter().enumerate() {
                let p = at(&at(&path, "action_profiles"), i);
                let (an, aid) = name_id(ap, &p)?;
                apu.check(&an, aid, &p)?;
                // BMv2 reads `max_size` with `asInt` and ignores it.
                let max_size = req_int(ap, "max_size", &p)?.max(0) as u32;
                let selector = match get(ap, "selector") {
                    Some(s) => Some(self.selector(s, &at(&p, "selector"))?),
                    None => None,
                };
                ap_names.insert(an.clone(), i as u32);
                action_profiles.push(ActionProfile {
                    name: an,
                    id: aid,
                    max_size,
                    selector,
                });
            }

            // Node names (global name space).
            let tables_v = arr(pv, "tables", &path)?;
            let conds_v = arr(pv, "conditionals", &path)?;
            let calls_v = arr(pv, "action_calls", &path)?;
            let mut nodes: HashMap<String, Node> = HashMap::new();
            let mut tu = Uniq::ids_only("table");
            let mut cu = Uniq::ids_only("conditional");
            let mut au = Uniq::ids_only("action call");
            for (kind, list, mk) in [
                ("tables", tables_v, Node::Table as fn(u32) -> Node),
                (
                    "conditionals",
                    conds_v,
                    Node::Conditional as fn(u32) -> Node,
                ),
                ("action_calls", calls_v, Node::ActionCall as fn(u32) -> Node),
            ] {
                for (i, t) in list.iter().enumerate() {
                    let p = at(&at(&path, kind), i);
                    let (tn, tid) = name_id(t, &p)?;
                    match kind {
                        "tables" => tu.check(&tn, tid, &p)?,
                        "conditionals" => cu.check(&tn, tid, &p)?,
                        _ => au.check(&tn, tid, &p)?,
                    }
                    if !global_nodes.insert(tn.clone()) {
                        return err(
                            &p,
                            format!("Duplicate objects of type 'control node' with name '{tn}'"),
                        );
                    }
                    nodes.insert(tn, mk(i as u32));
                }
            }
            let node_ref = |v: Option<&Value>, p: &str| -> R<Option<Node>> {
                match v {
                    None | Some(Value::Null) => Ok(None),
                    // `asString`, then looked up.
                    Some(v) => {
                        let n = as_str(v, p)?;
                        match nodes.get(&*n) {
                            Some(x) => Ok(Some(*x)),
                            None => err(p, format!("Invalid reference to object of type 'control node' with name '{n}'")),
                        }
                    }
                }
            };

            let mut tables = Vec::new();
            for (i, t) in tables_v.iter().enumerate() {
                let p = at(&at(&path, "tables"), i);
                tables.push(self.table(t, &p, &mut action_profiles, &mut ap_names, &node_ref)?);
            }
            let mut conditionals = Vec::new();
            for (i, c) in conds_v.iter().enumerate() {
                let p = at(&at(&path, "conditionals"), i);
                let (cn, cid) = name_id(c, &p)?;
                let expr =
                    self.expr_body_or_tv(req(c, "expression", &p)?, &at(&p, "expression"), None)?;
                if c.get("true_next").is_none() && c.get("false_next").is_none() {
                    return err(&p, "conditional must have either or both of the keys 'true_next' and 'false_next'.");
                }
                let true_next = node_ref(c.get("true_next"), &at(&p, "true_next"))?;
                let false_next = node_ref(c.get("false_next"), &at(&p, "false_next"))?;
                conditionals.push(Conditional {
                    name: cn,
                    id: cid,
                    expr,
                    true_next,
                    false_next,
                });
            }
            let mut action_calls = Vec::new();
            for (i, c) in calls_v.iter().enumerate() {
                let p = at(&at(&path, "action_calls"), i);
                let (cn, cid) = name_id(c, &p)?;
                let aid = req_int(c, "action_id", &p)?;
                let Some(&action) = self.n.actions_by_id.get(&aid) else {
                    return err(
                        &p,
                        format!("Invalid reference to object of type 'action' with id {aid}"),
                    );
                };
                if !self.p.actions[action as usize].runtime_data.is_empty() {
                    return err(&p, format!("Cannot call action '{}' directly from control as it expects parameters", self.p.actions[action as usize].name));
                }
                let next = node_ref(c.get("next_node"), &at(&p, "next_node"))?;
                action_calls.push(ActionCall {
                    name: cn,
                    id: cid,
                    action,
                    next,
                });
            }
            let init = node_ref(pv.get("init_table"), &at(&path, "init_table"))?;
            self.p.pipelines.push(Pipeline {
                name,
                id,
                init,
                action_profiles,
                tables,
                conditionals,
                action_calls,
            });
        }
        Ok(())
    }

    fn selector(&self, s: &Value, path: &str) -> R<Selector> {
        let algo = req_str(s, "algo", path)?.to_string();
        if !known_hash_algorithm(&algo) {
            return err(&at(path, "algo"), format!("Unknown hash algorithm: {algo}"));
        }
        let mut input = Vec::new();
        for (i, x) in arr(s, "input", path)?.iter().enumerate() {
            let p = at(&at(path, "input"), i);
            input.push(self.field_ref(req(x, "value", &p)?, &at(&p, "value"))?);
        }
        Ok(Selector { algo, input })
    }

    fn table(
        &self,
        t: &Value,
        path: &str,
        profiles: &mut Vec<ActionProfile>,
        ap_names: &mut HashMap<String, u32>,
        node_ref: &NodeResolver,
    ) -> R<Table> {
        let (name, id) = name_id(t, path)?;
        let match_type = match &*req_str(t, "match_type", path)? {
            "exact" => MatchKind::Exact,
            "lpm" => MatchKind::Lpm,
            "ternary" => MatchKind::Ternary,
            "range" => MatchKind::Range,
            other => {
                return err(
                    &at(path, "match_type"),
                    format!("Invalid match type '{other}'"),
                )
            }
        };
        // `asString`: a missing type is "" and refused, as BMv2 does.
        let table_type = match &*req_str(t, "type", path)? {
            "simple" => TableType::Simple,
            "indirect" => TableType::Indirect,
            "indirect_ws" => TableType::IndirectWs,
            other => return err(&at(path, "type"), format!("Invalid table type '{other}'")),
        };
        let action_profile = match table_type {
            TableType::Simple => None,
            _ => {
                if let Some(ap) = get(t, "action_profile") {
                    let apn = as_str(ap, &at(path, "action_profile"))?;
                    Some(lookup(
                        ap_names,
                        "action profile",
                        &apn,
                        &at(path, "action_profile"),
                    )?)
                } else if let Some(ap) = get(t, "act_prof_name") {
                    let apn = as_str(ap, &at(path, "act_prof_name"))?.to_string();
                    let selector = match get(t, "selector") {
                        Some(s) => Some(self.selector(s, &at(path, "selector"))?),
                        None if table_type == TableType::IndirectWs => {
                            return err(
                                path,
                                format!(
                                    "Table '{name}' is of type 'indirect_ws' but has no 'selector'"
                                ),
                            )
                        }
                        None => None,
                    };
                    match ap_names.get(&apn) {
                        Some(x) => Some(*x),
                        None => {
                            let idx = profiles.len() as u32;
                            let pid = profiles.iter().map(|p| p.id + 1).max().unwrap_or(0);
                            profiles.push(ActionProfile {
                                name: apn.clone(),
                                id: pid,
                                max_size: 0,
                                selector,
                            });
                            ap_names.insert(apn, idx);
                            Some(idx)
                        }
                    }
                } else {
                    return err(path, format!("Table '{name}' is indirect but has neither 'action_profile' nor 'act_prof_name'"));
                }
            }
        };
        if let (TableType::IndirectWs, Some(ap)) = (table_type, action_profile) {
            if profiles[ap as usize].selector.is_none() {
                return err(path, format!("Table '{name}' is of type 'indirect_ws' but its action profile has no selector"));
            }
        }

        let mut key = Vec::new();
        let mut lpm_count = 0;
        for (i, k) in arr(t, "key", path)?.iter().enumerate() {
            let p = at(&at(path, "key"), i);
            let mk = match &*req_str(k, "match_type", &p)? {
                "exact" => MatchKind::Exact,
                "lpm" => MatchKind::Lpm,
                "ternary" | "optional" => MatchKind::Ternary,
                "range" => MatchKind::Range,
                "valid" => MatchKind::Valid,
                other => {
                    return err(
                        &at(&p, "match_type"),
                        format!("Invalid match type '{other}'"),
                    )
                }
            };
            if mk == MatchKind::Lpm {
                lpm_count += 1;
                if lpm_count > 1 {
                    return err(&p, format!("Table '{name}' features 2 LPM match fields"));
                }
            }
            let tv = req(k, "target", &p)?;
            let (target, width, default_name) = match (mk, tv) {
                // A valid key's target is a header name (`asString`).
                (MatchKind::Valid, h) => {
                    let h = as_str(h, &at(&p, "target"))?;
                    let hi = lookup(&self.n.headers, "header", &h, &at(&p, "target"))?;
                    (KeyTarget::Valid(hi), 1, h.into_owned())
                }
                _ => {
                    let f = self.field_ref(tv, &at(&p, "target"))?;
                    (
                        KeyTarget::Field(f),
                        self.p.field_width(f),
                        self.p.field_name(f),
                    )
                }
            };
            let mask = match get(k, "mask") {
                None => None,
                Some(m) => {
                    let m = byte_string(m, &at(&p, "mask"))?;
                    if m.len() as u32 != width.div_ceil(8) {
                        return err(
                            &at(&p, "mask"),
                            format!("key mask must have {} bytes", width.div_ceil(8)),
                        );
                    }
                    Some(m)
                }
            };
            let kname = match get(k, "name") {
                Some(v) => as_str(v, &at(&p, "name"))?.into_owned(),
                None => default_name,
            };
            key.push(TableKey {
                match_kind: mk,
                target,
                mask,
                name: kname,
            });
        }

        // Actions: action_ids win over names.
        let mut actions = Vec::new();
        if let Some(ids) = get(t, "action_ids") {
            for (i, x) in as_arr(ids, &at(path, "action_ids"))?.iter().enumerate() {
                let p = at(&at(path, "action_ids"), i);
                let aid = as_int(x, &p)?;
                match self.n.actions_by_id.get(&aid) {
                    Some(a) => actions.push(*a),
                    None => {
                        return err(
                            &p,
                            format!("Invalid reference to object of type 'action' with id {aid}"),
                        )
                    }
                }
            }
        } else {
            for (i, x) in arr(t, "actions", path)?.iter().enumerate() {
                let p = at(&at(path, "actions"), i);
                actions.push(lookup(
                    &self.n.actions_by_name,
                    "action",
                    &as_str(x, &p)?,
                    &p,
                )?);
            }
        }
        let mut seen = HashSet::new();
        for a in &actions {
            let an = &self.p.actions[*a as usize].name;
            if !seen.insert(an.clone()) {
                return err(
                    path,
                    format!("Duplicate actions with name '{an}' in table '{name}'"),
                );
            }
        }

        // next_tables.
        let nt = match get(t, "next_tables") {
            Some(Value::Object(m)) => m.clone(),
            None => serde_json::Map::new(),
            Some(_) => return err(&at(path, "next_tables"), "'next_tables' must be an object"),
        };
        let ntp = at(path, "next_tables");
        let next_tables = if nt.contains_key("__HIT__") || nt.contains_key("__MISS__") {
            if !(nt.contains_key("__HIT__") && nt.contains_key("__MISS__") && nt.len() == 2) {
                return err(&ntp, format!("Table '{name}' has one of keys '__HIT__' and '__MISS__' in 'next_tables' but either it does not have both of them, or it has other keys that should not be there."));
            }
            NextTables::HitMiss {
                hit: node_ref(nt.get("__HIT__"), &at(&ntp, "__HIT__"))?,
                miss: node_ref(nt.get("__MISS__"), &at(&ntp, "__MISS__"))?,
            }
        } else {
            if nt.len() != actions.len() {
                return err(&ntp, format!("Table '{name}' should have exactly {} keys, one for each table action, but found {}keys.", actions.len(), nt.len()));
            }
            let mut per = Vec::new();
            for a in &actions {
                let an = &self.p.actions[*a as usize].name;
                match nt.get(an) {
                    Some(v) => per.push(node_ref(Some(v), &at(&ntp, an))?),
                    None => return err(&ntp, format!("Table '{name}' should have key for action '{an}' in its 'next_tables' object.")),
                }
            }
            NextTables::PerAction(per)
        };
        let base_default_next =
            node_ref(t.get("base_default_next"), &at(path, "base_default_next"))?;

        let entries_v = get(t, "entries");
        let max_size = match (entries_v, get(t, "max_size")) {
            (Some(e), _) => as_arr(e, &at(path, "entries"))?.len() as u32,
            (None, Some(m)) => as_u32(m, &at(path, "max_size"))?,
            (None, None) => {
                return err(
                    path,
                    format!("Table '{name}' has neither 'max_size' nor 'entries' attribute"),
                )
            }
        };
        let with_counters = opt_bool(t, "with_counters", false, path)?;
        let support_timeout = opt_bool(t, "support_timeout", false, path)?;
        let direct_meter = match get(t, "direct_meters") {
            None => None,
            Some(v) => {
                let mn = as_str(v, &at(path, "direct_meters"))?;
                match self.n.meters.get(&*mn) {
                    Some(m) if self.p.meter_arrays[*m as usize].is_direct => Some(*m),
                    _ => {
                        return err(
                            &at(path, "direct_meters"),
                            format!("Table '{name}' refers to unknown direct meter array '{mn}'"),
                        )
                    }
                }
            }
        };

        let action_in_table = |aid: i64, p: &str| -> R<u32> {
            match self.n.actions_by_id.get(&aid) {
                Some(a) if actions.contains(a) => Ok(*a),
                Some(_) => err(
                    p,
                    format!("action id {aid} is not an action of table '{name}'"),
                ),
                None => err(
                    p,
                    format!("Invalid reference to object of type 'action' with id {aid}"),
                ),
            }
        };

        let default_entry = match get(t, "default_entry") {
            None => None,
            Some(d) => {
                let p = at(path, "default_entry");
                let action = action_in_table(req_int(d, "action_id", &p)?, &at(&p, "action_id"))?;
                let action_const = opt_bool(d, "action_const", false, &p)?;
                let action_entry_const = opt_bool(d, "action_entry_const", false, &p)?;
                if action_const && table_type != TableType::Simple {
                    return err(&p, format!("Table '{name}' does not have type 'simple' and therefore setting 'action_const' to true is meaningless"));
                }
                let Some(ad) = get(d, "action_data") else {
                    return err(
                        &p,
                        format!("'default_entry' of table '{name}' should have key 'action_data'"),
                    );
                };
                let action_data = self.action_data(ad, &at(&p, "action_data"), action)?;
                Some(DefaultEntry {
                    action,
                    action_const,
                    action_data,
                    action_entry_const,
                })
            }
        };

        let entries = match entries_v {
            None => None,
            Some(ev) => {
                if table_type != TableType::Simple {
                    return err(path, format!("Table '{name}' does not have type 'simple' and therefore cannot specify a 'entries' attribute"));
                }
                let mut out = Vec::new();
                for (i, e) in as_arr(ev, &at(path, "entries"))?.iter().enumerate() {
                    let p = at(&at(path, "entries"), i);
                    let mkv = arr(e, "match_key", &p)?;
                    if mkv.len() != key.len() {
                        return err(
                            &p,
                            format!(
                                "Invalid number of fields in match key, expected {} but got {}",
                                key.len(),
                                mkv.len()
                            ),
                        );
                    }
                    let mut ck = Vec::new();
                    for (j, (m, k)) in mkv.iter().zip(&key).enumerate() {
                        let mp = at(&at(&p, "match_key"), j);
                        let got = req_str(m, "match_type", &mp)?;
                        let got_kind = if got == "optional" { "ternary" } else { &got };
                        if got_kind != k.match_kind.as_str() {
                            return err(&mp, format!("Invalid match type for field #{j} in match key, expected {} but got {got}", k.match_kind.as_str()));
                        }
                        let bs = |kk: &str| -> R<Vec<u8>> {
                            byte_string(req(m, kk, &mp)?, &at(&mp, kk))
                        };
                        ck.push(match k.match_kind {
                            MatchKind::Exact => ConstKey::Exact(bs("key")?),
                            MatchKind::Lpm => {
                                ConstKey::Lpm(bs("key")?, req_u32(m, "prefix_length", &mp)?)
                            }
                            MatchKind::Ternary => ConstKey::Ternary(bs("key")?, bs("mask")?),
                            MatchKind::Range => ConstKey::Range(bs("start")?, bs("end")?),
                            MatchKind::Valid => ConstKey::Valid(as_bool(
                                m.get("key").unwrap_or(&Value::Null),
                                &at(&mp, "key"),
                            )?),
                        });
                    }
                    let ae = req(e, "action_entry", &p)?;
                    let aep = at(&p, "action_entry");
                    let action =
                        action_in_table(req_int(ae, "action_id", &aep)?, &at(&aep, "action_id"))?;
                    let action_data = self.action_data(
                        req(ae, "action_data", &aep)?,
                        &at(&aep, "action_data"),
                        action,
                    )?;
                    let priority = match get(e, "priority") {
                        Some(v) => as_int(v, &at(&p, "priority"))? as i32,
                        None => 0,
                    };
                    out.push(ConstEntry {
                        key: ck,
                        action,
                        action_data,
                        priority,
                    });
                }
                Some(out)
            }
        };

        Ok(Table {
            name,
            id,
            match_type,
            table_type,
            key,
            actions,
            next_tables,
            base_default_next,
            max_size,
            with_counters,
            support_timeout,
            direct_meter,
            default_entry,
            action_profile,
            entries,
        })
    }

    fn checksums(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::new("checksum");
        for (i, c) in arr(root, "checksums", "")?.iter().enumerate() {
            let path = at("/checksums", i);
            let (name, id) = name_id(c, &path)?;
            u.check(&name, id, &path)?;
            let target = self.field_ref(req(c, "target", &path)?, &at(&path, "target"))?;
            let ct = match get(c, "type") {
                Some(v) => as_str(v, &at(&path, "type"))?,
                None => Cow::Borrowed("generic"),
            };
            let checksum_type = match &*ct {
                "generic" => ChecksumType::Generic,
                "ipv4" => ChecksumType::Ipv4,
                other => {
                    return err(
                        &at(&path, "type"),
                        format!("Invalid checksum type '{other}'"),
                    )
                }
            };
            let calculation = match (checksum_type, get(c, "calculation")) {
                (_, Some(v)) => Some(lookup(
                    &self.n.calcs,
                    "calculation",
                    &as_str(v, &at(&path, "calculation"))?,
                    &at(&path, "calculation"),
                )?),
                (ChecksumType::Generic, None) => {
                    return err(&path, "missing required key 'calculation'")
                }
                (ChecksumType::Ipv4, None) => None,
            };
            let update = opt_bool(c, "update", true, &path)?;
            let verify = opt_bool(c, "verify", true, &path)?;
            let if_cond = match get(c, "if_cond") {
                None => None,
                Some(e) => Some(self.expr_body_or_tv(e, &at(&path, "if_cond"), None)?),
            };
            self.p.checksums.push(Checksum {
                name,
                id,
                target,
                checksum_type,
                calculation,
                update,
                verify,
                if_cond,
            });
        }
        Ok(())
    }

    fn learn_lists(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::ids_only("learn list");
        for (i, l) in arr(root, "learn_lists", "")?.iter().enumerate() {
            let path = at("/learn_lists", i);
            let (name, id) = name_id(l, &path)?;
            u.check(&name, id, &path)?;
            let mut elements = Vec::new();
            for (j, e) in arr(l, "elements", &path)?.iter().enumerate() {
                let p = at(&at(&path, "elements"), j);
                let t = req_str(e, "type", &p)?;
                if t != "field" {
                    return err(&p, format!("Invalid entry type '{t}' in learn list"));
                }
                elements.push(self.field_ref(req(e, "value", &p)?, &at(&p, "value"))?);
            }
            self.p.learn_lists.push(LearnList { name, id, elements });
        }
        Ok(())
    }

    fn field_lists(&mut self, root: &Value) -> R<()> {
        let mut u = Uniq::ids_only("field list");
        for (i, l) in arr(root, "field_lists", "")?.iter().enumerate() {
            let path = at("/field_lists", i);
            let (name, id) = name_id(l, &path)?;
            u.check(&name, id, &path)?;
            let mut elements = Vec::new();
            for (j, e) in arr(l, "elements", &path)?.iter().enumerate() {
                let p = at(&at(&path, "elements"), j);
                let t = req_str(e, "type", &p)?;
                elements.push(match &*t {
                    "field" => FieldListElem::Field(
                        self.field_ref(req(e, "value", &p)?, &at(&p, "value"))?,
                    ),
                    "hexstr" => {
                        let bitwidth = req_width(e, "bitwidth", &p)?;
                        let v = value_int(req(e, "value", &p)?, &at(&p, "value"))?;
                        FieldListElem::Const {
                            value: v.to_bytes(bitwidth),
                            bitwidth,
                        }
                    }
                    other => return err(&p, format!("Invalid entry type '{other}' in field list")),
                });
            }
            self.p.field_lists.push(FieldList { name, id, elements });
        }
        Ok(())
    }

    fn force_arith(&mut self, root: &Value) -> R<()> {
        for (i, f) in arr(root, "force_arith", "")?.iter().enumerate() {
            self.field_ref(f, &at("/force_arith", i))?;
        }
        Ok(())
    }

    fn config_options(&mut self, root: &Value) -> R<()> {
        match get(root, "config_options") {
            None => Ok(()),
            Some(Value::Object(m)) => {
                // BMv2: `it->asString()` for each member.
                for (k, v) in m {
                    let s = as_str(v, &at("/config_options", k))?.into_owned();
                    self.p.config_options.push((k.clone(), s));
                }
                Ok(())
            }
            Some(_) => err("/config_options", "'config_options' must be an object"),
        }
    }
}

/// `source_info` is only for log messages: read leniently (jsoncpp conversions, anything
/// they refuse is left empty).
fn source_info(v: &Value) -> SourceInfo {
    let s = |k: &str| {
        v.get(k)
            .and_then(|x| jsoncpp::as_string(x).ok())
            .map(|x| x.into_owned())
            .unwrap_or_default()
    };
    let n = |k: &str| {
        v.get(k)
            .and_then(|x| jsoncpp::as_uint(x).ok())
            .map_or(0, i64::from)
    };
    SourceInfo {
        filename: s("filename"),
        line: n("line"),
        column: n("column"),
        source_fragment: s("source_fragment"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_checks() {
        assert!(load(r#"{"__meta__": {"version": [2, 24]}}"#).is_ok());
        assert!(load(r#"{"__meta__": {"compiler": "x"}}"#).is_ok());
        let e = load(r#"{"__meta__": {"version": [3, 0]}}"#).unwrap_err();
        assert!(e.message.contains("major version number of 3"), "{e}");
        let e = load(r#"{"__meta__": {"version": [2, 25]}}"#).unwrap_err();
        assert!(e.message.contains("2.25"), "{e}");
        let e = load(r#"{"__meta__": {"version": [2]}}"#).unwrap_err();
        assert!(e.message.contains("array of size 2"));
        assert!(load("[]").is_err());
        assert!(load("{").is_err());
    }

    #[test]
    fn core_errors_are_added_after_declared_ones() {
        let p = load(r#"{"errors": [["NoError", 1], ["Custom", 5]]}"#).unwrap();
        assert_eq!(p.error_value("NoError"), Some(1));
        assert_eq!(p.error_value("PacketTooShort"), Some(6));
        assert_eq!(p.error_value("ParserInvalidArgument"), Some(11));
        assert!(load(r#"{"errors": [["A", 1], ["B", 1]]}"#).is_err());
    }

    #[test]
    fn references_are_checked_with_paths() {
        let j = r#"{"header_types": [{"name": "t", "id": 0, "fields": [["a", 8]]}],
                    "headers": [{"name": "h", "id": 0, "header_type": "t", "metadata": false},
                                {"name": "g", "id": 1, "header_type": "nope", "metadata": false}]}"#;
        let e = load(j).unwrap_err();
        assert_eq!(e.path, "/headers/1");
        assert_eq!(
            e.message,
            "Invalid reference to object of type 'header type' with name 'nope'"
        );
        let j = r#"{"header_types": [{"name": "t", "id": 0, "fields": [["a", 8]]}],
                    "headers": [{"name": "h", "id": 0, "header_type": "t", "metadata": false},
                                {"name": "h2", "id": 0, "header_type": "t", "metadata": false}]}"#;
        assert!(load(j).unwrap_err().message.contains("same id 0"));
    }

    #[test]
    fn hash_names() {
        assert!(known_hash_algorithm("crc16"));
        assert!(known_hash_algorithm("crc_32c"));
        assert!(known_hash_algorithm(
            "poly_0x11021_init_0xffff_xout_0x0_not_rev"
        ));
        assert!(known_hash_algorithm("poly_0x104c11db7"));
        assert!(!known_hash_algorithm("random"));
        assert!(!known_hash_algorithm("poly_0x11021_lsb"));
        assert!(!known_hash_algorithm("poly_0x1021"));
    }

    #[test]
    fn unknown_primitive_and_arity() {
        let j = r#"{"actions": [{"name": "a", "id": 0, "runtime_data": [], "primitives": [{"op": "frob", "parameters": []}]}]}"#;
        let e = load(j).unwrap_err();
        assert_eq!(e.path, "/actions/0/primitives/0/op");
        assert_eq!(e.message, "Unknown primitive action: frob");
        let j = r#"{"actions": [{"name": "a", "id": 0, "runtime_data": [], "primitives": [{"op": "drop", "parameters": [{"type":"hexstr","value":"0x1"}]}]}]}"#;
        assert!(load(j)
            .unwrap_err()
            .message
            .contains("expected 0 but got 1"));
        let j = r#"{"actions": [{"name": "a", "id": 0, "runtime_data": [], "primitives": [{"op": "truncate", "parameters": [{"type":"runtime_data","value":0}]}]}]}"#;
        assert!(load(j)
            .unwrap_err()
            .message
            .contains("action only has 0 parameter(s)"));
    }
}
