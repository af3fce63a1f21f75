//! MADINC's control plane (`tern_kv::madinc_ctl`) driving three in-process tern switches that
//! run `p4/kv/madinc.p4` through the `Runtime` trait: the three allocation policies, quotas and
//! exhausted paths refused with clear errors and no change, tenants arriving and leaving at run
//! time (a departed tenant's packets are dropped, its pages reused by a newcomer who cannot read
//! the old items), no item cached twice, round-robin pages with LRU reuse, and isolation of two
//! tenants caching the same key — each checked by packets through the switches.

use tern_dataplane::switch::{Switch, SwitchOptions};
use tern_kv::madinc::{MadBody, MadMessage, SOURCE_SWITCH};
use tern_kv::madinc_ctl::{Controller, CtlError, Placement, Policy, TenantSpec};
use tern_kv::protocol::Key;
use tern_runtime::{MatchParam, MirroringSession, OutputPacket, PacketPath, Runtime};

const CLIENT_IP: [u8; 4] = [10, 77, 1, 1];
const STORE_IP: [u8; 4] = [10, 77, 2, 1];
const PAGES: u32 = 4;

fn switches(n: usize) -> Vec<Switch> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/kv/madinc.p4");
    let src = std::fs::read_to_string(path).unwrap();
    let c = tern_p4::compile_str(&src, path, &tern_p4::Options::default())
        .unwrap_or_else(|e| panic!("{e:?}"));
    (0..n)
        .map(|_| {
            let mut sw = Switch::from_json(&c.json, SwitchOptions::default()).unwrap();
            for (ip, port) in [(CLIENT_IP, 1u8), (STORE_IP, 2u8)] {
                sw.mt_add_entry(
                    "MadIngress.forward",
                    &[MatchParam::Exact(ip.to_vec())],
                    "MadIngress.to_port",
                    &[vec![0, port]],
                    None,
                )
                .unwrap();
            }
            sw
        })
        .collect()
}

fn spec(
    id: u16,
    secret: u32,
    hot_threshold: u16,
    quota: u32,
    pages: u32,
    policy: Policy,
) -> TenantSpec {
    TenantSpec {
        id,
        secret,
        hot_threshold,
        quota,
        pages,
        policy,
    }
}

fn rts(sws: &mut [Switch]) -> Vec<&mut dyn Runtime> {
    sws.iter_mut().map(|s| s as &mut dyn Runtime).collect()
}

/// A READ_REQUEST frame from the client to the store.
fn read(tenant: u16, tag: u32, key: Key) -> Vec<u8> {
    frame(&MadMessage {
        tenant,
        tag,
        key,
        body: MadBody::ReadRequest,
    })
}

/// A MADINC message in a UDP frame from the client to the store.
fn frame(m: &MadMessage) -> Vec<u8> {
    let payload = m.encode().unwrap();
    let mut f = vec![2, 0x77, 0, 0, 0, 2, 2, 0x77, 0, 0, 0, 1, 8, 0];
    let total = 28 + payload.len() as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&CLIENT_IP);
    f.extend_from_slice(&STORE_IP);
    f.extend_from_slice(&8888u16.to_be_bytes());
    f.extend_from_slice(&1152u16.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&payload);
    f
}

/// What a switch does with a read: `Some(value)` answered by the switch, `None` passed on to
/// the store, `Err(())` dropped.
fn ask(sw: &mut Switch, tenant: u16, tag: u32, key: Key) -> Result<Option<Vec<u8>>, ()> {
    let mut out: Vec<OutputPacket> = Vec::new();
    sw.process_packet(1, &read(tenant, tag, key), &mut out);
    match out.as_slice() {
        [] => Err(()),
        [o] if o.port == 2 => Ok(None),
        [o] if o.port == 1 => {
            let m = MadMessage::decode(&o.data[42..]).unwrap();
            assert_eq!((m.tenant, m.key), (tenant, key));
            match m.body {
                MadBody::ReadReply {
                    found: true,
                    source: SOURCE_SWITCH,
                    value,
                } => Ok(Some(value)),
                b => panic!("unexpected reply {b:?}"),
            }
        }
        o => panic!("unexpected outputs {o:?}"),
    }
}

fn owner(sw: &Switch, page: u32) -> u64 {
    sw.register_read("MadIngress.page_owner_reg", page).unwrap()
}

#[test]
fn policies_place_pages_near_client_near_store_or_evenly() {
    let mut sws = switches(3);
    let mut c = Controller::new(&[PAGES; 3]);
    c.add_tenant(
        &mut rts(&mut sws),
        spec(1, 0x1111, 2, 8, 3, Policy::NearClient),
    )
    .unwrap();
    c.add_tenant(
        &mut rts(&mut sws),
        spec(2, 0x2222, 2, 8, 3, Policy::NearStore),
    )
    .unwrap();
    c.add_tenant(
        &mut rts(&mut sws),
        spec(3, 0x3333, 2, 8, 3, Policy::EvenSplit),
    )
    .unwrap();
    assert_eq!(c.pages_of(1), vec![vec![0, 1, 2], vec![], vec![]]);
    assert_eq!(c.pages_of(2), vec![vec![], vec![], vec![0, 1, 2]]);
    assert_eq!(c.pages_of(3), vec![vec![3], vec![0], vec![3]]);
    assert_eq!(c.free_pages(), vec![0, 3, 0]);
    // The switches hold the same page tables (owner = tenant + 1).
    assert_eq!((owner(&sws[0], 0), owner(&sws[0], 3)), (2, 4));
    assert_eq!((owner(&sws[1], 0), owner(&sws[1], 1)), (4, 0));
    assert_eq!((owner(&sws[2], 2), owner(&sws[2], 3)), (3, 4));
}

#[test]
fn quotas_and_exhausted_paths_are_refused_without_change() {
    let mut sws = switches(2);
    let mut c = Controller::new(&[PAGES; 2]);
    let e = c
        .add_tenant(&mut rts(&mut sws), spec(1, 7, 2, 2, 3, Policy::EvenSplit))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tenant 1 asked for 3 more pages but holds 0 of its quota of 2"
    );
    assert_eq!(sws[0].mt_get_num_entries("MadIngress.tenant").unwrap(), 0);
    c.add_tenant(&mut rts(&mut sws), spec(1, 7, 2, 8, 2, Policy::EvenSplit))
        .unwrap();
    // Run-time growth within the quota, then past it.
    c.alloc_pages(&mut rts(&mut sws), 1, 5, Policy::NearClient)
        .unwrap();
    assert!(matches!(
        c.alloc_pages(&mut rts(&mut sws), 1, 2, Policy::NearClient),
        Err(CtlError::Quota {
            held: 7,
            quota: 8,
            ..
        })
    ));
    let e = c
        .add_tenant(&mut rts(&mut sws), spec(2, 9, 2, 8, 2, Policy::NearStore))
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "tenant 2 asked for 2 pages but only 1 are free on the path"
    );
    assert_eq!(c.free_pages(), vec![0, 1]);
    assert_eq!(sws[1].mt_get_num_entries("MadIngress.tenant").unwrap(), 1);
    assert_eq!(
        c.add_tenant(&mut rts(&mut sws), spec(1, 7, 2, 8, 0, Policy::NearStore)),
        Err(CtlError::TenantExists(1))
    );
    assert!(matches!(
        c.insert(&mut rts(&mut sws[..1]), 1, Key::from_id(1), b"x"),
        Err(CtlError::PathMismatch { given: 1, path: 2 })
    ));
}

#[test]
fn tenants_arrive_and_leave_at_run_time() {
    let mut sws = switches(3);
    let mut c = Controller::new(&[PAGES; 3]);
    let k = Key::from_id(42);
    c.add_tenant(
        &mut rts(&mut sws),
        spec(1, 0xaaaa, 2, 4, 1, Policy::NearClient),
    )
    .unwrap();
    let p = c.insert(&mut rts(&mut sws), 1, k, b"one").unwrap();
    assert_eq!(p, Placement { switch: 0, slot: 0 });
    assert_eq!(ask(&mut sws[0], 1, 0xaaaa, k), Ok(Some(b"one".to_vec())));
    // A forged tag is dropped.
    assert_eq!(ask(&mut sws[0], 1, 0xaaab, k), Err(()));
    // Tenant 1 leaves: its packets are dropped as unknown on every switch, its page is free.
    c.remove_tenant(&mut rts(&mut sws), 1).unwrap();
    for sw in sws.iter_mut() {
        assert_eq!(ask(sw, 1, 0xaaaa, k), Err(()));
    }
    assert_eq!(owner(&sws[0], 0), 0);
    assert_eq!(c.free_pages(), vec![PAGES; 3]);
    assert_eq!(c.items(), 0);
    // Tenant 2 arrives and gets the same page; it cannot see tenant 1's old value.
    c.add_tenant(
        &mut rts(&mut sws),
        spec(2, 0xbbbb, 2, 4, 1, Policy::NearClient),
    )
    .unwrap();
    assert_eq!(c.pages_of(2)[0], vec![0]);
    assert_eq!(ask(&mut sws[0], 2, 0xbbbb, k), Ok(None));
    c.insert(&mut rts(&mut sws), 2, k, b"two").unwrap();
    assert_eq!(ask(&mut sws[0], 2, 0xbbbb, k), Ok(Some(b"two".to_vec())));
    // Tenant 1 comes back: a new tenant, no access to anything it had.
    c.add_tenant(
        &mut rts(&mut sws),
        spec(1, 0xcccc, 2, 4, 1, Policy::NearStore),
    )
    .unwrap();
    assert_eq!(ask(&mut sws[0], 1, 0xaaaa, k), Err(()));
    assert_eq!(ask(&mut sws[0], 1, 0xcccc, k), Ok(None));
    assert_eq!(
        c.remove_tenant(&mut rts(&mut sws), 9),
        Err(CtlError::UnknownTenant(9))
    );
}

#[test]
fn items_are_never_duplicated_and_pages_rotate_round_robin_with_lru_reuse() {
    let mut sws = switches(3);
    let mut c = Controller::new(&[PAGES; 3]);
    c.add_tenant(
        &mut rts(&mut sws),
        spec(5, 0x55, 2, 3, 3, Policy::EvenSplit),
    )
    .unwrap();
    // 3 pages of 128 slots: items 0..127 on switch 0, 128..255 on 1, 256..383 on 2.
    for i in 0..384u64 {
        let p = c
            .insert(&mut rts(&mut sws), 5, Key::from_id(i), &i.to_be_bytes())
            .unwrap();
        assert_eq!(p.switch, (i / 128) as usize, "item {i}");
    }
    let e = c
        .insert(&mut rts(&mut sws), 5, Key::from_id(130), b"again")
        .unwrap_err();
    assert_eq!(
        e,
        CtlError::Duplicate {
            tenant: 5,
            key: Key::from_id(130),
            switch: 1
        }
    );
    // Every item is answered by exactly one switch on the path.
    for i in (0..384u64).step_by(37) {
        let hits: Vec<usize> = (0..3)
            .filter(|&s| {
                ask(&mut sws[s], 5, 0x55, Key::from_id(i))
                    .unwrap()
                    .is_some()
            })
            .collect();
        assert_eq!(hits, vec![(i / 128) as usize], "item {i}");
    }
    // The next item takes switch 0's least recently used page again: its old items go.
    let p = c
        .insert(&mut rts(&mut sws), 5, Key::from_id(1000), b"new")
        .unwrap();
    assert_eq!(p.switch, 0);
    assert_eq!(c.placement(5, Key::from_id(0)), None);
    assert_eq!(ask(&mut sws[0], 5, 0x55, Key::from_id(0)), Ok(None));
    assert_eq!(
        ask(&mut sws[0], 5, 0x55, Key::from_id(1000)),
        Ok(Some(b"new".to_vec()))
    );
    assert_eq!(c.items(), 384 - 128 + 1);
    // Evicted explicitly: gone from the switch, and insertable again.
    assert!(c.evict(&mut rts(&mut sws), 5, Key::from_id(200)).unwrap());
    assert_eq!(ask(&mut sws[1], 5, 0x55, Key::from_id(200)), Ok(None));
    assert!(!c.evict(&mut rts(&mut sws), 5, Key::from_id(200)).unwrap());
}

#[test]
fn two_tenants_caching_the_same_key_each_read_their_own() {
    let mut sws = switches(1);
    let mut c = Controller::new(&[PAGES]);
    c.add_tenant(
        &mut rts(&mut sws),
        spec(1, 0x1, 2, 2, 1, Policy::NearClient),
    )
    .unwrap();
    c.add_tenant(
        &mut rts(&mut sws),
        spec(2, 0x2, 2, 2, 1, Policy::NearClient),
    )
    .unwrap();
    let k = Key::from_id(7);
    c.insert(&mut rts(&mut sws), 1, k, b"tenant one").unwrap();
    c.insert(&mut rts(&mut sws), 2, k, b"tenant two").unwrap();
    assert_eq!(
        ask(&mut sws[0], 1, 0x1, k),
        Ok(Some(b"tenant one".to_vec()))
    );
    assert_eq!(
        ask(&mut sws[0], 2, 0x2, k),
        Ok(Some(b"tenant two".to_vec()))
    );
    // Tenant 2 claiming tenant 1's id without its secret gets nothing.
    assert_eq!(ask(&mut sws[0], 1, 0x2, k), Err(()));
    // Evicting tenant 1's copy leaves tenant 2's.
    c.evict(&mut rts(&mut sws), 1, k).unwrap();
    assert_eq!(ask(&mut sws[0], 1, 0x1, k), Ok(None));
    assert_eq!(
        ask(&mut sws[0], 2, 0x2, k),
        Ok(Some(b"tenant two".to_vec()))
    );
}

/// End to end: a switch's HOT_REPORT (cloned to the controller's port) decodes with the Rust
/// decoder, the controller admits the item once (a second report, or one with a forged tag,
/// adds nothing), the next read is a hit, a write invalidates the copy and a refresh restores it.
#[test]
fn hot_reports_admit_items_once_and_writes_invalidate_them() {
    let mut sws = switches(2);
    for (i, sw) in sws.iter_mut().enumerate() {
        sw.mirroring_session_add(
            250,
            MirroringSession {
                port: Some(3),
                mgid: None,
            },
        )
        .unwrap();
        sw.mt_set_default_action(
            "MadIngress.mad_params",
            "MadIngress.set_switch",
            &[(i as u16 + 10).to_be_bytes().to_vec()],
        )
        .unwrap();
    }
    let mut c = Controller::new(&[PAGES; 2]);
    c.add_tenant(
        &mut rts(&mut sws),
        spec(1, 0x5ec, 2, 2, 2, Policy::EvenSplit),
    )
    .unwrap();
    let k = Key::from_id(99);
    // Two uncached reads through switch 1: the second is reported to port 3 as well.
    let mut reports = Vec::new();
    for _ in 0..3 {
        let mut out: Vec<OutputPacket> = Vec::new();
        sws[1].process_packet(1, &read(1, 0x5ec, k), &mut out);
        assert!(
            out.iter().any(|o| o.port == 2),
            "the read goes on to the store"
        );
        reports.extend(out.into_iter().filter(|o| o.port == 3));
    }
    assert_eq!(reports.len(), 1, "reported once");
    // A new detection period: the item, still hot, is reported once more.
    c.reset_sketches(&mut rts(&mut sws)).unwrap();
    let mut again = 0;
    for _ in 0..3 {
        let mut out: Vec<OutputPacket> = Vec::new();
        sws[1].process_packet(1, &read(1, 0x5ec, k), &mut out);
        again += out.iter().filter(|o| o.port == 3).count();
    }
    assert_eq!(again, 1);
    let report = MadMessage::decode(&reports[0].data[42..]).unwrap();
    assert_eq!(
        report,
        MadMessage {
            tenant: 1,
            tag: 0x5ec,
            key: k,
            body: MadBody::HotReport {
                switch: 11,
                frequency: 2,
                id: None,
            }
        }
    );
    let mut forged = report.clone();
    forged.tag = 0x5ed;
    assert_eq!(
        c.on_hot_report(&mut rts(&mut sws), &forged, b"x"),
        Err(CtlError::ForgedTag(1))
    );
    let p = c
        .on_hot_report(&mut rts(&mut sws), &report, b"hot value")
        .unwrap()
        .expect("admitted");
    assert_eq!(
        c.on_hot_report(&mut rts(&mut sws), &report, b"hot value"),
        Ok(None),
        "no second copy"
    );
    assert_eq!(c.items(), 1);
    let hits: Vec<usize> = (0..2)
        .filter(|&s| ask(&mut sws[s], 1, 0x5ec, k).unwrap().is_some())
        .collect();
    assert_eq!(hits, vec![p.switch]);
    // Write-through: the write passes on to the store and invalidates the copy.
    let w = frame(&MadMessage {
        tenant: 1,
        tag: 0x5ec,
        key: k,
        body: MadBody::WriteRequest {
            value: b"newer".to_vec(),
        },
    });
    let mut out: Vec<OutputPacket> = Vec::new();
    sws[p.switch].process_packet(1, &w, &mut out);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].port, &out[0].data), (2, &w));
    assert_eq!(ask(&mut sws[p.switch], 1, 0x5ec, k), Ok(None));
    // The write marked the slot: a value read before it (unarmed) is refused as stale; the
    // controller arms the slot, reads the store, then refreshes.
    assert!(matches!(
        c.refresh(&mut rts(&mut sws), 1, k, b"older"),
        Err(CtlError::Refused {
            status: tern_kv::madinc::ReplyStatus::STALE,
            ..
        })
    ));
    assert_eq!(ask(&mut sws[p.switch], 1, 0x5ec, k), Ok(None));
    assert!(c.arm(&mut rts(&mut sws), 1, k).unwrap());
    assert!(c.refresh(&mut rts(&mut sws), 1, k, b"newer").unwrap());
    assert_eq!(
        ask(&mut sws[p.switch], 1, 0x5ec, k),
        Ok(Some(b"newer".to_vec()))
    );
}

/// 150 tenants at once (ids above 255, past the thesis's 1-byte id), one page each spread over
/// three switches, all caching the same key: each reads its own value on its own switch, and
/// no tenant's packet with another tenant's id passes.
#[test]
fn a_hundred_and_fifty_tenants_share_three_switches() {
    let mut sws = switches(3);
    let mut c = Controller::new(&[64; 3]);
    let k = Key::from_id(1);
    let tenants: Vec<u16> = (0..150).map(|i| 1000 + i * 7).collect();
    let secret = |t: u16| 0x9e37_79b9u32.wrapping_mul(t as u32 + 1);
    for &t in &tenants {
        c.add_tenant(
            &mut rts(&mut sws),
            spec(t, secret(t), 2, 1, 1, Policy::EvenSplit),
        )
        .unwrap();
        c.insert(&mut rts(&mut sws), t, k, format!("value of {t}").as_bytes())
            .unwrap();
    }
    assert_eq!(c.free_pages(), vec![14; 3]);
    for (i, &t) in tenants.iter().enumerate() {
        let p = c.placement(t, k).unwrap();
        assert_eq!(p.switch, i % 3);
        assert_eq!(
            ask(&mut sws[p.switch], t, secret(t), k),
            Ok(Some(format!("value of {t}").into_bytes()))
        );
        let other = tenants[(i + 1) % tenants.len()];
        assert_eq!(ask(&mut sws[p.switch], t, secret(other), k), Err(()));
    }
}

/// Robustness and isolation under garbage: 20,000 frames (tenant 3's reads and writes of the
/// other tenants' key with up to three bytes changed, and random payloads) through a switch never
/// crash it, and never change or reveal tenant 1's or tenant 2's items (whose secrets differ from
/// tenant 3's in all four bytes, so no three-byte change forges them).
#[test]
fn mutated_and_random_frames_never_touch_other_tenants_items() {
    let mut sws = switches(1);
    let mut c = Controller::new(&[PAGES]);
    let secrets = [(1u16, 0x1111_1111u32), (2, 0x2222_2222), (3, 0x3333_3333)];
    for (t, s) in secrets {
        c.add_tenant(&mut rts(&mut sws), spec(t, s, 2, 1, 1, Policy::NearClient))
            .unwrap();
    }
    let k = Key::from_id(5);
    c.insert(&mut rts(&mut sws), 1, k, b"one's").unwrap();
    c.insert(&mut rts(&mut sws), 2, k, b"two's").unwrap();
    let templates = [
        read(3, 0x3333_3333, k),
        frame(&MadMessage {
            tenant: 3,
            tag: 0x3333_3333,
            key: k,
            body: MadBody::WriteRequest {
                value: b"three's".to_vec(),
            },
        }),
    ];
    let mut rng = tern_kv::rng::Rng::new(20);
    let mut out: Vec<OutputPacket> = Vec::new();
    for i in 0..20_000u32 {
        let mut f = templates[(i % 2) as usize].clone();
        if i % 5 == 4 {
            // A random MADINC payload after valid headers.
            let n = 42 + rng.below(200) as usize;
            f.truncate(44);
            while f.len() < n {
                f.push(rng.next_u64() as u8);
            }
        } else {
            for _ in 0..1 + rng.below(3) {
                let at = 42 + rng.below((f.len() - 42) as u64) as usize;
                f[at] = rng.next_u64() as u8;
            }
        }
        out.clear();
        sws[0].process_packet(1, &f, &mut out);
        for o in &out {
            // Anything the switch answers itself is tenant 3's, never another tenant's value.
            if o.port == 1 && o.data.len() > 42 {
                if let Ok(m) = MadMessage::decode(&o.data[42..]) {
                    if let MadBody::ReadReply { value, .. } = &m.body {
                        assert!(value != b"one's" && value != b"two's", "{m:?}");
                    }
                }
            }
        }
    }
    assert_eq!(
        ask(&mut sws[0], 1, 0x1111_1111, k),
        Ok(Some(b"one's".to_vec()))
    );
    assert_eq!(
        ask(&mut sws[0], 2, 0x2222_2222, k),
        Ok(Some(b"two's".to_vec()))
    );
    let dropped: u64 = (0..6)
        .map(|i| {
            sws[0]
                .counter_read("MadIngress.mad_dropped", i)
                .unwrap()
                .packets
        })
        .sum();
    assert!(
        dropped > 1000,
        "malformed and forged frames are counted: {dropped}"
    );
}
