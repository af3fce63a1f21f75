//! The client's side of failure: a server that vanishes or talks nonsense, calls BMv2's API
//! cannot express, and many clients at once (one server thread per connection).

mod common;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::thread;

use common::*;
use tern_runtime::{DevMgrError, MatchParam, McError, Runtime, TableError};
use tern_thrift::{PreService, ThriftRuntime};

/// A one-shot fake server: accepts one connection, reads a request, answers `reply`, closes.
fn fake_server(reply: &'static [u8]) -> std::net::SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = s.write_all(reply);
        }
    });
    addr
}

#[test]
fn vanished_server_is_a_clear_error_not_a_hang_or_panic() {
    let addr = fake_server(b"");
    let mut rt = ThriftRuntime::connect(addr).unwrap();
    assert_eq!(
        rt.mt_clear_entries("t", false),
        Err(TableError::ERROR.into())
    );
    let why = rt.last_error().expect("the failure is described");
    assert!(why.contains("transport"), "{why}");
    // Infallible trait methods fall back to empty values and still say why.
    assert_eq!(rt.get_config(), "");
    let why = rt.last_error().unwrap();
    assert!(why.contains("broken"), "{why}");
    assert_eq!(rt.last_error(), None, "last_error is cleared once read");
}

#[test]
fn nonsense_reply_is_a_protocol_error() {
    let addr = fake_server(b"\x80\x01\x00\x02\xff\xff\xff\xffgarbage");
    let rt = ThriftRuntime::connect(addr).unwrap();
    assert_eq!(rt.mt_get_num_entries("t"), Err(TableError::ERROR.into()));
    let why = rt.last_error().unwrap();
    assert!(why.contains("negative"), "{why}");
}

#[test]
fn calls_bmv2_cannot_express_are_refused_locally() {
    tern_fixtures::require!();
    let (mut rt, _sw, addr) = client_for(SIMPLE_ROUTER);
    assert_eq!(
        rt.set_egress_queue_depth(None, Some(2), 10),
        Err(DevMgrError::ERROR.into())
    );
    assert!(rt.last_error().unwrap().contains("no such call"));
    let mut plain = ThriftRuntime::connect_with(addr, PreService::Plain).unwrap();
    assert_eq!(
        plain.mc_set_lag_membership(1, &[1]),
        Err(McError::ERROR.into())
    );
    assert!(plain.last_error().unwrap().contains("simple_pre"));
    // The connections are still fine afterwards.
    assert_eq!(rt.mt_get_num_entries("ipv4_lpm"), Ok(0));
    assert_eq!(plain.mc_mgrp_create(9), Ok(9));
}

#[test]
fn many_clients_at_once_and_an_idle_one_blocks_nobody() {
    tern_fixtures::require!();
    let (addr, sw) = serve_fixture(SIMPLE_ROUTER, Default::default());
    // A client that connects and never sends a byte.
    let idle = std::net::TcpStream::connect(addr).unwrap();
    let workers: Vec<_> = (0..4u8)
        .map(|w| {
            thread::spawn(move || {
                let mut rt = ThriftRuntime::connect(addr).unwrap();
                for i in 0..25u8 {
                    rt.mt_add_entry(
                        "forward",
                        &[MatchParam::Exact(vec![10, w, i, 1])],
                        "set_dmac",
                        &[vec![0, 0, 0, 0, w, i]],
                        None,
                    )
                    .unwrap();
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let rt = ThriftRuntime::connect(addr).unwrap();
    assert_eq!(rt.mt_get_num_entries("forward"), Ok(100));
    assert_eq!(sw.lock().unwrap().mt_get_num_entries("forward"), Ok(100));
    drop(idle);
}
