//! Hostile and odd peers on the raw socket: garbage, truncated messages, absurd lengths,
//! unknown services and methods. Each gets its connection closed or an application
//! exception, and the server keeps answering the next client.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use common::*;
use tern_runtime::Runtime;
use tern_thrift::ThriftRuntime;
use thrift::protocol::{TBinaryInputProtocol, TInputProtocol, TMessageType, TType};
use thrift::ApplicationErrorKind;

/// A strict-binary CALL message with `args` as the (already encoded) argument struct.
fn call(name: &str, seq: i32, args: &[u8]) -> Vec<u8> {
    let mut m = vec![0x80, 0x01, 0x00, 0x01];
    m.extend_from_slice(&(name.len() as i32).to_be_bytes());
    m.extend_from_slice(name.as_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(args);
    m
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// The server closed the connection: reading gives EOF (or a reset), never a timeout.
fn assert_closed(mut s: TcpStream) {
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => continue, // e.g. an exception reply before the close
            Err(e) => {
                assert!(
                    !matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                    ),
                    "server kept the connection open: {e}"
                );
                return;
            }
        }
    }
}

/// The server still serves: a fresh client reads the config.
fn assert_alive(addr: SocketAddr) {
    let rt = ThriftRuntime::connect(addr).unwrap();
    assert_eq!(rt.get_config(), fixture(SIMPLE_ROUTER));
    assert!(rt.last_error().is_none());
}

/// `bm_get_config` over `s` returns the fixture text.
fn get_config_on(s: &TcpStream, seq: i32) {
    let mut w = s.try_clone().unwrap();
    w.write_all(&call("standard:bm_get_config", seq, &[0]))
        .unwrap();
    let mut p = TBinaryInputProtocol::new(s.try_clone().unwrap(), true);
    let id = p.read_message_begin().unwrap();
    assert_eq!(
        id.name, "bm_get_config",
        "replies carry the plain method name"
    );
    assert_eq!(id.message_type, TMessageType::Reply);
    assert_eq!(id.sequence_number, seq);
    p.read_struct_begin().unwrap();
    let f = p.read_field_begin().unwrap();
    assert_eq!((f.field_type, f.id), (TType::String, Some(0)));
    assert_eq!(p.read_string().unwrap(), fixture(SIMPLE_ROUTER));
}

#[test]
fn garbage_bytes_close_only_that_connection() {
    tern_fixtures::require!();
    let (addr, _sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    let mut s = connect(addr);
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert_closed(s);
    assert_alive(addr);
}

#[test]
fn truncated_message_closes_the_connection() {
    tern_fixtures::require!();
    let (addr, _sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    let mut s = connect(addr);
    let full = call(
        "standard:bm_mt_get_num_entries",
        1,
        &[8, 0, 1, 0, 0, 0, 0, 0],
    );
    s.write_all(&full[..full.len() - 3]).unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    assert_closed(s);
    assert_alive(addr);
}

#[test]
fn absurd_lengths_are_refused_without_allocating() {
    tern_fixtures::require!();
    let (addr, _sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    // A method name claiming 2 GiB, then a string argument claiming -1 bytes, then a list
    // claiming 2^31-1 elements: each must only close its own connection.
    let mut s = connect(addr);
    s.write_all(&[0x80, 0x01, 0x00, 0x01, 0x7f, 0xff, 0xff, 0xff, b'x'])
        .unwrap();
    assert_closed(s);
    let mut s = connect(addr);
    // field 2 (table_name): string of length -1
    s.write_all(&call(
        "standard:bm_mt_get_num_entries",
        1,
        &[11, 0, 2, 0xff, 0xff, 0xff, 0xff],
    ))
    .unwrap();
    assert_closed(s);
    let mut s = connect(addr);
    // bm_register_read_all has no list argument, so use bm_learning_ack's field 4 list<i32>
    s.write_all(&call(
        "standard:bm_learning_ack",
        1,
        &[15, 0, 4, 8, 0x7f, 0xff, 0xff, 0xff],
    ))
    .unwrap();
    assert_closed(s);
    assert_alive(addr);
}

#[test]
fn unknown_method_and_service_get_application_exceptions_and_the_connection_survives() {
    tern_fixtures::require!();
    let (addr, _sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    let s = connect(addr);
    let mut w = s.try_clone().unwrap();
    // Arguments are present (field 1: i32 = 0) and must be skipped.
    for (seq, name) in [
        (7, "standard:no_such_method"),
        (8, "no_such_service:bm_get_config"),
        (9, "bm_get_config"),
    ] {
        w.write_all(&call(name, seq, &[8, 0, 1, 0, 0, 0, 0, 0]))
            .unwrap();
        let mut p = TBinaryInputProtocol::new(s.try_clone().unwrap(), true);
        let id = p.read_message_begin().unwrap();
        assert_eq!(id.message_type, TMessageType::Exception, "{name}");
        assert_eq!(id.sequence_number, seq);
        let e = thrift::Error::read_application_error_from_in_protocol(&mut p).unwrap();
        assert_eq!(e.kind, ApplicationErrorKind::UnknownMethod, "{name}");
        assert!(e.message.contains(name), "{}", e.message);
        p.read_message_end().unwrap();
    }
    // The same connection still answers a real call.
    get_config_on(&s, 10);
    assert_alive(addr);
}

#[test]
fn bad_arguments_get_bmv2_codes_and_the_switch_keeps_running() {
    tern_fixtures::require!();
    let (addr, sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    let s = connect(addr);
    let mut w = s.try_clone().unwrap();
    // bm_counter_read(cxt 0, "nope", index -1): a negative index is INVALID_INDEX (2) in
    // result field 1 (`ouch`).
    let mut args = vec![8, 0, 1, 0, 0, 0, 0];
    args.extend_from_slice(&[11, 0, 2, 0, 0, 0, 4]);
    args.extend_from_slice(b"nope");
    args.extend_from_slice(&[8, 0, 3, 0xff, 0xff, 0xff, 0xff, 0]);
    w.write_all(&call("standard:bm_counter_read", 3, &args))
        .unwrap();
    let mut p = TBinaryInputProtocol::new(s.try_clone().unwrap(), true);
    let id = p.read_message_begin().unwrap();
    assert_eq!(id.message_type, TMessageType::Reply);
    p.read_struct_begin().unwrap();
    let f = p.read_field_begin().unwrap();
    assert_eq!((f.field_type, f.id), (TType::Struct, Some(1)));
    p.read_struct_begin().unwrap();
    let code = p.read_field_begin().unwrap();
    assert_eq!((code.field_type, code.id), (TType::I32, Some(1)));
    assert_eq!(p.read_i32().unwrap(), 2);
    assert_eq!(p.read_field_begin().unwrap().field_type, TType::Stop);
    assert_eq!(p.read_field_begin().unwrap().field_type, TType::Stop);
    drop(p);
    get_config_on(&s, 4);
    assert_eq!(sw.lock().unwrap().get_config(), fixture(SIMPLE_ROUTER));
}

/// Wait (at most 5 s) until `f` holds.
fn eventually(what: &str, f: impl Fn() -> bool) {
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while !f() {
        assert!(
            std::time::Instant::now() < until,
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A server bounded to 3 connections: three clients are served and held open; a fourth
/// connection is closed at once (counted), while the three still answer; when one of them
/// leaves, a new client is served again. A client opening connections in a loop cannot take
/// a thread each without end.
#[test]
fn connections_past_the_bound_are_closed_and_the_others_go_on() {
    let sw = std::sync::Arc::new(std::sync::Mutex::new(
        tern_dataplane::Switch::from_json(
            &fixture(SIMPLE_ROUTER),
            tern_dataplane::SwitchOptions::default(),
        )
        .unwrap(),
    ));
    let server = tern_thrift::spawn_stoppable_with("127.0.0.1:0", sw, 3).unwrap();
    let addr = server.addr();
    let mut held: Vec<ThriftRuntime> = (0..3)
        .map(|_| {
            let rt = ThriftRuntime::connect(addr).unwrap();
            assert_eq!(rt.get_config(), fixture(SIMPLE_ROUTER));
            rt
        })
        .collect();
    assert_eq!(server.connections(), 3);
    for k in 1..=2 {
        assert_closed(connect(addr));
        eventually("the refusal counted", || server.refused() == k);
    }
    for rt in &held {
        assert_eq!(rt.get_config(), fixture(SIMPLE_ROUTER));
        assert!(rt.last_error().is_none());
    }
    drop(held.pop());
    eventually("the client's connection to end", || {
        server.connections() == 2
    });
    let rt = ThriftRuntime::connect(addr).unwrap();
    assert_eq!(rt.get_config(), fixture(SIMPLE_ROUTER));
    assert!(rt.last_error().is_none());
    assert_eq!(server.connections(), 3);
    assert_eq!(server.refused(), 2);
}
