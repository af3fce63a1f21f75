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
