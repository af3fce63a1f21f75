//! The loader reads every member the way simple_switch does (jsoncpp's `asBool`, `asInt`,
//! `asUInt`, `asString`, a missing member as null, comments and trailing text allowed): each
//! fixture JSON rewritten into the other shapes BMv2 accepts loads to the very same model,
//! and shapes BMv2 refuses are refused with jsoncpp's words and the JSON path.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

fn fixtures() -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/fixtures/bmv2");
    if p.is_dir() {
        Some(p)
    } else {
        println!("skipping: {} not found", p.display());
        None
    }
}

fn json_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

/// Every fixture that loads, as (name, text, parsed JSON).
fn loadable() -> Vec<(String, String, Value)> {
    let Some(dir) = fixtures() else {
        return Vec::new();
    };
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        if tern_model::load(&text).is_ok() {
            let v: Value = serde_json::from_str(&text).unwrap();
            out.push((f.display().to_string(), text, v));
        }
    }
    assert!(out.len() >= 40, "fixtures that load: {}", out.len());
    out
}

/// Apply `f` to every value in `v`, with its JSON pointer.
fn walk(v: &mut Value, path: &str, f: &mut dyn FnMut(&str, &mut Value)) {
    match v {
        Value::Array(a) => {
            for (i, x) in a.iter_mut().enumerate() {
                walk(x, &format!("{path}/{i}"), f);
            }
        }
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                walk(x, &format!("{path}/{k}"), f);
            }
        }
        _ => {}
    }
    f(path, v);
}

fn same_model(name: &str, original: &str, mutated: &Value, what: &str) {
    let a = tern_model::load(original).unwrap();
    let text = serde_json::to_string_pretty(mutated).unwrap();
    let b = tern_model::load(&text).unwrap_or_else(|e| panic!("{name} with {what}: {e}"));
    assert!(a == b, "{name} with {what}: a different model");
}

/// `asBool`: every JSON boolean written as 1/0 (what p4c now writes for `bool` fields' `signed`
/// flag), and as the reals 0.5/0.0.
#[test]
fn booleans_as_numbers() {
    for (name, text, v) in loadable() {
        let mut ints = v.clone();
        let mut n = 0;
        walk(&mut ints, "", &mut |_, x| {
            if let Value::Bool(b) = x {
                *x = json!(*b as u8);
                n += 1;
            }
        });
        same_model(&name, &text, &ints, "booleans as 0/1");
        let mut reals = v.clone();
        walk(&mut reals, "", &mut |_, x| {
            if let Value::Bool(b) = x {
                *x = json!(if *b { 0.5 } else { 0.0 });
            }
        });
        same_model(&name, &text, &reals, "booleans as 0.5/0.0");
        let _ = n;
    }
}

/// `asInt`/`asUInt`: every integer written as a real (`8.0`); `asInt` truncates, so `8.5` too
/// wherever BMv2 reads an integer. Members BMv2 reads with `asString` (`config_options`) spell
/// the real differently and are left alone.
#[test]
fn integers_as_reals() {
    for (name, text, v) in loadable() {
        for frac in [0.0, 0.5] {
            let mut m = v.clone();
            walk(&mut m, "", &mut |path, x| {
                if path.starts_with("/config_options") || path.contains("/source_info") {
                    return;
                }
                if let Some(i) = x.as_i64() {
                    if x.is_number() {
                        let r = i as f64 + if i < 0 { -frac } else { frac };
                        *x = json!(r);
                    }
                }
            });
            same_model(&name, &text, &m, &format!("integers as reals (+{frac})"));
        }
    }
}

/// `asInt` of `true` is 1: a header field width of 1 given as `true`.
#[test]
fn true_as_a_width_of_one() {
    let base = json!({
        "header_types": [{"name": "h_t", "id": 0, "fields": [["a", 1], ["b", 7, false]]}],
        "headers": [{"name": "h", "id": 0, "header_type": "h_t", "metadata": false}]
    });
    let a = tern_model::load(&base.to_string()).unwrap();
    let mut alt = base.clone();
    alt["header_types"][0]["fields"][0][1] = json!(true);
    alt["header_types"][0]["fields"][1][2] = json!(0);
    alt["headers"][0]["metadata"] = json!(null);
    assert_eq!(tern_model::load(&alt.to_string()).unwrap(), a);
}

/// A missing member is null: `false` flags and `0` ids can be left out.
#[test]
fn defaults_can_be_left_out() {
    for (name, text, v) in loadable() {
        let mut m = v.clone();
        walk(&mut m, "", &mut |path, x| {
            if path.contains("/source_info") {
                return;
            }
            if let Value::Object(o) = x {
                o.retain(|k, val| {
                    !(matches!(
                        k.as_str(),
                        "metadata"
                            | "is_direct"
                            | "with_counters"
                            | "support_timeout"
                            | "action_const"
                            | "action_entry_const"
                    ) && *val == json!(false)
                        || k == "id" && *val == json!(0))
                });
            }
            // A field [name, width, false] is the same as [name, width].
            if let Value::Array(a) = x {
                if a.len() == 3 && a[0].is_string() && a[2] == json!(false) {
                    a.pop();
                }
            }
        });
        same_model(&name, &text, &m, "false flags and zero ids left out");
    }
}

/// `asString`: names given as numbers or booleans are spelled out. A header type named 7 is
/// the header type "7".
#[test]
fn numbers_as_names() {
    let spelled = json!({
        "header_types": [{"name": "7", "id": 0, "fields": [["true", 8]]}],
        "headers": [{"name": "h", "id": 0, "header_type": "7", "metadata": false}]
    });
    let a = tern_model::load(&spelled.to_string()).unwrap();
    let mut alt = spelled.clone();
    alt["header_types"][0]["name"] = json!(7);
    alt["header_types"][0]["fields"][0][0] = json!(true);
    alt["headers"][0]["header_type"] = json!(7);
    assert_eq!(tern_model::load(&alt.to_string()).unwrap(), a);
}

/// jsoncpp's reader: comments, trailing text and repeated keys (the last one wins).
#[test]
fn reader_extensions() {
    for (name, text, _) in loadable().into_iter().take(8) {
        let commented = format!("// {name}\n/* a BMv2 program */ {text}\n// end\ntrailing text");
        let a = tern_model::load(&text).unwrap();
        assert_eq!(tern_model::load(&commented).unwrap(), a, "{name}");
    }
    let two = r#"{"header_types": [{"name": "x", "name": "h_t", "id": 0, "fields": [["a", 8]]}]}"#;
    let p = tern_model::load(two).unwrap();
    assert_eq!(p.header_types[0].name, "h_t");
}

fn rejected(v: Value, path: &str, msg: &str) {
    let e = tern_model::load(&v.to_string()).unwrap_err();
    assert_eq!((e.path.as_str(), e.message.as_str()), (path, msg), "{v}");
}

/// Shapes BMv2 refuses (jsoncpp throws) are refused with jsoncpp's message and the path.
#[test]
fn refused_shapes_name_the_path() {
    let base = json!({
        "header_types": [{"name": "h_t", "id": 0, "fields": [["a", 8, false]]}],
        "headers": [{"name": "h", "id": 0, "header_type": "h_t", "metadata": false}],
        "register_arrays": [{"name": "r", "id": 0, "size": 4, "bitwidth": 8}]
    });
    assert!(tern_model::load(&base.to_string()).is_ok());
    let with = |ptr: &str, x: Value| {
        let mut v = base.clone();
        *v.pointer_mut(ptr).unwrap() = x;
        v
    };
    rejected(
        with("/header_types/0/fields/0/2", json!("yes")),
        "/header_types/0/fields/0/2",
        "Value is not convertible to bool.",
    );
    rejected(
        with("/header_types/0/fields/0/1", json!("8")),
        "/header_types/0/fields/0/1",
        "Value is not convertible to Int.",
    );
    rejected(
        with("/header_types/0/id", json!(2147483648u64)),
        "/header_types/0/id",
        "LargestInt out of Int range",
    );
    rejected(
        with("/header_types/0/id", json!(1e12)),
        "/header_types/0/id",
        "double out of Int range",
    );
    rejected(
        with("/headers/0/name", json!(["h"])),
        "/headers/0/name",
        "Type is not convertible to string",
    );
    rejected(
        with("/headers/0/metadata", json!({})),
        "/headers/0/metadata",
        "Value is not convertible to bool.",
    );
    rejected(
        with("/register_arrays/0/size", json!(-1)),
        "/register_arrays/0/size",
        "LargestInt out of UInt range",
    );
    rejected(
        with("/register_arrays/0/bitwidth", json!([8])),
        "/register_arrays/0/bitwidth",
        "Value is not convertible to Int.",
    );
    let e = tern_model::load("{\"headers\": [] /* never closed").unwrap_err();
    assert!(e.message.contains("unterminated /* comment"), "{e}");
}

/// jsoncpp reads up to 1000 nesting levels (serde_json's default stops at 128): a condition
/// of 150 nested `not`s (over 300 JSON levels) loads.
#[test]
fn deeply_nested_expressions_load() {
    let mut e = json!({"type": "bool", "value": true});
    for _ in 0..150 {
        e = json!({"type": "expression", "value": {"op": "not", "left": null, "right": e}});
    }
    let prog = json!({
        "pipelines": [{
            "name": "ingress", "id": 0, "init_table": "c", "tables": [], "action_profiles": [],
            "conditionals": [{"name": "c", "id": 0, "expression": e,
                              "true_next": null, "false_next": null}]
        }]
    });
    let text = serde_json::to_string(&prog).unwrap();
    let p = tern_model::load(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.pipelines[0].conditionals.len(), 1);
}
