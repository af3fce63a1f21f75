//! P4Runtime for the devices of a [`VirtSwitch`]: each device is a `tern_p4rt` target
//! ([`VirtTarget`]) under its own P4Runtime device id (its [`DeviceId`]), with its own
//! arbitration, roles, pipeline, packet I/O and digests; [`VirtP4rt`] builds the handles of one
//! gRPC server for all of them and moves each device's CPU-port frames and digests to its
//! handle; [`tenant_access`] turns tenant tokens into the devices they reach.
//!
//! * Packet-out enters the device on its CPU port (the lowest virtual port mapped to `cpu`)
//!   and runs through the whole switch (links, port maps); frames for physical ports go to
//!   the output sink. Frames the device sends to a `cpu` virtual port become its packet-ins.
//! * SetForwardingPipelineConfig replaces only that device's program, live, between packets:
//!   the program is compiled outside the switch lock, then swapped in under it (the device's
//!   port map, rules, links, owner, quotas and counters stay). VERIFY_AND_COMMIT starts with
//!   fresh state; RECONCILE_AND_COMMIT carries the state over in P4Runtime terms.
//! * Entry adds count against the device's entry quota (`TABLE_FULL` past it), as over Thrift.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, OnceLock};

use tern_dataplane::{CompiledProgram, Switch, SwitchOptions};
use tern_p4rt::{
    Access, DeviceSet, DeviceState, Handle, Injected, Locked, OutputSink, P4rtTarget, Reach, Roles,
};
use tern_runtime::*;

use crate::{Caller, DeviceId, Input, Shared, SwitchGuard, Target, VirtError, VirtSwitch};

fn gone() -> RuntimeError {
    TableError::ERROR.into()
}

impl VirtSwitch {
    /// Run one packet into device `id` as if it arrived on its virtual port `vport` (no
    /// classifier), then through links and port maps like any other packet; frames for
    /// physical ports are appended to `out`.
    pub fn inject(
        &mut self,
        caller: Caller,
        id: DeviceId,
        vport: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
    ) -> Result<(), VirtError> {
        self.reachable(caller, id)?;
        self.run_device(id, Input::One(vport, data), 0, out);
        self.drain_links(out);
        Ok(())
    }

    /// The device's CPU port: its lowest virtual port mapped to `cpu`.
    pub fn cpu_port(&self, caller: Caller, id: DeviceId) -> Result<Option<Port>, VirtError> {
        self.reachable(caller, id)?;
        Ok(self
            .topo
            .port_maps
            .get(&id)
            .and_then(|m| m.iter().find(|(_, t)| **t == Target::Cpu).map(|(p, _)| *p)))
    }

    /// Install `sw` (built by [`VirtTarget`]) as device `id`'s switch with fresh state, keeping
    /// its port map, rules, links, owner, quotas and counters; returns the old switch.
    fn install_switch(&mut self, id: DeviceId, sw: Switch) -> Result<Switch, VirtError> {
        let tables = crate::table_names(&sw);
        let dev = self
            .devices
            .get_mut(&id)
            .ok_or(VirtError::NoSuchDevice(id))?;
        dev.tables = tables;
        dev.quarantine = None;
        dev.fault_in = None;
        dev.refresh_lane();
        Ok(std::mem::replace(&mut dev.switch, sw))
    }
}

/// One device of a shared [`VirtSwitch`] (one thread or the workers, [`Shared`]) as a
/// P4Runtime target (acting as the operator: the gRPC server checks the caller's token before
/// it reaches the target).
pub struct VirtTarget {
    vs: Shared,
    id: DeviceId,
}

impl VirtTarget {
    pub fn new(vs: impl Into<Shared>, id: DeviceId) -> VirtTarget {
        VirtTarget { vs: vs.into(), id }
    }
}

/// The locked switch, seen as one device (`None`: the device is on no worker).
struct VirtLocked<'a> {
    vs: Option<SwitchGuard<'a>>,
    id: DeviceId,
}

impl VirtLocked<'_> {
    fn dev(&self) -> Option<&crate::Device> {
        self.vs.as_ref().and_then(|vs| vs.devices.get(&self.id))
    }

    fn dev_mut(&mut self) -> Option<&mut crate::Device> {
        let id = self.id;
        self.vs.as_mut().and_then(|vs| vs.devices.get_mut(&id))
    }
}

struct VirtGuard<'a>(VirtLocked<'a>);

impl<'a> Deref for VirtGuard<'a> {
    type Target = dyn DeviceState + 'a;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for VirtGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl DeviceState for VirtLocked<'_> {
    fn program(&self) -> &tern_model::Program {
        static EMPTY: OnceLock<tern_model::Program> = OnceLock::new();
        match self.dev() {
            Some(d) => d.switch.program(),
            None => EMPTY.get_or_init(tern_model::Program::default),
        }
    }
    fn aged_entries(&self) -> Vec<(String, EntryHandle)> {
        self.dev()
            .map(|d| d.switch.aged_entries())
            .unwrap_or_default()
    }
}

macro_rules! locked_method {
    ([ref] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            match self.dev() {
                Some(d) => d.switch.$name($($arg),*),
                None => $missing,
            }
        }
    };
    // Writes count their entries touched (`DeviceStats::control_work`), as
    // `DeviceRuntime`'s do: what the fair scheduler charges the lease's job for.
    ([mut] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            match self.dev_mut() {
                Some(d) => {
                    d.stats.control_work += 1;
                    let r = d.switch.$name($($arg),*);
                    d.stats.control_refused += u64::from(crate::runtime::Refused::refused(&r));
                    r
                }
                None => $missing,
            }
        }
    };
    ([quota] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            match self.dev_mut() {
                Some(d) => {
                    d.stats.control_work += 1;
                    let r = match d.check_entry_quota() {
                        Ok(()) => d.switch.$name($($arg),*),
                        Err(e) => Err(e.into()),
                    };
                    d.stats.control_refused += u64::from(crate::runtime::Refused::refused(&r));
                    r
                }
                None => $missing,
            }
        }
    };
    ([clear] $name:ident ($t:ident: $tt:ty $(, $arg:ident: $ty:ty)*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&mut self, $t: $tt $(, $arg: $ty)*) $(-> $ret)? {
            match self.dev_mut() {
                Some(d) => {
                    let n = d.switch.mt_get_num_entries($t).unwrap_or(0);
                    d.stats.control_work += n.max(1);
                    let r = d.switch.$name($t $(, $arg)*);
                    if crate::runtime::Refused::refused(&r) {
                        d.stats.control_refused += n.max(1);
                    }
                    r
                }
                None => $missing,
            }
        }
    };
}

/// Every `Runtime` method goes to the device's switch (entry adds check the quota first); a
/// device removed meanwhile answers like a missing one.
macro_rules! locked_runtime {
    ($([$kind:ident] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr;)*) => {
        impl Runtime for VirtLocked<'_> {
            $(locked_method!([$kind] $name ($($arg: $ty),*) $(-> $ret)? => $missing);)*
        }
    };
}

crate::forward::for_each_runtime_method!(locked_runtime);

impl P4rtTarget for VirtTarget {
    fn lock(&self) -> Locked<'_> {
        Locked::new(VirtGuard(VirtLocked {
            vs: self.vs.lock(self.id).ok(),
            id: self.id,
        }))
    }

    /// Compile outside the switch lock (other devices keep forwarding), sharing an already
    /// compiled program of the same JSON; the device's quotas apply.
    fn build(&self, json: &str, _opts: &SwitchOptions) -> Result<Switch, String> {
        let id = self.id;
        let (quotas, cached) = {
            let vs = self.vs.lock(id).map_err(|e| e.to_string())?;
            let d = vs
                .devices
                .get(&id)
                .ok_or_else(|| VirtError::NoSuchDevice(id).to_string())?;
            let cp = vs.programs.iter().find(|p| p.json() == json).cloned();
            (d.quotas, cp)
        };
        let opts = SwitchOptions {
            device_id: id as u64,
            max_instances_per_packet: quotas.max_passes.max(1),
            max_parser_states: quotas.max_parser_states.clamp(1, crate::MAX_PARSER_STATES),
            ..SwitchOptions::default()
        };
        let cp = match cached {
            Some(cp) => cp,
            None => CompiledProgram::compile(json, &opts).map_err(|e| e.to_string())?,
        };
        if let Some(max) = quotas.max_register_bytes {
            let n = crate::register_bytes(cp.program());
            if n > max {
                return Err(format!(
                    "the program's registers take {n} bytes, over the quota of {max}"
                ));
            }
        }
        let sw = Switch::from_program(&cp, opts).map_err(|e| e.to_string())?;
        if let Some(max) = quotas.max_entries {
            let n: u64 = crate::table_names(&sw)
                .iter()
                .map(|t| sw.mt_get_num_entries(t).unwrap_or(0))
                .sum();
            if n > max {
                return Err(format!(
                    "the program's {n} const entries exceed the quota of {max}"
                ));
            }
        }
        if let Ok(mut vs) = self.vs.lock(id) {
            vs.adopt_program(&cp);
        }
        Ok(sw)
    }

    fn install(&self, sw: Switch) -> Result<Switch, String> {
        self.vs
            .lock(self.id)
            .and_then(|mut vs| vs.install_switch(self.id, sw))
            .map_err(|e| e.to_string())
    }

    fn present(&self) -> bool {
        self.vs.has_device(self.id)
    }

    fn cpu_port(&self) -> Option<u32> {
        self.vs
            .lock(self.id)
            .ok()
            .and_then(|vs| vs.cpu_port(Caller::Operator, self.id).ok().flatten())
    }

    fn inject(&self, port: u32, data: &[u8], _cpu_port: Option<u32>) -> Injected {
        let Ok(mut vs) = self.vs.lock(self.id) else {
            return Injected::default();
        };
        let mut outputs = Vec::new();
        if vs
            .inject(Caller::Operator, self.id, port, data, &mut outputs)
            .is_err()
        {
            return Injected::default();
        }
        let packet_ins = vs
            .take_cpu_packets(Caller::Operator, self.id)
            .map(|v| v.into_iter().map(|(_, f)| f).collect())
            .unwrap_or_default();
        let digests = vs
            .take_digests(Caller::Operator, self.id)
            .unwrap_or_default();
        Injected {
            packet_ins,
            outputs,
            digests,
        }
    }
}

/// One gRPC server's worth of P4Runtime handles over a shared [`VirtSwitch`] (one thread or
/// the workers): the served set changes with the switch ([`VirtP4rt::add_device`],
/// [`VirtP4rt::remove_device`]) and the tenants' tokens follow the devices' owners
/// ([`VirtP4rt::refresh_access`]).
pub struct VirtP4rt {
    vs: Shared,
    set: DeviceSet,
    /// The served devices' handles (for [`VirtP4rt::deliver`]) and roles.
    handles: Mutex<BTreeMap<DeviceId, (Handle, Roles)>>,
    sink: Mutex<Option<OutputSink>>,
    /// Tenant → token, and the operator's token.
    tokens: Mutex<(BTreeMap<String, String>, Option<String>)>,
}

impl VirtP4rt {
    /// A handle per device of `devices` (id and roles), each starting with the device's
    /// program and a P4Info derived from it (p4c's id scheme), so controllers can connect
    /// without pushing a pipeline. No tokens until [`VirtP4rt::set_tokens`].
    pub fn new(
        vs: impl Into<Shared>,
        devices: &[(DeviceId, Roles)],
    ) -> Result<VirtP4rt, VirtError> {
        let vs = vs.into();
        let mut handles = BTreeMap::new();
        for (id, roles) in devices {
            handles.insert(*id, (make_handle(&vs, *id, roles)?, roles.clone()));
        }
        let set = DeviceSet::new(
            handles.values().map(|(h, _)| h.clone()).collect(),
            Access::default(),
        )
        .map_err(VirtError::Topology)?;
        Ok(VirtP4rt {
            vs,
            set,
            handles: Mutex::new(handles),
            sink: Mutex::new(None),
            tokens: Mutex::default(),
        })
    }

    /// The served set, for [`tern_p4rt::serve_set`].
    pub fn set(&self) -> DeviceSet {
        self.set.clone()
    }

    /// The handles (a snapshot of the served devices).
    pub fn handles(&self) -> Vec<Handle> {
        guard(&self.handles)
            .values()
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// The served device ids, ascending.
    pub fn device_ids(&self) -> Vec<DeviceId> {
        guard(&self.handles).keys().copied().collect()
    }

    /// Tenant credentials (see [`tenant_access`]): from now on, and after every change of
    /// the devices, each tenant's token reaches the devices it owns then.
    pub fn set_tokens(
        &self,
        tokens: BTreeMap<String, String>,
        operator_token: Option<String>,
    ) -> Result<(), String> {
        *guard(&self.tokens) = (tokens, operator_token);
        self.refresh_access()
    }

    /// Recompute who reaches what from the devices' owners now.
    pub fn refresh_access(&self) -> Result<(), String> {
        let (tokens, op) = guard(&self.tokens).clone();
        let owners: Vec<(DeviceId, Option<String>)> = self
            .vs
            .device_ids()
            .into_iter()
            .filter_map(|id| {
                let vs = self.vs.lock(id).ok()?;
                let d = vs.devices.get(&id)?;
                Some((id, d.owner.clone()))
            })
            .collect();
        let access = access_of(&owners, &tokens, op.as_deref())?;
        self.set.set_access(access);
        Ok(())
    }

    /// Serve device `id` (added to the switch after start-up) under its id from now on, with
    /// `roles`; its tenant's token reaches it at once.
    pub fn add_device(&self, id: DeviceId, roles: &Roles) -> Result<(), VirtError> {
        let h = make_handle(&self.vs, id, roles)?;
        if let Some(sink) = guard(&self.sink).clone() {
            h.set_output_sink(sink);
        }
        self.set.insert(h.clone());
        guard(&self.handles).insert(id, (h, roles.clone()));
        self.refresh_access().map_err(VirtError::Topology)
    }

    /// Serve device `id` afresh after the operator replaced its program: a new handle with
    /// the new program's P4Info and the same roles (controllers connect again).
    pub fn refresh_device(&self, id: DeviceId) -> Result<(), VirtError> {
        let roles = guard(&self.handles)
            .get(&id)
            .map(|(_, r)| r.clone())
            .unwrap_or_default();
        self.add_device(id, &roles)
    }

    /// Stop serving device `id` (removed from the switch): it answers `NOT_FOUND`.
    pub fn remove_device(&self, id: DeviceId) {
        self.set.remove(u64::from(id));
        guard(&self.handles).remove(&id);
        let _ = self.refresh_access();
    }

    /// Where packet-out traffic to physical ports goes (the owner of the ports sends it).
    pub fn set_output_sink(&self, sink: OutputSink) {
        for (h, _) in guard(&self.handles).values() {
            h.set_output_sink(sink.clone());
        }
        *guard(&self.sink) = Some(sink);
    }

    /// Move every served device's CPU-port frames (→ packet-in) and digests (→ digest lists)
    /// to its controllers. Call it after packets ran through the switch (the server also calls
    /// it every 10 ms through [`VirtP4rt::tick`]).
    pub fn deliver(&self) {
        let handles: Vec<(DeviceId, Handle)> = guard(&self.handles)
            .iter()
            .map(|(id, (h, _))| (*id, h.clone()))
            .collect();
        let mut batch = Vec::new();
        match &self.vs {
            Shared::Locked(_) => {
                // One lock for all (they are all in the one switch).
                if let Some((first, _)) = handles.first() {
                    if let Ok(mut vs) = self.vs.lock(*first) {
                        for (id, _) in &handles {
                            take_io(&mut vs, *id, &mut batch);
                        }
                    }
                }
            }
            Shared::Workers(_) => {
                for (id, _) in &handles {
                    if let Ok(mut vs) = self.vs.lock(*id) {
                        take_io(&mut vs, *id, &mut batch);
                    }
                }
            }
        }
        // Delivered outside the switch lock (handles lock their own state, then the switch).
        for (id, cpu, dg) in batch {
            if let Some((_, h)) = handles.iter().find(|(d, _)| *d == id) {
                h.deliver_packet_ins(cpu.into_iter().map(|(_, f)| f).collect());
                h.deliver_digests(dg);
            }
        }
    }

    /// [`VirtP4rt::deliver`] as the server's 10 ms tick.
    pub fn tick(self: &Arc<Self>) -> tern_p4rt::Tick {
        let me = Arc::clone(self);
        Arc::new(move || me.deliver())
    }
}

type DeviceIo = (DeviceId, Vec<(Port, Vec<u8>)>, Vec<Digest>);

fn take_io(vs: &mut VirtSwitch, id: DeviceId, batch: &mut Vec<DeviceIo>) {
    let cpu = vs
        .take_cpu_packets(Caller::Operator, id)
        .unwrap_or_default();
    let dg = vs.take_digests(Caller::Operator, id).unwrap_or_default();
    if !cpu.is_empty() || !dg.is_empty() {
        batch.push((id, cpu, dg));
    }
}

fn guard<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A device's P4Runtime handle: its program and derived P4Info, its roles checked.
fn make_handle(vs: &Shared, id: DeviceId, roles: &Roles) -> Result<Handle, VirtError> {
    let (json, info) = {
        let mut g = vs.lock(id)?;
        let rt = g.runtime(Caller::Operator, id)?;
        (
            rt.get_config(),
            tern_p4rt::p4info::derive_p4info(rt.program()),
        )
    };
    let h = Handle::with_target(
        Arc::new(VirtTarget::new(vs.clone(), id)),
        tern_p4rt::Options {
            device_id: u64::from(id),
            cpu_port: None,
            initial: Some((info.clone(), json)),
            switch_options: SwitchOptions::default(),
        },
    )
    .map_err(|message| VirtError::Program {
        device: id,
        message,
    })?;
    check_roles(id, roles, &info)?;
    h.set_roles(roles.clone());
    Ok(h)
}

/// Every entity a role names must be an object of the device's P4Info (a typo would
/// otherwise silently own nothing).
fn check_roles(
    id: DeviceId,
    roles: &Roles,
    info: &tern_p4rt::proto::p4::config::v1::P4Info,
) -> Result<(), VirtError> {
    let known: BTreeSet<&str> = info
        .tables
        .iter()
        .map(|x| &x.preamble)
        .chain(info.action_profiles.iter().map(|x| &x.preamble))
        .chain(info.counters.iter().map(|x| &x.preamble))
        .chain(info.meters.iter().map(|x| &x.preamble))
        .chain(info.registers.iter().map(|x| &x.preamble))
        .chain(info.value_sets.iter().map(|x| &x.preamble))
        .chain(info.digests.iter().map(|x| &x.preamble))
        .flatten()
        .flat_map(|p| [p.name.as_str(), p.alias.as_str()])
        .collect();
    for (name, r) in roles {
        if let Some(e) = r.entities.iter().find(|e| !known.contains(e.as_str())) {
            return Err(VirtError::Program {
                device: id,
                message: format!(
                    "role '{name}': the program has no table, action profile, counter, meter, \
                     register, value set or digest named '{e}'"
                ),
            });
        }
    }
    Ok(())
}

/// Tenant credentials: each tenant's token reaches the devices it owns (now), the operator's
/// token reaches every device. No tokens at all: no authentication.
pub fn tenant_access(
    vs: &VirtSwitch,
    tokens: &BTreeMap<String, String>,
    operator_token: Option<&str>,
) -> Result<Access, String> {
    let owners: Vec<(DeviceId, Option<String>)> = vs
        .devices
        .values()
        .map(|d| (d.id, d.owner.clone()))
        .collect();
    access_of(&owners, tokens, operator_token)
}

fn access_of(
    owners: &[(DeviceId, Option<String>)],
    tokens: &BTreeMap<String, String>,
    operator_token: Option<&str>,
) -> Result<Access, String> {
    let mut access = Access::default();
    for (tenant, token) in tokens {
        let ids: BTreeSet<u64> = owners
            .iter()
            .filter(|(_, o)| o.as_deref() == Some(tenant.as_str()))
            .map(|(id, _)| u64::from(*id))
            .collect();
        if access
            .tokens
            .insert(token.clone(), Reach::Devices(ids))
            .is_some()
        {
            return Err(format!("tenant '{tenant}': its token is used twice"));
        }
    }
    if let Some(t) = operator_token {
        if access.tokens.insert(t.to_string(), Reach::All).is_some() {
            return Err("the operator token is also a tenant's".into());
        }
    }
    Ok(access)
}
