//! Arbitrary packets on arbitrary ports through simple_router with its routes installed:
//! every packet runs to completion, outputs are bounded, the switch keeps forwarding.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::Mutex;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, PacketPath, Runtime};

const JSON: &str = include_str!(
    "../../../shared/fixtures/bmv2/targets/simple_switch_grpc/tests/testdata/simple_router.json"
);

fn switch() -> Switch {
    let mut sw = Switch::from_json(JSON, SwitchOptions::default()).expect("fixture loads");
    let tables: Vec<String> = sw
        .program()
        .pipelines
        .iter()
        .flat_map(|p| p.tables.iter().map(|t| t.name.clone()))
        .collect();
    // A catch-all route so packets reach every stage.
    for t in tables.iter().filter(|t| t.contains("ipv4_lpm")) {
        let _ = sw.mt_add_entry(
            t,
            &[MatchParam::Lpm { key: vec![0; 4], prefix_len: 0 }],
            "set_nhop",
            &[vec![10, 0, 0, 1], vec![0, 1]],
            None,
        );
    }
    sw
}

static SW: Mutex<Option<Switch>> = Mutex::new(None);

fuzz_target!(|data: &[u8]| {
    let mut guard = SW.lock().unwrap();
    let sw = guard.get_or_insert_with(switch);
    let (port, pkt) = match data.split_first() {
        Some((p, rest)) => (*p as u32, rest),
        None => (0, data),
    };
    let mut out = Vec::new();
    sw.process_packet(port, pkt, &mut out);
    assert!(out.len() <= 1, "unicast program produced {} packets", out.len());
});
