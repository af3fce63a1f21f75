//! A device's runtime API shared across threads: [`SharedDevice`] locks the whole
//! [`VirtSwitch`] for each call and acts for one caller on one device, so a control server
//! (BMv2's Thrift API through `tern_thrift::serve`) can be run per tenant while packets flow.

use std::sync::{Arc, Mutex, MutexGuard};

use tern_runtime::*;

use crate::{Caller, DeviceId, VirtError, VirtSwitch};

/// One device's [`Runtime`], for one caller, over a shared [`VirtSwitch`]. Every call
/// re-checks that the caller reaches the device; once the device is gone (or was never the
/// caller's), calls fail with `TableError::ERROR`-family codes and getters return empty
/// values, exactly as for a device that does not exist.
#[derive(Clone, Debug)]
pub struct SharedDevice {
    vs: Arc<Mutex<VirtSwitch>>,
    owner: Option<String>,
    id: DeviceId,
}

fn gone() -> RuntimeError {
    TableError::ERROR.into()
}

impl SharedDevice {
    /// A handle for `caller` on device `id`; refused exactly like a missing device when the
    /// caller does not reach it.
    pub fn new(
        vs: Arc<Mutex<VirtSwitch>>,
        caller: Caller,
        id: DeviceId,
    ) -> Result<SharedDevice, VirtError> {
        let owner = match caller {
            Caller::Operator => None,
            Caller::Tenant(t) => Some(t.to_string()),
        };
        let h = SharedDevice { vs, owner, id };
        h.lock().reachable(h.caller(), id)?;
        Ok(h)
    }

    /// The device this handle controls.
    pub fn device_id(&self) -> DeviceId {
        self.id
    }

    fn caller(&self) -> Caller<'_> {
        match &self.owner {
            None => Caller::Operator,
            Some(t) => Caller::Tenant(t),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VirtSwitch> {
        // Device panics are caught inside the switch; a poisoned lock still holds a
        // consistent switch.
        self.vs.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn with<T>(
        &self,
        f: impl FnOnce(&mut crate::DeviceRuntime<'_>) -> T,
        missing: impl FnOnce() -> T,
    ) -> T {
        let mut vs = self.lock();
        match vs.runtime(self.caller(), self.id) {
            Ok(mut rt) => f(&mut rt),
            Err(_) => missing(),
        }
    }
}

impl Runtime for SharedDevice {
    fn get_config(&self) -> String {
        self.with(|rt| rt.get_config(), String::new)
    }

    fn get_config_md5(&self) -> [u8; 16] {
        self.with(|rt| rt.get_config_md5(), || [0; 16])
    }

    fn load_new_config(&mut self, json: &str) -> RtResult<()> {
        self.with(|rt| rt.load_new_config(json), || Err(gone()))
    }

    fn swap_configs(&mut self) -> RtResult<()> {
        self.with(|rt| rt.swap_configs(), || Err(gone()))
    }

    fn reset_state(&mut self) {
        self.with(|rt| rt.reset_state(), || ())
    }

    fn serialize_state(&self) -> String {
        self.with(|rt| rt.serialize_state(), String::new)
    }

    fn switch_info(&self) -> SwitchInfo {
        self.with(|rt| rt.switch_info(), SwitchInfo::default)
    }

    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32> {
        self.with(|rt| rt.get_id_from_name(kind, name), || Err(gone()))
    }

    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64> {
        self.with(|rt| rt.mt_get_num_entries(table), || Err(gone()))
    }

    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()> {
        self.with(
            |rt| rt.mt_clear_entries(table, reset_default_entry),
            || Err(gone()),
        )
    }

    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.with(
            |rt| rt.mt_add_entry(table, key, action, data, priority),
            || Err(gone()),
        )
    }

    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_set_default_action(table, action, data),
            || Err(gone()),
        )
    }

    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.with(|rt| rt.mt_reset_default_entry(table), || Err(gone()))
    }

    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.with(|rt| rt.mt_delete_entry(table, handle), || Err(gone()))
    }

    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_modify_entry(table, handle, action, data),
            || Err(gone()),
        )
    }

    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_set_entry_ttl(table, handle, timeout_ms),
            || Err(gone()),
        )
    }

    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.with(
            |rt| rt.mt_indirect_add_entry(table, key, member, priority),
            || Err(gone()),
        )
    }

    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_indirect_modify_entry(table, handle, member),
            || Err(gone()),
        )
    }

    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.with(
            |rt| rt.mt_indirect_delete_entry(table, handle),
            || Err(gone()),
        )
    }

    fn mt_indirect_set_default_member(
        &mut self,
        table: &str,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_indirect_set_default_member(table, member),
            || Err(gone()),
        )
    }

    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.with(
            |rt| rt.mt_indirect_reset_default_entry(table),
            || Err(gone()),
        )
    }

    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.with(
            |rt| rt.mt_indirect_ws_add_entry(table, key, group, priority),
            || Err(gone()),
        )
    }

    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_indirect_ws_modify_entry(table, handle, group),
            || Err(gone()),
        )
    }

    fn mt_indirect_ws_set_default_group(
        &mut self,
        table: &str,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_indirect_ws_set_default_group(table, group),
            || Err(gone()),
        )
    }

    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        self.with(|rt| rt.mt_read_counter(table, handle), || Err(gone()))
    }

    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()> {
        self.with(|rt| rt.mt_reset_counters(table), || Err(gone()))
    }

    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_write_counter(table, handle, value),
            || Err(gone()),
        )
    }

    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()> {
        self.with(
            |rt| rt.mt_set_meter_rates(table, handle, rates),
            || Err(gone()),
        )
    }

    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> {
        self.with(|rt| rt.mt_get_meter_rates(table, handle), || Err(gone()))
    }

    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>> {
        self.with(|rt| rt.mt_get_entries(table), || Err(gone()))
    }

    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry> {
        self.with(|rt| rt.mt_get_entry(table, handle), || Err(gone()))
    }

    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry> {
        self.with(|rt| rt.mt_get_default_entry(table), || Err(gone()))
    }

    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry> {
        self.with(
            |rt| rt.mt_get_entry_from_key(table, key, priority),
            || Err(gone()),
        )
    }

    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle> {
        self.with(
            |rt| rt.act_prof_add_member(prof, action, data),
            || Err(gone()),
        )
    }

    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()> {
        self.with(|rt| rt.act_prof_delete_member(prof, member), || Err(gone()))
    }

    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.with(
            |rt| rt.act_prof_modify_member(prof, member, action, data),
            || Err(gone()),
        )
    }

    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle> {
        self.with(|rt| rt.act_prof_create_group(prof), || Err(gone()))
    }

    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()> {
        self.with(|rt| rt.act_prof_delete_group(prof, group), || Err(gone()))
    }

    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.act_prof_add_member_to_group(prof, member, group),
            || Err(gone()),
        )
    }

    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.act_prof_remove_member_from_group(prof, member, group),
            || Err(gone()),
        )
    }

    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>> {
        self.with(|rt| rt.act_prof_get_members(prof), || Err(gone()))
    }

    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember> {
        self.with(|rt| rt.act_prof_get_member(prof, member), || Err(gone()))
    }

    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>> {
        self.with(|rt| rt.act_prof_get_groups(prof), || Err(gone()))
    }

    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> {
        self.with(|rt| rt.act_prof_get_group(prof, group), || Err(gone()))
    }

    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        self.with(|rt| rt.counter_read(counter, index), || Err(gone()))
    }

    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()> {
        self.with(|rt| rt.counter_reset_all(counter), || Err(gone()))
    }

    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()> {
        self.with(|rt| rt.counter_write(counter, index, value), || Err(gone()))
    }

    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()> {
        self.with(|rt| rt.meter_array_set_rates(meter, rates), || Err(gone()))
    }

    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> {
        self.with(|rt| rt.meter_set_rates(meter, index, rates), || Err(gone()))
    }

    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>> {
        self.with(|rt| rt.meter_get_rates(meter, index), || Err(gone()))
    }

    fn register_read(&self, register: &str, index: u32) -> RtResult<u64> {
        self.with(|rt| rt.register_read(register, index), || Err(gone()))
    }

    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>> {
        self.with(|rt| rt.register_read_all(register), || Err(gone()))
    }

    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()> {
        self.with(
            |rt| rt.register_write(register, index, value),
            || Err(gone()),
        )
    }

    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.register_write_range(register, start, end, value),
            || Err(gone()),
        )
    }

    fn register_reset(&mut self, register: &str) -> RtResult<()> {
        self.with(|rt| rt.register_reset(register), || Err(gone()))
    }

    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        self.with(|rt| rt.parse_vset_add(vset, value), || Err(gone()))
    }

    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        self.with(|rt| rt.parse_vset_remove(vset, value), || Err(gone()))
    }

    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>> {
        self.with(|rt| rt.parse_vset_get(vset), || Err(gone()))
    }

    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()> {
        self.with(|rt| rt.parse_vset_clear(vset), || Err(gone()))
    }

    fn learning_ack(&mut self, list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()> {
        self.with(
            |rt| rt.learning_ack(list_id, buffer_id, sample_ids),
            || Err(gone()),
        )
    }

    fn learning_ack_buffer(&mut self, list_id: i32, buffer_id: i64) -> RtResult<()> {
        self.with(
            |rt| rt.learning_ack_buffer(list_id, buffer_id),
            || Err(gone()),
        )
    }

    fn learning_set_timeout(&mut self, list_id: i32, timeout_ms: u32) -> RtResult<()> {
        self.with(
            |rt| rt.learning_set_timeout(list_id, timeout_ms),
            || Err(gone()),
        )
    }

    fn learning_set_buffer_size(&mut self, list_id: i32, nb_samples: u32) -> RtResult<()> {
        self.with(
            |rt| rt.learning_set_buffer_size(list_id, nb_samples),
            || Err(gone()),
        )
    }

    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        self.with(
            |rt| rt.set_crc16_custom_parameters(calc, config),
            || Err(gone()),
        )
    }

    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        self.with(
            |rt| rt.set_crc32_custom_parameters(calc, config),
            || Err(gone()),
        )
    }

    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()> {
        self.with(|rt| rt.set_toeplitz_hash_key(calc, key), || Err(gone()))
    }

    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.dev_mgr_add_port(iface_name, port, pcap_path),
            || Err(gone()),
        )
    }

    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()> {
        self.with(|rt| rt.dev_mgr_remove_port(port), || Err(gone()))
    }

    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>> {
        self.with(|rt| rt.dev_mgr_show_ports(), || Err(gone()))
    }

    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32> {
        self.with(|rt| rt.mc_mgrp_create(mgid), || Err(gone()))
    }

    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()> {
        self.with(|rt| rt.mc_mgrp_destroy(mgrp_handle), || Err(gone()))
    }

    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> {
        self.with(|rt| rt.mc_node_create(rid, ports, lags), || Err(gone()))
    }

    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        self.with(|rt| rt.mc_node_associate(mgrp_handle, node), || Err(gone()))
    }

    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        self.with(
            |rt| rt.mc_node_dissociate(mgrp_handle, node),
            || Err(gone()),
        )
    }

    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()> {
        self.with(|rt| rt.mc_node_destroy(node), || Err(gone()))
    }

    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> {
        self.with(|rt| rt.mc_node_update(node, ports, lags), || Err(gone()))
    }

    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()> {
        self.with(|rt| rt.mc_set_lag_membership(lag, ports), || Err(gone()))
    }

    fn mc_get_entries(&self) -> RtResult<String> {
        self.with(|rt| rt.mc_get_entries(), || Err(gone()))
    }

    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()> {
        self.with(|rt| rt.mirroring_session_add(id, session), || Err(gone()))
    }

    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()> {
        self.with(|rt| rt.mirroring_session_delete(id), || Err(gone()))
    }

    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession> {
        self.with(|rt| rt.mirroring_session_get(id), || Err(gone()))
    }

    fn set_egress_queue_depth(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        depth_pkts: u32,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.set_egress_queue_depth(port, priority, depth_pkts),
            || Err(gone()),
        )
    }

    fn set_egress_queue_rate(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        rate_pps: u64,
    ) -> RtResult<()> {
        self.with(
            |rt| rt.set_egress_queue_rate(port, priority, rate_pps),
            || Err(gone()),
        )
    }

    fn get_time_elapsed_us(&self) -> u64 {
        self.with(|rt| rt.get_time_elapsed_us(), || 0)
    }

    fn get_time_since_epoch_us(&self) -> u64 {
        self.with(|rt| rt.get_time_since_epoch_us(), || 0)
    }
}
