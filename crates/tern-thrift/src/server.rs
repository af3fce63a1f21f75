//! The Thrift server: one thread per connection, strict binary protocol over a buffered
//! transport, services multiplexed by `<service>:<method>` message names, every call mapped
//! onto a shared [`tern_runtime::Runtime`].
//!
//! Robustness: every peer byte passes through [`GuardedInput`]; an unknown service or method
//! gets a Thrift application exception (its arguments are skipped, so the connection stays
//! usable); malformed bytes close that one connection; a panic inside a call is caught and
//! closes only its connection, and a poisoned switch lock is recovered so the server keeps
//! answering other clients.

use std::collections::HashMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};

use thrift::protocol::{
    TBinaryOutputProtocol, TInputProtocol, TMessageIdentifier, TMessageType, TOutputProtocol,
    TStoredInputProtocol, TType,
};
use thrift::server::TProcessor;
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport};
use thrift::{ApplicationError, ApplicationErrorKind};

use tern_runtime::{
    CounterError, CrcError, DevMgrError, IdLookupError, LearnError, McError, MeterError,
    MirroringError, ParseVSetError, RegisterError, RtResult, Runtime, RuntimeError, TableError,
    ToeplitzError,
};

use crate::convert::*;
use crate::gen::simple_pre as pre;
use crate::gen::simple_pre_lag as lag;
use crate::gen::simple_switch as ss;
use crate::gen::standard as st;
use crate::guard::{GuardedInput, Limits};

/// The services tern registers, with the IDL that defines each one's methods.
const SERVICES: [(&str, &str); 4] = [
    ("standard", include_str!("../idl/standard.thrift")),
    ("simple_pre", include_str!("../idl/simple_pre.thrift")),
    (
        "simple_pre_lag",
        include_str!("../idl/simple_pre_lag.thrift"),
    ),
    ("simple_switch", include_str!("../idl/simple_switch.thrift")),
];

/// The method names a service's IDL declares: every identifier written directly before `(`
/// inside the `service { ... }` block (argument lists and `throws (` never match).
pub(crate) fn idl_methods(idl: &str) -> Vec<String> {
    let Some(start) = idl.find("\nservice ") else {
        return Vec::new();
    };
    let body = &idl[start..];
    let mut out = Vec::new();
    for line in body.lines() {
        let code = line.split("//").next().unwrap_or("");
        if let Some(paren) = code.find('(') {
            let before = &code[..paren];
            let name: String = before
                .chars()
                .rev()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            if !name.is_empty() && !before.ends_with(' ') {
                out.push(name);
            }
        }
    }
    out
}

fn known_methods() -> &'static HashMap<&'static str, Vec<String>> {
    static KNOWN: OnceLock<HashMap<&'static str, Vec<String>>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        SERVICES
            .iter()
            .map(|(svc, idl)| (*svc, idl_methods(idl)))
            .collect()
    })
}

// ------------------------------------------------------------------------------------------
// the request handler

/// Answers every RPC of the four services from one shared runtime.
struct Handler<R> {
    sw: Arc<Mutex<R>>,
}

impl<R> Clone for Handler<R> {
    fn clone(&self) -> Self {
        Handler {
            sw: Arc::clone(&self.sw),
        }
    }
}

fn wire<T>(r: RtResult<T>) -> thrift::Result<T> {
    r.map_err(error_to_wire)
}

fn wire_pre<T>(r: RtResult<T>) -> thrift::Result<T> {
    r.map_err(pre_error_to_wire)
}

/// A wire i32 that must be a non-negative index or id, else `err`.
fn unsigned(v: i32, err: impl Into<RuntimeError>) -> RtResult<u32> {
    u32::try_from(v).map_err(|_| err.into())
}

/// simple_switch has exactly one context, 0.
fn context(cxt_id: i32, err: impl Into<RuntimeError>) -> RtResult<()> {
    if cxt_id == 0 {
        Ok(())
    } else {
        Err(err.into())
    }
}

impl<R: Runtime> Handler<R> {
    fn lock(&self) -> MutexGuard<'_, R> {
        // A panic in an earlier call must not take the server down with it.
        self.sw.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A table call: checks the context, then runs `f` on the switch.
    fn table<T>(&self, cxt_id: i32, f: impl FnOnce(&mut R) -> RtResult<T>) -> thrift::Result<T> {
        wire(context(cxt_id, TableError::ERROR).and_then(|_| f(&mut self.lock())))
    }

    fn run<T>(&self, f: impl FnOnce(&mut R) -> RtResult<T>) -> thrift::Result<T> {
        wire(f(&mut self.lock()))
    }
}

const BAD_TABLE_ARG: TableError = TableError::ERROR;

impl<R: Runtime> st::StandardSyncHandler for Handler<R> {
    fn handle_bm_mt_get_num_entries(&self, cxt_id: i32, table: String) -> thrift::Result<i64> {
        self.table(cxt_id, |s| s.mt_get_num_entries(&table).map(|n| n as i64))
    }
    fn handle_bm_mt_clear_entries(
        &self,
        cxt_id: i32,
        table: String,
        reset: bool,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_clear_entries(&table, reset))
    }
    fn handle_bm_mt_add_entry(
        &self,
        cxt_id: i32,
        table: String,
        key: st::BmMatchParams,
        action: String,
        data: st::BmActionData,
        options: st::BmAddEntryOptions,
    ) -> thrift::Result<st::BmEntryHandle> {
        self.table(cxt_id, |s| {
            let key = match_key_from_wire(key)?;
            s.mt_add_entry(&table, &key, &action, &data, priority_from_wire(&options))
                .map(|h| h as i32)
        })
    }
    fn handle_bm_mt_set_default_action(
        &self,
        cxt_id: i32,
        table: String,
        action: String,
        data: st::BmActionData,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_set_default_action(&table, &action, &data))
    }
    fn handle_bm_mt_reset_default_entry(&self, cxt_id: i32, table: String) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_reset_default_entry(&table))
    }
    fn handle_bm_mt_delete_entry(&self, cxt_id: i32, table: String, h: i32) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_delete_entry(&table, h as u32))
    }
    fn handle_bm_mt_modify_entry(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        action: String,
        data: st::BmActionData,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_modify_entry(&table, h as u32, &action, &data)
        })
    }
    fn handle_bm_mt_set_entry_ttl(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        ms: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_set_entry_ttl(&table, h as u32, unsigned(ms, BAD_TABLE_ARG)?)
        })
    }
    fn handle_bm_mt_indirect_add_entry(
        &self,
        cxt_id: i32,
        table: String,
        key: st::BmMatchParams,
        mbr: i32,
        options: st::BmAddEntryOptions,
    ) -> thrift::Result<st::BmEntryHandle> {
        self.table(cxt_id, |s| {
            let key = match_key_from_wire(key)?;
            s.mt_indirect_add_entry(&table, &key, mbr as u32, priority_from_wire(&options))
                .map(|h| h as i32)
        })
    }
    fn handle_bm_mt_indirect_modify_entry(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        mbr: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_indirect_modify_entry(&table, h as u32, mbr as u32)
        })
    }
    fn handle_bm_mt_indirect_delete_entry(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_indirect_delete_entry(&table, h as u32))
    }
    fn handle_bm_mt_indirect_set_entry_ttl(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        ms: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_set_entry_ttl(&table, h as u32, unsigned(ms, BAD_TABLE_ARG)?)
        })
    }
    fn handle_bm_mt_indirect_set_default_member(
        &self,
        cxt_id: i32,
        table: String,
        mbr: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_indirect_set_default_member(&table, mbr as u32)
        })
    }
    fn handle_bm_mt_indirect_reset_default_entry(
        &self,
        cxt_id: i32,
        table: String,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_indirect_reset_default_entry(&table))
    }
    fn handle_bm_mt_indirect_ws_add_entry(
        &self,
        cxt_id: i32,
        table: String,
        key: st::BmMatchParams,
        grp: i32,
        options: st::BmAddEntryOptions,
    ) -> thrift::Result<st::BmEntryHandle> {
        self.table(cxt_id, |s| {
            let key = match_key_from_wire(key)?;
            s.mt_indirect_ws_add_entry(&table, &key, grp as u32, priority_from_wire(&options))
                .map(|h| h as i32)
        })
    }
    fn handle_bm_mt_indirect_ws_modify_entry(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        grp: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_indirect_ws_modify_entry(&table, h as u32, grp as u32)
        })
    }
    fn handle_bm_mt_indirect_ws_set_default_group(
        &self,
        cxt_id: i32,
        table: String,
        grp: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_indirect_ws_set_default_group(&table, grp as u32)
        })
    }
    fn handle_bm_mt_read_counter(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
    ) -> thrift::Result<st::BmCounterValue> {
        self.table(cxt_id, |s| {
            s.mt_read_counter(&table, h as u32).map(counter_to_wire)
        })
    }
    fn handle_bm_mt_reset_counters(&self, cxt_id: i32, table: String) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.mt_reset_counters(&table))
    }
    fn handle_bm_mt_write_counter(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        value: st::BmCounterValue,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.mt_write_counter(&table, h as u32, counter_from_wire(&value))
        })
    }
    fn handle_bm_mt_set_meter_rates(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
        rates: st::BmMeterRates,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            let rates = rates_from_wire(&rates, TableError::INVALID_METER_OPERATION.into())?;
            s.mt_set_meter_rates(&table, h as u32, &rates)
        })
    }
    fn handle_bm_mt_get_meter_rates(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
    ) -> thrift::Result<st::BmMeterRates> {
        self.table(cxt_id, |s| {
            s.mt_get_meter_rates(&table, h as u32)
                .map(|r| rates_to_wire(&r))
        })
    }
    fn handle_bm_mt_get_entries(
        &self,
        cxt_id: i32,
        table: String,
    ) -> thrift::Result<Vec<st::BmMtEntry>> {
        self.table(cxt_id, |s| {
            s.mt_get_entries(&table)
                .map(|es| es.iter().map(entry_to_wire).collect())
        })
    }
    fn handle_bm_mt_get_entry(
        &self,
        cxt_id: i32,
        table: String,
        h: i32,
    ) -> thrift::Result<st::BmMtEntry> {
        self.table(cxt_id, |s| {
            s.mt_get_entry(&table, h as u32).map(|e| entry_to_wire(&e))
        })
    }
    fn handle_bm_mt_get_default_entry(
        &self,
        cxt_id: i32,
        table: String,
    ) -> thrift::Result<st::BmActionEntry> {
        self.table(cxt_id, |s| {
            s.mt_get_default_entry(&table)
                .map(|a| action_entry_to_wire(&a))
        })
    }
    fn handle_bm_mt_get_entry_from_key(
        &self,
        cxt_id: i32,
        table: String,
        key: st::BmMatchParams,
        options: st::BmAddEntryOptions,
    ) -> thrift::Result<st::BmMtEntry> {
        self.table(cxt_id, |s| {
            let key = match_key_from_wire(key)?;
            s.mt_get_entry_from_key(&table, &key, priority_from_wire(&options))
                .map(|e| entry_to_wire(&e))
        })
    }

    // ---- action profiles ----
    fn handle_bm_mt_act_prof_add_member(
        &self,
        cxt_id: i32,
        prof: String,
        action: String,
        data: st::BmActionData,
    ) -> thrift::Result<st::BmMemberHandle> {
        self.table(cxt_id, |s| {
            s.act_prof_add_member(&prof, &action, &data)
                .map(|m| m as i32)
        })
    }
    fn handle_bm_mt_act_prof_delete_member(
        &self,
        cxt_id: i32,
        prof: String,
        mbr: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.act_prof_delete_member(&prof, mbr as u32))
    }
    fn handle_bm_mt_act_prof_modify_member(
        &self,
        cxt_id: i32,
        prof: String,
        mbr: i32,
        action: String,
        data: st::BmActionData,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.act_prof_modify_member(&prof, mbr as u32, &action, &data)
        })
    }
    fn handle_bm_mt_act_prof_create_group(
        &self,
        cxt_id: i32,
        prof: String,
    ) -> thrift::Result<st::BmGroupHandle> {
        self.table(cxt_id, |s| s.act_prof_create_group(&prof).map(|g| g as i32))
    }
    fn handle_bm_mt_act_prof_delete_group(
        &self,
        cxt_id: i32,
        prof: String,
        grp: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| s.act_prof_delete_group(&prof, grp as u32))
    }
    fn handle_bm_mt_act_prof_add_member_to_group(
        &self,
        cxt_id: i32,
        prof: String,
        mbr: i32,
        grp: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.act_prof_add_member_to_group(&prof, mbr as u32, grp as u32)
        })
    }
    fn handle_bm_mt_act_prof_remove_member_from_group(
        &self,
        cxt_id: i32,
        prof: String,
        mbr: i32,
        grp: i32,
    ) -> thrift::Result<()> {
        self.table(cxt_id, |s| {
            s.act_prof_remove_member_from_group(&prof, mbr as u32, grp as u32)
        })
    }
    fn handle_bm_mt_act_prof_get_members(
        &self,
        cxt_id: i32,
        prof: String,
    ) -> thrift::Result<Vec<st::BmMtActProfMember>> {
        self.table(cxt_id, |s| {
            s.act_prof_get_members(&prof)
                .map(|ms| ms.iter().map(member_to_wire).collect())
        })
    }
    fn handle_bm_mt_act_prof_get_member(
        &self,
        cxt_id: i32,
        prof: String,
        mbr: i32,
    ) -> thrift::Result<st::BmMtActProfMember> {
        self.table(cxt_id, |s| {
            s.act_prof_get_member(&prof, mbr as u32)
                .map(|m| member_to_wire(&m))
        })
    }
    fn handle_bm_mt_act_prof_get_groups(
        &self,
        cxt_id: i32,
        prof: String,
    ) -> thrift::Result<Vec<st::BmMtActProfGroup>> {
        self.table(cxt_id, |s| {
            s.act_prof_get_groups(&prof)
                .map(|gs| gs.iter().map(group_to_wire).collect())
        })
    }
    fn handle_bm_mt_act_prof_get_group(
        &self,
        cxt_id: i32,
        prof: String,
        grp: i32,
    ) -> thrift::Result<st::BmMtActProfGroup> {
        self.table(cxt_id, |s| {
            s.act_prof_get_group(&prof, grp as u32)
                .map(|g| group_to_wire(&g))
        })
    }

    // ---- indexed counters ----
    fn handle_bm_counter_read(
        &self,
        cxt_id: i32,
        counter: String,
        index: i32,
    ) -> thrift::Result<st::BmCounterValue> {
        self.run(|s| {
            context(cxt_id, CounterError::ERROR)?;
            let index = unsigned(index, CounterError::INVALID_INDEX)?;
            s.counter_read(&counter, index).map(counter_to_wire)
        })
    }
    fn handle_bm_counter_reset_all(&self, cxt_id: i32, counter: String) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, CounterError::ERROR)?;
            s.counter_reset_all(&counter)
        })
    }
    fn handle_bm_counter_write(
        &self,
        cxt_id: i32,
        counter: String,
        index: i32,
        value: st::BmCounterValue,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, CounterError::ERROR)?;
            let index = unsigned(index, CounterError::INVALID_INDEX)?;
            s.counter_write(&counter, index, counter_from_wire(&value))
        })
    }

    // ---- learning ----
    fn handle_bm_learning_ack(
        &self,
        cxt_id: i32,
        list: i32,
        buffer: i64,
        samples: Vec<i32>,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, LearnError::ERROR)?;
            s.learning_ack(list, buffer, &samples)
        })
    }
    fn handle_bm_learning_ack_buffer(
        &self,
        cxt_id: i32,
        list: i32,
        buffer: i64,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, LearnError::ERROR)?;
            s.learning_ack_buffer(list, buffer)
        })
    }
    fn handle_bm_learning_set_timeout(
        &self,
        cxt_id: i32,
        list: i32,
        ms: i32,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, LearnError::ERROR)?;
            s.learning_set_timeout(list, unsigned(ms, LearnError::ERROR)?)
        })
    }
    fn handle_bm_learning_set_buffer_size(
        &self,
        cxt_id: i32,
        list: i32,
        n: i32,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, LearnError::ERROR)?;
            s.learning_set_buffer_size(list, unsigned(n, LearnError::ERROR)?)
        })
    }

    // ---- swap ----
    fn handle_bm_load_new_config(&self, json: String) -> thrift::Result<()> {
        self.run(|s| s.load_new_config(&json))
    }
    fn handle_bm_swap_configs(&self) -> thrift::Result<()> {
        self.run(|s| s.swap_configs())
    }

    // ---- meters ----
    fn handle_bm_meter_array_set_rates(
        &self,
        cxt_id: i32,
        meter: String,
        rates: st::BmMeterRates,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, MeterError::ERROR)?;
            let rates = rates_from_wire(&rates, MeterError::INVALID_BURST_SIZE_VALUE.into())?;
            s.meter_array_set_rates(&meter, &rates)
        })
    }
    fn handle_bm_meter_set_rates(
        &self,
        cxt_id: i32,
        meter: String,
        index: i32,
        rates: st::BmMeterRates,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, MeterError::ERROR)?;
            let index = unsigned(index, MeterError::INVALID_INDEX)?;
            let rates = rates_from_wire(&rates, MeterError::INVALID_BURST_SIZE_VALUE.into())?;
            s.meter_set_rates(&meter, index, &rates)
        })
    }
    fn handle_bm_meter_get_rates(
        &self,
        cxt_id: i32,
        meter: String,
        index: i32,
    ) -> thrift::Result<st::BmMeterRates> {
        self.run(|s| {
            context(cxt_id, MeterError::ERROR)?;
            let index = unsigned(index, MeterError::INVALID_INDEX)?;
            s.meter_get_rates(&meter, index).map(|r| rates_to_wire(&r))
        })
    }

    // ---- registers ----
    fn handle_bm_register_read(&self, cxt_id: i32, reg: String, idx: i32) -> thrift::Result<i64> {
        self.run(|s| {
            context(cxt_id, RegisterError::ERROR)?;
            let idx = unsigned(idx, RegisterError::INVALID_INDEX)?;
            s.register_read(&reg, idx).map(|v| v as i64)
        })
    }
    fn handle_bm_register_read_all(&self, cxt_id: i32, reg: String) -> thrift::Result<Vec<i64>> {
        self.run(|s| {
            context(cxt_id, RegisterError::ERROR)?;
            s.register_read_all(&reg)
                .map(|vs| vs.into_iter().map(|v| v as i64).collect())
        })
    }
    fn handle_bm_register_write(
        &self,
        cxt_id: i32,
        reg: String,
        index: i32,
        value: i64,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, RegisterError::ERROR)?;
            let index = unsigned(index, RegisterError::INVALID_INDEX)?;
            s.register_write(&reg, index, value as u64)
        })
    }
    fn handle_bm_register_write_range(
        &self,
        cxt_id: i32,
        reg: String,
        start: i32,
        end: i32,
        value: i64,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, RegisterError::ERROR)?;
            let start = unsigned(start, RegisterError::INVALID_INDEX)?;
            let end = unsigned(end, RegisterError::INVALID_INDEX)?;
            s.register_write_range(&reg, start, end, value as u64)
        })
    }
    fn handle_bm_register_reset(&self, cxt_id: i32, reg: String) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, RegisterError::ERROR)?;
            s.register_reset(&reg)
        })
    }

    // ---- parser value sets ----
    fn handle_bm_parse_vset_add(
        &self,
        cxt_id: i32,
        vset: String,
        value: Vec<u8>,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, ParseVSetError::ERROR)?;
            s.parse_vset_add(&vset, &value)
        })
    }
    fn handle_bm_parse_vset_remove(
        &self,
        cxt_id: i32,
        vset: String,
        value: Vec<u8>,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, ParseVSetError::ERROR)?;
            s.parse_vset_remove(&vset, &value)
        })
    }
    fn handle_bm_parse_vset_get(&self, cxt_id: i32, vset: String) -> thrift::Result<Vec<Vec<u8>>> {
        self.run(|s| {
            context(cxt_id, ParseVSetError::ERROR)?;
            s.parse_vset_get(&vset)
        })
    }
    fn handle_bm_parse_vset_clear(&self, cxt_id: i32, vset: String) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, ParseVSetError::ERROR)?;
            s.parse_vset_clear(&vset)
        })
    }

    // ---- device manager ----
    fn handle_bm_dev_mgr_add_port(
        &self,
        iface: String,
        port: i32,
        pcap: String,
    ) -> thrift::Result<()> {
        self.run(|s| {
            let port = unsigned(port, DevMgrError::ERROR)?;
            let pcap = (!pcap.is_empty()).then_some(pcap.as_str());
            s.dev_mgr_add_port(&iface, port, pcap)
        })
    }
    fn handle_bm_dev_mgr_remove_port(&self, port: i32) -> thrift::Result<()> {
        self.run(|s| s.dev_mgr_remove_port(unsigned(port, DevMgrError::ERROR)?))
    }
    fn handle_bm_dev_mgr_show_ports(&self) -> thrift::Result<Vec<st::DevMgrPortInfo>> {
        self.run(|s| {
            s.dev_mgr_show_ports()
                .map(|ps| ps.iter().map(port_info_to_wire).collect())
        })
    }

    // ---- management ----
    fn handle_bm_mgmt_get_info(&self) -> thrift::Result<st::BmConfig> {
        Ok(switch_info_to_wire(&self.lock().switch_info()))
    }
    fn handle_bm_set_crc16_custom_parameters(
        &self,
        cxt_id: i32,
        calc: String,
        config: st::BmCrc16Config,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, CrcError::INVALID_CONFIG)?;
            let config = crc16_from_wire(&config).ok_or(CrcError::INVALID_CONFIG)?;
            s.set_crc16_custom_parameters(&calc, config)
        })
    }
    fn handle_bm_set_crc32_custom_parameters(
        &self,
        cxt_id: i32,
        calc: String,
        config: st::BmCrc32Config,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, CrcError::INVALID_CONFIG)?;
            let config = crc32_from_wire(&config).ok_or(CrcError::INVALID_CONFIG)?;
            s.set_crc32_custom_parameters(&calc, config)
        })
    }
    fn handle_bm_set_toeplitz_hash_key(
        &self,
        cxt_id: i32,
        calc: String,
        key: Vec<u8>,
    ) -> thrift::Result<()> {
        self.run(|s| {
            context(cxt_id, ToeplitzError::INVALID_KEY)?;
            s.set_toeplitz_hash_key(&calc, &key)
        })
    }
    fn handle_bm_reset_state(&self) -> thrift::Result<()> {
        self.lock().reset_state();
        Ok(())
    }
    fn handle_bm_get_config(&self) -> thrift::Result<String> {
        Ok(self.lock().get_config())
    }
    fn handle_bm_get_config_md5(&self) -> thrift::Result<Vec<u8>> {
        Ok(self.lock().get_config_md5().to_vec())
    }
    fn handle_bm_get_id_from_name(
        &self,
        cxt_id: i32,
        kind: st::BmResourceType,
        name: String,
    ) -> thrift::Result<i32> {
        self.run(|s| {
            context(cxt_id, IdLookupError::INVALID_RESOURCE_NAME)?;
            let kind = resource_from_wire(kind).ok_or(IdLookupError::INVALID_RESOURCE_TYPE)?;
            s.get_id_from_name(kind, &name)
        })
    }
    fn handle_bm_serialize_state(&self) -> thrift::Result<String> {
        Ok(self.lock().serialize_state())
    }
}

// ---- the PRE, with and without LAGs ----

fn ports(map: &str) -> RtResult<Vec<u32>> {
    map_to_list(map).ok_or_else(|| McError::ERROR.into())
}

fn lags(map: &str) -> RtResult<Vec<u16>> {
    ports(map)?
        .into_iter()
        .map(|l| u16::try_from(l).map_err(|_| McError::ERROR.into()))
        .collect()
}

impl<R: Runtime> Handler<R> {
    fn mc<T>(&self, cxt_id: i32, f: impl FnOnce(&mut R) -> RtResult<T>) -> RtResult<T> {
        context(cxt_id, McError::ERROR)?;
        f(&mut self.lock())
    }
}

macro_rules! pre_common {
    ($conv:ident) => {
        fn handle_bm_mc_mgrp_create(&self, cxt_id: i32, mgrp: i32) -> thrift::Result<i32> {
            $conv(self.mc(cxt_id, |s| {
                s.mc_mgrp_create(unsigned(mgrp, McError::INVALID_MGID)?)
                    .map(|h| h as i32)
            }))
        }
        fn handle_bm_mc_mgrp_destroy(&self, cxt_id: i32, h: i32) -> thrift::Result<()> {
            $conv(self.mc(cxt_id, |s| s.mc_mgrp_destroy(h as u32)))
        }
        fn handle_bm_mc_node_associate(&self, cxt_id: i32, g: i32, n: i32) -> thrift::Result<()> {
            $conv(self.mc(cxt_id, |s| s.mc_node_associate(g as u32, n as u32)))
        }
        fn handle_bm_mc_node_dissociate(&self, cxt_id: i32, g: i32, n: i32) -> thrift::Result<()> {
            $conv(self.mc(cxt_id, |s| s.mc_node_dissociate(g as u32, n as u32)))
        }
        fn handle_bm_mc_node_destroy(&self, cxt_id: i32, n: i32) -> thrift::Result<()> {
            $conv(self.mc(cxt_id, |s| s.mc_node_destroy(n as u32)))
        }
        fn handle_bm_mc_get_entries(&self, cxt_id: i32) -> thrift::Result<String> {
            $conv(self.mc(cxt_id, |s| s.mc_get_entries()))
        }
    };
}

impl<R: Runtime> pre::SimplePreSyncHandler for Handler<R> {
    pre_common!(wire_pre);
    fn handle_bm_mc_node_create(
        &self,
        cxt_id: i32,
        rid: i32,
        port_map: String,
    ) -> thrift::Result<i32> {
        wire_pre(self.mc(cxt_id, |s| {
            let rid = unsigned(rid, McError::ERROR)?;
            s.mc_node_create(rid, &ports(&port_map)?, &[])
                .map(|n| n as i32)
        }))
    }
    fn handle_bm_mc_node_update(
        &self,
        cxt_id: i32,
        n: i32,
        port_map: String,
    ) -> thrift::Result<()> {
        wire_pre(self.mc(cxt_id, |s| {
            s.mc_node_update(n as u32, &ports(&port_map)?, &[])
        }))
    }
}

impl<R: Runtime> lag::SimplePreLAGSyncHandler for Handler<R> {
    pre_common!(wire);
    fn handle_bm_mc_node_create(
        &self,
        cxt_id: i32,
        rid: i32,
        port_map: String,
        lag_map: String,
    ) -> thrift::Result<i32> {
        wire(self.mc(cxt_id, |s| {
            let rid = unsigned(rid, McError::ERROR)?;
            s.mc_node_create(rid, &ports(&port_map)?, &lags(&lag_map)?)
                .map(|n| n as i32)
        }))
    }
    fn handle_bm_mc_node_update(
        &self,
        cxt_id: i32,
        n: i32,
        port_map: String,
        lag_map: String,
    ) -> thrift::Result<()> {
        wire(self.mc(cxt_id, |s| {
            s.mc_node_update(n as u32, &ports(&port_map)?, &lags(&lag_map)?)
        }))
    }
    fn handle_bm_mc_set_lag_membership(
        &self,
        cxt_id: i32,
        lag: i16,
        port_map: String,
    ) -> thrift::Result<()> {
        wire(self.mc(cxt_id, |s| {
            let lag = u16::try_from(lag).map_err(|_| McError::ERROR)?;
            s.mc_set_lag_membership(lag, &ports(&port_map)?)
        }))
    }
}

// ---- simple_switch ----

/// BMv2's queue and deprecated mirroring calls answer 0 for success and non-zero otherwise.
fn status(r: RtResult<()>) -> i32 {
    if r.is_ok() {
        0
    } else {
        1
    }
}

impl<R: Runtime> ss::SimpleSwitchSyncHandler for Handler<R> {
    fn handle_mirroring_mapping_add(&self, id: i32, port: i32) -> thrift::Result<i32> {
        let r = (|| {
            let id = unsigned(id, MirroringError::SESSION_NOT_FOUND)?;
            let port = unsigned(port, MirroringError::SESSION_NOT_FOUND)?;
            let session = tern_runtime::MirroringSession {
                port: Some(port),
                mgid: None,
            };
            self.lock().mirroring_session_add(id, session)
        })();
        Ok(status(r))
    }
    fn handle_mirroring_mapping_delete(&self, id: i32) -> thrift::Result<i32> {
        let r = unsigned(id, MirroringError::SESSION_NOT_FOUND)
            .and_then(|id| self.lock().mirroring_session_delete(id));
        Ok(status(r))
    }
    fn handle_mirroring_mapping_get_egress_port(&self, id: i32) -> thrift::Result<i32> {
        let r = unsigned(id, MirroringError::SESSION_NOT_FOUND)
            .and_then(|id| self.lock().mirroring_session_get(id));
        Ok(match r {
            Ok(tern_runtime::MirroringSession { port: Some(p), .. }) => p as i32,
            _ => -1,
        })
    }
    fn handle_mirroring_session_add(
        &self,
        id: i32,
        config: ss::MirroringSessionConfig,
    ) -> thrift::Result<()> {
        self.run(|s| {
            let id = unsigned(id, MirroringError::SESSION_NOT_FOUND)?;
            let session = mirroring_from_wire(&config).ok_or(MirroringError::SESSION_NOT_FOUND)?;
            s.mirroring_session_add(id, session)
        })
    }
    fn handle_mirroring_session_delete(&self, id: i32) -> thrift::Result<()> {
        self.run(|s| s.mirroring_session_delete(unsigned(id, MirroringError::SESSION_NOT_FOUND)?))
    }
    fn handle_mirroring_session_get(&self, id: i32) -> thrift::Result<ss::MirroringSessionConfig> {
        self.run(|s| {
            s.mirroring_session_get(unsigned(id, MirroringError::SESSION_NOT_FOUND)?)
                .map(mirroring_to_wire)
        })
    }
    fn handle_set_egress_priority_queue_depth(
        &self,
        port: i32,
        prio: i32,
        depth: i32,
    ) -> thrift::Result<i32> {
        Ok(status((|| {
            let port = unsigned(port, DevMgrError::ERROR)?;
            let prio = unsigned(prio, DevMgrError::ERROR)?;
            let depth = unsigned(depth, DevMgrError::ERROR)?;
            self.lock()
                .set_egress_queue_depth(Some(port), Some(prio), depth)
        })()))
    }
    fn handle_set_egress_queue_depth(&self, port: i32, depth: i32) -> thrift::Result<i32> {
        Ok(status((|| {
            let port = unsigned(port, DevMgrError::ERROR)?;
            let depth = unsigned(depth, DevMgrError::ERROR)?;
            self.lock().set_egress_queue_depth(Some(port), None, depth)
        })()))
    }
    fn handle_set_all_egress_queue_depths(&self, depth: i32) -> thrift::Result<i32> {
        Ok(status((|| {
            let depth = unsigned(depth, DevMgrError::ERROR)?;
            self.lock().set_egress_queue_depth(None, None, depth)
        })()))
    }
    fn handle_set_egress_priority_queue_rate(
        &self,
        port: i32,
        prio: i32,
        rate: i64,
    ) -> thrift::Result<i32> {
        Ok(status((|| {
            let port = unsigned(port, DevMgrError::ERROR)?;
            let prio = unsigned(prio, DevMgrError::ERROR)?;
            let rate = u64::try_from(rate).map_err(|_| DevMgrError::ERROR)?;
            self.lock()
                .set_egress_queue_rate(Some(port), Some(prio), rate)
        })()))
    }
    fn handle_set_egress_queue_rate(&self, port: i32, rate: i64) -> thrift::Result<i32> {
        Ok(status((|| {
            let port = unsigned(port, DevMgrError::ERROR)?;
            let rate = u64::try_from(rate).map_err(|_| DevMgrError::ERROR)?;
            self.lock().set_egress_queue_rate(Some(port), None, rate)
        })()))
    }
    fn handle_set_all_egress_queue_rates(&self, rate: i64) -> thrift::Result<i32> {
        Ok(status((|| {
            let rate = u64::try_from(rate).map_err(|_| DevMgrError::ERROR)?;
            self.lock().set_egress_queue_rate(None, None, rate)
        })()))
    }
    fn handle_get_time_elapsed_us(&self) -> thrift::Result<i64> {
        Ok(self.lock().get_time_elapsed_us() as i64)
    }
    fn handle_get_time_since_epoch_us(&self) -> thrift::Result<i64> {
        Ok(self.lock().get_time_since_epoch_us() as i64)
    }
}

// ------------------------------------------------------------------------------------------
// multiplexing and connections

type Service = Box<dyn TProcessor + Send + Sync>;

/// Routes `<service>:<method>` messages; anything it does not know gets an application
/// exception after its arguments have been skipped.
struct Mux {
    services: HashMap<&'static str, Service>,
}

impl Mux {
    fn new<R: Runtime + Send + 'static>(sw: Arc<Mutex<R>>) -> Mux {
        let h = Handler { sw };
        let mut services: HashMap<&'static str, Service> = HashMap::new();
        services.insert(
            "standard",
            Box::new(st::StandardSyncProcessor::new(h.clone())),
        );
        services.insert(
            "simple_pre",
            Box::new(pre::SimplePreSyncProcessor::new(h.clone())),
        );
        services.insert(
            "simple_pre_lag",
            Box::new(lag::SimplePreLAGSyncProcessor::new(h.clone())),
        );
        services.insert(
            "simple_switch",
            Box::new(ss::SimpleSwitchSyncProcessor::new(h)),
        );
        Mux { services }
    }
}

impl TProcessor for Mux {
    fn process(
        &self,
        i: &mut dyn TInputProtocol,
        o: &mut dyn TOutputProtocol,
    ) -> thrift::Result<()> {
        let ident = i.read_message_begin()?;
        if let Some((svc, method)) = ident.name.split_once(':') {
            let known = known_methods()
                .get(svc)
                .is_some_and(|ms| ms.iter().any(|m| m == method));
            if let (true, Some(p)) = (known, self.services.get(svc)) {
                let inner =
                    TMessageIdentifier::new(method, ident.message_type, ident.sequence_number);
                let mut stored = TStoredInputProtocol::new(i, inner);
                return p.process(&mut stored, o);
            }
        }
        i.skip(TType::Struct)?;
        i.read_message_end()?;
        let err = ApplicationError::new(
            ApplicationErrorKind::UnknownMethod,
            format!("unknown service or method '{}'", ident.name),
        );
        let reply =
            TMessageIdentifier::new(ident.name, TMessageType::Exception, ident.sequence_number);
        o.write_message_begin(&reply)?;
        thrift::Error::write_application_error_to_out_protocol(&err, o)?;
        o.write_message_end()?;
        o.flush()
    }
}

/// Serve one client until it disconnects or sends something malformed.
fn connection(stream: TcpStream, mux: &Mux) {
    let _ = stream.set_nodelay(true);
    let (Ok(read_half), Ok(write_half)) = (stream.try_clone(), stream.try_clone()) else {
        return;
    };
    let mut i = GuardedInput::new(TBufferedReadTransport::new(read_half), Limits::SERVER);
    let mut o = TBinaryOutputProtocol::new(TBufferedWriteTransport::new(write_half), true);
    // Malformed input, a closed socket or a panic ends the loop: this connection only.
    // A read that failed part-way leaves the stream out of step, even when the processor
    // answered it with an exception: close then too.
    while let Ok(Ok(())) = catch_unwind(AssertUnwindSafe(|| mux.process(&mut i, &mut o))) {
        if i.failed() {
            break;
        }
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Connections a server serves at once by default ([`serve`], [`spawn`],
/// [`spawn_stoppable`]; [`spawn_stoppable_with`] sets another bound). Each connection holds a
/// thread for as long as its client keeps it open (`simple_switch_CLI` keeps one for its whole
/// session), so without a bound a client opening connections in a loop would take threads
/// and memory without end.
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;

/// Serve BMv2's Thrift API for `sw` on `listener`: blocking, one thread per connection, at most
/// [`DEFAULT_MAX_CONNECTIONS`] at once (a connection past them is closed at once, and said on
/// standard error; the others go on).
///
/// Returns only if accepting fails persistently (the listener is unusable).
pub fn serve<R: Runtime + Send + 'static>(
    listener: TcpListener,
    sw: Arc<Mutex<R>>,
) -> io::Result<()> {
    serve_with(listener, sw, DEFAULT_MAX_CONNECTIONS)
}

/// [`serve`] with at most `max_connections` connections served at once.
pub fn serve_with<R: Runtime + Send + 'static>(
    listener: TcpListener,
    sw: Arc<Mutex<R>>,
    max_connections: usize,
) -> io::Result<()> {
    serve_until(listener, sw, &Arc::new(Stop::default()), max_connections)
}

/// What [`Server::stop`] shares with its accept loop: the stop flag and the open
/// connections (so that stopping also closes them).
#[derive(Default)]
struct Stop {
    stopped: std::sync::atomic::AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    /// Connections being served (each connection's thread holds one [`Served`]).
    live: Arc<std::sync::atomic::AtomicUsize>,
    /// Connections closed at once because the bound was reached.
    refused: std::sync::atomic::AtomicU64,
}

/// One connection being served: counted in [`Stop::live`] until its thread ends.
struct Served(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Served {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Stop {
    fn is_set(&self) -> bool {
        self.stopped.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn conns(&self) -> MutexGuard<'_, Vec<TcpStream>> {
        self.conns.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// [`serve`] until `stop` is set (checked after every accepted connection: the stopper wakes
/// the loop by connecting once). Each connection's stream is kept in `stop` while it lives;
/// at most `max_connections` are served at once.
fn serve_until<R: Runtime + Send + 'static>(
    listener: TcpListener,
    sw: Arc<Mutex<R>>,
    stop: &Arc<Stop>,
    max_connections: usize,
) -> io::Result<()> {
    use std::sync::atomic::Ordering;
    let mux = Arc::new(Mux::new(sw));
    let mut failures = 0u32;
    for stream in listener.incoming() {
        if stop.is_set() {
            break;
        }
        match stream {
            Ok(stream) => {
                failures = 0;
                if stop.live.load(Ordering::Acquire) >= max_connections {
                    // Closed at once (dropped): the client sees the connection end. Said for
                    // the first refusal and every 1,000th after, not for each.
                    let n = stop.refused.fetch_add(1, Ordering::Relaxed);
                    if n.is_multiple_of(1000) {
                        let peer = stream
                            .peer_addr()
                            .map_or_else(|_| "?".to_string(), |a| a.to_string());
                        eprintln!(
                            "tern-thrift: {max_connections} connections open, the most served \
                             at once: closed the one from {peer} ({} refused so far)",
                            n + 1
                        );
                    }
                    continue;
                }
                stop.live.fetch_add(1, Ordering::AcqRel);
                let served = Served(Arc::clone(&stop.live));
                if let Ok(s) = stream.try_clone() {
                    let mut conns = stop.conns();
                    // Forget the connections that have ended (their peer address is gone).
                    conns.retain(|c| c.peer_addr().is_ok());
                    conns.push(s);
                    // A stop that drained the list before this push set the flag first.
                    if stop.is_set() {
                        for c in conns.drain(..) {
                            let _ = c.shutdown(std::net::Shutdown::Both);
                        }
                        break;
                    }
                }
                let mux = Arc::clone(&mux);
                // If no thread can be started the stream is dropped, closing the connection
                // (and `served` with it, uncounting it).
                let _ = thread::Builder::new()
                    .name("tern-thrift-conn".into())
                    .spawn(move || {
                        let _served = served;
                        connection(stream, &mux)
                    });
            }
            Err(e) => {
                // Transient errors (a client that reset before accept, descriptor exhaustion)
                // must not stop the server; give up only if accept keeps failing.
                failures += 1;
                if failures > 1000 {
                    return Err(e);
                }
                thread::sleep(std::time::Duration::from_millis(10));
            }
        }
    }
    Ok(())
}

/// Bind `addr`, then [`serve`] on a background thread; returns the bound address (useful with
/// port 0) and the server thread.
pub fn spawn<R: Runtime + Send + 'static>(
    addr: impl ToSocketAddrs,
    sw: Arc<Mutex<R>>,
) -> io::Result<(SocketAddr, JoinHandle<io::Result<()>>)> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let handle = thread::Builder::new()
        .name("tern-thrift".into())
        .spawn(move || serve(listener, sw))?;
    Ok((local, handle))
}

/// A Thrift server that can be stopped ([`spawn_stoppable`]): [`Server::stop`] (also on drop)
/// closes the listener and every open connection, and waits for the accept thread.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<Stop>,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl Server {
    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections being served now.
    pub fn connections(&self) -> usize {
        self.stop.live.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Connections closed at once because the server already served its bound of them.
    pub fn refused(&self) -> u64 {
        self.stop.refused.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Stop accepting, close the listener and every open connection (their clients see the
    /// connection closed), and wait for the accept thread to end. Idempotent.
    pub fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        self.stop
            .stopped
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // Wake the blocking accept with one connection of our own (to loopback when the
        // listener is bound to every address).
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let woke = TcpStream::connect_timeout(&wake, std::time::Duration::from_secs(2)).is_ok();
        for c in self.stop.conns().drain(..) {
            let _ = c.shutdown(std::net::Shutdown::Both);
        }
        if woke {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

/// [`spawn`], returning a [`Server`] that closes the listener and its connections when
/// stopped or dropped (a per-device server that must go when its device goes).
pub fn spawn_stoppable<R: Runtime + Send + 'static>(
    addr: impl ToSocketAddrs,
    sw: Arc<Mutex<R>>,
) -> io::Result<Server> {
    spawn_stoppable_with(addr, sw, DEFAULT_MAX_CONNECTIONS)
}

/// [`spawn_stoppable`] serving at most `max_connections` connections at once (at least one):
/// a connection past them is closed as soon as it is accepted, and counted
/// ([`Server::refused`]).
pub fn spawn_stoppable_with<R: Runtime + Send + 'static>(
    addr: impl ToSocketAddrs,
    sw: Arc<Mutex<R>>,
    max_connections: usize,
) -> io::Result<Server> {
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let stop = Arc::new(Stop::default());
    let st = Arc::clone(&stop);
    let max = max_connections.max(1);
    let thread = thread::Builder::new()
        .name("tern-thrift".into())
        .spawn(move || serve_until(listener, sw, &st, max))?;
    Ok(Server {
        addr: local,
        stop,
        thread: Some(thread),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idl_method_lists_are_complete() {
        let m = known_methods();
        let std_methods = &m["standard"];
        assert_eq!(std_methods.len(), 70, "{std_methods:?}");
        for name in [
            "bm_mt_add_entry",
            "bm_get_config",
            "bm_serialize_state",
            "bm_mgmt_get_info",
        ] {
            assert!(std_methods.iter().any(|x| x == name), "{name}");
        }
        assert!(!std_methods.iter().any(|x| x == "throws"));
        assert_eq!(m["simple_pre"].len(), 8);
        assert_eq!(m["simple_pre_lag"].len(), 9);
        assert_eq!(m["simple_switch"].len(), 14);
    }
}
