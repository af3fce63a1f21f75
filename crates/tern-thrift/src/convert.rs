//! Conversions between the generated wire types and `tern_runtime`'s types, in both
//! directions, plus the mapping between `RuntimeError` and BMv2's Thrift exceptions and the
//! `0`/`1` port-map strings of the PRE.

use std::collections::BTreeMap;

use thrift::OrderedFloat;

use tern_runtime::{
    ActionEntry, CounterError, CounterValue, CrcConfig, CrcError, DevMgrError, EntryLife,
    IdLookupError, LearnError, MatchParam, McError, MeterError, MeterRate, MirroringError,
    MirroringSession, ParseVSetError, PortInfo, ProfileGroup, ProfileMember, RegisterError,
    ResourceType, RuntimeError, SwapError, SwitchInfo, TableEntry, TableError, ToeplitzError,
};

use crate::gen::simple_pre as pre;
use crate::gen::simple_pre_lag as lag;
use crate::gen::simple_switch as ss;
use crate::gen::standard as st;

// ------------------------------------------------------------------------------------------
// RuntimeError -> wire exception (server side)

fn user<E: std::error::Error + Send + Sync + 'static>(e: E) -> thrift::Error {
    thrift::Error::User(Box::new(e))
}

/// The BMv2 exception for `e`, boxed as the user error the generated processors look for.
/// PRE errors become `simple_pre_lag`'s `InvalidMcOperation` (see [`pre_error_to_wire`]).
pub(crate) fn error_to_wire(e: RuntimeError) -> thrift::Error {
    match e {
        RuntimeError::Table(c) => user(st::InvalidTableOperation::new(
            st::TableOperationErrorCode(c.code()),
        )),
        RuntimeError::Counter(c) => user(st::InvalidCounterOperation::new(
            st::CounterOperationErrorCode(c.code()),
        )),
        RuntimeError::Swap(c) => user(st::InvalidSwapOperation::new(st::SwapOperationErrorCode(
            c.code(),
        ))),
        RuntimeError::Meter(c) => user(st::InvalidMeterOperation::new(
            st::MeterOperationErrorCode(c.code()),
        )),
        RuntimeError::Register(c) => user(st::InvalidRegisterOperation::new(
            st::RegisterOperationErrorCode(c.code()),
        )),
        RuntimeError::ParseVSet(c) => user(st::InvalidParseVSetOperation::new(
            st::ParseVSetOperationErrorCode(c.code()),
        )),
        RuntimeError::Learn(c) => user(st::InvalidLearnOperation::new(
            st::LearnOperationErrorCode(c.code()),
        )),
        RuntimeError::DevMgr(c) => user(st::InvalidDevMgrOperation::new(st::DevMgrErrorCode(
            c.code(),
        ))),
        RuntimeError::Crc(c) => user(st::InvalidCrcOperation::new(st::CrcErrorCode(c.code()))),
        RuntimeError::Toeplitz(c) => user(st::InvalidToeplitzHashOperation::new(
            st::ToeplitzHashErrorCode(c.code()),
        )),
        RuntimeError::IdLookup(c) => {
            user(st::InvalidIdLookup::new(st::IdLookupErrorCode(c.code())))
        }
        RuntimeError::Mc(c) => user(lag::InvalidMcOperation::new(lag::McOperationErrorCode(
            c.code(),
        ))),
        RuntimeError::Mirroring(c) => user(ss::InvalidMirroringOperation::new(
            ss::MirroringOperationErrorCode(c.code()),
        )),
    }
}

/// Like [`error_to_wire`], but PRE errors become `simple_pre`'s `InvalidMcOperation`.
pub(crate) fn pre_error_to_wire(e: RuntimeError) -> thrift::Error {
    match e {
        RuntimeError::Mc(c) => user(pre::InvalidMcOperation::new(pre::McOperationErrorCode(
            c.code(),
        ))),
        other => error_to_wire(other),
    }
}

// ------------------------------------------------------------------------------------------
// wire exception -> RuntimeError (client side)

/// The `RuntimeError` a BMv2 exception carries, if `e` is one with a known code.
pub(crate) fn error_from_wire(e: &thrift::Error) -> Option<RuntimeError> {
    let thrift::Error::User(u) = e else {
        return None;
    };
    macro_rules! try_exc {
        ($($ty:ty => $code:ty),* $(,)?) => {$(
            if let Some(x) = u.downcast_ref::<$ty>() {
                return x.code.and_then(|c| <$code>::from_code(c.0)).map(RuntimeError::from);
            }
        )*};
    }
    try_exc!(
        st::InvalidTableOperation => TableError,
        st::InvalidCounterOperation => CounterError,
        st::InvalidSwapOperation => SwapError,
        st::InvalidMeterOperation => MeterError,
        st::InvalidRegisterOperation => RegisterError,
        st::InvalidParseVSetOperation => ParseVSetError,
        st::InvalidLearnOperation => LearnError,
        st::InvalidDevMgrOperation => DevMgrError,
        st::InvalidCrcOperation => CrcError,
        st::InvalidToeplitzHashOperation => ToeplitzError,
        st::InvalidIdLookup => IdLookupError,
        lag::InvalidMcOperation => McError,
        pre::InvalidMcOperation => McError,
        ss::InvalidMirroringOperation => MirroringError,
    );
    None
}

// ------------------------------------------------------------------------------------------
// match keys, actions, entries

/// A wire match key as a runtime key; a malformed parameter is `BAD_MATCH_KEY`.
pub(crate) fn match_key_from_wire(
    key: Vec<st::BmMatchParam>,
) -> Result<Vec<MatchParam>, RuntimeError> {
    key.into_iter().map(match_param_from_wire).collect()
}

fn match_param_from_wire(p: st::BmMatchParam) -> Result<MatchParam, RuntimeError> {
    let bad = || RuntimeError::Table(TableError::BAD_MATCH_KEY);
    let t = p.type_.ok_or_else(bad)?;
    Ok(match t {
        st::BmMatchParamType::EXACT => {
            MatchParam::Exact(p.exact.and_then(|e| e.key).ok_or_else(bad)?)
        }
        st::BmMatchParamType::LPM => {
            let l = p.lpm.ok_or_else(bad)?;
            let prefix_len = u32::try_from(l.prefix_length.ok_or_else(bad)?).map_err(|_| bad())?;
            MatchParam::Lpm {
                key: l.key.ok_or_else(bad)?,
                prefix_len,
            }
        }
        st::BmMatchParamType::TERNARY => {
            let t = p.ternary.ok_or_else(bad)?;
            MatchParam::Ternary {
                key: t.key.ok_or_else(bad)?,
                mask: t.mask.ok_or_else(bad)?,
            }
        }
        st::BmMatchParamType::VALID => {
            MatchParam::Valid(p.valid.and_then(|v| v.key).ok_or_else(bad)?)
        }
        st::BmMatchParamType::RANGE => {
            let r = p.range.ok_or_else(bad)?;
            MatchParam::Range {
                start: r.start.ok_or_else(bad)?,
                end: r.end_.ok_or_else(bad)?,
            }
        }
        _ => return Err(bad()),
    })
}

/// A runtime match key as wire parameters.
pub(crate) fn match_key_to_wire(key: &[MatchParam]) -> Vec<st::BmMatchParam> {
    key.iter().map(match_param_to_wire).collect()
}

fn match_param_to_wire(p: &MatchParam) -> st::BmMatchParam {
    let mut w = st::BmMatchParam::default();
    match p {
        MatchParam::Exact(k) => {
            w.type_ = Some(st::BmMatchParamType::EXACT);
            w.exact = Some(st::BmMatchParamExact::new(k.clone()));
        }
        MatchParam::Lpm { key, prefix_len } => {
            w.type_ = Some(st::BmMatchParamType::LPM);
            w.lpm = Some(st::BmMatchParamLPM::new(key.clone(), *prefix_len as i32));
        }
        MatchParam::Ternary { key, mask } => {
            w.type_ = Some(st::BmMatchParamType::TERNARY);
            w.ternary = Some(st::BmMatchParamTernary::new(key.clone(), mask.clone()));
        }
        MatchParam::Valid(v) => {
            w.type_ = Some(st::BmMatchParamType::VALID);
            w.valid = Some(st::BmMatchParamValid::new(*v));
        }
        MatchParam::Range { start, end } => {
            w.type_ = Some(st::BmMatchParamType::RANGE);
            w.range = Some(st::BmMatchParamRange::new(start.clone(), end.clone()));
        }
    }
    w
}

/// `BmAddEntryOptions` as the runtime's optional priority.
pub(crate) fn priority_from_wire(o: &st::BmAddEntryOptions) -> Option<i32> {
    o.priority
}

pub(crate) fn options_to_wire(priority: Option<i32>) -> st::BmAddEntryOptions {
    st::BmAddEntryOptions::new(priority)
}

/// One action parameter as BMv2's server exports it (`Data::get_string`): the value's minimal
/// big-endian bytes, at least one byte (`1` in a 9-bit parameter is `01`, zero is `00`), not
/// the parameter's `(bitwidth + 7) / 8` bytes the client sent.
pub(crate) fn export_param(d: &[u8]) -> Vec<u8> {
    let first = d.iter().position(|b| *b != 0).unwrap_or(d.len());
    if first == d.len() {
        vec![0]
    } else {
        d[first..].to_vec()
    }
}

fn export_data(data: &[Vec<u8>]) -> Vec<Vec<u8>> {
    data.iter().map(|d| export_param(d)).collect()
}

/// `d` widened (zeros in front) or narrowed (leading bytes dropped) to `n` bytes: how a client
/// gets back the parameter width after [`export_param`].
pub(crate) fn widen_param(d: &[u8], n: usize) -> Vec<u8> {
    if d.len() >= n {
        d[d.len() - n..].to_vec()
    } else {
        let mut v = vec![0; n - d.len()];
        v.extend_from_slice(d);
        v
    }
}

pub(crate) fn action_entry_to_wire(a: &ActionEntry) -> st::BmActionEntry {
    let mut w = st::BmActionEntry::default();
    match a {
        ActionEntry::None => w.action_type = Some(st::BmActionEntryType::NONE),
        ActionEntry::Action { name, data } => {
            w.action_type = Some(st::BmActionEntryType::ACTION_DATA);
            w.action_name = Some(name.clone());
            w.action_data = Some(export_data(data));
        }
        ActionEntry::Member(m) => {
            w.action_type = Some(st::BmActionEntryType::MBR_HANDLE);
            w.mbr_handle = Some(*m as i32);
        }
        ActionEntry::Group(g) => {
            w.action_type = Some(st::BmActionEntryType::GRP_HANDLE);
            w.grp_handle = Some(*g as i32);
        }
    }
    w
}

/// What a malformed reply from the server is reported as, per call family.
pub(crate) type Malformed = RuntimeError;

pub(crate) fn action_entry_from_wire(
    w: st::BmActionEntry,
    bad: Malformed,
) -> Result<ActionEntry, RuntimeError> {
    Ok(match w.action_type.ok_or(bad)? {
        st::BmActionEntryType::NONE => ActionEntry::None,
        st::BmActionEntryType::ACTION_DATA => ActionEntry::Action {
            name: w.action_name.ok_or(bad)?,
            data: w.action_data.unwrap_or_default(),
        },
        st::BmActionEntryType::MBR_HANDLE => ActionEntry::Member(w.mbr_handle.ok_or(bad)? as u32),
        st::BmActionEntryType::GRP_HANDLE => ActionEntry::Group(w.grp_handle.ok_or(bad)? as u32),
        _ => return Err(bad),
    })
}

pub(crate) fn entry_to_wire(e: &TableEntry) -> st::BmMtEntry {
    st::BmMtEntry {
        match_key: Some(match_key_to_wire(&e.match_key)),
        options: Some(options_to_wire(Some(e.priority))),
        entry_handle: Some(e.handle as i32),
        action_entry: Some(action_entry_to_wire(&e.action)),
        life: e
            .life
            .map(|l| st::BmMtEntryLife::new(l.timeout_ms as i32, l.time_since_hit_ms as i32)),
    }
}

pub(crate) fn entry_from_wire(
    w: st::BmMtEntry,
    bad: Malformed,
) -> Result<TableEntry, RuntimeError> {
    let match_key = match_key_from_wire(w.match_key.ok_or(bad)?).map_err(|_| bad)?;
    Ok(TableEntry {
        match_key,
        priority: w.options.and_then(|o| o.priority).unwrap_or(-1),
        handle: w.entry_handle.ok_or(bad)? as u32,
        action: action_entry_from_wire(w.action_entry.ok_or(bad)?, bad)?,
        life: w.life.map(|l| EntryLife {
            timeout_ms: l.timeout_ms.unwrap_or(0) as u32,
            time_since_hit_ms: l.time_since_hit_ms.unwrap_or(0) as u32,
        }),
    })
}

pub(crate) fn member_to_wire(m: &ProfileMember) -> st::BmMtActProfMember {
    st::BmMtActProfMember::new(m.handle as i32, m.action.clone(), export_data(&m.data))
}

pub(crate) fn member_from_wire(
    w: st::BmMtActProfMember,
    bad: Malformed,
) -> Result<ProfileMember, RuntimeError> {
    Ok(ProfileMember {
        handle: w.mbr_handle.ok_or(bad)? as u32,
        action: w.action_name.ok_or(bad)?,
        data: w.action_data.unwrap_or_default(),
    })
}

pub(crate) fn group_to_wire(g: &ProfileGroup) -> st::BmMtActProfGroup {
    st::BmMtActProfGroup::new(
        g.handle as i32,
        g.members.iter().map(|m| *m as i32).collect::<Vec<_>>(),
    )
}

pub(crate) fn group_from_wire(
    w: st::BmMtActProfGroup,
    bad: Malformed,
) -> Result<ProfileGroup, RuntimeError> {
    Ok(ProfileGroup {
        handle: w.grp_handle.ok_or(bad)? as u32,
        members: w
            .mbr_handles
            .unwrap_or_default()
            .into_iter()
            .map(|m| m as u32)
            .collect(),
    })
}

// ------------------------------------------------------------------------------------------
// counters, meters, misc

pub(crate) fn counter_to_wire(c: CounterValue) -> st::BmCounterValue {
    st::BmCounterValue::new(c.bytes as i64, c.packets as i64)
}

pub(crate) fn counter_from_wire(c: &st::BmCounterValue) -> CounterValue {
    CounterValue {
        bytes: c.bytes.unwrap_or(0) as u64,
        packets: c.packets.unwrap_or(0) as u64,
    }
}

pub(crate) fn rates_to_wire(rates: &[MeterRate]) -> Vec<st::BmMeterRateConfig> {
    rates
        .iter()
        .map(|r| {
            st::BmMeterRateConfig::new(
                OrderedFloat(r.units_per_micros),
                i32::try_from(r.burst_size).unwrap_or(i32::MAX),
            )
        })
        .collect()
}

/// Wire meter rates; a missing field or negative burst is `bad`.
pub(crate) fn rates_from_wire(
    rates: &[st::BmMeterRateConfig],
    bad: RuntimeError,
) -> Result<Vec<MeterRate>, RuntimeError> {
    rates
        .iter()
        .map(|r| {
            let rate = r.units_per_micros.ok_or(bad)?.0;
            let burst = u32::try_from(r.burst_size.ok_or(bad)?).map_err(|_| bad)?;
            Ok(MeterRate {
                units_per_micros: rate,
                burst_size: burst,
            })
        })
        .collect()
}

pub(crate) fn switch_info_to_wire(i: &SwitchInfo) -> st::BmConfig {
    st::BmConfig::new(
        i.device_id as i64,
        i.thrift_port as i32,
        i.notifications_socket.clone(),
        i.elogger_socket.clone(),
        i.debugger_socket.clone(),
    )
}

pub(crate) fn switch_info_from_wire(c: st::BmConfig) -> SwitchInfo {
    SwitchInfo {
        device_id: c.device_id.unwrap_or(0) as u64,
        thrift_port: c.thrift_port.unwrap_or(0) as u32,
        notifications_socket: c.notifications_socket,
        elogger_socket: c.elogger_socket,
        debugger_socket: c.debugger_socket,
    }
}

pub(crate) fn port_info_to_wire(p: &PortInfo) -> st::DevMgrPortInfo {
    st::DevMgrPortInfo::new(
        p.port as i32,
        p.iface_name.clone(),
        p.is_up,
        p.extra.iter().cloned().collect::<BTreeMap<_, _>>(),
    )
}

pub(crate) fn port_info_from_wire(p: st::DevMgrPortInfo) -> PortInfo {
    PortInfo {
        port: p.port_num.unwrap_or(0) as u32,
        iface_name: p.iface_name.unwrap_or_default(),
        is_up: p.is_up.unwrap_or(false),
        extra: p.extra.unwrap_or_default().into_iter().collect(),
    }
}

pub(crate) fn resource_from_wire(t: st::BmResourceType) -> Option<ResourceType> {
    Some(match t {
        st::BmResourceType::MATCH_TABLE => ResourceType::MatchTable,
        st::BmResourceType::ACTION_PROFILE => ResourceType::ActionProfile,
        st::BmResourceType::COUNTER => ResourceType::Counter,
        st::BmResourceType::METER => ResourceType::Meter,
        st::BmResourceType::REGISTER => ResourceType::Register,
        st::BmResourceType::LEARNING_LIST => ResourceType::LearningList,
        _ => return None,
    })
}

pub(crate) fn resource_to_wire(t: ResourceType) -> st::BmResourceType {
    st::BmResourceType(t as i32)
}

/// CRC parameters from the 16-bit wire struct (the i16 fields are bit patterns).
pub(crate) fn crc16_from_wire(c: &st::BmCrc16Config) -> Option<CrcConfig> {
    Some(CrcConfig {
        polynomial: u32::from(c.polynomial? as u16),
        initial_remainder: u32::from(c.initial_remainder? as u16),
        final_xor_value: u32::from(c.final_xor_value? as u16),
        data_reflected: c.data_reflected?,
        remainder_reflected: c.remainder_reflected?,
    })
}

pub(crate) fn crc32_from_wire(c: &st::BmCrc32Config) -> Option<CrcConfig> {
    Some(CrcConfig {
        polynomial: c.polynomial? as u32,
        initial_remainder: c.initial_remainder? as u32,
        final_xor_value: c.final_xor_value? as u32,
        data_reflected: c.data_reflected?,
        remainder_reflected: c.remainder_reflected?,
    })
}

pub(crate) fn mirroring_to_wire(s: MirroringSession) -> ss::MirroringSessionConfig {
    ss::MirroringSessionConfig::new(s.port.map(|p| p as i32), s.mgid.map(|m| m as i32))
}

/// A wire mirroring config; negative ports or groups are refused (`None`).
pub(crate) fn mirroring_from_wire(c: &ss::MirroringSessionConfig) -> Option<MirroringSession> {
    let port = match c.port {
        Some(p) => Some(u32::try_from(p).ok()?),
        None => None,
    };
    let mgid = match c.mgid {
        Some(m) => Some(u32::try_from(m).ok()?),
        None => None,
    };
    Some(MirroringSession { port, mgid })
}

// ------------------------------------------------------------------------------------------
// PRE port / LAG maps

/// Decode a `0`/`1` map (rightmost character = bit 0) into the set bit numbers, ascending.
pub(crate) fn map_to_list(map: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for (bit, ch) in map.bytes().rev().enumerate() {
        match ch {
            b'0' => {}
            b'1' => out.push(u32::try_from(bit).ok()?),
            _ => return None,
        }
    }
    Some(out)
}

/// Encode bit numbers as a `0`/`1` map: length = highest + 1, rightmost character = bit 0.
pub(crate) fn list_to_map(bits: impl IntoIterator<Item = u32>) -> String {
    let bits: Vec<u32> = bits.into_iter().collect();
    let Some(max) = bits.iter().copied().max() else {
        return String::new();
    };
    let mut chars = vec![b'0'; max as usize + 1];
    for b in bits {
        chars[(max - b) as usize] = b'1';
    }
    String::from_utf8(chars).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_maps_match_the_reference_examples() {
        assert_eq!(list_to_map([0, 3]), "1001");
        assert_eq!(list_to_map([1, 5, 8]), "100100010");
        assert_eq!(list_to_map([]), "");
        assert_eq!(map_to_list("1001"), Some(vec![0, 3]));
        assert_eq!(map_to_list("100100010"), Some(vec![1, 5, 8]));
        assert_eq!(map_to_list(""), Some(vec![]));
        assert_eq!(map_to_list("10x1"), None);
    }

    #[test]
    fn match_params_round_trip_and_malformed_ones_are_bad_match_key() {
        let key = vec![
            MatchParam::Exact(vec![1, 2]),
            MatchParam::Lpm {
                key: vec![10, 0, 0, 0],
                prefix_len: 8,
            },
            MatchParam::Ternary {
                key: vec![1],
                mask: vec![0xff],
            },
            MatchParam::Valid(true),
            MatchParam::Range {
                start: vec![1],
                end: vec![9],
            },
        ];
        assert_eq!(match_key_from_wire(match_key_to_wire(&key)).unwrap(), key);
        let mut w = match_key_to_wire(&key[..1]);
        w[0].exact = None;
        assert_eq!(
            match_key_from_wire(w),
            Err(RuntimeError::Table(TableError::BAD_MATCH_KEY))
        );
        let mut w = match_key_to_wire(&key[1..2]);
        w[0].lpm.as_mut().unwrap().prefix_length = Some(-1);
        assert!(match_key_from_wire(w).is_err());
    }

    #[test]
    fn errors_round_trip_through_the_wire_exceptions() {
        let all: Vec<RuntimeError> = vec![
            TableError::DUPLICATE_ENTRY.into(),
            CounterError::INVALID_INDEX.into(),
            SwapError::ONGOING_SWAP.into(),
            MeterError::BAD_RATES_LIST.into(),
            RegisterError::INVALID_INDEX.into(),
            ParseVSetError::INVALID_PARSE_VSET_NAME.into(),
            LearnError::INVALID_LIST_ID.into(),
            DevMgrError::ERROR.into(),
            CrcError::INVALID_CONFIG.into(),
            ToeplitzError::INVALID_KEY.into(),
            IdLookupError::INVALID_RESOURCE_NAME.into(),
            McError::INVALID_L1_HANDLE.into(),
            MirroringError::SESSION_NOT_FOUND.into(),
        ];
        for e in all {
            assert_eq!(error_from_wire(&error_to_wire(e)), Some(e));
            assert_eq!(error_from_wire(&pre_error_to_wire(e)), Some(e));
        }
        assert_eq!(error_from_wire(&thrift::Error::from("x".to_string())), None);
    }

    #[test]
    fn action_data_is_exported_as_minimal_bytes_and_widened_back() {
        assert_eq!(export_param(&[0, 1]), vec![1]);
        assert_eq!(export_param(&[0, 0, 0]), vec![0]);
        assert_eq!(export_param(&[]), vec![0]);
        assert_eq!(export_param(&[0x0a, 0, 0, 1]), vec![0x0a, 0, 0, 1]);
        assert_eq!(export_param(&[0, 0x80, 0]), vec![0x80, 0]);
        assert_eq!(widen_param(&[1], 2), vec![0, 1]);
        assert_eq!(widen_param(&[0], 6), vec![0; 6]);
        assert_eq!(widen_param(&[0x12, 0x34], 2), vec![0x12, 0x34]);
        for d in [
            vec![0u8, 1],
            vec![0, 0],
            vec![1, 2, 3],
            vec![0, 0, 0, 0, 0, 9],
        ] {
            assert_eq!(widen_param(&export_param(&d), d.len()), d);
        }
    }
}
