//! MADINC wire format (`tern_kv::madinc`): every op round-trips byte-exactly, the header layout
//! is the documented one, and malformed payloads (truncated at every length, trailing bytes,
//! oversized values, unknown ops, bad flags, random bytes) are refused with an error naming the
//! field and offset, never a panic.

use tern_kv::madinc::*;
use tern_kv::protocol::{Key, Op};
use tern_kv::rng::Rng;

fn all_messages() -> Vec<MadMessage> {
    let key = Key::from_id(0x0102_0304_0506_0708);
    let bodies = vec![
        MadBody::ReadRequest,
        MadBody::ReadReply {
            found: true,
            source: SOURCE_SWITCH,
            value: b"value-01".to_vec(),
        },
        MadBody::ReadReply {
            found: false,
            source: 3,
            value: vec![],
        },
        MadBody::WriteRequest {
            value: vec![0xab; 128],
        },
        MadBody::WriteRequest { value: vec![7; 13] },
        MadBody::WriteReply {
            stored: true,
            source: 1,
        },
        MadBody::HotReport {
            switch: 2,
            frequency: 9,
            id: None,
        },
        MadBody::HotReport {
            switch: 3,
            frequency: 0xFFFF,
            id: Some(0x0102_0304),
        },
        MadBody::Store {
            op: StoreOp::Insert,
            id: 77,
            switch: 1,
            slot: 3 * PAGE_VALUES + 5,
            value: b"abc".to_vec(),
        },
        MadBody::Store {
            op: StoreOp::Replace,
            id: 78,
            switch: 1,
            slot: 0,
            value: vec![],
        },
        MadBody::Store {
            op: StoreOp::Update,
            id: u32::MAX,
            switch: u16::MAX,
            slot: u32::MAX,
            value: vec![1; 64],
        },
        MadBody::Evict {
            id: 5,
            switch: 0,
            slot: 129,
        },
        MadBody::Arm {
            id: 7,
            switch: 1,
            slot: 130,
        },
        MadBody::Reply {
            id: 5,
            switch: 0,
            acked: MadOp::CONTROL_EVICT,
            status: ReplyStatus::OK,
        },
        MadBody::Reply {
            id: 6,
            switch: 0,
            acked: MadOp::PAGE_ALLOC,
            status: ReplyStatus::QUOTA,
        },
        MadBody::Page {
            alloc: true,
            id: 1,
            switch: 2,
            page: 40,
        },
        MadBody::Page {
            alloc: false,
            id: 2,
            switch: 2,
            page: 40,
        },
        MadBody::Tenant {
            add: true,
            id: 3,
            switch: 1,
            hot_threshold: 8,
        },
        MadBody::Tenant {
            add: false,
            id: 4,
            switch: 1,
            hot_threshold: 0,
        },
        MadBody::Reset { id: 9, switch: 2 },
    ];
    bodies
        .into_iter()
        .enumerate()
        .map(|(i, body)| MadMessage {
            tenant: 1000 + i as u16,
            tag: 0xdead_0000 | i as u32,
            key,
            body,
        })
        .collect()
}

#[test]
fn every_op_round_trips() {
    let msgs = all_messages();
    let mut seen: Vec<MadOp> = msgs.iter().map(|m| m.body.op()).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), MadOp::ALL.len(), "every op is exercised");
    for m in msgs {
        let bytes = m.encode().unwrap();
        assert!(is_madinc(&bytes));
        assert_eq!(MadMessage::decode(&bytes).unwrap(), m, "{bytes:02x?}");
    }
}

#[test]
fn op_codes_do_not_collide_with_the_kv_op_space() {
    for op in MadOp::ALL {
        assert!(Op::from_code(op.code()).is_none(), "{op} collides");
        assert_eq!(MadOp::from_code(op.code()), Some(*op));
    }
    for op in Op::ALL {
        assert!(MadOp::from_code(op.code()).is_none());
    }
}

#[test]
fn header_layout_is_the_documented_one() {
    let m = MadMessage {
        tenant: 0x1234,
        tag: 0xa1b2_c3d4,
        key: Key::from_id(0x0b),
        body: MadBody::WriteRequest {
            value: b"hello".to_vec(),
        },
    };
    let b = m.encode().unwrap();
    assert_eq!(&b[0..2], &[0x0e, 0x02]);
    assert_eq!(&b[2..4], &[0x12, 0x34]);
    assert_eq!(&b[4..8], &[0xa1, 0xb2, 0xc3, 0xd4]);
    assert_eq!(&b[8..24], &Key::from_id(0x0b).0);
    assert_eq!(&b[24..26], &[0, 5]);
    assert_eq!(&b[26..], b"hello\0\0\0");
    assert_eq!(b.len(), MADINC_HDR_LEN + 2 + 8);
}

#[test]
fn every_truncation_is_an_error_naming_a_field() {
    for m in all_messages() {
        let b = m.encode().unwrap();
        for n in 0..b.len() {
            let e = MadMessage::decode(&b[..n]).unwrap_err();
            assert!(
                matches!(e, MadError::Truncated { .. }),
                "{} cut at {n}: {e}",
                m.body.op()
            );
            assert!(e.to_string().contains("truncated"), "{e}");
        }
    }
    let e = MadMessage::decode(&[0x0e, 0x00, 0, 1]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "truncated madinc_hdr.tag at byte 4: need 4 bytes, have 0"
    );
}

#[test]
fn trailing_bytes_are_an_error() {
    for m in all_messages() {
        let mut b = m.encode().unwrap();
        let n = b.len();
        b.push(0);
        let e = MadMessage::decode(&b).unwrap_err();
        assert_eq!(
            e,
            MadError::TrailingBytes {
                op: m.body.op(),
                offset: n,
                count: 1
            }
        );
    }
}

#[test]
fn oversized_values_are_refused_both_ways() {
    let m = MadMessage {
        tenant: 1,
        tag: 2,
        key: Key::from_id(3),
        body: MadBody::WriteRequest {
            value: vec![0; 129],
        },
    };
    assert!(matches!(
        m.encode(),
        Err(MadError::ValueTooLong { len: 129, .. })
    ));
    let mut b = MadMessage {
        body: MadBody::WriteRequest {
            value: vec![0; 128],
        },
        ..m
    }
    .encode()
    .unwrap();
    b[24..26].copy_from_slice(&136u16.to_be_bytes());
    b.extend_from_slice(&[0; 8]);
    let e = MadMessage::decode(&b).unwrap_err();
    assert_eq!(
        e.to_string(),
        "value length 136 at byte 24 exceeds the MADINC maximum of 128 bytes"
    );
}

#[test]
fn unknown_ops_flags_and_acks_are_refused() {
    let mut b = all_messages()[0].encode().unwrap();
    b[0..2].copy_from_slice(&0x0e06u16.to_be_bytes());
    assert_eq!(
        MadMessage::decode(&b).unwrap_err().to_string(),
        "unknown MADINC op code 0x0e06 at byte 0"
    );
    // A FarReach GETREQ is not a MADINC message.
    b[0..2].copy_from_slice(&0x0030u16.to_be_bytes());
    assert!(!is_madinc(&b));
    assert!(matches!(
        MadMessage::decode(&b),
        Err(MadError::UnknownOp { code: 0x0030 })
    ));
    // stat 2 in a READ_REPLY.
    let mut b = all_messages()[1].encode().unwrap();
    b[24] = 2;
    assert_eq!(
        MadMessage::decode(&b).unwrap_err().to_string(),
        "read_reply.stat at byte 24 is 2, expected 0 or 1"
    );
    // "not found" with a value.
    b[24] = 0;
    assert!(matches!(
        MadMessage::decode(&b),
        Err(MadError::ValueWithoutItem { offset: 27, len: 8 })
    ));
    // CONTROL_REPLY acking a non-MADINC op.
    let reply = all_messages()
        .into_iter()
        .find(|m| m.body.op() == MadOp::CONTROL_REPLY)
        .unwrap();
    let mut b = reply.encode().unwrap();
    b[30..32].copy_from_slice(&0x0001u16.to_be_bytes());
    assert_eq!(
        MadMessage::decode(&b).unwrap_err(),
        MadError::UnknownAcked {
            code: 1,
            offset: 30
        }
    );
}

/// Fuzz-style: random payloads, and valid payloads with random bytes flipped, never panic, and
/// whatever decodes re-encodes to a payload that decodes to the same message.
#[test]
fn random_and_mutated_payloads_never_panic() {
    let mut rng = Rng::new(0x4d41_4449);
    let valid: Vec<Vec<u8>> = all_messages().iter().map(|m| m.encode().unwrap()).collect();
    let mut decoded = 0;
    for i in 0..50_000u64 {
        let buf: Vec<u8> = if i % 2 == 0 {
            let n = (rng.next_u64() % 200) as usize;
            let mut b: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            if n >= 2 {
                b[0] = 0x0e;
            }
            b
        } else {
            let mut b = valid[(rng.next_u64() as usize) % valid.len()].clone();
            for _ in 0..1 + rng.next_u64() % 3 {
                let at = (rng.next_u64() as usize) % b.len();
                b[at] = rng.next_u64() as u8;
            }
            b
        };
        if let Ok(m) = MadMessage::decode(&buf) {
            decoded += 1;
            let again = m.encode().unwrap();
            assert_eq!(MadMessage::decode(&again).unwrap(), m);
        }
    }
    assert!(decoded > 1000, "mutations of valid payloads mostly decode");
}
