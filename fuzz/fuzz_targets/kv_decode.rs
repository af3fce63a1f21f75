//! Arbitrary UDP payloads through the key-value protocol decoder (tern-kv): any byte string is
//! a message or a decode error, never a panic; what decodes re-encodes to the same length
//! (only value padding may differ) and decodes back to the same message.
#![no_main]
use libfuzzer_sys::fuzz_target;
use tern_kv::protocol::Message;

fuzz_target!(|data: &[u8]| {
    let Ok(m) = Message::decode(data) else {
        return;
    };
    let e = m.encode().expect("a decoded message encodes");
    assert_eq!(e.len(), data.len(), "{m:?}");
    assert_eq!(e.len(), m.encoded_len());
    let again = Message::decode(&e).expect("an encoded message decodes");
    assert_eq!(again, m);
});
