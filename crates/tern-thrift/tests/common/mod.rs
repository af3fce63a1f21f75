//! Shared test helpers: fixture loading and a tern switch served over Thrift on loopback.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tern_dataplane::{Switch, SwitchOptions};
use tern_thrift::ThriftRuntime;

pub const FIX: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/fixtures/bmv2/"
);

pub fn fixture(rel: &str) -> String {
    std::fs::read_to_string(format!("{FIX}{rel}")).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

pub const ECMP: &str = "targets/simple_switch/tests/CLI_tests/testdata/ecmp.json";
pub const INDIRECT_RES: &str = "targets/simple_switch/tests/CLI_tests/testdata/indirect_res.json";
pub const SIMPLE_ROUTER: &str = "targets/simple_router/simple_router.json";

/// A switch loaded from `rel`, served on 127.0.0.1:0; returns the address and the switch.
pub fn serve_fixture(rel: &str, opts: SwitchOptions) -> (SocketAddr, Arc<Mutex<Switch>>) {
    let sw = Switch::from_json(&fixture(rel), opts).expect("fixture loads");
    let sw = Arc::new(Mutex::new(sw));
    let (addr, _thread) = tern_thrift::spawn("127.0.0.1:0", Arc::clone(&sw)).expect("server binds");
    (addr, sw)
}

/// Serve `rel` and connect a client to it.
pub fn client_for(rel: &str) -> (ThriftRuntime, Arc<Mutex<Switch>>, SocketAddr) {
    let (addr, sw) = serve_fixture(rel, SwitchOptions::default());
    let rt = ThriftRuntime::connect(addr).expect("client connects");
    (rt, sw, addr)
}

/// An Ethernet + IPv4 (+ 8 payload bytes) frame with a correct header checksum.
pub fn ipv4_frame(dst_mac: [u8; 6], src_ip: [u8; 4], dst_ip: [u8; 4], ttl: u8) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst_mac);
    f.extend_from_slice(&[0x00, 0x11, 0x22, 0x33, 0x44, 0x55]);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = vec![
        0x45, 0, 0, 28, 0, 1, 0, 0, ttl, 17, 0, 0, src_ip[0], src_ip[1], src_ip[2], src_ip[3],
        dst_ip[0], dst_ip[1], dst_ip[2], dst_ip[3],
    ];
    let csum = tern_fixtures::ipv4_checksum(&ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&[0x12, 0x34, 0x56, 0x78, 0, 8, 0, 0]);
    f
}
