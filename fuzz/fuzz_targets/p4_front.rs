//! Any text given to the P4 compiler is a program or diagnostics, never a panic; what compiles
//! is JSON the tern data plane loads and runs a packet through.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = tern_p4::compile_str(text, "fuzz.p4", &tern_p4::Options::default()) {
        let sw = tern_dataplane::Switch::from_json(&c.json, tern_dataplane::SwitchOptions::default());
        let mut sw = sw.unwrap_or_else(|e| panic!("compiled JSON rejected by the data plane: {e}"));
        let mut out = Vec::new();
        tern_runtime::PacketPath::process_packet(&mut sw, 0, &[0u8; 64], &mut out);
    }
});
