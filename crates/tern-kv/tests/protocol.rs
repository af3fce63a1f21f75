//! Round-trip and malformed-input tests of the wire protocol.

use tern_kv::protocol::*;
use tern_kv::rng::Rng;

fn random_message(op: Op, rng: &mut Rng, max_value: usize) -> Message {
    let l = op.layout();
    let mut key = [0u8; KEY_LEN];
    rng.fill(&mut key);
    let mut m = Message::new(op, Key(key));
    if l.value {
        let mut v = vec![0u8; rng.below(max_value as u64 + 1) as usize];
        rng.fill(&mut v);
        m.value = Some(v);
    }
    if l.seq {
        m = m.with_seq(rng.next_u64() as u32, rng.next_u64() as u32);
    }
    if l.inswitch {
        let r = rng.next_u64();
        m = m.with_inswitch(InSwitchHdr {
            snapshot_flag: r & 1 != 0,
            is_cached: r & 2 != 0,
            is_sampled: r & 4 != 0,
            client_sid: (r >> 8) as u16 & MAX_CLIENT_SID,
            hot_threshold: (r >> 24) as u16,
            hashval_for_cm: [
                r as u16,
                (r >> 16) as u16,
                (r >> 32) as u16,
                (r >> 48) as u16,
            ],
            snapshot_token: (r >> 13) as u32,
            hashval_for_seq: (r >> 40) as u16,
            idx: (r >> 5) as u16,
        });
    }
    if l.stat {
        let r = rng.next_u64();
        m = m.with_stat(r & 1 == 1, (r >> 8) as u16);
    }
    m.extra = l.extra.map(|k| match k {
        ExtraKind::Clone => Extra::Clone(CloneHdr {
            clonenum_for_pktloss: rng.next_u64() as u16,
            client_udpport: rng.next_u64() as u16,
            assignedseq: rng.next_u64() as u32,
        }),
        ExtraKind::Frequency => Extra::Frequency(rng.next_u64() as u32),
        ExtraKind::ValidValue => Extra::ValidValue(rng.next_u64() as u8),
    });
    if l.body {
        let mut b = vec![0u8; rng.below(64) as usize];
        rng.fill(&mut b);
        m.body = b;
    }
    m
}

#[test]
fn op_codes_are_distinct_and_round_trip() {
    let mut seen = std::collections::HashSet::new();
    for &op in Op::ALL {
        assert!(seen.insert(op.code()), "duplicate code {op}");
        assert_eq!(Op::from_code(op.code()), Some(op));
    }
    assert!(Op::ALL.len() >= 70);
    assert_eq!(Op::from_code(0xffff), None);
}

#[test]
fn presence_nibble_matches_farreach_parser() {
    // (op, value, seq, inswitch, stat) as listed in FarReach's parser comments.
    let cases = [
        (Op::GETREQ, false, false, false, false),
        (Op::PUTREQ, true, false, false, false),
        (Op::LOADREQ, true, false, false, false),
        (Op::DELREQ, false, false, false, false),
        (Op::GETRES, true, false, false, true),
        (Op::PUTRES, false, false, false, true),
        (Op::DELRES, false, false, false, true),
        (Op::PUTREQ_SEQ, true, true, false, false),
        (Op::DELREQ_SEQ, false, true, false, false),
        (Op::GETRES_SEQ, true, true, false, true),
        (Op::GETRES_LATEST_SEQ, true, true, false, true),
        (Op::GETREQ_INSWITCH, false, false, true, false),
        (Op::PUTREQ_INSWITCH, true, false, true, false),
        (Op::GETRES_LATEST_SEQ_INSWITCH, true, true, true, true),
        (Op::CACHE_POP_INSWITCH, true, true, true, true),
        (Op::NETCACHE_VALUEUPDATE, true, true, false, true),
        (Op::NETCACHE_DELREQ_SEQ_CACHED, false, true, false, false),
    ];
    for (op, v, s, i, st) in cases {
        let l = op.layout();
        assert_eq!((l.value, l.seq, l.inswitch, l.stat), (v, s, i, st), "{op}");
        assert_eq!(l.shadow, v || s || i || st, "{op}");
    }
    assert_eq!(
        Op::SETVALID_INSWITCH.layout().extra,
        Some(ExtraKind::ValidValue)
    );
    assert_eq!(
        Op::PUTREQ_SEQ_INSWITCH_CASE1.layout().extra,
        Some(ExtraKind::Clone)
    );
    assert_eq!(
        Op::CACHE_EVICT_LOADFREQ_INSWITCH_ACK.layout().extra,
        Some(ExtraKind::Frequency)
    );
}

#[test]
fn exact_bytes_of_common_messages() {
    let key = Key::from_id(0x0102_0304_0506_0708);
    let get = Message::new(Op::GETREQ, key).encode().unwrap();
    assert_eq!(get.len(), 18);
    assert_eq!(&get[..2], &[0x00, 0x30]);
    assert_eq!(&get[2..10], &[0; 8]);
    assert_eq!(&get[10..18], &[1, 2, 3, 4, 5, 6, 7, 8]);

    let put = Message::new(Op::PUTREQ, key)
        .with_value(*b"hello")
        .encode()
        .unwrap();
    // op 18 + vallen 2 + one 8-byte word + shadowtype 2
    assert_eq!(put.len(), 30);
    assert_eq!(&put[18..20], &[0, 5]);
    assert_eq!(&put[20..28], b"hello\0\0\0");
    assert_eq!(&put[28..30], &[0x00, 0x01]);

    let res = Message::new(Op::GETRES_SEQ, key)
        .with_value(vec![0xAA; 128])
        .with_seq(0x11223344, 7)
        .with_stat(true, 3)
        .encode()
        .unwrap();
    assert_eq!(res.len(), 18 + 2 + 128 + 2 + 8 + 4);
    assert_eq!(&res[148..150], &[0x00, 0x6b]);
    assert_eq!(&res[150..158], &[0x11, 0x22, 0x33, 0x44, 0, 0, 0, 7]);
    assert_eq!(&res[158..162], &[1, 0, 3, 0]);

    let mut h = InSwitchHdr {
        snapshot_flag: true,
        is_sampled: true,
        client_sid: 0x3FF,
        idx: 0xBEEF,
        ..Default::default()
    };
    h.hashval_for_cm[3] = 0x1234;
    let ins = Message::new(Op::GETREQ_INSWITCH, key)
        .with_inswitch(h)
        .encode()
        .unwrap();
    assert_eq!(ins.len(), 18 + 2 + 20);
    assert_eq!(&ins[20..22], &[0b1011_1111, 0b1111_1000]);
    assert_eq!(&ins[30..32], &[0x12, 0x34]);
    assert_eq!(&ins[38..40], &[0xBE, 0xEF]);
}

#[test]
fn every_op_round_trips_with_random_fields() {
    let mut rng = Rng::new(42);
    for &op in Op::ALL {
        for i in 0..200 {
            let max = if i % 2 == 0 {
                SWITCH_MAX_VALUE_LEN
            } else {
                MAX_VALUE_LEN
            };
            let m = random_message(op, &mut rng, max);
            let bytes = m.encode().unwrap_or_else(|e| panic!("{op}: {e}"));
            assert_eq!(bytes.len(), m.encoded_len(), "{op}");
            assert_eq!(&bytes[..2], &op.code().to_be_bytes());
            let back = Message::decode(&bytes).unwrap_or_else(|e| panic!("{op}: {e}"));
            assert_eq!(back, m, "{op}");
        }
    }
}

#[test]
fn value_boundaries() {
    let key = Key::from_id(1);
    for len in [0usize, 1, 7, 8, 9, 127, 128, 129, 1000, MAX_VALUE_LEN] {
        let m = Message::new(Op::PUTREQ, key).with_value(vec![3u8; len]);
        assert_eq!(m.fits_switch(), len <= SWITCH_MAX_VALUE_LEN);
        let b = m.encode().unwrap();
        assert_eq!(b.len(), 18 + 2 + len.div_ceil(8) * 8 + 2);
        assert_eq!(Message::decode(&b).unwrap(), m);
    }
    let too_big = Message::new(Op::PUTREQ, key).with_value(vec![0u8; MAX_VALUE_LEN + 1]);
    assert_eq!(
        too_big.encode(),
        Err(EncodeError::ValueTooLong {
            len: MAX_VALUE_LEN + 1
        })
    );
    // A declared length above the maximum is rejected before reading the words.
    let mut b = Message::new(Op::PUTREQ, key)
        .with_value(vec![1u8; 8])
        .encode()
        .unwrap();
    b[18..20].copy_from_slice(&((MAX_VALUE_LEN + 1) as u16).to_be_bytes());
    let e = Message::decode(&b).unwrap_err();
    assert_eq!(
        e,
        DecodeError::ValueTooLong {
            len: MAX_VALUE_LEN + 1,
            max: MAX_VALUE_LEN,
            offset: 18
        }
    );
    assert!(e.to_string().contains("byte 18"), "{e}");
}

#[test]
fn every_truncation_is_an_error_with_an_offset() {
    let mut rng = Rng::new(9);
    for &op in Op::ALL {
        let m = random_message(op, &mut rng, 40);
        let b = m.encode().unwrap();
        let min_len = if op.layout().body {
            b.len() - m.body.len()
        } else {
            b.len()
        };
        for cut in 0..min_len {
            match Message::decode(&b[..cut]) {
                Err(DecodeError::Truncated {
                    offset, need, have, ..
                }) => {
                    assert!(offset <= cut, "{op} cut {cut}");
                    assert_eq!(have, cut - offset, "{op} cut {cut}");
                    assert!(need > have);
                }
                other => panic!("{op} cut at {cut}: {other:?}"),
            }
        }
    }
}

#[test]
fn malformed_headers_are_rejected() {
    let key = Key::from_id(5);
    let e = Message::decode(&[0xff, 0xff, 0, 0]).unwrap_err();
    assert_eq!(
        e,
        DecodeError::UnknownOp {
            code: 0xffff,
            offset: 0
        }
    );
    assert!(e.to_string().contains("0xffff"));

    let mut b = Message::new(Op::PUTREQ, key)
        .with_value(*b"abc")
        .encode()
        .unwrap();
    let n = b.len();
    b[n - 1] = 0x03;
    assert_eq!(
        Message::decode(&b),
        Err(DecodeError::ShadowMismatch {
            op: 1,
            shadow: 3,
            offset: n - 2
        })
    );

    let mut b = Message::new(Op::PUTRES, key)
        .with_stat(true, 2)
        .encode()
        .unwrap();
    b[20] = 2;
    assert_eq!(
        Message::decode(&b),
        Err(DecodeError::BadStat {
            value: 2,
            offset: 20
        })
    );
    b[20] = 1;
    b[23] = 9;
    assert!(matches!(
        Message::decode(&b),
        Err(DecodeError::NonZeroPadding { offset: 23, .. })
    ));

    let mut b = Message::new(Op::GETREQ, key).encode().unwrap();
    b.extend_from_slice(&[1, 2, 3]);
    assert_eq!(
        Message::decode(&b),
        Err(DecodeError::TrailingBytes {
            op: 0x30,
            offset: 18,
            count: 3
        })
    );

    let mut b = Message::new(Op::GETREQ_INSWITCH, key)
        .with_inswitch(InSwitchHdr::default())
        .encode()
        .unwrap();
    b[21] |= 1;
    assert!(matches!(
        Message::decode(&b),
        Err(DecodeError::NonZeroPadding { offset: 21, .. })
    ));
}

#[test]
fn encode_rejects_inconsistent_messages() {
    let key = Key::from_id(5);
    let e = Message::new(Op::GETREQ, key)
        .with_value(*b"x")
        .encode()
        .unwrap_err();
    assert!(matches!(
        e,
        EncodeError::Layout {
            header: "value",
            expected: false,
            ..
        }
    ));
    assert!(e.to_string().contains("GETREQ (0x0030)"), "{e}");
    let e = Message::new(Op::PUTREQ, key).encode().unwrap_err();
    assert!(matches!(
        e,
        EncodeError::Layout {
            header: "value",
            expected: true,
            ..
        }
    ));
    let e = Message::new(Op::GETRES_SEQ, key)
        .with_value(*b"x")
        .with_seq(1, 0)
        .encode();
    assert!(matches!(
        e,
        Err(EncodeError::Layout {
            header: "stat_hdr",
            ..
        })
    ));
    let e = Message::new(Op::GETREQ, key).with_body(*b"x").encode();
    assert!(matches!(e, Err(EncodeError::Layout { header: "body", .. })));
    let e = Message::new(Op::GETREQ, key)
        .with_extra(Extra::Frequency(1))
        .encode();
    assert!(matches!(
        e,
        Err(EncodeError::Layout {
            header: "trailing header",
            ..
        })
    ));
    let e = Message::new(Op::SETVALID_INSWITCH, key)
        .with_inswitch(InSwitchHdr::default())
        .encode();
    assert!(matches!(
        e,
        Err(EncodeError::Layout {
            header: "trailing header",
            ..
        })
    ));
    let h = InSwitchHdr {
        client_sid: 1024,
        ..Default::default()
    };
    let e = Message::new(Op::GETREQ_INSWITCH, key)
        .with_inswitch(h)
        .encode();
    assert_eq!(e, Err(EncodeError::ClientSid { sid: 1024 }));
}

#[test]
fn random_bytes_never_panic_and_decoded_messages_reencode() {
    let mut rng = Rng::new(0xF00D);
    let mut ok = 0;
    for i in 0..200_000u32 {
        let len = rng.below(200) as usize;
        let mut b = vec![0u8; len];
        rng.fill(&mut b);
        if len >= 2 && i % 2 == 0 {
            // Half the inputs start with a real op code so the decoder gets past op_hdr.
            let op = Op::ALL[rng.below(Op::ALL.len() as u64) as usize];
            b[..2].copy_from_slice(&op.code().to_be_bytes());
            if len >= 20 && rng.below(2) == 0 {
                b[18..20].copy_from_slice(&(rng.below(140) as u16).to_be_bytes());
            }
        }
        if let Ok(m) = Message::decode(&b) {
            ok += 1;
            let again = m.encode().expect("a decoded message re-encodes");
            assert_eq!(Message::decode(&again).unwrap(), m);
        }
    }
    assert!(ok > 100, "only {ok} random inputs decoded");
}

#[test]
fn key_helpers() {
    let k = Key::from_id(0xDEAD_BEEF_0000_0001);
    assert_eq!(k.id(), 0xDEAD_BEEF_0000_0001);
    assert_eq!(&k.0[..8], &[0; 8]);
    assert_eq!(Key([0; 16]).crc32(), crc32_ieee(&[0; 16]));
    assert_eq!(
        format!("{:?}", Key::from_id(0xab)),
        format!("Key({}ab)", "0".repeat(30))
    );
}

/// Bitwise CRC-32 (IEEE, reflected, poly 0xEDB88320) as an independent reference.
fn crc32_ieee(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}
