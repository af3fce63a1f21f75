//! Outputs of a burst in one buffer (issue 21, round 7): [`BurstOut`] and
//! [`Switch::process_burst`].
//!
//! [`Switch::process_batch`] hands back one `Vec<u8>` per output ([`OutputPacket`]), which the
//! caller gives back for reuse: per packet a spare buffer taken, cleared and reserved, an
//! output pushed, a buffer recycled. `process_burst` writes the burst's outputs back to back
//! into one byte buffer whose room is checked once per burst, with a descriptor each (port,
//! packet, offset, length) in a preallocated array: on the generated lane
//! ([`Switch::lane_generated`]) the lane function deparses straight into that buffer, and the
//! Rust around the call is "renew the packet, call, write the descriptor". Every other packet
//! (and every packet of a switch that cannot run the generated lane) takes the path of
//! `process_batch`, its outputs copied into the buffer: the same outputs in the same order.

use super::Switch;
use tern_runtime::{OutputPacket, Port};

/// One output of a burst: its port, the packet of the burst it came from (index into the
/// frames given to [`Switch::process_burst`]), and where its bytes are in the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutDesc {
    pub port: Port,
    pub pkt: u32,
    pub(super) off: usize,
    pub(super) len: usize,
}

/// The outputs of one or more bursts (see the module comment): appended by
/// [`Switch::process_burst`], read with [`BurstOut::iter`] or [`BurstOut::descs`] and
/// [`BurstOut::data`], emptied with [`BurstOut::clear`] (the memory is kept: reused across
/// bursts it allocates nothing per packet).
#[derive(Debug, Default)]
pub struct BurstOut {
    pub(super) bytes: Vec<u8>,
    pub(super) descs: Vec<OutDesc>,
    /// Working space of the packets that take the general path (their outputs copied).
    pub(super) scratch: Vec<OutputPacket>,
}

impl BurstOut {
    pub fn new() -> BurstOut {
        BurstOut::default()
    }

    /// Outputs held.
    #[inline]
    pub fn len(&self) -> usize {
        self.descs.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.descs.is_empty()
    }

    /// Forget the outputs (keeping the memory).
    #[inline]
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.descs.clear();
    }

    /// The outputs' descriptors, in the order they left.
    #[inline]
    pub fn descs(&self) -> &[OutDesc] {
        &self.descs
    }

    /// The bytes of output `d` (one of [`BurstOut::descs`]).
    #[inline]
    pub fn data(&self, d: &OutDesc) -> &[u8] {
        &self.bytes[d.off..d.off + d.len]
    }

    /// The outputs in the order they left: (port, packet of the burst, bytes).
    pub fn iter(&self) -> impl Iterator<Item = (Port, u32, &[u8])> + '_ {
        self.descs.iter().map(|d| (d.port, d.pkt, self.data(d)))
    }

    /// Add `base` to the packet index of the outputs from the `first`-th on (a caller that
    /// cut its batch into several [`Switch::process_burst`] calls numbers them as one).
    pub fn renumber(&mut self, first: usize, base: u32) {
        for d in &mut self.descs[first..] {
            d.pkt += base;
        }
    }

    /// The outputs' descriptors, to change their ports or packet numbers (a caller that
    /// renumbers ports on the way out: tern-virt's virtual ports).
    #[inline]
    pub fn descs_mut(&mut self) -> &mut [OutDesc] {
        &mut self.descs
    }

    /// Keep the outputs from the `first`-th on for which `keep(desc, bytes)` is true, in order
    /// (the closure may change the descriptor's port); the others are forgotten (their bytes
    /// stay in the buffer until [`BurstOut::clear`]).
    pub fn retain_from(&mut self, first: usize, mut keep: impl FnMut(&mut OutDesc, &[u8]) -> bool) {
        let mut at = first;
        for i in first..self.descs.len() {
            let mut d = self.descs[i];
            let (off, len) = (d.off, d.len);
            if keep(&mut d, &self.bytes[off..off + len]) {
                self.descs[at] = d;
                at += 1;
            }
        }
        self.descs.truncate(at);
    }

    /// Forget the outputs from the `n`-th on (and their bytes, when they are the buffer's
    /// last: outputs are appended in order).
    pub fn truncate(&mut self, n: usize) {
        if let Some(d) = self.descs.get(n) {
            self.bytes.truncate(d.off);
        }
        self.descs.truncate(n);
    }

    /// Append one output (a copy of `data`).
    pub fn push_copy(&mut self, port: Port, pkt: u32, data: &[u8]) {
        let off = self.bytes.len();
        self.bytes.extend_from_slice(data);
        self.descs.push(OutDesc {
            port,
            pkt,
            off,
            len: data.len(),
        });
    }

    /// Packet `pkt`'s outputs made the `process_batch` way: each to `sink`, or copied in
    /// where the sink has no destination for its port.
    #[inline]
    pub(crate) fn take_outputs<S: EmitSink + ?Sized>(
        &mut self,
        pkt: u32,
        outputs: &[OutputPacket],
        sink: &mut S,
    ) {
        for o in outputs {
            if !sink.output(o.port, pkt, &o.data) {
                self.push_copy(o.port, pkt, &o.data);
            }
        }
    }
}

/// Destinations the generated lane deparses into straight, port by port (a pcap file's
/// buffer, a ring): [`Switch::process_burst_into`] gives the lane function a table of write
/// positions indexed by egress port, and a packet to a port with one is deparsed there (headers,
/// checksums, payload), with no intermediate copy; the sink then finishes the record
/// ([`EmitSink::wrote`]). Outputs not written in place (those of packets that left the lane's
/// common case) come through [`EmitSink::output`], in order with the others.
///
/// # Safety
/// After `begin(n, room)` returned `(tbl, len)` and until `end`: `tbl` points at `len`
/// pointers, not moved; each non-null entry points at memory valid for writes of `room` bytes,
/// touched by nothing else, and so it stays after each of up to `n` `wrote` calls (which may
/// change the entries); the memory does not overlap the frames of the burst or the switch.
pub unsafe trait EmitSink {
    /// Up to `n` packets of at most `room` output bytes each may go out: the table of write
    /// positions by port (see the trait's contract) and its length; `(null, 0)`: none.
    fn begin(&mut self, n: usize, room: usize) -> (*const *mut u8, usize);
    /// Packet `pkt` of the burst wrote its `len`-byte output to `port` at the table's
    /// position: finish the record, move the position on.
    fn wrote(&mut self, port: Port, pkt: u32, len: usize);
    /// An output not written in place (copied): `false` if the sink has no destination for
    /// `port` (then it is left in the [`BurstOut`]).
    fn output(&mut self, port: Port, pkt: u32, data: &[u8]) -> bool;
    /// The table's positions are no longer used (the burst ended, or a packet left the lane).
    fn end(&mut self);
}

/// No destinations: every output in the [`BurstOut`].
struct NoSink;

// SAFETY: no table.
unsafe impl EmitSink for NoSink {
    #[inline(always)]
    fn begin(&mut self, _: usize, _: usize) -> (*const *mut u8, usize) {
        (std::ptr::null(), 0)
    }
    fn wrote(&mut self, _: Port, _: u32, _: usize) {
        unreachable!("no destinations")
    }
    #[inline(always)]
    fn output(&mut self, _: Port, _: u32, _: &[u8]) -> bool {
        false
    }
    #[inline(always)]
    fn end(&mut self) {}
}

impl Switch {
    /// [`Switch::process_batch`] with the outputs appended to `out` (see the module comment)
    /// instead of one `Vec` each: the same outputs in the same order, packet `i` of `pkts`
    /// leaving descriptors with `pkt == i`. The clock is read once for the burst. Returns the
    /// number of packets that left no output (dropped). `out` is not cleared.
    pub fn process_burst(&mut self, pkts: &[(Port, &[u8])], out: &mut BurstOut) -> u64 {
        let now = self.packet_now_us();
        self.process_burst_at(now, pkts, out)
    }

    /// [`Switch::process_burst`] at switch time `now` (from [`Switch::now_us`], or a fixed
    /// clock).
    pub fn process_burst_at(
        &mut self,
        now: u64,
        pkts: &[(Port, &[u8])],
        out: &mut BurstOut,
    ) -> u64 {
        self.process_burst_into(now, pkts, out, &mut NoSink)
    }

    /// [`Switch::process_burst_at`] with the outputs to the ports `sink` has a destination
    /// for written there ([`EmitSink`]; on the generated lane the lane function deparses into
    /// it), in order; the others appended to `out`.
    pub fn process_burst_into<S: EmitSink + ?Sized>(
        &mut self,
        now: u64,
        pkts: &[(Port, &[u8])],
        out: &mut BurstOut,
        sink: &mut S,
    ) -> u64 {
        assert!(
            pkts.len() <= u32::MAX as usize,
            "a burst of more than 2^32 packets"
        );
        if self.shared.is_none() && self.lane_ready() && self.lane_generated() {
            return self.lane_burst(now, pkts, out, sink);
        }
        // Every other switch: `process_batch`'s path, the outputs copied.
        let mut scratch = std::mem::take(&mut out.scratch);
        let mut dropped = 0;
        for (i, &(port, data)) in pkts.iter().enumerate() {
            self.process_at(now, port, data, &mut scratch);
            dropped += u64::from(scratch.is_empty());
            out.take_outputs(i as u32, &scratch, sink);
            self.recycle_outputs(&mut scratch);
        }
        out.scratch = scratch;
        dropped
    }
}
