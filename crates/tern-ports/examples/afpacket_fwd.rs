//! A zero-work AF_PACKET forwarder: every frame received on one interface is sent out of the
//! other, through the same [`LivePorts`] I/O layer `tern run` uses (default RX ring,
//! `sendmmsg` TX batches). The baseline `tern run` is measured against.
//!
//! Usage: `afpacket_fwd IFACE_A IFACE_B` (root); stops on SIGINT/SIGTERM and prints counts.

use std::sync::Arc;
use tern_ports::afpacket::{install_stop_signals, LiveConfig, LivePorts};
use tern_ports::{PortIo, PortSpec};

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
    let mut p = LivePorts::open(&specs, LiveConfig::default(), Arc::default())?;
    let mut buf = Vec::with_capacity(2048);
    let start = std::time::Instant::now();
    let mut n = 0u64;
    while let Some(m) = p.recv(&mut buf)? {
        n += 1;
        p.send(3 - m.port, m.ts_ns, &buf)?;
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
