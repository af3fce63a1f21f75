//! Native data-plane virtualization: many tenant devices in one process.
//!
//! A [`VirtSwitch`] hosts devices. A device is one tenant's [`Switch`] (its own program and all
//! of its v1model state) plus a map from its *virtual* ports to targets: a physical port, a
//! link into another device's virtual port, the CPU, or drop. A priority-ordered classifier
//! maps each packet arriving on a physical port to (device, virtual ingress port), by physical
//! port, VLAN id and/or one Ethernet/IPv4 header field. Packets run to completion across
//! links under a hop budget, so a loop between devices is cut and counted, never hangs. Links
//! carry batches: the frames one device pass sends over links run in the next device as one
//! batch, hop by hop; order is kept per flow (input port → output port along one path), not
//! as one global interleaving of every output (see the crate README, "Order").
//!
//! The classifier rules and port maps together form a [`Topology`]; named snapshots of it can
//! be stored and activated between packets. Devices can be added, removed and replaced between
//! packets without touching other devices' state; a replace carries table entries over where
//! the old and new tables have the same name, key and action signatures.
//!
//! Each device has quotas (table entries, passes per packet) and is isolated: a panic inside
//! its processing is caught and quarantines the device (its packets are then dropped and
//! counted) while the others go on. A device's control API is a [`Runtime`]
//! ([`VirtSwitch::runtime`]); a device the caller may not reach answers exactly like one that
//! does not exist.
//!
//! A `VirtSwitch` runs on the caller's thread, driven like a `Switch`; [`VirtWorkers`] spreads
//! its devices over worker threads (each device on one worker at a time, deficit round robin
//! between the devices of a worker, devices moved between workers to balance the load).

mod backend;
pub mod config;
mod fair;
mod forward;
mod operate;
mod p4rt;
mod runtime;
pub mod sched;
mod shared;
mod workers;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};

use tern_dataplane::{BurstOut, CompiledProgram, Switch, SwitchOptions};
use tern_runtime::{Digest, OutputPacket, PacketPath, Port, Runtime, RuntimeError, TableError};

pub use backend::{Lease, Shared, SwitchGuard, WorkerControl};
pub use fair::{
    ControlPrice, Cost, DeviceJob, FairScheduler, FairStats, Price, Stage, StageTrace, StepJob,
    GUARD, GUARD_SHARE, MAX_CHUNK,
};
pub use operate::Operate;
pub use p4rt::{tenant_access, VirtP4rt, VirtTarget};
pub use runtime::DeviceRuntime;
pub use sched::ThreadSlice;
pub use shared::SharedDevice;
pub use workers::{VirtWorkers, WorkerOptions, DEFAULT_MAX_QUEUED_CONTROL, DEFAULT_QUANTUM_NS};

/// A device's id (also its `switch_info` device id).
pub type DeviceId = u32;

/// A cheap hasher for device ids (the packet path looks devices up by id; SipHash cost more
/// than the rest of the classifier).
#[derive(Default, Clone, Copy)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (self.0 ^ u64::from(n)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}

type IdMap<V> = HashMap<DeviceId, V, BuildHasherDefault<IdHasher>>;

/// Device ids below this are looked up by index, the others by hash.
const DENSE_IDS: DeviceId = 4096;

/// The devices by id: a slot vector for ids below [`DENSE_IDS`] (the packet path's look-ups
/// are one bounds check and a load, no hashing), a hash map for the rest.
#[derive(Default)]
struct DeviceTable {
    slots: Vec<Option<Device>>,
    big: IdMap<Device>,
}

impl DeviceTable {
    #[inline]
    fn get(&self, id: &DeviceId) -> Option<&Device> {
        if *id < DENSE_IDS {
            self.slots.get(*id as usize)?.as_ref()
        } else {
            self.big.get(id)
        }
    }

    #[inline]
    fn get_mut(&mut self, id: &DeviceId) -> Option<&mut Device> {
        if *id < DENSE_IDS {
            self.slots.get_mut(*id as usize)?.as_mut()
        } else {
            self.big.get_mut(id)
        }
    }

    fn contains_key(&self, id: &DeviceId) -> bool {
        self.get(id).is_some()
    }

    fn insert(&mut self, id: DeviceId, d: Device) -> Option<Device> {
        if id < DENSE_IDS {
            let i = id as usize;
            if self.slots.len() <= i {
                self.slots.resize_with(i + 1, || None);
            }
            self.slots[i].replace(d)
        } else {
            self.big.insert(id, d)
        }
    }

    fn remove(&mut self, id: &DeviceId) -> Option<Device> {
        if *id < DENSE_IDS {
            self.slots.get_mut(*id as usize)?.take()
        } else {
            self.big.remove(id)
        }
    }

    fn values(&self) -> impl Iterator<Item = &Device> {
        self.slots.iter().flatten().chain(self.big.values())
    }

    fn values_mut(&mut self) -> impl Iterator<Item = &mut Device> {
        self.slots.iter_mut().flatten().chain(self.big.values_mut())
    }

    fn keys(&self) -> impl Iterator<Item = &DeviceId> {
        self.values().map(|d| &d.id)
    }
}

impl std::ops::Index<&DeviceId> for DeviceTable {
    type Output = Device;
    fn index(&self, id: &DeviceId) -> &Device {
        self.get(id).expect("no such device")
    }
}

impl fmt::Debug for DeviceTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.values()).finish()
    }
}

/// How a [`VirtSwitch`]'s devices' buffer pools are bounded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BufferBound {
    /// The caller's thread: only the devices with a quota of their own
    /// ([`Quotas::max_buffers`]).
    Own,
    /// A worker's shard: every device, by its own quota or this one.
    Default(usize),
    /// The frames do not come back (a taken output channel): no device.
    Unbounded,
}

impl BufferBound {
    /// The bound of a device with quotas `q` (`Switch::set_buffer_quota`).
    fn of(self, q: &Quotas) -> Option<usize> {
        let own = q.max_buffers.map(|n| n.clamp(1, MAX_BUFFERS));
        match self {
            BufferBound::Own => own,
            BufferBound::Default(d) => Some(own.unwrap_or(d)),
            BufferBound::Unbounded => None,
        }
    }
}

/// Default hop budget: how many links one packet lineage may cross.
pub const DEFAULT_MAX_HOPS: u32 = 8;

/// Where a device's virtual port leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Out of the physical port.
    Phys(Port),
    /// Into `device`, arriving on its virtual port `vport` as a fresh packet.
    Link { device: DeviceId, vport: Port },
    /// To the device's CPU queue ([`VirtSwitch::take_cpu_packets`]).
    Cpu,
    /// Dropped (counted).
    Drop,
}

/// A header field the classifier can match (offsets for untagged or single-tagged Ethernet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    EthDst,
    EthSrc,
    /// The EtherType after an optional 802.1Q tag.
    EtherType,
    Ipv4Src,
    Ipv4Dst,
    Ipv4Proto,
}

impl Field {
    /// Parse `ethernet.dstAddr`-style or short names.
    pub fn parse(s: &str) -> Option<Field> {
        Some(match s {
            "eth.dst" | "ethernet.dst" | "ethernet.dstAddr" => Field::EthDst,
            "eth.src" | "ethernet.src" | "ethernet.srcAddr" => Field::EthSrc,
            "eth.type" | "ethernet.etherType" | "ethertype" => Field::EtherType,
            "ipv4.src" | "ipv4.srcAddr" => Field::Ipv4Src,
            "ipv4.dst" | "ipv4.dstAddr" => Field::Ipv4Dst,
            "ipv4.proto" | "ipv4.protocol" => Field::Ipv4Proto,
            _ => return None,
        })
    }

    /// Width in bits.
    pub fn width(self) -> u32 {
        match self {
            Field::EthDst | Field::EthSrc => 48,
            Field::EtherType => 16,
            Field::Ipv4Src | Field::Ipv4Dst => 32,
            Field::Ipv4Proto => 8,
        }
    }

    /// The field's value in `pkt`, or `None` when the packet does not carry it.
    fn extract(self, pkt: &[u8]) -> Option<u64> {
        let be = |off: usize, len: usize| -> Option<u64> {
            let b = pkt.get(off..off + len)?;
            Some(b.iter().fold(0u64, |a, &x| (a << 8) | x as u64))
        };
        let l2 = if be(12, 2)? == 0x8100 { 18 } else { 14 };
        match self {
            Field::EthDst => be(0, 6),
            Field::EthSrc => be(6, 6),
            Field::EtherType => be(l2 - 2, 2),
            _ => {
                if be(l2 - 2, 2)? != 0x0800 {
                    return None;
                }
                match self {
                    Field::Ipv4Src => be(l2 + 12, 4),
                    Field::Ipv4Dst => be(l2 + 16, 4),
                    _ => be(l2 + 9, 1),
                }
            }
        }
    }
}

/// `field & mask == value`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldMatch {
    pub field: Field,
    pub value: u64,
    pub mask: u64,
}

/// A classifier rule: every present condition must hold. Higher `priority` wins; among equal
/// priorities the rule added first wins.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    pub priority: i32,
    /// Physical ingress port.
    pub port: Option<Port>,
    /// 802.1Q VLAN id (the tag is left in the frame).
    pub vlan: Option<u16>,
    pub field: Option<FieldMatch>,
    pub device: DeviceId,
    /// Virtual ingress port; `None` = the physical port's number.
    pub vport: Option<Port>,
}

impl Rule {
    fn matches(&self, port: Port, pkt: &[u8]) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        if let Some(v) = self.vlan {
            let tagged = pkt.len() >= 16 && pkt[12] == 0x81 && pkt[13] == 0x00;
            if !tagged || (u16::from_be_bytes([pkt[14], pkt[15]]) & 0x0fff) != v {
                return false;
            }
        }
        if let Some(f) = self.field {
            match f.field.extract(pkt) {
                Some(x) if x & f.mask == f.value & f.mask => {}
                _ => return false,
            }
        }
        true
    }
}

/// The classifier and every device's port map: what a snapshot stores.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Topology {
    pub rules: Vec<Rule>,
    /// Per device: virtual port → target. Unmapped virtual ports drop (counted).
    pub port_maps: BTreeMap<DeviceId, BTreeMap<Port, Target>>,
    /// Per device: virtual port → 802.1Q VLAN id (1..=4094) of a *tagged* virtual port (the
    /// others are untagged). A frame the classifier gives to a tagged virtual port arrives
    /// with that VLAN's tag stripped when it carries it; every frame the device sends out of
    /// a tagged virtual port (to a physical port or over a link) gets the tag pushed (PCP 0,
    /// DEI 0). Frames arriving over links are not stripped.
    pub vlans: BTreeMap<DeviceId, BTreeMap<Port, u16>>,
}

/// Per-device limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quotas {
    /// Table entries over all the device's tables (`None` = only the tables' own sizes).
    pub max_entries: Option<u64>,
    /// Packet instances (the input, clones, replicas, resubmits, recirculations) one arriving
    /// packet may spawn inside the device.
    pub max_passes: usize,
    /// Bytes of register memory over all the program's register arrays (cells of
    /// `ceil(bitwidth / 8)` bytes), checked when the program is loaded, before any of it is
    /// allocated (`None` = no limit).
    pub max_register_bytes: Option<u64>,
    /// Parser states one packet may enter in the device ([`DEFAULT_PARSER_STATES`]; 1 to
    /// [`MAX_PARSER_STATES`]): a packet whose parser would enter one more stops there with
    /// `error.ParserTimeout` (ingress sees it in `parser_error`, as after any parser error in
    /// simple_switch; counted, [`VirtSwitch::parser_counts`]). It bounds what one packet of a
    /// looping parser holds a worker for; each 64 states a packet enters are charged one
    /// unit of work besides its passes ([`VirtSwitch::device_work`]).
    pub max_parser_states: u64,
    /// Packet instances and output buffers the device's switch allocates, each
    /// (`tern_dataplane::Switch::set_buffer_quota`: a DPDK mempool's size): once that many
    /// were made, a copy (clone, multicast replica, resubmit, recirculation) or a transmitted
    /// frame that finds the device's pool empty is dropped and counted
    /// ([`DeviceStats::buffer_drops`]) instead of allocating on the packet path. The buffers
    /// come back when the caller gives the frames back ([`VirtSwitch::recycle_outputs`], or
    /// the workers' front). `None`: the default — `DEVICE_BUFFERS` (1,024) on workers,
    /// unbounded on the caller's thread; 1 to [`MAX_BUFFERS`]. Devices whose frames never come
    /// back (a taken output channel, [`VirtWorkers::take_output_channel`]) are unbounded
    /// whatever their quota.
    pub max_buffers: Option<usize>,
}

/// The largest [`Quotas::max_buffers`].
pub const MAX_BUFFERS: usize = 1 << 20;

/// Default [`Quotas::max_parser_states`] of a tenant's device: far above any real parse (an
/// Ethernet/VLAN/IPv4/TCP parser with options enters tens of states), 1 % of a plain switch's
/// bound.
pub const DEFAULT_PARSER_STATES: u64 = 1_000;

/// The largest [`Quotas::max_parser_states`]: a plain `tern run` switch's bound.
pub const MAX_PARSER_STATES: u64 = tern_dataplane::exec::MAX_PARSER_STATES;

impl Default for Quotas {
    fn default() -> Self {
        Quotas {
            max_entries: None,
            max_passes: 10_000,
            max_register_bytes: None,
            max_parser_states: DEFAULT_PARSER_STATES,
            max_buffers: None,
        }
    }
}

/// Register memory a program's register arrays take (what [`Quotas::max_register_bytes`]
/// limits).
pub fn register_bytes(p: &tern_model::Program) -> u64 {
    p.register_arrays
        .iter()
        .map(|r| u64::from(r.size) * u64::from(r.bitwidth.div_ceil(8).max(1)))
        .sum()
}

/// Per-device counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceStats {
    /// Packets that entered the device (from the classifier or a link).
    pub packets_in: u64,
    /// Frames sent to physical ports.
    pub to_phys: u64,
    /// Frames handed over links to other devices.
    pub to_links: u64,
    /// Frames sent to the CPU queue.
    pub to_cpu: u64,
    /// Frames on an unmapped or `Drop` virtual port.
    pub dropped: u64,
    /// Frames that would have crossed a link past the hop budget.
    pub hop_cut: u64,
    /// Panics caught in this device.
    pub panics: u64,
    /// Packets dropped because the device is quarantined.
    pub quarantine_drops: u64,
    /// Copies (clones, multicast replicas, resubmits, recirculations) and frames dropped
    /// because the device's buffer pool was empty (on workers: `DEVICE_BUFFERS` instances
    /// and output buffers per device; `tern_dataplane::Switch::buffer_drops`).
    pub buffer_drops: u64,
    /// Control-plane work the device's runtime took, in entries touched: one per write call
    /// through [`VirtSwitch::runtime`] (adds, modifies, deletes, defaults, registers,
    /// multicast, mirroring ...), a table clear the entries it removed. What the fair
    /// scheduler's [`Cost::Work`] charges a control job for ([`VirtSwitch::device_control_work`]).
    pub control_work: u64,
    /// Of those, the units of write calls that were refused (an error: past the entry quota,
    /// a bad table or key ...): priced apart from the applied ones ([`crate::ControlPrice`]), so
    /// cheap refusals do not lower the price of dear writes.
    pub control_refused: u64,
    /// Posts of control work ([`VirtWorkers::post`], `post_steps`, `submit`) refused because
    /// the device already had its bound queued ([`WorkerOptions::max_queued_control`],
    /// [`VirtError::ControlBacklog`]); counted by the workers' front.
    pub control_backlog_refused: u64,
}

/// Whole-switch counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VirtStats {
    /// Packets no classifier rule matched (dropped).
    pub unclassified: u64,
    /// Frames sent over a link to a device that does not exist (dropped).
    pub dangling: u64,
    /// Frames the workers' front dropped before classifying them: every device the rules
    /// of their physical port lead to is quarantined.
    pub quarantined_port: u64,
}

/// Who is calling the control API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller<'a> {
    /// The operator reaches every device.
    Operator,
    /// A tenant reaches the devices it owns.
    Tenant(&'a str),
}

/// Errors of the operator API.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum VirtError {
    /// Unknown device, or one the caller may not reach (the same answer on purpose).
    #[error("device {0} not found")]
    NoSuchDevice(DeviceId),
    #[error("device {0} already exists")]
    DeviceExists(DeviceId),
    #[error("device {device}: {message}")]
    Program { device: DeviceId, message: String },
    #[error("{0}")]
    Topology(String),
    #[error("snapshot '{0}' not found")]
    NoSuchSnapshot(String),
    /// A device's posted control work is at its bound ([`WorkerOptions::max_queued_control`]):
    /// the post is refused (counted in [`DeviceStats::control_backlog_refused`]); the device
    /// may post again once its worker has started some of the queued turns.
    #[error(
        "device {device}: {queued} turns of control work already queued, {asked} more would pass \
         the limit of {limit}; retry once they have run"
    )]
    ControlBacklog {
        device: DeviceId,
        /// Turns queued (jobs, and steps left of batches) when the post was refused.
        queued: usize,
        /// Turns the refused post asked for (1 for a job, its steps for a batch).
        asked: usize,
        limit: usize,
    },
}

/// What a replace carried over from the old device.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CarryReport {
    /// Tables whose entries were carried over.
    pub tables: Vec<String>,
    pub entries: usize,
    /// What was not carried, and why.
    pub skipped: Vec<String>,
}

/// A tenant device.
pub struct Device {
    id: DeviceId,
    owner: Option<String>,
    switch: Switch,
    quotas: Quotas,
    /// Names of the program's tables (for the entry quota).
    tables: Vec<String>,
    /// Compiled port map: index = virtual port.
    ports: Vec<Target>,
    /// Whether any virtual port links into another device.
    has_links: bool,
    /// The link the device's last frame took on the lane ([`VirtSwitch::fast_hops`]),
    /// forgotten whenever the port map changes.
    link_guess: LinkGuess,
    /// The physical port of each virtual port mapped to one ([`NO_PHYS`] otherwise): the
    /// one-packet lane's output check and renumbering in one load.
    phys: Vec<Port>,
    /// Virtual ports `same_lo .. same_lo + same_len` map to the same physical port numbers
    /// (the first such run in [`Device::phys`]; `same_len` 0: none): a burst's descriptors on
    /// them keep their port with one comparison ([`VirtSwitch::burst_to_phys`]).
    same_lo: Port,
    same_len: Port,
    /// Whether the one-packet fast lane may run this device (no tagged virtual port, not
    /// quarantined, no fault armed), kept by [`Device::refresh_lane`] whenever one of those
    /// changes.
    lane: bool,
    /// VLAN id per virtual port (index = virtual port; 0 = untagged), empty when none is
    /// tagged.
    tags: Vec<u16>,
    stats: DeviceStats,
    quarantine: Option<String>,
    /// Fault injection: panic when this many more packets have entered.
    fault_in: Option<u64>,
    cpu: Vec<(Port, Vec<u8>)>,
    /// Where the device reports its quarantine to the workers' front ([`Quarantined`]), and
    /// what it reported last.
    board: Option<Arc<Quarantined>>,
    reported: bool,
    /// Bumped whenever the device's program is replaced (any path: the operator's
    /// `replace_device`, a tenant's P4Runtime pipeline): the fair scheduler starts the
    /// device's calibration again when it moves ([`VirtSwitch::program_epoch`]).
    epoch: u64,
}

/// The devices in quarantine, written by the workers' switches as they quarantine and release
/// devices and read by the workers' front, which drops the frames of a physical port whose
/// rules all lead to quarantined devices before classifying them
/// ([`Classifier::port_states`]).
#[derive(Debug, Default)]
pub(crate) struct Quarantined {
    /// Bumped on every change (the front recomputes its port states when it moved).
    gen: AtomicU64,
    ids: Mutex<BTreeSet<DeviceId>>,
}

impl Quarantined {
    pub(crate) fn set(&self, id: DeviceId, on: bool) {
        let mut ids = self.ids.lock().unwrap_or_else(|e| e.into_inner());
        let changed = if on { ids.insert(id) } else { ids.remove(&id) };
        if changed {
            self.gen.fetch_add(1, AtomicOrdering::Release);
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.gen.load(AtomicOrdering::Acquire)
    }

    pub(crate) fn ids(&self) -> BTreeSet<DeviceId> {
        self.ids.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("id", &self.id)
            .field("owner", &self.owner)
            .field("quotas", &self.quotas)
            .field("stats", &self.stats)
            .field("quarantine", &self.quarantine)
            .finish()
    }
}

impl Device {
    fn total_entries(&self) -> u64 {
        self.tables
            .iter()
            .map(|t| self.switch.mt_get_num_entries(t).unwrap_or(0))
            .sum()
    }

    fn check_entry_quota(&self) -> Result<(), RuntimeError> {
        match self.quotas.max_entries {
            Some(max) if self.total_entries() >= max => Err(TableError::TABLE_FULL.into()),
            _ => Ok(()),
        }
    }

    fn set_ports(&mut self, ports: Vec<Target>) {
        self.has_links = ports.iter().any(|t| matches!(t, Target::Link { .. }));
        self.link_guess = LinkGuess::NONE;
        self.phys = ports
            .iter()
            .map(|t| match t {
                Target::Phys(p) => *p,
                _ => NO_PHYS,
            })
            .collect();
        let lo = self
            .phys
            .iter()
            .enumerate()
            .position(|(v, &p)| v as Port == p);
        (self.same_lo, self.same_len) = match lo {
            Some(lo) => {
                let n = self.phys[lo..]
                    .iter()
                    .enumerate()
                    .take_while(|&(k, &p)| (lo + k) as Port == p)
                    .count();
                (lo as Port, n as Port)
            }
            None => (0, 0),
        };
        self.ports = ports;
    }

    /// Recompute [`Device::lane`] (after a change of the tags, the quarantine or the fault).
    fn refresh_lane(&mut self) {
        self.lane = self.tags.is_empty() && self.quarantine.is_none() && self.fault_in.is_none();
        let q = self.quarantine.is_some();
        if q != self.reported {
            if let Some(b) = &self.board {
                b.set(self.id, q);
                self.reported = q;
            }
        }
    }

    /// Compile the device's port map and VLAN tags from `t`.
    fn compile(&mut self, t: &Topology) {
        self.set_ports(compile_ports(t.port_maps.get(&self.id)));
        self.tags = match t.vlans.get(&self.id) {
            Some(m) if !m.is_empty() => {
                let n = m.keys().next_back().map_or(0, |&p| p as usize + 1);
                let mut v = vec![0u16; n];
                for (&p, &vid) in m {
                    v[p as usize] = vid;
                }
                v
            }
            _ => Vec::new(),
        };
        self.refresh_lane();
    }

    /// The link a frame of this device on virtual port `port` takes, or `None` (not a link).
    /// When `port` is the port of the last link taken, that link is answered without reading
    /// the port map: the next device is then known from this device alone, and the loads of
    /// the next hop need not wait for the frame's port to come out of the pipeline, through
    /// the port map, to the next device's slot (a chain of dependent loads per hop; the
    /// comparison that checks the guess is a branch the processor predicts past).
    #[inline(always)]
    fn link_of(&mut self, port: Port) -> Option<(DeviceId, Port)> {
        if let Some(link) = self.guessed_link(port) {
            return Some(link);
        }
        match self.ports.get(port as usize) {
            Some(&Target::Link { device, vport }) => {
                self.remember_link(port, device, vport);
                Some((device, vport))
            }
            _ => None,
        }
    }

    /// The link the lane takes from this device when `out` holds its one frame at `start`
    /// and the hop budget allows a hop ([`Device::link_of`]), else `None`.
    #[inline(always)]
    fn lane_link(
        &mut self,
        out: &[OutputPacket],
        start: usize,
        max_hops: u32,
    ) -> Option<(DeviceId, Port)> {
        if out.len() == start + 1 && max_hops > 0 {
            self.link_of(out[start].port)
        } else {
            None
        }
    }

    /// When `out` holds this device's one frame at `start` (its last) and the frame's virtual
    /// port maps to a physical port: renumbered to it and counted, and true (the lane ends
    /// there); else false, nothing changed.
    #[inline(always)]
    fn one_to_phys(&mut self, out: &mut [OutputPacket], start: usize) -> bool {
        if out.len() == start + 1 {
            if let Some(&p) = self.phys.get(out[start].port as usize) {
                if p != NO_PHYS {
                    out[start].port = p;
                    self.stats.to_phys += 1;
                    return true;
                }
            }
        }
        false
    }

    /// The packet into this device inside a [`VirtSwitch::process_each`] session: counted in,
    /// and `running` names the device while it runs (the session's boundary catches a panic
    /// and quarantines it).
    #[inline(always)]
    fn run_in_session(
        &mut self,
        vport: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        running: &mut Option<DeviceId>,
    ) {
        self.stats.packets_in += 1;
        *running = Some(self.id);
        self.switch.process_packet(vport, data, out);
        *running = None;
    }

    /// The last link taken ([`Device::link_of`]) when it was from virtual port `port`.
    #[inline(always)]
    fn guessed_link(&self, port: Port) -> Option<(DeviceId, Port)> {
        let g = self.link_guess;
        (u64::from(port) == g.port).then_some((g.next, g.vport))
    }

    /// Remember that a frame on virtual port `port` took the link into `next`'s `vport`.
    #[inline(always)]
    fn remember_link(&mut self, port: Port, next: DeviceId, vport: Port) {
        self.link_guess = LinkGuess {
            port: port.into(),
            next,
            vport,
        };
    }

    /// Whether the one-packet fast lane may run this device: no tagged virtual ports, not
    /// quarantined, no fault armed.
    #[inline(always)]
    fn lane_ok(&self) -> bool {
        self.lane
    }

    /// Whether a burst's fast paths may run this device: no tagged virtual ports, not
    /// quarantined (an armed fault fires inside them, [`Device::fault_at`]).
    #[inline(always)]
    fn burst_ok(&self) -> bool {
        self.tags.is_empty() && self.quarantine.is_none()
    }

    /// Whether an armed fault fires on the next packet that enters the device (and the
    /// device would run it: not quarantined, no tagged port), as [`Device::fault_at`] of one.
    #[inline]
    fn fault_fires_next(&self) -> bool {
        self.fault_in == Some(1) && self.quarantine.is_none() && self.tags.is_empty()
    }

    /// An armed fault ([`VirtSwitch::inject_panic`]) as `n` more packets enter: the index
    /// (1-based) of the packet among them it fires on, or `None` (then it counts them).
    #[inline(always)]
    fn fault_at(&mut self, n: u64) -> Option<usize> {
        match self.fault_in.as_mut() {
            Some(k) if *k <= n => Some(*k as usize),
            Some(k) => {
                *k -= n;
                None
            }
            None => None,
        }
    }

    /// The VLAN id of a tagged virtual port (0: untagged).
    #[inline]
    fn tag(&self, vport: Port) -> u16 {
        self.tags.get(vport as usize).copied().unwrap_or(0)
    }

    /// A frame of this device for a link past the hop budget, the CPU or drop (counted; the
    /// buffer is kept for reuse unless it goes to the CPU queue).
    #[cold]
    #[inline(never)]
    fn take_other(&mut self, target: Target, vport: Port, data: Vec<u8>) {
        match target {
            Target::Link { .. } => {
                self.stats.hop_cut += 1;
                self.switch.recycle_buffer(data);
            }
            Target::Cpu => {
                self.stats.to_cpu += 1;
                self.cpu.push((vport, data));
            }
            _ => {
                self.stats.dropped += 1;
                self.switch.recycle_buffer(data);
            }
        }
    }

    fn target(&self, vport: Port) -> Target {
        self.ports
            .get(vport as usize)
            .copied()
            .unwrap_or(Target::Drop)
    }
}

/// What defines a device.
#[derive(Clone, Debug, Default)]
pub struct DeviceSpec {
    /// The program, BMv2 JSON.
    pub json: String,
    /// The tenant that owns it (`None`: operator only).
    pub owner: Option<String>,
    pub quotas: Quotas,
}

/// The classifier as an array by physical port: the winning (device, virtual port) per port
/// (the virtual port resolved: never [`SAME_PORT`]), and the catch-all winner for ports beyond
/// the array.
#[derive(Clone)]
struct PortTable {
    ports: Vec<Option<Hit>>,
    default: Option<Hit>,
}

/// A classifier result in [`PortTable`]: the device and its virtual ingress port
/// ([`SAME_PORT`] = the physical port's number).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Hit {
    device: DeviceId,
    vport: Port,
}

/// [`Hit::vport`] when the virtual port is the physical port's number (virtual ports are at
/// most [`MAX_VPORT`]).
const SAME_PORT: Port = Port::MAX;

/// Packets per device pass when a batch is split on the stack (renumbered, grouped by device,
/// or one hop of frames over links).
const CHUNK: usize = 32;

/// [`Device::phys`] of a virtual port that is not mapped to a physical port.
const NO_PHYS: Port = Port::MAX;

/// A device's last link taken on the lane ([`Device::link_of`]): from virtual port `port`
/// (widened; [`LinkGuess::NONE`]'s is no port's) into `next` on its virtual port `vport`.
#[derive(Clone, Copy, Debug)]
struct LinkGuess {
    port: u64,
    next: DeviceId,
    vport: Port,
}

impl LinkGuess {
    const NONE: LinkGuess = LinkGuess {
        port: u64::MAX,
        next: 0,
        vport: 0,
    };
}

/// The way a packet of a [`VirtSwitch::process_each`] session took on the one-packet lane
/// when it ended as one frame on a physical port: the physical port it came in on, the
/// device and virtual port the classifier's port table gave it, and the device that sent
/// the frame (itself, or the last of a chain it started). The next packet on the same port
/// takes the same way in ([`VirtSwitch::memo_lane`]): within a session nothing else runs on
/// the switch, so the port table and the device's admission to the lane cannot change, and
/// `out` still holds that one frame.
#[derive(Clone, Copy)]
struct LaneMemo {
    /// The port, widened ([`LaneMemo::NONE`]'s is no port's).
    port: u64,
    dev: DeviceId,
    vport: Port,
    last: DeviceId,
}

impl LaneMemo {
    /// No memo: the next packet asks the classifier ([`VirtSwitch::next_lane`]).
    const NONE: LaneMemo = LaneMemo {
        port: u64::MAX,
        dev: 0,
        vport: 0,
        last: 0,
    };

    /// This way in, ending at the chain's `last` device when the chain ended on the lane
    /// with one frame on a physical port ([`VirtSwitch::fast_hops`]); else no memo.
    #[inline(always)]
    fn ending_at(self, last: Option<DeviceId>) -> LaneMemo {
        last.map_or(LaneMemo::NONE, |last| LaneMemo { last, ..self })
    }
}

impl Hit {
    fn new(device: DeviceId, vport: Option<Port>) -> Hit {
        Hit {
            device,
            vport: vport.unwrap_or(SAME_PORT),
        }
    }
}

impl PortTable {
    #[inline(always)]
    fn get(&self, port: Port) -> Option<(DeviceId, Port)> {
        match self.ports.get(port as usize) {
            Some(h) => h.map(|h| (h.device, h.vport)),
            None => self
                .default
                .map(|h| (h.device, if h.vport == SAME_PORT { port } else { h.vport })),
        }
    }
}

/// What a device runs: one packet on a virtual port, or a whole batch whose virtual ports are
/// the packets' ports, one port for all, or the classifier's port table's (renumbered on the
/// way into the switch: the batch is never copied).
#[derive(Clone, Copy)]
enum Input<'a> {
    One(Port, &'a [u8]),
    Batch(&'a [(Port, &'a [u8])]),
    /// Every packet on this virtual port (the ports in the slice are physical).
    OnPort(Port, &'a [(Port, &'a [u8])]),
    /// Each packet on the virtual port the port table gives its physical port.
    ByTable(&'a [(Port, &'a [u8])]),
}

impl<'a> Input<'a> {
    #[inline(always)]
    fn len(&self) -> usize {
        match self {
            Input::One(..) => 1,
            Input::Batch(b) | Input::OnPort(_, b) | Input::ByTable(b) => b.len(),
        }
    }

    /// Run the first `limit` packets (`usize::MAX`: all) on `sw`, appending to `out`; `t` is
    /// the classifier's port table (for [`Input::ByTable`]).
    #[inline(always)]
    fn run(
        self,
        sw: &mut Switch,
        t: Option<&PortTable>,
        limit: usize,
        out: &mut Vec<OutputPacket>,
    ) {
        match self {
            Input::One(vport, data) => {
                if limit > 0 {
                    sw.process_packet(vport, data, out)
                }
            }
            Input::Batch(b) => sw.process_batch(&b[..limit.min(b.len())], out),
            Input::OnPort(vport, b) => sw.process_batch_iter(
                b[..limit.min(b.len())].iter().map(|&(_, d)| (vport, d)),
                out,
            ),
            Input::ByTable(b) => sw.process_batch_iter(
                b[..limit.min(b.len())]
                    .iter()
                    .map(|&(p, d)| (t.and_then(|t| t.get(p)).map_or(p, |(_, v)| v), d)),
                out,
            ),
        }
    }
}

/// How a batch that goes to one device finds its virtual ports ([`VirtSwitch::batch_device`]).
#[derive(Clone, Copy)]
enum Vports {
    /// The packets' own port numbers.
    Same,
    /// Every packet on this one.
    On(Port),
    /// The port table's, packet by packet.
    Table,
}

impl Vports {
    #[inline(always)]
    fn input<'a>(self, pkts: &'a [(Port, &'a [u8])]) -> Input<'a> {
        match self {
            Vports::Same => Input::Batch(pkts),
            Vports::On(v) => Input::OnPort(v, pkts),
            Vports::Table => Input::ByTable(pkts),
        }
    }
}

struct Work {
    /// The device that produced the frame (its buffer goes back there).
    from: DeviceId,
    device: DeviceId,
    vport: Port,
    data: Vec<u8>,
    hops: u32,
    /// Already run in its hop ([`VirtSwitch::run_wave`]).
    done: bool,
}

/// Many tenant devices behind one classifier (see the module documentation).
pub struct VirtSwitch {
    devices: DeviceTable,
    topo: Topology,
    /// `topo.rules` compiled for matching.
    cls: Classifier,
    snapshots: HashMap<String, Topology>,
    /// Compiled programs shared by the devices running them (see `build_switch`).
    programs: Vec<CompiledProgram>,
    max_hops: u32,
    stats: VirtStats,
    // Scratch, reused across packets.
    /// Frames sent over links by the device passes of the current hop, in order: the next hop
    /// ([`VirtSwitch::drain_links`]).
    links: Vec<Work>,
    /// The hop being run (its frames taken out of `links`; empty between calls).
    wave: Vec<Work>,
    /// A batch's classifier results (`None`: unclassified or already run).
    hits: Vec<Option<(DeviceId, Port)>>,
    /// A frame with its VLAN tag stripped.
    strip: Vec<u8>,
    recycle: Vec<OutputPacket>,
    /// Per hop count: the frames of a pass that all cross one link, while the device behind
    /// it runs them ([`VirtSwitch::run_chained`]; kept for their capacity).
    chained: Vec<Vec<OutputPacket>>,
    /// [`VirtSwitch::drain_links`] is running a hop (frames of that hop wait in its wave).
    draining: bool,
    /// The producing devices of the frames appended to the caller's `out` since the last
    /// [`VirtSwitch::recycle_outputs`], as runs (device, frames), so that every buffer goes
    /// back where it came from; `origin_total` frames in all.
    origins: Vec<(DeviceId, u32)>,
    origin_total: usize,
    /// Where its devices report their quarantine (the workers' switches: [`Quarantined`]).
    pub(crate) board: Option<Arc<Quarantined>>,
    /// How the devices' instances and output buffers are bounded (`Switch::set_buffer_quota`;
    /// the workers' shards set it).
    buffer_quota: BufferBound,
    /// Output buffers owed to each device for the frames it sent away for good
    /// ([`VirtSwitch::feed_producers`]).
    owed: BTreeMap<DeviceId, usize>,
    /// A burst's packets on their virtual ports ([`VirtSwitch::process_burst`]; empty between
    /// calls, kept for its capacity).
    burst_refs: Vec<(Port, &'static [u8])>,
    /// The frames of a burst that took `process_batch`'s path (empty between calls).
    burst_frames: Vec<OutputPacket>,
    /// Per hop of a burst chain: the pass's frames ([`VirtSwitch::burst_chain`]; kept for
    /// their capacity).
    chain_bursts: Vec<BurstOut>,
    /// A fault was ever armed here ([`VirtSwitch::inject_panic`]): a session's packets off
    /// the lane check whether theirs fires ([`VirtSwitch::fire_in_session`]).
    faults_armed: bool,
    /// The second buffer of a one-packet chain on the lane ([`VirtSwitch::fast_hops`]): a
    /// hop's device reads its frame where the previous device wrote it and writes its own
    /// into the other buffer, the caller's `out` and this one taking turns (empty between
    /// calls; kept for its capacity).
    hop_out: Vec<OutputPacket>,
    /// The hop a chain's device is running on the lane, when a [`VirtSwitch::process_each`]
    /// session's boundary (not the hop's own) would catch its panic ([`HopMark`]): the session
    /// then quarantines that device and gives the frame's buffer back
    /// ([`VirtSwitch::give_back_hop`]).
    hop_mark: HopMark,
}

/// The hop a chain's device is running on the lane, for a [`VirtSwitch::process_each`]
/// session whose boundary catches its panic ([`VirtSwitch::fast_hops`]): the device running
/// the frame, the device that produced it, and which buffer holds it as its last frame — the
/// caller's `out`, or [`VirtSwitch::hop_out`] (the other buffer gets the running device's
/// frames). One word, set before the device runs and cleared after it: one store each way.
/// Devices on the lane have dense ids (below [`DENSE_IDS`]), so both fit.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct HopMark(u64);

impl HopMark {
    /// No hop is running.
    const NONE: HopMark = HopMark(0);

    /// `next` runs the frame `from` produced, which waits in `out` while `next` writes into
    /// [`VirtSwitch::hop_out`] (`DST_SPARE`), else in `hop_out`.
    #[inline(always)]
    fn new<const DST_SPARE: bool>(from: DeviceId, next: DeviceId) -> HopMark {
        let in_spare = u64::from(!DST_SPARE);
        HopMark(1 | in_spare << 1 | u64::from(from) << 2 | u64::from(next) << 33)
    }

    /// (the running device, the frame's producer, whether the frame waits in `hop_out`).
    fn get(self) -> Option<(DeviceId, DeviceId, bool)> {
        (self.0 & 1 == 1).then(|| {
            let next = (self.0 >> 33) as DeviceId;
            let from = ((self.0 >> 2) & 0x7fff_ffff) as DeviceId;
            (next, from, self.0 & 2 != 0)
        })
    }
}

/// How a one-packet chain on the lane left its loop ([`VirtSwitch::fast_hops`]).
enum HopEnd {
    /// One frame to a physical port (mapped).
    Phys,
    /// Anything else: the frames are mapped and their links run as on the general path.
    Other,
    /// The next device panicked (caught by the hop's own boundary).
    Panic(DeviceId, Box<dyn std::any::Any + Send>),
}

/// Where a one-packet chain on the lane is ([`VirtSwitch::fast_hops`]): the device whose
/// frame is in flight, the device it goes into next and on which virtual port, the hops taken.
struct Walk {
    id: DeviceId,
    next: DeviceId,
    vport: Port,
    hops: u32,
}

/// What of the switch a hop of [`VirtSwitch::fast_hops`] uses (borrowed apart from the two
/// buffers the hop reads and writes).
struct HopLane<'a> {
    slots: &'a mut Vec<Option<Device>>,
    mark: &'a mut HopMark,
    faults_armed: bool,
    max_hops: u32,
}

impl HopLane<'_> {
    /// One hop: `w.next` runs the frame in flight (the last of `src`, at `src_base`) and
    /// writes its frames into `dst` from `dst_base` on (`IN_SPARE`: `dst` is
    /// [`VirtSwitch::hop_out`]); the frame's buffer goes back to `w.id`. `Ok`: the device sent
    /// one frame over a link the lane takes on (`w` moved on). `Err((end, ran))`: the lane
    /// ends, before the device ran the frame (`ran` false: the frames are still in `src`) or
    /// after (in `dst`).
    #[inline(always)]
    fn hop<const GUARD: bool, const IN_SPARE: bool>(
        &mut self,
        w: &mut Walk,
        src: &mut Vec<OutputPacket>,
        src_base: usize,
        dst: &mut Vec<OutputPacket>,
        dst_base: usize,
    ) -> Result<(), (HopEnd, bool)> {
        // Both devices at once (a device linked to itself takes the general path).
        let Ok([Some(cur), Some(nd)]) = self
            .slots
            .get_disjoint_mut([w.id as usize, w.next as usize])
        else {
            return Err((HopEnd::Other, false));
        };
        if !nd.lane_ok() {
            if self.faults_armed && nd.fault_fires_next() {
                return Err(fire_in_hop::<GUARD, IN_SPARE>(w, cur, nd, src, self.mark));
            }
            return Err((HopEnd::Other, false));
        }
        cur.stats.to_links += 1;
        nd.stats.packets_in += 1;
        let sw = &mut nd.switch;
        let frame = &src[src_base].data;
        let r = if GUARD {
            catch_unwind(AssertUnwindSafe(|| sw.process_packet(w.vport, frame, dst)))
        } else {
            // The hop, for the session's boundary should the device panic.
            *self.mark = HopMark::new::<IN_SPARE>(w.id, w.next);
            sw.process_packet(w.vport, frame, dst);
            *self.mark = HopMark::NONE;
            Ok(())
        };
        // The frame's buffer goes back to the device that produced it; the device's own
        // frames are in flight now.
        if let Some(f) = src.pop() {
            cur.switch.recycle_buffer(f.data);
        }
        if let Err(e) = r {
            return Err((HopEnd::Panic(w.next, e), true));
        }
        w.id = w.next;
        w.hops += 1;
        if dst.len() != dst_base + 1 {
            return Err((HopEnd::Other, true));
        }
        // The guess first (`link_of`), then one read of the port map: the physical port
        // that ends the lane, or a link (remembered).
        let port = dst[dst_base].port;
        if let Some((next, vport)) = nd.guessed_link(port) {
            if w.hops >= self.max_hops {
                return Err((HopEnd::Other, true));
            }
            (w.next, w.vport) = (next, vport);
            return Ok(());
        }
        match nd.ports.get(port as usize) {
            Some(&Target::Phys(p)) => {
                dst[dst_base].port = p;
                nd.stats.to_phys += 1;
                Err((HopEnd::Phys, true))
            }
            Some(&Target::Link { device, vport }) if w.hops < self.max_hops => {
                nd.remember_link(port, device, vport);
                (w.next, w.vport) = (device, vport);
                Ok(())
            }
            _ => Err((HopEnd::Other, true)),
        }
    }
}

/// An injected fault ([`VirtSwitch::inject_panic`]) firing on the frame device `nd` gets
/// over a link from `cur` on the lane ([`HopLane::hop`]): the hop goes as far as a real
/// panic inside `nd`'s switch would — the counters moved, the frame waiting as `src`'s last
/// ([`HopMark`]) — and panics there. In a [`VirtSwitch::process_each`] session (`!GUARD`) the
/// session's boundary catches it and gives the frame back ([`VirtSwitch::give_back_hop`]);
/// with the hop's own boundary (`GUARD`) it is caught here and ends the hop as a caught
/// panic does. A device with a fault armed is otherwise off the lane, so this is the only
/// way a test reaches the hop's recovery, from either buffer (`tests/chain.rs`).
#[cold]
#[inline(never)]
fn fire_in_hop<const GUARD: bool, const IN_SPARE: bool>(
    w: &Walk,
    cur: &mut Device,
    nd: &mut Device,
    src: &mut Vec<OutputPacket>,
    mark: &mut HopMark,
) -> (HopEnd, bool) {
    cur.stats.to_links += 1;
    nd.stats.packets_in += 1;
    if !GUARD {
        *mark = HopMark::new::<IN_SPARE>(w.id, w.next);
        panic!("injected fault");
    }
    let r: std::thread::Result<()> = catch_unwind(|| panic!("injected fault"));
    if let Some(f) = src.pop() {
        cur.switch.recycle_buffer(f.data);
    }
    match r {
        Err(e) => (HopEnd::Panic(w.next, e), true),
        Ok(()) => unreachable!("the fault panicked"),
    }
}

/// `v`, emptied, as a vector of another lifetime: the allocation is reused (an in-place
/// collect of an empty vector), so a burst's renumbered packets allocate nothing.
fn relifetime<'b>(mut v: Vec<(Port, &[u8])>) -> Vec<(Port, &'b [u8])> {
    v.clear();
    v.into_iter().map(|_| unreachable!("emptied")).collect()
}

impl Default for VirtSwitch {
    fn default() -> Self {
        VirtSwitch::new()
    }
}

impl fmt::Debug for VirtSwitch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("VirtSwitch")
            .field("devices", &self.devices)
            .field("topology", &self.topo)
            .field("stats", &self.stats)
            .finish()
    }
}

impl VirtSwitch {
    /// An empty switch (no devices, no rules: every packet is unclassified).
    pub fn new() -> VirtSwitch {
        VirtSwitch {
            devices: DeviceTable::default(),
            topo: Topology::default(),
            cls: Classifier::default(),
            snapshots: HashMap::new(),
            programs: Vec::new(),
            max_hops: DEFAULT_MAX_HOPS,
            stats: VirtStats::default(),
            links: Vec::new(),
            wave: Vec::new(),
            hits: Vec::new(),
            strip: Vec::new(),
            recycle: Vec::new(),
            chained: Vec::new(),
            draining: false,
            origins: Vec::new(),
            origin_total: 0,
            board: None,
            buffer_quota: BufferBound::Own,
            owed: BTreeMap::new(),
            burst_refs: Vec::new(),
            burst_frames: Vec::new(),
            chain_bursts: Vec::new(),
            faults_armed: false,
            hop_out: Vec::new(),
            hop_mark: HopMark::NONE,
        }
    }

    /// Bound every device's instances and output buffers to `quota` of each, those here and
    /// those put in later (`tern_dataplane::Switch::set_buffer_quota`): a worker's shard,
    /// whose devices' frames come back through the front.
    /// A device's own quota ([`Quotas::max_buffers`]) overrides `quota`; `None` (frames that
    /// do not come back) leaves every device unbounded.
    pub(crate) fn set_buffer_quota(&mut self, quota: Option<usize>) {
        self.buffer_quota = match quota {
            Some(q) => BufferBound::Default(q),
            None => BufferBound::Unbounded,
        };
        let bound = self.buffer_quota;
        for d in self.devices.values_mut() {
            d.switch.set_buffer_quota(bound.of(&d.quotas));
        }
    }

    /// Fix every device's clock (see [`Switch::set_clock_us`]) for deterministic runs;
    /// devices added later keep real time. `None` returns to real time.
    pub fn set_clock_us(&mut self, now_us: Option<u64>) {
        for d in self.devices.values_mut() {
            d.switch.set_clock_us(now_us);
        }
    }

    /// Set the hop budget (links one packet lineage may cross).
    pub fn set_max_hops(&mut self, hops: u32) {
        self.max_hops = hops;
    }

    /// A device's switch: the compiled program is shared with every device running the same
    /// JSON (compiled once, kept while a device uses it); the state is the device's own.
    pub(crate) fn build_switch(
        &mut self,
        id: DeviceId,
        spec: &DeviceSpec,
    ) -> Result<Switch, VirtError> {
        let opts = SwitchOptions {
            device_id: id as u64,
            max_instances_per_packet: spec.quotas.max_passes.max(1),
            max_parser_states: spec.quotas.max_parser_states.clamp(1, MAX_PARSER_STATES),
            ..SwitchOptions::default()
        };
        let err = |e: tern_dataplane::SwitchError| VirtError::Program {
            device: id,
            message: e.to_string(),
        };
        self.programs.retain(|p| p.holders() > 1);
        let cp = match self.programs.iter().find(|p| p.json() == spec.json) {
            Some(p) => p.clone(),
            None => {
                let cp = CompiledProgram::compile(&spec.json, &opts).map_err(err)?;
                self.programs.push(cp.clone());
                cp
            }
        };
        if let Some(max) = spec.quotas.max_register_bytes {
            let n = register_bytes(cp.program());
            if n > max {
                return Err(VirtError::Program {
                    device: id,
                    message: format!(
                        "the program's registers take {n} bytes, over the quota of {max}"
                    ),
                });
            }
        }
        Switch::from_program(&cp, opts).map_err(err)
    }

    /// Keep `cp` where the next device built from its JSON finds it (see
    /// [`Shared::precompile`]).
    pub(crate) fn adopt_program(&mut self, cp: &CompiledProgram) {
        self.programs.retain(|p| p.holders() > 1);
        if !self.programs.iter().any(|p| p.json() == cp.json()) {
            self.programs.push(cp.clone());
        }
    }

    /// How many distinct compiled programs the devices share (one per distinct JSON).
    pub fn compiled_programs(&self) -> usize {
        self.programs.iter().filter(|p| p.holders() > 1).count()
    }

    /// Load a new device. It receives packets once rules or links point at it.
    pub fn add_device(&mut self, id: DeviceId, spec: DeviceSpec) -> Result<(), VirtError> {
        if self.devices.contains_key(&id) {
            return Err(VirtError::DeviceExists(id));
        }
        let switch = self.build_switch(id, &spec)?;
        let tables = table_names(&switch);
        let mut dev = Device {
            id,
            owner: spec.owner,
            switch,
            quotas: spec.quotas,
            tables,
            ports: Vec::new(),
            has_links: false,
            link_guess: LinkGuess::NONE,
            tags: Vec::new(),
            stats: DeviceStats::default(),
            quarantine: None,
            fault_in: None,
            phys: Vec::new(),
            same_lo: 0,
            same_len: 0,
            lane: true,
            cpu: Vec::new(),
            board: self.board.clone(),
            reported: false,
            epoch: 0,
        };
        // The const entries of the program count towards its quota.
        if let Some(max) = dev.quotas.max_entries {
            let n = dev.total_entries();
            if n > max {
                return Err(VirtError::Program {
                    device: id,
                    message: format!("the program's {n} const entries exceed the quota of {max}"),
                });
            }
        }
        dev.compile(&self.topo);
        let bound = self.buffer_quota.of(&dev.quotas);
        if bound.is_some() {
            dev.switch.set_buffer_quota(bound);
        }
        self.devices.insert(id, dev);
        Ok(())
    }

    /// Remove a device with its classifier rules and port map; other devices' virtual ports
    /// linked into it become `Drop` (counted as drops on those devices). Stored snapshots are
    /// kept as they are: one that names the device fails when activated. Returns its final
    /// counters.
    pub fn remove_device(&mut self, id: DeviceId) -> Result<DeviceStats, VirtError> {
        let dev = self
            .devices
            .remove(&id)
            .ok_or(VirtError::NoSuchDevice(id))?;
        self.topo.rules.retain(|r| r.device != id);
        self.topo.port_maps.remove(&id);
        self.topo.vlans.remove(&id);
        for (d, map) in self.topo.port_maps.iter_mut() {
            let mut changed = false;
            for t in map.values_mut() {
                if matches!(t, Target::Link { device, .. } if *device == id) {
                    *t = Target::Drop;
                    changed = true;
                }
            }
            if changed {
                if let Some(dev) = self.devices.get_mut(d) {
                    dev.set_ports(compile_ports(Some(map)));
                }
            }
        }
        self.reorder();
        Ok(DeviceStats {
            buffer_drops: dev.switch.buffer_drops(),
            ..dev.stats
        })
    }

    /// Replace a device's program. Its port map, rules, links, owner and counters stay; its
    /// quotas become `spec.quotas`. Entries of tables with the same name, key and action
    /// signatures in both programs are carried over (direct actions only; default actions
    /// too); registers, counters, meters, profiles, PRE and mirroring start fresh. Clears a
    /// quarantine.
    pub fn replace_device(
        &mut self,
        id: DeviceId,
        spec: DeviceSpec,
    ) -> Result<CarryReport, VirtError> {
        if !self.devices.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        let switch = self.build_switch(id, &spec)?;
        self.install_replacement(id, switch, spec)
    }

    /// The second half of [`VirtSwitch::replace_device`]: carry entries into `switch` (built
    /// elsewhere, off the packet path) and put it in place.
    pub(crate) fn install_replacement(
        &mut self,
        id: DeviceId,
        mut switch: Switch,
        spec: DeviceSpec,
    ) -> Result<CarryReport, VirtError> {
        let Some(old) = self.devices.get(&id) else {
            return Err(VirtError::NoSuchDevice(id));
        };
        let report = carry_entries(&old.switch, &mut switch, spec.quotas.max_entries);
        let tables = table_names(&switch);
        let dev = self.devices.get_mut(&id).expect("checked above");
        dev.switch = switch;
        dev.epoch += 1;
        dev.switch
            .set_buffer_quota(self.buffer_quota.of(&spec.quotas));
        dev.tables = tables;
        dev.quotas = spec.quotas;
        if spec.owner.is_some() {
            dev.owner = spec.owner;
        }
        dev.quarantine = None;
        dev.fault_in = None;
        dev.refresh_lane();
        Ok(report)
    }

    /// Change a device's owner (`None`: keep it) and quotas, live. A register quota the
    /// running program exceeds is refused (nothing changes); an entry quota below the entries
    /// installed now refuses further adds until enough are deleted.
    pub fn configure(
        &mut self,
        id: DeviceId,
        owner: Option<String>,
        quotas: Quotas,
    ) -> Result<(), VirtError> {
        let d = self
            .devices
            .get_mut(&id)
            .ok_or(VirtError::NoSuchDevice(id))?;
        if let Some(max) = quotas.max_register_bytes {
            let n = register_bytes(d.switch.program());
            if n > max {
                return Err(VirtError::Program {
                    device: id,
                    message: format!(
                        "the program's registers take {n} bytes, over the quota of {max}"
                    ),
                });
            }
        }
        d.switch
            .set_max_instances_per_packet(quotas.max_passes.max(1));
        d.switch
            .set_max_parser_states(quotas.max_parser_states.clamp(1, MAX_PARSER_STATES));
        if quotas.max_buffers != d.quotas.max_buffers {
            d.switch.set_buffer_quota(self.buffer_quota.of(&quotas));
        }
        d.quotas = quotas;
        if owner.is_some() {
            d.owner = owner;
        }
        Ok(())
    }

    /// A device's owner and quotas.
    pub fn device_config(&self, id: DeviceId) -> Result<(Option<String>, Quotas), VirtError> {
        let d = self.reachable(Caller::Operator, id)?;
        Ok((d.owner.clone(), d.quotas))
    }

    /// The names of the stored snapshots, sorted.
    pub fn snapshot_names(&self) -> Vec<String> {
        let mut v: Vec<String> = self.snapshots.keys().cloned().collect();
        v.sort();
        v
    }

    /// The device ids, ascending.
    pub fn device_ids(&self) -> Vec<DeviceId> {
        let mut v: Vec<_> = self.devices.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn reachable(&self, caller: Caller, id: DeviceId) -> Result<&Device, VirtError> {
        match self.devices.get(&id) {
            Some(d) if may_reach(caller, d) => Ok(d),
            _ => Err(VirtError::NoSuchDevice(id)),
        }
    }

    /// A device's runtime API, for `caller`. An unknown device and a device the caller does
    /// not own give the same [`VirtError::NoSuchDevice`].
    pub fn runtime(
        &mut self,
        caller: Caller,
        id: DeviceId,
    ) -> Result<DeviceRuntime<'_>, VirtError> {
        self.reachable(caller, id)?;
        Ok(DeviceRuntime { vs: self, id })
    }

    /// A device's counters.
    pub fn device_stats(&self, caller: Caller, id: DeviceId) -> Result<DeviceStats, VirtError> {
        let d = self.reachable(caller, id)?;
        Ok(DeviceStats {
            buffer_drops: d.switch.buffer_drops(),
            ..d.stats
        })
    }

    /// Panics device `id` has had (in its packets and in its control jobs), 0 for an unknown
    /// device: the fair scheduler charges a chunk or job in which one happened its measured
    /// time ([`crate::fair`]).
    pub fn device_panics(&self, id: DeviceId) -> u64 {
        self.devices.get(&id).map_or(0, |d| d.stats.panics)
    }

    /// Pipeline passes device `id` has run (`tern_dataplane::Switch::passes`: inputs,
    /// resubmits, recirculations, clones, multicast replicas), 0 for an unknown device: what
    /// the fair scheduler's [`Cost::Work`] counts per chunk.
    pub fn device_passes(&self, id: DeviceId) -> u64 {
        self.devices.get(&id).map_or(0, |d| d.switch.passes())
    }

    /// How many times device `id`'s program was replaced (0 for an unknown device): the fair
    /// scheduler prices a device's work by its own calibration, which must start again with
    /// a new program — a device calibrated on a cheap program and then given a dear one (by
    /// its tenant, over P4Runtime) would be charged the cheap price for the dear passes.
    pub fn program_epoch(&self, id: DeviceId) -> u64 {
        self.devices.get(&id).map_or(0, |d| d.epoch)
    }

    /// The control-plane work device `id`'s runtime took so far, in entries touched
    /// ([`DeviceStats::control_work`]), 0 for an unknown device: what the fair scheduler's
    /// [`Cost::Work`] counts per control job.
    pub fn device_control_work(&self, id: DeviceId) -> u64 {
        self.devices.get(&id).map_or(0, |d| d.stats.control_work)
    }

    /// Of [`VirtSwitch::device_control_work`], the refused writes' units
    /// ([`DeviceStats::control_refused`]).
    pub fn device_control_refused(&self, id: DeviceId) -> u64 {
        self.devices.get(&id).map_or(0, |d| d.stats.control_refused)
    }

    /// The work device `id` has done, in passes: [`VirtSwitch::device_passes`] plus one unit
    /// for every 64 parser states a packet entered (`ParserBudget::units`: nothing for an
    /// ordinary parse, 15 for a packet stopped at the default quota of 1,000 states), 0 for
    /// an unknown device: what the fair scheduler's [`Cost::Work`] charges per chunk.
    pub fn device_work(&self, id: DeviceId) -> u64 {
        self.devices
            .get(&id)
            .map_or(0, |d| d.switch.passes() + d.switch.parser_counts().units)
    }

    /// What device `id`'s parser did since its program was loaded: states entered, packets
    /// stopped by [`Quotas::max_parser_states`] (`ParserTimeout`), work units.
    pub fn parser_counts(
        &self,
        caller: Caller,
        id: DeviceId,
    ) -> Result<tern_dataplane::exec::ParserBudget, VirtError> {
        Ok(self.reachable(caller, id)?.switch.parser_counts())
    }

    /// Why a device is quarantined, if it is.
    pub fn quarantine(&self, caller: Caller, id: DeviceId) -> Result<Option<String>, VirtError> {
        Ok(self.reachable(caller, id)?.quarantine.clone())
    }

    /// Put a quarantined device back in service (its state is as the panic left it).
    pub fn release(&mut self, id: DeviceId) -> Result<(), VirtError> {
        let d = self
            .devices
            .get_mut(&id)
            .ok_or(VirtError::NoSuchDevice(id))?;
        d.quarantine = None;
        d.refresh_lane();
        Ok(())
    }

    /// Packets the device sent to its CPU port since the last call: (virtual port, frame).
    pub fn take_cpu_packets(
        &mut self,
        caller: Caller,
        id: DeviceId,
    ) -> Result<Vec<(Port, Vec<u8>)>, VirtError> {
        self.reachable(caller, id)?;
        Ok(std::mem::take(
            &mut self.devices.get_mut(&id).expect("checked").cpu,
        ))
    }

    /// Digests of a device since the last call.
    pub fn take_digests(&mut self, caller: Caller, id: DeviceId) -> Result<Vec<Digest>, VirtError> {
        self.reachable(caller, id)?;
        Ok(self
            .devices
            .get_mut(&id)
            .expect("checked")
            .switch
            .take_digests())
    }

    /// Whole-switch counters.
    pub fn stats(&self) -> VirtStats {
        self.stats
    }

    /// Fault injection for isolation tests: the device panics inside its processing when the
    /// `after`-th next packet enters it (1 = the next one).
    pub fn inject_panic(&mut self, id: DeviceId, after: u64) -> Result<(), VirtError> {
        let d = self
            .devices
            .get_mut(&id)
            .ok_or(VirtError::NoSuchDevice(id))?;
        d.fault_in = Some(after.max(1));
        d.refresh_lane();
        self.faults_armed = true;
        Ok(())
    }

    /// Output buffers in device `id`'s pool (`tern_dataplane::Switch::spare_buffers`): its
    /// next transmitted frames' buffers. `None` for an unknown device.
    pub fn spare_buffers(&self, id: DeviceId) -> Option<usize> {
        self.devices.get(&id).map(|d| d.switch.spare_buffers())
    }

    // ------------------------------------------------------------------ topology

    /// The live topology.
    pub fn topology(&self) -> &Topology {
        &self.topo
    }

    fn validate(&self, t: &Topology) -> Result<(), VirtError> {
        validate_topology(t, |d| self.devices.contains_key(&d))
    }

    /// Replace the whole topology (validated first; on error nothing changes).
    pub fn set_topology(&mut self, t: Topology) -> Result<(), VirtError> {
        self.validate(&t)?;
        for d in self.devices.values_mut() {
            d.compile(&t);
        }
        self.topo = t;
        self.reorder();
        Ok(())
    }

    /// Add one classifier rule.
    pub fn add_rule(&mut self, rule: Rule) -> Result<(), VirtError> {
        let mut t = self.topo.clone();
        t.rules.push(rule);
        self.set_topology(t)
    }

    /// Change the classifier rules in one call ([`with_rules`]: the rules numbered `remove`
    /// taken out, then `add` appended): one validation and one compile of the classifier for
    /// the whole batch; on an error nothing changes.
    pub fn update_rules(&mut self, remove: &[usize], add: &[Rule]) -> Result<(), VirtError> {
        let t = with_rules(&self.topo, remove, add)?;
        self.set_topology(t)
    }

    /// Map one virtual port of a device.
    pub fn map_port(&mut self, id: DeviceId, vport: Port, target: Target) -> Result<(), VirtError> {
        if !self.devices.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        let mut t = self.topo.clone();
        t.port_maps.entry(id).or_default().insert(vport, target);
        self.set_topology(t)
    }

    /// Make a device's virtual port tagged with VLAN `vid` (`None`: untagged); see
    /// [`Topology::vlans`].
    pub fn tag_port(
        &mut self,
        id: DeviceId,
        vport: Port,
        vid: Option<u16>,
    ) -> Result<(), VirtError> {
        if !self.devices.contains_key(&id) {
            return Err(VirtError::NoSuchDevice(id));
        }
        let t = with_tag(&self.topo, id, vport, vid);
        self.set_topology(t)
    }

    /// Store the live topology as snapshot `name` (replacing one of that name).
    pub fn save_snapshot(&mut self, name: &str) {
        self.snapshots.insert(name.to_string(), self.topo.clone());
    }

    /// Store `t` as snapshot `name` without activating it.
    pub fn store_snapshot(&mut self, name: &str, t: Topology) {
        self.snapshots.insert(name.to_string(), t);
    }

    /// Make snapshot `name` the live topology (validated against today's devices).
    pub fn activate_snapshot(&mut self, name: &str) -> Result<(), VirtError> {
        let t = self
            .snapshots
            .get(name)
            .cloned()
            .ok_or_else(|| VirtError::NoSuchSnapshot(name.to_string()))?;
        self.set_topology(t)
    }

    fn reorder(&mut self) {
        self.cls = Classifier::new(&self.topo.rules);
    }

    /// (device, virtual ingress port) of a packet arriving on physical `port`.
    #[inline]
    pub fn classify(&self, port: Port, pkt: &[u8]) -> Option<(DeviceId, Port)> {
        self.cls.classify(port, pkt)
    }

    // ------------------------------------------------------------------ packet path

    /// Process a batch of packets arriving on physical ports, in order; frames leaving on
    /// physical ports are appended to `out` (port = physical port). Give them back with
    /// [`VirtSwitch::recycle_outputs`] to reuse their buffers.
    ///
    /// When every packet of the batch goes to one device (on its own port number, or on
    /// virtual ports a port-only classifier gives), and that device links nowhere, the batch
    /// runs through the device's `Switch::process_batch` in one call, the virtual ports given
    /// to the switch packet by packet without copying the batch (outputs in the same order;
    /// like a native batch, one clock reading per call; a panic quarantines the device,
    /// dropping the rest of its batch).
    pub fn process_batch(&mut self, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        if let [(port, data)] = pkts {
            if self.fast_one(*port, data, out) {
                return;
            }
        }
        self.process_general(pkts, out);
    }

    /// [`VirtSwitch::process_batch`] with the frames that leave on physical ports appended to
    /// `out` as one burst ([`BurstOut`]: back to back in one buffer, a descriptor each, port =
    /// physical port) instead of one `Vec` each: the same frames, in the same order, with the
    /// same counters; there is nothing to give back (clear `out` once they are sent).
    ///
    /// When every packet goes to one device that links nowhere (the case where
    /// `process_batch` makes one call into the device), the device's switch runs the batch
    /// as one burst (`Switch::process_burst`: on the generated lane the lane context is set
    /// once and the frames are deparsed straight into `out`), the virtual ports given to it
    /// in one pass over the batch, and the descriptors' ports are renumbered virtual →
    /// physical in place; a descriptor's `pkt` is then its packet's index in `pkts`. A panic
    /// quarantines the device and takes back the burst's frames. A batch into a chain runs
    /// hop by hop as bursts while each pass's frames all cross one link
    /// ([`VirtSwitch::burst_chain`]); an armed fault ([`VirtSwitch::inject_panic`]) fires
    /// inside these fast paths, as a real panic in the switch's burst would. Any other batch
    /// (several devices, tagged ports, a device in quarantine, a pass with frames for several
    /// targets) runs as in
    /// `process_batch`, its frames then copied into `out`. Past a single device, `pkt` does
    /// not name the arriving packet (`u32::MAX` for copied frames, the frame's index in the
    /// last device's pass for a chain's burst).
    pub fn process_burst(&mut self, pkts: &[(Port, &[u8])], out: &mut BurstOut) {
        if !pkts.is_empty() {
            match self.batch_device(pkts) {
                Some((id, vports, true)) => return self.burst_device(id, vports, pkts, out),
                Some((id, vports, false))
                    if self.devices.get(&id).is_some_and(Device::burst_ok) =>
                {
                    // A chain's entry (links, no tags or quarantine): passes of up to
                    // CHUNK, as `process_batch` runs it.
                    for c in pkts.chunks(CHUNK) {
                        self.burst_chain(id, vports, c, out);
                    }
                    if !self.links.is_empty() {
                        self.burst_drain(out);
                    }
                    return;
                }
                _ => {}
            }
        }
        self.burst_general(pkts, out);
    }

    /// [`VirtSwitch::process_burst`] of a batch entering device `id`, which links to others:
    /// each device runs the previous one's frames as one burst while every frame of a pass
    /// crosses one link (within the hop budget) into a device with no tags or quarantine
    /// (an armed fault fires inside) — a chain's pass, as `process_batch` runs it at once
    /// ([`VirtSwitch::run_chained`]) — and a device that links nowhere writes its burst into
    /// `out`, renumbered. A pass with frames for several targets goes on as on the general
    /// path ([`VirtSwitch::burst_mixed`]).
    fn burst_chain(
        &mut self,
        id: DeviceId,
        vports: Vports,
        pkts: &[(Port, &[u8])],
        out: &mut BurstOut,
    ) {
        let mut bursts = std::mem::take(&mut self.chain_bursts);
        let (mut id, mut vport, mut hops) = (id, 0, 0u32);
        loop {
            let depth = hops as usize;
            if bursts.len() <= depth {
                bursts.resize_with(depth + 1, BurstOut::new);
            }
            let (before, rest) = bursts.split_at_mut(depth);
            let mut refs = relifetime(std::mem::take(&mut self.burst_refs));
            let input: &[(Port, &[u8])] = match (depth, vports) {
                (0, Vports::Same) => pkts,
                (0, Vports::On(v)) => {
                    refs.extend(pkts.iter().map(|&(_, d)| (v, d)));
                    &refs
                }
                (0, Vports::Table) => {
                    let t = self.cls.by_port.as_ref();
                    refs.extend(
                        pkts.iter()
                            .map(|&(p, d)| (t.and_then(|t| t.get(p)).map_or(p, |(_, v)| v), d)),
                    );
                    &refs
                }
                _ => {
                    refs.extend(before[depth - 1].iter().map(|(_, _, d)| (vport, d)));
                    &refs
                }
            };
            let n = input.len() as u64;
            let Some(dev) = self.devices.get_mut(&id) else {
                self.stats.dangling += n;
                self.burst_refs = relifetime(refs);
                break;
            };
            if dev.quarantine.is_some() {
                // A panic in an earlier pass of this burst (the entry's previous chunk).
                dev.stats.quarantine_drops += n;
                self.burst_refs = relifetime(refs);
                break;
            }
            dev.stats.packets_in += n;
            let last = !dev.has_links;
            let dst: &mut BurstOut = if last { &mut *out } else { &mut rest[0] };
            if !last {
                dst.clear();
            }
            let start = dst.len();
            let fault = dev.fault_at(n);
            let sw = &mut dev.switch;
            let r = catch_unwind(AssertUnwindSafe(|| burst_or_fault(sw, input, dst, fault)));
            self.burst_refs = relifetime(refs);
            if let Err(e) = r {
                dst.truncate(start);
                self.quarantine_after_panic(id, panic_message(e), 0, &mut Vec::new());
                break;
            }
            if last {
                Self::burst_to_phys(dev, start, out);
                break;
            }
            let pass = &rest[0];
            let Some(first) = pass.descs().first() else {
                break;
            };
            let t = dev.target(first.port);
            // `one_link`'s conditions: two frames or more, no frame waiting on a link.
            let next = match t {
                Target::Link { device, vport }
                    if hops < self.max_hops
                        && pass.len() >= 2
                        && self.links.is_empty()
                        && dev.tags.is_empty()
                        && pass
                            .descs()
                            .iter()
                            .all(|d| d.port == first.port || dev.target(d.port) == t)
                        && self.devices.get(&device).is_some_and(Device::burst_ok) =>
                {
                    Some((device, vport))
                }
                _ => None,
            };
            let Some((next, v)) = next else {
                // The pass ends here: renumbered in place while its frames go to physical
                // ports (a chain's last device usually links back: it has links), the CPU's
                // and drops taken out; frames for links go on through the general path.
                let Some(dev) = self.devices.get_mut(&id) else {
                    break;
                };
                let pass = &mut rest[0];
                let phys = &dev.phys;
                let other =
                    pass.descs_mut()
                        .iter_mut()
                        .position(|d| match phys.get(d.port as usize) {
                            Some(&p) if p != NO_PHYS => {
                                d.port = p;
                                false
                            }
                            _ => true,
                        });
                if let Some(k) = other {
                    let linked = pass.descs()[k..]
                        .iter()
                        .any(|d| matches!(dev.target(d.port), Target::Link { .. }));
                    if linked {
                        self.burst_mixed(id, hops, k, pass, out);
                        break;
                    }
                    Self::burst_others(dev, k, pass);
                }
                dev.stats.to_phys += pass.len() as u64;
                if out.is_empty() {
                    // The pass becomes the caller's burst (the memory changes hands).
                    std::mem::swap(out, pass);
                } else {
                    for (p, i, d) in pass.iter() {
                        out.push_copy(p, i, d);
                    }
                }
                break;
            };
            if let Some(d) = self.devices.get_mut(&id) {
                d.stats.to_links += rest[0].len() as u64;
            }
            (id, vport, hops) = (next, v, hops + 1);
        }
        self.chain_bursts = bursts;
    }

    /// A pass of a burst chain that does not go on as one (frames for several targets, a
    /// single frame, frames already waiting on links, a device the chain does not take):
    /// device `id`'s frames of hop `hops` mapped as on the general path
    /// ([`VirtSwitch::map_outputs`]: physical ports copied into `out` with `pkt` =
    /// `u32::MAX`, links queued for [`VirtSwitch::burst_drain`], CPU, drop), each copied into
    /// a buffer of its own first (the link frames' buffers then go to the device's pool).
    /// The pass's first `done` frames are already renumbered to physical ports.
    #[cold]
    #[inline(never)]
    fn burst_mixed(
        &mut self,
        id: DeviceId,
        hops: u32,
        done: usize,
        pass: &BurstOut,
        out: &mut BurstOut,
    ) {
        for (port, _, d) in pass.iter().take(done) {
            out.push_copy(port, u32::MAX, d);
        }
        if let Some(d) = self.devices.get_mut(&id) {
            d.stats.to_phys += done as u64;
        }
        self.burst_via_frames(out, |vs, frames| {
            frames.extend(pass.iter().skip(done).map(|(port, _, d)| OutputPacket {
                port,
                data: d.to_vec(),
            }));
            vs.map_outputs(id, 0, hops, frames);
        });
    }

    /// The frames a burst chain left on links, hop by hop as `process_batch` runs them
    /// ([`VirtSwitch::drain_links`]), the frames that come out copied into `out`.
    #[cold]
    #[inline(never)]
    fn burst_drain(&mut self, out: &mut BurstOut) {
        self.burst_via_frames(out, |vs, frames| vs.drain_links(frames));
    }

    /// Frames made the `process_batch` way into `out`: `fill` puts them into the burst's
    /// frame list (the record of the caller's own frames set aside meanwhile and kept), they
    /// are copied into `out` with `pkt` = `u32::MAX` and their buffers given back.
    fn burst_via_frames(
        &mut self,
        out: &mut BurstOut,
        fill: impl FnOnce(&mut Self, &mut Vec<OutputPacket>),
    ) {
        let origins = std::mem::take(&mut self.origins);
        let total = std::mem::take(&mut self.origin_total);
        let mut frames = std::mem::take(&mut self.burst_frames);
        fill(self, &mut frames);
        for o in &frames {
            out.push_copy(o.port, u32::MAX, &o.data);
        }
        self.recycle_outputs(&mut frames);
        self.burst_frames = frames;
        self.origins = origins;
        self.origin_total = total;
    }

    /// [`VirtSwitch::process_burst`] of a batch for one plain device `id`.
    fn burst_device(
        &mut self,
        id: DeviceId,
        vports: Vports,
        pkts: &[(Port, &[u8])],
        out: &mut BurstOut,
    ) {
        let mut refs = relifetime(std::mem::take(&mut self.burst_refs));
        let input: &[(Port, &[u8])] = match vports {
            Vports::Same => pkts,
            Vports::On(v) => {
                refs.extend(pkts.iter().map(|&(_, d)| (v, d)));
                &refs
            }
            Vports::Table => {
                let t = self.cls.by_port.as_ref();
                refs.extend(
                    pkts.iter()
                        .map(|&(p, d)| (t.and_then(|t| t.get(p)).map_or(p, |(_, v)| v), d)),
                );
                &refs
            }
        };
        let Some(dev) = self.devices.get_mut(&id) else {
            self.stats.dangling += pkts.len() as u64;
            self.burst_refs = relifetime(refs);
            return;
        };
        dev.stats.packets_in += pkts.len() as u64;
        let start = out.len();
        let fault = dev.fault_at(pkts.len() as u64);
        let sw = &mut dev.switch;
        let r = catch_unwind(AssertUnwindSafe(|| burst_or_fault(sw, input, out, fault)));
        self.burst_refs = relifetime(refs);
        if let Err(e) = r {
            out.truncate(start);
            self.quarantine_after_panic(id, panic_message(e), 0, &mut Vec::new());
            return;
        }
        Self::burst_to_phys(dev, start, out);
    }

    /// The port map over a device's frames in `out` from `start` on (its last pass): the
    /// leading frames for physical ports (usually all of them) renumbered in place by one load
    /// each; the others (CPU, drop, links) taken out from the first of them on.
    #[inline(always)]
    fn burst_to_phys(dev: &mut Device, start: usize, out: &mut BurstOut) {
        let phys = &dev.phys;
        let tail = &mut out.descs_mut()[start..];
        let renumber = |d: &mut tern_dataplane::OutDesc| match phys.get(d.port as usize) {
            Some(&p) if p != NO_PHYS => {
                d.port = p;
                false
            }
            _ => true,
        };
        let (lo, n) = (dev.same_lo, dev.same_len);
        // Every descriptor on a port that keeps its number: nothing to renumber (one
        // comparison each, no branch per descriptor); else the renumbering pass (which maps
        // those ports to themselves).
        let other = if n > 0
            && tail
                .iter()
                .fold(0u32, |a, d| a | u32::from(d.port.wrapping_sub(lo) >= n))
                == 0
        {
            None
        } else {
            tail.iter_mut().position(renumber)
        };
        if let Some(k) = other {
            Self::burst_others(dev, start + k, out);
        }
        dev.stats.to_phys += (out.len() - start) as u64;
    }

    /// The frames of a plain device's burst from the `first`-th on, through the port map:
    /// physical ports renumbered, the CPU's frames queued (copied), the others dropped
    /// (counted).
    #[cold]
    #[inline(never)]
    fn burst_others(dev: &mut Device, first: usize, out: &mut BurstOut) {
        out.retain_from(first, |d, data| match dev.target(d.port) {
            Target::Phys(p) => {
                d.port = p;
                true
            }
            Target::Cpu => {
                dev.stats.to_cpu += 1;
                dev.cpu.push((d.port, data.to_vec()));
                false
            }
            _ => {
                dev.stats.dropped += 1;
                false
            }
        });
    }

    /// [`VirtSwitch::process_burst`] of any other batch: `process_batch`'s path, the frames
    /// copied into `out` and given back (the record of the caller's own frames kept).
    #[inline(never)]
    fn burst_general(&mut self, pkts: &[(Port, &[u8])], out: &mut BurstOut) {
        self.burst_via_frames(out, |vs, frames| vs.process_batch(pkts, frames));
    }

    /// One packet per call with the give-back folded in: `out` holds the frames the previous
    /// call appended (this method's or [`VirtSwitch::process_batch`]'s) and the caller is
    /// done with; they go back to the devices that produced them (as
    /// [`VirtSwitch::recycle_outputs`] does), then the packet runs as
    /// `process_batch(&[(port, data)], out)` would run it (same outputs, same counters). For a
    /// caller that handles each packet's outputs before the next packet (a receive loop one
    /// frame at a time), it is the one-packet lane without the separate give-back: when the
    /// previous call left one frame of the device this packet goes to (the common case), the
    /// buffer goes back through the device already in hand and the record of where the frames
    /// came from stays as it is.
    #[inline]
    pub fn process_next(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        self.next_lane::<true>(port, data, out, &mut None);
    }

    /// Packets one per call, as a loop of [`VirtSwitch::process_next`] calls would run them
    /// (same outputs, same counters, packet by packet), inside **one** panic boundary for the
    /// whole loop instead of one per packet: `sent(out)` is called after each packet with
    /// the frames it left in `out` (given back at the next packet, as `process_next` does;
    /// the last packet's stay in `out`). A panic inside a device quarantines that device as
    /// it would in `process_next` (the frames of the packet that panicked are taken back,
    /// `sent` sees none for it), and the loop goes on with the next packet: the packets before
    /// it were done, the later ones run (those for the quarantined device are dropped and
    /// counted). A panic outside a device (in `sent`, or in the iterator) is not caught.
    /// Returns the number of packets run.
    pub fn process_each<'a>(
        &mut self,
        pkts: impl IntoIterator<Item = (Port, &'a [u8])>,
        out: &mut Vec<OutputPacket>,
        mut sent: impl FnMut(&[OutputPacket]),
    ) -> u64 {
        let mut pkts = pkts.into_iter();
        let mut done = 0u64;
        // The device running a packet on the session's lane (set around the call).
        let mut running: Option<DeviceId> = None;
        loop {
            let r = catch_unwind(AssertUnwindSafe(|| {
                // The last packet's way on the lane, while the next ones take the same (made
                // afresh after a caught panic: this closure runs again).
                let mut memo = LaneMemo::NONE;
                for (port, data) in pkts.by_ref() {
                    memo = if u64::from(port) == memo.port {
                        self.memo_lane(memo, data, out, &mut running)
                    } else {
                        self.next_lane::<false>(port, data, out, &mut running)
                    };
                    done += 1;
                    sent(out);
                }
            }));
            let Err(e) = r else {
                return done;
            };
            // The device that panicked: a chain's hop ([`HopMark`]) or the device `running`
            // names; neither (a panic outside every device) is not caught.
            let hop = std::mem::replace(&mut self.hop_mark, HopMark::NONE).get();
            let id = match (hop, running.take()) {
                (Some((next, _, _)), _) => next,
                (None, Some(id)) => id,
                (None, None) => std::panic::resume_unwind(e),
            };
            // As `process_next`'s lane after a panic: the packet's frames taken back, the
            // record of origins started afresh.
            self.origins.clear();
            self.origin_total = 0;
            if let Some((_, from, in_spare)) = hop {
                self.give_back_hop(out, from, in_spare);
            }
            self.quarantine_after_panic(id, panic_message(e), 0, out);
            done += 1;
            sent(out);
        }
    }

    /// One packet of a [`VirtSwitch::process_each`] session that came in on the port the
    /// previous packet came in on, when that one ran on the lane ([`LaneMemo`]): the previous
    /// frame back to the device (`out` holds it, and the record of origins names that device
    /// alone), the packet into it, its one frame mapped to the physical port, as
    /// [`VirtSwitch::next_lane`] does, without asking again what nothing in the session can
    /// have changed since (the classifier's port table, whether the device takes the lane).
    #[inline(always)]
    fn memo_lane(
        &mut self,
        m: LaneMemo,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        running: &mut Option<DeviceId>,
    ) -> LaneMemo {
        if m.last != m.dev {
            return self.memo_chain(m, data, out, running);
        }
        let Some(Some(dev)) = self.devices.slots.get_mut(m.dev as usize) else {
            return self.next_lane::<false>(m.port as Port, data, out, running);
        };
        dev.switch.recycle_outputs(out);
        dev.run_in_session(m.vport, data, out, running);
        if dev.one_to_phys(out, 0) {
            return m;
        }
        m.ending_at(self.lane_again_other::<false>(m.dev, Ok(()), out))
    }

    /// [`VirtSwitch::memo_lane`] when the previous packet's way was a chain on the lane: its
    /// frame back to the chain's last device, the packet into the first, and the chain's hops
    /// straight on ([`VirtSwitch::run_hops`]), without first asking whether the first device's
    /// frame leaves by a physical port (it left by a link last time; when it does not now,
    /// the rest of the lane maps it, [`VirtSwitch::lane_again_other`]).
    #[inline(always)]
    fn memo_chain(
        &mut self,
        m: LaneMemo,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        running: &mut Option<DeviceId>,
    ) -> LaneMemo {
        let Some(Some(last)) = self.devices.slots.get_mut(m.last as usize) else {
            return self.next_lane::<false>(m.port as Port, data, out, running);
        };
        last.switch.recycle_outputs(out);
        // `out` is empty: the record of origins starts afresh (the chain's end notes its
        // frame).
        self.origins.clear();
        self.origin_total = 0;
        let Some(Some(dev)) = self.devices.slots.get_mut(m.dev as usize) else {
            return self.next_lane::<false>(m.port as Port, data, out, running);
        };
        dev.run_in_session(m.vport, data, out, running);
        match dev.lane_link(out, 0, self.max_hops) {
            Some(link) => m.ending_at(self.run_hops::<false>(m.dev, link, 0, out)),
            None => m.ending_at(self.lane_again_other::<false>(m.dev, Ok(()), out)),
        }
    }

    /// [`VirtSwitch::process_next`] (`GUARD`: with its own panic boundary around the device)
    /// or one packet of [`VirtSwitch::process_each`] (no boundary: the session's catches the
    /// panic; `running` holds the device while it runs the packet). Returns the way the packet
    /// took when it ran on the lane to one frame on a physical port (else [`LaneMemo::NONE`]).
    #[inline(always)]
    fn next_lane<const GUARD: bool>(
        &mut self,
        port: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        running: &mut Option<DeviceId>,
    ) -> LaneMemo {
        if let ([(prev, 1)], 1, 1) = (&self.origins[..], self.origin_total, out.len()) {
            let prev = *prev;
            if let Some(Some((id, vport))) = self.cls.by_port.as_ref().map(|t| t.get(port)) {
                // The previous frame came from another device (the last of a chain, or
                // another tenant): back to it first, and the record names this packet's
                // device from now on.
                let other = id != prev;
                if other && self.give_back_to(prev, id, out) {
                    self.origins[0].0 = id;
                }
                match self.devices.slots.get_mut(id as usize) {
                    Some(Some(dev)) if dev.lane_ok() && (!other || out.is_empty()) => {
                        // The previous frame back to this device (when it came from it),
                        // then the lane with the record of origins left as it is.
                        if !other {
                            dev.switch.recycle_outputs(out);
                        }
                        let r = if GUARD {
                            dev.stats.packets_in += 1;
                            let sw = &mut dev.switch;
                            catch_unwind(AssertUnwindSafe(|| sw.process_packet(vport, data, out)))
                        } else {
                            dev.run_in_session(vport, data, out, running);
                            Ok(())
                        };
                        let way = LaneMemo {
                            port: port.into(),
                            dev: id,
                            vport,
                            last: id,
                        };
                        if r.is_ok() && dev.one_to_phys(out, 0) {
                            return way;
                        }
                        return way.ending_at(self.lane_again_other::<GUARD>(id, r, out));
                    }
                    _ => {}
                }
            }
        }
        if !GUARD && self.faults_armed {
            self.fire_in_session(port, data, out, running);
        }
        self.next_general(port, data, out);
        LaneMemo::NONE
    }

    /// An injected fault ([`VirtSwitch::inject_panic`]) that fires on this packet of a
    /// [`VirtSwitch::process_each`] session panics here, as a panic inside the device on the
    /// session's lane would (the session's boundary catches it): the previous frames given
    /// back, the packet counted in, the device marked as running. Returns when the packet's
    /// device (by the classifier's port table) has no fault firing on it.
    #[cold]
    #[inline(never)]
    fn fire_in_session(
        &mut self,
        port: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        running: &mut Option<DeviceId>,
    ) {
        let Some((id, _)) = self.classify(port, data) else {
            return;
        };
        let fires = self
            .devices
            .get(&id)
            .is_some_and(|d| d.fault_in == Some(1) && d.quarantine.is_none() && d.tags.is_empty());
        if fires {
            self.recycle_outputs(out);
            if let Some(d) = self.devices.get_mut(&id) {
                d.stats.packets_in += 1;
            }
            *running = Some(id);
            panic!("injected fault");
        }
    }

    /// The rest of [`VirtSwitch::process_next`]'s lane: anything but one frame to a physical
    /// port (the record of origins starts afresh, as after a give-back). Returns the device
    /// that sent the packet's one frame to a physical port when a chain on the lane ended so
    /// ([`VirtSwitch::fast_hops`]).
    #[inline(never)]
    fn lane_again_other<const GUARD: bool>(
        &mut self,
        id: DeviceId,
        r: std::thread::Result<()>,
        out: &mut Vec<OutputPacket>,
    ) -> Option<DeviceId> {
        self.origins.clear();
        self.origin_total = 0;
        match r {
            Err(e) => {
                self.quarantine_after_panic(id, panic_message(e), 0, out);
                None
            }
            Ok(()) => self.fast_hops::<GUARD>(id, 0, out),
        }
    }

    /// [`VirtSwitch::process_next`]'s lane for a packet of device `id` when the previous call
    /// left one frame of device `prev` (another device): when the lane takes `id`, that frame
    /// goes back to `prev` (empties `out`) and true is returned; otherwise nothing is done.
    #[inline(always)]
    fn give_back_to(&mut self, prev: DeviceId, id: DeviceId, out: &mut Vec<OutputPacket>) -> bool {
        let slots = &mut self.devices.slots;
        if !matches!(slots.get(id as usize), Some(Some(d)) if d.lane_ok()) {
            return false;
        }
        match slots.get_mut(prev as usize) {
            Some(Some(p)) => {
                p.switch.recycle_outputs(out);
                true
            }
            _ => false,
        }
    }

    /// The frame a chain's device was running when a [`VirtSwitch::process_each`] session
    /// caught a panic ([`HopMark`], `from` and `in_spare` of [`HopMark::get`]): its buffer
    /// back to the device that produced it, and the frames the panicking device had written
    /// into [`VirtSwitch::hop_out`] moved to `out` (from where they go back to that device
    /// with the rest of the packet's).
    #[cold]
    fn give_back_hop(&mut self, out: &mut Vec<OutputPacket>, from: DeviceId, in_spare: bool) {
        let frame = if in_spare {
            self.hop_out.pop()
        } else {
            out.pop()
        };
        if let (Some(f), Some(d)) = (frame, self.devices.get_mut(&from)) {
            d.switch.recycle_buffer(f.data);
        }
        out.append(&mut self.hop_out);
    }

    /// [`VirtSwitch::process_next`] outside the lane: give back, then the packet as a batch
    /// of one.
    #[inline(never)]
    fn next_general(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        self.recycle_outputs(out);
        self.process_batch(&[(port, data)], out);
    }

    /// [`VirtSwitch::process_batch`] past the one-packet fast lane (kept out of line so that
    /// the lane's code stays small).
    #[inline(never)]
    fn process_general(&mut self, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        if let [(port, data)] = pkts {
            self.process_one(*port, data, out);
            return;
        }
        if pkts.len() > 1 {
            if let Some((id, vports, plain)) = self.batch_device(pkts) {
                if plain {
                    return self.run_device(id, vports.input(pkts), 0, out);
                }
                // One device with links (or quarantined): its passes of up to CHUNK, then the
                // links hop by hop.
                for c in pkts.chunks(CHUNK) {
                    self.run_device(id, vports.input(c), 0, out);
                }
                return self.drain_links(out);
            }
        }
        self.run_grouped(pkts, out);
    }

    /// Run packets already classified to device `id`, each on its virtual ingress port (what a
    /// scheduler that classified them on arrival does: they run on that device whatever the
    /// classifier says by now). Outputs as [`VirtSwitch::process_batch`]; a device that no
    /// longer exists counts them as `dangling`.
    pub fn process_on(
        &mut self,
        id: DeviceId,
        pkts: &[(Port, &[u8])],
        out: &mut Vec<OutputPacket>,
    ) {
        self.run_entry(id, pkts, out);
        self.drain_links(out);
    }

    /// Take devices out (state, port map, counters and all) to move them to another
    /// `VirtSwitch`; their rules and port maps leave this one's topology. Unknown ids are
    /// skipped.
    #[allow(clippy::type_complexity)]
    pub(crate) fn take_devices(
        &mut self,
        ids: &[DeviceId],
    ) -> (Vec<Device>, BTreeMap<DeviceId, BTreeMap<Port, Target>>) {
        let taken: Vec<Device> = ids
            .iter()
            .filter_map(|id| self.devices.remove(id))
            .collect();
        self.topo.rules.retain(|r| !ids.contains(&r.device));
        self.topo.vlans.retain(|d, _| !ids.contains(d));
        let mut maps = BTreeMap::new();
        for id in ids {
            if let Some(m) = self.topo.port_maps.remove(id) {
                maps.insert(*id, m);
            }
        }
        self.reorder();
        (taken, maps)
    }

    /// Put devices taken from another `VirtSwitch` in, with their port maps.
    pub(crate) fn put_devices(
        &mut self,
        devices: Vec<Device>,
        maps: BTreeMap<DeviceId, BTreeMap<Port, Target>>,
    ) {
        for mut d in devices {
            if d.board.is_none() && self.board.is_some() {
                d.board = self.board.clone();
                d.reported = false;
            }
            d.switch.set_buffer_quota(self.buffer_quota.of(&d.quotas));
            self.devices.insert(d.id, d);
        }
        self.topo.port_maps.extend(maps);
        for d in self.devices.values_mut() {
            let tags = std::mem::take(&mut d.tags);
            d.set_ports(compile_ports(self.topo.port_maps.get(&d.id)));
            // The VLAN tags travel compiled with the device.
            d.tags = tags;
            d.refresh_lane();
        }
    }

    /// The stored snapshots.
    pub(crate) fn snapshots(&self) -> &HashMap<String, Topology> {
        &self.snapshots
    }

    /// Add counters gathered elsewhere (the workers' front).
    pub(crate) fn add_stats(&mut self, s: VirtStats) {
        self.stats.unclassified += s.unclassified;
        self.stats.dangling += s.dangling;
        self.stats.quarantined_port += s.quarantined_port;
    }

    /// For a caller that hands the frames appended so far to someone else for good (a worker
    /// sending them to the front): each device that produced some of them is owed as many
    /// buffers, paid from `pool` (its next output buffers) while the pool lasts and the
    /// device's own pool has room; what cannot be paid now stays owed for a later call (the
    /// front gives a storm's frames back later than the storm sends them: paid only from the
    /// buffers at hand, its pool would shrink turn after turn and its copies be dropped). A
    /// device whose pool is full is owed nothing more. The rest of `pool` is the caller's
    /// to hand on, never freed here.
    pub(crate) fn feed_producers(&mut self, pool: &mut Vec<Vec<u8>>) {
        for &(id, n) in &self.origins {
            // One entry per device, made the first time it sends: no allocation per packet.
            *self.owed.entry(id).or_default() += n as usize;
        }
        self.origins.clear();
        self.origin_total = 0;
        for (id, owed) in self.owed.iter_mut() {
            if *owed == 0 {
                continue;
            }
            let Some(d) = self.devices.get_mut(id) else {
                *owed = 0;
                continue;
            };
            let give = (*owed).min(d.switch.buffer_room()).min(pool.len());
            for b in pool.drain(pool.len() - give..) {
                d.switch.recycle_buffer(b);
            }
            // Never owed more than its pool takes.
            *owed = (*owed - give).min(d.switch.buffer_room());
            if pool.is_empty() {
                break;
            }
        }
    }

    /// Output buffers owed to this switch's devices and not paid yet (see
    /// [`VirtSwitch::feed_producers`]).
    pub(crate) fn buffers_owed(&self) -> usize {
        self.owed.values().sum()
    }

    /// The hop budget.
    pub(crate) fn max_hops(&self) -> u32 {
        self.max_hops
    }

    /// The device every packet of a batch goes to, if one (see [`VirtSwitch::process_batch`]),
    /// how its packets find their virtual port numbers (when they differ from the physical
    /// ones: only with a port-only classifier, whose table gives them cheaply), and whether
    /// the device is plain (no links, tags or quarantine: the batch is all its work; an armed
    /// fault fires inside it).
    /// `None` also for a device with VLAN-tagged ports (tags are stripped packet by packet).
    fn batch_device(&self, pkts: &[(Port, &[u8])]) -> Option<(DeviceId, Vports, bool)> {
        let (port, data) = pkts[0];
        let (id, vport) = self.classify(port, data)?;
        let (same, vports) = match &self.cls.by_port {
            // Only a catch-all rule keeping port numbers: every packet goes to `id`.
            Some(t) if t.ports.is_empty() && vport == port => (true, Vports::Same),
            // Every packet on the first one's port (a chain's entry): one comparison each.
            // (Or-ed differences: no branch per packet.)
            Some(_) if pkts[1..].iter().fold(0, |a, &(p, _)| a | (p ^ port)) == 0 => (
                true,
                if vport == port {
                    Vports::Same
                } else {
                    Vports::On(vport)
                },
            ),
            Some(t) => {
                let mut renumber = vport != port;
                let same = pkts[1..].iter().all(|&(p, _)| match t.get(p) {
                    Some((d, v)) => {
                        renumber |= v != p;
                        d == id
                    }
                    None => false,
                });
                (
                    same,
                    if renumber {
                        Vports::Table
                    } else {
                        Vports::Same
                    },
                )
            }
            None => (
                vport == port
                    && pkts[1..]
                        .iter()
                        .all(|&(p, d)| self.classify(p, d) == Some((id, p))),
                Vports::Same,
            ),
        };
        let dev = self.devices.get(&id)?;
        // An armed fault fires inside the device's batch as a real panic would.
        let plain = !dev.has_links && dev.quarantine.is_none();
        (same && dev.tags.is_empty()).then_some((id, vports, plain))
    }

    /// Give transmitted frames back for reuse (empties `out`). Each buffer returns to the
    /// device that produced it when `out` holds exactly the frames [`VirtSwitch::process_batch`]
    /// appended since the last call; otherwise they go to one device. Inlined into the caller:
    /// a call of its own cost a one-per-call caller (`process_batch` of one, then this) ≈ 7
    /// instructions a packet (callgrind, `slice_cost slice`/`fn` with `BATCH=1`).
    #[inline(always)]
    pub fn recycle_outputs(&mut self, out: &mut Vec<OutputPacket>) {
        if let [(id, _)] = self.origins[..] {
            if out.len() == self.origin_total {
                // The common case: every frame from one device, given back in place.
                self.origins.clear();
                self.origin_total = 0;
                if let Some(d) = self.devices.get_mut(&id) {
                    d.switch.recycle_outputs(out);
                    return;
                }
            }
        }
        self.recycle_general(out);
    }

    /// [`VirtSwitch::recycle_outputs`] for frames of several devices (or not as appended).
    #[inline(never)]
    fn recycle_general(&mut self, out: &mut Vec<OutputPacket>) {
        let total = std::mem::take(&mut self.origin_total);
        let runs = std::mem::take(&mut self.origins);
        if out.len() == total {
            // Each run of consecutive frames of one device goes back in one call.
            let mut frames = out.drain(..);
            for &(id, n) in &runs {
                self.recycle.extend(frames.by_ref().take(n as usize));
                match self.devices.get_mut(&id) {
                    Some(d) => d.switch.recycle_outputs(&mut self.recycle),
                    None => self.recycle.clear(),
                }
            }
        } else {
            match self.devices.values_mut().next() {
                Some(d) => d.switch.recycle_outputs(out),
                None => out.clear(),
            }
        }
        self.origins = runs;
        self.origins.clear();
    }

    /// The one-packet fast lane: a classifier by physical port (no rule looks into the frame)
    /// giving the packet to a device with no tagged virtual ports, not quarantined and with no
    /// fault armed. The device runs the packet with one call; a single output to a physical
    /// port is renumbered in place, anything else goes through [`VirtSwitch::map_outputs`] and
    /// the links as on the general path (same outputs, same counters). Returns false, having
    /// done nothing, when the lane does not apply.
    #[inline(always)]
    fn fast_one(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) -> bool {
        let Some(t) = &self.cls.by_port else {
            return false;
        };
        let Some((id, vport)) = t.get(port) else {
            return false;
        };
        // The slot by index (ids past the slots take the general path).
        let Some(Some(dev)) = self.devices.slots.get_mut(id as usize) else {
            return false;
        };
        if !dev.lane_ok() {
            return false;
        }
        let start = out.len();
        dev.stats.packets_in += 1;
        let sw = &mut dev.switch;
        if let Err(e) = catch_unwind(AssertUnwindSafe(|| sw.process_packet(vport, data, out))) {
            self.quarantine_after_panic(id, panic_message(e), start, out);
            return true;
        }
        if dev.one_to_phys(out, start) {
            self.note_origin(id, 1);
            return true;
        }
        self.fast_hops::<true>(id, start, out);
        true
    }

    /// The fast lane past its first device: while the last device sent exactly one frame, over
    /// a link within the hop budget into another device the lane takes, that device runs it at
    /// once (no queue; the frame's buffer then goes back to the device that produced it), and
    /// one frame to a physical port ends the lane. Anything else is mapped and its links run
    /// as on the general path. `GUARD`: each hop under its own panic boundary; else (a
    /// [`VirtSwitch::process_each`] session, whose boundary catches the panic)
    /// [`VirtSwitch::hop_mark`] says the hop while its device runs. Returns the
    /// last device when the lane ended with its one frame to a physical port.
    ///
    /// No frame is moved on the way: a hop's device reads the frame where the previous device
    /// wrote it, and writes its own into the other of two buffers (the caller's `out` and
    /// [`VirtSwitch::hop_out`] take turns), as a native chain's hop reads the previous
    /// switch's output. Taking the frame out first moved a `Vec` onto the stack and read its
    /// pointer back for the next pipeline at once, where `perf annotate` put the hop's
    /// hottest sample (a load of the upper half of a 16-byte store just made).
    #[inline(always)]
    fn fast_hops<const GUARD: bool>(
        &mut self,
        id: DeviceId,
        start: usize,
        out: &mut Vec<OutputPacket>,
    ) -> Option<DeviceId> {
        // The link the one frame takes (the device's port map, looked up once per hop: the
        // next device's own map gives the next link, or the physical port that ends the lane).
        let first = match self.devices.slots.get_mut(id as usize) {
            Some(Some(cur)) => cur.lane_link(out, start, self.max_hops),
            _ => None,
        };
        match first {
            Some(link) => self.run_hops::<GUARD>(id, link, start, out),
            None => {
                self.map_outputs(id, start, 0, out);
                self.drain_links(out);
                None
            }
        }
    }

    /// [`VirtSwitch::fast_hops`] once device `id`'s one frame (`out`'s last, at `start`) takes
    /// `link` (within the hop budget).
    #[inline(never)]
    fn run_hops<const GUARD: bool>(
        &mut self,
        id: DeviceId,
        link: (DeviceId, Port),
        start: usize,
        out: &mut Vec<OutputPacket>,
    ) -> Option<DeviceId> {
        let (next, vport) = link;
        let mut w = Walk {
            id,
            next,
            vport,
            hops: 0,
        };
        let mut lane = HopLane {
            slots: &mut self.devices.slots,
            mark: &mut self.hop_mark,
            faults_armed: self.faults_armed,
            max_hops: self.max_hops,
        };
        let spare = &mut self.hop_out;
        // Two hops a turn, the buffers' roles fixed in each (`out` → `hop_out`, then back):
        // `in_spare` says where the lane left the frames.
        let (end, in_spare) = loop {
            if let Err((end, ran)) = lane.hop::<GUARD, true>(&mut w, out, start, spare, 0) {
                break (end, ran);
            }
            if let Err((end, ran)) = lane.hop::<GUARD, false>(&mut w, spare, 0, out, start) {
                break (end, !ran);
            }
        };
        let (id, hops) = (w.id, w.hops);
        // The frames in flight (or the panicking device's) to the caller's `out`, after the
        // packet's earlier ones (none: the buffers trade places, no frame is copied).
        if in_spare {
            if out.is_empty() {
                std::mem::swap(out, &mut self.hop_out);
            } else {
                out.append(&mut self.hop_out);
            }
        }
        match end {
            HopEnd::Phys => {
                self.note_origin(id, 1);
                return Some(id);
            }
            HopEnd::Other => {}
            HopEnd::Panic(next, e) => {
                self.quarantine_after_panic(next, panic_message(e), start, out);
                return None;
            }
        }
        self.map_outputs(id, start, hops, out);
        self.drain_links(out);
        None
    }

    /// Frames `sent` appended to the caller's `out` by device `id` (for
    /// [`VirtSwitch::recycle_outputs`]).
    #[inline(always)]
    fn note_origin(&mut self, id: DeviceId, sent: u32) {
        self.origin_total += sent as usize;
        match self.origins.last_mut() {
            Some((last, k)) if *last == id => *k += sent,
            _ => self.origins.push((id, sent)),
        }
    }

    /// A panic caught in device `id`: quarantine it and take back the frames it appended to
    /// `out` from `start` on.
    #[cold]
    #[inline(never)]
    fn quarantine_after_panic(
        &mut self,
        id: DeviceId,
        msg: String,
        start: usize,
        out: &mut Vec<OutputPacket>,
    ) {
        let Some(dev) = self.devices.get_mut(&id) else {
            return;
        };
        dev.fault_in = None;
        dev.stats.panics += 1;
        dev.quarantine = Some(format!("panicked while processing a packet: {msg}"));
        dev.refresh_lane();
        self.recycle.extend(out.drain(start..));
        dev.switch.recycle_outputs(&mut self.recycle);
    }

    /// A panic caught in a control job or call of device `id` (run on its worker: a
    /// tenant's posted writes, `VirtWorkers::call`): quarantine it as a packet panic does.
    #[cold]
    #[inline(never)]
    pub(crate) fn quarantine_after_job_panic(&mut self, id: DeviceId, msg: &str) {
        let Some(dev) = self.devices.get_mut(&id) else {
            return;
        };
        dev.stats.panics += 1;
        dev.quarantine = Some(format!("panicked in a control job: {msg}"));
        dev.refresh_lane();
    }

    #[inline(always)]
    fn process_one(&mut self, port: Port, data: &[u8], out: &mut Vec<OutputPacket>) {
        let Some((dev, vport)) = self.classify(port, data) else {
            self.stats.unclassified += 1;
            return;
        };
        self.run_classified(dev, vport, data, out);
    }

    /// Run one packet the classifier gave to (`dev`, `vport`), then the frames it sends over
    /// links.
    #[inline(always)]
    fn run_classified(
        &mut self,
        dev: DeviceId,
        vport: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
    ) {
        self.run_device(dev, Input::One(vport, data), 0, out);
        self.drain_links(out);
    }

    /// Run packets that entered from the classifier on device `id` (`pkts` on its virtual
    /// ports): as one batch, or one by one when the device strips VLAN tags on the way in.
    /// The frames it sends over links wait in [`VirtSwitch::links`].
    fn run_entry(&mut self, id: DeviceId, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        match pkts {
            [] => {}
            [(vport, data)] => self.run_device(id, Input::One(*vport, data), 0, out),
            _ if self.devices.get(&id).is_some_and(|d| !d.tags.is_empty()) => {
                for &(vport, data) in pkts {
                    self.run_device(id, Input::One(vport, data), 0, out);
                }
            }
            _ => self.run_device(id, Input::Batch(pkts), 0, out),
        }
    }

    /// A batch for several devices (or for a device with links, tags or in quarantine): each device, in the order of its first packet, runs all of its packets as
    /// one batch (chunks of [`CHUNK`] on the stack, in arrival order), then the frames sent
    /// over links run hop by hop ([`VirtSwitch::drain_links`]).
    fn run_grouped(&mut self, pkts: &[(Port, &[u8])], out: &mut Vec<OutputPacket>) {
        let mut hits = std::mem::take(&mut self.hits);
        hits.clear();
        for &(port, data) in pkts {
            let hit = self.classify(port, data);
            if hit.is_none() {
                self.stats.unclassified += 1;
            }
            hits.push(hit);
        }
        let mut first = 0;
        while first < hits.len() {
            let Some((id, _)) = hits[first] else {
                first += 1;
                continue;
            };
            let mut chunk: [(Port, &[u8]); CHUNK] = [(0, &[]); CHUNK];
            let mut k = 0;
            for j in first..hits.len() {
                match hits[j] {
                    Some((d, vport)) if d == id => {
                        hits[j] = None;
                        chunk[k] = (vport, pkts[j].1);
                        k += 1;
                        if k == CHUNK {
                            self.run_entry(id, &chunk, out);
                            k = 0;
                        }
                    }
                    _ => {}
                }
            }
            self.run_entry(id, &chunk[..k], out);
            first += 1;
        }
        self.hits = hits;
        self.drain_links(out);
    }

    /// Run the frames sent over links until none is left, **one hop at a time**: the frames
    /// the passes of one hop sent (in [`VirtSwitch::links`]) form the next hop, where each
    /// receiving device runs all of its frames as one batch (chunks of [`CHUNK`], in the order
    /// they were sent), and their outputs form the hop after. Each frame's buffer then goes
    /// back to the device that produced it. Order is kept per flow: the frames one device
    /// sends over one link arrive in the order it sent them.
    fn drain_links(&mut self, out: &mut Vec<OutputPacket>) {
        while !self.links.is_empty() {
            let mut wave = std::mem::take(&mut self.wave);
            std::mem::swap(&mut wave, &mut self.links);
            self.draining = true;
            if let [w] = &wave[..] {
                self.run_device(w.device, Input::One(w.vport, &w.data), w.hops, out);
            } else {
                self.run_wave(&mut wave, out);
            }
            self.draining = false;
            // The frames' buffers go back to the devices that produced them (looked up once
            // per run of frames from one device).
            let mut from = None;
            let mut dev = None;
            for w in wave.drain(..) {
                if from != Some(w.from) {
                    from = Some(w.from);
                    dev = self.devices.get_mut(&w.from);
                }
                if let Some(d) = dev.as_deref_mut() {
                    d.switch.recycle_buffer(w.data);
                }
            }
            self.wave = wave;
        }
    }

    /// One hop of [`VirtSwitch::drain_links`] with several frames: each (device, hop count)
    /// in the order of its first frame runs its frames as batches of up to [`CHUNK`].
    fn run_wave(&mut self, wave: &mut [Work], out: &mut Vec<OutputPacket>) {
        let (id, hops) = (wave[0].device, wave[0].hops);
        if wave.iter().all(|w| w.device == id && w.hops == hops) {
            // A chain: every frame of the hop into one device.
            for part in wave.chunks(CHUNK) {
                let mut chunk: [(Port, &[u8]); CHUNK] = [(0, &[]); CHUNK];
                for (slot, w) in chunk.iter_mut().zip(part) {
                    *slot = (w.vport, &w.data);
                }
                match &chunk[..part.len()] {
                    [(vport, data)] => self.run_device(id, Input::One(*vport, data), hops, out),
                    b => self.run_device(id, Input::Batch(b), hops, out),
                }
            }
            return;
        }
        let mut first = 0;
        while first < wave.len() {
            if wave[first].done {
                first += 1;
                continue;
            }
            let (id, hops) = (wave[first].device, wave[first].hops);
            let mut at = first;
            while at < wave.len() {
                // Pick the next chunk's frames (marked as run), then run them.
                let mut idx = [0u32; CHUNK];
                let mut k = 0;
                while at < wave.len() && k < CHUNK {
                    let w = &mut wave[at];
                    if !w.done && w.device == id && w.hops == hops {
                        w.done = true;
                        idx[k] = at as u32;
                        k += 1;
                    }
                    at += 1;
                }
                let mut chunk: [(Port, &[u8]); CHUNK] = [(0, &[]); CHUNK];
                for (slot, &i) in chunk.iter_mut().zip(&idx[..k]) {
                    let w = &wave[i as usize];
                    *slot = (w.vport, &w.data);
                }
                match &chunk[..k] {
                    [] => {}
                    [(vport, data)] => self.run_device(id, Input::One(*vport, data), hops, out),
                    b => self.run_device(id, Input::Batch(b), hops, out),
                }
            }
            first += 1;
        }
    }

    /// Run one device on `input` (virtual ports) and map its outputs through its port map:
    /// the switch appends straight to `out`, frames for physical ports are renumbered in
    /// place, the others (links, CPU, drop) are taken out of `out` in the same pass.
    #[inline(always)]
    fn run_device(
        &mut self,
        id: DeviceId,
        input: Input<'_>,
        hops: u32,
        out: &mut Vec<OutputPacket>,
    ) {
        let n = input.len() as u64;
        let Some(dev) = self.devices.get_mut(&id) else {
            self.stats.dangling += n;
            return;
        };
        if dev.quarantine.is_some() {
            dev.stats.quarantine_drops += n;
            return;
        }
        dev.stats.packets_in += n;
        let start = out.len();
        // An armed fault fires on its packet: inside a batch, after the packets before it ran
        // (their outputs are taken back with the rest of the pass, as after a real panic).
        let fault = dev.fault_at(n);
        // A frame from the classifier on a tagged virtual port loses its tag (links: hops > 0).
        let input = match input {
            Input::One(vport, data) if hops == 0 && !dev.tags.is_empty() => {
                let vid = dev.tag(vport);
                if vid != 0 && outer_vid(data) == Some(vid) {
                    self.strip.clear();
                    self.strip.extend_from_slice(&data[..12]);
                    self.strip.extend_from_slice(&data[16..]);
                    Input::One(vport, &self.strip)
                } else {
                    input
                }
            }
            _ => input,
        };
        let sw = &mut dev.switch;
        let links = dev.has_links;
        let table = self.cls.by_port.as_ref();
        let r = catch_unwind(AssertUnwindSafe(|| {
            if let Some(k) = fault {
                input.run(sw, table, k - 1, out);
                panic!("injected fault");
            }
            input.run(sw, table, usize::MAX, out)
        }));
        if let Err(e) = r {
            self.quarantine_after_panic(id, panic_message(e), start, out);
            return;
        }
        if links {
            if let Some((next, vport)) = self.one_link(id, start, hops, out) {
                return self.run_chained(id, next, vport, start, hops, out);
            }
        }
        self.map_outputs(id, start, hops, out);
    }

    /// The link (device, virtual port) every frame device `id` appended to `out` from `start`
    /// on crosses, when there are at least two, all on one link within the hop budget, the
    /// device has no tagged ports, and no earlier frame waits on a link or in a hop being run
    /// (so running them at once overtakes nothing): a chain's pass.
    #[inline(always)]
    fn one_link(
        &self,
        id: DeviceId,
        start: usize,
        hops: u32,
        out: &[OutputPacket],
    ) -> Option<(DeviceId, Port)> {
        let [first, rest @ ..] = out.get(start..)? else {
            return None;
        };
        if rest.is_empty() || hops >= self.max_hops || self.draining || !self.links.is_empty() {
            return None;
        }
        let dev = self.devices.get(&id)?;
        let t = dev.target(first.port);
        let Target::Link { device, vport } = t else {
            return None;
        };
        let same = dev.tags.is_empty()
            && rest
                .iter()
                .all(|o| o.port == first.port || dev.target(o.port) == t);
        same.then_some((device, vport))
    }

    /// A chain's pass ([`VirtSwitch::one_link`]): device `id`'s frames from `start` on all go
    /// to `next` on `vport`, which runs them at once (passes of up to [`CHUNK`], in order)
    /// rather than in the next hop; then their buffers go back to `id` in one call.
    #[inline(never)]
    fn run_chained(
        &mut self,
        id: DeviceId,
        next: DeviceId,
        vport: Port,
        start: usize,
        hops: u32,
        out: &mut Vec<OutputPacket>,
    ) {
        let depth = hops as usize;
        if self.chained.len() <= depth {
            self.chained.resize_with(depth + 1, Vec::new);
        }
        let mut frames = std::mem::take(&mut self.chained[depth]);
        frames.extend(out.drain(start..));
        if let Some(d) = self.devices.get_mut(&id) {
            d.stats.to_links += frames.len() as u64;
        }
        for part in frames.chunks(CHUNK) {
            let mut chunk: [(Port, &[u8]); CHUNK] = [(0, &[]); CHUNK];
            for (slot, o) in chunk.iter_mut().zip(part) {
                *slot = (vport, &o.data);
            }
            match &chunk[..part.len()] {
                [(vport, data)] => self.run_device(next, Input::One(*vport, data), hops + 1, out),
                b => self.run_device(next, Input::Batch(b), hops + 1, out),
            }
        }
        match self.devices.get_mut(&id) {
            Some(d) => d.switch.recycle_outputs(&mut frames),
            None => frames.clear(),
        }
        self.chained[depth] = frames;
    }

    /// Map the frames device `id` appended to `out` from `start` on through its port map: frames
    /// for physical ports are renumbered in place (tagged ports get their VLAN tag pushed), the
    /// others (links, CPU, drop) are taken out of `out` in the same pass.
    #[inline(always)]
    fn map_outputs(&mut self, id: DeviceId, start: usize, hops: u32, out: &mut Vec<OutputPacket>) {
        self.map_frames::<false>(id, start, hops, out);
    }

    /// [`VirtSwitch::map_outputs`] for a device with VLAN-tagged virtual ports: frames for a
    /// tagged port (physical or link) get its tag pushed. Out of line: the untagged path is
    /// the common one.
    #[inline(never)]
    fn map_tagged(&mut self, id: DeviceId, start: usize, hops: u32, out: &mut Vec<OutputPacket>) {
        self.map_frames::<true>(id, start, hops, out);
    }

    /// The body of both: one port-map look-up per frame (stable compaction: kept, physical
    /// frames move down over the taken ones); the counters and the hop budget once per pass.
    /// Untagged, the leading frames for physical ports (usually all of them) are renumbered
    /// first by one load each from [`Device::phys`]; the compaction starts at the first other
    /// frame. `TAGGED` false hands a device with tagged ports to [`VirtSwitch::map_tagged`].
    #[inline(always)]
    fn map_frames<const TAGGED: bool>(
        &mut self,
        id: DeviceId,
        start: usize,
        hops: u32,
        out: &mut Vec<OutputPacket>,
    ) {
        let Some(dev) = self.devices.get_mut(&id) else {
            return;
        };
        if !TAGGED && !dev.tags.is_empty() {
            return self.map_tagged(id, start, hops, out);
        }
        let (mut keep, mut to_links) = (start, 0u64);
        if !TAGGED {
            let phys = &dev.phys;
            let tail = &mut out[start..];
            keep += tail
                .iter_mut()
                .position(|o| match phys.get(o.port as usize) {
                    Some(&p) if p != NO_PHYS => {
                        o.port = p;
                        false
                    }
                    _ => true,
                })
                .unwrap_or(tail.len());
        }
        let link_ok = hops < self.max_hops;
        let links = &mut self.links;
        let first = keep;
        for i in first..out.len() {
            let target = dev.target(out[i].port);
            if TAGGED && matches!(target, Target::Phys(_) | Target::Link { .. }) {
                let vid = dev.tag(out[i].port);
                if vid != 0 {
                    push_vlan(&mut out[i].data, vid);
                }
            }
            match target {
                Target::Phys(p) => {
                    out[i].port = p;
                    if keep != i {
                        out.swap(keep, i);
                    }
                    keep += 1;
                }
                Target::Link { device, vport } if link_ok => {
                    to_links += 1;
                    links.push(Work {
                        from: id,
                        device,
                        vport,
                        data: std::mem::take(&mut out[i].data),
                        hops: hops + 1,
                        done: false,
                    });
                }
                target => {
                    let vport = out[i].port;
                    let data = std::mem::take(&mut out[i].data);
                    dev.take_other(target, vport, data);
                }
            }
        }
        dev.stats.to_links += to_links;
        // The taken frames' slots hold empty buffers: truncating frees nothing.
        out.truncate(keep);
        let sent = (keep - start) as u32;
        if sent > 0 {
            dev.stats.to_phys += u64::from(sent);
            self.note_origin(id, sent);
        }
    }
}

/// `sw.process_burst(input, out)`, or with a fault firing on the `k`-th packet
/// ([`VirtSwitch::inject_panic`]): the packets before it, then a panic, inside the caller's
/// panic boundary as a panic in the middle of the switch's burst would be.
#[inline(always)]
fn burst_or_fault(
    sw: &mut Switch,
    input: &[(Port, &[u8])],
    out: &mut BurstOut,
    fault: Option<usize>,
) {
    match fault {
        None => {
            sw.process_burst(input, out);
        }
        Some(k) => fire_in_burst(sw, input, out, k),
    }
}

#[cold]
#[inline(never)]
fn fire_in_burst(sw: &mut Switch, input: &[(Port, &[u8])], out: &mut BurstOut, k: usize) {
    sw.process_burst(&input[..k - 1], out);
    panic!("injected fault");
}

/// The message of a caught panic.
#[cold]
fn panic_message(e: Box<dyn std::any::Any + Send>) -> String {
    e.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| e.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "panic".to_string())
}

/// Check a topology against the devices that exist (`exists`).
/// Check `t` (rules, port maps, VLAN tags) against the devices `exists` says are there.
pub fn validate_topology(t: &Topology, exists: impl Fn(DeviceId) -> bool) -> Result<(), VirtError> {
    for (i, r) in t.rules.iter().enumerate() {
        if !exists(r.device) {
            return Err(VirtError::Topology(format!(
                "rule {i}: device {} does not exist",
                r.device
            )));
        }
        if r.vlan.is_some_and(|v| v > 4095) {
            return Err(VirtError::Topology(format!("rule {i}: VLAN id above 4095")));
        }
    }
    for (d, map) in &t.port_maps {
        if !exists(*d) {
            return Err(VirtError::Topology(format!(
                "port map of device {d}: the device does not exist"
            )));
        }
        for (vp, target) in map {
            if *vp > MAX_VPORT {
                return Err(VirtError::Topology(format!(
                    "device {d}: virtual port {vp} is above {MAX_VPORT}"
                )));
            }
            if let Target::Link { device, .. } = target {
                if !exists(*device) {
                    return Err(VirtError::Topology(format!(
                            "device {d} virtual port {vp}: link into device {device}, which does not exist"
                        )));
                }
            }
        }
    }
    for (d, tags) in &t.vlans {
        if !exists(*d) {
            return Err(VirtError::Topology(format!(
                "VLAN ports of device {d}: the device does not exist"
            )));
        }
        for (vp, vid) in tags {
            if *vp > MAX_VPORT {
                return Err(VirtError::Topology(format!(
                    "device {d}: virtual port {vp} is above {MAX_VPORT}"
                )));
            }
            if !(1..=4094).contains(vid) {
                return Err(VirtError::Topology(format!(
                    "device {d} virtual port {vp}: VLAN id {vid} is not in 1..=4094"
                )));
            }
        }
    }
    Ok(())
}

/// The classifier rules compiled for matching: the rules in match order and, when no rule
/// looks into the frame (port-only and catch-all rules), an array by physical port (the
/// design's "form 1").
#[derive(Clone, Default)]
pub(crate) struct Classifier {
    rules: Vec<Rule>,
    order: Vec<usize>,
    by_port: Option<PortTable>,
    /// Form 2 (VLAN-sliced ports): when the rules look at the port and the VLAN id only.
    by_vlan: Option<VlanTable>,
}

/// The classifier's second form (`../shared/reference/virtualization.md` §3.2): when every
/// rule matches on the physical port and/or the outer 802.1Q VLAN id only (no field), one
/// array by VLAN id per physical port a rule names (and one for every other port): a load of
/// the port's array and one of its entry, whatever the number of rules.
#[derive(Clone)]
struct VlanTable {
    /// Physical port → its array in `tables` (ports beyond: `other`).
    ports: Vec<u16>,
    other: u16,
    /// Per array: the winner by VLAN id (0..=4095), then [`UNTAGGED`] for a frame without
    /// an outer tag. A [`Hit::vport`] of [`SAME_PORT`] is resolved per packet.
    tables: Vec<Box<[Option<Hit>]>>,
}

/// Where the frames of a physical port can go ([`Classifier::port_states`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PortState {
    /// Some rule leads to a device in service: classify.
    Live,
    /// No rule can match: unclassified.
    NoRule,
    /// Every rule that can match leads to a quarantined device.
    Quarantined,
}

/// [`PortState`] by physical port.
#[derive(Clone, Debug)]
pub(crate) struct PortStates {
    ports: Vec<PortState>,
    other: PortState,
}

impl PortStates {
    /// Every port live (nothing known yet).
    pub(crate) fn live() -> PortStates {
        PortStates {
            ports: Vec::new(),
            other: PortState::Live,
        }
    }

    #[inline]
    pub(crate) fn get(&self, port: Port) -> PortState {
        *self.ports.get(port as usize).unwrap_or(&self.other)
    }
}

/// [`VlanTable`]'s entry for frames without an 802.1Q tag.
const UNTAGGED: usize = 4096;

/// Most arrays a [`VlanTable`] builds (ports named by rules, plus one): 64 × 4,097 entries
/// of 12 bytes ≈ 3 MB; more falls back to the rule list.
const MAX_VLAN_TABLES: usize = 64;

impl VlanTable {
    #[inline]
    fn get(&self, port: Port, pkt: &[u8]) -> Option<(DeviceId, Port)> {
        let t = *self.ports.get(port as usize).unwrap_or(&self.other);
        let i = if pkt.len() >= 16 && pkt[12] == 0x81 && pkt[13] == 0x00 {
            usize::from(u16::from_be_bytes([pkt[14], pkt[15]]) & 0x0fff)
        } else {
            UNTAGGED
        };
        self.tables[usize::from(t)][i]
            .map(|h| (h.device, if h.vport == SAME_PORT { port } else { h.vport }))
    }
}

impl Classifier {
    pub(crate) fn new(rules: &[Rule]) -> Classifier {
        let mut order: Vec<usize> = (0..rules.len()).collect();
        // Stable: equal priorities keep insertion order.
        order.sort_by_key(|&i| std::cmp::Reverse(rules[i].priority));
        let mut c = Classifier {
            rules: rules.to_vec(),
            order,
            by_port: None,
            by_vlan: None,
        };
        c.by_port = c.port_table();
        if c.by_port.is_none() {
            c.by_vlan = c.vlan_table();
        }
        c
    }

    /// [`VlanTable`] of the rules, when they match on port and VLAN id only (and name fewer
    /// than [`MAX_VLAN_TABLES`] ports, all below 65,536).
    fn vlan_table(&self) -> Option<VlanTable> {
        let rules = &self.rules;
        if rules
            .iter()
            .any(|r| r.field.is_some() || r.vlan.is_some_and(|v| v > 4095))
        {
            return None;
        }
        let named: std::collections::BTreeSet<Port> = rules.iter().filter_map(|r| r.port).collect();
        if named.len() >= MAX_VLAN_TABLES || named.last().is_some_and(|&p| p >= 1 << 16) {
            return None;
        }
        // One array per named port, then the other ports': each filled from the lowest
        // precedence up, so that the rule matching first in `order` writes last.
        let fill = |port: Option<Port>| {
            let mut t = vec![None; UNTAGGED + 1].into_boxed_slice();
            for &i in self.order.iter().rev() {
                let r = &rules[i];
                if r.port.is_some() && r.port != port {
                    continue;
                }
                let h = Some(Hit::new(r.device, r.vport));
                match r.vlan {
                    Some(v) => t[usize::from(v & 0x0fff)] = h,
                    None => t.fill(h),
                }
            }
            t
        };
        let mut tables: Vec<Box<[Option<Hit>]>> = named.iter().map(|&p| fill(Some(p))).collect();
        let other = tables.len() as u16;
        tables.push(fill(None));
        let n = named.last().map_or(0, |&p| p as usize + 1);
        let mut ports = vec![other; n];
        for (k, &p) in named.iter().enumerate() {
            ports[p as usize] = k as u16;
        }
        Some(VlanTable {
            ports,
            other,
            tables,
        })
    }

    fn port_table(&self) -> Option<PortTable> {
        let rules = &self.rules;
        if rules.iter().any(|r| r.vlan.is_some() || r.field.is_some()) {
            return None;
        }
        let ports = rules.iter().filter_map(|r| r.port);
        let n = ports.max().map_or(0, |m| m as usize + 1);
        if n > 1 << 16 {
            return None;
        }
        let winner = |p: Option<Port>| {
            self.order.iter().find_map(|&i| {
                let r = &rules[i];
                (r.port.is_none() || r.port == p).then_some(Hit::new(r.device, r.vport))
            })
        };
        Some(PortTable {
            ports: (0..n as Port)
                .map(|p| {
                    winner(Some(p)).map(|h| Hit {
                        device: h.device,
                        vport: if h.vport == SAME_PORT { p } else { h.vport },
                    })
                })
                .collect(),
            default: self.order.iter().find_map(|&i| {
                rules[i]
                    .port
                    .is_none()
                    .then_some(Hit::new(rules[i].device, rules[i].vport))
            }),
        })
    }

    #[inline]
    pub(crate) fn classify(&self, port: Port, pkt: &[u8]) -> Option<(DeviceId, Port)> {
        if let Some(t) = &self.by_port {
            return t.get(port);
        }
        if let Some(t) = &self.by_vlan {
            return t.get(port, pkt);
        }
        self.by_list(port, pkt)
    }

    /// What the frames of each physical port can reach, given the devices in quarantine:
    /// [`PortState::NoRule`] when no rule names the port or matches every port,
    /// [`PortState::Quarantined`] when every such rule leads to a quarantined device.
    pub(crate) fn port_states(&self, quarantined: &BTreeSet<DeviceId>) -> PortStates {
        let state = |port: Option<Port>| {
            let mut any = false;
            for r in &self.rules {
                if r.port.is_none() || r.port == port {
                    if !quarantined.contains(&r.device) {
                        return PortState::Live;
                    }
                    any = true;
                }
            }
            if any {
                PortState::Quarantined
            } else {
                PortState::NoRule
            }
        };
        let named: BTreeSet<Port> = self.rules.iter().filter_map(|r| r.port).collect();
        let other = state(None);
        // Ports beyond the array are `other`; an array past 65,536 ports is not kept.
        let n = named.last().map_or(0, |&p| p as usize + 1).min(1 << 16);
        let mut ports = vec![other; n];
        for &p in named.iter().filter(|&&p| (p as usize) < n) {
            ports[p as usize] = state(Some(p));
        }
        if named.last().is_some_and(|&p| p as usize >= n) {
            // Too many ports for the array: every port is looked at by classifying.
            return PortStates {
                ports: Vec::new(),
                other: PortState::Live,
            };
        }
        PortStates { ports, other }
    }

    /// The rules in match order, one by one (forms 3 and 4, and the reference of the tables).
    fn by_list(&self, port: Port, pkt: &[u8]) -> Option<(DeviceId, Port)> {
        self.order.iter().find_map(|&i| {
            let r = &self.rules[i];
            r.matches(port, pkt)
                .then(|| (r.device, r.vport.unwrap_or(port)))
        })
    }
}

/// `t` with the rules numbered `remove` (indexes into `t.rules`, any order, each once) taken
/// out and `add` appended in order (the batch form of adding and removing rules: the
/// classifier is compiled once for all of them).
pub fn with_rules(t: &Topology, remove: &[usize], add: &[Rule]) -> Result<Topology, VirtError> {
    let n = t.rules.len();
    let mut gone = vec![false; n];
    for &i in remove {
        if i >= n {
            return Err(VirtError::Topology(format!("no rule {i} ({n} rules)")));
        }
        if std::mem::replace(&mut gone[i], true) {
            return Err(VirtError::Topology(format!("rule {i} named twice")));
        }
    }
    let mut t = t.clone();
    t.rules = std::mem::take(&mut t.rules)
        .into_iter()
        .zip(gone)
        .filter_map(|(r, g)| (!g).then_some(r))
        .chain(add.iter().cloned())
        .collect();
    Ok(t)
}

/// `t` with device `id`'s virtual port `vport` tagged `vid` (or untagged).
fn with_tag(t: &Topology, id: DeviceId, vport: Port, vid: Option<u16>) -> Topology {
    let mut t = t.clone();
    let m = t.vlans.entry(id).or_default();
    match vid {
        Some(v) => {
            m.insert(vport, v);
        }
        None => {
            m.remove(&vport);
        }
    }
    if m.is_empty() {
        t.vlans.remove(&id);
    }
    t
}

/// The VLAN id of a frame's outer 802.1Q tag.
#[inline]
fn outer_vid(pkt: &[u8]) -> Option<u16> {
    (pkt.len() >= 18 && pkt[12] == 0x81 && pkt[13] == 0x00)
        .then(|| u16::from_be_bytes([pkt[14], pkt[15]]) & 0x0fff)
}

/// Insert an 802.1Q tag (PCP 0, DEI 0) after the MAC addresses.
fn push_vlan(frame: &mut Vec<u8>, vid: u16) {
    if frame.len() < 12 {
        return;
    }
    let [hi, lo] = vid.to_be_bytes();
    frame.splice(12..12, [0x81, 0x00, hi, lo]);
}

/// Highest virtual port number a port map may use.
pub const MAX_VPORT: Port = 4095;

fn may_reach(caller: Caller, d: &Device) -> bool {
    match caller {
        Caller::Operator => true,
        Caller::Tenant(t) => d.owner.as_deref() == Some(t),
    }
}

fn compile_ports(map: Option<&BTreeMap<Port, Target>>) -> Vec<Target> {
    let Some(map) = map else { return Vec::new() };
    let n = map.keys().next_back().map_or(0, |&p| p as usize + 1);
    let mut v = vec![Target::Drop; n];
    for (&p, &t) in map {
        v[p as usize] = t;
    }
    v
}

fn table_names(sw: &Switch) -> Vec<String> {
    sw.program()
        .pipelines
        .iter()
        .flat_map(|p| p.tables.iter().map(|t| t.name.clone()))
        .collect()
}

/// A table's signature: key (kinds, targets, masks) and actions with parameter widths.
fn table_signature(p: &tern_model::Program, t: &tern_model::Table) -> String {
    let mut acts: Vec<String> = t
        .actions
        .iter()
        .filter_map(|&a| p.actions.get(a as usize))
        .map(|a| {
            let w: Vec<u32> = a.runtime_data.iter().map(|(_, w)| *w).collect();
            format!("{}{:?}", a.name, w)
        })
        .collect();
    acts.sort();
    format!(
        "{:?}|{:?}|{:?}|{:?}",
        t.match_type, t.table_type, t.key, acts
    )
}

fn find_table<'a>(p: &'a tern_model::Program, name: &str) -> Option<&'a tern_model::Table> {
    p.pipelines
        .iter()
        .flat_map(|pl| pl.tables.iter())
        .find(|t| t.name == name)
}

fn carry_entries(old: &Switch, new: &mut Switch, max_entries: Option<u64>) -> CarryReport {
    let mut report = CarryReport::default();
    let (po, pn) = (old.program().clone(), new.program().clone());
    let mut budget = max_entries.map(|m| {
        m.saturating_sub(
            table_names(new)
                .iter()
                .map(|t| new.mt_get_num_entries(t).unwrap_or(0))
                .sum(),
        )
    });
    for t_old in po.pipelines.iter().flat_map(|p| p.tables.iter()) {
        let Some(t_new) = find_table(&pn, &t_old.name) else {
            continue;
        };
        if table_signature(&po, t_old) != table_signature(&pn, t_new) {
            report
                .skipped
                .push(format!("{}: key or actions differ", t_old.name));
            continue;
        }
        if t_new.entries.is_some() {
            report
                .skipped
                .push(format!("{}: const entries in the new program", t_old.name));
            continue;
        }
        let entries = old.mt_get_entries(&t_old.name).unwrap_or_default();
        let mut moved = 0;
        for e in &entries {
            let tern_runtime::ActionEntry::Action { name, data } = &e.action else {
                report.skipped.push(format!(
                    "{} entry {}: indirect (action profiles are not carried)",
                    t_old.name, e.handle
                ));
                continue;
            };
            if budget == Some(0) {
                report.skipped.push(format!(
                    "{} entry {}: entry quota reached",
                    t_old.name, e.handle
                ));
                continue;
            }
            let prio = (e.priority >= 0).then_some(e.priority);
            match new.mt_add_entry(&t_old.name, &e.match_key, name, data, prio) {
                Ok(h) => {
                    if let Some(l) = e.life {
                        let _ = new.mt_set_entry_ttl(&t_old.name, h, l.timeout_ms);
                    }
                    moved += 1;
                    if let Some(b) = budget.as_mut() {
                        *b -= 1;
                    }
                }
                Err(err) => report
                    .skipped
                    .push(format!("{} entry {}: {err}", t_old.name, e.handle)),
            }
        }
        let old_default = old.mt_get_default_entry(&t_old.name);
        if old_default.is_ok() && old_default != new.mt_get_default_entry(&t_old.name) {
            let Ok(tern_runtime::ActionEntry::Action { name, data }) = old_default else {
                report.skipped.push(format!(
                    "{}: indirect default entry (action profiles are not carried)",
                    t_old.name
                ));
                report.entries += moved;
                report.tables.push(t_old.name.clone());
                continue;
            };
            if let Err(err) = new.mt_set_default_action(&t_old.name, &name, &data) {
                report
                    .skipped
                    .push(format!("{} default action: {err}", t_old.name));
            }
        }
        report.entries += moved;
        report.tables.push(t_old.name.clone());
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hop's mark gives back the running device, the frame's producer and the frame's
    /// buffer for every dense id, and no mark names no hop.
    #[test]
    fn a_hop_mark_says_its_hop() {
        assert_eq!(HopMark::NONE.get(), None);
        let last = DENSE_IDS - 1;
        assert_eq!(HopMark::new::<true>(last, 0).get(), Some((0, last, false)));
        assert_eq!(HopMark::new::<false>(0, last).get(), Some((last, 0, true)));
        assert_eq!(HopMark::new::<true>(7, 7).get(), Some((7, 7, false)));
    }

    /// xorshift64*: deterministic test data.
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) % n
        }
    }

    fn frame(vid: Option<u16>, len: usize) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if let Some(v) = vid {
            f.extend_from_slice(&[0x81, 0x00]);
            f.extend_from_slice(&(v | 0x2000).to_be_bytes());
        }
        f.extend_from_slice(&[0x08, 0x00]);
        f.resize(len.max(f.len()), 0x5a);
        f.truncate(len);
        f
    }

    /// The VLAN table (form 2) gives what the rules one by one give, for rule sets of port and
    /// VLAN rules with shared priorities (ties: the first added), catch-alls, renumbering and
    /// not, on tagged, untagged and cut-short frames of named and other ports.
    #[test]
    fn the_vlan_table_classifies_as_the_rules_in_order() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let vids = [1u16, 5, 10, 20, 4095, 0];
        for round in 0..200 {
            let n = 1 + rng.below(12) as usize;
            let rules: Vec<Rule> = (0..n)
                .map(|_| Rule {
                    priority: rng.below(4) as i32,
                    port: (rng.below(3) > 0).then(|| rng.below(6) as Port),
                    vlan: (rng.below(4) > 0).then(|| vids[rng.below(6) as usize]),
                    field: None,
                    device: 1 + rng.below(5) as DeviceId,
                    vport: (rng.below(2) > 0).then(|| rng.below(9) as Port),
                })
                .collect();
            let c = Classifier::new(&rules);
            let any_vlan = rules.iter().any(|r| r.vlan.is_some());
            assert_eq!(c.by_vlan.is_some(), any_vlan, "round {round}: {rules:?}");
            for _ in 0..200 {
                let port = rng.below(9) as Port;
                let vid = (rng.below(3) > 0).then(|| vids[rng.below(6) as usize]);
                let len = [14, 15, 16, 17, 18, 60][rng.below(6) as usize];
                let f = frame(vid, len);
                assert_eq!(
                    c.classify(port, &f),
                    c.by_list(port, &f),
                    "round {round}: port {port}, VLAN {vid:?}, {len} bytes, {rules:?}"
                );
            }
        }
        // A field rule keeps the list; so do too many named ports.
        let mut r = Rule {
            priority: 0,
            port: None,
            vlan: Some(5),
            field: None,
            device: 1,
            vport: None,
        };
        let many: Vec<Rule> = (0..MAX_VLAN_TABLES as Port)
            .map(|p| Rule {
                port: Some(p),
                ..r.clone()
            })
            .collect();
        assert!(Classifier::new(&many).by_vlan.is_none());
        assert!(Classifier::new(&many[1..]).by_vlan.is_some());
        r.field = Some(FieldMatch {
            field: Field::EtherType,
            value: 0x800,
            mask: 0xffff,
        });
        assert!(Classifier::new(&[r]).by_vlan.is_none());
    }

    #[test]
    fn rules_change_in_one_batch_or_not_at_all() {
        let rule = |vlan, device| Rule {
            priority: 0,
            port: Some(1),
            vlan: Some(vlan),
            field: None,
            device,
            vport: None,
        };
        let t = Topology {
            rules: vec![rule(1, 1), rule(2, 2), rule(3, 3)],
            ..Topology::default()
        };
        let u = with_rules(&t, &[2, 0], &[rule(4, 4), rule(5, 5)]).unwrap();
        assert_eq!(u.rules, vec![rule(2, 2), rule(4, 4), rule(5, 5)]);
        let e = with_rules(&t, &[3], &[]).unwrap_err();
        assert_eq!(e.to_string(), "no rule 3 (3 rules)");
        let e = with_rules(&t, &[1, 1], &[]).unwrap_err();
        assert_eq!(e.to_string(), "rule 1 named twice");
    }
}
