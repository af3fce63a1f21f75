//! Stateful externs the engine needs: two-rate three-color meters and the multicast
//! replication engine (groups, L1 nodes, LAGs).
//!
//! Stopgap: `tern-externs` is meant to own these (it does not exist yet); the semantics follow
//! `simple-switch.md` §3 and §8.

use std::collections::BTreeMap;
use tern_runtime::{McError, MeterError, MeterRate, NodeHandle, Port};

/// One token bucket.
#[derive(Clone, Debug, Default)]
struct Bucket {
    rate: f64,
    burst: u64,
    tokens: u64,
    credited: u64,
}

/// A meter: unconfigured (always green) or `rate_count` buckets in configuration order.
#[derive(Clone, Debug, Default)]
pub struct Meter {
    rates: Vec<MeterRate>,
    buckets: Vec<Bucket>,
    origin_us: u64,
}

impl Meter {
    /// Configure: rates in order committed, peak. Peak rate must be ≥ committed rate.
    pub fn set_rates(&mut self, rates: &[MeterRate], now_us: u64) -> Result<(), MeterError> {
        for w in rates.windows(2) {
            if w[1].units_per_micros < w[0].units_per_micros {
                return Err(MeterError::INVALID_INFO_RATE_VALUE);
            }
        }
        self.rates = rates.to_vec();
        self.buckets = rates
            .iter()
            .map(|r| Bucket {
                rate: r.units_per_micros,
                burst: r.burst_size as u64,
                tokens: r.burst_size as u64,
                credited: 0,
            })
            .collect();
        self.origin_us = now_us;
        Ok(())
    }

    pub fn rates(&self) -> &[MeterRate] {
        &self.rates
    }

    pub fn reset(&mut self) {
        *self = Meter::default();
    }

    /// Execute for `units`: 0 green, 1 yellow, 2 red.
    pub fn execute(&mut self, units: u64, now_us: u64) -> u32 {
        if self.buckets.is_empty() {
            return 0;
        }
        let t = now_us.saturating_sub(self.origin_us) as f64;
        for b in &mut self.buckets {
            let total = (t * b.rate).floor() as u64;
            let add = total.saturating_sub(b.credited);
            b.credited = total.max(b.credited);
            b.tokens = (b.tokens + add).min(b.burst);
        }
        for i in (0..self.buckets.len()).rev() {
            let b = &mut self.buckets[i];
            if b.tokens < units {
                return i as u32 + 1;
            }
            b.tokens -= units;
        }
        0
    }
}

/// A multicast L1 node.
#[derive(Clone, Debug)]
pub struct McNode {
    pub rid: u32,
    pub ports: Vec<Port>,
    pub lags: Vec<u16>,
    pub group: Option<u32>,
}

/// The packet replication engine (`SimplePreLAG`).
#[derive(Clone, Debug, Default)]
pub struct Pre {
    pub groups: BTreeMap<u32, Vec<NodeHandle>>,
    pub nodes: Vec<Option<McNode>>,
    pub lags: BTreeMap<u16, Vec<Port>>,
}

fn sorted_unique<T: Ord + Copy>(v: &[T]) -> Vec<T> {
    let mut v = v.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

impl Pre {
    pub fn mgrp_create(&mut self, mgid: u32) -> u32 {
        self.groups.entry(mgid).or_default();
        mgid
    }

    pub fn mgrp_destroy(&mut self, mgid: u32) -> Result<(), McError> {
        let nodes = self
            .groups
            .remove(&mgid)
            .ok_or(McError::INVALID_MGRP_HANDLE)?;
        for n in nodes {
            if let Some(Some(node)) = self.nodes.get_mut(n as usize) {
                node.group = None;
            }
        }
        Ok(())
    }

    pub fn node_create(
        &mut self,
        rid: u32,
        ports: &[Port],
        lags: &[u16],
    ) -> Result<NodeHandle, McError> {
        let node = McNode {
            rid,
            ports: sorted_unique(ports),
            lags: sorted_unique(lags),
            group: None,
        };
        let idx = match self.nodes.iter().position(|n| n.is_none()) {
            Some(i) => i,
            None => {
                if self.nodes.len() >= 4096 {
                    return Err(McError::TABLE_FULL);
                }
                self.nodes.push(None);
                self.nodes.len() - 1
            }
        };
        self.nodes[idx] = Some(node);
        Ok(idx as NodeHandle)
    }

    fn node_mut(&mut self, n: NodeHandle) -> Result<&mut McNode, McError> {
        self.nodes
            .get_mut(n as usize)
            .and_then(|x| x.as_mut())
            .ok_or(McError::INVALID_L1_HANDLE)
    }

    pub fn node_update(
        &mut self,
        n: NodeHandle,
        ports: &[Port],
        lags: &[u16],
    ) -> Result<(), McError> {
        let node = self.node_mut(n)?;
        node.ports = sorted_unique(ports);
        node.lags = sorted_unique(lags);
        Ok(())
    }

    pub fn node_associate(&mut self, mgid: u32, n: NodeHandle) -> Result<(), McError> {
        if !self.groups.contains_key(&mgid) {
            return Err(McError::INVALID_MGRP_HANDLE);
        }
        let node = self.node_mut(n)?;
        if node.group.is_some() {
            return Err(McError::ERROR);
        }
        node.group = Some(mgid);
        self.groups.entry(mgid).or_default().push(n);
        Ok(())
    }

    pub fn node_dissociate(&mut self, mgid: u32, n: NodeHandle) -> Result<(), McError> {
        if !self.groups.contains_key(&mgid) {
            return Err(McError::INVALID_MGRP_HANDLE);
        }
        let node = self.node_mut(n)?;
        if node.group != Some(mgid) {
            return Err(McError::ERROR);
        }
        node.group = None;
        if let Some(g) = self.groups.get_mut(&mgid) {
            g.retain(|x| *x != n);
        }
        Ok(())
    }

    pub fn node_destroy(&mut self, n: NodeHandle) -> Result<(), McError> {
        let g = self.node_mut(n)?.group;
        if let Some(g) = g {
            self.node_dissociate(g, n)?;
        }
        self.nodes[n as usize] = None;
        Ok(())
    }

    pub fn set_lag_membership(&mut self, lag: u16, ports: &[Port]) {
        self.lags.insert(lag, sorted_unique(ports));
    }

    /// Replicate for group `mgid`: `(port, rid)` in BMv2's order.
    pub fn replicate(&self, mgid: u32, out: &mut Vec<(Port, u32)>) {
        let Some(nodes) = self.groups.get(&mgid) else {
            return;
        };
        for n in nodes {
            let Some(Some(node)) = self.nodes.get(*n as usize) else {
                continue;
            };
            for p in &node.ports {
                out.push((*p, node.rid));
            }
            for l in &node.lags {
                if let Some(members) = self.lags.get(l) {
                    if !members.is_empty() {
                        out.push((members[255 % members.len()], node.rid));
                    }
                }
            }
        }
    }

    /// `bm_mc_get_entries` JSON: `mgrps`, `l1_handles`, `l2_handles`, `lags`.
    pub fn dump_json(&self) -> String {
        let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(",");
        let mgrps = list(&mut self.groups.iter().map(|(g, nodes)| {
            format!(
                "{{\"id\":{g},\"l1_handles\":[{}]}}",
                list(&mut nodes.iter().map(|n| n.to_string()))
            )
        }));
        let live = || {
            self.nodes
                .iter()
                .enumerate()
                .filter_map(|(h, n)| n.as_ref().map(|n| (h, n)))
        };
        let l1 = list(
            &mut live()
                .map(|(h, n)| format!("{{\"handle\":{h},\"rid\":{},\"l2_handle\":{h}}}", n.rid)),
        );
        let l2 = list(&mut live().map(|(h, n)| {
            format!(
                "{{\"handle\":{h},\"ports\":[{}],\"lags\":[{}]}}",
                list(&mut n.ports.iter().map(|p| p.to_string())),
                list(&mut n.lags.iter().map(|p| p.to_string()))
            )
        }));
        let lags = list(&mut self.lags.iter().map(|(l, ports)| {
            format!(
                "{{\"id\":{l},\"ports\":[{}]}}",
                list(&mut ports.iter().map(|p| p.to_string()))
            )
        }));
        format!(
            "{{\"mgrps\":[{mgrps}],\"l1_handles\":[{l1}],\"l2_handles\":[{l2}],\"lags\":[{lags}]}}"
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meter_colors() {
        let mut m = Meter::default();
        assert_eq!(m.execute(1, 0), 0);
        let r = |u, b| MeterRate {
            units_per_micros: u,
            burst_size: b,
        };
        assert_eq!(
            m.set_rates(&[r(2.0, 1), r(1.0, 1)], 0),
            Err(MeterError::INVALID_INFO_RATE_VALUE)
        );
        m.set_rates(&[r(0.000001, 1), r(0.000002, 2)], 0).unwrap();
        assert_eq!(m.execute(1, 0), 0); // both buckets full
        assert_eq!(m.execute(1, 0), 1); // committed empty, peak has one
        assert_eq!(m.execute(1, 0), 2); // peak empty
        assert_eq!(m.execute(1, 1_000_000), 0); // one token each after 1 s
    }

    #[test]
    fn pre_replication_order() {
        let mut p = Pre::default();
        p.mgrp_create(1);
        let a = p.node_create(7, &[5, 1], &[]).unwrap();
        let b = p.node_create(8, &[2], &[3]).unwrap();
        p.set_lag_membership(3, &[10, 11, 12]);
        p.node_associate(1, b).unwrap();
        p.node_associate(1, a).unwrap();
        assert_eq!(p.node_associate(1, a), Err(McError::ERROR));
        let mut out = vec![];
        p.replicate(1, &mut out);
        assert_eq!(out, vec![(2, 8), (10, 8), (1, 7), (5, 7)]);
        p.node_destroy(b).unwrap();
        out.clear();
        p.replicate(1, &mut out);
        assert_eq!(out, vec![(1, 7), (5, 7)]);
        assert_eq!(p.node_create(0, &[], &[]).unwrap(), 1);
        let j = p.dump_json();
        assert_eq!(
            j,
            "{\"mgrps\":[{\"id\":1,\"l1_handles\":[0]}],\"l1_handles\":[{\"handle\":0,\"rid\":7,\"l2_handle\":0},{\"handle\":1,\"rid\":0,\"l2_handle\":1}],\"l2_handles\":[{\"handle\":0,\"ports\":[1,5],\"lags\":[]},{\"handle\":1,\"ports\":[],\"lags\":[]}],\"lags\":[{\"id\":3,\"ports\":[10,11,12]}]}"
        );
    }
}
