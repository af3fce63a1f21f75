//! Action profiles, selector groups and indirect tables (ecmp.json), the multicast PRE and
//! mirroring sessions, all over the wire and checked against the server-side switch.

mod common;

use common::*;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{
    ActionEntry, MatchParam, McError, MirroringError, MirroringSession, OutputPacket, PacketPath,
    ProfileGroup, Runtime, TableError,
};
use tern_thrift::{PreService, ThriftRuntime};

const AP: &str = "ecmp_action_profile";

fn nhop(ip: [u8; 4], port: u8) -> Vec<Vec<u8>> {
    vec![ip.to_vec(), vec![0, port]]
}

fn route(sw: &mut Switch, dst: [u8; 4]) -> Vec<OutputPacket> {
    let mut out = Vec::new();
    sw.process_packet(0, &ipv4_frame([0; 6], [10, 0, 0, 1], dst, 64), &mut out);
    out
}

#[test]
fn ecmp_groups_drive_forwarding() {
    tern_fixtures::require!();
    let (mut rt, sw, _) = client_for(ECMP);
    // Next hops and their MACs.
    for (host, port) in [(1u8, 1u8), (2, 2)] {
        rt.mt_add_entry(
            "forward",
            &[MatchParam::Exact(vec![10, 0, 0, host])],
            "set_dmac",
            &[vec![0, 4, 0, 0, 0, host]],
            None,
        )
        .unwrap();
        rt.mt_add_entry(
            "send_frame",
            &[MatchParam::Exact(vec![0, port])],
            "rewrite_mac",
            &[vec![0, 0xaa, 0, 0, 0, port]],
            None,
        )
        .unwrap();
    }
    let m1 = rt
        .act_prof_add_member(AP, "set_nhop", &nhop([10, 0, 0, 1], 1))
        .unwrap();
    let m2 = rt
        .act_prof_add_member(AP, "set_nhop", &nhop([10, 0, 0, 2], 2))
        .unwrap();
    assert_ne!(m1, m2);
    let members = rt.act_prof_get_members(AP).unwrap();
    assert_eq!(members.len(), 2);
    assert_eq!(members[1].action, "set_nhop");
    assert_eq!(members[1].data, nhop([10, 0, 0, 2], 2));

    let g = rt.act_prof_create_group(AP).unwrap();
    rt.act_prof_add_member_to_group(AP, m1, g).unwrap();
    assert_eq!(
        rt.act_prof_add_member_to_group(AP, m1, g),
        Err(TableError::MBR_ALREADY_IN_GRP.into())
    );
    let key = [MatchParam::Lpm {
        key: vec![10, 0, 9, 0],
        prefix_len: 24,
    }];
    let h = rt
        .mt_indirect_ws_add_entry("ecmp_group", &key, g, None)
        .unwrap();
    assert_eq!(
        rt.mt_get_entry("ecmp_group", h).unwrap().action,
        ActionEntry::Group(g)
    );
    let out = route(&mut sw.lock().unwrap(), [10, 0, 9, 7]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].port, 1);

    // Swap the group's only member: traffic follows.
    rt.act_prof_add_member_to_group(AP, m2, g).unwrap();
    rt.act_prof_remove_member_from_group(AP, m1, g).unwrap();
    assert_eq!(
        rt.act_prof_get_group(AP, g).unwrap(),
        ProfileGroup {
            handle: g,
            members: vec![m2]
        }
    );
    let out = route(&mut sw.lock().unwrap(), [10, 0, 9, 7]);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].port, 2);
    assert_eq!(&out[0].data[0..6], &[0, 4, 0, 0, 0, 2]);

    // A member used by a group cannot go; an indirect entry can point at a member directly.
    assert_eq!(
        rt.act_prof_delete_member(AP, m2),
        Err(TableError::MBR_STILL_USED.into())
    );
    rt.mt_indirect_modify_entry("ecmp_group", h, m1).unwrap();
    let out = route(&mut sw.lock().unwrap(), [10, 0, 9, 7]);
    assert_eq!(out[0].port, 1);
    assert_eq!(rt.act_prof_get_groups(AP).unwrap().len(), 1);
    rt.mt_indirect_delete_entry("ecmp_group", h).unwrap();
    let out = route(&mut sw.lock().unwrap(), [10, 0, 9, 7]);
    assert!(out.iter().all(|p| p.port != 1 && p.port != 2), "{out:?}");
    assert_eq!(
        rt.act_prof_get_member(AP, 999),
        Err(TableError::INVALID_MBR_HANDLE.into())
    );
    assert!(rt.last_error().is_none());
}

/// Every PRE and mirroring call returns over the wire exactly what it returns locally.
#[test]
fn pre_and_mirroring_match_a_local_switch() {
    tern_fixtures::require!();
    let (mut rt, _sw, addr) = client_for(SIMPLE_ROUTER);
    let mut local = Switch::from_json(&fixture(SIMPLE_ROUTER), SwitchOptions::default()).unwrap();
    let script = |r: &mut dyn Runtime| -> Vec<String> {
        let mut log = Vec::new();
        log.push(format!("{:?}", r.mc_mgrp_create(1)));
        log.push(format!("{:?}", r.mc_mgrp_create(1)));
        log.push(format!("{:?}", r.mc_node_create(0, &[1, 2], &[])));
        log.push(format!("{:?}", r.mc_node_create(7, &[0, 3, 9], &[1])));
        log.push(format!("{:?}", r.mc_node_associate(1, 0)));
        log.push(format!("{:?}", r.mc_node_associate(1, 1)));
        log.push(format!("{:?}", r.mc_node_associate(5, 0)));
        log.push(format!("{:?}", r.mc_node_update(1, &[4], &[])));
        log.push(format!("{:?}", r.mc_set_lag_membership(1, &[5, 6])));
        log.push(format!("{:?}", r.mc_get_entries()));
        log.push(format!("{:?}", r.mc_node_dissociate(1, 1)));
        log.push(format!("{:?}", r.mc_node_destroy(1)));
        log.push(format!("{:?}", r.mc_node_destroy(1)));
        log.push(format!("{:?}", r.mc_mgrp_destroy(1)));
        log.push(format!("{:?}", r.mc_get_entries()));
        let s = MirroringSession {
            port: Some(3),
            mgid: None,
        };
        log.push(format!("{:?}", r.mirroring_session_add(5, s)));
        log.push(format!("{:?}", r.mirroring_session_get(5)));
        log.push(format!("{:?}", r.mirroring_session_delete(5)));
        log.push(format!("{:?}", r.mirroring_session_get(5)));
        log
    };
    let remote = script(&mut rt);
    let direct = script(&mut local);
    assert_eq!(remote, direct);
    // Spot-check the values the script went through.
    assert_eq!(remote[0], "Ok(1)");
    assert_eq!(
        remote[16],
        "Ok(MirroringSession { port: Some(3), mgid: None })"
    );
    assert_eq!(
        remote[18],
        format!(
            "{:?}",
            Err::<(), _>(tern_runtime::RuntimeError::from(
                MirroringError::SESSION_NOT_FOUND
            ))
        )
    );
    assert!(remote[9].contains(r#"\"rid\":7"#), "{}", remote[9]);
    assert!(remote[9].contains(r#"\"ports\":[4]"#), "{}", remote[9]);
    assert!(
        remote[9].contains(r#"{\"id\":1,\"ports\":[5,6]}"#),
        "{}",
        remote[9]
    );

    // The plain `simple_pre` service: same PRE, no LAGs.
    let mut plain = ThriftRuntime::connect_with(addr, PreService::Plain).unwrap();
    assert_eq!(plain.mc_mgrp_create(2), Ok(2));
    let n = plain.mc_node_create(1, &[1], &[]).unwrap();
    plain.mc_node_associate(2, n).unwrap();
    assert_eq!(
        plain.mc_node_create(1, &[1], &[2]),
        Err(McError::ERROR.into())
    );
    assert!(plain.last_error().unwrap().contains("simple_pre"));
    let dump = rt.mc_get_entries().unwrap();
    assert!(dump.contains(r#"{"id":2,"l1_handles":[1]}"#), "{dump}");
    assert_eq!(dump, _sw.lock().unwrap().mc_get_entries().unwrap());
}
