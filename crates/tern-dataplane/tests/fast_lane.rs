//! The fast lane (one path per packet for the common case, `switch/fast.rs`) against the
//! general v1model flow and against the interpreter, packet by packet, on `p4/tests/lane.p4`:
//! plain unicast, and packets that leave the common case in the middle of their life (I2E
//! clone, digest, multicast, drop, resubmit, E2E clone, recirculate, exit, a priority with no
//! queue, truncate, table miss, bad checksum, non-IPv4, cut frames). Every output (port and
//! bytes), every digest, and every counter and register cell must agree; the lane must have
//! carried the common packets and handed the others over.

use tern_dataplane::{Switch, SwitchOptions};
use tern_runtime::{MatchParam, MirroringSession, OutputPacket, PacketPath, Runtime};

fn lane_json() -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4/tests/lane.p4");
    match tern_p4::compile_file(&path, &tern_p4::Options::default()) {
        Ok(c) => c.json,
        Err(d) => panic!("lane.p4 does not compile: {d:?}"),
    }
}

fn setup(sw: &mut Switch) {
    sw.set_clock_us(Some(5_000));
    for d in 0..8u8 {
        let port = [d as u16 % 4 + 1];
        let key = vec![MatchParam::Exact(vec![10, 0, 0, d])];
        let mac = vec![0, 0, 0, 0, 0xd0, d];
        let p = port[0].to_be_bytes().to_vec();
        sw.mt_add_entry("I.route", &key, "I.fwd", &[p, mac], None)
            .expect("route entry");
    }
    sw.mirroring_session_add(
        5,
        MirroringSession {
            port: Some(9),
            mgid: None,
        },
    )
    .expect("session 5");
    sw.mirroring_session_add(
        6,
        MirroringSession {
            port: Some(10),
            mgid: Some(1),
        },
    )
    .expect("session 6");
    let g = sw.mc_mgrp_create(1).expect("group");
    let n = sw.mc_node_create(7, &[2, 3], &[]).expect("node");
    sw.mc_node_associate(g, n).expect("associate");
}

/// An Ethernet + IPv4 frame with a correct header checksum (`kind` in diffserv).
fn frame(kind: u8, dst: u8, src: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(34)];
    f[..6].copy_from_slice(&[0, 0, 0, 0, 0xaa, 1]);
    f[6..12].copy_from_slice(&[0, 0, 0, 0, 0xbb, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[1] = kind;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&src.to_be_bytes());
    ip[16..20].copy_from_slice(&[10, 0, 0, dst]);
    let csum = tern_fixtures::ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    for (i, b) in f[34..].iter_mut().enumerate() {
        *b = i as u8;
    }
    f
}

fn cells(sw: &Switch) -> Vec<String> {
    let mut v = Vec::new();
    for c in ["I.seen", "E.eseen"] {
        for i in 0..16 {
            v.push(format!(
                "{c}[{i}] {:?}",
                sw.counter_read(c, i).expect("counter")
            ));
        }
    }
    for r in ["I.hits", "E.ehits"] {
        v.push(format!(
            "{r} {:?}",
            sw.register_read_all(r).expect("register")
        ));
    }
    v
}

#[test]
fn fast_lane_matches_the_general_path_and_the_interpreter() {
    let json = lane_json();
    let mk = || Switch::from_json(&json, SwitchOptions::default()).expect("load");
    let (mut lane, mut slow, mut interp) = (mk(), mk(), mk());
    // The same packets again in bursts of 1 to 8 through `process_batch` (the whole burst
    // on the lane, one pipeline context for it).
    let mut batched = mk();
    // ... and through `process_burst` (outputs back to back in one buffer, descriptors).
    let mut bursts = mk();
    // ... and through `process_burst_into`, the lane deparsing straight into the destinations
    // of ports 1, 2 and 9 (`TestSink`), the other outputs in the burst buffer.
    let mut direct = mk();
    slow.use_slow_path();
    interp.use_interpreter();
    assert_eq!(lane.lane_why_not(), None, "{}", lane.native_summary());
    // The common case runs as one generated function (`jit/lane.rs`), the hand-overs from
    // where it stops.
    assert!(lane.lane_generated(), "{}", lane.native_summary());
    assert!(batched.lane_generated(), "{}", batched.native_summary());
    assert!(bursts.lane_generated(), "{}", bursts.native_summary());
    assert!(direct.lane_generated(), "{}", direct.native_summary());
    // The IPv4 checksum update runs inside the generated emit function on the native
    // switches (the interpreter's runs the planned Rust path).
    assert!(lane.has_native_checksums(), "{}", lane.native_summary());
    assert_eq!(slow.lane_why_not().as_deref(), Some("turned off"));
    assert!(interp.lane_why_not().is_some());
    for sw in [
        &mut lane,
        &mut slow,
        &mut interp,
        &mut batched,
        &mut bursts,
        &mut direct,
    ] {
        setup(sw);
    }
    let (mut burst, mut burst_out, mut burst_digests) = (Vec::new(), Vec::new(), Vec::new());
    let mut o4 = Vec::new();
    // Packet of the burst of each output one by one, packets of the burst that sent none.
    let (mut burst_of, mut burst_drops) = (Vec::new(), 0u64);
    let mut o5 = tern_dataplane::BurstOut::new();
    let (mut o6, mut sink) = (tern_dataplane::BurstOut::new(), TestSink::new(&[1, 2, 9]));
    let mut in_place = 0;
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut kinds_out = [0u32; 16];
    let (mut o1, mut o2, mut o3) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..3000u32 {
        let r = next();
        let kind = (r % 13) as u8; // 12: not a kind of the program (plain unicast)
        let dst = (r >> 8) as u8 % 10; // 8, 9: table miss
        let mut f = frame(
            kind,
            dst,
            (r >> 16) as u32,
            60 + (r >> 48) as usize % 3 * 40,
        );
        let mutation = (r >> 40) % 16;
        match mutation {
            0 => f[24] ^= 0x40,                            // bad checksum
            1 => f[12] = 0x86,                             // not IPv4
            2 => f.truncate(20 + (r >> 52) as usize % 20), // cut inside IPv4
            _ => {}
        }
        let port = (r >> 56) as u32 % 4;
        lane.process_packet(port, &f, &mut o1);
        slow.process_packet(port, &f, &mut o2);
        interp.process_packet(port, &f, &mut o3);
        let pick = |o: &mut Vec<OutputPacket>| -> Vec<(u32, Vec<u8>)> {
            o.drain(..).map(|o| (o.port, o.data)).collect()
        };
        let (a, b, c) = (pick(&mut o1), pick(&mut o2), pick(&mut o3));
        assert_eq!(
            a, b,
            "packet {k} (kind {kind}): lane vs general path, {f:02x?}"
        );
        assert_eq!(
            a, c,
            "packet {k} (kind {kind}): lane vs interpreter, {f:02x?}"
        );
        if !a.is_empty() && !(1..=2).contains(&mutation) {
            kinds_out[kind as usize] += 1;
        }
        let (da, db, dc) = (
            lane.take_digests(),
            slow.take_digests(),
            interp.take_digests(),
        );
        assert_eq!(da, db, "packet {k}: digests");
        assert_eq!(da, dc, "packet {k}: digests (interpreter)");
        burst_of.extend(a.iter().map(|_| burst.len() as u32));
        burst_drops += u64::from(a.is_empty());
        burst.push((port, f));
        burst_out.extend(a);
        burst_digests.extend(da);
        if burst.len() > (r >> 61) as usize || k == 2999 {
            let pkts: Vec<(u32, &[u8])> = burst.iter().map(|(p, f)| (*p, &f[..])).collect();
            batched.process_batch(&pkts, &mut o4);
            let got: Vec<(u32, Vec<u8>)> = o4.drain(..).map(|o| (o.port, o.data)).collect();
            assert_eq!(
                got, burst_out,
                "burst ending at packet {k}: batched vs one by one"
            );
            assert_eq!(
                batched.take_digests(),
                burst_digests,
                "burst ending at {k}: digests"
            );
            // Appended after what the buffer holds (cleared every other burst).
            let before = o5.len();
            let dropped = bursts.process_burst(&pkts, &mut o5);
            let got: Vec<(u32, Vec<u8>)> = o5
                .iter()
                .skip(before)
                .map(|(p, _, d)| (p, d.to_vec()))
                .collect();
            assert_eq!(got, burst_out, "burst ending at {k}: process_burst");
            let of: Vec<u32> = o5.iter().skip(before).map(|(_, i, _)| i).collect();
            assert_eq!(of, burst_of, "burst ending at {k}: packet of each output");
            assert_eq!(dropped, burst_drops, "burst ending at {k}: packets dropped");
            assert_eq!(
                bursts.take_digests(),
                burst_digests,
                "burst ending at {k}: digests (process_burst)"
            );
            if k % 2 == 0 {
                o5.clear();
            }
            // In place: each destination's records, then what was left in the buffer, are
            // the one-by-one outputs of those ports in order.
            o6.clear();
            sink.clear();
            let now = direct.now_us();
            let dropped = direct.process_burst_into(now, &pkts, &mut o6, &mut sink);
            assert_eq!(
                dropped, burst_drops,
                "burst ending at {k}: dropped (in place)"
            );
            let want = |has: &dyn Fn(u32) -> bool| -> Vec<(u32, u32, Vec<u8>)> {
                burst_out
                    .iter()
                    .zip(&burst_of)
                    .filter(|((p, _), _)| has(*p))
                    .map(|((p, d), i)| (*p, *i, d.clone()))
                    .collect()
            };
            for port in [1, 2, 9] {
                assert_eq!(
                    sink.records(port),
                    want(&|p| p == port),
                    "burst ending at {k}: port {port} in place"
                );
            }
            let rest: Vec<(u32, u32, Vec<u8>)> =
                o6.iter().map(|(p, i, d)| (p, i, d.to_vec())).collect();
            assert_eq!(
                rest,
                want(&|p| ![1, 2, 9].contains(&p)),
                "burst ending at {k}: the other ports"
            );
            in_place += sink.wrote;
            assert_eq!(
                direct.take_digests(),
                burst_digests,
                "burst ending at {k}: digests (in place)"
            );
            burst_of.clear();
            burst_drops = 0;
            burst.clear();
            burst_out.clear();
            burst_digests.clear();
        }
        if k % 97 == 0 {
            assert_eq!(cells(&lane), cells(&slow), "after packet {k}");
        }
    }
    assert_eq!(cells(&batched), cells(&slow), "batched");
    assert_eq!(cells(&bursts), cells(&slow), "process_burst");
    assert_eq!(
        bursts.lane_counts(),
        lane.lane_counts(),
        "burst lane counts"
    );
    assert_eq!(bursts.passes(), lane.passes(), "burst pipeline passes");
    assert_eq!(cells(&direct), cells(&slow), "in place");
    assert_eq!(
        direct.lane_counts(),
        lane.lane_counts(),
        "in place lane counts"
    );
    assert_eq!(direct.passes(), lane.passes(), "in place pipeline passes");
    assert!(in_place > 150, "{in_place} outputs deparsed in place");
    assert_eq!(batched.passes(), lane.passes(), "batched pipeline passes");
    assert_eq!(
        batched.lane_counts(),
        lane.lane_counts(),
        "batched lane counts"
    );
    assert_eq!(cells(&lane), cells(&slow));
    assert_eq!(cells(&lane), cells(&interp));
    // Every kind that can transmit did (kind 4 drops, 9 has no queue, 11 drops in egress),
    // counting whole IPv4 frames only.
    for (kind, n) in kinds_out.iter().enumerate().take(13) {
        assert_eq!(
            *n == 0,
            [4, 9, 11].contains(&kind),
            "kind {kind}: {n} outputs"
        );
    }
    let (taken, diverged) = lane.lane_counts();
    assert_eq!(taken, 3000, "every packet enters the lane");
    assert!(
        diverged > 600 && diverged < 2000,
        "{diverged} of {taken} handed to the general path"
    );
    assert_eq!(slow.lane_counts(), (0, 0));
    assert_eq!(interp.lane_counts(), (0, 0));
}

/// A trace or stage timing turned on takes the general path (they are per packet, the lane
/// has neither); turned off, the lane again.
#[test]
fn trace_and_stage_timing_leave_the_lane() {
    let json = lane_json();
    let mut sw = Switch::from_json(&json, SwitchOptions::default()).expect("load");
    setup(&mut sw);
    let f = frame(0, 1, 7, 60);
    let mut out = Vec::new();
    sw.process_packet(0, &f, &mut out);
    sw.set_trace(true);
    sw.process_packet(0, &f, &mut out);
    assert!(!sw.take_trace().is_empty());
    sw.set_trace(false);
    sw.set_stage_timing(true);
    sw.process_packet(0, &f, &mut out);
    sw.set_stage_timing(false);
    sw.process_packet(0, &f, &mut out);
    assert_eq!(sw.lane_counts(), (2, 0));
    assert_eq!(out.len(), 4);
    assert!(out.windows(2).all(|w| w[0].data.len() == w[1].data.len()));
}

/// Behaviour-cache hits on the fast lane (`switch/fast_cache.rs`): a switch with the cache
/// whose packets take the lane, one with the cache on the general path, and one with neither
/// cache nor lane agree packet by packet (outputs, digests) and on every counter and register
/// cell, over skewed traffic of every kind (so entries are hit, replayed clones, digests,
/// multicasts and resubmits hand over to the general path, and register guards fail as the
/// cells move on), with control-plane changes in between (the barrier).
#[test]
fn cache_hits_on_the_lane_match_the_uncached_switch() {
    use tern_dataplane::bcache::Config;
    let json = lane_json();
    let cached = || SwitchOptions {
        bcache: Some(Config::default()),
        ..SwitchOptions::default()
    };
    let mut lane = Switch::from_json(&json, cached()).expect("load");
    let mut general = Switch::from_json(&json, cached()).expect("load");
    general.use_slow_path();
    let mut plain = Switch::from_json(&json, SwitchOptions::default()).expect("load");
    plain.use_slow_path();
    assert_eq!(lane.lane_why_not(), None, "{}", lane.native_summary());
    for sw in [&mut lane, &mut general, &mut plain] {
        setup(sw);
    }
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut o1, mut o2, mut o3) = (Vec::new(), Vec::new(), Vec::new());
    for k in 0..4000u32 {
        let r = next();
        // Few distinct behaviours: 13 kinds x 10 destinations x 2 sources x 2 lengths.
        let kind = (r % 13) as u8;
        let dst = (r >> 8) as u8 % 10;
        let mut f = frame(
            kind,
            dst,
            (r >> 16) as u32 % 2,
            60 + (r >> 48) as usize % 2 * 40,
        );
        if (r >> 40) % 32 == 0 {
            f[24] ^= 0x40; // bad checksum
        }
        let port = (r >> 56) as u32 % 2;
        if k % 500 == 499 {
            // The barrier: a changed route must not be replayed from a stale entry.
            let d = (k / 500) as u8 % 8;
            let key = vec![MatchParam::Exact(vec![10, 0, 0, d])];
            for sw in [&mut lane, &mut general, &mut plain] {
                let h = sw.mt_get_entry_from_key("I.route", &key, None);
                let h = h.expect("route entry").handle;
                let p = (k as u16 % 3 + 1).to_be_bytes().to_vec();
                sw.mt_modify_entry("I.route", h, "I.fwd", &[p, vec![0, 0, 0, 0, 0xe0, d]])
                    .expect("modify");
            }
        }
        lane.process_packet(port, &f, &mut o1);
        general.process_packet(port, &f, &mut o2);
        plain.process_packet(port, &f, &mut o3);
        let pick = |o: &mut Vec<OutputPacket>| -> Vec<(u32, Vec<u8>)> {
            o.drain(..).map(|o| (o.port, o.data)).collect()
        };
        let (a, b, c) = (pick(&mut o1), pick(&mut o2), pick(&mut o3));
        assert_eq!(
            a, c,
            "packet {k} (kind {kind}): cached lane vs uncached, {f:02x?}"
        );
        assert_eq!(b, c, "packet {k} (kind {kind}): cached general vs uncached");
        let (da, db, dc) = (
            lane.take_digests(),
            general.take_digests(),
            plain.take_digests(),
        );
        assert_eq!(da, dc, "packet {k}: digests (cached lane)");
        assert_eq!(db, dc, "packet {k}: digests (cached general)");
        if k % 97 == 0 {
            assert_eq!(cells(&lane), cells(&plain), "after packet {k}");
        }
    }
    assert_eq!(cells(&lane), cells(&plain));
    assert_eq!(cells(&general), cells(&plain));
    let (taken, diverged) = lane.lane_counts();
    assert_eq!(taken, 4000, "every packet enters the lane");
    assert!(diverged > 0, "replayed divergences hand over");
    // Every kind writes the register value it read into the packet (a value guard): entries
    // are inserted, then replaced as the cells move on; the hits are in
    // `tests/bcache.rs::the_fast_lane_serves_hits_on_the_papers_cases`.
    let s = lane.bcache_stats().expect("cache on");
    assert!(s.inserts > 1000 && s.miss_guard > 1000, "{s}");
    assert!(s.invalidated > 0, "the barrier removed entries: {s}");
    assert_eq!(general.lane_counts(), (0, 0));
    assert_eq!(general.bcache_stats().expect("cache on"), s);
}

/// Destinations for `process_burst_into`: one buffer per port of `ports`, the records (packet,
/// bytes) in the order they came, whether written in place by the lane or copied.
struct TestSink {
    ports: Vec<u32>,
    bufs: Vec<Vec<u8>>,
    recs: Vec<Vec<(u32, std::ops::Range<usize>)>>,
    table: Vec<*mut u8>,
    /// Outputs written in place.
    wrote: usize,
}

impl TestSink {
    fn new(ports: &[u32]) -> TestSink {
        TestSink {
            ports: ports.to_vec(),
            bufs: vec![Vec::new(); ports.len()],
            recs: vec![Vec::new(); ports.len()],
            table: Vec::new(),
            wrote: 0,
        }
    }

    fn slot(&self, port: u32) -> Option<usize> {
        self.ports.iter().position(|&p| p == port)
    }

    fn clear(&mut self) {
        self.bufs.iter_mut().for_each(Vec::clear);
        self.recs.iter_mut().for_each(Vec::clear);
        self.wrote = 0;
    }

    fn records(&self, port: u32) -> Vec<(u32, u32, Vec<u8>)> {
        let k = self.slot(port).expect("a port of the sink");
        self.recs[k]
            .iter()
            .map(|(i, r)| (port, *i, self.bufs[k][r.clone()].to_vec()))
            .collect()
    }
}

// SAFETY: each table entry is the end of its port's buffer with room for `n` records of
// `room` bytes reserved in `begin`, moved on by `wrote` only (one record each); `output`
// (which may reallocate) comes only after `end`.
unsafe impl tern_dataplane::EmitSink for TestSink {
    fn begin(&mut self, n: usize, room: usize) -> (*const *mut u8, usize) {
        let top = *self.ports.iter().max().unwrap_or(&0) as usize;
        self.table = vec![std::ptr::null_mut(); top + 1];
        for (k, &p) in self.ports.iter().enumerate() {
            let b = &mut self.bufs[k];
            b.reserve(n * room);
            // SAFETY: within the capacity reserved just above.
            self.table[p as usize] = unsafe { b.as_mut_ptr().add(b.len()) };
        }
        (self.table.as_ptr(), self.table.len())
    }

    fn wrote(&mut self, port: u32, pkt: u32, len: usize) {
        let k = self.slot(port).expect("a port with a destination");
        let b = &mut self.bufs[k];
        let at = b.len();
        // SAFETY: the lane wrote `len` bytes at the end of the buffer, within the room.
        unsafe { b.set_len(at + len) };
        self.recs[k].push((pkt, at..at + len));
        // SAFETY: within the room reserved in `begin` (or one past its end).
        self.table[port as usize] = unsafe { b.as_mut_ptr().add(at + len) };
        self.wrote += 1;
    }

    fn output(&mut self, port: u32, pkt: u32, data: &[u8]) -> bool {
        let Some(k) = self.slot(port) else {
            return false;
        };
        let at = self.bufs[k].len();
        self.bufs[k].extend_from_slice(data);
        self.recs[k].push((pkt, at..at + data.len()));
        true
    }

    fn end(&mut self) {
        self.table.clear();
    }
}

/// `Switch::recycle_outputs` of one frame (a caller running one packet per call: tern-virt's
/// lanes) takes its own short path (`recycle_buffer`, h-tidy): the frame's buffer goes into
/// the pool and carries the next transmitted frame, as the drain of a batch does with each of
/// its frames.
#[test]
fn one_frame_given_back_carries_the_next_frame_as_a_batch_does() {
    let json = lane_json();
    let mut sw = Switch::from_json(&json, SwitchOptions::default()).expect("load");
    setup(&mut sw);
    let f = frame(0, 1, 7, 60);
    let mut out = Vec::new();
    sw.process_packet(0, &f, &mut out);
    assert_eq!(out.len(), 1);
    let (pooled, buf) = (sw.spare_buffers(), out[0].data.as_ptr());
    sw.recycle_outputs(&mut out);
    assert!(out.is_empty());
    assert_eq!(
        sw.spare_buffers(),
        pooled + 1,
        "the one frame's buffer is pooled"
    );
    sw.process_packet(0, &f, &mut out);
    assert_eq!(out[0].data.as_ptr(), buf, "and carries the next frame");
    // Two frames (the drain): both pooled, the last one given back first out.
    sw.process_packet(0, &f, &mut out);
    let second = out[1].data.as_ptr();
    let pooled = sw.spare_buffers();
    sw.recycle_outputs(&mut out);
    assert!(out.is_empty());
    assert_eq!(sw.spare_buffers(), pooled + 2);
    sw.process_packet(0, &f, &mut out);
    assert_eq!(out[0].data.as_ptr(), second);
}
