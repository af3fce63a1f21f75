//! Every BMv2 fixture JSON goes through the loader: all but `one_extern.json` load (the
//! required-field check that rejects five more is simple_switch's, done by the data plane).

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

#[test]
fn all_fixtures_load_except_unknown_extern() {
    let Some(dir) = fixtures() else { return };
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    assert_eq!(files.len(), 41);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let r = tern_model::load(&text);
        if f.ends_with("one_extern.json") {
            let e = r.unwrap_err();
            assert_eq!(e.message, "Invalid reference to extern type 'DummyExtern'");
            assert_eq!(e.path, "/extern_instances/0");
        } else if let Err(e) = r {
            panic!("{}: {e}", f.display());
        }
    }
}

#[test]
fn simple_router_is_resolved() {
    let Some(dir) = fixtures() else { return };
    let text =
        std::fs::read_to_string(dir.join("targets/simple_router/simple_router.json")).unwrap();
    let p = tern_model::load(&text).unwrap();
    assert_eq!(p.version, Some((2, 0)));
    assert!(p.missing_required_field().is_none());
    let ingress = p.pipelines.iter().find(|p| p.name == "ingress").unwrap();
    let lpm = ingress
        .tables
        .iter()
        .find(|t| t.name == "ipv4_lpm")
        .unwrap();
    assert_eq!(lpm.match_type, tern_model::MatchKind::Lpm);
    assert_eq!(lpm.key.len(), 1);
    assert!(lpm.default_entry.is_none());
    let f = p.field_by_name("ipv4", "ttl").unwrap();
    assert_eq!(p.field_width(f), 8);
}

#[test]
fn every_fixture_round_trips_through_to_json() {
    let Some(dir) = fixtures() else { return };
    let mut files = Vec::new();
    json_files(&dir, &mut files);
    let mut n = 0;
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let Ok(mut p) = tern_model::load(&text) else {
            continue;
        };
        let written = tern_model::to_json(&p);
        let mut q = tern_model::load(&written)
            .unwrap_or_else(|e| panic!("{}: {e}\n{written}", f.display()));
        assert_eq!(q.version, Some((2, 23)));
        p.version = None;
        q.version = None;
        assert_eq!(p, q, "{}", f.display());
        n += 1;
    }
    assert_eq!(n, 40);
}

/// A minimal valid program with one table `t` (actions `a` id 0, `b` id 1) to mutate.
fn base() -> serde_json::Value {
    serde_json::json!({
        "header_types": [{"name": "h_t", "id": 0, "fields": [["f", 12], ["g", 2]]}],
        "headers": [{"name": "h", "id": 0, "header_type": "h_t", "metadata": false}],
        "parsers": [{"name": "parser", "id": 0, "init_state": "s", "parse_states": [{"name": "s", "id": 0,
            "parser_ops": [{"op": "extract", "parameters": [{"type": "regular", "value": "h"}]}],
            "transition_key": [{"type": "field", "value": ["h", "f"]}, {"type": "field", "value": ["h", "g"]}],
            "transitions": [{"type": "hexstr", "value": "0x0aba03", "mask": null, "next_state": null}]}]}],
        "actions": [{"name": "a", "id": 0, "runtime_data": [{"name": "p", "bitwidth": 8}], "primitives": []},
                    {"name": "b", "id": 1, "runtime_data": [], "primitives": []}],
        "pipelines": [{"name": "ingress", "id": 0, "init_table": "t", "action_profiles": [], "conditionals": [],
            "tables": [{"name": "t", "id": 0, "match_type": "exact", "type": "simple", "max_size": 4,
                "key": [{"match_type": "exact", "target": ["h", "f"], "mask": null}],
                "actions": ["a", "b"], "action_ids": [0, 1], "next_tables": {"a": null, "b": null},
                "with_counters": false, "support_timeout": false, "direct_meters": null}]}]
    })
}

fn load_err(v: &serde_json::Value) -> tern_model::LoadError {
    tern_model::load(&v.to_string()).expect_err("must be rejected")
}

#[test]
fn base_program_loads() {
    let p = tern_model::load(&base().to_string()).unwrap();
    assert_eq!(
        p.parsers[0].states[0].key_bytes, 3,
        "12-bit and 2-bit fields pad to 2 + 1 bytes"
    );
}

#[test]
fn next_tables_shapes_are_enforced() {
    let mut v = base();
    v["pipelines"][0]["tables"][0]["next_tables"] = serde_json::json!({"__HIT__": null});
    let e = load_err(&v);
    assert_eq!(e.path, "/pipelines/0/tables/0/next_tables");
    assert!(
        e.message.contains("either it does not have both of them"),
        "{e}"
    );
    v["pipelines"][0]["tables"][0]["next_tables"] = serde_json::json!({"a": null});
    assert!(load_err(&v)
        .message
        .contains("should have exactly 2 keys, one for each table action, but found 1keys."));
    v["pipelines"][0]["tables"][0]["next_tables"] = serde_json::json!({"a": null, "c": null});
    assert!(load_err(&v)
        .message
        .contains("should have key for action 'b'"));
    v["pipelines"][0]["tables"][0]["next_tables"] = serde_json::json!({"a": "nowhere", "b": null});
    assert!(load_err(&v)
        .message
        .contains("Invalid reference to object of type 'control node' with name 'nowhere'"));
}

#[test]
fn transition_widths_are_checked() {
    let mut v = base();
    // An odd digit count makes the first digit a byte of its own: 0xaba03 is 3 bytes.
    v["parsers"][0]["parse_states"][0]["transitions"][0]["value"] = serde_json::json!("0xaba03");
    assert!(tern_model::load(&v.to_string()).is_ok());
    v["parsers"][0]["parse_states"][0]["transitions"][0]["value"] = serde_json::json!("0x0aba");
    let e = load_err(&v);
    assert_eq!(e.path, "/parsers/0/parse_states/0/transitions/0");
    assert_eq!(
        e.message,
        "Parser transition value has incorrect width, expected width is 3 bytes but actual width is 2 bytes"
    );
    v["parsers"][0]["parse_states"][0]["transitions"][0]["value"] = serde_json::json!("0x0aba03");
    v["parsers"][0]["parse_states"][0]["transitions"][0]["mask"] = serde_json::json!("0xffff");
    assert!(load_err(&v)
        .message
        .starts_with("Parser transition mask has incorrect width"));
    // Unknown next_state is silently "accept"; a missing default accepts.
    v["parsers"][0]["parse_states"][0]["transitions"][0]["mask"] = serde_json::Value::Null;
    v["parsers"][0]["parse_states"][0]["transitions"][0]["next_state"] =
        serde_json::json!("nowhere");
    let p = tern_model::load(&v.to_string()).unwrap();
    assert_eq!(p.parsers[0].states[0].transitions[0].next, None);
}

#[test]
fn default_and_const_entries_are_checked() {
    let mut v = base();
    let t = "/pipelines/0/tables/0";
    v["pipelines"][0]["tables"][0]["default_entry"] =
        serde_json::json!({"action_id": 0, "action_data": []});
    let e = load_err(&v);
    assert_eq!(e.path, format!("{t}/default_entry/action_data"));
    assert_eq!(
        e.message,
        "Invalid number of arguments for action 'a': expected 1 but got 0"
    );
    v["pipelines"][0]["tables"][0]["default_entry"] = serde_json::json!({"action_id": 1});
    assert_eq!(
        load_err(&v).message,
        "'default_entry' of table 't' should have key 'action_data'"
    );
    v["pipelines"][0]["tables"][0]["default_entry"] =
        serde_json::json!({"action_id": 1, "action_data": []});
    v["pipelines"][0]["tables"][0]["entries"] = serde_json::json!([
        {"match_key": [{"match_type": "lpm", "key": "0x0001", "prefix_length": 3}],
         "action_entry": {"action_id": 1, "action_data": []}, "priority": 1}]);
    let e = load_err(&v);
    assert_eq!(e.path, format!("{t}/entries/0/match_key/0"));
    assert_eq!(
        e.message,
        "Invalid match type for field #0 in match key, expected exact but got lpm"
    );
    v["pipelines"][0]["tables"][0]["entries"] = serde_json::json!([
        {"match_key": [], "action_entry": {"action_id": 1, "action_data": []}, "priority": 1}]);
    assert_eq!(
        load_err(&v).message,
        "Invalid number of fields in match key, expected 1 but got 0"
    );
    v["pipelines"][0]["tables"][0]["entries"] = serde_json::json!([
        {"match_key": [{"match_type": "exact", "key": "0x0001"}], "action_entry": {"action_id": 1, "action_data": []}}]);
    let p = tern_model::load(&v.to_string()).unwrap();
    assert_eq!(
        p.pipelines[0].tables[0].max_size, 1,
        "entries win over max_size"
    );
    v["pipelines"][0]["tables"][0]["type"] = serde_json::json!("indirect");
    v["pipelines"][0]["tables"][0]["action_profile"] = serde_json::json!("nope");
    assert!(load_err(&v)
        .message
        .contains("Invalid reference to object of type 'action profile' with name 'nope'"));
    v["pipelines"][0]["tables"][0]["type"] = serde_json::json!("bogus");
    assert_eq!(load_err(&v).message, "Invalid table type 'bogus'");
}

#[test]
fn control_node_names_are_global_and_lpm_is_unique() {
    let mut v = base();
    v["pipelines"][0]["conditionals"] = serde_json::json!([{"name": "t", "id": 0, "true_next": null,
        "expression": {"type": "bool", "value": true}}]);
    assert_eq!(
        load_err(&v).message,
        "Duplicate objects of type 'control node' with name 't'"
    );
    let mut v = base();
    v["pipelines"][0]["tables"][0]["key"] = serde_json::json!([
        {"match_type": "lpm", "target": ["h", "f"], "mask": null},
        {"match_type": "lpm", "target": ["h", "g"], "mask": null}]);
    assert_eq!(
        load_err(&v).message,
        "Table 't' features 2 LPM match fields"
    );
    let mut v = base();
    v["pipelines"][0]["tables"][0]["key"][0]["target"] = serde_json::json!(["h", "zz"]);
    let e = load_err(&v);
    assert_eq!(e.message, "No field 'zz' can be found in header type 'h_t'");
    assert_eq!(e.path, "/pipelines/0/tables/0/key/0/target");
}

#[test]
fn syntax_errors_name_line_and_column_without_an_empty_path() {
    let e = tern_model::load("{\n  \"headers\": [,]\n}").unwrap_err();
    let msg = e.to_string();
    assert!(e.path.is_empty());
    assert!(!msg.starts_with(':'), "{msg}");
    assert!(msg.contains("line 2"), "{msg}");
}
