//! MADINC's control plane for `p4/kv/madinc.p4` over a path of switches (index 0 nearest the
//! clients, the last nearest the store): tenants arriving and leaving at run time, cache pages
//! of 128 values handed out by a policy (near-client, near-store, even-split) within each
//! tenant's quota, per-tenant page tables (round-robin over the tenant's switches, LRU pages on
//! each), and item placement with no item cached on two switches. It drives the switches only
//! through tern's runtime interface ([`Runtime`]): table `tenant`, table `cache_lookup`, registers
//! `page_owner_reg`, `valid_reg`, `vallen_reg`, `val_reg`.

use crate::madinc::{MadBody, MadMessage, MadOp, MADINC_MAX_VALUE_LEN, PAGE_VALUES};
use crate::protocol::Key;
use std::collections::{HashMap, VecDeque};
use tern_runtime::{EntryHandle, MatchParam, Runtime};

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

/// One runtime per switch of the path, in path order.
pub type Switches<'a, 'b> = &'a mut [&'b mut dyn Runtime];

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
    /// tenant table entry handle per switch.
    handles: Vec<EntryHandle>,
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
    /// Every cached item: (tenant, key) → placement and lookup entry handle.
    items: HashMap<(u16, Key), (Placement, EntryHandle)>,
}

fn rt_err(switch: usize) -> impl Fn(tern_runtime::RuntimeError) -> CtlError {
    move |e| CtlError::Runtime {
        switch,
        msg: e.to_string(),
    }
}

/// Writes a value into a slot: invalid while the words change, valid after.
fn write_value(
    rt: &mut dyn Runtime,
    switch: usize,
    slot: u32,
    value: &[u8],
) -> Result<(), CtlError> {
    let e = rt_err(switch);
    rt.register_write(&format!("{P}valid_reg"), slot, 0)
        .map_err(&e)?;
    rt.register_write(&format!("{P}vallen_reg"), slot, value.len() as u64)
        .map_err(&e)?;
    for (i, w) in value.chunks(8).enumerate() {
        let mut b = [0u8; 8];
        b[..w.len()].copy_from_slice(w);
        rt.register_write(
            &format!("{P}val_reg"),
            slot * WORDS + i as u32,
            u64::from_be_bytes(b),
        )
        .map_err(&e)?;
    }
    rt.register_write(&format!("{P}valid_reg"), slot, 1)
        .map_err(&e)
}

/// Which switch each of `n` new pages goes to under `policy`, given the free pages per switch
/// (`None` when fewer than `n` pages are free).
pub fn plan(policy: Policy, free: &[u32], n: u32) -> Option<Vec<usize>> {
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
    };
    match policy {
        Policy::NearClient | Policy::NearStore => {
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
        }
    }

    fn check_path(&self, rts: &[&mut dyn Runtime]) -> Result<(), CtlError> {
        if rts.len() != self.free.len() {
            return Err(CtlError::PathMismatch {
                given: rts.len(),
                path: self.free.len(),
            });
        }
        Ok(())
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
        self.items.get(&(tenant, key)).map(|(p, _)| *p)
    }

    /// Number of cached items.
    pub fn items(&self) -> usize {
        self.items.len()
    }

    /// A tenant arrives: installed on every switch of the path (so its packets pass the tenant
    /// check everywhere), then `pages` pages allocated under `policy`. Refused when the id is
    /// taken, `pages` exceeds `quota`, or the path has too few free pages; nothing changes then.
    pub fn add_tenant(&mut self, rts: Switches, spec: TenantSpec) -> Result<(), CtlError> {
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
        self.check_alloc(tenant, 0, quota, pages)?;
        let mut handles = Vec::new();
        for (i, rt) in rts.iter_mut().enumerate() {
            let h = rt
                .mt_add_entry(
                    &format!("{P}tenant"),
                    &[MatchParam::Exact(tenant.to_be_bytes().to_vec())],
                    &format!("{P}set_tenant"),
                    &[
                        secret.to_be_bytes().to_vec(),
                        hot_threshold.to_be_bytes().to_vec(),
                    ],
                    None,
                )
                .map_err(rt_err(i))?;
            handles.push(h);
        }
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
                handles,
            },
        );
        self.alloc_pages(rts, tenant, pages, policy)
    }

    fn check_alloc(&self, tenant: u16, held: u32, quota: u32, n: u32) -> Result<(), CtlError> {
        if held as u64 + n as u64 > quota as u64 {
            return Err(CtlError::Quota {
                tenant,
                asked: n,
                held,
                quota,
            });
        }
        let free: u32 = self.free_pages().iter().sum();
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
        self.check_alloc(tenant, t.held(), t.quota, n)?;
        let targets = plan(policy, &self.free_pages(), n).expect("checked above");
        for s in targets {
            let page = self.free[s].remove(0);
            rts[s]
                .register_write(&format!("{P}page_owner_reg"), page, tenant as u64 + 1)
                .map_err(rt_err(s))?;
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
        for k in keys {
            self.drop_item(rts, tenant, k)?;
        }
        for (s, q) in t.lru.iter().enumerate() {
            for &page in q {
                rts[s]
                    .register_write(&format!("{P}page_owner_reg"), page, 0)
                    .map_err(rt_err(s))?;
                let at = self.free[s].partition_point(|&p| p < page);
                self.free[s].insert(at, page);
            }
        }
        for (s, h) in t.handles.iter().enumerate() {
            rts[s]
                .mt_delete_entry(&format!("{P}tenant"), *h)
                .map_err(rt_err(s))?;
        }
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
        self.check_path(rts)?;
        if value.len() > MADINC_MAX_VALUE_LEN {
            return Err(CtlError::ValueTooLong(value.len()));
        }
        if !self.tenants.contains_key(&tenant) {
            return Err(CtlError::UnknownTenant(tenant));
        }
        if let Some((p, _)) = self.items.get(&(tenant, key)) {
            return Err(CtlError::Duplicate {
                tenant,
                key,
                switch: p.switch,
            });
        }
        let (page, offset) = self.next_slot(rts, tenant)?;
        let slot = page.page * PAGE_VALUES + offset;
        let s = page.switch;
        write_value(&mut *rts[s], s, slot, value)?;
        let rt = &mut *rts[s];
        let e = rt_err(s);
        let k = tenant.to_be_bytes().to_vec();
        let h = rt
            .mt_add_entry(
                &format!("{P}cache_lookup"),
                &[MatchParam::Exact(k), MatchParam::Exact(key.0.to_vec())],
                &format!("{P}set_slot"),
                &[slot.to_be_bytes().to_vec()],
                None,
            )
            .map_err(&e)?;
        let t = self.tenants.get_mut(&tenant).expect("present");
        t.contents.get_mut(&page).expect("own page")[offset as usize] = Some(key);
        let p = Placement { switch: s, slot };
        self.items.insert((tenant, key), (p, h));
        Ok(p)
    }

    /// Evicts (tenant, key) if cached; returns whether it was.
    pub fn evict(&mut self, rts: Switches, tenant: u16, key: Key) -> Result<bool, CtlError> {
        self.check_path(rts)?;
        let Some((p, _)) = self.items.get(&(tenant, key)).copied() else {
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
        if let Some((p, h)) = self.items.remove(&(tenant, key)) {
            let rt = &mut *rts[p.switch];
            rt.mt_delete_entry(&format!("{P}cache_lookup"), h)
                .map_err(rt_err(p.switch))?;
            rt.register_write(&format!("{P}valid_reg"), p.slot, 0)
                .map_err(rt_err(p.switch))?;
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
        let Some((p, _)) = self.items.get(&(tenant, key)).copied() else {
            return Ok(false);
        };
        write_value(&mut *rts[p.switch], p.switch, p.slot, value)?;
        Ok(true)
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
        self.insert(rts, report.tenant, report.key, value).map(Some)
    }

    /// Clears every switch's count-min sketch and Bloom filter (the start of a new detection
    /// period: an item still hot is reported again).
    pub fn reset_sketches(&mut self, rts: Switches) -> Result<(), CtlError> {
        self.check_path(rts)?;
        for (i, rt) in rts.iter_mut().enumerate() {
            for r in [
                "cm1_reg", "cm2_reg", "cm3_reg", "cm4_reg", "bf1_reg", "bf2_reg", "bf3_reg",
            ] {
                rt.register_reset(&format!("{P}{r}")).map_err(rt_err(i))?;
            }
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
    }
}
