//! P4Runtime roles and tenant credentials.
//!
//! A [`RoleConfig`] says what a named role owns on a device: P4Info objects by name (tables
//! with their direct counters and meters, action profiles, counters, meters, registers, value
//! sets, digests), whether its primary receives packet-ins and whether it may push a pipeline.
//! The default role (no role or an empty name) owns everything. Each role has its own
//! primary/backup election; a role writes only what it owns, and reads return only what it
//! owns. PRE entries (multicast groups, clone sessions) and extern entries belong to the default
//! role only. Roles are configured by the operator, not taken from the controller's
//! `Role.config` (so a controller cannot grant itself more).
//!
//! [`Access`] maps bearer tokens (gRPC metadata `authorization: Bearer TOKEN`) to the device
//! ids they reach; a device the token does not reach answers exactly like one that does not
//! exist.

#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};

use crate::proto::p4::config::v1 as cfg;
use crate::proto::p4::v1 as p4;

/// What one role owns on a device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleConfig {
    /// P4Info names (or aliases) of the objects the role owns.
    pub entities: Vec<String>,
    /// Whether the role's primary receives packet-ins.
    pub packet_in: bool,
    /// Whether the role may set the forwarding pipeline.
    pub pipeline: bool,
}

/// A device's roles by name (an empty map: roles are echoed but not enforced, as in PI).
pub type Roles = BTreeMap<String, RoleConfig>;

/// Which devices a token reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reach {
    /// Every device (the operator).
    All,
    /// These device ids.
    Devices(BTreeSet<u64>),
}

/// Tenant credentials: token → reach. Empty = no authentication (every device reachable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    pub tokens: BTreeMap<String, Reach>,
}

impl Access {
    /// Whether a request with these metadata may see `device_id` (`Err`: the token is missing
    /// or unknown).
    pub(crate) fn reaches(
        &self,
        md: &tonic::metadata::MetadataMap,
        device_id: u64,
    ) -> Result<bool, tonic::Status> {
        if self.tokens.is_empty() {
            return Ok(true);
        }
        let token = md
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| {
                tonic::Status::unauthenticated(
                    "This server needs a token: metadata 'authorization: Bearer TOKEN'",
                )
            })?;
        match self.tokens.get(token.trim()) {
            Some(Reach::All) => Ok(true),
            Some(Reach::Devices(d)) => Ok(d.contains(&device_id)),
            None => Err(tonic::Status::unauthenticated("Unknown token")),
        }
    }
}

fn names(p: &Option<cfg::Preamble>) -> (u32, &str, &str) {
    p.as_ref()
        .map_or((0, "", ""), |p| (p.id, p.name.as_str(), p.alias.as_str()))
}

/// Whether `role` owns the P4Info object with id `id`.
fn owns_id(info: &cfg::P4Info, role: &RoleConfig, id: u32) -> bool {
    if id == 0 {
        return false;
    }
    let pre = info
        .tables
        .iter()
        .map(|x| &x.preamble)
        .chain(info.action_profiles.iter().map(|x| &x.preamble))
        .chain(info.counters.iter().map(|x| &x.preamble))
        .chain(info.meters.iter().map(|x| &x.preamble))
        .chain(info.registers.iter().map(|x| &x.preamble))
        .chain(info.value_sets.iter().map(|x| &x.preamble))
        .chain(info.digests.iter().map(|x| &x.preamble))
        .map(names)
        .find(|(i, _, _)| *i == id);
    let Some((_, name, alias)) = pre else {
        return false;
    };
    role.entities
        .iter()
        .any(|e| e == name || (!alias.is_empty() && e == alias))
}

/// Whether `role` (`None` = the default role) owns an entity.
pub(crate) fn owns(info: &cfg::P4Info, role: Option<&RoleConfig>, e: &p4::Entity) -> bool {
    use p4::entity::Entity as E;
    let Some(role) = role else { return true };
    let id = match &e.entity {
        Some(E::TableEntry(t)) => t.table_id,
        Some(E::ActionProfileMember(m)) => m.action_profile_id,
        Some(E::ActionProfileGroup(g)) => g.action_profile_id,
        Some(E::MeterEntry(m)) => m.meter_id,
        Some(E::DirectMeterEntry(d)) => d.table_entry.as_ref().map_or(0, |t| t.table_id),
        Some(E::CounterEntry(c)) => c.counter_id,
        Some(E::DirectCounterEntry(d)) => d.table_entry.as_ref().map_or(0, |t| t.table_id),
        Some(E::ValueSetEntry(v)) => v.value_set_id,
        Some(E::RegisterEntry(r)) => r.register_id,
        Some(E::DigestEntry(d)) => d.digest_id,
        Some(E::PacketReplicationEngineEntry(_)) | Some(E::ExternEntry(_)) | None => 0,
    };
    owns_id(info, role, id)
}

/// Whether `role` owns the table named `table` (a JSON/P4Info name).
pub(crate) fn owns_table(info: &cfg::P4Info, role: Option<&RoleConfig>, table: u32) -> bool {
    role.is_none_or(|r| owns_id(info, r, table))
}
