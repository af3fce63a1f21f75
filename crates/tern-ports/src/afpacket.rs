//! Live interfaces: [`LivePorts`], a [`PortIo`] port set over Linux AF_PACKET sockets (one per
//! `-i P@IFACE`), receiving through a memory-mapped ring (`poll()` with a timeout rather than
//! busy spinning) and transmitting in batches with `sendmmsg`. The ring is either per-frame
//! (TPACKET_V2, [`RxRing::Frames`], the default: every frame has its own status word, so
//! `poll()` wakes as soon as one arrives, as libpcap's immediate mode does for BMv2) or
//! block-based (TPACKET_V3, [`RxRing::Blocks`]: frames packed in blocks the kernel hands over
//! when full or after a retire timeout, which costs up to a timer tick of latency at low
//! rates). Either way every frame that is ready is taken without another `poll()`. Interfaces are put in promiscuous mode and the switch's own
//! outgoing frames are ignored. Also owns the SIGINT/SIGTERM stop flag ([`install_stop_signals`])
//! a live run ends on. Received frames are given back their original bytes: VLAN tags the
//! kernel moved into metadata are reinserted ([`insert_vlan_tag`]) and TCP/UDP checksums left
//! to offload are completed ([`complete_checksum`]).
//!
//! `unsafe` is confined to the libc calls and the ring accessors of this module, each with a
//! `// SAFETY:` comment.

use crate::ports::{PortError, PortIo, PortSpec, RxMeta};
use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::Arc;
use tern_runtime::Port;

/// `tpacket_versions::TPACKET_V2`.
const TPACKET_V2: libc::c_int = 1;
/// `tpacket_versions::TPACKET_V3`.
const TPACKET_V3: libc::c_int = 2;
/// Offsets in `struct tpacket2_hdr`; the `sockaddr_ll` follows at `TPACKET_ALIGN(32)`.
const V2_STATUS: usize = 0;
const V2_LEN: usize = 4;
const V2_SNAPLEN: usize = 8;
const V2_MAC: usize = 12;
const V2_SEC: usize = 16;
const V2_NSEC: usize = 20;
const V2_VLAN_TCI: usize = 24;
const V2_VLAN_TPID: usize = 26;
const V2_PKTTYPE: usize = 32 + 10;
/// `TPACKET2_HDRLEN` plus room for an Ethernet header: the smallest sensible frame.
const V2_MIN_FRAME: u32 = 128;
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr))`: where the `sockaddr_ll` follows a frame header.
const TPACKET3_HDRLEN: usize = 48;
/// Offsets in `struct tpacket_block_desc` (version, offset_to_priv, then `tpacket_hdr_v1`).
const BLK_STATUS: usize = 8;
const BLK_NUM_PKTS: usize = 12;
const BLK_FIRST: usize = 16;
/// Offsets in `struct tpacket3_hdr`.
const H_NEXT: usize = 0;
const H_SEC: usize = 4;
const H_NSEC: usize = 8;
const H_SNAPLEN: usize = 12;
const H_LEN: usize = 16;
const H_STATUS: usize = 20;
const H_MAC: usize = 24;
const H_VLAN_TCI: usize = 32;
const H_VLAN_TPID: usize = 36;
/// Offset of `sll_pkttype` in the `sockaddr_ll` after the header.
const SLL_PKTTYPE: usize = TPACKET3_HDRLEN + 10;

/// How the kernel hands received frames over (see the module documentation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RxRing {
    /// TPACKET_V2: fixed-size frames, each handed over on its own (lowest latency).
    #[default]
    Frames,
    /// TPACKET_V3: frames packed in blocks handed over when full or after
    /// [`LiveConfig::retire_ms`] (fewer wakeups under load, ~1-4 ms more latency when idle).
    Blocks,
}

/// Ring and batching parameters of a [`LivePorts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveConfig {
    /// Per-frame (default) or block ring.
    pub rx_ring: RxRing,
    /// Bytes per RX ring block (a power of two, a multiple of the page size).
    pub block_size: u32,
    /// Blocks per RX ring.
    pub block_nr: u32,
    /// [`RxRing::Frames`]: bytes per ring frame (a multiple of 16 dividing `block_size`).
    /// Frames that do not fit (jumbo or GRO/TSO frames) are not truncated: the kernel queues
    /// them on the socket as well (`PACKET_COPY_THRESH`) and they are read from there.
    pub frame_size: u32,
    /// [`RxRing::Blocks`]: block retire timeout in milliseconds (a partly filled block is
    /// handed over after it; the kernel rounds it to its timer tick).
    pub retire_ms: u32,
    /// `poll()` timeout in milliseconds: how often an idle loop checks the stop flag.
    pub poll_ms: i32,
    /// Frames queued per interface before a `sendmmsg`.
    pub tx_batch: usize,
    /// Put every interface in promiscuous mode.
    pub promisc: bool,
    /// Transmit straight to the driver (`PACKET_QDISC_BYPASS`), skipping the interface's
    /// queueing discipline; where the kernel refuses the option frames take the qdisc path.
    pub qdisc_bypass: bool,
}

impl Default for LiveConfig {
    fn default() -> Self {
        // 4 MiB per interface: 2048 frames of 2 KiB (an MTU-sized frame plus the 66-byte
        // header fits) in frame mode; in block mode, at ~0.5 Mpps of small frames a 1 ms block
        // holds ~64 KiB, and a 64 KiB GRO frame still fits in one block.
        LiveConfig {
            rx_ring: RxRing::Frames,
            block_size: 1 << 18,
            block_nr: 16,
            frame_size: 2048,
            retire_ms: 1,
            poll_ms: 100,
            tx_batch: 64,
            promisc: true,
            qdisc_bypass: true,
        }
    }
}

/// Counters of a [`LivePorts`] beyond what the run loop sees.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LiveStats {
    /// Frames received (after ignoring outgoing ones).
    pub rx: u64,
    /// Frames the kernel handed over with an incomplete TCP/UDP checksum that were completed.
    pub csum_completed: u64,
    /// Frames longer than a ring block could hold, or (frame mode) longer than a ring frame
    /// when the socket queue was full too (skipped).
    pub truncated: u64,
    /// Frame mode: frames longer than a ring frame, received whole from the socket queue.
    pub copied: u64,
    /// Frames handed to the kernel for transmission.
    pub tx: u64,
    /// Frames the kernel refused to send (e.g. larger than the MTU, interface down).
    pub tx_errors: u64,
    /// Socket errors reported while waiting (e.g. an interface went down or was deleted).
    pub iface_errors: u64,
}

/// The process-wide flag set by SIGINT / SIGTERM once [`install_stop_signals`] ran.
static SIGNALLED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop_signal(_sig: libc::c_int) {
    SIGNALLED.store(true, Ordering::SeqCst);
}

/// Make SIGINT and SIGTERM set a flag instead of killing the process: a live [`LivePorts`]
/// then returns `None` from `recv` (within one poll timeout) so the run ends cleanly.
/// Blocking calls are interrupted (no `SA_RESTART`) so the reaction is immediate.
pub fn install_stop_signals() -> io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: `sigaction` is plain old data, fully initialised by zeroing and then setting
        // the handler; the handler only stores to an atomic, which is async-signal-safe.
        let rc = unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_stop_signal as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(sig, &sa, std::ptr::null_mut())
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Whether SIGINT or SIGTERM arrived since [`install_stop_signals`].
pub fn stop_requested() -> bool {
    SIGNALLED.load(Ordering::SeqCst)
}

/// A memory-mapped RX ring. All access goes through bounds-checked methods.
struct Ring {
    base: *mut u8,
    len: usize,
}

impl Ring {
    fn map(fd: &OwnedFd, len: usize) -> io::Result<Ring> {
        // SAFETY: a fresh shared mapping of the packet socket's ring (size = block_size *
        // block_nr as configured with PACKET_RX_RING); the result is checked for MAP_FAILED.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            base: p.cast(),
            len,
        })
    }

    fn check(&self, off: usize, n: usize) -> Option<()> {
        (off.checked_add(n)? <= self.len).then_some(())
    }

    /// A status word the kernel writes: volatile read, then an acquire fence so the block's
    /// contents are read after it.
    fn load_status(&self, off: usize) -> u32 {
        if self.check(off, 4).is_none() || !off.is_multiple_of(4) {
            return 0;
        }
        // SAFETY: in bounds and 4-byte aligned (checked above; the mapping is page aligned).
        let v = unsafe { std::ptr::read_volatile(self.base.add(off).cast::<u32>()) };
        fence(Ordering::Acquire);
        v
    }

    /// Hand a block back to the kernel: a release fence so our reads happen before, then a
    /// volatile write.
    fn store_status(&self, off: usize, v: u32) {
        if self.check(off, 4).is_none() || !off.is_multiple_of(4) {
            return;
        }
        fence(Ordering::Release);
        // SAFETY: in bounds and aligned (checked above); the block belongs to user space until
        // this store, so nothing else writes the word concurrently.
        unsafe { std::ptr::write_volatile(self.base.add(off).cast::<u32>(), v) };
    }

    fn u32_at(&self, off: usize) -> Option<u32> {
        self.check(off, 4)?;
        // SAFETY: in bounds (checked); unaligned read of plain bytes in a user-owned block.
        Some(unsafe { std::ptr::read_unaligned(self.base.add(off).cast::<u32>()) })
    }

    fn u16_at(&self, off: usize) -> Option<u16> {
        self.check(off, 2)?;
        // SAFETY: in bounds (checked); unaligned read of plain bytes in a user-owned block.
        Some(unsafe { std::ptr::read_unaligned(self.base.add(off).cast::<u16>()) })
    }

    fn u8_at(&self, off: usize) -> Option<u8> {
        self.check(off, 1)?;
        // SAFETY: in bounds (checked).
        Some(unsafe { *self.base.add(off) })
    }

    fn copy_out(&self, off: usize, n: usize, buf: &mut Vec<u8>) -> Option<()> {
        self.check(off, n)?;
        buf.clear();
        buf.reserve(n);
        // SAFETY: source in bounds (checked) and owned by user space (block or frame status
        // USER);
        // destination has capacity `n` (reserved) and the length is set after the copy.
        unsafe {
            std::ptr::copy_nonoverlapping(self.base.add(off), buf.as_mut_ptr(), n);
            buf.set_len(n);
        }
        Some(())
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `Ring::map`, unmapped once.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

/// Frames waiting for one `sendmmsg`.
#[derive(Default)]
struct TxBatch {
    data: Vec<u8>,
    frames: Vec<(usize, usize)>,
}

/// One attached interface.
struct Iface {
    port: Port,
    name: String,
    // `ring` is declared before `fd` so it is unmapped before the socket closes.
    ring: Ring,
    fd: OwnedFd,
    mode: RxRing,
    block_size: usize,
    block_nr: usize,
    /// Frame mode: bytes per frame and frames in the ring.
    frame_size: usize,
    frame_nr: usize,
    /// Frame mode: the next frame to look at. Block mode: the block being read.
    slot: usize,
    /// Packets left in the current block, and the offset of the next one; `None` when the
    /// current block has not been taken from the kernel.
    cursor: Option<(u32, usize)>,
    tx: TxBatch,
}

pub(crate) fn os_err(name: &str, what: &'static str) -> PortError {
    PortError::Os {
        name: name.to_string(),
        what,
        error: io::Error::last_os_error(),
    }
}

pub(crate) fn setsockopt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    opt: libc::c_int,
    val: &T,
) -> io::Result<()> {
    // SAFETY: `val` points to a live `T` of exactly `size_of::<T>()` bytes for the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            opt,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The index of interface `name`, or a clear error.
pub(crate) fn ifindex(spec: &PortSpec) -> Result<libc::c_int, PortError> {
    let missing = || PortError::NoInterface {
        port: spec.port,
        name: spec.name.clone(),
    };
    if spec.name.len() >= libc::IFNAMSIZ {
        return Err(missing());
    }
    let c = CString::new(spec.name.as_bytes()).map_err(|_| missing())?;
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        return Err(missing());
    }
    libc::c_int::try_from(idx).map_err(|_| missing())
}

impl Iface {
    fn open(spec: &PortSpec, cfg: &LiveConfig) -> Result<Iface, PortError> {
        let name = spec.name.as_str();
        let idx = ifindex(spec)?;
        // Protocol 0: nothing is received until the ring is set up and the socket bound.
        // SAFETY: plain socket(2) call; the result is checked before it is wrapped.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let error = io::Error::last_os_error();
            return Err(match error.raw_os_error() {
                Some(libc::EPERM) | Some(libc::EACCES) => PortError::NotPermitted {
                    name: name.to_string(),
                },
                _ => PortError::Os {
                    name: name.to_string(),
                    what: "creating an AF_PACKET socket",
                    error,
                },
            });
        }
        // SAFETY: `raw` is a fresh, valid descriptor owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let frame_size = match cfg.rx_ring {
            RxRing::Frames => cfg.frame_size,
            // Block mode packs frames of any size; the kernel only wants a nominal one.
            RxRing::Blocks => 2048,
        };
        if frame_size < V2_MIN_FRAME
            || !frame_size.is_multiple_of(16)
            || cfg.block_size < frame_size
            || !cfg.block_size.is_multiple_of(frame_size)
            || !cfg.block_size.is_multiple_of(4096)
            || cfg.block_nr == 0
        {
            return Err(PortError::Os {
                name: name.to_string(),
                what: "ring configuration (block size must be a multiple of 4096 and of the \
                       frame size; frame size a multiple of 16, at least 128)",
                error: io::Error::from(io::ErrorKind::InvalidInput),
            });
        }
        let frame_nr = cfg.block_size / frame_size * cfg.block_nr;
        match cfg.rx_ring {
            RxRing::Frames => {
                setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V2)
                    .map_err(|_| os_err(name, "selecting TPACKET_V2"))?;
                let req = libc::tpacket_req {
                    tp_block_size: cfg.block_size,
                    tp_block_nr: cfg.block_nr,
                    tp_frame_size: frame_size,
                    tp_frame_nr: frame_nr,
                };
                setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
                    .map_err(|_| os_err(name, "setting up the TPACKET_V2 RX ring"))?;
                // Frames longer than a ring frame are also queued whole on the socket (the
                // ring frame then says TP_STATUS_COPY) instead of only being truncated.
                let one: libc::c_int = 1;
                setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_COPY_THRESH, &one)
                    .map_err(|_| os_err(name, "enabling PACKET_COPY_THRESH"))?;
            }
            RxRing::Blocks => {
                setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_VERSION, &TPACKET_V3)
                    .map_err(|_| os_err(name, "selecting TPACKET_V3"))?;
                let req = libc::tpacket_req3 {
                    tp_block_size: cfg.block_size,
                    tp_block_nr: cfg.block_nr,
                    tp_frame_size: frame_size,
                    tp_frame_nr: frame_nr,
                    tp_retire_blk_tov: cfg.retire_ms,
                    tp_sizeof_priv: 0,
                    tp_feature_req_word: 0,
                };
                setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_RX_RING, &req)
                    .map_err(|_| os_err(name, "setting up the TPACKET_V3 RX ring"))?;
            }
        }
        let len = cfg.block_size as usize * cfg.block_nr as usize;
        let ring = Ring::map(&fd, len).map_err(|error| PortError::Os {
            name: name.to_string(),
            what: "mapping the RX ring",
            error,
        })?;
        // Our own transmissions must not come back as input. Older kernels lack the option:
        // the per-frame `sll_pkttype` check below covers them.
        let one: libc::c_int = 1;
        let _ = setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, &one);
        // Transmit straight to the driver (veth has no queue anyway), unless told not to.
        if cfg.qdisc_bypass {
            let _ = setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_QDISC_BYPASS, &one);
        }

        // SAFETY: zeroed `sockaddr_ll` is a valid value; fields are then set.
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = idx;
        // SAFETY: `sll` is a valid sockaddr_ll and the length passed is its size.
        let rc = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&sll as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(os_err(name, "binding the packet socket"));
        }
        if cfg.promisc {
            let mreq = libc::packet_mreq {
                mr_ifindex: idx,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            setsockopt(&fd, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(|_| os_err(name, "enabling promiscuous mode"))?;
        }
        Ok(Iface {
            port: spec.port,
            name: name.to_string(),
            ring,
            fd,
            mode: cfg.rx_ring,
            block_size: cfg.block_size as usize,
            block_nr: cfg.block_nr as usize,
            frame_size: frame_size as usize,
            frame_nr: frame_nr as usize,
            slot: 0,
            cursor: None,
            tx: TxBatch::default(),
        })
    }

    /// The next received frame of this interface, if the ring holds one (never blocks).
    fn next_frame(&mut self, buf: &mut Vec<u8>, st: &mut LiveStats) -> Option<RxMeta> {
        match self.mode {
            RxRing::Frames => self.next_slot_frame(buf, st),
            RxRing::Blocks => self.next_block_frame(buf, st),
        }
    }

    /// Frame mode: the next ready ring frame, handed back to the kernel once copied out.
    fn next_slot_frame(&mut self, buf: &mut Vec<u8>, st: &mut LiveStats) -> Option<RxMeta> {
        loop {
            let off = self.slot * self.frame_size;
            let status = self.ring.load_status(off + V2_STATUS);
            if status & libc::TP_STATUS_USER == 0 {
                return None;
            }
            self.slot = (self.slot + 1) % self.frame_nr.max(1);
            let r = &self.ring;
            let fields = (
                r.u32_at(off + V2_LEN),
                r.u32_at(off + V2_SNAPLEN),
                r.u16_at(off + V2_MAC),
                r.u8_at(off + V2_PKTTYPE),
            );
            let copied = status & libc::TP_STATUS_COPY != 0;
            let sec = r.u32_at(off + V2_SEC).unwrap_or(0) as u64;
            let nsec = r.u32_at(off + V2_NSEC).unwrap_or(0) as u64;
            let tci = r.u16_at(off + V2_VLAN_TCI).unwrap_or(0);
            let tpid = r.u16_at(off + V2_VLAN_TPID).unwrap_or(0);
            let mut ok = false;
            if let (Some(len), Some(snap), Some(mac), Some(pkttype)) = fields {
                let outgoing = pkttype == libc::PACKET_OUTGOING;
                if copied {
                    // The whole frame waits on the socket queue, in ring order: take it even
                    // when it is skipped so the two stay in step.
                    ok = self.recv_queued(buf, len as usize) && !outgoing;
                    if ok {
                        st.copied += 1;
                    } else if !outgoing {
                        st.truncated += 1;
                    }
                } else if !outgoing {
                    if snap < len {
                        st.truncated += 1;
                    } else {
                        ok = r.copy_out(off + mac as usize, snap as usize, buf).is_some();
                    }
                }
            }
            self.ring
                .store_status(off + V2_STATUS, libc::TP_STATUS_KERNEL);
            if ok {
                return Some(self.finish_frame(buf, st, status, tci, tpid, sec, nsec));
            }
        }
    }

    /// Frame mode: read a frame the kernel queued whole on the socket (`TP_STATUS_COPY`) into
    /// `buf`; `len` is its length from the ring frame. Whether one was read.
    fn recv_queued(&self, buf: &mut Vec<u8>, len: usize) -> bool {
        buf.clear();
        buf.resize(len.max(1), 0);
        let rc = loop {
            // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the call's duration.
            let rc = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT | libc::MSG_TRUNC,
                )
            };
            if rc >= 0 || io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                break rc;
            }
        };
        if rc < 0 || rc as usize > buf.len() {
            buf.clear();
            return false;
        }
        buf.truncate(rc as usize);
        true
    }

    /// What every received frame gets: its VLAN tag back, its checksum completed, counted.
    #[allow(clippy::too_many_arguments)]
    fn finish_frame(
        &self,
        buf: &mut Vec<u8>,
        st: &mut LiveStats,
        status: u32,
        tci: u16,
        tpid: u16,
        sec: u64,
        nsec: u64,
    ) -> RxMeta {
        if status & libc::TP_STATUS_VLAN_VALID != 0 {
            // The kernel took the outer VLAN tag off into metadata: put it back, as libpcap
            // does for simple_switch, so the program parses the frame as sent.
            let tpid = if status & libc::TP_STATUS_VLAN_TPID_VALID != 0 && tpid != 0 {
                tpid
            } else {
                0x8100
            };
            insert_vlan_tag(buf, tpid, tci);
        }
        if status & libc::TP_STATUS_CSUMNOTREADY != 0 && complete_checksum(buf) {
            st.csum_completed += 1;
        }
        st.rx += 1;
        RxMeta {
            port: self.port,
            ts_ns: sec * 1_000_000_000 + nsec,
        }
    }

    /// Block mode: the next frame of the current block, taking and returning blocks.
    fn next_block_frame(&mut self, buf: &mut Vec<u8>, st: &mut LiveStats) -> Option<RxMeta> {
        loop {
            let boff = self.slot * self.block_size;
            let (left, off) = match self.cursor {
                Some((0, _)) => {
                    // Block consumed: give it back and move on.
                    self.ring
                        .store_status(boff + BLK_STATUS, libc::TP_STATUS_KERNEL);
                    self.slot = (self.slot + 1) % self.block_nr;
                    self.cursor = None;
                    continue;
                }
                Some(c) => c,
                None => {
                    let status = self.ring.load_status(boff + BLK_STATUS);
                    if status & libc::TP_STATUS_USER == 0 {
                        return None;
                    }
                    let n = self.ring.u32_at(boff + BLK_NUM_PKTS).unwrap_or(0);
                    let first = self.ring.u32_at(boff + BLK_FIRST).unwrap_or(0) as usize;
                    self.cursor = Some((n, boff + first));
                    continue;
                }
            };
            let r = &self.ring;
            let next = r.u32_at(off + H_NEXT).unwrap_or(0) as usize;
            // A malformed block (cannot happen with a sane kernel) is abandoned, not trusted.
            let left = if next == 0 { 0 } else { left - 1 };
            self.cursor = Some((left, off + next));
            let (Some(snap), Some(len), Some(status), Some(mac), Some(pkttype)) = (
                r.u32_at(off + H_SNAPLEN),
                r.u32_at(off + H_LEN),
                r.u32_at(off + H_STATUS),
                r.u16_at(off + H_MAC),
                r.u8_at(off + SLL_PKTTYPE),
            ) else {
                self.cursor = Some((0, 0));
                continue;
            };
            if pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            if snap < len {
                st.truncated += 1;
                continue;
            }
            if r.copy_out(off + mac as usize, snap as usize, buf).is_none() {
                self.cursor = Some((0, 0));
                continue;
            }
            let sec = r.u32_at(off + H_SEC).unwrap_or(0) as u64;
            let nsec = r.u32_at(off + H_NSEC).unwrap_or(0) as u64;
            let tci = r.u32_at(off + H_VLAN_TCI).unwrap_or(0) as u16;
            let tpid = r.u16_at(off + H_VLAN_TPID).unwrap_or(0);
            return Some(self.finish_frame(buf, st, status, tci, tpid, sec, nsec));
        }
    }

    /// Read (and so clear) the socket's pending error.
    fn take_error(&self) -> i32 {
        let mut err: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `err`/`len` are valid for writes of an int and its length.
        unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                (&mut err as *mut libc::c_int).cast(),
                &mut len,
            );
        }
        err
    }

    /// Send every queued frame with `sendmmsg` (frames the kernel refuses are counted and
    /// dropped, as a NIC would drop them).
    fn flush_tx(&mut self, st: &mut LiveStats) -> Result<(), PortError> {
        let n = self.tx.frames.len();
        if n == 0 {
            return Ok(());
        }
        let base = self.tx.data.as_mut_ptr();
        let mut iovs: Vec<libc::iovec> = self
            .tx
            .frames
            .iter()
            .map(|&(start, len)| libc::iovec {
                // SAFETY: `start` is an offset into `data` (recorded when the frame was queued).
                iov_base: unsafe { base.add(start) }.cast(),
                iov_len: len,
            })
            .collect();
        let mut msgs: Vec<libc::mmsghdr> = iovs
            .iter_mut()
            .map(|iov| {
                // SAFETY: an all-zero msghdr (no address, no control data) is valid.
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
                m
            })
            .collect();
        let mut done = 0;
        while done < n {
            // SAFETY: `msgs[done..]` are valid mmsghdrs whose iovecs point into `self.tx.data`,
            // all of which live (unmoved) until this function returns.
            let rc = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    msgs.as_mut_ptr().add(done),
                    (n - done) as libc::c_uint,
                    0,
                )
            };
            if rc < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EBADF) | Some(libc::ENOTSOCK) | Some(libc::EFAULT) => {
                        return Err(PortError::Os {
                            name: self.name.clone(),
                            what: "sending",
                            error: e,
                        })
                    }
                    // EMSGSIZE, ENOBUFS, ENETDOWN, ENXIO, EAGAIN...: drop this frame.
                    _ => {
                        st.tx_errors += 1;
                        done += 1;
                    }
                }
            } else {
                st.tx += rc as u64;
                done += (rc as usize).max(1);
            }
        }
        self.tx.frames.clear();
        self.tx.data.clear();
        Ok(())
    }
}

/// Live interfaces as a port set: see the module documentation.
pub struct LivePorts {
    specs: Vec<PortSpec>,
    ifaces: Vec<Iface>,
    cfg: LiveConfig,
    stop: Arc<AtomicBool>,
    next: usize,
    stats: LiveStats,
}

impl std::fmt::Debug for LivePorts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LivePorts")
            .field("specs", &self.specs)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl LivePorts {
    /// Open every interface (all must exist; the caller needs CAP_NET_RAW). `recv` blocks
    /// until a frame arrives and returns `None` once `stop` is set or SIGINT/SIGTERM arrived
    /// (after [`install_stop_signals`]).
    pub fn open(
        specs: &[PortSpec],
        cfg: LiveConfig,
        stop: Arc<AtomicBool>,
    ) -> Result<LivePorts, PortError> {
        let mut specs = specs.to_vec();
        specs.sort_by_key(|s| s.port);
        for w in specs.windows(2) {
            if w[0].port == w[1].port {
                return Err(PortError::DuplicatePort(w[0].port));
            }
        }
        // Check names first so a typo is reported before any socket is opened.
        for s in &specs {
            ifindex(s)?;
        }
        let ifaces = specs
            .iter()
            .map(|s| Iface::open(s, &cfg))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LivePorts {
            specs,
            ifaces,
            cfg,
            stop,
            next: 0,
            stats: LiveStats::default(),
        })
    }

    /// Counters so far.
    pub fn stats(&self) -> LiveStats {
        self.stats
    }

    /// Interfaces that are administratively down (they receive nothing), for a warning.
    pub fn down_interfaces(&self) -> Vec<String> {
        down(&self.specs)
    }

    fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || stop_requested()
    }

    fn flush_all(&mut self) -> Result<(), PortError> {
        for i in &mut self.ifaces {
            i.flush_tx(&mut self.stats)?;
        }
        Ok(())
    }
}

/// Which of these interfaces are administratively down (they receive nothing).
pub(crate) fn down(specs: &[PortSpec]) -> Vec<String> {
    specs
        .iter()
        .filter(|s| {
            std::fs::read_to_string(format!("/sys/class/net/{}/flags", s.name))
                .ok()
                .and_then(|t| u32::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok())
                .is_some_and(|f| f & libc::IFF_UP as u32 == 0)
        })
        .map(|s| s.name.clone())
        .collect()
}

impl PortIo for LivePorts {
    fn ports(&self) -> &[PortSpec] {
        &self.specs
    }

    /// The next frame of any interface (round robin), blocking in `poll()` while none is
    /// ready; queued transmissions are flushed before blocking. `None` once stopped.
    fn recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        let n = self.ifaces.len();
        loop {
            if self.stopping() {
                self.flush_all()?;
                return Ok(None);
            }
            for k in 0..n {
                let i = (self.next + k) % n;
                if let Some(m) = self.ifaces[i].next_frame(buf, &mut self.stats) {
                    self.next = (i + 1) % n;
                    return Ok(Some(m));
                }
            }
            self.flush_all()?;
            let mut fds: Vec<libc::pollfd> = self
                .ifaces
                .iter()
                .map(|i| libc::pollfd {
                    fd: i.fd.as_raw_fd(),
                    events: libc::POLLIN | libc::POLLERR,
                    revents: 0,
                })
                .collect();
            // SAFETY: `fds` is a valid array of `fds.len()` pollfds for the call's duration.
            let rc = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    self.cfg.poll_ms,
                )
            };
            if rc > 0 {
                for (i, p) in fds.iter().enumerate() {
                    if p.revents & libc::POLLERR != 0 {
                        // E.g. ENETDOWN when the interface goes down or is deleted: reading
                        // SO_ERROR clears it, so poll blocks again instead of spinning.
                        self.ifaces[i].take_error();
                        self.stats.iface_errors += 1;
                    }
                }
            }
            if rc < 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::EINTR) {
                    return Err(PortError::Os {
                        name: self
                            .specs
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(","),
                        what: "waiting for packets (poll)",
                        error: e,
                    });
                }
            }
        }
    }

    /// The next frame already in some interface's ring (round robin), without waiting: the
    /// run loop fills its batch with these after a blocking [`PortIo::recv`].
    fn try_recv(&mut self, buf: &mut Vec<u8>) -> Result<Option<RxMeta>, PortError> {
        let n = self.ifaces.len();
        if self.stopping() {
            return Ok(None);
        }
        for k in 0..n {
            let i = (self.next + k) % n;
            if let Some(m) = self.ifaces[i].next_frame(buf, &mut self.stats) {
                self.next = (i + 1) % n;
                return Ok(Some(m));
            }
        }
        Ok(None)
    }

    /// Queue a frame for `port`; a batch is sent when full, when the receive side goes idle,
    /// and on [`PortIo::flush`].
    fn send(&mut self, port: Port, _ts_ns: u64, data: &[u8]) -> Result<bool, PortError> {
        let Ok(i) = self.specs.binary_search_by_key(&port, |s| s.port) else {
            return Ok(false);
        };
        let ifc = &mut self.ifaces[i];
        let start = ifc.tx.data.len();
        ifc.tx.data.extend_from_slice(data);
        ifc.tx.frames.push((start, data.len()));
        if ifc.tx.frames.len() >= self.cfg.tx_batch.max(1) {
            ifc.flush_tx(&mut self.stats)?;
        }
        Ok(true)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.flush_all()
    }
}

/// Insert an 802.1Q/802.1ad tag (`tpid`, `tci`) after the two MAC addresses of `frame`
/// (frames shorter than 12 bytes are left alone).
pub fn insert_vlan_tag(frame: &mut Vec<u8>, tpid: u16, tci: u16) {
    if frame.len() < 12 {
        return;
    }
    let [a, b] = tpid.to_be_bytes();
    let [c, d] = tci.to_be_bytes();
    frame.splice(12..12, [a, b, c, d]);
}

/// Ones'-complement sum of `data` (big-endian 16-bit words, odd byte padded) added to `acc`.
fn csum_add(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        acc += u16::from_be_bytes([c[0], c[1]]) as u32;
        acc = (acc & 0xffff) + (acc >> 16);
    }
    if let [b] = chunks.remainder() {
        acc += (*b as u32) << 8;
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc
}

/// Complete the TCP or UDP checksum of a frame the kernel handed over with checksum offload
/// pending (`TP_STATUS_CSUMNOTREADY`: the field holds only the pseudo-header sum, as for a
/// NIC to finish). Handles Ethernet with up to two VLAN tags, IPv4 (unfragmented) and IPv6
/// (TCP/UDP as the first next header). Returns whether a checksum was written.
pub fn complete_checksum(frame: &mut [u8]) -> bool {
    let mut off = 12;
    let mut ethertype = match frame.get(off..off + 2) {
        Some(b) => u16::from_be_bytes([b[0], b[1]]),
        None => return false,
    };
    off += 2;
    for _ in 0..2 {
        if ethertype != 0x8100 && ethertype != 0x88a8 {
            break;
        }
        ethertype = match frame.get(off + 2..off + 4) {
            Some(b) => u16::from_be_bytes([b[0], b[1]]),
            None => return false,
        };
        off += 4;
    }
    let (proto, l4, end) = match ethertype {
        0x0800 => {
            let Some(ip) = frame.get(off..off + 20) else {
                return false;
            };
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
            if ip[0] >> 4 != 4 || ihl < 20 || total < ihl || frag != 0 {
                return false;
            }
            (ip[9], off + ihl, off + total)
        }
        0x86dd => {
            let Some(ip) = frame.get(off..off + 40) else {
                return false;
            };
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            (ip[6], off + 40, off + 40 + plen)
        }
        _ => return false,
    };
    let field = match proto {
        6 => l4 + 16,
        17 => l4 + 6,
        _ => return false,
    };
    if end > frame.len() || field + 2 > end {
        return false;
    }
    // The field already holds the folded pseudo-header sum: summing the segment with it in
    // place gives the full sum.
    let sum = csum_add(0, &frame[l4..end]);
    let mut c = !(sum as u16);
    if proto == 17 && c == 0 {
        c = 0xffff;
    }
    frame[field..field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent reference: checksum over pseudo-header + segment with a zero field.
    fn full_csum(src: &[u8], dst: &[u8], proto: u8, seg: &[u8]) -> u16 {
        let mut p = Vec::new();
        p.extend_from_slice(src);
        p.extend_from_slice(dst);
        if src.len() == 4 {
            p.extend_from_slice(&[0, proto]);
            p.extend_from_slice(&(seg.len() as u16).to_be_bytes());
        } else {
            p.extend_from_slice(&(seg.len() as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, proto]);
        }
        p.extend_from_slice(seg);
        let mut s: u64 = 0;
        for c in p.chunks(2) {
            s += u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]) as u64;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    /// What the kernel leaves in the field under offload: the folded pseudo-header sum.
    fn pseudo_partial(src: &[u8], dst: &[u8], proto: u8, len: usize) -> u16 {
        !full_csum(src, dst, proto, &vec![0; len])
    }

    fn udp4_frame(payload: &[u8], vlan: bool) -> (Vec<u8>, usize) {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let ip_off = f.len();
        let total = 20 + 8 + payload.len();
        f.extend_from_slice(&[
            0x45,
            0,
            (total >> 8) as u8,
            total as u8,
            0,
            1,
            0x40,
            0,
            64,
            17,
        ]);
        f.extend_from_slice(&[0, 0, 10, 0, 1, 1, 10, 0, 2, 2]);
        let udp_len = 8 + payload.len();
        f.extend_from_slice(&[
            0x30,
            0x39,
            0x1f,
            0x90,
            (udp_len >> 8) as u8,
            udp_len as u8,
            0,
            0,
        ]);
        f.extend_from_slice(payload);
        f.extend_from_slice(&[0xee; 5]); // Ethernet padding past the IP length
        (f, ip_off)
    }

    #[test]
    fn completes_offloaded_udp4_checksum_like_a_nic() {
        for (payload, vlan) in [(&b"hello tern"[..], false), (&b"odd"[..], true)] {
            let (mut f, ip) = udp4_frame(payload, vlan);
            let l4 = ip + 20;
            let seg_len = 8 + payload.len();
            let want = full_csum(
                &f[ip + 12..ip + 16],
                &f[ip + 16..ip + 20],
                17,
                &f[l4..l4 + seg_len],
            );
            let partial = pseudo_partial(&f[ip + 12..ip + 16], &f[ip + 16..ip + 20], 17, seg_len);
            f[l4 + 6..l4 + 8].copy_from_slice(&partial.to_be_bytes());
            assert!(complete_checksum(&mut f));
            assert_eq!(u16::from_be_bytes([f[l4 + 6], f[l4 + 7]]), want);
            assert_ne!(want, 0);
        }
    }

    #[test]
    fn completes_offloaded_tcp6_checksum() {
        let mut f = vec![0x02, 0, 0, 0, 0, 2, 0x02, 0, 0, 0, 0, 1, 0x86, 0xdd];
        let seg: Vec<u8> = (0..33u8).collect();
        let mut tcp = seg.clone();
        tcp[16] = 0;
        tcp[17] = 0;
        let src = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        let dst = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
        f.extend_from_slice(&[0x60, 0, 0, 0, 0, tcp.len() as u8, 6, 64]);
        f.extend_from_slice(&src);
        f.extend_from_slice(&dst);
        let l4 = f.len();
        f.extend_from_slice(&tcp);
        let want = full_csum(&src, &dst, 6, &tcp);
        let partial = pseudo_partial(&src, &dst, 6, tcp.len());
        f[l4 + 16..l4 + 18].copy_from_slice(&partial.to_be_bytes());
        assert!(complete_checksum(&mut f));
        assert_eq!(u16::from_be_bytes([f[l4 + 16], f[l4 + 17]]), want);
    }

    #[test]
    fn vlan_tag_goes_back_after_the_macs() {
        let mut f: Vec<u8> = (0..20).collect();
        insert_vlan_tag(&mut f, 0x8100, 0x1234);
        assert_eq!(&f[..12], &(0..12).collect::<Vec<u8>>()[..]);
        assert_eq!(&f[12..16], &[0x81, 0x00, 0x12, 0x34]);
        assert_eq!(&f[16..], &(12..20).collect::<Vec<u8>>()[..]);
        let mut short = vec![1, 2, 3];
        insert_vlan_tag(&mut short, 0x8100, 1);
        assert_eq!(short, vec![1, 2, 3]);
    }

    #[test]
    fn leaves_other_frames_alone() {
        let (mut f, ip) = udp4_frame(b"x", false);
        f[ip + 9] = 1; // ICMP
        let before = f.clone();
        assert!(!complete_checksum(&mut f));
        assert_eq!(f, before);
        // Fragment, truncated, non-IP: untouched, no panic.
        let (mut g, ip) = udp4_frame(b"x", false);
        g[ip + 7] = 8;
        assert!(!complete_checksum(&mut g));
        for n in 0..30 {
            let (mut h, _) = udp4_frame(b"abc", false);
            h.truncate(n);
            assert!(!complete_checksum(&mut h));
        }
        let mut arp = vec![0u8; 42];
        arp[12] = 0x08;
        arp[13] = 0x06;
        assert!(!complete_checksum(&mut arp));
    }

    #[test]
    fn missing_interface_is_named() {
        let specs = [PortSpec {
            port: 3,
            name: "tern-nope0".into(),
        }];
        let e = LivePorts::open(&specs, LiveConfig::default(), Arc::default()).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'tern-nope0'") && msg.contains("port 3"),
            "{msg}"
        );
        let long = [PortSpec {
            port: 1,
            name: "x".repeat(40),
        }];
        assert!(matches!(
            LivePorts::open(&long, LiveConfig::default(), Arc::default()),
            Err(PortError::NoInterface { port: 1, .. })
        ));
    }

    fn ip(args: &[&str]) -> bool {
        std::process::Command::new("ip")
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// Deletes a veth pair on drop (even on panic).
    struct Del(String);
    impl Drop for Del {
        fn drop(&mut self) {
            let _ = ip(&["link", "del", &self.0]);
        }
    }

    /// A fresh veth pair (up, IPv6 off) named after the process and `tag`, or `None` (with a
    /// "skipping" message) without root or `ip`.
    fn veth_pair(tag: &str) -> Option<(String, String, Del)> {
        let is_root = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .map(|l| l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false);
        let a = format!("tp{tag}a{}", std::process::id() % 100000);
        let b = format!("tp{tag}b{}", std::process::id() % 100000);
        if !is_root || !ip(&["link", "add", &a, "type", "veth", "peer", "name", &b]) {
            eprintln!("skipping: needs root and `ip` to create a veth pair");
            return None;
        }
        let del = Del(a.clone());
        for n in [&a, &b] {
            assert!(ip(&["link", "set", n, "up"]));
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{n}/disable_ipv6"), "1");
        }
        Some((a, b, del))
    }

    /// CPU time of the calling thread (ns).
    fn thread_cpu_ns() -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    }

    fn cfg(rx_ring: RxRing) -> LiveConfig {
        LiveConfig {
            rx_ring,
            ..LiveConfig::default()
        }
    }

    /// An interface deleted under a running port set makes its socket report an error once:
    /// `recv` keeps blocking in poll (no spinning) and still stops on the flag.
    #[test]
    fn deleted_interface_does_not_make_recv_spin() {
        deleted_interface(RxRing::Frames, "d");
        deleted_interface(RxRing::Blocks, "e");
    }

    fn deleted_interface(mode: RxRing, tag: &str) {
        let Some((a, b, del)) = veth_pair(tag) else {
            return;
        };
        let specs = [PortSpec { port: 1, name: a }, PortSpec { port: 2, name: b }];
        let stop = Arc::new(AtomicBool::new(false));
        let mut p = LivePorts::open(&specs, cfg(mode), stop.clone()).unwrap();
        drop(del);
        {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(1000));
                stop.store(true, Ordering::Relaxed);
            });
        }
        let cpu0 = thread_cpu_ns();
        let t0 = std::time::Instant::now();
        let mut buf = Vec::new();
        while p.recv(&mut buf).unwrap().is_some() {}
        let wall = t0.elapsed();
        let cpu = thread_cpu_ns() - cpu0;
        assert!(wall >= std::time::Duration::from_millis(900), "{wall:?}");
        assert!(cpu < 200_000_000, "recv spun: {cpu} ns of CPU in {wall:?}");
        assert!(p.stats().iface_errors >= 1, "{:?}", p.stats());
        // Sending to the vanished interface is counted, not fatal.
        assert!(p.send(1, 0, &[0u8; 60]).unwrap());
        p.flush().unwrap();
        assert_eq!(p.stats().tx_errors, 1);
    }

    /// Frames sent on one end of a veth pair arrive on the other through the ring (root only;
    /// skipped elsewhere), in both ring modes.
    #[test]
    fn veth_pair_round_trip_when_root() {
        round_trip(RxRing::Frames, "r");
        round_trip(RxRing::Blocks, "s");
    }

    fn round_trip(mode: RxRing, tag: &str) {
        let Some((a, b, _del)) = veth_pair(tag) else {
            return;
        };
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
        let stop = Arc::new(AtomicBool::new(false));
        let mut p = LivePorts::open(&specs, cfg(mode), stop.clone()).unwrap();
        let mut frames = Vec::new();
        for k in 0..100u8 {
            let mut f = vec![
                0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x88, 0xb5, k,
            ];
            f.resize(60 + k as usize, k);
            // Every third frame VLAN-tagged (the receiving kernel strips the tag into metadata;
            // it must come back), one of them double-tagged.
            if k % 3 == 0 {
                insert_vlan_tag(&mut f, 0x8100, 0x2000 | k as u16);
            }
            if k == 30 {
                insert_vlan_tag(&mut f, 0x88a8, 7);
            }
            assert!(p.send(1, 0, &f).unwrap());
            frames.push(f);
        }
        assert!(!p.send(9, 0, &frames[0]).unwrap());
        p.flush().unwrap();
        let mut got = Vec::new();
        let mut buf = Vec::new();
        // A safety net: a lost frame ends the wait after 5 s instead of hanging the test.
        {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(5));
                stop.store(true, Ordering::Relaxed);
            });
        }
        while let Some(m) = p.recv(&mut buf).unwrap() {
            // Only our test frames (ethertype 0x88b5 after any tags), never our own sends.
            let mut et = 12;
            while matches!(buf.get(et..et + 2), Some([0x81, 0x00] | [0x88, 0xa8])) {
                et += 4;
            }
            if buf.get(et..et + 2) == Some(&[0x88, 0xb5]) {
                assert_eq!(m.port, 2, "outgoing frame seen as input");
                got.push(buf.clone());
                if got.len() == frames.len() {
                    break;
                }
            }
        }
        assert_eq!(got, frames);
        assert_eq!(p.stats().tx, 100);
        // Once stopped, recv ends (within a poll timeout) instead of blocking forever.
        stop.store(true, Ordering::Relaxed);
        assert_eq!(p.recv(&mut buf).unwrap(), None);
    }

    /// Frame mode on a tiny ring (4 frames of 2 KiB): one frame at a time wraps the ring many
    /// times; frames longer than a ring frame (a 9000-byte MTU) arrive whole through the socket
    /// queue, VLAN tag and all, in order with the short ones around them.
    #[test]
    fn frame_ring_wraps_and_takes_long_frames_whole() {
        let Some((a, b, _del)) = veth_pair("f") else {
            return;
        };
        for n in [&a, &b] {
            assert!(ip(&["link", "set", n, "mtu", "9000"]));
        }
        let specs = [PortSpec { port: 1, name: a }, PortSpec { port: 2, name: b }];
        let stop = Arc::new(AtomicBool::new(false));
        let small = LiveConfig {
            rx_ring: RxRing::Frames,
            block_size: 4096,
            block_nr: 2,
            frame_size: 2048,
            ..LiveConfig::default()
        };
        let mut p = LivePorts::open(&specs, small, stop.clone()).unwrap();
        {
            let stop = stop.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(5));
                stop.store(true, Ordering::Relaxed);
            });
        }
        let mut buf = Vec::new();
        let mut sent = Vec::new();
        let mut got = Vec::new();
        for k in 0..24u16 {
            // Every fourth frame is 8000 bytes (past a 2 KiB ring frame), some of them tagged;
            // the short ones just fit (1900 bytes + 66 of header <= 2048).
            let len = if k % 4 == 1 { 8000 } else { 1900 - k as usize };
            let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x88, 0xb5];
            f.extend((0..len - 14).map(|i| (i as u16 ^ k) as u8));
            if k % 8 == 1 {
                insert_vlan_tag(&mut f, 0x8100, 0x0100 | k);
            }
            assert!(p.send(1, 0, &f).unwrap());
            // Two frames in flight at a time, so the ring holds more than one at once.
            sent.push(f);
            if k % 2 == 1 {
                p.flush().unwrap();
                while got.len() < sent.len() {
                    let Some(m) = p.recv(&mut buf).unwrap() else {
                        panic!("stopped after {} of {} frames", got.len(), sent.len());
                    };
                    let mut et = 12;
                    while matches!(buf.get(et..et + 2), Some([0x81, 0x00])) {
                        et += 4;
                    }
                    if buf.get(et..et + 2) == Some(&[0x88, 0xb5]) {
                        assert_eq!(m.port, 2);
                        got.push(buf.clone());
                    }
                }
            }
        }
        assert_eq!(got.len(), sent.len());
        for (i, (g, s)) in got.iter().zip(&sent).enumerate() {
            assert!(g == s, "frame {i}: got {} bytes, sent {}", g.len(), s.len());
        }
        let st = p.stats();
        assert_eq!(st.copied, 6, "{st:?}");
        assert_eq!(st.truncated, 0, "{st:?}");
    }

    /// `try_recv` hands over what the rings hold without waiting, in order, and `None` at
    /// once when they are empty (a run loop's batch never waits with packets in hand); with
    /// `qdisc_bypass` off the frames go through the interface's queueing discipline and all
    /// arrive the same (both ring modes).
    #[test]
    fn try_recv_drains_the_ring_without_waiting() {
        for (mode, bypass, tag) in [
            (RxRing::Frames, true, "t"),
            (RxRing::Frames, false, "u"),
            (RxRing::Blocks, false, "v"),
        ] {
            let Some((a, b, _del)) = veth_pair(tag) else {
                return;
            };
            let specs = [PortSpec { port: 1, name: a }, PortSpec { port: 2, name: b }];
            let stop = Arc::new(AtomicBool::new(false));
            let c = LiveConfig {
                qdisc_bypass: bypass,
                ..cfg(mode)
            };
            let mut p = LivePorts::open(&specs, c, stop).unwrap();
            let mut buf = Vec::new();
            // Nothing sent yet: no frame, and no waiting (not even one poll timeout).
            let t0 = std::time::Instant::now();
            while let Some(m) = p.try_recv(&mut buf).unwrap() {
                // Stray frames of the new interfaces (none of ours yet).
                assert_ne!(buf.get(12..14), Some(&[0x88, 0xb5][..]), "{m:?}");
            }
            assert!(t0.elapsed() < std::time::Duration::from_millis(50));
            let frames: Vec<Vec<u8>> = (0..300u16)
                .map(|k| {
                    let mut f = vec![0x02, 0, 0, 0, 0, 0xbb, 0x02, 0, 0, 0, 0, 0xaa, 0x88, 0xb5];
                    f.extend_from_slice(&k.to_be_bytes());
                    f.resize(60 + k as usize % 50, k as u8);
                    f
                })
                .collect();
            for f in &frames {
                assert!(p.send(1, 0, f).unwrap());
            }
            p.flush().unwrap();
            let mut got = Vec::new();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while got.len() < frames.len() && std::time::Instant::now() < deadline {
                match p.try_recv(&mut buf).unwrap() {
                    Some(m) if buf.get(12..14) == Some(&[0x88, 0xb5][..]) => {
                        assert_eq!(m.port, 2, "outgoing frame seen as input");
                        got.push(buf.clone());
                    }
                    Some(_) => {}
                    // Block mode hands frames over when a block retires (≈ 1-4 ms).
                    None => std::thread::sleep(std::time::Duration::from_millis(1)),
                }
            }
            assert_eq!(got.len(), frames.len(), "{mode:?}, bypass {bypass}");
            assert!(got == frames, "{mode:?}, bypass {bypass}: frames differ");
            assert_eq!(p.stats().tx, 300);
            assert_eq!(p.stats().tx_errors, 0);
        }
    }
}
