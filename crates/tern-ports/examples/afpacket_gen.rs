//! A traffic generator for live-port measurements: sends 60-byte Ethernet frames (destination
//! MAC not local, so a receiving kernel counts and drops them) out of one interface as fast as
//! `sendmmsg` batches allow, for a number of seconds.
//!
//! Usage: `afpacket_gen IFACE SECONDS` (root).

use std::sync::Arc;
use std::time::{Duration, Instant};
use tern_ports::afpacket::{LiveConfig, LivePorts};
use tern_ports::{PortIo, PortSpec};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [iface, secs] = args.as_slice() else {
        return Err("usage: afpacket_gen IFACE SECONDS".into());
    };
    let secs: f64 = secs
        .parse()
        .map_err(|_| format!("SECONDS: '{secs}' is not a number"))?;
    let specs = [PortSpec {
        port: 1,
        name: iface.clone(),
    }];
    let cfg = LiveConfig {
        promisc: false,
        block_nr: 1,
        tx_batch: 64,
        ..LiveConfig::default()
    };
    let mut p = LivePorts::open(&specs, cfg, Arc::default())?;
    // IPv4/UDP to a non-local MAC; the flow number varies in the source port.
    let mut f = vec![
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, 0x45, 0, 0, 46, 0, 0, 0x40, 0,
        64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 1, 10, 0x30, 0x39, 0x1f, 0x90, 0, 26, 0, 0,
    ];
    f.resize(60, 0);
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while Instant::now() < end {
        for _ in 0..1024 {
            f[34] = (n >> 8) as u8;
            f[35] = n as u8;
            p.send(1, 0, &f)?;
            n += 1;
        }
    }
    p.flush()?;
    let s = p.stats();
    eprintln!(
        "afpacket_gen: {} frames sent, {} send errors in {secs} s",
        s.tx, s.tx_errors
    );
    Ok(())
}
