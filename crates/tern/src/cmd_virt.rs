//! `tern virt …`: many tenant devices in one tern (crate `tern-virt`). `tern virt run CONFIG`
//! builds the devices, classifier, links and snapshots of a configuration file and runs
//! them on pcap-file ports as `tern run --use-files` does (`-i P@NAME` reads
//! `NAME_in.pcap`, writes `NAME_out.pcap`), then prints every device's counters. Devices
//! with a `thrift_port` get their own BMv2 Thrift server (acting as the device's owner).

use std::sync::{Arc, Mutex};

use std::path::{Path, PathBuf};

use anyhow::Context;
use tern_ports::{FilePorts, PortIo, PortSpec};
use tern_runtime::OutputPacket;
use tern_virt::config::Config;
use tern_virt::{Caller, VirtSwitch};

/// `tern virt …`
#[derive(clap::Args)]
pub struct VirtArgs {
    #[command(subcommand)]
    command: VirtCommand,
}

#[derive(clap::Subcommand)]
enum VirtCommand {
    /// Run a virtualization config (devices, rules, links, quotas; see crates/tern-virt/README.md)
    /// on pcap-file ports.
    Run(RunArgs),
    /// Parse and build a config (programs loaded or compiled, command files run), then exit.
    Check(CheckArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The configuration file (JSON).
    config: PathBuf,
    /// Attach physical port PORT to NAME_in.pcap / NAME_out.pcap (repeatable).
    #[arg(short = 'i', long = "interface", value_name = "PORT@NAME")]
    interfaces: Vec<String>,
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
}

#[derive(clap::Args)]
struct CheckArgs {
    /// The configuration file (JSON).
    config: PathBuf,
}

pub fn run(args: VirtArgs) -> anyhow::Result<std::process::ExitCode> {
    match args.command {
        VirtCommand::Run(a) => run_files(a).map(|()| std::process::ExitCode::SUCCESS),
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
    let mut ports = FilePorts::open(&a.pcap_dir, &specs)
        .with_context(|| format!("opening the pcap ports in {}", a.pcap_dir.display()))?;
    let shared = Arc::new(Mutex::new(vs));
    start_servers(&shared, &cfg)?;
    if a.wait > 0 {
        std::thread::sleep(std::time::Duration::from_secs(a.wait));
    }
    let (packets, sent, discarded) = pump(&shared, &mut ports)?;
    ports.flush()?;
    let vs = shared.lock().unwrap_or_else(|e| e.into_inner());
    println!("{packets} packet(s) in, {sent} frame(s) out, {discarded} on unattached ports");
    let st = vs.stats();
    println!(
        "unclassified {}, dangling links {}",
        st.unclassified, st.dangling
    );
    for id in vs.device_ids() {
        let s = vs.device_stats(Caller::Operator, id)?;
        let q = vs.quarantine(Caller::Operator, id)?;
        println!(
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
        );
    }
    Ok(())
}

/// Every input packet in timestamp order through the switch; outputs carry the input's
/// timestamp. Returns (packets in, frames written, frames for unattached ports).
fn pump(shared: &Mutex<VirtSwitch>, ports: &mut dyn PortIo) -> anyhow::Result<(u64, u64, u64)> {
    let (mut n, mut sent, mut discarded) = (0, 0, 0);
    let mut buf = Vec::new();
    let mut out: Vec<OutputPacket> = Vec::new();
    while let Some(meta) = ports.recv(&mut buf)? {
        n += 1;
        // Locked per packet: the tenants' control servers get in between packets.
        let mut vs = shared.lock().unwrap_or_else(|e| e.into_inner());
        vs.process_batch(&[(meta.port, &buf)], &mut out);
        for o in &out {
            if ports.send(o.port, meta.ts_ns, &o.data)? {
                sent += 1;
            } else {
                discarded += 1;
            }
        }
        vs.recycle_outputs(&mut out);
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
        run_files(RunArgs {
            config: dir.join("virt.json"),
            interfaces: ["1@p1", "2@p2", "3@p3", "4@p4"]
                .iter()
                .map(|s| s.to_string())
                .collect(),
            pcap_dir: dir.to_path_buf(),
            snapshot: None,
            wait: 0,
        })
        .unwrap();
        assert_eq!(
            read_pcap(&dir.join("p2_out.pcap")),
            vec![frame(1), frame(2)]
        );
        assert_eq!(read_pcap(&dir.join("p4_out.pcap")), vec![frame(3)]);
        assert!(read_pcap(&dir.join("p1_out.pcap")).is_empty());
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
}
