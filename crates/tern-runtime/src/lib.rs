//! The runtime control API: the typed operations a control plane performs on a running
//! program, and the deterministic packet path that tests drive.
//!
//! This crate is the one contract between tern's control front ends and its data plane:
//!
//! * [`Runtime`] mirrors the RPC surface of BMv2's Thrift services (`standard`,
//!   `simple_pre_lag` / `simple_pre`, `simple_switch`) one method per RPC, with the same
//!   arguments, results and error codes (see `shared/reference/runtime-cli.md` §3). The text
//!   command language (`tern-control`), the Thrift wire server and the STF runner all turn
//!   their input into calls on this trait, so there is exactly one control path.
//! * [`PacketPath`] injects one packet and runs it, with every copy it spawns, to completion
//!   (the deterministic mode of `DESIGN.md`). STF tests and differential tests use it.
//!
//! Names are full object names as they appear in the program's JSON (the dot-suffix
//! resolution of the CLI happens in the client, as in BMv2). Byte strings are big-endian and
//! exactly `ceil(bitwidth / 8)` bytes long unless a method says otherwise. `cxt_id` is omitted:
//! a [`Runtime`] value is one program instance (one context, one virtual device).

use std::fmt;

/// An entry handle, as BMv2 returns it: `(version << 24) | index`.
pub type EntryHandle = u32;
/// An action-profile member handle.
pub type MemberHandle = u32;
/// An action-profile group handle.
pub type GroupHandle = u32;
/// A multicast L1 node handle.
pub type NodeHandle = u32;
/// A port number.
pub type Port = u32;

/// One field of a match key, in the order of the table's JSON `key` array.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum MatchParam {
    Exact(Vec<u8>),
    Lpm { key: Vec<u8>, prefix_len: u32 },
    Ternary { key: Vec<u8>, mask: Vec<u8> },
    Valid(bool),
    Range { start: Vec<u8>, end: Vec<u8> },
}

/// What an entry (or a default entry) executes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ActionEntry {
    /// No default entry configured (`BmActionEntryType::NONE`).
    None,
    /// A direct action with its runtime data.
    Action { name: String, data: Vec<Vec<u8>> },
    /// An action-profile member (indirect tables).
    Member(MemberHandle),
    /// An action-selector group (indirect_ws tables).
    Group(GroupHandle),
}

/// Entry ageing information (`BmMtEntryLife`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryLife {
    pub timeout_ms: u32,
    pub time_since_hit_ms: u32,
}

/// A table entry as read back (`BmMtEntry`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableEntry {
    /// The stored key (masked, excess bits of the first byte cleared), in JSON key order.
    pub match_key: Vec<MatchParam>,
    /// The entry priority for ternary/range tables, -1 for other tables.
    pub priority: i32,
    pub handle: EntryHandle,
    pub action: ActionEntry,
    /// Present only when a timeout is set.
    pub life: Option<EntryLife>,
}

/// An action-profile member (`BmMtActProfMember`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileMember {
    pub handle: MemberHandle,
    pub action: String,
    pub data: Vec<Vec<u8>>,
}

/// An action-selector group (`BmMtActProfGroup`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileGroup {
    pub handle: GroupHandle,
    pub members: Vec<MemberHandle>,
}

/// A counter cell (`BmCounterValue`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CounterValue {
    pub bytes: u64,
    pub packets: u64,
}

/// One meter rate (`BmMeterRateConfig`): units (bytes or packets) per microsecond and burst.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MeterRate {
    pub units_per_micros: f64,
    pub burst_size: u32,
}

/// Parameters of a custom CRC (`BmCrc16Config` / `BmCrc32Config`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrcConfig {
    pub polynomial: u32,
    pub initial_remainder: u32,
    pub final_xor_value: u32,
    pub data_reflected: bool,
    pub remainder_reflected: bool,
}

/// A mirroring session (`MirroringSessionConfig`): an egress port, a multicast group, or both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MirroringSession {
    pub port: Option<Port>,
    pub mgid: Option<u32>,
}

/// One port of the device manager (`DevMgrPortInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    pub port: Port,
    pub iface_name: String,
    pub is_up: bool,
    pub extra: Vec<(String, String)>,
}

/// Switch identity (`BmConfig`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SwitchInfo {
    pub device_id: u64,
    pub thrift_port: u32,
    pub notifications_socket: Option<String>,
    pub elogger_socket: Option<String>,
    pub debugger_socket: Option<String>,
}

/// Resource kinds for [`Runtime::get_id_from_name`] (`BmResourceType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResourceType {
    MatchTable = 0,
    ActionProfile = 1,
    Counter = 2,
    Meter = 3,
    Register = 4,
    LearningList = 5,
}

macro_rules! error_codes {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $val:expr),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name { $($variant = $val),* }
        impl $name {
            /// The numeric code on the Thrift wire.
            pub fn code(self) -> i32 { self as i32 }
            /// The enum name as BMv2's CLI prints it, e.g. `DUPLICATE_ENTRY`.
            pub fn name(self) -> &'static str {
                match self { $(Self::$variant => stringify!($variant)),* }
            }
            /// The variant for a numeric wire code.
            pub fn from_code(code: i32) -> Option<Self> {
                match code { $($val => Some(Self::$variant),)* _ => None }
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { f.write_str(self.name()) }
        }
    };
}

error_codes!(
    /// `TableOperationErrorCode`.
    #[allow(non_camel_case_types)]
    TableError {
        TABLE_FULL = 1, INVALID_HANDLE = 2, EXPIRED_HANDLE = 3, COUNTERS_DISABLED = 4,
        METERS_DISABLED = 5, AGEING_DISABLED = 6, INVALID_TABLE_NAME = 7, INVALID_ACTION_NAME = 8,
        WRONG_TABLE_TYPE = 9, INVALID_MBR_HANDLE = 10, MBR_STILL_USED = 11, MBR_ALREADY_IN_GRP = 12,
        MBR_NOT_IN_GRP = 13, INVALID_GRP_HANDLE = 14, GRP_STILL_USED = 15, EMPTY_GRP = 16,
        DUPLICATE_ENTRY = 17, BAD_MATCH_KEY = 18, INVALID_METER_OPERATION = 19,
        DEFAULT_ACTION_IS_CONST = 20, DEFAULT_ENTRY_IS_CONST = 21, NO_DEFAULT_ENTRY = 22,
        INVALID_ACTION_PROFILE_NAME = 23, NO_ACTION_PROFILE_SELECTION = 24,
        IMMUTABLE_TABLE_ENTRIES = 25, BAD_ACTION_DATA = 26, NO_TABLE_KEY = 27, ERROR = 100,
    }
);
error_codes!(
    /// `CounterOperationErrorCode`.
    #[allow(non_camel_case_types)]
    CounterError { INVALID_COUNTER_NAME = 1, INVALID_INDEX = 2, ERROR = 3 }
);
error_codes!(
    /// `SwapOperationErrorCode`.
    #[allow(non_camel_case_types)]
    SwapError { CONFIG_SWAP_DISABLED = 1, ONGOING_SWAP = 2, NO_ONGOING_SWAP = 3 }
);
error_codes!(
    /// `MeterOperationErrorCode`.
    #[allow(non_camel_case_types)]
    MeterError {
        INVALID_METER_NAME = 1, INVALID_INDEX = 2, BAD_RATES_LIST = 3,
        INVALID_INFO_RATE_VALUE = 4, INVALID_BURST_SIZE_VALUE = 5, ERROR = 6,
    }
);
error_codes!(
    /// `RegisterOperationErrorCode`.
    #[allow(non_camel_case_types)]
    RegisterError { INVALID_REGISTER_NAME = 1, INVALID_INDEX = 2, ERROR = 3 }
);
error_codes!(
    /// `ParseVSetOperationErrorCode`.
    #[allow(non_camel_case_types)]
    ParseVSetError { INVALID_PARSE_VSET_NAME = 1, ERROR = 2 }
);
error_codes!(
    /// `LearnOperationErrorCode`.
    #[allow(non_camel_case_types)]
    LearnError { INVALID_LIST_ID = 1, INVALID_LIST_NAME = 2, ERROR = 3 }
);
error_codes!(
    /// `DevMgrErrorCode`.
    #[allow(non_camel_case_types)]
    DevMgrError { ERROR = 1 }
);
error_codes!(
    /// `CrcErrorCode`.
    #[allow(non_camel_case_types)]
    CrcError { INVALID_CALCULATION_NAME = 1, WRONG_TYPE_CALCULATION = 2, INVALID_CONFIG = 3 }
);
error_codes!(
    /// `ToeplitzHashErrorCode`.
    #[allow(non_camel_case_types)]
    ToeplitzError { INVALID_CALCULATION_NAME = 1, WRONG_TYPE_CALCULATION = 2, INVALID_KEY = 3 }
);
error_codes!(
    /// `IdLookupErrorCode`.
    #[allow(non_camel_case_types)]
    IdLookupError { INVALID_RESOURCE_TYPE = 0, INVALID_RESOURCE_NAME = 1 }
);
error_codes!(
    /// `McOperationErrorCode` (the PRE).
    #[allow(non_camel_case_types)]
    McError { TABLE_FULL = 1, INVALID_MGID = 2, INVALID_MGRP_HANDLE = 3, INVALID_L1_HANDLE = 4, ERROR = 5 }
);
error_codes!(
    /// `MirroringOperationErrorCode`.
    #[allow(non_camel_case_types)]
    MirroringError { SESSION_NOT_FOUND = 1 }
);

/// Any error a [`Runtime`] call returns: exactly one of BMv2's Thrift exceptions.
///
/// `Display` prints what BMv2's CLI prints for it, e.g. `Invalid table operation (DUPLICATE_ENTRY)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuntimeError {
    Table(TableError),
    Counter(CounterError),
    Swap(SwapError),
    Meter(MeterError),
    Register(RegisterError),
    ParseVSet(ParseVSetError),
    Learn(LearnError),
    DevMgr(DevMgrError),
    Crc(CrcError),
    Toeplitz(ToeplitzError),
    IdLookup(IdLookupError),
    Mc(McError),
    Mirroring(MirroringError),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Table(c) => write!(f, "Invalid table operation ({c})"),
            RuntimeError::Counter(c) => write!(f, "Invalid counter operation ({c})"),
            RuntimeError::Swap(c) => write!(f, "Invalid swap operation ({c})"),
            RuntimeError::Meter(c) => write!(f, "Invalid meter operation ({c})"),
            RuntimeError::Register(c) => write!(f, "Invalid register operation ({c})"),
            RuntimeError::ParseVSet(c) => write!(f, "Invalid parser value set operation ({c})"),
            RuntimeError::Learn(c) => write!(f, "Invalid learn operation ({c})"),
            RuntimeError::DevMgr(c) => write!(f, "Invalid device manager operation ({c})"),
            RuntimeError::Crc(c) => write!(f, "Invalid crc operation ({c})"),
            RuntimeError::Toeplitz(c) => write!(f, "Invalid Toeplitz hash operation ({c})"),
            RuntimeError::IdLookup(c) => write!(f, "Invalid id lookup ({c})"),
            RuntimeError::Mc(c) => write!(f, "Invalid PRE operation ({c})"),
            RuntimeError::Mirroring(c) => write!(f, "Invalid mirroring operation ({c})"),
        }
    }
}

impl std::error::Error for RuntimeError {}

macro_rules! from_code {
    ($($t:ident => $v:ident),*) => {$(
        impl From<$t> for RuntimeError { fn from(c: $t) -> Self { RuntimeError::$v(c) } }
    )*};
}
from_code!(TableError => Table, CounterError => Counter, SwapError => Swap, MeterError => Meter,
    RegisterError => Register, ParseVSetError => ParseVSet, LearnError => Learn,
    DevMgrError => DevMgr, CrcError => Crc, ToeplitzError => Toeplitz,
    IdLookupError => IdLookup, McError => Mc, MirroringError => Mirroring);

/// Result of a runtime call.
pub type RtResult<T> = Result<T, RuntimeError>;

/// The control operations on one program instance: BMv2's Thrift surface as a Rust trait.
///
/// Each method names the RPC it mirrors. Implementations must validate every argument and
/// return the error BMv2 returns; they must never panic on any input.
pub trait Runtime {
    // ---- configuration (`standard`) ----
    /// `bm_get_config`: the exact JSON text that was loaded.
    fn get_config(&self) -> String;
    /// `bm_get_config_md5`: the 16 raw MD5 bytes of that text.
    fn get_config_md5(&self) -> [u8; 16];
    /// `bm_load_new_config`: stage a new JSON (needs swapping enabled).
    fn load_new_config(&mut self, json: &str) -> RtResult<()>;
    /// `bm_swap_configs`: make the staged JSON live, atomically.
    fn swap_configs(&mut self) -> RtResult<()>;
    /// `bm_reset_state`: clear all tables, externs, PRE and mirroring state.
    fn reset_state(&mut self);
    /// `bm_serialize_state`.
    fn serialize_state(&self) -> String;
    /// `bm_mgmt_get_info`.
    fn switch_info(&self) -> SwitchInfo;
    /// `bm_get_id_from_name`.
    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32>;

    // ---- match tables ----
    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64>;
    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()>;
    /// `bm_mt_add_entry`; `priority` is `None` for tables without priorities.
    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle>;
    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()>;
    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()>;
    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()>;
    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()>;
    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()>;
    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle>;
    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()>;
    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()>;
    fn mt_indirect_set_default_member(&mut self, table: &str, member: MemberHandle)
        -> RtResult<()>;
    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()>;
    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle>;
    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()>;
    fn mt_indirect_ws_set_default_group(&mut self, table: &str, group: GroupHandle)
        -> RtResult<()>;
    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue>;
    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()>;
    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()>;
    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()>;
    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>>;
    /// `bm_mt_get_entries`: in ascending internal index.
    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>>;
    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry>;
    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry>;
    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry>;

    // ---- action profiles ----
    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle>;
    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()>;
    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()>;
    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle>;
    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()>;
    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()>;
    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()>;
    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>>;
    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember>;
    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>>;
    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup>;

    // ---- indexed counters, meters, registers ----
    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue>;
    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()>;
    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()>;
    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()>;
    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()>;
    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>>;
    /// `bm_register_read`: the cell value (registers wider than 64 bits are truncated, as in BMv2's i64).
    fn register_read(&self, register: &str, index: u32) -> RtResult<u64>;
    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>>;
    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()>;
    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()>;
    fn register_reset(&mut self, register: &str) -> RtResult<()>;

    // ---- parser value sets ----
    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()>;
    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()>;
    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>>;
    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()>;

    // ---- learning (digests) ----
    fn learning_ack(&mut self, list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()>;
    fn learning_ack_buffer(&mut self, list_id: i32, buffer_id: i64) -> RtResult<()>;
    fn learning_set_timeout(&mut self, list_id: i32, timeout_ms: u32) -> RtResult<()>;
    fn learning_set_buffer_size(&mut self, list_id: i32, nb_samples: u32) -> RtResult<()>;

    // ---- hashes ----
    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()>;
    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()>;
    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()>;

    // ---- device manager ----
    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()>;
    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()>;
    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>>;

    // ---- multicast PRE (`simple_pre_lag`; `simple_pre` is the same without LAGs) ----
    /// Returns the group handle, which is the group id.
    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32>;
    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()>;
    /// Ports and LAGs as lists (the wire's `0`/`1` strings are decoded by the transport).
    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle>;
    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()>;
    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()>;
    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()>;
    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()>;
    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()>;
    /// `bm_mc_get_entries`: the JSON document of `runtime-cli.md` §2.6.
    fn mc_get_entries(&self) -> RtResult<String>;

    // ---- `simple_switch` service ----
    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()>;
    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()>;
    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession>;
    /// `set_egress_priority_queue_depth` (`priority: None` = every queue of the port; `port: None` = all ports).
    fn set_egress_queue_depth(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        depth_pkts: u32,
    ) -> RtResult<()>;
    /// `set_egress_priority_queue_rate` and friends, in packets per second.
    fn set_egress_queue_rate(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        rate_pps: u64,
    ) -> RtResult<()>;
    fn get_time_elapsed_us(&self) -> u64;
    fn get_time_since_epoch_us(&self) -> u64;
}

/// A packet leaving the switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutputPacket {
    pub port: Port,
    pub data: Vec<u8>,
}

/// A digest (learn-list sample) sent to the control plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digest {
    /// The learn list's id in the JSON.
    pub list_id: i32,
    /// The learn list's name.
    pub list_name: String,
    /// One byte string per field of the learn list, each `ceil(bitwidth / 8)` bytes.
    pub fields: Vec<Vec<u8>>,
}

/// The deterministic packet path: one packet in, run to completion with every copy it spawns
/// (clones, multicast replicas, resubmits, recirculations), outputs appended in the order
/// they leave the switch.
pub trait PacketPath {
    /// Process one packet arriving on `port`; append the packets it produces to `out`.
    fn process_packet(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>);
    /// Digests generated since the last call, oldest first.
    fn take_digests(&mut self) -> Vec<Digest>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display_matches_bmv2_cli() {
        let e: RuntimeError = TableError::DUPLICATE_ENTRY.into();
        assert_eq!(e.to_string(), "Invalid table operation (DUPLICATE_ENTRY)");
        let e: RuntimeError = McError::INVALID_L1_HANDLE.into();
        assert_eq!(e.to_string(), "Invalid PRE operation (INVALID_L1_HANDLE)");
    }

    #[test]
    fn error_codes_round_trip() {
        for code in [1, 2, 17, 27, 100] {
            assert_eq!(TableError::from_code(code).unwrap().code(), code);
        }
        assert_eq!(TableError::from_code(99), None);
        assert_eq!(TableError::NO_TABLE_KEY.code(), 27);
    }
}
