//! The benchmark driver against in-process servers on loopback.

use std::time::Duration;
use tern_kv::bench::{self, BenchConfig, DynamicConfig, Latency};
use tern_kv::router::Router;
use tern_kv::storage::StoreOptions;
use tern_kv::ycsb::Dynamic;
use tern_kv::ycsb::{generate, OpKind, WorkloadSpec};

fn small_store() -> StoreOptions {
    StoreOptions {
        block_cache: 4 << 20,
        write_buffer_size: 4 << 20,
        ..Default::default()
    }
}

#[test]
fn load_then_run_workloads_a_and_f_over_two_servers() {
    let dir = tempfile::tempdir().unwrap();
    let servers = bench::start_local_servers(dir.path(), 2, 2, 2, &small_store()).unwrap();
    let router = Router::new(bench::addrs(&servers)).unwrap();
    for (name, ops) in [("a", 1500i64), ("f", 1000)] {
        let mut cfg = BenchConfig {
            router: router.clone(),
            workload: WorkloadSpec::core(name, 400, ops).unwrap(),
            threads: 3,
            seed: 9,
            timeout: Duration::from_millis(500),
            retries: 5,
            target_rate: None,
            dynamic: None,
            preserve: None,
        };
        cfg.workload.value_len = 64;
        let load = bench::load(&cfg).unwrap();
        assert_eq!((load.records, load.errors), (400, 0));
        let r = bench::run(&cfg).unwrap();
        assert_eq!(r.operations, ops as u64);
        assert_eq!(r.errors, 0);
        assert_eq!(r.misses, 0, "every key was loaded");
        assert_eq!(r.latency.count, ops as u64);
        assert_eq!(r.timeline.iter().sum::<u64>(), ops as u64);
        assert!(r.throughput > 0.0);
        assert!(r.latency.p50_us <= r.latency.p99_us && r.latency.p99_us <= r.latency.max_us);
        // Per-server counts are exactly what the router says for the generated stream.
        let stream = generate(&cfg.workload, 9).unwrap();
        let mut want = [0u64; 2];
        for op in &stream {
            let n = if op.kind == OpKind::ReadModifyWrite {
                2
            } else {
                1
            };
            want[router.server_index(&op.key)] += n;
        }
        let got: Vec<u64> = r.per_server.iter().map(|l| l.requests).collect();
        assert_eq!(got, want);
        let mean = (want[0] + want[1]) as f64 / 2.0;
        assert!((r.imbalance - want[0].max(want[1]) as f64 / mean).abs() < 1e-12);
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["operations"], ops);
        assert!(r.summary().contains("throughput"));
    }
    // The servers really hold the records.
    let live: u64 = servers
        .iter()
        .map(|s| s.store().snapshot_live_count().unwrap())
        .sum();
    assert_eq!(live, 400);
    for s in servers {
        s.shutdown().unwrap();
    }
}

#[test]
fn percentiles_are_nearest_rank() {
    let mut v: Vec<u32> = (1..=1000).rev().collect();
    let l = Latency::from_samples(&mut v);
    assert_eq!(
        (l.p50_us, l.p90_us, l.p99_us, l.p999_us, l.max_us),
        (500, 900, 990, 999, 1000)
    );
    assert!((l.mean_us - 500.5).abs() < 1e-9);
    assert_eq!(Latency::from_samples(&mut []), Latency::default());
}

#[test]
fn bad_settings_are_errors() {
    let router = Router::parse("127.0.0.1:9").unwrap();
    let cfg = BenchConfig {
        router,
        workload: WorkloadSpec::core("c", 10, 10).unwrap(),
        threads: 0,
        seed: 0,
        timeout: Duration::from_millis(10),
        retries: 0,
        target_rate: None,
        dynamic: None,
        preserve: None,
    };
    assert!(bench::run(&cfg)
        .unwrap_err()
        .to_string()
        .contains("thread count 0"));
    let dir = tempfile::tempdir().unwrap();
    let e = bench::start_local_servers(dir.path(), 0, 1, 1, &small_store())
        .err()
        .unwrap();
    assert!(e.to_string().contains("local server count 0"));
}

#[test]
fn workload_d_reads_only_acknowledged_inserts() {
    let dir = tempfile::tempdir().unwrap();
    let servers = bench::start_local_servers(dir.path(), 2, 1, 2, &small_store()).unwrap();
    let mut cfg = BenchConfig {
        router: Router::new(bench::addrs(&servers)).unwrap(),
        workload: WorkloadSpec::core("d", 300, 3000).unwrap(),
        threads: 4,
        seed: 2,
        timeout: Duration::from_millis(500),
        retries: 5,
        target_rate: None,
        dynamic: None,
        preserve: None,
    };
    cfg.workload.value_len = 32;
    bench::load(&cfg).unwrap();
    let r = bench::run(&cfg).unwrap();
    assert_eq!(r.errors, 0);
    assert_eq!(r.misses, 0, "a read overtook the insert of its key");
    let live: u64 = servers
        .iter()
        .map(|s| s.store().snapshot_live_count().unwrap())
        .sum();
    let inserts = r.write_latency.count;
    assert!(inserts > 100);
    assert_eq!(live, 300 + inserts);
    for s in servers {
        s.shutdown().unwrap();
    }
}

#[test]
fn open_loop_paces_requests() {
    let dir = tempfile::tempdir().unwrap();
    let servers = bench::start_local_servers(dir.path(), 1, 1, 1, &small_store()).unwrap();
    let cfg = BenchConfig {
        router: Router::new(bench::addrs(&servers)).unwrap(),
        workload: WorkloadSpec::core("c", 100, 400).unwrap(),
        threads: 2,
        seed: 1,
        timeout: Duration::from_millis(500),
        retries: 3,
        target_rate: Some(1000.0),
        dynamic: None,
        preserve: None,
    };
    bench::load(&cfg).unwrap();
    let r = bench::run(&cfg).unwrap();
    assert_eq!(r.errors, 0);
    // 400 ops at 1000 ops/s take at least ~0.4 s, and throughput cannot exceed the target much.
    assert!(r.seconds >= 0.39, "{}", r.seconds);
    assert!(r.throughput < 1100.0, "{}", r.throughput);
    assert_eq!(r.target_rate, Some(1000.0));
    assert!(r.summary().contains("open loop at 1000 ops/s"));
    let mut bad = cfg.clone();
    bad.target_rate = Some(0.0);
    assert!(bench::run(&bad)
        .unwrap_err()
        .to_string()
        .contains("target rate"));
    for s in servers {
        s.shutdown().unwrap();
    }
}

#[test]
fn dynamic_hot_in_requests_only_loaded_keys() {
    let dir = tempfile::tempdir().unwrap();
    let servers = bench::start_local_servers(dir.path(), 2, 1, 1, &small_store()).unwrap();
    let mut cfg = BenchConfig {
        router: Router::new(bench::addrs(&servers)).unwrap(),
        workload: WorkloadSpec::core("a", 2000, 3000).unwrap(),
        threads: 2,
        seed: 4,
        timeout: Duration::from_millis(500),
        retries: 3,
        target_rate: None,
        dynamic: Some(DynamicConfig {
            pattern: Dynamic::HotIn,
            keys: 50,
            period_s: 0.002,
        }),
        preserve: None,
    };
    cfg.workload.value_len = 16;
    bench::load(&cfg).unwrap();
    let r = bench::run(&cfg).unwrap();
    assert_eq!(
        (r.errors, r.misses),
        (0, 0),
        "remapped keys are loaded keys"
    );
    assert_eq!(r.per_server.iter().map(|l| l.requests).sum::<u64>(), 3000);
    assert_eq!(
        serde_json::to_value(&r).unwrap()["dynamic"]["pattern"],
        "HotIn"
    );
    let live: u64 = servers
        .iter()
        .map(|s| s.store().snapshot_live_count().unwrap())
        .sum();
    assert_eq!(live, 2000, "updates only touched existing keys");
    cfg.dynamic = Some(DynamicConfig {
        pattern: Dynamic::Random,
        keys: 50,
        period_s: 0.0,
    });
    assert!(bench::run(&cfg)
        .unwrap_err()
        .to_string()
        .contains("dynamic period"));
    for s in servers {
        s.shutdown().unwrap();
    }
}

#[test]
fn server_rotation_measures_every_emulated_server_and_scales_by_the_bottleneck() {
    let dir = tempfile::tempdir().unwrap();
    let servers = bench::start_local_servers(dir.path(), 2, 1, 1, &small_store()).unwrap();
    let phys = [servers[0].addr(), servers[1].addr()];
    let mut cfg = BenchConfig {
        router: Router::new(vec![phys[0]]).unwrap(),
        workload: WorkloadSpec::core("a", 300, 2000).unwrap(),
        threads: 2,
        seed: 5,
        timeout: Duration::from_millis(500),
        retries: 5,
        target_rate: None,
        dynamic: None,
        preserve: None,
    };
    cfg.workload.value_len = 32;
    // Both physical servers hold every record.
    for p in phys {
        cfg.router = Router::new(vec![p]).unwrap();
        assert_eq!(bench::load(&cfg).unwrap().errors, 0);
    }
    let r = tern_kv::rotation::run(&cfg, 4, phys).unwrap();
    assert_eq!((r.errors, r.mismatches), (0, 0));
    assert_eq!(r.servers, 4);
    assert_eq!(r.iterations.len(), 4);
    assert_eq!(r.iterations[0].server, r.bottleneck);
    let mut seen: Vec<usize> = r.iterations.iter().map(|i| i.server).collect();
    seen.sort_unstable();
    assert_eq!(seen, vec![0, 1, 2, 3], "every emulated server runs once");
    // The shares are those of the generated stream under a 4-server router.
    let logical = Router::new(vec![phys[0]; 4]).unwrap();
    let mut want = [0u64; 4];
    for op in generate(&cfg.workload, 5).unwrap() {
        want[logical.server_index(&op.key)] += if op.kind == OpKind::ReadModifyWrite {
            2
        } else {
            1
        };
    }
    let total: u64 = want.iter().sum();
    for (s, w) in r.shares.iter().zip(want) {
        assert!((s - w as f64 / total as f64).abs() < 1e-12);
    }
    let b = (0..4).max_by_key(|&i| want[i]).unwrap();
    assert_eq!(r.bottleneck, b);
    // Closed loop: in each iteration the rotated server's rate is tied to the bottleneck's by
    // their request counts, so after rescaling the aggregate is exactly bottleneck rate / share.
    let agg = r.per_server_rate.iter().sum::<f64>();
    assert!((agg - r.aggregate_rate).abs() < 1e-6 * agg);
    assert!(
        (r.normalized - total as f64 / want[b] as f64).abs() < 1e-9,
        "{}",
        r.normalized
    );
    assert!(r.aggregate_rate > r.bottleneck_rate);
    assert!(tern_kv::rotation::run(&cfg, 1, phys).is_err());
    for s in servers {
        s.shutdown().unwrap();
    }
}
