//! simple_router configured entirely through the Thrift client: entries, defaults, dumps,
//! deletes and the packets the server-side switch forwards as a result.

mod common;

use common::*;
use tern_runtime::{ActionEntry, MatchParam, OutputPacket, PacketPath, Runtime, TableError};

fn configure(rt: &mut dyn Runtime) -> Vec<u32> {
    for t in ["send_frame", "forward", "ipv4_lpm"] {
        rt.mt_set_default_action(t, "_drop", &[]).unwrap();
    }
    let mut handles = Vec::new();
    for (port, smac_last) in [(1u8, 0u8), (2, 1)] {
        handles.push(
            rt.mt_add_entry(
                "send_frame",
                &[MatchParam::Exact(vec![0, port])],
                "rewrite_mac",
                &[vec![0x00, 0xaa, 0xbb, 0, 0, smac_last]],
                None,
            )
            .unwrap(),
        );
    }
    for (host, dmac_last) in [(0u8, 0u8), (1, 1)] {
        handles.push(
            rt.mt_add_entry(
                "forward",
                &[MatchParam::Exact(vec![10, 0, host, 10])],
                "set_dmac",
                &[vec![0x00, 0x04, 0, 0, 0, dmac_last]],
                None,
            )
            .unwrap(),
        );
    }
    for (host, port) in [(0u8, 1u8), (1, 2)] {
        handles.push(
            rt.mt_add_entry(
                "ipv4_lpm",
                &[MatchParam::Lpm {
                    key: vec![10, 0, host, 10],
                    prefix_len: 32,
                }],
                "set_nhop",
                &[vec![10, 0, host, 10], vec![0, port]],
                None,
            )
            .unwrap(),
        );
    }
    handles
}

#[test]
fn router_configured_over_thrift_forwards_packets() {
    tern_fixtures::require!();
    let (mut rt, sw, _) = client_for(SIMPLE_ROUTER);
    let handles = configure(&mut rt);

    // Dumps come back through the wire with the stored keys and data.
    let lpm = rt.mt_get_entries("ipv4_lpm").unwrap();
    assert_eq!(lpm.len(), 2);
    assert_eq!(
        lpm[1].match_key,
        vec![MatchParam::Lpm {
            key: vec![10, 0, 1, 10],
            prefix_len: 32
        }]
    );
    assert_eq!(lpm[1].priority, -1);
    assert_eq!(
        lpm[1].action,
        ActionEntry::Action {
            name: "set_nhop".into(),
            data: vec![vec![10, 0, 1, 10], vec![0, 2]]
        }
    );
    assert_eq!(rt.mt_get_num_entries("forward").unwrap(), 2);
    assert_eq!(
        rt.mt_get_default_entry("ipv4_lpm").unwrap(),
        ActionEntry::Action {
            name: "_drop".into(),
            data: vec![]
        }
    );
    let one = rt.mt_get_entry("ipv4_lpm", handles[5]).unwrap();
    assert_eq!(one, lpm[1]);

    // The server-side switch forwards according to what the client installed.
    let pkt = ipv4_frame([0; 6], [10, 0, 0, 1], [10, 0, 1, 10], 64);
    let mut out: Vec<OutputPacket> = Vec::new();
    sw.lock().unwrap().process_packet(1, &pkt, &mut out);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].port, 2);
    assert_eq!(&out[0].data[0..6], &[0x00, 0x04, 0, 0, 0, 1]);
    assert_eq!(&out[0].data[6..12], &[0x00, 0xaa, 0xbb, 0, 0, 1]);
    assert_eq!(out[0].data[14 + 8], 63, "TTL decremented");

    // Deleting the route over the wire makes the switch drop the packet.
    rt.mt_delete_entry("ipv4_lpm", handles[5]).unwrap();
    out.clear();
    sw.lock().unwrap().process_packet(1, &pkt, &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(
        rt.mt_delete_entry("ipv4_lpm", handles[5]),
        Err(TableError::INVALID_HANDLE.into())
    );
}

#[test]
fn table_errors_carry_bmv2_codes_and_leave_the_server_running() {
    tern_fixtures::require!();
    let (mut rt, _sw, _) = client_for(SIMPLE_ROUTER);
    let key = [MatchParam::Exact(vec![0, 1])];
    let mac = [vec![0, 1, 2, 3, 4, 5]];
    assert_eq!(
        rt.mt_add_entry("no_such_table", &key, "rewrite_mac", &mac, None),
        Err(TableError::INVALID_TABLE_NAME.into())
    );
    assert_eq!(
        rt.mt_add_entry("send_frame", &key, "set_dmac", &mac, None),
        Err(TableError::INVALID_ACTION_NAME.into())
    );
    let h = rt
        .mt_add_entry("send_frame", &key, "rewrite_mac", &mac, None)
        .unwrap();
    assert_eq!(
        rt.mt_add_entry("send_frame", &key, "rewrite_mac", &mac, None),
        Err(TableError::DUPLICATE_ENTRY.into())
    );
    assert_eq!(
        rt.mt_indirect_add_entry("send_frame", &key, 0, None),
        Err(TableError::WRONG_TABLE_TYPE.into())
    );
    // The connection is still good after all those exceptions.
    rt.mt_modify_entry("send_frame", h, "_drop", &[]).unwrap();
    assert_eq!(
        rt.mt_get_entry("send_frame", h).unwrap().action,
        ActionEntry::Action {
            name: "_drop".into(),
            data: vec![]
        }
    );
    rt.mt_clear_entries("send_frame", false).unwrap();
    assert_eq!(rt.mt_get_num_entries("send_frame").unwrap(), 0);
    assert!(rt.last_error().is_none());
}

#[test]
fn config_round_trips_byte_for_byte() {
    tern_fixtures::require!();
    let (rt, _sw, _) = client_for(SIMPLE_ROUTER);
    let original = fixture(SIMPLE_ROUTER);
    assert_eq!(rt.get_config(), original);
    let md5 = rt.get_config_md5();
    assert_ne!(md5, [0; 16]);
    assert_eq!(md5, _sw.lock().unwrap().get_config_md5());
    let info = rt.switch_info();
    assert_eq!(info.thrift_port, 9090);
    assert!(rt.last_error().is_none());
}
