//! The whole `Runtime` surface over the wire behaves exactly like the switch itself: the same
//! script of calls runs on a local `Switch` and through `ThriftRuntime` against a served copy,
//! and every result (values and BMv2 error codes) must be identical. Spot checks make sure
//! the scripts exercise successes, not just errors.

mod common;

use common::*;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{
    CounterValue, CrcConfig, MatchParam, MeterRate, ResourceType, Runtime, SwapError,
};
use tern_thrift::ThriftRuntime;

const DIGEST: &str = "targets/simple_switch_grpc/tests/testdata/digest.json";
const COUNTER: &str = "targets/simple_switch_grpc/tests/testdata/counter.json";
const METER: &str = "targets/simple_switch_grpc/tests/testdata/meter.json";
const TERNARY: &str = "targets/simple_switch_grpc/tests/testdata/ternary.json";
const PVS: &str = "tests/testdata/parse_vset.json";

type Script = fn(&mut dyn Runtime) -> Vec<String>;

/// Run `script` locally and over the wire; assert identical logs; return the log.
fn parity(rel: &str, opts: SwitchOptions, script: Script) -> Vec<String> {
    let mut local = Switch::from_json(&fixture(rel), opts.clone()).unwrap();
    let (addr, _sw) = serve_fixture(rel, opts);
    let mut remote = ThriftRuntime::connect(addr).unwrap();
    let direct: Vec<String> = script(&mut local).iter().map(|s| untimed(s)).collect();
    let wire: Vec<String> = script(&mut remote).iter().map(|s| untimed(s)).collect();
    for (i, (d, w)) in direct.iter().zip(&wire).enumerate() {
        assert_eq!(d, w, "{rel}: step {i} differs");
    }
    assert_eq!(direct.len(), wire.len());
    assert_eq!(
        remote.last_error(),
        None,
        "{rel}: a transport-level failure happened"
    );
    wire
}

/// `s` with every `time_since_hit_ms: <n>` (wall-clock dependent) replaced by `_`.
fn untimed(s: &str) -> String {
    const TAG: &str = "time_since_hit_ms: ";
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find(TAG) {
        out.push_str(&rest[..i + TAG.len()]);
        out.push('_');
        rest = rest[i + TAG.len()..].trim_start_matches(|c: char| c.is_ascii_digit());
    }
    out.push_str(rest);
    out
}

macro_rules! log {
    ($log:ident, $($e:expr),* $(,)?) => {$( $log.push(format!("{:?}", $e)); )*};
}

fn digest_script(r: &mut dyn Runtime) -> Vec<String> {
    let mut l = Vec::new();
    let t = "ingress.smac";
    let key = [MatchParam::Exact(vec![0, 1, 2, 3, 4, 5])];
    let h = r.mt_add_entry(t, &key, "ingress.send_digest", &[], None);
    log!(l, h);
    let h = h.unwrap_or(0);
    log!(
        l,
        r.mt_set_entry_ttl(t, h, 1000),
        r.mt_get_entry(t, h),
        r.mt_set_entry_ttl(t, h + 77, 1000),
        r.mt_get_entry_from_key(t, &key, None),
        r.mt_get_entry_from_key(t, &[MatchParam::Exact(vec![9; 6])], None),
        r.mt_read_counter(t, h),
        r.mt_get_meter_rates(t, h),
        r.mt_add_entry(t, &[MatchParam::Exact(vec![1; 5])], "NoAction", &[], None),
        r.mt_add_entry(t, &key, "NoAction", &[vec![1]], None),
        r.mt_add_entry(t, &key, "act", &[], None),
        r.mt_set_default_action(t, "NoAction", &[]),
        r.mt_get_default_entry(t),
        r.mt_reset_default_entry(t),
        r.mt_get_default_entry(t),
        r.learning_set_timeout(1, 100),
        r.learning_set_buffer_size(1, 10),
        r.learning_ack(1, 0, &[0, 1]),
        r.learning_ack_buffer(1, 0),
        r.learning_set_timeout(99, 1),
        r.get_id_from_name(ResourceType::LearningList, "L2_digest"),
        r.get_id_from_name(ResourceType::MatchTable, t),
        r.get_id_from_name(ResourceType::Counter, "nope"),
        r.mt_get_num_entries(t),
        r.serialize_state(),
        r.mt_clear_entries(t, true),
        r.mt_get_entries(t),
        r.mt_modify_entry(t, h, "NoAction", &[]),
        r.mt_delete_entry(t, h),
    );
    l
}

#[test]
fn tables_ttl_defaults_and_learning() {
    tern_fixtures::require!();
    let l = parity(DIGEST, SwitchOptions::default(), digest_script);
    assert!(l[0].starts_with("Ok("), "{}", l[0]);
    assert_eq!(l[1], "Ok(())");
    assert!(
        l[2].contains("life: Some(EntryLife { timeout_ms: 1000"),
        "{}",
        l[2]
    );
}

fn counter_script(r: &mut dyn Runtime) -> Vec<String> {
    let mut l = Vec::new();
    let t = "t_redirect";
    let h = r.mt_add_entry(
        t,
        &[MatchParam::Exact(vec![0, 0, 0, 64])],
        "port_redirect",
        &[],
        None,
    );
    log!(l, h);
    let h = h.unwrap_or(0);
    let v = CounterValue {
        bytes: 6400,
        packets: 100,
    };
    log!(
        l,
        r.mt_write_counter(t, h, v),
        r.mt_read_counter(t, h),
        r.mt_reset_counters(t),
        r.mt_read_counter(t, h),
        r.mt_read_counter(t, h + 5),
        r.counter_read("cntr", 0),
    );
    l
}

#[test]
fn direct_counters() {
    tern_fixtures::require!();
    let l = parity(COUNTER, SwitchOptions::default(), counter_script);
    assert_eq!(l[2], "Ok(CounterValue { bytes: 6400, packets: 100 })");
}

fn meter_script(r: &mut dyn Runtime) -> Vec<String> {
    let mut l = Vec::new();
    let t = "ingress.t_redirect";
    let h = r.mt_add_entry(
        t,
        &[MatchParam::Exact(vec![0, 3])],
        "ingress.port_redirect",
        &[],
        None,
    );
    log!(l, h);
    let h = h.unwrap_or(0);
    let rate = |u, b| MeterRate {
        units_per_micros: u,
        burst_size: b,
    };
    log!(
        l,
        r.mt_set_meter_rates(t, h, &[rate(0.001, 5), rate(0.0025, 10)]),
        r.mt_get_meter_rates(t, h),
        r.mt_set_meter_rates(t, h, &[rate(0.001, 5)]),
        r.mt_set_meter_rates(t, h, &[rate(0.5, 5), rate(0.25, 10)]),
        r.meter_get_rates("ingress.mtr", 0),
    );
    l
}

#[test]
fn direct_meters() {
    tern_fixtures::require!();
    let l = parity(METER, SwitchOptions::default(), meter_script);
    assert!(
        l[2].contains("units_per_micros: 0.0025, burst_size: 10"),
        "{}",
        l[2]
    );
}

fn ternary_script(r: &mut dyn Runtime) -> Vec<String> {
    let mut l = Vec::new();
    let t = "ingress.ter";
    let k = |v: u8, m: u8| {
        [MatchParam::Ternary {
            key: vec![0, v],
            mask: vec![0, m],
        }]
    };
    log!(
        l,
        r.mt_add_entry(t, &k(1, 0xff), "ingress.send_1", &[], Some(10)),
        r.mt_add_entry(t, &k(1, 0xff), "ingress.send_2", &[], Some(20)),
        r.mt_add_entry(t, &k(1, 0xff), "ingress.send_2", &[], Some(10)),
        r.mt_add_entry(t, &k(0x13, 0x0f), "ingress.send_2", &[], Some(5)),
        r.mt_get_entries(t),
        r.mt_get_entry_from_key(t, &k(1, 0xff), Some(20)),
        r.mt_get_entry_from_key(t, &k(1, 0xff), Some(21)),
    );
    l
}

#[test]
fn ternary_priorities() {
    tern_fixtures::require!();
    let l = parity(TERNARY, SwitchOptions::default(), ternary_script);
    assert!(l[4].contains("priority: 20"), "{}", l[4]);
    // The stored key is masked: 0x13 & 0x0f.
    assert!(l[4].contains("key: [0, 3], mask: [0, 15]"), "{}", l[4]);
}

fn misc_script(r: &mut dyn Runtime) -> Vec<String> {
    let mut l = Vec::new();
    let crc = CrcConfig {
        polynomial: 0x1021,
        initial_remainder: 0xffff,
        final_xor_value: 0,
        data_reflected: false,
        remainder_reflected: false,
    };
    log!(
        l,
        r.parse_vset_add("pv1", &[0x12, 0x34]),
        r.parse_vset_add("pv1", &[0x00, 0x56, 0x78]),
        r.parse_vset_get("pv1"),
        r.parse_vset_remove("pv1", &[0x12, 0x34]),
        r.parse_vset_get("pv1"),
        r.parse_vset_clear("pv1"),
        r.parse_vset_get("pv1"),
        r.parse_vset_add("nope", &[1]),
        r.dev_mgr_add_port("veth0", 3, None),
        r.dev_mgr_add_port("veth1", 4, Some("/tmp/x.pcap")),
        r.dev_mgr_add_port("veth0", 5, None),
        r.dev_mgr_show_ports(),
        r.dev_mgr_remove_port(3),
        r.dev_mgr_remove_port(3),
        r.dev_mgr_show_ports(),
        r.set_crc16_custom_parameters("nope", crc),
        r.set_crc32_custom_parameters("nope", crc),
        r.set_toeplitz_hash_key("nope", &[0; 40]),
        r.load_new_config("{}"),
        r.swap_configs(),
        r.set_egress_queue_depth(Some(1), Some(0), 64),
        r.set_egress_queue_depth(Some(1), None, 64),
        r.set_egress_queue_depth(None, None, 64),
        r.set_egress_queue_rate(Some(1), Some(0), 1000),
        r.set_egress_queue_rate(None, None, 1000),
        r.switch_info(),
        r.get_config_md5(),
    );
    l
}

#[test]
fn value_sets_ports_hashes_swap_and_queues() {
    tern_fixtures::require!();
    let l = parity(PVS, SwitchOptions::default(), misc_script);
    assert_eq!(l[0], "Ok(())");
    assert!(l[2].contains("[18, 52]"), "{}", l[2]);
    assert_eq!(l[6], "Ok([])");
    assert_eq!(
        l[18],
        format!(
            "{:?}",
            Err::<(), _>(tern_runtime::RuntimeError::from(
                SwapError::CONFIG_SWAP_DISABLED
            ))
        )
    );
}

#[test]
fn config_swap_over_the_wire() {
    tern_fixtures::require!();
    let opts = SwitchOptions {
        enable_swap: true,
        ..SwitchOptions::default()
    };
    let (addr, sw) = serve_fixture(SIMPLE_ROUTER, opts);
    let mut rt = ThriftRuntime::connect(addr).unwrap();
    let new = fixture(ECMP);
    assert_eq!(rt.swap_configs(), Err(SwapError::NO_ONGOING_SWAP.into()));
    rt.load_new_config(&new).unwrap();
    assert_eq!(
        rt.load_new_config(&new),
        Err(SwapError::ONGOING_SWAP.into())
    );
    rt.swap_configs().unwrap();
    assert_eq!(rt.get_config(), new);
    assert_eq!(sw.lock().unwrap().get_config(), new);
    assert_eq!(rt.get_config_md5(), sw.lock().unwrap().get_config_md5());
    // The new program's tables are live.
    assert_eq!(rt.mt_get_num_entries("ecmp_group"), Ok(0));
    assert!(rt.mt_get_num_entries("ipv4_lpm").is_err());
}
