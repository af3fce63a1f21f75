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

#[path = "cmd_virt_bench.rs"]
mod bench;
#[path = "cmd_virt_isolation.rs"]
mod isolation;

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
    /// answer: `snapshot NAME` (activate it, reports the switch time), `stats`, `devices`.
    Ctl(CtlArgs),
    /// HyPer4's penalty table on tern: tables, passes and entries per packet, native vs
    /// sliced, for the four functions and Example 1 B/C (`--timed` adds packet rates).
    Bench(bench::BenchArgs),
}

#[derive(clap::Args)]
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
    /// pcap-file ports only; not with per-device `thrift_port`s, `--admin` or `--live` yet.
    #[arg(long, default_value_t = 0, value_name = "N")]
    workers: usize,
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
            let answer = ctl(&a.socket, &a.command.join(" "))?;
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
    vs: &Arc<Mutex<VirtSwitch>>,
    cfg: &Config,
) -> anyhow::Result<Vec<(tern_virt::DeviceId, std::net::SocketAddr)>> {
    let mut addrs = Vec::new();
    for d in &cfg.devices {
        let Some(port) = d.thrift_port else { continue };
        let caller = match &d.owner {
            Some(o) => Caller::Tenant(o),
            None => Caller::Operator,
        };
        let handle = tern_virt::SharedDevice::new(Arc::clone(vs), caller, d.id)?;
        let (addr, _) = tern_thrift::spawn(("0.0.0.0", port), Arc::new(Mutex::new(handle)))
            .with_context(|| {
                format!(
                    "device {}: cannot start the Thrift server on port {port}",
                    d.id
                )
            })?;
        println!("device {}: Thrift server on {addr}", d.id);
        addrs.push((d.id, addr));
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
    if a.workers > 0 {
        if a.live {
            // The live ports' receive blocks: outputs would wait for the next arrival.
            anyhow::bail!(
                "--workers {} is for pcap-file ports only (not --live yet)",
                a.workers
            );
        }
        let p4rt =
            a.grpc_addr.is_some() || cfg.p4runtime.as_ref().is_some_and(|p| p.addr.is_some());
        if p4rt || a.admin.is_some() || cfg.devices.iter().any(|d| d.thrift_port.is_some()) {
            anyhow::bail!(
                "--workers {}: per-device thrift_port, P4Runtime and --admin need the switch \
                 on one thread (run without --workers)",
                a.workers
            );
        }
        return run_workers(vs, a.workers, ports.as_mut());
    }
    let shared = Arc::new(Mutex::new(vs));
    start_servers(&shared, &cfg)?;
    let grpc = start_p4runtime(&shared, &cfg, a.grpc_addr)?;
    let mut packet_outs = grpc.as_ref().map(|g| g.packet_outs.clone());
    if let (true, Some(rx)) = (a.live, packet_outs.take()) {
        // Live ports block in receive: packet-outs leave from a thread of their own.
        crate::cmd_run::spawn_packet_out_sender(&specs, rx.into_inner())?;
    }
    let _admin = match &a.admin {
        Some(path) => Some(AdminSocket::start(path, Arc::clone(&shared))?),
        None => None,
    };
    if a.wait > 0 {
        std::thread::sleep(std::time::Duration::from_secs(a.wait));
    }
    if a.live {
        eprintln!(
            "tern virt run: switching on {} (Ctrl-C or SIGTERM to stop)",
            specs
                .iter()
                .map(|s| format!("{}@{}", s.port, s.name))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let (packets, sent, discarded) = pump(
        &shared,
        ports.as_mut(),
        grpc.as_ref().map(|g| &*g.p4rt),
        packet_outs.as_ref(),
    )?;
    ports.flush()?;
    let vs = shared.lock().unwrap_or_else(|e| e.into_inner());
    println!("{packets} packet(s) in, {sent} frame(s) out, {discarded} on unattached ports");
    print!("{}", stats_text(&vs)?);
    Ok(())
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
    vs: &Arc<Mutex<VirtSwitch>>,
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
    let access = {
        let g = vs.lock().unwrap_or_else(|e| e.into_inner());
        tern_virt::tenant_access(&g, &pc.tokens, pc.operator_token.as_deref())
            .map_err(|e| anyhow::anyhow!("{}: p4runtime: {e}", cfg.file))?
    };
    let p4rt = Arc::new(tern_virt::VirtP4rt::new(Arc::clone(vs), &devices)?);
    let (tx, rx) = std::sync::mpsc::channel::<Vec<OutputPacket>>();
    p4rt.set_output_sink(Arc::new(move |outs| {
        let _ = tx.send(outs);
    }));
    let listener = std::net::TcpListener::bind(addr)
        .with_context(|| format!("cannot start the P4Runtime server on {addr}"))?;
    let bound = listener.local_addr()?;
    let (handles, tick) = (p4rt.handles(), p4rt.tick());
    std::thread::Builder::new()
        .name("p4runtime".into())
        .spawn(move || {
            if let Err(e) = tern_p4rt::serve_devices(listener, handles, access, Some(tick)) {
                eprintln!("P4Runtime server stopped: {e}");
            }
        })
        .context("starting the P4Runtime thread")?;
    println!(
        "P4Runtime on {bound}: device ids {}{}",
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

/// The running P4Runtime server of `tern virt run`.
struct Grpc {
    p4rt: Arc<tern_virt::VirtP4rt>,
    packet_outs: PacketOuts,
    #[cfg_attr(not(test), allow(dead_code))]
    addr: std::net::SocketAddr,
}

/// `tern virt run --workers N`: the devices over N worker threads; every input packet is
/// dispatched in order, outputs are written as the workers produce them (stamped with the
/// time of the latest input), the counters printed at the end.
fn run_workers(vs: VirtSwitch, workers: usize, ports: &mut dyn PortIo) -> anyhow::Result<()> {
    let mut pool = tern_virt::VirtWorkers::new(
        vs,
        tern_virt::WorkerOptions {
            workers,
            ..tern_virt::WorkerOptions::default()
        },
    );
    let (mut n, mut sent, mut discarded) = (0u64, 0u64, 0u64);
    let mut buf = Vec::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    let mut ts = 0;
    let mut write = |out: &mut Vec<OutputPacket>, ports: &mut dyn PortIo, ts| {
        for o in out.drain(..) {
            if ports.send(o.port, ts, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
            }
        }
        anyhow::Ok(())
    };
    while let Some(meta) = ports.recv(&mut buf)? {
        n += 1;
        ts = meta.ts_ns;
        pool.dispatch(&[(meta.port, &buf)]);
        if n % 65_536 == 0 {
            // Digests nobody listens for are dropped, not hoarded.
            for id in pool.device_ids() {
                let _ = pool.call(id, move |vs| vs.take_digests(Caller::Operator, id));
            }
        }
        pool.take_outputs(&mut out);
        write(&mut out, ports, ts)?;
    }
    let vs = pool.shutdown(&mut out);
    write(&mut out, ports, ts)?;
    ports.flush()?;
    println!("{n} packet(s) in, {sent} frame(s) out, {discarded} on unattached ports ({workers} workers)");
    print!("{}", stats_text(&vs)?);
    Ok(())
}

/// The switch's and every device's counters, one line each.
fn stats_text(vs: &VirtSwitch) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut t = String::new();
    let st = vs.stats();
    writeln!(
        t,
        "unclassified {}, dangling links {}",
        st.unclassified, st.dangling
    )?;
    for id in vs.device_ids() {
        let s = vs.device_stats(Caller::Operator, id)?;
        let q = vs.quarantine(Caller::Operator, id)?;
        writeln!(
            t,
            "device {id}: in {}, to ports {}, to links {}, to cpu {}, dropped {}, hop-cut {}, \
             panics {}, quarantine drops {}{}",
            s.packets_in,
            s.to_phys,
            s.to_links,
            s.to_cpu,
            s.dropped,
            s.hop_cut,
            s.panics,
            s.quarantine_drops,
            q.map(|w| format!(" (QUARANTINED: {w})"))
                .unwrap_or_default()
        )?;
    }
    Ok(t)
}

/// The operator's line interface of a running `tern virt run`: a Unix socket; each line is a
/// command, each answer ends with an empty line. Commands run between packets (they take the
/// switch lock), so switching a snapshot loses nothing. The socket file goes with the value.
struct AdminSocket {
    path: PathBuf,
}

impl AdminSocket {
    fn start(path: &Path, vs: Arc<Mutex<VirtSwitch>>) -> anyhow::Result<AdminSocket> {
        use std::os::unix::fs::FileTypeExt;
        // A socket file left by a run that was killed is replaced; anything else is an error.
        if let Ok(m) = std::fs::symlink_metadata(path) {
            if m.file_type().is_socket() {
                std::fs::remove_file(path).with_context(|| {
                    format!("removing the stale admin socket {}", path.display())
                })?;
            } else {
                anyhow::bail!(
                    "--admin {}: the file exists and is not a socket",
                    path.display()
                );
            }
        }
        let listener = std::os::unix::net::UnixListener::bind(path)
            .with_context(|| format!("--admin: cannot listen on {}", path.display()))?;
        std::thread::Builder::new()
            .name("virt-admin".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let vs = Arc::clone(&vs);
                    std::thread::spawn(move || admin_session(conn, &vs));
                }
            })
            .context("starting the admin thread")?;
        println!("admin socket on {}", path.display());
        Ok(AdminSocket {
            path: path.to_path_buf(),
        })
    }
}

impl Drop for AdminSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

fn admin_session(conn: std::os::unix::net::UnixStream, vs: &Mutex<VirtSwitch>) {
    use std::io::{BufRead, Write};
    let Ok(read) = conn.try_clone() else { return };
    let mut w = conn;
    for line in std::io::BufReader::new(read).lines() {
        let Ok(line) = line else { return };
        let answer = admin_command(vs, line.trim());
        if w.write_all(format!("{answer}\n").as_bytes()).is_err() {
            return;
        }
    }
}

/// One operator command; the answer starts with `ok` or `error` (possibly several lines,
/// always ending with a newline).
fn admin_command(vs: &Mutex<VirtSwitch>, line: &str) -> String {
    let words: Vec<&str> = line.split_whitespace().collect();
    let mut vs = vs.lock().unwrap_or_else(|e| e.into_inner());
    match words.as_slice() {
        ["snapshot", name] => {
            let t = std::time::Instant::now();
            match vs.activate_snapshot(name) {
                Ok(()) => format!(
                    "ok snapshot {name} active (switched in {} us)\n",
                    t.elapsed().as_micros()
                ),
                Err(e) => format!("error: snapshot {name}: {e}\n"),
            }
        }
        ["stats"] => match stats_text(&vs) {
            Ok(t) => format!("ok\n{t}"),
            Err(e) => format!("error: {e:#}\n"),
        },
        ["devices"] => format!(
            "ok {}\n",
            vs.device_ids()
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(" ")
        ),
        _ => format!("error: unknown command '{line}' (snapshot NAME | stats | devices)\n"),
    }
}

/// `tern virt ctl`: send one command line, return the answer (up to its empty line).
fn ctl(socket: &Path, line: &str) -> anyhow::Result<String> {
    use std::io::{BufRead, Write};
    let mut s = std::os::unix::net::UnixStream::connect(socket).with_context(|| {
        format!(
            "cannot connect to the admin socket {} (is `tern virt run --admin` running?)",
            socket.display()
        )
    })?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))?;
    s.write_all(format!("{line}\n").as_bytes())?;
    let mut answer = String::new();
    for l in std::io::BufReader::new(s).lines() {
        let l = l.context("reading the answer")?;
        if l.is_empty() {
            break;
        }
        answer.push_str(&l);
        answer.push('\n');
    }
    Ok(answer)
}

/// Every input packet in timestamp order through the switch; outputs carry the input's
/// timestamp. With P4Runtime, CPU-port frames and digests go to the controllers after each
/// packet, and packet-out traffic (when not sent by a thread of its own) leaves between
/// packets. Returns (packets in, frames written, frames for unattached ports).
fn pump(
    shared: &Mutex<VirtSwitch>,
    ports: &mut dyn PortIo,
    p4rt: Option<&tern_virt::VirtP4rt>,
    packet_outs: Option<&PacketOuts>,
) -> anyhow::Result<(u64, u64, u64)> {
    let (mut n, mut sent, mut discarded) = (0u64, 0, 0);
    let mut buf = Vec::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    while let Some(meta) = ports.recv(&mut buf)? {
        n += 1;
        for o in packet_outs.map(|p| p.drain()).unwrap_or_default() {
            if ports.send(o.port, meta.ts_ns, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
            }
        }
        // Locked per packet: the tenants' control servers get in between packets.
        let mut vs = shared.lock().unwrap_or_else(|e| e.into_inner());
        if n % 1024 == 0 {
            // Digests nobody listens for (learning programs) are dropped, not hoarded.
            for id in vs.device_ids() {
                let _ = vs.take_digests(Caller::Operator, id);
            }
        }
        vs.process_batch(&[(meta.port, &buf)], &mut out);
        for o in &out {
            if ports.send(o.port, meta.ts_ns, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
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
                {{ "id": 1, "program": "{ROOT}p4/tutorials/basic.p4", "ports": {{ "0": "phys:2" }} }},
                {{ "id": 2, "program": "{ROOT}p4/tutorials/basic.p4", "ports": {{ "0": "phys:4" }} }} ],
              "rules": [ {{ "port": 1, "device": 1 }}, {{ "port": 3, "device": 2 }} ] }}"#
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
        let addrs = start_servers(&shared, &cfg).unwrap();
        assert_eq!(addrs.len(), 1);
        let port = addrs[0].1.port();
        let mut c = tern_thrift::ThriftRuntime::connect(("127.0.0.1", port)).unwrap();
        assert_eq!(c.switch_info().device_id, 1);
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
        let (vs, _, _) = build_cfg(&Path::new(ROOT).join("p4/virt/example2/virt.json")).unwrap();
        let shared = Arc::new(Mutex::new(vs));
        let sock = dir.join("admin.sock");
        let admin = AdminSocket::start(&sock, Arc::clone(&shared)).unwrap();
        let a = ctl(&sock, "snapshot l2-only").unwrap();
        assert!(
            a.starts_with("ok snapshot l2-only active (switched in "),
            "{a}"
        );
        assert_eq!(shared.lock().unwrap().topology().rules.len(), 2);
        let a = ctl(&sock, "snapshot nope").unwrap();
        assert!(a.starts_with("error: snapshot nope"), "{a}");
        let a = ctl(&sock, "stats").unwrap();
        assert!(a.starts_with("ok\n") && a.contains("device 3: in 0"), "{a}");
        assert_eq!(ctl(&sock, "devices").unwrap(), "ok 1 2 3\n");
        assert!(ctl(&sock, "reboot")
            .unwrap()
            .starts_with("error: unknown command"));
        drop(admin);
        assert!(!sock.exists());
        let e = ctl(&sock, "stats").unwrap_err().to_string();
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
        let g = start_p4runtime(&shared, &cfg, None).unwrap().unwrap();
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
        })
        .unwrap_err();
        let e = format!("{e:#}");
        assert!(e.contains("tern-no-such-if0"), "{e}");
    }
}
