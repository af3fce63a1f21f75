//! `tern kv up` / `tern kv down`: bring up a key-value topology, optionally run one client
//! command in it, and tear it down on exit or ctrl-c.
//!
//! Modes:
//! * `loopback`: `tern kv server` processes on 127.0.0.1 (no switch);
//! * `inproc`: the servers as threads of this process on loopback (no switch);
//! * `sim`: `inproc` plus the switch program run in this process between clients and servers
//!   (see `kv_sim`);
//! * `netns`: client and server hosts in network namespaces, each joined by a veth pair to a
//!   switch namespace that runs tern (`tern run` on live ports with `p4/kv/forward.p4`, compiled
//!   by tern's own compiler, and its `forward` entries installed with `--commands`) or, with
//!   `--switch bridge`, a Linux bridge.
//!
//! Every namespace is named `tkv<pid>-…` after the `tern kv up` process that made it, so
//! `tern kv down` (and every `up`) can remove what a killed run left behind.

use anyhow::{bail, Context};
use serde::Deserialize;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The switch program used when `--program` is not given.
pub const FORWARD_P4: &str = include_str!("../../../p4/kv/forward.p4");
/// NetCache's switch program (`--cache netcache`).
pub const NETCACHE_P4: &str = include_str!("../../../p4/kv/netcache.p4");
/// FarReach's switch program (`--cache farreach`).
pub const FARREACH_P4: &str = include_str!("../../../p4/kv/farreach.p4");
/// Name of the program's per-port key-value packet counter.
const KV_COUNTER: &str = "KvIngress.kv_packets";
/// The switch OS's address in netns mode (a veth of the switch namespace on its own port).
const NETNS_SWITCHOS_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 3, 1);
/// First server UDP port (FarReach's servers listen on 1152 + index).
const BASE_PORT: u16 = 1152;

/// `tern kv up`
#[derive(clap::Args, Debug, Default)]
#[command(after_help = "Examples:\n  \
    tern kv up --mode loopback --servers 4            # servers until ctrl-c; prints --servers\n  \
    tern kv up --mode netns --servers 2 -- tern kv bench --workload a\n  \
    tern kv up --mode sim --servers 4 -- tern kv bench --workload c   # switch in this process\n  \
    tern kv up --mode sim --cache farreach -- tern kv bench --workload a   # FarReach + switch OS\n  \
    tern kv up --mode loopback --cache netcache --crashes 3 -- tern kv check   # SIGKILL the switch\n  \
    tern kv up --mode netns --cache farreach --stats-file s.json -- tern kv check\n  \
    tern kv up --mode netns --cache farreach --crashes 3 -- tern kv check   # SIGKILL tern run\n  \
    tern kv up --mode loopback --cache farreach --kill-server 2 -- tern kv check   # dead servers\n  \
    tern kv up --config topo.json -- tern kv bench --workload c --json c.json\n\n\
    The command after `--` runs once everything answers (in the first client namespace in \
    netns mode), with `{servers}` in its arguments and the TERN_KV_SERVERS environment \
    variable set to the server list (`tern kv bench` reads it when --servers is not given); a \
    leading `tern` is this binary. Its exit status is `up`'s. Without a command, `up` waits \
    for ctrl-c. Namespaces, veths, switch and servers are removed on exit and on ctrl-c.\n\n\
    Config file (JSON; command-line options win): {\"mode\": \"netns\", \"switch\": \"tern\", \
    \"servers\": 4, \"server_hosts\": 2, \"clients\": 1, \"partitions\": 1, \"workers\": 2, \
    \"program\": \"p4/kv/forward.p4\", \"dir\": \"/tmp/kv\"}")]
pub struct UpArgs {
    /// JSON topology file (keys as the long options, with underscores).
    #[arg(long)]
    config: Option<PathBuf>,
    /// loopback, inproc, sim or netns.
    #[arg(long)]
    mode: Option<String>,
    /// netns switch: tern (default) or bridge.
    #[arg(long)]
    switch: Option<String>,
    /// Storage servers (ports 1152 + i).
    #[arg(long)]
    servers: Option<usize>,
    /// netns: namespaces the servers are spread over (round robin).
    #[arg(long)]
    server_hosts: Option<usize>,
    /// netns: client namespaces (the command runs in the first).
    #[arg(long)]
    clients: Option<usize>,
    /// RocksDB partitions per server.
    #[arg(long)]
    partitions: Option<usize>,
    /// Worker threads per server.
    #[arg(long)]
    workers: Option<usize>,
    /// Switch program for `--switch tern` (P4-16 source or BMv2 JSON; default: the built-in
    /// p4/kv/forward.p4). It must have table `forward` (exact on the destination IPv4 address,
    /// action `to_port(port)`).
    #[arg(long)]
    program: Option<PathBuf>,
    /// Working directory (data, logs, compiled program; default: a temporary one, removed).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// loopback: first server port (netns always uses FarReach's 1152 + i).
    #[arg(long, default_value_t = BASE_PORT)]
    base_port: u16,
    /// In-network cache: nocache (forward.p4), netcache, farreach or madinc (sim mode: a line
    /// or star of tern switches, see --topology).
    #[arg(long)]
    cache: Option<String>,
    /// MADINC: line or star (core + leaves).
    #[arg(long, default_value = "line")]
    topology: String,
    /// MADINC: switches in the topology (star: at least 3).
    #[arg(long, default_value_t = 3)]
    switches: usize,
    /// MADINC: tenants added at start (ids 1 … N, secrets printed and passed to the command
    /// as TERN_MADINC_TENANTS=id:secret,…; the front address as TERN_MADINC_FRONT).
    #[arg(long, default_value_t = 4)]
    tenants: u16,
    /// MADINC: write the front address and tenants as JSON to this file once up.
    #[arg(long)]
    front_file: Option<PathBuf>,
    #[command(flatten)]
    opts: CacheOpts,
    /// Fault injection (with a cache, in every mode with a switch): crash the switch this many
    /// times at random moments (it loses every register and entry and its switch OS dies),
    /// then recover: replay the last snapshot and the clients' preserved records into the
    /// servers, restart the switch OS with a seq floor above every stored seq, bring the switch
    /// back. sim: in-process crash; loopback: SIGKILL of the `tern kv sim-switch` process;
    /// netns: SIGKILL of `tern run` and of `tern kv switchos` (the snapshot survives in the
    /// switch OS's snapshot file), restart of both with `tern kv switchos --recover` while the
    /// clients' switch ports are held down.
    #[arg(long, default_value_t = 0)]
    crashes: u32,
    /// Mean time between crashes (and server kills) in milliseconds (each wait is uniform in
    /// [0.5, 1.5] × this).
    #[arg(long, default_value_t = 1000)]
    crash_period_ms: u64,
    /// Fault injection (loopback or netns mode: the servers are processes): SIGKILL a random
    /// storage server this many times at random moments, keep it dead for --server-down-ms,
    /// then restart it on the same folder and port and wait until it answers through the
    /// topology again. Reported: how many cached GETs the switch answered while the server was
    /// dead (`server_kills` in the stats file).
    #[arg(long, default_value_t = 0)]
    kill_server: u32,
    /// How long a killed server stays dead, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    server_down_ms: u64,
    /// Write the switch OS and data-plane counters as JSON to this file on exit.
    #[arg(long)]
    stats_file: Option<PathBuf>,
    /// Seconds to wait for every server to answer through the topology.
    #[arg(long, default_value_t = 30)]
    ready_timeout: u64,
    /// Command to run once the topology is up (after `--`).
    #[arg(last = true)]
    command: Vec<String>,
}

/// Switch OS options shared by `tern kv up` and `tern kv switchos`.
#[derive(clap::Args, Debug, Default, Clone)]
pub struct CacheOpts {
    /// Cache capacity in records (at most 10,000, the programs' KV_RECORDS).
    #[arg(long, default_value_t = 10_000)]
    cache_size: u32,
    /// Hot threshold of the count-min sketch, on sampled requests.
    #[arg(long, default_value_t = 10)]
    hot_threshold: u16,
    /// Count every request in the sketch (default: one in two, FarReach's sampling).
    #[arg(long)]
    sample_all: bool,
    /// FarReach snapshot period in milliseconds (0: none).
    #[arg(long, default_value_t = 10_000)]
    snapshot_ms: u64,
    /// Fraction of the switch OS's control messages dropped on purpose (lossy-control mode).
    #[arg(long, default_value_t = 0.0)]
    control_loss: f64,
    /// Fraction of the switch OS's control messages sent twice (duplicated-control mode: every
    /// request to a server, every acknowledgement of a report; a duplicated report is also
    /// handled twice).
    #[arg(long, default_value_t = 0.0)]
    control_dup: f64,
}

/// `tern kv switchos`
#[derive(clap::Args, Debug)]
pub struct SwitchOsArgs {
    /// netcache or farreach.
    #[arg(long)]
    cache: String,
    /// Comma-separated server addresses, by server index.
    #[arg(long)]
    servers: String,
    /// The switch's Thrift port on 127.0.0.1.
    #[arg(long, default_value_t = 9090)]
    thrift_port: u16,
    /// Address to receive hot-key reports on.
    #[arg(long)]
    bind: SocketAddr,
    /// Write the counters as JSON here on exit (SIGINT).
    #[arg(long)]
    stats_file: Option<PathBuf>,
    /// FarReach: write every completed snapshot to this file (atomically: temporary file and
    /// rename, with a CRC-32), so that it survives this process.
    #[arg(long)]
    snapshot_file: Option<PathBuf>,
    /// Start by recovering from a switch crash (FarReach §3.9): read the last snapshot from
    /// --snapshot-file (none yet: no records) and the clients' preserved records from
    /// --preserved, replay the newest record per key into the servers with the seq check, then
    /// set the seq floor above every stored seq and re-admit the snapshot's keys, all before
    /// printing the `listening` line. Prints `tern kv switchos: recovered {phases as JSON}`
    /// first.
    #[arg(long)]
    recover: bool,
    /// With --recover: the clients' preserved records (the file `tern kv check` and
    /// `tern kv bench --preserve` dump).
    #[arg(long)]
    preserved: Option<PathBuf>,
    #[command(flatten)]
    opts: CacheOpts,
}

fn parse_cache(name: &str) -> anyhow::Result<Option<tern_kv::switchos::CacheKind>> {
    Ok(match name {
        "nocache" => None,
        "netcache" => Some(tern_kv::switchos::CacheKind::NetCache),
        "farreach" => Some(tern_kv::switchos::CacheKind::FarReach),
        other => bail!("cache {other:?}: expected nocache, netcache or farreach"),
    })
}

/// `tern kv up --cache madinc` (`madinc_net::up`).
fn madinc_up(a: UpArgs) -> anyhow::Result<ExitCode> {
    // sim: the switches in this process; loopback: each a `tern kv madinc-switch` process.
    // netns: each switch process in a namespace of its own (root), 100 µs netem each way.
    let (processes, netns) = match a.mode.as_deref() {
        None | Some("sim") => (false, None),
        Some("loopback") => (true, None),
        Some("netns") => {
            if !is_root() {
                bail!("--mode netns needs root (network namespaces, veths, tc netem)");
            }
            (true, Some(std::time::Duration::from_micros(100)))
        }
        Some(m) => bail!("--cache madinc runs in --mode sim, loopback or netns, not {m:?}"),
    };
    let dir = a.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("tern-kv-up-madinc-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Release))
            .context("installing the ctrl-c handler")?;
    }
    let cfg = super::madinc_net::UpConfig {
        net: super::madinc_net::NetConfig {
            topology: a.topology.parse()?,
            switches: a.switches,
            pages: 64,
            loss: Default::default(),
            retry: std::time::Duration::from_millis(3),
        },
        stores: a.servers.unwrap_or(1),
        tenants: a.tenants,
        hot_threshold: a.opts.hot_threshold,
        pages: 2,
        dir: dir.clone(),
        front_file: a.front_file.clone(),
        command: a.command.clone(),
        processes,
        netns,
    };
    let r = super::madinc_net::up(cfg, &stop);
    if a.dir.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(ExitCode::from(r?.clamp(0, 255) as u8))
}

/// Runs `tern kv switchos`: the caches' switch OS against a switch's Thrift API, until SIGINT.
pub fn switchos_cmd(a: SwitchOsArgs) -> anyhow::Result<ExitCode> {
    let Some(kind) = parse_cache(&a.cache)? else {
        bail!("--cache nocache has no switch OS");
    };
    let servers: Vec<SocketAddr> = a
        .servers
        .split(',')
        .map(|x| x.trim().parse().with_context(|| format!("address {x:?}")))
        .collect::<anyhow::Result<_>>()?;
    let mut c = switchos_config(&a.opts, kind, servers, a.bind)?;
    c.snapshot_file = a.snapshot_file.clone();
    if a.recover && kind == tern_kv::switchos::CacheKind::FarReach && a.snapshot_file.is_none() {
        bail!("--recover needs --snapshot-file (the snapshot to recover from)");
    }
    let t0 = Instant::now();
    let mut rep = tern_kv::switchos::RecoveryReport::default();
    let mut keys = Vec::new();
    // The snapshot first: a damaged file stops here, before anything is touched.
    let snapshot = match (&a.snapshot_file, a.recover) {
        (Some(f), true) => tern_kv::snapfile::read(f)?.unwrap_or_default(),
        _ => Default::default(),
    };
    rep.snapshot_load = t0.elapsed();
    let rt = connect_thrift(a.thrift_port)?;
    if a.recover {
        // The switch is up (Thrift answers, its --commands applied): the servers are reachable
        // through it. Its clients are not (the fault injector holds their ports down) until
        // the seq floor is set below.
        keys = snapshot.records.iter().map(|r| (r.key, r.server)).collect();
        let none = PathBuf::new();
        replay_records(
            &c,
            snapshot,
            a.preserved.as_deref().unwrap_or(&none),
            &mut rep,
        )?;
    }
    let t = Instant::now();
    let access: Box<dyn tern_kv::switchos::SwitchAccess> = Box::new(std::sync::Mutex::new(rt));
    let os = tern_kv::switchos::SwitchOs::start(access, c).context("starting the switch OS")?;
    if a.recover {
        rep.reinstalled = os.reinstall(&keys, REINSTALL_WAIT);
        rep.reinstall = t.elapsed();
        rep.total = t0.elapsed();
        println!("tern kv switchos: recovered {}", phases_json(&rep));
    }
    println!("tern kv switchos: listening on {}", os.addr());
    std::io::stdout().flush()?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Release))
            .context("installing the ctrl-c handler")?;
    }
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let j = os_stats(&os, kind, (0, Vec::new(), 0), (0, 0));
    if let Some(f) = &a.stats_file {
        std::fs::write(f, serde_json::to_string_pretty(&j)? + "\n")
            .with_context(|| format!("writing {}", f.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// `tern kv sim-switch`
#[derive(clap::Args, Debug)]
pub struct SimSwitchArgs {
    /// The switch program (BMv2 JSON or P4-16 source).
    #[arg(long)]
    program: PathBuf,
    /// Comma-separated server addresses, by server index.
    #[arg(long)]
    servers: String,
    /// Comma-separated front addresses (one per server; default: free loopback ports).
    #[arg(long)]
    fronts: Option<String>,
    /// Thrift port on 127.0.0.1 (0: any free port).
    #[arg(long, default_value_t = 0)]
    thrift_port: u16,
    /// Extra runtime commands applied at start (after the forwarding entries).
    #[arg(long)]
    commands: Option<String>,
}

/// Runs `tern kv sim-switch`: prints `tern kv sim-switch: fronts A,B thrift P`, then serves
/// until killed.
pub fn sim_switch(a: SimSwitchArgs) -> anyhow::Result<ExitCode> {
    use super::kv_sim::{server_ip, SimSwitch, CLIENT_IP};
    let parse = |list: &str| -> anyhow::Result<Vec<SocketAddr>> {
        list.split(',')
            .map(|x| x.trim().parse().with_context(|| format!("address {x:?}")))
            .collect()
    };
    let servers = parse(&a.servers)?;
    let fronts = match &a.fronts {
        Some(f) => parse(f)?,
        None => Vec::new(),
    };
    let json = match a.program.extension() {
        Some(e) if e == "json" => std::fs::read_to_string(&a.program)
            .with_context(|| format!("reading {}", a.program.display()))?,
        _ => {
            tern_p4::compile_file(&a.program, &tern_p4::Options::default())
                .map_err(|d| anyhow::anyhow!("compiling {}: {d}", a.program.display()))?
                .json
        }
    };
    let mut entries = format!("table_add forward to_port {} => 1\n", u32::from(CLIENT_IP));
    for k in 0..servers.len() {
        entries += &format!(
            "table_add forward to_port {} => {}\n",
            u32::from(server_ip(k)),
            k + 2
        );
    }
    if let Some(c) = &a.commands {
        entries += c;
        entries += "\n";
    }
    let sim = SimSwitch::start_on(&json, &entries, &servers, &fronts)?;
    let thrift = sim.serve_thrift(SocketAddr::from((Ipv4Addr::LOCALHOST, a.thrift_port)))?;
    let list: Vec<String> = sim.fronts().iter().map(|f| f.to_string()).collect();
    println!(
        "tern kv sim-switch: fronts {} thrift {}",
        list.join(","),
        thrift.port()
    );
    std::io::stdout().flush()?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let _ = ctrlc::set_handler(move || stop.store(true, Ordering::Release));
    }
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(ExitCode::SUCCESS)
}

/// `tern kv down`
#[derive(clap::Args, Debug)]
pub struct DownArgs {
    /// Remove every `tkv*` namespace, not only those of `tern kv up` processes that are gone.
    #[arg(long)]
    all: bool,
}

/// The topology file.
#[derive(Deserialize, Default, Debug)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    mode: Option<String>,
    switch: Option<String>,
    servers: Option<usize>,
    server_hosts: Option<usize>,
    clients: Option<usize>,
    partitions: Option<usize>,
    workers: Option<usize>,
    program: Option<PathBuf>,
    dir: Option<PathBuf>,
    cache: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Loopback,
    Inproc,
    Sim,
    Netns,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SwitchKind {
    Tern,
    Bridge,
}

/// The merged settings.
#[derive(Debug, Clone)]
struct Settings {
    mode: Mode,
    switch: SwitchKind,
    servers: usize,
    server_hosts: usize,
    clients: usize,
    partitions: usize,
    workers: usize,
    program: Option<PathBuf>,
    dir: Option<PathBuf>,
    cache: Option<tern_kv::switchos::CacheKind>,
    /// loopback + cache: the switch OS's report address, given to the servers.
    switchos: Option<SocketAddr>,
}

fn settings(a: &UpArgs) -> anyhow::Result<Settings> {
    let file = match &a.config {
        Some(p) => {
            let text =
                std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
            serde_json::from_str::<FileConfig>(&text)
                .with_context(|| format!("{}: not a topology file", p.display()))?
        }
        None => FileConfig::default(),
    };
    let mode = match a
        .mode
        .clone()
        .or(file.mode)
        .as_deref()
        .unwrap_or("loopback")
    {
        "loopback" => Mode::Loopback,
        "inproc" => Mode::Inproc,
        "sim" => Mode::Sim,
        "netns" => Mode::Netns,
        other => bail!("mode {other:?}: expected loopback, inproc, sim or netns"),
    };
    let switch = match a
        .switch
        .clone()
        .or(file.switch)
        .as_deref()
        .unwrap_or("tern")
    {
        "tern" => SwitchKind::Tern,
        "bridge" => SwitchKind::Bridge,
        other => bail!("switch {other:?}: expected tern or bridge"),
    };
    let cache = parse_cache(
        a.cache
            .clone()
            .or(file.cache)
            .as_deref()
            .unwrap_or("nocache"),
    )?;
    if cache.is_some() && mode == Mode::Inproc {
        bail!("--cache netcache/farreach needs a switch: --mode sim, loopback or netns");
    }
    if a.kill_server > 0 && !matches!(mode, Mode::Loopback | Mode::Netns) {
        bail!("--kill-server needs server processes: --mode loopback or netns");
    }
    if a.crashes > 0 && cache.is_none() {
        bail!("--crashes needs --cache netcache/farreach (in --mode sim, loopback or netns)");
    }
    if cache.is_some() && switch == SwitchKind::Bridge {
        bail!("--cache netcache/farreach needs --switch tern");
    }
    // loopback + cache: the servers report hot keys to a switch OS on this port.
    let switchos = match (cache, mode) {
        (Some(_), Mode::Loopback) => {
            let s = std::net::UdpSocket::bind((Ipv4Addr::LOCALHOST, 0))
                .context("picking a port for the switch OS")?;
            Some(s.local_addr()?)
        }
        // netns: the switch OS runs in the switch namespace behind its own switch port.
        (Some(_), Mode::Netns) => Some(SocketAddr::from((NETNS_SWITCHOS_IP, 5003))),
        _ => None,
    };
    let s = Settings {
        switchos,
        cache,
        mode,
        switch,
        servers: a.servers.or(file.servers).unwrap_or(2),
        server_hosts: a.server_hosts.or(file.server_hosts).unwrap_or(1),
        clients: a.clients.or(file.clients).unwrap_or(1),
        partitions: a.partitions.or(file.partitions).unwrap_or(1),
        workers: a.workers.or(file.workers).unwrap_or(2),
        program: a.program.clone().or(file.program),
        dir: a.dir.clone().or(file.dir),
    };
    if !(1..=128).contains(&s.servers) {
        bail!(
            "--servers {}: between 1 and 128 (ports 1152..1279)",
            s.servers
        );
    }
    if s.server_hosts == 0 || s.server_hosts > s.servers {
        bail!(
            "--server-hosts {}: between 1 and the server count {}",
            s.server_hosts,
            s.servers
        );
    }
    if !(1..=100).contains(&s.clients) {
        bail!("--clients {}: between 1 and 100", s.clients);
    }
    if s.partitions == 0 || s.workers == 0 {
        bail!("--partitions and --workers must be at least 1");
    }
    Ok(s)
}

/// Runs `ip ARGS`; the error carries ip's message.
fn ip(args: &[&str]) -> anyhow::Result<()> {
    let o = Command::new("ip")
        .args(args)
        .output()
        .context("running `ip` (iproute2; netns mode needs it and root)")?;
    if !o.status.success() {
        bail!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(())
}

/// `ip netns exec NS ip ARGS`.
fn ns_ip(ns: &str, args: &[&str]) -> anyhow::Result<()> {
    let mut v = vec!["netns", "exec", ns, "ip"];
    v.extend_from_slice(args);
    ip(&v)
}

/// Best effort: a sysctl inside a namespace.
fn ns_sysctl(ns: &str, setting: &str) {
    let _ = Command::new("ip")
        .args(["netns", "exec", ns, "sysctl", "-qw", setting])
        .output();
}

/// Best effort: turn off checksum and segmentation offloads on a veth, so frames that cross
/// tern's AF_PACKET ports carry complete checksums and fit the MTU.
fn no_offloads(ns: &str, dev: &str) {
    let _ = Command::new("ip")
        .args(["netns", "exec", ns, "ethtool", "-K", dev])
        .args([
            "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .map(|l| l.split_whitespace().nth(2) == Some("0"))
        })
        .unwrap_or(false)
}

/// Namespaces named `tkv<pid>-…`, with their pid.
fn our_namespaces() -> Vec<(String, u32)> {
    let Ok(o) = Command::new("ip").args(["netns", "list"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|n| {
            let rest = n.strip_prefix("tkv")?;
            let (pid, _) = rest.split_once('-')?;
            Some((n.to_string(), pid.parse().ok()?))
        })
        .collect()
}

/// Removes namespaces of `tern kv up` runs that are gone (or all with `all`); returns how many.
fn remove_stale(all: bool) -> usize {
    let mut n = 0;
    for (ns, pid) in our_namespaces() {
        let gone = !Path::new(&format!("/proc/{pid}")).exists();
        if (all || gone) && ip(&["netns", "del", &ns]).is_ok() {
            n += 1;
        }
    }
    n
}

/// Runs `tern kv down`.
pub fn down(a: DownArgs) -> anyhow::Result<ExitCode> {
    let n = remove_stale(a.all);
    super::cmd_kv::say(&format!("tern kv down: removed {n} namespace(s)"));
    Ok(ExitCode::SUCCESS)
}

/// Everything a topology made; torn down on drop (also on error and panic).
struct Topology {
    children: Vec<(String, Child)>,
    inproc: Vec<tern_kv::server::ServerHandle>,
    /// loopback + cache: the `tern kv sim-switch` process; netns: the `tern run` switch (the
    /// fault injector kills and restarts it).
    switch_proc: Arc<std::sync::Mutex<Option<Child>>>,
    /// netns + cache: the `tern kv switchos` process (killed with the switch by the injector).
    switchos_proc: Arc<std::sync::Mutex<Option<Child>>>,
    /// netns: how the switch is started (the injector restarts it the same way).
    netns_switch: Option<NetnsSwitch>,
    /// netns + cache: the switch OS's arguments after `tern` (restarts add `--recover`).
    switchos_args: Vec<std::ffi::OsString>,
    /// loopback / netns: the server processes by index (the server killer restarts them).
    server_procs: Arc<std::sync::Mutex<Vec<Option<Child>>>>,
    /// How each server was started: `(namespace, address)`.
    server_specs: Vec<(Option<String>, SocketAddr)>,
    /// The server killer (`--kill-server`) and its stop flag.
    killer: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    /// What the server killer saw, one JSON object per kill.
    kills: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    /// The fault injector's failure, if it failed (then `up` fails).
    injector_error: Arc<std::sync::Mutex<Option<String>>>,
    /// The fault injector (`--crashes`) and its stop flag.
    injector: Option<(Arc<AtomicBool>, std::thread::JoinHandle<()>)>,
    /// `(crashes, recovery times in ms, records replayed)` of the fault injector.
    recoveries: Arc<std::sync::Mutex<(u32, Vec<f64>, usize)>>,
    /// The phases of every recovery.
    recovery_phases: Arc<std::sync::Mutex<Vec<tern_kv::switchos::RecoveryReport>>>,
    /// Declared before `sim`: stopped before the switch it drives.
    switchos: Arc<std::sync::Mutex<Option<CacheOs>>>,
    sim: Option<Arc<super::kv_sim::SimSwitch>>,
    namespaces: Vec<String>,
    dir: PathBuf,
    remove_dir: bool,
    servers: Vec<SocketAddr>,
    client_ns: Option<String>,
    switch_ns: Option<String>,
    switch_ports: Vec<u32>,
}

impl Topology {
    fn new(dir: PathBuf, remove_dir: bool) -> Topology {
        Topology {
            children: Vec::new(),
            inproc: Vec::new(),
            switch_proc: Arc::default(),
            switchos_proc: Arc::default(),
            netns_switch: None,
            switchos_args: Vec::new(),
            injector_error: Arc::default(),
            server_procs: Arc::default(),
            server_specs: Vec::new(),
            killer: None,
            kills: Arc::default(),
            injector: None,
            recoveries: Arc::default(),
            recovery_phases: Arc::default(),
            switchos: Arc::default(),
            sim: None,
            namespaces: Vec::new(),
            dir,
            remove_dir,
            servers: Vec::new(),
            client_ns: None,
            switch_ns: None,
            switch_ports: Vec::new(),
        }
    }

    /// Registers server process `child` (the next index) listening on `at` in `ns`.
    fn add_server(&mut self, ns: Option<String>, at: SocketAddr, child: Child) {
        if let Ok(mut p) = self.server_procs.lock() {
            p.push(Some(child));
        }
        self.server_specs.push((ns, at));
        self.servers.push(at);
    }

    fn server_list(&self) -> String {
        self.servers
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// A command that runs in the client namespace (or here).
    fn client_command(&self, program: &Path) -> Command {
        match &self.client_ns {
            Some(ns) => {
                let mut c = Command::new("ip");
                c.args(["netns", "exec", ns]).arg(program);
                c
            }
            None => Command::new(program),
        }
    }

    /// Asks the switch for its per-port key-value packet counts (tern switch only).
    fn switch_counts(&self, exe: &Path) -> Option<Vec<(u32, u64)>> {
        let ns = self.switch_ns.as_ref()?;
        if self.switch_ports.is_empty() {
            return None;
        }
        let script: String = self
            .switch_ports
            .iter()
            .map(|p| format!("counter_read {KV_COUNTER} {p}\n"))
            .collect();
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns])
            .arg(exe)
            .args(["cli", "--thrift-port", "9090"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        child.stdin.take()?.write_all(script.as_bytes()).ok()?;
        let out = child.wait_with_output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        let counts: Vec<(u32, u64)> = text
            .lines()
            .filter_map(|l| {
                let (head, tail) = l.split_once("]= (")?;
                let port = head.rsplit_once('[')?.1.parse().ok()?;
                let packets = tail.split(", ").nth(1)?.split_whitespace().next()?;
                Some((port, packets.parse().ok()?))
            })
            .collect();
        (!counts.is_empty()).then_some(counts)
    }

    /// Graceful stop: servers flush on SIGINT; then everything else; then the namespaces.
    fn teardown(&mut self) {
        for (stop, h) in [self.injector.take(), self.killer.take()]
            .into_iter()
            .flatten()
        {
            stop.store(true, Ordering::Release);
            let _ = h.join();
        }
        if let Ok(mut p) = self.server_procs.lock() {
            for (i, c) in p.drain(..).enumerate() {
                if let Some(c) = c {
                    self.children.push((format!("server {i}"), c));
                }
            }
        }
        if let Ok(mut os) = self.switchos.lock() {
            os.take();
        }
        if let Some(mut c) = self.switchos_proc.lock().ok().and_then(|mut p| p.take()) {
            stop_child(&mut c, "the switch OS");
        }
        if let Some(mut c) = self.switch_proc.lock().ok().and_then(|mut p| p.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(sim) = self.sim.take() {
            sim.stop();
        }
        for s in self.inproc.drain(..) {
            if let Err(e) = s.shutdown() {
                eprintln!("tern kv up: stopping an in-process server: {e}");
            }
        }
        for (_, c) in &mut self.children {
            if matches!(c.try_wait(), Ok(None)) {
                let _ = Command::new("kill")
                    .args(["-INT", &c.id().to_string()])
                    .status();
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for (name, c) in &mut self.children {
            while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if matches!(c.try_wait(), Ok(None)) {
                eprintln!("tern kv up: {name} did not stop on SIGINT; killing it");
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        self.children.clear();
        for ns in self.namespaces.drain(..) {
            if let Err(e) = ip(&["netns", "del", &ns]) {
                eprintln!("tern kv up: {e}");
            }
        }
        if self.remove_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
            self.remove_dir = false;
        }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        self.teardown();
    }
}

/// Spawns a `tern kv server` (optionally inside `ns`) and waits for its start-up line.
fn spawn_server(
    exe: &Path,
    ns: Option<&str>,
    dir: &Path,
    bind: Ipv4Addr,
    port: u16,
    index: usize,
    s: &Settings,
) -> anyhow::Result<Child> {
    let mut c = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("server{index}.log")))
        .with_context(|| format!("creating the log of server {index}"))?;
    c.args(["kv", "server", "--dir"])
        .arg(dir.join(format!("server{index}")))
        .args(["--bind", &bind.to_string(), "--port", &port.to_string()])
        .args(["--index", &index.to_string()])
        .args(["--partitions", &s.partitions.to_string()])
        .args(["--workers", &s.workers.to_string()])
        .args(
            s.switchos
                .iter()
                .flat_map(|a| ["--switchos".to_string(), a.to_string()]),
        )
        .stdout(Stdio::piped())
        .stderr(log);
    let mut child = c
        .spawn()
        .with_context(|| format!("starting server {index}"))?;
    let stdout = child.stdout.take().context("server stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    match lines.next() {
        Some(Ok(l)) if l.starts_with("tern kv server:") => {}
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            let err =
                std::fs::read_to_string(dir.join(format!("server{index}.log"))).unwrap_or_default();
            bail!(
                "server {index} ({bind}:{port}) did not start: {}",
                err.trim()
            );
        }
    }
    // Keep draining its stdout so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    Ok(child)
}

fn mac(kind: u8, i: usize) -> String {
    format!("02:77:00:{kind:02x}:{:02x}:{:02x}", i >> 8, i & 0xff)
}

fn netns_up(t: &mut Topology, exe: &Path, s: &Settings) -> anyhow::Result<()> {
    if !is_root() {
        bail!("netns mode needs root (network namespaces, veths, AF_PACKET ports)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        bail!("netns mode needs `ip` (iproute2) on PATH");
    }
    let removed = remove_stale(false);
    if removed > 0 {
        eprintln!("tern kv up: removed {removed} namespace(s) left by earlier runs");
    }
    let pid = std::process::id();
    let sw = format!("tkv{pid}-sw");
    ip(&["netns", "add", &sw])?;
    t.namespaces.push(sw.clone());
    ns_sysctl(&sw, "net.ipv6.conf.all.disable_ipv6=1");
    ns_sysctl(&sw, "net.ipv6.conf.default.disable_ipv6=1");
    ns_ip(&sw, &["link", "set", "lo", "up"])?;
    // Hosts: clients 10.77.1.x, server hosts 10.77.2.x; switch port numbers in that order.
    let mut hosts: Vec<(String, Ipv4Addr, String)> = Vec::new();
    for i in 0..s.clients {
        hosts.push((
            format!("tkv{pid}-c{i}"),
            Ipv4Addr::new(10, 77, 1, i as u8 + 1),
            mac(1, i),
        ));
    }
    for h in 0..s.server_hosts {
        hosts.push((
            format!("tkv{pid}-s{h}"),
            Ipv4Addr::new(10, 77, 2, h as u8 + 1),
            mac(2, h),
        ));
    }
    let mut entries = String::new();
    for (k, (ns, addr, mac)) in hosts.iter().enumerate() {
        let port = k as u32 + 1;
        ip(&["netns", "add", ns])?;
        t.namespaces.push(ns.clone());
        ns_sysctl(ns, "net.ipv6.conf.all.disable_ipv6=1");
        ns_sysctl(ns, "net.ipv6.conf.default.disable_ipv6=1");
        let (a, b) = (format!("tkv{pid}h{k}a"), format!("tkv{pid}h{k}b"));
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b])?;
        if let Err(e) = ip(&["link", "set", &a, "netns", ns])
            .and_then(|()| ip(&["link", "set", &b, "netns", &sw]))
        {
            let _ = ip(&["link", "del", &a]);
            let _ = ip(&["link", "del", &b]);
            return Err(e);
        }
        let swp = format!("p{port}");
        ns_ip(ns, &["link", "set", &a, "name", "eth0"])?;
        ns_ip(ns, &["link", "set", "eth0", "address", mac])?;
        ns_ip(ns, &["addr", "add", &format!("{addr}/16"), "dev", "eth0"])?;
        ns_ip(ns, &["link", "set", "lo", "up"])?;
        ns_ip(ns, &["link", "set", "eth0", "up"])?;
        no_offloads(ns, "eth0");
        ns_ip(&sw, &["link", "set", &b, "name", &swp])?;
        ns_sysctl(&sw, &format!("net.ipv6.conf.{swp}.disable_ipv6=1"));
        ns_ip(&sw, &["link", "set", &swp, "up"])?;
        no_offloads(&sw, &swp);
        entries += &format!("table_add forward to_port {} => {port}\n", u32::from(*addr));
        t.switch_ports.push(port);
    }
    t.client_ns = Some(hosts[0].0.clone());
    if s.cache.is_some() {
        // The switch OS's own port: a veth pair inside the switch namespace, one end a tern
        // port, the other (cpu0) the switch OS's address; servers reach it through the switch.
        let port = hosts.len() as u32 + 1;
        let (a, b) = (format!("tkv{pid}osa"), format!("tkv{pid}osb"));
        ip(&["link", "add", &a, "type", "veth", "peer", "name", &b])?;
        if let Err(e) = ip(&["link", "set", &a, "netns", &sw])
            .and_then(|()| ip(&["link", "set", &b, "netns", &sw]))
        {
            let _ = ip(&["link", "del", &a]);
            return Err(e);
        }
        let swp = format!("p{port}");
        ns_ip(&sw, &["link", "set", &a, "name", "cpu0"])?;
        ns_ip(&sw, &["link", "set", "cpu0", "address", &mac(3, 0)])?;
        ns_ip(
            &sw,
            &[
                "addr",
                "add",
                &format!("{NETNS_SWITCHOS_IP}/16"),
                "dev",
                "cpu0",
            ],
        )?;
        ns_ip(&sw, &["link", "set", "cpu0", "up"])?;
        no_offloads(&sw, "cpu0");
        ns_ip(&sw, &["link", "set", &b, "name", &swp])?;
        ns_sysctl(&sw, &format!("net.ipv6.conf.{swp}.disable_ipv6=1"));
        ns_ip(&sw, &["link", "set", &swp, "up"])?;
        no_offloads(&sw, &swp);
        entries += &format!(
            "table_add forward to_port {} => {port}\n",
            u32::from(NETNS_SWITCHOS_IP)
        );
        t.switch_ports.push(port);
    }
    match s.switch {
        SwitchKind::Bridge => {
            ns_ip(&sw, &["link", "add", "br0", "type", "bridge"])?;
            for p in &t.switch_ports {
                ns_ip(&sw, &["link", "set", &format!("p{p}"), "master", "br0"])?;
            }
            ns_ip(&sw, &["link", "set", "br0", "up"])?;
            t.switch_ports.clear();
        }
        SwitchKind::Tern => {
            let json = program_json(s)?;
            let jpath = t.dir.join("switch.json");
            std::fs::write(&jpath, json).context("writing the switch program")?;
            let cpath = t.dir.join("switch-commands.txt");
            std::fs::write(&cpath, &entries).context("writing the switch commands")?;
            let spec = NetnsSwitch {
                exe: exe.to_path_buf(),
                ns: sw.clone(),
                json: jpath,
                commands: cpath,
                ports: t.switch_ports.clone(),
                log: t.dir.join("switch.log"),
            };
            let _ = std::fs::remove_file(&spec.log);
            *t.switch_proc
                .lock()
                .map_err(|_| anyhow::anyhow!("switch slot"))? = Some(spec.spawn()?);
            t.netns_switch = Some(spec);
            t.switch_ns = Some(sw.clone());
        }
    }
    // Servers, round robin over the server hosts.
    for i in 0..s.servers {
        let h = i % s.server_hosts;
        let (ns, addr, _) = &hosts[s.clients + h];
        let child = spawn_server(exe, Some(ns), &t.dir, *addr, BASE_PORT + i as u16, i, s)?;
        let at = SocketAddr::from((*addr, BASE_PORT + i as u16));
        t.add_server(Some(ns.clone()), at, child);
    }
    Ok(())
}

/// The switch program as BMv2 JSON: `--program` (P4 source or JSON) or the built-in one.
fn program_json(s: &Settings) -> anyhow::Result<String> {
    Ok(match &s.program {
        Some(p) if p.extension().is_some_and(|e| e == "json") => {
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?
        }
        Some(p) => {
            tern_p4::compile_file(p, &tern_p4::Options::default())
                .map_err(|d| anyhow::anyhow!("compiling {}: {d}", p.display()))?
                .json
        }
        None => {
            use tern_kv::switchos::CacheKind;
            let (src, name) = match s.cache {
                None => (FORWARD_P4, "p4/kv/forward.p4"),
                Some(CacheKind::NetCache) => (NETCACHE_P4, "p4/kv/netcache.p4"),
                Some(CacheKind::FarReach) => (FARREACH_P4, "p4/kv/farreach.p4"),
            };
            tern_p4::compile_str(src, name, &Default::default())
                .map_err(|d| anyhow::anyhow!("compiling {name}: {d}"))?
                .json
        }
    })
}

/// Waits until every server answers a snapshot request through the topology.
fn wait_ready(t: &mut Topology, exe: &Path, timeout: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    let list = t.server_list();
    loop {
        if let Some(c) = t
            .switch_proc
            .lock()
            .ok()
            .as_deref_mut()
            .and_then(Option::as_mut)
        {
            if let Ok(Some(st)) = c.try_wait() {
                bail!(
                    "the switch exited during start-up ({st}); logs in {}",
                    t.dir.display()
                );
            }
        }
        if let Ok(mut p) = t.server_procs.lock() {
            for (i, c) in p.iter_mut().enumerate() {
                if let Some(Ok(Some(st))) = c.as_mut().map(Child::try_wait) {
                    bail!(
                        "server {i} exited during start-up ({st}); logs in {}",
                        t.dir.display()
                    );
                }
            }
        }
        for (name, c) in &mut t.children {
            if let Ok(Some(st)) = c.try_wait() {
                bail!(
                    "{name} exited during start-up ({st}); logs in {}",
                    t.dir.display()
                );
            }
        }
        let o = t
            .client_command(exe)
            .args(["kv", "snapshot", "--servers", &list])
            .output()
            .context("probing the servers")?;
        if o.status.success() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!(
                "servers not reachable after {:?}: {}; logs in {}",
                timeout,
                String::from_utf8_lossy(&o.stderr).trim(),
                t.dir.display()
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `tern kv up`.
pub fn up(a: UpArgs) -> anyhow::Result<ExitCode> {
    if a.cache.as_deref() == Some("madinc") {
        return madinc_up(a);
    }
    let s = settings(&a)?;
    let exe = std::env::current_exe().context("locating the tern binary")?;
    let (dir, remove_dir) = match &s.dir {
        Some(d) => (d.clone(), false),
        None => (
            std::env::temp_dir().join(format!("tern-kv-up-{}", std::process::id())),
            true,
        ),
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::Release))
            .context("installing the ctrl-c handler")?;
    }
    let mut t = Topology::new(dir.clone(), remove_dir);
    match s.mode {
        Mode::Loopback => {
            if usize::from(a.base_port) + s.servers > 65536 || a.base_port == 0 {
                bail!(
                    "--base-port {}: the server ports must fit below 65536",
                    a.base_port
                );
            }
            for i in 0..s.servers {
                let port = a.base_port + i as u16;
                let child = spawn_server(&exe, None, &dir, Ipv4Addr::LOCALHOST, port, i, &s)?;
                t.add_server(None, SocketAddr::from((Ipv4Addr::LOCALHOST, port)), child);
            }
            if let (Some(kind), Some(so)) = (s.cache, s.switchos) {
                loopback_cache(&mut t, &a, &s, &exe, &dir, kind, so)?;
            }
        }
        Mode::Inproc | Mode::Sim => {
            let handles = tern_kv::bench::start_local_servers(
                &dir,
                s.servers,
                s.partitions,
                s.workers,
                &tern_kv::storage::StoreOptions::default(),
            )?;
            t.servers = tern_kv::bench::addrs(&handles);
            t.inproc = handles;
            if s.mode == Mode::Sim {
                use super::kv_sim::{server_ip, SimSwitch, CLIENT_IP};
                let mut entries =
                    format!("table_add forward to_port {} => 1\n", u32::from(CLIENT_IP));
                for k in 0..s.servers {
                    entries += &format!(
                        "table_add forward to_port {} => {}\n",
                        u32::from(server_ip(k)),
                        k + 2
                    );
                }
                let sim = SimSwitch::start(&program_json(&s)?, &entries, &t.servers)?;
                if let Some(kind) = s.cache {
                    use tern_kv::switchos::SwitchOs;
                    let c = switchos_config(
                        &a.opts,
                        kind,
                        t.servers.clone(),
                        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
                    )?;
                    let access: Box<dyn tern_kv::switchos::SwitchAccess> = Box::new(sim.access());
                    let os =
                        SwitchOs::start(access, c.clone()).context("starting the switch OS")?;
                    for h in &t.inproc {
                        h.cache_ctl().set_switchos(Some(os.addr()));
                    }
                    if let Ok(mut slot) = t.switchos.lock() {
                        *slot = Some(os);
                    }
                    let sim = Arc::new(sim);
                    if a.crashes > 0 {
                        let stop = Arc::new(AtomicBool::new(false));
                        let inj = Injector {
                            target: Target::Sim(sim.clone()),
                            os: t.switchos.clone(),
                            ctls: t.inproc.iter().map(|h| h.cache_ctl().clone()).collect(),
                            cfg: c,
                            preserve: dir.join("preserved.txt"),
                            crashes: a.crashes,
                            period: Duration::from_millis(a.crash_period_ms.max(1)),
                            stop: stop.clone(),
                            log: t.recoveries.clone(),
                            phases: t.recovery_phases.clone(),
                            failed: t.injector_error.clone(),
                        };
                        t.injector = Some((stop, std::thread::spawn(move || inj.run())));
                    }
                    t.servers = sim.fronts();
                    t.sim = Some(sim);
                } else {
                    t.servers = sim.fronts();
                    t.sim = Some(Arc::new(sim));
                }
            }
        }
        Mode::Netns => netns_up(&mut t, &exe, &s)?,
    }
    wait_ready(&mut t, &exe, Duration::from_secs(a.ready_timeout))?;
    if let (Mode::Netns, Some(kind)) = (s.mode, s.cache) {
        netns_switchos(&mut t, &a, &s, &exe)?;
        if a.crashes > 0 {
            netns_injector(&mut t, &a, &s, kind)?;
        }
    }
    if a.kill_server > 0 {
        start_killer(&mut t, &a, &s, &exe);
    }
    let list = t.server_list();
    let where_ = match &t.client_ns {
        Some(ns) => format!(" (client namespace {ns})"),
        None => String::new(),
    };
    super::cmd_kv::say(&format!(
        "tern kv up: {} servers ready{where_}: --servers {list}",
        s.servers
    ));
    let code = if a.command.is_empty() {
        let hint = match &t.client_ns {
            Some(ns) => format!("ip netns exec {ns} "),
            None => String::new(),
        };
        super::cmd_kv::say(&format!(
            "tern kv up: e.g. `{hint}tern kv bench --servers {list} --workload a`; ctrl-c to stop"
        ));
        while !stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(100));
        }
        ExitCode::SUCCESS
    } else {
        let args: Vec<String> = a
            .command
            .iter()
            .map(|x| x.replace("{servers}", &list))
            .collect();
        let program = if args[0] == "tern" {
            exe.clone()
        } else {
            PathBuf::from(&args[0])
        };
        let mut cmd = t.client_command(&program);
        if s.cache.is_some() {
            cmd.env("TERN_KV_PRESERVE", dir.join("preserved.txt"));
        }
        let mut child = cmd
            .args(&args[1..])
            .env("TERN_KV_SERVERS", &list)
            .spawn()
            .with_context(|| format!("running {}", args[0]))?;
        let status = loop {
            if let Some(st) = child.try_wait()? {
                break Some(st);
            }
            if stop.load(Ordering::Acquire) {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        match status {
            Some(st) if st.success() => ExitCode::SUCCESS,
            Some(st) => {
                eprintln!("tern kv up: `{}` failed ({st})", args.join(" "));
                ExitCode::from(st.code().map_or(1, |c| c.clamp(1, 255) as u8))
            }
            None => ExitCode::from(130),
        }
    };
    for (stop, h) in [t.injector.take(), t.killer.take()].into_iter().flatten() {
        stop.store(true, Ordering::Release);
        let _ = h.join();
    }
    let counts = match &t.sim {
        Some(sim) => Some(sim.out_counts()),
        None => t.switch_counts(&exe),
    };
    if let Some(counts) = counts {
        let text: Vec<String> = counts
            .iter()
            .map(|(p, n)| format!("port {p}: {n}"))
            .collect();
        super::cmd_kv::say(&format!(
            "tern kv up: key-value packets out of the switch: {}",
            text.join(", ")
        ));
    }
    let stats = match (s.mode, s.cache) {
        (Mode::Netns, Some(_)) => netns_switchos_stats(&mut t).map(|mut j| {
            // The switch OS process's counters cover its life since the last restart; the
            // crashes and recoveries are the injector's.
            let (crashes, ms, replayed) =
                t.recoveries.lock().map(|r| r.clone()).unwrap_or_default();
            j["crashes"] = crashes.into();
            j["max_recovery_ms"] = ms.iter().copied().fold(0.0, f64::max).into();
            j["recovery_ms"] = ms.into();
            j["records_replayed"] = replayed.into();
            j["recovery_phases"] = t
                .recovery_phases
                .lock()
                .map(|p| p.iter().map(phases_json).collect())
                .unwrap_or_default();
            j
        }),
        (_, Some(k)) => cache_stats(&t, k),
        _ => None,
    };
    let kills = t.kills.lock().map(|k| k.clone()).unwrap_or_default();
    let stats = match stats {
        Some(mut j) => {
            j["server_kills"] = kills.into();
            Some(j)
        }
        None if a.kill_server > 0 => Some(serde_json::json!({ "server_kills": kills })),
        None => None,
    };
    if let Some(j) = stats {
        if j.get("hit_ratio").is_some() {
            super::cmd_kv::say(&format!("tern kv up: cache {}", stats_line(&j)));
        }
        if let Some(f) = &a.stats_file {
            std::fs::write(f, serde_json::to_string_pretty(&j)? + "\n")
                .with_context(|| format!("writing {}", f.display()))?;
        }
    }
    t.teardown();
    super::cmd_kv::say("tern kv up: stopped and cleaned up");
    if let Some(e) = t.injector_error.lock().ok().and_then(|mut e| e.take()) {
        eprintln!("tern kv up: the fault injector failed: {e}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(code)
}

/// `--kill-server`: SIGKILLs random server processes during the run and restarts them.
struct ServerKiller {
    exe: PathBuf,
    dir: PathBuf,
    settings: Settings,
    procs: Arc<std::sync::Mutex<Vec<Option<Child>>>>,
    specs: Vec<(Option<String>, SocketAddr)>,
    /// The address each server answers on through the topology (its switch front).
    fronts: Vec<SocketAddr>,
    client_ns: Option<String>,
    switch_ns: Option<String>,
    /// loopback + cache: the in-process switch OS (reads the hit counter).
    os: Arc<std::sync::Mutex<Option<CacheOs>>>,
    kills: u32,
    period: Duration,
    down: Duration,
    stop: Arc<AtomicBool>,
    log: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
    failed: Arc<std::sync::Mutex<Option<String>>>,
}

fn start_killer(t: &mut Topology, a: &UpArgs, s: &Settings, exe: &Path) {
    let stop = Arc::new(AtomicBool::new(false));
    let k = ServerKiller {
        exe: exe.to_path_buf(),
        dir: t.dir.clone(),
        settings: s.clone(),
        procs: t.server_procs.clone(),
        specs: t.server_specs.clone(),
        fronts: t.servers.clone(),
        client_ns: t.client_ns.clone(),
        switch_ns: t.switch_ns.clone().filter(|_| s.cache.is_some()),
        os: t.switchos.clone(),
        kills: a.kill_server,
        period: Duration::from_millis(a.crash_period_ms.max(1)),
        down: Duration::from_millis(a.server_down_ms),
        stop: stop.clone(),
        log: t.kills.clone(),
        failed: t.injector_error.clone(),
    };
    t.killer = Some((stop, std::thread::spawn(move || k.run())));
}

impl ServerKiller {
    fn run(self) {
        let mut rng = tern_kv::rng::Rng::new(0x5e7a);
        for _ in 0..self.kills {
            let until = Instant::now() + self.period.mul_f64(0.5 + rng.next_f64());
            while Instant::now() < until {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let i = (rng.next_f64() * self.specs.len() as f64) as usize % self.specs.len();
            match self.kill_and_restart(i) {
                Ok(j) => {
                    super::cmd_kv::say(&format!(
                        "tern kv up: server {i} killed (SIGKILL), dead {} ms, the switch \
                         answered {} cached GETs meanwhile; restarted, answering again after \
                         {:.1} ms",
                        j["down_ms"],
                        j["hits_while_down"],
                        j["answering_after_ms"].as_f64().unwrap_or(0.0)
                    ));
                    if let Ok(mut l) = self.log.lock() {
                        l.push(j);
                    }
                }
                Err(e) => {
                    eprintln!("tern kv up: server kill/restart failed: {e:#}");
                    if let Ok(mut f) = self.failed.lock() {
                        *f = Some(format!("{e:#}"));
                    }
                    return;
                }
            }
        }
    }

    /// The switch's cached-GET hit counter (`kv_ops[0]`), when there is a cache.
    fn hits(&self) -> Option<u64> {
        if let Some(ns) = &self.switch_ns {
            let mut child = Command::new("ip")
                .args(["netns", "exec", ns])
                .arg(&self.exe)
                .args(["cli", "--thrift-port", "9090"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .ok()?;
            child
                .stdin
                .take()?
                .write_all(b"counter_read KvIngress.kv_ops 0\n")
                .ok()?;
            let out = child.wait_with_output().ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            return text.lines().find_map(|l| {
                let (_, tail) = l.split_once("]= (")?;
                tail.split(", ")
                    .nth(1)?
                    .split_whitespace()
                    .next()?
                    .parse()
                    .ok()
            });
        }
        let guard = self.os.lock().ok()?;
        let os = guard.as_ref()?;
        let mut n = None;
        let _ = os.with_switch(&mut |rt| {
            n = Some(rt.counter_read("KvIngress.kv_ops", OPS_GET_HIT)?.packets);
            Ok(())
        });
        n
    }

    fn kill_and_restart(&self, i: usize) -> anyhow::Result<serde_json::Value> {
        let before = self.hits();
        let child = self
            .procs
            .lock()
            .map_err(|_| anyhow::anyhow!("server slots"))?
            .get_mut(i)
            .and_then(Option::take);
        let Some(mut child) = child else {
            bail!("server {i} is not running");
        };
        let _ = child.kill();
        let _ = child.wait();
        let t0 = Instant::now();
        // Stopped early by the end of the run: restart at once.
        while t0.elapsed() < self.down && !self.stop.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let after = self.hits();
        let down_ms = t0.elapsed().as_millis() as u64;
        let (ns, at) = &self.specs[i];
        let ip = match at.ip() {
            std::net::IpAddr::V4(v) => v,
            std::net::IpAddr::V6(_) => bail!("server {i}: IPv6 address {at}"),
        };
        let child = spawn_server(
            &self.exe,
            ns.as_deref(),
            &self.dir,
            ip,
            at.port(),
            i,
            &self.settings,
        )?;
        if let Ok(mut p) = self.procs.lock() {
            p[i] = Some(child);
        }
        // Converged: the restarted server answers through the topology (switch included).
        let t1 = Instant::now();
        let front = self.fronts[i].to_string();
        loop {
            let mut c = match &self.client_ns {
                Some(ns) => {
                    let mut c = Command::new("ip");
                    c.args(["netns", "exec", ns]).arg(&self.exe);
                    c
                }
                None => Command::new(&self.exe),
            };
            let o = c
                .args(["kv", "snapshot", "--servers", &front])
                .output()
                .context("probing the restarted server")?;
            if o.status.success() {
                break;
            }
            if t1.elapsed() > Duration::from_secs(30) {
                bail!("server {i} does not answer through the topology 30 s after its restart");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(serde_json::json!({
            "server": i,
            "down_ms": down_ms,
            "hits_while_down": match (before, after) {
                (Some(b), Some(a)) => serde_json::Value::from(a.saturating_sub(b)),
                _ => serde_json::Value::Null,
            },
            "answering_after_ms": t1.elapsed().as_secs_f64() * 1000.0,
        }))
    }
}

/// A cache's switch OS, whatever switch it drives.
type CacheOs = tern_kv::switchos::SwitchOs<Box<dyn tern_kv::switchos::SwitchAccess>>;

/// The fault injector of `--crashes`: crashes the simulated switch at random moments and runs
/// FarReach's recovery (§3.9 of the reference) before bringing it back.
struct Injector {
    target: Target,
    os: Arc<std::sync::Mutex<Option<CacheOs>>>,
    ctls: Vec<Arc<tern_kv::server::CacheCtl>>,
    cfg: tern_kv::switchos::SwitchOsConfig,
    preserve: PathBuf,
    crashes: u32,
    period: Duration,
    stop: Arc<AtomicBool>,
    log: Arc<std::sync::Mutex<(u32, Vec<f64>, usize)>>,
    /// Every recovery's phases.
    phases: Arc<std::sync::Mutex<Vec<tern_kv::switchos::RecoveryReport>>>,
    /// Set when a recovery failed (the run then fails).
    failed: Arc<std::sync::Mutex<Option<String>>>,
}

impl Injector {
    fn run(self) {
        let mut rng = tern_kv::rng::Rng::new(0xc4a5);
        for _ in 0..self.crashes {
            let wait = self.period.mul_f64(0.5 + rng.next_f64());
            let until = Instant::now() + wait;
            while Instant::now() < until {
                if self.stop.load(Ordering::Acquire) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            let r = match &self.target {
                Target::Sim(sim) => {
                    let r = self.crash_and_recover_sim(sim);
                    if r.is_err() {
                        sim.set_down(false);
                    }
                    r
                }
                Target::Process(p) => self.kill_and_recover(p),
                Target::Netns(n) => {
                    let r = self.kill_and_recover_netns(n);
                    // Whatever happened, the clients get their ports back.
                    for p in &n.client_ports {
                        let _ = ns_ip(&n.spec.ns, &["link", "set", &format!("p{p}"), "up"]);
                    }
                    r
                }
            };
            match r {
                Ok((ms, n)) => {
                    super::cmd_kv::say(&format!(
                        "tern kv up: switch crashed and recovered in {ms:.1} ms ({n} records \
                         replayed)"
                    ));
                    if let Ok(mut l) = self.log.lock() {
                        l.0 += 1;
                        l.1.push(ms);
                        l.2 += n;
                    }
                }
                Err(e) => {
                    eprintln!("tern kv up: recovery failed: {e:#}");
                    if let Ok(mut f) = self.failed.lock() {
                        *f = Some(format!("{e:#}"));
                    }
                    return;
                }
            }
        }
    }

    /// Crash: the switch goes down and its OS dies (the last snapshot is the controller's);
    /// the switch reboots empty. Recovery: replay snapshot + preserved records into the
    /// servers, new switch OS (seq floor above every stored seq), switch up.
    fn crash_and_recover_sim(
        &self,
        sim: &super::kv_sim::SimSwitch,
    ) -> anyhow::Result<(f64, usize)> {
        sim.set_down(true);
        let t0 = Instant::now();
        let old = self.os.lock().ok().and_then(|mut o| o.take());
        let snapshot = old.map(|os| os.last_snapshot()).unwrap_or_default();
        let mut rep = tern_kv::switchos::RecoveryReport {
            snapshot_load: t0.elapsed(),
            ..Default::default()
        };
        sim.crash_and_reboot()?;
        let keys: Vec<_> = snapshot.records.iter().map(|r| (r.key, r.server)).collect();
        self.replay(snapshot, &mut rep)?;
        let t = Instant::now();
        let access: Box<dyn tern_kv::switchos::SwitchAccess> = Box::new(sim.access());
        let os = tern_kv::switchos::SwitchOs::start(access, self.cfg.clone())?;
        rep.reinstalled = os.reinstall(&keys, REINSTALL_WAIT);
        rep.reinstall = t.elapsed();
        for c in &self.ctls {
            c.set_switchos(Some(os.addr()));
        }
        if let Ok(mut o) = self.os.lock() {
            *o = Some(os);
        }
        sim.set_down(false);
        rep.total = t0.elapsed();
        self.log_phases(&rep);
        Ok((t0.elapsed().as_secs_f64() * 1000.0, rep.replayed))
    }

    /// SIGKILL of the `tern kv sim-switch` process (switch and, with it, its switch OS);
    /// recovery replays into the servers, restarts the switch on the same front addresses with
    /// a seq floor above every stored seq, and a new switch OS over Thrift.
    fn kill_and_recover(&self, p: &SwitchProcess) -> anyhow::Result<(f64, usize)> {
        let t0 = Instant::now();
        if let Some(mut c) = p.child.lock().ok().and_then(|mut c| c.take()) {
            let _ = c.kill();
            let _ = c.wait();
        }
        let mut old = self.os.lock().ok().and_then(|mut o| o.take());
        if self.cfg.snapshot_file.is_some() {
            // Stopped before reading: a snapshot it was finishing is on disk or never was.
            old.take();
        }
        let t = Instant::now();
        let snapshot = match &self.cfg.snapshot_file {
            Some(f) => tern_kv::snapfile::read(f)?.unwrap_or_default(),
            None => old.map(|os| os.last_snapshot()).unwrap_or_default(),
        };
        let mut rep = tern_kv::switchos::RecoveryReport {
            snapshot_load: t.elapsed(),
            ..Default::default()
        };
        let keys: Vec<_> = snapshot.records.iter().map(|r| (r.key, r.server)).collect();
        self.replay(snapshot, &mut rep)?;
        let t = Instant::now();
        let floor =
            tern_kv::switchos::max_seq(&self.cfg.servers, self.cfg.ack_timeout, self.cfg.tries)?;
        let commands = format!(
            "table_set_default kv_params set_params {} {} {floor} 0",
            self.cfg.hot_threshold,
            u8::from(self.cfg.sample_all)
        );
        let (child, _fronts, thrift) = spawn_sim_switch(
            &p.exe,
            &p.dir,
            &p.json,
            &self.cfg.servers,
            &p.fronts,
            &commands,
        )?;
        if let Ok(mut c) = p.child.lock() {
            *c = Some(child);
        }
        let rt = connect_thrift(thrift)?;
        let access: Box<dyn tern_kv::switchos::SwitchAccess> = Box::new(std::sync::Mutex::new(rt));
        let os = tern_kv::switchos::SwitchOs::start(access, self.cfg.clone())?;
        rep.reinstalled = os.reinstall(&keys, REINSTALL_WAIT);
        rep.reinstall = t.elapsed();
        if let Ok(mut o) = self.os.lock() {
            *o = Some(os);
        }
        rep.total = t0.elapsed();
        self.log_phases(&rep);
        Ok((t0.elapsed().as_secs_f64() * 1000.0, rep.replayed))
    }

    /// netns: SIGKILL of the `tern run` switch and of its switch OS (the switch's CPU dies with
    /// it; only the snapshot file survives). The clients' switch ports are held down while the
    /// switch restarts with its forwarding entries and a new switch OS runs the recovery
    /// (`tern kv switchos --recover`: snapshot file + preserved records replayed into the
    /// servers, seq floor above every stored seq, snapshot keys re-admitted); the ports come up
    /// only after its `listening` line, so the switch forwards no client request before the
    /// floor is set.
    fn kill_and_recover_netns(&self, n: &NetnsTarget) -> anyhow::Result<(f64, usize)> {
        let t0 = Instant::now();
        // The switch OS first: the two die together, it never sees its switch gone.
        for slot in [&n.switchos, &n.switch] {
            if let Some(mut c) = slot.lock().ok().and_then(|mut c| c.take()) {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for p in &n.client_ports {
            ns_ip(&n.spec.ns, &["link", "set", &format!("p{p}"), "down"])?;
        }
        // Replies already on their way to the clients (the preserved records' last dump).
        std::thread::sleep(Duration::from_millis(50));
        let child = n.spec.spawn()?;
        if let Ok(mut c) = n.switch.lock() {
            *c = Some(child);
        }
        let extra: Vec<std::ffi::OsString> = vec![
            "--recover".into(),
            "--preserved".into(),
            self.preserve.clone().into_os_string(),
        ];
        let (child, phases) =
            spawn_netns_switchos(&n.spec.exe, &n.spec.ns, &n.switchos_args, &extra, &n.dir)?;
        if let Ok(mut c) = n.switchos.lock() {
            *c = Some(child);
        }
        let mut rep = phases.as_ref().map(phases_from_json).unwrap_or_default();
        rep.total = t0.elapsed();
        self.log_phases(&rep);
        Ok((t0.elapsed().as_secs_f64() * 1000.0, rep.replayed))
    }

    /// Server recovery: the last snapshot plus the clients' preserved records, newest per key,
    /// replayed with the seq check. Waits first for replies already on their way, so the
    /// preserved records are complete (nothing answers while the switch is down) and the
    /// servers hold every write the switch forwarded before the crash.
    fn replay(
        &self,
        snapshot: tern_kv::switchos::Snapshot,
        rep: &mut tern_kv::switchos::RecoveryReport,
    ) -> anyhow::Result<()> {
        std::thread::sleep(Duration::from_millis(50));
        replay_records(&self.cfg, snapshot, &self.preserve, rep)
    }

    fn log_phases(&self, rep: &tern_kv::switchos::RecoveryReport) {
        super::cmd_kv::say(&format!("tern kv up: recovery {}", phases_line(rep)));
        if let Ok(mut p) = self.phases.lock() {
            p.push(rep.clone());
        }
    }
}

/// How long a recovery waits for the snapshot's keys to be cached again.
const REINSTALL_WAIT: Duration = Duration::from_secs(10);

/// The server side of a recovery: the clients' preserved records read from `preserve` and the
/// snapshot's merged (newest per key) and replayed into the servers with the seq check; the
/// phases' sizes and durations go into `rep`.
pub(crate) fn replay_records(
    cfg: &tern_kv::switchos::SwitchOsConfig,
    snapshot: tern_kv::switchos::Snapshot,
    preserve: &std::path::Path,
    rep: &mut tern_kv::switchos::RecoveryReport,
) -> anyhow::Result<()> {
    let t = Instant::now();
    let preserved = match tern_kv::history::read_preserved(preserve) {
        Ok(p) => p,
        Err(_) if !preserve.exists() => Vec::new(),
        Err(e) => anyhow::bail!(e),
    };
    rep.preserved_load = t.elapsed();
    rep.snapshot_records = snapshot.records.len();
    rep.preserved_records = preserved.len();
    let records = snapshot
        .records
        .into_iter()
        .map(|r| (r.key, r.value, r.seq))
        .chain(preserved);
    let r = tern_kv::switchos::replay(&cfg.servers, records, cfg.ack_timeout, cfg.tries)?;
    rep.replay = r.elapsed;
    rep.replayed = r.replayed;
    Ok(())
}

/// The phases of a recovery from their JSON form ([`phases_json`]).
fn phases_from_json(j: &serde_json::Value) -> tern_kv::switchos::RecoveryReport {
    let d = |k: &str| Duration::from_secs_f64(j[k].as_f64().unwrap_or(0.0).max(0.0) / 1000.0);
    let n = |k: &str| j[k].as_u64().unwrap_or(0) as usize;
    tern_kv::switchos::RecoveryReport {
        snapshot_records: n("snapshot_records"),
        preserved_records: n("preserved_records"),
        replayed: n("replayed"),
        reinstalled: n("reinstalled"),
        snapshot_load: d("snapshot_load_ms"),
        preserved_load: d("preserved_load_ms"),
        replay: d("replay_ms"),
        reinstall: d("reinstall_ms"),
        total: d("total_ms"),
    }
}

/// One line of a recovery's phases.
pub(crate) fn phases_line(r: &tern_kv::switchos::RecoveryReport) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "{:.1} ms: snapshot load {:.1} ms ({} records), preserved records {:.1} ms ({}), \
         server replay {:.1} ms ({} records), re-install {:.1} ms ({} cached)",
        ms(r.total),
        ms(r.snapshot_load),
        r.snapshot_records,
        ms(r.preserved_load),
        r.preserved_records,
        ms(r.replay),
        r.replayed,
        ms(r.reinstall),
        r.reinstalled
    )
}

/// The phases of a recovery as JSON (milliseconds).
fn phases_json(r: &tern_kv::switchos::RecoveryReport) -> serde_json::Value {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    serde_json::json!({
        "total_ms": ms(r.total),
        "snapshot_load_ms": ms(r.snapshot_load),
        "snapshot_records": r.snapshot_records,
        "preserved_load_ms": ms(r.preserved_load),
        "preserved_records": r.preserved_records,
        "replay_ms": ms(r.replay),
        "replayed": r.replayed,
        "reinstall_ms": ms(r.reinstall),
        "reinstalled": r.reinstalled,
    })
}

/// What the fault injector crashes.
enum Target {
    /// The in-process switch of `--mode sim`.
    Sim(Arc<super::kv_sim::SimSwitch>),
    /// The `tern kv sim-switch` process of `--mode loopback`.
    Process(SwitchProcess),
    /// The `tern run` switch and the `tern kv switchos` of `--mode netns`.
    Netns(NetnsTarget),
}

/// What the injector kills and restarts in netns mode.
struct NetnsTarget {
    spec: NetnsSwitch,
    switch: Arc<std::sync::Mutex<Option<Child>>>,
    switchos: Arc<std::sync::Mutex<Option<Child>>>,
    switchos_args: Vec<std::ffi::OsString>,
    /// The switch ports of the client hosts (held down while the switch recovers).
    client_ports: Vec<u32>,
    dir: PathBuf,
}

/// How to restart the switch process.
struct SwitchProcess {
    exe: PathBuf,
    dir: PathBuf,
    json: PathBuf,
    fronts: Vec<SocketAddr>,
    child: Arc<std::sync::Mutex<Option<Child>>>,
}

/// Starts `tern kv sim-switch`; returns the child, its front addresses and its Thrift port.
fn spawn_sim_switch(
    exe: &Path,
    dir: &Path,
    json: &Path,
    servers: &[SocketAddr],
    fronts: &[SocketAddr],
    commands: &str,
) -> anyhow::Result<(Child, Vec<SocketAddr>, u16)> {
    let join = |v: &[SocketAddr]| {
        v.iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("switch.log"))
        .context("creating switch.log")?;
    let mut c = Command::new(exe);
    c.args(["kv", "sim-switch", "--program"])
        .arg(json)
        .args(["--servers", &join(servers)]);
    if !fronts.is_empty() {
        c.args(["--fronts", &join(fronts)]);
    }
    if !commands.is_empty() {
        c.args(["--commands", commands]);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .context("starting tern kv sim-switch")?;
    let stdout = child.stdout.take().context("sim-switch stdout")?;
    let line = BufReader::new(stdout).lines().next();
    let parsed = line.and_then(|l| l.ok()).and_then(|l| {
        let rest = l.strip_prefix("tern kv sim-switch: fronts ")?;
        let (f, t) = rest.split_once(" thrift ")?;
        let fronts: Option<Vec<SocketAddr>> = f.split(',').map(|x| x.parse().ok()).collect();
        Some((fronts?, t.trim().parse::<u16>().ok()?))
    });
    match parsed {
        Some((f, t)) => Ok((child, f, t)),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "tern kv sim-switch did not start; see {}",
                dir.join("switch.log").display()
            )
        }
    }
}

/// A Thrift connection to 127.0.0.1:`port`, retried for up to 10 s.
fn connect_thrift(port: u16) -> anyhow::Result<tern_thrift::ThriftRuntime> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match tern_thrift::ThriftRuntime::connect((Ipv4Addr::LOCALHOST, port)) {
            Ok(rt) => return Ok(rt),
            Err(e) if Instant::now() > deadline => {
                return Err(e).with_context(|| format!("connecting to Thrift port {port}"))
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// loopback + cache: the switch program in a `tern kv sim-switch` process between the clients
/// and the server processes, its switch OS here over Thrift.
fn loopback_cache(
    t: &mut Topology,
    a: &UpArgs,
    s: &Settings,
    exe: &Path,
    dir: &Path,
    kind: tern_kv::switchos::CacheKind,
    so: SocketAddr,
) -> anyhow::Result<()> {
    use tern_kv::switchos::SwitchOs;
    let json = dir.join("switch.json");
    std::fs::write(&json, program_json(s)?).context("writing switch.json")?;
    let servers = t.servers.clone();
    let (child, fronts, thrift) = spawn_sim_switch(exe, dir, &json, &servers, &[], "")?;
    let proc = Arc::new(std::sync::Mutex::new(Some(child)));
    t.switch_proc = proc.clone();
    let rt = connect_thrift(thrift)?;
    let mut c = switchos_config(&a.opts, kind, servers, so)?;
    // As in netns mode, recovery reads the snapshot from the file, not from the dead OS.
    c.snapshot_file = Some(dir.join("snapshot.bin"));
    let access: Box<dyn tern_kv::switchos::SwitchAccess> = Box::new(std::sync::Mutex::new(rt));
    let os = SwitchOs::start(access, c.clone()).context("starting the switch OS")?;
    if let Ok(mut slot) = t.switchos.lock() {
        *slot = Some(os);
    }
    if a.crashes > 0 {
        let stop = Arc::new(AtomicBool::new(false));
        let inj = Injector {
            target: Target::Process(SwitchProcess {
                exe: exe.to_path_buf(),
                dir: dir.to_path_buf(),
                json,
                fronts: fronts.clone(),
                child: proc,
            }),
            os: t.switchos.clone(),
            ctls: Vec::new(),
            cfg: c,
            preserve: dir.join("preserved.txt"),
            crashes: a.crashes,
            period: Duration::from_millis(a.crash_period_ms.max(1)),
            stop: stop.clone(),
            log: t.recoveries.clone(),
            phases: t.recovery_phases.clone(),
            failed: t.injector_error.clone(),
        };
        t.injector = Some((stop, std::thread::spawn(move || inj.run())));
    }
    t.servers = fronts;
    Ok(())
}

/// netns + cache: `tern kv switchos` in the switch namespace, on the tern switch's Thrift port,
/// reports on cpu0; FarReach's snapshots go to `snapshot.bin` in the topology's folder.
fn netns_switchos(t: &mut Topology, a: &UpArgs, s: &Settings, exe: &Path) -> anyhow::Result<()> {
    let (Some(ns), Some(bind), Some(kind)) = (t.switch_ns.clone(), s.switchos, s.cache) else {
        bail!("netns cache: no switch namespace");
    };
    let o = &a.opts;
    let mut args: Vec<std::ffi::OsString> = Vec::new();
    let mut add = |x: &dyn AsRef<std::ffi::OsStr>| args.push(x.as_ref().to_owned());
    for x in ["kv", "switchos", "--cache"] {
        add(&x);
    }
    add(&if kind == tern_kv::switchos::CacheKind::FarReach {
        "farreach"
    } else {
        "netcache"
    });
    for x in [
        "--servers".to_string(),
        t.server_list(),
        "--thrift-port".into(),
        "9090".into(),
        "--bind".into(),
        bind.to_string(),
        "--cache-size".into(),
        o.cache_size.to_string(),
        "--hot-threshold".into(),
        o.hot_threshold.to_string(),
        "--snapshot-ms".into(),
        o.snapshot_ms.to_string(),
        "--control-loss".into(),
        o.control_loss.to_string(),
        "--control-dup".into(),
        o.control_dup.to_string(),
    ] {
        add(&x);
    }
    add(&"--stats-file");
    add(&t.dir.join("switchos-stats.json"));
    add(&"--snapshot-file");
    add(&t.dir.join("snapshot.bin"));
    if o.sample_all {
        add(&"--sample-all");
    }
    let _ = std::fs::remove_file(t.dir.join("switchos.log"));
    t.switchos_args = args;
    let (child, _) = spawn_netns_switchos(exe, &ns, &t.switchos_args, &[], &t.dir)?;
    *t.switchos_proc
        .lock()
        .map_err(|_| anyhow::anyhow!("switch OS slot"))? = Some(child);
    Ok(())
}

/// Starts `tern kv switchos ARGS EXTRA` in namespace `ns` and waits for its `listening` line;
/// returns the child and the phases of its recovery (with `--recover`).
fn spawn_netns_switchos(
    exe: &Path,
    ns: &str,
    args: &[std::ffi::OsString],
    extra: &[std::ffi::OsString],
    dir: &Path,
) -> anyhow::Result<(Child, Option<serde_json::Value>)> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("switchos.log"))
        .context("opening switchos.log")?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns])
        .arg(exe)
        .args(args)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()
        .context("starting the switch OS")?;
    let stdout = child.stdout.take().context("switch OS stdout")?;
    let mut recovered = None;
    let mut ok = false;
    for l in BufReader::new(stdout).lines() {
        let Ok(l) = l else { break };
        if let Some(j) = l.strip_prefix("tern kv switchos: recovered ") {
            recovered = serde_json::from_str(j).ok();
        }
        if l.starts_with("tern kv switchos: listening") {
            ok = true;
            break;
        }
    }
    if !ok {
        stop_child(&mut child, "the switch OS");
        bail!(
            "the switch OS did not start; see {}",
            dir.join("switchos.log").display()
        );
    }
    Ok((child, recovered))
}

/// SIGINT, up to 5 s to exit, then SIGKILL; reaped.
fn stop_child(c: &mut Child, name: &str) {
    if matches!(c.try_wait(), Ok(None)) {
        let _ = Command::new("kill")
            .args(["-INT", &c.id().to_string()])
            .status();
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while matches!(c.try_wait(), Ok(None)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    if matches!(c.try_wait(), Ok(None)) {
        eprintln!("tern kv up: {name} did not stop on SIGINT; killing it");
        let _ = c.kill();
    }
    let _ = c.wait();
}

/// netns: `tern run` on the switch namespace's ports with the forwarding entries and Thrift on
/// 9090.
#[derive(Clone, Debug)]
struct NetnsSwitch {
    exe: PathBuf,
    ns: String,
    json: PathBuf,
    commands: PathBuf,
    ports: Vec<u32>,
    log: PathBuf,
}

impl NetnsSwitch {
    fn spawn(&self) -> anyhow::Result<Child> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .context("opening switch.log")?;
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns])
            .arg(&self.exe)
            .arg("run")
            .arg(&self.json);
        for p in &self.ports {
            c.arg("-i").arg(format!("{p}@p{p}"));
        }
        c.arg("--commands").arg(&self.commands);
        c.args(["--thrift-port", "9090"]);
        c.stdin(Stdio::null())
            .stdout(log.try_clone().context("switch.log")?)
            .stderr(log);
        c.spawn().context("starting the tern switch")
    }
}

/// netns + cache + `--crashes`: the fault injector on the netns switch.
fn netns_injector(
    t: &mut Topology,
    a: &UpArgs,
    s: &Settings,
    kind: tern_kv::switchos::CacheKind,
) -> anyhow::Result<()> {
    let (Some(spec), Some(bind)) = (t.netns_switch.clone(), s.switchos) else {
        bail!("--crashes in netns mode needs the tern switch");
    };
    let stop = Arc::new(AtomicBool::new(false));
    let inj = Injector {
        target: Target::Netns(NetnsTarget {
            spec,
            switch: t.switch_proc.clone(),
            switchos: t.switchos_proc.clone(),
            switchos_args: t.switchos_args.clone(),
            client_ports: t.switch_ports.iter().copied().take(s.clients).collect(),
            dir: t.dir.clone(),
        }),
        os: t.switchos.clone(),
        ctls: Vec::new(),
        cfg: switchos_config(&a.opts, kind, t.servers.clone(), bind)?,
        preserve: t.dir.join("preserved.txt"),
        crashes: a.crashes,
        period: Duration::from_millis(a.crash_period_ms.max(1)),
        stop: stop.clone(),
        log: t.recoveries.clone(),
        phases: t.recovery_phases.clone(),
        failed: t.injector_error.clone(),
    };
    t.injector = Some((stop, std::thread::spawn(move || inj.run())));
    Ok(())
}

/// netns + cache: stops the switch OS (SIGINT: it writes its counters) and reads them.
fn netns_switchos_stats(t: &mut Topology) -> Option<serde_json::Value> {
    let mut c = t.switchos_proc.lock().ok()?.take()?;
    stop_child(&mut c, "the switch OS");
    let text = std::fs::read_to_string(t.dir.join("switchos-stats.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The switch OS settings from the command line.
fn switchos_config(
    a: &CacheOpts,
    kind: tern_kv::switchos::CacheKind,
    servers: Vec<SocketAddr>,
    bind: SocketAddr,
) -> anyhow::Result<tern_kv::switchos::SwitchOsConfig> {
    let mut c = tern_kv::switchos::SwitchOsConfig::new(kind, servers);
    c.capacity = a.cache_size;
    c.hot_threshold = a.hot_threshold;
    c.sample_all = a.sample_all;
    c.loss = a.control_loss;
    c.dup = a.control_dup;
    if !(0.0..=1.0).contains(&c.loss) || !(0.0..=1.0).contains(&c.dup) {
        bail!("--control-loss and --control-dup must be in [0, 1]");
    }
    c.bind = bind;
    c.snapshot_period = (kind == tern_kv::switchos::CacheKind::FarReach && a.snapshot_ms > 0)
        .then(|| Duration::from_millis(a.snapshot_ms));
    if c.capacity == 0 || c.capacity > 10_000 {
        bail!("--cache-size {}: between 1 and 10000", c.capacity);
    }
    Ok(c)
}

/// Indexes of the cache programs' `kv_ops` counter (see p4/kv/*.p4).
const OPS_GET_HIT: u32 = 0;

/// The switch OS's and the data plane's cache counters, as JSON (`None` without a cache).
fn cache_stats(t: &Topology, kind: tern_kv::switchos::CacheKind) -> Option<serde_json::Value> {
    use std::sync::atomic::Ordering::Relaxed;
    let guard = t.switchos.lock().ok()?;
    let os = guard.as_ref()?;
    let rec = t.recoveries.lock().map(|r| r.clone()).unwrap_or_default();
    let phases: Vec<serde_json::Value> = t
        .recovery_phases
        .lock()
        .map(|p| p.iter().map(phases_json).collect())
        .unwrap_or_default();
    let server_retried: u64 = t
        .inproc
        .iter()
        .map(|h| h.cache_ctl().retried.load(Relaxed))
        .sum();
    let server_gave_up: u64 = t
        .inproc
        .iter()
        .map(|h| h.cache_ctl().gave_up.load(Relaxed))
        .sum();
    let mut j = os_stats(os, kind, rec, (server_retried, server_gave_up));
    j["recovery_phases"] = serde_json::Value::Array(phases);
    Some(j)
}

/// The counters of a switch OS and of the data plane it drives, as JSON.
fn os_stats(
    os: &CacheOs,
    kind: tern_kv::switchos::CacheKind,
    (crashes, recovery_ms, replayed): (u32, Vec<f64>, usize),
    (server_retried, server_gave_up): (u64, u64),
) -> serde_json::Value {
    use std::sync::atomic::Ordering::Relaxed;
    let st = os.stats();
    let mut ops = [0u64; 14];
    let mut dropped = [0u64; 4];
    let _ = os.with_switch(&mut |rt| {
        for (i, o) in ops.iter_mut().enumerate() {
            *o = rt.counter_read("KvIngress.kv_ops", i as u32)?.packets;
        }
        for (i, d) in dropped.iter_mut().enumerate() {
            *d = rt.counter_read("KvIngress.kv_dropped", i as u32)?.packets;
        }
        Ok(())
    });
    // kv_ops: 0 hit, 1 miss, 2 cached but not served (not latest / invalid), 3 being evicted.
    let gets = ops[0] + ops[1] + ops[2] + ops[3] + ops[13];
    let hit = ops[OPS_GET_HIT as usize];
    // kv_ops[4]: FarReach writes absorbed, NetCache writes that invalidated a copy (they go on
    // to the server); kv_ops[5]: writes of uncached keys.
    let (in_switch, to_servers) = match kind {
        tern_kv::switchos::CacheKind::FarReach => (ops[4], ops[5]),
        tern_kv::switchos::CacheKind::NetCache => (0, ops[4] + ops[5]),
    };
    serde_json::json!({
        "gets": gets,
        "get_hits": hit,
        "hit_ratio": if gets == 0 { 0.0 } else { hit as f64 / gets as f64 },
        "writes_in_switch": in_switch,
        "writes_to_servers": to_servers,
        "hot_reports": ops[6],
        "large_writes": ops[11],
        "large_invalidations": ops[12],
        "kv_ops": ops.to_vec(),
        "malformed_dropped": dropped.to_vec(),
        "cached": os.cached_count(),
        "admissions": st.admissions.load(Relaxed),
        "evictions": st.evictions.load(Relaxed),
        "writebacks": st.writebacks.load(Relaxed),
        "reports": st.reports.load(Relaxed),
        "sketch_resets": st.sketch_resets.load(Relaxed),
        "snapshots": st.snapshots.load(Relaxed),
        "last_snapshot_ms": st.last_snapshot_us.load(Relaxed) as f64 / 1000.0,
        "max_snapshot_ms": st.max_snapshot_us.load(Relaxed) as f64 / 1000.0,
        "control_retried": st.retried.load(Relaxed) + server_retried,
        "control_gave_up": st.gave_up.load(Relaxed) + server_gave_up,
        "control_dropped_on_purpose": st.dropped.load(Relaxed),
        "control_duplicated_on_purpose": st.duplicated.load(Relaxed),
        "runtime_errors": st.runtime_errors.load(Relaxed),
        "seq_base": os.seq_base(),
        "crashes": crashes,
        "recovery_ms": recovery_ms,
        "max_recovery_ms": recovery_ms.iter().copied().fold(0.0, f64::max),
        "records_replayed": replayed,
    })
}

/// One line of the most telling cache counters.
pub fn stats_line(j: &serde_json::Value) -> String {
    format!(
        "hit ratio {:.3} ({} of {} GETs), writes in switch {}, to servers {}, cached {}, \
         admissions {}, evictions {} (write-backs {}), snapshots {} (last {:.1} ms, max {:.1} ms), \
         control messages retried {} / given up {} (dropped on purpose {}, duplicated on \
         purpose {}), malformed dropped {}",
        j["hit_ratio"].as_f64().unwrap_or(0.0),
        j["get_hits"],
        j["gets"],
        j["writes_in_switch"],
        j["writes_to_servers"],
        j["cached"],
        j["admissions"],
        j["evictions"],
        j["writebacks"],
        j["snapshots"],
        j["last_snapshot_ms"].as_f64().unwrap_or(0.0),
        j["max_snapshot_ms"].as_f64().unwrap_or(0.0),
        j["control_retried"],
        j["control_gave_up"],
        j["control_dropped_on_purpose"],
        j["control_duplicated_on_purpose"],
        j["malformed_dropped"]
            .as_array()
            .map_or(0, |a| a.iter().filter_map(|x| x.as_u64()).sum::<u64>()),
    )
}
