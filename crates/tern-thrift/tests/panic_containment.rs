//! A runtime that panics inside a call must cost only that call's connection: the server
//! catches the panic, closes the connection, recovers the poisoned switch lock and keeps
//! serving other clients.

use std::sync::{Arc, Mutex};

use tern_runtime::*;
use tern_thrift::ThriftRuntime;

/// Every call panics except `get_config`, which answers `{}`.
struct Exploding;

#[allow(unused_variables)]
impl Runtime for Exploding {
    fn get_config(&self) -> String {
        "{}".to_string()
    }
    fn get_config_md5(&self) -> [u8; 16] {
        panic!("get_config_md5 exploded")
    }
    fn load_new_config(&mut self, json: &str) -> RtResult<()> {
        panic!("load_new_config exploded")
    }
    fn swap_configs(&mut self) -> RtResult<()> {
        panic!("swap_configs exploded")
    }
    fn reset_state(&mut self) {
        panic!("reset_state exploded")
    }
    fn serialize_state(&self) -> String {
        panic!("serialize_state exploded")
    }
    fn switch_info(&self) -> SwitchInfo {
        panic!("switch_info exploded")
    }
    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32> {
        panic!("get_id_from_name exploded")
    }
    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64> {
        panic!("mt_get_num_entries exploded")
    }
    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()> {
        panic!("mt_clear_entries exploded")
    }
    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        panic!("mt_add_entry exploded")
    }
    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        panic!("mt_set_default_action exploded")
    }
    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        panic!("mt_reset_default_entry exploded")
    }
    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        panic!("mt_delete_entry exploded")
    }
    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        panic!("mt_modify_entry exploded")
    }
    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()> {
        panic!("mt_set_entry_ttl exploded")
    }
    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        panic!("mt_indirect_add_entry exploded")
    }
    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()> {
        panic!("mt_indirect_modify_entry exploded")
    }
    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        panic!("mt_indirect_delete_entry exploded")
    }
    fn mt_indirect_set_default_member(
        &mut self,
        table: &str,
        member: MemberHandle,
    ) -> RtResult<()> {
        panic!("mt_indirect_set_default_member exploded")
    }
    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        panic!("mt_indirect_reset_default_entry exploded")
    }
    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        panic!("mt_indirect_ws_add_entry exploded")
    }
    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        panic!("mt_indirect_ws_modify_entry exploded")
    }
    fn mt_indirect_ws_set_default_group(
        &mut self,
        table: &str,
        group: GroupHandle,
    ) -> RtResult<()> {
        panic!("mt_indirect_ws_set_default_group exploded")
    }
    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        panic!("mt_read_counter exploded")
    }
    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()> {
        panic!("mt_reset_counters exploded")
    }
    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        panic!("mt_write_counter exploded")
    }
    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()> {
        panic!("mt_set_meter_rates exploded")
    }
    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> {
        panic!("mt_get_meter_rates exploded")
    }
    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>> {
        panic!("mt_get_entries exploded")
    }
    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry> {
        panic!("mt_get_entry exploded")
    }
    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry> {
        panic!("mt_get_default_entry exploded")
    }
    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry> {
        panic!("mt_get_entry_from_key exploded")
    }
    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle> {
        panic!("act_prof_add_member exploded")
    }
    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()> {
        panic!("act_prof_delete_member exploded")
    }
    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        panic!("act_prof_modify_member exploded")
    }
    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle> {
        panic!("act_prof_create_group exploded")
    }
    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()> {
        panic!("act_prof_delete_group exploded")
    }
    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        panic!("act_prof_add_member_to_group exploded")
    }
    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        panic!("act_prof_remove_member_from_group exploded")
    }
    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>> {
        panic!("act_prof_get_members exploded")
    }
    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember> {
        panic!("act_prof_get_member exploded")
    }
    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>> {
        panic!("act_prof_get_groups exploded")
    }
    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> {
        panic!("act_prof_get_group exploded")
    }
    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        panic!("counter_read exploded")
    }
    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()> {
        panic!("counter_reset_all exploded")
    }
    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()> {
        panic!("counter_write exploded")
    }
    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()> {
        panic!("meter_array_set_rates exploded")
    }
    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> {
        panic!("meter_set_rates exploded")
    }
    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>> {
        panic!("meter_get_rates exploded")
    }
    fn register_read(&self, register: &str, index: u32) -> RtResult<u64> {
        panic!("register_read exploded")
    }
    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>> {
        panic!("register_read_all exploded")
    }
    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()> {
        panic!("register_write exploded")
    }
    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()> {
        panic!("register_write_range exploded")
    }
    fn register_reset(&mut self, register: &str) -> RtResult<()> {
        panic!("register_reset exploded")
    }
    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        panic!("parse_vset_add exploded")
    }
    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        panic!("parse_vset_remove exploded")
    }
    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>> {
        panic!("parse_vset_get exploded")
    }
    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()> {
        panic!("parse_vset_clear exploded")
    }
    fn learning_ack(&mut self, list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()> {
        panic!("learning_ack exploded")
    }
    fn learning_ack_buffer(&mut self, list_id: i32, buffer_id: i64) -> RtResult<()> {
        panic!("learning_ack_buffer exploded")
    }
    fn learning_set_timeout(&mut self, list_id: i32, timeout_ms: u32) -> RtResult<()> {
        panic!("learning_set_timeout exploded")
    }
    fn learning_set_buffer_size(&mut self, list_id: i32, nb_samples: u32) -> RtResult<()> {
        panic!("learning_set_buffer_size exploded")
    }
    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        panic!("set_crc16_custom_parameters exploded")
    }
    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        panic!("set_crc32_custom_parameters exploded")
    }
    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()> {
        panic!("set_toeplitz_hash_key exploded")
    }
    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()> {
        panic!("dev_mgr_add_port exploded")
    }
    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()> {
        panic!("dev_mgr_remove_port exploded")
    }
    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>> {
        panic!("dev_mgr_show_ports exploded")
    }
    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32> {
        panic!("mc_mgrp_create exploded")
    }
    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()> {
        panic!("mc_mgrp_destroy exploded")
    }
    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> {
        panic!("mc_node_create exploded")
    }
    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        panic!("mc_node_associate exploded")
    }
    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        panic!("mc_node_dissociate exploded")
    }
    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()> {
        panic!("mc_node_destroy exploded")
    }
    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> {
        panic!("mc_node_update exploded")
    }
    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()> {
        panic!("mc_set_lag_membership exploded")
    }
    fn mc_get_entries(&self) -> RtResult<String> {
        panic!("mc_get_entries exploded")
    }
    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()> {
        panic!("mirroring_session_add exploded")
    }
    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()> {
        panic!("mirroring_session_delete exploded")
    }
    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession> {
        panic!("mirroring_session_get exploded")
    }
    fn set_egress_queue_depth(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        depth_pkts: u32,
    ) -> RtResult<()> {
        panic!("set_egress_queue_depth exploded")
    }
    fn set_egress_queue_rate(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        rate_pps: u64,
    ) -> RtResult<()> {
        panic!("set_egress_queue_rate exploded")
    }
    fn get_time_elapsed_us(&self) -> u64 {
        panic!("get_time_elapsed_us exploded")
    }
    fn get_time_since_epoch_us(&self) -> u64 {
        panic!("get_time_since_epoch_us exploded")
    }
}

#[test]
fn a_panicking_call_closes_only_its_connection() {
    let sw = Arc::new(Mutex::new(Exploding));
    let (addr, _t) = tern_thrift::spawn("127.0.0.1:0", Arc::clone(&sw)).unwrap();
    let mut rt = ThriftRuntime::connect(addr).unwrap();
    assert_eq!(rt.get_config(), "{}");
    assert_eq!(
        rt.mt_clear_entries("t", false),
        Err(TableError::ERROR.into())
    );
    let why = rt.last_error().unwrap();
    assert!(why.contains("transport"), "{why}");
    // The lock was poisoned by the panic; the server recovers it for the next clients.
    assert!(sw.is_poisoned());
    for _ in 0..3 {
        let other = ThriftRuntime::connect(addr).unwrap();
        assert_eq!(other.get_config(), "{}");
        assert_eq!(other.last_error(), None);
    }
}
