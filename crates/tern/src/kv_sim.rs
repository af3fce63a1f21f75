//! The in-process switch of `tern kv up --mode sim`: a tern switch (the same program and entries
//! as the netns topology) in this process, between loopback UDP clients and servers.
//!
//! Each server j gets a front socket whose address the clients use. A datagram from client port
//! c to front j becomes an Ethernet/IPv4/UDP frame `10.77.1.1:c → 10.77.2.(j+1):(1152+j)` entering
//! switch port 1; frames the switch sends out of port 2+k go to server k from an upstream socket
//! kept per (server, client port); replies come back as frames entering port 2+k, and frames out
//! of port 1 go to the client named by their UDP destination port, from the front socket of the
//! server named by their source address. So a program that answers in the switch (a cache) is
//! simulated too. Per-port packet counts are kept.

use anyhow::Context;
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{OutputPacket, PacketPath};

/// The client's simulated address.
pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 1, 1);

/// Server `k`'s simulated address (10.77.2.(k+1) for k < 254).
pub fn server_ip(k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 2, k as u8 + 1)
}

struct Shared {
    switch: Arc<Mutex<Switch>>,
    /// The program and entries, for a reboot.
    json: String,
    commands: String,
    /// The switch is down (crashed, recovering): every frame is lost.
    down: AtomicBool,
    fronts: Vec<UdpSocket>,
    servers: Vec<SocketAddr>,
    uppers: Mutex<HashMap<(usize, u16), Arc<UdpSocket>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    stop: AtomicBool,
    /// Frames out of each switch port (index = port).
    out_counts: Vec<AtomicU64>,
}

/// The simulated switch's runtime interface, for a cache's switch OS.
pub struct SimAccess(Arc<Shared>);

impl tern_kv::switchos::SwitchAccess for SimAccess {
    fn with(
        &self,
        f: &mut dyn FnMut(&mut dyn tern_runtime::Runtime) -> tern_runtime::RtResult<()>,
    ) -> tern_runtime::RtResult<()> {
        match self.0.switch.lock() {
            Ok(mut sw) => f(&mut *sw),
            Err(p) => f(&mut *p.into_inner()),
        }
    }
}

/// A running simulated switch; stopped on drop.
pub struct SimSwitch {
    shared: Arc<Shared>,
}

/// An Ethernet/IPv4/UDP frame around `payload`.
pub(crate) fn frame(src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16), payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(42 + payload.len());
    f.extend_from_slice(&[0x02, 0x77, 0, 0, 0, 2, 0x02, 0x77, 0, 0, 0, 1, 0x08, 0x00]);
    let total = (20 + 8 + payload.len()) as u16;
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.0.octets());
    ip[16..20].copy_from_slice(&dst.0.octets());
    let sum = tern_dataplane::hash::csum16(&ip) as u16;
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    f.extend_from_slice(&src.1.to_be_bytes());
    f.extend_from_slice(&dst.1.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    f
}

/// `(src ip, src port, dst ip, dst port, payload)` of an Ethernet/IPv4/UDP frame.
pub(crate) fn parse(f: &[u8]) -> Option<(Ipv4Addr, u16, Ipv4Addr, u16, &[u8])> {
    if f.len() < 14 + 20 + 8 || f[12..14] != [0x08, 0x00] || f[23] != 17 {
        return None;
    }
    let ihl = usize::from(f[14] & 0x0f) * 4;
    let u = 14 + ihl;
    if ihl < 20 || f.len() < u + 8 {
        return None;
    }
    let ip = |o: usize| Ipv4Addr::new(f[o], f[o + 1], f[o + 2], f[o + 3]);
    let port = |o: usize| u16::from_be_bytes([f[o], f[o + 1]]);
    let len = usize::from(port(u + 4)).clamp(8, f.len() - u);
    Some((ip(26), port(u), ip(30), port(u + 2), &f[u + 8..u + len]))
}

impl Shared {
    fn process(self: &Arc<Self>, port: u32, data: &[u8]) {
        let mut out: Vec<OutputPacket> = Vec::new();
        if self.down.load(Ordering::Acquire) {
            return;
        }
        match self.switch.lock() {
            Ok(mut sw) => sw.process_packet(port, data, &mut out),
            Err(_) => return,
        }
        for o in out {
            if let Some(c) = self.out_counts.get(o.port as usize) {
                c.fetch_add(1, Ordering::Relaxed);
            }
            let Some((sip, sport, _dip, dport, payload)) = parse(&o.data) else {
                continue;
            };
            if o.port == 1 {
                // To the client, from the front of the server it claims to come from.
                let j = (0..self.servers.len()).find(|&j| server_ip(j) == sip);
                if let Some(front) = j.and_then(|j| self.fronts.get(j)) {
                    let _ = front.send_to(payload, (Ipv4Addr::LOCALHOST, dport));
                }
            } else if let Some(k) = (o.port as usize)
                .checked_sub(2)
                .filter(|&k| k < self.servers.len())
            {
                if let Some(up) = self.upper(k, sport) {
                    let _ = up.send_to(payload, self.servers[k]);
                }
            }
        }
    }

    /// The upstream socket towards server `k` for client port `cport` (made on first use,
    /// with a thread that feeds the server's replies into the switch).
    fn upper(self: &Arc<Self>, k: usize, cport: u16) -> Option<Arc<UdpSocket>> {
        let mut map = self.uppers.lock().ok()?;
        if let Some(s) = map.get(&(k, cport)) {
            return Some(s.clone());
        }
        let sock = Arc::new(UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).ok()?);
        sock.set_read_timeout(Some(Duration::from_millis(100)))
            .ok()?;
        map.insert((k, cport), sock.clone());
        let (me, s) = (self.clone(), sock.clone());
        let h = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while !me.stop.load(Ordering::Acquire) {
                if let Ok((n, _)) = s.recv_from(&mut buf) {
                    let f = frame(
                        (server_ip(k), 1152 + k as u16),
                        (CLIENT_IP, cport),
                        &buf[..n],
                    );
                    me.process(2 + k as u32, &f);
                }
            }
        });
        if let Ok(mut t) = self.threads.lock() {
            t.push(h);
        }
        Some(sock)
    }
}

/// A switch with `json` loaded and the runtime `commands` applied.
fn fresh_switch(json: &str, commands: &str) -> anyhow::Result<Switch> {
    let mut sw =
        Switch::from_json(json, SwitchOptions::default()).context("loading the program")?;
    let mut cli = tern_control::Cli::new(sw.program());
    let mut sink = Vec::new();
    cli.run_script(&mut sw, &mut commands.as_bytes(), &mut sink)
        .context("applying the switch entries")?;
    Ok(sw)
}

impl SimSwitch {
    /// Crashes the switch: it goes down (frames are lost) and comes back with only its program
    /// and forwarding entries — every register, cache entry and parameter is gone. It stays
    /// down until [`SimSwitch::set_down`]`(false)`.
    pub fn crash_and_reboot(&self) -> anyhow::Result<()> {
        self.set_down(true);
        let sw = fresh_switch(&self.shared.json, &self.shared.commands)?;
        match self.shared.switch.lock() {
            Ok(mut g) => *g = sw,
            Err(p) => *p.into_inner() = sw,
        }
        Ok(())
    }

    /// Serves BMv2's Thrift runtime API for this switch on `addr`; returns the bound address.
    pub fn serve_thrift(&self, addr: SocketAddr) -> anyhow::Result<SocketAddr> {
        let (a, _thread) = tern_thrift::spawn(addr, self.shared.switch.clone())
            .with_context(|| format!("serving Thrift on {addr}"))?;
        Ok(a)
    }

    /// Takes the switch down or brings it back up.
    pub fn set_down(&self, down: bool) {
        self.shared.down.store(down, Ordering::Release);
    }

    /// Loads `json`, applies the runtime `commands`, and opens one front per server.
    pub fn start(json: &str, commands: &str, servers: &[SocketAddr]) -> anyhow::Result<SimSwitch> {
        Self::start_on(json, commands, servers, &[])
    }

    /// [`SimSwitch::start`] with the front sockets bound to `fronts` (one per server; empty:
    /// free loopback ports), so a restarted switch keeps the addresses clients use.
    pub fn start_on(
        json: &str,
        commands: &str,
        servers: &[SocketAddr],
        fronts: &[SocketAddr],
    ) -> anyhow::Result<SimSwitch> {
        if !fronts.is_empty() && fronts.len() != servers.len() {
            anyhow::bail!(
                "{} front addresses for {} servers",
                fronts.len(),
                servers.len()
            );
        }
        if servers.len() > 253 {
            anyhow::bail!("sim mode: at most 253 servers");
        }
        let sw = fresh_switch(json, commands)?;
        let fronts = (0..servers.len())
            .map(|j| {
                let at = fronts
                    .get(j)
                    .copied()
                    .unwrap_or(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)));
                let s = UdpSocket::bind(at)?;
                s.set_read_timeout(Some(Duration::from_millis(100)))?;
                Ok(s)
            })
            .collect::<std::io::Result<Vec<_>>>()
            .context("opening the front sockets")?;
        let shared = Arc::new(Shared {
            switch: Arc::new(Mutex::new(sw)),
            json: json.to_string(),
            commands: commands.to_string(),
            down: AtomicBool::new(false),
            fronts,
            servers: servers.to_vec(),
            uppers: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            out_counts: (0..servers.len() + 2).map(|_| AtomicU64::new(0)).collect(),
        });
        for j in 0..servers.len() {
            let me = shared.clone();
            let h = std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while !me.stop.load(Ordering::Acquire) {
                    if let Ok((n, from)) = me.fronts[j].recv_from(&mut buf) {
                        let f = frame(
                            (CLIENT_IP, from.port()),
                            (server_ip(j), 1152 + j as u16),
                            &buf[..n],
                        );
                        me.process(1, &f);
                    }
                }
            });
            if let Ok(mut t) = shared.threads.lock() {
                t.push(h);
            }
        }
        Ok(SimSwitch { shared })
    }

    /// The addresses clients use for the servers, in order.
    pub fn fronts(&self) -> Vec<SocketAddr> {
        self.shared
            .fronts
            .iter()
            .filter_map(|s| s.local_addr().ok())
            .collect()
    }

    /// The switch's runtime interface (serialised with packet processing).
    pub fn access(&self) -> SimAccess {
        SimAccess(self.shared.clone())
    }

    /// Frames sent out of each switch port so far: `(port, frames)` for ports 1..
    pub fn out_counts(&self) -> Vec<(u32, u64)> {
        self.shared
            .out_counts
            .iter()
            .enumerate()
            .skip(1)
            .map(|(p, c)| (p as u32, c.load(Ordering::Relaxed)))
            .collect()
    }

    /// Stops the relay threads.
    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::Release);
        let threads = match self.shared.threads.lock() {
            Ok(mut t) => std::mem::take(&mut *t),
            Err(_) => return,
        };
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for SimSwitch {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
#[path = "kv_sim_between.rs"]
mod between;

#[cfg(test)]
mod tests {
    //! FarReach's switch OS on the simulated switch with real servers: the snapshot keeps the
    //! state at the snapshot point (case 1 copies the old record, the slot takes the new one),
    //! and an eviction writes the switch's latest record back to its server.

    use super::*;
    use tern_kv::client::Client;
    use tern_kv::protocol::{Key, Message, Op};
    use tern_kv::router::Router;
    use tern_kv::switchos::{CacheKind, SwitchOs, SwitchOsConfig};
    use tern_runtime::{PacketPath, Runtime};

    struct Dir(std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn setup(
        tag: &str,
        capacity: u32,
    ) -> (
        Dir,
        Vec<tern_kv::server::ServerHandle>,
        SimSwitch,
        SwitchOs<SimAccess>,
        Client,
    ) {
        setup_on(tag, capacity, SimSwitch::access, |_| {})
    }

    /// [`setup`] with the switch OS on the access `access` makes and its settings changed by
    /// `tune`.
    fn setup_on<A: tern_kv::switchos::SwitchAccess>(
        tag: &str,
        capacity: u32,
        access: impl FnOnce(&SimSwitch) -> A,
        tune: impl FnOnce(&mut SwitchOsConfig),
    ) -> (
        Dir,
        Vec<tern_kv::server::ServerHandle>,
        SimSwitch,
        SwitchOs<A>,
        Client,
    ) {
        let dir =
            Dir(std::env::temp_dir().join(format!("tern-kvsim-{tag}-{}", std::process::id())));
        let _ = std::fs::remove_dir_all(&dir.0);
        let servers = tern_kv::bench::start_local_servers(
            &dir.0,
            1,
            1,
            1,
            &tern_kv::storage::StoreOptions::default(),
        )
        .unwrap();
        let addrs = tern_kv::bench::addrs(&servers);
        let json = tern_p4::compile_str(
            crate::cmd_kv_up::FARREACH_P4,
            "p4/kv/farreach.p4",
            &Default::default(),
        )
        .unwrap()
        .json;
        let entries = format!(
            "table_add forward to_port {} => 1\ntable_add forward to_port {} => 2\n",
            u32::from(CLIENT_IP),
            u32::from(server_ip(0))
        );
        let sim = SimSwitch::start(&json, &entries, &addrs).unwrap();
        let mut c = SwitchOsConfig::new(CacheKind::FarReach, addrs);
        c.capacity = capacity;
        c.hot_threshold = 1;
        c.sample_all = true;
        c.snapshot_period = None;
        c.sketch_reset = Duration::from_secs(3600);
        tune(&mut c);
        let os = SwitchOs::start(access(&sim), c).unwrap();
        servers[0].cache_ctl().set_switchos(Some(os.addr()));
        let client = Client::new(
            Router::new(sim.fronts()).unwrap(),
            Duration::from_millis(500),
            3,
        )
        .unwrap();
        (dir, servers, sim, os, client)
    }

    /// PUTs `key` until the switch answers one (admitted and absorbing writes).
    fn until_absorbed(c: &mut Client, key: Key, value: &[u8]) -> u32 {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let (seq, by) = c.put_detailed(key, value).unwrap();
            if by == 0xFFFF {
                return seq;
            }
            assert!(std::time::Instant::now() < deadline, "never admitted");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn reg<A: tern_kv::switchos::SwitchAccess>(os: &SwitchOs<A>, name: &str, i: u32) -> u64 {
        let mut v = 0;
        os.with_switch(&mut |rt| {
            v = rt.register_read(&format!("KvIngress.{name}"), i)?;
            Ok(())
        })
        .unwrap();
        v
    }

    #[test]
    fn snapshot_and_case1_keep_the_snapshot_point() {
        let (_d, servers, _sim, os, mut c) = setup("snap", 4);
        let k = Key::from_id(7);
        let s1 = until_absorbed(&mut c, k, b"value-one");
        let snap = os.snapshot();
        assert_eq!(snap.records.len(), 1, "{snap:?}");
        assert_eq!(snap.records[0].key, k);
        assert_eq!(snap.records[0].value.as_deref(), Some(&b"value-one"[..]));
        assert_eq!(snap.records[0].seq, s1);
        // Set the snapshot flag by hand; the next absorbed write copies the old record.
        let base = os.seq_base();
        os.with_switch(&mut |rt| {
            rt.mt_set_default_action(
                "KvIngress.kv_params",
                "KvIngress.set_params",
                &[
                    vec![0, 1],
                    vec![1],
                    base.to_be_bytes().to_vec(),
                    vec![0, 0, 0, 9],
                ],
            )
        })
        .unwrap();
        let (s2, by) = c.put_detailed(k, b"value-two").unwrap();
        assert_eq!(by, 0xFFFF);
        let (s3, _) = c.put_detailed(k, b"value-three!").unwrap();
        assert!(s3 > s2 && s2 > s1);
        assert_eq!(reg(&os, "case1_reg", 0), 1);
        assert_eq!(reg(&os, "snap_seq_reg", 0), u64::from(s1));
        assert_eq!(reg(&os, "snap_vallen_reg", 0), 9);
        assert_eq!(reg(&os, "savedseq_reg", 0), u64::from(s3));
        assert_eq!(
            reg(&os, "snap_val_reg", 0).to_be_bytes(),
            *b"value-on",
            "the shadow keeps the record of the snapshot point"
        );
        // The server never saw the absorbed writes.
        let stored = servers[0].store().get(&k).unwrap().unwrap();
        assert!(stored.seq < s1);
    }

    #[test]
    fn eviction_writes_the_latest_record_back() {
        let (_d, servers, _sim, os, mut c) = setup("evict", 1);
        let k1 = Key::from_id(1);
        let s1 = until_absorbed(&mut c, k1, b"k1 in the switch only");
        let stored = servers[0].store().get(&k1).unwrap().unwrap();
        assert!(stored.seq < s1, "the write must be in the switch only");
        // k2 gets hot: one slot, so k1 is evicted and written back.
        let k2 = Key::from_id(2);
        until_absorbed(&mut c, k2, b"k2");
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while os.stats().writebacks.load(Ordering::Relaxed) == 0 {
            assert!(std::time::Instant::now() < deadline, "no write-back");
            std::thread::sleep(Duration::from_millis(5));
        }
        let stored = servers[0].store().get(&k1).unwrap().unwrap();
        assert_eq!(stored.seq, s1);
        assert_eq!(stored.value.as_deref(), Some(&b"k1 in the switch only"[..]));
        // And a read through the switch now goes to the server and sees it.
        let g = c.get(k1).unwrap();
        assert_eq!(g.value.as_deref(), Some(&b"k1 in the switch only"[..]));
        assert_ne!(g.served_by, 0xFFFF);
    }

    /// Recovery of a 10,000-record cache, phase by phase (snapshot load, preserved records,
    /// server replay, re-install): the servers end with the newest record of every key (the
    /// snapshot's or a client's preserved one, whichever has the larger seq), the switch OS
    /// caches all 10,000 keys again, and a read of one is served with its newest value.
    #[test]
    fn recovery_of_a_10000_record_cache_is_measured() {
        let (d, servers, sim, os, mut c) = setup("recover10k", 10_000);
        let n = 10_000u64;
        let value =
            |id: u64, seq: u32| format!("v{id}-s{seq}-").repeat(20).into_bytes()[..96].to_vec();
        let snapshot = tern_kv::switchos::Snapshot {
            id: 1,
            records: (1..=n)
                .map(|id| tern_kv::switchos::SnapshotRecord {
                    key: Key::from_id(id),
                    server: 0,
                    value: Some(value(id, 1_000 + id as u32)),
                    seq: 1_000 + id as u32,
                })
                .collect(),
        };
        // The clients preserved 2,000 records: newer ones for odd ids, older ones for even.
        let preserved: Vec<tern_kv::history::Preserved> = (1..=2_000u64)
            .map(|id| {
                let seq = if id % 2 == 1 { 50_000 + id as u32 } else { 10 };
                (Key::from_id(id), Some(value(id, seq)), seq)
            })
            .collect();
        let path = d.0.join("preserved.txt");
        tern_kv::history::write_preserved(&path, &preserved).unwrap();
        let cfg = SwitchOsConfig::new(CacheKind::FarReach, tern_kv::bench::addrs(&servers));
        let t0 = std::time::Instant::now();
        sim.crash_and_reboot().unwrap();
        let mut rep = tern_kv::switchos::RecoveryReport::default();
        crate::cmd_kv_up::replay_records(&cfg, snapshot, &path, &mut rep).unwrap();
        let keys: Vec<(Key, u16)> = (1..=n).map(|id| (Key::from_id(id), 0)).collect();
        let t = std::time::Instant::now();
        rep.reinstalled = os.reinstall(&keys, Duration::from_secs(60));
        rep.reinstall = t.elapsed();
        sim.set_down(false);
        rep.total = t0.elapsed();
        eprintln!(
            "recovery of a 10,000-record cache (this build): {}",
            crate::cmd_kv_up::phases_line(&rep)
        );
        assert_eq!(rep.snapshot_records, 10_000);
        assert_eq!(rep.preserved_records, 2_000);
        assert_eq!(rep.replayed, 10_000);
        assert_eq!(rep.reinstalled, 10_000);
        for id in [1u64, 2, 1_999, 2_000, 2_001, 9_999, 10_000] {
            let r = servers[0].store().get(&Key::from_id(id)).unwrap().unwrap();
            let seq = if id <= 2_000 && id % 2 == 1 {
                50_000 + id as u32
            } else {
                1_000 + id as u32
            };
            assert_eq!((r.seq, r.value), (seq, Some(value(id, seq))), "key {id}");
        }
        // Re-installed not latest: the first read fetches the server's record, then hits.
        let k = Key::from_id(3);
        let g = c.get(k).unwrap();
        assert_eq!(g.value, Some(value(3, 50_003)));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let g = c.get(k).unwrap();
            assert_eq!(g.value, Some(value(3, 50_003)));
            if g.served_by == 0xFFFF {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "never served by the switch"
            );
        }
    }

    /// A dead server while the cache runs (FarReach): the switch keeps answering for its
    /// cached key (absorbed writes acknowledged), writes of uncached keys are not acknowledged,
    /// the switch OS's eviction write-back gets no answer and leaves the record in the switch
    /// (logged, the OS carries on); once the server is back on the same address, the next
    /// eviction writes the newest record back. No acknowledged write is lost.
    #[test]
    fn a_dead_server_loses_no_acknowledged_write() {
        let (d, mut servers, _sim, os, mut c) = setup("deadsrv", 1);
        let k1 = Key::from_id(1);
        until_absorbed(&mut c, k1, b"k1 absorbed");
        let addr = servers[0].addr();
        servers.pop().unwrap().shutdown().unwrap();
        let (s2, by) = c.put_detailed(k1, b"k1 while the server is dead").unwrap();
        assert_eq!(by, 0xFFFF, "a cached key's write is absorbed");
        let g = c.get(k1).unwrap();
        assert_eq!(
            g.value.as_deref(),
            Some(&b"k1 while the server is dead"[..])
        );
        assert_eq!(g.served_by, 0xFFFF);
        assert!(
            c.put(Key::from_id(5), b"nobody stores this").is_err(),
            "a write nobody stored must not be acknowledged"
        );
        // k2 needs k1's slot: the write-back gets no answer, k1 stays and is still served.
        os.admit_later(Key::from_id(2), 0);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while os.stats().gave_up.load(Ordering::Relaxed) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "the write-back never gave up"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(os.stats().writebacks.load(Ordering::Relaxed), 0);
        let g = c.get(k1).unwrap();
        assert_eq!(
            (g.value.as_deref(), g.served_by),
            (Some(&b"k1 while the server is dead"[..]), 0xFFFF)
        );
        // The server comes back with its data on the same address.
        let mut cfg = tern_kv::server::ServerConfig::new(d.0.join("server0"), addr.port());
        cfg.switchos = Some(os.addr());
        servers.push(tern_kv::server::start(&cfg).unwrap());
        os.admit_later(Key::from_id(2), 0);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while os.stats().writebacks.load(Ordering::Relaxed) == 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no write-back after the restart"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let stored = servers[0].store().get(&k1).unwrap().unwrap();
        assert_eq!(stored.seq, s2);
        assert_eq!(
            stored.value.as_deref(),
            Some(&b"k1 while the server is dead"[..])
        );
        let g = c.get(k1).unwrap();
        assert_eq!(
            g.value.as_deref(),
            Some(&b"k1 while the server is dead"[..])
        );
        assert_ne!(g.served_by, 0xFFFF);
    }

    /// Waits (10 s at most) until `done` holds, else fails naming `what`.
    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(std::time::Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Over Thrift (netns and loopback topologies) every runtime call is its own request, so a
    /// write of the key being evicted can pass between the switch OS's `validvalue := 3` and its
    /// read of `latest`, and clear latest on its way to the server. When that write is then lost
    /// (its server dead; its client gives up or its retry comes later), the switch's record is
    /// the only copy of an acknowledged write: the eviction must still write it back, or the
    /// server answers the next read with an older value (a stale read).
    #[test]
    fn a_write_between_two_runtime_calls_of_an_eviction_loses_nothing() {
        let hook: Arc<Mutex<Option<super::between::Hook>>> = Arc::new(Mutex::new(None));
        let h = hook.clone();
        let (_d, servers, _sim, os, mut c) = setup_on(
            "between",
            1,
            move |sim| super::between::Between {
                switch: sim.shared.switch.clone(),
                hook: h,
            },
            |_| {},
        );
        let k1 = Key::from_id(1);
        let s1 = until_absorbed(&mut c, k1, b"k1 acknowledged by the switch");
        let passed: Arc<Mutex<Vec<Op>>> = Arc::new(Mutex::new(Vec::new()));
        let p = passed.clone();
        // Right after the runtime call that marks k1's slot being evicted: a PUT of k1 from a
        // client, whose way to the server is lost.
        *hook.lock().unwrap() = Some(Box::new(move |sw: &mut Switch| {
            if sw.register_read("KvIngress.validvalue_reg", 0).unwrap_or(0) != 3 {
                return false;
            }
            let put = Message::new(Op::PUTREQ, k1)
                .with_value(b"k1 lost on its way".to_vec())
                .encode()
                .unwrap();
            let mut out = Vec::new();
            sw.process_packet(
                1,
                &frame((CLIENT_IP, 7777), (server_ip(0), 1152), &put),
                &mut out,
            );
            let mut p = p.lock().unwrap();
            for o in &out {
                if let Some(m) = parse(&o.data).and_then(|f| Message::decode(f.4).ok()) {
                    p.push(m.op);
                }
            }
            true
        }));
        os.admit_later(Key::from_id(2), 0);
        wait_for("k1 never evicted", || {
            os.stats().evictions.load(Ordering::Relaxed) == 1
        });
        assert_eq!(
            *passed.lock().unwrap(),
            [Op::PUTREQ_SEQ_BEINGEVICTED],
            "the write must have passed while k1 was being evicted"
        );
        let stored = servers[0].store().get(&k1).unwrap().unwrap();
        assert_eq!(
            (stored.seq, stored.value.as_deref()),
            (s1, Some(&b"k1 acknowledged by the switch"[..])),
            "the switch's record of k1 was not written back"
        );
        let g = c.get(k1).unwrap();
        assert_eq!((g.seq, g.served_by), (s1, 0));
    }

    /// An eviction whose write-back nobody acknowledges (its server dead) while a write of the
    /// key passes to that server and is lost (the interleaving behind the one stale read of
    /// `netns_servers_killed_and_restarted`): the slot must not become valid again with latest
    /// cleared, or reads go to the restarted server, which has neither the switch's record nor
    /// the lost write, and get an older value than an acknowledged write. It stays being
    /// evicted: reads carry the switch's record to the server (the newer wins), snapshots keep
    /// it, and the next eviction writes it back.
    #[test]
    fn a_failed_write_back_never_hides_the_switch_record() {
        let (d, mut servers, sim, os, mut c) =
            setup_on("failwb", 1, SimSwitch::access, |cfg| cfg.tries = 100);
        let k1 = Key::from_id(1);
        let v1 = &b"k1 acknowledged by the switch"[..];
        let s1 = until_absorbed(&mut c, k1, v1);
        let addr = servers[0].addr();
        servers.pop().unwrap().shutdown().unwrap();
        // k2 needs k1's slot: the write-back goes unanswered for tries × ack_timeout = 2 s.
        os.admit_later(Key::from_id(2), 0);
        wait_for("k1 never marked being evicted", || {
            reg(&os, "validvalue_reg", 0) == 3
        });
        // Meanwhile a write of k1 passes to the dead server: lost, never acknowledged.
        let mut w = Client::new(
            Router::new(sim.fronts()).unwrap(),
            Duration::from_millis(50),
            0,
        )
        .unwrap();
        assert!(w.put(k1, b"k1 lost with the dead server").is_err());
        assert_eq!(reg(&os, "latest_reg", 0), 0, "the write passed");
        wait_for("the write-back never gave up", || {
            os.stats().gave_up.load(Ordering::Relaxed) > 0
        });
        // The server comes back with its data on the same address: without k1's record.
        let mut cfg = tern_kv::server::ServerConfig::new(d.0.join("server0"), addr.port());
        cfg.switchos = Some(os.addr());
        servers.push(tern_kv::server::start(&cfg).unwrap());
        assert!(servers[0].store().get(&k1).unwrap().unwrap().seq < s1);
        let g = c.get(k1).unwrap();
        assert_eq!(
            (g.seq, g.value.as_deref()),
            (s1, Some(v1)),
            "stale read: older than the acknowledged write of seq {s1}"
        );
        let snap = os.snapshot();
        assert!(
            snap.records
                .iter()
                .any(|r| r.key == k1 && r.seq == s1 && r.value.as_deref() == Some(v1)),
            "the snapshot lost k1's record: {snap:?}"
        );
        // The next eviction retries k1's write-back.
        os.admit_later(Key::from_id(2), 0);
        wait_for("k1 never written back", || {
            os.stats().writebacks.load(Ordering::Relaxed) > 0
        });
        let stored = servers[0].store().get(&k1).unwrap().unwrap();
        assert_eq!((stored.seq, stored.value.as_deref()), (s1, Some(v1)));
        let g = c.get(k1).unwrap();
        assert_eq!((g.seq, g.served_by), (s1, 0));
    }

    /// A failed write-back is not retried before as long again as it took: meanwhile an
    /// admission evicts another victim instead of waiting on the same dead server again, so a
    /// dead server does not stop admission (here the other victim's server is the same dead
    /// one, so it fails too and both slots end being evicted, their records kept).
    #[test]
    fn a_failed_write_back_waits_while_other_victims_are_taken() {
        let (_d, mut servers, _sim, os, mut c) = setup_on("failwait", 2, SimSwitch::access, |_| {});
        let (k1, k3) = (Key::from_id(1), Key::from_id(3));
        let s1 = until_absorbed(&mut c, k1, b"k1 in the switch");
        let s3 = until_absorbed(&mut c, k3, b"k3 in the switch");
        wait_for("two keys cached", || os.cached_count() == 2);
        servers.pop().unwrap().shutdown().unwrap();
        os.admit_later(Key::from_id(2), 0);
        wait_for("the first write-back never gave up", || {
            os.stats().gave_up.load(Ordering::Relaxed) == 1
        });
        let first = (0..2)
            .filter(|&i| reg(&os, "validvalue_reg", i) == 3)
            .count();
        assert_eq!(first, 1, "one victim being evicted");
        // At once again: the failed victim is not due, the other slot is taken.
        os.admit_later(Key::from_id(2), 0);
        wait_for("the second write-back never gave up", || {
            os.stats().gave_up.load(Ordering::Relaxed) == 2
        });
        assert_eq!(
            (reg(&os, "validvalue_reg", 0), reg(&os, "validvalue_reg", 1)),
            (3, 3),
            "the second admission must take the other victim"
        );
        assert_eq!(os.cached_count(), 2);
        let snap = os.snapshot();
        let mut seqs: Vec<u32> = snap.records.iter().map(|r| r.seq).collect();
        seqs.sort_unstable();
        assert_eq!(seqs, [s1.min(s3), s1.max(s3)], "{snap:?}");
    }
}
