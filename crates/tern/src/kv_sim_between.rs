//! Test support for `kv_sim`: the simulated switch's runtime interface as a switch behind
//! BMv2's Thrift API behaves — every runtime call is its own request, so packets can be
//! processed between two calls of one [`SwitchAccess::with`] closure (in process the closure
//! runs under the switch's lock, atomically). [`Between`] runs a hook with the switch after
//! every call that changes it; the hook may process packets there and says when it is done.

use std::sync::{Arc, Mutex};
use tern_dataplane::Switch;
use tern_kv::switchos::SwitchAccess;
use tern_runtime::*;

/// What runs between two runtime calls: gets the switch, returns `true` once it is done (it
/// is then dropped).
pub type Hook = Box<dyn FnMut(&mut Switch) -> bool + Send>;

/// A [`SwitchAccess`] on a simulated switch that runs the armed [`Hook`] after every runtime
/// call that changes the switch.
pub struct Between {
    pub switch: Arc<Mutex<Switch>>,
    pub hook: Arc<Mutex<Option<Hook>>>,
}

impl SwitchAccess for Between {
    fn with(&self, f: &mut dyn FnMut(&mut dyn Runtime) -> RtResult<()>) -> RtResult<()> {
        let mut sw = self.switch.lock().unwrap_or_else(|p| p.into_inner());
        let mut rt = Calls {
            sw: &mut sw,
            hook: &self.hook,
        };
        f(&mut rt)
    }
}

/// One closure's view of the switch: calls go to the switch; the hook runs after each change.
struct Calls<'a> {
    sw: &'a mut Switch,
    hook: &'a Mutex<Option<Hook>>,
}

impl Calls<'_> {
    fn between(&mut self) {
        let mut h = self.hook.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(f) = h.as_mut() {
            if f(self.sw) {
                *h = None;
            }
        }
    }
}

macro_rules! between_method {
    ([ref] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            self.sw.$name($($arg),*)
        }
    };
    ([mut] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            let r = self.sw.$name($($arg),*);
            self.between();
            r
        }
    };
}

macro_rules! between_runtime {
    ($([$kind:ident] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {
        impl Runtime for Calls<'_> {
            $(between_method!([$kind] $name ($($arg: $ty),*) $(-> $ret)?);)*
        }
    };
}

between_runtime! {
    [ref] get_config() -> String;
    [ref] get_config_md5() -> [u8; 16];
    [mut] load_new_config(json: &str) -> RtResult<()>;
    [mut] swap_configs() -> RtResult<()>;
    [mut] reset_state();
    [ref] serialize_state() -> String;
    [ref] switch_info() -> SwitchInfo;
    [ref] get_id_from_name(kind: ResourceType, name: &str) -> RtResult<i32>;
    [ref] mt_get_num_entries(table: &str) -> RtResult<u64>;
    [mut] mt_clear_entries(table: &str, reset_default_entry: bool) -> RtResult<()>;
    [mut] mt_add_entry(table: &str, key: &[MatchParam], action: &str, data: &[Vec<u8>], priority: Option<i32>) -> RtResult<EntryHandle>;
    [mut] mt_set_default_action(table: &str, action: &str, data: &[Vec<u8>]) -> RtResult<()>;
    [mut] mt_reset_default_entry(table: &str) -> RtResult<()>;
    [mut] mt_delete_entry(table: &str, handle: EntryHandle) -> RtResult<()>;
    [mut] mt_modify_entry(table: &str, handle: EntryHandle, action: &str, data: &[Vec<u8>]) -> RtResult<()>;
    [mut] mt_set_entry_ttl(table: &str, handle: EntryHandle, timeout_ms: u32) -> RtResult<()>;
    [mut] mt_indirect_add_entry(table: &str, key: &[MatchParam], member: MemberHandle, priority: Option<i32>) -> RtResult<EntryHandle>;
    [mut] mt_indirect_modify_entry(table: &str, handle: EntryHandle, member: MemberHandle) -> RtResult<()>;
    [mut] mt_indirect_delete_entry(table: &str, handle: EntryHandle) -> RtResult<()>;
    [mut] mt_indirect_set_default_member(table: &str, member: MemberHandle) -> RtResult<()>;
    [mut] mt_indirect_reset_default_entry(table: &str) -> RtResult<()>;
    [mut] mt_indirect_ws_add_entry(table: &str, key: &[MatchParam], group: GroupHandle, priority: Option<i32>) -> RtResult<EntryHandle>;
    [mut] mt_indirect_ws_modify_entry(table: &str, handle: EntryHandle, group: GroupHandle) -> RtResult<()>;
    [mut] mt_indirect_ws_set_default_group(table: &str, group: GroupHandle) -> RtResult<()>;
    [ref] mt_read_counter(table: &str, handle: EntryHandle) -> RtResult<CounterValue>;
    [mut] mt_reset_counters(table: &str) -> RtResult<()>;
    [mut] mt_write_counter(table: &str, handle: EntryHandle, value: CounterValue) -> RtResult<()>;
    [mut] mt_set_meter_rates(table: &str, handle: EntryHandle, rates: &[MeterRate]) -> RtResult<()>;
    [ref] mt_get_meter_rates(table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>>;
    [ref] mt_get_entries(table: &str) -> RtResult<Vec<TableEntry>>;
    [ref] mt_get_entry(table: &str, handle: EntryHandle) -> RtResult<TableEntry>;
    [ref] mt_get_default_entry(table: &str) -> RtResult<ActionEntry>;
    [ref] mt_get_entry_from_key(table: &str, key: &[MatchParam], priority: Option<i32>) -> RtResult<TableEntry>;
    [mut] act_prof_add_member(prof: &str, action: &str, data: &[Vec<u8>]) -> RtResult<MemberHandle>;
    [mut] act_prof_delete_member(prof: &str, member: MemberHandle) -> RtResult<()>;
    [mut] act_prof_modify_member(prof: &str, member: MemberHandle, action: &str, data: &[Vec<u8>]) -> RtResult<()>;
    [mut] act_prof_create_group(prof: &str) -> RtResult<GroupHandle>;
    [mut] act_prof_delete_group(prof: &str, group: GroupHandle) -> RtResult<()>;
    [mut] act_prof_add_member_to_group(prof: &str, member: MemberHandle, group: GroupHandle) -> RtResult<()>;
    [mut] act_prof_remove_member_from_group(prof: &str, member: MemberHandle, group: GroupHandle) -> RtResult<()>;
    [ref] act_prof_get_members(prof: &str) -> RtResult<Vec<ProfileMember>>;
    [ref] act_prof_get_member(prof: &str, member: MemberHandle) -> RtResult<ProfileMember>;
    [ref] act_prof_get_groups(prof: &str) -> RtResult<Vec<ProfileGroup>>;
    [ref] act_prof_get_group(prof: &str, group: GroupHandle) -> RtResult<ProfileGroup>;
    [ref] counter_read(counter: &str, index: u32) -> RtResult<CounterValue>;
    [mut] counter_reset_all(counter: &str) -> RtResult<()>;
    [mut] counter_write(counter: &str, index: u32, value: CounterValue) -> RtResult<()>;
    [mut] meter_array_set_rates(meter: &str, rates: &[MeterRate]) -> RtResult<()>;
    [mut] meter_set_rates(meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()>;
    [ref] meter_get_rates(meter: &str, index: u32) -> RtResult<Vec<MeterRate>>;
    [ref] register_read(register: &str, index: u32) -> RtResult<u64>;
    [ref] register_read_all(register: &str) -> RtResult<Vec<u64>>;
    [mut] register_write(register: &str, index: u32, value: u64) -> RtResult<()>;
    [mut] register_write_range(register: &str, start: u32, end: u32, value: u64) -> RtResult<()>;
    [mut] register_reset(register: &str) -> RtResult<()>;
    [mut] parse_vset_add(vset: &str, value: &[u8]) -> RtResult<()>;
    [mut] parse_vset_remove(vset: &str, value: &[u8]) -> RtResult<()>;
    [ref] parse_vset_get(vset: &str) -> RtResult<Vec<Vec<u8>>>;
    [mut] parse_vset_clear(vset: &str) -> RtResult<()>;
    [mut] learning_ack(list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()>;
    [mut] learning_ack_buffer(list_id: i32, buffer_id: i64) -> RtResult<()>;
    [mut] learning_set_timeout(list_id: i32, timeout_ms: u32) -> RtResult<()>;
    [mut] learning_set_buffer_size(list_id: i32, nb_samples: u32) -> RtResult<()>;
    [mut] set_crc16_custom_parameters(calc: &str, config: CrcConfig) -> RtResult<()>;
    [mut] set_crc32_custom_parameters(calc: &str, config: CrcConfig) -> RtResult<()>;
    [mut] set_toeplitz_hash_key(calc: &str, key: &[u8]) -> RtResult<()>;
    [mut] dev_mgr_add_port(iface_name: &str, port: Port, pcap_path: Option<&str>) -> RtResult<()>;
    [mut] dev_mgr_remove_port(port: Port) -> RtResult<()>;
    [ref] dev_mgr_show_ports() -> RtResult<Vec<PortInfo>>;
    [mut] mc_mgrp_create(mgid: u32) -> RtResult<u32>;
    [mut] mc_mgrp_destroy(mgrp_handle: u32) -> RtResult<()>;
    [mut] mc_node_create(rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle>;
    [mut] mc_node_associate(mgrp_handle: u32, node: NodeHandle) -> RtResult<()>;
    [mut] mc_node_dissociate(mgrp_handle: u32, node: NodeHandle) -> RtResult<()>;
    [mut] mc_node_destroy(node: NodeHandle) -> RtResult<()>;
    [mut] mc_node_update(node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()>;
    [mut] mc_set_lag_membership(lag: u16, ports: &[Port]) -> RtResult<()>;
    [ref] mc_get_entries() -> RtResult<String>;
    [mut] mirroring_session_add(id: u32, session: MirroringSession) -> RtResult<()>;
    [mut] mirroring_session_delete(id: u32) -> RtResult<()>;
    [ref] mirroring_session_get(id: u32) -> RtResult<MirroringSession>;
    [mut] set_egress_queue_depth(port: Option<Port>, priority: Option<u32>, depth_pkts: u32) -> RtResult<()>;
    [mut] set_egress_queue_rate(port: Option<Port>, priority: Option<u32>, rate_pps: u64) -> RtResult<()>;
    [ref] get_time_elapsed_us() -> u64;
    [ref] get_time_since_epoch_us() -> u64;
}
