//! The Thrift client: [`ThriftRuntime`] implements [`tern_runtime::Runtime`] by calling a
//! remote switch (tern's server or BMv2's) over one multiplexed TCP connection.

use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::sync::{Arc, Mutex, MutexGuard};

use thrift::protocol::{TBinaryOutputProtocol, TMultiplexedOutputProtocol};
use thrift::transport::{TBufferedReadTransport, TBufferedWriteTransport};

use tern_runtime::{
    ActionEntry, CounterError, CounterValue, CrcConfig, CrcError, DevMgrError, EntryHandle,
    GroupHandle, IdLookupError, LearnError, MatchParam, McError, MemberHandle, MeterError,
    MeterRate, MirroringError, MirroringSession, NodeHandle, ParseVSetError, Port, PortInfo,
    ProfileGroup, ProfileMember, RegisterError, ResourceType, RtResult, Runtime, RuntimeError,
    SwapError, SwitchInfo, TableEntry, TableError, ToeplitzError,
};

use crate::convert::*;
use crate::gen::simple_pre::{SimplePreSyncClient, TSimplePreSyncClient};
use crate::gen::simple_pre_lag::{SimplePreLAGSyncClient, TSimplePreLAGSyncClient};
use crate::gen::simple_switch::{SimpleSwitchSyncClient, TSimpleSwitchSyncClient};
use crate::gen::standard::{self as st, StandardSyncClient, TStandardSyncClient};
use crate::guard::{GuardedInput, Limits};

/// The read side of the connection, shared by the four service clients.
#[derive(Clone)]
struct SharedRead(Arc<Mutex<TBufferedReadTransport<TcpStream>>>);
/// The write side of the connection, shared by the four service clients.
#[derive(Clone)]
struct SharedWrite(Arc<Mutex<TBufferedWriteTransport<TcpStream>>>);

impl Read for SharedRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).read(buf)
    }
}

impl Write for SharedWrite {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).flush()
    }
}

type In = GuardedInput<SharedRead>;
type Out = TMultiplexedOutputProtocol<TBinaryOutputProtocol<SharedWrite>>;

struct Clients {
    std: StandardSyncClient<In, Out>,
    pre: SimplePreSyncClient<In, Out>,
    lag: SimplePreLAGSyncClient<In, Out>,
    ss: SimpleSwitchSyncClient<In, Out>,
    /// Set after a transport or protocol failure: the stream may be out of step.
    broken: Option<String>,
}

/// Which multicast service the client talks to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PreService {
    /// `simple_pre_lag` (what simple_switch registers; supports LAGs).
    #[default]
    Lag,
    /// `simple_pre` (no LAGs).
    Plain,
}

/// A remote switch, driven over BMv2's Thrift API, as a [`Runtime`].
///
/// [`Runtime`] errors can only be BMv2's exception codes, so a failure that is not one (the
/// connection dropped, a malformed reply, a call BMv2's API lacks) is reported as that call
/// family's generic code (e.g. `TableError::ERROR`) and described by [`Self::last_error`].
/// After a transport or protocol failure the connection is considered broken and every
/// further call fails the same way; connect again to recover.
pub struct ThriftRuntime {
    clients: Mutex<Clients>,
    pre: PreService,
    last_error: Mutex<Option<String>>,
    widths: Mutex<ParamWidths>,
}

/// Byte widths of each action's parameters, read from the switch's program (`bm_get_config`)
/// and kept while its MD5 does not change. BMv2's server exports action data as minimal bytes
/// (`Data::get_string`); the client gives it back at the parameter's width, as a local switch
/// returns it.
#[derive(Default)]
struct ParamWidths {
    md5: Option<Vec<u8>>,
    by_action: std::collections::HashMap<String, Vec<usize>>,
}

impl std::fmt::Debug for ThriftRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThriftRuntime")
            .field("pre", &self.pre)
            .field(
                "last_error",
                &*self.last_error.lock().unwrap_or_else(|p| p.into_inner()),
            )
            .finish()
    }
}

/// A thrift error with its message (its `Display` shows only the kind).
fn describe(e: &thrift::Error) -> String {
    match e {
        thrift::Error::Transport(t) => format!("transport error: {}", t.message),
        thrift::Error::Protocol(p) => format!("protocol error: {}", p.message),
        thrift::Error::Application(a) => format!("application exception: {}", a.message),
        thrift::Error::User(u) => format!("error: {u}"),
    }
}

fn sock(stream: &TcpStream) -> io::Result<TcpStream> {
    stream.try_clone()
}

impl ThriftRuntime {
    /// Connect to a Thrift server (e.g. `127.0.0.1:9090`), using `simple_pre_lag` for the PRE.
    pub fn connect(addr: impl ToSocketAddrs) -> io::Result<ThriftRuntime> {
        Self::connect_with(addr, PreService::Lag)
    }

    /// Connect, choosing the multicast service.
    pub fn connect_with(addr: impl ToSocketAddrs, pre: PreService) -> io::Result<ThriftRuntime> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        let read = SharedRead(Arc::new(Mutex::new(TBufferedReadTransport::new(sock(
            &stream,
        )?))));
        let write = SharedWrite(Arc::new(Mutex::new(TBufferedWriteTransport::new(stream))));
        let input = || GuardedInput::new(read.clone(), Limits::CLIENT);
        let output = |svc: &str| {
            TMultiplexedOutputProtocol::new(svc, TBinaryOutputProtocol::new(write.clone(), true))
        };
        let clients = Clients {
            std: StandardSyncClient::new(input(), output("standard")),
            pre: SimplePreSyncClient::new(input(), output("simple_pre")),
            lag: SimplePreLAGSyncClient::new(input(), output("simple_pre_lag")),
            ss: SimpleSwitchSyncClient::new(input(), output("simple_switch")),
            broken: None,
        };
        Ok(ThriftRuntime {
            clients: Mutex::new(clients),
            pre,
            last_error: Mutex::new(None),
            widths: Mutex::new(ParamWidths::default()),
        })
    }

    /// `data` of `action` at its parameters' byte widths (unchanged when the program cannot be
    /// read or does not know the action).
    fn widen(&self, action: &str, data: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        let md5 = {
            let mut c = self.clients();
            if c.broken.is_some() {
                return data;
            }
            match c.std.bm_get_config_md5() {
                Ok(m) => m,
                Err(_) => return data,
            }
        };
        let mut w = self.widths.lock().unwrap_or_else(|p| p.into_inner());
        if w.md5.as_ref() != Some(&md5) {
            let json = {
                let mut c = self.clients();
                match c.std.bm_get_config() {
                    Ok(j) => j,
                    Err(_) => return data,
                }
            };
            w.by_action.clear();
            if let Ok(p) = tern_model::load(&json) {
                for a in &p.actions {
                    w.by_action.entry(a.name.clone()).or_insert_with(|| {
                        a.runtime_data
                            .iter()
                            .map(|(_, bw)| bw.div_ceil(8) as usize)
                            .collect()
                    });
                }
            }
            w.md5 = Some(md5);
        }
        match w.by_action.get(action) {
            Some(ws) if ws.len() == data.len() => data
                .iter()
                .zip(ws)
                .map(|(d, n)| widen_param(d, *n))
                .collect(),
            _ => data,
        }
    }

    fn widen_entry(&self, a: ActionEntry) -> ActionEntry {
        match a {
            ActionEntry::Action { name, data } => {
                let data = self.widen(&name, data);
                ActionEntry::Action { name, data }
            }
            other => other,
        }
    }

    fn widen_member(&self, mut m: ProfileMember) -> ProfileMember {
        m.data = self.widen(&m.action, std::mem::take(&mut m.data));
        m
    }

    /// The description of the most recent failure that was not a BMv2 exception (transport,
    /// protocol, application exception, unsupported call), if any; clears it.
    pub fn last_error(&self) -> Option<String> {
        self.last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    fn note(&self, msg: String) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(msg);
    }

    fn clients(&self) -> MutexGuard<'_, Clients> {
        self.clients.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Make one call; BMv2 exceptions come back as themselves, anything else as `fallback`.
    fn call<T>(
        &self,
        fallback: impl Into<RuntimeError>,
        f: impl FnOnce(&mut Clients) -> thrift::Result<T>,
    ) -> RtResult<T> {
        let fallback = fallback.into();
        let mut c = self.clients();
        if let Some(why) = &c.broken {
            let msg = format!("Thrift connection is broken: {why}");
            drop(c);
            self.note(msg);
            return Err(fallback);
        }
        match f(&mut c) {
            Ok(v) => Ok(v),
            Err(e) => {
                if let Some(re) = error_from_wire(&e) {
                    return Err(re);
                }
                if matches!(e, thrift::Error::Transport(_) | thrift::Error::Protocol(_)) {
                    c.broken = Some(describe(&e));
                }
                drop(c);
                self.note(format!("Thrift call failed: {}", describe(&e)));
                Err(fallback)
            }
        }
    }

    /// A call whose trait method cannot fail: failures give `default` and set `last_error`.
    fn infallible<T>(&self, default: T, f: impl FnOnce(&mut Clients) -> thrift::Result<T>) -> T {
        self.call(TableError::ERROR, f).unwrap_or(default)
    }

    fn unsupported<T>(&self, what: &str, err: impl Into<RuntimeError>) -> RtResult<T> {
        self.note(format!("{what}: BMv2's Thrift API has no such call"));
        Err(err.into())
    }
}

/// A runtime index as the wire's i32, or `err` when it does not fit.
fn i32_of(v: u32, err: impl Into<RuntimeError>) -> RtResult<i32> {
    i32::try_from(v).map_err(|_| err.into())
}

fn malformed(bad: RuntimeError) -> impl Fn() -> thrift::Error {
    move || thrift::Error::from(format!("malformed reply ({bad})"))
}

/// A reply field the server must send; a missing one is a malformed reply.
fn need<T>(v: Option<T>, bad: RuntimeError) -> thrift::Result<T> {
    v.ok_or_else(malformed(bad))
}

fn bad_reply(bad: RuntimeError) -> impl Fn(RuntimeError) -> thrift::Error {
    move |_| malformed(bad)()
}

const T: TableError = TableError::ERROR;

impl Runtime for ThriftRuntime {
    fn get_config(&self) -> String {
        self.infallible(String::new(), |c| c.std.bm_get_config())
    }
    fn get_config_md5(&self) -> [u8; 16] {
        self.infallible([0; 16], |c| {
            let v = c.std.bm_get_config_md5()?;
            <[u8; 16]>::try_from(v.as_slice())
                .map_err(|_| thrift::Error::from(format!("MD5 of {} bytes", v.len())))
        })
    }
    fn load_new_config(&mut self, json: &str) -> RtResult<()> {
        self.call(SwapError::NO_ONGOING_SWAP, |c| {
            c.std.bm_load_new_config(json.to_string())
        })
    }
    fn swap_configs(&mut self) -> RtResult<()> {
        self.call(SwapError::NO_ONGOING_SWAP, |c| c.std.bm_swap_configs())
    }
    fn reset_state(&mut self) {
        self.infallible((), |c| c.std.bm_reset_state())
    }
    fn serialize_state(&self) -> String {
        self.infallible(String::new(), |c| c.std.bm_serialize_state())
    }
    fn switch_info(&self) -> SwitchInfo {
        self.infallible(SwitchInfo::default(), |c| {
            c.std.bm_mgmt_get_info().map(switch_info_from_wire)
        })
    }
    fn get_id_from_name(&self, kind: ResourceType, name: &str) -> RtResult<i32> {
        self.call(IdLookupError::INVALID_RESOURCE_NAME, |c| {
            c.std
                .bm_get_id_from_name(0, resource_to_wire(kind), name.to_string())
        })
    }

    // ---- match tables ----
    fn mt_get_num_entries(&self, table: &str) -> RtResult<u64> {
        self.call(T, |c| c.std.bm_mt_get_num_entries(0, table.into()))
            .map(|n| n.max(0) as u64)
    }
    fn mt_clear_entries(&mut self, table: &str, reset_default_entry: bool) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_clear_entries(0, table.into(), reset_default_entry)
        })
    }
    fn mt_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        action: &str,
        data: &[Vec<u8>],
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.call(T, |c| {
            c.std.bm_mt_add_entry(
                0,
                table.into(),
                match_key_to_wire(key),
                action.into(),
                data.to_vec(),
                options_to_wire(priority),
            )
        })
        .map(|h| h as u32)
    }
    fn mt_set_default_action(
        &mut self,
        table: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_set_default_action(0, table.into(), action.into(), data.to_vec())
        })
    }
    fn mt_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.call(T, |c| c.std.bm_mt_reset_default_entry(0, table.into()))
    }
    fn mt_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.call(T, |c| {
            c.std.bm_mt_delete_entry(0, table.into(), handle as i32)
        })
    }
    fn mt_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_modify_entry(0, table.into(), handle as i32, action.into(), data.to_vec())
        })
    }
    fn mt_set_entry_ttl(
        &mut self,
        table: &str,
        handle: EntryHandle,
        timeout_ms: u32,
    ) -> RtResult<()> {
        let ms = i32_of(timeout_ms, T)?;
        self.call(T, |c| {
            c.std
                .bm_mt_set_entry_ttl(0, table.into(), handle as i32, ms)
        })
    }
    fn mt_indirect_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        member: MemberHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.call(T, |c| {
            c.std.bm_mt_indirect_add_entry(
                0,
                table.into(),
                match_key_to_wire(key),
                member as i32,
                options_to_wire(priority),
            )
        })
        .map(|h| h as u32)
    }
    fn mt_indirect_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_indirect_modify_entry(0, table.into(), handle as i32, member as i32)
        })
    }
    fn mt_indirect_delete_entry(&mut self, table: &str, handle: EntryHandle) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_indirect_delete_entry(0, table.into(), handle as i32)
        })
    }
    fn mt_indirect_set_default_member(
        &mut self,
        table: &str,
        member: MemberHandle,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_indirect_set_default_member(0, table.into(), member as i32)
        })
    }
    fn mt_indirect_reset_default_entry(&mut self, table: &str) -> RtResult<()> {
        self.call(T, |c| {
            c.std.bm_mt_indirect_reset_default_entry(0, table.into())
        })
    }
    fn mt_indirect_ws_add_entry(
        &mut self,
        table: &str,
        key: &[MatchParam],
        group: GroupHandle,
        priority: Option<i32>,
    ) -> RtResult<EntryHandle> {
        self.call(T, |c| {
            c.std.bm_mt_indirect_ws_add_entry(
                0,
                table.into(),
                match_key_to_wire(key),
                group as i32,
                options_to_wire(priority),
            )
        })
        .map(|h| h as u32)
    }
    fn mt_indirect_ws_modify_entry(
        &mut self,
        table: &str,
        handle: EntryHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_indirect_ws_modify_entry(0, table.into(), handle as i32, group as i32)
        })
    }
    fn mt_indirect_ws_set_default_group(
        &mut self,
        table: &str,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_indirect_ws_set_default_group(0, table.into(), group as i32)
        })
    }
    fn mt_read_counter(&self, table: &str, handle: EntryHandle) -> RtResult<CounterValue> {
        self.call(T, |c| {
            c.std.bm_mt_read_counter(0, table.into(), handle as i32)
        })
        .map(|v| counter_from_wire(&v))
    }
    fn mt_reset_counters(&mut self, table: &str) -> RtResult<()> {
        self.call(T, |c| c.std.bm_mt_reset_counters(0, table.into()))
    }
    fn mt_write_counter(
        &mut self,
        table: &str,
        handle: EntryHandle,
        value: CounterValue,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_write_counter(0, table.into(), handle as i32, counter_to_wire(value))
        })
    }
    fn mt_set_meter_rates(
        &mut self,
        table: &str,
        handle: EntryHandle,
        rates: &[MeterRate],
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_set_meter_rates(0, table.into(), handle as i32, rates_to_wire(rates))
        })
    }
    fn mt_get_meter_rates(&self, table: &str, handle: EntryHandle) -> RtResult<Vec<MeterRate>> {
        let bad = RuntimeError::from(T);
        self.call(T, |c| {
            let r = c
                .std
                .bm_mt_get_meter_rates(0, table.into(), handle as i32)?;
            rates_from_wire(&r, bad).map_err(bad_reply(bad))
        })
    }
    fn mt_get_entries(&self, table: &str) -> RtResult<Vec<TableEntry>> {
        let bad = RuntimeError::from(T);
        let es: Vec<TableEntry> = self.call(T, |c| {
            c.std
                .bm_mt_get_entries(0, table.into())?
                .into_iter()
                .map(|e| entry_from_wire(e, bad).map_err(bad_reply(bad)))
                .collect()
        })?;
        Ok(es
            .into_iter()
            .map(|mut e| {
                e.action = self.widen_entry(e.action);
                e
            })
            .collect())
    }
    fn mt_get_entry(&self, table: &str, handle: EntryHandle) -> RtResult<TableEntry> {
        let bad = RuntimeError::from(T);
        let mut e = self.call(T, |c| {
            let e = c.std.bm_mt_get_entry(0, table.into(), handle as i32)?;
            entry_from_wire(e, bad).map_err(bad_reply(bad))
        })?;
        e.action = self.widen_entry(e.action);
        Ok(e)
    }
    fn mt_get_default_entry(&self, table: &str) -> RtResult<ActionEntry> {
        let bad = RuntimeError::from(T);
        let a = self.call(T, |c| {
            let e = c.std.bm_mt_get_default_entry(0, table.into())?;
            action_entry_from_wire(e, bad).map_err(bad_reply(bad))
        })?;
        Ok(self.widen_entry(a))
    }
    fn mt_get_entry_from_key(
        &self,
        table: &str,
        key: &[MatchParam],
        priority: Option<i32>,
    ) -> RtResult<TableEntry> {
        let bad = RuntimeError::from(T);
        let mut e = self.call(T, |c| {
            let e = c.std.bm_mt_get_entry_from_key(
                0,
                table.into(),
                match_key_to_wire(key),
                options_to_wire(priority),
            )?;
            entry_from_wire(e, bad).map_err(bad_reply(bad))
        })?;
        e.action = self.widen_entry(e.action);
        Ok(e)
    }

    // ---- action profiles ----
    fn act_prof_add_member(
        &mut self,
        prof: &str,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<MemberHandle> {
        self.call(T, |c| {
            c.std
                .bm_mt_act_prof_add_member(0, prof.into(), action.into(), data.to_vec())
        })
        .map(|m| m as u32)
    }
    fn act_prof_delete_member(&mut self, prof: &str, member: MemberHandle) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_act_prof_delete_member(0, prof.into(), member as i32)
        })
    }
    fn act_prof_modify_member(
        &mut self,
        prof: &str,
        member: MemberHandle,
        action: &str,
        data: &[Vec<u8>],
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std.bm_mt_act_prof_modify_member(
                0,
                prof.into(),
                member as i32,
                action.into(),
                data.to_vec(),
            )
        })
    }
    fn act_prof_create_group(&mut self, prof: &str) -> RtResult<GroupHandle> {
        self.call(T, |c| c.std.bm_mt_act_prof_create_group(0, prof.into()))
            .map(|g| g as u32)
    }
    fn act_prof_delete_group(&mut self, prof: &str, group: GroupHandle) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_act_prof_delete_group(0, prof.into(), group as i32)
        })
    }
    fn act_prof_add_member_to_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std
                .bm_mt_act_prof_add_member_to_group(0, prof.into(), member as i32, group as i32)
        })
    }
    fn act_prof_remove_member_from_group(
        &mut self,
        prof: &str,
        member: MemberHandle,
        group: GroupHandle,
    ) -> RtResult<()> {
        self.call(T, |c| {
            c.std.bm_mt_act_prof_remove_member_from_group(
                0,
                prof.into(),
                member as i32,
                group as i32,
            )
        })
    }
    fn act_prof_get_members(&self, prof: &str) -> RtResult<Vec<ProfileMember>> {
        let bad = RuntimeError::from(T);
        let ms: Vec<ProfileMember> = self.call(T, |c| {
            c.std
                .bm_mt_act_prof_get_members(0, prof.into())?
                .into_iter()
                .map(|m| member_from_wire(m, bad).map_err(bad_reply(bad)))
                .collect()
        })?;
        Ok(ms.into_iter().map(|m| self.widen_member(m)).collect())
    }
    fn act_prof_get_member(&self, prof: &str, member: MemberHandle) -> RtResult<ProfileMember> {
        let bad = RuntimeError::from(T);
        let m = self.call(T, |c| {
            let m = c
                .std
                .bm_mt_act_prof_get_member(0, prof.into(), member as i32)?;
            member_from_wire(m, bad).map_err(bad_reply(bad))
        })?;
        Ok(self.widen_member(m))
    }
    fn act_prof_get_groups(&self, prof: &str) -> RtResult<Vec<ProfileGroup>> {
        let bad = RuntimeError::from(T);
        self.call(T, |c| {
            c.std
                .bm_mt_act_prof_get_groups(0, prof.into())?
                .into_iter()
                .map(|g| group_from_wire(g, bad).map_err(bad_reply(bad)))
                .collect()
        })
    }
    fn act_prof_get_group(&self, prof: &str, group: GroupHandle) -> RtResult<ProfileGroup> {
        let bad = RuntimeError::from(T);
        self.call(T, |c| {
            let g = c
                .std
                .bm_mt_act_prof_get_group(0, prof.into(), group as i32)?;
            group_from_wire(g, bad).map_err(bad_reply(bad))
        })
    }

    // ---- counters, meters, registers ----
    fn counter_read(&self, counter: &str, index: u32) -> RtResult<CounterValue> {
        let index = i32_of(index, CounterError::INVALID_INDEX)?;
        self.call(CounterError::ERROR, |c| {
            c.std.bm_counter_read(0, counter.into(), index)
        })
        .map(|v| counter_from_wire(&v))
    }
    fn counter_reset_all(&mut self, counter: &str) -> RtResult<()> {
        self.call(CounterError::ERROR, |c| {
            c.std.bm_counter_reset_all(0, counter.into())
        })
    }
    fn counter_write(&mut self, counter: &str, index: u32, value: CounterValue) -> RtResult<()> {
        let index = i32_of(index, CounterError::INVALID_INDEX)?;
        self.call(CounterError::ERROR, |c| {
            c.std
                .bm_counter_write(0, counter.into(), index, counter_to_wire(value))
        })
    }
    fn meter_array_set_rates(&mut self, meter: &str, rates: &[MeterRate]) -> RtResult<()> {
        self.call(MeterError::ERROR, |c| {
            c.std
                .bm_meter_array_set_rates(0, meter.into(), rates_to_wire(rates))
        })
    }
    fn meter_set_rates(&mut self, meter: &str, index: u32, rates: &[MeterRate]) -> RtResult<()> {
        let index = i32_of(index, MeterError::INVALID_INDEX)?;
        self.call(MeterError::ERROR, |c| {
            c.std
                .bm_meter_set_rates(0, meter.into(), index, rates_to_wire(rates))
        })
    }
    fn meter_get_rates(&self, meter: &str, index: u32) -> RtResult<Vec<MeterRate>> {
        let index = i32_of(index, MeterError::INVALID_INDEX)?;
        let bad = RuntimeError::from(MeterError::ERROR);
        self.call(MeterError::ERROR, |c| {
            let r = c.std.bm_meter_get_rates(0, meter.into(), index)?;
            rates_from_wire(&r, bad).map_err(bad_reply(bad))
        })
    }
    fn register_read(&self, register: &str, index: u32) -> RtResult<u64> {
        let index = i32_of(index, RegisterError::INVALID_INDEX)?;
        self.call(RegisterError::ERROR, |c| {
            c.std.bm_register_read(0, register.into(), index)
        })
        .map(|v| v as u64)
    }
    fn register_read_all(&self, register: &str) -> RtResult<Vec<u64>> {
        self.call(RegisterError::ERROR, |c| {
            c.std.bm_register_read_all(0, register.into())
        })
        .map(|vs| vs.into_iter().map(|v| v as u64).collect())
    }
    fn register_write(&mut self, register: &str, index: u32, value: u64) -> RtResult<()> {
        let index = i32_of(index, RegisterError::INVALID_INDEX)?;
        self.call(RegisterError::ERROR, |c| {
            c.std
                .bm_register_write(0, register.into(), index, value as i64)
        })
    }
    fn register_write_range(
        &mut self,
        register: &str,
        start: u32,
        end: u32,
        value: u64,
    ) -> RtResult<()> {
        let start = i32_of(start, RegisterError::INVALID_INDEX)?;
        let end = i32_of(end, RegisterError::INVALID_INDEX)?;
        self.call(RegisterError::ERROR, |c| {
            c.std
                .bm_register_write_range(0, register.into(), start, end, value as i64)
        })
    }
    fn register_reset(&mut self, register: &str) -> RtResult<()> {
        self.call(RegisterError::ERROR, |c| {
            c.std.bm_register_reset(0, register.into())
        })
    }

    // ---- parser value sets ----
    fn parse_vset_add(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        self.call(ParseVSetError::ERROR, |c| {
            c.std.bm_parse_vset_add(0, vset.into(), value.to_vec())
        })
    }
    fn parse_vset_remove(&mut self, vset: &str, value: &[u8]) -> RtResult<()> {
        self.call(ParseVSetError::ERROR, |c| {
            c.std.bm_parse_vset_remove(0, vset.into(), value.to_vec())
        })
    }
    fn parse_vset_get(&self, vset: &str) -> RtResult<Vec<Vec<u8>>> {
        self.call(ParseVSetError::ERROR, |c| {
            c.std.bm_parse_vset_get(0, vset.into())
        })
    }
    fn parse_vset_clear(&mut self, vset: &str) -> RtResult<()> {
        self.call(ParseVSetError::ERROR, |c| {
            c.std.bm_parse_vset_clear(0, vset.into())
        })
    }

    // ---- learning ----
    fn learning_ack(&mut self, list_id: i32, buffer_id: i64, sample_ids: &[i32]) -> RtResult<()> {
        self.call(LearnError::ERROR, |c| {
            c.std
                .bm_learning_ack(0, list_id, buffer_id, sample_ids.to_vec())
        })
    }
    fn learning_ack_buffer(&mut self, list_id: i32, buffer_id: i64) -> RtResult<()> {
        self.call(LearnError::ERROR, |c| {
            c.std.bm_learning_ack_buffer(0, list_id, buffer_id)
        })
    }
    fn learning_set_timeout(&mut self, list_id: i32, timeout_ms: u32) -> RtResult<()> {
        let ms = i32_of(timeout_ms, LearnError::ERROR)?;
        self.call(LearnError::ERROR, |c| {
            c.std.bm_learning_set_timeout(0, list_id, ms)
        })
    }
    fn learning_set_buffer_size(&mut self, list_id: i32, nb_samples: u32) -> RtResult<()> {
        let n = i32_of(nb_samples, LearnError::ERROR)?;
        self.call(LearnError::ERROR, |c| {
            c.std.bm_learning_set_buffer_size(0, list_id, n)
        })
    }

    // ---- hashes ----
    fn set_crc16_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        let fits = |v: u32| u16::try_from(v).map(|v| v as i16);
        let (Ok(p), Ok(i), Ok(x)) = (
            fits(config.polynomial),
            fits(config.initial_remainder),
            fits(config.final_xor_value),
        ) else {
            return Err(CrcError::INVALID_CONFIG.into());
        };
        let wire =
            st::BmCrc16Config::new(p, i, x, config.data_reflected, config.remainder_reflected);
        self.call(CrcError::INVALID_CONFIG, |c| {
            c.std.bm_set_crc16_custom_parameters(0, calc.into(), wire)
        })
    }
    fn set_crc32_custom_parameters(&mut self, calc: &str, config: CrcConfig) -> RtResult<()> {
        let wire = st::BmCrc32Config::new(
            config.polynomial as i32,
            config.initial_remainder as i32,
            config.final_xor_value as i32,
            config.data_reflected,
            config.remainder_reflected,
        );
        self.call(CrcError::INVALID_CONFIG, |c| {
            c.std.bm_set_crc32_custom_parameters(0, calc.into(), wire)
        })
    }
    fn set_toeplitz_hash_key(&mut self, calc: &str, key: &[u8]) -> RtResult<()> {
        self.call(ToeplitzError::INVALID_KEY, |c| {
            c.std.bm_set_toeplitz_hash_key(0, calc.into(), key.to_vec())
        })
    }

    // ---- device manager ----
    fn dev_mgr_add_port(
        &mut self,
        iface_name: &str,
        port: Port,
        pcap_path: Option<&str>,
    ) -> RtResult<()> {
        let port = i32_of(port, DevMgrError::ERROR)?;
        self.call(DevMgrError::ERROR, |c| {
            c.std.bm_dev_mgr_add_port(
                iface_name.into(),
                port,
                pcap_path.unwrap_or_default().into(),
            )
        })
    }
    fn dev_mgr_remove_port(&mut self, port: Port) -> RtResult<()> {
        let port = i32_of(port, DevMgrError::ERROR)?;
        self.call(DevMgrError::ERROR, |c| c.std.bm_dev_mgr_remove_port(port))
    }
    fn dev_mgr_show_ports(&self) -> RtResult<Vec<PortInfo>> {
        self.call(DevMgrError::ERROR, |c| c.std.bm_dev_mgr_show_ports())
            .map(|ps| ps.into_iter().map(port_info_from_wire).collect())
    }

    // ---- multicast PRE ----
    fn mc_mgrp_create(&mut self, mgid: u32) -> RtResult<u32> {
        let mgid = i32_of(mgid, McError::INVALID_MGID)?;
        let r = match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_mgrp_create(0, mgid)),
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_mgrp_create(0, mgid)),
        };
        r.map(|h| h as u32)
    }
    fn mc_mgrp_destroy(&mut self, mgrp_handle: u32) -> RtResult<()> {
        let h = mgrp_handle as i32;
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_mgrp_destroy(0, h)),
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_mgrp_destroy(0, h)),
        }
    }
    fn mc_node_create(&mut self, rid: u32, ports: &[Port], lags: &[u16]) -> RtResult<NodeHandle> {
        let rid = i32_of(rid, McError::ERROR)?;
        let pm = list_to_map(ports.iter().copied());
        let lm = list_to_map(lags.iter().map(|l| u32::from(*l)));
        let r = match self.pre {
            PreService::Lag => {
                self.call(McError::ERROR, |c| c.lag.bm_mc_node_create(0, rid, pm, lm))
            }
            PreService::Plain if !lags.is_empty() => {
                return self.unsupported("mc_node_create with LAGs on simple_pre", McError::ERROR)
            }
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_node_create(0, rid, pm)),
        };
        r.map(|h| h as u32)
    }
    fn mc_node_associate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        let (g, n) = (mgrp_handle as i32, node as i32);
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_node_associate(0, g, n)),
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_node_associate(0, g, n)),
        }
    }
    fn mc_node_dissociate(&mut self, mgrp_handle: u32, node: NodeHandle) -> RtResult<()> {
        let (g, n) = (mgrp_handle as i32, node as i32);
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_node_dissociate(0, g, n)),
            PreService::Plain => {
                self.call(McError::ERROR, |c| c.pre.bm_mc_node_dissociate(0, g, n))
            }
        }
    }
    fn mc_node_destroy(&mut self, node: NodeHandle) -> RtResult<()> {
        let n = node as i32;
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_node_destroy(0, n)),
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_node_destroy(0, n)),
        }
    }
    fn mc_node_update(&mut self, node: NodeHandle, ports: &[Port], lags: &[u16]) -> RtResult<()> {
        let n = node as i32;
        let pm = list_to_map(ports.iter().copied());
        let lm = list_to_map(lags.iter().map(|l| u32::from(*l)));
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_node_update(0, n, pm, lm)),
            PreService::Plain if !lags.is_empty() => {
                self.unsupported("mc_node_update with LAGs on simple_pre", McError::ERROR)
            }
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_node_update(0, n, pm)),
        }
    }
    fn mc_set_lag_membership(&mut self, lag: u16, ports: &[Port]) -> RtResult<()> {
        let Ok(lag) = i16::try_from(lag) else {
            return self.unsupported("LAG index above 32767", McError::ERROR);
        };
        let pm = list_to_map(ports.iter().copied());
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| {
                c.lag.bm_mc_set_lag_membership(0, lag, pm)
            }),
            PreService::Plain => {
                self.unsupported("mc_set_lag_membership on simple_pre", McError::ERROR)
            }
        }
    }
    fn mc_get_entries(&self) -> RtResult<String> {
        match self.pre {
            PreService::Lag => self.call(McError::ERROR, |c| c.lag.bm_mc_get_entries(0)),
            PreService::Plain => self.call(McError::ERROR, |c| c.pre.bm_mc_get_entries(0)),
        }
    }

    // ---- simple_switch ----
    fn mirroring_session_add(&mut self, id: u32, session: MirroringSession) -> RtResult<()> {
        let id = i32_of(id, MirroringError::SESSION_NOT_FOUND)?;
        if session.port.is_some_and(|p| i32::try_from(p).is_err())
            || session.mgid.is_some_and(|m| i32::try_from(m).is_err())
        {
            return self.unsupported(
                "mirroring port or group above 2^31",
                MirroringError::SESSION_NOT_FOUND,
            );
        }
        self.call(MirroringError::SESSION_NOT_FOUND, |c| {
            c.ss.mirroring_session_add(id, mirroring_to_wire(session))
        })
    }
    fn mirroring_session_delete(&mut self, id: u32) -> RtResult<()> {
        let id = i32_of(id, MirroringError::SESSION_NOT_FOUND)?;
        self.call(MirroringError::SESSION_NOT_FOUND, |c| {
            c.ss.mirroring_session_delete(id)
        })
    }
    fn mirroring_session_get(&self, id: u32) -> RtResult<MirroringSession> {
        let id = i32_of(id, MirroringError::SESSION_NOT_FOUND)?;
        let bad = RuntimeError::from(MirroringError::SESSION_NOT_FOUND);
        self.call(bad, |c| {
            let s = c.ss.mirroring_session_get(id)?;
            need(mirroring_from_wire(&s), bad)
        })
    }
    fn set_egress_queue_depth(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        depth_pkts: u32,
    ) -> RtResult<()> {
        let e = DevMgrError::ERROR;
        let depth = i32_of(depth_pkts, e)?;
        let status = match (port, priority) {
            (None, None) => self.call(e, |c| c.ss.set_all_egress_queue_depths(depth))?,
            (Some(p), None) => {
                let p = i32_of(p, e)?;
                self.call(e, |c| c.ss.set_egress_queue_depth(p, depth))?
            }
            (Some(p), Some(q)) => {
                let (p, q) = (i32_of(p, e)?, i32_of(q, e)?);
                self.call(e, |c| c.ss.set_egress_priority_queue_depth(p, q, depth))?
            }
            (None, Some(_)) => return self.unsupported("one priority queue on every port", e),
        };
        self.queue_status(status, "queue depth")
    }
    fn set_egress_queue_rate(
        &mut self,
        port: Option<Port>,
        priority: Option<u32>,
        rate_pps: u64,
    ) -> RtResult<()> {
        let e = DevMgrError::ERROR;
        let Ok(rate) = i64::try_from(rate_pps) else {
            return Err(e.into());
        };
        let status = match (port, priority) {
            (None, None) => self.call(e, |c| c.ss.set_all_egress_queue_rates(rate))?,
            (Some(p), None) => {
                let p = i32_of(p, e)?;
                self.call(e, |c| c.ss.set_egress_queue_rate(p, rate))?
            }
            (Some(p), Some(q)) => {
                let (p, q) = (i32_of(p, e)?, i32_of(q, e)?);
                self.call(e, |c| c.ss.set_egress_priority_queue_rate(p, q, rate))?
            }
            (None, Some(_)) => return self.unsupported("one priority queue on every port", e),
        };
        self.queue_status(status, "queue rate")
    }
    fn get_time_elapsed_us(&self) -> u64 {
        self.infallible(0, |c| c.ss.get_time_elapsed_us()) as u64
    }
    fn get_time_since_epoch_us(&self) -> u64 {
        self.infallible(0, |c| c.ss.get_time_since_epoch_us()) as u64
    }
}

impl ThriftRuntime {
    fn queue_status(&self, status: i32, what: &str) -> RtResult<()> {
        if status == 0 {
            Ok(())
        } else {
            self.note(format!(
                "setting the egress {what} failed (status {status})"
            ));
            Err(DevMgrError::ERROR.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thrift_runtime_can_move_between_threads_and_be_shared() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<ThriftRuntime>();
    }

    #[test]
    fn connect_to_a_closed_port_is_an_io_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        assert!(ThriftRuntime::connect(addr).is_err());
    }
}
