//! Bad input never crashes the engine: structurally mutated BMv2 JSON must load or be rejected
//! with an error (never a panic), and random packets on random ports through every loadable
//! fixture, with table defaults installed, must run to completion.
//!
//! Deterministic (fixed-seed) so a failure reproduces; the fuzz targets in `fuzz/` explore the
//! same properties without bounds.

use std::panic::{catch_unwind, AssertUnwindSafe};
mod common;
use common::{fixture_jsons, Rng};
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{PacketPath, Runtime};

/// Every node of a JSON value, as a path of indices/keys.
fn paths(v: &serde_json::Value, here: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    out.push(here.clone());
    match v {
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                here.push(i.to_string());
                paths(x, here, out);
                here.pop();
            }
        }
        serde_json::Value::Object(o) => {
            for (k, x) in o {
                here.push(k.clone());
                paths(x, here, out);
                here.pop();
            }
        }
        _ => {}
    }
}

fn node_mut<'a>(v: &'a mut serde_json::Value, path: &[String]) -> &'a mut serde_json::Value {
    path.iter().fold(v, |v, k| match v {
        serde_json::Value::Array(a) => &mut a[k.parse::<usize>().unwrap()],
        serde_json::Value::Object(o) => o.get_mut(k).unwrap(),
        _ => unreachable!(),
    })
}

/// One structural mutation: replace a node by a value of another type or an extreme value,
/// delete an object member, truncate an array, or duplicate an array element.
fn mutate(v: &mut serde_json::Value, rng: &mut Rng) {
    use serde_json::json;
    let mut all = Vec::new();
    paths(v, &mut Vec::new(), &mut all);
    let path = all[rng.below(all.len())].clone();
    let node = node_mut(v, &path);
    let replacements = [
        json!(null),
        json!(-1),
        json!(0),
        json!(1u64 << 40),
        json!(u64::MAX),
        json!(-9_223_372_036_854_775_807i64),
        json!(1.5),
        json!(""),
        json!("0x"),
        json!("zz"),
        json!("ffffffffffffffffffffffffffffffffffff"),
        json!([]),
        json!({}),
        json!(true),
        json!([0, 1]),
        json!({"name": "x", "id": 0}),
    ];
    match rng.below(4) {
        0 if node.is_object() && !node.as_object().unwrap().is_empty() => {
            let o = node.as_object_mut().unwrap();
            let k = o.keys().nth(rng.below(o.len())).unwrap().clone();
            o.remove(&k);
        }
        1 if node.is_array() && !node.as_array().unwrap().is_empty() => {
            let a = node.as_array_mut().unwrap();
            let n = rng.below(a.len());
            a.truncate(n);
        }
        2 if node.is_array() && !node.as_array().unwrap().is_empty() => {
            let a = node.as_array_mut().unwrap();
            let x = a[rng.below(a.len())].clone();
            a.push(x);
        }
        _ => *node = replacements[rng.below(replacements.len())].clone(),
    }
}

#[test]
fn mutated_json_is_rejected_or_loaded_never_a_panic() {
    let files = fixture_jsons();
    if files.is_empty() {
        println!("skipping: fixtures not found");
        return;
    }
    let mut rng = Rng(0x007E_570F_7E4E);
    let mut outcomes = (0usize, 0usize);
    let mut panics = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let base: serde_json::Value = serde_json::from_str(&text).unwrap();
        for round in 0..150 {
            let mut v = base.clone();
            for _ in 0..1 + rng.below(3) {
                mutate(&mut v, &mut rng);
            }
            let mutated = v.to_string();
            match catch_unwind(|| Switch::from_json(&mutated, SwitchOptions::default())) {
                Ok(Ok(mut sw)) => {
                    outcomes.0 += 1;
                    // A program that loads must also survive packets.
                    let r = catch_unwind(AssertUnwindSafe(|| {
                        let mut out = Vec::new();
                        for len in [0usize, 1, 14, 60, 200] {
                            let pkt: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                            sw.process_packet(rng.below(4) as u32, &pkt, &mut out);
                        }
                    }));
                    if r.is_err() {
                        panics.push(format!(
                            "{} round {round}: packet path panicked",
                            f.display()
                        ));
                    }
                }
                Ok(Err(e)) => {
                    outcomes.1 += 1;
                    assert!(!e.to_string().is_empty());
                }
                Err(_) => panics.push(format!("{} round {round}: loader panicked", f.display())),
            }
        }
        // Byte-level damage: truncations and garbage are JSON syntax errors, reported.
        let body = text.trim_end();
        for cut in [0, 1, body.len() / 2, body.len() - 1] {
            let cut = (0..=cut)
                .rev()
                .find(|&c| body.is_char_boundary(c))
                .unwrap_or(0);
            let r = catch_unwind(|| Switch::from_json(&body[..cut], SwitchOptions::default()));
            match r {
                Ok(Err(_)) => {}
                Ok(Ok(_)) => panics.push(format!("{}: truncated at {cut} loaded", f.display())),
                Err(_) => panics.push(format!("{}: truncated at {cut} panicked", f.display())),
            }
        }
    }
    println!("mutants loaded: {}, rejected: {}", outcomes.0, outcomes.1);
    assert!(panics.is_empty(), "{}", panics.join("\n"));
    // The mutator must actually produce both kinds of outcome, or the test proves nothing.
    assert!(outcomes.0 > 0 && outcomes.1 > 0);
}

#[test]
fn random_packets_through_every_fixture() {
    let files = fixture_jsons();
    if files.is_empty() {
        println!("skipping: fixtures not found");
        return;
    }
    let mut rng = Rng(0x000B_AD9A_C4E7);
    let mut loaded = 0;
    let mut failures = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let Ok(mut sw) = Switch::from_json(&text, SwitchOptions::default()) else {
            continue;
        };
        loaded += 1;
        // Install every table's first action as its default (with zeroed parameters) so
        // packets walk the whole pipeline rather than stopping at the first miss.
        let program = sw.program().clone();
        for p in &program.pipelines {
            for t in &p.tables {
                for &a in &t.actions {
                    let action = &program.actions[a as usize];
                    let data: Vec<Vec<u8>> = action
                        .runtime_data
                        .iter()
                        .map(|(_, w)| vec![0u8; (*w as usize).div_ceil(8)])
                        .collect();
                    if sw
                        .mt_set_default_action(&t.name, &action.name, &data)
                        .is_ok()
                    {
                        break;
                    }
                }
            }
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            let mut out = Vec::new();
            for _ in 0..300 {
                let len = match rng.below(4) {
                    0 => rng.below(16),
                    1 => 14 + rng.below(50),
                    _ => rng.below(1600),
                };
                let pkt: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                out.clear();
                sw.process_packet(rng.below(512) as u32, &pkt, &mut out);
            }
        }));
        if r.is_err() {
            failures.push(f.display().to_string());
        }
    }
    assert!(loaded >= 30, "only {loaded} fixtures loaded");
    assert!(failures.is_empty(), "packet path panicked on: {failures:?}");
}
