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
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tern_dataplane::{CompiledProgram, Switch, SwitchOptions};
use tern_p4rt::{
    Access, DeviceState, Handle, Injected, Locked, OutputSink, P4rtTarget, Reach, Roles,
};
use tern_runtime::*;

use crate::{Caller, DeviceId, Input, Target, VirtError, VirtSwitch};

fn lock(vs: &Mutex<VirtSwitch>) -> MutexGuard<'_, VirtSwitch> {
    // Device panics are caught inside the switch; a poisoned lock holds a consistent switch.
    vs.lock().unwrap_or_else(|e| e.into_inner())
}

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
        while let Some(w) = self.queue.pop_front() {
            self.run_device(w.device, Input::One(w.vport, &w.data), w.hops, out);
            if let Some(d) = self.devices.get_mut(&w.from) {
                d.switch.recycle_buffer(w.data);
            }
        }
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
        Ok(std::mem::replace(&mut dev.switch, sw))
    }
}

/// One device of a shared [`VirtSwitch`] as a P4Runtime target (acting as the operator: the
/// gRPC server checks the caller's token before it reaches the target).
pub struct VirtTarget {
    vs: Arc<Mutex<VirtSwitch>>,
    id: DeviceId,
}

impl VirtTarget {
    pub fn new(vs: Arc<Mutex<VirtSwitch>>, id: DeviceId) -> VirtTarget {
        VirtTarget { vs, id }
    }
}

/// The locked switch, seen as one device.
struct VirtLocked<'a> {
    vs: MutexGuard<'a, VirtSwitch>,
    id: DeviceId,
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
        match self.vs.devices.get(&self.id) {
            Some(d) => d.switch.program(),
            None => EMPTY.get_or_init(tern_model::Program::default),
        }
    }
    fn aged_entries(&self) -> Vec<(String, EntryHandle)> {
        self.vs
            .devices
            .get(&self.id)
            .map(|d| d.switch.aged_entries())
            .unwrap_or_default()
    }
}

macro_rules! locked_method {
    ([ref] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&self, $($arg: $ty),*) $(-> $ret)? {
            match self.vs.devices.get(&self.id) {
                Some(d) => d.switch.$name($($arg),*),
                None => $missing,
            }
        }
    };
    ([mut] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            match self.vs.devices.get_mut(&self.id) {
                Some(d) => d.switch.$name($($arg),*),
                None => $missing,
            }
        }
    };
    ([quota] $name:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $missing:expr) => {
        fn $name(&mut self, $($arg: $ty),*) $(-> $ret)? {
            match self.vs.devices.get_mut(&self.id) {
                Some(d) => {
                    d.check_entry_quota()?;
                    d.switch.$name($($arg),*)
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
            vs: lock(&self.vs),
            id: self.id,
        }))
    }

    /// Compile outside the switch lock (other devices keep forwarding), sharing an already
    /// compiled program of the same JSON; the device's quotas apply.
    fn build(&self, json: &str, _opts: &SwitchOptions) -> Result<Switch, String> {
        let id = self.id;
        let (quotas, cached) = {
            let vs = lock(&self.vs);
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
        let mut vs = lock(&self.vs);
        vs.programs.retain(|p| p.holders() > 1);
        if !vs.programs.iter().any(|p| p.json() == json) {
            vs.programs.push(cp);
        }
        Ok(sw)
    }

    fn install(&self, sw: Switch) -> Result<Switch, String> {
        lock(&self.vs)
            .install_switch(self.id, sw)
            .map_err(|e| e.to_string())
    }

    fn present(&self) -> bool {
        lock(&self.vs).devices.contains_key(&self.id)
    }

    fn cpu_port(&self) -> Option<u32> {
        lock(&self.vs)
            .cpu_port(Caller::Operator, self.id)
            .ok()
            .flatten()
    }

    fn inject(&self, port: u32, data: &[u8], _cpu_port: Option<u32>) -> Injected {
        let mut vs = lock(&self.vs);
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

/// One gRPC server's worth of P4Runtime handles over a shared [`VirtSwitch`].
pub struct VirtP4rt {
    vs: Arc<Mutex<VirtSwitch>>,
    handles: Vec<(DeviceId, Handle)>,
}

impl VirtP4rt {
    /// A handle per device of `devices` (id and roles), each starting with the device's
    /// program and a P4Info derived from it (p4c's id scheme), so controllers can connect
    /// without pushing a pipeline.
    pub fn new(
        vs: Arc<Mutex<VirtSwitch>>,
        devices: &[(DeviceId, Roles)],
    ) -> Result<VirtP4rt, VirtError> {
        let mut handles = Vec::new();
        for (id, roles) in devices {
            let (json, info) = {
                let mut g = lock(&vs);
                let rt = g.runtime(Caller::Operator, *id)?;
                (
                    rt.get_config(),
                    tern_p4rt::p4info::derive_p4info(rt.program()),
                )
            };
            let h = Handle::with_target(
                Arc::new(VirtTarget::new(Arc::clone(&vs), *id)),
                tern_p4rt::Options {
                    device_id: u64::from(*id),
                    cpu_port: None,
                    initial: Some((info.clone(), json)),
                    switch_options: SwitchOptions::default(),
                },
            )
            .map_err(|message| VirtError::Program {
                device: *id,
                message,
            })?;
            check_roles(*id, roles, &info)?;
            h.set_roles(roles.clone());
            handles.push((*id, h));
        }
        Ok(VirtP4rt { vs, handles })
    }

    /// The handles, for [`tern_p4rt::serve_devices`].
    pub fn handles(&self) -> Vec<Handle> {
        self.handles.iter().map(|(_, h)| h.clone()).collect()
    }

    /// Where packet-out traffic to physical ports goes (the owner of the ports sends it).
    pub fn set_output_sink(&self, sink: OutputSink) {
        for (_, h) in &self.handles {
            h.set_output_sink(sink.clone());
        }
    }

    /// Move every served device's CPU-port frames (→ packet-in) and digests (→ digest lists)
    /// to its controllers. Call it after packets ran through the switch (the server also calls
    /// it every 10 ms through [`VirtP4rt::tick`]).
    pub fn deliver(&self) {
        let mut batch = Vec::new();
        {
            let mut vs = lock(&self.vs);
            for (id, _) in &self.handles {
                let cpu = vs
                    .take_cpu_packets(Caller::Operator, *id)
                    .unwrap_or_default();
                let dg = vs.take_digests(Caller::Operator, *id).unwrap_or_default();
                if !cpu.is_empty() || !dg.is_empty() {
                    batch.push((*id, cpu, dg));
                }
            }
        }
        // Delivered outside the switch lock (handles lock their own state, then the switch).
        for (id, cpu, dg) in batch {
            if let Some((_, h)) = self.handles.iter().find(|(d, _)| *d == id) {
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
    let mut access = Access::default();
    for (tenant, token) in tokens {
        let ids: BTreeSet<u64> = vs
            .devices
            .values()
            .filter(|d| d.owner.as_deref() == Some(tenant.as_str()))
            .map(|d| u64::from(d.id))
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
