//! The operator's view of a running virtual switch, the same whether its devices run on the
//! caller's thread ([`VirtSwitch`]) or on worker threads ([`VirtWorkers`]): [`Operate`] is what
//! `tern virt run --admin` (and its configuration reload) drives, so one command interpreter
//! serves both.

use std::time::Duration;

use crate::{
    validate_topology, Caller, CarryReport, DeviceId, DeviceSpec, DeviceStats, Quotas, Topology,
    VirtError, VirtStats, VirtSwitch, VirtWorkers,
};

/// Operator control of every device, rule, link and snapshot (see the module documentation).
pub trait Operate {
    /// The device ids, ascending.
    fn device_ids(&self) -> Vec<DeviceId>;
    /// Load a new device (it receives packets once rules or links point at it).
    fn add_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<(), VirtError>;
    /// Remove a device with its rules and port map (links into it drop).
    fn remove_device(&mut self, id: DeviceId) -> Result<DeviceStats, VirtError>;
    /// Replace a device's program, carrying entries where the tables match.
    fn replace_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<CarryReport, VirtError>;
    /// Change a device's owner (`None`: keep it) and quotas.
    fn configure(
        &mut self,
        id: DeviceId,
        owner: Option<String>,
        quotas: Quotas,
    ) -> Result<(), VirtError>;
    /// A device's owner and quotas.
    fn device_config(&self, id: DeviceId) -> Result<(Option<String>, Quotas), VirtError>;
    /// The BMv2 JSON a device runs now.
    fn program_json(&self, id: DeviceId) -> Result<String, VirtError>;
    /// A device's counters.
    fn device_stats(&self, id: DeviceId) -> Result<DeviceStats, VirtError>;
    /// Why a device is quarantined, if it is.
    fn quarantine(&self, id: DeviceId) -> Result<Option<String>, VirtError>;
    /// Put a quarantined device back in service.
    fn release(&mut self, id: DeviceId) -> Result<(), VirtError>;
    /// Whole-switch counters.
    fn stats(&self) -> VirtStats;
    /// The live topology.
    fn topology(&self) -> Topology;
    /// Whether `t` names only devices that exist (and is otherwise valid).
    fn validate(&self, t: &Topology) -> Result<(), VirtError> {
        let ids = self.device_ids();
        validate_topology(t, |d| ids.contains(&d))
    }
    /// Replace the whole topology (validated first; on error nothing changes).
    fn set_topology(&mut self, t: Topology) -> Result<(), VirtError>;
    /// Remove the rules numbered `remove` and append `add`, in one change of the topology
    /// ([`crate::with_rules`]; on error nothing changes).
    fn update_rules(&mut self, remove: &[usize], add: &[crate::Rule]) -> Result<(), VirtError> {
        let t = crate::with_rules(&self.topology(), remove, add)?;
        self.set_topology(t)
    }
    /// Make snapshot `name` the live topology.
    fn activate_snapshot(&mut self, name: &str) -> Result<(), VirtError>;
    /// Store `t` as snapshot `name` (not activated).
    fn store_snapshot(&mut self, name: &str, t: Topology);
    /// Forget every stored snapshot.
    fn clear_snapshots(&mut self);
    /// The stored snapshots' names, sorted.
    fn snapshot_names(&self) -> Vec<String>;
    /// Set the hop budget.
    fn set_max_hops(&mut self, hops: u32);
    /// How long the last operation kept a worker from its other devices (workers only).
    fn last_pause(&self) -> Option<Duration> {
        None
    }
}

impl Operate for VirtSwitch {
    fn device_ids(&self) -> Vec<DeviceId> {
        VirtSwitch::device_ids(self)
    }
    fn add_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<(), VirtError> {
        VirtSwitch::add_device(self, id, spec)
    }
    fn remove_device(&mut self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        VirtSwitch::remove_device(self, id)
    }
    fn replace_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<CarryReport, VirtError> {
        VirtSwitch::replace_device(self, id, spec)
    }
    fn configure(
        &mut self,
        id: DeviceId,
        owner: Option<String>,
        quotas: Quotas,
    ) -> Result<(), VirtError> {
        VirtSwitch::configure(self, id, owner, quotas)
    }
    fn device_config(&self, id: DeviceId) -> Result<(Option<String>, Quotas), VirtError> {
        VirtSwitch::device_config(self, id)
    }
    fn program_json(&self, id: DeviceId) -> Result<String, VirtError> {
        let d = self.reachable(Caller::Operator, id)?;
        Ok(tern_runtime::Runtime::get_config(&d.switch))
    }
    fn device_stats(&self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        VirtSwitch::device_stats(self, Caller::Operator, id)
    }
    fn quarantine(&self, id: DeviceId) -> Result<Option<String>, VirtError> {
        VirtSwitch::quarantine(self, Caller::Operator, id)
    }
    fn release(&mut self, id: DeviceId) -> Result<(), VirtError> {
        VirtSwitch::release(self, id)
    }
    fn stats(&self) -> VirtStats {
        VirtSwitch::stats(self)
    }
    fn topology(&self) -> Topology {
        VirtSwitch::topology(self).clone()
    }
    fn set_topology(&mut self, t: Topology) -> Result<(), VirtError> {
        VirtSwitch::set_topology(self, t)
    }
    fn activate_snapshot(&mut self, name: &str) -> Result<(), VirtError> {
        VirtSwitch::activate_snapshot(self, name)
    }
    fn store_snapshot(&mut self, name: &str, t: Topology) {
        VirtSwitch::store_snapshot(self, name, t)
    }
    fn clear_snapshots(&mut self) {
        self.snapshots.clear();
    }
    fn snapshot_names(&self) -> Vec<String> {
        VirtSwitch::snapshot_names(self)
    }
    fn set_max_hops(&mut self, hops: u32) {
        VirtSwitch::set_max_hops(self, hops)
    }
}

impl Operate for VirtWorkers {
    fn device_ids(&self) -> Vec<DeviceId> {
        VirtWorkers::device_ids(self)
    }
    fn add_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<(), VirtError> {
        VirtWorkers::add_device(self, id, spec)
    }
    fn remove_device(&mut self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        VirtWorkers::remove_device(self, id)
    }
    fn replace_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<CarryReport, VirtError> {
        VirtWorkers::replace_device(self, id, spec)
    }
    fn configure(
        &mut self,
        id: DeviceId,
        owner: Option<String>,
        quotas: Quotas,
    ) -> Result<(), VirtError> {
        self.call(id, move |vs| vs.configure(id, owner, quotas))?
    }
    fn device_config(&self, id: DeviceId) -> Result<(Option<String>, Quotas), VirtError> {
        self.call(id, move |vs| vs.device_config(id))?
    }
    fn program_json(&self, id: DeviceId) -> Result<String, VirtError> {
        self.call(id, move |vs| Operate::program_json(vs, id))?
    }
    fn device_stats(&self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        VirtWorkers::device_stats(self, id)
    }
    fn quarantine(&self, id: DeviceId) -> Result<Option<String>, VirtError> {
        self.call(id, move |vs| vs.quarantine(Caller::Operator, id))?
    }
    fn release(&mut self, id: DeviceId) -> Result<(), VirtError> {
        self.call(id, move |vs| vs.release(id))?
    }
    fn stats(&self) -> VirtStats {
        VirtWorkers::stats(self)
    }
    fn topology(&self) -> Topology {
        VirtWorkers::topology(self).clone()
    }
    fn set_topology(&mut self, t: Topology) -> Result<(), VirtError> {
        VirtWorkers::set_topology(self, t)
    }
    fn activate_snapshot(&mut self, name: &str) -> Result<(), VirtError> {
        VirtWorkers::activate_snapshot(self, name)
    }
    fn store_snapshot(&mut self, name: &str, t: Topology) {
        VirtWorkers::store_snapshot(self, name, t)
    }
    fn clear_snapshots(&mut self) {
        self.clear_snapshots();
    }
    fn snapshot_names(&self) -> Vec<String> {
        VirtWorkers::snapshot_names(self)
    }
    fn set_max_hops(&mut self, hops: u32) {
        VirtWorkers::set_max_hops(self, hops)
    }
    fn last_pause(&self) -> Option<Duration> {
        Some(VirtWorkers::last_pause(self))
    }
}
