//! A zero-work forwarder: every frame received on one interface is sent out of the other,
//! through the same I/O layer `tern run` uses — [`LivePorts`] (default RX ring, `sendmmsg` TX
//! batches, PACKET_QDISC_BYPASS) or, with `TERN_IO=xdp`, [`XdpPorts`] (AF_XDP) — and the same
//! batching as `tern run`'s loop (one blocking receive, then what the rings hold, up to 32).
//! The baseline `tern run` is measured against; `NO_QDISC_BYPASS=1` matches
//! `tern run --no-qdisc-bypass`.
//!
//! Usage: `afpacket_fwd IFACE_A IFACE_B` (root); stops on SIGINT/SIGTERM and prints counts.

use std::sync::Arc;
use tern_ports::afpacket::{install_stop_signals, LiveConfig, LivePorts};
use tern_ports::{AnyLive, PortIo, PortSpec, XdpPorts};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [a, b] = args.as_slice() else {
        return Err("usage: afpacket_fwd IFACE_A IFACE_B".into());
    };
    install_stop_signals()?;
    let specs = [
        PortSpec {
            port: 1,
            name: a.clone(),
        },
        PortSpec {
            port: 2,
            name: b.clone(),
        },
    ];
    let mut p = if std::env::var("TERN_IO").is_ok_and(|v| v == "xdp") {
        AnyLive::Xdp(XdpPorts::open(&specs, Arc::default())?)
    } else {
        let cfg = LiveConfig {
            qdisc_bypass: std::env::var_os("NO_QDISC_BYPASS").is_none(),
            ..LiveConfig::default()
        };
        AnyLive::Packet(LivePorts::open(&specs, cfg, Arc::default())?)
    };
    let mut bufs: Vec<Vec<u8>> = (0..32).map(|_| Vec::with_capacity(2048)).collect();
    let mut ports = Vec::with_capacity(32);
    let start = std::time::Instant::now();
    let mut n = 0u64;
    'run: loop {
        ports.clear();
        match p.recv(&mut bufs[0])? {
            Some(m) => ports.push(m.port),
            None => break 'run,
        }
        while ports.len() < bufs.len() {
            match p.try_recv(&mut bufs[ports.len()])? {
                Some(m) => ports.push(m.port),
                None => break,
            }
        }
        for (port, buf) in ports.iter().zip(&bufs) {
            p.send(3 - port, 0, buf)?;
        }
        n += ports.len() as u64;
    }
    p.flush()?;
    let s = p.stats();
    eprintln!(
        "afpacket_fwd: {n} frames forwarded in {:.3} s; {} sent, {} send errors",
        start.elapsed().as_secs_f64(),
        s.tx,
        s.tx_errors
    );
    Ok(())
}
