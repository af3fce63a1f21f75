//! `tern virt …`: many tenant devices in one tern (crate `tern-virt`). `tern virt run CONFIG`
//! builds the devices, classifier, links and snapshots of a configuration file and runs
//! them on pcap-file ports as `tern run --use-files` does (`-i P@NAME` reads
//! `NAME_in.pcap`, writes `NAME_out.pcap`) or, with `--live`, on network interfaces
//! (AF_PACKET, as `tern run -i P@IFACE`) until SIGINT/SIGTERM, then prints every device's
//! counters. Devices with a `thrift_port` get their own BMv2 Thrift server (acting as the
//! device's owner); `--admin SOCKET` opens the operator's line interface (snapshots, counters)
//! that `tern virt ctl SOCKET ...` talks to; `--grpc-addr` (or the config's `p4runtime`) serves
//! P4Runtime for every device under its own device id, tenants reaching only their own.

use std::sync::{Arc, Mutex};

use std::path::{Path, PathBuf};

use anyhow::Context;
use tern_ports::afpacket::install_stop_signals;
use tern_ports::{FilePorts, LiveConfig, LivePorts, PortIo, PortSpec};
use tern_runtime::OutputPacket;
use tern_virt::config::Config;
use tern_virt::{Caller, VirtSwitch};

#[path = "cmd_virt_admin.rs"]
mod admin;
#[path = "cmd_virt_bench.rs"]
mod bench;
#[path = "cmd_virt_isolation.rs"]
mod isolation;

use admin::{ctl, stats_text, AdminSocket, Control, Front};

/// `tern virt …`
#[derive(clap::Args)]
pub struct VirtArgs {
    #[command(subcommand)]
    command: VirtCommand,
}

#[derive(clap::Subcommand)]
enum VirtCommand {
    /// Run a virtualization config (devices, rules, links, quotas; see crates/tern-virt/README.md)
    /// on pcap-file ports or live interfaces; per-device Thrift servers, and one P4Runtime
    /// server for all devices (each under its own device id, tenants by token).
    Run(RunArgs),
    /// Parse and build a config (programs loaded or compiled, command files run), then exit.
    Check(CheckArgs),
    /// Send one operator command to a running `tern virt run --admin SOCKET` and print the
    /// answer (exit status 1 on an error answer). Commands: devices, stats, snapshot NAME,
    /// snapshots, add ID PROGRAM [owner=T] [thrift_port=P] [QUOTA=N...], remove ID,
    /// replace ID PROGRAM, rules, rule add KEY=VALUE..., rule del N, link ID VPORT TARGET,
    /// quota ID KEY=VALUE..., release ID, reload CONFIG, help (`help` lists them with their
    /// arguments).
    Ctl(CtlArgs),
    /// HyPer4's penalty table on tern: tables, passes and entries per packet, native vs
    /// sliced, for the four functions and Example 1 B/C (`--timed` adds packet rates).
    Bench(bench::BenchArgs),
}

#[derive(clap::Args)]
#[command(after_help = concat!("Commands:\n", include_str!("cmd_virt_ctl_help.txt")))]
struct CtlArgs {
    /// The admin socket of the running switch (`--admin` of `tern virt run`).
    socket: PathBuf,
    /// The command and its arguments.
    #[arg(required = true, num_args = 1..)]
    command: Vec<String>,
}

#[derive(clap::Args)]
struct RunArgs {
    /// The configuration file (JSON).
    config: PathBuf,
    /// Attach physical port PORT to NAME_in.pcap / NAME_out.pcap, or with `--live` to the
    /// network interface NAME (repeatable).
    #[arg(short = 'i', long = "interface", value_name = "PORT@NAME")]
    interfaces: Vec<String>,
    /// Ports are live network interfaces (AF_PACKET; needs CAP_NET_RAW), switched until
    /// SIGINT/SIGTERM, instead of pcap files.
    #[arg(long)]
    live: bool,
    /// Serve the operator's line interface on this Unix socket (`tern virt ctl`); the file is
    /// removed when the run ends.
    #[arg(long, value_name = "SOCKET")]
    admin: Option<PathBuf>,
    /// Folder of the pcap files (default: the working directory).
    #[arg(long, default_value = ".")]
    pcap_dir: PathBuf,
    /// Activate this snapshot of the config before the first packet.
    #[arg(long)]
    snapshot: Option<String>,
    /// Thrift connections each device's server serves at once (each holds a thread while its
    /// client keeps it open). A connection past them is closed as soon as it is accepted, and
    /// said on standard error.
    #[arg(long, value_name = "N", default_value_t = tern_thrift::DEFAULT_MAX_CONNECTIONS as u32,
          value_parser = clap::value_parser!(u32).range(1..))]
    thrift_max_connections: u32,
    /// Seconds to wait after start-up (Thrift servers up) before reading the inputs, as
    /// `--use-files N` does.
    #[arg(long, default_value_t = 0)]
    wait: u64,
    /// Serve P4Runtime for every device on this address (overrides the config's
    /// `p4runtime.addr`): device id = the device's id; with `p4runtime.tokens` each request
    /// needs `authorization: Bearer TOKEN` and a tenant's token reaches only its devices.
    #[arg(long, value_name = "ADDR")]
    grpc_addr: Option<std::net::SocketAddr>,
    /// Spread the devices over N worker threads (each device on one worker, deficit round
    /// robin between a worker's devices, rebalanced by load). 0: on the receiving thread.
    /// Works with pcap files and `--live`, per-device Thrift, P4Runtime and `--admin`: a
    /// tenant's control request runs on the worker that holds its device.
    #[arg(long, default_value_t = 0, value_name = "N")]
    workers: usize,
    /// With `--workers`: the time slice (µs) each worker thread asks the kernel for (EEVDF's
    /// custom slice, Linux 6.12+, 100–100,000; 0 or absent: the kernel's default). Overrides
    /// the config's `worker_slice_us`. A short slice lets a woken worker in sooner only where
    /// the kernel preempts between ticks (HZ=1000, HRTICK); on the 2-vCPU HZ=250 machine it
    /// did not shorten the two-worker stall (bench/RESULTS.md).
    #[arg(long, value_name = "US", value_parser = clap::value_parser!(u64).range(0..=100_000))]
    worker_slice_us: Option<u64>,
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The configuration file (JSON).
    config: PathBuf,
}

pub fn run(args: VirtArgs) -> anyhow::Result<std::process::ExitCode> {
    match args.command {
        VirtCommand::Run(a) => run_files(a).map(|()| std::process::ExitCode::SUCCESS),
        VirtCommand::Bench(a) => bench::run(a),
        VirtCommand::Ctl(a) => {
            let answer = ctl(&a.socket, &a.command)?;
            print!("{answer}");
            Ok(if answer.starts_with("error") {
                std::process::ExitCode::FAILURE
            } else {
                std::process::ExitCode::SUCCESS
            })
        }
        VirtCommand::Check(a) => {
            let (vs, _) = build(&a.config)?;
            println!(
                "{}: {} device(s), {} classifier rule(s): OK",
                a.config.display(),
                vs.device_ids().len(),
                vs.topology().rules.len()
            );
            Ok(std::process::ExitCode::SUCCESS)
        }
    }
}

fn build(path: &Path) -> anyhow::Result<(VirtSwitch, String)> {
    build_cfg(path).map(|(vs, log, _)| (vs, log))
}

fn build_cfg(path: &Path) -> anyhow::Result<(VirtSwitch, String, Config)> {
    let cfg = Config::load(path)?;
    let base = path.parent().unwrap_or(Path::new("."));
    let base = if base.as_os_str().is_empty() {
        Path::new(".")
    } else {
        base
    };
    let (vs, log) = cfg.build(base)?;
    Ok((vs, log, cfg))
}

/// Start a Thrift server for every device with a `thrift_port`, as the device's owner.
fn start_servers(
    vs: &tern_virt::Shared,
    cfg: &Config,
    max_connections: usize,
) -> anyhow::Result<Vec<(tern_virt::DeviceId, tern_thrift::Server)>> {
    let mut addrs = Vec::new();
    for d in &cfg.devices {
        let Some(port) = d.thrift_port else { continue };
        let caller = match &d.owner {
            Some(o) => Caller::Tenant(o),
            None => Caller::Operator,
        };
        addrs.push((
            d.id,
            admin::start_thrift(vs, caller, d.id, port, max_connections)?,
        ));
    }
    Ok(addrs)
}

fn run_files(a: RunArgs) -> anyhow::Result<()> {
    if a.interfaces.is_empty() {
        anyhow::bail!("no ports: give at least one -i PORT@NAME");
    }
    let specs = a
        .interfaces
        .iter()
        .map(|s| PortSpec::parse(s))
        .collect::<Result<Vec<_>, _>>()?;
    let (mut vs, log, cfg) = build_cfg(&a.config)?;
    print!("{log}");
    if let Some(s) = &a.snapshot {
        vs.activate_snapshot(s)?;
    }
    let mut ports: Box<dyn PortIo> = if a.live {
        install_stop_signals().context("installing the SIGINT/SIGTERM handlers")?;
        let live = LivePorts::open(&specs, LiveConfig::default(), Arc::default())
            .context("opening the live interfaces")?;
        for name in live.down_interfaces() {
            eprintln!(
                "tern virt run: warning: interface '{name}' is down and receives nothing \
                 (ip link set {name} up)"
            );
        }
        Box::new(live)
    } else {
        Box::new(
            FilePorts::open(&a.pcap_dir, &specs)
                .with_context(|| format!("opening the pcap ports in {}", a.pcap_dir.display()))?,
        )
    };
    let slice = a.worker_slice_us.or(cfg.worker_slice_us).map_or(
        tern_virt::ThreadSlice::Kernel,
        tern_virt::ThreadSlice::from_us,
    );
    if let Some(w) = tern_virt::sched::affinity_cpus()
        .and_then(|cpus| tern_virt::sched::oversubscription_warning(a.workers, cpus))
    {
        eprintln!("tern virt run: warning: {w}");
    }
    let front = if a.workers > 0 {
        Front::workers(tern_virt::VirtWorkers::new(
            vs,
            tern_virt::WorkerOptions {
                workers: a.workers,
                slice,
                ..tern_virt::WorkerOptions::default()
            },
        ))
    } else {
        Front::One(Arc::new(Mutex::new(vs)))
    };
    let shared = front.shared();
    let thrift_max = a.thrift_max_connections as usize;
    let thrift = start_servers(&shared, &cfg, thrift_max)?;
    let grpc = start_p4runtime(&shared, &cfg, a.grpc_addr)?;
    let mut packet_outs = grpc.as_ref().map(|g| g.packet_outs.clone());
    if let (true, Some(rx)) = (a.live, packet_outs.take()) {
        // Live ports block in receive: packet-outs leave from a thread of their own.
        crate::cmd_run::spawn_packet_out_sender(&specs, rx.into_inner())?;
    }
    let base = config_base(&a.config);
    let control = Arc::new(
        Control::new(
            front.clone(),
            grpc.as_ref().map(|g| Arc::clone(&g.p4rt)),
            thrift,
            cfg,
            base,
        )
        .with_thrift_max(thrift_max),
    );
    let _admin = match &a.admin {
        Some(path) => Some(AdminSocket::start(path, Arc::clone(&control))?),
        None => None,
    };
    if a.wait > 0 {
        std::thread::sleep(std::time::Duration::from_secs(a.wait));
    }
    if a.live {
        eprintln!(
            "tern virt run: switching on {}{} (Ctrl-C or SIGTERM to stop)",
            specs
                .iter()
                .map(|s| format!("{}@{}", s.port, s.name))
                .collect::<Vec<_>>()
                .join(", "),
            if a.workers > 0 {
                format!(" with {} workers", a.workers)
            } else {
                String::new()
            }
        );
    }
    match &front {
        Front::One(shared) => {
            let (packets, sent, discarded) = pump(
                shared,
                ports.as_mut(),
                grpc.as_ref().map(|g| &*g.p4rt),
                packet_outs.as_ref(),
                a.live,
            )?;
            ports.flush()?;
            let vs = shared.lock().unwrap_or_else(|e| e.into_inner());
            println!(
                "{packets} packet(s) in, {sent} frame(s) out, {discarded} on unattached ports"
            );
            print!("{}", stats_text(&*vs)?);
        }
        Front::Workers(pool, _) => {
            let transmit = if a.live {
                // Outputs leave from a thread of their own: the receive loop blocks in poll.
                let rx = lock_pool(pool)
                    .as_mut()
                    .expect("running")
                    .take_output_channel();
                crate::cmd_run::spawn_packet_out_sender(&specs, rx)?;
                false
            } else {
                true
            };
            run_workers(
                pool,
                ports.as_mut(),
                packet_outs.as_ref(),
                transmit,
                grpc.is_some(),
                a.workers,
            )?;
        }
    }
    Ok(())
}

fn config_base(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

type Pool = Mutex<Option<tern_virt::VirtWorkers>>;

fn lock_pool(p: &Pool) -> std::sync::MutexGuard<'_, Option<tern_virt::VirtWorkers>> {
    p.lock().unwrap_or_else(|e| e.into_inner())
}

/// Packet-out traffic for physical ports, from the P4Runtime server.
type PacketOuts = Arc<OnceRx>;

/// A receiver handed over once (to the live transmit thread) or polled by the run loop.
struct OnceRx(Mutex<Option<std::sync::mpsc::Receiver<Vec<OutputPacket>>>>);

impl OnceRx {
    fn into_inner(self: Arc<Self>) -> std::sync::mpsc::Receiver<Vec<OutputPacket>> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.take().expect("the packet-out receiver is taken once")
    }

    fn drain(&self) -> Vec<OutputPacket> {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref()
            .map(|rx| rx.try_iter().flatten().collect())
            .unwrap_or_default()
    }
}

/// Start the P4Runtime server when `--grpc-addr` or the config's `p4runtime.addr` asks for
/// one: every device under its own id, with its roles; tokens from the config.
fn start_p4runtime(
    vs: &tern_virt::Shared,
    cfg: &Config,
    addr: Option<std::net::SocketAddr>,
) -> anyhow::Result<Option<Grpc>> {
    let pc = cfg.p4runtime.clone().unwrap_or_default();
    let addr = match (addr, &pc.addr) {
        (Some(a), _) => a,
        (None, Some(a)) => a
            .parse()
            .with_context(|| format!("{}: p4runtime.addr: '{a}' is not IP:PORT", cfg.file))?,
        (None, None) => return Ok(None),
    };
    let devices: Vec<_> = cfg
        .devices
        .iter()
        .map(|d| (d.id, d.roles.clone()))
        .collect();
    let p4rt = Arc::new(tern_virt::VirtP4rt::new(vs.clone(), &devices)?);
    p4rt.set_tokens(pc.tokens.clone(), pc.operator_token.clone())
        .map_err(|e| anyhow::anyhow!("{}: p4runtime: {e}", cfg.file))?;
    let (tx, rx) = std::sync::mpsc::channel::<Vec<OutputPacket>>();
    p4rt.set_output_sink(Arc::new(move |outs| {
        let _ = tx.send(outs);
    }));
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("cannot start the P4Runtime server on {addr}"))?;
    let bound = listener.local_addr()?;
    let tls = match &pc.tls {
        None => None,
        Some((cert, key)) => Some(read_tls(cfg, cert, key)?),
    };
    let secure = tls.is_some();
    let (set, tick) = (p4rt.set(), p4rt.tick());
    std::thread::Builder::new()
        .name("p4runtime".into())
        .spawn(move || {
            if let Err(e) = tern_p4rt::serve_set(listener, set, Some(tick), tls) {
                eprintln!("P4Runtime server stopped: {e}");
            }
        })
        .context("starting the P4Runtime thread")?;
    println!(
        "P4Runtime on {bound}{}: device ids {}{}",
        if secure { " (TLS)" } else { "" },
        devices
            .iter()
            .map(|d| d.0.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        if pc.tokens.is_empty() && pc.operator_token.is_none() {
            " (no tokens: every client reaches every device)"
        } else {
            " (tenant tokens)"
        }
    );
    Ok(Some(Grpc {
        p4rt,
        packet_outs: Arc::new(OnceRx(Mutex::new(Some(rx)))),
        addr: bound,
    }))
}

/// The config's `p4runtime.tls` files (relative to the config's folder), checked now: a
/// missing file or a certificate and key that do not parse stop the start-up with the file.
fn read_tls(cfg: &Config, cert: &Path, key: &Path) -> anyhow::Result<tern_p4rt::TlsPem> {
    let base = config_base(Path::new(&cfg.file));
    let read = |p: &Path, what: &str| {
        let p = base.join(p);
        std::fs::read(&p)
            .with_context(|| format!("{}: p4runtime.tls.{what}: {}", cfg.file, p.display()))
    };
    let pem = tern_p4rt::TlsPem {
        cert: read(cert, "cert")?,
        key: read(key, "key")?,
    };
    pem.check()
        .map_err(|e| anyhow::anyhow!("{}: p4runtime.tls: {e}", cfg.file))?;
    Ok(pem)
}

/// The running P4Runtime server of `tern virt run`.
struct Grpc {
    p4rt: Arc<tern_virt::VirtP4rt>,
    packet_outs: PacketOuts,
    #[cfg_attr(not(test), allow(dead_code))]
    addr: std::net::SocketAddr,
}

/// `tern virt run --workers N`: the devices over N worker threads; every input packet is
/// dispatched in order (the pool's lock taken per frame: operator commands get in between),
/// outputs are written as the workers produce them (stamped with the time of the latest
/// input) unless a transmit thread of its own sends them (`transmit` false, live ports), the
/// counters printed at the end. Tenants' control (Thrift, P4Runtime) reaches each device on
/// its worker directly.
fn run_workers(
    pool: &Pool,
    ports: &mut dyn PortIo,
    packet_outs: Option<&PacketOuts>,
    transmit: bool,
    p4rt: bool,
    workers: usize,
) -> anyhow::Result<()> {
    let (mut n, mut sent, mut discarded) = (0u64, 0u64, 0u64);
    let mut buf = Vec::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut ts = 0;
    // Frames written since the last dispatch: given back to the pool with the next one, so
    // their buffers go round (a multicasting device's bounded pool refills).
    let mut written: Vec<OutputPacket> = Vec::new();
    let mut write = |out: &mut Vec<OutputPacket>,
                     written: &mut Vec<OutputPacket>,
                     ports: &mut dyn PortIo,
                     ts| {
        for o in out.drain(..) {
            if ports.send(o.port, ts, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
            }
            written.push(o);
        }
        anyhow::Ok(())
    };
    while let Some(meta) = ports.recv(&mut buf)? {
        n += 1;
        ts = meta.ts_ns;
        if let Some(p) = packet_outs {
            out.extend(p.drain());
        }
        {
            let mut g = lock_pool(pool);
            let pool = g.as_mut().expect("the pool runs until the loop ends");
            pool.recycle_outputs(&mut written);
            pool.dispatch(&[(meta.port, &buf)]);
            if n % 65_536 == 0 && !p4rt {
                // Digests nobody listens for are dropped, not hoarded (with P4Runtime the
                // server's tick delivers them to the controllers).
                for id in pool.device_ids() {
                    let _ = pool.call(id, move |vs| vs.take_digests(Caller::Operator, id));
                }
            }
            if transmit {
                pool.take_outputs(&mut out);
            }
        }
        write(&mut out, &mut written, ports, ts)?;
    }
    let pool = lock_pool(pool).take().expect("running");
    let vs = pool.shutdown(&mut out);
    if transmit {
        write(&mut out, &mut written, ports, ts)?;
    }
    ports.flush()?;
    println!("{n} packet(s) in, {sent} frame(s) out, {discarded} on unattached ports ({workers} workers)");
    print!("{}", stats_text(&vs)?);
    Ok(())
}

/// Every input packet in timestamp order through the switch, in batches of up to 32
/// ([`crate::cmd_run::RxBatch`]: pcap files mapped in place, live ports what is ready after
/// one blocking receive) under one lock per batch, the outputs' buffers given back once per
/// batch. On files (`whole` false) each packet of a batch runs on its own and its outputs
/// carry its timestamp: the output files are exactly those of one packet at a time. On live
/// interfaces (`whole`), which ignore output timestamps, the batch runs as one
/// [`VirtSwitch::process_batch`] (a chain hop by hop: order kept per flow, crate README
/// "Order") and leaves with one `send_all`. With P4Runtime, CPU-port frames and digests go
/// to the controllers after each batch, and packet-out traffic (when not sent by a thread of
/// its own) leaves before each batch. Returns (packets in, frames written, frames for
/// unattached ports).
fn pump(
    shared: &Mutex<VirtSwitch>,
    ports: &mut dyn PortIo,
    p4rt: Option<&tern_virt::VirtP4rt>,
    packet_outs: Option<&PacketOuts>,
    whole: bool,
) -> anyhow::Result<(u64, u64, u64)> {
    use crate::cmd_run::{RxBatch, RUN_BATCH};
    let (mut n, mut sent, mut discarded) = (0u64, 0, 0);
    let mut rx = RxBatch::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    // `ends[i]`: the end of packet i's outputs in `out` (files).
    let mut ends: Vec<usize> = Vec::with_capacity(RUN_BATCH);
    while rx.next(ports)? {
        let first_ts = rx.metas().next().map_or(0, |m| m.ts_ns);
        for o in packet_outs.map(|p| p.drain()).unwrap_or_default() {
            if ports.send(o.port, first_ts, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
            }
        }
        let before = n;
        n += rx.len() as u64;
        // Locked per batch: the tenants' control servers get in between batches.
        let mut vs = shared.lock().unwrap_or_else(|e| e.into_inner());
        if n / 1024 != before / 1024 {
            // Digests nobody listens for (learning programs) are dropped, not hoarded.
            for id in vs.device_ids() {
                let _ = vs.take_digests(Caller::Operator, id);
            }
        }
        ends.clear();
        let io: &dyn PortIo = ports;
        if whole {
            let mut batch: [(tern_runtime::Port, &[u8]); RUN_BATCH] = [(0, &[]); RUN_BATCH];
            let mut k = 0;
            for (slot, (m, data)) in batch.iter_mut().zip(rx.frames(io)) {
                *slot = (m.port, data);
                k += 1;
            }
            vs.process_batch(&batch[..k], &mut out);
            let (s, d) = ports.send_all(first_ts, &out)?;
            sent += s;
            discarded += d;
        } else {
            for (m, data) in rx.frames(io) {
                vs.process_batch(&[(m.port, data)], &mut out);
                ends.push(out.len());
            }
            let mut first = 0;
            for (m, &end) in rx.metas().zip(&ends) {
                let (s, d) = ports.send_all(m.ts_ns, &out[first..end])?;
                sent += s;
                discarded += d;
                first = end;
            }
        }
        vs.recycle_outputs(&mut out);
        drop(vs);
        if let Some(p) = p4rt {
            p.deliver();
        }
    }
    Ok((n, sent, discarded))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tern_ports::{PcapReader, PcapWriter, WriterConfig};

    const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../");

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
        let f = std::fs::File::create(path).unwrap();
        let mut w = PcapWriter::new(f, WriterConfig::bmv2()).unwrap();
        for (i, fr) in frames.iter().enumerate() {
            w.write_packet(1_000 * (i as u64 + 1), fr).unwrap();
        }
    }

    fn read_pcap(path: &Path) -> Vec<Vec<u8>> {
        let f = std::fs::File::open(path).unwrap();
        let mut r = PcapReader::new(std::io::BufReader::new(f)).unwrap();
        let mut v = Vec::new();
        while let Some(p) = r.next_packet().unwrap() {
            v.push(p.data.to_vec());
        }
        v
    }

    /// Two tenants on one tern: non-IPv4 frames on port 1 go through device 1 (basic.p4,
    /// frames leave on its port 0) to physical port 2; port 3's go through device 2 to port 4.
    #[test]
    fn virt_run_on_pcap_files() {
        let dir = tern_fixtures::scratch("virt-run");
        let cfg = format!(
            r#"{{ "devices": [
                {{ "id": 1, "program": "{ROOT}p4/tutorials/basic.p4", "ports": {{ "0": "phys:2" }},
                   "thrift_port": 0 }},
                {{ "id": 2, "program": "{ROOT}p4/tutorials/basic.p4", "ports": {{ "0": "phys:4" }} }} ],
              "rules": [ {{ "port": 1, "device": 1 }}, {{ "port": 3, "device": 2 }} ],
              "p4runtime": {{ "addr": "127.0.0.1:0" }} }}"#
        );
        std::fs::write(dir.join("virt.json"), cfg).unwrap();
        let frame = |b: u8| {
            let mut f = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 0x86, 0xdd];
            f.extend_from_slice(&[b; 20]);
            f
        };
        write_pcap(&dir.join("p1_in.pcap"), &[frame(1), frame(2)]);
        write_pcap(&dir.join("p3_in.pcap"), &[frame(3)]);
        for p in ["p2", "p4"] {
            write_pcap(&dir.join(format!("{p}_in.pcap")), &[]);
        }
        for workers in [0, 2] {
            run_files(RunArgs {
                config: dir.join("virt.json"),
                interfaces: ["1@p1", "2@p2", "3@p3", "4@p4"]
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
                pcap_dir: dir.to_path_buf(),
                live: false,
                admin: None,
                snapshot: None,
                wait: 0,
                workers,
                grpc_addr: None,
                worker_slice_us: None,
                thrift_max_connections: 64,
            })
            .unwrap();
            assert_eq!(
                read_pcap(&dir.join("p2_out.pcap")),
                vec![frame(1), frame(2)],
                "{workers} workers"
            );
            assert_eq!(read_pcap(&dir.join("p4_out.pcap")), vec![frame(3)]);
            assert!(read_pcap(&dir.join("p1_out.pcap")).is_empty());
        }
        // A bad config is a clear error naming the file and the place.
        std::fs::write(dir.join("bad.json"), r#"{"devices": [{"id": 1}]}"#).unwrap();
        let e = build(&dir.join("bad.json")).unwrap_err().to_string();
        assert!(e.contains("bad.json") && e.contains("devices[0]"), "{e}");
    }

    /// `pump` feeds the switch in batches: 800 frames of many flows (TCP and UDP, some the
    /// firewall drops, hosts on both sides) through HyPer4's Example 1 phase B chain (L2 → FW
    /// → L2 over links) give on every port exactly the frames and timestamps of one packet at
    /// a time; fed as whole batches (live ports) every port gets the same frames.
    #[test]
    fn pump_batches_give_the_outputs_of_one_at_a_time() {
        let dir = tern_fixtures::scratch("virt-pump");
        let cfg = Path::new(ROOT).join("p4/virt/scenarios/ex1/virt.json");
        let specs: Vec<PortSpec> = ["1@p1", "2@p2", "3@p3", "4@p4"]
            .iter()
            .map(|s| PortSpec::parse(s).unwrap())
            .collect();
        // (timestamp, port, frame), per port in timestamp order.
        let mut inputs: Vec<(u64, u32, Vec<u8>)> = Vec::new();
        let mut seed = 7u32;
        let mut rand = |n: u32| {
            seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (seed >> 16) % n
        };
        for i in 0..200u64 {
            for port in 1..=4u32 {
                let dst = [1u8, 2, 3, 4, 0x0a][rand(5) as usize];
                let mut f = vec![0, 0, 0, 0, 0, dst, 0, 0, 0, 0, 0, port as u8, 8, 0];
                let udp = rand(3) == 0;
                let (sport, dport) = (
                    [1234u16, 4000, 5001][rand(3) as usize],
                    [5001u16, 5000, 80][rand(3) as usize],
                );
                f.extend_from_slice(&[0x45, 0, 0, 60, 0, 1, 0x40, 0, 64]);
                f.push(if udp { 17 } else { 6 });
                f.extend_from_slice(&[0, 0, 10, 0, 0, port as u8, 10, 0, 1, dst]);
                f.extend_from_slice(&sport.to_be_bytes());
                f.extend_from_slice(&dport.to_be_bytes());
                f.extend_from_slice(&[i as u8; 36]);
                // Ports 1 and 3 share timestamps (ties: lower port first).
                inputs.push((1_000 * (3 * i + u64::from(port % 2)), port, f));
            }
        }
        for (n, spec) in specs.iter().enumerate() {
            let frames: Vec<(u64, &Vec<u8>)> = inputs
                .iter()
                .filter(|x| x.1 == spec.port)
                .map(|x| (x.0, &x.2))
                .collect();
            let f = std::fs::File::create(dir.join(format!("p{}_in.pcap", n + 1))).unwrap();
            let mut w = PcapWriter::new(f, WriterConfig::bmv2()).unwrap();
            for (ts, fr) in frames {
                w.write_packet(ts, fr).unwrap();
            }
        }
        // One packet at a time, in timestamp order: (port, timestamp, frame) out.
        let mut order = inputs.clone();
        order.sort_by_key(|x| (x.0, x.1));
        let (mut vs, _, _) = build_cfg(&cfg).unwrap();
        vs.activate_snapshot("B").unwrap();
        let mut expect: Vec<Vec<(u64, Vec<u8>)>> = vec![Vec::new(); 5];
        let mut out = Vec::new();
        for (ts, port, f) in &order {
            vs.process_batch(&[(*port, f)], &mut out);
            for o in &out {
                expect[o.port as usize].push((*ts, o.data.clone()));
            }
            vs.recycle_outputs(&mut out);
        }
        assert!(
            expect[1..].iter().all(|v| v.len() > 50),
            "every port gets frames"
        );
        for whole in [false, true] {
            let (vs, _, _) = build_cfg(&cfg).unwrap();
            let shared = Mutex::new(vs);
            shared.lock().unwrap().activate_snapshot("B").unwrap();
            let mut ports = FilePorts::open(&dir, &specs).unwrap();
            let (n, sent, discarded) = pump(&shared, &mut ports, None, None, whole).unwrap();
            ports.flush().unwrap();
            drop(ports);
            assert_eq!(n, 800);
            assert_eq!(discarded, 0);
            assert_eq!(sent as usize, expect.iter().map(Vec::len).sum::<usize>());
            for (k, want) in expect.iter().enumerate().skip(1) {
                let f = std::fs::File::open(dir.join(format!("p{k}_out.pcap"))).unwrap();
                let mut r = PcapReader::new(std::io::BufReader::new(f)).unwrap();
                let mut got = Vec::new();
                while let Some(p) = r.next_packet().unwrap() {
                    got.push((p.ts_ns, p.data.to_vec()));
                }
                if whole {
                    let mut a: Vec<&Vec<u8>> = got.iter().map(|x| &x.1).collect();
                    let mut b: Vec<&Vec<u8>> = want.iter().map(|x| &x.1).collect();
                    a.sort();
                    b.sort();
                    assert_eq!(a, b, "port {k}, whole batches");
                } else {
                    assert!(got == *want, "port {k}: not the frames of one at a time");
                }
            }
        }
    }

    /// A device's `thrift_port` serves BMv2's Thrift API for that device only: entries added
    /// over the wire forward that tenant's packets.
    #[test]
    fn thrift_port_serves_one_device() {
        use tern_runtime::{MatchParam, Runtime};
        let dir = tern_fixtures::scratch("virt-thrift");
        let cfg = format!(
            r#"{{ "devices": [
                {{ "id": 1, "program": "{ROOT}p4/tutorials/basic.p4", "owner": "alice",
                   "thrift_port": 0, "ports": {{ "2": "phys:2" }} }},
                {{ "id": 2, "program": "{ROOT}p4/tutorials/basic.p4" }} ],
              "rules": [ {{ "port": 1, "device": 1 }} ] }}"#
        );
        std::fs::write(dir.join("virt.json"), cfg).unwrap();
        let (vs, _, cfg) = build_cfg(&dir.join("virt.json")).unwrap();
        let shared = Arc::new(Mutex::new(vs));
        // At most two connections at once (`--thrift-max-connections 2`).
        let addrs =
            start_servers(&tern_virt::Shared::Locked(Arc::clone(&shared)), &cfg, 2).unwrap();
        assert_eq!(addrs.len(), 1);
        let port = addrs[0].1.addr().port();
        let mut c = tern_thrift::ThriftRuntime::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(c.switch_info().device_id, 1);
        let c2 = tern_thrift::ThriftRuntime::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(c2.switch_info().device_id, 1);
        let mut extra = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        extra
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let got = std::io::Read::read(&mut extra, &mut [0u8; 1]);
        assert!(
            matches!(&got, Ok(0))
                || got
                    .as_ref()
                    .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
            "the third connection is closed at once: {got:?}"
        );
        assert_eq!(addrs[0].1.refused(), 1);
        drop(c2);
        c.mt_add_entry(
            "MyIngress.ipv4_lpm",
            &[MatchParam::Lpm {
                key: vec![10, 0, 2, 2],
                prefix_len: 32,
            }],
            "MyIngress.ipv4_forward",
            &[vec![8, 0, 0, 0, 2, 0x22], vec![0, 2]],
            None,
        )
        .unwrap();
        let mut pkt = vec![0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 8, 0];
        pkt.extend_from_slice(&[
            0x45, 0, 0, 0x14, 0, 1, 0, 0, 0x40, 6, 0, 0, 10, 0, 1, 1, 10, 0, 2, 2,
        ]);
        let mut out = Vec::new();
        let mut vs = shared.lock().unwrap();
        vs.process_batch(&[(1, &pkt)], &mut out);
        assert_eq!(out.len(), 1);
        assert_eq!(
            (out[0].port, &out[0].data[..6]),
            (2, &[8, 0, 0, 0, 2, 0x22][..])
        );
        let n = vs
            .runtime(Caller::Operator, 2)
            .unwrap()
            .mt_get_num_entries("MyIngress.ipv4_lpm")
            .unwrap();
        assert_eq!(n, 0);
    }

    /// The operator's admin socket: snapshots switched by name (with the switch time), a
    /// bad name or command is an error answer, counters; the socket file goes with the run.
    #[test]
    fn admin_socket_switches_snapshots() {
        let dir = tern_fixtures::scratch("virt-admin");
        let path = Path::new(ROOT).join("p4/virt/example2/virt.json");
        let (vs, _, cfg) = build_cfg(&path).unwrap();
        let shared = Arc::new(Mutex::new(vs));
        let sock = dir.join("admin.sock");
        let control = Control::new(
            Front::One(Arc::clone(&shared)),
            None,
            Vec::new(),
            cfg,
            config_base(&path),
        );
        let admin = AdminSocket::start(&sock, Arc::new(control)).unwrap();
        let a = ctl(&sock, &words("snapshot l2-only")).unwrap();
        assert!(
            a.starts_with("ok snapshot l2-only active (switched in "),
            "{a}"
        );
        assert_eq!(shared.lock().unwrap().topology().rules.len(), 2);
        let a = ctl(&sock, &words("snapshot nope")).unwrap();
        assert!(a.starts_with("error: snapshot nope"), "{a}");
        let a = ctl(&sock, &words("stats")).unwrap();
        assert!(a.starts_with("ok\n") && a.contains("device 3: in 0"), "{a}");
        assert_eq!(ctl(&sock, &words("devices")).unwrap(), "ok 1 2 3\n");
        assert!(ctl(&sock, &words("reboot"))
            .unwrap()
            .starts_with("error: unknown command"));
        drop(admin);
        assert!(!sock.exists());
        let e = ctl(&sock, &words("stats")).unwrap_err().to_string();
        assert!(e.contains("cannot connect to the admin socket"), "{e}");
    }

    /// The config's `p4runtime` serves every device under its own id; a tenant's token
    /// reaches its device, another tenant's device answers like a missing one.
    #[test]
    #[allow(clippy::result_large_err)]
    fn p4runtime_serves_each_device_to_its_tenant() {
        use tern_p4rt::proto::p4::v1 as p4;
        let dir = tern_fixtures::scratch("virt-p4rt");
        let cfg = format!(
            r#"{{ "devices": [
                {{ "id": 1, "program": "{ROOT}p4/virt/l2_switch.p4", "owner": "alice",
                   "roles": {{ "learner": {{ "entities": ["L2Ingress.smac"], "packet_in": true }} }} }},
                {{ "id": 2, "program": "{ROOT}p4/virt/router.p4", "owner": "bob" }} ],
              "p4runtime": {{ "addr": "127.0.0.1:0",
                             "tokens": {{ "alice": "tok-a", "bob": "tok-b" }} }} }}"#
        );
        std::fs::write(dir.join("virt.json"), cfg).unwrap();
        let (vs, _, cfg) = build_cfg(&dir.join("virt.json")).unwrap();
        let shared = Arc::new(Mutex::new(vs));
        let g = start_p4runtime(&Arc::clone(&shared).into(), &cfg, None)
            .unwrap()
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let get = |tok: &'static str, device_id: u64| {
            rt.block_on(async {
                let ch = tonic::transport::Channel::from_shared(format!("http://{}", g.addr))
                    .unwrap()
                    .connect()
                    .await
                    .unwrap();
                let mut c =
                    tern_p4rt::proto::p4::v1::p4_runtime_client::P4RuntimeClient::with_interceptor(
                        ch,
                        move |mut r: tonic::Request<()>| {
                            r.metadata_mut()
                                .insert("authorization", format!("Bearer {tok}").parse().unwrap());
                            Ok(r)
                        },
                    );
                c.get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
                    device_id,
                    response_type: 0,
                })
                .await
                .map(|r| {
                    let info = r.into_inner().config.unwrap().p4info.unwrap();
                    info.tables
                        .iter()
                        .map(|t| t.preamble.as_ref().unwrap().name.clone())
                        .collect::<Vec<_>>()
                })
            })
        };
        let has = |v: Vec<String>, t: &str| v.iter().any(|n| n.ends_with(t));
        assert!(has(get("tok-a", 1).unwrap(), ".smac"));
        assert!(has(get("tok-b", 2).unwrap(), ".ipv4_lpm"));
        for (tok, id) in [("tok-a", 2), ("tok-b", 1)] {
            let e = get(tok, id).unwrap_err();
            assert_eq!(
                (e.code(), e.message()),
                (
                    tonic::Code::NotFound,
                    format!("Invalid device id {id}").as_str()
                )
            );
        }
        let e = get("tok-x", 1).unwrap_err();
        assert_eq!(e.code(), tonic::Code::Unauthenticated);
        // Roles and tokens are checked when the file is read.
        let bad = r#"{ "devices": [ { "id": 1, "program": "x.json",
                        "roles": { "r": { "tables": [] } } } ] }"#;
        let e = Config::parse(bad, "bad.json").unwrap_err().to_string();
        assert!(
            e.contains("devices[0].roles.\"r\"") && e.contains("unknown key 'tables'"),
            "{e}"
        );
    }

    /// L2 frame: destination MAC 0a:00:00:00:00:DST, source ..:SRC, a sequence number.
    fn l2_frame(dst: u8, src: u8, seq: u8) -> Vec<u8> {
        let mut f = vec![
            0x0a, 0, 0, 0, 0, dst, 0x0a, 0, 0, 0, 0, src, 0x08, 0x00, seq,
        ];
        f.extend_from_slice(&[0u8; 45]);
        f
    }

    /// GetForwardingPipelineConfig with a token: the P4Info's table names, or the status.
    #[allow(clippy::result_large_err)]
    fn p4rt_tables(
        addr: std::net::SocketAddr,
        tok: &'static str,
        id: u64,
    ) -> Result<Vec<String>, tonic::Status> {
        use tern_p4rt::proto::p4::v1 as p4;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let ch = tonic::transport::Channel::from_shared(format!("http://{addr}"))
                .unwrap()
                .connect()
                .await
                .unwrap();
            let mut c = p4::p4_runtime_client::P4RuntimeClient::with_interceptor(
                ch,
                move |mut r: tonic::Request<()>| {
                    r.metadata_mut()
                        .insert("authorization", format!("Bearer {tok}").parse().unwrap());
                    Ok(r)
                },
            );
            c.get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
                device_id: id,
                response_type: 0,
            })
            .await
            .map(|r| {
                r.into_inner()
                    .config
                    .unwrap()
                    .p4info
                    .unwrap()
                    .tables
                    .iter()
                    .map(|t| t.preamble.as_ref().unwrap().name.clone())
                    .collect()
            })
        })
    }

    /// The operator's commands over the admin socket with the devices on two workers, and
    /// P4Runtime and Thrift following them: a device added live (served at once to its
    /// tenant's token, its Thrift server started), mapped, classified, its quota changed
    /// (enforced over Thrift), replaced (entries carried), rules added and deleted, removed
    /// (NOT_FOUND); clear errors for bad commands; then `reload` of an edited config applies
    /// the difference (a device removed, one added with its command file and its tenant's
    /// token, quotas changed, a program replaced) with traffic checked after each step.
    #[test]
    fn admin_commands_and_reload_with_workers() {
        use tern_runtime::Runtime;
        let dir = tern_fixtures::scratch("virt-admin-workers");
        let l2 = format!("{ROOT}p4/virt/l2_switch.p4");
        let write_cfg = |name: &str, devices: &str, rules: &str| {
            let text = format!(
                r#"{{ "devices": [ {devices} ], "rules": [ {rules} ],
                  "p4runtime": {{ "addr": "127.0.0.1:0",
                                 "tokens": {{ "alice": "tok-a", "bob": "tok-b" }} }} }}"#
            );
            std::fs::write(dir.join(name), text).unwrap();
            dir.join(name)
        };
        let dev1 = format!(
            r#"{{ "id": 1, "program": "{l2}", "owner": "alice", "commands": "d1.txt",
                 "ports": {{ "1": "phys:1", "2": "phys:2" }} }}"#
        );
        let dev2 = format!(
            r#"{{ "id": 2, "program": "{l2}", "owner": "bob", "ports": {{ "3": "phys:3" }} }}"#
        );
        std::fs::write(
            dir.join("d1.txt"),
            "table_add L2Ingress.dmac forward 0x0a0000000002 => 2
             table_add L2Ingress.smac known 0x0a0000000001 =>
",
        )
        .unwrap();
        let a = write_cfg(
            "a.json",
            &format!("{dev1}, {dev2}"),
            r#"{ "port": 1, "device": 1 }, { "port": 3, "device": 2 }"#,
        );
        let (vs, _, cfg) = build_cfg(&a).unwrap();
        let front = Front::workers(tern_virt::VirtWorkers::new(
            vs,
            tern_virt::WorkerOptions {
                workers: 2,
                ..Default::default()
            },
        ));
        let shared = front.shared();
        let grpc = start_p4runtime(&shared, &cfg, None).unwrap().unwrap();
        let control = Arc::new(Control::new(
            front.clone(),
            Some(Arc::clone(&grpc.p4rt)),
            start_servers(&shared, &cfg, tern_thrift::DEFAULT_MAX_CONNECTIONS).unwrap(),
            cfg,
            dir.to_path_buf(),
        ));
        let sock = dir.join("admin.sock");
        let _admin = AdminSocket::start(&sock, Arc::clone(&control)).unwrap();
        let ok = |cmd: &str| {
            let a = ctl(&sock, &words(cmd)).unwrap();
            assert!(a.starts_with("ok"), "{cmd}: {a}");
            a
        };
        let err = |cmd: &str| {
            let a = ctl(&sock, &words(cmd)).unwrap();
            assert!(a.starts_with("error: "), "{cmd}: {a}");
            a
        };
        // Traffic through the workers: (port, frame) in, (port, frame) out.
        let send = |port: u32, f: &[u8]| -> Vec<(u32, Vec<u8>)> {
            front.with(|_| ()).expect("running");
            let Front::Workers(pool, _) = &front else {
                unreachable!()
            };
            let mut g = pool.lock().unwrap();
            let mut out = Vec::new();
            g.as_mut().unwrap().process_batch(&[(port, f)], &mut out);
            out.into_iter().map(|o| (o.port, o.data)).collect()
        };
        assert_eq!(send(1, &l2_frame(2, 1, 0)), vec![(2, l2_frame(2, 1, 0))]);
        assert_eq!(ok("devices"), "ok 1 2\n");

        // add: served at once over P4Runtime to alice (not bob) and over Thrift.
        assert!(p4rt_tables(grpc.addr, "tok-a", 3).is_err());
        let a = ok(&format!(
            "add 3 {l2} owner=alice thrift_port=0 max_entries=5"
        ));
        assert!(
            a.contains("Thrift on") && a.contains("P4Runtime device id 3"),
            "{a}"
        );
        assert!(p4rt_tables(grpc.addr, "tok-a", 3)
            .unwrap()
            .iter()
            .any(|t| t.ends_with(".dmac")));
        assert_eq!(
            p4rt_tables(grpc.addr, "tok-b", 3).unwrap_err().code(),
            tonic::Code::NotFound
        );
        let thrift3 = control
            .thrift_addrs()
            .iter()
            .find(|(d, _)| *d == 3)
            .unwrap()
            .1;
        let mut t3 = tern_thrift::ThriftRuntime::connect(("127.0.0.1", thrift3.port())).unwrap();
        let program = tern_model::load(&t3.get_config()).unwrap();
        let mut cli = tern_control::Cli::new(&program);
        let out = cli.execute(
            &mut t3,
            "table_add L2Ingress.dmac forward 0x0a0000000002 => 1",
        );
        assert!(!cli.last_command_failed(), "{out}");
        // link + rule: port 5 → device 3, its virtual port 1 → physical 6.
        assert!(ok("link 3 1 phys:6").contains("device 3 port 1 -> phys:6"));
        ok("rule add priority=5 port=5 device=3");
        assert_eq!(send(5, &l2_frame(2, 1, 1)), vec![(6, l2_frame(2, 1, 1))]);
        assert_eq!(ok("rules").lines().count(), 4, "3 rules");
        // quota: one entry more is refused over Thrift.
        assert!(ok("quota 3 max_entries=1").contains("max_entries 1,"));
        let out = cli.execute(
            &mut t3,
            "table_add L2Ingress.dmac forward 0x0a0000000003 => 1",
        );
        assert!(
            cli.last_command_failed() && out.contains("TABLE_FULL"),
            "{out}"
        );
        ok("quota 3 max_entries=none");
        assert!(ok("quota 3 max_parser_states=64").contains("max_parser_states 64"));
        assert!(err("quota 3 max_parser_states=0").contains("not in 1..=100000"));
        assert!(ok("quota 3 max_buffers=256").contains("max_buffers 256"));
        assert!(ok("quota 3 max_buffers=none").contains("max_buffers none"));
        assert!(err("quota 3 max_buffers=0").contains("not in 1..="));
        // replace: the entry is carried, the traffic goes on.
        assert!(ok(&format!("replace 3 {l2}")).contains("1 entries carried"));
        assert_eq!(send(5, &l2_frame(2, 1, 2)), vec![(6, l2_frame(2, 1, 2))]);
        ok("rule del 2");
        assert!(send(5, &l2_frame(2, 1, 3)).is_empty(), "unclassified now");
        // Rules in a batch: two added in one change, then both removed in one.
        assert_eq!(
            ok("rule add port=5 vlan=7 device=3 ; port=5 device=3").trim_end(),
            "ok 2 rules added"
        );
        assert_eq!(send(5, &l2_frame(2, 1, 4)), vec![(6, l2_frame(2, 1, 4))]);
        let n = ok("rules").lines().count() - 1;
        assert_eq!(
            ok(&format!("rule del {} {}", n - 2, n - 1)).trim_end(),
            "ok 2 rules removed"
        );
        assert!(send(5, &l2_frame(2, 1, 5)).is_empty(), "unclassified again");
        assert!(err("rule del 0 0").contains("rule 0 named twice"));
        // Errors say what is wrong.
        assert!(err("remove 9").contains("device 9 not found"));
        assert!(err("link 9 1 drop").contains("device 9 not found"));
        assert!(err("link 3 1 wire:2").contains("wire:2"));
        assert!(err("quota 3 max_fun=2").contains("unknown quota 'max_fun'"));
        assert!(err("rule add port=1").contains("missing 'device'"));
        assert!(err("rule del 7").contains("no rule 7"));
        assert!(err(&format!("add 1 {l2}")).contains("device 1 already exists"));
        assert!(err("add 4 /no/such.p4").contains("/no/such.p4"));
        assert!(err("add x y").contains("'x' is not a device id"));
        assert!(ok("help").contains("reload CONFIG"));
        // remove: P4Runtime answers NOT_FOUND, the others go on; the device's Thrift
        // listener is closed (a new connection is refused) and so is the open connection.
        ok("remove 3");
        assert_eq!(
            p4rt_tables(grpc.addr, "tok-a", 3).unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert!(control.thrift_addrs().iter().all(|(d, _)| *d != 3));
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", thrift3.port())).is_err(),
            "device 3's Thrift listener is closed"
        );
        assert!(
            t3.mt_get_num_entries("L2Ingress.dmac").is_err(),
            "the open connection is closed"
        );
        // Added again: a new listener, serving the new device (no entries).
        assert!(ok(&format!("add 3 {l2} owner=alice thrift_port=0")).contains("Thrift on"));
        let again = control
            .thrift_addrs()
            .iter()
            .find(|(d, _)| *d == 3)
            .unwrap()
            .1;
        let t3 = tern_thrift::ThriftRuntime::connect(("127.0.0.1", again.port())).unwrap();
        assert_eq!(t3.mt_get_num_entries("L2Ingress.dmac").unwrap(), 0);
        drop(t3);
        ok("remove 3");
        assert!(std::net::TcpStream::connect(("127.0.0.1", again.port())).is_err());
        assert_eq!(send(1, &l2_frame(2, 1, 4)), vec![(2, l2_frame(2, 1, 4))]);

        // reload: device 2 goes, device 4 (bob's, with a command file) comes, device 1's
        // quota changes.
        std::fs::write(
            dir.join("d4.txt"),
            "table_add L2Ingress.dmac forward 0x0a0000000009 => 8
",
        )
        .unwrap();
        let dev1q = dev1.replace(
            r#""owner": "alice","#,
            r#""owner": "alice", "quotas": { "max_entries": 50 },"#,
        );
        let dev4 = format!(
            r#"{{ "id": 4, "program": "{l2}", "owner": "bob", "commands": "d4.txt",
                 "thrift_port": 0, "ports": {{ "8": "phys:8" }} }}"#
        );
        let b = write_cfg(
            "b.json",
            &format!("{dev1q}, {dev4}"),
            r#"{ "port": 1, "device": 1 }, { "port": 7, "device": 4 }"#,
        );
        let a = ok(&format!("reload {}", b.display()));
        assert!(
            a.contains("added [4], removed [2], replaced [] (0 entries carried), reconfigured [1]"),
            "{a}"
        );
        assert_eq!(ok("devices"), "ok 1 4\n");
        assert!(p4rt_tables(grpc.addr, "tok-b", 4).is_ok());
        assert_eq!(
            p4rt_tables(grpc.addr, "tok-b", 2).unwrap_err().code(),
            tonic::Code::NotFound
        );
        assert_eq!(send(7, &l2_frame(9, 1, 5)), vec![(8, l2_frame(9, 1, 5))]);
        assert!(send(3, &l2_frame(2, 1, 6)).is_empty(), "device 2 is gone");
        let q = front
            .with(|op| op.device_config(1).unwrap().1.max_entries)
            .unwrap();
        assert_eq!(q, Some(50));
        // reload with device 1 on another program: replaced, its entries carried where the
        // tables match (none: the router has other tables), the traffic follows the router.
        let dev1r = dev1q
            .replace("l2_switch.p4", "router.p4")
            .replace(r#""commands": "d1.txt","#, "");
        let c = write_cfg(
            "c.json",
            &format!("{dev1r}, {dev4}"),
            r#"{ "port": 1, "device": 1 }, { "port": 7, "device": 4 }"#,
        );
        let a = ok(&format!("reload {}", c.display()));
        assert!(a.contains("replaced [1]"), "{a}");
        assert!(p4rt_tables(grpc.addr, "tok-a", 1)
            .unwrap()
            .iter()
            .any(|t| t.ends_with(".ipv4_lpm")));
        assert!(
            send(1, &l2_frame(2, 1, 7)).is_empty(),
            "the router drops non-IPv4"
        );
        // A bad config changes nothing and says where.
        std::fs::write(dir.join("bad.json"), r#"{ "devices": [ { "id": 1 } ] }"#).unwrap();
        let e = err(&format!("reload {}", dir.join("bad.json").display()));
        assert!(e.contains("bad.json") && e.contains("devices[0]"), "{e}");
        assert_eq!(ok("devices"), "ok 1 4\n");
        // A reload taking device 4's thrift_port away closes its listener; giving it back
        // opens a new one.
        let t4 = |c: &Control| c.thrift_addrs().iter().find(|(d, _)| *d == 4).map(|a| a.1);
        let old4 = t4(&control).unwrap();
        let dev4_quiet = dev4.replace(r#""thrift_port": 0,"#, "");
        let d = write_cfg(
            "d.json",
            &format!("{dev1r}, {dev4_quiet}"),
            r#"{ "port": 1, "device": 1 }, { "port": 7, "device": 4 }"#,
        );
        assert!(ok(&format!("reload {}", d.display())).contains("device 4 Thrift closed"));
        assert!(t4(&control).is_none());
        assert!(std::net::TcpStream::connect(("127.0.0.1", old4.port())).is_err());
        assert!(ok(&format!("reload {}", c.display())).contains("device 4 Thrift on"));
        let new4 = t4(&control).unwrap();
        let c4 = tern_thrift::ThriftRuntime::connect(("127.0.0.1", new4.port())).unwrap();
        assert_eq!(c4.switch_info().device_id, 4);
        let n = front.with(|op| op.program_json(4).unwrap().len()).unwrap();
        assert!(n > 0);
        let Front::Workers(pool, _) = &front else {
            unreachable!()
        };
        let vs = pool
            .lock()
            .unwrap()
            .take()
            .unwrap()
            .shutdown(&mut Vec::new());
        let mut vs = vs;
        assert_eq!(
            vs.runtime(Caller::Operator, 4)
                .unwrap()
                .mt_get_num_entries("L2Ingress.dmac")
                .unwrap(),
            1
        );
    }

    /// P4Runtime over TLS (`p4runtime.tls`, a throwaway certificate made with openssl):
    /// a client trusting the certificate reaches its tenant's device with its token, a wrong
    /// token is refused, a plain-text client gets nothing; a key that is not one stops the
    /// start-up naming the config.
    #[test]
    #[allow(clippy::result_large_err)]
    fn p4runtime_over_tls() {
        use tern_p4rt::proto::p4::v1 as p4;
        if std::process::Command::new("openssl")
            .arg("version")
            .output()
            .is_err()
        {
            eprintln!("skipping: needs openssl to make a throwaway certificate");
            return;
        }
        let dir = tern_fixtures::scratch("virt-p4rt-tls");
        // A throwaway CA and a server certificate for localhost / 127.0.0.1 signed by it.
        let openssl = |args: &[&str]| {
            let o = std::process::Command::new("openssl")
                .args(args)
                .current_dir(&dir)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        openssl(
            &[
                &["req", "-x509"][..],
                &ec,
                &["-days", "1", "-subj", "/CN=tern-test-ca"],
                &["-keyout", "ca.key", "-out", "ca.pem"],
            ]
            .concat(),
        );
        openssl(
            &[
                &["req"][..],
                &ec,
                &["-subj", "/CN=localhost"],
                &["-keyout", "key.pem", "-out", "srv.csr"],
            ]
            .concat(),
        );
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        openssl(&[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
            "-out",
            "cert.pem",
        ]);
        let write = |key: &str| {
            let cfg = format!(
                r#"{{ "devices": [
                    {{ "id": 1, "program": "{ROOT}p4/virt/l2_switch.p4", "owner": "alice" }} ],
                  "p4runtime": {{ "addr": "127.0.0.1:0", "tokens": {{ "alice": "tok-a" }},
                                 "tls": {{ "cert": "cert.pem", "key": "{key}" }} }} }}"#
            );
            std::fs::write(dir.join("virt.json"), cfg).unwrap();
            build_cfg(&dir.join("virt.json")).unwrap()
        };
        let (vs, _, cfg) = write("key.pem");
        let shared = Arc::new(Mutex::new(vs));
        let g = start_p4runtime(&Arc::clone(&shared).into(), &cfg, None)
            .unwrap()
            .unwrap();
        let ca = std::fs::read(dir.join("ca.pem")).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let get = |tls: bool, tok: &'static str| {
            rt.block_on(async {
                let ep = if tls {
                    tonic::transport::Channel::from_shared(format!("https://{}", g.addr))
                        .unwrap()
                        .tls_config(
                            tonic::transport::ClientTlsConfig::new()
                                .ca_certificate(tonic::transport::Certificate::from_pem(&ca))
                                .domain_name("localhost"),
                        )
                        .unwrap()
                } else {
                    tonic::transport::Channel::from_shared(format!("http://{}", g.addr)).unwrap()
                };
                let ch = ep
                    .connect_timeout(std::time::Duration::from_secs(5))
                    .timeout(std::time::Duration::from_secs(5))
                    .connect()
                    .await
                    .map_err(|e| tonic::Status::unavailable(format!("{e:?}")))?;
                let mut c = p4::p4_runtime_client::P4RuntimeClient::with_interceptor(
                    ch,
                    move |mut r: tonic::Request<()>| {
                        r.metadata_mut()
                            .insert("authorization", format!("Bearer {tok}").parse().unwrap());
                        Ok(r)
                    },
                );
                c.get_forwarding_pipeline_config(p4::GetForwardingPipelineConfigRequest {
                    device_id: 1,
                    response_type: 0,
                })
                .await
                .map(|r| r.into_inner().config.unwrap().p4info.unwrap().tables.len())
            })
        };
        assert!(get(true, "tok-a").unwrap() > 0);
        assert_eq!(
            get(true, "tok-x").unwrap_err().code(),
            tonic::Code::Unauthenticated
        );
        assert!(
            get(false, "tok-a").is_err(),
            "plain text reaches a TLS server"
        );
        // A key that is not a key: refused at start-up, naming the config.
        std::fs::write(dir.join("bad.pem"), "not a key\n").unwrap();
        let (vs, _, cfg) = write("bad.pem");
        let e = start_p4runtime(&Arc::new(Mutex::new(vs)).into(), &cfg, None)
            .err()
            .expect("a bad key is refused");
        let e = format!("{e:#}");
        assert!(
            e.contains("virt.json") && e.contains("p4runtime.tls"),
            "{e}"
        );
        // A missing file names itself.
        let (vs, _, mut cfg) = write("key.pem");
        cfg.p4runtime.as_mut().unwrap().tls = Some(("nope.pem".into(), "key.pem".into()));
        let e = start_p4runtime(&Arc::new(Mutex::new(vs)).into(), &cfg, None)
            .err()
            .expect("a missing certificate is refused");
        assert!(format!("{e:#}").contains("nope.pem"), "{e:#}");
    }

    /// `--live` on an interface that does not exist is a clear error naming it.
    #[test]
    fn live_port_that_does_not_exist() {
        let e = run_files(RunArgs {
            config: Path::new(ROOT).join("p4/virt/example2/virt.json"),
            interfaces: vec!["1@tern-no-such-if0".into()],
            pcap_dir: ".".into(),
            live: true,
            admin: None,
            snapshot: None,
            wait: 0,
            grpc_addr: None,
            workers: 0,
            worker_slice_us: None,
            thrift_max_connections: 64,
        })
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("tern-no-such-if0"), "{e}");
    }
}
