//! The fast lane: one lean path per packet for the common case (issue 21, item 1).
//!
//! A packet whose program has native code for its parser, pipelines and emit loop, on a
//! switch with no trace and no stage timing, runs parse → ingress →
//! egress → deparse (with the checksum update) here, straight through: no job queue, no
//! `Flow` context, no pool traffic (the lane keeps one packet instance of its own), the
//! standard metadata written in place, the frame deparsed into a recycled output buffer.
//!
//! The lane covers plain unicast and drop. When a packet's ingress asks for anything else
//! (clone, digest, resubmit, multicast) it is handed to the v1model flow of [`super`] *at the
//! point where it diverged* (`Flow::ingress_tail`, after the ingress pipeline ran once), and
//! likewise after egress (`Flow::egress_tail`: E2E clone, recirculate): nothing runs twice,
//! so a counter or register written before the divergence is written once. The results are
//! those of the general path, packet by packet (`tests/fast_lane.rs` and
//! `cmd_bench::tests::native_code_matches_the_interpreter` compare them).
//!
//! When the program's native code includes the lane function ([`crate::jit::Native::run_lane`],
//! `jit/lane.rs`), the common case is one call of that generated function (PHV reset, standard
//! metadata, parser, pipelines, decisions, emit and payload); a packet it hands back goes on
//! here from where it stopped (`lane_mid` after ingress, `lane_late` after egress), the same
//! code as the Rust body below, which stays for the other programs and for a switch with a
//! behaviour cache.
//!
//! With a behaviour cache the lane runs its pipelines through it (`super::fast_cache`): a
//! hit replays the cached behaviour in place of the pipeline and the packet goes on in the
//! lane.
//!
//! Eligibility is decided when a program loads ([`why_not`]) and shown in the bench's
//! `native code:` line (`fast lane on` / `fast lane off (why)`); so is everything a packet
//! would otherwise look up ([`LanePlan`]: native pipelines by index, standard-metadata slots,
//! checksum steps). `Switch::process_batch` hands a whole batch to the lane with one pipeline
//! context for the burst ([`crate::jit::BurstCtx`]).

use super::{fast_cache, fresh_pkt, renew_pkt, Flow, Job, Switch};
use crate::compile::Engine;
use crate::exec::{Pkt, PktRegs};
use crate::jit::{BurstCtx, LaneCtx, LaneEnd, LaneEntry};
use crate::layout::{Phv, StdSlot};
use tern_runtime::{OutputPacket, Port};

/// What the lane needs of the running program, resolved once when it loads (or when a
/// differential switch drops a path), so that a packet does no lookups by name or node: the
/// native pipelines by index, the standard-metadata slots it stores (copied out of the
/// engine, the queueing fields as slots too), and which checksum steps apply.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct LanePlan {
    /// Index of the native ingress / egress pipeline ([`crate::jit::Native::pipeline_index`]);
    /// `None`: no such control, or an empty one (nothing to run).
    ingress: Option<usize>,
    egress: Option<usize>,
    /// The program reads `checksum_error`: verify the checksums after the parser.
    verify: bool,
    /// The checksum updates are planned ([`Engine::csum_plan`]); `emit_csum`: and compiled
    /// into the emit function.
    planned: bool,
    emit_csum: bool,
    /// The lane's body runs as one generated function ([`crate::jit::Native::run_lane`]).
    gen: bool,
    /// ... and that function resets the PHV of a new packet itself.
    gen_resets: bool,
    drop_port: u64,
    s: LaneStd,
}

/// The standard-metadata slots the lane reads or stores.
#[derive(Clone, Copy, Debug, Default)]
struct LaneStd {
    ingress_port: StdSlot,
    packet_length: StdSlot,
    ingress_ts: StdSlot,
    parser_error: StdSlot,
    checksum_error: StdSlot,
    mcast_grp: StdSlot,
    egress_spec: StdSlot,
    egress_port: StdSlot,
    egress_ts: StdSlot,
    instance_type: StdSlot,
    priority: StdSlot,
    qid: StdSlot,
    /// enq_timestamp, enq_qdepth, deq_timedelta, deq_qdepth (all four or none).
    queueing: Option<[StdSlot; 4]>,
}

impl LanePlan {
    /// The plan of `eng` (meaningful when [`why_not`] says the lane is on).
    pub(super) fn new(eng: &Engine) -> LanePlan {
        let jit = eng.jit.as_ref();
        let index = |init: Option<Option<crate::compile::GNode>>| {
            jit.and_then(|j| j.pipeline_index(init.flatten()?))
        };
        let s = &eng.std;
        let total = eng.layout.total_bytes;
        LanePlan {
            ingress: index(eng.ingress),
            egress: index(eng.egress),
            verify: s.checksum_error.f.is_some(),
            planned: eng.csum_plan.is_some(),
            emit_csum: eng.csum_plan.is_some() && jit.is_some_and(|j| j.has_emit_csum()),
            gen: jit.is_some_and(|j| j.has_lane()) && direct(eng),
            gen_resets: jit.is_some_and(|j| j.lane_resets_phv()),
            drop_port: eng.drop_port as u64,
            s: LaneStd {
                ingress_port: s.ingress_port,
                packet_length: s.packet_length,
                ingress_ts: s.ingress_ts,
                parser_error: s.parser_error,
                checksum_error: s.checksum_error,
                mcast_grp: s.mcast_grp,
                egress_spec: s.egress_spec,
                egress_port: s.egress_port,
                egress_ts: s.egress_ts,
                instance_type: s.instance_type,
                priority: s.priority,
                qid: s.qid,
                queueing: s.queueing.map(|q| q.map(|f| StdSlot::new(Some(f), total))),
            },
        }
    }
}

#[inline(always)]
fn put(phv: &mut Phv, s: &StdSlot, v: u64) {
    phv.write_std(s, v);
}

/// Why a program's packets cannot take the fast lane; `None` if they can. The lane is for
/// programs whose every per-packet stage has native code (the interpreted stages would gain
/// nothing from it).
pub(super) fn why_not(eng: &Engine) -> Option<String> {
    let Some(j) = &eng.jit else {
        return Some("no native code".into());
    };
    if !j.has_parser() {
        return Some("parser interpreted".into());
    }
    if !j.has_emit() {
        return Some("emit interpreted".into());
    }
    for (name, init) in [("ingress", eng.ingress), ("egress", eng.egress)] {
        if let Some(Some(init)) = init {
            if !j.has_pipeline(init) {
                return Some(format!("{name} interpreted"));
            }
        }
    }
    None
}

/// Whether the lane may leave the received frame where it is: parse it in place and append
/// its payload straight to the output, with no copy into the packet instance (copied only
/// when the packet leaves the lane). Nothing in the lane reads the packet's own bytes but the
/// parser and the payload, unless a checksum or hash takes the payload as input, or the
/// deparser runs primitives: then the frame is copied as on the general path.
pub(super) fn direct(eng: &Engine) -> bool {
    use crate::compile::CInput;
    let payload = |c: &crate::compile::CCalc| c.inputs.iter().any(|i| matches!(i, CInput::Payload));
    eng.jit
        .as_ref()
        .is_some_and(|j| j.has_parser() && j.has_emit())
        && eng
            .deparser
            .as_ref()
            .is_some_and(|(_, prims)| prims.is_empty())
        && !eng.calcs.iter().any(payload)
        && !eng
            .profiles
            .iter()
            .filter_map(|p| p.selector.as_ref())
            .any(payload)
}

impl Switch {
    /// Turn the fast lane off for this switch: every packet takes the general v1model flow
    /// (for differential tests of the two paths).
    pub fn use_slow_path(&mut self) {
        self.slow_only = true;
    }

    /// `(packets that entered the fast lane, of which handed to the general path when they
    /// left the common case)` since the switch was created.
    pub fn lane_counts(&self) -> (u64, u64) {
        (self.lane_counts[0], self.lane_counts[1])
    }

    /// Pipeline passes (ingress and egress runs: the input's, its resubmits,
    /// recirculations, clones and multicast replicas) run since the switch was created: a
    /// count of the work its packets did, for a scheduler that charges work (tern-virt's
    /// `Cost::Work`).
    pub fn passes(&self) -> u64 {
        self.passes
    }

    /// Whether the lane's common case runs as one generated function
    /// ([`crate::jit::Native::run_lane`]; without a behaviour cache: a switch with one runs
    /// the lane's Rust body).
    pub fn lane_generated(&self) -> bool {
        self.lane_why_not().is_none() && self.live.lane_plan.gen && self.bcache.is_none()
    }

    /// Why this switch's packets do not take the fast lane (`None`: the common case does).
    pub fn lane_why_not(&self) -> Option<String> {
        if self.slow_only {
            return Some("turned off".into());
        }
        if let Some(why) = &self.live.lane_off {
            return Some(why.clone());
        }
        if self.opts.max_instances_per_packet < 2 {
            return Some("max_instances_per_packet < 2".into());
        }
        None
    }

    /// Whether the next packet takes the fast lane (checked per packet: the trace and stage
    /// timing can be turned on at any time).
    #[inline]
    pub(super) fn lane_ready(&self) -> bool {
        let ext = &self.live.state.ext;
        self.live.lane_off.is_none()
            && !self.slow_only
            && ext.trace.is_none()
            && ext.probe.is_none()
            && ext.rec.is_none()
            && self.opts.max_instances_per_packet >= 2
    }

    /// One packet through the fast lane (see the module comment); the same effects and
    /// outputs as `process_one`'s general path. With a generated lane function
    /// ([`crate::jit::Native::run_lane`]) the common case is one native call; a packet it
    /// hands back goes on below from where it stopped.
    pub(super) fn process_lane(
        &mut self,
        now: u64,
        port: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        ctx: &mut LaneCtx,
    ) {
        let inst = &mut self.live;
        let eng: &Engine = &inst.engine;
        let st = &mut inst.state;
        let plan = &inst.lane_plan;
        let s = &plan.s;
        st.ext.now_us = now;
        self.lane_counts[0] += 1;
        // The ingress pass (the egress pass is counted where it runs).
        self.passes += 1;
        let len = data.len() as u32;
        let direct = inst.lane_direct;
        // The generated lane (`plan.gen` implies native code, `direct`); not through a
        // behaviour cache. The lane function deparses into an output buffer taken before the
        // call, from the pool within a bounded switch's quota (`Switch::set_buffer_quota`);
        // when there is none to give, the Rust lane below runs the packet instead and its
        // deparser drops the frame (counted), as the general path's does.
        let gen_bytes = match plan.gen && self.bcache.is_none() {
            true => pool_buf(&mut self.spare, &mut self.bufs),
            false => None,
        };
        let gen = gen_bytes.is_some();
        let mut pkt = match self.lane_pkt.take() {
            // The lane function resets the PHV.
            Some(mut p) if gen && plan.gen_resets => {
                renew_bare(&mut p, len, port);
                p
            }
            Some(mut p) => {
                renew_pkt(&mut p, &eng.layout, data, !direct, port);
                p
            }
            None => fresh_pkt(self.pool.pop(), &eng.layout, data, !direct, port),
        };
        let jit = eng.jit.as_ref();

        if let (Some(mut bytes), Some(j)) = (gen_bytes, jit) {
            let mut offs = std::mem::take(&mut st.emit_off);
            let nq = self.opts.priority_queues.max(1) as u64;
            let end = j.run_lane(
                ctx, eng, st, &mut pkt, data, port, now, nq, &mut bytes, &mut offs,
            );
            let end = end.expect("plan.gen: the lane function exists");
            self.lane_gen_end(end, pkt, Some(bytes), offs, data, now, out, ctx);
            return;
        }

        let phv = &mut pkt.phv;
        put(phv, &s.ingress_port, port as u64);
        put(phv, &s.packet_length, len as u64);
        put(phv, &s.ingress_ts, now);

        // Parse (native: `why_not` checked it at load) and verify.
        let parsed = if direct {
            // `direct` implies a native parser; the frame stays in `data`.
            jit.and_then(|j| j.parse_bytes(&mut pkt.phv, data, &mut st.parser))
                .map(|(e, off)| {
                    pkt.payload_off = off;
                    e
                })
        } else {
            jit.and_then(|j| j.parse(&mut pkt, &mut st.parser))
        };
        let err = match parsed {
            Some(e) => e,
            None => {
                copy_in(&mut pkt, data, direct);
                eng.parse(st, &mut pkt)
            }
        };
        let bad = plan.verify && eng.verify_checksums(&mut st.ext, &pkt);
        put(&mut pkt.phv, &s.parser_error, err as u64);
        put(&mut pkt.phv, &s.checksum_error, bad as u64);

        // Ingress, through the behaviour cache when the switch has one (`fast_cache`).
        // An empty pipeline has nothing to run (untraced: the lane never traces).
        if let Some(r) = fast_cache::ingress(self.bcache.as_deref_mut(), eng, st, &mut pkt) {
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        } else if let Some(i) = plan.ingress {
            let r = match jit.and_then(|j| j.run_pipeline_at(&mut ctx.burst, eng, st, &mut pkt, i))
            {
                Some(r) => r,
                None => eng.run_pipeline(st, &mut pkt, "ingress", eng.ingress.flatten()),
            };
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        }
        self.lane_mid(now, data, out, &mut ctx.burst, pkt);
    }

    /// The generated lane's packet after the call (`end`): a packet sent with its
    /// checksums left to Rust, a drop, or one handed back after a pipeline goes on here as the
    /// Rust lane does. `bytes` holds what the lane function wrote (a spare buffer), `offs`
    /// the emit offsets taken out of the state (put back here). Counts the packet's passes
    /// but the first (the caller's).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn lane_gen_end(
        &mut self,
        end: LaneEnd,
        mut pkt: Box<Pkt>,
        bytes: Option<Vec<u8>>,
        offs: Vec<u32>,
        data: &[u8],
        now: u64,
        out: &mut Vec<OutputPacket>,
        ctx: &mut LaneCtx,
    ) {
        let inst = &mut self.live;
        let eng: &Engine = &inst.engine;
        let st = &mut inst.state;
        match end {
            LaneEnd::Sent {
                port, csum_left, ..
            } => {
                self.passes += 1;
                let Some(mut bytes) = bytes else {
                    // No buffer to give (a bounded switch's pool empty: counted as a drop).
                    st.emit_off = offs;
                    self.lane_pkt = Some(pkt);
                    return;
                };
                if csum_left {
                    if let Some(plan) = &eng.csum_plan {
                        eng.update_checksums_emitted(
                            &mut st.ext,
                            &mut pkt,
                            plan,
                            &offs,
                            &mut bytes,
                        );
                    }
                    bytes.extend_from_slice(&data[pkt.payload_off.min(data.len())..]);
                }
                st.emit_off = offs;
                if let Some(t) = pkt.regs.truncate {
                    bytes.truncate(t as usize);
                }
                out.push(OutputPacket { port, data: bytes });
                self.lane_pkt = Some(pkt);
            }
            LaneEnd::Dropped { passes } => {
                st.emit_off = offs;
                self.passes += u64::from(passes) - 1;
                self.spare.extend(bytes);
                self.lane_pkt = Some(pkt);
            }
            LaneEnd::AfterIngress(r) => {
                st.emit_off = offs;
                self.spare.extend(bytes);
                if r.is_err() {
                    self.lane_pkt = Some(pkt);
                    return;
                }
                self.lane_mid(now, data, out, &mut ctx.burst, pkt);
            }
            LaneEnd::AfterEgress(r, port) => {
                st.emit_off = offs;
                self.spare.extend(bytes);
                self.passes += 1;
                pkt.enq_ts = now;
                if r.is_err() {
                    self.lane_pkt = Some(pkt);
                    return;
                }
                self.lane_late(now, data, out, pkt, port);
            }
        }
    }

    /// A burst through the generated lane ([`Switch::lane_generated`], the lane ready, no
    /// shared externs: the caller checked), the outputs into `sink`'s destinations
    /// ([`super::burst::EmitSink`]: the lane function deparses straight into the destination
    /// of the packet's port) or else into `out` ([`super::burst::BurstOut`]): the context's
    /// pointers and constants set once (again only after a packet left the common case), the
    /// room reserved once for the whole burst, and per forwarded packet only: renew the lane's
    /// packet instance, call the lane function, account the output (the sink's `wrote`, or a
    /// descriptor). A packet the lane function does not finish goes on as in
    /// [`Switch::process_lane`], its outputs copied (to the sink first, in order). Returns the
    /// number of packets that left no output.
    pub(super) fn lane_burst<S: super::burst::EmitSink + ?Sized>(
        &mut self,
        now: u64,
        pkts: &[(Port, &[u8])],
        out: &mut super::burst::BurstOut,
        sink: &mut S,
    ) -> u64 {
        let n = pkts.len();
        if n == 0 {
            return 0;
        }
        let emit_max = self.live.engine.jit.as_ref().map_or(0, |j| j.emit_max());
        // The room of the whole burst, checked (and reserved) once: headers and payload of
        // every packet in `out`, a descriptor each, and the largest packet's room `n` times in
        // every destination of the sink.
        let (total, longest) = pkts.iter().fold((0usize, 0usize), |(t, m), (_, d)| {
            (t.saturating_add(d.len()), m.max(d.len()))
        });
        let room = total.saturating_add(n * emit_max);
        let one = emit_max + longest;
        out.bytes.reserve(room);
        out.descs.reserve(n);
        let nq = self.opts.priority_queues.max(1) as u64;
        let mut ctx = LaneCtx::new();
        let mut dropped = 0u64;
        let mut i = 0usize;
        loop {
            let inst = &mut self.live;
            let eng: &Engine = &inst.engine;
            let st = &mut inst.state;
            let resets = inst.lane_plan.gen_resets;
            let j = eng.jit.as_ref().expect("lane_generated: native code");
            let mut pkt = match self.lane_pkt.take() {
                Some(p) => p,
                None => fresh_pkt(self.pool.pop(), &eng.layout, &[], false, 0),
            };
            st.ext.now_us = now;
            let mut offs = std::mem::take(&mut st.emit_off);
            let entry = j
                .lane_enter(&mut ctx, eng, st, &mut pkt, now, nq, &mut offs)
                .expect("lane_generated: the lane function exists");
            let (tbl, np) = sink.begin(n - i, one);
            ctx.set_port_out(tbl, np);
            // The output's next byte and descriptor, kept here (the vectors' lengths are set
            // once the loop stops).
            let (mut used, mut nd) = (out.bytes.len(), out.descs.len());
            let bytes = out.bytes.as_mut_ptr();
            let descs = out.descs.as_mut_ptr();
            let (mut sent, mut drop_passes, start) = (0u64, 0u64, i);
            let mut r = 0;
            let mut at = bytes;
            if resets {
                // The whole instance once; per packet below only what a packet the lane
                // function sent or dropped can have changed (`renew_sent`).
                renew_bare(&mut pkt, 0, 0);
            }
            while i < n {
                let (port, data) = pkts[i];
                let len = data.len() as u32;
                if resets {
                    renew_sent(&mut pkt, len, port);
                } else {
                    super::renew_pkt(&mut pkt, &eng.layout, data, false, port);
                }
                // SAFETY: `lane_enter` pointed the context at `eng`, `st`, `*pkt` and `offs`,
                // not used otherwise since (`renew_*` above only stores into the packet's
                // registers, lengths and PHV bytes, in place, before the call; the PHV's
                // arrays keep their addresses). `bytes + used` has room for
                // `entry.room(data.len())` bytes: the room reserved above covers every packet
                // of the burst, of which those before `i` used at most theirs; so does each
                // non-null entry of the sink's table (`EmitSink`'s contract: room for
                // `n - start` packets of `one >= entry.room(data.len())` bytes since `begin`).
                // Neither can overlap `data`, a caller's slice beside these exclusive borrows.
                at = unsafe { bytes.add(used) };
                r = unsafe { entry.call(&mut ctx, data, port, at) };
                let Some(w) = LaneEntry::sent(r) else {
                    match LaneEntry::dropped(r) {
                        Some(p) => {
                            drop_passes += p;
                            dropped += 1;
                            i += 1;
                            continue;
                        }
                        None => break,
                    }
                };
                let mut w = w.min(entry.room(data.len()));
                if let Some(t) = pkt.regs.truncate {
                    w = w.min(t as usize);
                }
                let eport = LaneEntry::port(&ctx);
                // SAFETY: `tbl` has `np` entries (the sink's contract).
                if (eport as usize) < np && !unsafe { *tbl.add(eport as usize) }.is_null() {
                    // Written at the port's destination.
                    sink.wrote(eport, i as u32, w);
                } else {
                    // SAFETY: `nd < out.descs.len() + n` (one descriptor per forwarded packet
                    // of this burst, reserved above); the bytes `[used, used + w)` were
                    // written by the call (`w` bounded by its room).
                    unsafe {
                        descs.add(nd).write(super::burst::OutDesc {
                            port: eport,
                            pkt: i as u32,
                            off: used,
                            len: w,
                        });
                    }
                    nd += 1;
                    used += w;
                }
                sent += 1;
                i += 1;
            }
            // SAFETY: as above: every byte below `used` and every descriptor below `nd` was
            // written, within the reserved capacity.
            unsafe {
                out.bytes.set_len(used);
                out.descs.set_len(nd);
            }
            let ran = (i - start) as u64;
            self.lane_counts[0] += ran;
            self.passes += 2 * sent + drop_passes;
            ctx.flush_parser(&mut st.parser);
            if i == n {
                sink.end();
                st.emit_off = offs;
                self.lane_pkt = Some(pkt);
                return dropped;
            }
            // Packet `i` left the common case: it goes on as in `process_lane`, its outputs
            // copied to the sink or into `out`.
            let data = pkts[i].1;
            let end = j.lane_status(r, &mut ctx, &mut pkt, data.len());
            // A sent frame's buffer from the pool (a bounded switch with none left drops the
            // frame, counted: `lane_gen_end` with no buffer); the other ends need none here.
            let mut spare = match end {
                LaneEnd::Sent { .. } => counted_buf(&mut self.spare, &mut self.bufs),
                _ => None,
            };
            if let (LaneEnd::Sent { bytes: w, .. }, Some(spare)) = (&end, spare.as_mut()) {
                let w = *w;
                spare.clear();
                // The headers were emitted where the lane function put them (the port's
                // destination, or `at`), `w` bytes.
                let eport = LaneEntry::port(&ctx) as usize;
                // SAFETY: `tbl` has `np` entries; the destination holds the `w <= room` bytes
                // the call wrote (checksums left to Rust: nothing else moved it since).
                let src = match (eport < np).then(|| unsafe { *tbl.add(eport) }) {
                    Some(d) if !d.is_null() => d,
                    _ => at,
                };
                spare.extend_from_slice(unsafe { std::slice::from_raw_parts(src, w) });
            }
            sink.end();
            self.lane_counts[0] += 1;
            self.passes += 1;
            let mut scratch = std::mem::take(&mut out.scratch);
            self.lane_gen_end(end, pkt, spare, offs, data, now, &mut scratch, &mut ctx);
            dropped += u64::from(scratch.is_empty());
            out.take_outputs(i as u32, &scratch, sink);
            self.recycle_outputs(&mut scratch);
            out.scratch = scratch;
            // Room again for the rest (the copied outputs may have used some of it).
            out.bytes.reserve(room);
            out.descs.reserve(n - i);
            i += 1;
        }
    }

    /// The lane after the ingress pipeline ran (normally): the divergence test, the
    /// after-ingress decision, egress, and on to [`Switch::lane_late`].
    #[inline(always)]
    fn lane_mid(
        &mut self,
        now: u64,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        ctx: &mut BurstCtx,
        mut pkt: Box<Pkt>,
    ) {
        let inst = &mut self.live;
        let eng: &Engine = &inst.engine;
        let st = &mut inst.state;
        let plan = &inst.lane_plan;
        let s = &plan.s;
        let direct = inst.lane_direct;
        let jit = eng.jit.as_ref();
        let regs = &pkt.regs;
        if regs.clone.is_some()
            || regs.digest.is_some()
            || regs.resubmit != 0
            || pkt.phv.read_std(&s.mcast_grp) != 0
        {
            // Diverged: the rest of this packet's life on the general path, from ingress's
            // epilogue (the pipeline ran once, above).
            self.lane_counts[1] += 1;
            copy_in(&mut pkt, data, direct);
            self.jobs.clear();
            let mut flow = general_flow!(self, eng, st, out, now, self.bcache.as_deref_mut());
            let next = flow.ingress_tail(pkt).map(|(p, port)| Job::Egress(p, port));
            let ran = flow.run_jobs(next, self.opts.max_instances_per_packet - 1);
            self.passes += ran as u64;
            return;
        }
        pkt.regs.exit = false;
        let phv = &mut pkt.phv;
        let spec = phv.read_std(&s.egress_spec);
        // Drop; then the priority check of `Flow::admit` (BMv2 drops a packet whose priority
        // has no queue).
        let prio = phv.read_std(&s.priority);
        if spec == plan.drop_port || prio >= self.opts.priority_queues.max(1) as u64 {
            self.lane_pkt = Some(pkt);
            return;
        }
        let port = spec as u32;

        // Enqueue and dequeue at once: the queue is empty (depth 0, no time in it).
        put(phv, &s.instance_type, 0);
        if let Some([ts, qd, dt, dq]) = &s.queueing {
            put(phv, ts, now);
            put(phv, qd, 0);
            put(phv, dt, 0);
            put(phv, dq, 0);
            put(phv, &s.qid, prio);
        }
        put(phv, &s.egress_ts, now);
        put(phv, &s.egress_port, port as u64);
        put(phv, &s.egress_spec, plan.drop_port + 1);
        put(phv, &s.packet_length, pkt.length_reg as u64);
        pkt.enq_ts = now;

        self.passes += 1;
        // Egress (through the egress behaviour cache when there is one).
        // An empty pipeline has nothing to run (untraced: the lane never traces).
        if let Some(r) = fast_cache::egress(self.bcache.as_deref_mut(), eng, st, &mut pkt) {
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        } else if let Some(i) = plan.egress {
            let r = match jit.and_then(|j| j.run_pipeline_at(ctx, eng, st, &mut pkt, i)) {
                Some(r) => r,
                None => eng.run_pipeline(st, &mut pkt, "egress", eng.egress.flatten()),
            };
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        }
        self.lane_late(now, data, out, pkt, port);
    }

    /// The lane after the egress pipeline ran (normally) for `port`: the divergence test,
    /// the drop test, the deparser.
    #[inline(always)]
    fn lane_late(
        &mut self,
        now: u64,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
        mut pkt: Box<Pkt>,
        port: u32,
    ) {
        let inst = &mut self.live;
        let eng: &Engine = &inst.engine;
        let st = &mut inst.state;
        let plan = &inst.lane_plan;
        let s = &plan.s;
        let direct = inst.lane_direct;
        let jit = eng.jit.as_ref();
        if pkt.regs.clone.is_some() || pkt.regs.recirculate != 0 {
            // Diverged after egress: clone, deparse, recirculate on the general path.
            self.lane_counts[1] += 1;
            copy_in(&mut pkt, data, direct);
            self.jobs.clear();
            let mut flow = general_flow!(self, eng, st, out, now, self.bcache.as_deref_mut());
            flow.egress_tail(pkt, port);
            let ran = flow.run_jobs(None, self.opts.max_instances_per_packet - 2);
            self.passes += ran as u64;
            return;
        }
        pkt.regs.exit = false;
        if pkt.phv.read_std(&s.egress_spec) == plan.drop_port {
            self.lane_pkt = Some(pkt);
            return;
        }

        // Deparse (checksums updated over the emitted headers) straight into the output
        // buffer, the payload appended once.
        // The output buffer from the pool; a bounded switch with none left drops the frame
        // (counted), as the general path's deparser does.
        let Some(mut bytes) = counted_buf(&mut self.spare, &mut self.bufs) else {
            self.lane_pkt = Some(pkt);
            return;
        };
        bytes.clear();
        bytes.reserve(data.len() + 64);
        let emitted = direct && {
            if !plan.planned {
                eng.update_checksums(&mut st.ext, &mut pkt);
            }
            // The emit function with the checksums compiled in, when it applies (it exists only
            // with a plan); else the emit loop. Planned checksums it did not do run after it.
            let compiled = match jit {
                Some(j) if plan.emit_csum => {
                    j.emit_csum(&mut pkt.phv, &mut bytes, &mut st.emit_off)
                }
                _ => None,
            };
            let native = compiled.is_some()
                || jit.is_some_and(|j| j.emit(&pkt.phv, &mut bytes, &mut st.emit_off));
            if native && compiled != Some(true) {
                if let Some(plan) = &eng.csum_plan {
                    eng.update_checksums_emitted(
                        &mut st.ext,
                        &mut pkt,
                        plan,
                        &st.emit_off,
                        &mut bytes,
                    );
                }
            }
            native
        };
        if emitted {
            bytes.extend_from_slice(&data[pkt.payload_off.min(data.len())..]);
        } else {
            copy_in(&mut pkt, data, direct);
            eng.deparse(st, &mut pkt, &mut bytes);
        }
        if let Some(t) = pkt.regs.truncate {
            bytes.truncate(t as usize);
        }
        out.push(OutputPacket { port, data: bytes });
        self.lane_pkt = Some(pkt);
    }
}

/// An output buffer for the lane: a spare one from the pool, else a new one within a bounded
/// switch's quota (counted as made, as `Flow::out_buf` does); `None` (not counted) when the
/// quota is made and the pool empty.
#[inline(always)]
fn pool_buf(spare: &mut Vec<Vec<u8>>, bufs: &mut super::Buffers) -> Option<Vec<u8>> {
    match spare.pop() {
        Some(b) => Some(b),
        None => new_buf(bufs),
    }
}

/// [`pool_buf`]'s new buffer (see `Flow::out_buf`).
#[cold]
#[inline(never)]
fn new_buf(bufs: &mut super::Buffers) -> Option<Vec<u8>> {
    match bufs.quota {
        Some(q) if bufs.bufs_made >= q => None,
        Some(_) => {
            bufs.bufs_made += 1;
            Some(Vec::with_capacity(super::POOL_FRAME))
        }
        None => Some(Vec::new()),
    }
}

/// [`pool_buf`] with `None` counted as a dropped frame (`Switch::buffer_drops`).
#[inline(always)]
fn counted_buf(spare: &mut Vec<Vec<u8>>, bufs: &mut super::Buffers) -> Option<Vec<u8>> {
    let b = pool_buf(spare, bufs);
    if b.is_none() {
        bufs.drops += 1;
    }
    b
}

/// `renew_pkt` of the lane's own `direct` instance but for the PHV, which the generated lane
/// function resets ([`crate::jit::Native::lane_resets_phv`]).
#[inline(always)]
fn renew_bare(p: &mut Pkt, len: u32, port: u32) {
    p.data.clear();
    p.payload_off = 0;
    p.regs = PktRegs::default();
    p.enq_ts = 0;
    p.ingress_len = len;
    p.length_reg = len;
    p.ingress_port = port;
}

/// [`renew_bare`] of the lane's instance after a packet the generated lane function sent or
/// dropped (or after `renew_bare`): the function stores only into the PHV (which it resets),
/// the length register and the `len_saturated` and `truncate` registers; every other register
/// a helper sets (clone, digest, resubmit, recirculate, a fault) or `exit` hands the packet back
/// to Rust (`with_ctx` sets the context's `touched` word; `exit` is a return code), and the
/// frame, `payload_off` and `enq_ts` are set on that path only.
#[inline(always)]
fn renew_sent(p: &mut Pkt, len: u32, port: u32) {
    p.regs.truncate = None;
    p.regs.len_saturated = false;
    p.ingress_len = len;
    p.length_reg = len;
    p.ingress_port = port;
}

/// Give a `direct` lane packet its frame (before it leaves the lane or meets a stage that
/// reads the packet's own bytes); nothing to do otherwise (already copied).
#[inline]
fn copy_in(pkt: &mut Pkt, data: &[u8], direct: bool) {
    if direct && pkt.data.is_empty() {
        pkt.data.extend_from_slice(data);
    }
}
