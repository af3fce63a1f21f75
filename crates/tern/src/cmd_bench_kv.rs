//! `tern bench PROG --kv`: a key-value workload for the cache programs of `p4/kv/`.
//!
//! Owns: installing `--kv-records` cached records the way the switch OS does (runtime register
//! writes and a `cache_lookup` entry per slot), generating key-value requests in the real wire
//! format (`tern_kv::protocol`) over a Zipf key set, running them through the switch in batches,
//! and checking replies: the first pass over the request pool checks every reply the switch
//! sends back against a model of the cache (each GET hit carries the value of the key's last
//! write), and the timed runs check the replies of every 1,024th batch the same way. Reports
//! the packet rate, the GET hit ratio and the rate of GETs answered by the switch.
//!
//! The client is `kv_sim::CLIENT_IP` behind port 0, one server `kv_sim::server_ip(0)` behind
//! port 1. With `--kv-hits-only` every request is a GET of a cached key (the cached-GET rate
//! alone, for profiling).

use crate::cmd_bench::{load, memory_kb, BenchArgs};
use crate::kv_sim::{self, CLIENT_IP};
use anyhow::Context as _;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Instant;
use tern_dataplane::{Switch, SwitchOptions};
use tern_kv::protocol::{Key, Message, Op, SERVER_BASE_PORT, SWITCH_MAX_VALUE_LEN};
use tern_kv::rng::Rng;
use tern_kv::ycsb::Zipfian;
use tern_runtime::{MatchParam, OutputPacket, PacketPath, Runtime};

/// Key-value workload options of `tern bench`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct KvBenchArgs {
    /// Run a key-value workload (for `p4/kv/*.p4`) instead of the generated L3 traffic.
    #[arg(long)]
    pub kv: bool,
    /// Records installed in the cache (the hottest keys, ids 1..=N), as the switch OS would.
    #[arg(long, default_value_t = 10_000, requires = "kv")]
    pub kv_records: u32,
    /// Keys requested (Zipf over ids 1..=K; the cached records are the K's hottest).
    #[arg(long, default_value_t = 1_000_000, requires = "kv")]
    pub kv_keys: u32,
    /// Zipf skew θ of the requests (0 < θ < 1).
    #[arg(long, default_value_t = 0.99, requires = "kv")]
    pub kv_zipf: f64,
    /// Fraction of GETs among the requests (the rest are PUTs).
    #[arg(long, default_value_t = 1.0, requires = "kv")]
    pub kv_get_ratio: f64,
    /// Value size in bytes (16..=128: the switch path).
    #[arg(long, default_value_t = 128, requires = "kv")]
    pub kv_value_size: usize,
    /// Requests in the pool the timed runs cycle through.
    #[arg(long, default_value_t = 65_536, requires = "kv")]
    pub kv_pool: usize,
    /// Only GETs of cached keys (Zipf over the cached records): the cached-GET rate alone.
    #[arg(long, requires = "kv")]
    pub kv_hits_only: bool,
}

const P: &str = "KvIngress.";
const CLIENT_PORT: u32 = 0;
const SERVER_PORT: u32 = 1;

/// The value of record `id` at write `version`: id and version, then a pattern of both, so a
/// reply's value says whose and which it is.
pub(crate) fn value_of(id: u64, version: u64, len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(&version.to_be_bytes());
    let mut x = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version;
    while v.len() < len {
        x = x.rotate_left(13).wrapping_add(0x6A09_E667_F3BC_C909);
        v.push(x as u8);
    }
    v.truncate(len);
    v
}

/// One request of the pool.
struct Req {
    frame: Vec<u8>,
    id: u64,
    /// `Some(version)` for a PUT.
    put: Option<u64>,
}

/// What a reply check found wrong, if anything.
fn check_reply(out: &OutputPacket, req: &Req, expect: u64, vsize: usize) -> Result<bool, String> {
    if out.port != CLIENT_PORT {
        return Ok(false);
    }
    let Some((_, _, dst, _, payload)) = kv_sim::parse(&out.data) else {
        return Err("a reply to the client is not IPv4/UDP".into());
    };
    if dst != CLIENT_IP {
        return Err(format!("reply addressed to {dst}, not the client"));
    }
    let m = Message::decode(payload).map_err(|e| format!("reply does not decode: {e}"))?;
    if m.key != Key::from_id(req.id) {
        return Err(format!(
            "reply for key {} to a request for {}",
            m.key.id(),
            req.id
        ));
    }
    match (req.put, m.op) {
        (None, Op::GETRES_SEQ) => {
            let want = value_of(req.id, expect, vsize);
            match m.value.as_deref() {
                Some(v) if v == want.as_slice() => Ok(true),
                Some(v) if v.len() >= 16 => Err(format!(
                    "GET of key {} answered with version {} of key {}, expected version {expect}",
                    req.id,
                    u64::from_be_bytes(v[8..16].try_into().unwrap_or_default()),
                    u64::from_be_bytes(v[..8].try_into().unwrap_or_default()),
                )),
                v => Err(format!("GET of key {} answered with {v:02x?}", req.id)),
            }
        }
        (Some(_), Op::PUTRES_SEQ) => Ok(false),
        (_, op) => Err(format!("unexpected reply {op} to key {}", req.id)),
    }
}

/// Installs `n` records (ids 1..=n, version 0) as the switch OS admits and fills them.
fn install_records(sw: &mut Switch, n: u32, vsize: usize) -> anyhow::Result<()> {
    let words = vsize.div_ceil(8);
    for idx in 0..n {
        let id = u64::from(idx) + 1;
        let mut v = value_of(id, 0, vsize);
        v.resize(words * 8, 0);
        for (i, w) in v.chunks(8).enumerate() {
            let w = u64::from_be_bytes(w.try_into().unwrap_or_default());
            sw.register_write(&format!("{P}val_reg"), idx * 16 + i as u32, w)?;
        }
        sw.register_write(&format!("{P}vallen_reg"), idx, vsize as u64)?;
        sw.register_write(&format!("{P}deleted_reg"), idx, 0)?;
        sw.register_write(&format!("{P}savedseq_reg"), idx, 1)?;
        sw.register_write(&format!("{P}frequency_reg"), idx, 0)?;
        sw.register_write(&format!("{P}latest_reg"), idx, 1)?;
        sw.mt_add_entry(
            &format!("{P}cache_lookup"),
            &[MatchParam::Exact(Key::from_id(id).0.to_vec())],
            &format!("{P}set_cached"),
            &[idx.to_be_bytes().to_vec()],
            None,
        )?;
        sw.register_write(&format!("{P}validvalue_reg"), idx, 1)?;
    }
    Ok(())
}

fn check_args(k: &KvBenchArgs, a: &BenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        (16..=SWITCH_MAX_VALUE_LEN).contains(&k.kv_value_size),
        "--kv-value-size {}: give 16 to {SWITCH_MAX_VALUE_LEN} (the switch path)",
        k.kv_value_size
    );
    anyhow::ensure!(k.kv_keys >= 1, "--kv-keys must be at least 1");
    anyhow::ensure!(
        k.kv_records <= k.kv_keys,
        "--kv-records {} is more than --kv-keys {}",
        k.kv_records,
        k.kv_keys
    );
    anyhow::ensure!(
        !k.kv_hits_only || k.kv_records >= 1,
        "--kv-hits-only needs at least one record"
    );
    anyhow::ensure!(
        k.kv_zipf > 0.0 && k.kv_zipf < 1.0,
        "--kv-zipf {}: give 0 < θ < 1",
        k.kv_zipf
    );
    anyhow::ensure!(
        (0.0..=1.0).contains(&k.kv_get_ratio),
        "--kv-get-ratio {}: give 0 to 1",
        k.kv_get_ratio
    );
    anyhow::ensure!(k.kv_pool >= 1, "--kv-pool must be at least 1");
    anyhow::ensure!(a.batch >= 1, "--batch must be at least 1");
    anyhow::ensure!(a.runs >= 1, "--runs must be at least 1");
    Ok(())
}

/// The pool of requests, and for each GET the version its hit must carry in the steady state
/// (the pool cycled: the last earlier write of the key in the pool, else its last write in the
/// pool, else 0) and in the first pass (earlier write, else 0).
fn make_pool(k: &KvBenchArgs) -> (Vec<Req>, Vec<u64>, Vec<u64>) {
    let mut rng = Rng::new(0x6b76_6265_6e63_6821);
    let span = if k.kv_hits_only {
        k.kv_records
    } else {
        k.kv_keys
    };
    let mut zipf = Zipfian::with_theta(0, i64::from(span) - 1, k.kv_zipf);
    let client = (CLIENT_IP, 40_000u16);
    let server = (kv_sim::server_ip(0), SERVER_BASE_PORT);
    let mut pool = Vec::with_capacity(k.kv_pool);
    for i in 0..k.kv_pool {
        let id = zipf.next(&mut rng) as u64 + 1;
        let get = k.kv_hits_only || rng.next_f64() < k.kv_get_ratio;
        let key = Key::from_id(id);
        let (msg, put) = if get {
            (Message::new(Op::GETREQ, key), None)
        } else {
            let version = i as u64 + 1;
            (
                Message::new(Op::PUTREQ, key).with_value(value_of(id, version, k.kv_value_size)),
                Some(version),
            )
        };
        let payload = msg.encode().unwrap_or_default();
        pool.push(Req {
            frame: kv_sim::frame(client, server, &payload),
            id,
            put,
        });
    }
    let mut last: HashMap<u64, u64> = HashMap::new();
    for r in &pool {
        if let Some(v) = r.put {
            last.insert(r.id, v);
        }
    }
    let mut now_first: HashMap<u64, u64> = HashMap::new();
    let mut now_steady = last.clone();
    let (mut first, mut steady) = (vec![0; pool.len()], vec![0; pool.len()]);
    for (i, r) in pool.iter().enumerate() {
        match r.put {
            Some(v) => {
                now_first.insert(r.id, v);
                now_steady.insert(r.id, v);
            }
            None => {
                first[i] = now_first.get(&r.id).copied().unwrap_or(0);
                steady[i] = now_steady.get(&r.id).copied().unwrap_or(0);
            }
        }
    }
    (pool, first, steady)
}

pub fn run(args: BenchArgs) -> anyhow::Result<ExitCode> {
    let k = args.kv_args.clone();
    check_args(&k, &args)?;
    let (rss0, _) = memory_kb();
    let (name, json) = load(&args)?;
    let mut sw = Switch::from_json(&json, SwitchOptions::default())
        .with_context(|| format!("loading {name}"))?;
    let has_cache = sw
        .program()
        .pipelines
        .iter()
        .flat_map(|p| &p.tables)
        .any(|t| t.name == format!("{P}cache_lookup"));
    for (ip, port) in [
        (CLIENT_IP, CLIENT_PORT),
        (kv_sim::server_ip(0), SERVER_PORT),
    ] {
        sw.mt_add_entry(
            &format!("{P}forward"),
            &[MatchParam::Exact(ip.octets().to_vec())],
            &format!("{P}to_port"),
            &[(port as u16).to_be_bytes().to_vec()],
            None,
        )
        .with_context(|| format!("{name}: a key-value program has table {P}forward"))?;
    }
    eprintln!("installing {} records ...", k.kv_records);
    let t = Instant::now();
    if has_cache {
        install_records(&mut sw, k.kv_records, k.kv_value_size)
            .with_context(|| format!("{name}: installing the cached records"))?;
    } else {
        eprintln!("{name} has no {P}cache_lookup table: no records installed (NoCache)");
    }
    let install_s = t.elapsed().as_secs_f64();
    let (pool, first, steady) = make_pool(&k);
    let mut out: Vec<OutputPacket> = Vec::with_capacity(args.batch * 2);

    // First pass, one request at a time: every reply to the client is checked.
    let (mut hits1, mut absorbed1, mut forwarded1, mut lost1) = (0u64, 0u64, 0u64, 0u64);
    for (i, r) in pool.iter().enumerate() {
        sw.process_packet(CLIENT_PORT, &r.frame, &mut out);
        sw.discard_digests();
        if out.len() != 1 {
            lost1 += 1;
        }
        for o in &out {
            match check_reply(o, r, first[i], k.kv_value_size) {
                Ok(true) => hits1 += 1,
                Ok(false) if o.port == CLIENT_PORT => absorbed1 += 1,
                Ok(false) => forwarded1 += 1,
                Err(e) => anyhow::bail!("{name}: request {i} of the first pass: {e}"),
            }
        }
        sw.recycle_outputs(&mut out);
    }
    anyhow::ensure!(
        lost1 == 0,
        "{name}: {lost1} requests of the first pass gave no packet or several"
    );

    // Timed runs: the pool cycled, in batches; every 1,024th batch checked.
    let batches: Vec<Vec<(u32, &[u8])>> = pool
        .chunks(args.batch)
        .map(|c| {
            c.iter()
                .map(|r| (CLIENT_PORT, r.frame.as_slice()))
                .collect()
        })
        .collect();
    let batch_gets: Vec<u64> = pool
        .chunks(args.batch)
        .map(|c| c.iter().filter(|r| r.put.is_none()).count() as u64)
        .collect();
    let mut mpps = Vec::new();
    let mut hit_rates = Vec::new();
    let (mut hits, mut gets, mut checked, mut bi) = (0u64, 0u64, 0u64, 0usize);
    let mut batch_no = 0u64;
    for run in 0..args.runs {
        let (mut done, mut run_hits) = (0u64, 0u64);
        let t = Instant::now();
        while done < args.packets {
            let b = &batches[bi];
            sw.process_batch(b, &mut out);
            sw.discard_digests();
            for o in &out {
                // Answered by the switch: back to the client with op GETRES_SEQ.
                if o.port == CLIENT_PORT && o.data.get(42..44) == Some(&[0x00, 0x6b]) {
                    run_hits += 1;
                }
            }
            if batch_no.is_multiple_of(1024) {
                anyhow::ensure!(
                    out.len() == b.len(),
                    "{name}: a batch of {} requests gave {} packets",
                    b.len(),
                    out.len()
                );
                for (j, o) in out.iter().enumerate() {
                    let i = bi * args.batch + j;
                    match check_reply(o, &pool[i], steady[i], k.kv_value_size) {
                        Ok(true) => checked += 1,
                        Ok(false) => {}
                        Err(e) => anyhow::bail!("{name}: request {i} of run {}: {e}", run + 1),
                    }
                }
            }
            sw.recycle_outputs(&mut out);
            done += b.len() as u64;
            gets += batch_gets[bi];
            bi = (bi + 1) % batches.len();
            batch_no += 1;
        }
        let dt = t.elapsed().as_secs_f64();
        mpps.push(done as f64 / dt / 1e6);
        hit_rates.push(run_hits as f64 / dt / 1e6);
        hits += run_hits;
        eprintln!(
            "  run {}: {:.2} Mpps, {:.2} M cached GETs/s",
            run + 1,
            done as f64 / dt / 1e6,
            run_hits as f64 / dt / 1e6
        );
    }
    let median = |v: &[f64]| {
        let mut s = v.to_vec();
        s.sort_by(|a, b| a.total_cmp(b));
        s[s.len() / 2]
    };
    let (mpps_med, hit_med) = (median(&mpps), median(&hit_rates));
    let hit_ratio = hits as f64 / gets.max(1) as f64;
    let (rss_end, hwm) = memory_kb();
    let kb = |v: Option<u64>| v.map_or("?".to_string(), |v| format!("{v} kB"));
    println!("tern bench --kv: {name}");
    println!(
        "  cache: {} records of {} bytes installed in {install_s:.2} s; {} keys, Zipf {}, {:.0}% GETs{}",
        if has_cache { k.kv_records } else { 0 },
        k.kv_value_size,
        if k.kv_hits_only { k.kv_records } else { k.kv_keys },
        k.kv_zipf,
        if k.kv_hits_only { 100.0 } else { 100.0 * k.kv_get_ratio },
        if k.kv_hits_only { " (cached keys only)" } else { "" }
    );
    println!("  native code: {}", sw.native_summary());
    println!(
        "  first pass ({} requests, every reply checked): {hits1} GET hits, {absorbed1} writes answered by the switch, {forwarded1} to the server",
        pool.len()
    );
    println!(
        "  throughput (1 core, {} runs x {} packets, batches of {}): median {mpps_med:.2} Mpps = {:.0} ns/packet; {hit_med:.2} M cached GETs/s; GET hit ratio {hit_ratio:.3}; {checked} sampled hits checked",
        args.runs,
        args.packets,
        args.batch,
        1e3 / mpps_med
    );
    println!(
        "  memory: RSS {} at start, {} at end (peak {})",
        kb(rss0),
        kb(rss_end),
        kb(hwm)
    );
    if let Some(path) = &args.json {
        let mut j = String::new();
        let _ = write!(
            j,
            "{{\"program\":{name:?},\"kv\":true,\"records\":{},\"keys\":{},\"zipf\":{},\"get_ratio\":{},\
             \"value_size\":{},\"hits_only\":{},\"pool\":{},\"batch\":{},\"packets_per_run\":{},\
             \"first_pass\":{{\"hits\":{hits1},\"absorbed\":{absorbed1},\"forwarded\":{forwarded1}}},\
             \"mpps\":[{}],\"mpps_median\":{mpps_med:.4},\"cached_gets_mps\":[{}],\
             \"cached_gets_mps_median\":{hit_med:.4},\"hit_ratio\":{hit_ratio:.4},\"checked\":{checked}}}",
            if has_cache { k.kv_records } else { 0 },
            k.kv_keys,
            k.kv_zipf,
            k.kv_get_ratio,
            k.kv_value_size,
            k.kv_hits_only,
            pool.len(),
            args.batch,
            args.packets,
            mpps.iter().map(|m| format!("{m:.4}")).collect::<Vec<_>>().join(","),
            hit_rates.iter().map(|m| format!("{m:.4}")).collect::<Vec<_>>().join(","),
        );
        j.push('\n');
        std::fs::write(path, j).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn args(prog: &str, k: KvBenchArgs) -> BenchArgs {
        BenchArgs {
            program: Some(
                PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../p4/kv/")).join(prog),
            ),
            routes: 1,
            flows: 1,
            packets: 3_000,
            size: 60,
            batch: 16,
            runs: 1,
            json: None,
            latency_samples: 0,
            stage_packets: 0,
            workers: None,
            update_rate: 0,
            bcache: Default::default(),
            kv_args: k,
            case: Default::default(),
        }
    }

    fn kv(records: u32, get_ratio: f64) -> KvBenchArgs {
        KvBenchArgs {
            kv: true,
            kv_records: records,
            kv_keys: 20_000,
            kv_zipf: 0.99,
            kv_get_ratio: get_ratio,
            kv_value_size: 128,
            kv_pool: 2_000,
            kv_hits_only: false,
        }
    }

    fn report(prog: &str, k: KvBenchArgs) -> serde_json::Value {
        let dir = std::env::temp_dir().join(format!(
            "tern-bench-kv-{}-{prog}-{}",
            std::process::id(),
            k.kv_get_ratio
        ));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let j = dir.join("r.json");
        let mut a = args(prog, k);
        a.json = Some(j.clone());
        let r = run(a);
        let text = std::fs::read_to_string(&j);
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(r.expect("run"), ExitCode::SUCCESS);
        serde_json::from_str(&text.expect("json written")).expect("valid JSON")
    }

    /// FarReach answers GETs of cached keys with their values (checked reply by reply) and
    /// absorbs writes to them; the hit ratio is that of the Zipf head cached.
    #[test]
    fn farreach_serves_cached_gets_and_absorbs_writes() {
        let v = report("farreach.p4", kv(1_000, 0.5));
        let fp = &v["first_pass"];
        assert!(fp["hits"].as_u64().unwrap() > 300, "{v}");
        assert!(fp["absorbed"].as_u64().unwrap() > 300, "{v}");
        assert!(fp["forwarded"].as_u64().unwrap() > 100, "{v}");
        let ratio = v["hit_ratio"].as_f64().unwrap();
        assert!((0.45..0.85).contains(&ratio), "{v}");
        assert!(v["checked"].as_u64().unwrap() > 0, "{v}");
    }

    /// Hits only: every request is answered by the switch.
    #[test]
    fn hits_only_all_hit() {
        let mut k = kv(500, 1.0);
        k.kv_hits_only = true;
        let v = report("farreach.p4", k);
        assert_eq!(v["first_pass"]["hits"].as_u64(), Some(2_000), "{v}");
        assert_eq!(v["hit_ratio"].as_f64(), Some(1.0), "{v}");
    }

    /// NetCache serves reads and invalidates on writes (no server here to refresh the copies,
    /// so hits only go down); NoCache never answers.
    #[test]
    fn netcache_and_nocache() {
        let v = report("netcache.p4", kv(1_000, 0.9));
        assert!(v["first_pass"]["hits"].as_u64().unwrap() > 100, "{v}");
        assert_eq!(v["first_pass"]["absorbed"].as_u64(), Some(0), "{v}");
        let v = report("forward.p4", kv(1_000, 0.9));
        assert_eq!(v["first_pass"]["hits"].as_u64(), Some(0), "{v}");
        assert_eq!(v["hit_ratio"].as_f64(), Some(0.0), "{v}");
    }

    /// Native code (parser, pipelines with every action inlined: register reads and writes,
    /// counters, `setValid`/`setInvalid`, hashes, `random`, `?:`, shifts) against the
    /// interpreter on the key-value programs: two switches with the same cache records and the
    /// same random register contents get the same random requests and responses (every op
    /// the programs branch on, cached and uncached keys, values of every length class, bytes
    /// flipped, frames cut short); every output (port and bytes), and every register cell and
    /// counter cell after each round, must agree.
    #[test]
    fn native_code_matches_the_interpreter_on_kv_programs() {
        let mut rng = Rng::new(0x6a69_7470_6172_6974);
        for prog in ["farreach.p4", "netcache.p4", "madinc.p4"] {
            let a = args(prog, kv(64, 0.5));
            let (_, json) = load(&a).expect("compile");
            let mut sws = [0, 1].map(|_| Switch::from_json(&json, SwitchOptions::default()));
            let [Ok(native), Ok(interp)] = &mut sws else {
                panic!("{prog}: load failed")
            };
            interp.use_interpreter();
            let ns = native.native_summary();
            // Every action native: what this test is for.
            assert!(
                ns.pipelines == 2 && ns.actions_inlined == ns.actions,
                "{prog}: {ns}"
            );
            let mad = prog == "madinc.p4";
            let ing = if mad { "MadIngress." } else { P };
            let prog_model = native.program().clone();
            let secrets: Vec<u32> = (0..4).map(|_| rng.next_u64() as u32).collect();
            for sw in [&mut *native, &mut *interp] {
                sw.set_clock_us(Some(1_000));
                for (ip, port) in [(CLIENT_IP, 0u16), (kv_sim::server_ip(0), 1)] {
                    sw.mt_add_entry(
                        &format!("{ing}forward"),
                        &[MatchParam::Exact(ip.octets().to_vec())],
                        &format!("{ing}to_port"),
                        &[port.to_be_bytes().to_vec()],
                        None,
                    )
                    .expect("forward");
                }
                if mad {
                    for (t, secret) in secrets.iter().enumerate() {
                        sw.mt_add_entry(
                            "MadIngress.tenant",
                            &[MatchParam::Exact((t as u16 + 1).to_be_bytes().to_vec())],
                            "MadIngress.set_tenant",
                            &[secret.to_be_bytes().to_vec(), 3u16.to_be_bytes().to_vec()],
                            None,
                        )
                        .expect("tenant");
                    }
                    // Every cached key under tenants 1 and 2, none under 3 and 4: the 18-byte
                    // keys share their low 16 bytes in pairs, so a probe for tenant 3 or 4
                    // that compared only part of the key would find another tenant's entry.
                    for slot in 0..64u32 {
                        let (t, id) = (slot % 2 + 1, u64::from(slot / 2) + 1);
                        let mut key = (t as u16).to_be_bytes().to_vec();
                        key.extend_from_slice(&Key::from_id(id).0);
                        sw.mt_add_entry(
                            "MadIngress.cache_lookup",
                            &[
                                MatchParam::Exact(key[..2].to_vec()),
                                MatchParam::Exact(key[2..].to_vec()),
                            ],
                            "MadIngress.set_slot",
                            &[slot.to_be_bytes().to_vec()],
                            None,
                        )
                        .expect("cache entry");
                    }
                    // Keys 1 to 8 also under 64 tenants that send nothing: many entries share
                    // those keys' low 16 bytes, so a probe for tenant 3 or 4 that compared
                    // only part of the 18-byte key would often run into one of them.
                    for t in 100..164u16 {
                        for id in 1..=8u64 {
                            let mut key = t.to_be_bytes().to_vec();
                            key.extend_from_slice(&Key::from_id(id).0);
                            sw.mt_add_entry(
                                "MadIngress.cache_lookup",
                                &[
                                    MatchParam::Exact(key[..2].to_vec()),
                                    MatchParam::Exact(key[2..].to_vec()),
                                ],
                                "MadIngress.set_slot",
                                &[(u32::from(t) + 64).to_be_bytes().to_vec()],
                                None,
                            )
                            .expect("cache entry");
                        }
                    }
                } else {
                    install_records(sw, 64, 128).expect("install");
                }
            }
            let compare_state = |native: &Switch, interp: &Switch, round: usize| {
                for r in &prog_model.register_arrays {
                    let (x, y) = (
                        native.register_read_all(&r.name),
                        interp.register_read_all(&r.name),
                    );
                    assert_eq!(x, y, "{prog}: register {} after round {round}", r.name);
                }
                for c in &prog_model.counter_arrays {
                    for i in 0..c.size {
                        let (x, y) = (
                            native.counter_read(&c.name, i),
                            interp.counter_read(&c.name, i),
                        );
                        assert_eq!(x, y, "{prog}: counter {}[{i}] after round {round}", c.name);
                    }
                }
            };
            let ops: &[u16] = if mad {
                &[0x0e00, 0x0e01, 0x0e02, 0x0e04]
            } else {
                &[
                    0x0030, 0x0001, 0x0040, 0x000b, 0x001b, 0x0043, 0x0003, 0x006b, 0x0002,
                ]
            };
            let (mut o1, mut o2) = (Vec::new(), Vec::new());
            for round in 0..4 {
                // Random register contents (the same on both): small values the programs
                // branch on, and arbitrary ones.
                for r in &prog_model.register_arrays {
                    for i in 0..r.size.min(2_048) {
                        if !rng.next_u64().is_multiple_of(3) {
                            continue;
                        }
                        let v = match rng.next_u64() % 4 {
                            0 => 0,
                            1 => 1,
                            2 => rng.next_u64() % 4,
                            _ => rng.next_u64(),
                        };
                        let v = if r.bitwidth < 64 {
                            v & ((1 << r.bitwidth) - 1)
                        } else {
                            v
                        };
                        for sw in [&mut *native, &mut *interp] {
                            sw.register_write(&r.name, i, v).expect("register write");
                        }
                    }
                }
                if !mad {
                    // The switch OS's parameters: sampling on, a seq floor, and in odd rounds
                    // a snapshot in progress.
                    let token = if round % 2 == 1 {
                        rng.next_u64() as u32 | 1
                    } else {
                        0
                    };
                    for sw in [&mut *native, &mut *interp] {
                        sw.mt_set_default_action(
                            &format!("{P}kv_params"),
                            &format!("{P}set_params"),
                            &[
                                vec![0, 2],
                                vec![1],
                                5u32.to_be_bytes().to_vec(),
                                token.to_be_bytes().to_vec(),
                            ],
                        )
                        .expect("kv_params");
                    }
                }
                for k in 0..1_500usize {
                    let id = rng.next_u64() % 128 + 1;
                    let op = ops[rng.next_u64() as usize % ops.len()];
                    let mut payload = op.to_be_bytes().to_vec();
                    if mad {
                        let t = (rng.next_u64() % 5) as u16;
                        payload.extend_from_slice(&t.to_be_bytes());
                        let tag = match secrets.get(usize::from(t).wrapping_sub(1)) {
                            Some(s) if !rng.next_u64().is_multiple_of(4) => *s,
                            _ => rng.next_u64() as u32,
                        };
                        payload.extend_from_slice(&tag.to_be_bytes());
                    }
                    payload.extend_from_slice(&Key::from_id(id).0);
                    // A value of a length class the parsers branch on, the shadow type, a
                    // seq header and a stat header (the programs drop what does not fit).
                    let vlen = [0usize, 8, 17, 64, 120, 128, 129, 300][k % 8];
                    payload.extend_from_slice(&(vlen as u16).to_be_bytes());
                    let padded = if vlen <= 128 {
                        vlen.div_ceil(8) * 8
                    } else {
                        vlen
                    };
                    payload.extend((0..padded).map(|_| rng.next_u64() as u8));
                    if k % 3 != 0 {
                        payload.extend_from_slice(&op.to_be_bytes());
                    }
                    if k % 2 == 0 {
                        payload.extend((0..12).map(|_| rng.next_u64() as u8));
                    }
                    let client = (CLIENT_IP, 40_000u16);
                    let server = (kv_sim::server_ip(0), SERVER_BASE_PORT + (k % 3) as u16);
                    let from_server = k % 4 == 3;
                    let mut f = if from_server {
                        kv_sim::frame(server, client, &payload)
                    } else {
                        kv_sim::frame(client, server, &payload)
                    };
                    match k % 16 {
                        5 => {
                            let i = rng.next_u64() as usize % f.len();
                            f[i] = rng.next_u64() as u8;
                        }
                        9 => f.truncate(rng.next_u64() as usize % f.len()),
                        _ => {}
                    }
                    let port = u32::from(from_server);
                    native.process_packet(port, &f, &mut o1);
                    interp.process_packet(port, &f, &mut o2);
                    let got: Vec<_> = o1.drain(..).map(|o| (o.port, o.data)).collect();
                    let want: Vec<_> = o2.drain(..).map(|o| (o.port, o.data)).collect();
                    assert_eq!(got, want, "{prog}: round {round} packet {k} {f:02x?}");
                }
                compare_state(native, interp, round);
            }
        }
    }

    /// A wrong value served by the switch is caught: a record's value changed behind the
    /// bench's back fails the first pass.
    #[test]
    fn a_wrong_value_is_caught() {
        let k = KvBenchArgs {
            kv_hits_only: true,
            ..kv(10, 1.0)
        };
        let a = args("farreach.p4", k.clone());
        let (_, json) = load(&a).expect("compile");
        let mut sw = Switch::from_json(&json, SwitchOptions::default()).expect("load");
        for (ip, port) in [(CLIENT_IP, 0u16), (kv_sim::server_ip(0), 1)] {
            sw.mt_add_entry(
                &format!("{P}forward"),
                &[MatchParam::Exact(ip.octets().to_vec())],
                &format!("{P}to_port"),
                &[port.to_be_bytes().to_vec()],
                None,
            )
            .expect("forward");
        }
        install_records(&mut sw, 10, 128).expect("install");
        // Slot 0 (id 1) gets a wrong word.
        sw.register_write(&format!("{P}val_reg"), 3, 0xdead)
            .expect("poke");
        let (pool, first, _) = make_pool(&k);
        let mut out = Vec::new();
        let mut errors = 0;
        for (i, r) in pool.iter().enumerate() {
            sw.process_packet(0, &r.frame, &mut out);
            for o in &out {
                if check_reply(o, r, first[i], 128).is_err() {
                    assert_eq!(r.id, 1);
                    errors += 1;
                }
            }
            out.clear();
        }
        assert!(
            errors > 0,
            "the wrong value was never served or never caught"
        );
    }
}
