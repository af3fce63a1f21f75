//! The [`Runtime`](tern_runtime::Runtime) methods listed once, for the two handles that forward
//! them to a device: [`crate::DeviceRuntime`] (to the device's switch, with the entry quota
//! checked before adds) and [`crate::SharedDevice`] (through the shared switch's lock, answering
//! like a missing device once the device is out of reach). Each entry: how the method reaches
//! the device (`ref`: `&self`, `mut`: `&mut self`, `quota`: `&mut self` and an entry add), its
//! signature, and what a handle on a missing device returns.

/// Calls `$cb! { [kind] name(args) -> ret => missing; ... }` with every `Runtime` method.
macro_rules! for_each_runtime_method {
    ($cb:ident) => {
        $cb! {
            [ref] get_config() -> String => String::new();
            [ref] get_config_md5() -> [u8; 16] => [0; 16];
            [mut] load_new_config(json: &str) -> RtResult<()> => Err(gone());
            [mut] swap_configs() -> RtResult<()> => Err(gone());
            [mut] reset_state() => ();
            [ref] serialize_state() -> String => String::new();
            [ref] switch_info() -> SwitchInfo => SwitchInfo::default();
            [ref] get_id_from_name(kind: ResourceType, name: &str) -> RtResult<i32> => Err(gone());
            [ref] mt_get_num_entries(table: &str) -> RtResult<u64> => Err(gone());
            [clear] mt_clear_entries(table: &str, reset_default_entry: bool) -> RtResult<()> => Err(gone());
            [quota] mt_add_entry(table: &str, key: &[MatchParam], action: &str, data: &[Vec<u8>], priority: Option<i32>) -> RtResult<EntryHandle> => Err(gone());
            [mut] mt_set_default_action(table: &str, action: &str, data: &[Vec<u8>]) -> RtResult<()> => Err(gone());
            [mut] mt_reset_default_entry(table: &str) -> RtResult<()> => Err(gone());
            [mut] mt_delete_entry(table: &str, handle: EntryHandle) -> RtResult<()> => Err(gone());
            [mut] mt_modify_entry(table: &str, handle: EntryHandle, action: &str, data: &[Vec<u8>]) -> RtResult<()> => Err(gone());
            [mut] mt_set_entry_ttl(table: &str, handle: EntryHandle, timeout_ms: u32) -> RtResult<()> => Err(gone());
            [quota] mt_indirect_add_entry(table: &str, key: &[MatchParam], member: MemberHandle, priority: Option<i32>) -> RtResult<EntryHandle> => Err(gone());
            [mut] mt_indirect_modify_entry(table: &str, handle: EntryHandle, member: MemberHandle) -> RtResult<()> => Err(gone());
            [mut] mt_indirect_delete_entry(table: &str, handle: EntryHandle) -> RtResult<()> => Err(gone());
            [mut] mt_indirect_set_default_member(table: &str, member: MemberHandle) -> RtResult<()> => Err(gone());
            [mut] mt_indirect_reset_default_entry(table: &str) -> RtResult<()> => Err(gone());
            [quota] mt_indirect_ws_add_entry(table: &str, key: &[MatchParam], group: GroupHandle, priority: Option<i32>) -> RtResult<EntryHandle> => Err(gone());
            [mut] mt_indirect_ws_modify_entry(table: &str, handle: EntryHandle, group: GroupHandle) -> RtResult<()> => Err(gone());
            [mut] mt_indirect_ws_set_default_group(table: &str, group: GroupHandle) -> RtResult<()> => Err(gone());
            [ref] mt_read_counter(table: &str, handle: EntryHandle) -> RtResult<CounterValue> => Err(gone());
            [mut] mt_reset_counters(table: &str) -> RtResult<()> => Err(gone());
            [mut] mt_write_counter(table: &str, handle: EntryHandle, value: CounterValue) -> RtResult<()> => Err(gone());
            [mut] mt_set_meter_rates(table: &str, handle: EntryHandle, rates: &[MeterRate]) -> RtResult<()> => Err(gone());
            [ref] mt_get_meter_rates(table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> => Err(gone());
            [ref] mt_get_entries(table: &str) -> RtResult<Vec<TableEntry>> => Err(gone());
            [ref] mt_get_entry(table: &str, handle: EntryHandle) -> RtResult<TableEntry> => Err(gone());
            [ref] mt_get_default_entry(table: &str) -> RtResult<ActionEntry> => Err(gone());
            [ref] mt_get_entry_from_key(table: &str, key: &[MatchParam], priority: Option<i32>) -> RtResult<TableEntry> => Err(gone());
            [mut] act_prof_add_member(prof: &str, action: &str, data: &[Vec<u8>]) -> RtResult<MemberHandle> => Err(gone());
            [mut] act_prof_delete_member(prof: &str, member: MemberHandle) -> RtResult<()> => Err(gone());
            [mut] act_prof_modify_member(prof: &str, member: MemberHandle, action: &str, data: &[Vec<u8>]) -> RtResult<()> => Err(gone());
            [mut] act_prof_create_group(prof: &str) -> RtResult<GroupHandle> => Err(gone());
            [mut] act_prof_delete_group(prof: &str, group: GroupHandle) -> RtResult<()> => Err(gone());
            [mut] act_prof_add_member_to_group(prof: &str, member: MemberHandle, group: GroupHandle) -> RtResult<()> => Err(gone());
            [mut] act_prof_remove_member_from_group(prof: &str, member: MemberHandle, group: GroupHandle) -> RtResult<()> => Err(gone());
            [ref] act_prof_get_members(prof: &str) -> RtResult<Vec<ProfileMember>> => Err(gone());
            [ref] act_prof_get_member(prof: &str, member: MemberHandle) -> RtResult<ProfileMember> => Err(gone());
            [ref] act_prof_get_groups(prof: &str) -> RtResult<Vec<ProfileGroup>> => Err(gone());
            [ref] act_prof_get_group(prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> => Err(gone());
            [ref] counter_read(counter: &str, index: u32) -> RtResult<CounterValue> => Err(gone());
            [mut] counter_reset_all(counter: &str) -> RtResult<()> => Err(gone());
            [mut] counter_write(counter: &str, index: u32, value: CounterValue) -> RtResult<()> => Err(gone());
            [mut] meter_array_set_rates(meter: &str, rates: &[MeterRate]) -> RtResult<()> => Err(gone());
            [mut] meter_set_rates(meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> => Err(gone());
            [ref] meter_get_rates(meter: &str, index: u32) -> RtResult<Vec<MeterRate>> => Err(gone());
            [ref] register_read(register: &str, index: u32) -> RtResult<u64> => Err(gone());
            [ref] register_read_all(register: &str) -> RtResult<Vec<u64>> => Err(gone());
            [mut] register_write(register: &str, index: u32, value: u64) -> RtResult<()> => Err(gone());
            [mut] register_write_range(register: &str, start: u32, end: u32, value: u64) -> RtResult<()> => Err(gone());
            [mut] register_reset(register: &str) -> RtResult<()> => Err(gone());
            [mut] parse_vset_add(vset: &str, value: &[u8]) -> RtResult<()> => Err(gone());
            [mut] parse_vset_remove(vset: &str, value: &[u8]) -> RtResult<()> => Err(gone());
            [ref] parse_vset_get(vset: &str) -> RtResult<Vec<Vec<u8>>> => Err(gone());
            [mut] parse_vset_clear(vset: &str) -> RtResult<()> => Err(gone());
            [mut] learning_ack(list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()> => Err(gone());
            [mut] learning_ack_buffer(list_id: i32, buffer_id: i64) -> RtResult<()> => Err(gone());
            [mut] learning_set_timeout(list_id: i32, timeout_ms: u32) -> RtResult<()> => Err(gone());
            [mut] learning_set_buffer_size(list_id: i32, nb_samples: u32) -> RtResult<()> => Err(gone());
            [mut] set_crc16_custom_parameters(calc: &str, config: CrcConfig) -> RtResult<()> => Err(gone());
            [mut] set_crc32_custom_parameters(calc: &str, config: CrcConfig) -> RtResult<()> => Err(gone());
            [mut] set_toeplitz_hash_key(calc: &str, key: &[u8]) -> RtResult<()> => Err(gone());
            [mut] dev_mgr_add_port(iface_name: &str, port: Port, pcap_path: Option<&str>) -> RtResult<()> => Err(gone());
            [mut] dev_mgr_remove_port(port: Port) -> RtResult<()> => Err(gone());
            [ref] dev_mgr_show_ports() -> RtResult<Vec<PortInfo>> => Err(gone());
            [mut] mc_mgrp_create(mgid: u32) -> RtResult<u32> => Err(gone());
            [mut] mc_mgrp_destroy(mgrp_handle: u32) -> RtResult<()> => Err(gone());
            [mut] mc_node_create(rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> => Err(gone());
            [mut] mc_node_associate(mgrp_handle: u32, node: NodeHandle) -> RtResult<()> => Err(gone());
            [mut] mc_node_dissociate(mgrp_handle: u32, node: NodeHandle) -> RtResult<()> => Err(gone());
            [mut] mc_node_destroy(node: NodeHandle) -> RtResult<()> => Err(gone());
            [mut] mc_node_update(node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> => Err(gone());
            [mut] mc_set_lag_membership(lag: u16, ports: &[Port]) -> RtResult<()> => Err(gone());
            [ref] mc_get_entries() -> RtResult<String> => Err(gone());
            [mut] mirroring_session_add(id: u32, session: MirroringSession) -> RtResult<()> => Err(gone());
            [mut] mirroring_session_delete(id: u32) -> RtResult<()> => Err(gone());
            [ref] mirroring_session_get(id: u32) -> RtResult<MirroringSession> => Err(gone());
            [mut] set_egress_queue_depth(port: Option<Port>, priority: Option<u32>, depth_pkts: u32) -> RtResult<()> => Err(gone());
            [mut] set_egress_queue_rate(port: Option<Port>, priority: Option<u32>, rate_pps: u64) -> RtResult<()> => Err(gone());
            [ref] get_time_elapsed_us() -> u64 => 0;
            [ref] get_time_since_epoch_us() -> u64 => 0;
        }
    };
}

pub(crate) use for_each_runtime_method;
