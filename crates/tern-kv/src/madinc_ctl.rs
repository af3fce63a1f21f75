//! MADINC's control plane for `p4/kv/madinc.p4` over a path of switches (index 0 nearest the
//! clients, the last nearest the store): tenants arriving and leaving at run time, cache pages
//! of 128 values handed out by a policy (near-client, near-store, even-split) within each
//! tenant's quota, per-tenant page tables (round-robin over the tenant's switches, LRU pages on
//! each), and item placement with no item cached on two switches.
//!
//! Every change the controller makes to a switch is one MADINC control message (TENANT_ADD/DEL,
//! PAGE_ALLOC/FREE, CONTROL_INSERT/EVICT/UPDATE, SKETCH_RESET) given to a [`PathOps`]: applied
//! at once through each switch's runtime interface (`[&mut dyn Runtime]`), or sent over UDP,
//! acknowledged and retried, to each switch's agent (`madinc_wire::WirePath`), which applies it
//! with [`apply_control`] — table `tenant`, table `cache_lookup`, registers `page_owner_reg`,
//! `valid_reg`, `vallen_reg`, `val_reg` and the sketches. The agent checks what it is asked
//! (the slot must lie in a page the tenant owns, a page must be free to be allocated) and answers
//! a refusal with a CONTROL_REPLY status.

use crate::madinc::{
    MadBody, MadMessage, MadOp, ReplyStatus, StoreOp, MADINC_MAX_VALUE_LEN, PAGE_VALUES,
};
use crate::protocol::Key;
use std::collections::{HashMap, VecDeque};
use tern_runtime::{MatchParam, Runtime};

/// Prefix of the program's ingress objects.
const P: &str = "MadIngress.";
/// Value words per slot.
const WORDS: u32 = 16;

/// Where a tenant's new pages go along the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Fill the switch nearest the clients first.
    NearClient,
    /// Fill the switch nearest the store first.
    NearStore,
    /// One page per switch in turn, starting at the switch with the most free pages.
    EvenSplit,
    /// By measured load ([`Controller::set_loads`]): each page to the switch of the route
    /// whose load, counting the pages already given in this allocation at the path's mean load
    /// per page, is lowest (ties: nearest the client). [`Controller::rebalance`] moves pages
    /// at run time the same way.
    LeastLoaded,
}

/// A cache page: (switch index on the path, page index on that switch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PageRef {
    /// Switch index on the path.
    pub switch: usize,
    /// Page index on the switch.
    pub page: u32,
}

/// Where an item is cached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placement {
    /// Switch index on the path.
    pub switch: usize,
    /// Global value slot on that switch (page × 128 + offset).
    pub slot: u32,
}

/// Why a control-plane request was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CtlError {
    /// `add_tenant` for an id already present.
    #[error("tenant {0} already exists")]
    TenantExists(u16),
    /// An operation on a tenant that is not present.
    #[error("unknown tenant {0}")]
    UnknownTenant(u16),
    /// More pages than the tenant's quota.
    #[error(
        "tenant {tenant} asked for {asked} more pages but holds {held} of its quota of {quota}"
    )]
    Quota {
        /// The tenant.
        tenant: u16,
        /// Pages asked for.
        asked: u32,
        /// Pages held.
        held: u32,
        /// Its quota.
        quota: u32,
    },
    /// Not enough free pages on the path.
    #[error("tenant {tenant} asked for {asked} pages but only {free} are free on the path")]
    NoPages {
        /// The tenant.
        tenant: u16,
        /// Pages asked for.
        asked: u32,
        /// Free pages.
        free: u32,
    },
    /// The tenant holds no page to cache an item in.
    #[error("tenant {0} holds no cache page")]
    NoTenantPages(u16),
    /// The item is already cached (on this or another switch).
    #[error("tenant {tenant}: key {key:?} is already cached on switch {switch}")]
    Duplicate {
        /// The tenant.
        tenant: u16,
        /// The key.
        key: Key,
        /// The switch holding it.
        switch: usize,
    },
    /// A message given as a hot report is another op.
    #[error("{0} is not a HOT_REPORT")]
    NotAReport(MadOp),
    /// A report whose tag is not its tenant's secret.
    #[error("report for tenant {0} carries a tag that is not the tenant's")]
    ForgedTag(u16),
    /// A value over 128 bytes.
    #[error("value of {0} bytes exceeds the MADINC maximum of {MADINC_MAX_VALUE_LEN}")]
    ValueTooLong(usize),
    /// A tenant route that is empty, repeats a switch or names one beyond the path.
    #[error("route {route:?} is not a list of distinct switches below {switches}")]
    BadRoute {
        /// The route given.
        route: Vec<usize>,
        /// Switches on the path.
        switches: usize,
    },
    /// The runtime list does not match the path.
    #[error("{given} switches given for a path of {path}")]
    PathMismatch {
        /// Runtimes given.
        given: usize,
        /// Switches on the path.
        path: usize,
    },
    /// A runtime call failed.
    #[error("switch {switch}: {msg}")]
    Runtime {
        /// The switch.
        switch: usize,
        /// The runtime's error.
        msg: String,
    },
    /// A switch's agent refused a control message (CONTROL_REPLY status) or never answered.
    #[error("switch {switch} refused {op} with status {status}")]
    Refused {
        /// The switch.
        switch: usize,
        /// The op refused.
        op: MadOp,
        /// The status ([`ReplyStatus`], or `madinc_wire::GAVE_UP`).
        status: u8,
    },
}

/// The switches of a path as the controller sees them: each takes control messages.
pub trait PathOps {
    /// Number of switches.
    fn switches(&self) -> usize;
    /// Applies (or delivers and waits for) control message `m` on switch `switch`.
    fn apply(&mut self, switch: usize, m: &MadMessage) -> Result<(), CtlError>;
}

impl PathOps for [&mut dyn Runtime] {
    fn switches(&self) -> usize {
        self.len()
    }
    fn apply(&mut self, switch: usize, m: &MadMessage) -> Result<(), CtlError> {
        apply_control(&mut *self[switch], m).map_err(|(status, msg)| {
            if status == ReplyStatus::FAILED {
                CtlError::Runtime { switch, msg }
            } else {
                CtlError::Refused {
                    switch,
                    op: m.body.op(),
                    status,
                }
            }
        })
    }
}

impl PathOps for Vec<&mut dyn Runtime> {
    fn switches(&self) -> usize {
        self.len()
    }
    fn apply(&mut self, switch: usize, m: &MadMessage) -> Result<(), CtlError> {
        self.as_mut_slice().apply(switch, m)
    }
}

/// A switch agent's duty: applies one control message to the switch through its runtime.
/// Idempotent (a second TENANT_ADD or CONTROL_INSERT modifies the entry, a second EVICT or
/// TENANT_DEL finds nothing to remove). Refused — `Err((status, why))` with a non-OK
/// [`ReplyStatus`] — when a slot is not in a page the message's tenant owns (SLOT), a page to
/// allocate or free belongs to another tenant (SLOT), an UPDATE names an item not cached in
/// that slot (SLOT) or the message is not a control message for a switch (TENANT); a failed
/// runtime call is FAILED.
pub fn apply_control(rt: &mut dyn Runtime, m: &MadMessage) -> Result<(), (u8, String)> {
    let rt_fail = |e: tern_runtime::RuntimeError| (ReplyStatus::FAILED, e.to_string());
    let owner_of = |rt: &dyn Runtime, slot: u32| -> Result<u64, (u8, String)> {
        rt.register_read(&format!("{P}page_owner_reg"), slot / PAGE_VALUES)
            .map_err(|e| (ReplyStatus::SLOT, format!("slot {slot}: {e}")))
    };
    let me = m.tenant as u64 + 1;
    let lookup_key = || {
        vec![
            MatchParam::Exact(m.tenant.to_be_bytes().to_vec()),
            MatchParam::Exact(m.key.0.to_vec()),
        ]
    };
    let tenant_key = || vec![MatchParam::Exact(m.tenant.to_be_bytes().to_vec())];
    // Per-tenant secret: a message about a tenant this switch knows must carry that tenant's
    // tag (a TENANT_ADD sets it, a SKETCH_RESET names no tenant).
    if !matches!(
        m.body,
        MadBody::Tenant { add: true, .. } | MadBody::Reset { .. }
    ) {
        if let Ok(e) = rt.mt_get_entry_from_key(&format!("{P}tenant"), &tenant_key(), None) {
            let tag = match &e.action {
                tern_runtime::ActionEntry::Action { data, .. } => data.first().map(|d| be_u32(d)),
                _ => None,
            };
            if tag.is_some_and(|t| t != m.tag) {
                return Err((
                    ReplyStatus::TENANT,
                    format!("the message's tag is not tenant {}'s secret", m.tenant),
                ));
            }
        }
    }
    match &m.body {
        MadBody::Tenant {
            add: true,
            hot_threshold,
            ..
        } => {
            let data = [
                m.tag.to_be_bytes().to_vec(),
                hot_threshold.to_be_bytes().to_vec(),
            ];
            let t = format!("{P}tenant");
            match rt.mt_get_entry_from_key(&t, &tenant_key(), None) {
                Ok(e) => rt
                    .mt_modify_entry(&t, e.handle, &format!("{P}set_tenant"), &data)
                    .map_err(rt_fail),
                Err(_) => rt
                    .mt_add_entry(&t, &tenant_key(), &format!("{P}set_tenant"), &data, None)
                    .map(|_| ())
                    .map_err(rt_fail),
            }
        }
        MadBody::Tenant { add: false, .. } => {
            let t = format!("{P}tenant");
            match rt.mt_get_entry_from_key(&t, &tenant_key(), None) {
                Ok(e) => rt.mt_delete_entry(&t, e.handle).map_err(rt_fail),
                Err(_) => Ok(()),
            }
        }
        MadBody::Page { alloc, page, .. } => {
            let r = format!("{P}page_owner_reg");
            let cur = rt
                .register_read(&r, *page)
                .map_err(|e| (ReplyStatus::SLOT, format!("page {page}: {e}")))?;
            if cur != 0 && cur != me {
                return Err((
                    ReplyStatus::SLOT,
                    format!("page {page} belongs to tenant {}", cur - 1),
                ));
            }
            rt.register_write(&r, *page, if *alloc { me } else { 0 })
                .map_err(rt_fail)
        }
        MadBody::Store {
            op, slot, value, ..
        } => {
            if owner_of(rt, *slot)? != me {
                return Err((
                    ReplyStatus::SLOT,
                    format!("slot {slot} is not in a page of tenant {}", m.tenant),
                ));
            }
            let t = format!("{P}cache_lookup");
            let entry = rt.mt_get_entry_from_key(&t, &lookup_key(), None).ok();
            if *op == StoreOp::Update {
                let here = entry.as_ref().is_some_and(|e| match &e.action {
                    tern_runtime::ActionEntry::Action { data, .. } => {
                        data.first().map(|d| be_u32(d)) == Some(*slot)
                    }
                    _ => false,
                });
                if !here {
                    return Err((
                        ReplyStatus::SLOT,
                        format!(
                            "tenant {} key {:?} is not cached in slot {slot}",
                            m.tenant, m.key
                        ),
                    ));
                }
                // Applied only while no write passed the switch since the slot was armed
                // (checked and written under the switch's lock, so no packet slips between).
                let marked = rt
                    .register_read(&format!("{P}wmark_reg"), *slot)
                    .map_err(rt_fail)?;
                if marked != 0 {
                    return Err((
                        ReplyStatus::STALE,
                        format!(
                            "tenant {} key {:?}: a write passed since slot {slot} was armed",
                            m.tenant, m.key
                        ),
                    ));
                }
                return write_value(rt, *slot, value).map_err(rt_fail);
            }
            rt.register_write(&format!("{P}wmark_reg"), *slot, 0)
                .map_err(rt_fail)?;
            write_value(rt, *slot, value).map_err(rt_fail)?;
            let data = [slot.to_be_bytes().to_vec()];
            match entry {
                Some(e) => rt
                    .mt_modify_entry(&t, e.handle, &format!("{P}set_slot"), &data)
                    .map_err(rt_fail),
                None => rt
                    .mt_add_entry(&t, &lookup_key(), &format!("{P}set_slot"), &data, None)
                    .map(|_| ())
                    .map_err(rt_fail),
            }
        }
        MadBody::Arm { slot, .. } => {
            if owner_of(rt, *slot)? != me {
                return Err((
                    ReplyStatus::SLOT,
                    format!("slot {slot} is not in a page of tenant {}", m.tenant),
                ));
            }
            // Invalid first, then the mark cleared, then the entry: from here on every write
            // of the item that passes this switch (request or reply) marks the slot.
            rt.register_write(&format!("{P}valid_reg"), *slot, 0)
                .map_err(rt_fail)?;
            rt.register_write(&format!("{P}wmark_reg"), *slot, 0)
                .map_err(rt_fail)?;
            let t = format!("{P}cache_lookup");
            let data = [slot.to_be_bytes().to_vec()];
            match rt.mt_get_entry_from_key(&t, &lookup_key(), None) {
                Ok(e) => rt
                    .mt_modify_entry(&t, e.handle, &format!("{P}set_slot"), &data)
                    .map_err(rt_fail),
                Err(_) => rt
                    .mt_add_entry(&t, &lookup_key(), &format!("{P}set_slot"), &data, None)
                    .map(|_| ())
                    .map_err(rt_fail),
            }
        }
        MadBody::Evict { slot, .. } => {
            let t = format!("{P}cache_lookup");
            if let Ok(e) = rt.mt_get_entry_from_key(&t, &lookup_key(), None) {
                rt.mt_delete_entry(&t, e.handle).map_err(rt_fail)?;
            }
            if owner_of(rt, *slot)? == me {
                rt.register_write(&format!("{P}valid_reg"), *slot, 0)
                    .map_err(rt_fail)?;
            }
            Ok(())
        }
        MadBody::Reset { .. } => {
            for r in [
                "cm1_reg", "cm2_reg", "cm3_reg", "cm4_reg", "bf1_reg", "bf2_reg", "bf3_reg",
            ] {
                rt.register_reset(&format!("{P}{r}")).map_err(rt_fail)?;
            }
            Ok(())
        }
        b => Err((
            ReplyStatus::TENANT,
            format!("{} is not a control message for a switch", b.op()),
        )),
    }
}

fn be_u32(d: &[u8]) -> u32 {
    d.iter().fold(0u32, |a, &b| (a << 8) | b as u32)
}

/// A tenant to add: its id, secret tag, hot threshold (reads of an uncached item before it is
/// reported), quota (most pages it may hold), pages wanted now and where they go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TenantSpec {
    /// Tenant id.
    pub id: u16,
    /// Secret tag its packets carry.
    pub secret: u32,
    /// Hot threshold of its count-min sketch.
    pub hot_threshold: u16,
    /// Most pages it may hold.
    pub quota: u32,
    /// Pages allocated on arrival.
    pub pages: u32,
    /// Where they go.
    pub policy: Policy,
}

/// The switches of the path, in path order (one runtime per switch, or the wire path).
pub type Switches<'a> = &'a mut dyn PathOps;

struct TenantState {
    secret: u32,
    hot_threshold: u16,
    quota: u32,
    /// Per switch of the path: the tenant's pages there, least recently used first.
    lru: Vec<VecDeque<u32>>,
    /// Next switch to take a page from (round-robin).
    next_switch: usize,
    /// The page being filled and its next free offset.
    active: Option<(PageRef, u32)>,
    /// Items per page (offset → key).
    contents: HashMap<PageRef, Vec<Option<Key>>>,
    /// The switches between the tenant's client and its store, client side first.
    route: Vec<usize>,
}

impl TenantState {
    fn held(&self) -> u32 {
        self.lru.iter().map(|q| q.len() as u32).sum()
    }
}

/// The control plane of a path of MADINC switches.
pub struct Controller {
    /// Free pages per switch (kept sorted, lowest first).
    free: Vec<Vec<u32>>,
    tenants: HashMap<u16, TenantState>,
    /// Every cached item: (tenant, key) → placement.
    items: HashMap<(u16, Key), Placement>,
    /// The next control message id.
    next_id: u32,
    /// Measured load per switch ([`Controller::set_loads`]).
    loads: Vec<u64>,
    /// Pages per switch at the start.
    total: Vec<u32>,
}

/// Writes a value into a slot: invalid while the words change, valid after.
fn write_value(
    rt: &mut dyn Runtime,
    slot: u32,
    value: &[u8],
) -> Result<(), tern_runtime::RuntimeError> {
    rt.register_write(&format!("{P}valid_reg"), slot, 0)?;
    rt.register_write(&format!("{P}vallen_reg"), slot, value.len() as u64)?;
    for (i, w) in value.chunks(8).enumerate() {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        rt.register_write(
            &format!("{P}val_reg"),
            slot * WORDS + i as u32,
            u64::from_be_bytes(b),
        )?;
    }
    rt.register_write(&format!("{P}valid_reg"), slot, 1)
}

/// Which switch each of `n` new pages goes to under `policy`, given the free pages per switch
/// (`None` when fewer than `n` pages are free).
pub fn plan(policy: Policy, free: &[u32], n: u32) -> Option<Vec<usize>> {
    plan_loaded(policy, free, &vec![0; free.len()], 0.0, n)
}

/// [`plan`] with the measured load of each switch and the path's mean load per page (used by
/// [`Policy::LeastLoaded`] only).
pub fn plan_loaded(
    policy: Policy,
    free: &[u32],
    load: &[u64],
    per_page: f64,
    n: u32,
) -> Option<Vec<usize>> {
    if policy == Policy::LeastLoaded {
        if free.iter().map(|&f| f as u64).sum::<u64>() < n as u64 {
            return None;
        }
        let mut left = free.to_vec();
        let mut est: Vec<f64> = (0..free.len())
            .map(|i| load.get(i).copied().unwrap_or(0) as f64)
            .collect();
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let s = (0..free.len())
                .filter(|&s| left[s] > 0)
                .min_by(|&a, &b| est[a].total_cmp(&est[b]).then(a.cmp(&b)))?;
            left[s] -= 1;
            est[s] += per_page;
            out.push(s);
        }
        return Some(out);
    }
    if free.iter().map(|&f| f as u64).sum::<u64>() < n as u64 {
        return None;
    }
    let mut left = free.to_vec();
    let mut out = Vec::with_capacity(n as usize);
    let order: Vec<usize> = match policy {
        Policy::NearClient => (0..free.len()).collect(),
        Policy::NearStore => (0..free.len()).rev().collect(),
        Policy::EvenSplit => {
            // Start at the switch with the most free pages (nearest the clients on a tie), so
            // one-page tenants spread over the path too.
            let most = free.iter().copied().max().unwrap_or(0);
            let first = free.iter().position(|&f| f == most).unwrap_or(0);
            (0..free.len()).map(|i| (first + i) % free.len()).collect()
        }
        Policy::LeastLoaded => unreachable!("planned above"),
    };
    match policy {
        Policy::NearClient | Policy::NearStore | Policy::LeastLoaded => {
            for &s in &order {
                while left[s] > 0 && (out.len() as u32) < n {
                    left[s] -= 1;
                    out.push(s);
                }
            }
        }
        Policy::EvenSplit => {
            while (out.len() as u32) < n {
                for &s in &order {
                    if left[s] > 0 && (out.len() as u32) < n {
                        left[s] -= 1;
                        out.push(s);
                    }
                }
            }
        }
    }
    Some(out)
}

impl Controller {
    /// A path of switches with `pages[i]` cache pages on switch i (at most the program's
    /// `MAD_PAGES`).
    pub fn new(pages: &[u32]) -> Controller {
        Controller {
            free: pages.iter().map(|&p| (0..p).collect()).collect(),
            tenants: HashMap::new(),
            items: HashMap::new(),
            next_id: 1,
            loads: vec![0; pages.len()],
            total: pages.to_vec(),
        }
    }

    /// The measured load of each switch of the path (e.g. reads it answered in the last
    /// period), for [`Policy::LeastLoaded`] and [`Controller::rebalance`].
    pub fn set_loads(&mut self, loads: &[u64]) {
        for (i, l) in self.loads.iter_mut().enumerate() {
            *l = loads.get(i).copied().unwrap_or(0);
        }
    }

    /// The path's mean load per page in use.
    fn per_page(&self) -> f64 {
        let used: u32 = self
            .total
            .iter()
            .zip(&self.free)
            .map(|(t, f)| t - f.len() as u32)
            .sum();
        self.loads.iter().sum::<u64>() as f64 / used.max(1) as f64
    }

    /// Moves one of `tenant`'s pages from the most loaded switch of its route where it holds
    /// one to the least loaded switch of its route with a free page, when the first's load is
    /// more than twice the second's: the page's items are evicted (a hot item is reported and
    /// admitted again), the page freed and a page allocated on the other switch. Returns the
    /// move (from, to), or `None` when the loads are balanced enough.
    pub fn rebalance(
        &mut self,
        rts: Switches,
        tenant: u16,
    ) -> Result<Option<(usize, usize)>, CtlError> {
        self.check_path(rts)?;
        let t = self
            .tenants
            .get(&tenant)
            .ok_or(CtlError::UnknownTenant(tenant))?;
        let hi = t
            .route
            .iter()
            .copied()
            .filter(|&s| !t.lru[s].is_empty())
            .max_by(|&a, &b| self.loads[a].cmp(&self.loads[b]).then(b.cmp(&a)));
        let lo = t
            .route
            .iter()
            .copied()
            .filter(|&s| !self.free[s].is_empty())
            .min_by(|&a, &b| self.loads[a].cmp(&self.loads[b]).then(a.cmp(&b)));
        let (Some(hi), Some(lo)) = (hi, lo) else {
            return Ok(None);
        };
        if hi == lo || self.loads[hi] <= 2 * self.loads[lo] {
            return Ok(None);
        }
        // The least recently used of the tenant's pages on `hi`.
        let t = self.tenants.get_mut(&tenant).expect("present");
        let page = t.lru[hi].pop_front().expect("non-empty");
        let pr = PageRef { switch: hi, page };
        if t.active.is_some_and(|(p, _)| p == pr) {
            t.active = None;
        }
        let keys: Vec<Key> = t
            .contents
            .remove(&pr)
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect();
        for k in keys {
            self.drop_item(rts, tenant, k)?;
        }
        self.send(rts, hi, tenant, Key([0; 16]), |id, switch| MadBody::Page {
            alloc: false,
            id,
            switch,
            page,
        })?;
        let at = self.free[hi].partition_point(|&p| p < page);
        self.free[hi].insert(at, page);
        let new = self.free[lo].remove(0);
        self.send(rts, lo, tenant, Key([0; 16]), |id, switch| MadBody::Page {
            alloc: true,
            id,
            switch,
            page: new,
        })?;
        let t = self.tenants.get_mut(&tenant).expect("present");
        t.lru[lo].push_front(new);
        t.contents.insert(
            PageRef {
                switch: lo,
                page: new,
            },
            vec![None; PAGE_VALUES as usize],
        );
        Ok(Some((hi, lo)))
    }

    fn check_path(&self, rts: &dyn PathOps) -> Result<(), CtlError> {
        if rts.switches() != self.free.len() {
            return Err(CtlError::PathMismatch {
                given: rts.switches(),
                path: self.free.len(),
            });
        }
        Ok(())
    }

    fn id(&mut self) -> u32 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1).max(1);
        id
    }

    /// Sends one control message for (tenant, key) to switch `s`.
    fn send(
        &mut self,
        rts: Switches,
        s: usize,
        tenant: u16,
        key: Key,
        body: impl FnOnce(u32, u16) -> MadBody,
    ) -> Result<(), CtlError> {
        let tag = self.tenants.get(&tenant).map_or(0, |t| t.secret);
        let m = MadMessage {
            tenant,
            tag,
            key,
            body: body(self.id(), s as u16),
        };
        rts.apply(s, &m)
    }

    /// Free pages per switch.
    pub fn free_pages(&self) -> Vec<u32> {
        self.free.iter().map(|f| f.len() as u32).collect()
    }

    /// A tenant's pages per switch (empty for an unknown tenant).
    pub fn pages_of(&self, tenant: u16) -> Vec<Vec<u32>> {
        self.tenants
            .get(&tenant)
            .map(|t| {
                t.lru
                    .iter()
                    .map(|q| {
                        let mut v: Vec<u32> = q.iter().copied().collect();
                        v.sort();
                        v
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Where (tenant, key) is cached, if it is.
    pub fn placement(&self, tenant: u16, key: Key) -> Option<Placement> {
        self.items.get(&(tenant, key)).copied()
    }

    /// Number of cached items.
    pub fn items(&self) -> usize {
        self.items.len()
    }

    /// A tenant arrives: installed on every switch of the path (so its packets pass the tenant
    /// check everywhere), then `pages` pages allocated under `policy`. Refused when the id is
    /// taken, `pages` exceeds `quota`, or the path has too few free pages; nothing changes then.
    pub fn add_tenant(&mut self, rts: Switches, spec: TenantSpec) -> Result<(), CtlError> {
        let all: Vec<usize> = (0..self.free.len()).collect();
        self.add_tenant_on(rts, spec, &all)
    }

    /// [`Controller::add_tenant`] for a tenant whose client and store are joined by `route` (a
    /// subset of the switches, client side first — e.g. leaf, core, leaf in a star): its pages
    /// are placed on those switches only, `policy` reading "near the client" as the route's
    /// first switch. Its tenant entry still goes to every switch.
    pub fn add_tenant_on(
        &mut self,
        rts: Switches,
        spec: TenantSpec,
        route: &[usize],
    ) -> Result<(), CtlError> {
        let TenantSpec {
            id: tenant,
            secret,
            hot_threshold,
            quota,
            pages,
            policy,
        } = spec;
        self.check_path(rts)?;
        if self.tenants.contains_key(&tenant) {
            return Err(CtlError::TenantExists(tenant));
        }
        let n = self.free.len();
        let mut seen = vec![false; n];
        if route.is_empty()
            || route
                .iter()
                .any(|&s| s >= n || std::mem::replace(&mut seen[s], true))
        {
            return Err(CtlError::BadRoute {
                route: route.to_vec(),
                switches: n,
            });
        }
        self.check_alloc(tenant, 0, quota, pages, route)?;
        self.tenants.insert(
            tenant,
            TenantState {
                secret,
                hot_threshold,
                quota,
                lru: vec![VecDeque::new(); self.free.len()],
                next_switch: 0,
                active: None,
                contents: HashMap::new(),
                route: route.to_vec(),
            },
        );
        for s in 0..self.free.len() {
            let r = self.send(rts, s, tenant, Key([0; 16]), |id, switch| MadBody::Tenant {
                add: true,
                id,
                switch,
                hot_threshold,
            });
            if let Err(e) = r {
                self.tenants.remove(&tenant);
                return Err(e);
            }
        }
        self.alloc_pages(rts, tenant, pages, policy)
    }

    fn check_alloc(
        &self,
        tenant: u16,
        held: u32,
        quota: u32,
        n: u32,
        route: &[usize],
    ) -> Result<(), CtlError> {
        if held as u64 + n as u64 > quota as u64 {
            return Err(CtlError::Quota {
                tenant,
                asked: n,
                held,
                quota,
            });
        }
        let free: u32 = route.iter().map(|&s| self.free[s].len() as u32).sum();
        if free < n {
            return Err(CtlError::NoPages {
                tenant,
                asked: n,
                free,
            });
        }
        Ok(())
    }

    /// More pages for a present tenant, at run time, within its quota.
    pub fn alloc_pages(
        &mut self,
        rts: Switches,
        tenant: u16,
        n: u32,
        policy: Policy,
    ) -> Result<(), CtlError> {
        self.check_path(rts)?;
        let t = self
            .tenants
            .get(&tenant)
            .ok_or(CtlError::UnknownTenant(tenant))?;
        self.check_alloc(tenant, t.held(), t.quota, n, &t.route)?;
        let route = t.route.clone();
        let free: Vec<u32> = route.iter().map(|&s| self.free[s].len() as u32).collect();
        let load: Vec<u64> = route.iter().map(|&s| self.loads[s]).collect();
        let targets = plan_loaded(policy, &free, &load, self.per_page(), n).expect("checked above");
        for s in targets.into_iter().map(|i| route[i]) {
            let page = self.free[s].remove(0);
            if let Err(e) = self.send(rts, s, tenant, Key([0; 16]), |id, switch| MadBody::Page {
                alloc: true,
                id,
                switch,
                page,
            }) {
                self.free[s].insert(0, page);
                return Err(e);
            }
            let t = self.tenants.get_mut(&tenant).expect("present");
            t.lru[s].push_front(page);
            t.contents.insert(
                PageRef { switch: s, page },
                vec![None; PAGE_VALUES as usize],
            );
        }
        Ok(())
    }

    /// A tenant leaves: its items are evicted, its pages freed (owner cleared) and its tenant
    /// entries deleted, so its packets are dropped as unknown from then on.
    pub fn remove_tenant(&mut self, rts: Switches, tenant: u16) -> Result<(), CtlError> {
        self.check_path(rts)?;
        let t = self
            .tenants
            .remove(&tenant)
            .ok_or(CtlError::UnknownTenant(tenant))?;
        let keys: Vec<Key> = t.contents.values().flatten().flatten().copied().collect();
        // Messages for the departing tenant carry its tag (it is gone from the table).
        self.tenants.insert(tenant, t);
        for k in keys {
            self.drop_item(rts, tenant, k)?;
        }
        let lru = self.tenants[&tenant].lru.clone();
        for (s, q) in lru.iter().enumerate() {
            for &page in q {
                self.send(rts, s, tenant, Key([0; 16]), |id, switch| MadBody::Page {
                    alloc: false,
                    id,
                    switch,
                    page,
                })?;
                let at = self.free[s].partition_point(|&p| p < page);
                self.free[s].insert(at, page);
            }
        }
        for s in 0..self.free.len() {
            self.send(rts, s, tenant, Key([0; 16]), |id, switch| MadBody::Tenant {
                add: false,
                id,
                switch,
                hot_threshold: 0,
            })?;
        }
        self.tenants.remove(&tenant);
        Ok(())
    }

    /// Caches (tenant, key) = value in the tenant's active page (taking the next page —
    /// round-robin over the tenant's switches, that switch's least recently used page — when it
    /// is full, evicting what that page held). Refused if the item is cached anywhere already.
    pub fn insert(
        &mut self,
        rts: Switches,
        tenant: u16,
        key: Key,
        value: &[u8],
    ) -> Result<Placement, CtlError> {
        self.place(rts, tenant, key, Some(value))
    }

    /// Like [`Controller::insert`] without a value: the slot is armed (CONTROL_ARM: entry
    /// installed, copy invalid, write mark cleared). The caller then reads the store and gives
    /// the value to [`Controller::refresh`], which the switch applies only if no write of the
    /// item passed it in between — so a write that completes while the value is being read
    /// can never leave an older value valid.
    pub fn insert_armed(
        &mut self,
        rts: Switches,
        tenant: u16,
        key: Key,
    ) -> Result<Placement, CtlError> {
        self.place(rts, tenant, key, None)
    }

    fn place(
        &mut self,
        rts: Switches,
        tenant: u16,
        key: Key,
        value: Option<&[u8]>,
    ) -> Result<Placement, CtlError> {
        self.check_path(rts)?;
        let armed = value.is_none();
        let value = value.unwrap_or_default();
        if value.len() > MADINC_MAX_VALUE_LEN {
            return Err(CtlError::ValueTooLong(value.len()));
        }
        if !self.tenants.contains_key(&tenant) {
            return Err(CtlError::UnknownTenant(tenant));
        }
        if let Some(p) = self.items.get(&(tenant, key)) {
            return Err(CtlError::Duplicate {
                tenant,
                key,
                switch: p.switch,
            });
        }
        let (page, offset) = self.next_slot(rts, tenant)?;
        let slot = page.page * PAGE_VALUES + offset;
        let s = page.switch;
        let value = value.to_vec();
        self.send(rts, s, tenant, key, |id, switch| {
            if armed {
                MadBody::Arm { id, switch, slot }
            } else {
                MadBody::Store {
                    op: StoreOp::Insert,
                    id,
                    switch,
                    slot,
                    value,
                }
            }
        })?;
        let t = self.tenants.get_mut(&tenant).expect("present");
        t.contents.get_mut(&page).expect("own page")[offset as usize] = Some(key);
        let p = Placement { switch: s, slot };
        self.items.insert((tenant, key), p);
        Ok(p)
    }

    /// Evicts (tenant, key) if cached; returns whether it was.
    pub fn evict(&mut self, rts: Switches, tenant: u16, key: Key) -> Result<bool, CtlError> {
        self.check_path(rts)?;
        let Some(p) = self.items.get(&(tenant, key)).copied() else {
            return Ok(false);
        };
        self.drop_item(rts, tenant, key)?;
        if let Some(t) = self.tenants.get_mut(&tenant) {
            let page = PageRef {
                switch: p.switch,
                page: p.slot / PAGE_VALUES,
            };
            if let Some(c) = t.contents.get_mut(&page) {
                c[(p.slot % PAGE_VALUES) as usize] = None;
            }
        }
        Ok(true)
    }

    /// Removes the item's lookup entry and invalidates its slot (page bookkeeping is the
    /// caller's).
    fn drop_item(&mut self, rts: Switches, tenant: u16, key: Key) -> Result<(), CtlError> {
        if let Some(p) = self.items.remove(&(tenant, key)) {
            self.send(rts, p.switch, tenant, key, |id, switch| MadBody::Evict {
                id,
                switch,
                slot: p.slot,
            })?;
        }
        Ok(())
    }

    /// The next free slot of the tenant: the active page's next offset, or a new active page.
    fn next_slot(&mut self, rts: Switches, tenant: u16) -> Result<(PageRef, u32), CtlError> {
        let n = self.free.len();
        let t = self.tenants.get_mut(&tenant).expect("present");
        if let Some((page, off)) = t.active {
            if off < PAGE_VALUES && t.contents.contains_key(&page) {
                t.active = Some((page, off + 1));
                return Ok((page, off));
            }
        }
        if t.held() == 0 {
            return Err(CtlError::NoTenantPages(tenant));
        }
        // Round-robin to the next switch where the tenant has pages; its LRU page.
        let mut s = t.next_switch % n;
        while t.lru[s].is_empty() {
            s = (s + 1) % n;
        }
        t.next_switch = (s + 1) % n;
        let page = t.lru[s].pop_front().expect("non-empty");
        t.lru[s].push_back(page);
        let pr = PageRef { switch: s, page };
        let old: Vec<Key> = t
            .contents
            .insert(pr, vec![None; PAGE_VALUES as usize])
            .unwrap_or_default()
            .into_iter()
            .flatten()
            .collect();
        t.active = Some((pr, 1));
        for k in old {
            self.drop_item(rts, tenant, k)?;
        }
        Ok((pr, 0))
    }

    /// A new value for a cached item (write-through: the switch invalidated its copy when the
    /// write passed; the store's answer refreshes it). Returns whether the item was cached.
    /// The switch applies it only while no write of the item has passed it (request or reply)
    /// since [`Controller::arm`] or [`Controller::insert_armed`]; otherwise it is refused with
    /// [`ReplyStatus::STALE`] (`CtlError::Refused`) and the copy stays invalid until the later
    /// write's own notice.
    pub fn refresh(
        &mut self,
        rts: Switches,
        tenant: u16,
        key: Key,
        value: &[u8],
    ) -> Result<bool, CtlError> {
        self.check_path(rts)?;
        if value.len() > MADINC_MAX_VALUE_LEN {
            return Err(CtlError::ValueTooLong(value.len()));
        }
        let Some(p) = self.items.get(&(tenant, key)).copied() else {
            return Ok(false);
        };
        let value = value.to_vec();
        self.send(rts, p.switch, tenant, key, |id, switch| MadBody::Store {
            op: StoreOp::Update,
            id,
            switch,
            slot: p.slot,
            value,
        })?;
        Ok(true)
    }

    /// Arms a cached item's slot before the caller reads the store for [`Controller::refresh`]
    /// (CONTROL_ARM: the copy invalid, the write mark cleared). Returns whether it was cached.
    pub fn arm(&mut self, rts: Switches, tenant: u16, key: Key) -> Result<bool, CtlError> {
        self.check_path(rts)?;
        let Some(p) = self.items.get(&(tenant, key)).copied() else {
            return Ok(false);
        };
        self.send(rts, p.switch, tenant, key, |id, switch| MadBody::Arm {
            id,
            switch,
            slot: p.slot,
        })?;
        Ok(true)
    }

    /// Like [`Controller::on_hot_report`], admitting the item armed and without a value
    /// ([`Controller::insert_armed`]); the caller reads the store, then [`Controller::refresh`].
    pub fn on_hot_report_armed(
        &mut self,
        rts: Switches,
        report: &MadMessage,
    ) -> Result<Option<Placement>, CtlError> {
        self.admit(rts, report, None)
    }

    /// A HOT_REPORT from a switch: admits its (tenant, key) with `value` (read from the store by
    /// the caller). Refused when it is not a HOT_REPORT, its tenant is unknown or its tag is not
    /// the tenant's secret. An item already cached anywhere on the path is not cached again:
    /// `Ok(None)` (the report is absorbed).
    pub fn on_hot_report(
        &mut self,
        rts: Switches,
        report: &MadMessage,
        value: &[u8],
    ) -> Result<Option<Placement>, CtlError> {
        self.admit(rts, report, Some(value))
    }

    fn admit(
        &mut self,
        rts: Switches,
        report: &MadMessage,
        value: Option<&[u8]>,
    ) -> Result<Option<Placement>, CtlError> {
        if !matches!(report.body, MadBody::HotReport { .. }) {
            return Err(CtlError::NotAReport(report.body.op()));
        }
        let t = self
            .tenants
            .get(&report.tenant)
            .ok_or(CtlError::UnknownTenant(report.tenant))?;
        if t.secret != report.tag {
            return Err(CtlError::ForgedTag(report.tenant));
        }
        if self.items.contains_key(&(report.tenant, report.key)) {
            return Ok(None);
        }
        self.place(rts, report.tenant, report.key, value).map(Some)
    }

    /// Clears every switch's count-min sketch and Bloom filter (the start of a new detection
    /// period: an item still hot is reported again).
    pub fn reset_sketches(&mut self, rts: Switches) -> Result<(), CtlError> {
        self.check_path(rts)?;
        for s in 0..self.free.len() {
            self.send(rts, s, 0, Key([0; 16]), |id, switch| MadBody::Reset {
                id,
                switch,
            })?;
        }
        Ok(())
    }

    /// The tenant's secret and hot threshold (for the clients and tests).
    pub fn tenant_secret(&self, tenant: u16) -> Option<(u32, u16)> {
        self.tenants
            .get(&tenant)
            .map(|t| (t.secret, t.hot_threshold))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policies_place_pages_along_the_path() {
        assert_eq!(
            plan(Policy::NearClient, &[2, 3, 3], 4),
            Some(vec![0, 0, 1, 1])
        );
        assert_eq!(
            plan(Policy::NearStore, &[2, 3, 3], 4),
            Some(vec![2, 2, 2, 1])
        );
        assert_eq!(
            plan(Policy::EvenSplit, &[1, 3, 3], 5),
            Some(vec![1, 2, 0, 1, 2])
        );
        assert_eq!(
            plan(Policy::EvenSplit, &[4, 4, 4], 4),
            Some(vec![0, 1, 2, 0])
        );
        assert_eq!(plan(Policy::EvenSplit, &[3, 4, 4], 1), Some(vec![1]));
        assert_eq!(plan(Policy::EvenSplit, &[1, 1, 1], 4), None);
        assert_eq!(plan(Policy::NearClient, &[0, 0], 0), Some(vec![]));
        // By load: the idle switch first, then spread as the estimate grows.
        assert_eq!(
            plan_loaded(Policy::LeastLoaded, &[4, 4, 4], &[900, 0, 300], 200.0, 4),
            Some(vec![1, 1, 2, 1])
        );
        assert_eq!(
            plan_loaded(Policy::LeastLoaded, &[4, 0, 4], &[900, 0, 300], 200.0, 2),
            Some(vec![2, 2])
        );
        assert_eq!(
            plan_loaded(Policy::LeastLoaded, &[1, 0], &[0, 0], 0.0, 2),
            None
        );
    }
}
