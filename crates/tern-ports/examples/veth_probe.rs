//! A probe for switch-under-test measurements on veth: sends IPv4/UDP frames out of one
//! interface and watches them come back on another, through whatever switch joins the two.
//! One process holds both ends (both in the probe's network namespace), so the clock that
//! stamps a frame on the way out is the clock that reads it on the way in.
//!
//! Usage (root): `veth_probe latency|latency-spin|rate TX_IFACE RX_IFACE SECONDS RATE DST_MAC DST_IP [WARMUP]`
//!
//! * `latency`: one frame every 1/RATE s (open loop: a sending thread sleeps until each send
//!   time, 1 ns timer slack; a send that falls more than one period behind is skipped, not
//!   bunched up), each flushed on its own; the payload carries a magic, a sequence number and
//!   the send time (ns since the probe started, monotonic). The main thread blocks in poll()
//!   on RX_IFACE's ring and takes the one-way delay of every probe frame that arrives. Frames sent in the first
//!   WARMUP seconds (default 0.5) are not counted. Prints one JSON object: frames sent and
//!   received after the warm-up, skipped sends, the delay's p50 / p90 / p99 / p99.9 / max
//!   / mean in nanoseconds, and its histogram (`hist`: `[bucket, count]` pairs, buckets 100 ns
//!   wide below 200 µs, 10 µs wide below 20 ms, one above) so that runs can be pooled.
//! * `latency-spin`: the same frames and report, but one thread sends and drains the receive
//!   ring in a spinning loop: no wake-up of the probe in the measured path, its CPU kept busy
//!   (on a busy machine the kernel then preempts it for the CPU's other tasks now and then).
//!   TX_IFACE and RX_IFACE may be comma-separated lists of K paths: frames go round robin
//!   over them (RATE per path; every other turn in reverse order: A B B A ...) and one report
//!   line per path is printed, so that two switches
//!   are compared frame by frame, a stall of the machine hitting both alike.
//! * `rate`: batches of 64 frames (`sendmmsg`) as fast as they go (RATE 0) or at RATE frames
//!   per second (open loop); RX_IFACE is not opened: its kernel counts the frames
//!   (`rx_packets`) and drops them (their destination MAC is not its own). Prints one JSON
//!   object: frames sent and received in the window after the warm-up, the window's length,
//!   the delivered rate, the totals over the whole run (for CPU per frame; after 50 ms for
//!   the frames in flight) and the loss over the whole run.
//!
//! The frames: source 00:00:00:00:00:01 / 10.0.0.1, UDP 12345 -> 8080, 66 bytes on the wire
//! (24 bytes of payload), a valid IPv4 header checksum and no UDP checksum.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tern_ports::afpacket::{install_stop_signals, stop_requested, LiveConfig, LivePorts};
use tern_ports::{PortIo, PortSpec};

const MAGIC: &[u8; 8] = b"TERNPRB1";
/// Where the payload (magic, sequence, send time) starts: after Ethernet, IPv4 and UDP.
const PAYLOAD: usize = 42;
const FRAME_LEN: usize = PAYLOAD + 24;

fn parse_mac(s: &str) -> Result<[u8; 6], String> {
    let v: Vec<u8> = s
        .split(':')
        .map(|b| u8::from_str_radix(b, 16))
        .collect::<Result<_, _>>()
        .map_err(|_| format!("'{s}' is not a MAC address"))?;
    v.try_into()
        .map_err(|_| format!("'{s}' is not a MAC address"))
}

/// The probe frame with sequence number and send time left zero.
fn frame(dmac: [u8; 6], dip: std::net::Ipv4Addr) -> Vec<u8> {
    let mut f = Vec::with_capacity(FRAME_LEN);
    f.extend_from_slice(&dmac);
    f.extend_from_slice(&[0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_len = (FRAME_LEN - 14) as u16;
    let mut ip = [
        0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 0, 0, 0, 0,
    ];
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[16..20].copy_from_slice(&dip.octets());
    let sum = ip
        .chunks(2)
        .fold(0u32, |s, w| s + u32::from(u16::from_be_bytes([w[0], w[1]])));
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = !(((sum & 0xffff) + (sum >> 16)) as u16);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f.extend_from_slice(&ip);
    let udp_len = (FRAME_LEN - 34) as u16;
    f.extend_from_slice(&12345u16.to_be_bytes());
    f.extend_from_slice(&8080u16.to_be_bytes());
    f.extend_from_slice(&udp_len.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(MAGIC);
    f.resize(FRAME_LEN, 0);
    f
}

fn stamp(f: &mut [u8], seq: u64, t_ns: u64) {
    f[PAYLOAD + 8..PAYLOAD + 16].copy_from_slice(&seq.to_le_bytes());
    f[PAYLOAD + 16..PAYLOAD + 24].copy_from_slice(&t_ns.to_le_bytes());
}

/// (sequence, send time) of a probe frame, `None` for anything else.
fn unstamp(f: &[u8]) -> Option<(u64, u64)> {
    if f.len() < FRAME_LEN || &f[PAYLOAD..PAYLOAD + 8] != MAGIC {
        return None;
    }
    let seq = u64::from_le_bytes(f[PAYLOAD + 8..PAYLOAD + 16].try_into().ok()?);
    let t = u64::from_le_bytes(f[PAYLOAD + 16..PAYLOAD + 24].try_into().ok()?);
    Some((seq, t))
}

/// The histogram bucket of a delay: 100 ns wide below 200 µs (0..2000), 10 µs wide below
/// 20 ms (2000..3980), then one bucket for the rest (3980). scripts/virt/veth_abba.py reads
/// the same scheme to pool the rounds.
fn bucket(d_ns: u64) -> usize {
    if d_ns < 200_000 {
        (d_ns / 100) as usize
    } else if d_ns < 20_000_000 {
        2000 + ((d_ns - 200_000) / 10_000) as usize
    } else {
        3980
    }
}

/// The non-empty buckets of sorted delays as `[[bucket, count], ...]`.
fn histogram(sorted: &[u64]) -> String {
    let mut out = String::from("[");
    let mut i = 0;
    while i < sorted.len() {
        let b = bucket(sorted[i]);
        let n = sorted[i..].iter().take_while(|&&d| bucket(d) == b).count();
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&format!("[{b}, {n}]"));
        i += n;
    }
    out.push(']');
    out
}

/// The q-quantile (nearest rank) of sorted samples.
fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn rx_packets(iface: &str) -> Result<u64, String> {
    let p = format!("/sys/class/net/{iface}/statistics/rx_packets");
    std::fs::read_to_string(&p)
        .map_err(|e| format!("{p}: {e}"))?
        .trim()
        .parse()
        .map_err(|e| format!("{p}: {e}"))
}

fn ns(d: Duration) -> u64 {
    d.as_nanos() as u64
}

struct Args {
    tx: String,
    rx: String,
    secs: f64,
    rate: f64,
    warmup: f64,
    frame: Vec<u8>,
}

/// Print the latency report: `sent` frames counted, `skipped` sends, the delays measured.
fn report(mode: &str, a: &Args, sent: u64, skipped: u64, mut delays: Vec<u64>) {
    let received = delays.len() as u64;
    delays.sort_unstable();
    let mean = if delays.is_empty() {
        0.0
    } else {
        delays.iter().sum::<u64>() as f64 / delays.len() as f64
    };
    println!(
        "{{\"mode\": \"{mode}\", \"rate_pps\": {}, \"seconds\": {}, \"sent\": {sent}, \"received\": {received}, \
         \"skipped_sends\": {skipped}, \"p50_ns\": {}, \"p90_ns\": {}, \"p99_ns\": {}, \"p999_ns\": {}, \
         \"max_ns\": {}, \"mean_ns\": {mean:.0}, \"hist\": {}}}",
        a.rate,
        a.secs,
        quantile(&delays, 0.50),
        quantile(&delays, 0.90),
        quantile(&delays, 0.99),
        quantile(&delays, 0.999),
        delays.last().copied().unwrap_or(0),
        histogram(&delays),
    );
}

fn latency(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.rate <= 0.0 {
        return Err("latency: RATE must be > 0".into());
    }
    let port = |port, name: &str| PortSpec {
        port,
        name: name.to_string(),
    };
    let tx_cfg = LiveConfig {
        promisc: false,
        block_nr: 1,
        tx_batch: 1,
        ..LiveConfig::default()
    };
    let rx_cfg = LiveConfig {
        promisc: true,
        poll_ms: 5,
        ..LiveConfig::default()
    };
    let tx_spec = [port(1, &a.tx)];
    let stop = Arc::new(AtomicBool::new(false));
    let mut rx = LivePorts::open(&[port(2, &a.rx)], rx_cfg, stop.clone())?;
    let period = Duration::from_secs_f64(1.0 / a.rate);
    let warm = Duration::from_secs_f64(a.warmup);
    let end = Duration::from_secs_f64(a.warmup + a.secs);
    // Frames still on their way when the sending stops get this long to arrive.
    let drain = Duration::from_millis(50);
    let t0 = Instant::now();
    let mut f = a.frame.clone();
    // The sender sleeps between frames and the receiver blocks in poll(): the probe leaves its
    // CPU idle between frames (a spinning probe starves the CPU's other tasks, and under
    // SCHED_FIFO the kernel then takes the CPU away for milliseconds to run them).
    let mut send_all = move || -> Result<(u64, u64, u64), String> {
        // SAFETY: PR_SET_TIMERSLACK takes an integer argument and changes only this thread's
        // timer slack (1 ns: sleeps end on time instead of up to 50 µs late).
        unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
        // Opened here: a LivePorts holds its rings' mappings and stays on one thread.
        let mut tx =
            LivePorts::open(&tx_spec, tx_cfg, Arc::default()).map_err(|e| e.to_string())?;
        let (mut seq, mut first_counted, mut skipped) = (0u64, None, 0u64);
        let mut next = Duration::ZERO;
        loop {
            let now = t0.elapsed();
            if now >= end || stop_requested() {
                break;
            }
            if now < next {
                std::thread::sleep(next - now);
                continue;
            }
            if now >= warm && first_counted.is_none() {
                first_counted = Some(seq);
            }
            stamp(&mut f, seq, ns(t0.elapsed()));
            tx.send(1, 0, &f).map_err(|e| e.to_string())?;
            tx.flush().map_err(|e| e.to_string())?;
            seq += 1;
            next += period;
            if now > next + period {
                // Behind by more than a period (preempted): skip, do not bunch frames up.
                let behind = ((now - next).as_nanos() / period.as_nanos()) as u64;
                skipped += behind;
                next += period * behind as u32;
            }
        }
        std::thread::sleep(drain);
        Ok((first_counted.unwrap_or(seq), seq, skipped))
    };
    let sender = std::thread::spawn(move || {
        let r = send_all();
        // Also on failure: the receiver stops within its poll timeout.
        stop.store(true, Ordering::Relaxed);
        r
    });
    let mut buf = Vec::with_capacity(2048);
    // (sequence, delay) of every probe frame received.
    let mut got: Vec<(u64, u64)> = Vec::with_capacity((a.rate * (a.warmup + a.secs)) as usize + 16);
    while let Some(m) = rx.recv(&mut buf)? {
        let t = ns(t0.elapsed());
        if m.port != 2 {
            continue;
        }
        if let Some((s, sent)) = unstamp(&buf) {
            got.push((s, t.saturating_sub(sent)));
        }
    }
    let (first, seq, skipped) = sender
        .join()
        .map_err(|_| "the sender panicked")?
        .map_err(|e| format!("sending: {e}"))?;
    let delays: Vec<u64> = got
        .iter()
        .filter(|(s, _)| (first..seq).contains(s))
        .map(|&(_, d)| d)
        .collect();
    let sent = seq - first;
    report("latency", a, sent, skipped, delays);
    Ok(())
}

/// The path of frame `seq` over `k` paths: turns of one frame per path, every other turn in
/// reverse (A B, B A, A B, ...), so no path is always first after a pause.
fn path_of(seq: u64, k: usize) -> usize {
    let (turn, pos) = (seq / k as u64, (seq % k as u64) as usize);
    if turn % 2 == 0 {
        pos
    } else {
        k - 1 - pos
    }
}

/// `latency-spin`: one thread sends and drains the receive rings in a spinning loop (no
/// wake-up of the probe in the measured path; it keeps its CPU busy). TX_IFACE and RX_IFACE may
/// be comma-separated lists of K paths: the frames then go round robin over the paths, RATE
/// per path (a frame every 1/(K RATE) s), and one report line per path is printed, in order.
/// A stall of the machine then delays the frames of every path alike.
fn latency_spin(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if a.rate <= 0.0 {
        return Err("latency: RATE must be > 0".into());
    }
    let txs: Vec<&str> = a.tx.split(',').collect();
    let rxs: Vec<&str> = a.rx.split(',').collect();
    if txs.len() != rxs.len() {
        return Err("latency-spin: as many TX as RX interfaces".into());
    }
    let k = txs.len();
    // Path i: frames out of port 2i + 1, back in on port 2i + 2.
    let specs: Vec<PortSpec> = txs
        .iter()
        .zip(&rxs)
        .enumerate()
        .flat_map(|(i, (t, r))| {
            [
                PortSpec {
                    port: 2 * i as u32 + 1,
                    name: t.to_string(),
                },
                PortSpec {
                    port: 2 * i as u32 + 2,
                    name: r.to_string(),
                },
            ]
        })
        .collect();
    let cfg = LiveConfig {
        promisc: true,
        tx_batch: 1,
        ..LiveConfig::default()
    };
    let mut p = LivePorts::open(&specs, cfg, Arc::default())?;
    let mut f = a.frame.clone();
    let mut buf = Vec::with_capacity(2048);
    let period = Duration::from_secs_f64(1.0 / (a.rate * k as f64));
    let warm = Duration::from_secs_f64(a.warmup);
    let end = Duration::from_secs_f64(a.warmup + a.secs);
    // Frames still on their way when the sending stops get this long to arrive.
    let drain = Duration::from_millis(50);
    let t0 = Instant::now();
    let mut next = Duration::ZERO;
    let (mut seq, mut first_counted, mut skipped) = (0u64, None, 0u64);
    let mut delays: Vec<Vec<u64>> = (0..k)
        .map(|_| Vec::with_capacity((a.rate * a.secs * 1.1) as usize + 16))
        .collect();
    loop {
        let now = t0.elapsed();
        if now >= end + drain || stop_requested() {
            break;
        }
        if now < end && now >= next {
            if now >= warm && first_counted.is_none() {
                first_counted = Some(seq);
            }
            stamp(&mut f, seq, ns(t0.elapsed()));
            p.send(2 * path_of(seq, k) as u32 + 1, 0, &f)?;
            p.flush()?;
            seq += 1;
            next += period;
            if now > next + period {
                // Behind by more than a period (preempted): skip, do not bunch frames up. Whole
                // turns of the K paths, so each keeps its place in the rotation.
                let behind = ((now - next).as_nanos() / period.as_nanos()) as u64 / k as u64;
                skipped += behind * k as u64;
                next += period * (behind * k as u64) as u32;
            }
        }
        while let Some(m) = p.try_recv(&mut buf)? {
            let t = ns(t0.elapsed());
            if m.port % 2 != 0 || m.port as usize > 2 * k {
                continue;
            }
            let path = m.port as usize / 2 - 1;
            if let Some((s, sent)) = unstamp(&buf) {
                // Counted: sent after the warm-up, and out of this path's own port.
                if first_counted.is_some_and(|fc| s >= fc) && s < seq && path_of(s, k) == path {
                    delays[path].push(t.saturating_sub(sent));
                }
            }
        }
    }
    let first = first_counted.unwrap_or(seq);
    for (i, d) in delays.into_iter().enumerate() {
        let sent = (first..seq).filter(|&s| path_of(s, k) == i).count() as u64;
        report("latency-spin", a, sent, skipped / k as u64, d);
    }
    Ok(())
}

fn rate(a: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let specs = [PortSpec {
        port: 1,
        name: a.tx.clone(),
    }];
    let cfg = LiveConfig {
        promisc: false,
        block_nr: 1,
        tx_batch: 64,
        ..LiveConfig::default()
    };
    let mut p = LivePorts::open(&specs, cfg, Arc::default())?;
    let mut f = a.frame.clone();
    let warm = Duration::from_secs_f64(a.warmup);
    let end = Duration::from_secs_f64(a.warmup + a.secs);
    let rx0 = rx_packets(&a.rx)?;
    let t0 = Instant::now();
    let mut n = 0u64;
    let mut window: Option<(Instant, u64, u64)> = None;
    loop {
        let now = t0.elapsed();
        if now >= end || stop_requested() {
            break;
        }
        if window.is_none() && now >= warm {
            p.flush()?;
            window = Some((Instant::now(), p.stats().tx, rx_packets(&a.rx)?));
        }
        if a.rate > 0.0 && (n as f64) >= a.rate * now.as_secs_f64() {
            continue;
        }
        for _ in 0..64 {
            stamp(&mut f, n, 0);
            p.send(1, 0, &f)?;
            n += 1;
        }
    }
    p.flush()?;
    let (w_t, w_tx, w_rx) = window.ok_or("the run ended inside the warm-up")?;
    let secs = w_t.elapsed().as_secs_f64();
    let tx = p.stats().tx;
    let rx = rx_packets(&a.rx)?;
    // The frames in flight at the end still arrive (for the totals).
    std::thread::sleep(Duration::from_millis(50));
    let rx_total = rx_packets(&a.rx)? - rx0;
    let (sent, received) = (tx - w_tx, rx - w_rx);
    // Over the whole run (a window's edges cut through the frames queued in the switch).
    let loss = if tx == 0 {
        0.0
    } else {
        1.0 - rx_total as f64 / tx as f64
    };
    println!(
        "{{\"mode\": \"rate\", \"target_pps\": {}, \"seconds\": {secs:.4}, \"sent\": {sent}, \"received\": {received}, \
         \"sent_pps\": {:.0}, \"rx_pps\": {:.0}, \"loss\": {loss:.5}, \"sent_total\": {tx}, \"received_total\": {rx_total}, \
         \"send_errors\": {}}}",
        a.rate,
        sent as f64 / secs,
        received as f64 / secs,
        p.stats().tx_errors,
    );
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: veth_probe latency|rate TX_IFACE RX_IFACE SECONDS RATE DST_MAC DST_IP [WARMUP]";
    if args.len() != 7 && args.len() != 8 {
        return Err(usage.into());
    }
    let num = |s: &str, what: &str| -> Result<f64, String> {
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| format!("{what}: '{s}' is not a number >= 0"))
    };
    let a = Args {
        tx: args[1].clone(),
        rx: args[2].clone(),
        secs: num(&args[3], "SECONDS")?,
        rate: num(&args[4], "RATE")?,
        warmup: args.get(7).map_or(Ok(0.5), |w| num(w, "WARMUP"))?,
        frame: frame(
            parse_mac(&args[5])?,
            args[6]
                .parse()
                .map_err(|_| format!("DST_IP: '{}' is not an IPv4 address", args[6]))?,
        ),
    };
    install_stop_signals()?;
    match args[0].as_str() {
        "latency" => latency(&a),
        "latency-spin" => latency_spin(&a),
        "rate" => rate(&a),
        _ => Err(usage.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_is_a_valid_ipv4_udp_probe() {
        let mut f = frame([0, 0, 0, 0, 0, 2], "10.0.1.3".parse().unwrap());
        assert_eq!(f.len(), FRAME_LEN);
        // The IPv4 header sums to 0xffff (ones' complement) with its checksum in.
        let s = f[14..34]
            .chunks(2)
            .fold(0u32, |s, w| s + u32::from(u16::from_be_bytes([w[0], w[1]])));
        let s = (s & 0xffff) + (s >> 16);
        assert_eq!((s & 0xffff) + (s >> 16), 0xffff);
        assert_eq!(&f[30..34], &[10, 0, 1, 3]);
        stamp(&mut f, 7, 123_456);
        assert_eq!(unstamp(&f), Some((7, 123_456)));
        f[PAYLOAD] ^= 1;
        assert_eq!(unstamp(&f), None);
    }

    #[test]
    fn histogram_counts_every_delay_in_its_bucket() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(199_999), 1999);
        assert_eq!(bucket(200_000), 2000);
        assert_eq!(bucket(19_999_999), 3979);
        assert_eq!(bucket(u64::MAX), 3980);
        let d = [50, 99, 100, 250_000, 250_001, 30_000_000];
        assert_eq!(histogram(&d), "[[0, 2], [1, 1], [2005, 2], [3980, 1]]");
        assert_eq!(histogram(&[]), "[]");
    }

    #[test]
    fn paths_alternate_their_order_every_turn() {
        let order: Vec<usize> = (0..8).map(|s| path_of(s, 2)).collect();
        assert_eq!(order, [0, 1, 1, 0, 0, 1, 1, 0]);
        assert!((0..9).all(|s| path_of(s, 1) == 0));
        let order: Vec<usize> = (0..6).map(|s| path_of(s, 3)).collect();
        assert_eq!(order, [0, 1, 2, 2, 1, 0]);
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&v, 1.0), 100);
        assert_eq!(quantile(&[], 0.5), 0);
    }
}
