//! Action data read back over the wire is what simple_switch's server sends: each parameter as
//! the value's minimal big-endian bytes, at least one byte (BMv2's `Data::get_string`), not
//! the `(bitwidth + 7) / 8` bytes the client wrote. The stock `simple_switch_CLI` prints those
//! bytes as they come (`Action entry: set_nhop - 0a000001, 01`). `ThriftRuntime` widens them
//! back to the parameter width, so it returns what a local switch returns.

mod common;

use std::net::{SocketAddr, TcpStream};

use common::*;
use tern_runtime::{ActionEntry, MatchParam, Runtime};
use tern_thrift::gen::standard::{
    BmMatchParam, BmMatchParamExact, BmMatchParamType, StandardSyncClient, TStandardSyncClient,
};
use tern_thrift::ThriftRuntime;
use thrift::protocol::{TBinaryInputProtocol, TBinaryOutputProtocol, TMultiplexedOutputProtocol};
use thrift::transport::{
    ReadHalf, TBufferedReadTransport, TBufferedWriteTransport, TIoChannel, TTcpChannel, WriteHalf,
};

type Client = StandardSyncClient<
    TBinaryInputProtocol<TBufferedReadTransport<ReadHalf<TTcpChannel>>>,
    TMultiplexedOutputProtocol<
        TBinaryOutputProtocol<TBufferedWriteTransport<WriteHalf<TTcpChannel>>>,
    >,
>;

/// A plain generated `standard` client (what the stock CLI's Python stubs are).
fn raw_client(addr: SocketAddr) -> Client {
    let ch = TTcpChannel::with_stream(TcpStream::connect(addr).unwrap());
    let (r, w) = ch.split().unwrap();
    StandardSyncClient::new(
        TBinaryInputProtocol::new(TBufferedReadTransport::new(r), true),
        TMultiplexedOutputProtocol::new(
            "standard",
            TBinaryOutputProtocol::new(TBufferedWriteTransport::new(w), true),
        ),
    )
}

fn exact(key: Vec<u8>) -> BmMatchParam {
    BmMatchParam {
        type_: Some(BmMatchParamType::EXACT),
        exact: Some(BmMatchParamExact::new(key)),
        lpm: None,
        ternary: None,
        valid: None,
        range: None,
    }
}

#[test]
fn members_come_back_as_minimal_bytes() {
    tern_fixtures::require!();
    let (addr, _sw) = serve_fixture(ECMP, Default::default());
    let mut c = raw_client(addr);
    // set_nhop(nhop_ipv4: 32 bits, port: 9 bits): 10.0.0.1 and port 1 as the CLI sends them.
    let m = c
        .bm_mt_act_prof_add_member(
            0,
            "ecmp_action_profile".into(),
            "set_nhop".into(),
            vec![vec![10, 0, 0, 1], vec![0, 1]],
        )
        .unwrap();
    let got = c
        .bm_mt_act_prof_get_member(0, "ecmp_action_profile".into(), m)
        .unwrap();
    assert_eq!(got.action_data, Some(vec![vec![10, 0, 0, 1], vec![1]]));
    // Zero is one byte.
    let m0 = c
        .bm_mt_act_prof_add_member(
            0,
            "ecmp_action_profile".into(),
            "set_nhop".into(),
            vec![vec![0, 0, 0, 0], vec![0, 0]],
        )
        .unwrap();
    let all = c
        .bm_mt_act_prof_get_members(0, "ecmp_action_profile".into())
        .unwrap();
    assert_eq!(all.len(), 2);
    let zero = all.iter().find(|x| x.mbr_handle == Some(m0)).unwrap();
    assert_eq!(zero.action_data, Some(vec![vec![0], vec![0]]));

    // ThriftRuntime gives the parameter widths back, like the switch itself.
    let rt = ThriftRuntime::connect(addr).unwrap();
    let mm = rt
        .act_prof_get_member("ecmp_action_profile", m as u32)
        .unwrap();
    assert_eq!(mm.data, vec![vec![10, 0, 0, 1], vec![0, 1]]);
    assert_eq!(rt.last_error(), None);
}

#[test]
fn table_entries_and_defaults_come_back_as_minimal_bytes() {
    tern_fixtures::require!();
    let (addr, _sw) = serve_fixture(ECMP, Default::default());
    let mut c = raw_client(addr);
    // forward: exact on a 32-bit next hop; set_dmac(dmac: 48 bits).
    let h = c
        .bm_mt_add_entry(
            0,
            "forward".into(),
            vec![exact(vec![10, 0, 0, 1])],
            "set_dmac".into(),
            vec![vec![0, 0, 0, 0, 0x12, 0x34]],
            Default::default(),
        )
        .unwrap();
    let e = c.bm_mt_get_entry(0, "forward".into(), h).unwrap();
    let a = e.action_entry.unwrap();
    assert_eq!(a.action_data, Some(vec![vec![0x12, 0x34]]));
    c.bm_mt_set_default_action(0, "forward".into(), "set_dmac".into(), vec![vec![0; 6]])
        .unwrap();
    let d = c.bm_mt_get_default_entry(0, "forward".into()).unwrap();
    assert_eq!(d.action_data, Some(vec![vec![0]]));
    let all = c.bm_mt_get_entries(0, "forward".into()).unwrap();
    assert_eq!(
        all[0].action_entry.as_ref().unwrap().action_data,
        Some(vec![vec![0x12, 0x34]])
    );

    let rt = ThriftRuntime::connect(addr).unwrap();
    let e = rt
        .mt_get_entry_from_key("forward", &[MatchParam::Exact(vec![10, 0, 0, 1])], None)
        .unwrap();
    assert_eq!(
        e.action,
        ActionEntry::Action {
            name: "set_dmac".into(),
            data: vec![vec![0, 0, 0, 0, 0x12, 0x34]]
        }
    );
    assert_eq!(
        rt.mt_get_default_entry("forward").unwrap(),
        ActionEntry::Action {
            name: "set_dmac".into(),
            data: vec![vec![0; 6]]
        }
    );
}
