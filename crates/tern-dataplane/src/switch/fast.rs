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
//! With a behaviour cache the lane runs its pipelines through it (`super::fast_cache`): a
//! hit replays the cached behaviour in place of the pipeline and the packet goes on in the
//! lane.
//!
//! Eligibility is decided when a program loads ([`why_not`]) and shown in the bench's
//! `native code:` line (`fast lane on` / `fast lane off (why)`).

use super::{fast_cache, fresh_pkt, set, Flow, Job, Switch};
use crate::compile::Engine;
use crate::exec::Pkt;
use tern_runtime::{OutputPacket, Port};

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
    /// outputs as `process_one`'s general path.
    pub(super) fn process_lane(
        &mut self,
        now: u64,
        port: Port,
        data: &[u8],
        out: &mut Vec<OutputPacket>,
    ) {
        let inst = &mut self.live;
        let eng: &Engine = &inst.engine;
        let st = &mut inst.state;
        st.ext.now_us = now;
        self.lane_counts[0] += 1;
        // The ingress pass (the egress pass is counted where it runs).
        self.passes += 1;
        let len = data.len() as u32;
        let direct = inst.lane_direct;
        let reuse = self.lane_pkt.take().or_else(|| self.pool.pop());
        let mut pkt = fresh_pkt(reuse, &eng.layout, data, !direct, port);
        let phv = &mut pkt.phv;
        set(eng, phv, |s| &s.ingress_port, port as u64);
        set(eng, phv, |s| &s.packet_length, len as u64);
        set(eng, phv, |s| &s.ingress_ts, now);

        // Parse (native: `why_not` checked it at load) and verify.
        let jit = eng.jit.as_ref();
        let parsed = if direct {
            // `direct` implies a native parser; the frame stays in `data`.
            jit.and_then(|j| j.parse_bytes(&mut pkt.phv, data))
                .map(|(e, off)| {
                    pkt.payload_off = off;
                    e
                })
        } else {
            jit.and_then(|j| j.parse(&mut pkt))
        };
        let err = match parsed {
            Some(e) => e,
            None => {
                copy_in(&mut pkt, data, direct);
                eng.parse(st, &mut pkt)
            }
        };
        let bad = eng.std.checksum_error.f.is_some() && eng.verify_checksums(&mut st.ext, &pkt);
        set(eng, &mut pkt.phv, |s| &s.parser_error, err as u64);
        set(eng, &mut pkt.phv, |s| &s.checksum_error, bad as u64);

        // Ingress, through the behaviour cache when the switch has one (`fast_cache`).
        // An empty pipeline has nothing to run (untraced: the lane never traces).
        if let Some(r) = fast_cache::ingress(self.bcache.as_deref_mut(), eng, st, &mut pkt) {
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        } else if let Some(Some(init)) = eng.ingress {
            let r = match jit.and_then(|j| j.run_pipeline(eng, st, &mut pkt, init)) {
                Some(r) => r,
                None => eng.run_pipeline(st, &mut pkt, "ingress", Some(init)),
            };
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        }
        let regs = &pkt.regs;
        if regs.clone.is_some()
            || regs.digest.is_some()
            || regs.resubmit != 0
            || eng.get_std(&pkt.phv, |s| &s.mcast_grp) != 0
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
        let spec = eng.get_std(&pkt.phv, |s| &s.egress_spec);
        // Drop; then the priority check of `Flow::admit` (BMv2 drops a packet whose priority
        // has no queue).
        if spec == eng.drop_port as u64
            || eng.get_std(&pkt.phv, |s| &s.priority) >= self.opts.priority_queues.max(1) as u64
        {
            self.lane_pkt = Some(pkt);
            return;
        }
        let port = spec as u32;

        // Enqueue and dequeue at once: the queue is empty (depth 0, no time in it).
        let phv = &mut pkt.phv;
        set(eng, phv, |s| &s.instance_type, 0);
        if let Some([ts, qd, dt, dq]) = eng.std.queueing {
            crate::exec::store_field_u64(phv, &ts, now);
            crate::exec::store_field_u64(phv, &qd, 0);
            crate::exec::store_field_u64(phv, &dt, 0);
            crate::exec::store_field_u64(phv, &dq, 0);
            let prio = eng.get_std(phv, |s| &s.priority);
            set(eng, phv, |s| &s.qid, prio);
        }
        pkt.enq_ts = now;
        let phv = &mut pkt.phv;
        set(eng, phv, |s| &s.egress_ts, now);
        set(eng, phv, |s| &s.egress_port, port as u64);
        set(eng, phv, |s| &s.egress_spec, eng.drop_port as u64 + 1);
        set(eng, phv, |s| &s.packet_length, pkt.length_reg as u64);

        self.passes += 1;
        // Egress (through the egress behaviour cache when there is one).
        // An empty pipeline has nothing to run (untraced: the lane never traces).
        if let Some(r) = fast_cache::egress(self.bcache.as_deref_mut(), eng, st, &mut pkt) {
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        } else if let Some(Some(init)) = eng.egress {
            let r = match jit.and_then(|j| j.run_pipeline(eng, st, &mut pkt, init)) {
                Some(r) => r,
                None => eng.run_pipeline(st, &mut pkt, "egress", Some(init)),
            };
            if r.is_err() {
                self.lane_pkt = Some(pkt);
                return;
            }
        }
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
        if eng.get_std(&pkt.phv, |s| &s.egress_spec) == eng.drop_port as u64 {
            self.lane_pkt = Some(pkt);
            return;
        }

        // Deparse (checksums updated over the emitted headers) straight into the output
        // buffer, the payload appended once.
        let mut bytes = self.spare.pop().unwrap_or_default();
        bytes.clear();
        bytes.reserve(data.len() + 64);
        let emitted = direct && {
            if eng.csum_plan.is_none() {
                eng.update_checksums(&mut st.ext, &mut pkt);
            }
            // The emit function with the checksums compiled in, when it applies (it exists only
            // with a plan); else the emit loop. Planned checksums it did not do run after it.
            let compiled = match (jit, &eng.csum_plan) {
                (Some(j), Some(_)) => j.emit_csum(&mut pkt.phv, &mut bytes, &mut st.emit_off),
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

/// Give a `direct` lane packet its frame (before it leaves the lane or meets a stage that
/// reads the packet's own bytes); nothing to do otherwise (already copied).
#[inline]
fn copy_in(pkt: &mut Pkt, data: &[u8], direct: bool) {
    if direct && pkt.data.is_empty() {
        pkt.data.extend_from_slice(data);
    }
}
