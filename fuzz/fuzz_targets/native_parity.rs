//! Arbitrary packets through the native parser and emit loop and through the interpreter, on
//! several fixture programs: every outcome (error code, parsed length, validity, PHV bytes,
//! emitted bytes, also for a scrambled PHV) must agree.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tern_dataplane::compile::Engine;
use tern_dataplane::jit::compare_with_interpreter;

const FIXTURES: &[&str] = &[
    include_str!("../../../shared/fixtures/bmv2/targets/simple_switch_grpc/tests/testdata/simple_router.json"),
    include_str!("../../../shared/fixtures/bmv2/targets/l2_switch/l2_switch.json"),
    include_str!("../../../shared/fixtures/bmv2/targets/simple_switch/tests/testdata/packet_redirect.json"),
    include_str!("../../../shared/fixtures/bmv2/targets/simple_switch/tests/testdata/truncate.json"),
];

fn engines() -> &'static Vec<Engine> {
    static E: OnceLock<Vec<Engine>> = OnceLock::new();
    E.get_or_init(|| {
        FIXTURES
            .iter()
            .map(|j| Engine::compile(tern_model::load(j).expect("fixture loads")).expect("compiles"))
            .filter(|e| e.jit.is_some())
            .collect()
    })
}

fuzz_target!(|data: &[u8]| {
    let engines = engines();
    assert!(!engines.is_empty());
    let Some((which, pkt)) = data.split_first() else { return };
    let eng = &engines[*which as usize % engines.len()];
    if let Err(e) = compare_with_interpreter(eng, [pkt]) {
        panic!("{e}");
    }
});
