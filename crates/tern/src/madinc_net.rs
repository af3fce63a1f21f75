//! A MADINC network: N tern switches running `p4/kv/madinc.p4` (in this process, or each a
//! `tern kv madinc-switch` process reached over loopback UDP: `Net::start_with`) in a line or a
//! star, real RocksDB storage servers (tern-kv's, one per store) on loopback UDP, a switch
//! agent per switch and the controller (`tern_kv::madinc_ctl`) reaching them only through
//! acknowledged, retried control messages (`tern_kv::madinc_wire`), with loss injected on every
//! control link. The driver carries each request frame hop by hop along its tenant's route
//! (client side first): a switch that answers sends the reply back through the switches it
//! passed; a request no switch answers goes to the tenant's store server over UDP and the
//! store's reply comes back through the route. HOT_REPORT clones (mirror session 250, port 3)
//! go to the switch's agent, which sends them to the controller until acknowledged; servers tell
//! the controller of every tenant write (write-through re-validation).
//!
//! Line: client – s0 – s1 – … – s(N−1) – stores; every route is the whole line. Star (N ≥ 3):
//! s0 is the core, s1 … s(N−1) leaves; tenant i's client sits on leaf 1 + i mod (N−1), its store
//! on the next leaf, so its route is leaf, core, leaf.

use anyhow::{bail, Context};
use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tern_dataplane::{Switch, SwitchOptions};
use tern_kv::madinc::{MadBody, MadMessage, StoreOp};
use tern_kv::madinc_auth::AuthKey;
use tern_kv::madinc_ctl::{Controller, Policy, TenantSpec};
use tern_kv::madinc_wire::{call, Inbox, Link, Loss, SwitchAgent, WirePath};
use tern_kv::protocol::Key;
use tern_kv::server::{ServerConfig, ServerHandle};
use tern_runtime::{MatchParam, MirroringSession, OutputPacket, PacketPath, Runtime};

const CLIENT_IP: [u8; 4] = [10, 77, 1, 1];
const STORE_IP: [u8; 4] = [10, 77, 2, 1];
const CPU_PORT: u32 = 3;

/// How the switches are joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum Topology {
    /// Client, s0 … s(N−1), stores.
    Line,
    /// Core s0, leaves s1 … s(N−1).
    Star,
}

impl std::str::FromStr for Topology {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Topology> {
        match s {
            "line" => Ok(Topology::Line),
            "star" => Ok(Topology::Star),
            _ => bail!("unknown topology {s:?} (line or star)"),
        }
    }
}

/// A network's shape and control-link behaviour.
#[derive(Clone, Debug)]
pub struct NetConfig {
    /// Line or star.
    pub topology: Topology,
    /// Switches (star: at least 3).
    pub switches: usize,
    /// Cache pages per switch (at most the program's 64).
    pub pages: u32,
    /// Loss injected on every control link (reports, notices, control messages, their acks).
    pub loss: Loss,
    /// Retry interval of the control links.
    pub retry: Duration,
}

/// Who answered a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    /// The switch at this position of the route (0 = nearest the client).
    Switch(usize),
    /// The store, after the whole route.
    Store,
    /// Nobody: the request was dropped (unknown or forged tenant, malformed).
    Dropped,
}

/// Counters of a network.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct NetStats {
    /// HOT_REPORTs the switches produced.
    pub reports_made: u64,
    /// HOT_REPORTs the controller received (each once), `reports_tenant_gone` included.
    pub reports_delivered: u64,
    /// HOT_REPORTs received after their tenant had left (made while it was there, in flight
    /// when it left): dropped, not applied, and not lost.
    pub reports_tenant_gone: u64,
    /// Write notices received after their tenant had left (dropped).
    pub notices_tenant_gone: u64,
    /// Items admitted on a report.
    pub admitted: u64,
    /// Reports absorbed (item already cached, not in the store) or refused (quota, no page).
    pub absorbed: u64,
    /// Write notices the controller received for tenants present.
    pub notices: u64,
    /// Cached copies refreshed after a write.
    pub refreshed: u64,
    /// Refreshes (and admissions) the switch refused as stale: a write of the item passed it
    /// between the arming of the slot and the value's arrival (the copy stays invalid).
    pub stale: u64,
}

struct TenantInfo {
    secret: u32,
    route: Vec<usize>,
    store: usize,
}

/// Tests: a step run between the controller's store read and its refresh.
#[cfg(test)]
type Between = Box<dyn FnMut(&mut Net) + Send>;

/// The network; everything is stopped on drop.
pub struct Net {
    cfg: NetConfig,
    sw: Arc<Vec<Hop>>,
    agents: Arc<Vec<SwitchAgent>>,
    /// This driver's socket toward switch processes.
    swsock: UdpSocket,
    /// HOT_REPORT clones the switches produced (the driver's and every [`NetClient`]'s).
    reports_made: Arc<std::sync::atomic::AtomicU64>,
    /// One-way delay of every link traversal (client–switch, switch–switch, switch–store).
    hop: Duration,
    path: WirePath,
    ctl: Controller,
    /// The controller's receiving thread: acknowledges at once and queues for [`Net::pump`].
    inbox: Arc<Mutex<Inbox>>,
    queue: std::sync::mpsc::Receiver<MadMessage>,
    stop: Arc<std::sync::atomic::AtomicBool>,
    reader: Option<std::thread::JoinHandle<()>>,
    servers: Vec<ServerHandle>,
    sock: UdpSocket,
    tenants: std::collections::HashMap<u16, TenantInfo>,
    stats: NetStats,
    _links: Vec<Arc<Link>>,
    /// Each switch's read-hit count at the last rebalance.
    hits_seen: Vec<u64>,
    /// The deployment's control key.
    #[cfg_attr(not(test), allow(dead_code))]
    key: AuthKey,
    /// Tests: runs between the controller's store read and its refresh (to put a write there).
    #[cfg(test)]
    between: Option<Between>,
    /// Tests: how long (µs) the receiving thread waits before it queues a message for the
    /// controller (a descheduled thread on a busy machine).
    #[cfg(test)]
    hand_over_delay: Arc<std::sync::atomic::AtomicU64>,
}

/// MADINC's switch program.
pub const MADINC_P4: &str = include_str!("../../../p4/kv/madinc.p4");

/// madinc.p4 compiled once per process.
fn program() -> anyhow::Result<String> {
    static JSON: std::sync::OnceLock<Result<String, String>> = std::sync::OnceLock::new();
    JSON.get_or_init(|| {
        tern_p4::compile_str(MADINC_P4, "p4/kv/madinc.p4", &Default::default())
            .map(|c| c.json)
            .map_err(|e| format!("compiling p4/kv/madinc.p4: {e:?}"))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// An Ethernet/IPv4/UDP frame around a MADINC payload.
fn frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![2, 0x77, 0, 0, 0, 2, 2, 0x77, 0, 0, 0, 1, 8, 0];
    let total = 28 + payload.len() as u16;
    f.extend_from_slice(&[0x45, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 0, 0, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&sport.to_be_bytes());
    f.extend_from_slice(&dport.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

impl Net {
    /// Starts the switches, their agents, one storage server per store (data under `dir`) and
    /// the controller's links.
    #[cfg_attr(not(test), allow(dead_code))]
    pub fn start(cfg: NetConfig, stores: usize, dir: &Path) -> anyhow::Result<Net> {
        Net::start_with(cfg, stores, dir, None)
    }

    /// Like [`Net::start`]; with `processes` (the tern executable), every switch is a
    /// `tern kv madinc-switch` process of its own (its pipeline and its agent), reached over
    /// loopback UDP, stopped with the network (and when this process dies: its stdin closes).
    pub fn start_with(
        cfg: NetConfig,
        stores: usize,
        dir: &Path,
        processes: Option<&Path>,
    ) -> anyhow::Result<Net> {
        Net::start_inner(cfg, stores, dir, processes.map(|e| (e, None)))
    }

    /// Every switch a `tern kv madinc-switch` process in a network namespace of its own, joined
    /// to this one by a veth pair (10.79.i.1 here, 10.79.i.2 there) with `tc netem` delaying
    /// each direction by `delay`: every frame a switch processes crosses its link twice.
    /// Needs root; the namespaces are removed with the network (and stale ones of dead runs at
    /// the next start).
    pub fn start_netns(
        cfg: NetConfig,
        stores: usize,
        dir: &Path,
        exe: &Path,
        delay: Duration,
    ) -> anyhow::Result<Net> {
        netns::remove_stale();
        Net::start_inner(cfg, stores, dir, Some((exe, Some(delay))))
    }

    fn start_inner(
        cfg: NetConfig,
        stores: usize,
        dir: &Path,
        processes: Option<(&Path, Option<Duration>)>,
    ) -> anyhow::Result<Net> {
        if cfg.switches == 0 || (cfg.topology == Topology::Star && cfg.switches < 3) {
            bail!(
                "a {:?} topology needs at least {} switches, {} given",
                cfg.topology,
                if cfg.topology == Topology::Star { 3 } else { 1 },
                cfg.switches
            );
        }
        if cfg.pages == 0 || cfg.pages > 64 {
            bail!("{} pages per switch: madinc.p4 has 1 to 64", cfg.pages);
        }
        if stores == 0 {
            bail!("at least one store is needed");
        }
        let json = program()?;
        // The deployment's control key: every control datagram (controller ↔ agents, agents'
        // reports, stores' notices, their acknowledgements) is sealed with it.
        let key = AuthKey::random();
        // In namespaces the switches reach the controller through their veths.
        let any = matches!(processes, Some((_, Some(_))));
        let bind: [u8; 4] = if any { [0, 0, 0, 0] } else { [127, 0, 0, 1] };
        let inbox = Inbox::bind((bind, 0).into(), cfg.loss)?.with_auth(key);
        let ctl_addr = inbox.addr()?;
        let mut sw = Vec::new();
        let mut agents = Vec::new();
        let mut addrs: Vec<SocketAddr> = Vec::new();
        // netns without netem: the link delay by sleeping, as `Net::set_hop_delay`.
        let mut sleep_links = None;
        for i in 0..cfg.switches {
            let loss = Loss {
                per_million: cfg.loss.per_million,
                seed: cfg.loss.seed.wrapping_add(100 + i as u64),
            };
            if let Some((exe, delay)) = processes {
                let ns = match delay {
                    Some(d) => {
                        let (ns, netem) = netns::make(i, d)?;
                        if !netem && sleep_links.is_none() {
                            eprintln!(
                                "madinc netns: no tc netem in this kernel (sch_netem); the driver \
                                 delays each link traversal by {} µs instead",
                                d.as_micros()
                            );
                            sleep_links = Some(d);
                        }
                        Some(ns)
                    }
                    None => None,
                };
                let ctl = match &ns {
                    Some(_) => SocketAddr::from((netns::here(i), ctl_addr.port())),
                    None => ctl_addr,
                };
                let r = RemoteSwitch::spawn(exe, i, ctl, cfg.retry, loss, key, ns)?;
                addrs.push(r.agent);
                sw.push(Hop::Remote(r));
                continue;
            }
            let s = Arc::new(Mutex::new(madinc_switch(&json, i)?));
            let agent =
                SwitchAgent::start_auth(s.clone(), Some(ctl_addr), cfg.retry, loss, Some(key))?;
            addrs.push(agent.addr());
            agents.push(agent);
            sw.push(Hop::Local(s));
        }
        let path = WirePath::connect_auth(&addrs, cfg.retry, u32::MAX, cfg.loss, Some(key))?;
        let mut servers = Vec::new();
        let mut links = Vec::new();
        for j in 0..stores {
            let mut sc = ServerConfig::new(dir.join(format!("store{j}")), 0);
            sc.index = j as u16;
            let h = tern_kv::server::start(&sc)
                .with_context(|| format!("starting store {j} under {}", dir.display()))?;
            let link = Arc::new(Link::start_auth(
                ctl_addr,
                cfg.retry,
                u32::MAX,
                Loss {
                    per_million: cfg.loss.per_million,
                    seed: cfg.loss.seed.wrapping_add(1000 + j as u64),
                },
                Some(key),
            )?);
            h.cache_ctl().set_madinc_controller(Some(link.clone()));
            links.push(link);
            servers.push(h);
        }
        let sock = UdpSocket::bind("127.0.0.1:0")?;
        let inbox = Arc::new(Mutex::new(inbox));
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (tx, queue) = std::sync::mpsc::channel();
        #[cfg(test)]
        let hand_over_delay = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let reader = {
            let (inbox, stop) = (inbox.clone(), stop.clone());
            #[cfg(test)]
            let delay = hand_over_delay.clone();
            std::thread::Builder::new()
                .name("madinc-ctl-rx".into())
                .spawn(move || {
                    // A message is queued for the controller before its acknowledgement
                    // leaves: once a sender's link is idle, all it sent is in the queue
                    // (`Net::settle` relies on it).
                    let mut closed = false;
                    while !closed && !stop.load(std::sync::atomic::Ordering::Acquire) {
                        let got = inbox.lock().unwrap_or_else(|p| p.into_inner()).serve(
                            Duration::from_millis(2),
                            &mut |m| {
                                #[cfg(test)]
                                {
                                    let d = delay.load(std::sync::atomic::Ordering::Relaxed);
                                    std::thread::sleep(Duration::from_micros(d));
                                }
                                closed |= tx.send(m.clone()).is_err();
                                tern_kv::madinc::ReplyStatus::OK
                            },
                        );
                        if let Err(e) = got {
                            eprintln!("madinc controller: receive failed: {e}");
                            std::thread::sleep(Duration::from_millis(2));
                        }
                    }
                })?
        };
        Ok(Net {
            ctl: Controller::new(&vec![cfg.pages; cfg.switches]),
            cfg,
            sw: Arc::new(sw),
            swsock: UdpSocket::bind("0.0.0.0:0")?,
            agents: Arc::new(agents),
            reports_made: Default::default(),
            hop: sleep_links.unwrap_or(Duration::ZERO),
            path,
            inbox,
            queue,
            stop,
            reader: Some(reader),
            servers,
            sock,
            tenants: Default::default(),
            stats: NetStats::default(),
            _links: links,
            hits_seen: Vec::new(),
            key,
            #[cfg(test)]
            between: None,
            #[cfg(test)]
            hand_over_delay,
        })
    }

    /// The route of tenant `id` (client side first) and its store.
    fn route_of(&self, id: u16) -> (Vec<usize>, usize) {
        let n = self.cfg.switches;
        let stores = self.servers.len();
        match self.cfg.topology {
            Topology::Line => ((0..n).collect(), id as usize % stores),
            Topology::Star => {
                let leaves = n - 1;
                let c = 1 + id as usize % leaves;
                let s = 1 + (id as usize + 1) % leaves;
                (vec![c, 0, s], id as usize % stores)
            }
        }
    }

    /// A tenant arrives with `pages` pages (its quota) placed by `policy` on its route.
    pub fn add_tenant(
        &mut self,
        id: u16,
        secret: u32,
        hot_threshold: u16,
        pages: u32,
        policy: Policy,
    ) -> anyhow::Result<()> {
        let (route, store) = self.route_of(id);
        self.ctl.add_tenant_on(
            &mut self.path,
            TenantSpec {
                id,
                secret,
                hot_threshold,
                quota: pages,
                pages,
                policy,
            },
            &route,
        )?;
        self.tenants.insert(
            id,
            TenantInfo {
                secret,
                route,
                store,
            },
        );
        Ok(())
    }

    /// A tenant leaves (its items evicted, pages freed, tenant entries removed).
    pub fn remove_tenant(&mut self, id: u16) -> anyhow::Result<()> {
        self.ctl.remove_tenant(&mut self.path, id)?;
        self.tenants.remove(&id);
        Ok(())
    }

    /// Sends one request of `tenant` (carrying `tag`) along the tenant's route; returns who
    /// answered and the reply.
    pub fn request(
        &mut self,
        tenant: u16,
        tag: u32,
        key: Key,
        body: MadBody,
    ) -> anyhow::Result<(Answer, Option<MadMessage>)> {
        let (route, store) = match self.tenants.get(&tenant) {
            Some(t) => (t.route.clone(), t.store),
            None => self.route_of(tenant),
        };
        let req = MadMessage {
            tenant,
            tag,
            key,
            body,
        };
        self.wire()
            .carry(&self.sock, &route, self.servers[store].addr(), &req)
    }

    fn wire(&self) -> Wire<'_> {
        Wire {
            sw: &self.sw,
            agents: &self.agents,
            reports: &self.reports_made,
            hop: self.hop,
            swsock: &self.swsock,
        }
    }

    #[cfg(test)]
    /// One switch processes a frame; HOT_REPORT clones go to its agent.
    fn pass(&mut self, s: usize, port: u32, f: &[u8]) -> anyhow::Result<Vec<OutputPacket>> {
        self.wire().pass(s, port, f)
    }

    #[cfg(test)]
    /// Carries a reply back through `passed` (in reverse) and decodes it at the client.
    fn back(&mut self, passed: &[usize], f: &[u8]) -> anyhow::Result<MadMessage> {
        self.wire().back(passed, f)
    }

    /// Sets the one-way delay of every link traversal (as `tc netem` on each link of a
    /// topology): a read answered by the route's h-th switch crosses 2 (h + 1) links, one
    /// answered by the store 2 (route + 1). Zero (the default) sleeps nowhere.
    pub fn set_hop_delay(&mut self, d: Duration) {
        self.hop = d;
    }

    /// A client of `tenant` that can run on its own thread beside the driver (closed-loop
    /// load): its own socket, the tenant's route and store, the shared switches and agents.
    pub fn client(&self, tenant: u16) -> anyhow::Result<NetClient> {
        let t = self
            .tenants
            .get(&tenant)
            .with_context(|| format!("tenant {tenant} is not in the network"))?;
        Ok(NetClient {
            sw: self.sw.clone(),
            agents: self.agents.clone(),
            reports: self.reports_made.clone(),
            hop: self.hop,
            sock: UdpSocket::bind("127.0.0.1:0")?,
            swsock: UdpSocket::bind("0.0.0.0:0")?,
            route: t.route.clone(),
            store: self.servers[t.store].addr(),
            tenant,
            tag: t.secret,
        })
    }

    /// Reads (tenant's own tag) → who answered and the value.
    pub fn read(&mut self, tenant: u16, key: Key) -> anyhow::Result<(Answer, Option<Vec<u8>>)> {
        let tag = self.tenants.get(&tenant).map_or(0, |t| t.secret);
        let (a, r) = self.request(tenant, tag, key, MadBody::ReadRequest)?;
        Ok((
            a,
            r.and_then(|m| match m.body {
                MadBody::ReadReply {
                    found: true, value, ..
                } => Some(value),
                _ => None,
            }),
        ))
    }

    /// Writes (tenant's own tag); true when the store acknowledged.
    pub fn write(&mut self, tenant: u16, key: Key, value: &[u8]) -> anyhow::Result<bool> {
        let tag = self.tenants.get(&tenant).map_or(0, |t| t.secret);
        let (_, r) = self.request(
            tenant,
            tag,
            key,
            MadBody::WriteRequest {
                value: value.to_vec(),
            },
        )?;
        Ok(matches!(
            r.map(|m| m.body),
            Some(MadBody::WriteReply { stored: true, .. })
        ))
    }

    /// The controller's turn: takes every report and write notice that arrived (waiting up to
    /// `wait` for the first), admits reported items (value read from the tenant's store) and
    /// refreshes written ones.
    pub fn pump(&mut self, wait: Duration) -> anyhow::Result<usize> {
        let mut msgs = Vec::new();
        let mut w = wait;
        loop {
            let m = if w.is_zero() {
                self.queue.try_recv().ok()
            } else {
                self.queue.recv_timeout(w).ok()
            };
            let Some(m) = m else { break };
            msgs.push(m);
            w = Duration::ZERO;
        }
        let n = msgs.len();
        for m in msgs {
            let report = matches!(m.body, MadBody::HotReport { .. });
            if report {
                self.stats.reports_delivered += 1;
            }
            // A report or notice of a tenant that has left since is void: dropped, counted
            // with that reason. Its tag tells an id given to a new tenant since (another
            // secret) from the one that made it.
            let Some(t) = self.tenants.get(&m.tenant).filter(|t| t.secret == m.tag) else {
                if report {
                    self.stats.reports_tenant_gone += 1;
                } else {
                    self.stats.notices_tenant_gone += 1;
                }
                continue;
            };
            let store = self.servers[t.store].addr();
            match &m.body {
                MadBody::HotReport { .. } => {
                    // An item that is not in the store is not cached.
                    if self.store_value(store, &m)?.is_none() {
                        self.stats.absorbed += 1;
                        continue;
                    }
                    // Admitted armed (entry installed, copy invalid, write mark clear), then
                    // the value read and written only if no write passed in between.
                    match self.ctl.on_hot_report_armed(&mut self.path, &m) {
                        Ok(Some(_)) => {
                            self.stats.admitted += 1;
                            self.revalidate(store, &m)?;
                        }
                        Ok(None) => self.stats.absorbed += 1,
                        Err(tern_kv::madinc_ctl::CtlError::NoTenantPages(_)) => {
                            self.stats.absorbed += 1
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                MadBody::Store {
                    op: StoreOp::Update,
                    ..
                } => {
                    self.stats.notices += 1;
                    // Arm the slot, then read the store's current value (a later write may
                    // have overtaken this notice), then refresh: refused as stale if a write
                    // passed the switch since the arm (its own notice follows).
                    if self.ctl.arm(&mut self.path, m.tenant, m.key)?
                        && self.revalidate(store, &m)?
                    {
                        self.stats.refreshed += 1;
                    }
                }
                _ => {}
            }
        }
        Ok(n)
    }

    /// After the item's slot was armed: reads the store and writes the value, unless a write
    /// of the item passed the switch since the arm (stale: the copy stays invalid).
    /// Returns whether the value was written.
    fn revalidate(&mut self, store: SocketAddr, m: &MadMessage) -> anyhow::Result<bool> {
        let value = self.store_value(store, m)?;
        #[cfg(test)]
        if let Some(mut f) = self.between.take() {
            f(self);
            self.between = Some(f);
        }
        let Some(value) = value else {
            self.ctl.evict(&mut self.path, m.tenant, m.key)?;
            return Ok(false);
        };
        match self.ctl.refresh(&mut self.path, m.tenant, m.key, &value) {
            Ok(written) => Ok(written),
            Err(tern_kv::madinc_ctl::CtlError::Refused {
                status: tern_kv::madinc::ReplyStatus::STALE,
                ..
            }) => {
                self.stats.stale += 1;
                Ok(false)
            }
            Err(e) => Err(e.into()),
        }
    }

    fn store_value(&self, store: SocketAddr, m: &MadMessage) -> anyhow::Result<Option<Vec<u8>>> {
        let req = MadMessage {
            tenant: m.tenant,
            tag: m.tag,
            key: m.key,
            body: MadBody::ReadRequest,
        };
        let r = call(&self.sock, store, &req, Duration::from_millis(500), 8)?
            .context("the store did not answer the controller")?;
        Ok(match r.body {
            MadBody::ReadReply {
                found: true, value, ..
            } => Some(value),
            _ => None,
        })
    }

    /// Loads a record of `tenant` straight into its store (as the thesis's store loads its
    /// file before a run).
    pub fn load(&mut self, tenant: u16, key: Key, value: &[u8]) -> anyhow::Result<()> {
        let store = match self.tenants.get(&tenant) {
            Some(t) => t.store,
            None => self.route_of(tenant).1,
        };
        self.servers[store]
            .store()
            .tenant_write(tenant, &key, Some(value))?;
        Ok(())
    }

    /// Switches on tenant `id`'s route.
    pub fn route_len(&self, id: u16) -> usize {
        self.tenants
            .get(&id)
            .map_or_else(|| self.route_of(id).0.len(), |t| t.route.len())
    }

    /// Tenant `id`'s pages per switch of the path.
    pub fn pages_of(&self, id: u16) -> Vec<usize> {
        self.ctl.pages_of(id).iter().map(Vec::len).collect()
    }

    /// Pumps until every hot report made has been taken by the controller (made = delivered:
    /// each report is numbered by its agent and handed over once, so this is exact, for switch
    /// processes too) and the servers' notice links are idle (every notice acknowledged, hence
    /// queued: the receiving thread queues before it acknowledges), then takes what is queued;
    /// false when `timeout` passes first. A report delivered twice is an error (it cannot
    /// happen by construction; the count would hide a lost one).
    pub fn settle(&mut self, timeout: Duration) -> anyhow::Result<bool> {
        let end = std::time::Instant::now() + timeout;
        loop {
            self.pump(Duration::from_millis(2))?;
            let made = self.stats().reports_made;
            let delivered = self.stats.reports_delivered;
            if delivered > made {
                bail!("the controller took {delivered} hot reports but only {made} were made");
            }
            let notices: usize = self._links.iter().map(|l| l.pending()).sum();
            if made == delivered && notices == 0 {
                self.pump(Duration::ZERO)?;
                return Ok(true);
            }
            if std::time::Instant::now() >= end {
                let reports: usize = self
                    .agents
                    .iter()
                    .filter_map(|a| a.report_link())
                    .map(|l| l.pending())
                    .sum();
                eprintln!(
                    "madinc: not settled after {timeout:?}: {made} hot reports made, {delivered} \
                     taken by the controller ({reports} unacknowledged on this process's report \
                     links), {notices} write notices unacknowledged"
                );
                return Ok(false);
            }
        }
    }

    /// Hot reports made and not yet taken by the controller (in flight on a report link, or
    /// acknowledged and queued).
    #[cfg(test)]
    pub fn reports_in_flight(&self) -> u64 {
        let made = self.stats().reports_made;
        made.saturating_sub(self.stats.reports_delivered)
    }

    /// Reads each switch's count of reads it answered (`mad_ops[0]`) since the last call, gives
    /// them to the controller as the measured load and lets it move one of `tenant`'s pages from
    /// an overloaded switch of its route to an idle one (`Controller::rebalance`).
    pub fn rebalance(&mut self, tenant: u16) -> anyhow::Result<Option<(usize, usize)>> {
        let mut loads = Vec::with_capacity(self.sw.len());
        for (i, s) in self.sw.iter().enumerate() {
            let hits = match s {
                Hop::Local(s) => {
                    s.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .counter_read("MadIngress.mad_ops", 0)?
                        .packets
                }
                Hop::Remote(r) => r.hits(&self.swsock)?,
            };
            if self.hits_seen.len() <= i {
                self.hits_seen.push(0);
            }
            loads.push(hits - self.hits_seen[i].min(hits));
            self.hits_seen[i] = hits;
        }
        self.ctl.set_loads(&loads);
        Ok(self.ctl.rebalance(&mut self.path, tenant)?)
    }

    /// A new detection period on every switch.
    pub fn new_period(&mut self) -> anyhow::Result<()> {
        self.ctl.reset_sketches(&mut self.path)?;
        self.inbox
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .new_period();
        Ok(())
    }

    /// The counters.
    pub fn stats(&self) -> NetStats {
        use std::sync::atomic::Ordering::Relaxed;
        let mut s = self.stats.clone();
        s.reports_made = self.reports_made.load(Relaxed)
            + self
                .sw
                .iter()
                .map(|h| match h {
                    Hop::Remote(r) => r.made.load(Relaxed),
                    Hop::Local(_) => 0,
                })
                .sum::<u64>();
        s
    }

    #[cfg(test)]
    /// The controller (placements, free pages).
    pub fn controller(&self) -> &Controller {
        &self.ctl
    }

    /// Retries on the control links: (reports, notices, control messages).
    pub fn retries(&self) -> (u64, u64, u64) {
        use std::sync::atomic::Ordering::Relaxed;
        let r = self
            .agents
            .iter()
            .filter_map(|a| a.report_link())
            .map(|l| l.stats().retried.load(Relaxed))
            .sum();
        let n = self
            ._links
            .iter()
            .map(|l| l.stats().retried.load(Relaxed))
            .sum();
        let c = (0..self.cfg.switches)
            .map(|i| self.path.link(i).stats().retried.load(Relaxed))
            .sum();
        (r, n, c)
    }

    /// Messages a control link of this process gave up after its last try (0: the links retry
    /// without a limit; a switch process's report link is counted by made = delivered).
    pub fn gave_up(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        self.agents
            .iter()
            .filter_map(|a| a.report_link())
            .chain(self._links.iter().map(|l| &**l))
            .chain((0..self.cfg.switches).map(|i| self.path.link(i)))
            .map(|l| l.stats().gave_up.load(Relaxed))
            .sum()
    }

    /// Datagrams the loss injection dropped on all control links.
    pub fn injected_drops(&self) -> u64 {
        use std::sync::atomic::Ordering::Relaxed;
        let links: u64 = self
            .agents
            .iter()
            .filter_map(|a| a.report_link())
            .chain(self._links.iter().map(|l| &**l))
            .chain((0..self.cfg.switches).map(|i| self.path.link(i)))
            .map(|l| l.stats().injected_drops.load(Relaxed))
            .sum();
        let acks: u64 = self
            .agents
            .iter()
            .map(|a| a.stats().injected_drops)
            .sum::<u64>()
            + self
                .inbox
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .stats()
                .injected_drops;
        links + acks
    }

    #[cfg(test)]
    /// A switch's packet counter `mad_dropped[index]` (0 truncated, 1 length, 2 oversized,
    /// 3 unknown tenant, 4 forged tag, 5 foreign page).
    pub fn dropped(&self, s: usize, index: u32) -> anyhow::Result<u64> {
        match &self.sw[s] {
            Hop::Local(s) => Ok(s
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .counter_read("MadIngress.mad_dropped", index)?
                .packets),
            Hop::Remote(_) => bail!("switch {s} is a process"),
        }
    }

    #[cfg(test)]
    /// Runs a raw frame into switch `s`'s client port (for malformed-packet tests).
    pub fn raw(&mut self, s: usize, f: &[u8]) -> anyhow::Result<usize> {
        Ok(self.pass(s, 1, f)?.len())
    }

    #[cfg(test)]
    /// A tenant's WRITE_REPLY from its store carried back through its route (as the reply of
    /// a write whose request passed the switches earlier).
    pub fn reply_back(&mut self, tenant: u16, key: Key) -> anyhow::Result<()> {
        let t = &self.tenants[&tenant];
        let (route, tag) = (t.route.clone(), t.secret);
        let r = MadMessage {
            tenant,
            tag,
            key,
            body: MadBody::WriteReply {
                stored: true,
                source: 0,
            },
        };
        let f = frame(STORE_IP, CLIENT_IP, 1152, 8888, &r.encode()?);
        self.back(&route, &f).map(|_| ())
    }

    #[cfg(test)]
    /// The deployment's control key (tests seal their own control messages with it).
    pub fn key(&self) -> AuthKey {
        self.key
    }

    #[cfg(test)]
    /// Switch `s`'s agent's counters (forged and replayed control refused).
    pub fn agent_stats(&self, s: usize) -> tern_kv::madinc_wire::InboxStats {
        self.agents[s].stats()
    }

    #[cfg(test)]
    /// Where switch `s`'s agent takes control messages.
    pub fn agent_addr(&self, s: usize) -> SocketAddr {
        self.agents[s].addr()
    }

    #[cfg(test)]
    /// A client frame around `payload` (for malformed-packet tests).
    pub fn client_frame(payload: &[u8]) -> Vec<u8> {
        frame(CLIENT_IP, STORE_IP, 8888, 1152, payload)
    }
}

/// A switch running madinc.p4 as switch `i` of a network: the forward entries (client port 1,
/// stores port 2), the HOT_REPORT mirror session to the CPU port, its switch id.
fn madinc_switch(json: &str, i: usize) -> anyhow::Result<Switch> {
    let mut s = Switch::from_json(json, SwitchOptions::default())?;
    for (ip, port) in [(CLIENT_IP, 1u8), (STORE_IP, 2u8)] {
        s.mt_add_entry(
            "MadIngress.forward",
            &[MatchParam::Exact(ip.to_vec())],
            "MadIngress.to_port",
            &[vec![0, port]],
            None,
        )?;
    }
    s.mirroring_session_add(
        250,
        MirroringSession {
            port: Some(CPU_PORT),
            mgid: None,
        },
    )?;
    s.mt_set_default_action(
        "MadIngress.mad_params",
        "MadIngress.set_switch",
        &[(i as u16).to_be_bytes().to_vec()],
    )?;
    Ok(s)
}

/// A switch of the network: in this process, or a `tern kv madinc-switch` process.
enum Hop {
    Local(Arc<Mutex<Switch>>),
    Remote(RemoteSwitch),
}

/// The port number of a request asking a switch process for its `mad_ops[0]` (read hits).
const HITS_QUERY: u8 = 0xFF;

/// A `tern kv madinc-switch` process. Frames go to its data socket as `seq u32 ‖ port u8 ‖
/// frame`; the answer is `seq u32 ‖ reports u32 ‖ n u8 ‖ n × (port u8 ‖ len u16 ‖ frame)`,
/// `reports` = the HOT_REPORT clones the process made so far (they go from its agent to the
/// controller; only counted here).
struct RemoteSwitch {
    data: SocketAddr,
    agent: SocketAddr,
    child: Mutex<Option<std::process::Child>>,
    /// Its network namespace (removed after the process).
    ns: Option<String>,
    seq: std::sync::atomic::AtomicU32,
    /// The highest report count an answer carried.
    made: std::sync::atomic::AtomicU64,
}

impl RemoteSwitch {
    fn spawn(
        exe: &Path,
        i: usize,
        controller: SocketAddr,
        retry: Duration,
        loss: Loss,
        key: AuthKey,
        ns: Option<String>,
    ) -> anyhow::Result<RemoteSwitch> {
        use std::io::BufRead;
        use std::process::{Command, Stdio};
        let mut cmd = match &ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(exe);
                c.args([
                    "kv",
                    "madinc-switch",
                    "--bind",
                    &netns::there(i).to_string(),
                ]);
                c
            }
            None => {
                let mut c = Command::new(exe);
                c.args(["kv", "madinc-switch"]);
                c
            }
        };
        let spawned = cmd
            .args(["--index", &i.to_string()])
            .args(["--controller", &controller.to_string()])
            .args(["--retry-us", &retry.as_micros().to_string()])
            .args(["--loss-ppm", &loss.per_million.to_string()])
            .args(["--seed", &loss.seed.to_string()])
            .env("TERN_MADINC_KEY", key.to_hex())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("starting {} kv madinc-switch", exe.display()));
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                if let Some(ns) = &ns {
                    netns::remove(ns);
                }
                return Err(e);
            }
        };
        let mut line = String::new();
        let read = child
            .stdout
            .take()
            .map(|o| std::io::BufReader::new(o).read_line(&mut line));
        let parsed = (|| -> Option<(SocketAddr, SocketAddr)> {
            let rest = line.trim().strip_prefix("tern kv madinc-switch: data ")?;
            let (d, a) = rest.split_once(" agent ")?;
            Some((d.parse().ok()?, a.parse().ok()?))
        })();
        match (read, parsed) {
            (Some(Ok(_)), Some((data, agent))) => Ok(RemoteSwitch {
                data,
                agent,
                child: Mutex::new(Some(child)),
                ns,
                seq: Default::default(),
                made: Default::default(),
            }),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                if let Some(ns) = &ns {
                    netns::remove(ns);
                }
                bail!("switch process {i} did not start (its first line: {line:?})")
            }
        }
    }

    /// One exchange; a lost datagram is sent again (a frame may then be processed twice, as a
    /// retransmitted packet would be).
    fn ask(&self, sock: &UdpSocket, port: u8, f: &[u8]) -> anyhow::Result<Vec<u8>> {
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut msg = Vec::with_capacity(f.len() + 5);
        msg.extend_from_slice(&seq.to_be_bytes());
        msg.push(port);
        msg.extend_from_slice(f);
        let mut buf = vec![0u8; 65536];
        for _ in 0..5 {
            sock.send_to(&msg, self.data)?;
            let end = std::time::Instant::now() + Duration::from_secs(1);
            loop {
                let left = end.saturating_duration_since(std::time::Instant::now());
                if left.is_zero() {
                    break;
                }
                sock.set_read_timeout(Some(left))?;
                match sock.recv_from(&mut buf) {
                    Ok((n, _)) if n >= 4 && buf[..4] == seq.to_be_bytes() => {
                        return Ok(buf[4..n].to_vec());
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(e) => return Err(e.into()),
                }
            }
        }
        bail!("switch process at {} does not answer", self.data)
    }

    fn process(
        &self,
        sock: &UdpSocket,
        port: u32,
        f: &[u8],
    ) -> anyhow::Result<(Vec<OutputPacket>, u64)> {
        let r = self.ask(sock, port as u8, f)?;
        let bad = || {
            anyhow::anyhow!(
                "a malformed answer from the switch process at {}",
                self.data
            )
        };
        let reports = u32::from_be_bytes(r.get(..4).ok_or_else(bad)?.try_into()?) as u64;
        let n = *r.get(4).ok_or_else(bad)?;
        let mut at = 5;
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let port = *r.get(at).ok_or_else(bad)? as u32;
            let len =
                u16::from_be_bytes(r.get(at + 1..at + 3).ok_or_else(bad)?.try_into()?) as usize;
            let data = r.get(at + 3..at + 3 + len).ok_or_else(bad)?.to_vec();
            at += 3 + len;
            out.push(OutputPacket { port, data });
        }
        Ok((out, reports))
    }

    fn hits(&self, sock: &UdpSocket) -> anyhow::Result<u64> {
        let r = self.ask(sock, HITS_QUERY, &[])?;
        Ok(u64::from_be_bytes(
            r.get(..8).context("a short hits answer")?.try_into()?,
        ))
    }
}

impl Drop for RemoteSwitch {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(ns) = &self.ns {
            netns::remove(ns);
        }
    }
}

/// The network namespaces of `--mode netns` switches: `tmad-<pid>-<i>`, a veth pair
/// `tmd<pid>r<i>` (here, 10.79.i.1/30) – `tmd<pid>n<i>` (there, 10.79.i.2/30), `tc netem` on
/// both ends.
mod netns {
    use anyhow::{bail, Context};
    use std::net::Ipv4Addr;
    use std::process::Command;
    use std::time::Duration;

    const PREFIX: &str = "tmad-";

    pub fn here(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 79, i as u8, 1)
    }

    pub fn there(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(10, 79, i as u8, 2)
    }

    fn run(args: &[&str]) -> anyhow::Result<()> {
        let o = Command::new(args[0])
            .args(&args[1..])
            .output()
            .with_context(|| format!("running {} (netns mode needs iproute2 and root)", args[0]))?;
        if !o.status.success() {
            bail!(
                "`{}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&o.stderr).trim()
            );
        }
        Ok(())
    }

    /// Creates switch `i`'s namespace and link; on failure nothing is left. Returns the
    /// namespace and whether `tc netem` delays the link (false when the kernel has no netem:
    /// the caller delays the link itself).
    pub fn make(i: usize, delay: Duration) -> anyhow::Result<(String, bool)> {
        if i > 250 {
            bail!("netns mode: at most 251 switches");
        }
        let pid = std::process::id() % 100_000;
        let ns = format!("{PREFIX}{}-{i}", std::process::id());
        let (r, n) = (format!("tmd{pid}r{i}"), format!("tmd{pid}n{i}"));
        let us = format!("{}us", delay.as_micros().max(1));
        let (h, t) = (format!("{}/30", here(i)), format!("{}/30", there(i)));
        let steps: Vec<Vec<&str>> = vec![
            vec!["ip", "netns", "add", &ns],
            vec!["ip", "link", "add", &r, "type", "veth", "peer", "name", &n],
            vec!["ip", "link", "set", &n, "netns", &ns],
            vec!["ip", "addr", "add", &h, "dev", &r],
            vec!["ip", "link", "set", &r, "up"],
            vec![
                "ip", "netns", "exec", &ns, "ip", "addr", "add", &t, "dev", &n,
            ],
            vec!["ip", "netns", "exec", &ns, "ip", "link", "set", &n, "up"],
            vec!["ip", "netns", "exec", &ns, "ip", "link", "set", "lo", "up"],
            vec![
                "tc", "qdisc", "add", "dev", &r, "root", "netem", "delay", &us,
            ],
            vec![
                "ip", "netns", "exec", &ns, "tc", "qdisc", "add", "dev", &n, "root", "netem",
                "delay", &us,
            ],
        ];
        for (k, s) in steps.iter().enumerate() {
            if let Err(e) = run(s) {
                if k == 8 && e.to_string().contains("qdisc kind is unknown") {
                    return Ok((ns, false));
                }
                remove(&ns);
                let _ = run(&["ip", "link", "del", &r]);
                return Err(e);
            }
        }
        Ok((ns, true))
    }

    /// Deletes a namespace (its veth end goes with it, and so the pair).
    pub fn remove(ns: &str) {
        if let Err(e) = run(&["ip", "netns", "del", ns]) {
            eprintln!("madinc netns: {e}");
        }
    }

    /// Removes the namespaces of runs whose process is gone.
    pub fn remove_stale() {
        let Ok(o) = Command::new("ip").args(["netns", "list"]).output() else {
            return;
        };
        for line in String::from_utf8_lossy(&o.stdout).lines() {
            let Some(name) = line.split_whitespace().next() else {
                continue;
            };
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            let pid = rest.split('-').next().unwrap_or("");
            if !pid.is_empty() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
                remove(name);
            }
        }
    }
}

/// `tern kv madinc-switch`: one switch of a MADINC network as a process (started by
/// [`Net::start_with`]): madinc.p4 as switch `index`, its agent (control sealed with the key in
/// `TERN_MADINC_KEY`, hot reports to `controller`), frames over a loopback UDP socket. Prints
/// `tern kv madinc-switch: data ADDR agent ADDR`; exits when its stdin closes.
#[derive(clap::Args, Debug)]
pub struct MadSwitchArgs {
    /// The switch's index on the path (its switch id).
    #[arg(long)]
    index: usize,
    /// The address its data socket and agent bind (a namespace's interface address).
    #[arg(long, default_value = "127.0.0.1")]
    bind: std::net::IpAddr,
    /// The controller's address (hot reports).
    #[arg(long)]
    controller: SocketAddr,
    /// Retry interval of the report link (µs).
    #[arg(long, default_value_t = 3000)]
    retry_us: u64,
    /// Loss injected on the agent's acknowledgements and reports (per million).
    #[arg(long, default_value_t = 0)]
    loss_ppm: u32,
    /// Loss injection seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

/// Runs `tern kv madinc-switch`.
pub fn mad_switch(a: MadSwitchArgs) -> anyhow::Result<std::process::ExitCode> {
    use std::io::Write;
    let key = AuthKey::from_hex(
        &std::env::var("TERN_MADINC_KEY")
            .context("TERN_MADINC_KEY (the control key) is not set")?,
    )
    .map_err(anyhow::Error::msg)?;
    let json = program()?;
    let sw = Arc::new(Mutex::new(madinc_switch(&json, a.index)?));
    let agent = SwitchAgent::start_on(
        SocketAddr::new(a.bind, 0),
        sw.clone(),
        Some(a.controller),
        Duration::from_micros(a.retry_us.max(1)),
        Loss {
            per_million: a.loss_ppm,
            seed: a.seed,
        },
        Some(key),
    )?;
    let sock = UdpSocket::bind(SocketAddr::new(a.bind, 0))?;
    println!(
        "tern kv madinc-switch: data {} agent {}",
        sock.local_addr()?,
        agent.addr()
    );
    std::io::stdout().flush()?;
    // The parent holds our stdin: when it goes (even killed), so do we.
    std::thread::spawn(|| {
        let mut b = [0u8; 64];
        while matches!(std::io::Read::read(&mut std::io::stdin(), &mut b), Ok(n) if n > 0) {}
        std::process::exit(0);
    });
    let mut buf = vec![0u8; 65536];
    let mut made = 0u32;
    loop {
        let (n, from) = sock.recv_from(&mut buf)?;
        if n < 5 {
            continue;
        }
        let mut answer = buf[..4].to_vec();
        let port = buf[4];
        if port == HITS_QUERY {
            let hits = sw
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .counter_read("MadIngress.mad_ops", 0)?
                .packets;
            answer.extend_from_slice(&hits.to_be_bytes());
            sock.send_to(&answer, from)?;
            continue;
        }
        let mut out: Vec<OutputPacket> = Vec::new();
        sw.lock().unwrap_or_else(|p| p.into_inner()).process_packet(
            port as u32,
            &buf[5..n],
            &mut out,
        );
        let mut rest = Vec::new();
        for o in out {
            if o.port == CPU_PORT {
                // A clone that does not decode is the switch's bug; it is dropped, not fatal.
                if let Ok(r) = MadMessage::decode(o.data.get(42..).unwrap_or(&[])) {
                    made = made.wrapping_add(1);
                    agent.report(&r)?;
                }
            } else {
                rest.push(o);
            }
        }
        answer.extend_from_slice(&made.to_be_bytes());
        answer.push(rest.len() as u8);
        for o in rest {
            answer.push(o.port as u8);
            answer.extend_from_slice(&(o.data.len() as u16).to_be_bytes());
            answer.extend_from_slice(&o.data);
        }
        sock.send_to(&answer, from)?;
    }
}

/// The switches as a request sees them (shared by the driver and the [`NetClient`]s).
struct Wire<'a> {
    sw: &'a [Hop],
    agents: &'a [SwitchAgent],
    reports: &'a std::sync::atomic::AtomicU64,
    hop: Duration,
    swsock: &'a UdpSocket,
}

impl Wire<'_> {
    /// One link traversal.
    fn link(&self) {
        if !self.hop.is_zero() {
            std::thread::sleep(self.hop);
        }
    }

    /// Carries `req` along `route` (client side first) and, if no switch answers, to the store
    /// at `store` from `sock`; the reply comes back the same way.
    fn carry(
        &self,
        sock: &UdpSocket,
        route: &[usize],
        store: SocketAddr,
        req: &MadMessage,
    ) -> anyhow::Result<(Answer, Option<MadMessage>)> {
        let mut f = frame(CLIENT_IP, STORE_IP, 8888, 1152, &req.encode()?);
        for (h, &s) in route.iter().enumerate() {
            self.link();
            let out = self.pass(s, 1, &f)?;
            let mut next = None;
            for o in out {
                match o.port {
                    1 => {
                        let back = self.back(&route[..h], &o.data)?;
                        return Ok((Answer::Switch(h), Some(back)));
                    }
                    2 => next = Some(o.data),
                    _ => {}
                }
            }
            match next {
                Some(d) => f = d,
                None => return Ok((Answer::Dropped, None)),
            }
        }
        let m = MadMessage::decode(&f[42..]).context("a request leaving the route")?;
        self.link();
        let reply = call(sock, store, &m, Duration::from_millis(500), 8)?
            .with_context(|| format!("store {store} did not answer"))?;
        let rf = frame(STORE_IP, CLIENT_IP, 1152, 8888, &reply.encode()?);
        let back = self.back(route, &rf)?;
        Ok((Answer::Store, Some(back)))
    }

    /// One switch processes a frame; HOT_REPORT clones go to its agent.
    fn pass(&self, s: usize, port: u32, f: &[u8]) -> anyhow::Result<Vec<OutputPacket>> {
        let mut out: Vec<OutputPacket> = Vec::new();
        match &self.sw[s] {
            Hop::Local(sw) => sw
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .process_packet(port, f, &mut out),
            Hop::Remote(r) => {
                let (out, made) = r.process(self.swsock, port, f)?;
                r.made.fetch_max(made, std::sync::atomic::Ordering::Relaxed);
                return Ok(out);
            }
        }
        let mut rest = Vec::with_capacity(out.len());
        for o in out {
            if o.port == CPU_PORT {
                let r = MadMessage::decode(o.data.get(42..).unwrap_or(&[]))
                    .context("a HOT_REPORT clone")?;
                self.reports
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.agents[s].report(&r)?;
            } else {
                rest.push(o);
            }
        }
        Ok(rest)
    }

    /// Carries a reply back through `passed` (in reverse) and decodes it at the client.
    fn back(&self, passed: &[usize], f: &[u8]) -> anyhow::Result<MadMessage> {
        let mut f = f.to_vec();
        for &s in passed.iter().rev() {
            self.link();
            let out = self.pass(s, 2, &f)?;
            f = out
                .into_iter()
                .find(|o| o.port == 1)
                .map(|o| o.data)
                .with_context(|| format!("switch {s} did not pass a reply back"))?;
        }
        self.link();
        Ok(MadMessage::decode(&f[42..])?)
    }
}

/// One tenant's client on its own thread (closed-loop load beside the driver): requests cross
/// the same switches (each behind its lock, one pipeline per switch) with the same link delay.
pub struct NetClient {
    sw: Arc<Vec<Hop>>,
    agents: Arc<Vec<SwitchAgent>>,
    reports: Arc<std::sync::atomic::AtomicU64>,
    hop: Duration,
    sock: UdpSocket,
    swsock: UdpSocket,
    route: Vec<usize>,
    store: SocketAddr,
    tenant: u16,
    tag: u32,
}

impl NetClient {
    /// Reads `key` → who answered and the value.
    pub fn read(&self, key: Key) -> anyhow::Result<(Answer, Option<Vec<u8>>)> {
        let w = Wire {
            sw: &self.sw,
            agents: &self.agents,
            reports: &self.reports,
            hop: self.hop,
            swsock: &self.swsock,
        };
        let req = MadMessage {
            tenant: self.tenant,
            tag: self.tag,
            key,
            body: MadBody::ReadRequest,
        };
        let (a, r) = w.carry(&self.sock, &self.route, self.store, &req)?;
        Ok((
            a,
            r.and_then(|m| match m.body {
                MadBody::ReadReply {
                    found: true, value, ..
                } => Some(value),
                _ => None,
            }),
        ))
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
        if let Some(t) = self.reader.take() {
            let _ = t.join();
        }
        for s in self.servers.drain(..) {
            s.cache_ctl().set_madinc_controller(None);
            if let Err(e) = s.shutdown() {
                eprintln!("madinc: stopping a store: {e}");
            }
        }
    }
}

/// What `tern kv up --cache madinc` needs.
pub struct UpConfig {
    /// The network.
    pub net: NetConfig,
    /// Storage servers.
    pub stores: usize,
    /// Tenants added at start (ids 1 … N).
    pub tenants: u16,
    /// Their hot threshold.
    pub hot_threshold: u16,
    /// Pages per tenant (even-split on its route).
    pub pages: u32,
    /// Working directory (the stores' data).
    pub dir: std::path::PathBuf,
    /// Where to write `{"front": ADDR, "tenants": [[id, secret], …]}` once up.
    pub front_file: Option<std::path::PathBuf>,
    /// The command to run (with TERN_MADINC_FRONT and TERN_MADINC_TENANTS); none: until
    /// ctrl-c.
    pub command: Vec<String>,
    /// Every switch a `tern kv madinc-switch` process (`--mode loopback`).
    pub processes: bool,
    /// Every switch process in a network namespace of its own with this `tc netem` delay on
    /// each direction of its link (`--mode netns`).
    pub netns: Option<Duration>,
}

/// `tern kv up --mode sim|loopback --cache madinc`: the network behind one front UDP socket that takes
/// MADINC READ/WRITE requests from clients (each carried along its tenant's route, the reply
/// sent back), until ctrl-c (`stop`) or the command ends; its exit status is returned.
pub fn up(cfg: UpConfig, stop: &std::sync::atomic::AtomicBool) -> anyhow::Result<i32> {
    use std::sync::atomic::Ordering;
    let exe = if cfg.processes || cfg.netns.is_some() {
        Some(std::env::current_exe().context("the tern executable")?)
    } else {
        None
    };
    let mut net = match (cfg.netns, &exe) {
        (Some(d), Some(e)) => Net::start_netns(cfg.net.clone(), cfg.stores, &cfg.dir, e, d)?,
        _ => Net::start_with(cfg.net.clone(), cfg.stores, &cfg.dir, exe.as_deref())?,
    };
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64)
        ^ std::process::id() as u64;
    let mut rng = tern_kv::rng::Rng::new(seed);
    let mut tenants = Vec::new();
    for id in 1..=cfg.tenants {
        let secret = rng.next_u64() as u32 | 1;
        net.add_tenant(id, secret, cfg.hot_threshold, cfg.pages, Policy::EvenSplit)
            .with_context(|| format!("adding tenant {id}"))?;
        tenants.push((id, secret));
    }
    let front = UdpSocket::bind("127.0.0.1:0")?;
    front.set_read_timeout(Some(Duration::from_millis(1)))?;
    let addr = front.local_addr()?;
    let info = serde_json::json!({"front": addr.to_string(), "tenants": tenants});
    if let Some(f) = &cfg.front_file {
        let tmp = f.with_extension("tmp");
        std::fs::write(&tmp, info.to_string())
            .and_then(|_| std::fs::rename(&tmp, f))
            .with_context(|| format!("writing {}", f.display()))?;
    }
    println!(
        "madinc: front {addr}, {:?} of {} switches, tenants (id, secret) {tenants:?}",
        cfg.net.topology, cfg.net.switches
    );
    let mut child = match cfg.command.split_first() {
        Some((prog, args)) => Some(
            std::process::Command::new(prog)
                .args(args)
                .env("TERN_MADINC_FRONT", addr.to_string())
                .env(
                    "TERN_MADINC_TENANTS",
                    tenants
                        .iter()
                        .map(|(i, s)| format!("{i}:{s}"))
                        .collect::<Vec<_>>()
                        .join(","),
                )
                .spawn()
                .with_context(|| format!("starting {prog}"))?,
        ),
        None => None,
    };
    let mut buf = vec![0u8; 2048];
    let mut malformed = 0u64;
    let code = loop {
        if stop.load(Ordering::Acquire) {
            if let Some(c) = &mut child {
                let _ = c.kill();
                let _ = c.wait();
            }
            break 130;
        }
        if let Some(c) = &mut child {
            if let Some(st) = c.try_wait()? {
                break st.code().unwrap_or(1);
            }
        }
        net.pump(Duration::ZERO)?;
        let (n, from) = match front.recv_from(&mut buf) {
            Ok(x) => x,
            Err(_) => continue,
        };
        let m = match MadMessage::decode(&buf[..n]) {
            Ok(m) if matches!(m.body, MadBody::ReadRequest | MadBody::WriteRequest { .. }) => m,
            _ => {
                malformed += 1;
                continue;
            }
        };
        if let (_, Some(reply)) = net.request(m.tenant, m.tag, m.key, m.body)? {
            let _ = front.send_to(&reply.encode()?, from);
        }
    };
    net.settle(Duration::from_secs(5))?;
    let s = net.stats();
    println!(
        "madinc: reports made {}, delivered {}, admitted {}, write notices {}, refreshed {}, malformed datagrams {malformed}",
        s.reports_made, s.reports_delivered, s.admitted, s.notices, s.refreshed
    );
    Ok(code)
}

#[cfg(test)]
mod tests {
    //! The wire path end to end: hot reports and control messages over lossy links, isolation
    //! of tenants (same key, forged tag, unknown tenant, departed tenant, reused pages),
    //! write-through re-validation, quota refusal, malformed frames dropped and counted, and
    //! routes of a star.
    use super::*;

    fn net(topology: Topology, switches: usize, loss: u32) -> (Net, tern_fixtures::ScratchDir) {
        let dir = tern_fixtures::scratch("madinc-net");
        let n = Net::start(
            NetConfig {
                topology,
                switches,
                pages: 4,
                loss: Loss {
                    per_million: loss,
                    seed: 3,
                },
                retry: Duration::from_millis(2),
            },
            2,
            &dir,
        )
        .unwrap();
        (n, dir)
    }

    /// Reads until the switch answers (the item became hot and was admitted).
    fn until_cached(n: &mut Net, t: u16, k: Key) -> (usize, Vec<u8>) {
        for _ in 0..50 {
            if let (Answer::Switch(h), Some(v)) = n.read(t, k).unwrap() {
                return (h, v);
            }
            n.settle(Duration::from_secs(10)).unwrap();
        }
        panic!("tenant {t}: key never cached");
    }

    #[test]
    fn tenants_are_isolated_over_the_lossy_wire_path() {
        let (mut n, _d) = net(Topology::Line, 3, 250_000);
        n.add_tenant(1, 0xaaaa, 2, 2, Policy::EvenSplit).unwrap();
        n.add_tenant(2, 0xbbbb, 2, 2, Policy::NearStore).unwrap();
        let k = Key::from_id(5);
        n.load(1, k, b"one's").unwrap();
        n.load(2, k, b"two's").unwrap();
        let (_, v1) = until_cached(&mut n, 1, k);
        let (_, v2) = until_cached(&mut n, 2, k);
        assert_eq!(
            (v1.as_slice(), v2.as_slice()),
            (&b"one's"[..], &b"two's"[..])
        );
        assert_eq!(n.stats().reports_made, n.stats().reports_delivered);
        // Tenant 2 claiming tenant 1's id with its own tag: dropped at the first switch.
        let forged = n.request(1, 0xbbbb, k, MadBody::ReadRequest).unwrap();
        assert_eq!(forged.0, Answer::Dropped);
        assert_eq!(n.dropped(0, 4).unwrap(), 1);
        // An unknown tenant: dropped and counted.
        assert_eq!(
            n.request(9, 0x9999, k, MadBody::ReadRequest).unwrap().0,
            Answer::Dropped
        );
        assert_eq!(n.dropped(0, 3).unwrap(), 1);
        // A forged write cannot overwrite tenant 1's item, in the cache or the store.
        let w = MadBody::WriteRequest {
            value: b"evil".to_vec(),
        };
        assert_eq!(n.request(1, 0xbbbb, k, w).unwrap().0, Answer::Dropped);
        n.settle(Duration::from_secs(10)).unwrap();
        assert_eq!(n.read(1, k).unwrap().1.unwrap(), b"one's");
        // Malformed: a truncated MADINC header is dropped and counted.
        let bad = Net::client_frame(&[0x0e, 0x00, 0, 1, 0, 0]);
        assert_eq!(n.raw(0, &bad).unwrap(), 0);
        assert_eq!(n.dropped(0, 0).unwrap(), 1);
        // Tenant 1 leaves: its packets are dropped; a newcomer gets its pages and reads only
        // its own (empty) key space.
        n.remove_tenant(1).unwrap();
        assert_eq!(n.read(1, k).unwrap().0, Answer::Dropped);
        n.add_tenant(3, 0xcccc, 2, 2, Policy::EvenSplit).unwrap();
        assert_eq!(n.read(3, k).unwrap(), (Answer::Store, None));
        assert_eq!(n.read(2, k).unwrap().1.unwrap(), b"two's");
        assert!(n.controller().placement(1, k).is_none());
        // Control messages were retried (loss was injected) and nothing is pending.
        assert!(n.injected_drops() > 0);
        assert!(n.settle(Duration::from_secs(10)).unwrap());
    }

    #[test]
    fn a_write_invalidates_the_copy_and_the_controller_revalidates_it() {
        let (mut n, _d) = net(Topology::Line, 2, 200_000);
        n.add_tenant(7, 0x77, 2, 1, Policy::NearClient).unwrap();
        let k = Key::from_id(1);
        n.load(7, k, b"old").unwrap();
        let (h, v) = until_cached(&mut n, 7, k);
        assert_eq!((h, v.as_slice()), (0, &b"old"[..]));
        assert!(n.write(7, k, b"new").unwrap());
        // Invalid until re-validated: the store answers, with the new value.
        assert_eq!(
            n.read(7, k).unwrap(),
            (Answer::Store, Some(b"new".to_vec()))
        );
        assert!(n.settle(Duration::from_secs(10)).unwrap());
        assert_eq!(n.stats().refreshed, 1);
        assert_eq!(
            n.read(7, k).unwrap(),
            (Answer::Switch(0), Some(b"new".to_vec()))
        );
    }

    #[test]
    fn rebalancing_moves_a_page_off_the_loaded_switch() {
        let (mut n, _d) = net(Topology::Line, 2, 100_000);
        n.add_tenant(4, 0x44, 2, 2, Policy::NearClient).unwrap();
        assert_eq!(n.pages_of(4), vec![2, 0]);
        for id in 0..3 {
            n.load(4, Key::from_id(id), format!("v{id}").as_bytes())
                .unwrap();
        }
        for id in 0..3 {
            assert_eq!(until_cached(&mut n, 4, Key::from_id(id)).0, 0);
        }
        for _ in 0..20 {
            assert_eq!(n.read(4, Key::from_id(0)).unwrap().0, Answer::Switch(0));
        }
        // Switch 0 answered everything, switch 1 nothing: one page moves.
        assert_eq!(n.rebalance(4).unwrap(), Some((0, 1)));
        assert_eq!(n.pages_of(4), vec![1, 1]);
        // No reads since: balanced enough.
        assert_eq!(n.rebalance(4).unwrap(), None);
        // Whatever the moved page held was evicted; every item is (again) cached when hot and
        // every value is still the tenant's.
        n.new_period().unwrap();
        for id in 0..3 {
            let (_, v) = until_cached(&mut n, 4, Key::from_id(id));
            assert_eq!(v, format!("v{id}").as_bytes());
        }
        assert_eq!(n.controller().items(), 3);
    }

    #[test]
    fn an_agent_refuses_control_messages_into_another_tenants_pages() {
        use tern_kv::madinc::{MadOp, ReplyStatus};
        let (mut n, _d) = net(Topology::Line, 1, 0);
        n.add_tenant(1, 0x11, 2, 1, Policy::NearClient).unwrap();
        n.add_tenant(2, 0x22, 2, 1, Policy::NearClient).unwrap();
        let k = Key::from_id(3);
        n.load(1, k, b"one's").unwrap();
        until_cached(&mut n, 1, k);
        let p = n.controller().placement(1, k).unwrap();
        // Sealed with the deployment's key: the agent authenticates the sender, then refuses
        // what is not the named tenant's.
        let link = Link::start_auth(
            n.agent_addr(0),
            Duration::from_millis(2),
            100,
            Loss::default(),
            Some(n.key()),
        )
        .unwrap();
        let msg = |tenant, body| MadMessage {
            tenant,
            tag: 0x22,
            key: k,
            body,
        };
        // Tenant 2 overwriting, evicting or taking tenant 1's slot and page: refused.
        let insert = msg(
            2,
            MadBody::Store {
                op: StoreOp::Insert,
                id: 1,
                switch: 0,
                slot: p.slot,
                value: b"evil".to_vec(),
            },
        );
        assert_eq!(link.call(&insert).unwrap(), ReplyStatus::SLOT);
        let update = msg(
            2,
            MadBody::Store {
                op: StoreOp::Update,
                id: 2,
                switch: 0,
                slot: p.slot,
                value: b"evil".to_vec(),
            },
        );
        assert_eq!(link.call(&update).unwrap(), ReplyStatus::SLOT);
        let free = msg(
            2,
            MadBody::Page {
                alloc: false,
                id: 3,
                switch: 0,
                page: p.slot / 128,
            },
        );
        assert_eq!(link.call(&free).unwrap(), ReplyStatus::SLOT);
        let alloc = msg(
            2,
            MadBody::Page {
                alloc: true,
                id: 4,
                switch: 0,
                page: p.slot / 128,
            },
        );
        assert_eq!(link.call(&alloc).unwrap(), ReplyStatus::SLOT);
        // A sketch reset names no tenant's state: the agent applies it from a holder of the
        // deployment's key. A read request is no control message at all.
        let reset = msg(2, MadBody::Reset { id: 5, switch: 0 });
        assert_eq!(reset.body.op(), MadOp::SKETCH_RESET);
        assert_eq!(link.call(&reset).unwrap(), ReplyStatus::OK);
        assert!(link.call(&msg(2, MadBody::ReadRequest)).is_err());
        // Tenant 1's item is intact and still answered by the switch.
        assert_eq!(
            n.read(1, k).unwrap(),
            (Answer::Switch(0), Some(b"one's".to_vec()))
        );
    }

    /// Pumps until the controller has handled `n` write notices in all.
    fn until_notices(net: &mut Net, n: u64) {
        for _ in 0..5_000 {
            if net.stats().notices >= n {
                return;
            }
            net.pump(Duration::from_millis(2)).unwrap();
        }
        panic!("only {} write notices arrived", net.stats().notices);
    }

    #[test]
    fn a_write_between_the_controllers_read_and_its_refresh_never_leaves_an_older_value_valid() {
        let (mut n, _d) = net(Topology::Line, 2, 0);
        n.add_tenant(1, 0x11, 2, 2, Policy::NearClient).unwrap();
        let k = Key::from_id(7);
        n.load(1, k, b"v1").unwrap();
        until_cached(&mut n, 1, k);
        n.settle(Duration::from_secs(10)).unwrap();
        let seen = n.stats().notices;
        // 1. A whole write (request through the switches, store, reply back) of v3 lands
        //    between the controller's read of v2 (for v2's notice) and its refresh.
        assert!(n.write(1, k, b"v2").unwrap());
        let mut once = true;
        n.between = Some(Box::new(move |n: &mut Net| {
            if std::mem::take(&mut once) {
                assert!(n.write(1, k, b"v3").unwrap());
            }
        }));
        until_notices(&mut n, seen + 1);
        n.between = None;
        // v3 is written and acknowledged; v2 must not be what the switch answers.
        let (a, v) = n.read(1, k).unwrap();
        assert_eq!(v.as_deref(), Some(&b"v3"[..]), "answered by {a:?}");
        assert_eq!(n.stats().stale, 1);
        // v3's own notice re-validates the copy.
        until_notices(&mut n, seen + 2);
        assert_eq!(
            n.read(1, k).unwrap(),
            (Answer::Switch(0), Some(b"v3".to_vec()))
        );
        // 2. A write in flight: its request passed the switch before the arm, the store took it
        //    after the controller's read, its reply passes back before the refresh.
        assert!(n.write(1, k, b"v4").unwrap());
        let mut once = true;
        n.between = Some(Box::new(move |n: &mut Net| {
            if std::mem::take(&mut once) {
                n.load(1, k, b"v5").unwrap();
                n.reply_back(1, k).unwrap();
            }
        }));
        until_notices(&mut n, seen + 3);
        n.between = None;
        let (a, v) = n.read(1, k).unwrap();
        assert_eq!(v.as_deref(), Some(&b"v5"[..]), "answered by {a:?}");
        assert_eq!(n.stats().stale, 2);
    }

    #[test]
    fn agents_refuse_forged_and_replayed_control() {
        use tern_kv::madinc::ReplyStatus;
        use tern_kv::madinc_auth::Sealer;
        use tern_kv::madinc_wire::GAVE_UP;
        let (mut n, _d) = net(Topology::Line, 1, 0);
        n.add_tenant(1, 0x11, 2, 1, Policy::NearClient).unwrap();
        let k = Key::from_id(3);
        n.load(1, k, b"one's").unwrap();
        until_cached(&mut n, 1, k);
        let p = n.controller().placement(1, k).unwrap();
        let evict = |id| MadMessage {
            tenant: 1,
            tag: 0x11,
            key: k,
            body: MadBody::Evict {
                id,
                switch: 0,
                slot: p.slot,
            },
        };
        // Unsealed (whoever reaches the port) and sealed with another key: never applied,
        // never acknowledged, counted as forged.
        let plain = Link::start(
            n.agent_addr(0),
            Duration::from_millis(2),
            3,
            Loss::default(),
        )
        .unwrap();
        assert_eq!(plain.call(&evict(901)).unwrap(), GAVE_UP);
        let other = Link::start_auth(
            n.agent_addr(0),
            Duration::from_millis(2),
            3,
            Loss::default(),
            Some(AuthKey::random()),
        )
        .unwrap();
        assert_eq!(other.call(&evict(902)).unwrap(), GAVE_UP);
        // The agent's thread counts the last copy a moment after the sender gave up.
        for _ in 0..500 {
            if n.agent_stats(0).forged >= 6 {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert_eq!(n.agent_stats(0).forged, 6);
        assert_eq!(
            n.read(1, k).unwrap(),
            (Answer::Switch(0), Some(b"one's".to_vec()))
        );
        // Sealed with the key but carrying another tenant's tag: refused by the per-tenant
        // secret check.
        let keyed = Link::start_auth(
            n.agent_addr(0),
            Duration::from_millis(2),
            100,
            Loss::default(),
            Some(n.key()),
        )
        .unwrap();
        let mut wrong_tag = evict(903);
        wrong_tag.tag = 0x22;
        assert_eq!(keyed.call(&wrong_tag).unwrap(), ReplyStatus::TENANT);
        // Replay: a genuine sealed TENANT_ADD, then TENANT_DEL, then the TENANT_ADD's bytes
        // again: refused (no acknowledgement), counted, the tenant stays gone.
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        let mut sealer = Sealer::new(n.key());
        let tenant9 = |add, id| MadMessage {
            tenant: 9,
            tag: 0x99,
            key: Key::from_id(0),
            body: MadBody::Tenant {
                add,
                id,
                switch: 0,
                hot_threshold: if add { 2 } else { 0 },
            },
        };
        let add = sealer.seal(&tenant9(true, 1).encode().unwrap());
        let del = sealer.seal(&tenant9(false, 2).encode().unwrap());
        let mut buf = [0u8; 512];
        for d in [&add, &del] {
            sock.send_to(d, n.agent_addr(0)).unwrap();
            assert!(
                sock.recv_from(&mut buf).is_ok(),
                "a genuine message is acknowledged"
            );
        }
        sock.send_to(&add, n.agent_addr(0)).unwrap();
        assert!(
            sock.recv_from(&mut buf).is_err(),
            "a replay is not acknowledged"
        );
        assert_eq!(n.agent_stats(0).replayed, 1);
        assert_eq!(n.read(9, k).unwrap().0, Answer::Dropped);
        // The controller's own traffic was never refused.
        assert_eq!(n.agent_stats(0).forged, 6);
    }

    #[test]
    fn quotas_and_full_routes_are_refused_with_clear_errors() {
        let (mut n, _d) = net(Topology::Line, 2, 0);
        n.add_tenant(1, 1, 2, 6, Policy::NearClient).unwrap();
        let e = n
            .add_tenant(2, 2, 2, 3, Policy::NearClient)
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "tenant 2 asked for 3 pages but only 2 are free on the path"
        );
        assert!(n.read(2, Key::from_id(1)).unwrap().0 == Answer::Dropped);
    }

    #[test]
    fn star_routes_hold_pages_on_leaf_core_leaf_only() {
        let (mut n, _d) = net(Topology::Star, 4, 0);
        for t in 0..3u16 {
            n.add_tenant(t, 0x100 + t as u32, 2, 3, Policy::EvenSplit)
                .unwrap();
        }
        // Tenant 0: client on leaf 1, store on leaf 2: one page each on leaf 1, core, leaf 2.
        assert_eq!(n.pages_of(0), vec![1, 1, 1, 0]);
        assert_eq!(n.pages_of(1), vec![1, 0, 1, 1]);
        assert_eq!(n.route_len(2), 3);
        assert!(Net::start(
            NetConfig {
                topology: Topology::Star,
                switches: 2,
                pages: 4,
                loss: Loss::default(),
                retry: Duration::from_millis(2),
            },
            1,
            &_d,
        )
        .is_err());
    }

    /// Reads `k` of tenant `t` until its switch made a hot report (threshold 2: the second
    /// miss), without giving the controller a turn.
    fn make_report(n: &mut Net, t: u16, k: Key) {
        let before = n.stats().reports_made;
        for _ in 0..4 {
            assert_eq!(n.read(t, k).unwrap().0, Answer::Store);
            if n.stats().reports_made > before {
                return;
            }
        }
        panic!("tenant {t}: no hot report made");
    }

    /// A report made while its tenant was there and still in flight when it left: delivered
    /// and dropped with the reason "tenant gone" (nothing admitted), not lost.
    #[test]
    fn a_report_in_flight_when_its_tenant_leaves_is_dropped_not_lost() {
        let (mut n, _d) = net(Topology::Line, 1, 0);
        n.add_tenant(5, 0x55, 2, 1, Policy::NearClient).unwrap();
        n.add_tenant(6, 0x66, 2, 1, Policy::NearClient).unwrap();
        let k = Key::from_id(2);
        n.load(5, k, b"five").unwrap();
        n.load(6, k, b"six").unwrap();
        make_report(&mut n, 5, k);
        make_report(&mut n, 6, k);
        assert_eq!(n.reports_in_flight(), 2);
        n.remove_tenant(5).unwrap();
        assert!(n.settle(Duration::from_secs(10)).unwrap());
        let s = n.stats();
        assert_eq!((s.reports_made, s.reports_delivered), (2, 2));
        assert_eq!(s.reports_tenant_gone, 1);
        assert_eq!(s.admitted, 1, "only the present tenant's item is admitted");
        assert_eq!(n.reports_in_flight(), 0);
        assert!(n.controller().placement(5, k).is_none());
        assert_eq!(
            n.read(6, k).unwrap(),
            (Answer::Switch(0), Some(b"six".to_vec()))
        );
    }

    /// A tenant id given to a new tenant while a report of the old one is in flight: the
    /// report (the old secret as its tag) is dropped as its tenant's, not applied to the new
    /// tenant (nor refused as forged, which stopped the controller).
    #[test]
    fn a_report_of_a_departed_tenant_is_not_applied_to_the_next_holder_of_its_id() {
        let (mut n, _d) = net(Topology::Line, 1, 0);
        n.add_tenant(5, 0x5001, 2, 1, Policy::NearClient).unwrap();
        let k = Key::from_id(2);
        n.load(5, k, b"old").unwrap();
        make_report(&mut n, 5, k);
        n.remove_tenant(5).unwrap();
        n.add_tenant(5, 0x5002, 2, 1, Policy::NearClient).unwrap();
        assert!(n.settle(Duration::from_secs(10)).unwrap());
        let s = n.stats();
        assert_eq!((s.reports_made, s.reports_delivered), (1, 1));
        assert_eq!((s.reports_tenant_gone, s.admitted), (1, 0));
        assert!(n.controller().placement(5, k).is_none());
        assert_eq!(
            n.read(5, k).unwrap(),
            (Answer::Store, Some(b"old".to_vec()))
        );
    }

    /// A report acknowledged to its agent while the controller's receiving thread had not yet
    /// queued it (a descheduled thread on a busy machine): `settle` waits for it (made =
    /// delivered), and the thread queues before it acknowledges, so an idle link means nothing
    /// is left to take.
    #[test]
    fn settle_waits_for_a_report_not_yet_handed_to_the_controller() {
        let (mut n, _d) = net(Topology::Line, 1, 0);
        n.add_tenant(3, 0x33, 2, 1, Policy::NearClient).unwrap();
        let k = Key::from_id(9);
        n.load(3, k, b"nine").unwrap();
        n.hand_over_delay
            .store(300_000, std::sync::atomic::Ordering::Relaxed);
        make_report(&mut n, 3, k);
        assert!(n.settle(Duration::from_secs(10)).unwrap());
        let s = n.stats();
        assert_eq!((s.reports_made, s.reports_delivered, s.admitted), (1, 1, 1));
        // The agent's link went idle only once the report was queued.
        assert_eq!(n.agents[0].report_link().unwrap().pending(), 0);
        assert_eq!(
            n.read(3, k).unwrap(),
            (Answer::Switch(0), Some(b"nine".to_vec()))
        );
    }
}
