//! A tenant's handle on its device: the device's [`Runtime`] (with the device's quotas
//! applied) and a [`PacketPath`] that sends packets through the whole virtual switch.
//!
//! Runtime calls go to the device's own switch; adds that would take the device past its
//! entry quota are refused with `TABLE_FULL` (what BMv2 answers for a full table) before the
//! switch sees them. Packets given to [`PacketPath::process_packet`] arrive on a *physical*
//! port and go through the classifier, links and port maps like any other packet, so the
//! STF runner and the CLI language drive one tenant inside the slice exactly as they drive a
//! native switch.

use tern_runtime::*;

use crate::{Device, DeviceId, VirtSwitch};

/// One device's control and packet handle (see [`VirtSwitch::runtime`]).
pub struct DeviceRuntime<'a> {
    pub(crate) vs: &'a mut VirtSwitch,
    pub(crate) id: DeviceId,
}

impl DeviceRuntime<'_> {
    /// The device this handle controls.
    pub fn device_id(&self) -> DeviceId {
        self.id
    }

    /// The device's program.
    pub fn program(&self) -> &tern_model::Program {
        self.dev().switch.program()
    }

    pub(crate) fn dev(&self) -> &Device {
        self.vs
            .devices
            .get(&self.id)
            .expect("the handle's device exists while it lives")
    }

    fn dev_mut(&mut self) -> &mut Device {
        self.vs
            .devices
            .get_mut(&self.id)
            .expect("the handle's device exists while it lives")
    }
}

impl PacketPath for DeviceRuntime<'_> {
    fn process_packet(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        self.vs.process_batch(&[(port, data)], out);
    }

    fn take_digests(&mut self) -> Vec<Digest> {
        self.dev_mut().switch.take_digests()
    }
}

impl Runtime for DeviceRuntime<'_> {
    fn get_config(&self) -> String {
        self.dev().switch.get_config()
    }

    fn get_config_md5(&self) -> [u8; 16] {
        self.dev().switch.get_config_md5()
    }

    fn load_new_config(&mut self, json: &str) -> RtResult<()> {
        self.dev_mut().switch.load_new_config(json)
    }

    fn swap_configs(&mut self) -> RtResult<()> {
        self.dev_mut().switch.swap_configs()
    }

    fn reset_state(&mut self) {
        self.dev_mut().switch.reset_state()
    }

    fn serialize_state(&self) -> String {
        self.dev().switch.serialize_state()
    }

    fn switch_info(&self) -> SwitchInfo {
        self.dev().switch.switch_info()
    }

    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32> {
        self.dev().switch.get_id_from_name(kind, name)
    }

    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64> {
        self.dev().switch.mt_get_num_entries(table)
    }

    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_clear_entries(table, reset_default_entry)
    }

    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.dev().check_entry_quota()?;
        self.dev_mut()
            .switch
            .mt_add_entry(table, key, action, data, priority)
    }

    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_set_default_action(table, action, data)
    }

    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.dev_mut().switch.mt_reset_default_entry(table)
    }

    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.dev_mut().switch.mt_delete_entry(table, handle)
    }

    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_modify_entry(table, handle, action, data)
    }

    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_set_entry_ttl(table, handle, timeout_ms)
    }

    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.dev().check_entry_quota()?;
        self.dev_mut()
            .switch
            .mt_indirect_add_entry(table, key, member, priority)
    }

    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_indirect_modify_entry(table, handle, member)
    }

    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_indirect_delete_entry(table, handle)
    }

    fn mt_indirect_set_default_member(
        &mut self,
        table: &str,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_indirect_set_default_member(table, member)
    }

    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.dev_mut().switch.mt_indirect_reset_default_entry(table)
    }

    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.dev().check_entry_quota()?;
        self.dev_mut()
            .switch
            .mt_indirect_ws_add_entry(table, key, group, priority)
    }

    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_indirect_ws_modify_entry(table, handle, group)
    }

    fn mt_indirect_ws_set_default_group(
        &mut self,
        table: &str,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_indirect_ws_set_default_group(table, group)
    }

    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        self.dev().switch.mt_read_counter(table, handle)
    }

    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()> {
        self.dev_mut().switch.mt_reset_counters(table)
    }

    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        self.dev_mut().switch.mt_write_counter(table, handle, value)
    }

    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .mt_set_meter_rates(table, handle, rates)
    }

    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> {
        self.dev().switch.mt_get_meter_rates(table, handle)
    }

    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>> {
        self.dev().switch.mt_get_entries(table)
    }

    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry> {
        self.dev().switch.mt_get_entry(table, handle)
    }

    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry> {
        self.dev().switch.mt_get_default_entry(table)
    }

    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry> {
        self.dev()
            .switch
            .mt_get_entry_from_key(table, key, priority)
    }

    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle> {
        self.dev_mut()
            .switch
            .act_prof_add_member(prof, action, data)
    }

    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()> {
        self.dev_mut().switch.act_prof_delete_member(prof, member)
    }

    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .act_prof_modify_member(prof, member, action, data)
    }

    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle> {
        self.dev_mut().switch.act_prof_create_group(prof)
    }

    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()> {
        self.dev_mut().switch.act_prof_delete_group(prof, group)
    }

    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .act_prof_add_member_to_group(prof, member, group)
    }

    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .act_prof_remove_member_from_group(prof, member, group)
    }

    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>> {
        self.dev().switch.act_prof_get_members(prof)
    }

    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember> {
        self.dev().switch.act_prof_get_member(prof, member)
    }

    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>> {
        self.dev().switch.act_prof_get_groups(prof)
    }

    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> {
        self.dev().switch.act_prof_get_group(prof, group)
    }

    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        self.dev().switch.counter_read(counter, index)
    }

    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()> {
        self.dev_mut().switch.counter_reset_all(counter)
    }

    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()> {
        self.dev_mut().switch.counter_write(counter, index, value)
    }

    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()> {
        self.dev_mut().switch.meter_array_set_rates(meter, rates)
    }

    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> {
        self.dev_mut().switch.meter_set_rates(meter, index, rates)
    }

    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>> {
        self.dev().switch.meter_get_rates(meter, index)
    }

    fn register_read(&self, register: &str, index: u32) -> RtResult<u64> {
        self.dev().switch.register_read(register, index)
    }

    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>> {
        self.dev().switch.register_read_all(register)
    }

    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()> {
        self.dev_mut().switch.register_write(register, index, value)
    }

    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .register_write_range(register, start, end, value)
    }

    fn register_reset(&mut self, register: &str) -> RtResult<()> {
        self.dev_mut().switch.register_reset(register)
    }

    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        self.dev_mut().switch.parse_vset_add(vset, value)
    }

    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        self.dev_mut().switch.parse_vset_remove(vset, value)
    }

    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>> {
        self.dev().switch.parse_vset_get(vset)
    }

    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()> {
        self.dev_mut().switch.parse_vset_clear(vset)
    }

    fn learning_ack(&mut self, list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()> {
        self.dev_mut()
            .switch
            .learning_ack(list_id, buffer_id, sample_ids)
    }

    fn learning_ack_buffer(&mut self, list_id: i32, buffer_id: i64) -> RtResult<()> {
        self.dev_mut()
            .switch
            .learning_ack_buffer(list_id, buffer_id)
    }

    fn learning_set_timeout(&mut self, list_id: i32, timeout_ms: u32) -> RtResult<()> {
        self.dev_mut()
            .switch
            .learning_set_timeout(list_id, timeout_ms)
    }

    fn learning_set_buffer_size(&mut self, list_id: i32, nb_samples: u32) -> RtResult<()> {
        self.dev_mut()
            .switch
            .learning_set_buffer_size(list_id, nb_samples)
    }

    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        self.dev_mut()
            .switch
            .set_crc16_custom_parameters(calc, config)
    }

    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        self.dev_mut()
            .switch
            .set_crc32_custom_parameters(calc, config)
    }

    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()> {
        self.dev_mut().switch.set_toeplitz_hash_key(calc, key)
    }

    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .dev_mgr_add_port(iface_name, port, pcap_path)
    }

    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()> {
        self.dev_mut().switch.dev_mgr_remove_port(port)
    }

    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>> {
        self.dev().switch.dev_mgr_show_ports()
    }

    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32> {
        self.dev_mut().switch.mc_mgrp_create(mgid)
    }

    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()> {
        self.dev_mut().switch.mc_mgrp_destroy(mgrp_handle)
    }

    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> {
        self.dev_mut().switch.mc_node_create(rid, ports, lags)
    }

    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        self.dev_mut().switch.mc_node_associate(mgrp_handle, node)
    }

    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        self.dev_mut().switch.mc_node_dissociate(mgrp_handle, node)
    }

    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()> {
        self.dev_mut().switch.mc_node_destroy(node)
    }

    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> {
        self.dev_mut().switch.mc_node_update(node, ports, lags)
    }

    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()> {
        self.dev_mut().switch.mc_set_lag_membership(lag, ports)
    }

    fn mc_get_entries(&self) -> RtResult<String> {
        self.dev().switch.mc_get_entries()
    }

    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()> {
        self.dev_mut().switch.mirroring_session_add(id, session)
    }

    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()> {
        self.dev_mut().switch.mirroring_session_delete(id)
    }

    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession> {
        self.dev().switch.mirroring_session_get(id)
    }

    fn set_egress_queue_depth(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        depth_pkts: u32,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .set_egress_queue_depth(port, priority, depth_pkts)
    }

    fn set_egress_queue_rate(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        rate_pps: u64,
    ) -> RtResult<()> {
        self.dev_mut()
            .switch
            .set_egress_queue_rate(port, priority, rate_pps)
    }

    fn get_time_elapsed_us(&self) -> u64 {
        self.dev().switch.get_time_elapsed_us()
    }

    fn get_time_since_epoch_us(&self) -> u64 {
        self.dev().switch.get_time_since_epoch_us()
    }
}
