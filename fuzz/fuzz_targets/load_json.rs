//! Any byte string given to the loader is either a program or an error; never a panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(mut sw) =
            tern_dataplane::Switch::from_json(text, tern_dataplane::SwitchOptions::default())
        {
            // What loads must also run a packet.
            let mut out = Vec::new();
            tern_runtime::PacketPath::process_packet(&mut sw, 0, &[0u8; 64], &mut out);
        }
    }
});
