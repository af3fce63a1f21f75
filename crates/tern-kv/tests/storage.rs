//! RocksDB partition tests: sequence-checked writes, tombstones, snapshots, reopen.

use tern_kv::protocol::Key;
use tern_kv::rng::Rng;
use tern_kv::storage::{Record, Store, StoreOptions, WriteOutcome};

fn opts() -> StoreOptions {
    StoreOptions {
        block_cache: 1 << 20,
        write_buffer_size: 1 << 20,
        ..Default::default()
    }
}

#[test]
fn older_seq_never_overwrites_newer() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), 3, &opts()).unwrap();
    let k = Key::from_id(77);
    assert_eq!(
        s.write_checked(&k, Some(b"v10"), 10).unwrap(),
        WriteOutcome::Applied
    );
    assert_eq!(
        s.write_checked(&k, Some(b"v5"), 5).unwrap(),
        WriteOutcome::Stale { current: 10 }
    );
    assert_eq!(
        s.write_checked(&k, None, 9).unwrap(),
        WriteOutcome::Stale { current: 10 }
    );
    assert_eq!(
        s.get(&k).unwrap(),
        Some(Record {
            seq: 10,
            value: Some(b"v10".to_vec())
        })
    );
    assert_eq!(
        s.write_checked(&k, None, 11).unwrap(),
        WriteOutcome::Applied
    );
    // The tombstone keeps its seq, so an older put cannot resurrect the key.
    assert_eq!(
        s.write_checked(&k, Some(b"old"), 10).unwrap(),
        WriteOutcome::Stale { current: 11 }
    );
    assert_eq!(
        s.get(&k).unwrap(),
        Some(Record {
            seq: 11,
            value: None
        })
    );
    assert_eq!(
        s.write_checked(&k, Some(b"v12"), 12).unwrap(),
        WriteOutcome::Applied
    );
    assert_eq!(
        s.get(&k).unwrap().unwrap().value.as_deref(),
        Some(&b"v12"[..])
    );
}

#[test]
fn random_seq_order_keeps_the_maximum() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), 2, &opts()).unwrap();
    let mut rng = Rng::new(3);
    let mut max = std::collections::HashMap::new();
    for _ in 0..3000 {
        let k = Key::from_id(rng.below(50));
        let seq = rng.below(1000) as u32;
        let del = rng.below(4) == 0;
        let value = seq.to_be_bytes();
        let out = s
            .write_checked(&k, (!del).then_some(&value[..]), seq)
            .unwrap();
        let best = max.entry(k).or_insert((0u32, true));
        if seq >= best.0 {
            assert_eq!(out, WriteOutcome::Applied);
            *best = (seq, del);
        } else {
            assert_eq!(out, WriteOutcome::Stale { current: best.0 });
        }
        let rec = s.get(&k).unwrap().unwrap();
        assert_eq!(rec.seq, best.0, "seq went backwards for {k:?}");
    }
    for (k, (seq, del)) in max {
        let rec = s.get(&k).unwrap().unwrap();
        assert_eq!(rec.seq, seq);
        assert_eq!(rec.value.is_none(), del);
        if !del {
            assert_eq!(rec.value.unwrap(), seq.to_be_bytes());
        }
    }
}

#[test]
fn write_next_assigns_increasing_seqs_and_survives_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = Store::open(dir.path(), 4, &opts()).unwrap();
        for id in 0..200u64 {
            let k = Key::from_id(id);
            assert_eq!(s.write_next(&k, Some(&id.to_le_bytes())).unwrap(), 1);
            assert_eq!(s.write_next(&k, Some(&(id + 1).to_le_bytes())).unwrap(), 2);
        }
        for id in (0..200u64).step_by(2) {
            assert_eq!(s.write_next(&Key::from_id(id), None).unwrap(), 3);
        }
        // Dropped without flush: the WAL must bring everything back.
    }
    let s = Store::open(dir.path(), 4, &opts()).unwrap();
    for id in 0..200u64 {
        let rec = s.get(&Key::from_id(id)).unwrap().unwrap();
        if id % 2 == 0 {
            assert_eq!(
                rec,
                Record {
                    seq: 3,
                    value: None
                }
            );
        } else {
            assert_eq!(
                rec,
                Record {
                    seq: 2,
                    value: Some((id + 1).to_le_bytes().to_vec())
                }
            );
        }
    }
    assert_eq!(s.snapshot_live_count().unwrap(), 100);
    assert_eq!(s.write_next(&Key::from_id(0), Some(b"back")).unwrap(), 4);
}

#[test]
fn snapshot_is_consistent_and_partitions_split_keys() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::open(dir.path(), 4, &opts()).unwrap();
    for id in 0..400u64 {
        s.write_next(&Key::from_id(id), Some(b"x")).unwrap();
    }
    let sizes: Vec<usize> = s
        .all()
        .iter()
        .map(|p| p.snapshot().unwrap().len())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 400);
    assert!(
        sizes.iter().all(|&n| n > 50),
        "unbalanced partitions {sizes:?}"
    );
    let p = s.partition(&Key::from_id(1));
    let snap = p.snapshot().unwrap();
    // Writes after the snapshot do not show in it.
    s.write_next(&Key::from_id(1), Some(b"later")).unwrap();
    let rec = &snap.iter().find(|(k, _)| *k == Key::from_id(1)).unwrap().1;
    assert_eq!(rec.value.as_deref(), Some(&b"x"[..]));
    assert!(
        snap.windows(2).all(|w| w[0].0 < w[1].0),
        "snapshot not in key order"
    );
}

#[test]
fn bad_partition_counts_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = Store::open(dir.path(), 0, &opts()).err().unwrap();
    assert!(e.to_string().contains("partition count 0"), "{e}");
}
