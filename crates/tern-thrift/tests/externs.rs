//! Indexed counters, meters and registers over the wire (indirect_res.json), with BMv2's
//! error codes for out-of-range indices and bad rates (as in BMv2's `indirect_res` CLI test).

mod common;

use common::*;
use tern_runtime::{
    CounterError, CounterValue, MeterError, MeterRate, RegisterError, ResourceType, Runtime,
    TableError,
};

fn rate(r: f64, b: u32) -> MeterRate {
    MeterRate {
        units_per_micros: r,
        burst_size: b,
    }
}

#[test]
fn counters_over_the_wire() {
    tern_fixtures::require!();
    let (mut rt, sw, _) = client_for(INDIRECT_RES);
    let c = "my_indirect_counter";
    assert_eq!(rt.counter_read(c, 0).unwrap(), CounterValue::default());
    assert_eq!(
        rt.counter_read(c, 16),
        Err(CounterError::INVALID_INDEX.into())
    );
    let v = CounterValue {
        bytes: 1500,
        packets: 3,
    };
    rt.counter_write(c, 15, v).unwrap();
    assert_eq!(rt.counter_read(c, 15).unwrap(), v);
    // The write reached the server-side switch itself.
    assert_eq!(sw.lock().unwrap().counter_read(c, 15).unwrap(), v);
    assert_eq!(
        rt.counter_write(c, 16, v),
        Err(CounterError::INVALID_INDEX.into())
    );
    // Indices that do not fit BMv2's i32 are refused before sending.
    assert_eq!(
        rt.counter_read(c, u32::MAX),
        Err(CounterError::INVALID_INDEX.into())
    );
    rt.counter_reset_all(c).unwrap();
    assert_eq!(rt.counter_read(c, 15).unwrap(), CounterValue::default());
    assert_eq!(
        rt.counter_read("nope", 0),
        Err(CounterError::INVALID_COUNTER_NAME.into())
    );
}

#[test]
fn meters_over_the_wire() {
    tern_fixtures::require!();
    let (mut rt, _sw, _) = client_for(INDIRECT_RES);
    let m = "my_indirect_meter";
    rt.meter_set_rates(m, 0, &[rate(1.0, 1), rate(2.0, 1)])
        .unwrap();
    assert_eq!(
        rt.meter_set_rates(m, 16, &[rate(1.0, 1), rate(2.0, 1)]),
        Err(MeterError::INVALID_INDEX.into())
    );
    assert_eq!(
        rt.meter_set_rates(m, 0, &[rate(2.0, 1), rate(1.0, 1)]),
        Err(MeterError::INVALID_INFO_RATE_VALUE.into())
    );
    assert_eq!(
        rt.meter_get_rates(m, 0).unwrap(),
        vec![rate(1.0, 1), rate(2.0, 1)]
    );
    rt.meter_array_set_rates(m, &[rate(0.5, 10), rate(0.75, 20)])
        .unwrap();
    assert_eq!(
        rt.meter_get_rates(m, 7).unwrap(),
        vec![rate(0.5, 10), rate(0.75, 20)]
    );
    assert_eq!(
        rt.meter_get_rates("nope", 0),
        Err(MeterError::INVALID_METER_NAME.into())
    );
}

#[test]
fn registers_over_the_wire() {
    tern_fixtures::require!();
    let (mut rt, sw, _) = client_for(INDIRECT_RES);
    let r = "my_register";
    assert_eq!(rt.register_read(r, 0).unwrap(), 0);
    assert_eq!(
        rt.register_read(r, 16),
        Err(RegisterError::INVALID_INDEX.into())
    );
    rt.register_write(r, 0, 1).unwrap();
    assert_eq!(
        rt.register_write(r, 16, 1),
        Err(RegisterError::INVALID_INDEX.into())
    );
    rt.register_write_range(r, 4, 6, 0xdead).unwrap();
    let all = rt.register_read_all(r).unwrap();
    assert_eq!(all.len(), 16);
    assert_eq!(&all[..8], &[1, 0, 0, 0, 0xdead, 0xdead, 0xdead, 0]);
    assert_eq!(sw.lock().unwrap().register_read(r, 5).unwrap(), 0xdead);
    rt.register_reset(r).unwrap();
    assert_eq!(rt.register_read_all(r).unwrap(), vec![0; 16]);
    assert_eq!(
        rt.register_read("nope", 0),
        Err(RegisterError::INVALID_REGISTER_NAME.into())
    );
}

#[test]
fn ids_state_and_wrong_kind_calls() {
    tern_fixtures::require!();
    let (mut rt, sw, _) = client_for(INDIRECT_RES);
    let direct = sw
        .lock()
        .unwrap()
        .get_id_from_name(ResourceType::Register, "my_register");
    assert_eq!(
        rt.get_id_from_name(ResourceType::Register, "my_register"),
        direct
    );
    assert!(rt
        .get_id_from_name(ResourceType::MatchTable, "no_such_table")
        .is_err());
    // A keyless table: asking for a keyed entry is refused with a table code.
    assert!(matches!(
        rt.mt_get_entries("no_such_table"),
        Err(e) if e == TableError::INVALID_TABLE_NAME.into()
    ));
    rt.register_write("my_register", 3, 9).unwrap();
    assert_eq!(rt.serialize_state(), sw.lock().unwrap().serialize_state());
    rt.reset_state();
    assert_eq!(rt.register_read("my_register", 3).unwrap(), 0);
    assert!(rt.last_error().is_none());
}
